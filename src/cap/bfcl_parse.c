/* bfcl_parse.c — parses BFCL prompting-mode output, Python call syntax
 * `[f(a=1, b="x"), g(c=[1, 2])]`, into JSON ({name: {param: value}}), and
 * the literal syntaxes values take: Python (True/None, tuples, dicts),
 * JavaScript (true/null, object literals with bare keys) and the Java
 * forms BFCL's Java answers use (new ArrayList<>(Arrays.asList(...)),
 * List.of, new int[]{...}, new HashMap<>() {{ put(k, v); }}, Map.of). */
#include "cap/cap.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct parser {
    const char *s;
    size_t i, n;
    int depth;
} parser;

static void ws(parser *p) {
    while (p->i < p->n && isspace((unsigned char)p->s[p->i])) p->i++;
}
static bool eat(parser *p, char c) {
    ws(p);
    if (p->i < p->n && p->s[p->i] == c) {
        p->i++;
        return true;
    }
    return false;
}
static bool is_ident_start(char c) { return isalpha((unsigned char)c) || c == '_' || c == '$'; }
static bool is_ident(char c) { return isalnum((unsigned char)c) || c == '_' || c == '$'; }

static json_t *value(parser *p);

static json_t *string_lit(parser *p) {
    char q = p->s[p->i];
    bool triple = p->i + 2 < p->n && p->s[p->i + 1] == q && p->s[p->i + 2] == q;
    p->i += triple ? 3 : 1;
    size_t cap = 64, n = 0;
    char *b = malloc(cap);
    if (!b) return NULL;
    for (;;) {
        if (p->i >= p->n) return free(b), NULL;
        char c = p->s[p->i];
        if (c == q && (!triple || (p->i + 2 < p->n && p->s[p->i + 1] == q && p->s[p->i + 2] == q))) {
            p->i += triple ? 3 : 1;
            break;
        }
        if (c == '\\' && p->i + 1 < p->n) {
            char e = p->s[++p->i];
            switch (e) {
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'r': c = '\r'; break;
            case '0': c = '\0'; break;
            default: c = e; break; /* \\ \' \" and anything else literally */
            }
        }
        if (n + 2 > cap) {
            char *nb = realloc(b, cap *= 2);
            if (!nb) return free(b), NULL;
            b = nb;
        }
        b[n++] = c;
        p->i++;
    }
    json_t *v = json_stringn(b, n);
    free(b);
    return v;
}

static json_t *number_lit(parser *p) {
    size_t st = p->i;
    if (p->s[p->i] == '-' || p->s[p->i] == '+') p->i++;
    bool flt = false;
    while (p->i < p->n && (isalnum((unsigned char)p->s[p->i]) || p->s[p->i] == '.' ||
                           ((p->s[p->i] == '-' || p->s[p->i] == '+') &&
                            (p->s[p->i - 1] == 'e' || p->s[p->i - 1] == 'E')))) {
        if (p->s[p->i] == '.' || p->s[p->i] == 'e' || p->s[p->i] == 'E') flt = true;
        p->i++;
    }
    char buf[64];
    size_t l = p->i - st;
    if (l == 0 || l >= sizeof buf) return NULL;
    memcpy(buf, p->s + st, l);
    buf[l] = '\0';
    /* Java suffixes: 10L, 1.5f, 2.0d */
    if (l > 1 && strchr("lLfFdD", buf[l - 1]) && !(buf[1] == 'x' || buf[1] == 'X')) {
        if (strchr("fFdD", buf[l - 1])) flt = true;
        buf[--l] = '\0';
    }
    char *e;
    if (!flt) {
        long long v = strtoll(buf, &e, 0);
        if (*e == '\0') return json_integer(v);
    }
    double d = strtod(buf, &e);
    if (*e != '\0') return NULL;
    return json_real(d);
}

/* Items until `close`, each a value; returns an array. */
static json_t *seq(parser *p, char close) {
    json_t *arr = json_array();
    if (!arr) return NULL;
    if (eat(p, close)) return arr;
    for (;;) {
        json_t *v = value(p);
        if (!v || json_array_append_new(arr, v)) return json_decref(arr), NULL;
        if (eat(p, ',')) {
            if (eat(p, close)) return arr; /* trailing comma */
            continue;
        }
        if (eat(p, close)) return arr;
        return json_decref(arr), NULL;
    }
}

