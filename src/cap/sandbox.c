/* sandbox.c — runs one untrusted Python program (a HumanEval completion
 * with its tests) in a child process, never in kldeval's.
 *
 * Containment: a fresh scratch folder as cwd and HOME/TMPDIR; rlimits on
 * CPU time, address space, processes, file size, open files and core
 * dumps; stdin /dev/null; a minimal environment; python3 -I (no user site,
 * no PYTHON* variables). As root the child also gets its own network
 * namespace (no interfaces but a down loopback: no connection can be made)
 * and PID namespace (when its first process ends, the kernel kills every
 * process left in it, so a fork bomb or a daemonised child cannot
 * outlive the run), and drops to the user nobody, which makes
 * RLIMIT_NPROC bite (root is exempt from it) and leaves nothing writable
 * outside the scratch folder and world-writable places. Without root the
 * namespaces are not available: the run is confined by the rlimits, its
 * own process group (killed as a whole) and file permissions only, and
 * result.network_isolated says so.
 *
 * Process layout: kldeval → supervisor (forked; unshares namespaces,
 * enforces the wall-clock limit) → program (PID 1 of the new namespace).
 * Between fork and exec only async-signal-safe calls are made, since the
 * caller may have threads. */
#include "cap/cap.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NOBODY_ID 65534

const char *kld_sandbox_outcome_name(kld_sandbox_outcome o) {
    switch (o) {
    case KLD_SANDBOX_PASSED: return "passed";
    case KLD_SANDBOX_FAILED: return "failed";
    case KLD_SANDBOX_TIMEOUT: return "timed out";
    }
    return "?";
}

char *kld_humaneval_program(const json_t *task, const char *completion) {
    const char *prompt = json_string_value(json_object_get(task, "prompt"));
    const char *test = json_string_value(json_object_get(task, "test"));
    const char *entry = json_string_value(json_object_get(task, "entry_point"));
    if (!prompt || !test || !entry || !completion) return NULL;
    size_t n = strlen(prompt) + strlen(completion) + strlen(test) + strlen(entry) + 16;
    char *p = malloc(n);
    if (!p) return NULL;
    snprintf(p, n, "%s%s\n%s\ncheck(%s)", prompt, completion, test, entry);
    return p;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)ftw;
    if (flag == FTW_DP) return rmdir(path) ? 0 : 0;
    chmod(path, 0700);
    unlink(path);
    return 0;
}

static void remove_tree(const char *dir) {
    chmod(dir, 0700);
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    rmdir(dir);
}

static void set_limit(int res, rlim_t v) {
    struct rlimit rl = {v, v};
    setrlimit(res, &rl);
}

/* Async-signal-safe from here to exec. */
static _Noreturn void run_program(const char *scratch, const char *python, const char *script,
                                  int out_fd, const kld_sandbox_opts *o, bool drop, bool isolated) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(out_fd, 2) < 0) _exit(126);
    for (int fd = 3; fd < 1024; fd++) close(fd);
    if (!isolated && chdir(scratch)) _exit(126); /* isolated: the supervisor's cwd is the bind mount */
    if (isolated) { /* the script is read through the cwd: its path may be covered */
        script = "program.py";
        scratch = "/tmp/scratch";
    }
    if (drop) {
        gid_t g = NOBODY_ID;
        if (setgroups(1, &g) || setgid(NOBODY_ID) || setuid(NOBODY_ID)) _exit(126);
    }
    set_limit(RLIMIT_CPU, (rlim_t)o->cpu_s);
    set_limit(RLIMIT_AS, (rlim_t)o->mem_mb << 20);
    set_limit(RLIMIT_FSIZE, (rlim_t)o->fsize_mb << 20);
    set_limit(RLIMIT_NPROC, (rlim_t)o->max_procs);
    set_limit(RLIMIT_NOFILE, 64);
    set_limit(RLIMIT_CORE, 0);
    umask(077);
    char home[600], tmp[600];
    /* no snprintf here: build "HOME=<scratch>" by hand */
    size_t sl = strlen(scratch);
    if (sl > 500) _exit(126);
    memcpy(home, "HOME=", 5);
    memcpy(home + 5, scratch, sl + 1);
    memcpy(tmp, "TMPDIR=", 7);
    memcpy(tmp + 7, scratch, sl + 1);
    char *const env[] = {"PATH=/usr/bin:/bin", home, tmp, "LANG=C.UTF-8", "PYTHONHASHSEED=0", NULL};
    char *const argv[] = {(char *)python, "-I", "-B", (char *)script, NULL};
    execve(python, argv, env);
    _exit(127);
}

/* The supervisor: makes the namespaces, starts the program, enforces the
 * wall-clock limit. Exit status: the program's (128+signal when killed by
 * one), or 124 on the time limit. */
