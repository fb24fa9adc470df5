/* convert_hf.c — the Hugging Face half of `kldeval quantize`: a safetensors
 * checkpoint with config.json becomes a GGUF tensor table and metadata as
 * llama.cpp's convert_hf_to_gguf.py writes them for llama, qwen2 and qwen3:
 * GGUF tensor names, q/k rows permuted back from rotate-half order where
 * the GGUF architecture rotates interleaved pairs (llama), the
 * hyper-parameter keys, and the tokenizer (tokens, types, BOS/EOS; merges
 * for byte-level BPE, whose merges come from tokenizer.json). Stacked
 * experts: convert_hf_moe.c; LFM2's convolutions: convert_hf_lfm2.c. */
#include "io/gguf_writer.h"
#include "model/rope.h"
#include "model/weights.h"
#include "quant/quant_internal.h"
#include "tokenizer/tokenizer.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct table {
    kld_hf_tensors *out;
    size_t cap;
    bool oom;
} table;

static void add(table *tb, const kld_tensor *t, const char *name) {
    if (!t || tb->oom) return;
    kld_hf_tensors *o = tb->out;
    if (o->n == tb->cap) {
        size_t cap = tb->cap ? 2 * tb->cap : 64;
        kld_tensor *nt = realloc(o->tensors, cap * sizeof *nt);
        if (nt) o->tensors = nt;
        char **nn = realloc(o->names, cap * sizeof *nn);
        if (nn) o->names = nn;
        void **no = realloc(o->owned, cap * sizeof *no);
        if (no) o->owned = no;
        if (!nt || !nn || !no) {
            tb->oom = true;
            return;
        }
        tb->cap = cap;
    }
    o->tensors[o->n] = *t;
    o->names[o->n] = kld_strdup(name);
    o->owned[o->n] = NULL;
    if (!o->names[o->n]) tb->oom = true;
    else o->n++;
}

/* A checkpoint's experts are separate tensors: listed under the per-expert
 * GGUF names (blk.N.ffn_gate.E.weight …), with the router and shared expert. */
static void list_moe(int64_t il, const kld_moe_weights *X, int64_t n_expert, table *tb) {
    char name[96];
    const struct {
        const kld_tensor *t;
        kld_tensor_id id;
        const char *kind;
    } t[] = {{X->gate_inp, KLD_T_FFN_GATE_INP, "weight"}, {X->exp_probs_b, KLD_T_FFN_EXP_PROBS_B, "bias"},
             {X->gate_inp_shexp, KLD_T_FFN_GATE_INP_SHEXP, "weight"},
             {X->gate_shexp, KLD_T_FFN_GATE_SHEXP, "weight"}, {X->up_shexp, KLD_T_FFN_UP_SHEXP, "weight"},
             {X->down_shexp, KLD_T_FFN_DOWN_SHEXP, "weight"}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        kld_tn(name, sizeof name, t[i].id, il, 0, t[i].kind);
        add(tb, t[i].t, name);
    }
    const kld_tensor *const *per[3] = {X->gate, X->up, X->down};
    static const kld_tensor_id per_id[3] = {KLD_T_FFN_GATE_EXP, KLD_T_FFN_UP_EXP, KLD_T_FFN_DOWN_EXP};
    for (int k = 0; !X->gate_exps && k < 3; k++) /* merged (gpt-oss's, rebuilt): convert_hf_gptoss.c */
        for (int64_t e = 0; per[k] && e < n_expert; e++) {
            kld_tn(name, sizeof name, per_id[k], il, e, "weight");
            add(tb, per[k][e], name);
        }
}

