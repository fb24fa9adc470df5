/* synth_gemma4_hf.c — test-only Hugging Face copy of a synthesized gemma4
 * GGUF (see synth_gemma4_hf.h): names as gguf-py's tensor_mapping.py maps
 * Gemma 4's (the gemma3n per-layer-embedding rows, layer_scalar without
 * .weight), norms as stored (Gemma4Model's norm_shift is 0), rope_freqs
 * left out, the config keys Gemma4TextConfig saves. */
#include "synth_gemma4_hf.h"

#include "io/gguf.h"
#include "tensor/types.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

/* GGUF per-layer suffix → HF suffix (without the kind). */
static const char *const names[][2] = {
    {"attn_norm", "input_layernorm"},
    {"attn_q", "self_attn.q_proj"},
    {"attn_k", "self_attn.k_proj"},
    {"attn_v", "self_attn.v_proj"},
    {"attn_q_norm", "self_attn.q_norm"},
    {"attn_k_norm", "self_attn.k_norm"},
    {"attn_output", "self_attn.o_proj"},
    {"post_attention_norm", "post_attention_layernorm"},
    {"ffn_norm", "pre_feedforward_layernorm"},
    {"ffn_gate", "mlp.gate_proj"},
    {"ffn_up", "mlp.up_proj"},
    {"ffn_down", "mlp.down_proj"},
    {"post_ffw_norm", "post_feedforward_layernorm"},
    {"inp_gate", "per_layer_input_gate"},
    {"proj", "per_layer_projection"},
    {"post_norm", "post_per_layer_input_norm"},
    {"ffn_gate_inp", "router.proj"},
    {"pre_ffw_norm_2", "pre_feedforward_layernorm_2"},
    {"post_ffw_norm_1", "post_feedforward_layernorm_1"},
    {"post_ffw_norm_2", "post_feedforward_layernorm_2"},
};

static const kld_tensor *find(const kld_gguf *g, const char *name) {
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (!strcmp(g->tensors[i].name, name)) return &g->tensors[i];
    return NULL;
}

static const char *const globals[][2] = {
    {"token_embd.weight", "embed_tokens.weight"},
    {"output_norm.weight", "norm.weight"},
    {"per_layer_token_embd.weight", "embed_tokens_per_layer.weight"},
    {"per_layer_model_proj.weight", "per_layer_model_projection.weight"},
    {"per_layer_proj_norm.weight", "per_layer_projection_norm.weight"},
};

