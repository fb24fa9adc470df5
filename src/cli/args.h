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

#endif
