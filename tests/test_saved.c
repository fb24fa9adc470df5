/* test_saved.c — saved arms end to end through the library: dumps and
 * llama.cpp base files written by `kldeval dump` and scored by `kldeval kl`.
 *  1. noise floor: a v2 dump with top_k = n_vocab scored against its own
 *     model gives KLD exactly 0 at several chunk sizes; a v1 dump gives the
 *     float16 floor (reported, small, > 0);
 *  2. v2 with top_k = n_vocab reproduces the lockstep statistics (stream
 *     chunking) to 1e-9 relative on rand-llama f16 vs q4_K_M;
 *  3. --reference-logits T --arm-logits C equals --reference-logits T --arm
 *     CAND exactly;
 *  4. the tail-corrected bound lies between 0 and the full KL, position by
 *     position;
 *  5. resume: a dump stopped after a few chunks and resumed is byte-identical
 *     to an uninterrupted one;
 *  6. llama.cpp round trip: a base file written by kldeval and read back
 *     gives the lockstep llamacpp-chunking numbers within the uint16
 *     resolution. */
#include "testlib.h"

#include "eval/dump_driver.h"
#include "eval/kl_driver.h"
#include "tensor/types.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#define F16 KT_SHARED "/models/rand-llama/f16.gguf"
#define Q4KM KT_SHARED "/models/rand-llama/q4_K_M.gguf"
#define Q8 KT_SHARED "/models/rand-llama/q8_0.gguf"
#define CTX 48
#define CHUNKS 3

static char *scratch(const char *name) {
    char *p = malloc(4096);
    snprintf(p, 4096, "%s/saved-%s", kt_build_dir(), name);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", p);
    if (system(cmd) != 0) fprintf(stderr, "warning: %s failed\n", cmd);
    return p;
}

static bool dump(const char *model, const char *out, int version, int32_t top_k,
                 const char *indices_from, kld_chunking chunking, int64_t chunk,
                 volatile sig_atomic_t *stop, void (*progress)(const kld_kl_progress *, void *),
                 bool resume, bool llamacpp) {
    kld_dump_config c;
    kld_dump_config_defaults(&c);
    c.model_path = model;
    c.out = out;
    c.format_version = version;
    c.top_k = top_k;
    c.indices_from = indices_from;
    c.chunking = chunking;
    c.ctx = CTX;
    c.max_chunks = CHUNKS;
    c.chunk = chunk;
    c.stop = stop;
    c.progress = progress;
    c.resume = resume;
    c.llamacpp = llamacpp;
    kld_dump_result r;
    kld_error err = {0};
    kld_status st = kld_dump_run(&c, &r, &err);
    CHECK_OK(st, err);
    return st == KLD_OK;
}

/* Runs kl; returns the records (caller frees) and the summary. */
static kld_position *kl(const char *ref, const char *arm, const char *ref_logits,
                        const char *arm_logits, const char *base, kld_chunking chunking,
                        int64_t chunk, kld_summary *sum, size_t *n) {
    kld_kl_config c;
    kld_kl_config_defaults(&c);
    c.ref_path = ref;
    c.arm_path = arm;
    c.ref_logits = ref_logits;
    c.arm_logits = arm_logits;
    c.llamacpp_base = base;
    c.chunking = chunking;
    c.ctx = CTX;
    c.max_chunks = CHUNKS;
    c.chunk = chunk;
    kld_kl_result r;
    kld_error err = {0};
    kld_status st = kld_kl_run(&c, &r, &err);
    CHECK_OK(st, err);
    if (st) return NULL;
    st = kld_stats_finalize(r.stats, sum, &err);
    CHECK_OK(st, err);
    const kld_position *rec = kld_stats_records(r.stats, n);
    kld_position *copy = malloc(*n * sizeof *copy);
    memcpy(copy, rec, *n * sizeof *copy);
    kld_kl_result_free(&r);
    return copy;
}

