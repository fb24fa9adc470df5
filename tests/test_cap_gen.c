/* test_cap_gen.c — kld_cap_generate_batch: prompts of different lengths,
 * limits and stop strings generated with 1, 2, 3 and 8 in flight on 1 and
 * 2 threads give exactly kld_cap_generate's texts, one at a time, in item
 * order; a stop flag set before the start generates nothing, one set while
 * running keeps a prefix of finished items (each equal to its reference). */
#include "cap/run.h"
#include "testlib.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#define N_ITEMS 9

static volatile int g_stop;

static void *stop_later(void *arg) {
    (void)arg;
    struct timespec t = {0, 30 * 1000 * 1000};
    nanosleep(&t, NULL);
    g_stop = 1;
    return NULL;
}

int main(void) {
    static const char *const prompts[N_ITEMS] = {
        "Once upon a time", "Lily", "The little dog ran to the park and saw a big red ball. He wanted to",
        "Tom and Sue were friends.", "One day, a girl named Mia", "The sun", "Bob said",
        "Once upon a time, there was a little cat who liked to play with yarn every day.", "A"};
    static const char *const dot[] = {".", NULL}, *const she[] = {" she", "\n", NULL};
    kld_cap_gen_item items[N_ITEMS];
    for (int i = 0; i < N_ITEMS; i++)
        items[i] = (kld_cap_gen_item){.prompt = prompts[i], .add_bos = i % 4 != 3, .max_new = 3 + (i * 7) % 29,
                                      .stops = i % 3 == 1 ? dot : i % 3 == 2 ? she : NULL};
    char *ref[N_ITEMS] = {0}, *texts[N_ITEMS];
    kld_error err = {0};
    for (int threads = 1; threads <= 2; threads++) {
        kld_cap_lm lm;
        CHECK_OK(kld_cap_lm_open(KT_SHARED "/models/stories260K/f32.gguf", threads, 0, &lm, &err), err);
        if (!lm.s) return kt_finish();
        if (threads == 1)
            for (int i = 0; i < N_ITEMS; i++)
                CHECK_OK(kld_cap_generate(&lm, items[i].prompt, items[i].add_bos, items[i].max_new, items[i].stops,
                                          &ref[i], &err), err);
        static const int batches[] = {1, 2, 3, 8};
        for (size_t b = 0; b < sizeof batches / sizeof batches[0]; b++) {
            size_t done = 0;
            CHECK_OK(kld_cap_generate_batch(&lm, items, N_ITEMS, batches[b], NULL, texts, &done, &err), err);
            int differ = 0;
            for (int i = 0; i < N_ITEMS; i++) {
                differ += !texts[i] || !ref[i] || strcmp(texts[i], ref[i]) != 0;
                free(texts[i]);
            }
            CHECK(done == N_ITEMS && differ == 0, "batch %d, %d threads: %zu done, %d texts differ from one at a time",
                  batches[b], threads, done, differ);
        }
        /* stopped before the start: nothing */
        g_stop = 1;
        size_t done = 99;
        CHECK_OK(kld_cap_generate_batch(&lm, items, N_ITEMS, 3, &g_stop, texts, &done, &err), err);
        CHECK(done == 0 && !texts[0] && !texts[N_ITEMS - 1], "stopped before the start: %zu done", done);
        /* stopped while running: the done ones are a prefix, the rest NULL */
        kld_cap_gen_item many[64];
        char *mt[64];
        for (int i = 0; i < 64; i++) many[i] = (kld_cap_gen_item){.prompt = prompts[i % N_ITEMS], .add_bos = true, .max_new = 64};
        g_stop = 0;
        pthread_t th;
        pthread_create(&th, NULL, stop_later, NULL);
        CHECK_OK(kld_cap_generate_batch(&lm, many, 64, 4, &g_stop, mt, &done, &err), err);
        pthread_join(th, NULL);
        int bad = 0;
        for (size_t i = 0; i < 64; i++) {
            if (i < done) {
                char *one = NULL;
                CHECK_OK(kld_cap_generate(&lm, many[i].prompt, true, 64, NULL, &one, &err), err);
                bad += !mt[i] || !one || strcmp(mt[i], one) != 0;
                free(one);
            } else {
                bad += mt[i] != NULL;
            }
            free(mt[i]);
        }
        printf("stopped while running: %zu of 64 done\n", done);
        CHECK(bad == 0 && done <= 64, "stopped while running (%zu of 64 done): %d items wrong", done, bad);
        kld_cap_lm_close(&lm);
    }
    for (int i = 0; i < N_ITEMS; i++) free(ref[i]);
    return kt_finish();
}
