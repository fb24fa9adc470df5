/* dump_merge.c — shards of a dump (kldeval dump --shard K/N, layout in
 * dump.h) assembled into the dump one unsharded run writes: the shards are
 * checked to belong together and to cover every sequence exactly once,
 * then tokens.bin and every sequence's files are copied byte for byte and
 * manifest.json is written last, atomically (kld_dumpi_write_json). */
#include "store/dump_internal.h"
#include "store/partial.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define COPY_BLOCK (1u << 20)

typedef struct shard_in {
    const char *dir;
    json_t *root; /* shard.json; owns meta's strings */
    kld_dump_meta meta;
    const json_t *config;
    uint32_t k, n;
    bool range;
    int64_t *windows, n_windows;
    const char *hash;
} shard_in;

bool kld_dump_is_shard(const char *dir) {
    char path[KLD_DUMPI_PATH_MAX];
    if (strlen(dir) > KLD_DUMPI_DIR_MAX) return false;
    kld_dumpi_path(path, dir, KLD_DUMPI_SHARD);
    return access(path, F_OK) == 0;
}

static kld_status bad_shard(const char *path, const char *key, const char *want, kld_error *err) {
    return kld_fail(err, KLD_ERR_FORMAT, "%s: shard.%s: expected %s", path, key, want);
}

/* The "shard" object: k, n, mode, windows (exactly the shard's), eval_hash, config. */
static kld_status parse_shard(const char *path, shard_in *s, kld_error *err) {
    const json_t *o = json_object_get(s->root, "shard");
    if (!json_is_object(o)) return bad_shard(path, "(object)", "an object (a dump shard's bookkeeping)", err);
    const json_t *k = json_object_get(o, "k"), *n = json_object_get(o, "n");
    const json_t *mode = json_object_get(o, "mode"), *win = json_object_get(o, "windows");
    const json_t *hash = json_object_get(o, "eval_hash");
    s->config = json_object_get(o, "config");
    if (!json_is_integer(n) || json_integer_value(n) < 1 || json_integer_value(n) > 1000000)
        return bad_shard(path, "n", "an integer in [1, 1000000]", err);
    s->n = (uint32_t)json_integer_value(n);
    if (!json_is_integer(k) || json_integer_value(k) < 0 || json_integer_value(k) >= s->n)
        return bad_shard(path, "k", "an integer in [0, n)", err);
    s->k = (uint32_t)json_integer_value(k);
    const char *m = json_string_value(mode);
    if (!m || (strcmp(m, "mod") && strcmp(m, "range"))) return bad_shard(path, "mode", "\"mod\" or \"range\"", err);
    s->range = !strcmp(m, "range");
    s->hash = json_string_value(hash);
    if (!s->hash || !kld_dumpi_is_hex64(s->hash)) return bad_shard(path, "eval_hash", "64 lower-case hex digits", err);
    if (!json_is_object(s->config)) return bad_shard(path, "config", "an object", err);
    if (!json_is_array(win)) return bad_shard(path, "windows", "an array of sequence indices", err);
    size_t nw = json_array_size(win);
    s->windows = malloc((nw ? nw : 1) * sizeof *s->windows);
    if (!s->windows) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", path);
    uint64_t total = (uint64_t)s->meta.n_seqs, expected = 0;
    for (uint64_t i = 0; i < total; i++) expected += kld_partial_shard_has(s->k, s->n, s->range, i, total);
    for (size_t i = 0; i < nw; i++) {
        const json_t *v = json_array_get(win, i);
        json_int_t g = json_is_integer(v) ? json_integer_value(v) : -1;
        if (g < 0 || (uint64_t)g >= total || (i && g <= s->windows[i - 1]) ||
            !kld_partial_shard_has(s->k, s->n, s->range, (uint64_t)g, total))
            return kld_fail(err, KLD_ERR_FORMAT, "%s: shard.windows[%zu]: %lld is not the next "
                            "sequence of shard %u/%u %s of %lld", path, i, (long long)g, s->k, s->n,
                            m, (long long)total);
        s->windows[i] = (int64_t)g;
    }
    s->n_windows = (int64_t)nw;
    if ((uint64_t)nw != expected)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: shard.windows: %zu sequences, but shard %u/%u %s of "
                        "%lld has %llu", path, nw, s->k, s->n, m, (long long)total,
                        (unsigned long long)expected);
    return KLD_OK;
}

