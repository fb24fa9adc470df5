/* levers.c — the session's runtime levers (engine.h): parsing
 * "NAME=VALUE,..." with errors that name the token and list what is valid,
 * a canonical text form for reports, and the check against a model. */
#include "engine/internal.h"
#include "engine/kv_scheme.h"
#include "engine/lora.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#define LEVER_NAMES "kv, kv_k, kv_v, act, kernels, attention, attn_block, noise, lora, kv_config, kv_start"
#define KV_TYPES KLD_KV_SCHEMES
static const char *const act_names[] = {"f32", "bf16", "f16", "q8"};
static const char *const kernels_names[] = {"auto", "ref", "simd"};
static const char *const attn_names[] = {"exact", "online"};

#define ATTN_BLOCK_DEFAULT 64

void kld_levers_default(kld_levers *l) {
    memset(l, 0, sizeof *l);
    l->kv_k.type = KLD_TYPE_F32;
    l->kv_v.type = KLD_TYPE_F32;
    l->act = KLD_ACT_F32;
    l->kernels = KLD_KERNELS_AUTO;
    l->attention = KLD_ATTN_EXACT;
    l->attn_block = ATTN_BLOCK_DEFAULT;
    l->lora_scale = 1.0f;
}

uint32_t kld_kv_map_type(const kld_kv_map *m, int64_t il) {
    for (int i = 0; i < m->n_rules; i++)
        if (il >= m->rule[i].lo && il <= m->rule[i].hi) return m->rule[i].type;
    return m->type;
}

static bool kv_type_of(const char *name, size_t len, uint32_t *out) {
    return kld_kv_scheme_parse(name, len, out);
}

static int enum_of(const char *const *names, int n, const char *v, size_t len) {
    for (int i = 0; i < n; i++)
        if (strlen(names[i]) == len && !strncmp(names[i], v, len)) return i;
    return -1;
}

/* Parses a non-negative layer index of [p, end). */
static bool parse_layer(const char *p, const char *end, int64_t *out) {
    if (p == end || (size_t)(end - p) > 9) return false;
    int64_t v = 0;
    for (; p < end; p++) {
        if (*p < '0' || *p > '9') return false;
        v = v * 10 + (*p - '0');
    }
    *out = v;
    return true;
}

/* One item of a KV map: "TYPE" (the default, once) or "blk:A[-B]=TYPE"
 * (ranges may not overlap: which type a layer gets must not depend on the
 * order of the rules). *has_default: a default type was given already. */
static kld_status kv_item(kld_kv_map *m, bool *has_default, const char *lever, const char *tok,
                          size_t len, kld_error *err) {
    const char *end = tok + len;
    if (len == 0)
        return kld_fail(err, KLD_ERR_ARG, "lever %s: empty value (valid: " KV_TYPES ", or "
                        "blk:A-B=TYPE per layer)", lever);
    if (len >= 4 && !strncmp(tok, "blk:", 4)) {
        const char *eq = memchr(tok, '=', len), *range = tok + 4;
        if (!eq)
            return kld_fail(err, KLD_ERR_ARG, "lever %s: '%.*s' needs a type: blk:A-B=TYPE (TYPE: "
                            KV_TYPES ")", lever, (int)len, tok);
        const char *dash = memchr(range, '-', (size_t)(eq - range));
        int64_t lo, hi;
        if (!parse_layer(range, dash ? dash : eq, &lo) ||
            !parse_layer(dash ? dash + 1 : range, eq, &hi) || hi < lo)
            return kld_fail(err, KLD_ERR_ARG, "lever %s: '%.*s': layer range must be blk:A or "
                            "blk:A-B with 0 <= A <= B", lever, (int)len, tok);
        for (int i = 0; i < m->n_rules; i++)
            if (lo <= m->rule[i].hi && m->rule[i].lo <= hi)
                return kld_fail(err, KLD_ERR_ARG, "lever %s: '%.*s' overlaps blk:%" PRId64 "-%" PRId64
                                " (each layer may be named once)", lever, (int)len, tok,
                                m->rule[i].lo, m->rule[i].hi);
        uint32_t t;
        if (!kv_type_of(eq + 1, (size_t)(end - eq - 1), &t))
            return kld_fail(err, KLD_ERR_ARG, "lever %s: '%.*s': unknown KV cache type '%.*s' "
                            "(valid: " KV_TYPES ")", lever, (int)len, tok, (int)(end - eq - 1), eq + 1);
        if (m->n_rules == KLD_KV_MAX_RULES)
            return kld_fail(err, KLD_ERR_ARG, "lever %s: more than %d blk: rules", lever,
                            KLD_KV_MAX_RULES);
        m->rule[m->n_rules++] = (kld_kv_rule){lo, hi, t};
        return KLD_OK;
    }
    if (*has_default)
        return kld_fail(err, KLD_ERR_ARG, "lever %s: '%.*s' is a second default type (give one "
                        "TYPE and blk:A-B=TYPE rules; valid types: " KV_TYPES ")", lever, (int)len, tok);
    if (!kv_type_of(tok, len, &m->type))
        return kld_fail(err, KLD_ERR_ARG, "lever %s: unknown KV cache type '%.*s' (valid: " KV_TYPES
                        ", or blk:A-B=TYPE per layer)", lever, (int)len, tok);
    *has_default = true;
    return KLD_OK;
}

