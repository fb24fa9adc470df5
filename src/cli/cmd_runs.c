/* cmd_runs.c — `kldeval runs list|show|rm|export|compare`: the run
 * database from the terminal. Parses flags and prints; the queries and the
 * paired comparison live in src/db. */
#include "cli/args.h"
#include "cli/commands.h"
#include "common/common.h"
#include "cli/runs_cap.h"
#include "db/db.h"
#include "report/report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void usage(FILE *f) {
    fprintf(f,
"usage: kldeval runs <list|show|rm|export|compare> [flags]\n\n"
"The run database: every kl, dump, sweep, cap, cap score and smoketest run is recorded there\n"
"(see docs/runs-and-report.md).\n\n"
"  runs list [filters]                 one line per run: id, time, label, mode, arm, positions,\n"
"                                      KLD mean ± standard error, median, p99, top-1, PPL ratio;\n"
"                                      capability runs (modes cap, cap-score): the arm's\n"
"                                      Capability_Score (and the reference's) in the KLD column,\n"
"                                      Δ arm − ref in the PPL column\n"
"  runs show ID [--json]               every recorded column of one run (--json: its full report;\n"
"                                      capability runs: per-task accuracies, paired differences)\n"
"  runs rm ID...                       delete runs (all or none: an unknown ID deletes nothing)\n"
"  runs export --csv|--jsonl [--out FILE] [filters]\n"
"                                      every column but the per-position BLOB (CSV also without\n"
"                                      the report; JSONL with it, as an object), one run per line\n"
"  runs compare ID ID...               the runs side by side; for each pair that shares the\n"
"                                      reference and the token stream (corpus SHA-256, chunking,\n"
"                                      ctx, reference SHA-256, positions), paired per position:\n"
"                                      ΔKLD ± paired standard error, where A is closer, a sign test,\n"
"                                      a paired block bootstrap (A − B of mean, p99, p99.9 KLD and\n"
"                                      top-1 with 95%% intervals and p-values) and a verdict;\n"
"                                      capability runs: per-task accuracies side by side (capability\n"
"                                      and KL runs are not compared with each other)\n"
"  runs compare A B --gate EXPR        conditions on candidate A against baseline B, e.g.\n"
"                                      paired.kld.mean<=0@95 (A not distinguishably worse: the 95%%\n"
"                                      interval's low end <= 0), paired.kld.p99.9<=0.01, paired.top1\n"
"                                      >=-0.002@95; without @95 the difference itself is judged;\n"
"                                      each printed PASS/FAIL, exit status 3 when any fails\n\n"
"flags\n"
"  --db PATH          the database (default $KLDEVAL_DB, else $XDG_DATA_HOME/kldeval/runs.sqlite,\n"
"                     else ~/.local/share/kldeval/runs.sqlite)\n"
"filters (list, export)\n"
"  --label GLOB       label matches GLOB (*, ?, [..]; case-sensitive)\n"
"  --model TEXT       either arm's path contains TEXT, or its SHA-256 starts with TEXT\n"
"  --mode MODE        two-models, self-flag, saved-teacher, llamacpp-base, dump, sweep, cap,\n"
"                     cap-score, ...\n"
"  --since WHEN       created at or after WHEN: YYYY-MM-DD[THH:MM[:SS]] (UTC) or Nd / Nh / Nm ago\n"
"  --limit N          only the newest N matching runs\n"
"  -h, --help         this text\n\n"
"Definitions: mean ± se with se = sqrt(var/(N−1)), var the population variance; paired\n"
"differences d = A − B per position with the same definitions; the sign test is two-sided over\n"
"positions where the KLDs differ (exact binomial up to 10^6 positions, then normal).\n");
}

typedef struct opts {
    const char *db_path;
    kld_db_filter filter;
    char since_buf[32];
    bool json, csv, jsonl;
    const char *out;
    int64_t *ids;
    size_t n_ids;
    kld_gates gates; /* compare --gate: conditions on the pair's paired differences */
} opts;

