/* test_cap_hashhop.c — the HashHop generator against the documented
 * format (capability SOURCES.md §6). One structural checker is applied to
 * the upstream generator's shipped samples (hashhop/sample_seed0.json, to
 * show the checker reads the format as upstream writes it) and to
 * kldeval's samples with the same five parameter sets: line count C·H,
 * hash alphabet and length, every target key reaching its target in
 * exactly H hops ending at the quoted value, CoT/non-CoT targets, the
 * completion layout, the prompt length formula. Plus determinism by seed
 * and the exact-match scoring rule. */
#include "cap/hashhop.h"
#include "testlib.h"

#include <jansson.h>
#include <stdlib.h>

typedef struct pair {
    const char *k, *v;
    size_t vl;
    bool quoted;
} pair;

static bool is_hash(const char *s, size_t n, size_t L) {
    if (n != L) return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z'))) return false;
    return true;
}

/* keys[i], targets[i] for the C chains in generation order; queries = the
 * first Q keys. Returns true when everything holds. */
static bool check(const char *name, const char *prompt, const char *completion, const char *const *keys,
                  const char *const *targets, size_t C, size_t Q, size_t N, size_t H, size_t L, bool cot) {
    bool ok = true;
#define EXPECT(c, ...) do { if (!(c)) { ok = false; CHECK(false, __VA_ARGS__); } } while (0)
    EXPECT(C == (N + (2 * L + 3) * H - 1) / ((2 * L + 3) * H), "%s: C = %zu is not ceil(N/((2L+3)H))", name, C);
    size_t plen = strlen(prompt);
    EXPECT(plen == C * H * (2 * L + 3) + 2 * C + C * H - 1, "%s: prompt length %zu", name, plen);
    size_t n_lines = 1;
    for (const char *p = prompt; *p; p++) n_lines += *p == '\n';
    EXPECT(n_lines == C * H, "%s: %zu lines, want C*H = %zu", name, n_lines, C * H);
    pair *pairs = calloc(n_lines, sizeof *pairs);
    size_t np = 0;
    for (const char *p = prompt; np < n_lines;) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        bool quoted = n == 2 * L + 5;
        EXPECT(is_hash(p, L, L) && !strncmp(p + L, " = ", 3) &&
                   ((quoted && p[L + 3] == '\'' && p[n - 1] == '\'' && is_hash(p + L + 4, L, L)) ||
                    (!quoted && n == 2 * L + 3 && is_hash(p + L + 3, L, L))),
               "%s: line %zu '%.*s' is not `K = V` / `K = 'V'`", name, np, (int)n, p);
        pairs[np].k = p;
        pairs[np].v = p + L + 3 + quoted;
        pairs[np].vl = L;
        pairs[np].quoted = quoted;
        np++;
        if (!e) break;
        p = e + 1;
    }
    for (size_t c = 0; c < C && ok; c++) {
        const char *at = keys[c];
        char chain[4096] = "";
        size_t hops = 0;
        bool quoted = false;
        while (!quoted && hops <= H) {
            size_t hit = np;
            for (size_t i = 0; i < np; i++)
                if (!strncmp(pairs[i].k, at, L)) hit = i;
            if (hit == np) break;
            hops++;
            quoted = pairs[hit].quoted;
            size_t cl = strlen(chain);
            snprintf(chain + cl, sizeof chain - cl, "%s%.*s", cl ? " = " : "", (int)L, pairs[hit].v);
            at = pairs[hit].v;
        }
        EXPECT(quoted && hops == H, "%s: chain %zu: %zu hops to a quoted value (want %zu)", name, c, hops, H);
        const char *last = strrchr(chain, ' ');
        last = last ? last + 1 : chain;
        EXPECT(!strcmp(targets[c], cot ? chain : last), "%s: chain %zu target '%s', chain '%s'", name, c, targets[c], chain);
    }
    char want[65536];
    size_t w = (size_t)snprintf(want, sizeof want, "COMPLETION:\nHops=%zu\n\nCoT=%s\n\n", H, cot ? "True" : "False");
    for (size_t q = 0; q < Q; q++) w += (size_t)snprintf(want + w, sizeof want - w, "%s%s = '%s'", q ? "\n" : "", keys[q], targets[q]);
    snprintf(want + w, sizeof want - w, "\n");
    EXPECT(!strcmp(completion, want), "%s: completion '%s', want '%s'", name, completion, want);
    free(pairs);
    return ok;
#undef EXPECT
}