/* The levers other than the KV maps; `seen` bits are their index + 2
 * (bits 0 and 1: kv_k, kv_v). */
static const struct {
    const char *name, *valid;
} simple[] = {{"act", "f32, bf16, f16, q8"},
              {"kernels", "auto, ref, simd"},
              {"attention", "exact, online"},
              {"attn_block", "a multiple of 16 in 16..4096"},
              {"noise", "none, bf16"},
              {"lora", "ADAPTER[:SCALE] (a GGUF or PEFT LoRA adapter)"},
              {"kv_config", "the path of an MLX kv_config.json"},
              {"kv_start", "a position 0..999999999"}};
enum { LV_ACT, LV_KERNELS, LV_ATTENTION, LV_ATTN_BLOCK, LV_NOISE, LV_LORA, LV_KV_CONFIG, LV_KV_START, LV_N };

static kld_status simple_lever(kld_levers *l, int which, const char *v, size_t vlen,
                               kld_error *err) {
    const char *name = simple[which].name, *valid = simple[which].valid;
    if (vlen == 0)
        return kld_fail(err, KLD_ERR_ARG, "lever %s: empty value (valid: %s)", name, valid);
    int i = -1;
    switch (which) {
    case LV_ACT:
        if ((i = enum_of(act_names, 4, v, vlen)) >= 0) l->act = (kld_act_round)i;
        break;
    case LV_KERNELS:
        if ((i = enum_of(kernels_names, 3, v, vlen)) >= 0) l->kernels = (kld_kernels_choice)i;
        break;
    case LV_ATTENTION:
        if ((i = enum_of(attn_names, 2, v, vlen)) >= 0) l->attention = (kld_attn_mode)i;
        break;
    case LV_ATTN_BLOCK: {
        int64_t b;
        if (!parse_layer(v, v + vlen, &b) || b < 16 || b > 4096 || b % 16)
            return kld_fail(err, KLD_ERR_ARG, "lever attn_block: '%.*s' must be %s", (int)vlen, v,
                            valid);
        l->attn_block = (int)b;
        return KLD_OK;
    }
    case LV_KV_START: {
        int64_t n;
        if (!parse_layer(v, v + vlen, &n))
            return kld_fail(err, KLD_ERR_ARG, "lever kv_start: '%.*s' must be %s", (int)vlen, v, valid);
        l->kv_start = n;
        return KLD_OK;
    }
    case LV_KV_CONFIG: {
        char path[4096];
        if (vlen >= sizeof path)
            return kld_fail(err, KLD_ERR_ARG, "lever kv_config: expected %s", valid);
        snprintf(path, sizeof path, "%.*s", (int)vlen, v);
        kld_kv_map map;
        int64_t last = 0;
        kld_status st = kld_kv_config_read(path, &map, &last, err);
        if (st) return st;
        l->kv_k = l->kv_v = map;
        const size_t n = strlen(path) < sizeof l->kv_config ? strlen(path) : sizeof l->kv_config - 1;
        memcpy(l->kv_config, path, n); /* only for messages: a longer path is cut */
        l->kv_config[n] = 0;
        l->kv_config_last = last;
        return KLD_OK;
    }
    case LV_LORA: {
        char spec[KLD_LORA_PATH_MAX + 64];
        if (vlen >= sizeof spec)
            return kld_fail(err, KLD_ERR_ARG, "lever lora: value too long (%zu bytes)", vlen);
        snprintf(spec, sizeof spec, "%.*s", (int)vlen, v);
        kld_status st = kld_lora_spec_split(spec, l->lora_path, sizeof l->lora_path, &l->lora_scale, err);
        if (st) kld_error_prefix(err, "lever lora (lora=ADAPTER[:SCALE])");
        return st;
    }
    default: /* LV_NOISE */
        if ((i = enum_of((const char *const[]){"none", "bf16"}, 2, v, vlen)) >= 0)
            l->noise_bf16 = i == 1;
        break;
    }
    if (i < 0)
        return kld_fail(err, KLD_ERR_ARG, "lever %s: unknown value '%.*s' (valid: %s)", name,
                        (int)vlen, v, valid);
    return KLD_OK;
}

