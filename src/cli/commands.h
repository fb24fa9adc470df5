/* commands.h — one entry point per subcommand; each lives in cmd_<name>.c,
 * parses its flags and calls the library. They return a process exit code. */
#ifndef KLD_CLI_COMMANDS_H
#define KLD_CLI_COMMANDS_H

#include <stdbool.h>

int kld_cmd_inspect(int argc, char **argv);
int kld_cmd_synth(int argc, char **argv);
int kld_cmd_logits(int argc, char **argv);
int kld_cmd_generate(int argc, char **argv);
int kld_cmd_tokenize(int argc, char **argv);
int kld_cmd_kl(int argc, char **argv);
int kld_cmd_dump(int argc, char **argv);
int kld_cmd_demo(int argc, char **argv);
int kld_cmd_quantize(int argc, char **argv);
int kld_cmd_imatrix(int argc, char **argv);

struct kld_kl_config;
/* The KL run with reporting, shared by `kl` and `demo` (cmd_kl.c). */
int kld_kl_main(struct kld_kl_config *c, const char *json_path, const char *pin_path,
                const char *tsv_path, const char *label, bool quiet);

#endif
