/* cmd_merge.c — `kldeval merge PART...`: the shard partials of one
 * evaluation (kl --shard K/N --partial OUT) → the report one unsharded run
 * gives, bit for bit (src/eval/merge.h). */
#include "cap/units.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "eval/merge.h"
#include "eval/bootstrap.h"
#include "report/report.h"
#include "store/dump.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
"usage: kldeval merge PART... [--json FILE] [--pin FILE] [--per-position FILE] [--label NAME]\n"
"       kldeval merge --dump OUT_DIR SHARD_DIR...\n\n"
"Merges the shard partials of one evaluation (kldeval kl --shard K/N --partial PART) into the\n"
"report a single run gives: the parts must share the hash of the evaluation's defining inputs\n"
"(models' and corpus' SHA-256, chunking, windows, ctx, top-k, ...), the shard count and mode, and\n"
"hold every shard exactly once; a missing, duplicated, foreign or corrupted part is an error that\n"
"names it. Window order is restored and every statistic is computed from the merged per-position\n"
"records, so the JSON equals the single run's except for the timings (sums over the shards) and\n"
"the added \"merged\" object (the evaluation hash and the parts). Memory: the records stay in\n"
"the partials and are read in passes; the statistics need 24 bytes per position, the run\n"
"database's per-position BLOB 29.\n\n"
"  --json FILE            the JSON report (schema kldeval.kl/1 plus \"merged\")\n"
"  --pin FILE             append one JSON line\n"
"  --label NAME           label of the pin line (default: the shards' label)\n"
"  --per-position FILE    every position as TSV, in window order\n"
"  --db PATH / --no-db    record the merged run in this run database / do not (default as kl)\n"
"  --html FILE            the HTML report of the merged run\n"
"  -h, --help             this text\n\n"
"Capability shards (kldeval cap --shard K/N --partial PART; told by their opening bytes): the\n"
"parts must share the hash of the run's defining inputs (models' SHA-256, policies, levers,\n"
"tasks, n, seed, max_new, chat and GSM8K modes, the data files' SHA-256), the shard count and\n"
"mode, and cover every item of every task exactly once (a missing, duplicated or foreign part is\n"
"an error naming it). The result is the single run's report (text, --json, --html) plus a\n"
"\"merged\" object (hash, shards, mode, parts), recorded as one run (mode cap) that names the\n"
"shards. --pin and --per-position do not apply.\n\n"
"Dump shards (kldeval dump --shard K/N --out SHARD_DIR): --dump OUT_DIR assembles them into the\n"
"dump one unsharded run writes. The shards must share the hash of the dump's defining inputs\n"
"(model SHA-256, policy, levers, corpus, chunking, ctx, top-k, logit dtype, teacher), the shard\n"
"count and mode, and tokens.bin, and hold every sequence exactly once (a missing, duplicated or\n"
"foreign shard is an error naming it). OUT_DIR (new or empty) gets tokens.bin and every\n"
"seq-<i>.bin and sidecar byte for byte, then manifest.json (temporary name, fsync, rename): the\n"
"single run's manifest except \"created\" (the earliest shard's) and an added \"merged\" object\n"
"{eval_hash, shards, mode}. A PART that is a dump shard without --dump is refused. The run\n"
"database gets one row for the merged dump (mode dump) listing its shards under config.merged.\n");
}

/* The single run's report plus "merged": the evaluation hash and the parts,
 * which is also what links the merged run to its shards in the database. */
static json_t *merged_json(const kld_summary *sum, const kld_report_run *run,
                           const kld_merge_result *m) {
    json_t *o = kld_report_json(sum, run);
    if (!o) return NULL;
    char hex[65];
    kld_hex_digest(m->eval_hash, hex);
    json_object_set_new(o, "merged", json_pack("{s:s,s:i,s:O}", "eval_hash", hex, "shards",
                                               (int)m->n_shards, "parts", m->parts));
    return o;
}

