/* test_forward_synth.c — architectures without a shared oracle (qwen3,
 * gemma3): small random models synthesized here, run through the engine
 * and through the naive double-precision reference of
 * test_forward_models.c. The reference is first validated on the shared
 * models it can also run (llama, qwen2, phi3, gemma2) against their float64
 * and llama.cpp oracles. Hugging Face copies of the synthesized models
 * (safetensors + config.json, Gemma norms stored as w - 1) must give the
 * GGUF's logits. */
#include "engine/engine.h"
#include "tensor/types.h"
#include "test_forward_models.h"
#include "testlib.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>

#define SH KT_SHARED

static int32_t *read_ids(const char *path, int64_t *n) {
    size_t size = 0;
    char *buf = kt_read_file(path, &size);
    *n = (int64_t)(size / 4);
    int32_t *ids = malloc(size ? size : 4);
    memcpy(ids, buf, size);
    free(buf);
    return ids;
}


/* The reference against an oracle file: 'n' float64 (max |d| <= 1e-4),
 * 'c' llama.cpp (mean KLD <= 1e-4, argmax all). */
static void validate_reference(const char *model, const char *ids_path, const char *oracle, char kind) {
    int64_t n = 0, nv = 0;
    int32_t *ids = read_ids(ids_path, &n);
    float *ref = ref_forward(model, ids, n, &nv);
    CHECK(ref != NULL, "reference forward of %s", model);
    if (ref) {
        size_t size = 0;
        char *buf = kt_read_file(oracle, &size);
        CHECK(size == (size_t)(n * nv) * 4, "%s: size %zu", oracle, size);
        if (size == (size_t)(n * nv) * 4) {
            tf_cmp c = tf_compare((const float *)(const void *)buf, ref, n, nv);
            printf("reference %-36s vs %s: max|d| %.2e KLD %.2e argmax %d/%" PRId64 "\n", model,
                   oracle + strlen(SH "/oracle/"), c.max_abs, c.mean_kld, c.same_argmax, n);
            if (kind == 'n') CHECK(c.max_abs <= 1e-4, "reference %s: max |d| %g", model, c.max_abs);
            else CHECK(c.mean_kld <= 1e-4, "reference %s: KLD %g", model, c.mean_kld);
            CHECK(c.same_argmax == n, "reference %s: argmax %d/%" PRId64, model, c.same_argmax, n);
        }
        free(buf);
    }
    free(ref);
    free(ids);
}

/* The reference over gemma2's 48-token window check (float64 columns). */
static void validate_reference_swa48(void) {
    int64_t n = 0, nv = 0;
    int32_t *ids = read_ids(SH "/oracle/gemma2/swa48.ids.i32", &n);
    float *ref = ref_forward(SH "/models/gemma2/f16.gguf", ids, n, &nv);
    char *txt = kt_read_file(SH "/oracle/gemma2/swa48.txt", NULL);
    int rows = 0, same = 0;
    double worst = 0;
    for (char *line = strtok(txt, "\n"); line && ref; line = strtok(NULL, "\n")) {
        int t, id, ca, na;
        double cm, cl, cp, nm, nl;
        if (line[0] == '#' || sscanf(line, "%d %d | %d %lf %lf %lf | %d %lf %lf", &t, &id, &ca, &cm,
                                     &cl, &cp, &na, &nm, &nl) != 9 || t < 0 || t >= n)
            continue;
        const float *row = ref + (int64_t)t * nv;
        same += tf_argmax(row, nv) == na;
        worst = fmax(worst, fmax(fabs(row[tf_argmax(row, nv)] - nm), fabs(tf_lse(row, nv) - nl)));
        rows++;
    }
    printf("reference gemma2 swa48: argmax %d/%d, worst |d| %.2e\n", same, rows, worst);
    CHECK(rows == 48 && same == 48 && worst <= 1e-4, "reference gemma2 swa48: %d/%d, %g", same, rows, worst);
    free(txt);
    free(ref);
    free(ids);
}

