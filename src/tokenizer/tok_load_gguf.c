/* tok_load_gguf.c — a tokenizer from GGUF metadata (tokenizer.ggml.*), with
 * llama.cpp's defaults and semantics: model "llama" = SPM by score (space
 * prefix, ▁ for spaces, byte fallback), "gpt2" = byte-level BPE whose
 * pre-tokenizer regexes are chosen by tokenizer.ggml.pre, "bert" =
 * WordPiece; token types, special ids and add_bos/add_eos flags. */
#include "tokenizer/tok_internal.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#define GPT2_RE "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define LLAMA3_RE                                                                                  \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"     \
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define QWEN2_RE                                                                                   \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"     \
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define CJK_RE "[\xE4\xB8\x80-\xE9\xBE\xA5\xE0\xA0\x80-\xE4\xB8\x80\xEA\xB0\x80-\xED\x9F\xBF]+"
#define PORO_RE                                                                                    \
    " ?[^(\\s|.,!?\xE2\x80\xA6\xE3\x80\x82\xEF\xBC\x8C\xE3\x80\x81\xE0\xA5\xA4\xDB\x94\xD8\x8C)]+"

/* The regexes of llama.cpp's BPE pre-tokenizer types, applied in order,
 * each splitting every piece of the previous one (matches and the text
 * between them both stay). */
typedef struct pre_type {
    const char *names; /* '|'-separated tokenizer.ggml.pre values */
    const char *regex[6];
    bool ignore_merges, add_bos;
} pre_type;