/* The weight table in GGUF order and names (llama.cpp's tensor map). */
static void list(const kld_weights *w, const kld_hparams *hp, table *tb) {
    char name[96];
    add(tb, w->token_embd, kld_tn(name, sizeof name, KLD_T_TOKEN_EMBD, 0, 0, "weight"));
    for (int64_t il = 0; il < w->n_layer; il++) {
        const kld_layer_weights *L = &w->layers[il];
        const struct {
            const kld_tensor *t;
            kld_tensor_id id;
            const char *kind;
        } t[] = {{L->attn_norm, KLD_T_ATTN_NORM, "weight"},     {L->attn_q, KLD_T_ATTN_Q, "weight"},
                 {L->bq, KLD_T_ATTN_Q, "bias"},                 {L->attn_qkv, KLD_T_ATTN_QKV, "weight"},
                 {L->bqkv, KLD_T_ATTN_QKV, "bias"},             {L->attn_k, KLD_T_ATTN_K, "weight"},
                 {L->bk, KLD_T_ATTN_K, "bias"},                 {L->attn_v, KLD_T_ATTN_V, "weight"},
                 {L->bv, KLD_T_ATTN_V, "bias"},                 {L->attn_q_norm, KLD_T_ATTN_Q_NORM, "weight"},
                 {L->attn_k_norm, KLD_T_ATTN_K_NORM, "weight"},
                 {L->attn_q_a, KLD_T_ATTN_Q_A, "weight"},       {L->attn_q_a_norm, KLD_T_ATTN_Q_A_NORM, "weight"},
                 {L->attn_q_b, KLD_T_ATTN_Q_B, "weight"},       {L->attn_kv_a_mqa, KLD_T_ATTN_KV_A_MQA, "weight"},
                 {L->attn_kv_a_norm, KLD_T_ATTN_KV_A_NORM, "weight"}, {L->attn_kv_b, KLD_T_ATTN_KV_B, "weight"},
                 {L->attn_output, KLD_T_ATTN_OUT, "weight"},
                 {L->bo, KLD_T_ATTN_OUT, "bias"},            {L->attn_post_norm, KLD_T_ATTN_POST_NORM, "weight"},
                 {L->ffn_norm, hp->hy.ffn_norm, "weight"},       {L->ffn_gate, KLD_T_FFN_GATE, "weight"},
                 {L->b_gate, KLD_T_FFN_GATE, "bias"},           {L->ffn_up, KLD_T_FFN_UP, "weight"},
                 {L->b_up, KLD_T_FFN_UP, "bias"},               {L->ffn_down, KLD_T_FFN_DOWN, "weight"},
                 {L->b_down, KLD_T_FFN_DOWN, "bias"},           {L->ffn_post_norm, KLD_T_FFN_POST_NORM, "weight"},
                 {L->shortconv_conv, KLD_T_SHORTCONV_CONV, "weight"},
                 {L->shortconv_in_proj, KLD_T_SHORTCONV_INPROJ, "weight"},
                 {L->shortconv_out_proj, KLD_T_SHORTCONV_OUTPROJ, "weight"}};
        for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
            kld_tn(name, sizeof name, t[i].id, il, 0, t[i].kind);
            add(tb, t[i].t, name);
        }
        list_moe(il, &L->moe, w->n_expert, tb);
    }
    /* LFM2's final norm is token_embd_norm */
    add(tb, w->output_norm, kld_tn(name, sizeof name, hp->hy.output_norm, 0, 0, "weight"));
    if (!hp->tied_output) add(tb, w->output, kld_tn(name, sizeof name, KLD_T_OUTPUT, 0, 0, "weight"));
}

/* Rotate-half rows → interleaved pairs (llama.cpp's permute): GGUF row
 * h·hd + 2i + j is HF row h·hd + j·hd/2 + i. */
static kld_status permute_rows(kld_hf_tensors *o, size_t k, int64_t n_head, kld_error *err) {
    kld_tensor *t = &o->tensors[k];
    const int64_t rows = t->ne[1], hd = n_head > 0 ? rows / n_head : 0;
    if (hd <= 0 || hd % 2 || hd * n_head != rows)
        return kld_fail(err, KLD_ERR_FORMAT, "tensor '%s': %" PRId64 " rows are not %" PRId64
                        " heads of an even size", o->names[k], rows, n_head);
    const uint64_t rb = t->nbytes / (uint64_t)rows;
    uint8_t *dst = malloc(t->nbytes ? t->nbytes : 1);
    if (!dst) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    const uint8_t *src = t->data;
    for (int64_t h = 0; h < n_head; h++)
        for (int64_t i = 0; i < hd / 2; i++)
            for (int64_t j = 0; j < 2; j++)
                memcpy(dst + (uint64_t)(h * hd + 2 * i + j) * rb,
                       src + (uint64_t)(h * hd + j * hd / 2 + i) * rb, (size_t)rb);
    o->owned[k] = dst;
    t->data = dst;
    return KLD_OK;
}

