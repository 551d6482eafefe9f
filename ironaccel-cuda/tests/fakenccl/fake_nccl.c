/* A fake libnccl.so.2 for CPU-only tests of ironaccel_cuda.nccl, used beside the fake libcuda.so.1.
 *
 * Preloaded (LD_PRELOAD), it answers the NCCL calls that nccl4py makes, so the real binding's
 * argument conversions and ironaccel's wrapper run end to end on a machine without a GPU.  All
 * ranks live in one process: communicators created from the same unique id form a clique, and a
 * collective runs -- as host loops over the fake driver's host-memory "device" pointers -- as soon
 * as every rank of the clique has issued it (the fake driver's streams are synchronous, so nobody
 * can observe it any earlier).  Non-blocking communicators behave as NCCL documents: an init or a
 * split reports ncclInProgress through ncclCommGetAsyncError until every rank has joined.
 * Not a model of NCCL's algorithms, timing or streams.
 *
 * Ranks in several processes: with FAKE_NCCL_SHARED_DIR set, a clique first seen in this process is
 * shared through files in that folder, named by a hash of the unique id -- every rank of a
 * communicator may then live in its own process (each created from the same id, as NCCL's
 * bootstrap hands it out).  A rank's init drops "<hash>.join.<rank>"; the communicator is ready when
 * every rank's file is there.  ncclAllReduce and ncclBroadcast post "<hash>.<seq>.<rank>" holding
 * the send buffer and block (at most FAKE_NCCL_SHARED_WAIT seconds, default 30) until every rank's
 * file of that step is there.  Ranks that got different ids never meet: their inits stay in progress.
 *
 * Test hooks (call them through ctypes.CDLL(None)):
 *   fake_nccl_fail(call, result)   the named call returns `result` (0 clears) until cleared
 *   fake_nccl_set(knob, value)     "init_never": inits never complete; "async_error": the result
 *                                  every communicator reports after its next collective
 *   fake_nccl_last_split_out()     where the last ncclCommSplit was told to write its new communicator
 *   fake_nccl_counter(i)           0 inits, 1 aborts, 2 destroys, 3 finalizes, 4 live registrations,
 *                                  5 collectives run, 6 live ncclMemAlloc buffers, 7 group depth
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int ncclResult_t;
enum { ncclSuccess, ncclUnhandledCudaError, ncclSystemError, ncclInternalError, ncclInvalidArgument,
       ncclInvalidUsage, ncclRemoteError, ncclInProgress, ncclTimeout };
typedef struct { char internal[128]; } ncclUniqueId;
struct config_head { size_t size; unsigned magic, version; int blocking; }; /* ncclConfig_t starts so */
typedef void *cudaStream_t;

#define MAGIC_COMM 0x4e43434cU
#define MAXR 8
#define RING 256
#define NOCOLOR (-1)
#define UNDEF_INT (-2147483647 - 1)

enum { K_ALLREDUCE, K_BROADCAST, K_REDUCE, K_ALLGATHER, K_REDUCESCATTER };
struct pending { int used, kind, dtype, op, root, posted; size_t count; const char *send[MAXR]; char *recv[MAXR]; };
struct p2p { int used, src, dst, dtype; size_t count; const char *send; char *recv; long seq; };
struct split_round { int count; int color[MAXR], key[MAXR]; struct fcomm *child[MAXR]; struct fcomm **out[MAXR]; };
struct clique {
    ncclUniqueId id; int nranks, joined, shared, shared_ready; char hash[17]; struct fcomm *ranks[MAXR];
    struct pending ops[RING]; struct p2p sends[RING], recvs[RING]; long p2pseq;
    struct split_round splits[16]; int blocking;
};
struct fcomm { unsigned magic; struct clique *cl; int rank; long seq, splits; int async_error, ready; };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct clique *cliques[256];
static int ncliques = 0;
static long long counters[8];
static char last_error[512] = "";
static __thread int group_depth = 0;
static char fail_call[64] = "";
static int fail_result = 0, init_never = 0, async_error_next = 0;
static unsigned long uid_counter = 0;
static void *last_split_out = NULL;
void *fake_nccl_last_split_out(void) { return last_split_out; }

