/* test_cli_record.c — `kldeval kl` records every run in the run database:
 * --db PATH gets a row whose statistics equal the run's JSON, --no-db writes
 * nothing, --html writes the report of the run (also with --no-db), and a
 * database that cannot be written costs nothing but a warning: the report
 * is printed and the exit status is 0. */
#include "testlib.h"

#include "db/db.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *kldeval;

static int run(const char *args, const char *out, const char *err_out) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' %s >'%s' 2>'%s'", kldeval, args, out, err_out);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    kldeval = argv[1];
    const char *b = kt_build_dir();
    char db[512], json[512], html[512], out[512], err[512], args[4096];
    snprintf(db, sizeof db, "%s/record.sqlite", b);
    snprintf(json, sizeof json, "%s/record.json", b);
    snprintf(html, sizeof html, "%s/record.html", b);
    snprintf(out, sizeof out, "%s/record.out", b);
    snprintf(err, sizeof err, "%s/record.err", b);
    unlink(db);
    unlink(html);
    const char *pair = "--ref ../shared/models/aidreams260K/f32.gguf --arm ../shared/models/aidreams260K/q8_0.gguf "
                       "--max-docs 3 --quiet";
    snprintf(args, sizeof args, "kl %s --db '%s' --json '%s' --label rec-test", pair, db, json);
    CHECK(run(args, out, err) == 0, "kl --db exits 0");
    kld_db *d = NULL;
    kld_error e = {0};
    CHECK_OK(kld_db_open_existing(db, &d, &e), e);
    int64_t *ids = NULL;
    size_t n = 0;
    kld_db_filter f = {0};
    if (d) CHECK_OK(kld_db_list(d, &f, &ids, &n, &e), e);
    CHECK(n == 1, "one run recorded (%zu)", n);
    if (d && n == 1) {
        kld_db_row *row = NULL;
        CHECK_OK(kld_db_get(d, ids[0], &row, &e), e);
        json_error_t je;
        json_t *j = json_load_file(json, 0, &je);
        double mean = json_number_value(json_object_get(json_object_get(j, "kld"), "mean"));
        if (row) {
            CHECK(row->summary.kld.mean == mean, "recorded KLD %.17g equals the JSON's %.17g", row->summary.kld.mean, mean);
            CHECK(row->label && !strcmp(row->label, "rec-test") && row->mode && !strcmp(row->mode, "two-models"),
                  "label and mode recorded");
        }
        json_decref(j);
        kld_db_row_free(row);
    }
    free(ids);
    kld_db_close(d);
    /* --no-db: nothing new */
    snprintf(args, sizeof args, "kl %s --no-db --html '%s'", pair, html);
    CHECK(run(args, out, err) == 0, "kl --no-db --html exits 0");
    struct stat sb;
    CHECK(stat(html, &sb) == 0 && sb.st_size > 10000, "--no-db --html still writes the report");
    CHECK_OK(kld_db_open_existing(db, &d, &e), e);
    if (d) CHECK_OK(kld_db_list(d, &f, &ids, &n, &e), e);
    CHECK(n == 1, "--no-db recorded nothing (%zu runs)", n);
    free(ids);
    kld_db_close(d);
    /* an unwritable database: refused before the run (issue 29.4: no result lost
     * to a bad --db after hours of work), naming it */
    snprintf(args, sizeof args, "kl %s --db /proc/kldeval-no-such-dir/runs.sqlite", pair);
    CHECK(run(args, out, err) == 2, "an unwritable database is refused before the run");
    size_t len;
    char *o = kt_read_file(out, &len), *t = kt_read_file(err, &len);
    CHECK(strstr(o, "Mean KLD(ref||arm)") == NULL, "nothing was scored");
    CHECK(strstr(t, "/proc/kldeval-no-such-dir/runs.sqlite") && strstr(t, "--no-db"),
          "stderr names the database and --no-db: %s", t);
    free(o);
    free(t);
    snprintf(args, sizeof args, "kl %s --db '%s' --no-db", pair, db);
    CHECK(run(args, out, err) == 2, "--db with --no-db is refused");
    return kt_finish();
}
