/* test_diff.c — `kldeval diff` and the engine's layer observer: the
 * observer changes no bit of the forward pass and sees the same hidden
 * states whatever the chunk size and thread count; identical arms give every
 * error exactly 0 and SQNR +inf (JSON null + flag); a policy that changes
 * only layer 1 leaves layer 0 exactly 0; q8_0 beats q4_0 at every layer and
 * site; quantized experts show in their matrices only; MoE and hybrid (short-conv, DeltaNet) models report their sites;
 * a LoRA adapter on layer 1 only leaves layer 0 exactly 0 and moves layer
 * 1, at scale 0 nothing moves; the figures do not depend on --chunk or
 * --threads; bad input is refused
 * naming the file and the value. Usage: test_diff KLDEVAL */
#include "testlib.h"
#include "test_forward_models.h"
#include "lora_fixture.h"

#include "engine/engine.h"
#include "eval/diff.h"
#include "tensor/types.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#define RL KT_SHARED "/models/rand-llama/"

static const char *kldeval;

/* ---- the observer ---- */

typedef struct seen {
    int64_t n_layer, E, n_pos;
    float *resid;       /* [n_layer][n_pos][E] by position: the last layer's residual ... */
    float *site;        /* [n_layer][3][n_pos][E] every site */
    int64_t calls, bad;
} seen;

static void observer(void *ctx, int64_t il, kld_layer_site site, const float *rows, int64_t n,
                     int64_t ld, int64_t pos) {
    seen *s = ctx;
    s->calls++;
    if (il < 0 || il >= s->n_layer || site < 0 || site >= KLD_SITE_COUNT || pos < 0 ||
        pos + n > s->n_pos || ld < s->E) {
        s->bad++;
        return;
    }
    for (int64_t r = 0; r < n; r++)
        memcpy(s->site + ((il * KLD_SITE_COUNT + site) * s->n_pos + pos + r) * s->E, rows + r * ld,
               (size_t)s->E * sizeof(float));
}

/* Logits of n ids through a session (chunk, threads), observed into *obs
 * when obs is not NULL. */
static float *run_session(kld_model *m, const int32_t *ids, int64_t n, int64_t chunk, int threads,
                          seen *obs) {
    const kld_hparams *hp = kld_model_hparams(m);
    kld_session *s = NULL;
    kld_error err = {0};
    CHECK_OK(kld_session_create(m, n, chunk, threads, &s, &err), err);
    if (!s) return NULL;
    if (obs) kld_session_observe_layers(s, observer, obs);
    float *logits = malloc((size_t)(n * hp->n_vocab) * sizeof(float));
    for (int64_t c0 = 0; c0 < n; c0 += chunk) {
        int64_t k = n - c0 < chunk ? n - c0 : chunk;
        CHECK_OK(kld_session_eval(s, ids + c0, k, logits + c0 * hp->n_vocab, &err), err);
    }
    kld_session_free(s);
    return logits;
}

static seen seen_new(const kld_model *m, int64_t n) {
    const kld_hparams *hp = kld_model_hparams(m);
    seen s = {hp->n_layer, hp->n_embd, n, NULL, NULL, 0, 0};
    s.site = calloc((size_t)(hp->n_layer * KLD_SITE_COUNT * n * hp->n_embd), sizeof(float));
    return s;
}

/* The hook changes no bit; chunk 5 on 1 thread and chunk 23 on 2 threads
 * observe the same bits at every site; every site is reported once per
 * layer and chunk, with finite, non-zero rows. */
static void test_observer(const char *label, const char *path, int64_t nv_limit) {
    kld_model *m = NULL;
    kld_error err = {0};
    CHECK_OK(kld_model_open(path, NULL, &m, &err), err);
    if (!m) return;
    const kld_hparams *hp = kld_model_hparams(m);
    enum { N = 23 };
    int32_t ids[N];
    tf_make_ids(ids, N, nv_limit > 0 && nv_limit < hp->n_vocab ? nv_limit : hp->n_vocab, 11);
    seen a = seen_new(m, N), b = seen_new(m, N);
    float *plain = run_session(m, ids, N, 7, 2, NULL);
    float *hooked = run_session(m, ids, N, 5, 1, &a);
    float *hooked2 = run_session(m, ids, N, 23, 2, &b);
    size_t lbytes = (size_t)(N * hp->n_vocab) * sizeof(float);
    CHECK(plain && hooked && !memcmp(plain, hooked, lbytes) && !memcmp(plain, hooked2, lbytes),
          "%s: logits bit-identical with the observer on and off (chunk 7/5/23, threads 2/1/2)", label);
    CHECK(a.bad == 0 && b.bad == 0, "%s: observer arguments in range", label);
    CHECK(a.calls == hp->n_layer * KLD_SITE_COUNT * 5 && b.calls == hp->n_layer * KLD_SITE_COUNT,
          "%s: one call per layer, site and chunk (%lld, %lld)", label, (long long)a.calls,
          (long long)b.calls);
    size_t sbytes = (size_t)(hp->n_layer * KLD_SITE_COUNT * N * hp->n_embd) * sizeof(float);
    CHECK(!memcmp(a.site, b.site, sbytes), "%s: observed states independent of chunk and threads", label);
    /* every site of every layer carries a finite, non-zero signal */
    for (int64_t il = 0; il < hp->n_layer; il++)
        for (int k = 0; k < KLD_SITE_COUNT; k++) {
            const float *x = a.site + ((il * KLD_SITE_COUNT + k) * N) * hp->n_embd;
            double e = 0;
            bool finite = true;
            for (int64_t i = 0; i < N * hp->n_embd; i++) {
                e += (double)x[i] * x[i];
                finite &= isfinite(x[i]);
            }
            CHECK(finite && e > 0, "%s: layer %lld %s observed (energy %g)", label, (long long)il,
                  kld_layer_site_name((kld_layer_site)k), e);
        }
    free(plain), free(hooked), free(hooked2), free(a.site), free(b.site);
    kld_model_close(m);
}

