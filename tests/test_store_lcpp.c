/* test_store_lcpp.c — llama.cpp `--kl-divergence-base` files
 * (src/store/lcpp_base*.c):
 *  1. the oracle base file written by llama-perplexity c392e50
 *     (../shared/oracle/aidreams260K/small-base.kld): header, tokens equal to
 *     the corpus ids, every record decodes and is a distribution, and the
 *     decoded NLLs give llama.cpp's printed "Mean PPL(base)";
 *  2. our encoder against llama.cpp's records: llama.cpp's own logits for
 *     22 records (tests/data) encode to the same bytes; the f32 model's
 *     logits from our engine for all 40 chunks (first token replaced by
 *     BOS), rows 64..126 encoded and compared code for code, with scale and
 *     min_log_prob, and the encoder's lse giving the base run's PPL;
 *  3. encoder edge cases with hand-computed codes (ties to even, clamping,
 *     -inf, all equal, padding);
 *  4. writer round trip and writer errors (count, bad rows, full disk via a
 *     64 KiB tmpfs when root, else RLIMIT_FSIZE). */
#include "testlib.h"

#include "engine/engine.h"
#include "store/lcpp_base.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#define ORACLE KT_SHARED "/oracle/aidreams260K"
#define BASE ORACLE "/small-base.kld"
#define MODEL KT_SHARED "/models/aidreams260K/f32.gguf"

static bool file_exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0;
}

/* ---- 1 + 2: the oracle file ---- */

