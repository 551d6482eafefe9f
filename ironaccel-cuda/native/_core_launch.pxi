# Kernel launch: argument plans packed in C, the plain launch, and LaunchConfig (cuLaunchKernelEx).

cdef enum:
    A_PTR = 1
    A_INT = 2     # a signed integer of `size` bytes
    A_UINT = 3    # an unsigned integer
    A_F32 = 4
    A_F64 = 5
    A_BOOL = 6
    A_RAW = 7     # a numpy scalar of exactly the parameter's kind and width: its value's bytes are copied

ctypedef struct ArgSlot:
    PyTypeObject* type
    int kind
    int size
    Py_ssize_t offset


cdef class _Plan:
    """How one tuple of argument types fills one kernel's parameters: a C argument block and its void* array."""

    cdef Py_ssize_t nargs
    cdef ArgSlot* slots
    cdef char* block
    cdef void** params
    cdef object packer  # the Python ArgPacker, used instead when some argument needs it (half, complex)
    cdef object types   # keeps the argument types alive
    cdef bint use_packer

    def __dealloc__(self):
        free(self.slots)
        free(self.block)
        free(self.params)


cdef dict _CODES = {"b": (A_INT, 1), "h": (A_INT, 2), "i": (A_INT, 4), "q": (A_INT, 8),
                    "B": (A_UINT, 1), "H": (A_UINT, 2), "I": (A_UINT, 4), "Q": (A_UINT, 8),
                    "f": (A_F32, 4), "d": (A_F64, 8), "?": (A_BOOL, 1)}


cdef dict _np_raw_kinds():
    """{numpy scalar type: (kind, width)} for the scalar types whose value can be copied straight out of the object
    (numpy's PyXxxScalarObject: PyObject_HEAD, then the C value), checked on this numpy once; empty if any
    differs.  Packing np.int32(3) otherwise goes through its __index__ (a new int), np.float32 through
    __float__."""
    cdef dict kinds = {}
    cdef bytes want
    for ch, kind in (("b", A_INT), ("h", A_INT), ("i", A_INT), ("l", A_INT), ("q", A_INT), ("B", A_UINT),
                     ("H", A_UINT), ("I", A_UINT), ("L", A_UINT), ("Q", A_UINT), ("f", A_F32), ("d", A_F64),
                     ("?", A_BOOL)):
        dt = np.dtype(ch)
        value = dt.type(1)
        want = np.array(1, dtype=dt).tobytes()
        if memcmp((<char*><PyObject*>value) + sizeof(PyObject), <char*>want, dt.itemsize) != 0:
            return {}
        kinds[dt.type] = (kind, dt.itemsize)
    return kinds


cdef dict _NP_RAW = _np_raw_kinds()


cdef _Plan _make_plan(object packer, tuple args):
    cdef _Plan p = _Plan.__new__(_Plan)
    cdef Py_ssize_t i, n = len(args)
    cdef Py_ssize_t size = packer.size
    p.nargs = n
    p.packer = packer
    p.types = tuple([type(a) for a in args])
    p.slots = <ArgSlot*>calloc(n if n else 1, sizeof(ArgSlot))
    p.block = <char*>calloc(size if size else 8, 1)
    p.params = <void**>calloc(n if n else 1, sizeof(void*))
    if p.slots == NULL or p.block == NULL or p.params == NULL:
        raise MemoryError("launch plan")
    p.use_packer = False
    for i in range(n):
        code, offset, is_buffer = packer.kinds[i]
        p.slots[i].type = <PyTypeObject*>p.types[i]
        p.slots[i].offset = offset
        p.params[i] = p.block + <Py_ssize_t>offset
        if is_buffer:
            if not isinstance(args[i], DeviceBuf):
                p.use_packer = True
            p.slots[i].kind = A_PTR
            p.slots[i].size = 8
        elif code in _CODES:
            kind, width = _CODES[code]
            p.slots[i].kind = A_RAW if _NP_RAW.get(p.types[i]) == (kind, width) else kind
            p.slots[i].size = width
        else:
            p.use_packer = True  # half or complex: the struct packer writes those
    return p