/* ---- diff runs through the library ---- */

static void config(kld_kl_config *c, const char *ref, const char *arm, const char *levers,
                   const char *ids) {
    kld_kl_config_defaults(c);
    c->ref = (kld_arm_spec){.kind = KLD_ARM_MODEL, .path = ref};
    c->arm = (kld_arm_spec){.kind = arm ? KLD_ARM_MODEL : KLD_ARM_SELF, .path = arm, .levers = levers};
    c->chunk = 16;
    c->n_threads = 2;
    if (ids) {
        c->ids_path = ids;
        c->ctx = 40;
    } else {
        c->max_docs = 2;
        c->max_tokens = 40;
    }
}

static bool diff_run_m(const kld_kl_config *c, bool matrices, kld_diff_result *r, kld_summary *sum) {
    kld_error err = {0};
    kld_status st = kld_diff_run(c, matrices, r, &err);
    CHECK_OK(st, err);
    if (st) return false;
    st = kld_stats_finalize(r->kl.stats, sum, &err);
    CHECK_OK(st, err);
    if (st) kld_diff_result_free(r);
    return !st;
}

static bool diff_run(const kld_kl_config *c, kld_diff_result *r, kld_summary *sum) {
    return diff_run_m(c, false, r, sum);
}

static bool site_zero(const kld_diff_site *s) {
    return s->rel_frob == 0 && s->rel_frob_se == 0 && s->cosine == 0 && s->cosine_se == 0 &&
           s->max_abs == 0 && s->max_abs_se == 0 && s->max_abs_max == 0 && s->sqnr_inf &&
           isinf(s->sqnr_db) && s->sqnr_db > 0 && s->sqnr_db_se == 0 && s->n > 0;
}

static bool site_nonzero(const kld_diff_site *s) {
    return s->rel_frob > 0 && isfinite(s->rel_frob) && isfinite(s->rel_frob_se) && s->cosine > 0 &&
           isfinite(s->cosine_se) && s->max_abs > 0 && !s->sqnr_inf && isfinite(s->sqnr_db) &&
           isfinite(s->sqnr_db_se) && s->n > 0;
}

static void test_self(const char *label, const char *ref, const char *arm, const char *levers,
                      const char *ids) {
    kld_kl_config c;
    config(&c, ref, arm, levers, ids);
    kld_diff_result r;
    kld_summary sum;
    if (!diff_run(&c, &r, &sum)) return;
    bool all = r.n_sites > 0;
    for (size_t k = 0; k < r.n_sites; k++) all &= site_zero(&r.sites[k]);
    CHECK(all && r.worst_layer == -1, "%s: every error exactly 0, SQNR +inf, no NaN (%zu sites)",
          label, r.n_sites);
    CHECK(sum.kld.mean == 0 && sum.n_positions > 0, "%s: KLD exactly 0 over %llu positions", label,
          (unsigned long long)sum.n_positions);
    kld_diff_result_free(&r);
}

