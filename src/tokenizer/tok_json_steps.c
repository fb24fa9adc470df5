/* tok_json_steps.c — tokenizer.json pipeline steps: normalizers
 * (NFC/NFD/NFKC/NFKD, Lowercase, Strip, StripAccents, Prepend, Replace,
 * Sequence), pre-tokenizers (Split, ByteLevel, Metaspace, Digits,
 * Punctuation, Whitespace, WhitespaceSplit, BertPreTokenizer,
 * CharDelimiterSplit, Sequence), post-processors (TemplateProcessing,
 * Bert/RobertaProcessing, ByteLevel, Sequence) and decoders (ByteLevel,
 * Replace, ByteFallback, Fuse, Strip, Metaspace, Sequence). Any other type
 * is an error naming it. */
#include "tokenizer/tok_json.h"

#include <stdio.h>
#include <stdlib.h>

kld_status tok_json_bad(tok_json_ctx *c, const char *fmt, const char *what) {
    return kld_fail(c->err, KLD_ERR_FORMAT, "%s: %s: %s", c->name, what, fmt);
}

kld_status tok_json_unsupported(tok_json_ctx *c, const char *section, const char *type) {
    return kld_fail(c->err, KLD_ERR_UNSUPPORTED, "%s: %s type '%s' is not supported", c->name,
                    section, type);
}

/* Optional members: absent or null give the default. */
bool tok_json_bool(json_t *o, const char *key, bool def) {
    json_t *v = json_object_get(o, key);
    return json_is_boolean(v) ? json_is_true(v) : def;
}

