/* serve_completions.c — POST /v1/completions (OpenAI legacy completions):
 * prompts as text, a list of texts, one id list or a list of id lists;
 * each runs through the engine and becomes one choice with the text,
 * finish_reason and, when asked, logprobs {tokens, token_logprobs,
 * top_logprobs, text_offset} — what lm-evaluation-harness's
 * local-completions reads for log-likelihoods and generations. */
#include "serve/serve.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The prompts of a request as id lists (*n of them, malloc'd). */
static kld_tok_ids *read_prompts(const kld_server *s, const json_t *req, size_t *n, kld_serve_reply *r) {
    const json_t *prompt = json_object_get(req, "prompt");
    const kld_serve_engine *e = s->engine;
    *n = 0;
    if (!prompt || !(json_is_string(prompt) || json_is_array(prompt)) ||
        (json_is_array(prompt) && json_array_size(prompt) == 0)) {
        kld_serve_error(r, 400, "prompt", "'prompt' must be a string, a list of strings, a list of token ids "
                        "or a list of token-id lists, got %s", kld_serve_show(prompt));
        return NULL;
    }
    /* one prompt given as a string or as ids; else a list of prompts */
    const json_t *first = json_is_array(prompt) ? json_array_get(prompt, 0) : prompt;
    const bool single = json_is_string(prompt) || json_is_integer(first);
    const size_t count = single ? 1 : json_array_size(prompt);
    if ((int64_t)count > s->opts->max_prompts) {
        kld_serve_error(r, 413, "prompt", "%zu prompts in one request: the limit is %lld (--max-prompts)",
                        count, (long long)s->opts->max_prompts);
        return NULL;
    }
    kld_tok_ids *out = calloc(count, sizeof *out);
    if (!out) {
        kld_serve_error(r, 500, NULL, "out of memory");
        return NULL;
    }
    bool ok = true;
    for (size_t i = 0; i < count && ok; i++) {
        const json_t *p = single ? prompt : json_array_get(prompt, i);
        char field[48];
        snprintf(field, sizeof field, single ? "prompt" : "prompt[%zu]", i);
        if (json_is_string(p)) {
            kld_error err = {0};
            /* special-token text is parsed, as Hugging Face tokenizers do */
            if (kld_tok_encode(e->tok, json_string_value(p), json_string_length(p),
                               KLD_TOK_ADD_SPECIAL | KLD_TOK_PARSE_SPECIAL, &out[i], &err) != KLD_OK) {
                kld_serve_error(r, 400, "prompt", "%s: %s", field, err.msg);
                ok = false;
            }
        } else if (json_is_array(p) && (single || json_array_size(p) > 0)) {
            ok = kld_serve_get_ids(p, field, e->n_vocab, &out[i], r);
        } else {
            kld_serve_error(r, 400, "prompt", "'%s' must be %s, got %s", field,
                            single ? "a string or a list of token ids" : "a string or a non-empty list of token ids",
                            kld_serve_show(p));
            ok = false;
        }
        if (ok && out[i].n == 0) {
            kld_serve_error(r, 400, "prompt", "'%s' is empty (no tokens)", field);
            ok = false;
        }
        if (ok && (int64_t)out[i].n > e->n_ctx) {
            kld_serve_error(r, 413, "prompt", "'%s' has %zu tokens: the context is %lld (--ctx)", field,
                            out[i].n, (long long)e->n_ctx);
            ok = false;
        }
    }
    if (!ok) {
        for (size_t i = 0; i < count; i++) kld_tok_ids_free(&out[i]);
        free(out);
        return NULL;
    }
    *n = count;
    return out;
}

static json_t *lp_json(double x) { return isfinite(x) ? json_real(x) : json_null(); }

