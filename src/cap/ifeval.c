/* ifeval.c — IFEval's 25 instruction verifiers (google-research
 * instruction_following_eval, HEAD semantics) and the strict / loose
 * evaluation of one response. Each verifier reads its kwargs from the
 * input_data.jsonl row; patterns are the reference's, run through PCRE2
 * with Unicode properties (pyre.c). */
#include "cap/cap.h"
#include "cap/pyre.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct ctx {
    const json_t *kw;   /* this instruction's kwargs */
    const char *id;
    kld_error *err;
    kld_status st;
} ctx;

static long kw_int(ctx *c, const char *name) {
    json_t *v = json_object_get(c->kw, name);
    if (!json_is_integer(v)) {
        if (c->st == KLD_OK)
            c->st = kld_fail(c->err, KLD_ERR_FORMAT, "instruction %s: kwarg '%s' is not an integer",
                             c->id, name);
        return 0;
    }
    return (long)json_integer_value(v);
}

static const char *kw_str(ctx *c, const char *name) {
    json_t *v = json_object_get(c->kw, name);
    if (!json_is_string(v)) {
        if (c->st == KLD_OK)
            c->st = kld_fail(c->err, KLD_ERR_FORMAT, "instruction %s: kwarg '%s' is not a string",
                             c->id, name);
        return "";
    }
    return json_string_value(v);
}

/* "less than" → count < n; "at least" → count >= n. */
static bool relation(ctx *c, const char *rel_name, long count, long n) {
    const char *rel = kw_str(c, rel_name);
    if (!strcmp(rel, "less than")) return count < n;
    if (!strcmp(rel, "at least")) return count >= n;
    if (c->st == KLD_OK)
        c->st = kld_fail(c->err, KLD_ERR_FORMAT, "instruction %s: relation '%s' is neither "
                         "'less than' nor 'at least'", c->id, rel);
    return false;
}

/* Escapes a literal for a PCRE2 pattern (used where the reference builds a
 * pattern from a marker that it means literally). */
static char *strip_dup(const char *s) {
    size_t a, b;
    py_strip(s, strlen(s), &a, &b);
    return kld_strndup(s + a, b - a);
}

static bool starts_with_ci(const char *s, const char *prefix) {
    size_t n1, n2;
    char *a = py_lower(s, strlen(s), &n1), *b = py_lower(prefix, strlen(prefix), &n2);
    bool ok = a && b && n1 >= n2 && !memcmp(a, b, n2);
    free(a);
    free(b);
    return ok;
}

static bool lang_is(ctx *c, const char *s, const char *code) {
    bool yes = false;
    if (c->st == KLD_OK) c->st = kld_ifeval_language_is(s, code, &yes, c->err);
    return yes;
}

typedef struct hl {
    const char *text;
    long n;
    bool dbl;
} hl;

static void count_highlight(void *p, size_t s, size_t e) {
    hl *h = p;
    size_t k = h->dbl ? 2 : 1;
    /* strip("*") then strip() for *x*; removeprefix/suffix("**") then strip() for **x** */
    size_t a = s, b = e;
    if (h->dbl) {
        a += k;
        b -= k;
    } else {
        while (a < b && h->text[a] == '*') a++;
        while (b > a && h->text[b - 1] == '*') b--;
    }
    size_t x, y;
    py_strip(h->text + a, b - a, &x, &y);
    if (y > x) h->n++;
}

typedef struct title_ctx {
    const char *text;
    bool found;
} title_ctx;

static void check_title(void *p, size_t s, size_t e) {
    title_ctx *t = p;
    size_t a = s, b = e;
    while (a < b && t->text[a] == '<') a++;
    while (b > a && t->text[b - 1] == '>') b--;
    size_t x, y;
    py_strip(t->text + a, b - a, &x, &y);
    if (y > x) t->found = true;
}

/* re.split(pattern, text): pieces between matches. */
typedef struct split_ctx {
    size_t *cuts; /* start,end pairs */
    size_t n, cap;
    bool oom;
} split_ctx;

