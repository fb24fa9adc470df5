/* test_report_html.c — the HTML report in a real browser: records five
 * synthetic arms (four sharing the token stream, one from another corpus
 * without per-position values) and two capability runs (one with an arm,
 * one with a single model), writes the report with `kldeval report`,
 * exports the database with `kldeval runs export --jsonl`, and lets
 * tests/browser/check_report.js (headless Chromium) check charts, numbers,
 * console and network, and save build/test_report_html/report.png; then a
 * real precision sweep and a real KV cache sweep (kl --sweep kv=…: the
 * quality-vs-bits chart) the same way, and two real `kldeval diff` runs (one
 * layer changed, with --matrices: +inf SQNR in layer 0, a heat map; a
 * whole-model q8_0 arm): the SQNR charts, layer tables and heat map at the
 * database's report.diff values. Needs
 * chromium and tests/browser/node_modules (tools/setup.sh or
 * tests/browser/setup.sh installs both). */
#include "db_fixture.h"
#include "testlib.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>

static const char *kldeval;

static int sh(const char *cmd) {
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_report_html KLDEVAL\n");
        return 2;
    }
    kldeval = argv[1];
    char dir[512], db_path[600], html[600], jsonl[600], png[600], cmd[4096];
    snprintf(dir, sizeof dir, "%s/test_report_html", kt_build_dir());
    mkdir(dir, 0755);
    snprintf(db_path, sizeof db_path, "%s/runs.sqlite", dir);
    snprintf(html, sizeof html, "%s/report.html", dir);
    snprintf(jsonl, sizeof jsonl, "%s/export.jsonl", dir);
    snprintf(png, sizeof png, "%s/report.png", dir);
    remove(db_path);
    remove(html);
    remove(png);

    kld_db *db;
    kld_error err = {0};
    CHECK_OK(kld_db_open(db_path, &db, &err), err);
    if (!db) return kt_finish();
    static const struct { const char *label, *file; double scale, bpw; int64_t bytes; } arms[] = {
        {"q8_0", "models/llama-q8_0.gguf", 0.12, 8.5, 7340032},
        {"q4_K_M", "models/llama-q4_K_M.gguf", 1.0, 4.85, 4404019},
        {"q4_0", "models/llama-q4_0.gguf", 1.6, 4.5, 4089446},
        {"q3_K_S", "models/llama-q3_K_S.gguf", 3.2, 3.5, 3250585},
    };
    int64_t ids[7];
    for (int i = 0; i < 4; i++) {
        kt_synth_arm a = kt_synth_defaults(arms[i].label, arms[i].scale);
        a.arm_path = arms[i].file;
        a.bpw = arms[i].bpw;
        a.arm_bytes = arms[i].bytes;
        a.arm_seed = (uint64_t)(10 + i);
        a.n_docs = 8;
        a.per_doc = 300;
        a.bootstrap = i < 3 ? 200 : 0; /* three with intervals, one without: both kinds of cell */
        ids[i] = kt_synth_record(db, &a);
        CHECK(ids[i] > 0, "recorded %s", arms[i].label);
    }
    /* another corpus, no per-position values: compared unpaired, CDF from percentiles */
    kt_synth_arm o = kt_synth_defaults("q2_K other corpus", 6.0);
    o.arm_path = "models/llama-q2_K.gguf";
    o.bpw = 2.6;
    o.arm_bytes = 2621440;
    o.corpus_sha256 = "other";
    o.stream_seed = 5;
    kld_stats *st = kt_synth_stats(&o);
    kld_summary sum;
    CHECK_OK(kld_stats_finalize(st, &sum, &err), err);
    json_t *rep = kt_synth_report(&o, &sum);
    kld_db_run run = {.label = o.label, .mode = "two-models", .report = rep, .summary = &sum,
                      .wall_s = 2, .tokens_per_s = 100};
    ids[4] = 0;
    CHECK_OK(kld_db_record_run(db, &run, &ids[4], &err), err);
    json_decref(rep);
    kld_stats_free(st);
    /* capability runs: a section of their own (table + grouped bar chart) */
    json_t *cap = kt_synth_cap_report("models/llama-f16.gguf", "models/llama-q4_K_M.gguf", 0.8, 0.7, 40, 3);
    ids[5] = kt_synth_cap_record(db, "cap f16 vs q4_K_M", cap);
    json_decref(cap);
    cap = kt_synth_cap_report("models/llama-q3_K_S.gguf", NULL, 0.6, 0, 30, 4);
    ids[6] = kt_synth_cap_record(db, "cap q3_K_S", cap);
    json_decref(cap);
    CHECK(ids[5] > 0 && ids[6] > 0, "recorded two capability runs");
    kld_db_close(db);

    snprintf(cmd, sizeof cmd, "'%s' report %lld %lld %lld %lld %lld %lld %lld --db '%s' --html '%s'", kldeval,
             (long long)ids[0], (long long)ids[1], (long long)ids[2], (long long)ids[3],
             (long long)ids[4], (long long)ids[5], (long long)ids[6], db_path, html);
    CHECK(sh(cmd) == 0, "kldeval report exits 0");
    snprintf(cmd, sizeof cmd, "'%s' runs export --jsonl --db '%s' --out '%s'", kldeval, db_path, jsonl);
    CHECK(sh(cmd) == 0, "kldeval runs export --jsonl exits 0");

    size_t n;
    char *page = kt_read_file(html, &n);
    CHECK(n > 200000 && n < 2000000, "one file of %zu bytes (Chart.js inlined)", n);
    CHECK(strstr(page, "Content-Security-Policy") && strstr(page, "default-src 'none'"), "a CSP forbids network use");
    CHECK(!strstr(page, "<script src") && !strstr(page, "<link") && !strstr(page, "sourceMappingURL="),
          "no external script, style sheet or source map");
    CHECK(strstr(page, "Chart.js v4.6.1") != NULL, "the vendored Chart.js is inlined");
    CHECK(strstr(page, "id=\"cap-table\"") && strstr(page, "id=\"chart-cap\""), "a capability section");
    CHECK(strstr(page, "id=\"ci-table\"") != NULL, "a table of the bootstrap intervals");
    CHECK(strstr(page, "data-key=\"boot_d_kld\"") && strstr(page, "data-key=\"verdict\""),
          "the paired comparisons show the paired bootstrap and a verdict");
    free(page);

    struct stat sb;
    if (stat("tests/browser/node_modules/playwright-core/package.json", &sb) != 0 ||
        stat("/usr/bin/chromium", &sb) != 0) {
        CHECK(false, "the browser test needs chromium and tests/browser/node_modules: run "
                     "bash tests/browser/setup.sh (tools/setup.sh does)");
        return kt_finish();
    }
    snprintf(cmd, sizeof cmd, "node tests/browser/check_report.js '%s' '%s' '%s'", html, jsonl, png);
    CHECK(sh(cmd) == 0, "headless Chromium: the report's charts, numbers, console and network check out");
    CHECK(stat(png, &sb) == 0 && sb.st_size > 10000, "screenshot %s", png);

    /* a real sensitivity sweep's report: the ranked group chart */
    snprintf(db_path, sizeof db_path, "%s/sweep.sqlite", dir);
    snprintf(html, sizeof html, "%s/sweep.html", dir);
    snprintf(jsonl, sizeof jsonl, "%s/sweep.jsonl", dir);
    snprintf(png, sizeof png, "%s/sweep.png", dir);
    remove(db_path);
    snprintf(cmd, sizeof cmd, "'%s' sweep --ref ../shared/models/rand-llama/f16.gguf --base q4_0 --groups layers "
             "--max-docs 1 --ctx 48 --teacher-top-k 256 --quiet --db '%s' --html '%s' >/dev/null 2>&1", kldeval,
             db_path, html);
    CHECK(sh(cmd) == 0, "kldeval sweep --html exits 0");
    snprintf(cmd, sizeof cmd, "'%s' runs export --jsonl --db '%s' --out '%s'", kldeval, db_path, jsonl);
    CHECK(sh(cmd) == 0, "kldeval runs export --jsonl (sweep) exits 0");
    snprintf(cmd, sizeof cmd, "node tests/browser/check_report.js '%s' '%s' '%s'", html, jsonl, png);
    CHECK(sh(cmd) == 0, "headless Chromium: the sweep report checks out, ranked group chart included");

    /* a real KV cache sweep: llama.cpp blocks, MLX groups and the rotated
     * quantizer on the quality-vs-bits chart */
    snprintf(db_path, sizeof db_path, "%s/kvsweep.sqlite", dir);
    snprintf(html, sizeof html, "%s/kvsweep.html", dir);
    snprintf(jsonl, sizeof jsonl, "%s/kvsweep.jsonl", dir);
    snprintf(png, sizeof png, "%s/kvsweep.png", dir);
    remove(db_path);
    snprintf(cmd, sizeof cmd, "'%s' kl -m ../shared/models/rand-llama/f16.gguf --sweep "
             "'kv=q8_0,q4_0,mlx8g64,mlx4g64,mlx4g32,rot8,rot4,rot3' --max-docs 1 --ctx 48 --db '%s' --html '%s' "
             ">/dev/null 2>&1", kldeval, db_path, html);
    CHECK(sh(cmd) == 0, "kldeval kl --sweep kv=... --html exits 0");
    page = kt_read_file(html, &n);
    CHECK(page && strstr(page, "id=\"chart-kvbits\""), "the KV sweep's report has the quality-vs-bits chart");
    free(page);
    snprintf(cmd, sizeof cmd, "'%s' runs export --jsonl --db '%s' --out '%s'", kldeval, db_path, jsonl);
    CHECK(sh(cmd) == 0, "kldeval runs export --jsonl (kv sweep) exits 0");
    snprintf(cmd, sizeof cmd, "node tests/browser/check_report.js '%s' '%s' '%s'", html, jsonl, png);
    CHECK(sh(cmd) == 0, "headless Chromium: the KV sweep's quality-vs-bits chart at the database's values");
    /* kldeval diff: layer 0 untouched (+inf SQNR on the chart's top edge), layer 1 q4_0 with
     * --matrices (the heat map); a whole-model q8_0 arm without */
    snprintf(db_path, sizeof db_path, "%s/diff.sqlite", dir);
    snprintf(html, sizeof html, "%s/diff.html", dir);
    snprintf(jsonl, sizeof jsonl, "%s/diff.jsonl", dir);
    snprintf(png, sizeof png, "%s/diff.png", dir);
    remove(db_path);
    snprintf(cmd, sizeof cmd, "'%s' diff --ref ../shared/models/rand-llama/f16.gguf --arm "
             "'../shared/models/rand-llama/f16.gguf@keep,blk:1=q4_0' --matrices --max-docs 1 --ctx 48 --label blk1 "
             "--db '%s' >/dev/null 2>&1 && '%s' diff --ref ../shared/models/rand-llama/f16.gguf --arm "
             "'../shared/models/rand-llama/f16.gguf@q8_0' --max-docs 1 --ctx 48 --label q8_0 --db '%s' >/dev/null 2>&1",
             kldeval, db_path, kldeval, db_path);
    CHECK(sh(cmd) == 0, "two kldeval diff runs exit 0");
    snprintf(cmd, sizeof cmd, "'%s' report 1 2 --db '%s' --html '%s' >/dev/null", kldeval, db_path, html);
    CHECK(sh(cmd) == 0, "kldeval report (diff runs) exits 0");
    page = kt_read_file(html, &n);
    CHECK(page && strstr(page, "id=\"chart-diff-1\"") && strstr(page, "id=\"chart-diff-2\"") &&
          strstr(page, "id=\"diff-heat-1\"") && !strstr(page, "id=\"diff-heat-2\"") &&
          strstr(page, "data-key=\"matrices.7.rel_err_own_input\""),
          "the diff section: a chart per run, a heat map for the --matrices run only");
    CHECK(page && strstr(page, "<tr data-layer=\"1\" class=\"worst\">"), "the worst layer (1) flagged in the table");
    free(page);
    snprintf(cmd, sizeof cmd, "'%s' runs export --jsonl --db '%s' --out '%s'", kldeval, db_path, jsonl);
    CHECK(sh(cmd) == 0, "kldeval runs export --jsonl (diff) exits 0");
    snprintf(cmd, sizeof cmd, "node tests/browser/check_report.js '%s' '%s' '%s'", html, jsonl, png);
    CHECK(sh(cmd) == 0, "headless Chromium: the diff runs' SQNR charts, tables and heat map at report.diff's values");
    return kt_finish();
}