static void test_oracle(void) {
    kld_error err = {0};
    kld_lcpp_base *b = NULL;
    CHECK_OK(kld_lcpp_base_open(BASE, 512, &b, &err), err);
    if (!b) return;
    const kld_lcpp_base_info *in = kld_lcpp_base_info_of(b);
    CHECK(in->n_ctx == 128 && in->n_vocab == 512 && in->n_chunk == 40 &&
              in->records_per_chunk == 63 && in->record_u16 == 516,
          "header: n_ctx %d n_vocab %d n_chunk %d per chunk %lld nv %lld", in->n_ctx, in->n_vocab,
          in->n_chunk, (long long)in->records_per_chunk, (long long)in->record_u16);
    CHECK(strcmp(kld_lcpp_base_path(b), BASE) == 0, "path %s", kld_lcpp_base_path(b));
    CHECK(kld_lcpp_base_tokens(b, 40) == NULL && kld_lcpp_base_tokens(b, -1) == NULL,
          "tokens of a chunk outside the file");

    size_t corpus_size;
    char *corpus = kt_read_file(ORACLE "/corpus.tokens", &corpus_size);
    CHECK(corpus_size >= 40 * 128 * 4, "corpus.tokens: %zu bytes", corpus_size);
    int mismatched = 0;
    for (int c = 0; c < 40; c++) {
        const int32_t *t = kld_lcpp_base_tokens(b, c);
        for (int j = 0; j < 128; j++)
            mismatched += t[j] != (int32_t)kld_load_u32(corpus + 4 * (128 * c + j));
    }
    CHECK(mismatched == 0, "tokens: %d of 5120 differ from corpus.tokens", mismatched);
    CHECK(kld_lcpp_base_tokens(b, 0)[0] == 1 && kld_lcpp_base_tokens(b, 1)[0] != 1,
          "BOS only at the start of chunk 0 (chunk 1 starts with %d)", kld_lcpp_base_tokens(b, 1)[0]);

    /* every record: decodes, sums to 1 over its 16-nat window, and gives
     * llama.cpp's base NLL (float, as it computes nll_base) */
    float *lp = malloc(63 * 512 * sizeof *lp);
    uint16_t *codes = malloc(63 * 512 * sizeof *codes);
    float mlp[63];
    double nll_sum = 0, nll2_sum = 0, worst_mass = 0;
    int n_rec = 0, bad_max_code = 0;
    for (int c = 0; c < 40; c++) {
        kld_status st = kld_lcpp_base_read(b, c, 0, 63, lp, codes, mlp, &err);
        CHECK_OK(st, err);
        if (st) break;
        const int32_t *t = kld_lcpp_base_tokens(b, c);
        for (int k = 0; k < 63; k++, n_rec++) {
            double mass = 0;
            int has_max = 0;
            for (int i = 0; i < 512; i++) {
                if (codes[k * 512 + i] > 0) mass += exp((double)lp[k * 512 + i]);
                has_max |= codes[k * 512 + i] == 65535;
            }
            bad_max_code += !has_max;
            if (fabs(mass - 1) > worst_mass) worst_mass = fabs(mass - 1);
            float nll = -lp[k * 512 + t[64 + k + 1]];
            nll_sum += nll;
            nll2_sum += (double)nll * nll;
        }
    }
    CHECK(n_rec == 2520 && bad_max_code == 0, "%d records decoded, %d without a 65535 code", n_rec,
          bad_max_code);
    CHECK(worst_mass < 2e-3, "decoded probabilities sum to 1 within %.2e", worst_mass);
    /* small-kld-q8_0.txt: "Mean PPL(base) : 414.239310 ± 25.405159" */
    double m = nll_sum / n_rec, v = nll2_sum / n_rec - m * m;
    double ppl = exp(m), ppl_se = ppl * sqrt(v / (n_rec - 1));
    CHECK(fabs(ppl - 414.239310) < 5e-6 && fabs(ppl_se - 25.405159) < 5e-6,
          "decoded base PPL %.6f ± %.6f, llama.cpp printed 414.239310 ± 25.405159", ppl, ppl_se);

    /* out-of-range reads */
    CHECK(kld_lcpp_base_read(b, 0, 60, 4, lp, NULL, NULL, &err) == KLD_ERR_ARG &&
              strstr(err.msg, BASE) != NULL,
          "records 60..63 of 63: %s", err.msg);
    CHECK(kld_lcpp_base_read(b, 40, 0, 1, lp, NULL, NULL, &err) == KLD_ERR_ARG, "chunk 40");
    CHECK(kld_lcpp_base_read(b, 0, -1, 1, lp, NULL, NULL, &err) == KLD_ERR_ARG, "record -1");
    CHECK_OK(kld_lcpp_base_read(b, 3, 63, 0, NULL, NULL, NULL, &err), err);

    /* our engine + encoder against llama.cpp's records */
    kld_model *model = NULL;
    kld_session *s = NULL;
    CHECK_OK(kld_model_open(MODEL, NULL, &model, &err), err);
    if (model) CHECK_OK(kld_session_create(model, 128, 128, 2, &s, &err), err);
    if (s) {
        float *logits = malloc(128 * 512 * sizeof *logits);
        uint16_t rec[516];
        uint64_t same = 0, off1 = 0, total = 0;
        double worst_scale = 0, worst_mlp = 0, nll_sum_ours = 0;
        int chunks_ok = 0;
        for (int c = 0; c < 40; c++) {
            int32_t ids[128];
            memcpy(ids, kld_lcpp_base_tokens(b, c), sizeof ids);
            ids[0] = 1; /* BOS, as llama-perplexity feeds each chunk */
            kld_session_reset(s);
            if (kld_session_eval(s, ids, 128, logits, &err) != KLD_OK) break;
            if (kld_lcpp_base_read(b, c, 0, 63, lp, codes, mlp, &err) != KLD_OK) break;
            for (int k = 0; k < 63; k++) {
                const float *row = logits + (size_t)(64 + k) * 512;
                double lse;
                kld_lcpp_encode_row(row, 512, rec, &lse);
                for (int i = 0; i < 512; i++) {
                    int d = (int)rec[4 + i] - (int)codes[k * 512 + i];
                    same += d == 0;
                    off1 += d == 1 || d == -1;
                    total++;
                }
                float sc_file, sc_ours, mlp_ours;
                memcpy(&sc_ours, rec, 4);
                memcpy(&mlp_ours, rec + 2, 4);
                /* the file's scale: lp of a 65535 code minus lp of code 0 */
                const uint16_t *q = codes + k * 512;
                int imax = 0;
                while (q[imax] != 65535) imax++;
                sc_file = (lp[k * 512 + imax] - mlp[k]) / 65535.0f;
                double ds = fabs((double)sc_ours - sc_file) / sc_file;
                double dm = fabs((double)mlp_ours - mlp[k]) / fabs((double)mlp[k]);
                if (ds > worst_scale) worst_scale = ds;
                if (dm > worst_mlp) worst_mlp = dm;
                /* llama.cpp's base-run NLL: (max + lse) - l[token] in float */
                float mx = row[0];
                for (int i = 1; i < 512; i++) mx = mx < row[i] ? row[i] : mx;
                float nll = (mx + (float)lse) - row[ids[64 + k + 1]];
                nll_sum_ours += nll;
            }
            chunks_ok++;
        }
        CHECK(chunks_ok == 40, "engine/encode stopped at chunk %d: %s", chunks_ok, err.msg);
        double frac = total ? (double)same / (double)total : 0;
        printf("encoder vs llama.cpp: %llu of %llu codes identical (%.5f %%), %llu off by 1, "
               "%llu further; scale rel. diff <= %.2e, min_log_prob rel. diff <= %.2e\n",
               (unsigned long long)same, (unsigned long long)total, 100 * frac,
               (unsigned long long)off1, (unsigned long long)(total - same - off1), worst_scale,
               worst_mlp);
        /* our engine's logits differ from llama.cpp's by ~1e-6 (mean
         * absolute; up to 6e-5), a code step is 16/65535 = 2.4e-4: about
         * 0.6 % of the codes land one step away. Exactness of the encoder
         * itself is test_exact_records. */
        CHECK(total == 40ull * 63 * 512 && frac >= 0.99, "identical codes %.5f %% (want >= 99)",
              100 * frac);
        CHECK(same + off1 == total, "%llu codes differ by more than 1",
              (unsigned long long)(total - same - off1));
        /* float precision of the logits (llama.cpp's engine vs ours): a few
         * float ulps relative */
        CHECK(worst_scale < 1e-5 && worst_mlp < 1e-5, "scale %.2e, min_log_prob %.2e", worst_scale,
              worst_mlp);
        /* small-base.txt: "Final estimate: PPL = 414.2402 +/- 25.40521" */
        double ppl_ours = exp(nll_sum_ours / 2520);
        CHECK(fabs(ppl_ours - 414.2402) < 2e-3, "base-run PPL from the encoder's lse %.4f, "
              "llama.cpp printed 414.2402", ppl_ours);
        free(logits);
    }
    kld_session_free(s);
    kld_model_close(model);
    free(codes);
    free(lp);
    free(corpus);
    kld_lcpp_base_close(b);
}

