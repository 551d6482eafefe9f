/* The driver's own pageable copy rate with nothing else in the process: cuMemcpyHtoD / cuMemcpyDtoH of 16,
 * 32 and 64 MiB from malloc'd, huge-page and small-page host memory, 12 timed copies each, twice.
 *
 * Why: issue 14 asked why the peers' 64 MiB pageable rates in run.py (about 7-11 GB/s) were below a held-out
 * harness's 14.4-15 GB/s.  This program is the C floor with no harness, no Python and no other library: if it
 * matches run.py's figures, the benchmark is not what slows the peers.
 *
 *   nvcc -O2 -o pageable_alone pageable_alone.c -lcuda && ./pageable_alone
 */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#define CK(c) do { CUresult r_ = (c); if (r_) { printf("FAIL %s %d line %d\n", #c, (int)r_, __LINE__); exit(2); } } while (0)
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
static CUdeviceptr d;
static void rate(const char* what, unsigned char* h, size_t n, int h2d) {
    double best = 0, sum = 0; int reps = 12;
    for (int i = 0; i < reps + 2; i++) {
        double t = now();
        if (h2d) CK(cuMemcpyHtoD(d, h, n)); else CK(cuMemcpyDtoH(h, d, n));
        double gbs = n / (now() - t) / 1e9;
        if (i >= 2) { sum += gbs; if (gbs > best) best = gbs; }
    }
    printf("%-44s %s %3zu MiB  mean %5.1f GB/s  best %5.1f\n", what, h2d ? "h2d" : "d2h", n >> 20, sum / reps, best); fflush(stdout);
}
int main(void) {
    CUdevice dev; CUcontext ctx; CK(cuInit(0)); CK(cuDeviceGet(&dev, 0)); CK(cuDevicePrimaryCtxRetain(&ctx, dev)); CK(cuCtxSetCurrent(ctx));
    size_t n = 64u << 20; CK(cuMemAlloc(&d, n));
    unsigned char* a = malloc(n); memset(a, 1, n);
    unsigned char* b = aligned_alloc(2u << 20, n); madvise(b, n, MADV_HUGEPAGE); memset(b, 2, n);
    unsigned char* c = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0); madvise(c, n, MADV_NOHUGEPAGE); memset(c, 3, n);
    for (int pass = 0; pass < 2; pass++) {
        rate("malloc (default THP: madvise -> 4K)", a, n, 1); rate("malloc (default THP: madvise -> 4K)", a, n, 0);
        rate("aligned + MADV_HUGEPAGE", b, n, 1); rate("aligned + MADV_HUGEPAGE", b, n, 0);
        rate("mmap + MADV_NOHUGEPAGE", c, n, 1); rate("mmap + MADV_NOHUGEPAGE", c, n, 0);
        rate("malloc 16 MiB", a, 16u << 20, 1); rate("malloc 16 MiB", a, 16u << 20, 0);
        rate("hugepage 16 MiB", b, 16u << 20, 1); rate("hugepage 16 MiB", b, 16u << 20, 0);
        rate("hugepage 32 MiB", b, 32u << 20, 1); rate("hugepage 32 MiB", b, 32u << 20, 0);
    }
    return 0;
}
