/* dump.h — saved distributions on disk ("dumps"): the mlx-bun seed's
 * teacher-logits format v1, its float32 twin v2, and kldeval's sidecar.
 * A dump is the hub between engines: any engine that writes this layout
 * can be scored by kldeval, and kldeval's dumps can be read by the seed.
 *
 * Layout of a dump directory DIR (all little-endian, no padding):
 *   manifest.json   written LAST (temporary name, fsync, rename): its presence
 *                   means the dump is complete. Keys of v1 (the seed reads
 *                   only these): format_version (1 or 2), model (string),
 *                   corpus_sha256 (64 hex), ctx_len, n_seqs, top_k,
 *                   positions_per_seq (= ctx_len - 1), created (ISO 8601 UTC),
 *                   notes (string). kldeval's extensions (a v1 reader ignores
 *                   them; all optional on read): kldeval_version, n_vocab,
 *                   model_sha256, tokenizer_fingerprint (64 hex), chunking,
 *                   bos, logit_dtype ("float16"/"float32"), ext (true when the
 *                   seq-<i>.ext.bin sidecars exist), kind ("teacher" or
 *                   "candidate"), teacher (object: the teacher dump's model,
 *                   corpus_sha256, tokenizer_fingerprint and created, for a
 *                   candidate dump), windows (how windows were cut, prose),
 *                   levers (the session levers the model ran with, as
 *                   kld_levers_format writes them: "reference" or e.g.
 *                   "kv=q8_0,act=q8"; absent in older dumps: "reference"),
 *                   lse_of_stored (true: each record's logsumexp is that of
 *                   its stored logits with the float32 logits of the ids not
 *                   kept, the float16 logits shifted by the row's maximum
 *                   first; see kld_row_as_f16).
 *   dump.partial.json  the same manifest object, written at creation and
 *                   removed by kld_dump_finish: what --resume checks against.
 *   tokens.bin      int32[n_seqs][ctx_len]: the ids each sequence was fed
 *                   (teacher-forced; every sequence is exactly ctx_len ids).
 *   seq-<i>.bin     i = 0 .. n_seqs-1 in decimal: positions_per_seq records;
 *                   record r is the distribution after tokens[i][0..r], i.e.
 *                   over the token at index r+1:
 *                     int32[top_k]  indices, by descending logit, ties to the
 *                                   lower index (ordering done in float32,
 *                                   before any rounding)
 *                     top_k logits at those indices: float16 (v1, round to
 *                                   nearest even) or float32 (v2)
 *                     float32       logsumexp over the FULL vocabulary
 *                   record bytes: 6*top_k + 4 (v1), 8*top_k + 4 (v2).
 *   seq-<i>.ext.bin (optional sidecar, kldeval writes it) positions_per_seq
 *                   records of 24 bytes:
 *                     float64 logsumexp over the full vocabulary (the exact
 *                             value the float32 field rounds)
 *                     float64 log-probability of the next token,
 *                             tokens[i][r+1] (NaN when unknown)
 *                     int32   argmax over the full vocabulary (first index
 *                             on ties; -1 when unknown)
 *                     int32   0 (reserved)
 * A shard of a dump (kldeval dump --shard K/N) has tokens.bin of every
 * sequence, the seq files of its own sequences only, and shard.json instead
 * of manifest.json: the manifest the whole dump will have plus a "shard"
 * object {k, n, mode ("mod"/"range"), windows (the global sequence indices
 * it holds), eval_hash (64 hex: the defining inputs), config (the defining
 * inputs as JSON)}. Readers refuse it; kld_dump_merge assembles the shards.
 * A candidate dump has the same layout; its indices are the teacher's (not
 * its own top-k), its logits are the candidate's at those indices, its
 * logsumexp and argmax (sidecar) are the candidate's own.
 *
 * Ownership: kld_dump_open → kld_dump_close; kld_dump_create →
 * kld_dump_finish and/or kld_dump_writer_free (free without finish leaves a
 * resumable dump: no manifest.json, dump.partial.json kept). */
