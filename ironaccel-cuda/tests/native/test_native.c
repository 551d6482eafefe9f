/* Unit tests of the compiled core's C (the files in native/), with a pretend driver: no GPU, no CUDA headers.
 * Built and run by tests/native/test_native.py (with AddressSanitizer and UBSan where the compiler has them).
 * The "device" is host memory: the pretend cuMemcpy*Async calls are memcpy. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>

#include "driver.h"
#include "fence.h"
#include "hostmem.h"
#include "pinned.h"
#include "staging.h"

static int failures = 0;
#define CHECK(cond) do { if (!(cond)) { fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); failures++; } } while (0)

/* ---- a pretend driver ---- */
static int fail_htod_at = -1, fail_dtoh_at = -1, htod_calls = 0, dtoh_calls = 0, query_calls = 0, syncs = 0;
static CUresult fake_htod(CUdeviceptr dst, const void *src, size_t n, CUstream s) {
    (void)s;
    if (htod_calls++ == fail_htod_at) return 1;
    memcpy((void *)(uintptr_t)dst, src, n);
    return 0;
}
static CUresult fake_dtoh(void *dst, CUdeviceptr src, size_t n, CUstream s) {
    (void)s;
    if (dtoh_calls++ == fail_dtoh_at) return 700;
    memcpy(dst, (const void *)(uintptr_t)src, n);
    return 0;
}
static CUresult fake_record(CUevent e, CUstream s) { (void)e; (void)s; return 0; }
static CUresult fake_query(CUevent e) { (void)e; return (query_calls++ % 3 == 0) ? 600 : 0; } /* sometimes busy */
static CUresult fake_sync(CUstream s) { (void)s; syncs++; return 0; }
static CUresult fake_host_flags(unsigned int *flags, void *p) { (void)flags; (void)p; return 1; } /* pageable */

static void install_fake(void) {
    void *addrs[IA_N_ENTRY_POINTS] = {0};
    addrs[IA_cuMemcpyHtoDAsync] = (void *)fake_htod;
    addrs[IA_cuMemcpyDtoHAsync] = (void *)fake_dtoh;
    addrs[IA_cuEventRecord] = (void *)fake_record;
    addrs[IA_cuEventQuery] = (void *)fake_query;
    addrs[IA_cuStreamSynchronize] = (void *)fake_sync;
    addrs[IA_cuMemHostGetFlags] = (void *)fake_host_flags;
    ia_table_install(addrs);
}

static void test_table(void) {
    CHECK(IA_N_ENTRY_POINTS > 20);
    CHECK(strcmp(ia_names[IA_cuStreamSynchronize], "cuStreamSynchronize") == 0);
    CHECK(ia_abi[IA_cuMemAlloc] == 3020 && ia_abi[IA_cuLaunchKernelEx] == 11060);
    CHECK(ia_cu.cuStreamSynchronize(NULL) == IA_UNBOUND); /* before binding: the unbound stub */
    ia_table_stub(IA_DISABLED);
    CHECK(ia_cu.cuStreamSynchronize(NULL) == IA_DISABLED);
    CHECK(ia_cu.cuMemFreeAsync(0, NULL) == 0 && ia_cu.cuEventDestroy(NULL) == 0 && ia_cu.cuMemFree(0) == 0);
    CHECK(ia_cu.cuLaunchKernel(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL) == IA_DISABLED);
    install_fake();
    CHECK(ia_cu.cuStreamQuery(NULL) == IA_MISSING); /* not installed: the missing stub */
    CHECK(ia_cu.cuStreamSynchronize(NULL) == 0);
}

static void test_pinned(void) {
    CHECK(ia_pin_count() == 0);
    CHECK(ia_pin_add(1000, 2000) == 0 && ia_pin_add(5000, 6000) == 0 && ia_pin_add(3000, 4000) == 0);
    CHECK(ia_pin_count() == 3);
    CHECK(ia_pin_known(1000, 1000) && ia_pin_known(3500, 10) && !ia_pin_known(1999, 2) && !ia_pin_known(2500, 1));
    CHECK(!ia_pin_known(999, 1) && ia_pin_known(5999, 1) && !ia_pin_known(6000, 1));
    CHECK(ia_pin_add(3000, 4500) == 0 && ia_pin_count() == 3 && ia_pin_known(4400, 100)); /* re-add: new end */
    ia_pin_remove(3000);
    ia_pin_remove(12345); /* unknown: nothing happens */
    CHECK(ia_pin_count() == 2 && !ia_pin_known(3500, 1) && ia_pin_known(1500, 1) && ia_pin_known(5500, 1));
    for (uintptr_t i = 0; i < 100; i++) CHECK(ia_pin_add(100000 + 1000 * (100 - i), 100000 + 1000 * (100 - i) + 10) == 0);
    CHECK(ia_pin_count() == 102 && ia_pin_known(100000 + 1000 * 37 + 5, 5) && !ia_pin_known(100000 + 1000 * 37 + 5, 6));
    for (uintptr_t i = 1; i <= 100; i++) ia_pin_remove(100000 + 1000 * i);
    ia_pin_remove(1000);
    ia_pin_remove(5000);
    CHECK(ia_pin_count() == 0);
    CHECK(!ia_pin_driver(1234)); /* the pretend driver says: pageable */
}

