# Copies between host memory and the device: direct, through the bounce buffer, or through the staging
# pipeline (staging.c), chosen by size and by whether the host memory is page-locked (pinned.c).

cdef size_t _GIL_FREE_COPY = 64 * 1024  # direct copies at least this large run without the GIL


cdef int _htod(CUdeviceptr dp, const void* host, size_t n, uintptr_t s, bint release_gil) except -1:
    cdef int err
    while True:
        if release_gil:
            with nogil:
                err = cuMemcpyHtoDAsync(dp, host, n, <CUstream>s)
        else:
            err = cuMemcpyHtoDAsync(dp, host, n, <CUstream>s)
        if err == 0:
            return 0
        _again(err, IA_cuMemcpyHtoDAsync, s, True)


cdef int _dtoh(void* host, CUdeviceptr dp, size_t n, uintptr_t s, bint release_gil) except -1:
    cdef int err
    while True:
        if release_gil:
            with nogil:
                err = cuMemcpyDtoHAsync(host, dp, n, <CUstream>s)
        else:
            err = cuMemcpyDtoHAsync(host, dp, n, <CUstream>s)
        if err == 0:
            return 0
        _again(err, IA_cuMemcpyDtoHAsync, s, True)


def memcpy_htod(uintptr_t dp, host, size_t nbytes, uintptr_t s):
    """Queue a copy of `nbytes` from `host` (a buffer or an address) to `dp` on stream `s`."""
    cdef Py_buffer view
    if type(host) is int:
        _htod(dp, <const void*><uintptr_t>host, nbytes, s, nbytes >= _GIL_FREE_COPY)
        return
    PyObject_GetBuffer(host, &view, PyBUF_ANY_CONTIGUOUS)
    try:
        if <size_t>view.len < nbytes:
            raise _errors.invalid("cuMemcpyHtoDAsync", f"the host buffer has {view.len} bytes, the copy needs {nbytes}")
        _htod(dp, view.buf, nbytes, s, nbytes >= _GIL_FREE_COPY)
    finally:
        PyBuffer_Release(&view)


def memcpy_dtoh(host, uintptr_t dp, size_t nbytes, uintptr_t s):
    """Queue a copy of `nbytes` from `dp` into `host` (a writable buffer or an address) on stream `s`."""
    cdef Py_buffer view
    if type(host) is int:
        _dtoh(<void*><uintptr_t>host, dp, nbytes, s, nbytes >= _GIL_FREE_COPY)
        return
    PyObject_GetBuffer(host, &view, PyBUF_ANY_CONTIGUOUS | PyBUF_WRITABLE)
    try:
        if <size_t>view.len < nbytes:
            raise _errors.invalid("cuMemcpyDtoHAsync", f"the host buffer has {view.len} bytes, the copy needs {nbytes}")
        _dtoh(view.buf, dp, nbytes, s, nbytes >= _GIL_FREE_COPY)
    finally:
        PyBuffer_Release(&view)


def pinned_add(uintptr_t ptr, size_t nbytes):
    """Record [ptr, ptr + nbytes) as page-locked by ironaccel (PinnedBuf, `pinned()`)."""
    if ia_pin_add(ptr, ptr + nbytes):
        raise MemoryError("pinned_add")


def pinned_remove(uintptr_t ptr):
    ia_pin_remove(ptr)


def pinned_known(uintptr_t ptr, size_t nbytes):
    """True if [ptr, ptr + nbytes) lies in memory page-locked through ironaccel."""
    return ia_pin_known(ptr, nbytes) != 0


cdef size_t _pipeline_min = 0
cdef size_t _bounce_max = 0
cdef long _fence_spin_ns = 0
cdef int _threads = 0
cdef bint _settings_read = False
cdef object _staging_lock = threading.Lock()
cdef ia_staging* _staging[64]  # per device ordinal; static storage starts zeroed
cdef bint _free_at_exit_registered = False


cdef int _read_settings() except -1:
    global _pipeline_min, _bounce_max, _threads, _settings_read, _fence_spin_ns
    from . import transfer

    cfg = transfer.settings()
    _pipeline_min = cfg["pipeline_min"]
    _bounce_max = cfg["bounce_max"]
    _fence_spin_ns = cfg["fence_spin_us"] * 1000
    _threads = cfg["threads"]
    _settings_read = True
    return 0