static void add_cut(void *p, size_t s, size_t e) {
    split_ctx *c = p;
    if (c->n + 2 > c->cap) {
        size_t nc = c->cap ? c->cap * 2 : 32;
        size_t *nn = realloc(c->cuts, nc * sizeof *nn);
        if (!nn) {
            c->oom = true;
            return;
        }
        c->cuts = nn;
        c->cap = nc;
    }
    c->cuts[c->n++] = s;
    c->cuts[c->n++] = e;
}

static bool blank(const char *s, size_t n) {
    size_t a, b;
    py_strip(s, n, &a, &b);
    return a == b;
}

/* number_paragraphs: split on \s?\*\*\*\s?; empty first/last pieces do not
 * count, an empty inner one fails. */
static bool check_paragraphs(ctx *c, const char *v) {
    split_ctx sc = {0};
    pyre_each("\\s?\\*\\*\\*\\s?", 0, v, add_cut, &sc);
    size_t pieces = sc.n / 2 + 1, len = strlen(v);
    long num = (long)pieces;
    bool ok = !sc.oom;
    for (size_t i = 0; ok && i < pieces; i++) {
        size_t s = i == 0 ? 0 : sc.cuts[2 * i - 1];
        size_t e = i == pieces - 1 ? len : sc.cuts[2 * i];
        if (blank(v + s, e - s)) {
            if (i == 0 || i == pieces - 1) num--;
            else ok = false;
        }
    }
    free(sc.cuts);
    return ok && num == kw_int(c, "num_paragraphs");
}

static bool check_nth_paragraph(ctx *c, const char *v) {
    long want_n = kw_int(c, "num_paragraphs"), nth = kw_int(c, "nth_paragraph");
    const char *fw = kw_str(c, "first_word");
    size_t len = strlen(v);
    /* re.split(r"\n\n", value) */
    size_t cap = 16, n = 0;
    size_t *st = malloc(cap * 2 * sizeof *st);
    if (!st) return false;
    size_t s = 0;
    for (;;) {
        const char *m = strstr(v + s, "\n\n");
        size_t e = m ? (size_t)(m - v) : len;
        if (n == cap) {
            size_t *nn = realloc(st, cap * 4 * sizeof *st);
            if (!nn) return free(st), false;
            st = nn;
            cap *= 2;
        }
        st[2 * n] = s;
        st[2 * n + 1] = e;
        n++;
        if (!m) break;
        s = e + 2;
    }
    long num = (long)n;
    for (size_t i = 0; i < n; i++)
        if (blank(v + st[2 * i], st[2 * i + 1] - st[2 * i])) num--;
    bool ok = false;
    if (nth >= 1 && nth <= num) {
        size_t ps = st[2 * (nth - 1)], pe = st[2 * (nth - 1) + 1], a, b;
        py_strip(v + ps, pe - ps, &a, &b);
        if (b > a) {
            /* paragraph.split()[0], lstrip quotes, lower-case up to . , ? ! ' " */
            const char *p = v + ps + a;
            size_t plen = b - a, w = 0;
            while (w < plen) {
                int32_t cp;
                size_t l = py_decode(p + w, plen - w, &cp);
                if (py_isspace(cp)) break;
                w += l;
            }
            size_t k = 0;
            while (k < w && p[k] == '\'') k++;
            while (k < w && p[k] == '"') k++;
            size_t e = k;
            while (e < w && !strchr(".,?!'\"", p[e])) e++;
            size_t ln1, ln2;
            char *got = py_lower(p + k, e - k, &ln1), *want = py_lower(fw, strlen(fw), &ln2);
            ok = got && want && num == want_n && ln1 == ln2 && !memcmp(got, want, ln1);
            free(got);
            free(want);
        }
    }
    free(st);
    return ok;
}

static bool check_two_responses(const char *v) {
    size_t len = strlen(v), s = 0, valid = 0;
    size_t vs[2] = {0}, ve[2] = {0};
    size_t idx = 0;
    bool ok = true;
    /* value.split("******") */
    size_t pieces = 1;
    for (const char *m = strstr(v, "******"); m; m = strstr(m + 6, "******")) pieces++;
    for (;;) {
        const char *m = strstr(v + s, "******");
        size_t e = m ? (size_t)(m - v) : len;
        if (blank(v + s, e - s)) {
            if (idx != 0 && idx != pieces - 1) ok = false;
        } else {
            if (valid < 2) {
                vs[valid] = s;
                ve[valid] = e;
            }
            valid++;
        }
        idx++;
        if (!m) break;
        s = e + 6;
    }
    if (!ok || valid != 2) return false;
    size_t a0, b0, a1, b1;
    py_strip(v + vs[0], ve[0] - vs[0], &a0, &b0);
    py_strip(v + vs[1], ve[1] - vs[1], &a1, &b1);
    return !(b0 - a0 == b1 - a1 && !memcmp(v + vs[0] + a0, v + vs[1] + a1, b0 - a0));
}

