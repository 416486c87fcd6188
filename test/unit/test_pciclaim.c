/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/unit/test_pciclaim.c - the claim reconciler's pure planning: status patches (nothing
 * written when the status already says it, lastTransitionTime kept) and finalizer patches.
 */
#include <CUnit/CUnit.h>
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "controllers/claims/pciclaim.h"
#include "controllers/objects/pciobj.h"

static cJSON *claim(const char *status, const char *finalizers)
{
    char text[2048];
    (void)snprintf(text, sizeof(text),
                   "{\"metadata\":{\"name\":\"n-000002000\",\"generation\":3,\"uid\":\"u1\","
                   "\"resourceVersion\":\"41\"%s%s},"
                   "\"spec\":{\"address\":\"0000:02:00.0\",\"nodeName\":\"n\"}%s%s}",
                   finalizers ? ",\"finalizers\":" : "", finalizers ? finalizers : "",
                   status ? ",\"status\":" : "", status ? status : "");
    cJSON *o = cJSON_Parse(text);
    CU_ASSERT_PTR_NOT_NULL(o);
    return o;
}

static void test_status_patch(void)
{
    cJSON *c = claim(NULL, NULL);
    struct pciclaim_status want = {.driver = "e1000e", .reason = "Binding", .message = "m"};
    char *p = pciclaim_status_patch(c, &want, "2026-11-21T10:00:00Z");
    CU_ASSERT_PTR_NOT_NULL(p);
    cJSON *pj = cJSON_Parse(p);
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(pj, "status");
    CU_ASSERT_STRING_EQUAL(
            cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(st, "kernelDriverToUnbind")),
            "e1000e");
    CU_ASSERT(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(st, "passthroughEnabled")));
    const cJSON *cond = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(st, "conditions"), 0);
    CU_ASSERT_STRING_EQUAL(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cond, "status")),
                           "False");
    CU_ASSERT_EQUAL(
            cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(cond, "observedGeneration")), 3);
    /* the claim now says it: nothing more to write */
    char *sts = cJSON_PrintUnformatted(st);
    cJSON *c2 = claim(sts, NULL);
    free(sts);
    CU_ASSERT_PTR_NULL(pciclaim_status_patch(c2, &want, "2026-11-21T11:00:00Z"));
    const char *d = NULL;
    CU_ASSERT(pciobj_driver_recorded(c2, &d));
    CU_ASSERT_STRING_EQUAL(d, "e1000e");
    CU_ASSERT(!pciobj_driver_recorded(c, NULL));
    /* a new message with the same status keeps lastTransitionTime */
    struct pciclaim_status w2 = {.reason = "Binding", .message = "other"};
    char *p2 = pciclaim_status_patch(c2, &w2, "2026-11-21T11:00:00Z");
    CU_ASSERT_PTR_NOT_NULL(strstr(p2, "2026-11-21T10:00:00Z"));
    CU_ASSERT_PTR_NULL(strstr(p2, "kernelDriverToUnbind")); /* left as it is */
    /* Ready turning True moves it */
    struct pciclaim_status w3 = {
            .passthrough = true, .ready = true, .reason = "Bound", .message = "b"};
    char *p3 = pciclaim_status_patch(c2, &w3, "2026-11-21T12:00:00Z");
    CU_ASSERT_PTR_NOT_NULL(strstr(p3, "2026-11-21T12:00:00Z"));
    CU_ASSERT_PTR_NOT_NULL(strstr(p3, "\"passthroughEnabled\":true"));
    /* an empty original driver is recorded too, and counts as recorded */
    struct pciclaim_status w4 = {.driver = "", .reason = "Binding", .message = "m"};
    char *p4 = pciclaim_status_patch(c, &w4, "2026-11-21T12:00:00Z");
    CU_ASSERT_PTR_NOT_NULL(strstr(p4, "\"kernelDriverToUnbind\":\"\""));
    cJSON *c4 = claim("{\"kernelDriverToUnbind\":\"\"}", NULL);
    CU_ASSERT(pciobj_driver_recorded(c4, &d));
    CU_ASSERT_STRING_EQUAL(d, "");
    free(p);
    free(p2);
    free(p3);
    free(p4);
    cJSON_Delete(pj);
    cJSON_Delete(c);
    cJSON_Delete(c2);
    cJSON_Delete(c4);
}

static void test_finalizer_patch(void)
{
    cJSON *none = claim(NULL, NULL);
    char *p = pciclaim_finalizer_patch(none, true);
    /* the same object, still without a list; not its resourceVersion (a status write meanwhile
     * is no conflict) */
    CU_ASSERT_PTR_NOT_NULL(strstr(p, "\"path\":\"/metadata/uid\",\"value\":\"u1\""));
    CU_ASSERT_PTR_NOT_NULL(
            strstr(p, "{\"op\":\"test\",\"path\":\"/metadata/finalizers\",\"value\":null}"));
    CU_ASSERT_PTR_NULL(strstr(p, "resourceVersion"));
    CU_ASSERT_PTR_NOT_NULL(strstr(p, "[\"" PCIOBJ_FINALIZER "\"]"));
    CU_ASSERT_PTR_NULL(pciclaim_finalizer_patch(none, false));
    free(p);
    cJSON *other = claim(NULL, "[\"example.com/x\"]");
    p = pciclaim_finalizer_patch(other, true);
    CU_ASSERT_PTR_NOT_NULL(strstr(p, "/metadata/finalizers/-"));
    free(p);
    cJSON *ours = claim(NULL, "[\"example.com/x\",\"" PCIOBJ_FINALIZER "\"]");
    CU_ASSERT_PTR_NULL(pciclaim_finalizer_patch(ours, true));
    p = pciclaim_finalizer_patch(ours, false);
    CU_ASSERT_PTR_NOT_NULL(strstr(p, "{\"op\":\"test\",\"path\":\"/metadata/finalizers/1\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(p, "{\"op\":\"remove\",\"path\":\"/metadata/finalizers/1\"}"));
    cJSON *parsed = cJSON_Parse(p);
    CU_ASSERT_PTR_NOT_NULL(parsed);
    cJSON_Delete(parsed);
    free(p);
    /* a uid with a quote and a backslash stays one JSON string (found by fuzz_claims) */
    cJSON *odd = claim(NULL, NULL);
    cJSON_ReplaceItemInObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(odd, "metadata"), "uid",
                                           cJSON_CreateString("u\"1\\"));
    p = pciclaim_finalizer_patch(odd, true);
    parsed = cJSON_Parse(p);
    CU_ASSERT(cJSON_IsArray(parsed));
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(parsed, 0), "value");
    CU_ASSERT(cJSON_IsString(v) && strcmp(v->valuestring, "u\"1\\") == 0);
    cJSON_Delete(parsed);
    free(p);
    cJSON_Delete(odd);
    cJSON_Delete(none);
    cJSON_Delete(other);
    cJSON_Delete(ours);
}

static CU_TestInfo tests[] = {
        {"status patches", test_status_patch},
        {"finalizer patches", test_finalizer_patch},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo pciclaim_suites[] = {
        {"pciclaim", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
