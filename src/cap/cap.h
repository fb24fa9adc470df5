/* cap.h — the capability suite: task data readers, the scorers (GSM8K,
 * MMLU, IFEval, BFCL), the HumanEval sandbox and the driver that scores a
 * file of responses generated elsewhere (`kldeval cap score`).
 *
 * Ownership: every *_load fills a caller-owned struct freed by its *_free;
 * returned strings are malloc'd and freed by the caller. JSON values are
 * jansson references the caller decrefs. */
#ifndef KLD_CAP_CAP_H
#define KLD_CAP_CAP_H

#include "common/common.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* ---- data files ---- */

/* Reads a JSON Lines file (gzip-compressed when the name ends in .gz) into
 * a JSON array, one element per non-empty line; an error names the file and
 * the line. */
kld_status kld_cap_read_jsonl(const char *path, json_t **out, kld_error *err);
/* Reads a whole file (gzip when the name ends in .gz), NUL-terminated. */
kld_status kld_cap_read_file(const char *path, char **out, size_t *len, kld_error *err);

/* The capability data folder: given (--data), else data/capability found
 * as kld_data_path finds data (beside the installed binary, the source
 * tree, the install prefix); the error names every place looked. */
kld_status kld_cap_data_dir(const char *given, char *out, size_t size, kld_error *err);
/* Every file the listed tasks ("all", or "gsm8k,mmlu") read is there and
 * readable (MMLU: its test and dev folders hold subject CSVs): checked
 * before any model is loaded. */
kld_status kld_cap_data_check(const char *dir, const char *tasks, kld_error *err);

/* ---- GSM8K ---- */

/* The standard answer extraction: the number after the last "####" when
 * there is one, else the last number in the text; commas removed. Writes
 * the number's text into out; false when the text holds no number. */
bool kld_gsm8k_extract(const char *text, char *out, size_t out_size);
/* True when the extracted answer equals gold numerically. */
bool kld_gsm8k_correct(const char *response, const char *gold);
/* Exemplars of the 8-shot completion prompt. */
#define KLD_GSM8K_SHOTS 8
/* lm-eval-harness "gsm8k" few-shot completion: for each of the first
 * n_shots items of data ({question, answer}) "Question: Q\nAnswer: A\n\n"
 * (A the whole worked answer ending in "#### N"), then "Question: " +
 * question + "\nAnswer:". malloc'd; NULL when out of memory. */
char *kld_gsm8k_fewshot_prompt(const json_t *data, size_t n_shots, const char *question);

/* ---- MMLU ---- */

typedef struct kld_mmlu_item {
    char *subject;    /* file stem without _test/_dev, e.g. "abstract_algebra" */
    char *question;
    char *choice[4];
    int answer;       /* 0..3 for A..D */
} kld_mmlu_item;

typedef struct kld_mmlu_set {
    kld_mmlu_item *items;
    size_t n;
} kld_mmlu_set;

/* Reads <dir>/<split>/<subject>_<split>.csv for every subject (sorted by
 * name), rows `question,A,B,C,D,answer` in RFC 4180 CSV. */
kld_status kld_mmlu_load(const char *dir, const char *split, kld_mmlu_set *out, kld_error *err);
void kld_mmlu_free(kld_mmlu_set *s);
/* The k-shot prompt for item: the subject header, k dev examples of the
 * same subject with their answers, then the question ending in "Answer:". */
char *kld_mmlu_prompt(const kld_mmlu_set *dev, const kld_mmlu_item *item, int k_shot);
/* The choice with the largest logit (ties to the lower letter). */
int kld_mmlu_pick(const float logits[4]);

/* ---- IFEval ---- */

/* Checks one response against one input_data.jsonl row (instruction ids +
 * kwargs + prompt). follow receives one bool per instruction (up to
 * max_follow). Unknown instruction ids are KLD_ERR_UNSUPPORTED. */
kld_status kld_ifeval_check(const json_t *item, const char *response, bool loose, bool *follow,
                            size_t max_follow, kld_error *err);
/* Helpers the verifiers share, exposed for their tests. */
size_t kld_ifeval_count_words(const char *text);
size_t kld_ifeval_count_sentences(const char *text);
size_t kld_ifeval_count_upper_words(const char *text);
/* langdetect.detect(text) as langdetect seeded 0 answers it (a profile
 * name such as "en" or "zh-cn", or "unknown"); "" where langdetect raises
 * (no features) or its profiles cannot be loaded. Thread-local buffer. */