static json_t *text_config(const synth_shape *s, const kld_gguf *g) {
    double eps = 0;
    kld_gguf_get_float(g, "gemma4.attention.layer_norm_rms_epsilon", &eps);
    json_t *c = json_object();
    json_object_set_new(c, "model_type", json_string("gemma4_text"));
    json_object_set_new(c, "hidden_size", json_integer(s->n_embd));
    json_object_set_new(c, "num_hidden_layers", json_integer(s->n_layer));
    json_object_set_new(c, "intermediate_size", json_integer(s->n_ff));
    json_object_set_new(c, "num_attention_heads", json_integer(s->n_head));
    json_object_set_new(c, "num_key_value_heads", json_integer(s->n_head_kv));
    json_object_set_new(c, "num_global_key_value_heads", s->g4_kv_full > 0 ? json_integer(s->g4_kv_full) : json_null());
    json_object_set_new(c, "head_dim", json_integer(s->g4_head_swa > 0 ? s->g4_head_swa : s->head_dim));
    json_object_set_new(c, "global_head_dim", json_integer(s->head_dim));
    json_object_set_new(c, "vocab_size", json_integer(s->n_vocab));
    json_object_set_new(c, "vocab_size_per_layer_input", json_integer(s->n_vocab));
    json_object_set_new(c, "hidden_size_per_layer_input", json_integer(s->g4_per_layer));
    json_object_set_new(c, "num_kv_shared_layers", json_integer(s->g4_shared_kv));
    json_object_set_new(c, "use_double_wide_mlp", json_boolean(s->g4_wide_ff));
    json_object_set_new(c, "max_position_embeddings", json_integer(4096));
    json_object_set_new(c, "rms_norm_eps", json_real(eps)); /* the GGUF's f32 value, exactly */
    json_object_set_new(c, "hidden_activation", json_string("gelu_pytorch_tanh"));
    json_object_set_new(c, "tie_word_embeddings", json_boolean(s->tied));
    json_object_set_new(c, "sliding_window", json_integer(s->sliding_window));
    json_object_set_new(c, "final_logit_softcapping", s->final_softcap > 0 ? json_real(s->final_softcap) : json_null());
    json_object_set_new(c, "attn_logit_softcapping", json_null());
    json_object_set_new(c, "enable_moe_block", json_boolean(s->n_expert > 0));
    /* transformers saves every attribute of the config: null ones on a dense model */
    json_object_set_new(c, "num_experts", s->n_expert > 0 ? json_integer(s->n_expert) : json_null());
    json_object_set_new(c, "top_k_experts", s->n_expert > 0 ? json_integer(s->n_expert_used) : json_null());
    json_object_set_new(c, "moe_intermediate_size", s->n_expert > 0 ? json_integer(s->n_ff_exp) : json_null());
    json_t *lt = json_array();
    for (int64_t il = 0; il < s->n_layer; il++)
        json_array_append_new(lt, json_string(s->pattern_flags[il] ? "sliding_attention" : "full_attention"));
    json_object_set_new(c, "layer_types", lt);
    /* the synthesized rope_freqs rotates head_dim / 8 of head_dim / 2 pairs: factor 0.25 */
    json_object_set_new(c, "rope_parameters",
                        json_pack("{s:{s:s, s:f, s:f}, s:{s:s, s:f}}", "full_attention", "rope_type", "proportional",
                                  "partial_rotary_factor", 0.25, "rope_theta", s->rope_base, "sliding_attention",
                                  "rope_type", "default", "rope_theta", s->freq_base_swa));
    return c;
}

static void apply(json_t *c, const hf_edit *ed) {
    for (int i = 0; ed && ed[i].key; i++) {
        if (!ed[i].json) {
            json_object_del(c, ed[i].key);
            continue;
        }
        json_error_t je;
        json_t *v = json_loads(ed[i].json, JSON_DECODE_ANY, &je);
        if (v) json_object_set_new(c, ed[i].key, v);
    }
}

