/* convert.c — converts one tensor to another type: each row is widened to
 * float32 and quantized (with importance weights when given). Rows are
 * independent, so spreading them over threads cannot change a byte; the
 * threads take fixed-size row chunks from a shared counter. */
#include "quant/quant.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#define ROWS_PER_CHUNK 16

typedef struct job {
    const kld_tensor *t;
    const kld_type_info *si, *di;
    const float *qw;
    uint8_t *dst;
    uint64_t src_row, dst_row;
    int64_t n_rows;
    atomic_int_fast64_t next;
    atomic_bool failed;
} job;

static void *worker(void *arg) {
    job *j = arg;
    const int64_t ne0 = j->t->ne[0];
    const bool f32 = j->t->type == KLD_TYPE_F32 && (uintptr_t)j->t->data % sizeof(float) == 0;
    float *row = f32 ? NULL : malloc((size_t)ne0 * sizeof(float));
    if (!f32 && !row) {
        atomic_store(&j->failed, true);
        return NULL;
    }
    const uint8_t *src = j->t->data;
    for (;;) {
        int64_t r0 = atomic_fetch_add(&j->next, ROWS_PER_CHUNK);
        if (r0 >= j->n_rows) break;
        int64_t r1 = r0 + ROWS_PER_CHUNK < j->n_rows ? r0 + ROWS_PER_CHUNK : j->n_rows;
        for (int64_t r = r0; r < r1; r++) {
            const uint8_t *s = src + (uint64_t)r * j->src_row;
            const float *x;
            if (f32) {
                x = (const float *)(const void *)s; /* aligned: checked above */
            } else {
                kld_type_kernels_of(j->si)->to_float(s, row, ne0);
                x = row;
            }
            uint8_t *d = j->dst + (uint64_t)r * j->dst_row;
            if (j->qw) j->di->quantize_row_imat(x, d, ne0, j->qw + (r / j->t->ne[1]) * ne0);
            else kld_type_kernels_of(j->di)->quantize(x, d, ne0);
        }
    }
    free(row);
    return NULL;
}

kld_status kld_quant_tensor(const kld_tensor *t, uint32_t type, const float *qw, int n_threads,
                            void *dst, kld_error *err) {
    char b1[16], b2[16];
    job j = {.t = t, .si = kld_type_info_get(t->type), .di = kld_type_info_get(type), .dst = dst};
    kld_kernels_init(); /* picks the quantize kernel */
    if (!j.si || !j.si->to_float_ref || !j.di || !j.di->quantize_row)
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "tensor '%s': cannot convert %s to %s", t->name,
                        kld_type_name(t->type, b1), kld_type_name(type, b2));
    if (qw && j.di->quantize_row_imat) j.qw = qw;
    kld_status s;
    if ((s = kld_type_row_bytes(t->type, (uint64_t)t->ne[0], &j.src_row, t->name, err)) ||
        (s = kld_type_row_bytes(type, (uint64_t)t->ne[0], &j.dst_row, t->name, err)))
        return s;
    j.n_rows = t->ne[1] * t->ne[2] * t->ne[3];
    atomic_init(&j.next, 0);
    atomic_init(&j.failed, false);
    if (n_threads <= 0) n_threads = kld_default_threads();
    int64_t chunks = (j.n_rows + ROWS_PER_CHUNK - 1) / ROWS_PER_CHUNK;
    if (n_threads > chunks) n_threads = (int)(chunks > 0 ? chunks : 1);
    if (n_threads > 64) n_threads = 64;
    pthread_t th[64];
    int started = 0;
    for (int i = 1; i < n_threads; i++) {
        if (pthread_create(&th[started], NULL, worker, &j) != 0) break;
        started++;
    }
    worker(&j);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    if (atomic_load(&j.failed))
        return kld_fail(err, KLD_ERR_NOMEM, "tensor '%s': out of memory", t->name);
    return KLD_OK;
}
