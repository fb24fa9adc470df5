/* chat_internal.h — internal to src/chat/chat_*.c: the tokens, the renderer
 * state and the node tree that the parser (chat_parse.c) builds and the
 * evaluator (chat_eval.c) walks. */
#ifndef KLD_CHAT_CHAT_INTERNAL_H
#define KLD_CHAT_CHAT_INTERNAL_H

#include "chat/chat.h"

typedef enum { T_TEXT, T_VAR_BEGIN, T_VAR_END, T_BLOCK_BEGIN, T_BLOCK_END, T_NAME, T_STR, T_INT,
               T_FLOAT, T_OP, T_EOF } tok_kind;

typedef struct tok {
    tok_kind kind;
    char *s;      /* text, name, string value, operator */
    long long i;
    double f;
    int line;
} tok;

typedef struct rt { /* renderer state */
    tok *t;
    size_t n, cap, pos;
    kld_error *err;
    kld_status st;
    char *out;
    size_t out_n, out_cap;
    json_t *vars;       /* the scope: an object */
    int depth;
} rt;

typedef enum {
    N_TEXT, N_OUT, N_IF, N_FOR, N_SET, N_BODY,
    E_LIT, E_NAME, E_ATTR, E_ITEM, E_SLICE, E_CALL, E_FILTER, E_TEST, E_BIN, E_NOT, E_NEG, E_COND,
    E_LIST, E_DICT, E_KWARG,
} node_kind;

typedef struct node {
    node_kind kind;
    char *s;             /* name, operator, filter/test/attribute name, text */
    json_t *lit;
    bool negate;
    struct node **kid;
    size_t n_kid;
    int line;
} node;

/* Records the first error (later ones are dropped) and returns false. */
bool kld_chat_fail(rt *r, kld_status st, const char *fmt, ...) KLD_PRINTF(3, 4);
void kld_chat_node_free(node *n);
/* Lexes and parses a template into r's tokens and a node tree (NULL on error). */
node *kld_chat_parse(rt *r, const char *tmpl);

#endif
