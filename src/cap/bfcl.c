/* bfcl.c — the BFCL AST check for one call (simple_* and multiple): the
 * function name, required parameters, no unknown parameters, each value
 * one of the possible answer's acceptable values ("" = may be omitted),
 * strings compared after the checker's normalisation, ints accepted for
 * floats, lists in order, dicts key by key. Java/JavaScript values arrive
 * as strings in that language's syntax and are converted by the
 * documented type first (see SOURCES.md §5 of the capability data). */
#include "cap/cap.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>

#define WHY(...) (why ? (snprintf(why, why_size, __VA_ARGS__), false) : false)

/* Remove spaces and , . / - _ * ^, lower-case, ' → ". */
static char *norm(const char *s) {
    size_t n = strlen(s), o = 0;
    char *out = malloc(n + 1);
    if (!out) return NULL;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == ' ' || strchr(",./-_*^", c)) continue;
        if (c == '\'') c = '"';
        out[o++] = (char)tolower((unsigned char)c);
    }
    out[o] = '\0';
    return out;
}

static bool str_eq_norm(const char *a, const char *b) {
    char *x = norm(a), *y = norm(b);
    bool eq = x && y && !strcmp(x, y);
    free(x);
    free(y);
    return eq;
}

static bool is_optional_marker(const json_t *v) {
    return json_is_string(v) && json_string_length(v) == 0;
}

static bool match_value(const json_t *got, const json_t *want);

/* got (an object) against want (an object whose values are lists of
 * acceptable values, or plain values). */
static bool match_dict(const json_t *got, const json_t *want) {
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)got, k, v) {
        json_t *acc = json_object_get(want, k);
        if (!acc) return false;
        if (!json_is_array(acc)) {
            if (!match_value(v, acc)) return false;
            continue;
        }
        bool ok = false;
        size_t i;
        json_t *a;
        json_array_foreach(acc, i, a) if (!is_optional_marker(a) && match_value(v, a)) ok = true;
        if (!ok) return false;
    }
    json_object_foreach((json_t *)want, k, v) {
        if (json_object_get(got, k)) continue;
        bool optional = false;
        if (json_is_array(v)) {
            size_t i;
            json_t *a;
            json_array_foreach(v, i, a) if (is_optional_marker(a)) optional = true;
        }
        if (!optional) return false;
    }
    return true;
}

static bool match_value(const json_t *got, const json_t *want) {
    if (json_is_string(want)) return json_is_string(got) && str_eq_norm(json_string_value(got), json_string_value(want));
    if (json_is_number(want)) {
        if (!json_is_number(got)) return false;
        if (json_is_integer(want) && json_is_integer(got))
            return json_integer_value(want) == json_integer_value(got);
        if (json_is_integer(want) && json_is_real(got)) return false; /* a float for an int */
        return json_number_value(got) == json_number_value(want);
    }
    if (json_is_boolean(want)) return json_is_boolean(got) && json_is_true(got) == json_is_true(want);
    if (json_is_null(want)) return json_is_null(got);
    if (json_is_array(want)) {
        if (!json_is_array(got) || json_array_size(got) != json_array_size(want)) return false;
        for (size_t i = 0; i < json_array_size(want); i++)
            if (!match_value(json_array_get(got, i), json_array_get(want, i))) return false;
        return true;
    }
    if (json_is_object(want)) return json_is_object(got) && match_dict(got, want);
    return false;
}

/* Python type check of the model's value against the documented type. */
static bool type_ok(const json_t *v, const char *type) {
    if (!strcmp(type, "integer")) return json_is_integer(v);
    if (!strcmp(type, "float")) return json_is_number(v);
    if (!strcmp(type, "string") || !strcmp(type, "any")) return json_is_string(v);
    if (!strcmp(type, "boolean")) return json_is_boolean(v);
    if (!strcmp(type, "array") || !strcmp(type, "tuple")) return json_is_array(v);
    if (!strcmp(type, "dict")) return json_is_object(v);
    return true;
}

/* Java/JavaScript: the model writes each value as a string of source
 * text; convert it by the documented type. */
static json_t *convert_lang_value(json_t *v, const char *type) {
    if (!json_is_string(v)) return json_incref(v);
    const char *s = json_string_value(v);
    if (!strcmp(type, "String") || !strcmp(type, "string") || !strcmp(type, "any")) {
        size_t n = strlen(s);
        if (n >= 2 && (s[0] == '"' || s[0] == '\'') && s[n - 1] == s[0]) {
            json_t *p = kld_bfcl_parse_value(s);
            if (json_is_string(p)) return p;
            json_decref(p);
        }
        return json_incref(v);
    }
    json_t *p = kld_bfcl_parse_value(s);
    return p ? p : json_incref(v);
}

