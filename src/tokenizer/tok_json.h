/* tok_json.h — the pieces of the tokenizer.json loader shared by its
 * files: tok_load_json.c (top level, added tokens, tokenizer_config.json),
 * tok_json_steps.c (normalizers, pre-tokenizers, post-processors,
 * decoders) and tok_json_model.c (the BPE model's vocab and merges). */
#ifndef KLD_TOK_JSON_H
#define KLD_TOK_JSON_H

#include "tokenizer/tok_internal.h"
#include "tokenizer/tok_json_scan.h"

#include <jansson.h>

typedef struct tok_json_ctx {
    const char *name;
    kld_tokenizer *t;
    kld_error *err;
    const char *text; /* the whole file: model.vocab and model.merges are */
    size_t text_len;  /* read from it directly (tok_json_scan.h) */
    tok_json_span vocab, merges;
} tok_json_ctx;

/* "name: what: problem" as KLD_ERR_FORMAT / "name: section type 'x' is not
 * supported" as KLD_ERR_UNSUPPORTED. */
kld_status tok_json_bad(tok_json_ctx *c, const char *fmt, const char *what);
kld_status tok_json_unsupported(tok_json_ctx *c, const char *section, const char *type);

/* Optional members: absent or null give the default / NULL. */
bool tok_json_bool(json_t *o, const char *key, bool def);
const char *tok_json_str(json_t *o, const char *key);
char *tok_json_dup(json_t *v, size_t *len); /* a JSON string's copy */

/* Each appends its steps to c->t (a Sequence recursively). */
kld_status tok_json_normalizer(tok_json_ctx *c, json_t *n);
kld_status tok_json_pre_tokenizer(tok_json_ctx *c, json_t *n, int depth);
kld_status tok_json_post_processor(tok_json_ctx *c, json_t *n);
kld_status tok_json_decoder(tok_json_ctx *c, json_t *n);
/* "Sequence[Split,ByteLevel]" for summaries. */
bool tok_json_pre_name(json_t *n, tok_buf *out);

/* The BPE model: type, flags, vocab (sized for the added tokens' ids
 * too) and merges. */
kld_status tok_json_model(tok_json_ctx *c, json_t *m, json_t *added);

#endif
