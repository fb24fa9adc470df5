/* langdetect.h — a C port of Python langdetect 1.0.9 (Shuyo Nakatani's
 * language-detection, as Debian packages it in python3-langdetect), which
 * IFEval's language and English-case verifiers call. The language profiles
 * and the normalisation tables are the package's own data files, read at
 * run time: <dir>/profiles/<one JSON file per language> and
 * <dir>/utils/messages.properties. Detection reproduces langdetect.detect()
 * with DetectorFactory.seed = 0 (seven smoothing trials drawn from Python's
 * random.Random(0)), answer for answer. */
#ifndef KLD_CAP_LANGDETECT_H
#define KLD_CAP_LANGDETECT_H

#include "common/common.h"

#include <stddef.h>
#include <stdint.h>

/* The package's install path; KLDEVAL_LANGDETECT_DIR overrides it. */
#define KLD_LANGDETECT_DIR "/usr/lib/python3/dist-packages/langdetect"

typedef struct kld_langdetect kld_langdetect;

/* Loads dir's profiles (in directory order, as os.listdir gives them to
 * langdetect) and normalisation tables. An error names the file. */
kld_status kld_langdetect_open(const char *dir, kld_langdetect **out, kld_error *err);
void kld_langdetect_close(kld_langdetect *ld);
/* The process-wide detector, loaded once (thread-safe) from
 * KLDEVAL_LANGDETECT_DIR or KLD_LANGDETECT_DIR; a failed load is reported
 * (the same message) on every call. */
kld_status kld_langdetect_shared(const kld_langdetect **out, kld_error *err);

enum { KLD_LANGDETECT_CODE = 16 };
/* langdetect.detect(text) seeded 0 for UTF-8 text: the profile's name
 * ("en", "zh-cn"), "unknown" when no language passes 0.1, or "" where
 * langdetect raises LangDetectException (the text yields no n-gram the
 * profiles know). Only allocation can fail. */
kld_status kld_langdetect_detect(const kld_langdetect *ld, const char *text, size_t len,
                                 char code[KLD_LANGDETECT_CODE], kld_error *err);

/* What detect() decides from: the number of n-gram features langdetect
 * extracts (0 where it raises) and every language's mean probability over
 * the seven trials (langprob has n_langs entries, in profile order; all 0
 * without features), bit for bit as get_probabilities() computes them. */
kld_status kld_langdetect_probabilities(const kld_langdetect *ld, const char *text, size_t len, double *langprob,
                                        size_t *n_features, kld_error *err);

/* ---- shared between langdetect_load.c and langdetect.c ---- */

/* An n-gram of 1-3 code points packed as (cp + 1) per 21-bit slot. */
typedef uint64_t ld_gram;

typedef struct ld_entry {
    uint16_t lang;
    double prob; /* freq / n_words[len - 1] of that language's profile */
} ld_entry;

struct kld_langdetect {
    size_t n_langs;
    char (*langs)[KLD_LANGDETECT_CODE];
    /* open-addressing table of the profiles' n-grams → [first, first + count) in entries */
    size_t n_slots;
    ld_gram *slot_gram;       /* 0 = empty */
    uint32_t *slot_first, *slot_count;
    ld_entry *entries;
    size_t n_entries;
    /* messages.properties */
    int32_t *latin1_excluded;
    size_t n_latin1_excluded;
    int32_t *vi_base, *vi_mark; /* TO_NORMALIZE_VI_CHARS, DMARK_CLASS */
    size_t n_vi_base, n_vi_mark;
    int32_t *vi_composed;       /* n_vi_mark rows of n_vi_base: NORMALIZED_VI_CHARS_03xx */
    int32_t *cjk_map;           /* U+4E00..U+9FFF → its class representative */
};

enum { LD_CJK_FIRST = 0x4E00, LD_CJK_LAST = 0x9FFF };

ld_gram ld_pack(const int32_t *cp, size_t n);
/* The slot holding gram, or -1 when no profile has it. A gram that is in
 * the table may have no entries (a profile listed it with frequency 0). */
long ld_lookup(const kld_langdetect *ld, ld_gram g);

#endif