static const size_t SIZE[12] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};

long long fake_nccl_counter(int i) { return i == 7 ? group_depth : (i >= 0 && i < 7) ? counters[i] : -1; }
void fake_nccl_fail(const char *call, int result) {
    pthread_mutex_lock(&lock);
    snprintf(fail_call, sizeof fail_call, "%s", result ? call : "");
    fail_result = result;
    pthread_mutex_unlock(&lock);
}
void fake_nccl_set(const char *knob, int value) {
    if (!strcmp(knob, "init_never")) init_never = value;
    else if (!strcmp(knob, "async_error")) async_error_next = value;
}

static ncclResult_t fail(ncclResult_t r, const char *fmt, const char *what) {
    snprintf(last_error, sizeof last_error, fmt, what);
    return r;
}
#define INJECT(name) do { if (fail_result && !strcmp(fail_call, name)) { \
    snprintf(last_error, sizeof last_error, "fake: %s failed on request", name); return fail_result; } } while (0)
#define COMM_OK(c) do { if (!(c) || (c)->magic != MAGIC_COMM) return fail(ncclInvalidArgument, "fake: %s", "invalid communicator"); } while (0)

static void reduce_elem(char *out, const char *const *in, int n, int t, int op, size_t i);
/* ---- ranks in other processes (FAKE_NCCL_SHARED_DIR) ---- */
static const char *shared_dir(void) { const char *d = getenv("FAKE_NCCL_SHARED_DIR"); return d && *d ? d : NULL; }
static void id_hash(const ncclUniqueId *id, char out[17]) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < sizeof id->internal; i++) { h ^= (unsigned char)id->internal[i]; h *= 1099511628211ULL; }
    snprintf(out, 17, "%016llx", (unsigned long long)h);
}
static int put_file(const char *path, const void *data, size_t n) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp%d", path, (int)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) return -1;
    size_t w = n ? fwrite(data, 1, n, f) : 0;
    if (fclose(f) != 0 || w != n) return -1;
    return rename(tmp, path);
}
static int shared_ready(struct clique *cl) {
    if (cl->shared_ready) return 1;
    char path[4200];
    for (int r = 0; r < cl->nranks; r++) {
        snprintf(path, sizeof path, "%s/%s.join.%d", shared_dir(), cl->hash, r);
        if (access(path, F_OK) != 0) return 0;
    }
    return cl->shared_ready = 1;
}
static int ready(struct fcomm *c) {
    if (init_never || !c->cl) return 0;
    return c->cl->shared ? shared_ready(c->cl) : c->cl->joined == c->cl->nranks;
}
/* One step of a shared clique: post this rank's send buffer, wait for every rank's, then compute recv. */
static ncclResult_t shared_step(const char *name, struct pending *p, struct fcomm *c, const void *send, void *recv) {
    struct clique *cl = c->cl;
    size_t bytes = p->count * SIZE[p->dtype];
    char path[4200];
    snprintf(path, sizeof path, "%s/%s.%ld.%d", shared_dir(), cl->hash, c->seq, c->rank);
    if (put_file(path, send, bytes) != 0) return fail(ncclSystemError, "fake: %s cannot write its step file", name);
    const char *w = getenv("FAKE_NCCL_SHARED_WAIT");
    double limit = w ? atof(w) : 30.0, waited = 0;
    char *all[MAXR] = {0};
    ncclResult_t r = ncclSuccess;
    for (int q = 0; q < cl->nranks && r == ncclSuccess; q++) {
        snprintf(path, sizeof path, "%s/%s.%ld.%d", shared_dir(), cl->hash, c->seq, q);
        FILE *f;
        while (!(f = fopen(path, "rb"))) {
            if (waited >= limit) { r = fail(ncclRemoteError, "fake: %s: a peer never posted this step", name); break; }
            usleep(2000); waited += 0.002;
        }
        if (!f) break;
        all[q] = malloc(bytes ? bytes : 1);
        if (bytes && fread(all[q], 1, bytes, f) != bytes) r = fail(ncclRemoteError, "fake: %s: a peer's step differs", name);
        fclose(f);
    }
    if (r == ncclSuccess) {
        if (p->kind == K_ALLREDUCE) for (size_t i = 0; i < p->count; i++) reduce_elem(recv, (const char *const *)all, cl->nranks, p->dtype, p->op, i);
        else memcpy(recv, all[p->root], bytes);
        counters[5]++;
    }
    for (int q = 0; q < cl->nranks; q++) free(all[q]);
    c->seq++;
    return r;
}

