/* serve_http.c — the HTTP side of `kldeval serve` on libmicrohttpd (one
 * thread per connection; the engine's lock orders the model work): the
 * request body read up to its limit (413 past it, before reading it when
 * Content-Length says so), the Bearer key, the routes, JSON replies, and
 * SIGTERM/SIGINT: stop accepting, let requests in flight finish, return. */
#include "serve/serve.h"

#include <microhttpd.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef void (*handler_fn)(kld_server *s, const json_t *req, kld_serve_reply *r);

typedef struct route {
    const char *path, *method;
    handler_fn fn;
} route;

static const route routes[] = {
    {"/v1/completions", "POST", kld_serve_completions},
    {"/v1/chat/completions", "POST", kld_serve_chat},
    {"/tokenize", "POST", kld_serve_tokenize},
    {"/detokenize", "POST", kld_serve_detokenize},
    {"/tokenizer_info", "GET", kld_serve_tokenizer_info},
    {"/v1/models", "GET", kld_serve_models},
    {"/health", "GET", kld_serve_health},
};

/* One request's state across the handler's calls. */
typedef struct request {
    char *body;
    size_t len, cap;
    bool too_large;
} request;

static atomic_int in_flight;

/* The socket of the request this thread handles (one thread per connection). */
static _Thread_local int current_fd = -1;

bool kld_serve_client_gone(void) {
    if (current_fd < 0) return false;
    struct pollfd p = {.fd = current_fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

static enum MHD_Result send_reply(struct MHD_Connection *c, kld_serve_reply *r) {
    char *text = r->body ? json_dumps(r->body, JSON_COMPACT) : NULL;
    if (!text) {
        r->status = 500;
        text = kld_strdup("{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\"}}");
        if (!text) return MHD_NO;
    }
    struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", "application/json");
    if (r->status == 401) MHD_add_response_header(resp, "WWW-Authenticate", "Bearer");
    enum MHD_Result ret = MHD_queue_response(c, r->status, resp);
    MHD_destroy_response(resp);
    json_decref(r->body);
    r->body = NULL;
    return ret;
}

/* Constant-time comparison of the Bearer token with the key. */
static bool authorized(const kld_server *s, struct MHD_Connection *c) {
    if (!s->opts->api_key) return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h || strncmp(h, "Bearer ", 7)) return false;
    const char *got = h + 7, *want = s->opts->api_key;
    const size_t n = strlen(want);
    if (strlen(got) != n) return false;
    unsigned diff = 0;
    for (size_t i = 0; i < n; i++) diff |= (unsigned char)got[i] ^ (unsigned char)want[i];
    return diff == 0;
}

static void dispatch(kld_server *s, const char *url, const char *method, const request *rq,
                     kld_serve_reply *r) {
    const route *found = NULL;
    bool path_known = false;
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
        if (!strcmp(url, routes[i].path)) {
            path_known = true;
            if (!strcmp(method, routes[i].method)) found = &routes[i];
        }
    if (!path_known) {
        kld_serve_error(r, 404, NULL, "no such endpoint: %s %s", method, url);
        return;
    }
    if (!found) {
        kld_serve_error(r, 405, NULL, "%s does not take %s", url, method);
        return;
    }
    if (rq->too_large) {
        kld_serve_error(r, 413, NULL, "the request body exceeds %zu bytes (--max-body)", s->opts->max_body);
        return;
    }
    json_t *req = NULL;
    if (!strcmp(found->method, "POST")) {
        json_error_t je;
        req = json_loadb(rq->body ? rq->body : "", rq->len, 0, &je);
        if (!req) {
            kld_serve_error(r, 400, NULL, "the request body is not valid JSON: %s (line %d, column %d)", je.text,
                            je.line, je.column);
            return;
        }
    }
    found->fn(s, req, r);
    json_decref(req);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **state) {
    (void)version;
    kld_server *s = cls;
    kld_serve_reply r = {0};
    request *rq = *state;
    if (!rq) { /* the first call: headers only */
        if (!(rq = calloc(1, sizeof *rq))) return MHD_NO;
        *state = rq;
        atomic_fetch_add(&in_flight, 1);
        const bool health = !strcmp(url, "/health");
        if (!health && !authorized(s, c)) {
            kld_serve_error(&r, 401, NULL, "a valid 'Authorization: Bearer <key>' header is required");
            return send_reply(c, &r);
        }
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > s->opts->max_body) {
            kld_serve_error(&r, 413, NULL, "the request body of %s bytes exceeds %zu bytes (--max-body)", cl,
                            s->opts->max_body);
            return send_reply(c, &r);
        }
        return MHD_YES;
    }
    if (*upload_size) { /* a piece of the body */
        const size_t n = *upload_size;
        *upload_size = 0;
        if (rq->too_large || rq->len + n > s->opts->max_body) {
            rq->too_large = true; /* read and dropped: the reply comes at the end */
            return MHD_YES;
        }
        if (rq->len + n + 1 > rq->cap) {
            size_t cap = rq->cap ? rq->cap : 4096;
            while (cap < rq->len + n + 1) cap *= 2;
            char *b = realloc(rq->body, cap);
            if (!b) return MHD_NO;
            rq->body = b;
            rq->cap = cap;
        }
        memcpy(rq->body + rq->len, upload, n);
        rq->len += n;
        return MHD_YES;
    }
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    current_fd = ci ? ci->connect_fd : -1;
    dispatch(s, url, method, rq, &r);
    current_fd = -1;
    return send_reply(c, &r);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **state, enum MHD_RequestTerminationCode tc) {
    (void)cls;
    (void)c;
    (void)tc;
    request *rq = *state;
    if (!rq) return;
    free(rq->body);
    free(rq);
    *state = NULL;
    atomic_fetch_sub(&in_flight, 1);
}

