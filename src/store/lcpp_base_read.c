/* lcpp_base_read.c — validating reader of llama.cpp `--kl-divergence-base`
 * files (layout in lcpp_base.h). The header and the tokens are checked and
 * kept at open; records are read with pread on request, one at a time, so
 * memory stays O(tokens + one record) whatever the file size. */
#include "store/lcpp_base.h"

#include "common/common.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define LCPP_MAGIC "_logits_"
#define LCPP_HEADER_BYTES 20

struct kld_lcpp_base {
    char *path;
    int fd;
    kld_lcpp_base_info info;
    int32_t *tokens;      /* n_chunk * n_ctx */
    uint64_t records_at;  /* file offset of record 0 */
    uint16_t *scratch;    /* one record */
};

/* Reads exactly n bytes at off (retrying short reads and EINTR). */
static kld_status read_at(int fd, const char *path, void *buf, size_t n, uint64_t off,
                          const char *what, kld_error *err) {
    uint8_t *p = buf;
    while (n > 0) {
        ssize_t r = pread(fd, p, n, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0)
            return kld_fail(err, KLD_ERR_IO, "%s: reading %s at offset %llu: %s", path, what,
                            (unsigned long long)off, strerror(errno));
        if (r == 0) /* the file shrank after open */
            return kld_fail(err, KLD_ERR_IO, "%s: reading %s at offset %llu: unexpected end of file",
                            path, what, (unsigned long long)off);
        p += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return KLD_OK;
}

/* The header field a file of `size` bytes ends inside, for the message. */
static const char *field_cut(uint64_t size) {
    if (size < 8) return "magic";
    if (size < 12) return "n_ctx";
    if (size < 16) return "n_vocab";
    return "n_chunk";
}

/* The header values and the exact file size they imply. */
static kld_status check_header(const char *path, const uint8_t *h, uint64_t size,
                               int32_t n_vocab_expected, kld_lcpp_base_info *info,
                               uint64_t *records_at, kld_error *err) {
    if (memcmp(h, LCPP_MAGIC, 8) != 0)
        return kld_fail(err, KLD_ERR_FORMAT,
                        "%s: magic: expected \"_logits_\", found %02x %02x %02x %02x %02x %02x %02x %02x "
                        "(not a llama-perplexity --kl-divergence-base file)",
                        path, h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]);
    int32_t n_ctx = (int32_t)kld_load_u32(h + 8);
    int32_t n_vocab = (int32_t)kld_load_u32(h + 12);
    int32_t n_chunk = (int32_t)kld_load_u32(h + 16);
    /* n_ctx >= 4: with fewer there is no or a single scored position per
     * chunk, which no llama-perplexity run produces for KLD */
    if (n_ctx < 4)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: n_ctx %d: must be >= 4", path, n_ctx);
    if (n_vocab < 2)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: n_vocab %d: must be >= 2", path, n_vocab);
    if (n_vocab_expected > 0 && n_vocab != n_vocab_expected)
        return kld_fail(err, KLD_ERR_MISMATCH, "%s: n_vocab %d: the model has %d tokens", path,
                        n_vocab, n_vocab_expected);
    if (n_chunk < 1)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: n_chunk %d: must be >= 1", path, n_chunk);

    info->n_ctx = n_ctx;
    info->n_vocab = n_vocab;
    info->n_chunk = n_chunk;
    info->records_per_chunk = (int64_t)n_ctx - 1 - n_ctx / 2;
    info->record_u16 = 2 * (((int64_t)n_vocab + 1) / 2) + 4;

    /* all factors are positive int32, so the products only need u64 checks */
    uint64_t n_tok, tok_bytes, n_rec, rec_bytes, rec_total, total;
    bool ok = kld_mul_u64((uint64_t)n_chunk, (uint64_t)n_ctx, &n_tok) &&
              kld_mul_u64(n_tok, 4, &tok_bytes) &&
              kld_mul_u64((uint64_t)n_chunk, (uint64_t)info->records_per_chunk, &n_rec) &&
              kld_mul_u64((uint64_t)info->record_u16, 2, &rec_bytes) &&
              kld_mul_u64(n_rec, rec_bytes, &rec_total) &&
              kld_add_u64(LCPP_HEADER_BYTES, tok_bytes, records_at) &&
              kld_add_u64(*records_at, rec_total, &total);
    if (!ok)
        return kld_fail(err, KLD_ERR_FORMAT,
                        "%s: n_chunk %d, n_ctx %d, n_vocab %d: the size they imply overflows", path,
                        n_chunk, n_ctx, n_vocab);
    if (size != total)
        return kld_fail(err, KLD_ERR_FORMAT,
                        "%s: size: the file is %llu bytes, n_ctx %d, n_vocab %d, n_chunk %d need %llu "
                        "(20 header + %llu tokens + %llu records of %llu bytes)",
                        path, (unsigned long long)size, n_ctx, n_vocab, n_chunk,
                        (unsigned long long)total, (unsigned long long)tok_bytes,
                        (unsigned long long)n_rec, (unsigned long long)rec_bytes);
    return KLD_OK;
}