static kld_status check_size(const char *path, uint64_t want, kld_error *err) {
    struct stat sb;
    if (stat(path, &sb) != 0)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: cannot open: %s (the shard lists it)", path, strerror(errno));
    if (!S_ISREG(sb.st_mode) || (uint64_t)sb.st_size != want)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: %lld bytes, expected %llu", path,
                        (long long)sb.st_size, (unsigned long long)want);
    return KLD_OK;
}

/* The files the shard must hold, at their sizes. */
static kld_status check_files(shard_in *s, kld_error *err) {
    const kld_dump_meta *m = &s->meta;
    char path[KLD_DUMPI_PATH_MAX];
    kld_dumpi_path(path, s->dir, KLD_DUMPI_TOKENS);
    kld_status st = check_size(path, (uint64_t)m->n_seqs * (uint64_t)m->ctx_len * 4, err);
    uint64_t rec = kld_dump_meta_record_bytes(m), pps = (uint64_t)m->positions_per_seq;
    for (int64_t i = 0; i < s->n_windows && !st; i++) {
        kld_dumpi_seq_path(path, s->dir, s->windows[i], false);
        st = check_size(path, pps * rec, err);
        if (!st && m->ext) {
            kld_dumpi_seq_path(path, s->dir, s->windows[i], true);
            st = check_size(path, pps * KLD_DUMP_EXT_BYTES, err);
        }
    }
    return st;
}

static kld_status open_shard(const char *dir, shard_in *s, kld_error *err) {
    s->dir = dir;
    if (strlen(dir) > KLD_DUMPI_DIR_MAX) return kld_fail(err, KLD_ERR_ARG, "%.80s...: path too long", dir);
    char path[KLD_DUMPI_PATH_MAX];
    kld_dumpi_path(path, dir, KLD_DUMPI_SHARD);
    if (access(path, F_OK) != 0) {
        char other[KLD_DUMPI_PATH_MAX];
        kld_dumpi_path(other, dir, KLD_DUMPI_MANIFEST);
        if (access(other, F_OK) == 0)
            return kld_fail(err, KLD_ERR_ARG, "%s: a whole dump (manifest.json), not a shard", dir);
        kld_dumpi_path(other, dir, KLD_DUMPI_PARTIAL);
        return kld_fail(err, KLD_ERR_FORMAT, "%s: not a dump shard (no %s)%s", dir, KLD_DUMPI_SHARD,
                        access(other, F_OK) == 0 ? "; it is an interrupted one: run its dump again "
                                                   "with --resume" : "");
    }
    kld_status st = kld_dumpi_manifest_load(path, &s->root, &s->meta, err);
    if (!st) st = parse_shard(path, s, err);
    if (!st) st = check_files(s, err);
    return st;
}

/* The first key on which two configurations differ, for the message that
 * refuses a foreign shard. */