/* ---- values of every ncclDataType_t as double (float8 types move only) ---- */
static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) bits = sign;
        else { exp = 127 - 15 + 1; while (!(man & 0x400)) { man <<= 1; exp--; } man &= 0x3ff; bits = sign | exp << 23 | man << 13; }
    } else if (exp == 31) bits = sign | 0xff << 23 | man << 13;
    else bits = sign | (exp + 127 - 15) << 23 | man << 13;
    float f; memcpy(&f, &bits, 4); return f;
}
static uint16_t float_to_half(float f) {
    uint32_t x; memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000; int exp = (int)((x >> 23) & 0xff) - 127 + 15; uint32_t man = x & 0x7fffff;
    if (((x >> 23) & 0xff) == 0xff) return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
    if (exp >= 31) return (uint16_t)(sign | 0x7c00);
    if (exp <= 0) { if (exp < -10) return (uint16_t)sign; man |= 0x800000; uint32_t shift = (uint32_t)(14 - exp);
        uint32_t h = man >> shift; if ((man >> (shift - 1)) & 1) h++; return (uint16_t)(sign | h); }
    uint32_t h = sign | (uint32_t)exp << 10 | man >> 13; if (man & 0x1000) h++; return (uint16_t)h;
}
static double get(const char *p, int t, size_t i) {
    switch (t) {
    case 0: return ((const int8_t *)p)[i]; case 1: return ((const uint8_t *)p)[i];
    case 2: return ((const int32_t *)p)[i]; case 3: return ((const uint32_t *)p)[i];
    case 4: return (double)((const int64_t *)p)[i]; case 5: return (double)((const uint64_t *)p)[i];
    case 6: return half_to_float(((const uint16_t *)p)[i]); case 7: return ((const float *)p)[i];
    case 8: return ((const double *)p)[i];
    case 9: { uint32_t b = (uint32_t)((const uint16_t *)p)[i] << 16; float f; memcpy(&f, &b, 4); return f; }
    default: return 0;
    }
}
static void put(char *p, int t, size_t i, double v) {
    switch (t) {
    case 0: ((int8_t *)p)[i] = (int8_t)v; break; case 1: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case 2: ((int32_t *)p)[i] = (int32_t)v; break; case 3: ((uint32_t *)p)[i] = (uint32_t)v; break;
    case 4: ((int64_t *)p)[i] = (int64_t)v; break; case 5: ((uint64_t *)p)[i] = (uint64_t)v; break;
    case 6: ((uint16_t *)p)[i] = float_to_half((float)v); break; case 7: ((float *)p)[i] = (float)v; break;
    case 8: ((double *)p)[i] = v; break;
    case 9: { float f = (float)v; uint32_t b; memcpy(&b, &f, 4); ((uint16_t *)p)[i] = (uint16_t)((b + 0x7fff + ((b >> 16) & 1)) >> 16); break; }
    }
}
/* op over ranks of element i, written as dtype t into out[i]; integers keep exact 64-bit arithmetic */
static void reduce_elem(char *out, const char *const *in, int n, int t, int op, size_t i) {
    if (t == 4 || t == 5) {
        int64_t acc = ((const int64_t *)in[0])[i];
        for (int r = 1; r < n; r++) {
            int64_t v = ((const int64_t *)in[r])[i];
            if (t == 5) { uint64_t a = (uint64_t)acc, b = (uint64_t)v;
                acc = (int64_t)(op == 0 || op == 4 ? a + b : op == 1 ? a * b : op == 2 ? (a > b ? a : b) : (a < b ? a : b)); }
            else acc = op == 0 || op == 4 ? acc + v : op == 1 ? acc * v : op == 2 ? (acc > v ? acc : v) : (acc < v ? acc : v);
        }
        if (op == 4) acc = t == 5 ? (int64_t)((uint64_t)acc / (uint64_t)n) : acc / n;
        ((int64_t *)out)[i] = acc;
        return;
    }
    double acc = get(in[0], t, i);
    for (int r = 1; r < n; r++) {
        double v = get(in[r], t, i);
        acc = op == 0 || op == 4 ? acc + v : op == 1 ? acc * v : op == 2 ? (acc > v ? acc : v) : (acc < v ? acc : v);
    }
    if (op == 4) acc = (t <= 5) ? (double)((long long)acc / n) : acc / n;
    put(out, t, i, acc);
}

