/* chat.c — the Jinja-subset renderer behind chat templates (see chat.h).
 * Three stages: the lexer splits the template into text and tags (applying
 * -, trim_blocks and lstrip_blocks) and tokenizes the tags; a recursive
 * descent parser builds a node tree with Jinja's precedence; the evaluator
 * walks it over jansson values (NULL stands for undefined). */
#include "cap/chat.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- tokens ---- */

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

static bool fail(rt *r, kld_status st, const char *fmt, ...) KLD_PRINTF(3, 4);
static bool fail(rt *r, kld_status st, const char *fmt, ...) {
    if (r->st != KLD_OK) return false;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    r->st = kld_fail(r->err, st, "chat template: %s", msg);
    return false;
}

static bool push_tok(rt *r, tok_kind k, const char *s, size_t n, int line) {
    if (r->n == r->cap) {
        size_t c = r->cap ? r->cap * 2 : 256;
        tok *nt = realloc(r->t, c * sizeof *nt);
        if (!nt) return fail(r, KLD_ERR_NOMEM, "out of memory");
        r->t = nt;
        r->cap = c;
    }
    tok *t = &r->t[r->n++];
    memset(t, 0, sizeof *t);
    t->kind = k;
    t->line = line;
    if (s && !(t->s = kld_strndup(s, n))) return fail(r, KLD_ERR_NOMEM, "out of memory");
    return true;
}

/* Tokenizes the inside of one tag. */
static bool lex_tag(rt *r, const char *s, size_t n, int line) {
    for (size_t i = 0; i < n && r->st == KLD_OK;) {
        char c = s[i];
        if (isspace((unsigned char)c)) {
            if (c == '\n') line++;
            i++;
        } else if (isalpha((unsigned char)c) || c == '_') {
            size_t j = i;
            while (j < n && (isalnum((unsigned char)s[j]) || s[j] == '_')) j++;
            push_tok(r, T_NAME, s + i, j - i, line);
            i = j;
        } else if (isdigit((unsigned char)c)) {
            size_t j = i;
            bool flt = false;
            while (j < n && (isdigit((unsigned char)s[j]) || (s[j] == '.' && !flt && j + 1 < n && isdigit((unsigned char)s[j + 1]))))
                flt |= s[j++] == '.';
            push_tok(r, flt ? T_FLOAT : T_INT, s + i, j - i, line);
            r->t[r->n - 1].i = strtoll(r->t[r->n - 1].s, NULL, 10);
            r->t[r->n - 1].f = strtod(r->t[r->n - 1].s, NULL);
            i = j;
        } else if (c == '\'' || c == '"') {
            char *b = malloc(n + 1);
            size_t o = 0, j = i + 1;
            if (!b) return fail(r, KLD_ERR_NOMEM, "out of memory");
            for (; j < n && s[j] != c; j++) {
                if (s[j] == '\\' && j + 1 < n) {
                    char e = s[++j];
                    b[o++] = e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
                } else b[o++] = s[j];
            }
            if (j >= n) {
                free(b);
                return fail(r, KLD_ERR_FORMAT, "line %d: unterminated string", line);
            }
            push_tok(r, T_STR, b, o, line);
            free(b);
            i = j + 1;
        } else {
            static const char *const ops[] = {"==", "!=", "<=", ">=", "//", "**", "<", ">", "+", "-",
                                              "*", "/", "%", "~", "(", ")", "[", "]", "{", "}", ".",
                                              ",", ":", "|", "=", NULL};
            int k = 0;
            for (; ops[k]; k++)
                if (!strncmp(s + i, ops[k], strlen(ops[k])) && i + strlen(ops[k]) <= n) break;
            if (!ops[k]) return fail(r, KLD_ERR_FORMAT, "line %d: unexpected character '%c'", line, c);
            push_tok(r, T_OP, ops[k], strlen(ops[k]), line);
            i += strlen(ops[k]);
        }
    }
    return r->st == KLD_OK;
}

static int count_lines(const char *s, const char *e) {
    int n = 0;
    for (; s < e; s++) n += *s == '\n';
    return n;
}

static bool lex(rt *r, const char *src) {
    const char *p = src;
    bool strip_next = false, trim_nl = false;
    int line = 1;
    while (*p && r->st == KLD_OK) {
        const char *o = strstr(p, "{");
        while (o && o[1] != '{' && o[1] != '%' && o[1] != '#') o = strchr(o + 1, '{');
        const char *te = o ? o : p + strlen(p); /* text end */
        const char *ts = p;
        if (trim_nl && ts < te && *ts == '\n') ts++; /* trim_blocks */
        if (strip_next) while (ts < te && isspace((unsigned char)*ts)) ts++;
        const char *tend = te;
        bool is_block = o && (o[1] == '%' || o[1] == '#');
        if (o && o[2] == '-') {
            while (tend > ts && isspace((unsigned char)tend[-1])) tend--;
        } else if (is_block && o[2] != '+') { /* lstrip_blocks: blanks from the line start */
            const char *b = tend;
            while (b > ts && (b[-1] == ' ' || b[-1] == '\t')) b--;
            if (b == src || b[-1] == '\n' || (b == ts && ts != p && 0)) tend = b;
            else if (b == ts && ts > src && ts[-1] == '\n') tend = b;
        }
        if (tend > ts) push_tok(r, T_TEXT, ts, (size_t)(tend - ts), line);
        line += count_lines(p, te);
        if (!o) break;
        char kind = o[1];
        const char *close = kind == '{' ? "}}" : kind == '%' ? "%}" : "#}";
        const char *c = strstr(o + 2, close);
        if (!c) return fail(r, KLD_ERR_FORMAT, "line %d: unclosed '{%c'", line, kind);
        const char *in = o + 2 + (o[2] == '-' || o[2] == '+');
        const char *in_end = c;
        strip_next = c > in && c[-1] == '-';
        if (strip_next || (c > in && c[-1] == '+')) in_end--;
        trim_nl = kind != '{' && !(c > in && c[-1] == '+');
        if (kind == '{') {
            push_tok(r, T_VAR_BEGIN, NULL, 0, line);
            lex_tag(r, in, (size_t)(in_end - in), line);
            push_tok(r, T_VAR_END, NULL, 0, line);
        } else if (kind == '%') {
            push_tok(r, T_BLOCK_BEGIN, NULL, 0, line);
            lex_tag(r, in, (size_t)(in_end - in), line);
            push_tok(r, T_BLOCK_END, NULL, 0, line);
        }
        line += count_lines(o, c);
        p = c + 2;
    }
    push_tok(r, T_EOF, NULL, 0, line);
    return r->st == KLD_OK;
}