cdef inline bint _plan_matches(_Plan p, tuple args):
    cdef Py_ssize_t i
    if p is None or p.nargs != len(args):
        return False
    for i in range(p.nargs):
        if Py_TYPE(args[i]) != p.slots[i].type:
            return False
    return True


cdef int _pack(_Plan p, tuple args, int ordinal, object reachable) except -1:
    """Write `args` into the plan's block; raises (through the cold path) on a value that does not fit."""
    cdef Py_ssize_t i
    cdef ArgSlot* slot
    cdef char* dst
    cdef long long v
    cdef unsigned long long u
    cdef double d
    cdef float f
    cdef DeviceBuf b
    for i in range(p.nargs):
        slot = &p.slots[i]
        dst = p.block + slot.offset
        a = args[i]
        if slot.kind == A_RAW:
            memcpy(dst, (<char*><PyObject*>a) + sizeof(PyObject), slot.size)
        elif slot.kind == A_PTR:
            b = <DeviceBuf>a
            if b.ptr is None or (b._ordinal != ordinal and b._ordinal not in reachable):
                return -2
            memcpy(dst, &b._addr, 8)
        elif slot.kind == A_INT:
            v = PyLong_AsLongLong(a if type(a) is int else PyNumber_Index(a))
            if slot.size == 4:
                if v < -2147483648 or v > 2147483647:
                    return -2
                (<int*>dst)[0] = <int>v
            elif slot.size == 8:
                memcpy(dst, &v, 8)
            elif slot.size == 2:
                if v < -32768 or v > 32767:
                    return -2
                (<short*>dst)[0] = <short>v
            else:
                if v < -128 or v > 127:
                    return -2
                (<signed char*>dst)[0] = <signed char>v
        elif slot.kind == A_F32:
            d = PyFloat_AsDouble(a)
            f = <float>d
            if isinf(f) and not isinf(d):  # too large for a float parameter (struct refuses it too)
                return -2
            memcpy(dst, &f, 4)
        elif slot.kind == A_F64:
            d = PyFloat_AsDouble(a)
            memcpy(dst, &d, 8)
        elif slot.kind == A_UINT:
            u = PyLong_AsUnsignedLongLong(PyNumber_Index(a))
            if slot.size == 4:
                if u > 4294967295ULL:
                    return -2
                (<unsigned int*>dst)[0] = <unsigned int>u
            elif slot.size == 8:
                memcpy(dst, &u, 8)
            elif slot.size == 2:
                if u > 65535:
                    return -2
                (<unsigned short*>dst)[0] = <unsigned short>u
            else:
                if u > 255:
                    return -2
                (<unsigned char*>dst)[0] = <unsigned char>u
        else:  # A_BOOL
            (<unsigned char*>dst)[0] = 1 if PyObject_IsTrue(a) else 0
    return 0


cdef object _dim3 = None  # module._dim3: validates anything but a plain int


cdef object _dim3_checker():
    """`module._dim3`, imported at first use (module imports this extension)."""
    global _dim3
    if _dim3 is None:
        from .module import _dim3 as dim3

        _dim3 = dim3
    return _dim3


cdef inline int _dim(object value, unsigned int* out, str what) except -1:
    """An int or anything `module._dim3` accepts (1-3 ints) into out[0..2]; raises TypeError/OverflowError."""
    if type(value) is int:
        out[0] = value
        out[1] = 1
        out[2] = 1
        return 0
    if type(value) is tuple and len(<tuple>value) == 3:  # (x, y, z) of positive ints: no Python checker
        x, y, z = <tuple>value
        if type(x) is int and type(y) is int and type(z) is int and x >= 1 and y >= 1 and z >= 1:
            out[0] = x
            out[1] = y
            out[2] = z
            return 0
    x, y, z = _dim3_checker()(value, what)
    out[0] = x
    out[1] = y
    out[2] = z
    return 0


