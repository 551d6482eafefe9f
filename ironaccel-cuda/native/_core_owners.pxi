# Graph attachment owners held by CUDA user objects (owners.h has the design): `graph_attach` makes a user
# object that holds one Python object for a graph, the driver's destructor queues it, and `_drain_owners`
# drops the queued references on the main thread.

cdef extern from "owners.h" nogil:
    ctypedef struct ia_owner:
        void* obj
        ia_owner* next
    void ia_owner_push(ia_owner* o)
    ia_owner* ia_owner_take_all()
    void ia_owner_dropped(long n)
    int ia_owner_claim_drain()
    void ia_owner_drain_started()
    long ia_owner_pending()

cdef extern from "Python.h":
    int Py_AddPendingCall(int (*func)(void*) noexcept, void* arg) nogil

cdef unsigned int CU_USER_OBJECT_NO_DESTRUCTOR_SYNC = 1
cdef unsigned int CU_GRAPH_USER_OBJECT_MOVE = 1
cdef bint _owners_closing = False  # set at exit: a release after it is never dropped (the process ends)


cdef long _drop_released() noexcept:
    """Drop every queued owner (GIL held); how many.  An owner's __del__ may release more: loop until none."""
    cdef ia_owner* o
    cdef ia_owner* nxt
    cdef long n = 0, batch
    while True:
        o = ia_owner_take_all()
        if o == NULL:
            return n
        batch = 0
        while o != NULL:
            nxt = o.next
            Py_DECREF(<object>o.obj)  # may run __del__ (a buffer's free); exceptions there are unraisable
            free(o)
            o = nxt
            batch += 1
        ia_owner_dropped(batch)
        n += batch


cdef int _drain_owners(void* unused) noexcept:
    """The pending call (main thread, GIL held)."""
    ia_owner_drain_started()
    _drop_released()
    return 0


cdef void _owner_released(void* data) noexcept nogil:
    """The user object's destructor: a driver thread, or inside cuGraph*Destroy; no GIL, no CUDA."""
    ia_owner_push(<ia_owner*>data)
    if not _owners_closing and ia_owner_claim_drain():
        if Py_AddPendingCall(_drain_owners, NULL) != 0:
            ia_owner_drain_started()  # the pending-call queue is full: the next release or attach drains


def graph_attach(uintptr_t graph, owner):
    """Hold `owner` for graph `graph` through a new CUDA user object whose one reference the graph owns.

    Clones, instantiations and child-graph nodes of the graph get their own references from the driver, so
    `owner` lives until the last of them is destroyed and has finished running.  Returns the user object's
    handle, to give back with `graph_detach`, or 0 where the driver has no user objects (then nothing holds
    `owner` but the caller).
    """
    cdef CUuserObject uo = NULL
    cdef ia_owner* node
    cdef int err
    _drop_released()
    node = <ia_owner*>malloc(sizeof(ia_owner))
    if node == NULL:
        raise MemoryError("graph_attach: out of host memory")
    node.obj = <void*>owner
    node.next = NULL
    Py_INCREF(owner)
    while True:
        err = cuUserObjectCreate(&uo, <void*>node, _owner_released, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC)
        if err == 0:
            break
        if err == IA_MISSING or err == NOT_SUPPORTED:
            Py_DECREF(owner)
            free(node)
            return 0
        try:
            _again(err, IA_cuUserObjectCreate, 0, False)
        except BaseException:
            Py_DECREF(owner)
            free(node)
            raise
    while True:
        err = cuGraphRetainUserObject(<CUgraph>graph, uo, 1, CU_GRAPH_USER_OBJECT_MOVE)
        if err == 0:
            return <uintptr_t>uo
        try:
            _again(err, IA_cuGraphRetainUserObject, 0, False)
        except BaseException:
            cuUserObjectRelease(uo, 1)  # the destructor queues the owner; the next drain drops it
            _drop_released()
            raise


def graph_detach(uintptr_t graph, uintptr_t user_object):
    """Give back the reference `graph` owns of a user object from `graph_attach` (a node was destroyed or
    replaced); its owner goes when no clone or executable graph holds it any longer."""
    cdef int err
    if user_object == 0:
        return
    while True:
        err = cuGraphReleaseUserObject(<CUgraph>graph, <CUuserObject>user_object, 1)
        if err == 0:
            break
        _again(err, IA_cuGraphReleaseUserObject, 0, False)
    _drop_released()


def drain_owners():
    """Drop the owners the driver has released so far (normally a pending call does it); how many."""
    return _drop_released()


def owners_pending():
    """Owners released by the driver and not yet dropped."""
    return ia_owner_pending()


def _owners_at_exit():
    global _owners_closing
    _owners_closing = True


atexit.register(_owners_at_exit)
