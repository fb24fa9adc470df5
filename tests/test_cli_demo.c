/* test_cli_demo.c — `kldeval demo` as a newcomer runs it: from an empty
 * folder, with no run database configured and HOME pointed into the build
 * tree (so that nothing escapes it), then again from an installed copy
 * (`cmake --install --prefix`) run from another folder. The demo must
 * measure the shipped stories260K model: a perplexity in the normal range
 * of a trained model on children's stories, a KLD and a verdict for every
 * arm (q8_0 closer than q4_0), the verdicts following the documented bands,
 * and the report files in kldeval-demo/. Also the data-file lookup. */
#include "testlib.h"
#include "common/data_path.h"

#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *kldeval, *cmake;
static char root[1024]; /* this test's scratch folder in the build tree */

/* The demo's arms and the verdict bands of --help and docs/commands.md,
 * written out again here: a change to either must be deliberate. */
static const char *const arm_names[] = {"q8_0", "q4_0", "kv=rot8", "kv=rot4"};
#define N_ARMS (sizeof arm_names / sizeof arm_names[0])

static const char *expected_verdict(double kld) {
    return kld < 1e-3 ? "near-lossless" : kld < 1e-2 ? "small loss" : kld < 1e-1 ? "noticeable loss"
                                                                               : "large loss";
}

static bool exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

static long file_size(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? (long)sb.st_size : -1;
}

