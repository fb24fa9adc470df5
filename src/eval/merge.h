/* merge.h — scale-out of `kldeval kl`: the hash of an evaluation's defining
 * inputs, the shard partial a sharded run writes, and the merge of a set of
 * partials into the statistics one unsharded run gives.
 *
 * The merge is exact: every statistic (src/eval/stats.h) is computed from
 * the position records in window order, so the merge restores that order
 * (windows by their global index, documents begun where a window starts
 * one) and finalizes once. Each window is evaluated from an empty cache and
 * its records do not depend on --chunk or --threads (the engine is
 * chunk-invariant, the scorer thread-count-invariant), so a merge of shards
 * equals the single run bit for bit whatever those flags were per shard.
 *
 * Defining inputs (hashed, SHA-256 over the configuration object as compact
 * JSON with sorted keys): everything in the run's config except what cannot
 * change a record — "threads", "chunk", "shard", "warning" (prose naming
 * paths) and the file paths ("path" of the arms, "name" of the corpus): the
 * arms' SHA-256 and sizes, the corpus SHA-256, chunking, the windows, ctx,
 * max_docs/max_tokens, topk, the vocabulary note, the version, and any
 * policy or lever keys the configuration carries. Memory of a merge: the
 * window tables and document starts; the records stay in the partials and
 * are read again at each pass (the summary's scratch is 24 bytes per
 * position; nothing holds the 80-byte records). */
#ifndef KLD_EVAL_MERGE_H
#define KLD_EVAL_MERGE_H

#include "eval/kl_driver.h"
#include "store/partial.h"

#include <jansson.h>

/* The configuration without the keys that cannot change a record (a new
 * object; NULL when out of memory). */
json_t *kld_eval_defining(const json_t *config);

/* The hash of the defining inputs of a run's configuration. */
void kld_eval_hash(const json_t *config, uint8_t out[32]);

/* Adds config["shard"] = {k, n, mode, windows, eval_hash}. */
void kld_shard_annotate(json_t *config, const kld_shard *s, size_t n_windows,
                        const uint8_t hash[32]);

/* What the reports need besides the statistics (borrowed strings). */
typedef struct kld_partial_labels {
    const char *ref, *arm, *corpus, *label; /* any may be NULL */
} kld_partial_labels;

/* Writes a finished run (not stopped early) as a shard partial. */
kld_status kld_kl_write_partial(const char *path, const kld_kl_result *res,
                                const kld_kl_config *c, const kld_partial_labels *labels,
                                kld_error *err);

typedef struct kld_merge_stream kld_merge_stream;

typedef struct kld_merge_result {
    /* the merged records in window order, read from the partials at each
     * pass (kld_summary_from_source); valid until kld_merge_result_free */
    kld_record_source records;
    kld_merge_stream *stream;  /* owns the open partials */
    json_t *config;            /* the shards' configuration without "shard" */
    json_t *parts;             /* [{path, shard, windows, positions, elapsed_s}] */
    char *ref_label, *arm_label, *corpus_label, *label;
    double elapsed_s, ref_seconds, arm_seconds; /* sums over the shards */
    uint64_t ref_tokens, arm_tokens;
    char vocab_note[256], ctx_note[256];
    bool llamacpp;             /* the reference was a llama.cpp base file */
    uint8_t eval_hash[32];
    uint32_t n_shards;
} kld_merge_result;

/* Merges n partials: they must share the evaluation hash, the shard count
 * and mode, the window count and top-k, and hold every shard exactly once.
 * Missing, duplicated, foreign or corrupted parts are errors naming them. */
kld_status kld_merge(const char *const *paths, size_t n, kld_merge_result *out, kld_error *err);
void kld_merge_result_free(kld_merge_result *r);

#endif