int main(void) {
    char *text = kt_read_file(KT_SHARED "/capability/hashhop/sample_seed0.json", NULL);
    json_error_t je;
    json_t *doc = json_loads(text, 0, &je);
    free(text);
    json_t *samples = json_object_get(doc, "samples");
    CHECK(json_array_size(samples) == 5, "5 shipped samples");
    for (size_t i = 0; i < json_array_size(samples); i++) {
        json_t *s = json_array_get(samples, i), *p = json_object_get(s, "params");
        size_t N = (size_t)json_integer_value(json_object_get(p, "n_chars_problem"));
        size_t Q = (size_t)json_integer_value(json_object_get(p, "num_queries"));
        size_t H = (size_t)json_integer_value(json_object_get(p, "hops"));
        size_t L = (size_t)json_integer_value(json_object_get(p, "hash_pair_str_length"));
        bool cot = json_is_true(json_object_get(p, "chain_of_thought"));
        json_t *t = json_object_get(s, "targets");
        size_t C = json_object_size(t);
        const char **keys = calloc(C, sizeof *keys), **targets = calloc(C, sizeof *targets);
        size_t k = 0;
        const char *key;
        json_t *v;
        json_object_foreach(t, key, v) { /* jansson keeps the file's order */
            keys[k] = key;
            targets[k++] = json_string_value(v);
        }
        char name[64];
        snprintf(name, sizeof name, "upstream sample %zu", i);
        CHECK(C == (size_t)json_integer_value(json_object_get(s, "n_chains")), "%s: n_chains", name);
        check(name, json_string_value(json_object_get(s, "prompt")), json_string_value(json_object_get(s, "completion")),
              keys, targets, C, Q, N, H, L, cot);
        /* ours with the same parameters, two seeds */
        for (uint64_t seed = 1; seed <= 2; seed++) {
            kld_hashhop_params hp = {N, Q, (int)H, (int)L, cot};
            kld_hashhop_sample a, b;
            kld_error err = {0};
            CHECK_OK(kld_hashhop_generate(&hp, seed, &a, &err), err);
            CHECK_OK(kld_hashhop_generate(&hp, seed, &b, &err), err);
            snprintf(name, sizeof name, "ours %zu seed %llu", i, (unsigned long long)seed);
            check(name, a.prompt, a.completion, (const char *const *)a.keys, (const char *const *)a.targets,
                  a.n_chains, a.n_queries, N, H, L, cot);
            CHECK(!strcmp(a.prompt, b.prompt) && !strcmp(a.completion, b.completion), "%s: a seed names one problem", name);
            kld_hashhop_sample c;
            CHECK_OK(kld_hashhop_generate(&hp, seed + 100, &c, &err), err);
            CHECK(strcmp(a.prompt, c.prompt) != 0, "%s: another seed, another problem", name);
            /* scoring: exact match up to the closing quote */
            char right[1024];
            snprintf(right, sizeof right, "%s'\nmore", a.targets[0]);
            CHECK(kld_hashhop_correct(&a, 0, right), "%s: the target scores", name);
            CHECK(!kld_hashhop_correct(&a, 0, a.targets[0]), "%s: no closing quote, no score", name);
            CHECK(!kld_hashhop_correct(&a, 1, right), "%s: another query's target does not score", name);
            char *qt = kld_hashhop_query_text(&a, 0);
            size_t ql = strlen(qt);
            CHECK(!strncmp(qt, a.prompt, strlen(a.prompt)) && ql > 4 + L && !strcmp(qt + ql - 4, " = '") &&
                      strstr(qt, a.header), "%s: the query text ends in \"key = '\"", name);
            free(qt);
            kld_hashhop_free(&a);
            kld_hashhop_free(&b);
            kld_hashhop_free(&c);
        }
        free(keys);
        free(targets);
    }
    json_decref(doc);
    kld_hashhop_params bad = {100, 1000, 1, 8, false};
    kld_hashhop_sample s;
    kld_error err = {0};
    CHECK(kld_hashhop_generate(&bad, 1, &s, &err) == KLD_ERR_ARG && strstr(err.msg, "1000 queries"), "Q > C: %s", err.msg);
    /* a large problem: ~12k tokens worth, all chains intact */
    kld_hashhop_params big = {40000, 50, 2, 16, true};
    CHECK_OK(kld_hashhop_generate(&big, 7, &s, &err), err);
    const char **k = (const char **)s.keys, **t = (const char **)s.targets;
    check("ours 40000 chars", s.prompt, s.completion, k, t, s.n_chains, s.n_queries, 40000, 2, 16, true);
    kld_hashhop_free(&s);
    return kt_finish();
}