static json_t *dict_lit(parser *p) {
    json_t *obj = json_object();
    if (!obj) return NULL;
    if (eat(p, '}')) return obj;
    for (;;) {
        ws(p);
        json_t *k = NULL;
        if (p->i < p->n && is_ident_start(p->s[p->i])) { /* JS bare key */
            size_t st = p->i;
            while (p->i < p->n && is_ident(p->s[p->i])) p->i++;
            k = json_stringn(p->s + st, p->i - st);
        } else k = value(p);
        if (!k || !eat(p, ':')) return json_decref(k), json_decref(obj), NULL;
        json_t *v = value(p);
        char kb[64];
        const char *key = json_is_string(k) ? json_string_value(k) : NULL;
        if (!key && json_is_integer(k)) {
            snprintf(kb, sizeof kb, "%lld", (long long)json_integer_value(k));
            key = kb;
        }
        if (!v || !key || json_object_set_new(obj, key, v)) {
            json_decref(k);
            json_decref(obj);
            return NULL;
        }
        json_decref(k);
        if (eat(p, ',')) {
            if (eat(p, '}')) return obj;
            continue;
        }
        if (eat(p, '}')) return obj;
        return json_decref(obj), NULL;
    }
}

/* Java `new HashMap<..>() {{ put(k, v); put(k2, v2); }}` after the `()`. */
static json_t *java_map_body(parser *p) {
    json_t *obj = json_object();
    if (!obj || !eat(p, '{') || !eat(p, '{')) return json_decref(obj), NULL;
    for (;;) {
        if (eat(p, '}')) {
            if (!eat(p, '}')) break;
            return obj;
        }
        ws(p);
        if (strncmp(p->s + p->i, "put", 3)) break;
        p->i += 3;
        if (!eat(p, '(')) break;
        json_t *k = value(p);
        if (!k || !eat(p, ',')) {
            json_decref(k);
            break;
        }
        json_t *v = value(p);
        if (!v || !eat(p, ')') || !json_is_string(k) ||
            json_object_set_new(obj, json_string_value(k), v)) {
            json_decref(k);
            break;
        }
        json_decref(k);
        eat(p, ';');
    }
    json_decref(obj);
    return NULL;
}

/* An identifier chain (a.b.c), maybe called or generic: true/false/None/
 * null, Java constructors and list factories, else its source text. */
static json_t *ident_expr(parser *p) {
    size_t st = p->i;
    while (p->i < p->n && (is_ident(p->s[p->i]) || p->s[p->i] == '.')) p->i++;
    size_t l = p->i - st;
    const char *w = p->s + st;
#define IS(lit) (l == strlen(lit) && !strncmp(w, lit, l))
    if (IS("True") || IS("true")) return json_true();
    if (IS("False") || IS("false")) return json_false();
    if (IS("None") || IS("null") || IS("undefined")) return json_null();
    if (IS("new")) {
        ws(p);
        size_t ts = p->i;
        while (p->i < p->n && (is_ident(p->s[p->i]) || p->s[p->i] == '.')) p->i++;
        size_t tl = p->i - ts;
        const char *tn = p->s + ts;
        ws(p);
        if (p->i < p->n && p->s[p->i] == '<') { /* generic arguments */
            int d = 0;
            while (p->i < p->n) {
                if (p->s[p->i] == '<') d++;
                if (p->s[p->i] == '>' && --d == 0) {
                    p->i++;
                    break;
                }
                p->i++;
            }
        }
        ws(p);
        if (p->i < p->n && p->s[p->i] == '[') { /* new int[]{1, 2} */
            while (p->i < p->n && p->s[p->i] != '{') p->i++;
            if (!eat(p, '{')) return NULL;
            return seq(p, '}');
        }
        if (!eat(p, '(')) return NULL;
        bool is_map = tl >= 3 && !strncmp(tn + tl - 3, "Map", 3);
        json_t *args = seq(p, ')');
        if (!args) return NULL;
        if (is_map) {
            json_decref(args);
            size_t save = p->i;
            json_t *m = java_map_body(p);
            if (m) return m;
            p->i = save;
            return json_object();
        }
        /* new ArrayList<>(Arrays.asList(...)) → the inner list */
        if (json_array_size(args) == 1 && json_is_array(json_array_get(args, 0))) {
            json_t *inner = json_incref(json_array_get(args, 0));
            json_decref(args);
            return inner;
        }
        if (json_array_size(args) == 1) { /* new Integer(5), new String("x") */
            json_t *inner = json_incref(json_array_get(args, 0));
            json_decref(args);
            return inner;
        }
        return args;
    }
    ws(p);
    if (p->i < p->n && p->s[p->i] == '(') {
        p->i++;
        json_t *args = seq(p, ')');
        if (!args) return NULL;
        bool list = (l >= 6 && !strncmp(w + l - 6, "asList", 6)) || (l >= 7 && !strncmp(w + l - 7, "List.of", 7)) ||
                    (l >= 6 && !strncmp(w + l - 6, "Set.of", 6)) || IS("list") || IS("tuple");
        if (list) {
            if ((IS("list") || IS("tuple")) && json_array_size(args) == 1 &&
                json_is_array(json_array_get(args, 0))) {
                json_t *inner = json_incref(json_array_get(args, 0));
                json_decref(args);
                return inner;
            }
            return args;
        }
        if (l >= 6 && !strncmp(w + l - 6, "Map.of", 6)) {
            json_t *obj = json_object();
            for (size_t k = 0; obj && k + 1 < json_array_size(args); k += 2) {
                json_t *key = json_array_get(args, k);
                if (json_is_string(key))
                    json_object_set(obj, json_string_value(key), json_array_get(args, k + 1));
            }
            json_decref(args);
            return obj;
        }
        json_decref(args);
        return json_stringn(w, p->i - st); /* some other call: its text */
    }
#undef IS
    return json_stringn(w, l); /* a variable name stands for itself */
}

