/* Explicit graphs for the fake libcuda (see fake_cuda.c): the node-by-node graph API the cuda.core compat's
 * GraphDefinition uses (cuGraphCreate, cuGraphAdd*Node, cuGraphAddNode for conditionals, edges, node
 * parameters, child graphs, cuGraphDestroyNode) and the executable graphs made from such graphs.
 *
 * A graph made here is a list of heap nodes (a node's handle is its address) and a list of edges; a child
 * graph node holds a clone, a conditional node its empty body graphs.  Graphs made by stream capture stay
 * fake_cuda.c's: the functions both kinds reach (cuGraphGetNodes, cuGraphDestroy, instantiation, launch,
 * update, upload, DOT print, exec destroy) pass other handles on to the originals.  An alloc node's memory is
 * host memory allocated when the node is added, so its address is known at once as on a GPU.  A launch runs the
 * nodes in dependency order: memsets, copies and host functions do their work, child graphs run, an "if" body
 * runs on a non-zero default value (an else body on zero), a switch runs the branch its default value names and a
 * "while" body runs once on a non-zero default (no kernel here sets a condition); kernels run as cuLaunchKernel runs
 * them on the legacy stream (the fake's known kernels, with the parameter values copied when the node was made);
 * events do nothing.
 */
#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h"

/* Graphs of stream capture (fake_cuda.c's) get their conditional and child nodes from fake_compat_kit.c. */
CUresult kit_conditional_handle_create(CUgraphConditionalHandle *, CUgraph, CUcontext, unsigned int, unsigned int);
CUresult kit_add_node(CUgraphNode *, CUgraph, const CUgraphNode *, const CUgraphEdgeData *, size_t, CUgraphNodeParams *);
CUresult kit_add_child_graph_node(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUgraph);


#define MAGIC_RGRAPH 0x52475248U
#define MAGIC_RNODE 0x524e4f44U
#define MAGIC_REXEC 0x52455845U

struct rgraph;
struct rnode {
    unsigned magic;
    struct rgraph *g;
    CUgraphNodeType type;
    CUDA_KERNEL_NODE_PARAMS kernel;
    unsigned char args[256];  /* the kernel's parameters, packed at their offsets */
    void *argp[16];
    int nargs;
    CUDA_MEM_ALLOC_NODE_PARAMS alloc;
    CUmemAccessDesc access[8];
    CUdeviceptr free_ptr;
    CUDA_MEMSET_NODE_PARAMS memset;
    CUDA_MEMCPY3D memcpy;
    CUDA_HOST_NODE_PARAMS host;
    CUevent event;
    struct rgraph *child;
    CUgraphConditionalHandle cond;
    CUgraphConditionalNodeType cond_type;
    unsigned cond_size;
    struct rgraph *bodies[8];
    struct rnode *copy;  /* scratch for cloning */
    int done;            /* scratch for launching */
    int disabled;        /* in an executable graph: cuGraphNodeSetEnabled(0) */
};
struct redge { struct rnode *from, *to; };
struct rgraph {
    unsigned magic;
    struct rnode **nodes; size_t n, cap;
    struct redge *edges; size_t ne, ecap;
};
struct rexec { unsigned magic; struct rgraph *g; };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned cond_defaults[4096];
static size_t nconds;

static struct rgraph *rgraph_of(CUgraph h) {
    struct rgraph *g = (struct rgraph *)h;
    return (g && g->magic == MAGIC_RGRAPH) ? g : NULL;
}
static struct rnode *rnode_of(CUgraphNode h) {
    struct rnode *n = (struct rnode *)h;
    return (n && n->magic == MAGIC_RNODE) ? n : NULL;
}
static struct rexec *rexec_of(CUgraphExec h) {
    struct rexec *e = (struct rexec *)h;
    return (e && e->magic == MAGIC_REXEC) ? e : NULL;
}
static struct rgraph *new_graph(void) {
    struct rgraph *g = calloc(1, sizeof *g);
    g->magic = MAGIC_RGRAPH;
    return g;
}
static int has_edge(struct rgraph *g, struct rnode *a, struct rnode *b) {
    for (size_t i = 0; i < g->ne; i++) if (g->edges[i].from == a && g->edges[i].to == b) return 1;
    return 0;
}
static void push_edge(struct rgraph *g, struct rnode *a, struct rnode *b) {
    if (g->ne == g->ecap) { g->ecap = g->ecap ? 2 * g->ecap : 16; g->edges = realloc(g->edges, g->ecap * sizeof *g->edges); }
    g->edges[g->ne].from = a; g->edges[g->ne].to = b; g->ne++;
}
static void push_node(struct rgraph *g, struct rnode *n) {
    if (g->n == g->cap) { g->cap = g->cap ? 2 * g->cap : 16; g->nodes = realloc(g->nodes, g->cap * sizeof *g->nodes); }
    g->nodes[g->n++] = n;
}

/* Check the graph and the dependencies, then add a node of `type` (returned, under the lock). */
static CUresult add_node(CUgraphNode *out, CUgraph hg, const CUgraphNode *deps, size_t ndeps, CUgraphNodeType type,
                         struct rnode **made) {
    CUresult err = fake_cuda_check();
    if (err) return err;
    struct rgraph *g = rgraph_of(hg);
    if (!g || !out || (ndeps && !deps)) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < ndeps; i++) {
        struct rnode *d = rnode_of(deps[i]);
        if (!d || d->g != g) return CUDA_ERROR_INVALID_VALUE;
        for (size_t k = 0; k < i; k++) if (deps[k] == deps[i]) return CUDA_ERROR_INVALID_VALUE;
    }
    struct rnode *n = calloc(1, sizeof *n);
    n->magic = MAGIC_RNODE; n->g = g; n->type = type;
    push_node(g, n);
    for (size_t i = 0; i < ndeps; i++) push_edge(g, (struct rnode *)deps[i], n);
    *out = (CUgraphNode)n; *made = n;
    return CUDA_SUCCESS;
}