#ifndef KLD_STORE_DUMP_H
#define KLD_STORE_DUMP_H

#include "kld.h"

#include <jansson.h>

#include <stdbool.h>
#include <stdint.h>

#define KLD_DUMP_EXT_BYTES 24
#define KLD_DUMP_MAX_TOPK (1 << 20)

/* Format 3 (hidden-state teachers): each record is the final-norm hidden
 * state of the position (n_embd values in hidden_dtype), scored by applying
 * the model's output head again, which the manifest identifies. */
#define KLD_DUMP_HIDDEN_F32 0
#define KLD_DUMP_HIDDEN_BF16 1
#define KLD_DUMP_HIDDEN_F16 2

typedef struct kld_dump_head {
    const char *tensor;          /* GGUF name of the head: "output.weight", or "token_embd.weight"
                                    when tied */
    const char *type;            /* its stored type ("q6_K", "f16", ...) */
    int64_t rows, cols;          /* n_vocab rows of n_embd */
    const char *sha256;          /* SHA-256 of the head tensor's bytes */
    bool tied;                   /* the head is the token embedding */
    double final_softcap;        /* the architecture's final logit soft-cap (0: none) */
} kld_dump_head;

/* The manifest, as written or as read. Strings are owned by whoever filled
 * the struct (kld_dump_meta_of's strings live as long as the dump). NULL or 0
 * means absent (for the optional extension keys). */
typedef struct kld_dump_meta {
    int format_version;          /* 1: float16 logits, 2: float32 logits */
    const char *model;           /* required */
    const char *corpus_sha256;   /* required: 64 lower-case hex digits */
    int64_t ctx_len;             /* >= 2 */
    int64_t n_seqs;              /* >= 1 */
    int32_t top_k;               /* 1 .. KLD_DUMP_MAX_TOPK (and <= n_vocab when known) */
    int64_t positions_per_seq;   /* ctx_len - 1 (the writer also takes 0: derived) */
    const char *created;         /* writer fills it when NULL */
    const char *notes;           /* may be NULL (written as "") */
    /* extensions */
    const char *kldeval_version;
    int64_t n_vocab;
    const char *model_sha256;
    const char *tokenizer_fingerprint;
    const char *chunking;
    const char *bos;
    const char *windows;
    const char *levers;          /* canonical lever string; NULL: "reference" */
    bool ext;                    /* seq-<i>.ext.bin sidecars present / to be written */
    bool lse_of_stored;          /* the record's logsumexp is that of the logits as stored (v1:
                                    rounded to float16, kld_row_as_f16) with the float32 logits
                                    of the ids not kept: the stored distribution is normalised.
                                    Absent (false) in other writers' v1 dumps and older ones */
    bool candidate;              /* kind "candidate" (else "teacher") */
    const char *teacher_model, *teacher_corpus_sha256, *teacher_fingerprint, *teacher_created;
    /* format 3: top_k is 0, records are hidden states */
    int64_t n_embd;
    int hidden_dtype;            /* KLD_DUMP_HIDDEN_* */
    kld_dump_head head;
    bool has_rounding;           /* bf16/f16: the measured effect of the rounding */
    double rounding_kld_mean, rounding_kld_max; /* KL(f32 rows || rounded rows), nats */
    /* a shard of a dump (writer only): the sequences it holds, ascending,
     * and its "shard" object as JSON text (written as is; kld_dump_merge
     * reads k, n, mode, windows, eval_hash and config from it) */
    const int64_t *held;
    int64_t n_held;
    const char *shard_json;
} kld_dump_meta;

/* Bytes of one record of this dump (any format); 0 when the meta is invalid. */
uint64_t kld_dump_meta_record_bytes(const kld_dump_meta *m);
/* "float32", "bfloat16", "float16" (NULL for another value), and back (-1). */
const char *kld_dump_hidden_name(int dtype);
int kld_dump_hidden_parse(const char *name);

