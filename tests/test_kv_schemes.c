/* test_kv_schemes.c — the KV cache schemes beyond llama.cpp's block types
 * (src/engine/kv_scheme.h): MLX affine groups (round trip within the bound
 * kv_mlx.c documents, MLX's sign convention and bit packing on a known
 * group, zeros exact), the rotated scalar quantizer (the rotation is
 * orthogonal, the codebook is the Lloyd–Max quantizer of N(0,1), the mean
 * relative error within TurboQuant's bound), row sizes, the lever syntax
 * and kv_config.json files, good and bad. */
#include "engine/internal.h"
#include "engine/kv_scheme.h"
#include "testlib.h"

#include <math.h>
#include <stdlib.h>

static uint64_t rng = 88172645463325252ull;

static double uniform(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static double gauss(void) {
    double u = uniform() + 1e-300, v = uniform();
    return sqrt(-2 * log(u)) * cos(2 * M_PI * v);
}

/* A K/V-like row: Gaussian values, a per-row offset, a few outlier channels. */
static void kv_like_row(float *x, int64_t n, int kind) {
    const double offset = kind == 1 ? 3.0 * gauss() : 0, scale = kind == 2 ? 40.0 : 1.0;
    for (int64_t i = 0; i < n; i++) x[i] = (float)(scale * gauss() + offset);
    if (kind == 1)
        for (int k = 0; k < 3; k++) x[(int64_t)(uniform() * (double)n)] *= 12.0f;
}

static void test_mlx_round_trip(void) {
    static const int bits[] = {2, 3, 4, 6, 8}, groups[] = {32, 64, 128};
    const int64_t n = 256;
    float x[256], y[256];
    uint8_t row[512];
    for (int bi = 0; bi < 5; bi++)
        for (int gi = 0; gi < 3; gi++) {
            const int b = bits[bi], g = groups[gi];
            const uint32_t id = KLD_KV_MLX(b, g);
            CHECK(kld_kv_row_bytes(id, n) == (uint64_t)(n * b / 8 + 4 * n / g), "mlx%dg%d row bytes", b, g);
            int64_t worst_over = 0, count = 0;
            double sq = 0, sq_step = 0;
            for (int t = 0; t < 60; t++) {
                kv_like_row(x, n, t % 3);
                kld_kv_store_row(id, x, row, n);
                kld_kv_load_rows(id, row, y, 1, n);
                for (int64_t g0 = 0; g0 < n; g0 += g) {
                    float lo = INFINITY, hi = -INFINITY, amax = 0;
                    for (int j = 0; j < g; j++) {
                        lo = fminf(lo, x[g0 + j]);
                        hi = fmaxf(hi, x[g0 + j]);
                        amax = fmaxf(amax, fabsf(x[g0 + j]));
                    }
                    const double R = (double)hi - lo;
                    const double bound = R / ((1 << b) - 2) + ldexp(amax + R, -10) + 1e-6 * amax;
                    for (int j = 0; j < g; j++) {
                        const double e = fabs((double)x[g0 + j] - y[g0 + j]);
                        if (e > bound) worst_over++;
                        sq += e * e;
                        count++;
                    }
                    sq_step += R * R / ((double)((1 << b) - 1) * ((1 << b) - 1)) * g;
                }
            }
            CHECK(worst_over == 0, "mlx%dg%d: every value within R/(2^B-2) + 2^-10(max|x| + R) (%lld over)",
                  b, g, (long long)worst_over);
            /* rounding to the grid: the mean squared error is about step²/12 */
            const double ratio = sq / (sq_step / 12.0);
            CHECK(ratio > 0.5 && ratio < 1.6, "mlx%dg%d: mean squared error %.3g step²/12", b, g, ratio);
            (void)count;
        }
    /* zeros stay exactly zero */
    for (int64_t i = 0; i < 64; i++) x[i] = 0;
    kld_kv_store_row(KLD_KV_MLX(4, 64), x, row, 64);
    kld_kv_load_rows(KLD_KV_MLX(4, 64), row, y, 1, 64);
    bool zero = true;
    for (int64_t i = 0; i < 64; i++) zero = zero && y[i] == 0;
    CHECK(zero, "a zero group reconstructs exactly");
    /* 0..15 in 4 bits: |min| <= |max|, so MLX's scale is negative (-1),
     * the bias is the max (15) and 0 codes as 15: exact, packed low nibble first */
    for (int64_t i = 0; i < 32; i++) x[i] = (float)(i % 16);
    kld_kv_store_row(KLD_KV_MLX(4, 32), x, row, 32);
    kld_kv_load_rows(KLD_KV_MLX(4, 32), row, y, 1, 32);
    bool exact = true;
    for (int64_t i = 0; i < 32; i++) exact = exact && y[i] == x[i];
    CHECK(exact, "a group on the grid reconstructs exactly");
    CHECK(row[0] == 0xEF && row[1] == 0xCD, "codes 15, 14, 13, 12 packed as ef cd: %02x %02x", row[0], row[1]);
    CHECK(row[16] == 0x00 && row[17] == 0xBC && row[18] == 0x80 && row[19] == 0x4B,
          "scale -1 and bias 15 as float16: %02x%02x %02x%02x", row[17], row[16], row[19], row[18]);
}

static void test_rot(void) {
    /* the codebook: Lloyd–Max for N(0,1) (Max 1960: 1 bit ±0.7979, 2 bits ±0.4528 ±1.5104) */
    const float *c1 = kld_kv_rot_levels(1), *c2 = kld_kv_rot_levels(2);
    CHECK(fabsf(c1[1] - 0.7979f) < 1e-4f && c1[0] == -c1[1], "1-bit levels ±%.4f", c1[1]);
    CHECK(fabsf(c2[2] - 0.4528f) < 1e-4f && fabsf(c2[3] - 1.5104f) < 1e-4f, "2-bit levels %.4f %.4f", c2[2], c2[3]);
    static const int64_t dims[] = {64, 128, 80};
    float x[128], y[128], z[128];
    uint8_t row[300];
    for (int di = 0; di < 3; di++) {
        const int64_t n = dims[di];
        /* R is orthogonal: norms kept, R^T R = I */
        kv_like_row(x, n, 1);
        memcpy(y, x, sizeof x);
        kld_kv_rot_forward(y, n);
        double nx = 0, ny = 0, back = 0;
        memcpy(z, y, sizeof y);
        kld_kv_rot_inverse(z, n);
        for (int64_t i = 0; i < n; i++) {
            nx += (double)x[i] * x[i];
            ny += (double)y[i] * y[i];
            back = fmax(back, fabs((double)z[i] - x[i]));
        }
        CHECK(fabs(sqrt(ny / nx) - 1) < 1e-6 && back < 1e-5 * sqrt(nx), "n=%lld: rotation keeps the norm, inverts",
              (long long)n);
        for (int b = 1; b <= 8; b++) {
            const uint32_t id = KLD_KV_ROT(b);
            CHECK(kld_kv_row_bytes(id, n) == (uint64_t)(2 + n * b / 8), "rot%d row bytes", b);
            /* TurboQuant Theorem 1: E|x - x~|^2/|x|^2 <= (sqrt(3) pi / 2) 4^-b, for
             * any input (the rotation makes the law); 5% for sampling 400 vectors */
            for (int kind = 0; kind < 2; kind++) {
                double rel = 0;
                for (int t = 0; t < 400; t++) {
                    kv_like_row(x, n, kind);
                    kld_kv_store_row(id, x, row, n);
                    kld_kv_load_rows(id, row, y, 1, n);
                    double e = 0, s = 0;
                    for (int64_t i = 0; i < n; i++) {
                        e += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
                        s += (double)x[i] * x[i];
                    }
                    rel += e / s / 400;
                }
                const double bound = sqrt(3) * M_PI / 2 * pow(4, -b);
                CHECK(rel <= 1.05 * bound && rel > 0.25 * bound, "rot%d n=%lld %s rows: mean relative "
                      "squared error %.4g (bound %.4g)", b, (long long)n, kind ? "offset/outlier" : "Gaussian",
                      rel, bound);
            }
        }
    }
    for (int64_t i = 0; i < 64; i++) x[i] = 0;
    kld_kv_store_row(KLD_KV_ROT(3), x, row, 64);
    kld_kv_load_rows(KLD_KV_ROT(3), row, y, 1, 64);
    bool zero = true;
    for (int64_t i = 0; i < 64; i++) zero = zero && y[i] == 0;
    CHECK(zero, "a zero vector reconstructs exactly");
}

static void expect_parse_error(const char *text, const char *a, const char *b) {
    kld_levers l;
    kld_levers_default(&l);
    kld_error err = {0};
    kld_status st = kld_levers_parse(text, &l, &err);
    CHECK(st != KLD_OK && strstr(err.msg, a) && (!b || strstr(err.msg, b)), "'%s' is rejected naming '%s'%s%s: %s",
          text, a, b ? " and " : "", b ? b : "", err.msg);
}

static void test_levers(void) {
    kld_levers l;
    kld_error err = {0};
    char buf[1024];
    static const char *const canonical[] = {"kv=mlx4g64", "kv_k=rot4,kv_v=rot3", "kv=blk:3-4=mlx8g64,mlx4g64",
                                            "kv_k=mlx8g32,kv_v=f32", "kv=q8_0,kv_start=16",
                                            "kv_k=blk:0=rot8,q4_0,kv_v=mlx6g128,kv_start=5,act=q8"};
    for (size_t i = 0; i < sizeof canonical / sizeof canonical[0]; i++) {
        kld_levers_default(&l);
        CHECK_OK(kld_levers_parse(canonical[i], &l, &err), err);
        kld_levers_format(&l, buf, sizeof buf);
        CHECK(!strcmp(buf, canonical[i]), "canonical form of %s: %s", canonical[i], buf);
        kld_levers back;
        kld_levers_default(&back);
        CHECK_OK(kld_levers_parse(buf, &back, &err), err);
        CHECK(!memcmp(&back, &l, sizeof l), "%s parses back to the same levers", buf);
        CHECK(!kld_levers_is_reference(&l), "%s is not the reference", buf);
    }
    kld_levers_default(&l);
    CHECK_OK(kld_levers_parse("kv=blk:3-4=mlx8g64,mlx4g64", &l, &err), err);
    CHECK(kld_kv_map_type(&l.kv_k, 3) == KLD_KV_MLX(8, 64) && kld_kv_map_type(&l.kv_v, 5) == KLD_KV_MLX(4, 64),
          "the map's lookups");
    expect_parse_error("kv=mlx5g64", "'mlx5g64'", "mlx<B>g<G>");
    expect_parse_error("kv=mlx4g48", "'mlx4g48'", "G 32 64 128");
    expect_parse_error("kv=rot9", "'rot9'", "rot<B>");
    expect_parse_error("kv=rot0", "'rot0'", NULL);
    expect_parse_error("kv_k=blk:1=mlx4", "'mlx4'", NULL);
    expect_parse_error("kv_start=-1", "kv_start", "'-1'");
}

static void write_text(const char *path, const char *text) { kt_write_file(path, text, strlen(text)); }

static void expect_config_error(const char *name, const char *text, const char *a, const char *b) {
    char path[600], lever[700];
    snprintf(path, sizeof path, "%s/kv_config_%s.json", kt_build_dir(), name);
    if (text) write_text(path, text);
    else remove(path);
    snprintf(lever, sizeof lever, "kv_config=%s", path);
    kld_levers l;
    kld_levers_default(&l);
    kld_error err = {0};
    kld_status st = kld_levers_parse(lever, &l, &err);
    CHECK(st != KLD_OK && strstr(err.msg, path) && strstr(err.msg, a) && (!b || strstr(err.msg, b)),
          "kv_config %s is refused naming the file, '%s'%s%s: %s", name, a, b ? " and " : "", b ? b : "", err.msg);
    CHECK(kld_levers_is_reference(&l), "a refused kv_config leaves the levers unchanged");
}

static void test_kv_config(void) {
    /* the seed's e4b form: 8-bit layers 3, 4, 9, 10, 11, 14, 4-bit elsewhere, group 64 */
    char path[600], lever[700], text[4096], buf[1024];
    size_t n = 0;
    n += (size_t)snprintf(text + n, sizeof text - n, "[");
    for (int i = 0; i < 16; i++) {
        int eight = i == 3 || i == 4 || i == 9 || i == 10 || i == 11 || i == 14;
        n += (size_t)snprintf(text + n, sizeof text - n, "%s{\"layer_idx\": %d, \"bits\": %d, \"group_size\": 64}",
                              i ? ", " : "", i, eight ? 8 : 4);
    }
    snprintf(text + n, sizeof text - n, "]");
    snprintf(path, sizeof path, "%s/kv_config_e4b.json", kt_build_dir());
    write_text(path, text);
    snprintf(lever, sizeof lever, "kv_config=%s,kv_start=0", path);
    kld_levers l;
    kld_levers_default(&l);
    kld_error err = {0};
    CHECK_OK(kld_levers_parse(lever, &l, &err), err);
    kld_levers_format(&l, buf, sizeof buf);
    CHECK(!strcmp(buf, "kv=blk:3-4=mlx8g64,blk:9-11=mlx8g64,blk:14=mlx8g64,blk:0-15=mlx4g64,f32"),
          "the seed's kv_config as a map: %s", buf);
    bool all = true;
    for (int i = 0; i < 20; i++) {
        int eight = i == 3 || i == 4 || i == 9 || i == 10 || i == 11 || i == 14;
        uint32_t want = i >= 16 ? KLD_TYPE_F32 : KLD_KV_MLX(eight ? 8 : 4, 64);
        all = all && kld_kv_map_type(&l.kv_k, i) == want && kld_kv_map_type(&l.kv_v, i) == want;
    }
    CHECK(all, "every layer gets the file's scheme, unlisted layers f32");
    /* a sparse file: only the layers it lists */
    snprintf(path, sizeof path, "%s/kv_config_sparse.json", kt_build_dir());
    write_text(path, "[{\"layer_idx\": 1, \"bits\": 2, \"group_size\": 32, \"note\": \"ignored\"},"
                     " {\"layer_idx\": 5, \"bits\": 6, \"group_size\": 128}]");
    snprintf(lever, sizeof lever, "kv_config=%s", path);
    kld_levers_default(&l);
    CHECK_OK(kld_levers_parse(lever, &l, &err), err);
    kld_levers_format(&l, buf, sizeof buf);
    CHECK(!strcmp(buf, "kv=blk:5=mlx6g128,blk:1=mlx2g32,f32"), "a sparse kv_config: %s", buf);

    expect_config_error("missing", NULL, "unable to open", NULL);
    expect_config_error("syntax", "[{\"layer_idx\": 0,", "line", NULL);
    expect_config_error("object", "{\"layer_idx\": 0}", "non-empty JSON array", NULL);
    expect_config_error("empty", "[]", "non-empty JSON array", NULL);
    expect_config_error("entry", "[3]", "entry 0", "not an object");
    expect_config_error("nobits", "[{\"layer_idx\": 0, \"group_size\": 64}]", "entry 0", "'bits'");
    expect_config_error("bits5", "[{\"layer_idx\": 0, \"bits\": 4, \"group_size\": 64},"
                        " {\"layer_idx\": 1, \"bits\": 5, \"group_size\": 64}]", "entry 1", "'bits': 5");
    expect_config_error("group", "[{\"layer_idx\": 0, \"bits\": 4, \"group_size\": 100}]", "'group_size': 100", "32, 64, 128");
    expect_config_error("type", "[{\"layer_idx\": \"0\", \"bits\": 4, \"group_size\": 64}]", "'layer_idx'", "integer");
    expect_config_error("negative", "[{\"layer_idx\": -2, \"bits\": 4, \"group_size\": 64}]", "'layer_idx': -2", NULL);
    expect_config_error("twice", "[{\"layer_idx\": 2, \"bits\": 4, \"group_size\": 64},"
                        " {\"layer_idx\": 2, \"bits\": 8, \"group_size\": 64}]", "entry 1", "listed twice");
}

int main(void) {
    kld_kernels_init();
    test_mlx_round_trip();
    test_rot();
    test_levers();
    test_kv_config();
    return kt_finish();
}
