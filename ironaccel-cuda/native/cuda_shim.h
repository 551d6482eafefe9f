/* The cuda.h types the compiled core uses, so that building it needs no CUDA headers.
 *
 * The handles are pointers to opaque structs with cuda.h's own tags, and the scalars have cuda.h's sizes, so
 * a prototype written with these names means exactly what cuda.h's does.  The structs are copied field by
 * field.  tests/native/check_headers.c includes this file beside the real cuda.h (with IA_SHIM(name) renaming
 * every type) and checks every size, offset and entry-point prototype against it.
 */
#ifndef IRONACCEL_CUDA_SHIM_H
#define IRONACCEL_CUDA_SHIM_H

#include <stddef.h>

#ifndef IA_SHIM
#define IA_SHIM(name) name
#endif

typedef int IA_SHIM(CUresult);
typedef int IA_SHIM(CUdevice);
typedef unsigned long long IA_SHIM(CUdeviceptr);
typedef struct CUctx_st *IA_SHIM(CUcontext);
typedef struct CUstream_st *IA_SHIM(CUstream);
typedef struct CUevent_st *IA_SHIM(CUevent);
typedef struct CUfunc_st *IA_SHIM(CUfunction);
typedef struct CUgraphExec_st *IA_SHIM(CUgraphExec);
typedef struct CUgraph_st *IA_SHIM(CUgraph);
typedef struct CUuserObject_st *IA_SHIM(CUuserObject);
typedef struct CUmemPoolHandle_st *IA_SHIM(CUmemoryPool);
typedef int IA_SHIM(CUstreamCaptureStatus);  /* an enum in cuda.h: 0 none, 1 active, 2 invalidated */
typedef void (*IA_SHIM(CUhostFn))(void *userData);

/* cuMemPoolExportPointer's 64 opaque bytes, which cuMemPoolImportPointer takes back. */
typedef struct { unsigned char reserved[64]; } IA_SHIM(CUmemPoolPtrExportData);

/* cuMemcpyBatchAsync's per-run copy attributes: a source access order, two location hints (CUmemLocation: a
 * type and an id) and flags. */
typedef struct { int type; int id; } IA_SHIM(CUmemLocation);
typedef struct {
    int srcAccessOrder;
    IA_SHIM(CUmemLocation) srcLocHint;
    IA_SHIM(CUmemLocation) dstLocHint;
    unsigned int flags;
} IA_SHIM(CUmemcpyAttributes);

/* cuLaunchKernelEx: CUlaunchAttribute is an id padded to 8 bytes and a 64-byte value union. */
typedef struct { unsigned int x, y, z; } IA_SHIM(ia_dim3);

typedef union {
    char pad[64];
    int cooperative;
    IA_SHIM(ia_dim3) clusterDim;
    int clusterSchedulingPolicyPreference;
    int programmaticStreamSerializationAllowed;
    int priority;
    IA_SHIM(ia_dim3) preferredClusterDim;
} IA_SHIM(CUlaunchAttributeValue);

typedef struct {
    int id;
    char pad[4];
    IA_SHIM(CUlaunchAttributeValue) value;
} IA_SHIM(CUlaunchAttribute);

typedef struct {
    unsigned int gridDimX, gridDimY, gridDimZ;
    unsigned int blockDimX, blockDimY, blockDimZ;
    unsigned int sharedMemBytes;
    IA_SHIM(CUstream) hStream;
    IA_SHIM(CUlaunchAttribute) *attrs;
    unsigned int numAttrs;
} IA_SHIM(CUlaunchConfig);

enum {
    IA_LAUNCH_ATTRIBUTE_COOPERATIVE = 2,
    IA_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4,
    IA_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE = 5,
    IA_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6,
    IA_LAUNCH_ATTRIBUTE_PRIORITY = 8,
    IA_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION = 11,
    IA_CLUSTER_SCHEDULING_SPREAD = 1,
    IA_CLUSTER_SCHEDULING_LOAD_BALANCING = 2,
};

#endif
