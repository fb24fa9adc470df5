/* chat_parse.c — the Jinja-subset template parser behind chat templates
 * (see chat.h): the lexer splits the template into text and tags (applying
 * -, trim_blocks and lstrip_blocks) and tokenizes the tags; a recursive
 * descent parser builds a node tree with Jinja's precedence. */
#include "chat/chat_internal.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

bool kld_chat_fail(rt *r, kld_status st, const char *fmt, ...) {
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
        if (!nt) return kld_chat_fail(r, KLD_ERR_NOMEM, "out of memory");
        r->t = nt;
        r->cap = c;
    }
    tok *t = &r->t[r->n++];
    memset(t, 0, sizeof *t);
    t->kind = k;
    t->line = line;
    if (s && !(t->s = kld_strndup(s, n))) return kld_chat_fail(r, KLD_ERR_NOMEM, "out of memory");
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
            if (!b) return kld_chat_fail(r, KLD_ERR_NOMEM, "out of memory");
            for (; j < n && s[j] != c; j++) {
                if (s[j] == '\\' && j + 1 < n) {
                    char e = s[++j];
                    b[o++] = e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
                } else b[o++] = s[j];
            }
            if (j >= n) {
                free(b);
                return kld_chat_fail(r, KLD_ERR_FORMAT, "line %d: unterminated string", line);
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
            if (!ops[k]) return kld_chat_fail(r, KLD_ERR_FORMAT, "line %d: unexpected character '%c'", line, c);
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
        if (!c) return kld_chat_fail(r, KLD_ERR_FORMAT, "line %d: unclosed '{%c'", line, kind);
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

void kld_chat_node_free(node *n) {
    if (!n) return;
    for (size_t i = 0; i < n->n_kid; i++) kld_chat_node_free(n->kid[i]);
    free(n->kid);
    free(n->s);
    json_decref(n->lit);
    free(n);
}

static node *mk(rt *r, node_kind k, const char *s) {
    node *n = calloc(1, sizeof *n);
    if (!n || (s && !(n->s = kld_strdup(s)))) {
        free(n);
        kld_chat_fail(r, KLD_ERR_NOMEM, "out of memory");
        return NULL;
    }
    n->kind = k;
    n->line = r->t[r->pos < r->n ? r->pos : r->n - 1].line;
    return n;
}

static bool add(rt *r, node *parent, node *kid) {
    if (!parent || !kid) {
        kld_chat_node_free(kid);
        return false;
    }
    node **nk = realloc(parent->kid, (parent->n_kid + 1) * sizeof *nk);
    if (!nk) {
        kld_chat_node_free(kid);
        return kld_chat_fail(r, KLD_ERR_NOMEM, "out of memory");
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
    return kld_chat_fail(r, KLD_ERR_FORMAT, "line %d: expected '%s', found '%s'", cur(r)->line, op,
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
        if (!expect_op(r, ")")) return kld_chat_node_free(n), NULL;
    } else if (accept_op(r, "[")) {
        n = mk(r, E_LIST, NULL);
        while (n && !is_op(r, "]") && r->st == KLD_OK) {
            add(r, n, expr(r));
            if (!accept_op(r, ",")) break;
        }
        if (!expect_op(r, "]")) return kld_chat_node_free(n), NULL;
    } else if (accept_op(r, "{")) {
        n = mk(r, E_DICT, NULL);
        while (n && !is_op(r, "}") && r->st == KLD_OK) {
            add(r, n, expr(r));
            expect_op(r, ":");
            add(r, n, expr(r));
            if (!accept_op(r, ",")) break;
        }
        if (!expect_op(r, "}")) return kld_chat_node_free(n), NULL;
    } else {
        kld_chat_fail(r, KLD_ERR_FORMAT, "line %d: unexpected '%s' in an expression", t->line,
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
            if (cur(r)->kind != T_NAME) return kld_chat_node_free(n), kld_chat_fail(r, KLD_ERR_FORMAT, "line %d: a name must follow '.'", cur(r)->line), NULL;
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
                kld_chat_node_free(lo), kld_chat_node_free(hi), kld_chat_node_free(step), kld_chat_node_free(n);
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
            if (cur(r)->kind != T_NAME) return kld_chat_node_free(n), kld_chat_fail(r, KLD_ERR_FORMAT, "line %d: a filter name must follow '|'", cur(r)->line), NULL;
            node *f = mk(r, E_FILTER, cur(r)->s);
            r->pos++;
            add(r, f, n);
            if (accept_op(r, "(")) call_args(r, f);
            n = f;
        } else if (accept_name(r, "is")) {
            bool neg = accept_name(r, "not");
            if (cur(r)->kind != T_NAME) return kld_chat_node_free(n), kld_chat_fail(r, KLD_ERR_FORMAT, "line %d: a test name must follow 'is'", cur(r)->line), NULL;
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
    if (++r->depth > 200) return kld_chat_fail(r, KLD_ERR_FORMAT, "expression nested too deeply"), NULL;
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
    return kld_chat_fail(r, KLD_ERR_FORMAT, "line %d: expected the end of the tag, found '%s'", cur(r)->line,
                cur(r)->s ? cur(r)->s : "?");
}

static node *statement(rt *r) {
    tok *t = cur(r);
    if (t->kind != T_NAME) return kld_chat_fail(r, KLD_ERR_FORMAT, "line %d: a tag must start with a keyword", t->line), NULL;
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
                kld_chat_fail(r, KLD_ERR_FORMAT, "line %d: unclosed if", t->line);
                break;
            }
        }
        return n;
    }
    if (accept_name(r, "for")) {
        node *n = mk(r, N_FOR, NULL);
        if (cur(r)->kind != T_NAME) return kld_chat_node_free(n), kld_chat_fail(r, KLD_ERR_FORMAT, "line %d: for needs a name", t->line), NULL;
        add(r, n, mk(r, E_NAME, cur(r)->s));
        r->pos++;
        if (accept_op(r, ",")) { /* for k, v in ... */
            add(r, n, mk(r, E_NAME, cur(r)->s));
            r->pos++;
        } else add(r, n, mk(r, E_NAME, ""));
        if (!accept_name(r, "in")) return kld_chat_node_free(n), kld_chat_fail(r, KLD_ERR_FORMAT, "line %d: for needs 'in'", t->line), NULL;
        add(r, n, or_expr(r));
        if (accept_name(r, "if")) return kld_chat_node_free(n), kld_chat_fail(r, KLD_ERR_UNSUPPORTED, "line %d: unsupported construct 'for … if' (loop filter)", t->line), NULL;
        if (accept_name(r, "recursive")) return kld_chat_node_free(n), kld_chat_fail(r, KLD_ERR_UNSUPPORTED, "line %d: unsupported construct 'recursive' loop", t->line), NULL;
        end_tag(r);
        static const char *const ends[] = {"else", "endfor", NULL};
        add(r, n, body(r, ends));
        if (accept_name(r, "else")) {
            end_tag(r);
            static const char *const e2[] = {"endfor", NULL};
            add(r, n, body(r, e2));
        }
        if (!accept_name(r, "endfor")) return kld_chat_node_free(n), kld_chat_fail(r, KLD_ERR_FORMAT, "line %d: unclosed for", t->line), NULL;
        end_tag(r);
        return n;
    }
    if (accept_name(r, "set")) {
        if (cur(r)->kind != T_NAME) return kld_chat_fail(r, KLD_ERR_FORMAT, "line %d: set needs a name", t->line), NULL;
        node *n = mk(r, N_SET, cur(r)->s);
        r->pos++;
        if (accept_op(r, ".")) { /* ns.attr = value */
            add(r, n, mk(r, E_NAME, cur(r)->s));
            r->pos++;
        } else add(r, n, mk(r, E_NAME, ""));
        if (!accept_op(r, "=")) return kld_chat_node_free(n), kld_chat_fail(r, KLD_ERR_UNSUPPORTED, "line %d: unsupported construct 'set' block (without '=')", t->line), NULL;
        add(r, n, expr(r));
        end_tag(r);
        return n;
    }
    return kld_chat_fail(r, KLD_ERR_UNSUPPORTED, "line %d: unsupported construct '%s'", t->line, t->s), NULL;
}

/* Nodes until a block tag whose keyword is in enders (left unconsumed,
 * after its '{%'), or the end of the template when enders is NULL. */
static node *body(rt *r, const char *const *enders) {
    node *b = mk(r, N_BODY, NULL);
    while (b && r->st == KLD_OK) {
        tok *t = cur(r);
        if (t->kind == T_EOF) {
            if (enders) { /* the block's closer is the last of its enders */
                int k = 0;
                while (enders[k + 1]) k++;
                kld_chat_fail(r, KLD_ERR_FORMAT, "unexpected end of template: missing '{%% %s %%}'", enders[k]);
            }
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
            if (cur(r)->kind != T_VAR_END) kld_chat_fail(r, KLD_ERR_FORMAT, "line %d: expected '}}', found '%s'", cur(r)->line, cur(r)->s ? cur(r)->s : "?");
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
            kld_chat_fail(r, KLD_ERR_FORMAT, "line %d: unexpected token", t->line);
        }
    }
    return b;
}

node *kld_chat_parse(rt *r, const char *tmpl) {
    return lex(r, tmpl) ? body(r, NULL) : NULL;
}
