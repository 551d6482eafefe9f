# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, binding=False
# cython: initializedcheck=False, embedsignature=False, auto_pickle=False
"""The hot path compiled: the `_hot` contract (see `_hotpy`) with direct C calls into the driver.

Driver entry points are looked up once, at the first call, with
`cuGetProcAddress` (through `cuda.bindings`, which has already loaded
libcuda) at the CUDA 12.0 ABI, and called through C function pointers typed
here from cuda.h's prototypes -- no CUDA header is needed to build this.
Until then every pointer is a stub that returns a private code, so the first
call binds and retries; `disable` swaps in stubs that fail (or, for the
releases, succeed) in a forked child.  The success path creates no Python
object it does not return.

The GIL is held across calls that return at once (launch, record, alloc,
async copies from page-locked memory) and released around calls that can
wait (synchronize after a query says "not ready", pageable copies, the
staging pipeline).  All pool and packer state is changed only while holding
the GIL, so the warm paths take no lock of their own.

The staging pipeline for large pageable copies is C: a few worker threads
copy chunks between the host array and page-locked slots while the calling
thread issues the DMA of each chunk as soon as it is ready and recycles
slots as their events complete (see `transfer` for the settings).
"""

cimport cython
from cpython.buffer cimport PyBUF_ANY_CONTIGUOUS, PyBUF_C_CONTIGUOUS, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.long cimport PyLong_AsLongLong, PyLong_AsUnsignedLongLong, PyLong_FromUnsignedLongLong
from cpython.object cimport Py_TYPE, PyObject, PyTypeObject
from cpython.ref cimport Py_DECREF, Py_INCREF
from libc.math cimport isinf
from libc.stdint cimport uintptr_t
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcpy, memmove, memset

import os
import threading

import numpy as np
from ironaccel.errors import IronAccelError

from . import dtypes as _dtypes
from . import errors as _errors

cdef extern from "pythread.h":
    unsigned long PyThread_get_thread_ident()

cdef extern from "Python.h":
    double PyFloat_AsDouble(object) except? -1.0
    object PyNumber_Index(object)
    int PyObject_IsTrue(object) except -1
    PyObject* PyErr_Occurred()

