/* test_forward_glm4moe.c — GLM-4.5 / 4.6 / 4.7 (llama.cpp's `glm4moe`,
 * src/models/glm4-moe.cpp) on small random weights: q/k/v biases, q/k norms
 * (optional), partial NeoX RoPE, one leading dense layer, then MoE layers
 * with sigmoid routing (top k of sigmoid + exp_probs_b, weights the unbiased
 * sigmoids, renormalised and scaled by expert_weights_scale) and an ungated
 * shared expert. The engine against the float64 reference (one pass, chunks,
 * decode), the selection bias shown to matter, the appended NextN layer
 * skipped, and the malformed files. llama.cpp's own logits: test_lcpp_oracle. */
#include "engine/engine.h"
#include "quant/quant.h"
#include "tensor/types.h"
#include "test_forward_models.h"
#include "testlib.h"

#include <stdio.h>
#include <stdlib.h>

#define N_IDS 40

static void test_reference(void) {
    synth_shape s;
    synth_default(&s, "glm4moe");
    s.mat_type = KLD_TYPE_F32;
    char path[512];
    snprintf(path, sizeof path, "%s/glm4moe.gguf", kt_build_dir());
    CHECK(synth_write_gguf(&s, path), "synthesize glm4moe");
    int32_t ids[N_IDS];
    tf_make_ids(ids, N_IDS, s.n_vocab, 20261206);
    float *ref = tf_check_path("glm4moe", path, path, NULL, ids, N_IDS);
    CHECK(ref != NULL, "glm4moe: engine vs reference");
    /* without the scale the logits move: expert_weights_scale is applied */
    synth_shape u = s;
    u.w_scale = 1;
    char p1[512];
    snprintf(p1, sizeof p1, "%s/glm4moe-scale1.gguf", kt_build_dir());
    CHECK(synth_write_gguf(&u, p1), "synthesize glm4moe with scale 1");
    int64_t nv = 0;
    float *a = tf_engine_logits(p1, ids, N_IDS, N_IDS, 2, &nv);
    if (ref && a) {
        tf_cmp c = tf_compare(ref, a, N_IDS, nv);
        CHECK(c.max_abs > 1e-2, "glm4moe: expert_weights_scale 2.5 vs 1 differ by %.3g", c.max_abs);
    }
    free(a);
    free(ref);
}

static void test_errors(void) {
    synth_shape s;
    synth_default(&s, "glm4moe");
    s.drop_tensor = "blk.1.exp_probs_b.bias";
    tf_expect_open_error("no-probs-b", &s, "blk.1.exp_probs_b.bias", "missing");
    synth_default(&s, "glm4moe");
    s.drop_tensor = "blk.2.ffn_up_shexp.weight";
    tf_expect_open_error("no-up-shexp", &s, "blk.2.ffn_up_shexp.weight", "missing");
    synth_default(&s, "glm4moe");
    s.n_shared = 0;
    tf_expect_open_error("no-shared-count", &s, "glm4moe.expert_shared_count", "missing or out of range");
    synth_default(&s, "glm4moe");
    s.bad_shape_tensor = "blk.0.ffn_gate.weight"; /* the leading dense layer */
    tf_expect_open_error("dense-lead-shape", &s, "blk.0.ffn_gate.weight", "expected [64, 128]");
    synth_default(&s, "glm4moe");
    s.drop_tensor = "blk.1.ffn_gate_inp.weight";
    tf_expect_open_error("no-router", &s, "blk.1.ffn_gate_inp.weight", "missing");
}

int main(void) {
    kld_kernels_init();
    test_reference();
    {
        char p[512];
        snprintf(p, sizeof p, "%s/glm4moe.gguf", kt_build_dir());
        tf_check_quantize_q8_0("glm4moe", p, 300, N_IDS, 5e-3);
    }
    test_errors();
    return kt_finish();
}