static void first_difference(const json_t *a, const json_t *b, char *buf, size_t size) {
    const char *key;
    const json_t *va;
    snprintf(buf, size, "the configuration");
    json_object_foreach((json_t *)a, key, va) {
        const json_t *vb = json_object_get(b, key);
        if (vb && json_equal(va, vb)) continue;
        char *x = json_dumps(va, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
        char *y = vb ? json_dumps(vb, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY) : NULL;
        snprintf(buf, size, "config.%s: %.120s vs %.120s", key, x ? x : "?", y ? y : "(missing)");
        free(x);
        free(y);
        return;
    }
    json_object_foreach((json_t *)b, key, va)
        if (!json_object_get(a, key)) {
            snprintf(buf, size, "config.%s: (missing) vs present", key);
            return;
        }
}

static kld_status check_together(shard_in *s, size_t n, shard_in **by_k, kld_error *err) {
    const shard_in *s0 = &s[0];
    for (size_t i = 1; i < n; i++) {
        const kld_dump_meta *a = &s[i].meta, *b = &s0->meta;
        if (strcmp(s[i].hash, s0->hash)) {
            char why[300];
            first_difference(s[i].config, s0->config, why, sizeof why);
            return kld_fail(err, KLD_ERR_MISMATCH, "%s: belongs to another dump than %s (the hashes "
                            "of their defining inputs differ: %s)", s[i].dir, s0->dir, why);
        }
        if (s[i].n != s0->n || s[i].range != s0->range || a->n_seqs != b->n_seqs ||
            a->ctx_len != b->ctx_len || a->top_k != b->top_k || a->format_version != b->format_version ||
            a->ext != b->ext || a->candidate != b->candidate || a->lse_of_stored != b->lse_of_stored)
            return kld_fail(err, KLD_ERR_MISMATCH, "%s: shard %u/%u %s of %lld sequences (top-k %d, "
                            "format %d); %s is %u/%u %s of %lld (top-k %d, format %d): shards of one "
                            "split only", s[i].dir, s[i].k, s[i].n, s[i].range ? "range" : "mod",
                            (long long)a->n_seqs, (int)a->top_k, a->format_version, s0->dir, s0->k,
                            s0->n, s0->range ? "range" : "mod", (long long)b->n_seqs, (int)b->top_k,
                            b->format_version);
    }
    for (size_t i = 0; i < n; i++) {
        if (by_k[s[i].k])
            return kld_fail(err, KLD_ERR_MISMATCH, "%s and %s are both shard %u/%u (duplicated shard)",
                            by_k[s[i].k]->dir, s[i].dir, s[i].k, s0->n);
        by_k[s[i].k] = &s[i];
    }
    char missing[512] = "";
    size_t n_missing = 0, len = 0;
    for (uint32_t k = 0; k < s0->n; k++) {
        if (by_k[k]) continue;
        if (n_missing++ < 16 && len < sizeof missing - 32)
            len += (size_t)snprintf(missing + len, sizeof missing - len, "%s%u/%u", len ? ", " : "", k, s0->n);
    }
    if (n_missing)
        return kld_fail(err, KLD_ERR_MISMATCH, "%zu of %u shards missing: %s%s (given: %zu shards "
                        "starting with %s)", n_missing, s0->n, missing, n_missing > 16 ? ", ..." : "",
                        n, s0->dir);
    return KLD_OK;
}

/* Every shard's tokens.bin equals the first's (they all hold every sequence's). */
static kld_status same_tokens(const shard_in *s, size_t n, kld_error *err) {
    uint8_t *a = malloc(2 * (size_t)COPY_BLOCK), *b = a + COPY_BLOCK;
    if (!a) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    char p0[KLD_DUMPI_PATH_MAX], pi[KLD_DUMPI_PATH_MAX];
    kld_dumpi_path(p0, s[0].dir, KLD_DUMPI_TOKENS);
    uint64_t size = (uint64_t)s[0].meta.n_seqs * (uint64_t)s[0].meta.ctx_len * 4;
    kld_status st = KLD_OK;
    int f0 = open(p0, O_RDONLY | O_CLOEXEC);
    for (size_t i = 1; i < n && !st; i++) {
        kld_dumpi_path(pi, s[i].dir, KLD_DUMPI_TOKENS);
        int fi = open(pi, O_RDONLY | O_CLOEXEC);
        for (uint64_t off = 0; off < size && !st; off += COPY_BLOCK) {
            uint64_t m = size - off < COPY_BLOCK ? size - off : COPY_BLOCK;
            if (f0 < 0 || fi < 0 || kld_dumpi_pread(f0, a, m, off) != (int64_t)m ||
                kld_dumpi_pread(fi, b, m, off) != (int64_t)m)
                st = kld_fail(err, KLD_ERR_IO, "%s: cannot read: %s", f0 < 0 ? p0 : pi, strerror(errno));
            else if (memcmp(a, b, (size_t)m))
                st = kld_fail(err, KLD_ERR_MISMATCH, "%s differs from %s (near byte %llu): the shards "
                              "were not cut from the same tokens", pi, p0, (unsigned long long)off);
        }
        if (fi >= 0) close(fi);
    }
    if (f0 >= 0) close(f0);
    free(a);
    return st;
}

static kld_status copy_file(const char *from, const char *to, uint8_t *buf, kld_error *err) {
    int in = open(from, O_RDONLY | O_CLOEXEC);
    if (in < 0) return kld_fail(err, KLD_ERR_IO, "%s: cannot open: %s", from, strerror(errno));
    int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0) {
        int e = errno;
        close(in);
        return kld_fail(err, KLD_ERR_IO, "%s: cannot create: %s", to, strerror(e));
    }
    kld_status st = KLD_OK;
    for (uint64_t off = 0;; off += COPY_BLOCK) {
        int64_t got = kld_dumpi_pread(in, buf, COPY_BLOCK, off);
        if (got < 0) st = kld_fail(err, KLD_ERR_IO, "%s: read failed: %s", from, strerror(errno));
        else if (got > 0 && !kld_dumpi_pwrite(out, buf, (uint64_t)got, off))
            st = kld_fail(err, KLD_ERR_IO, "%s: write failed: %s", to, strerror(errno));
        if (st || got < (int64_t)COPY_BLOCK) break;
    }
    close(in);
    if (!st && fsync(out) != 0) st = kld_fail(err, KLD_ERR_IO, "%s: fsync failed: %s", to, strerror(errno));
    if (close(out) != 0 && !st) st = kld_fail(err, KLD_ERR_IO, "%s: close failed: %s", to, strerror(errno));
    return st;
}

