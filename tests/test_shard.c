/* test_shard.c — scale-out: shard selection (mod and range cover every window
 * exactly once), merged accumulators finalize to the unsharded summary, the
 * partial format (round trip, checksum, window-table validation), and end
 * to end: `kl --shard K/4 --partial` × 4 in both modes, merged by `kldeval
 * merge`, gives the single run's JSON bit for bit (timings aside); missing,
 * duplicated, foreign, mixed and corrupted parts are refused by name. */
#include "testlib.h"

#include "eval/merge.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static const char *kldeval;

static void test_selection(void) {
    kld_shard s;
    CHECK(kld_shard_parse("3/4", &s) && s.k == 3 && s.n == 4, "3/4 parses");
    const char *bad[] = {"4/4", "-1/4", "1/0", "1/", "/4", "1/4x", "a/b", "1", "+1/4", "1/-4", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(!kld_shard_parse(bad[i], &s), "'%s' is refused", bad[i]);
    const uint64_t ws[] = {0, 1, 3, 13, 100, 1001};
    const uint32_t ns[] = {1, 2, 4, 7, 13, 50};
    for (int mode = 0; mode < 2; mode++)
        for (size_t a = 0; a < sizeof ws / sizeof ws[0]; a++)
            for (size_t b = 0; b < sizeof ns / sizeof ns[0]; b++) {
                bool once = true, contiguous = true;
                uint64_t prev_k = 0;
                for (uint64_t i = 0; i < ws[a]; i++) {
                    int owners = 0;
                    uint32_t owner = 0;
                    for (uint32_t k = 0; k < ns[b]; k++) {
                        kld_shard sh = {k, ns[b], mode ? KLD_SHARD_RANGE : KLD_SHARD_MOD};
                        if (kld_shard_has(&sh, i, ws[a])) owners++, owner = k;
                    }
                    once &= owners == 1;
                    if (mode && owner < prev_k) contiguous = false;
                    prev_k = owner;
                }
                CHECK(once, "%s: each of %llu windows in exactly one of %u shards", mode ? "range" : "mod",
                      (unsigned long long)ws[a], ns[b]);
                if (mode) CHECK(contiguous, "range shards are contiguous and ordered (W=%llu N=%u)",
                                (unsigned long long)ws[a], ns[b]);
            }
    kld_plan pl = {0};
    kld_error err = {0};
    int32_t tok[4] = {1, 2, 3, 4};
    for (int i = 0; i < 10; i++) {
        kld_window w = {tok, 4, 0, 4, -1, -1, i % 3 == 0, NULL, 0};
        CHECK_OK(kld_plan_push(&pl, &w, &err), err);
    }
    size_t *idx, n;
    kld_shard sh = {2, 4, KLD_SHARD_MOD};
    CHECK_OK(kld_plan_shard(&pl, &sh, &idx, &n, &err), err);
    CHECK(n == 2 && idx[0] == 2 && idx[1] == 6, "mod 2/4 of 10 windows: 2, 6 (got %zu)", n);
    free(idx);
    sh = (kld_shard){1, 3, KLD_SHARD_RANGE};
    CHECK_OK(kld_plan_shard(&pl, &sh, &idx, &n, &err), err);
    CHECK(n == 3 && idx[0] == 3 && idx[2] == 5, "range 1/3 of 10 windows: 3..5 (got %zu)", n);
    free(idx);
    kld_plan_free(&pl);
}

static kld_position synth_record(uint64_t i) {
    double u = (double)((i * 2654435761u) % 1000003) / 1000003.0;
    return (kld_position){.kld = u * u, .kld_rev = u / 3, .jsd = u / 7, .nll_ref = 1 + u,
                          .nll_arm = i % 5 ? 1.2 + u : NAN, .kld_bound = u * u, .p_ref_max = (float)u,
                          .mass = 1.0f, .token = i % 5 ? (int32_t)(i % 97) : -1, .top_ref = (int32_t)(i % 3),
                          .top_arm = (int32_t)(i % 4), .ctx_pos = (uint32_t)(i % 64),
                          .topk_hits = (uint16_t)(i % 11), .topk = 10};
}

/* Two halves merged with kld_stats_merge finalize to the summary of one accumulator. */
static void test_stats_merge(void) {
    kld_error err = {0};
    kld_stats *one, *a, *b;
    CHECK_OK(kld_stats_create(&one, 10, &err), err);
    CHECK_OK(kld_stats_create(&a, 10, &err), err);
    CHECK_OK(kld_stats_create(&b, 10, &err), err);
    for (uint64_t i = 0; i < 5000; i++) {
        kld_position r = synth_record(i);
        kld_stats *half = i < 2600 ? a : b;
        if (i % 700 == 0 || i == 2600) {
            CHECK_OK(kld_stats_begin_doc(one, &err), err);
            CHECK_OK(kld_stats_begin_doc(half, &err), err);
        }
        CHECK_OK(kld_stats_add(one, &r, &err), err);
        CHECK_OK(kld_stats_add(half, &r, &err), err);
    }
    CHECK_OK(kld_stats_merge(a, b, &err), err);
    kld_summary s1, s2;
    memset(&s1, 0, sizeof s1);
    memset(&s2, 0, sizeof s2);
    CHECK_OK(kld_stats_finalize(one, &s1, &err), err);
    CHECK_OK(kld_stats_finalize(a, &s2, &err), err);
    CHECK(memcmp(&s1, &s2, sizeof s1) == 0, "merged accumulator finalizes to the same summary, bit for bit");
    CHECK(s1.n_docs == 9 && s1.n_positions == 5000, "docs %llu positions %llu",
          (unsigned long long)s1.n_docs, (unsigned long long)s1.n_positions);
    kld_stats_free(one);
    kld_stats_free(a);
    kld_stats_free(b);
}

/* A partial with windows 1 and 3 of 4 (shard 1/2, mod). */
static void write_synth_partial(const char *path, uint64_t bad_index) {
    kld_partial_window w[2] = {{1, 3, 1}, {bad_index, 2, 0}};
    kld_position r[5];
    for (int i = 0; i < 5; i++) r[i] = synth_record((uint64_t)i);
    kld_partial_head h = {.shard_k = 1, .shard_n = 2, .topk = 10, .n_windows_total = 4,
                          .n_windows = 2, .n_records = 5};
    memset(h.hash, 0xab, 32);
    kld_error err = {0};
    CHECK_OK(kld_partial_write(path, &h, "{\"config\":{}}", w, r, &err), err);
}

/* The closed forms equal counting window by window. */
static void test_shard_closed_forms(void) {
    int bad = 0;
    for (uint32_t n = 1; n <= 7; n++)
        for (uint32_t k = 0; k < n; k++)
            for (uint32_t mode = 0; mode < 2; mode++)
                for (uint64_t w = 0; w <= 23; w++) {
                    uint64_t count = 0;
                    for (uint64_t i = 0; i < w; i++) count += kld_partial_shard_has(k, n, mode, i, w);
                    bad += count != kld_partial_shard_count(k, n, mode, w);
                    for (uint64_t i = 0; i <= w; i++) {
                        uint64_t j = i;
                        while (j < w && !kld_partial_shard_has(k, n, mode, j, w)) j++;
                        bad += j != kld_partial_shard_next(k, n, mode, i, w);
                    }
                }
    CHECK(bad == 0, "shard count and next window in closed form equal the window-by-window walk (%d differ)", bad);
    /* a header claiming 2^40 - 1 windows is judged at once, not after 2^40 steps */
    CHECK(kld_partial_shard_count(3, 1000000, 0, (1ull << 40) - 1) == 1099512, "count of a huge W");
}

static void test_partial_format(void) {
    char path[512], bad[512];
    snprintf(path, sizeof path, "%s/shard_synth.kldpart", kt_build_dir());
    snprintf(bad, sizeof bad, "%s/shard_bad.kldpart", kt_build_dir());
    write_synth_partial(path, 3);
    kld_partial *p;
    kld_error err = {0};
    CHECK_OK(kld_partial_open(path, &p, &err), err);
    if (p) {
        const kld_partial_head *h = kld_partial_head_of(p);
        CHECK(h->shard_k == 1 && h->shard_n == 2 && h->n_records == 5 && h->hash[7] == 0xab,
              "header round trip");
        CHECK(kld_partial_windows(p)[1].index == 3 && kld_partial_windows(p)[0].new_doc == 1,
              "window table round trip");
        CHECK(!strcmp(kld_partial_meta(p), "{\"config\":{}}"), "meta round trip");
        kld_position r[5];
        CHECK_OK(kld_partial_read(p, 5, r, &err), err);
        bool same = true;
        for (int i = 0; i < 5; i++) {
            kld_position e = synth_record((uint64_t)i);
            same &= !memcmp(&e.kld, &r[i].kld, 6 * sizeof(double)) && e.token == r[i].token &&
                    e.ctx_pos == r[i].ctx_pos && e.topk_hits == r[i].topk_hits;
        }
        CHECK(same, "records round trip bit for bit (NaN nll included)");
        CHECK(kld_partial_read(p, 1, r, &err) != KLD_OK, "reading past the records fails");
        kld_partial_close(p);
    }
    /* a flipped byte anywhere: the checksum */
    size_t len;
    char *data = kt_read_file(path, &len);
    data[len / 2] ^= 0x10;
    kt_write_file(bad, data, len);
    CHECK(kld_partial_open(bad, &p, &err) != KLD_OK && strstr(err.msg, "checksum") && strstr(err.msg, bad),
          "a corrupted partial is refused naming it: %s", err.msg);
    kt_write_file(bad, data, len - 7);
    CHECK(kld_partial_open(bad, &p, &err) != KLD_OK, "a truncated partial is refused: %s", err.msg);
    kt_write_file(bad, data, 20);
    CHECK(kld_partial_open(bad, &p, &err) != KLD_OK && strstr(err.msg, "too short"), "a stub is refused: %s",
          err.msg);
    free(data);
    /* a valid checksum over a window the shard does not own */
    write_synth_partial(bad, 2);
    CHECK(kld_partial_open(bad, &p, &err) != KLD_OK && strstr(err.msg, "window entry 1"),
          "a window outside the shard is refused: %s", err.msg);
    remove(bad);
    remove(path);
}

/* ---- end to end through the CLI ---- */

static int run(const char *args, const char *err_path) {
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "'%s' %s >/dev/null 2>'%s'", kldeval, args, err_path ? err_path : "/dev/null");
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

#define MODELS "--ref " KT_SHARED "/models/rand-llama/f16.gguf --arm " KT_SHARED "/models/rand-llama/q4_K_M.gguf"

static json_t *load_without_timings(const char *path) {
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    CHECK(j != NULL, "%s parses: %s", path, je.text);
    if (!j) return json_object();
    static const char *const t[] = {"elapsed_s", "ref_seconds", "arm_seconds", "ref_tokens_per_s",
                                    "arm_tokens_per_s"};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) json_object_del(j, t[i]);
    return j;
}

