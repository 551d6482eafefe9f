# Binding the driver table, the error path, the current context, and the driver calls cold code makes
# through this module (so that they too are one C call).

# release kinds of a buffer
cdef enum:
    K_NONE = 0
    K_ASYNC = 1
    K_SYNC = 2
    K_POOL = 3
    K_IMPORTED = 4

RELEASE_FREE_ASYNC = K_ASYNC
RELEASE_FREE_SYNC = K_SYNC
RELEASE_IMPORTED = K_IMPORTED

cdef bint _disabled = False
cdef object _disabled_reason = ""
cdef object _bind_lock = threading.Lock()
cdef bint _bound = False

ENTRY_POINTS = tuple((ia_names[i].decode(), ia_abi[i]) for i in range(IA_N_ENTRY_POINTS))
"""(name, ABI version) of every driver entry point this module calls, from entry_points.h."""


def _bind_driver():
    """Look up every entry point (after cuInit); NotAvailable says why not.  Missing ones fail when called."""
    global _bound
    from . import _driver

    cdef void* addrs[64]
    cdef int i
    if IA_N_ENTRY_POINTS > 64:
        raise RuntimeError("the entry-point table outgrew _bind_driver's array")
    with _bind_lock:
        if _bound or _disabled:
            return
        drv = _driver.driver()  # cuInit, or NotAvailable / the fork error
        flags = drv.CUdriverProcAddress_flags
        ptds = os.environ.get("CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM")  # as cuda.bindings reads it
        mode = flags.CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM if ptds else flags.CU_GET_PROC_ADDRESS_LEGACY_STREAM
        err, version = drv.cuDriverGetVersion()
        version = 1 << 30 if err else int(version)  # no version known: ask for every entry point, as before
        for i in range(IA_N_ENTRY_POINTS):
            if ia_abi[i] > version:
                # Asked for a newer ABI than it knows, a driver hands back its older prototype (a 12.8 driver's
                # cuMemcpyBatchAsync takes a failIdx argument more): left unbound, the call is Unsupported.
                addrs[i] = NULL
                continue
            res = drv.cuGetProcAddress(ia_names[i], ia_abi[i], mode)
            addrs[i] = NULL if res[0] else <void*><uintptr_t>int(res[1])
        ia_table_install(addrs)
        _bound = True


cdef str _op_name(int op):
    return ia_names[op].decode()


cdef int _recover(uintptr_t stream) except -1:
    """After CUDA_ERROR_INVALID_CONTEXT (no current context) or CUDA_ERROR_INVALID_VALUE (another device's
    context current, seen on a two-GPU host): make `stream`'s context current; 1 to retry."""
    global ia_tls_ctx
    cdef CUcontext ctx = NULL
    cdef CUcontext cur = NULL
    if cuStreamGetCtx(<CUstream>stream, &ctx) != 0:
        return 0
    if cuCtxGetCurrent(&cur) == 0 and cur == ctx:
        return 0  # already current: retrying would not help
    if cuCtxSetCurrent(ctx) != 0:
        return 0
    ia_tls_ctx = <uintptr_t>ctx
    return 1


cdef int _again_named(int err, str op, uintptr_t stream, bint has_stream) except -1:
    """Cold: returns 0 when the caller should retry the call, else raises the typed error naming `op`."""
    if err == IA_UNBOUND:
        _bind_driver()
        return 0
    if err == IA_DISABLED:
        raise _errors.InvalidState(_errors.BACKEND, op, detail=_disabled_reason)
    if err == IA_MISSING:
        raise _errors.Unsupported(_errors.BACKEND, op, f"this driver has no {op} (cuGetProcAddress found none)")
    if has_stream and (err == INVALID_CONTEXT or err == INVALID_VALUE) and _recover(stream):
        return 0
    if err == OUT_OF_MEMORY and (op == "cuMemAllocAsync" or op == "cuMemAllocFromPoolAsync"):
        from ._driver import trim_after_oom
        trim_after_oom()
    raise _errors.driver_error(err, op)


cdef inline int _again(int err, int op, uintptr_t stream, bint has_stream) except -1:
    return _again_named(err, _op_name(op), stream, has_stream)


# -- context ------------------------------------------------------------------------

cdef int _bind_ctx(uintptr_t ctx) except -1:
    global ia_tls_ctx
    cdef int err
    while True:
        err = cuCtxSetCurrent(<CUcontext>ctx)
        if err == 0:
            break
        _again(err, IA_cuCtxSetCurrent, 0, False)
    ia_tls_ctx = ctx
    return 0


cdef inline int _ensure_ctx(uintptr_t ctx) except -1:
    if ia_tls_ctx != ctx:
        _bind_ctx(ctx)
    return 0


