# The cuda.core compat's hot paths: its Buffer's fields, stream-ordered allocation from the device's pool, close,
# and copies between pool memory and page-locked memory; Device.create_event and Stream.record(event).
#
# Each fast path takes only the common case (exact types, an open compat Stream of the buffer's device, no
# options) and otherwise returns to the compat's Python code (`_allocate_cold`, `_close_cold`, `_copy_from_cold`,
# `_copy_to_cold`), which checks everything and raises cuda.core's errors.  Tried: the same paths in Python;
# slower per call (a Buffer is ten slot stores, a copy routes on four attribute reads and a property).

cdef object _cc_buf_type = None       # compat Buffer (exactly; subclasses take the cold path)
cdef object _cc_dmr_type = None       # compat DeviceMemoryResource
cdef object _cc_stream_type = None    # compat Stream
cdef object _cc_pinned_type = None    # ironaccel PinnedBuf (the legacy pinned resource's memory)
cdef object _cc_translate = None    # DriverError -> cuda.core's exception
cdef tuple _cc_u8 = None            # the uint8 dtype spec


def set_compat_buffer(buffer_type, dmr_type, stream_type, pinned_type, translate):
    """Register the compat's Buffer, DeviceMemoryResource, Stream, ironaccel's PinnedBuf and the compat's error
    translation, for the hot paths below."""
    global _cc_buf_type, _cc_dmr_type, _cc_stream_type, _cc_pinned_type, _cc_translate, _cc_u8
    if (not all(isinstance(t, type) for t in (buffer_type, dmr_type, stream_type, pinned_type))
            or not issubclass(buffer_type, CompatBuffer) or not issubclass(stream_type, StreamCore)):
        raise TypeError("set_compat_buffer wants types: a CompatBuffer subclass, a resource, a StreamCore subclass, "
                        "PinnedBuf")
    _cc_buf_type, _cc_dmr_type, _cc_stream_type = buffer_type, dmr_type, stream_type
    _cc_pinned_type, _cc_translate = pinned_type, translate
    _cc_u8 = _dtype_spec("uint8", "cuMemAllocAsync")


cdef class CompatBuffer:
    """The fields of the cuda.core compat's Buffer (the Python subclass has the rest), with its hot methods.

    Every field is None until set.  `_ptr` address (0 once closed), `_size` bytes, `_mr` resource, `_owner` kept object, `_mem` the ironaccel
    memory that frees it (DeviceBuf, PinnedBuf) or None, `_stream` allocation stream, `_free_stream`,
    `_attrs` pointer attributes (cached), `_shared` the allocation graph nodes share.
    """

    cdef public object _ptr
    cdef public object _size
    cdef public object _mr
    cdef public object _owner
    cdef public object _mem
    cdef public object _stream
    cdef public object _free_stream
    cdef public object _attrs
    cdef public object _shared
    cdef object __weakref__

    def __del__(self):
        # here rather than in the Python subclass: a Python __del__ cost every Buffer a Python call at its end
        if self._ptr and (self._mr is not None or self._mem is not None):
            try:
                self.close()
            except Exception:
                pass

    def close(self, stream=None):
        """Free the memory, stream-ordered after the work queued on `stream` (default: the allocation stream)."""
        mem = self._mem
        if (type(mem) is DeviceBuf and self._shared is None and self._owner is None
                and (stream is None or stream is self._stream)):
            self._mem = None
            self._ptr = 0
            self._mr = None
            try:
                (<DeviceBuf>mem)._release()
            except _errors.DriverError as exc:
                raise _cc_translate(exc) from None
            return None
        return self._close_cold(stream)

    def copy_from(self, src, *, stream=None, options=None):
        """Copy `src` into this buffer on `stream`."""
        if options is None and _cc_copy(self, src, stream):
            return None
        return self._copy_from_cold(src, stream, options)

    def copy_to(self, dst=None, *, stream=None, options=None):
        """Copy this buffer into `dst` (a new buffer of this buffer's resource when None) on `stream`."""
        if dst is not None and options is None and _cc_copy(dst, self, stream):
            return dst
        return self._copy_to_cold(dst, stream, options)


cdef inline bint _cc_device_pool(CompatBuffer b, mem):
    return type(mem) is DeviceBuf and type(b._mr) is _cc_dmr_type


