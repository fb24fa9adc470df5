/* test_cap_langdetect.c — our langdetect port (src/cap/langdetect*.c)
 * against Debian's python3-langdetect seeded 0 (tests/langdetect_seed0.py,
 * argv[1] the python3 to run): Python's random.Random(0) draw for draw,
 * then detect() answer for answer on IFEval's GPT-4 responses and on texts
 * made to reach the detector's corners (all capitals, short prefixes, mixed
 * scripts, URLs and e-mail addresses, Vietnamese combining marks, CJK and
 * Hangul, empty and featureless text, a text past the 10000-character
 * cut). `--all` adds every loose-mode variant of every response (slow:
 * about 4300 texts). Then the loader's errors name their file. */
#include "cap/cap.h"
#include "cap/langdetect.h"
#include "cap/pyrandom.h"
#include "cap/pyre.h"
#include "testlib.h"

#include <stdio.h>
#include <stdlib.h>

#define CAP KT_SHARED "/capability"

static const char *python = "python3";

typedef struct texts {
    char **v;
    size_t n, cap;
} texts;

static void add_n(texts *t, const char *s, size_t n) {
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 256;
        t->v = realloc(t->v, t->cap * sizeof *t->v);
        if (!t->v) abort();
    }
    t->v[t->n++] = kld_strndup(s, n);
}
/* Each text once: loose variants often coincide. */
static void add(texts *t, const char *s) {
    for (size_t i = 0; i < t->n; i++)
        if (!strcmp(t->v[i], s)) return;
    add_n(t, s, strlen(s));
}

static void add_stripped(texts *t, const char *s, size_t n, bool no_stars) {
    size_t a, b;
    py_strip(s, n, &a, &b);
    char *x = kld_strndup(s + a, b - a), *y = no_stars ? py_remove_char(x, '*') : NULL;
    add(t, y ? y : x);
    free(x), free(y);
}

/* The texts IFEval's loose mode hands the verifiers: the response, without
 * '*', "\n".join of its lines without the first / the last / both,
 * stripped, and those without '*'. */
static void add_loose_variants(texts *t, const char *r) {
    size_t len = strlen(r);
    const char *first = strchr(r, '\n'), *last = strrchr(r, '\n');
    add(t, r);
    add_stripped(t, r, len, true);
    for (int stars = 0; stars < 2; stars++) {
        const char *after_first = first ? first + 1 : r + len;
        add_stripped(t, after_first, (size_t)(r + len - after_first), stars);
        add_stripped(t, r, last ? (size_t)(last - r) : 0, stars);
        add_stripped(t, after_first, first && last > first ? (size_t)(last - after_first) : 0, stars);
    }
}

/* A prefix of at most n bytes that does not cut a UTF-8 sequence. */
static void add_prefix(texts *t, const char *s, size_t n) {
    size_t len = strlen(s);
    if (n >= len) return;
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) n--;
    char *p = kld_strndup(s, n);
    add(t, p);
    free(p);
}

static char *ascii_case(const char *s, bool upper) {
    char *u = kld_strdup(s);
    for (char *p = u; *p; p++)
        if (upper && *p >= 'a' && *p <= 'z') *p = (char)(*p - 32);
        else if (!upper && *p >= 'A' && *p <= 'Z') *p = (char)(*p + 32);
    return u;
}

