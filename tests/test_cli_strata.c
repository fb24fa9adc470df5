/* test_cli_strata.c — `kl --strata` and `--score-only` as a user runs them
 * (stories260K f32 against q8_0): every stratum's mean equals the mean of
 * the --per-position rows whose decoded next token the regex matches
 * (recomputed here with PCRE2 from the TSV's token_text column), the TSV's
 * strata column names exactly those strata, --score-only NAME equals the
 * stratum of the unrestricted run figure for figure, a gate on a stratum's
 * statistic is judged, and bad strata are errors before any model loads.
 * The role strata of chat corpora: test_chat_corpus.c. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "testlib.h"

#include <jansson.h>
#include <math.h>
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#define MODELS "--ref " KT_SHARED "/models/stories260K/f32.gguf --arm " KT_SHARED "/models/stories260K/q8_0.gguf"

static const char *kldeval;

static int run(const char *args, char **out) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' %s 2>&1", kldeval, args);
    return kt_run_capture(cmd, out);
}

static const char *const NAMES[3] = {"digits", "space", "vowel"};
static const char *const RES[3] = {"^\\s*\\d+$", "^\\s", "^\\s?[aeiou]"};

/* The TSV's escaped token text back to bytes (in place); its length. */
static size_t unescape(char *t) {
    size_t o = 0;
    for (size_t i = 0; t[i]; i++) {
        if (t[i] != '\\') {
            t[o++] = t[i];
            continue;
        }
        char c = t[++i];
        if (c == 't') t[o++] = '\t';
        else if (c == 'n') t[o++] = '\n';
        else if (c == 'r') t[o++] = '\r';
        else if (c == '\\') t[o++] = '\\';
        else if (c == 'x') {
            char hex[3] = {t[i + 1], t[i + 2], 0};
            t[o++] = (char)strtol(hex, NULL, 16);
            i += 2;
        }
    }
    t[o] = '\0';
    return o;
}

static double stratum_mean(const json_t *j, const char *name, double *n) {
    const json_t *s = json_object_get(json_object_get(j, "strata"), name);
    *n = json_number_value(json_object_get(s, "n_positions"));
    return json_number_value(json_object_get(json_object_get(s, "kld"), "mean"));
}

/* Each stratum's mean from the TSV rows grouped by the regex, and the
 * strata column against the regexes. */
static void check_against_tsv(const char *tsv, const json_t *j) {
    pcre2_code *re[3];
    for (int s = 0; s < 3; s++) {
        int ec;
        PCRE2_SIZE off;
        re[s] = pcre2_compile((PCRE2_SPTR)RES[s], PCRE2_ZERO_TERMINATED,
                              PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &ec, &off, NULL);
    }
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    char *text = kt_read_file(tsv, NULL);
    double sum[3] = {0}, cnt[3] = {0};
    size_t rows = 0, column_ok = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (!strncmp(line, "doc\t", 4)) continue;
        char *f[19] = {0}, *p = line;
        int nf = 0;
        for (; nf < 19; nf++) {
            f[nf] = p;
            char *tab = strchr(p, '\t');
            if (!tab) break;
            *tab = '\0';
            p = tab + 1;
        }
        if (nf != 18) continue;
        rows++;
        double kld = strtod(f[3], NULL);
        size_t len = unescape(f[17]);
        char want[256] = "";
        for (int s = 0; s < 3; s++) {
            if (pcre2_match(re[s], (PCRE2_SPTR)f[17], len, 0, 0, md, NULL) < 0) continue;
            sum[s] += kld;
            cnt[s] += 1;
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s%s", want[0] ? "," : "", NAMES[s]);
        }
        /* "special" follows the user strata in the column */
        column_ok += !strncmp(f[18], want, strlen(want)) &&
                     (f[18][strlen(want)] == '\0' || !strcmp(f[18] + strlen(want), want[0] ? ",special" : "special"));
    }
    CHECK(rows > 500 && column_ok == rows, "TSV: %zu rows, %zu with the strata the regexes give", rows, column_ok);
    for (int s = 0; s < 3; s++) {
        double n, mean = stratum_mean(j, NAMES[s], &n);
        /* the TSV prints 10 significant digits */
        CHECK(cnt[s] > 0 && n == cnt[s] && fabs(mean - sum[s] / cnt[s]) <= 1e-8 * mean,
              "stratum %s: %g positions, mean %.12g; from the TSV %g, %.12g", NAMES[s], n, mean, cnt[s],
              sum[s] / cnt[s]);
    }
    free(text);
    pcre2_match_data_free(md);
    for (int s = 0; s < 3; s++) pcre2_code_free(re[s]);
}

