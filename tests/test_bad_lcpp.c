/* test_bad_lcpp.c — bad llama.cpp `--kl-divergence-base` files: a valid
 * small base file is written with kld_lcpp_base_create into the build
 * folder, then corrupted variants are derived from its bytes (truncations at
 * every field boundary of the header and the first record, wrong magic, bad
 * header values, out-of-range tokens, bad record floats and codes). Each
 * variant is opened and, if that succeeds, every record is read: the result
 * must be the expected non-OK status with a message naming the file and the
 * field. The committed fuzz seeds (tests/fuzz/lcpp_seeds/) must stay valid.
 * Run it under ASan+UBSan too. */
#include "testlib.h"

#include "store/lcpp_base.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* the valid file: n_ctx 8, n_vocab 5, n_chunk 2: 3 records per chunk of
 * nv = 10 uint16 (20 bytes) */
enum { CTX = 8, NV = 5, NCH = 2, PER = CTX - 1 - CTX / 2, REC_BYTES = 20 };
enum { OFF_TOKENS = 20, OFF_RECORDS = OFF_TOKENS + CTX * NCH * 4 };
enum { FILE_BYTES = OFF_RECORDS + NCH * PER * REC_BYTES };

static unsigned char good[FILE_BYTES];
static int n_variants;

static void put_i32(unsigned char *p, int32_t v) { memcpy(p, &v, 4); }
static void put_f32(unsigned char *p, float v) { memcpy(p, &v, 4); }

/* Opens path (n_vocab_expected) and reads every record; returns the first
 * failure's status (KLD_OK when all of it is valid). */
static kld_status open_and_read(const char *path, int32_t expect_vocab, kld_error *err) {
    kld_lcpp_base *b = NULL;
    kld_status st = kld_lcpp_base_open(path, expect_vocab, &b, err);
    if (st) return st;
    const kld_lcpp_base_info *in = kld_lcpp_base_info_of(b);
    float *lp = malloc((size_t)in->n_vocab * sizeof *lp);
    for (int64_t c = 0; st == KLD_OK && c < in->n_chunk; c++)
        for (int64_t k = 0; st == KLD_OK && k < in->records_per_chunk; k++)
            st = kld_lcpp_base_read(b, c, k, 1, lp, NULL, NULL, err);
    free(lp);
    kld_lcpp_base_close(b);
    return st;
}

/* One variant: the bytes, the status and a substring the message must
 * contain besides the path. */
static void variant(const char *name, const unsigned char *bytes, size_t size, int32_t expect_vocab,
                    kld_status want, const char *field) {
    char path[512];
    snprintf(path, sizeof path, "%s/bad_lcpp_%s.kld", kt_build_dir(), name);
    kt_write_file(path, bytes, size);
    kld_error err = {0};
    kld_status st = open_and_read(path, expect_vocab, &err);
    n_variants++;
    printf("%-22s %s\n", name, st ? err.msg : "OK");
    CHECK(st == want, "%s: expected %s, got %s: %s", name, kld_status_name(want),
          kld_status_name(st), st ? err.msg : "");
    if (st != KLD_OK) {
        CHECK(err.status == st && strstr(err.msg, path) != NULL, "%s: message does not name %s: %s",
              name, path, err.msg);
        CHECK(strstr(err.msg, field) != NULL, "%s: message lacks '%s': %s", name, field, err.msg);
    }
    remove(path);
}

static void truncated(size_t size, const char *field) {
    char name[64];
    snprintf(name, sizeof name, "trunc_%zu", size);
    variant(name, good, size, NV, KLD_ERR_FORMAT, field);
}

/* good with one int32 at off replaced */
static void with_i32(const char *name, size_t off, int32_t v, kld_status want, const char *field) {
    unsigned char b[FILE_BYTES];
    memcpy(b, good, sizeof b);
    put_i32(b + off, v);
    variant(name, b, sizeof b, NV, want, field);
}

static void with_f32(const char *name, size_t off, float v, const char *field) {
    unsigned char b[FILE_BYTES];
    memcpy(b, good, sizeof b);
    put_f32(b + off, v);
    variant(name, b, sizeof b, NV, KLD_ERR_FORMAT, field);
}

