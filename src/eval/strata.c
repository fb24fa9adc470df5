/* strata.c — the strata of a kl run: parsing (--strata, --score-only),
 * each vocabulary id's mask from its decoded text, a record's mask (see
 * strata.h). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "eval/strata.h"

#include <ctype.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const ROLE_NAMES[KLD_ROLE_N] = {"", "role:system", "role:user", "role:assistant", "role:tool"};

struct kld_strata {
    int n_user;
    char name[KLD_STRATA_USER_MAX][64];
    pcre2_code *re[KLD_STRATA_USER_MAX];
    char only[64];          /* --score-only, "" for none */
    bool requested;
    bool roles;             /* bound with turn roles: the role strata exist */
    uint16_t only_bit;      /* set by bind */
    int32_t n_vocab;
    uint16_t *vocab_mask;   /* per id (NULL: no strata asked for) */
    char *text;             /* every id's decoded text, one after the other */
    size_t *text_at;        /* n_vocab + 1 offsets into text */
};

/* Bit order: user strata, special, then the roles (when bound with them). */
static int special_bit(const kld_strata *s) { return s->n_user; }
static int role_bit(const kld_strata *s, int role) { return s->n_user + role; }

static bool name_char(char c) { return isalnum((unsigned char)c) || c == '_' || c == '-'; }

/* The length of "NAME=" at p when p starts a stratum, else 0. */
static size_t name_eq(const char *p) {
    size_t n = 0;
    while (name_char(p[n])) n++;
    return n && p[n] == '=' ? n : 0;
}

static kld_status add_user(kld_strata *s, const char *name, size_t name_n, const char *re, size_t re_n,
                           kld_error *err) {
    if (s->n_user == KLD_STRATA_USER_MAX)
        return kld_fail(err, KLD_ERR_ARG, "--strata: at most %d strata (%.*s is one more)", KLD_STRATA_USER_MAX,
                        (int)name_n, name);
    if (name_n >= sizeof s->name[0])
        return kld_fail(err, KLD_ERR_ARG, "--strata: the name '%.*s' is longer than 63 characters", (int)name_n, name);
    char nm[64];
    snprintf(nm, sizeof nm, "%.*s", (int)name_n, name);
    if (!strcmp(nm, "special") || !strncmp(nm, "role", 4))
        return kld_fail(err, KLD_ERR_ARG, "--strata: '%s' is a built-in stratum's name (special, role:…)", nm);
    for (int i = 0; i < s->n_user; i++)
        if (!strcmp(s->name[i], nm)) return kld_fail(err, KLD_ERR_ARG, "--strata: '%s' is given twice", nm);
    if (re_n == 0) return kld_fail(err, KLD_ERR_ARG, "--strata %s: an empty regex", nm);
    int ec;
    PCRE2_SIZE off;
    pcre2_code *code = pcre2_compile((PCRE2_SPTR)re, re_n, PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &ec,
                                     &off, NULL);
    if (!code) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(ec, msg, sizeof msg);
        return kld_fail(err, KLD_ERR_ARG, "--strata %s: invalid regex '%.*s' at offset %zu: %s", nm, (int)re_n, re,
                        (size_t)off, (const char *)msg);
    }
    snprintf(s->name[s->n_user], sizeof s->name[0], "%s", nm);
    s->re[s->n_user++] = code;
    return KLD_OK;
}

static kld_status parse_spec(kld_strata *s, const char *spec, kld_error *err) {
    const char *p = spec;
    if (!*p) return kld_fail(err, KLD_ERR_ARG, "--strata: empty (give NAME=REGEX[,NAME=REGEX...])");
    while (*p) {
        size_t nn = name_eq(p);
        if (!nn)
            return kld_fail(err, KLD_ERR_ARG, "--strata: '%s' is not NAME=REGEX (NAME of letters, digits, _ and -)", p);
        const char *re = p + nn + 1, *end = re;
        /* the regex runs to the next ",NAME=" or the end */
        while (*end && !(*end == ',' && name_eq(end + 1))) end++;
        kld_status st = add_user(s, p, nn, re, (size_t)(end - re), err);
        if (st) return st;
        p = *end ? end + 1 : end;
    }
    return KLD_OK;
}

