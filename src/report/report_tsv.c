/* report_tsv.c — the --per-position TSV: every scored position's values in
 * order, one line each, for plotting and for diffing two runs. */
#include "report/report.h"

#include "common/common.h"

#include <errno.h>
#include <math.h>
#include <string.h>

static const char tsv_header[] = "doc\tpos\ttoken\tkld\ttop1_match\tnll_ref\tnll_arm\tkld_rev\tjsd"
                                 "\ttopk_overlap\tp_ref_max\ttop_ref\ttop_arm\n";

kld_status kld_report_tsv_write(const char *path, const kld_stats *st, kld_error *err) {
    kld_record_source src;
    kld_stats_source(st, &src);
    return kld_report_tsv_write_source(path, &src, err);
}

kld_status kld_report_tsv_write_source(const char *path, const kld_record_source *src,
                                       kld_error *err) {
    FILE *f = fopen(path, "w");
    if (!f)
        return kld_fail(err, KLD_ERR_IO, "%s: cannot create the per-position TSV: %s", path,
                        strerror(errno));
    bool ok = fputs(tsv_header, f) >= 0;
    kld_status st = KLD_OK;
    const kld_position *batch;
    size_t m = 0, i = 0, doc = 0;
    for (bool restart = true; ok && !st; restart = false) {
        if ((st = src->next(src->user, restart, &batch, &m, err)) || m == 0) break;
        for (size_t j = 0; j < m && ok; j++, i++) {
            /* the document a record belongs to: the last one begun at or before it */
            while (doc + 1 < src->n_docs && src->doc_start[doc + 1] <= i) doc++;
            if (!src->n_docs || i < src->doc_start[0]) continue;
            const kld_position *r = &batch[j];
            /* %.10g keeps every digit a report prints and stays compact; NaN
             * prints as "nan" for positions without a next token. */
            ok = fprintf(f, "%zu\t%u\t%d\t%.10g\t%d\t%.10g\t%.10g\t%.10g\t%.10g\t%.6g\t%.6g\t%d\t%d\n",
                         doc, (unsigned)r->ctx_pos, (int)r->token, r->kld, r->top_ref == r->top_arm,
                         r->nll_ref, r->nll_arm, r->kld_rev, r->jsd,
                         (double)r->topk_hits / (double)r->topk, (double)r->p_ref_max,
                         (int)r->top_ref, (int)r->top_arm) > 0;
        }
    }
    int saved = errno;
    if (fclose(f) != 0 && ok) {
        ok = false;
        saved = errno;
    }
    if (st) return st;
    if (!ok)
        return kld_fail(err, KLD_ERR_IO, "%s: cannot write the per-position TSV: %s", path,
                        strerror(saved));
    return KLD_OK;
}
