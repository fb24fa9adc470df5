/* serve_tokenize.c — the small endpoints: /tokenize and /detokenize (what
 * lm-evaluation-harness's remote tokenizer calls), /tokenizer_info (BOS,
 * EOS, the chat template), /v1/models and /health. */
#include "serve/serve.h"

#include <stdlib.h>
#include <string.h>

static bool need_object(const json_t *req, kld_serve_reply *r) {
    if (json_is_object(req)) return true;
    kld_serve_error(r, 400, NULL, "the request body must be a JSON object, got %s", kld_serve_show(req));
    return false;
}

static void reply(kld_serve_reply *r, json_t *body) {
    json_decref(r->body);
    r->status = body ? 200 : 500;
    r->body = body ? body : json_pack("{s:{s:s,s:s}}", "error", "message", "out of memory", "type", "server_error");
}

void kld_serve_tokenize(kld_server *s, const json_t *req, kld_serve_reply *r) {
    if (!need_object(req, r) || !kld_serve_check_model(s, req, r)) return;
    const json_t *prompt = json_object_get(req, "prompt");
    bool add_special = true;
    if (!kld_serve_get_bool(req, "add_special_tokens", &add_special, r)) return;
    if (!json_is_string(prompt)) {
        kld_serve_error(r, 400, "prompt", "'prompt' must be a string, got %s", kld_serve_show(prompt));
        return;
    }
    kld_tok_ids ids = {0};
    kld_error err = {0};
    const unsigned flags = KLD_TOK_PARSE_SPECIAL | (add_special ? KLD_TOK_ADD_SPECIAL : 0);
    if (kld_tok_encode(s->engine->tok, json_string_value(prompt), json_string_length(prompt), flags, &ids, &err)) {
        kld_serve_error(r, 400, "prompt", "%s", err.msg);
        return;
    }
    json_t *tokens = json_array();
    for (size_t i = 0; i < ids.n; i++) json_array_append_new(tokens, json_integer(ids.ids[i]));
    reply(r, json_pack("{s:o,s:I,s:I}", "tokens", tokens, "count", (json_int_t)ids.n, "max_model_len",
                       (json_int_t)s->engine->n_ctx));
    kld_tok_ids_free(&ids);
}

void kld_serve_detokenize(kld_server *s, const json_t *req, kld_serve_reply *r) {
    if (!need_object(req, r) || !kld_serve_check_model(s, req, r)) return;
    const json_t *tokens = json_object_get(req, "tokens");
    if (!json_is_array(tokens)) {
        kld_serve_error(r, 400, "tokens", "'tokens' must be a list of token ids, got %s", kld_serve_show(tokens));
        return;
    }
    kld_tok_ids ids = {0};
    if (!kld_serve_get_ids(tokens, "tokens", s->engine->n_vocab, &ids, r)) {
        kld_tok_ids_free(&ids);
        return;
    }
    char *raw = NULL, *text = NULL;
    size_t len = 0;
    kld_error err = {0};
    /* special tokens kept, so that a tokenize/detokenize round trip holds */
    if (ids.n && kld_tok_decode(s->engine->tok, ids.ids, ids.n, 0, &raw, &len, &err) != KLD_OK) {
        kld_serve_error(r, 400, "tokens", "%s", err.msg);
    } else if (!(text = kld_serve_utf8(raw ? raw : "", len, NULL))) {
        kld_serve_error(r, 500, NULL, "out of memory");
    } else {
        reply(r, json_pack("{s:s}", "prompt", text));
    }
    free(raw);
    free(text);
    kld_tok_ids_free(&ids);
}

/* A special token's piece as a JSON string (null without one). */
static json_t *piece_json(const kld_tokenizer *tok, int32_t id) {
    size_t len = 0;
    const char *piece = id >= 0 ? kld_tok_piece(tok, id, &len) : NULL;
    if (!piece) return json_null();
    char *text = kld_serve_utf8(piece, len, NULL);
    json_t *v = text ? json_string(text) : json_null();
    free(text);
    return v;
}

void kld_serve_tokenizer_info(kld_server *s, const json_t *req, kld_serve_reply *r) {
    (void)req;
    const kld_serve_engine *e = s->engine;
    reply(r, json_pack("{s:o,s:o,s:n,s:o,s:I,s:b,s:s}", "eos_token", piece_json(e->tok, kld_tok_eos(e->tok)),
                       "bos_token", piece_json(e->tok, kld_tok_bos(e->tok)), "pad_token", "chat_template",
                       e->chat.text ? json_string(e->chat.text) : json_null(), "model_max_length",
                       (json_int_t)e->n_ctx, "add_bos_token", kld_tok_adds_bos(e->tok), "tokenizer_class",
                       "kldeval"));
}

void kld_serve_models(kld_server *s, const json_t *req, kld_serve_reply *r) {
    (void)req;
    reply(r, json_pack("{s:s,s:[{s:s,s:s,s:i,s:s,s:I}]}", "object", "list", "data", "id", s->opts->model_id,
                       "object", "model", "created", 0, "owned_by", "kldeval", "max_model_len",
                       (json_int_t)s->engine->n_ctx));
}

void kld_serve_health(kld_server *s, const json_t *req, kld_serve_reply *r) {
    (void)req;
    kld_serve_engine *e = s->engine;
    pthread_mutex_lock(&e->lock);
    const uint64_t steps = e->n_steps, rows = e->n_batched_rows, max_batch = e->max_batch;
    const uint64_t cancelled = e->n_cancelled;
    pthread_mutex_unlock(&e->lock);
    /* how the decode steps were batched so far: a monitor's (and the tests') view */
    reply(r, json_pack("{s:s,s:i,s:I,s:I,s:I,s:I}", "status", "ok", "parallel", e->parallel, "decode_steps",
                       (json_int_t)steps, "decode_rows", (json_int_t)rows, "max_batch", (json_int_t)max_batch,
                       "cancelled", (json_int_t)cancelled));
}
