/* lcpp_oracle_families.c — shapes of the llama.cpp-oracle models (see the
 * header). Changing one changes the committed files: remake them all. */
#include "lcpp_oracle_families.h"

#include "tensor/types.h"

const lcpp_family lcpp_families[LCPP_N_FAMILIES] = {
    {"llama", "dense llama, GQA 4/2, untied output, Llama-3 rope_freqs (factor 8)", LCPP_C392E50},
    {"mixtral", "llama + 4 experts top-2 (merged ffn_*_exps), weights renormalised", LCPP_C392E50},
    {"qwen2", "q/k/v biases, NeoX rope", LCPP_C392E50},
    {"qwen2moe", "4 experts top-2, no renormalisation, sigmoid-gated shared expert", LCPP_C392E50},
    {"olmoe", "4 experts top-2, full-width q/k RMS norms", LCPP_C392E50},
    {"phi3", "fused qkv and gate/up, sliding window 24 on every layer", LCPP_C392E50},
    {"gemma", "embd x sqrt(n_embd), GELU, MQA, head_dim 32 != n_embd/n_head", LCPP_C392E50},
    {"gemma2", "26 layers (c392e50 needs 26/42/46), even layers window 16, softcaps, post-norms", LCPP_C392E50},
    {"qwen2-yarn", "qwen2 with YaRN factor 4 over original context 64", LCPP_C392E50},
    {"llama-bf16", "dense llama with bf16 matrices", LCPP_C392E50},
    {"gpt-oss", "sinks, q/k/v/o biases, even layers window 8, YaRN 4 over 64, biased top-k-then-softmax "
                "router, biased experts with the clamped SwiGLU", LCPP_2026},
    {"gpt-oss-mxfp4", "gpt-oss with MXFP4 experts (the released files' type)", LCPP_2026},
    {"qwen3next", "3 gated-DeltaNet layers (ssm_ba, 2 q/k heads, 4 v heads) + gated attention, 4 experts "
                  "top-2 renormalised + sigmoid-gated shared expert", LCPP_2026},
    {"qwen3", "per-head q/k RMS norms, NeoX rope", LCPP_2026},
    {"qwen3moe", "qwen3 attention, 4 experts top-2 renormalised (n_ff_exp 32)", LCPP_2026},
    {"lfm2", "short-convolution layers (ccacca) between GQA layers with q/k norms, token_embd_norm", LCPP_2026},
    {"qwen35", "Qwen3.5 dense: 3 DeltaNet layers (ssm_beta/ssm_alpha, v heads tiled over 2 q/k heads) + "
               "gated attention with rope sections", LCPP_2026},
    {"qwen35moe", "qwen35 with 4 experts top-2 renormalised + sigmoid-gated shared expert", LCPP_2026},
    {"glm4moe", "q/k/v biases, q/k norms, partial NeoX rope, 1 leading dense layer, 4 experts top-2 by "
                "sigmoid + exp_probs_b, renormalised x 2.5, ungated shared expert", LCPP_2026},
    {"deepseek2", "MLA with plain attn_q and attn_kv_b (kv_lora 32, heads 16 nope + 8 rope, v 16), normal rope "
                  "on the rope dims, YaRN 4 over 64 with mscale^2 in the scale, 1 leading dense layer, 4 experts "
                  "top-2 by sigmoid + exp_probs_b, renormalised x 2.5, ungated shared expert", LCPP_2026},
    {"deepseek2-q-lora", "deepseek2 with V3's q bottleneck: attn_q_a (24), attn_q_a_norm, attn_q_b", LCPP_2026},
    {"deepseek2-mla", "deepseek2-q-lora as newer conversions write V3: attn_k_b / attn_v_b with key_length_mla, "
                      "llama.cpp's latent cache and one MQA kv head (its absorbed MLA graph)", LCPP_2026},
    {"deepseek2-groups", "deepseek2-mla with V3's group-limited routing: 2 groups of 2 experts (scored by their two "
                         "best sigmoid + exp_probs_b), the best 1 eligible", LCPP_2026},
    {"deepseek2-softmax", "deepseek2 as DeepSeek V2's files: no expert_gating_func (softmax), no "
                          "expert_weights_norm, exp_probs_b and x 2.5 all the same", LCPP_2026},
    {"gemma4", "Gemma 4 dense: 6 layers (2 and 5 full, K as V there), window 8, sliding base 1e4, "
               "proportional RoPE on the full layers, attention scale 1, V norm, layer_output_scale", LCPP_2026},
    {"gemma4-e2b", "Gemma 4 E2B/E4B geometry: 8 layers (4 and 7 full), full heads 64 with 1 KV head, sliding "
                   "heads 32 with 2 KV heads rotating 16 dims, the last 3 layers reading layers 3 and 4's KV "
                   "caches with twice the FFN width, per-layer embeddings of 32", LCPP_2026},
    {"gemma4-moe", "Gemma 4 26B-A4B's FFN: gemma4 with 4 experts (top 2, n_ff_exp 32) beside the dense FFN, "
                   "routed by softmax over rms(x)/sqrt(E) * ffn_gate_inp.scale, ffn_down_exps.scale, "
                   "pre_ffw_norm_2 / post_ffw_norm_1 / post_ffw_norm_2", LCPP_2026},
};

