/* shortconv.c — LFM2's gated short-convolution block, as llama.cpp builds
 * it (src/models/lfm2.cpp, build_shortconv_block) and transformers defines
 * it (Lfm2ShortConv.slow_forward):
 *   [B; C; x] = in_proj · h,   bx = B ⊙ x,
 *   conv[t][c] = Σ_k w[c][k] · bx[t + k − (L − 1)][c]   (causal, depthwise, width L)
 *   y = out_proj · (C ⊙ conv)
 * where inputs before the chunk come from the layer's state (the last
 * L − 1 bx rows, zero at position 0). Each output sums its L products in
 * float in k order whether the inputs come from the state or the chunk,
 * so chunking and decoding give the same bits as one pass. */
#include "engine/internal.h"

uint64_t kld_shortconv_act_floats(const kld_hparams *hp, int64_t max_chunk) {
    return (uint64_t)max_chunk * 4 * (uint64_t)hp->n_embd; /* [B; C; x] rows, then gated output rows */
}

uint64_t kld_shortconv_state_floats(const kld_hparams *hp) {
    return (uint64_t)(hp->shortconv_l_cache - 1) * (uint64_t)hp->n_embd;
}

typedef struct conv_job {
    kld_session *s;
    int64_t il, n;
    float *bcx, *y;
} conv_job;

/* bx = B ⊙ x, written over the x third of each row. */
static void gate_task(void *ctx, int ith, int nth) {
    const conv_job *j = ctx;
    const int64_t E = j->s->model->hp.n_embd;
    int64_t b, e;
    kld_split(j->n, ith, nth, &b, &e);
    for (int64_t t = b; t < e; t++) {
        float *row = j->bcx + t * 3 * E;
        for (int64_t c = 0; c < E; c++) row[2 * E + c] = row[c] * row[2 * E + c];
    }
}

/* y[t] = C[t] ⊙ conv[t]; input t + k − (L − 1) < 0 reads the state. */
static void conv_task(void *ctx, int ith, int nth) {
    const conv_job *j = ctx;
    const kld_session *s = j->s;
    const int64_t E = s->model->hp.n_embd, L = s->model->hp.shortconv_l_cache;
    const float *w = s->model->lv[j->il].conv, *state = s->recl[j->il].conv;
    int64_t b, e;
    kld_split(j->n, ith, nth, &b, &e);
    for (int64_t t = b; t < e; t++) {
        const float *in[64]; /* L <= 64 (hparams_recurrent.c) */
        for (int64_t k = 0; k < L; k++) {
            const int64_t src = t + k - (L - 1);
            in[k] = src >= 0 ? j->bcx + src * 3 * E + 2 * E : state + (L - 1 + src) * E;
        }
        const float *gate = j->bcx + t * 3 * E + E;
        float *out = j->y + t * E;
        for (int64_t c = 0; c < E; c++) {
            float acc = 0.0f;
            for (int64_t k = 0; k < L; k++) acc += in[k][c] * w[c * L + k];
            out[c] = gate[c] * acc;
        }
    }
}

/* The state becomes the last L − 1 rows of [state; bx]. Rows move to
 * lower indices only, so ascending order reads every row before it is
 * overwritten. */
static void advance_state(const conv_job *j) {
    const kld_session *s = j->s;
    const int64_t E = s->model->hp.n_embd, keep = s->model->hp.shortconv_l_cache - 1;
    float *state = s->recl[j->il].conv;
    for (int64_t r = 0; r < keep; r++) {
        const int64_t src = j->n - keep + r; /* index into bx; < 0: into the old state */
        const float *from = src >= 0 ? j->bcx + src * 3 * E + 2 * E : state + (keep + src) * E;
        memmove(state + r * E, from, (size_t)E * sizeof(float));
    }
}

void kld_shortconv_forward(kld_session *s, int64_t il, int64_t n) {
    const kld_layer_weights *L = &s->model->w.layers[il];
    const int64_t E = s->model->hp.n_embd;
    conv_job j = {s, il, n, s->rec_act, s->rec_act + s->max_chunk * 3 * E};
    kld_forward_gemm(s, L->shortconv_in_proj, n, s->xn, E, j.bcx, 3 * E);
    kld_pool_run(s->pool, gate_task, &j);
    kld_pool_run(s->pool, conv_task, &j);
    advance_state(&j);
    kld_forward_gemm(s, L->shortconv_out_proj, n, j.y, E, s->tmp, E);
}