/* n records of one sequence, decoded. The caller allocates the arrays
 * (idx and val: n * top_k; lse, lse64, logp_next, argmax: n). On read,
 * lse64/logp_next/argmax are filled from the sidecar when the dump has one,
 * else with NAN / NAN / -1 (they may be NULL when not wanted). On write,
 * lse64/logp_next/argmax are required exactly when meta.ext. */
typedef struct kld_dump_rows {
    int32_t *idx;
    float *val;       /* logits; float16 values widened exactly on read */
    float *lse;
    double *lse64;
    double *logp_next;
    int32_t *argmax;
} kld_dump_rows;

/* ---- reading ---- */

typedef struct kld_dump kld_dump;

/* Opens and validates DIR: manifest.json present and well-formed (every
 * required key with the right JSON type and range; format_version 1 or 2),
 * tokens.bin exactly n_seqs * ctx_len * 4 bytes with every id in
 * [0, n_vocab_limit) (n_vocab_limit <= 0: the manifest's n_vocab if any, else
 * no upper bound), every seq-<i>.bin exactly positions_per_seq * record bytes
 * (and positions_per_seq == ctx_len - 1), each sidecar exactly
 * positions_per_seq * 24 bytes when ext. Errors name the file and the field
 * ("DIR/manifest.json: top_k: expected a positive integer, got \"x\""). */
kld_status kld_dump_open(const char *dir, int64_t n_vocab_limit, kld_dump **out, kld_error *err);
void kld_dump_close(kld_dump *d);

const kld_dump_meta *kld_dump_meta_of(const kld_dump *d);
const char *kld_dump_dir(const kld_dump *d);
/* Sequence seq's ctx_len ids (valid until close). */
const int32_t *kld_dump_tokens(const kld_dump *d, int64_t seq);

/* Reads records [rec0, rec0 + n) of sequence seq (one pread per file) and
 * validates each: indices in [0, n_vocab_limit) (or >= 0 when unbounded)
 * and distinct within the record; logits and logsumexp finite; logits
 * non-increasing (teacher dumps only: a candidate's logits sit at the
 * teacher's indices, in any order; v2 also: tied logits in ascending index
 * order); the logsumexp at least the largest logit (else it is not a
 * logsumexp over a vocabulary containing that logit; v1 allows half a
 * float16 step, the rounding of the logit). Sidecar, when read: lse64
 * finite and within one float32 step of the record's logsumexp, logp_next
 * NaN or finite and <= 1e-6, argmax -1 or in range (a teacher's equals its
 * first index); the reserved field is ignored. Errors name the file,
 * the record and the field. Thread-compatible: one reader per thread. */
kld_status kld_dump_read(kld_dump *d, int64_t seq, int64_t rec0, int64_t n,
                         const kld_dump_rows *rows, kld_error *err);

/* Format 3: n hidden states (n_embd floats each, widened exactly from the
 * stored dtype; NaN or infinite values are an error naming the record) and
 * the sidecar's lse64 / logp_next / argmax (each may be NULL). */
kld_status kld_dump_read_hidden(kld_dump *d, int64_t seq, int64_t rec0, int64_t n, float *hidden,
                                double *lse64, double *logp_next, int32_t *argmax, kld_error *err);

/* What `kldeval inspect DIR` says of a dump: the manifest's facts, the head
 * of a hidden-state dump, bytes per position (and llama.cpp's base file's
 * for the same vocabulary). NULL when out of memory. */
json_t *kld_dump_describe(const kld_dump *d);

/* ---- writing ---- */

typedef struct kld_dump_writer kld_dump_writer;

/* Creates DIR (mkdir of the last component; without resume an existing DIR
 * must be empty) and writes tokens.bin (n_seqs * ctx_len ids) and then
 * dump.partial.json, fsynced. created (when NULL) is now, or on resume the
 * partial manifest's.
 * resume: DIR must hold an interrupted dump of the same settings (the
 * partial manifest's format_version, model, corpus_sha256, ctx_len, n_seqs,
 * top_k, ext, kind equal meta's) and the same tokens (byte for byte);
 * records already complete on disk are kept, a torn last record is cut off,
 * and *done_seq / *done_rec receive the first record still missing
 * (done_seq == n_seqs when nothing is missing). Without resume they are 0.
 * A resume of a DIR that is empty or holds only what a start writes before
 * the partial manifest (a kill that early) starts the dump afresh.
 * A DIR holding a complete dump (manifest.json) is refused either way. */
