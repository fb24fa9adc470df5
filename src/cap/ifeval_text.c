/* ifeval_text.c — the text measures IFEval's verifiers rest on, written to
 * give what the reference's NLTK calls give on ordinary prose:
 *  - words: NLTK RegexpTokenizer(r"\w+"), i.e. the count of \w+ runs;
 *  - sentences: the Punkt algorithm (NLTK 3.8's candidate contexts, first
 *    and second annotation pass, boundary realignment) with a built-in
 *    list of English abbreviations and a simplified orthographic heuristic
 *    standing in for the trained english.pickle statistics (see
 *    docs in the test: which prompts this decides differently);
 *  - upper-case words: NLTK word_tokenize's splits that can separate cased
 *    letters (contractions, brackets, quotes, *, ?!;@#$%&, commas and
 *    colons before a non-digit, --, ...), then str.isupper per token. */
#include "cap/cap.h"
#include "cap/pyre.h"

#include <ctype.h>
#include <stdlib.h>
#include <utf8proc.h>

size_t kld_ifeval_count_words(const char *text) {
    long n = pyre_count("\\w+", 0, text);
    return n < 0 ? 0 : (size_t)n;
}

/* ---- Punkt ---- */

/* English abbreviations (the period does not end a sentence before a
 * lower-case word); lower-case, without the final period. */
static const char *const abbrevs[] = {
    "mr", "mrs", "ms", "dr", "prof", "st", "jr", "sr", "inc", "ltd", "co", "corp", "vs", "etc",
    "e.g", "i.e", "u.s", "u.k", "u.n", "a.m", "p.m", "jan", "feb", "aug", "sept", "oct", "nov",
    "dec", "gen", "gov", "sen", "rep", "rev", "mt", "ft", "ave", "approx", "dept", "est", "fig",
    "no", "vol", "pp", "cf", "al", "ph.d", "d.c", "n.y", "l.a", "col", "capt", "lt", "sgt",
    "messrs", "mme", "mlle", "univ", "assn", "bros", "calif", "wash", "mass", "conn", "fla",
    "ill", "mich", "minn", "tenn", "va", "ore", "ariz", "colo", "okla", "penn", "pa", "nev",
    "wis", "ky", "ala", "ga", "md", "mo", "n.j", "n.c", "s.c", "u.s.a", "j.r.r", NULL};

static bool is_abbrev(const char *s, size_t n) {
    char low[64];
    if (n == 0 || n >= sizeof low) return false;
    for (size_t i = 0; i < n; i++) low[i] = (char)tolower((unsigned char)s[i]);
    low[n] = '\0';
    const char *last = strrchr(low, '-'); /* "...-abbr." counts as abbr, as Punkt does */
    for (int i = 0; abbrevs[i]; i++)
        if (!strcmp(low, abbrevs[i]) || (last && !strcmp(last + 1, abbrevs[i]))) return true;
    return false;
}

/* Punkt's NonWord class: characters that end a word token. */
static bool punkt_nonword(int32_t c) { return c && strchr(")\";}]*:@'({[!?", (int)c) && c < 128; }
/* Characters that cannot start a word token. */
static bool punkt_not_word_start(int32_t c) { return c < 128 && c && strchr("(\"`{[:;&#*@)}]-,", (int)c); }
static bool ascii_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

/* ^-?[\.,]?\d[\d,\.-]*\.?$ : Punkt's number type. */
static bool is_number_token(const char *s, size_t n) {
    size_t i = 0;
    if (i < n && s[i] == '-') i++;
    if (i < n && (s[i] == '.' || s[i] == ',')) i++;
    if (i >= n || !isdigit((unsigned char)s[i])) return false;
    for (i++; i < n; i++)
        if (!isdigit((unsigned char)s[i]) && s[i] != ',' && s[i] != '.' && s[i] != '-') return false;
    return true;
}

typedef enum { ORTHO_FALSE, ORTHO_TRUE, ORTHO_UNKNOWN } ortho;

/* The orthographic heuristic without trained statistics: a capitalised
 * word starts a sentence, a lower-case one does not, punctuation ;:,.!?
 * does not, anything else is unknown. */
