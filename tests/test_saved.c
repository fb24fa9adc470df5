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
#include "store/dump.h"
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
    if (!indices_from) c.chunking = chunking; /* a candidate takes its teacher's windows */
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
    kld_dump_result_free(&r);
    return st == KLD_OK;
}

/* Runs kl; returns the records (caller frees) and the summary. */
static kld_position *kl(const char *ref, const char *arm, const char *ref_logits,
                        const char *arm_logits, const char *base, kld_chunking chunking,
                        int64_t chunk, kld_summary *sum, size_t *n) {
    kld_kl_config c;
    kld_kl_config_defaults(&c);
    c.ref = (kld_arm_spec){.kind = ref_logits ? KLD_ARM_TEACHER
                                   : base     ? KLD_ARM_LLAMACPP_BASE
                                              : KLD_ARM_MODEL,
                           .path = ref_logits ? ref_logits : base ? base : ref};
    c.arm = (kld_arm_spec){.kind = arm_logits ? KLD_ARM_CANDIDATE : KLD_ARM_MODEL,
                           .path = arm_logits ? arm_logits : arm};
    if (c.ref.kind == KLD_ARM_MODEL) { /* a saved reference brings its own windows */
        c.chunking = chunking;
        c.ctx = CTX;
        c.max_chunks = CHUNKS;
    }
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
    /* against a float16 teacher the arm is rounded as the teacher was: the
     * self-gate stays exact */
    double worst = 0.0;
    for (size_t k = 0; k < n; k++) worst = fmax(worst, fabs(rec[k].kld));
    CHECK(worst == 0.0 && s.top1_agreement == 1.0 && s.kld_bound.max <= 0.0,
          "v1 (float16 logits) self: max |KLD| %g (want 0), top-1 %g, bound max %g", worst,
          s.top1_agreement, s.kld_bound.max);
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

/* --logits f32 for a float16 teacher's candidate: refused, naming both. */
static void refuse_other_precision(const char *t) {
    char *cand = scratch("cand-v1-as-v2");
    kld_dump_config c;
    kld_dump_config_defaults(&c);
    c.model_path = Q8;
    c.out = cand;
    c.format_version = 2;
    c.indices_from = t;
    c.n_threads = 2;
    kld_dump_result r;
    kld_error err = {0};
    kld_status st = kld_dump_run(&c, &r, &err);
    CHECK(st == KLD_ERR_MISMATCH && strstr(err.msg, "float16") && strstr(err.msg, "--logits f32"),
          "a float32 candidate of a float16 teacher: %s: %s", kld_status_name(st), err.msg);
    free(cand);
}

/* A candidate dump scores exactly as its model (--arm-logits == --arm), for
 * float16 and float32 teachers, top-64 and the whole vocabulary; the
 * candidate takes its teacher's logit type (an explicit other one is
 * refused). */
static void candidate_equals_model(void) {
    const int versions[2] = {1, 2};
    const int32_t ks[2] = {64, 32000};
    for (int vi = 0; vi < 2; vi++)
        for (int ki = 0; ki < 2; ki++) {
            char name[64];
            snprintf(name, sizeof name, "v%d-k%d", versions[vi], (int)ks[ki]);
            char *t = scratch(name);
            snprintf(name, sizeof name, "cand-v%d-k%d", versions[vi], (int)ks[ki]);
            char *cand = scratch(name);
            if (!dump(F16, t, versions[vi], ks[ki], NULL, KLD_CHUNKING_STREAM, 16, NULL, NULL, false,
                      false) ||
                !dump(Q8, cand, 0, ks[ki], t, 0, 16, NULL, NULL, false, false))
                return;
            kld_dump *d = NULL;
            kld_error err = {0};
            CHECK_OK(kld_dump_open(cand, 0, &d, &err), err);
            CHECK(d && kld_dump_meta_of(d)->format_version == versions[vi],
                  "%s: the candidate has the teacher's format_version %d", name, versions[vi]);
            kld_dump_close(d);
            kld_summary a, b;
            size_t na, nb;
            kld_position *ra = kl(NULL, Q8, t, NULL, NULL, 0, 16, &a, &na);
            kld_position *rb = kl(NULL, NULL, t, cand, NULL, 0, 16, &b, &nb);
            if (!ra || !rb) return;
            CHECK(na == nb && memcmp(ra, rb, na * sizeof *ra) == 0,
                  "%s: T vs C and T vs the model: %zu vs %zu records, %s", name, na, nb,
                  na == nb ? "different values" : "different counts");
            CHECK(a.kld.mean == b.kld.mean && a.ppl_arm == b.ppl_arm && a.mass_mean == b.mass_mean &&
                      a.kld_bound.mean == b.kld_bound.mean,
                  "%s: summaries: KLD %.17g vs %.17g", name, a.kld.mean, b.kld.mean);
            printf("%s teacher vs q8_0: KLD %.6e, bound %.6e, captured mass %.6f\n", name,
                   a.kld.mean, a.kld_bound.mean, a.mass_mean);
            free(ra);
            free(rb);
            if (vi == 0 && ki == 0) refuse_other_precision(t);
            free(t);
            free(cand);
        }
}

/* Every quantity labelled a bound is one: on three models, top-k 16, 64
 * and 256, float16 and float32 teachers, each position's "KLD + tail bound"
 * lies between 0 and the exact full-vocabulary KL of the lockstep run; the
 * truncated KL is never below -(1 - captured mass) (log-sum inequality, as
 * stats.h documents); and a float16 teacher's truncated mean lies within 1%
 * of the float32 teacher's (docs/saved-teachers.md). */
static void bound_below_full(void) {
    static const struct {
        const char *name, *ref, *arm;
    } models[3] = {{"rand-llama", F16, Q4KM},
                   {"stories260K", KT_SHARED "/models/stories260K/f32.gguf",
                    KT_SHARED "/models/stories260K/q8_0.gguf"},
                   {"rand-qwen2", KT_SHARED "/models/rand-qwen2/f16.gguf",
                    KT_SHARED "/models/rand-qwen2/q8_0.gguf"}};
    const int32_t ks[3] = {16, 64, 256};
    for (int mi = 0; mi < 3; mi++) {
        kld_summary full;
        size_t nf;
        kld_position *rf = kl(models[mi].ref, models[mi].arm, NULL, NULL, NULL, KLD_CHUNKING_STREAM,
                              16, &full, &nf);
        if (!rf) return;
        for (int i = 0; i < 3; i++) {
            double trunc_mean[3] = {0};
            for (int version = 1; version <= 2; version++) {
                char name[64];
                snprintf(name, sizeof name, "%s-v%d-k%d", models[mi].name, version, (int)ks[i]);
                char *t = scratch(name);
                if (!dump(models[mi].ref, t, version, ks[i], NULL, KLD_CHUNKING_STREAM, 16, NULL,
                          NULL, false, false))
                    return;
                kld_summary s;
                size_t n;
                kld_position *r = kl(NULL, models[mi].arm, t, NULL, NULL, 0, 16, &s, &n);
                if (!r) return;
                size_t above = 0, negative = 0, trunc_low = 0;
                for (size_t k = 0; k < n && k < nf; k++) {
                    if (r[k].kld_bound > rf[k].kld * (1 + 1e-9) + 1e-12) above++;
                    if (r[k].kld_bound < -1e-12) negative++;
                    if (r[k].kld < -(1.0 - (double)r[k].mass) - 1e-6) trunc_low++;
                }
                CHECK(n == nf && above == 0 && negative == 0 && trunc_low == 0,
                      "%s: %zu positions with bound > full KL, %zu with a negative bound, %zu "
                      "with a truncated KL below -(1 - mass)", name, above, negative, trunc_low);
                printf("%-24s truncated KLD %.6e, bound %.6e, full %.6e, mass %.5f\n", name,
                       s.kld.mean, s.kld_bound.mean, full.kld.mean, s.mass_mean);
                trunc_mean[version] = s.kld.mean;
                free(r);
                free(t);
            }
            CHECK(fabs(trunc_mean[1] - trunc_mean[2]) <= 0.01 * fabs(trunc_mean[2]) + 1e-7,
                  "%s k=%d: truncated mean %.6e (float16 teacher) vs %.6e (float32)",
                  models[mi].name, (int)ks[i], trunc_mean[1], trunc_mean[2]);
        }
        free(rf);
    }
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
    kld_dump_result_free(&r);
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
