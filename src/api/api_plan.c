/* api_plan.c — the public window plan of a corpus (kld_corpus_plan, kld.h):
 * the windows `kl` cuts, for engines that compute their own logits. */
#include "api/api.h"

#include "engine/engine.h"
#include "eval/plan.h"

#include <stdlib.h>

struct kld_corpus_plan {
    kld_corpus *corpus;
    kld_plan plan;
    int32_t *fed;          /* the windows' tokens as fed (BOS replacement applied) */
    int64_t *fed_at;       /* where each window's tokens start in fed */
};

void kld_corpus_plan_free(kld_corpus_plan *p) {
    if (!p) return;
    kld_plan_free(&p->plan);
    kld_corpus_free(p->corpus);
    free(p->fed);
    free(p->fed_at);
    free(p);
}

/* Each window as fed, so that a caller's engine sees exactly what kl feeds. */
static kld_status copy_fed(kld_corpus_plan *p, kld_error *err) {
    size_t n = p->plan.n_windows, total = 0;
    for (size_t w = 0; w < n; w++) total += (size_t)p->plan.windows[w].len;
    p->fed = malloc((total ? total : 1) * sizeof *p->fed);
    p->fed_at = malloc((n ? n : 1) * sizeof *p->fed_at);
    if (!p->fed || !p->fed_at)
        return kld_fail(err, KLD_ERR_NOMEM, "out of memory for %zu tokens", total);
    size_t at = 0;
    for (size_t w = 0; w < n; w++) {
        const kld_window *win = &p->plan.windows[w];
        p->fed_at[w] = (int64_t)at;
        memcpy(p->fed + at, win->tokens, (size_t)win->len * sizeof *p->fed);
        if (win->first_token >= 0) p->fed[at] = win->first_token;
        at += (size_t)win->len;
    }
    return KLD_OK;
}

kld_status kld_corpus_plan_open(kld_model *model, const kld_plan_options *o, kld_corpus_plan **out,
                                kld_error *err) {
    *out = NULL;
    if (!model || !o) return kld_fail(err, KLD_ERR_ARG, "kld_corpus_plan_open: NULL argument");
    kld_chunking ch = o->chunking == KLD_CHUNKING_DEFAULT ? KLD_CHUNKING_DOC : o->chunking;
    int64_t ctx = o->ctx > 0 ? o->ctx : 512;
    if (ctx < 2 || (ch == KLD_CHUNKING_LLAMACPP && ctx < 4))
        return kld_fail(err, KLD_ERR_ARG, "ctx %lld is too short for %s chunking", (long long)ctx,
                        kld_chunking_name(ch));
    kld_corpus_plan *p = calloc(1, sizeof *p);
    if (!p) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    const kld_tokenizer *tok = NULL;
    kld_error tok_err = {0};
    if (kld_api_tokenizer(model, &tok, &tok_err) != KLD_OK) tok = NULL; /* an ids corpus needs none */
    kld_plan_input in = {o->corpus_path, o->corpus_format ? o->corpus_format : "auto", o->ids_path,
                         kld_model_source(model)->path, kld_model_source(model), tok, NULL, NULL,
                         {ch, ctx, o->max_docs, o->max_tokens, o->max_chunks, false,
                          (int32_t)kld_model_hparams(model)->n_vocab}};
    kld_status st = kld_plan_corpus_load(&in, &p->corpus, &p->plan, err);
    if (!st) st = copy_fed(p, err);
    if (st) {
        kld_corpus_plan_free(p);
        return st;
    }
    *out = p;
    return KLD_OK;
}

size_t kld_corpus_plan_count(const kld_corpus_plan *p) { return p ? p->plan.n_windows : 0; }

kld_status kld_corpus_plan_window(const kld_corpus_plan *p, size_t i, kld_window_view *out,
                                  kld_error *err) {
    if (!p || !out || i >= p->plan.n_windows)
        return kld_fail(err, KLD_ERR_ARG, "window %zu of %zu", i, p ? p->plan.n_windows : 0);
    const kld_window *w = &p->plan.windows[i];
    *out = (kld_window_view){p->fed + p->fed_at[i], w->len, w->score_from, w->score_to, w->new_doc};
    return KLD_OK;
}

int32_t kld_corpus_plan_next(const kld_corpus_plan *p, size_t i, int64_t r) {
    if (!p || i >= p->plan.n_windows) return -1;
    return kld_window_next(&p->plan.windows[i], r);
}