/* Bit-exactness: llama.cpp's own logits behind 22 records of the oracle
 * file (tests/data/README.md; chosen so that the plausible wrong encodings
 * fail) must encode to exactly the oracle's bytes. */
static void test_exact_records(void) {
    enum { ENTRY = 4 + 512 * 4, N = 22 };
    size_t size, bsize;
    char *fx = kt_read_file("tests/data/lcpp_aidreams260K_records.logits", &size);
    char *base = kt_read_file(BASE, &bsize);
    const size_t rec0 = 20 + 40 * 128 * 4;
    CHECK(size == N * ENTRY && bsize == rec0 + 2520 * 516 * 2, "fixture %zu bytes, base %zu", size,
          bsize);
    int same = 0;
    for (int e = 0; e < N && size == N * ENTRY && bsize == rec0 + 2520 * 516 * 2; e++) {
        int32_t k = (int32_t)kld_load_u32(fx + (size_t)e * ENTRY);
        if (k < 0 || k >= 2520) continue;
        float row[512];
        uint16_t r[516];
        memcpy(row, fx + (size_t)e * ENTRY + 4, sizeof row);
        kld_lcpp_encode_row(row, 512, r, NULL);
        bool eq = memcmp(r, base + rec0 + (size_t)k * 516 * 2, sizeof r) == 0;
        if (!eq) printf("record %d (chunk %d, record %d) differs\n", k, k / 63, k % 63);
        same += eq;
    }
    CHECK(same == N, "llama.cpp's logits: %d of %d records byte-identical to llama.cpp's", same, N);
    free(base);
    free(fx);
}

/* ---- 3: encoder edge cases ---- */

static float rec_f32(const uint16_t *r, int i) {
    float v;
    memcpy(&v, r + 2 * i, 4);
    return v;
}

