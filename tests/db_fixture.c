/* db_fixture.c — synthetic runs for the run-database tests (see
 * db_fixture.h). */
#include "db_fixture.h"

#include "report/report.h"
#include "testlib.h"

#include <math.h>
#include <stdlib.h>

kt_synth_arm kt_synth_defaults(const char *label, double scale) {
    kt_synth_arm a = {
        .label = label, .mode = "two-models", .arm_path = "models/arm.gguf",
        .arm_sha256 = "aa11", .arm_bytes = 1000000, .bpw = 4.5, .scale = scale,
        .stream_seed = 1, .arm_seed = 2, .n_docs = 4, .per_doc = 64,
        .corpus_sha256 = "c0ffee", .ref_sha256 = "feed", .chunking = "doc", .ctx = 512};
    return a;
}

/* splitmix64 and a Box-Muller normal, so the stream is the same everywhere. */
static uint64_t next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double uniform(uint64_t *s) { return ((next(s) >> 11) + 0.5) / 9007199254740992.0; }
static double normal(uint64_t *s) {
    double u = uniform(s), v = uniform(s);
    return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

kld_stats *kt_synth_stats(const kt_synth_arm *a) {
    kld_stats *st;
    kld_error err = {0};
    if (kld_stats_create(&st, KLD_TOPK_DEFAULT, &err) != KLD_OK) {
        fprintf(stderr, "fixture: %s\n", err.msg);
        exit(2);
    }
    uint64_t stream = a->stream_seed * 7919 + 1, arm = a->arm_seed * 104729 + 3;
    for (size_t d = 0; d < a->n_docs; d++) {
        kld_stats_begin_doc(st, &err);
        for (size_t i = 0; i < a->per_doc; i++) {
            /* the stream: difficulty, token, reference confidence (shared by arms) */
            double base = exp(-3.0 + 1.3 * normal(&stream));
            double p_max = 0.15 + 0.85 * uniform(&stream);
            int32_t token = i + 1 == a->per_doc ? -1 : (int32_t)(next(&stream) % 32000);
            int32_t top_ref = (int32_t)(next(&stream) % 32000);
            double nll_ref = -log(p_max * (0.2 + 0.8 * uniform(&stream)));
            /* the arm */
            double kld = a->scale * base * exp(0.25 * normal(&arm));
            bool agree = uniform(&arm) > kld / (kld + 0.5);
            kld_position r = {
                .kld = kld, .kld_rev = kld * 1.1, .jsd = kld * 0.2,
                .nll_ref = token >= 0 ? nll_ref : NAN,
                .nll_arm = token >= 0 ? nll_ref + kld * (1 + normal(&arm)) : NAN,
                .p_ref_max = (float)p_max, .token = token, .top_ref = top_ref,
                .top_arm = agree ? top_ref : top_ref + 1, .ctx_pos = (uint32_t)(i % (size_t)a->ctx),
                .topk_hits = agree ? 9 : 6, .topk = KLD_TOPK_DEFAULT};
            if (r.nll_arm < 0) r.nll_arm = 0.001;
            if (kld_stats_add(st, &r, &err) != KLD_OK) {
                fprintf(stderr, "fixture: %s\n", err.msg);
                exit(2);
            }
        }
    }
    return st;
}

json_t *kt_synth_report(const kt_synth_arm *a, const kld_summary *s) {
    json_t *cfg = json_pack(
        "{s:s, s:{s:s,s:s,s:I,s:s,s:s,s:i}, s:{s:s,s:s,s:I,s:s,s:s,s:i,s:f,s:s}, "
        "s:{s:s,s:s,s:s,s:I}, s:s, s:I, s:i, s:i, s:s}",
        "version", kld_version(),
        "ref", "kind", "model", "path", "models/f16.gguf", "bytes", (json_int_t)8000000, "sha256",
        a->ref_sha256, "arch", "llama", "n_vocab", 32000,
        "arm", "kind", "model", "path", a->arm_path, "bytes", (json_int_t)a->arm_bytes, "sha256",
        a->arm_sha256, "arch", "llama", "n_vocab", 32000, "bits_per_weight", a->bpw, "policy",
        "uniform",
        "corpus", "name", "built-in", "kind", "text", "sha256", a->corpus_sha256, "documents",
        (json_int_t)a->n_docs,
        "chunking", a->chunking, "ctx", (json_int_t)a->ctx, "chunk", 128, "threads", 2, "mode",
        a->mode);
    if (!cfg) {
        fprintf(stderr, "fixture: json_pack failed\n");
        exit(2);
    }
    json_object_set_new(cfg, "levers", json_pack("{s:s}", "kv", "f16"));
    json_object_set(json_object_get(cfg, "arm"), "levers", json_object_get(cfg, "levers"));
    kld_report_run run = {.label = a->label, .config = cfg, .elapsed_s = 1.5, .ref_seconds = 0.5,
                          .arm_seconds = 0.5, .ref_tokens = s->n_positions, .arm_tokens = s->n_positions};
    json_t *j = kld_report_json(s, &run);
    json_decref(cfg);
    return j;
}

int64_t kt_synth_record(kld_db *db, const kt_synth_arm *a) {
    kld_stats *st = kt_synth_stats(a);
    kld_summary sum;
    kld_error err = {0};
    if (kld_stats_finalize(st, &sum, &err) != KLD_OK) {
        fprintf(stderr, "fixture: %s\n", err.msg);
        exit(2);
    }
    json_t *rep = kt_synth_report(a, &sum);
    kld_db_run run = {.label = a->label, .mode = a->mode, .report = rep, .summary = &sum,
                      .stats = st, .partial = false, .wall_s = 1.5,
                      .tokens_per_s = (double)sum.n_positions / 1.5};
    int64_t id = 0;
    if (kld_db_record_run(db, &run, &id, &err) != KLD_OK) {
        fprintf(stderr, "fixture: record %s: %s\n", a->label, err.msg);
        id = 0;
    }
    json_decref(rep);
    kld_stats_free(st);
    return id;
}
