/* test_tokenizer.c — the tokenizer's building blocks on small crafted
 * tokenizer.json texts and GGUF files (hand-computed expectations): BPE
 * merge order, byte fallback / unk, every Split behavior, ByteLevel,
 * Metaspace, Digits, Punctuation, Whitespace, normalizers, added tokens
 * (special, lstrip, rstrip, single_word, normalized), post-processors,
 * decoders; llama.cpp-style SPM/BPE from synthesized GGUF vocabularies;
 * malformed files and inputs (clear errors naming the problem); the
 * summary; concurrent encoding. */
#include "testlib.h"
#include "io/gguf_writer.h"
#include "tokenizer/tokenizer.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* {"model": BPE with vocab and merges} plus extra top-level members. */
static char *mk(const char *vocab, const char *merges, const char *model_extra, const char *extra) {
    size_t n = strlen(vocab) + strlen(merges) + strlen(model_extra) + strlen(extra) + 256;
    char *s = malloc(n);
    snprintf(s, n, "{\"model\":{\"type\":\"BPE\",\"vocab\":{%s},\"merges\":[%s]%s}%s}", vocab,
             merges, model_extra, extra);
    return s;
}

static kld_tokenizer *open_json(const char *json, const char *what) {
    kld_tokenizer *t = NULL;
    kld_error err = {0};
    kld_status st = kld_tok_open_json_text(json, strlen(json), what, &t, &err);
    CHECK(st == KLD_OK, "%s: %s", what, err.msg);
    return t;
}

/* Encodes and joins the pieces with '|'. */
static void expect_pieces(const kld_tokenizer *t, const char *text, unsigned flags,
                          const char *want, const char *what) {
    if (!t) {
        CHECK(false, "%s: no tokenizer", what);
        return;
    }
    kld_tok_ids ids = {0};
    kld_error err = {0};
    kld_status st = kld_tok_encode(t, text, strlen(text), flags, &ids, &err);
    char got[1024] = "";
    size_t gl = 0;
    for (size_t i = 0; i < ids.n && gl < 900; i++) {
        size_t pl;
        const char *p = kld_tok_piece(t, ids.ids[i], &pl);
        gl += (size_t)snprintf(got + gl, sizeof got - gl, "%s%.*s", i ? "|" : "", (int)pl,
                               p ? p : "?");
    }
    CHECK(st == KLD_OK && strcmp(got, want) == 0, "%s: '%s' -> '%s' (%s), want '%s'", what, text,
          got, st ? err.msg : "ok", want);
    kld_tok_ids_free(&ids);
}

static void expect_decode(const kld_tokenizer *t, const char *text, unsigned eflags,
                          unsigned dflags, const char *want, const char *what) {
    if (!t) return;
    kld_tok_ids ids = {0};
    kld_error err = {0};
    char *out = NULL;
    size_t n = 0;
    kld_status st = kld_tok_encode(t, text, strlen(text), eflags, &ids, &err);
    if (!st) st = kld_tok_decode(t, ids.ids, ids.n, dflags, &out, &n, &err);
    CHECK(st == KLD_OK && n == strlen(want) && memcmp(out, want, n) == 0,
          "%s: decode(encode('%s')) = '%s' (%s), want '%s'", what, text, out ? out : "",
          st ? err.msg : "ok", want);
    free(out);
    kld_tok_ids_free(&ids);
}

static void expect_open_error(const char *json, kld_status want, const char *needle,
                              const char *what) {
    kld_tokenizer *t = NULL;
    kld_error err = {0};
    kld_status st = kld_tok_open_json_text(json, strlen(json), "crafted.json", &t, &err);
    CHECK(st == want && strstr(err.msg, needle) != NULL, "%s: got %s '%s', want %s mentioning '%s'",
          what, kld_status_name(st), err.msg, kld_status_name(want), needle);
    kld_tok_free(t);
}

#define V_ABC "\"a\":0,\"b\":1,\"c\":2,\"ab\":3,\"bc\":4,\"abc\":5"

static void test_merge_order(void) {
    char *j = mk(V_ABC, "\"b c\",\"a b\"", "", "");
    kld_tokenizer *t = open_json(j, "merge order 1");
    expect_pieces(t, "abc", 0, "a|bc", "lower rank merges first");
    kld_tok_free(t);
    free(j);
    j = mk(V_ABC, "\"a b\",\"b c\",\"ab c\"", "", "");
    t = open_json(j, "merge order 2");
    expect_pieces(t, "abc", 0, "abc", "rank 0 then rank 2");
    expect_pieces(t, "abab", 0, "ab|ab", "same rank, leftmost first");
    kld_tok_free(t);
    free(j);
    /* merges as pairs, and a later duplicate overrides the rank */
    j = mk(V_ABC, "[\"a\",\"b\"],[\"b\",\"c\"],[\"a\",\"b\"]", "", "");
    t = open_json(j, "pair merges");
    expect_pieces(t, "abc", 0, "a|bc", "duplicate merge takes the later rank");
    kld_tok_free(t);
    free(j);
}

