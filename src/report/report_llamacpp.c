/* report_llamacpp.c — llama-perplexity --kl-divergence's final statistics
 * block (llama.cpp c392e50, examples/perplexity/perplexity.cpp, end of
 * kl_divergence(), lines 1859-1953), line for line and with its printf
 * widths, so that scripts that parse llama.cpp's output read kldeval's too.
 *
 * Where kldeval's definitions (src/eval/stats.h) and llama.cpp's differ,
 * this printer follows llama.cpp:
 *  - nothing is printed for fewer than 100 positions ("we do not wish to do
 *    statistics on so few values"); so llama.cpp's other special case, a 0
 *    error from mean_and_uncertainty for N <= 10, never shows here;
 *  - the "99.0%" KLD line is printed twice and there is no 95% KLD line;
 *  - Δp values are in percent, "Cor" in percent with 2 decimals;
 *  - an error that rounding makes imaginary (PPL difference) prints as 0
 *    here (kldeval clamps it), where llama.cpp would print nan.
 * The values themselves are kldeval's (two-pass sums, double medians); they
 * agree with llama.cpp's one-pass sums to far more digits than are printed.
 * One value is kldeval's by definition too: where next tokens lie below a
 * base row's 16-nat window, PPL(base) and the ratios, difference and
 * correlation are those of the estimated reference NLL (src/eval/stats.h),
 * not llama.cpp's biased-low figures; a line after the block then says so
 * and gives llama.cpp's PPL(base). */
#include "report/report.h"

#include "common/common.h"

#include <errno.h>
#include <string.h>

/* indices into kld_pct_fractions: .001 .01 .05 .1 .25 .75 .9 .95 .99 .999 */
enum { P0_1, P1, P5, P10, P25, P75, P90, P95, P99, P99_9 };

static void perplexity_block(FILE *f, const kld_summary *s) {
    fprintf(f, "====== Perplexity statistics ======\n");
    fprintf(f, "Mean PPL(Q)                   : %10.6f ± %10.6f\n", s->ppl_arm, s->ppl_arm_se);
    fprintf(f, "Mean PPL(base)                : %10.6f ± %10.6f\n", s->ppl_ref, s->ppl_ref_se);
    fprintf(f, "Cor(ln(PPL(Q)), ln(PPL(base))): %6.2f%%\n", 100.0 * s->nll_cor);
    fprintf(f, "Mean ln(PPL(Q)/PPL(base))     : %10.6f ± %10.6f\n", s->ln_ppl_ratio,
            s->ln_ppl_ratio_se);
    fprintf(f, "Mean PPL(Q)/PPL(base)         : %10.6f ± %10.6f\n", s->ppl_ratio, s->ppl_ratio_se);
    fprintf(f, "Mean PPL(Q)-PPL(base)         : %10.6f ± %10.6f\n", s->ppl_diff, s->ppl_diff_se);
    if (s->n_next_outside)
        fprintf(f, "(kldeval: %llu next tokens lie below the base file's window: PPL(base) and the\n"
                   " ratios above use their estimated NLL; llama.cpp's own, biased low: %.6f ± %.6f)\n",
                (unsigned long long)s->n_next_outside, s->ppl_ref_llamacpp, s->ppl_ref_llamacpp_se);
    fprintf(f, "\n");
}

static void kld_block(FILE *f, const kld_dist *k) {
    fprintf(f, "====== KL divergence statistics ======\n");
    fprintf(f, "Mean    KLD: %10.6f ± %10.6f\n", k->mean, k->se);
    fprintf(f, "Maximum KLD: %10.6f\n", k->max);
    fprintf(f, "99.9%%   KLD: %10.6f\n", k->pct[P99_9]);
    /* twice, as c392e50 prints it (later llama.cpp has 95% here) */
    fprintf(f, "99.0%%   KLD: %10.6f\n", k->pct[P99]);
    fprintf(f, "99.0%%   KLD: %10.6f\n", k->pct[P99]);
    fprintf(f, "Median  KLD: %10.6f\n", k->median);
    fprintf(f, "10.0%%   KLD: %10.6f\n", k->pct[P10]);
    fprintf(f, " 5.0%%   KLD: %10.6f\n", k->pct[P5]);
    fprintf(f, " 1.0%%   KLD: %10.6f\n", k->pct[P1]);
    fprintf(f, "Minimum KLD: %10.6f\n", k->min);
    fprintf(f, "\n");
}

static void dp_block(FILE *f, const kld_summary *s) {
    const kld_dist *d = &s->dp;
    fprintf(f, "====== Token probability statistics ======\n");
    fprintf(f, "Mean    Δp: %6.3f ± %5.3f %%\n", 100.0 * d->mean, 100.0 * d->se);
    fprintf(f, "Maximum Δp: %6.3f%%\n", 100.0 * d->max);
    fprintf(f, "99.9%%   Δp: %6.3f%%\n", 100.0 * d->pct[P99_9]);
    fprintf(f, "99.0%%   Δp: %6.3f%%\n", 100.0 * d->pct[P99]);
    fprintf(f, "95.0%%   Δp: %6.3f%%\n", 100.0 * d->pct[P95]);
    fprintf(f, "90.0%%   Δp: %6.3f%%\n", 100.0 * d->pct[P90]);
    fprintf(f, "75.0%%   Δp: %6.3f%%\n", 100.0 * d->pct[P75]);
    fprintf(f, "Median  Δp: %6.3f%%\n", 100.0 * d->median);
    fprintf(f, "25.0%%   Δp: %6.3f%%\n", 100.0 * d->pct[P25]);
    fprintf(f, "10.0%%   Δp: %6.3f%%\n", 100.0 * d->pct[P10]);
    fprintf(f, " 5.0%%   Δp: %6.3f%%\n", 100.0 * d->pct[P5]);
    fprintf(f, " 1.0%%   Δp: %6.3f%%\n", 100.0 * d->pct[P1]);
    fprintf(f, " 0.1%%   Δp: %6.3f%%\n", 100.0 * d->pct[P0_1]);
    fprintf(f, "Minimum Δp: %6.3f%%\n", 100.0 * d->min);
    fprintf(f, "RMS Δp    : %6.3f ± %5.3f %%\n", 100.0 * s->dp_rms, 100.0 * s->dp_rms_se);
    fprintf(f, "Same top p: %6.3f ± %5.3f %%\n", 100.0 * s->top1_agreement, 100.0 * s->top1_se);
}

kld_status kld_report_llamacpp(FILE *out, const kld_summary *s, kld_error *err) {
    if (s->n_positions < 100) return KLD_OK; /* llama.cpp prints nothing then */
    perplexity_block(out, s);
    kld_block(out, &s->kld);
    dp_block(out, s);
    if (fflush(out) != 0 || ferror(out))
        return kld_fail(err, KLD_ERR_IO, "llama.cpp statistics block: write failed: %s",
                        strerror(errno));
    return KLD_OK;
}
