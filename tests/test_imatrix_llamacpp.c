/* test_imatrix_llamacpp.c — our own importance matrix against
 * llama-imatrix's: rand-llama f16 over the licenses corpus with
 * llama-imatrix's settings (-c 256 --chunks 64), collected with the exact
 * engine and with llama.cpp's numerics (act=f16, act=q8, kv=f16,act=q8);
 * per entry the relative difference from imatrix.dat, and quantizing with
 * our imatrix against llama-quantize's q4_K_M / iq4_xs imatrix files, block
 * by block per type.
 *
 * What holds: every setting is within 1% per entry; llama.cpp's numerics
 * (kv=f16,act=q8, `kldeval imatrix --llamacpp`) bring the mean relative
 * difference down about fivefold. What does not: >= 99.9% of q4_K blocks
 * identical. The k-quant scale searches are that sensitive: llama.cpp's
 * own imatrix.dat moved by one ulp per value already changes ~1% of the
 * q4_K blocks (mostly the f16 super-block scales d/dmin), so only a
 * bit-identical imatrix reaches the bar — checked here too. Bit-identical
 * sums would need ggml's exact summation order in every op after layer 0's
 * q/k/v (its softmax expf, its dot products), and imatrix.dat was computed
 * with AVX-512, whose f16 accumulation order differs from an AVX2 build's. */
#include "testlib.h"

#include "engine/engine.h"
#include "io/gguf.h"
#include "quant/quant.h"
#include "tokenizer/tokenizer.h"

#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#define RL KT_SHARED "/models/rand-llama"
#define IMAT KT_SHARED "/oracle/rand-llama/imatrix"

typedef struct agreement {
    uint64_t same[KLD_TYPE_COUNT], all[KLD_TYPE_COUNT];
} agreement;

/* Identical blocks per type between two GGUFs of the same tensor table;
 * with `verbose`, every tensor that is not all identical. */
static void count_blocks(const char *got_path, const char *want_path, bool verbose, agreement *ag) {
    memset(ag, 0, sizeof *ag);
    kld_gguf *a = NULL, *b = NULL;
    kld_error err = {0};
    CHECK_OK(kld_gguf_open(got_path, &a, &err), err);
    CHECK_OK(kld_gguf_open(want_path, &b, &err), err);
    for (uint64_t i = 0; a && b && i < a->n_tensors && i < b->n_tensors; i++) {
        const kld_tensor *x = &a->tensors[i], *y = &b->tensors[i];
        bool meta = !strcmp(x->name, y->name) && x->type == y->type && x->nbytes == y->nbytes;
        CHECK(meta, "%s: tensor %s matches llama.cpp's %s in name, type and size", got_path,
              x->name, y->name);
        if (!meta) continue;
        const kld_type_info *ti = kld_type_info_get(x->type);
        uint64_t nb = (uint64_t)kld_tensor_nelements(x) / (uint64_t)ti->block_size, same = 0;
        for (uint64_t k = 0; k < nb; k++)
            same += !memcmp((const uint8_t *)x->data + k * (uint64_t)ti->type_size,
                            (const uint8_t *)y->data + k * (uint64_t)ti->type_size,
                            (size_t)ti->type_size);
        ag->same[x->type] += same;
        ag->all[x->type] += nb;
        if (verbose && same != nb) {
            char tb[16];
            printf("      %-24s %-6s %llu/%llu blocks identical\n", x->name, kld_type_name(x->type, tb),
                   (unsigned long long)same, (unsigned long long)nb);
        }
    }
    kld_gguf_close(a);
    kld_gguf_close(b);
}

typedef struct setting_result {
    double worst_rel, mean_rel, worst_block_frac;
} setting_result;

static double quantize_and_count(const char *im_path, const char *what);

