/* imatrix_gguf.c — llama-imatrix's GGUF importance matrix (its default
 * output since 2025): per weight W a tensor "W.in_sum2" (F32, ne = [K,
 * n_mat]: the sum of squared activations of each column, per expert) and
 * "W.counts" (F32, ne = [1, n_mat]: the tokens each matrix saw), with keys
 * imatrix.chunk_count, imatrix.chunk_size and imatrix.datasets. As
 * llama-quantize loads it (common/imatrix-loader.cpp, tools/quantize): the
 * metadata keys must be present, counts are rounded to integers, and the
 * quantizers receive in_sum2 / count per matrix, or 1 for a matrix that saw
 * no tokens. Tensors with other suffixes are not entries (llama.cpp skips
 * them too). */
#include "io/gguf.h"
#include "quant/imatrix_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char SUMS[] = ".in_sum2", COUNTS[] = ".counts";

/* name ends in suffix: its length without it, else 0 */
static size_t stem(const char *name, const char *suffix) {
    size_t n = strlen(name), m = strlen(suffix);
    return n > m && !strcmp(name + n - m, suffix) ? n - m : 0;
}

static kld_status metadata(const kld_gguf *g, const char *path, kld_imatrix *im, kld_error *err) {
    static const char *const keys[] = {"imatrix.chunk_count", "imatrix.chunk_size"};
    int64_t v[2];
    for (int i = 0; i < 2; i++)
        if (!kld_gguf_get_int(g, keys[i], &v[i]) || v[i] < 0 || v[i] > INT32_MAX)
            return kld_fail(err, KLD_ERR_FORMAT, "%s: key %s is %s (llama-quantize requires the "
                            "imatrix metadata)", path, keys[i],
                            kld_gguf_find(g, keys[i]) ? "not an integer in 0 .. 2^31-1" : "missing");
    im->chunks = (int32_t)v[0];
    const kld_gguf_value *ds = kld_gguf_get_arr(g, "imatrix.datasets");
    if (!ds || ds->v.arr.elem_type != KLD_GGUF_STRING)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: key imatrix.datasets is %s", path,
                        ds ? "not an array of strings" : "missing");
    /* the datasets joined with ", " (a legacy file names one) */
    size_t len = 1;
    for (uint64_t i = 0; i < ds->v.arr.n; i++) len += ds->v.arr.strs[i].len + 2;
    if (ds->v.arr.n == 0) return KLD_OK;
    im->dataset = malloc(len);
    if (!im->dataset) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", path);
    char *p = im->dataset;
    for (uint64_t i = 0; i < ds->v.arr.n; i++) {
        if (i) {
            memcpy(p, ", ", 2);
            p += 2;
        }
        memcpy(p, ds->v.arr.strs[i].ptr, ds->v.arr.strs[i].len);
        p += ds->v.arr.strs[i].len;
    }
    *p = '\0';
    return KLD_OK;
}

static kld_status entry(const kld_gguf *g, const char *path, const kld_tensor *sums, size_t n_stem,
                        kld_imatrix_entry *e, int32_t chunks, kld_error *err) {
    e->name = kld_strndup(sums->name, n_stem);
    if (!e->name) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", path);
    char cname[600]; /* names longer than that are not found: an error, not a wrong entry */
    snprintf(cname, sizeof cname, "%s%s", e->name, COUNTS);
    const kld_tensor *counts = strlen(e->name) + sizeof COUNTS <= sizeof cname ? kld_gguf_find_tensor(g, cname) : NULL;
    if (!counts)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: tensor '%s' has no '%s' beside it", path, sums->name, cname);
    const kld_tensor *t2[2] = {sums, counts};
    char tn[16];
    for (int i = 0; i < 2; i++)
        if (t2[i]->type != KLD_TYPE_F32)
            return kld_fail(err, KLD_ERR_FORMAT, "%s: tensor '%s' has type %s (expected f32)", path,
                            t2[i]->name, kld_type_name(t2[i]->type, tn));
    const int64_t n = kld_tensor_nelements(sums), n_mat = kld_tensor_nelements(counts);
    if (n < 1 || n_mat < 1 || n % n_mat != 0 || n > INT32_MAX)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: tensor '%s' (%" PRId64 " values) is not whole rows "
                        "for the %" PRId64 " matrices of '%s'", path, sums->name, n, n_mat, cname);
    const int64_t k = n / n_mat;
    const float *s = sums->data, *c = counts->data;
    e->ncall = chunks;
    e->n = n;
    e->sums = malloc((size_t)n * sizeof *e->sums);
    e->weights = malloc((size_t)n * sizeof *e->weights);
    if (!e->sums || !e->weights) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", path);
    for (int64_t j = 0; j < n_mat; j++) {
        float cj;
        memcpy(&cj, c + j, 4); /* the data section need not be 4-byte aligned in a buffer */
        if (!isfinite(cj) || cj < 0 || cj > 9.0e15f)
            return kld_fail(err, KLD_ERR_FORMAT, "%s: tensor '%s'[%" PRId64 "] = %g is not a token count",
                            path, cname, j, (double)cj);
        const float count = (float)llroundf(cj);
        for (int64_t i = 0; i < k; i++) {
            float v;
            memcpy(&v, s + j * k + i, 4);
            if (!isfinite(v) || v < 0)
                return kld_fail(err, KLD_ERR_FORMAT, "%s: tensor '%s'[%" PRId64 "] = %g is not a sum of "
                                "squares", path, sums->name, j * k + i, (double)v);
            e->sums[j * k + i] = v;
            e->weights[j * k + i] = count > 0 ? v / count : 1.0f;
        }
    }
    return KLD_OK;
}

kld_status kld_imatrix_parse_gguf(const char *path, const uint8_t *buf, uint64_t size, kld_imatrix *im,
                                  kld_error *err) {
    kld_gguf *g = NULL;
    kld_status st = kld_gguf_parse(buf, size, path, &g, err);
    if (!st) st = metadata(g, path, im, err);
    size_t n_entries = 0;
    for (uint64_t i = 0; !st && i < g->n_tensors; i++) {
        const char *name = g->tensors[i].name;
        if (stem(name, SUMS)) n_entries++;
        size_t nc = stem(name, COUNTS);
        if (nc) { /* a count without its sums */
            char sname[600];
            snprintf(sname, sizeof sname, "%.*s%s", (int)nc, name, SUMS);
            if (nc + sizeof SUMS > sizeof sname || !kld_gguf_find_tensor(g, sname))
                st = kld_fail(err, KLD_ERR_FORMAT, "%s: tensor '%s' has no '%s' beside it", path, name, sname);
        }
    }
    if (!st && n_entries == 0)
        st = kld_fail(err, KLD_ERR_FORMAT, "%s: no imatrix entries (no tensor named WEIGHT%s)", path, SUMS);
    if (!st && !(im->e = calloc(n_entries, sizeof *im->e)))
        st = kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", path);
    for (uint64_t i = 0; !st && i < g->n_tensors; i++) {
        size_t ns = stem(g->tensors[i].name, SUMS);
        if (!ns) continue;
        st = entry(g, path, &g->tensors[i], ns, &im->e[im->n], im->chunks, err);
        im->n++; /* freed with im, whole or not */
    }
    kld_gguf_close(g);
    return st;
}
