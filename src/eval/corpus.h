/* corpus.h — the text a KLD run reads: plain text (one document per line,
 * '#' comment lines, the seeds' calib format), JSONL ({"text": …} per
 * line), pre-tokenized int32 ids, or the built-in corpus. */
#ifndef KLD_EVAL_CORPUS_H
#define KLD_EVAL_CORPUS_H

#include "common/common.h"

typedef enum kld_corpus_kind {
    KLD_CORPUS_TEXT,    /* documents of text */
    KLD_CORPUS_IDS      /* one pre-tokenized sequence */
} kld_corpus_kind;

typedef struct kld_corpus {
    kld_corpus_kind kind;
    char *name;         /* path or "built-in" */
    size_t n_docs;
    char **docs;        /* KLD_CORPUS_TEXT: NUL-terminated documents */
    size_t *doc_len;
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

/* Lower-case hex of a 32-byte digest into buf[65]. */
void kld_hex_digest(const uint8_t d[32], char buf[65]);

/* SHA-256 of a file's bytes (streamed). */
kld_status kld_sha256_file(const char *path, uint8_t out[32], kld_error *err);

#endif