cdef extern from *:
    """
    #include <stdint.h>
    #include <stddef.h>
    #include <string.h>
    #include <stdlib.h>
    #include <math.h>
    #include <float.h>
    #include <pthread.h>
    #include <sched.h>
    #include <time.h>
    #include <stdatomic.h>
    #if defined(__x86_64__) || defined(__i386__)
    #include <immintrin.h>
    #define IA_RELAX() _mm_pause()
    #elif defined(__aarch64__)
    #define IA_RELAX() __asm__ __volatile__("yield")
    #else
    #define IA_RELAX() sched_yield()
    #endif

    /* Types from cuda.h, by size and kind only: CUresult is an int-sized enum,
       handles are pointers to opaque structs, CUdeviceptr is unsigned long long. */
    typedef int ia_res;
    typedef void *ia_h;
    typedef unsigned long long ia_dptr;

    #define IA_UNBOUND (-1)   /* a stub: the driver is not bound yet */
    #define IA_DISABLED (-2)  /* a stub: forked child */

    typedef ia_res (*ia_fn_h)(ia_h);
    typedef ia_res (*ia_fn_hh)(ia_h, ia_h);
    typedef ia_res (*ia_fn_hhu)(ia_h, ia_h, unsigned int);
    typedef ia_res (*ia_fn_ph)(ia_h *);
    typedef ia_res (*ia_fn_hph)(ia_h, ia_h *);
    typedef ia_res (*ia_fn_phu)(ia_h *, unsigned int);
    typedef ia_res (*ia_fn_pdsh)(ia_dptr *, size_t, ia_h);
    typedef ia_res (*ia_fn_dh)(ia_dptr, ia_h);
    typedef ia_res (*ia_fn_pds)(ia_dptr *, size_t);
    typedef ia_res (*ia_fn_d)(ia_dptr);
    typedef ia_res (*ia_fn_htod)(ia_dptr, const void *, size_t, ia_h);
    typedef ia_res (*ia_fn_dtoh)(void *, ia_dptr, size_t, ia_h);
    typedef ia_res (*ia_fn_dtod)(ia_dptr, ia_dptr, size_t, ia_h);
    typedef ia_res (*ia_fn_set8)(ia_dptr, unsigned char, size_t, ia_h);
    typedef ia_res (*ia_fn_set16)(ia_dptr, unsigned short, size_t, ia_h);
    typedef ia_res (*ia_fn_set32)(ia_dptr, unsigned int, size_t, ia_h);
    typedef ia_res (*ia_fn_launch)(ia_h, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int,
                                   unsigned int, unsigned int, ia_h, void **, void **);
    typedef ia_res (*ia_fn_hostflags)(unsigned int *, void *);

    typedef struct {
        ia_fn_h stream_sync, stream_query, event_destroy, event_sync, event_query, ctx_set;
        ia_fn_hh event_record, graph_launch;
        ia_fn_hhu stream_wait;
        ia_fn_ph ctx_get;
        ia_fn_hph stream_get_ctx;
        ia_fn_phu event_create;
        ia_fn_pdsh alloc_async;
        ia_fn_dh free_async;
        ia_fn_pds alloc;
        ia_fn_d free_;
        ia_fn_htod htod;
        ia_fn_dtoh dtoh;
        ia_fn_dtod dtod;
        ia_fn_set8 set8;
        ia_fn_set16 set16;
        ia_fn_set32 set32;
        ia_fn_launch launch;
        ia_fn_hostflags host_flags;
    } ia_table;

    static ia_table ia_cu;
    static __thread uintptr_t ia_tls_ctx;

    #define IA_STUBS(sfx, ...) \\
        static ia_res ia_unbound_##sfx(__VA_ARGS__) { return IA_UNBOUND; } \\
        static ia_res ia_disabled_##sfx(__VA_ARGS__) { return IA_DISABLED; } \\
        static ia_res ia_ok_##sfx(__VA_ARGS__) { return 0; }
    #pragma GCC diagnostic push
    #pragma GCC diagnostic ignored "-Wunused-parameter"
    #pragma GCC diagnostic ignored "-Wunused-function"
    IA_STUBS(h, ia_h a)
    IA_STUBS(hh, ia_h a, ia_h b)
    IA_STUBS(hhu, ia_h a, ia_h b, unsigned int c)
    IA_STUBS(ph, ia_h *a)
    IA_STUBS(hph, ia_h a, ia_h *b)
    IA_STUBS(phu, ia_h *a, unsigned int b)
    IA_STUBS(pdsh, ia_dptr *a, size_t b, ia_h c)
    IA_STUBS(dh, ia_dptr a, ia_h b)
    IA_STUBS(pds, ia_dptr *a, size_t b)
    IA_STUBS(d, ia_dptr a)
    IA_STUBS(htod, ia_dptr a, const void *b, size_t c, ia_h d)
    IA_STUBS(dtoh, void *a, ia_dptr b, size_t c, ia_h d)
    IA_STUBS(dtod, ia_dptr a, ia_dptr b, size_t c, ia_h d)
    IA_STUBS(set8, ia_dptr a, unsigned char b, size_t c, ia_h d)
    IA_STUBS(set16, ia_dptr a, unsigned short b, size_t c, ia_h d)
    IA_STUBS(set32, ia_dptr a, unsigned int b, size_t c, ia_h d)
    IA_STUBS(launch, ia_h f, unsigned int a, unsigned int b, unsigned int c, unsigned int d, unsigned int e,
             unsigned int g, unsigned int h, ia_h s, void **p, void **x)
    IA_STUBS(hostflags, unsigned int *a, void *b)
    #pragma GCC diagnostic pop

    /* mode: IA_UNBOUND (before binding) or IA_DISABLED (forked child: releases succeed, the rest fail) */
    static void ia_table_stub(int mode) {
        int off = mode == IA_UNBOUND;
        #define IA_PICK(field, sfx, release) \\
            ia_cu.field = off ? ia_unbound_##sfx : (release ? ia_ok_##sfx : ia_disabled_##sfx)
        IA_PICK(stream_sync, h, 0); IA_PICK(stream_query, h, 0); IA_PICK(event_destroy, h, 1);
        IA_PICK(event_sync, h, 0); IA_PICK(event_query, h, 0); IA_PICK(ctx_set, h, 0);
        IA_PICK(event_record, hh, 0); IA_PICK(graph_launch, hh, 0); IA_PICK(stream_wait, hhu, 0);
        IA_PICK(ctx_get, ph, 0); IA_PICK(stream_get_ctx, hph, 0); IA_PICK(event_create, phu, 0);
        IA_PICK(alloc_async, pdsh, 0); IA_PICK(free_async, dh, 1); IA_PICK(alloc, pds, 0); IA_PICK(free_, d, 1);
        IA_PICK(htod, htod, 0); IA_PICK(dtoh, dtoh, 0); IA_PICK(dtod, dtod, 0);
        IA_PICK(set8, set8, 0); IA_PICK(set16, set16, 0); IA_PICK(set32, set32, 0);
        IA_PICK(launch, launch, 0); IA_PICK(host_flags, hostflags, 0);
        #undef IA_PICK
    }

    /* ---- pinned-memory registry (ranges page-locked through ironaccel); changed with the GIL held ---- */
    static uintptr_t *ia_pin_start = NULL, *ia_pin_end = NULL;
    static size_t ia_pin_n = 0, ia_pin_cap = 0;

    static int ia_pin_add(uintptr_t start, uintptr_t end) {
        size_t i, lo = 0, hi = ia_pin_n;
        while (lo < hi) { size_t mid = (lo + hi) / 2; if (ia_pin_start[mid] < start) lo = mid + 1; else hi = mid; }
        if (lo < ia_pin_n && ia_pin_start[lo] == start) { ia_pin_end[lo] = end; return 0; }
        if (ia_pin_n == ia_pin_cap) {
            size_t cap = ia_pin_cap ? 2 * ia_pin_cap : 16;
            uintptr_t *s = realloc(ia_pin_start, cap * sizeof *s);
            if (!s) return -1;
            ia_pin_start = s;
            uintptr_t *e = realloc(ia_pin_end, cap * sizeof *e);
            if (!e) return -1;
            ia_pin_end = e;
            ia_pin_cap = cap;
        }
        for (i = ia_pin_n; i > lo; i--) { ia_pin_start[i] = ia_pin_start[i - 1]; ia_pin_end[i] = ia_pin_end[i - 1]; }
        ia_pin_start[lo] = start; ia_pin_end[lo] = end; ia_pin_n++;
        return 0;
    }
    static void ia_pin_remove(uintptr_t start) {
        size_t i;
        for (i = 0; i < ia_pin_n; i++) if (ia_pin_start[i] == start) break;
        if (i == ia_pin_n) return;
        for (; i + 1 < ia_pin_n; i++) { ia_pin_start[i] = ia_pin_start[i + 1]; ia_pin_end[i] = ia_pin_end[i + 1]; }
        ia_pin_n--;
    }
    static int ia_pin_known(uintptr_t addr, size_t n) {
        size_t lo = 0, hi = ia_pin_n;
        while (lo < hi) { size_t mid = (lo + hi) / 2; if (ia_pin_start[mid] <= addr) lo = mid + 1; else hi = mid; }
        return lo > 0 && addr + n <= ia_pin_end[lo - 1];
    }
    /* Inside an allocation the driver page-locked (cuMemHostAlloc / cudaHostAlloc, by anyone)?  Asked with
       cuMemHostGetFlags, which fails for everything else -- also for pageable memory the GPU can reach through
       HMM, which a memory-type query might describe as host memory. */
    static int ia_pin_driver(uintptr_t addr) {
        unsigned int flags = 0;
        return ia_cu.host_flags(&flags, (void *)addr) == 0;
    }

    /* ---- the staging pipeline ---- */
    #define IA_MAX_SLOTS 256
    #define IA_MAX_THREADS 64

    typedef struct {
        char *slots;            /* nslots * chunk bytes, page-locked */
        size_t chunk;
        int nslots;
        int split;              /* a copy is cut into about this many chunks */
        int nt;                 /* non-temporal stores: bit 0 into the slots (h2d), bit 1 into the host (d2h) */
        ia_h events[IA_MAX_SLOTS];
        char *bounce;           /* page-locked bounce buffer for small copies */
        size_t bounce_size;
        atomic_int bounce_busy;
    } ia_staging;

    /* The workers sleep on `seq` itself (a futex on Linux), so a new job wakes them all at once: with a
       condition variable each woken thread must take the mutex in turn, which chains the wake-ups.  A job
       is `open` from publish to finish; a worker counts itself in `active` before it looks at the job, so
       finish waits only for workers inside it, never for one that has not woken up yet. */
    typedef struct {
        pthread_mutex_t mu;
        pthread_cond_t cv;
        pthread_mutex_t job_mu;     /* one pipelined copy at a time */
        int nthreads;
        atomic_uint seq;            /* job generation (32 bits: a futex word) */
        atomic_int open;            /* the job may be worked on */
        atomic_int active;          /* workers inside a job */
        /* the job */
        int dir;                    /* 0: host -> slots, 1: slots -> host */
        int nt;                     /* non-temporal stores for this job's copies */
        char *host;
        char *slots;
        size_t nbytes, chunk, stride, nchunks;  /* chunk: bytes per chunk of this copy; stride: slot size */
        int nslots;
        atomic_size_t next;         /* next chunk a copier claims */
        atomic_size_t limit;        /* chunks below it may be copied */
        atomic_size_t ncopied;
        atomic_uchar *copied;       /* per chunk: its host copy is done */
        size_t copied_cap;
    } ia_pool_t;

    static ia_pool_t ia_pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_MUTEX_INITIALIZER};

    #ifdef __linux__
    #include <linux/futex.h>
    #include <sys/syscall.h>
    #include <unistd.h>
    #include <limits.h>
    static void ia_seq_wait(unsigned seen) {
        syscall(SYS_futex, (unsigned *)&ia_pool.seq, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
    }
    static void ia_seq_bump(void) {
        atomic_fetch_add_explicit(&ia_pool.seq, 1, memory_order_release);
        syscall(SYS_futex, (unsigned *)&ia_pool.seq, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
    }
    #else
    static void ia_seq_wait(unsigned seen) {
        pthread_mutex_lock(&ia_pool.mu);
        while (atomic_load_explicit(&ia_pool.seq, memory_order_acquire) == seen)
            pthread_cond_wait(&ia_pool.cv, &ia_pool.mu);
        pthread_mutex_unlock(&ia_pool.mu);
    }
    static void ia_seq_bump(void) {
        pthread_mutex_lock(&ia_pool.mu);
        atomic_fetch_add_explicit(&ia_pool.seq, 1, memory_order_release);
        pthread_cond_broadcast(&ia_pool.cv);
        pthread_mutex_unlock(&ia_pool.mu);
    }
    #endif

    static double ia_now_us(void) {
        struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
    }

    /* memcpy with non-temporal stores where they help (x86-64): large copies into memory that the CPU will not
       read back soon -- the slots the DMA engine reads, or a host array -- skip the read-for-ownership of every
       destination line and leave no dirty lines for the DMA to snoop.  Ends with a store fence, so the data is
       visible before any flag stored after it. */
    static void ia_copy(char *dst, const char *src, size_t len, int nt) {
    #if defined(__x86_64__)
        if (nt && len >= 4096) {
            size_t head = (16 - ((uintptr_t)dst & 15)) & 15;
            memcpy(dst, src, head);
            dst += head; src += head; len -= head;
            size_t body = len & ~(size_t)63;
            for (size_t i = 0; i < body; i += 64) {
                __m128i a = _mm_loadu_si128((const __m128i *)(src + i));
                __m128i b = _mm_loadu_si128((const __m128i *)(src + i + 16));
                __m128i c = _mm_loadu_si128((const __m128i *)(src + i + 32));
                __m128i d = _mm_loadu_si128((const __m128i *)(src + i + 48));
                _mm_stream_si128((__m128i *)(dst + i), a);
                _mm_stream_si128((__m128i *)(dst + i + 16), b);
                _mm_stream_si128((__m128i *)(dst + i + 32), c);
                _mm_stream_si128((__m128i *)(dst + i + 48), d);
            }
            memcpy(dst + body, src + body, len - body);
            _mm_sfence();
            return;
        }
    #else
        (void)nt;
    #endif
        memcpy(dst, src, len);
    }

    /* Copy chunk c between the host and its slot, and mark it done. */
    static void ia_copy_chunk(ia_pool_t *P, size_t c) {
        size_t off = c * P->chunk, len = P->nbytes - off < P->chunk ? P->nbytes - off : P->chunk;
        char *slot = P->slots + (c % (size_t)P->nslots) * P->stride;
        if (P->dir == 0) ia_copy(slot, P->host + off, len, P->nt & 1);
        else ia_copy(P->host + off, slot, len, P->nt & 2);
        atomic_store_explicit(&P->copied[c], 1, memory_order_release);
        atomic_fetch_add_explicit(&P->ncopied, 1, memory_order_release);
    }

    /* Claim chunk `want` (or, with IA_ANY, the next one) if it is unclaimed and may be copied now; -1 if not. */
    #define IA_ANY ((size_t)-1)
    static long ia_claim(ia_pool_t *P, size_t want) {
        size_t c = atomic_load_explicit(&P->next, memory_order_relaxed);
        if ((want != IA_ANY && c != want) || c >= P->nchunks || c >= atomic_load_explicit(&P->limit, memory_order_acquire)) return -1;
        if (!atomic_compare_exchange_strong_explicit(&P->next, &c, c + 1, memory_order_relaxed, memory_order_relaxed))
            return -1;
        return (long)c;
    }

    static void ia_work(void) {
        ia_pool_t *P = &ia_pool;
        for (;;) {
            if (!atomic_load_explicit(&P->open, memory_order_relaxed)) return;
            size_t c = atomic_fetch_add_explicit(&P->next, 1, memory_order_relaxed);
            if (c >= P->nchunks) return;
            while (atomic_load_explicit(&P->limit, memory_order_acquire) <= c) {
                if (!atomic_load_explicit(&P->open, memory_order_relaxed)) return;
                IA_RELAX();
            }
            ia_copy_chunk(P, c);
        }
    }

    static void *ia_worker(void *arg) {
        ia_pool_t *P = &ia_pool;
        unsigned seen = (unsigned)(uintptr_t)arg;
        for (;;) {
            unsigned cur = atomic_load_explicit(&P->seq, memory_order_acquire);
            if (cur == seen) {
                double until = ia_now_us() + 100.0;  /* spin a while: back-to-back copies find us awake */
                int spins = 0;
                while ((cur = atomic_load_explicit(&P->seq, memory_order_acquire)) == seen) {
                    IA_RELAX();
                    if (++spins == 256) { spins = 0; if (ia_now_us() > until) break; }
                }
                while ((cur = atomic_load_explicit(&P->seq, memory_order_acquire)) == seen) ia_seq_wait(seen);
            }
            seen = cur;
            atomic_fetch_add(&P->active, 1);   /* seq_cst, paired with finish's store of open */
            if (atomic_load(&P->open)) ia_work();
            atomic_fetch_sub_explicit(&P->active, 1, memory_order_release);
        }
        return NULL;
    }

    /* Start the workers once; returns how many run. */
    static int ia_pool_start(int nthreads) {
        ia_pool_t *P = &ia_pool;
        if (P->nthreads) return P->nthreads;
        if (nthreads > IA_MAX_THREADS) nthreads = IA_MAX_THREADS;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int started = 0;
        unsigned seq = atomic_load(&P->seq);
        for (int i = 0; i < nthreads; i++) {
            pthread_t t;
            if (pthread_create(&t, &attr, ia_worker, (void *)(uintptr_t)seq) != 0) break;
            started++;
        }
        pthread_attr_destroy(&attr);
        P->nthreads = started;
        return started;
    }

    static int ia_pool_threads(void) { return ia_pool.nthreads; }

    /* The chunk size of one copy: about `split` chunks, 64 KiB at least, the slot size at most (see `transfer`). */
    static size_t ia_chunk_for(ia_staging *st, size_t nbytes) {
        size_t chunk = (nbytes / (size_t)(st->split > 0 ? st->split : 32) + 0xFFFF) & ~(size_t)0xFFFF;
        if (chunk < 0x10000) chunk = 0x10000;
        return chunk < st->chunk ? chunk : st->chunk;
    }

    /* Open a job (no worker is inside one: the last finish saw to that) and wake the workers. */
    static int ia_pool_publish(int dir, char *host, size_t nbytes, size_t chunk, ia_staging *st, size_t limit) {
        ia_pool_t *P = &ia_pool;
        size_t n = (nbytes + chunk - 1) / chunk;
        if (n > P->copied_cap) {
            atomic_uchar *grown = malloc(n * sizeof *grown);
            if (!grown) return -1;
            free((void *)P->copied);
            P->copied = grown;
            P->copied_cap = n;
        }
        for (size_t i = 0; i < n; i++) atomic_store_explicit(&P->copied[i], 0, memory_order_relaxed);
        P->dir = dir; P->nt = st->nt; P->host = host; P->slots = st->slots; P->nbytes = nbytes; P->chunk = chunk;
        P->stride = st->chunk; P->nchunks = n; P->nslots = st->nslots;
        atomic_store(&P->next, 0); atomic_store(&P->limit, limit); atomic_store(&P->ncopied, 0);
        atomic_store(&P->open, 1);
        ia_seq_bump();
        return 0;
    }

    /* Close the job and wait for the workers inside it (those still waking up will find it closed). */
    static void ia_pool_finish(void) {
        ia_pool_t *P = &ia_pool;
        atomic_store(&P->open, 0);
        while (atomic_load(&P->active) > 0) IA_RELAX();
    }

    #define IA_NOT_READY 600
    #define IA_CHUNK_LEN(c) (nbytes - (c) * chunk < chunk ? nbytes - (c) * chunk : chunk)

    /* Pageable host -> device through the slots.  Called without the GIL, holding job_mu.
       The DMA of chunk k is issued as soon as its copy is done, in order; the calling thread copies the next
       chunk itself whenever no worker has claimed it yet (at the start, before the workers are awake, the
       first chunks are its own).  A slot's event is recorded only when a later chunk reuses the slot.
       Returns 0 or a CUresult; *op names the call that failed. */
    static int ia_pipe_htod(ia_staging *st, ia_dptr dst, const char *src, size_t nbytes, ia_h stream, const char **op) {
        ia_pool_t *P = &ia_pool;
        size_t chunk = ia_chunk_for(st, nbytes), stride = st->chunk, K = (size_t)st->nslots;
        size_t n = (nbytes + chunk - 1) / chunk, issued = 0, freed = 0;
        int err = 0;
        if (ia_pool_publish(0, (char *)src, nbytes, chunk, st, K < n ? K : n)) { *op = "malloc"; return 2; }
        while (issued < n) {
            if (atomic_load_explicit(&P->copied[issued], memory_order_acquire)) {
                size_t slot = issued % K;
                err = ia_cu.htod(dst + issued * chunk, st->slots + slot * stride, IA_CHUNK_LEN(issued), stream);
                if (err) { *op = "cuMemcpyHtoDAsync"; break; }
                if (issued + K < n) {  /* chunk issued + K will reuse this slot */
                    err = ia_cu.event_record(st->events[slot], stream);
                    if (err) { *op = "cuEventRecord"; break; }
                }
                issued++;
                continue;
            }
            if (freed < issued && freed + K < n) {
                int q = ia_cu.event_query(st->events[freed % K]);
                if (q == 0) {
                    freed++;
                    atomic_store_explicit(&P->limit, freed + K < n ? freed + K : n, memory_order_release);
                    continue;
                }
                if (q != IA_NOT_READY) { err = q; *op = "cuEventQuery"; break; }
            }
            long c = ia_claim(P, issued);  /* the chunk the DMA waits for is unclaimed: copy it here */
            if (c >= 0) { ia_copy_chunk(P, (size_t)c); continue; }
            IA_RELAX();
        }
        ia_pool_finish();
        int s = ia_cu.stream_sync(stream);  /* the copy has landed, and no DMA still reads a slot */
        if (!err && s) { err = s; *op = "cuStreamSynchronize"; }
        return err;
    }

    /* Device -> pageable host through the slots (same conditions).  The calling thread issues the DMAs (up to
       one per slot ahead of the copies) and marks chunks landed as their events complete; once everything has
       landed it copies out chunks too. */
    static int ia_pipe_dtoh(ia_staging *st, char *dst, ia_dptr src, size_t nbytes, ia_h stream, const char **op) {
        ia_pool_t *P = &ia_pool;
        size_t chunk = ia_chunk_for(st, nbytes), stride = st->chunk, K = (size_t)st->nslots;
        size_t n = (nbytes + chunk - 1) / chunk, issued = 0, landed = 0;
        int err = 0;
        if (ia_pool_publish(1, dst, nbytes, chunk, st, 0)) { *op = "malloc"; return 2; }
        for (;;) {
            if (landed < issued) {
                int q = ia_cu.event_query(st->events[landed % K]);
                if (q == 0) {
                    landed++;
                    atomic_store_explicit(&P->limit, landed, memory_order_release);
                    continue;
                }
                if (q != IA_NOT_READY) { err = q; *op = "cuEventQuery"; break; }
            }
            if (issued < n && (issued < K || atomic_load_explicit(&P->copied[issued - K], memory_order_acquire))) {
                size_t slot = issued % K;
                err = ia_cu.dtoh(st->slots + slot * stride, src + issued * chunk, IA_CHUNK_LEN(issued), stream);
                if (err) { *op = "cuMemcpyDtoHAsync"; break; }
                err = ia_cu.event_record(st->events[slot], stream);
                if (err) { *op = "cuEventRecord"; break; }
                issued++;
                continue;
            }
            if (atomic_load_explicit(&P->ncopied, memory_order_acquire) >= n) break;
            if (landed == n) {  /* nothing left to issue or watch: help copy out */
                long c = ia_claim(P, IA_ANY);
                if (c >= 0) { ia_copy_chunk(P, (size_t)c); continue; }
            }
            IA_RELAX();
        }
        ia_pool_finish();
        if (err) ia_cu.stream_sync(stream);
        return err;
    }

    /* Small pageable copies through the bounce buffer; -1 when it is busy (use the driver's path). */
    static int ia_bounce_take(ia_staging *st) {
        int expected = 0;
        return atomic_compare_exchange_strong(&st->bounce_busy, &expected, 1) ? 0 : -1;
    }
    static void ia_bounce_give(ia_staging *st) { atomic_store(&st->bounce_busy, 0); }
    """
    ctypedef int ia_res
    ctypedef void* ia_h
    ctypedef unsigned long long ia_dptr
    ctypedef ia_res (*ia_fn_h)(ia_h) nogil
    ctypedef ia_res (*ia_fn_hh)(ia_h, ia_h) nogil
    ctypedef ia_res (*ia_fn_hhu)(ia_h, ia_h, unsigned int) nogil
    ctypedef ia_res (*ia_fn_ph)(ia_h*) nogil
    ctypedef ia_res (*ia_fn_hph)(ia_h, ia_h*) nogil
    ctypedef ia_res (*ia_fn_phu)(ia_h*, unsigned int) nogil
    ctypedef ia_res (*ia_fn_pdsh)(ia_dptr*, size_t, ia_h) nogil
    ctypedef ia_res (*ia_fn_dh)(ia_dptr, ia_h) nogil
    ctypedef ia_res (*ia_fn_pds)(ia_dptr*, size_t) nogil
    ctypedef ia_res (*ia_fn_d)(ia_dptr) nogil
    ctypedef ia_res (*ia_fn_htod)(ia_dptr, const void*, size_t, ia_h) nogil
    ctypedef ia_res (*ia_fn_dtoh)(void*, ia_dptr, size_t, ia_h) nogil
    ctypedef ia_res (*ia_fn_dtod)(ia_dptr, ia_dptr, size_t, ia_h) nogil
    ctypedef ia_res (*ia_fn_set8)(ia_dptr, unsigned char, size_t, ia_h) nogil
    ctypedef ia_res (*ia_fn_set16)(ia_dptr, unsigned short, size_t, ia_h) nogil
    ctypedef ia_res (*ia_fn_set32)(ia_dptr, unsigned int, size_t, ia_h) nogil
    ctypedef ia_res (*ia_fn_launch)(ia_h, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int,
                                    unsigned int, unsigned int, ia_h, void**, void**) nogil
    ctypedef ia_res (*ia_fn_hostflags)(unsigned int*, void*) nogil
    ctypedef struct ia_table:
        ia_fn_h stream_sync
        ia_fn_h stream_query
        ia_fn_h event_destroy
        ia_fn_h event_sync
        ia_fn_h event_query
        ia_fn_h ctx_set
        ia_fn_hh event_record
        ia_fn_hh graph_launch
        ia_fn_hhu stream_wait
        ia_fn_ph ctx_get
        ia_fn_hph stream_get_ctx
        ia_fn_phu event_create
        ia_fn_pdsh alloc_async
        ia_fn_dh free_async
        ia_fn_pds alloc
        ia_fn_d free_
        ia_fn_htod htod
        ia_fn_dtoh dtoh
        ia_fn_dtod dtod
        ia_fn_set8 set8
        ia_fn_set16 set16
        ia_fn_set32 set32
        ia_fn_launch launch
        ia_fn_hostflags host_flags
    ia_table ia_cu
    uintptr_t ia_tls_ctx
    int IA_UNBOUND
    int IA_DISABLED
    int IA_MAX_SLOTS
    void ia_table_stub(int mode)
    int ia_pin_add(uintptr_t start, uintptr_t end)
    void ia_pin_remove(uintptr_t start)
    int ia_pin_known(uintptr_t addr, size_t n) nogil
    int ia_pin_driver(uintptr_t addr) nogil
    ctypedef struct ia_staging:
        char* slots
        size_t chunk
        int nslots
        int split
        int nt
        ia_h events[256]
        char* bounce
        size_t bounce_size
    int ia_pool_start(int nthreads) nogil
    int ia_pool_threads() nogil
    int ia_pipe_htod(ia_staging* st, ia_dptr dst, const char* src, size_t nbytes, ia_h stream, const char** op) nogil
    int ia_pipe_dtoh(ia_staging* st, char* dst, ia_dptr src, size_t nbytes, ia_h stream, const char** op) nogil
    int ia_bounce_take(ia_staging* st) nogil
    void ia_bounce_give(ia_staging* st) nogil

