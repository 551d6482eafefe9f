/* How soon each way of waiting sees a stream's work finish, from C: cuStreamSynchronize (what every Python
 * wrapper's sync is) against polling cuStreamQuery, an event (cuEventSynchronize or polling cuEventQuery), and
 * a host flag the GPU writes after the work (cuStreamWriteValue32 to mapped page-locked memory, read in a spin:
 * the soonest the host can know).  If polling sees the end sooner than the driver's own wait, the C floor of
 * the copy rows is not a floor, and a sync could poll first.  Run by probe_wait.py, which builds this with
 * nvcc and makes the table.
 *
 *   probe_wait SCHED ROUNDS N    SCHED: auto | spin | yield | blocking (the primary context's flags)
 *
 * Prints one JSON line per (round, work, wait): {"work":..,"wait":..,"round":..,"ns":per operation}; the
 * waits of a round run in a rotated order.  Device buffers come from cuMemAlloc, or from the device's default
 * pool where the work says "pool" (cuda.core's and ironaccel's stream-ordered buffers); host buffers from
 * cuMemHostAlloc.  A PTX no-op kernel (JIT-compiled by the driver) is the launch work; its load is settled
 * with an event on an idle stream, as ironaccel does, so the idle waits are not in lazy loading's slow state.
 */
