/* arm_endpoint.c — an OpenAI-style completions endpoint as an arm (kl
 * --arm-endpoint URL) or as the reference (--ref-endpoint): each window's
 * tokens go out as token ids with `echo`, `max_tokens` 0, `logprobs` K and
 * `return_tokens_as_token_ids` (vLLM's option, which kldeval serve honours
 * too), over libcurl. The echoed ids must be the ones sent (the first
 * document and position that differ stop the run); row i is entry i + 1 of
 * `top_logprobs`: an arm known on its own top K (KLD_ROWS_TOPK), a
 * reference as a top-K teacher is (KLD_ROWS_SPARSE, log-probabilities with
 * logsumexp 0). A kldeval server asked for the whole row also returns each
 * row's logsumexp (`return_logsumexp`): the f32 logits are then recovered
 * exactly and the rows are dense, scored as the lockstep run scores them.
 * Connection errors and 5xx are retried with back-off; a 4xx stops the run
 * naming the URL, the status and the server's message. */
#include "eval/arm.h"
#include "eval/corpus.h"

#include <curl/curl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EP_ATTEMPTS 5        /* tries per request (back-off 0.25 s, doubling) */
#define EP_MSG_MAX 400       /* characters of a server's message in errors */

typedef struct ep_arm {
    CURL *curl;
    struct curl_slist *headers;
    char *url_models, *url_completions, *url_tokenize;
    char *model;             /* the served model's name (--endpoint-model or /v1/models) */
    const char *flag;        /* "--arm-endpoint" or "--ref-endpoint", for messages */
    bool as_ref;             /* the reference: rows as a top-K teacher's */
    bool dense;              /* K = n_vocab from a kldeval server: logits recovered exactly */
    int32_t k;               /* logprobs K */
    const kld_window *w;
    size_t wi;
    int64_t doc;             /* documents begun (the current one's index + 1) */
    int32_t *fed;            /* the window's tokens as fed so far, + 1 */
    int64_t n_fed, max_len;
    int32_t *idx;            /* [chunk][k] */
    float *val;
    double *lse, *logp_next;
    int32_t *argmax;
    float *logits;           /* dense: [chunk][n_vocab] */
    int64_t chunk;
    bool max1;               /* the server refused max_tokens 0: 1 from then on */
    long status;             /* the last request's HTTP status */
    char msg[EP_MSG_MAX + 1];/* and its message when it failed */
} ep_arm;

typedef struct buf {
    char *p;
    size_t n, cap;
} buf;

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *ctx) {
    buf *b = ctx;
    size_t n = size * nmemb;
    if (b->n + n + 1 > b->cap) {
        size_t cap = (b->n + n + 1) * 2;
        char *p = realloc(b->p, cap);
        if (!p) return 0;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, ptr, n);
    b->n += n;
    b->p[b->n] = 0;
    return n;
}

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* The server's message: error.message, error (a string), message or detail
 * of a JSON body, else the body itself, shortened. */
static void server_message(const char *body, char *out, size_t cap) {
    json_t *j = body ? json_loads(body, 0, NULL) : NULL;
    const char *m = NULL;
    if (j) {
        json_t *e = json_object_get(j, "error");
        if (json_is_object(e)) m = json_string_value(json_object_get(e, "message"));
        if (!m && json_is_string(e)) m = json_string_value(e);
        if (!m) m = json_string_value(json_object_get(j, "message"));
        if (!m) m = json_string_value(json_object_get(j, "detail"));
    }
    snprintf(out, cap, "%.*s", EP_MSG_MAX, m ? m : body && *body ? body : "(empty reply)");
    json_decref(j);
}