cdef extern from *:
    int __builtin_clzll(unsigned long long) nogil

cdef extern from "pthread.h" nogil:
    ctypedef struct pthread_mutex_t:
        pass
    int pthread_mutex_lock(pthread_mutex_t*)
    int pthread_mutex_unlock(pthread_mutex_t*)

cdef extern from *:
    """
    static pthread_mutex_t *ia_job_mu(void) { return &ia_pool.job_mu; }
    """
    pthread_mutex_t* ia_job_mu() nogil


IMPLEMENTATION = "compiled"

cdef class DeviceBuf
cdef class PoolCore

cdef int NOT_READY = 600
cdef int INVALID_CONTEXT = 201
cdef int INVALID_VALUE = 1
cdef int OUT_OF_MEMORY = 2
cdef unsigned int CU_EVENT_DISABLE_TIMING = 0x2
cdef unsigned int CU_MEMHOSTALLOC_PORTABLE = 0x1


class _Closed:
    """The handle of a closed object: not an int, so every hot function rejects it with TypeError."""

    __slots__ = ()

    def __repr__(self):
        return "<closed handle>"


CLOSED = _Closed()

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

ia_table_stub(IA_UNBOUND)
cdef bint _disabled = False
cdef object _disabled_reason = ""
cdef object _bind_lock = threading.Lock()


