/* langdetect_load.c — reads python3-langdetect's data into a
 * kld_langdetect: the language profiles (profiles/<lang>: JSON
 * {"name", "freq": {n-gram: count}, "n_words": [unigrams, bigrams,
 * trigrams]}) as langdetect's DetectorFactory.load_profile turns them into
 * per-language probabilities (count / n_words[length - 1]), and the
 * normalisation tables of utils/messages.properties (Java-style
 * `key=value` lines with \uXXXX escapes). */
#include "cap/cap.h"
#include "cap/langdetect.h"
#include "cap/pyre.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

ld_gram ld_pack(const int32_t *cp, size_t n) {
    ld_gram g = 0;
    for (size_t i = 0; i < n; i++) g = (g << 21) | (ld_gram)(cp[i] + 1);
    return g;
}

static size_t hash_gram(ld_gram g, size_t mask) {
    g ^= g >> 31;
    g *= 0x9e3779b97f4a7c15ull;
    g ^= g >> 29;
    return (size_t)g & mask;
}

long ld_lookup(const kld_langdetect *ld, ld_gram g) {
    size_t mask = ld->n_slots - 1;
    for (size_t s = hash_gram(g, mask);; s = (s + 1) & mask) {
        if (ld->slot_gram[s] == g) return (long)s;
        if (!ld->slot_gram[s]) return -1;
    }
}

/* ---- messages.properties ---- */

typedef struct prop {
    char *key;
    int32_t *cp;
    size_t n;
} prop;

typedef struct props {
    prop *v;
    size_t n, cap;
} props;

static void props_free(props *p) {
    for (size_t i = 0; i < p->n; i++) free(p->v[i].key), free(p->v[i].cp);
    free(p->v);
}

/* One value: printable ASCII and \uXXXX escapes (all the file uses). */
static kld_status decode_value(const char *path, int line_no, const char *s, size_t len, prop *out,
                               kld_error *err) {
    out->cp = malloc((len + 1) * sizeof *out->cp);
    if (!out->cp) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    out->n = 0;
    for (size_t i = 0; i < len;) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\\') {
            unsigned v = 0;
            if (i + 6 > len || s[i + 1] != 'u' || sscanf(s + i + 2, "%4x", &v) != 1 ||
                strspn(s + i + 2, "0123456789abcdefABCDEF") < 4)
                return kld_fail(err, KLD_ERR_FORMAT, "%s:%d: key %s: expected \\uXXXX at '%.8s'",
                                path, line_no, out->key, s + i);
            out->cp[out->n++] = (int32_t)v;
            i += 6;
        } else if (c >= 0x20 && c < 0x7f) {
            out->cp[out->n++] = c;
            i++;
        } else {
            return kld_fail(err, KLD_ERR_FORMAT, "%s:%d: key %s: byte 0x%02x is neither ASCII nor "
                            "a \\u escape", path, line_no, out->key, c);
        }
    }
    return KLD_OK;
}