static void test_unknown_chars(void) {
    /* no unk, no byte fallback: unknown characters vanish (as in HF) */
    char *j = mk(V_ABC, "\"a b\"", "", "");
    kld_tokenizer *t = open_json(j, "drop unknown");
    expect_pieces(t, "axb", 0, "ab", "unknown char dropped, its neighbours merge");
    kld_tok_free(t);
    free(j);
    j = mk(V_ABC ",\"<unk>\":6", "\"a b\"", ",\"unk_token\":\"<unk>\",\"fuse_unk\":true", "");
    t = open_json(j, "fused unk");
    expect_pieces(t, "axyab", 0, "a|<unk>|ab", "fused unk");
    kld_tok_free(t);
    free(j);
    j = mk(V_ABC ",\"<unk>\":6", "\"a b\"", ",\"unk_token\":\"<unk>\"", "");
    t = open_json(j, "unfused unk");
    expect_pieces(t, "axyab", 0, "a|<unk>|<unk>|ab", "one unk per char");
    kld_tok_free(t);
    free(j);
    j = mk(V_ABC ",\"<0xC3>\":6,\"<0xA9>\":7", "\"a b\"", ",\"byte_fallback\":true",
           ",\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"ByteFallback\"},{"
           "\"type\":\"Fuse\"}]}");
    t = open_json(j, "byte fallback");
    expect_pieces(t,
                  "a\xC3\xA9"
                  "b",
                  0, "a|<0xC3>|<0xA9>|b", "é as bytes");
    expect_decode(t, "ab\xC3\xA9", 0, 0, "ab\xC3\xA9", "byte fallback decodes");
    kld_tok_free(t);
    free(j);
}

#define V_DASH "\"a\":0,\"-\":1,\"a-\":2,\"-a\":3,\"--\":4,\"a--\":5"
#define M_DASH "\"- -\",\"a -\",\"- a\",\"a --\""

static void split_case(const char *behavior, bool invert, const char *text, const char *want) {
    char extra[256];
    snprintf(extra, sizeof extra,
             ",\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"String\":\"-\"},"
             "\"behavior\":\"%s\",\"invert\":%s}",
             behavior, invert ? "true" : "false");
    char *j = mk(V_DASH, M_DASH, "", extra);
    kld_tokenizer *t = open_json(j, behavior);
    char what[128];
    snprintf(what, sizeof what, "Split %s%s", behavior, invert ? " inverted" : "");
    expect_pieces(t, text, 0, want, what);
    kld_tok_free(t);
    free(j);
}

static void test_split_behaviors(void) {
    /* without a pre-tokenizer everything merges */
    char *j = mk(V_DASH, M_DASH, "", "");
    kld_tokenizer *t = open_json(j, "no pre");
    expect_pieces(t, "a-a", 0, "a-|a", "no pre-tokenizer");
    kld_tok_free(t);
    free(j);
    split_case("Isolated", false, "a-a", "a|-|a");
    split_case("Removed", false, "a-a", "a|a");
    split_case("MergedWithPrevious", false, "a-a", "a-|a");
    split_case("MergedWithNext", false, "a-a", "a|-a");
    split_case("Contiguous", false, "a--a", "a|--|a");
    split_case("Isolated", false, "a--a", "a|-|-|a");
    split_case("MergedWithPrevious", false, "a--a", "a-|-|a");
    split_case("MergedWithNext", false, "a--a", "a|-|-a");
    split_case("Removed", true, "a-a", "-");
    /* regex pattern, Digits, Punctuation, Whitespace */
    j = mk("\"1\":0,\"2\":1,\"3\":2,\"12\":3,\"123\":4,\"x\":5,\"!\":6,\"x!\":7,\" \":8,\"!!\":9",
           "\"1 2\",\"12 3\",\"x !\",\"! !\"", "",
           ",\"pre_tokenizer\":{\"type\":\"Digits\",\"individual_digits\":true}");
    t = open_json(j, "digits");
    expect_pieces(t, "x123", 0, "x|1|2|3", "Digits individual");
    kld_tok_free(t);
    free(j);
    j = mk("\"1\":0,\"2\":1,\"3\":2,\"12\":3,\"123\":4,\"x\":5,\"!\":6,\"x!\":7,\" \":8,\"!!\":9",
           "\"1 2\",\"12 3\",\"x !\",\"! !\"", "",
           ",\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Digits\","
           "\"individual_digits\":false},{\"type\":\"Punctuation\",\"behavior\":\"Isolated\"}]}");
    t = open_json(j, "digits+punct");
    expect_pieces(t, "x123x!!", 0, "x|123|x|!|!", "Digits contiguous + Punctuation");
    kld_tok_free(t);
    free(j);
    j = mk("\"1\":0,\"2\":1,\"3\":2,\"12\":3,\"123\":4,\"x\":5,\"!\":6,\"x!\":7,\" \":8,\"!!\":9",
           "\"1 2\",\"12 3\",\"x !\",\"! !\"", "", ",\"pre_tokenizer\":{\"type\":\"Whitespace\"}");
    t = open_json(j, "whitespace");
    expect_pieces(t, "x!! 12", 0, "x|!!|12", "Whitespace: words and punctuation runs");
    kld_tok_free(t);
    free(j);
    /* Oniguruma's (?i:'s) does not match U+017F (long s) */
    j = mk("\"'\":0,\"s\":1,\"S\":2,\"x\":3,\"\xC5\xBF\":4,\"'s\":5,\"'S\":6,\"'\xC5\xBF\":7",
           "\"' s\",\"' S\",\"' \xC5\xBF\"", "",
           ",\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(?i:'s)|[^']+|'\"},"
           "\"behavior\":\"Isolated\"}");
    t = open_json(j, "caseless");
    expect_pieces(t, "x'Sx's", 0, "x|'S|x|'s", "(?i:'s) matches 's and 'S");
    expect_pieces(t, "x'\xC5\xBF", 0, "x|'|\xC5\xBF", "(?i:'s) does not match 'ſ");
    kld_tok_free(t);
    free(j);
}

