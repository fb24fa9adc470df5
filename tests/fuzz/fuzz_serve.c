/* fuzz_serve.c — libFuzzer harness for `kldeval serve`'s request handling:
 * the first byte picks the endpoint (completions, chat completions,
 * tokenize, detokenize), the rest is the request body, handled as
 * serve_http.c handles it (parsed with jansson, then the handler) on
 * stories260K (run from the repository root). Every reply must be 200 or a
 * 4xx with an OpenAI error object carrying a message; generation is capped
 * by the model's 128-token context. */
#include "eval/arm.h"
#include "fuzz_common.h"
#include "serve/serve.h"

static kld_server server;
static kld_serve_opts opts = {.host = "127.0.0.1", .model_id = "m", .max_body = 1 << 20, .max_prompts = 8,
                              .max_logprobs = 1 << 16, .timeout_s = 1, .max_connections = 1};

static void open_once(void) {
    if (server.engine) return;
    kld_arm_spec spec = {.kind = KLD_ARM_MODEL, .path = "../shared/models/stories260K/f32.gguf"};
    kld_arm_parsed parsed;
    kld_error err = {0};
    if (kld_arm_spec_parse(&spec, "model", &parsed, &err) != KLD_OK ||
        kld_serve_engine_open(&parsed, 1, 0, 2, &server.engine, &err) != KLD_OK) {
        fprintf(stderr, "fuzz_serve: %s (run from the repository root)\n", err.msg);
        abort();
    }
    server.opts = &opts;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    open_once();
    static void (*const handlers[])(kld_server *, const json_t *, kld_serve_reply *) = {
        kld_serve_completions, kld_serve_chat, kld_serve_tokenize, kld_serve_detokenize};
    json_error_t je;
    json_t *req = json_loadb((const char *)data + 1, size - 1, 0, &je);
    if (!req) return 0; /* serve_http.c answers 400 before any handler */
    kld_serve_reply r = {0};
    handlers[data[0] % 4](&server, req, &r);
    const json_t *msg = json_object_get(json_object_get(r.body, "error"), "message");
    if (!r.body || (r.status != 200 && !(r.status >= 400 && r.status < 500 && json_is_string(msg)))) {
        fprintf(stderr, "fuzz_serve: status %u without a 4xx error object\n", r.status);
        abort();
    }
    fuzz_sink ^= (uint8_t)r.status;
    json_decref(r.body);
    json_decref(req);
    return 0;
}
