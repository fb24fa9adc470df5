/* imatrix.c — llama-imatrix's importance-matrix file, legacy form (the
 * binary format of llama.cpp at c392e50; the GGUF form is imatrix_gguf.c): int32 entry count; per entry int32 name length,
 * the name, int32 ncall, int32 nval, float32 values (the per-column mean of
 * squared activations times ncall); then optionally int32 last_call, int32
 * dataset-name length and the name. llama-quantize divides each entry by
 * ncall before handing it to the quantizers; `weights` holds that. */
#include "quant/imatrix_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct reader {
    const uint8_t *p;
    uint64_t left;
} reader;

static bool take(reader *r, void *dst, uint64_t n) {
    if (r->left < n) return false;
    memcpy(dst, r->p, (size_t)n);
    r->p += n;
    r->left -= n;
    return true;
}

static kld_status parse(const char *path, const uint8_t *buf, uint64_t size, kld_imatrix *im,
                        kld_error *err) {
    reader r = {buf, size};
    int32_t n_entries;
    if (!take(&r, &n_entries, 4) || n_entries < 1)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: no imatrix entries (count field %s)", path,
                        size < 4 ? "missing" : "< 1");
    if ((uint64_t)n_entries > size / 13) /* each entry takes at least 13 bytes */
        return kld_fail(err, KLD_ERR_FORMAT, "%s: entry count %d does not fit a %" PRIu64
                        "-byte file", path, n_entries, size);
    im->e = calloc((size_t)n_entries, sizeof *im->e);
    if (!im->e) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", path);
    for (int32_t i = 0; i < n_entries; i++) {
        kld_imatrix_entry *e = &im->e[i];
        int32_t len, ncall, nval;
        if (!take(&r, &len, 4) || len < 1 || (uint64_t)len > r.left)
            return kld_fail(err, KLD_ERR_FORMAT, "%s: entry %d: bad name length", path, i);
        e->name = kld_strndup((const char *)r.p, (size_t)len);
        if (!e->name) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", path);
        im->n++;
        r.p += len;
        r.left -= (uint64_t)len;
        if (strlen(e->name) != (size_t)len || !kld_utf8_valid(e->name, (size_t)len))
            return kld_fail(err, KLD_ERR_FORMAT, "%s: entry %d: name is not valid UTF-8 text", path, i);
        if (!take(&r, &ncall, 4) || !take(&r, &nval, 4))
            return kld_fail(err, KLD_ERR_FORMAT, "%s: entry '%s': truncated header", path, e->name);
        if (nval < 1 || (uint64_t)nval * 4 > r.left)
            return kld_fail(err, KLD_ERR_FORMAT, "%s: entry '%s': %d values do not fit the file",
                            path, e->name, nval);
        for (size_t j = 0; j + 1 < im->n; j++)
            if (!strcmp(im->e[j].name, e->name))
                return kld_fail(err, KLD_ERR_FORMAT, "%s: entry '%s' appears twice", path, e->name);
        if (ncall < 0)
            return kld_fail(err, KLD_ERR_FORMAT, "%s: entry '%s': ncall %d is negative", path, e->name, ncall);
        e->ncall = ncall;
        e->n = nval;
        e->sums = malloc((size_t)nval * sizeof(float));
        e->weights = malloc((size_t)nval * sizeof(float));
        if (!e->sums || !e->weights) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", path);
        take(&r, e->sums, (uint64_t)nval * 4);
        for (int32_t j = 0; j < nval; j++) {
            if (!isfinite(e->sums[j]) || e->sums[j] < 0)
                return kld_fail(err, KLD_ERR_FORMAT, "%s: entry '%s'[%d] = %g is not a sum of squares "
                                "(finite, >= 0)", path, e->name, j, (double)e->sums[j]);
            e->weights[j] = ncall > 0 ? e->sums[j] / (float)ncall : e->sums[j];
        }
    }
    if (r.left > 0) {
        int32_t last_call, dlen;
        if (!take(&r, &last_call, 4) || !take(&r, &dlen, 4) || dlen < 0 || (uint64_t)dlen != r.left)
            return kld_fail(err, KLD_ERR_FORMAT, "%s: malformed trailer after %zu entries "
                            "(expected int32 chunks, int32 length, dataset name)", path, im->n);
        im->chunks = last_call;
        im->dataset = kld_strndup((const char *)r.p, (size_t)dlen);
        if (!im->dataset) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", path);
    }
    return KLD_OK;
}

