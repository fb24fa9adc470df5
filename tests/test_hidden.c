/* test_hidden.c — hidden-state teachers (dump format 3): scoring an arm
 * against a dump of the reference's final-norm hidden states gives the
 * lockstep run's figures bit for bit (every record equal, byte for byte) on
 * a tied head (rand-llama), an untied one (phi3), a final soft-cap (gemma2),
 * qwen3 and a mixture of experts (qwen3moe, synthesized), and for a
 * candidate hidden-state dump of the arm too; bf16 and f16 storage measure
 * their own KL r into the manifest, and the KLD scored from them lies within
 * 3 sqrt(2 r K) + r of the exact K; records are 4·n_embd bytes plus the
 * 24-byte sidecar; bad inputs (a truncated file, NaN in a row, another
 * model's head, a manifest whose model is missing, a wrong n_embd) are
 * errors naming what is wrong. */
#include "testlib.h"
#include "test_forward_models.h"

#include "eval/dump_driver.h"
#include "eval/kl_driver.h"
#include "store/dump.h"
#include "tensor/types.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>

#define CTX 40
#define CHUNKS 3

static char *scratch(const char *name) {
    char *p = malloc(4096);
    snprintf(p, 4096, "%s/hidden-%s", kt_build_dir(), name);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", p);
    if (system(cmd) != 0) exit(2);
    return p;
}

/* A hidden-state dump of model (a candidate of teacher when given). */
static bool dump_hidden(const char *model, const char *out, const char *ids, const char *teacher,
                        int dtype, kld_dump_result *r, kld_error *err) {
    kld_dump_config c;
    kld_dump_config_defaults(&c);
    c.model_path = model;
    c.out = out;
    c.hidden = true;
    c.hidden_dtype = dtype;
    c.indices_from = teacher;
    if (!teacher) {
        c.ids_path = ids;
        c.ctx = CTX;
        c.max_chunks = CHUNKS;
    }
    c.chunk = 16;
    c.n_threads = 2;
    bool ok = kld_dump_run(&c, r, err) == KLD_OK;
    kld_dump_result_free(r); /* the figures stay; the run database's report is not needed */
    return ok;
}

static kld_position *run_kl(const kld_kl_config *c, size_t *n, kld_error *err) {
    kld_kl_result r;
    if (kld_kl_run(c, &r, err) != KLD_OK) return NULL;
    const kld_position *rec = kld_stats_records(r.stats, n);
    kld_position *copy = malloc(*n * sizeof *copy + 1);
    memcpy(copy, rec, *n * sizeof *copy);
    kld_kl_result_free(&r);
    return copy;
}

static void lockstep_config(kld_kl_config *c, const char *ref, const char *arm, const char *ids) {
    kld_kl_config_defaults(c);
    c->ref = (kld_arm_spec){.kind = KLD_ARM_MODEL, .path = ref};
    c->arm = (kld_arm_spec){.kind = KLD_ARM_MODEL, .path = arm};
    c->ids_path = ids;
    c->chunking = KLD_CHUNKING_STREAM;
    c->ctx = CTX;
    c->max_chunks = CHUNKS;
    c->chunk = 16;
    c->n_threads = 2;
}

/* ids: a stream of n ids below n_vocab (an ids corpus needs no tokenizer). */
static char *ids_file(const char *name, int64_t n_vocab) {
    char *p = malloc(4096);
    snprintf(p, 4096, "%s/hidden-%s.ids", kt_build_dir(), name);
    int32_t ids[CTX * CHUNKS + 8];
    tf_make_ids(ids, CTX * CHUNKS + 8, n_vocab, 11);
    kt_write_file(p, ids, sizeof ids);
    return p;
}

/* The v3 run equals the lockstep run, record for record. */
static void equal_to_lockstep(const char *name, const char *ref, const char *arm, int64_t n_vocab) {
    char *ids = ids_file(name, n_vocab), *t = scratch(name);
    kld_dump_result dr;
    kld_error err = {0};
    if (!dump_hidden(ref, t, ids, NULL, KLD_DUMP_HIDDEN_F32, &dr, &err)) {
        CHECK(false, "%s: dump --hidden: %s", name, err.msg);
        return;
    }
    kld_kl_config c;
    lockstep_config(&c, ref, arm, ids);
    size_t na = 0, nb = 0;
    kld_position *a = run_kl(&c, &na, &err);
    CHECK(a != NULL, "%s: lockstep: %s", name, err.msg);
    kld_kl_config_defaults(&c);
    c.ref = (kld_arm_spec){.kind = KLD_ARM_TEACHER, .path = t};
    c.arm = (kld_arm_spec){.kind = KLD_ARM_MODEL, .path = arm};
    c.chunk = 7; /* another chunk: the head's product does not depend on it */
    c.n_threads = 2;
    kld_position *b = run_kl(&c, &nb, &err);
    CHECK(b != NULL, "%s: against the hidden-state teacher: %s", name, err.msg);
    if (a && b)
        CHECK(na == nb && na > 0 && memcmp(a, b, na * sizeof *a) == 0,
              "%s: %zu records lockstep, %zu from the hidden states, %s", name, na, nb,
              na == nb ? "values differ" : "counts differ");
    double mean = 0;
    for (size_t i = 0; a && i < na; i++) mean += a[i].kld / (double)na;
    printf("%-10s %zu positions, mean KLD %.6e: the hidden-state teacher gives the same bits\n",
           name, na, mean);
    free(a);
    free(b);
    free(ids);
    free(t);
}

