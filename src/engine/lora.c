/* lora.c — a LoRA adapter bound to a model: every (A, B) pair of the file
 * matched to a bound weight by name (GGUF names, or PEFT's Hugging Face
 * names mapped as the HF→GGUF converter maps the base tensors), shapes
 * checked as llama.cpp's llama_adapter_lora_init checks them, A and B
 * converted to float32, and B's q/k rows permuted when the adapter's row
 * order (PEFT: rotate-half; GGUF: llama.cpp's interleaved permute) is not
 * the model's. The product itself runs beside the weight matmul
 * (kld_lora_apply): the weights are never modified, so sessions of one
 * load may run with and without an adapter. */
#include "engine/gemm.h"
#include "engine/internal.h"
#include "engine/lora.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

kld_status kld_lora_spec_split(const char *spec, char *path, size_t cap, float *scale,
                               kld_error *err) {
    *scale = 1.0f;
    const char *colon = strrchr(spec, ':');
    size_t len = strlen(spec);
    if (colon && colon[1]) {
        char *end = NULL;
        errno = 0;
        double v = strtod(colon + 1, &end);
        if (end && !*end && errno == 0) {
            if (!isfinite(v))
                return kld_fail(err, KLD_ERR_ARG, "LoRA '%s': scale '%s' is not finite", spec,
                                colon + 1);
            *scale = (float)v;
            len = (size_t)(colon - spec);
        }
    }
    if (len == 0) return kld_fail(err, KLD_ERR_ARG, "LoRA '%s': empty adapter path", spec);
    if (len >= cap) return kld_fail(err, KLD_ERR_ARG, "LoRA '%.64s…': path too long", spec);
    memcpy(path, spec, len);
    path[len] = 0;
    return KLD_OK;
}

void kld_lora_free(kld_lora *l) {
    if (!l) return;
    for (size_t i = 0; i < l->n; i++) {
        free((void *)l->pairs[i].a.data);
        free((void *)l->pairs[i].b.data);
    }
    free(l->pairs);
    free(l->spec);
    free(l->path);
    free(l->file);
    free(l->config_path);
    free(l);
}

/* The model's weight matrices under their GGUF and Hugging Face names. */
typedef struct wname {
    const kld_tensor *t;
    char gguf[96], hf[160];
} wname;

typedef struct wtable {
    const kld_hparams *hp;
    wname *w;
    size_t n, cap;
    bool oom;
} wtable;

static void add_weight(void *ctx, const kld_tensor *t, const char *name) {
    wtable *tb = ctx;
    if (tb->oom) return;
    if (tb->n == tb->cap) {
        size_t nc = tb->cap ? 2 * tb->cap : 64;
        wname *w = realloc(tb->w, nc * sizeof *w);
        if (!w) {
            tb->oom = true;
            return;
        }
        tb->w = w;
        tb->cap = nc;
    }
    wname *e = &tb->w[tb->n++];
    e->t = t;
    snprintf(e->gguf, sizeof e->gguf, "%s", name);
    kld_weights_hf_name(NULL, tb->hp, name, "", e->hf, sizeof e->hf);
}

static bool name_ends(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

/* Float32 copy of one adapter tensor (rows of ne[0] values). */
static kld_status to_f32(const kld_lora_file *f, const kld_tensor *t, kld_tensor *out,
                         kld_error *err) {
    const kld_type_info *ti = kld_type_info_get(t->type);
    const int64_t n = kld_tensor_nelements(t);
    if (!ti || !ti->to_float_ref || t->ne[0] % ti->block_size)
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: tensor '%s': type cannot be read as float",
                        f->path, t->name);
    float *d = aligned_alloc(64, ((size_t)n * sizeof(float) + 63) & ~(size_t)63);
    if (!d) return kld_fail(err, KLD_ERR_NOMEM, "%s: tensor '%s': out of memory", f->path, t->name);
    kld_type_kernels_of(ti)->to_float(t->data, d, n);
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(d[i])) {
            free(d);
            return kld_fail(err, KLD_ERR_FORMAT, "%s: tensor '%s'[%" PRId64 "] is not finite",
                            f->path, t->name, i);
        }
    *out = *t;
    out->type = KLD_TYPE_F32;
    out->n_dims = 2;
    out->data = d;
    out->nbytes = (uint64_t)n * sizeof(float);
    return KLD_OK;
}