def bind(ctx):
    """Make `ctx` current on this thread (always calls cuCtxSetCurrent)."""
    _bind_ctx(<uintptr_t>int(ctx))


def ensure(ctx):
    """Make `ctx` current unless this thread already made it current through us."""
    _ensure_ctx(<uintptr_t>int(ctx))


def forget_current():
    """This thread's current context changed behind the cache (a push, a pop, a destroy): the next call that
    needs a context sets it again."""
    global ia_tls_ctx
    ia_tls_ctx = 0


# -- streams and events ---------------------------------------------------------------

# Set by every stream-ordered free of ours: the next stream or event synchronize then really
# calls the driver, which is where a pool trims itself down to its release threshold (a query
# that finds the stream idle would skip that, and a threshold of 0 would keep all its memory).
cdef bint _trim_pending = False


# -- fenced waits (fence.h): a busy stream's wait ends on a word the GPU writes after its work ----------------
# 0: no page yet, 1: on, -1: off (IRONACCEL_CUDA_FENCE_SPIN_US=0, no stream memops, no device mapping).
cdef int _fence_state = 0
# Set when a host function is queued (launch_host_func, note_host_func), cleared by the next cuStreamSynchronize
# that succeeds (_stream_sync, _stream_drain): the wait after one takes cuStreamSynchronize.  A fence write queued
# behind a host function runs only after the driver's callback thread has signalled it, a GPU round trip more:
# with fenced waits the host callback row of bench/run.py was slower.
cdef bint _host_fn_queued = False
cdef object _fence_lock = threading.Lock()

cdef extern from "<stdlib.h>" nogil:
    int posix_memalign(void** memptr, size_t alignment, size_t size)


cdef int _fence_page(uintptr_t s) except -1:
    """Cold: give this thread a fence word, adding a page if none is free (1), or turn fenced waits off (0).

    A page is the process's own memory, registered portable and device-mapped in the primary context of the
    stream's device and kept for the life of the process, like the staging buffers: every context of the
    process can then write it, and reading it never touches freed memory.
    """
    global _fence_state, ia_tls_ctx
    cdef void* page = NULL
    cdef CUcontext ctx = NULL
    cdef bint registered = False
    if not _settings_read:
        _read_settings()
    if _fence_spin_ns <= 0:
        _fence_state = -1
        return 0
    with _fence_lock:
        if ia_fence_ready():
            return 1
        if cuStreamGetCtx(<CUstream>s, &ctx) != 0:
            return 0  # the wait reports what is wrong with the stream
        from ._driver import call, driver
        from .device import Device

        d = driver()
        try:
            call("cuCtxPushCurrent", d.CUcontext(<uintptr_t>ctx))
            try:
                ordinal = int(call("cuCtxGetDevice"))
            finally:
                call("cuCtxPopCurrent")
            if posix_memalign(&page, IA_FENCE_PAGE, IA_FENCE_PAGE) != 0:
                raise MemoryError("fence page")
            memset(page, 0, IA_FENCE_PAGE)
            call("cuCtxPushCurrent", Device(ordinal)._state.ctx)
            try:
                call("cuMemHostRegister", <uintptr_t>page, IA_FENCE_PAGE, 3)  # CU_MEMHOSTREGISTER_PORTABLE | _DEVICEMAP
                registered = True
                if int(call("cuMemHostGetDevicePointer", <uintptr_t>page, 0)) != <uintptr_t>page:
                    raise ValueError("the device address of a registered page is not its host address")
            except Exception:
                if registered and call("cuMemHostUnregister", <uintptr_t>page) is None:
                    registered = False
                raise
            finally:
                call("cuCtxPopCurrent")
                ia_tls_ctx = 0
        except Exception:
            if not registered:
                free(page)  # nothing else holds it (a page still registered is left, not freed under the driver)
            _fence_state = -1
            return 0
        ia_fence_add_page(<char*>page)
        _fence_state = 1
        return ia_fence_ready()