static const char *const corners[] = {
    "", " ", "\n\n", "12345 67890 !!! ???", "*** --- ___", "a", "é", "Z", "OK", "HELLO", "Hello", "hello",
    "HELLO WORLD, THIS IS ALL IN CAPITAL LETTERS.", "I AM", "A B C D E F G", "NASA FBI CIA USA",
    "JOHN SMITH, MARY JOHNSON, ROBERT BROWN, PATRICIA DAVIS",
    "see http://example.com/a/b?c=d&e=f#g now", "https://x", "http:/nope", "httpsx://no", "HTTP://UPPER.COM",
    "http://" "abcdefghijklmnopqrstuvwxyz", "write to john.doe@example.com today",
    "x@y", "x@y.", "x@yz", "a@b.c", "user@-_.", "@@@", "a@", "@b",
    "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz@example.org rest",
    "Tiếng Việt là ngôn ngữ của người Việt", "Tie\xcc\x81ng Vie\xcc\xa3t co\xcc\x81 da\xcc\x82\xcc\x81u",
    "e\xcc\x80 a\xcc\x83 o\xcc\x89 u\xcc\xa3 y\xcc\x81", "Bună ziua, ce mai faceți? Așa și așa.",
    "Guten Tag, wie geht es Ihnen? Ich heiße Anna und wohne in München.",
    "Bonjour, je m'appelle Pierre et j'habite à Paris depuis dix ans.",
    "Hola, ¿cómo estás? Me llamo Juan y vivo en Madrid.", "Olá, tudo bem? Eu moro em São Paulo.",
    "Ciao, come stai? Mi chiamo Giulia.", "Hallo, hoe gaat het? Ik woon in Amsterdam.",
    "Привет, как дела? Меня зовут Иван.", "Добрий день, як справи?", "Здравейте, как сте?",
    "Γεια σου, τι κάνεις;", "שלום, מה שלומך?", "مرحبا، كيف حالك؟", "سلام، حال شما چطور است؟ یک",
    "नमस्ते, आप कैसे हैं?", "নমস্কার, আপনি কেমন আছেন?", "வணக்கம், நீங்கள் எப்படி இருக்கிறீர்கள்?",
    "สวัสดีครับ คุณสบายดีไหม", "こんにちは、お元気ですか。", "カタカナ テスト", "これは日本語の文です。漢字も使います。",
    "안녕하세요, 잘 지내세요?", "我们是中国人，我们说汉语。", "我們是中國人，我們說漢語。", "ㄅㄆㄇㄈ", "中",
    "Hello мир 世界 مرحبا", "THE QUICK BROWN FOX джамп 狐狸", "— – … ‘’ “” •", "«»° \xc2\xa0",
    "ǅ ǈ ǋ Ⓐ Ⓑ Ⅻ", "ÀÉÎÕÜ ÇÑ", "Ἀθῆναι", "\xf0\x9f\x98\x80 \xf0\x9f\x8e\x89 emoji only? \xf0\x9f\x98\x80",
    "Swahili: Habari za asubuhi? Jina langu ni Amani.", "Tagalog: Magandang umaga po sa inyong lahat.",
    "Suomi: Hyvää huomenta, miten voit tänään?", "Polski: Dzień dobry, jak się masz?",
    "Türkçe: Günaydın, nasılsın bugün?", "Čeština: Dobrý den, jak se máte?",
};

static void build_texts(texts *t, bool all) {
    json_t *in = NULL, *resp = NULL;
    kld_error err = {0};
    CHECK_OK(kld_cap_read_jsonl(CAP "/ifeval/input_data.jsonl", &in, &err), err);
    CHECK_OK(kld_cap_read_jsonl(CAP "/ifeval/input_response_data_gpt4_20231107_145030.jsonl", &resp, &err), err);
    for (size_t i = 0; i < sizeof corners / sizeof corners[0]; i++) add(t, corners[i]);
    /* past the 10000-character cut, and spaces collapsed */
    char *big = malloc(30001);
    for (int i = 0; i < 30000; i++) big[i] = "ab cd  "[i % 7];
    big[30000] = '\0';
    add(t, big);
    memcpy(big + 9990, "\xe4\xb8\xad\xe6\x96\x87\xe5\xad\x97", 9); /* CJK around the cut */
    add(t, big);
    free(big);
    for (size_t i = 0; in && resp && i < json_array_size(resp); i++) {
        const char *r = json_string_value(json_object_get(json_array_get(resp, i), "response"));
        if (!r) continue;
        json_t *ids = json_object_get(json_array_get(in, i), "instruction_id_list");
        bool lang = false;
        for (size_t k = 0; k < json_array_size(ids); k++)
            lang = lang || strstr(json_string_value(json_array_get(ids, k)), "language") ||
                   strstr(json_string_value(json_array_get(ids, k)), "english");
        /* by default a sixth of the responses, and the two all-capital lists
         * TextCat used to misjudge */
        long long key = json_integer_value(json_object_get(json_array_get(in, i), "key"));
        if (!all && i % 6 && key != 3456 && key != 3617) continue;
        if (all || lang) add_loose_variants(t, r);
        else add(t, r);
        if (all || i % 12 == 0) {
            char *up = ascii_case(r, true), *low = ascii_case(r, false);
            add(t, up), add(t, low);
            free(up), free(low);
        }
        if (i % 18 == 0) add_prefix(t, r, 12), add_prefix(t, r, 40), add_prefix(t, r, 200);
    }
    json_decref(in);
    json_decref(resp);
}