/* B's rows between rotate-half (HF) and interleaved (GGUF) order: GGUF row
 * h·hd + 2i + j is HF row h·hd + j·hd/2 + i (llama.cpp's permute). */
bool kld_lora_permute_b(kld_tensor *b, int64_t n_head, bool to_gguf) {
    const int64_t r = b->ne[0], rows = b->ne[1], hd = rows / n_head;
    float *src = (float *)b->data, *tmp = malloc((size_t)(r * rows) * sizeof *tmp);
    if (!tmp) return false;
    memcpy(tmp, src, (size_t)(r * rows) * sizeof *tmp);
    for (int64_t h = 0; h < n_head; h++)
        for (int64_t i = 0; i < hd / 2; i++)
            for (int64_t j = 0; j < 2; j++) {
                const int64_t g = h * hd + 2 * i + j, f = h * hd + j * hd / 2 + i;
                memcpy(src + (to_gguf ? g : f) * r, tmp + (to_gguf ? f : g) * r,
                       (size_t)r * sizeof *tmp);
            }
    free(tmp);
    return true;
}

static kld_status bind_entry(const kld_model *m, const kld_lora_file *f, const wtable *tb,
                             const kld_lora_entry *e, float user_scale, kld_lora_pair *p,
                             kld_error *err) {
    const kld_hparams *hp = &m->hp;
    const wname *w = NULL;
    for (size_t i = 0; i < tb->n && !w; i++)
        if (!strcmp(f->peft ? tb->w[i].hf : tb->w[i].gguf, e->base)) w = &tb->w[i];
    if (!w || (!f->peft && !strcmp(e->base, "token_embd.weight")) ||
        (f->peft && !strcmp(e->base, "model.embed_tokens.weight"))) {
        if (w)
            return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: tensor '%s': LoRA on the token "
                            "embeddings is not supported", f->path, e->a->name);
        /* the model has it, but it is none of the matrices an adapter binds to */
        if (kld_source_find(m->src, e->base))
            return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: tensor '%s' adapts '%s' of %s: LoRA on it is "
                            "not supported (not on a mixture's routed experts, nor on a tensor split "
                            "on load such as Qwen3-Next's in_proj_qkvz)", f->path,
                            e->a->name, e->base, m->src->path);
        return kld_fail(err, KLD_ERR_FORMAT, "%s: tensor '%s' adapts '%s', which is not a weight "
                        "of %s (hint: another base model?)", f->path, e->a->name, e->base,
                        m->src->path);
    }
    const kld_tensor *W = w->t, *a = e->a, *b = e->b;
    if (W->n_dims > 2)
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: tensor '%s': base '%s' is a %d-D stack of "
                        "experts; LoRA on it is not supported (a mixture's routed experts take no "
                        "adapter)", f->path, a->name, w->gguf, W->n_dims);
    if (W->n_dims != 2 || W->ne[1] < 2)
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: tensor '%s': base '%s' is a vector; LoRA on "
                        "norms is not supported", f->path, a->name, w->gguf);
    const bool a2 = a->ne[2] == 1 && a->ne[3] == 1, b2 = b->ne[2] == 1 && b->ne[3] == 1;
    if (!a2 || !b2 || a->ne[0] != W->ne[0] || b->ne[1] != W->ne[1] || a->ne[1] != b->ne[0])
        return kld_fail(err, KLD_ERR_FORMAT, "%s: LoRA pair for '%s': A '%s' has shape [%" PRId64
                        ", %" PRId64 "] and B '%s' [%" PRId64 ", %" PRId64 "] (ggml order); the "
                        "weight [%" PRId64 ", %" PRId64 "] needs A [%" PRId64 ", r] and B [r, %"
                        PRId64 "]", f->path, w->gguf, a->name, a->ne[0], a->ne[1], b->name,
                        b->ne[0], b->ne[1], W->ne[0], W->ne[1], W->ne[0], W->ne[1]);
    const int64_t rank = b->ne[0];
    if (rank < 1)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: LoRA pair for '%s': rank 0", f->path, w->gguf);
    if (f->r && rank != f->r)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: LoRA pair for '%s' has rank %" PRId64 ", but "
                        "\"r\" is %" PRId64 " in %s", f->path, w->gguf, rank, f->r, f->config_path);
    kld_status st = to_f32(f, a, &p->a, err);
    if (!st) st = to_f32(f, b, &p->b, err);
    if (st) return st;
    p->w = W;
    snprintf(p->name, sizeof p->name, "%s", w->gguf);
    /* llama.cpp: alpha ? adapter_scale * alpha / rank : adapter_scale, in float */
    const float alpha = (float)f->alpha;
    p->scale = alpha != 0.0f ? user_scale * alpha / (float)rank : user_scale;
    /* q/k rows: PEFT files are in HF order, GGUF files in llama.cpp's */
    const bool model_gguf_order = hp->rope_type == KLD_ROPE_NORM && hp->sw.rope_type == KLD_ROPE_NORM;
    const bool model_hf_order = hp->rope_type != hp->sw.rope_type;
    const bool q = name_ends(w->gguf, "attn_q.weight"), k = name_ends(w->gguf, "attn_k.weight");
    if ((q || k) && ((f->peft && model_gguf_order) || (!f->peft && model_hf_order))) {
        const int64_t nh = q ? hp->n_head : hp->n_head_kv;
        if (nh < 1 || b->ne[1] % nh || (b->ne[1] / nh) % 2)
            return kld_fail(err, KLD_ERR_FORMAT, "%s: tensor '%s': %" PRId64 " rows are not %" PRId64
                            " heads of an even size", f->path, b->name, b->ne[1], nh);
        if (!kld_lora_permute_b(&p->b, nh, f->peft))
            return kld_fail(err, KLD_ERR_NOMEM, "%s: tensor '%s': out of memory", f->path, b->name);
    }
    return KLD_OK;
}

