/* db_compare.c — comparing two recorded runs: whether they share the
 * reference and the token stream (then per-position paired differences and
 * a sign test), and the unpaired difference of their means. Definitions in
 * db.h. */
#include "db/db_impl.h"

#include "common/common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static bool same_str(const char *a, const char *b) { return a && b && !strcmp(a, b); }

static const char *or_none(const char *s) { return s ? s : "(none)"; }

/* Why a and b cannot be paired from their recorded configuration, or "". */
static void config_pairing(const kld_db_row *a, const kld_db_row *b, char *why, size_t n) {
    why[0] = '\0';
    long long ia = (long long)a->id, ib = (long long)b->id;
    if (!same_str(a->corpus_sha256, b->corpus_sha256))
        snprintf(why, n, "different corpora (run %lld: %.16s, run %lld: %.16s)", ia,
                 or_none(a->corpus_sha256), ib, or_none(b->corpus_sha256));
    else if (!same_str(a->chunking, b->chunking))
        snprintf(why, n, "different chunking (run %lld: %s, run %lld: %s)", ia, or_none(a->chunking), ib,
                 or_none(b->chunking));
    else if (a->ctx < 0 || a->ctx != b->ctx)
        snprintf(why, n, "different ctx (run %lld: %lld, run %lld: %lld)", ia, (long long)a->ctx, ib,
                 (long long)b->ctx);
    else if (a->ref.sha256 && b->ref.sha256 ? strcmp(a->ref.sha256, b->ref.sha256) != 0
                                            : !same_str(a->ref.path, b->ref.path) ||
                                                  a->ref.bytes < 0 || a->ref.bytes != b->ref.bytes)
        snprintf(why, n, "different references (run %lld: %s %.16s, run %lld: %s %.16s)", ia,
                 or_none(a->ref.path), or_none(a->ref.sha256), ib, or_none(b->ref.path),
                 or_none(b->ref.sha256));
    else if (!a->has_summary || !b->has_summary || a->summary.n_positions != b->summary.n_positions)
        snprintf(why, n, "different numbers of positions (run %lld: %llu, run %lld: %llu)", ia,
                 (unsigned long long)a->summary.n_positions, ib, (unsigned long long)b->summary.n_positions);
    else if (a->positions_n < 0 || b->positions_n < 0)
        snprintf(why, n, "run %lld has no per-position values", a->positions_n < 0 ? ia : ib);
    else if (a->positions_n != b->positions_n || (uint64_t)a->positions_n != a->summary.n_positions)
        snprintf(why, n, "the per-position values do not cover the runs (%lld and %lld of %llu)",
                 (long long)a->positions_n, (long long)b->positions_n,
                 (unsigned long long)a->summary.n_positions);
}

static kld_db_paired_stat paired(const double *d, size_t n) {
    kld_db_paired_stat s = {0, 0, n};
    if (n) kld_mean_se(d, n, &s.mean, &s.se);
    else s.mean = s.se = NAN;
    return s;
}

/* The paired bootstrap over the stored positions' windows. */
static kld_status paired_bootstrap(const kld_db_position *pa, const kld_db_position *pb, size_t n,
                                   kld_paired_bootstrap *out, kld_error *err) {
    memset(out, 0, sizeof *out);
    double *ka = malloc((n ? n : 1) * sizeof *ka), *kb = malloc((n ? n : 1) * sizeof *kb);
    uint8_t *ta = malloc(n ? n : 1), *tb = malloc(n ? n : 1);
    uint32_t *block = malloc((n ? n : 1) * sizeof *block);
    kld_status st = ka && kb && ta && tb && block ? KLD_OK : kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    uint32_t w = 0;
    for (size_t i = 0; !st && i < n; i++) {
        if (i && pa[i].ctx_pos <= pa[i - 1].ctx_pos) w++;
        ka[i] = pa[i].kld, kb[i] = pb[i].kld, ta[i] = pa[i].top1, tb[i] = pb[i].top1, block[i] = w;
    }
    if (!st && n && w >= 1) {
        st = kld_bootstrap_paired(ka, kb, ta, tb, block, n, KLD_BOOTSTRAP_DEFAULT, 0, out, err);
        if (st == KLD_ERR_ARG) st = KLD_OK, memset(out, 0, sizeof *out); /* too few windows with positions */
    }
    free(ka), free(kb), free(ta), free(tb), free(block);
    return st;
}

