/* test_report_llamacpp.c — kld_report_llamacpp against llama-perplexity's
 * own output: the final statistics block of two oracle runs
 * (aidreams260K/small-kld-q8_0.txt, rand-llama/kld-q8_0.txt) is parsed into
 * a kld_summary (every field the block shows), printed again, and the text
 * must equal the file's block line for line. Also: nothing is printed for
 * fewer than 100 positions, and a write error is reported. */
#include "testlib.h"

#include "report/report.h"

#include <stdlib.h>
#include <string.h>

#define FIRST_LINE "====== Perplexity statistics ======"
#define LAST_PREFIX "Same top p:"

/* The block from FIRST_LINE to the end of the LAST_PREFIX line (heap). */
static char *extract_block(const char *text) {
    const char *a = strstr(text, FIRST_LINE);
    if (!a) return NULL;
    const char *z = strstr(a, LAST_PREFIX);
    if (!z) return NULL;
    z = strchr(z, '\n');
    if (!z) return NULL;
    return kld_strndup(a, (size_t)(z + 1 - a));
}

/* The numbers after the line's label (after "): " for the Cor line, else
 * after the first ':'): up to 2, in order. Returns how many. */
static int numbers(const char *text, double v[2]) {
    char line[256];
    const char *nl = strchr(text, '\n');
    size_t len = nl ? (size_t)(nl - text) : strlen(text);
    if (len >= sizeof line) return 0;
    memcpy(line, text, len);
    line[len] = '\0';
    const char *p = strstr(line, "): ");
    p = p ? p + 2 : strchr(line, ':');
    if (!p) return 0;
    p++;
    int n = 0;
    while (*p && n < 2) {
        if ((*p >= '0' && *p <= '9') || *p == '-' || *p == '.') {
            char *end;
            v[n++] = strtod(p, &end);
            p = end;
        } else {
            p++;
        }
    }
    return n;
}

/* Fills s from the block's lines (in llama.cpp's fixed order). */
static bool parse_block(const char *block, kld_summary *s) {
    memset(s, 0, sizeof *s);
    s->n_positions = s->n_tokens = 1000; /* any N >= 100: the block is printed */
    struct {
        const char *prefix;
        double *a, *b; /* b NULL: one number */
        double scale;  /* 0.01 for percent values */
    } map[] = {
        {"Mean PPL(Q) ", &s->ppl_arm, &s->ppl_arm_se, 1},
        {"Mean PPL(base) ", &s->ppl_ref, &s->ppl_ref_se, 1},
        {"Cor(", &s->nll_cor, NULL, 0.01},
        {"Mean ln(PPL(Q)/PPL(base))", &s->ln_ppl_ratio, &s->ln_ppl_ratio_se, 1},
        {"Mean PPL(Q)/PPL(base)", &s->ppl_ratio, &s->ppl_ratio_se, 1},
        {"Mean PPL(Q)-PPL(base)", &s->ppl_diff, &s->ppl_diff_se, 1},
        {"Mean    KLD:", &s->kld.mean, &s->kld.se, 1},
        {"Maximum KLD:", &s->kld.max, NULL, 1},
        {"99.9%   KLD:", &s->kld.pct[9], NULL, 1},
        {"99.0%   KLD:", &s->kld.pct[8], NULL, 1},
        {"Median  KLD:", &s->kld.median, NULL, 1},
        {"10.0%   KLD:", &s->kld.pct[3], NULL, 1},
        {" 5.0%   KLD:", &s->kld.pct[2], NULL, 1},
        {" 1.0%   KLD:", &s->kld.pct[1], NULL, 1},
        {"Minimum KLD:", &s->kld.min, NULL, 1},
        {"Mean    Δp:", &s->dp.mean, &s->dp.se, 0.01},
        {"Maximum Δp:", &s->dp.max, NULL, 0.01},
        {"99.9%   Δp:", &s->dp.pct[9], NULL, 0.01},
        {"99.0%   Δp:", &s->dp.pct[8], NULL, 0.01},
        {"95.0%   Δp:", &s->dp.pct[7], NULL, 0.01},
        {"90.0%   Δp:", &s->dp.pct[6], NULL, 0.01},
        {"75.0%   Δp:", &s->dp.pct[5], NULL, 0.01},
        {"Median  Δp:", &s->dp.median, NULL, 0.01},
        {"25.0%   Δp:", &s->dp.pct[4], NULL, 0.01},
        {"10.0%   Δp:", &s->dp.pct[3], NULL, 0.01},
        {" 5.0%   Δp:", &s->dp.pct[2], NULL, 0.01},
        {" 1.0%   Δp:", &s->dp.pct[1], NULL, 0.01},
        {" 0.1%   Δp:", &s->dp.pct[0], NULL, 0.01},
        {"Minimum Δp:", &s->dp.min, NULL, 0.01},
        {"RMS Δp    :", &s->dp_rms, &s->dp_rms_se, 0.01},
        {"Same top p:", &s->top1_agreement, &s->top1_se, 0.01},
    };
    size_t n_map = sizeof map / sizeof map[0], found = 0;
    for (const char *line = block; *line;) {
        const char *nl = strchr(line, '\n');
        for (size_t i = 0; i < n_map; i++) {
            if (strncmp(line, map[i].prefix, strlen(map[i].prefix)) != 0) continue;
            double v[2];
            int n = numbers(line, v);
            if (n != (map[i].b ? 2 : 1)) return false;
            *map[i].a = map[i].scale * v[0];
            if (map[i].b) *map[i].b = map[i].scale * v[1];
            found++;
            break;
        }
        if (!nl) break;
        line = nl + 1;
    }
    /* the 99.0% KLD line matches twice */
    return found == n_map + 1;
}

