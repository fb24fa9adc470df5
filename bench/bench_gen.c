/* bench_gen.c — greedy generation throughput of `kldeval cap` (tokens/s)
 * with 1 prompt in flight (the one-at-a-time baseline, M = 1 products)
 * against B prompts in flight (kld_cap_generate_batch: one M = B weight
 * pass per token step), on one model and thread count. The texts must be
 * identical for every B (checked, reported as "identical"); tokens are the
 * responses re-encoded, the same count for every B, so the ratios are the
 * ratios of the wall times. Prompts: n short story openings of different
 * lengths, no stop strings, at most --max-new tokens each. */
#include "cap/run.h"
#include "common_bench.h"

static const char *const openings[] = {
    "Once upon a time", "Lily and Tom went to the park.", "The little dog",
    "One day, a girl named Mia found a big box in her room. She", "The sun was hot and",
    "Bob had a red ball.", "There was a tree", "Sue wanted to play with her friend, but"};

static void usage(FILE *f) {
    fprintf(f, "usage: bench_gen [flags]\n"
               "  --model PATH     model (default ../shared/models/stories260K/f32.gguf)\n"
               "  --threads N      threads (default 2)\n"
               "  --n N            prompts (default 32)\n"
               "  --max-new N      tokens per prompt at most (default 96)\n"
               "  --reps N         repetitions (default 3)\n"
               "  --quick          --n 16 --max-new 48\n"
               "Batches timed: 1 2 4 8 16.\n");
}

int main(int argc, char **argv) {
    const char *model = "../shared/models/stories260K/f32.gguf";
    long long threads = 2, n = 32, max_new = 96, reps = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return usage(stdout), 0;
        else if (!strcmp(argv[i], "--model") && i + 1 < argc) model = argv[++i];
        else if (!strcmp(argv[i], "--threads")) { if (!kb_arg_int(argc, argv, &i, 1, 1024, &threads)) return 2; }
        else if (!strcmp(argv[i], "--n")) { if (!kb_arg_int(argc, argv, &i, 1, 4096, &n)) return 2; }
        else if (!strcmp(argv[i], "--max-new")) { if (!kb_arg_int(argc, argv, &i, 1, 4096, &max_new)) return 2; }
        else if (!strcmp(argv[i], "--reps")) { if (!kb_arg_int(argc, argv, &i, 1, 100, &reps)) return 2; }
        else if (!strcmp(argv[i], "--quick")) n = 16, max_new = 48;
        else return usage(stderr), 2;
    }
    kld_error err = {0};
    kld_cap_lm lm;
    if (kld_cap_lm_open(model, (int)threads, 0, &lm, &err) != KLD_OK) return fprintf(stderr, "%s\n", err.msg), 1;
    kld_cap_gen_item *items = calloc((size_t)n, sizeof *items);
    char **base = calloc((size_t)n, sizeof *base), **texts = calloc((size_t)n, sizeof *texts);
    const size_t n_open = sizeof openings / sizeof openings[0];
    for (long long i = 0; i < n; i++) items[i] = (kld_cap_gen_item){.prompt = openings[i % n_open], .add_bos = true, .max_new = (int)max_new};
    static const int batches[] = {1, 2, 4, 8, 16};
    double base_tps = 0;
    long long tokens = 0;
    printf("%s, %lld threads, %lld prompts, max %lld new tokens\n", model, threads, n, max_new);
    for (size_t b = 0; b < sizeof batches / sizeof batches[0]; b++) {
        double t[100];
        bool same = true;
        for (long long r = 0; r < reps; r++) {
            size_t done = 0;
            const double t0 = kb_now();
            if (kld_cap_generate_batch(&lm, items, (size_t)n, batches[b], NULL, texts, &done, &err) != KLD_OK)
                return fprintf(stderr, "%s\n", err.msg), 1;
            t[r] = kb_now() - t0;
            for (long long i = 0; i < n; i++) {
                if (b == 0 && r == 0) {
                    kld_tok_ids ids = {0};
                    if (kld_tok_encode(lm.tok, texts[i], strlen(texts[i]), 0, &ids, &err) == KLD_OK) tokens += (long long)ids.n;
                    kld_tok_ids_free(&ids);
                    base[i] = texts[i];
                    continue;
                }
                same &= !strcmp(base[i], texts[i]);
                free(texts[i]);
            }
        }
        const kb_summary s = kb_summarize(t, (int)reps);
        const double tps = (double)tokens / s.median;
        if (b == 0) base_tps = tps;
        printf("batch %2d: %8.1f tokens/s  (x%.2f of batch 1)  %.3f s  texts %s\n", batches[b], tps, tps / base_tps,
               s.median, same ? "identical" : "DIFFER");
        char name[32];
        snprintf(name, sizeof name, "gen_batch%d", batches[b]);
        kb_emit("bench_gen", name, "s", "lower", &s,
                json_pack("{s:f, s:f, s:I, s:I, s:b}", "tok_per_s", tps, "vs_batch1", tps / base_tps, "tokens",
                          (json_int_t)tokens, "threads", (json_int_t)threads, "identical", same));
    }
    for (long long i = 0; i < n; i++) free(base[i]);
    free(base), free(texts), free(items);
    kld_cap_lm_close(&lm);
    return 0;
}