/* log p_i in double, the independent reference */
static double ref_logp(const float *l, int n, int i) {
    double mx = l[0];
    for (int k = 1; k < n; k++) mx = l[k] > mx ? l[k] : mx;
    double s = 0;
    for (int k = 0; k < n; k++) s += exp(l[k] - mx);
    return l[i] - mx - log(s);
}

static void test_encoder(void) {
    uint16_t r[64];
    double lse;

    /* all equal: scale 0, every code 0, min_log_prob = -ln n */
    float eq[6] = {2.5f, 2.5f, 2.5f, 2.5f, 2.5f, 2.5f};
    memset(r, 0xAA, sizeof r);
    kld_lcpp_encode_row(eq, 6, r, &lse);
    int nz = 0;
    for (int i = 0; i < 6; i++) nz += r[4 + i] != 0;
    CHECK(rec_f32(r, 0) == 0.0f && nz == 0, "all-equal row: scale %g, %d non-zero codes",
          (double)rec_f32(r, 0), nz);
    CHECK(fabs(rec_f32(r, 1) + log(6.0)) < 1e-6 && fabs(lse - log(6.0)) < 1e-6,
          "all-equal row: min_log_prob %.8f lse %.8f, want -ln 6", (double)rec_f32(r, 1), lse);

    /* no clamping (span < 16 nats), a span of exactly 65535 * 2^-13 so that
     * scale = 2^-13 and the codes are hand-computable, including ties */
    const float u = 0x1p-13f;
    float l[8] = {0.0f, 65535 * u, 2.5f * u, 3.5f * u, 2.75f * u, 1000.5f * u, 1001.5f * u,
                  32767.25f * u};
    const uint16_t want[8] = {0, 65535, 2, 4, 3, 1000, 1002, 32767};
    kld_lcpp_encode_row(l, 8, r, &lse);
    CHECK(rec_f32(r, 0) == u, "scale %a, want 2^-13", (double)rec_f32(r, 0));
    for (int i = 0; i < 8; i++)
        CHECK(r[4 + i] == want[i], "code %d: %u, want %u (nearest, ties to even)", i, r[4 + i],
              want[i]);
    CHECK(fabs(rec_f32(r, 1) - ref_logp(l, 8, 0)) < 1e-5,
          "min_log_prob %.7f, want log p of the minimum %.7f", (double)rec_f32(r, 1),
          ref_logp(l, 8, 0));
    /* decoded values within half a step of the true log-probs */
    double worst = 0;
    for (int i = 1; i < 8; i++) {
        double dec = (double)(rec_f32(r, 0) * (float)r[4 + i] + rec_f32(r, 1));
        double d = fabs(dec - ref_logp(l, 8, i));
        worst = d > worst ? d : worst;
    }
    CHECK(worst <= 0.5 * u + 1e-5, "decoded within %.3g of log p (half step %.3g)", worst,
          0.5 * (double)u);

    /* clamping: entries more than 16 nats below the maximum, and -inf */
    float cl[5] = {10.0f, -7.0f, -INFINITY, -5.9f, 4.0f};
    kld_lcpp_encode_row(cl, 5, r, &lse);
    CHECK(rec_f32(r, 0) == 16.0f / 65535.0f, "clamped scale %a, want 16/65535",
          (double)rec_f32(r, 0));
    /* floor -6; 4 is 10 above it: 65535 * 10 / 16 = 40959.375; -5.9 is
     * 0.1 above it: 409.59 */
    CHECK(r[4] == 65535 && r[5] == 0 && r[6] == 0 && r[7] == 410 && r[8] == 40959,
          "clamped codes %u %u %u %u %u, want 65535 0 0 410 40959", r[4], r[5], r[6], r[7], r[8]);
    double lse_ref = log(1 + exp(-17.0) + exp(-15.9) + exp(-6.0));
    CHECK(fabs(lse - lse_ref) < 1e-6 && fabs(rec_f32(r, 1) - (-16.0 - lse_ref)) < 1e-5,
          "clamped lse %.8f (want %.8f), min_log_prob %.7f (want %.7f)", lse, lse_ref,
          (double)rec_f32(r, 1), -16.0 - lse_ref);
    /* odd n_vocab: the pad code is zero */
    memset(r, 0xAA, sizeof r);
    kld_lcpp_encode_row(cl, 5, r, NULL);
    CHECK(r[9] == 0 && r[10] == 0xAAAA, "pad code %04x, next %04x", r[9], r[10]);

    /* one row with a single finite value: the rest -inf */
    float one[4] = {-INFINITY, 3.0f, -INFINITY, -INFINITY};
    kld_lcpp_encode_row(one, 4, r, &lse);
    CHECK(r[5] == 65535 && r[4] == 0 && r[6] == 0 && rec_f32(r, 1) == -16.0f && lse == 0.0,
          "single finite logit: codes %u %u %u, min_log_prob %g, lse %g", r[4], r[5], r[6],
          (double)rec_f32(r, 1), lse);
}

