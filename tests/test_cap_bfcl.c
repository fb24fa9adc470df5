/* test_cap_bfcl.c — the BFCL checker on the shipped v4 categories: a call
 * rendered from each possible answer (Python syntax; Java/JavaScript
 * values as source-text strings) is accepted, with every optional
 * parameter given and with them all omitted; mutated calls (another
 * function name, a required parameter dropped, a value changed, an
 * unknown parameter) are rejected; and the call parser on hand-written
 * outputs. */
#include "cap/cap.h"
#include "testlib.h"

#include <stdlib.h>

#define BFCL KT_SHARED "/capability/bfcl"

typedef struct buf {
    char *s;
    size_t n, cap;
} buf;

static void put(buf *b, const char *s) {
    size_t l = strlen(s);
    if (b->n + l + 1 > b->cap) {
        b->cap = (b->n + l + 1) * 2;
        b->s = realloc(b->s, b->cap);
    }
    memcpy(b->s + b->n, s, l + 1);
    b->n += l;
}

static void put_str_lit(buf *b, const char *s) {
    put(b, "\"");
    for (const char *p = s; *p; p++) {
        char c[3] = {*p, 0, 0};
        if (*p == '"' || *p == '\\') c[0] = '\\', c[1] = *p;
        else if (*p == '\n') c[0] = '\\', c[1] = 'n';
        put(b, c);
    }
    put(b, "\"");
}

static const json_t *first_value(const json_t *acc) {
    size_t i;
    json_t *a;
    json_array_foreach(acc, i, a) if (!(json_is_string(a) && json_string_length(a) == 0)) return a;
    return NULL;
}

/* Python type of a possible answer against the documented type: one data
 * entry (simple_python_307, venue: string, answer true) contradicts its
 * documentation, and the checker's type check rejects it as it would a
 * model's; such values are not rendered. */
static bool fits(const json_t *v, const char *type, int lang) {
    if (lang || !type) return true;
    if (!strcmp(type, "string")) return json_is_string(v);
    if (!strcmp(type, "integer")) return json_is_integer(v) || json_is_string(v);
    if (!strcmp(type, "boolean")) return json_is_boolean(v) || json_is_string(v);
    return true;
}

static const json_t *fitting_value(const json_t *acc, const char *type, int lang) {
    size_t i;
    json_t *a;
    json_array_foreach(acc, i, a) if (!(json_is_string(a) && json_string_length(a) == 0) && fits(a, type, lang)) return a;
    return NULL;
}

/* lang: 0 python, 1 java, 2 javascript */
static void render(buf *b, const json_t *v, int lang) {
    char num[64];
    if (json_is_string(v)) put_str_lit(b, json_string_value(v));
    else if (json_is_integer(v)) {
        snprintf(num, sizeof num, "%lld", (long long)json_integer_value(v));
        put(b, num);
    } else if (json_is_real(v)) {
        snprintf(num, sizeof num, "%.17g", json_real_value(v));
        if (!strpbrk(num, ".eE")) strcat(num, ".0");
        put(b, num);
    } else if (json_is_boolean(v)) put(b, lang ? (json_is_true(v) ? "true" : "false") : (json_is_true(v) ? "True" : "False"));
    else if (json_is_null(v)) put(b, lang ? "null" : "None");
    else if (json_is_array(v)) {
        put(b, lang == 1 ? "new ArrayList<>(Arrays.asList(" : "[");
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i) put(b, ", ");
            render(b, json_array_get(v, i), lang);
        }
        put(b, lang == 1 ? "))" : "]");
    } else if (json_is_object(v)) {
        put(b, lang == 1 ? "new HashMap<String, Object>() {{ " : "{");
        const char *k;
        json_t *x;
        bool first = true;
        json_object_foreach((json_t *)v, k, x) {
            const json_t *val = json_is_array(x) ? first_value(x) : x;
            if (!val) continue;
            if (lang == 1) {
                put(b, "put(");
                put_str_lit(b, k);
                put(b, ", ");
                render(b, val, lang);
                put(b, "); ");
            } else {
                if (!first) put(b, ", ");
                put_str_lit(b, k);
                put(b, ": ");
                render(b, val, lang);
            }
            first = false;
        }
        put(b, "}");
        if (lang == 1) put(b, "}");
    }
}

