#define _GNU_SOURCE
#include "hostmem.h"

#include <stdint.h>
#include <sys/mman.h>

#define IA_HOST_ALIGN ((size_t)2 << 20)
#define IA_HOST_KEEP 16

static struct { void *ptr; size_t size; } kept[IA_HOST_KEEP];
static size_t nkept = 0, kept_bytes = 0, budget = (size_t)1 << 30, outstanding = 0;

void *ia_host_take(size_t nbytes, size_t *size) {
    size_t want = (nbytes + IA_HOST_ALIGN - 1) & ~(IA_HOST_ALIGN - 1), best = IA_HOST_KEEP;
    if (want < nbytes) return NULL;
    for (size_t i = 0; i < nkept; i++)  /* the smallest kept region that fits, if it wastes at most half */
        if (kept[i].size >= want && kept[i].size / 2 <= want && (best == IA_HOST_KEEP || kept[i].size < kept[best].size))
            best = i;
    if (best != IA_HOST_KEEP) {
        void *ptr = kept[best].ptr;
        *size = kept[best].size;
        kept_bytes -= kept[best].size;
        kept[best] = kept[--nkept];
        outstanding++;
        return ptr;
    }
    void *ptr = mmap(NULL, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (ptr == MAP_FAILED) return NULL;
#ifdef MADV_HUGEPAGE
    madvise(ptr, want, MADV_HUGEPAGE);  /* a hint: without THP the region is still correct */
#endif
    *size = want;
    outstanding++;
    return ptr;
}

void ia_host_give(void *ptr, size_t size) {
    outstanding--;
    if (size > budget) {
        munmap(ptr, size);
        return;
    }
    while (kept_bytes + size > budget && nkept) {  /* make room by dropping the oldest kept regions */
        munmap(kept[0].ptr, kept[0].size);
        kept_bytes -= kept[0].size;
        kept[0] = kept[--nkept];
    }
    if (kept_bytes + size <= budget && nkept < IA_HOST_KEEP) {
        kept[nkept].ptr = ptr;
        kept[nkept].size = size;
        nkept++;
        kept_bytes += size;
        return;
    }
    munmap(ptr, size);
}

void ia_host_set_budget(size_t bytes) {
    budget = bytes;
    while (kept_bytes > budget && nkept) {
        munmap(kept[nkept - 1].ptr, kept[nkept - 1].size);
        kept_bytes -= kept[--nkept].size;
    }
}

size_t ia_host_trim(void) {
    size_t freed = kept_bytes;
    while (nkept) {
        nkept--;
        munmap(kept[nkept].ptr, kept[nkept].size);
    }
    kept_bytes = 0;
    return freed;
}

size_t ia_host_kept(void) { return kept_bytes; }
size_t ia_host_outstanding(void) { return outstanding; }