/* --since: an ISO date (prefix) or a relative age, into a UTC ISO prefix. */
static bool parse_since(const char *v, char buf[32]) {
    size_t n = strlen(v);
    char unit = n ? v[n - 1] : 0;
    if (n >= 2 && (unit == 'd' || unit == 'h' || unit == 'm')) {
        char *end;
        long long k = strtoll(v, &end, 10);
        if (end == v + n - 1 && k >= 0 && k < 1000000) {
            time_t t = time(NULL) - (time_t)k * (unit == 'd' ? 86400 : unit == 'h' ? 3600 : 60);
            struct tm tm;
            gmtime_r(&t, &tm);
            strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
            return true;
        }
    }
    /* YYYY-MM-DD, optionally THH:MM or THH:MM:SS */
    static const char pat[] = "dddd-dd-ddTdd:dd:dd";
    if (n != 10 && n != 16 && n != 19) return false;
    for (size_t i = 0; i < n; i++)
        if (pat[i] == 'd' ? (v[i] < '0' || v[i] > '9') : v[i] != pat[i]) return false;
    snprintf(buf, 32, "%s", v);
    return true;
}

static bool parse_id(const char *cmd, const char *v, int64_t *id) {
    char *end;
    long long x = strtoll(v, &end, 10);
    if (!*v || *end || x <= 0) {
        fprintf(stderr, "kldeval runs %s: ID expects a positive integer, got '%s'\n", cmd, v);
        return false;
    }
    *id = x;
    return true;
}

/* Flags common to the subcommands; positional IDs collected. */
static bool parse(const char *cmd, int argc, char **argv, opts *o, bool filters, bool takes_ids, int *rc) {
    static const char *const valued[] = {"--db", "--label", "--model", "--mode", "--since",
                                         "--limit", "--out", "--gate", NULL};
    *rc = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            *rc = 0;
            return false;
        }
        if (a[0] != '-' && takes_ids) {
            int64_t *g = realloc(o->ids, (o->n_ids + 1) * sizeof *g);
            if (!g) return false;
            o->ids = g;
            if (!parse_id(cmd, a, &o->ids[o->n_ids])) return false;
            o->n_ids++;
            continue;
        }
        if (!strcmp(a, "--json") && !strcmp(cmd, "show")) { o->json = true; continue; }
        if (!strcmp(a, "--csv") && !strcmp(cmd, "export")) { o->csv = true; continue; }
        if (!strcmp(a, "--jsonl") && !strcmp(cmd, "export")) { o->jsonl = true; continue; }
        bool known = kld_arg_in(a, valued) &&
                     (!strcmp(a, "--db") || (filters && strcmp(a, "--out") && strcmp(a, "--gate")) ||
                      (!strcmp(a, "--out") && !strcmp(cmd, "export")) ||
                      (!strcmp(a, "--gate") && !strcmp(cmd, "compare")));
        if (!known) {
            fprintf(stderr, "kldeval runs %s: unknown %s '%s' (see kldeval runs --help)\n", cmd,
                    a[0] == '-' ? "flag" : "argument", a);
            return false;
        }
        if (!(v = kld_arg_value(argc, argv, &i))) return false;
        if (!strcmp(a, "--db")) o->db_path = v;
        else if (!strcmp(a, "--gate")) {
            kld_error e = {0};
            kld_gates_free(&o->gates);
            if (kld_gates_parse_paired(v, &o->gates, &e) != KLD_OK) {
                fprintf(stderr, "kldeval runs %s: %s\n", cmd, e.msg);
                return false;
            }
        }
        else if (!strcmp(a, "--label")) o->filter.label_glob = v;
        else if (!strcmp(a, "--model")) o->filter.model = v;
        else if (!strcmp(a, "--mode")) {
            if (!kld_db_mode_known(v)) { /* an unknown mode would silently list nothing */
                fprintf(stderr, "kldeval runs %s: --mode '%s' is none of", cmd, v);
                for (int k = 0; kld_db_modes[k]; k++) fprintf(stderr, "%s %s", k ? "," : "", kld_db_modes[k]);
                fprintf(stderr, "\n");
                return false;
            }
            o->filter.mode = v;
        }
        else if (!strcmp(a, "--out")) o->out = v;
        else if (!strcmp(a, "--limit")) {
            if (!kld_arg_int(a, v, 1, INT64_MAX, &o->filter.limit)) return false;
        } else if (!strcmp(a, "--since")) {
            if (!parse_since(v, o->since_buf)) {
                fprintf(stderr, "kldeval runs %s: --since expects YYYY-MM-DD[THH:MM[:SS]] or Nd, Nh, "
                                "Nm, got '%s'\n", cmd, v);
                return false;
            }
            o->filter.since = o->since_buf;
        }
    }
    return true;
}