# -- binding the driver (cold) ----------------------------------------------------

_NAMES = (
    "cuStreamSynchronize", "cuStreamQuery", "cuEventDestroy", "cuEventSynchronize", "cuEventQuery", "cuCtxSetCurrent",
    "cuEventRecord", "cuGraphLaunch", "cuStreamWaitEvent", "cuCtxGetCurrent", "cuStreamGetCtx", "cuEventCreate",
    "cuMemAllocAsync", "cuMemFreeAsync", "cuMemAlloc", "cuMemFree", "cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync",
    "cuMemcpyDtoDAsync", "cuMemsetD8Async", "cuMemsetD16Async", "cuMemsetD32Async", "cuLaunchKernel",
    "cuMemHostGetFlags",
)
ABI_VERSION = 12000  # the CUDA version whose ABI of each entry point the pointers above are typed for


cdef void _install(dict a):
    ia_cu.stream_sync = <ia_fn_h><void*><uintptr_t>a["cuStreamSynchronize"]
    ia_cu.stream_query = <ia_fn_h><void*><uintptr_t>a["cuStreamQuery"]
    ia_cu.event_destroy = <ia_fn_h><void*><uintptr_t>a["cuEventDestroy"]
    ia_cu.event_sync = <ia_fn_h><void*><uintptr_t>a["cuEventSynchronize"]
    ia_cu.event_query = <ia_fn_h><void*><uintptr_t>a["cuEventQuery"]
    ia_cu.ctx_set = <ia_fn_h><void*><uintptr_t>a["cuCtxSetCurrent"]
    ia_cu.event_record = <ia_fn_hh><void*><uintptr_t>a["cuEventRecord"]
    ia_cu.graph_launch = <ia_fn_hh><void*><uintptr_t>a["cuGraphLaunch"]
    ia_cu.stream_wait = <ia_fn_hhu><void*><uintptr_t>a["cuStreamWaitEvent"]
    ia_cu.ctx_get = <ia_fn_ph><void*><uintptr_t>a["cuCtxGetCurrent"]
    ia_cu.stream_get_ctx = <ia_fn_hph><void*><uintptr_t>a["cuStreamGetCtx"]
    ia_cu.event_create = <ia_fn_phu><void*><uintptr_t>a["cuEventCreate"]
    ia_cu.alloc_async = <ia_fn_pdsh><void*><uintptr_t>a["cuMemAllocAsync"]
    ia_cu.free_async = <ia_fn_dh><void*><uintptr_t>a["cuMemFreeAsync"]
    ia_cu.alloc = <ia_fn_pds><void*><uintptr_t>a["cuMemAlloc"]
    ia_cu.free_ = <ia_fn_d><void*><uintptr_t>a["cuMemFree"]
    ia_cu.htod = <ia_fn_htod><void*><uintptr_t>a["cuMemcpyHtoDAsync"]
    ia_cu.dtoh = <ia_fn_dtoh><void*><uintptr_t>a["cuMemcpyDtoHAsync"]
    ia_cu.dtod = <ia_fn_dtod><void*><uintptr_t>a["cuMemcpyDtoDAsync"]
    ia_cu.set8 = <ia_fn_set8><void*><uintptr_t>a["cuMemsetD8Async"]
    ia_cu.set16 = <ia_fn_set16><void*><uintptr_t>a["cuMemsetD16Async"]
    ia_cu.set32 = <ia_fn_set32><void*><uintptr_t>a["cuMemsetD32Async"]
    ia_cu.launch = <ia_fn_launch><void*><uintptr_t>a["cuLaunchKernel"]
    ia_cu.host_flags = <ia_fn_hostflags><void*><uintptr_t>a["cuMemHostGetFlags"]


cdef bint _bound = False


def _bind_driver():
    """Look up every entry point (after cuInit); NotAvailable / Unsupported say why not."""
    global _bound
    from . import _driver

    with _bind_lock:
        if _bound or _disabled:
            return
        drv = _driver.driver()  # cuInit, or NotAvailable / the fork error
        err, version = drv.cuDriverGetVersion()
        if err:
            raise _errors.driver_error(err, "cuDriverGetVersion")
        flags = drv.CUdriverProcAddress_flags
        ptds = os.environ.get("CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM")  # as cuda.bindings reads it
        mode = flags.CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM if ptds else flags.CU_GET_PROC_ADDRESS_LEGACY_STREAM
        want = min(ABI_VERSION, int(version))
        found = {}
        for name in _NAMES:
            res = drv.cuGetProcAddress(name.encode(), want, mode)
            if res[0] or not int(res[1]):
                raise _errors.Unsupported(_errors.BACKEND, name,
                                          f"cuGetProcAddress found no {name} for CUDA {want} in this driver")
            found[name] = int(res[1])
        _install(found)
        _bound = True