cdef long long _n_pipeline = 0, _n_bounce = 0, _n_direct = 0


def staging_info():
    """How pageable copies are staged (see `transfer`) and how many synchronous copies took each path (how the
    waits ended: `fence_info`)."""
    from . import transfer

    return {**transfer.settings(), "pipeline": _n_pipeline, "bounce": _n_bounce, "direct": _n_direct}


cdef ia_staging* _staging_for(DeviceBuf buf) except NULL:
    """The staging slots, events and bounce buffer of the buffer's device (made on first use, kept)."""
    return _staging_of(buf._ordinal, buf.device)


cdef ia_staging* _staging_of(int ordinal, device) except NULL:
    """The staging of device `ordinal` (`device`: its ironaccel Device, or None to look it up)."""
    global _free_at_exit_registered
    cdef ia_staging* st
    cdef int i
    if ordinal < 0 or ordinal >= 64:
        raise _errors.invalid("staging", f"device ordinal {ordinal} is out of range")
    st = _staging[ordinal]
    if st != NULL:
        return st
    from . import transfer
    from ._driver import call

    with _staging_lock:
        st = _staging[ordinal]
        if st != NULL:
            return st
        cfg = transfer.settings()
        nslots = min(int(cfg["slots"]), IA_MAX_SLOTS)
        chunk = int(cfg["chunk"])
        bounce = max(int(cfg["bounce_max"]), 4096)
        st = <ia_staging*>calloc(1, sizeof(ia_staging))
        if st == NULL:
            raise MemoryError("staging")
        if device is None:
            from .device import Device

            device = Device(ordinal)
        # Made in the device's primary context whatever is current here (another context's page-locked memory
        # and events die with it), and kept for the life of the process.
        call("cuCtxPushCurrent", device._state.ctx)
        try:
            st.slots = <char*><uintptr_t>int(call("cuMemHostAlloc", nslots * chunk, CU_MEMHOSTALLOC_PORTABLE))
            st.bounce = <char*><uintptr_t>int(call("cuMemHostAlloc", bounce, CU_MEMHOSTALLOC_PORTABLE))
            for i in range(nslots):
                st.events[i] = <CUevent>_event_create(CU_EVENT_DISABLE_TIMING)
        except BaseException:
            for i in range(nslots):
                if st.events[i] != NULL:
                    cuEventDestroy(st.events[i])
            for ptr in (<uintptr_t>st.slots, <uintptr_t>st.bounce):
                if ptr:
                    call("cuMemFreeHost", ptr)
            free(st)
            raise
        finally:
            call("cuCtxPopCurrent")
        st.chunk = chunk
        st.nslots = nslots
        st.split = int(cfg["split"])
        st.nt = int(cfg["nt"])
        st.bounce_size = bounce
        with nogil:
            ia_pool_start(_threads)
        _staging[ordinal] = st
        if not _free_at_exit_registered:
            atexit.register(_free_staging)
            _free_at_exit_registered = True
        return st


def _free_staging():
    """At exit: give back every device's staging slots, bounce buffer and events (kept until then), so that a
    leak check at exit (compute-sanitizer --leak-check full) sees nothing of ours."""
    cdef int i, k
    cdef ia_staging* st
    from ._driver import call

    if _disabled:
        return
    for i in range(64):
        st = _staging[i]
        if st == NULL:
            continue
        _staging[i] = NULL
        with nogil:
            ia_pipe_lock()  # no pipelined copy is running (or ever will again)
            ia_pipe_unlock()
        try:
            for k in range(st.nslots):
                if st.events[k] != NULL:
                    cuEventDestroy(st.events[k])
            call("cuMemFreeHost", <uintptr_t>st.slots)
            call("cuMemFreeHost", <uintptr_t>st.bounce)
        except Exception:
            pass  # the driver may already be unloading: nothing to report at exit
        free(st)


cdef int _pipe_error(int err, const char* op) except -1:
    name = "staging" if op == NULL else op.decode()
    if name == "malloc":
        raise MemoryError("the staging pipeline could not allocate its chunk table")
    _again_named(err, name, 0, False)
    raise _errors.driver_error(err, name)


