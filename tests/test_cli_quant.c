/* test_cli_quant.c — `kldeval quantize`, `kldeval inspect MODEL@POLICY` and
 * `kldeval kl` with an on-load arm, as a user runs them: the written file is
 * llama-quantize's, a bad policy fails naming its token, inspect prints the
 * policy's histogram and bits per weight, and the kl self-gate between
 * f16.gguf@q4_K_M and the file `quantize` wrote is exactly 0; a selector
 * overrides a recipe's refusal (stories260K q8_0,ffn_down=f16), and the
 * refusal names the selector that resolves it. */
#include "testlib.h"

#include "quant/quant.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <sys/wait.h>

#define RL KT_SHARED "/models/rand-llama"

static const char *kldeval;

/* Runs kldeval with args (stderr merged into the captured output). */
static char *run(const char *args, int *status) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' %s 2>&1", kldeval, args);
    char *out = NULL;
    *status = kt_run_capture(cmd, &out);
    return out;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    kldeval = argv[1];
    char out[512], args[4096], json[512];
    int st;
    snprintf(out, sizeof out, "%s/cli_quant_q4_K_M.gguf", kt_build_dir());
    snprintf(json, sizeof json, "%s/cli_quant_kl.json", kt_build_dir());

    snprintf(args, sizeof args, "quantize --threads 2 %s/f16.gguf '%s' q4_K_M", RL, out);
    char *o = run(args, &st);
    CHECK(st == 0 && strstr(o, "blk.1.ffn_down.weight") && strstr(o, "6.282 bits per weight"),
          "quantize q4_K_M: exit 0, per-tensor lines and bits per weight (%d):\n%s", st, o);
    free(o);
    size_t na, nb;
    char *a = kt_read_file(out, &na), *b = kt_read_file(RL "/q4_K_M.gguf", &nb);
    CHECK(na == nb && !memcmp(a, b, na), "kldeval quantize q4_K_M == llama-quantize's file");
    free(a);
    free(b);

    snprintf(args, sizeof args, "quantize -q %s/f16.gguf '%s.bad' q4_K_M,ffn_sideways=q8_0", RL, out);
    o = run(args, &st);
    CHECK(st == 1 && strstr(o, "'ffn_sideways'") && strstr(o, "valid"),
          "a bad policy exits 1 naming the token: %s", o);
    free(o);
    o = run("quantize --help", &st);
    CHECK(st == 0 && strstr(o, "qwen2_moe") && strstr(o, "olmoe") && strstr(o, "lfm2") &&
          strstr(o, "qwen3_next") && strstr(o, "imatrix=FILE"), "quantize --help names the Hugging Face "
          "model types it converts and imatrix=FILE: %s", o);
    free(o);
    /* -q hides the per-tensor lines, not the notes on what a conversion leaves out (stderr) */
    char so[600], se[600];
    snprintf(so, sizeof so, "%s.stdout", out);
    snprintf(se, sizeof se, "%s.stderr", out);
    snprintf(args, sizeof args, "'%s' quantize -q %s/models/rand-qwen2-hf '%s.hf' q8_0 >'%s' 2>'%s'", kldeval,
             KT_SHARED, out, so, se);
    st = system(args);
    char *qo = kt_read_file(so, NULL), *qe = kt_read_file(se, NULL);
    CHECK(st == 0 && qo && !*qo, "quantize -q: exit 0, nothing on stdout (%d): %s", st, qo ? qo : "(none)");
    CHECK(qe && strstr(qe, "note:") && strstr(qe, "no tokenizer.json"),
          "quantize -q: the note that the GGUF gets no tokenizer still reaches stderr: %s", qe ? qe : "(none)");
    free(qo), free(qe);
    remove(so), remove(se);
    snprintf(args, sizeof args, "%s.hf", out);
    remove(args);
    snprintf(args, sizeof args, "quantize -q %s/f16.gguf %s/f16.gguf q4_K_M", RL, RL);
    o = run(args, &st);
    CHECK(st == 2, "OUT = IN is refused before any work (%d): %s", st, o);
    free(o);

    snprintf(args, sizeof args, "inspect %s/f16.gguf@q4_K_M,head=q8_0", RL);
    o = run(args, &st);
    CHECK(st == 0 && strstr(o, "policy         q4_K_M,head=q8_0") && strstr(o, "q8_0") &&
          strstr(o, "bits per weight"), "inspect MODEL@POLICY prints the policy's histogram:\n%s", o);
    free(o);
    snprintf(args, sizeof args, "inspect --json %s/f16.gguf@q4_K_M", RL);
    o = run(args, &st);
    const char *brace = strchr(o, '{');
    json_t *j = brace ? json_loads(brace, 0, NULL) : NULL;
    json_t *pol = json_object_get(j, "policy");
    double bpw = json_real_value(json_object_get(pol, "bits_per_weight"));
    CHECK(st == 0 && pol && bpw > 6.28 && bpw < 6.29 &&
          json_integer_value(json_object_get(json_object_get(pol, "types"), "q6_K")) == 3,
          "inspect --json MODEL@POLICY: bits_per_weight %.4f and 3 q6_K tensors", bpw);
    json_decref(j);
    free(o);

    snprintf(args, sizeof args, "kl --ref %s/f16.gguf@q4_K_M --arm '%s' --max-docs 2 --max-tokens 48 "
             "--threads 2 --quiet --json '%s'", RL, out, json);
    o = run(args, &st);
    CHECK(st == 0, "kl with an on-load reference exits 0 (%d): %s", st, o);
    free(o);
    j = json_load_file(json, 0, NULL);
    json_t *kld = json_object_get(j, "kld");
    CHECK(kld && json_real_value(json_object_get(kld, "mean")) == 0.0 &&
          json_real_value(json_object_get(kld, "max")) == 0.0 &&
          json_real_value(json_object_get(j, "top1_agreement")) == 1.0 &&
          json_integer_value(json_object_get(j, "n_positions")) > 0,
          "kl self-gate f16.gguf@q4_K_M vs the written file: KLD exactly 0");
    const char *ref_path = json_string_value(
        json_object_get(json_object_get(json_object_get(j, "config"), "ref"), "path"));
    CHECK(ref_path && strstr(ref_path, "@q4_K_M"), "the report names the reference's policy");
    json_decref(j);
    remove(out);
    remove(json);

    /* stories260K: llama-quantize refuses q8_0 (ffn_down rows of 172); the
     * user's ffn_down=f16 overrides the refusal, and the written file loads
     * with ffn_down in f16 and the rest as q8_0 gives it: the same weights as
     * llama-quantize's q8_0.gguf there (its q6_K recipe falls back to them),
     * so kl against it and against the on-load arm is exactly 0 */
    char st_out[512];
    snprintf(st_out, sizeof st_out, "%s/cli_quant_st_q8_0_ffn_down_f16.gguf", kt_build_dir());
    snprintf(args, sizeof args, "quantize -q %s/models/stories260K/f32.gguf '%s' q8_0", KT_SHARED,
             st_out);
    o = run(args, &st);
    CHECK(st == 1 && strstr(o, "blk.0.ffn_down.weight") && strstr(o, "add ffn_down=f16 ") &&
              strstr(o, "'q8_0,ffn_down=f16'"),
          "quantize q8_0 on stories260K is refused, naming the selector that resolves it (%d): %s",
          st, o);
    free(o);
    for (int keep = 0; keep < 2; keep++) {
        snprintf(args, sizeof args, "quantize --threads 2 %s/models/stories260K/f32.gguf '%s' "
                 "q8_0,ffn_down=%s", KT_SHARED, st_out, keep ? "keep" : "f16");
        o = run(args, &st);
        CHECK(st == 0 && strstr(o, "blk.4.ffn_down.weight") && strstr(o, "0 fallback(s)"),
              "quantize stories260K q8_0,ffn_down=%s: exit 0 (%d): %s", keep ? "keep" : "f16", st, o);
        free(o);
        snprintf(args, sizeof args, "inspect --json '%s'", st_out);
        o = run(args, &st);
        brace = strchr(o, '{');
        j = brace ? json_loads(brace, 0, NULL) : NULL;
        json_t *types = json_object_get(j, "types");
        json_t *q8 = json_object_get(types, "q8_0"), *fl = json_object_get(types, keep ? "f32" : "f16");
        CHECK(st == 0 && json_integer_value(json_object_get(q8, "tensors")) == 32 &&
                  json_integer_value(json_object_get(fl, "tensors")) == (keep ? 16 : 5) &&
                  (keep || !json_object_get(types, "f32") ||
                   json_integer_value(json_object_get(json_object_get(types, "f32"), "tensors")) == 11),
              "the written file loads: 32 q8_0 tensors and ffn_down in %s:\n%s", keep ? "f32" : "f16", o);
        json_decref(j);
        free(o);
    }
    /* the f16 file: the same weights as llama-quantize's, on load too */
    snprintf(args, sizeof args, "quantize -q --threads 2 %s/models/stories260K/f32.gguf '%s' "
             "q8_0,ffn_down=f16", KT_SHARED, st_out);
    o = run(args, &st);
    free(o);
    const char *against[] = {KT_SHARED "/models/stories260K/q8_0.gguf",
                             KT_SHARED "/models/stories260K/f32.gguf@q8_0,ffn_down=f16"};
    for (int k = 0; k < 2; k++) {
        snprintf(args, sizeof args, "kl --ref '%s' --arm '%s' --max-docs 2 --max-tokens 64 --threads 2 "
                 "--quiet --no-db --json '%s'", st_out, against[k], json);
        o = run(args, &st);
        CHECK(st == 0, "kl of the written file against %s exits 0 (%d): %s", against[k], st, o);
        free(o);
        j = json_load_file(json, 0, NULL);
        kld = json_object_get(j, "kld");
        CHECK(kld && json_real_value(json_object_get(kld, "max")) == 0.0 &&
                  json_integer_value(json_object_get(j, "n_positions")) > 0,
              "kl of the written file against %s: KLD exactly 0", against[k]);
        json_decref(j);
    }
    remove(st_out);
    remove(json);

    /* kldeval imatrix with llama-imatrix's settings (-c 256 --chunks 64 on
     * the licenses corpus) and llama.cpp's numerics against its file
     * (tests/test_imatrix_llamacpp.c measures the other settings) */
    char im_path[512];
    snprintf(im_path, sizeof im_path, "%s/cli_quant_imatrix.dat", kt_build_dir());
    snprintf(args, sizeof args, "imatrix -q -m %s/f16.gguf --corpus %s/corpus/licenses.txt --ctx 256 "
             "--chunks 64 --threads 2 --llamacpp -o '%s'", RL, KT_SHARED, im_path);
    o = run(args, &st);
    CHECK(st == 0, "imatrix exits 0 (%d): %s", st, o);
    free(o);
    kld_imatrix *ours = NULL, *theirs = NULL;
    kld_error err = {0};
    CHECK_OK(kld_imatrix_read(im_path, &ours, &err), err);
    CHECK_OK(kld_imatrix_read(KT_SHARED "/oracle/rand-llama/imatrix/imatrix.dat", &theirs, &err), err);
    if (ours && theirs) {
        CHECK(ours->n == theirs->n && ours->chunks == 64, "imatrix: %zu entries (llama.cpp %zu), %d chunks",
              ours->n, theirs->n, ours->chunks);
        double worst = 0, sum = 0;
        int64_t count = 0;
        for (size_t i = 0; i < theirs->n; i++) {
            const kld_imatrix_entry *t = &theirs->e[i], *u = kld_imatrix_find(ours, t->name);
            CHECK(u && u->n == t->n && u->ncall == t->ncall, "imatrix entry %s present, same size", t->name);
            for (int64_t k = 0; u && u->n == t->n && k < t->n; k++) {
                double rel = fabs((double)u->sums[k] - t->sums[k]) / fabs((double)t->sums[k]);
                if (rel > worst) worst = rel;
                sum += rel;
                count++;
            }
            /* the first layer's attention inputs are the normed embeddings:
             * no rounded activation precedes them, so they agree exactly */
            if (u && !strcmp(t->name, "blk.0.attn_q.weight"))
                CHECK(!memcmp(u->sums, t->sums, (size_t)t->n * 4), "blk.0.attn_q entry bit for bit");
        }
        const double mean = count ? sum / (double)count : 1;
        printf("  imatrix --llamacpp: relative difference from llama-imatrix: worst %.3g, mean %.3g\n",
               worst, mean);
        CHECK(worst < 0.01, "imatrix within 1%% of llama-imatrix per entry (worst %.3g)", worst);
        /* the exact engine's mean is 4.7e-5; llama.cpp's numerics 9.6e-6 */
        CHECK(mean < 2e-5, "imatrix --llamacpp: mean relative difference %.3g < 2e-5", mean);
    }
    kld_imatrix_free(ours);
    kld_imatrix_free(theirs);
    snprintf(args, sizeof args, "imatrix -q -m %s/f16.gguf --ids-file x --ctx 256 --lever act=f8 "
             "-o '%s'", RL, im_path);
    o = run(args, &st);
    CHECK(st == 2 && o && strstr(o, "act"), "imatrix --lever act=f8 refused, naming the lever (%d): %s",
          st, o ? o : "");
    free(o);
    remove(im_path);
    return kt_finish();
}
