/* test_dump_shard.c — sharded dumps: `dump --shard K/4` × 4 in both modes,
 * assembled by `merge --dump`, equal the unsharded dump byte for byte
 * (every file but the manifest, and every manifest field but "created" and
 * the documented "merged") for v1, v2 and candidate dumps; scoring against
 * the merged dump gives the unsharded dump's statistics; a resumed shard
 * equals an uninterrupted one; missing, duplicated and foreign shards, a
 * shard given to kl and --format llamacpp with --shard are refused. */
#include "testlib.h"

#include <dirent.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *kldeval;

#define F16 KT_SHARED "/models/rand-llama/f16.gguf"
#define Q4 KT_SHARED "/models/rand-llama/q4_K_M.gguf"
#define WINDOWS "--ctx 24 --chunks 9 --top-k 16 --quiet --no-db"

static int run(const char *args, const char *err_path) {
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "'%s' %s >/dev/null 2>'%s'", kldeval, args, err_path ? err_path : "/dev/null");
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static bool file_has(const char *path, const char *needle) {
    size_t len;
    char *t = kt_read_file(path, &len);
    bool ok = strstr(t, needle) != NULL;
    if (!ok) fprintf(stderr, "  %s: '%s' not in: %s\n", path, needle, t);
    free(t);
    return ok;
}

static bool same_bytes(const char *a, const char *b) {
    size_t na, nb;
    char *x = kt_read_file(a, &na), *y = kt_read_file(b, &nb);
    bool ok = na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return ok;
}

/* Every file of the single dump but its manifest equals the merged one's;
 * the merged directory holds nothing else; the manifests agree but for
 * "created" and "merged". */
static void check_equal_dumps(const char *single, const char *merged, const char *what) {
    DIR *d = opendir(single);
    CHECK(d != NULL, "%s: %s opens", what, single);
    if (!d) return;
    size_t n_files = 0, n_same = 0;
    char pa[1024], pb[1024];
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.' || !strcmp(e->d_name, "manifest.json")) continue;
        snprintf(pa, sizeof pa, "%s/%s", single, e->d_name);
        snprintf(pb, sizeof pb, "%s/%s", merged, e->d_name);
        n_files++;
        if (access(pb, F_OK) == 0 && same_bytes(pa, pb)) n_same++;
        else fprintf(stderr, "  %s: %s differs or is missing\n", what, pb);
    }
    closedir(d);
    size_t n_merged = 0;
    d = opendir(merged);
    for (struct dirent *e; d && (e = readdir(d)) != NULL;)
        n_merged += e->d_name[0] != '.' && strcmp(e->d_name, "manifest.json");
    if (d) closedir(d);
    CHECK(n_files > 2 && n_same == n_files && n_merged == n_files,
          "%s: all %zu files (tokens.bin, seq-<i>.bin, sidecars) byte for byte, nothing else (%zu same, "
          "%zu in the merged dump)", what, n_files, n_same, n_merged);
    snprintf(pa, sizeof pa, "%s/manifest.json", single);
    snprintf(pb, sizeof pb, "%s/manifest.json", merged);
    json_error_t je;
    json_t *a = json_load_file(pa, 0, &je), *b = json_load_file(pb, 0, &je);
    CHECK(a && b, "%s: both manifests parse", what);
    if (!a || !b) return;
    const json_t *info = json_object_get(b, "merged");
    CHECK(json_integer_value(json_object_get(info, "shards")) == 4 &&
              json_string_value(json_object_get(info, "eval_hash")),
          "%s: the merged manifest records shards and evaluation hash", what);
    CHECK(json_object_get(b, "created") != NULL && json_object_get(b, "shard") == NULL,
          "%s: created kept, no shard object", what);
    json_object_del(a, "created");
    json_object_del(b, "created");
    json_object_del(b, "merged");
    char *x = json_dumps(a, 0), *y = json_dumps(b, 0); /* key order too */
    CHECK(x && y && !strcmp(x, y), "%s: manifests equal but for created and merged", what);
    free(x);
    free(y);
    json_decref(a);
    json_decref(b);
}

/* 4 shards of `dump MODEL_FLAGS` in a mode, merged out of order into out. */
static void shard_and_merge(const char *flags, const char *mode, const char *stem, const char *out) {
    char args[8192], dir[4][512];
    for (int k = 0; k < 4; k++) {
        snprintf(dir[k], sizeof dir[k], "%s/%s_%s_%d", kt_build_dir(), stem, mode, k);
        snprintf(args, sizeof args, "rm -rf '%s'", dir[k]);
        CHECK(system(args) == 0, "clean %s", dir[k]);
        /* range shards with another --chunk and --threads: the bytes do not depend on them */
        snprintf(args, sizeof args, "dump %s --shard %d/4 --shard-mode %s --out '%s'%s", flags, k, mode,
                 dir[k], strcmp(mode, "range") ? " --threads 2" : " --chunk 5 --threads 1");
        CHECK(run(args, NULL) == 0, "%s: shard %d/4 %s", stem, k, mode);
    }
    snprintf(args, sizeof args, "rm -rf '%s'", out);
    CHECK(system(args) == 0, "clean %s", out);
    snprintf(args, sizeof args, "merge --no-db --dump '%s' '%s' '%s' '%s' '%s'", out, dir[2], dir[0],
             dir[3], dir[1]);
    CHECK(run(args, NULL) == 0, "%s: merge of 4 %s shards", stem, mode);
}