kld_status kld_lora_open(const kld_model *m, const char *spec, float scale, kld_lora **out,
                         kld_error *err) {
    *out = NULL;
    kld_lora_file f;
    kld_status st = kld_lora_file_open(spec, &f, err);
    if (st) return st;
    kld_lora *l = calloc(1, sizeof *l);
    wtable tb = {.hp = &m->hp};
    if (l) {
        l->path = kld_strdup(spec);
        l->file = kld_strdup(f.path);
        l->pairs = calloc(f.n, sizeof *l->pairs);
        kld_model_each_weight(m, add_weight, &tb);
    }
    if (!l || !l->path || !l->file || !l->pairs || tb.oom) {
        st = kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", spec);
    } else if (f.arch[0] && strcmp(f.arch, m->hp.arch)) {
        st = kld_fail(err, KLD_ERR_MISMATCH, "%s: general.architecture is '%s', the model %s is "
                      "'%s'", f.path, f.arch, m->src->path, m->hp.arch);
    }
    if (l) {
        l->user_scale = scale;
        l->alpha = f.alpha;
        l->has_alpha = f.has_alpha;
        l->peft = f.peft;
        if (f.config_path && !(l->config_path = kld_strdup(f.config_path)) && !st)
            st = kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", spec);
    }
    for (size_t i = 0; !st && i < f.n; i++) {
        st = bind_entry(m, &f, &tb, &f.e[i], scale, &l->pairs[l->n], err);
        if (!st) {
            for (size_t j = 0; j < l->n; j++)
                if (l->pairs[j].w == l->pairs[l->n].w)
                    st = kld_fail(err, KLD_ERR_FORMAT, "%s: two LoRA pairs adapt '%s'", f.path,
                                  f.e[i].base);
            l->n++;
            l->stored_bytes += f.e[i].a->nbytes + f.e[i].b->nbytes;
            l->n_params += (uint64_t)(kld_tensor_nelements(f.e[i].a) + kld_tensor_nelements(f.e[i].b));
        } else if (l->pairs[l->n].a.data) {
            l->n++; /* freed with the adapter */
        }
    }
    for (size_t i = 0; !st && i < l->n; i++) {
        if (l->pairs[i].b.ne[0] > l->max_rank) l->max_rank = l->pairs[i].b.ne[0];
        if (l->pairs[i].b.ne[1] > l->max_out) l->max_out = l->pairs[i].b.ne[1];
    }
    free(tb.w);
    kld_lora_file_close(&f);
    if (st) {
        kld_lora_free(l);
        return st;
    }
    *out = l;
    return KLD_OK;
}