/* ---- the tree ---- */

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

static void node_free(node *n) {
    if (!n) return;
    for (size_t i = 0; i < n->n_kid; i++) node_free(n->kid[i]);
    free(n->kid);
    free(n->s);
    json_decref(n->lit);
    free(n);
}

static node *mk(rt *r, node_kind k, const char *s) {
    node *n = calloc(1, sizeof *n);
    if (!n || (s && !(n->s = kld_strdup(s)))) {
        free(n);
        fail(r, KLD_ERR_NOMEM, "out of memory");
        return NULL;
    }
    n->kind = k;
    n->line = r->t[r->pos < r->n ? r->pos : r->n - 1].line;
    return n;
}

static bool add(rt *r, node *parent, node *kid) {
    if (!parent || !kid) {
        node_free(kid);
        return false;
    }
    node **nk = realloc(parent->kid, (parent->n_kid + 1) * sizeof *nk);
    if (!nk) {
        node_free(kid);
        return fail(r, KLD_ERR_NOMEM, "out of memory");
    }
    parent->kid = nk;
    parent->kid[parent->n_kid++] = kid;
    return true;
}

static tok *cur(rt *r) { return &r->t[r->pos]; }
static bool is_op(rt *r, const char *op) { return cur(r)->kind == T_OP && !strcmp(cur(r)->s, op); }
static bool is_name(rt *r, const char *nm) { return cur(r)->kind == T_NAME && !strcmp(cur(r)->s, nm); }
static bool accept_op(rt *r, const char *op) {
    if (!is_op(r, op)) return false;
    r->pos++;
    return true;
}
static bool accept_name(rt *r, const char *nm) {
    if (!is_name(r, nm)) return false;
    r->pos++;
    return true;
}
static bool expect_op(rt *r, const char *op) {
    if (accept_op(r, op)) return true;
    return fail(r, KLD_ERR_FORMAT, "line %d: expected '%s', found '%s'", cur(r)->line, op,
                cur(r)->s ? cur(r)->s : "end of tag");
}

static node *expr(rt *r);

static node *primary(rt *r) {
    tok *t = cur(r);
    node *n = NULL;
    if (t->kind == T_STR) {
        n = mk(r, E_LIT, NULL);
        if (n) n->lit = json_string(t->s);
        r->pos++;
        /* adjacent string literals concatenate */
        while (n && cur(r)->kind == T_STR) {
            json_t *j = json_sprintf("%s%s", json_string_value(n->lit), cur(r)->s);
            json_decref(n->lit);
            n->lit = j;
            r->pos++;
        }
    } else if (t->kind == T_INT || t->kind == T_FLOAT) {
        n = mk(r, E_LIT, NULL);
        if (n) n->lit = t->kind == T_INT ? json_integer(t->i) : json_real(t->f);
        r->pos++;
    } else if (t->kind == T_NAME) {
        r->pos++;
        json_t *lit = !strcmp(t->s, "true") || !strcmp(t->s, "True")     ? json_true()
                      : !strcmp(t->s, "false") || !strcmp(t->s, "False") ? json_false()
                      : !strcmp(t->s, "none") || !strcmp(t->s, "None")   ? json_null()
                                                                          : NULL;
        if (lit) {
            if ((n = mk(r, E_LIT, NULL))) n->lit = lit;
            else json_decref(lit);
        } else n = mk(r, E_NAME, t->s);
    } else if (accept_op(r, "(")) {
        n = expr(r);
        if (n && accept_op(r, ",")) { /* a tuple: treated as a list */
            node *l = mk(r, E_LIST, NULL);
            add(r, l, n);
            while (!is_op(r, ")") && r->st == KLD_OK) {
                add(r, l, expr(r));
                if (!accept_op(r, ",")) break;
            }
            n = l;
        }
        if (!expect_op(r, ")")) return node_free(n), NULL;
    } else if (accept_op(r, "[")) {
        n = mk(r, E_LIST, NULL);
        while (n && !is_op(r, "]") && r->st == KLD_OK) {
            add(r, n, expr(r));
            if (!accept_op(r, ",")) break;
        }
        if (!expect_op(r, "]")) return node_free(n), NULL;
    } else if (accept_op(r, "{")) {
        n = mk(r, E_DICT, NULL);
        while (n && !is_op(r, "}") && r->st == KLD_OK) {
            add(r, n, expr(r));
            expect_op(r, ":");
            add(r, n, expr(r));
            if (!accept_op(r, ",")) break;
        }
        if (!expect_op(r, "}")) return node_free(n), NULL;
    } else {
        fail(r, KLD_ERR_FORMAT, "line %d: unexpected '%s' in an expression", t->line,
             t->s ? t->s : "end of tag");
    }
    return n;
}

/* call arguments after '(' : positional and name=value */
static bool call_args(rt *r, node *call) {
    while (!is_op(r, ")") && r->st == KLD_OK) {
        if (cur(r)->kind == T_NAME && r->t[r->pos + 1].kind == T_OP && !strcmp(r->t[r->pos + 1].s, "=")) {
            node *kw = mk(r, E_KWARG, cur(r)->s);
            r->pos += 2;
            add(r, kw, expr(r));
            add(r, call, kw);
        } else add(r, call, expr(r));
        if (!accept_op(r, ",")) break;
    }
    return expect_op(r, ")");
}

static node *postfix(rt *r) {
    node *n = primary(r);
    while (n && r->st == KLD_OK) {
        if (accept_op(r, ".")) {
            if (cur(r)->kind != T_NAME) return node_free(n), fail(r, KLD_ERR_FORMAT, "line %d: a name must follow '.'", cur(r)->line), NULL;
            node *a = mk(r, E_ATTR, cur(r)->s);
            r->pos++;
            add(r, a, n);
            n = a;
        } else if (accept_op(r, "[")) {
            node *lo = NULL, *hi = NULL, *step = NULL;
            bool slice = false;
            if (!is_op(r, ":")) lo = expr(r);
            if (accept_op(r, ":")) {
                slice = true;
                if (!is_op(r, "]") && !is_op(r, ":")) hi = expr(r);
                if (accept_op(r, ":") && !is_op(r, "]")) step = expr(r);
            }
            if (!expect_op(r, "]")) {
                node_free(lo), node_free(hi), node_free(step), node_free(n);
                return NULL;
            }
            node *it = mk(r, slice ? E_SLICE : E_ITEM, NULL);
            add(r, it, n);
            if (slice) { /* kids: obj, lo, hi, step (literal none for absent) */
                node *parts[3] = {lo, hi, step};
                for (int k = 0; k < 3; k++) {
                    if (!parts[k] && (parts[k] = mk(r, E_LIT, NULL))) parts[k]->lit = json_null();
                    add(r, it, parts[k]);
                }
            } else add(r, it, lo);
            n = it;
        } else if (accept_op(r, "(")) {
            node *c = mk(r, E_CALL, NULL);
            add(r, c, n);
            call_args(r, c);
            n = c;
        } else break;
    }
    return n;
}