kld_status kld_bfcl_check(const json_t *question, const json_t *answer, const char *lang,
                          const char *response, bool *ok, char *why, size_t why_size,
                          kld_error *err) {
    *ok = false;
    if (why && why_size) why[0] = '\0';
    json_t *gt = json_object_get(answer, "ground_truth");
    json_t *funcs = json_object_get(question, "function");
    if (!json_is_array(gt) || json_array_size(gt) != 1 || !json_is_object(json_array_get(gt, 0)) ||
        json_object_size(json_array_get(gt, 0)) != 1 || !json_is_array(funcs))
        return kld_fail(err, KLD_ERR_FORMAT, "BFCL entry %s: expected one ground-truth call and a "
                        "function list", json_string_value(json_object_get(answer, "id")));
    const char *gname = json_object_iter_key(json_object_iter(json_array_get(gt, 0)));
    json_t *gparams = json_object_iter_value(json_object_iter(json_array_get(gt, 0)));
    json_t *doc = NULL;
    size_t i;
    json_t *f;
    json_array_foreach(funcs, i, f) {
        const char *n = json_string_value(json_object_get(f, "name"));
        if (n && !strcmp(n, gname)) doc = f;
    }
    if (!doc || !json_is_object(gparams))
        return kld_fail(err, KLD_ERR_FORMAT, "BFCL entry %s: no function document for '%s'",
                        json_string_value(json_object_get(answer, "id")), gname);
    json_t *props = json_object_get(json_object_get(doc, "parameters"), "properties");
    json_t *required = json_object_get(json_object_get(doc, "parameters"), "required");
    const bool python = !strcmp(lang, "python");

    json_t *calls = kld_bfcl_parse_calls(response);
    if (!calls) return WHY("the response does not parse as a call list"), KLD_OK;
    if (json_array_size(calls) != 1) {
        WHY("wrong count: %zu calls, expected 1", json_array_size(calls));
        json_decref(calls);
        return KLD_OK;
    }
    json_t *c = json_array_get(calls, 0);
    const char *name = json_object_iter_key(json_object_iter(c));
    json_t *args = json_object_iter_value(json_object_iter(c));
    char dotless[512];
    snprintf(dotless, sizeof dotless, "%s", gname);
    for (char *d = dotless; *d; d++)
        if (*d == '.') *d = '_';
    if (strcmp(name, gname) && strcmp(name, dotless)) {
        WHY("wrong function '%s', expected '%s'", name, gname);
        goto done;
    }
    json_array_foreach(required, i, f) {
        if (json_is_string(f) && !json_object_get(args, json_string_value(f))) {
            WHY("required parameter '%s' missing", json_string_value(f));
            goto done;
        }
    }
    const char *k;
    json_t *v;
    json_object_foreach(args, k, v) {
        json_t *pdoc = json_object_get(props, k);
        json_t *acc = json_object_get(gparams, k);
        if (!pdoc || !json_is_array(acc)) {
            WHY("unexpected parameter '%s'", k);
            goto done;
        }
        const char *type = json_string_value(json_object_get(pdoc, "type"));
        if (!type) type = "any";
        json_t *got = python ? json_incref(v) : convert_lang_value(v, type);
        /* A string value where the answers are strings for a non-string
         * type (a variable name standing for the value): exact membership. */
        bool all_str = true;
        json_t *a;
        size_t j;
        json_array_foreach(acc, j, a) if (!is_optional_marker(a) && !json_is_string(a)) all_str = false;
        bool matched = false;
        if (python && all_str && json_is_string(got) && strcmp(type, "string") && strcmp(type, "any")) {
            json_array_foreach(acc, j, a) if (!is_optional_marker(a) &&
                                             !strcmp(json_string_value(a), json_string_value(got))) matched = true;
        } else if (!python || type_ok(got, type)) {
            json_array_foreach(acc, j, a) if (!is_optional_marker(a) && match_value(got, a)) matched = true;
        } else {
            WHY("parameter '%s': wrong type for %s", k, type);
            json_decref(got);
            goto done;
        }
        json_decref(got);
        if (!matched) {
            WHY("parameter '%s': value not among the possible answers", k);
            goto done;
        }
    }
    json_object_foreach(gparams, k, v) {
        if (json_object_get(args, k)) continue;
        bool optional = false;
        json_t *a;
        size_t j;
        json_array_foreach(v, j, a) if (is_optional_marker(a)) optional = true;
        if (!optional) {
            WHY("parameter '%s' missing", k);
            goto done;
        }
    }
    *ok = true;
done:
    json_decref(calls);
    return KLD_OK;
}
