/* tok_internal.h — the tokenizer's internal representation, shared by its
 * loaders (GGUF, tokenizer.json, llama2.c) and its encode/decode stages.
 * Every source is turned into the same data: a vocabulary, an optional BPE
 * merge table, lists of normalizer / pre-tokenizer / decoder steps, added
 * tokens, and the ids a post-processor puts around a text. */
#ifndef KLD_TOK_INTERNAL_H
#define KLD_TOK_INTERNAL_H

#include "common/common.h"
#include "io/gguf.h"
#include "io/source.h"
#include "tokenizer/tok_hash.h"
#include "tokenizer/tokenizer.h"

#include <pthread.h>

/* ---- byte buffers and spans ---- */

typedef struct tok_buf {
    char *p;
    size_t n, cap;
} tok_buf;

bool tok_buf_reserve(tok_buf *b, size_t extra);
bool tok_buf_append(tok_buf *b, const void *p, size_t n);
void tok_buf_free(tok_buf *b);

typedef struct tok_span {
    size_t start, end;
} tok_span;

typedef struct tok_spans {
    tok_span *v;
    size_t n, cap;
} tok_spans;

bool tok_spans_push(tok_spans *s, size_t start, size_t end);

bool tok_ids_push(kld_tok_ids *ids, int32_t id);
bool tok_ids_append(kld_tok_ids *ids, const int32_t *v, size_t n);

/* ---- Unicode (tok_unicode.c) ---- */

/* Decodes one code point of valid UTF-8 at s (n > 0 bytes left); *len gets
 * its byte length. */
uint32_t tok_utf8_decode(const char *s, size_t n, size_t *len);
size_t tok_utf8_encode(uint32_t cp, char out[4]);
/* Byte length of the UTF-8 sequence starting with byte c (1 for stray
 * continuation bytes, like llama.cpp's unicode_len_utf8). */