static const pre_type PRE_TYPES[] = {
    {"default", {"[\\p{P}\\$\\+<=>\\^~\\|]+", GPT2_RE, "\\p{N}+", "[0-9][0-9][0-9]"}, false, false},
    {"llama3|llama-v3|llama-bpe|falcon3|pixtral", {LLAMA3_RE}, true, true},
    {"dbrx|smaug-bpe", {LLAMA3_RE}, false, false},
    {"chatglm-bpe|glm4", {LLAMA3_RE}, false, false},
    /* deepseek-llm's letter class, as UTF-8 escapes: A-Za-z then the
     * ranges of cased letters (Lu/Ll/Lt) µ À-Ö Ø-ö ø-ƺ ... 𞤀-𞥃 */
    {"deepseek-llm",
     {"[\r\n]",
      "\\s?[A-Za-z\xC2\xB5\xC3\x80-\xC3\x96\xC3\x98-\xC3\xB6\xC3\xB8-\xC6\xBA\xC6\xBC-\xC6\xBF"
      "\xC7\x84-\xCA\x93\xCA\x95-\xCA\xAF\xCD\xB0-\xCD\xB3\xCD\xB6\xCD\xB7\xCD\xBB-\xCD\xBD\xCD"
      "\xBF\xCE\x86\xCE\x88-\xCE\x8A\xCE\x8C\xCE\x8E-\xCE\xA1\xCE\xA3-\xCF\xB5\xCF\xB7-\xD2\x81"
      "\xD2\x8A-\xD4\xAF\xD4\xB1-\xD5\x96\xE1\x82\xA0-\xE1\x83\x85\xE1\x8E\xA0-\xE1\x8F\xB5\xE1"
      "\x8F\xB8-\xE1\x8F\xBD\xE1\xB2\x90-\xE1\xB2\xBA\xE1\xB2\xBD-\xE1\xB2\xBF\xE1\xB4\x80-\xE1"
      "\xB4\xAB\xE1\xB5\xAB-\xE1\xB5\xB7\xE1\xB5\xB9-\xE1\xB6\x9A\xE1\xB8\x80-\xE1\xBC\x95\xE1"
      "\xBC\x98-\xE1\xBC\x9D\xE1\xBC\xA0-\xE1\xBD\x85\xE1\xBD\x88-\xE1\xBD\x8D\xE1\xBD\x90-\xE1"
      "\xBD\x97\xE1\xBD\x99\xE1\xBD\x9B\xE1\xBD\x9D\xE1\xBD\x9F-\xE1\xBD\xBD\xE1\xBE\x80-\xE1"
      "\xBE\xB4\xE1\xBE\xB6-\xE1\xBE\xBC\xE1\xBE\xBE\xE1\xBF\x82-\xE1\xBF\x84\xE1\xBF\x86-\xE1"
      "\xBF\x8C\xE1\xBF\x90-\xE1\xBF\x93\xE1\xBF\x96-\xE1\xBF\x9B\xE1\xBF\xA0-\xE1\xBF\xAC\xE1"
      "\xBF\xB2-\xE1\xBF\xB4\xE1\xBF\xB6-\xE1\xBF\xBC\xE2\x84\x82\xE2\x84\x87\xE2\x84\x8A-\xE2"
      "\x84\x93\xE2\x84\x95\xE2\x84\x99-\xE2\x84\x9D\xE2\x84\xA4\xE2\x84\xA6\xE2\x84\xA8\xE2\x84"
      "\xAA-\xE2\x84\xAD\xE2\x84\xAF-\xE2\x84\xB4\xE2\x84\xB9\xE2\x84\xBC-\xE2\x84\xBF\xE2\x85"
      "\x85-\xE2\x85\x89\xE2\x85\x8E\xE2\x86\x83\xE2\x86\x84\xE2\xB0\x80-\xE2\xB1\xBB\xE2\xB1"
      "\xBE-\xE2\xB3\xA4\xE2\xB3\xAB-\xE2\xB3\xAE\xE2\xB3\xB2\xE2\xB3\xB3\xEA\x99\x80-\xEA\x99"
      "\xAD\xEA\x9A\x80-\xEA\x9A\x9B\xEA\x9C\xA2-\xEA\x9D\xAF\xEA\x9D\xB1-\xEA\x9E\x87\xEA\x9E"
      "\x8B-\xEA\x9E\x8E\xEA\xAD\xB0-\xEA\xAE\xBF\xEF\xAC\x80-\xEF\xAC\x86\xEF\xAC\x93-\xEF\xAC"
      "\x97\xEF\xBC\xA1-\xEF\xBC\xBA\xEF\xBD\x81-\xEF\xBD\x9A\xF0\x90\x90\x80-\xF0\x90\x91\x8F"
      "\xF0\x90\x92\xB0-\xF0\x90\x93\x93\xF0\x90\x93\x98-\xF0\x90\x93\xBB\xF0\x90\xB2\x80-\xF0"
      "\x90\xB2\xB2\xF0\x90\xB3\x80-\xF0\x90\xB3\xB2\xF0\x91\xA2\xA0-\xF0\x91\xA3\x9F\xF0\x9E"
      "\xA4\x80-\xF0\x9E\xA5\x83]+",
      "\\s?[!-/:-~\xEF\xBC\x81-\xEF\xBC\x8F\xEF\xBC\x9A-\xEF\xBD\x9E\xE2\x80\x98-\xE2\x80\x9F"
      "\xE3\x80\x80-\xE3\x80\x82]+",
      "\\s+$", CJK_RE, "\\p{N}+"},
     false,
     false},
    {"deepseek-coder", {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", CJK_RE, "\\p{N}"}, false, false},
    {"falcon", {"[\\p{P}\\$\\+<=>\\^~\\|`]+", GPT2_RE, "[0-9][0-9][0-9]"}, false, false},
    {"starcoder|refact|command-r|smollm|codeshell|exaone|minerva-7b",
     {"\\p{N}", GPT2_RE},
     false,
     false},
    {"gpt-2|phi-2|jina-es|jina-de|gigachat|jina-v1-en|jina-v2-es|jina-v2-de|jina-v2-code|"
     "roberta-bpe|mpt|olmo|jais|exaone4",
     {GPT2_RE},
     false,
     false},
    {"qwen2|deepseek-r1-qwen|megrez|stablelm2", {QWEN2_RE}, false, false},
    {"poro-chat|bloom|gpt3-finnish", {PORO_RE}, false, false},
    {"viking", {PORO_RE, "\\p{N}"}, false, false},
    {"tekken",
     {"[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|[^\\r\\n\\p{L}\\p{"
      "N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/"
      "]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     true,
     true},
    {"gpt-4o|llama4",
     {"[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+("
      "?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+["
      "\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}"
      "]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     false,
     false},
};

static bool name_in(const char *names, const char *name, size_t len) {
    const char *p = names;
    for (;;) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        if (n == len && memcmp(p, name, len) == 0) return true;
        if (!bar) return false;
        p = bar + 1;
    }
}

static void read_id(const kld_gguf *g, const char *key, int32_t n_vocab, int32_t *id) {
    int64_t v;
    /* an id outside the vocabulary keeps the default, as llama.cpp does */
    if (kld_gguf_get_int(g, key, &v) && v >= 0 && v < n_vocab) *id = (int32_t)v;
}

static int cmp_len_desc(const void *a, const void *b) {
    const tok_added *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

kld_status tok_llama_specials(kld_tokenizer *t, kld_error *err) {
    size_t n = 0;
    for (int32_t i = 0; i < t->vocab.n; i++) {
        uint8_t ty = t->vocab.type[i];
        if (ty == KLD_TOKEN_CONTROL || ty == KLD_TOKEN_USER_DEFINED || ty == KLD_TOKEN_UNKNOWN) n++;
    }
    t->added = calloc(n ? n : 1, sizeof *t->added);
    if (!t->added) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    for (int32_t i = 0; i < t->vocab.n; i++) {
        uint8_t ty = t->vocab.type[i];
        if (ty != KLD_TOKEN_CONTROL && ty != KLD_TOKEN_USER_DEFINED && ty != KLD_TOKEN_UNKNOWN)
            continue;
        size_t len = 0;
        const char *p = tok_vocab_piece(&t->vocab, i, &len);
        if (!p) continue;
        tok_added *a = &t->added[t->n_added++];
        a->id = i;
        a->content = kld_strndup(p, len);
        a->len = len;
        a->special = ty != KLD_TOKEN_USER_DEFINED;
        if (!a->content) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
        if (a->special) t->n_special++;
    }
    qsort(t->added, t->n_added, sizeof *t->added, cmp_len_desc);
    return KLD_OK;
}

static void set_rstrip(kld_tokenizer *t, const char *text, bool on) {
    for (size_t i = 0; i < t->n_added; i++)
        if (t->added[i].len == strlen(text) &&
            memcmp(t->added[i].content, text, t->added[i].len) == 0)
            t->added[i].rstrip = on;
}

/* llama.cpp's per-model attribute workarounds that change tokenization:
 * Phi-3 strips spaces after its special tokens. */
static void model_quirks(kld_tokenizer *t, const kld_gguf *g) {
    kld_str name;
    if (!kld_gguf_get_str(g, "general.name", &name)) return;
    char low[256];
    size_t n = name.len < sizeof low - 1 ? name.len : sizeof low - 1;
    for (size_t i = 0; i < n; i++) low[i] = (char)tolower((unsigned char)name.ptr[i]);
    low[n] = 0;
    if (strstr(low, "phi-3") || strstr(low, "phi3")) {
        for (size_t i = 0; i < t->n_added; i++) t->added[i].rstrip = true;
        set_rstrip(t, "</s>", true);
        set_rstrip(t, "<unk>", false);
        set_rstrip(t, "<s>", false);
        set_rstrip(t, "<|endoftext|>", false);
    }
}

/* llama.cpp marks some end-of-turn / fill-in-the-middle tokens as control
 * by their text when the GGUF does not name them by id. */
static void autodetect_control(kld_tokenizer *t, const kld_gguf *g) {
    static const struct {
        const char *key;
        const char *texts[10];
    } groups[] = {
        {"tokenizer.ggml.eot_token_id",
         {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>",
          "_<EOT>",
          "<\xEF\xBD\x9C"
          "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>"}},
        {"tokenizer.ggml.eom_token_id", {"<|eom_id|>"}},
        {"tokenizer.ggml.fim_pre_token_id",
         {"<|fim_prefix|>", "<fim-prefix>",
          "<\xEF\xBD\x9C"
          "fim\xE2\x96\x81"
          "begin\xEF\xBD\x9C>",
          "<PRE>", "\xE2\x96\x81<PRE>"}},
        {"tokenizer.ggml.fim_suf_token_id",
         {"<|fim_suffix|>", "<fim-suffix>",
          "<\xEF\xBD\x9C"
          "fim\xE2\x96\x81hole\xEF\xBD\x9C>",
          "<SUF>", "\xE2\x96\x81<SUF>"}},
        {"tokenizer.ggml.fim_mid_token_id",
         {"<|fim_middle|>", "<fim-middle>",
          "<\xEF\xBD\x9C"
          "fim\xE2\x96\x81"
          "end\xEF\xBD\x9C>",
          "<MID>", "\xE2\x96\x81<MID>"}},
        {"tokenizer.ggml.fim_pad_token_id", {"<|fim_pad|>", "<fim-pad>", "<PAD>"}},
        {"tokenizer.ggml.fim_rep_token_id",
         {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>"}},
        {"tokenizer.ggml.fim_sep_token_id", {"<|file_sep|>", "<fim-sep>", "<SEP>"}},
    };
    for (size_t k = 0; k < sizeof groups / sizeof groups[0]; k++) {
        int64_t v;
        if (kld_gguf_get_int(g, groups[k].key, &v)) continue;
        for (size_t j = 0; j < 10 && groups[k].texts[j]; j++) {
            int32_t id = tok_vocab_find(&t->vocab, groups[k].texts[j], strlen(groups[k].texts[j]));
            if (id >= 0) {
                t->vocab.type[id] = KLD_TOKEN_CONTROL;
                break;
            }
        }
    }
}

static kld_status load_merges(kld_tokenizer *t, const kld_gguf *g, const char *name,
                              kld_error *err) {
    const kld_gguf_value *m = kld_gguf_get_arr(g, "tokenizer.ggml.merges");
    if (!m)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: tokenizer.ggml.merges is missing (gpt2 model)",
                        name);
    if (m->v.arr.elem_type != KLD_GGUF_STRING)
        return kld_fail(err, KLD_ERR_FORMAT,
                        "%s: tokenizer.ggml.merges is an array of %s, not strings", name,
                        kld_gguf_vtype_name(m->v.arr.elem_type));
    t->n_merges = m->v.arr.n;
    if (!tok_pairmap_init(&t->merges, (size_t)m->v.arr.n))
        return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", name);
    tok_buf cat = {0};
    kld_status st = KLD_OK;
    for (uint64_t i = 0; i < m->v.arr.n && !st; i++) {
        kld_str s = m->v.arr.strs[i];
        /* split at the first space after the first byte (a merge may start
         * with a space-like piece) */
        const char *sp = s.len > 1 ? memchr(s.ptr + 1, ' ', s.len - 1) : NULL;
        if (!sp) continue; /* llama.cpp keeps it as ("", "") — it never applies */
        size_t la = (size_t)(sp - s.ptr), lb = s.len - la - 1;
        int32_t a = tok_vocab_find(&t->vocab, s.ptr, la);
        int32_t b = tok_vocab_find(&t->vocab, sp + 1, lb);
        cat.n = 0;
        if (!tok_buf_append(&cat, s.ptr, la) || !tok_buf_append(&cat, sp + 1, lb)) {
            st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
            break;
        }
        int32_t ab = tok_vocab_find(&t->vocab, cat.p, cat.n);
        /* a merge whose parts or result are not tokens cannot produce an id */
        if (a < 0 || b < 0 || ab < 0) continue;
        if (!tok_pairmap_put(&t->merges, a, b, (uint32_t)i, ab, false))
            st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    }
    tok_buf_free(&cat);
    return st;
}

static kld_status setup_bpe_pre(kld_tokenizer *t, const char *pre, size_t pre_len, const char *name,
                                kld_error *err) {
    const pre_type *pt = NULL;
    if (pre_len == 0) pt = &PRE_TYPES[0]; /* missing: llama.cpp warns and uses "default" */
    for (size_t i = 0; i < sizeof PRE_TYPES / sizeof PRE_TYPES[0] && !pt; i++)
        if (name_in(PRE_TYPES[i].names, pre, pre_len)) pt = &PRE_TYPES[i];
    if (!pt)
        return kld_fail(err, KLD_ERR_UNSUPPORTED,
                        "%s: unknown pre-tokenizer type '%.*s' (tokenizer.ggml.pre)", name,
                        (int)(pre_len > 64 ? 64 : pre_len), pre);
    size_t nre = 0;
    while (nre < 6 && pt->regex[nre]) nre++;
    t->pres = calloc(nre + 1, sizeof *t->pres);
    if (!t->pres) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < nre; i++) {
        tok_pre *p = &t->pres[t->n_pres++];
        p->kind = PRE_SPLIT;
        p->behavior = BEH_ISOLATED;
        char what[128];
        snprintf(what, sizeof what, "%s: pre-tokenizer '%.*s' regex %zu", name,
                 (int)(pre_len > 64 ? 64 : pre_len), pre, i);
        kld_status st = tok_regex_compile(pt->regex[i], strlen(pt->regex[i]), what, &p->re, err);
        if (st) return st;
    }
    tok_pre *bl = &t->pres[t->n_pres++];
    bl->kind = PRE_BYTELEVEL;
    t->byte_level = true;
    t->ignore_merges = pt->ignore_merges;
    if (pt->add_bos) t->add_bos = true;
    if (name_in("chatglm-bpe|glm4", pre, pre_len)) t->bos = -1;
    return KLD_OK;
}

kld_status kld_tok_open_gguf(const kld_gguf *g, const char *name, kld_tokenizer **out,
                             kld_error *err) {
    *out = NULL;
    kld_str model, pre = {"", 0};
    if (!kld_gguf_get_str(g, "tokenizer.ggml.model", &model))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: no tokenizer (tokenizer.ggml.model is missing)",
                        name);
    bool has_pre = kld_gguf_get_str(g, "tokenizer.ggml.pre", &pre);
    tok_model kind;
    if (kld_str_eq(model, "llama")) kind = MODEL_SPM;
    else if (kld_str_eq(model, "gpt2")) kind = MODEL_BPE;
    else if (kld_str_eq(model, "bert")) kind = MODEL_WPM;
    else
        return kld_fail(err, KLD_ERR_UNSUPPORTED,
                        "%s: tokenizer.ggml.model '%.*s' is not supported (llama, gpt2, bert are)",
                        name, (int)(model.len > 64 ? 64 : model.len), model.ptr);
    const kld_gguf_value *toks = kld_gguf_get_arr(g, "tokenizer.ggml.tokens");
    if (!toks) return kld_fail(err, KLD_ERR_FORMAT, "%s: tokenizer.ggml.tokens is missing", name);
    if (toks->v.arr.elem_type != KLD_GGUF_STRING)
        return kld_fail(err, KLD_ERR_FORMAT,
                        "%s: tokenizer.ggml.tokens is an array of %s, not strings", name,
                        kld_gguf_vtype_name(toks->v.arr.elem_type));
    if (toks->v.arr.n == 0 || toks->v.arr.n > INT32_MAX)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: tokenizer.ggml.tokens has %" PRIu64 " entries",
                        name, toks->v.arr.n);
    int32_t n = (int32_t)toks->v.arr.n;
    const kld_gguf_value *scores = kld_gguf_get_arr(g, "tokenizer.ggml.scores");
    const kld_gguf_value *types = kld_gguf_get_arr(g, "tokenizer.ggml.token_type");
    if (scores && scores->v.arr.n < (uint64_t)n)
        return kld_fail(err, KLD_ERR_FORMAT,
                        "%s: tokenizer.ggml.scores has %" PRIu64 " entries for %d tokens", name,
                        scores->v.arr.n, (int)n);
    if (types && types->v.arr.n < (uint64_t)n)
        return kld_fail(err, KLD_ERR_FORMAT,
                        "%s: tokenizer.ggml.token_type has %" PRIu64 " entries for %d tokens", name,
                        types->v.arr.n, (int)n);

    kld_tokenizer *t = NULL;
    kld_status st = tok_new(name, SRC_GGUF, &t, err);
    if (st) return st;
    t->model = kind;
    t->llama_mode = true;
    st = tok_vocab_init(&t->vocab, n, name, err);
    char empty[32];
    for (int32_t i = 0; i < n && !st; i++) {
        kld_str s = toks->v.arr.strs[i];
        const char *p = s.ptr;
        size_t len = s.len;
        if (len == 0) { /* llama.cpp renames empty tokens */
            len = (size_t)snprintf(empty, sizeof empty, "[EMPTY_%d]", (int)i);
            p = empty;
        }
        double score = 0;
        int64_t ty = KLD_TOKEN_NORMAL;
        if (scores && !kld_gguf_arr_float(scores, (uint64_t)i, &score)) {
            st = kld_fail(err, KLD_ERR_FORMAT, "%s: tokenizer.ggml.scores is not numeric", name);
            break;
        }
        if (types && !kld_gguf_arr_int(types, (uint64_t)i, &ty)) {
            st = kld_fail(err, KLD_ERR_FORMAT,
                          "%s: tokenizer.ggml.token_type is not an integer array", name);
            break;
        }
        if (ty < 0 || ty > KLD_TOKEN_BYTE) ty = KLD_TOKEN_UNDEFINED;
        st = tok_vocab_set(&t->vocab, i, p, len, (float)score, (uint8_t)ty, false, name, err);
    }
    if (st) goto fail;

    if (kind == MODEL_SPM) {
        t->bos = n > 1 ? 1 : -1;
        t->eos = n > 2 ? 2 : -1;
        t->unk = 0;
        t->add_space_prefix = true;
        t->add_bos = true;
        free(t->pre_name);
        t->pre_name = kld_strndup(has_pre ? pre.ptr : "default", has_pre ? pre.len : 7);
    } else if (kind == MODEL_WPM) {
        t->bos = n > 101 ? 101 : -1;
        t->unk = n > 100 ? 100 : -1;
        t->pad = 0;
        t->add_bos = true;
        t->wpm_lowercase = t->wpm_strip_accents = true;
        bool b;
        if (kld_gguf_get_bool(g, "tokenizer.ggml.normalizer.lowercase", &b))
            t->wpm_lowercase = t->wpm_strip_accents = b;
        if (kld_gguf_get_bool(g, "tokenizer.ggml.normalizer.strip_accents", &b))
            t->wpm_strip_accents = b;
        t->pre_name = kld_strndup(has_pre ? pre.ptr : "", has_pre ? pre.len : 0);
    } else {
        t->bos = t->eos = n > 11 ? 11 : -1;
        t->pre_name = kld_strndup(has_pre ? pre.ptr : "", has_pre ? pre.len : 0);
        st = setup_bpe_pre(t, pre.ptr, pre.len, name, err);
        if (!st) st = tok_vocab_finish(&t->vocab, true, t->ignore_merges, NULL, name, err);
        if (!st) st = load_merges(t, g, name, err);
        if (st) goto fail;
    }
    if (kind != MODEL_BPE && (st = tok_vocab_finish(&t->vocab, false, false, NULL, name, err)))
        goto fail;
    bool b;
    if (kld_gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &b)) t->add_space_prefix = b;
    read_id(g, "tokenizer.ggml.bos_token_id", n, &t->bos);
    read_id(g, "tokenizer.ggml.eos_token_id", n, &t->eos);
    read_id(g, "tokenizer.ggml.unknown_token_id", n, &t->unk);
    read_id(g, "tokenizer.ggml.padding_token_id", n, &t->pad);
    int32_t sep = kind == MODEL_WPM && n > 102 ? 102 : -1;
    read_id(g, "tokenizer.ggml.seperator_token_id", n, &sep);
    bool add_sep = kind == MODEL_WPM;
    if (kld_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &b)) t->add_bos = b;
    if (kld_gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &b)) t->add_eos = b;
    if (kld_gguf_get_bool(g, "tokenizer.ggml.add_sep_token", &b)) add_sep = b;
    if (t->add_bos && t->bos < 0) {
        st = kld_fail(err, KLD_ERR_FORMAT,
                      "%s: tokenizer.ggml.add_bos_token is true but there is no BOS id", name);
        goto fail;
    }
    if (t->add_eos && t->eos < 0) {
        st = kld_fail(err, KLD_ERR_FORMAT,
                      "%s: tokenizer.ggml.add_eos_token is true but there is no EOS id", name);
        goto fail;
    }
    if (kind == MODEL_WPM && t->unk < 0) {
        st = kld_fail(err, KLD_ERR_FORMAT, "%s: WordPiece vocabulary without an unknown token",
                      name);
        goto fail;
    }
    autodetect_control(t, g);
    if ((st = tok_llama_specials(t, err))) goto fail;
    model_quirks(t, g);
    t->prefix_ids = malloc(2 * sizeof *t->prefix_ids);
    t->suffix_ids = malloc(2 * sizeof *t->suffix_ids);
    if (!t->prefix_ids || !t->suffix_ids) {
        st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if (t->add_bos) t->prefix_ids[t->n_prefix++] = t->bos;
    if (t->add_eos) t->suffix_ids[t->n_suffix++] = t->eos;
    if (add_sep && sep >= 0) t->suffix_ids[t->n_suffix++] = sep;
    *out = t;
    return KLD_OK;
fail:
    kld_tok_free(t);
    return st;
}
