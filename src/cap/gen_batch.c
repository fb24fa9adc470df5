/* gen_batch.c — greedy generation with several prompts in flight: one
 * session per prompt (the cap model's own plus further ones on the same
 * pool with the same levers), each prompt prefilled alone, then every
 * token step of the sessions in flight is one kld_session_decode_batch,
 * whose weight products run once with M = B rows instead of B times with
 * M = 1. The engine gives each row the bits of its session's own step
 * (test_engine_batch), so the texts do not depend on the batch size or
 * on which prompts share a step; ties go to the lower id. A sampled item
 * (sampler.c) draws step g's token with kld_cap_uniform(seed, item,
 * sample, g), a function of the item's keys alone, so sampling keeps that
 * independence.
 *
 * Thinking budget: while the text (after a prompt that may itself leave a
 * "<think>" open) is inside a thinking block, each generated token counts;
 * when think_budget have been counted the next tokens are not drawn but
 * forced: the tokens of KLD_CAP_THINK_CLOSE ("\n</think>\n\n"), one per
 * step (they count against max_new; a SentencePiece tokenizer's dummy
 * prefix may add a space before them), after which generation goes on as
 * usual. One close is forced per response; a later block is not bounded. */
#include "cap/run.h"

#include <stdint.h>
#include <stdlib.h>

#define BATCH_MAX 64
/* Further sessions' arenas (mostly KV cache) the default batch may use. */
#define BATCH_DEFAULT_BYTES (UINT64_C(4) << 30)

int kld_cap_default_batch(const kld_cap_lm *lm) {
    /* 8 rows amortise the weight reads well on every thread count (more
     * rows lengthen each step while the few items of a task run out) */
    int b = 8;
    const uint64_t arena = lm->s ? kld_session_plan(lm->s)->arena_bytes : 0;
    if (arena > 0 && (uint64_t)(b - 1) * arena > BATCH_DEFAULT_BYTES) b = 1 + (int)(BATCH_DEFAULT_BYTES / arena);
    return b;
}

typedef struct slot {
    kld_session *s;
    size_t item;          /* SIZE_MAX: free */
    kld_tok_ids gen;      /* tokens generated so far */
    char *out;            /* their text */
    int g;                /* tokens taken */
    int32_t next;         /* the token to decode next */
    float *logits;        /* this slot's next-token row */
    kld_tok_ids force;    /* tokens forced in place of draws (the thinking close) */
    size_t force_at;
    bool prompt_open;     /* the prompt leaves a thinking block open */
    bool think_closed;    /* the close was forced */
    int think_tokens;
} slot;

/* The sampler's scratch (steps run one after another): 2 n_vocab
 * candidates, n_vocab probabilities. */
typedef struct scratch {
    kld_cap_cand *cand;
    double *prob;
} scratch;

/* Counts a token inside the thinking block and forces its close when the
 * budget is spent. */
static kld_status think_budget(kld_cap_lm *lm, slot *sl, const kld_cap_gen_item *it, kld_error *err) {
    if (it->think_budget <= 0 || sl->think_closed || !kld_cap_thinking_open(sl->out, sl->prompt_open))
        return KLD_OK;
    if (++sl->think_tokens < it->think_budget) return KLD_OK;
    sl->think_closed = true;
    sl->force.n = sl->force_at = 0;
    return kld_tok_encode(lm->tok, KLD_CAP_THINK_CLOSE, strlen(KLD_CAP_THINK_CLOSE), KLD_TOK_PARSE_SPECIAL,
                          &sl->force, err);
}

/* One step from sl->logits: *more is true when the item goes on
 * (sl->next is to be decoded), false when its text is final. */
