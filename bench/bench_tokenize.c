/* bench_tokenize.c — tokenizer speed: load time of each tokenizer.json and
 * encode throughput (MB/s, tokens/s) on ../shared/corpus/licenses.txt
 * repeated 20 times, encoded as one text (as the kl command does) and line
 * by line (as `kldeval tokenize --file` does). Each figure is the median of
 * --reps runs with its min..max spread; the first (cold-cache) encode is
 * shown apart. The ratio column compares with Hugging Face tokenizers
 * 0.23.2 measured on this machine (1.6 MB/s qwen3, 2.1 MB/s llama3).
 * Run from the repository root:
 *   bench_tokenize [--reps N] [--copies N] [TOKENIZER ...] */
#include "common_bench.h"
#include "tokenizer/tokenizer.h"

static char *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)sz + 1);
    if (b && fread(b, 1, (size_t)sz, f) != (size_t)sz) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *n = (size_t)sz;
    return b;
}

/* Hugging Face tokenizers' throughput on this corpus, from the issue. */
static double hf_mbps(const char *path) {
    if (strstr(path, "qwen3")) return 1.6;
    if (strstr(path, "llama3")) return 2.1;
    return 0;
}

static int bench(const char *path, const char *text, size_t n, int reps) {
    enum { MAXR = 64 };
    double load[MAXR], whole[MAXR], lines[MAXR];
    size_t n_ids = 0;
    kld_error err = {0};
    kld_tokenizer *t = NULL;
    for (int r = 0; r < reps; r++) {
        double t0 = kb_now();
        if (kld_tok_open_path(path, &t, &err) != KLD_OK) {
            fprintf(stderr, "bench_tokenize: %s\n", err.msg);
            return 1;
        }
        load[r] = kb_now() - t0;
        if (r + 1 < reps) kld_tok_free(t);
    }
    double cold = 0;
    for (int r = 0; r <= reps; r++) { /* pass 0: cold word cache */
        kld_tok_ids ids = {0};
        double t0 = kb_now();
        if (kld_tok_encode(t, text, n, KLD_TOK_ADD_SPECIAL, &ids, &err) != KLD_OK) {
            fprintf(stderr, "bench_tokenize: %s\n", err.msg);
            return 1;
        }
        double d = kb_now() - t0;
        if (r == 0) cold = d;
        else whole[r - 1] = d;
        n_ids = ids.n;
        kld_tok_ids_free(&ids);
    }
    for (int r = 0; r < reps; r++) {
        kld_tok_ids ids = {0};
        double t0 = kb_now();
        for (size_t pos = 0; pos < n;) {
            const char *nl = memchr(text + pos, '\n', n - pos);
            size_t end = nl ? (size_t)(nl - text) : n;
            ids.n = 0;
            if (kld_tok_encode(t, text + pos, end - pos, KLD_TOK_ADD_SPECIAL, &ids, &err) !=
                KLD_OK) {
                fprintf(stderr, "bench_tokenize: %s\n", err.msg);
                return 1;
            }
            pos = end + 1;
        }
        lines[r] = kb_now() - t0;
        kld_tok_ids_free(&ids);
    }
    kld_tok_free(t);
    kb_summary l = kb_summarize(load, reps), w = kb_summarize(whole, reps),
               li = kb_summarize(lines, reps);
    double mb = (double)n / 1e6, hf = hf_mbps(path);
    const char *name = strstr(path, "qwen3") ? "qwen3" : strstr(path, "llama3") ? "llama3" : path;
    char label[256];
    snprintf(label, sizeof label, "%s load", name);
    kb_emit("bench_tokenize", label, "s", "lower", &l, NULL);
    snprintf(label, sizeof label, "%s encode whole", name);
    kb_emit("bench_tokenize", label, "s", "lower", &w,
            json_pack("{s:f,s:f,s:f}", "mb_per_s", mb / w.median, "tokens_per_s",
                      (double)n_ids / w.median, "hf_mb_per_s", hf));
    snprintf(label, sizeof label, "%s encode lines", name);
    kb_emit("bench_tokenize", label, "s", "lower", &li,
            json_pack("{s:f,s:f}", "mb_per_s", mb / li.median, "hf_mb_per_s", hf));
    fprintf(stderr, "%s\n", path);
    fprintf(stderr, "  load            %7.3f s     (%.3f..%.3f)\n", l.median, l.min, l.max);
    fprintf(stderr, "  encode, cold    %7.2f MB/s  %9.0f tokens/s\n", mb / cold, (double)n_ids / cold);
    fprintf(stderr, "  encode, whole   %7.2f MB/s  (%.2f..%.2f)  %9.0f tokens/s", mb / w.median,
            mb / w.max, mb / w.min, (double)n_ids / w.median);
    if (hf > 0) fprintf(stderr, "  %.1fx Hugging Face (a figure from another run)", mb / w.median / hf);
    fprintf(stderr, "\n  encode, lines   %7.2f MB/s  (%.2f..%.2f)", mb / li.median, mb / li.max,
            mb / li.min);
    if (hf > 0) fprintf(stderr, "  %.1fx Hugging Face (a figure from another run)", mb / li.median / hf);
    fprintf(stderr, "\n  %zu bytes -> %zu tokens, %d runs\n", n, n_ids, reps);
    return 0;
}

int main(int argc, char **argv) {
    int reps = 5, copies = 20;
    const char *paths[16];
    int np = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: bench_tokenize [--reps N] [--copies N] [TOKENIZER ...]\n"
                   "  --reps N     timed runs per measurement (default 5)\n"
                   "  --copies N   copies of licenses.txt encoded (default 20)\n"
                   "  TOKENIZER    tokenizer.json/GGUF paths (default: qwen3 and llama3 of ../shared)\n"
                   "Run from the repository root.\n");
            return 0;
        }
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--copies") && i + 1 < argc) copies = atoi(argv[++i]);
        else if (np < 16) paths[np++] = argv[i];
    }
    if (reps < 1 || reps > 64 || copies < 1 || copies > 1000) {
        fprintf(stderr, "bench_tokenize: --reps 1..64, --copies 1..1000\n");
        return 2;
    }
    if (np == 0) {
        paths[np++] = "../shared/tokenizers/qwen3/tokenizer.json";
        paths[np++] = "../shared/tokenizers/llama3/tokenizer.json";
    }
    size_t n1;
    char *one = read_file("../shared/corpus/licenses.txt", &n1);
    if (!one) {
        fprintf(stderr, "bench_tokenize: cannot read ../shared/corpus/licenses.txt (run from the "
                        "repository root)\n");
        return 1;
    }
    size_t n = n1 * (size_t)copies;
    char *text = malloc(n);
    for (int c = 0; c < copies; c++) memcpy(text + (size_t)c * n1, one, n1);
    fprintf(stderr, "licenses.txt x%d (%.2f MB), single thread\n", copies, (double)n / 1e6);
    int rc = 0;
    for (int i = 0; i < np && !rc; i++) rc = bench(paths[i], text, n, reps);
    free(text);
    free(one);
    return rc;
}
