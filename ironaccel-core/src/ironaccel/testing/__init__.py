"""Conformance kit for ironaccel backends, shipped in the wheel.

* `ironaccel.testing.pytest_plugin` -- loaded by pytest automatically: the
  ``backend(name)`` marker, the ``require_backend`` fixture, IRONACCEL_REQUIRE.
* `ironaccel.testing.conformance` -- `BackendConformance` and
  `ComputeDeviceConformance`, adopted by subclassing.
* `ironaccel.testing.double` -- an in-memory backend for tests and as an example.
"""
