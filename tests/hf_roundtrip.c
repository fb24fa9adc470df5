/* hf_roundtrip.c — see hf_roundtrip.h. */
#include "hf_roundtrip.h"

#include "quant/quant.h"
#include "st_writer.h"
#include "test_forward_models.h"
#include "testlib.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int64_t hf_rt_key_int(const kld_gguf *g, const char *key, int64_t absent) {
    int64_t v = absent;
    if (!kld_gguf_get_int(g, key, &v)) v = absent;
    return v;
}

double hf_rt_key_num(const kld_gguf *g, const char *key, double absent) {
    double v = absent;
    if (!kld_gguf_get_float(g, key, &v)) v = absent;
    return v;
}

bool hf_rt_same_tensor(const kld_gguf *a, const kld_tensor *y) {
    const kld_tensor *x = kld_gguf_find_tensor(a, y->name);
    return x && x->type == y->type && x->nbytes == y->nbytes && x->n_dims == y->n_dims &&
           !memcmp(x->ne, y->ne, sizeof x->ne) && !memcmp(x->data, y->data, (size_t)y->nbytes);
}

/* Every tensor of b in a (the family's rule), and a holding no other. */
static void check_tensors(const hf_rt_family *f, const char *label, const kld_gguf *a, const kld_gguf *b) {
    uint64_t same = 0, merged = 0;
    for (uint64_t j = 0; j < b->n_tensors; j++) {
        const kld_tensor *y = &b->tensors[j];
        const bool eq = f->tensor_equal ? f->tensor_equal(a, y, &merged, f->ctx) : hf_rt_same_tensor(a, y);
        if (!eq) printf("%s: converted tensor %s differs or is missing\n", label, y->name);
        same += eq;
    }
    printf("%-28s converted: %" PRIu64 " of %" PRIu64 " tensors equal to the GGUF's (%" PRIu64 " written, %" PRIu64
           " merged into another)\n", label, same, b->n_tensors, a->n_tensors, merged);
    CHECK(same == b->n_tensors && a->n_tensors + merged == b->n_tensors,
          "%s: converted tensors (%" PRIu64 ") equal the synthesized GGUF's (%" PRIu64 " of %" PRIu64 ", %" PRIu64
          " merged)", label, a->n_tensors, same, b->n_tensors, merged);
}

static bool has_prefix(const kld_str *k, const char *prefix, size_t lp) {
    return (size_t)k->len > lp && !strncmp(k->ptr, prefix, lp);
}

/* Every key of b under prefix equal in a, and a writing none of its own. */
static void check_keys(const char *label, const kld_gguf *a, const kld_gguf *b, const char *prefix, int min_keys) {
    const size_t lp = strlen(prefix);
    int n_keys = 0, n_same = 0, n_conv = 0;
    for (uint64_t i = 0; i < b->n_kv; i++) {
        if (!has_prefix(&b->kv[i].key, prefix, lp)) continue;
        char key[160];
        snprintf(key, sizeof key, "%.*s", (int)b->kv[i].key.len, b->kv[i].key.ptr);
        n_keys++;
        const bool ok = hf_same_key(a, b, key);
        n_same += ok;
        if (!ok) printf("%s: converted key %s differs\n", label, key);
    }
    for (uint64_t i = 0; i < a->n_kv; i++) {
        if (!has_prefix(&a->kv[i].key, prefix, lp)) continue;
        n_conv++;
        char key[160];
        snprintf(key, sizeof key, "%.*s", (int)a->kv[i].key.len, a->kv[i].key.ptr);
        if (!kld_gguf_find(b, key)) printf("%s: extra key %s\n", label, key);
    }
    printf("%-28s converted: %d of %d %s* keys equal to the GGUF's (%d written)\n", label, n_same, n_keys, prefix,
           n_conv);
    CHECK(n_keys >= min_keys && n_same == n_keys && n_conv == n_keys,
          "%s: converted keys equal the GGUF's (%d of %d, %d written)", label, n_same, n_keys, n_conv);
}

void hf_rt_check(const hf_rt_family *f, const char *label, const char *gguf, const char *hf, const char *out,
                 const int32_t *ids, int n_ids) {
    kld_error err = {0};
    kld_quantize_opts qo = {.n_threads = 2};
    CHECK_OK(kld_quantize_file(hf, out, "keep", &qo, NULL, &err), err);
    kld_gguf *a = NULL, *b = NULL;
    CHECK_OK(kld_gguf_open(out, &a, &err), err);
    CHECK_OK(kld_gguf_open(gguf, &b, &err), err);
    if (!a || !b) {
        kld_gguf_close(a);
        kld_gguf_close(b);
        return;
    }
    check_tensors(f, label, a, b);
    if (f->key_prefix) check_keys(label, a, b, f->key_prefix, f->min_keys);
    if (f->keys) f->keys(label, a, b, f->ctx);
    kld_gguf_close(a);
    kld_gguf_close(b);
    if (!ids) return;
    int64_t nv = 0;
    float *x = tf_engine_logits(hf, ids, n_ids, 16, 2, &nv), *y = tf_engine_logits(out, ids, n_ids, 16, 2, &nv);
    CHECK(x && y && memcmp(x, y, sizeof(float) * (size_t)((int64_t)n_ids * nv)) == 0,
          "%s: HF and its converted GGUF give the same logits bit for bit", label);
    free(x);
    free(y);
}