/* choices[i].logprobs for the tokens of r from r->first. */
static json_t *logprobs_json(const kld_serve_engine *e, const kld_serve_result *res, size_t text_start,
                             const size_t *char_at, size_t n_raw, const kld_serve_params *p) {
    const bool ids_as_text = p->ids_as_text;
    json_t *tokens = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    json_t *lses = p->with_lse ? json_array() : NULL;
    size_t at = text_start;
    for (size_t t = res->first; t < res->ids.n; t++) {
        const size_t k = t - res->first;
        size_t len = 0;
        bool special = false;
        char *raw = kld_serve_token_bytes(e->tok, res->ids.ids, t, &len, &special);
        char *str = raw ? kld_serve_token_string(raw, len) : NULL;
        char idkey[32];
        snprintf(idkey, sizeof idkey, "token_id:%d", (int)res->ids.ids[t]);
        json_array_append_new(tokens, json_string(ids_as_text ? idkey : str ? str : ""));
        free(str);
        free(raw);
        json_array_append_new(offs, json_integer((json_int_t)char_at[at < n_raw ? at : n_raw]));
        if (!special) at += len;
        if (t == 0) {
            json_array_append_new(lps, json_null());
            json_array_append_new(tops, json_null());
            if (lses) json_array_append_new(lses, json_null());
            continue;
        }
        json_array_append_new(lps, lp_json(res->logprob[k]));
        if (lses) json_array_append_new(lses, lp_json(res->lse[k]));
        json_t *top = json_object();
        for (int64_t j = 0; ids_as_text && j < res->n_top; j++) {
            snprintf(idkey, sizeof idkey, "token_id:%d", (int)res->top_id[k * (size_t)res->n_top + (size_t)j]);
            json_object_set_new(top, idkey, lp_json(res->top_lp[k * (size_t)res->n_top + (size_t)j]));
        }
        for (int64_t j = 0; !ids_as_text && j < res->n_top; j++) {
            /* the alternative's text in the same context as the token's */
            const size_t from = t >= 8 ? t - 8 : 0;
            int32_t ctx[9];
            memcpy(ctx, res->ids.ids + from, (t - from) * sizeof *ctx);
            ctx[t - from] = res->top_id[k * (size_t)res->n_top + (size_t)j];
            char *traw = kld_serve_token_bytes(e->tok, ctx, t - from, &len, &special);
            char *key = traw ? kld_serve_token_string(traw, len) : NULL;
            /* two ids of one text: the more probable (listed first) keeps the key */
            if (key && !json_object_get(top, key))
                json_object_set_new(top, key, lp_json(res->top_lp[k * (size_t)res->n_top + (size_t)j]));
            free(key);
            free(traw);
        }
        json_array_append_new(tops, top);
    }
    json_t *out = json_pack("{s:o,s:o,s:o,s:o}", "tokens", tokens, "token_logprobs", lps, "top_logprobs",
                            tops, "text_offset", offs);
    if (lses) json_object_set_new(out, "logsumexp", lses);
    return out;
}

/* One choice: its text (prompt text first with echo), cut at a stop string. */
static json_t *choice_json(const kld_serve_engine *e, const kld_serve_params *p, const kld_serve_result *res,
                           size_t index, size_t cut) {
    size_t n_prompt_text = 0, n_gen = 0;
    char *prompt_text = p->echo ? kld_serve_decode(e->tok, res->ids.ids, res->n_prompt, &n_prompt_text)
                                : kld_strdup("");
    char *gen = kld_serve_completion_bytes(e->tok, res->ids.ids, res->n_prompt, res->ids.n, &n_gen);
    if (cut < n_gen) n_gen = cut;
    char *raw = prompt_text && gen ? malloc(n_prompt_text + n_gen + 1) : NULL;
    json_t *choice = NULL;
    size_t *char_at = NULL;
    char *text = NULL;
    if (raw) {
        memcpy(raw, prompt_text, n_prompt_text);
        memcpy(raw + n_prompt_text, gen, n_gen);
        text = kld_serve_utf8(raw, n_prompt_text + n_gen, &char_at);
    }
    if (text) {
        json_t *lp = p->n_top >= 0 ? logprobs_json(e, res, 0, char_at, n_prompt_text + n_gen, p) : json_null();
        choice = json_pack("{s:i,s:s,s:s,s:o}", "index", (json_int_t)index, "text", text, "finish_reason",
                           res->finish_reason, "logprobs", lp);
    }
    free(prompt_text);
    free(gen);
    free(raw);
    free(text);
    free(char_at);
    return choice;
}