void kld_db_verdict(const kld_db_comparison *c, long long id_a, long long id_b, char *buf, size_t size) {
    if (!c->pairable) {
        snprintf(buf, size, "no verdict (not pairable)");
        return;
    }
    char a[32], b[32];
    snprintf(a, sizeof a, "run %lld", id_a);
    snprintf(b, sizeof b, "run %lld", id_b);
    kld_paired_verdict(&c->boot, a, b, buf, size);
}

json_t *kld_db_comparison_json(const kld_db_comparison *c) {
    json_t *paired = c->pairable ? kld_paired_bootstrap_json(&c->boot) : json_object();
    return paired ? json_pack("{s:o}", "paired", paired) : NULL;
}

kld_status kld_db_compare(kld_db *db, const kld_db_row *a, const kld_db_row *b,
                          kld_db_comparison *out, kld_error *err) {
    memset(out, 0, sizeof *out);
    out->u_kld = a->summary.kld.mean - b->summary.kld.mean;
    out->u_kld_se = sqrt(a->summary.kld.se * a->summary.kld.se + b->summary.kld.se * b->summary.kld.se);
    config_pairing(a, b, out->why_not, sizeof out->why_not);
    if (out->why_not[0]) return KLD_OK;

    kld_db_position *pa = NULL, *pb = NULL;
    size_t na = 0, nb = 0;
    kld_status st = kld_db_load_positions(db, a->id, &pa, &na, err);
    if (!st) st = kld_db_load_positions(db, b->id, &pb, &nb, err);
    double *d = NULL;
    if (!st && na != nb)
        snprintf(out->why_not, sizeof out->why_not, "different numbers of stored positions (%zu, %zu)", na, nb);
    for (size_t i = 0; !st && !out->why_not[0] && i < na; i++)
        if (pa[i].token != pb[i].token || pa[i].ctx_pos != pb[i].ctx_pos)
            snprintf(out->why_not, sizeof out->why_not,
                     "the token streams differ at position %zu (token %d at %u vs token %d at %u)", i,
                     pa[i].token, pa[i].ctx_pos, pb[i].token, pb[i].ctx_pos);
    if (!st && !out->why_not[0] && !(d = malloc((na ? na : 1) * sizeof *d)))
        st = kld_fail(err, KLD_ERR_NOMEM, "out of memory for %zu positions", na);
    if (!st && d) {
        for (size_t i = 0; i < na; i++) {
            d[i] = (double)pa[i].kld - (double)pb[i].kld;
            if (pa[i].kld < pb[i].kld) out->a_closer++;
            else if (pa[i].kld > pb[i].kld) out->b_closer++;
            else out->ties++;
        }
        out->d_kld = paired(d, na);
        for (size_t i = 0; i < na; i++) d[i] = (double)pa[i].top1 - (double)pb[i].top1;
        out->d_top1 = paired(d, na);
        size_t m = 0;
        for (size_t i = 0; i < na; i++)
            if (pa[i].token >= 0 && isfinite(pa[i].nll_arm) && isfinite(pb[i].nll_arm))
                d[m++] = (double)pa[i].nll_arm - (double)pb[i].nll_arm;
        out->d_nll = paired(d, m);
        out->sign_p = kld_sign_test_p(out->a_closer, out->b_closer);
        out->pairable = true;
        st = paired_bootstrap(pa, pb, na, &out->boot, err);
    }
    free(d);
    free(pa);
    free(pb);
    return st;
}
