/* test_bad_readers.c — crafted bad files for the readers added after the
 * model readers (issue 29.7): LoRA adapters in GGUF, PEFT folders
 * (adapter_config.json + adapter_model.safetensors), shard partials and kl
 * checkpoints, importance matrices (GGUF and legacy .dat), JSONL and text
 * corpora, chat templates. (Dump manifests and sidecars have
 * test_bad_dump, llama.cpp base files test_bad_lcpp.) Each reader gets at
 * least 20 variants derived from a valid file written here; each must be
 * refused with an error naming the file and the field or construct, never
 * a crash (ASan/UBSan run it in CI) and never accepted with a wrong value.
 * `test_bad_readers --write-seeds DIR` writes the valid files as seeds for
 * the fuzz harnesses (tests/fuzz/{lora,partial,corpus,imatrix}_seeds). */
#include "engine/lora.h"
#include "eval/corpus.h"
#include "io/gguf_writer.h"
#include "quant/quant.h"
#include "store/partial.h"
#include "testlib.h"

#include <errno.h>
#include <math.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char dir[600];

/* One variant's verdict: refused, naming path and every substring given. */
static int check_refusal(const char *reader, const char *label, kld_status st, const kld_error *err,
                         const char *path, const char *sub1, const char *sub2) {
    CHECK(st != KLD_OK, "%s %s: refused", reader, label);
    if (st == KLD_OK) return 0;
    CHECK(err->msg[0] && (!path || strstr(err->msg, path)), "%s %s: the error names %s: %s", reader, label,
          path ? path : "", err->msg);
    CHECK(!sub1 || strstr(err->msg, sub1), "%s %s: the error says '%s': %s", reader, label, sub1, err->msg);
    CHECK(!sub2 || strstr(err->msg, sub2), "%s %s: the error says '%s': %s", reader, label, sub2, err->msg);
    return 1;
}

static void write_text(const char *path, const char *text) { kt_write_file(path, text, strlen(text)); }

static void mkdir_p(const char *p) {
    CHECK(mkdir(p, 0755) == 0 || errno == EEXIST, "mkdir %s", p);
}

/* ================= LoRA: GGUF ================= */

enum { L_IN = 8, L_OUT = 8, L_R = 2 };
static float lora_a[L_IN * L_R], lora_b[L_R * L_OUT];

typedef struct lora_gguf_opts {
    const char *general_type, *adapter_type; /* NULL: the valid value; "" : absent */
    bool type_as_int, alpha_as_str;
    double alpha;                            /* default 4 */
    bool drop_a, drop_b, stray, empty_base, long_base, no_tensors;
} lora_gguf_opts;

static void write_lora_gguf(const char *path, const lora_gguf_opts *o) {
    kld_gguf_writer *w = kld_gguf_writer_create();
    kld_error err = {0};
    kld_gguf_writer_set_str(w, "general.architecture", "llama");
    const char *gt = o->general_type ? o->general_type : "adapter";
    if (o->type_as_int) kld_gguf_writer_set_u32(w, "general.type", 7);
    else if (*gt) kld_gguf_writer_set_str(w, "general.type", gt);
    const char *at = o->adapter_type ? o->adapter_type : "lora";
    if (*at) kld_gguf_writer_set_str(w, "adapter.type", at);
    if (o->alpha_as_str) kld_gguf_writer_set_str(w, "adapter.lora.alpha", "4");
    else kld_gguf_writer_set_f32(w, "adapter.lora.alpha", o->alpha != 0 ? (float)o->alpha : 4.0f);
    char base[400] = "blk.0.attn_q.weight", n[460];
    if (o->empty_base) base[0] = '\0';
    if (o->long_base) {
        memset(base, 'x', 200);
        base[200] = '\0';
    }
    if (!o->no_tensors) {
        if (!o->drop_a) {
            snprintf(n, sizeof n, "%s.lora_a", base);
            CHECK_OK(kld_gguf_writer_add_tensor(w, n, KLD_TYPE_F32, 2, (int64_t[]){L_IN, L_R}, lora_a,
                                                sizeof lora_a, &err), err);
        }
        if (!o->drop_b) {
            snprintf(n, sizeof n, "%s.lora_b", base);
            CHECK_OK(kld_gguf_writer_add_tensor(w, n, KLD_TYPE_F32, 2, (int64_t[]){L_R, L_OUT}, lora_b,
                                                sizeof lora_b, &err), err);
        }
        CHECK_OK(kld_gguf_writer_add_tensor(w, "blk.0.attn_k.weight.lora_a", KLD_TYPE_F32, 2,
                                            (int64_t[]){L_IN, L_R}, lora_a, sizeof lora_a, &err), err);
        CHECK_OK(kld_gguf_writer_add_tensor(w, "blk.0.attn_k.weight.lora_b", KLD_TYPE_F32, 2,
                                            (int64_t[]){L_R, L_OUT}, lora_b, sizeof lora_b, &err), err);
    }
    if (o->stray)
        CHECK_OK(kld_gguf_writer_add_tensor(w, "blk.0.attn_v.weight", KLD_TYPE_F32, 2,
                                            (int64_t[]){L_IN, L_R}, lora_a, sizeof lora_a, &err), err);
    CHECK_OK(kld_gguf_writer_write(w, path, &err), err);
    kld_gguf_writer_free(w);
}

static int lora_refused(const char *label, const char *path, const char *sub1, const char *sub2) {
    kld_lora_file f;
    kld_error err = {0};
    kld_status st = kld_lora_file_open(path, &f, &err);
    if (st == KLD_OK) kld_lora_file_close(&f);
    return check_refusal("LoRA", label, st, &err, path, sub1, sub2);
}

