/* outputs.h — checks that an output can be written before any work starts. */
#ifndef KLD_EVAL_OUTPUTS_H
#define KLD_EVAL_OUTPUTS_H

#include "kld.h"

/* Proves, before a long run, that an output file can be written: it is not a
 * folder, it can be opened for writing (a new file is created in its folder
 * and removed again; an existing one is opened without truncation), and it
 * is none of the inputs (a model path, the config/tokenizer/weight files a
 * model folder or checkpoint is read with, MODEL@POLICY+ADAPTER's two files,
 * a corpus or ids file) -- writing there would destroy the input, and
 * truncating a memory-mapped model crashes the run. inputs may list earlier
 * outputs, and may hold NULLs. what names the output in the error ("--json"):
 * "<what> <path>: why". */
kld_status kld_output_check(const char *what, const char *path, const char *const *inputs,
                            int n_inputs, kld_error *err);

/* An input file (a corpus, an ids file) that must be readable, checked
 * before any model loads; path NULL: nothing to check. "<what> <path>: why". */
kld_status kld_input_check(const char *what, const char *path, kld_error *err);

/* The same for an output folder (a dump): an existing folder gets a file
 * created and removed in it, a missing one is created and removed. */
kld_status kld_output_dir_check(const char *what, const char *dir, kld_error *err);

#endif
