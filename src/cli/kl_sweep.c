/* kl_sweep.c — `kldeval kl … --sweep NAME=V1,V2,… [--floor]`: the arms
 * come from the library (eval/sweep_grid.h), the passes from kld_sweep_run;
 * here the table, with every arm's KLD beside the floor's and the paired
 * per-position difference (KLD − floor), and the JSON. */
#include "cli/kl_sweep.h"

#include "cli/sweep_cli.h"
#include "eval/sweep_grid.h"
#include "eval/gate.h"
#include "report/report.h"
#include "report/report_sweep.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double kv_bytes(const kld_sweep_outcome *o) {
    const json_t *b = json_object_get(json_object_get(o->res.config, "arm"), "kv_bytes_per_token");
    return json_is_integer(b) ? (double)json_integer_value(b) : NAN;
}

static int print_and_write(const kld_sweep_cli_common *k, const kld_kl_sweep_opts *so,
                           const kld_sweep_grid *L, const kld_sweep_result *r) {
    kld_error err = {0};
    bool has_floor = L->floor >= 0 && (size_t)L->floor < r->n_done;
    /* the baseline of the paired comparisons: the floor, else the first arm */
    const long baseline = has_floor ? L->floor : r->n_done ? 0 : -1;
    kld_sweep_ci *ci = NULL;
    if (kld_sweep_cli_intervals(k, r, baseline, &ci, &err) != KLD_OK) {
        fprintf(stderr, "kldeval kl: %s\n", err.msg);
        return 1;
    }
    kld_sweep_row *rows = calloc(r->n_done ? r->n_done : 1, sizeof *rows);
    json_t *arms = json_array();
    int rc = rows && arms ? 0 : 1;
    for (size_t i = 0; !rc && i < r->n_done; i++) {
        const kld_sweep_outcome *o = &r->arms[i];
        rows[i] = (kld_sweep_row){o->label, &o->sum, false, 0, 0, 0, 0, kv_bytes(o), NAN};
        json_t *a = kld_sweep_cli_arm_json(o, NAN);
        kld_sweep_cli_arm_json_ci(a, &ci[i], r->arms[baseline].label);
        json_object_set_new(a, "kv_bytes_per_token", isfinite(rows[i].size) ? json_integer((json_int_t)rows[i].size) : json_null());
        const json_t *vpt = json_object_get(json_object_get(o->res.config, "arm"), "kv_values_per_token");
        if (isfinite(rows[i].size) && json_integer_value(vpt) > 0) /* bits per cached value */
            json_object_set_new(a, "kv_bits_per_value", json_real(8.0 * rows[i].size / (double)json_integer_value(vpt)));
        if (has_floor && (long)i != L->floor) {
            const kld_stats *fs = r->arms[L->floor].res.stats;
            kld_paired d, t;
            if (kld_sweep_paired(o->res.stats, fs, KLD_PAIRED_KLD, &d, &err) != KLD_OK ||
                kld_sweep_paired(o->res.stats, fs, KLD_PAIRED_TOP1, &t, &err) != KLD_OK) {
                fprintf(stderr, "kldeval kl: %s\n", err.msg);
                rc = 1;
                json_decref(a);
                break;
            }
            rows[i].has_delta = true;
            rows[i].d_kld = d.mean, rows[i].d_kld_se = d.se, rows[i].d_top1 = t.mean, rows[i].d_top1_se = t.se;
            json_object_set_new(a, "minus_floor", json_pack("{s:f,s:f,s:f,s:f,s:I,s:I}", "d_kld", d.mean,
                                                            "d_kld_stderr", d.se, "d_top1", t.mean,
                                                            "d_top1_stderr", t.se, "arm_lower", (json_int_t)d.a_lower,
                                                            "floor_lower", (json_int_t)d.b_lower));
        }
        json_array_append_new(arms, a);
    }
    if (!rc) {
        kld_sweep_cli_print_head(k, r);
        kld_sweep_table t = {"", has_floor ? "KLD − floor ± stderr" : NULL, "top-1 − floor", "cache B/token",
                             false};
        kld_report_sweep_table(stdout, &t, rows, r->n_done);
        kld_sweep_cli_print_intervals(r, ci, baseline);
    }
    /* gates: every arm but the floor; paired ones on arm − baseline */
    json_t *gates = json_array();
    bool gates_pass = true;
    const kld_kl_outputs *ko = &k->o;
    if (!rc && (ko->gates.n || ko->paired_gates.n) && r->partial)
        printf("%-30s: not judged (the sweep was stopped: partial figures)\n", "gate");
    else if (!rc && (ko->gates.n || ko->paired_gates.n)) {
        for (size_t i = 0; gates && i < r->n_done; i++) {
            if (has_floor && (long)i == L->floor) continue;
            const kld_sweep_outcome *o = &r->arms[i];
            bool pass = true; /* the baseline has no difference to judge: no paired gates */
            json_t *v = kld_sweep_cli_judge(k, o, &ci[i], &ko->gates, (long)i != baseline ? &ko->paired_gates : NULL,
                                            &pass);
            if (!v) {
                json_decref(gates);
                gates = NULL;
                break;
            }
            printf("gates on %s:\n", o->label);
            kld_gates_print(stdout, v);
            gates_pass = gates_pass && pass;
            json_array_append_new(gates, json_pack("{s:s, s:o, s:b}", "arm", o->label, "gates", v, "pass", pass));
        }
        if (!gates) fprintf(stderr, "kldeval kl: out of memory\n"), rc = 1;
    }
    free(rows);
    if (!rc && so->json_path) {
        json_t *doc = kld_sweep_cli_json_head("kldeval.kl-sweep/1", k, r);
        json_object_set_new(doc, "sweep", so->spec ? json_string(so->spec) : json_null());
        json_object_set_new(doc, "floor", json_boolean(has_floor));
        if (gates && json_array_size(gates)) json_object_set(doc, "gates", gates);
        json_object_set(doc, "arms", arms);
        if (json_dump_file(doc, so->json_path, JSON_INDENT(1) | JSON_REAL_PRECISION(17))) {
            fprintf(stderr, "kldeval kl: --json %s: cannot write\n", so->json_path);
            rc = 1;
        }
        json_decref(doc);
    }
    json_decref(arms);
    /* each judged arm's row keeps its verdicts */
    json_t **per_arm = gates && json_array_size(gates) ? calloc(r->n_done, sizeof *per_arm) : NULL;
    for (size_t g = 0; per_arm && g < json_array_size(gates); g++) {
        const char *label = json_string_value(json_object_get(json_array_get(gates, g), "arm"));
        for (size_t i = 0; label && i < r->n_done; i++)
            if (!strcmp(r->arms[i].label, label)) per_arm[i] = json_object_get(json_array_get(gates, g), "gates");
    }
    if (!rc && !kld_sweep_cli_record("kl", k, r, ci, per_arm)) rc = 1;
    free(per_arm);
    json_decref(gates);
    free(ci);
    return rc ? rc : gates_pass ? 0 : KLD_EXIT_GATE_FAILED;
}

