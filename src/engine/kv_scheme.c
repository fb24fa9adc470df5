/* kv_scheme.c — the KV cache schemes' one dispatch point (kv_scheme.h):
 * names, row sizes, fit checks, store and load, for llama.cpp's block
 * types (through the type table), MLX groups and the rotated quantizer. */
#include "engine/kv_scheme.h"

#include "tensor/types.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static const uint32_t block_types[] = {KLD_TYPE_F32,  KLD_TYPE_F16,  KLD_TYPE_BF16,
                                       KLD_TYPE_Q8_0, KLD_TYPE_Q4_0, KLD_TYPE_Q4_1,
                                       KLD_TYPE_Q5_0, KLD_TYPE_Q5_1, KLD_TYPE_IQ4_NL};

static bool is_mlx(uint32_t id) { return (id & 0xF000u) == 0x1000u; }
static bool is_rot(uint32_t id) { return (id & 0xF000u) == 0x2000u; }
static int mlx_bits(uint32_t id) { return (int)((id >> 8) & 0xF); }
static int mlx_group(uint32_t id) { return (int)(id & 0xFF); }
static int rot_bits(uint32_t id) { return (int)(id & 0xF); }

bool kld_kv_scheme_is_block(uint32_t id) {
    for (size_t i = 0; i < sizeof block_types / sizeof block_types[0]; i++)
        if (block_types[i] == id) return true;
    return false;
}

/* A decimal number of [p, end) in 1..999; false otherwise. */
static bool small_number(const char *p, const char *end, int *out) {
    if (p == end || end - p > 3) return false;
    int v = 0;
    for (; p < end; p++) {
        if (*p < '0' || *p > '9') return false;
        v = v * 10 + (*p - '0');
    }
    *out = v;
    return v > 0;
}

bool kld_kv_scheme_parse(const char *name, size_t len, uint32_t *id) {
    const char *end = name + len;
    for (size_t i = 0; i < sizeof block_types / sizeof block_types[0]; i++) {
        const char *n = kld_type_info_get(block_types[i])->name;
        if (strlen(n) == len && !strncmp(n, name, len)) {
            *id = block_types[i];
            return true;
        }
    }
    int bits, group;
    if (len > 3 && !strncmp(name, "mlx", 3)) {
        const char *g = memchr(name + 3, 'g', len - 3);
        if (!g || !small_number(name + 3, g, &bits) || !small_number(g + 1, end, &group)) return false;
        if (bits != 2 && bits != 3 && bits != 4 && bits != 6 && bits != 8) return false;
        if (group != 32 && group != 64 && group != 128) return false;
        *id = KLD_KV_MLX(bits, group);
        return true;
    }
    if (len > 3 && !strncmp(name, "rot", 3)) {
        if (!small_number(name + 3, end, &bits) || bits > 8) return false;
        *id = KLD_KV_ROT(bits);
        return true;
    }
    return false;
}

const char *kld_kv_scheme_name(uint32_t id, char *buf, size_t size) {
    if (is_mlx(id)) snprintf(buf, size, "mlx%dg%d", mlx_bits(id), mlx_group(id));
    else if (is_rot(id)) snprintf(buf, size, "rot%d", rot_bits(id));
    else snprintf(buf, size, "%s", kld_type_info_get(id) ? kld_type_info_get(id)->name : "?");
    return buf;
}

const char *kld_kv_scheme_misfit(uint32_t id, int64_t n, char *buf, size_t size) {
    char nm[16];
    kld_kv_scheme_name(id, nm, sizeof nm);
    if (is_mlx(id)) {
        if (n % mlx_group(id) == 0) return NULL;
        snprintf(buf, size, "head size %" PRId64 " is not a multiple of the %s group (%d)", n, nm,
                 mlx_group(id));
        return buf;
    }
    if (is_rot(id)) {
        if (n % 8 == 0 && n <= KLD_KV_ROT_MAX_DIM) return NULL;
        snprintf(buf, size, "head size %" PRId64 " is not a multiple of 8 up to %d (%s)", n,
                 KLD_KV_ROT_MAX_DIM, nm);
        return buf;
    }
    const kld_type_info *ti = kld_type_info_get(id);
    if (n % ti->block_size == 0) return NULL;
    snprintf(buf, size, "head size %" PRId64 " is not a multiple of the %s block (%d)", n, nm,
             ti->block_size);
    return buf;
}

uint64_t kld_kv_row_bytes(uint32_t id, int64_t n) {
    if (is_mlx(id)) return kld_kv_mlx_row_bytes(mlx_bits(id), mlx_group(id), n);
    if (is_rot(id)) return kld_kv_rot_row_bytes(rot_bits(id), n);
    const kld_type_info *ti = kld_type_info_get(id);
    return (uint64_t)(n / ti->block_size) * (uint64_t)ti->type_size;
}

void kld_kv_store_row(uint32_t id, const float *x, void *dst, int64_t n) {
    if (is_mlx(id)) kld_kv_mlx_store(mlx_bits(id), mlx_group(id), x, dst, n);
    else if (is_rot(id)) kld_kv_rot_store(rot_bits(id), x, dst, n);
    else { /* the bytes ggml_cpy writes into llama.cpp's cache */
        const kld_type_info *ti = kld_type_info_get(id);
        (ti->quantize_row_cpy ? ti->quantize_row_cpy : ti->quantize_row)(x, dst, n);
    }
}

void kld_kv_load_rows(uint32_t id, const void *src, float *dst, int64_t rows, int64_t n) {
    if (is_mlx(id) || is_rot(id)) {
        const uint64_t rb = kld_kv_row_bytes(id, n);
        for (int64_t r = 0; r < rows; r++) {
            const uint8_t *s = (const uint8_t *)src + (uint64_t)r * rb;
            if (is_mlx(id)) kld_kv_mlx_load(mlx_bits(id), mlx_group(id), s, dst + r * n, n);
            else kld_kv_rot_load(rot_bits(id), s, dst + r * n, n);
        }
        return;
    }
    kld_type_kernels_of(kld_type_info_get(id))->to_float(src, dst, rows * n);
}