static void lora_gguf_cases(void) {
    for (int i = 0; i < L_IN * L_R; i++) lora_a[i] = 0.01f * (float)(i % 7) - 0.03f;
    for (int i = 0; i < L_R * L_OUT; i++) lora_b[i] = 0.02f * (float)(i % 5) - 0.04f;
    char good[700], p[700];
    snprintf(good, sizeof good, "%s/lora_good.gguf", dir);
    write_lora_gguf(good, &(lora_gguf_opts){0});
    kld_lora_file f;
    kld_error err = {0};
    CHECK_OK(kld_lora_file_open(good, &f, &err), err);
    CHECK(f.n == 2 && f.has_alpha && f.alpha == 4, "the valid GGUF adapter: 2 pairs, alpha 4");
    kld_lora_file_close(&f);
    static const struct {
        const char *label;
        lora_gguf_opts o;
        const char *sub1, *sub2;
    } cases[] = {
        {"general.type absent", {.general_type = ""}, "general.type", "missing"},
        {"general.type model", {.general_type = "model"}, "general.type", "'model'"},
        {"general.type an integer", {.type_as_int = true}, "general.type", "type"},
        {"adapter.type absent", {.adapter_type = ""}, "adapter.type", "missing"},
        {"adapter.type control vector", {.adapter_type = "control_vector"}, "adapter.type", "control_vector"},
        {"alpha a string", {.alpha_as_str = true}, "adapter.lora.alpha", "number"},
        {"alpha NaN", {.alpha = NAN}, "adapter.lora.alpha", "finite"},
        {"alpha infinite", {.alpha = INFINITY}, "adapter.lora.alpha", "finite"},
        {"A missing", {.drop_a = true}, "blk.0.attn_q.weight", "lora_a"},
        {"B missing", {.drop_b = true}, "blk.0.attn_q.weight", "lora_b"},
        {"a stray tensor", {.stray = true}, "blk.0.attn_v.weight", "not a LoRA tensor"},
        {"an empty base name", {.empty_base = true}, ".lora_a", "empty"},
        {"a 200-byte base name", {.long_base = true}, "xxxx", "too long"},
        {"no tensors", {.no_tensors = true}, "no LoRA tensors", NULL},
    };
    int refused = 0, n = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++, n++) {
        snprintf(p, sizeof p, "%s/lora_bad%zu.gguf", dir, i);
        write_lora_gguf(p, &cases[i].o);
        refused += lora_refused(cases[i].label, p, cases[i].sub1, cases[i].sub2);
    }
    /* truncations through header, metadata, tensor infos and data */
    size_t size;
    char *bytes = kt_read_file(good, &size);
    static const double cuts[] = {0, 0.01, 0.03, 0.08, 0.15, 0.25, 0.4, 0.6, 0.8, 0.95, 0.999};
    for (size_t i = 0; bytes && i < sizeof cuts / sizeof cuts[0]; i++, n++) {
        snprintf(p, sizeof p, "%s/lora_cut%zu.gguf", dir, i);
        kt_write_file(p, bytes, (size_t)(cuts[i] * (double)size));
        char label[64];
        snprintf(label, sizeof label, "cut at %.1f%%", cuts[i] * 100);
        refused += lora_refused(label, p, NULL, NULL);
    }
    free(bytes);
    CHECK(n >= 20 && refused == n, "LoRA GGUF: %d of %d crafted files refused", refused, n);
    printf("LoRA GGUF: %d crafted files, each refused by name\n", n);
}

/* ================= LoRA: PEFT ================= */

/* A safetensors file of F32 tensors: names[i] with shape (rows, cols). */
static void write_st(const char *path, const char *const *names, int n, const char *raw_header) {
    char header[4096] = "{";
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        size_t len = strlen(header);
        const bool is_a = strstr(names[i], "lora_A") != NULL;
        const int rows = is_a ? L_R : L_OUT, cols = is_a ? L_IN : L_R;
        snprintf(header + len, sizeof header - len, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%d,%d],"
                 "\"data_offsets\":[%zu,%zu]}", i ? "," : "", names[i], rows, cols, off,
                 off + (size_t)rows * cols * 4);
        off += (size_t)rows * cols * 4;
    }
    strcat(header, "}");
    const char *h = raw_header ? raw_header : header;
    uint64_t hl = strlen(h);
    size_t total = 8 + hl + off;
    uint8_t *buf = calloc(1, total);
    memcpy(buf, &hl, 8);
    memcpy(buf + 8, h, hl);
    for (size_t i = 0; i < off / 4; i++) {
        float v = 0.01f * (float)(i % 9);
        memcpy(buf + 8 + hl + 4 * i, &v, 4);
    }
    kt_write_file(path, buf, total);
    free(buf);
}

static const char *const PEFT_NAMES[] = {
    "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight",
    "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight",
};
static const char PEFT_CONFIG[] = "{\"peft_type\": \"LORA\", \"r\": 2, \"lora_alpha\": 4, "
                                  "\"target_modules\": [\"q_proj\"]}";

static void peft_folder(const char *folder, const char *config, const char *const *names, int n,
                        const char *raw_header) {
    char p[800];
    mkdir_p(folder);
    snprintf(p, sizeof p, "%s/adapter_config.json", folder);
    if (config) write_text(p, config);
    else remove(p);
    snprintf(p, sizeof p, "%s/adapter_model.safetensors", folder);
    if (names || raw_header) write_st(p, names, n, raw_header);
    else remove(p);
}

