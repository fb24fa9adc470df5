/* db_blob.c — the per-position BLOB of a run (layout "KLDP" v1, documented
 * in db.h): written from the accumulator's records, validated on read. */
#include "db/db_impl.h"

#include "common/common.h"

#include <math.h>
#include <stdlib.h>

static unsigned char *put_u32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
    return p + 4;
}

static unsigned char *put_f32(unsigned char *p, float f) {
    uint32_t v;
    memcpy(&v, &f, 4);
    return put_u32(p, v);
}

static uint32_t get_u32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static float get_f32(const unsigned char *p) {
    uint32_t v = get_u32(p);
    float f;
    memcpy(&f, &v, 4);
    return f;
}

kld_status kld_db_positions_encode(const kld_stats *st, unsigned char **blob, size_t *size,
                                   kld_error *err) {
    kld_record_source src;
    kld_stats_source(st, &src);
    return kld_db_positions_encode_source(&src, blob, size, err);
}

kld_status kld_db_positions_encode_source(const kld_record_source *src, unsigned char **blob,
                                          size_t *size, kld_error *err) {
    size_t n = src->n;
    uint64_t bytes;
    if (n > UINT32_MAX || !kld_mul_u64(n, KLD_DB_BLOB_RECORD, &bytes) ||
        !kld_add_u64(bytes, KLD_DB_BLOB_HEADER, &bytes) || bytes > (uint64_t)INT32_MAX)
        return kld_fail(err, KLD_ERR_UNSUPPORTED,
                        "%zu positions do not fit in one database BLOB (at most %d)", n,
                        (INT32_MAX - KLD_DB_BLOB_HEADER) / KLD_DB_BLOB_RECORD);
    unsigned char *b = malloc((size_t)bytes), *p = b;
    if (!b) return kld_fail(err, KLD_ERR_NOMEM, "out of memory for %zu positions", n);
    memcpy(p, "KLDP", 4);
    p = put_u32(p + 4, KLD_DB_BLOB_VERSION);
    p = put_u32(p, KLD_DB_BLOB_RECORD);
    p = put_u32(p, (uint32_t)n);
    const kld_position *r;
    size_t m = 0, done = 0;
    for (bool restart = true;; restart = false) {
        kld_status st = src->next(src->user, restart, &r, &m, err);
        if (!st && (m == 0 ? done != n : m > n - done))
            st = kld_fail(err, KLD_ERR_FORMAT, "positions BLOB: the source holds other than its "
                          "%zu records", n);
        if (st) {
            free(b);
            return st;
        }
        if (m == 0) break;
        for (size_t i = 0; i < m; i++) {
            bool has_token = r[i].token >= 0;
            double dp = has_token ? exp(-r[i].nll_arm) - exp(-r[i].nll_ref) : NAN;
            p = put_f32(p, (float)r[i].kld);
            p = put_f32(p, has_token ? (float)r[i].nll_ref : NAN);
            p = put_f32(p, has_token ? (float)r[i].nll_arm : NAN);
            p = put_f32(p, (float)dp);
            p = put_f32(p, r[i].p_ref_max);
            p = put_u32(p, r[i].ctx_pos);
            p = put_u32(p, (uint32_t)r[i].token);
            *p++ = r[i].top_ref == r[i].top_arm;
        }
        done += m;
    }
    *blob = b;
    *size = (size_t)bytes;
    return KLD_OK;
}

kld_status kld_db_positions_decode(const void *blob, size_t size, kld_db_position **out,
                                   size_t *n, kld_error *err) {
    const unsigned char *b = blob;
    *out = NULL;
    *n = 0;
    if (size < KLD_DB_BLOB_HEADER || memcmp(b, "KLDP", 4) != 0)
        return kld_fail(err, KLD_ERR_FORMAT, "positions BLOB: bad magic or %zu bytes", size);
    uint32_t version = get_u32(b + 4), rec = get_u32(b + 8), count = get_u32(b + 12);
    if (version != KLD_DB_BLOB_VERSION || rec != KLD_DB_BLOB_RECORD)
        return kld_fail(err, KLD_ERR_UNSUPPORTED,
                        "positions BLOB: version %u with %u-byte records (this kldeval reads "
                        "version %d, %d bytes)",
                        version, rec, KLD_DB_BLOB_VERSION, KLD_DB_BLOB_RECORD);
    uint64_t want;
    if (!kld_mul_u64(count, rec, &want) || !kld_add_u64(want, KLD_DB_BLOB_HEADER, &want) ||
        want != size)
        return kld_fail(err, KLD_ERR_FORMAT, "positions BLOB: %u records need %llu bytes, have %zu",
                        count, (unsigned long long)want, size);
    kld_db_position *p = malloc(count ? count * sizeof *p : 1);
    if (!p) return kld_fail(err, KLD_ERR_NOMEM, "out of memory for %u positions", count);
    const unsigned char *q = b + KLD_DB_BLOB_HEADER;
    for (uint32_t i = 0; i < count; i++, q += KLD_DB_BLOB_RECORD) {
        p[i].kld = get_f32(q);
        p[i].nll_ref = get_f32(q + 4);
        p[i].nll_arm = get_f32(q + 8);
        p[i].dp = get_f32(q + 12);
        p[i].p_ref_max = get_f32(q + 16);
        p[i].ctx_pos = get_u32(q + 20);
        p[i].token = (int32_t)get_u32(q + 24);
        p[i].top1 = q[28];
        if (p[i].top1 > 1 || p[i].token < -1) {
            kld_status st = kld_fail(err, KLD_ERR_FORMAT, "positions BLOB: record %u: top1 %u, token %d",
                                     i, p[i].top1, p[i].token);
            free(p);
            return st;
        }
    }
    *out = p;
    *n = count;
    return KLD_OK;
}

kld_status kld_db_load_positions(kld_db *db, int64_t id, kld_db_position **out, size_t *n,
                                 kld_error *err) {
    sqlite3_stmt *s = NULL;
    *out = NULL;
    *n = 0;
    if (sqlite3_prepare_v2(db->h, "SELECT positions FROM runs WHERE id = ?", -1, &s, NULL) != SQLITE_OK)
        return kld_db_fail(db, err, KLD_ERR_IO, "cannot read positions");
    sqlite3_bind_int64(s, 1, id);
    int rc = kld_db_step(db, s);
    kld_status st;
    if (rc == SQLITE_ROW && sqlite3_column_type(s, 0) == SQLITE_BLOB) {
        st = kld_db_positions_decode(sqlite3_column_blob(s, 0), (size_t)sqlite3_column_bytes(s, 0),
                                     out, n, err);
        if (st) kld_error_prefix(err, "%s: run %lld", db->path, (long long)id);
    } else if (rc == SQLITE_ROW) {
        st = kld_fail(err, KLD_ERR_ARG, "%s: run %lld has no per-position values", db->path,
                      (long long)id);
    } else if (rc == SQLITE_DONE) {
        st = kld_fail(err, KLD_ERR_ARG, "no run with id %lld in %s", (long long)id, db->path);
    } else {
        st = kld_db_fail(db, err, KLD_ERR_IO, "cannot read positions");
    }
    sqlite3_finalize(s);
    return st;
}