/* Copy a kernel's parameter values into the node (cuFuncGetParamInfo gives their layout). */
static void keep_args(struct rnode *n, const CUDA_KERNEL_NODE_PARAMS *p) {
    n->kernel = *p; n->kernel.kernelParams = NULL; n->kernel.extra = NULL; n->nargs = 0;
    if (!n->kernel.func) n->kernel.func = (CUfunction)p->kern; /* a library kernel (func NULL): the fake's are functions */
    size_t off, size;
    for (int i = 0; i < 16 && p->kernelParams && cuFuncGetParamInfo(n->kernel.func, i, &off, &size) == CUDA_SUCCESS; i++) {
        if (off + size > sizeof n->args) break;
        memcpy(n->args + off, p->kernelParams[i], size);
        n->nargs = i + 1;
    }
}
static void fix_args(struct rnode *n) {
    size_t off, size;
    for (int i = 0; i < n->nargs; i++) if (cuFuncGetParamInfo(n->kernel.func, i, &off, &size) == CUDA_SUCCESS) n->argp[i] = n->args + off;
}

static struct rgraph *clone_graph(struct rgraph *src) {
    struct rgraph *g = new_graph();
    for (size_t i = 0; i < src->n; i++) {
        struct rnode *n = malloc(sizeof *n);
        *n = *src->nodes[i]; n->g = g;
        if (n->child) n->child = clone_graph(n->child);
        for (unsigned b = 0; b < n->cond_size && b < 8; b++) n->bodies[b] = clone_graph(n->bodies[b]);
        src->nodes[i]->copy = n;
        push_node(g, n);
    }
    for (size_t i = 0; i < src->ne; i++) push_edge(g, src->edges[i].from->copy, src->edges[i].to->copy);
    fake_uo_copy(src, g);  /* a clone holds user objects of its own, as on the card */
    return g;
}

/* A graph is gone: it and the graphs inside its nodes release the user objects they hold. */
static void drop_refs(struct rgraph *g) {
    fake_uo_drop(g);
    for (size_t i = 0; i < g->n; i++) {
        if (g->nodes[i]->child) drop_refs(g->nodes[i]->child);
        for (unsigned b = 0; b < g->nodes[i]->cond_size && b < 8; b++) drop_refs(g->nodes[i]->bodies[b]);
    }
}

/* Memory a node or copy may touch: a live allocation of the fake (a node that touches freed memory does nothing;
   a GPU would fault, or not). */
static int writable(CUdeviceptr p, size_t n) {
    CUdeviceptr base; size_t size;
    return fake_cuda_find_range(p, n, &base, &size) >= 0;
}

