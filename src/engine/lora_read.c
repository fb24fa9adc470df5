/* lora_read.c — the two LoRA adapter files as stored, paired into
 * (base weight, A, B) entries:
 *  - GGUF, as llama.cpp's convert_lora_to_gguf.py writes it: general.type
 *    "adapter", adapter.type "lora", adapter.lora.alpha (f32; absent → 0),
 *    tensors "<base GGUF name>.lora_a" / ".lora_b" (norm vectors, which
 *    llama.cpp skips, are skipped too);
 *  - PEFT: adapter_config.json (r, lora_alpha, target_modules) beside
 *    adapter_model.safetensors with "base_model.model.<HF name without
 *    .weight>.lora_A.weight" / ".lora_B.weight".
 * Names are mapped to the model's weights and shapes checked in lora.c. */
#include "engine/lora.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#define CONFIG_MAX_BYTES (16ull << 20)

void kld_lora_file_close(kld_lora_file *f) {
    if (!f) return;
    free(f->path);
    free(f->config_path);
    json_decref(f->config);
    kld_gguf_close(f->gguf);
    kld_safetensors_close(f->st);
    free(f->e);
    memset(f, 0, sizeof *f);
}

/* A base weight name an entry can hold whole (a cut name could pair two
 * weights' halves). */
static kld_status base_check(const kld_lora_file *f, const kld_tensor *t, size_t len, kld_error *err) {
    if (len == 0 || len >= sizeof ((kld_lora_entry *)0)->base)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: tensor '%s': the adapted weight's name is %s", f->path,
                        t->name, len ? "too long (at most 159 bytes)" : "empty");
    return KLD_OK;
}

/* The entry for base (created when new); NULL when out of memory. */
static kld_lora_entry *entry_for(kld_lora_file *f, const char *base, size_t len, size_t *cap) {
    for (size_t i = 0; i < f->n; i++)
        if (strlen(f->e[i].base) == len && !strncmp(f->e[i].base, base, len)) return &f->e[i];
    if (f->n == *cap) {
        size_t nc = *cap ? 2 * *cap : 32;
        kld_lora_entry *e = realloc(f->e, nc * sizeof *e);
        if (!e) return NULL;
        f->e = e;
        *cap = nc;
    }
    kld_lora_entry *e = &f->e[f->n++];
    memset(e, 0, sizeof *e);
    snprintf(e->base, sizeof e->base, "%.*s", (int)(len < sizeof e->base ? len : sizeof e->base - 1),
             base);
    return e;
}

static kld_status set_half(kld_lora_file *f, kld_lora_entry *e, const kld_tensor *t, bool is_a,
                           kld_error *err) {
    if (!e) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", f->path);
    const kld_tensor **slot = is_a ? &e->a : &e->b;
    if (*slot)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: tensor '%s': a second LoRA %s for '%s'", f->path,
                        t->name, is_a ? "A" : "B", e->base);
    *slot = t;
    return KLD_OK;
}

static kld_status check_pairs(const kld_lora_file *f, kld_error *err) {
    if (f->n == 0)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: no LoRA tensors (expected %s)", f->path,
                        f->peft ? "*.lora_A.weight / *.lora_B.weight" : "*.lora_a / *.lora_b");
    for (size_t i = 0; i < f->n; i++)
        if (!f->e[i].a || !f->e[i].b)
            return kld_fail(err, KLD_ERR_FORMAT, "%s: LoRA pair for '%s' has no %s tensor", f->path,
                            f->e[i].base, f->e[i].a ? "B (lora_b)" : "A (lora_a)");
    return KLD_OK;
}

static kld_status gguf_str_key(const kld_lora_file *f, const char *key, const char *want,
                               kld_error *err) {
    kld_str v;
    const kld_gguf_kv *kv = kld_gguf_find(f->gguf, key);
    if (kv && !kld_gguf_get_str(f->gguf, key, &v))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: key '%s' has type %s, expected the string '%s'", f->path,
                        key, kld_gguf_vtype_name(kv->value.type), want);
    if (!kv)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: key '%s' is missing (a LoRA adapter has %s = "
                        "'%s')", f->path, key, key, want);
    if (!kld_str_eq(v, want))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: key '%s' is '%.*s', expected '%s'", f->path, key,
                        (int)(v.len < 64 ? v.len : 64), v.ptr, want);
    return KLD_OK;
}