static int simple_of(const char *name, size_t nlen) {
    for (int i = 0; i < LV_N; i++)
        if (strlen(simple[i].name) == nlen && !strncmp(simple[i].name, name, nlen)) return i;
    return -1;
}

kld_status kld_levers_parse(const char *text, kld_levers *out, kld_error *err) {
    kld_levers l = *out;
    kld_kv_map *cur[2] = {NULL, NULL}; /* the KV maps a continuation item extends */
    bool has_default[2] = {false, false};
    const char *cur_name = NULL;
    unsigned seen = 0;
    if (!text || !*text)
        return kld_fail(err, KLD_ERR_ARG, "empty lever list (expected NAME=VALUE; levers: "
                        LEVER_NAMES ")");
    for (const char *p = text;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        size_t nlen = eq ? (size_t)(eq - p) : len;
        bool is_kv = eq && ((nlen == 2 && !strncmp(p, "kv", 2)) ||
                            (nlen == 4 && (!strncmp(p, "kv_k", 4) || !strncmp(p, "kv_v", 4))));
        bool is_blk = len >= 4 && !strncmp(p, "blk:", 4);
        kld_status st;
        if (len == 0) {
            return kld_fail(err, KLD_ERR_ARG, "lever list '%s': empty item (expected NAME=VALUE; "
                            "levers: " LEVER_NAMES ")", text);
        } else if (is_kv) {
            cur[0] = cur[1] = NULL;
            if (nlen == 2 || p[3] == 'k') cur[0] = &l.kv_k;
            if (nlen == 2 || p[3] == 'v') cur[1] = &l.kv_v;
            cur_name = nlen == 2 ? "kv" : p[3] == 'k' ? "kv_k" : "kv_v";
            for (int i = 0; i < 2; i++) {
                if (!cur[i]) continue;
                if (seen & (1u << i))
                    return kld_fail(err, KLD_ERR_ARG, "lever %s: '%.*s' sets %s a second time "
                                    "(kv sets both kv_k and kv_v; give each once)", cur_name,
                                    (int)len, p, i ? "kv_v" : "kv_k");
                seen |= 1u << i;
                *cur[i] = (kld_kv_map){.type = KLD_TYPE_F32};
                has_default[i] = false;
            }
            for (int i = 0; i < 2; i++)
                if (cur[i] && (st = kv_item(cur[i], &has_default[i], cur_name, eq + 1,
                                            len - nlen - 1, err)))
                    return st;
        } else if ((is_blk || !eq) && cur_name) {
            for (int i = 0; i < 2; i++)
                if (cur[i] && (st = kv_item(cur[i], &has_default[i], cur_name, p, len, err)))
                    return st;
        } else if (!eq) {
            return kld_fail(err, KLD_ERR_ARG, "lever '%.*s': expected NAME=VALUE (levers: "
                            LEVER_NAMES ")", (int)len, p);
        } else {
            cur_name = NULL;
            int which = simple_of(p, nlen);
            if (which < 0)
                return kld_fail(err, KLD_ERR_ARG, "unknown lever '%.*s' (valid levers: "
                                LEVER_NAMES ")", (int)nlen, p);
            if (seen & (1u << (which + 2)))
                return kld_fail(err, KLD_ERR_ARG, "lever %s: '%.*s' sets it a second time (valid "
                                "values: %s; give each lever once)", simple[which].name, (int)len,
                                p, simple[which].valid);
            seen |= 1u << (which + 2);
            /* kv_config sets both KV maps, as kv does */
            if (which == LV_KV_CONFIG) {
                if (seen & 3u)
                    return kld_fail(err, KLD_ERR_ARG, "lever kv_config: '%.*s' sets the KV maps a second "
                                    "time (kv, kv_k, kv_v and kv_config each set them; give one)", (int)len, p);
                seen |= 3u;
            }
            if ((st = simple_lever(&l, which, eq + 1, len - nlen - 1, err))) return st;
        }
        if (!comma) break;
        p = comma + 1;
    }
    /* the block size only exists for the online softmax */
    if ((seen & (1u << (LV_ATTN_BLOCK + 2))) && l.attention != KLD_ATTN_ONLINE)
        return kld_fail(err, KLD_ERR_ARG, "lever attn_block: applies to attention=online only "
                        "(this list has attention=exact; valid: attention=online,attn_block=N)");
    *out = l;
    return KLD_OK;
}