static void test_byte_level(void) {
    /* Ġ = space; the GPT-2 regex splits " ab" from "c" by category */
    const char *vocab = "\"a\":0,\"b\":1,\"\xC4\xA0\":2,\"\xC4\xA0"
                        "a\":3,\"\xC4\xA0"
                        "ab\":4,\"1\":5,"
                        "\"\xC3\x83\":6,\"\xC2\xA9\":7,\"\xC3\x83\xC2\xA9\":8";
    const char *merges = "\"\xC4\xA0 a\",\"\xC4\xA0"
                         "a b\",\"\xC3\x83 \xC2\xA9\"";
    char *j = mk(vocab, merges, "",
                 ",\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":true,"
                 "\"use_regex\":true},\"decoder\":{\"type\":\"ByteLevel\"}");
    kld_tokenizer *t = open_json(j, "bytelevel");
    expect_pieces(t, "ab 1", 0,
                  "\xC4\xA0"
                  "ab|\xC4\xA0|1",
                  "ByteLevel prefix space + regex");
    expect_pieces(t, "\xC3\xA9", 0, "\xC4\xA0|\xC3\x83\xC2\xA9", "é is bytes C3 A9");
    expect_decode(t, "ab 1", 0, 0, " ab 1", "ByteLevel decode keeps the added space");
    kld_tok_free(t);
    free(j);
}

static void test_metaspace(void) {
    const char *vocab = "\"\xE2\x96\x81\":0,\"a\":1,\"b\":2,\"\xE2\x96\x81"
                        "a\":3,\"\xE2\x96\x81"
                        "b\":4,\"<s>\":5";
    const char *merges = "\"\xE2\x96\x81 a\",\"\xE2\x96\x81 b\"";
    const char *added = ",\"added_tokens\":[{\"id\":5,\"content\":\"<s>\",\"special\":true,"
                        "\"normalized\":false}]";
    char extra[512];
    snprintf(extra, sizeof extra,
             "%s,\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"\xE2\x96\x81\","
             "\"prepend_scheme\":\"first\",\"split\":true},\"decoder\":{\"type\":\"Metaspace\","
             "\"replacement\":\"\xE2\x96\x81\",\"prepend_scheme\":\"first\",\"split\":true}",
             added);
    char *j = mk(vocab, merges, "", extra);
    kld_tokenizer *t = open_json(j, "metaspace first");
    expect_pieces(t, "a b", KLD_TOK_PARSE_SPECIAL,
                  "\xE2\x96\x81"
                  "a|\xE2\x96\x81"
                  "b",
                  "first: prepended");
    expect_pieces(t, "<s>a b", KLD_TOK_PARSE_SPECIAL,
                  "<s>|a|\xE2\x96\x81"
                  "b",
                  "first: not after an added token");
    expect_decode(t, "a b", 0, 0, "a b", "Metaspace decode drops the first ▁");
    kld_tok_free(t);
    free(j);
    snprintf(extra, sizeof extra,
             "%s,\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"\xE2\x96\x81\","
             "\"prepend_scheme\":\"always\",\"split\":false}",
             added);
    j = mk(vocab, merges, "", extra);
    t = open_json(j, "metaspace always");
    expect_pieces(t, "<s>a b", KLD_TOK_PARSE_SPECIAL,
                  "<s>|\xE2\x96\x81"
                  "a|\xE2\x96\x81"
                  "b",
                  "always: after an added token too");
    expect_pieces(t, "<s>a", 0,
                  "\xE2\x96\x81"
                  "a",
                  "specials not parsed: <, s, > are dropped");
    kld_tok_free(t);
    free(j);
}

static void test_normalizers(void) {
    const char *vocab = "\"a\":0,\"b\":1,\"f\":2,\"i\":3,\"fi\":4,\"x\":5,\"_\":6";
    const char *merges = "\"f i\"";
    char *j =
        mk(vocab, merges, "",
           ",\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFKC\"},"
           "{\"type\":\"Lowercase\"},{\"type\":\"Strip\",\"strip_left\":true,\"strip_right\":true},"
           "{\"type\":\"Replace\",\"pattern\":{\"Regex\":\"b+\"},\"content\":\"x\"},"
           "{\"type\":\"Prepend\",\"prepend\":\"_\"}]}");
    kld_tokenizer *t = open_json(j, "normalizers");
    expect_pieces(t,
                  "  \xEF\xAC\x81"
                  "ABbA ",
                  0, "_|fi|a|x|a", "NFKC, Lowercase, Strip, Replace, Prepend");
    expect_pieces(t, "", 0, "", "Prepend adds nothing to empty text");
    kld_tok_free(t);
    free(j);
    j = mk("\"e\":0,\"\xC3\xA9\":1,\"\xCC\x81\":2", "", "", ",\"normalizer\":{\"type\":\"NFC\"}");
    t = open_json(j, "nfc");
    expect_pieces(t, "e\xCC\x81", 0, "\xC3\xA9", "NFC composes e + U+0301");
    kld_tok_free(t);
    free(j);
    j = mk("\"e\":0,\"\xC3\xA9\":1,\"\xCC\x81\":2", "", "", ",\"normalizer\":{\"type\":\"NFD\"}");
    t = open_json(j, "nfd");
    expect_pieces(t, "\xC3\xA9", 0, "e|\xCC\x81", "NFD decomposes é");
    kld_tok_free(t);
    free(j);
}