/* ---- 4: writer ---- */

/* A deterministic pseudo-random logit in [-12, 12). */
static float noise(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return (float)((*s >> 8) / 16777216.0 * 24.0 - 12.0);
}

static void test_writer_roundtrip(void) {
    kld_error err = {0};
    char path[512];
    snprintf(path, sizeof path, "%s/lcpp_roundtrip.kld", kt_build_dir());
    char tmp[530];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    remove(path);
    enum { CTX = 8, NV = 5, NCH = 3, PER = CTX - 1 - CTX / 2, NREC = NCH * PER };
    int32_t tokens[NCH * CTX];
    for (int i = 0; i < NCH * CTX; i++) tokens[i] = (i * 7 + 1) % NV;
    float logits[NREC * NV];
    uint32_t seed = 12345;
    for (int i = 0; i < NREC * NV; i++) logits[i] = noise(&seed);
    logits[2] = -INFINITY;   /* a zero probability */
    logits[NV + 1] = -40.0f; /* clamped */

    kld_lcpp_base_writer *w = NULL;
    CHECK_OK(kld_lcpp_base_create(path, CTX, NV, NCH, tokens, &w, &err), err);
    if (!w) return;
    CHECK(file_exists(tmp) && !file_exists(path), "writes to %s first", tmp);
    CHECK_OK(kld_lcpp_base_write(w, logits, 2, &err), err);
    CHECK_OK(kld_lcpp_base_write(w, logits + 2 * NV, NREC - 2, &err), err);
    CHECK_OK(kld_lcpp_base_finish(w, &err), err);
    kld_lcpp_base_writer_free(w);
    CHECK(file_exists(path) && !file_exists(tmp), "renamed into place");

    /* the bytes: header, tokens, records of nv = 10 uint16 */
    size_t size;
    char *bytes = kt_read_file(path, &size);
    size_t want_size = 20 + NCH * CTX * 4 + NREC * 10 * 2;
    CHECK(size == want_size, "size %zu, want %zu", size, want_size);
    if (size == want_size) {
        CHECK(memcmp(bytes, "_logits_", 8) == 0 && kld_load_u32(bytes + 8) == CTX &&
                  kld_load_u32(bytes + 12) == NV && kld_load_u32(bytes + 16) == NCH,
              "header bytes");
        CHECK(memcmp(bytes + 20, tokens, sizeof tokens) == 0, "token bytes");
        int bad = 0;
        for (int k = 0; k < NREC; k++) {
            uint16_t r[10];
            kld_lcpp_encode_row(logits + k * NV, NV, r, NULL);
            bad += memcmp(bytes + 20 + sizeof tokens + (size_t)k * 20, r, 20) != 0;
            bad += kld_load_u16(bytes + 20 + sizeof tokens + (size_t)k * 20 + 18) != 0;
        }
        CHECK(bad == 0, "%d records differ from kld_lcpp_encode_row or have a non-zero pad", bad);
    }
    free(bytes);

    /* and through the reader */
    kld_lcpp_base *b = NULL;
    CHECK_OK(kld_lcpp_base_open(path, NV, &b, &err), err);
    if (!b) return;
    const kld_lcpp_base_info *in = kld_lcpp_base_info_of(b);
    CHECK(in->n_ctx == CTX && in->n_vocab == NV && in->n_chunk == NCH &&
              in->records_per_chunk == PER && in->record_u16 == 10,
          "round trip header");
    CHECK(memcmp(kld_lcpp_base_tokens(b, 2), tokens + 2 * CTX, CTX * 4) == 0, "round trip tokens");
    double worst = 0;
    int bad_codes = 0;
    for (int c = 0; c < NCH; c++) {
        float lp[PER * NV], mlp[PER];
        uint16_t q[PER * NV];
        CHECK_OK(kld_lcpp_base_read(b, c, 0, PER, lp, q, mlp, &err), err);
        for (int k = 0; k < PER; k++) {
            const float *row = logits + (c * PER + k) * NV;
            uint16_t r[10];
            kld_lcpp_encode_row(row, NV, r, NULL);
            bad_codes += memcmp(q + k * NV, r + 4, NV * 2) != 0 || mlp[k] != rec_f32(r, 1);
            for (int i = 0; i < NV; i++) {
                if (q[k * NV + i] == 0) continue; /* only bounded above */
                double d = fabs(lp[k * NV + i] - ref_logp(row, NV, i));
                worst = d > worst ? d : worst;
            }
        }
    }
    CHECK(bad_codes == 0, "%d records read back differ", bad_codes);
    /* 24-nat rows clamp to 16 nats: step 16/65535, half of it + float noise */
    CHECK(worst < 0.5 * 16.0 / 65535 + 1e-5, "decoded log p within %.3g of the logits' log p",
          worst);
    float one[NV];
    CHECK_OK(kld_lcpp_base_read(b, 1, 2, 1, one, NULL, NULL, &err), err);
    uint16_t r1[10];
    kld_lcpp_encode_row(logits + (PER + 2) * NV, NV, r1, NULL);
    CHECK(one[0] == rec_f32(r1, 0) * (float)r1[4] + rec_f32(r1, 1), "single-record read");
    kld_lcpp_base_close(b);
    CHECK(kld_lcpp_base_open(path, NV + 1, &b, &err) == KLD_ERR_MISMATCH &&
              strstr(err.msg, "n_vocab") && strstr(err.msg, path),
          "n_vocab_expected mismatch: %s", err.msg);
    remove(path);
}