static bool map_is_f32(const kld_kv_map *m) {
    if (m->type != KLD_TYPE_F32) return false;
    for (int i = 0; i < m->n_rules; i++)
        if (m->rule[i].type != KLD_TYPE_F32) return false;
    return true;
}

bool kld_levers_is_reference(const kld_levers *l) {
    return map_is_f32(&l->kv_k) && map_is_f32(&l->kv_v) && l->act == KLD_ACT_F32 &&
           l->kernels == KLD_KERNELS_AUTO && l->attention == KLD_ATTN_EXACT && !l->noise_bf16 &&
           !l->lora_path[0];
}

static bool maps_equal(const kld_kv_map *a, const kld_kv_map *b) {
    if (a->type != b->type || a->n_rules != b->n_rules) return false;
    for (int i = 0; i < a->n_rules; i++)
        if (a->rule[i].lo != b->rule[i].lo || a->rule[i].hi != b->rule[i].hi ||
            a->rule[i].type != b->rule[i].type)
            return false;
    return true;
}

/* Appends to buf at *n, keeping it terminated (output truncates quietly). */
static void put(char *buf, size_t size, size_t *n, const char *fmt, ...) {
    if (*n + 1 >= size) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf + *n, size - *n, fmt, ap);
    va_end(ap);
    if (k > 0) *n += (size_t)k < size - *n ? (size_t)k : size - *n - 1;
}

static void put_map(char *buf, size_t size, size_t *n, const char *name, const kld_kv_map *m) {
    char nm[16];
    put(buf, size, n, "%s%s=", *n ? "," : "", name);
    for (int i = 0; i < m->n_rules; i++) {
        put(buf, size, n, "blk:%" PRId64, m->rule[i].lo);
        if (m->rule[i].hi != m->rule[i].lo) put(buf, size, n, "-%" PRId64, m->rule[i].hi);
        put(buf, size, n, "=%s,", kld_kv_scheme_name(m->rule[i].type, nm, sizeof nm));
    }
    put(buf, size, n, "%s", kld_kv_scheme_name(m->type, nm, sizeof nm));
}