/* f16@keep,blk:1=q4_0: layer 0 untouched, layer 1 moves. */
static void test_one_layer(void) {
    kld_kl_config c;
    config(&c, RL "f16.gguf", RL "f16.gguf@keep,blk:1=q4_0", NULL, NULL);
    kld_diff_result r;
    kld_summary sum;
    if (!diff_run_m(&c, true, &r, &sum)) return;
    /* per matrix: every blk.0 matrix and the head exactly 0 on both inputs, every blk.1 one not */
    int n0 = 0, n1 = 0, head = 0;
    for (size_t i = 0; i < r.n_matrices; i++) {
        const kld_diff_matrix *m = &r.matrices[i];
        if (!strncmp(m->name, "blk.1.", 6)) {
            n1++;
            CHECK(m->rel_err_own_input > 0 && m->rel_err_own_input < 1 && m->rel_err_ref_input > 0 &&
                  m->rel_err_ref_input < 1 && m->rows > 0,
                  "blk:1=q4_0: %s moves (own %g, ref %g)", m->name, m->rel_err_own_input,
                  m->rel_err_ref_input);
        } else {
            n0 += !strncmp(m->name, "blk.0.", 6);
            head += !strncmp(m->name, "token_embd", 10) || !strncmp(m->name, "output", 6);
            CHECK(m->rel_err_own_input == 0 && m->rel_err_ref_input == 0 && m->rows > 0,
                  "blk:1=q4_0: %s exactly 0 on both inputs (own %g, ref %g)", m->name,
                  m->rel_err_own_input, m->rel_err_ref_input);
        }
    }
    CHECK(n0 == 7 && n1 == 7 && head == 1 && r.n_matrices == 15,
          "rand-llama matrices: 7 per layer and the head (%d, %d, %d of %zu)", n0, n1, head,
          r.n_matrices);
    CHECK(r.n_layer == 2 && r.n_sites == 6, "rand-llama: 2 layers × 3 sites");
    for (int k = 0; k < KLD_SITE_COUNT && r.n_sites == 6; k++) {
        CHECK(site_zero(&r.sites[k]), "blk:1=q4_0: layer 0 %s exactly 0",
              kld_layer_site_name((kld_layer_site)k));
        CHECK(site_nonzero(&r.sites[3 + k]), "blk:1=q4_0: layer 1 %s non-zero (rel %g, SQNR %g dB)",
              kld_layer_site_name((kld_layer_site)k), r.sites[3 + k].rel_frob, r.sites[3 + k].sqnr_db);
    }
    CHECK(r.worst_layer == 1, "blk:1=q4_0: worst layer 1 (got %lld)", (long long)r.worst_layer);
    CHECK(sum.kld.mean > 0, "blk:1=q4_0: KLD %g > 0", sum.kld.mean);
    kld_diff_result_free(&r);
}

/* q8_0 against f16 beats q4_0 against f16 at every layer and site; the
 * figures are the same bits on chunk 5 / 1 thread. */
static void test_q8_q4(void) {
    kld_kl_config c8, c4, c8b;
    config(&c8, RL "f16.gguf", RL "q8_0.gguf", NULL, NULL);
    config(&c4, RL "f16.gguf", RL "q4_0.gguf", NULL, NULL);
    config(&c8b, RL "f16.gguf", RL "q8_0.gguf", NULL, NULL);
    c8b.chunk = 5;
    c8b.n_threads = 1;
    kld_diff_result r8, r4, r8b;
    kld_summary s8, s4, s8b;
    if (!diff_run_m(&c8, true, &r8, &s8)) return;
    if (!diff_run_m(&c4, true, &r4, &s4)) {
        kld_diff_result_free(&r8);
        return;
    }
    for (size_t k = 0; k < r8.n_sites && k < r4.n_sites; k++) {
        const kld_diff_site *a = &r8.sites[k], *b = &r4.sites[k];
        CHECK(site_nonzero(a) && site_nonzero(b) && a->sqnr_db > b->sqnr_db && a->rel_frob < b->rel_frob,
              "layer %lld %s: SQNR q8_0 %.2f dB > q4_0 %.2f dB", (long long)a->layer,
              kld_layer_site_name(a->site), a->sqnr_db, b->sqnr_db);
    }
    CHECK(s8.kld.mean < s4.kld.mean, "KLD q8_0 %g < q4_0 %g", s8.kld.mean, s4.kld.mean);
    CHECK(r8.n_matrices == 15 && r4.n_matrices == 15, "15 matrices measured (%zu, %zu)",
          r8.n_matrices, r4.n_matrices);
    for (size_t i = 0; i < r8.n_matrices && i < r4.n_matrices; i++)
        CHECK(!strcmp(r8.matrices[i].name, r4.matrices[i].name) &&
                  r8.matrices[i].rel_err_own_input > 0 &&
                  r8.matrices[i].rel_err_own_input < r4.matrices[i].rel_err_own_input &&
                  r8.matrices[i].rel_err_ref_input < r4.matrices[i].rel_err_ref_input,
              "%s: q8_0 error %g < q4_0 %g", r8.matrices[i].name, r8.matrices[i].rel_err_own_input,
              r4.matrices[i].rel_err_own_input);
    if (diff_run(&c8b, &r8b, &s8b)) {
        bool same = r8b.n_sites == r8.n_sites;
        for (size_t k = 0; same && k < r8.n_sites; k++) {
            const kld_diff_site *a = &r8.sites[k], *b = &r8b.sites[k];
            same = a->n == b->n && a->rel_frob == b->rel_frob && a->rel_frob_se == b->rel_frob_se &&
                   a->cosine == b->cosine && a->sqnr_db == b->sqnr_db &&
                   a->sqnr_db_se == b->sqnr_db_se && a->max_abs == b->max_abs &&
                   a->max_abs_max == b->max_abs_max && a->worst_pos == b->worst_pos;
        }
        CHECK(same && s8b.kld.mean == s8.kld.mean,
              "q8_0: every figure identical with chunk 16 / 2 threads and chunk 5 / 1 thread");
        kld_diff_result_free(&r8b);
    }
    kld_diff_result_free(&r8);
    kld_diff_result_free(&r4);
}

