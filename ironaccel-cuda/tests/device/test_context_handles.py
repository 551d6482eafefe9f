"""Contexts by handle: create, push, pop, attach, destroy and the primary context's retains, as CUcontext addresses
on the calling thread's driver stack, for code that keeps a context stack of its own; and their bad input."""

from __future__ import annotations

import threading

import pytest
from helpers import FAKE

import ironaccel_cuda as cu
from ironaccel import InvalidArgument, InvalidState

pytestmark = pytest.mark.backend("cuda")


def test_a_created_context_is_current_until_popped_and_gone_after_destroy(dev):
    cu.init_driver()
    dev.bind()
    primary = cu.current_context_handle()
    ctx = cu.create_context(0, sched="blocking_sync", map_host=True)
    assert cu.current_context_handle() == ctx and cu.current_device_ordinal() == 0
    if not FAKE:  # the fake driver's created contexts are the primary one
        assert ctx != primary
    p = cu.device_alloc(256)  # work in it: memory of the created context
    cu.device_free(p)
    assert cu.pop_context() == ctx
    assert cu.current_context_handle() == primary
    cu.push_context(ctx)
    assert cu.current_context_handle() == ctx
    cu.destroy_context(ctx)  # the current one: the driver pops it
    assert cu.current_context_handle() == primary


def test_attach_raises_the_usage_count_detach_lowers(dev):
    dev.bind()
    ctx = cu.create_context(0)
    try:
        attached = cu.attach_context()
        assert attached == ctx
        cu.detach_context(attached)  # the count back to one: the context lives on, still current
        assert cu.current_context_handle() == ctx
    finally:
        cu.destroy_context(ctx)


def test_the_primary_context_is_retained_not_made_current(dev):
    dev.bind()
    primary = cu.current_context_handle()
    seen = []

    def other_thread():
        handle = cu.retain_primary_context(0)
        seen.append((handle, cu.current_context_handle()))
        cu.push_context(handle)
        seen.append(cu.current_context_handle())
        assert cu.pop_context() == handle
        cu.release_primary_context(0)

    t = threading.Thread(target=other_thread)
    t.start()
    t.join()
    assert seen == [(primary, 0), primary]  # the device's one primary context, current only once pushed
    assert cu.current_context_handle() == primary  # this thread's stack is its own


def test_shared_memory_config_of_the_current_context(dev):
    dev.bind()
    config = cu.current_context_shared_memory_config()
    assert config in ("default", "four_byte", "eight_byte")
    cu.set_current_context_shared_memory_config(config)
    assert cu.current_context_shared_memory_config() == config
    with pytest.raises(InvalidArgument) as info:
        cu.set_current_context_shared_memory_config("sixteen_byte")
    assert info.value.op == "cuCtxSetSharedMemConfig"


def test_context_handle_bad_input(dev):
    cases = [
        (lambda: cu.create_context(-1), "cuCtxCreate"),
        (lambda: cu.create_context("0"), "cuCtxCreate"),
        (lambda: cu.create_context(True), "cuCtxCreate"),
        (lambda: cu.create_context(0, sched="sometimes"), "cuCtxCreate"),
        (lambda: cu.create_context(0, map_host=1), "cuCtxCreate"),
        (lambda: cu.destroy_context(0), "cuCtxDestroy"),
        (lambda: cu.push_context(-1), "cuCtxPushCurrent"),
        (lambda: cu.push_context(1 << 64), "cuCtxPushCurrent"),
        (lambda: cu.push_context(None), "cuCtxPushCurrent"),
        (lambda: cu.detach_context("ctx"), "cuCtxDetach"),
        (lambda: cu.retain_primary_context(-1), "cuDevicePrimaryCtxRetain"),
        (lambda: cu.release_primary_context(1.0), "cuDevicePrimaryCtxRelease"),
    ]
    for bad, op in cases:
        with pytest.raises(InvalidArgument) as info:
            bad()
        assert info.value.op == op and info.value.code is None  # refused before the driver
    with pytest.raises(InvalidArgument) as info:  # a device the driver does not have: its own answer
        cu.create_context(cu.device_count() + 3)
    assert info.value.op == "cuCtxCreate" and info.value.code == 101  # CUDA_ERROR_INVALID_DEVICE
    failures = []

    def no_context():
        try:
            cu.pop_context()
        except InvalidState as exc:
            failures.append(exc)

    t = threading.Thread(target=no_context)
    t.start()
    t.join()
    assert len(failures) == 1 and failures[0].code == 201  # CUDA_ERROR_INVALID_CONTEXT: nothing to pop