cdef void* _no_params[1]  # a non-NULL "no parameters" for the except-NULL convention (the driver ignores it)


cdef enum:
    MAX_ATTRS = 8


@cython.final
cdef class LaunchConfig:
    """Launch attributes for `Function.launch(..., config=)` (cuLaunchKernelEx), built once and reused.

    cooperative: blocks may synchronise grid-wide (the whole grid must be co-resident);
    cluster: thread-block cluster dimensions (an int or 1-3 ints; the grid must be a multiple);
    non_portable_cluster: allow clusters above the portable 8 blocks (the kernel attribute is set on first use);
    cluster_scheduling: None, "spread" or "load_balancing";
    programmatic_serialization: programmatic dependent launch (the kernel may start before the previous one
    on its stream ends, and waits with cudaGridDependencySynchronize);
    priority: this launch's priority (an int, as for streams);
    preferred_cluster: a larger cluster shape the driver may use where it fits (a multiple of `cluster`).
    """

    cdef CUlaunchAttribute attrs[MAX_ATTRS]
    cdef unsigned int nattrs
    cdef readonly bint cooperative
    cdef readonly object cluster
    cdef readonly bint non_portable_cluster
    cdef readonly object cluster_scheduling
    cdef readonly bint programmatic_serialization
    cdef readonly object priority
    cdef readonly object preferred_cluster

    def __init__(self, *, cooperative=False, cluster=None, non_portable_cluster=False, cluster_scheduling=None,
                 programmatic_serialization=False, priority=None, preferred_cluster=None):
        cdef CUlaunchAttribute* a
        op = "LaunchConfig"
        for name, flag in (("cooperative", cooperative), ("non_portable_cluster", non_portable_cluster),
                           ("programmatic_serialization", programmatic_serialization)):
            if not isinstance(flag, bool):
                raise _errors.invalid(op, f"{name} must be a bool, got {flag!r}")
        memset(self.attrs, 0, sizeof(self.attrs))
        self.nattrs = 0
        self.cooperative = cooperative
        self.non_portable_cluster = non_portable_cluster
        self.programmatic_serialization = programmatic_serialization
        if cooperative:
            a = self._next()
            a.id = IA_LAUNCH_ATTRIBUTE_COOPERATIVE
            a.value.cooperative = 1
        self.cluster = None if cluster is None else _positive_dim3(cluster, "cluster")
        if self.cluster is not None:
            a = self._next()
            a.id = IA_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
            a.value.clusterDim.x, a.value.clusterDim.y, a.value.clusterDim.z = self.cluster
        elif non_portable_cluster:
            raise _errors.invalid(op, "non_portable_cluster needs cluster=")
        if cluster_scheduling not in (None, "spread", "load_balancing"):
            raise _errors.invalid(op, f"cluster_scheduling must be None, 'spread' or 'load_balancing', got "
                                  f"{cluster_scheduling!r}")
        self.cluster_scheduling = cluster_scheduling
        if cluster_scheduling is not None:
            a = self._next()
            a.id = IA_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE
            a.value.clusterSchedulingPolicyPreference = (IA_CLUSTER_SCHEDULING_SPREAD if cluster_scheduling == "spread"
                                                         else IA_CLUSTER_SCHEDULING_LOAD_BALANCING)
        if programmatic_serialization:
            a = self._next()
            a.id = IA_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
            a.value.programmaticStreamSerializationAllowed = 1
        if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)
                                     or not -(1 << 31) <= priority < 1 << 31):
            raise _errors.invalid(op, f"priority must be an int, got {priority!r}")
        self.priority = priority
        if priority is not None:
            a = self._next()
            a.id = IA_LAUNCH_ATTRIBUTE_PRIORITY
            a.value.priority = priority
        self.preferred_cluster = None if preferred_cluster is None else _positive_dim3(preferred_cluster,
                                                                                          "preferred_cluster")
        if self.preferred_cluster is not None:
            if self.cluster is None or any(p % c for p, c in zip(self.preferred_cluster, self.cluster)):
                raise _errors.invalid(op, f"preferred_cluster {self.preferred_cluster} must be a multiple of "
                                      f"cluster {self.cluster}")
            a = self._next()
            a.id = IA_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION
            a.value.preferredClusterDim.x, a.value.preferredClusterDim.y, a.value.preferredClusterDim.z = \
                self.preferred_cluster

    cdef CUlaunchAttribute* _next(self) except NULL:
        if self.nattrs == MAX_ATTRS:
            raise _errors.invalid("LaunchConfig", "too many attributes")
        self.nattrs += 1
        return &self.attrs[self.nattrs - 1]

    def __repr__(self):
        parts = [f"{k}={getattr(self, k)!r}" for k in ("cooperative", "cluster", "non_portable_cluster",
                 "cluster_scheduling", "programmatic_serialization", "priority", "preferred_cluster")
                 if getattr(self, k) not in (None, False)]
        return f"LaunchConfig({', '.join(parts)})"