static bool close_rel(double a, double b, double tol) {
    if (isnan(a) && isnan(b)) return true;
    return fabs(a - b) <= tol * fmax(fabs(a), fabs(b)) + 1e-300;
}

static void noise_floor(void) {
    char *v2 = scratch("v2-full"), *v1 = scratch("v1-full");
    if (!dump(F16, v2, 2, 32000, NULL, KLD_CHUNKING_STREAM, 16, NULL, NULL, false, false)) return;
    if (!dump(F16, v1, 1, 32000, NULL, KLD_CHUNKING_STREAM, 16, NULL, NULL, false, false)) return;
    const int64_t chunks[3] = {1, 7, 48};
    for (int i = 0; i < 3; i++) {
        kld_summary s;
        size_t n;
        kld_position *rec = kl(NULL, F16, v2, NULL, NULL, 0, chunks[i], &s, &n);
        if (!rec) return;
        double worst = 0.0;
        for (size_t k = 0; k < n; k++) worst = fmax(worst, fabs(rec[k].kld));
        CHECK(n == CHUNKS * (CTX - 1) && worst == 0.0 && s.top1_agreement == 1.0,
              "v2 self at chunk %lld: %zu positions, max |KLD| %g, top-1 %g", (long long)chunks[i],
              n, worst, s.top1_agreement);
        CHECK(s.mass_mean == 1.0 && s.n_truncated == 0 && s.kld_bound.max == 0.0,
              "v2 full top-k: mass %g, truncated %llu, bound max %g", s.mass_mean,
              (unsigned long long)s.n_truncated, s.kld_bound.max);
        free(rec);
    }
    kld_summary s;
    size_t n;
    kld_position *rec = kl(NULL, F16, v1, NULL, NULL, 0, 16, &s, &n);
    if (!rec) return;
    printf("v1 (float16 logits) noise floor, rand-llama f16 against itself: mean KLD %.3e, max "
           "%.3e, top-1 %.4f\n", s.kld.mean, s.kld.max, s.top1_agreement);
    CHECK(s.kld.mean > 0.0 && s.kld.mean < 1e-3 && s.top1_agreement > 0.99,
          "v1 floor: mean %g (expected small and > 0), top-1 %g", s.kld.mean, s.top1_agreement);
    free(rec);
    free(v1);
    free(v2);
}

static void reproduces_lockstep(void) {
    char *t = scratch("v2-teacher");
    if (!dump(F16, t, 2, 32000, NULL, KLD_CHUNKING_STREAM, 16, NULL, NULL, false, false)) return;
    kld_summary a, b;
    size_t na, nb;
    kld_position *ra = kl(F16, Q4KM, NULL, NULL, NULL, KLD_CHUNKING_STREAM, 16, &a, &na);
    kld_position *rb = kl(NULL, Q4KM, t, NULL, NULL, 0, 16, &b, &nb);
    if (!ra || !rb) return;
    CHECK(na == nb && na == CHUNKS * (CTX - 1), "positions %zu vs %zu", na, nb);
    const struct { const char *name; double x, y; } v[] = {
        {"kld.mean", a.kld.mean, b.kld.mean}, {"kld.median", a.kld.median, b.kld.median},
        {"kld.p99", a.kld.pct[8], b.kld.pct[8]}, {"kld.max", a.kld.max, b.kld.max},
        {"kld_rev.mean", a.kld_rev.mean, b.kld_rev.mean}, {"jsd.mean", a.jsd.mean, b.jsd.mean},
        {"top1", a.top1_agreement, b.top1_agreement}, {"topk", a.topk_overlap, b.topk_overlap},
        {"ppl_ref", a.ppl_ref, b.ppl_ref}, {"ppl_arm", a.ppl_arm, b.ppl_arm},
        {"ln_ppl_ratio", a.ln_ppl_ratio, b.ln_ppl_ratio}, {"dp.mean", a.dp.mean, b.dp.mean},
        {"dp_rms", a.dp_rms, b.dp_rms}, {"doc_mean", a.kld_doc_mean, b.kld_doc_mean}};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        CHECK(close_rel(v[i].x, v[i].y, 1e-9), "%s: lockstep %.15g, v2 dump %.15g", v[i].name,
              v[i].x, v[i].y);
    printf("lockstep vs v2 full dump (f16 vs q4_K_M, %zu positions): KLD %.12f vs %.12f\n", na,
           a.kld.mean, b.kld.mean);
    free(ra);
    free(rb);
    free(t);
}