void kld_levers_format(const kld_levers *l, char *buf, size_t size) {
    size_t n = 0;
    if (!size) return;
    buf[0] = 0;
    if (maps_equal(&l->kv_k, &l->kv_v)) {
        if (!map_is_f32(&l->kv_k)) put_map(buf, size, &n, "kv", &l->kv_k);
    } else {
        put_map(buf, size, &n, "kv_k", &l->kv_k);
        put_map(buf, size, &n, "kv_v", &l->kv_v);
    }
    if (l->kv_start) put(buf, size, &n, "%skv_start=%" PRId64, n ? "," : "", l->kv_start);
    if (l->act != KLD_ACT_F32) put(buf, size, &n, "%sact=%s", n ? "," : "", act_names[l->act]);
    if (l->kernels != KLD_KERNELS_AUTO)
        put(buf, size, &n, "%skernels=%s", n ? "," : "", kernels_names[l->kernels]);
    if (l->attention != KLD_ATTN_EXACT) {
        put(buf, size, &n, "%sattention=online", n ? "," : "");
        if (l->attn_block != ATTN_BLOCK_DEFAULT) put(buf, size, &n, ",attn_block=%d", l->attn_block);
    }
    if (l->noise_bf16) put(buf, size, &n, "%snoise=bf16", n ? "," : "");
    if (l->lora_path[0]) {
        put(buf, size, &n, "%slora=%s", n ? "," : "", l->lora_path);
        if (l->lora_scale != 1.0f) put(buf, size, &n, ":%.9g", (double)l->lora_scale);
    }
    if (n == 0) snprintf(buf, size, "reference");
}

static kld_status check_map(const kld_kv_map *m, const char *what, const kld_model *model, bool v,
                            kld_error *err) {
    const int64_t nl = model->hp.n_layer;
    for (int i = 0; i < m->n_rules; i++)
        if (m->rule[i].hi >= nl)
            return kld_fail(err, KLD_ERR_ARG, "lever %s: blk:%" PRId64 "-%" PRId64 " names layers "
                            "past the last layer %" PRId64 " of %s (valid: blk:0-%" PRId64 ")",
                            what, m->rule[i].lo, m->rule[i].hi, nl - 1, model->src->path, nl - 1);
    for (int64_t il = 0; il < nl; il++) {
        char why[160], nm[16];
        const uint32_t t = kld_kv_map_type(m, il);
        const int64_t head_dim = v ? kld_hp_head_dim_v(&model->hp, il) : kld_hp_head_dim(&model->hp, il);
        if (kld_kv_scheme_misfit(t, head_dim, why, sizeof why))
            return kld_fail(err, KLD_ERR_ARG, "lever %s=%s (layer %" PRId64 "): %s: %s; valid here: "
                            "f32, f16, bf16", what, kld_kv_scheme_name(t, nm, sizeof nm), il,
                            model->src->path, why);
    }
    return KLD_OK;
}

kld_status kld_levers_check(const kld_levers *l, const kld_model *model, kld_error *err) {
    kld_status st = kld_levers_check_layout(l, model, err);
    if (st == KLD_OK && l->lora_path[0]) { /* the adapter must bind to this model */
        kld_lora *lora = NULL;
        st = kld_lora_open(model, l->lora_path, l->lora_scale, &lora, err);
        if (st) kld_error_prefix(err, "lever lora");
        kld_lora_free(lora);
    }
    return st;
}

kld_status kld_levers_check_layout(const kld_levers *l, const kld_model *model, kld_error *err) {
    const int64_t nl = model->hp.n_layer;
    if (l->kv_config[0] && l->kv_config_last >= nl) /* before the map's blk: rules say it less well */
        return kld_fail(err, KLD_ERR_ARG, "lever kv_config: %s lists layer %" PRId64 ", past the "
                        "last layer %" PRId64 " of %s (valid layer_idx: 0-%" PRId64 ")", l->kv_config,
                        l->kv_config_last, nl - 1, model->src->path, nl - 1);
    const bool same = maps_equal(&l->kv_k, &l->kv_v);
    kld_status st = check_map(&l->kv_k, same ? "kv" : "kv_k", model, false, err);
    if (st == KLD_OK) st = check_map(&l->kv_v, same ? "kv" : "kv_v", model, true, err);
    if (st == KLD_OK && l->kernels == KLD_KERNELS_SIMD && !kld_engine_kernels_avx2())
        st = kld_fail(err, KLD_ERR_UNSUPPORTED, "lever kernels=simd: this CPU has no SIMD kernel "
                      "set (valid here: auto, ref)");
    return st;
}
