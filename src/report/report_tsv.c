/* report_tsv.c — the --per-position TSV: every scored position's values in
 * order, one line each, for plotting and for diffing two runs. */
#include "report/report.h"

#include "common/common.h"
#include "eval/strata.h"

#include <errno.h>
#include <math.h>
#include <string.h>

static const char tsv_header[] = "doc\tpos\ttoken\tkld\ttop1_match\tnll_ref\tnll_arm\tkld_rev\tjsd"
                                 "\ttopk_overlap\tp_ref_max\ttop_ref\ttop_arm\ttopk_ordered\trank_ref"
                                 "\trank_arm\tdlogit\ttoken_text\tstrata\n";

kld_status kld_report_tsv_write(const char *path, const kld_stats *st, const kld_tsv_names *names,
                                kld_error *err) {
    kld_record_source src;
    kld_stats_source(st, &src);
    return kld_report_tsv_write_source(path, &src, names, err);
}

/* A token's text in one TSV field: backslash, tab, newline, carriage
 * return and other control bytes escaped (\\, \t, \n, \r, \xHH). */
static bool put_escaped(FILE *f, const char *t, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)t[i];
        int r = c == '\\' ? fputs("\\\\", f) : c == '\t' ? fputs("\\t", f) : c == '\n' ? fputs("\\n", f)
              : c == '\r' ? fputs("\\r", f) : c < 0x20 || c == 0x7f ? fprintf(f, "\\x%02x", c) : fputc(c, f);
        if (r < 0) return false;
    }
    return true;
}

/* A rank as its number, or "" when unknown. */
static bool put_rank(FILE *f, uint16_t r) {
    return r == KLD_RANK_UNKNOWN ? fputc('\t', f) != EOF : fprintf(f, "\t%u", (unsigned)r) > 0;
}

static bool put_names(FILE *f, const kld_position *r, const kld_tsv_names *names) {
    bool ok = put_rank(f, r->rank_ref) && put_rank(f, r->rank_arm) && fprintf(f, "\t%.6g\t", r->dlogit) > 0;
    size_t n;
    const char *t = names && r->token >= 0 ? kld_strata_token_text(names->texts, r->token, &n) : NULL;
    if (ok && t) ok = put_escaped(f, t, n);
    char buf[1024] = "";
    if (names && names->config) kld_strata_names_of(names->config, r->strata, buf, sizeof buf);
    return ok && fprintf(f, "\t%s\n", buf) >= 0;
}

kld_status kld_report_tsv_write_source(const char *path, const kld_record_source *src,
                                       const kld_tsv_names *names, kld_error *err) {
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
            ok = fprintf(f, "%zu\t%u\t%d\t%.10g\t%d\t%.10g\t%.10g\t%.10g\t%.10g\t%.6g\t%.6g\t%d\t%d\t%.6g",
                         doc, (unsigned)r->ctx_pos, (int)r->token, r->kld, r->top_ref == r->top_arm,
                         r->nll_ref, r->nll_arm, r->kld_rev, r->jsd,
                         (double)r->topk_hits / (double)r->topk, (double)r->p_ref_max,
                         (int)r->top_ref, (int)r->top_arm, (double)r->topk_ordered / (double)r->topk) > 0 &&
                 put_names(f, r, names);
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