static kld_status step(kld_cap_lm *lm, slot *sl, const kld_cap_gen_item *it, const scratch *sc, bool *more,
                       kld_error *err) {
    *more = false;
    if (sl->g >= it->max_new || kld_session_pos(sl->s) >= lm->n_ctx) return KLD_OK;
    int32_t next;
    if (sl->force_at < sl->force.n) {
        next = sl->force.ids[sl->force_at++];
    } else {
        const kld_cap_sampler *sp = it->sampler;
        const double u = kld_cap_sampler_is_greedy(sp) ? 0 : kld_cap_uniform(sp->seed, it->item, it->sample, (uint64_t)sl->g);
        next = kld_cap_sample(sp, sl->logits, lm->n_vocab, u, sc->cand, sc->prob);
        if (next == kld_tok_eos(lm->tok)) return KLD_OK;
    }
    if (!kld_tok_ids_append(&sl->gen, &next, 1)) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    free(sl->out);
    sl->out = NULL;
    size_t out_len = 0;
    kld_status st = kld_tok_decode(lm->tok, sl->gen.ids, sl->gen.n, KLD_TOK_SKIP_SPECIAL, &sl->out, &out_len, err);
    if (st != KLD_OK) return st;
    if ((st = think_budget(lm, sl, it, err)) != KLD_OK) return st;
    for (int k = 0; it->stops && it->stops[k]; k++) {
        const char *hit = it->stops[k][0] ? strstr(sl->out, it->stops[k]) : NULL;
        if (hit) {
            sl->out[hit - sl->out] = '\0';
            return KLD_OK;
        }
    }
    sl->g++;
    sl->next = next;
    *more = sl->g < it->max_new && kld_session_pos(sl->s) < lm->n_ctx;
    return KLD_OK;
}

/* The item's text is final: hand it over and free the slot. */
static kld_status finish(slot *sl, char **texts, kld_error *err) {
    const size_t i = sl->item;
    texts[i] = sl->out ? sl->out : kld_strdup("");
    sl->out = NULL;
    sl->item = SIZE_MAX;
    sl->gen.n = 0;
    sl->force.n = sl->force_at = 0;
    return texts[i] ? KLD_OK : kld_fail(err, KLD_ERR_NOMEM, "out of memory");
}

typedef struct sched {
    kld_cap_lm *lm;
    const kld_cap_gen_item *items;
    size_t n, next_item;
    volatile int *stop;
    char **texts;
    scratch sc;
} sched;

/* Starts waiting items on the free slot sl until one goes on (or none
 * is left): prefill, then the first step from the prompt's logits. */
static kld_status fill(sched *q, slot *sl, kld_error *err) {
    while (sl->item == SIZE_MAX && q->next_item < q->n && !(q->stop && *q->stop)) {
        const size_t i = q->next_item++;
        const kld_cap_gen_item *it = &q->items[i];
        const int64_t room = it->max_new < q->lm->n_ctx / 2 ? it->max_new : q->lm->n_ctx / 2;
        kld_tok_ids ids = {0};
        kld_status st = kld_cap_prefill(q->lm, sl->s, it->prompt, it->add_bos, room, sl->logits, &ids, err);
        kld_tok_ids_free(&ids);
        if (st != KLD_OK) return st;
        sl->item = i;
        sl->g = 0;
        sl->gen.n = 0;
        sl->force.n = sl->force_at = 0;
        sl->think_closed = false;
        sl->think_tokens = 0;
        sl->prompt_open = it->think_budget > 0 && kld_cap_thinking_open(it->prompt, false);
        bool more = false;
        if ((st = step(q->lm, sl, it, &q->sc, &more, err)) != KLD_OK) return st;
        if (!more && (st = finish(sl, q->texts, err)) != KLD_OK) return st;
    }
    return KLD_OK;
}

/* The sessions beyond lm->s, made once and kept for later tasks. */
static kld_status batch_sessions(kld_cap_lm *lm, int want, kld_error *err) {
    if (lm->n_batch_s >= want) return KLD_OK;
    kld_session **ns = realloc(lm->batch_s, (size_t)want * sizeof *ns);
    if (!ns) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    lm->batch_s = ns;
    const kld_session_opts so = {.n_ctx = lm->n_ctx, .max_chunk = lm->chunk, .pool = kld_session_pool(lm->s),
                                 .levers = kld_session_levers(lm->s)};
    while (lm->n_batch_s < want) {
        kld_status st = kld_session_create_opts(lm->model, &so, &lm->batch_s[lm->n_batch_s], err);
        if (st != KLD_OK) return st;
        lm->n_batch_s++;
    }
    return KLD_OK;
}