static bool check_json(const char *v) {
    size_t a, b;
    py_strip(v, strlen(v), &a, &b);
    const char *p = v + a;
    size_t n = b - a;
    static const char *const pre[] = {"```json", "```Json", "```JSON", "```"};
    for (int i = 0; i < 4; i++) { /* chained removeprefix: each applies in turn */
        size_t l = strlen(pre[i]);
        if (n >= l && !memcmp(p, pre[i], l)) {
            p += l;
            n -= l;
        }
    }
    if (n >= 3 && !memcmp(p + n - 3, "```", 3)) n -= 3;
    py_strip(p, n, &a, &b);
    json_error_t je;
    json_t *j = json_loadb(p + a, b - a, JSON_DECODE_ANY, &je);
    bool ok = j != NULL;
    json_decref(j);
    return ok;
}

static bool check_end(ctx *c, const char *v) {
    char *phrase = strip_dup(kw_str(c, "end_phrase"));
    size_t a, b;
    py_strip(v, strlen(v), &a, &b);
    /* value.strip().strip('"').lower() */
    while (a < b && v[a] == '"') a++;
    while (b > a && v[b - 1] == '"') b--;
    size_t n1, n2;
    char *low = py_lower(v + a, b - a, &n1);
    char *pl = phrase ? py_lower(phrase, strlen(phrase), &n2) : NULL;
    bool ok = low && pl && n1 >= n2 && !memcmp(low + n1 - n2, pl, n2);
    free(low);
    free(pl);
    free(phrase);
    return ok;
}

static bool check_letter(ctx *c, const char *v) {
    const char *letter = kw_str(c, "letter");
    size_t n;
    char *low = py_lower(v, strlen(v), &n);
    size_t ln;
    char *let = py_lower(letter, strlen(letter), &ln);
    long count = 0;
    if (low && let && ln > 0) {
        int32_t want;
        py_decode(let, ln, &want);
        for (size_t i = 0; i < n;) {
            int32_t cp;
            i += py_decode(low + i, n - i, &cp);
            if (cp == want) count++;
        }
    }
    free(low);
    free(let);
    return relation(c, "let_relation", count, kw_int(c, "let_frequency"));
}