static kld_status make_out_dir(const char *out, kld_error *err) {
    if (strlen(out) > KLD_DUMPI_DIR_MAX) return kld_fail(err, KLD_ERR_ARG, "%.80s...: path too long", out);
    if (mkdir(out, 0777) == 0) return KLD_OK;
    if (errno != EEXIST)
        return kld_fail(err, KLD_ERR_IO, "%s: cannot create directory: %s", out, strerror(errno));
    /* an existing directory must be empty: a merged dump never mixes with other files */
    DIR *dp = opendir(out);
    bool empty = dp != NULL;
    for (struct dirent *e; dp && (e = readdir(dp)) != NULL;)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) empty = false;
    if (dp) closedir(dp);
    if (empty) return KLD_OK;
    return kld_fail(err, KLD_ERR_ARG, "%s: exists and is not empty (the merged dump needs a new or "
                    "empty directory)", out);
}

/* The merged manifest: the shards' (its key order) without "shard", created
 * the earliest shard's, and "merged". */
static json_t *merged_manifest(const shard_in *s, size_t n) {
    json_t *o = json_deep_copy(s[0].root);
    if (!o) return NULL;
    json_object_del(o, "shard");
    const char *first = s[0].meta.created;
    for (size_t i = 1; i < n; i++)
        if (s[i].meta.created && (!first || strcmp(s[i].meta.created, first) < 0)) first = s[i].meta.created;
    if (first) json_object_set_new(o, "created", json_string(first));
    json_object_set_new(o, "merged", json_pack("{s:s,s:i,s:s}", "eval_hash", s[0].hash, "shards",
                                               (int)s[0].n, "mode", s[0].range ? "range" : "mod"));
    return o;
}