static ortho ortho_of(const char *next, size_t n) {
    if (n == 0) return ORTHO_UNKNOWN;
    int32_t c;
    py_decode(next, n, &c);
    if (c < 128 && strchr(";:,.!?", (int)c) && c) return ORTHO_FALSE;
    if (punkt_not_word_start(c)) return ORTHO_UNKNOWN;
    if (utf8proc_isupper(c)) return ORTHO_TRUE;
    if (utf8proc_islower(c)) return ORTHO_FALSE;
    return ORTHO_UNKNOWN;
}

/* Does the candidate at text[pos] (one of .?!) break the sentence? word is
 * the previous word's span [ws, pos]; next/next_n the token after. */
static bool punkt_breaks(const char *text, size_t ws, size_t pos, const char *next, size_t next_n) {
    if (text[pos] != '.') return true; /* ? and ! are sentence breaks in both passes */
    /* The word token ending at the period: after the last non-word char. */
    size_t s = ws;
    for (size_t i = ws; i < pos;) {
        int32_t c;
        size_t l = py_decode(text + i, pos - i, &c);
        if (punkt_nonword(c)) s = i + l;
        i += l;
    }
    while (s < pos && punkt_not_word_start((unsigned char)text[s])) s++;
    const char *tok = text + s;
    size_t n = pos + 1 - s;
    /* "..." is its own token: an ellipsis */
    bool ellipsis = pos >= 1 && text[pos - 1] == '.';
    if (ellipsis) {
        ortho o = ortho_of(next, next_n);
        return o == ORTHO_TRUE;
    }
    bool abbr = is_abbrev(tok, n - 1);
    bool initial = false;
    if (n >= 2) {
        int32_t c;
        size_t l = py_decode(tok, n - 1, &c);
        initial = l == n - 1 && utf8proc_category(c) >= UTF8PROC_CATEGORY_LU &&
                  utf8proc_category(c) <= UTF8PROC_CATEGORY_LO;
    }
    bool number = is_number_token(tok, n);
    bool brk = !abbr;
    ortho o = ortho_of(next, next_n);
    if (abbr && !initial && o == ORTHO_TRUE) brk = true;
    if ((initial || number) && brk) {
        if (o == ORTHO_FALSE) brk = false;
    }
    return brk;
}

size_t kld_ifeval_count_sentences(const char *text) {
    size_t len = strlen(text);
    size_t count = 0, last_break = 0;
    /* candidate matches: (pos, prev-word start, after-token end, next token) */
    size_t prev_pos = 0, prev_ws = 0, prev_end = 0, prev_next = 0, prev_next_n = 0;
    size_t prev_slice_stop = 0, prev_slice_start = 0;
    bool have_prev = false;
    bool prev_has_next = false;
    for (size_t i = 0; i <= len; i++) {
        bool last = i == len;
        size_t pos = i, end = 0, next = 0, next_n = 0;
        bool cand = false, has_next = false;
        if (!last && (text[i] == '.' || text[i] == '?' || text[i] == '!')) {
            size_t j = i + 1;
            int32_t c = 0;
            if (j < len) py_decode(text + j, len - j, &c);
            if (j < len && punkt_nonword(c)) {
                cand = true;
                end = j + 1;
                next = j;
                next_n = 1;
            } else if (j < len) {
                size_t k = j;
                while (k < len) {
                    int32_t d;
                    size_t l = py_decode(text + k, len - k, &d);
                    if (!py_isspace(d)) break;
                    k += l;
                }
                if (k > j && k < len) {
                    size_t e = k;
                    while (e < len) {
                        int32_t d;
                        size_t l = py_decode(text + e, len - e, &d);
                        if (py_isspace(d)) break;
                        e += l;
                    }
                    cand = true;
                    has_next = true;
                    end = e;
                    next = k;
                    next_n = e - k;
                }
            }
        }
        if (!cand && !last) continue;
        size_t ws = 0;
        if (cand) { /* the previous word: after the last ASCII space since the previous slice */
            size_t idx = 0;
            for (size_t k = pos; k > prev_slice_stop + 1; k--)
                if (ascii_ws(text[k - 1])) {
                    idx = k - 1;
                    break;
                }
            ws = idx ? idx + 1 : prev_slice_start;
        }
        if (have_prev && (last || prev_slice_stop <= ws)) {
            if (punkt_breaks(text, prev_slice_start, prev_pos, text + prev_next, prev_next_n)) {
                count++;
                last_break = prev_has_next ? prev_next : prev_pos + 1;
            }
            (void)prev_end;
        }
        if (last) break;
        have_prev = true;
        prev_pos = pos;
        prev_ws = ws;
        prev_end = end;
        prev_next = next;
        prev_next_n = next_n;
        prev_has_next = has_next;
        prev_slice_start = ws;
        prev_slice_stop = pos;
    }
    (void)prev_ws;
    /* The last sentence: what follows the last break, without trailing
     * space, after closing quotes/brackets moved to the sentence before. */
    size_t s = last_break, e = len;
    size_t a, b;
    py_strip(text + s, e - s, &a, &b);
    e = s + b;
    size_t k = s;
    while (k < e && strchr("\"')]}", text[k]) && text[k]) k++;
    if (k > s) { /* realignment takes the quotes and the space after them */
        size_t m = k;
        while (m < e && ascii_ws(text[m])) m++;
        if (m == e || m > k) s = m;
    }
    if (e > s) count++;
    return count;
}