static json_t *value(parser *p) {
    ws(p);
    if (p->i >= p->n || ++p->depth > 64) return NULL;
    json_t *v = NULL;
    char c = p->s[p->i];
    if (c == '"' || c == '\'') v = string_lit(p);
    else if (c == '[') {
        p->i++;
        v = seq(p, ']');
    } else if (c == '(') {
        p->i++;
        v = seq(p, ')');
    } else if (c == '{') {
        p->i++;
        v = dict_lit(p);
    } else if (isdigit((unsigned char)c) || ((c == '-' || c == '+' || c == '.') && p->i + 1 < p->n &&
                                             (isdigit((unsigned char)p->s[p->i + 1]) || p->s[p->i + 1] == '.')))
        v = number_lit(p);
    else if (is_ident_start(c)) v = ident_expr(p);
    p->depth--;
    return v;
}

/* name(k=v, ...) → {name: {k: v}} */
static json_t *call(parser *p) {
    ws(p);
    size_t st = p->i;
    if (p->i >= p->n || !is_ident_start(p->s[p->i])) return NULL;
    while (p->i < p->n && (is_ident(p->s[p->i]) || p->s[p->i] == '.')) p->i++;
    json_t *name = json_stringn(p->s + st, p->i - st);
    json_t *args = json_object();
    if (!name || !args || !eat(p, '(')) goto fail;
    if (!eat(p, ')'))
        for (;;) {
            ws(p);
            size_t ks = p->i;
            while (p->i < p->n && is_ident(p->s[p->i])) p->i++;
            if (p->i == ks) goto fail;
            char key[256];
            size_t kl = p->i - ks;
            if (kl >= sizeof key) goto fail;
            memcpy(key, p->s + ks, kl);
            key[kl] = '\0';
            if (!eat(p, '=')) goto fail; /* positional arguments are not accepted */
            json_t *v = value(p);
            if (!v || json_object_get(args, key) || json_object_set_new(args, key, v)) {
                json_decref(v);
                goto fail;
            }
            if (eat(p, ',')) {
                if (eat(p, ')')) break;
                continue;
            }
            if (eat(p, ')')) break;
            goto fail;
        }
    json_t *out = json_object();
    if (!out || json_object_set_new(out, json_string_value(name), args)) {
        json_decref(out);
        args = NULL;
        goto fail;
    }
    json_decref(name);
    return out;
fail:
    json_decref(name);
    json_decref(args);
    return NULL;
}

json_t *kld_bfcl_parse_calls(const char *text) {
    /* Markdown fences around the answer are common; look inside them. */
    const char *s = text, *e = text + strlen(text);
    const char *f = strstr(text, "```");
    if (f) {
        const char *nl = strchr(f + 3, '\n');
        const char *g = nl ? strstr(nl + 1, "```") : NULL;
        if (nl && g) {
            s = nl + 1;
            e = g;
        }
    }
    parser p = {s, 0, (size_t)(e - s), 0};
    json_t *calls = json_array();
    if (!calls) return NULL;
    ws(&p);
    bool bracket = eat(&p, '[');
    for (;;) {
        json_t *c = call(&p);
        if (!c || json_array_append_new(calls, c)) return json_decref(calls), NULL;
        if (eat(&p, ',') || eat(&p, ';')) {
            if (bracket && eat(&p, ']')) break;
            continue;
        }
        if (bracket && !eat(&p, ']')) return json_decref(calls), NULL;
        break;
    }
    ws(&p);
    if (p.i != p.n) return json_decref(calls), NULL; /* trailing text */
    return calls;
}

json_t *kld_bfcl_parse_value(const char *text) {
    parser p = {text, 0, strlen(text), 0};
    json_t *v = value(&p);
    ws(&p);
    if (v && p.i != p.n) {
        json_decref(v);
        return NULL;
    }
    return v;
}
