/* cap_shard.c — scale-out of `kldeval cap`: the shard partial (--shard K/N
 * --partial PART) and `kldeval merge` of capability partials.
 *
 * A partial is two lines of JSON. Line 1, compact, keys in this order:
 *   schema     "kldeval.cap-partial/1" (first, so `merge` tells it by its
 *              opening bytes)
 *   shard      {k, n, mode}  (mode "mod": items i with i mod n = k; "range":
 *              [k T / n, (k+1) T / n) of a unit's T items)
 *   eval_hash  SHA-256 of the defining inputs (kld_cap_eval_hash)
 *   n_arms     1 or 2
 *   head, arm  the report's leading fields and the arm's name (or null)
 *   config     the run's config, with "shard"
 *   units      [{task, name, total, pos: [[i...] per arm], items: [[record...]
 *              per arm]}]: every record of the shard's items, in item order
 * Line 2: {"sha256": SHA-256 of line 1 and its newline} (corruption check).
 * Written under a temporary name, fsynced and renamed: a partial that exists
 * is complete. Reals are written with 17 significant digits, so a merge
 * rebuilds the single run's report exactly. */
#include "cap/cap.h"
#include "cap/units.h"
#include "eval/corpus.h"
#include "eval/merge.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define SCHEMA "kldeval.cap-partial/1"
#define DUMP_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(17))

void kld_cap_eval_hash(const json_t *config, uint8_t out[32]) {
    json_t *c = json_deep_copy(config);
    json_object_del(c, "data");
    kld_eval_hash(c, out); /* drops shard, threads and the models' paths */
    json_decref(c);
}

static void sha256_hex(const void *data, size_t n, char hex[65]) {
    uint8_t d[32];
    unsigned len = 0;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    EVP_DigestInit_ex(md, EVP_sha256(), NULL);
    EVP_DigestUpdate(md, data, n);
    EVP_DigestFinal_ex(md, d, &len);
    EVP_MD_CTX_free(md);
    kld_hex_digest(d, hex);
}

kld_status kld_cap_partial_write(const char *path, const kld_cap_unit *u, size_t n_units, int n_arms,
                                 const json_t *head, const json_t *arm, const json_t *config,
                                 kld_error *err) {
    const json_t *sh = json_object_get(config, "shard");
    json_t *units = json_array();
    for (size_t i = 0; i < n_units; i++) {
        json_t *pos = json_array(), *items = json_array();
        for (int a = 0; a < n_arms; a++) {
            json_array_append(pos, u[i].pos[a]);
            json_array_append(items, u[i].items[a]);
        }
        json_array_append_new(units, json_pack("{s:s, s:s, s:I, s:o, s:o}", "task", u[i].task, "name", u[i].name,
                                               "total", (json_int_t)u[i].total, "pos", pos, "items", items));
    }
    json_t *o = json_pack("{s:s, s:{s:O, s:O, s:O}, s:O, s:i, s:O, s:O?, s:O, s:o}", "schema", SCHEMA, "shard", "k",
                          json_object_get(sh, "k"), "n", json_object_get(sh, "n"), "mode",
                          json_object_get(sh, "mode"), "eval_hash", json_object_get(sh, "eval_hash"), "n_arms",
                          n_arms, "head", head, "arm", arm, "config", config, "units", units);
    char *text = o ? json_dumps(o, DUMP_FLAGS) : NULL;
    json_decref(o);
    if (!text) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory for the partial", path);
    size_t len = strlen(text);
    char hex[65], tmp[4200];
    text[len] = '\n'; /* hashed with its newline; the NUL is put back below */
    sha256_hex(text, len + 1, hex);
    text[len] = '\0';
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) return free(text), kld_fail(err, KLD_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
    bool ok = fprintf(f, "%s\n{\"sha256\":\"%s\"}\n", text, hex) > 0 && fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok = fclose(f) == 0 && ok;
    free(text);
    if (!ok || rename(tmp, path) != 0) {
        kld_fail(err, KLD_ERR_IO, "%s: cannot write the partial: %s", path, strerror(errno));
        unlink(tmp);
        return KLD_ERR_IO;
    }
    return KLD_OK;
}

