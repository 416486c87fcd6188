/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/mdev/mdevplan.h - what the agent does next for one VGPUDevice of its node, pure:
 * from the object, the node's mdev scan (node/mdev.h) and what the reconciler remembers, one
 * step (objects/mdevobj.h has the object's facts). One step a round; the next round sees its
 * result. For an enabled object:
 *   its instance exists              status Created (and the finalizer first)
 *   spec unreadable                  refused: InvalidSpec
 *   parent not on the node           refused: ParentMissing
 *   no such type on the parent       refused: TypeUnknown (the message lists its types)
 *   parent claimed whole             refused: ParentClaimed
 *   the last create failed           refused: CreateFailed, until the spec changes
 *   no capacity for the type         refused: NoCapacity
 *   no finalizer                     add it
 *   status.uuid not the UUID to use  write it (spec.uuid, else status.uuid, else a new one)
 *   else                             create the instance (off the loop)
 * For a disabled or deleted one:
 *   its instance exists              remove it (off the loop, after the holder check); while
 *                                    a process holds it: DeviceInUse, checked again every
 *                                    MDEVPLAN_IN_USE_RETRY seconds; a refused remove:
 *                                    RemoveFailed, tried again after MDEVPLAN_REMOVE_RETRY
 *   status.uuid still set            clear it (vGPUStatus, the type, the resource with it)
 *   our finalizer on it              remove it (a deleted object then goes)
 *   not deleted, not the free slot   delete it (one free slot per parent)
 *   else                             status Available (the free slot)
 * No I/O, no logging.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "node/mdev.h"

struct cJSON;

/* Seconds between two holder checks of an instance a process holds. */
#define MDEVPLAN_IN_USE_RETRY 5.0
/* The memory's reason after a create or remove was written: until the scan shows its effect,
 * for at most MDEVPLAN_WRITTEN_WAIT seconds, it is not written again. */
#define MDEVPLAN_WRITTEN      "Written"
#define MDEVPLAN_WRITTEN_WAIT 2.0
/* Seconds before a remove the kernel refused is tried again. */
#define MDEVPLAN_REMOVE_RETRY 60.0

enum mdevplan_step {
    MDEVPLAN_NONE,             /* as it should be */
    MDEVPLAN_STATUS,           /* write the status (`ready`, `reason`, `message`, `uuid`) */
    MDEVPLAN_ADD_FINALIZER,    /* add MDEVOBJ_FINALIZER */
    MDEVPLAN_REMOVE_FINALIZER, /* remove it */
    MDEVPLAN_WRITE_UUID,       /* status.uuid = `uuid`, before the create */
    MDEVPLAN_CREATE,           /* create instance `uuid` of `type` on the parent */
    MDEVPLAN_REMOVE,           /* remove instance `uuid` (after the holder check) */
    MDEVPLAN_DELETE,           /* delete the object: an extra free slot */
    MDEVPLAN_WAIT,             /* nothing now; again after `wait` seconds */
};

/* What the reconciler remembers of the last node work on an object. */
struct mdevplan_memory {
    long long generation; /* of the spec the work was for */
    const char *reason;   /* MDEVOBJ_CREATE_FAILED, MDEVOBJ_REMOVE_FAILED, MDEVOBJ_IN_USE,
                             MDEVPLAN_WRITTEN; NULL */
    const char *message;
    double at; /* when (the loop's clock) */
};

struct mdevplan_facts {
    const struct cJSON *obj;
    const struct node_mdev_scan *scan;
    bool free_slot;             /* the object is its parent's free slot (mdevplan_free_slot) */
    const char *parent_claimed; /* who holds the parent whole (a claim's name), or NULL */
    const struct mdevplan_memory *memory; /* or NULL */
    const char *new_uuid;                 /* a fresh UUID, for an object that has none */
    double now;
};

struct mdevplan {
    enum mdevplan_step step;
    bool ready;                                /* MDEVPLAN_STATUS: the Ready condition */
    const char *reason;                        /* its reason */
    char message[1024];                        /* its message, for people */
    char uuid[NODE_MDEV_UUID_SIZE];            /* the instance's UUID ("" none) */
    char type[NODE_MDEV_NAME_SIZE];            /* MDEVPLAN_CREATE: the type's id */
    char parent[NODE_MDEV_NAME_SIZE];          /* its parent */
    const struct node_mdev_instance *instance; /* the instance that exists (in `scan`), or NULL */
    double wait;                               /* MDEVPLAN_WAIT */
};

/* The next step for the object `f->obj`. */
void mdevplan_decide(const struct mdevplan_facts *f, struct mdevplan *ret);

/* The parent `name` in `scan`, or NULL. */
const struct node_mdev_parent *mdevplan_parent(const struct node_mdev_scan *scan, const char *name);
/* The instance `uuid` in `scan`, or NULL. */
const struct node_mdev_instance *mdevplan_instance(const struct node_mdev_scan *scan,
                                                   const char *uuid);
/* Whether parent `p` can make one more instance of some type. */
bool mdevplan_has_capacity(const struct node_mdev_parent *p);

/*
 * Who uses PCI parent `parent`, for people (binding/ledger.h's LEDGER_MDEV "who", and so the
 * message of a claim of the parent): its instances among `v` (`n` of them, in the order given),
 * "instance <uuid> (VGPUDevice <name>), instance <uuid>, ...", with the object `name_of` gives for
 * each UUID (NULL: none known). An instance that does not fit in `size` ends the list with
 * ", ..." (always room for it). Returns how many instances of `parent` `v` has.
 */
size_t mdevplan_parent_users(const struct node_mdev_instance *v, size_t n, const char *parent,
                             const char *(*name_of)(const char *uuid, void *arg), void *arg,
                             char *buf, size_t size);

/* Whether `obj` is a free slot candidate: disabled, not deleted, no status.uuid. */
bool mdevplan_is_slot(const struct cJSON *obj);
/* Of two free slot candidates' names, whether `a` comes first (numeric order of the index:
 * "n-mtty-2" before "n-mtty-10"). */
bool mdevplan_slot_before(const char *a, const char *b);

/*
 * The status object `p` (for object `obj`) makes: harvester's fields and ours, from the parent's
 * types in `scan` and the instance `p->instance`. `now` is the RFC 3339 time for a Ready
 * condition whose status changes. NULL on OOM.
 */
struct cJSON *mdevplan_status(const struct mdevplan *p, const struct cJSON *obj,
                              const struct node_mdev_scan *scan, const char *now);

/* The status fields the agent writes. */
extern const char *const mdevplan_managed[];
extern const unsigned mdevplan_n_managed;