static node *unary(rt *r);

/* filters and tests bind tighter than any binary operator */
static node *filtered(rt *r) {
    node *n = postfix(r);
    while (n && r->st == KLD_OK) {
        if (accept_op(r, "|")) {
            if (cur(r)->kind != T_NAME) return node_free(n), fail(r, KLD_ERR_FORMAT, "line %d: a filter name must follow '|'", cur(r)->line), NULL;
            node *f = mk(r, E_FILTER, cur(r)->s);
            r->pos++;
            add(r, f, n);
            if (accept_op(r, "(")) call_args(r, f);
            n = f;
        } else if (accept_name(r, "is")) {
            bool neg = accept_name(r, "not");
            if (cur(r)->kind != T_NAME) return node_free(n), fail(r, KLD_ERR_FORMAT, "line %d: a test name must follow 'is'", cur(r)->line), NULL;
            node *t = mk(r, E_TEST, cur(r)->s);
            r->pos++;
            t->negate = neg;
            add(r, t, n);
            if (accept_op(r, "(")) call_args(r, t);
            else if (cur(r)->kind == T_STR || cur(r)->kind == T_INT) add(r, t, primary(r));
            n = t;
        } else break;
    }
    return n;
}

static node *unary(rt *r) {
    if (accept_op(r, "-")) {
        node *n = mk(r, E_NEG, NULL);
        add(r, n, unary(r));
        return n;
    }
    return filtered(r);
}

static node *binary(rt *r, int level);

static const char *const *levels[] = {
    (const char *const[]){"+", "-", NULL},
    (const char *const[]){"~", NULL},
    (const char *const[]){"*", "/", "//", "%", NULL},
};

static node *binary(rt *r, int level) {
    if (level == 3) return unary(r);
    node *n = binary(r, level + 1);
    for (;;) {
        const char *op = NULL;
        for (int k = 0; levels[level][k]; k++)
            if (is_op(r, levels[level][k])) op = levels[level][k];
        if (!op || !n) return n;
        r->pos++;
        node *b = mk(r, E_BIN, op);
        add(r, b, n);
        add(r, b, binary(r, level + 1));
        n = b;
    }
}

static node *compare(rt *r) {
    node *n = binary(r, 0);
    for (;;) {
        const char *op = NULL;
        static const char *const cmp[] = {"==", "!=", "<=", ">=", "<", ">", NULL};
        for (int k = 0; cmp[k]; k++)
            if (is_op(r, cmp[k])) op = cmp[k];
        bool not_in = is_name(r, "not") && r->t[r->pos + 1].kind == T_NAME && !strcmp(r->t[r->pos + 1].s, "in");
        if (op) r->pos++;
        else if (accept_name(r, "in")) op = "in";
        else if (not_in) {
            r->pos += 2;
            op = "not in";
        } else return n;
        if (!n) return NULL;
        node *b = mk(r, E_BIN, op);
        add(r, b, n);
        add(r, b, binary(r, 0));
        n = b;
    }
}

static node *not_expr(rt *r) {
    if (accept_name(r, "not")) {
        node *n = mk(r, E_NOT, NULL);
        add(r, n, not_expr(r));
        return n;
    }
    return compare(r);
}

static node *and_expr(rt *r) {
    node *n = not_expr(r);
    while (n && accept_name(r, "and")) {
        node *b = mk(r, E_BIN, "and");
        add(r, b, n);
        add(r, b, not_expr(r));
        n = b;
    }
    return n;
}

static node *or_expr(rt *r) {
    node *n = and_expr(r);
    while (n && accept_name(r, "or")) {
        node *b = mk(r, E_BIN, "or");
        add(r, b, n);
        add(r, b, and_expr(r));
        n = b;
    }
    return n;
}

static node *expr(rt *r) {
    if (++r->depth > 200) return fail(r, KLD_ERR_FORMAT, "expression nested too deeply"), NULL;
    node *n = or_expr(r);
    if (n && accept_name(r, "if")) { /* a if cond else b */
        node *c = mk(r, E_COND, NULL);
        add(r, c, n);
        add(r, c, or_expr(r));
        if (accept_name(r, "else")) add(r, c, expr(r));
        else add(r, c, mk(r, E_NAME, "__undefined__"));
        n = c;
    }
    r->depth--;
    return n;
}

/* ---- statements ---- */

static node *body(rt *r, const char *const *enders);

static bool end_tag(rt *r) {
    if (cur(r)->kind == T_BLOCK_END) {
        r->pos++;
        return true;
    }
    return fail(r, KLD_ERR_FORMAT, "line %d: expected the end of the tag, found '%s'", cur(r)->line,
                cur(r)->s ? cur(r)->s : "?");
}

