/* plan_corpus.c — a corpus file (or the built-in corpus, or pre-tokenized
 * ids) → its windows for a model: the one path `kl`, `dump` and the public
 * kld_corpus_plan share (plan.h). */
#include "eval/plan.h"

kld_status kld_plan_corpus_load(const kld_plan_input *in, kld_corpus **corpus, kld_plan *plan,
                                kld_error *err) {
    *corpus = NULL;
    kld_status st = in->ids_path ? kld_corpus_load_ids(in->ids_path, corpus, err)
                                 : kld_corpus_load_text(in->corpus_path, in->corpus_format, corpus, err);
    if (st) return st;
    kld_corpus *c = *corpus;
    if (!in->tok && c->kind == KLD_CORPUS_TEXT)
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: cannot read its tokenizer; use --ids-file",
                        in->model_name);
    /* conversations: rendered with the model's template; a second model must
     * render them identically (the plan is tokenized once) */
    if (c->kind == KLD_CORPUS_TEXT &&
        (st = kld_corpus_chat_with(c, false, in->src, in->tok, err)))
        return st;
    if (c->kind == KLD_CORPUS_TEXT && in->check_src &&
        (st = kld_corpus_chat_with(c, true, in->check_src, in->check_tok, err)))
        return st;
    return kld_plan_from_corpus(c, in->tok, &in->opts, plan, err);
}
