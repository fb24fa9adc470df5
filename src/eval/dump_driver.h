/* dump_driver.h — `kldeval dump`: one model arm over a plan, its rows
 * written as they are computed into a saved-teacher dump (src/store/dump.h),
 * a candidate dump at a teacher's ids, or a llama.cpp base file
 * (src/store/lcpp_base.h). Memory is O(chunk × vocabulary) whatever the
 * corpus length. */
#ifndef KLD_EVAL_DUMP_DRIVER_H
#define KLD_EVAL_DUMP_DRIVER_H

#include "eval/drive.h"
#include "eval/plan.h"
#include "store/dump.h"

typedef struct kld_dump_config {
    const char *model_path;
    const char *levers;        /* the model session's levers (engine.h syntax), or NULL */
    const char *out;           /* dump directory, or the base file with llamacpp */
    bool llamacpp;             /* write a llama.cpp --kl-divergence-base file */
    int32_t top_k;             /* dump: ids per record */
    bool hidden;               /* dump: the final-norm hidden states (format 3) */
    int hidden_dtype;          /* with hidden: KLD_DUMP_HIDDEN_F32 (default), _BF16, _F16 */
    int format_version;        /* dump: 1 (float16 logits), 2 (float32), 0: 1 for a teacher,
                                  the teacher's for a candidate dump */
    const char *indices_from;  /* a teacher dump: write a candidate dump at its ids */
    const char *corpus_path, *corpus_format, *ids_path;
    int64_t max_docs, max_tokens, max_chunks, ctx, chunk;
    kld_chunking chunking;     /* dump: stream or llamacpp; base file: llamacpp */
    int n_threads;
    bool resume, allow_vocab_mismatch;
    const char *notes;
    kld_shard shard;           /* scale-out: only this shard's windows (shard.n = 0: all) */
    volatile sig_atomic_t *stop;
    void (*progress)(const kld_kl_progress *p, void *user);
    void *progress_user;
} kld_dump_config;

typedef struct kld_dump_result {
    uint64_t n_windows, n_records, records_skipped; /* skipped: already on disk (resume) */
    uint64_t tokens;
    double elapsed_s, forward_s;
    bool partial;              /* stopped early: the dump is resumable */
    char windows[1024];        /* how the windows were cut */
    uint64_t n_windows_total;  /* the whole plan's (n_windows: this shard's) */
    char eval_hash[65];        /* a shard: the hash of the dump's defining inputs */
    char levers[512];          /* the session's levers, as kld_levers_format writes them */
    int format_version;        /* the dump's: 1 (float16 logits), 2 (float32), 3 (hidden) */
    double rounding_kld_mean, rounding_kld_max; /* format 3, bf16/f16: the rounding's effect */
    json_t *report;            /* {"config": ...} for the run database (owned; kld_dump_result_free) */
} kld_dump_result;

void kld_dump_config_defaults(kld_dump_config *c);
/* Every rule of a dump configuration (the model's levers parsed as every arm
 * is), checked without loading anything. */
kld_status kld_dump_check(const kld_dump_config *c, kld_error *err);
kld_status kld_dump_run(const kld_dump_config *c, kld_dump_result *out, kld_error *err);
void kld_dump_result_free(kld_dump_result *r);

#endif