static void test_random(void) {
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "'%s' tests/langdetect_seed0.py --random", python);
    int rc = kt_run_capture(cmd, &out);
    CHECK(rc == 0 && out, "%s: exit status %d", cmd, rc);
    if (rc != 0 || !out) return free(out);
    json_t *want[4] = {0};
    char *line = out;
    for (int k = 0; k < 4 && line; k++) {
        want[k] = json_loads(line, JSON_DECODE_ANY | JSON_DISABLE_EOF_CHECK, NULL);
        line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL;
        CHECK(json_is_array(want[k]), "--random line %d is not a JSON list", k);
    }
    py_random r;
    py_random_seed(&r, 0);
    size_t same = 0;
    for (size_t i = 0; i < json_array_size(want[0]); i++)
        same += py_random_uint32(&r) == (uint32_t)json_integer_value(json_array_get(want[0], i));
    CHECK(same == 700 && json_array_size(want[0]) == 700, "getrandbits(32): %zu/700 as Python's", same);
    py_random_seed(&r, 0);
    for (size_t i = 0; i < json_array_size(want[1]); i++) {
        double got = py_random_random(&r), w = json_real_value(json_array_get(want[1], i));
        CHECK(got == w, "random() #%zu: %.17g, Python %.17g", i, got, w);
    }
    py_random_seed(&r, 0);
    for (size_t i = 0; i < json_array_size(want[2]); i++) {
        double got = py_random_gauss(&r, 0.0, 1.0), w = json_real_value(json_array_get(want[2], i));
        CHECK(got == w, "gauss() #%zu: %.17g, Python %.17g", i, got, w);
    }
    static const uint32_t ns[] = {1, 2, 3, 7, 100, 1000, 65537, 30000};
    py_random_seed(&r, 0);
    for (size_t i = 0; i < json_array_size(want[3]); i++) {
        uint32_t got = py_random_below(&r, ns[i % 8]);
        long long w = json_integer_value(json_array_get(want[3], i));
        CHECK(got == w, "_randbelow(%u) #%zu: %u, Python %lld", ns[i % 8], i, got, w);
    }
    for (int k = 0; k < 4; k++) json_decref(want[k]);
    free(out);
}

