/* corpus.h — the text a KLD run reads: plain text (one document per line,
 * '#' comment lines, the seeds' calib format), JSONL (per line
 * {"text": …} or a conversation {"messages": [{"role", "content"}, …]}
 * rendered with the model's chat template: corpus_chat.c), pre-tokenized
 * int32 ids, or the built-in corpus. */
#ifndef KLD_EVAL_CORPUS_H
#define KLD_EVAL_CORPUS_H

#include "chat/chat.h"
#include "common/common.h"

typedef enum kld_corpus_kind {
    KLD_CORPUS_TEXT,    /* documents of text */
    KLD_CORPUS_IDS      /* one pre-tokenized sequence */
} kld_corpus_kind;

typedef struct kld_corpus {
    kld_corpus_kind kind;
    char *name;         /* path or "built-in" */
    size_t n_docs;
    char **docs;        /* KLD_CORPUS_TEXT: NUL-terminated documents (a conversation's:
                           NULL until kld_corpus_render_chat) */
    size_t *doc_len;
    size_t *doc_line;   /* the 1-based line each document came from */
    json_t **messages;  /* per document: its conversation (NULL: a text document) */
    bool *doc_add_bos;  /* per document: the tokenizer adds BOS (false when a rendered
                           conversation already begins with it) */
    size_t n_text_docs, n_chat_docs; /* documents from each form */
    char *chat_origin;  /* the template the conversations were rendered with */
    char *whole;        /* the raw file text (llama.cpp chunking tokenizes it whole) */
    size_t whole_len;
    int32_t *ids;       /* KLD_CORPUS_IDS */
    size_t n_ids;
    uint8_t sha256[32]; /* of the raw bytes */
} kld_corpus;

/* format: "auto" (by extension: .jsonl → JSONL, otherwise text), "text",
 * "jsonl". path NULL = the built-in corpus. */
kld_status kld_corpus_load_text(const char *path, const char *format, kld_corpus **out,
                                kld_error *err);
/* int32 little-endian ids; the file size must be a multiple of 4. */
kld_status kld_corpus_load_ids(const char *path, kld_corpus **out, kld_error *err);
void kld_corpus_free(kld_corpus *c);

/* corpus_chat.c: renders the conversations of c with t (add_generation_prompt
 * false; model names the model in errors). No conversations: nothing to do,
 * even without a template. */
kld_status kld_corpus_render_chat(kld_corpus *c, const kld_chat_template *t, const char *model,
                                  kld_error *err);
/* The other arm of a run must render every conversation as c holds it
 * (same text, same BOS decision); the error names the first document that
 * differs and where. */
kld_status kld_corpus_check_chat(const kld_corpus *c, const kld_chat_template *t, const char *model,
                                 kld_error *err);
/* Adds to a report's corpus object (a text corpus): documents_text and
 * documents_messages (of the whole file) and chat_template (where the
 * conversations' template came from; null without conversations). */
void kld_corpus_forms_json(const kld_corpus *c, json_t *corpus);
/* The same with the template of the model in src (kld_chat_template_open);
 * check = false renders, true checks. */
kld_status kld_corpus_chat_with(kld_corpus *c, bool check, const kld_source *src,
                                const kld_tokenizer *tok, kld_error *err);

/* Lower-case hex of a 32-byte digest into buf[65]. */
void kld_hex_digest(const uint8_t d[32], char buf[65]);

/* SHA-256 of a file's bytes (streamed). */
kld_status kld_sha256_file(const char *path, uint8_t out[32], kld_error *err);

#endif