static void test_added_tokens(void) {
    const char *vocab = "\"a\":0,\"b\":1,\" \":2,\"ab\":3";
    const char *merges = "\"a b\"";
    char *j = mk(
        vocab, merges, "",
        ",\"added_tokens\":["
        "{\"id\":4,\"content\":\"<x>\",\"special\":true,\"normalized\":false},"
        "{\"id\":5,\"content\":\"<xy>\",\"special\":false,\"normalized\":false},"
        "{\"id\":6,\"content\":\"[L]\",\"special\":false,\"normalized\":false,\"lstrip\":true},"
        "{\"id\":7,\"content\":\"[R]\",\"special\":false,\"normalized\":false,\"rstrip\":true},"
        "{\"id\":8,\"content\":\"ax\",\"special\":false,\"normalized\":false,\"single_word\":true},"
        "{\"id\":9,\"content\":\"Q\",\"special\":false,\"normalized\":true}],"
        "\"normalizer\":{\"type\":\"Lowercase\"}");
    kld_tokenizer *t = open_json(j, "added");
    expect_pieces(t, "a<x>b", KLD_TOK_PARSE_SPECIAL, "a|<x>|b", "special token parsed");
    expect_pieces(t, "a<x>b", 0, "ab", "special token not parsed: its characters are dropped");
    expect_pieces(t, "a<xy>b", 0, "a|<xy>|b", "non-special token always parsed, longest first");
    expect_pieces(t, "a  [L]b", 0, "a|[L]|b", "lstrip eats spaces before");
    expect_pieces(t, "a[R]  b", 0, "a|[R]|b", "rstrip eats spaces after");
    expect_pieces(t, "ax ax", 0, "ax| |ax", "single_word: whole words");
    expect_pieces(t, "bax", 0, "b|a", "single_word: not inside a word (x is dropped)");
    expect_pieces(t, "aQa", 0, "a|Q|a", "normalized token");
    expect_pieces(t, "aqa", 0, "a|Q|a", "normalized token matched in lowercased text");
    kld_tok_free(t);
    free(j);
}

static void test_post_processors(void) {
    const char *vocab = "\"a\":0,\"<s>\":1,\"</s>\":2";
    char *j = mk(
        vocab, "", "",
        ",\"post_processor\":{\"type\":\"Sequence\",\"processors\":[{\"type\":\"ByteLevel\"},"
        "{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\",\"type_"
        "id\":0}},"
        "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}},{\"SpecialToken\":{\"id\":\"</"
        "s>\",\"type_id\":0}}],"
        "\"pair\":[],\"special_tokens\":{\"<s>\":{\"id\":\"<s>\",\"ids\":[1],\"tokens\":[\"<s>\"]},"
        "\"</s>\":{\"id\":\"</s>\",\"ids\":[2],\"tokens\":[\"</s>\"]}}}]}");
    kld_tokenizer *t = open_json(j, "template");
    expect_pieces(t, "aa", KLD_TOK_ADD_SPECIAL, "<s>|a|a|</s>", "template around A");
    expect_pieces(t, "", KLD_TOK_ADD_SPECIAL, "<s>|</s>", "template on empty text");
    expect_pieces(t, "aa", 0, "a|a", "no template without ADD_SPECIAL");
    if (t) {
        CHECK(kld_tok_adds_bos(t) && kld_tok_bos(t) == 1 && kld_tok_eos(t) == 2,
              "bos/eos from template");
    }
    kld_tok_free(t);
    free(j);
    j = mk(vocab, "", "",
           ",\"post_processor\":{\"type\":\"BertProcessing\",\"sep\":[\"</"
           "s>\",2],\"cls\":[\"<s>\",1]}");
    t = open_json(j, "bert processing");
    expect_pieces(t, "a", KLD_TOK_ADD_SPECIAL, "<s>|a|</s>", "BertProcessing");
    kld_tok_free(t);
    free(j);
}

static void test_decoders(void) {
    const char *vocab = "\"\xE2\x96\x81"
                        "a\":0,\"b\":1,\"<0x41>\":2,\"<0xE2>\":3,\"<s>\":4";
    char *j = mk(
        vocab, "", ",\"byte_fallback\":true",
        ",\"added_tokens\":[{\"id\":4,\"content\":\"<s>\",\"special\":true,\"normalized\":false}],"
        "\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"pattern\":"
        "{\"String\":\"\xE2\x96\x81\"},\"content\":\" \"},{\"type\":\"ByteFallback\"},"
        "{\"type\":\"Fuse\"},{\"type\":\"Strip\",\"content\":\" \",\"start\":1,\"stop\":0}]}");
    kld_tokenizer *t = open_json(j, "decoders");
    if (t) {
        int32_t ids[] = {4, 0, 2, 3, 1, 0};
        char *out = NULL;
        size_t n = 0;
        kld_error err = {0};
        kld_status st = kld_tok_decode(t, ids, 6, 0, &out, &n, &err);
        /* "<s>" " a", then bytes 41 E2 are not UTF-8: one U+FFFD per byte (as
         * Hugging Face), "b" " a"; Strip removes nothing ('<' first) */
        const char *want = "<s> a\xEF\xBF\xBD\xEF\xBF\xBD"
                           "b a";
        CHECK(st == KLD_OK && n == strlen(want) && !memcmp(out, want, n), "decoder chain: '%s'",
              out ? out : err.msg);
        free(out);
        st = kld_tok_decode(t, ids, 6, KLD_TOK_SKIP_SPECIAL, &out, &n, &err);
        want = "a\xEF\xBF\xBD\xEF\xBF\xBD"
               "b a";
        CHECK(st == KLD_OK && n == strlen(want) && !memcmp(out, want, n),
              "decoder chain without specials: '%s'", out ? out : err.msg);
        free(out);
        int32_t bad_id = 99;
        st = kld_tok_decode(t, &bad_id, 1, 0, &out, &n, &err);
        CHECK(st == KLD_ERR_ARG && strstr(err.msg, "99"), "decode of an unknown id: %s", err.msg);
    }
    kld_tok_free(t);
    free(j);
}