bool g4_write_hf(const synth_shape *s, const char *gguf, const char *dir, bool wrapped, const char *drop,
                 const hf_edit *ed) {
    kld_error err = {0};
    kld_gguf *g = NULL;
    if (kld_gguf_open(gguf, &g, &err) != KLD_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return false;
    }
    const char *pre = wrapped ? "model.language_model." : "model.";
    st_writer o;
    st_init(&o);
    char name[200];
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const kld_tensor *t = &g->tensors[i];
        const int64_t n = kld_tensor_nelements(t);
        int64_t d2[2] = {t->ne[1], t->ne[0]}, d1[1] = {t->ne[0]};
        const int nd = t->n_dims == 1 ? 1 : 2;
        int il = -1, used = 0;
        name[0] = '\0';
        if (!strcmp(t->name, "rope_freqs.weight")) continue; /* generated by the converter */
        if (!strcmp(t->name, "output.weight")) snprintf(name, sizeof name, "lm_head.weight");
        for (size_t k = 0; !name[0] && k < sizeof globals / sizeof globals[0]; k++)
            if (!strcmp(t->name, globals[k][0])) snprintf(name, sizeof name, "%s%s", pre, globals[k][1]);
        if (!name[0] && sscanf(t->name, "blk.%d.%n", &il, &used) == 1 && used) {
            const char *r = t->name + used, *dot = strrchr(r, '.');
            char rest[96];
            snprintf(rest, sizeof rest, "%.*s", (int)(dot - r), r);
            if (!strcmp(rest, "layer_output_scale")) snprintf(name, sizeof name, "%slayers.%d.layer_scalar", pre, il);
            if (!strcmp(rest, "ffn_gate_inp") && !strcmp(dot, ".scale"))
                snprintf(name, sizeof name, "%slayers.%d.router.scale", pre, il);
            if (!strcmp(rest, "ffn_down_exps") && !strcmp(dot, ".scale"))
                snprintf(name, sizeof name, "%slayers.%d.router.per_expert_scale", pre, il);
            if (!strcmp(rest, "ffn_up_exps")) continue; /* in gate_up_proj */
            if (!name[0] && t->n_dims == 3) { /* experts.down_proj [X, E, F]; gate_up_proj [X, 2F, E] */
                const bool down = !strcmp(rest, "ffn_down_exps");
                snprintf(name, sizeof name, "%slayers.%d.experts.%s", pre, il, down ? "down_proj" : "gate_up_proj");
                if (drop && !strcmp(drop, name)) continue;
                const int64_t X = t->ne[2], per = t->ne[0] * t->ne[1];
                if (down) {
                    int64_t d3[3] = {X, t->ne[1], t->ne[0]};
                    st_put_f32(&o, name, 3, d3, st_floats(t, 0, n));
                    continue;
                }
                char un[96];
                snprintf(un, sizeof un, "blk.%d.ffn_up_exps.weight", il);
                const kld_tensor *up = find(g, un);
                float *f = malloc(sizeof(float) * (size_t)(2 * n)), *gf = st_floats(t, 0, n), *uf = up ? st_floats(up, 0, n) : NULL;
                for (int64_t e = 0; uf && e < X; e++) { /* per expert: the gate rows, then the up rows */
                    memcpy(f + 2 * e * per, gf + e * per, sizeof(float) * (size_t)per);
                    memcpy(f + (2 * e + 1) * per, uf + e * per, sizeof(float) * (size_t)per);
                }
                free(gf), free(uf);
                int64_t d3[3] = {X, 2 * t->ne[1], t->ne[0]};
                st_put_f32(&o, name, 3, d3, f);
                continue;
            }
            for (size_t k = 0; !name[0] && k < sizeof names / sizeof names[0]; k++)
                if (!strcmp(rest, names[k][0]))
                    snprintf(name, sizeof name, "%slayers.%d.%s%s", pre, il, names[k][1], dot);
        }
        if (!name[0]) {
            fprintf(stderr, "gemma4 HF copy: no HF name for %s\n", t->name);
            kld_gguf_close(g);
            return false;
        }
        if (drop && !strcmp(drop, name)) continue;
        st_put_f32(&o, name, nd, nd == 1 ? d1 : d2, st_floats(t, 0, n));
    }
    if (wrapped) { /* the towers the converter leaves to the mmproj file: never read here */
        static const char *const towers[] = {"model.vision_tower.encoder.layers.0.self_attn.q_proj.linear.weight",
                                             "model.audio_tower.layers.0.feed_forward1.ffw_layer_1.linear.weight",
                                             "model.embed_vision.embedding_projection.weight"};
        for (size_t k = 0; k < sizeof towers / sizeof towers[0]; k++) {
            int64_t d[2] = {4, 8};
            float *f = calloc(32, sizeof(float));
            for (int j = 0; j < 32; j++) f[j] = (float)(j % 5) - 2;
            st_put_f32(&o, towers[k], 2, d, f);
        }
    }
    bool ok = st_write(&o, dir);
    json_t *tc = text_config(s, g);
    kld_gguf_close(g);
    apply(tc, ed);
    json_t *c = tc;
    if (wrapped) {
        c = json_object();
        json_object_set_new(c, "architectures", json_pack("[s]", "Gemma4ForConditionalGeneration"));
        json_object_set_new(c, "model_type", json_string("gemma4"));
        json_object_set_new(c, "text_config", tc);
        json_object_set_new(c, "vision_config", json_pack("{s:s, s:i}", "model_type", "gemma4_vision", "hidden_size", 8));
        json_object_set_new(c, "audio_config", json_pack("{s:s, s:i}", "model_type", "gemma4_audio", "hidden_size", 8));
        json_object_set_new(c, "tie_word_embeddings", json_boolean(s->tied));
    } else {
        json_object_set_new(c, "architectures", json_pack("[s]", "Gemma4ForCausalLM"));
    }
    return hf_config_write(c, NULL, dir) && ok;
}