static void run(struct clique *cl, struct pending *p) {
    int n = cl->nranks, t = p->dtype; size_t es = SIZE[t], c = p->count;
    char *tmp;
    switch (p->kind) {
    case K_ALLREDUCE: case K_REDUCE:
        tmp = malloc(c * es);
        for (size_t i = 0; i < c; i++) reduce_elem(tmp, p->send, n, t, p->op, i);
        for (int r = 0; r < n; r++) if (p->kind == K_ALLREDUCE || r == p->root) memcpy(p->recv[r], tmp, c * es);
        break;
    case K_BROADCAST:
        tmp = malloc(c * es); memcpy(tmp, p->send[p->root], c * es);
        for (int r = 0; r < n; r++) memcpy(p->recv[r], tmp, c * es);
        break;
    case K_ALLGATHER:
        tmp = malloc(c * es * n);
        for (int r = 0; r < n; r++) memcpy(tmp + r * c * es, p->send[r], c * es);
        for (int r = 0; r < n; r++) memcpy(p->recv[r], tmp, c * es * n);
        break;
    default: /* K_REDUCESCATTER: count is per rank */
        tmp = malloc(c * es * n);
        for (size_t i = 0; i < c * n; i++) reduce_elem(tmp, p->send, n, t, p->op, i);
        for (int r = 0; r < n; r++) memcpy(p->recv[r], tmp + r * c * es, c * es);
        break;
    }
    free(tmp);
    counters[5]++;
}

static ncclResult_t post(const char *name, int kind, const void *send, void *recv, size_t count, int dtype, int op,
                         int root, struct fcomm *c) {
    INJECT(name);
    COMM_OK(c);
    if (!ready(c)) return fail(ncclInvalidUsage, "fake: %s on a communicator that is not ready", name);
    if (dtype < 0 || dtype > 11) return fail(ncclInvalidArgument, "fake: %s: invalid datatype", name);
    if (op < 0 || op > 4) return fail(ncclInvalidArgument, "fake: %s: invalid reduction", name);
    if ((kind == K_ALLREDUCE || kind == K_REDUCE || kind == K_REDUCESCATTER) && dtype >= 10)
        return fail(ncclInvalidArgument, "fake: %s: float8 reductions are not faked", name);
    if (root < 0 || root >= c->cl->nranks) return fail(ncclInvalidArgument, "fake: %s: invalid root", name);
    if (!send || !recv) return fail(ncclInvalidArgument, "fake: %s: null buffer", name);
    if (c->cl->shared) {
        if (kind != K_ALLREDUCE && kind != K_BROADCAST)
            return fail(ncclInvalidUsage, "fake: %s is not faked across processes", name);
        struct pending step = {1, kind, dtype, op, root, 0, count, {0}, {0}};
        return shared_step(name, &step, c, send, recv);
    }
    pthread_mutex_lock(&lock);
    struct clique *cl = c->cl;
    struct pending *p = &cl->ops[c->seq % RING];
    if (!p->used) { memset(p, 0, sizeof *p); p->used = 1; p->kind = kind; p->dtype = dtype; p->op = op; p->root = root; p->count = count; }
    else if (p->kind != kind || p->dtype != dtype || p->count != count || p->op != op || p->root != root) {
        for (int r = 0; r < cl->nranks; r++) if (cl->ranks[r]) cl->ranks[r]->async_error = ncclInvalidUsage;
        pthread_mutex_unlock(&lock);
        return fail(ncclInvalidUsage, "fake: %s does not match the same call on another rank", name);
    }
    p->send[c->rank] = send; p->recv[c->rank] = recv;
    c->seq++;
    if (++p->posted == cl->nranks) { run(cl, p); p->used = 0; }
    if (async_error_next) { c->async_error = async_error_next; async_error_next = 0; }
    pthread_mutex_unlock(&lock);
    return ncclSuccess;
}

