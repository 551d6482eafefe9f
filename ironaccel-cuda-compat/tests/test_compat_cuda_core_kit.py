"""The cuda.core compat's GraphBuilder and Graph without a GPU: the checks made before any driver call.

The captures themselves (conditionals, embed, callbacks, update) run in cuda.core's own
graph tests on the H200 (tools/run_cuda_core_tests.py) and in ironaccel-cuda's tests/graphs/test_graph_capture.py.
"""

from __future__ import annotations

import ctypes

import pytest


@pytest.fixture
def gb():
    from ironaccel_cuda_compat.cuda_core.graph._graph_builder import GraphBuilder

    builder = GraphBuilder._init(stream=object())  # never reaches the driver in these tests
    yield builder
    builder._closed = True
    builder._stream = None


def test_a_builder_that_never_began_refuses_what_needs_a_capture(gb):
    from ironaccel_cuda_compat.cuda_core.graph import GraphBuilder

    with pytest.raises(RuntimeError, match="before begin_building"):
        _ = gb.graph_definition
    with pytest.raises(RuntimeError, match="^Graph builder must be building before it can be split."):
        gb.split(2)
    with pytest.raises(RuntimeError, match="^Graph has not finished building."):
        gb.complete()
    with pytest.raises(RuntimeError, match="^Graph has not finished building."):
        gb.debug_dot_print("/nonexistent/graph.dot")
    with pytest.raises(RuntimeError, match="Cannot add callback when graph is not being built"):
        gb.callback(lambda: None)
    with pytest.raises(RuntimeError, match="^Graph builder is not building."):
        gb.end_building()
    with pytest.raises(ValueError, match="^Unsupported build mode: sideways"):
        gb.begin_building("sideways")
    with pytest.raises(ValueError, match="^Unsupported build mode: None"):  # as cuda.core: None is no default
        gb.begin_building(None)  # type: ignore[arg-type]
    assert gb.is_building is False and gb.is_join_required is False
    with pytest.raises(TypeError, match="GraphBuilder"):
        gb.embed(object())
    with pytest.raises(TypeError, match="All arguments must be GraphBuilder instances"):
        GraphBuilder.join(gb, "not a builder")
    with pytest.raises(ValueError, match="^Must join with at least two graph builders"):
        GraphBuilder.join(gb)


def test_conditional_builders_take_only_conditions(gb):
    with pytest.raises(TypeError, match="condition must be a GraphCondition object"):
        gb.if_then(1)
    with pytest.raises(TypeError, match="condition must be a GraphCondition object"):
        gb.if_else(None)
    with pytest.raises(TypeError, match="condition must be a GraphCondition object"):
        gb.while_loop("c")
    with pytest.raises(ValueError, match="count must be a positive int"):
        gb.switch(None, 0)
    with pytest.raises(TypeError, match="default_value must be an int"):
        gb.create_condition(default_value="one")
    with pytest.raises(ValueError, match="unsigned 32-bit"):
        gb.create_condition(default_value=-1)


def test_a_closed_builder_says_so(gb):
    gb.close()
    gb.close()
    assert gb.is_closed
    for use in (lambda: gb.stream, lambda: gb.graph_definition, gb.complete, lambda: gb.begin_building(),
                lambda: gb.callback(print), lambda: gb.create_condition()):
        with pytest.raises(RuntimeError, match="^Graph builder has been closed."):
            use()


def test_graph_update_checks_its_source(gb):
    from ironaccel_cuda_compat.cuda_core.graph import Graph

    graph = Graph._init(None)
    with pytest.raises(TypeError, match="expected GraphBuilder or GraphDefinition, got str"):
        graph.update("not a graph")
    with pytest.raises(ValueError, match="^Graph has not finished building."):
        graph.update(gb)
    gb.close()
    with pytest.raises(ValueError, match="^Source graph builder has been closed."):
        graph.update(gb)


def test_conditions_compare_by_handle_and_pass_as_kernel_arguments():
    from ironaccel_cuda_compat.cuda_core._kernel_arg_handler import convert_arg
    from ironaccel_cuda_compat.cuda_core.graph import GraphCondition as cls
    with pytest.raises(RuntimeError):
        cls()
    a, b, c = cls._init(0x1234, 7), cls._init(0x1234, 7), cls._init(0x99, 7)
    assert a == b and hash(a) == hash(b) and a != c
    assert int(a.handle) == 0x1234 and int(a) == 0x1234
    assert convert_arg(a) == 0x1234 and convert_arg(c) == 0x99
    assert "0x1234" in repr(a)


def test_ctypes_and_python_callbacks_are_told_apart(gb):
    callback_type = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
    from ironaccel_cuda_compat.cuda_core.graph._graph_builder import CFuncPtr

    assert isinstance(callback_type(lambda data: None), CFuncPtr)
    assert not isinstance(print, CFuncPtr)


def test_complete_options_reach_the_instantiate_flags():
    from ironaccel_cuda_compat.cuda_core.graph import GraphCompleteOptions
    from ironaccel_cuda_compat.cuda_core.graph._graph_builder import _instantiate

    seen = {}

    class FakeGraph:
        def instantiate(self, **flags):
            seen.update(flags)
            return object()

    options = GraphCompleteOptions(auto_free_on_launch=True, use_node_priority=True)
    graph = _instantiate(FakeGraph(), options)
    assert seen == {"auto_free_on_launch": True, "device_launch": False, "use_node_priority": True}
    assert graph.is_closed is False
    seen.clear()
    _instantiate(FakeGraph(), None)
    assert seen == {}


def test_update_errors_name_the_driver_reason():
    from ironaccel_cuda_compat.cuda_core._utils.cuda_utils import CUDAError
    from ironaccel_cuda_compat.cuda_core.graph._graph_builder import update_error
    from ironaccel_cuda.errors import DriverError

    exc = DriverError("cuda", "cuGraphExecUpdate", 910, "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE",
                      "update result CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED; re-instantiate instead")
    err = update_error(exc)
    assert isinstance(err, CUDAError)
    assert str(err).startswith("Graph update failed: ")
    assert str(err).endswith("(CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED)")
    assert "topology" in str(err)