def _positive_dim3(value, what):
    dims = _dim3_of(value, what)
    if any(not 0 < d < 1 << 32 for d in dims):  # the attribute holds unsigned ints
        raise _errors.invalid("LaunchConfig", f"{what} dimensions must be positive and below 2**32, got {value!r}")
    return dims


def _dim3_of(value, what):
    return tuple(_dim3_checker()(value, what))


cdef int _pack_or_raise(_Plan p, tuple args, FunctionCore fn) except -1:
    """Pack `args` into the plan's block, or raise the typed error naming the launch and the argument."""
    cdef int r
    try:
        r = _pack(p, args, fn._ordinal, fn._reachable)
    except OverflowError:
        r = -2
    except Exception as exc:
        from .launch import pack_error

        raise pack_error(args, exc, fn.name, packer=p.packer) from None
    if r:
        raise fn._pack_failure(args, p.packer)
    return 0


cdef int _launch_ex(CUfunction f, LaunchConfig cfg, unsigned int* g, unsigned int* bl, unsigned int smem,
                    uintptr_t sh, void** params) except -1:
    """cuLaunchKernelEx with the config's attributes: 0 when queued, 1 to pack again and retry; raises the typed
    error naming cuLaunchKernelEx otherwise."""
    cdef CUlaunchConfig c
    cdef int err
    c.gridDimX, c.gridDimY, c.gridDimZ = g[0], g[1], g[2]
    c.blockDimX, c.blockDimY, c.blockDimZ = bl[0], bl[1], bl[2]
    c.sharedMemBytes = smem
    c.hStream = <CUstream>sh
    c.attrs = cfg.attrs
    c.numAttrs = cfg.nattrs
    err = cuLaunchKernelEx(&c, f, params, NULL)
    if err == 0:
        return 0
    _again(err, IA_cuLaunchKernelEx, sh, True)  # returns only when a retry may succeed (bound, context)
    return 1