/* ---- identity ---- */
ncclResult_t ncclGetVersion(int *v) {
    INJECT("ncclGetVersion");
    const char *e = getenv("FAKE_NCCL_VERSION");
    *v = e ? atoi(e) : 22809;
    return ncclSuccess;
}
ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    INJECT("ncclGetUniqueId");
    memset(id, 0, sizeof *id);
    pthread_mutex_lock(&lock);
    unsigned long k = ++uid_counter;
    pthread_mutex_unlock(&lock);
    snprintf(id->internal, sizeof id->internal, "fake-nccl-id %d %lu %ld", (int)getpid(), k, (long)time(NULL));
    return ncclSuccess;
}
const char *ncclGetErrorString(ncclResult_t r) {
    static const char *names[] = {"no error", "unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
        "unhandled system error (run with NCCL_DEBUG=INFO for details)", "internal error - please report this issue to the NCCL developers",
        "invalid argument (run with NCCL_DEBUG=WARN for details)", "invalid usage (run with NCCL_DEBUG=WARN for details)",
        "remote process exited or there was a network error", "NCCL operation in progress", "operation timed out"};
    return r >= 0 && r <= 8 ? names[r] : "unknown result code";
}
const char *ncclGetLastError(void *comm) { (void)comm; return last_error; }

/* ---- communicators ---- */
static struct fcomm *new_comm(struct clique *cl, int rank) {
    struct fcomm *c = calloc(1, sizeof *c);
    c->magic = MAGIC_COMM; c->cl = cl; c->rank = rank;
    return c;
}
ncclResult_t ncclCommInitRankConfig(struct fcomm **comm, int nranks, ncclUniqueId id, int rank, struct config_head *cfg) {
    INJECT("ncclCommInitRankConfig");
    if (!comm) return fail(ncclInvalidArgument, "fake: %s", "comm is NULL");
    if (nranks < 1 || nranks > MAXR) return fail(ncclInvalidArgument, "fake: %s", "nranks is out of range");
    if (rank < 0 || rank >= nranks) return fail(ncclInvalidArgument, "fake: %s", "rank is out of range");
    if (cfg && cfg->magic != 0xcafebeefU) return fail(ncclInvalidArgument, "fake: %s", "config not initialised");
    int blocking = cfg && cfg->blocking != UNDEF_INT ? cfg->blocking : 1;
    pthread_mutex_lock(&lock);
    struct clique *cl = NULL;
    for (int i = 0; i < ncliques; i++)
        if (cliques[i] && !memcmp(&cliques[i]->id, &id, sizeof id)) cl = cliques[i];
    if (!cl) {
        if (ncliques == 256) { pthread_mutex_unlock(&lock); return fail(ncclInternalError, "fake: %s", "too many cliques"); }
        cl = calloc(1, sizeof *cl); cl->id = id; cl->nranks = nranks; cliques[ncliques++] = cl;
        if (shared_dir()) { cl->shared = 1; id_hash(&id, cl->hash); }
    }
    ncclResult_t r = ncclSuccess;
    if (cl->nranks != nranks) r = fail(ncclInvalidArgument, "fake: %s", "nranks differs from the other ranks'");
    else if (cl->ranks[rank]) r = fail(ncclInvalidArgument, "fake: %s", "this rank has already joined");
    else if (blocking && cl->joined + 1 < nranks && !cl->shared) r = fail(ncclInvalidUsage, "fake: %s", "a blocking init of one of several ranks would hang");
    if (r == ncclSuccess && cl->shared) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s.join.%d", shared_dir(), cl->hash, rank);
        if (put_file(path, "", 0) != 0) r = fail(ncclSystemError, "fake: %s", "cannot write the join file");
    }
    if (r == ncclSuccess) {
        struct fcomm *c = new_comm(cl, rank);
        cl->ranks[rank] = c; cl->joined++; *comm = c; counters[0]++;
        if (!blocking) r = ncclInProgress;
    }
    pthread_mutex_unlock(&lock);
    return r;
}
ncclResult_t ncclCommInitRank(struct fcomm **comm, int nranks, ncclUniqueId id, int rank) {
    return ncclCommInitRankConfig(comm, nranks, id, rank, NULL);
}
ncclResult_t ncclCommGetAsyncError(struct fcomm *c, ncclResult_t *state) {
    INJECT("ncclCommGetAsyncError");
    COMM_OK(c);
    *state = c->async_error ? c->async_error : ready(c) ? ncclSuccess : ncclInProgress;
    return ncclSuccess;
}
static void drop(struct fcomm *c) {
    if (c->cl) c->cl->ranks[c->rank] = NULL;
    c->magic = 0;
    free(c);
}
ncclResult_t ncclCommFinalize(struct fcomm *c) { INJECT("ncclCommFinalize"); COMM_OK(c); counters[3]++; return ncclSuccess; }
ncclResult_t ncclCommDestroy(struct fcomm *c) {
    INJECT("ncclCommDestroy"); COMM_OK(c);
    pthread_mutex_lock(&lock); drop(c); counters[2]++; pthread_mutex_unlock(&lock);
    return ncclSuccess;
}
ncclResult_t ncclCommAbort(struct fcomm *c) {
    INJECT("ncclCommAbort"); COMM_OK(c);
    pthread_mutex_lock(&lock); drop(c); counters[1]++; pthread_mutex_unlock(&lock);
    return ncclSuccess;
}
ncclResult_t ncclCommCount(const struct fcomm *c, int *n) {
    COMM_OK(c); if (!c->cl) return fail(ncclInvalidUsage, "fake: %s", "communicator not ready");
    *n = c->cl->nranks; return ncclSuccess;
}
ncclResult_t ncclCommUserRank(const struct fcomm *c, int *rank) {
    COMM_OK(c); if (!c->cl) return fail(ncclInvalidUsage, "fake: %s", "communicator not ready");
    *rank = c->rank; return ncclSuccess;
}
ncclResult_t ncclCommCuDevice(const struct fcomm *c, int *dev) { COMM_OK(c); *dev = 0; return ncclSuccess; }