static void candidate_and_sizes(void) {
    const char *ref = KT_SHARED "/models/rand-llama/f16.gguf";
    const char *arm = KT_SHARED "/models/rand-llama/q4_K_M.gguf";
    char *ids = ids_file("cand", 32000), *t = scratch("cand-t"), *cd = scratch("cand-c");
    kld_dump_result dr;
    kld_error err = {0};
    if (!dump_hidden(ref, t, ids, NULL, KLD_DUMP_HIDDEN_F32, &dr, &err) ||
        !dump_hidden(arm, cd, NULL, t, KLD_DUMP_HIDDEN_F32, &dr, &err)) {
        CHECK(false, "candidate: %s", err.msg);
        return;
    }
    kld_kl_config c;
    lockstep_config(&c, ref, arm, ids);
    size_t na = 0, nb = 0;
    kld_position *a = run_kl(&c, &na, &err);
    kld_kl_config_defaults(&c);
    c.ref = (kld_arm_spec){.kind = KLD_ARM_TEACHER, .path = t};
    c.arm = (kld_arm_spec){.kind = KLD_ARM_CANDIDATE, .path = cd};
    kld_position *b = run_kl(&c, &nb, &err);
    CHECK(a && b && na == nb && memcmp(a, b, na * sizeof *a) == 0,
          "two hidden-state dumps (teacher and candidate) give the lockstep records: %s", err.msg);
    free(a);
    free(b);
    /* size: 4·n_embd per record plus the 24-byte sidecar */
    char p[4200];
    struct stat sb, se;
    snprintf(p, sizeof p, "%s/seq-0.bin", t);
    int s1 = stat(p, &sb);
    snprintf(p, sizeof p, "%s/seq-0.ext.bin", t);
    int s2 = stat(p, &se);
    CHECK(s1 == 0 && s2 == 0 && sb.st_size == (CTX - 1) * 4 * 256 && se.st_size == (CTX - 1) * 24,
          "records of 4 x 256 bytes and 24-byte sidecars (%lld, %lld bytes for %d positions)",
          (long long)sb.st_size, (long long)se.st_size, CTX - 1);
    printf("bytes per position: %d (hidden) + 24 (sidecar), against %d of llama.cpp's base file "
           "for n_vocab 32000\n", 4 * 256, (2 * 16000 + 4) * 2);
    /* inspect's facts */
    kld_dump *d = NULL;
    CHECK_OK(kld_dump_open(t, 0, &d, &err), err);
    json_t *facts = d ? kld_dump_describe(d) : NULL;
    CHECK(facts && json_integer_value(json_object_get(facts, "format_version")) == 3 &&
              json_integer_value(json_object_get(facts, "n_embd")) == 256 &&
              json_integer_value(json_object_get(facts, "bytes_per_position")) == 4 * 256 + 24 &&
              json_is_true(json_object_get(json_object_get(facts, "head"), "tied")),
          "inspect describes the hidden-state dump (format 3, n_embd 256, 1048 bytes a position, tied head)");
    json_decref(facts);
    kld_dump_close(d);
    /* two shards merge into the unsharded dump's bytes */
    char *sh0 = scratch("shard0"), *sh1 = scratch("shard1"), *mg = scratch("merged");
    const char *dirs[2] = {sh0, sh1};
    bool ok = true;
    for (int k = 0; k < 2 && ok; k++) {
        kld_dump_config c2;
        kld_dump_config_defaults(&c2);
        c2.model_path = ref;
        c2.out = dirs[k];
        c2.hidden = true;
        c2.ids_path = ids;
        c2.ctx = CTX;
        c2.max_chunks = CHUNKS;
        c2.n_threads = 2;
        c2.shard = (kld_shard){(uint32_t)k, 2, KLD_SHARD_MOD};
        ok = kld_dump_run(&c2, &dr, &err) == KLD_OK;
        kld_dump_result_free(&dr);
    }
    kld_dump_merge_info info = {0};
    ok = ok && kld_dump_merge(mg, dirs, 2, &info, &err) == KLD_OK;
    CHECK(ok, "shards of a hidden-state dump merge: %s", err.msg);
    for (int i = 0; ok && i < CHUNKS; i++) {
        char a[4300], b[4300];
        snprintf(a, sizeof a, "%s/seq-%d.bin", t, i);
        snprintf(b, sizeof b, "%s/seq-%d.bin", mg, i);
        size_t na2, nb2;
        char *x = kt_read_file(a, &na2), *y = kt_read_file(b, &nb2);
        CHECK(na2 == nb2 && !memcmp(x, y, na2), "merged seq-%d.bin equals the unsharded one", i);
        free(x);
        free(y);
    }
    kld_dump_merge_info_free(&info);
    free(sh0);
    free(sh1);
    free(mg);
    free(ids);
    free(t);
    free(cd);
}

