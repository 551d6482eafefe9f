/* The C floor of the ironaccel-cuda benchmark: the same driver calls the Python sides make,
 * with nothing above the driver, so the table shows what Python adds.
 *
 * Build (the runner does this on the GPU machine):  nvcc -O2 -o floor floor.c -lcuda
 *
 *   floor CUBIN --serve   read "OP ARG N" lines on stdin; run OP N times (ARG = bytes or count),
 *                         timing only the N calls; answer one JSON line {"op":..,"n":..,"ns":..}.
 *                         "check 0 1" verifies kernels and copies; "quit 0 0" ends.
 *   floor CUBIN --json    time every operation by itself (median of 21 batches) and print one
 *                         JSON object of nanoseconds per operation.
 *
 * Every driver call is checked; a failure prints {"error":..,"code":..,"name":..} and exits 2.
 * OP: sync, event_cycle, event_reuse, alloc, h2d, h2d_pinned, d2h, d2h_pinned, d2d, launch4, launch16,
 *     eager, graph; and PyCUDA's calls (bench_pycuda_compat.py): event_timed, mem_alloc, htod_sync,
 *     dtoh_sync.  Launch-type ops synchronize after the clock stops, so queued work never
 *     leaks into the next batch; copies synchronize inside the clock (the copy must land).
 *
 * The copies, eager and graph ops wait as ironaccel's Stream.synchronize does (wait_stream: a query, then,
 * if busy, a fence word the GPU writes behind the work, native/fence.h), the fastest wait known, so that
 * "peer / floor" stays the most any wrapper could gain; IRONACCEL_CUDA_FENCE_SPIN_US=0 makes them
 * cuStreamSynchronize, as every other library's wait is.
 */
#include <cuda.h>
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void fail(const char *what, CUresult code, int line) {
    const char *name = NULL;
    if (cuGetErrorName(code, &name) != CUDA_SUCCESS || name == NULL) name = "?";
    printf("{\"error\": \"%s\", \"code\": %d, \"name\": \"%s\", \"line\": %d}\n", what, (int)code, name, line);
    fflush(stdout);
    exit(2);
}

#define CK(call)                                          \
    do {                                                  \
        CUresult rc_ = (call);                            \
        if (rc_ != CUDA_SUCCESS) fail(#call, rc_, __LINE__); \
    } while (0)

static CUdevice device;
static CUcontext context;
static CUstream stream;
static CUmodule module;
static CUfunction k4, k16;
static CUdeviceptr out;
static CUevent reused_event, timed_event;
static int ints[16];
static void *params4[4], *params16[16];

static unsigned char *host_src, *host_dst, *pinned;
static size_t host_cap, pinned_cap;
static CUdeviceptr dbuf, dbuf2; /* dbuf2: the d2d op's destination */
static size_t dbuf_cap;

static volatile unsigned int *fence_word;
static CUdeviceptr fence_dev;
static unsigned int fence_seq;
static int64_t fence_spin_ns = 200000;

static CUgraph graph;
static CUgraphExec graph_exec;
static long graph_count = -1;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* ironaccel's wait (native/fence.h): idle -> done; busy -> a write of the fence word behind the work and a spin
   on it for up to fence_spin_ns; past that, cuStreamSynchronize. */
static void wait_stream(void) {
    CUresult r = cuStreamQuery(stream);
    if (r == CUDA_SUCCESS) return;
    if (r != CUDA_ERROR_NOT_READY) CK(r);
    if (fence_dev) {
        unsigned int want = ++fence_seq;
        CK(cuStreamWriteValue32(stream, fence_dev, want, 0));
        int64_t until = 0;
        for (int spins = 0;; spins++) {
            if ((int)(__atomic_load_n(fence_word, __ATOMIC_ACQUIRE) - want) >= 0) return;
            if ((spins & 63) == 63) {
                int64_t t = now_ns();
                if (until == 0) until = t + fence_spin_ns;
                else if (t > until) break;
            }
            _mm_pause();
        }
    }
    CK(cuStreamSynchronize(stream));
}

static void fill_random(unsigned char *p, size_t n, uint64_t seed) {
    uint64_t x = seed * 2654435761u + 88172645463325252ull;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p[i] = (unsigned char)(x >> 24);
    }
}

static void ensure_capacity(size_t nbytes) {
    if (nbytes > host_cap) {
        free(host_src);
        free(host_dst);
        host_src = malloc(nbytes);
        host_dst = malloc(nbytes);
        if (!host_src || !host_dst) fail("malloc", CUDA_ERROR_OUT_OF_MEMORY, __LINE__);
        fill_random(host_src, nbytes, 1);
        memset(host_dst, 0xA5, nbytes); /* touched, so page faults are not timed */
        host_cap = nbytes;
    }
    if (nbytes > pinned_cap) {
        if (pinned) CK(cuMemFreeHost(pinned));
        CK(cuMemHostAlloc((void **)&pinned, nbytes, 0));
        fill_random(pinned, nbytes, 2);
        pinned_cap = nbytes;
    }
    if (nbytes > dbuf_cap) {
        if (dbuf) CK(cuMemFree(dbuf));
        if (dbuf2) CK(cuMemFree(dbuf2));
        CK(cuMemAlloc(&dbuf, nbytes));
        CK(cuMemAlloc(&dbuf2, nbytes));
        dbuf_cap = nbytes;
    }
}

