/* lora_fixture.c — a seeded LoRA adapter for a synthesized llama (every
 * attention and FFN matrix plus the output head, rank 4), written as
 * llama.cpp's GGUF adapter or as a PEFT folder, and its merged-weight
 * deltas for the float64 reference (test_lora.c, test_lora_merge.c). */
#include "lora_fixture.h"
#include "testlib.h"

#include "io/gguf_writer.h"
#include "tensor/types.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

static uint64_t rng_state;
static float uniform(void) { /* splitmix64 → [-1, 1) */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (float)((double)(z >> 11) / 4503599627370496.0 - 1.0);
}

void adapter_add(adapter *ad, const char *name, int64_t in, int64_t out, bool zero_b) {
    lora_t *t = &ad->t[ad->n++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->in = in, t->out = out, t->r = RANK;
    t->a = malloc(sizeof(float) * (size_t)(RANK * in));
    t->b = malloc(sizeof(float) * (size_t)(RANK * out));
    for (int64_t i = 0; i < RANK * in; i++) t->a[i] = 0.3f * uniform();
    for (int64_t i = 0; i < RANK * out; i++) t->b[i] = zero_b ? 0.0f : 0.05f * uniform();
}

void make_adapter(adapter *ad, const synth_shape *sh, uint64_t seed, bool zero_b) {
    memset(ad, 0, sizeof *ad);
    rng_state = seed;
    const int64_t E = sh->n_embd, nq = sh->n_head * sh->head_dim, nk = sh->n_head_kv * sh->head_dim,
                  F = sh->n_ff;
    for (int il = 0; il < sh->n_layer; il++) {
        char n[64];
        static const char *const sfx[] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate",
                                          "ffn_up", "ffn_down"};
        const int64_t ins[] = {E, E, E, nq, E, E, F}, outs[] = {nq, nk, nk, E, F, F, E};
        for (int k = 0; k < 7; k++) {
            snprintf(n, sizeof n, "blk.%d.%s.weight", il, sfx[k]);
            adapter_add(ad, n, ins[k], outs[k], zero_b);
        }
    }
    adapter_add(ad, "output.weight", E, sh->n_vocab, zero_b);
}

void free_adapter(adapter *ad) {
    for (int i = 0; i < ad->n; i++) free(ad->t[i].a), free(ad->t[i].b);
}

/* ---- the two file forms ---- */

void write_gguf_adapter(const adapter *ad, const gguf_opts *o, const char *path) {
    kld_gguf_writer *w = kld_gguf_writer_create();
    kld_gguf_writer_set_str(w, "general.architecture", o->arch ? o->arch : "llama");
    kld_gguf_writer_set_str(w, "general.type", o->general_type ? o->general_type : "adapter");
    kld_gguf_writer_set_str(w, "adapter.type", "lora");
    if (!o->no_alpha) kld_gguf_writer_set_f32(w, "adapter.lora.alpha", (float)o->alpha);
    kld_error err = {0};
    for (int i = 0; i < ad->n; i++) {
        const lora_t *t = &ad->t[i];
        char n[96];
        int64_t nea[2] = {t->in, t->r}, neb[2] = {t->r, t->out};
        snprintf(n, sizeof n, "%s.lora_a", t->name);
        CHECK_OK(kld_gguf_writer_add_tensor(w, n, KLD_TYPE_F32, 2, nea, t->a,
                                            (uint64_t)(t->in * t->r) * 4, &err), err);
        snprintf(n, sizeof n, "%s.lora_b", t->name);
        CHECK_OK(kld_gguf_writer_add_tensor(w, n, KLD_TYPE_F32, 2, neb, t->b,
                                            (uint64_t)(t->out * t->r) * 4, &err), err);
    }
    CHECK_OK(kld_gguf_writer_write(w, path, &err), err);
    kld_gguf_writer_free(w);
}

static void hf_module(const char *gguf, char *out, size_t cap) {
    int il;
    char sfx[32];
    static const char *const map[][2] = {{"attn_q", "self_attn.q_proj"}, {"attn_k", "self_attn.k_proj"},
                                         {"attn_v", "self_attn.v_proj"}, {"attn_output", "self_attn.o_proj"},
                                         {"ffn_gate", "mlp.gate_proj"}, {"ffn_up", "mlp.up_proj"},
                                         {"ffn_down", "mlp.down_proj"}};
    if (!strcmp(gguf, "output.weight")) {
        snprintf(out, cap, "lm_head");
        return;
    }
    if (sscanf(gguf, "blk.%d.%31[a-z_]", &il, sfx) == 2)
        for (size_t k = 0; k < 7; k++)
            if (!strcmp(sfx, map[k][0])) {
                snprintf(out, cap, "model.layers.%d.%s", il, map[k][1]);
                return;
            }
    snprintf(out, cap, "%s", gguf);
}

/* adapter_model.safetensors (torch shapes: A (r, in), B (out, r), q/k rows
 * of B in rotate-half order) + adapter_config.json. */
