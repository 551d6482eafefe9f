"""One error hierarchy for every backend.

Every error carries the backend and, where one is involved, the operation
(`op="cuMemAllocAsync"`), so a log line or an agent reading a traceback knows
what failed without guessing.  The classes also subclass the built-in that fits
(`MemoryError`, `ValueError`, `RuntimeError`, ...), so existing `except`
clauses keep working.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "IronAccelError",
    "NotAvailable",
    "PluginError",
    "DuplicateBackend",
    "DriverError",
    "OutOfMemory",
    "InvalidArgument",
    "InvalidState",
    "ClosedError",
    "CompileError",
    "Unsupported",
    "Timeout",
]


class IronAccelError(Exception):
    """Base of every ironaccel error.

    `backend` names the backend ("cuda", "vulkan", ...); `op` the driver or
    library operation that failed, when there is one.
    """

    def __init__(self, message: str, *, backend: str | None = None, op: str | None = None):
        super().__init__(message)
        self.message = message
        self.backend = backend
        self.op = op

    def __str__(self) -> str:
        where = ": ".join(str(part) for part in (self.backend, self.op) if part)
        return f"{where}: {self.message}" if where else self.message


class NotAvailable(IronAccelError, RuntimeError):
    """A backend cannot be used here, and why.

    `reason` says what was tried and what happened (binding missing, library
    not found, loader present but no driver, wrong OS); `fix` says what to do
    (the distribution to pip install, the library to provide); `library` and
    `searched` name the vendor library and the places it was looked for;
    `env_var` is the variable that skips the backend.  The message ends with
    how to skip it (``skip it with IRONACCEL_DISABLE=cuda``) unless `named`:
    the caller asked for this backend by name, so skipping it is no answer.
    """

    def __init__(
        self,
        backend: str,
        reason: str,
        *,
        fix: str | None = None,
        library: str | None = None,
        searched: Sequence[str] = (),
        code: int | None = None,
        code_name: str | None = None,
        named: bool = False,
    ):
        self.reason = reason
        self.fix = fix
        self.library = library
        self.searched = tuple(searched)
        self.code = code
        self.code_name = code_name
        self.env_var = "IRONACCEL_DISABLE"
        parts = [reason]
        if fix:
            parts.append(f"fix: {fix}")
        if not named:
            parts.append(f"skip it with {self.env_var}={backend}")
        super().__init__("; ".join(parts), backend=backend)


class PluginError(IronAccelError):
    """A plugin distribution failed to load, register or probe.

    `distribution` and `version` name the distribution (either may be None for
    an in-process plugin), `stage` is one of "import", "hook", "register",
    "contract" (it targets a plugin API this core cannot load), "factory",
    "probe", "refresh"; `detail` is what went wrong, without the
    "plugin ... failed at ..." prefix.
    """

    def __init__(
        self,
        message: str,
        *,
        distribution: str | None,
        version: str | None,
        stage: str,
        backend: str | None = None,
    ):
        self.distribution = distribution
        self.version = version
        self.stage = stage
        self.detail = message
        who = " ".join(part for part in (distribution, version) if part) or "an in-process plugin"
        super().__init__(f"plugin {who} failed at {stage}: {message}", backend=backend)


class DuplicateBackend(PluginError):
    """Two distributions claim the same backend name.

    `claimants` names both distributions in the order they registered; the
    error is the second's (`distribution`, `version`).
    """

    def __init__(self, backend: str, first: str, second: str, *, first_version: str | None = None,
                 second_version: str | None = None):
        self.claimants = (first, second)
        both = " and ".join(" ".join(p for p in pair if p)
                            for pair in ((first, first_version), (second, second_version)))
        super().__init__(
            f"backend {backend!r} is claimed by both {both}; uninstall one or choose one with IRONACCEL_PLUGINS",
            distribution=second,
            version=second_version,
            stage="register",
            backend=backend,
        )


class DriverError(IronAccelError, RuntimeError):
    """A driver or library call returned an error.

    `op` is the call (`"cuLaunchKernel"`), `code` its numeric result and
    `code_name` the symbolic name (`"CUDA_ERROR_INVALID_VALUE"`); `detail` is the
    driver's own message, when it gives one.
    """

    def __init__(
        self,
        backend: str,
        op: str,
        code: int | None = None,
        code_name: str | None = None,
        detail: str | None = None,
    ):
        self.code = code
        self.code_name = code_name
        self.detail = detail
        if code is None:
            text = detail or "failed"
        else:
            text = f"{code_name or 'error'} ({code})"
            if detail:
                text += f": {detail}"
        super().__init__(text, backend=backend, op=op)


class OutOfMemory(DriverError, MemoryError):
    """The device (or pinned host memory) ran out."""


class InvalidArgument(DriverError, ValueError):
    """Bad input: rejected by ironaccel before the driver, or by the driver.

    When ironaccel rejects it first, `code` is None and `detail` says what is
    wrong; `op` still names the operation the input was meant for.
    """


class InvalidState(DriverError):
    """The object is not in a state where the operation can run."""


class ClosedError(InvalidState, ValueError):
    """Use of a closed buffer, stream, event, module or device."""

    def __init__(self, backend: str, op: str, what: str):
        super().__init__(backend, op, detail=f"{what} is closed")


class CompileError(DriverError):
    """Runtime compilation failed; `log` holds the compiler's output."""

    def __init__(
        self,
        backend: str,
        op: str,
        log: str,
        code: int | None = None,
        code_name: str | None = None,
    ):
        self.log = log
        super().__init__(backend, op, code, code_name, detail=log.strip() or "compilation failed")


class Unsupported(IronAccelError, NotImplementedError):
    """The backend, driver or plugin version does not offer this operation."""

    def __init__(self, backend: str, op: str, why: str):
        super().__init__(why, backend=backend, op=op)


class Timeout(IronAccelError, TimeoutError):
    """A wait ran past its timeout; the work goes on and may be waited for again.

    `timeout` is the number of seconds that was given.
    """

    def __init__(self, backend: str, op: str, timeout: float, what: str = "the work"):
        self.timeout = timeout
        super().__init__(f"{what} did not finish within {timeout:g} s", backend=backend, op=op)