static void test_writer_errors(void) {
    kld_error err = {0};
    char path[512], tmp[530];
    snprintf(path, sizeof path, "%s/lcpp_errors.kld", kt_build_dir());
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    remove(path);
    int32_t tokens[16] = {0};
    float row[4 * 3] = {0, 1, 2, 3, 1, 2, 3, 0, 2, 3, 0, 1};
    kld_lcpp_base_writer *w = NULL;

    CHECK(kld_lcpp_base_create(path, 3, 4, 1, tokens, &w, &err) == KLD_ERR_ARG && !w,
          "n_ctx 3 refused");
    tokens[2] = 4;
    CHECK(kld_lcpp_base_create(path, 4, 4, 1, tokens, &w, &err) == KLD_ERR_ARG &&
              strstr(err.msg, "tokens[2]"),
          "token 4 of n_vocab 4 refused: %s", err.msg);
    tokens[2] = 0;
    CHECK(kld_lcpp_base_create("/nonexistent-dir/x.kld", 4, 4, 1, tokens, &w, &err) == KLD_ERR_IO &&
              strstr(err.msg, "/nonexistent-dir/x.kld.tmp"),
          "unwritable directory: %s", err.msg);

    /* n_ctx 8: 3 records per chunk, 6 for two chunks */
    CHECK_OK(kld_lcpp_base_create(path, 8, 4, 2, tokens, &w, &err), err);
    if (!w) return;
    CHECK_OK(kld_lcpp_base_write(w, row, 3, &err), err);
    CHECK(kld_lcpp_base_finish(w, &err) == KLD_ERR_ARG && strstr(err.msg, "3 records") &&
              strstr(err.msg, "6") && strstr(err.msg, path),
          "short finish: %s", err.msg);
    float nanrow[4] = {0, NAN, 1, 2}, infrow[4] = {0, INFINITY, 1, 2};
    float ninf[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
    CHECK(kld_lcpp_base_write(w, nanrow, 1, &err) == KLD_ERR_ARG && strstr(err.msg, "logit 1"),
          "NaN row: %s", err.msg);
    CHECK(kld_lcpp_base_write(w, infrow, 1, &err) == KLD_ERR_ARG, "+inf row");
    CHECK(kld_lcpp_base_write(w, ninf, 1, &err) == KLD_ERR_ARG && strstr(err.msg, "no finite"),
          "all -inf row: %s", err.msg);
    CHECK_OK(kld_lcpp_base_write(w, row, 3, &err), err);
    CHECK(kld_lcpp_base_write(w, row, 1, &err) == KLD_ERR_ARG && strstr(err.msg, "6 of 6"),
          "a 7th record: %s", err.msg);
    kld_lcpp_base_writer_free(w); /* not finished: nothing stays behind */
    CHECK(!file_exists(tmp) && !file_exists(path), "unfinished writer removed %s", tmp);
}

/* A full disk: a 64 KiB tmpfs under the build folder when we may mount,
 * otherwise a file-size limit (EFBIG) for the same code path. */
static void test_writer_full_disk(void) {
    kld_error err = {0};
    char dir[512], path[600], tmp[620];
    snprintf(dir, sizeof dir, "%s/lcpp-enospc-%ld", kt_build_dir(), (long)getpid());
    bool mounted = false;
    if (geteuid() == 0 && mkdir(dir, 0700) == 0) {
        mounted = mount("tmpfs", dir, "tmpfs", 0, "size=64k") == 0;
        if (!mounted) rmdir(dir);
    }
    struct rlimit old_lim;
    bool limited = false;
    if (mounted) {
        snprintf(path, sizeof path, "%s/full.kld", dir);
    } else {
        snprintf(path, sizeof path, "%s/lcpp-efbig.kld", kt_build_dir());
        signal(SIGXFSZ, SIG_IGN);
        getrlimit(RLIMIT_FSIZE, &old_lim);
        struct rlimit lim = old_lim;
        lim.rlim_cur = 64 * 1024;
        limited = setrlimit(RLIMIT_FSIZE, &lim) == 0;
    }
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    printf("full disk via %s\n", mounted ? "a 64 KiB tmpfs" : limited ? "RLIMIT_FSIZE" : "nothing");
    CHECK(mounted || limited, "no way to simulate a full disk");

    /* 4 chunks x 31 records x 4008 bytes: about 500 KB */
    enum { CTX = 64, NV = 2000, NCH = 4, PER = CTX - 1 - CTX / 2 };
    int32_t *tokens = calloc(CTX * NCH, sizeof *tokens);
    float *logits = malloc(sizeof(float) * NV * PER);
    uint32_t seed = 7;
    for (int i = 0; i < NV * PER; i++) logits[i] = noise(&seed);
    kld_lcpp_base_writer *w = NULL;
    kld_status st = kld_lcpp_base_create(path, CTX, NV, NCH, tokens, &w, &err);
    CHECK_OK(st, err);
    for (int c = 0; st == KLD_OK && c < NCH; c++) st = kld_lcpp_base_write(w, logits, PER, &err);
    if (st == KLD_OK && w) st = kld_lcpp_base_finish(w, &err);
    CHECK(st == KLD_ERR_IO && strstr(err.msg, path) &&
              (strstr(err.msg, strerror(ENOSPC)) || strstr(err.msg, strerror(EFBIG))),
          "full disk: %s: %s", kld_status_name(st), err.msg);
    if (w) {
        CHECK(kld_lcpp_base_write(w, logits, 1, &err) == KLD_ERR_ARG, "write after a failure");
        CHECK(kld_lcpp_base_finish(w, &err) == KLD_ERR_ARG, "finish after a failure");
    }
    kld_lcpp_base_writer_free(w);
    CHECK(!file_exists(tmp) && !file_exists(path), "nothing left after a full disk");
    if (limited) setrlimit(RLIMIT_FSIZE, &old_lim);
    if (mounted) {
        CHECK(umount2(dir, 0) == 0, "umount %s: %s", dir, strerror(errno));
        rmdir(dir);
    }
    free(tokens);
    free(logits);
}

int main(void) {
    test_exact_records();
    test_encoder();
    test_writer_roundtrip();
    test_writer_errors();
    test_writer_full_disk();
    test_oracle();
    return kt_finish();
}
