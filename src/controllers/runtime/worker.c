/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/runtime/worker.c - a thread for blocking node work, results back through ev_async.
 * One per process (controllers/runtime/process.c), shared by every reconciler.
 */
#include "controllers/runtime/worker.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

struct worker {
    struct ev_loop *loop;
    ev_async async;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct worker_job *todo, *todo_tail; /* for the thread */
    struct worker_job *done, *done_tail; /* for the loop */
    int pending;
    bool stop;
};

static void push(struct worker_job **head, struct worker_job **tail, struct worker_job *j)
{
    j->next = NULL;
    if (*tail)
        (*tail)->next = j;
    else
        *head = j;
    *tail = j;
}

static struct worker_job *pop(struct worker_job **head, struct worker_job **tail)
{
    struct worker_job *j = *head;
    if (j) {
        *head = j->next;
        if (!*head)
            *tail = NULL;
    }
    return j;
}

static void *thread_main(void *arg)
{
    struct worker *w = arg;
    pthread_mutex_lock(&w->lock);
    for (;;) {
        while (!w->todo && !w->stop)
            pthread_cond_wait(&w->cond, &w->lock);
        if (w->stop)
            break;
        struct worker_job *j = pop(&w->todo, &w->todo_tail);
        pthread_mutex_unlock(&w->lock);
        j->run(j);
        pthread_mutex_lock(&w->lock);
        push(&w->done, &w->done_tail, j);
        ev_async_send(w->loop, &w->async);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

static void on_async(struct ev_loop *loop, ev_async *a, int revents)
{
    struct worker *w = a->data;
    (void)loop;
    (void)revents;
    for (;;) {
        pthread_mutex_lock(&w->lock);
        struct worker_job *j = pop(&w->done, &w->done_tail);
        pthread_mutex_unlock(&w->lock);
        if (!j)
            return;
        w->pending--;
        j->done(j, false);
    }
}

struct worker *worker_new(struct ev_loop *loop)
{
    struct worker *w = calloc(1, sizeof(*w));
    if (!w)
        return NULL;
    w->loop = loop;
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cond, NULL);
    ev_async_init(&w->async, on_async);
    w->async.data = w;
    ev_async_start(loop, &w->async);
    /* The thread starts with every signal blocked (it inherits the mask), so SIGTERM, SIGHUP
     * and SIGCHLD always reach the loop's thread, never a sysfs write in progress. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int e = pthread_create(&w->thread, NULL, thread_main, w);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e != 0) {
        ev_async_stop(loop, &w->async);
        pthread_mutex_destroy(&w->lock);
        pthread_cond_destroy(&w->cond);
        free(w);
        return NULL;
    }
    return w;
}

void worker_submit(struct worker *w, struct worker_job *job)
{
    pthread_mutex_lock(&w->lock);
    push(&w->todo, &w->todo_tail, job);
    w->pending++;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

int worker_pending(const struct worker *w)
{
    return w->pending;
}

struct worker *worker_free(struct worker *w)
{
    if (!w)
        return NULL;
    pthread_mutex_lock(&w->lock);
    w->stop = true;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);
    ev_async_stop(w->loop, &w->async);
    struct worker_job *j;
    while ((j = pop(&w->done, &w->done_tail)))
        j->done(j, false);
    while ((j = pop(&w->todo, &w->todo_tail)))
        j->done(j, true);
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->cond);
    free(w);
    return NULL;
}
