/* recipe.c — llama.cpp's named quantization recipes (llama_ftype) and its
 * per-tensor type choice (llama_tensor_get_type at commit c392e50): the
 * output/embedding rule, attn_v and ffn_down by layer position, attn_output
 * and attn_qkv, then the fallback for rows that the chosen type's block does
 * not divide. Only the branches of the recipes listed here are kept; the
 * very-low-bit i-quant recipes (which need an imatrix) are not offered. */
#include "quant/quant.h"

#include <strings.h>

enum { /* llama_ftype values */
    FT_ALL_F32 = 0, FT_F16 = 1, FT_Q4_0 = 2, FT_Q4_1 = 3, FT_Q8_0 = 7, FT_Q5_0 = 8, FT_Q5_1 = 9,
    FT_Q2_K = 10, FT_Q3_K_S = 11, FT_Q3_K_M = 12, FT_Q3_K_L = 13, FT_Q4_K_S = 14, FT_Q4_K_M = 15,
    FT_Q5_K_S = 16, FT_Q5_K_M = 17, FT_Q6_K = 18, FT_IQ4_NL = 25, FT_IQ4_XS = 30, FT_BF16 = 32
};

static const kld_recipe recipes[] = {
    {"F32", FT_ALL_F32, KLD_TYPE_F32},     {"F16", FT_F16, KLD_TYPE_F16},
    {"BF16", FT_BF16, KLD_TYPE_BF16},      {"Q8_0", FT_Q8_0, KLD_TYPE_Q8_0},
    {"Q4_0", FT_Q4_0, KLD_TYPE_Q4_0},      {"Q4_1", FT_Q4_1, KLD_TYPE_Q4_1},
    {"Q5_0", FT_Q5_0, KLD_TYPE_Q5_0},      {"Q5_1", FT_Q5_1, KLD_TYPE_Q5_1},
    {"Q2_K", FT_Q2_K, KLD_TYPE_Q2_K},      {"Q3_K_S", FT_Q3_K_S, KLD_TYPE_Q3_K},
    {"Q3_K_M", FT_Q3_K_M, KLD_TYPE_Q3_K},  {"Q3_K_L", FT_Q3_K_L, KLD_TYPE_Q3_K},
    {"Q4_K_S", FT_Q4_K_S, KLD_TYPE_Q4_K},  {"Q4_K_M", FT_Q4_K_M, KLD_TYPE_Q4_K},
    {"Q5_K_S", FT_Q5_K_S, KLD_TYPE_Q5_K},  {"Q5_K_M", FT_Q5_K_M, KLD_TYPE_Q5_K},
    {"Q6_K", FT_Q6_K, KLD_TYPE_Q6_K},      {"IQ4_NL", FT_IQ4_NL, KLD_TYPE_IQ4_NL},
    {"IQ4_XS", FT_IQ4_XS, KLD_TYPE_IQ4_XS},
};

const kld_recipe *kld_recipe_find(const char *name) {
    for (size_t i = 0; i < sizeof recipes / sizeof recipes[0]; i++)
        if (!strcasecmp(recipes[i].name, name)) return &recipes[i];
    return NULL;
}

const char *kld_recipe_names(void) {
    return "f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_K, q3_K_S, q3_K_M, q3_K_L, q4_K_S, "
           "q4_K_M, q5_K_S, q5_K_M, q6_K, iq4_nl, iq4_xs";
}

/* Layers that get more bits: the first and last eighth and every third one
 * in between (llama.cpp's use_more_bits). */