static kld_db *open_or_say(const char *cmd, const char *path) {
    kld_db *db = NULL;
    kld_error err = {0};
    if (kld_db_open_existing(path, &db, &err) != KLD_OK) {
        fprintf(stderr, "kldeval runs %s: %s\n", cmd, err.msg);
        return NULL;
    }
    return db;
}

/* Prints s left-aligned in width columns, counting UTF-8 characters (±, Δ
 * and − are one column but several bytes, which printf's widths count). */
void kld_runs_pad(const char *s, int width) {
    int cols = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) cols += (*p & 0xc0) != 0x80;
    fputs(s, stdout);
    for (; cols < width; cols++) fputc(' ', stdout);
}

/* The name column of a comparison line. */
static void row_name(const char *s) {
    printf("  ");
    kld_runs_pad(s, 28);
}

/* The end of a path that tells two files apart: its last two components
 * ("rand-llama/q8_0.gguf"), cut from the left to fit width (with "…"). */
static const char *short_path(const char *p, char *buf, size_t width) {
    if (!p) return "-";
    const char *s = p + strlen(p);
    for (int slashes = 0; s > p; s--)
        if (s[-1] == '/' && ++slashes == 2) break;
    size_t n = strlen(s);
    if (n <= width) snprintf(buf, width + 4, "%s", s);
    else snprintf(buf, width + 4, "…%s", s + n - (width - 1));
    return buf;
}

/* What distinguishes a row besides its figures: a shard's identity, a
 * stopped run. */
static const char *row_status(const kld_db_row *r, char *buf, size_t n) {
    const json_t *sh = json_object_get(json_object_get(r->report, "config"), "shard");
    if (sh)
        snprintf(buf, n, "shard %lld/%lld%s", (long long)json_integer_value(json_object_get(sh, "k")),
                 (long long)json_integer_value(json_object_get(sh, "n")), r->partial ? ", partial" : "");
    else
        snprintf(buf, n, "%s", r->partial ? "partial" : "");
    return buf;
}

/* "%.*g" or "-" for a missing value. */
static const char *num(char *buf, size_t n, double v, int digits) {
    if (!isfinite(v)) snprintf(buf, n, "-");
    else snprintf(buf, n, "%.*g", digits, v);
    return buf;
}

static const char *pm(char *buf, size_t n, double v, double se, int digits) {
    if (!isfinite(v)) snprintf(buf, n, "-");
    else if (!isfinite(se)) snprintf(buf, n, "%.*g", digits, v);
    else snprintf(buf, n, "%.*g ± %.2g", digits, v, se);
    return buf;
}