/* A synthesized model (MoE or hybrid) against its q8_0 policy: every
 * layer's sites non-zero and finite; self-diff exactly 0. */
static void test_synth(const char *arch, const char *ids) {
    synth_shape s;
    synth_default(&s, arch);
    char path[1024], armp[1100];
    snprintf(path, sizeof path, "%s/diff_%s.gguf", kt_build_dir(), arch);
    if (!synth_write_gguf(&s, path)) {
        CHECK(false, "synthesize %s", arch);
        return;
    }
    test_observer(arch, path, s.n_vocab);
    snprintf(armp, sizeof armp, "%s@q8_0", path);
    kld_kl_config c;
    config(&c, path, armp, NULL, ids);
    kld_diff_result r;
    kld_summary sum;
    if (!diff_run(&c, &r, &sum)) return;
    bool all = r.n_sites == (size_t)(s.n_layer * KLD_SITE_COUNT);
    for (size_t k = 0; all && k < r.n_sites; k++) all &= site_nonzero(&r.sites[k]);
    CHECK(all, "%s@q8_0: every layer's mixer, ffn and resid non-zero and finite (%zu sites)", arch,
          r.n_sites);
    kld_diff_result_free(&r);
    char label[64];
    snprintf(label, sizeof label, "%s self-diff", arch);
    test_self(label, path, path, NULL, ids);
}

/* The routed experts' matrices (slices of the merged blk.N.ffn_*_exps) of a MoE model whose
 * policy quantizes only them: each expert class of each MoE layer non-zero on both inputs,
 * every other matrix (attention, dense FFN, router, shared expert, head, embedding) exactly 0
 * on its own input; in the first MoE layer the experts' gate and up see the same rows on both
 * sides (nothing before them changed, so the routing is the same): equal errors, bit for bit. */
static void test_moe_matrices(const char *ids) {
    char path[1024], arm[1200];
    snprintf(path, sizeof path, "%s/diff_glm4moe.gguf", kt_build_dir());
    snprintf(arm, sizeof arm, "%s@keep,*_exps.weight=q4_0", path);
    kld_kl_config c;
    config(&c, path, arm, NULL, ids);
    kld_diff_result r;
    kld_summary sum;
    if (!diff_run_m(&c, true, &r, &sum)) return;
    int n_exps = 0, n_other = 0, n_attn = 0;
    for (size_t i = 0; i < r.n_matrices; i++) {
        const kld_diff_matrix *m = &r.matrices[i];
        if (strstr(m->name, "_exps.")) {
            n_exps++;
            CHECK(m->rel_err_own_input > 0 && m->rel_err_own_input < 1 && m->rel_err_ref_input > 0 &&
                      m->rel_err_ref_input < 1 && m->rows > 0,
                  "experts only: %s moves (own %g, ref %g, %llu rows)", m->name, m->rel_err_own_input,
                  m->rel_err_ref_input, (unsigned long long)m->rows);
            if (!strncmp(m->name, "blk.1.", 6) && !strstr(m->name, "down"))
                CHECK(m->rel_err_own_input == m->rel_err_ref_input,
                      "first MoE layer: %s sees the same rows on both sides (%.17g, %.17g)", m->name,
                      m->rel_err_own_input, m->rel_err_ref_input);
        } else {
            n_other++;
            n_attn += !!strstr(m->name, ".attn_");
            CHECK(m->rel_err_own_input == 0, "experts only: %s exactly 0 on its own input (%g)", m->name,
                  m->rel_err_own_input);
        }
    }
    CHECK(n_exps == 6 && n_attn == 12 && n_other == 25,
          "glm4moe: 2 MoE layers × 3 expert classes, 3 × 4 attention matrices, 25 others (%d, %d, %d)",
          n_exps, n_attn, n_other);
    CHECK(sum.kld.mean > 0, "experts only: KLD %g > 0", sum.kld.mean);
    kld_diff_result_free(&r);
}

/* Gemma 4 with per-layer geometry (synth_gemma4_e2b: head sizes, KV heads, FFN widths per
 * layer, the last 3 layers reading earlier layers' KV caches, per-layer embeddings) against
 * its q8_0 policy: every layer's three sites move; the per-layer embedding matrices (inp_gate,
 * proj of every layer, per_layer_model_proj) are measured; the sharing layers' q but no k / v
 * (they have none). Self-diff exactly 0. */