/* ---- graphs and nodes ---- */
CUresult cuGraphCreate(CUgraph *ph, unsigned int flags) {
    CUresult err = fake_cuda_check();
    if (err) return err;
    if (!ph || flags) return CUDA_ERROR_INVALID_VALUE;
    *ph = (CUgraph)new_graph();
    return CUDA_SUCCESS;
}
CUresult cuGraphAddEmptyNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t ndeps) {
    struct rnode *n; pthread_mutex_lock(&lock);
    CUresult err = add_node(out, g, deps, ndeps, CU_GRAPH_NODE_TYPE_EMPTY, &n);
    pthread_mutex_unlock(&lock); return err;
}
CUresult cuGraphAddKernelNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t ndeps,
                              const CUDA_KERNEL_NODE_PARAMS *p) {
    if (!p || (!p->func && !p->kern)) return CUDA_ERROR_INVALID_VALUE;
    struct rnode *n; pthread_mutex_lock(&lock);
    CUresult err = add_node(out, g, deps, ndeps, CU_GRAPH_NODE_TYPE_KERNEL, &n);
    if (!err) keep_args(n, p);
    pthread_mutex_unlock(&lock); return err;
}
CUresult cuGraphKernelNodeGetParams(CUgraphNode h, CUDA_KERNEL_NODE_PARAMS *p) {
    struct rnode *n = rnode_of(h);
    if (!n || n->type != CU_GRAPH_NODE_TYPE_KERNEL || !p) return CUDA_ERROR_INVALID_VALUE;
    *p = n->kernel; return CUDA_SUCCESS;
}
CUresult cuGraphAddMemAllocNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t ndeps,
                                CUDA_MEM_ALLOC_NODE_PARAMS *p) {
    if (!p || p->bytesize == 0 || p->accessDescCount > 8) return CUDA_ERROR_INVALID_VALUE;
    if (p->poolProps.location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
        (p->poolProps.location.id < 0 || p->poolProps.location.id >= fake_cuda_device_count()))
        return CUDA_ERROR_INVALID_DEVICE;
    struct rnode *n; pthread_mutex_lock(&lock);
    CUresult err = add_node(out, g, deps, ndeps, CU_GRAPH_NODE_TYPE_MEM_ALLOC, &n);
    if (!err) {
        void *mem = calloc(1, p->bytesize);
        fake_cuda_add_range(mem, p->bytesize, p->poolProps.location.id, NULL, NULL);
        p->dptr = (CUdeviceptr)(uintptr_t)mem;
        n->alloc = *p;
        if (p->accessDescCount) memcpy(n->access, p->accessDescs, p->accessDescCount * sizeof *n->access);
        n->alloc.accessDescs = n->access;
    }
    pthread_mutex_unlock(&lock); return err;
}
CUresult cuGraphMemAllocNodeGetParams(CUgraphNode h, CUDA_MEM_ALLOC_NODE_PARAMS *p) {
    struct rnode *n = rnode_of(h);
    if (!n || n->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC || !p) return CUDA_ERROR_INVALID_VALUE;
    *p = n->alloc; return CUDA_SUCCESS;
}
CUresult cuGraphAddMemFreeNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t ndeps, CUdeviceptr dptr) {
    if (!dptr) return CUDA_ERROR_INVALID_VALUE;
    struct rnode *n; pthread_mutex_lock(&lock);
    CUresult err = add_node(out, g, deps, ndeps, CU_GRAPH_NODE_TYPE_MEM_FREE, &n);
    if (!err) n->free_ptr = dptr;
    pthread_mutex_unlock(&lock); return err;
}
CUresult cuGraphMemFreeNodeGetParams(CUgraphNode h, CUdeviceptr *out) {
    struct rnode *n = rnode_of(h);
    if (!n || n->type != CU_GRAPH_NODE_TYPE_MEM_FREE || !out) return CUDA_ERROR_INVALID_VALUE;
    *out = n->free_ptr; return CUDA_SUCCESS;
}
CUresult cuGraphAddMemsetNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t ndeps,
                              const CUDA_MEMSET_NODE_PARAMS *p, CUcontext ctx) {
    (void)ctx;
    if (!p || !p->dst || (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4) || !p->width ||
        !p->height || (p->height > 1 && p->pitch < p->width * p->elementSize))
        return CUDA_ERROR_INVALID_VALUE;
    struct rnode *n; pthread_mutex_lock(&lock);
    CUresult err = add_node(out, g, deps, ndeps, CU_GRAPH_NODE_TYPE_MEMSET, &n);
    if (!err) n->memset = *p;
    pthread_mutex_unlock(&lock); return err;
}
CUresult cuGraphMemsetNodeGetParams(CUgraphNode h, CUDA_MEMSET_NODE_PARAMS *p) {
    struct rnode *n = rnode_of(h);
    if (!n || n->type != CU_GRAPH_NODE_TYPE_MEMSET || !p) return CUDA_ERROR_INVALID_VALUE;
    *p = n->memset; return CUDA_SUCCESS;
}
CUresult cuGraphAddMemcpyNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t ndeps,
                              const CUDA_MEMCPY3D *p, CUcontext ctx) {
    (void)ctx;
    if (!p || !p->WidthInBytes) return CUDA_ERROR_INVALID_VALUE;
    struct rnode *n; pthread_mutex_lock(&lock);
    CUresult err = add_node(out, g, deps, ndeps, CU_GRAPH_NODE_TYPE_MEMCPY, &n);
    if (!err) n->memcpy = *p;
    pthread_mutex_unlock(&lock); return err;
}
CUresult cuGraphMemcpyNodeGetParams(CUgraphNode h, CUDA_MEMCPY3D *p) {
    struct rnode *n = rnode_of(h);
    if (!n || n->type != CU_GRAPH_NODE_TYPE_MEMCPY || !p) return CUDA_ERROR_INVALID_VALUE;
    *p = n->memcpy; return CUDA_SUCCESS;
}
CUresult cuGraphAddChildGraphNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t ndeps, CUgraph child) {
    if (g && !rgraph_of(g)) return kit_add_child_graph_node(out, g, deps, ndeps, child);
    struct rgraph *c = rgraph_of(child);
    if (!c || child == g) return CUDA_ERROR_INVALID_VALUE;
    struct rnode *n; pthread_mutex_lock(&lock);
    CUresult err = add_node(out, g, deps, ndeps, CU_GRAPH_NODE_TYPE_GRAPH, &n);
    if (!err) n->child = clone_graph(c);
    pthread_mutex_unlock(&lock); return err;
}
CUresult cuGraphChildGraphNodeGetGraph(CUgraphNode h, CUgraph *out) {
    struct rnode *n = rnode_of(h);
    if (!n || n->type != CU_GRAPH_NODE_TYPE_GRAPH || !out) return CUDA_ERROR_INVALID_VALUE;
    *out = (CUgraph)n->child; return CUDA_SUCCESS;
}
static CUresult add_event_node(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t ndeps, CUevent e,
                               CUgraphNodeType type) {
    if (!e) return CUDA_ERROR_INVALID_VALUE;
    struct rnode *n; pthread_mutex_lock(&lock);
    CUresult err = add_node(out, g, deps, ndeps, type, &n);
    if (!err) n->event = e;
    pthread_mutex_unlock(&lock); return err;
}
CUresult cuGraphAddEventRecordNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t ndeps, CUevent e) {
    return add_event_node(out, g, deps, ndeps, e, CU_GRAPH_NODE_TYPE_EVENT_RECORD);
}
CUresult cuGraphAddEventWaitNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t ndeps, CUevent e) {
    return add_event_node(out, g, deps, ndeps, e, CU_GRAPH_NODE_TYPE_WAIT_EVENT);
}
static CUresult get_event(CUgraphNode h, CUevent *out, CUgraphNodeType type) {
    struct rnode *n = rnode_of(h);
    if (!n || n->type != type || !out) return CUDA_ERROR_INVALID_VALUE;
    *out = n->event; return CUDA_SUCCESS;
}
CUresult cuGraphEventRecordNodeGetEvent(CUgraphNode h, CUevent *out) { return get_event(h, out, CU_GRAPH_NODE_TYPE_EVENT_RECORD); }
CUresult cuGraphEventWaitNodeGetEvent(CUgraphNode h, CUevent *out) { return get_event(h, out, CU_GRAPH_NODE_TYPE_WAIT_EVENT); }
CUresult cuGraphAddHostNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t ndeps,
                            const CUDA_HOST_NODE_PARAMS *p) {
    if (!p || !p->fn) return CUDA_ERROR_INVALID_VALUE;
    struct rnode *n; pthread_mutex_lock(&lock);
    CUresult err = add_node(out, g, deps, ndeps, CU_GRAPH_NODE_TYPE_HOST, &n);
    if (!err) n->host = *p;
    pthread_mutex_unlock(&lock); return err;
}
CUresult cuGraphHostNodeGetParams(CUgraphNode h, CUDA_HOST_NODE_PARAMS *p) {
    struct rnode *n = rnode_of(h);
    if (!n || n->type != CU_GRAPH_NODE_TYPE_HOST || !p) return CUDA_ERROR_INVALID_VALUE;
    *p = n->host; return CUDA_SUCCESS;
}
CUresult cuGraphConditionalHandleCreate(CUgraphConditionalHandle *out, CUgraph g, CUcontext ctx, unsigned int value,
                                        unsigned int flags) {
    if (g && !rgraph_of(g)) return kit_conditional_handle_create(out, g, ctx, value, flags);
    if (!out || !rgraph_of(g)) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    if (nconds == sizeof cond_defaults / sizeof *cond_defaults) { pthread_mutex_unlock(&lock); return CUDA_ERROR_OUT_OF_MEMORY; }
    cond_defaults[nconds] = (flags & CU_GRAPH_COND_ASSIGN_DEFAULT) ? value : 0;
    *out = (CUgraphConditionalHandle)(++nconds);
    pthread_mutex_unlock(&lock); return CUDA_SUCCESS;
}
CUresult cuGraphAddNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, const CUgraphEdgeData *edge_data,
                        size_t ndeps, CUgraphNodeParams *p) {
    if (g && !rgraph_of(g)) return kit_add_node(out, g, deps, edge_data, ndeps, p);
    if (!p || p->type != CU_GRAPH_NODE_TYPE_CONDITIONAL) return CUDA_ERROR_NOT_SUPPORTED;
    CUDA_CONDITIONAL_NODE_PARAMS *c = &p->conditional;
    if (!c->handle || c->handle > nconds || c->size == 0 || c->size > 8 ||
        (c->type != CU_GRAPH_COND_TYPE_SWITCH && c->size > (c->type == CU_GRAPH_COND_TYPE_IF ? 2u : 1u)))
        return CUDA_ERROR_INVALID_VALUE;
    struct rnode *n; pthread_mutex_lock(&lock);
    CUresult err = add_node(out, g, deps, ndeps, CU_GRAPH_NODE_TYPE_CONDITIONAL, &n);
    if (!err) {
        n->cond = c->handle; n->cond_type = c->type; n->cond_size = c->size;
        for (unsigned b = 0; b < c->size; b++) n->bodies[b] = new_graph();
        c->phGraph_out = (CUgraph *)n->bodies;
    }
    pthread_mutex_unlock(&lock); return err;
}
CUresult cuGraphNodeGetType(CUgraphNode h, CUgraphNodeType *out) {
    struct rnode *n = rnode_of(h);
    if (!n || !out) return CUDA_ERROR_INVALID_VALUE;
    *out = n->type; return CUDA_SUCCESS;
}
CUresult cuGraphGetEdges(CUgraph hg, CUgraphNode *from, CUgraphNode *to, CUgraphEdgeData *data, size_t *count) {
    struct rgraph *g = rgraph_of(hg);
    if (!g || !count) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    if (from || to) {
        for (size_t i = 0; i < *count; i++) {
            if (from) from[i] = i < g->ne ? (CUgraphNode)g->edges[i].from : NULL;
            if (to) to[i] = i < g->ne ? (CUgraphNode)g->edges[i].to : NULL;
            if (data) memset(&data[i], 0, sizeof data[i]);
        }
        if (*count > g->ne) *count = g->ne;
    } else {
        *count = g->ne;
    }
    pthread_mutex_unlock(&lock); return CUDA_SUCCESS;
}
static CUresult adjacent(CUgraphNode h, CUgraphNode *out, CUgraphEdgeData *data, size_t *count, int fwd) {
    struct rnode *n = rnode_of(h);
    if (!n || !count) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    size_t k = 0;
    for (size_t i = 0; i < n->g->ne; i++) {
        struct redge *e = &n->g->edges[i];
        struct rnode *other = fwd ? (e->from == n ? e->to : NULL) : (e->to == n ? e->from : NULL);
        if (!other) continue;
        if (out && k < *count) { out[k] = (CUgraphNode)other; if (data) memset(&data[k], 0, sizeof data[k]); }
        k++;
    }
    if (out) { for (size_t i = k; i < *count; i++) out[i] = NULL; if (k < *count) *count = k; } else *count = k;
    pthread_mutex_unlock(&lock); return CUDA_SUCCESS;
}
CUresult cuGraphNodeGetDependencies(CUgraphNode h, CUgraphNode *deps, CUgraphEdgeData *data, size_t *count) {
    return adjacent(h, deps, data, count, 0);
}
CUresult cuGraphNodeGetDependentNodes(CUgraphNode h, CUgraphNode *deps, CUgraphEdgeData *data, size_t *count) {
    return adjacent(h, deps, data, count, 1);
}
static CUresult check_pairs(struct rgraph *g, const CUgraphNode *from, const CUgraphNode *to, size_t count) {
    if (!g || (count && (!from || !to))) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < count; i++) {
        struct rnode *a = rnode_of(from[i]), *b = rnode_of(to[i]);
        if (!a || !b || a->g != g || b->g != g || a == b) return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}
