/* cmd_report.c — `kldeval report ID... --html OUT.html`: the HTML report of
 * recorded runs (src/report/report_html*.c) from the run database. */
#include "cli/args.h"
#include "cli/commands.h"
#include "db/db.h"
#include "report/report_html.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
"usage: kldeval report ID... --html OUT.html [--db PATH]\n\n"
"Writes one self-contained HTML file about the recorded runs ID... (see kldeval runs list): the\n"
"summary table; each arm's KLD distribution (histogram on a log axis, and the CDF); KLD by context\n"
"position and by the reference's confidence; top-1 agreement and PPL ratio with error bars; size\n"
"against KLD over all arms; the arms ranked by KLD; the paired comparisons (as kldeval runs compare);\n"
"each run's configuration. Capability runs (modes cap, cap-score) get their own section: the\n"
"per-task accuracy of every model with the paired difference, and a grouped bar chart per task.\n"
"The charts are drawn by Chart.js, which is inlined: the file opens\n"
"offline and makes no network request.\n\n"
"  --html OUT.html    the file to write (overwritten)\n"
"  --db PATH          the database (default $KLDEVAL_DB, else $XDG_DATA_HOME/kldeval/runs.sqlite,\n"
"                     else ~/.local/share/kldeval/runs.sqlite)\n"
"  -h, --help         this text\n\n"
"Error bars are ± one standard error (sqrt(var/(N−1)), var the population variance).\n");
}

int kld_cmd_report(int argc, char **argv) {
    const char *html = NULL, *db_path = NULL;
    int64_t *ids = NULL;
    size_t n = 0;
    int rc = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            free(ids);
            return 0;
        }
        if (a[0] != '-') {
            char *end;
            long long x = strtoll(a, &end, 10);
            if (*end || x <= 0) {
                fprintf(stderr, "kldeval report: ID expects a positive integer, got '%s'\n", a);
                goto done;
            }
            int64_t *g = realloc(ids, (n + 1) * sizeof *g);
            if (!g) goto done;
            ids = g;
            ids[n++] = x;
            continue;
        }
        if (strcmp(a, "--html") && strcmp(a, "--db")) {
            fprintf(stderr, "kldeval report: unknown flag '%s' (see --help)\n", a);
            goto done;
        }
        if (!(v = kld_arg_value(argc, argv, &i))) goto done;
        if (!strcmp(a, "--html")) html = v;
        else db_path = v;
    }
    if (!n || !html) {
        fprintf(stderr, "kldeval report: expects at least one ID and --html OUT.html (see --help)\n");
        goto done;
    }
    if (!kld_arg_output("report", "--html", html, (const char *const[]){db_path}, 1)) goto done;
    kld_db *db = NULL;
    kld_error err = {0};
    rc = 1;
    if (kld_db_open_existing(db_path, &db, &err) != KLD_OK ||
        kld_report_html_write(db, ids, n, html, &err) != KLD_OK) {
        fprintf(stderr, "kldeval report: %s\n", err.msg);
    } else {
        printf("wrote %s (%zu run%s)\n", html, n, n == 1 ? "" : "s");
        rc = 0;
    }
    kld_db_close(db);
done:
    free(ids);
    return rc;
}
