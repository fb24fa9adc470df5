/* partial.c — shard partials on disk: the atomic writer and the validating
 * reader of the layout in partial.h. */
#include "store/partial.h"

#include "common/common.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char magic[8] = {'K', 'L', 'D', 'S', 'H', 'A', 'R', 'D'};

struct kld_partial {
    char *path;
    FILE *f;
    kld_partial_head h;
    char *meta;
    kld_partial_window *windows;
    uint64_t records_read;
    long records_at; /* file offset of the first record */
};

bool kld_partial_shard_has(uint32_t k, uint32_t n, uint32_t mode, uint64_t i, uint64_t w) {
    if (n == 0) return true;
    if (mode == 0) return i % n == k;
    /* W < 2^40 and n <= 2^20 keep the products below 2^64 */
    uint64_t lo = w * k / n, hi = w * ((uint64_t)k + 1) / n;
    return i >= lo && i < hi;
}

/* Closed forms, since w may be 2^40 (a header's claim, before the file's
 * size is known to hold that many). */
uint64_t kld_partial_shard_count(uint32_t k, uint32_t n, uint32_t mode, uint64_t w) {
    if (n == 0) return w;
    if (mode == 0) return w > k ? (w - k - 1) / n + 1 : 0;
    return w * ((uint64_t)k + 1) / n - w * k / n;
}

uint64_t kld_partial_shard_next(uint32_t k, uint32_t n, uint32_t mode, uint64_t i, uint64_t w) {
    if (n == 0) return i < w ? i : w;
    uint64_t j;
    if (mode == 0) {
        j = i + (k + n - i % n) % n;
    } else {
        const uint64_t lo = w * k / n, hi = w * ((uint64_t)k + 1) / n;
        j = i < lo ? lo : i;
        if (j >= hi) j = w;
    }
    return j < w ? j : w;
}

static void put_u32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put_u64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

static void encode_record(const kld_position *r, uint8_t *b) {
    memset(b, 0, KLD_PARTIAL_RECORD_BYTES);
    const double d[7] = {r->kld, r->kld_rev, r->jsd, r->nll_ref, r->nll_arm, r->kld_bound, r->dlogit};
    memcpy(b, d, 56);
    memcpy(b + 56, &r->p_ref_max, 4);
    memcpy(b + 60, &r->mass, 4);
    memcpy(b + 64, &r->token, 4);
    memcpy(b + 68, &r->top_ref, 4);
    memcpy(b + 72, &r->top_arm, 4);
    memcpy(b + 76, &r->ctx_pos, 4);
    const uint16_t h[6] = {r->topk_hits, r->topk, r->topk_ordered, r->rank_ref, r->rank_arm, r->strata};
    memcpy(b + 80, h, 12);
    b[92] = r->truncated;
    b[93] = r->next_outside;
}

static void decode_record(const uint8_t *b, kld_position *r) {
    memset(r, 0, sizeof *r);
    r->kld = kld_load_f64(b);
    r->kld_rev = kld_load_f64(b + 8);
    r->jsd = kld_load_f64(b + 16);
    r->nll_ref = kld_load_f64(b + 24);
    r->nll_arm = kld_load_f64(b + 32);
    r->kld_bound = kld_load_f64(b + 40);
    r->dlogit = kld_load_f64(b + 48);
    r->p_ref_max = kld_load_f32(b + 56);
    r->mass = kld_load_f32(b + 60);
    r->token = (int32_t)kld_load_u32(b + 64);
    r->top_ref = (int32_t)kld_load_u32(b + 68);
    r->top_arm = (int32_t)kld_load_u32(b + 72);
    r->ctx_pos = kld_load_u32(b + 76);
    r->topk_hits = kld_load_u16(b + 80);
    r->topk = kld_load_u16(b + 82);
    r->topk_ordered = kld_load_u16(b + 84);
    r->rank_ref = kld_load_u16(b + 86);
    r->rank_arm = kld_load_u16(b + 88);
    r->strata = kld_load_u16(b + 90);
    r->truncated = b[92];
    r->next_outside = b[93];
}