/* The verifier of instruction c->id on response v. */
static bool verify(ctx *c, const json_t *item, const char *v) {
    const char *id = c->id;
    size_t vlen = strlen(v);
    if (!strcmp(id, "punctuation:no_comma")) return strchr(v, ',') == NULL;
    if (!strcmp(id, "detectable_format:title")) {
        title_ctx t = {v, false};
        pyre_each("<<[^\\n]+>>", 0, v, check_title, &t);
        return t.found;
    }
    if (!strcmp(id, "detectable_format:number_highlighted_sections")) {
        hl h = {v, 0, false};
        pyre_each("\\*[^\\n\\*]*\\*", 0, v, count_highlight, &h);
        h.dbl = true;
        pyre_each("\\*\\*[^\\n\\*]*\\*\\*", 0, v, count_highlight, &h);
        return h.n >= kw_int(c, "num_highlights");
    }
    if (!strcmp(id, "length_constraints:number_words"))
        return relation(c, "relation", (long)kld_ifeval_count_words(v), kw_int(c, "num_words"));
    if (!strcmp(id, "length_constraints:number_sentences"))
        return relation(c, "relation", (long)kld_ifeval_count_sentences(v),
                        kw_int(c, "num_sentences"));
    if (!strcmp(id, "detectable_content:number_placeholders"))
        return pyre_count("\\[.*?\\]", 0, v) >= kw_int(c, "num_placeholders");
    if (!strcmp(id, "detectable_format:number_bullet_lists")) {
        long n = pyre_count("^\\s*\\*[^\\*].*$", PYRE_M, v) + pyre_count("^\\s*-.*$", PYRE_M, v);
        return n == kw_int(c, "num_bullets");
    }
    if (!strcmp(id, "detectable_format:constrained_response")) {
        static const char *const opts[] = {"My answer is yes.", "My answer is no.",
                                           "My answer is maybe."};
        for (int i = 0; i < 3; i++)
            if (strstr(v, opts[i])) return true;
        return false;
    }
    if (!strcmp(id, "detectable_format:multiple_sections")) {
        char *sp = strip_dup(kw_str(c, "section_spliter"));
        if (!sp) return false;
        char pat[512];
        snprintf(pat, sizeof pat, "\\s?%s\\s?\\d+\\s?", sp);
        free(sp);
        long n = pyre_count(pat, 0, v); /* len(re.split(...)) - 1 */
        return n >= kw_int(c, "num_sections");
    }
    if (!strcmp(id, "length_constraints:number_paragraphs")) return check_paragraphs(c, v);
    if (!strcmp(id, "length_constraints:nth_paragraph_first_word")) return check_nth_paragraph(c, v);
    if (!strcmp(id, "detectable_content:postscript")) {
        char *marker = strip_dup(kw_str(c, "postscript_marker"));
        if (!marker) return false;
        size_t ln;
        char *low = py_lower(v, vlen, &ln);
        char pat[512];
        if (!strcmp(marker, "P.P.S")) snprintf(pat, sizeof pat, "\\s*p\\.\\s?p\\.\\s?s.*$");
        else if (!strcmp(marker, "P.S.")) snprintf(pat, sizeof pat, "\\s*p\\.\\s?s\\..*$");
        else {
            size_t ml;
            char *lm = py_lower(marker, strlen(marker), &ml);
            snprintf(pat, sizeof pat, "\\s*%s.*$", lm ? lm : "");
            free(lm);
        }
        bool ok = low && pyre_search(pat, PYRE_M, low) == 1;
        free(low);
        free(marker);
        return ok;
    }
    if (!strcmp(id, "keywords:existence")) {
        json_t *kws = json_object_get(c->kw, "keywords");
        size_t i;
        json_t *k;
        json_array_foreach(kws, i, k) {
            if (!json_is_string(k)) continue;
            if (pyre_search(json_string_value(k), PYRE_I, v) != 1) return false;
        }
        return true;
    }
    if (!strcmp(id, "keywords:forbidden_words")) {
        json_t *kws = json_object_get(c->kw, "forbidden_words");
        size_t i;
        json_t *k;
        json_array_foreach(kws, i, k) {
            if (!json_is_string(k)) continue;
            char pat[1024];
            snprintf(pat, sizeof pat, "\\b%s\\b", json_string_value(k));
            if (pyre_search(pat, PYRE_I, v) == 1) return false;
        }
        return true;
    }
    if (!strcmp(id, "keywords:frequency")) {
        char *kw = strip_dup(kw_str(c, "keyword"));
        long n = kw ? pyre_count(kw, PYRE_I, v) : 0;
        free(kw);
        return relation(c, "relation", n, kw_int(c, "frequency"));
    }
    if (!strcmp(id, "keywords:letter_frequency")) return check_letter(c, v);
    if (!strcmp(id, "language:response_language")) return lang_is(c, v, kw_str(c, "language"));
    if (!strcmp(id, "change_case:english_capital")) return py_isupper(v, vlen) && lang_is(c, v, "en");
    if (!strcmp(id, "change_case:english_lowercase")) return py_islower(v, vlen) && lang_is(c, v, "en");
    if (!strcmp(id, "change_case:capital_word_frequency"))
        return relation(c, "capital_relation", (long)kld_ifeval_count_upper_words(v),
                        kw_int(c, "capital_frequency"));
    if (!strcmp(id, "combination:repeat_prompt")) {
        char *p = strip_dup(kw_str(c, "prompt_to_repeat"));
        size_t a, b;
        py_strip(v, vlen, &a, &b);
        char *vv = kld_strndup(v + a, b - a);
        bool ok = p && vv && starts_with_ci(vv, p);
        free(p);
        free(vv);
        return ok;
    }
    if (!strcmp(id, "combination:two_responses")) return check_two_responses(v);
    if (!strcmp(id, "startend:end_checker")) return check_end(c, v);
    if (!strcmp(id, "startend:quotation")) {
        size_t a, b;
        py_strip(v, vlen, &a, &b);
        size_t cps = 0;
        for (size_t i = a; i < b;) {
            int32_t cp;
            i += py_decode(v + i, b - i, &cp);
            cps++;
        }
        return cps > 1 && v[a] == '"' && v[b - 1] == '"';
    }
    if (!strcmp(id, "detectable_format:json_format")) return check_json(v);
    (void)item;
    if (c->st == KLD_OK)
        c->st = kld_fail(c->err, KLD_ERR_UNSUPPORTED, "unknown IFEval instruction id '%s'", id);
    return false;
}