const char *tok_json_str(json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

char *tok_json_dup(json_t *v, size_t *len) {
    *len = json_string_length(v);
    return kld_strndup(json_string_value(v), *len);
}

static bool grow(void **p, size_t n, size_t elem) {
    void *q = realloc(*p, (n + 1) * elem);
    if (!q) return false;
    *p = q;
    return true;
}

/* ---- pattern: {"String": s} or {"Regex": r} ---- */

static kld_status pattern(tok_json_ctx *c, json_t *pat, const char *what, tok_regex **re,
                          char **lit, size_t *lit_len) {
    *re = NULL;
    *lit = NULL;
    *lit_len = 0;
    json_t *s = json_object_get(pat, "String"), *r = json_object_get(pat, "Regex");
    if (json_is_string(s)) {
        *lit = tok_json_dup(s, lit_len);
        if (!*lit) return kld_fail(c->err, KLD_ERR_NOMEM, "out of memory");
        if (*lit_len == 0) return tok_json_bad(c, "empty String pattern", what);
        return KLD_OK;
    }
    if (json_is_string(r)) {
        char w[160];
        snprintf(w, sizeof w, "%s: %s", c->name, what);
        return tok_regex_compile(json_string_value(r), json_string_length(r), w, re, c->err);
    }
    return tok_json_bad(c, "pattern is neither {\"String\": ...} nor {\"Regex\": ...}", what);
}

/* ---- normalizers ---- */

kld_status tok_json_normalizer(tok_json_ctx *c, json_t *n) {
    if (json_is_null(n) || !n) return KLD_OK;
    const char *type = tok_json_str(n, "type");
    if (!type) return tok_json_bad(c, "missing \"type\"", "normalizer");
    kld_tokenizer *t = c->t;
    if (!strcmp(type, "Sequence")) {
        json_t *list = json_object_get(n, "normalizers");
        if (!json_is_array(list))
            return tok_json_bad(c, "Sequence without \"normalizers\"", "normalizer");
        size_t i;
        json_t *e;
        json_array_foreach(list, i, e) {
            kld_status st = tok_json_normalizer(c, e);
            if (st) return st;
        }
        return KLD_OK;
    }
    if (!grow((void **)&t->norms, t->n_norms, sizeof *t->norms))
        return kld_fail(c->err, KLD_ERR_NOMEM, "out of memory");
    tok_norm *s = &t->norms[t->n_norms];
    memset(s, 0, sizeof *s);
    if (!strcmp(type, "NFC")) s->kind = NORM_NFC;
    else if (!strcmp(type, "NFD")) s->kind = NORM_NFD;
    else if (!strcmp(type, "NFKC")) s->kind = NORM_NFKC;
    else if (!strcmp(type, "NFKD")) s->kind = NORM_NFKD;
    else if (!strcmp(type, "Lowercase")) s->kind = NORM_LOWERCASE;
    else if (!strcmp(type, "StripAccents")) s->kind = NORM_STRIP_ACCENTS;
    else if (!strcmp(type, "Strip")) {
        s->kind = NORM_STRIP;
        s->left = tok_json_bool(n, "strip_left", true);
        s->right = tok_json_bool(n, "strip_right", true);
    } else if (!strcmp(type, "Prepend")) {
        json_t *p = json_object_get(n, "prepend");
        if (!json_is_string(p))
            return tok_json_bad(c, "Prepend without a \"prepend\" string", "normalizer");
        s->kind = NORM_PREPEND;
        s->str = tok_json_dup(p, &s->str_len);
        if (!s->str) return kld_fail(c->err, KLD_ERR_NOMEM, "out of memory");
    } else if (!strcmp(type, "Replace")) {
        json_t *content = json_object_get(n, "content");
        if (!json_is_string(content))
            return tok_json_bad(c, "Replace without a \"content\" string", "normalizer");
        s->kind = NORM_REPLACE;
        t->n_norms++; /* owned from here on, freed with the tokenizer */
        s->content = tok_json_dup(content, &s->content_len);
        if (!s->content) return kld_fail(c->err, KLD_ERR_NOMEM, "out of memory");
        return pattern(c, json_object_get(n, "pattern"), "normalizer Replace", &s->re, &s->str,
                       &s->str_len);
    } else {
        return tok_json_unsupported(c, "normalizer", type);
    }
    t->n_norms++;
    return KLD_OK;
}

/* ---- pre-tokenizers ---- */

static kld_status behavior(tok_json_ctx *c, json_t *o, tok_behavior def, tok_behavior *out) {
    const char *b = tok_json_str(o, "behavior");
    *out = def;
    if (!b) return KLD_OK;
    if (!strcmp(b, "Removed")) *out = BEH_REMOVED;
    else if (!strcmp(b, "Isolated")) *out = BEH_ISOLATED;
    else if (!strcmp(b, "MergedWithPrevious")) *out = BEH_MERGED_PREV;
    else if (!strcmp(b, "MergedWithNext")) *out = BEH_MERGED_NEXT;
    else if (!strcmp(b, "Contiguous")) *out = BEH_CONTIGUOUS;
    else return tok_json_unsupported(c, "split behavior", b);
    return KLD_OK;
}

static tok_pre *new_pre(tok_json_ctx *c) {
    kld_tokenizer *t = c->t;
    if (!grow((void **)&t->pres, t->n_pres, sizeof *t->pres)) return NULL;
    tok_pre *p = &t->pres[t->n_pres++];
    memset(p, 0, sizeof *p);
    return p;
}

static kld_status regex_split(tok_json_ctx *c, const char *re, tok_behavior beh, bool invert,
                              const char *what) {
    tok_pre *p = new_pre(c);
    if (!p) return kld_fail(c->err, KLD_ERR_NOMEM, "out of memory");
    p->kind = PRE_SPLIT;
    p->behavior = beh;
    p->invert = invert;
    char w[160];
    snprintf(w, sizeof w, "%s: pre_tokenizer %s", c->name, what);
    return tok_regex_compile(re, strlen(re), w, &p->re, c->err);
}

/* "Sequence[Split,ByteLevel]": the pre-tokenizer chain for summaries. */
bool tok_json_pre_name(json_t *n, tok_buf *out) {
    const char *type = tok_json_str(n, "type");
    if (!type) return true;
    bool ok = tok_buf_append(out, type, strlen(type));
    if (!strcmp(type, "Sequence")) {
        json_t *list = json_object_get(n, "pretokenizers");
        size_t i;
        json_t *e;
        ok &= tok_buf_append(out, "[", 1);
        json_array_foreach(list, i, e) {
            if (i) ok &= tok_buf_append(out, ",", 1);
            ok &= tok_json_pre_name(e, out);
        }
        ok &= tok_buf_append(out, "]", 1);
    }
    return ok;
}

static kld_status metaspace_fields(tok_json_ctx *c, json_t *o, const char *section, char *repl,
                                   size_t *repl_len, uint32_t *cp, tok_prepend *prepend,
                                   bool *split) {
    const char *r = tok_json_str(o, "replacement");
    if (!r) r = "\xE2\x96\x81";
    size_t l = strlen(r), k;
    if (l == 0 || l > 4 || tok_utf8_len((unsigned char)r[0]) != l)
        return tok_json_bad(c, "replacement must be one character", section);
    *cp = tok_utf8_decode(r, l, &k);
    memcpy(repl, r, l);
    *repl_len = l;
    const char *ps = tok_json_str(o, "prepend_scheme");
    if (ps) {
        if (!strcmp(ps, "always")) *prepend = PREPEND_ALWAYS;
        else if (!strcmp(ps, "first")) *prepend = PREPEND_FIRST;
        else if (!strcmp(ps, "never")) *prepend = PREPEND_NEVER;
        else return tok_json_unsupported(c, "Metaspace prepend_scheme", ps);
    } else { /* older files: add_prefix_space */
        *prepend = tok_json_bool(o, "add_prefix_space", true) ? PREPEND_ALWAYS : PREPEND_NEVER;
    }
    *split = tok_json_bool(o, "split", true);
    return KLD_OK;
}

kld_status tok_json_pre_tokenizer(tok_json_ctx *c, json_t *n, int depth) {
    if (json_is_null(n) || !n) return KLD_OK;
    if (depth > 32) return tok_json_bad(c, "Sequences nested deeper than 32", "pre_tokenizer");
    const char *type = tok_json_str(n, "type");
    if (!type) return tok_json_bad(c, "missing \"type\"", "pre_tokenizer");
    kld_status st;
    if (!strcmp(type, "Sequence")) {
        json_t *list = json_object_get(n, "pretokenizers");
        if (!json_is_array(list))
            return tok_json_bad(c, "Sequence without \"pretokenizers\"", "pre_tokenizer");
        size_t i;
        json_t *e;
        json_array_foreach(list, i, e) {
            if ((st = tok_json_pre_tokenizer(c, e, depth + 1))) return st;
        }
        return KLD_OK;
    }
    tok_behavior beh;
    if (!strcmp(type, "Split")) {
        if ((st = behavior(c, n, BEH_ISOLATED, &beh))) return st;
        tok_pre *p = new_pre(c);
        if (!p) return kld_fail(c->err, KLD_ERR_NOMEM, "out of memory");
        p->kind = PRE_SPLIT;
        p->behavior = beh;
        p->invert = tok_json_bool(n, "invert", false);
        return pattern(c, json_object_get(n, "pattern"), "pre_tokenizer Split", &p->re, &p->literal,
                       &p->literal_len);
    }
    if (!strcmp(type, "ByteLevel")) {
        tok_pre *p = new_pre(c);
        if (!p) return kld_fail(c->err, KLD_ERR_NOMEM, "out of memory");
        p->kind = PRE_BYTELEVEL;
        p->add_prefix_space = tok_json_bool(n, "add_prefix_space", true);
        p->use_regex = tok_json_bool(n, "use_regex", true);
        if (p->use_regex) {
            char w[160];
            snprintf(w, sizeof w, "%s: pre_tokenizer ByteLevel", c->name);
            return tok_regex_compile(TOK_RE_GPT2, strlen(TOK_RE_GPT2), w, &p->re, c->err);
        }
        return KLD_OK;
    }
    if (!strcmp(type, "Metaspace")) {
        tok_pre *p = new_pre(c);
        if (!p) return kld_fail(c->err, KLD_ERR_NOMEM, "out of memory");
        p->kind = PRE_METASPACE;
        uint32_t cp;
        return metaspace_fields(c, n, "pre_tokenizer Metaspace", p->repl, &p->repl_len, &cp,
                                &p->prepend, &p->split);
    }
    if (!strcmp(type, "Digits"))
        return regex_split(c, "\\p{N}",
                           tok_json_bool(n, "individual_digits", false) ? BEH_ISOLATED
                                                                        : BEH_CONTIGUOUS,
                           false, "Digits");
    if (!strcmp(type, "Punctuation")) {
        if ((st = behavior(c, n, BEH_ISOLATED, &beh))) return st;
        return regex_split(c, "[\\p{P}!-/:-@\\[-`{-~]", beh, false, "Punctuation");
    }
    if (!strcmp(type, "Whitespace"))
        return regex_split(c, "\\w+|[^\\w\\s]+", BEH_REMOVED, true, "Whitespace");
    if (!strcmp(type, "WhitespaceSplit"))
        return regex_split(c, "\\s", BEH_REMOVED, false, "WhitespaceSplit");
    if (!strcmp(type, "BertPreTokenizer")) {
        if ((st = regex_split(c, "\\s", BEH_REMOVED, false, "BertPreTokenizer"))) return st;
        return regex_split(c, "[\\p{P}!-/:-@\\[-`{-~]", BEH_ISOLATED, false, "BertPreTokenizer");
    }
    if (!strcmp(type, "CharDelimiterSplit")) {
        const char *d = tok_json_str(n, "delimiter");
        if (!d || !*d)
            return tok_json_bad(c, "CharDelimiterSplit without a delimiter", "pre_tokenizer");
        tok_pre *p = new_pre(c);
        if (!p) return kld_fail(c->err, KLD_ERR_NOMEM, "out of memory");
        p->kind = PRE_SPLIT;
        p->behavior = BEH_REMOVED;
        p->literal_len = strlen(d);
        p->literal = kld_strdup(d);
        return p->literal ? KLD_OK : kld_fail(c->err, KLD_ERR_NOMEM, "out of memory");
    }
    return tok_json_unsupported(c, "pre_tokenizer", type);
}

/* ---- post-processors ---- */

static kld_status push_ids(tok_json_ctx *c, int32_t **v, size_t *n, const int32_t *ids, size_t k) {
    int32_t *p = realloc(*v, (*n + k + 1) * sizeof *p);
    if (!p) return kld_fail(c->err, KLD_ERR_NOMEM, "out of memory");
    if (k) memcpy(p + *n, ids, k * sizeof *ids);
    *v = p;
    *n += k;
    return KLD_OK;
}

static kld_status token_pair(tok_json_ctx *c, json_t *pair, const char *what, int32_t *id) {
    json_t *i = json_array_get(pair, 1);
    if (!json_is_array(pair) || !json_is_integer(i) || json_integer_value(i) < 0 ||
        json_integer_value(i) >= c->t->vocab.n)
        return tok_json_bad(c, "expected [token, id] with an id in the vocabulary", what);
    *id = (int32_t)json_integer_value(i);
    return KLD_OK;
}

kld_status tok_json_post_processor(tok_json_ctx *c, json_t *n) {
    if (json_is_null(n) || !n) return KLD_OK;
    const char *type = tok_json_str(n, "type");
    if (!type) return tok_json_bad(c, "missing \"type\"", "post_processor");
    kld_tokenizer *t = c->t;
    kld_status st;
    if (!strcmp(type, "Sequence")) {
        json_t *list = json_object_get(n, "processors");
        if (!json_is_array(list))
            return tok_json_bad(c, "Sequence without \"processors\"", "post_processor");
        size_t i;
        json_t *e;
        json_array_foreach(list, i, e) {
            if ((st = tok_json_post_processor(c, e))) return st;
        }
        return KLD_OK;
    }
    if (!strcmp(type, "ByteLevel")) return KLD_OK; /* offsets only */
    if (!strcmp(type, "BertProcessing") || !strcmp(type, "RobertaProcessing")) {
        int32_t cls, sep;
        if ((st = token_pair(c, json_object_get(n, "cls"), "post_processor cls", &cls)) ||
            (st = token_pair(c, json_object_get(n, "sep"), "post_processor sep", &sep)))
            return st;
        if ((st = push_ids(c, &t->prefix_ids, &t->n_prefix, &cls, 1))) return st;
        int32_t *old = t->suffix_ids;
        size_t old_n = t->n_suffix;
        t->suffix_ids = NULL;
        t->n_suffix = 0;
        st = push_ids(c, &t->suffix_ids, &t->n_suffix, &sep, 1);
        if (!st && old_n) st = push_ids(c, &t->suffix_ids, &t->n_suffix, old, old_n);
        free(old);
        return st;
    }
    if (!strcmp(type, "TemplateProcessing")) {
        json_t *single = json_object_get(n, "single"),
               *specials = json_object_get(n, "special_tokens");
        if (!json_is_array(single))
            return tok_json_bad(c, "TemplateProcessing without \"single\"", "post_processor");
        int32_t *pre = NULL, *suf = NULL;
        size_t npre = 0, nsuf = 0;
        bool seen_a = false;
        size_t i;
        json_t *e;
        st = KLD_OK;
        json_array_foreach(single, i, e) {
            json_t *sp = json_object_get(e, "SpecialToken"), *sq = json_object_get(e, "Sequence");
            if (sq) {
                const char *id = tok_json_str(sq, "id");
                if (!id || strcmp(id, "A") != 0 || seen_a) {
                    st = tok_json_bad(c, "the single template must hold sequence A exactly once",
                                      "post_processor TemplateProcessing");
                    break;
                }
                seen_a = true;
                continue;
            }
            const char *name = sp ? tok_json_str(sp, "id") : NULL;
            json_t *tok = name ? json_object_get(specials, name) : NULL;
            json_t *ids = json_object_get(tok, "ids");
            if (!json_is_array(ids)) {
                st = kld_fail(c->err, KLD_ERR_FORMAT,
                              "%s: post_processor TemplateProcessing: special token '%s' is not "
                              "in special_tokens",
                              c->name, name ? name : "?");
                break;
            }
            size_t k;
            json_t *v;
            json_array_foreach(ids, k, v) {
                if (!json_is_integer(v) || json_integer_value(v) < 0 ||
                    json_integer_value(v) >= t->vocab.n) {
                    st = tok_json_bad(c, "a special token id is outside the vocabulary",
                                      "post_processor TemplateProcessing");
                    break;
                }
                int32_t id = (int32_t)json_integer_value(v);
                st = seen_a ? push_ids(c, &suf, &nsuf, &id, 1) : push_ids(c, &pre, &npre, &id, 1);
                if (st) break;
            }
            if (st) break;
        }
        if (!st && !seen_a)
            st = tok_json_bad(c, "the single template has no sequence A",
                              "post_processor TemplateProcessing");
        if (!st) st = push_ids(c, &t->prefix_ids, &t->n_prefix, pre, npre);
        if (!st) st = push_ids(c, &t->suffix_ids, &t->n_suffix, suf, nsuf);
        free(pre);
        free(suf);
        return st;
    }
    return tok_json_unsupported(c, "post_processor", type);
}

/* ---- decoders ---- */

kld_status tok_json_decoder(tok_json_ctx *c, json_t *n) {
    if (json_is_null(n) || !n) return KLD_OK;
    const char *type = tok_json_str(n, "type");
    if (!type) return tok_json_bad(c, "missing \"type\"", "decoder");
    kld_tokenizer *t = c->t;
    t->has_decoder = true;
    if (!strcmp(type, "Sequence")) {
        json_t *list = json_object_get(n, "decoders");
        if (!json_is_array(list))
            return tok_json_bad(c, "Sequence without \"decoders\"", "decoder");
        size_t i;
        json_t *e;
        json_array_foreach(list, i, e) {
            kld_status st = tok_json_decoder(c, e);
            if (st) return st;
        }
        return KLD_OK;
    }
    if (!grow((void **)&t->decs, t->n_decs, sizeof *t->decs))
        return kld_fail(c->err, KLD_ERR_NOMEM, "out of memory");
    tok_dec *d = &t->decs[t->n_decs];
    memset(d, 0, sizeof *d);
    if (!strcmp(type, "ByteLevel")) d->kind = DEC_BYTELEVEL;
    else if (!strcmp(type, "ByteFallback")) d->kind = DEC_BYTEFALLBACK;
    else if (!strcmp(type, "Fuse")) d->kind = DEC_FUSE;
    else if (!strcmp(type, "Strip")) {
        d->kind = DEC_STRIP;
        const char *content = tok_json_str(n, "content");
        json_t *start = json_object_get(n, "start"), *stop = json_object_get(n, "stop");
        size_t l = content ? strlen(content) : 0, k;
        if (!content || l == 0 || tok_utf8_len((unsigned char)content[0]) != l ||
            !json_is_integer(start) || !json_is_integer(stop) || json_integer_value(start) < 0 ||
            json_integer_value(stop) < 0)
            return tok_json_bad(
                c, "Strip needs a one-character content and non-negative start/stop", "decoder");
        d->cp = tok_utf8_decode(content, l, &k);
        d->start = (size_t)json_integer_value(start);
        d->stop = (size_t)json_integer_value(stop);
    } else if (!strcmp(type, "Replace")) {
        json_t *content = json_object_get(n, "content");
        if (!json_is_string(content))
            return tok_json_bad(c, "Replace without a \"content\" string", "decoder");
        d->kind = DEC_REPLACE;
        t->n_decs++;
        d->content = tok_json_dup(content, &d->content_len);
        if (!d->content) return kld_fail(c->err, KLD_ERR_NOMEM, "out of memory");
        return pattern(c, json_object_get(n, "pattern"), "decoder Replace", &d->re, &d->pat,
                       &d->pat_len);
    } else if (!strcmp(type, "Metaspace")) {
        d->kind = DEC_METASPACE;
        char repl[4];
        size_t rl;
        tok_prepend pp;
        bool split;
        kld_status st = metaspace_fields(c, n, "decoder Metaspace", repl, &rl, &d->cp, &pp, &split);
        if (st) return st;
        d->prepend = pp != PREPEND_NEVER;
    } else {
        return tok_json_unsupported(c, "decoder", type);
    }
    t->n_decs++;
    return KLD_OK;
}
