/* Waiting for a stream on a fence word (design note: fence.h). */
#define _GNU_SOURCE
#include "fence.h"

#include <pthread.h>
#include <stdint.h>
#include <time.h>

typedef struct ia_word {
    volatile unsigned int value;
    struct ia_word *next_free; /* while on the free list */
} ia_word;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static ia_word *free_words;
static int npages;
static pthread_key_t owner_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static __thread ia_word *mine;
static __thread unsigned int seq;
static unsigned long long fenced, missed; /* updated racily: statistics only */

static long long mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int ia_fence_spin(volatile unsigned int *word, unsigned int want, long spin_ns) {
    long long until = 0;
    for (int spins = 0;; spins++) {
        if ((int)(__atomic_load_n(word, __ATOMIC_ACQUIRE) - want) >= 0) return 1;
        if ((spins & 63) == 63) {
            long long now = mono_ns();
            if (until == 0) until = now + spin_ns;
            else if (now > until) return 0;
        }
        IA_RELAX();
    }
}

static void give_back(void *word) { /* a thread with a word exits: the word goes back on the free list */
    ia_word *w = word;
    pthread_mutex_lock(&lock);
    w->next_free = free_words;
    free_words = w;
    pthread_mutex_unlock(&lock);
}

static void make_key(void) { pthread_key_create(&owner_key, give_back); }

int ia_fence_ready(void) {
    if (mine) return 1;
    pthread_once(&key_once, make_key);
    pthread_mutex_lock(&lock);
    ia_word *w = free_words;
    if (w) free_words = w->next_free;
    pthread_mutex_unlock(&lock);
    if (!w) return 0;
    w->next_free = NULL;
    mine = w;
    seq = __atomic_load_n(&w->value, __ATOMIC_ACQUIRE); /* a handed-on word goes on from its last value */
    pthread_setspecific(owner_key, w);
    return 1;
}

void ia_fence_add_page(char *page) {
    pthread_mutex_lock(&lock);
    for (size_t off = IA_FENCE_PAGE; off >= IA_FENCE_STRIDE; off -= IA_FENCE_STRIDE) {
        ia_word *w = (ia_word *)(page + off - IA_FENCE_STRIDE);
        w->value = 0;
        w->next_free = free_words;
        free_words = w;
    }
    npages++;
    pthread_mutex_unlock(&lock);
}

int ia_fence_pages(void) { return npages; }

void ia_fence_counts(unsigned long long *f, unsigned long long *m) {
    *f = fenced;
    *m = missed;
}

int ia_fence_stream(CUstream stream, long spin_ns) {
    unsigned int want = ++seq;
    int err = ia_cu.cuStreamWriteValue32(stream, (CUdeviceptr)(uintptr_t)&mine->value, want, 0);
    if (err) {
        seq--; /* nothing was queued */
        return err;
    }
    if (ia_fence_spin(&mine->value, want, spin_ns)) {
        fenced++;
        return 0;
    }
    missed++;
    return 1;
}