/* Entries of a folder besides . and .. (-1 when it does not open). */
static int n_entries(const char *path) {
    DIR *d = opendir(path);
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

static void fresh_dir(const char *path) {
    char cmd[2200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", path, path);
    CHECK(system(cmd) == 0, "cannot make %s", path);
}

/* What one demo run printed. */
typedef struct demo_out {
    double ppl_ref;
    double kld[N_ARMS];
    char verdict[N_ARMS][32];
    char arm_lines[4096]; /* the per-arm result lines, for comparing runs */
    char model_path[1024];
} demo_out;

/* Runs `bin demo --threads 2` in the empty folder cwd with HOME=home and no
 * run database configured; parses what it printed. */
static bool run_demo(const char *bin, const char *cwd, const char *home, demo_out *d) {
    char cmd[8192], *out;
    fresh_dir(cwd);
    fresh_dir(home);
    snprintf(cmd, sizeof cmd,
             "cd '%s' && env -u KLDEVAL_DB -u XDG_DATA_HOME HOME='%s' '%s' demo --threads 2 "
             "2>'%s/stderr.txt'", cwd, home, bin, root);
    int st = kt_run_capture(cmd, &out);
    CHECK(st == 0, "%s: exit status %d; stdout:\n%s", cmd, st, out);
    memset(d, 0, sizeof *d);
    d->ppl_ref = NAN;
    const char *p = strstr(out, "PPL(ref)  ");
    if (p) d->ppl_ref = strtod(p + 10, NULL);
    if ((p = strstr(out, "\nfile ")) && sscanf(p, "\nfile %1023s", d->model_path) != 1)
        d->model_path[0] = '\0';
    bool all = st == 0;
    for (size_t i = 0; i < N_ARMS; i++) {
        char key[64];
        snprintf(key, sizeof key, "\n%-8s: KLD ", arm_names[i]);
        d->kld[i] = NAN;
        if (!(p = strstr(out, key))) {
            CHECK(false, "no result line for arm %s in:\n%s", arm_names[i], out);
            all = false;
            continue;
        }
        const char *line = p + 1, *eol = strchr(line, '\n');
        size_t len = eol ? (size_t)(eol - line) : strlen(line);
        strncat(d->arm_lines, line, len < 400 ? len : 400);
        strcat(d->arm_lines, "\n");
        d->kld[i] = strtod(p + strlen(key), NULL);
        const char *last = NULL; /* the verdict follows the line's last ": " */
        for (const char *q = line; q + 1 < line + len; q++)
            if (q[0] == ':' && q[1] == ' ') last = q;
        if (last) snprintf(d->verdict[i], sizeof d->verdict[i], "%.*s", (int)(line + len - last - 2), last + 2);
    }
    free(out);
    return all;
}

/* The figures of a trained model, the files, and nothing outside the folder. */
static void check_demo(const demo_out *d, const char *cwd, const char *home, const char *want_model) {
    CHECK(d->ppl_ref > 1.5 && d->ppl_ref < 10, "PPL(ref) %g is in a trained model's range (1.5, 10) "
          "(the random-weight demo gave 191012)", d->ppl_ref);
    for (size_t i = 0; i < N_ARMS; i++) {
        CHECK(isfinite(d->kld[i]) && d->kld[i] > 0, "arm %s: KLD %g is finite and positive",
              arm_names[i], d->kld[i]);
        CHECK(!strcmp(d->verdict[i], expected_verdict(d->kld[i])), "arm %s: KLD %g gets verdict '%s' "
              "(the bands say '%s')", arm_names[i], d->kld[i], d->verdict[i], expected_verdict(d->kld[i]));
    }
    CHECK(d->kld[0] < d->kld[1], "q8_0's KLD %g is below q4_0's %g", d->kld[0], d->kld[1]);
    CHECK(d->kld[2] < d->kld[3], "kv=rot8's KLD %g is below kv=rot4's %g", d->kld[2], d->kld[3]);
    CHECK(!strncmp(d->model_path, want_model, strlen(want_model)), "the model read is %s (want it "
          "under %s)", d->model_path, want_model);

    char path[2200];
    snprintf(path, sizeof path, "%s/kldeval-demo/report.html", cwd);
    size_t n;
    char *html = exists(path) ? kt_read_file(path, &n) : NULL;
    CHECK(html && strstr(html, "<html") && strstr(html, "demo q8_0") && strstr(html, "demo q4_0") &&
          strstr(html, "demo kv=rot4"), "%s is an HTML report of the demo's arms", path);
    free(html);
    snprintf(path, sizeof path, "%s/kldeval-demo/report.txt", cwd);
    char *txt = exists(path) ? kt_read_file(path, &n) : NULL;
    int reports = 0;
    for (const char *p = txt; p && (p = strstr(p, "====== kldeval kl ")); p++) reports++;
    CHECK(reports == (int)N_ARMS, "%s holds %d full kl reports (want %zu)", path, reports, N_ARMS);
    free(txt);
    snprintf(path, sizeof path, "%s/kldeval-demo/runs.sqlite", cwd);
    CHECK(file_size(path) > 0, "the runs are recorded in %s", path);
    CHECK(n_entries(cwd) == 1, "the demo wrote only kldeval-demo/ into its folder (%d entries)",
          n_entries(cwd));
    CHECK(n_entries(home) == 0, "nothing was written under HOME (%d entries in %s)", n_entries(home),
          home);
}

static void test_help(void) {
    char cmd[2200], *out;
    snprintf(cmd, sizeof cmd, "'%s' demo --help", kldeval);
    int st = kt_run_capture(cmd, &out);
    CHECK(st == 0, "demo --help exits 0 (got %d)", st);
    static const char *const want[] = {"--dir", "--threads", "--synthetic", "--help", "stories260K",
                                       "report.html", "runs.sqlite", "< 0.001 near-lossless",
                                       "< 0.01 small loss", "< 0.1 noticeable loss",
                                       "otherwise large loss"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        CHECK(strstr(out, want[i]) != NULL, "demo --help mentions '%s'", want[i]);
    for (size_t i = 0; i < N_ARMS; i++)
        CHECK(strstr(out, arm_names[i]) != NULL, "demo --help lists arm %s", arm_names[i]);
    free(out);
    snprintf(cmd, sizeof cmd, "'%s' demo stray 2>&1", kldeval);
    st = kt_run_capture(cmd, &out);
    CHECK(st == 2 && strstr(out, "unknown argument 'stray'"), "demo stray: status %d, '%s'", st, out);
    free(out);
}

/* The lookup finds the source tree's data from a build-tree binary (this
 * test), and refuses names outside data/. */
static void test_data_path(void) {
    char path[4096];
    kld_error err = {0};
    CHECK_OK(kld_data_path("models/stories260K/model.bin", path, sizeof path, &err), err);
    CHECK(file_size(path) == 1056540, "%s is the shipped stories260K (%ld bytes)", path, file_size(path));
    CHECK(kld_data_path("no-such-file.txt", path, sizeof path, &err) == KLD_ERR_IO &&
          strstr(err.msg, "no-such-file.txt") && strstr(err.msg, "/data"),
          "a missing data file is an error naming it and where it was looked for: %s", err.msg);
    CHECK(kld_data_path("../CMakeLists.txt", path, sizeof path, &err) == KLD_ERR_ARG,
          "a name climbing out of data/ is refused: %s", err.msg);
    CHECK(kld_data_path("/etc/passwd", path, sizeof path, &err) == KLD_ERR_ARG,
          "an absolute name is refused: %s", err.msg);
    CHECK(kld_data_path("demo_stories.txt", path, 8, &err) == KLD_ERR_ARG,
          "a path longer than the buffer is an error: %s", err.msg);
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: test_cli_demo KLDEVAL CMAKE SOURCE_DIR\n");
        return 2;
    }
    kldeval = argv[1];
    cmake = argv[2];
    const char *source = argv[3];
    snprintf(root, sizeof root, "%s/demo_test", kt_build_dir());
    fresh_dir(root);
    test_help();
    test_data_path();

    /* from the build tree: the data of the source tree it was built from */
    char cwd[1200], home[1200], want[1400];
    snprintf(cwd, sizeof cwd, "%s/run", root);
    snprintf(home, sizeof home, "%s/home", root);
    snprintf(want, sizeof want, "%s/data/models/stories260K/", source);
    demo_out built, installed;
    if (run_demo(kldeval, cwd, home, &built)) check_demo(&built, cwd, home, want);

    /* an installed copy, run from another folder: its own share/kldeval */
    char inst[1200], cmd[4096], *out;
    snprintf(inst, sizeof inst, "%s/inst", root);
    snprintf(cmd, sizeof cmd, "'%s' --install '%s' --prefix '%s' 2>&1", cmake, kt_build_dir(), inst);
    int st = kt_run_capture(cmd, &out);
    CHECK(st == 0, "%s: status %d: %s", cmd, st, out);
    free(out);
    char bin[1300];
    snprintf(bin, sizeof bin, "%s/bin/kldeval", inst);
    snprintf(cwd, sizeof cwd, "%s/elsewhere", root);
    snprintf(want, sizeof want, "%s/share/kldeval/models/stories260K/", inst);
    if (st == 0 && run_demo(bin, cwd, home, &installed)) {
        check_demo(&installed, cwd, home, want);
        CHECK(!strcmp(built.arm_lines, installed.arm_lines), "the installed copy measures the same:\n"
              "%s---\n%s", built.arm_lines, installed.arm_lines);
    }
    return kt_finish();
}
