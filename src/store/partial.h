/* partial.h — shard partials: what one shard of a sharded `kldeval kl`
 * writes (--partial OUT) and `kldeval merge` reads back: the shard's
 * per-position records under their global window indices, the
 * configuration, and a hash of the evaluation's defining inputs. Records are
 * kld_position (src/eval/stats.h; only the type is used here).
 *
 * Layout (little-endian, no padding; format version 2):
 *   0   char[8]  magic "KLDSHARD"
 *   8   u32      version (2; version 1 had 80-byte records without dlogit,
 *                topk_ordered, the ranks and strata)
 *   12  u32      shard k
 *   16  u32      shard n (1: an unsharded run)
 *   20  u32      shard mode (0 mod: windows i with i mod n = k; 1 range:
 *                [k W / n, (k+1) W / n) of the W windows)
 *   24  u32      top-k of the records (1 .. KLD_TOPK_MAX)
 *   28  u32      flags: bit 0 set = a checkpoint of a run in progress (kl
 *                --checkpoint): the shard's first windows only, in order;
 *                other bits 0
 *   32  u64      W, the windows of the whole evaluation's plan
 *   40  u64      windows in this part (exactly the shard's windows)
 *   48  u64      records in this part
 *   56  u64      meta_len (at most KLD_PARTIAL_MAX_META)
 *   64  u8[32]   SHA-256 of the evaluation's defining inputs (src/eval/merge.h)
 *   96  meta     meta_len bytes of UTF-8 JSON: configuration, labels, timings
 *       windows  16 bytes each, ascending global index:
 *                u64 global index, u32 records, u8 new_doc (0/1), u8[3] 0
 *       records  96 bytes each, windows' records in order: f64 kld, kld_rev,
 *                jsd, nll_ref, nll_arm, kld_bound, dlogit; f32 p_ref_max,
 *                mass; i32 token, top_ref, top_arm; u32 ctx_pos; u16
 *                topk_hits, topk, topk_ordered, rank_ref, rank_arm, strata;
 *                u8 truncated, next_outside (0/1); u8[2] 0
 *       u8[32]   SHA-256 of every byte before it (corruption check)
 * The file is written under a temporary name, fsynced and renamed, so a
 * partial that exists is complete. */
#ifndef KLD_STORE_PARTIAL_H
#define KLD_STORE_PARTIAL_H

#include "eval/stats.h"
#include "kld.h"

#include <stdbool.h>
#include <stdint.h>

#define KLD_PARTIAL_VERSION 2
#define KLD_PARTIAL_HEAD_BYTES 96
#define KLD_PARTIAL_WINDOW_BYTES 16
#define KLD_PARTIAL_RECORD_BYTES 96
#define KLD_PARTIAL_MAX_META (16u << 20)
#define KLD_PARTIAL_CHECKPOINT 1u

typedef struct kld_partial_head {
    uint32_t shard_k, shard_n, shard_mode, topk;
    uint32_t flags;     /* KLD_PARTIAL_CHECKPOINT: the shard's first n_windows windows */
    uint64_t n_windows_total, n_windows, n_records;
    uint8_t hash[32];
} kld_partial_head;

typedef struct kld_partial_window {
    uint64_t index;     /* global window index */
    uint32_t n_records; /* scored positions of the window */
    uint8_t new_doc;    /* the window starts a document */
} kld_partial_window;

/* Writes a partial atomically: h (n_windows and n_records must match the
 * arrays), meta (a NUL-terminated JSON text), windows and their records in
 * order. Errors name path. */
kld_status kld_partial_write(const char *path, const kld_partial_head *h, const char *meta,
                             const kld_partial_window *windows, const kld_position *records,
                             kld_error *err);

typedef struct kld_partial kld_partial;

/* Opens a partial: checks its size and checksum, then validates the header,
 * the meta text and the window table (ascending indices, exactly the
 * shard's windows, record counts summing up). Records are read afterwards,
 * in order, with kld_partial_read. Errors name path and the field. */
kld_status kld_partial_open(const char *path, kld_partial **out, kld_error *err);
const kld_partial_head *kld_partial_head_of(const kld_partial *p);
const char *kld_partial_meta(const kld_partial *p); /* NUL-terminated */
const kld_partial_window *kld_partial_windows(const kld_partial *p);
const char *kld_partial_path(const kld_partial *p);
/* Reads the next n records (validated: top-k, flags, padding). */
kld_status kld_partial_read(kld_partial *p, size_t n, kld_position *out, kld_error *err);
/* Back to the first record (a merge reads the records in several passes). */
kld_status kld_partial_rewind(kld_partial *p, kld_error *err);
void kld_partial_close(kld_partial *p);

/* Whether window i of w windows belongs to shard k of n in mode (0 mod, 1 range). */
bool kld_partial_shard_has(uint32_t k, uint32_t n, uint32_t mode, uint64_t i, uint64_t w);
/* How many of the w windows the shard holds, and its first window at or
 * after i (w when none), without visiting the windows. */
uint64_t kld_partial_shard_count(uint32_t k, uint32_t n, uint32_t mode, uint64_t w);
uint64_t kld_partial_shard_next(uint32_t k, uint32_t n, uint32_t mode, uint64_t i, uint64_t w);

#endif
