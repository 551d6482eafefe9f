# PoolCore: MemPool's power-of-two bucket cache (pool.py adds the rest).

ctypedef struct Entry:
    uintptr_t addr
    PyObject* obj  # the address as a Python int, made once per block (a strong reference)

ctypedef struct Stack:
    Entry* items
    Py_ssize_t n
    Py_ssize_t cap

ctypedef struct TCache:
    unsigned long tid
    Stack* lists
    long long hits
    long long misses
    long long bypass
    long long reserved


cdef int _push(Stack* st, uintptr_t addr, PyObject* obj) except -1:
    cdef Py_ssize_t cap
    cdef Entry* items
    if st.n == st.cap:
        cap = st.cap * 2 if st.cap else 16
        items = <Entry*>realloc(st.items, cap * sizeof(Entry))
        if items == NULL:
            raise MemoryError("MemPool")
        st.items = items
        st.cap = cap
    Py_INCREF(<object>obj)
    st.items[st.n].addr = addr
    st.items[st.n].obj = obj
    st.n += 1
    return 0


cdef class PoolCore:
    """Power-of-two byte buckets in front of cuMemAllocAsync / cuMemFreeAsync.

    Each thread has its own free list per bucket (found by thread id, the
    last one cached): alloc pops from it, a closed buffer pushes onto the
    closing thread's list -- no lock (the GIL is held throughout) and no
    driver call.  A list longer than `front_depth` moves its older half to the
    shared lists (bounded by `max_bytes`, the rest back to the driver); an
    empty list refills from them before asking the driver.
    """

    cdef public object stream
    cdef public object fallback
    cdef public object device
    cdef public bint _closed
    cdef readonly int min_shift
    cdef readonly long long max_block
    cdef readonly long long front_depth
    cdef readonly long long max_bytes
    cdef int nb
    cdef Stack* shared
    cdef long long shared_bytes
    cdef TCache** threads
    cdef Py_ssize_t nthreads
    cdef Py_ssize_t cap_threads
    cdef unsigned long last_tid
    cdef TCache* last
    cdef long long released
    cdef long long _total
    cdef int _ordinal
    cdef uintptr_t _fallback_h

    def __init__(self, stream, fallback, *, min_block, max_block, front_depth, max_bytes):
        self.stream = stream
        self.fallback = fallback
        self._fallback_h = <uintptr_t>int(fallback)
        self.device = None
        self.min_shift = (min_block - 1).bit_length()
        self.max_block = max_block
        self.front_depth = front_depth
        self.max_bytes = max_bytes
        self._closed = False
        self.nb = max_block.bit_length() + 1
        self.shared = <Stack*>calloc(self.nb, sizeof(Stack))
        if self.shared == NULL:
            raise MemoryError("MemPool")
        self._ordinal = -1

    def _attach(self, device, total_memory):
        self.device = device
        self._ordinal = device.ordinal
        self._total = total_memory

    def __dealloc__(self):
        cdef Py_ssize_t t, b, i
        cdef TCache* tc
        if self.threads != NULL:
            for t in range(self.nthreads):
                tc = self.threads[t]
                for b in range(self.nb):
                    for i in range(tc.lists[b].n):
                        Py_DECREF(<object>tc.lists[b].items[i].obj)
                    free(tc.lists[b].items)
                free(tc.lists)
                free(tc)
            free(self.threads)
        if self.shared != NULL:
            for b in range(self.nb):
                for i in range(self.shared[b].n):
                    Py_DECREF(<object>self.shared[b].items[i].obj)
                free(self.shared[b].items)
            free(self.shared)

    cdef TCache* _cache(self) except NULL:
        cdef unsigned long tid = PyThread_get_thread_ident()
        cdef Py_ssize_t i
        cdef TCache* tc
        cdef TCache** grown
        if tid == self.last_tid and self.last != NULL:
            return self.last
        for i in range(self.nthreads):
            if self.threads[i].tid == tid:
                self.last_tid = tid
                self.last = self.threads[i]
                return self.last
        if self.nthreads == self.cap_threads:
            grown = <TCache**>realloc(self.threads, (self.cap_threads * 2 + 4) * sizeof(TCache*))
            if grown == NULL:
                raise MemoryError("MemPool")
            self.threads = grown
            self.cap_threads = self.cap_threads * 2 + 4
        tc = <TCache*>calloc(1, sizeof(TCache))
        if tc == NULL:
            raise MemoryError("MemPool")
        tc.lists = <Stack*>calloc(self.nb, sizeof(Stack))
        if tc.lists == NULL:
            free(tc)
            raise MemoryError("MemPool")
        tc.tid = tid
        self.threads[self.nthreads] = tc
        self.nthreads += 1
        self.last_tid = tid
        self.last = tc
        return tc

    cdef uintptr_t _handle(self) except? 0:
        s = self.stream
        if isinstance(s, StreamCore):
            if (<StreamCore>s)._isclosed:
                return self._fallback_h
            return (<StreamCore>s)._hv
        h = s._h
        return self._fallback_h if h is CLOSED else <uintptr_t>int(h)

    cdef int _give(self, uintptr_t addr, object obj, int bucket) except -1:
        """A block back from a closed buffer (any thread)."""
        cdef TCache* tc
        cdef Stack* st
        if bucket < 0 or self._closed:
            _mem_free_async(addr, self._handle())
            return 0
        tc = self._cache()
        st = &tc.lists[bucket]
        _push(st, addr, <PyObject*>obj)
        if st.n > self.front_depth:
            self._spill(st, bucket)
        return 0

    cdef int _spill(self, Stack* st, int bucket) except -1:
        cdef Py_ssize_t half = st.n // 2, i
        cdef long long size = 1LL << bucket
        cdef Entry e
        cdef Entry* moved = <Entry*>malloc(half * sizeof(Entry))
        if moved == NULL:
            raise MemoryError("MemPool")
        memcpy(moved, st.items, half * sizeof(Entry))  # the oldest half
        memmove(st.items, st.items + half, (st.n - half) * sizeof(Entry))
        st.n -= half
        failure = None
        for i in range(half):
            e = moved[i]
            try:
                if self.shared_bytes + size <= self.max_bytes:
                    _push(&self.shared[bucket], e.addr, e.obj)
                    self.shared_bytes += size
                else:
                    self.released += size
                    _mem_free_async(e.addr, self._handle())
            except BaseException as exc:  # keep going: every moved entry must land somewhere
                if failure is None:
                    failure = exc
            Py_DECREF(<object>e.obj)
        free(moved)
        if failure is not None:
            raise failure
        return 0

    def alloc(self, size, dtype="uint8"):
        """`size` elements of `dtype` from the pool (a DeviceBuf whose close() returns it here)."""
        cdef long long n, itemsize, nbytes
        cdef int b
        cdef TCache* tc
        cdef Stack* st
        cdef Entry e
        cdef DeviceBuf buf
        cdef CUdeviceptr dp
        if self._closed:
            raise _errors.closed("MemPool.alloc", "pool")
        if _disabled:  # a forked child: the cached blocks are the parent's
            raise _errors.InvalidState(_errors.BACKEND, "MemPool.alloc", detail=_disabled_reason)
        spec = _dtype_spec(dtype, "MemPool.alloc")
        if type(size) is not int:
            size = self.device._size_arg(size, "MemPool.alloc")
        itemsize = spec[2]
        n = _count(size, itemsize, self._total, self.device, "MemPool.alloc")
        nbytes = n * itemsize
        tc = self._cache()
        buf = DeviceBuf.__new__(DeviceBuf)
        if nbytes > self.max_block:
            tc.bypass += 1
            dp = _mem_alloc_async(<size_t>nbytes, self._handle())
            buf.ptr = PyLong_FromUnsignedLongLong(dp)
            buf._addr = <uintptr_t>dp
            buf._bucket = -1
        else:
            b = self.min_shift
            if nbytes > (1LL << b):
                b = 64 - __builtin_clzll(<unsigned long long>(nbytes - 1))
            st = &tc.lists[b]
            if st.n:
                st.n -= 1
                e = st.items[st.n]
                tc.hits += 1
                buf.ptr = <object>e.obj  # the list's reference passes to the buffer
                Py_DECREF(<object>e.obj)
                buf._addr = e.addr
            else:
                self._take_slow(tc, b, buf)
            buf._bucket = b
        buf._nbytes = <size_t>nbytes
        buf.size = size
        buf.nbytes = size if itemsize == 1 else nbytes
        buf.dtype = spec[0]
        buf._npdt = spec[1]
        buf.device = self.device
        buf._ordinal = self._ordinal
        buf._stream = self.stream
        buf._kind = K_POOL
        buf._pool = self
        return buf

    cdef int _take_slow(self, TCache* tc, int b, DeviceBuf buf) except -1:
        cdef Stack* sh = &self.shared[b]
        cdef Entry e
        cdef CUdeviceptr dp
        if sh.n:
            sh.n -= 1
            e = sh.items[sh.n]
            self.shared_bytes -= 1LL << b
            tc.hits += 1
            buf.ptr = <object>e.obj
            Py_DECREF(<object>e.obj)
            buf._addr = e.addr
            return 0
        dp = _mem_alloc_async(<size_t>(1LL << b), self._handle())
        tc.misses += 1
        tc.reserved += 1LL << b
        buf.ptr = PyLong_FromUnsignedLongLong(dp)
        buf._addr = <uintptr_t>dp
        return 0

    def drain(self):
        """Release every cached block to the driver; returns the bytes released."""
        cdef long long total = 0
        cdef Py_ssize_t t, b
        cdef Stack* st
        cdef Entry e
        for t in range(self.nthreads + 1):
            for b in range(self.nb):
                st = &self.shared[b] if t == self.nthreads else &self.threads[t].lists[b]
                while st.n:
                    st.n -= 1
                    e = st.items[st.n]
                    if t == self.nthreads:
                        self.shared_bytes -= 1LL << b
                    total += 1LL << b
                    self.released += 1LL << b
                    try:
                        _mem_free_async(e.addr, self._handle())
                    finally:
                        Py_DECREF(<object>e.obj)
        return total

    def counters(self):
        """The PoolStats fields, as a dict."""
        cdef long long hits = 0, misses = 0, bypass = 0, reserved = 0, held = 0, blocks = 0
        cdef Py_ssize_t t, b
        cdef TCache* tc
        for b in range(self.nb):
            held += self.shared[b].n << b
            blocks += self.shared[b].n
        for t in range(self.nthreads):
            tc = self.threads[t]
            hits += tc.hits
            misses += tc.misses
            bypass += tc.bypass
            reserved += tc.reserved
            for b in range(self.nb):
                held += tc.lists[b].n << b
                blocks += tc.lists[b].n
        reserved -= self.released
        return {
            "hits": hits,
            "misses": misses,
            "bypass": bypass,
            "bytes_held": held,
            "blocks_held": blocks,
            "bytes_reserved": reserved,
            "bytes_in_use": reserved - held,
            "threads": self.nthreads,
        }