static void test_detect(bool all) {
    kld_langdetect *ld = NULL;
    kld_error err = {0};
    CHECK_OK(kld_langdetect_open(KLD_LANGDETECT_DIR, &ld, &err), err);
    if (!ld) return;
    texts t = {0};
    build_texts(&t, all);
    char path[1024], cmd[2048], *out = NULL;
    snprintf(path, sizeof path, "%s/langdetect-texts.jsonl", kt_build_dir());
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "cannot write %s", path);
    for (size_t i = 0; f && i < t.n; i++) {
        json_t *o = json_pack("{s:s}", "text", t.v[i]);
        char *s = json_dumps(o, JSON_COMPACT);
        fprintf(f, "%s\n", s);
        free(s);
        json_decref(o);
    }
    if (f) fclose(f);
    snprintf(cmd, sizeof cmd, "'%s' tests/langdetect_seed0.py '%s'", python, path);
    int rc = kt_run_capture(cmd, &out);
    CHECK(rc == 0 && out, "%s: exit status %d (python3-langdetect is needed: bash tools/setup.sh)", cmd, rc);
    size_t same = 0, same_probs = 0, featureless = 0, shown = 0, n_lines = 0;
    const char *line = rc == 0 && out ? out : "";
    double *prob = malloc(ld->n_langs * sizeof *prob);
    for (size_t i = 0; i < t.n && *line; i++, n_lines++) {
        json_t *w = json_loads(line, JSON_DECODE_ANY | JSON_DISABLE_EOF_CHECK, NULL);
        line = strchr(line, '\n') ? strchr(line, '\n') + 1 : "";
        char got[KLD_LANGDETECT_CODE];
        size_t n_features = 0;
        CHECK_OK(kld_langdetect_detect(ld, t.v[i], strlen(t.v[i]), got, &err), err);
        CHECK_OK(kld_langdetect_probabilities(ld, t.v[i], strlen(t.v[i]), prob, &n_features, &err), err);
        const char *want = json_string_value(json_array_get(w, 0));
        bool ok = want && !strcmp(got, want);
        /* get_probabilities(): above 0.1, highest first, ties in profile order */
        json_t *wp = json_array_get(w, 2);
        bool ok_probs = (long long)n_features == json_integer_value(json_array_get(w, 1)) && json_is_array(wp);
        size_t k = 0;
        bool used[256] = {0};
        for (; ok_probs && k < json_array_size(wp) && ld->n_langs <= 256; k++) {
            long best = -1;
            for (size_t j = 0; j < ld->n_langs; j++)
                if (!used[j] && prob[j] > 0.1 && (best < 0 || prob[j] > prob[best])) best = (long)j;
            json_t *pair = json_array_get(wp, k);
            ok_probs = best >= 0 && !strcmp(ld->langs[best], json_string_value(json_array_get(pair, 0))) &&
                       prob[best] == json_real_value(json_array_get(pair, 1));
            if (best >= 0) used[best] = true;
        }
        for (size_t j = 0; ok_probs && j < ld->n_langs; j++) ok_probs = used[j] || !(prob[j] > 0.1);
        same += ok;
        same_probs += ok_probs;
        featureless += ok && !got[0];
        if ((!ok || !ok_probs) && shown++ < 10) {
            char *ws = json_dumps(w, JSON_COMPACT);
            fprintf(stderr, "text %zu '%.60s': ours '%s' (%zu features), langdetect %s\n", i, t.v[i], got,
                    n_features, ws ? ws : "?");
            free(ws);
        }
        json_decref(w);
    }
    free(prob);
    CHECK(n_lines == t.n && same == t.n, "langdetect seeded 0: %zu/%zu texts answered alike (%zu answers)",
          same, t.n, n_lines);
    CHECK(same_probs == t.n, "langdetect seeded 0: %zu/%zu texts with the same feature count and "
          "probabilities", same_probs, t.n);
    CHECK(featureless >= 5, "only %zu featureless texts among the corners", featureless);
    printf("langdetect: %zu/%zu texts as python3-langdetect seeded 0 (%zu without features); "
           "%zu/%zu with identical feature counts and probabilities\n", same, t.n, featureless, same_probs, t.n);
    for (size_t i = 0; i < t.n; i++) free(t.v[i]);
    free(t.v);
    free(out);
    kld_langdetect_close(ld);
}

