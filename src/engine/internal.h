/* internal.h — the engine's private structures: the opened model (weights
 * plus float32 copies of the small vectors) and a session (arena layout,
 * KV cache, position). Shared by model.c, session.c, forward.c and
 * attention.c; nothing outside src/engine includes it. */
#ifndef KLD_ENGINE_INTERNAL_H
#define KLD_ENGINE_INTERNAL_H

#include "engine/engine.h"
#include "engine/gemm.h"
#include "engine/kernels.h"
#include "engine/pool.h"
#include "model/weights.h"

#define KLD_ATTN_QB 24 /* query rows per attention task (4 microkernel row blocks) */
/* Floats of attention=online state per thread, for a block of query rows:
 * the unnormalised output (float), the sum and the power-of-two exponent
 * of the running maximum (double). */
#define KLD_ONLINE_AUX_FLOATS(hdv) ((size_t)KLD_ATTN_QB * (size_t)((hdv) + 4) + 16)
/* attention=exact walks the keys in blocks of KLD_ATTN_TILE_BLOCK (as the
 * online softmax does, the same bits) once a query block sees more than
 * KLD_ATTN_TILE_KEYS keys: the scores then stay in cache (24 rows × 256
 * keys, 24 KiB; blocks of 64 spent ~8% more CPU at 8,192 tokens on calls
 * and packing, blocks of 512 no less than 256). */
#define KLD_ATTN_TILE_KEYS 2048
#define KLD_ATTN_TILE_BLOCK 256

/* Float32 norms and biases of one layer (NULL when absent). Norm weights
 * already include hparams.norm_weight_offset. */
typedef struct kld_layer_vecs {
    const float *attn_norm, *ffn_norm, *attn_post_norm, *ffn_post_norm, *q_norm, *k_norm;
    const float *bq, *bk, *bv, *bo, *b_gate, *b_up, *b_down;
    const float *conv;         /* short-convolution kernel [n_embd][L] (LFM2) */
    const float *dn_conv;      /* DeltaNet conv kernel [C][conv_kernel] (Qwen3-Next) */
    const float *dn_dt, *dn_a; /* [v heads]: dt bias, −exp(A_log) */
    const float *dn_norm;      /* [head_v] gated RMSNorm weight */
    const float *sinks;        /* [n_head] attention sink logits (gpt-oss) */
    const float *out_scale;    /* [1] layer output scale (Gemma 4), or NULL */
    const float *moe_gate_inp_b;          /* [n_expert] router bias */
    const float *moe_gate_b, *moe_up_b;   /* [n_expert][n_ff_exp] expert biases */
    const float *moe_down_b;              /* [n_expert][n_embd] */
    const float *moe_probs_b;             /* [n_expert] selection bias (exp_probs_b) */
    const float *q_a_norm, *kv_a_norm;    /* MLA: [q_lora_rank], [kv_lora_rank] */
    const float *ple_post_norm;           /* [n_embd] per-layer embeddings' output norm (Gemma 4) */
    /* experts beside a dense FFN (Gemma 4 26B-A4B): router input scale [n_embd], expert output
     * scales [n_expert], the experts' input norm and the two outputs' norms [n_embd] */
    const float *moe_inp_scale, *moe_down_scale, *moe_pre_norm_2, *moe_post_norm_1, *moe_post_norm_2;
} kld_layer_vecs;

struct kld_model {
    kld_source *src;
    kld_hparams hp;
    kld_weights w;
    float *vec_store;          /* every vector below points in here */
    uint64_t vec_bytes;
    kld_layer_vecs *lv;        /* n_layer entries */
    const float *output_norm;
    const float *ple_proj_norm;  /* [n_embd_per_layer] (Gemma 4's per-layer embeddings), or NULL */
    uint64_t weights_bytes;    /* bytes of all bound weight tensors */
    struct kld_model_quant *quant; /* quantize-on-load state (model_policy.c), or NULL */
    struct kld_lora *lora;     /* MODEL+ADAPTER[:SCALE] (lora.c), or NULL */
    struct kld_model_repacked *repacked; /* matrices repacked for the SIMD sets (weight_pack.c) */
    void *attached;            /* what a layer above keeps with the model (kld_model_attach) */
    void (*attached_free)(void *);
};

/* Repacks m's q4_K and q6_K matrices, and its f16 ones when with_f16, in the
 * layouts of kernels.h (each once; a later call only adds the f16 ones if
 * they are now wanted), releasing the mapped pages of those read from the
 * file. An allocation failure leaves the rest row-major (the product reads
 * either). */
kld_status kld_model_repack(kld_model *m, kld_pool *pool, const kld_engine_kernels *kr, bool with_f16,
                            kld_error *err);
/* t's repacked copy (data NULL when there is none). */
kld_repacked kld_model_repacked(const kld_model *m, const kld_tensor *t);
uint64_t kld_model_repacked_bytes(const kld_model *m);
uint64_t kld_model_resident_weight_bytes(const kld_model *m, const kld_engine_kernels *kr);
void kld_model_repacked_free(struct kld_model_repacked *p);