/* ---- writer ---- */

typedef struct out_file {
    const char *path;
    FILE *f;
    EVP_MD_CTX *md;
} out_file;

static kld_status put(out_file *o, const void *p, size_t n, kld_error *err) {
    if (n == 0) return KLD_OK;
    EVP_DigestUpdate(o->md, p, n);
    if (fwrite(p, 1, n, o->f) != n)
        return kld_fail(err, KLD_ERR_IO, "%s: write failed: %s", o->path, strerror(errno));
    return KLD_OK;
}

static kld_status write_body(out_file *o, const kld_partial_head *h, const char *meta,
                             size_t meta_len, const kld_partial_window *w,
                             const kld_position *rec, kld_error *err) {
    uint8_t head[KLD_PARTIAL_HEAD_BYTES] = {0};
    memcpy(head, magic, 8);
    put_u32(head + 8, KLD_PARTIAL_VERSION);
    put_u32(head + 12, h->shard_k);
    put_u32(head + 16, h->shard_n);
    put_u32(head + 20, h->shard_mode);
    put_u32(head + 24, h->topk);
    put_u32(head + 28, h->flags);
    put_u64(head + 32, h->n_windows_total);
    put_u64(head + 40, h->n_windows);
    put_u64(head + 48, h->n_records);
    put_u64(head + 56, meta_len);
    memcpy(head + 64, h->hash, 32);
    kld_status st = put(o, head, sizeof head, err);
    if (!st) st = put(o, meta, meta_len, err);
    for (uint64_t i = 0; i < h->n_windows && !st; i++) {
        uint8_t b[KLD_PARTIAL_WINDOW_BYTES] = {0};
        put_u64(b, w[i].index);
        put_u32(b + 8, w[i].n_records);
        b[12] = w[i].new_doc;
        st = put(o, b, sizeof b, err);
    }
    for (uint64_t i = 0; i < h->n_records && !st; i++) {
        uint8_t b[KLD_PARTIAL_RECORD_BYTES];
        encode_record(&rec[i], b);
        st = put(o, b, sizeof b, err);
    }
    if (st) return st;
    uint8_t sum[32];
    unsigned len = 0;
    EVP_DigestFinal_ex(o->md, sum, &len);
    if (fwrite(sum, 1, 32, o->f) != 32 || fflush(o->f) != 0 || fsync(fileno(o->f)) != 0)
        return kld_fail(err, KLD_ERR_IO, "%s: write failed: %s", o->path, strerror(errno));
    return KLD_OK;
}

