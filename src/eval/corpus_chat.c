/* corpus_chat.c — the conversations of a JSONL corpus ({"messages": …}
 * lines) rendered as documents with a model's chat template
 * (add_generation_prompt false: a corpus conversation is complete), and the
 * check that the other arm's template renders them the same: both arms of
 * a run must read one token stream, and the plan is tokenized once. */
#include "eval/corpus.h"

#include <stdio.h>
#include <stdlib.h>

static kld_status no_template(const kld_corpus *c, const char *model, kld_error *err) {
    for (size_t d = 0; d < c->n_docs; d++)
        if (c->messages[d])
            return kld_fail(err, KLD_ERR_ARG,
                            "%s:%zu: field \"messages\": %s has no chat template (GGUF "
                            "tokenizer.chat_template or tokenizer_config.json chat_template)",
                            c->name, c->doc_line[d], model);
    return KLD_OK;
}

static kld_status render_doc(const kld_corpus *c, size_t d, const kld_chat_template *t,
                             const char *model, char **text, bool *add_bos, kld_error *err) {
    kld_status st = kld_chat_apply(t, c->messages[d], false, text, add_bos, err);
    if (st) kld_error_prefix(err, "%s:%zu: field \"messages\": %s (%s)", c->name, c->doc_line[d],
                             model, t->origin);
    return st;
}

kld_status kld_corpus_render_chat(kld_corpus *c, const kld_chat_template *t, const char *model,
                                  kld_error *err) {
    if (c->n_chat_docs == 0) return KLD_OK;
    if (!t->text) return no_template(c, model, err);
    for (size_t d = 0; d < c->n_docs; d++) {
        if (!c->messages[d]) continue;
        char *text;
        bool add_bos;
        kld_status st = render_doc(c, d, t, model, &text, &add_bos, err);
        if (st) return st;
        free(c->docs[d]);
        c->docs[d] = text;
        c->doc_len[d] = strlen(text);
        c->doc_add_bos[d] = add_bos;
    }
    free(c->chat_origin);
    c->chat_origin = kld_strdup(t->origin);
    return c->chat_origin ? KLD_OK : kld_fail(err, KLD_ERR_NOMEM, "out of memory");
}

/* The byte offset where a and b first differ. */
static size_t first_difference(const char *a, const char *b) {
    size_t i = 0;
    while (a[i] && a[i] == b[i]) i++;
    return i;
}

kld_status kld_corpus_check_chat(const kld_corpus *c, const kld_chat_template *t, const char *model,
                                 kld_error *err) {
    if (c->n_chat_docs == 0) return KLD_OK;
    if (!t->text) return no_template(c, model, err);
    for (size_t d = 0; d < c->n_docs; d++) {
        if (!c->messages[d]) continue;
        if (!c->docs[d])
            return kld_fail(err, KLD_ERR_ARG, "%s:%zu: the conversation was not rendered", c->name,
                            c->doc_line[d]);
        char *text;
        bool add_bos;
        kld_status st = render_doc(c, d, t, model, &text, &add_bos, err);
        if (st) return st;
        bool same_text = !strcmp(text, c->docs[d]);
        size_t at = first_difference(text, c->docs[d]);
        free(text);
        if (same_text && add_bos == c->doc_add_bos[d]) continue;
        char why[96];
        if (same_text) snprintf(why, sizeof why, "the same text, but only one adds BOS");
        else snprintf(why, sizeof why, "the texts differ from byte %zu", at);
        return kld_fail(err, KLD_ERR_MISMATCH,
                        "%s:%zu: document %zu renders differently with the chat template of %s (%s) "
                        "than with the reference's (%s): %s; both arms must read the same text",
                        c->name, c->doc_line[d], d + 1, model, t->origin,
                        c->chat_origin ? c->chat_origin : "?", why);
    }
    return KLD_OK;
}

kld_status kld_corpus_chat_with(kld_corpus *c, bool check, const kld_source *src,
                                const kld_tokenizer *tok, kld_error *err) {
    if (c->n_chat_docs == 0) return KLD_OK;
    kld_chat_template t;
    kld_status st = kld_chat_template_open(src, tok, &t, err);
    if (st) return st;
    st = check ? kld_corpus_check_chat(c, &t, src->path, err) : kld_corpus_render_chat(c, &t, src->path, err);
    kld_chat_template_close(&t);
    return st;
}

void kld_corpus_forms_json(const kld_corpus *c, json_t *o) {
    if (c->kind != KLD_CORPUS_TEXT) return;
    json_object_set_new(o, "documents_text", json_integer((json_int_t)c->n_text_docs));
    json_object_set_new(o, "documents_messages", json_integer((json_int_t)c->n_chat_docs));
    json_object_set_new(o, "chat_template", c->chat_origin ? json_string(c->chat_origin) : json_null());
}
