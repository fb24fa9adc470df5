/* hf_index.c — sharded safetensors: model.safetensors.index.json maps every
 * tensor name to a shard file (weight_map). Every shard is opened and the
 * map is checked in both directions: each listed tensor is in the shard it
 * names, each shard tensor is listed, and no tensor is in two shards. */
#include "io/safetensors.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

/* Real index files are a few hundred KB even for the largest models. */
#define INDEX_MAX_BYTES (64ull << 20)

typedef struct named_tensor {
    const char *name;
    uint32_t file;
} named_tensor;

static int cmp_named(const void *a, const void *b) {
    const named_tensor *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    if (c) return c;
    return x->file < y->file ? -1 : x->file > y->file;
}

/* "dir/name" (dir of index_path, "." when it has none); NULL on OOM. */
static char *sibling_path(const char *index_path, const char *name) {
    const char *slash = strrchr(index_path, '/');
    size_t dlen = slash ? (size_t)(slash - index_path) : 1;
    const char *dir = slash ? index_path : ".";
    if (slash && dlen == 0) dlen = 1; /* "/x.json": the root folder */
    size_t n = dlen + 1 + strlen(name) + 1;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%.*s/%s", (int)dlen, dir, name);
    return p;
}

/* A shard must be a plain file name beside the index: no folders, so an
 * index cannot point outside the model directory. */
static bool plain_file_name(const char *s) {
    return *s && !strchr(s, '/') && !strchr(s, '\\') && strcmp(s, ".") != 0 &&
           strcmp(s, "..") != 0;
}

typedef struct index_ctx {
    const char *path;
    json_t *root;
    json_t *weight_map;
    const char **shards; /* distinct shard names, first-appearance order */
    size_t n_shards;
    named_tensor *sorted;
} index_ctx;

static kld_status load_index_json(index_ctx *c, kld_error *err) {
    char *text = NULL;
    uint64_t size = 0;
    kld_status s = kld_read_file(c->path, INDEX_MAX_BYTES, &text, &size, err);
    if (s != KLD_OK) return s;
    json_error_t jerr;
    c->root = json_loadb(text, (size_t)size, JSON_REJECT_DUPLICATES, &jerr);
    free(text);
    if (!c->root)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: JSON: %s (line %d, column %d)", c->path,
                        jerr.text, jerr.line, jerr.column);
    if (!json_is_object(c->root))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: not a JSON object", c->path);
    const json_t *meta = json_object_get(c->root, "metadata");
    if (meta && !json_is_object(meta))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: metadata is not a JSON object", c->path);
    c->weight_map = json_object_get(c->root, "weight_map");
    if (!c->weight_map)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: no weight_map", c->path);
    if (!json_is_object(c->weight_map))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: weight_map is not a JSON object", c->path);
    if (json_object_size(c->weight_map) == 0)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: weight_map is empty", c->path);
    return KLD_OK;
}

static kld_status collect_shards(index_ctx *c, kld_error *err) {
    c->shards = calloc(json_object_size(c->weight_map), sizeof *c->shards);
    if (!c->shards) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", c->path);
    const char *key;
    json_t *v;
    json_object_foreach(c->weight_map, key, v) {
        if (!json_is_string(v))
            return kld_fail(err, KLD_ERR_FORMAT, "%s: weight_map: tensor '%s': shard is not a string",
                            c->path, key);
        const char *shard = json_string_value(v);
        if (!plain_file_name(shard))
            return kld_fail(err, KLD_ERR_FORMAT,
                            "%s: weight_map: tensor '%s': shard '%s' is not a file name in the "
                            "index's folder",
                            c->path, key, shard);
        size_t i = 0;
        while (i < c->n_shards && strcmp(c->shards[i], shard) != 0) i++;
        if (i == c->n_shards) c->shards[c->n_shards++] = shard;
    }
    return KLD_OK;
}

