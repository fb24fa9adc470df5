/* test_attention_long.c — attention over long key ranges: once a query
 * block sees more than KLD_ATTN_TILE_KEYS keys, attention=exact walks them
 * in blocks as the online softmax does (src/engine/attention.c), and the
 * logits must be those of the one-pass computation bit for bit. The
 * one-pass result is attention=online with one block wider than the
 * prompt; the tiled ones are exact (default), online with 16-key blocks,
 * exact in chunks of 100 (other query blocks, other key ranges) and the
 * last tokens decoded one at a time. Models: a plain llama (stories260K),
 * the same with a bf16 KV cache (keys converted per block), and gpt-oss
 * (attention sinks, sliding-window layers beside full ones). */
#include "test_forward_models.h"

#include "engine/internal.h"
#include "testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_IDS (KLD_ATTN_TILE_KEYS + 600)
#define N_DECODE 3

static float *run(const char *path, const int32_t *ids, const char *levers, int64_t chunk, bool decode,
                  int64_t *n_vocab) {
    return tf_engine_logits_run(path, ids, N_IDS, levers, chunk, decode ? N_DECODE : 0, 2, n_vocab);
}

static void check_model(const char *label, const char *path, const char *base_levers) {
    int64_t nv = 0;
    int32_t *ids = malloc(sizeof(int32_t) * N_IDS);
    kld_model *m = NULL;
    kld_error err = {0};
    CHECK_OK(kld_model_open(path, NULL, &m, &err), err);
    if (!m) {
        free(ids);
        return;
    }
    tf_make_ids(ids, N_IDS, kld_model_hparams(m)->n_vocab, 20261204);
    kld_model_close(m);
    char one_pass[128], online16[128];
    snprintf(one_pass, sizeof one_pass, "%s%sattention=online,attn_block=4096", base_levers ? base_levers : "",
             base_levers ? "," : "");
    snprintf(online16, sizeof online16, "%s%sattention=online,attn_block=16", base_levers ? base_levers : "",
             base_levers ? "," : "");
    float *want = run(path, ids, one_pass, N_IDS, false, &nv);
    struct {
        const char *what, *levers;
        int64_t chunk;
        bool decode;
    } ways[] = {
        {"exact, one chunk", base_levers, N_IDS, false},
        {"exact, chunks of 100", base_levers, 100, false},
        {"exact, last tokens decoded", base_levers, 512, true},
        {"online, 16-key blocks", online16, 512, false},
    };
    int same = 0;
    for (size_t w = 0; w < sizeof ways / sizeof ways[0]; w++) {
        float *got = run(path, ids, ways[w].levers, ways[w].chunk, ways[w].decode, &nv);
        int64_t first = -1;
        for (int64_t i = 0; want && got && i < N_IDS * nv && first < 0; i++)
            if (memcmp(&want[i], &got[i], sizeof(float))) first = i;
        CHECK(want && got && first < 0, "%s: %s differs from the one-pass attention at position %lld",
              label, ways[w].what, first < 0 ? -1LL : (long long)(first / nv));
        same += want && got && first < 0;
        free(got);
    }
    printf("%s: %d positions (tiled beyond %d keys): %d of 4 ways equal the one-pass logits bit for bit\n",
           label, N_IDS, KLD_ATTN_TILE_KEYS, same);
    free(want);
    free(ids);
}

int main(void) {
    check_model("stories260K", "../shared/models/stories260K/f32.gguf", NULL);
    check_model("stories260K kv=bf16", "../shared/models/stories260K/f32.gguf", "kv=bf16");
    synth_shape s;
    synth_default(&s, "gpt-oss");
    s.mat_type = KLD_TYPE_F32;
    char path[512];
    snprintf(path, sizeof path, "%s/attention-long-gptoss.gguf", kt_build_dir());
    CHECK(synth_write_gguf(&s, path), "synthesize gpt-oss");
    check_model("gpt-oss (sinks, sliding window)", path, NULL);
    return kt_finish();
}