# -- the error path (cold) ---------------------------------------------------------

cdef int _recover(uintptr_t stream) except -1:
    """After CUDA_ERROR_INVALID_CONTEXT (no current context) or CUDA_ERROR_INVALID_VALUE (another device's
    context current, seen on a two-GPU H200 host): make `stream`'s context current; 1 to retry."""
    global ia_tls_ctx
    cdef ia_h ctx = NULL
    cdef ia_h cur = NULL
    if ia_cu.stream_get_ctx(<ia_h>stream, &ctx) != 0:
        return 0
    if ia_cu.ctx_get(&cur) == 0 and cur == ctx:
        return 0  # already current: retrying would not help
    if ia_cu.ctx_set(ctx) != 0:
        return 0
    ia_tls_ctx = <uintptr_t>ctx
    return 1


cdef int _again(int err, str op, uintptr_t stream, bint has_stream) except -1:
    """Cold: returns 0 when the caller should retry the call, else raises the typed error naming `op`."""
    if err == IA_UNBOUND:
        _bind_driver()
        return 0
    if err == IA_DISABLED:
        raise _errors.InvalidState(_errors.BACKEND, op, detail=_disabled_reason)
    if has_stream and (err == INVALID_CONTEXT or err == INVALID_VALUE) and _recover(stream):
        return 0
    if err == OUT_OF_MEMORY and op == "cuMemAllocAsync":
        from ._driver import trim_after_oom
        trim_after_oom()
    raise _errors.driver_error(err, op)


# -- handles ------------------------------------------------------------------------

def stream_handle(addr):
    return int(addr)


def event_handle(addr):
    return int(addr)


def devptr(addr):
    return int(addr)


def function_handle(addr):
    return int(addr)


def graph_exec_handle(addr):
    return int(addr)


def to_int(h):
    return int(h)


# -- context ------------------------------------------------------------------------

cdef int _bind_ctx(uintptr_t ctx) except -1:
    global ia_tls_ctx
    cdef int err
    while True:
        err = ia_cu.ctx_set(<ia_h>ctx)
        if err == 0:
            break
        _again(err, "cuCtxSetCurrent", 0, False)
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


# -- streams ------------------------------------------------------------------------

cdef int _stream_sync(uintptr_t s) except -1:
    cdef int err
    while True:
        err = ia_cu.stream_query(<ia_h>s)  # an idle stream needs no more than this, and keeps the GIL
        if err == 0:
            return 0
        if err != IA_UNBOUND and err != IA_DISABLED:
            with nogil:
                err = ia_cu.stream_sync(<ia_h>s)
            if err == 0:
                return 0
        _again(err, "cuStreamSynchronize", s, True)


cdef int _stream_drain(uintptr_t s) except -1:
    """Synchronize a stream known to be busy (work was just queued): no query first, the GIL released."""
    cdef int err
    while True:
        with nogil:
            err = ia_cu.stream_sync(<ia_h>s)
        if err == 0:
            return 0
        _again(err, "cuStreamSynchronize", s, True)


cdef int _stream_query(uintptr_t s) except -1:
    cdef int err
    while True:
        err = ia_cu.stream_query(<ia_h>s)
        if err == 0:
            return 1
        if err == NOT_READY:
            return 0
        _again(err, "cuStreamQuery", s, True)


cdef int _stream_wait(uintptr_t s, uintptr_t e) except -1:
    cdef int err
    while True:
        err = ia_cu.stream_wait(<ia_h>s, <ia_h>e, 0)
        if err == 0:
            return 0
        _again(err, "cuStreamWaitEvent", s, True)


def stream_sync(uintptr_t s):
    _stream_sync(s)


def stream_query(uintptr_t s):
    return _stream_query(s) == 1


def stream_wait(uintptr_t s, uintptr_t e):
    _stream_wait(s, e)


# -- events -------------------------------------------------------------------------

cdef uintptr_t _event_create(unsigned int flags) except? 0:
    cdef ia_h e = NULL
    cdef int err
    while True:
        err = ia_cu.event_create(&e, flags)
        if err == 0:
            return <uintptr_t>e
        _again(err, "cuEventCreate", 0, False)


cdef int _event_destroy(uintptr_t e) except -1:
    cdef int err
    while True:
        err = ia_cu.event_destroy(<ia_h>e)
        if err == 0:
            return 0
        _again(err, "cuEventDestroy", 0, False)


cdef int _event_record(uintptr_t e, uintptr_t s) except -1:
    cdef int err
    while True:
        err = ia_cu.event_record(<ia_h>e, <ia_h>s)
        if err == 0:
            return 0
        _again(err, "cuEventRecord", s, True)


cdef int _event_sync(uintptr_t e) except -1:
    cdef int err
    while True:
        err = ia_cu.event_query(<ia_h>e)
        if err == 0:
            return 0
        if err != IA_UNBOUND and err != IA_DISABLED:
            with nogil:
                err = ia_cu.event_sync(<ia_h>e)
            if err == 0:
                return 0
        _again(err, "cuEventSynchronize", 0, False)


cdef int _event_query(uintptr_t e) except -1:
    cdef int err
    while True:
        err = ia_cu.event_query(<ia_h>e)
        if err == 0:
            return 1
        if err == NOT_READY:
            return 0
        _again(err, "cuEventQuery", 0, False)


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


# -- memory -------------------------------------------------------------------------

cdef ia_dptr _mem_alloc_async(size_t nbytes, uintptr_t s) except? 0:
    cdef ia_dptr dp = 0
    cdef int err
    while True:
        err = ia_cu.alloc_async(&dp, nbytes, <ia_h>s)
        if err == 0:
            return dp
        _again(err, "cuMemAllocAsync", s, True)


cdef int _mem_free_async(ia_dptr dp, uintptr_t s) except -1:
    cdef int err
    while True:
        err = ia_cu.free_async(dp, <ia_h>s)
        if err == 0:
            return 0
        _again(err, "cuMemFreeAsync", s, True)


cdef ia_dptr _mem_alloc(size_t nbytes) except? 0:
    cdef ia_dptr dp = 0
    cdef int err
    while True:
        err = ia_cu.alloc(&dp, nbytes)
        if err == 0:
            return dp
        _again(err, "cuMemAlloc", 0, False)


cdef int _mem_free(ia_dptr dp) except -1:
    cdef int err
    while True:
        err = ia_cu.free_(dp)
        if err == 0:
            return 0
        _again(err, "cuMemFree", 0, False)


cdef int _htod(ia_dptr dp, const void* host, size_t n, uintptr_t s, bint release_gil) except -1:
    cdef int err
    while True:
        if release_gil:
            with nogil:
                err = ia_cu.htod(dp, host, n, <ia_h>s)
        else:
            err = ia_cu.htod(dp, host, n, <ia_h>s)
        if err == 0:
            return 0
        _again(err, "cuMemcpyHtoDAsync", s, True)


cdef int _dtoh(void* host, ia_dptr dp, size_t n, uintptr_t s, bint release_gil) except -1:
    cdef int err
    while True:
        if release_gil:
            with nogil:
                err = ia_cu.dtoh(host, dp, n, <ia_h>s)
        else:
            err = ia_cu.dtoh(host, dp, n, <ia_h>s)
        if err == 0:
            return 0
        _again(err, "cuMemcpyDtoHAsync", s, True)


cdef size_t _GIL_FREE_COPY = 64 * 1024  # direct copies at least this large run without the GIL


def mem_alloc_async(size_t nbytes, uintptr_t s):
    return PyLong_FromUnsignedLongLong(_mem_alloc_async(nbytes, s))


def mem_free_async(uintptr_t dp, uintptr_t s):
    _mem_free_async(dp, s)


def mem_alloc(size_t nbytes):
    """Synchronous allocation in the current context (devices without memory pools)."""
    return PyLong_FromUnsignedLongLong(_mem_alloc(nbytes))


def mem_free(uintptr_t dp):
    _mem_free(dp)


def memcpy_htod(uintptr_t dp, host, size_t nbytes, uintptr_t s):
    cdef Py_buffer view
    if type(host) is int:
        _htod(dp, <const void*><uintptr_t>host, nbytes, s, nbytes >= _GIL_FREE_COPY)
        return
    PyObject_GetBuffer(host, &view, PyBUF_ANY_CONTIGUOUS)
    try:
        if <size_t>view.len < nbytes:
            raise ValueError(f"the host buffer has {view.len} bytes, the copy needs {nbytes}")
        _htod(dp, view.buf, nbytes, s, nbytes >= _GIL_FREE_COPY)
    finally:
        PyBuffer_Release(&view)


def memcpy_dtoh(host, uintptr_t dp, size_t nbytes, uintptr_t s):
    cdef Py_buffer view
    if type(host) is int:
        _dtoh(<void*><uintptr_t>host, dp, nbytes, s, nbytes >= _GIL_FREE_COPY)
        return
    PyObject_GetBuffer(host, &view, PyBUF_ANY_CONTIGUOUS | PyBUF_WRITABLE)
    try:
        if <size_t>view.len < nbytes:
            raise ValueError(f"the host buffer has {view.len} bytes, the copy needs {nbytes}")
        _dtoh(view.buf, dp, nbytes, s, nbytes >= _GIL_FREE_COPY)
    finally:
        PyBuffer_Release(&view)