/* ncclCommSplit: the round completes when every rank of the parent has called it */
ncclResult_t ncclCommSplit(struct fcomm *c, int color, int key, struct fcomm **newcomm, struct config_head *cfg) {
    INJECT("ncclCommSplit");
    COMM_OK(c);
    (void)cfg;
    if (!ready(c)) return fail(ncclInvalidUsage, "fake: %s", "split of a communicator that is not ready");
    if (color < 0 && color != NOCOLOR) return fail(ncclInvalidArgument, "fake: %s", "invalid color");
    pthread_mutex_lock(&lock);
    struct clique *cl = c->cl;
    struct split_round *s = &cl->splits[c->splits++ % 16];
    struct fcomm *child = color == NOCOLOR ? NULL : new_comm(NULL, -1);
    s->color[c->rank] = color; s->key[c->rank] = key; s->child[c->rank] = child; s->out[c->rank] = newcomm;
    *newcomm = NULL; /* as NCCL: the new communicator is written here only when the split has completed */
    last_split_out = (void *)newcomm;
    if (++s->count == cl->nranks) {
        for (int r = 0; r < cl->nranks; r++) {
            if (!s->child[r] || s->child[r]->cl) continue;
            int members[MAXR], m = 0;
            for (int q = 0; q < cl->nranks; q++) if (s->child[q] && s->color[q] == s->color[r]) members[m++] = q;
            for (int i = 1; i < m; i++)  /* insertion sort by (key, parent rank) */
                for (int j = i; j > 0 && (s->key[members[j]] < s->key[members[j - 1]] ||
                     (s->key[members[j]] == s->key[members[j - 1]] && members[j] < members[j - 1])); j--) {
                    int t = members[j]; members[j] = members[j - 1]; members[j - 1] = t; }
            struct clique *sub = calloc(1, sizeof *sub);
            sub->nranks = sub->joined = m;
            snprintf(sub->id.internal, sizeof sub->id.internal, "fake-nccl-split %p %d", (void *)s, s->color[r]);
            for (int i = 0; i < m; i++) { struct fcomm *k = s->child[members[i]]; k->cl = sub; k->rank = i; sub->ranks[i] = k; }
            if (ncliques < 256) cliques[ncliques++] = sub;
        }
        for (int r = 0; r < cl->nranks; r++) if (s->child[r]) *s->out[r] = s->child[r];
        memset(s, 0, sizeof *s);
    }
    pthread_mutex_unlock(&lock);
    return child ? ncclInProgress : ncclSuccess;
}