static _Noreturn void supervise(const char *scratch, const char *python, const char *script,
                                int out_fd, const kld_sandbox_opts *o, bool root) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    setpgid(0, 0);
    bool isolated = false;
    if (root) {
        if (unshare(CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWNS)) _exit(125);
        isolated = true;
        /* Private mounts; everything read-only but the scratch folder (a
         * bind mount of itself); fresh tmpfs on the world-writable places. */
        struct mount_attr ro = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID};
        struct mount_attr rw = {.attr_clr = MOUNT_ATTR_RDONLY};
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
            mount(scratch, scratch, NULL, MS_BIND, NULL) ||
            mount_setattr(AT_FDCWD, "/", AT_RECURSIVE, &ro, sizeof ro) ||
            mount_setattr(AT_FDCWD, scratch, 0, &rw, sizeof rw) || chdir(scratch))
            _exit(125);
        /* Temp places covered by tmpfs: /tmp may hold the scratch folder
         * itself, so keep a handle on it and bind it back at /tmp/scratch
         * (Python resolves the script's path through getcwd). */
        int keep = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (keep < 0) _exit(125);
        static const char *const tmps[] = {"/tmp", "/var/tmp", "/run/lock", "/dev/shm"};
        for (int i = 0; i < 4; i++) {
            struct stat sb;
            if (stat(tmps[i], &sb) == 0 && S_ISDIR(sb.st_mode) &&
                mount("tmpfs", tmps[i], "tmpfs", MS_NOSUID | MS_NODEV, "size=16m,mode=1777"))
                _exit(125);
        }
        char src[64] = "/proc/self/fd/";
        char digits[16];
        int nd = 0;
        for (int v = keep; v > 0 || nd == 0; v /= 10) digits[nd++] = (char)('0' + v % 10);
        size_t sl = strlen(src);
        while (nd > 0) src[sl++] = digits[--nd];
        src[sl] = '\0';
        if (mkdir("/tmp/scratch", 0755) || mount(src, "/tmp/scratch", NULL, MS_BIND, NULL) ||
            mount_setattr(AT_FDCWD, "/tmp/scratch", 0, &rw, sizeof rw) || chdir("/tmp/scratch"))
            _exit(125);
        close(keep);
    }
    pid_t pid = fork();
    if (pid < 0) _exit(125);
    if (pid == 0) run_program(scratch, python, script, out_fd, o, root, isolated);
    close(out_fd);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int status;
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) {
            if (!isolated) kill(0, SIGKILL); /* leftovers in our process group */
            if (WIFEXITED(status)) /* 124, 125: the time limit, set-up failure */
                _exit(WEXITSTATUS(status) == 124 || WEXITSTATUS(status) == 125 ? 1 : WEXITSTATUS(status));
            _exit(WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1);
        }
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        double el = (double)(t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) * 1e-9;
        if (el > o->timeout_s) {
            kill(pid, SIGKILL); /* PID 1 of the namespace: the kernel kills the rest */
            if (!isolated) kill(0, SIGKILL);
            waitpid(pid, &status, 0);
            _exit(124);
        }
        struct timespec nap = {0, 5 * 1000 * 1000};
        nanosleep(&nap, NULL);
    }
}

