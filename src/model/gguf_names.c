/* gguf_names.c — the tables of gguf_names.h and the functions that spell a
 * name from them. */
#include "model/gguf_names.h"

#include <stdio.h>
#include <string.h>

static const char *const tensor_patterns[KLD_T_COUNT] = {
    "",
#define KLD_X(id, name) name,
    KLD_GGUF_TENSOR_LIST(KLD_X)
#undef KLD_X
};

static const char *const arch_key_suffixes[KLD_K_COUNT] = {
#define KLD_X(id, suffix) suffix,
    KLD_GGUF_ARCH_KEY_LIST(KLD_X)
#undef KLD_X
};

const char *const kld_gguf_global_keys[] = {
#define KLD_X(key) key,
    KLD_GGUF_GLOBAL_KEY_LIST(KLD_X)
#undef KLD_X
    NULL,
};

const char *kld_tensor_pattern(kld_tensor_id id) {
    return (unsigned)id < KLD_T_COUNT ? tensor_patterns[id] : "";
}

const char *kld_tensor_suffix(kld_tensor_id id) {
    const char *p = kld_tensor_pattern(id);
    return strncmp(p, "blk.%d.", 7) == 0 ? p + 7 : p;
}

const char *kld_tn(char *buf, size_t cap, kld_tensor_id id, long long il, long long xid,
                   const char *kind) {
    const char *p = kld_tensor_pattern(id);
    char base[96];
    /* the patterns hold at most two %d (layer, expert) and nothing else */
    const char *first = strstr(p, "%d");
    if (!first) snprintf(base, sizeof base, "%s", p);
    else if (!strstr(first + 2, "%d"))
        snprintf(base, sizeof base, "%.*s%lld%s", (int)(first - p), p, il, first + 2);
    else {
        const char *second = strstr(first + 2, "%d");
        snprintf(base, sizeof base, "%.*s%lld%.*s%lld%s", (int)(first - p), p, il,
                 (int)(second - first - 2), first + 2, xid, second + 2);
    }
    if (kind) snprintf(buf, cap, "%s.%s", base, kind);
    else snprintf(buf, cap, "%s", base);
    return buf;
}

const char *kld_arch_key_suffix(kld_arch_key_id id) {
    return (unsigned)id < KLD_K_COUNT ? arch_key_suffixes[id] : "";
}

const char *kld_arch_key(char *buf, size_t cap, const char *arch, kld_arch_key_id id) {
    snprintf(buf, cap, "%s.%s", arch, kld_arch_key_suffix(id));
    return buf;
}
