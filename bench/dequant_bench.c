/* dequant_bench.c — dequantization throughput per type: the AVX2 kernel
 * against the scalar reference measured in the same run (the ratio is the
 * result; absolute numbers depend on the machine). Median and spread over
 * repeated passes over a 1 Mi-value buffer (fits in L2/L3 only partly, as
 * weight rows do). Not part of the test suite.
 *
 * Build (until bench/ has a CMake hook), from the repository root:
 *   cc -O2 -std=c17 -D_GNU_SOURCE -Iinclude -Isrc bench/dequant_bench.c \
 *      build-tensor/libkld_tensor.a build-tensor/libkld_common.a -lm -lpthread -o build-tensor/dequant_bench
 * Run: build-tensor/dequant_bench [reps] */
#include "tensor/types.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define N_VALUES (1 << 20)

static double now_sec(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median and (max - min) / median of `reps` timings of fn over the buffer,
 * in nanoseconds per value. */
static void time_kernel(kld_to_float_fn fn, const void *q, float *out, int reps, double *median,
                        double *spread) {
    double *t = malloc((size_t)reps * sizeof(double));
    fn(q, out, N_VALUES); /* warm up */
    for (int r = 0; r < reps; r++) {
        double t0 = now_sec();
        fn(q, out, N_VALUES);
        t[r] = (now_sec() - t0) * 1e9 / N_VALUES;
    }
    qsort(t, (size_t)reps, sizeof(double), cmp_double);
    *median = t[reps / 2];
    *spread = (t[reps - 1] - t[0]) / *median;
    free(t);
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 21;
    if (reps < 3) reps = 3;
    if (!kld_cpu_has_avx2()) {
        printf("this CPU lacks AVX2/FMA/F16C: nothing to compare\n");
        return 0;
    }
    float *src = malloc(N_VALUES * sizeof(float)), *out = malloc(N_VALUES * sizeof(float));
    unsigned s = 12345;
    for (int i = 0; i < N_VALUES; i++) { /* rough gaussian-ish weights */
        s = s * 1103515245u + 12345u;
        src[i] = ((float)(s >> 8) / 16777216.0f - 0.5f) * 0.1f;
    }
    void *q = malloc(N_VALUES * 4);
    printf("%-7s %12s %8s %12s %8s %8s\n", "type", "ref ns/val", "spread", "avx2 ns/val", "spread",
           "speedup");
    for (uint32_t id = 0; id < KLD_TYPE_COUNT; id++) {
        const kld_type_info *t = kld_type_info_get(id);
        if (!t || !t->to_float_avx2 || !t->quantize_row) continue;
        t->quantize_row(src, q, N_VALUES);
        double ref_med, ref_spr, avx_med, avx_spr;
        time_kernel(t->to_float_ref, q, out, reps, &ref_med, &ref_spr);
        time_kernel(t->to_float_avx2, q, out, reps, &avx_med, &avx_spr);
        printf("%-7s %12.3f %7.0f%% %12.3f %7.0f%% %7.1fx\n", t->name, ref_med, 100 * ref_spr, avx_med,
               100 * avx_spr, ref_med / avx_med);
    }
    free(src);
    free(out);
    free(q);
    return 0;
}