static void test_malformed(void) {
    expect_open_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}}}", KLD_ERR_FORMAT,
                      "model.merges", "missing merges");
    expect_open_error(
        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},\"merges\":[\"a c\"]}}",
        KLD_ERR_FORMAT, "'c'", "merge naming an unknown token");
    expect_open_error(
        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},\"merges\":[\"a b\"]}}",
        KLD_ERR_FORMAT, "'ab'", "merge whose result is not a token");
    expect_open_error(
        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[\"a  b\"]}}",
        KLD_ERR_FORMAT, "one space", "merge with two spaces");
    expect_open_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{},\"merges\":[]}}", KLD_ERR_FORMAT,
                      "empty", "empty vocab");
    expect_open_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},"
                      "\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(a\"},"
                      "\"behavior\":\"Isolated\"}}",
                      KLD_ERR_FORMAT, "invalid regex", "invalid regex");
    expect_open_error("{\"model\":{\"type\":\"Unigram\",\"vocab\":[]}}", KLD_ERR_UNSUPPORTED,
                      "Unigram", "unsupported model");
    expect_open_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},"
                      "\"normalizer\":{\"type\":\"Precompiled\",\"precompiled_charsmap\":\"\"}}",
                      KLD_ERR_UNSUPPORTED, "Precompiled", "unsupported normalizer");
    expect_open_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},"
                      "\"pre_tokenizer\":{\"type\":\"UnicodeScripts\"}}",
                      KLD_ERR_UNSUPPORTED, "UnicodeScripts", "unsupported pre-tokenizer");
    expect_open_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},"
                      "\"decoder\":{\"type\":\"CTC\"}}",
                      KLD_ERR_UNSUPPORTED, "CTC", "unsupported decoder");
    expect_open_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},"
                      "\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"String\":\"a\"},"
                      "\"behavior\":\"Sideways\"}}",
                      KLD_ERR_UNSUPPORTED, "Sideways", "unknown split behavior");
    expect_open_error(
        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[],\"dropout\":0.1}}",
        KLD_ERR_UNSUPPORTED, "dropout", "BPE dropout");
    expect_open_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":0},\"merges\":[]}}",
                      KLD_ERR_FORMAT, "assigned twice", "two tokens with one id");
    expect_open_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":-1},\"merges\":[]}}",
                      KLD_ERR_FORMAT, "not a valid id", "negative id");
    expect_open_error(
        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[],\"unk_token\":\"<unk>\"}}",
        KLD_ERR_FORMAT, "unk_token", "unk_token not in vocab");
    expect_open_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},"
                      "\"added_tokens\":[{\"id\":0,\"content\":\"<x>\",\"special\":true}]}",
                      KLD_ERR_FORMAT, "added_tokens[0]", "added token on a used id");
    expect_open_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[}",
                      KLD_ERR_FORMAT, "invalid JSON", "truncated JSON");
    expect_open_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},\"x\":tru}",
                      KLD_ERR_FORMAT, "invalid JSON", "bad literal outside the model");
    expect_open_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"\xFF\":0},\"merges\":[]}}",
                      KLD_ERR_FORMAT, "invalid JSON", "vocab key not UTF-8");
    expect_open_error(
        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},"
        "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":"
        "{\"id\":\"<s>\",\"type_id\":0}},{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],"
        "\"special_tokens\":{}}}",
        KLD_ERR_FORMAT, "'<s>'", "template naming an unknown special token");
    /* invalid UTF-8 text */
    char *j = mk(V_ABC, "", "", "");
    kld_tokenizer *t = open_json(j, "utf8");
    if (t) {
        kld_tok_ids ids = {0};
        kld_error err = {0};
        kld_status st = kld_tok_encode(t, "ab\xC3(", 4, 0, &ids, &err);
        CHECK(st == KLD_ERR_ARG && strstr(err.msg, "UTF-8") && strstr(err.msg, "offset 2"),
              "invalid UTF-8 input: %s", err.msg);
        st = kld_tok_encode(t, "\xED\xA0\x80", 3, 0, &ids, &err);
        CHECK(st == KLD_ERR_ARG && strstr(err.msg, "UTF-8"), "surrogate in input: %s", err.msg);
        kld_tok_ids_free(&ids);
    }
    kld_tok_free(t);
    free(j);
    /* files */
    kld_error err = {0};
    CHECK(kld_tok_open_path("../shared/no/such/tokenizer.json", &t, &err) == KLD_ERR_IO,
          "missing file: %s", err.msg);
    char path[1024];
    snprintf(path, sizeof path, "%s/tok-bad.json", kt_build_dir());
    const char *bad = "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}}}";
    kt_write_file(path, bad, strlen(bad));
    kld_status st = kld_tok_open_path(path, &t, &err);
    CHECK(st == KLD_ERR_FORMAT && strstr(err.msg, path) && strstr(err.msg, "merges"),
          "malformed file names itself and the field: %s", err.msg);
}

