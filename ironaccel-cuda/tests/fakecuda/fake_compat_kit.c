/* Stream capture into given graphs, conditional nodes and child graph nodes for the fake libcuda: what the
 * cuda.core compat's GraphBuilder calls (if_then / if_else / switch / while_loop, embed).
 *
 * Registered through fake_cuda_add_symbols, so cuStreamGetCaptureInfo here replaces fake_exec.c's: it reports
 * the graph a capturing stream records into.  Streams are read through the fields fake_cuda.c gives them
 * (magic, device, flags, priority, capturing, graph).  A conditional node's bodies are empty graphs made by
 * fake_cuda.c's own capture (an empty capture on a scratch stream), returned in an array the fake owns, as the
 * driver does (phGraph_out is an output); a capture into one of them records there.
 * The fake's graphs hold kernel and memset nodes only: conditional and child nodes are checked and counted,
 * never run, so a graph launch runs the parent graph's own kernels.  Bodies live as long as the process.
 */
#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h"

#define KIT_MAGIC_STREAM 0x5354524dU
#define KIT_MAX_NODES 4096

struct kit_stream_prefix { unsigned magic; int dev; unsigned flags; int prio; int capturing; void *g; };

static pthread_mutex_t kit_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long long kit_next_handle = 1;
static int kit_nodes[KIT_MAX_NODES];  /* node handles: addresses of these cells */
static int kit_nnodes = 0;

static struct kit_stream_prefix *kit_stream(CUstream h, CUresult *err) {
    *err = fake_cuda_check();
    if (*err) return NULL;
    if (h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) { *err = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; return NULL; }
    if (fake_cuda_stream_device(h) < 0) { *err = CUDA_ERROR_INVALID_HANDLE; return NULL; }
    struct kit_stream_prefix *s = (struct kit_stream_prefix *)h;
    if (s->magic != KIT_MAGIC_STREAM) { *err = CUDA_ERROR_INVALID_HANDLE; return NULL; }
    return s;
}

static CUgraphNode kit_new_node(void) {
    pthread_mutex_lock(&kit_lock);
    CUgraphNode node = kit_nnodes < KIT_MAX_NODES ? (CUgraphNode)&kit_nodes[kit_nnodes++] : NULL;
    pthread_mutex_unlock(&kit_lock);
    return node;
}

static CUresult kit_get_capture_info(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *graph,
                                     const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *ndeps) {
    if (!st) return CUDA_ERROR_INVALID_VALUE;
    CUresult err = cuStreamIsCapturing(h, st);
    if (err) return err;
    void *g = NULL;
    if (*st == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
        struct kit_stream_prefix *s = kit_stream(h, &err);
        if (!s) return err;
        g = s->g;
    }
    if (id) *id = (cuuint64_t)(uintptr_t)h;
    if (graph) *graph = (CUgraph)g;
    if (deps) *deps = NULL;
    if (edges) *edges = NULL;
    if (ndeps) *ndeps = 0;
    return CUDA_SUCCESS;
}

