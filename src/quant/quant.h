/* quant.h — precision policies and quantization: llama.cpp's named recipes
 * (its per-tensor type choice), the policy grammar BASE[,SELECTOR=TYPE]…,
 * the per-tensor plan a policy makes for one model, threaded quantization
 * of tensors (identical bytes for any thread count), importance matrices
 * (llama-imatrix's file format) and writing a quantized GGUF.
 *
 * The module sits between the model layer (hyper-parameters, tensor
 * tables) and the engine, which quantizes a model on load through it. */
#ifndef KLD_QUANT_QUANT_H
#define KLD_QUANT_QUANT_H

#include "model/hparams.h"

#include <stdio.h>

/* ---- recipes (llama_ftype) ---- */

typedef struct kld_recipe {
    const char *name;   /* llama-quantize spelling: "Q4_K_M" (matched case-insensitively) */
    uint32_t ftype;     /* llama_ftype value written to general.file_type */
    uint32_t base_type; /* the default tensor type */
} kld_recipe;

const kld_recipe *kld_recipe_find(const char *name);
/* "q8_0, q4_0, …" for messages. */
const char *kld_recipe_names(void);

/* What llama.cpp's type choice needs to know about the model. */
typedef struct kld_quant_model {
    int64_t n_layer;
    int64_t n_gqa;     /* n_head / n_head_kv */
    int64_t n_expert;  /* 0 for dense models */
    bool falcon;
    bool is_70b;       /* llama.cpp's LLM_TYPE_70B (llama with 80 layers) */
    bool has_output;   /* a separate output.weight exists */
    bool has_imatrix;
    int n_attention_wv; /* attn_v / attn_qkv tensors */
} kld_quant_model;

/* Counters llama_tensor_get_type keeps while walking the tensors in order. */
typedef struct kld_recipe_state {
    int i_attention_wv, i_ffn_down, i_ffn_gate, i_ffn_up;
} kld_recipe_state;

/* The type recipe r gives tensor `name` (row length ne0) before the
 * divisibility fallback; advances the counters as llama.cpp does. Call it
 * for the eligible tensors in llama.cpp's order (layer, then name). */
uint32_t kld_recipe_tensor_type(const kld_recipe *r, const kld_quant_model *m,
                                kld_recipe_state *st, const char *name, int64_t ne0);

/* llama.cpp's fallback when ne0 is not a multiple of the type's block:
 * q4_K→q5_0, q5_K→q5_1, q6_K→q8_0, q2_K/q3_K/iq4_xs→iq4_nl, then f16 if the
 * fallback does not divide either. Returns `type` when no fallback is needed;
 * KLD_TYPE_COUNT when llama.cpp would refuse the tensor. */
uint32_t kld_quant_fallback(uint32_t type, int64_t ne0);

/* ---- policies ---- */

typedef enum kld_selector_kind {
    KLD_SEL_HEAD,   /* head / output: the output matrix (token_embd when tied) */
    KLD_SEL_EMBD,   /* embd / token_embd */
    KLD_SEL_BLK,    /* blk:A-B: every weight of those layers */
    KLD_SEL_CLASS,  /* attn_q, ffn_down, …  (optionally restricted to blk:A-B.) */
    KLD_SEL_GLOB    /* fnmatch pattern on the tensor name */
} kld_selector_kind;

/* The tensor classes a selector may name (the dense blk.N.CLASS.weight). */
#define KLD_POLICY_N_CLASSES 8
extern const char *const kld_policy_classes[KLD_POLICY_N_CLASSES];

typedef struct kld_policy_rule {
    kld_selector_kind kind;
    int64_t blk_lo, blk_hi; /* inclusive; -1 when not restricted */
    char cls[32];
    char *glob;
    char *text;             /* SELECTOR=TYPE as given, for messages */
    bool keep;              /* keep the stored type */
    bool base;              /* the BASE's choice for the tensor (a recipe's per-tensor type) */
    uint32_t type;
} kld_policy_rule;

typedef struct kld_policy {
    char *text;                  /* as given */
    const kld_recipe *recipe;    /* BASE is a recipe, or NULL */
    bool base_keep;              /* BASE is `keep` */
    uint32_t base_type;          /* BASE is a type (recipe == NULL, !base_keep) */
    kld_policy_rule *rules;
    size_t n_rules;
    char *imatrix_path;          /* imatrix=FILE item, or NULL */
} kld_policy;

/* Parses BASE[,SELECTOR=TYPE]…[,imatrix=FILE]. Errors name the offending
 * token and list the valid ones. */
kld_status kld_policy_parse(const char *text, kld_policy **out, kld_error *err);
void kld_policy_free(kld_policy *p);

/* ---- importance matrices ---- */

