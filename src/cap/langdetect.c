/* langdetect.c — language detection the way Python langdetect 1.0.9's
 * Detector does it (detector.py, utils/ngram.py), seeded 0:
 *   1. the text loses URLs and e-mail addresses, gets Vietnamese letters +
 *      combining marks composed, is cut to 10000 characters with runs of
 *      spaces collapsed, and loses its Latin letters when other scripts
 *      outnumber them two to one;
 *   2. every character is normalised (its Unicode block decides: ASCII
 *      non-letters and General Punctuation become spaces, each kana and
 *      Hangul syllable its block's representative, each CJK ideograph its
 *      class's ...) and the 1-, 2- and 3-grams the profiles know are
 *      collected, except inside all-capital words;
 *   3. seven trials start from equal probabilities and multiply in the
 *      profile probabilities (+ alpha / 10000, alpha = 0.5 + 0.05·gauss) of
 *      randomly chosen n-grams, normalising every fifth step, until one
 *      language passes 0.99999 or after 1000 steps; the answer is the
 *      language with the highest mean probability if it exceeds 0.1.
 * Floating-point operations follow Python's order, so that the results
 * are bit-identical. */
#include "cap/langdetect.h"
#include "cap/pyrandom.h"
#include "cap/pyre.h"

#include <stdio.h>
#include <stdlib.h>
#include <utf8proc.h>

enum {
    MAX_TEXT_LENGTH = 10000,
    N_TRIAL = 7,
    ITERATION_LIMIT = 1000,
    URL_MAX = 2076,
};
static const double ALPHA_DEFAULT = 0.5, ALPHA_WIDTH = 0.05, CONV_THRESHOLD = 0.99999,
                    PROB_THRESHOLD = 0.1, BASE_FREQ = 10000;

static bool ascii_alnum(int32_t c) {
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}
static bool in_set(int32_t c, const char *set) { return c > 0 && c < 0x80 && strchr(set, (int)c); }
static bool url_char(int32_t c) { return ascii_alnum(c) || in_set(c, "-_.?&~;+=/#"); }
static bool mail_char(int32_t c) { return ascii_alnum(c) || in_set(c, "-_."); }
static bool domain_char(int32_t c) { return ascii_alnum(c) || in_set(c, "-_"); }

static size_t run(const int32_t *v, size_t n, size_t at, bool (*cls)(int32_t), size_t cap) {
    size_t k = 0;
    while (at + k < n && k < cap && cls(v[at + k])) k++;
    return k;
}

/* Length of a match of https?://[-_.?&~;+=/#0-9A-Za-z]{1,2076} at i, 0 if none. */
static size_t url_at(const int32_t *v, size_t n, size_t i) {
    static const int32_t http[] = {'h', 't', 't', 'p'}, sep[] = {':', '/', '/'};
    if (n - i < 8) return 0;
    for (int k = 0; k < 4; k++)
        if (v[i + k] != http[k]) return 0;
    size_t j = i + 4 + (v[i + 4] == 's');
    for (int k = 0; k < 3; k++)
        if (j + k >= n || v[j + k] != sep[k]) return 0;
    size_t k = run(v, n, j + 3, url_char, URL_MAX);
    return k ? j + 3 + k - i : 0;
}

/* Length of a match of
 * [-_.0-9A-Za-z]{1,64}@[-_0-9A-Za-z]{1,255}[-_.0-9A-Za-z]{1,255} at i, 0 if
 * none: the local part is the whole run up to '@' (no class holds '@'), and
 * the host's first part gives back its last character when nothing of the
 * second class follows it. */
static size_t mail_at(const int32_t *v, size_t n, size_t i) {
    size_t local = run(v, n, i, mail_char, 65);
    if (!local || local > 64 || i + local >= n || v[i + local] != '@') return 0;
    size_t q = i + local + 1, avail = run(v, n, q, domain_char, 256), k = avail > 255 ? 255 : avail;
    if (!k) return 0;
    if (k == avail && !(q + k < n && mail_char(v[q + k]))) {
        if (k < 2) return 0;
        k--;
    }
    return q + k + run(v, n, q + k, mail_char, 255) - i;
}

/* re.sub(pattern, ' ', text) for one of the two patterns above, in place. */
static size_t replace_spans(int32_t *v, size_t n, size_t (*match_at)(const int32_t *, size_t, size_t)) {
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t m = match_at(v, n, i);
        if (m) {
            v[o++] = ' ';
            i += m;
        } else {
            v[o++] = v[i++];
        }
    }
    return o;
}

