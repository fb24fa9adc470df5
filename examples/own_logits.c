/* own_logits.c — kldeval's exact statistics over logits another engine
 * computed: two float32 files [n][n_vocab] (reference and arm, e.g. from
 * your own framework or `kldeval logits --out`) over the token ids in an
 * int32 file; row t is the distribution after ids[0..t], so its next token
 * is ids[t + 1] (none for the last row).
 *
 *   cc own_logits.c $(pkg-config --cflags --libs kldeval) -o own_logits
 *   ./own_logits ref.f32 arm.f32 ids.i32 N_VOCAB
 *
 * Prints the summary as "name value" lines (full double precision). */
#include <kld.h>

#include <stdio.h>
#include <stdlib.h>

static void *read_all(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *p = n > 0 ? malloc((size_t)n) : NULL;
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        p = NULL;
    }
    fclose(f);
    *size = p ? (size_t)n : 0;
    return p;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s REF.f32 ARM.f32 IDS.i32 N_VOCAB\n", argv[0]);
        return 2;
    }
    size_t nr, na, ni;
    float *ref = read_all(argv[1], &nr), *arm = read_all(argv[2], &na);
    int32_t *ids = read_all(argv[3], &ni);
    long nv = strtol(argv[4], NULL, 10);
    size_t n = ni / sizeof *ids;
    if (!ref || !arm || !ids || nv < 1 || nr != na || nr != n * (size_t)nv * sizeof(float)) {
        fprintf(stderr, "own_logits: unreadable inputs or sizes that do not match\n");
        return 1;
    }
    kld_error err = {0};
    kld_stats *st = NULL;
    kld_status rc = kld_stats_create(&st, KLD_TOPK_DEFAULT, &err);
    if (!rc) rc = kld_stats_begin_doc(st, &err);
    for (size_t t = 0; t < n && !rc; t++)
        rc = kld_stats_add_logits(st, ref + t * (size_t)nv, arm + t * (size_t)nv, (int32_t)nv,
                                  t + 1 < n ? ids[t + 1] : -1, (uint32_t)t, &err);
    kld_summary s;
    if (!rc) rc = kld_stats_finalize(st, &s, &err);
    if (rc) {
        fprintf(stderr, "own_logits: %s\n", err.msg);
        return 1;
    }
    printf("n_positions %llu\n", (unsigned long long)s.n_positions);
    printf("kld.mean %.17g\nkld.stderr %.17g\nkld.median %.17g\nkld.p99 %.17g\nkld.max %.17g\n",
           s.kld.mean, s.kld.se, s.kld.median, s.kld.pct[8], s.kld.max);
    printf("top1_agreement %.17g\nppl_ref %.17g\nppl_arm %.17g\nln_ppl_ratio %.17g\n",
           s.top1_agreement, s.ppl_ref, s.ppl_arm, s.ln_ppl_ratio);
    kld_stats_free(st);
    free(ref);
    free(arm);
    free(ids);
    return 0;
}