static setting_result run_setting(kld_model *m, const kld_tok_ids *ids, int32_t bos,
                                  const kld_imatrix *theirs, const char *lever_text) {
    setting_result r = {1e9, 1e9, 0};
    kld_levers lv;
    kld_levers_default(&lv);
    kld_error err = {0};
    if (*lever_text) CHECK_OK(kld_levers_parse(lever_text, &lv, &err), err);
    kld_imatrix *ours = NULL;
    CHECK_OK(kld_imatrix_collect(m, ids->ids, (int64_t)ids->n, 256, 64, bos, 2, &lv,
                                 "corpus/licenses.txt", NULL, NULL, &ours, &err), err);
    if (!ours) return r;
    CHECK(ours->n == theirs->n && ours->chunks == 64, "[%s] %zu entries (llama.cpp %zu), %d chunks",
          lever_text, ours->n, theirs->n, ours->chunks);
    double worst = 0, sum = 0;
    int64_t count = 0;
    for (size_t i = 0; i < theirs->n; i++) {
        const kld_imatrix_entry *t = &theirs->e[i], *u = kld_imatrix_find(ours, t->name);
        CHECK(u && u->n == t->n && u->ncall == t->ncall, "[%s] entry %s present, same size",
              lever_text, t->name);
        for (int64_t k = 0; u && u->n == t->n && k < t->n; k++) {
            double rel = fabs((double)u->sums[k] - t->sums[k]) / fabs((double)t->sums[k]);
            worst = rel > worst ? rel : worst;
            sum += rel;
            count++;
        }
    }
    r.worst_rel = worst;
    r.mean_rel = count ? sum / (double)count : 1e9;
    printf("  [%s] per entry: max relative difference %.3g, mean %.3g\n",
           *lever_text ? lever_text : "exact", r.worst_rel, r.mean_rel);
    char im_path[512];
    snprintf(im_path, sizeof im_path, "%s/imat_llamacpp_%d.dat", kt_build_dir(), (int)getpid());
    CHECK_OK(kld_imatrix_write(ours, im_path, &err), err);
    kld_imatrix_free(ours);
    r.worst_block_frac = quantize_and_count(im_path, *lever_text ? lever_text : "exact");
    remove(im_path);
    return r;
}

/* Quantizes rand-llama f16 with the imatrix at im_path to q4_K_M and
 * iq4_xs, prints identical blocks per type against llama-quantize's files
 * and returns the smallest per-type fraction of the weight types. */
static double quantize_and_count(const char *im_path, const char *what) {
    static const struct {
        const char *recipe, *file;
    } cases[] = {{"q4_K_M", "q4_k_m-imat.gguf"}, {"iq4_xs", "iq4_xs-imat.gguf"}};
    double worst = 1;
    kld_error err = {0};
    for (size_t c = 0; c < 2; c++) {
        char out[512], want[512];
        snprintf(out, sizeof out, "%s/imat_llamacpp_%d_%s.gguf", kt_build_dir(), (int)getpid(),
                 cases[c].recipe);
        snprintf(want, sizeof want, IMAT "/%s", cases[c].file);
        kld_quantize_opts o = {.n_threads = 2, .imatrix_path = im_path};
        CHECK_OK(kld_quantize_file(RL "/f16.gguf", out, cases[c].recipe, &o, NULL, &err), err);
        agreement ag;
        count_blocks(out, want, getenv("KLD_IMATRIX_VERBOSE") != NULL, &ag);
        for (uint32_t t = 0; t < KLD_TYPE_COUNT; t++) {
            if (!ag.all[t]) continue;
            char tb[16];
            double f = (double)ag.same[t] / (double)ag.all[t];
            printf("    [%s] %s %-6s %llu/%llu blocks identical (%.3f%%)\n", what, cases[c].recipe,
                   kld_type_name(t, tb), (unsigned long long)ag.same[t],
                   (unsigned long long)ag.all[t], 100 * f);
            if (f < worst) worst = f;
        }
        remove(out);
    }
    return worst;
}

/* llama.cpp's imatrix with every value moved one ulp up or down (seeded):
 * how many blocks an imatrix that is not bit-identical can keep. */
