/* test_cap_sandbox.c — the HumanEval sandbox: canonical solutions pass
 * (164/164), the shipped wrong completions fail or time out as their
 * results file says, the exit-0 traps fail, and hostile programs (fork
 * bomb, infinite loop, huge output, writes outside the scratch folder, a
 * network connection) are contained, reported as failures, and leave
 * nothing changed outside their scratch folder. Runs the 164 programs on
 * 2 worker threads through `kld_cap_score`. */
#include "cap/cap.h"
#include "testlib.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define HE KT_SHARED "/capability/humaneval"

static json_t *tasks;
/* This run's own parent for scratch folders, so that counting them sees
 * no other run's (a killed run may leave some in /tmp). */
static char scratch_parent[64] = "/tmp/kld-sandbox-test-XXXXXX";

static const json_t *task(const char *id) {
    size_t i;
    json_t *t;
    json_array_foreach(tasks, i, t) if (!strcmp(json_string_value(json_object_get(t, "task_id")), id)) return t;
    return NULL;
}

static kld_sandbox_result run(const char *task_id, const char *completion, double timeout) {
    kld_sandbox_opts o = {.timeout_s = timeout, .cpu_s = (int)timeout + 1, .scratch_parent = scratch_parent};
    kld_sandbox_result r;
    kld_error err = {0};
    char *prog = kld_humaneval_program(task(task_id), completion);
    CHECK(prog != NULL, "program for %s", task_id);
    CHECK_OK(kld_sandbox_run(&o, prog, &r, &err), err);
    free(prog);
    return r;
}

/* Scratch folders left behind (there must be none). */
static int leftover_scratch(void) {
    DIR *d = opendir(scratch_parent);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += !strncmp(e->d_name, "kldeval-sandbox-", 16);
    if (d) closedir(d);
    return n;
}

/* Processes owned by nobody (the sandbox's user). */
static int nobody_procs(void) {
    DIR *d = opendir("/proc");
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        char p[300];
        struct stat sb;
        snprintf(p, sizeof p, "/proc/%s", e->d_name);
        if (e->d_name[0] >= '0' && e->d_name[0] <= '9' && stat(p, &sb) == 0 && sb.st_uid == 65534) n++;
    }
    if (d) closedir(d);
    return n;
}

static void write_jsonl_canonical(const char *path) {
    FILE *f = fopen(path, "w");
    size_t i;
    json_t *t;
    json_array_foreach(tasks, i, t) {
        json_t *line = json_pack("{s:O, s:O}", "task_id", json_object_get(t, "task_id"), "completion",
                                 json_object_get(t, "canonical_solution"));
        char *s = json_dumps(line, JSON_COMPACT);
        fprintf(f, "%s\n", s);
        free(s);
        json_decref(line);
    }
    fclose(f);
}

static void test_canonical(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/cap-canonical.jsonl", kt_build_dir());
    write_jsonl_canonical(path);
    kld_cap_score_opts o = {.task = "humaneval", .data_dir = KT_SHARED "/capability",
                            .responses = path, .jobs = 2};
    json_t *rep = NULL;
    kld_error err = {0};
    CHECK_OK(kld_cap_score(&o, &rep, &err), err);
    CHECK(json_integer_value(json_object_get(rep, "correct")) == 164,
          "canonical solutions: %lld/164 passed", (long long)json_integer_value(json_object_get(rep, "correct")));
    json_t *items = json_object_get(rep, "items");
    for (size_t i = 0; i < json_array_size(items); i++)
        if (!json_is_true(json_object_get(json_array_get(items, i), "passed")))
            fprintf(stderr, "canonical %s: %s\n",
                    json_string_value(json_object_get(json_array_get(items, i), "task_id")),
                    json_string_value(json_object_get(json_array_get(items, i), "detail")));
    json_decref(rep);
    unlink(path);
}

static void test_shipped(const char *jsonl, const char *tsv, int result_col) {
    json_t *lines = NULL;
    kld_error err = {0};
    CHECK_OK(kld_cap_read_jsonl(jsonl, &lines, &err), err);
    char *t = kt_read_file(tsv, NULL);
    char *row = strchr(t, '\n') + 1;
    size_t i;
    json_t *l;
    json_array_foreach(lines, i, l) {
        char *nl = strchr(row, '\n');
        if (nl) *nl = '\0';
        const char *col = row;
        for (int c = 0; c < result_col; c++) col = strchr(col, '\t') + 1;
        const char *id = json_string_value(json_object_get(l, "task_id"));
        kld_sandbox_result r = run(id, json_string_value(json_object_get(l, "completion")), 3);
        CHECK(!strncmp(col, kld_sandbox_outcome_name(r.outcome), strlen(kld_sandbox_outcome_name(r.outcome))) &&
                  strlen(col) == strlen(kld_sandbox_outcome_name(r.outcome)),
              "%s %s: %s, the reference says %s (%s)", jsonl, id, kld_sandbox_outcome_name(r.outcome), col, r.detail);
        row = nl ? nl + 1 : row + strlen(row);
    }
    free(t);
    json_decref(lines);
}

