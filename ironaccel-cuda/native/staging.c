/* The staging pipeline (see staging.h). */
#define _GNU_SOURCE
#include "staging.h"

#include "fence.h"

#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#define IA_NOT_READY 600 /* CUDA_ERROR_NOT_READY */

/* The workers sleep on `seq` itself (a futex on Linux), so a new job wakes them all at once: with a condition
   variable each woken thread must take the mutex in turn, which chains the wake-ups.  A job is `open` from
   publish to finish; a worker counts itself in `active` before it looks at the job, so finish waits only for
   workers inside it, never for one that has not woken up yet. */
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

static ia_pool_t ia_pool = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER,
                            .job_mu = PTHREAD_MUTEX_INITIALIZER};

#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
static void seq_wait(unsigned seen) {
    syscall(SYS_futex, (unsigned *)&ia_pool.seq, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
}
static void seq_bump(void) {
    atomic_fetch_add_explicit(&ia_pool.seq, 1, memory_order_release);
    syscall(SYS_futex, (unsigned *)&ia_pool.seq, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}
#else
static void seq_wait(unsigned seen) {
    pthread_mutex_lock(&ia_pool.mu);
    while (atomic_load_explicit(&ia_pool.seq, memory_order_acquire) == seen)
        pthread_cond_wait(&ia_pool.cv, &ia_pool.mu);
    pthread_mutex_unlock(&ia_pool.mu);
}
static void seq_bump(void) {
    pthread_mutex_lock(&ia_pool.mu);
    atomic_fetch_add_explicit(&ia_pool.seq, 1, memory_order_release);
    pthread_cond_broadcast(&ia_pool.cv);
    pthread_mutex_unlock(&ia_pool.mu);
}
#endif

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* Non-temporal stores help large copies into memory the CPU will not read back soon -- the slots the DMA
   engine reads, or a host array: they skip the read-for-ownership of every destination line and leave no
   dirty lines for the DMA to snoop.  Ends with a store fence, so the data is visible before any flag stored
   after it. */
void ia_copy(char *dst, const char *src, size_t len, int nt) {
#if defined(__x86_64__)
    if (nt && len >= 4096) {
        size_t head = (16 - ((uintptr_t)dst & 15)) & 15;
        memcpy(dst, src, head);
        dst += head;
        src += head;
        len -= head;
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
static void copy_chunk(ia_pool_t *P, size_t c) {
    size_t off = c * P->chunk, len = P->nbytes - off < P->chunk ? P->nbytes - off : P->chunk;
    char *slot = P->slots + (c % (size_t)P->nslots) * P->stride;
    if (P->dir == 0) ia_copy(slot, P->host + off, len, P->nt & 1);
    else ia_copy(P->host + off, slot, len, P->nt & 2);
    atomic_store_explicit(&P->copied[c], 1, memory_order_release);
    atomic_fetch_add_explicit(&P->ncopied, 1, memory_order_release);
}

/* Claim chunk `want` (or, with ANY, the next one) if it is unclaimed and may be copied now; -1 if not. */
#define ANY ((size_t)-1)
static long claim(ia_pool_t *P, size_t want) {
    size_t c = atomic_load_explicit(&P->next, memory_order_relaxed);
    if ((want != ANY && c != want) || c >= P->nchunks || c >= atomic_load_explicit(&P->limit, memory_order_acquire))
        return -1;
    if (!atomic_compare_exchange_strong_explicit(&P->next, &c, c + 1, memory_order_relaxed, memory_order_relaxed))
        return -1;
    return (long)c;
}

static void work(void) {
    ia_pool_t *P = &ia_pool;
    for (;;) {
        if (!atomic_load_explicit(&P->open, memory_order_relaxed)) return;
        size_t c = atomic_fetch_add_explicit(&P->next, 1, memory_order_relaxed);
        if (c >= P->nchunks) return;
        while (atomic_load_explicit(&P->limit, memory_order_acquire) <= c) {
            if (!atomic_load_explicit(&P->open, memory_order_relaxed)) return;
            IA_RELAX();
        }
        copy_chunk(P, c);
    }
}

static void *worker(void *arg) {
    ia_pool_t *P = &ia_pool;
    unsigned seen = (unsigned)(uintptr_t)arg;
    for (;;) {
        unsigned cur = atomic_load_explicit(&P->seq, memory_order_acquire);
        if (cur == seen) {
            double until = now_us() + 100.0; /* spin a while: back-to-back copies find us awake */
            int spins = 0;
            while ((cur = atomic_load_explicit(&P->seq, memory_order_acquire)) == seen) {
                IA_RELAX();
                if (++spins == 256) {
                    spins = 0;
                    if (now_us() > until) break;
                }
            }
            while ((cur = atomic_load_explicit(&P->seq, memory_order_acquire)) == seen) seq_wait(seen);
        }
        seen = cur;
        atomic_fetch_add(&P->active, 1); /* seq_cst, paired with finish's store of open */
        if (atomic_load(&P->open)) work();
        atomic_fetch_sub_explicit(&P->active, 1, memory_order_release);
    }
    return NULL;
}

int ia_pool_start(int nthreads) {
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
        if (pthread_create(&t, &attr, worker, (void *)(uintptr_t)seq) != 0) break;
        started++;
    }
    pthread_attr_destroy(&attr);
    P->nthreads = started;
    return started;
}

int ia_pool_threads(void) { return ia_pool.nthreads; }

size_t ia_chunk_for(const ia_staging *st, size_t nbytes) {
    size_t chunk = (nbytes / (size_t)(st->split > 0 ? st->split : 32) + 0xFFFF) & ~(size_t)0xFFFF;
    if (chunk < 0x10000) chunk = 0x10000;
    return chunk < st->chunk ? chunk : st->chunk;
}

void ia_pipe_lock(void) { pthread_mutex_lock(&ia_pool.job_mu); }
void ia_pipe_unlock(void) { pthread_mutex_unlock(&ia_pool.job_mu); }

/* Open a job (no worker is inside one: the last finish saw to that) and wake the workers. */
static int publish(int dir, char *host, size_t nbytes, size_t chunk, ia_staging *st, size_t limit) {
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
    P->dir = dir;
    P->nt = st->nt;
    P->host = host;
    P->slots = st->slots;
    P->nbytes = nbytes;
    P->chunk = chunk;
    P->stride = st->chunk;
    P->nchunks = n;
    P->nslots = st->nslots;
    atomic_store(&P->next, 0);
    atomic_store(&P->limit, limit);
    atomic_store(&P->ncopied, 0);
    atomic_store(&P->open, 1);
    seq_bump();
    return 0;
}

/* Close the job and wait for the workers inside it (those still waking up will find it closed). */
static void finish(void) {
    ia_pool_t *P = &ia_pool;
    atomic_store(&P->open, 0);
    while (atomic_load(&P->active) > 0) IA_RELAX();
}

#define CHUNK_LEN(c) (nbytes - (c) * chunk < chunk ? nbytes - (c) * chunk : chunk)

/* The DMA of chunk k is issued as soon as its copy is done, in order; the calling thread copies the next chunk
   itself whenever no worker has claimed it yet (at the start, before the workers are awake, the first chunks
   are its own).  A slot's event is recorded only when a later chunk reuses the slot. */
int ia_pipe_htod(ia_staging *st, CUdeviceptr dst, const char *src, size_t nbytes, CUstream stream, const char **op) {
    ia_pool_t *P = &ia_pool;
    size_t chunk = ia_chunk_for(st, nbytes), stride = st->chunk, K = (size_t)st->nslots;
    size_t n = (nbytes + chunk - 1) / chunk, issued = 0, freed = 0;
    int err = 0;
    if (publish(0, (char *)src, nbytes, chunk, st, K < n ? K : n)) {
        *op = "malloc";
        return 2;
    }
    while (issued < n) {
        if (atomic_load_explicit(&P->copied[issued], memory_order_acquire)) {
            size_t slot = issued % K;
            err = ia_cu.cuMemcpyHtoDAsync(dst + issued * chunk, st->slots + slot * stride, CHUNK_LEN(issued), stream);
            if (err) { *op = "cuMemcpyHtoDAsync"; break; }
            if (issued + K < n) { /* chunk issued + K will reuse this slot */
                err = ia_cu.cuEventRecord(st->events[slot], stream);
                if (err) { *op = "cuEventRecord"; break; }
            }
            issued++;
            continue;
        }
        if (freed < issued && freed + K < n) {
            int q = ia_cu.cuEventQuery(st->events[freed % K]);
            if (q == 0) {
                freed++;
                atomic_store_explicit(&P->limit, freed + K < n ? freed + K : n, memory_order_release);
                continue;
            }
            if (q != IA_NOT_READY) { err = q; *op = "cuEventQuery"; break; }
        }
        long c = claim(P, issued); /* the chunk the DMA waits for is unclaimed: copy it here */
        if (c >= 0) { copy_chunk(P, (size_t)c); continue; }
        IA_RELAX();
    }
    finish();
    int s = ia_cu.cuStreamSynchronize(stream); /* the copy has landed, and no DMA still reads a slot */
    if (!err && s) { err = s; *op = "cuStreamSynchronize"; }
    return err;
}

/* The calling thread issues the DMAs (up to one per slot ahead of the copies) and marks chunks landed as their
   events complete; once everything has landed it copies out chunks too. */
int ia_pipe_dtoh(ia_staging *st, char *dst, CUdeviceptr src, size_t nbytes, CUstream stream, const char **op) {
    ia_pool_t *P = &ia_pool;
    size_t chunk = ia_chunk_for(st, nbytes), stride = st->chunk, K = (size_t)st->nslots;
    size_t n = (nbytes + chunk - 1) / chunk, issued = 0, landed = 0;
    int err = 0;
    if (publish(1, dst, nbytes, chunk, st, 0)) {
        *op = "malloc";
        return 2;
    }
    for (;;) {
        if (landed < issued) {
            int q = ia_cu.cuEventQuery(st->events[landed % K]);
            if (q == 0) {
                landed++;
                atomic_store_explicit(&P->limit, landed, memory_order_release);
                continue;
            }
            if (q != IA_NOT_READY) { err = q; *op = "cuEventQuery"; break; }
        }
        if (issued < n && (issued < K || atomic_load_explicit(&P->copied[issued - K], memory_order_acquire))) {
            size_t slot = issued % K;
            err = ia_cu.cuMemcpyDtoHAsync(st->slots + slot * stride, src + issued * chunk, CHUNK_LEN(issued), stream);
            if (err) { *op = "cuMemcpyDtoHAsync"; break; }
            err = ia_cu.cuEventRecord(st->events[slot], stream);
            if (err) { *op = "cuEventRecord"; break; }
            issued++;
            continue;
        }
        if (atomic_load_explicit(&P->ncopied, memory_order_acquire) >= n) break;
        if (landed == n) { /* nothing left to issue or watch: help copy out */
            long c = claim(P, ANY);
            if (c >= 0) { copy_chunk(P, (size_t)c); continue; }
        }
        IA_RELAX();
    }
    finish();
    if (err) ia_cu.cuStreamSynchronize(stream);
    return err;
}

int ia_bounce_take(ia_staging *st) {
    int expected = 0;
    return atomic_compare_exchange_strong(&st->bounce_busy, &expected, 1) ? 0 : -1;
}

void ia_bounce_give(ia_staging *st) { atomic_store(&st->bounce_busy, 0); }