CUresult cuGraphAddDependencies(CUgraph hg, const CUgraphNode *from, const CUgraphNode *to,
                                const CUgraphEdgeData *data, size_t count) {
    (void)data;
    struct rgraph *g = rgraph_of(hg);
    pthread_mutex_lock(&lock);
    CUresult err = check_pairs(g, from, to, count);
    for (size_t i = 0; !err && i < count; i++)
        if (has_edge(g, (struct rnode *)from[i], (struct rnode *)to[i])) err = CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; !err && i < count; i++) push_edge(g, (struct rnode *)from[i], (struct rnode *)to[i]);
    pthread_mutex_unlock(&lock); return err;
}
CUresult cuGraphRemoveDependencies(CUgraph hg, const CUgraphNode *from, const CUgraphNode *to,
                                   const CUgraphEdgeData *data, size_t count) {
    (void)data;
    struct rgraph *g = rgraph_of(hg);
    pthread_mutex_lock(&lock);
    CUresult err = check_pairs(g, from, to, count);
    for (size_t i = 0; !err && i < count; i++)
        if (!has_edge(g, (struct rnode *)from[i], (struct rnode *)to[i])) err = CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; !err && i < count; i++)
        for (size_t k = 0; k < g->ne; k++)
            if (g->edges[k].from == (struct rnode *)from[i] && g->edges[k].to == (struct rnode *)to[i]) {
                g->edges[k] = g->edges[--g->ne]; break;
            }
    pthread_mutex_unlock(&lock); return err;
}
CUresult cuGraphDestroyNode(CUgraphNode h) {
    pthread_mutex_lock(&lock);
    struct rnode *n = rnode_of(h);
    if (!n) { pthread_mutex_unlock(&lock); return CUDA_ERROR_INVALID_VALUE; }
    struct rgraph *g = n->g;
    for (size_t k = 0; k < g->n; k++)  /* the fake's stand-in for the driver's graph-memory restrictions */
        if (g->nodes[k]->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC || g->nodes[k]->type == CU_GRAPH_NODE_TYPE_MEM_FREE) {
            pthread_mutex_unlock(&lock); return CUDA_ERROR_NOT_SUPPORTED;
        }
    for (size_t k = 0; k < g->ne;) {
        if (g->edges[k].from == n || g->edges[k].to == n) g->edges[k] = g->edges[--g->ne]; else k++;
    }
    for (size_t k = 0; k < g->n; k++) if (g->nodes[k] == n) { g->nodes[k] = g->nodes[--g->n]; break; }
    if (n->child) drop_refs(n->child);
    for (unsigned b = 0; b < n->cond_size && b < 8; b++) drop_refs(n->bodies[b]);
    n->magic = 0;
    pthread_mutex_unlock(&lock); return CUDA_SUCCESS;
}