static node *statement(rt *r) {
    tok *t = cur(r);
    if (t->kind != T_NAME) return fail(r, KLD_ERR_FORMAT, "line %d: a tag must start with a keyword", t->line), NULL;
    if (accept_name(r, "if")) {
        node *n = mk(r, N_IF, NULL);
        add(r, n, expr(r));
        end_tag(r);
        static const char *const ends[] = {"elif", "else", "endif", NULL};
        add(r, n, body(r, ends));
        while (r->st == KLD_OK) {
            if (accept_name(r, "elif")) {
                add(r, n, expr(r));
                end_tag(r);
                add(r, n, body(r, ends));
            } else if (accept_name(r, "else")) {
                end_tag(r);
                static const char *const e2[] = {"endif", NULL};
                node *lit = mk(r, E_LIT, NULL);
                if (lit) lit->lit = json_true();
                add(r, n, lit);
                add(r, n, body(r, e2));
            } else if (accept_name(r, "endif")) {
                end_tag(r);
                break;
            } else {
                fail(r, KLD_ERR_FORMAT, "line %d: unclosed if", t->line);
                break;
            }
        }
        return n;
    }
    if (accept_name(r, "for")) {
        node *n = mk(r, N_FOR, NULL);
        if (cur(r)->kind != T_NAME) return node_free(n), fail(r, KLD_ERR_FORMAT, "line %d: for needs a name", t->line), NULL;
        add(r, n, mk(r, E_NAME, cur(r)->s));
        r->pos++;
        if (accept_op(r, ",")) { /* for k, v in ... */
            add(r, n, mk(r, E_NAME, cur(r)->s));
            r->pos++;
        } else add(r, n, mk(r, E_NAME, ""));
        if (!accept_name(r, "in")) return node_free(n), fail(r, KLD_ERR_FORMAT, "line %d: for needs 'in'", t->line), NULL;
        add(r, n, or_expr(r));
        if (accept_name(r, "if")) return node_free(n), fail(r, KLD_ERR_UNSUPPORTED, "line %d: unsupported construct 'for … if' (loop filter)", t->line), NULL;
        if (accept_name(r, "recursive")) return node_free(n), fail(r, KLD_ERR_UNSUPPORTED, "line %d: unsupported construct 'recursive' loop", t->line), NULL;
        end_tag(r);
        static const char *const ends[] = {"else", "endfor", NULL};
        add(r, n, body(r, ends));
        if (accept_name(r, "else")) {
            end_tag(r);
            static const char *const e2[] = {"endfor", NULL};
            add(r, n, body(r, e2));
        }
        if (!accept_name(r, "endfor")) return node_free(n), fail(r, KLD_ERR_FORMAT, "line %d: unclosed for", t->line), NULL;
        end_tag(r);
        return n;
    }
    if (accept_name(r, "set")) {
        if (cur(r)->kind != T_NAME) return fail(r, KLD_ERR_FORMAT, "line %d: set needs a name", t->line), NULL;
        node *n = mk(r, N_SET, cur(r)->s);
        r->pos++;
        if (accept_op(r, ".")) { /* ns.attr = value */
            add(r, n, mk(r, E_NAME, cur(r)->s));
            r->pos++;
        } else add(r, n, mk(r, E_NAME, ""));
        if (!accept_op(r, "=")) return node_free(n), fail(r, KLD_ERR_UNSUPPORTED, "line %d: unsupported construct 'set' block (without '=')", t->line), NULL;
        add(r, n, expr(r));
        end_tag(r);
        return n;
    }
    return fail(r, KLD_ERR_UNSUPPORTED, "line %d: unsupported construct '%s'", t->line, t->s), NULL;
}

/* Nodes until a block tag whose keyword is in enders (left unconsumed,
 * after its '{%'), or the end of the template when enders is NULL. */
static node *body(rt *r, const char *const *enders) {
    node *b = mk(r, N_BODY, NULL);
    while (b && r->st == KLD_OK) {
        tok *t = cur(r);
        if (t->kind == T_EOF) {
            if (enders) fail(r, KLD_ERR_FORMAT, "unexpected end of template: missing '%s'", enders[0]);
            break;
        }
        if (t->kind == T_TEXT) {
            add(r, b, mk(r, N_TEXT, t->s));
            r->pos++;
        } else if (t->kind == T_VAR_BEGIN) {
            r->pos++;
            node *o = mk(r, N_OUT, NULL);
            add(r, o, expr(r));
            add(r, b, o);
            if (cur(r)->kind != T_VAR_END) fail(r, KLD_ERR_FORMAT, "line %d: expected '}}', found '%s'", cur(r)->line, cur(r)->s ? cur(r)->s : "?");
            r->pos++;
        } else if (t->kind == T_BLOCK_BEGIN) {
            tok *kw = &r->t[r->pos + 1];
            bool ends = false;
            for (int k = 0; enders && enders[k]; k++)
                if (kw->kind == T_NAME && !strcmp(kw->s, enders[k])) ends = true;
            if (ends) {
                r->pos++;
                break;
            }
            r->pos++;
            add(r, b, statement(r));
        } else {
            fail(r, KLD_ERR_FORMAT, "line %d: unexpected token", t->line);
        }
    }
    return b;
}

/* ---- evaluation ---- */

static bool truthy(const json_t *v) {
    if (!v || json_is_null(v) || json_is_false(v)) return false;
    if (json_is_true(v)) return true;
    if (json_is_integer(v)) return json_integer_value(v) != 0;
    if (json_is_real(v)) return json_real_value(v) != 0;
    if (json_is_string(v)) return json_string_length(v) > 0;
    if (json_is_array(v)) return json_array_size(v) > 0;
    if (json_is_object(v)) return json_object_size(v) > 0;
    return false;
}

static void out_put(rt *r, const char *s, size_t n) {
    if (r->out_n + n + 1 > r->out_cap) {
        size_t c = r->out_cap ? r->out_cap : 1024;
        while (c < r->out_n + n + 1) c *= 2;
        char *no = realloc(r->out, c);
        if (!no) {
            fail(r, KLD_ERR_NOMEM, "out of memory");
            return;
        }
        r->out = no;
        r->out_cap = c;
    }
    memcpy(r->out + r->out_n, s, n);
    r->out_n += n;
    r->out[r->out_n] = '\0';
}

/* str(value) as Python prints it (malloc'd). */
static char *to_str(const json_t *v) {
    char buf[64];
    if (!v) return kld_strdup("");
    if (json_is_string(v)) return kld_strndup(json_string_value(v), json_string_length(v));
    if (json_is_integer(v)) return snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(v)), kld_strdup(buf);
    if (json_is_real(v)) {
        double d = json_real_value(v);
        snprintf(buf, sizeof buf, "%.17g", d);
        for (int p = 1; p <= 17; p++) { /* the shortest form that reads back */
            snprintf(buf, sizeof buf, "%.*g", p, d);
            if (strtod(buf, NULL) == d) break;
        }
        if (!strpbrk(buf, ".eEn")) strcat(buf, ".0");
        return kld_strdup(buf);
    }
    if (json_is_true(v)) return kld_strdup("True");
    if (json_is_false(v)) return kld_strdup("False");
    if (json_is_null(v)) return kld_strdup("None");
    return json_dumps(v, JSON_ENCODE_ANY); /* lists and dicts: their JSON */
}

static json_t *eval(rt *r, node *n);

static bool is_undef_name(const node *n) { return n->kind == E_NAME && !strcmp(n->s, "__undefined__"); }