kld_status kld_partial_write(const char *path, const kld_partial_head *h, const char *meta,
                             const kld_partial_window *windows, const kld_position *records,
                             kld_error *err) {
    size_t meta_len = strlen(meta);
    uint64_t sum = 0;
    for (uint64_t i = 0; i < h->n_windows; i++) sum += windows[i].n_records;
    if (meta_len > KLD_PARTIAL_MAX_META || sum != h->n_records || h->shard_n == 0 ||
        h->shard_k >= h->shard_n || h->n_windows > h->n_windows_total)
        return kld_fail(err, KLD_ERR_ARG, "%s: inconsistent partial (meta %zu bytes, %llu/%llu "
                        "records, shard %u/%u)", path, meta_len, (unsigned long long)sum,
                        (unsigned long long)h->n_records, h->shard_k, h->shard_n);
    size_t n = strlen(path);
    char *tmp = malloc(n + 8);
    if (!tmp) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    memcpy(tmp, path, n);
    memcpy(tmp + n, ".tmp", 5);
    out_file o = {path, fopen(tmp, "wb"), EVP_MD_CTX_new()};
    kld_status st;
    if (!o.f) st = kld_fail(err, KLD_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
    else if (!o.md) st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    else {
        EVP_DigestInit_ex(o.md, EVP_sha256(), NULL);
        st = write_body(&o, h, meta, meta_len, windows, records, err);
    }
    if (o.f && fclose(o.f) != 0 && !st)
        st = kld_fail(err, KLD_ERR_IO, "%s: close failed: %s", path, strerror(errno));
    EVP_MD_CTX_free(o.md);
    if (!st && rename(tmp, path) != 0)
        st = kld_fail(err, KLD_ERR_IO, "%s: cannot rename %s: %s", path, tmp, strerror(errno));
    if (st && o.f) remove(tmp);
    free(tmp);
    return st;
}

/* ---- reader ---- */

static kld_status read_exact(kld_partial *p, void *buf, size_t n, const char *what,
                             kld_error *err) {
    if (n && fread(buf, 1, n, p->f) != n)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: %s: file ends early", p->path, what);
    return KLD_OK;
}

/* The trailing SHA-256 must be that of every byte before it. */
static kld_status verify_checksum(kld_partial *p, uint64_t size, kld_error *err) {
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    uint8_t *buf = malloc(1 << 20);
    kld_status st = KLD_OK;
    if (!md || !buf) st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    else {
        EVP_DigestInit_ex(md, EVP_sha256(), NULL);
        uint64_t left = size - 32;
        while (left && !st) {
            size_t n = left < (1u << 20) ? (size_t)left : (1u << 20);
            if ((st = read_exact(p, buf, n, "checksum", err))) break;
            EVP_DigestUpdate(md, buf, n);
            left -= n;
        }
        uint8_t want[32], got[32];
        unsigned len = 0;
        if (!st) st = read_exact(p, want, 32, "checksum", err);
        if (!st) {
            EVP_DigestFinal_ex(md, got, &len);
            if (memcmp(want, got, 32))
                st = kld_fail(err, KLD_ERR_FORMAT, "%s: checksum mismatch (the file is corrupted "
                              "or truncated)", p->path);
        }
    }
    EVP_MD_CTX_free(md);
    free(buf);
    if (!st && fseek(p->f, 0, SEEK_SET) != 0)
        st = kld_fail(err, KLD_ERR_IO, "%s: cannot seek: %s", p->path, strerror(errno));
    return st;
}

static kld_status read_head(kld_partial *p, uint64_t size, kld_error *err) {
    uint8_t b[KLD_PARTIAL_HEAD_BYTES];
    kld_status st = read_exact(p, b, sizeof b, "header", err);
    if (st) return st;
    if (memcmp(b, magic, 8))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: not a kldeval shard partial (magic)", p->path);
    uint32_t version = kld_load_u32(b + 8);
    if (version != KLD_PARTIAL_VERSION)
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: version %u (this build reads %d%s)", p->path,
                        version, KLD_PARTIAL_VERSION,
                        version < KLD_PARTIAL_VERSION ? "; written by an older kldeval: run the shard again" : "");
    kld_partial_head *h = &p->h;
    h->shard_k = kld_load_u32(b + 12);
    h->shard_n = kld_load_u32(b + 16);
    h->shard_mode = kld_load_u32(b + 20);
    h->topk = kld_load_u32(b + 24);
    h->n_windows_total = kld_load_u64(b + 32);
    h->n_windows = kld_load_u64(b + 40);
    h->n_records = kld_load_u64(b + 48);
    uint64_t meta_len = kld_load_u64(b + 56);
    memcpy(h->hash, b + 64, 32);
    if (h->shard_n < 1 || h->shard_n > 1000000 || h->shard_k >= h->shard_n)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: shard %u/%u", p->path, h->shard_k, h->shard_n);
    if (h->shard_mode > 1)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: shard mode %u", p->path, h->shard_mode);
    if (h->topk < 1 || h->topk > KLD_TOPK_MAX)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: top-k %u", p->path, h->topk);
    h->flags = kld_load_u32(b + 28);
    if (h->flags & ~KLD_PARTIAL_CHECKPOINT)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: flags %u: unknown bits", p->path, h->flags);
    if (h->n_windows_total >= (1ull << 40) || h->n_windows > h->n_windows_total)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: %llu windows of %llu", p->path,
                        (unsigned long long)h->n_windows, (unsigned long long)h->n_windows_total);
    if (meta_len > KLD_PARTIAL_MAX_META)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: meta_len %llu exceeds %u", p->path,
                        (unsigned long long)meta_len, KLD_PARTIAL_MAX_META);
    uint64_t want = KLD_PARTIAL_HEAD_BYTES + meta_len + 32, t;
    if (!kld_mul_u64(h->n_windows, KLD_PARTIAL_WINDOW_BYTES, &t) || !kld_add_u64(want, t, &want) ||
        !kld_mul_u64(h->n_records, KLD_PARTIAL_RECORD_BYTES, &t) || !kld_add_u64(want, t, &want) ||
        want != size)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: %llu bytes, but the header's counts (%llu windows, "
                        "%llu records, %llu bytes of meta) need %llu", p->path,
                        (unsigned long long)size, (unsigned long long)h->n_windows,
                        (unsigned long long)h->n_records, (unsigned long long)meta_len,
                        (unsigned long long)want);
    if (!(p->meta = malloc((size_t)meta_len + 1)))
        return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    if ((st = read_exact(p, p->meta, (size_t)meta_len, "meta", err))) return st;
    p->meta[meta_len] = 0;
    if (strlen(p->meta) != meta_len || !kld_utf8_valid(p->meta, (size_t)meta_len))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: meta is not UTF-8 text", p->path);
    return KLD_OK;
}