const char *kld_ifeval_language(const char *text);
/* The reference's language test: *yes when langdetect names code or raises
 * (which instructions.py counts as followed). Errors: the profiles of
 * python3-langdetect (KLDEVAL_LANGDETECT_DIR) cannot be loaded. */
kld_status kld_ifeval_language_is(const char *text, const char *code, bool *yes, kld_error *err);

/* ---- BFCL ---- */

/* Scores one generated call against a BFCL question entry (its function
 * docs) and its possible_answer entry. *ok tells whether it matched; why
 * (when not NULL) receives a short reason when it did not. lang is
 * "python", "java" or "javascript" (the category's language). Only a
 * malformed data entry is an error; an unparsable response is a miss. */
kld_status kld_bfcl_check(const json_t *question, const json_t *answer, const char *lang,
                          const char *response, bool *ok, char *why, size_t why_size,
                          kld_error *err);
/* Parses `[f(a=1, b="x")]` / `f(a=1)` (Python call syntax) into a JSON array
 * of {name: {param: value}} objects; NULL when it does not parse. */
json_t *kld_bfcl_parse_calls(const char *text);
/* One literal (Python, JavaScript or Java syntax) as JSON; NULL when the
 * whole text is not one literal. */
json_t *kld_bfcl_parse_value(const char *text);

/* ---- HumanEval sandbox ---- */

typedef enum kld_sandbox_outcome {
    KLD_SANDBOX_PASSED,
    KLD_SANDBOX_FAILED,
    KLD_SANDBOX_TIMEOUT,
} kld_sandbox_outcome;

typedef struct kld_sandbox_opts {
    const char *python;      /* interpreter path (NULL: /usr/bin/python3) */
    double timeout_s;        /* wall-clock limit (default 10) */
    int cpu_s;               /* RLIMIT_CPU (default 10) */
    unsigned long mem_mb;    /* RLIMIT_AS (default 1024) */
    int max_procs;           /* RLIMIT_NPROC (default 64 above the current count) */
    unsigned long fsize_mb;  /* RLIMIT_FSIZE (default 16) */
    size_t max_output;       /* bytes of stdout+stderr kept (default 64 KiB) */
    const char *scratch_parent; /* where scratch folders are made (default $TMPDIR or /tmp) */
} kld_sandbox_opts;

typedef struct kld_sandbox_result {
    kld_sandbox_outcome outcome;
    int exit_status;       /* exit code, or 128+signal */
    bool marker_seen;      /* the success marker was printed */
    bool network_isolated; /* ran in its own network namespace */
    char detail[256];      /* why it failed, in a few words */
} kld_sandbox_result;

const char *kld_sandbox_outcome_name(kld_sandbox_outcome o);
/* Runs `program` (Python source) in a child process: its own scratch
 * folder as the working directory (removed afterwards), rlimits, stdin from
 * /dev/null; as root also its own network and PID namespaces and the
 * unprivileged user nobody. The sandbox appends a statement that prints a
 * fresh random marker; the program passes only when it exits 0 after
 * printing it (a program that exits 0 early fails). Errors are only
 * failures to set up the sandbox. Safe to call from several threads. */
kld_status kld_sandbox_run(const kld_sandbox_opts *opts, const char *program,
                           kld_sandbox_result *res, kld_error *err);
/* prompt + completion + "\n" + test + "\n" + "check(entry_point)", as
 * human-eval's execution.py builds it. NULL on a malformed task. */
char *kld_humaneval_program(const json_t *task, const char *completion);

/* ---- scoring a responses file ---- */

typedef struct kld_cap_score_opts {
    const char *task;      /* gsm8k, mmlu, ifeval, humaneval, bfcl_simple_python, ... */
    const char *data_dir;  /* the capability data (NULL: kld_cap_data_dir's default) */
    const char *responses; /* JSON Lines */
    int jobs;              /* HumanEval programs run at once (default 2) */
    const char *python;    /* HumanEval interpreter */
    bool quiet;
} kld_cap_score_opts;

/* Scores every line of opts->responses and returns the JSON report:
 * {task, n, accuracies as fractions, items: [...]} (see cap_score.c). */
kld_status kld_cap_score(const kld_cap_score_opts *opts, json_t **report, kld_error *err);
/* Its config object (cap_config.c): version, mode "cap-score", ref (the
 * responses file: kind, path, bytes, sha256), tasks [task], n, data. */
json_t *kld_cap_score_config(const kld_cap_score_opts *opts, size_t n);

/* Accuracy's standard error sqrt(p(1-p)/n) (0 for n = 0). */
double kld_cap_stderr(size_t correct, size_t n);

#endif