static double one_ulp_agreement(const kld_imatrix *theirs) {
    kld_imatrix *im = NULL;
    kld_error err = {0};
    CHECK_OK(kld_imatrix_read(IMAT "/imatrix.dat", &im, &err), err);
    if (!im) return 1;
    uint64_t state = 0x9e3779b97f4a7c15u;
    for (size_t i = 0; i < im->n; i++)
        for (int64_t k = 0; k < im->e[i].n; k++) {
            state = state * 6364136223846793005u + 1442695040888963407u;
            float *v = &im->e[i].sums[k];
            *v = nextafterf(*v, (state >> 63) ? INFINITY : 0.0f);
        }
    (void)theirs;
    char path[512];
    snprintf(path, sizeof path, "%s/imat_llamacpp_ulp_%d.dat", kt_build_dir(), (int)getpid());
    CHECK_OK(kld_imatrix_write(im, path, &err), err);
    kld_imatrix_free(im);
    double f = quantize_and_count(path, "imatrix.dat +-1 ulp");
    remove(path);
    return f;
}

int main(void) {
    kld_kernels_init();
    kld_error err = {0};
    kld_model *m = NULL;
    kld_tokenizer *tok = NULL;
    kld_tok_ids ids = {0};
    kld_imatrix *theirs = NULL;
    size_t len = 0;
    char *text = kt_read_file(KT_SHARED "/corpus/licenses.txt", &len);
    CHECK(text != NULL, "corpus read");
    if (text && len && text[len - 1] == '\n') len--; /* as llama-imatrix reads -f */
    CHECK_OK(kld_model_open(RL "/f16.gguf", NULL, &m, &err), err);
    if (m) CHECK_OK(kld_tok_open_source(kld_model_source(m), &tok, &err), err);
    if (tok) CHECK_OK(kld_tok_encode(tok, text, len, KLD_TOK_ADD_SPECIAL, &ids, &err), err);
    CHECK_OK(kld_imatrix_read(IMAT "/imatrix.dat", &theirs, &err), err);
    if (!m || !tok || !ids.n || !theirs) return kt_finish();
    const int32_t bos = kld_tok_adds_bos(tok) ? kld_tok_bos(tok) : -1;
    static const char *const settings[] = {"", "act=f16", "act=q8", KLD_IMATRIX_LLAMACPP_LEVERS};
    setting_result res[4];
    for (int i = 0; i < 4; i++) res[i] = run_setting(m, &ids, bos, theirs, settings[i]);
    for (int i = 0; i < 4; i++) {
        CHECK(res[i].worst_rel < 0.01, "[%s] imatrix within 1%% of llama-imatrix per entry (worst %.3g)",
              settings[i], res[i].worst_rel);
        /* what an imatrix within ~1e-4 keeps (measured: q4_K ~98.9-99.0%,
         * iq4_xs ~99.7%, q6_K >= 99.93%) */
        CHECK(res[i].worst_block_frac >= 0.985, "[%s] >= 98.5%% of blocks identical per type (%.4f)",
              settings[i], res[i].worst_block_frac);
    }
    /* llama.cpp's numerics bring the entries closer (measured 9.6e-6 vs 4.7e-5) */
    CHECK(res[3].mean_rel < 0.5 * res[0].mean_rel, "[%s] mean relative difference %.3g below half "
          "of exact's %.3g", settings[3], res[3].mean_rel, res[0].mean_rel);
    /* why 99.9% is out of reach without bit-identical sums */
    double ulp = one_ulp_agreement(theirs);
    printf("  llama.cpp's imatrix moved by one ulp: worst per-type block agreement %.4f\n", ulp);
    CHECK(ulp < 0.995, "one ulp in the imatrix changes blocks (agreement %.4f)", ulp);
    kld_imatrix_free(theirs);
    kld_tok_ids_free(&ids);
    kld_tok_free(tok);
    kld_model_close(m);
    free(text);
    return kt_finish();
}