kld_status kld_imatrix_parse(const uint8_t *buf, uint64_t size, const char *name,
                             kld_imatrix **out, kld_error *err) {
    *out = NULL;
    kld_imatrix *im = calloc(1, sizeof *im);
    const bool gguf = size >= 4 && !memcmp(buf, "GGUF", 4);
    kld_status s = !im    ? kld_fail(err, KLD_ERR_NOMEM, "out of memory")
                   : gguf ? kld_imatrix_parse_gguf(name, buf, size, im, err)
                          : parse(name, buf, size, im, err);
    if (s) {
        kld_imatrix_free(im);
        return s;
    }
    *out = im;
    return KLD_OK;
}

kld_status kld_imatrix_read(const char *path, kld_imatrix **out, kld_error *err) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return kld_fail(err, KLD_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    uint8_t *buf = NULL;
    size_t cap = 0, len = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? 2 * cap : 65536;
            uint8_t *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", path);
            }
            buf = nb;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) break;
    }
    bool bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return kld_fail(err, KLD_ERR_IO, "%s: read error", path);
    }
    kld_status s = kld_imatrix_parse(buf, len, path, out, err);
    free(buf);
    return s;
}

const kld_imatrix_entry *kld_imatrix_find(const kld_imatrix *im, const char *name) {
    for (size_t i = 0; im && i < im->n; i++)
        if (!strcmp(im->e[i].name, name)) return &im->e[i];
    return NULL;
}

void kld_imatrix_free(kld_imatrix *im) {
    if (!im) return;
    for (size_t i = 0; i < im->n; i++) {
        free(im->e[i].name);
        free(im->e[i].sums);
        free(im->e[i].weights);
    }
    free(im->e);
    free(im->dataset);
    free(im);
}

static bool put32(FILE *f, int32_t v) { return fwrite(&v, 4, 1, f) == 1; }

kld_status kld_imatrix_write(const kld_imatrix *im, const char *path, kld_error *err) {
    if (im->n < 1 || im->n > INT32_MAX)
        return kld_fail(err, KLD_ERR_ARG, "%s: an imatrix needs 1..2^31-1 entries", path);
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 32);
    if (!tmp) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    snprintf(tmp, plen + 32, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        kld_status s = kld_fail(err, KLD_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
        free(tmp);
        return s;
    }
    bool ok = put32(f, (int32_t)im->n);
    for (size_t i = 0; ok && i < im->n; i++) {
        const kld_imatrix_entry *e = &im->e[i];
        size_t nl = strlen(e->name);
        ok = nl <= INT32_MAX && e->n <= INT32_MAX && put32(f, (int32_t)nl) &&
             fwrite(e->name, 1, nl, f) == nl && put32(f, e->ncall) && put32(f, (int32_t)e->n) &&
             fwrite(e->sums, 4, (size_t)e->n, f) == (size_t)e->n;
    }
    if (ok && im->dataset) {
        size_t dl = strlen(im->dataset);
        ok = put32(f, im->chunks) && put32(f, (int32_t)dl) && fwrite(im->dataset, 1, dl, f) == dl;
    }
    if (fclose(f) != 0) ok = false;
    if (ok && rename(tmp, path) != 0) ok = false;
    kld_status s = KLD_OK;
    if (!ok) {
        s = kld_fail(err, KLD_ERR_IO, "%s: write failed: %s", path, strerror(errno));
        remove(tmp);
    }
    free(tmp);
    return s;
}
