/* test_bootstrap.c — the block bootstrap's intervals (eval/bootstrap.c):
 * deterministic for a seed; degenerate where every document is alike (the
 * weighted percentile walk then reads the sample's own percentiles); the
 * interval of the mean agrees with mean ± 1.96 × the document-clustered
 * standard error on a real run (stories260K f32 vs q8_0, the shared corpus
 * of licenses); and on a synthetic population whose p99 and mean are known,
 * the 95% intervals cover them in 90–99% of 200 seeded samples. */
#include "eval/bootstrap.h"
#include "eval/kl_driver.h"
#include "testlib.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng;
static double uniform01(void) { /* splitmix64 → (0, 1) */
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return ((double)(z >> 11) + 0.5) / 9007199254740992.0;
}

/* docs × per positions, KLD drawn by draw(); top-1 agreement every 3rd. */
static kld_stats *population(int docs, int per, double (*draw)(int doc, int i)) {
    kld_stats *st = NULL;
    kld_error err = {0};
    CHECK_OK(kld_stats_create(&st, 1, &err), err);
    for (int d = 0; d < docs; d++) {
        kld_stats_begin_doc(st, &err);
        for (int i = 0; i < per; i++) {
            kld_position r = {.kld = draw(d, i), .nll_ref = 1.0, .nll_arm = 1.0 + 0.01 * (i % 5),
                              .p_ref_max = 0.5f, .mass = 1.0f, .token = 1, .top_ref = 0,
                              .top_arm = i % 3 == 0, .topk = 1, .topk_hits = 1};
            r.kld_rev = r.kld, r.kld_bound = r.kld;
            kld_stats_add(st, &r, &err);
        }
    }
    return st;
}

static double exp1(int d, int i) { (void)d, (void)i; return -log(uniform01()); }
static double same_docs(int d, int i) { (void)d; return 0.001 * (double)((i * 7919) % 101); }

static void test_deterministic_and_degenerate(void) {
    kld_error err = {0};
    rng = 1;
    kld_stats *st = population(30, 40, exp1);
    kld_bootstrap a, b, c;
    CHECK_OK(kld_bootstrap_stats(st, 200, 7, &a, &err), err);
    CHECK_OK(kld_bootstrap_stats(st, 200, 7, &b, &err), err);
    CHECK_OK(kld_bootstrap_stats(st, 200, 8, &c, &err), err);
    CHECK(!memcmp(a.kld, b.kld, sizeof a.kld) && !memcmp(&a.top1, &b.top1, sizeof a.top1),
          "the same seed gives the same intervals bit for bit");
    CHECK(memcmp(a.kld, c.kld, sizeof a.kld) != 0, "another seed gives other intervals");
    kld_stats_free(st);
    /* every document alike: each resample is the sample itself */
    st = population(12, 101, same_docs);
    kld_summary s;
    CHECK_OK(kld_stats_finalize(st, &s, &err), err);
    CHECK_OK(kld_bootstrap_stats(st, 50, 1, &a, &err), err);
    const double want[KLD_BOOT_N] = {s.kld.mean, s.kld.median, s.kld.pct[6], s.kld.pct[7], s.kld.pct[8],
                                     s.kld.pct[9]};
    int bad = 0;
    for (int q = 0; q < KLD_BOOT_N; q++)
        bad += fabs(a.kld[q].lo - want[q]) > 1e-15 || fabs(a.kld[q].hi - want[q]) > 1e-15;
    CHECK(bad == 0, "identical documents: every interval is the sample's own statistic (%d differ)", bad);
    CHECK(fabs(a.top1.lo - s.top1_agreement) < 1e-15 && fabs(a.top1.hi - s.top1_agreement) < 1e-15,
          "identical documents: top-1 degenerate (%.17g %.17g vs %.17g)", a.top1.lo, a.top1.hi, s.top1_agreement);
    kld_stats_free(st);
    /* one document: nothing to resample */
    st = population(1, 10, exp1);
    CHECK(kld_bootstrap_stats(st, 10, 1, &a, &err) == KLD_ERR_ARG && strstr(err.msg, "nothing to resample"),
          "one document is refused: %s", err.msg);
    kld_stats_free(st);
}