/* bf16 and f16: the measured KL of the rounding in the manifest, and the
 * scored KLD within a few times it of the exact one. */
static void rounded_dtypes(void) {
    const char *ref = KT_SHARED "/models/rand-llama/f16.gguf";
    const char *arm = KT_SHARED "/models/rand-llama/q8_0.gguf";
    char *ids = ids_file("round", 32000);
    kld_kl_config c;
    lockstep_config(&c, ref, arm, ids);
    kld_error err = {0};
    kld_kl_result exact;
    kld_summary se;
    if (kld_kl_run(&c, &exact, &err) || kld_stats_finalize(exact.stats, &se, &err)) {
        CHECK(false, "lockstep: %s", err.msg);
        return;
    }
    kld_kl_result_free(&exact);
    const int dts[2] = {KLD_DUMP_HIDDEN_BF16, KLD_DUMP_HIDDEN_F16};
    for (int i = 0; i < 2; i++) {
        char *t = scratch(kld_dump_hidden_name(dts[i]));
        kld_dump_result dr;
        if (!dump_hidden(ref, t, ids, NULL, dts[i], &dr, &err)) {
            CHECK(false, "%s: %s", kld_dump_hidden_name(dts[i]), err.msg);
            continue;
        }
        kld_dump *d = NULL;
        CHECK_OK(kld_dump_open(t, 0, &d, &err), err);
        const kld_dump_meta *m = d ? kld_dump_meta_of(d) : NULL;
        CHECK(m && m->has_rounding && m->rounding_kld_mean > 0 && m->rounding_kld_max >= m->rounding_kld_mean &&
                  m->rounding_kld_mean == dr.rounding_kld_mean,
              "%s: the manifest keeps the rounding's KL", kld_dump_hidden_name(dts[i]));
        kld_kl_config v;
        kld_kl_config_defaults(&v);
        v.ref = (kld_arm_spec){.kind = KLD_ARM_TEACHER, .path = t};
        v.arm = (kld_arm_spec){.kind = KLD_ARM_MODEL, .path = arm};
        kld_kl_result r;
        kld_summary s;
        if (kld_kl_run(&v, &r, &err) || kld_stats_finalize(r.stats, &s, &err)) {
            CHECK(false, "%s scoring: %s", kld_dump_hidden_name(dts[i]), err.msg);
        } else {
            double diff = fabs(s.kld.mean - se.kld.mean);
            printf("%s hidden states: rounding KL mean %.3e, max %.3e; q8_0's KLD %.6e against "
                   "%.6e exact (|diff| %.2e)\n", kld_dump_hidden_name(dts[i]), m ? m->rounding_kld_mean : NAN,
                   m ? m->rounding_kld_max : NAN, s.kld.mean, se.kld.mean, diff);
            /* a perturbation of the teacher of KL r moves a KLD K by about
             * sqrt(2 r K) at first order (Cauchy-Schwarz) plus r */
            double bound = m ? 3 * sqrt(2 * m->rounding_kld_mean * se.kld.mean) + m->rounding_kld_mean : 0;
            CHECK(m && diff <= bound, "%s: the scored mean within %.2e (3 sqrt(2 r K) + r) of the "
                  "exact one: |diff| %.2e", kld_dump_hidden_name(dts[i]), bound, diff);
            kld_kl_result_free(&r);
        }
        kld_dump_close(d);
        free(t);
    }
    free(ids);
}

static void expect_error(const char *what, kld_kl_config *c, const char *want1, const char *want2) {
    kld_kl_result r;
    kld_error err = {0};
    kld_status st = kld_kl_run(c, &r, &err);
    CHECK(st != KLD_OK && strstr(err.msg, want1) && (!want2 || strstr(err.msg, want2)),
          "%s: %s (want '%s'%s%s)", what, st ? err.msg : "no error", want1, want2 ? ", " : "",
          want2 ? want2 : "");
    if (!st) kld_kl_result_free(&r);
}