typedef struct kld_imatrix_entry {
    char *name;
    int32_t ncall;     /* chunks accumulated */
    int64_t n;         /* values (columns × experts) */
    float *sums;       /* as stored: per-column mean of x^2 times ncall */
    float *weights;    /* sums / ncall: what the quantizers receive */
} kld_imatrix_entry;

typedef struct kld_imatrix {
    kld_imatrix_entry *e;
    size_t n;
    int32_t chunks;    /* last_call (0 when the file has no trailer) */
    char *dataset;     /* trailer dataset name, or NULL */
} kld_imatrix;

/* Reads an llama-imatrix file in either form: GGUF (tensors W.in_sum2 and
 * W.counts, keys imatrix.*; weights = in_sum2 / count per matrix, 1 for a
 * matrix without tokens, as llama-quantize loads it) or the legacy binary
 * file (int32 count; per entry int32 name length, name, int32 ncall, int32
 * nval, float32[nval]; optional trailer int32 last_call, int32 length,
 * dataset name). Every size and value is checked. */
kld_status kld_imatrix_read(const char *path, kld_imatrix **out, kld_error *err);
/* The same from a buffer (the fuzzer's entry point); `name` is used in messages. */
kld_status kld_imatrix_parse(const uint8_t *buf, uint64_t size, const char *name,
                             kld_imatrix **out, kld_error *err);
/* Writes the same format atomically. */
kld_status kld_imatrix_write(const kld_imatrix *im, const char *path, kld_error *err);
void kld_imatrix_free(kld_imatrix *im);
const kld_imatrix_entry *kld_imatrix_find(const kld_imatrix *im, const char *name);

/* ---- the plan: one decision per tensor ---- */

typedef struct kld_quant_item {
    const kld_tensor *t;      /* the stored tensor */
    const char *name;         /* GGUF name (t->name for GGUF sources) */
    uint32_t src_type, dst_type;
    bool eligible;            /* a 2-D+ weight llama.cpp would quantize */
    bool convert;             /* dst_type != src_type: new data is computed */
    bool requant;             /* convert from a quantized (not float) type */
    bool fallback;            /* the row-length fallback changed the type */
    bool merged;              /* a low-rank update is merged in (kld_quant_merge, delta_merge.c) */
    uint32_t wanted_type;     /* the type before the fallback */
    uint64_t dst_bytes;
    const float *imatrix;     /* importance weights (ne0 of them) or NULL */
} kld_quant_item;

typedef struct kld_quant_plan {
    kld_quant_item *items;    /* in llama.cpp's order (layer, then name) */
    size_t n;
    uint32_t ftype;           /* general.file_type to write */
    uint64_t src_bytes, dst_bytes, n_params;
    int n_fallback, n_requant, n_merged;
} kld_quant_plan;

/* Decides every tensor's type. `names` gives the GGUF name of each tensor
 * (NULL: the tensors' own names). im may be NULL. */
kld_status kld_quant_plan_make(const kld_policy *p, const kld_hparams *hp,
                               const kld_tensor *tensors, const char *const *names, size_t n,
                               const kld_imatrix *im, kld_quant_plan *out, kld_error *err);
void kld_quant_plan_free(kld_quant_plan *plan);
/* Histogram of the resulting types, bytes and bits per weight, and the
 * fallbacks and requantizations, as text. */
void kld_quant_plan_print(const kld_quant_plan *plan, FILE *f);
/* Bits per weight of the planned tensors. */
double kld_quant_plan_bpw(const kld_quant_plan *plan);

/* A policy's plan for an opened source, nothing converted (what `inspect
 * MODEL@POLICY` prints, and the types `quantize` would write). The view
 * owns what its plan points into; the source must outlive it. */
typedef struct kld_quant_view {
    kld_quant_plan plan;
    void *priv;
} kld_quant_view;
kld_status kld_quant_view_open(const char *policy, const kld_source *src, const kld_hparams *hp,
                               kld_quant_view *v, kld_error *err);
void kld_quant_view_close(kld_quant_view *v);

/* ---- sensitivity-sweep groups ---- */

typedef enum kld_group_kind {
    KLD_GROUPS_LAYERS,        /* blk:i, plus embd and head */
    KLD_GROUPS_CLASSES,       /* attn_q, …, plus embd and head */
    KLD_GROUPS_LAYERS_CLASSES /* blk:i.CLASS, plus embd and head */
} kld_group_kind;

typedef struct kld_quant_group {
    char selector[64];    /* a policy selector naming exactly the group's tensors */
    int n_tensors;
    uint64_t base_bytes;  /* the group's bytes at the base policy */
    uint64_t keep_bytes;  /* … at the stored types */
} kld_quant_group;

/* The groups of a sweep over the eligible tensors of `plan` (the base
 * policy's plan of the model). *out is malloc'd. */
kld_status kld_quant_groups(const kld_quant_plan *plan, kld_group_kind kind,
                            kld_quant_group **out, size_t *n, kld_error *err);
