/* args.h — small helpers shared by the subcommands' flag parsers. */
#ifndef KLD_CLI_ARGS_H
#define KLD_CLI_ARGS_H

#include <stdbool.h>
#include <stdint.h>

#include "tokenizer/tokenizer.h"

/* Parses a whole decimal integer in [lo, hi]; prints an error naming the
 * flag and returns false otherwise. */
bool kld_arg_int(const char *flag, const char *value, int64_t lo, int64_t hi, int64_t *out);
bool kld_arg_u64(const char *flag, const char *value, uint64_t *out);

/* Parses a comma-separated list of token ids ("1,2,3") into out (appending);
 * prints an error naming cmd and returns false on a malformed or empty list. */
bool kld_arg_ids(const char *cmd, const char *list, kld_tok_ids *out);

/* The value after flag argv[*i] (advancing *i), or NULL with an error. */
const char *kld_arg_value(int argc, char **argv, int *i);

/* True when name is one of the NULL-terminated list (a parser's flags that
 * take a value), so an unknown flag is reported as unknown rather than as
 * "needs a value", and is never allowed to swallow the next argument. */
bool kld_arg_in(const char *name, const char *const *list);

struct kld_arm_parsed;
/* A model named by -m with the --lever text (NULL: none) as the library
 * parses every arm (eval/arm.h): prints "kldeval <cmd>: why" and returns
 * false when it does not parse. */
bool kld_arg_model_spec(const char *cmd, const char *path, const char *levers,
                        struct kld_arm_parsed *out);
/* Repeated --lever flags: *acc and v joined by a comma (one lever string,
 * so a name given twice is still an error). */
bool kld_arg_levers(const char **acc, const char *v);

struct kld_kl_config;
/* The corpus and window flags of `kl` (--corpus-format, --ids-file,
 * --chunking, --ctx, --max-docs, --max-tokens, --chunks) into c, for the
 * commands that run a kl part: true when flag was one of them and its value
 * parsed (false with a message when the value is bad, or when it is none of
 * them: then nothing is printed and *other is set). */
bool kld_arg_kl_window_flag(const char *flag, const char *value, struct kld_kl_config *c, bool *other);
bool kld_arg_kl_window(const char *flag, const char *value, struct kld_kl_config *c);

/* Checks, before any long run, that an output file can be written: it is
 * not a folder, its folder exists and is writable, and it is none of the
 * inputs (a model path, the config/tokenizer/weight files a model folder or
 * checkpoint is read from, a corpus or ids file) -- writing there would
 * destroy the input, and truncating a memory-mapped model crashes the run.
 * inputs may also list earlier outputs, and may hold NULLs. Prints "kldeval <cmd>: <flag> <path>: why" and
 * returns false otherwise. */
bool kld_arg_output(const char *cmd, const char *flag, const char *path,
                    const char *const *inputs, int n_inputs);

#endif
