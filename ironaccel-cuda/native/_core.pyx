# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, binding=False
# cython: initializedcheck=False, embedsignature=False, auto_pickle=False
"""The compiled core of ironaccel-cuda: the hot methods of its public classes, calling the driver directly.

The driver's entry points are one table (entry_points.h) of C function pointers, looked up once with
`cuGetProcAddress` at the first call (cuda.bindings has loaded libcuda by then); no CUDA header is needed
to build this.  Until then every pointer is a stub that returns IA_UNBOUND, so a first call binds and
retries; in a forked child `disable` swaps in stubs that fail (releases succeed and do nothing).  The
success path creates no Python object it does not return; errors take a cold path (`_again`) that raises
the typed error naming the call.

The GIL is held across calls that return at once (launch, record, alloc, async copies from page-locked
memory) and released around calls that can wait (synchronize after a query says "not ready", pageable
copies, the staging pipeline).  All pool and packer state is changed only while holding the GIL, so the
warm paths take no lock of their own.

One concept per include file: driver binding and errors, streams and events, host copies, DeviceBuf, the
Device core, launch, the MemPool cache, graph attachment owners, the cuda.core compat's Buffer.  They are one
extension module so that the driver table exists once (see ../DESIGN.md).
"""

cimport cython
from cpython.buffer cimport PyBUF_ANY_CONTIGUOUS, PyBUF_C_CONTIGUOUS, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.long cimport PyLong_AsLongLong, PyLong_AsUnsignedLongLong, PyLong_FromUnsignedLongLong
from cpython.object cimport Py_TYPE, PyObject, PyTypeObject
from cpython.ref cimport Py_DECREF, Py_INCREF
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_New, PyTuple_SET_ITEM
from libc.math cimport isinf
from libc.stdint cimport uintptr_t
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcmp, memcpy, memmove, memset

import atexit
import os
import threading
import weakref

import numpy as np
from ironaccel.errors import IronAccelError

from . import dtypes as _dtypes
from . import errors as _errors

cdef extern from "pythread.h":
    unsigned long PyThread_get_thread_ident()
    ctypedef void* PyThread_type_lock
    PyThread_type_lock PyThread_allocate_lock()
    void PyThread_free_lock(PyThread_type_lock lock)
    int PyThread_acquire_lock(PyThread_type_lock lock, int waitflag) nogil
    void PyThread_release_lock(PyThread_type_lock lock) nogil

cdef extern from "Python.h":
    double PyFloat_AsDouble(object) except? -1.0
    object PyNumber_Index(object)
    int PyObject_IsTrue(object) except -1

cdef extern from "driver.h" nogil:
    ctypedef int CUresult
    ctypedef int CUdevice
    ctypedef unsigned long long CUdeviceptr
    ctypedef void* CUcontext
    ctypedef void* CUstream
    ctypedef void* CUevent
    ctypedef void* CUfunction
    ctypedef void* CUgraphExec
    ctypedef void* CUgraph
    ctypedef void* CUuserObject
    ctypedef void* CUmemoryPool
    ctypedef int CUstreamCaptureStatus
    ctypedef void (*CUhostFn)(void* userData) noexcept nogil
    ctypedef struct CUmemPoolPtrExportData:
        unsigned char reserved[64]
    ctypedef struct CUmemLocation:
        int type
        int id
    ctypedef struct CUmemcpyAttributes:
        int srcAccessOrder
        CUmemLocation srcLocHint
        CUmemLocation dstLocHint
        unsigned int flags
    ctypedef struct ia_dim3:
        unsigned int x
        unsigned int y
        unsigned int z
    ctypedef union CUlaunchAttributeValue:
        int cooperative
        ia_dim3 clusterDim
        int clusterSchedulingPolicyPreference
        int programmaticStreamSerializationAllowed
        int priority
        ia_dim3 preferredClusterDim
    ctypedef struct CUlaunchAttribute:
        int id
        CUlaunchAttributeValue value
    ctypedef struct CUlaunchConfig:
        unsigned int gridDimX
        unsigned int gridDimY
        unsigned int gridDimZ
        unsigned int blockDimX
        unsigned int blockDimY
        unsigned int blockDimZ
        unsigned int sharedMemBytes
        CUstream hStream
        CUlaunchAttribute* attrs
        unsigned int numAttrs
    enum:
        IA_LAUNCH_ATTRIBUTE_COOPERATIVE
        IA_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        IA_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE
        IA_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
        IA_LAUNCH_ATTRIBUTE_PRIORITY
        IA_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION
        IA_CLUSTER_SCHEDULING_SPREAD
        IA_CLUSTER_SCHEDULING_LOAD_BALANCING
    int IA_UNBOUND
    int IA_DISABLED
    int IA_MISSING
    const char* ia_names[]
    const int ia_abi[]
    uintptr_t ia_tls_ctx
    void ia_table_stub(int mode)
    void ia_table_install(void** addrs)

include "_entry_points.pxi"

cdef extern from "pinned.h" nogil:
    int ia_pin_add(uintptr_t start, uintptr_t end)
    void ia_pin_remove(uintptr_t start)
    int ia_pin_known(uintptr_t addr, size_t n)
    int ia_pin_driver(uintptr_t addr)

cdef extern from "staging.h" nogil:
    int IA_MAX_SLOTS
    ctypedef struct ia_staging:
        char* slots
        size_t chunk
        int nslots
        int split
        int nt
        CUevent events[256]
        char* bounce
        size_t bounce_size
    int ia_pool_start(int nthreads)
    int ia_pool_threads()
    void ia_pipe_lock()
    void ia_pipe_unlock()
    int ia_pipe_htod(ia_staging* st, CUdeviceptr dst, const char* src, size_t nbytes, CUstream stream,
                     const char** op)
    int ia_pipe_dtoh(ia_staging* st, char* dst, CUdeviceptr src, size_t nbytes, CUstream stream, const char** op)
    int ia_bounce_take(ia_staging* st)
    void ia_bounce_give(ia_staging* st)

cdef extern from "fence.h" nogil:
    int IA_FENCE_PAGE
    int ia_fence_ready()
    void ia_fence_add_page(char* page)
    int ia_fence_pages()
    void ia_fence_counts(unsigned long long* fenced, unsigned long long* missed)
    int ia_fence_stream(CUstream stream, long spin_ns)

cdef extern from *:
    int __builtin_clzll(unsigned long long) nogil


cdef class DeviceBuf
cdef class PoolCore
cdef class StreamCore

cdef int NOT_READY = 600
cdef int INVALID_CONTEXT = 201
cdef int INVALID_VALUE = 1
cdef int OUT_OF_MEMORY = 2
cdef int NOT_SUPPORTED = 801
cdef unsigned int CU_EVENT_BLOCKING_SYNC = 0x1
cdef unsigned int CU_EVENT_DISABLE_TIMING = 0x2
cdef unsigned int CU_EVENT_INTERPROCESS = 0x4
cdef unsigned int CU_MEMHOSTALLOC_PORTABLE = 0x1
cdef unsigned int CU_MEMHOSTALLOC_DEVICEMAP = 0x2


class _Closed:
    """The handle of a closed object: not an int, so every hot function rejects it with TypeError."""

    __slots__ = ()

    def __repr__(self):
        return "<closed handle>"


CLOSED = _Closed()

include "_core_driver.pxi"
include "_core_streams.pxi"
include "_core_copies.pxi"
include "_core_buffer.pxi"
include "_core_device.pxi"
include "_core_launch.pxi"
include "_core_pool.pxi"
include "_core_owners.pxi"
include "_core_compat.pxi"
