/* test_cli_saved.c — `kldeval dump` and the saved-reference modes of
 * `kldeval kl` as a user runs them:
 *  - llama.cpp's own base file (../shared/oracle/aidreams260K/small-base.kld)
 *    scored against f16.gguf and q8_0.gguf: the figures that depend on the
 *    file alone (Mean PPL(base), its error) equal llama-perplexity's printed
 *    lines exactly; those that depend on the arm's logits agree within what
 *    llama.cpp's activation rounding explains (measured: see the bounds);
 *  - a base file written by `dump --format llamacpp` with the settings of
 *    small-base.txt (aidreams260K f32, -c 128, 40 chunks) holds the same
 *    tokens, and its uint16 codes agree with llama.cpp's (identical or ±1);
 *  - JSON of a saved-teacher run names the mode, the truncation and the
 *    warning below 0.99 captured mass;
 *  - bad combinations and bad dumps are errors that name the flag or file. */
#include "testlib.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <sys/wait.h>

#define AID KT_SHARED "/models/aidreams260K"
#define BASE KT_SHARED "/oracle/aidreams260K/small-base.kld"

static const char *kldeval;

/* Runs kldeval with args, stdout into out (may be NULL), stderr into err_out. */
static int run(const char *args, const char *out, const char *err_out) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' %s >'%s' 2>'%s'", kldeval, args, out ? out : "/dev/null",
             err_out ? err_out : "/dev/null");
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The first line of text starting with prefix (NULL if none). */
static const char *line_of(const char *text, const char *prefix) {
    for (const char *p = text; p && *p;) {
        if (!strncmp(p, prefix, strlen(prefix))) return p;
        p = strchr(p, '\n');
        if (p) p++;
    }
    return NULL;
}

static bool same_line(const char *a, const char *b, const char *prefix) {
    const char *x = line_of(a, prefix), *y = line_of(b, prefix);
    if (!x || !y) return false;
    size_t lx = strcspn(x, "\n"), ly = strcspn(y, "\n");
    return lx == ly && !memcmp(x, y, lx);
}

static double number_after(const char *text, const char *prefix) {
    const char *l = line_of(text, prefix);
    return l ? strtod(l + strlen(prefix), NULL) : NAN;
}

static void llamacpp_oracle(const char *arm, const char *printed_path, double kld_tol,
                            double ppl_tol) {
    char out[512], args[1024];
    snprintf(out, sizeof out, "%s/cli_saved_%s.txt", kt_build_dir(), arm);
    snprintf(args, sizeof args, "kl --llamacpp-base %s --arm %s/%s.gguf --quiet", BASE, AID, arm);
    CHECK(run(args, out, NULL) == 0, "%s", args);
    size_t n;
    char *ours = kt_read_file(out, &n), *theirs = kt_read_file(printed_path, &n);
    /* from the file alone: identical to the printed digit */
    CHECK(same_line(ours, theirs, "Mean PPL(base)"), "%s: Mean PPL(base) line differs", arm);
    /* from the arm's logits: llama.cpp rounds activations (8-bit for q8_0,
     * f16 for f16), kldeval does not */
    const char *keys[] = {"Mean PPL(Q)                   :", "Mean    KLD:", "Same top p:"};
    double tol[] = {ppl_tol, kld_tol, 0.5};
    for (int i = 0; i < 3; i++) {
        double a = number_after(ours, keys[i]), b = number_after(theirs, keys[i]);
        CHECK(fabs(a - b) <= tol[i], "%s: '%s' kldeval %g, llama.cpp %g (tolerance %g)", arm,
              keys[i], a, b, tol[i]);
        printf("%s %-32s kldeval %.6f  llama.cpp %.6f\n", arm, keys[i], a, b);
    }
    CHECK(line_of(ours, "PPL(ref)") != NULL && line_of(ours, "====== KL divergence statistics ======"),
          "%s: both reports printed", arm);
    free(ours);
    free(theirs);
}