bool kld_serve_check_model(const kld_server *s, const json_t *req, kld_serve_reply *r) {
    const json_t *m = json_object_get(req, "model");
    if (!m || json_is_null(m)) return true;
    if (!json_is_string(m)) {
        kld_serve_error(r, 400, "model", "'model' must be a string, got %s", kld_serve_show(m));
        return false;
    }
    if (strcmp(json_string_value(m), s->opts->model_id)) {
        kld_serve_error(r, 404, "model", "model %s is not served here (this server serves \"%s\")",
                        kld_serve_show(m), s->opts->model_id);
        return false;
    }
    return true;
}

void kld_serve_completions(kld_server *s, const json_t *req, kld_serve_reply *r) {
    static atomic_ullong counter;
    if (!json_is_object(req)) {
        kld_serve_error(r, 400, NULL, "the request body must be a JSON object, got %s", kld_serve_show(req));
        return;
    }
    kld_serve_params p;
    if (!kld_serve_check_model(s, req, r) || !kld_serve_read_params(s, req, false, &p, r)) return;
    size_t n_prompts = 0;
    kld_tok_ids *prompts = read_prompts(s, req, &n_prompts, r);
    if (!prompts) return;
    kld_serve_engine *e = s->engine;
    json_t *choices = json_array();
    size_t n_in = 0, n_out = 0;
    /* the reply's size: every scored token carries N alternatives */
    int64_t entries = 0;
    for (size_t i = 0; i < n_prompts && p.n_top >= 0; i++)
        entries += ((p.echo ? (int64_t)prompts[i].n : 0) + p.max_tokens) * (p.n_top > 1 ? p.n_top : 1);
    if (entries > s->opts->max_logprobs) {
        kld_serve_error(r, 413, "logprobs", "'logprobs' %lld over %lld tokens would return %lld log-probabilities: "
                        "the limit is %lld (--max-logprobs); send fewer tokens per request",
                        (long long)p.n_top, (long long)(entries / (p.n_top > 1 ? p.n_top : 1)), (long long)entries,
                        (long long)s->opts->max_logprobs);
        goto done;
    }
    for (size_t i = 0; i < n_prompts; i++) {
        if ((int64_t)prompts[i].n + p.max_tokens > e->n_ctx) {
            kld_serve_error(r, 400, "max_tokens", "prompt %zu has %zu tokens: with 'max_tokens' %lld it exceeds "
                            "the context of %lld tokens (--ctx)", i, prompts[i].n, (long long)p.max_tokens,
                            (long long)e->n_ctx);
            goto done;
        }
    }
    for (size_t i = 0; i < n_prompts; i++) {
        kld_serve_stop_check sc = {e->tok, &p, SIZE_MAX};
        kld_serve_job job = {prompts[i].ids, prompts[i].n, p.max_tokens, p.sampler, i, p.echo, p.n_top,
                             p.ignore_eos, kld_serve_stop_strings, &sc, kld_serve_client_gone};
        kld_serve_result res;
        kld_error err = {0};
        if (kld_serve_engine_run(e, &job, &res, &err) != KLD_OK) {
            kld_serve_error(r, err.status == KLD_ERR_ARG ? 400 : 500, "prompt", "prompt %zu: %s", i, err.msg);
            goto done;
        }
        json_t *c = choice_json(e, &p, &res, i, sc.cut);
        n_in += res.n_prompt;
        n_out += res.ids.n - res.n_prompt;
        kld_serve_result_free(&res);
        if (!c) {
            kld_serve_error(r, 500, NULL, "out of memory");
            goto done;
        }
        json_array_append_new(choices, c);
    }
    char id[48];
    snprintf(id, sizeof id, "cmpl-kldeval-%llu", (unsigned long long)++counter);
    json_decref(r->body);
    r->status = 200;
    r->body = json_pack("{s:s,s:s,s:I,s:s,s:O,s:{s:I,s:I,s:I}}", "id", id, "object", "text_completion",
                        "created", (json_int_t)time(NULL), "model", s->opts->model_id, "choices", choices,
                        "usage", "prompt_tokens", (json_int_t)n_in, "completion_tokens", (json_int_t)n_out,
                        "total_tokens", (json_int_t)(n_in + n_out));
done:
    json_decref(choices);
    for (size_t i = 0; i < n_prompts; i++) kld_tok_ids_free(&prompts[i]);
    free(prompts);
}