static bool file_has(const char *path, const char *needle) {
    size_t len;
    char *t = kt_read_file(path, &len);
    bool ok = strstr(t, needle) != NULL;
    if (!ok) fprintf(stderr, "  %s: '%s' not in: %s\n", path, needle, t);
    free(t);
    return ok;
}

static void test_end_to_end(void) {
    const char *b = kt_build_dir();
    char single[512], merged[512], args[8192], parts[4][2][512], errf[512];
    snprintf(single, sizeof single, "%s/shard_single.json", b);
    snprintf(merged, sizeof merged, "%s/shard_merged.json", b);
    snprintf(errf, sizeof errf, "%s/shard_err.txt", b);
    const char *common = MODELS " --max-docs 6 --ctx 48 --quiet";
    snprintf(args, sizeof args, "kl %s --json '%s'", common, single);
    CHECK(run(args, NULL) == 0, "single run");
    json_t *one = load_without_timings(single);
    CHECK(json_integer_value(json_object_get(one, "n_positions")) > 400, "the single run scores positions");
    const char *modes[2] = {"mod", "range"};
    for (int m = 0; m < 2; m++) {
        for (int k = 0; k < 4; k++) {
            snprintf(parts[k][m], sizeof parts[k][m], "%s/shard_%s_%d.kldpart", b, modes[m], k);
            /* range shards run with another --chunk and --threads: records do not depend on them */
            snprintf(args, sizeof args, "kl %s --shard %d/4 --shard-mode %s --partial '%s'%s", common, k,
                     modes[m], parts[k][m], m ? " --chunk 7 --threads 1" : "");
            CHECK(run(args, NULL) == 0, "shard %d/4 %s", k, modes[m]);
        }
        /* given out of order: the merge restores window order */
        snprintf(args, sizeof args, "merge '%s' '%s' '%s' '%s' --json '%s'", parts[2][m], parts[0][m],
                 parts[3][m], parts[1][m], merged);
        CHECK(run(args, NULL) == 0, "merge of 4 %s shards", modes[m]);
        json_t *mj = load_without_timings(merged);
        const json_t *info = json_object_get(mj, "merged");
        CHECK(json_array_size(json_object_get(info, "parts")) == 4, "merged.parts lists 4 parts");
        json_object_del(mj, "merged");
        if (m) { /* config.chunk and config.threads are those of the shards */
            json_t *c1 = json_object_get(one, "config"), *c2 = json_object_get(mj, "config");
            CHECK(json_integer_value(json_object_get(c2, "chunk")) == 7, "the shards' chunk is reported");
            json_t *c1c = json_deep_copy(c1), *c2c = json_deep_copy(c2);
            const char *drop[] = {"chunk", "threads"};
            for (int i = 0; i < 2; i++) json_object_del(c1c, drop[i]), json_object_del(c2c, drop[i]);
            CHECK(json_equal(c1c, c2c), "config equal apart from chunk and threads");
            json_decref(c1c);
            json_decref(c2c);
            json_object_del(mj, "config");
            json_t *o2 = json_deep_copy(one);
            json_object_del(o2, "config");
            char *x = json_dumps(o2, JSON_SORT_KEYS), *y = json_dumps(mj, JSON_SORT_KEYS);
            CHECK(x && y && !strcmp(x, y), "range shards (chunk 7, 1 thread) merge to the single run's "
                                           "statistics bit for bit");
            free(x);
            free(y);
            json_decref(o2);
        } else {
            char *x = json_dumps(one, JSON_SORT_KEYS), *y = json_dumps(mj, JSON_SORT_KEYS);
            CHECK(x && y && !strcmp(x, y), "mod shards merge to the single run's JSON bit for bit "
                                           "(timings aside)");
            free(x);
            free(y);
        }
        json_decref(mj);
    }
    json_decref(one);

    /* refusals, each naming the part */
    snprintf(args, sizeof args, "merge '%s' '%s' '%s'", parts[0][0], parts[1][0], parts[3][0]);
    CHECK(run(args, errf) == 1 && file_has(errf, "missing: 2/4"), "a missing shard is refused by number");
    snprintf(args, sizeof args, "merge '%s' '%s' '%s' '%s' '%s'", parts[0][0], parts[1][0], parts[2][0],
             parts[3][0], parts[2][0]);
    CHECK(run(args, errf) == 1 && file_has(errf, "both shard 2/4") && file_has(errf, parts[2][0]),
          "a duplicated part is refused by name");
    snprintf(args, sizeof args, "merge '%s' '%s' '%s' '%s'", parts[0][0], parts[1][1], parts[2][0],
             parts[3][0]);
    CHECK(run(args, errf) == 1 && file_has(errf, parts[1][1]) && file_has(errf, "range"),
          "a part of a range split among mod parts is refused by name");
    char foreign[512];
    snprintf(foreign, sizeof foreign, "%s/shard_foreign.kldpart", b);
    snprintf(args, sizeof args, "kl %s --max-tokens 40 --shard 1/4 --partial '%s'", common, foreign);
    CHECK(run(args, NULL) == 0, "a shard of another evaluation");
    snprintf(args, sizeof args, "merge '%s' '%s' '%s' '%s'", parts[0][0], foreign, parts[2][0], parts[3][0]);
    CHECK(run(args, errf) == 1 && file_has(errf, foreign) && file_has(errf, "another evaluation") &&
              file_has(errf, "config."),
          "a foreign part is refused by name, with the differing input");
    char corrupt[512];
    snprintf(corrupt, sizeof corrupt, "%s/shard_corrupt.kldpart", b);
    size_t len;
    char *data = kt_read_file(parts[3][0], &len);
    data[len - 100] ^= 1;
    kt_write_file(corrupt, data, len);
    free(data);
    snprintf(args, sizeof args, "merge '%s' '%s' '%s' '%s'", parts[0][0], parts[1][0], parts[2][0], corrupt);
    CHECK(run(args, errf) == 1 && file_has(errf, corrupt) && file_has(errf, "checksum"),
          "a corrupted part is refused by name");
    snprintf(args, sizeof args, "kl %s --shard 4/4 --partial '%s/shard_never.kldpart'", common, b);
    CHECK(run(args, errf) == 2 && file_has(errf, "K < N"), "--shard 4/4 is refused");
    /* a shard's figures alone are a fraction of the corpus: refused without --partial */
    snprintf(args, sizeof args, "kl %s --shard 1/4", common);
    CHECK(run(args, errf) == 2 && file_has(errf, "--partial"), "--shard without --partial is refused");
    /* a shard's header counts the corpus's documents, not only those it reached */
    char out_txt[600], cmd[16384];
    snprintf(out_txt, sizeof out_txt, "%s/shard_header.txt", b);
    snprintf(cmd, sizeof cmd, "'%s' kl %s --shard 1/4 --partial '%s/shard_header.kldpart' >'%s' 2>&1",
             kldeval, common, b, out_txt);
    int st = system(cmd);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0 && file_has(out_txt, " of 6 documents"),
          "the shard's header counts the corpus's 6 documents");
    snprintf(args, sizeof args, "kl %s --shard 1/4 --shard-mode blocks", common);
    CHECK(run(args, errf) == 2 && file_has(errf, "--shard-mode"), "an unknown --shard-mode is refused");

    /* more shards than windows: empty shards write empty partials that still merge */
    snprintf(args, sizeof args, "kl %s --max-docs 1 --json '%s'", MODELS " --ctx 48 --quiet", single);
    CHECK(run(args, NULL) == 0, "a one-document run");
    char small[3][512];
    for (int k = 0; k < 3; k++) {
        snprintf(small[k], sizeof small[k], "%s/shard_small_%d.kldpart", b, k);
        snprintf(args, sizeof args, "kl %s --max-docs 1 --shard %d/3 --partial '%s'",
                 MODELS " --ctx 48 --quiet", k, small[k]);
        CHECK(run(args, NULL) == 0, "small shard %d/3 (possibly empty)", k);
    }
    snprintf(args, sizeof args, "merge '%s' '%s' '%s' --json '%s'", small[0], small[1], small[2], merged);
    CHECK(run(args, NULL) == 0, "merge with empty shards");
    json_t *x = load_without_timings(single), *y = load_without_timings(merged);
    json_object_del(y, "merged");
    CHECK(json_equal(x, y), "shards with empty ones merge to the single run");
    json_decref(x);
    json_decref(y);
    for (int m = 0; m < 2; m++)
        for (int k = 0; k < 4; k++) remove(parts[k][m]);
    for (int k = 0; k < 3; k++) remove(small[k]);
    remove(foreign);
    remove(corrupt);
}

int main(int argc, char **argv) {
    kldeval = argc > 1 ? argv[1] : "build/kldeval";
    test_selection();
    test_stats_merge();
    test_shard_closed_forms();
    test_partial_format();
    test_end_to_end();
    return kt_finish();
}