static kld_status read_props(const char *path, props *p, kld_error *err) {
    char *text = NULL;
    size_t len = 0;
    kld_status st = kld_cap_read_file(path, &text, &len, err);
    if (st != KLD_OK) return st;
    int line_no = 0;
    for (char *line = text; st == KLD_OK && line < text + len; line_no++) {
        char *end = memchr(line, '\n', (size_t)(text + len - line));
        if (!end) end = text + len;
        char *next = end + 1;
        while (line < end && (*line == ' ' || *line == '\t' || *line == '\r')) line++;
        while (end > line && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r')) end--;
        char *eq = memchr(line, '=', (size_t)(end - line));
        if (end > line && eq) {
            if (p->n == p->cap) {
                size_t cap = p->cap ? 2 * p->cap : 64;
                prop *v = realloc(p->v, cap * sizeof *v);
                if (!v) {
                    st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
                    break;
                }
                p->v = v, p->cap = cap;
            }
            prop *q = &p->v[p->n++];
            q->cp = NULL;
            q->key = kld_strndup(line, (size_t)(eq - line));
            st = q->key ? decode_value(path, line_no + 1, eq + 1, (size_t)(end - eq - 1), q, err)
                        : kld_fail(err, KLD_ERR_NOMEM, "out of memory");
        }
        line = next;
    }
    free(text);
    return st;
}

/* The last definition of key wins, as in the dict langdetect builds. */
static const prop *prop_get(const props *p, const char *key) {
    for (size_t i = p->n; i-- > 0;)
        if (!strcmp(p->v[i].key, key)) return &p->v[i];
    return NULL;
}

static kld_status take(const props *p, const char *path, const char *key, int32_t **out, size_t *n,
                       kld_error *err) {
    const prop *q = prop_get(p, key);
    if (!q) return kld_fail(err, KLD_ERR_FORMAT, "%s: no key %s", path, key);
    *out = malloc((q->n + 1) * sizeof **out);
    if (!*out) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    memcpy(*out, q->cp, q->n * sizeof **out);
    *n = q->n;
    return KLD_OK;
}

static kld_status load_messages(kld_langdetect *ld, const char *dir, kld_error *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/utils/messages.properties", dir);
    props p = {0};
    kld_status st = read_props(path, &p, err);
    if (st == KLD_OK) st = take(&p, path, "NGram.LATIN1_EXCLUDE", &ld->latin1_excluded, &ld->n_latin1_excluded, err);
    if (st == KLD_OK) st = take(&p, path, "TO_NORMALIZE_VI_CHARS", &ld->vi_base, &ld->n_vi_base, err);
    if (st == KLD_OK) st = take(&p, path, "DMARK_CLASS", &ld->vi_mark, &ld->n_vi_mark, err);
    /* one NORMALIZED_VI_CHARS_<mark> row per mark, as long as TO_NORMALIZE_VI_CHARS */
    if (st == KLD_OK && !(ld->vi_composed = calloc(ld->n_vi_mark * ld->n_vi_base + 1, sizeof(int32_t))))
        st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    for (size_t m = 0; st == KLD_OK && m < ld->n_vi_mark; m++) {
        char key[64];
        snprintf(key, sizeof key, "NORMALIZED_VI_CHARS_%04X", (unsigned)ld->vi_mark[m]);
        const prop *q = prop_get(&p, key);
        if (!q || q->n < ld->n_vi_base)
            st = kld_fail(err, KLD_ERR_FORMAT, "%s: %s %s (need %zu characters, one per "
                          "TO_NORMALIZE_VI_CHARS)", path, key, q ? "too short" : "missing", ld->n_vi_base);
        else
            memcpy(ld->vi_composed + m * ld->n_vi_base, q->cp, ld->n_vi_base * sizeof(int32_t));
    }
    /* CJK classes: every ideograph of NGram.KANJI_* maps to the class's first
     * (a later class overrides an earlier one), in the file's order, which is
     * the order langdetect's NGram lists them. */
    size_t n_cjk = LD_CJK_LAST - LD_CJK_FIRST + 1, n_classes = 0;
    if (st == KLD_OK && !(ld->cjk_map = malloc(n_cjk * sizeof(int32_t))))
        st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    for (size_t i = 0; st == KLD_OK && i < n_cjk; i++) ld->cjk_map[i] = (int32_t)(LD_CJK_FIRST + i);
    for (size_t i = 0; st == KLD_OK && i < p.n; i++) {
        const prop *q = &p.v[i];
        if (strncmp(q->key, "NGram.KANJI_", 12) || !q->n || prop_get(&p, q->key) != q) continue;
        n_classes++;
        for (size_t k = 0; k < q->n; k++)
            if (q->cp[k] >= LD_CJK_FIRST && q->cp[k] <= LD_CJK_LAST)
                ld->cjk_map[q->cp[k] - LD_CJK_FIRST] = q->cp[0];
    }
    if (st == KLD_OK && !n_classes) st = kld_fail(err, KLD_ERR_FORMAT, "%s: no NGram.KANJI_* classes", path);
    props_free(&p);
    return st;
}

/* ---- profiles ---- */

typedef struct triple {
    ld_gram gram;
    uint32_t lang;
    double prob;
} triple;

typedef struct triples {
    triple *v;
    size_t n, cap;
} triples;

static int cmp_triple(const void *a, const void *b) {
    const triple *x = a, *y = b;
    if (x->gram != y->gram) return x->gram < y->gram ? -1 : 1;
    return (x->lang > y->lang) - (x->lang < y->lang);
}

static kld_status load_profile(kld_langdetect *ld, const char *path, triples *t, kld_error *err) {
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root)
        return kld_fail(err, KLD_ERR_FORMAT, "%s:%d: profile is not JSON: %s", path, je.line, je.text);
    kld_status st = KLD_OK;
    json_t *name = json_object_get(root, "name"), *freq = json_object_get(root, "freq");
    json_t *n_words = json_object_get(root, "n_words");
    const char *key;
    json_t *val;
    if (!json_is_object(root) || !json_is_string(name) || !json_is_object(freq) || !json_is_array(n_words) ||
        json_array_size(n_words) < 3)
        st = kld_fail(err, KLD_ERR_FORMAT, "%s: profile format error: need {\"name\": string, \"freq\": "
                      "object, \"n_words\": [3 numbers]}", path);
    else if (json_string_length(name) == 0 || json_string_length(name) >= KLD_LANGDETECT_CODE)
        st = kld_fail(err, KLD_ERR_FORMAT, "%s: profile name '%s' is empty or longer than %d bytes",
                      path, json_string_value(name), KLD_LANGDETECT_CODE - 1);
    /* LangProfile(**json) takes exactly these three */
    json_object_foreach(root, key, val) {
        if (st == KLD_OK && strcmp(key, "name") && strcmp(key, "freq") && strcmp(key, "n_words"))
            st = kld_fail(err, KLD_ERR_FORMAT, "%s: profile format error: unknown field '%s'", path, key);
    }
    for (size_t i = 0; st == KLD_OK && i < ld->n_langs; i++)
        if (!strcmp(ld->langs[i], json_string_value(name)))
            st = kld_fail(err, KLD_ERR_FORMAT, "%s: duplicate language profile '%s'", path, ld->langs[i]);
    double words[3] = {0};
    for (int i = 0; st == KLD_OK && i < 3; i++) {
        json_t *w = json_array_get(n_words, (size_t)i);
        if (!json_is_number(w))
            st = kld_fail(err, KLD_ERR_FORMAT, "%s: n_words[%d] is not a number", path, i);
        else
            words[i] = json_number_value(w);
    }
    size_t lang = ld->n_langs;
    json_object_foreach(freq, key, val) {
        if (st != KLD_OK) break;
        int32_t cp[4];
        size_t n = 0, klen = strlen(key);
        for (size_t i = 0; i < klen && n < 4; n++) i += py_decode(key + i, klen - i, &cp[n]);
        if (n < 1 || n > 3) continue; /* langdetect keeps only 1- to 3-grams */
        if (!json_is_number(val)) {
            st = kld_fail(err, KLD_ERR_FORMAT, "%s: freq['%s'] is not a number", path, key);
            break;
        }
        if (words[n - 1] == 0.0) {
            st = kld_fail(err, KLD_ERR_FORMAT, "%s: freq['%s'] divides by n_words[%zu] = 0", path, key, n - 1);
            break;
        }
        if (t->n == t->cap) {
            size_t cap = t->cap ? 2 * t->cap : 1 << 16;
            triple *v = realloc(t->v, cap * sizeof *v);
            if (!v) {
                st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
                break;
            }
            t->v = v, t->cap = cap;
        }
        t->v[t->n++] = (triple){ld_pack(cp, n), (uint32_t)lang, 1.0 * json_number_value(val) / words[n - 1]};
    }
    if (st == KLD_OK) {
        char(*langs)[KLD_LANGDETECT_CODE] = realloc(ld->langs, (lang + 1) * sizeof *langs);
        if (!langs) st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
        else {
            ld->langs = langs;
            snprintf(langs[lang], KLD_LANGDETECT_CODE, "%s", json_string_value(name));
            ld->n_langs++;
        }
    }
    json_decref(root);
    return st;
}

