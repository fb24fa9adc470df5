/* common.h — helpers every module uses: error reporting, overflow-checked
 * size arithmetic, little-endian loads and small string utilities. */
#ifndef KLD_COMMON_H
#define KLD_COMMON_H

#include "kld.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__)
#define KLD_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define KLD_PRINTF(a, b)
/* The built-in corpus (data/builtin_corpus.txt): one document per line,
 * '#' comment lines; NUL-terminated, length without the NUL. */
extern const unsigned char kld_builtin_corpus[];
extern const size_t kld_builtin_corpus_len;

#endif

/* Records status and a formatted message in err (which may be NULL) and
 * returns status, so that failures read `return kld_fail(err, ..., ...)`. */
kld_status kld_fail(kld_error *err, kld_status status, const char *fmt, ...) KLD_PRINTF(3, 4);

/* Prepends "prefix: " to an existing message (adds context on the way up). */
void kld_error_prefix(kld_error *err, const char *fmt, ...) KLD_PRINTF(2, 3);

/* Overflow-checked arithmetic: return false when the result does not fit. */
static inline bool kld_mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool kld_add_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_add_overflow(a, b, out);
}

/* Unaligned little-endian loads (file data in a mapping is not aligned). */
static inline uint16_t kld_load_u16(const void *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static inline uint32_t kld_load_u32(const void *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint64_t kld_load_u64(const void *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static inline float kld_load_f32(const void *p) { float v; memcpy(&v, p, 4); return v; }
static inline double kld_load_f64(const void *p) { double v; memcpy(&v, p, 8); return v; }

/* True when the n bytes at s are well-formed UTF-8 (no overlongs, no
 * surrogates, nothing above U+10FFFF). */
bool kld_utf8_valid(const char *s, size_t n);

/* strdup/strndup that return NULL on allocation failure (C17 lacks them). */
char *kld_strdup(const char *s);
char *kld_strndup(const char *s, size_t n);

/* The last component of a path ("-" for NULL), for labels. */
const char *kld_base_name(const char *path);

/* The n bytes at s end with suffix. */
bool kld_ends_with(const char *s, size_t n, const char *suffix);

/* The cores this process may run on (at least 1, at most 1024): the
 * default for every --threads. */
int kld_default_threads(void);

/* Formats a byte count with a binary unit ("12.3 MiB") into buf. */
const char *kld_format_bytes(uint64_t bytes, char *buf, size_t buf_size);

/* Seconds on the monotonic clock (for durations). */
double kld_now_s(void);

/* The built-in corpus (data/builtin_corpus.txt): one document per line,
 * '#' comment lines; NUL-terminated, length without the NUL. */
extern const unsigned char kld_builtin_corpus[];
extern const size_t kld_builtin_corpus_len;

#endif