static void test_gemma4_per_layer(const char *ids) {
    synth_shape s;
    synth_gemma4_e2b(&s);
    char path[1024], armp[1100];
    snprintf(path, sizeof path, "%s/diff_gemma4_e2b.gguf", kt_build_dir());
    if (!synth_write_gguf(&s, path)) {
        CHECK(false, "synthesize gemma4 e2b");
        return;
    }
    snprintf(armp, sizeof armp, "%s@q8_0", path);
    kld_kl_config c;
    config(&c, path, armp, NULL, ids);
    kld_diff_result r;
    kld_summary sum;
    if (!diff_run_m(&c, true, &r, &sum)) return;
    bool all = r.n_sites == (size_t)(s.n_layer * KLD_SITE_COUNT);
    for (size_t k = 0; all && k < r.n_sites; k++) all &= site_nonzero(&r.sites[k]);
    CHECK(all, "gemma4 e2b@q8_0: every layer's mixer, ffn and resid non-zero and finite (%zu sites)", r.n_sites);
    int ple = 0, shared_q = 0, shared_kv = 0;
    for (size_t i = 0; i < r.n_matrices; i++) {
        const kld_diff_matrix *m = &r.matrices[i];
        const bool is_ple = strstr(m->name, ".inp_gate.") || strstr(m->name, ".proj.") ||
                            !strcmp(m->name, "per_layer_model_proj.weight");
        if (is_ple)
            ple += m->rel_err_own_input > 0 && m->rel_err_own_input < 1 && m->rows > 0;
        for (int il = 5; il < 8; il++) {
            char q[48], k[48], v[48];
            snprintf(q, sizeof q, "blk.%d.attn_q.weight", il);
            snprintf(k, sizeof k, "blk.%d.attn_k.weight", il);
            snprintf(v, sizeof v, "blk.%d.attn_v.weight", il);
            shared_q += !strcmp(m->name, q) && m->rel_err_own_input > 0;
            shared_kv += !strcmp(m->name, k) || !strcmp(m->name, v);
        }
    }
    CHECK(ple == 2 * 8 + 1, "gemma4 e2b@q8_0: %d of 17 per-layer embedding matrices measured and moved", ple);
    CHECK(shared_q == 3 && shared_kv == 0, "gemma4 e2b: the sharing layers' q measured (%d of 3), no k / v (%d)",
          shared_q, shared_kv);
    kld_diff_result_free(&r);
    test_self("gemma4 e2b self-diff", path, path, NULL, ids);
}

/* MODEL+ADAPTER arms: an adapter on layer 1's matrices only leaves every
 * layer-0 site exactly 0 and moves every layer-1 site; the base matrices are
 * compared (the side product is not a weight of its own), so every matrix is
 * exactly 0 on both inputs; at scale 0 every error is exactly 0. */
static void test_lora(const char *ids) {
    synth_shape sh;
    synth_default(&sh, "llama");
    sh.mat_type = KLD_TYPE_F32;
    sh.head_dim = 16;
    sh.rope_base = 10000;
    char base[1024], ad_path[1024], arm[2100], arm0[2100];
    snprintf(base, sizeof base, "%s/diff_lora_base.gguf", kt_build_dir());
    snprintf(ad_path, sizeof ad_path, "%s/diff_lora_blk1.gguf", kt_build_dir());
    if (!synth_write_gguf(&sh, base)) {
        CHECK(false, "synthesize the LoRA base");
        return;
    }
    adapter all, blk1;
    make_adapter(&all, &sh, 11, false);
    memset(&blk1, 0, sizeof blk1);
    for (int i = 0; i < all.n; i++)
        if (!strncmp(all.t[i].name, "blk.1.", 6)) blk1.t[blk1.n++] = all.t[i]; /* shallow: all owns */
    CHECK(blk1.n == 7 && sh.n_layer == 2, "the adapter: layer 1's 7 matrices of 2 layers (%d)", blk1.n);
    write_gguf_adapter(&blk1, &(gguf_opts){.alpha = 8}, ad_path);
    free_adapter(&all);
    snprintf(arm, sizeof arm, "%s+%s", base, ad_path);
    snprintf(arm0, sizeof arm0, "%s+%s:0", base, ad_path);

    kld_kl_config c;
    config(&c, base, arm, NULL, ids);
    kld_diff_result r;
    kld_summary sum;
    if (diff_run_m(&c, true, &r, &sum)) {
        CHECK(r.n_sites == 6, "2 layers × 3 sites (%zu)", r.n_sites);
        for (int k = 0; k < KLD_SITE_COUNT && r.n_sites == 6; k++) {
            CHECK(site_zero(&r.sites[k]), "+adapter on blk.1: layer 0 %s exactly 0",
                  kld_layer_site_name((kld_layer_site)k));
            CHECK(site_nonzero(&r.sites[3 + k]), "+adapter on blk.1: layer 1 %s non-zero (rel %g)",
                  kld_layer_site_name((kld_layer_site)k), r.sites[3 + k].rel_frob);
        }
        CHECK(r.worst_layer == 1 && sum.kld.mean > 0, "worst layer 1 (%lld), KLD %g > 0",
              (long long)r.worst_layer, sum.kld.mean);
        bool zero = r.n_matrices > 0;
        for (size_t i = 0; i < r.n_matrices; i++)
            zero &= r.matrices[i].rel_err_own_input == 0 && r.matrices[i].rel_err_ref_input == 0;
        CHECK(zero, "+adapter: the base matrices are the same: %zu matrices exactly 0", r.n_matrices);
        kld_diff_result_free(&r);
    }
    config(&c, base, arm0, NULL, ids);
    if (diff_run(&c, &r, &sum)) {
        bool all0 = r.n_sites == 6;
        for (size_t k = 0; k < r.n_sites; k++) all0 &= site_zero(&r.sites[k]);
        CHECK(all0 && r.worst_layer == -1 && sum.kld.mean == 0,
              "+adapter:0: every error exactly 0, SQNR +inf, KLD %g", sum.kld.mean);
        kld_diff_result_free(&r);
    }
}