static kld_status build_table(kld_langdetect *ld, triples *t, kld_error *err) {
    if (t->n >= UINT32_MAX / 2) return kld_fail(err, KLD_ERR_FORMAT, "langdetect profiles: %zu n-grams", t->n);
    qsort(t->v, t->n, sizeof *t->v, cmp_triple);
    size_t n_grams = 0;
    for (size_t i = 0; i < t->n; i++) n_grams += !i || t->v[i].gram != t->v[i - 1].gram;
    ld->n_slots = 1024;
    while (ld->n_slots < 2 * n_grams) ld->n_slots *= 2;
    ld->slot_gram = calloc(ld->n_slots, sizeof *ld->slot_gram);
    ld->slot_first = calloc(ld->n_slots, sizeof *ld->slot_first);
    ld->slot_count = calloc(ld->n_slots, sizeof *ld->slot_count);
    ld->entries = malloc((t->n + 1) * sizeof *ld->entries);
    if (!ld->slot_gram || !ld->slot_first || !ld->slot_count || !ld->entries)
        return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    size_t mask = ld->n_slots - 1;
    for (size_t i = 0; i < t->n;) {
        size_t s = hash_gram(t->v[i].gram, mask);
        while (ld->slot_gram[s]) s = (s + 1) & mask;
        ld->slot_gram[s] = t->v[i].gram;
        ld->slot_first[s] = (uint32_t)ld->n_entries;
        size_t j = i;
        for (; j < t->n && t->v[j].gram == t->v[i].gram; j++)
            ld->entries[ld->n_entries++] = (ld_entry){(uint16_t)t->v[j].lang, t->v[j].prob};
        ld->slot_count[s] = (uint32_t)(j - i);
        i = j;
    }
    return KLD_OK;
}