cdef bint _cc_copy(dst, src, stream) except -1:
    """Queue dst <- src on `stream` when both are compat Buffers of equal size, one of them device pool memory
    and the other device pool or legacy page-locked memory, and `stream` an open compat Stream; else False
    (nothing done: the caller's cold path checks and routes)."""
    cdef CompatBuffer d, s
    cdef StreamCore st
    cdef size_t n
    cdef uintptr_t hp
    if type(dst) is not _cc_buf_type or type(src) is not _cc_buf_type or type(stream) is not _cc_stream_type:
        return False
    d, s, st = <CompatBuffer>dst, <CompatBuffer>src, <StreamCore>stream
    if st._isclosed or type(s._size) is not int or type(d._size) is not int or s._size != d._size:
        return False
    n = <size_t>PyLong_AsUnsignedLongLong(s._size)
    if n == 0:
        return False
    a, b = d._mem, s._mem
    try:
        if _cc_device_pool(d, a):
            if _cc_device_pool(s, b):
                _memcpy_dtod((<DeviceBuf>a)._addr, (<DeviceBuf>b)._addr, n, st._hv)
                return True
            if type(b) is _cc_pinned_type and type(s._ptr) is int:
                hp = <uintptr_t>PyLong_AsUnsignedLongLong(s._ptr)
                _htod((<DeviceBuf>a)._addr, <const void*>hp, n, st._hv, n >= _GIL_FREE_COPY)
                return True
        elif type(a) is _cc_pinned_type and type(d._ptr) is int and _cc_device_pool(s, b):
            hp = <uintptr_t>PyLong_AsUnsignedLongLong(d._ptr)
            _dtoh(<void*>hp, (<DeviceBuf>b)._addr, n, st._hv, n >= _GIL_FREE_COPY)
            return True
    except _errors.DriverError as exc:
        raise _cc_translate(exc) from None
    return False


cdef object _cc_allocate(mr, size, stream):
    """DeviceMemoryResource.allocate's common case as a new Buffer, or None for the cold path."""
    cdef CompatBuffer buf
    cdef DeviceCore dev
    cdef StreamCore ss
    cdef long long n
    if (type(mr) is not _cc_dmr_type or type(stream) is not _cc_stream_type or type(size) is not int
            or mr._alloc is None or mr._closed):
        return None
    dev_obj = mr._device
    if not isinstance(dev_obj, DeviceCore):
        return None
    dev, ss = <DeviceCore>dev_obj, <StreamCore>stream
    if ss._isclosed or ss._ordinal != dev.ordinal or dev._closed or size <= 0 or size > dev._total:
        return None
    n = PyLong_AsLongLong(size)
    try:
        mem = dev._alloc_on(size, n, True, _cc_u8, ss)
    except _errors.DriverError as exc:
        raise _cc_translate(exc) from None
    buf = CompatBuffer.__new__(<type>_cc_buf_type)
    buf._ptr = (<DeviceBuf>mem).ptr
    buf._size = size
    buf._mr = mr
    buf._mem = mem
    buf._stream = stream
    return buf


@cython.binding(True)
def compat_dmr_allocate(self, size, *, stream=None):
    """`size` bytes on the device, stream-ordered on `stream` (DeviceMemoryResource.allocate)."""
    buf = _cc_allocate(self, size, stream)
    if buf is None:
        return self._allocate_cold(size, stream)
    return buf


@cython.binding(True)
def compat_device_allocate(self, size, *, stream=None):
    """`size` bytes from this device's memory resource, stream-ordered on `stream` (Device.allocate)."""
    mr = self._memory_resource if self._has_inited else None
    if mr is not None:
        buf = _cc_allocate(mr, size, stream)
        if buf is not None:
            return buf
    return self._allocate_cold(size, stream)


# -- events: Device.create_event and Stream.record ------------------------------------------------------------
# (tried in Python: slower per event create/record/sync/destroy cycle than these)

cdef object _cc_event_type = None    # compat Event
cdef object _cc_event_options = None  # compat EventOptions


def set_compat_events(event_type, options_type):
    """Register the compat's Event (an EventCore subclass) and EventOptions, for the two functions below."""
    global _cc_event_type, _cc_event_options
    if not isinstance(event_type, type) or not issubclass(event_type, EventCore) or not isinstance(options_type, type):
        raise TypeError("set_compat_events wants the compat's Event (an EventCore subclass) and EventOptions")
    _cc_event_type, _cc_event_options = event_type, options_type


@cython.binding(True)
def compat_create_event(self, options=None):
    """A new event (EventOptions: timing off, no blocking sync, by default): Device.create_event.  Green
    contexts, IPC events and other option objects take `_create_event_cold`."""
    cdef unsigned int flags
    cdef object e
    if not isinstance(self, DeviceCore) or not self._has_inited or self._green_current is not None:
        return self._create_event_cold(options)
    if options is None:
        flags = CU_EVENT_DISABLE_TIMING
    elif type(options) is _cc_event_options and not options.ipc_enabled:
        flags = (0 if options.timing_enabled else CU_EVENT_DISABLE_TIMING) | (
            CU_EVENT_BLOCKING_SYNC if options.blocking_sync else 0)
    else:
        return self._create_event_cold(options)
    e = (<DeviceCore>self)._new_event(<type>_cc_event_type, flags)
    e._flags = flags
    return e