/* tokenizer.json's merges as "a b" strings, in rank order (both spellings
 * of the file: "a b" or ["a", "b"]); *n = 0 when it has none. */
static kld_status load_merges(const char *path, char ***out, size_t *n_out, kld_error *err) {
    *out = NULL;
    *n_out = 0;
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root) return kld_fail(err, KLD_ERR_FORMAT, "%s: %s (line %d)", path, je.text, je.line);
    json_t *merges = json_object_get(json_object_get(root, "model"), "merges");
    size_t n = json_array_size(merges);
    char **strs = calloc(n ? n : 1, sizeof *strs);
    kld_status s = strs ? KLD_OK : kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    for (size_t i = 0; !s && i < n; i++) {
        json_t *m = json_array_get(merges, i);
        if (json_is_string(m)) {
            strs[i] = kld_strdup(json_string_value(m));
        } else if (json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
                   json_is_string(json_array_get(m, 1))) {
            const char *a = json_string_value(json_array_get(m, 0));
            const char *b = json_string_value(json_array_get(m, 1));
            size_t len = strlen(a) + strlen(b) + 2;
            if ((strs[i] = malloc(len))) snprintf(strs[i], len, "%s %s", a, b);
        } else {
            s = kld_fail(err, KLD_ERR_FORMAT, "%s: model.merges[%zu] is not \"a b\" or [a, b]", path, i);
            break;
        }
        if (!strs[i]) s = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    }
    json_decref(root);
    if (s) {
        for (size_t i = 0; strs && i < n; i++) free(strs[i]);
        free(strs);
        return s;
    }
    *out = strs;
    *n_out = n;
    return KLD_OK;
}

/* Whether the tokenizer turns "a" into pieces starting with "▁" (a
 * SentencePiece dummy prefix, or tokenizer.json's Prepend/Metaspace). */
static bool spm_prepends_space(const kld_tokenizer *tok) {
    kld_tok_ids ids = {0};
    kld_error e = {0};
    bool prepends = true;
    if (kld_tok_encode(tok, "a", 1, 0, &ids, &e) == KLD_OK && ids.n > 0) {
        size_t len = 0;
        const char *p = kld_tok_piece(tok, ids.ids[0], &len);
        prepends = p && len >= 3 && !memcmp(p, "\xe2\x96\x81", 3);
    }
    kld_tok_ids_free(&ids);
    return prepends;
}

/* Tokens, scores, types and special ids as llama.cpp's converter writes
 * them: "llama" (scores -1000, as its LlamaHfVocab) for SentencePiece-style
 * vocabularies, "gpt2" with merges for byte-level BPE. */
