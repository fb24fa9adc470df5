/* test_cap_sampler.c — sampling for the capability tasks (sampler.c,
 * think.c, gen_batch.c): the filters and the draw on hand-made logits with
 * hand-computed results; the counter-based uniform against SplitMix64's
 * published first output; the sampler text; pass@k on known counts and in
 * the report (hand-made sampled items);
 * thinking stripping on crafted strings; Qwen3's enable_thinking branch of
 * the template; and on stories260K: the same seed gives identical responses
 * for batch 1/4 and threads 1/2, another seed different ones, temperature 0
 * and top_k = 1 equal greedy exactly, and the thinking budget forces the
 * close after exactly N tokens. With the kldeval binary: `cap` with
 * --sampler/--arm-sampler/--samples reports its samplers and pass@k. */
#include "chat/chat.h"
#include "cap/run.h"
#include "cap/units.h"
#include "testlib.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>

static uint64_t splitmix_ref(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int cmp_ref(const void *a, const void *b) {
    const kld_cap_cand *x = a, *y = b;
    if (x->logit != y->logit) return x->logit > y->logit ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* The candidate order equals a comparison sort (logit descending, ties to
 * the lower id) on logits with many ties, both zeros, infinities and NaN
 * (as -inf). */
static void test_order(void) {
    enum { N = 5000 };
    static float l[N];
    static kld_cap_cand c[2 * N], want[N];
    static double p[N];
    uint64_t x = 12345;
    for (int i = 0; i < N; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        const int r = (int)(x >> 33) % 400;
        l[i] = r == 0 ? -0.0f : r == 1 ? 0.0f : r == 2 ? -INFINITY : r == 3 ? INFINITY : r == 4 ? NAN : (float)(r - 200) * 0.37f;
        want[i] = (kld_cap_cand){isnan(l[i]) ? -INFINITY : l[i], i};
    }
    qsort(want, N, sizeof *want, cmp_ref);
    kld_cap_sampler s = {1, 0, 1, 0, 0};
    kld_cap_sampler_filter(&s, l, N, c, p);
    int bad = 0;
    for (int i = 0; i < N; i++) bad += c[i].id != want[i].id;
    CHECK(bad == 0, "candidate order: %d of %d positions differ from the comparison sort", bad, N);
}

static void test_filters(void) {
    /* sorted: id1 (3), id3 (3, the tie after the lower id), id2 (2), id0 (1), id4 (0), id5 (-1) */
    const float l[6] = {1, 3, 2, 3, 0, -1};
    kld_cap_cand c[12];
    double p[6];
    kld_cap_sampler s = {1, 0, 1, 0, 0};
    size_t m = kld_cap_sampler_filter(&s, l, 6, c, p);
    CHECK(m == 6 && c[0].id == 1 && c[1].id == 3 && c[2].id == 2 && c[3].id == 0 && c[4].id == 4 && c[5].id == 5,
          "no filter: %zu survivors, order %d %d %d %d %d %d", m, c[0].id, c[1].id, c[2].id, c[3].id, c[4].id, c[5].id);
    const double z = 2 + exp(-1) + exp(-2) + exp(-3) + exp(-4);
    CHECK(fabs(p[0] - 1 / z) < 1e-15 && fabs(p[5] - exp(-4) / z) < 1e-15, "softmax: %.17g %.17g", p[0], p[5]);
    s.top_k = 3; /* ids 1, 3, 2 with 1, 1, e^-1 */
    m = kld_cap_sampler_filter(&s, l, 6, c, p);
    const double z3 = 2 + exp(-1);
    CHECK(m == 3 && fabs(p[2] - exp(-1) / z3) < 1e-15, "top_k=3: %zu, p2 %.17g", m, p[2]);
    /* the draw: cumulative 0.4223, 0.8446, 1 */
    CHECK(kld_cap_sample(&s, l, 6, 0.1, c, p) == 1 && kld_cap_sample(&s, l, 6, 0.5, c, p) == 3 &&
              kld_cap_sample(&s, l, 6, 0.9, c, p) == 2 && kld_cap_sample(&s, l, 6, 0.9999999999, c, p) == 2,
          "top_k=3 draws");
    s.temperature = 2; /* 1, 1, e^-0.5 */
    m = kld_cap_sampler_filter(&s, l, 6, c, p);
    CHECK(m == 3 && fabs(p[0] - 1 / (2 + exp(-0.5))) < 1e-15, "T=2: p0 %.17g", p[0]);
    /* top-p after top-k: over {1, 3} each 0.5, so 0.5 is reached by the
     * first (before top-k it would take two: 1/z = 0.389 < 0.5) */
    s = (kld_cap_sampler){1, 2, 0.5, 0, 0};
    CHECK(kld_cap_sampler_filter(&s, l, 6, c, p) == 1 && c[0].id == 1 && p[0] == 1.0, "top_k=2, top_p=0.5");
    s = (kld_cap_sampler){1, 0, 0.5, 0, 0};
    CHECK(kld_cap_sampler_filter(&s, l, 6, c, p) == 2, "top_p=0.5 alone: two");
    s.top_p = 0.9; /* cumulative 0.389 0.778 0.921 */
    CHECK(kld_cap_sampler_filter(&s, l, 6, c, p) == 3, "top_p=0.9: three");
    s = (kld_cap_sampler){1, 0, 1, 0.3, 0}; /* exp(l - 3) >= 0.3: 1, 1, 0.368 */
    CHECK(kld_cap_sampler_filter(&s, l, 6, c, p) == 3, "min_p=0.3: three");
    s.min_p = 0.37; /* e^-1 = 0.3679 < 0.37 */
    CHECK(kld_cap_sampler_filter(&s, l, 6, c, p) == 2, "min_p=0.37: two");
    s = (kld_cap_sampler){1, 4, 0.95, 0.14, 0}; /* top-k 4; top-p over 4: 0.399 0.799 0.946 → all 4; min-p: e^-2 < 0.14 */
    CHECK(kld_cap_sampler_filter(&s, l, 6, c, p) == 3, "top_k=4, top_p=0.95, min_p=0.14: three");
    kld_cap_sampler g;
    kld_cap_sampler_greedy(&g);
    CHECK(kld_cap_sample(&g, l, 6, 0.99, c, p) == 1, "greedy: the lower of the tied maxima");
    s = (kld_cap_sampler){0.7, 1, 1, 0, 5};
    CHECK(kld_cap_sample(&s, l, 6, 0.99, c, p) == 1, "top_k=1: the argmax");
}

static void test_uniform_and_text(void) {
    CHECK(splitmix_ref(0) == 0xE220A8397B1DCDAFull, "SplitMix64's first output from state 0");
    const uint64_t h = splitmix_ref(splitmix_ref(splitmix_ref(splitmix_ref(7) ^ 3) ^ 1) ^ 11);
    const double u = kld_cap_uniform(7, 3, 1, 11);
    CHECK(u == (double)(h >> 11) * 0x1.0p-53 && u >= 0 && u < 1, "uniform(7, 3, 1, 11) = %.17g", u);
    CHECK(u != kld_cap_uniform(8, 3, 1, 11) && u != kld_cap_uniform(7, 4, 1, 11) && u != kld_cap_uniform(7, 3, 2, 11) &&
              u != kld_cap_uniform(7, 3, 1, 12), "every key changes the draw");
    kld_cap_sampler s;
    kld_error err = {0};
    char buf[256];
    CHECK_OK(kld_cap_sampler_parse("temperature=0.7,top_k=40,top_p=0.95,min_p=0.05,seed=42", &s, &err), err);
    kld_cap_sampler_format(&s, buf, sizeof buf);
    CHECK(!strcmp(buf, "temperature=0.7,top_k=40,top_p=0.95,min_p=0.05,seed=42"), "format: %s", buf);
    CHECK_OK(kld_cap_sampler_parse("seed=3", &s, &err), err);
    CHECK(s.temperature == 1 && s.top_k == 0 && s.top_p == 1 && s.min_p == 0 && s.seed == 3, "defaults");
    CHECK_OK(kld_cap_sampler_parse("temperature=0,top_k=3", &s, &err), err);
    kld_cap_sampler_format(&s, buf, sizeof buf);
    CHECK(kld_cap_sampler_is_greedy(&s) && !strcmp(buf, "greedy"), "temperature=0 is greedy: %s", buf);
    static const char *const bad[] = {"top_p=0", "top_p=1.5", "temperature=-1", "top_k=-2", "seed=x", "foo=1", "top_k",
                                      "min_p=nan", NULL};
    for (int i = 0; bad[i]; i++) {
        err.msg[0] = 0;
        CHECK(kld_cap_sampler_parse(bad[i], &s, &err) == KLD_ERR_ARG && strstr(err.msg, bad[i]), "'%s': %s", bad[i],
              err.msg);
    }
}

static double binom(unsigned n, unsigned k) {
    if (k > n) return 0;
    double r = 1;
    for (unsigned i = 1; i <= k; i++) r = r * (n - k + i) / i;
    return r;
}

static void test_pass_at_k(void) {
    CHECK(kld_cap_pass_at_k(10, 0, 1) == 0 && kld_cap_pass_at_k(10, 10, 1) == 1, "pass@1 of 0 and all");
    CHECK(fabs(kld_cap_pass_at_k(10, 3, 1) - 0.3) < 1e-15, "pass@1 = c/n: %.17g", kld_cap_pass_at_k(10, 3, 1));
    CHECK(kld_cap_pass_at_k(10, 3, 10) == 1, "pass@10 of 10 with one right");
    CHECK(fabs(kld_cap_pass_at_k(5, 2, 2) - 0.7) < 1e-15, "pass@2 of 5 with 2: 1 - 3/10");
    const double want = 1 - binom(15, 10) / binom(20, 10); /* 1 - 3003/184756 */
    CHECK(fabs(kld_cap_pass_at_k(20, 5, 10) - want) < 1e-14 && fabs(want - (1 - 3003.0 / 184756)) < 1e-14,
          "pass@10 of 20 with 5: %.17g vs %.17g", kld_cap_pass_at_k(20, 5, 10), want);
    CHECK(isnan(kld_cap_pass_at_k(5, 1, 10)), "k > n: NaN");
}

/* The report of sampled HumanEval items: pass@k and the accuracy from
 * hand-made counts (3 of 10 and 0 of 10, and 20 of 20 for pass@2 of 20). */
static void test_report(void) {
    kld_cap_unit u = {.task = "humaneval", .name = "humaneval", .total = 2};
    u.items[0] = json_pack("[{s:b, s:f, s:i, s:i}, {s:b, s:f, s:i, s:i}]", "correct", 1, "score", 0.3, "n_correct", 3,
                           "samples", 10, "correct", 0, "score", 0.0, "n_correct", 0, "samples", 10);
    u.pos[0] = json_pack("[i, i]", 0, 1);
    json_t *rep = kld_cap_build_report(&u, 1, 1, json_object(), NULL, false, json_object());
    const json_t *ref = json_object_get(json_object_get(json_object_get(rep, "tasks"), "humaneval"), "ref");
    const json_t *pk = json_object_get(ref, "pass_at_k");
    const double want10 = (1 - binom(7, 10) / binom(10, 10) + 0) / 2; /* C(7, 10) = 0: 0.5 */
    CHECK(fabs(json_real_value(json_object_get(pk, "1")) - 0.15) < 1e-15 &&
              fabs(json_real_value(json_object_get(pk, "10")) - want10) < 1e-15 && want10 == 0.5 &&
              fabs(json_real_value(json_object_get(ref, "accuracy")) - 0.15) < 1e-15 &&
              json_integer_value(json_object_get(ref, "correct")) == 3 &&
              json_integer_value(json_object_get(ref, "n_responses")) == 20,
          "report: pass@1 %.17g, pass@10 %.17g, accuracy %.17g", json_real_value(json_object_get(pk, "1")),
          json_real_value(json_object_get(pk, "10")), json_real_value(json_object_get(ref, "accuracy")));
    json_decref(rep);
    kld_cap_units_free(&u, 1);
}

static void strip_is(const char *in, bool opened, const char *want) {
    char *s = kld_cap_strip_thinking(in, opened);
    CHECK(s && !strcmp(s, want), "strip '%s' (%d): '%s', want '%s'", in, opened, s ? s : "(null)", want);
    free(s);
}

static void test_thinking(void) {
    strip_is("<think>\nlet me see\n</think>\n\nThe answer is 4.", false, "The answer is 4.");
    strip_is("The answer is 4.", false, "The answer is 4.");
    strip_is("  no block", true, "");
    strip_is("opened by the prompt</think> done", true, "done");
    strip_is("<think>a</think>x<think>b</think>\ty", false, "y");
    strip_is("Answer first <think>then never closed", false, "Answer first ");
    CHECK(kld_cap_thinking_open("abc<think>x", false) && !kld_cap_thinking_open("<think>x</think>", true) &&
              kld_cap_thinking_open("plain", true) && !kld_cap_thinking_open("plain", false),
          "thinking_open");
    /* Qwen3's generation prompt: thinking off writes an empty block */
    static const char *tmpl =
        "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
        "{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- if enable_thinking is defined "
        "and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}{%- endif %}";
    json_t *msgs = json_pack("[{s:s, s:s}]", "role", "user", "content", "hi");
    json_t *on = json_pack("{s:b}", "enable_thinking", 1), *off = json_pack("{s:b}", "enable_thinking", 0);
    char *r_on = NULL, *r_off = NULL, *r_def = NULL;
    kld_error err = {0};
    kld_chat_opts o = {.messages = msgs, .add_generation_prompt = true, .extra = on};
    CHECK_OK(kld_chat_render(tmpl, &o, &r_on, &err), err);
    o.extra = off;
    CHECK_OK(kld_chat_render(tmpl, &o, &r_off, &err), err);
    o.extra = NULL;
    CHECK_OK(kld_chat_render(tmpl, &o, &r_def, &err), err);
    CHECK(r_on && !strcmp(r_on, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"), "on: '%s'", r_on);
    CHECK(r_off && !strcmp(r_off, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"),
          "off: '%s'", r_off);
    CHECK(r_def && r_on && !strcmp(r_def, r_on), "not passed: the template's default (thinking)");
    free(r_on), free(r_off), free(r_def);
    json_decref(msgs), json_decref(on), json_decref(off);
}

#define N_ITEMS 6

/* texts of the items with sampler s (NULL: greedy) on batch b. */
static void gen_all(kld_cap_lm *lm, const kld_cap_sampler *s, int batch, int max_new, char **out) {
    static const char *const prompts[N_ITEMS] = {"Once upon a time", "Lily", "The little dog ran to the park and",
                                                 "Tom and Sue were friends.", "One day", "The sun"};
    kld_cap_gen_item items[N_ITEMS];
    for (int i = 0; i < N_ITEMS; i++)
        items[i] = (kld_cap_gen_item){.prompt = prompts[i], .add_bos = true, .max_new = max_new, .sampler = s,
                                      .item = (uint64_t)(100 + i)};
    kld_error err = {0};
    size_t done = 0;
    CHECK_OK(kld_cap_generate_batch(lm, items, N_ITEMS, batch, NULL, out, &done, &err), err);
}

static int n_differ(char *const *a, char *const *b) {
    int d = 0;
    for (int i = 0; i < N_ITEMS; i++) d += !a[i] || !b[i] || strcmp(a[i], b[i]) != 0;
    return d;
}

static void free_all(char **t) {
    for (int i = 0; i < N_ITEMS; i++) free(t[i]), t[i] = NULL;
}

static void test_generation(void) {
    char *ref[N_ITEMS] = {0}, *greedy[N_ITEMS] = {0}, *t[N_ITEMS] = {0};
    const kld_cap_sampler s7 = {1.0, 0, 0.95, 0.02, 7}, s8 = {1.0, 0, 0.95, 0.02, 8};
    const kld_cap_sampler t0 = {0, 40, 0.5, 0.1, 7}, k1 = {0.8, 1, 1, 0, 7};
    kld_error err = {0};
    for (int threads = 1; threads <= 2; threads++) {
        kld_cap_lm lm;
        CHECK_OK(kld_cap_lm_open(KT_SHARED "/models/stories260K/f32.gguf", threads, 0, &lm, &err), err);
        if (!lm.s) return;
        if (threads == 1) {
            gen_all(&lm, &s7, 1, 24, ref);
            gen_all(&lm, NULL, 1, 24, greedy);
            printf("seed 7, item 100: '%s'\ngreedy:           '%s'\n", ref[0], greedy[0]);
        }
        for (int b = 1; b <= 4; b += 3) {
            gen_all(&lm, &s7, b, 24, t);
            CHECK(n_differ(t, ref) == 0, "seed 7, batch %d, %d threads: %d texts differ", b, threads, n_differ(t, ref));
            free_all(t);
        }
        gen_all(&lm, &s8, 4, 24, t);
        CHECK(n_differ(t, ref) >= N_ITEMS / 2, "seed 8: only %d of %d texts differ from seed 7", n_differ(t, ref), N_ITEMS);
        free_all(t);
        gen_all(&lm, &t0, 3, 24, t);
        CHECK(n_differ(t, greedy) == 0, "temperature=0: %d texts differ from greedy", n_differ(t, greedy));
        free_all(t);
        gen_all(&lm, &k1, 2, 24, t);
        CHECK(n_differ(t, greedy) == 0, "top_k=1: %d texts differ from greedy", n_differ(t, greedy));
        free_all(t);
        CHECK(n_differ(ref, greedy) >= N_ITEMS / 2, "sampled vs greedy: only %d differ", n_differ(ref, greedy));
        if (threads == 1) {
            /* the budget: 5 tokens inside the block opened by the prompt, then the close, then on */
            const char *p = "Once upon a time<think>";
            char *five = NULL, *full = NULL;
            CHECK_OK(kld_cap_generate(&lm, p, true, 5, NULL, &five, &err), err);
            kld_cap_gen_item it = {.prompt = p, .add_bos = true, .max_new = 30, .think_budget = 5};
            size_t done = 0;
            CHECK_OK(kld_cap_generate_batch(&lm, &it, 1, 1, NULL, &full, &done, &err), err);
            /* a SentencePiece tokenizer's dummy prefix puts one space before the forced text */
            size_t fl = five ? strlen(five) : 0;
            if (full && five && full[fl] == ' ') fl++;
            const size_t cl = strlen(KLD_CAP_THINK_CLOSE);
            CHECK(five && full && !strncmp(full, five, strlen(five)) && !strncmp(full + fl, KLD_CAP_THINK_CLOSE, cl) &&
                      strlen(full) > fl + cl,
                  "budget 5: '%s' should be '%s' + close + more", full ? full : "", five ? five : "");
            char *stripped = full ? kld_cap_strip_thinking(full, true) : NULL;
            CHECK(stripped && full && strlen(full) >= fl + cl && !strcmp(stripped, full + fl + cl) && *stripped,
                  "budget 5 stripped: '%s'", stripped ? stripped : "");
            free(stripped), free(five), free(full);
        }
        kld_cap_lm_close(&lm);
    }
    free_all(ref);
    free_all(greedy);
}

static int run(const char *kldeval, const char *args, char **out) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' %s 2>&1", kldeval, args);
    return kt_run_capture(cmd, out);
}

static void test_cli(const char *kldeval) {
    char json_path[4096], args[8192], *out = NULL;
    snprintf(json_path, sizeof json_path, "%s/cap_sampler.json", kt_build_dir());
    snprintf(args, sizeof args,
             "cap -m " KT_SHARED "/models/stories260K/f32.gguf --tasks humaneval,gsm8k --n 2 --max-new 6 --samples 10 "
             "--sampler temperature=0.9,seed=3 --arm-sampler temperature=1.2,top_k=20,seed=3 --thinking off --no-db -q "
             "--json '%s'", json_path);
    int rc = run(kldeval, args, &out);
    CHECK(rc == 0, "cap with samplers: rc %d\n%s", rc, out);
    CHECK(strstr(out, "sampler: ref temperature=0.9,top_k=0,top_p=1,min_p=0,seed=3, arm temperature=1.2,top_k=20,"
                      "top_p=1,min_p=0,seed=3; 10 samples per item; thinking off") != NULL,
          "the text report names the samplers:\n%s", out);
    free(out);
    json_error_t je;
    json_t *rep = json_load_file(json_path, 0, &je);
    CHECK(rep != NULL, "%s: %s", json_path, je.text);
    if (!rep) return;
    const json_t *cfg = json_object_get(rep, "config");
    CHECK(!strcmp(json_string_value(json_object_get(json_object_get(cfg, "arm"), "sampler")),
                  "temperature=1.2,top_k=20,top_p=1,min_p=0,seed=3") &&
              json_is_true(json_object_get(json_object_get(cfg, "arm"), "shares_weights")) &&
              json_integer_value(json_object_get(cfg, "samples")) == 10,
          "config: the arm's sampler, self-flag, samples");
    for (int a = 0; a < 2; a++) {
        const json_t *he = json_object_get(json_object_get(json_object_get(rep, "tasks"), "humaneval"), a ? "arm" : "ref");
        const json_t *items = json_object_get(he, "items");
        double p1 = 0, p10 = 0, acc = 0;
        for (size_t i = 0; i < json_array_size(items); i++) {
            const json_t *r = json_array_get(items, i);
            const json_int_t c = json_integer_value(json_object_get(r, "n_correct"));
            CHECK(json_array_size(json_object_get(r, "responses")) == 10 && c >= 0 && c <= 10, "item %zu: 10 responses", i);
            p1 += c / 10.0, p10 += c > 0, acc += c / 10.0;
        }
        const size_t n = json_array_size(items);
        CHECK(n == 2 && fabs(json_real_value(json_object_get(json_object_get(he, "pass_at_k"), "1")) - p1 / n) < 1e-15 &&
                  fabs(json_real_value(json_object_get(json_object_get(he, "pass_at_k"), "10")) - p10 / n) < 1e-15 &&
                  fabs(json_real_value(json_object_get(he, "accuracy")) - acc / n) < 1e-15,
              "humaneval %s: pass@1, pass@10 and the accuracy from the items", a ? "arm" : "ref");
        /* sampled: the ten responses of an item are not all one text */
        const json_t *resp = json_object_get(json_array_get(items, 0), "responses");
        bool varied = false;
        for (size_t k = 1; k < json_array_size(resp); k++)
            varied |= strcmp(json_string_value(json_array_get(resp, 0)), json_string_value(json_array_get(resp, k))) != 0;
        CHECK(varied, "humaneval %s: the samples of item 0 differ", a ? "arm" : "ref");
    }
    json_decref(rep);
    rc = run(kldeval, "cap -m " KT_SHARED "/models/stories260K/f32.gguf --sampler top_p=2 --no-db", &out);
    CHECK(rc == 2 && strstr(out, "top_p=2"), "bad --sampler: rc %d: %s", rc, out);
    free(out);
    rc = run(kldeval, "cap -m " KT_SHARED "/models/stories260K/f32.gguf --thinking maybe --no-db", &out);
    CHECK(rc == 2 && strstr(out, "maybe"), "bad --thinking: rc %d: %s", rc, out);
    free(out);
}

int main(int argc, char **argv) {
    test_order();
    test_filters();
    test_uniform_and_text();
    test_pass_at_k();
    test_report();
    test_thinking();
    test_generation();
    if (argc > 1) test_cli(argv[1]);
    return kt_finish();
}