bool kld_cap_is_partial(const char *path) {
    static const char prefix[] = "{\"schema\":\"kldeval.cap-partial/";
    char buf[sizeof prefix] = {0};
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    size_t n = fread(buf, 1, sizeof prefix - 1, f);
    fclose(f);
    return n == sizeof prefix - 1 && !memcmp(buf, prefix, n);
}

typedef struct part {
    const char *path;
    json_t *o;
    uint32_t k, n;
    kld_shard_mode mode;
    const char *hash;
} part;

/* Reads and checks one partial: the checksum, the schema and the fields. */
static kld_status read_part(const char *path, part *p, kld_error *err) {
    memset(p, 0, sizeof *p);
    p->path = path;
    char *text = NULL;
    size_t len = 0;
    kld_status st = kld_cap_read_file(path, &text, &len, err);
    if (st) return st;
    char *nl = memchr(text, '\n', len);
    json_error_t je;
    json_t *trail = nl ? json_loads(nl + 1, 0, &je) : NULL;
    const char *want = json_string_value(json_object_get(trail, "sha256"));
    char hex[65] = "";
    if (nl) sha256_hex(text, (size_t)(nl - text) + 1, hex);
    if (!want || strcmp(want, hex)) {
        json_decref(trail);
        free(text);
        return kld_fail(err, KLD_ERR_FORMAT, "%s: %s", path, want ? "checksum mismatch (corrupted or truncated)"
                                                                   : "no checksum line (not a complete capability partial)");
    }
    json_decref(trail);
    *nl = '\0';
    p->o = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    free(text);
    if (!p->o) return kld_fail(err, KLD_ERR_FORMAT, "%s: column %d: %s", path, je.column, je.text);
    const char *schema = json_string_value(json_object_get(p->o, "schema"));
    if (!schema || strcmp(schema, SCHEMA))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: schema '%s', expected " SCHEMA, path, schema ? schema : "(none)");
    const json_t *sh = json_object_get(p->o, "shard");
    json_int_t k = json_integer_value(json_object_get(sh, "k")), n = json_integer_value(json_object_get(sh, "n"));
    const char *mode = json_string_value(json_object_get(sh, "mode"));
    p->hash = json_string_value(json_object_get(p->o, "eval_hash"));
    if (n < 1 || n > 1000000 || k < 0 || k >= n || !mode || (strcmp(mode, "mod") && strcmp(mode, "range")) ||
        !p->hash || !json_is_array(json_object_get(p->o, "units")) || !json_is_object(json_object_get(p->o, "config")))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: malformed shard, eval_hash, units or config", path);
    p->k = (uint32_t)k;
    p->n = (uint32_t)n;
    p->mode = strcmp(mode, "mod") ? KLD_SHARD_RANGE : KLD_SHARD_MOD;
    return KLD_OK;
}

/* The part's records of one unit and arm hold exactly its shard's items. */
static kld_status check_unit(const part *p, const json_t *un, int n_arms, kld_error *err) {
    const char *name = json_string_value(json_object_get(un, "name"));
    json_int_t total = json_integer_value(json_object_get(un, "total"));
    const kld_shard s = {p->k, p->n, p->mode};
    for (int a = 0; a < n_arms; a++) {
        const json_t *pos = json_array_get(json_object_get(un, "pos"), (size_t)a);
        const json_t *items = json_array_get(json_object_get(un, "items"), (size_t)a);
        if (!json_is_array(pos) || !json_is_array(items) || json_array_size(pos) != json_array_size(items))
            return kld_fail(err, KLD_ERR_FORMAT, "%s: unit %s: item numbers and records do not pair up", p->path,
                            name ? name : "?");
        size_t j = 0;
        for (json_int_t i = 0; i < total; i++) {
            if (!kld_shard_has(&s, (uint64_t)i, (uint64_t)total)) continue;
            if (json_integer_value(json_array_get(pos, j)) != i || !json_is_integer(json_array_get(pos, j)))
                return kld_fail(err, KLD_ERR_MISMATCH, "%s: unit %s (%s): item %lld of its shard %u/%u is missing "
                                "or out of order", p->path, name ? name : "?", a ? "arm" : "ref", (long long)i, p->k, p->n);
            j++;
        }
        if (j != json_array_size(pos))
            return kld_fail(err, KLD_ERR_MISMATCH, "%s: unit %s (%s): %zu items, its shard %u/%u has %zu", p->path,
                            name ? name : "?", a ? "arm" : "ref", json_array_size(pos), p->k, p->n, j);
    }
    return KLD_OK;
}