static long index_of(const int32_t *set, size_t n, int32_t c) {
    for (size_t i = 0; i < n; i++)
        if (set[i] == c) return (long)i;
    return -1;
}

/* NGram.normalize_vi: a base letter followed by a combining mark becomes
 * the precomposed letter. */
static size_t normalize_vi(const kld_langdetect *ld, int32_t *v, size_t n) {
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        long a = index_of(ld->vi_base, ld->n_vi_base, v[i]);
        long d = a >= 0 && i + 1 < n ? index_of(ld->vi_mark, ld->n_vi_mark, v[i + 1]) : -1;
        if (d >= 0) {
            v[o++] = ld->vi_composed[(size_t)d * ld->n_vi_base + (size_t)a];
            i += 2;
        } else {
            v[o++] = v[i++];
        }
    }
    return o;
}

/* Detector.append's cut to the first 10000 characters and collapse of
 * repeated spaces, then Detector.cleaning_text. */
static size_t cut_and_clean(int32_t *v, size_t n) {
    size_t o = 0;
    int32_t pre = 0;
    for (size_t i = 0; i < n && i < MAX_TEXT_LENGTH; i++) {
        if (v[i] != ' ' || pre != ' ') v[o++] = v[i];
        pre = v[i];
    }
    n = o;
    size_t latin = 0, non_latin = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i] >= 'A' && v[i] <= 'z') latin++;
        else if (v[i] >= 0x300 && !(v[i] >= 0x1E00 && v[i] <= 0x1EFF)) non_latin++; /* not Latin Extended Additional */
    }
    if (latin * 2 >= non_latin) return n;
    o = 0;
    for (size_t i = 0; i < n; i++)
        if (v[i] < 'A' || v[i] > 'z') v[o++] = v[i];
    return o;
}

/* NGram.normalize, by the Unicode block of c. */
static int32_t normalize_char(const kld_langdetect *ld, int32_t c) {
    if (c <= 0x7F) return (c < 'A' || (c > 'Z' && c < 'a') || c > 'z') ? ' ' : c;      /* Basic Latin */
    if (c <= 0xFF) return index_of(ld->latin1_excluded, ld->n_latin1_excluded, c) >= 0 ? ' ' : c;
    if (c >= 0x180 && c <= 0x24F) return c == 0x219 ? 0x15F : c == 0x21B ? 0x163 : c; /* Latin Extended-B */
    if (c >= 0x600 && c <= 0x6FF) return c == 0x6CC ? 0x64A : c;                       /* Arabic */
    if (c >= 0x1E00 && c <= 0x1EFF) return c >= 0x1EA0 ? 0x1EC3 : c;                   /* Latin Extended Additional */
    if (c >= 0x2000 && c <= 0x206F) return ' ';                                        /* General Punctuation */
    if (c >= 0x3040 && c <= 0x309F) return 0x3042;                                     /* Hiragana */
    if (c >= 0x30A0 && c <= 0x30FF) return 0x30A2;                                     /* Katakana */
    if ((c >= 0x3100 && c <= 0x312F) || (c >= 0x31A0 && c <= 0x31BF)) return 0x3105;   /* Bopomofo (+ Extended) */
    if (c >= LD_CJK_FIRST && c <= LD_CJK_LAST) return ld->cjk_map[c - LD_CJK_FIRST];   /* CJK Unified Ideographs */
    if (c >= 0xAC00 && c <= 0xD7AF) return 0xAC00;                                     /* Hangul Syllables */
    return c;
}

/* str.isupper of one character (utf8proc agrees with CPython's table). */
static bool is_upper(int32_t c) { return utf8proc_isupper(c); }

/* Detector._extract_ngrams: the slots of the known n-grams, in text order. */
static size_t extract_ngrams(const kld_langdetect *ld, const int32_t *v, size_t n, uint32_t *out) {
    int32_t grams[3] = {' '};
    size_t len = 1, n_out = 0;
    bool capital_word = false;
    for (size_t i = 0; i < n; i++) {
        int32_t ch = normalize_char(ld, v[i]), last = grams[len - 1];
        bool appended = true;
        if (last == ' ') {
            grams[0] = ' ', len = 1;
            capital_word = false;
            if (ch == ' ') appended = false;
        } else if (len >= 3) {
            grams[0] = grams[1], grams[1] = grams[2], len = 2;
        }
        if (appended) {
            grams[len++] = ch;
            if (!is_upper(ch)) capital_word = false;
            else if (is_upper(last)) capital_word = true;
        }
        if (capital_word) continue;
        for (size_t k = 1; k <= len; k++) {
            if (k == 1 && grams[len - 1] == ' ') continue;
            long s = ld_lookup(ld, ld_pack(grams + len - k, k));
            if (s >= 0) out[n_out++] = (uint32_t)s;
        }
    }
    return n_out;
}