static json_t *str_method(rt *r, const char *s, const char *m, json_t **a, size_t na, int line) {
    size_t n = strlen(s);
    if (!strcmp(m, "strip") || !strcmp(m, "lstrip") || !strcmp(m, "rstrip")) {
        const char *chars = na && json_is_string(a[0]) ? json_string_value(a[0]) : " \t\n\r\f\v";
        size_t b = 0, e = n;
        if (strcmp(m, "rstrip")) while (b < e && strchr(chars, s[b])) b++;
        if (strcmp(m, "lstrip")) while (e > b && strchr(chars, s[e - 1])) e--;
        return json_stringn(s + b, e - b);
    }
    if ((!strcmp(m, "startswith") || !strcmp(m, "endswith")) && na == 1 && json_is_string(a[0])) {
        size_t l = json_string_length(a[0]);
        bool ok = l <= n && !memcmp(!strcmp(m, "startswith") ? s : s + n - l, json_string_value(a[0]), l);
        return json_boolean(ok);
    }
    if (!strcmp(m, "upper") || !strcmp(m, "lower") || !strcmp(m, "title")) {
        char *c = kld_strdup(s);
        bool start = true;
        for (char *p = c; p && *p; p++) {
            if (!strcmp(m, "upper")) *p = (char)toupper((unsigned char)*p);
            else if (!strcmp(m, "lower")) *p = (char)tolower((unsigned char)*p);
            else {
                *p = (char)(start ? toupper((unsigned char)*p) : tolower((unsigned char)*p));
                start = !isalpha((unsigned char)*p);
            }
        }
        json_t *j = c ? json_string(c) : NULL;
        free(c);
        return j;
    }
    if (!strcmp(m, "split")) {
        json_t *l = json_array();
        const char *sep = na && json_is_string(a[0]) ? json_string_value(a[0]) : NULL;
        if (sep && !*sep) return json_decref(l), fail(r, KLD_ERR_ARG, "line %d: split with an empty separator", line), NULL;
        const char *p = s;
        if (!sep) {
            while (*p) {
                while (*p && isspace((unsigned char)*p)) p++;
                const char *q = p;
                while (*q && !isspace((unsigned char)*q)) q++;
                if (q > p) json_array_append_new(l, json_stringn(p, (size_t)(q - p)));
                p = q;
            }
            return l;
        }
        for (;;) {
            const char *q = strstr(p, sep);
            json_array_append_new(l, json_stringn(p, q ? (size_t)(q - p) : strlen(p)));
            if (!q) break;
            p = q + strlen(sep);
        }
        return l;
    }
    if (!strcmp(m, "replace") && na == 2 && json_is_string(a[0]) && json_is_string(a[1])) {
        const char *from = json_string_value(a[0]), *to = json_string_value(a[1]);
        size_t fl = strlen(from);
        if (!fl) return json_string(s);
        rt tmp = {0};
        tmp.err = r->err;
        for (const char *p = s;;) {
            const char *q = strstr(p, from);
            out_put(&tmp, p, q ? (size_t)(q - p) : strlen(p));
            if (!q) break;
            out_put(&tmp, to, strlen(to));
            p = q + fl;
        }
        json_t *j = json_string(tmp.out ? tmp.out : "");
        free(tmp.out);
        return j;
    }
    return fail(r, KLD_ERR_UNSUPPORTED, "line %d: unsupported construct: string method '%s'", line, m), NULL;
}

static json_t *call(rt *r, node *n) {
    node *fn = n->kid[0];
    size_t na = 0;
    json_t *a[8] = {0};
    json_t *kw = json_object();
    for (size_t k = 1; k < n->n_kid; k++) {
        if (n->kid[k]->kind == E_KWARG) json_object_set_new(kw, n->kid[k]->s, eval(r, n->kid[k]->kid[0]));
        else if (na < 8) a[na++] = eval(r, n->kid[k]);
    }
    json_t *res = NULL;
    if (fn->kind == E_NAME && !strcmp(fn->s, "raise_exception")) {
        char *msg = na ? to_str(a[0]) : kld_strdup("");
        fail(r, KLD_ERR_ARG, "raise_exception: %s", msg ? msg : "");
        free(msg);
    } else if (fn->kind == E_NAME && !strcmp(fn->s, "range")) {
        long long lo = 0, hi = 0, step = 1;
        if (na == 1) hi = json_integer_value(a[0]);
        else if (na >= 2) lo = json_integer_value(a[0]), hi = json_integer_value(a[1]);
        if (na == 3) step = json_integer_value(a[2]);
        res = json_array();
        for (long long i = lo; step && (step > 0 ? i < hi : i > hi) && json_array_size(res) < 100000; i += step)
            json_array_append_new(res, json_integer(i));
    } else if (fn->kind == E_NAME && !strcmp(fn->s, "namespace")) {
        res = json_copy(kw);
    } else if (fn->kind == E_ATTR) {
        json_t *obj = eval(r, fn->kid[0]);
        const char *m = fn->s;
        if (json_is_string(obj)) res = str_method(r, json_string_value(obj), m, a, na, n->line);
        else if (json_is_object(obj) && !strcmp(m, "items")) {
            res = json_array();
            const char *k;
            json_t *v;
            json_object_foreach(obj, k, v) json_array_append_new(res, json_pack("[sO]", k, v));
        } else if (json_is_object(obj) && (!strcmp(m, "keys") || !strcmp(m, "values"))) {
            res = json_array();
            const char *k;
            json_t *v;
            json_object_foreach(obj, k, v) json_array_append_new(res, !strcmp(m, "keys") ? json_string(k) : json_incref(v));
        } else if (json_is_object(obj) && !strcmp(m, "get") && na >= 1 && json_is_string(a[0])) {
            json_t *v = json_object_get(obj, json_string_value(a[0]));
            res = v ? json_incref(v) : na > 1 ? json_incref(a[1]) : json_null();
        } else fail(r, KLD_ERR_UNSUPPORTED, "line %d: unsupported construct: method '%s'", n->line, m);
        json_decref(obj);
    } else {
        fail(r, KLD_ERR_UNSUPPORTED, "line %d: unsupported construct: call of '%s'", n->line,
             fn->kind == E_NAME ? fn->s : "an expression");
    }
    for (size_t k = 0; k < na; k++) json_decref(a[k]);
    json_decref(kw);
    return res;
}