/* The parts belong together and hold every shard once; by_k[k] is shard k. */
static kld_status check_parts(part *parts, size_t n, part **by_k, kld_error *err) {
    const part *p0 = &parts[0];
    json_t *c0 = json_deep_copy(json_object_get(p0->o, "config"));
    json_object_del(c0, "data");
    kld_status st = KLD_OK;
    for (size_t i = 1; i < n && st == KLD_OK; i++) {
        const part *p = &parts[i];
        if (strcmp(p->hash, p0->hash)) {
            json_t *c = json_deep_copy(json_object_get(p->o, "config"));
            json_object_del(c, "data");
            char why[300];
            kld_eval_first_difference(c, c0, why, sizeof why);
            json_decref(c);
            st = kld_fail(err, KLD_ERR_MISMATCH, "%s: belongs to another capability run than %s (the hashes of their "
                          "defining inputs differ: %s)", p->path, p0->path, why);
        } else if (p->n != p0->n || p->mode != p0->mode) {
            st = kld_fail(err, KLD_ERR_MISMATCH, "%s: shard %u/%u %s; %s is %u/%u %s (parts of one split only)", p->path,
                          p->k, p->n, kld_shard_mode_name(p->mode), p0->path, p0->k, p0->n, kld_shard_mode_name(p0->mode));
        } else if (!json_equal(json_object_get(p->o, "n_arms"), json_object_get(p0->o, "n_arms"))) {
            st = kld_fail(err, KLD_ERR_MISMATCH, "%s: model count differs from %s", p->path, p0->path);
        }
    }
    json_decref(c0);
    for (size_t i = 0; i < n && st == KLD_OK; i++) {
        if (by_k[parts[i].k])
            return kld_fail(err, KLD_ERR_MISMATCH, "%s and %s are both shard %u/%u (duplicated part)",
                            by_k[parts[i].k]->path, parts[i].path, parts[i].k, p0->n);
        by_k[parts[i].k] = &parts[i];
    }
    if (st) return st;
    char missing[512] = "";
    size_t n_missing = 0, len = 0;
    for (uint32_t k = 0; k < p0->n; k++) {
        if (by_k[k]) continue;
        if (n_missing++ < 16 && len < sizeof missing - 32)
            len += (size_t)snprintf(missing + len, sizeof missing - len, "%s%u/%u", len ? ", " : "", k, p0->n);
    }
    if (n_missing)
        return kld_fail(err, KLD_ERR_MISMATCH, "%zu of %u shards missing: %s%s (given: %zu parts starting with %s)",
                        n_missing, p0->n, missing, n_missing > 16 ? ", ..." : "", n, p0->path);
    /* every part: the same units and totals, and exactly its shard's items */
    const json_t *u0 = json_object_get(p0->o, "units");
    const int n_arms = (int)json_integer_value(json_object_get(p0->o, "n_arms"));
    if (n_arms != 1 && n_arms != 2) return kld_fail(err, KLD_ERR_FORMAT, "%s: n_arms must be 1 or 2", p0->path);
    for (size_t i = 0; i < n; i++) {
        const json_t *u = json_object_get(parts[i].o, "units");
        if (json_array_size(u) != json_array_size(u0))
            return kld_fail(err, KLD_ERR_MISMATCH, "%s: %zu task units, %s has %zu", parts[i].path, json_array_size(u),
                            p0->path, json_array_size(u0));
        for (size_t j = 0; j < json_array_size(u); j++) {
            const json_t *a = json_array_get(u, j), *b = json_array_get(u0, j);
            static const char *const keys[] = {"task", "name", "total"};
            for (int k = 0; k < 3; k++)
                if (!json_equal(json_object_get(a, keys[k]), json_object_get(b, keys[k])))
                    return kld_fail(err, KLD_ERR_MISMATCH, "%s: unit %zu's %s differs from %s's", parts[i].path, j,
                                    keys[k], p0->path);
            if (!json_is_string(json_object_get(a, "task")) || json_string_length(json_object_get(a, "task")) >= 16 ||
                !json_is_string(json_object_get(a, "name")) || json_string_length(json_object_get(a, "name")) >= 32 ||
                json_integer_value(json_object_get(a, "total")) < 0)
                return kld_fail(err, KLD_ERR_FORMAT, "%s: unit %zu: malformed task, name or total", parts[i].path, j);
            if ((st = check_unit(&parts[i], a, n_arms, err))) return st;
        }
    }
    return KLD_OK;
}

