/* test_lcpp_converter.c — kldeval's own Hugging Face → GGUF conversion
 * (`kldeval quantize HF OUT keep`) against llama.cpp's converter
 * (convert_hf_to_gguf.py of LCPP_2026) on the same checkpoints: each family
 * of tests/data/lcpp-oracle/converter is rewritten here as the Hugging Face
 * copy llama.cpp converted (lcpp_converted_hf.c), converted by kldeval, and
 * compared tensor by tensor (name, type, shape, bytes) with llama.cpp's file,
 * then logit by logit through the engine. test_lcpp_oracle checks those
 * files against llama.cpp's logits; this test checks that kldeval names,
 * orders and transforms every tensor as llama.cpp's converter does (a round
 * trip through our own writer could not: Qwen3-Next's ssm_ba was found that
 * way).
 *
 * Where the two converters write a different but equivalent form, the
 * difference is named and counted, never skipped silently:
 * - DeepSeek MLA: llama.cpp splits kv_b_proj into attn_k_b / attn_v_b (its
 *   absorbed graph); kldeval writes attn_kv_b, the form llama.cpp also reads
 *   (tests/data/lcpp-oracle/deepseek2*.gguf). The logits must still agree bit
 *   for bit: the engine rebuilds attn_kv_b from the split form.
 * - GLM-4.5's NextN (MTP) layer: llama.cpp keeps it as an extra block
 *   (nextn_predict_layers); kldeval drops it. Neither runs it. */
#include "hf_roundtrip.h"
#include "io/gguf.h"
#include "lcpp_converted_hf.h"
#include "quant/quant.h"
#include "test_forward_models.h"
#include "testlib.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define DIR "tests/data/lcpp-oracle/converter/"

/* A tensor only one converter writes, in the forms the header names. */
static bool other_form(const char *family, const char *name, bool theirs, int64_t n_layer) {
    int il = -1, used = 0;
    if (sscanf(name, "blk.%d.%n", &il, &used) != 1 || !used) return false;
    const char *rest = name + used;
    if (!strncmp(family, "deepseek2", 9))
        return theirs ? !strcmp(rest, "attn_k_b.weight") || !strcmp(rest, "attn_v_b.weight")
                      : !strcmp(rest, "attn_kv_b.weight");
    if (!strcmp(family, "glm4moe")) return theirs && il >= n_layer;
    return false;
}

/* The "architectures" entry of dir/config.json the converter dispatches on is want. */
static void check_architecture(const char *name, const char *dir, const char *want) {
    char path[700];
    snprintf(path, sizeof path, "%s/config.json", dir);
    json_error_t je;
    json_t *c = json_load_file(path, 0, &je);
    const char *got = json_string_value(json_array_get(json_object_get(c, "architectures"), 0));
    CHECK(got && !strcmp(got, want), "%s: config.json names the architecture %s (%s)", name, want, got ? got : je.text);
    json_decref(c);
}

static void check_family(const lcpp_family *f, const char *hf_arch, const int32_t *ids) {
    char gguf[600], hf[600], ours[600], theirs[600];
    snprintf(gguf, sizeof gguf, "%s/lcpp-converter-%s.synth.gguf", kt_build_dir(), f->name);
    snprintf(hf, sizeof hf, "%s/lcpp-converter-%s", kt_build_dir(), f->name);
    snprintf(ours, sizeof ours, "%s/lcpp-converter-%s.kldeval.gguf", kt_build_dir(), f->name);
    snprintf(theirs, sizeof theirs, DIR "%s.gguf", f->name);
    mkdir(hf, 0755);
    synth_shape s;
    if (!lcpp_converted_write(f, gguf, hf, &s)) {
        CHECK(false, "%s: write the Hugging Face copy", f->name);
        return;
    }
    check_architecture(f->name, hf, hf_arch);
    kld_error err = {0};
    CHECK_OK(kld_quantize_file(hf, ours, "keep", NULL, NULL, &err), err);
    kld_gguf *a = NULL, *b = NULL;
    CHECK_OK(kld_gguf_open(ours, &a, &err), err);
    CHECK_OK(kld_gguf_open(theirs, &b, &err), err);
    if (!a || !b) {
        kld_gguf_close(a), kld_gguf_close(b);
        return;
    }
    uint64_t same = 0, form_theirs = 0, form_ours = 0, extra = 0;
    for (uint64_t j = 0; j < b->n_tensors; j++) {
        const kld_tensor *y = &b->tensors[j];
        if (other_form(f->name, y->name, true, s.n_layer)) {
            form_theirs++;
            continue;
        }
        const bool eq = hf_rt_same_tensor(a, y);
        if (!eq) printf("%s: llama.cpp's %s differs from kldeval's or is missing there\n", f->name, y->name);
        same += eq;
    }
    for (uint64_t j = 0; j < a->n_tensors; j++) {
        const kld_tensor *x = &a->tensors[j];
        if (other_form(f->name, x->name, false, s.n_layer)) form_ours++;
        else if (!kld_gguf_find_tensor(b, x->name)) {
            printf("%s: kldeval writes %s, llama.cpp does not\n", f->name, x->name);
            extra++;
        }
    }
    printf("%-17s %" PRIu64 " of llama.cpp's %" PRIu64 " tensors equal in kldeval's conversion; other forms: "
           "%" PRIu64 " of llama.cpp's, %" PRIu64 " of kldeval's\n",
           f->name, same, b->n_tensors, form_theirs, form_ours);
    CHECK(same + form_theirs == b->n_tensors && extra == 0,
          "%s: every tensor llama.cpp's converter writes is kldeval's, bit for bit (%" PRIu64 " equal, %" PRIu64
          " in another form, %" PRIu64 " only kldeval's)", f->name, same, form_theirs, extra);
    /* the forms named above are real differences only where expected */
    const bool forms = !strncmp(f->name, "deepseek2", 9) || !strcmp(f->name, "glm4moe");
    CHECK(forms == (form_theirs > 0), "%s: %" PRIu64 " tensors in llama.cpp's own form", f->name, form_theirs);
    kld_gguf_close(a), kld_gguf_close(b);

    /* the same model: the engine's logits of the two files bit for bit */
    const char *levers = strstr(f->name, "mxfp4") ? "act=q8" : NULL;
    int64_t nv_a = 0, nv_b = 0;
    float *la = tf_engine_logits_levers(ours, ids, LCPP_N_IDS, levers, 1, &nv_a);
    float *lb = tf_engine_logits_levers(theirs, ids, LCPP_N_IDS, levers, 1, &nv_b);
    CHECK(la && lb && nv_a == LCPP_N_VOCAB && nv_b == LCPP_N_VOCAB &&
              !memcmp(la, lb, sizeof(float) * (size_t)(LCPP_N_IDS * LCPP_N_VOCAB)),
          "%s: kldeval's and llama.cpp's conversions give the same logits bit for bit", f->name);
    free(la), free(lb);
}

int main(void) {
    int32_t ids[LCPP_N_IDS];
    tf_make_ids(ids, LCPP_N_IDS, LCPP_N_VOCAB, LCPP_IDS_SEED);
    printf("llama.cpp's converter: %s\n", LCPP_2026);
    for (int i = 0; i < LCPP_N_CONVERTED; i++) {
        const lcpp_family *f = lcpp_family_named(lcpp_converted[i].family);
        CHECK(f != NULL, "converted model %s: an oracle family", lcpp_converted[i].family);
        if (f) check_family(f, lcpp_converted[i].hf_arch, ids);
    }
    return kt_finish();
}