#include <cuda.h>
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CK(call)                                                                                   \
    do {                                                                                           \
        CUresult rc_ = (call);                                                                     \
        if (rc_ != CUDA_SUCCESS) {                                                                 \
            const char *n_ = "?";                                                                  \
            cuGetErrorName(rc_, &n_);                                                              \
            printf("{\"error\": \"%s\", \"code\": %d, \"name\": \"%s\"}\n", #call, (int)rc_, n_); \
            exit(2);                                                                               \
        }                                                                                          \
    } while (0)

static const char PTX[] =
    ".version 7.0\n.target sm_52\n.address_size 64\n.visible .entry noop()\n{\n\tret;\n}\n";

enum { KiB = 1024, MiB = 1024 * 1024 };
enum work { IDLE, MEMSET, LAUNCH, H2D_64K, D2H_64K, H2D_1M, D2H_1M, D2D_64K, H2D_64K_POOL, D2H_64K_POOL, NWORK };
static const char *work_name[NWORK] = {"idle", "memset 4 B", "launch (no-op kernel)", "h2d 64 KiB", "d2h 64 KiB",
                                       "h2d 1 MiB", "d2h 1 MiB", "d2d 64 KiB", "h2d 64 KiB (pool buffer)",
                                       "d2h 64 KiB (pool buffer)"};
enum wait { SYNC, QUERY_THEN_SYNC, QUERY_SPIN, EVENT_SYNC, EVENT_SPIN, FLAG_SPIN, NWAIT };
static const char *wait_name[NWAIT] = {"cuStreamSynchronize", "cuStreamQuery, then cuStreamSynchronize",
                                       "cuStreamQuery in a loop", "event record + cuEventSynchronize",
                                       "event record + cuEventQuery in a loop",
                                       "cuStreamWriteValue32 to a host flag, read in a loop"};

static CUstream stream;
static CUevent event;
static CUfunction noop;
static CUdeviceptr dbuf, dbuf2, pool_buf, flag_dev;
static unsigned char *pinned;
static volatile uint32_t *flag_host;
static uint32_t seq;
static int flag_ok;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void submit(enum work w) {
    switch (w) {
    case IDLE: break;
    case MEMSET: CK(cuMemsetD32Async(dbuf, seq, 1, stream)); break;
    case LAUNCH: CK(cuLaunchKernel(noop, 1, 1, 1, 32, 1, 1, 0, stream, NULL, NULL)); break;
    case H2D_64K: CK(cuMemcpyHtoDAsync(dbuf, pinned, 64 * KiB, stream)); break;
    case D2H_64K: CK(cuMemcpyDtoHAsync(pinned, dbuf, 64 * KiB, stream)); break;
    case H2D_1M: CK(cuMemcpyHtoDAsync(dbuf, pinned, MiB, stream)); break;
    case D2H_1M: CK(cuMemcpyDtoHAsync(pinned, dbuf, MiB, stream)); break;
    case D2D_64K: CK(cuMemcpyDtoDAsync(dbuf2, dbuf, 64 * KiB, stream)); break;
    case H2D_64K_POOL: CK(cuMemcpyHtoDAsync(pool_buf, pinned, 64 * KiB, stream)); break;
    case D2H_64K_POOL: CK(cuMemcpyDtoHAsync(pinned, pool_buf, 64 * KiB, stream)); break;
    default: break;
    }
}

static void wait_for(enum wait m) {
    CUresult r;
    switch (m) {
    case SYNC: CK(cuStreamSynchronize(stream)); break;
    case QUERY_THEN_SYNC:
        r = cuStreamQuery(stream);
        if (r == CUDA_ERROR_NOT_READY) CK(cuStreamSynchronize(stream));
        else CK(r);
        break;
    case QUERY_SPIN:
        while ((r = cuStreamQuery(stream)) == CUDA_ERROR_NOT_READY) {}
        CK(r);
        break;
    case EVENT_SYNC: CK(cuEventRecord(event, stream)); CK(cuEventSynchronize(event)); break;
    case EVENT_SPIN:
        CK(cuEventRecord(event, stream));
        while ((r = cuEventQuery(event)) == CUDA_ERROR_NOT_READY) {}
        CK(r);
        break;
    case FLAG_SPIN:
        seq++;
        CK(cuStreamWriteValue32(stream, flag_dev, seq, 0));
        while (*flag_host != seq) _mm_pause();
        break;
    default: break;
    }
}

int main(int argc, char **argv) {
    const char *sched = argc > 1 ? argv[1] : "auto";
    int rounds = argc > 2 ? atoi(argv[2]) : 30, n = argc > 3 ? atoi(argv[3]) : 100;
    unsigned int flags = !strcmp(sched, "spin")       ? CU_CTX_SCHED_SPIN
                         : !strcmp(sched, "yield")    ? CU_CTX_SCHED_YIELD
                         : !strcmp(sched, "blocking") ? CU_CTX_SCHED_BLOCKING_SYNC
                                                      : CU_CTX_SCHED_AUTO;
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxSetFlags(dev, flags));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    CK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CK(cuEventCreate(&event, CU_EVENT_DISABLE_TIMING));
    CK(cuModuleLoadData(&mod, PTX));
    CK(cuModuleGetFunction(&noop, mod, "noop"));
    { /* the settle: an event on an idle stream, waited for (module.settle_lazy_load) */
        CUstream s;
        CUevent e;
        CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        CK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
        CK(cuEventRecord(e, s));
        CK(cuEventSynchronize(e));
        CK(cuEventDestroy(e));
        CK(cuStreamDestroy(s));
    }
    CK(cuMemAlloc(&dbuf, MiB));
    CK(cuMemAlloc(&dbuf2, MiB));
    CK(cuMemAllocAsync(&pool_buf, 64 * KiB, stream));
    CK(cuMemHostAlloc((void **)&pinned, MiB, 0));
    memset(pinned, 0x5A, MiB);
    CK(cuMemsetD8(dbuf, 0, MiB));
    CK(cuStreamSynchronize(stream));
    void *flag_p = NULL;
    if (cuMemHostAlloc(&flag_p, 4096, CU_MEMHOSTALLOC_DEVICEMAP) == CUDA_SUCCESS &&
        cuMemHostGetDevicePointer(&flag_dev, flag_p, 0) == CUDA_SUCCESS) {
        flag_host = (volatile uint32_t *)flag_p;
        *flag_host = 0;
        flag_ok = cuStreamWriteValue32(stream, flag_dev, 0, 0) == CUDA_SUCCESS &&
                  cuStreamSynchronize(stream) == CUDA_SUCCESS;
    }
    printf("{\"sched\": \"%s\", \"flag_wait\": %s}\n", sched, flag_ok ? "true" : "false");
    for (int r = 0; r < rounds; r++) {
        for (int w = 0; w < NWORK; w++) {
            for (int k = 0; k < NWAIT; k++) {
                enum wait m = (enum wait)((k + r) % NWAIT);
                if (m == FLAG_SPIN && !flag_ok) continue;
                for (int i = 0; i < 5; i++) { submit(w); wait_for(m); }
                int64_t t0 = now_ns();
                for (int i = 0; i < n; i++) { submit(w); wait_for(m); }
                double ns = (double)(now_ns() - t0) / n;
                CK(cuStreamSynchronize(stream));
                printf("{\"work\": \"%s\", \"wait\": \"%s\", \"round\": %d, \"ns\": %.1f}\n", work_name[w],
                       wait_name[m], r, ns);
            }
        }
    }
    fflush(stdout);
    return 0;
}
