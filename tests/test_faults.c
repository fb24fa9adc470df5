/* test_faults.c — allocation-failure injection, SQLite-style. The test binary
 * is linked with --wrap for malloc, calloc, realloc, strdup, aligned_alloc
 * and posix_memalign (tests/faults.cmake), so every allocation kldeval's own
 * code makes goes through the counters below. Each operation is first run
 * once to count its allocations; then for N = 1, 2, ... every N-th
 * allocation fails in turn, until the operation succeeds again. At every N
 * the operation must return an error (no crash: ASan and UBSan watch the
 * build in CI), the error must say that memory could not be had, nothing may
 * leak (LeakSanitizer at exit), and an output that failed is not left
 * half-written (a dump has no manifest, a report file is absent or whole).
 * Operations: opening a GGUF model, a llama2.c checkpoint and a Hugging Face
 * folder, a tokenizer, a kl run of a tiny model, a policy arm, a LoRA arm, a
 * dump and its scoring, a run-database write, an HTML report.
 * Allocations made inside shared libraries (jansson, SQLite, PCRE2) are not
 * counted: their failures are theirs to report. (Counting jansson's through
 * json_set_alloc_funcs was tried: jansson 2.14's parser writes past its
 * buffer when its allocator fails, valgrind shows, so it cannot be tested
 * that way.) */
#include "db_fixture.h"
#include "eval/dump_driver.h"
#include "eval/kl_driver.h"
#include "store/dump.h"
#include "lora_fixture.h"
#include "report/report_html.h"
#include "testlib.h"
#include "tokenizer/tokenizer.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- the counters ---- */

static atomic_long n_allocs;    /* allocations since arm() */
static atomic_long fail_at;     /* 0: none fails; N: the N-th fails */
static atomic_long n_failed;    /* allocations refused (the N-th only) */

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
void *__real_aligned_alloc(size_t align, size_t n);
int __real_posix_memalign(void **p, size_t align, size_t n);

/* A place for a debugger's breakpoint: `break fault_hit` shows who asked. */
__attribute__((noinline)) void fault_hit(long k) {
    __asm__ volatile("" ::"r"(k));
}

static bool refuse(void) {
    long k = atomic_fetch_add(&n_allocs, 1) + 1, f = atomic_load(&fail_at);
    if (f && k == f) {
        atomic_fetch_add(&n_failed, 1);
        fault_hit(k);
        return true;
    }
    return false;
}

void *__wrap_malloc(size_t n) { return refuse() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t size) { return refuse() ? NULL : __real_calloc(n, size); }
/* realloc(p, 0) frees: not an allocation that can fail */
void *__wrap_realloc(void *p, size_t n) { return n && refuse() ? NULL : __real_realloc(p, n); }
char *__wrap_strdup(const char *s) { return refuse() ? NULL : __real_strdup(s); }
void *__wrap_aligned_alloc(size_t align, size_t n) { return refuse() ? NULL : __real_aligned_alloc(align, n); }
int __wrap_posix_memalign(void **p, size_t align, size_t n) {
    return refuse() ? ENOMEM : __real_posix_memalign(p, align, n);
}

static void arm(long n) {
    atomic_store(&n_allocs, 0);
    atomic_store(&n_failed, 0);
    atomic_store(&fail_at, n);
}

/* ---- the operations ---- */

#define S260 KT_SHARED "/models/stories260K"

static char dir[600], lora_model[700], lora_adapter[700], db_path[700], html_path[700], dump_dir[700];
static int64_t db_ids[2];

typedef kld_status (*op_fn)(kld_error *err);

static kld_status open_close(const char *path, kld_error *err) {
    kld_model *m = NULL;
    kld_status st = kld_model_open(path, NULL, &m, err);
    kld_model_close(m);
    return st;
}
static kld_status op_gguf(kld_error *err) { return open_close(S260 "/f32.gguf", err); }
static kld_status op_llama2c(kld_error *err) { return open_close(S260, err); }
static kld_status op_hf(kld_error *err) { return open_close(KT_SHARED "/models/rand-llama-hf", err); }

static kld_status op_tokenizer(kld_error *err) {
    kld_model *m = NULL;
    kld_tokenizer *t = NULL;
    kld_status st = kld_model_open(S260 "/f32.gguf", NULL, &m, err);
    if (!st) st = kld_tok_open_source(kld_model_source(m), &t, err);
    kld_tok_ids ids = {0};
    static const char text[] = "Once upon a time, a little girl named Lily found a shiny stone.";
    if (!st) st = kld_tok_encode(t, text, sizeof text - 1, 0, &ids, err);
    kld_tok_ids_free(&ids);
    kld_tok_free(t);
    kld_model_close(m);
    return st;
}

static char ids_path[700]; /* ids for the LoRA base, a model without a tokenizer */