CUresult cuGraphClone(CUgraph *out, CUgraph hg) {
    struct rgraph *g = rgraph_of(hg);
    if (!g || !out) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock); *out = (CUgraph)clone_graph(g); pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}

/* Synchronous copies out of and into fake device memory (tests read results back with them). */
CUresult cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t n) {
    CUresult err = fake_cuda_check();
    if (err) return err;
    if (!writable(src, n)) return CUDA_ERROR_INVALID_VALUE;
    memmove(dst, (const void *)(uintptr_t)src, n);
    return CUDA_SUCCESS;
}
CUresult cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t n) {
    CUresult err = fake_cuda_check();
    if (err) return err;
    if (!writable(dst, n)) return CUDA_ERROR_INVALID_VALUE;
    memmove((void *)(uintptr_t)dst, src, n);
    return CUDA_SUCCESS;
}

/* ---- node parameters replaced in a graph ---- */
static struct rnode *typed(CUgraphNode h, CUgraphNodeType type) {
    struct rnode *n = rnode_of(h);
    return (n && n->type == type) ? n : NULL;
}
CUresult cuGraphKernelNodeSetParams(CUgraphNode h, const CUDA_KERNEL_NODE_PARAMS *p) {
    struct rnode *n = typed(h, CU_GRAPH_NODE_TYPE_KERNEL);
    if (!n || !p || (!p->func && !p->kern)) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock); keep_args(n, p); pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}
CUresult cuGraphMemsetNodeSetParams(CUgraphNode h, const CUDA_MEMSET_NODE_PARAMS *p) {
    struct rnode *n = typed(h, CU_GRAPH_NODE_TYPE_MEMSET);
    if (!n || !p || !p->dst || (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4)) return CUDA_ERROR_INVALID_VALUE;
    n->memset = *p; return CUDA_SUCCESS;
}
CUresult cuGraphMemcpyNodeSetParams(CUgraphNode h, const CUDA_MEMCPY3D *p) {
    struct rnode *n = typed(h, CU_GRAPH_NODE_TYPE_MEMCPY);
    if (!n || !p || !p->WidthInBytes) return CUDA_ERROR_INVALID_VALUE;
    n->memcpy = *p; return CUDA_SUCCESS;
}
CUresult cuGraphEventRecordNodeSetEvent(CUgraphNode h, CUevent e) {
    struct rnode *n = typed(h, CU_GRAPH_NODE_TYPE_EVENT_RECORD);
    if (!n || !e) return CUDA_ERROR_INVALID_VALUE;
    n->event = e; return CUDA_SUCCESS;
}
CUresult cuGraphEventWaitNodeSetEvent(CUgraphNode h, CUevent e) {
    struct rnode *n = typed(h, CU_GRAPH_NODE_TYPE_WAIT_EVENT);
    if (!n || !e) return CUDA_ERROR_INVALID_VALUE;
    n->event = e; return CUDA_SUCCESS;
}
CUresult cuGraphHostNodeSetParams(CUgraphNode h, const CUDA_HOST_NODE_PARAMS *p) {
    struct rnode *n = typed(h, CU_GRAPH_NODE_TYPE_HOST);
    if (!n || !p || !p->fn) return CUDA_ERROR_INVALID_VALUE;
    n->host = *p; return CUDA_SUCCESS;
}

