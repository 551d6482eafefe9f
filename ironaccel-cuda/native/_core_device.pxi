# DeviceCore: Device's per-handle fields and its hot methods (alloc, create_event); device.py adds the rest.

cdef object _spec_key = None
cdef tuple _spec_val = None


cdef inline tuple _dtype_spec(object dtype, str op):
    global _spec_key, _spec_val
    if dtype is _spec_key:
        return _spec_val
    spec = _dtypes.SPECS.get(dtype) if type(dtype) is str else None
    if spec is None:
        spec = _dtypes.spec(dtype, op)
    _spec_key = dtype
    _spec_val = spec
    return spec


cdef inline long long _count(object size, long long itemsize, long long total, object device, str op) except -1:
    """How many elements `size` (an int) asks for, checked against `total` bytes; InvalidArgument otherwise."""
    cdef long long n
    try:
        n = PyLong_AsLongLong(size)
    except OverflowError:
        n = -1 if size < 0 else total + 1
    if n <= 0 or n > total // itemsize:
        raise device._bad_size(size, size * itemsize, op)
    return n


cdef class DeviceCore:
    """Device's per-handle fields and its hot methods (alloc, create_event).

    Cold helpers of the subclass: `_size_arg(size, op)`, `_bad_size(size, nbytes, op)`, `_bad_stream(s, op)`,
    `_blocking_sync_event(timing, blocking_sync)`.
    """

    cdef public object _state
    cdef public object _pools
    cdef public int ordinal
    cdef public bint _closed
    cdef uintptr_t _ctx
    cdef object _default
    cdef long long _total
    cdef bint _has_pools

    def _init(self, st):
        self._state = st
        self.ordinal = st.ordinal
        self._closed = False
        self._pools = []
        self._ctx = <uintptr_t>int(st.ctx)
        self._total = st.total_memory
        self._has_pools = bool(st.pools)
        self._default = None

    cdef object _default_stream(self):
        if self._default is None:
            self._default = self._state.default_stream
        return self._default

    cdef EventCore _new_event(self, type cls, unsigned int flags):
        cdef EventCore e
        if self._closed:
            raise _errors.closed("cuEventCreate", "device")
        _ensure_ctx(self._ctx)
        h = _event_create(flags)
        e = EventCore.__new__(cls)
        e._hv = h
        e._isclosed = False
        e.device = self
        e._ordinal = self.ordinal
        e.timing = not (flags & CU_EVENT_DISABLE_TIMING)
        e._default = self._default_stream()
        return e

    def create_event(self, timing=False, *, blocking_sync=False):
        """A new event; `timing=True` enables `elapsed_ms` (slightly slower record/sync), `blocking_sync=True`
        makes `synchronize()` sleep (CU_EVENT_BLOCKING_SYNC) instead of spinning a core (the Python side's)."""
        if blocking_sync is not False:
            return self._blocking_sync_event(timing, blocking_sync)
        return self._new_event(_EVENT_TYPE, 0 if timing else CU_EVENT_DISABLE_TIMING)

    def _event_of(self, type cls, unsigned int flags):
        """A new event of the EventCore subclass `cls` with cuEventCreate `flags`: the cuda.core surface's
        events (blocking-sync flag, its own class) made in one compiled call."""
        if not issubclass(cls, EventCore):
            raise TypeError("_event_of wants a subclass of EventCore")
        return self._new_event(cls, flags)

    def alloc(self, size, dtype="uint8", stream=None, *, memory="device", exportable=False):
        """`size` elements of `dtype`, stream-ordered on `stream` (default: the default stream); `memory` and
        `exportable` (the compute kit's memory kinds) go to the Python side, off this path."""
        cdef long long n, itemsize, nbytes
        if memory is not "device" or exportable is not False:
            return self._alloc_memory(size, dtype, stream, memory, exportable)
        if self._closed:
            raise _errors.closed("cuMemAllocAsync", "device")
        spec = _dtype_spec(dtype, "cuMemAllocAsync")
        if type(size) is not int:
            size = self._size_arg(size, "cuMemAllocAsync")
        itemsize = spec[2]
        n = _count(size, itemsize, self._total, self, "cuMemAllocAsync")
        nbytes = n * itemsize
        s = self._default_stream() if stream is None else stream
        if not isinstance(s, StreamCore) or (<StreamCore>s)._ordinal != self.ordinal or (<StreamCore>s)._isclosed:
            raise self._bad_stream(s, "cuMemAllocAsync")
        return self._alloc_on(size, nbytes, itemsize == 1, spec, <StreamCore>s)

    cdef DeviceBuf _alloc_on(self, size, long long nbytes, bint bytewise, tuple spec, StreamCore ss):
        """`nbytes` (checked) stream-ordered on `ss` (of this device, open): alloc()'s driver call and buffer,
        also the cuda.core compat's `DeviceMemoryResource.allocate`."""
        cdef CUdeviceptr dp
        cdef DeviceBuf b
        cdef int kind
        if self._has_pools:
            dp = _mem_alloc_async(<size_t>nbytes, ss._hv)
            kind = K_ASYNC
        else:
            _ensure_ctx(self._ctx)
            dp = _mem_alloc(<size_t>nbytes)
            kind = K_SYNC
        b = DeviceBuf.__new__(DeviceBuf)
        b.ptr = PyLong_FromUnsignedLongLong(dp)
        b._addr = <uintptr_t>dp
        b._nbytes = <size_t>nbytes
        b.size = size
        b.nbytes = size if bytewise else nbytes
        b.dtype = spec[0]
        b._npdt = spec[1]
        b.device = self
        b._ordinal = self.ordinal
        b._stream = ss
        b._kind = kind
        b._ctx = self._ctx
        return b