int kld_kl_sweep_main(const kld_kl_config *c, const kld_kl_outputs *o, const kld_kl_sweep_opts *so) {
    kld_sweep_cli_common k;
    kld_sweep_cli_defaults(&k);
    kld_sweep_teacher_of_kl(c, so->teacher_dir, so->teacher_top_k, &k.teacher);
    k.topk = c->topk;
    k.o = *o;
    kld_sweep_grid L;
    kld_error err = {0};
    if (kld_sweep_grid_build(so->spec, so->floor, &c->ref, &c->arm, &L, &err) != KLD_OK) {
        fprintf(stderr, "kldeval kl: %s\n", err.msg);
        return 2;
    }
    if (o->paired_gates.n && L.n < 2) {
        fprintf(stderr, "kldeval kl: --gate %s: paired gates judge arms against the baseline (the floor, "
                        "else the first value): give a second value or --floor\n", o->paired_gates.g[0].text);
        kld_sweep_grid_free(&L);
        return 2;
    }
    kld_sweep_config sc;
    kld_sweep_result r;
    kld_sweep_cli_config(&k, &sc);
    sc.arms = L.arms;
    sc.n_arms = L.n;
    int rc = 1;
    if (kld_sweep_cli_run(&sc, &r, &err) != KLD_OK) fprintf(stderr, "kldeval kl: %s\n", err.msg);
    else {
        rc = print_and_write(&k, so, &L, &r);
        if (!rc && r.partial) rc = 130;
    }
    kld_sweep_cli_end(&sc, &r);
    kld_sweep_grid_free(&L);
    return rc;
}
