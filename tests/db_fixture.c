/* db_fixture.c — synthetic runs for the run-database tests (see
 * db_fixture.h). */
#include "db_fixture.h"

#include "eval/bootstrap.h"

#include "report/report.h"
#include "testlib.h"

#include <math.h>
#include <stdlib.h>

kt_synth_arm kt_synth_defaults(const char *label, double scale) {
    kt_synth_arm a = {
        .label = label, .mode = "two-models", .arm_path = "models/arm.gguf",
        .arm_sha256 = "aa11", .arm_bytes = 1000000, .bpw = 4.5, .scale = scale,
        .stream_seed = 1, .arm_seed = 2, .n_docs = 4, .per_doc = 64,
        .corpus_sha256 = "c0ffee", .ref_sha256 = "feed", .chunking = "doc", .ctx = 512,
        .ref_path = "models/f16.gguf"};
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
        "ref", "kind", "model", "path", a->ref_path, "bytes", (json_int_t)8000000, "sha256",
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
    if (a->bootstrap > 0) {
        kld_record_source src;
        kld_stats_source(st, &src);
        if (kld_bootstrap_report(rep, &src, a->bootstrap, 0, NULL, &err) != KLD_OK) {
            fprintf(stderr, "fixture: bootstrap %s: %s\n", a->label, err.msg);
            exit(2);
        }
    }
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

static json_t *cap_acc(const unsigned char *ok, int n, json_t *items) {
    int c = 0;
    for (int i = 0; i < n; i++) c += ok[i];
    double p = n ? (double)c / n : 0;
    return json_pack("{s:f, s:f, s:i, s:i, s:o}", "accuracy", p, "stderr", n ? sqrt(p * (1 - p) / n) : 0.0,
                     "correct", c, "n", n, "items", items);
}

json_t *kt_synth_cap_report(const char *ref_path, const char *arm_path, double ref_level, double arm_level,
                            int n, uint64_t seed) {
    static const char *const tasks[] = {"mmlu", "gsm8k", "ifeval"};
    uint64_t s = seed;
    json_t *tj = json_object();
    double score[2] = {0, 0};
    unsigned char ok[2][256];
    if (n > 256) n = 256;
    for (int t = 0; t < 3; t++) {
        json_t *o = json_object();
        for (int a = 0; a < (arm_path ? 2 : 1); a++) {
            json_t *items = json_array();
            /* the tasks differ in difficulty, the arm is a little worse */
            double level = (a ? arm_level : ref_level) * (1.0 - 0.25 * t);
            for (int i = 0; i < n; i++) {
                ok[a][i] = uniform(&s) < level;
                json_array_append_new(items, json_pack("{s:i, s:s, s:b}", "item", i, "response", "made up",
                                                       "correct", ok[a][i]));
            }
            json_t *acc = cap_acc(ok[a], n, items);
            score[a] += json_real_value(json_object_get(acc, "accuracy")) / 3;
            json_object_set_new(o, a ? "arm" : "ref", acc);
        }
        if (arm_path) {
            double mean = 0, var = 0;
            int n01 = 0, n10 = 0;
            for (int i = 0; i < n; i++) {
                int d = (int)ok[1][i] - (int)ok[0][i];
                mean += d;
                n01 += d > 0;
                n10 += d < 0;
            }
            mean /= n;
            for (int i = 0; i < n; i++) {
                double d = (int)ok[1][i] - (int)ok[0][i] - mean;
                var += d * d;
            }
            json_object_set_new(o, "paired", json_pack("{s:f, s:f, s:i, s:i, s:i}", "diff", mean, "stderr",
                                                       n > 1 ? sqrt(var / (n - 1) / n) : 0.0, "arm_only_right",
                                                       n01, "ref_only_right", n10, "n", n));
        }
        json_object_set_new(tj, tasks[t], o);
    }
    json_t *cs = json_pack("{s:f}", "ref", score[0]);
    if (arm_path) {
        json_object_set_new(cs, "arm", json_real(score[1]));
        json_object_set_new(cs, "diff", json_real(score[1] - score[0]));
    }
    json_t *model = json_pack("{s:s, s:s, s:s, s:I, s:s, s:s, s:i, s:n, s:s, s:f}", "kind", "model", "path", ref_path,
                              "format", "gguf", "bytes", (json_int_t)2000000, "sha256", "feed", "arch", "llama",
                              "n_vocab", 32000, "policy", "levers", "reference", "bits_per_weight", 16.0);
    json_t *cfg = json_pack("{s:s, s:s, s:o, s:o, s:[sss], s:i, s:i, s:i, s:b, s:s}", "version", kld_version(),
                            "mode", "cap", "ref", model, "arm", json_null(), "tasks", "mmlu", "gsm8k", "ifeval",
                            "n", n, "seed", (int)seed, "max_new", 128, "chat", 1, "data", "../shared/capability");
    if (arm_path) {
        json_t *arm = json_deep_copy(model);
        json_object_set_new(arm, "path", json_string(arm_path));
        json_object_set_new(arm, "sha256", json_string("a4a4"));
        json_object_set_new(arm, "bits_per_weight", json_real(4.5));
        json_object_set_new(cfg, "arm", arm);
    }
    json_t *rep = json_pack("{s:s, s:i, s:i, s:b, s:o, s:o, s:b, s:o}", "ref", ref_path, "n", n, "max_new", 128,
                            "chat", 1, "tasks", tj, "capability_score", cs, "interrupted", 0, "config", cfg);
    if (arm_path) json_object_set_new(rep, "arm", json_string(arm_path));
    if (!rep) {
        fprintf(stderr, "fixture: cap report: json_pack failed\n");
        exit(2);
    }
    return rep;
}

int64_t kt_synth_cap_record(kld_db *db, const char *label, const json_t *report) {
    kld_db_run run = {.label = label, .mode = "cap", .report = report, .wall_s = 3.0, .tokens_per_s = NAN,
                      .threads = 2};
    int64_t id = 0;
    kld_error err = {0};
    if (kld_db_record_run(db, &run, &id, &err) != KLD_OK) {
        fprintf(stderr, "fixture: record %s: %s\n", label, err.msg);
        id = 0;
    }
    return id;
}