int kld_cmd_merge(int argc, char **argv) {
    static const char *const valued[] = {"--json", "--pin", "--per-position", "--label", "--db",
                                         "--html", "--dump", NULL};
    const char *dump_out = NULL, *json_path = NULL, *pin_path = NULL, *tsv_path = NULL, *label = NULL;
    kld_kl_outputs out = {0};
    const char **parts = calloc((size_t)argc, sizeof *parts);
    if (!parts) return 1;
    size_t n_parts = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            free(parts);
            return 0;
        }
        if (a[0] != '-') { parts[n_parts++] = a; continue; }
        if (!strcmp(a, "--no-db")) { out.no_db = true; continue; }
        if (!kld_arg_in(a, valued)) {
            fprintf(stderr, "kldeval merge: unknown flag '%s' (see --help)\n", a);
            free(parts);
            return 2;
        }
        if (!(v = kld_arg_value(argc, argv, &i))) { free(parts); return 2; }
        if (!strcmp(a, "--json")) json_path = v;
        else if (!strcmp(a, "--pin")) pin_path = v;
        else if (!strcmp(a, "--per-position")) tsv_path = v;
        else if (!strcmp(a, "--db")) out.db_path = v;
        else if (!strcmp(a, "--html")) out.html_path = v;
        else if (!strcmp(a, "--dump")) dump_out = v;
        else label = v;
    }
    if (n_parts == 0) {
        fprintf(stderr, "kldeval merge: give the partials to merge (see --help)\n");
        free(parts);
        return 2;
    }
    if (dump_out) {
        if (json_path || pin_path || tsv_path || out.html_path) {
            fprintf(stderr, "kldeval merge: --dump writes a dump directory; --json, --pin, "
                            "--per-position and --html belong to the merge of kl partials\n");
            free(parts);
            return 2;
        }
        out.label = label;
        int rc = kld_merge_dump_main(dump_out, parts, n_parts, &out);
        free(parts);
        return rc;
    }
    size_t n_cap = 0;
    for (size_t i = 0; i < n_parts; i++) n_cap += kld_cap_is_partial(parts[i]);
    if (n_cap && n_cap != n_parts) {
        fprintf(stderr, "kldeval merge: %s capability partials and other parts: merge one kind at a time\n",
                n_cap == 1 ? "one of the parts is a" : "the parts mix");
        free(parts);
        return 2;
    }
    if (n_cap) {
        if (pin_path || tsv_path) {
            fprintf(stderr, "kldeval merge: --pin and --per-position belong to kl partials, not capability ones\n");
            free(parts);
            return 2;
        }
        const char *files[3] = {NULL, NULL, NULL};
        int nf = 0;
        const char *const outs[2][2] = {{"--json", json_path}, {"--html", out.html_path}};
        for (int k = 0; k < 2; k++) {
            if (!outs[k][1]) continue;
            for (size_t i = 0; i < n_parts; i++)
                if (!strcmp(parts[i], outs[k][1])) {
                    fprintf(stderr, "kldeval merge: %s %s is one of the parts\n", outs[k][0], outs[k][1]);
                    free(parts);
                    return 2;
                }
            if (!kld_arg_output("merge", outs[k][0], outs[k][1], files, nf)) { free(parts); return 2; }
            files[nf++] = outs[k][1];
        }
        int rc = kld_merge_cap_main(parts, n_parts, json_path, label, &out);
        free(parts);
        return rc;
    }
    for (size_t i = 0; i < n_parts; i++)
        if (kld_dump_is_shard(parts[i])) {
            fprintf(stderr, "kldeval merge: %s is a dump shard: assemble dump shards with --dump "
                            "OUT_DIR SHARD_DIR...\n", parts[i]);
            free(parts);
            return 2;
        }
    const char *files[64];
    int n_files = 0;
    const char *const outs[4][2] = {{"--json", json_path}, {"--pin", pin_path},
                                    {"--per-position", tsv_path}, {"--html", out.html_path}};
    for (int k = 0; k < 4; k++) {
        if (!outs[k][1]) continue;
        /* an output may not be one of the parts */
        for (size_t i = 0; i < n_parts; i++)
            if (!strcmp(parts[i], outs[k][1])) {
                fprintf(stderr, "kldeval merge: %s %s is one of the parts\n", outs[k][0], outs[k][1]);
                free(parts);
                return 2;
            }
        if (!kld_arg_output("merge", outs[k][0], outs[k][1], files, n_files)) { free(parts); return 2; }
        files[n_files++] = outs[k][1];
    }
    kld_merge_result m;
    kld_error err = {0};
    if (kld_merge(parts, n_parts, &m, &err) != KLD_OK) {
        fprintf(stderr, "kldeval merge: %s\n", err.msg);
        free(parts);
        return 1;
    }
    free(parts);
    kld_summary sum;
    int rc = 0;
    if (kld_summary_from_source(&m.records, &sum, &err) != KLD_OK) {
        fprintf(stderr, "kldeval merge: %s\n", err.msg);
        kld_merge_result_free(&m);
        return 1;
    }
    kld_report_run run = {m.ref_label, m.arm_label, m.corpus_label, label ? label : m.label,
                          m.config, m.elapsed_s, m.ref_seconds, m.arm_seconds, m.ref_tokens,
                          m.arm_tokens, false};
    if (kld_report_text(stdout, &sum, &run, &err) != KLD_OK) rc = 1;
    printf("%-30s: %s\n", "vocabulary", m.vocab_note);
    if (!rc && m.llamacpp) {
        printf("\n====== as llama-perplexity --kl-divergence prints it ======\n");
        if (kld_report_llamacpp(stdout, &sum, &err) != KLD_OK) rc = 1;
    }
    if (m.ctx_note[0]) printf("%-30s: %s\n", "WARNING", m.ctx_note);
    printf("%-30s: %u shards, %zu positions (timings are sums over the shards)\n", "merged",
           m.n_shards, m.records.n);
    /* the intervals a single run reports: the same documents, so the same figures */
    kld_bootstrap boot;
    json_t *report = merged_json(&sum, &run, &m);
    if (!report) rc = 1, kld_fail(&err, KLD_ERR_NOMEM, "out of memory");
    if (!rc && kld_bootstrap_report(report, &m.records, KLD_BOOTSTRAP_DEFAULT, 0, &boot, &err) != KLD_OK) rc = 1;
    if (!rc && boot.replicates) kld_report_bootstrap_text(stdout, &boot, &sum);
    if (!rc && kld_strata_report(report, &m.records, KLD_BOOTSTRAP_DEFAULT, 0, &err) != KLD_OK) rc = 1;
    if (!rc) kld_strata_report_text(stdout, report);
    if (!rc && json_path && kld_report_json_dump(json_path, report, &err) != KLD_OK) rc = 1;
    if (!rc && pin_path && kld_report_pin_append(pin_path, &sum, &run, &err) != KLD_OK) rc = 1;
    if (!rc && tsv_path && kld_report_tsv_write_source(tsv_path, &m.records, &(kld_tsv_names){NULL, json_object_get(report, "config")}, &err) != KLD_OK) rc = 1;
    if (rc) fprintf(stderr, "kldeval merge: %s\n", err.msg);
    out.label = run.label;
    if (!kld_record_run_source("merge", &out, "merged", report, &sum, &m.records, m.elapsed_s) && !rc)
        rc = 1;
    json_decref(report);
    kld_merge_result_free(&m);
    return rc;
}