/* ---- upper-case words (nltk.word_tokenize + str.isupper) ---- */

static bool splits_word(const char *t, size_t i, size_t n, size_t *skip) {
    unsigned char c = (unsigned char)t[i];
    *skip = 1;
    if (c < 128) {
        if (strchr("*\"()[]{}<>;@#$%&?!`", c)) return true;
        if ((c == ',' || c == ':') && !(i + 1 < n && isdigit((unsigned char)t[i + 1]))) return true;
        if (c == '-' && i + 1 < n && t[i + 1] == '-') return (*skip = 2), true;
        if (c == '.' && i + 1 < n && t[i + 1] == '.') return (*skip = 2), true;
        return false;
    }
    int32_t cp;
    size_t l = py_decode(t + i, n - i, &cp);
    *skip = l;
    return cp == 0x2019 || cp == 0x2018 || cp == 0x201C || cp == 0x201D || cp == 0xAB ||
           cp == 0xBB || cp == 0x201E;
}

static size_t count_piece(const char *p, size_t n) {
    if (n == 0) return 0;
    /* contractions at the end of a token: n't 'll 're 've 's 'm 'd ' */
    static const char *const suf3[] = {"n't", "'ll", "'re", "'ve", NULL};
    static const char *const suf2[] = {"'s", "'m", "'d", NULL};
    for (int i = 0; suf3[i]; i++)
        if (n > 3 && !strncasecmp(p + n - 3, suf3[i], 3) && p[n - 4] != '\'')
            return count_piece(p, n - 3) + py_isupper(p + n - 3, 3);
    for (int i = 0; suf2[i]; i++)
        if (n > 2 && !strncasecmp(p + n - 2, suf2[i], 2) && p[n - 3] != '\'')
            return count_piece(p, n - 2) + py_isupper(p + n - 2, 2);
    if (n > 1 && p[n - 1] == '\'') return count_piece(p, n - 1);
    /* NLTK's CONTRACTIONS2: cannot, gimme, gonna, gotta, lemme, wanna */
    static const char *const two[] = {"cannot", "gimme", "gonna", "gotta", "lemme", "wanna", NULL};
    for (int i = 0; two[i]; i++)
        if (n == strlen(two[i]) && !strncasecmp(p, two[i], n))
            return py_isupper(p, 3) + py_isupper(p + 3, n - 3);
    return py_isupper(p, n) ? 1 : 0;
}

size_t kld_ifeval_count_upper_words(const char *text) {
    size_t n = strlen(text), count = 0, start = 0;
    for (size_t i = 0; i < n;) {
        int32_t cp;
        size_t l = py_decode(text + i, n - i, &cp);
        size_t skip;
        if (py_isspace(cp)) {
            count += count_piece(text + start, i - start);
            i += l;
            start = i;
        } else if (splits_word(text, i, n, &skip)) {
            count += count_piece(text + start, i - start);
            i += skip;
            start = i;
        } else {
            i += l;
        }
    }
    count += count_piece(text + start, n - start);
    return count;
}