/* ---- GGUF vocabularies (llama.cpp semantics) ---- */

static char *write_gguf(const char *name, const char *model, const char *const *tokens,
                        const float *scores, const int32_t *types, int n, const char *const *merges,
                        int n_merges, const char *pre) {
    char *path = malloc(1024);
    snprintf(path, 1024, "%s/tok-%s.gguf", kt_build_dir(), name);
    kld_gguf_writer *w = kld_gguf_writer_create();
    kld_gguf_writer_set_str(w, "general.architecture", "llama");
    kld_gguf_writer_set_str(w, "tokenizer.ggml.model", model);
    if (pre) kld_gguf_writer_set_str(w, "tokenizer.ggml.pre", pre);
    if (tokens) kld_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", tokens, (uint64_t)n);
    if (scores) kld_gguf_writer_set_arr_f32(w, "tokenizer.ggml.scores", scores, (uint64_t)n);
    if (types) kld_gguf_writer_set_arr_i32(w, "tokenizer.ggml.token_type", types, (uint64_t)n);
    if (merges) kld_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", merges, (uint64_t)n_merges);
    kld_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
    kld_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2);
    kld_error err = {0};
    kld_status st = kld_gguf_writer_write(w, path, &err);
    CHECK_OK(st, err);
    kld_gguf_writer_free(w);
    return path;
}

#define U "\xE2\x96\x81"

static void test_gguf_spm(void) {
    /* SPM by score: "▁ab" has the best score, "ab" beats "▁a" */
    static const char *toks[] = {"<unk>", "<s>", "</s>", "<0x21>", "<0xC3>", "<0xA9>", U,
                                 "a",     "b",   U "a",  "ab",     U "ab",   "<x>"};
    static const float scores[] = {0, 0, 0, 0, 0, 0, -1, -2, -3, -5, -4, -1, 0};
    static const int32_t types[] = {2, 3, 3, 6, 6, 6, 1, 1, 1, 1, 1, 1, 4};
    char *path = write_gguf("spm", "llama", toks, scores, types, 13, NULL, 0, NULL);
    kld_tokenizer *t = NULL;
    kld_error err = {0};
    kld_status st = kld_tok_open_path(path, &t, &err);
    CHECK_OK(st, err);
    if (t) {
        expect_pieces(t, "ab", KLD_TOK_ADD_SPECIAL, "<s>|" U "ab",
                      "SPM: BOS, space prefix, best score");
        expect_pieces(t, "a b!", 0, U "a|" U "|b|<0x21>", "SPM: byte fallback for '!'");
        expect_pieces(t, "\xC3\xA9", 0, U "|<0xC3>|<0xA9>", "SPM: é as bytes");
        expect_pieces(t, "a<x>b", 0, U "a|<x>|" U "|b",
                      "SPM: user-defined token always split out; space prefix after it");
        expect_pieces(t, "<s>ab", KLD_TOK_PARSE_SPECIAL, "<s>|" U "ab",
                      "SPM: control token parsed");
        kld_tok_ids ids = {0};
        st = kld_tok_encode(t, "<s>", 3, 0, &ids, &err);
        CHECK(st == KLD_ERR_UNSUPPORTED && strstr(err.msg, "0x3C"),
              "SPM: '<' has no byte token: %s", err.msg);
        kld_tok_ids_free(&ids);
        expect_decode(t, "a b", KLD_TOK_ADD_SPECIAL, KLD_TOK_SKIP_SPECIAL, "a b", "SPM decode");
        expect_decode(t, "a b", KLD_TOK_ADD_SPECIAL, 0, "<s> a b", "SPM decode with BOS");
        kld_tok_summary s;
        kld_tok_summarize(t, &s);
        CHECK(!strcmp(s.kind, "spm") && !strcmp(s.source, "gguf") && s.n_vocab == 13 &&
                  s.bos_id == 1 && s.eos_id == 2 && s.unk_id == 0 && s.add_bos && !s.add_eos &&
                  s.n_added == 4 && s.n_special == 3 && s.n_merges == 0,
              "SPM summary: %s %s %d bos %d eos %d unk %d add %d/%d added %d special %d", s.kind,
              s.source, (int)s.n_vocab, (int)s.bos_id, (int)s.eos_id, (int)s.unk_id, s.add_bos,
              s.add_eos, (int)s.n_added, (int)s.n_special);
        CHECK(kld_tok_type(t, 3) == KLD_TOKEN_BYTE && kld_tok_type(t, 12) == KLD_TOKEN_USER_DEFINED,
              "token types");
        size_t pl = 0;
        const char *p = kld_tok_piece(t, 11, &pl);
        CHECK(p && pl == 5 && !memcmp(p, U "ab", 5) && kld_tok_piece_id(t, U "ab", 5) == 11 &&
                  kld_tok_piece(t, 13, &pl) == NULL && kld_tok_piece_id(t, "zz", 2) == -1,
              "piece lookups");
        kld_tok_free(t);
    }
    free(path);
}

#define G "\xC4\xA0"