/* GET (body NULL) or POST a JSON body to url; *reply the parsed JSON. */
static kld_status request(ep_arm *u, const char *url, json_t *body, json_t **reply, kld_error *err) {
    *reply = NULL;
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    if (body && !text) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    buf b = {0};
    double wait = 0.25;
    kld_status st = KLD_OK;
    for (int attempt = 1;; attempt++) {
        b.n = 0;
        if (b.p) b.p[0] = 0;
        curl_easy_reset(u->curl);
        curl_easy_setopt(u->curl, CURLOPT_URL, url);
        curl_easy_setopt(u->curl, CURLOPT_HTTPHEADER, u->headers);
        curl_easy_setopt(u->curl, CURLOPT_WRITEFUNCTION, on_data);
        curl_easy_setopt(u->curl, CURLOPT_WRITEDATA, &b);
        curl_easy_setopt(u->curl, CURLOPT_CONNECTTIMEOUT, 10L);
        curl_easy_setopt(u->curl, CURLOPT_TIMEOUT, 3600L);
        curl_easy_setopt(u->curl, CURLOPT_NOSIGNAL, 1L);
        if (text) curl_easy_setopt(u->curl, CURLOPT_POSTFIELDS, text);
        CURLcode rc = curl_easy_perform(u->curl);
        long status = 0;
        curl_easy_getinfo(u->curl, CURLINFO_RESPONSE_CODE, &status);
        bool retry = rc != CURLE_OK || status >= 500;
        u->status = status;
        if (!retry) {
            if (status >= 400 || status < 200) {
                char *msg = u->msg;
                server_message(b.p, msg, sizeof u->msg);
                st = kld_fail(err, KLD_ERR_ARG, "%s: %s %s: HTTP %ld: %s",
                              u->flag, text ? "POST" : "GET", url, status, msg);
                break;
            }
            json_error_t je;
            *reply = json_loads(b.p ? b.p : "", 0, &je);
            if (!*reply)
                st = kld_fail(err, KLD_ERR_FORMAT, "%s: %s: the reply is not JSON (%s)",
                              u->flag, url, je.text);
            break;
        }
        if (attempt >= EP_ATTEMPTS) {
            char msg[EP_MSG_MAX + 1];
            if (rc != CURLE_OK)
                snprintf(msg, sizeof msg, "%s", curl_easy_strerror(rc));
            else
                server_message(b.p, msg, sizeof msg);
            if (rc == CURLE_OK)
                st = kld_fail(err, KLD_ERR_IO, "%s: %s %s: HTTP %ld: %s (after %d attempts)",
                              u->flag, text ? "POST" : "GET", url, status, msg, attempt);
            else
                st = kld_fail(err, KLD_ERR_IO, "%s: %s %s: %s (after %d attempts)",
                              u->flag, text ? "POST" : "GET", url, msg, attempt);
            break;
        }
        sleep_s(wait);
        wait *= 2;
    }
    free(b.p);
    free(text);
    return st;
}

/* "token_id:N" → N (-1: not of that form). */
static int64_t token_id_of(const char *s) {
    if (!s || strncmp(s, "token_id:", 9)) return -1;
    char *end;
    long long v = strtoll(s + 9, &end, 10);
    return end != s + 9 && !*end && v >= 0 ? v : -1;
}

static kld_status prepare(kld_arm *a, kld_pool *pool, int64_t max_len, int64_t chunk, int64_t passes,
                          kld_error *err) {
    (void)pool, (void)passes;
    ep_arm *u = a->impl;
    size_t cells = (size_t)chunk * (size_t)u->k;
    u->max_len = max_len;
    u->chunk = chunk;
    u->fed = malloc((size_t)(max_len + 1) * sizeof *u->fed);
    u->idx = malloc(cells * sizeof *u->idx);
    u->val = malloc(cells * sizeof *u->val);
    u->lse = calloc((size_t)chunk, sizeof *u->lse);
    u->logp_next = malloc((size_t)chunk * sizeof *u->logp_next);
    u->argmax = malloc((size_t)chunk * sizeof *u->argmax);
    if (u->dense) u->logits = malloc((size_t)chunk * (size_t)a->n_vocab * sizeof *u->logits);
    if (!u->fed || !u->idx || !u->val || !u->lse || !u->logp_next || !u->argmax || (u->dense && !u->logits))
        return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory for %lld rows of %d log-probabilities",
                        a->path, (long long)chunk, (int)u->k);
    return KLD_OK;
}

static kld_status begin(kld_arm *a, const kld_window *w, size_t wi, kld_error *err) {
    (void)err;
    ep_arm *u = a->impl;
    u->w = w;
    u->wi = wi;
    u->n_fed = 0;
    if (w->new_doc || wi == 0) u->doc++;
    return KLD_OK;
}

typedef struct topent {
    int32_t id;
    double lp;
} topent;

