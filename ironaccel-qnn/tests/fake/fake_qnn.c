/* Stand-ins for libQnnHtp.so (-DSYSTEM=0) and libQnnSystem.so (-DSYSTEM=1), written from
 * QnnInterface.h / QnnSystemInterface.h: the providers entry point and the stable head of
 * QnnInterface_t, followed by a function table the probe never reads.
 * FAKE_QNN_MODE: "ok" (one HTP provider), "none" (no provider), "error" (INCOMPATIBLE_BINARIES). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef uint64_t Qnn_ErrorHandle_t;
typedef struct { uint32_t major, minor, patch; } Qnn_Version_t;
typedef struct { Qnn_Version_t coreApiVersion, backendApiVersion; } Qnn_ApiVersion_t;
typedef struct {
    uint32_t backendId;
    const char* providerName;
    Qnn_ApiVersion_t apiVersion;
    void* table[64];
} Interface_t;

static Interface_t provider = {6, "HTP_QTI_AISW", {{2, 14, 0}, {5, 14, 0}}, {0}};
static const Interface_t* list[] = {&provider};
static const char* mode(void) { const char* m = getenv("FAKE_QNN_MODE"); return m ? m : "ok"; }

static Qnn_ErrorHandle_t get(const Interface_t*** out, uint32_t* n) {
    if (!out || !n) return 1004;
    if (strcmp(mode(), "error") == 0) return (0x1234ull << 16) | 1008; /* high bits are tracking data */
    if (strcmp(mode(), "none") == 0) { *out = NULL; *n = 0; return 0; }
    *out = list;
    *n = 1;
    return 0;
}

#if SYSTEM
Qnn_ErrorHandle_t QnnSystemInterface_getProviders(const Interface_t*** out, uint32_t* n) { return get(out, n); }
#else
Qnn_ErrorHandle_t QnnInterface_getProviders(const Interface_t*** out, uint32_t* n) { return get(out, n); }
Qnn_ErrorHandle_t QnnBackend_getBuildId(const char** id) { *id = "v2.20.0.240223"; return 0; }
#endif