static kld_status open_gguf(const char *path, kld_lora_file *f, kld_error *err) {
    kld_status st = kld_gguf_open(path, &f->gguf, err);
    if (st) return st;
    if ((st = gguf_str_key(f, "general.type", "adapter", err)) ||
        (st = gguf_str_key(f, "adapter.type", "lora", err)))
        return st;
    const kld_gguf_kv *kv = kld_gguf_find(f->gguf, "adapter.lora.alpha");
    if (kv && !kld_gguf_get_float(f->gguf, "adapter.lora.alpha", &f->alpha))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: key 'adapter.lora.alpha' has type %s, expected a "
                        "number", path, kld_gguf_vtype_name(kv->value.type));
    if (kv && !isfinite(f->alpha))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: key 'adapter.lora.alpha' is %g, not a finite number",
                        path, f->alpha);
    f->has_alpha = kv != NULL;
    kld_str a;
    if (kld_gguf_get_str(f->gguf, "general.architecture", &a))
        snprintf(f->arch, sizeof f->arch, "%.*s", (int)(a.len < 63 ? a.len : 63), a.ptr);
    size_t cap = 0;
    for (uint64_t i = 0; i < f->gguf->n_tensors; i++) {
        const kld_tensor *t = &f->gguf->tensors[i];
        const size_t n = strlen(t->name);
        if (kld_ends_with(t->name, n, ".lora_a") || kld_ends_with(t->name, n, ".lora_b")) {
            const bool is_a = t->name[n - 1] == 'a';
            if ((st = base_check(f, t, n - 7, err)) ||
                (st = set_half(f, entry_for(f, t->name, n - 7, &cap), t, is_a, err)))
                return st;
        } else if (!kld_ends_with(t->name, n, "_norm.weight")) { /* llama.cpp skips norms too */
            return kld_fail(err, KLD_ERR_FORMAT, "%s: tensor '%s' is not a LoRA tensor (expected "
                            "'<base>.lora_a' or '<base>.lora_b')", path, t->name);
        }
    }
    return check_pairs(f, err);
}

static char *join(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static kld_status config_checks(kld_lora_file *f, kld_error *err) {
    const json_t *c = f->config, *v;
    const char *cp = f->config_path;
    if ((v = json_object_get(c, "peft_type")) && json_is_string(v) &&
        strcmp(json_string_value(v), "LORA"))
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: \"peft_type\" is '%.32s'; only LORA "
                        "adapters are read", cp, json_string_value(v));
    v = json_object_get(c, "r");
    if (!v)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: \"r\" (the LoRA rank) is missing", cp);
    if (!json_is_integer(v) || json_integer_value(v) < 1)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: \"r\" must be an integer >= 1 (got %s%" PRId64 ")",
                        cp, json_is_integer(v) ? "" : "a non-integer, ",
                        json_is_integer(v) ? (int64_t)json_integer_value(v) : (int64_t)0);
    f->r = (int64_t)json_integer_value(v);
    if ((v = json_object_get(c, "lora_alpha")) && !json_is_null(v)) {
        if (!json_is_number(v))
            return kld_fail(err, KLD_ERR_FORMAT, "%s: \"lora_alpha\" must be a number", cp);
        f->alpha = json_number_value(v);
        f->has_alpha = true;
    }
    static const char *const off[] = {"use_rslora", "use_dora", "fan_in_fan_out"};
    for (size_t i = 0; i < sizeof off / sizeof off[0]; i++)
        if (json_is_true(json_object_get(c, off[i])))
            return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: \"%s\": true is not supported (plain "
                            "LoRA W + s·(alpha/r)·B·A only)", cp, off[i]);
    static const char *const pats[] = {"rank_pattern", "alpha_pattern"};
    for (size_t i = 0; i < 2; i++)
        if ((v = json_object_get(c, pats[i])) && json_is_object(v) && json_object_size(v))
            return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: a non-empty \"%s\" is not supported", cp,
                            pats[i]);
    return KLD_OK;
}

/* The module name ("q_proj") of an HF weight name must be listed in
 * target_modules when it is a list (a string is PEFT's regex or
 * "all-linear" and is not checked). */