cdef inline bint _staged(size_t n, char* host):
    """A synchronous copy of `n` pageable bytes at `host` goes through the pipeline."""
    return n >= _pipeline_min and not ia_pin_known(<uintptr_t>host, n) and not ia_pin_driver(<uintptr_t>host)


cdef int _copy_in_sync(DeviceBuf buf, char* host, size_t n, uintptr_t s) except -1:
    """A synchronous host -> device copy of `n` bytes from `host` (the buffer is big enough)."""
    global _n_pipeline, _n_bounce, _n_direct
    cdef ia_staging* st
    cdef int err = 0
    cdef const char* op = NULL
    if not _settings_read:
        _read_settings()
    if not _disabled:
        if n <= _bounce_max and not ia_pin_known(<uintptr_t>host, n):
            st = _staging_for(buf)
            if ia_bounce_take(st) == 0:
                memcpy(st.bounce, host, n)
                err = cuMemcpyHtoDAsync(buf._addr, st.bounce, n, <CUstream>s)
                if err == 0:
                    try:  # the bounce buffer is kept until the copy has surely landed
                        _stream_drain(s)
                    finally:
                        ia_bounce_give(st)
                    _n_bounce += 1
                    return 0
                ia_bounce_give(st)  # not queued: the direct path below reports (or recovers from) the error
        elif _staged(n, host) and _staging_for(buf) != NULL and ia_pool_threads() > 0:
            st = _staging[buf._ordinal]
            while True:
                with nogil:
                    ia_pipe_lock()
                    err = ia_pipe_htod(st, buf._addr, host, n, <CUstream>s, &op)
                    ia_pipe_unlock()
                if err == 0:
                    _n_pipeline += 1
                    return 0
                if not ((err == INVALID_CONTEXT or err == INVALID_VALUE) and _recover(s)):
                    _pipe_error(err, op)  # a thread with no current context: retried once above
    _htod(buf._addr, host, n, s, n >= _GIL_FREE_COPY)
    _stream_drain(s)
    _n_direct += 1
    return 0


cdef int _copy_out_sync(DeviceBuf buf, char* host, size_t n, uintptr_t s) except -1:
    """A synchronous device -> host copy of `n` bytes into `host`."""
    return _copy_out(buf._ordinal, buf.device, buf._addr, host, n, s)


cdef int _copy_out(int ordinal, device, CUdeviceptr dp, char* host, size_t n, uintptr_t s) except -1:
    """A synchronous copy of `n` bytes from `dp` on device `ordinal` (`device`: its Device, or None) into `host`."""
    global _n_pipeline, _n_bounce, _n_direct
    cdef ia_staging* st
    cdef int err = 0
    cdef const char* op = NULL
    if not _settings_read:
        _read_settings()
    if not _disabled:
        if n <= _bounce_max and not ia_pin_known(<uintptr_t>host, n):
            st = _staging_of(ordinal, device)
            if ia_bounce_take(st) == 0:
                err = cuMemcpyDtoHAsync(st.bounce, dp, n, <CUstream>s)
                if err == 0:
                    try:
                        _stream_drain(s)
                        memcpy(host, st.bounce, n)
                    finally:
                        ia_bounce_give(st)
                    _n_bounce += 1
                    return 0
                ia_bounce_give(st)
        elif _staged(n, host) and _staging_of(ordinal, device) != NULL and ia_pool_threads() > 0:
            st = _staging[ordinal]
            while True:
                with nogil:
                    ia_pipe_lock()
                    err = ia_pipe_dtoh(st, host, dp, n, <CUstream>s, &op)
                    ia_pipe_unlock()
                if err == 0:
                    _n_pipeline += 1
                    return 0
                if not ((err == INVALID_CONTEXT or err == INVALID_VALUE) and _recover(s)):
                    _pipe_error(err, op)
    _dtoh(host, dp, n, s, n >= _GIL_FREE_COPY)
    _stream_drain(s)
    _n_direct += 1
    return 0