static kld_status put_tokenizer(const kld_source *src, kld_gguf_writer *w, kld_error *err) {
    kld_tokenizer *tok = NULL;
    kld_status s = kld_tok_open_source(src, &tok, err);
    if (s) return s;
    kld_tok_summary sum;
    kld_tok_summarize(tok, &sum);
    const int32_t n = kld_tok_n_vocab(tok);
    char **pieces = calloc((size_t)n, sizeof *pieces);
    float *scores = malloc((size_t)n * sizeof *scores);
    int32_t *types = malloc((size_t)n * sizeof *types);
    if (!pieces || !scores || !types) s = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    bool byte_level = false;
    for (int32_t i = 0; !s && i < n; i++) {
        size_t len;
        const char *p = kld_tok_piece(tok, i, &len);
        char pad[32];
        if (!p) {
            snprintf(pad, sizeof pad, "[PAD%d]", i);
            p = pad;
            len = strlen(pad);
        }
        if (!(pieces[i] = kld_strndup(p, len))) s = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
        scores[i] = -1000.0f;
        types[i] = kld_tok_type(tok, i);
        if (i == sum.unk_id) types[i] = KLD_TOKEN_UNKNOWN;
    }
    /* byte-level BPE (GPT-2's byte map) becomes "gpt2"; SentencePiece-style
     * vocabularies (SPM, or BPE over "▁" pieces with byte fallback) "llama" */
    byte_level = sum.pre && strstr(sum.pre, "ByteLevel") != NULL;
    const bool bpe = !strcmp(sum.kind, "bpe") && byte_level;
    char **merges = NULL;
    size_t n_merges = 0;
    if (!s && !strcmp(sum.kind, "bpe")) s = load_merges(src->hf_tokenizer_path, &merges, &n_merges, err);
    /* A SentencePiece model exported as BPE keeps its merge order in the
     * ranks: the piece merge r produces scores -r, so llama.cpp's SPM
     * (highest score first) merges in the same order. Pieces no merge
     * produces score 0. */
    for (int32_t i = 0; !s && !bpe && merges && i < n; i++) scores[i] = 0.0f;
    for (size_t r = 0; !s && !bpe && r < n_merges; r++) {
        const char *sp = strchr(merges[r], ' ');
        if (!sp) continue;
        char buf[512];
        size_t la = (size_t)(sp - merges[r]), lb = strlen(sp + 1);
        if (la + lb >= sizeof buf) continue;
        memcpy(buf, merges[r], la);
        memcpy(buf + la, sp + 1, lb);
        int32_t id = kld_tok_piece_id(tok, buf, la + lb);
        if (id >= 0 && scores[id] == 0.0f) scores[id] = -(float)r - 1.0f;
    }
    /* config.json names BOS/EOS when the tokenizer's templates do not */
    json_int_t cfg;
    if (sum.bos_id < 0 && json_is_integer(json_object_get(src->hf_config, "bos_token_id")) &&
        (cfg = json_integer_value(json_object_get(src->hf_config, "bos_token_id"))) >= 0 && cfg < n)
        sum.bos_id = (int32_t)cfg;
    if (sum.eos_id < 0 && json_is_integer(json_object_get(src->hf_config, "eos_token_id")) &&
        (cfg = json_integer_value(json_object_get(src->hf_config, "eos_token_id"))) >= 0 && cfg < n)
        sum.eos_id = (int32_t)cfg;
    if (!s) {
        bool ok = !kld_gguf_writer_set_str(w, "tokenizer.ggml.model", bpe ? "gpt2" : "llama") &&
                  !kld_gguf_writer_set_str(w, "tokenizer.ggml.pre", "default") &&
                  !kld_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)pieces,
                                               (uint64_t)n) &&
                  (bpe || !kld_gguf_writer_set_arr_f32(w, "tokenizer.ggml.scores", scores, (uint64_t)n)) &&
                  !kld_gguf_writer_set_arr_i32(w, "tokenizer.ggml.token_type", types, (uint64_t)n);
        if (!ok) s = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    }
    if (!s && bpe && kld_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges",
                                                 (const char *const *)merges, n_merges))
        s = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    for (size_t i = 0; merges && i < n_merges; i++) free(merges[i]);
    free(merges);
    if (!s) {
        bool ok = true;
        if (sum.bos_id >= 0) ok = ok && !kld_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)sum.bos_id);
        if (sum.eos_id >= 0) ok = ok && !kld_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)sum.eos_id);
        if (sum.unk_id >= 0) ok = ok && !kld_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", (uint32_t)sum.unk_id);
        if (sum.pad_id >= 0) ok = ok && !kld_gguf_writer_set_u32(w, "tokenizer.ggml.padding_token_id", (uint32_t)sum.pad_id);
        ok = ok && !kld_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", sum.add_bos) &&
             !kld_gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", sum.add_eos);
        /* llama.cpp's SPM prepends "▁" unless told not to (Gemma's converter
         * says add_space_prefix false): follow what tokenizer.json does */
        if (!bpe && !spm_prepends_space(tok))
            ok = ok && !kld_gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", false);
        if (!ok) s = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    }
    for (int32_t i = 0; pieces && i < n; i++) free(pieces[i]);
    free(pieces);
    free(scores);
    free(types);
    kld_tok_free(tok);
    return s;
}