static void candidate_equals_model(void) {
    char *t = scratch("v1-k64"), *cand = scratch("cand-k64");
    if (!dump(F16, t, 1, 64, NULL, KLD_CHUNKING_STREAM, 16, NULL, NULL, false, false)) return;
    if (!dump(Q8, cand, 2, 64, t, 0, 16, NULL, NULL, false, false)) return;
    kld_summary a, b;
    size_t na, nb;
    kld_position *ra = kl(NULL, Q8, t, NULL, NULL, 0, 16, &a, &na);
    kld_position *rb = kl(NULL, NULL, t, cand, NULL, 0, 16, &b, &nb);
    if (!ra || !rb) return;
    CHECK(na == nb && memcmp(ra, rb, na * sizeof *ra) == 0,
          "T vs C and T vs the model: %zu vs %zu records, %s", na, nb,
          na == nb ? "different values" : "different counts");
    CHECK(a.kld.mean == b.kld.mean && a.ppl_arm == b.ppl_arm && a.mass_mean == b.mass_mean,
          "summaries: KLD %.17g vs %.17g", a.kld.mean, b.kld.mean);
    printf("top-64 teacher vs q8_0: KLD %.6e, bound %.6e, captured mass %.6f\n", a.kld.mean,
           a.kld_bound.mean, a.mass_mean);
    free(ra);
    free(rb);
    free(t);
    free(cand);
}

static void bound_below_full(void) {
    kld_summary full;
    size_t nf;
    kld_position *rf = kl(F16, Q4KM, NULL, NULL, NULL, KLD_CHUNKING_STREAM, 16, &full, &nf);
    if (!rf) return;
    const int32_t ks[3] = {16, 256, 2048};
    for (int i = 0; i < 3; i++) {
        char name[32];
        snprintf(name, sizeof name, "v2-k%d", (int)ks[i]);
        char *t = scratch(name);
        if (!dump(F16, t, 2, ks[i], NULL, KLD_CHUNKING_STREAM, 16, NULL, NULL, false, false)) return;
        kld_summary s;
        size_t n;
        kld_position *r = kl(NULL, Q4KM, t, NULL, NULL, 0, 16, &s, &n);
        if (!r) return;
        /* the bound is the KL of a coarsening: between 0 and the full KL
         * (the truncated KL itself is neither, as the tail term has either sign) */
        size_t above = 0, negative = 0;
        for (size_t k = 0; k < n && k < nf; k++) {
            if (r[k].kld_bound > rf[k].kld * (1 + 1e-9) + 1e-12) above++;
            if (r[k].kld_bound < -1e-12) negative++;
        }
        CHECK(n == nf && above == 0 && negative == 0,
              "k=%d: %zu positions with bound > full KL, %zu with a negative bound", (int)ks[i],
              above, negative);
        printf("k=%-5d truncated KLD %.6f, bound %.6f, full %.6f, mass %.5f\n", (int)ks[i],
               s.kld.mean, s.kld_bound.mean, full.kld.mean, s.mass_mean);
        free(r);
        free(t);
    }
    free(rf);
}

static int progress_calls;
static volatile sig_atomic_t stop_flag;
static void stop_after_five(const kld_kl_progress *p, void *u) {
    (void)p, (void)u;
    if (++progress_calls == 5) stop_flag = 1;
}