cdef inline int _fenced(uintptr_t s, bint drain) except -1:
    """1 when this thread's fence word showed that the work queued on `s` so far is done, 0 when the caller
    must wait with cuStreamSynchronize (off, not seen within IRONACCEL_CUDA_FENCE_SPIN_US, the write failed, a
    host function was queued since the last one, or, for Stream.synchronize (`drain` false), a pool trim is
    due, which only a real synchronize does).  A drain (a copy's own wait) leaves a due trim to the next
    Stream.synchronize, as the bounce copies' fence always did: the pycuda compat's 1 KiB copies, after one
    free, took the slower cuStreamSynchronize for every wait otherwise (bench/bench_pycuda_compat.py)."""
    global _fence_state
    cdef int r
    if _fence_state < 0 or (_trim_pending and not drain) or _host_fn_queued or _disabled:  # _disabled: a
        return 0  # forked child, whose fence lock another thread may have held at the fork
    if not ia_fence_ready() and not _fence_page(s):
        return 0
    with nogil:
        r = ia_fence_stream(<CUstream>s, _fence_spin_ns)
    if r == 0:
        return 1
    if r == NOT_SUPPORTED or r == IA_MISSING:
        _fence_state = -1  # no stream memops here: synchronize from now on
    return 0


def note_host_func():
    """A host function was queued by a path outside the compiled core (hostfn.launch_c): see _host_fn_queued."""
    global _host_fn_queued
    _host_fn_queued = True


def fence_info():
    """Fenced waits (fence.h): whether they are on, pages registered, waits the word ended ("fenced") and waits
    it did not end in time ("missed", then cuStreamSynchronize did)."""
    cdef unsigned long long fenced = 0, missed = 0
    ia_fence_counts(&fenced, &missed)
    return {"state": {0: "unused", 1: "on", -1: "off"}[_fence_state], "pages": ia_fence_pages(),
            "fenced": fenced, "missed": missed}


# Tried: one query of the legacy stream before a wait after work of ours went there (unwaited legacy work makes
# every query slower, bench/experiments/probe_idle_sync.py): in an A/B it paid only after a module load.
cdef int _stream_sync(uintptr_t s) except -1:
    global _trim_pending, _host_fn_queued
    cdef int err
    while True:
        # an idle stream needs no more than a query, which keeps the GIL; 1 stands for "not known to be idle".
        # Tried: no query for the stream our last copy or launch went to (and for events recorded behind it, and
        # timing events): no gain in an A/B; the query overlaps the wait.
        err = 1 if _trim_pending else cuStreamQuery(<CUstream>s)
        if err == 0:
            return 0
        if err == NOT_READY and _fenced(s, False):  # busy (so not capturing either): wait on the fence word
            return 0
        if err != IA_UNBOUND and err != IA_DISABLED:
            with nogil:
                err = cuStreamSynchronize(<CUstream>s)
            if err == 0:
                _trim_pending = _host_fn_queued = False
                return 0
        _again(err, IA_cuStreamSynchronize, s, True)


cdef int _stream_drain(uintptr_t s) except -1:
    """Synchronize a stream known to be busy (work was just queued): no query first; the fence word (`_fenced`),
    else cuStreamSynchronize, the GIL released either way."""
    global _host_fn_queued
    cdef int err
    while True:
        if _fenced(s, True):
            return 0
        with nogil:
            err = cuStreamSynchronize(<CUstream>s)
        if err == 0:
            _host_fn_queued = False  # as _stream_sync's real synchronize does (a pool trim stays due there)
            return 0
        _again(err, IA_cuStreamSynchronize, s, True)


cdef int _stream_query(uintptr_t s) except -1:
    cdef int err
    while True:
        err = cuStreamQuery(<CUstream>s)
        if err == 0:
            return 1
        if err == NOT_READY:
            return 0
        _again(err, IA_cuStreamQuery, s, True)


cdef int _stream_wait(uintptr_t s, uintptr_t e) except -1:
    cdef int err
    while True:
        err = cuStreamWaitEvent(<CUstream>s, <CUevent>e, 0)
        if err == 0:
            return 0
        _again(err, IA_cuStreamWaitEvent, s, True)


cdef uintptr_t _event_create(unsigned int flags) except? 0:
    cdef CUevent e = NULL
    cdef int err
    while True:
        err = cuEventCreate(&e, flags)
        if err == 0:
            return <uintptr_t>e
        _again(err, IA_cuEventCreate, 0, False)


cdef int _event_destroy(uintptr_t e) except -1:
    cdef int err
    while True:
        err = cuEventDestroy(<CUevent>e)
        if err == 0:
            return 0
        _again(err, IA_cuEventDestroy, 0, False)


cdef int _event_record(uintptr_t e, uintptr_t s) except -1:
    cdef int err
    while True:
        err = cuEventRecord(<CUevent>e, <CUstream>s)
        if err == 0:
            return 0
        _again(err, IA_cuEventRecord, s, True)


cdef int _event_sync(uintptr_t e) except -1:
    global _trim_pending
    cdef int err
    while True:
        err = 1 if _trim_pending else cuEventQuery(<CUevent>e)
        if err == 0:
            return 0
        if err != IA_UNBOUND and err != IA_DISABLED:
            with nogil:
                err = cuEventSynchronize(<CUevent>e)
            if err == 0:
                _trim_pending = False
                return 0
        _again(err, IA_cuEventSynchronize, 0, False)