static json_t *stats_of(const char *json_path) {
    json_error_t je;
    json_t *j = json_load_file(json_path, 0, &je);
    CHECK(j != NULL, "%s parses: %s", json_path, je.text);
    if (!j) return json_object();
    static const char *const t[] = {"elapsed_s", "ref_seconds", "arm_seconds", "ref_tokens_per_s",
                                    "arm_tokens_per_s", "config"};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) json_object_del(j, t[i]);
    return j;
}

static void check_same_scores(const char *kl_single, const char *kl_merged, const char *what) {
    char args[8192], ja[512], jb[512];
    snprintf(ja, sizeof ja, "%s/dshard_kl_a.json", kt_build_dir());
    snprintf(jb, sizeof jb, "%s/dshard_kl_b.json", kt_build_dir());
    snprintf(args, sizeof args, "kl %s --quiet --no-db --json '%s'", kl_single, ja);
    CHECK(run(args, NULL) == 0, "%s: kl against the single dump", what);
    snprintf(args, sizeof args, "kl %s --quiet --no-db --json '%s'", kl_merged, jb);
    CHECK(run(args, NULL) == 0, "%s: kl against the merged dump", what);
    json_t *a = stats_of(ja), *b = stats_of(jb);
    char *x = json_dumps(a, JSON_SORT_KEYS), *y = json_dumps(b, JSON_SORT_KEYS);
    CHECK(json_integer_value(json_object_get(a, "n_positions")) > 100 && x && y && !strcmp(x, y),
          "%s: the same statistics, bit for bit", what);
    free(x);
    free(y);
    json_decref(a);
    json_decref(b);
}

static void test_formats(void) {
    const char *b = kt_build_dir();
    char single[3][512], merged[512], args[8192], flags[2048];
    const char *logits[2] = {"f16", "f32"};
    for (int v = 0; v < 2; v++) {
        snprintf(single[v], sizeof single[v], "%s/dshard_single_v%d", b, v + 1);
        snprintf(args, sizeof args, "rm -rf '%s'", single[v]);
        CHECK(system(args) == 0, "clean");
        snprintf(args, sizeof args, "dump -m " F16 " " WINDOWS " --logits %s --out '%s'", logits[v], single[v]);
        CHECK(run(args, NULL) == 0, "single v%d dump", v + 1);
    }
    /* the candidate dump of q4_K_M at the v1 teacher's ids */
    snprintf(single[2], sizeof single[2], "%s/dshard_single_cand", b);
    snprintf(args, sizeof args, "rm -rf '%s'", single[2]);
    CHECK(system(args) == 0, "clean");
    snprintf(args, sizeof args, "dump -m " Q4 " --indices-from '%s' --quiet --no-db --out '%s'", single[0],
             single[2]);
    CHECK(run(args, NULL) == 0, "single candidate dump");
    const char *modes[2] = {"mod", "range"};
    const char *names[3] = {"v1", "v2", "candidate"};
    for (int f = 0; f < 3; f++)
        for (int m = 0; m < 2; m++) {
            if (f < 2) snprintf(flags, sizeof flags, "-m " F16 " " WINDOWS " --logits %s", logits[f]);
            else snprintf(flags, sizeof flags, "-m " Q4 " --indices-from '%s' --quiet --no-db", single[0]);
            snprintf(merged, sizeof merged, "%s/dshard_merged_%s_%s", b, names[f], modes[m]);
            char stem[64], what[64];
            snprintf(stem, sizeof stem, "dshard_%s", names[f]);
            snprintf(what, sizeof what, "%s %s", names[f], modes[m]);
            shard_and_merge(flags, modes[m], stem, merged);
            check_equal_dumps(single[f], merged, what);
            char ka[2048], kb[2048];
            if (f < 2) {
                snprintf(ka, sizeof ka, "--reference-logits '%s' --arm " Q4, single[f]);
                snprintf(kb, sizeof kb, "--reference-logits '%s' --arm " Q4, merged);
            } else {
                snprintf(ka, sizeof ka, "--reference-logits '%s' --arm-logits '%s'", single[0], single[2]);
                snprintf(kb, sizeof kb, "--reference-logits '%s' --arm-logits '%s'", single[0], merged);
            }
            if (m == 0) check_same_scores(ka, kb, what);
        }
    /* a shard holds only its own sequences' files */
    char p[1024];
    snprintf(p, sizeof p, "%s/dshard_v1_mod_1/seq-5.bin", b);
    bool own = access(p, F_OK) == 0;
    snprintf(p, sizeof p, "%s/dshard_v1_mod_1/seq-2.bin", b);
    CHECK(own && access(p, F_OK) != 0, "shard 1/4 mod holds seq-5.bin, not seq-2.bin");
}