/* A real run: the interval of the mean against the clustered standard error. */
static void test_real_run(void) {
    kld_kl_config c;
    kld_kl_config_defaults(&c);
    c.ref = (kld_arm_spec){.kind = KLD_ARM_MODEL, .path = KT_SHARED "/models/stories260K/f32.gguf"};
    c.arm = (kld_arm_spec){.kind = KLD_ARM_MODEL, .path = KT_SHARED "/models/stories260K/q8_0.gguf"};
    c.corpus_path = KT_SHARED "/corpus/licenses.txt";
    c.ctx = 128;
    c.max_docs = 800;
    c.n_threads = 2;
    kld_kl_result r;
    kld_error err = {0};
    if (kld_kl_run(&c, &r, &err) != KLD_OK) {
        CHECK(false, "kl run: %s", err.msg);
        return;
    }
    /* clustered standard error of the pooled mean: sqrt(sum_d (S_d - m n_d)^2 * D/(D-1)) / N */
    size_t n_rec;
    const kld_position *rec = kld_stats_records(r.stats, &n_rec);
    const size_t nd = kld_stats_doc_count(r.stats);
    double sum = 0;
    for (size_t i = 0; i < n_rec; i++) sum += rec[i].kld;
    const double m = sum / (double)n_rec;
    double v = 0;
    size_t used = 0;
    for (size_t d = 0; d < nd; d++) {
        size_t first, count;
        kld_stats_doc_range(r.stats, d, &first, &count);
        if (!count) continue;
        double sd = 0;
        for (size_t i = first; i < first + count; i++) sd += rec[i].kld - m;
        v += sd * sd;
        used++;
    }
    const double se = sqrt(v * (double)used / (double)(used - 1)) / (double)n_rec;
    kld_bootstrap b;
    CHECK_OK(kld_bootstrap_stats(r.stats, 2000, 0, &b, &err), err);
    const double half = (b.kld[KLD_BOOT_MEAN].hi - b.kld[KLD_BOOT_MEAN].lo) / 2;
    printf("real run: %zu positions in %zu documents, mean %.6g, bootstrap half-width %.4g, 1.96 x clustered se "
           "%.4g\n", n_rec, used, m, half, 1.96 * se);
    CHECK(fabs(half / (1.96 * se) - 1) < 0.10, "the mean's interval agrees with mean ± 1.96 se within 10%% (%.3f)",
          half / (1.96 * se));
    CHECK(b.kld[KLD_BOOT_MEAN].lo < m && m < b.kld[KLD_BOOT_MEAN].hi, "the mean lies inside its interval");
    kld_kl_result_free(&r);
}

/* Coverage: Exp(1) KLDs, 100 documents of 20 positions; true mean 1, true
 * p99 ln 100. */
static void test_coverage(void) {
    const int trials = 200;
    int cover_mean = 0, cover_p99 = 0, cover_median = 0;
    kld_error err = {0};
    for (int t = 0; t < trials; t++) {
        rng = 1000 + (uint64_t)t;
        kld_stats *st = population(100, 20, exp1);
        kld_bootstrap b;
        CHECK_OK(kld_bootstrap_stats(st, 400, (uint64_t)t, &b, &err), err);
        cover_mean += b.kld[KLD_BOOT_MEAN].lo <= 1.0 && 1.0 <= b.kld[KLD_BOOT_MEAN].hi;
        cover_median += b.kld[KLD_BOOT_MEDIAN].lo <= log(2.0) && log(2.0) <= b.kld[KLD_BOOT_MEDIAN].hi;
        cover_p99 += b.kld[KLD_BOOT_P99].lo <= log(100.0) && log(100.0) <= b.kld[KLD_BOOT_P99].hi;
        kld_stats_free(st);
    }
    printf("coverage of 95%% intervals over %d samples: mean %d, median %d, p99 %d\n", trials, cover_mean,
           cover_median, cover_p99);
    CHECK(cover_mean >= 180 && cover_mean <= 198, "mean: covered in 90-99%% of samples (%d/200)", cover_mean);
    CHECK(cover_median >= 180 && cover_median <= 198, "median: covered in 90-99%% (%d/200)", cover_median);
    CHECK(cover_p99 >= 180 && cover_p99 <= 198, "p99: covered in 90-99%% (%d/200)", cover_p99);
}