static bool more_bits(int i_layer, int n_layers) {
    return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

static bool has(const char *name, const char *part) { return strstr(name, part) != NULL; }

uint32_t kld_recipe_tensor_type(const kld_recipe *r, const kld_quant_model *m,
                                kld_recipe_state *st, const char *name, int64_t ne0) {
    const uint32_t ft = r->ftype;
    uint32_t t = r->base_type;
    const int n_layer = (int)m->n_layer;
    if (!strcmp(name, "output.weight") || (!m->has_output && !strcmp(name, "token_embd.weight"))) {
        if (m->falcon || ne0 % kld_type_info_get(t)->block_size != 0) t = KLD_TYPE_Q8_0;
        else if (t != KLD_TYPE_Q8_0) t = KLD_TYPE_Q6_K;
    } else if (!strcmp(name, "token_embd.weight")) {
        /* no change for these recipes */
    } else if (has(name, "attn_v.weight")) {
        if (ft == FT_Q2_K) t = m->n_gqa >= 4 ? KLD_TYPE_Q4_K : KLD_TYPE_Q3_K;
        else if (ft == FT_Q3_K_M) t = st->i_attention_wv < 2 ? KLD_TYPE_Q5_K : KLD_TYPE_Q4_K;
        else if (ft == FT_Q3_K_L) t = KLD_TYPE_Q5_K;
        else if ((ft == FT_IQ4_NL || ft == FT_IQ4_XS) && m->n_gqa >= 4) t = KLD_TYPE_Q5_K;
        else if ((ft == FT_Q4_K_M || ft == FT_Q5_K_M) &&
                 more_bits(st->i_attention_wv, m->n_attention_wv))
            t = KLD_TYPE_Q6_K;
        else if (ft == FT_Q4_K_S && st->i_attention_wv < 4) t = KLD_TYPE_Q5_K;
        if (m->is_70b && (t == KLD_TYPE_Q3_K || t == KLD_TYPE_Q4_K)) t = KLD_TYPE_Q5_K;
        if (m->n_expert == 8) t = KLD_TYPE_Q8_0;
        st->i_attention_wv++;
    } else if (has(name, "attn_k.weight")) {
        if (m->n_expert == 8) t = KLD_TYPE_Q8_0;
    } else if (has(name, "attn_q.weight")) {
        /* only the i-quant recipes not offered here change attn_q */
    } else if (has(name, "ffn_down")) {
        int i_layer = st->i_ffn_down;
        if (m->n_expert > 1) sscanf(name, "blk.%d.", &i_layer);
        if (ft == FT_Q2_K) t = KLD_TYPE_Q3_K;
        else if (ft == FT_Q3_K_M)
            t = i_layer < n_layer / 16 ? KLD_TYPE_Q5_K
                : !m->falcon || more_bits(i_layer, n_layer) ? KLD_TYPE_Q4_K : KLD_TYPE_Q3_K;
        else if (ft == FT_Q3_K_L) t = m->falcon ? KLD_TYPE_Q4_K : KLD_TYPE_Q5_K;
        else if (ft == FT_Q4_K_M) {
            if (m->falcon)
                t = i_layer < n_layer / 16 ? KLD_TYPE_Q6_K
                    : more_bits(i_layer, n_layer) ? KLD_TYPE_Q5_K : KLD_TYPE_Q4_K;
            else if (more_bits(i_layer, n_layer)) t = KLD_TYPE_Q6_K;
        } else if (i_layer < n_layer / 8 && (ft == FT_IQ4_NL || ft == FT_IQ4_XS) && !m->has_imatrix)
            t = KLD_TYPE_Q5_K;
        else if (ft == FT_Q5_K_M && more_bits(i_layer, n_layer)) t = KLD_TYPE_Q6_K;
        else if (ft == FT_Q4_K_S && !m->falcon && i_layer < n_layer / 8) t = KLD_TYPE_Q5_K;
        else if ((ft == FT_Q4_0 || ft == FT_Q5_0) && m->has_imatrix && i_layer < n_layer / 8)
            t = ft == FT_Q4_0 ? KLD_TYPE_Q4_1 : KLD_TYPE_Q5_1;
        st->i_ffn_down++;
    } else if (has(name, "attn_output.weight")) {
        if (!m->falcon) {
            if (m->n_expert == 8) {
                if (ft == FT_Q2_K || ft == FT_Q3_K_S || ft == FT_Q3_K_M || ft == FT_IQ4_NL ||
                    ft == FT_Q4_K_S || ft == FT_Q4_K_M || ft == FT_IQ4_XS)
                    t = KLD_TYPE_Q5_K;
            } else {
                if (ft == FT_Q2_K) t = KLD_TYPE_Q3_K;
                else if (ft == FT_Q3_K_M) t = KLD_TYPE_Q4_K;
                else if (ft == FT_Q3_K_L) t = KLD_TYPE_Q5_K;
            }
        } else if (ft == FT_Q3_K_L) {
            t = KLD_TYPE_Q4_K;
        }
    } else if (has(name, "attn_qkv.weight")) {
        if (ft == FT_Q3_K_M || ft == FT_Q3_K_L) t = KLD_TYPE_Q4_K;
        else if (ft == FT_Q4_K_M) t = KLD_TYPE_Q5_K;
        else if (ft == FT_Q5_K_M) t = KLD_TYPE_Q6_K;
    } else if (has(name, "ffn_gate")) {
        st->i_ffn_gate++;
    } else if (has(name, "ffn_up")) {
        st->i_ffn_up++;
    }
    return t;
}

uint32_t kld_quant_fallback(uint32_t type, int64_t ne0) {
    const kld_type_info *ti = kld_type_info_get(type);
    if (!ti || ti->block_size <= 0) return KLD_TYPE_COUNT;
    if (ne0 % ti->block_size == 0) return type;
    uint32_t f;
    switch (type) {
    case KLD_TYPE_TQ1_0:
    case KLD_TYPE_TQ2_0: f = KLD_TYPE_Q4_0; break;
    case KLD_TYPE_IQ2_XXS:
    case KLD_TYPE_IQ2_XS:
    case KLD_TYPE_IQ2_S:
    case KLD_TYPE_IQ3_XXS:
    case KLD_TYPE_IQ3_S:
    case KLD_TYPE_IQ1_S:
    case KLD_TYPE_IQ1_M:
    case KLD_TYPE_Q2_K:
    case KLD_TYPE_Q3_K:
    case KLD_TYPE_IQ4_XS: f = KLD_TYPE_IQ4_NL; break;
    case KLD_TYPE_Q4_K: f = KLD_TYPE_Q5_0; break;
    case KLD_TYPE_Q5_K: f = KLD_TYPE_Q5_1; break;
    case KLD_TYPE_Q6_K: f = KLD_TYPE_Q8_0; break;
    default: return KLD_TYPE_COUNT; /* llama.cpp: "Unsupported tensor size encountered" */
    }
    if (ne0 % kld_type_info_get(f)->block_size != 0) f = KLD_TYPE_F16;
    return f;
}