static bool is_role_name(const char *n) {
    for (int r = 1; r < KLD_ROLE_N; r++)
        if (!strcmp(n, ROLE_NAMES[r])) return true;
    return false;
}

kld_status kld_strata_parse(const char *spec, const char *score_only, kld_strata **out, kld_error *err) {
    *out = NULL;
    kld_strata *s = calloc(1, sizeof *s);
    if (!s) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    kld_status st = spec ? parse_spec(s, spec, err) : KLD_OK;
    if (!st && score_only) {
        bool known = !strcmp(score_only, "special") || is_role_name(score_only);
        for (int i = 0; i < s->n_user; i++) known = known || !strcmp(score_only, s->name[i]);
        if (!known)
            st = kld_fail(err, KLD_ERR_ARG, "--score-only '%s' is no stratum of the run (a --strata name, "
                          "special, role:system, role:user, role:assistant or role:tool)", score_only);
        else
            snprintf(s->only, sizeof s->only, "%s", score_only);
    }
    s->requested = spec || score_only;
    if (st) {
        kld_strata_free(s);
        return st;
    }
    *out = s;
    return KLD_OK;
}

void kld_strata_free(kld_strata *s) {
    if (!s) return;
    for (int i = 0; i < s->n_user; i++) pcre2_code_free(s->re[i]);
    free(s->vocab_mask);
    free(s->text);
    free(s->text_at);
    free(s);
}

bool kld_strata_has(const void *strata, const char *name) {
    const kld_strata *s = strata;
    if (!s || !s->requested) return false;
    if (!strcmp(name, "special") || is_role_name(name)) return true;
    for (int i = 0; i < s->n_user; i++)
        if (!strcmp(name, s->name[i])) return true;
    return false;
}

bool kld_strata_requested(const kld_strata *s) { return s && s->requested; }
bool kld_strata_needs_roles(const kld_strata *s) { return s && is_role_name(s->only); }

static kld_status decode_all(kld_strata *s, const kld_tokenizer *tok, kld_error *err) {
    size_t cap = 16 * (size_t)s->n_vocab + 1, used = 0;
    s->text = malloc(cap);
    s->text_at = malloc(((size_t)s->n_vocab + 1) * sizeof *s->text_at);
    if (!s->text || !s->text_at) return kld_fail(err, KLD_ERR_NOMEM, "out of memory for the token texts");
    for (int32_t id = 0; id < s->n_vocab; id++) {
        s->text_at[id] = used;
        char *t = NULL;
        size_t n = 0;
        /* an id the tokenizer cannot spell (beyond its vocabulary) has no text */
        if (id < kld_tok_n_vocab(tok) && kld_tok_decode(tok, &id, 1, KLD_TOK_DECODE_INNER, &t, &n, NULL) != KLD_OK) n = 0;
        if (used + n + 1 > cap) {
            size_t nc = 2 * cap + n;
            char *g = realloc(s->text, nc);
            if (!g) {
                free(t);
                return kld_fail(err, KLD_ERR_NOMEM, "out of memory for the token texts");
            }
            s->text = g;
            cap = nc;
        }
        if (n) memcpy(s->text + used, t, n);
        used += n;
        free(t);
    }
    s->text_at[s->n_vocab] = used;
    return KLD_OK;
}

