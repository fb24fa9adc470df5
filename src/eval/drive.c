/* drive.c — the chunked lockstep loop over a plan (see drive.h). */
#include "eval/drive.h"

#include <stdlib.h>
#include <time.h>

kld_status kld_drive(const kld_drive_opts *o, const kld_sink *sink, bool *stopped,
                     kld_error *err) {
    const kld_plan *pl = o->plan;
    *stopped = false;
    int32_t *buf = malloc((size_t)o->chunk * sizeof *buf);
    if (!buf) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    double t_start = kld_now_s();
    uint64_t docs_done = 0, rows_done = 0;
    kld_status st = KLD_OK;
    for (size_t wi = 0; wi < o->first_window && wi < pl->n_windows; wi++) {
        docs_done += wi + 1 == pl->n_windows || pl->windows[wi + 1].new_doc;
        rows_done += (uint64_t)(pl->windows[wi].score_to - pl->windows[wi].score_from);
    }
    /* a shard visits its own windows, under their global indices */
    size_t n_visit = o->select ? o->n_select : pl->n_windows;
    uint64_t positions_total = o->select ? 0 : pl->positions_total;
    for (size_t j = 0; o->select && j < o->n_select; j++)
        positions_total += (uint64_t)(pl->windows[o->select[j]].score_to -
                                      pl->windows[o->select[j]].score_from);
    for (size_t j = o->select ? 0 : o->first_window; j < n_visit && !st; j++) {
        size_t wi = o->select ? o->select[j] : j;
        const kld_window *w = &pl->windows[wi];
        if (sink->window && (st = sink->window(sink->user, w, wi, err))) break;
        if ((st = o->ref->ops->begin(o->ref, w, wi, err))) break;
        if (o->arm && (st = o->arm->ops->begin(o->arm, w, wi, err))) break;
        for (int64_t c0 = 0; c0 < w->len && !st; c0 += o->chunk) {
            int64_t n = w->len - c0 < o->chunk ? w->len - c0 : o->chunk;
            memcpy(buf, w->tokens + c0, (size_t)n * sizeof *buf);
            if (c0 == 0 && w->first_token >= 0) buf[0] = w->first_token;
            /* the scored rows of this chunk */
            int64_t r0 = w->score_from > c0 ? w->score_from : c0;
            int64_t r1 = w->score_to < c0 + n ? w->score_to : c0 + n;
            if (r1 < r0) r1 = r0;
            kld_rows ref_rows, arm_rows;
            if ((st = o->ref->ops->eval(o->ref, buf, c0, n, r0, r1, &ref_rows, err))) break;
            if (o->arm && (st = o->arm->ops->eval(o->arm, buf, c0, n, r0, r1, &arm_rows, err))) break;
            if (r1 > r0)
                st = sink->rows(sink->user, w, wi, &ref_rows, o->arm ? &arm_rows : NULL, err);
            rows_done += (uint64_t)(r1 - r0);
            if (o->progress) {
                kld_kl_progress pr = {docs_done, pl->docs_total, rows_done, positions_total,
                                      kld_now_s() - t_start, 0.0};
                if (o->stats) {
                    kld_stats_running run;
                    kld_stats_get_running(o->stats, &run);
                    pr.kld_mean = run.kld_mean;
                }
                o->progress(&pr, o->progress_user);
            }
            if (!st && o->stop && *o->stop) {
                *stopped = true;
                goto done;
            }
        }
        /* a document is done when the next window starts a new one */
        if (wi + 1 == pl->n_windows || pl->windows[wi + 1].new_doc) docs_done++;
    }
done:
    free(buf);
    return st;
}