/* ---- what graphs of both kinds reach ---- */
static CUresult reg_get_nodes(CUgraph hg, CUgraphNode *nodes, size_t *count) {
    struct rgraph *g = rgraph_of(hg);
    if (!g) return cuGraphGetNodes(hg, nodes, count);
    if (!count) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    if (nodes) {
        for (size_t i = 0; i < *count; i++) nodes[i] = i < g->n ? (CUgraphNode)g->nodes[i] : NULL;
        if (*count > g->n) *count = g->n;
    } else {
        *count = g->n;
    }
    pthread_mutex_unlock(&lock); return CUDA_SUCCESS;
}
static CUresult reg_destroy(CUgraph hg) {
    struct rgraph *g = rgraph_of(hg);
    if (!g) return cuGraphDestroy(hg);
    g->magic = 0;
    pthread_mutex_lock(&lock); drop_refs(g); pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}
static CUresult reg_instantiate(CUgraphExec *out, CUgraph hg, unsigned long long flags) {
    struct rgraph *g = rgraph_of(hg);
    if (!g) return cuGraphInstantiateWithFlags(out, hg, flags);
    if (!out || (flags & ~0xfULL)) return CUDA_ERROR_INVALID_VALUE;
    CUresult err = fake_cuda_check();
    if (err) return err;
    struct rexec *e = calloc(1, sizeof *e);
    e->magic = MAGIC_REXEC;
    pthread_mutex_lock(&lock); e->g = clone_graph(g); pthread_mutex_unlock(&lock);
    *out = (CUgraphExec)e;
    return CUDA_SUCCESS;
}
static void run_memset(const CUDA_MEMSET_NODE_PARAMS *p) {
    size_t span = (p->height - 1) * p->pitch + p->width * p->elementSize;
    if (!writable(p->dst, span)) return;
    for (size_t r = 0; r < p->height; r++) {
        unsigned char *row = (unsigned char *)(uintptr_t)p->dst + r * p->pitch;
        for (size_t i = 0; i < p->width; i++) memcpy(row + i * p->elementSize, &p->value, p->elementSize);
    }
}
static void run_graph(struct rgraph *g);
static void run_node(struct rnode *n) {
    switch (n->type) {
    case CU_GRAPH_NODE_TYPE_MEMSET: run_memset(&n->memset); break;
    case CU_GRAPH_NODE_TYPE_MEMCPY: {
        const CUDA_MEMCPY3D *p = &n->memcpy;
        const void *src = p->srcMemoryType == CU_MEMORYTYPE_HOST ? p->srcHost : (const void *)(uintptr_t)p->srcDevice;
        void *dst = p->dstMemoryType == CU_MEMORYTYPE_HOST ? p->dstHost : (void *)(uintptr_t)p->dstDevice;
        if (writable((CUdeviceptr)(uintptr_t)dst, p->WidthInBytes) && writable((CUdeviceptr)(uintptr_t)src, p->WidthInBytes))
            memmove(dst, src, p->WidthInBytes);
        break;
    }
    case CU_GRAPH_NODE_TYPE_HOST: n->host.fn(n->host.userData); break;
    case CU_GRAPH_NODE_TYPE_KERNEL:
        fix_args(n);
        cuLaunchKernel(n->kernel.func, n->kernel.gridDimX, n->kernel.gridDimY, n->kernel.gridDimZ, n->kernel.blockDimX,
                       n->kernel.blockDimY, n->kernel.blockDimZ, n->kernel.sharedMemBytes, NULL, n->argp, NULL);
        break;
    case CU_GRAPH_NODE_TYPE_GRAPH: run_graph(n->child); break;
    case CU_GRAPH_NODE_TYPE_CONDITIONAL: {
        unsigned v = cond_defaults[n->cond - 1];
        if (n->cond_type == CU_GRAPH_COND_TYPE_SWITCH) { if (v < n->cond_size) run_graph(n->bodies[v]); }
        else if (v) run_graph(n->bodies[0]);
        else if (n->cond_type == CU_GRAPH_COND_TYPE_IF && n->cond_size == 2) run_graph(n->bodies[1]);
        break;
    }
    default: break;
    }
}
static void run_graph(struct rgraph *g) {
    for (size_t i = 0; i < g->n; i++) g->nodes[i]->done = 0;
    for (size_t ran = 0, progress = 1; ran < g->n && progress;) {
        progress = 0;
        for (size_t i = 0; i < g->n; i++) {
            struct rnode *n = g->nodes[i];
            if (n->done) continue;
            int ready = 1;
            for (size_t k = 0; k < g->ne && ready; k++) if (g->edges[k].to == n && !g->edges[k].from->done) ready = 0;
            if (!ready) continue;
            if (!n->disabled) run_node(n);
            n->done = 1; ran++; progress = 1;
        }
    }
}
static CUresult reg_launch(CUgraphExec he, CUstream s) {
    struct rexec *e = rexec_of(he);
    if (!e) return cuGraphLaunch(he, s);
    CUresult err = fake_cuda_check();
    if (err) return err;
    if (fake_cuda_current_device() < 0) return CUDA_ERROR_INVALID_CONTEXT;
    if (fake_cuda_stream_device(s) < 0) return CUDA_ERROR_INVALID_HANDLE;
    run_graph(e->g);
    return CUDA_SUCCESS;
}
static CUresult reg_exec_destroy(CUgraphExec he) {
    struct rexec *e = rexec_of(he);
    if (!e) return cuGraphExecDestroy(he);
    e->magic = 0;
    pthread_mutex_lock(&lock); drop_refs(e->g); pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}