static void test_hostmem(void) {
    size_t size = 0, size2 = 0;
    char *a = ia_host_take(3 << 20, &size);
    CHECK(a != NULL && size == (size_t)4 << 20 && ia_host_outstanding() == 1);
    memset(a, 7, size);
    ia_host_give(a, size);
    CHECK(ia_host_kept() == size && ia_host_outstanding() == 0);
    char *b = ia_host_take(4 << 20, &size2); /* the kept region comes back, already faulted in */
    CHECK(b == a && size2 == size && b[123] == 7 && ia_host_kept() == 0);
    char *c = ia_host_take(64 << 20, &size2); /* too big to waste a small region on, and vice versa */
    CHECK(c != NULL && c != a && size2 == (size_t)64 << 20);
    ia_host_give(b, size);
    char *d = ia_host_take(2 << 20, &size2);  /* the 4 MiB region wastes half: taken */
    CHECK(d == a && size2 == (size_t)4 << 20);
    ia_host_give(d, size2);
    ia_host_give(c, (size_t)64 << 20);
    char *e = ia_host_take(1 << 20, &size);  /* the smallest kept region that fits */
    char *f = ia_host_take(1 << 20, &size2); /* the 64 MiB one would waste more than half: a new region */
    CHECK(e == a && f != NULL && f != c && size2 == (size_t)2 << 20);
    ia_host_give(e, size);
    ia_host_give(f, size2);
    c = ia_host_take(64 << 20, &size2);
    CHECK(ia_host_outstanding() == 1);
    ia_host_set_budget((size_t)8 << 20);
    ia_host_give(c, size2); /* over the budget: unmapped, not kept */
    CHECK(ia_host_kept() <= ((size_t)8 << 20));
    CHECK(ia_host_trim() > 0 && ia_host_kept() == 0 && ia_host_outstanding() == 0);
    ia_host_set_budget((size_t)1 << 30);
}

static void test_copy(void) {
    size_t sizes[] = {0, 1, 15, 4095, 4096, 4097, 65536 + 3, 1 << 20};
    for (int nt = 0; nt < 2; nt++)
        for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
            for (size_t off = 0; off < 3; off++) {
                size_t n = sizes[i];
                char *src = malloc(n + 16), *dst = malloc(n + 16);
                for (size_t k = 0; k < n + 16; k++) { src[k] = (char)(k * 31 + 7); dst[k] = 0; }
                ia_copy(dst + off, src + 1, n, nt);
                CHECK(memcmp(dst + off, src + 1, n) == 0);
                CHECK(dst[off + n] == 0); /* nothing written past the end */
                free(src);
                free(dst);
            }
}

static ia_staging *make_staging(size_t chunk, int nslots, int split, int nt) {
    ia_staging *st = calloc(1, sizeof *st);
    st->chunk = chunk;
    st->nslots = nslots;
    st->split = split;
    st->nt = nt;
    st->slots = malloc(chunk * (size_t)nslots);
    for (int i = 0; i < nslots; i++) st->events[i] = (CUevent)(uintptr_t)(i + 1);
    return st;
}

static void test_chunks(void) {
    ia_staging *st = make_staging(1 << 19, 8, 32, 0);
    CHECK(ia_chunk_for(st, 1) == 0x10000);                      /* at least 64 KiB */
    CHECK(ia_chunk_for(st, (size_t)32 << 20) == (size_t)1 << 19); /* at most the slot */
    CHECK(ia_chunk_for(st, (size_t)4 << 20) == (size_t)128 << 10);
    free(st->slots);
    free(st);
}

