/* kv_config.c — an MLX kv_config.json (mlx-optiq's per-layer KV cache
 * quantization, as the mlx-bun seed reads it into config.kvQuant) as a KV
 * map: a JSON array of {"layer_idx": L, "bits": B, "group_size": G}, one
 * entry per quantized layer; layers it does not list stay unquantized
 * (f32 here, the model dtype in MLX). Other keys of an entry are ignored.
 * The map is written compactly: the most common scheme S covers each run of
 * listed layers holding an S layer (blk:A-B=S, after the rules of the other
 * layers, which match first), f32 elsewhere. */
#include "engine/internal.h"
#include "engine/kv_scheme.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>

#define MAX_LAYER 100000

static kld_status entry_int(const char *path, size_t i, json_t *e, const char *key, int64_t *out,
                            kld_error *err) {
    json_t *v = json_object_get(e, key);
    if (!v)
        return kld_fail(err, KLD_ERR_FORMAT, "kv_config %s: entry %zu: missing key '%s' (an entry is "
                        "{\"layer_idx\": L, \"bits\": B, \"group_size\": G})", path, i, key);
    if (!json_is_integer(v)) {
        char *t = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
        kld_status st = kld_fail(err, KLD_ERR_FORMAT, "kv_config %s: entry %zu: key '%s' must be an "
                                 "integer, got %s", path, i, key, t ? t : "?");
        free(t);
        return st;
    }
    *out = json_integer_value(v);
    return KLD_OK;
}

static kld_status read_entries(const char *path, json_t *root, uint32_t *scheme, int64_t *n_layers,
                               kld_error *err) {
    if (!json_is_array(root) || json_array_size(root) == 0)
        return kld_fail(err, KLD_ERR_FORMAT, "kv_config %s: expected a non-empty JSON array of "
                        "{\"layer_idx\", \"bits\", \"group_size\"} entries", path);
    size_t i;
    json_t *e;
    json_array_foreach(root, i, e) {
        if (!json_is_object(e))
            return kld_fail(err, KLD_ERR_FORMAT, "kv_config %s: entry %zu is not an object", path, i);
        int64_t layer, bits, group;
        kld_status st = entry_int(path, i, e, "layer_idx", &layer, err);
        if (!st) st = entry_int(path, i, e, "bits", &bits, err);
        if (!st) st = entry_int(path, i, e, "group_size", &group, err);
        if (st) return st;
        if (layer < 0 || layer >= MAX_LAYER)
            return kld_fail(err, KLD_ERR_FORMAT, "kv_config %s: entry %zu: key 'layer_idx': %" PRId64
                            " is out of range [0, %d)", path, i, layer, MAX_LAYER);
        if (bits != 2 && bits != 3 && bits != 4 && bits != 6 && bits != 8)
            return kld_fail(err, KLD_ERR_FORMAT, "kv_config %s: entry %zu: key 'bits': %" PRId64
                            " is not one of 2, 3, 4, 6, 8", path, i, bits);
        if (group != 32 && group != 64 && group != 128)
            return kld_fail(err, KLD_ERR_FORMAT, "kv_config %s: entry %zu: key 'group_size': %" PRId64
                            " is not one of 32, 64, 128", path, i, group);
        if (scheme[layer])
            return kld_fail(err, KLD_ERR_FORMAT, "kv_config %s: entry %zu: key 'layer_idx': layer %"
                            PRId64 " is listed twice", path, i, layer);
        scheme[layer] = KLD_KV_MLX(bits, group);
        if (layer + 1 > *n_layers) *n_layers = layer + 1;
    }
    return KLD_OK;
}

static kld_status add_rule(kld_kv_map *m, const char *path, int64_t lo, int64_t hi, uint32_t t,
                           kld_error *err) {
    if (m->n_rules == KLD_KV_MAX_RULES)
        return kld_fail(err, KLD_ERR_ARG, "kv_config %s: the layer map needs more than %d blk: rules",
                        path, KLD_KV_MAX_RULES);
    m->rule[m->n_rules++] = (kld_kv_rule){lo, hi, t};
    return KLD_OK;
}

static kld_status build_map(const char *path, const uint32_t *scheme, int64_t nl, kld_kv_map *out,
                            kld_error *err) {
    /* the most common scheme (the first listed of equals) */
    uint32_t common = 0;
    int64_t best = 0;
    for (int64_t a = 0; a < nl; a++) {
        if (!scheme[a]) continue;
        int64_t c = 0;
        for (int64_t b = 0; b < nl; b++) c += scheme[b] == scheme[a];
        if (c > best) best = c, common = scheme[a];
    }
    kld_kv_map m = {.type = KLD_TYPE_F32};
    kld_status st = KLD_OK;
    for (int64_t a = 0; a < nl && !st;) { /* the other schemes' runs */
        int64_t b = a;
        while (b + 1 < nl && scheme[b + 1] == scheme[a]) b++;
        if (scheme[a] && scheme[a] != common) st = add_rule(&m, path, a, b, scheme[a], err);
        a = b + 1;
    }
    for (int64_t a = 0; a < nl && !st;) { /* runs of listed layers */
        int64_t b = a;
        bool has_common = scheme[a] == common;
        while (b + 1 < nl && (scheme[b + 1] != 0) == (scheme[a] != 0)) has_common |= scheme[++b] == common;
        if (scheme[a] && has_common) st = add_rule(&m, path, a, b, common, err);
        a = b + 1;
    }
    if (!st) *out = m;
    return st;
}

kld_status kld_kv_config_read(const char *path, kld_kv_map *out, int64_t *last_layer,
                              kld_error *err) {
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root)
        return kld_fail(err, je.line < 0 ? KLD_ERR_IO : KLD_ERR_FORMAT, "kv_config %s: %s (line %d)",
                        path, je.text, je.line);
    uint32_t *scheme = calloc(MAX_LAYER, sizeof *scheme);
    if (!scheme) {
        json_decref(root);
        return kld_fail(err, KLD_ERR_NOMEM, "kv_config %s: out of memory", path);
    }
    int64_t nl = 0;
    kld_status st = read_entries(path, root, scheme, &nl, err);
    if (!st) st = build_map(path, scheme, nl, out, err);
    if (!st) *last_layer = nl - 1;
    free(scheme);
    json_decref(root);
    return st;
}