/* Llama 3's and Phi-3 LongRoPE's frequency divisors become tensors, as
 * llama.cpp's converter writes them (rope_freqs; rope_factors_long/short),
 * from the same computation the HF reader uses (model/rope.c). */
static kld_status add_rope_factors(const kld_source *src, const kld_hparams *hp, table *tb,
                                   kld_error *err) {
    const bool llama3 = !strcmp(hp->rope_scaling, "llama3"), longrope = !strcmp(hp->rope_scaling, "longrope");
    if (!llama3 && !longrope) return KLD_OK;
    const kld_weights none = {0}; /* a checkpoint has no factor tensors of its own */
    const int64_t half = hp->n_rot / 2;
    static const char *const names[] = {"rope_freqs.weight", "rope_factors_long.weight",
                                        "rope_factors_short.weight"};
    for (int k = llama3 ? 0 : 1; k < (llama3 ? 1 : 3); k++) {
        float *f = malloc((size_t)(half > 0 ? half : 1) * sizeof *f);
        if (!f) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
        /* past the original context for the long factors, within it otherwise */
        const int64_t n_ctx = k == 1 ? hp->rope_orig_ctx + 1 : hp->rope_orig_ctx;
        kld_status s = kld_rope_factors(src, hp, &none, n_ctx, f, err);
        kld_tensor t = {.type = KLD_TYPE_F32, .n_dims = 1, .ne = {half, 1, 1, 1}, .data = f,
                        .nbytes = (uint64_t)half * sizeof *f};
        size_t before = tb->out->n;
        if (!s) add(tb, &t, names[k]);
        if (s || tb->out->n == before) {
            free(f);
            return s ? s : kld_fail(err, KLD_ERR_NOMEM, "out of memory");
        }
        tb->out->owned[before] = f;
    }
    return KLD_OK;
}

kld_status kld_hf_list(const kld_source *src, const kld_hparams *hp, kld_hf_tensors *out,
                       kld_error *err) {
    memset(out, 0, sizeof *out);
    kld_weights wt;
    kld_status s = kld_weights_bind(src, hp, &wt, err);
    if (s) return s;
    table tb = {out, 0, false};
    list(&wt, hp, &tb);
    if (!tb.oom && hp->hy.recurrent_kind == KLD_LAYER_DELTANET) s = kld_hf_list_qwen3next(&wt, hp, out, err);
    if (!tb.oom && !s) s = kld_hf_list_gptoss(&wt, hp, out, err);
    if (!tb.oom && !s) s = kld_hf_list_gemma4(&wt, hp, out, err);
    kld_weights_free(&wt);
    if (s) {
        kld_hf_tensors_free(out);
        return s;
    }
    if (tb.oom) {
        kld_hf_tensors_free(out);
        return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    }
    return KLD_OK;
}

/* A checkpoint tensor that is no weight of the architecture is not written;
 * llama.cpp's converter would stop at it ("Can not map tensor"), so say
 * which, rather than drop it unseen. Not noted: what the converter itself
 * skips (rotary_emb.inv_freq, Qwen3-Next's mtp.*) and the DeltaNet tensors
 * the table holds as derived copies (linear_attn.*). */
static void note_unconverted(const kld_source *src, const kld_hparams *hp, const kld_hf_tensors *t,
                             FILE *log) {
    size_t n_left = 0;
    for (size_t i = 0; log && i < src->n_tensors; i++) {
        const kld_tensor *x = &src->tensors[i];
        bool used = strstr(x->name, "rotary_emb.inv_freq") || !strncmp(x->name, "mtp.", 4) ||
                    (hp->sw.moe_biases && strstr(x->name, ".mlp.experts.")) || /* gpt-oss's, rebuilt */
                    (hp->hy.recurrent_kind == KLD_LAYER_DELTANET && strstr(x->name, ".linear_attn."));
        for (size_t k = 0; !used && k < t->n; k++) used = t->tensors[k].name == x->name || t->tensors[k].data == x->data;
        if (used) continue;
        if (n_left++ < 8) fprintf(log, "note: %s: tensor '%s' is not a weight of %s: not written\n", src->path,
                                  x->name, hp->arch);
    }
    if (n_left > 8) fprintf(log, "note: %s: %zu tensors in all are not written\n", src->path, n_left);
}