static int cmd_list(int argc, char **argv) {
    opts o = {0};
    int rc;
    if (!parse("list", argc, argv, &o, true, false, &rc)) return rc;
    kld_db *db = open_or_say("list", o.db_path);
    if (!db) return 1;
    kld_error err = {0};
    int64_t *ids = NULL;
    size_t n = 0;
    if (kld_db_list(db, &o.filter, &ids, &n, &err) != KLD_OK) {
        fprintf(stderr, "kldeval runs list: %s\n", err.msg);
        kld_db_close(db);
        return 1;
    }
    printf("%5s  %-20s  %-16s  %-15s  %-28s  %-28s  %9s  ", "id", "created", "label", "mode",
           "reference", "arm", "positions");
    kld_runs_pad("KLD mean ± se | CapScore", 24);
    printf("  %9s  %9s  %7s  ", "median", "p99", "top-1");
    kld_runs_pad("PPL ratio ± se", 16);
    printf("\n");
    rc = 0;
    for (size_t i = 0; i < n; i++) {
        kld_db_row *r;
        if (kld_db_get(db, ids[i], &r, &err) != KLD_OK) {
            fprintf(stderr, "kldeval runs list: %s\n", err.msg);
            rc = 1;
            break;
        }
        char a[48], b[24], c[24], d[24], e[48], rp[40], ap[40], st[48];
        const kld_summary *s = &r->summary;
        bool h = r->has_summary;
        printf("%5lld  %-20s  %-16.16s  %-15s  ", (long long)r->id, r->created ? r->created : "-",
               r->label ? r->label : "-", r->mode ? r->mode : "-");
        kld_runs_pad(short_path(r->ref.path, rp, 28), 28);
        printf("  ");
        kld_runs_pad(short_path(r->arm.path, ap, 28), 28);
        if (r->cap.present) {
            printf("  %9s  ", "-");
            kld_runs_pad(kld_runs_cap_score_cell(r, a, sizeof a), 24);
            printf("  %9s  %9s  %7s  ", "-", "-", "-");
            kld_runs_pad(kld_runs_cap_diff_cell(r, e, sizeof e), 16);
        } else {
            printf("  %9s  ", h ? (snprintf(st, sizeof st, "%llu", (unsigned long long)s->n_positions), st) : "-");
            kld_runs_pad(h ? pm(a, sizeof a, s->kld.mean, s->kld.se, 6) : "-", 24);
            printf("  %9s  %9s  %7s  ", h ? num(b, sizeof b, s->kld.median, 4) : "-",
                   h ? num(c, sizeof c, s->kld.pct[8], 4) : "-", h ? num(d, sizeof d, s->top1_agreement, 4) : "-");
            kld_runs_pad(h ? pm(e, sizeof e, s->ppl_ratio, s->ppl_ratio_se, 5) : "-", 16);
        }
        printf("  %s\n", row_status(r, st, sizeof st));
        kld_db_row_free(r);
    }
    if (!n) printf("(no runs%s in %s)\n", o.filter.label_glob || o.filter.model || o.filter.mode ||
                   o.filter.since ? " match" : "", kld_db_path(db));
    free(ids);
    kld_db_close(db);
    return rc;
}

static void show_arm(const char *which, const kld_db_arm *a) {
    char bytes[32] = "-";
    if (a->bytes >= 0) kld_format_bytes((uint64_t)a->bytes, bytes, sizeof bytes);
    printf("%-18s: %s (%s)\n", which, a->path ? a->path : "-", a->kind ? a->kind : "-");
    printf("%-18s  size %s (%lld bytes), sha256 %s, arch %s, n_vocab %lld", "", bytes,
           (long long)a->bytes, a->sha256 ? a->sha256 : "-", a->arch ? a->arch : "-",
           (long long)a->n_vocab);
    if (isfinite(a->bpw)) printf(", %.3f bits per weight", a->bpw);
    if (a->policy) printf(", policy %s", a->policy);
    if (a->levers) printf(", levers %s", a->levers);
    printf("\n");
}

/* The corpus, windows and statistics of a KL run. */
static void show_kl(const kld_db_row *r) {
    char a[64];
    const kld_summary *s = &r->summary;
    printf("%-18s: %s (%s), sha256 %s, %lld documents\n", "corpus", r->corpus_name ? r->corpus_name : "-",
           r->corpus_kind ? r->corpus_kind : "-", r->corpus_sha256 ? r->corpus_sha256 : "-",
           (long long)r->corpus_documents);
    printf("%-18s: %s chunking, ctx %lld, chunk %lld\n", "windows", r->chunking ? r->chunking : "-",
           (long long)r->ctx, (long long)r->chunk);
    printf("%-18s: %s s wall, %s tokens/s\n", "time", num(a, sizeof a, r->wall_s, 4),
           num(a + 32, 32, r->tokens_per_s, 5));
    if (!r->has_summary) {
        printf("%-18s: none (the run was begun and never completed)\n", "statistics");
    } else {
        printf("%-18s: %llu (%llu with a next token), %llu documents; per-position values: %s\n",
               "positions", (unsigned long long)s->n_positions, (unsigned long long)s->n_tokens,
               (unsigned long long)s->n_docs, r->positions_n >= 0 ? "stored" : "none");
        kld_runs_pad("KLD mean ± se", 18);
        printf(": %s nats\n", pm(a, sizeof a, s->kld.mean, s->kld.se, 6));
        printf("%-18s: median %.6g, p99 %.6g, max %.6g, min %.6g\n", "KLD", s->kld.median,
               s->kld.pct[8], s->kld.max, s->kld.min);
        printf("%-18s: %s\n", "top-1 agreement", pm(a, sizeof a, s->top1_agreement, s->top1_se, 6));
        printf("%-18s: %s\n", "PPL ratio", pm(a, sizeof a, s->ppl_ratio, s->ppl_ratio_se, 6));
        printf("%-18s: %s\n", "PPL ref", pm(a, sizeof a, s->ppl_ref, s->ppl_ref_se, 6));
        printf("%-18s: %s\n", "PPL arm", pm(a, sizeof a, s->ppl_arm, s->ppl_arm_se, 6));
        printf("%-18s: %s\n", "JSD mean", pm(a, sizeof a, s->jsd.mean, s->jsd.se, 6));
        kld_runs_pad("Δp mean", 18);
        printf(": %s (RMS %.4g)\n", pm(a, sizeof a, s->dp.mean, s->dp.se, 4), s->dp_rms);
    }
}