static void test_gguf_bpe(void) {
    static const char *toks[] = {"!", "<s>", "</s>", "a", "b", G, G "a", "ab", G "ab"};
    static const int32_t types[] = {1, 3, 3, 1, 1, 1, 1, 1, 1};
    static const char *merges[] = {G " a", G "a b"};
    char *path = write_gguf("bpe", "gpt2", toks, NULL, types, 9, merges, 2, "gpt-2");
    kld_tokenizer *t = NULL;
    kld_error err = {0};
    kld_status st = kld_tok_open_path(path, &t, &err);
    CHECK_OK(st, err);
    if (t) {
        expect_pieces(t, "ab ab", KLD_TOK_ADD_SPECIAL, "a|b|" G "ab",
                      "gpt-2: merges by rank, no BOS");
        expect_decode(t, "ab ab!", 0, 0, "ab ab!", "byte-level decode");
        kld_tok_summary s;
        kld_tok_summarize(t, &s);
        CHECK(!strcmp(s.kind, "bpe") && !strcmp(s.pre, "gpt-2") && s.n_merges == 2 && !s.add_bos,
              "BPE summary: %s pre '%s' merges %llu", s.kind, s.pre,
              (unsigned long long)s.n_merges);
        kld_tok_free(t);
    }
    free(path);
    path = write_gguf("bpe3", "gpt2", toks, NULL, types, 9, merges, 2, "llama-bpe");
    st = kld_tok_open_path(path, &t, &err);
    CHECK_OK(st, err);
    if (t) {
        expect_pieces(t, "ab ab", KLD_TOK_ADD_SPECIAL, "<s>|ab|" G "ab",
                      "llama-bpe: BOS and ignore_merges");
        kld_tok_free(t);
    }
    free(path);
    /* errors */
    path = write_gguf("bpe-nomerges", "gpt2", toks, NULL, types, 9, NULL, 0, "gpt-2");
    st = kld_tok_open_path(path, &t, &err);
    CHECK(st == KLD_ERR_FORMAT && strstr(err.msg, "tokenizer.ggml.merges"), "no merges: %s",
          err.msg);
    free(path);
    path = write_gguf("bpe-pre", "gpt2", toks, NULL, types, 9, merges, 2, "martian");
    st = kld_tok_open_path(path, &t, &err);
    CHECK(st == KLD_ERR_UNSUPPORTED && strstr(err.msg, "'martian'"), "unknown pre: %s", err.msg);
    free(path);
    path = write_gguf("t5", "t5", toks, NULL, types, 9, NULL, 0, NULL);
    st = kld_tok_open_path(path, &t, &err);
    CHECK(st == KLD_ERR_UNSUPPORTED && strstr(err.msg, "'t5'"), "unsupported model: %s", err.msg);
    free(path);
    path = write_gguf("notokens", "llama", NULL, NULL, NULL, 0, NULL, 0, NULL);
    st = kld_tok_open_path(path, &t, &err);
    CHECK(st == KLD_ERR_FORMAT && strstr(err.msg, "tokenizer.ggml.tokens"), "no tokens: %s",
          err.msg);
    free(path);
    static const char *dup[] = {"a", "a", "b"};
    path = write_gguf("dup", "llama", dup, NULL, NULL, 3, NULL, 0, NULL);
    st = kld_tok_open_path(path, &t, &err);
    CHECK(st == KLD_ERR_FORMAT && strstr(err.msg, "duplicates"), "duplicate token: %s", err.msg);
    free(path);
}

/* ---- concurrency: one tokenizer, two threads ---- */

typedef struct job {
    const kld_tokenizer *t;
    const char *text;
    size_t n;
    kld_tok_ids ids;
    kld_status st;
} job;

static void *encode_lines(void *arg) {
    job *j = arg;
    kld_error err;
    size_t pos = 0;
    j->st = KLD_OK;
    while (pos < j->n && !j->st) {
        const char *nl = memchr(j->text + pos, '\n', j->n - pos);
        size_t end = nl ? (size_t)(nl - j->text) : j->n;
        j->st = kld_tok_encode(j->t, j->text + pos, end - pos, KLD_TOK_ADD_SPECIAL, &j->ids, &err);
        pos = end + 1;
    }
    return NULL;
}