def memcpy_dtod(uintptr_t dst, uintptr_t src, size_t nbytes, uintptr_t s):
    cdef int err
    while True:
        err = ia_cu.dtod(dst, src, nbytes, <ia_h>s)
        if err == 0:
            return
        _again(err, "cuMemcpyDtoDAsync", s, True)


def memset_d8(uintptr_t dp, unsigned char value, size_t count, uintptr_t s):
    cdef int err
    while True:
        err = ia_cu.set8(dp, value, count, <ia_h>s)
        if err == 0:
            return
        _again(err, "cuMemsetD8Async", s, True)


def memset_d16(uintptr_t dp, unsigned short value, size_t count, uintptr_t s):
    cdef int err
    while True:
        err = ia_cu.set16(dp, value, count, <ia_h>s)
        if err == 0:
            return
        _again(err, "cuMemsetD16Async", s, True)


def memset_d32(uintptr_t dp, unsigned int value, size_t count, uintptr_t s):
    cdef int err
    while True:
        err = ia_cu.set32(dp, value, count, <ia_h>s)
        if err == 0:
            return
        _again(err, "cuMemsetD32Async", s, True)


# -- launch -------------------------------------------------------------------------

cdef int _launch(uintptr_t f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by,
                 unsigned int bz, unsigned int smem, uintptr_t s, void** params) except -1:
    cdef int err
    while True:
        err = ia_cu.launch(<ia_h>f, gx, gy, gz, bx, by, bz, smem, <ia_h>s, params, NULL)
        if err == 0:
            return 0
        _again(err, "cuLaunchKernel", s, True)


def launch(uintptr_t f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by,
           unsigned int bz, unsigned int smem, uintptr_t s, uintptr_t params):
    """cuLaunchKernel with `params` the address of a packed void* array (0 for none)."""
    _launch(f, gx, gy, gz, bx, by, bz, smem, s, <void**>params)


def graph_launch(uintptr_t exe, uintptr_t s):
    cdef int err
    while True:
        err = ia_cu.graph_launch(<ia_h>exe, <ia_h>s)
        if err == 0:
            return
        _again(err, "cuGraphLaunch", s, True)


# -- page-locked host memory and the pageable copy pipeline ---------------------------

def pinned_add(uintptr_t ptr, size_t nbytes):
    """Record [ptr, ptr + nbytes) as page-locked by ironaccel (PinnedBuf, `pinned()`)."""
    if ia_pin_add(ptr, ptr + nbytes):
        raise MemoryError("pinned_add")


def pinned_remove(uintptr_t ptr):
    ia_pin_remove(ptr)


cdef size_t _pipeline_min = 0
cdef size_t _bounce_max = 0
cdef int _threads = 0
cdef bint _settings_read = False
cdef object _staging_lock = threading.Lock()
cdef ia_staging* _staging[64]  # per device ordinal; static storage starts zeroed


cdef int _read_settings() except -1:
    global _pipeline_min, _bounce_max, _threads, _settings_read
    from . import transfer

    cfg = transfer.settings()
    _pipeline_min = cfg["pipeline_min"]
    _bounce_max = cfg["bounce_max"]
    _threads = cfg["threads"]
    _settings_read = True
    return 0


cdef long long _n_pipeline = 0, _n_bounce = 0, _n_direct = 0


def staging_info():
    """How pageable copies are staged (see `transfer`), and how many synchronous copies took each path."""
    from . import transfer

    return {**transfer.settings(), "pipeline": _n_pipeline, "bounce": _n_bounce, "direct": _n_direct}


cdef ia_staging* _staging_for(DeviceBuf buf) except NULL:
    """The staging slots, events and bounce buffer of the buffer's device (made on first use, kept)."""
    cdef int ordinal = buf._ordinal
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
        _ensure_ctx(<uintptr_t>int(buf.device._state.ctx))
        st = <ia_staging*>calloc(1, sizeof(ia_staging))
        if st == NULL:
            raise MemoryError("staging")
        try:
            st.slots = <char*><uintptr_t>int(call("cuMemHostAlloc", nslots * chunk, CU_MEMHOSTALLOC_PORTABLE))
            st.bounce = <char*><uintptr_t>int(call("cuMemHostAlloc", bounce, CU_MEMHOSTALLOC_PORTABLE))
            for i in range(nslots):
                st.events[i] = <ia_h>_event_create(CU_EVENT_DISABLE_TIMING)
        except BaseException:
            for i in range(nslots):
                if st.events[i] != NULL:
                    ia_cu.event_destroy(st.events[i])
            for ptr in (<uintptr_t>st.slots, <uintptr_t>st.bounce):
                if ptr:
                    call("cuMemFreeHost", ptr)
            free(st)
            raise
        st.chunk = chunk
        st.nslots = nslots
        st.split = int(cfg["split"])
        st.nt = int(cfg["nt"])
        st.bounce_size = bounce
        with nogil:
            ia_pool_start(_threads)
        _staging[ordinal] = st
        return st


cdef int _pipe_error(int err, const char* op) except -1:
    name = "staging" if op == NULL else op.decode()
    if name == "malloc":
        raise MemoryError("the staging pipeline could not allocate its chunk table")
    _again(err, name, 0, False)
    raise _errors.driver_error(err, name)


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
                err = ia_cu.htod(buf._addr, st.bounce, n, <ia_h>s)
                if err == 0:
                    with nogil:
                        err = ia_cu.stream_sync(<ia_h>s)
                        if err == 0:
                            ia_bounce_give(st)
                    if err:  # keep the bounce buffer until the copy has surely landed
                        try:
                            _stream_drain(s)
                        finally:
                            ia_bounce_give(st)
                    _n_bounce += 1
                    return 0
                ia_bounce_give(st)  # not queued: the direct path below reports (or recovers from) the error
        elif n >= _pipeline_min and not ia_pin_known(<uintptr_t>host, n) and not ia_pin_driver(<uintptr_t>host) \
                and _staging_for(buf) != NULL and ia_pool_threads() > 0:
            st = _staging[buf._ordinal]
            while True:
                with nogil:
                    pthread_mutex_lock(ia_job_mu())
                    err = ia_pipe_htod(st, buf._addr, host, n, <ia_h>s, &op)
                    pthread_mutex_unlock(ia_job_mu())
                if err == 0:
                    _n_pipeline += 1
                    return 0
                if not ((err == INVALID_CONTEXT or err == INVALID_VALUE) and _recover(s)):  # a thread with no current context: retry once
                    _pipe_error(err, op)
    _htod(buf._addr, host, n, s, n >= _GIL_FREE_COPY)
    _stream_drain(s)
    _n_direct += 1
    return 0


cdef int _copy_out_sync(DeviceBuf buf, char* host, size_t n, uintptr_t s) except -1:
    """A synchronous device -> host copy of `n` bytes into `host`."""
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
                err = ia_cu.dtoh(st.bounce, buf._addr, n, <ia_h>s)
                if err == 0:
                    with nogil:
                        err = ia_cu.stream_sync(<ia_h>s)
                        if err == 0:
                            memcpy(host, st.bounce, n)
                            ia_bounce_give(st)
                    if err:
                        try:
                            _stream_drain(s)
                            memcpy(host, st.bounce, n)
                        finally:
                            ia_bounce_give(st)
                    _n_bounce += 1
                    return 0
                ia_bounce_give(st)
        elif n >= _pipeline_min and not ia_pin_known(<uintptr_t>host, n) and not ia_pin_driver(<uintptr_t>host) \
                and _staging_for(buf) != NULL and ia_pool_threads() > 0:
            st = _staging[buf._ordinal]
            while True:
                with nogil:
                    pthread_mutex_lock(ia_job_mu())
                    err = ia_pipe_dtoh(st, host, buf._addr, n, <ia_h>s, &op)
                    pthread_mutex_unlock(ia_job_mu())
                if err == 0:
                    _n_pipeline += 1
                    return 0
                if not ((err == INVALID_CONTEXT or err == INVALID_VALUE) and _recover(s)):
                    _pipe_error(err, op)
    _dtoh(host, buf._addr, n, s, n >= _GIL_FREE_COPY)
    _stream_drain(s)
    _n_direct += 1
    return 0


# -- the public classes' hot methods ----------------------------------------------------

cdef object _EVENT_TYPE = None
cdef object _COLD = None  # memory.DeviceBufMethods: DeviceBuf's methods off the hot path
cdef object _ndarray = np.ndarray


def buffer_class(cold):
    """The DeviceBuf class: here the final compiled type below, whose cold methods call into `cold`."""
    global _COLD
    _COLD = cold
    return DeviceBuf


def set_types(*, buffer, event):
    """The DeviceBuf class (from `buffer_class`) and the EventCore subclass that the cores' factories return."""
    global _EVENT_TYPE
    if buffer is not DeviceBuf or not issubclass(event, EventCore):
        raise TypeError("set_types wants buffer_class()'s DeviceBuf and a subclass of EventCore")
    _EVENT_TYPE = event