/* The per-matrix error on the reference's input, recomputed here: the reference's input rows
 * of blk.1.attn_q captured by a matmul observer of our own session, both weights dequantized,
 * the products in double; diff's figure must agree to 1e-9 relative. */
typedef struct capture {
    const kld_model *m;
    const char *want;
    const kld_tensor *w;
    float *x;
    int64_t rows, k;
} capture;

static void capture_mat(void *ctx, const kld_tensor *W, const float *A, int64_t n, int64_t lda) {
    capture *c = ctx;
    char name[96];
    if (!kld_model_weight_name(c->m, W, name, sizeof name) || strcmp(name, c->want)) return;
    c->w = W;
    c->k = W->ne[0];
    c->x = realloc(c->x, (size_t)((c->rows + n) * c->k) * sizeof(float));
    for (int64_t r = 0; r < n; r++) memcpy(c->x + (c->rows + r) * c->k, A + r * lda, (size_t)c->k * sizeof(float));
    c->rows += n;
}

static void capture_run(const char *path, const int32_t *ids, int64_t n, capture *c, kld_model **m) {
    kld_error err = {0};
    CHECK_OK(kld_model_open(path, NULL, m, &err), err);
    if (!*m) return;
    c->m = *m;
    kld_session *s = NULL;
    CHECK_OK(kld_session_create(*m, n, n, 1, &s, &err), err);
    if (!s) return;
    kld_session_observe(s, capture_mat, c);
    CHECK_OK(kld_session_eval(s, ids, n, NULL, &err), err);
    kld_session_free(s);
}

static void dequant_row(const kld_tensor *W, int64_t j, float *out) {
    const kld_type_info *ti = kld_type_info_get(W->type);
    const uint64_t rb = (uint64_t)(W->ne[0] / ti->block_size) * (uint64_t)ti->type_size;
    kld_type_kernels_of(ti)->to_float((const uint8_t *)W->data + (uint64_t)j * rb, out, W->ne[0]);
}

static void test_matrix_oracle(const char *ids_path) {
    char ref[600], arm[700];
    snprintf(ref, sizeof ref, "%s/diff_llama.gguf", kt_build_dir());
    snprintf(arm, sizeof arm, "%s@q4_0", ref);
    size_t bytes;
    int32_t *ids = (int32_t *)kt_read_file(ids_path, &bytes);
    const int64_t n = 40; /* one window of --ctx 40 */
    capture cr = {.want = "blk.1.attn_q.weight"}, ca = {.want = "blk.1.attn_q.weight"};
    kld_model *mr = NULL, *ma = NULL;
    capture_run(ref, ids, n, &cr, &mr);
    capture_run(arm, ids, n, &ca, &ma);
    if (cr.w && ca.w && cr.rows == n) {
        float *wr = malloc((size_t)cr.k * sizeof(float)), *wa = malloc((size_t)cr.k * sizeof(float));
        double e2 = 0, r2 = 0;
        for (int64_t j = 0; j < cr.w->ne[1]; j++) {
            dequant_row(cr.w, j, wr);
            dequant_row(ca.w, j, wa);
            for (int64_t r = 0; r < n; r++) {
                double yr = 0, ya = 0;
                for (int64_t i = 0; i < cr.k; i++) {
                    yr += (double)wr[i] * cr.x[r * cr.k + i];
                    ya += (double)wa[i] * cr.x[r * cr.k + i];
                }
                e2 += (ya - yr) * (ya - yr);
                r2 += yr * yr;
            }
        }
        const double want = sqrt(e2 / r2);
        kld_kl_config c;
        config(&c, ref, arm, NULL, ids_path);
        c.ids_path = ids_path;
        c.max_tokens = n;
        kld_diff_result r;
        kld_summary sum;
        if (diff_run_m(&c, true, &r, &sum)) {
            const kld_diff_matrix *m = NULL;
            for (size_t i = 0; i < r.n_matrices; i++)
                if (!strcmp(r.matrices[i].name, "blk.1.attn_q.weight")) m = &r.matrices[i];
            CHECK(m && m->rows == (uint64_t)n && fabs(m->rel_err_ref_input - want) <= 1e-9 * want && want > 0,
                  "blk.1.attn_q on the reference's input: diff %.12g, recomputed %.12g", m ? m->rel_err_ref_input : NAN, want);
            kld_diff_result_free(&r);
        }
        free(wr), free(wa);
    } else {
        CHECK(false, "captured blk.1.attn_q's inputs (%lld rows)", (long long)cr.rows);
    }
    free(cr.x), free(ca.x), free(ids);
    kld_model_close(ma);
    kld_model_close(mr);
}