/* Detector._normalize_prob: divide by the sum (summed in order), return the largest. */
static double normalize_prob(double *prob, size_t n) {
    double sum = 0.0, max = 0.0;
    for (size_t i = 0; i < n; i++) sum += prob[i];
    for (size_t i = 0; i < n; i++) {
        double p = prob[i] / sum;
        if (max < p) max = p;
        prob[i] = p;
    }
    return max;
}

static void detect_block(const kld_langdetect *ld, const uint32_t *ngrams, size_t n_ngrams, double *langprob,
                         double *prob, double *factor) {
    size_t nl = ld->n_langs;
    py_random rng;
    py_random_seed(&rng, 0);
    for (size_t j = 0; j < nl; j++) langprob[j] = 0.0;
    for (int t = 0; t < N_TRIAL; t++) {
        for (size_t j = 0; j < nl; j++) prob[j] = 1.0 / (double)nl;
        double alpha = ALPHA_DEFAULT + py_random_gauss(&rng, 0.0, 1.0) * ALPHA_WIDTH;
        double weight = alpha / BASE_FREQ;
        for (int i = 0;; i++) {
            uint32_t s = ngrams[py_random_below(&rng, (uint32_t)n_ngrams)];
            /* prob[j] *= weight + p(gram | language j), p = 0 where the profile lacks it */
            for (size_t j = 0; j < nl; j++) factor[j] = weight;
            const ld_entry *e = ld->entries + ld->slot_first[s];
            for (uint32_t k = 0; k < ld->slot_count[s]; k++) factor[e[k].lang] = weight + e[k].prob;
            for (size_t j = 0; j < nl; j++) prob[j] *= factor[j];
            if (i % 5 == 0 && (normalize_prob(prob, nl) > CONV_THRESHOLD || i >= ITERATION_LIMIT)) break;
        }
        for (size_t j = 0; j < nl; j++) langprob[j] += prob[j] / N_TRIAL;
    }
}

kld_status kld_langdetect_probabilities(const kld_langdetect *ld, const char *text, size_t len, double *langprob,
                                        size_t *n_features, kld_error *err) {
    *n_features = 0;
    int32_t *v = malloc((len + 1) * sizeof *v);
    if (!v) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    size_t n = 0;
    for (size_t i = 0; i < len; n++) i += py_decode(text + i, len - i, &v[n]);
    n = replace_spans(v, n, url_at);
    n = replace_spans(v, n, mail_at);
    n = normalize_vi(ld, v, n);
    n = cut_and_clean(v, n);
    uint32_t *ngrams = malloc((3 * n + 1) * sizeof *ngrams);
    double *work = malloc((2 * ld->n_langs + 1) * sizeof *work);
    if (!ngrams || !work) {
        free(v), free(ngrams), free(work);
        return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    }
    *n_features = extract_ngrams(ld, v, n, ngrams);
    if (*n_features) detect_block(ld, ngrams, *n_features, langprob, work, work + ld->n_langs);
    else
        for (size_t j = 0; j < ld->n_langs; j++) langprob[j] = 0.0;
    free(v), free(ngrams), free(work);
    return KLD_OK;
}

kld_status kld_langdetect_detect(const kld_langdetect *ld, const char *text, size_t len,
                                 char code[KLD_LANGDETECT_CODE], kld_error *err) {
    code[0] = '\0';
    double *langprob = malloc((ld->n_langs + 1) * sizeof *langprob);
    if (!langprob) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    size_t n_features;
    kld_status st = kld_langdetect_probabilities(ld, text, len, langprob, &n_features, err);
    if (st == KLD_OK && n_features) { /* else langdetect raises "No features in text." */
        /* the first language (in profile order) of the highest probability above 0.1 */
        long best = -1;
        for (size_t j = 0; j < ld->n_langs; j++)
            if (langprob[j] > PROB_THRESHOLD && (best < 0 || langprob[j] > langprob[best])) best = (long)j;
        snprintf(code, KLD_LANGDETECT_CODE, "%s", best >= 0 ? ld->langs[best] : "unknown");
    }
    free(langprob);
    return st;
}