static void check_synth(const char *arch, uint32_t type, bool llama3) {
    char dir[512], gguf[600], hf[600];
    char tbuf[16];
    const char *tb = kld_type_name(type, tbuf);
    snprintf(dir, sizeof dir, "%s/synth-%s%s-%s", kt_build_dir(), arch, llama3 ? "3" : "", tb);
    mkdir(dir, 0755);
    snprintf(gguf, sizeof gguf, "%s/model.gguf", dir);
    snprintf(hf, sizeof hf, "%s/hf", dir);
    mkdir(hf, 0755);
    synth_shape s;
    synth_default(&s, arch);
    s.mat_type = type;
    if (llama3) { /* a short original context so that all three regimes occur */
        s.rope_base = 500;
        s.llama3_factor = 8;
        s.llama3_low = 1;
        s.llama3_high = 4;
        s.llama3_orig_ctx = 64;
    }
    bool ok = synth_write_gguf(&s, gguf) && synth_write_hf(&s, gguf, hf);
    CHECK(ok, "synthesize %s", gguf);
    if (!ok) return;
    const int64_t n = 40;
    int32_t ids[40];
    uint64_t x = 12345;
    for (int i = 0; i < n; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((x >> 33) % (uint64_t)s.n_vocab);
    }
    int64_t nv = 0, nv2 = 0;
    float *ref = ref_forward(gguf, ids, n, &nv);
    float *eng = tf_engine_logits(gguf, ids, n, n, 2, &nv2);
    if (!ref || !eng || nv != nv2) {
        CHECK(false, "%s: reference and engine must both run", gguf);
        free(ref);
        free(eng);
        return;
    }
    tf_cmp c = tf_compare(ref, eng, n, nv);
    printf("%s %-5s engine vs reference: max|d| %.2e argmax %d/%" PRId64 "\n", arch,
           tb, c.max_abs, c.same_argmax, n);
    CHECK(c.max_abs <= 1e-3, "%s %s: engine vs reference max |d| %g", arch, tb, c.max_abs);
    CHECK(c.same_argmax == n, "%s %s: argmax %d/%" PRId64, arch, tb, c.same_argmax, n);
    static const int64_t chunks[] = {1, 7};
    for (int i = 0; i < 2; i++) {
        float *part = tf_engine_logits(gguf, ids, n, chunks[i], 2, &nv2);
        CHECK(part && memcmp(part, eng, sizeof(float) * (size_t)(n * nv)) == 0,
              "%s: chunks of %" PRId64 " must equal one pass", arch, chunks[i]);
        free(part);
    }
    float *from_hf = tf_engine_logits(hf, ids, n, n, 2, &nv2);
    if (from_hf && nv2 == nv) {
        tf_cmp h = tf_compare(eng, from_hf, n, nv);
        printf("%s %-5s HF copy vs GGUF: max|d| %.2e\n", arch, tb, h.max_abs);
        CHECK(h.max_abs <= 1e-4, "%s: HF copy vs GGUF max |d| %g", arch, h.max_abs);
    } else {
        CHECK(false, "%s: HF copy must load with the same vocabulary", arch);
    }
    free(from_hf);
    free(ref);
    free(eng);
}

int main(void) {
    validate_reference(SH "/models/rand-llama/f16.gguf", SH "/oracle/rand-llama/ids.i32",
                       SH "/oracle/rand-llama/f16.numpy-f64.logits.f32", 'n');
    validate_reference(SH "/models/rand-qwen2/q8_0.gguf", SH "/oracle/rand-qwen2/ids.i32",
                       SH "/oracle/rand-qwen2/q8_0.numpy-f64.logits.f32", 'n');
    validate_reference(SH "/models/phi3/f16.gguf", SH "/oracle/phi3/ids.i32",
                       SH "/oracle/phi3/f16.numpy-f64.logits.f32", 'n');
    validate_reference(SH "/models/gemma2/f16.gguf", SH "/oracle/gemma2/ids.i32",
                       SH "/oracle/gemma2/f16.logits.f32", 'c');
    validate_reference_swa48();
    check_synth("qwen3", KLD_TYPE_F16, false);
    check_synth("qwen3", KLD_TYPE_Q8_0, false);
    check_synth("gemma3", KLD_TYPE_F16, false);
    check_synth("gemma3", KLD_TYPE_Q8_0, false);
    check_synth("llama", KLD_TYPE_F16, true);
    return kt_finish();
}