const lcpp_converted_model lcpp_converted[LCPP_N_CONVERTED] = {
    {"qwen3next", "Qwen3NextForCausalLM"},         {"qwen35", "Qwen3_5ForCausalLM"},
    {"qwen35moe", "Qwen3_5MoeForCausalLM"},        {"gemma4", "Gemma4ForCausalLM"},
    {"deepseek2-q-lora", "DeepseekV3ForCausalLM"}, {"glm4moe", "Glm4MoeForCausalLM"},
    {"gpt-oss-mxfp4", "GptOssForCausalLM"},
};

const lcpp_family *lcpp_family_named(const char *name) {
    for (int i = 0; i < LCPP_N_FAMILIES; i++)
        if (!strcmp(lcpp_families[i].name, name)) return &lcpp_families[i];
    return NULL;
}

void lcpp_family_shape(const lcpp_family *f, synth_shape *s) {
    const char *n = f->name;
    const char *arch = !strcmp(n, "mixtral") || !strcmp(n, "llama-bf16") ? "llama"
                       : !strcmp(n, "qwen2-yarn")                        ? "qwen2"
                       : !strcmp(n, "gpt-oss-mxfp4")                     ? "gpt-oss"
                       : !strncmp(n, "deepseek2", 9)                     ? "deepseek2"
                       : !strncmp(n, "gemma4", 6)                        ? "gemma4"
                                                                         : n;
    synth_default(s, arch);
    s->n_embd = 64;
    s->n_layer = 2;
    s->n_head = 4;
    s->n_head_kv = 2;
    s->head_dim = 16;
    s->n_ff = 48;
    s->n_vocab = LCPP_N_VOCAB;
    s->mat_type = KLD_TYPE_F32; /* ggml rounds no activation for f32 weights */
    s->rope_base = 1e4;
    s->tied = true;
    s->lcpp_vocab_keys = true;
    s->seed = 1000 + (uint64_t)(f - lcpp_families);
    /* llama.cpp's qwen2moe and olmoe require output.weight */
    if (!strcmp(n, "llama") || !strcmp(n, "qwen2moe") || !strcmp(n, "olmoe")) s->tied = false;
    if (!strcmp(n, "llama")) { /* Llama-3.x rope_scaling, as rope_freqs.weight */
        s->llama3_factor = 8;
        s->llama3_low = 1;
        s->llama3_high = 4;
        s->llama3_orig_ctx = 64; /* wavelengths 6.3 .. 2e4: kept, ramped and scaled dims */
    }
    if (!strcmp(n, "mixtral") || !strcmp(n, "qwen2moe") || !strcmp(n, "olmoe")) {
        s->n_expert = 4;
        s->n_expert_used = 2;
        s->n_ff = 24;
    }
    if (!strcmp(n, "qwen2moe")) {
        s->n_ff_exp = 24;
        s->n_ff_shexp = 16;
    }
    if (!strcmp(n, "olmoe")) s->n_head_kv = 4;
    if (!strcmp(n, "phi3")) {
        s->tied = false; /* llama.cpp's phi3 requires output.weight */
        s->sliding_window = 24;
    }
    if (!strcmp(n, "gemma")) {
        s->n_head_kv = 1;
        s->head_dim = 32;
    }
    if (!strcmp(n, "gemma2")) {
        s->n_layer = 26;
        s->n_embd = 16;
        s->n_head = 2;
        s->n_head_kv = 1;
        s->head_dim = 16; /* != n_embd / n_head: the 2B/9B query scale 1/sqrt(head_dim) */
        s->n_ff = 24;
        s->sliding_window = 16;
        s->attn_softcap = 2; /* small enough to bite on these weights */
        s->final_softcap = 5;
    }
    if (!strcmp(n, "qwen2-yarn")) {
        s->yarn_factor = 4;
        s->yarn_orig_ctx = 64;
    }
    if (!strcmp(n, "llama-bf16")) s->mat_type = KLD_TYPE_BF16;
    if (!strncmp(n, "gpt-oss", 7)) { /* synth_default's gpt-oss, 3 layers, at these sizes */
        s->n_layer = 3;
        s->tied = false; /* llama.cpp's gpt-oss requires output.weight */
        s->sliding_window = 8;
        s->rope_base = 150000;
        s->yarn_factor = 4;
        s->yarn_orig_ctx = 64;
        s->n_expert = 4;
        s->n_expert_used = 2;
        s->n_ff_exp = 32;
    }
    if (!strncmp(n, "qwen35", 6)) s->n_layer = 4; /* synth_default's DeltaNet sizes */
    if (!strcmp(n, "qwen35moe")) {
        s->n_expert = 4;
        s->n_expert_used = 2;
        s->n_ff_exp = 32;
        s->n_ff_shexp = 32;
    }
    if (!strcmp(n, "qwen3next")) { /* synth_default's DeltaNet sizes; llama.cpp requires experts */
        s->n_layer = 4;
        s->n_expert = 4;
        s->n_expert_used = 2;
        s->n_ff_exp = 32;
        s->n_ff_shexp = 32;
    }
    if (!strcmp(n, "qwen3moe")) {
        s->n_expert = 4;
        s->n_expert_used = 2;
        s->n_ff_exp = 32;
    }
    if (!strcmp(n, "lfm2")) { /* synth_default's layout: 6 layers, conv width 3 */
        s->n_layer = 6;
        s->n_head_kv = 2;
    }
    if (!strcmp(n, "glm4moe")) { /* synth_default's routing keys, 3 layers */
        s->n_layer = 3;
        s->n_expert = 4;
        s->n_expert_used = 2;
        s->n_ff_exp = 32;
        s->n_dense_lead = 1;
        s->n_shared = 1;
        s->w_scale = 2.5;
        s->tied = false;
    }
    if (!strncmp(n, "deepseek2", 9)) { /* synth_default's MLA, YaRN and routing keys, 3 layers */
        s->n_layer = 3;
        s->n_head_kv = 4;
        s->head_dim = 24;
        s->n_expert = 4;
        s->n_expert_used = 2;
        s->n_ff_exp = 32;
        s->n_dense_lead = 1;
        s->n_shared = 1;
        s->w_scale = 2.5;
        s->tied = false;
        if (strcmp(n, "deepseek2") && strcmp(n, "deepseek2-softmax")) s->mla_q_lora = 24;
        if (!strcmp(n, "deepseek2-softmax")) s->gating_func = 0;
        if (!strcmp(n, "deepseek2-groups")) {
            s->n_groups = 2;
            s->n_group_used = 1;
        }
        if (!strcmp(n, "deepseek2-mla") || !strcmp(n, "deepseek2-groups")) {
            s->mla_absorbed = true;
            s->n_head_kv = 1;
        }
    }
    if (!strcmp(n, "gemma4")) { /* synth_default's layout: 6 layers, flags 110110 */
        s->n_layer = 6;
        s->rope_base = 1e6; /* the full layers' base, apart from the sliding layers' 1e4 */
    }
    if (!strcmp(n, "gemma4-e2b")) { /* synth_gemma4_e2b at vocabulary 128 and n_ff 48 */
        const uint64_t seed = s->seed;
        synth_gemma4_e2b(s);
        s->seed = seed;
        s->n_vocab = LCPP_N_VOCAB;
        s->n_ff = 48;
        s->rope_base = 1e6;
        s->lcpp_vocab_keys = true;
    }
    if (!strcmp(n, "gemma4-moe")) { /* gemma4's layout with test_forward_gemma4.c's experts */
        s->n_layer = 6;
        s->rope_base = 1e6;
        s->n_expert = 4;
        s->n_expert_used = 2;
        s->n_ff_exp = 32;
    }
    if (!strcmp(n, "gpt-oss-mxfp4")) {
        s->exp_type_set = true;
        s->exp_type = KLD_TYPE_MXFP4;
    }
}
