/* chat_source.c — where a model's chat template comes from (GGUF
 * tokenizer.chat_template, else a Hugging Face folder's
 * tokenizer_config.json "chat_template") with the BOS/EOS pieces the
 * template sees, and the one way a conversation becomes a prompt or a
 * corpus document (no doubled BOS). */
#include "chat/chat.h"

#include <stdio.h>
#include <stdlib.h>

static char *piece_dup(const kld_tokenizer *t, int32_t id) {
    size_t n = 0;
    const char *p = t && id >= 0 ? kld_tok_piece(t, id, &n) : NULL;
    return p ? kld_strndup(p, n) : kld_strdup("");
}

/* HF: tokenizer_config.json's "chat_template", a string or a list of
 * {name, template} (the one named "default" is apply_chat_template's). A
 * missing file or key is no template; a malformed file is an error. */
static kld_status hf_chat_template(const char *dir, char **out, char *origin, size_t origin_n,
                                   kld_error *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    FILE *f = fopen(path, "rb");
    if (!f) return KLD_OK;
    fclose(f);
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    if (!j) return kld_fail(err, KLD_ERR_FORMAT, "%s: line %d: %s", path, je.line, je.text);
    json_t *ct = json_object_get(j, "chat_template");
    const char *t = json_string_value(ct);
    size_t i;
    json_t *e;
    if (json_is_array(ct))
        json_array_foreach(ct, i, e) {
            const char *name = json_string_value(json_object_get(e, "name"));
            if (name && !strcmp(name, "default")) t = json_string_value(json_object_get(e, "template"));
        }
    if (t && !(*out = kld_strdup(t))) {
        json_decref(j);
        return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    }
    if (t) snprintf(origin, origin_n, "%s chat_template", path);
    json_decref(j);
    return KLD_OK;
}

kld_status kld_chat_template_open(const kld_source *src, const kld_tokenizer *tok,
                                  kld_chat_template *out, kld_error *err) {
    memset(out, 0, sizeof *out);
    kld_str t;
    kld_status st = KLD_OK;
    if (src->gguf && kld_gguf_get_str(src->gguf, "tokenizer.chat_template", &t)) {
        out->text = kld_strndup(t.ptr, (size_t)t.len);
        snprintf(out->origin, sizeof out->origin, "%s: GGUF tokenizer.chat_template", src->path);
        if (!out->text) st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    } else if (src->dir) {
        st = hf_chat_template(src->dir, &out->text, out->origin, sizeof out->origin, err);
    }
    if (!st) {
        out->bos = piece_dup(tok, tok ? kld_tok_bos(tok) : -1);
        out->eos = piece_dup(tok, tok ? kld_tok_eos(tok) : -1);
        if (!out->bos || !out->eos) st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    }
    if (st) kld_chat_template_close(out);
    return st;
}

void kld_chat_template_close(kld_chat_template *t) {
    free(t->text);
    free(t->bos);
    free(t->eos);
    memset(t, 0, sizeof *t);
}

kld_status kld_chat_apply_vars(const kld_chat_template *t, const json_t *messages,
                               bool add_generation_prompt, const json_t *extra, char **out,
                               bool *add_bos, kld_error *err) {
    *out = NULL;
    if (!t->text) return kld_fail(err, KLD_ERR_ARG, "the model has no chat template");
    kld_chat_opts o = {.messages = messages, .add_generation_prompt = add_generation_prompt,
                       .bos_token = t->bos, .eos_token = t->eos, .extra = extra};
    kld_status st = kld_chat_render(t->text, &o, out, err);
    /* no doubled BOS: the template may write it itself */
    *add_bos = st == KLD_OK && !kld_chat_has_bos(*out, t->bos);
    return st;
}

kld_status kld_chat_apply(const kld_chat_template *t, const json_t *messages,
                          bool add_generation_prompt, char **out, bool *add_bos, kld_error *err) {
    return kld_chat_apply_vars(t, messages, add_generation_prompt, NULL, out, add_bos, err);
}