static void llamacpp_write(void) {
    char out[512], args[1024];
    snprintf(out, sizeof out, "%s/cli_saved_base.kld", kt_build_dir());
    snprintf(args, sizeof args,
             "dump -m %s/f32.gguf --format llamacpp --out '%s' --ctx 128 --chunks 40 "
             "--corpus %s/corpus/licenses.txt --quiet", AID, out, KT_SHARED);
    CHECK(run(args, NULL, NULL) == 0, "%s", args);
    size_t na, nb;
    unsigned char *a = (unsigned char *)kt_read_file(out, &na);
    unsigned char *b = (unsigned char *)kt_read_file(BASE, &nb);
    CHECK(na == nb, "base file size %zu, llama.cpp's %zu", na, nb);
    if (na != nb) return;
    size_t tok_end = 20 + (size_t)40 * 128 * 4;
    CHECK(memcmp(a, b, tok_end) == 0, "header and tokens equal llama.cpp's");
    size_t nv = 2 * ((512 + 1) / 2) + 4, records = (size_t)40 * (128 - 1 - 64);
    size_t same = 0, off_by_one = 0, other = 0;
    for (size_t r = 0; r < records; r++) {
        const unsigned char *x = a + tok_end + r * nv * 2, *y = b + tok_end + r * nv * 2;
        for (size_t i = 4; i < 4 + 512; i++) {
            int cx = (int)kld_load_u16(x + 2 * i), cy = (int)kld_load_u16(y + 2 * i);
            if (cx == cy) same++;
            else if (abs(cx - cy) == 1) off_by_one++;
            else other++;
        }
    }
    double frac = (double)same / (double)(same + off_by_one + other);
    printf("dump --format llamacpp vs llama.cpp's small-base.kld: %.4f%% codes identical, %zu ±1, "
           "%zu further\n", 100 * frac, off_by_one, other);
    /* The codes quantize 16 nats in steps of 2.4e-4; float32 logits that differ
     * by an ulp between engines move ~0.5% of them by one step. */
    CHECK(frac >= 0.99 && other == 0, "codes: %.4f%% identical, %zu differ by more than 1",
          100 * frac, other);
    free(a);
    free(b);
}

static json_t *load_json(const char *path) {
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    CHECK(j != NULL, "%s: %s", path, je.text);
    return j;
}