static bool same_file(const char *a, const char *b) {
    size_t na, nb;
    char *x = kt_read_file(a, &na), *y = kt_read_file(b, &nb);
    bool same = na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}

static void resume(void) {
    char *whole = scratch("whole"), *part = scratch("resumed");
    if (!dump(F16, whole, 1, 32, NULL, KLD_CHUNKING_STREAM, 10, NULL, NULL, false, false)) return;
    progress_calls = 0;
    stop_flag = 0;
    kld_dump_config c;
    kld_dump_config_defaults(&c);
    c.model_path = F16;
    c.out = part;
    c.top_k = 32;
    c.ctx = CTX;
    c.max_chunks = CHUNKS;
    c.chunk = 10;
    c.stop = &stop_flag;
    c.progress = stop_after_five;
    kld_dump_result r;
    kld_error err = {0};
    CHECK_OK(kld_dump_run(&c, &r, &err), err);
    CHECK(r.partial, "the stop flag stopped the dump (partial %d)", r.partial);
    char path[4200];
    struct stat sb;
    snprintf(path, sizeof path, "%s/manifest.json", part);
    CHECK(stat(path, &sb) != 0, "an interrupted dump has no manifest.json");
    if (!dump(F16, part, 1, 32, NULL, KLD_CHUNKING_STREAM, 10, NULL, NULL, true, false)) return;
    const char *files[] = {"tokens.bin", "seq-0.bin", "seq-1.bin", "seq-2.bin", "seq-0.ext.bin",
                           "seq-1.ext.bin", "seq-2.ext.bin"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char a[4200], b[4200];
        snprintf(a, sizeof a, "%s/%s", whole, files[i]);
        snprintf(b, sizeof b, "%s/%s", part, files[i]);
        CHECK(same_file(a, b), "resumed %s differs from the uninterrupted one", files[i]);
    }
    free(whole);
    free(part);
}

static void llamacpp_round_trip(void) {
    char *base = scratch("base.kld");
    if (!dump(F16, base, 1, 1, NULL, KLD_CHUNKING_LLAMACPP, 16, NULL, NULL, false, true)) return;
    kld_summary a, b;
    size_t na, nb;
    kld_position *ra = kl(F16, Q4KM, NULL, NULL, NULL, KLD_CHUNKING_LLAMACPP, 16, &a, &na);
    kld_position *rb = kl(NULL, Q4KM, NULL, NULL, base, 0, 16, &b, &nb);
    if (!ra || !rb) return;
    CHECK(na == nb && na == CHUNKS * (CTX - 1 - CTX / 2), "positions %zu vs %zu", na, nb);
    /* uint16 codes over a 16-nat window: log-probs within 16/65535/2 */
    CHECK(fabs(a.kld.mean - b.kld.mean) < 2e-3 * a.kld.mean + 1e-4,
          "KLD lockstep %.6f, base file %.6f", a.kld.mean, b.kld.mean);
    CHECK(fabs(a.top1_agreement - b.top1_agreement) < 0.02, "top-1 %.4f vs %.4f", a.top1_agreement,
          b.top1_agreement);
    CHECK(close_rel(a.ppl_arm, b.ppl_arm, 1e-9), "PPL(arm) %.6f vs %.6f", a.ppl_arm, b.ppl_arm);
    printf("llama.cpp base round trip (f16 base, q4_K_M arm): KLD lockstep %.6f, base %.6f; "
           "PPL(ref) %.1f vs %.1f (clamped rows)\n", a.kld.mean, b.kld.mean, a.ppl_ref, b.ppl_ref);
    free(ra);
    free(rb);
    free(base);
}

int main(void) {
    kld_kernels_init();
    noise_floor();
    reproduces_lockstep();
    candidate_equals_model();
    bound_below_full();
    resume();
    llamacpp_round_trip();
    return kt_finish();
}