cdef class FunctionCore:
    """Function's hot method (launch).

    Cold helpers of the subclass: `_prepare(args) -> ArgPacker`, `_bad_stream(s)`,
    `_launch_error(s, exc, grid, block, smem)`, `_allow_non_portable_clusters()`.
    """

    cdef uintptr_t _hv
    cdef bint _isclosed
    cdef public int _ordinal
    cdef public object _default
    cdef public object _reachable
    cdef public object name
    cdef public object _tls
    cdef object __weakref__
    cdef _Plan _last
    cdef dict _plans
    cdef bint _non_portable_ok

    def __cinit__(self):
        self._isclosed = True

    @property
    def _h(self):
        return CLOSED if self._isclosed else PyLong_FromUnsignedLongLong(self._hv)

    @_h.setter
    def _h(self, value):
        if value is CLOSED:
            self._isclosed = True
        else:
            self._hv = <uintptr_t>int(value)
            self._isclosed = False

    cdef _Plan _plan_for(self, tuple args):
        key = tuple([type(a) for a in args])
        if self._plans is None:
            self._plans = {}
        p = self._plans.get(key)
        if p is None:
            p = _make_plan(self._prepare(args), args)
            self._plans[key] = p
        return <_Plan>p

    cdef int _shape(self, object s, object grid, object block, object shared_mem, unsigned int* g,
                    unsigned int* bl, unsigned int* smem) except -1:
        """Check the stream and turn grid/block/shared_mem into C values (or raise the typed error)."""
        try:
            _dim(grid, g, "grid")
            _dim(block, bl, "block")
            smem[0] = shared_mem
        except (TypeError, OverflowError, ValueError) as exc:
            if isinstance(exc, IronAccelError):
                raise
            raise self._launch_error(s, exc, grid, block, shared_mem) from None
        if not isinstance(s, StreamCore) or (<StreamCore>s)._ordinal != self._ordinal:
            raise self._bad_stream(s)
        if (<StreamCore>s)._isclosed:
            raise self._launch_error(s, TypeError("closed stream"), grid, block, shared_mem)
        return 0

    cdef int _check_config(self, LaunchConfig config) except -1:
        if config.non_portable_cluster and not self._non_portable_ok:
            self._allow_non_portable_clusters()
            self._non_portable_ok = True
        return 0

    def launch(self, grid, block, *args, stream=None, shared_mem=0, LaunchConfig config=None):
        """Queue the kernel on `stream` (default: the device's default stream).

        `grid` and `block` are ints or (x, y, z) tuples; `shared_mem` is the dynamic shared memory per
        block in bytes; `config` (a LaunchConfig) adds launch attributes (cooperative, clusters, ...) and
        launches through cuLaunchKernelEx.  Arguments: see the `launch` module docstring for how they map
        onto the kernel's parameters.

        Everything is checked before the arguments are packed, and nothing between packing and the launch
        runs Python code, so one shared argument block per plan is safe under the GIL.
        """
        self._launch(grid, block, args, stream, shared_mem, config)

    cdef int _launch(self, grid, block, tuple args, stream, shared_mem, LaunchConfig config) except -1:
        cdef _Plan p
        cdef unsigned int g[3]
        cdef unsigned int bl[3]
        cdef unsigned int smem
        cdef void** params
        cdef int err
        cdef uintptr_t sh
        if self._isclosed:
            raise _errors.closed("cuLaunchKernel", "function (its module was closed)")
        p = self._last
        if not _plan_matches(p, args):
            p = self._plan_for(args)
            self._last = p
        s = self._default if stream is None else stream
        self._shape(s, grid, block, shared_mem, g, bl, &smem)
        if config is not None:
            self._check_config(config)
        sh = (<StreamCore>s)._hv
        while True:
            if p.use_packer:  # half or complex arguments: the struct packer, one per thread
                params = self._pack_in_python(args)
            else:
                _pack_or_raise(p, args, self)
                params = p.params if p.nargs else NULL
            if config is not None:
                if _launch_ex(<CUfunction>self._hv, config, g, bl, smem, sh, params) == 0:
                    return 0
                continue
            err = cuLaunchKernel(<CUfunction>self._hv, g[0], g[1], g[2], bl[0], bl[1], bl[2], smem, <CUstream>sh,
                                 params, NULL)
            if err == 0:
                return 0
            _again(err, IA_cuLaunchKernel, sh, True)  # then pack again: Python ran, the block may be stale

    cdef void** _pack_in_python(self, tuple args) except NULL:
        try:
            packer = self._tls.packers[tuple([type(a) for a in args])]
        except (AttributeError, KeyError):
            packer = self._prepare(args)
        try:
            packer.pack(args)
        except Exception as exc:
            from .launch import pack_error

            raise pack_error(args, exc, self.name, packer=packer) from None
        cdef uintptr_t params = packer.params
        return <void**>params if params else <void**>_no_params

    def _pack_failure(self, args, packer=None):
        """Cold: why `_pack` refused these arguments (a closed or foreign buffer, a value that does not fit)."""
        import struct

        from .launch import pack_error

        for i, a in enumerate(args):
            if isinstance(a, DeviceBuf) and (<DeviceBuf>a).ptr is not None and (<DeviceBuf>a)._ordinal != self._ordinal:
                return _errors.invalid("cuLaunchKernel", f"{self.name}: argument {i} is a buffer on "
                                       f"cuda:{(<DeviceBuf>a)._ordinal} but the kernel runs on cuda:{self._ordinal} "
                                       "(enable_peer_access first to use peer memory)")
        return pack_error(args, struct.error("argument out of range"), self.name, packer=packer)