static void test_strata(void) {
    const char *b = kt_build_dir();
    char args[4096], json[600], tsv[600], only[600];
    snprintf(json, sizeof json, "%s/strata.json", b);
    snprintf(tsv, sizeof tsv, "%s/strata.tsv", b);
    snprintf(only, sizeof only, "%s/strata_only.json", b);
    snprintf(args, sizeof args, "kl " MODELS " --quiet --no-db --max-docs 40 --strata '%s=%s,%s=%s,%s=%s' "
             "--json '%s' --per-position '%s'", NAMES[0], RES[0], NAMES[1], RES[1], NAMES[2], RES[2], json, tsv);
    char *out = NULL;
    CHECK(run(args, &out) == 0 && strstr(out, "KLD by stratum"), "kl --strata: exit 0 with the strata table: %s",
          out ? out : "");
    free(out);
    json_error_t je;
    json_t *j = json_load_file(json, 0, &je);
    CHECK(j && json_array_size(json_object_get(json_object_get(j, "config"), "strata")) == 4,
          "config.strata: the three strata and special");
    check_against_tsv(tsv, j);

    /* --score-only space: the stratum alone, figure for figure */
    snprintf(args, sizeof args, "kl " MODELS " --quiet --no-db --max-docs 40 --strata '%s=%s' --score-only %s "
             "--json '%s' --gate 'strata.%s.kld.mean<=1,kld.mean<=1'", NAMES[1], RES[1], NAMES[1], only, NAMES[1]);
    CHECK(run(args, &out) == 0, "--score-only space with gates on the stratum: exit 0: %s", out ? out : "");
    free(out);
    json_t *o = json_load_file(only, 0, &je);
    double n, mean = stratum_mean(j, NAMES[1], &n);
    const json_t *k = json_object_get(o, "kld");
    CHECK(json_number_value(json_object_get(o, "n_positions")) == n &&
              json_number_value(json_object_get(k, "mean")) == mean &&
              json_number_value(json_object_get(k, "p99")) ==
                  json_number_value(json_object_get(json_object_get(json_object_get(json_object_get(j, "strata"),
                                                                                      NAMES[1]), "kld"), "p99")),
          "--score-only space: %g positions, mean %.17g; the stratum of the full run: %g, %.17g",
          json_number_value(json_object_get(o, "n_positions")), json_number_value(json_object_get(k, "mean")), n,
          mean);
    json_decref(o);
    json_decref(j);

    /* a gate on a stratum fails like any other */
    snprintf(args, sizeof args, "kl " MODELS " --quiet --no-db --max-docs 4 --strata 'space=^\\s' "
             "--gate 'strata.space.kld.mean<0'");
    CHECK(run(args, &out) == 3 && strstr(out, "strata.space.kld.mean") && strstr(out, "FAIL"),
          "a failing gate on a stratum: exit 3: %s", out ? out : "");
    free(out);
    /* a stratum nothing falls in */
    snprintf(args, sizeof args, "kl " MODELS " --quiet --no-db --max-docs 4 --strata 'never=^never-ever$' "
             "--score-only never");
    CHECK(run(args, &out) == 1 && strstr(out, "--score-only never") && strstr(out, "no position"),
          "an empty selection: exit 1 naming it: %s", out ? out : "");
    free(out);
}

/* The HTML report of a run with strata: one row per stratum, the mean
 * the JSON report's to 17 digits. */
static void test_html(void) {
    const char *b = kt_build_dir();
    char db[600], html[600], json[600], args[4096], *out = NULL;
    snprintf(db, sizeof db, "%s/strata.sqlite", b);
    snprintf(html, sizeof html, "%s/strata.html", b);
    snprintf(json, sizeof json, "%s/strata_html.json", b);
    remove(db);
    snprintf(args, sizeof args, "kl " MODELS " --quiet --db '%s' --max-docs 8 --strata 'space=^\\s' --json '%s'", db,
             json);
    CHECK(run(args, &out) == 0, "kl --strata into a database: %s", out ? out : "");
    free(out);
    snprintf(args, sizeof args, "report 1 --db '%s' --html '%s'", db, html);
    CHECK(run(args, &out) == 0, "report: %s", out ? out : "");
    free(out);
    json_error_t je;
    json_t *j = json_load_file(json, 0, &je);
    double n, mean = stratum_mean(j, "space", &n);
    json_decref(j);
    char *page = kt_read_file(html, NULL), want[128];
    snprintf(want, sizeof want, "data-key=\"kld_mean\" data-value=\"%.17g\"", mean);
    const char *row = page ? strstr(page, "<tr data-run=\"1\" data-stratum=\"space\">") : NULL;
    const char *end = row ? strstr(row, "</tr>") : NULL;
    const char *cell = row ? strstr(row, want) : NULL;
    CHECK(page && strstr(page, "id=\"strata-table\"") && row && cell && cell < end,
          "the HTML strata table: the space row with its mean %.17g", mean);
    CHECK(page && strstr(page, "data-stratum=\"special\""), "the HTML strata table: the special row");
    free(page);
}

/* Bad strata: exit 2 before the (missing) model would load. */
static void test_errors(void) {
    static const struct {
        const char *flags, *want;
    } cases[] = {
        {"--strata 'bad=(x'", "offset"},
        {"--strata 'bad=(x'", "bad"},
        {"--strata 'noequals'", "NAME=REGEX"},
        {"--strata 'a=x,a=y'", "twice"},
        {"--strata 'special=x'", "built-in"},
        {"--strata 'a=x' --score-only b", "--score-only 'b'"},
        {"--score-only role:assistant", "chat corpus"},
        {"--strata 'a=x' --gate 'strata.b.kld.mean<=1'", "no stratum 'b'"},
        {"--strata 'a=x' --gate 'strata.a.nonsense<=1'", "strata.a.nonsense"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[2048], *out = NULL;
        snprintf(args, sizeof args, "kl --ref /nonexistent/ref.gguf --arm /nonexistent/arm.gguf --no-db %s",
                 cases[i].flags);
        int rc = run(args, &out);
        CHECK(rc == 2 && out && strstr(out, cases[i].want) && !strstr(out, "nonexistent"),
              "%s: exit %d (want 2), message '%s' (want '%s', before any model loads)", cases[i].flags, rc,
              out ? out : "", cases[i].want);
        free(out);
    }
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_cli_strata KLDEVAL\n");
        return 2;
    }
    kldeval = argv[1];
    test_strata();
    test_html();
    test_errors();
    return kt_finish();
}