static json_t *filter(rt *r, node *n) {
    json_t *v = eval(r, n->kid[0]);
    json_t *a[4] = {0};
    size_t na = 0;
    for (size_t k = 1; k < n->n_kid && na < 4; k++)
        if (n->kid[k]->kind != E_KWARG) a[na++] = eval(r, n->kid[k]);
    const char *f = n->s;
    json_t *res = NULL;
    if (!strcmp(f, "trim")) {
        char *s = to_str(v);
        res = str_method(r, s ? s : "", "strip", NULL, 0, n->line);
        free(s);
    } else if (!strcmp(f, "length") || !strcmp(f, "count")) {
        res = json_integer((json_int_t)(json_is_string(v) ? json_string_length(v) : json_is_array(v) ? json_array_size(v)
                                        : json_is_object(v) ? json_object_size(v) : 0));
    } else if (!strcmp(f, "upper") || !strcmp(f, "lower") || !strcmp(f, "capitalize")) {
        char *s = to_str(v);
        if (s && !strcmp(f, "capitalize")) {
            for (char *p = s; *p; p++) *p = (char)(p == s ? toupper((unsigned char)*p) : tolower((unsigned char)*p));
            res = json_string(s);
        } else if (s) res = str_method(r, s, f, NULL, 0, n->line);
        free(s);
    } else if (!strcmp(f, "string")) {
        char *s = to_str(v);
        res = s ? json_string(s) : NULL;
        free(s);
    } else if (!strcmp(f, "int")) {
        res = json_integer(json_is_string(v) ? strtoll(json_string_value(v), NULL, 10) : (json_int_t)json_number_value(v));
    } else if (!strcmp(f, "tojson")) {
        size_t flags = JSON_ENCODE_ANY;
        json_t *ind = NULL;
        for (size_t k = 1; k < n->n_kid; k++)
            if (n->kid[k]->kind == E_KWARG && !strcmp(n->kid[k]->s, "indent")) ind = eval(r, n->kid[k]->kid[0]);
        if (ind && json_is_integer(ind)) flags |= JSON_INDENT(json_integer_value(ind));
        json_decref(ind);
        char *s = v ? json_dumps(v, flags) : kld_strdup("null");
        res = s ? json_string(s) : NULL;
        free(s);
    } else if (!strcmp(f, "first") || !strcmp(f, "last")) {
        if (json_is_array(v) && json_array_size(v))
            res = json_incref(json_array_get(v, !strcmp(f, "first") ? 0 : json_array_size(v) - 1));
        else if (json_is_string(v) && json_string_length(v))
            res = json_stringn(json_string_value(v) + (!strcmp(f, "first") ? 0 : json_string_length(v) - 1), 1);
    } else if (!strcmp(f, "join")) {
        const char *sep = na && json_is_string(a[0]) ? json_string_value(a[0]) : "";
        rt tmp = {0};
        tmp.err = r->err;
        for (size_t k = 0; json_is_array(v) && k < json_array_size(v); k++) {
            char *s = to_str(json_array_get(v, k));
            if (k) out_put(&tmp, sep, strlen(sep));
            out_put(&tmp, s ? s : "", s ? strlen(s) : 0);
            free(s);
        }
        res = json_string(tmp.out ? tmp.out : "");
        free(tmp.out);
    } else if (!strcmp(f, "default") || !strcmp(f, "d")) {
        bool boolean = na > 1 && truthy(a[1]);
        res = (v && (!boolean || truthy(v))) ? json_incref(v) : na ? json_incref(a[0]) : json_string("");
    } else if (!strcmp(f, "list")) {
        res = json_is_array(v) ? json_incref(v) : json_array();
    } else if (!strcmp(f, "reverse")) {
        res = json_array();
        for (size_t k = json_is_array(v) ? json_array_size(v) : 0; k > 0; k--) json_array_append(res, json_array_get(v, k - 1));
    } else if (!strcmp(f, "replace") && na == 2) {
        char *s = to_str(v);
        res = str_method(r, s ? s : "", "replace", a, 2, n->line);
        free(s);
    } else if (!strcmp(f, "safe")) {
        res = v ? json_incref(v) : NULL;
    } else {
        fail(r, KLD_ERR_UNSUPPORTED, "line %d: unsupported construct: filter '%s'", n->line, f);
    }
    json_decref(v);
    for (size_t k = 0; k < na; k++) json_decref(a[k]);
    return res;
}

static bool test(rt *r, node *n) {
    const char *t = n->s;
    json_t *v = eval(r, n->kid[0]);
    json_t *arg = n->n_kid > 1 ? eval(r, n->kid[1]) : NULL;
    bool res = false;
    if (!strcmp(t, "defined")) res = v != NULL;
    else if (!strcmp(t, "undefined")) res = v == NULL;
    else if (!strcmp(t, "none")) res = v && json_is_null(v);
    else if (!strcmp(t, "string")) res = json_is_string(v);
    else if (!strcmp(t, "number")) res = json_is_number(v);
    else if (!strcmp(t, "mapping")) res = json_is_object(v);
    else if (!strcmp(t, "sequence") || !strcmp(t, "iterable")) res = json_is_array(v) || json_is_string(v) || (!strcmp(t, "iterable") && json_is_object(v));
    else if (!strcmp(t, "true")) res = json_is_true(v);
    else if (!strcmp(t, "false")) res = json_is_false(v);
    else if (!strcmp(t, "boolean")) res = json_is_boolean(v);
    else if (!strcmp(t, "even") || !strcmp(t, "odd")) res = json_is_integer(v) && (json_integer_value(v) % 2 == 0) == !strcmp(t, "even");
    else if (!strcmp(t, "eq") || !strcmp(t, "equalto") || !strcmp(t, "sameas")) res = v && arg && json_equal(v, arg);
    else fail(r, KLD_ERR_UNSUPPORTED, "line %d: unsupported construct: test '%s'", n->line, t);
    json_decref(v);
    json_decref(arg);
    return n->negate ? !res : res;
}

static bool values_equal(const json_t *a, const json_t *b) {
    if (!a || !b) return a == b;
    if (json_is_number(a) && json_is_number(b)) return json_number_value(a) == json_number_value(b);
    return json_equal(a, b);
}