@cython.final
cdef class PreparedLaunch:
    """One kernel with its launch shape, stream and arguments packed once; calling it queues the launch again.

    Made by `Function.prepare(grid, block, *args, stream=None, shared_mem=0, config=None)`.  It owns its
    argument block (a plain launch of the same function never overwrites it) and holds its buffers alive;
    each call checks that the function, the stream and every buffer argument are still open.
    `set_args(*args)` packs new values of the same types.
    """

    cdef FunctionCore fn
    cdef _Plan plan
    cdef object packer
    cdef void** params
    cdef unsigned int g[3]
    cdef unsigned int bl[3]
    cdef unsigned int smem
    cdef object stream
    cdef uintptr_t sh
    cdef readonly tuple args
    cdef tuple bufs
    cdef LaunchConfig config

    def __init__(self, *args, **kwargs):
        raise TypeError("make prepared launches with Function.prepare()")

    def __call__(self):
        cdef DeviceBuf b
        cdef int err
        if self.fn._isclosed:
            raise _errors.closed("cuLaunchKernel", "function (its module was closed)")
        if (<StreamCore>self.stream)._isclosed:
            raise _errors.closed("cuLaunchKernel", "stream")
        for b in self.bufs:
            if b.ptr is None:
                raise _errors.closed("cuLaunchKernel", "a buffer argument of this prepared launch")
        while True:
            if self.config is not None:
                if _launch_ex(<CUfunction>self.fn._hv, self.config, self.g, self.bl, self.smem, self.sh,
                              self.params) == 0:
                    return
                continue
            err = cuLaunchKernel(<CUfunction>self.fn._hv, self.g[0], self.g[1], self.g[2], self.bl[0], self.bl[1],
                                 self.bl[2], self.smem, <CUstream>self.sh, self.params, NULL)
            if err == 0:
                return
            _again(err, IA_cuLaunchKernel, self.sh, True)

    def set_args(self, *args):
        """Pack new argument values (the same types, in the same order) for the next calls."""
        if len(args) != len(self.args) or any(type(a) is not type(b) for a, b in zip(args, self.args)):
            raise _errors.invalid("PreparedLaunch.set_args", f"{self.fn.name}: the arguments must have the types "
                                  f"they were prepared with ({', '.join(type(a).__name__ for a in self.args)})")
        self._pack(args)

    cdef int _pack(self, tuple args) except -1:
        if self.plan is not None:
            _pack_or_raise(self.plan, args, self.fn)
        else:
            try:
                self.packer.pack(args)
            except Exception as exc:
                from .launch import pack_error

                raise pack_error(args, exc, self.fn.name, packer=self.packer) from None
        self.args = args
        self.bufs = tuple([a for a in args if isinstance(a, DeviceBuf)])
        return 0


def prepare_launch(FunctionCore fn, grid, block, tuple args, stream, shared_mem, LaunchConfig config, packer):
    """A PreparedLaunch of `fn` (see Function.prepare); `packer` is a fresh ArgPacker of its own for `args`."""
    cdef PreparedLaunch p = PreparedLaunch.__new__(PreparedLaunch)
    cdef _Plan plan
    cdef uintptr_t addr
    if fn._isclosed:
        raise _errors.closed("cuLaunchKernel", "function (its module was closed)")
    s = fn._default if stream is None else stream
    fn._shape(s, grid, block, shared_mem, p.g, p.bl, &p.smem)
    if config is not None:
        fn._check_config(config)
    p.fn = fn
    p.stream = s
    p.sh = (<StreamCore>s)._hv
    p.config = config
    p.packer = packer
    plan = _make_plan(packer, args)
    if plan.use_packer:
        addr = packer.params
        p.params = <void**>addr if addr else NULL
    else:
        p.plan = plan
        p.params = plan.params if plan.nargs else NULL
    p._pack(args)
    return p


