/* CUDA user objects for the fake libcuda: cuUserObjectCreate/Retain/Release and cuGraphRetain/ReleaseUserObject.
 *
 * A graph's or an executable graph's references live in a side table keyed by its handle.  The graph files
 * call fake_uo_copy when the driver would hand references on (cuGraphClone, instantiation, a child graph
 * node's clone) and fake_uo_drop when a graph or executable graph is destroyed.  As on the card, a destructor
 * runs on a thread of the driver's own (a detached thread here), some time after the last release.
 * fake_cuda_user_objects_live() counts the user objects not yet destroyed, for leak checks.
 */
#include <pthread.h>
#include <stdlib.h>

#include "fake_cuda.h"

#define MAGIC_UO 0x75736572u

struct uobj { unsigned magic; unsigned refs; void *ptr; CUhostFn destroy; };
struct holding { const void *holder; struct uobj *uo; unsigned count; };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct holding *held = NULL;
static size_t nheld = 0, capheld = 0;
static int live = 0;

struct destroy_call { CUhostFn fn; void *ptr; };
static void *run_destroy(void *arg) {
    struct destroy_call *c = arg;
    c->fn(c->ptr);
    free(c);
    return NULL;
}

/* Drop n references (lock held); the last one schedules the destructor. */
static void unref(struct uobj *u, unsigned n) {
    u->refs -= n;
    if (u->refs) return;
    u->magic = 0;
    live--;
    struct destroy_call *c = malloc(sizeof *c);
    c->fn = u->destroy; c->ptr = u->ptr;
    pthread_t t;
    if (pthread_create(&t, NULL, run_destroy, c) == 0) pthread_detach(t); else run_destroy(c);
    free(u);
}

static struct uobj *uo_of(CUuserObject h) {
    struct uobj *u = (struct uobj *)h;
    return (u && u->magic == MAGIC_UO) ? u : NULL;
}

static void add_holding(const void *holder, struct uobj *u, unsigned count) {
    for (size_t i = 0; i < nheld; i++)
        if (held[i].holder == holder && held[i].uo == u) { held[i].count += count; return; }
    if (nheld == capheld) { capheld = capheld ? 2 * capheld : 64; held = realloc(held, capheld * sizeof *held); }
    held[nheld++] = (struct holding){holder, u, count};
}

int fake_cuda_user_objects_live(void) { return live; }

void fake_uo_copy(const void *from, const void *to) {
    pthread_mutex_lock(&lock);
    size_t n = nheld;
    for (size_t i = 0; i < n; i++)
        if (held[i].holder == from) { held[i].uo->refs += held[i].count; add_holding(to, held[i].uo, held[i].count); }
    pthread_mutex_unlock(&lock);
}

void fake_uo_drop(const void *holder) {
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nheld;) {
        if (held[i].holder == holder) { unref(held[i].uo, held[i].count); held[i] = held[--nheld]; } else i++;
    }
    pthread_mutex_unlock(&lock);
}

static CUresult uo_create(CUuserObject *out, void *ptr, CUhostFn destroy, unsigned initial, unsigned flags) {
    if (!out || !destroy || !initial || flags != CU_USER_OBJECT_NO_DESTRUCTOR_SYNC) return CUDA_ERROR_INVALID_VALUE;
    struct uobj *u = malloc(sizeof *u);
    *u = (struct uobj){MAGIC_UO, initial, ptr, destroy};
    pthread_mutex_lock(&lock); live++; pthread_mutex_unlock(&lock);
    *out = (CUuserObject)u;
    return CUDA_SUCCESS;
}
static CUresult uo_retain(CUuserObject h, unsigned count) {
    pthread_mutex_lock(&lock);
    struct uobj *u = uo_of(h);
    if (!u || !count) { pthread_mutex_unlock(&lock); return CUDA_ERROR_INVALID_VALUE; }
    u->refs += count;
    pthread_mutex_unlock(&lock); return CUDA_SUCCESS;
}
static CUresult uo_release(CUuserObject h, unsigned count) {
    pthread_mutex_lock(&lock);
    struct uobj *u = uo_of(h);
    if (!u || !count || count > u->refs) { pthread_mutex_unlock(&lock); return CUDA_ERROR_INVALID_VALUE; }
    unref(u, count);
    pthread_mutex_unlock(&lock); return CUDA_SUCCESS;
}
static CUresult graph_retain(CUgraph g, CUuserObject h, unsigned count, unsigned flags) {
    if (!g || !count || (flags & ~(unsigned)CU_GRAPH_USER_OBJECT_MOVE)) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    struct uobj *u = uo_of(h);
    if (!u || ((flags & CU_GRAPH_USER_OBJECT_MOVE) && count > u->refs)) {
        pthread_mutex_unlock(&lock); return CUDA_ERROR_INVALID_VALUE;
    }
    if (!(flags & CU_GRAPH_USER_OBJECT_MOVE)) u->refs += count;
    add_holding(g, u, count);
    pthread_mutex_unlock(&lock); return CUDA_SUCCESS;
}
static CUresult graph_release(CUgraph g, CUuserObject h, unsigned count) {
    pthread_mutex_lock(&lock);
    struct uobj *u = uo_of(h);
    for (size_t i = 0; u && count && i < nheld; i++) {
        if (held[i].holder != g || held[i].uo != u) continue;
        if (count > held[i].count) break;
        held[i].count -= count;
        if (!held[i].count) held[i] = held[--nheld];
        unref(u, count);
        pthread_mutex_unlock(&lock); return CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&lock); return CUDA_ERROR_INVALID_VALUE;  /* the graph does not own that many */
}

static const struct fake_cuda_symbol symbols[] = {
    {"cuUserObjectCreate", (void *)uo_create}, {"cuUserObjectRetain", (void *)uo_retain},
    {"cuUserObjectRelease", (void *)uo_release}, {"cuGraphRetainUserObject", (void *)graph_retain},
    {"cuGraphReleaseUserObject", (void *)graph_release},
};

__attribute__((constructor)) static void register_symbols(void) {
    fake_cuda_add_symbols(symbols, sizeof symbols / sizeof *symbols);
}