static char *print_block(const kld_summary *s, kld_status *st) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    kld_error err = {0};
    *st = kld_report_llamacpp(f, s, &err);
    fclose(f);
    return buf;
}

static void compare_lines(const char *name, const char *want, const char *got) {
    int line = 1, bad = 0;
    const char *a = want, *b = got;
    while (*a || *b) {
        const char *ea = strchr(a, '\n'), *eb = strchr(b, '\n');
        size_t la = ea ? (size_t)(ea - a) : strlen(a), lb = eb ? (size_t)(eb - b) : strlen(b);
        if (la != lb || memcmp(a, b, la) != 0) {
            if (bad++ < 5)
                printf("%s line %d:\n  llama.cpp: '%.*s'\n  kldeval:   '%.*s'\n", name, line, (int)la,
                       a, (int)lb, b);
        }
        a += la + (ea ? 1 : 0);
        b += lb + (eb ? 1 : 0);
        line++;
    }
    CHECK(bad == 0, "%s: %d of %d lines differ", name, bad, line - 1);
    CHECK(line - 1 == 37, "%s: %d lines, want 37", name, line - 1);
}

static void from_file(const char *path) {
    char *text = kt_read_file(path, NULL);
    char *block = extract_block(text);
    CHECK(block != NULL, "%s: no statistics block", path);
    if (!block) {
        free(text);
        return;
    }
    kld_summary s;
    CHECK(parse_block(block, &s), "%s: not every line of the block parsed", path);
    kld_status st;
    char *got = print_block(&s, &st);
    CHECK(st == KLD_OK, "%s: status %s", path, kld_status_name(st));
    compare_lines(path, block, got);
    free(got);
    free(block);
    free(text);
}

int main(void) {
    from_file(KT_SHARED "/oracle/aidreams260K/small-kld-q8_0.txt");
    from_file(KT_SHARED "/oracle/aidreams260K/small-kld-f16.txt");
    from_file(KT_SHARED "/oracle/rand-llama/kld-q8_0.txt");
    from_file(KT_SHARED "/oracle/rand-llama/kld-q4_K_M.txt");

    /* fewer than 100 positions: llama.cpp prints no block */
    kld_summary s;
    memset(&s, 0, sizeof s);
    s.n_positions = 99;
    kld_status st;
    char *got = print_block(&s, &st);
    CHECK(st == KLD_OK && got && got[0] == '\0', "99 positions: printed '%s'", got ? got : "");
    free(got);
    s.n_positions = 100;
    got = print_block(&s, &st);
    CHECK(st == KLD_OK && got && strncmp(got, FIRST_LINE "\n", strlen(FIRST_LINE) + 1) == 0,
          "100 positions: the block is printed");
    free(got);

    /* a failing stream is an I/O error */
    FILE *full = fopen("/dev/full", "w");
    if (full) {
        kld_error err = {0};
        st = kld_report_llamacpp(full, &s, &err);
        CHECK(st == KLD_ERR_IO && strstr(err.msg, "write failed"), "/dev/full: %s: %s",
              kld_status_name(st), err.msg);
        fclose(full);
    }
    return kt_finish();
}