kld_status kld_dump_create(const char *dir, const kld_dump_meta *meta, const int32_t *tokens,
                           bool resume, kld_dump_writer **out, int64_t *done_seq,
                           int64_t *done_rec, kld_error *err);

/* Appends records [rec0, rec0 + n) of sequence seq. Sequences and records
 * must arrive in order; records before the resume point are accepted and
 * skipped (already on disk), so a caller may replay a whole sequence. Every
 * write is checked: a full disk is an error naming the file. Indices must be
 * valid as on read (ties checked in float32 for both versions; a v1 logit
 * that overflows float16 is refused); logits are rounded to float16 (v1,
 * nearest even) or stored as float32 (v2). After a failed write the writer
 * refuses further writes and finish: free it and resume. */
kld_status kld_dump_write(kld_dump_writer *w, int64_t seq, int64_t rec0, int64_t n,
                          const kld_dump_rows *rows, kld_error *err);
/* Format 3: n hidden states (n_embd floats each, finite) and their sidecar
 * values, stored in the dump's hidden dtype (rounded to nearest even). */
kld_status kld_dump_write_hidden(kld_dump_writer *w, int64_t seq, int64_t rec0, int64_t n,
                                 const float *hidden, const double *lse64, const double *logp_next,
                                 const int32_t *argmax, kld_error *err);

/* Checks that every record of every sequence was written, fsyncs and closes
 * every file, writes manifest.json (temporary name, fsync, rename, fsync of
 * DIR) and removes dump.partial.json. */
/* Format 3 with a rounded hidden dtype: the measured KL between the float32
 * rows' distributions and the stored rows' (mean and max over the records
 * this writer wrote), kept in the manifest as hidden_rounding. */
kld_status kld_dump_set_rounding(kld_dump_writer *w, double kld_mean, double kld_max,
                                 kld_error *err);
kld_status kld_dump_finish(kld_dump_writer *w, kld_error *err);
/* Closes files and frees; without a successful finish the dump stays
 * resumable. NULL is fine. */
void kld_dump_writer_free(kld_dump_writer *w);

/* ---- shards (dump_merge.c) ---- */

typedef struct kld_dump_merge_part {
    const char *dir;          /* borrowed from the caller */
    uint32_t k;
    uint64_t n_windows;
    char created[32];
} kld_dump_merge_part;

typedef struct kld_dump_merge_info {
    uint32_t n_shards;
    char mode[8];             /* "mod" or "range" */
    char eval_hash[65];
    int64_t n_seqs, records;
    int format_version;
    int32_t top_k;
    bool candidate;
    char model[512];
    kld_dump_merge_part *parts; /* n entries in the order given; free with kld_dump_merge_info_free */
} kld_dump_merge_info;

/* Assembles the shard directories dirs[0..n) of one dump into the dump
 * directory out (created; an existing one must be empty): they must share
 * the evaluation hash, the shard count and mode and the manifest's shape,
 * hold every sequence exactly once (missing, duplicated and foreign shards
 * are errors naming them) and have the same tokens.bin. Writes tokens.bin,
 * every seq-<i>.bin (and sidecar) byte for byte, then manifest.json
 * atomically: the shards' manifest with "created" the earliest shard's and
 * an added "merged" object {eval_hash, shards, mode}. */
kld_status kld_dump_merge(const char *out, const char *const *dirs, size_t n,
                          kld_dump_merge_info *info, kld_error *err);
void kld_dump_merge_info_free(kld_dump_merge_info *info);
/* Whether dir holds a dump shard (shard.json). */
bool kld_dump_is_shard(const char *dir);

/* Record size in bytes for a format version and k (0 when invalid). */
uint64_t kld_dump_record_bytes(int format_version, int64_t top_k);

#endif