/* One layer's K and V cache. f32: K^T [kv head][head_dim][ldk] and V
 * [kv head][n_ctx][head_dim_v] floats, read in place. Other schemes
 * (kv_scheme.h): positions below n_pre (the kv_start lever) as f32 rows
 * [kv head][n_pre][head dim] in k_pre/v_pre, the others as rows of one
 * (kv head, position) [kv head][n_ctx - n_pre][row bytes] in the scheme's
 * format, quantized when written, dequantized when attention reads them. */
typedef struct kld_kv_layer {
    uint32_t k_type, v_type;
    uint64_t k_row, v_row;     /* bytes of one head's row (typed layers) */
    int64_t n_pre;             /* f32 prefix positions of a typed K or V */
    void *k, *v;
    float *k_pre, *v_pre;      /* NULL for an f32 K or V */
} kld_kv_layer;
/* Quantizes the bound weight matrices of m as `policy` says, rebinding
 * m->w to owned tensors (model_policy.c). */
kld_status kld_model_apply_policy(kld_model *m, const char *policy, const char *imatrix,
                                  int n_threads, bool announce, kld_error *err);
void kld_model_quant_free(struct kld_model_quant *q);

/* One recurrent layer's state (NULL parts for layers without it): the
 * short convolution's last L - 1 inputs B·x, [L - 1][n_embd], oldest first;
 * for DeltaNet the conv's last K - 1 inputs [K - 1][C], then S. */
typedef struct kld_rec_layer {
    float *conv;
    float *ssm;                /* DeltaNet: [v head][head_k][head_v] state matrices S */
} kld_rec_layer;

struct kld_session {
    kld_model *model;
    kld_levers lv;
    kld_kv_layer *kvl;         /* n_layer entries */
    float *attn_aux;           /* per thread: dequantized K^T/V, online-softmax state */
    size_t attn_aux_stride;    /* floats per thread */
    float *hidden_out;         /* set for one call: the final-norm rows go here too */
    bool head_only;            /* a session that only applies the head (no repacking) */
    float *ar;                 /* act lever: rounded matmul inputs [max_chunk][ar_ld] */
    int64_t ar_ld;
    kld_pool *pool;
    bool own_pool;
    const kld_engine_kernels *kr;
    int64_t n_ctx, max_chunk, pos;
    int64_t ldk;               /* K^T cache row stride: n_ctx rounded up to 16 */
    kld_mem_plan plan;
    void *arena;
    float *x, *xn, *qkv, *attn, *tmp, *gu; /* [max_chunk][...] activations */
    float *qg;                 /* gated attention: [max_chunk][n_head][q; gate], else NULL */
    float *mla;                /* MLA: [max_chunk][kld_mla_row_floats], else NULL */
    float *ple;                /* per-layer embeddings: [max_chunk][n_layer][P] inputs, else NULL */
    float *ple_gate;           /* [max_chunk][P]: one layer's gated rows */
    float *ple_row;            /* [n_layer·P]: one token's per_layer_token_embd row */
    float *rope_cs[2];         /* [max_chunk][n_rot/2][cos, sin]: full / sliding layers (n_rot_swa) */
    float *rope_ff;            /* [n_rot/2] frequency divisors */
    float *scratch;            /* per-thread GEMM panels / attention rows */
    size_t scratch_stride;     /* floats per thread */
    int64_t ld_qkv;            /* n_head·hd + n_kv·(hd + hd_v), the widest layer's */
    kld_rec_layer *recl;       /* n_layer entries */
    float *rec_state;          /* every layer's recurrent state (zeroed by reset) */
    uint64_t rec_state_floats;
    float *rec_act;            /* recurrent blocks' per-chunk activations */
    kld_matmul_observer observe; /* kld_session_observe, or NULL */
    const struct kld_lora *lora[2]; /* the model's adapter, then the lora= lever's */
    int n_lora;
    struct kld_lora *lora_own; /* the lever's adapter (owned) */
    float *lora_buf;           /* side-product scratch (kld_lora_scratch_floats) */
    void *observe_ctx;
    kld_layer_observer layer_observe; /* kld_session_observe_layers, or NULL */
    void *layer_observe_ctx;
    /* mixture of experts (moe.c; NULL for a dense model) */
    float *moe_probs;          /* [max_chunk][n_expert] router logits, then probabilities */
    int32_t *moe_ids;          /* [max_chunk][n_expert_used] selected experts, best first */
    float *moe_w;              /* [max_chunk][n_expert_used] their weights */
    int32_t *moe_list;         /* [max_chunk·n_expert_used] (row·k + slot) grouped by expert */
    int32_t *moe_count;        /* [n_expert + 1] group starts */
    int32_t *moe_sort;         /* [n_threads][n_expert] top-k work / fill cursors */
    float *moe_x;              /* [max_chunk][n_embd] gathered rows, then expert outputs */
    float *moe_y;              /* [max_chunk][n_expert_used][n_embd] weighted expert outputs */
    float *moe_sg;             /* [max_chunk] shared-expert gate logits */
    float *moe_rin;            /* beside a dense FFN: [max_chunk][n_embd] the router's input rows */
    float *moe_dense;          /* ... and the dense FFN's normed output rows */
};

