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
    FILE *f = fopen(path, "w");
    if (!f)
        return kld_fail(err, KLD_ERR_IO, "%s: cannot create the per-position TSV: %s", path,
                        strerror(errno));
    bool ok = fputs(tsv_header, f) >= 0;
    size_t n;
    const kld_position *rec = kld_stats_records(st, &n);
    size_t n_docs = kld_stats_doc_count(st);
    for (size_t doc = 0; doc < n_docs && ok; doc++) {
        size_t first, count;
        kld_stats_doc_range(st, doc, &first, &count);
        for (size_t i = first; i < first + count && ok; i++) {
            const kld_position *r = &rec[i];
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
    if (!ok)
        return kld_fail(err, KLD_ERR_IO, "%s: cannot write the per-position TSV: %s", path,
                        strerror(saved));
    return KLD_OK;
}