static void peft_cases(void) {
    char good[700], p[700];
    snprintf(good, sizeof good, "%s/peft_good", dir);
    peft_folder(good, PEFT_CONFIG, PEFT_NAMES, 2, NULL);
    kld_lora_file f;
    kld_error err = {0};
    CHECK_OK(kld_lora_file_open(good, &f, &err), err);
    CHECK(f.n == 1 && f.r == 2 && f.alpha == 4, "the valid PEFT folder: one pair, r 2, alpha 4");
    kld_lora_file_close(&f);
    static const char *const only_a[] = {"base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"};
    static const char *const only_b[] = {"base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight"};
    static const char *const stray[] = {PEFT_NAMES[0], PEFT_NAMES[1], "base_model.model.model.norm.weight"};
    static const char *const emb[] = {PEFT_NAMES[0], PEFT_NAMES[1],
                                      "base_model.model.model.embed_tokens.lora_embedding_A"};
    static const char *const twice[] = {PEFT_NAMES[0], PEFT_NAMES[1],
                                        "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"};
    static const char *const no_base[] = {"base_model.model..lora_A.weight", "base_model.model..lora_B.weight"};
    static const struct {
        const char *label, *config;
        const char *const *names;
        int n;
        const char *raw_header; /* a safetensors header instead of names */
        const char *file, *sub;  /* which file the error names, and what it says */
    } cases[] = {
        {"config not JSON", "{\"r\": 2,", PEFT_NAMES, 2, NULL, "adapter_config.json", "not a JSON object"},
        {"config an array", "[2]", PEFT_NAMES, 2, NULL, "adapter_config.json", "not a JSON object"},
        {"config empty", "", PEFT_NAMES, 2, NULL, "adapter_config.json", "JSON"},
        {"config keys twice", "{\"r\": 2, \"r\": 3}", PEFT_NAMES, 2, NULL, "adapter_config.json", "JSON"},
        {"r missing", "{\"lora_alpha\": 4}", PEFT_NAMES, 2, NULL, "adapter_config.json", "\"r\""},
        {"r zero", "{\"r\": 0}", PEFT_NAMES, 2, NULL, "adapter_config.json", "\"r\""},
        {"r a string", "{\"r\": \"2\"}", PEFT_NAMES, 2, NULL, "adapter_config.json", "\"r\""},
        {"r fractional", "{\"r\": 2.5}", PEFT_NAMES, 2, NULL, "adapter_config.json", "\"r\""},
        {"r negative", "{\"r\": -2}", PEFT_NAMES, 2, NULL, "adapter_config.json", "\"r\""},
        {"lora_alpha a string", "{\"r\": 2, \"lora_alpha\": \"4\"}", PEFT_NAMES, 2, NULL,
         "adapter_config.json", "lora_alpha"},
        {"peft_type IA3", "{\"peft_type\": \"IA3\", \"r\": 2}", PEFT_NAMES, 2, NULL, "adapter_config.json",
         "IA3"},
        {"use_dora", "{\"r\": 2, \"use_dora\": true}", PEFT_NAMES, 2, NULL, "adapter_config.json", "use_dora"},
        {"use_rslora", "{\"r\": 2, \"use_rslora\": true}", PEFT_NAMES, 2, NULL, "adapter_config.json",
         "use_rslora"},
        {"fan_in_fan_out", "{\"r\": 2, \"fan_in_fan_out\": true}", PEFT_NAMES, 2, NULL,
         "adapter_config.json", "fan_in_fan_out"},
        {"rank_pattern", "{\"r\": 2, \"rank_pattern\": {\"q_proj\": 4}}", PEFT_NAMES, 2, NULL,
         "adapter_config.json", "rank_pattern"},
        {"alpha_pattern", "{\"r\": 2, \"alpha_pattern\": {\"q_proj\": 4}}", PEFT_NAMES, 2, NULL,
         "adapter_config.json", "alpha_pattern"},
        {"module outside target_modules", "{\"r\": 2, \"target_modules\": [\"v_proj\"]}", PEFT_NAMES, 2,
         NULL, "target_modules", "q_proj"},
        {"config missing", NULL, PEFT_NAMES, 2, NULL, "adapter_config.json", NULL},
        {"safetensors missing", PEFT_CONFIG, NULL, 0, NULL, "adapter_model.safetensors", NULL},
        {"safetensors header not JSON", PEFT_CONFIG, NULL, 0, "{\"a\":", "adapter_model.safetensors", NULL},
        {"safetensors span outside the file", PEFT_CONFIG, NULL, 0,
         "{\"base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight\":{\"dtype\":\"F32\","
         "\"shape\":[2,8],\"data_offsets\":[0,4096]}}",
         "adapter_model.safetensors", NULL},
        {"only lora_A", PEFT_CONFIG, only_a, 1, NULL, "adapter_model.safetensors", "B (lora_b)"},
        {"only lora_B", PEFT_CONFIG, only_b, 1, NULL, "adapter_model.safetensors", "A (lora_a)"},
        {"a tensor that is not LoRA", PEFT_CONFIG, stray, 3, NULL, "model.norm.weight", "not a LoRA tensor"},
        {"LoRA on the embeddings", PEFT_CONFIG, emb, 3, NULL, "lora_embedding_A", "embeddings"},
        {"an A twice (prefixed and not)", PEFT_CONFIG, twice, 3, NULL, "adapter_model.safetensors", NULL},
        {"no module name", "{\"r\": 2}", no_base, 2, NULL, "adapter_model.safetensors", "empty"},
    };
    int refused = 0, n = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++, n++) {
        snprintf(p, sizeof p, "%s/peft_bad%zu", dir, i);
        peft_folder(p, cases[i].config, cases[i].names, cases[i].n, cases[i].raw_header);
        kld_status st = kld_lora_file_open(p, &f, &err);
        if (st == KLD_OK) kld_lora_file_close(&f);
        refused += check_refusal("PEFT", cases[i].label, st, &err, p, cases[i].file, cases[i].sub);
    }
    CHECK(n >= 20 && refused == n, "PEFT: %d of %d crafted folders refused", refused, n);
    printf("PEFT: %d crafted folders, each refused by name\n", n);
}

