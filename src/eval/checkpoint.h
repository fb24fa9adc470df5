/* checkpoint.h — a kl run's exact state on disk, so that a run killed at any
 * moment (OOM killer, preemption, power) resumes where it was: the records
 * of the windows completed so far, in the shard partial format
 * (store/partial.h) with the checkpoint flag, written atomically
 * (temporary name, fsync, rename). Resuming reloads them into the
 * statistics as they were added, so the final figures equal an
 * uninterrupted run's bit for bit. */
#ifndef KLD_EVAL_CHECKPOINT_H
#define KLD_EVAL_CHECKPOINT_H

#include "eval/plan.h"
#include "eval/stats.h"
#include "store/partial.h"

#include <jansson.h>

/* The run a checkpoint belongs to: its configuration and defining hash
 * (src/eval/merge.h), its shard and the windows it visits in order. */
typedef struct kld_checkpoint_run {
    const char *path;
    const json_t *config;
    const uint8_t *hash;           /* 32 bytes */
    kld_shard shard;               /* n = 0: the whole plan */
    uint64_t n_windows_total;
    const size_t *select;          /* the windows visited, global indices, in order */
    size_t n_select;
} kld_checkpoint_run;

/* Writes the first n_done visited windows (windows[j].index, .new_doc;
 * their records start at win_start[j] in stats, the last one's end at
 * win_end). */
kld_status kld_checkpoint_write(const kld_checkpoint_run *run, const kld_stats *stats,
                                const kld_partial_window *windows, const uint64_t *win_start,
                                size_t n_done, uint64_t win_end, kld_error *err);

/* Loads a checkpoint of this run into stats (empty, the run's top-k), filling
 * windows[0..*n_done) and win_start as the run logs them. A checkpoint of
 * another run (configuration, model bytes, corpus, shard) is refused, naming
 * the first difference. */
kld_status kld_checkpoint_load(const kld_checkpoint_run *run, kld_stats *stats,
                               kld_partial_window *windows, uint64_t *win_start, size_t *n_done,
                               kld_error *err);

#endif