static void test_threads(void) {
    kld_tokenizer *t = NULL;
    kld_error err = {0};
    kld_status st = kld_tok_open_path(KT_SHARED "/tokenizers/gpt2/tokenizer.json", &t, &err);
    CHECK_OK(st, err);
    if (st) return;
    size_t n;
    char *text = kt_read_file(KT_SHARED "/corpus/licenses.txt", &n);
    job one = {t, text, n, {0}, KLD_OK}, a = one, b = one;
    encode_lines(&one);
    pthread_t ta, tb;
    pthread_create(&ta, NULL, encode_lines, &a);
    pthread_create(&tb, NULL, encode_lines, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    CHECK(one.st == KLD_OK && a.st == KLD_OK && b.st == KLD_OK && one.ids.n > 50000 &&
              a.ids.n == one.ids.n && b.ids.n == one.ids.n &&
              !memcmp(a.ids.ids, one.ids.ids, one.ids.n * 4) &&
              !memcmp(b.ids.ids, one.ids.ids, one.ids.n * 4),
          "two threads give the single-thread ids (%zu, %zu, %zu)", one.ids.n, a.ids.n, b.ids.n);
    kld_tok_ids_free(&one.ids);
    kld_tok_ids_free(&a.ids);
    kld_tok_ids_free(&b.ids);
    free(text);
    kld_tok_free(t);
}

/* ---- property checks on random input ---- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) { /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 0x2545F4914F6CDD1Dull) >> 32);
}

static size_t put_cp(char *o, uint32_t cp) {
    if (cp < 0x80) return o[0] = (char)cp, 1;
    if (cp < 0x800) return o[0] = (char)(0xC0 | (cp >> 6)), o[1] = (char)(0x80 | (cp & 0x3F)), 2;
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Random text of many scripts and kinds of space, no '<' (special-token
 * look-alikes) and no U+2581 (SentencePiece's space mark). */
static size_t random_text(char *o, size_t max_cps) {
    static const uint32_t pool[][2] = {
        {'a', 'z'},       {'A', 'Z'},       {'0', '9'},         {' ', ' '},       {'!', '/'},
        {'\n', '\n'},     {'\t', '\t'},     {0xC0, 0xFF},       {0x300, 0x36F},   {0x400, 0x4FF},
        {0x4E00, 0x4FFF}, {0xAC00, 0xAC40}, {0x1F600, 0x1F64F}, {0x2000, 0x200A}, {0x3000, 0x3000}};
    size_t n = 0, k = rnd() % max_cps;
    for (size_t i = 0; i < k; i++) {
        const uint32_t *r = pool[rnd() % (sizeof pool / sizeof pool[0])];
        n += put_cp(o + n, r[0] + rnd() % (r[1] - r[0] + 1));
    }
    return n;
}

static void test_random_roundtrip(const char *path) {
    kld_tokenizer *t = NULL;
    kld_error err = {0};
    kld_status st = kld_tok_open_path(path, &t, &err);
    CHECK_OK(st, err);
    if (st) return;
    char text[4096];
    int bad = 0;
    for (int i = 0; i < 400; i++) {
        size_t n = random_text(text, 200);
        kld_tok_ids ids = {0};
        char *back = NULL;
        size_t bn = 0;
        st = kld_tok_encode(t, text, n, KLD_TOK_ADD_SPECIAL, &ids, &err);
        if (!st) st = kld_tok_decode(t, ids.ids, ids.n, KLD_TOK_SKIP_SPECIAL, &back, &bn, &err);
        if ((st || bn != n || memcmp(back, text, n)) && ++bad <= 3)
            CHECK(false, "%s: random text %d does not round-trip (%s)", path, i, st ? err.msg : "");
        free(back);
        kld_tok_ids_free(&ids);
    }
    CHECK(bad == 0, "%s: %d of 400 random texts do not round-trip", path, bad);
    kld_tok_free(t);
}

/* Damaged tokenizer.json texts: every one is either loaded or rejected
 * with a message, never a crash (run under the sanitizers). */
static void test_damaged_json(void) {
    const char *good =
        "{\"added_tokens\":[{\"id\":5,\"content\":\"<s>\",\"special\":true}],"
        "\"normalizer\":{\"type\":\"NFC\"},\"pre_tokenizer\":{\"type\":\"Sequence\","
        "\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\p{L}+|\\\\s+\"},"
        "\"behavior\":\"Isolated\"},{\"type\":\"ByteLevel\",\"use_regex\":false}]},"
        "\"decoder\":{\"type\":\"ByteLevel\"},\"model\":{\"type\":\"BPE\",\"vocab\":"
        "{\"a\":0,\"b\":1,\"ab\":2,\"\\u0120\":3,\"\\u0120a\":4},\"merges\":[\"a b\","
        "[\"\\u0120\",\"a\"]]}}";
    size_t n = strlen(good);
    char buf[1024];
    int loaded = 0, rejected = 0;
    for (int i = 0; i < 3000; i++) {
        memcpy(buf, good, n);
        size_t len = n;
        int edits = 1 + (int)(rnd() % 3);
        for (int e = 0; e < edits; e++) {
            size_t at = rnd() % len;
            switch (rnd() % 3) {
            case 0: buf[at] = (char)(rnd() % 256); break;                  /* overwrite a byte */
            case 1: len = at; break;                                       /* truncate */
            default: memmove(buf + at, buf + at + 1, len - at - 1), len--; /* delete */
            }
            if (len == 0) break;
        }
        kld_tokenizer *t = NULL;
        kld_error err = {0};
        kld_status st = kld_tok_open_json_text(buf, len, "damaged.json", &t, &err);
        if (st == KLD_OK) {
            loaded++;
            kld_tok_ids ids = {0};
            st = kld_tok_encode(t, "ab a\xC3\xA9<s>b", 11,
                                KLD_TOK_ADD_SPECIAL | KLD_TOK_PARSE_SPECIAL, &ids, &err);
            CHECK(st == KLD_OK || err.msg[0], "damaged file %d: encode failed without a message",
                  i);
            kld_tok_ids_free(&ids);
            kld_tok_free(t);
        } else {
            rejected++;
            if (!err.msg[0]) CHECK(false, "damaged file %d rejected without a message", i);
        }
    }
    CHECK(loaded > 0 && rejected > 0, "damaged files: %d loaded, %d rejected", loaded, rejected);
}

int main(void) {
    test_merge_order();
    test_unknown_chars();
    test_split_behaviors();
    test_byte_level();
    test_metaspace();
    test_normalizers();
    test_added_tokens();
    test_post_processors();
    test_decoders();
    test_malformed();
    test_gguf_spm();
    test_gguf_bpe();
    test_threads();
    test_random_roundtrip(KT_SHARED "/tokenizers/gpt2/tokenizer.json");
    test_random_roundtrip(KT_SHARED "/tokenizers/llama2/tokenizer.json");
    test_damaged_json();
    return kt_finish();
}
