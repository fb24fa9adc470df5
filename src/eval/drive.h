/* drive.h — the one loop every evaluation runs: for each window of the
 * plan, each arm starts from an empty state, then chunk by chunk both arms
 * are fed the same tokens and the rows the window scores are handed to a
 * sink (the scorer and its statistics, or a dump writer). */
#ifndef KLD_EVAL_DRIVE_H
#define KLD_EVAL_DRIVE_H

#include "eval/arm.h"
#include "eval/stats.h"

#include <signal.h>

/* kld_kl_progress: kld.h */

typedef struct kld_sink {
    /* rows of window wi: ref's, and arm's (NULL when there is one arm) */
    kld_status (*rows)(void *user, const kld_window *w, size_t wi, const kld_rows *ref,
                       const kld_rows *arm, kld_error *err);
    /* optional: a window begins (documents for the statistics) */
    kld_status (*window)(void *user, const kld_window *w, size_t wi, kld_error *err);
    void *user;
} kld_sink;

typedef struct kld_drive_opts {
    const kld_plan *plan;
    kld_arm *ref, *arm;          /* arm may be NULL */
    int64_t chunk;
    size_t first_window;         /* resume: windows before it are skipped */
    const kld_stats *stats;      /* for the running mean of the progress line; may be NULL */
    volatile sig_atomic_t *stop; /* set asynchronously (Ctrl-C): stop after the chunk */
    void (*progress)(const kld_kl_progress *p, void *user);
    void *progress_user;
    /* a shard: only these windows (global indices, ascending); NULL = all */
    const size_t *select;
    size_t n_select;
} kld_drive_opts;

/* Runs the loop. *stopped is set when the stop flag ended it early. */
kld_status kld_drive(const kld_drive_opts *o, const kld_sink *sink, bool *stopped,
                     kld_error *err);

#endif