static kld_status read_windows(kld_partial *p, kld_error *err) {
    const kld_partial_head *h = &p->h;
    p->windows = malloc((size_t)(h->n_windows ? h->n_windows : 1) * sizeof *p->windows);
    if (!p->windows) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    uint64_t sum = 0;
    const uint64_t expected = kld_partial_shard_count(h->shard_k, h->shard_n, h->shard_mode, h->n_windows_total);
    bool checkpoint = h->flags & KLD_PARTIAL_CHECKPOINT;
    if (checkpoint ? h->n_windows > expected : expected != h->n_windows)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: %llu windows, but shard %u/%u of %llu has %llu",
                        p->path, (unsigned long long)h->n_windows, h->shard_k, h->shard_n,
                        (unsigned long long)h->n_windows_total, (unsigned long long)expected);
    uint64_t next = 0; /* a checkpoint: the shard's windows in order, none skipped */
    for (uint64_t i = 0; i < h->n_windows; i++) {
        uint8_t b[KLD_PARTIAL_WINDOW_BYTES];
        kld_status st = read_exact(p, b, sizeof b, "window table", err);
        if (st) return st;
        kld_partial_window *w = &p->windows[i];
        w->index = kld_load_u64(b);
        w->n_records = kld_load_u32(b + 8);
        w->new_doc = b[12];
        if (w->new_doc > 1 || b[13] || b[14] || b[15])
            return kld_fail(err, KLD_ERR_FORMAT, "%s: window entry %llu: bad flags", p->path,
                            (unsigned long long)i);
        if (checkpoint) next = kld_partial_shard_next(h->shard_k, h->shard_n, h->shard_mode, next, h->n_windows_total);
        if ((i && w->index <= p->windows[i - 1].index) || w->index >= h->n_windows_total ||
            (checkpoint && w->index != next++) ||
            !kld_partial_shard_has(h->shard_k, h->shard_n, h->shard_mode, w->index,
                                   h->n_windows_total))
            return kld_fail(err, KLD_ERR_FORMAT, "%s: window entry %llu: index %llu is not the "
                            "shard's next window", p->path, (unsigned long long)i,
                            (unsigned long long)w->index);
        sum += w->n_records;
    }
    if (sum != h->n_records)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: windows hold %llu records, header says %llu",
                        p->path, (unsigned long long)sum, (unsigned long long)h->n_records);
    return KLD_OK;
}