def memcpy_dtoh_sync(host, uintptr_t dp, size_t nbytes, uintptr_t s, int ordinal):
    """Copy `nbytes` from `dp` (on device `ordinal`) into writable host buffer `host` on stream `s` and wait for
    them, the way `DeviceBuf.copy_to_host` does: bounce buffer, staging pipeline or direct.  (PyCUDA's
    memcpy_dtoh.)"""
    cdef Py_buffer view
    PyObject_GetBuffer(host, &view, PyBUF_ANY_CONTIGUOUS | PyBUF_WRITABLE)
    try:
        if <size_t>view.len < nbytes:
            raise _errors.invalid("cuMemcpyDtoH", f"the host buffer has {view.len} bytes, the copy needs {nbytes}")
        _copy_out(ordinal, None, dp, <char*>view.buf, nbytes, s)
    finally:
        PyBuffer_Release(&view)


cdef inline void _take(PyThread_type_lock lock) noexcept:
    """Acquire `lock`, releasing the GIL only when it is contended."""
    if not PyThread_acquire_lock(lock, 0):
        with nogil:
            PyThread_acquire_lock(lock, 1)


cdef class HtodRing:
    """Page-locked slots for small synchronous host-to-device copies (the PyCUDA surface's `memcpy_htod`).

    `copy` puts the bytes into the next slot and queues the DMA from it on `stream`, so it returns as soon as
    the caller's buffer may be reused (cuMemcpyHtoD's guarantee) without waiting for the DMA.  The slots form
    two halves with one event each, recorded after a half's last DMA and waited on before that half is filled
    again.  A lock (taken without the GIL when it is contended) keeps each slot to one copy at a time; the wait
    for a half's event releases the GIL, so a host function ahead of the DMA can still run.  The owner frees the
    slots and events after `close()`.
    """

    cdef char* base
    cdef size_t _slot
    cdef int half
    cdef int next
    cdef uintptr_t events[2]
    cdef uintptr_t stream
    cdef PyThread_type_lock lock

    def __cinit__(self, uintptr_t base, size_t slot_size, int half, uintptr_t event0, uintptr_t event1,
                  uintptr_t stream):
        if base == 0 or slot_size == 0 or half < 1:
            raise _errors.invalid("HtodRing", "needs page-locked slots, a slot size and at least one slot per half")
        self.lock = PyThread_allocate_lock()
        if self.lock == NULL:
            raise MemoryError("HtodRing: no lock")
        self.base = <char*>base
        self._slot = slot_size
        self.half = half
        self.next = 0
        self.events[0] = event0
        self.events[1] = event1
        self.stream = stream

    def __dealloc__(self):
        if self.lock != NULL:
            PyThread_free_lock(self.lock)

    @property
    def slot_size(self):
        return self._slot

    def close(self):
        """No more copies: later ones raise (the owner frees the slots and events)."""
        _take(self.lock)
        self.base = NULL
        PyThread_release_lock(self.lock)

    def copy(self, uintptr_t dp, host, size_t n):
        """Copy the first `n` bytes of `host` (a contiguous buffer, in memory order) to `dp`; returns once `host`
        may be reused."""
        cdef Py_buffer view
        PyObject_GetBuffer(host, &view, PyBUF_ANY_CONTIGUOUS)
        try:
            if <size_t>view.len < n:
                raise _errors.invalid("cuMemcpyHtoD", f"the host buffer has {view.len} bytes, the copy needs {n}")
            if n > self._slot:
                raise _errors.invalid("cuMemcpyHtoD", f"{n} bytes do not fit a {self._slot}-byte slot")
            _take(self.lock)
            try:
                self._copy(dp, view.buf, n)
            finally:
                PyThread_release_lock(self.lock)
        finally:
            PyBuffer_Release(&view)

    cdef int _copy(self, uintptr_t dp, const void* src, size_t n) except -1:
        cdef int i = self.next
        cdef int h = i // self.half
        cdef int pos = i % self.half
        cdef char* slot
        if self.base == NULL:
            raise _errors.closed("cuMemcpyHtoD", "staging ring")
        if pos == 0:
            _event_sync(self.events[h])  # the half's DMAs of its last round have landed
        slot = self.base + <size_t>i * self._slot
        memcpy(slot, src, n)
        try:
            _htod(<CUdeviceptr>dp, slot, n, self.stream, False)
            self.next = (i + 1) % (2 * self.half)
            if pos == self.half - 1:
                _event_record(self.events[h], self.stream)
        except BaseException:
            # the half's event may not cover this round: wait for the stream so no slot is refilled under a DMA
            with nogil:
                cuStreamSynchronize(<CUstream>self.stream)
            raise
        return 0