static bool is_loopback(const struct sockaddr *sa) {
    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family == AF_INET6)
        return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr);
    return false;
}

void kld_serve_block_signals(sigset_t *sigs) {
    sigemptyset(sigs);
    sigaddset(sigs, SIGTERM);
    sigaddset(sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
}

kld_status kld_serve_run(kld_server *s, kld_error *err) {
    const kld_serve_opts *o = s->opts;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *ai = NULL;
    const int gai = getaddrinfo(o->host, NULL, &hints, &ai);
    if (gai != 0 || !ai) return kld_fail(err, KLD_ERR_ARG, "--host %s: %s", o->host, gai_strerror(gai));
    struct sockaddr_storage addr = {0};
    memcpy(&addr, ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(ai);
    const bool v6 = addr.ss_family == AF_INET6;
    if (v6) ((struct sockaddr_in6 *)&addr)->sin6_port = htons((uint16_t)o->port);
    else ((struct sockaddr_in *)&addr)->sin_port = htons((uint16_t)o->port);
    if (!is_loopback((struct sockaddr *)&addr) && !o->api_key)
        fprintf(stderr, "kldeval serve: warning: listening on %s, not a loopback address, with no "
                        "authentication: anyone who can reach it can use the model (give --api-key KEY)\n",
                o->host);
    sigset_t sigs;
    kld_serve_block_signals(&sigs);
    /* ITC: MHD_quiesce_daemon needs it in this threading mode */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ERROR_LOG | MHD_USE_ITC;
    if (v6) flags |= MHD_USE_IPv6;
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, (uint16_t)o->port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL, MHD_OPTION_CONNECTION_TIMEOUT, o->timeout_s,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)o->max_connections, MHD_OPTION_END);
    if (!d) return kld_fail(err, KLD_ERR_IO, "cannot listen on %s port %d (in use, or not an address here?)",
                            o->host, o->port);
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    const unsigned port = info ? info->port : (unsigned)o->port;
    fprintf(stderr, "kldeval serve: listening on http://%s%s%s:%u (model \"%s\")\n", v6 ? "[" : "", o->host,
            v6 ? "]" : "", port, o->model_id);
    fflush(stderr);
    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "kldeval serve: %s: finishing the requests in flight\n", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    const MHD_socket listener = MHD_quiesce_daemon(d); /* no new connections; ours to close */
    if (listener != MHD_INVALID_SOCKET) close(listener);
    while (atomic_load(&in_flight) > 0) nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    MHD_stop_daemon(d);
    return KLD_OK;
}
