/* delta_merge.c — a low-rank update merged into one weight before it is
 * quantized (`kldeval quantize IN+ADAPTER`): row j of W (n_in values)
 * becomes W[j] + s·Σ_k B[j][k]·A[k], the stored row widened to float, the
 * sum over the rank accumulated in double and the result rounded to float
 * once. An update of exactly 0 keeps W's float bit for bit (so a zero-B
 * adapter writes the base's bytes, -0.0 included). */
#include "quant/quant.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>

kld_status kld_quant_merged_f32(const kld_tensor *t, const char *name, const kld_quant_delta *d,
                                float **out, kld_error *err) {
    *out = NULL;
    const kld_type_info *ti = kld_type_info_get(t->type);
    const int64_t n_in = d->n_in, n_out = d->n_out, r = d->rank;
    if (!ti || !ti->to_float_ref || t->ne[0] != n_in || t->ne[1] != n_out)
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "tensor '%s': cannot merge the update", name);
    uint64_t row_bytes;
    kld_status s = kld_type_row_bytes(t->type, (uint64_t)n_in, &row_bytes, name, err);
    if (s) return s;
    float *w = malloc((size_t)(n_in * n_out) * sizeof *w);
    double *acc = malloc((size_t)n_in * sizeof *acc);
    if (!w || !acc) {
        free(w), free(acc);
        return kld_fail(err, KLD_ERR_NOMEM, "tensor '%s': out of memory merging the update", name);
    }
    const double scale = d->scale;
    for (int64_t j = 0; j < n_out; j++) {
        float *row = w + j * n_in;
        kld_type_kernels_of(ti)->to_float((const uint8_t *)t->data + (uint64_t)j * row_bytes, row, n_in);
        for (int64_t i = 0; i < n_in; i++) acc[i] = 0.0;
        for (int64_t k = 0; k < r; k++) {
            const double bjk = d->b[j * r + k];
            const float *ak = d->a + k * n_in;
            for (int64_t i = 0; i < n_in; i++) acc[i] += bjk * (double)ak[i];
        }
        for (int64_t i = 0; i < n_in; i++) {
            const double upd = scale * acc[i];
            if (upd == 0.0) continue;
            row[i] = (float)((double)row[i] + upd);
            if (!isfinite(row[i])) {
                kld_status st = kld_fail(err, KLD_ERR_FORMAT, "tensor '%s'[%" PRId64 ", %" PRId64
                                         "]: the merged weight is not finite", name, i, j);
                free(w), free(acc);
                return st;
            }
        }
    }
    free(acc);
    *out = w;
    return KLD_OK;
}