static void launch(CUfunction f, void **params) {
    CK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, stream, params, NULL));
}

static void ensure_graph(long count) {
    if (graph_count == count) return;
    if (graph_count >= 0) {
        CK(cuGraphExecDestroy(graph_exec));
        CK(cuGraphDestroy(graph));
    }
    CK(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    for (long i = 0; i < count; i++) launch(k4, params4);
    CK(cuStreamEndCapture(stream, &graph));
    CK(cuGraphInstantiateWithFlags(&graph_exec, graph, 0));
    graph_count = count;
}

/* Runs OP n times; returns the nanoseconds of the n calls (setup and trailing sync excluded). */
static int64_t run_op(const char *op, long arg, long n) {
    int64_t t0, t1;
    size_t nbytes = (size_t)arg;
    if (!strcmp(op, "sync")) {
        t0 = now_ns();
        for (long i = 0; i < n; i++) CK(cuStreamSynchronize(stream));
        return now_ns() - t0;
    }
    if (!strcmp(op, "event_cycle")) {
        t0 = now_ns();
        for (long i = 0; i < n; i++) {
            CUevent e;
            CK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
            CK(cuEventRecord(e, stream));
            CK(cuEventSynchronize(e));
            CK(cuEventDestroy(e));
        }
        return now_ns() - t0;
    }
    if (!strcmp(op, "event_reuse")) {
        t0 = now_ns();
        for (long i = 0; i < n; i++) {
            CK(cuEventRecord(reused_event, stream));
            CK(cuEventSynchronize(reused_event));
        }
        return now_ns() - t0;
    }
    if (!strcmp(op, "event_timed")) { /* PyCUDA's Event(): default flags, timing on */
        t0 = now_ns();
        for (long i = 0; i < n; i++) {
            CK(cuEventRecord(timed_event, stream));
            CK(cuEventSynchronize(timed_event));
        }
        return now_ns() - t0;
    }
    if (!strcmp(op, "mem_alloc")) { /* PyCUDA's mem_alloc(n).free() */
        t0 = now_ns();
        for (long i = 0; i < n; i++) {
            CUdeviceptr p;
            CK(cuMemAlloc(&p, nbytes));
            CK(cuMemFree(p));
        }
        return now_ns() - t0;
    }
    if (!strcmp(op, "htod_sync") || !strcmp(op, "dtoh_sync")) { /* PyCUDA's memcpy_htod / memcpy_dtoh, pageable */
        ensure_capacity(nbytes);
        t0 = now_ns();
        if (op[0] == 'h')
            for (long i = 0; i < n; i++) CK(cuMemcpyHtoD(dbuf, host_src, nbytes));
        else
            for (long i = 0; i < n; i++) CK(cuMemcpyDtoH(host_dst, dbuf, nbytes));
        CK(cuCtxSynchronize());
        return now_ns() - t0;
    }
    if (!strcmp(op, "alloc")) {
        t0 = now_ns();
        for (long i = 0; i < n; i++) {
            CUdeviceptr p;
            CK(cuMemAllocAsync(&p, nbytes, stream));
            CK(cuMemFreeAsync(p, stream));
        }
        t1 = now_ns();
        CK(cuStreamSynchronize(stream));
        return t1 - t0;
    }
    if (!strcmp(op, "h2d") || !strcmp(op, "h2d_pinned")) {
        ensure_capacity(nbytes);
        const unsigned char *src = op[3] ? pinned : host_src;
        t0 = now_ns();
        for (long i = 0; i < n; i++) {
            CK(cuMemcpyHtoDAsync(dbuf, src, nbytes, stream));
            wait_stream();
        }
        return now_ns() - t0;
    }
    if (!strcmp(op, "d2h") || !strcmp(op, "d2h_pinned")) {
        ensure_capacity(nbytes);
        unsigned char *dst = op[3] ? pinned : host_dst;
        t0 = now_ns();
        for (long i = 0; i < n; i++) {
            CK(cuMemcpyDtoHAsync(dst, dbuf, nbytes, stream));
            wait_stream();
        }
        return now_ns() - t0;
    }
    if (!strcmp(op, "d2d")) {
        ensure_capacity(nbytes);
        t0 = now_ns();
        for (long i = 0; i < n; i++) {
            CK(cuMemcpyDtoDAsync(dbuf2, dbuf, nbytes, stream));
            wait_stream();
        }
        return now_ns() - t0;
    }
    if (!strcmp(op, "launch4") || !strcmp(op, "launch16")) {
        CUfunction f = op[6] == '4' ? k4 : k16;
        void **params = op[6] == '4' ? params4 : params16;
        t0 = now_ns();
        for (long i = 0; i < n; i++) launch(f, params);
        t1 = now_ns();
        CK(cuStreamSynchronize(stream));
        return t1 - t0;
    }
    if (!strcmp(op, "eager")) {
        t0 = now_ns();
        for (long i = 0; i < n; i++) {
            for (long j = 0; j < arg; j++) launch(k4, params4);
            wait_stream();
        }
        return now_ns() - t0;
    }
    if (!strcmp(op, "graph")) {
        ensure_graph(arg);
        t0 = now_ns();
        for (long i = 0; i < n; i++) {
            CK(cuGraphLaunch(graph_exec, stream));
            wait_stream();
        }
        return now_ns() - t0;
    }
    return -1;
}

static int read_out(void) {
    int value = 0;
    CK(cuStreamSynchronize(stream));
    CK(cuMemcpyDtoH(&value, out, sizeof value));
    return value;
}

/* Kernels write the sum of their int arguments; copies round-trip random bytes exactly. */
static const char *check_all(void) {
    static const char *problems[] = {"bench_k4 result", "bench_k16 result", "graph result", "pageable copy",
                                     "pinned copy", "device-to-device copy"};
    CK(cuMemsetD32(out, 0, 1));
    launch(k4, params4);
    if (read_out() != 1 + 2 + 3) return problems[0];
    CK(cuMemsetD32(out, 0, 1));
    launch(k16, params16);
    if (read_out() != 120) return problems[1];
    CK(cuMemsetD32(out, 0, 1));
    run_op("graph", 3, 1);
    if (read_out() != 6) return problems[2];
    size_t sizes[] = {256, 1 << 20};
    for (int i = 0; i < 2; i++) {
        size_t n = sizes[i];
        ensure_capacity(n);
        run_op("h2d", (long)n, 1);
        memset(host_dst, 0, n);
        run_op("d2h", (long)n, 1);
        if (memcmp(host_src, host_dst, n)) return problems[3];
        unsigned char *expect = malloc(n);
        memcpy(expect, pinned, n);
        run_op("h2d_pinned", (long)n, 1);
        memset(pinned, 0, n);
        run_op("d2h_pinned", (long)n, 1);
        int bad = memcmp(expect, pinned, n);
        free(expect);
        if (bad) return problems[4];
        CK(cuMemsetD32(dbuf2, 0, n / 4)); /* dbuf holds the pinned bytes now */
        run_op("d2d", (long)n, 1);
        CK(cuMemcpyDtoH(host_dst, dbuf2, n));
        if (memcmp(pinned, host_dst, n)) return problems[5];
    }
    return NULL;
}

static void setup(const char *cubin_path) {
    FILE *f = fopen(cubin_path, "rb");
    if (!f) fail("fopen cubin", CUDA_ERROR_FILE_NOT_FOUND, __LINE__);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *image = malloc((size_t)size);
    if (!image || fread(image, 1, (size_t)size, f) != (size_t)size) fail("read cubin", CUDA_ERROR_FILE_NOT_FOUND, __LINE__);
    fclose(f);

    CK(cuInit(0));
    CK(cuDeviceGet(&device, 0));
    CK(cuDevicePrimaryCtxRetain(&context, device));
    CK(cuCtxSetCurrent(context));
    CK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CK(cuModuleLoadData(&module, image));
    free(image);
    CK(cuModuleGetFunction(&k4, module, "bench_k4"));
    CK(cuModuleGetFunction(&k16, module, "bench_k16"));
    /* The lazy-load settle ironaccel makes after getting a kernel (module.settle_lazy_load): getting one leaves
     * every idle stream and event wait of the process 1.2-1.3 us slower until an event recorded on a stream with
     * no work is waited for (bench/experiments/README.md).  Made here too, so the floor stays
     * the fastest known; IRONACCEL_FLOOR_SETTLE=0 leaves it out. */
    const char *settle = getenv("IRONACCEL_FLOOR_SETTLE");
    if (!settle || strcmp(settle, "0") != 0) {
        CUstream quiet;
        CUevent mark;
        CK(cuStreamCreate(&quiet, CU_STREAM_NON_BLOCKING));
        CK(cuEventCreate(&mark, CU_EVENT_DISABLE_TIMING));
        CK(cuEventRecord(mark, quiet));
        CK(cuEventSynchronize(mark));
        CK(cuEventDestroy(mark));
        CK(cuStreamDestroy(quiet));
    }
    CK(cuMemAlloc(&out, sizeof(int)));
    CK(cuEventCreate(&reused_event, CU_EVENT_DISABLE_TIMING));
    CK(cuEventCreate(&timed_event, CU_EVENT_DEFAULT));
    params4[0] = &out;
    params16[0] = &out;
    for (int i = 1; i < 16; i++) {
        ints[i] = i;
        if (i < 4) params4[i] = &ints[i];
        params16[i] = &ints[i];
    }
    ensure_capacity(4096);
    const char *spin = getenv("IRONACCEL_CUDA_FENCE_SPIN_US");
    if (spin) fence_spin_ns = atol(spin) * 1000;
    void *word = NULL;
    if (fence_spin_ns > 0 && cuMemHostAlloc(&word, 64, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP) == 0) {
        fence_word = word;
        *fence_word = 0;
        if (cuMemHostGetDevicePointer(&fence_dev, word, 0) != CUDA_SUCCESS) fence_dev = 0;
    }
}

static int serve(void) {
    char line[256], op[64];
    long arg, n;
    while (fgets(line, sizeof line, stdin)) {
        if (sscanf(line, "%63s %ld %ld", op, &arg, &n) != 3) {
            printf("{\"error\": \"bad request\", \"code\": -1, \"name\": \"?\", \"line\": %d}\n", __LINE__);
            fflush(stdout);
            continue;
        }
        if (!strcmp(op, "quit")) break;
        if (!strcmp(op, "check")) {
            const char *problem = check_all();
            if (problem) printf("{\"op\": \"check\", \"ok\": false, \"problem\": \"%s\"}\n", problem);
            else printf("{\"op\": \"check\", \"ok\": true}\n");
            fflush(stdout);
            continue;
        }
        int64_t ns = run_op(op, arg, n);
        if (ns < 0) printf("{\"error\": \"unknown op %s\", \"code\": -1, \"name\": \"?\", \"line\": %d}\n", op, __LINE__);
        else printf("{\"op\": \"%s\", \"arg\": %ld, \"n\": %ld, \"ns\": %lld}\n", op, arg, n, (long long)ns);
        fflush(stdout);
    }
    return 0;
}

static int compare_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Median per-op ns of 21 batches of n, n sized to ~2 ms from a first estimate. */
static double median_per_op(const char *op, long arg) {
    int64_t samples[21];
    long n = 1;
    run_op(op, arg, 1);
    int64_t t = run_op(op, arg, n);
    while (t < 250000 && n < (1L << 20)) {
        n *= 4;
        t = run_op(op, arg, n);
    }
    n = (long)(2000000.0 * n / (double)(t > 0 ? t : 1)) + 1;
    for (int i = 0; i < 21; i++) samples[i] = run_op(op, arg, n);
    qsort(samples, 21, sizeof samples[0], compare_i64);
    return (double)samples[10] / (double)n;
}

static int json_sweep(void) {
    static const struct {
        const char *key, *op;
        long arg;
    } rows[] = {
        {"stream_sync", "sync", 0},
        {"event_cycle", "event_cycle", 0},
        {"event_reuse", "event_reuse", 0},
        {"stream_alloc/256", "alloc", 256},
        {"stream_alloc/65536", "alloc", 65536},
        {"stream_alloc/1048576", "alloc", 1048576},
        {"launch/4", "launch4", 0},
        {"launch/16", "launch16", 0},
        {"eager/100", "eager", 100},
        {"graph/100", "graph", 100},
        {"h2d/pageable/1024", "h2d", 1024},
        {"d2h/pageable/1024", "d2h", 1024},
        {"h2d/pinned/1024", "h2d_pinned", 1024},
        {"d2h/pinned/1024", "d2h_pinned", 1024},
        {"h2d/pageable/67108864", "h2d", 67108864},
        {"d2h/pageable/67108864", "d2h", 67108864},
        {"h2d/pinned/67108864", "h2d_pinned", 67108864},
        {"d2h/pinned/67108864", "d2h_pinned", 67108864},
        {"d2d/65536", "d2d", 65536},
        {"d2d/1048576", "d2d", 1048576},
    };
    const char *problem = check_all();
    if (problem) {
        printf("{\"error\": \"check failed: %s\", \"code\": -1, \"name\": \"?\", \"line\": %d}\n", problem, __LINE__);
        return 1;
    }
    printf("{");
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        printf("%s\"%s\": %.1f", i ? ", " : "", rows[i].key, median_per_op(rows[i].op, rows[i].arg));
    printf("}\n");
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 3 || (strcmp(argv[2], "--serve") && strcmp(argv[2], "--json"))) {
        fprintf(stderr, "usage: %s CUBIN --serve|--json\n", argv[0]);
        return 64;
    }
    setup(argv[1]);
    return strcmp(argv[2], "--serve") ? json_sweep() : serve();
}