cdef int _event_query(uintptr_t e) except -1:
    cdef int err
    while True:
        err = cuEventQuery(<CUevent>e)
        if err == 0:
            return 1
        if err == NOT_READY:
            return 0
        _again(err, IA_cuEventQuery, 0, False)


def stream_sync(uintptr_t s):
    _stream_sync(s)


def stream_query(uintptr_t s):
    return _stream_query(s) == 1


def stream_wait(uintptr_t s, uintptr_t e):
    _stream_wait(s, e)


def event_create(unsigned int flags):
    """A new event in the current context (call `ensure` first)."""
    return PyLong_FromUnsignedLongLong(_event_create(flags))


def event_destroy(uintptr_t e):
    _event_destroy(e)


def event_record(uintptr_t e, uintptr_t s):
    _event_record(e, s)


def event_sync(uintptr_t e):
    _event_sync(e)


def event_query(uintptr_t e):
    return _event_query(e) == 1


# -- memory -----------------------------------------------------------------------------

cdef CUdeviceptr _mem_alloc_async(size_t nbytes, uintptr_t s) except? 0:
    cdef CUdeviceptr dp = 0
    cdef int err
    while True:
        err = cuMemAllocAsync(&dp, nbytes, <CUstream>s)
        if err == 0:
            return dp
        _again(err, IA_cuMemAllocAsync, s, True)


cdef CUdeviceptr _mem_alloc_from_pool(size_t nbytes, uintptr_t pool, uintptr_t s) except? 0:
    cdef CUdeviceptr dp = 0
    cdef int err
    while True:
        err = cuMemAllocFromPoolAsync(&dp, nbytes, <CUmemoryPool>pool, <CUstream>s)
        if err == 0:
            return dp
        _again(err, IA_cuMemAllocFromPoolAsync, s, True)


cdef int _mem_free_async(CUdeviceptr dp, uintptr_t s) except -1:
    global _trim_pending
    cdef int err
    while True:
        err = cuMemFreeAsync(dp, <CUstream>s)
        if err == 0:
            _trim_pending = True
            return 0
        _again(err, IA_cuMemFreeAsync, s, True)


cdef CUdeviceptr _mem_alloc(size_t nbytes) except? 0:
    cdef CUdeviceptr dp = 0
    cdef int err
    while True:
        err = cuMemAlloc(&dp, nbytes)
        if err == 0:
            return dp
        _again(err, IA_cuMemAlloc, 0, False)


cdef int _mem_free(CUdeviceptr dp) except -1:
    cdef int err
    while True:
        err = cuMemFree(dp)
        if err == 0:
            return 0
        _again(err, IA_cuMemFree, 0, False)


def mem_alloc_async(size_t nbytes, uintptr_t s):
    return PyLong_FromUnsignedLongLong(_mem_alloc_async(nbytes, s))


def mem_alloc_from_pool(size_t nbytes, uintptr_t pool, uintptr_t s):
    """cuMemAllocFromPoolAsync: `nbytes` from driver pool `pool`, stream-ordered on `s`."""
    return PyLong_FromUnsignedLongLong(_mem_alloc_from_pool(nbytes, pool, s))


def pool_import_pointer(uintptr_t pool, bytes data):
    """cuMemPoolImportPointer: this process's address of the allocation that `data` (the 64 bytes of the
    exporter's cuMemPoolExportPointer) names in imported pool `pool`.  The IPC importer's call, compiled: through
    cuda.bindings it builds a CUmemPoolPtrExportData object per import."""
    cdef CUdeviceptr dp = 0
    cdef int err
    cdef CUmemPoolPtrExportData* share
    if len(data) != sizeof(CUmemPoolPtrExportData):
        raise _errors.invalid("cuMemPoolImportPointer",
                              f"the export data is {len(data)} bytes, not {sizeof(CUmemPoolPtrExportData)}")
    share = <CUmemPoolPtrExportData*><const char*>data  # the driver only reads it
    while True:
        with nogil:
            err = cuMemPoolImportPointer(&dp, <CUmemoryPool>pool, share)
        if err == 0:
            return PyLong_FromUnsignedLongLong(dp)
        _again(err, IA_cuMemPoolImportPointer, 0, False)


def mem_free_async(uintptr_t dp, uintptr_t s):
    _mem_free_async(dp, s)


def mem_alloc(size_t nbytes):
    """Synchronous allocation in the current context (devices without memory pools)."""
    return PyLong_FromUnsignedLongLong(_mem_alloc(nbytes))


