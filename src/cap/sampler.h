/* sampler.h — token sampling for the capability tasks' generation
 * (temperature, top-k, top-p, min-p, seed) with a counter-based random
 * draw, pass@k, and the thinking block (<think>…</think>) of reasoning
 * models: its removal before scoring and the text that closes it when its
 * token budget runs out. Definitions in sampler.c and think.c. */
#ifndef KLD_CAP_SAMPLER_H
#define KLD_CAP_SAMPLER_H

#include "common/common.h"

#include <stddef.h>
#include <stdint.h>

typedef struct kld_cap_sampler {
    double temperature; /* 0: greedy (argmax, ties to the lower id) */
    int64_t top_k;      /* 0: off */
    double top_p;       /* 1: off */
    double min_p;       /* 0: off */
    uint64_t seed;
} kld_cap_sampler;

/* A candidate token of one step (sampler.c sorts the row into these). */
typedef struct kld_cap_cand {
    float logit;
    int32_t id;
} kld_cap_cand;

/* Greedy: temperature 0 (the other fields at their "off" values). */
void kld_cap_sampler_greedy(kld_cap_sampler *s);
bool kld_cap_sampler_is_greedy(const kld_cap_sampler *s);
/* "greedy", or comma-separated KEY=VALUE of temperature (default 1 when
 * the key is left out), top_k, top_p, min_p, seed. Errors name the key and
 * the value. */
kld_status kld_cap_sampler_parse(const char *text, kld_cap_sampler *s, kld_error *err);
/* The canonical text ("greedy" or every key), which parses back to s. */
void kld_cap_sampler_format(const kld_cap_sampler *s, char *buf, size_t size);

/* The uniform draw in [0, 1) of (seed, item, sample, step): a pure
 * function of the four, so a response does not depend on threads, batch
 * or which prompts share a step. */
double kld_cap_uniform(uint64_t seed, uint64_t item, uint64_t sample, uint64_t step);

/* Sorts logits[0..n) into cand (descending, ties to the lower id) and
 * applies top-k, top-p, min-p in that order; returns how many candidates
 * survive (>= 1) and their probabilities at the sampler's temperature in
 * prob (normalised, double). cand holds 2n entries (the second half is
 * the sort's scratch), prob n. */
size_t kld_cap_sampler_filter(const kld_cap_sampler *s, const float *logits, int64_t n, kld_cap_cand *cand,
                              double *prob);
/* The token drawn with uniform u from logits (greedy: the argmax, u unused).
 * cand (2n entries) and prob (n) are scratch. */
int32_t kld_cap_sample(const kld_cap_sampler *s, const float *logits, int64_t n, double u, kld_cap_cand *cand,
                       double *prob);

/* The unbiased pass@k estimator 1 - C(n-c, k) / C(n, k) of n samples with
 * c correct (1 when n - c < k; NAN when k > n or c > n). */
double kld_cap_pass_at_k(size_t n, size_t c, size_t k);

/* think.c: the response without its thinking: the text after the last
 * "</think>" when there is one (a block opened in the prompt or several
 * blocks), else nothing when the prompt left a block open
 * (opened_in_prompt) and the text before an unclosed "<think>" otherwise,
 * else the whole text; leading whitespace is dropped when anything was
 * removed. malloc'd; NULL when out of memory. */
char *kld_cap_strip_thinking(const char *text, bool opened_in_prompt);
/* Whether text ends inside a thinking block: its last "<think>" comes after
 * its last "</think>" (given_open: the state before text when it has
 * neither). */
bool kld_cap_thinking_open(const char *text, bool given_open);
/* What is forced into the generation when the budget runs out. */
#define KLD_CAP_THINK_CLOSE "\n</think>\n\n"

#endif