static kld_status open_shards(index_ctx *c, kld_safetensors *st, kld_error *err) {
    st->files = calloc(c->n_shards, sizeof *st->files);
    if (!st->files) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", c->path);
    for (size_t i = 0; i < c->n_shards; i++) {
        char *p = sibling_path(c->path, c->shards[i]);
        if (!p) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", c->path);
        struct stat sb;
        if (stat(p, &sb) != 0) {
            kld_status s = kld_fail(err, KLD_ERR_FORMAT,
                                    "%s: weight_map names shard '%s', which does not exist (%s)",
                                    c->path, c->shards[i], p);
            free(p);
            return s;
        }
        kld_status s = kld_map_file(p, &st->files[i], err);
        free(p);
        if (s != KLD_OK) return s;
        st->n_files++;
        s = kld_safetensors_parse_into(st, st->files[i].data, st->files[i].size,
                                       st->files[i].path, (uint32_t)i, err);
        if (s != KLD_OK) return s;
    }
    return KLD_OK;
}

static kld_status cross_check(index_ctx *c, const kld_safetensors *st, kld_error *err) {
    size_t n = st->n_tensors;
    c->sorted = malloc((n ? n : 1) * sizeof *c->sorted);
    if (!c->sorted) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", c->path);
    for (size_t i = 0; i < n; i++)
        c->sorted[i] = (named_tensor){st->tensors[i].name, st->tensor_file[i]};
    qsort(c->sorted, n, sizeof *c->sorted, cmp_named);
    for (size_t i = 1; i < n; i++) {
        if (strcmp(c->sorted[i - 1].name, c->sorted[i].name) == 0)
            return kld_fail(err, KLD_ERR_FORMAT, "%s: tensor '%s' is in two shards, '%s' and '%s'",
                            c->path, c->sorted[i].name, c->shards[c->sorted[i - 1].file],
                            c->shards[c->sorted[i].file]);
    }
    const char *key;
    json_t *v;
    json_object_foreach(c->weight_map, key, v) {
        named_tensor probe = {key, 0};
        /* Names are unique now, so compare by name only. */
        size_t lo = 0, hi = n;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (strcmp(c->sorted[mid].name, probe.name) < 0) lo = mid + 1;
            else hi = mid;
        }
        const char *want = json_string_value(v);
        if (lo == n || strcmp(c->sorted[lo].name, key) != 0)
            return kld_fail(err, KLD_ERR_FORMAT,
                            "%s: weight_map puts tensor '%s' in shard '%s', which does not "
                            "contain it",
                            c->path, key, want);
        const char *have = c->shards[c->sorted[lo].file];
        if (strcmp(have, want) != 0)
            return kld_fail(err, KLD_ERR_FORMAT,
                            "%s: weight_map puts tensor '%s' in shard '%s', but it is in '%s'",
                            c->path, key, want, have);
    }
    for (size_t i = 0; i < n; i++) {
        if (!json_object_get(c->weight_map, st->tensors[i].name))
            return kld_fail(err, KLD_ERR_FORMAT, "%s: tensor '%s' of shard '%s' is not in weight_map",
                            c->path, st->tensors[i].name, c->shards[st->tensor_file[i]]);
    }
    return KLD_OK;
}

kld_status kld_safetensors_open_index(const char *index_path, kld_safetensors **out,
                                      kld_error *err) {
    *out = NULL;
    index_ctx c = {.path = index_path};
    kld_safetensors *st = calloc(1, sizeof *st);
    kld_status s = st ? KLD_OK : kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", index_path);
    if (s == KLD_OK) s = load_index_json(&c, err);
    if (s == KLD_OK) s = collect_shards(&c, err);
    if (s == KLD_OK) s = open_shards(&c, st, err);
    if (s == KLD_OK) s = cross_check(&c, st, err);
    free(c.sorted);
    free(c.shards);
    json_decref(c.root);
    if (s != KLD_OK) {
        kld_safetensors_close(st);
        return s;
    }
    *out = st;
    return KLD_OK;
}
