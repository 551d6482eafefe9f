from hip import hip

def test_smoke():
    print(hip.hipGetDeviceCount())
    err, props = hip.hipGetDeviceProperties(0)
    print(err, props.name, props.gcnArchName, props.totalGlobalMem, props.warpSize)
    err, p = hip.hipMalloc(64)
    print(err, p)
    err, s = hip.hipStreamCreateWithPriority(0, -1)
    print(err, s)
    print(hip.hipStreamQuery(s), hip.hipStreamDestroy(s), hip.hipStreamDestroy(s))
