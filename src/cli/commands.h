/* commands.h — one entry point per subcommand; each lives in cmd_<name>.c,
 * parses its flags and calls the library. They return a process exit code. */
#ifndef KLD_CLI_COMMANDS_H
#define KLD_CLI_COMMANDS_H

int kld_cmd_inspect(int argc, char **argv);
int kld_cmd_synth(int argc, char **argv);
int kld_cmd_logits(int argc, char **argv);
int kld_cmd_generate(int argc, char **argv);
int kld_cmd_tokenize(int argc, char **argv);
int kld_cmd_kl(int argc, char **argv);
int kld_cmd_demo(int argc, char **argv);

#endif