static void test_hostile(void) {
    const bool root = geteuid() == 0;
    const int procs_before = nobody_procs();
    kld_sandbox_result r;
    /* an infinite loop */
    r = run("HumanEval/0", "    while True:\n        pass\n", 2);
    CHECK(r.outcome == KLD_SANDBOX_TIMEOUT, "infinite loop: %s", kld_sandbox_outcome_name(r.outcome));
    /* huge output: far beyond what is kept */
    r = run("HumanEval/0", "    import sys\n    while True:\n        sys.stdout.write('x' * 1000000)\n", 2);
    CHECK(r.outcome != KLD_SANDBOX_PASSED, "huge output: %s", kld_sandbox_outcome_name(r.outcome));
    /* a huge file in the scratch folder: RLIMIT_FSIZE */
    r = run("HumanEval/0", "    open('big', 'wb').write(b'x' * (64 << 20))\n    return has_close_elements\n", 5);
    CHECK(r.outcome == KLD_SANDBOX_FAILED, "64 MiB file: %s (%s)", kld_sandbox_outcome_name(r.outcome), r.detail);
    /* memory: RLIMIT_AS */
    r = run("HumanEval/0", "    x = bytearray(4 << 30)\n", 5);
    CHECK(r.outcome == KLD_SANDBOX_FAILED, "4 GiB allocation: %s (%s)", kld_sandbox_outcome_name(r.outcome), r.detail);

    /* writes outside the scratch folder: a victim file anyone may write, a
     * new file in the build folder and one in /tmp */
    char victim[512], canary[512], tmp_canary[128];
    snprintf(victim, sizeof victim, "%s/cap-sandbox-victim", kt_build_dir());
    snprintf(canary, sizeof canary, "%s/cap-sandbox-canary", kt_build_dir());
    snprintf(tmp_canary, sizeof tmp_canary, "/tmp/kld-cap-canary-%d", (int)getpid());
    char abs_victim[4096], abs_canary[4096];
    kt_write_file(victim, "original\n", 9);
    chmod(victim, 0666);
    unlink(canary);
    CHECK(realpath(victim, abs_victim) != NULL, "realpath %s", victim);
    snprintf(abs_canary, sizeof abs_canary, "%s", abs_victim);
    strcpy(strrchr(abs_canary, '/') + 1, "cap-sandbox-canary");
    char comp[12288];
    snprintf(comp, sizeof comp,
             "    open('%s', 'w').write('x')\n"
             "    open('%s', 'a').write('changed')\n"
             "    open('%s', 'w').write('x')\n",
             tmp_canary, abs_victim, abs_canary);
    r = run("HumanEval/0", comp, 5);
    CHECK(r.outcome == KLD_SANDBOX_FAILED, "writes outside: %s (%s)", kld_sandbox_outcome_name(r.outcome), r.detail);
    char *v = kt_read_file(victim, NULL);
    CHECK(!strcmp(v, "original\n"), "the world-writable victim file is unchanged: '%s'", v);
    free(v);
    CHECK(access(canary, F_OK) != 0, "no file appeared in the build folder");
    CHECK(access(tmp_canary, F_OK) != 0, "no file appeared in the host's /tmp");
    unlink(tmp_canary);
    unlink(victim);
    CHECK(leftover_scratch() == 0, "no scratch folder left behind");

    if (!root) {
        fprintf(stderr, "not root: no network/PID namespaces; the fork bomb and network tests are skipped\n");
        return;
    }
    /* a network connection to a port this test listens on */
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    CHECK(ls >= 0 && bind(ls, (struct sockaddr *)&a, sizeof a) == 0 && listen(ls, 4) == 0 &&
              getsockname(ls, (struct sockaddr *)&a, &al) == 0, "listening socket");
    snprintf(comp, sizeof comp,
             "    import socket\n"
             "    s = socket.create_connection(('127.0.0.1', %d), timeout=2)\n"
             "    s.sendall(b'leak')\n"
             "    return has_close_elements\n", ntohs(a.sin_port));
    r = run("HumanEval/0", comp, 5);
    CHECK(r.outcome == KLD_SANDBOX_FAILED && r.network_isolated, "network: %s (%s)",
          kld_sandbox_outcome_name(r.outcome), r.detail);
    int c = accept(ls, NULL, NULL);
    CHECK(c < 0 && (errno == EAGAIN || errno == EWOULDBLOCK), "no connection reached the host");
    if (c >= 0) close(c);
    close(ls);
    /* a fork bomb: RLIMIT_NPROC for nobody; the PID namespace ends with it */
    r = run("HumanEval/0", "    import os\n    while True:\n        try:\n            os.fork()\n"
                           "        except OSError:\n            pass\n", 3);
    CHECK(r.outcome != KLD_SANDBOX_PASSED, "fork bomb: %s", kld_sandbox_outcome_name(r.outcome));
    usleep(200 * 1000);
    CHECK(nobody_procs() <= procs_before, "fork bomb: %d processes of nobody left (before: %d)",
          nobody_procs(), procs_before);
    CHECK(leftover_scratch() == 0, "no scratch folder left behind");
}

int main(void) {
    kld_error err = {0};
    /* searchable by nobody, as /tmp is: the sandboxed program runs in a folder inside it */
    if (!mkdtemp(scratch_parent) || chmod(scratch_parent, 0755)) {
        fprintf(stderr, "test_cap_sandbox: cannot make %s: %s\n", scratch_parent, strerror(errno));
        return 1;
    }
    CHECK_OK(kld_cap_read_jsonl(HE "/HumanEval.jsonl.gz", &tasks, &err), err);
    CHECK(json_array_size(tasks) == 164, "164 tasks");
    test_hostile();
    test_shipped(HE "/trap_completions.jsonl", HE "/trap_completions_results.tsv", 3);
    test_shipped(HE "/wrong_completions.jsonl", HE "/wrong_completions_results.tsv", 2);
    test_canonical();
    json_decref(tasks);
    CHECK(rmdir(scratch_parent) == 0, "%s is empty at the end", scratch_parent);
    return kt_finish();
}