/* mode: 0 all parameters, 1 optional ones omitted; mutate: 0 none,
 * 1 function name, 2 drop a required parameter, 3 change a value, 4 add
 * an unknown parameter. Returns NULL when the mutation does not apply. */
static char *make_call(const json_t *q, const json_t *ans, int lang, int mode, int mutate) {
    const json_t *gt = json_array_get(json_object_get(ans, "ground_truth"), 0);
    const char *name = json_object_iter_key(json_object_iter((json_t *)gt));
    const json_t *params = json_object_iter_value(json_object_iter((json_t *)gt));
    const json_t *req = NULL, *props = NULL;
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(q, "function"), i, f)
        if (!strcmp(json_string_value(json_object_get(f, "name")), name)) {
            req = json_object_get(json_object_get(f, "parameters"), "required");
            props = json_object_get(json_object_get(f, "parameters"), "properties");
        }
    buf b = {0};
    put(&b, "[");
    put(&b, name);
    if (mutate == 1) put(&b, "_x");
    put(&b, "(");
    bool first = true, dropped = false, changed = false;
    const char *k;
    json_t *acc;
    json_object_foreach((json_t *)params, k, acc) {
        const char *type = json_string_value(json_object_get(json_object_get(props, k), "type"));
        const json_t *v = fitting_value(acc, type, lang);
        bool optional = false;
        for (size_t j = 0; j < json_array_size(acc); j++)
            if (json_is_string(json_array_get(acc, j)) && !json_string_length(json_array_get(acc, j))) optional = true;
        bool required = false;
        size_t j;
        json_t *r;
        json_array_foreach(req, j, r) if (!strcmp(json_string_value(r), k)) required = true;
        /* the checker wants every documented-required parameter, even
         * where the answer marks it optional */
        if (!v || (mode == 1 && optional && !required)) continue;
        if (mutate == 2 && required && !dropped) {
            dropped = true;
            continue;
        }
        if (!first) put(&b, ", ");
        first = false;
        put(&b, k);
        put(&b, "=");
        json_t *val = json_deep_copy(v);
        if (mutate == 3 && !changed && (json_is_string(val) || json_is_integer(val) || json_is_boolean(val))) {
            json_t *nv = json_is_string(val) ? json_sprintf("%sZq9", json_string_value(val))
                         : json_is_integer(val) ? json_integer(json_integer_value(val) + 7919)
                                                : json_boolean(!json_is_true(val));
            /* only a change that no acceptable value equals */
            bool taken = false;
            for (size_t m = 0; m < json_array_size(acc); m++) taken |= json_equal(json_array_get(acc, m), nv);
            if (!taken) {
                json_decref(val);
                val = nv;
                changed = true;
            } else json_decref(nv);
        }
        if (lang == 0) render(&b, val, 0);
        else { /* Java/JavaScript: the value as a string of source text */
            buf src = {0};
            if (json_is_string(val)) put(&src, json_string_value(val));
            else render(&src, val, lang);
            put_str_lit(&b, src.s);
            free(src.s);
        }
        json_decref(val);
    }
    if (mutate == 4) {
        put(&b, first ? "" : ", ");
        put(&b, "zz_unknown_param=1");
    }
    put(&b, ")]");
    if ((mutate == 2 && !dropped) || (mutate == 3 && !changed)) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