void write_peft(const adapter *ad, const synth_shape *sh, const char *config, const char *folder) {
    mkdir(folder, 0755);
    json_t *hdr = json_object();
    uint64_t off = 0;
    float **bufs = calloc((size_t)ad->n * 2, sizeof *bufs);
    for (int i = 0; i < ad->n; i++) {
        const lora_t *t = &ad->t[i];
        char mod[96], n[160];
        hf_module(t->name, mod, sizeof mod);
        bufs[2 * i] = t->a;
        float *b = malloc(sizeof(float) * (size_t)(t->out * t->r));
        memcpy(b, t->b, sizeof(float) * (size_t)(t->out * t->r));
        const bool q = strstr(t->name, "attn_q.") != NULL, k = strstr(t->name, "attn_k.") != NULL;
        if (q || k) { /* HF row h·hd + j·hd/2 + i holds GGUF row h·hd + 2i + j */
            const int64_t nh = q ? sh->n_head : sh->n_head_kv, hd = t->out / nh;
            for (int64_t h = 0; h < nh; h++)
                for (int64_t ii = 0; ii < hd / 2; ii++)
                    for (int64_t j = 0; j < 2; j++)
                        memcpy(b + (h * hd + j * hd / 2 + ii) * t->r, t->b + (h * hd + 2 * ii + j) * t->r,
                               sizeof(float) * (size_t)t->r);
        }
        bufs[2 * i + 1] = b;
        const uint64_t na = (uint64_t)(t->in * t->r) * 4, nb = (uint64_t)(t->out * t->r) * 4;
        snprintf(n, sizeof n, "base_model.model.%s.lora_A.weight", mod);
        json_object_set_new(hdr, n, json_pack("{s:s,s:[I,I],s:[I,I]}", "dtype", "F32", "shape",
                                              (json_int_t)t->r, (json_int_t)t->in, "data_offsets",
                                              (json_int_t)off, (json_int_t)(off + na)));
        off += na;
        snprintf(n, sizeof n, "base_model.model.%s.lora_B.weight", mod);
        json_object_set_new(hdr, n, json_pack("{s:s,s:[I,I],s:[I,I]}", "dtype", "F32", "shape",
                                              (json_int_t)t->out, (json_int_t)t->r, "data_offsets",
                                              (json_int_t)off, (json_int_t)(off + nb)));
        off += nb;
    }
    char *text = json_dumps(hdr, JSON_COMPACT | JSON_PRESERVE_ORDER);
    size_t hl = strlen(text), padded = (hl + 7) & ~(size_t)7;
    char path[700];
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", folder);
    FILE *f = fopen(path, "wb");
    uint64_t len = padded;
    fwrite(&len, 8, 1, f);
    fwrite(text, 1, hl, f);
    for (size_t i = hl; i < padded; i++) fputc(' ', f);
    for (int i = 0; i < ad->n; i++) {
        const lora_t *t = &ad->t[i];
        fwrite(bufs[2 * i], 4, (size_t)(t->in * t->r), f);
        fwrite(bufs[2 * i + 1], 4, (size_t)(t->out * t->r), f);
        free(bufs[2 * i + 1]);
    }
    fclose(f);
    free(bufs);
    free(text);
    json_decref(hdr);
    snprintf(path, sizeof path, "%s/adapter_config.json", folder);
    kt_write_file(path, config, strlen(config));
}

const char peft_config[] =
    "{\"peft_type\": \"LORA\", \"r\": 4, \"lora_alpha\": 8, \"target_modules\": [\"q_proj\", "
    "\"k_proj\", \"v_proj\", \"o_proj\", \"gate_proj\", \"up_proj\", \"down_proj\", \"lm_head\"]}";

void lora_ref_deltas(const adapter *ad, double scale, const char **names, double **deltas) {
    for (int i = 0; i < ad->n; i++) {
        const lora_t *t = &ad->t[i];
        names[i] = t->name;
        deltas[i] = calloc((size_t)(t->in * t->out), sizeof(double));
        for (int64_t o = 0; o < t->out; o++)
            for (int64_t k = 0; k < t->r; k++)
                for (int64_t c = 0; c < t->in; c++)
                    deltas[i][o * t->in + c] += scale * (double)t->b[o * t->r + k] * (double)t->a[k * t->in + c];
    }
}

void write_bad_shape_adapter(adapter *ad, const char *path) {
    ad->t[9].in--;
    write_gguf_adapter(ad, &(gguf_opts){.alpha = 8}, path);
    ad->t[9].in++;
}

void write_unknown_tensor_adapter(adapter *ad, const char *path) {
    char saved[64];
    snprintf(saved, sizeof saved, "%s", ad->t[0].name);
    snprintf(ad->t[0].name, sizeof ad->t[0].name, "blk.7.attn_q.weight");
    write_gguf_adapter(ad, &(gguf_opts){.alpha = 8}, path);
    snprintf(ad->t[0].name, sizeof ad->t[0].name, "%s", saved);
}
