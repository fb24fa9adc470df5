/* tokenizer.h — text <-> token ids for every vocabulary kldeval reads:
 * GGUF (tokenizer.ggml.model "llama" = SentencePiece-BPE by score, "gpt2" =
 * byte-level BPE with a pre-tokenizer chosen by tokenizer.ggml.pre, "bert" =
 * WordPiece), Hugging Face tokenizer.json (BPE with its normalizers,
 * pre-tokenizers, post-processors, decoders and added tokens) and llama2.c
 * tokenizer.bin. GGUF and llama2.c vocabularies follow llama.cpp's
 * tokenizer; tokenizer.json follows Hugging Face tokenizers. */
#ifndef KLD_TOKENIZER_H
#define KLD_TOKENIZER_H

#include "kld.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kld_tokenizer kld_tokenizer;
struct kld_gguf;   /* io/gguf.h */
struct kld_source; /* io/source.h */

/* Token types, numbered as GGUF's tokenizer.ggml.token_type. */
typedef enum kld_token_type {
    KLD_TOKEN_UNDEFINED = 0,
    KLD_TOKEN_NORMAL = 1,
    KLD_TOKEN_UNKNOWN = 2,
    KLD_TOKEN_CONTROL = 3,
    KLD_TOKEN_USER_DEFINED = 4,
    KLD_TOKEN_UNUSED = 5,
    KLD_TOKEN_BYTE = 6
} kld_token_type;

/* Encode flags. */
enum {
    /* Add the tokens the vocabulary adds around a text: BOS/EOS per the
     * GGUF flags, or the tokenizer.json post-processor's template. */
    KLD_TOK_ADD_SPECIAL = 1u << 0,
    /* Recognise special/control tokens written in the text ("<s>",
     * "<|im_end|>"). Off for corpus text (llama-perplexity semantics); on
     * for `kldeval tokenize` by default (Hugging Face encode semantics).
     * Non-special added tokens (tokenizer.json special=false, GGUF
     * user-defined) are always recognised, as both references do. */
    KLD_TOK_PARSE_SPECIAL = 1u << 1
};

/* Decode flags. */
enum {
    KLD_TOK_SKIP_SPECIAL = 1u << 0, /* drop special/control tokens */
    /* the ids as they read inside a longer text: the space a text's first
     * word loses (SentencePiece's dummy prefix, a decoder's Strip or
     * Metaspace prepend) is kept — one token's text, or token offsets */
    KLD_TOK_DECODE_INNER = 1u << 1
};

/* A growable id buffer owned by the caller; encode appends to it. Start
 * from {0} and release with kld_tok_ids_free. */
typedef struct kld_tok_ids {
    int32_t *ids;
    size_t n, cap;
} kld_tok_ids;

/* What `kldeval inspect` prints about a tokenizer. Strings are owned by the
 * tokenizer. Ids are -1 when the vocabulary has none. */
typedef struct kld_tok_summary {
    const char *kind;   /* "spm", "bpe", "wpm" */
    const char *source; /* "gguf", "tokenizer.json", "llama2.c" */
    int32_t n_vocab;
    int32_t bos_id, eos_id, unk_id, pad_id;
    bool add_bos, add_eos; /* tokenizer.json: what its post-processor adds */
    const char *pre;       /* GGUF tokenizer.ggml.pre, or the tokenizer.json
                            * pre-tokenizer chain ("Sequence[Split,ByteLevel]") */
    uint64_t n_merges;
    int32_t n_added;   /* tokenizer.json added_tokens; GGUF control + user-defined */
    int32_t n_special; /* of those, special (tokenizer.json) / control+unknown (GGUF) */
} kld_tok_summary;

/* Opens any of: a tokenizer.json, a .gguf (vocab-only or full model), a
 * llama2.c tokenizer.bin, or a model path kld_source_open accepts (a model
 * folder, a llama2.c model.bin with tokenizer.bin beside it). */
kld_status kld_tok_open_path(const char *path, kld_tokenizer **out, kld_error *err);
/* The tokenizer of an opened model: its GGUF metadata, the tokenizer.json
 * beside its safetensors, or the llama2.c tokenizer.bin beside model.bin. */
kld_status kld_tok_open_source(const struct kld_source *src, kld_tokenizer **out, kld_error *err);
/* From GGUF metadata; `name` is used in messages. */
kld_status kld_tok_open_gguf(const struct kld_gguf *g, const char *name, kld_tokenizer **out,
                             kld_error *err);
/* A Hugging Face tokenizer.json file, or the same JSON text in memory. */
kld_status kld_tok_open_json(const char *path, kld_tokenizer **out, kld_error *err);
kld_status kld_tok_open_json_text(const char *json, size_t len, const char *name,
                                  kld_tokenizer **out, kld_error *err);
/* A llama2.c tokenizer.bin with n_vocab tokens (n_vocab <= 0: every token
 * in the file). */
kld_status kld_tok_open_llama2c(const char *path, int32_t n_vocab, kld_tokenizer **out,
                                kld_error *err);
void kld_tok_free(kld_tokenizer *t);

/* Appends the ids of text[0..len) to out. The text must be valid UTF-8.
 * Safe to call from several threads on one tokenizer. */
kld_status kld_tok_encode(const kld_tokenizer *t, const char *text, size_t len, unsigned flags,
                          kld_tok_ids *out, kld_error *err);
/* Ids back to text (malloc'd, NUL-terminated, *out_len bytes). */
kld_status kld_tok_decode(const kld_tokenizer *t, const int32_t *ids, size_t n, unsigned flags,
                          char **out, size_t *out_len, kld_error *err);

void kld_tok_ids_free(kld_tok_ids *ids);
/* Appends n ids (growing the buffer); false when out of memory. */
bool kld_tok_ids_append(kld_tok_ids *ids, const int32_t *v, size_t n);

int32_t kld_tok_n_vocab(const kld_tokenizer *t);
/* The token's spelling in the vocabulary ("▁the", "Ġthe", "<0x0A>", "<s>"),
 * not NUL-terminated; NULL for an id outside the vocabulary or unassigned. */
const char *kld_tok_piece(const kld_tokenizer *t, int32_t id, size_t *len);
/* The id spelled exactly `piece`, or -1. */
int32_t kld_tok_piece_id(const kld_tokenizer *t, const char *piece, size_t len);
kld_token_type kld_tok_type(const kld_tokenizer *t, int32_t id);
int32_t kld_tok_bos(const kld_tokenizer *t);
int32_t kld_tok_eos(const kld_tokenizer *t);
/* True when encode with KLD_TOK_ADD_SPECIAL puts BOS first. */
bool kld_tok_adds_bos(const kld_tokenizer *t);

void kld_tok_summarize(const kld_tokenizer *t, kld_tok_summary *out);

#endif
