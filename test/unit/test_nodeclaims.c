/* SPDX-License-Identifier: Apache-2.0 */
/* test/unit/test_nodeclaims.c - what the controller does about claims no agent serves. */
#include <CUnit/CUnit.h>
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "controllers/claims/nodeclaims.h"

#define FIN "devices.harvesterhci.io/restore-driver"

/* A claim: `deleting`, holding our finalizer or not, with a Ready condition (or none). */
static cJSON *claim(bool deleting, bool held, const char *ready, const char *reason,
                    const char *message)
{
    cJSON *c = cJSON_Parse("{\"metadata\":{\"name\":\"titan-000001000\",\"uid\":\"u1\","
                           "\"resourceVersion\":\"42\",\"generation\":1},"
                           "\"spec\":{\"nodeName\":\"titan\",\"address\":\"0000:00:10.0\"}}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    cJSON *meta = cJSON_GetObjectItemCaseSensitive(c, "metadata");
    if (deleting)
        cJSON_AddStringToObject(meta, "deletionTimestamp", "2026-11-23T07:00:00Z");
    cJSON *f = cJSON_AddArrayToObject(meta, "finalizers");
    cJSON_AddItemToArray(f, cJSON_CreateString("example.com/keep"));
    if (held)
        cJSON_AddItemToArray(f, cJSON_CreateString(FIN));
    if (ready) {
        cJSON *cond = cJSON_CreateObject();
        cJSON_AddStringToObject(cond, "type", "Ready");
        cJSON_AddStringToObject(cond, "status", ready);
        cJSON_AddNumberToObject(cond, "observedGeneration", 1);
        cJSON_AddStringToObject(cond, "reason", reason);
        cJSON_AddStringToObject(cond, "message", message);
        cJSON_AddStringToObject(cond, "lastTransitionTime", "2026-11-23T06:00:00Z");
        cJSON *list = cJSON_AddArrayToObject(cJSON_AddObjectToObject(c, "status"), "conditions");
        cJSON_AddItemToArray(list, cond);
    }
    return c;
}

static const struct nodeclaims_node gone = {.name = "titan",
                                            .exists = false,
                                            .agent = NODECLAIMS_AGENT_NEVER,
                                            .lease = "hostdevd-node-lease/titan"};

static struct nodeclaims_node node(enum nodeclaims_agent agent)
{
    return (struct nodeclaims_node){.name = "titan",
                                    .exists = true,
                                    .agent = agent,
                                    .lease = "hostdevd-node-lease/titan",
                                    .renewed = "2026-11-23T06:58:00.000000Z"};
}

static void test_node_gone(void)
{
    struct nodeclaims_decision d;
    cJSON *c = claim(false, true, "True", "Bound", "bound");
    nodeclaims_decide(c, FIN, &gone, &d);
    CU_ASSERT_EQUAL(d.action, NODECLAIMS_CONDITION); /* even a Ready one: its device is gone */
    CU_ASSERT_STRING_EQUAL(d.reason, NODECLAIMS_NODE_NOT_FOUND);
    CU_ASSERT_STRING_EQUAL(d.message, "node titan does not exist: no hostdevd agent will act on "
                                      "this claim; delete it, or add the node");
    cJSON_Delete(c);

    /* Already says so: nothing to write (no Event either). */
    c = claim(false, true, "False", NODECLAIMS_NODE_NOT_FOUND, d.message);
    struct nodeclaims_decision again;
    nodeclaims_decide(c, FIN, &gone, &again);
    CU_ASSERT_EQUAL(again.action, NODECLAIMS_NOTHING);
    cJSON_Delete(c);
}

static void test_deleted_on_a_gone_node(void)
{
    struct nodeclaims_decision d;
    cJSON *c = claim(true, true, "True", "Bound", "bound");
    nodeclaims_decide(c, FIN, &gone, &d);
    CU_ASSERT_EQUAL(d.action, NODECLAIMS_RELEASE);
    CU_ASSERT_STRING_EQUAL(d.reason, NODECLAIMS_FINALIZER_REMOVED);
    CU_ASSERT_PTR_NOT_NULL(strstr(d.message, FIN));
    cJSON_Delete(c);

    /* Our finalizer gone already (only a foreign one left): not ours to remove. */
    c = claim(true, false, NULL, NULL, NULL);
    nodeclaims_decide(c, FIN, &gone, &d);
    CU_ASSERT_EQUAL(d.action, NODECLAIMS_NOTHING);
    cJSON_Delete(c);

    /* The node exists: the agent releases it, however long that takes. */
    struct nodeclaims_node running = node(NODECLAIMS_AGENT_RUNNING);
    c = claim(true, true, "True", "Bound", "bound");
    nodeclaims_decide(c, FIN, &running, &d);
    CU_ASSERT_EQUAL(d.action, NODECLAIMS_NOTHING);
    cJSON_Delete(c);
}

static void test_agent_not_running(void)
{
    static const enum nodeclaims_agent states[] = {NODECLAIMS_AGENT_NEVER, NODECLAIMS_AGENT_STOPPED,
                                                   NODECLAIMS_AGENT_SILENT};
    static const char *const says[] = {"has never reported", "stopped", "silent since"};
    for (size_t i = 0; i < 3; i++) {
        struct nodeclaims_node n = node(states[i]);
        struct nodeclaims_decision d;
        cJSON *c = claim(false, false, NULL, NULL, NULL); /* new: no status yet */
        nodeclaims_decide(c, FIN, &n, &d);
        CU_ASSERT_EQUAL(d.action, NODECLAIMS_CONDITION);
        CU_ASSERT_STRING_EQUAL(d.reason, NODECLAIMS_AGENT_NOT_RUNNING);
        CU_ASSERT_PTR_NOT_NULL(strstr(d.message, says[i]));
        CU_ASSERT_PTR_NOT_NULL(strstr(d.message, "hostdevd-node-lease/titan"));
        cJSON_Delete(c);

        /* A claim the agent made Ready stays Ready: the bind outlives the agent. */
        c = claim(false, true, "True", "Bound", "bound");
        nodeclaims_decide(c, FIN, &n, &d);
        CU_ASSERT_EQUAL(d.action, NODECLAIMS_NOTHING);
        cJSON_Delete(c);

        /* ... but once it is deleted, it says what it waits for. */
        c = claim(true, true, "True", "Bound", "bound");
        nodeclaims_decide(c, FIN, &n, &d);
        CU_ASSERT_EQUAL(d.action, NODECLAIMS_CONDITION);
        CU_ASSERT_PTR_NOT_NULL(strstr(d.message, "once the agent is back"));
        cJSON_Delete(c);
    }
    /* A claim that is not Ready (a bind under way, refused) says why it waits. */
    struct nodeclaims_node stopped = node(NODECLAIMS_AGENT_STOPPED);
    struct nodeclaims_decision w;
    cJSON *waiting = claim(false, true, "False", "Binding", "binding");
    nodeclaims_decide(waiting, FIN, &stopped, &w);
    CU_ASSERT_EQUAL(w.action, NODECLAIMS_CONDITION);
    CU_ASSERT_PTR_NOT_NULL(strstr(w.message, "; the claim waits for it"));
    cJSON_Delete(waiting);
    /* No renew time known: the message says so rather than leave a blank. */
    for (size_t i = 1; i < 3; i++) {
        struct nodeclaims_node unknown = node(states[i]);
        unknown.renewed = NULL;
        waiting = claim(false, false, NULL, NULL, NULL);
        nodeclaims_decide(waiting, FIN, &unknown, &w);
        CU_ASSERT_PTR_NOT_NULL(strstr(w.message, "an unknown time"));
        cJSON_Delete(waiting);
    }
    /* A running agent's claims are its own business. */
    struct nodeclaims_node n = node(NODECLAIMS_AGENT_RUNNING);
    struct nodeclaims_decision d;
    cJSON *c = claim(false, false, "False", "AgentNotRunning", "old");
    nodeclaims_decide(c, FIN, &n, &d);
    CU_ASSERT_EQUAL(d.action, NODECLAIMS_NOTHING);
    cJSON_Delete(c);
}

static void test_status_patch(void)
{
    struct nodeclaims_decision d;
    cJSON *c = claim(false, true, "True", "Bound", "bound");
    nodeclaims_decide(c, FIN, &gone, &d);
    char *p = nodeclaims_status_patch(c, &d, "2026-11-23T07:01:00Z");
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    cJSON *patch = cJSON_Parse(p);
    CU_ASSERT_STRING_EQUAL(
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(patch, "metadata"),
                                             "resourceVersion")
                    ->valuestring,
            "42"); /* the write applies only to the version it was decided from */
    cJSON *cond = cJSON_GetArrayItem(
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(patch, "status"),
                                             "conditions"),
            0);
    CU_ASSERT_STRING_EQUAL(cJSON_GetObjectItemCaseSensitive(cond, "status")->valuestring, "False");
    CU_ASSERT_STRING_EQUAL(cJSON_GetObjectItemCaseSensitive(cond, "reason")->valuestring,
                           "NodeNotFound");
    CU_ASSERT_STRING_EQUAL(
            cJSON_GetObjectItemCaseSensitive(cond, "lastTransitionTime")->valuestring,
            "2026-11-23T07:01:00Z"); /* True -> False is a transition */
    CU_ASSERT_PTR_NULL(
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(patch, "status"),
                                             "passthroughEnabled")); /* the agent's, untouched */
    cJSON_Delete(patch);
    free(p);
    cJSON_Delete(c);

    c = claim(false, true, NULL, NULL, NULL);
    cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(c, "metadata"),
                                            "resourceVersion");
    CU_ASSERT_PTR_NULL(nodeclaims_status_patch(c, &d, "2026-11-23T07:01:00Z"));
    cJSON_Delete(c);
}

static CU_TestInfo tests[] = {
        {"node gone: NodeNotFound, once", test_node_gone},
        {"deleted on a gone node: our finalizer only", test_deleted_on_a_gone_node},
        {"agent never, stopped, silent", test_agent_not_running},
        {"status patch with resourceVersion", test_status_patch},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo nodeclaims_suites[] = {
        {"nodeclaims", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