/* The loose variants: as is, without '*', without the first line, the last
 * line, both, and those three without '*'. */
static int loose_variants(const char *r, char **out) {
    size_t len = strlen(r);
    const char *first_nl = memchr(r, '\n', len);
    const char *last_nl = NULL;
    for (const char *p = r; (p = memchr(p, '\n', len - (size_t)(p - r))); p++) last_nl = p;
    size_t a, b;
    /* "\n".join(r.split("\n")[1:]).strip() etc. */
    const char *rf = first_nl ? first_nl + 1 : r + len; /* without the first line */
    size_t rf_len = (size_t)(r + len - rf);
    const char *rl = r;
    size_t rl_len = last_nl ? (size_t)(last_nl - r) : 0; /* without the last line */
    const char *rb = rf;
    size_t rb_len = (first_nl && last_nl && last_nl > first_nl) ? (size_t)(last_nl - rf) : 0;
    int n = 0;
    out[n++] = kld_strdup(r);
    out[n++] = py_remove_char(r, '*');
    py_strip(rf, rf_len, &a, &b);
    out[n++] = kld_strndup(rf + a, b - a);
    py_strip(rl, rl_len, &a, &b);
    out[n++] = kld_strndup(rl + a, b - a);
    py_strip(rb, rb_len, &a, &b);
    out[n++] = kld_strndup(rb + a, b - a);
    for (int i = 2; i < 5; i++) out[n++] = out[i] ? py_remove_char(out[i], '*') : NULL;
    for (int i = 0; i < n; i++)
        if (!out[i]) {
            for (int j = 0; j < n; j++) free(out[j]);
            return -1;
        }
    return n;
}

kld_status kld_ifeval_check(const json_t *item, const char *response, bool loose, bool *follow,
                            size_t max_follow, kld_error *err) {
    json_t *ids = json_object_get(item, "instruction_id_list");
    json_t *kws = json_object_get(item, "kwargs");
    if (!json_is_array(ids) || !json_is_array(kws) || json_array_size(ids) != json_array_size(kws))
        return kld_fail(err, KLD_ERR_FORMAT, "IFEval item: instruction_id_list and kwargs must be "
                        "arrays of the same length");
    if (json_array_size(ids) > max_follow)
        return kld_fail(err, KLD_ERR_ARG, "IFEval item: %zu instructions, room for %zu",
                        json_array_size(ids), max_follow);
    char *variants[8];
    int nv = 1;
    if (loose) {
        nv = loose_variants(response, variants);
        if (nv < 0) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    } else if (!(variants[0] = kld_strdup(response)))
        return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    kld_status st = KLD_OK;
    for (size_t i = 0; i < json_array_size(ids) && st == KLD_OK; i++) {
        json_t *id = json_array_get(ids, i);
        if (!json_is_string(id)) {
            st = kld_fail(err, KLD_ERR_FORMAT, "IFEval item: instruction %zu is not a string", i);
            break;
        }
        ctx c = {json_array_get(kws, i), json_string_value(id), err, KLD_OK};
        follow[i] = false;
        for (int k = 0; k < nv && !follow[i]; k++)
            if (!blank(variants[k], strlen(variants[k])) && verify(&c, item, variants[k]))
                follow[i] = true;
        st = c.st;
    }
    for (int k = 0; k < nv; k++) free(variants[k]);
    return st;
}
