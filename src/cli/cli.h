/* Subcommands of the `detrain` binary. Each takes the arguments after its name and returns
 * the process exit code: 0 success, 1 a negative result (e.g. compare found a difference),
 * 2 usage or I/O error. */
#ifndef DT_CLI_H
#define DT_CLI_H

int dt_cmd_train(int argc, char **argv);
int dt_cmd_compare(int argc, char **argv);
int dt_cmd_data(int argc, char **argv);
int dt_cmd_gate(int argc, char **argv);
int dt_cmd_ckpt(int argc, char **argv);
int dt_cmd_trace_diff(int argc, char **argv);
int dt_cmd_bench(int argc, char **argv);
int dt_cmd_report(int argc, char **argv);

#endif