static void make_good(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/bad_lcpp_good.kld", kt_build_dir());
    int32_t tokens[CTX * NCH];
    for (int i = 0; i < CTX * NCH; i++) tokens[i] = i % NV;
    float logits[NCH * PER * NV];
    for (int i = 0; i < NCH * PER * NV; i++) logits[i] = (float)((i * 37) % 11) - 3.0f;
    kld_error err = {0};
    kld_lcpp_base_writer *w = NULL;
    CHECK_OK(kld_lcpp_base_create(path, CTX, NV, NCH, tokens, &w, &err), err);
    if (w) CHECK_OK(kld_lcpp_base_write(w, logits, NCH * PER, &err), err);
    if (w) CHECK_OK(kld_lcpp_base_finish(w, &err), err);
    kld_lcpp_base_writer_free(w);
    size_t size;
    char *bytes = kt_read_file(path, &size);
    CHECK(size == FILE_BYTES, "good file: %zu bytes, want %d", size, FILE_BYTES);
    memcpy(good, bytes, size < FILE_BYTES ? size : FILE_BYTES);
    free(bytes);
    CHECK_OK(open_and_read(path, NV, &err), err);
    remove(path);
}

static void seeds(void) {
    static const char *files[] = {"tests/fuzz/lcpp_seeds/ctx4_vocab3_chunk1.kld",
                                  "tests/fuzz/lcpp_seeds/ctx8_vocab4_chunk2.kld"};
    for (size_t i = 0; i < 2; i++) {
        kld_error err = {0};
        CHECK_OK(open_and_read(files[i], 0, &err), err);
    }
}