uint64_t kld_lora_scratch_floats(const kld_lora *const *ls, int n, int64_t max_chunk) {
    int64_t r = 0, o = 0;
    for (int i = 0; i < n; i++) {
        if (ls[i]->max_rank > r) r = ls[i]->max_rank;
        if (ls[i]->max_out > o) o = ls[i]->max_out;
    }
    return (uint64_t)max_chunk * (uint64_t)(r + o);
}

void kld_lora_apply(kld_session *s, const kld_tensor *W, int64_t n, const float *A, int64_t lda,
                    float *C, int64_t ldc) {
    int64_t max_rank = 0;
    for (int k = 0; k < s->n_lora; k++)
        if (s->lora[k]->max_rank > max_rank) max_rank = s->lora[k]->max_rank;
    float *t = s->lora_buf, *d = s->lora_buf + s->max_chunk * max_rank;
    for (int k = 0; k < s->n_lora; k++) {
        const kld_lora *l = s->lora[k];
        const kld_lora_pair *p = NULL;
        for (size_t i = 0; i < l->n && !p; i++)
            if (l->pairs[i].w == W) p = &l->pairs[i];
        if (!p) continue;
        const int64_t r = p->b.ne[0], n_out = p->b.ne[1];
        kld_gemm_weights(s->pool, s->kr, &p->a, n, A, lda, t, r, s->scratch, s->scratch_stride);
        kld_gemm_weights(s->pool, s->kr, &p->b, n, t, r, d, n_out, s->scratch, s->scratch_stride);
        for (int64_t i = 0; i < n; i++) {
            float *c = C + i * ldc;
            const float *di = d + i * n_out;
            for (int64_t j = 0; j < n_out; j++) c[j] += p->scale * di[j];
        }
    }
}

/* "blk.3.attn_q.weight" → "attn_q"; "output.weight" → "output". */
static void weight_class(const char *name, char *out, size_t cap) {
    const char *s = name;
    if (!strncmp(s, "blk.", 4)) {
        const char *dot = strchr(s + 4, '.');
        if (dot) s = dot + 1;
    }
    size_t n = strlen(s);
    if (name_ends(s, ".weight")) n -= 7;
    snprintf(out, cap, "%.*s", (int)n, s);
}

static uint64_t file_size(const char *path) {
    struct stat sb;
    return path && stat(path, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

bool kld_model_adapter_facts(const kld_model *m, kld_adapter_facts *f) {
    memset(f, 0, sizeof *f);
    const kld_lora *l = m->lora;
    if (!l) return false;
    *f = (kld_adapter_facts){.spec = l->spec, .file = l->file, .config = l->config_path,
                             .peft = l->peft, .has_alpha = l->has_alpha, .alpha = l->alpha,
                             .user_scale = l->user_scale, .n_targets = l->n,
                             .n_params = l->n_params, .stored_bytes = l->stored_bytes,
                             .file_bytes = file_size(l->file) + file_size(l->config_path)};
    for (size_t i = 0; i < l->n; i++) {
        const kld_lora_pair *p = &l->pairs[i];
        const int64_t r = p->b.ne[0];
        if (!i || r < f->rank_min) f->rank_min = r;
        if (!i || r > f->rank_max) f->rank_max = r;
        if (!i || p->scale < f->scale_min) f->scale_min = p->scale;
        if (!i || p->scale > f->scale_max) f->scale_max = p->scale;
        char c[32];
        weight_class(p->name, c, sizeof c);
        int k = 0;
        while (k < f->n_classes && strcmp(f->class_name[k], c)) k++;
        if (k == f->n_classes && k < KLD_ADAPTER_CLASSES) /* more classes: the last ones uncounted */
            memcpy(f->class_name[f->n_classes++], c, sizeof c);
        if (k < f->n_classes) f->class_count[k]++;
    }
    return true;
}
