/* tok_json_scan.h — a strict, allocation-free JSON scanner for the two big
 * members of a tokenizer.json (model.vocab: 150k "piece": id pairs;
 * model.merges: 150k-300k strings or pairs). jansson builds a tree node
 * per value and takes over a second for such files; these members are
 * read straight from the text instead, and the rest of the file (with
 * them blanked out) still goes through jansson. */
#ifndef KLD_TOK_JSON_SCAN_H
#define KLD_TOK_JSON_SCAN_H

#include "tokenizer/tok_internal.h"

typedef struct tok_json_span {
    size_t start, end; /* the value's bytes [start, end); end == 0: absent */
} tok_json_span;

/* Finds model.vocab and model.merges in the top-level object of json.
 * Returns false (err filled) when the text is not well-formed JSON around
 * them. */
bool tok_json_find_model_members(const char *json, size_t n, const char *name, tok_json_span *vocab,
                                 tok_json_span *merges, kld_error *err);

/* Reads a JSON string at json[*pos] (which must be '"'), unescaped into
 * out (NUL not appended); *pos moves past it. */
bool tok_json_string(const char *json, size_t n, size_t *pos, tok_buf *out);
/* Skips whitespace. */
size_t tok_json_ws(const char *json, size_t n, size_t pos);
/* Skips one value; false when malformed. */
bool tok_json_skip(const char *json, size_t n, size_t *pos, int depth);

#endif
