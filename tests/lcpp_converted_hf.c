/* lcpp_converted_hf.c — see lcpp_converted_hf.h. */
#include "lcpp_converted_hf.h"

#include "synth_deepseek3_hf.h"
#include "synth_gemma4_hf.h"
#include "synth_glm4moe_hf.h"
#include "synth_gptoss_hf.h"
#include "synth_qwen3next_hf.h"
#include "test_forward_models.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* The HF copy of the family's synthesized GGUF in dir, by the round-trip tests' writers. */
static bool write_hf(const char *name, const synth_shape *s, const char *gguf, const char *dir) {
    if (!strcmp(name, "qwen3next")) {
        const q3n_hf_opts o = {0}; /* no MTP block: ours is partial (converted with --no-mtp) */
        return q3n_write_hf(s, gguf, dir, &o);
    }
    if (!strncmp(name, "qwen35", 6)) return q35_write_hf(s, gguf, dir);
    if (!strcmp(name, "gemma4")) return g4_write_hf(s, gguf, dir, false, NULL, NULL);
    if (!strncmp(name, "deepseek2", 9)) return ds_write_hf(s, gguf, dir, NULL, NULL);
    if (!strcmp(name, "glm4moe")) return glm_write_hf(s, gguf, dir, NULL, NULL);
    if (!strncmp(name, "gpt-oss", 7)) return oss_write_hf(s, gguf, dir, NULL);
    fprintf(stderr, "lcpp_converted_write: no HF writer for %s\n", name);
    return false;
}

/* dir/tokenizer.json with n_vocab tokens and no merges: all llama.cpp's converter reads of it
 * when set_vocab is replaced (gemma4 trims token_embd to the tokenizer's vocabulary). */
static bool write_tokenizer_json(const char *dir, int64_t n_vocab) {
    char path[4200];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        return false;
    }
    fprintf(f, "{\"model\": {\"type\": \"BPE\", \"vocab\": {");
    for (int64_t i = 0; i < n_vocab; i++) fprintf(f, "%s\"t%" PRId64 "\": %" PRId64, i ? ", " : "", i, i);
    fprintf(f, "}, \"merges\": []}, \"added_tokens\": []}\n");
    return fclose(f) == 0;
}

bool lcpp_converted_write(const lcpp_family *f, const char *gguf, const char *dir, synth_shape *s) {
    lcpp_family_shape(f, s);
    return synth_write_gguf(s, gguf) && write_hf(f->name, s, gguf, dir) && write_tokenizer_json(dir, s->n_vocab);
}
