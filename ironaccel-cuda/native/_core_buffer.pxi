# DeviceBuf: typed device memory, every method of it (hot and cold) compiled here.

cdef extern from "hostmem.h" nogil:
    void* ia_host_take(size_t nbytes, size_t* size)
    void ia_host_give(void* ptr, size_t size)
    void ia_host_set_budget(size_t bytes)
    size_t ia_host_trim()
    size_t ia_host_kept()
    size_t ia_host_outstanding()

cdef extern from "driver.h" nogil:
    int ia_readable(uintptr_t addr, size_t n)

cdef object _ndarray = np.ndarray
cdef size_t _HOST_BLOCK_MIN = 4 << 20  # copy_to_host() arrays this large come from hostmem (reused regions)


@cython.final
cdef class _HostBlock:
    """A reusable host region (hostmem.c) exposed to numpy; handed back when the last array on it dies."""

    cdef char* ptr
    cdef size_t size
    cdef Py_ssize_t nbytes

    def __getbuffer__(self, Py_buffer* view, int flags):
        view.buf = self.ptr
        view.obj = self
        view.len = self.nbytes
        view.readonly = 0
        view.itemsize = 1
        view.format = NULL
        view.ndim = 1
        view.shape = &self.nbytes
        view.strides = NULL
        view.suboffsets = NULL
        view.internal = NULL

    def __releasebuffer__(self, Py_buffer* view):
        pass

    def __dealloc__(self):
        if self.ptr != NULL:
            ia_host_give(self.ptr, self.size)
            self.ptr = NULL


cdef object _host_array(Py_ssize_t size, object npdt, size_t nbytes):
    """A new 1-D array of `size` elements for copy_to_host(): from a reused region when large."""
    cdef _HostBlock block
    cdef size_t got = 0
    cdef void* ptr
    if nbytes < _HOST_BLOCK_MIN or _disabled:
        return np.empty(size, npdt)
    ptr = ia_host_take(nbytes, &got)
    if ptr == NULL:
        return np.empty(size, npdt)
    block = _HostBlock.__new__(_HostBlock)
    block.ptr = <char*>ptr
    block.size = got
    block.nbytes = <Py_ssize_t>nbytes
    return np.frombuffer(block, dtype=npdt, count=size)


def host_cache(budget=None, trim=False):
    """The reused host regions behind large copy_to_host() arrays: set the byte budget, trim, report."""
    if budget is not None:
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
            raise _errors.invalid("host_cache", f"budget must be a non-negative int of bytes, got {budget!r}")
        ia_host_set_budget(budget)
    released = ia_host_trim() if trim else 0
    return {"kept_bytes": ia_host_kept(), "outstanding": ia_host_outstanding(), "released": released}


cdef object _foreign_stream(object stream, str op):
    """A DLPack consumer stream as a CUstream address (1 and 2 are the legacy and per-thread defaults)."""
    cdef unsigned long long h
    if isinstance(stream, bool) or not isinstance(stream, int):
        raise _errors.invalid(op, f"stream must be None or an int (DLPack), got {type(stream).__name__}")
    if stream == 0:
        raise _errors.invalid(op, "stream 0 is ambiguous in DLPack; pass 1 (legacy default), 2 (per-thread) or a "
                              "stream handle")
    if stream < -1 or stream >= 1 << 64:
        raise _errors.invalid(op, f"stream {stream} is not a CUDA stream handle")
    if stream <= 2:
        return stream
    h = stream
    if h % 8 or not ia_readable(<uintptr_t>h, 8):
        raise _errors.invalid(op, f"stream {stream:#x} is not a CUDA stream handle (no stream object there)")
    return stream


def _dim_tuple(value, str what, str op):
    """A CAI shape or strides entry: a tuple of ints (TypeError-free)."""
    if not isinstance(value, (tuple, list)) or any(isinstance(v, bool) or not isinstance(v, int) for v in value):
        raise _errors.invalid(op, f"__cuda_array_interface__ {what} must be a tuple of ints, got {value!r}")
    return tuple(int(v) for v in value)