static json_t *binop(rt *r, node *n) {
    const char *op = n->s;
    json_t *a = eval(r, n->kid[0]);
    if (!strcmp(op, "and") || !strcmp(op, "or")) {
        bool t = truthy(a);
        if (!strcmp(op, "and") ? !t : t) return a;
        json_decref(a);
        return eval(r, n->kid[1]);
    }
    json_t *b = eval(r, n->kid[1]);
    json_t *res = NULL;
    if (!strcmp(op, "==")) res = json_boolean(values_equal(a, b));
    else if (!strcmp(op, "!=")) res = json_boolean(!values_equal(a, b));
    else if (!strcmp(op, "in") || !strcmp(op, "not in")) {
        bool in = false;
        if (json_is_string(b) && json_is_string(a)) in = strstr(json_string_value(b), json_string_value(a)) != NULL;
        else if (json_is_array(b)) {
            for (size_t k = 0; k < json_array_size(b); k++) in |= values_equal(a, json_array_get(b, k));
        } else if (json_is_object(b) && json_is_string(a)) in = json_object_get(b, json_string_value(a)) != NULL;
        res = json_boolean(!strcmp(op, "in") ? in : !in);
    } else if (!strcmp(op, "~")) {
        char *x = to_str(a), *y = to_str(b);
        res = x && y ? json_sprintf("%s%s", x, y) : NULL;
        free(x), free(y);
    } else if (!strcmp(op, "+") && json_is_string(a) && json_is_string(b)) {
        res = json_sprintf("%s%s", json_string_value(a), json_string_value(b));
    } else if (!strcmp(op, "+") && json_is_array(a) && json_is_array(b)) {
        res = json_copy(a);
        json_array_extend(res, b);
    } else if (json_is_number(a) && json_is_number(b)) {
        bool ints = json_is_integer(a) && json_is_integer(b);
        long long x = json_integer_value(a), y = json_integer_value(b);
        double fx = json_number_value(a), fy = json_number_value(b);
        if (!strcmp(op, "<")) res = json_boolean(fx < fy);
        else if (!strcmp(op, ">")) res = json_boolean(fx > fy);
        else if (!strcmp(op, "<=")) res = json_boolean(fx <= fy);
        else if (!strcmp(op, ">=")) res = json_boolean(fx >= fy);
        else if (!strcmp(op, "+")) res = ints ? json_integer(x + y) : json_real(fx + fy);
        else if (!strcmp(op, "-")) res = ints ? json_integer(x - y) : json_real(fx - fy);
        else if (!strcmp(op, "*")) res = ints ? json_integer(x * y) : json_real(fx * fy);
        else if ((!strcmp(op, "/") || !strcmp(op, "//") || !strcmp(op, "%")) && fy == 0)
            fail(r, KLD_ERR_ARG, "line %d: division by zero", n->line);
        else if (!strcmp(op, "/")) res = json_real(fx / fy);
        else if (!strcmp(op, "//")) res = ints ? json_integer((x - ((x % y + y) % y)) / y) : json_real(floor(fx / fy));
        else if (!strcmp(op, "%")) res = ints ? json_integer((x % y + y) % y) : json_real(fx - floor(fx / fy) * fy);
    } else if ((!strcmp(op, "<") || !strcmp(op, ">") || !strcmp(op, "<=") || !strcmp(op, ">=")) &&
               json_is_string(a) && json_is_string(b)) {
        int c = strcmp(json_string_value(a), json_string_value(b));
        res = json_boolean(!strcmp(op, "<") ? c < 0 : !strcmp(op, ">") ? c > 0 : !strcmp(op, "<=") ? c <= 0 : c >= 0);
    } else if (!strcmp(op, "*") && json_is_string(a) && json_is_integer(b)) {
        rt tmp = {0};
        tmp.err = r->err;
        for (long long k = 0; k < json_integer_value(b) && k < 100000; k++) out_put(&tmp, json_string_value(a), json_string_length(a));
        res = json_string(tmp.out ? tmp.out : "");
        free(tmp.out);
    } else {
        fail(r, KLD_ERR_UNSUPPORTED, "line %d: unsupported construct: operator '%s' on these operands", n->line, op);
    }
    json_decref(a);
    json_decref(b);
    return res;
}

static json_t *eval(rt *r, node *n) {
    if (!n || r->st != KLD_OK) return NULL;
    switch (n->kind) {
    case E_LIT: return json_incref(n->lit);
    case E_NAME: {
        if (is_undef_name(n)) return NULL;
        json_t *v = json_object_get(r->vars, n->s);
        return v ? json_incref(v) : NULL;
    }
    case E_ATTR:
    case E_ITEM: {
        json_t *o = eval(r, n->kid[0]);
        json_t *res = NULL;
        json_t *key = n->kind == E_ITEM ? eval(r, n->kid[1]) : json_string(n->s);
        if (json_is_object(o) && json_is_string(key)) {
            json_t *v = json_object_get(o, json_string_value(key));
            res = v ? json_incref(v) : NULL;
        } else if ((json_is_array(o) || json_is_string(o)) && json_is_integer(key)) {
            long long i = json_integer_value(key);
            long long len = json_is_array(o) ? (long long)json_array_size(o) : (long long)json_string_length(o);
            if (i < 0) i += len;
            if (i >= 0 && i < len)
                res = json_is_array(o) ? json_incref(json_array_get(o, (size_t)i)) : json_stringn(json_string_value(o) + i, 1);
        }
        json_decref(o);
        json_decref(key);
        return res;
    }
    case E_SLICE: {
        json_t *o = eval(r, n->kid[0]);
        json_t *lo = eval(r, n->kid[1]), *hi = eval(r, n->kid[2]), *st = eval(r, n->kid[3]);
        json_t *res = NULL;
        long long len = json_is_array(o) ? (long long)json_array_size(o) : json_is_string(o) ? (long long)json_string_length(o) : -1;
        long long step = json_is_integer(st) ? json_integer_value(st) : 1;
        if (len >= 0 && step != 0) {
            long long b = json_is_integer(lo) ? json_integer_value(lo) : (step > 0 ? 0 : len - 1);
            long long e = json_is_integer(hi) ? json_integer_value(hi) : (step > 0 ? len : -len - 1);
            if (json_is_integer(lo) && b < 0) b += len;
            if (json_is_integer(hi) && e < 0) e += len;
            if (step > 0) {
                b = b < 0 ? 0 : b > len ? len : b;
                e = e < 0 ? 0 : e > len ? len : e;
            } else {
                b = b >= len ? len - 1 : b;
                e = e < -1 ? -1 : e;
            }
            rt tmp = {0};
            tmp.err = r->err;
            res = json_is_array(o) ? json_array() : NULL;
            for (long long i = b; step > 0 ? i < e : i > e; i += step) {
                if (json_is_array(o)) json_array_append(res, json_array_get(o, (size_t)i));
                else out_put(&tmp, json_string_value(o) + i, 1);
            }
            if (!json_is_array(o)) res = json_string(tmp.out ? tmp.out : "");
            free(tmp.out);
        }
        json_decref(o), json_decref(lo), json_decref(hi), json_decref(st);
        return res;
    }
    case E_CALL: return call(r, n);
    case E_FILTER: return filter(r, n);
    case E_TEST: return json_boolean(test(r, n));
    case E_BIN: return binop(r, n);
    case E_NOT: {
        json_t *v = eval(r, n->kid[0]);
        bool t = truthy(v);
        json_decref(v);
        return json_boolean(!t);
    }
    case E_NEG: {
        json_t *v = eval(r, n->kid[0]);
        json_t *res = json_is_integer(v) ? json_integer(-json_integer_value(v)) : json_is_real(v) ? json_real(-json_real_value(v)) : NULL;
        json_decref(v);
        return res;
    }
    case E_COND: {
        json_t *c = eval(r, n->kid[1]);
        bool t = truthy(c);
        json_decref(c);
        return eval(r, n->kid[t ? 0 : 2]);
    }
    case E_LIST: {
        json_t *l = json_array();
        for (size_t k = 0; k < n->n_kid; k++) {
            json_t *v = eval(r, n->kid[k]);
            json_array_append_new(l, v ? v : json_null());
        }
        return l;
    }
    case E_DICT: {
        json_t *d = json_object();
        for (size_t k = 0; k + 1 < n->n_kid; k += 2) {
            json_t *key = eval(r, n->kid[k]), *v = eval(r, n->kid[k + 1]);
            char *ks = to_str(key);
            if (ks) json_object_set_new(d, ks, v ? v : json_null());
            else json_decref(v);
            free(ks);
            json_decref(key);
        }
        return d;
    }
    default: return NULL;
    }
}

