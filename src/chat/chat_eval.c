/* chat_eval.c — the evaluator of chat templates (see chat.h): walks the
 * node tree chat_parse.c builds over jansson values (NULL stands for
 * undefined) and renders the messages. */
#include "chat/chat_internal.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

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
            kld_chat_fail(r, KLD_ERR_NOMEM, "out of memory");
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
        if (sep && !*sep) return json_decref(l), kld_chat_fail(r, KLD_ERR_ARG, "line %d: split with an empty separator", line), NULL;
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
    return kld_chat_fail(r, KLD_ERR_UNSUPPORTED, "line %d: unsupported construct: string method '%s'", line, m), NULL;
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
        kld_chat_fail(r, KLD_ERR_ARG, "raise_exception: %s", msg ? msg : "");
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
        } else kld_chat_fail(r, KLD_ERR_UNSUPPORTED, "line %d: unsupported construct: method '%s'", n->line, m);
        json_decref(obj);
    } else {
        kld_chat_fail(r, KLD_ERR_UNSUPPORTED, "line %d: unsupported construct: call of '%s'", n->line,
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
        kld_chat_fail(r, KLD_ERR_UNSUPPORTED, "line %d: unsupported construct: filter '%s'", n->line, f);
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
    else kld_chat_fail(r, KLD_ERR_UNSUPPORTED, "line %d: unsupported construct: test '%s'", n->line, t);
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
            kld_chat_fail(r, KLD_ERR_ARG, "line %d: division by zero", n->line);
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
        kld_chat_fail(r, KLD_ERR_UNSUPPORTED, "line %d: unsupported construct: operator '%s' on these operands", n->line, op);
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
            if (!json_is_object(ns)) kld_chat_fail(r, KLD_ERR_ARG, "line %d: '%s' is not a namespace", n->line, n->s);
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
    root = kld_chat_parse(&r, tmpl);
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
    kld_chat_node_free(root);
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