static kld_status write_merged(const char *out, const shard_in *s, size_t n, shard_in **by_k,
                               kld_error *err) {
    kld_status st = make_out_dir(out, err);
    if (st) return st;
    uint8_t *buf = malloc(COPY_BLOCK);
    if (!buf) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    char from[KLD_DUMPI_PATH_MAX], to[KLD_DUMPI_PATH_MAX];
    kld_dumpi_path(from, s[0].dir, KLD_DUMPI_TOKENS);
    kld_dumpi_path(to, out, KLD_DUMPI_TOKENS);
    st = copy_file(from, to, buf, err);
    const kld_dump_meta *m = &s[0].meta;
    uint32_t k = 0;
    for (int64_t g = 0; g < m->n_seqs && !st; g++) {
        if (!s[0].range) k = (uint32_t)((uint64_t)g % s[0].n);
        else
            while (!kld_partial_shard_has(k, s[0].n, 1, (uint64_t)g, (uint64_t)m->n_seqs)) k++;
        for (int ext = 0; ext <= (int)m->ext && !st; ext++) {
            kld_dumpi_seq_path(from, by_k[k]->dir, g, ext);
            kld_dumpi_seq_path(to, out, g, ext);
            st = copy_file(from, to, buf, err);
        }
    }
    free(buf);
    if (st) return st;
    json_t *man = merged_manifest(s, n);
    if (!man) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", out);
    st = kld_dumpi_write_json(out, KLD_DUMPI_MANIFEST, man, err);
    json_decref(man);
    return st;
}

static void fill_info(const shard_in *s, size_t n, kld_dump_merge_info *info) {
    const kld_dump_meta *m = &s[0].meta;
    info->n_shards = s[0].n;
    snprintf(info->mode, sizeof info->mode, "%s", s[0].range ? "range" : "mod");
    snprintf(info->eval_hash, sizeof info->eval_hash, "%s", s[0].hash);
    snprintf(info->model, sizeof info->model, "%s", m->model);
    info->n_seqs = m->n_seqs;
    info->records = m->n_seqs * m->positions_per_seq;
    info->format_version = m->format_version;
    info->top_k = m->top_k;
    info->candidate = m->candidate;
    for (size_t i = 0; i < n; i++) {
        info->parts[i].dir = s[i].dir;
        info->parts[i].k = s[i].k;
        info->parts[i].n_windows = (uint64_t)s[i].n_windows;
        snprintf(info->parts[i].created, sizeof info->parts[i].created, "%s",
                 s[i].meta.created ? s[i].meta.created : "");
    }
}

kld_status kld_dump_merge(const char *out, const char *const *dirs, size_t n,
                          kld_dump_merge_info *info, kld_error *err) {
    memset(info, 0, sizeof *info);
    if (n == 0) return kld_fail(err, KLD_ERR_ARG, "no dump shards to merge");
    shard_in *s = calloc(n, sizeof *s);
    info->parts = calloc(n, sizeof *info->parts);
    if (!s || !info->parts) {
        free(s);
        return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    }
    shard_in **by_k = NULL;
    kld_status st = KLD_OK;
    for (size_t i = 0; i < n && !st; i++) st = open_shard(dirs[i], &s[i], err);
    if (!st && !(by_k = calloc(s[0].n, sizeof *by_k))) st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n && !st; i++)
        if (!strcmp(dirs[i], out)) st = kld_fail(err, KLD_ERR_ARG, "%s: the output is one of the shards", out);
    if (!st) st = check_together(s, n, by_k, err);
    if (!st) st = same_tokens(s, n, err);
    if (!st) st = write_merged(out, s, n, by_k, err);
    if (!st) fill_info(s, n, info);
    for (size_t i = 0; i < n; i++) {
        json_decref(s[i].root);
        free(s[i].windows);
    }
    free(s);
    free(by_k);
    if (st) kld_dump_merge_info_free(info);
    return st;
}

void kld_dump_merge_info_free(kld_dump_merge_info *info) {
    free(info->parts);
    info->parts = NULL;
}
