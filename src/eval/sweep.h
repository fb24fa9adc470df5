/* sweep.h — one reference, many arms: the reference is forwarded once into
 * a saved teacher (a format-version-2 dump: float32 logits at its top-k ids,
 * the full logsumexp and argmax), then every arm is scored against that
 * teacher, one after the other, so that a sweep of N arms costs one
 * reference pass and N arm passes. Behind `kldeval sweep` (precision groups)
 * and `kldeval kl --sweep/--floor` (lever values).
 *
 * All arms read the same windows in the same order, so their per-position
 * records pair up one to one (kld_sweep_paired). With teacher_top_k = 0 the
 * teacher keeps the whole vocabulary and every KLD is the full one;
 * otherwise KLD is the truncated sum over the teacher's top-k (reported with
 * its captured mass and tail-corrected bound, as for any saved teacher). */
#ifndef KLD_EVAL_SWEEP_H
#define KLD_EVAL_SWEEP_H

#include "eval/dump_driver.h"
#include "eval/kl_driver.h"

typedef struct kld_sweep_arm {
    const char *label;  /* what the tables call it ("blk:3", "kv=q8_0") */
    const char *model;  /* MODEL or MODEL@POLICY */
    const char *levers; /* engine.h lever syntax, or NULL */
} kld_sweep_arm;

/* The configuration: arms/n_arms are what kld_sweep_run scores; the
 * incremental calls take their arms as arguments. */
typedef struct kld_sweep_config {
    /* The reference and the windows: model_path, levers, corpus, ctx, chunk,
     * chunking, threads (top_k = 0: the whole vocabulary). out: where the
     * teacher is kept (an existing complete dump there is reused as is);
     * NULL: a temporary directory under $TMPDIR, removed afterwards. */
    kld_dump_config teacher;
    const kld_sweep_arm *arms;
    size_t n_arms;
    int topk;            /* top-k overlap size of the statistics */
    volatile sig_atomic_t *stop;
    /* before each pass: arm = -1 for the teacher, else the arm's index */
    void (*on_pass)(void *user, long arm, size_t n_arms, const char *label);
    void (*progress)(const kld_kl_progress *p, void *user);
    void *user;
} kld_sweep_config;

typedef struct kld_sweep_outcome {
    char *label, *model, *levers; /* copies of the arm's */
    kld_kl_result res;   /* the saved-teacher run of the arm */
    kld_summary sum;
} kld_sweep_outcome;

typedef struct kld_sweep_result {
    char teacher_dir[4096];
    bool teacher_reused;  /* a complete dump was found at teacher.out */
    bool teacher_temp;    /* teacher_dir is ours: removed by kld_sweep_end */
    kld_dump_result teacher;
    kld_sweep_outcome *arms; /* the n_done arms scored, in order */
    size_t n_done, cap;
    bool partial;         /* stopped (Ctrl-C) before every arm was scored */
    double elapsed_s;
} kld_sweep_result;

/* The teacher pass, the arms' passes, and the end (frees the result and
 * removes a temporary teacher). After a failure or a stop (out->partial)
 * the result holds the arms completed so far; kld_sweep_end is always due. */
kld_status kld_sweep_begin(const kld_sweep_config *c, kld_sweep_result *out, kld_error *err);
kld_status kld_sweep_add(const kld_sweep_config *c, kld_sweep_result *out,
                         const kld_sweep_arm *arms, size_t n, kld_error *err);
void kld_sweep_end(kld_sweep_result *r);
/* begin + add(c->arms); the caller still calls kld_sweep_end. */
kld_status kld_sweep_run(const kld_sweep_config *c, kld_sweep_result *out, kld_error *err);

/* Per-position differences a − b of two runs over the same positions:
 * mean ± standard error (stats.h definitions), and how often each side is
 * the lower one. Fails when the position streams differ. */
typedef struct kld_paired {
    double mean, se;
    uint64_t n, a_lower, b_lower;
} kld_paired;

typedef enum kld_paired_field { KLD_PAIRED_KLD, KLD_PAIRED_TOP1 } kld_paired_field;

kld_status kld_sweep_paired(const kld_stats *a, const kld_stats *b, kld_paired_field f,
                            kld_paired *out, kld_error *err);

#endif
