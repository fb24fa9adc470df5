/* cmd_serve.c — `kldeval serve`: one arm over HTTP in the OpenAI
 * completions protocol (src/serve/, docs/serve.md). Flags only. */
#include "cli/args.h"
#include "cli/commands.h"
#include "eval/arm.h"
#include "serve/serve.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: kldeval serve -m ARM [--lever L] [--host 127.0.0.1] [--port 8080] [flags]\n"
            "  -m, --model ARM      the arm: MODEL[@POLICY][+ADAPTER[:SCALE]] (as kl's --arm)\n"
            "  --lever L            session levers NAME=VALUE[,...] (see kldeval kl --help)\n"
            "  --host ADDR          address to listen on (default 127.0.0.1, loopback only; any\n"
            "                       other address is reachable by others: give --api-key)\n"
            "  --port N             TCP port, 0 .. 65535 (default 8080; 0: any free port, printed)\n"
            "  --api-key KEY        require 'Authorization: Bearer KEY' on every request but\n"
            "                       GET /health (401 otherwise)\n"
            "  --model-name NAME    the model id clients send and /v1/models lists (default:\n"
            "                       the -m text); a request naming another model gets 404\n"
            "  --ctx N              context of the session, prompt + max_tokens, 1 .. 1048576\n"
            "                       (default: the model's training context, else 2048)\n"
            "  --threads N          threads, 1 .. 1024 (default: all cores), shared by the sessions\n"
            "  --parallel P         prompts in flight, 1 .. 64 (default 1): P sessions whose decode\n"
            "                       steps run as one batch; the values served do not depend on P\n"
            "                       (each session holds its own KV cache of --ctx positions)\n"
            "  --max-body BYTES     largest request body, 1024 .. 1073741824 (default 16777216;\n"
            "                       413 past it)\n"
            "  --max-prompts N      prompts in one request, 1 .. 65536 (default 1024; 413 past it)\n"
            "  --max-logprobs N     log-probabilities in one completions reply, tokens scored x\n"
            "                       'logprobs' N, 1 .. 2^30 (default 4194304; 413 past it)\n"
            "  --timeout S          close a connection idle for S seconds, 1 .. 3600 (default 30)\n"
            "  --max-connections N  connections at once, 1 .. 1024 (default 64)\n"
            "  -h, --help           this text\n"
            "Endpoints: POST /v1/completions, POST /v1/chat/completions, POST /tokenize,\n"
            "POST /detokenize, "
            "GET /tokenizer_info, GET /v1/models, GET /health (docs/serve.md).\n"
            "SIGTERM or SIGINT: requests in flight finish, then exit 0.\n");
}

int kld_cmd_serve(int argc, char **argv) {
    const char *model_path = NULL, *levers_text = NULL;
    kld_serve_opts o = {.host = "127.0.0.1", .port = 8080, .max_body = 16u << 20, .max_prompts = 1024,
                        .max_logprobs = 1 << 22, .timeout_s = 30, .max_connections = 64};
    int64_t threads = 0, n_ctx = 0, v64 = 0, parallel = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) { if (!(model_path = kld_arg_value(argc, argv, &i))) return 2; }
        else if (!strcmp(a, "--host")) { if (!(o.host = kld_arg_value(argc, argv, &i))) return 2; }
        else if (!strcmp(a, "--api-key")) { if (!(o.api_key = kld_arg_value(argc, argv, &i))) return 2; }
        else if (!strcmp(a, "--model-name")) { if (!(o.model_id = kld_arg_value(argc, argv, &i))) return 2; }
        else if (!strcmp(a, "--lever")) {
            if (!(v = kld_arg_value(argc, argv, &i)) || !kld_arg_levers(&levers_text, v)) return 2;
        } else if (!strcmp(a, "--port")) {
            if (!(v = kld_arg_value(argc, argv, &i)) || !kld_arg_int(a, v, 0, 65535, &v64)) return 2;
            o.port = (int)v64;
        } else if (!strcmp(a, "--threads")) {
            if (!(v = kld_arg_value(argc, argv, &i)) || !kld_arg_int(a, v, 1, 1024, &threads)) return 2;
        } else if (!strcmp(a, "--parallel")) {
            if (!(v = kld_arg_value(argc, argv, &i)) || !kld_arg_int(a, v, 1, KLD_SERVE_MAX_PARALLEL, &parallel))
                return 2;
        } else if (!strcmp(a, "--ctx")) {
            if (!(v = kld_arg_value(argc, argv, &i)) || !kld_arg_int(a, v, 1, 1 << 20, &n_ctx)) return 2;
        } else if (!strcmp(a, "--max-body")) {
            if (!(v = kld_arg_value(argc, argv, &i)) || !kld_arg_int(a, v, 1024, 1 << 30, &v64)) return 2;
            o.max_body = (size_t)v64;
        } else if (!strcmp(a, "--max-prompts")) {
            if (!(v = kld_arg_value(argc, argv, &i)) || !kld_arg_int(a, v, 1, 65536, &o.max_prompts)) return 2;
        } else if (!strcmp(a, "--max-logprobs")) {
            if (!(v = kld_arg_value(argc, argv, &i)) || !kld_arg_int(a, v, 1, 1LL << 30, &o.max_logprobs)) return 2;
        } else if (!strcmp(a, "--timeout")) {
            if (!(v = kld_arg_value(argc, argv, &i)) || !kld_arg_int(a, v, 1, 3600, &v64)) return 2;
            o.timeout_s = (unsigned)v64;
        } else if (!strcmp(a, "--max-connections")) {
            if (!(v = kld_arg_value(argc, argv, &i)) || !kld_arg_int(a, v, 1, 1024, &v64)) return 2;
            o.max_connections = (int)v64;
        } else {
            fprintf(stderr, "kldeval serve: unknown flag '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!model_path) {
        fprintf(stderr, "kldeval serve: need -m ARM\n");
        usage(stderr);
        return 2;
    }
    if (o.api_key && !*o.api_key) {
        fprintf(stderr, "kldeval serve: --api-key may not be empty\n");
        return 2;
    }
    if (!o.model_id) o.model_id = model_path;
    kld_arm_parsed spec;
    if (!kld_arg_model_spec("serve", model_path, levers_text, &spec)) return 2;
    sigset_t sigs; /* a SIGTERM during the load is taken once serving starts */
    kld_serve_block_signals(&sigs);
    kld_error err = {0};
    kld_server s = {NULL, &o};
    if (kld_serve_engine_open(&spec, (int)threads, n_ctx, (int)parallel, &s.engine, &err) != KLD_OK) {
        fprintf(stderr, "kldeval serve: %s\n", err.msg);
        return 1;
    }
    const kld_status st = kld_serve_run(&s, &err);
    if (st != KLD_OK) fprintf(stderr, "kldeval serve: %s\n", err.msg);
    kld_serve_engine_close(s.engine);
    return st == KLD_OK ? 0 : 1;
}