static void test_pipeline(void) {
    CHECK(ia_pool_start(3) == 3 && ia_pool_start(5) == 3 && ia_pool_threads() == 3);
    size_t sizes[] = {1, 65536, 65537, 300000, (size_t)5 << 20, ((size_t)7 << 20) + 13};
    int configs[][3] = {{2, 7, 0}, {8, 32, 1}, {3, 1000, 3}};
    for (size_t c = 0; c < sizeof configs / sizeof *configs; c++) {
        ia_staging *st = make_staging(65536 * 2, configs[c][0], configs[c][1], configs[c][2]);
        for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
            size_t n = sizes[i];
            char *host = malloc(n), *dev = malloc(n), *back = malloc(n);
            for (size_t k = 0; k < n; k++) { host[k] = (char)(k * 13 + c); dev[k] = 0; back[k] = 1; }
            const char *op = NULL;
            ia_pipe_lock();
            int err = ia_pipe_htod(st, (CUdeviceptr)(uintptr_t)dev, host, n, NULL, &op);
            CHECK(err == 0 && memcmp(dev, host, n) == 0);
            err = ia_pipe_dtoh(st, back, (CUdeviceptr)(uintptr_t)dev, n, NULL, &op);
            ia_pipe_unlock();
            CHECK(err == 0 && memcmp(back, host, n) == 0);
            free(host);
            free(dev);
            free(back);
        }
        /* a failing DMA is reported with the call that failed, and the pipeline stays usable */
        size_t n = (size_t)3 << 20;
        char *host = calloc(1, n), *dev = calloc(1, n);
        const char *op = NULL;
        htod_calls = 0;
        fail_htod_at = 2;
        int err = ia_pipe_htod(st, (CUdeviceptr)(uintptr_t)dev, host, n, NULL, &op);
        CHECK(err == 1 && op && strcmp(op, "cuMemcpyHtoDAsync") == 0);
        fail_htod_at = -1;
        dtoh_calls = 0;
        fail_dtoh_at = 1;
        err = ia_pipe_dtoh(st, host, (CUdeviceptr)(uintptr_t)dev, n, NULL, &op);
        CHECK(err == 700 && op && strcmp(op, "cuMemcpyDtoHAsync") == 0);
        fail_dtoh_at = -1;
        CHECK(ia_pipe_htod(st, (CUdeviceptr)(uintptr_t)dev, host, n, NULL, &op) == 0);
        free(host);
        free(dev);
        CHECK(ia_bounce_take(st) == 0 && ia_bounce_take(st) == -1);
        ia_bounce_give(st);
        CHECK(ia_bounce_take(st) == 0);
        ia_bounce_give(st);
        free(st->slots);
        free(st);
    }
}

/* ---- fence.c: the fence words of busy streams' waits ---- */
static int write_mode; /* 0: the pretend GPU writes the word at once, 1: never, 2: the memop is unsupported */
static CUresult fake_write_value(CUstream s, CUdeviceptr addr, unsigned int value, unsigned int flags) {
    (void)s; (void)flags;
    if (write_mode == 2) return 801;
    if (write_mode == 0) __atomic_store_n((unsigned int *)(uintptr_t)addr, value, __ATOMIC_RELEASE);
    return 0;
}

static void *take_a_word(void *ok) {
    *(int *)ok = ia_fence_ready();
    return NULL;
}

static void test_fence(void) {
    void *addrs[IA_N_ENTRY_POINTS] = {0};
    addrs[IA_cuStreamWriteValue32] = (void *)fake_write_value;
    ia_table_install(addrs);
    CHECK(ia_fence_ready() == 0 && ia_fence_pages() == 0); /* no page yet */
    char *page = aligned_alloc(IA_FENCE_PAGE, IA_FENCE_PAGE);
    ia_fence_add_page(page);
    CHECK(ia_fence_ready() == 1 && ia_fence_pages() == 1);
    unsigned long long fenced, missed;
    write_mode = 0;
    CHECK(ia_fence_stream(NULL, 1000000) == 0 && ia_fence_stream(NULL, 1000000) == 0);
    write_mode = 1; /* the write never lands: the spin gives up after spin_ns */
    CHECK(ia_fence_stream(NULL, 200000) == 1);
    write_mode = 2;
    CHECK(ia_fence_stream(NULL, 1000000) == 801);
    write_mode = 0; /* a later write that lands ends a later wait, whatever came before */
    CHECK(ia_fence_stream(NULL, 1000000) == 0);
    ia_fence_counts(&fenced, &missed);
    CHECK(fenced == 3 && missed == 1);
    unsigned int word = 5;
    CHECK(ia_fence_spin(&word, 5, 0) == 1 && ia_fence_spin(&word, 4, 0) == 1 && ia_fence_spin(&word, 6, 1000) == 0);
    word = 0xFFFFFFFFu;
    CHECK(ia_fence_spin(&word, 0xFFFFFFFEu, 0) == 1 && ia_fence_spin(&word, 0, 1000) == 0); /* wrapping order */
    /* a thread's word goes back when it exits: more threads than the page has words, one after another */
    for (int i = 0; i < 3 * IA_FENCE_PAGE / IA_FENCE_STRIDE; i++) {
        int ok = 0;
        pthread_t t;
        CHECK(pthread_create(&t, NULL, take_a_word, &ok) == 0 && pthread_join(t, NULL) == 0);
        if (!ok) { CHECK(ok); break; }
    }
    CHECK(ia_fence_pages() == 1);
    install_fake();
}

int main(void) {
    test_table();
    test_pinned();
    test_hostmem();
    test_copy();
    test_chunks();
    test_pipeline();
    test_fence();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("native tests passed\n");
    return 0;
}
