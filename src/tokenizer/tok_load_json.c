/* tok_load_json.c — a Hugging Face tokenizer.json: the top level (model,
 * added_tokens, normalizer, pre_tokenizer, post_processor, decoder; the
 * steps are read by tok_json_steps.c, the model by tok_json_model.c), the
 * added tokens, and the special-token names of tokenizer_config.json.
 * Every construct that is not implemented is an error naming it.
 * `truncation` and `padding` are batch policies, not tokenization: they
 * are ignored (kldeval never truncates or pads). */
#include "tokenizer/tok_json.h"
#include "io/mapped_file.h"

#include <stdio.h>
#include <stdlib.h>

/* ---- added tokens ---- */

static kld_status added_tokens(tok_json_ctx *c, json_t *list, uint8_t *exclude) {
    kld_tokenizer *t = c->t;
    size_t n = json_array_size(list);
    t->added = calloc(n ? n : 1, sizeof *t->added);
    if (!t->added) return kld_fail(c->err, KLD_ERR_NOMEM, "out of memory");
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e) {
        json_t *content = json_object_get(e, "content");
        if (!json_is_string(content) || json_string_length(content) == 0)
            return kld_fail(c->err, KLD_ERR_FORMAT, "%s: added_tokens[%zu] has no content", c->name,
                            i);
        tok_added *a = &t->added[t->n_added++];
        a->content = tok_json_dup(content, &a->len);
        if (!a->content) return kld_fail(c->err, KLD_ERR_NOMEM, "out of memory");
        a->special = tok_json_bool(e, "special", false);
        a->lstrip = tok_json_bool(e, "lstrip", false);
        a->rstrip = tok_json_bool(e, "rstrip", false);
        a->single_word = tok_json_bool(e, "single_word", false);
        a->normalized = tok_json_bool(e, "normalized", !a->special);
        int32_t file_id = (int32_t)json_integer_value(json_object_get(e, "id"));
        int32_t id = tok_vocab_find(&t->vocab, a->content, a->len);
        if (id < 0) { /* not in the model's vocabulary: it takes its own id */
            kld_status st = tok_vocab_set(&t->vocab, file_id, a->content, a->len, 0.0f,
                                          KLD_TOKEN_USER_DEFINED, false, c->name, c->err);
            if (st) {
                kld_error_prefix(c->err, "added_tokens[%zu]", i);
                return st;
            }
            id = file_id;
            exclude[id] = 1;
        }
        a->id = id;
        t->vocab.type[id] = a->special ? KLD_TOKEN_CONTROL : KLD_TOKEN_USER_DEFINED;
        if (a->special) t->n_special++;
    }
    return KLD_OK;
}

/* Normalized added tokens are matched in normalized text, by their
 * normalized content. */
static kld_status normalize_added(tok_json_ctx *c) {
    kld_tokenizer *t = c->t;
    tok_matcher *m = tok_matcher_create();
    if (!m) return kld_fail(c->err, KLD_ERR_NOMEM, "out of memory");
    kld_status st = KLD_OK;
    for (size_t i = 0; i < t->n_added && !st; i++) {
        tok_added *a = &t->added[i];
        if (!a->normalized) continue;
        tok_buf out = {0};
        st = tok_normalize_steps(t->norms, t->n_norms, a->content, a->len, &out, m, c->err);
        if (!st) {
            a->ncontent = out.p ? out.p : kld_strdup("");
            a->nlen = out.n;
            if (!a->ncontent) st = kld_fail(c->err, KLD_ERR_NOMEM, "out of memory");
        }
    }
    tok_matcher_free(m);
    return st;
}

static kld_status load(tok_json_ctx *c, json_t *root) {
    kld_tokenizer *t = c->t;
    if (!json_is_object(root)) return tok_json_bad(c, "not a JSON object", "top level");
    json_t *added = json_object_get(root, "added_tokens");
    if (added && !json_is_null(added) && !json_is_array(added))
        return tok_json_bad(c, "not an array", "added_tokens");
    if (!added || json_is_null(added)) added = NULL;
    json_t *empty = json_array();
    kld_status st = tok_json_model(c, json_object_get(root, "model"), added ? added : empty);
    json_decref(empty);
    if (st) return st;
    uint8_t *exclude = calloc((size_t)t->vocab.n, 1);
    if (!exclude) return kld_fail(c->err, KLD_ERR_NOMEM, "out of memory");
    if (added) st = added_tokens(c, added, exclude);
    if (!st) st = tok_json_normalizer(c, json_object_get(root, "normalizer"));
    if (!st) st = tok_json_pre_tokenizer(c, json_object_get(root, "pre_tokenizer"), 0);
    if (!st) st = tok_json_post_processor(c, json_object_get(root, "post_processor"));
    if (!st) st = tok_json_decoder(c, json_object_get(root, "decoder"));
    if (!st) {
        t->byte_level = t->n_pres > 0 && t->pres[t->n_pres - 1].kind == PRE_BYTELEVEL;
        st = tok_vocab_finish(&t->vocab, t->byte_level, t->ignore_merges, exclude, c->name, c->err);
    }
    free(exclude);
    if (!st) st = normalize_added(c);
    if (!st) st = tok_added_build_index(t, c->err);
    if (!st) {
        if (t->n_prefix) t->bos = t->prefix_ids[0], t->add_bos = true;
        if (t->n_suffix) t->eos = t->suffix_ids[t->n_suffix - 1], t->add_eos = true;
        tok_buf nm = {0};
        json_t *pt = json_object_get(root, "pre_tokenizer");
        bool ok = (!pt || tok_json_pre_name(pt, &nm)) && tok_buf_append(&nm, "", 1);
        t->pre_name = ok ? nm.p : NULL;
        if (!ok) {
            tok_buf_free(&nm);
            st = kld_fail(c->err, KLD_ERR_NOMEM, "out of memory");
        }
    }
    return st;
}