/* Unit j of the merged run: each item from the shard that holds it. */
static void assemble(part **by_k, uint32_t n_shards, size_t j, int n_arms, kld_cap_unit *u) {
    const json_t *u0 = json_array_get(json_object_get(by_k[0]->o, "units"), j);
    snprintf(u->task, sizeof u->task, "%s", json_string_value(json_object_get(u0, "task")));
    snprintf(u->name, sizeof u->name, "%s", json_string_value(json_object_get(u0, "name")));
    u->total = (size_t)json_integer_value(json_object_get(u0, "total"));
    size_t *next = calloc(n_shards, sizeof *next);
    for (int a = 0; a < n_arms; a++) {
        u->items[a] = json_array();
        u->pos[a] = json_array();
        memset(next, 0, n_shards * sizeof *next);
        for (size_t i = 0; next && i < u->total; i++) {
            uint32_t k = 0;
            kld_shard s = {0, n_shards, by_k[0]->mode};
            for (k = 0; k < n_shards; k++) {
                s.k = k;
                if (kld_shard_has(&s, i, u->total)) break;
            }
            const json_t *un = json_array_get(json_object_get(by_k[k]->o, "units"), j);
            json_array_append(u->items[a], json_array_get(json_array_get(json_object_get(un, "items"), (size_t)a), next[k]++));
            json_array_append_new(u->pos[a], json_integer((json_int_t)i));
        }
    }
    free(next);
}

kld_status kld_cap_merge(const char *const *paths, size_t n, json_t **report, kld_error *err) {
    *report = NULL;
    part *parts = calloc(n, sizeof *parts);
    if (!parts) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    kld_status st = KLD_OK;
    for (size_t i = 0; i < n && st == KLD_OK; i++) st = read_part(paths[i], &parts[i], err);
    part **by_k = NULL;
    if (st == KLD_OK) {
        by_k = calloc(parts[0].n, sizeof *by_k);
        st = by_k ? check_parts(parts, n, by_k, err) : kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    }
    if (st == KLD_OK) {
        const part *p0 = by_k[0];
        const json_t *units = json_object_get(p0->o, "units");
        const int n_arms = (int)json_integer_value(json_object_get(p0->o, "n_arms"));
        const size_t n_units = json_array_size(units);
        kld_cap_unit *u = calloc(n_units ? n_units : 1, sizeof *u);
        if (!u) st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
        for (size_t j = 0; u && j < n_units; j++) assemble(by_k, p0->n, j, n_arms, &u[j]);
        json_t *config = json_deep_copy(json_object_get(p0->o, "config"));
        json_object_del(config, "shard");
        json_t *arm = json_object_get(p0->o, "arm");
        json_t *rep = u ? kld_cap_build_report(u, n_units, n_arms, json_deep_copy(json_object_get(p0->o, "head")),
                                               json_is_string(arm) ? json_deep_copy(arm) : NULL, false, config)
                        : NULL;
        kld_cap_units_free(u, n_units);
        free(u);
        json_t *list = json_array();
        for (uint32_t k = 0; k < p0->n; k++)
            json_array_append_new(list, json_pack("{s:s, s:i}", "path", by_k[k]->path, "shard", (int)k));
        if (rep)
            json_object_set_new(rep, "merged", json_pack("{s:s, s:i, s:s, s:o}", "eval_hash", p0->hash, "shards",
                                                         (int)p0->n, "mode", kld_shard_mode_name(p0->mode), "parts", list));
        else
            json_decref(list);
        if (!rep && st == KLD_OK) st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
        *report = rep;
    }
    for (size_t i = 0; i < n; i++) json_decref(parts[i].o);
    free(parts);
    free(by_k);
    return st;
}