/* The selector of the group plan item i falls in (an eligible item's), as
 * kld_quant_groups names it, written to sel. */
void kld_quant_item_group(const kld_quant_plan *plan, size_t i, kld_group_kind kind, char *sel,
                          size_t cap);
/* The arm of group g: BASE with only g at the base's types (everything else
 * at `upgrade`), or with invert everything at the base but g (g at
 * `upgrade`). upgrade: a type name, or NULL for keep (the stored types). */
kld_status kld_quant_group_policy(const char *base, const kld_quant_group *g, bool invert,
                                  const char *upgrade, char *buf, size_t cap, kld_error *err);

/* A policy that fits a bits-per-weight budget (budget.c): starting from
 * every group at its low-precision bytes, groups are raised to their
 * high-precision bytes greedily by gain per extra byte (largest first,
 * skipping any that no longer fit; gains <= 0 never raised). gain: the KLD
 * the group saves at the higher precision, as a sweep measured it. The
 * result is BASE followed by `,SELECTOR=UP` for each raised group, in group
 * order; *bpw is its bits per weight (other_bytes: the tensors outside every
 * group). Fails when even every group low exceeds the budget. */
typedef struct kld_budget_item {
    const char *selector;
    uint64_t lo_bytes, hi_bytes;
    double gain;
} kld_budget_item;

kld_status kld_quant_budget(const char *base, const char *upgrade, const kld_budget_item *items,
                            size_t n, uint64_t other_bytes, uint64_t n_params, double budget_bpw,
                            char *buf, size_t cap, double *bpw, size_t *n_raised, kld_error *err);

/* ---- quantizing tensors ---- */

/* Converts tensor t to `type` into dst (kld_type_tensor_bytes bytes):
 * dequantize each row to float32, quantize (with importance weights qw when
 * given and the type uses them). Rows are spread over n_threads threads;
 * the bytes do not depend on the thread count. */
kld_status kld_quant_tensor(const kld_tensor *t, uint32_t type, const float *qw, int n_threads,
                            void *dst, kld_error *err);

/* MODEL+ADAPTER merged while quantizing (delta_merge.c): weight `name` becomes
 * W + scale·B·A, W dequantized to float, the update summed in double and
 * rounded to float once (an update of exactly 0 leaves W's float as it
 * is), then converted to the planned type like any other tensor. */
typedef struct kld_quant_delta {
    const char *name;          /* the weight's GGUF name */
    int64_t n_in, n_out, rank;
    const float *a;            /* rank rows of n_in */
    const float *b;            /* n_out rows of rank, in the written file's row order */
    float scale;
} kld_quant_delta;

typedef struct kld_quant_merge {
    const kld_quant_delta *d;
    size_t n;
    const char *adapter;       /* recorded as kldeval.lora.adapter */
    float scale;               /* SCALE as given: kldeval.lora.scale */
    bool has_alpha;
    double alpha;              /* kldeval.lora.alpha when present */
} kld_quant_merge;

/* Marks the plan's items that m merges into (merged; convert, requant when
 * the stored type is quantized; importance weights as for any converted
 * tensor). Every delta must name an item of the plan with its shape;
 * per_item[i] (plan->n of them) is set to item i's delta or NULL. */
kld_status kld_quant_plan_merge(kld_quant_plan *plan, const kld_quant_merge *m,
                                const kld_imatrix *im, const kld_quant_delta **per_item,
                                kld_error *err);
/* The merged weight as float32 rows (malloc'd, t's element count). */
kld_status kld_quant_merged_f32(const kld_tensor *t, const char *name, const kld_quant_delta *d,
                                float **out, kld_error *err);

/* Progress of a long conversion: called after each tensor. */
typedef void (*kld_quant_progress_fn)(void *ctx, size_t done, size_t total, const char *name);

/* Reads a GGUF (or a Hugging Face checkpoint), applies the policy and
 * writes a GGUF to out_path atomically: metadata copied, general.file_type
 * and general.quantization_version set, tensors in llama.cpp's order. */
typedef struct kld_quantize_opts {
    const char *imatrix_path; /* overrides the policy's imatrix=FILE */
    int n_threads;            /* <= 0: all cores */
    kld_quant_progress_fn progress;
    void *progress_ctx;
    FILE *log;                /* per-tensor decisions, or NULL */
    FILE *notes;              /* what is not carried over (tensors left out, no tokenizer);
                                 NULL: to log */
    const kld_quant_merge *merge; /* an adapter to merge (the engine's kld_quantize_merged), or NULL */
} kld_quantize_opts;

kld_status kld_quantize_file(const char *in_path, const char *out_path, const char *policy,
                             const kld_quantize_opts *opts, kld_quant_plan *plan_out,
                             kld_error *err);

#endif