/* ================= shard partials ================= */

static kld_position partial_record(int i) {
    kld_position r = {.kld = 0.01 * (i + 1), .kld_rev = 0.012 * (i + 1), .jsd = 0.003 * (i + 1),
                      .nll_ref = 1.5 + i, .nll_arm = 1.6 + i, .kld_bound = 0.01 * (i + 1),
                      .p_ref_max = 0.5f, .mass = 1.0f, .token = 3 + i, .top_ref = 1, .top_arm = 2,
                      .ctx_pos = (uint32_t)i, .topk_hits = 3, .topk = 4};
    return r;
}

static uint8_t *partial_bytes(size_t *size) {
    char path[700];
    snprintf(path, sizeof path, "%s/partial_good.kldpart", dir);
    kld_partial_window w[2] = {{1, 3, 1}, {3, 2, 0}};
    kld_position r[5];
    for (int i = 0; i < 5; i++) r[i] = partial_record(i);
    kld_partial_head h = {.shard_k = 1, .shard_n = 2, .topk = 4, .n_windows_total = 4, .n_windows = 2,
                          .n_records = 5};
    memset(h.hash, 0x5a, 32);
    kld_error err = {0};
    CHECK_OK(kld_partial_write(path, &h, "{\"config\":{}}", w, r, &err), err);
    return (uint8_t *)kt_read_file(path, size);
}

/* The checksum over every byte before it, recomputed after a poke. */
static void reseal(uint8_t *b, size_t size) {
    unsigned int len = 0;
    EVP_Digest(b, size - 32, b + size - 32, &len, EVP_sha256(), NULL);
}

static int partial_refused(const char *label, const uint8_t *b, size_t size, const char *sub, int k) {
    char path[700];
    snprintf(path, sizeof path, "%s/partial_bad%d.kldpart", dir, k);
    kt_write_file(path, b, size);
    kld_partial *p = NULL;
    kld_error err = {0};
    kld_status st = kld_partial_open(path, &p, &err);
    if (st == KLD_OK) { /* the records are read as merge reads them */
        kld_position r[5];
        st = kld_partial_read(p, kld_partial_head_of(p)->n_records, r, &err);
        kld_partial_close(p);
    }
    return check_refusal("partial", label, st, &err, path, sub, NULL);
}

static void partial_cases(void) {
    size_t size;
    uint8_t *good = partial_bytes(&size);
    if (!good) return;
    const size_t meta_len = strlen("{\"config\":{}}"), win0 = 96 + meta_len, rec0 = win0 + 2 * 16;
    static const struct {
        const char *label;
        size_t off;  /* from the file start; SIZE_MAX - k: k-th record's byte (see below) */
        int width;   /* 1, 2, 4 or 8 */
        double value;
        bool is_f64, is_f32;
        int where; /* 0: off from the file start; 1: within window entry 1; 2: within record 1 */
        const char *sub;
    } pokes[] = {
        {"magic", 0, 1, 'X', 0, 0, 0, "magic"},
        {"version 3", 8, 4, 3, 0, 0, 0, "version"},
        {"version 1 (an older kldeval)", 8, 4, 1, 0, 0, 0, "older kldeval"},
        {"shard k = n", 12, 4, 2, 0, 0, 0, "shard"},
        {"shard n = 0", 16, 4, 0, 0, 0, 0, "shard"},
        {"shard mode 2", 20, 4, 2, 0, 0, 0, "shard mode"},
        {"top-k 0", 24, 4, 0, 0, 0, 0, "top-k"},
        {"flags bit 3", 28, 4, 8, 0, 0, 0, "flags"},
        {"W smaller than the windows", 32, 8, 1, 0, 0, 0, "windows"},
        {"windows 3", 40, 8, 3, 0, 0, 0, "windows"},
        {"records 6", 48, 8, 6, 0, 0, 0, NULL},
        {"meta_len past the end", 56, 8, 1e6, 0, 0, 0, NULL},
        {"meta_len 2^40", 56, 8, 1099511627776.0, 0, 0, 0, "meta_len"},
        {"meta not UTF-8", 96, 1, 0xff, 0, 0, 0, "UTF-8"},
        {"window index 2 (not in shard 1/2)", 0, 8, 2, 0, 0, 1, "window entry"},
        {"window new_doc 2", 12, 1, 2, 0, 0, 1, "window entry"},
        {"window padding", 13, 1, 1, 0, 0, 1, "window entry"},
        {"window records 9", 8, 4, 9, 0, 0, 1, "records"},
        {"record kld NaN", 0, 8, NAN, 1, 0, 2, "impossible"},
        {"record kld_rev +inf", 8, 8, INFINITY, 1, 0, 2, "impossible"},
        {"record jsd NaN", 16, 8, NAN, 1, 0, 2, "impossible"},
        {"record p_ref_max 2", 56, 4, 2, 0, 1, 2, "impossible"},
        {"record mass -1", 60, 4, -1, 0, 1, 2, "impossible"},
        {"record top_ref -5", 68, 4, -5, 0, 0, 2, "impossible"},
        {"record token -7", 64, 4, -7, 0, 0, 2, "invalid"},
        {"record top-k 5", 82, 2, 5, 0, 0, 2, "invalid"},
        {"record hits > top-k", 80, 2, 9, 0, 0, 2, "invalid"},
        {"record ordered > hits", 84, 2, 4, 0, 0, 2, "invalid"},
        {"record truncated 2", 92, 1, 2, 0, 0, 2, "invalid"},
        {"record padding", 94, 1, 1, 0, 0, 2, "invalid"},
    };
    int refused = 0, n = 0;
    uint8_t *b = malloc(size);
    for (size_t i = 0; i < sizeof pokes / sizeof pokes[0]; i++, n++) {
        memcpy(b, good, size);
        size_t off = pokes[i].off;
        if (pokes[i].where == 2) off += rec0 + KLD_PARTIAL_RECORD_BYTES;
        if (pokes[i].where == 1) off += win0 + 16;
        if (pokes[i].is_f64) {
            double v = pokes[i].value;
            memcpy(b + off, &v, 8);
        } else if (pokes[i].is_f32) {
            float v = (float)pokes[i].value;
            memcpy(b + off, &v, 4);
        } else {
            int64_t v = (int64_t)pokes[i].value;
            memcpy(b + off, &v, (size_t)pokes[i].width); /* little-endian */
        }
        reseal(b, size);
        refused += partial_refused(pokes[i].label, b, size, pokes[i].sub, n);
    }
    /* not resealed: the checksum; truncated; a stub */
    memcpy(b, good, size);
    b[rec0 + 3] ^= 1;
    refused += partial_refused("a flipped bit", b, size, "checksum", n++);
    refused += partial_refused("32 bytes short", good, size - 32, NULL, n++);
    refused += partial_refused("a 40-byte stub", good, 40, "too short", n++);
    free(b);
    free(good);
    CHECK(n >= 20 && refused == n, "partials: %d of %d crafted files refused", refused, n);
    printf("shard partials: %d crafted files, each refused by name\n", n);
}