/* ---- the command line ---- */

static char out_path[512];

static int run(const char *args) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' diff %s >'%s' 2>&1", kldeval, args, out_path);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* kldeval with other arguments than diff's */
static int run_cmd(const char *args) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' %s >'%s' 2>&1", kldeval, args, out_path);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static bool output_has(const char *a, const char *b) {
    size_t len;
    char *t = kt_read_file(out_path, &len);
    bool ok = strstr(t, a) && (!b || strstr(t, b));
    if (!ok) fprintf(stderr, "output was: %s\n", t);
    free(t);
    return ok;
}

static void test_cli(const char *ids) {
    CHECK(run("--help") == 0 && output_has("--json", "kldeval.diff/1"), "diff --help");
    static const char *const flags[] = {"--ref", "--arm", "--model", "--lever", "--ref-lever",
                                        "--arm-lever", "--corpus", "--corpus-format", "--ids-file",
                                        "--max-docs", "--max-tokens", "--chunking", "--ctx",
                                        "--chunks", "--chunk", "--threads", "--json", "--db",
                                        "--no-db", "--label", "--quiet"};
    for (size_t i = 0; i < sizeof flags / sizeof *flags; i++)
        CHECK(output_has(flags[i], NULL), "--help documents %s", flags[i]);

    /* self-diff through the CLI: SQNR null + flag in JSON, +inf in the table */
    char json[600], args[2048];
    snprintf(json, sizeof json, "%s/diff_self.json", kt_build_dir());
    char db[600];
    snprintf(db, sizeof db, "%s/diff_runs.sqlite", kt_build_dir());
    remove(db);
    snprintf(args, sizeof args, "--ref %sf16.gguf --arm %sf16.gguf --max-docs 1 --max-tokens 24 "
             "--json '%s' --db '%s' --label diffself --quiet", RL, RL, json, db);
    int rc = run(args);
    CHECK(rc == 0 && output_has("+inf", "worst layer: none"), "self-diff CLI (rc %d)", rc);
    json_error_t je;
    json_t *j = json_load_file(json, 0, &je);
    CHECK(j && !strcmp(json_string_value(json_object_get(j, "schema")), "kldeval.diff/1"),
          "self-diff JSON schema");
    json_t *layers = json_object_get(j, "layers");
    bool ok = json_array_size(layers) == 6;
    for (size_t i = 0; ok && i < json_array_size(layers); i++) {
        json_t *e = json_array_get(layers, i);
        ok = json_is_null(json_object_get(e, "sqnr_db")) && json_is_true(json_object_get(e, "sqnr_inf")) &&
             json_real_value(json_object_get(e, "rel_frob")) == 0 &&
             json_real_value(json_object_get(e, "cosine")) == 0 &&
             json_real_value(json_object_get(e, "max_abs")) == 0 &&
             json_is_real(json_object_get(e, "rel_frob_stderr")) &&
             json_integer_value(json_object_get(e, "layer")) == (json_int_t)(i / 3) &&
             json_is_string(json_object_get(e, "site"));
    }
    CHECK(ok, "self-diff JSON: 6 sites, SQNR null with sqnr_inf, errors 0");
    CHECK(j && json_real_value(json_object_get(json_object_get(j, "logits"), "kld_mean")) == 0,
          "self-diff JSON: the logits row's KLD is 0");
    json_decref(j);
    /* the run database: one row, mode diff, the table under report.diff */
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd, "'%s' runs list --db '%s' --mode diff 2>&1", kldeval, db);
    rc = kt_run_capture(cmd, &out);
    CHECK(rc == 0 && out && strstr(out, "diffself") && strstr(out, "diff"), "runs list --mode diff: %s",
          out ? out : "");
    free(out);
    out = NULL;
    snprintf(cmd, sizeof cmd, "'%s' runs show 1 --json --db '%s' 2>&1", kldeval, db);
    rc = kt_run_capture(cmd, &out);
    json_t *shown = out ? json_loads(out, 0, &je) : NULL;
    json_t *dl = json_object_get(json_object_get(shown, "diff"), "layers");
    CHECK(rc == 0 && json_array_size(dl) == 6 &&
              json_real_value(json_object_get(json_object_get(shown, "kld"), "mean")) == 0,
          "runs show --json: the kl report with the diff table (6 sites)");
    json_decref(shown);
    free(out);

    /* a lever at its reference value */
    snprintf(args, sizeof args, "-m %sf16.gguf --lever kv=f32 --max-docs 1 --max-tokens 24 --quiet", RL);
    rc = run(args);
    CHECK(rc == 0 && output_has("worst layer: none", NULL), "self-flag kv=f32: nothing differs (rc %d)", rc);

    /* bad input */
    struct { const char *args, *want1, *want2; } bad[] = {
        {"--arm x.gguf", "--ref", NULL},
        {"--ref " RL "f16.gguf --bogus", "unknown flag", "--bogus"},
        {"--ref " RL "f16.gguf --ctx 1", "--ctx", "1"},
        {"--ref " RL "f16.gguf --arm " RL "missing.gguf", "missing.gguf", NULL},
        {"--ref " RL "f16.gguf --arm '" RL "f16.gguf@q9_9'", "q9_9", NULL},
        {"--ref " RL "f16.gguf --lever kv=q7", "kv", "q7"},
        {"--ref " RL "f16.gguf --arm " KT_SHARED "/models/rand-qwen2/f16.gguf", "vocabular", NULL},
        {"--ref " RL "f16.gguf --arm " RL "q8_0.gguf --json " RL "f16.gguf", "--json", NULL},
        {"--ref " RL "f16.gguf --arm '%s/diff_dump'", "a kldeval dump", "no weights or hidden layers"},
    };
    /* a dump as the arm: what it is, and that it has no hidden layers */
    snprintf(args, sizeof args, "rm -rf '%s/diff_dump'", kt_build_dir());
    CHECK(system(args) == 0, "%s", args);
    snprintf(args, sizeof args, "dump -m %sq8_0.gguf --out '%s/diff_dump' --ctx 32 --chunks 2 --quiet", RL,
             kt_build_dir());
    CHECK(run_cmd(args) == 0, "a dump to diff against");
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char a[1024];
        snprintf(a, sizeof a, bad[i].args, kt_build_dir());
        rc = run(a);
        CHECK(rc != 0 && output_has(bad[i].want1, bad[i].want2), "refused: %s (rc %d)", a, rc);
    }
    /* same vocabulary size, another architecture: refused naming both */
    synth_shape s;
    synth_default(&s, "qwen2");
    char q2[600];
    snprintf(q2, sizeof q2, "%s/diff_qwen2.gguf", kt_build_dir());
    if (synth_write_gguf(&s, q2)) {
        snprintf(args, sizeof args, "--ref '%s/diff_llama.gguf' --arm '%s' --ids-file '%s' --ctx 40 --quiet",
                 kt_build_dir(), q2, ids);
        rc = run(args);
        CHECK(rc != 0 && output_has("architecture", "qwen2"), "another architecture refused (rc %d)", rc);
    }
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_diff KLDEVAL\n");
        return 2;
    }
    kldeval = argv[1];
    kld_kernels_init();
    snprintf(out_path, sizeof out_path, "%s/diff_cli.out", kt_build_dir());
    /* pre-tokenized ids for the synthesized models (no tokenizer) */
    char ids[600];
    snprintf(ids, sizeof ids, "%s/diff_ids.i32", kt_build_dir());
    int32_t tok[80];
    tf_make_ids(tok, 80, 300, 5);
    kt_write_file(ids, tok, sizeof tok);

    test_observer("rand-llama f16", RL "f16.gguf", 0);
    test_self("rand-llama f16 twice", RL "f16.gguf", RL "f16.gguf", NULL, NULL);
    test_self("rand-llama self-flag kv=f32", RL "f16.gguf", NULL, "kv=f32", NULL);
    test_one_layer();
    test_q8_q4();
    test_synth("llama", ids);
    test_matrix_oracle(ids);
    test_lora(ids);
    test_synth("glm4moe", ids);   /* MoE: the experts' combined output is the ffn site */
    test_moe_matrices(ids);
    test_synth("lfm2", ids);      /* short-conv mixers */
    test_synth("qwen3next", ids); /* DeltaNet mixers, MoE-free */
    test_gemma4_per_layer(ids);
    test_cli(ids);
    return kt_finish();
}