static void run_category(const char *cat, const char *langname, int lang, size_t want_n) {
    char qp[256], ap[256];
    snprintf(qp, sizeof qp, BFCL "/BFCL_v4_%s.json", cat);
    snprintf(ap, sizeof ap, BFCL "/possible_answer/BFCL_v4_%s.json", cat);
    json_t *qs = NULL, *as = NULL;
    kld_error err = {0};
    CHECK_OK(kld_cap_read_jsonl(qp, &qs, &err), err);
    CHECK_OK(kld_cap_read_jsonl(ap, &as, &err), err);
    CHECK(json_array_size(qs) == want_n && json_array_size(as) == want_n, "%s: %zu entries", cat, json_array_size(qs));
    size_t accepted[2] = {0}, rejected[5] = {0}, tried[5] = {0}, shown = 0;
    for (size_t i = 0; i < json_array_size(qs); i++) {
        const json_t *q = json_array_get(qs, i), *a = json_array_get(as, i);
        for (int mode = 0; mode < 2; mode++) {
            char *call = make_call(q, a, lang, mode, 0);
            bool ok = false;
            char why[256];
            CHECK_OK(kld_bfcl_check(q, a, langname, call, &ok, why, sizeof why, &err), err);
            accepted[mode] += ok;
            if (!ok && shown++ < 10) fprintf(stderr, "%s %s: rejected %s: %s\n", cat,
                                             json_string_value(json_object_get(q, "id")), call, why);
            free(call);
        }
        for (int m = 1; m <= 4; m++) {
            char *call = make_call(q, a, lang, 0, m);
            if (!call) continue;
            tried[m]++;
            bool ok = true;
            char why[256];
            CHECK_OK(kld_bfcl_check(q, a, langname, call, &ok, why, sizeof why, &err), err);
            rejected[m] += !ok;
            if (ok && shown++ < 10) fprintf(stderr, "%s %s: mutation %d accepted: %s\n", cat,
                                            json_string_value(json_object_get(q, "id")), m, call);
            free(call);
        }
    }
    CHECK(accepted[0] == want_n && accepted[1] == want_n, "%s: possible answers accepted %zu and "
          "(optional omitted) %zu of %zu", cat, accepted[0], accepted[1], want_n);
    for (int m = 1; m <= 4; m++)
        CHECK(tried[m] > 0 && rejected[m] == tried[m], "%s: mutation %d rejected %zu of %zu", cat, m,
              rejected[m], tried[m]);
    json_decref(qs);
    json_decref(as);
}

static void test_parser(void) {
    json_t *c = kld_bfcl_parse_calls("```python\n[math.hypot(x=3, y=4.5, flags=[True, None], opts={'a': (1, 2)})]\n```");
    CHECK(c && json_array_size(c) == 1, "fenced call parses");
    json_t *args = json_object_get(json_array_get(c, 0), "math.hypot");
    CHECK(json_integer_value(json_object_get(args, "x")) == 3 && json_real_value(json_object_get(args, "y")) == 4.5,
          "numbers");
    CHECK(json_is_true(json_array_get(json_object_get(args, "flags"), 0)) &&
              json_is_null(json_array_get(json_object_get(args, "flags"), 1)), "True/None");
    CHECK(json_array_size(json_object_get(json_object_get(args, "opts"), "a")) == 2, "tuple in dict");
    json_decref(c);
    c = kld_bfcl_parse_calls("f(a=1), g(b='x')");
    CHECK(c && json_array_size(c) == 2, "two bare calls");
    json_decref(c);
    CHECK(!kld_bfcl_parse_calls("I think you should call f(a=1)"), "prose is not a call");
    CHECK(!kld_bfcl_parse_calls("[f(1, 2)]"), "positional arguments are rejected");
    CHECK(!kld_bfcl_parse_calls("[f(a=1, a=2)]"), "a repeated argument is rejected");
    json_t *v = kld_bfcl_parse_value("new HashMap<String, Integer>() {{ put(\"limit\", 50); }}");
    CHECK(v && json_integer_value(json_object_get(v, "limit")) == 50, "Java HashMap literal");
    json_decref(v);
    v = kld_bfcl_parse_value("new int[]{1, 2, 3}");
    CHECK(v && json_array_size(v) == 3, "Java array literal");
    json_decref(v);
    v = kld_bfcl_parse_value("{limit: 10, name: 'x'}");
    CHECK(v && json_integer_value(json_object_get(v, "limit")) == 10, "JavaScript object literal");
    json_decref(v);
}

int main(void) {
    test_parser();
    run_category("simple_python", "python", 0, 400);
    run_category("multiple", "python", 0, 200);
    run_category("simple_java", "java", 1, 100);
    run_category("simple_javascript", "javascript", 2, 50);
    return kt_finish();
}
