/* bench_tokenize.c — tokenizer speed: load time of each tokenizer.json and
 * encode throughput (MB/s, tokens/s) on ../shared/corpus/licenses.txt
 * repeated 20 times, encoded as one text (as the kl command does) and line
 * by line (as `kldeval tokenize --file` does). Each figure is the median of
 * --reps runs with its min..max spread; the first (cold-cache) encode is
 * shown apart. The ratio column compares with Hugging Face tokenizers
 * 0.23.2 measured on this machine (1.6 MB/s qwen3, 2.1 MB/s llama3).
 * Run from the repository root:
 *   bench_tokenize [--reps N] [--copies N] [TOKENIZER ...] */
#include "tokenizer/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct stat3 {
    double med, min, max;
} stat3;

static stat3 stats(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    stat3 s = {n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]), v[0], v[n - 1]};
    return s;
}

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
        double t0 = now();
        if (kld_tok_open_path(path, &t, &err) != KLD_OK) {
            fprintf(stderr, "bench_tokenize: %s\n", err.msg);
            return 1;
        }
        load[r] = now() - t0;
        if (r + 1 < reps) kld_tok_free(t);
    }
    double cold = 0;
    for (int r = 0; r <= reps; r++) { /* pass 0: cold word cache */
        kld_tok_ids ids = {0};
        double t0 = now();
        if (kld_tok_encode(t, text, n, KLD_TOK_ADD_SPECIAL, &ids, &err) != KLD_OK) {
            fprintf(stderr, "bench_tokenize: %s\n", err.msg);
            return 1;
        }
        double d = now() - t0;
        if (r == 0) cold = d;
        else whole[r - 1] = d;
        n_ids = ids.n;
        kld_tok_ids_free(&ids);
    }
    for (int r = 0; r < reps; r++) {
        kld_tok_ids ids = {0};
        double t0 = now();
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
        lines[r] = now() - t0;
        kld_tok_ids_free(&ids);
    }
    kld_tok_free(t);
    stat3 l = stats(load, reps), w = stats(whole, reps), li = stats(lines, reps);
    double mb = (double)n / 1e6, hf = hf_mbps(path);
    printf("%s\n", path);
    printf("  load            %7.3f s     (%.3f..%.3f)\n", l.med, l.min, l.max);
    printf("  encode, cold    %7.2f MB/s  %9.0f tokens/s\n", mb / cold, (double)n_ids / cold);
    printf("  encode, whole   %7.2f MB/s  (%.2f..%.2f)  %9.0f tokens/s", mb / w.med, mb / w.max,
           mb / w.min, (double)n_ids / w.med);
    if (hf > 0) printf("  %.1fx Hugging Face", mb / w.med / hf);
    printf("\n  encode, lines   %7.2f MB/s  (%.2f..%.2f)", mb / li.med, mb / li.max, mb / li.min);
    if (hf > 0) printf("  %.1fx Hugging Face", mb / li.med / hf);
    printf("\n  %zu bytes -> %zu tokens, %d runs\n", n, n_ids, reps);
    return 0;
}

int main(int argc, char **argv) {
    int reps = 5, copies = 20;
    const char *paths[16];
    int np = 0;
    for (int i = 1; i < argc; i++) {
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
    printf("licenses.txt x%d (%.2f MB), single thread\n", copies, (double)n / 1e6);
    int rc = 0;
    for (int i = 0; i < np && !rc; i++) rc = bench(paths[i], text, n, reps);
    free(text);
    free(one);
    return rc;
}
