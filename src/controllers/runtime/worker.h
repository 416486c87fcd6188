/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/runtime/worker.h - one thread for blocking node work (sysfs writes that run driver
 * remove and probe paths, module loading), so the event loop never blocks.
 *
 * worker_submit() queues a job; the thread runs job->run() (which must not touch loop state:
 * it reads its own fields and writes its own results), then the loop runs job->done() through
 * an ev_async. Jobs run one at a time, in order. worker_free() waits for the job in progress,
 * drops queued ones (their done() is called with cancelled = true) and joins the thread.
 * Does not log.
 */
#pragma once

#include <ev.h>
#include <stdbool.h>

struct worker_job {
    void (*run)(struct worker_job *job);                  /* on the worker thread */
    void (*done)(struct worker_job *job, bool cancelled); /* on the loop; may free the job */
    struct worker_job *next;                              /* the worker's */
};

struct worker;

struct worker *worker_new(struct ev_loop *loop);
void worker_submit(struct worker *w, struct worker_job *job);
/* Jobs queued or running. */
int worker_pending(const struct worker *w);
struct worker *worker_free(struct worker *w);