static kld_status build_masks(kld_strata *s, const kld_tokenizer *tok, kld_error *err) {
    s->vocab_mask = calloc((size_t)s->n_vocab, sizeof *s->vocab_mask);
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    if (!s->vocab_mask || !md) {
        pcre2_match_data_free(md);
        return kld_fail(err, KLD_ERR_NOMEM, "out of memory for the strata");
    }
    for (int32_t id = 0; id < s->n_vocab; id++) {
        size_t n;
        const char *t = kld_strata_token_text(s, id, &n);
        uint16_t m = 0;
        for (int i = 0; i < s->n_user; i++)
            if (pcre2_match(s->re[i], (PCRE2_SPTR)t, n, 0, 0, md, NULL) >= 0) m |= (uint16_t)(1u << i);
        if (id < kld_tok_n_vocab(tok) && kld_tok_type(tok, id) == KLD_TOKEN_CONTROL)
            m |= (uint16_t)(1u << special_bit(s));
        s->vocab_mask[id] = m;
    }
    pcre2_match_data_free(md);
    return KLD_OK;
}

kld_status kld_strata_bind(kld_strata *s, const kld_tokenizer *tok, int32_t n_vocab, bool roles,
                           const char *model, kld_error *err) {
    if (!tok) {
        if (s->requested)
            return kld_fail(err, KLD_ERR_UNSUPPORTED, "--strata/--score-only decode the next token, and %s has "
                            "no readable tokenizer", model);
        return KLD_OK;
    }
    if (kld_strata_needs_roles(s) && !roles)
        return kld_fail(err, KLD_ERR_ARG, "--score-only %s: the run's corpus has no conversations "
                        "({\"messages\": ...} lines of a JSONL corpus): no turn has a role", s->only);
    s->n_vocab = n_vocab;
    s->roles = roles;
    kld_status st = decode_all(s, tok, err);
    if (!st && s->requested) st = build_masks(s, tok, err);
    if (st || !s->only[0]) return st;
    if (!strcmp(s->only, "special")) s->only_bit = (uint16_t)(1u << special_bit(s));
    for (int i = 0; i < s->n_user; i++)
        if (!strcmp(s->only, s->name[i])) s->only_bit = (uint16_t)(1u << i);
    for (int r = 1; r < KLD_ROLE_N; r++)
        if (!strcmp(s->only, ROLE_NAMES[r])) s->only_bit = (uint16_t)(1u << role_bit(s, r));
    return KLD_OK;
}

uint16_t kld_strata_mask(const kld_strata *s, int32_t next, int role) {
    if (!s || !s->vocab_mask) return 0;
    uint16_t m = next >= 0 && next < s->n_vocab ? s->vocab_mask[next] : 0;
    if (s->roles && next >= 0 && role > KLD_ROLE_NONE && role < KLD_ROLE_N) m |= (uint16_t)(1u << role_bit(s, role));
    return m;
}

uint16_t kld_strata_only(const kld_strata *s) { return s ? s->only_bit : 0; }

const char *kld_strata_token_text(const kld_strata *s, int32_t id, size_t *len) {
    *len = 0;
    if (!s || !s->text || id < 0 || id >= s->n_vocab) return NULL;
    *len = s->text_at[id + 1] - s->text_at[id];
    return s->text + s->text_at[id];
}

void kld_strata_config_json(const kld_strata *s, json_t *config) {
    if (!kld_strata_requested(s)) return;
    json_t *a = json_array();
    for (int i = 0; i < s->n_user; i++) json_array_append_new(a, json_string(s->name[i]));
    json_array_append_new(a, json_string("special"));
    for (int r = 1; s->roles && r < KLD_ROLE_N; r++) json_array_append_new(a, json_string(ROLE_NAMES[r]));
    json_object_set_new(config, "strata", a);
    if (s->only[0]) json_object_set_new(config, "score_only", json_string(s->only));
}

void kld_strata_names_of(const json_t *config, uint16_t mask, char *buf, size_t cap) {
    size_t at = 0;
    buf[0] = '\0';
    const json_t *a = json_object_get(config, "strata");
    for (size_t i = 0; i < json_array_size(a) && i < KLD_STRATA_MAX; i++) {
        if (!(mask & (1u << i))) continue;
        int n = snprintf(buf + at, cap - at, "%s%s", at ? "," : "", json_string_value(json_array_get(a, i)));
        if (n < 0 || (size_t)n >= cap - at) break;
        at += (size_t)n;
    }
}