static CUresult kit_begin_capture_to_graph(CUstream h, CUgraph graph, const CUgraphNode *deps,
                                           const CUgraphEdgeData *edges, size_t ndeps, CUstreamCaptureMode mode) {
    CUresult err;
    struct kit_stream_prefix *s = kit_stream(h, &err);
    if (!s) return err;
    if (!graph || (ndeps && !deps) || mode > CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_ERROR_INVALID_VALUE;
    CUgraphNode *nodes = NULL;
    size_t n = 0;
    if ((err = cuGraphGetNodes(graph, nodes, &n))) return err;  /* a graph of fake_cuda.c's */
    if (s->capturing) return CUDA_ERROR_ILLEGAL_STATE;
    s->g = (void *)graph;
    s->capturing = 1;
    return CUDA_SUCCESS;
}

static CUresult kit_update_capture_dependencies(CUstream h, CUgraphNode *deps, const CUgraphEdgeData *edges,
                                                size_t ndeps, unsigned int flags) {
    CUresult err;
    struct kit_stream_prefix *s = kit_stream(h, &err);
    if (!s) return err;
    if (!s->capturing) return CUDA_ERROR_ILLEGAL_STATE;
    if ((ndeps && !deps) || flags > CU_STREAM_SET_CAPTURE_DEPENDENCIES) return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

static CUresult kit_conditional_handle_create(CUgraphConditionalHandle *out, CUgraph graph, CUcontext ctx,
                                              unsigned int value, unsigned int flags) {
    size_t n = 0;
    CUresult err;
    if (!out || !ctx || flags > CU_GRAPH_COND_ASSIGN_DEFAULT) return CUDA_ERROR_INVALID_VALUE;
    if ((err = cuGraphGetNodes(graph, NULL, &n))) return err;
    pthread_mutex_lock(&kit_lock);
    *out = kit_next_handle++;
    pthread_mutex_unlock(&kit_lock);
    return CUDA_SUCCESS;
}

static CUresult kit_empty_graph(CUgraph *out) {
    CUstream scratch;
    CUresult err = cuStreamCreate(&scratch, CU_STREAM_NON_BLOCKING);
    if (err) return err;
    if (!(err = cuStreamBeginCapture(scratch, CU_STREAM_CAPTURE_MODE_RELAXED))) err = cuStreamEndCapture(scratch, out);
    cuStreamDestroy(scratch);
    return err;
}

static CUresult kit_add_node(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps, const CUgraphEdgeData *edges,
                             size_t ndeps, CUgraphNodeParams *params) {
    size_t n = 0;
    CUresult err;
    if (!node || !params || (ndeps && !deps)) return CUDA_ERROR_INVALID_VALUE;
    if ((err = cuGraphGetNodes(graph, NULL, &n))) return err;
    if (params->type != CU_GRAPH_NODE_TYPE_CONDITIONAL) return CUDA_ERROR_NOT_SUPPORTED;
    CUDA_CONDITIONAL_NODE_PARAMS *c = &params->conditional;
    unsigned most = c->type == CU_GRAPH_COND_TYPE_SWITCH ? 1024 : c->type == CU_GRAPH_COND_TYPE_IF ? 2 : 1;
    if (!c->handle || !c->ctx || c->size < 1 || c->size > most) return CUDA_ERROR_INVALID_VALUE;
    CUgraph *bodies = calloc(c->size, sizeof *bodies);  /* the driver's own array: it lives with the node */
    if (!bodies) return CUDA_ERROR_OUT_OF_MEMORY;
    for (unsigned i = 0; i < c->size; i++)
        if ((err = kit_empty_graph(&bodies[i]))) { free(bodies); return err; }
    if (!(*node = kit_new_node())) { free(bodies); return CUDA_ERROR_OUT_OF_MEMORY; }
    c->phGraph_out = bodies;
    return CUDA_SUCCESS;
}

static CUresult kit_add_child_graph_node(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps, size_t ndeps,
                                         CUgraph child) {
    size_t n = 0;
    CUresult err;
    if (!node || (ndeps && !deps)) return CUDA_ERROR_INVALID_VALUE;
    if ((err = cuGraphGetNodes(graph, NULL, &n)) || (err = cuGraphGetNodes(child, NULL, &n))) return err;
    if (graph == child) return CUDA_ERROR_INVALID_VALUE;
    if (!(*node = kit_new_node())) return CUDA_ERROR_OUT_OF_MEMORY;
    return CUDA_SUCCESS;
}

static const struct fake_cuda_symbol kit_symbols[] = {
    {"cuStreamGetCaptureInfo", (void *)kit_get_capture_info},
    {"cuStreamBeginCaptureToGraph", (void *)kit_begin_capture_to_graph},
    {"cuStreamUpdateCaptureDependencies", (void *)kit_update_capture_dependencies},
    {"cuGraphConditionalHandleCreate", (void *)kit_conditional_handle_create},
    {"cuGraphAddNode", (void *)kit_add_node},
    {"cuGraphAddChildGraphNode", (void *)kit_add_child_graph_node},
};

__attribute__((constructor)) static void kit_register(void) {
    fake_cuda_add_symbols(kit_symbols, sizeof kit_symbols / sizeof *kit_symbols);
}