static void test_refusals(void) {
    const char *b = kt_build_dir();
    char args[8192], errf[512], out[512], d[4][512], foreign[512];
    snprintf(errf, sizeof errf, "%s/dshard_err.txt", b);
    snprintf(out, sizeof out, "%s/dshard_refused", b);
    for (int k = 0; k < 4; k++) snprintf(d[k], sizeof d[k], "%s/dshard_v1_mod_%d", b, k);
    snprintf(args, sizeof args, "merge --dump '%s' '%s' '%s' '%s'", out, d[0], d[1], d[3]);
    CHECK(run(args, errf) == 1 && file_has(errf, "missing: 2/4"), "a missing shard is refused by number");
    snprintf(args, sizeof args, "merge --dump '%s' '%s' '%s' '%s' '%s' '%s'", out, d[0], d[1], d[2], d[3], d[2]);
    CHECK(run(args, errf) == 1 && file_has(errf, "both shard 2/4") && file_has(errf, d[2]),
          "a duplicated shard is refused by name");
    snprintf(foreign, sizeof foreign, "%s/dshard_foreign", b);
    snprintf(args, sizeof args, "rm -rf '%s'", foreign);
    CHECK(system(args) == 0, "clean");
    snprintf(args, sizeof args, "dump -m " F16 " --ctx 24 --chunks 9 --top-k 8 --quiet --no-db "
             "--shard 1/4 --out '%s'", foreign);
    CHECK(run(args, NULL) == 0, "a shard of another dump (top-k 8)");
    snprintf(args, sizeof args, "merge --dump '%s' '%s' '%s' '%s' '%s'", out, d[0], foreign, d[2], d[3]);
    CHECK(run(args, errf) == 1 && file_has(errf, foreign) && file_has(errf, "another dump") &&
              file_has(errf, "config.top_k"),
          "a foreign shard is refused by name, with the differing input");
    snprintf(args, sizeof args, "merge --dump '%s' '%s' '%s' '%s' '%s'", out, d[0], d[1],
             "build/no-such-shard", d[3]);
    CHECK(run(args, errf) == 1 && file_has(errf, "no-such-shard"), "a directory that is no shard is named");
    CHECK(access(out, F_OK) != 0, "refused merges write nothing");
    snprintf(args, sizeof args, "merge '%s'", d[0]);
    CHECK(run(args, errf) == 2 && file_has(errf, "--dump"), "a dump shard without --dump is refused");
    snprintf(args, sizeof args, "kl --reference-logits '%s' --arm " Q4 " --quiet --no-db", d[0]);
    CHECK(run(args, errf) == 1 && file_has(errf, "one shard of a dump"), "kl refuses a shard");
    snprintf(args, sizeof args, "dump -m " F16 " --format llamacpp --ctx 24 --shard 0/2 --out '%s/x.kld'", b);
    CHECK(run(args, errf) == 2 && file_has(errf, "cannot be sharded"), "--format llamacpp --shard is refused");
    snprintf(args, sizeof args, "rm -rf '%s'", foreign);
    CHECK(system(args) == 0, "clean");
}

/* An interrupted shard (no shard.json, its last sequence torn) resumes to
 * the bytes of an uninterrupted one. */
static void test_resume(void) {
    const char *b = kt_build_dir();
    char args[8192], src[512], dir[512], p[1024], q[1024];
    snprintf(src, sizeof src, "%s/dshard_v1_mod_1", b);
    snprintf(dir, sizeof dir, "%s/dshard_resumed", b);
    snprintf(args, sizeof args, "rm -rf '%s' && cp -r '%s' '%s' && mv '%s/shard.json' '%s/dump.partial.json'"
             " && truncate -s -100 '%s/seq-5.bin' && rm '%s/seq-5.ext.bin'", dir, src, dir, dir, dir, dir, dir);
    CHECK(system(args) == 0, "an interrupted shard");
    snprintf(args, sizeof args, "dump -m " F16 " " WINDOWS " --shard 1/4 --resume --out '%s'", dir);
    CHECK(run(args, NULL) == 0, "the shard resumes");
    const char *files[] = {"seq-1.bin", "seq-1.ext.bin", "seq-5.bin", "seq-5.ext.bin", "tokens.bin"};
    bool same = true;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", src, files[i]);
        snprintf(q, sizeof q, "%s/%s", dir, files[i]);
        same &= access(q, F_OK) == 0 && same_bytes(p, q);
    }
    snprintf(q, sizeof q, "%s/shard.json", dir);
    CHECK(same && access(q, F_OK) == 0, "the resumed shard equals the uninterrupted one");
    snprintf(args, sizeof args, "dump -m " F16 " " WINDOWS " --shard 2/4 --resume --out '%s'", dir);
    CHECK(run(args, NULL) != 0, "a complete shard is not resumed as another");
}

int main(int argc, char **argv) {
    kldeval = argc > 1 ? argv[1] : "build/kldeval";
    test_formats();
    test_refusals();
    test_resume();
    return kt_finish();
}
