/* checkpoint.c — a kl run's checkpoints (checkpoint.h). */
#include "eval/checkpoint.h"

#include "eval/merge.h"

#include <stdlib.h>

static kld_partial_head head_of(const kld_checkpoint_run *run, int topk) {
    return (kld_partial_head){.shard_k = run->shard.n ? run->shard.k : 0,
                              .shard_n = run->shard.n ? run->shard.n : 1,
                              .shard_mode = run->shard.n && run->shard.mode == KLD_SHARD_RANGE,
                              .topk = (uint32_t)topk, .flags = KLD_PARTIAL_CHECKPOINT,
                              .n_windows_total = run->n_windows_total};
}

kld_status kld_checkpoint_write(const kld_checkpoint_run *run, const kld_stats *stats,
                                const kld_partial_window *windows, const uint64_t *win_start,
                                size_t n_done, uint64_t win_end, kld_error *err) {
    kld_partial_head h = head_of(run, kld_stats_topk(stats));
    size_t n_all = 0;
    const kld_position *rec = kld_stats_records(stats, &n_all);
    kld_partial_window *w = malloc((n_done ? n_done : 1) * sizeof *w);
    if (!w) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory for a checkpoint", run->path);
    for (size_t j = 0; j < n_done; j++) {
        w[j] = windows[j];
        uint64_t end = j + 1 < n_done ? win_start[j + 1] : win_end;
        w[j].n_records = (uint32_t)(end - win_start[j]);
    }
    h.n_windows = n_done;
    h.n_records = n_done ? win_end : 0;
    memcpy(h.hash, run->hash, 32);
    json_t *meta = json_pack("{s:s,s:O}", "schema", "kldeval.checkpoint/1", "config", run->config);
    char *text = meta ? json_dumps(meta, JSON_COMPACT) : NULL;
    json_decref(meta);
    kld_status st = text && h.n_records <= n_all
                        ? kld_partial_write(run->path, &h, text, w, rec, err)
                        : kld_fail(err, KLD_ERR_NOMEM, "%s: cannot build the checkpoint", run->path);
    free(text);
    free(w);
    return st;
}

/* The checkpoint's run against this one: the same defining inputs and shard. */
static kld_status same_run(const kld_checkpoint_run *run, const kld_partial *p, int topk,
                           kld_error *err) {
    const kld_partial_head *h = kld_partial_head_of(p), want = head_of(run, topk);
    if (!(h->flags & KLD_PARTIAL_CHECKPOINT))
        return kld_fail(err, KLD_ERR_ARG, "%s is a shard's partial, not a checkpoint (give it to "
                        "kldeval merge)", run->path);
    if (memcmp(h->hash, run->hash, 32)) {
        char why[512] = "the hashes of their defining inputs differ";
        json_t *meta = json_loads(kld_partial_meta(p), 0, NULL);
        const json_t *cfg = json_object_get(meta, "config");
        if (cfg) kld_eval_first_difference(cfg, run->config, why, sizeof why);
        json_decref(meta);
        return kld_fail(err, KLD_ERR_MISMATCH, "%s: a checkpoint of another run (%s): resume it "
                        "with the arguments, models and corpus it was made with", run->path, why);
    }
    if (h->shard_k != want.shard_k || h->shard_n != want.shard_n || h->shard_mode != want.shard_mode ||
        h->n_windows_total != want.n_windows_total || h->topk != want.topk)
        return kld_fail(err, KLD_ERR_MISMATCH, "%s: shard %u/%u of %llu windows, top-k %u; this run "
                        "is shard %u/%u of %llu, top-k %u", run->path, h->shard_k, h->shard_n,
                        (unsigned long long)h->n_windows_total, h->topk, want.shard_k, want.shard_n,
                        (unsigned long long)want.n_windows_total, want.topk);
    return KLD_OK;
}

kld_status kld_checkpoint_load(const kld_checkpoint_run *run, kld_stats *stats,
                               kld_partial_window *windows, uint64_t *win_start, size_t *n_done,
                               kld_error *err) {
    *n_done = 0;
    kld_partial *p = NULL;
    kld_status st = kld_partial_open(run->path, &p, err);
    if (!st) st = same_run(run, p, kld_stats_topk(stats), err);
    const kld_partial_head *h = st ? NULL : kld_partial_head_of(p);
    const kld_partial_window *pw = h ? kld_partial_windows(p) : NULL;
    kld_position *buf = NULL;
    for (uint64_t j = 0; !st && j < h->n_windows; j++) {
        if (j >= run->n_select || pw[j].index != run->select[j]) {
            st = kld_fail(err, KLD_ERR_MISMATCH, "%s: window %llu is not the run's window %llu",
                          run->path, (unsigned long long)pw[j].index, (unsigned long long)j);
            break;
        }
        windows[j] = pw[j];
        win_start[j] = kld_stats_count(stats);
        if (pw[j].new_doc && (st = kld_stats_begin_doc(stats, err))) break;
        kld_position *nb = realloc(buf, (pw[j].n_records ? pw[j].n_records : 1) * sizeof *buf);
        if (!nb) {
            st = kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", run->path);
            break;
        }
        buf = nb;
        if ((st = kld_partial_read(p, pw[j].n_records, buf, err))) break;
        for (uint32_t r = 0; r < pw[j].n_records && !st; r++) st = kld_stats_add(stats, &buf[r], err);
        if (!st) *n_done = (size_t)j + 1;
    }
    free(buf);
    kld_partial_close(p);
    return st;
}