/* ================= importance matrices ================= */

/* A legacy .dat: entries (name, ncall, values), then the trailer. */
static size_t dat_bytes(uint8_t *out, int32_t ncall, float v0, const char *trailer_name) {
    size_t pos = 0;
#define PUT(x) (memcpy(out + pos, &(x), sizeof(x)), pos += sizeof(x))
    int32_t count = 2, len, nval = 4, chunks = 8;
    PUT(count);
    const char *names[2] = {"blk.0.attn_q.weight", "blk.0.ffn_up.weight"};
    for (int e = 0; e < 2; e++) {
        len = (int32_t)strlen(names[e]);
        PUT(len);
        memcpy(out + pos, names[e], (size_t)len), pos += (size_t)len;
        PUT(ncall);
        PUT(nval);
        for (int j = 0; j < nval; j++) {
            float v = j == 0 && e == 1 ? v0 : 1.0f + (float)j;
            PUT(v);
        }
    }
    if (trailer_name) {
        PUT(chunks);
        len = (int32_t)strlen(trailer_name);
        PUT(len);
        memcpy(out + pos, trailer_name, (size_t)len), pos += (size_t)len;
    }
#undef PUT
    return pos;
}

typedef struct imat_gguf_opts {
    bool no_chunk_count, chunk_count_str, no_datasets, datasets_int, no_counts, no_sums;
    bool sums_f16, counts_wrong_rows, no_entries;
    float count, sum0;
} imat_gguf_opts;

static void write_imat_gguf(const char *path, const imat_gguf_opts *o) {
    kld_gguf_writer *w = kld_gguf_writer_create();
    kld_error err = {0};
    if (o->chunk_count_str) kld_gguf_writer_set_str(w, "imatrix.chunk_count", "8");
    else if (!o->no_chunk_count) kld_gguf_writer_set_u32(w, "imatrix.chunk_count", 8);
    kld_gguf_writer_set_u32(w, "imatrix.chunk_size", 512);
    const char *ds[] = {"calibration.txt"};
    if (o->datasets_int) kld_gguf_writer_set_u32(w, "imatrix.datasets", 1);
    else if (!o->no_datasets) kld_gguf_writer_set_arr_str(w, "imatrix.datasets", ds, 1);
    static float sums[8];
    static uint16_t sums16[8];
    for (int i = 0; i < 8; i++) sums[i] = 2.0f * (float)(i + 1);
    sums[0] = o->sum0 != 0 ? o->sum0 : sums[0];
    float counts[3] = {o->count != 0 ? o->count : 4.0f, 0.0f, 0.0f}; /* expert 1 saw no tokens; [2]: the 3-matrix variant */
    if (!o->no_entries) {
        if (!o->no_sums) {
            if (o->sums_f16)
                CHECK_OK(kld_gguf_writer_add_tensor(w, "blk.0.ffn_up_exps.weight.in_sum2", KLD_TYPE_F16, 2,
                                                    (int64_t[]){4, 2}, sums16, sizeof sums16, &err), err);
            else
                CHECK_OK(kld_gguf_writer_add_tensor(w, "blk.0.ffn_up_exps.weight.in_sum2", KLD_TYPE_F32, 2,
                                                    (int64_t[]){4, 2}, sums, sizeof sums, &err), err);
        }
        if (!o->no_counts)
            CHECK_OK(kld_gguf_writer_add_tensor(w, "blk.0.ffn_up_exps.weight.counts", KLD_TYPE_F32, 2,
                                                (int64_t[]){o->counts_wrong_rows ? 3 : 1,
                                                            o->counts_wrong_rows ? 1 : 2},
                                                counts, o->counts_wrong_rows ? 12 : 8, &err), err);
    } else {
        CHECK_OK(kld_gguf_writer_add_tensor(w, "blk.0.ffn_up_exps.weight", KLD_TYPE_F32, 2,
                                            (int64_t[]){4, 2}, sums, sizeof sums, &err), err);
    }
    CHECK_OK(kld_gguf_writer_write(w, path, &err), err);
    kld_gguf_writer_free(w);
}