static CUresult reg_upload(CUgraphExec he, CUstream s) {
    if (!rexec_of(he)) return cuGraphUpload(he, s);
    return fake_cuda_stream_device(s) < 0 ? CUDA_ERROR_INVALID_HANDLE : CUDA_SUCCESS;
}
static CUresult reg_dot(CUgraph hg, const char *path, unsigned int flags) {
    struct rgraph *g = rgraph_of(hg);
    if (!g) return cuGraphDebugDotPrint(hg, path, flags);
    FILE *f = fopen(path, "w");
    if (!f) return CUDA_ERROR_OPERATING_SYSTEM;
    fprintf(f, "digraph dot {\n");
    for (size_t i = 0; i < g->n; i++) fprintf(f, "  n%zu [label=\"type %d\"];\n", i, (int)g->nodes[i]->type);
    fprintf(f, "}\n");
    fclose(f);
    return CUDA_SUCCESS;
}
static CUresult reg_update(CUgraphExec he, CUgraph hg, CUgraphExecUpdateResultInfo *info) {
    struct rexec *e = rexec_of(he);
    struct rgraph *g = rgraph_of(hg);
    if (!e && !g) return cuGraphExecUpdate(he, hg, info);
    if (!e || !g || !info) return CUDA_ERROR_INVALID_VALUE;
    memset(info, 0, sizeof *info);
    int same = e->g->n == g->n && e->g->ne == g->ne;
    for (size_t i = 0; same && i < g->n; i++) same = e->g->nodes[i]->type == g->nodes[i]->type;
    if (!same) { info->result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED; return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE; }
    pthread_mutex_lock(&lock); e->g = clone_graph(g); pthread_mutex_unlock(&lock);
    info->result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
    return CUDA_SUCCESS;
}

/* ---- executable-graph node parameters: the node's copy in the executable graph takes them ---- */
static struct rnode *exec_node(CUgraphExec he, CUgraphNode h, CUgraphNodeType type) {
    struct rexec *e = rexec_of(he);
    struct rnode *n = rnode_of(h);
    if (!e || !n || n->type != type) return NULL;
    struct rgraph *src = n->g;
    for (size_t i = 0; i < src->n; i++)
        if (src->nodes[i] == n && i < e->g->n && e->g->nodes[i]->type == type) return e->g->nodes[i];
    return NULL;
}
CUresult cuGraphNodeSetEnabled(CUgraphExec he, CUgraphNode h, unsigned int on) {
    struct rnode *n = rnode_of(h);
    struct rnode *copy = n ? exec_node(he, h, n->type) : NULL;
    if (!copy) return CUDA_ERROR_INVALID_VALUE;
    copy->disabled = !on;
    return CUDA_SUCCESS;
}
CUresult cuGraphNodeGetEnabled(CUgraphExec he, CUgraphNode h, unsigned int *on) {
    struct rnode *n = rnode_of(h);
    struct rnode *copy = n ? exec_node(he, h, n->type) : NULL;
    if (!copy || !on) return CUDA_ERROR_INVALID_VALUE;
    *on = !copy->disabled;
    return CUDA_SUCCESS;
}
CUresult cuGraphExecKernelNodeSetParams(CUgraphExec he, CUgraphNode h, const CUDA_KERNEL_NODE_PARAMS *p) {
    struct rnode *n = exec_node(he, h, CU_GRAPH_NODE_TYPE_KERNEL);
    if (!n || !p) return CUDA_ERROR_INVALID_VALUE;
    keep_args(n, p); return CUDA_SUCCESS;
}
CUresult cuGraphExecMemsetNodeSetParams(CUgraphExec he, CUgraphNode h, const CUDA_MEMSET_NODE_PARAMS *p, CUcontext c) {
    (void)c;
    struct rnode *n = exec_node(he, h, CU_GRAPH_NODE_TYPE_MEMSET);
    if (!n || !p) return CUDA_ERROR_INVALID_VALUE;
    n->memset = *p; return CUDA_SUCCESS;
}
CUresult cuGraphExecMemcpyNodeSetParams(CUgraphExec he, CUgraphNode h, const CUDA_MEMCPY3D *p, CUcontext c) {
    (void)c;
    struct rnode *n = exec_node(he, h, CU_GRAPH_NODE_TYPE_MEMCPY);
    if (!n || !p) return CUDA_ERROR_INVALID_VALUE;
    n->memcpy = *p; return CUDA_SUCCESS;
}
CUresult cuGraphExecChildGraphNodeSetParams(CUgraphExec he, CUgraphNode h, CUgraph child) {
    struct rnode *n = exec_node(he, h, CU_GRAPH_NODE_TYPE_GRAPH);
    struct rgraph *c = rgraph_of(child);
    if (!n || !c) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock); n->child = clone_graph(c); pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}
CUresult cuGraphExecEventRecordNodeSetEvent(CUgraphExec he, CUgraphNode h, CUevent ev) {
    struct rnode *n = exec_node(he, h, CU_GRAPH_NODE_TYPE_EVENT_RECORD);
    if (!n || !ev) return CUDA_ERROR_INVALID_VALUE;
    n->event = ev; return CUDA_SUCCESS;
}
CUresult cuGraphExecEventWaitNodeSetEvent(CUgraphExec he, CUgraphNode h, CUevent ev) {
    struct rnode *n = exec_node(he, h, CU_GRAPH_NODE_TYPE_WAIT_EVENT);
    if (!n || !ev) return CUDA_ERROR_INVALID_VALUE;
    n->event = ev; return CUDA_SUCCESS;
}
CUresult cuGraphExecHostNodeSetParams(CUgraphExec he, CUgraphNode h, const CUDA_HOST_NODE_PARAMS *p) {
    struct rnode *n = exec_node(he, h, CU_GRAPH_NODE_TYPE_HOST);
    if (!n || !p || !p->fn) return CUDA_ERROR_INVALID_VALUE;
    n->host = *p; return CUDA_SUCCESS;
}