kld_status kld_tok_open_json_text(const char *json, size_t len, const char *name,
                                  kld_tokenizer **out, kld_error *err) {
    *out = NULL;
    tok_json_ctx c = {.name = name, .err = err, .text = json, .text_len = len};
    if (!tok_json_find_model_members(json, len, name, &c.vocab, &c.merges, err)) return err->status;
    /* jansson parses the rest, the two big members replaced by {} and []
     * plus their newlines (so that its line numbers still match the file) */
    tok_buf rest = {0};
    size_t at = 0;
    bool ok = true;
    tok_json_span cut[2] = {c.vocab, c.merges};
    if (cut[1].end && cut[1].start < cut[0].start) {
        tok_json_span sw = cut[0];
        cut[0] = cut[1];
        cut[1] = sw;
    }
    for (int k = 0; k < 2 && ok; k++) {
        if (!cut[k].end) continue;
        ok &= tok_buf_append(&rest, json + at, cut[k].start - at);
        ok &= tok_buf_append(&rest, json[cut[k].start] == '{' ? "{}" : "[]", 2);
        for (const char *p = json + cut[k].start, *e = json + cut[k].end;
             ok && (p = memchr(p, '\n', (size_t)(e - p))) != NULL; p++)
            ok &= tok_buf_append(&rest, "\n", 1);
        at = cut[k].end;
    }
    ok = ok && tok_buf_append(&rest, json + at, len - at);
    if (!ok) {
        tok_buf_free(&rest);
        return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    }
    json_error_t je;
    json_t *root = json_loadb(rest.p, rest.n, 0, &je);
    tok_buf_free(&rest);
    if (!root)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: invalid JSON at line %d column %d: %s", name,
                        je.line, je.column, je.text);
    kld_tokenizer *t = NULL;
    kld_status st = tok_new(name, SRC_JSON, &t, err);
    if (!st) {
        c.t = t;
        st = load(&c, root);
    }
    json_decref(root);
    if (st) {
        kld_tok_free(t);
        return st;
    }
    *out = t;
    return KLD_OK;
}

/* tokenizer_config.json (transformers) names the special tokens that
 * tokenizer.json leaves implicit; used only for the ids kldeval reports
 * (an EOS to stop generation at), never to change what encode adds. */
static int32_t config_token(const kld_tokenizer *t, json_t *cfg, const char *key) {
    json_t *v = json_object_get(cfg, key);
    if (json_is_object(v)) v = json_object_get(v, "content");
    if (!json_is_string(v)) return -1;
    return tok_vocab_find(&t->vocab, json_string_value(v), json_string_length(v));
}

static void read_config(kld_tokenizer *t, const char *path) {
    const char *slash = strrchr(path, '/');
    size_t dir = slash ? (size_t)(slash - path) + 1 : 0;
    char *cp = malloc(dir + 32);
    if (!cp) return;
    memcpy(cp, path, dir);
    strcpy(cp + dir, "tokenizer_config.json");
    /* model_max_length is often 1e30 written as an integer */
    json_t *cfg = json_load_file(cp, JSON_DECODE_INT_AS_REAL, NULL);
    free(cp);
    if (!json_is_object(cfg)) {
        json_decref(cfg);
        return;
    }
    int32_t id;
    if (t->bos < 0 && (id = config_token(t, cfg, "bos_token")) >= 0) t->bos = id;
    if (t->eos < 0 && (id = config_token(t, cfg, "eos_token")) >= 0) t->eos = id;
    if (t->pad < 0 && (id = config_token(t, cfg, "pad_token")) >= 0) t->pad = id;
    if (t->unk < 0 && (id = config_token(t, cfg, "unk_token")) >= 0) t->unk = id;
    json_decref(cfg);
}

kld_status kld_tok_open_json(const char *path, kld_tokenizer **out, kld_error *err) {
    *out = NULL;
    kld_mapped_file mf;
    kld_status st = kld_map_file(path, &mf, err);
    if (st) return st;
    st = kld_tok_open_json_text((const char *)mf.data, mf.size, path, out, err);
    kld_unmap_file(&mf);
    if (!st) read_config(*out, path);
    return st;
}