/* ---- registration and memory ---- */
ncclResult_t ncclCommRegister(const struct fcomm *c, void *buff, size_t size, void **handle) {
    INJECT("ncclCommRegister"); COMM_OK(c);
    if (!buff || !size || !handle) return fail(ncclInvalidArgument, "fake: %s", "bad registration arguments");
    *handle = malloc(1); counters[4]++;
    return ncclSuccess;
}
ncclResult_t ncclCommDeregister(const struct fcomm *c, void *handle) {
    INJECT("ncclCommDeregister"); COMM_OK(c);
    if (!handle) return fail(ncclInvalidArgument, "fake: %s", "null handle");
    free(handle); counters[4]--;
    return ncclSuccess;
}
typedef int (*alloc_fn)(unsigned long long *, size_t);
typedef int (*free_fn)(unsigned long long);
static void *driver(const char *name) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    return h ? dlsym(h, name) : NULL;
}
ncclResult_t ncclMemAlloc(void **ptr, size_t size) {
    INJECT("ncclMemAlloc");
    alloc_fn f = (alloc_fn)driver("cuMemAlloc_v2");
    unsigned long long p = 0;
    if (!f) return fail(ncclUnhandledCudaError, "fake: %s", "the (fake) driver is not loaded");
    int e = f(&p, size);
    if (e) return fail(ncclUnhandledCudaError, e == 2 ? "Cuda failure 2 '%s'" : "Cuda failure '%s'", e == 2 ? "out of memory" : "cuMemAlloc");
    *ptr = (void *)(uintptr_t)p; counters[6]++;
    return ncclSuccess;
}
ncclResult_t ncclMemFree(void *ptr) {
    INJECT("ncclMemFree");
    free_fn f = (free_fn)driver("cuMemFree_v2");
    if (!f || f((unsigned long long)(uintptr_t)ptr)) return fail(ncclUnhandledCudaError, "fake: %s", "cuMemFree failed");
    counters[6]--;
    return ncclSuccess;
}