/* Missing and malformed data files: errors that name the file. */
static void test_bad_data(void) {
    char dir[1024], path[1200], cmd[3200];
    kld_langdetect *ld = NULL;
    kld_error err = {0};
    snprintf(dir, sizeof dir, "%s/langdetect-bad", kt_build_dir());
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0, "%s", cmd);
    CHECK(kld_langdetect_open(dir, &ld, &err) == KLD_ERR_IO && strstr(err.msg, "messages.properties"),
          "missing dir: %s", err.msg);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/utils' '%s/profiles'", dir, dir);
    CHECK(system(cmd) == 0, "%s", cmd);
    size_t n;
    char *messages = kt_read_file(KLD_LANGDETECT_DIR "/utils/messages.properties", &n);
    snprintf(path, sizeof path, "%s/utils/messages.properties", dir);
    kt_write_file(path, "NGram.LATIN1_EXCLUDE=\\u00A0\\u00zz\n", 34);
    CHECK(kld_langdetect_open(dir, &ld, &err) == KLD_ERR_FORMAT && strstr(err.msg, "messages.properties:1") &&
          strstr(err.msg, "\\u00zz"), "bad escape: %s", err.msg);
    kt_write_file(path, messages, n);
    free(messages);
    CHECK(kld_langdetect_open(dir, &ld, &err) == KLD_ERR_FORMAT && strstr(err.msg, "no language profile"),
          "no profiles: %s", err.msg);
    static const struct { const char *json, *want; } bad[] = {
        {"{\"name\": \"xx\", \"freq\": {\"a\": 1}, ", "not JSON"},
        {"{\"name\": \"xx\", \"freq\": {\"a\": 1}}", "n_words"},
        {"{\"name\": \"xx\", \"freq\": {\"a\": 1}, \"n_words\": [0, 1, 1]}", "n_words[0] = 0"},
        {"{\"name\": \"xx\", \"freq\": {\"a\": \"1\"}, \"n_words\": [1, 1, 1]}", "freq['a'] is not a number"},
        {"{\"name\": \"xx\", \"freq\": {}, \"n_words\": [1, 1, 1], \"extra\": 1}", "unknown field 'extra'"},
        {"{\"name\": \"\", \"freq\": {}, \"n_words\": [1, 1, 1]}", "name"},
    };
    snprintf(path, sizeof path, "%s/profiles/xx", dir);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        kt_write_file(path, bad[i].json, strlen(bad[i].json));
        CHECK(kld_langdetect_open(dir, &ld, &err) == KLD_ERR_FORMAT && strstr(err.msg, bad[i].want) &&
              strstr(err.msg, "profiles/xx"), "bad profile %zu: %s", i, err.msg);
    }
    /* two good profiles decide between themselves */
    const char *xx = "{\"name\": \"xx\", \"freq\": {\"a\": 9, \"b\": 1, \"ab\": 5}, \"n_words\": [10, 5, 1]}";
    const char *yy = "{\"name\": \"yy\", \"freq\": {\"b\": 9, \"a\": 1}, \"n_words\": [10, 1, 1]}";
    kt_write_file(path, xx, strlen(xx));
    snprintf(path, sizeof path, "%s/profiles/yy", dir);
    kt_write_file(path, yy, strlen(yy));
    CHECK_OK(kld_langdetect_open(dir, &ld, &err), err);
    char code[KLD_LANGDETECT_CODE];
    if (ld) {
        CHECK_OK(kld_langdetect_detect(ld, "aaa ab a", 8, code, &err), err);
        CHECK(!strcmp(code, "xx"), "two profiles, 'aaa ab a': %s", code);
        CHECK_OK(kld_langdetect_detect(ld, "bbb b bb", 8, code, &err), err);
        CHECK(!strcmp(code, "yy"), "two profiles, 'bbb b bb': %s", code);
        CHECK_OK(kld_langdetect_detect(ld, "zzz", 3, code, &err), err);
        CHECK(!strcmp(code, ""), "two profiles, no known n-gram: '%s'", code);
        kld_langdetect_close(ld);
    }
    /* the IFEval verifier reports a detector that cannot load, never crashes */
    snprintf(path, sizeof path, "%s/nosuch", dir);
    setenv("KLDEVAL_LANGDETECT_DIR", path, 1);
    json_t *item = json_loads("{\"key\": 1, \"prompt\": \"p\", \"instruction_id_list\": "
                              "[\"language:response_language\"], \"kwargs\": [{\"language\": \"en\"}]}", 0, NULL);
    bool follow[1];
    CHECK(kld_ifeval_check(item, "Some English text.", false, follow, 1, &err) == KLD_ERR_IO &&
          strstr(err.msg, "nosuch/utils/messages.properties") && strstr(err.msg, "python3-langdetect") &&
          strstr(err.msg, "KLDEVAL_LANGDETECT_DIR"), "ifeval without langdetect data names the package "
          "and the variable: %s", err.msg);
    CHECK(!strcmp(kld_ifeval_language("Some English text."), ""), "kld_ifeval_language without data");
    json_decref(item);
}

int main(int argc, char **argv) {
    bool all = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--all")) all = true;
        else python = argv[i];
    }
    test_random();
    test_detect(all);
    test_bad_data(); /* last: it points the process-wide detector at a missing folder */
    return kt_finish();
}