static kld_status kl_of(const kld_arm_spec *ref, const kld_arm_spec *arm, kld_error *err) {
    kld_kl_config c;
    kld_kl_config_defaults(&c);
    c.ref = *ref;
    c.arm = *arm;
    c.chunk = 16;
    if (ref->kind == KLD_ARM_MODEL) { /* a teacher brings its own windows */
        c.ctx = 32;
        c.max_docs = 2;
        if (ref->path == lora_model) {
            c.ids_path = ids_path;
            c.max_docs = 0;
        }
    }
    c.n_threads = 1; /* one order of allocations: the same N fails the same one */
    kld_kl_result r;
    kld_status st = kld_kl_run(&c, &r, err);
    kld_kl_result_free(&r);
    return st;
}

static kld_status op_kl(kld_error *err) {
    return kl_of(&(kld_arm_spec){.kind = KLD_ARM_MODEL, .path = S260 "/f32.gguf"},
                 &(kld_arm_spec){.kind = KLD_ARM_MODEL, .path = S260 "/q8_0.gguf"}, err);
}

static kld_status op_policy(kld_error *err) {
    return kl_of(&(kld_arm_spec){.kind = KLD_ARM_MODEL, .path = S260 "/f32.gguf"},
                 &(kld_arm_spec){.kind = KLD_ARM_MODEL, .path = S260 "/f32.gguf@q8_0,ffn_down=f16"}, err);
}

static kld_status op_lora(kld_error *err) {
    char arm[1500];
    snprintf(arm, sizeof arm, "%s+%s", lora_model, lora_adapter);
    return kl_of(&(kld_arm_spec){.kind = KLD_ARM_MODEL, .path = lora_model},
                 &(kld_arm_spec){.kind = KLD_ARM_MODEL, .path = arm}, err);
}

static void rm_dump(void) {
    char cmd[800];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dump_dir);
    if (system(cmd) != 0) CHECK(false, "%s", cmd);
}

static kld_status op_dump(kld_error *err) {
    rm_dump();
    kld_dump_config c;
    kld_dump_config_defaults(&c);
    c.model_path = S260 "/f32.gguf";
    c.out = dump_dir;
    c.ctx = 32;
    c.chunk = 16;
    c.max_docs = 2;
    c.top_k = 16;
    c.n_threads = 1;
    kld_dump_result r;
    kld_status st = kld_dump_run(&c, &r, err);
    kld_dump_result_free(&r);
    return st;
}

static kld_status op_dump_scoring(kld_error *err) {
    return kl_of(&(kld_arm_spec){.kind = KLD_ARM_TEACHER, .path = dump_dir},
                 &(kld_arm_spec){.kind = KLD_ARM_MODEL, .path = S260 "/q8_0.gguf"}, err);
}

/* what op_db records, made before any allocation is made to fail */
static kld_stats *db_stats;
static kld_summary db_sum;
static json_t *db_report;

static kld_status op_db(kld_error *err) {
    remove(db_path);
    kld_db *db = NULL;
    kld_status st = kld_db_open(db_path, &db, err);
    if (st) return st;
    int64_t id = 0;
    kld_db_run run = {"faults", "two-models", db_report, &db_sum, db_stats, NULL, false, 1.0, 100.0, 1};
    st = kld_db_record_run(db, &run, &id, err);
    kld_db_close(db);
    return st;
}

static kld_status op_report(kld_error *err) {
    kld_db *db = NULL;
    kld_status st = kld_db_open_existing(db_path, &db, err);
    if (!st) st = kld_report_html_write(db, db_ids, 2, html_path, err);
    kld_db_close(db);
    return st;
}

/* ---- the driver ---- */

static bool mentions_memory(const char *msg) {
    return strstr(msg, "memory") || strstr(msg, "allocat") || strstr(msg, "cannot start");
}

/* After a failure: what the operation writes is absent or complete. */
static void check_outputs(const char *name, long n) {
    struct stat sb;
    char p[800];
    if (!strcmp(name, "dump")) {
        /* The manifest is written last: present means the dump must open. */
        snprintf(p, sizeof p, "%s/manifest.json", dump_dir);
        if (stat(p, &sb) == 0) {
            kld_dump *d = NULL;
            kld_error e2 = {0};
            arm(0);
            CHECK(kld_dump_open(dump_dir, 0, &d, &e2) == KLD_OK,
                  "dump, allocation %ld failed: a dump with a manifest opens (%s)", n, e2.msg);
            kld_dump_close(d);
        }
    }
    if (!strcmp(name, "report") && stat(html_path, &sb) == 0) {
        char *t = kt_read_file(html_path, NULL);
        CHECK(t && strstr(t, "</html>"), "report, allocation %ld failed: %s is whole or absent", n, html_path);
        free(t);
    }
}

static long total_points;