def mem_free(uintptr_t dp):
    _mem_free(dp)


cdef int _memcpy_dtod(uintptr_t dst, uintptr_t src, size_t nbytes, uintptr_t s) except -1:
    cdef int err
    while True:
        err = cuMemcpyDtoDAsync(dst, src, nbytes, <CUstream>s)
        if err == 0:
            return 0
        _again(err, IA_cuMemcpyDtoDAsync, s, True)


def memcpy_dtod(uintptr_t dst, uintptr_t src, size_t nbytes, uintptr_t s):
    _memcpy_dtod(dst, src, nbytes, s)


def memcpy_batch(dsts, srcs, sizes, attrs, attr_starts, uintptr_t s):
    """cuMemcpyBatchAsync: the copies dsts[i] <- srcs[i] of sizes[i] bytes on stream `s` in one call.  The five
    arguments are C-contiguous buffers (numpy arrays, `ironaccel_cuda.batched` builds them): 64-bit
    destinations, sources and sizes of one length, CUmemcpyAttributes records and the 64-bit index of the first
    copy each applies to.  Their pointers come through the buffer protocol (tried: numpy's `.ctypes.data`,
    slower per array).  A capturing stream is refused before the driver sees the batch (it has no
    graph node for one, and the failed call would invalidate the capture).  The GIL is released: a copy whose
    source must be read during the call may wait for it."""
    cdef Py_buffer v[5]
    cdef int got = 0
    cdef int err
    cdef size_t count, nattrs
    cdef CUstreamCaptureStatus status = 0
    try:
        for obj in (dsts, srcs, sizes, attrs, attr_starts):
            PyObject_GetBuffer(obj, &v[got], PyBUF_C_CONTIGUOUS)
            got += 1
        count = <size_t>v[0].len // 8
        nattrs = <size_t>v[3].len // sizeof(CUmemcpyAttributes)
        if (v[1].len != v[0].len or v[2].len != v[0].len or v[4].len // 8 != <Py_ssize_t>nattrs
                or v[3].len % sizeof(CUmemcpyAttributes) or not count or not nattrs):
            raise _errors.invalid("cuMemcpyBatchAsync", "the arrays of a batch do not match up")
        while True:
            err = cuStreamIsCapturing(<CUstream>s, &status)
            if err == 0:
                break
            _again(err, IA_cuStreamIsCapturing, s, True)
        if status != 0:
            raise _errors.InvalidState(_errors.BACKEND, "cuMemcpyBatchAsync",
                                       detail="the stream is capturing a graph, and the driver has no graph node "
                                              "for a batched copy: capture the copies one by one "
                                              "(DeviceBuf.copy_from)")
        while True:
            with nogil:
                err = cuMemcpyBatchAsync(<CUdeviceptr*>v[0].buf, <CUdeviceptr*>v[1].buf, <size_t*>v[2].buf, count,
                                         <CUmemcpyAttributes*>v[3].buf, <size_t*>v[4].buf, nattrs, <CUstream>s)
            if err == 0:
                return
            _again(err, IA_cuMemcpyBatchAsync, s, True)
    finally:
        while got:
            got -= 1
            PyBuffer_Release(&v[got])


def memset_d8(uintptr_t dp, unsigned char value, size_t count, uintptr_t s):
    cdef int err
    while True:
        err = cuMemsetD8Async(dp, value, count, <CUstream>s)
        if err == 0:
            return
        _again(err, IA_cuMemsetD8Async, s, True)


def memset_d16(uintptr_t dp, unsigned short value, size_t count, uintptr_t s):
    cdef int err
    while True:
        err = cuMemsetD16Async(dp, value, count, <CUstream>s)
        if err == 0:
            return
        _again(err, IA_cuMemsetD16Async, s, True)


def memset_d32(uintptr_t dp, unsigned int value, size_t count, uintptr_t s):
    cdef int err
    while True:
        err = cuMemsetD32Async(dp, value, count, <CUstream>s)
        if err == 0:
            return
        _again(err, IA_cuMemsetD32Async, s, True)


def graph_launch(uintptr_t exe, uintptr_t s):
    cdef int err
    while True:
        err = cuGraphLaunch(<CUgraphExec>exe, <CUstream>s)
        if err == 0:
            return
        _again(err, IA_cuGraphLaunch, s, True)


# -- fork -----------------------------------------------------------------------------------

def disable(reason):
    """In a forked child: every entry point raises InvalidState, except releases, which do nothing."""
    global _disabled, _disabled_reason
    _disabled = True
    _disabled_reason = reason
    ia_table_stub(IA_DISABLED)
