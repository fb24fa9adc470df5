/* lcpp_base.h — llama.cpp's `llama-perplexity --kl-divergence-base` files
 * (layout of commit c392e50, documented in ../shared/README.md), read and
 * written so that existing base files keep working with kldeval and
 * kldeval's files work with llama-perplexity.
 *
 * Layout (little-endian, no padding):
 *   char[8] "_logits_", int32 n_ctx, int32 n_vocab, int32 n_chunk,
 *   int32 tokens[n_chunk * n_ctx] (unmodified: BOS only at [0]),
 *   then n_chunk * (n_ctx - 1 - n_ctx/2) records, chunk-major, of
 *   nv = 2*ceil(n_vocab/2) + 4 uint16 each: float32 scale, float32
 *   min_log_prob, n_vocab uint16 codes, zero padding to even.
 * Record k of chunk c is the distribution at chunk position j = n_ctx/2 + k
 * (predicting token j + 1), j = n_ctx/2 .. n_ctx - 2, computed from an empty
 * cache with the chunk's first token replaced by BOS.
 * Encoding (kld_lcpp_encode_row, exactly as llama.cpp computes it; float32
 * arithmetic unless stated):
 *   max = max l; min_logit = max(min l, max - 16);
 *   lse = (float) log(sum_i expf(l_i - max)) (sum and log in double);
 *   min_log_prob = (min_logit - max) - lse; scale = (max - min_logit) / 65535;
 *   q_i = l_i > min_logit ? nearest-even((1/scale) * (l_i - min_logit)) : 0
 *   (multiplied by the float reciprocal, not divided; all 0 when scale is 0).
 * Decoding: log p_i = scale * q_i + min_log_prob (float32 multiply, then
 * add). Codes of 0 are outside the 16-nat window: their log p is only
 * bounded above.
 *
 * Ownership: kld_lcpp_base_open → kld_lcpp_base_close; kld_lcpp_base_create
 * → kld_lcpp_base_finish and/or kld_lcpp_base_writer_free. */
#ifndef KLD_STORE_LCPP_BASE_H
#define KLD_STORE_LCPP_BASE_H

#include "kld.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct kld_lcpp_base_info {
    int32_t n_ctx;       /* >= 4 */
    int32_t n_vocab;     /* >= 2 */
    int32_t n_chunk;     /* >= 1 */
    int64_t records_per_chunk; /* n_ctx - 1 - n_ctx/2 */
    int64_t record_u16;  /* nv = 2*ceil(n_vocab/2) + 4 */
} kld_lcpp_base_info;

/* ---- reading ---- */

typedef struct kld_lcpp_base kld_lcpp_base;

/* Opens and validates a base file: magic, n_ctx >= 4, n_vocab >= 2,
 * n_chunk >= 1, the size exactly header + tokens + records (overflow-checked;
 * a short or long file is an error giving both sizes), every token in
 * [0, n_vocab). n_vocab_expected > 0 additionally requires that n_vocab.
 * Errors name the file and the field. */
kld_status kld_lcpp_base_open(const char *path, int32_t n_vocab_expected, kld_lcpp_base **out,
                              kld_error *err);
void kld_lcpp_base_close(kld_lcpp_base *b);

const kld_lcpp_base_info *kld_lcpp_base_info_of(const kld_lcpp_base *b);
const char *kld_lcpp_base_path(const kld_lcpp_base *b);
/* Chunk c's n_ctx tokens as stored (valid until close). */
const int32_t *kld_lcpp_base_tokens(const kld_lcpp_base *b, int64_t chunk);

/* Decodes records [rec0, rec0 + n) of chunk `chunk` into logp (n rows of
 * n_vocab float32, as llama.cpp decodes them) and, when not NULL, codes
 * (n rows of n_vocab raw uint16) and min_log_prob (n floats); logp may be
 * NULL too. Validates each record: scale and min_log_prob finite,
 * scale >= 0, min_log_prob <= 0, the maximum's log-prob
 * scale * 65535 + min_log_prob (= -lse) in [-ln n_vocab, 0] up to 1e-3, at
 * least one code of 65535 when scale > 0 (the maximum's code). A range outside the chunk is KLD_ERR_ARG. Reads
 * with pread into one record of scratch owned by b: one caller at a time. */
kld_status kld_lcpp_base_read(kld_lcpp_base *b, int64_t chunk, int64_t rec0, int64_t n,
                              float *logp, uint16_t *codes, float *min_log_prob, kld_error *err);

/* ---- writing ---- */

typedef struct kld_lcpp_base_writer kld_lcpp_base_writer;

/* Creates path (written as path + ".tmp", renamed by finish) with the
 * header and the n_chunk * n_ctx tokens. */
kld_status kld_lcpp_base_create(const char *path, int32_t n_ctx, int32_t n_vocab, int32_t n_chunk,
                                const int32_t *tokens, kld_lcpp_base_writer **out, kld_error *err);
/* Encodes and appends n rows of n_vocab logits (records in file order).
 * Every write is checked (a full disk names the file). Rows with a NaN or
 * +inf logit, or with no finite logit, are KLD_ERR_ARG (llama.cpp would
 * store a NaN scale); -inf logits are fine. More records than the header
 * announces is KLD_ERR_ARG. After a failed write only _free is useful. */
kld_status kld_lcpp_base_write(kld_lcpp_base_writer *w, const float *logits, int64_t n,
                               kld_error *err);
/* Checks the record count (KLD_ERR_ARG when short; the writer stays
 * usable), flushes, fsyncs, renames into place. */
kld_status kld_lcpp_base_finish(kld_lcpp_base_writer *w, kld_error *err);
/* Removes the temporary file unless finished. NULL is fine. */
void kld_lcpp_base_writer_free(kld_lcpp_base_writer *w);

/* One row: n_vocab logits → nv uint16 (scale, min_log_prob, codes, pad),
 * exactly llama.cpp's encoding (little-endian host). Also returns, when not
 * NULL, the row's log-sum-exp relative to its maximum as llama.cpp computes
 * it: the float `lse` above, widened to double (llama.cpp's base-run NLL is
 * then the float expression (max + lse) - l[token]). */
void kld_lcpp_encode_row(const float *logits, int32_t n_vocab, uint16_t *out, double *lse);

#endif