static void run_op(const char *name, op_fn fn) {
    const char *only = getenv("KLD_FAULTS_ONLY"); /* NAME: inject into this operation alone */
    kld_error err = {0};
    if (only && strcmp(only, name)) { /* still run: what it writes, the next may read */
        arm(0);
        fn(&err);
        return;
    }
    arm(0);
    kld_status st = fn(&err);
    long total = atomic_load(&n_allocs);
    CHECK(st == KLD_OK, "%s succeeds without injected failures: %s", name, err.msg);
    if (st) return;
    long n = 1, bad_msgs = 0;
    /* KLD_FAULTS_FROM=NAME:N: start NAME at its N-th allocation (to debug one) */
    const char *from = getenv("KLD_FAULTS_FROM"), *colon = from ? strchr(from, ':') : NULL;
    if (colon && (size_t)(colon - from) == strlen(name) && !strncmp(from, name, strlen(name)))
        n = atol(colon + 1);
    for (;; n++) {
        if (!strcmp(name, "report")) remove(html_path);
        memset(&err, 0, sizeof err);
        if (getenv("KLD_FAULTS_TRACE")) fprintf(stderr, "%s %ld\n", name, n);
        arm(n);
        st = fn(&err);
        bool failed_one = atomic_load(&n_failed) > 0;
        arm(0);
        if (!failed_one) break; /* fewer than n allocations: done */
        if (st == KLD_OK) continue; /* the failure was tolerated (a cache, an optional buffer) */
        if (!mentions_memory(err.msg)) {
            if (bad_msgs++ < 5)
                CHECK(false, "%s, allocation %ld of %ld failed: the error does not say memory: %s", name, n,
                      total, err.msg);
        }
        check_outputs(name, n);
    }
    CHECK(bad_msgs == 0, "%s: %ld failures reported without naming memory", name, bad_msgs);
    printf("%-12s %6ld allocations, each failed in turn\n", name, n - 1);
    total_points += n - 1;
}

int main(void) {
    snprintf(dir, sizeof dir, "%s/faults", kt_build_dir());
    mkdir(dir, 0755);
    snprintf(lora_model, sizeof lora_model, "%s/lora-base.gguf", dir);
    snprintf(lora_adapter, sizeof lora_adapter, "%s/lora.gguf", dir);
    snprintf(db_path, sizeof db_path, "%s/runs.sqlite", dir);
    snprintf(html_path, sizeof html_path, "%s/report.html", dir);
    snprintf(dump_dir, sizeof dump_dir, "%s/teacher", dir);
    synth_shape shape;
    synth_default(&shape, "llama");
    shape.mat_type = KLD_TYPE_F32;
    shape.head_dim = 16;
    shape.rope_base = 10000;
    CHECK(synth_write_gguf(&shape, lora_model), "synthesized LoRA base");
    adapter ad;
    make_adapter(&ad, &shape, 11, false);
    write_gguf_adapter(&ad, &(gguf_opts){.alpha = 8}, lora_adapter);
    free_adapter(&ad);
    snprintf(ids_path, sizeof ids_path, "%s/lora-ids.bin", dir);
    int32_t ids[64];
    for (int i = 0; i < 64; i++) ids[i] = (int32_t)((i * 37 + 11) % shape.n_vocab);
    kt_write_file(ids_path, ids, sizeof ids);

    kt_synth_arm sa = kt_synth_defaults("faults", 1.0);
    sa.n_docs = 2;
    sa.per_doc = 16;
    kld_error err = {0};
    db_stats = kt_synth_stats(&sa);
    CHECK_OK(kld_stats_finalize(db_stats, &db_sum, &err), err);
    db_report = kt_synth_report(&sa, &db_sum);
    static const struct {
        const char *name;
        op_fn fn;
    } ops[] = {{"gguf", op_gguf},       {"llama2c", op_llama2c}, {"hf", op_hf},
               {"tokenizer", op_tokenizer}, {"kl", op_kl},     {"policy", op_policy},
               {"lora", op_lora},       {"dump", op_dump},       {"dump-score", op_dump_scoring},
               {"db", op_db}};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) run_op(ops[i].name, ops[i].fn);
    json_decref(db_report);
    kld_stats_free(db_stats);
    /* the report reads two rows the database holds */
    kld_db *db = NULL;
    remove(db_path);
    CHECK_OK(kld_db_open(db_path, &db, &err), err);
    if (db) {
        kt_synth_arm a = kt_synth_defaults("a", 1.0), b = kt_synth_defaults("b", 1.5);
        b.arm_seed = 9;
        db_ids[0] = kt_synth_record(db, &a);
        db_ids[1] = kt_synth_record(db, &b);
        kld_db_close(db);
        run_op("report", op_report);
    }
    printf("%ld injection points in all\n", total_points);
    rm_dump();
    return kt_finish();
}