static void exec_body(rt *r, node *b);

static void exec(rt *r, node *n) {
    if (r->st != KLD_OK) return;
    switch (n->kind) {
    case N_TEXT: out_put(r, n->s, strlen(n->s)); break;
    case N_OUT: {
        json_t *v = eval(r, n->kid[0]);
        char *s = to_str(v);
        if (s) out_put(r, s, strlen(s));
        free(s);
        json_decref(v);
        break;
    }
    case N_IF:
        for (size_t k = 0; k + 1 < n->n_kid; k += 2) {
            json_t *c = eval(r, n->kid[k]);
            bool t = truthy(c);
            json_decref(c);
            if (t) {
                exec_body(r, n->kid[k + 1]);
                break;
            }
        }
        break;
    case N_FOR: {
        json_t *it = eval(r, n->kid[2]);
        json_t *items = NULL;
        if (json_is_array(it)) items = json_incref(it);
        else if (json_is_object(it)) { /* iterating a dict gives its keys */
            items = json_array();
            const char *k;
            json_t *v;
            json_object_foreach(it, k, v) json_array_append_new(items, json_string(k));
        } else if (json_is_string(it)) {
            items = json_array();
            for (size_t k = 0; k < json_string_length(it); k++) json_array_append_new(items, json_stringn(json_string_value(it) + k, 1));
        } else items = json_array();
        json_decref(it);
        size_t len = json_array_size(items);
        json_t *saved = json_copy(r->vars); /* the loop has its own scope */
        for (size_t k = 0; k < len && r->st == KLD_OK; k++) {
            json_t *x = json_array_get(items, k);
            if (n->kid[1]->s[0]) { /* for a, b in pairs */
                json_object_set(r->vars, n->kid[0]->s, json_array_get(x, 0));
                json_object_set(r->vars, n->kid[1]->s, json_array_get(x, 1));
            } else json_object_set(r->vars, n->kid[0]->s, x);
            json_object_set_new(r->vars, "loop",
                                json_pack("{s:I, s:I, s:b, s:b, s:I, s:I, s:I}", "index", (json_int_t)k + 1, "index0",
                                          (json_int_t)k, "first", k == 0, "last", k + 1 == len, "length",
                                          (json_int_t)len, "revindex", (json_int_t)(len - k), "revindex0",
                                          (json_int_t)(len - k - 1)));
            exec_body(r, n->kid[3]);
        }
        if (len == 0 && n->n_kid > 4) exec_body(r, n->kid[4]);
        /* restore the outer scope, keeping namespace objects' changes (they
         * are shared references) */
        json_decref(r->vars);
        r->vars = saved;
        json_decref(items);
        break;
    }
    case N_SET: {
        json_t *v = eval(r, n->kid[1]);
        if (n->kid[0]->s[0]) {
            json_t *ns = json_object_get(r->vars, n->s);
            if (!json_is_object(ns)) fail(r, KLD_ERR_ARG, "line %d: '%s' is not a namespace", n->line, n->s);
            else json_object_set(ns, n->kid[0]->s, v ? v : json_null());
        } else json_object_set(r->vars, n->s, v ? v : json_null());
        json_decref(v);
        break;
    }
    case N_BODY: exec_body(r, n); break;
    default: break;
    }
}

static void exec_body(rt *r, node *b) {
    for (size_t k = 0; b && k < b->n_kid && r->st == KLD_OK; k++) exec(r, b->kid[k]);
}

kld_status kld_chat_render(const char *tmpl, const kld_chat_opts *opts, char **out, kld_error *err) {
    *out = NULL;
    rt r = {0};
    r.err = err;
    node *root = NULL;
    if (lex(&r, tmpl)) root = body(&r, NULL);
    if (r.st == KLD_OK) {
        r.vars = opts->extra && json_is_object(opts->extra) ? json_deep_copy(opts->extra) : json_object();
        json_object_set(r.vars, "messages", opts->messages ? (json_t *)opts->messages : json_array());
        json_object_set_new(r.vars, "add_generation_prompt", json_boolean(opts->add_generation_prompt));
        json_object_set_new(r.vars, "bos_token", json_string(opts->bos_token ? opts->bos_token : ""));
        json_object_set_new(r.vars, "eos_token", json_string(opts->eos_token ? opts->eos_token : ""));
        out_put(&r, "", 0);
        exec_body(&r, root);
        json_decref(r.vars);
    }
    node_free(root);
    for (size_t i = 0; i < r.n; i++) free(r.t[i].s);
    free(r.t);
    if (r.st != KLD_OK) {
        free(r.out);
        return r.st;
    }
    *out = r.out;
    return KLD_OK;
}

bool kld_chat_has_bos(const char *rendered, const char *bos_token) {
    return bos_token && *bos_token && !strncmp(rendered, bos_token, strlen(bos_token));
}