kld_status kld_partial_open(const char *path, kld_partial **out, kld_error *err) {
    *out = NULL;
    kld_partial *p = calloc(1, sizeof *p);
    if (!p || !(p->path = kld_strdup(path))) {
        free(p);
        return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    }
    kld_status st = KLD_OK;
    struct stat sb;
    if (!(p->f = fopen(path, "rb")))
        st = kld_fail(err, KLD_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    else if (fstat(fileno(p->f), &sb) != 0 || !S_ISREG(sb.st_mode))
        st = kld_fail(err, KLD_ERR_IO, "%s: not a regular file", path);
    else if ((uint64_t)sb.st_size < KLD_PARTIAL_HEAD_BYTES + 32)
        st = kld_fail(err, KLD_ERR_FORMAT, "%s: %lld bytes is too short for a shard partial", path,
                      (long long)sb.st_size);
    if (!st) st = verify_checksum(p, (uint64_t)sb.st_size, err);
    if (!st) st = read_head(p, (uint64_t)sb.st_size, err);
    if (!st) st = read_windows(p, err);
    if (!st && (p->records_at = ftell(p->f)) < 0)
        st = kld_fail(err, KLD_ERR_IO, "%s: cannot tell the file position: %s", path, strerror(errno));
    if (st) {
        kld_partial_close(p);
        return st;
    }
    *out = p;
    return KLD_OK;
}

const kld_partial_head *kld_partial_head_of(const kld_partial *p) { return &p->h; }
const char *kld_partial_meta(const kld_partial *p) { return p->meta; }
const kld_partial_window *kld_partial_windows(const kld_partial *p) { return p->windows; }
const char *kld_partial_path(const kld_partial *p) { return p->path; }

kld_status kld_partial_read(kld_partial *p, size_t n, kld_position *out, kld_error *err) {
    if (n > p->h.n_records - p->records_read)
        return kld_fail(err, KLD_ERR_ARG, "%s: %zu records asked, %llu left", p->path, n,
                        (unsigned long long)(p->h.n_records - p->records_read));
    for (size_t i = 0; i < n; i++) {
        uint8_t b[KLD_PARTIAL_RECORD_BYTES];
        kld_status st = read_exact(p, b, sizeof b, "records", err);
        if (st) return st;
        decode_record(b, &out[i]);
        const kld_position *r = &out[i];
        if (r->topk != p->h.topk || r->truncated > 1 || r->next_outside > 1 || b[94] || b[95] ||
            r->token < -1 || r->topk_hits > r->topk || r->topk_ordered > r->topk_hits)
            return kld_fail(err, KLD_ERR_FORMAT, "%s: record %llu: invalid (top-k %u, flags %u/%u)",
                            p->path, (unsigned long long)(p->records_read + i), r->topk,
                            r->truncated, r->next_outside);
        /* values a scorer cannot produce would pass into the merged figures */
        if (!isfinite(r->kld) || !isfinite(r->kld_rev) || !isfinite(r->jsd) || !(r->p_ref_max >= 0) ||
            r->p_ref_max > 1 || !(r->mass >= 0) || r->mass > 1.001f || r->top_ref < 0 || r->top_arm < 0)
            return kld_fail(err, KLD_ERR_FORMAT, "%s: record %llu: impossible values (kld %g, kld_rev %g, "
                            "jsd %g, p_ref_max %g, mass %g, top %d/%d)", p->path,
                            (unsigned long long)(p->records_read + i), r->kld, r->kld_rev, r->jsd,
                            (double)r->p_ref_max, (double)r->mass, r->top_ref, r->top_arm);
    }
    p->records_read += n;
    return KLD_OK;
}

kld_status kld_partial_rewind(kld_partial *p, kld_error *err) {
    if (fseek(p->f, p->records_at, SEEK_SET) != 0)
        return kld_fail(err, KLD_ERR_IO, "%s: cannot seek: %s", p->path, strerror(errno));
    p->records_read = 0;
    return KLD_OK;
}

void kld_partial_close(kld_partial *p) {
    if (!p) return;
    if (p->f) fclose(p->f);
    free(p->windows);
    free(p->meta);
    free(p->path);
    free(p);
}
