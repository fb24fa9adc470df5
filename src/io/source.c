/* source.c — opens any supported model path and detects its format:
 * a file with the GGUF magic; a .safetensors file (or anything whose first
 * bytes look like a safetensors header) or a model.safetensors.index.json;
 * a llama2.c checkpoint (.bin name, or a header that implies the file's
 * exact size); or a folder holding a Hugging Face model (config.json +
 * model.safetensors or model.safetensors.index.json) or a llama2.c model
 * (model.bin). config.json, tokenizer.json and tokenizer.bin beside the
 * weights are picked up. */
#include "io/source.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

/* HF config.json files are a few KB; anything near this is not one. */
#define CONFIG_MAX_BYTES (16ull << 20)

const char *kld_format_name(kld_format f) {
    switch (f) {
    case KLD_FORMAT_GGUF: return "gguf";
    case KLD_FORMAT_SAFETENSORS: return "safetensors";
    case KLD_FORMAT_LLAMA2C: return "llama2.c";
    }
    return "unknown";
}

static bool is_file(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static char *join(const char *dir, const char *name) {
    size_t n = strlen(dir) + 1 + strlen(name) + 1;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* The folder of a file path ("." when it has none). */
static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return kld_strdup(".");
    if (slash == path) return kld_strdup("/");
    return kld_strndup(path, (size_t)(slash - path));
}

/* Sets *out to dir/name when that file exists, else NULL. */
static kld_status optional_file(const char *dir, const char *name, char **out, kld_error *err) {
    *out = NULL;
    char *p = join(dir, name);
    if (!p) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", dir);
    if (is_file(p)) *out = p;
    else free(p);
    return KLD_OK;
}

static kld_status load_hf_config(kld_source *src, const char *path, kld_error *err) {
    char *text = NULL;
    uint64_t size = 0;
    kld_status s = kld_read_file(path, CONFIG_MAX_BYTES, &text, &size, err);
    if (s != KLD_OK) return s;
    json_error_t jerr;
    src->hf_config = json_loadb(text, (size_t)size, JSON_REJECT_DUPLICATES, &jerr);
    free(text);
    if (!src->hf_config)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: JSON: %s (line %d, column %d)", path, jerr.text,
                        jerr.line, jerr.column);
    if (!json_is_object(src->hf_config))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: config is not a JSON object", path);
    return KLD_OK;
}

/* config.json (required for a folder) and tokenizer.json beside the weights. */
static kld_status attach_hf_files(kld_source *src, bool config_required, kld_error *err) {
    char *cfg = NULL;
    kld_status s = optional_file(src->dir, "config.json", &cfg, err);
    if (s != KLD_OK) return s;
    if (!cfg && config_required)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: Hugging Face folder without config.json",
                        src->dir);
    if (cfg) {
        s = load_hf_config(src, cfg, err);
        free(cfg);
        if (s != KLD_OK) return s;
    }
    return optional_file(src->dir, "tokenizer.json", &src->hf_tokenizer_path, err);
}

static kld_status open_safetensors(kld_source *src, const char *file, bool index,
                                   bool config_required, kld_error *err) {
    src->format = KLD_FORMAT_SAFETENSORS;
    kld_status s = index ? kld_safetensors_open_index(file, &src->st, err)
                         : kld_safetensors_open(file, &src->st, err);
    if (s != KLD_OK) return s;
    src->n_tensors = src->st->n_tensors;
    src->tensors = src->st->tensors;
    for (size_t i = 0; i < src->st->n_files; i++) src->file_bytes += src->st->files[i].size;
    return attach_hf_files(src, config_required, err);
}

static kld_status open_llama2c(kld_source *src, const char *file, kld_error *err) {
    src->format = KLD_FORMAT_LLAMA2C;
    kld_status s = kld_llama2c_open(file, &src->l2c, err);
    if (s != KLD_OK) return s;
    src->n_tensors = src->l2c->n_tensors;
    src->tensors = src->l2c->tensors;
    src->file_bytes = src->l2c->file.size;
    return optional_file(src->dir, "tokenizer.bin", &src->l2c_tokenizer_path, err);
}

static kld_status open_gguf(kld_source *src, const char *file, kld_error *err) {
    src->format = KLD_FORMAT_GGUF;
    kld_status s = kld_gguf_open(file, &src->gguf, err);
    if (s != KLD_OK) return s;
    src->version = src->gguf->version;
    src->n_tensors = (size_t)src->gguf->n_tensors;
    src->tensors = src->gguf->tensors;
    src->file_bytes = src->gguf->file.size;
    return KLD_OK;
}

