/* A libnrt stand-in: the three calls the probe makes, written from nrt.h's documented signatures.
 * FAKE_NRT_MODE: "ok" (8 cores, 4 visible), "hidden" (8 cores, 0 visible), "nodriver" (counts fail). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint64_t rt_major, rt_minor, rt_patch, rt_maintenance;
    char rt_detail[128];
    char git_hash[64];
} nrt_version_t;

static const char* mode(void) { const char* m = getenv("FAKE_NRT_MODE"); return m ? m : "ok"; }

int nrt_get_version(nrt_version_t* v, size_t size) {
    if (!v || size < sizeof(nrt_version_t)) return 2; /* NRT_INVALID */
    memset(v, 0, sizeof *v);
    v->rt_major = 2; v->rt_minor = 21; v->rt_patch = 41; v->rt_maintenance = 7;
    strcpy(v->rt_detail, "fake runtime");
    strcpy(v->git_hash, "0123abcd");
    return 0;
}

int nrt_get_total_nc_count(uint32_t* n) {
    if (strcmp(mode(), "nodriver") == 0) return 1; /* NRT_FAILURE */
    *n = 8;
    return 0;
}

int nrt_get_visible_nc_count(uint32_t* n) {
    if (strcmp(mode(), "nodriver") == 0) return 1;
    *n = strcmp(mode(), "hidden") == 0 ? 0 : 4;
    return 0;
}
