/* serve_request.c — reading a JSON request: typed optional fields whose
 * errors are 400 replies naming the field and the value received, and the
 * OpenAI error object every failure is returned as. */
#include "serve/serve.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void kld_serve_error(kld_serve_reply *r, unsigned status, const char *param, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* The message may quote a request's bytes: keep the reply valid UTF-8. */
    char *clean = kld_serve_utf8(msg, strlen(msg), NULL);
    const char *type = status == 401 ? "authentication_error" : status == 404 ? "not_found_error"
                     : status == 413 ? "request_too_large" : status >= 500 ? "server_error"
                                                                             : "invalid_request_error";
    json_decref(r->body);
    r->status = status;
    r->body = json_pack("{s:{s:s,s:s,s:s?,s:i}}", "error", "message", clean ? clean : "error", "type", type,
                        "param", param, "code", (json_int_t)status);
    free(clean);
}

const char *kld_serve_show(const json_t *v) {
    static _Thread_local char buf[96];
    char *text = v ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
    if (!text) snprintf(buf, sizeof buf, "%s", v ? "?" : "null");
    else if (strlen(text) < sizeof buf) snprintf(buf, sizeof buf, "%s", text);
    else snprintf(buf, sizeof buf, "%.*s...", (int)sizeof buf - 4, text);
    free(text);
    return buf;
}

bool kld_serve_get_int(const json_t *req, const char *key, int64_t lo, int64_t hi, int64_t *out,
                       kld_serve_reply *r) {
    const json_t *v = json_object_get(req, key);
    if (!v || json_is_null(v)) return true;
    /* 3.0 is accepted as 3, as Python clients send whole floats */
    double d = json_is_integer(v) ? (double)json_integer_value(v) : json_is_real(v) ? json_real_value(v) : NAN;
    if (!json_is_number(v) || d != floor(d)) {
        kld_serve_error(r, 400, key, "'%s' must be an integer, got %s", key, kld_serve_show(v));
        return false;
    }
    const bool in_range = json_is_integer(v) ? json_integer_value(v) >= lo && json_integer_value(v) <= hi
                                             : d >= (double)lo && d <= (double)hi && fabs(d) < 9.2e18;
    if (!in_range) {
        kld_serve_error(r, 400, key, "'%s' must be in [%lld, %lld], got %s", key, (long long)lo, (long long)hi,
                        kld_serve_show(v));
        return false;
    }
    const int64_t x = json_is_integer(v) ? (int64_t)json_integer_value(v) : (int64_t)d;
    *out = x;
    return true;
}

bool kld_serve_get_real(const json_t *req, const char *key, double lo, double hi, double *out,
                        kld_serve_reply *r) {
    const json_t *v = json_object_get(req, key);
    if (!v || json_is_null(v)) return true;
    if (!json_is_number(v)) {
        kld_serve_error(r, 400, key, "'%s' must be a number, got %s", key, kld_serve_show(v));
        return false;
    }
    const double x = json_number_value(v);
    if (!(x >= lo && x <= hi)) {
        kld_serve_error(r, 400, key, "'%s' must be in [%g, %g], got %s", key, lo, hi, kld_serve_show(v));
        return false;
    }
    *out = x;
    return true;
}

bool kld_serve_get_bool(const json_t *req, const char *key, bool *out, kld_serve_reply *r) {
    const json_t *v = json_object_get(req, key);
    if (!v || json_is_null(v)) return true;
    if (!json_is_boolean(v)) {
        kld_serve_error(r, 400, key, "'%s' must be true or false, got %s", key, kld_serve_show(v));
        return false;
    }
    *out = json_is_true(v);
    return true;
}

bool kld_serve_get_ids(const json_t *v, const char *field, int64_t n_vocab, kld_tok_ids *ids,
                       kld_serve_reply *r) {
    size_t i;
    const json_t *x;
    json_array_foreach(v, i, x) {
        if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) >= n_vocab) {
            kld_serve_error(r, 400, field, "'%s'[%zu] must be a token id in [0, %lld), got %s", field, i,
                            (long long)n_vocab, kld_serve_show(x));
            return false;
        }
        const int32_t id = (int32_t)json_integer_value(x);
        if (!kld_tok_ids_append(ids, &id, 1)) {
            kld_serve_error(r, 500, field, "out of memory");
            return false;
        }
    }
    return true;
}
