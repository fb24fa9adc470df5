/* dump_internal.h — what the dump reader and writer share: file names, the
 * manifest (parse, validate, build, atomic write), the record codec and the
 * record checks. Not part of the store module's interface (see dump.h). */
#ifndef KLD_STORE_DUMP_INTERNAL_H
#define KLD_STORE_DUMP_INTERNAL_H

#include "common/common.h"
#include "store/dump.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#define KLD_DUMPI_PATH_MAX 4096
#define KLD_DUMPI_DIR_MAX 3800 /* leaves room for "/seq-<i>.ext.bin.tmp" */
#define KLD_DUMPI_MANIFEST "manifest.json"
#define KLD_DUMPI_PARTIAL "dump.partial.json"
#define KLD_DUMPI_TOKENS "tokens.bin"
#define KLD_DUMPI_SHARD "shard.json" /* a shard's manifest (dump.h) */
#define KLD_DUMPI_MANIFEST_MAX (16u << 20) /* a manifest is a few hundred bytes */

/* DIR/name into buf (KLD_DUMPI_PATH_MAX bytes); DIR was length-checked. */
void kld_dumpi_path(char *buf, const char *dir, const char *name);
/* DIR/seq-<i>.bin or DIR/seq-<i>.ext.bin. */
void kld_dumpi_seq_path(char *buf, const char *dir, int64_t seq, bool ext);

/* True when s is exactly 64 lower-case hexadecimal digits. */
bool kld_dumpi_is_hex64(const char *s);

/* Parses a manifest (manifest.json or dump.partial.json; path names it in
 * messages). On success *root owns the strings meta points at. */
kld_status kld_dumpi_manifest_parse(const char *path, const char *text, size_t n, json_t **root,
                                    kld_dump_meta *meta, kld_error *err);
/* Reads path (at most KLD_DUMPI_MANIFEST_MAX bytes) and parses it. */
kld_status kld_dumpi_manifest_load(const char *path, json_t **root, kld_dump_meta *meta,
                                   kld_error *err);
/* Checks a writer's meta like the reader checks a manifest (KLD_ERR_ARG). */
kld_status kld_dumpi_meta_check(const kld_dump_meta *meta, kld_error *err);
/* The manifest object of meta (created must be set); NULL when out of memory. */
json_t *kld_dumpi_manifest_build(const kld_dump_meta *meta);
/* Writes root as DIR/name atomically: DIR/name.tmp, fsync, rename, fsync DIR. */
kld_status kld_dumpi_write_json(const char *dir, const char *name, const json_t *root,
                                kld_error *err);
/* fsync of a directory (makes renames and unlinks durable). */
kld_status kld_dumpi_fsync_dir(const char *dir, kld_error *err);

/* Whole-buffer pread/pwrite that retry on EINTR and short transfers.
 * pread returns the bytes read (< n only at end of file) or -1. */
int64_t kld_dumpi_pread(int fd, void *buf, uint64_t n, uint64_t off);
bool kld_dumpi_pwrite(int fd, const void *buf, uint64_t n, uint64_t off);

/* Format-3 records (dump.h): n_embd hidden values, little-endian float32,
 * bfloat16 (round to nearest even) or float16. */
void kld_dumpi_encode_hidden(int dtype, int64_t n_embd, const float *h, uint8_t *out);
void kld_dumpi_decode_hidden(int dtype, int64_t n_embd, const uint8_t *in, float *h);

/* Distinctness of the indices of one record: a stamp array when the
 * vocabulary is bounded and not huge, else a sorted copy. */
typedef struct kld_dumpi_distinct {
    uint32_t *stamp; /* n_stamp entries, lazily allocated */
    int64_t n_stamp;
    uint32_t gen;
    int32_t *sorted; /* top_k entries, lazily allocated */
} kld_dumpi_distinct;
void kld_dumpi_distinct_free(kld_dumpi_distinct *d);

/* What a record must satisfy; file names it in messages. */
typedef struct kld_dumpi_rules {
    kld_status status; /* what a violation returns: FORMAT (read) or ARG (write) */
    const char *file;
    const char *ext_file;
    int64_t n_vocab; /* > 0: indices and argmax below it */
    int32_t top_k;
    bool candidate;   /* indices are a teacher's: logits in any order */
    bool rounded_f16; /* the logits were rounded to float16 after ordering */
    bool strict_ties; /* equal logits must have ascending indices */
} kld_dumpi_rules;

/* One record (idx, val: top_k entries). rec is its number for messages. */
kld_status kld_dumpi_check_record(const kld_dumpi_rules *r, kld_dumpi_distinct *dist, int64_t rec,
                                  const int32_t *idx, const float *val, float lse, kld_error *err);
/* The sidecar entry of the same record. */
kld_status kld_dumpi_check_ext(const kld_dumpi_rules *r, int64_t rec, const int32_t *idx, float lse,
                               double lse64, double logp_next, int32_t argmax, kld_error *err);

/* Record codec (layout in dump.h; the host is little-endian, as for every
 * kldeval format). */
void kld_dumpi_encode(int format_version, int32_t top_k, const int32_t *idx, const float *val,
                      float lse, uint8_t *out);
void kld_dumpi_decode(int format_version, int32_t top_k, const uint8_t *in, int32_t *idx,
                      float *val, float *lse);
void kld_dumpi_encode_ext(double lse64, double logp_next, int32_t argmax, uint8_t *out);
void kld_dumpi_decode_ext(const uint8_t *in, double *lse64, double *logp_next, int32_t *argmax);

/* dump_resume.c: what the writer checks before it starts or resumes. */
/* 0: dir is missing; 1: empty; 2: holds something (-1: cannot tell, *st set). */
int kld_dumpi_dir_state(const char *dir, kld_error *err, kld_status *st);
/* dir holds only what a start writes before its partial manifest (a kill
 * that early), which kld_dumpi_remove_start_files removes. */
bool kld_dumpi_only_start_files(const char *dir);
kld_status kld_dumpi_remove_start_files(const char *dir, kld_error *err);
/* The interrupted dump (partial manifest at path, settings was) is the one
 * now being written: the same settings, and tokens.bin holds tokens. */
kld_status kld_dumpi_same_settings(const char *path, const kld_dump_meta *was, const kld_dump_meta *now,
                                   kld_error *err);
kld_status kld_dumpi_same_tokens(const char *dir, const int32_t *tokens, uint64_t n, kld_error *err);

#endif
