/* dump_record.c — one dump record (dump v1/v2 and the kldeval sidecar):
 * byte codec and the checks every record passes on read and on write. */
#include "store/dump_internal.h"
#include "tensor/types.h"

#include <math.h>
#include <stdlib.h>

#define STAMP_MAX_VOCAB (1 << 22) /* above this a record's indices are sorted instead */

const char *kld_dump_hidden_name(int dtype) {
    return dtype == KLD_DUMP_HIDDEN_F32    ? "float32"
           : dtype == KLD_DUMP_HIDDEN_BF16 ? "bfloat16"
           : dtype == KLD_DUMP_HIDDEN_F16  ? "float16"
                                           : NULL;
}

int kld_dump_hidden_parse(const char *name) {
    for (int d = 0; d <= KLD_DUMP_HIDDEN_F16; d++)
        if (name && !strcmp(name, kld_dump_hidden_name(d))) return d;
    return -1;
}

uint64_t kld_dump_meta_record_bytes(const kld_dump_meta *m) {
    if (m->format_version != 3) return kld_dump_record_bytes(m->format_version, m->top_k);
    if (m->n_embd < 1 || m->n_embd > KLD_DUMP_MAX_TOPK || !kld_dump_hidden_name(m->hidden_dtype))
        return 0;
    return (uint64_t)m->n_embd * (m->hidden_dtype == KLD_DUMP_HIDDEN_F32 ? 4u : 2u);
}

/* A format-3 record: n_embd hidden values in the dump's dtype. */
void kld_dumpi_encode_hidden(int dtype, int64_t n_embd, const float *h, uint8_t *out) {
    for (int64_t i = 0; i < n_embd; i++) {
        if (dtype == KLD_DUMP_HIDDEN_F32) {
            memcpy(out + 4 * i, &h[i], 4);
            continue;
        }
        uint16_t v = dtype == KLD_DUMP_HIDDEN_F16 ? kld_f32_to_f16(h[i]) : kld_f32_to_bf16(h[i]);
        memcpy(out + 2 * i, &v, 2);
    }
}

void kld_dumpi_decode_hidden(int dtype, int64_t n_embd, const uint8_t *in, float *h) {
    for (int64_t i = 0; i < n_embd; i++) {
        if (dtype == KLD_DUMP_HIDDEN_F32) {
            memcpy(&h[i], in + 4 * i, 4);
            continue;
        }
        uint16_t v;
        memcpy(&v, in + 2 * i, 2);
        h[i] = dtype == KLD_DUMP_HIDDEN_F16 ? kld_f16_to_f32(v) : kld_bf16_to_f32(v);
    }
}

uint64_t kld_dump_record_bytes(int format_version, int64_t top_k) {
    if (top_k < 1 || top_k > KLD_DUMP_MAX_TOPK) return 0;
    if (format_version == 1) return 6 * (uint64_t)top_k + 4;
    if (format_version == 2) return 8 * (uint64_t)top_k + 4;
    return 0;
}

void kld_dumpi_encode(int format_version, int32_t top_k, const int32_t *idx, const float *val,
                      float lse, uint8_t *out) {
    size_t k = (size_t)top_k;
    memcpy(out, idx, 4 * k);
    out += 4 * k;
    if (format_version == 1) {
        for (size_t j = 0; j < k; j++) {
            uint16_t h = kld_f32_to_f16(val[j]);
            memcpy(out + 2 * j, &h, 2);
        }
        out += 2 * k;
    } else {
        memcpy(out, val, 4 * k);
        out += 4 * k;
    }
    memcpy(out, &lse, 4);
}

void kld_dumpi_decode(int format_version, int32_t top_k, const uint8_t *in, int32_t *idx,
                      float *val, float *lse) {
    size_t k = (size_t)top_k;
    memcpy(idx, in, 4 * k);
    in += 4 * k;
    if (format_version == 1) {
        for (size_t j = 0; j < k; j++) val[j] = kld_f16_to_f32(kld_load_u16(in + 2 * j));
        in += 2 * k;
    } else {
        memcpy(val, in, 4 * k);
        in += 4 * k;
    }
    *lse = kld_load_f32(in);
}

