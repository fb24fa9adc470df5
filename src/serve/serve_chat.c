/* serve_chat.c — POST /v1/chat/completions: the messages rendered with the
 * model's chat template by the renderer `cap` uses (src/chat, Hugging Face
 * apply_chat_template semantics, the generation prompt added), tokenized
 * with special tokens parsed (BOS added unless the template wrote it),
 * then generated as a completion; the reply is a chat.completion. */
#include "serve/serve.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* messages: a non-empty list of {role: string, content: string or null}. */
static bool check_messages(const json_t *msgs, kld_serve_reply *r) {
    if (!json_is_array(msgs) || json_array_size(msgs) == 0) {
        kld_serve_error(r, 400, "messages", "'messages' must be a non-empty list of {\"role\", \"content\"}, got %s",
                        kld_serve_show(msgs));
        return false;
    }
    size_t i;
    const json_t *m;
    json_array_foreach(msgs, i, m) {
        const json_t *role = json_object_get(m, "role"), *content = json_object_get(m, "content");
        if (!json_is_object(m) || !json_is_string(role)) {
            kld_serve_error(r, 400, "messages", "'messages'[%zu] must be an object with a string 'role', got %s", i,
                            kld_serve_show(m));
            return false;
        }
        if (content && !json_is_string(content) && !json_is_null(content)) {
            kld_serve_error(r, 400, "messages", "'messages'[%zu].content must be a string, got %s", i,
                            kld_serve_show(content));
            return false;
        }
    }
    return true;
}

static bool prompt_ids(const kld_serve_engine *e, const json_t *msgs, kld_tok_ids *ids, kld_serve_reply *r) {
    if (!e->chat.text) {
        kld_serve_error(r, 400, "messages", "the model has no chat template (GGUF tokenizer.chat_template or "
                        "tokenizer_config.json): use /v1/completions with the prompt as text");
        return false;
    }
    char *text = NULL;
    bool add_bos = true;
    kld_error err = {0};
    if (kld_chat_apply(&e->chat, msgs, true, &text, &add_bos, &err) != KLD_OK) {
        kld_serve_error(r, 400, "messages", "the chat template (%s): %s", e->chat.origin, err.msg);
        return false;
    }
    const kld_status st = kld_tok_encode(e->tok, text, strlen(text),
                                         KLD_TOK_PARSE_SPECIAL | (add_bos ? KLD_TOK_ADD_SPECIAL : 0), ids, &err);
    free(text);
    if (st != KLD_OK) {
        kld_serve_error(r, 400, "messages", "%s", err.msg);
        return false;
    }
    if (ids->n == 0) {
        kld_serve_error(r, 400, "messages", "the rendered conversation encodes to no tokens");
        return false;
    }
    if ((int64_t)ids->n >= e->n_ctx) {
        kld_serve_error(r, 413, "messages", "the rendered conversation has %zu tokens: the context is %lld (--ctx) "
                        "and leaves no room for a reply", ids->n, (long long)e->n_ctx);
        return false;
    }
    return true;
}

void kld_serve_chat(kld_server *s, const json_t *req, kld_serve_reply *r) {
    static atomic_ullong counter;
    if (!json_is_object(req)) {
        kld_serve_error(r, 400, NULL, "the request body must be a JSON object, got %s", kld_serve_show(req));
        return;
    }
    kld_serve_params p;
    const json_t *msgs = json_object_get(req, "messages");
    if (!kld_serve_check_model(s, req, r) || !kld_serve_read_params(s, req, true, &p, r) ||
        !check_messages(msgs, r))
        return;
    kld_serve_engine *e = s->engine;
    kld_tok_ids ids = {0};
    kld_serve_result res = {0};
    char *raw = NULL, *content = NULL;
    if (!prompt_ids(e, msgs, &ids, r)) goto done;
    const int64_t room = e->n_ctx - (int64_t)ids.n;
    if (p.max_tokens < 0) p.max_tokens = room;
    if (p.max_tokens > room) {
        kld_serve_error(r, 400, "max_tokens", "the conversation has %zu tokens: with 'max_tokens' %lld it exceeds "
                        "the context of %lld tokens (--ctx)", ids.n, (long long)p.max_tokens, (long long)e->n_ctx);
        goto done;
    }
    kld_serve_stop_check sc = {e->tok, &p, SIZE_MAX};
    kld_serve_job job = {ids.ids, ids.n, p.max_tokens, p.sampler, 0, false, -1, p.ignore_eos,
                         kld_serve_stop_strings, &sc, kld_serve_client_gone};
    kld_error err = {0};
    if (kld_serve_engine_run(e, &job, &res, &err) != KLD_OK) {
        kld_serve_error(r, err.status == KLD_ERR_ARG ? 400 : 500, "messages", "%s", err.msg);
        goto done;
    }
    size_t len = 0;
    raw = kld_serve_completion_bytes(e->tok, res.ids.ids, res.n_prompt, res.ids.n, &len);
    if (raw && sc.cut < len) len = sc.cut;
    if (!raw || !(content = kld_serve_utf8(raw, len, NULL))) {
        kld_serve_error(r, 500, NULL, "out of memory");
        goto done;
    }
    char id[48];
    snprintf(id, sizeof id, "chatcmpl-kldeval-%llu", (unsigned long long)++counter);
    const json_int_t n_in = (json_int_t)res.n_prompt, n_out = (json_int_t)(res.ids.n - res.n_prompt);
    json_decref(r->body);
    r->status = 200;
    r->body = json_pack("{s:s,s:s,s:I,s:s,s:[{s:i,s:{s:s,s:s},s:n,s:s}],s:{s:I,s:I,s:I}}", "id", id, "object",
                        "chat.completion", "created", (json_int_t)time(NULL), "model", s->opts->model_id,
                        "choices", "index", 0, "message", "role", "assistant", "content", content, "logprobs",
                        "finish_reason", res.finish_reason, "usage", "prompt_tokens", n_in,
                        "completion_tokens", n_out, "total_tokens", n_in + n_out);
done:
    free(raw);
    free(content);
    kld_serve_result_free(&res);
    kld_tok_ids_free(&ids);
}
