/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/fuzz/fuzz_dra.c - what the DRA plugin reads from outside (kubelet/draapi.c,
 * controllers/dra/draprep.c) on arbitrary bytes. The first byte picks: 0/1 a
 * NodePrepareResourcesRequest / NodeUnprepareResourcesRequest from kubelet, 2 a
 * RegistrationStatus, 3 a ResourceClaim as the API server sends it (JSON), 4 the plugin's
 * checkpoint file. Checks what is accepted: claims within the caps, fields non-empty and without
 * '/'; they encode back; a parsed claim's devices are valid PCI addresses and its CDI spec and
 * metadata files can be made; an accepted checkpoint's entries read back.
 */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "controllers/dra/draprep.h"
#include "kubelet/draapi.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_claims(const struct draapi_claims *c, bool prepare)
{
    struct buf b;
    if (c->n > DRAAPI_MAX_CLAIMS)
        abort();
    for (size_t i = 0; i < c->n; i++)
        if (!c->v[i].uid[0] || strchr(c->v[i].namespace_, '/') || strchr(c->v[i].name, '/') ||
            strlen(c->v[i].uid) > DRAAPI_MAX_FIELD)
            abort();
    buf_init(&b, 1u << 24);
    if (draapi_encode_claims(c->v, c->n, prepare, &b) < 0)
        abort();
    buf_free(&b);
}

static void check_claim(const char *text, size_t len)
{
    cJSON *j = NULL;
    struct err e = {""};
    struct draprep_claim c;
    if (json_parse_strict(text, len, &j, &e) < 0)
        return;
    const char *uid = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(j, "metadata"), "uid"));
    if (draprep_parse(j, uid ? uid : "u", "vfio-pci.hostdevd.io", "n", &c, &e) == 0) {
        int groups[DRAPREP_MAX_DEVICES];
        char a[20];
        for (size_t i = 0; i < c.n; i++) {
            if (draprep_address(c.devices[i].name, a, sizeof(a)) < 0 ||
                strcmp(a, c.devices[i].address) != 0)
                abort();
            groups[i] = (int)i;
        }
        cJSON *spec = draprep_cdi_spec(&c, groups, "/dev", "/m");
        cJSON *m = c.n ? draprep_metadata(&c, "r", "vfio-pci.hostdevd.io", "n", NULL) : NULL;
        if (!spec)
            abort();
        cJSON_Delete(spec);
        cJSON_Delete(m);
        draprep_claim_done(&c);
    }
    cJSON_Delete(j);
}

static void check_checkpoint(const char *text)
{
    cJSON *ck = NULL, *e;
    struct err err = {""};
    if (draprep_checkpoint_parse(text, &ck, &err) < 0)
        return;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(ck, "claims"))
    {
        struct draprep_claim c;
        const char **orig = NULL;
        int *groups = NULL;
        if (draprep_checkpoint_entry(e, e->string, &c, &orig, &groups) < 0)
            abort(); /* parse accepted it */
        free(orig);
        free(groups);
        draprep_claim_done(&c);
    }
    cJSON_Delete(ck);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct err e = {""};
    if (size == 0)
        return 0;
    const uint8_t *msg = data + 1;
    size_t len = size - 1;
    if (data[0] <= 1) {
        struct draapi_claims c;
        if (draapi_decode_claims(msg, len, data[0] == 0, &c, &e) == 0) {
            check_claims(&c, data[0] == 0);
            draapi_claims_done(&c);
        }
    } else if (data[0] == 2) {
        bool ok;
        char why[64];
        (void)regapi_decode_status(msg, len, &ok, why, sizeof(why), &e);
    } else {
        char *text = malloc(len + 1);
        if (!text)
            return 0;
        memcpy(text, msg, len);
        text[len] = '\0';
        if (data[0] == 3)
            check_claim(text, len);
        else
            check_checkpoint(text);
        free(text);
    }
    return 0;
}