static kld_status load_tokens(kld_lcpp_base *b, kld_error *err) {
    const kld_lcpp_base_info *in = &b->info;
    size_t n = (size_t)in->n_chunk * (size_t)in->n_ctx; /* fits: the file holds them */
    b->tokens = malloc(n * sizeof *b->tokens);
    if (!b->tokens)
        return kld_fail(err, KLD_ERR_NOMEM, "%s: tokens: out of memory for %zu ids", b->path, n);
    kld_status st = read_at(b->fd, b->path, b->tokens, n * sizeof *b->tokens, LCPP_HEADER_BYTES,
                            "tokens", err);
    if (st) return st;
    for (size_t i = 0; i < n; i++) {
        int32_t t = (int32_t)kld_load_u32(&b->tokens[i]);
        if (t < 0 || t >= in->n_vocab)
            return kld_fail(err, KLD_ERR_FORMAT,
                            "%s: tokens[%zu] (chunk %zu, position %zu): id %d outside [0, n_vocab %d)",
                            b->path, i, i / (size_t)in->n_ctx, i % (size_t)in->n_ctx, t,
                            in->n_vocab);
    }
    return KLD_OK;
}

kld_status kld_lcpp_base_open(const char *path, int32_t n_vocab_expected, kld_lcpp_base **out,
                              kld_error *err) {
    *out = NULL;
    kld_lcpp_base *b = calloc(1, sizeof *b);
    if (!b) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", path);
    b->fd = -1;
    kld_status st = KLD_OK;
    b->path = kld_strdup(path);
    if (!b->path) {
        st = kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    b->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (b->fd < 0) {
        st = kld_fail(err, KLD_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        goto fail;
    }
    struct stat sb;
    if (fstat(b->fd, &sb) != 0) {
        st = kld_fail(err, KLD_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
        goto fail;
    }
    if (!S_ISREG(sb.st_mode)) {
        st = kld_fail(err, KLD_ERR_IO, "%s: not a regular file", path);
        goto fail;
    }
    uint64_t size = (uint64_t)sb.st_size;
    if (size < LCPP_HEADER_BYTES) {
        st = kld_fail(err, KLD_ERR_FORMAT, "%s: %s: the file ends at byte %llu, inside the 20-byte header",
                      path, field_cut(size), (unsigned long long)size);
        goto fail;
    }
    uint8_t h[LCPP_HEADER_BYTES];
    st = read_at(b->fd, path, h, sizeof h, 0, "header", err);
    if (st) goto fail;
    st = check_header(path, h, size, n_vocab_expected, &b->info, &b->records_at, err);
    if (st) goto fail;
    st = load_tokens(b, err);
    if (st) goto fail;
    b->scratch = malloc((size_t)b->info.record_u16 * sizeof *b->scratch);
    if (!b->scratch) {
        st = kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory for one record", path);
        goto fail;
    }
    *out = b;
    return KLD_OK;
fail:
    kld_lcpp_base_close(b);
    return st;
}

void kld_lcpp_base_close(kld_lcpp_base *b) {
    if (!b) return;
    if (b->fd >= 0) close(b->fd);
    free(b->scratch);
    free(b->tokens);
    free(b->path);
    free(b);
}

const kld_lcpp_base_info *kld_lcpp_base_info_of(const kld_lcpp_base *b) { return &b->info; }
const char *kld_lcpp_base_path(const kld_lcpp_base *b) { return b->path; }

const int32_t *kld_lcpp_base_tokens(const kld_lcpp_base *b, int64_t chunk) {
    if (chunk < 0 || chunk >= b->info.n_chunk) return NULL;
    return b->tokens + (size_t)chunk * (size_t)b->info.n_ctx;
}

/* Checks the two floats and the codes of one record (see lcpp_base.h). */
static kld_status check_record(const kld_lcpp_base *b, int64_t chunk, int64_t rec,
                               const uint16_t *r, kld_error *err) {
    float scale = kld_load_f32(r), min_log_prob = kld_load_f32(r + 2);
    if (!isfinite(scale) || scale < 0.0f)
        return kld_fail(err, KLD_ERR_FORMAT,
                        "%s: chunk %lld record %lld: scale %g: must be finite and >= 0", b->path,
                        (long long)chunk, (long long)rec, (double)scale);
    if (!isfinite(min_log_prob) || min_log_prob > 0.0f)
        return kld_fail(err, KLD_ERR_FORMAT,
                        "%s: chunk %lld record %lld: min_log_prob %g: must be finite and <= 0",
                        b->path, (long long)chunk, (long long)rec, (double)min_log_prob);
    /* the maximum decodes to scale * 65535 + min_log_prob = -lse, and
     * 0 <= lse <= ln n_vocab; the slack covers float rounding (~1e-5) */
    const float max_lp = scale * 65535.0f + min_log_prob;
    const double lo = -log((double)b->info.n_vocab) - 1e-3;
    if (!(max_lp <= 1e-3f && (double)max_lp >= lo))
        return kld_fail(err, KLD_ERR_FORMAT,
                        "%s: chunk %lld record %lld: scale %g, min_log_prob %g: the maximum's "
                        "log-prob %g is outside [-ln n_vocab, 0] = [%.4f, 0]",
                        b->path, (long long)chunk, (long long)rec, (double)scale,
                        (double)min_log_prob, (double)max_lp, lo + 1e-3);
    if (scale > 0.0f) {
        /* the row's maximum always encodes as 65535 (its code is
         * (max - min) / scale up to a few float roundings) */
        const uint16_t *codes = r + 4;
        int32_t i = 0;
        while (i < b->info.n_vocab && codes[i] != 65535) i++;
        if (i == b->info.n_vocab)
            return kld_fail(err, KLD_ERR_FORMAT,
                            "%s: chunk %lld record %lld: codes: scale %g > 0 but no code is 65535 "
                            "(the maximum's code)",
                            b->path, (long long)chunk, (long long)rec, (double)scale);
    }
    return KLD_OK;
}

kld_status kld_lcpp_base_read(kld_lcpp_base *b, int64_t chunk, int64_t rec0, int64_t n,
                              float *logp, uint16_t *codes, float *min_log_prob, kld_error *err) {
    const kld_lcpp_base_info *in = &b->info;
    if (chunk < 0 || chunk >= in->n_chunk || rec0 < 0 || n < 0 || rec0 > in->records_per_chunk ||
        n > in->records_per_chunk - rec0)
        return kld_fail(err, KLD_ERR_ARG,
                        "%s: records [%lld, %lld + %lld) of chunk %lld: outside %d chunks of %lld records",
                        b->path, (long long)rec0, (long long)rec0, (long long)n, (long long)chunk,
                        in->n_chunk, (long long)in->records_per_chunk);
    const size_t nv = (size_t)in->record_u16, n_vocab = (size_t)in->n_vocab;
    for (int64_t k = 0; k < n; k++) {
        int64_t rec = rec0 + k;
        /* cannot overflow: the size check at open covered every record */
        uint64_t off = b->records_at +
                       ((uint64_t)chunk * (uint64_t)in->records_per_chunk + (uint64_t)rec) * nv * 2;
        kld_status st = read_at(b->fd, b->path, b->scratch, nv * 2, off, "a record", err);
        if (st) return st;
        st = check_record(b, chunk, rec, b->scratch, err);
        if (st) return st;
        const float scale = kld_load_f32(b->scratch), mlp = kld_load_f32(b->scratch + 2);
        const uint16_t *q = b->scratch + 4;
        if (logp) {
            float *row = logp + (size_t)k * n_vocab;
            /* float multiply, then float add, as llama.cpp decodes */
            for (size_t i = 0; i < n_vocab; i++) row[i] = scale * (float)q[i] + mlp;
        }
        if (codes) memcpy(codes + (size_t)k * n_vocab, q, n_vocab * sizeof *q);
        if (min_log_prob) min_log_prob[k] = mlp;
    }
    return KLD_OK;
}