void kld_langdetect_close(kld_langdetect *ld) {
    if (!ld) return;
    free(ld->langs);
    free(ld->slot_gram), free(ld->slot_first), free(ld->slot_count), free(ld->entries);
    free(ld->latin1_excluded), free(ld->vi_base), free(ld->vi_mark), free(ld->vi_composed);
    free(ld->cjk_map);
    free(ld);
}

kld_status kld_langdetect_open(const char *dir, kld_langdetect **out, kld_error *err) {
    *out = NULL;
    kld_langdetect *ld = calloc(1, sizeof *ld);
    if (!ld) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    kld_status st = load_messages(ld, dir, err);
    char pdir[4096], path[8192];
    snprintf(pdir, sizeof pdir, "%s/profiles", dir);
    DIR *d = st == KLD_OK ? opendir(pdir) : NULL;
    if (st == KLD_OK && !d)
        st = kld_fail(err, KLD_ERR_IO, "%s: cannot open the langdetect profile directory: %s", pdir,
                      strerror(errno));
    /* os.listdir order (readdir's): it fixes the language order, which the
     * sums and the tie-break between equal probabilities follow. */
    triples t = {0};
    for (struct dirent *e; st == KLD_OK && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s", pdir, e->d_name);
        struct stat sb;
        if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
        if (ld->n_langs >= UINT16_MAX) st = kld_fail(err, KLD_ERR_FORMAT, "%s: too many profiles", pdir);
        else st = load_profile(ld, path, &t, err);
    }
    if (d) closedir(d);
    if (st == KLD_OK && !ld->n_langs)
        st = kld_fail(err, KLD_ERR_FORMAT, "%s: no language profile", pdir);
    if (st == KLD_OK) st = build_table(ld, &t, err);
    free(t.v);
    if (st != KLD_OK) {
        kld_langdetect_close(ld);
        return st;
    }
    *out = ld;
    return KLD_OK;
}

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static kld_langdetect *g_shared;
static kld_error g_shared_err;
static kld_status g_shared_st;

static void load_shared(void) {
    const char *dir = getenv("KLDEVAL_LANGDETECT_DIR");
    g_shared_st = kld_langdetect_open(dir && *dir ? dir : KLD_LANGDETECT_DIR, &g_shared, &g_shared_err);
}

kld_status kld_langdetect_shared(const kld_langdetect **out, kld_error *err) {
    pthread_once(&g_once, load_shared);
    *out = g_shared;
    /* the message must say what the files are for and where they came from:
     * a caller only sees it as the reason one IFEval response failed */
    if (g_shared_st != KLD_OK) {
        const char *env = getenv("KLDEVAL_LANGDETECT_DIR");
        return kld_fail(err, g_shared_st, "IFEval language identification reads python3-langdetect's "
                        "profiles (%s): %s", env && *env ? "from KLDEVAL_LANGDETECT_DIR" :
                        "install python3-langdetect or set KLDEVAL_LANGDETECT_DIR", g_shared_err.msg);
    }
    return KLD_OK;
}
