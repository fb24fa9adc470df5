/* serve_params.c — the generation parameters of a completions or chat
 * request (max_tokens, temperature, top_p, top_k, min_p, seed, stop, echo,
 * logprobs, n, ignore_eos) into one struct, and the stop-string check run
 * after each generated token. */
#include "serve/serve.h"

#include <stdlib.h>
#include <string.h>

static bool read_stop(const json_t *req, kld_serve_params *p, kld_serve_reply *r) {
    const json_t *stop = json_object_get(req, "stop");
    if (json_is_string(stop)) {
        p->stop[p->n_stop++] = json_string_value(stop);
    } else if (json_is_array(stop) && json_array_size(stop) <= KLD_SERVE_MAX_STOP) {
        size_t i;
        const json_t *x;
        json_array_foreach(stop, i, x) {
            if (!json_is_string(x)) {
                kld_serve_error(r, 400, "stop", "'stop'[%zu] must be a string, got %s", i, kld_serve_show(x));
                return false;
            }
            p->stop[p->n_stop++] = json_string_value(x);
        }
    } else if (stop && !json_is_null(stop)) {
        kld_serve_error(r, 400, "stop", "'stop' must be a string or a list of up to %d strings, got %s",
                        KLD_SERVE_MAX_STOP, kld_serve_show(stop));
        return false;
    }
    for (size_t i = 0; i < p->n_stop; i++)
        if (!*p->stop[i]) {
            kld_serve_error(r, 400, "stop", "'stop' strings may not be empty");
            return false;
        }
    return true;
}

bool kld_serve_read_params(const kld_server *s, const json_t *req, bool chat, kld_serve_params *p,
                           kld_serve_reply *r) {
    const int64_t n_ctx = s->engine->n_ctx;
    int64_t n = 1, top_k = 0, seed = 0;
    double temperature = 1.0, top_p = 1.0, min_p = 0.0;
    bool stream = false, chat_logprobs = false;
    memset(p, 0, sizeof *p);
    p->max_tokens = chat ? -1 : 16; /* chat: the rest of the context, as OpenAI's */
    p->n_top = -1;
    if (!kld_serve_get_int(req, "max_tokens", 0, n_ctx, &p->max_tokens, r) ||
        (chat && !kld_serve_get_int(req, "max_completion_tokens", 0, n_ctx, &p->max_tokens, r)) ||
        !kld_serve_get_int(req, "n", 1, 1, &n, r) ||
        !kld_serve_get_int(req, "seed", INT64_MIN, INT64_MAX, &seed, r) ||
        !kld_serve_get_int(req, "top_k", -1, s->engine->n_vocab, &top_k, r) ||
        !kld_serve_get_real(req, "temperature", 0.0, 100.0, &temperature, r) ||
        !kld_serve_get_real(req, "top_p", 0.0, 1.0, &top_p, r) ||
        !kld_serve_get_real(req, "min_p", 0.0, 1.0, &min_p, r) ||
        !kld_serve_get_bool(req, "ignore_eos", &p->ignore_eos, r) ||
        !kld_serve_get_bool(req, "stream", &stream, r) || !read_stop(req, p, r))
        return false;
    if (chat) {
        if (!kld_serve_get_bool(req, "logprobs", &chat_logprobs, r)) return false;
        if (chat_logprobs) {
            kld_serve_error(r, 400, "logprobs", "'logprobs' in chat completions is not supported by kldeval "
                            "serve: use /v1/completions with 'echo' and 'logprobs' N");
            return false;
        }
    } else if (!kld_serve_get_int(req, "logprobs", 0, s->engine->n_vocab, &p->n_top, r) ||
               !kld_serve_get_bool(req, "echo", &p->echo, r) ||
               !kld_serve_get_bool(req, "return_tokens_as_token_ids", &p->ids_as_text, r) ||
               !kld_serve_get_bool(req, "return_logsumexp", &p->with_lse, r)) {
        return false;
    }
    if (stream) {
        kld_serve_error(r, 400, "stream", "'stream': true is not supported by kldeval serve");
        return false;
    }
    if (p->max_tokens == 0 && !p->echo) {
        kld_serve_error(r, 400, "max_tokens", "'max_tokens' 0 needs 'echo': true (nothing to return otherwise)");
        return false;
    }
    if (top_p <= 0.0) {
        kld_serve_error(r, 400, "top_p", "'top_p' must be in (0, 1], got %s",
                        kld_serve_show(json_object_get(req, "top_p")));
        return false;
    }
    if (temperature == 0.0) kld_cap_sampler_greedy(&p->sampler);
    else p->sampler = (kld_cap_sampler){temperature, top_k < 0 ? 0 : top_k, top_p, min_p, 0};
    p->sampler.seed = (uint64_t)seed;
    return true;
}

size_t kld_serve_find_stop(const kld_serve_params *p, const char *text, size_t len) {
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < p->n_stop; i++) {
        const size_t sl = strlen(p->stop[i]);
        for (size_t at = 0; at + sl <= len && at < best; at++)
            if (!memcmp(text + at, p->stop[i], sl)) best = at;
    }
    return best;
}

bool kld_serve_stop_strings(void *ctx, const int32_t *ids, size_t n_prompt, size_t n) {
    kld_serve_stop_check *sc = ctx;
    if (sc->p->n_stop == 0) return false;
    size_t len = 0;
    char *text = kld_serve_completion_bytes(sc->tok, ids, n_prompt, n, &len);
    if (!text) return false;
    sc->cut = kld_serve_find_stop(sc->p, text, len);
    free(text);
    return sc->cut != SIZE_MAX;
}