static bool is_dump(const kld_db_row *r) { return r->mode && !strcmp(r->mode, "dump"); }

/* A dump: what it wrote, not statistics (a dump has none). */
static void show_dump(const kld_db_row *r) {
    char a[64];
    const json_t *cfg = json_object_get(r->report, "config");
    printf("%-18s: %s (%s), sha256 %s, %lld documents\n", "corpus", r->corpus_name ? r->corpus_name : "-",
           r->corpus_kind ? r->corpus_kind : "-", r->corpus_sha256 ? r->corpus_sha256 : "-",
           (long long)r->corpus_documents);
    printf("%-18s: %s chunking, ctx %lld, chunk %lld\n", "windows", r->chunking ? r->chunking : "-",
           (long long)r->ctx, (long long)r->chunk);
    const char *fmt = json_string_value(json_object_get(cfg, "format"));
    json_int_t version = json_integer_value(json_object_get(cfg, "format_version"));
    printf("%-18s: %s, %s", "wrote", json_string_value(json_object_get(cfg, "out")) ?
           json_string_value(json_object_get(cfg, "out")) : "-", fmt && !strcmp(fmt, "llamacpp-base")
           ? "a llama.cpp base file" : version == 3 ? "hidden states (format 3)" : "top-k logits");
    if (json_is_integer(json_object_get(cfg, "top_k")))
        printf(" (top-%lld, format %lld)", (long long)json_integer_value(json_object_get(cfg, "top_k")),
               (long long)version);
    printf("; %lld records in %lld windows\n", (long long)json_integer_value(json_object_get(cfg, "records")),
           (long long)json_integer_value(json_object_get(cfg, "windows_n")));
    printf("%-18s: %s s wall, %s tokens/s\n", "time", num(a, sizeof a, r->wall_s, 4),
           num(a + 32, 32, r->tokens_per_s, 5));
    printf("%-18s: %s\n", "state", r->partial ? "interrupted (continue it with dump --resume)" : "finished");
}