static void bad_inputs(void) {
    const char *ref = KT_SHARED "/models/rand-llama/f16.gguf";
    const char *arm = KT_SHARED "/models/rand-llama/q8_0.gguf";
    char *ids = ids_file("bad", 32000), *t = scratch("bad");
    kld_dump_result dr;
    kld_error err = {0};
    if (!dump_hidden(ref, t, ids, NULL, KLD_DUMP_HIDDEN_F32, &dr, &err)) {
        CHECK(false, "bad: dump: %s", err.msg);
        return;
    }
    kld_kl_config c;
    kld_kl_config_defaults(&c);
    c.ref = (kld_arm_spec){.kind = KLD_ARM_TEACHER, .path = t};
    c.arm = (kld_arm_spec){.kind = KLD_ARM_MODEL, .path = arm};
    /* another model's head */
    c.ref.head = arm;
    expect_error("another head", &c, "head.sha256", "not the head");
    c.ref.head = NULL;
    char cmd[30000], p[4200], q[4200];
    /* a NaN in a row */
    snprintf(cmd, sizeof cmd, "rm -rf '%s.nan' && cp -r '%s' '%s.nan'", t, t, t);
    CHECK(system(cmd) == 0, "copy");
    snprintf(p, sizeof p, "%s.nan/seq-1.bin", t);
    FILE *f = fopen(p, "r+b");
    float nan_v = NAN;
    if (f) fseek(f, 4 * 256 * 3 + 4 * 17, SEEK_SET), fwrite(&nan_v, 4, 1, f), fclose(f);
    snprintf(q, sizeof q, "%s.nan", t);
    c.ref.path = q;
    expect_error("NaN in a row", &c, "record 3", "not finite");
    /* a truncated file */
    snprintf(cmd, sizeof cmd, "rm -rf '%s.trunc' && cp -r '%s' '%s.trunc' && truncate -s -100 '%s.trunc/seq-2.bin'",
             t, t, t, t);
    CHECK(system(cmd) == 0, "copy");
    snprintf(q, sizeof q, "%s.trunc", t);
    c.ref.path = q;
    expect_error("a truncated file", &c, "seq-2.bin", NULL);
    /* a manifest naming a missing model, and a wrong n_embd */
    const struct {
        const char *name, *jq, *want1, *want2;
    } edits[] = {{"missing", ".model = \"/nonexistent/model.gguf\"", "/nonexistent/model.gguf", "its head"},
                 {"n_embd", ".n_embd = 255", "head", "n_embd 255"},
                 {"dtype", ".hidden_dtype = \"float8\"", "hidden_dtype", "float8"},
                 {"nohead", "del(.head)", "head", "missing"},
                 {"topk", ".top_k = 8", "top_k", "hidden states"}};
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        snprintf(q, sizeof q, "%s.%s", t, edits[i].name);
        snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s' && jq '%s' '%s/manifest.json' > '%s/m' "
                 "&& mv '%s/m' '%s/manifest.json'", q, t, q, edits[i].jq, t, q, q, q);
        CHECK(system(cmd) == 0, "edit %s", edits[i].name);
        c.ref.path = q;
        expect_error(edits[i].name, &c, edits[i].want1, edits[i].want2);
    }
    free(ids);
    free(t);
}

int main(void) {
    equal_to_lockstep("rand-llama", KT_SHARED "/models/rand-llama/f16.gguf",
                      KT_SHARED "/models/rand-llama/q4_K_M.gguf", 32000);
    equal_to_lockstep("phi3", KT_SHARED "/models/phi3/f16.gguf",
                      KT_SHARED "/models/phi3/f16.gguf@q8_0", 512);
    equal_to_lockstep("gemma2", KT_SHARED "/models/gemma2/f16.gguf",
                      KT_SHARED "/models/gemma2/f16.gguf@q8_0", 32000);
    const char *archs[2] = {"qwen3", "qwen3moe"};
    for (int i = 0; i < 2; i++) {
        synth_shape s;
        synth_default(&s, archs[i]);
        if (i == 1) {
            s.n_expert = 4;
            s.n_expert_used = 2;
            s.n_ff_exp = 32;
        }
        char path[4200], arm[4300];
        snprintf(path, sizeof path, "%s/hidden-%s.gguf", kt_build_dir(), archs[i]);
        if (!synth_write_gguf(&s, path)) {
            CHECK(false, "synthesize %s", archs[i]);
            continue;
        }
        snprintf(arm, sizeof arm, "%s@q8_0", path);
        equal_to_lockstep(archs[i], path, arm, s.n_vocab);
    }
    candidate_and_sizes();
    rounded_dtypes();
    bad_inputs();
    return kt_finish();
}
