/* sched.h — internal to serve_engine.c and serve_sched.c: a queued run and
 * a session slot of the scheduler. */
#ifndef KLD_SERVE_SCHED_H
#define KLD_SERVE_SCHED_H

#include "serve/serve.h"

struct kld_serve_task {
    const kld_serve_job *job;
    kld_serve_result *res;
    kld_status st;
    kld_error err;
    bool finished;           /* set under the engine's lock; the waiter then owns res */
    bool cancelled;          /* set under the lock by the waiter: its client left */
    kld_serve_task *next;
};

struct kld_serve_slot {
    kld_session *s;
    float *row;              /* [n_vocab] the row the next token is drawn from */
    kld_serve_task *task;    /* NULL: free */
    int64_t generated;
};

#endif