static int cmd_show(int argc, char **argv) {
    opts o = {0};
    int rc;
    if (!parse("show", argc, argv, &o, false, true, &rc)) { free(o.ids); return rc; }
    if (o.n_ids != 1) {
        fprintf(stderr, "kldeval runs show: expects one ID, got %zu (see kldeval runs --help)\n", o.n_ids);
        free(o.ids);
        return 2;
    }
    kld_db *db = open_or_say("show", o.db_path);
    if (!db) { free(o.ids); return 1; }
    kld_error err = {0};
    kld_db_row *r = NULL;
    rc = 0;
    if (kld_db_get(db, o.ids[0], &r, &err) != KLD_OK) {
        fprintf(stderr, "kldeval runs show: %s\n", err.msg);
        rc = 1;
    } else if (o.json) {
        char *t = r->report ? json_dumps(r->report, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
        printf("%s\n", t ? t : "null");
        free(t);
    } else {
        printf("%-18s: %lld%s\n", "run", (long long)r->id, r->partial ? " (partial)" : "");
        printf("%-18s: %s\n", "created", r->created ? r->created : "-");
        printf("%-18s: %s\n", "label", r->label ? r->label : "-");
        printf("%-18s: %s\n", "mode", r->mode ? r->mode : "-");
        printf("%-18s: kldeval %s on %s (%s), %lld threads\n", "machine", r->version ? r->version : "-",
               r->host ? r->host : "-", r->cpu_model ? r->cpu_model : "-", (long long)r->threads);
        show_arm("reference", &r->ref);
        if ((!r->cap.present && !is_dump(r)) || r->arm.path) show_arm("arm", &r->arm);
        if (r->cap.present) kld_runs_show_cap(r);
        else if (is_dump(r)) show_dump(r);
        else show_kl(r);
    }
    kld_db_row_free(r);
    kld_db_close(db);
    free(o.ids);
    return rc;
}

static int cmd_rm(int argc, char **argv) {
    opts o = {0};
    int rc;
    if (!parse("rm", argc, argv, &o, false, true, &rc)) { free(o.ids); return rc; }
    if (!o.n_ids) {
        fprintf(stderr, "kldeval runs rm: expects at least one ID (see kldeval runs --help)\n");
        return 2;
    }
    kld_db *db = open_or_say("rm", o.db_path);
    if (!db) { free(o.ids); return 1; }
    kld_error err = {0};
    rc = 0;
    if (kld_db_remove(db, o.ids, o.n_ids, &err) != KLD_OK) {
        fprintf(stderr, "kldeval runs rm: %s\n", err.msg);
        rc = 1;
    } else {
        for (size_t i = 0; i < o.n_ids; i++) printf("deleted run %lld\n", (long long)o.ids[i]);
    }
    kld_db_close(db);
    free(o.ids);
    return rc;
}

static int cmd_export(int argc, char **argv) {
    opts o = {0};
    int rc;
    if (!parse("export", argc, argv, &o, true, false, &rc)) return rc;
    if (o.csv == o.jsonl) {
        fprintf(stderr, "kldeval runs export: give exactly one of --csv and --jsonl\n");
        return 2;
    }
    if (o.out && !kld_arg_output("runs export", "--out", o.out, (const char *const[]){o.db_path}, 1))
        return 2;
    kld_db *db = open_or_say("export", o.db_path);
    if (!db) return 1;
    FILE *f = o.out ? fopen(o.out, "w") : stdout;
    if (!f) {
        fprintf(stderr, "kldeval runs export: --out %s: cannot write\n", o.out);
        kld_db_close(db);
        return 1;
    }
    kld_error err = {0};
    rc = 0;
    if (kld_db_export(db, &o.filter, o.csv ? KLD_DB_EXPORT_CSV : KLD_DB_EXPORT_JSONL, f, &err) != KLD_OK) {
        fprintf(stderr, "kldeval runs export: %s\n", err.msg);
        rc = 1;
    }
    if (o.out && fclose(f) != 0) {
        fprintf(stderr, "kldeval runs export: --out %s: write failed\n", o.out);
        rc = 1;
    }
    kld_db_close(db);
    return rc;
}

/* One row of the side-by-side table: name, then each run's value. */
typedef const char *(*cell_fn)(const kld_db_row *r, char *buf, size_t n);

static const char *c_label(const kld_db_row *r, char *b, size_t n) { snprintf(b, n, "%s", r->label ? r->label : "-"); return b; }
static const char *c_arm(const kld_db_row *r, char *b, size_t n) { snprintf(b, n, "%s", kld_base_name(r->arm.path)); return b; }
static const char *c_size(const kld_db_row *r, char *b, size_t n) {
    return r->arm.bytes >= 0 ? kld_format_bytes((uint64_t)r->arm.bytes, b, n) : (snprintf(b, n, "-"), b);
}
static const char *c_bpw(const kld_db_row *r, char *b, size_t n) { return num(b, n, r->arm.bpw, 4); }
static const char *c_pos(const kld_db_row *r, char *b, size_t n) { snprintf(b, n, "%llu", (unsigned long long)r->summary.n_positions); return b; }
static const char *c_kld(const kld_db_row *r, char *b, size_t n) { return pm(b, n, r->summary.kld.mean, r->summary.kld.se, 6); }
static const char *c_med(const kld_db_row *r, char *b, size_t n) { return num(b, n, r->summary.kld.median, 6); }
static const char *c_p99(const kld_db_row *r, char *b, size_t n) { return num(b, n, r->summary.kld.pct[8], 6); }
static const char *c_top1(const kld_db_row *r, char *b, size_t n) { return pm(b, n, r->summary.top1_agreement, r->summary.top1_se, 6); }
static const char *c_ppl(const kld_db_row *r, char *b, size_t n) { return pm(b, n, r->summary.ppl_ratio, r->summary.ppl_ratio_se, 6); }

static int compare(opts *po);

static int cmd_compare(int argc, char **argv) {
    opts o = {0};
    int rc;
    if (!parse("compare", argc, argv, &o, false, true, &rc)) {
        /* rc: parse's status */
    } else if (o.n_ids < 2) {
        fprintf(stderr, "kldeval runs compare: expects at least two IDs, got %zu\n", o.n_ids);
        rc = 2;
    } else if (o.gates.n && o.n_ids != 2) {
        fprintf(stderr, "kldeval runs compare: --gate judges one pair (candidate A against baseline B): give two "
                        "IDs, got %zu\n", o.n_ids);
        rc = 2;
    } else {
        rc = compare(&o);
    }
    kld_gates_free(&o.gates);
    free(o.ids);
    return rc;
}

static int compare(opts *po) {
    opts o = *po;
    po->ids = NULL; /* compare frees them */
    int rc;
    bool gates_failed = false;
    kld_db *db = open_or_say("compare", o.db_path);
    if (!db) { free(o.ids); return 1; }
    kld_db_row **rows = calloc(o.n_ids, sizeof *rows);
    kld_error err = {0};
    rc = rows ? 0 : 1;
    size_t n_cap = 0;
    for (size_t i = 0; !rc && i < o.n_ids; i++) {
        if (kld_db_get(db, o.ids[i], &rows[i], &err) != KLD_OK) {
            fprintf(stderr, "kldeval runs compare: %s\n", err.msg);
            rc = 1;
        } else if (rows[i]->cap.present) {
            n_cap++;
        } else if (is_dump(rows[i])) {
            fprintf(stderr, "kldeval runs compare: run %lld is a dump (a saved teacher or candidate): it "
                            "has no statistics to compare; compare the kl runs scored against it\n",
                    (long long)o.ids[i]);
            rc = 1;
        } else if (!rows[i]->has_summary) {
            fprintf(stderr, "kldeval runs compare: run %lld has no statistics (begun, never completed)\n",
                    (long long)o.ids[i]);
            rc = 1;
        }
    }
    if (!rc && n_cap && n_cap < o.n_ids) {
        /* accuracies and KLDs measure different things: no common table */
        size_t c = 0, k = 0;
        while (!rows[c]->cap.present) c++;
        while (rows[k]->cap.present) k++;
        fprintf(stderr, "kldeval runs compare: run %lld is a capability run (mode %s) and run %lld a KL run "
                        "(mode %s): compare capability runs with capability runs and KL runs with KL runs\n",
                (long long)rows[c]->id, rows[c]->mode ? rows[c]->mode : "-", (long long)rows[k]->id,
                rows[k]->mode ? rows[k]->mode : "-");
        rc = 2;
    } else if (!rc && n_cap && o.gates.n) {
        fprintf(stderr, "kldeval runs compare: --gate judges paired KL runs, not capability runs\n");
        rc = 2;
    } else if (!rc && n_cap) {
        kld_runs_compare_cap(rows, o.n_ids);
    } else if (!rc) {
        static const struct { const char *name; cell_fn f; } table[] = {
            {"label", c_label}, {"arm", c_arm}, {"size", c_size}, {"bits per weight", c_bpw},
            {"positions", c_pos}, {"KLD mean ± se", c_kld}, {"KLD median", c_med},
            {"KLD p99", c_p99}, {"top-1 agreement", c_top1}, {"PPL ratio ± se", c_ppl}};
        printf("%-18s", "run");
        for (size_t i = 0; i < o.n_ids; i++) printf("  %-24lld", (long long)rows[i]->id);
        printf("\n");
        for (size_t t = 0; t < sizeof table / sizeof table[0]; t++) {
            kld_runs_pad(table[t].name, 18);
            for (size_t i = 0; i < o.n_ids; i++) {
                char b[64];
                printf("  ");
                kld_runs_pad(table[t].f(rows[i], b, sizeof b), 24);
            }
            printf("\n");
        }
        for (size_t i = 0; !rc && i < o.n_ids; i++)
            for (size_t j = i + 1; !rc && j < o.n_ids; j++) {
                kld_db_comparison c;
                if (kld_db_compare(db, rows[i], rows[j], &c, &err) != KLD_OK) {
                    fprintf(stderr, "kldeval runs compare: %s\n", err.msg);
                    rc = 1;
                    break;
                }
                long long a = (long long)rows[i]->id, b = (long long)rows[j]->id;
                printf("\nrun %lld vs run %lld: ", a, b);
                if (!c.pairable) {
                    printf("not pairable: %s\n", c.why_not);
                    if (o.gates.n) {
                        printf("%-30s: not judged (the runs are not paired): FAIL\n", "gate");
                        gates_failed = true;
                    }
                    row_name("ΔKLD (A − B)");
                    printf(" %+.6g ± %.2g nats (unpaired: sqrt(se_A² + se_B²))\n", c.u_kld, c.u_kld_se);
                    continue;
                }
                printf("paired over %llu positions (same corpus, chunking, ctx, reference, tokens)\n",
                       (unsigned long long)c.d_kld.n);
                row_name("ΔKLD (A − B)");
                printf(" %+.6g ± %.2g nats (paired; unpaired %+.6g ± %.2g)\n", c.d_kld.mean, c.d_kld.se,
                       c.u_kld, c.u_kld_se);
                char closer[48];
                snprintf(closer, sizeof closer, "run %lld closer", a);
                row_name(closer);
                printf(" %.2f %% of positions (%llu; run %lld closer at %llu, ties %llu)\n",
                       100.0 * (double)c.a_closer / (double)c.d_kld.n,
                       (unsigned long long)c.a_closer, b, (unsigned long long)c.b_closer,
                       (unsigned long long)c.ties);
                row_name("sign test");
                if (c.sign_p > 0) printf(" p = %.3g (two-sided)\n", c.sign_p);
                else printf(" p < 1e-300 (two-sided)\n");
                row_name("Δtop-1 (A − B)");
                printf(" %+.6g ± %.2g\n", c.d_top1.mean, c.d_top1.se);
                row_name("Δln PPL (A − B)");
                printf(" %+.6g ± %.2g (over %llu tokens)\n", c.d_nll.mean, c.d_nll.se,
                       (unsigned long long)c.d_nll.n);
                if (c.boot.replicates) kld_report_paired_text(stdout, &c.boot);
                char verdict[512];
                kld_db_verdict(&c, a, b, verdict, sizeof verdict);
                row_name("verdict");
                printf(" %s\n", verdict);
                if (o.gates.n) { /* run A the candidate, run B the baseline */
                    bool pass = true;
                    json_t *cj = kld_db_comparison_json(&c);
                    json_t *g = cj ? kld_gates_eval_paired(&o.gates, cj, &pass) : NULL;
                    if (!g) {
                        fprintf(stderr, "kldeval runs compare: out of memory\n");
                        rc = 1;
                    } else {
                        kld_gates_print(stdout, g);
                        if (!pass) gates_failed = true;
                    }
                    json_decref(g);
                    json_decref(cj);
                }
            }
    }
    for (size_t i = 0; rows && i < o.n_ids; i++) kld_db_row_free(rows[i]);
    free(rows);
    kld_db_close(db);
    free(o.ids);
    return rc ? rc : gates_failed ? KLD_EXIT_GATE_FAILED : 0;
}

int kld_cmd_runs(int argc, char **argv) {
    static const struct { const char *name; int (*run)(int, char **); } subs[] = {
        {"list", cmd_list}, {"show", cmd_show}, {"rm", cmd_rm}, {"export", cmd_export},
        {"compare", cmd_compare}};
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
        if (!strcmp(argv[1], subs[i].name)) return subs[i].run(argc - 1, argv + 1);
    fprintf(stderr, "kldeval runs: unknown subcommand '%s' (list, show, rm, export, compare)\n", argv[1]);
    return 2;
}