/* kld_bootstrap_paired_stats (kl with two arms, sweeps): the runs' records
 * paired one to one, documents the blocks; the same result as
 * kld_bootstrap_paired on the arrays; runs that differ refused. */
static void test_paired_stats(void) {
    enum { D = 20, P = 50 };
    static double ka[D * P], kb[D * P];
    static uint8_t ta[D * P], tb[D * P];
    static uint32_t block[D * P];
    kld_error err = {0};
    rng = 5;
    kld_stats *a = population(D, P, exp1);
    rng = 6;
    kld_stats *b = population(D, P, exp1);
    rng = 5;
    for (int i = 0; i < D * P; i++) ka[i] = exp1(0, 0), ta[i] = (i % P) % 3 == 0, block[i] = (uint32_t)(i / P);
    rng = 6;
    for (int i = 0; i < D * P; i++) kb[i] = exp1(0, 0), tb[i] = ta[i];
    kld_paired_bootstrap x, y, z;
    CHECK_OK(kld_bootstrap_paired_stats(a, b, 300, 9, &x, &err), err);
    CHECK_OK(kld_bootstrap_paired(ka, kb, ta, tb, block, D * P, 300, 9, &y, &err), err);
    CHECK(!memcmp(&x.mean, &y.mean, sizeof x.mean) && !memcmp(&x.p99_9, &y.p99_9, sizeof x.p99_9) &&
          x.n == D * P && x.n_blocks == D, "from the runs' records: the arrays' paired bootstrap bit for bit");
    kld_summary sa, sb;
    CHECK_OK(kld_stats_finalize(a, &sa, &err), err);
    CHECK_OK(kld_stats_finalize(b, &sb, &err), err);
    CHECK(fabs(x.mean.diff - (sa.kld.mean - sb.kld.mean)) < 1e-12, "ΔKLD mean %.17g = the means' difference %.17g",
          x.mean.diff, sa.kld.mean - sb.kld.mean);
    CHECK_OK(kld_bootstrap_paired_stats(a, a, 100, 1, &z, &err), err);
    CHECK(z.mean.diff == 0 && z.mean.ci.lo == 0 && z.mean.ci.hi == 0 && z.p99_9.diff == 0 && z.mean.p == 1,
          "a run against itself: exactly 0");
    char verdict[512];
    kld_paired_verdict(&z, "arm A", "arm B", verdict, sizeof verdict);
    CHECK(strstr(verdict, "exactly 0") != NULL, "its verdict: %s", verdict);
    CHECK(!strcmp(kld_paired_verdict_word(&z, "A", "B"), "same"), "its word: same");
    kld_stats *c = population(25, 40, exp1); /* as many positions, other documents */
    CHECK(kld_bootstrap_paired_stats(a, c, 10, 1, &z, &err) == KLD_ERR_ARG && strstr(err.msg, "differ"),
          "other documents refused: %s", err.msg);
    kld_stats *d = population(D, P - 1, exp1);
    CHECK(kld_bootstrap_paired_stats(a, d, 10, 1, &z, &err) == KLD_ERR_ARG, "other positions refused: %s", err.msg);
    kld_stats_free(a), kld_stats_free(b), kld_stats_free(c), kld_stats_free(d);
}

int main(void) {
    test_deterministic_and_degenerate();
    test_paired_stats();
    test_real_run();
    test_coverage();
    return kt_finish();
}
