/* dump_shard.h — scale-out of `kldeval dump`: the configuration of a dump
 * (its defining inputs, hashed as kl shards hash theirs: src/eval/merge.h)
 * and the "shard" object a shard dump's shard.json carries (src/store/dump.h). */
#ifndef KLD_EVAL_DUMP_SHARD_H
#define KLD_EVAL_DUMP_SHARD_H

#include "eval/dump_driver.h"
#include "store/dump.h"

#include <jansson.h>

typedef struct kld_dump_shard_in {
    const kld_dump_config *c;
    const json_t *model_desc;       /* the model arm's description (SHA-256, policy, levers) */
    const char *corpus_name, *corpus_kind, *corpus_sha256; /* the corpus, or the teacher's */
    const kld_dump_meta *teacher;   /* a candidate dump: the teacher's manifest, else NULL */
    const kld_plan *plan;
    int32_t top_k;
    int format_version;             /* the dump's (1: float16 logits, 2: float32) */
    int64_t n_vocab, chunk;
    int threads;
} kld_dump_shard_in;

/* The dump's configuration as JSON (paths included; kld_eval_hash drops them). */
json_t *kld_dump_config_json(const kld_dump_shard_in *in);

/* The "shard" object of shard s holding windows held[0..n_held) of the plan, as
 * JSON text (malloc'd), and the evaluation hash in hex. NULL when out of memory. */
char *kld_dump_shard_json(const kld_dump_shard_in *in, const kld_shard *s, const int64_t *held,
                          size_t n_held, char hash_hex[65]);

#endif