@cython.binding(True)
def compat_stream_record(self, event=None, options=None):
    """Record `event` on this stream and return it (Stream.record); a new event, an IPC event or a closed
    stream or event take `_record_cold`."""
    cdef StreamCore s
    cdef EventCore e
    if event is None or type(event) is not _cc_event_type or not isinstance(self, StreamCore):
        return self._record_cold(event, options)
    s, e = <StreamCore>self, <EventCore>event
    if s._isclosed or e._isclosed or (<unsigned int>event._flags) & CU_EVENT_INTERPROCESS:
        return self._record_cold(event, options)
    _event_record(e._hv, s._hv)
    return event


# -- batched copies' operands (ironaccel_cuda.batched; here, after DeviceBuf and CompatBuffer) -------------------

def batch_operands(items, addrs, sizes, str what):
    """Fill `addrs` and `sizes` (uint64 numpy arrays of `len(items)`) with each item's address and byte
    size: a DeviceBuf, the cuda.core compat's Buffer, any object with `ptr` and `nbytes` (PinnedBuf), or an int
    address (size unknown).  True when every item had a size.  A closed buffer or anything else is an
    InvalidArgument naming `what[i]`.  (Tried: the same loop in Python, slower per copy.)
    """
    cdef Py_ssize_t n = len(items)
    cdef Py_buffer va, vz
    PyObject_GetBuffer(addrs, &va, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE)
    try:
        PyObject_GetBuffer(sizes, &vz, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE)
        try:
            if va.len != n * 8 or vz.len != n * 8:
                raise _errors.invalid("cuMemcpyBatchAsync", f"{what}: the address and size arrays must have {n} "
                                      f"64-bit entries")
            return _fill_operands(items, n, <unsigned long long*>va.buf, <unsigned long long*>vz.buf, what)
        finally:
            PyBuffer_Release(&vz)
    finally:
        PyBuffer_Release(&va)


cdef bint _fill_operands(items, Py_ssize_t n, unsigned long long* a, unsigned long long* z, str what) except -1:
    cdef Py_ssize_t i
    cdef bint known = True
    cdef unsigned long long p
    for i in range(n):
        item = items[i]
        t = type(item)
        if t is DeviceBuf:
            if (<DeviceBuf>item).ptr is None:
                raise _errors.invalid("cuMemcpyBatchAsync", f"{what}[{i}] is a closed buffer")
            a[i] = (<DeviceBuf>item)._addr
            z[i] = (<DeviceBuf>item)._nbytes
            continue
        if isinstance(item, CompatBuffer):
            p = PyLong_AsUnsignedLongLong((<CompatBuffer>item)._ptr)
            if p == 0:
                raise _errors.invalid("cuMemcpyBatchAsync", f"{what}[{i}] is a closed buffer")
            a[i] = p
            z[i] = PyLong_AsUnsignedLongLong((<CompatBuffer>item)._size)
            continue
        if (t is int or isinstance(item, int)) and not isinstance(item, bool):
            if item <= 0 or item >= (1 << 64):
                raise _errors.invalid("cuMemcpyBatchAsync", f"{what}[{i}] is not an address: {item}")
            a[i] = PyLong_AsUnsignedLongLong(item)
            z[i] = 0
            known = False
            continue
        ptr = getattr(item, "ptr", None)
        size = getattr(item, "nbytes", None)
        if isinstance(item, np.integer) and not isinstance(item, np.bool_):
            ptr, size, known = int(item), 0, False
            if ptr <= 0 or ptr >= (1 << 64):
                raise _errors.invalid("cuMemcpyBatchAsync", f"{what}[{i}] is not an address: {ptr}")
        elif ptr is None or size is None:
            kind = "a closed buffer" if hasattr(item, "ptr") else type(item).__name__
            raise _errors.invalid("cuMemcpyBatchAsync", f"{what}[{i}] must be an open ironaccel buffer or an "
                                  f"address, got {kind}")
        a[i] = PyLong_AsUnsignedLongLong(int(ptr))
        z[i] = PyLong_AsUnsignedLongLong(int(size))
    return known


def all_instances(items, cls):
    """True when every item of `items` is an instance of `cls`: the cuda.core compat's copy_batch checks its
    Buffers with it (tried: a generator over the items, slower per item)."""
    for item in items:
        if not isinstance(item, cls):
            return False
    return True