@cython.final
@cython.freelist(64)
cdef class DeviceBuf:
    """Typed device memory: `size` elements of `dtype` on one device; `ptr` is the address (None once closed).

    Allocated stream-ordered on its *home stream* (the stream given at allocation, else the device's default
    stream) and freed there on `close()`, on leaving a `with` block or when garbage collected.  Operations
    default to the home stream and are synchronous when no stream is given; given a stream they are
    asynchronous on it.  A buffer used on a stream other than its home stream must be ordered
    (`home.wait(event)`) before it is closed, as with every stream-ordered allocator.  `buf[a:b]` is a view
    that keeps its parent alive; closing the parent closes its views.
    """

    cdef readonly object ptr
    cdef public object nbytes
    cdef public object size
    cdef public object dtype
    cdef public object device
    cdef public int _ordinal
    cdef public object _npdt
    cdef public object _stream
    cdef public object _ipc  # this buffer's IPC descriptor, made on its first ipc.export (pool memory only)
    cdef public object _base
    cdef public object _views
    cdef object _memory  # the compute kit's memory kind where it is not "device" (None)
    cdef object _exportable  # True where allocated with exportable=True, else None
    cdef object __weakref__
    cdef uintptr_t _addr
    cdef size_t _nbytes
    cdef int _kind
    cdef int _bucket
    cdef uintptr_t _ctx
    cdef PoolCore _pool

    def __init__(self, *args, **kwargs):
        raise TypeError("allocate with Device.alloc(), MemPool.alloc() or DeviceBuf.from_foreign()")

    @property
    def _dp(self):
        return PyLong_FromUnsignedLongLong(self._addr)

    @property
    def closed(self):
        return self.ptr is None

    @classmethod
    def _wrap(cls, dp, size, dtype, npdt, device, stream, release, base=None):
        """A buffer over `dp`; `release` is None (a view) or one of the RELEASE_* values."""
        cdef DeviceBuf b = DeviceBuf.__new__(DeviceBuf)
        addr = int(dp)
        b.ptr = addr
        b._addr = <uintptr_t>addr
        b.size = size
        b.nbytes = size * npdt.itemsize
        b._nbytes = <size_t>b.nbytes
        b.dtype = dtype
        b.device = device
        b._ordinal = device.ordinal
        b._npdt = npdt
        b._stream = stream
        b._base = base
        if release is None:
            b._kind = K_NONE
        elif release == K_ASYNC or release == K_IMPORTED:
            b._kind = release
        elif release == K_SYNC:
            b._kind = K_SYNC
            b._ctx = <uintptr_t>int(device._state.ctx)
        else:
            raise TypeError(f"release must be None or a RELEASE_* value, got {release!r}")
        return b

    # -- lifetime -------------------------------------------------------------

    def close(self):
        """Free the memory (stream-ordered on the home stream).  Idempotent; closes views too."""
        self._release()

    cdef int _release(self) except -1:
        """close(), callable from C (the cuda.core compat's Buffer.close)."""
        cdef int kind = self._kind
        self._kind = K_NONE  # taken before any call: a racing close() frees nothing
        ptr = self.ptr
        if ptr is None:
            return 0
        self.ptr = None
        views = self._views
        if views is not None:
            self._views = None
            for ref in views:
                view = ref()
                if view is not None:
                    view.close()
        if kind == K_POOL:
            pool = self._pool
            self._pool = None
            pool._give(self._addr, ptr, self._bucket)
        elif kind == K_ASYNC:
            _mem_free_async(self._addr, self._home_handle())
        elif kind == K_SYNC:
            _ensure_ctx(self._ctx)
            _mem_free(self._addr)
        elif kind == K_IMPORTED:
            base = self._base
            self._base = None
            if base is not None:
                base[1].release()
        return 0

    cdef uintptr_t _home_handle(self) except? 0:
        s = self._stream
        if isinstance(s, StreamCore) and not (<StreamCore>s)._isclosed:
            return (<StreamCore>s)._hv
        return (<StreamCore>self.device._state.default_stream)._hv

    def __dealloc__(self):
        global _trim_pending
        cdef int kind = self._kind
        if self.ptr is None or kind == K_NONE:
            return
        self._kind = K_NONE
        try:
            if kind == K_POOL:
                if self._pool is not None:
                    self._pool._give(self._addr, self.ptr, self._bucket)
            elif kind == K_ASYNC:
                cuMemFreeAsync(self._addr, <CUstream>self._home_handle())
                _trim_pending = True
            elif kind == K_SYNC:
                if ia_tls_ctx != self._ctx:
                    cuCtxSetCurrent(<CUcontext>self._ctx)
                cuMemFree(self._addr)
            elif kind == K_IMPORTED:
                base = self._base
                if base is not None:
                    base[1].release()
        except BaseException:
            pass  # nothing can be raised from a finaliser

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- copies of numpy arrays (the hot cases) ----------------------------------

    def copy_from(self, src, stream=None):
        """Copy a host array, another DeviceBuf (any device) or a foreign device array into this buffer.

        Sizes and dtypes must match exactly; host arrays must be C-contiguous.  Synchronous without
        `stream`, asynchronous on `stream` with it (a host array then must stay alive and unchanged until
        the stream reaches the copy).
        """
        cdef Py_buffer view
        cdef StreamCore ss
        cdef uintptr_t sh
        if type(src) is not _ndarray:
            self._copy_from_other(src, stream)
            return
        s = self._stream if stream is None else stream
        if self.ptr is None or not isinstance(s, StreamCore) or (<StreamCore>s)._ordinal != self._ordinal:
            raise self._copy_mismatch("cuMemcpyHtoDAsync", src, s)
        d = src.dtype
        if d is not self._npdt and d != self._npdt:
            raise self._copy_mismatch("cuMemcpyHtoDAsync", src, s)
        ss = <StreamCore>s
        try:
            PyObject_GetBuffer(src, &view, PyBUF_C_CONTIGUOUS)
        except (BufferError, ValueError, TypeError):
            raise self._copy_mismatch("cuMemcpyHtoDAsync", src, s) from None
        try:
            if <size_t>view.len != self._nbytes:
                raise self._copy_mismatch("cuMemcpyHtoDAsync", src, s)
            if ss._isclosed:
                raise _errors.closed("cuMemcpyHtoDAsync", "stream")
            sh = ss._hv
            if stream is None:
                _copy_in_sync(self, <char*>view.buf, self._nbytes, sh)
            else:
                _htod(self._addr, view.buf, self._nbytes, sh, self._nbytes >= _GIL_FREE_COPY)
        finally:
            PyBuffer_Release(&view)

    def copy_to_host(self, out=None, stream=None):
        """Copy into a new numpy array (1-D, `size` elements), or into `out`; returns the array.

        `out` must be a writeable C-contiguous array of the same dtype and byte size.  Synchronous without
        `stream`; with it, the array is filled when the stream reaches the copy.  New arrays of 4 MiB and
        more come from host regions that are reused once their arrays are gone (`host_cache`).
        """
        cdef Py_buffer view
        cdef StreamCore ss
        s = self._stream if stream is None else stream
        if out is None:
            if self.ptr is None:
                raise _errors.closed("cuMemcpyDtoHAsync", "buffer")
            if not isinstance(s, StreamCore) or (<StreamCore>s)._ordinal != self._ordinal:
                raise self._copy_mismatch("cuMemcpyDtoHAsync", None, s, True)
            out = _host_array(self.size, self._npdt, self._nbytes)
        else:
            if type(out) is not _ndarray or self.ptr is None or not isinstance(s, StreamCore) \
                    or (<StreamCore>s)._ordinal != self._ordinal:
                raise self._copy_mismatch("cuMemcpyDtoHAsync", out, s, True)
            d = out.dtype
            if d is not self._npdt and d != self._npdt:
                raise self._copy_mismatch("cuMemcpyDtoHAsync", out, s, True)
        ss = <StreamCore>s
        try:
            PyObject_GetBuffer(out, &view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE)
        except (BufferError, ValueError, TypeError):
            raise self._copy_mismatch("cuMemcpyDtoHAsync", out, s, True) from None
        try:
            if <size_t>view.len != self._nbytes:
                raise self._copy_mismatch("cuMemcpyDtoHAsync", out, s, True)
            if ss._isclosed:
                raise _errors.closed("cuMemcpyDtoHAsync", "stream")
            if stream is None:
                _copy_out_sync(self, <char*>view.buf, self._nbytes, ss._hv)
            else:
                _dtoh(view.buf, self._addr, self._nbytes, ss._hv, self._nbytes >= _GIL_FREE_COPY)
        finally:
            PyBuffer_Release(&view)
        return out

    # -- views --------------------------------------------------------------------

    def __len__(self):
        return self.size

    def __getitem__(self, key):
        """A view of elements `key` (a slice with step 1); keeps this buffer alive."""
        op = "DeviceBuf.__getitem__"
        if self.ptr is None:
            raise _errors.closed(op, "buffer")
        if not isinstance(key, slice):
            raise _errors.invalid(op, f"index with a slice (buf[a:b]), got {key!r}")
        try:
            start, stop, step = key.indices(self.size)
        except TypeError as exc:
            raise _errors.invalid(op, f"bad slice {key!r}: {exc}") from None
        if step != 1:
            raise _errors.invalid(op, "views must be contiguous (step 1)")
        if stop <= start:
            raise _errors.invalid(op, f"empty view {start}:{stop} of a buffer of {self.size} elements")
        itemsize = self._npdt.itemsize
        view = DeviceBuf._wrap(self.ptr + start * itemsize, stop - start, self.dtype, self._npdt, self.device,
                               self._stream, None, base=self)
        if self._views is None:
            self._views = []
        else:
            self._views = [r for r in self._views if r() is not None]
        self._views.append(weakref.ref(view))
        return view

    # -- memset and other copies ----------------------------------------------------

    def memset(self, value=0, stream=None):
        """Fill with `value`: a byte (0-255), or an element value for 2- and 4-byte dtypes."""
        op = "DeviceBuf.memset"
        s, sync = self._stream_for(stream, op)
        itemsize = self._npdt.itemsize
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and 0 <= value <= 255 and (
            value == 0 or itemsize == 1
        ):
            fill, count, width = int(value), self.nbytes, 1
        elif itemsize in (2, 4) and not isinstance(value, bool):
            try:
                bits = np.asarray(value, dtype=self._npdt).view(np.uint16 if itemsize == 2 else np.uint32)
            except (TypeError, ValueError, OverflowError):
                raise _errors.invalid(op, f"cannot represent {value!r} as {self.dtype.value}") from None
            fill, count, width = int(bits), self.size, itemsize
        else:
            raise _errors.invalid(op, f"only byte fills (0-255) are supported for {self.dtype.value}, got {value!r}")
        sh = (<StreamCore>s)._hv
        if width == 1:
            memset_d8(self._addr, fill, count, sh)
        elif width == 2:
            memset_d16(self._addr, fill, count, sh)
        else:
            memset_d32(self._addr, fill, count, sh)
        if sync:
            _stream_sync(sh)

    def _copy_from_other(self, src, stream):
        """copy_from for everything but an exact numpy array."""
        if isinstance(src, DeviceBuf):
            self._copy_device(src, stream)
            return
        if isinstance(src, np.ndarray):  # a subclass (memmap, ...): copy from its base-class view
            self.copy_from(np.asarray(src), stream)
            return
        if hasattr(src, "__cuda_array_interface__") or hasattr(src, "__dlpack__"):
            if hasattr(src, "__dlpack_device__") and src.__dlpack_device__()[0] == 1:  # a CPU array
                self.copy_from(np.asarray(src), stream)
                return
            foreign = DeviceBuf.from_foreign(src)
            try:
                self._copy_device(foreign, stream)
            finally:
                foreign.close()
            return
        raise _errors.invalid("DeviceBuf.copy_from", f"cannot copy from {type(src).__name__}; pass a numpy array "
                              "or a device array")

    def _copy_device(self, DeviceBuf src, stream):
        op = "cuMemcpyDtoDAsync"
        if self.ptr is None:
            raise _errors.closed(op, "destination buffer")
        if src.ptr is None:
            raise _errors.closed(op, "source buffer")
        if src.nbytes != self.nbytes or src.dtype is not self.dtype:
            raise _errors.invalid(op, f"source is {src.size} x {src.dtype.value}, destination {self.size} x "
                                  f"{self.dtype.value}; sizes and dtypes must match")
        s, sync = (self._stream, True) if stream is None else (stream, False)
        if not isinstance(s, StreamCore):
            raise _errors.invalid(op, f"stream must be a Stream, got {type(s).__name__}")
        if (<StreamCore>s)._isclosed:
            raise _errors.closed(op, "stream")
        if s._ordinal not in (self._ordinal, src._ordinal):
            raise _errors.invalid(op, f"stream is on cuda:{s._ordinal}, the buffers on cuda:{src._ordinal} and "
                                  f"cuda:{self._ordinal}")
        sh = (<StreamCore>s)._hv
        if src._ordinal == self._ordinal:
            memcpy_dtod(self._addr, src._addr, self._nbytes, sh)
        else:
            from ._driver import call

            call("cuMemcpyPeerAsync", self._addr, self.device._state.ctx, src._addr, src.device._state.ctx,
                 self._nbytes, sh)
        if sync:
            _stream_sync(sh)

    def _stream_for(self, stream, str op):
        if self.ptr is None:
            raise _errors.closed(op, "buffer")
        if stream is None:
            return self._stream, True
        if not isinstance(stream, StreamCore) or (<StreamCore>stream)._ordinal != self._ordinal:
            raise self._copy_mismatch(op, None, stream)
        if (<StreamCore>stream)._isclosed:
            raise _errors.closed(op, "stream")
        return stream, False

    # -- interop ---------------------------------------------------------------------

    @property
    def __cuda_array_interface__(self):
        """CUDA Array Interface v3: 1-D, the home stream as the synchronisation stream."""
        if self.ptr is None:
            raise _errors.closed("__cuda_array_interface__", "buffer")
        return {
            "shape": (self.size,),
            "typestr": self._npdt.str,
            "data": (self.ptr, False),
            "version": 3,
            "strides": None,
            "stream": self._stream_int(),
        }

    @property
    def memory(self):
        """The memory kind: "device", or "host" (mapped page-locked memory: `device.alloc(n, memory="host")`)."""
        return "device" if self._memory is None else self._memory

    @memory.setter
    def memory(self, value):
        self._memory = None if value == "device" else value

    @property
    def exportable(self):
        """True where allocated with `exportable=True` (`device.export_memory(buffer)` hands it to another API)."""
        return self._exportable is True

    @exportable.setter
    def exportable(self, value):
        self._exportable = True if value else None

    @property
    def host_visible(self):
        """True where `map()` works: host memory (the compute kit's rule)."""
        return self._memory is not None and self.ptr is not None and "map" in self.device.features

    def map(self, write=True):
        """`with buffer.map() as a:` the host memory as an array (host memory only; device memory is InvalidArgument
        naming device.download)."""
        from . import interop
        return interop.map_buffer(self, write)

    def __dlpack_device__(self):
        if self._memory is not None:
            return (1, 0)  # kDLCPU: host memory the device also reaches
        return (2, self._ordinal)  # kDLCUDA

    @property
    def handle(self):
        """The buffer itself while open, None once closed (what the compute kit's batches check)."""
        return None if self.ptr is None else self

    def __array__(self, dtype=None, copy=None):
        """Host memory is viewed without a copy; device memory has none: `np.array(buf, copy=True)` downloads it,
        a view is InvalidState."""
        if self._memory is not None and copy is not True:
            from . import interop
            host = interop.host_view(self, "__array__")
            return host if dtype is None else host.astype(dtype, copy=False)
        if copy is not True:
            from ironaccel.errors import InvalidState
            raise InvalidState("cuda", "__array__", detail="device memory is not host-visible: "
                               "device.download(buffer) (or np.array(buffer, copy=True)) copies it to the host")
        host = self.copy_to_host()
        return host if dtype is None else host.astype(dtype)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule; the consumer's `stream` is ordered after this buffer's home stream.

        `stream`: None (the legacy default stream), -1 (no ordering), 1 (legacy default), 2 (per-thread
        default) or a CUstream handle of this process; anything else is InvalidArgument.
        """
        from . import _dlpack

        op = "__dlpack__"
        if self.ptr is None:
            raise _errors.closed(op, "buffer")
        if self._memory is not None:  # host memory: numpy's own export of the mapped view (kDLCPU)
            from . import interop
            given = {"stream": stream, "max_version": max_version, "dl_device": dl_device, "copy": copy}
            return interop.host_view(self, op).__dlpack__(**{k: v for k, v in given.items() if v is not None})
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"cuda: {op}: cannot export to device {dl_device}; the buffer is on cuda:{self._ordinal}")
        if copy:
            raise BufferError(f"cuda: {op}: copy=True is not supported; copy explicitly with copy_to_host()")
        if max_version is not None and (not isinstance(max_version, tuple) or len(max_version) != 2):
            raise _errors.invalid(op, f"max_version must be a (major, minor) tuple, got {max_version!r}")
        consumer = 1 if stream is None else _foreign_stream(stream, op)
        if consumer != -1:
            self._order_consumer(consumer)
        versioned = max_version is not None and tuple(max_version) >= (1, 0)
        return _dlpack.export(self.ptr, self.size, self.dtype, (_dlpack.KDL_CUDA, self._ordinal), self, versioned)

    def _order_consumer(self, consumer):
        home = self._stream_int()
        if consumer == home:
            return
        event = self.device.create_event()
        try:
            event.record(self._stream)
            _stream_wait(<uintptr_t>consumer, (<EventCore>event)._hv)
        finally:
            event.close()

    def _stream_int(self):
        s = self._stream
        if not isinstance(s, StreamCore) or (<StreamCore>s)._isclosed:
            s = self.device._state.default_stream
        return PyLong_FromUnsignedLongLong((<StreamCore>s)._hv)

    @classmethod
    def from_foreign(cls, obj):
        """A non-owning 1-D view of a CuPy, PyTorch, cuda.core, Numba or JAX device array.

        Uses `__cuda_array_interface__` when present, else DLPack.  The view keeps `obj` alive; the array
        must be contiguous and non-empty.  Work pending on the producer's stream is waited for.
        """
        from .device import Device
        from . import _dlpack

        op = "DeviceBuf.from_foreign"
        if isinstance(obj, DeviceBuf):
            return obj[:]
        try:
            cai = getattr(obj, "__cuda_array_interface__", None)
        except IronAccelError:
            raise
        except Exception as exc:
            raise _errors.invalid(op, f"reading __cuda_array_interface__ failed: {type(exc).__name__}: {exc}") from None
        if cai is not None:
            return DeviceBuf._from_cai(obj, cai)
        if not hasattr(obj, "__dlpack__"):
            raise _errors.invalid(op, f"{type(obj).__name__} speaks neither __cuda_array_interface__ nor __dlpack__")
        try:
            dev_type, dev_id = obj.__dlpack_device__() if hasattr(obj, "__dlpack_device__") else (_dlpack.KDL_CUDA, 0)
            dev_type, dev_id = int(dev_type), int(dev_id)
        except Exception as exc:
            raise _errors.invalid(op, f"__dlpack_device__ failed: {type(exc).__name__}: {exc}") from None
        if dev_type not in (_dlpack.KDL_CUDA, _dlpack.KDL_CUDA_MANAGED):
            raise _errors.invalid(op, f"the array lives on DLPack device type {dev_type}, not a CUDA device")
        device = Device(dev_id)
        consumer = (<StreamCore>device._state.default_stream)._hv
        try:
            try:
                capsule = obj.__dlpack__(stream=consumer, max_version=(1, 0))
            except TypeError:
                capsule = obj.__dlpack__(stream=consumer)
            imported = _dlpack.consume(capsule)
        except IronAccelError:
            raise
        except Exception as exc:
            raise _errors.invalid(op, f"the DLPack export failed: {type(exc).__name__}: {exc}") from None
        if not imported.contiguous or not imported.shape or 0 in imported.shape:
            imported.release()
            raise _errors.invalid(op, f"the array must be contiguous and non-empty (shape {imported.shape}, "
                                  f"strides {imported.strides})")
        size = int(np.prod(imported.shape))
        default = device._state.default_stream
        return DeviceBuf._wrap(imported.ptr, size, imported.dtype, imported.dtype.numpy, device, default,
                               K_IMPORTED, base=(obj, imported))

    @classmethod
    def _from_cai(cls, obj, cai):
        """from_foreign through __cuda_array_interface__ (v2/v3), every field checked before it is used."""
        from ironaccel import DType
        from ._driver import call, driver
        from .device import Device

        op = "DeviceBuf.from_foreign"
        if not isinstance(cai, dict):
            raise _errors.invalid(op, f"__cuda_array_interface__ must be a dict, got {type(cai).__name__}")
        for key in ("shape", "typestr", "data"):
            if key not in cai:
                raise _errors.invalid(op, f"__cuda_array_interface__ has no {key!r}")
        data = cai["data"]
        if not isinstance(data, tuple) or len(data) != 2 or isinstance(data[0], bool) or not isinstance(data[0], int):
            raise _errors.invalid(op, f"__cuda_array_interface__ data must be a (pointer, read_only) tuple, got {data!r}")
        if cai.get("mask") is not None:
            raise _errors.invalid(op, "masked arrays (__cuda_array_interface__ mask) are not supported")
        ptr = int(data[0])
        shape = _dim_tuple(cai["shape"], "shape", op)
        if any(extent < 0 for extent in shape):
            raise _errors.invalid(op, f"negative extent in shape {shape}")
        typestr = cai["typestr"]
        if not isinstance(typestr, str):
            raise _errors.invalid(op, f"__cuda_array_interface__ typestr must be a str, got {typestr!r}")
        try:
            npdt = np.dtype(typestr)
            dtype = DType.of(npdt)
        except (TypeError, ValueError) as exc:
            raise _errors.invalid(op, f"unsupported typestr {typestr!r}: {exc}") from None
        size = int(np.prod(shape)) if shape else 1
        strides = cai.get("strides")
        if strides is not None:
            strides = _dim_tuple(strides, "strides", op)
            if len(strides) != len(shape):
                raise _errors.invalid(op, f"strides {strides} do not match shape {shape}")
            expected = npdt.itemsize
            for extent, stride in zip(reversed(shape), reversed(strides)):
                if extent != 1 and stride != expected:
                    raise _errors.invalid(op, f"the array is not C-contiguous (shape {shape}, strides {strides})")
                expected *= extent
        if size == 0 or ptr == 0:
            raise _errors.invalid(op, "the array is empty")
        if ptr < 0 or ptr >= 1 << 64:
            raise _errors.invalid(op, f"pointer {ptr} is not a device address")
        stream = cai.get("stream")
        if stream is not None and (isinstance(stream, bool) or not isinstance(stream, int)):
            raise _errors.invalid(op, f"__cuda_array_interface__ stream must be None or an int, got {stream!r}")
        attr = driver().CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
        ordinal = int(call("cuPointerGetAttribute", attr, ptr))
        device = Device(ordinal)
        if stream:  # v3: wait for the producer's pending work on that stream
            _stream_sync(<uintptr_t>int(_foreign_stream(stream, op)))
        default = device._state.default_stream
        return DeviceBuf._wrap(ptr, size, dtype, npdt, device, default, None, base=obj)

    # -- misc and cold diagnostics --------------------------------------------------------

    def __repr__(self):
        state = "closed" if self.ptr is None else hex(self.ptr)
        return f"<DeviceBuf {state} {self.size} x {self.dtype.value} on cuda:{self._ordinal}>"

    def _copy_mismatch(self, op, arr, s, to_host=False):
        if self.ptr is None:
            return _errors.closed(op, "buffer")
        if not isinstance(s, StreamCore):
            return _errors.invalid(op, f"stream must be a Stream, got {type(s).__name__}")
        if s._ordinal != self._ordinal:
            return _errors.invalid(op, f"the stream is on cuda:{s._ordinal} but the buffer is on cuda:{self._ordinal}")
        if arr is None:
            return _errors.invalid(op, "bad arguments")
        if not isinstance(arr, np.ndarray):
            return _errors.invalid(op, f"out must be a numpy array, got {type(arr).__name__}")
        if arr.dtype != self._npdt:
            return _errors.invalid(op, f"dtype mismatch: array is {arr.dtype}, buffer is {self.dtype.value}")
        if arr.nbytes != self.nbytes:
            return _errors.invalid(op, f"size mismatch: array has {arr.nbytes} bytes, buffer {self.nbytes}")
        if not arr.flags.c_contiguous:
            return _errors.invalid(op, "the host array is not C-contiguous (use np.ascontiguousarray)")
        if to_host and not arr.flags.writeable:
            return _errors.invalid(op, "out is read-only")
        return _errors.invalid(op, "bad arguments")


# -- DLPack capsules' destructor ---------------------------------------------------------------------------
# A capsule is destroyed while its consumer's exception is pending (numpy's "Unsupported device" for a CUDA
# tensor).  A ctypes callback cannot run then: its first C-API call saw the pending error, the destructor gave
# up and the export leaked, and numpy's error came out as a SystemError.  This one sets the error aside first.

cdef extern from "Python.h":
    int _capsule_is_valid "PyCapsule_IsValid"(PyObject* capsule, const char* name)
    void* _capsule_pointer "PyCapsule_GetPointer"(PyObject* capsule, const char* name)
    void _err_fetch "PyErr_Fetch"(PyObject** kind, PyObject** value, PyObject** tb)
    void _err_restore "PyErr_Restore"(PyObject* kind, PyObject* value, PyObject* tb)

cdef object _dl_unconsumed = None  # _dlpack._drop: forget an export whose capsule nobody consumed


cdef void _dl_capsule_destructor(PyObject* capsule) noexcept:
    # Only an unconsumed capsule still has its producer's name; a consumer renames it and calls the deleter.
    cdef void* managed = NULL
    cdef PyObject *kind
    cdef PyObject *value
    cdef PyObject *tb
    if _capsule_is_valid(capsule, b"dltensor"):
        managed = _capsule_pointer(capsule, b"dltensor")
    elif _capsule_is_valid(capsule, b"dltensor_versioned"):
        managed = _capsule_pointer(capsule, b"dltensor_versioned")
    if managed == NULL:
        return
    _err_fetch(&kind, &value, &tb)
    _dl_forget(managed)
    _err_restore(kind, value, tb)


cdef void _dl_forget(void* managed) noexcept:
    # noexcept: should the call raise, Cython reports it as unraisable and clears it here, before the restore
    _dl_unconsumed(<uintptr_t>managed)


def dlpack_capsule_destructor(unconsumed):
    """The address of the C destructor for DLPack capsules; it calls `unconsumed(address)` for an unused one."""
    global _dl_unconsumed
    _dl_unconsumed = unconsumed
    return <uintptr_t><void*>_dl_capsule_destructor