cdef class StreamCore:
    """Stream's hot methods.  Cold helpers of the subclass: `_closed_error(op)`, `_bad_event(op, event)`."""

    cdef uintptr_t _hv
    cdef bint _isclosed
    cdef public int _ordinal
    cdef object __weakref__

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

    def synchronize(self):
        """Wait until all work queued on this stream has finished."""
        if self._isclosed:
            raise self._closed_error("cuStreamSynchronize")
        _stream_sync(self._hv)

    def query(self):
        """True when all work queued on this stream has finished."""
        if self._isclosed:
            raise self._closed_error("cuStreamQuery")
        return _stream_query(self._hv) == 1

    def wait(self, event):
        """Make later work on this stream wait until `event` has completed."""
        if self._isclosed or not isinstance(event, EventCore) or (<EventCore>event)._isclosed:
            raise self._bad_event("cuStreamWaitEvent", event)
        _stream_wait(self._hv, (<EventCore>event)._hv)

    def record(self, event=None):
        """Record `event` (or a new timing-off event) here; returns it."""
        if event is None:
            event = self.device.create_event()
        if self._isclosed or not isinstance(event, EventCore) or (<EventCore>event)._isclosed:
            raise self._bad_event("cuEventRecord", event)
        _event_record((<EventCore>event)._hv, self._hv)
        return event


cdef class EventCore:
    """Event's hot methods.  Cold helpers of the subclass: `_bad(op, stream=None)`, `_rebind(exc)`."""

    cdef uintptr_t _hv
    cdef bint _isclosed
    cdef public int _ordinal
    cdef public object _default
    cdef public object device
    cdef public object timing
    cdef object __weakref__

    def __cinit__(self):
        self._isclosed = True

    def __dealloc__(self):
        if not self._isclosed:
            self._isclosed = True
            ia_cu.event_destroy(<ia_h>self._hv)  # a forgotten event: destroyed, errors ignored

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

    @classmethod
    def _make(cls, h, device, timing):
        cdef EventCore e = EventCore.__new__(cls)
        e._hv = <uintptr_t>int(h)
        e._isclosed = False
        e.device = device
        e._ordinal = device.ordinal
        e.timing = timing
        e._default = device._state.default_stream
        return e

    def record(self, stream=None):
        """Record this event on `stream` (default: the device's default stream)."""
        s = self._default if stream is None else stream
        if self._isclosed or not isinstance(s, StreamCore) or (<StreamCore>s)._isclosed:
            raise self._bad("cuEventRecord", s)
        _event_record(self._hv, (<StreamCore>s)._hv)

    def synchronize(self):
        """Wait until the work before the last record has completed."""
        if self._isclosed:
            raise self._bad("cuEventSynchronize")
        try:
            _event_sync(self._hv)
        except _errors.InvalidState as exc:
            self._rebind(exc)
            _event_sync(self._hv)

    def query(self):
        """True when the work before the last record has completed."""
        if self._isclosed:
            raise self._bad("cuEventQuery")
        try:
            return _event_query(self._hv) == 1
        except _errors.InvalidState as exc:
            self._rebind(exc)
            return _event_query(self._hv) == 1

    def close(self):
        """Destroy the event (pending work still completes).  Idempotent."""
        if self._isclosed:
            return
        self._isclosed = True
        _event_destroy(self._hv)


@cython.final
@cython.freelist(64)
cdef class DeviceBuf:
    """Typed device memory.  `ptr` is the device address (None once closed).

    This is the compiled DeviceBuf itself -- an exact type with a free list,
    so that making and dropping one costs no more than it must.  close(),
    copy_from(numpy array) and copy_to_host() are written here; every other
    method calls the same-named one of `memory.DeviceBufMethods`.
    """

    cdef readonly object ptr
    cdef public object nbytes
    cdef public object size
    cdef public object dtype
    cdef public object device
    cdef public int _ordinal
    cdef public object _npdt
    cdef public object _stream
    cdef public object _tag
    cdef public object _base
    cdef public object _views
    cdef object __weakref__
    cdef uintptr_t _addr
    cdef size_t _nbytes
    cdef int _kind
    cdef int _bucket
    cdef uintptr_t _ctx
    cdef PoolCore _pool

    @property
    def _dp(self):
        return PyLong_FromUnsignedLongLong(self._addr)

    @property
    def closed(self):
        return self.ptr is None

    @classmethod
    def _wrap(cls, dp, size, dtype, npdt, device, stream, release, tag=0, base=None):
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
        b._tag = tag
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

    def close(self):
        """Free the memory (stream-ordered on the home stream).  Idempotent; closes views too."""
        cdef int kind = self._kind
        self._kind = K_NONE  # taken before any call: a racing close() frees nothing
        ptr = self.ptr
        if ptr is None:
            return
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

    cdef uintptr_t _home_handle(self) except? 0:
        s = self._stream
        if isinstance(s, StreamCore) and not (<StreamCore>s)._isclosed:
            return (<StreamCore>s)._hv
        return (<StreamCore>self.device._state.default_stream)._hv

    def __dealloc__(self):
        cdef int kind = self._kind
        if self.ptr is None or kind == K_NONE:
            return
        self._kind = K_NONE
        try:
            if kind == K_POOL:
                if self._pool is not None:
                    self._pool._give(self._addr, self.ptr, self._bucket)
            elif kind == K_ASYNC:
                ia_cu.free_async(self._addr, <ia_h>self._home_handle())
            elif kind == K_SYNC:
                if ia_tls_ctx != self._ctx:
                    ia_cu.ctx_set(<ia_h>self._ctx)
                ia_cu.free_(self._addr)
            elif kind == K_IMPORTED:
                base = self._base
                if base is not None:
                    base[1].release()
        except BaseException:
            pass  # nothing can be raised from a finaliser

    def copy_from(self, src, stream=None):
        """Copy a host array, another DeviceBuf (any device) or a foreign device array into this buffer.

        Sizes and dtypes must match exactly; host arrays must be C-contiguous.
        Synchronous without `stream`, asynchronous on `stream` with it (a host
        array then must stay alive and unchanged until the stream reaches the copy).
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
                raise self._diagnose("cuMemcpyHtoDAsync", s, src, None)
            sh = ss._hv
            if stream is None:
                _copy_in_sync(self, <char*>view.buf, self._nbytes, sh)
            else:
                _htod(self._addr, view.buf, self._nbytes, sh, self._nbytes >= _GIL_FREE_COPY)
        finally:
            PyBuffer_Release(&view)

    def copy_to_host(self, out=None, stream=None):
        """Copy into a new numpy array (1-D, `size` elements), or into `out`; returns the array.

        `out` must be a writeable C-contiguous array of the same dtype and byte
        size.  Synchronous without `stream`; with it, the array is filled when
        the stream reaches the copy.
        """
        cdef Py_buffer view
        cdef StreamCore ss
        s = self._stream if stream is None else stream
        if out is None:
            if self.ptr is None:
                raise _errors.closed("cuMemcpyDtoHAsync", "buffer")
            if not isinstance(s, StreamCore) or (<StreamCore>s)._ordinal != self._ordinal:
                raise self._copy_mismatch("cuMemcpyDtoHAsync", None, s, True)
            out = np.empty(self.size, self._npdt)
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
                raise self._diagnose("cuMemcpyDtoHAsync", s, out, None)
            if stream is None:
                _copy_out_sync(self, <char*>view.buf, self._nbytes, ss._hv)
            else:
                _dtoh(view.buf, self._addr, self._nbytes, ss._hv, self._nbytes >= _GIL_FREE_COPY)
        finally:
            PyBuffer_Release(&view)
        return out


    # -- everything else: the cold methods of memory.DeviceBufMethods ---------------------

    def __init__(self, *args, **kwargs):
        raise TypeError("allocate with Device.alloc(), MemPool.alloc() or DeviceBuf.from_foreign()")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __len__(self):
        return self.size

    def __getitem__(self, key):
        return _COLD.__getitem__(self, key)

    def __repr__(self):
        return _COLD.__repr__(self)

    def memset(self, value=0, stream=None):
        return _COLD.memset(self, value, stream)

    def _copy_from_other(self, src, stream):
        return _COLD._copy_from_other(self, src, stream)

    def _copy_device(self, src, stream):
        return _COLD._copy_device(self, src, stream)

    def _stream_for(self, stream, op):
        return _COLD._stream_for(self, stream, op)

    @property
    def __cuda_array_interface__(self):
        return _COLD.__cuda_array_interface__.fget(self)

    def __dlpack_device__(self):
        return _COLD.__dlpack_device__(self)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        return _COLD.__dlpack__(self, stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)

    def _order_consumer(self, consumer):
        return _COLD._order_consumer(self, consumer)

    def _stream_int(self):
        return _COLD._stream_int(self)

    @classmethod
    def from_foreign(cls, obj):
        return _COLD.from_foreign.__func__(cls, obj)

    @classmethod
    def _from_cai(cls, obj, cai):
        return _COLD._from_cai.__func__(cls, obj, cai)

    def _copy_mismatch(self, op, arr, s, to_host=False):
        return _COLD._copy_mismatch(self, op, arr, s, to_host)

    def _diagnose(self, op, s, arr=None, exc=None):
        return _COLD._diagnose(self, op, s, arr, exc)


BufCore = DeviceBuf  # the contract's name: in this module the buffer class has no Python subclass


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


cdef class DeviceCore:
    """Device's per-handle fields and its hot methods (alloc, create_event).

    Cold helpers of the subclass: `_size_arg(size, op)`, `_bad_size(size, nbytes, op)`, `_bad_stream(s, op)`.
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

    def create_event(self, timing=False):
        """A new event; `timing=True` enables `elapsed_ms` (slightly slower record/sync)."""
        cdef EventCore e
        if self._closed:
            raise _errors.closed("cuEventCreate", "device")
        _ensure_ctx(self._ctx)
        h = _event_create(0 if timing else CU_EVENT_DISABLE_TIMING)
        e = EventCore.__new__(_EVENT_TYPE)
        e._hv = h
        e._isclosed = False
        e.device = self
        e._ordinal = self.ordinal
        e.timing = timing
        e._default = self._default_stream()
        return e

    def alloc(self, size, dtype="uint8", stream=None):
        """`size` elements of `dtype`, stream-ordered on `stream` (default: the default stream)."""
        cdef long long n, itemsize, nbytes
        cdef StreamCore ss
        cdef ia_dptr dp
        cdef DeviceBuf b
        cdef int kind
        if self._closed:
            raise _errors.closed("cuMemAllocAsync", "device")
        spec = _dtype_spec(dtype, "cuMemAllocAsync")
        if type(size) is not int:
            size = self._size_arg(size, "cuMemAllocAsync")
        itemsize = spec[2]
        try:
            n = PyLong_AsLongLong(size)
        except OverflowError:
            n = -1 if size < 0 else self._total + 1
        if n <= 0 or n > self._total // itemsize:
            raise self._bad_size(size, size * itemsize, "cuMemAllocAsync")
        nbytes = n * itemsize
        s = self._default_stream() if stream is None else stream
        if not isinstance(s, StreamCore) or (<StreamCore>s)._ordinal != self.ordinal or (<StreamCore>s)._isclosed:
            raise self._bad_stream(s, "cuMemAllocAsync")
        ss = <StreamCore>s
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
        b.nbytes = size if itemsize == 1 else nbytes
        b.dtype = spec[0]
        b._npdt = spec[1]
        b.device = self
        b._ordinal = self.ordinal
        b._stream = s
        b._kind = kind
        b._ctx = self._ctx
        b._tag = 0
        return b