static int imat_refused(const char *label, const char *path, const char *sub) {
    kld_imatrix *im = NULL;
    kld_error err = {0};
    kld_status st = kld_imatrix_read(path, &im, &err);
    kld_imatrix_free(im);
    return check_refusal("imatrix", label, st, &err, path, sub, NULL);
}

static void imatrix_cases(void) {
    char p[700];
    uint8_t dat[1024];
    int refused = 0, n = 0;
    /* the valid files */
    snprintf(p, sizeof p, "%s/imat_good.gguf", dir);
    write_imat_gguf(p, &(imat_gguf_opts){.count = 4.4f});
    kld_imatrix *im = NULL;
    kld_error err = {0};
    CHECK_OK(kld_imatrix_read(p, &im, &err), err);
    if (im) {
        const kld_imatrix_entry *e = kld_imatrix_find(im, "blk.0.ffn_up_exps.weight");
        CHECK(im->n == 1 && im->chunks == 8 && e && e->n == 8 && e->weights[1] == 4.0f / 4.0f &&
                  e->weights[5] == 1.0f && im->dataset && !strcmp(im->dataset, "calibration.txt"),
              "imatrix.gguf: in_sum2 / round(count) per expert (count 4.4 → 4), 1 for the expert without "
              "tokens, chunks and dataset");
        kld_imatrix_free(im);
    }
    snprintf(p, sizeof p, "%s/imat_good.dat", dir);
    kt_write_file(p, dat, dat_bytes(dat, 4, 1.0f, "calibration.txt"));
    CHECK_OK(kld_imatrix_read(p, &im, &err), err);
    kld_imatrix_free(im);
    /* GGUF form */
    static const struct {
        const char *label;
        imat_gguf_opts o;
        const char *sub;
    } g[] = {
        {"chunk_count missing", {.no_chunk_count = true}, "imatrix.chunk_count"},
        {"chunk_count a string", {.chunk_count_str = true}, "imatrix.chunk_count"},
        {"datasets missing", {.no_datasets = true}, "imatrix.datasets"},
        {"datasets an integer", {.datasets_int = true}, "imatrix.datasets"},
        {"counts missing", {.no_counts = true}, ".counts"},
        {"sums missing", {.no_sums = true}, ".in_sum2"},
        {"sums f16", {.sums_f16 = true}, "f16"},
        {"counts of 3 matrices for 8 values", {.counts_wrong_rows = true}, "matrices"},
        {"no entries (a model's tensor)", {.no_entries = true}, "no imatrix entries"},
        {"a negative count", {.count = -2}, "token count"},
        {"a NaN count", {.count = NAN}, "token count"},
        {"a negative sum", {.sum0 = -1}, "sum of squares"},
        {"an infinite sum", {.sum0 = INFINITY}, "sum of squares"},
    };
    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++, n++) {
        snprintf(p, sizeof p, "%s/imat_bad%zu.gguf", dir, i);
        write_imat_gguf(p, &g[i].o);
        refused += imat_refused(g[i].label, p, g[i].sub);
    }
    /* legacy form */
    static const struct {
        const char *label;
        int32_t ncall;
        float v0;
        const char *sub;
    } d[] = {
        {"ncall negative", -3, 1.0f, "ncall"},
        {"a NaN value", 4, NAN, "sum of squares"},
        {"a negative value", 4, -1.0f, "sum of squares"},
    };
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++, n++) {
        snprintf(p, sizeof p, "%s/imat_bad%zu.dat", dir, i);
        kt_write_file(p, dat, dat_bytes(dat, d[i].ncall, d[i].v0, "calibration.txt"));
        refused += imat_refused(d[i].label, p, d[i].sub);
    }
    size_t len = dat_bytes(dat, 4, 1.0f, "calibration.txt"); /* the valid file again */
    static const struct {
        const char *label;
        size_t off;
        int32_t v;
        const char *sub;
    } pk[] = {
        {"entry count 0", 0, 0, "no imatrix entries"},
        {"entry count 1000", 0, 1000, "entry count"},
        {"name length 0", 4, 0, "name length"},
        {"name length past the end", 4, 100000, "name length"},
        {"nval 0", 4 + 4 + 19 + 4, 0, "values"},
        {"nval past the end", 4 + 4 + 19 + 4, 4096, "values"},
        {"a trailer length past the end", 0, 0, "trailer"},
    };
    for (size_t i = 0; i < sizeof pk / sizeof pk[0]; i++, n++) {
        uint8_t b[1024];
        memcpy(b, dat, len);
        size_t blen = len;
        if (!strcmp(pk[i].label, "a trailer length past the end")) {
            int32_t big = 999;
            memcpy(b + len - 15 - 4, &big, 4);
        } else {
            memcpy(b + pk[i].off, &pk[i].v, 4);
        }
        snprintf(p, sizeof p, "%s/imat_poke%zu.dat", dir, i);
        kt_write_file(p, b, blen);
        refused += imat_refused(pk[i].label, p, pk[i].sub);
    }
    /* the same name twice */
    {
        uint8_t b[1024];
        memcpy(b, dat, len);
        memcpy(b + 4 + 4 + 19 + 4 + 4 + 16 + 4, "blk.0.attn_q.weight", 19);
        snprintf(p, sizeof p, "%s/imat_twice.dat", dir);
        kt_write_file(p, b, len);
        refused += imat_refused("an entry twice", p, "twice");
        n++;
    }
    CHECK(n >= 20 && refused == n, "imatrix: %d of %d crafted files refused", refused, n);
    printf("imatrix (GGUF and .dat): %d crafted files, each refused by name\n", n);
}

