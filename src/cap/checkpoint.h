/* checkpoint.h — a capability run's responses kept as they are generated
 * (`cap --checkpoint FILE`, `cap --resume FILE`), so that a killed run
 * resumes without generating them again. Generation is bit-identical for
 * any batch and thread count (gen_batch.c), so a resumed run's report
 * equals an uninterrupted one's.
 *
 * File: JSON Lines. The first line is {"schema": "kldeval.cap-checkpoint/1",
 * "eval_hash": HEX, "config": {...}} (the run's configuration and the hash
 * of its defining inputs, as shard partials carry them); every further
 * line one response: {"arm": 0|1, "unit": NAME, "item": N, "sample": S,
 * "prompt": SHA-256 hex of the prompt, "text": RESPONSE}. Lines are
 * appended and fsynced after each group of prompts: a kill can only cut
 * the last line, which a resume drops (and truncates away). */
#ifndef KLD_CAP_CHECKPOINT_H
#define KLD_CAP_CHECKPOINT_H

#include "common/common.h"

#include <jansson.h>
#include <stdint.h>

typedef struct kld_cap_ckpt kld_cap_ckpt;

/* resume: path must exist and belong to this run (same eval hash; else
 * KLD_ERR_MISMATCH naming the first configuration field that differs);
 * otherwise path is created (an existing file is refused: --resume it or
 * remove it). */
kld_status kld_cap_ckpt_open(const char *path, bool resume, const json_t *config, kld_cap_ckpt **out,
                             kld_error *err);
/* Before any model loads: resume needs path to exist, a new checkpoint
 * needs it not to (kld_cap_ckpt_open checks the same, and the content). */
kld_status kld_cap_ckpt_check(const char *path, bool resume, kld_error *err);
/* The response kept for this generation, or NULL. */
const char *kld_cap_ckpt_find(const kld_cap_ckpt *c, int arm, const char *unit, uint64_t item,
                              uint64_t sample, const char *prompt);
/* Appends one response (kept in memory too); kld_cap_ckpt_sync makes the
 * appended lines durable. */
kld_status kld_cap_ckpt_add(kld_cap_ckpt *c, int arm, const char *unit, uint64_t item, uint64_t sample,
                            const char *prompt, const char *text, kld_error *err);
kld_status kld_cap_ckpt_sync(kld_cap_ckpt *c, kld_error *err);
/* Responses read from the file when it was opened (resume). */
size_t kld_cap_ckpt_resumed(const kld_cap_ckpt *c);
void kld_cap_ckpt_close(kld_cap_ckpt *c);

#endif