static int by_lp_desc(const void *x, const void *y) {
    const topent *a = x, *b = y;
    if (a->lp != b->lp) return a->lp > b->lp ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

/* A whole row's f32 logits from its log-probabilities and logsumexp, as a
 * kldeval server computed them (lp = (double)logit - lse): logit =
 * (float)(lp + lse), checked by recomputing lp. Exact whenever |logit| is
 * above ~2^-27 |lse| (below, several floats give the same lp and the one
 * nearest is taken: docs/serve.md). */
static kld_status recover_row(kld_arm *a, const topent *ents, size_t n, double lse, int64_t row,
                              float *out, kld_error *err) {
    ep_arm *u = a->impl;
    if (n != (size_t)a->n_vocab || !isfinite(lse))
        return kld_fail(err, KLD_ERR_FORMAT, "%s %s: window %zu row %lld: %zu log-probabilities and "
                        "logsumexp %g where the whole row of %d was asked", u->flag, a->path, u->wi,
                        (long long)row, n, lse, (int)a->n_vocab);
    for (int32_t i = 0; i < a->n_vocab; i++) out[i] = NAN;
    for (size_t i = 0; i < n; i++) {
        float f = (float)(ents[i].lp + lse);
        if ((double)f - lse != ents[i].lp || !isnan(out[ents[i].id]))
            return kld_fail(err, KLD_ERR_FORMAT, "%s %s: window %zu row %lld: token %d: log-probability "
                            "%.17g and logsumexp %.17g are not those of a float32 logit (or the id "
                            "repeats): the server's return_logsumexp is not kldeval's", u->flag, a->path,
                            u->wi, (long long)row, (int)ents[i].id, ents[i].lp, lse);
        out[ents[i].id] = f;
    }
    return KLD_OK;
}

/* Row j (the row0 + j of the window) from top_logprobs entry e (lse: its
 * logsumexp when the server sends them, else NAN). */
static kld_status read_row(kld_arm *a, json_t *top, double lse, int64_t row, int64_t j, topent *ents,
                           kld_error *err) {
    ep_arm *u = a->impl;
    if (!json_is_object(top))
        return kld_fail(err, KLD_ERR_FORMAT, "%s %s: window %zu row %lld: no top_logprobs",
                        u->flag, a->path, u->wi, (long long)row);
    size_t n = 0;
    const char *key;
    json_t *v;
    json_object_foreach(top, key, v) {
        int64_t id = token_id_of(key);
        if (id < 0)
            return kld_fail(err, KLD_ERR_FORMAT, "%s %s: top_logprobs key '%.60s' is not "
                            "\"token_id:ID\": the server ignores return_tokens_as_token_ids (vLLM and "
                            "kldeval serve honour it)", u->flag, a->path, key);
        if (id >= a->n_vocab)
            return kld_fail(err, KLD_ERR_FORMAT, "%s %s: token id %lld outside the "
                            "vocabulary of %d", u->flag, a->path, (long long)id, (int)a->n_vocab);
        if (!json_is_number(v) || n >= (size_t)u->k + (u->k < a->n_vocab))
            return kld_fail(err, KLD_ERR_FORMAT, "%s %s: window %zu row %lld: %s",
                            u->flag, a->path, u->wi, (long long)row,
                            json_is_number(v) ? "more than logprobs + 1 alternatives"
                                              : "a log-probability that is not a number");
        ents[n++] = (topent){(int32_t)id, json_number_value(v)};
    }
    if (n < (size_t)u->k)
        return kld_fail(err, KLD_ERR_FORMAT, "%s %s: window %zu row %lld: %zu alternatives "
                        "where %d were asked (--top-logprobs)", u->flag, a->path, u->wi, (long long)row, n,
                        (int)u->k);
    if (u->dense) return recover_row(a, ents, n, lse, row, u->logits + (size_t)j * (size_t)a->n_vocab, err);
    /* vLLM adds the echoed token when it is not among the top K */
    qsort(ents, n, sizeof *ents, by_lp_desc);
    int32_t *idx = u->idx + (size_t)j * (size_t)u->k;
    float *val = u->val + (size_t)j * (size_t)u->k;
    for (int32_t i = 0; i < u->k; i++) {
        idx[i] = ents[i].id;
        val[i] = (float)ents[i].lp;
    }
    u->argmax[j] = idx[0];
    u->lse[j] = 0.0; /* the values are log-probabilities */
    return KLD_OK;
}

static kld_status eval(kld_arm *a, const int32_t *tokens, int64_t c0, int64_t n, int64_t r0,
                       int64_t r1, kld_rows *rows, kld_error *err) {
    ep_arm *u = a->impl;
    a->tokens += (uint64_t)n;
    if (c0 != u->n_fed || c0 + n > u->max_len)
        return kld_fail(err, KLD_ERR_ARG, "--arm-endpoint: tokens fed out of order");
    memcpy(u->fed + c0, tokens, (size_t)n * sizeof *tokens);
    u->n_fed = c0 + n;
    if (u->dense)
        *rows = (kld_rows){.kind = KLD_ROWS_DENSE, .row0 = r0, .n = r1 - r0, .n_vocab = a->n_vocab,
                           .logits = u->logits};
    else
        *rows = (kld_rows){.kind = u->as_ref ? KLD_ROWS_SPARSE : KLD_ROWS_TOPK, .row0 = r0,
                           .n = r1 - r0, .n_vocab = a->n_vocab, .k = u->k, .idx = u->idx,
                           .val = u->val, .lse = u->lse, .logp_next = u->logp_next,
                           .argmax = u->argmax};
    if (r1 <= r0) return KLD_OK;
    /* the prompt: the tokens fed, and the last row's next token when known
     * (so that its log-probability is echoed) */
    int64_t len = u->n_fed;
    int32_t after = kld_window_next(u->w, u->n_fed - 1);
    json_t *ids = json_array();
    for (int64_t i = 0; i < len; i++) json_array_append_new(ids, json_integer(u->fed[i]));
    if (after >= 0) json_array_append_new(ids, json_integer(after));
    int64_t n_prompt = len + (after >= 0);
    json_t *reply = NULL;
    double t0 = kld_now_s();
    kld_status st = KLD_OK;
    for (;;) {
        /* the last row's next token in the prompt: max_tokens 0 (1 where
         * the server refuses 0); else one generated position holds it */
        int max_tokens = after >= 0 && !u->max1 ? 0 : 1;
        json_t *body = json_pack("{s:s,s:O,s:i,s:b,s:i,s:i,s:b}", "model", u->model, "prompt", ids,
                                 "max_tokens", max_tokens, "echo", 1, "logprobs", (int)u->k,
                                 "temperature", 0, "return_tokens_as_token_ids", 1);
        if (body && u->dense) json_object_set_new(body, "return_logsumexp", json_true());
        st = body ? request(u, u->url_completions, body, &reply, err)
                  : kld_fail(err, KLD_ERR_NOMEM, "out of memory");
        json_decref(body);
        if (st && max_tokens == 0 && u->status >= 400 && u->status < 500 && strstr(u->msg, "max_tokens")) {
            u->max1 = true;
            continue;
        }
        break;
    }
    json_decref(ids);
    a->seconds += kld_now_s() - t0;
    if (st) return st;
    json_t *lp = json_object_get(json_array_get(json_object_get(reply, "choices"), 0), "logprobs");
    json_t *toks = json_object_get(lp, "tokens"), *tlp = json_object_get(lp, "token_logprobs");
    json_t *tops = json_object_get(lp, "top_logprobs"), *lses = json_object_get(lp, "logsumexp");
    topent *ents = malloc(((size_t)u->k + 1) * sizeof *ents);
    if (!ents) st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    else if (!json_is_array(toks) || !json_is_array(tlp) || !json_is_array(tops) ||
             (int64_t)json_array_size(toks) < len + 1 || (int64_t)json_array_size(tops) < len + 1 ||
             (int64_t)json_array_size(tlp) < n_prompt ||
             (u->dense && (int64_t)json_array_size(lses) < len + 1))
        st = kld_fail(err, KLD_ERR_FORMAT, "%s %s: the reply has no choices[0].logprobs "
                      "with tokens, token_logprobs, top_logprobs%s for %lld tokens (does the server "
                      "support echo with logprobs?)", u->flag, u->url_completions,
                      u->dense ? " and logsumexp (kldeval serve's return_logsumexp)" : "", (long long)(len + 1));
    /* tokenization: the echoed ids are those sent */
    for (int64_t i = 0; !st && i < n_prompt; i++) {
        int32_t want = i < len ? u->fed[i] : after;
        const char *s = json_string_value(json_array_get(toks, (size_t)i));
        int64_t got = token_id_of(s);
        if (got < 0)
            st = kld_fail(err, KLD_ERR_FORMAT, "%s %s: echoed token '%.60s' is not "
                          "\"token_id:ID\": the server ignores return_tokens_as_token_ids (vLLM and "
                          "kldeval serve honour it)", u->flag, a->path, s ? s : "(not a string)");
        else if (got != want)
            st = kld_fail(err, KLD_ERR_MISMATCH, "%s %s: the endpoint's tokens differ from "
                          "kldeval's: document %lld (window %zu), position %lld: token %lld where "
                          "kldeval has %d", u->flag, a->path, (long long)(u->doc - 1), u->wi, (long long)i,
                          (long long)got, (int)want);
    }
    for (int64_t r = r0; !st && r < r1; r++) {
        int64_t j = r - r0;
        json_t *l = json_array_get(lses, (size_t)(r + 1));
        st = read_row(a, json_array_get(tops, (size_t)(r + 1)), json_is_number(l) ? json_number_value(l) : NAN,
                      r, j, ents, err);
        json_t *x = json_array_get(tlp, (size_t)(r + 1));
        u->logp_next[j] = r + 1 < n_prompt && json_is_number(x) ? json_number_value(x) : NAN;
    }
    free(ents);
    json_decref(reply);
    return st;
}

static void ep_free(kld_arm *a) {
    ep_arm *u = a->impl;
    if (!u) return;
    if (u->curl) curl_easy_cleanup(u->curl);
    curl_slist_free_all(u->headers);
    free(u->url_models);
    free(u->url_completions);
    free(u->model);
    free(u->fed);
    free(u->idx);
    free(u->val);
    free(u->lse);
    free(u->logp_next);
    free(u->argmax);
    free(u->logits);
    free(u->url_tokenize);
    free(u);
    curl_global_cleanup();
}

static const kld_arm_ops ep_ops = {prepare, begin, eval, ep_free};

/* base + "/v1" + tail (v1 true) or base without its "/v1" + tail (the
 * /tokenize of vLLM and kldeval serve sits at the root). */
static char *join(const char *base, const char *tail, bool v1) {
    size_t n = strlen(base);
    while (n > 0 && base[n - 1] == '/') n--;
    bool has_v1 = n >= 3 && !strncmp(base + n - 3, "/v1", 3);
    if (has_v1 && !v1) n -= 3;
    char *s = malloc(n + strlen(tail) + 4);
    if (s) sprintf(s, "%.*s%s%s", (int)n, base, v1 && !has_v1 ? "/v1" : "", tail);
    return s;
}

/* The /v1/models entry of the served model (the first when model is NULL). */
static json_t *model_entry(json_t *models, const char *model) {
    json_t *data = json_object_get(models, "data"), *m;
    size_t i;
    json_array_foreach(data, i, m) {
        const char *id = json_string_value(json_object_get(m, "id"));
        if (id && (!model || !strcmp(id, model))) return m;
    }
    return NULL;
}

kld_status kld_arm_open_endpoint(const char *url, bool as_ref, const char *model, int32_t k,
                                 const char *api_key, int32_t n_vocab, kld_arm **out, kld_error *err) {
    const char *flag = as_ref ? "--ref-endpoint" : "--arm-endpoint";
    *out = NULL;
    if (strncmp(url, "http://", 7) && strncmp(url, "https://", 8))
        return kld_fail(err, KLD_ERR_ARG, "%s %s: not an http:// or https:// URL", flag, url);
    if (k < 1 || k > n_vocab)
        return kld_fail(err, KLD_ERR_ARG, "--top-logprobs %d must be in 1..%d (the vocabulary)", (int)k,
                        (int)n_vocab);
    if (curl_global_init(CURL_GLOBAL_DEFAULT))
        return kld_fail(err, KLD_ERR_IO, "libcurl failed to initialise");
    kld_arm *a = kld_arm_new(&ep_ops, "endpoint", url, sizeof(ep_arm), false);
    if (!a) {
        curl_global_cleanup();
        return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    }
    ep_arm *u = a->impl;
    a->n_vocab = n_vocab;
    u->k = k;
    u->flag = flag;
    u->as_ref = as_ref;
    u->curl = curl_easy_init();
    u->url_models = join(url, "/models", true);
    u->url_completions = join(url, "/completions", true);
    u->url_tokenize = join(url, "/tokenize", false);
    u->headers = curl_slist_append(NULL, "Content-Type: application/json");
    kld_status st = KLD_OK;
    if (api_key) {
        char *h = malloc(strlen(api_key) + 32);
        if (h) {
            sprintf(h, "Authorization: Bearer %s", api_key);
            u->headers = curl_slist_append(u->headers, h);
            free(h);
        }
    }
    if (!u->curl || !u->url_models || !u->url_completions || !u->url_tokenize || !u->headers)
        st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    /* the served model: named, else the first /v1/models lists (the
     * endpoint's first answer: a dead or refusing endpoint stops here) */
    json_t *models = NULL;
    if (!st && (st = request(u, u->url_models, NULL, &models, err)) == KLD_OK && !model) {
        model = json_string_value(json_object_get(model_entry(models, NULL), "id"));
        if (!model)
            st = kld_fail(err, KLD_ERR_FORMAT, "%s %s lists no model: give --endpoint-model",
                          u->flag, u->url_models);
    }
    /* a kldeval server asked for the whole row sends each row's logsumexp */
    const char *owner = json_string_value(json_object_get(model_entry(models, model), "owned_by"));
    u->dense = !st && k == n_vocab && owner && !strcmp(owner, "kldeval");
    if (!st && !(u->model = kld_strdup(model))) st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    json_decref(models);
    if (!st)
        a->desc = json_pack("{s:s,s:s,s:s,s:i,s:b,s:b}", "kind", "endpoint", "url", url, "model", u->model,
                            "top_logprobs", (int)k, "full", k == n_vocab, "logits_recovered", u->dense);
    if (st) {
        kld_arm_free(a);
        return st;
    }
    *out = a;
    return KLD_OK;
}

kld_status kld_arm_endpoint_check_tokens(kld_arm *a, const kld_corpus *c, const kld_tokenizer *tok,
                                         size_t n_docs, bool *checked, kld_error *err) {
    ep_arm *u = a->impl;
    *checked = false;
    if (strcmp(a->kind, "endpoint") || c->kind != KLD_CORPUS_TEXT || !tok) return KLD_OK;
    kld_status st = KLD_OK;
    kld_tok_ids ids = {0};
    for (size_t d = 0; d < n_docs && d < c->n_docs && !st; d++) {
        ids.n = 0;
        if ((st = kld_corpus_encode_doc(c, tok, d, &ids, err))) break;
        bool bos = !c->messages || !c->messages[d] || c->doc_add_bos[d];
        json_t *body = json_pack("{s:s,s:s%,s:b}", "model", u->model, "prompt", c->docs[d], c->doc_len[d],
                                 "add_special_tokens", bos);
        json_t *reply = NULL;
        st = body ? request(u, u->url_tokenize, body, &reply, err) : kld_fail(err, KLD_ERR_NOMEM, "out of memory");
        json_decref(body);
        if (st && d == 0 && (u->status == 404 || u->status == 405)) { /* no /tokenize there */
            st = KLD_OK;
            break;
        }
        json_t *got = json_object_get(reply, "tokens");
        if (!st && !json_is_array(got))
            st = kld_fail(err, KLD_ERR_FORMAT, "%s %s: the reply has no \"tokens\" array", u->flag,
                          u->url_tokenize);
        for (size_t i = 0; !st && i <= ids.n; i++) {
            json_t *x = json_array_get(got, i);
            bool end = i == ids.n;
            if (end ? x == NULL : json_is_integer(x) && json_integer_value(x) == ids.ids[i]) continue;
            char got_s[40], want_s[40];
            if (x) snprintf(got_s, sizeof got_s, "token %lld", (long long)json_integer_value(x));
            else snprintf(got_s, sizeof got_s, "the end");
            if (!end) snprintf(want_s, sizeof want_s, "token %d", (int)ids.ids[i]);
            else snprintf(want_s, sizeof want_s, "the end");
            st = kld_fail(err, KLD_ERR_MISMATCH, "%s %s: the endpoint tokenizes %s:%zu (document %zu) "
                          "differently from kldeval: at position %zu %s where kldeval has %s (%zu ids "
                          "against kldeval's %zu)", u->flag, u->url_tokenize, c->name, c->doc_line[d],
                          d + 1, i, got_s, want_s, json_array_size(got), ids.n);
        }
        json_decref(reply);
        if (!st) *checked = true;
    }
    kld_tok_ids_free(&ids);
    return st;
}