static inline size_t tok_utf8_len(unsigned char c) {
    static const unsigned char lens[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lens[c >> 4];
}

/* GPT-2 byte-level alphabet: byte -> code point, and code point -> byte
 * (-1 when the code point is not in the alphabet). */
uint32_t tok_byte_to_cp(uint8_t b);
int tok_cp_to_byte(uint32_t cp);

bool tok_is_whitespace(uint32_t cp); /* Unicode White_Space (Rust char::is_whitespace) */
bool tok_is_word_char(uint32_t cp);  /* letters, marks, numbers, connector punctuation */

typedef enum tok_nf { TOK_NFC, TOK_NFD, TOK_NFKC, TOK_NFKD } tok_nf;
/* Normal form of s[0..n) appended to out (utf8proc). */
kld_status tok_normalize_form(tok_nf form, const char *s, size_t n, tok_buf *out, kld_error *err);
/* Unicode lowercase (full mapping of U+0130; simple mapping otherwise). */
bool tok_lowercase(const char *s, size_t n, tok_buf *out);
/* Drops nonspacing marks (Mn) — BERT's strip_accents after NFD. */
bool tok_strip_marks(const char *s, size_t n, tok_buf *out);

/* ---- regular expressions (tok_regex.c, PCRE2 in UTF + UCP mode, JIT) ---- */

typedef struct tok_regex tok_regex;
/* Compiles an Oniguruma/HF-style pattern. `what` names it in messages. */
kld_status tok_regex_compile(const char *pattern, size_t len, const char *what, tok_regex **out,
                             kld_error *err);
void tok_regex_free(tok_regex *re);
const char *tok_regex_source(const tok_regex *re);

/* Per-thread matching state. */
typedef struct tok_matcher tok_matcher;
tok_matcher *tok_matcher_create(void);
void tok_matcher_free(tok_matcher *m);
/* All non-overlapping matches of re in s[0..n), appended to out.
 * Returns false on a matching failure (resource limit) with err filled. */
bool tok_regex_find_all(const tok_regex *re, tok_matcher *m, const char *s, size_t n,
                        tok_spans *out, kld_error *err);

/* ---- vocabulary (tok_vocab.c) ---- */

typedef struct tok_vocab {
    int32_t n;           /* ids are 0..n-1 */
    uint32_t *off, *len; /* piece of id i in arena; off = UINT32_MAX: unassigned */
    char *arena;
    size_t arena_len, arena_cap;
    float *score;
    uint8_t *type;              /* kld_token_type */
    tok_strmap map;             /* piece -> id */
    int32_t byte_fallback[256]; /* id of "<0xNN>", or -1 */
    int32_t byte_char[256];     /* byte-level vocabularies: id of the byte's mapped char */
    tok_strmap raw_map;         /* byte-level: decoded bytes -> id (ignore_merges lookups) */
    bool has_raw_map;
    uint32_t max_len; /* longest piece in bytes */
} tok_vocab;

kld_status tok_vocab_init(tok_vocab *v, int32_t n, const char *name, kld_error *err);
void tok_vocab_free(tok_vocab *v);
/* Assigns id's piece. A piece spelled like an existing one is an error
 * unless allow_dup (then the map keeps the first id). */
kld_status tok_vocab_set(tok_vocab *v, int32_t id, const char *piece, size_t len, float score,
                         uint8_t type, bool allow_dup, const char *name, kld_error *err);
/* Fills byte_fallback and, for byte-level vocabularies, byte_char and
 * (when raw_map: for ignore_merges) raw_map, leaving out of raw_map the
 * ids with exclude[id] != 0 (exclude may be NULL). */
kld_status tok_vocab_finish(tok_vocab *v, bool byte_level, bool raw_map, const uint8_t *exclude,
                            const char *name, kld_error *err);
static inline int32_t tok_vocab_find(const tok_vocab *v, const char *s, size_t n) {
    return tok_strmap_get(&v->map, s, n);
}
static inline const char *tok_vocab_piece(const tok_vocab *v, int32_t id, size_t *len) {
    if (id < 0 || id >= v->n || v->off[id] == UINT32_MAX) return NULL;
    *len = v->len[id];
    return v->arena + v->off[id];
}

/* ---- pipeline steps ---- */

typedef enum tok_norm_kind {
    NORM_NFC,
    NORM_NFD,
    NORM_NFKC,
    NORM_NFKD,
    NORM_LOWERCASE,
    NORM_STRIP,
    NORM_STRIP_ACCENTS,
    NORM_PREPEND,
    NORM_REPLACE
} tok_norm_kind;

typedef struct tok_norm {
    tok_norm_kind kind;
    bool left, right; /* Strip */
    char *str;        /* Prepend text / Replace literal pattern */
    size_t str_len;
    tok_regex *re; /* Replace regex pattern */
    char *content; /* Replace content */
    size_t content_len;
} tok_norm;

typedef enum tok_behavior {
    BEH_REMOVED,
    BEH_ISOLATED,
    BEH_MERGED_PREV,
    BEH_MERGED_NEXT,
    BEH_CONTIGUOUS
} tok_behavior;

typedef enum tok_pre_kind { PRE_SPLIT, PRE_BYTELEVEL, PRE_METASPACE } tok_pre_kind;

typedef enum tok_prepend { PREPEND_ALWAYS, PREPEND_FIRST, PREPEND_NEVER } tok_prepend;

typedef struct tok_pre {
    tok_pre_kind kind;
    tok_regex *re; /* Split pattern (regex) or ByteLevel's regex */
    char *literal; /* Split pattern (string) */
    size_t literal_len;
    tok_behavior behavior;
    bool invert;
    bool add_prefix_space; /* ByteLevel */
    bool use_regex;        /* ByteLevel */
    char repl[4];          /* Metaspace replacement (UTF-8) */
    size_t repl_len;
    tok_prepend prepend; /* Metaspace */
    bool split;          /* Metaspace */
} tok_pre;

typedef enum tok_dec_kind {
    DEC_BYTELEVEL,
    DEC_REPLACE,
    DEC_BYTEFALLBACK,
    DEC_FUSE,
    DEC_STRIP,
    DEC_METASPACE
} tok_dec_kind;

typedef struct tok_dec {
    tok_dec_kind kind;
    char *pat; /* Replace: literal pattern */
    size_t pat_len;
    tok_regex *re; /* Replace: regex pattern */
    char *content; /* Replace content / Strip content (one char) */
    size_t content_len;
    uint32_t cp;        /* Strip content / Metaspace replacement code point */
    size_t start, stop; /* Strip */
    bool prepend;       /* Metaspace: prepend_scheme != never */
} tok_dec;

typedef struct tok_added {
    int32_t id;
    char *content;
    size_t len;
    char *ncontent; /* normalized content (normalized tokens) */
    size_t nlen;
    bool special, lstrip, rstrip, single_word, normalized;
} tok_added;

/* Added tokens by first byte, longest first: order[first[b] .. first[b+1]). */
typedef struct tok_added_index {
    int32_t first[257];
    int32_t *order;
    size_t n;
} tok_added_index;

typedef enum tok_model { MODEL_BPE, MODEL_SPM, MODEL_WPM } tok_model;
typedef enum tok_source_kind { SRC_GGUF, SRC_JSON, SRC_LLAMA2C } tok_source_kind;

/* One pre-token: bytes in a buffer plus Metaspace's "starts the input". */
typedef struct tok_split {
    size_t off, len;
    bool first;
} tok_split;

typedef struct tok_splits {
    tok_split *v;
    size_t n, cap;
} tok_splits;

typedef struct tok_segment {
    size_t off, len;
    int32_t id; /* -1: text */
} tok_segment;

typedef struct tok_segments {
    tok_segment *v;
    size_t n, cap;
} tok_segments;

/* Per-call working memory, pooled so that encode is re-entrant; it also
 * holds the BPE word cache (pre-token bytes -> ids). */
typedef struct tok_scratch tok_scratch;
struct tok_scratch {
    tok_scratch *next;
    tok_matcher *matcher;
    tok_buf norm, norm2, tmp, pre[2];
    tok_spans spans;
    tok_splits splits[2];
    tok_segments segs, segs2;
    void *sym, *heap; /* BPE/SPM symbol list and priority queue */
    size_t sym_cap, heap_cap;
    tok_strmap cache;      /* word -> index into cache_ids (start) */
    kld_tok_ids cache_ids; /* per cached word: count, then ids */
};

struct kld_tokenizer {
    char *name;
    tok_source_kind source;
    tok_model model;
    /* llama.cpp semantics (GGUF, llama2.c): special tokens are split out by
     * length, control/unknown ones only when parsing specials. Otherwise
     * Hugging Face's added-vocabulary semantics. */
    bool llama_mode;
    tok_vocab vocab;

    /* BPE */
    tok_pairmap merges;
    uint64_t n_merges;
    bool ignore_merges, byte_fallback, fuse_unk;
    int32_t model_unk; /* BPE unk_token id or -1 */
    char *cont_prefix, *eow_suffix;
    size_t cont_prefix_len, eow_suffix_len;
    bool byte_level; /* the last pre-tokenizer step is ByteLevel: the model maps bytes */

    /* SPM / WPM (llama.cpp) */
    bool add_space_prefix;
    bool wpm_lowercase, wpm_strip_accents;

    tok_norm *norms;
    size_t n_norms;
    tok_pre *pres;
    size_t n_pres;
    tok_dec *decs;
    size_t n_decs;
    bool has_decoder;

    tok_added *added; /* HF: added_tokens; llama: control/user-defined/unknown, longest first */
    size_t n_added;
    tok_added_index raw_index, norm_index; /* HF: lookups by first byte (tok_added.c) */

    int32_t *prefix_ids, *suffix_ids; /* added around a text with KLD_TOK_ADD_SPECIAL */
    size_t n_prefix, n_suffix;

    int32_t bos, eos, unk, pad;
    bool add_bos, add_eos;
    char *pre_name;
    int32_t n_special;

    pthread_mutex_t pool_lock;
    tok_scratch *pool;
};

kld_status tok_new(const char *name, tok_source_kind source, kld_tokenizer **out, kld_error *err);
/* llama2.c tokenizer.bin with exactly n_vocab tokens (tok_load_l2c.c). */
kld_status tok_load_llama2c(const char *path, int32_t n_vocab, kld_tokenizer **out, kld_error *err);
/* llama.cpp's special-token list: control, user-defined and unknown
 * tokens, longest text first (tok_load_gguf.c; llama2.c uses it too). */
kld_status tok_llama_specials(kld_tokenizer *t, kld_error *err);

/* Pipeline stages (tok_normalize.c, tok_pretok.c, tok_added.c, tok_bpe.c,
 * tok_spm.c, tok_wpm.c). */
kld_status tok_normalize_steps(const tok_norm *steps, size_t n_steps, const char *s, size_t n,
                               tok_buf *out, tok_matcher *m, kld_error *err);

/* Pre-tokenizes s[0..n) with t's steps; the pre-tokens are views into
 * *text (which is s itself or a scratch buffer). */
kld_status tok_pretokenize(const kld_tokenizer *t, tok_scratch *sc, const char *s, size_t n,
                           bool first, const char **text, tok_splits **out, kld_error *err);

/* Splits s into text and added-token segments. `normalized_pass`: match
 * the normalized contents of normalized=true tokens (Hugging Face's second
 * pass); otherwise the raw tokens. */
kld_status tok_split_added(const kld_tokenizer *t, const char *s, size_t n, bool parse_special,
                           bool normalized_pass, tok_segments *out, kld_error *err);
kld_status tok_added_build_index(kld_tokenizer *t, kld_error *err);

kld_status tok_bpe_word(const kld_tokenizer *t, tok_scratch *sc, const char *w, size_t n,
                        kld_tok_ids *out, kld_error *err);
kld_status tok_spm_text(const kld_tokenizer *t, tok_scratch *sc, const char *s, size_t n,
                        kld_tok_ids *out, kld_error *err);
kld_status tok_wpm_text(const kld_tokenizer *t, tok_scratch *sc, const char *s, size_t n,
                        kld_tok_ids *out, kld_error *err);

/* Scratch pool (tok_encode.c). */
tok_scratch *tok_scratch_get(const kld_tokenizer *t);
void tok_scratch_put(const kld_tokenizer *t, tok_scratch *sc);
void tok_scratch_free_all(kld_tokenizer *t);

/* Common regexes. */
extern const char *const TOK_RE_GPT2;

#endif