/* MLA's per-row activations: q_a (q_lora_rank), [latent kv; k_pe]
 * (kv_lora_rank + n_rot), attn_kv_b's [k_nope; v] per head. */
static inline uint64_t kld_mla_row_floats(const kld_hparams *hp) {
    return (uint64_t)(hp->n_lora_q + hp->n_lora_kv + hp->n_rot +
                      hp->n_head * (hp->head_dim - hp->n_rot + hp->head_dim_v));
}

/* Attention of chunk rows [0, n) at positions pos.. for layer il: reads q
 * from s->qkv and the caches, writes s->attn. rows (a batched decode step,
 * else NULL): row r is the next token of session rows[r], attending over
 * that session's cache at its position (pos is then unused). */
void kld_attention(kld_session *s, kld_session *const *rows, int64_t il, int64_t n, int64_t pos);

/* The scheme row of (kv head h, position p >= c->n_pre) of a typed K
 * (v false) or V cache. */
static inline uint8_t *kld_kv_scheme_row(const kld_kv_layer *c, int64_t n_ctx, bool v, int64_t h,
                                         int64_t p) {
    return (uint8_t *)(v ? c->v : c->k) +
           (uint64_t)(h * (n_ctx - c->n_pre) + p - c->n_pre) * (v ? c->v_row : c->k_row);
}

/* Tests only: layer il's cache bytes of (kv head h, position p) for K
 * (v false) or V, in the layer's type (f32 below kv_start); f32 K layers
 * are transposed and have no row (NULL). */
const void *kld_session_kv_row(const kld_session *s, int64_t il, bool v, int64_t h, int64_t p,
                               uint64_t *bytes);

/* Tests only: run this session on another kernel set (e.g. the scalar
 * references) to compare whole forward passes bit for bit. */
void kld_session_use_kernels(kld_session *s, const kld_engine_kernels *kr);

/* act lever (act.c): rounds rows [0, n) of A (k values each) into s->ar
 * as the lever prescribes for a weight of this type; false when the lever
 * leaves them as they are (A is then used directly). */
bool kld_act_round_rows(kld_session *s, uint32_t weight_type, int64_t n, int64_t k,
                        const float *A, int64_t lda);

/* One vector x[0..k) rounded into y (may alias x) as lever a prescribes
 * for an operand of type weight_type; false (y untouched) when it does not. */
bool kld_act_round_vec(kld_act_round a, uint32_t weight_type, const float *x, float *y,
                       int64_t k);

/* One weight product of the forward pass (forward.c): the imatrix observer,
 * the act lever's rounding, then kld_gemm_weights. */
void kld_forward_gemm(kld_session *s, const kld_tensor *W, int64_t n, const float *A, int64_t lda,
                      float *C, int64_t ldc);
/* The output head (and final soft-cap) over n final-norm rows (forward.c). */
void kld_forward_head(kld_session *s, const float *xn, int64_t n, float *logits);

/* The mixture-of-experts FFN of layer il for chunk rows [0, n) (moe.c):
 * reads s->xn, writes s->tmp. */
void kld_moe_ffn(kld_session *s, int64_t il, int64_t n);

/* LFM2 short-convolution block (shortconv.c): s->xn rows [0, n) → s->tmp,
 * advancing layer il's convolution state by n inputs. */
void kld_shortconv_forward(kld_session *s, int64_t il, int64_t n);
/* Floats of its per-chunk activations and of one layer's state. */
uint64_t kld_shortconv_act_floats(const kld_hparams *hp, int64_t max_chunk);
uint64_t kld_shortconv_state_floats(const kld_hparams *hp);

/* Qwen3-Next gated DeltaNet block (deltanet.c): s->xn rows [0, n) → s->tmp,
 * advancing layer il's conv state and delta-rule state by n tokens. */
void kld_deltanet_forward(kld_session *s, int64_t il, int64_t n);
uint64_t kld_deltanet_act_floats(const kld_hparams *hp, int64_t max_chunk);
uint64_t kld_deltanet_conv_floats(const kld_hparams *hp); /* conv part of the state */
uint64_t kld_deltanet_state_floats(const kld_hparams *hp); /* conv + S */

/* kld_levers_check without opening the lora= adapter (the session opens it). */
kld_status kld_levers_check_layout(const kld_levers *l, const kld_model *model, kld_error *err);

/* The forward pass proper (forward.c); arguments already validated. With
 * rows (kld_session_decode_batch): row r is session rows[r]'s next token,
 * its K/V written to that session's cache at its position; s (rows[0])
 * holds the activations; the caller advances every session. */
void kld_forward(kld_session *s, kld_session *const *rows, const int32_t *tokens, int64_t n,
                 int64_t first_row, float *logits);

#endif