static kld_status target_check(const kld_lora_file *f, const kld_lora_entry *e, kld_error *err) {
    const json_t *tm = json_object_get(f->config, "target_modules");
    if (!json_is_array(tm)) return KLD_OK;
    const char *end = strrchr(e->base, '.'), *start = end;
    while (start && start > e->base && start[-1] != '.') start--;
    if (!end || !start) return KLD_OK;
    size_t i;
    const json_t *m;
    json_array_foreach(tm, i, m) {
        if (json_is_string(m) && strlen(json_string_value(m)) == (size_t)(end - start) &&
            !strncmp(json_string_value(m), start, (size_t)(end - start)))
            return KLD_OK;
    }
    return kld_fail(err, KLD_ERR_FORMAT, "%s: tensor for '%s': module '%.*s' is not in "
                    "\"target_modules\" of %s", f->path, e->base, (int)(end - start), start,
                    f->config_path);
}

static kld_status open_peft(const char *dir, kld_lora_file *f, kld_error *err) {
    f->config_path = join(dir, "adapter_config.json");
    f->path = join(dir, "adapter_model.safetensors");
    if (!f->config_path || !f->path) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", dir);
    f->peft = true;
    char *text = NULL;
    uint64_t size = 0;
    kld_status st = kld_read_file(f->config_path, CONFIG_MAX_BYTES, &text, &size, err);
    if (st) return st;
    json_error_t je;
    f->config = json_loadb(text, (size_t)size, JSON_REJECT_DUPLICATES, &je);
    free(text);
    if (!f->config || !json_is_object(f->config))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: not a JSON object%s%s", f->config_path,
                        f->config ? "" : ": ", f->config ? "" : je.text);
    if ((st = config_checks(f, err)) || (st = kld_safetensors_open(f->path, &f->st, err))) return st;
    static const char prefix[] = "base_model.model.";
    size_t cap = 0;
    for (size_t i = 0; i < f->st->n_tensors; i++) {
        const kld_tensor *t = &f->st->tensors[i];
        const char *name = t->name;
        if (!strncmp(name, prefix, sizeof prefix - 1)) name += sizeof prefix - 1;
        const size_t n = strlen(name);
        const bool is_a = kld_ends_with(name, n, ".lora_A.weight");
        if (strstr(name, "lora_embedding_"))
            return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: tensor '%s': LoRA on the token "
                            "embeddings is not supported", f->path, t->name);
        if (!is_a && !kld_ends_with(name, n, ".lora_B.weight"))
            return kld_fail(err, KLD_ERR_FORMAT, "%s: tensor '%s' is not a LoRA tensor (expected "
                            "'base_model.model.<module>.lora_A.weight' or '.lora_B.weight')",
                            f->path, t->name);
        if ((st = base_check(f, t, n - 14 ? n - 14 + 7 : 0, err))) return st; /* + ".weight" */
        char base[160];
        snprintf(base, sizeof base, "%.*s.weight", (int)(n - 14), name);
        kld_lora_entry *e = entry_for(f, base, strlen(base), &cap);
        if ((st = set_half(f, e, t, is_a, err)) || (st = target_check(f, e, err))) return st;
    }
    return check_pairs(f, err);
}

kld_status kld_lora_file_open(const char *path, kld_lora_file *f, kld_error *err) {
    memset(f, 0, sizeof *f);
    struct stat sb;
    if (stat(path, &sb) != 0)
        return kld_fail(err, KLD_ERR_IO, "%s: LoRA adapter not found", path);
    const size_t n = strlen(path);
    kld_status st;
    if (S_ISDIR(sb.st_mode)) {
        st = open_peft(path, f, err);
    } else if (kld_ends_with(path, n, "adapter_config.json") ||
               kld_ends_with(path, n, "adapter_model.safetensors")) {
        const char *slash = strrchr(path, '/');
        char *dir = slash ? kld_strndup(path, (size_t)(slash - path)) : kld_strdup(".");
        st = dir ? open_peft(dir, f, err) : kld_fail(err, KLD_ERR_NOMEM, "out of memory");
        free(dir);
    } else {
        f->path = kld_strdup(path);
        st = f->path ? open_gguf(path, f, err) : kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    }
    if (st) kld_lora_file_close(f);
    return st;
}
