#include "pinned.h"

#include <stdlib.h>

#include "driver.h"

static uintptr_t *pin_start = NULL, *pin_end = NULL;
static size_t pin_n = 0, pin_cap = 0;

/* index of the first range whose start is >= start */
static size_t lower_bound(uintptr_t start) {
    size_t lo = 0, hi = pin_n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (pin_start[mid] < start) lo = mid + 1; else hi = mid;
    }
    return lo;
}

int ia_pin_add(uintptr_t start, uintptr_t end) {
    size_t i, lo = lower_bound(start);
    if (lo < pin_n && pin_start[lo] == start) { pin_end[lo] = end; return 0; }
    if (pin_n == pin_cap) {
        size_t cap = pin_cap ? 2 * pin_cap : 16;
        uintptr_t *s = realloc(pin_start, cap * sizeof *s);
        if (!s) return -1;
        pin_start = s;
        uintptr_t *e = realloc(pin_end, cap * sizeof *e);
        if (!e) return -1;
        pin_end = e;
        pin_cap = cap;
    }
    for (i = pin_n; i > lo; i--) { pin_start[i] = pin_start[i - 1]; pin_end[i] = pin_end[i - 1]; }
    pin_start[lo] = start;
    pin_end[lo] = end;
    pin_n++;
    return 0;
}

void ia_pin_remove(uintptr_t start) {
    size_t i = lower_bound(start);
    if (i == pin_n || pin_start[i] != start) return;
    for (; i + 1 < pin_n; i++) { pin_start[i] = pin_start[i + 1]; pin_end[i] = pin_end[i + 1]; }
    pin_n--;
}

int ia_pin_known(uintptr_t addr, size_t n) {
    size_t lo = 0, hi = pin_n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (pin_start[mid] <= addr) lo = mid + 1; else hi = mid;
    }
    return lo > 0 && addr + n <= pin_end[lo - 1];
}

/* Asked with cuMemHostGetFlags, which fails for everything else -- also for pageable memory the GPU can reach
   through HMM, which a memory-type query might describe as host memory. */
int ia_pin_driver(uintptr_t addr) {
    unsigned int flags = 0;
    return ia_cu.cuMemHostGetFlags(&flags, (void *)addr) == 0;
}

size_t ia_pin_count(void) { return pin_n; }