static double jnum(const json_t *o, const char *key) {
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* The PPL ratio of a q8_0 arm against a llama.cpp base file equals, within
 * 1%, the lockstep ratio on the same tokens (`kl --ref f32 --chunking
 * llamacpp` with the base file's settings), although some next tokens lie
 * below the file's 16-nat window: llama.cpp's PPL(base), those tokens at the
 * window's floor, is shown beside it but never paired. lockstep_args: the
 * corpus and window flags that reproduce the base file's tokens. */
static void llamacpp_ppl_ratio(const char *name, const char *base, const char *model_dir,
                               const char *lockstep_args, double min_outside) {
    char jb[512], jl[512], txt[512], args[2048];
    snprintf(jb, sizeof jb, "%s/cli_saved_ratio_%s_base.json", kt_build_dir(), name);
    snprintf(jl, sizeof jl, "%s/cli_saved_ratio_%s_lockstep.json", kt_build_dir(), name);
    snprintf(txt, sizeof txt, "%s/cli_saved_ratio_%s.txt", kt_build_dir(), name);
    snprintf(args, sizeof args, "kl --llamacpp-base '%s' --arm %s/q8_0.gguf --json '%s' --quiet", base,
             model_dir, jb);
    CHECK(run(args, txt, NULL) == 0, "%s", args);
    snprintf(args, sizeof args, "kl --ref %s/f32.gguf --arm %s/q8_0.gguf --chunking llamacpp %s "
             "--json '%s' --quiet", model_dir, model_dir, lockstep_args, jl);
    CHECK(run(args, NULL, NULL) == 0, "%s", args);
    json_t *b = load_json(jb), *l = load_json(jl);
    char *text = kt_read_file(txt, NULL);
    if (!b || !l || !text) goto done;
    const json_t *t = json_object_get(b, "truncated");
    double n_tok = jnum(b, "n_tokens"), n_out = jnum(t, "n_next_outside");
    double rb = jnum(b, "ppl_ratio"), rl = jnum(l, "ppl_ratio");
    double eb = jnum(b, "ppl_ratio_stderr"), el = jnum(l, "ppl_ratio_stderr");
    double pb = jnum(b, "ppl_ref"), pl = jnum(l, "ppl_ref"), lcpp = jnum(t, "ppl_ref_llamacpp");
    printf("%s q8_0: PPL ratio %.6f ± %.6f against the base file, %.6f ± %.6f lockstep "
           "(%.3f%% apart); PPL(ref) %.3f vs %.3f; %.0f of %.0f next tokens below the window, "
           "llama.cpp's PPL(base) %.3f\n", name, rb, eb, rl, el, 100 * fabs(rb / rl - 1), pb, pl,
           n_out, n_tok, lcpp);
    /* the same tokens and the same arm: the arm's figures are identical */
    CHECK(jnum(b, "n_tokens") == jnum(l, "n_tokens") &&
              fabs(jnum(b, "ppl_arm") / jnum(l, "ppl_arm") - 1) < 1e-9,
          "%s: %.0f vs %.0f tokens, PPL(arm) %.9g vs %.9g", name, jnum(b, "n_tokens"),
          jnum(l, "n_tokens"), jnum(b, "ppl_arm"), jnum(l, "ppl_arm"));
    CHECK(n_out >= min_outside * n_tok, "%s: %.0f of %.0f next tokens below the window (want >= %g)",
          name, n_out, n_tok, min_outside);
    CHECK(fabs(rb / rl - 1) < 0.01, "%s: PPL ratio %.6f, lockstep %.6f", name, rb, rl);
    CHECK(fabs(pb / pl - 1) < 0.01, "%s: PPL(ref) %.6f, lockstep %.6f", name, pb, pl);
    CHECK(fabs(jnum(b, "ln_ppl_ratio") - log(rb)) < 1e-12 && fabs(jnum(b, "ppl_diff") -
              (jnum(b, "ppl_arm") - pb)) < 1e-9 * pb,
          "%s: ln ratio and difference against the same PPL(ref)", name);
    /* the paired error of the same pairs: close to the lockstep one */
    CHECK(eb > 0.5 * el && eb < 2.0 * el, "%s: ratio stderr %.6g, lockstep %.6g", name, eb, el);
    if (n_out > 0) {
        double shown = number_after(text, "llama.cpp's PPL(base)         :");
        CHECK(lcpp < pb && fabs(shown - lcpp) <= 1e-6 * lcpp,
              "%s: llama.cpp's PPL(base) %.6f (JSON) below PPL(ref) %.6f and shown as %.6f", name,
              lcpp, pb, shown);
        CHECK(line_of(text, "(kldeval: ") != NULL,
              "%s: the llama.cpp block says its PPL(base) is the estimate", name);
    } else {
        CHECK(json_is_null(json_object_get(t, "ppl_ref_llamacpp")) &&
                  !line_of(text, "llama.cpp's PPL(base)"),
              "%s: no next token outside, no second PPL(base)", name);
    }
done:
    json_decref(b);
    json_decref(l);
    free(text);
}

/* stories260K on the built-in corpus, llama.cpp chunking of 128: a fifth of
 * the next tokens lie more than 16 nats below the top (llama.cpp's PPL(base)
 * was 1956.87 against 7993 lockstep, and the ratio 4.06) */
static void llamacpp_ppl_ratio_stories(void) {
    char base[512], args[1024];
    snprintf(base, sizeof base, "%s/cli_saved_stories.kld", kt_build_dir());
    snprintf(args, sizeof args, "dump -m %s/models/stories260K/f32.gguf --format llamacpp --out '%s' "
             "--ctx 128 --quiet", KT_SHARED, base);
    CHECK(run(args, NULL, NULL) == 0, "%s", args);
    llamacpp_ppl_ratio("stories260K", base, KT_SHARED "/models/stories260K", "--ctx 128", 0.1);
}

static void teacher_json(void) {
    char dir[512], json[512], args[2048];
    snprintf(dir, sizeof dir, "%s/cli_saved_teacher", kt_build_dir());
    snprintf(json, sizeof json, "%s/cli_saved_teacher.json", kt_build_dir());
    snprintf(args, sizeof args, "rm -rf '%s'", dir);
    CHECK(system(args) == 0, "clean");
    snprintf(args, sizeof args, "dump -m %s/f32.gguf --out '%s' --top-k 8 --ctx 64 --chunks 4 --quiet",
             AID, dir);
    CHECK(run(args, NULL, NULL) == 0, "%s", args);
    snprintf(args, sizeof args, "kl --reference-logits '%s' --arm %s/q8_0.gguf --json '%s' --quiet", dir,
             AID, json);
    CHECK(run(args, NULL, NULL) == 0, "%s", args);
    json_error_t je;
    json_t *j = json_load_file(json, 0, &je);
    CHECK(j != NULL, "JSON parses: %s", je.text);
    if (!j) return;
    const json_t *cfg = json_object_get(j, "config"), *t = json_object_get(j, "truncated");
    CHECK(!strcmp(json_string_value(json_object_get(cfg, "mode")), "saved-teacher"), "mode");
    CHECK(!strcmp(json_string_value(json_object_get(json_object_get(cfg, "ref"), "kind")), "dump"),
          "ref kind dump");
    CHECK(t && json_integer_value(json_object_get(t, "n_rows")) == 4 * 63, "truncated rows 4 × 63");
    double mass = json_number_value(json_object_get(t, "mass_mean"));
    CHECK(mass > 0 && mass <= 1.0 && json_is_boolean(json_object_get(t, "comparable")) &&
              json_boolean_value(json_object_get(t, "comparable")) == (mass >= 0.99),
          "mass %g and its comparable flag", mass);
    CHECK(json_integer_value(json_object_get(j, "topk")) == 8, "top-k overlap k capped at the dump's 8");
    CHECK(json_is_object(json_object_get(t, "kld_bound")) &&
              json_integer_value(json_object_get(t, "n_no_bound")) == 0,
          "a normalised float16 teacher has its tail bound");
    json_decref(j);

    /* The same dump as another writer (or an older kldeval) would leave it:
     * without "lse_of_stored" its log-sum-exp is taken as the unrounded
     * logits', and no bound is printed or written, but a note says why. */
    char text[512];
    snprintf(text, sizeof text, "%s/cli_saved_teacher_raw.txt", kt_build_dir());
    snprintf(args, sizeof args, "sed -i '/\"lse_of_stored\"/d' '%s/manifest.json'", dir);
    CHECK(system(args) == 0, "%s", args);
    snprintf(args, sizeof args, "kl --reference-logits '%s' --arm %s/q8_0.gguf --json '%s' --quiet --no-db",
             dir, AID, json);
    CHECK(run(args, text, NULL) == 0, "%s", args);
    size_t len;
    char *out = kt_read_file(text, &len);
    CHECK(!line_of(out, "Mean KLD + tail bound") && line_of(out, "no tail bound"),
          "a float16 dump without lse_of_stored: no bound printed, the reason given");
    free(out);
    j = json_load_file(json, 0, &je);
    t = json_object_get(j, "truncated");
    CHECK(j && json_is_null(json_object_get(t, "kld_bound")) &&
              json_integer_value(json_object_get(t, "n_no_bound")) == 4 * 63,
          "its JSON has no bound (kld_bound null, n_no_bound 252)");
    json_decref(j);
}

static void expect_error(const char *args, const char *needle) {
    char err[512];
    snprintf(err, sizeof err, "%s/cli_saved.err", kt_build_dir());
    int rc = run(args, NULL, err);
    size_t n;
    char *text = kt_read_file(err, &n);
    CHECK(rc != 0 && strstr(text, needle), "'%s' → rc %d, stderr '%s' (want '%s')", args, rc, text,
          needle);
    free(text);
}

static void errors(void) {
    char dir[512], args[2048];
    snprintf(dir, sizeof dir, "%s/cli_saved_teacher", kt_build_dir());
    snprintf(args, sizeof args, "kl --reference-logits '%s' --ref %s/f32.gguf --arm %s/f32.gguf", dir, AID, AID);
    expect_error(args, "give one reference");
    snprintf(args, sizeof args, "kl --arm-logits '%s' --ref %s/f32.gguf", dir, AID);
    expect_error(args, "--reference-logits");
    snprintf(args, sizeof args, "kl --reference-logits '%s' --arm %s/f32.gguf --ctx 32", dir, AID);
    expect_error(args, "do not apply");
    snprintf(args, sizeof args, "kl --reference-logits '%s' --arm %s/f16.gguf", dir, KT_SHARED "/models/rand-llama");
    expect_error(args, "different tokenizer");
    snprintf(args, sizeof args, "kl --reference-logits '%s' --arm-logits '%s'", dir, dir);
    expect_error(args, "not a candidate dump");
    snprintf(args, sizeof args, "kl --reference-logits %s/nonexistent --arm %s/f32.gguf", kt_build_dir(), AID);
    expect_error(args, "nonexistent");
    snprintf(args, sizeof args, "kl --llamacpp-base %s --arm %s/models/rand-llama/f16.gguf", BASE, KT_SHARED);
    expect_error(args, "n_vocab");
    snprintf(args, sizeof args, "dump -m %s/f32.gguf --out '%s' --top-k 8 --ctx 64 --chunks 4", AID, dir);
    expect_error(args, "manifest.json");
    snprintf(args, sizeof args, "dump -m %s/f32.gguf --out %s/x --chunking doc", AID, kt_build_dir());
    expect_error(args, "stream or llamacpp");
    snprintf(args, sizeof args, "dump -m %s/f32.gguf --format llamacpp --out %s/f32.gguf", AID, AID);
    expect_error(args, "--out");
    snprintf(args, sizeof args, "dump --out %s/x", kt_build_dir());
    expect_error(args, "required");
    snprintf(args, sizeof args, "dump -m %s/f32.gguf --out %s/y --logits f8", AID, kt_build_dir());
    expect_error(args, "f16 or f32");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_cli_saved KLDEVAL\n");
        return 2;
    }
    kldeval = argv[1];
    llamacpp_oracle("f16", KT_SHARED "/oracle/aidreams260K/small-kld-f16.txt", 2e-6, 0.05);
    llamacpp_oracle("q8_0", KT_SHARED "/oracle/aidreams260K/small-kld-q8_0.txt", 3e-4, 0.5);
    llamacpp_write();
    llamacpp_ppl_ratio("aidreams260K", BASE, AID,
                       "--ctx 128 --chunks 40 --corpus " KT_SHARED "/corpus/licenses.txt", 0.0);
    llamacpp_ppl_ratio_stories();
    teacher_json();
    errors();
    return kt_finish();
}