/* ---- collectives ---- */
ncclResult_t ncclAllReduce(const void *s, void *r, size_t n, int t, int op, struct fcomm *c, cudaStream_t st) {
    (void)st; return post("ncclAllReduce", K_ALLREDUCE, s, r, n, t, op, 0, c);
}
ncclResult_t ncclBroadcast(const void *s, void *r, size_t n, int t, int root, struct fcomm *c, cudaStream_t st) {
    (void)st; return post("ncclBroadcast", K_BROADCAST, s, r, n, t, 0, root, c);
}
ncclResult_t ncclBcast(void *b, size_t n, int t, int root, struct fcomm *c, cudaStream_t st) {
    (void)st; return post("ncclBcast", K_BROADCAST, b, b, n, t, 0, root, c);
}
ncclResult_t ncclReduce(const void *s, void *r, size_t n, int t, int op, int root, struct fcomm *c, cudaStream_t st) {
    (void)st;
    /* recvbuff matters on root only; a placeholder elsewhere keeps post()'s null check honest */
    return post("ncclReduce", K_REDUCE, s, r ? r : (void *)s, n, t, op, root, c);
}
ncclResult_t ncclAllGather(const void *s, void *r, size_t n, int t, struct fcomm *c, cudaStream_t st) {
    (void)st; return post("ncclAllGather", K_ALLGATHER, s, r, n, t, 0, 0, c);
}
ncclResult_t ncclReduceScatter(const void *s, void *r, size_t n, int t, int op, struct fcomm *c, cudaStream_t st) {
    (void)st; return post("ncclReduceScatter", K_REDUCESCATTER, s, r, n, t, op, 0, c);
}

/* ---- point to point: a send and a recv of the same pair meet, in order ---- */
static ncclResult_t p2p(const char *name, int is_send, void *buf, size_t n, int t, int peer, struct fcomm *c) {
    INJECT(name);
    COMM_OK(c);
    if (!ready(c)) return fail(ncclInvalidUsage, "fake: %s on a communicator that is not ready", name);
    if (t < 0 || t > 11) return fail(ncclInvalidArgument, "fake: %s: invalid datatype", name);
    if (peer < 0 || peer >= c->cl->nranks) return fail(ncclInvalidArgument, "fake: %s: invalid peer", name);
    pthread_mutex_lock(&lock);
    struct clique *cl = c->cl;
    int src = is_send ? c->rank : peer, dst = is_send ? peer : c->rank;
    struct p2p *mine = is_send ? cl->sends : cl->recvs, *theirs = is_send ? cl->recvs : cl->sends, *match = NULL;
    for (int i = 0; i < RING; i++)
        if (theirs[i].used && theirs[i].src == src && theirs[i].dst == dst && (!match || theirs[i].seq < match->seq)) match = &theirs[i];
    ncclResult_t r = ncclSuccess;
    if (match) {
        if (match->count != n || match->dtype != t) {
            r = fail(ncclInvalidUsage, "fake: %s does not match its peer's call", name);
        } else {
            memcpy(is_send ? match->recv : buf, is_send ? buf : match->send, n * SIZE[t]);
            counters[5]++;
        }
        match->used = 0;
    } else {
        int i = 0;
        while (i < RING && mine[i].used) i++;
        if (i == RING) r = fail(ncclInternalError, "fake: %s: too many unmatched calls", name);
        else mine[i] = (struct p2p){1, src, dst, t, n, is_send ? buf : NULL, is_send ? NULL : buf, cl->p2pseq++};
    }
    pthread_mutex_unlock(&lock);
    return r;
}
ncclResult_t ncclSend(const void *b, size_t n, int t, int peer, struct fcomm *c, cudaStream_t st) {
    (void)st; return p2p("ncclSend", 1, (void *)b, n, t, peer, c);
}
ncclResult_t ncclRecv(void *b, size_t n, int t, int peer, struct fcomm *c, cudaStream_t st) {
    (void)st; return p2p("ncclRecv", 0, b, n, t, peer, c);
}

/* ---- groups ---- */
ncclResult_t ncclGroupStart(void) { INJECT("ncclGroupStart"); group_depth++; return ncclSuccess; }
ncclResult_t ncclGroupEnd(void) {
    if (group_depth <= 0) return fail(ncclInvalidUsage, "fake: %s", "ncclGroupEnd without ncclGroupStart");
    group_depth--;
    INJECT("ncclGroupEnd");
    return ncclSuccess;
}
