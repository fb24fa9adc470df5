/* hashhop.h — kldeval's own generator of HashHop problems in the
 * documented format (capability data SOURCES.md §6: chains of random
 * letter hashes, `K = V` lines shuffled globally, the last hop quoted),
 * and its exact-match scoring rule. */
#ifndef KLD_CAP_HASHHOP_H
#define KLD_CAP_HASHHOP_H

#include "common/common.h"

typedef struct kld_hashhop_params {
    size_t n_chars;   /* target prompt size N in characters */
    size_t queries;   /* Q <= number of chains */
    int hops;         /* H >= 1 */
    int hash_len;     /* L >= 1 */
    bool cot;         /* chain of thought: the target is the whole chain */
} kld_hashhop_params;

typedef struct kld_hashhop_sample {
    char *prompt;       /* the shuffled lines joined by \n */
    char *completion;   /* "COMPLETION:\nHops=H\n\nCoT=…\n\n" + the Q answer lines + "\n" */
    char *header;       /* the completion's header (up to the first answer line) */
    size_t n_chains;
    char **keys;        /* the first hash of each chain, in generation order */
    char **targets;     /* each chain's target (final hash, or the rest of the chain joined by " = ") */
    size_t n_queries;   /* the queries are keys[0 .. n_queries-1] */
} kld_hashhop_sample;

/* Generates one problem from seed (a fixed, documented PRNG: splitmix64);
 * hash collisions are redrawn, so every chain is intact. */
kld_status kld_hashhop_generate(const kld_hashhop_params *p, uint64_t seed, kld_hashhop_sample *out,
                                kld_error *err);
void kld_hashhop_free(kld_hashhop_sample *s);
/* The text the model continues for query q: prompt, "\n", header, "key = '". */
char *kld_hashhop_query_text(const kld_hashhop_sample *s, size_t q);
/* True when the continuation up to its first "'" equals query q's target. */
bool kld_hashhop_correct(const kld_hashhop_sample *s, size_t q, const char *continuation);

#endif