kld_status kld_cap_generate_batch(kld_cap_lm *lm, const kld_cap_gen_item *items, size_t n, int batch,
                                  volatile int *stop, char **texts, size_t *n_done, kld_error *err) {
    *n_done = 0;
    for (size_t i = 0; i < n; i++) texts[i] = NULL;
    if (batch <= 0) batch = kld_cap_default_batch(lm);
    if (batch > BATCH_MAX) batch = BATCH_MAX;
    if (batch > lm->chunk) batch = (int)lm->chunk; /* one decode step holds B rows */
    if ((size_t)batch > n) batch = n ? (int)n : 1;
    kld_status st = batch_sessions(lm, batch - 1, err);
    if (st != KLD_OK) return st;
    const size_t nv = (size_t)lm->n_vocab;
    slot sl[BATCH_MAX];
    memset(sl, 0, sizeof sl);
    float *rows = malloc((size_t)batch * 2 * nv * sizeof(float)); /* slot rows, then the step's rows */
    if (!rows) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    for (int b = 0; b < batch; b++) {
        sl[b].s = b ? lm->batch_s[b - 1] : lm->s;
        sl[b].item = SIZE_MAX;
        sl[b].logits = rows + (size_t)b * nv;
    }
    float *out = rows + (size_t)batch * nv;
    sched q = {lm, items, n, 0, stop, texts, {NULL, NULL}};
    bool sampled = false;
    for (size_t i = 0; i < n; i++) sampled |= !kld_cap_sampler_is_greedy(items[i].sampler);
    if (sampled) {
        q.sc.cand = malloc(2 * nv * sizeof *q.sc.cand); /* the second half: the sort's */
        q.sc.prob = malloc(nv * sizeof *q.sc.prob);
        if (!q.sc.cand || !q.sc.prob) st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    }
    for (int b = 0; b < batch && st == KLD_OK; b++) st = fill(&q, &sl[b], err);
    kld_session *ss[BATCH_MAX];
    int32_t tok[BATCH_MAX];
    int who[BATCH_MAX];
    while (st == KLD_OK) {
        int k = 0;
        for (int b = 0; b < batch; b++)
            if (sl[b].item != SIZE_MAX) ss[k] = sl[b].s, tok[k] = sl[b].next, who[k++] = b;
        if (k == 0) break;
        if (k == 1) {
            st = kld_session_decode(ss[0], tok[0], sl[who[0]].logits, err);
        } else {
            st = kld_session_decode_batch(ss, k, tok, out, err);
            for (int r = 0; r < k && st == KLD_OK; r++)
                memcpy(sl[who[r]].logits, out + (size_t)r * nv, nv * sizeof(float));
        }
        for (int r = 0; r < k && st == KLD_OK; r++) {
            slot *x = &sl[who[r]];
            bool more = false;
            st = step(lm, x, &items[x->item], &q.sc, &more, err);
            if (st == KLD_OK && !more) st = finish(x, texts, err);
            if (st == KLD_OK && !more) st = fill(&q, x, err);
        }
    }
    for (int b = 0; b < batch; b++) {
        free(sl[b].out);
        kld_tok_ids_free(&sl[b].gen);
        kld_tok_ids_free(&sl[b].force);
    }
    free(rows);
    free(q.sc.cand);
    free(q.sc.prob);
    if (st != KLD_OK) {
        for (size_t i = 0; i < n; i++) free(texts[i]), texts[i] = NULL;
        return st;
    }
    *n_done = q.next_item; /* every started item has finished */
    return KLD_OK;
}