int main(void) {
    make_good();
    seeds();

    /* truncations: inside/at each header field, inside the tokens, at every
     * field of the first record, one byte short, one byte long, empty */
    truncated(0, "magic");
    truncated(4, "magic");
    truncated(8, "n_ctx");
    truncated(10, "n_ctx");
    truncated(12, "n_vocab");
    truncated(14, "n_vocab");
    truncated(16, "n_chunk");
    truncated(19, "n_chunk");
    truncated(OFF_TOKENS, "size");
    truncated(OFF_TOKENS + 2, "size");
    truncated(OFF_TOKENS + 4, "size");
    truncated(OFF_RECORDS - 4, "size");
    truncated(OFF_RECORDS, "size");      /* before scale */
    truncated(OFF_RECORDS + 2, "size");  /* inside scale */
    truncated(OFF_RECORDS + 4, "size");  /* before min_log_prob */
    truncated(OFF_RECORDS + 8, "size");  /* before the codes */
    for (int i = 1; i <= NV; i++) truncated(OFF_RECORDS + 8 + 2 * i, "size"); /* after code i-1 */
    truncated(OFF_RECORDS + REC_BYTES, "size"); /* after the pad: one record */
    truncated(FILE_BYTES - 1, "size");
    {
        unsigned char b[FILE_BYTES + 1];
        memcpy(b, good, FILE_BYTES);
        b[FILE_BYTES] = 0;
        variant("long_by_1", b, sizeof b, NV, KLD_ERR_FORMAT, "size");
        unsigned char big[FILE_BYTES + REC_BYTES] = {0};
        memcpy(big, good, FILE_BYTES);
        variant("extra_record", big, sizeof big, NV, KLD_ERR_FORMAT, "size");
    }

    /* magic */
    {
        unsigned char b[FILE_BYTES];
        memcpy(b, good, sizeof b);
        memcpy(b, "_logitz_", 8);
        variant("magic_z", b, sizeof b, NV, KLD_ERR_FORMAT, "magic");
        memcpy(b, "_LOGITS_", 8);
        variant("magic_upper", b, sizeof b, NV, KLD_ERR_FORMAT, "magic");
        memset(b, 0, 8);
        variant("magic_zero", b, sizeof b, NV, KLD_ERR_FORMAT, "magic");
        memcpy(b, "GGUF\3\0\0\0", 8);
        variant("magic_gguf", b, sizeof b, NV, KLD_ERR_FORMAT, "magic");
    }

    /* header values */
    with_i32("n_ctx_0", 8, 0, KLD_ERR_FORMAT, "n_ctx");
    with_i32("n_ctx_3", 8, 3, KLD_ERR_FORMAT, "n_ctx");
    with_i32("n_ctx_neg", 8, -8, KLD_ERR_FORMAT, "n_ctx");
    with_i32("n_ctx_min", 8, INT32_MIN, KLD_ERR_FORMAT, "n_ctx");
    with_i32("n_ctx_huge", 8, INT32_MAX, KLD_ERR_FORMAT, "n_ctx");
    with_i32("n_ctx_2p20", 8, 1 << 20, KLD_ERR_FORMAT, "n_ctx");
    with_i32("n_ctx_9", 8, 9, KLD_ERR_FORMAT, "size"); /* 4 records per chunk */
    with_i32("n_ctx_7", 8, 7, KLD_ERR_FORMAT, "size");
    with_i32("n_vocab_0", 12, 0, KLD_ERR_FORMAT, "n_vocab");
    with_i32("n_vocab_1", 12, 1, KLD_ERR_FORMAT, "n_vocab");
    with_i32("n_vocab_neg", 12, -5, KLD_ERR_FORMAT, "n_vocab");
    with_i32("n_vocab_min", 12, INT32_MIN, KLD_ERR_FORMAT, "n_vocab");
    with_i32("n_vocab_huge", 12, INT32_MAX, KLD_ERR_MISMATCH, "n_vocab");
    with_i32("n_vocab_4", 12, 4, KLD_ERR_MISMATCH, "n_vocab");
    {
        unsigned char b[FILE_BYTES];
        memcpy(b, good, sizeof b);
        variant("n_vocab_expected", b, sizeof b, 6, KLD_ERR_MISMATCH, "n_vocab");
        put_i32(b + 12, INT32_MAX); /* without an expectation: a size error */
        variant("n_vocab_huge_free", b, sizeof b, 0, KLD_ERR_FORMAT, "size");
        put_i32(b + 12, 4); /* nv 8 instead of 10 */
        variant("n_vocab_4_free", b, sizeof b, 0, KLD_ERR_FORMAT, "size");
    }
    with_i32("n_chunk_0", 16, 0, KLD_ERR_FORMAT, "n_chunk");
    with_i32("n_chunk_neg", 16, -1, KLD_ERR_FORMAT, "n_chunk");
    with_i32("n_chunk_min", 16, INT32_MIN, KLD_ERR_FORMAT, "n_chunk");
    with_i32("n_chunk_huge", 16, INT32_MAX, KLD_ERR_FORMAT, "size");
    with_i32("n_chunk_1", 16, 1, KLD_ERR_FORMAT, "size");
    with_i32("n_chunk_3", 16, 3, KLD_ERR_FORMAT, "size");
    {
        /* every product at its largest: the implied size overflows 64 bits */
        unsigned char b[FILE_BYTES];
        memcpy(b, good, sizeof b);
        put_i32(b + 8, INT32_MAX);
        put_i32(b + 12, INT32_MAX);
        put_i32(b + 16, INT32_MAX);
        variant("size_overflow", b, sizeof b, 0, KLD_ERR_FORMAT, "overflows");
        put_i32(b + 12, NV);
        variant("n_ctx_n_chunk_huge", b, sizeof b, NV, KLD_ERR_FORMAT, "size");
    }

    /* tokens */
    with_i32("token_first_5", OFF_TOKENS, NV, KLD_ERR_FORMAT, "tokens[0]");
    with_i32("token_first_neg", OFF_TOKENS, -1, KLD_ERR_FORMAT, "tokens[0]");
    with_i32("token_last_5", OFF_RECORDS - 4, NV, KLD_ERR_FORMAT, "tokens[15]");
    with_i32("token_mid_max", OFF_TOKENS + 4 * 9, INT32_MAX, KLD_ERR_FORMAT, "tokens[9]");
    with_i32("token_mid_min", OFF_TOKENS + 4 * 9, INT32_MIN, KLD_ERR_FORMAT, "tokens[9]");

    /* record floats: in the first and the last record */
    const size_t first = OFF_RECORDS, last = FILE_BYTES - REC_BYTES;
    with_f32("scale_nan", first, NAN, "scale");
    with_f32("scale_inf", first, INFINITY, "scale");
    with_f32("scale_ninf", first, -INFINITY, "scale");
    with_f32("scale_neg", first, -1.0f, "scale");
    with_f32("scale_neg_tiny", first, -0x1p-140f, "scale");
    with_f32("scale_nan_last", last, NAN, "scale");
    with_f32("scale_neg_last", last, -2.0f, "scale");
    with_f32("mlp_pos", first + 4, 1.0f, "min_log_prob");
    with_f32("mlp_pos_tiny", first + 4, 0x1p-140f, "min_log_prob");
    with_f32("mlp_nan", first + 4, NAN, "min_log_prob");
    with_f32("mlp_inf", first + 4, INFINITY, "min_log_prob");
    with_f32("mlp_ninf", first + 4, -INFINITY, "min_log_prob");
    with_f32("mlp_pos_last", last + 4, 3.0f, "min_log_prob");
    with_f32("mlp_nan_last", last + 4, NAN, "min_log_prob");
    /* consistent signs, but the maximum's log-prob scale * 65535 +
     * min_log_prob is not -lse in [-ln 5, 0] */
    with_f32("scale_huge", first, 1e30f, "maximum's log-prob");
    with_f32("scale_max", first, 3.4e38f, "maximum's log-prob");
    with_f32("mlp_far", first + 4, -100.0f, "maximum's log-prob");
    with_f32("mlp_zero", first + 4, 0.0f, "maximum's log-prob");
    with_f32("mlp_far_last", last + 4, -1e30f, "maximum's log-prob");
    {
        /* scale 0 (all equal) needs min_log_prob = -ln n_vocab */
        unsigned char b[FILE_BYTES];
        memcpy(b, good, sizeof b);
        put_f32(b + first, 0.0f);
        put_f32(b + first + 4, -3.0f);
        variant("scale_0_mlp_-3", b, sizeof b, NV, KLD_ERR_FORMAT, "maximum's log-prob");
        put_f32(b + first + 4, (float)-log(5.0));
        memset(b + first + 8, 0, 2 * NV);
        variant("scale_0_ok", b, sizeof b, NV, KLD_OK, "");
    }
    {
        /* scale > 0 and no code is 65535 */
        unsigned char b[FILE_BYTES];
        memcpy(b, good, sizeof b);
        for (int i = 0; i < NV; i++) memcpy(b + first + 8 + 2 * i, &(uint16_t){100}, 2);
        variant("codes_no_max", b, sizeof b, NV, KLD_ERR_FORMAT, "codes");
        memcpy(b, good, sizeof b);
        memset(b + last + 8, 0, 2 * NV);
        variant("codes_all_zero_last", b, sizeof b, NV, KLD_ERR_FORMAT, "codes");
        memcpy(b, good, sizeof b);
        for (int i = 0; i < NV; i++) memcpy(b + first + 8 + 2 * i, &(uint16_t){65534}, 2);
        variant("codes_65534", b, sizeof b, NV, KLD_ERR_FORMAT, "codes");
        /* a 65535 only in the pad does not count */
        memcpy(b, good, sizeof b);
        memset(b + first + 8, 0, 2 * NV);
        memcpy(b + first + 8 + 2 * NV, &(uint16_t){65535}, 2);
        variant("codes_max_in_pad", b, sizeof b, NV, KLD_ERR_FORMAT, "codes");
    }

    /* not files */
    {
        kld_error err = {0};
        const char *missing = "tests/does-not-exist.kld";
        kld_status st = open_and_read(missing, 0, &err);
        CHECK(st == KLD_ERR_IO && strstr(err.msg, missing), "missing file: %s", err.msg);
        st = open_and_read("tests", 0, &err);
        CHECK(st == KLD_ERR_IO && strstr(err.msg, "tests") && strstr(err.msg, "regular"),
              "a directory: %s", err.msg);
        n_variants += 2;
    }

    printf("%d bad variants\n", n_variants);
    CHECK(n_variants >= 60, "only %d variants", n_variants);
    return kt_finish();
}