kld_status kld_hf_convert(const kld_source *src, const kld_hparams *hp, kld_gguf_writer *w,
                          kld_hf_tensors *out, FILE *log, kld_error *err) {
    memset(out, 0, sizeof *out);
    kld_status s = kld_hf_check_convertible(src, hp, err);
    if (s) return s;
    if ((s = kld_hf_list(src, hp, out, err))) return s;
    note_unconverted(src, hp, out, log);
    s = kld_hf_moe_stack(out, hp, err);
    if (!s) s = kld_hf_gemma4_fuse_gate_up(out, hp, err);
    kld_hf_shortconv_squeeze(out);
    table tb = {out, out->n, false};
    if (!s) s = add_rope_factors(src, hp, &tb, err);
    const bool permute = hp->rope_type != hp->sw.rope_type; /* HF rotate-half, GGUF interleaved */
    for (size_t k = 0; !s && !tb.oom && permute && k < out->n; k++) {
        const char *nm = out->names[k];
        size_t len = strlen(nm);
        if (len > 13 && !strcmp(nm + len - 13, "attn_q.weight")) s = permute_rows(out, k, hp->n_head, err);
        else if (len > 13 && !strcmp(nm + len - 13, "attn_k.weight")) s = permute_rows(out, k, hp->n_head_kv, err);
        else if (strstr(nm, "attn_q.bias") || strstr(nm, "attn_k.bias"))
            s = kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: permuting q/k biases is not written yet", src->path);
    }
    /* vectors (norms, biases) and routers are float32 in GGUF, as llama.cpp's
     * converter writes them; Gemma's norms (every name ending in norm.weight) become
     * 1 + w, added in float32 as transformers' Gemma RMSNorm does */
    const float norm_offset = (float)hp->norm_weight_offset;
    for (size_t k = 0; !s && !tb.oom && k < out->n; k++) {
        kld_tensor *t = &out->tensors[k];
        const size_t len = strlen(out->names[k]);
        /* not Qwen3-Next's gated ssm_norm (the converter skips linear_attn.norm) */
        const bool shift = norm_offset != 0 && len >= 11 && !strcmp(out->names[k] + len - 11, "norm.weight") &&
                           !strstr(out->names[k], "ssm_norm");
        if ((t->ne[1] > 1 && !kld_hf_keeps_f32(out->names[k])) || (t->type == KLD_TYPE_F32 && !shift))
            continue;
        const kld_type_info *ti = kld_type_info_get(t->type);
        int64_t n = kld_tensor_nelements(t);
        float *f = malloc((size_t)n * sizeof *f);
        if (!f || !ti || !ti->to_float_ref) {
            free(f);
            s = kld_fail(err, f ? KLD_ERR_UNSUPPORTED : KLD_ERR_NOMEM, "tensor '%s': cannot widen "
                         "to float32", out->names[k]);
            break;
        }
        kld_type_kernels_of(ti)->to_float(t->data, f, n);
        for (int64_t i = 0; shift && i < n; i++) f[i] += norm_offset;
        free(out->owned[k]);
        out->owned[k] = f;
        t->data = f;
        t->type = KLD_TYPE_F32;
        t->nbytes = (uint64_t)n * sizeof *f;
    }
    if (!s && tb.oom) s = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    if (!s) s = kld_hf_put_hparams(src, hp, w, err);
    if (!s && src->hf_tokenizer_path) s = put_tokenizer(src, w, err);
    else if (!s && log) fprintf(log, "note: %s has no tokenizer.json; the GGUF gets no tokenizer\n", src->path);
    if (s) kld_hf_tensors_free(out);
    return s;
}

void kld_hf_tensors_free(kld_hf_tensors *t) {
    for (size_t i = 0; i < t->n; i++) {
        free(t->names[i]);
        free(t->owned[i]);
    }
    free(t->tensors);
    free(t->names);
    free(t->owned);
    memset(t, 0, sizeof *t);
}
