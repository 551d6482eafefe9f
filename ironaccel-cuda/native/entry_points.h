/* Every driver entry point the compiled core calls, written down once.
 *
 *   X(name, abi, kind, (parameters))
 *
 * name  the cuda.h symbol, also the name errors report (`op`);
 * abi   the ABI version of the prototype: the suffix of cudaTypedefs.h's PFN_<name>_v<abi>, and the version
 *       asked of cuGetProcAddress, which returns exactly that ABI (a driver older than `abi` is not asked: it
 *       would return its own older prototype, so the entry point stays unbound and calling it is Unsupported);
 * kind  CALL, or RELEASE for calls that give something back: in a forked child a release does nothing and
 *       succeeds, every other call fails (see driver.c);
 * (parameters)  the prototype's parameter list, with cuda.h's type names (cuda_shim.h or cuda.h).
 *
 * driver.h makes the function-pointer table, driver.c the stubs, names and ABI versions, and setup.py the
 * Cython declarations (`_entry_points.pxi`) from this list; tests/native/check_headers.c checks every
 * prototype against cuda.h.  To add an entry point: add one line here, rebuild, call it from Cython as
 * `cuName(...)` and report failures with `_again(err, IA_cuName, ...)`.
 */
#define IA_ENTRY_POINTS(X) \
    X(cuStreamSynchronize, 2000, CALL, (CUstream hStream)) \
    X(cuStreamQuery, 2000, CALL, (CUstream hStream)) \
    X(cuStreamWaitEvent, 3020, CALL, (CUstream hStream, CUevent hEvent, unsigned int Flags)) \
    X(cuStreamGetCtx, 9020, CALL, (CUstream hStream, CUcontext *pctx)) \
    X(cuStreamIsCapturing, 10000, CALL, (CUstream hStream, CUstreamCaptureStatus *captureStatus)) \
    X(cuLaunchHostFunc, 10000, CALL, (CUstream hStream, CUhostFn fn, void *userData)) \
    X(cuCtxSetCurrent, 4000, CALL, (CUcontext ctx)) \
    X(cuCtxGetCurrent, 4000, CALL, (CUcontext *pctx)) \
    X(cuEventCreate, 2000, CALL, (CUevent *phEvent, unsigned int Flags)) \
    X(cuEventDestroy, 4000, RELEASE, (CUevent hEvent)) \
    X(cuEventRecord, 2000, CALL, (CUevent hEvent, CUstream hStream)) \
    X(cuEventSynchronize, 2000, CALL, (CUevent hEvent)) \
    X(cuEventQuery, 2000, CALL, (CUevent hEvent)) \
    X(cuMemAllocAsync, 11020, CALL, (CUdeviceptr *dptr, size_t bytesize, CUstream hStream)) \
    X(cuMemAllocFromPoolAsync, 11020, CALL, (CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, \
                                             CUstream hStream)) \
    X(cuMemFreeAsync, 11020, RELEASE, (CUdeviceptr dptr, CUstream hStream)) \
    X(cuMemPoolImportPointer, 11020, CALL, (CUdeviceptr *ptr_out, CUmemoryPool pool, \
                                            CUmemPoolPtrExportData *shareData)) \
    X(cuMemAlloc, 3020, CALL, (CUdeviceptr *dptr, size_t bytesize)) \
    X(cuMemFree, 3020, RELEASE, (CUdeviceptr dptr)) \
    X(cuMemHostGetFlags, 2030, CALL, (unsigned int *pFlags, void *p)) \
    X(cuMemcpyHtoDAsync, 3020, CALL, (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, \
                                      CUstream hStream)) \
    X(cuMemcpyDtoHAsync, 3020, CALL, (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream)) \
    X(cuMemcpyBatchAsync, 13000, CALL, (CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count, \
                                        CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs, \
                                        CUstream hStream)) \
    X(cuMemcpyDtoDAsync, 3020, CALL, (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount, \
                                      CUstream hStream)) \
    X(cuMemsetD8Async, 3020, CALL, (CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream)) \
    X(cuMemsetD16Async, 3020, CALL, (CUdeviceptr dstDevice, unsigned short us, size_t N, CUstream hStream)) \
    X(cuMemsetD32Async, 3020, CALL, (CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream)) \
    X(cuLaunchKernel, 4000, CALL, (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, \
                                   unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY, \
                                   unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream, \
                                   void **kernelParams, void **extra)) \
    X(cuLaunchKernelEx, 11060, CALL, (const CUlaunchConfig *config, CUfunction f, void **kernelParams, \
                                      void **extra)) \
    X(cuGraphLaunch, 10000, CALL, (CUgraphExec hGraphExec, CUstream hStream)) \
    X(cuStreamWriteValue32, 11070, CALL, (CUstream stream, CUdeviceptr addr, unsigned int value, \
                                          unsigned int flags)) \
    X(cuUserObjectCreate, 11030, CALL, (CUuserObject *object_out, void *ptr, CUhostFn destroy, \
                                        unsigned int initialRefcount, unsigned int flags)) \
    X(cuUserObjectRelease, 11030, RELEASE, (CUuserObject object, unsigned int count)) \
    X(cuGraphRetainUserObject, 11030, CALL, (CUgraph graph, CUuserObject object, unsigned int count, \
                                             unsigned int flags)) \
    X(cuGraphReleaseUserObject, 11030, RELEASE, (CUgraph graph, CUuserObject object, unsigned int count))