/* ================= corpora (JSONL and text) ================= */

static int corpus_refused(const char *label, const char *format, const void *bytes, size_t size,
                          const char *sub, int k) {
    char path[700];
    snprintf(path, sizeof path, "%s/corpus_bad%d.jsonl", dir, k);
    kt_write_file(path, bytes, size);
    kld_corpus *c = NULL;
    kld_error err = {0};
    kld_status st = kld_corpus_load_text(path, format, &c, &err);
    kld_corpus_free(c);
    return check_refusal("corpus", label, st, &err, path, sub, NULL);
}

static void corpus_cases(void) {
    static const struct {
        const char *label, *text, *sub;
    } j[] = {
        {"not JSON", "{\"text\": \"a\"\n", "not a JSON object"},
        {"an array line", "[\"a\"]\n", "not a JSON object"},
        {"a string line", "\"a\"\n", "not a JSON object"},
        {"a number line", "17\n", "not a JSON object"},
        {"neither text nor messages", "{\"prompt\": \"a\"}\n", "neither"},
        {"both text and messages", "{\"text\": \"a\", \"messages\": []}\n", "both"},
        {"text a number", "{\"text\": 5}\n", "\"text\" is not a string"},
        {"text null", "{\"text\": null}\n", "\"text\" is not a string"},
        {"text \\u0000", "{\"text\": \"a\\u0000b\"}\n", ":1:"},
        {"a key twice", "{\"text\": \"a\", \"text\": \"b\"}\n", ":1:"},
        {"messages not an array", "{\"messages\": {\"role\": \"user\"}}\n", "\"messages\""},
        {"messages empty", "{\"messages\": []}\n", "\"messages\""},
        {"a message not an object", "{\"messages\": [\"hi\"]}\n", "messages[0]"},
        {"role missing", "{\"messages\": [{\"content\": \"hi\"}]}\n", "\"role\""},
        {"role a number", "{\"messages\": [{\"role\": 1, \"content\": \"hi\"}]}\n", "\"role\""},
        {"content missing", "{\"messages\": [{\"role\": \"user\"}]}\n", "\"content\""},
        {"content an array", "{\"messages\": [{\"role\": \"user\", \"content\": [1]}]}\n", "\"content\""},
        {"a bad third line", "{\"text\": \"a\"}\n{\"text\": \"b\"}\n{\"text\": }\n", ":3:"},
        {"only blank lines", "\n\n\r\n", "no documents"},
        {"empty", "", "no documents"},
        {"invalid UTF-8", "{\"text\": \"a\"}\n{\"text\": \"\xc3\x28\"}\n", "line 2"},
        {"a NUL byte", "{\"text\": \"a\"}\n\0{\"text\": \"b\"}\n", "NUL"},
        {"a UTF-8 BOM", "\xef\xbb\xbf{\"text\": \"a\"}\n", "not a JSON object"},
    };
    int refused = 0, n = 0;
    for (size_t i = 0; i < sizeof j / sizeof j[0]; i++, n++) {
        size_t size = strlen(j[i].text);
        if (!strcmp(j[i].label, "a NUL byte")) size = 14 + 1 + 14;
        refused += corpus_refused(j[i].label, "jsonl", j[i].text, size, j[i].sub, n);
    }
    /* text format */
    refused += corpus_refused("text: a NUL byte", "text", "one\ntw\0o\n", 9, "line 2", n++);
    refused += corpus_refused("text: invalid UTF-8", "text", "ok\n\xff\xfe\n", 6, "line 2", n++);
    refused += corpus_refused("text: only comments", "text", "# a\n# b\n", 8, "no documents", n++);
    refused += corpus_refused("an unknown format", "csv", "a\n", 2, "corpus format", n++);
    CHECK(n >= 20 && refused == n, "corpora: %d of %d crafted files refused", refused, n);
    printf("corpora (JSONL and text): %d crafted files, each refused by name\n", n);
}

/* ================= chat templates ================= */