def launch(uintptr_t f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by,
           unsigned int bz, unsigned int smem, uintptr_t s, uintptr_t params):
    """cuLaunchKernel with `params` the address of a packed void* array (0 for none): for callers that pack
    arguments themselves (the PyCUDA surface's struct-format launches)."""
    cdef int err
    while True:
        err = cuLaunchKernel(<CUfunction>f, gx, gy, gz, bx, by, bz, smem, <CUstream>s, <void**>params, NULL)
        if err == 0:
            return
        _again(err, IA_cuLaunchKernel, s, True)


# -- the cuda.core compat's launch() ---------------------------------------------------------------------------

cdef inline tuple _unwrap(tuple args, type ptr_type):
    """`args` with every argument of type `ptr_type` (the compat's Buffer) replaced by its DeviceBuf (`_mem`, the
    packer's fastest kind; one of another device takes the cold path, which passes the address), else its
    `_ptr`; a closed one is ClosedError."""
    cdef Py_ssize_t i, n = len(args)
    for i in range(n):
        if type(args[i]) is ptr_type:
            break
    else:
        return args
    cdef tuple out = PyTuple_New(n)
    for i in range(n):
        item = args[i]
        if type(item) is ptr_type:
            m = item._mem
            if type(m) is DeviceBuf:
                item = m
            elif m is None and not item._ptr and item._mr is None:  # closed: its address 0 would fault the context
                raise _errors.closed("cuLaunchKernel", f"argument {i} (a closed Buffer)")
            else:
                item = item._ptr
        Py_INCREF(item)  # PyTuple_SET_ITEM steals it
        PyTuple_SET_ITEM(out, i, item)
    return out


cdef object _cc_cold = None
cdef type _cc_buffer = None


def set_compat_launch(cold, type buffer_type):
    """Register the cuda.core compat's cold launch path, `cold(stream, config, kernel, args, error)`, and its
    Buffer type, for `compat_launch`."""
    global _cc_cold, _cc_buffer
    _cc_cold = cold
    _cc_buffer = buffer_type


def compat_launch(stream, config, kernel, *kernel_args):
    """cuda.core's launch(stream, config, kernel, *kernel_args), as ironaccel_cuda.compat.cuda_core.launch.

    The common case -- a plain LaunchConfig, a stream of the kernel's device -- reads the compat objects' fields
    and launches here, Buffers passed as their DeviceBufs (or addresses); everything else (launch attributes, graph builders,
    foreign streams, arguments the packer refuses, bad input) goes to the compat's cold path, which checks,
    converts and raises cuda.core's errors.  (Tried: the same fast path written in Python, calling
    `_launch_unwrapping`, and a generated Python function per argument count that unpacked, unwrapped and
    called `launch` with keywords: both slower per launch than this.)
    """
    cdef FunctionCore fn
    cdef tuple shape
    try:
        f = kernel._fn
        fast = config._fast  # (grid, block, shared memory) of a plain LaunchConfig, else None
    except AttributeError:
        return _cc_cold(stream, config, kernel, kernel_args, None)
    if type(fast) is tuple and isinstance(f, FunctionCore) and isinstance(stream, StreamCore):
        fn = <FunctionCore>f
        if (<StreamCore>stream)._ordinal == fn._ordinal:
            shape = <tuple>fast
            try:
                fn._launch(shape[0], shape[1], _unwrap(kernel_args, _cc_buffer), stream, shape[2], None)
                return None
            except _errors.DriverError as exc:
                return _cc_cold(stream, config, kernel, kernel_args, exc)
    return _cc_cold(stream, config, kernel, kernel_args, None)
