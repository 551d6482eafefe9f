/* Compile-time check of the compiled core's declarations against the real cuda.h (a CUDA toolkit's headers).
 * Built by tests/native/test_native.py where cuda.h exists; it compiles only if every entry point's prototype in
 * native/entry_points.h is the one cudaTypedefs.h gives for that ABI version, and every type and struct of
 * native/cuda_shim.h has cuda.h's size and layout. */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <stddef.h>

#define IA_SHIM(name) ia_shim_##name
#include "cuda_shim.h"
#include "entry_points.h"

#define SAME(a, b) _Static_assert(__builtin_types_compatible_p(a, b), #a " is not " #b)
#define CHECK_ENTRY(name, abi, kind, params) SAME(CUresult (*) params, PFN_##name##_v##abi);
IA_ENTRY_POINTS(CHECK_ENTRY)

SAME(ia_shim_CUcontext, CUcontext);
SAME(ia_shim_CUstream, CUstream);
SAME(ia_shim_CUevent, CUevent);
SAME(ia_shim_CUfunction, CUfunction);
SAME(ia_shim_CUgraphExec, CUgraphExec);
SAME(ia_shim_CUgraph, CUgraph);
SAME(ia_shim_CUuserObject, CUuserObject);
SAME(ia_shim_CUmemoryPool, CUmemoryPool);
SAME(ia_shim_CUdeviceptr, CUdeviceptr);
SAME(ia_shim_CUdevice, CUdevice);
_Static_assert(sizeof(ia_shim_CUresult) == sizeof(CUresult), "CUresult size");
_Static_assert(sizeof(ia_shim_CUstreamCaptureStatus) == sizeof(CUstreamCaptureStatus), "capture status size");
_Static_assert((int)CU_STREAM_CAPTURE_STATUS_NONE == 0 && (int)CU_STREAM_CAPTURE_STATUS_ACTIVE == 1, "capture status");
SAME(ia_shim_CUhostFn, CUhostFn);

#define SAME_FIELD(ours, theirs, field) \
    _Static_assert(offsetof(ours, field) == offsetof(theirs, field), #field " offset"); \
    _Static_assert(sizeof(((ours *)0)->field) == sizeof(((theirs *)0)->field), #field " size")
_Static_assert(sizeof(ia_shim_CUmemPoolPtrExportData) == sizeof(CUmemPoolPtrExportData), "export data size");
_Static_assert(sizeof(ia_shim_CUmemLocation) == sizeof(CUmemLocation), "CUmemLocation size");
SAME_FIELD(ia_shim_CUmemLocation, CUmemLocation, type);
SAME_FIELD(ia_shim_CUmemLocation, CUmemLocation, id);
_Static_assert(sizeof(ia_shim_CUmemcpyAttributes) == sizeof(CUmemcpyAttributes), "CUmemcpyAttributes size");
SAME_FIELD(ia_shim_CUmemcpyAttributes, CUmemcpyAttributes, srcAccessOrder);
SAME_FIELD(ia_shim_CUmemcpyAttributes, CUmemcpyAttributes, srcLocHint);
SAME_FIELD(ia_shim_CUmemcpyAttributes, CUmemcpyAttributes, dstLocHint);
SAME_FIELD(ia_shim_CUmemcpyAttributes, CUmemcpyAttributes, flags);
_Static_assert(sizeof(ia_shim_CUlaunchConfig) == sizeof(CUlaunchConfig), "CUlaunchConfig size");
SAME_FIELD(ia_shim_CUlaunchConfig, CUlaunchConfig, gridDimX);
SAME_FIELD(ia_shim_CUlaunchConfig, CUlaunchConfig, blockDimZ);
SAME_FIELD(ia_shim_CUlaunchConfig, CUlaunchConfig, sharedMemBytes);
SAME_FIELD(ia_shim_CUlaunchConfig, CUlaunchConfig, hStream);
SAME_FIELD(ia_shim_CUlaunchConfig, CUlaunchConfig, attrs);
SAME_FIELD(ia_shim_CUlaunchConfig, CUlaunchConfig, numAttrs);
_Static_assert(sizeof(ia_shim_CUlaunchAttribute) == sizeof(CUlaunchAttribute), "CUlaunchAttribute size");
SAME_FIELD(ia_shim_CUlaunchAttribute, CUlaunchAttribute, id);
SAME_FIELD(ia_shim_CUlaunchAttribute, CUlaunchAttribute, value);
_Static_assert(sizeof(ia_shim_CUlaunchAttributeValue) == sizeof(CUlaunchAttributeValue), "value union size");
SAME_FIELD(ia_shim_CUlaunchAttributeValue, CUlaunchAttributeValue, cooperative);
SAME_FIELD(ia_shim_CUlaunchAttributeValue, CUlaunchAttributeValue, clusterDim);
SAME_FIELD(ia_shim_CUlaunchAttributeValue, CUlaunchAttributeValue, clusterSchedulingPolicyPreference);
SAME_FIELD(ia_shim_CUlaunchAttributeValue, CUlaunchAttributeValue, programmaticStreamSerializationAllowed);
SAME_FIELD(ia_shim_CUlaunchAttributeValue, CUlaunchAttributeValue, priority);
SAME_FIELD(ia_shim_CUlaunchAttributeValue, CUlaunchAttributeValue, preferredClusterDim);
_Static_assert((int)IA_LAUNCH_ATTRIBUTE_COOPERATIVE == (int)CU_LAUNCH_ATTRIBUTE_COOPERATIVE, "attribute id");
_Static_assert((int)IA_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION == (int)CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, "attribute id");
_Static_assert((int)IA_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE == (int)CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE, "attribute id");
_Static_assert((int)IA_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION == (int)CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, "attribute id");
_Static_assert((int)IA_LAUNCH_ATTRIBUTE_PRIORITY == (int)CU_LAUNCH_ATTRIBUTE_PRIORITY, "attribute id");
_Static_assert((int)IA_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION == (int)CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION,
               "attribute id");
_Static_assert((int)IA_CLUSTER_SCHEDULING_SPREAD == (int)CU_CLUSTER_SCHEDULING_POLICY_SPREAD, "policy");
_Static_assert((int)IA_CLUSTER_SCHEDULING_LOAD_BALANCING == (int)CU_CLUSTER_SCHEDULING_POLICY_LOAD_BALANCING, "policy");

int main(void) { return 0; }