kld_status kld_sandbox_run(const kld_sandbox_opts *opts, const char *program,
                           kld_sandbox_result *res, kld_error *err) {
    kld_sandbox_opts o = opts ? *opts : (kld_sandbox_opts){0};
    if (!o.python) o.python = "/usr/bin/python3";
    if (o.timeout_s <= 0) o.timeout_s = 10;
    if (o.cpu_s <= 0) o.cpu_s = 10;
    if (!o.mem_mb) o.mem_mb = 1024;
    if (!o.fsize_mb) o.fsize_mb = 16;
    if (o.max_procs <= 0) o.max_procs = 64;
    if (!o.max_output) o.max_output = 64 * 1024;
    if (!o.scratch_parent) o.scratch_parent = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    memset(res, 0, sizeof *res);
    const bool root = geteuid() == 0;

    /* The marker: random per run, so no completion can print it by chance
     * or by copying a constant. */
    unsigned char rnd[16];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
        return kld_fail(err, KLD_ERR_IO, "sandbox: getrandom failed: %s", strerror(errno));
    char marker[48];
    for (int i = 0; i < 16; i++) snprintf(marker + 2 * i, 3, "%02x", rnd[i]);
    memcpy(marker + 32, "_kld_pass", 10);

    char scratch[512];
    snprintf(scratch, sizeof scratch, "%s/kldeval-sandbox-XXXXXX", o.scratch_parent);
    if (!mkdtemp(scratch))
        return kld_fail(err, KLD_ERR_IO, "sandbox: cannot make a scratch folder in %s: %s",
                        o.scratch_parent, strerror(errno));
    char script[600];
    snprintf(script, sizeof script, "%s/program.py", scratch);
    FILE *f = fopen(script, "w");
    bool wrote = f && fputs(program, f) >= 0 && fprintf(f, "\nprint(\"%s\", flush=True)\n", marker) > 0;
    if (f && fclose(f)) wrote = false;
    if (!wrote) {
        remove_tree(scratch);
        return kld_fail(err, KLD_ERR_IO, "sandbox: cannot write %s", script);
    }
    if (root && (chown(scratch, NOBODY_ID, NOBODY_ID) || chown(script, NOBODY_ID, NOBODY_ID))) {
        remove_tree(scratch);
        return kld_fail(err, KLD_ERR_IO, "sandbox: cannot hand %s to nobody: %s", scratch,
                        strerror(errno));
    }
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC)) {
        remove_tree(scratch);
        return kld_fail(err, KLD_ERR_IO, "sandbox: pipe: %s", strerror(errno));
    }
    pid_t pid = fork();
    if (pid < 0) {
        close(pfd[0]);
        close(pfd[1]);
        remove_tree(scratch);
        return kld_fail(err, KLD_ERR_IO, "sandbox: fork: %s", strerror(errno));
    }
    if (pid == 0) {
        close(pfd[0]);
        int w = fcntl(pfd[1], F_DUPFD, 3); /* without CLOEXEC for the program */
        if (w < 0) _exit(125);
        close(pfd[1]);
        supervise(scratch, o.python, script, w, &o, root);
    }
    close(pfd[1]);
    /* Read the output (bounded) until the pipe closes or the supervisor is
     * overdue; the supervisor enforces the limit, this is a backstop. */
    char *out = malloc(o.max_output + 1);
    size_t n_out = 0;
    double deadline = now_s() + o.timeout_s + 10;
    for (;;) {
        struct pollfd pf = {pfd[0], POLLIN, 0};
        int left_ms = (int)((deadline - now_s()) * 1000);
        if (left_ms <= 0) break;
        int r = poll(&pf, 1, left_ms);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        char buf[8192];
        ssize_t k = read(pfd[0], buf, sizeof buf);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        if (out && n_out < o.max_output) {
            size_t take = (size_t)k < o.max_output - n_out ? (size_t)k : o.max_output - n_out;
            memcpy(out + n_out, buf, take);
            n_out += take;
        }
    }
    close(pfd[0]);
    /* The pipe closes when the program ends; the supervisor exits right
     * after. Wait for it up to the deadline, then end it. */
    int status = 0;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid || (w < 0 && errno != EINTR)) break;
        if (now_s() > deadline) {
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            break;
        }
        struct timespec nap = {0, 2 * 1000 * 1000};
        nanosleep(&nap, NULL);
    }
    remove_tree(scratch);
    res->network_isolated = root; /* the supervisor unshares only as root */
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    res->exit_status = code;
    if (out) {
        out[n_out] = '\0';
        /* the marker must be the last line of the output */
        size_t ml = strlen(marker);
        size_t e = n_out;
        while (e > 0 && (out[e - 1] == '\n' || out[e - 1] == '\r')) e--;
        res->marker_seen = e >= ml && !memcmp(out + e - ml, marker, ml) &&
                           (e == ml || out[e - ml - 1] == '\n');
    }
    if (code == 125) {
        free(out);
        return kld_fail(err, KLD_ERR_IO, "sandbox: cannot set up the child's namespaces, mounts or "
                        "limits (running %s)", o.python);
    }
    if (code == 124) {
        res->outcome = KLD_SANDBOX_TIMEOUT;
        snprintf(res->detail, sizeof res->detail, "timed out after %.0f s", o.timeout_s);
    } else if (code == 0 && res->marker_seen) {
        res->outcome = KLD_SANDBOX_PASSED;
    } else {
        res->outcome = KLD_SANDBOX_FAILED;
        if (code == 0) snprintf(res->detail, sizeof res->detail, "exited 0 before the tests finished");
        else if (code == 127) snprintf(res->detail, sizeof res->detail, "cannot run %s", o.python);
        else if (code > 128) snprintf(res->detail, sizeof res->detail, "killed by signal %d", code - 128);
        else {
            /* the last line of the output names the exception */
            const char *last = out ? out : "";
            size_t e = n_out;
            while (e > 0 && (last[e - 1] == '\n')) e--;
            size_t s = e;
            while (s > 0 && last[s - 1] != '\n') s--;
            snprintf(res->detail, sizeof res->detail, "exit %d: %.*s", code, (int)(e - s > 200 ? 200 : e - s),
                     last + s);
        }
    }
    free(out);
    return KLD_OK;
}