static void chat_template_cases(void) {
    char path[700];
    snprintf(path, sizeof path, "%s/chat.jsonl", dir);
    write_text(path, "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}]}\n");
    static const struct {
        const char *label, *tmpl, *sub;
    } t[] = {
        {"an unclosed expression", "{{ messages[0]['content'] ", NULL},
        {"an unclosed tag", "{% for m in messages %}{{ m.content }}", "{% endfor %}"},
        {"endif without if", "{% endif %}", "endif"},
        {"endfor without for", "{{ 1 }}{% endfor %}", "endfor"},
        {"else twice", "{% if true %}a{% else %}b{% else %}c{% endif %}", "else"},
        {"elif after else", "{% if true %}a{% else %}b{% elif false %}c{% endif %}", "elif"},
        {"an unknown tag", "{% macro m() %}x{% endmacro %}", "macro"},
        {"an unknown filter", "{{ messages | shuffle }}", "shuffle"},
        {"an unknown test", "{% if messages is prime %}x{% endif %}", "prime"},
        {"an unknown method", "{{ 'a'.zfill(3) }}", "zfill"},
        {"an unterminated string", "{{ 'abc }}", NULL},
        {"an unterminated comment", "{# note", NULL},
        {"for without in", "{% for m messages %}x{% endfor %}", NULL},
        {"set without =", "{% set x %}", NULL},
        {"a dangling operator", "{{ 1 + }}", NULL},
        {"unbalanced parentheses", "{{ (1 + 2 }}", NULL},
        {"an unbalanced bracket", "{{ messages[0 }}", NULL},
        {"raise_exception", "{{ raise_exception('Only user and assistant roles are supported') }}",
         "Only user and assistant roles are supported"},
        {"division by zero", "{{ 1 / 0 }}", "zero"},
        {"an undefined function", "{{ strftime_now('%Y') }}", "strftime_now"},
        {"calling a string", "{{ 'a'() }}", NULL},
        {"a stray endblock", "{% endblock %}", "endblock"},
    };
    int refused = 0, n = 0;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++, n++) {
        kld_corpus *c = NULL;
        kld_error err = {0};
        CHECK_OK(kld_corpus_load_text(path, "jsonl", &c, &err), err);
        if (!c) return;
        kld_chat_template tm = {.text = (char *)t[i].tmpl, .bos = "<s>", .eos = "</s>"};
        snprintf(tm.origin, sizeof tm.origin, "%s/crafted%zu.gguf: GGUF tokenizer.chat_template", dir, i);
        kld_status st = kld_corpus_render_chat(c, &tm, "crafted.gguf", &err);
        kld_corpus_free(c);
        char where[700];
        snprintf(where, sizeof where, "crafted%zu.gguf", i);
        refused += check_refusal("chat template", t[i].label, st, &err, where, "chat template", t[i].sub);
    }
    CHECK(n >= 20 && refused == n, "chat templates: %d of %d crafted templates refused", refused, n);
    printf("chat templates: %d crafted templates, each refused naming the template's origin\n", n);
}

/* ================= seeds for the fuzz harnesses ================= */

static int write_seeds(const char *out) {
    char p[900];
    snprintf(dir, sizeof dir, "%s", out);
    static const char *const sub[] = {"lora_seeds", "partial_seeds", "corpus_seeds", "imatrix_seeds"};
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/%s", out, sub[i]);
        mkdir_p(p);
    }
    /* LoRA: byte 0 even + a GGUF adapter; odd + u16 config length, config, safetensors */
    for (int i = 0; i < L_IN * L_R; i++) lora_a[i] = 0.01f * (float)(i % 7);
    for (int i = 0; i < L_R * L_OUT; i++) lora_b[i] = 0.02f * (float)(i % 5);
    snprintf(p, sizeof p, "%s/seed.gguf", out);
    write_lora_gguf(p, &(lora_gguf_opts){0});
    size_t n;
    char *g = kt_read_file(p, &n);
    remove(p);
    uint8_t *buf = malloc(n + 1);
    buf[0] = 0;
    memcpy(buf + 1, g, n);
    snprintf(p, sizeof p, "%s/lora_seeds/gguf", out);
    kt_write_file(p, buf, n + 1);
    free(buf), free(g);
    snprintf(p, sizeof p, "%s/seed.safetensors", out);
    write_st(p, PEFT_NAMES, 2, NULL);
    char *st = kt_read_file(p, &n);
    remove(p);
    size_t cl = strlen(PEFT_CONFIG);
    buf = malloc(3 + cl + n);
    buf[0] = 1, buf[1] = (uint8_t)(cl & 0xff), buf[2] = (uint8_t)(cl >> 8);
    memcpy(buf + 3, PEFT_CONFIG, cl);
    memcpy(buf + 3 + cl, st, n);
    snprintf(p, sizeof p, "%s/lora_seeds/peft", out);
    kt_write_file(p, buf, 3 + cl + n);
    free(buf), free(st);
    /* partial: byte 0 odd + the file without its checksum */
    uint8_t *part = partial_bytes(&n);
    snprintf(p, sizeof p, "%s/partial_good.kldpart", out);
    remove(p);
    buf = malloc(n);
    buf[0] = 1;
    memcpy(buf + 1, part, n - 32);
    snprintf(p, sizeof p, "%s/partial_seeds/unsealed", out);
    kt_write_file(p, buf, n - 31);
    free(buf), free(part);
    /* corpus: byte 0 picks text (0), jsonl (1), auto (2) */
    static const char text[] = "\x00# a comment\nOnce upon a time there was a cat.\n\nThe end.\n";
    static const char jsonl[] = "\x01{\"text\": \"Once upon a time.\"}\n{\"messages\": [{\"role\": \"user\", "
                                "\"content\": \"Hi\"}, {\"role\": \"assistant\", \"content\": \"Hello!\"}]}\n";
    snprintf(p, sizeof p, "%s/corpus_seeds/text", out);
    kt_write_file(p, text, sizeof text - 1);
    snprintf(p, sizeof p, "%s/corpus_seeds/jsonl", out);
    kt_write_file(p, jsonl, sizeof jsonl - 1);
    /* imatrix: the two forms as they are */
    snprintf(p, sizeof p, "%s/imatrix_seeds/gguf", out);
    write_imat_gguf(p, &(imat_gguf_opts){0});
    uint8_t dat[1024];
    snprintf(p, sizeof p, "%s/imatrix_seeds/dat", out);
    kt_write_file(p, dat, dat_bytes(dat, 4, 1.0f, "calibration.txt"));
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--write-seeds")) return write_seeds(argv[2]);
    snprintf(dir, sizeof dir, "%s/bad_readers", kt_build_dir());
    mkdir_p(dir);
    lora_gguf_cases();
    peft_cases();
    partial_cases();
    imatrix_cases();
    corpus_cases();
    chat_template_cases();
    return kt_finish();
}