void kld_dumpi_encode_ext(double lse64, double logp_next, int32_t argmax, uint8_t *out) {
    int32_t reserved = 0;
    memcpy(out, &lse64, 8);
    memcpy(out + 8, &logp_next, 8);
    memcpy(out + 16, &argmax, 4);
    memcpy(out + 20, &reserved, 4);
}

void kld_dumpi_decode_ext(const uint8_t *in, double *lse64, double *logp_next, int32_t *argmax) {
    *lse64 = kld_load_f64(in);
    *logp_next = kld_load_f64(in + 8);
    *argmax = (int32_t)kld_load_u32(in + 16);
    /* in + 20: reserved; readers ignore it so that it can be given a meaning */
}

void kld_dumpi_distinct_free(kld_dumpi_distinct *d) {
    free(d->stamp);
    free(d->sorted);
    memset(d, 0, sizeof *d);
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Finds an index that occurs twice; *dup receives it. */
static kld_status find_duplicate(const kld_dumpi_rules *r, kld_dumpi_distinct *d,
                                 const int32_t *idx, bool *found, int32_t *dup) {
    size_t k = (size_t)r->top_k;
    *found = false;
    if (r->n_vocab > 0 && r->n_vocab <= STAMP_MAX_VOCAB) {
        if (!d->stamp || d->n_stamp != r->n_vocab) {
            free(d->stamp);
            d->stamp = calloc((size_t)r->n_vocab, sizeof *d->stamp);
            if (!d->stamp) return KLD_ERR_NOMEM;
            d->n_stamp = r->n_vocab;
            d->gen = 0;
        }
        if (++d->gen == 0) { /* wrapped: old stamps could collide */
            memset(d->stamp, 0, (size_t)d->n_stamp * sizeof *d->stamp);
            d->gen = 1;
        }
        for (size_t j = 0; j < k; j++) { /* indices were range-checked */
            if (d->stamp[idx[j]] == d->gen) {
                *found = true;
                *dup = idx[j];
                return KLD_OK;
            }
            d->stamp[idx[j]] = d->gen;
        }
        return KLD_OK;
    }
    if (!d->sorted) {
        d->sorted = malloc(k * sizeof *d->sorted);
        if (!d->sorted) return KLD_ERR_NOMEM;
    }
    memcpy(d->sorted, idx, k * sizeof *idx);
    qsort(d->sorted, k, sizeof *d->sorted, cmp_i32);
    for (size_t j = 1; j < k; j++)
        if (d->sorted[j] == d->sorted[j - 1]) {
            *found = true;
            *dup = d->sorted[j];
            return KLD_OK;
        }
    return KLD_OK;
}

/* Half the float16 spacing at |v|: how far rounding may have moved v. */
static float f16_half_step(float v) {
    float a = fabsf(v);
    uint16_t h = kld_f32_to_f16(a);
    if (h >= 0x7BFF) return 16.0f; /* 65504, the largest finite half: spacing 32 */
    float next = kld_f16_to_f32((uint16_t)(h + 1));
    float prev = h > 0 ? kld_f16_to_f32((uint16_t)(h - 1)) : 0.0f;
    float up = next - a, down = a - prev;
    return 0.5f * (up > down ? up : down);
}

kld_status kld_dumpi_check_record(const kld_dumpi_rules *r, kld_dumpi_distinct *dist, int64_t rec,
                                  const int32_t *idx, const float *val, float lse, kld_error *err) {
    long long rl = (long long)rec;
    float max = -INFINITY;
    int max_rank = 0;
    for (int32_t j = 0; j < r->top_k; j++) {
        if (idx[j] < 0 || (r->n_vocab > 0 && idx[j] >= r->n_vocab)) {
            if (r->n_vocab > 0)
                return kld_fail(err, r->status,
                                "%s: record %lld: index %d at rank %d is outside [0, %lld)",
                                r->file, rl, (int)idx[j], (int)j, (long long)r->n_vocab);
            return kld_fail(err, r->status, "%s: record %lld: index %d at rank %d is negative",
                            r->file, rl, (int)idx[j], (int)j);
        }
        if (!isfinite(val[j]))
            return kld_fail(err, r->status, "%s: record %lld: logit at rank %d is %g (not finite)",
                            r->file, rl, (int)j, (double)val[j]);
        if (val[j] > max) {
            max = val[j];
            max_rank = (int)j;
        }
        if (j == 0 || r->candidate) continue;
        if (val[j] > val[j - 1])
            return kld_fail(err, r->status,
                            "%s: record %lld: logits not in descending order: rank %d has %.9g "
                            "after %.9g",
                            r->file, rl, (int)j, (double)val[j], (double)val[j - 1]);
        if (r->strict_ties && val[j] == val[j - 1] && idx[j] < idx[j - 1])
            return kld_fail(err, r->status,
                            "%s: record %lld: tied logits %.9g at ranks %d and %d have indices "
                            "%d, %d (ties go to the lower index first)",
                            r->file, rl, (double)val[j], (int)j - 1, (int)j, (int)idx[j - 1],
                            (int)idx[j]);
    }
    if (!isfinite(lse))
        return kld_fail(err, r->status, "%s: record %lld: logsumexp is %g (not finite)", r->file,
                        rl, (double)lse);
    /* lse is over the whole vocabulary, so no logit can exceed it; a float16
     * logit may sit up to half a half-step above the float32 it rounds. */
    double tol = r->rounded_f16 ? (double)f16_half_step(max) : 0.0;
    if ((double)lse < (double)max - tol)
        return kld_fail(err, r->status,
                        "%s: record %lld: logsumexp %.9g is below the logit %.9g at rank %d",
                        r->file, rl, (double)lse, (double)max, max_rank);
    bool dup = false;
    int32_t which = 0;
    if (find_duplicate(r, dist, idx, &dup, &which) != KLD_OK)
        return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", r->file);
    if (dup)
        return kld_fail(err, r->status, "%s: record %lld: index %d appears more than once", r->file,
                        rl, (int)which);
    return KLD_OK;
}

kld_status kld_dumpi_check_ext(const kld_dumpi_rules *r, int64_t rec, const int32_t *idx, float lse,
                               double lse64, double logp_next, int32_t argmax, kld_error *err) {
    long long rl = (long long)rec;
    if (!isfinite(lse64))
        return kld_fail(err, r->status, "%s: record %lld: logsumexp (float64) is %g (not finite)",
                        r->ext_file, rl, lse64);
    /* the float32 field is this value rounded; allow one float32 step for
     * writers that round differently */
    float f = (float)lse64;
    if (f != lse && f != nextafterf(lse, INFINITY) && f != nextafterf(lse, -INFINITY))
        return kld_fail(err, r->status,
                        "%s: record %lld: logsumexp (float64) %.17g does not round to the "
                        "record's logsumexp %.9g",
                        r->ext_file, rl, lse64, (double)lse);
    if (!isnan(logp_next) && (!isfinite(logp_next) || logp_next > 1e-6))
        return kld_fail(err, r->status,
                        "%s: record %lld: log-probability of the next token is %g (not a finite "
                        "log-probability or NaN)",
                        r->ext_file, rl, logp_next);
    if (argmax == -1) return KLD_OK;
    if (argmax < 0)
        return kld_fail(err, r->status, "%s: record %lld: argmax %d is negative and not -1",
                        r->ext_file, rl, (int)argmax);
    if (r->n_vocab > 0 && argmax >= r->n_vocab)
        return kld_fail(err, r->status, "%s: record %lld: argmax %d is outside [0, %lld)",
                        r->ext_file, rl, (int)argmax, (long long)r->n_vocab);
    /* a teacher's first index is its argmax (both: first index on ties) */
    if (!r->candidate && argmax != idx[0])
        return kld_fail(err, r->status,
                        "%s: record %lld: argmax %d differs from the record's first index %d",
                        r->ext_file, rl, (int)argmax, (int)idx[0]);
    return KLD_OK;
}