static kld_status open_dir(kld_source *src, kld_error *err) {
    static const char *const names[] = {"model.safetensors", "model.safetensors.index.json",
                                        "model.bin"};
    for (int i = 0; i < 3; i++) {
        char *p = join(src->dir, names[i]);
        if (!p) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", src->dir);
        kld_status s = KLD_OK;
        bool found = is_file(p);
        /* model.safetensors wins over an index, as in transformers. */
        if (found) s = i < 2 ? open_safetensors(src, p, i == 1, true, err)
                             : open_llama2c(src, p, err);
        free(p);
        if (found) return s;
    }
    /* a kldeval dump (or a shard of one) is a folder too: say what it is */
    char *manifest = join(src->dir, "manifest.json"), *seq = join(src->dir, "seq-0.bin");
    const bool dump = manifest && seq && is_file(manifest) && is_file(seq);
    free(manifest);
    free(seq);
    if (dump)
        return kld_fail(err, KLD_ERR_FORMAT,
                        "%s: a kldeval dump (manifest.json, seq-*.bin), not a model: it holds "
                        "distributions, no weights or hidden layers (kl takes it with "
                        "--reference-logits or --arm-logits)", src->dir);
    return kld_fail(err, KLD_ERR_FORMAT,
                    "%s: folder has no model.safetensors, model.safetensors.index.json or "
                    "model.bin",
                    src->dir);
}

/* Up to 16 leading bytes of a file (fewer for short files). */
static kld_status read_head(const char *path, uint8_t head[16], size_t *n, kld_error *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return kld_fail(err, KLD_ERR_IO, "%s: cannot open", path);
    *n = fread(head, 1, 16, f);
    fclose(f);
    return KLD_OK;
}

static kld_status open_file(kld_source *src, kld_error *err) {
    const char *path = src->path;
    uint8_t head[16] = {0};
    size_t n = 0;
    kld_status s = read_head(path, head, &n, err);
    if (s != KLD_OK) return s;
    if (n >= 4 && memcmp(head, "GGUF", 4) == 0) return open_gguf(src, path, err);
    if (ends_with(path, ".gguf")) return open_gguf(src, path, err); /* reports the bad magic */
    if (ends_with(path, ".safetensors")) return open_safetensors(src, path, false, false, err);
    if (ends_with(path, ".safetensors.index.json"))
        return open_safetensors(src, path, true, false, err);
    if (ends_with(path, ".bin")) return open_llama2c(src, path, err);
    /* No telling name: a safetensors header starts with a small length
     * followed by '{'; a llama2.c header must imply the exact file size. */
    if (n >= 9 && head[8] == '{' && kld_load_u64(head) <= KLD_SAFETENSORS_MAX_HEADER)
        return open_safetensors(src, path, false, false, err);
    kld_mapped_file mf;
    s = kld_map_file(path, &mf, err);
    if (s != KLD_OK) return s;
    bool l2c = kld_llama2c_detect(mf.data, mf.size);
    kld_unmap_file(&mf);
    if (l2c) return open_llama2c(src, path, err);
    return kld_fail(err, KLD_ERR_FORMAT,
                    "%s: unrecognised model format (not GGUF, safetensors, a Hugging Face "
                    "folder or a llama2.c checkpoint)",
                    path);
}

kld_status kld_source_open(const char *path, kld_source **out, kld_error *err) {
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0)
        return kld_fail(err, KLD_ERR_IO, "%s: no such file or folder", path);
    kld_source *src = calloc(1, sizeof *src);
    if (!src) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", path);
    src->path = kld_strdup(path);
    bool is_dir = S_ISDIR(sb.st_mode);
    src->dir = is_dir ? kld_strdup(path) : dir_of(path);
    if (is_dir && src->dir) /* "model/" -> "model", so joined paths read cleanly */
        for (size_t n = strlen(src->dir); n > 1 && src->dir[n - 1] == '/'; n--) src->dir[n - 1] = '\0';
    kld_status s;
    if (!src->path || !src->dir) s = kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", path);
    else if (is_dir) s = open_dir(src, err);
    else if (S_ISREG(sb.st_mode)) s = open_file(src, err);
    else s = kld_fail(err, KLD_ERR_IO, "%s: not a regular file or folder", path);
    if (s != KLD_OK) {
        kld_source_close(src);
        return s;
    }
    *out = src;
    return KLD_OK;
}

void kld_source_close(kld_source *src) {
    if (!src) return;
    kld_gguf_close(src->gguf);
    kld_safetensors_close(src->st);
    kld_llama2c_close(src->l2c);
    json_decref(src->hf_config);
    free(src->hf_tokenizer_path);
    free(src->l2c_tokenizer_path);
    free(src->path);
    free(src->dir);
    free(src);
}

const kld_tensor *kld_source_find(const kld_source *src, const char *name) {
    for (size_t i = 0; i < src->n_tensors; i++)
        if (strcmp(src->tensors[i].name, name) == 0) return &src->tensors[i];
    return NULL;
}

static bool in_file(const kld_mapped_file *f, const void *p, uint64_t n) {
    const uintptr_t a = (uintptr_t)p, b = (uintptr_t)f->data;
    return f->data && a >= b && n <= f->size && a - b <= f->size - n;
}

bool kld_source_maps(const kld_source *src, const void *p, uint64_t n) {
    if (src->gguf && in_file(&src->gguf->file, p, n)) return true;
    if (src->l2c && in_file(&src->l2c->file, p, n)) return true;
    for (size_t i = 0; src->st && i < src->st->n_files; i++)
        if (in_file(&src->st->files[i], p, n)) return true;
    return false;
}