static const struct fake_cuda_symbol symbols[] = {
    {"cuGraphCreate", (void *)cuGraphCreate}, {"cuGraphAddEmptyNode", (void *)cuGraphAddEmptyNode},
    {"cuGraphAddKernelNode", (void *)cuGraphAddKernelNode}, {"cuGraphKernelNodeGetParams", (void *)cuGraphKernelNodeGetParams},
    {"cuGraphAddMemAllocNode", (void *)cuGraphAddMemAllocNode},
    {"cuGraphMemAllocNodeGetParams", (void *)cuGraphMemAllocNodeGetParams},
    {"cuGraphAddMemFreeNode", (void *)cuGraphAddMemFreeNode}, {"cuGraphMemFreeNodeGetParams", (void *)cuGraphMemFreeNodeGetParams},
    {"cuGraphAddMemsetNode", (void *)cuGraphAddMemsetNode}, {"cuGraphMemsetNodeGetParams", (void *)cuGraphMemsetNodeGetParams},
    {"cuGraphAddMemcpyNode", (void *)cuGraphAddMemcpyNode}, {"cuGraphMemcpyNodeGetParams", (void *)cuGraphMemcpyNodeGetParams},
    {"cuGraphAddChildGraphNode", (void *)cuGraphAddChildGraphNode},
    {"cuGraphChildGraphNodeGetGraph", (void *)cuGraphChildGraphNodeGetGraph},
    {"cuGraphAddEventRecordNode", (void *)cuGraphAddEventRecordNode},
    {"cuGraphEventRecordNodeGetEvent", (void *)cuGraphEventRecordNodeGetEvent},
    {"cuGraphAddEventWaitNode", (void *)cuGraphAddEventWaitNode},
    {"cuGraphEventWaitNodeGetEvent", (void *)cuGraphEventWaitNodeGetEvent},
    {"cuGraphAddHostNode", (void *)cuGraphAddHostNode}, {"cuGraphAddNode", (void *)cuGraphAddNode},
    {"cuGraphHostNodeGetParams", (void *)cuGraphHostNodeGetParams},
    {"cuGraphConditionalHandleCreate", (void *)cuGraphConditionalHandleCreate},
    {"cuGraphNodeGetType", (void *)cuGraphNodeGetType}, {"cuGraphGetEdges", (void *)cuGraphGetEdges},
    {"cuGraphNodeGetDependencies", (void *)cuGraphNodeGetDependencies},
    {"cuGraphNodeGetDependentNodes", (void *)cuGraphNodeGetDependentNodes},
    {"cuGraphAddDependencies", (void *)cuGraphAddDependencies},
    {"cuGraphRemoveDependencies", (void *)cuGraphRemoveDependencies}, {"cuGraphDestroyNode", (void *)cuGraphDestroyNode},
    {"cuMemcpyDtoH", (void *)cuMemcpyDtoH}, {"cuMemcpyHtoD", (void *)cuMemcpyHtoD},
    {"cuGraphClone", (void *)cuGraphClone}, {"cuGraphGetNodes", (void *)reg_get_nodes}, {"cuGraphDestroy", (void *)reg_destroy},
    {"cuGraphInstantiate", (void *)reg_instantiate}, {"cuGraphInstantiateWithFlags", (void *)reg_instantiate},
    {"cuGraphLaunch", (void *)reg_launch}, {"cuGraphExecDestroy", (void *)reg_exec_destroy},
    {"cuGraphUpload", (void *)reg_upload}, {"cuGraphDebugDotPrint", (void *)reg_dot},
    {"cuGraphExecUpdate", (void *)reg_update},
    {"cuGraphKernelNodeSetParams", (void *)cuGraphKernelNodeSetParams},
    {"cuGraphMemsetNodeSetParams", (void *)cuGraphMemsetNodeSetParams},
    {"cuGraphMemcpyNodeSetParams", (void *)cuGraphMemcpyNodeSetParams},
    {"cuGraphEventRecordNodeSetEvent", (void *)cuGraphEventRecordNodeSetEvent},
    {"cuGraphEventWaitNodeSetEvent", (void *)cuGraphEventWaitNodeSetEvent},
    {"cuGraphHostNodeSetParams", (void *)cuGraphHostNodeSetParams},
    {"cuGraphNodeSetEnabled", (void *)cuGraphNodeSetEnabled}, {"cuGraphNodeGetEnabled", (void *)cuGraphNodeGetEnabled},
    {"cuGraphExecKernelNodeSetParams", (void *)cuGraphExecKernelNodeSetParams},
    {"cuGraphExecMemsetNodeSetParams", (void *)cuGraphExecMemsetNodeSetParams},
    {"cuGraphExecMemcpyNodeSetParams", (void *)cuGraphExecMemcpyNodeSetParams},
    {"cuGraphExecChildGraphNodeSetParams", (void *)cuGraphExecChildGraphNodeSetParams},
    {"cuGraphExecEventRecordNodeSetEvent", (void *)cuGraphExecEventRecordNodeSetEvent},
    {"cuGraphExecEventWaitNodeSetEvent", (void *)cuGraphExecEventWaitNodeSetEvent},
    {"cuGraphExecHostNodeSetParams", (void *)cuGraphExecHostNodeSetParams},
};

__attribute__((constructor)) static void register_symbols(void) {
    fake_cuda_add_symbols(symbols, sizeof symbols / sizeof *symbols);
}