# -- kernel launch ----------------------------------------------------------------------

cdef enum:
    A_PTR = 1
    A_INT = 2     # a signed integer of `size` bytes
    A_UINT = 3    # an unsigned integer
    A_F32 = 4
    A_F64 = 5
    A_BOOL = 6

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
            p.slots[i].kind = kind
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
        if slot.kind == A_PTR:
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


cdef object _dim3 = None  # module._dim3: validates anything but a plain int, as the pure-Python launch does


cdef inline int _dim(object value, unsigned int* out, str what) except -1:
    """An int or anything `module._dim3` accepts (1-3 ints) into out[0..2]; raises TypeError/OverflowError."""
    global _dim3
    if type(value) is int:
        out[0] = value
        out[1] = 1
        out[2] = 1
        return 0
    if _dim3 is None:
        from .module import _dim3 as dim3

        _dim3 = dim3
    x, y, z = _dim3(value, what)
    out[0] = x
    out[1] = y
    out[2] = z
    return 0


cdef void* _no_params[1]  # a non-NULL "no parameters" for the except-NULL convention (the driver ignores it)


cdef class FunctionCore:
    """Function's hot method (launch).

    Cold helpers of the subclass: `_prepare(args) -> ArgPacker`, `_bad_stream(s)`,
    `_launch_error(s, exc, grid, block, smem)`.
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

    def launch(self, grid, block, *args, stream=None, shared_mem=0):
        """Queue the kernel on `stream` (default: the device's default stream).

        `grid` and `block` are ints or (x, y, z) tuples; `shared_mem` is the
        dynamic shared memory per block in bytes.  Arguments: see the `launch`
        module docstring for how they map onto the kernel's parameters.

        Everything is checked before the arguments are packed, and nothing
        between packing and cuLaunchKernel runs Python code, so one shared
        argument block per plan is safe under the GIL.
        """
        cdef _Plan p
        cdef unsigned int g[3]
        cdef unsigned int bl[3]
        cdef unsigned int smem
        cdef void** params
        cdef int r, err
        cdef uintptr_t sh
        if self._isclosed:
            raise _errors.closed("cuLaunchKernel", "function (its module was closed)")
        p = self._last
        if not _plan_matches(p, args):
            p = self._plan_for(args)
            self._last = p
        s = self._default if stream is None else stream
        try:
            _dim(grid, g, "grid")
            _dim(block, bl, "block")
            smem = shared_mem
        except (TypeError, OverflowError, ValueError) as exc:
            if isinstance(exc, IronAccelError):
                raise
            raise self._launch_error(s, exc, grid, block, shared_mem) from None
        if not isinstance(s, StreamCore) or (<StreamCore>s)._ordinal != self._ordinal:
            raise self._bad_stream(s)
        if (<StreamCore>s)._isclosed:
            raise self._launch_error(s, TypeError("closed stream"), grid, block, shared_mem)
        sh = (<StreamCore>s)._hv
        while True:
            if p.use_packer:  # half or complex arguments: the struct packer, one per thread as in pure Python
                params = self._pack_in_python(args)
            else:
                try:
                    r = _pack(p, args, self._ordinal, self._reachable)
                except OverflowError:
                    r = -2
                except Exception as exc:
                    from .launch import pack_error

                    raise pack_error(args, exc, self.name) from None
                if r:
                    raise self._pack_failure(args)
                params = p.params if p.nargs else NULL
            err = ia_cu.launch(<ia_h>self._hv, g[0], g[1], g[2], bl[0], bl[1], bl[2], smem, <ia_h>sh, params, NULL)
            if err == 0:
                return
            _again(err, "cuLaunchKernel", sh, True)  # then pack again: Python ran, the block may be stale

    cdef void** _pack_in_python(self, tuple args) except NULL:
        try:
            packer = self._tls.packers[tuple([type(a) for a in args])]
        except (AttributeError, KeyError):
            packer = self._prepare(args)
        try:
            packer.pack(args)
        except Exception as exc:
            from .launch import pack_error

            raise pack_error(args, exc, self.name) from None
        cdef uintptr_t params = packer.params
        return <void**>params if params else <void**>_no_params

    def _pack_failure(self, args):
        """Cold: why `_pack` refused these arguments (a closed or foreign buffer, a value that does not fit)."""
        import struct

        from .launch import pack_error

        for i, a in enumerate(args):
            if isinstance(a, DeviceBuf) and (<DeviceBuf>a).ptr is not None and (<DeviceBuf>a)._ordinal != self._ordinal:
                return _errors.invalid("cuLaunchKernel", f"{self.name}: argument {i} is a buffer on "
                                       f"cuda:{(<DeviceBuf>a)._ordinal} but the kernel runs on cuda:{self._ordinal} "
                                       "(enable_peer_access first to use peer memory)")
        return pack_error(args, struct.error("argument out of range"), self.name)


# -- the memory pool's bucket cache ------------------------------------------------------

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
    """Power-of-two byte buckets in front of cuMemAllocAsync / cuMemFreeAsync (see `_hotpy.PoolCore`).

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
    cdef object _spec_key
    cdef tuple _spec

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
        cdef ia_dptr dp
        if self._closed:
            raise _errors.closed("MemPool.alloc", "pool")
        if dtype is self._spec_key:
            spec = self._spec
        else:
            spec = _dtype_spec(dtype, "MemPool.alloc")
            self._spec_key = dtype
            self._spec = spec
        if type(size) is not int:
            size = self.device._size_arg(size, "MemPool.alloc")
        itemsize = spec[2]
        try:
            n = PyLong_AsLongLong(size)
        except OverflowError:
            n = -1 if size < 0 else self._total + 1
        if n <= 0 or n > self._total // itemsize:
            raise self.device._bad_size(size, size * itemsize, "MemPool.alloc")
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
        buf._tag = 0
        return buf

    cdef int _take_slow(self, TCache* tc, int b, DeviceBuf buf) except -1:
        cdef Stack* sh = &self.shared[b]
        cdef Entry e
        cdef ia_dptr dp
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


CORE_FIELDS = {
    "StreamCore": ("_h", "_ordinal"),
    "EventCore": ("_h", "_ordinal", "_default", "device", "timing"),
    "BufCore": ("ptr", "nbytes", "size", "dtype", "device", "_ordinal", "_npdt", "_dp", "_stream", "_tag", "_base",
                "_views"),
    "DeviceCore": ("_state", "ordinal", "_closed", "_pools"),
    "FunctionCore": ("_h", "_ordinal", "_default", "_reachable", "name"),
    "PoolCore": ("stream", "fallback", "device", "_closed"),
}


# -- fork ---------------------------------------------------------------------------------

def disable(reason):
    """In a forked child: every entry point raises InvalidState, except releases, which do nothing."""
    global _disabled, _disabled_reason
    _disabled = True
    _disabled_reason = reason
    ia_table_stub(IA_DISABLED)
