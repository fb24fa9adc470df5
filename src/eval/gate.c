/* gate.c — see gate.h. */
#include "eval/gate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const DISTS[] = {"kld", "kld_reverse", "jsd", "delta_p", NULL};
static const char *const FIELDS[] = {"mean", "stderr", "min",  "p0_1",   "p1",       "p5",         "p10",
                                     "p25",  "median", "p75",  "p90",    "p95",      "p99",        "p99_9",
                                     "max",  "rms",    "rms_stderr", "doc_mean", "doc_stderr", NULL};
static const char *const SCALARS[] = {"top1_agreement", "topk_overlap", "ppl_ratio", "ppl_ref", "ppl_arm",
                                      "ppl_diff",       "ln_ppl_ratio", "nll_correlation", "n_positions",
                                      "top1_agreement_stderr", "ppl_ratio_stderr", "ln_ppl_ratio_stderr",
                                      NULL};

static bool listed(const char *const *list, const char *s, size_t n) {
    for (int i = 0; list[i]; i++)
        if (strlen(list[i]) == n && !strncmp(list[i], s, n)) return true;
    return false;
}

/* name (aliases resolved) is a statistic of the kl report */
static bool known(const char *name) {
    const char *dot = strchr(name, '.');
    if (!dot) return listed(SCALARS, name, strlen(name));
    return listed(DISTS, name, (size_t)(dot - name)) && listed(FIELDS, dot + 1, strlen(dot + 1));
}

/* Resolves the aliases of name[0..n) into out. */
static void canonical(const char *name, size_t n, char *out, size_t cap) {
    snprintf(out, cap, "%.*s", (int)n, name);
    static const char *const from[] = {"top1", "topk"}, *const to[] = {"top1_agreement", "topk_overlap"};
    for (int i = 0; i < 2; i++)
        if (!strcmp(out, from[i])) snprintf(out, cap, "%s", to[i]);
    char *p;
    if ((p = strstr(out, ".p99.9")) && !p[6]) memcpy(p, ".p99_9", 6);
    if ((p = strstr(out, ".p0.1")) && !p[5]) memcpy(p, ".p0_1", 5);
}

static kld_status parse_one(const char *s, size_t n, kld_gate *g, kld_error *err) {
    while (n && (*s == ' ')) s++, n--;
    while (n && s[n - 1] == ' ') n--;
    snprintf(g->text, sizeof g->text, "%.*s", (int)n, s);
    size_t i = 0;
    while (i < n && !strchr("<>=!", s[i])) i++;
    if (i == 0 || i == n)
        return kld_fail(err, KLD_ERR_ARG, "--gate: '%s' is not STATISTIC OP NUMBER (OP one of <= < >= >)", g->text);
    size_t name_n = i;
    while (name_n && s[name_n - 1] == ' ') name_n--;
    canonical(s, name_n, g->stat, sizeof g->stat);
    if (!known(g->stat))
        return kld_fail(err, KLD_ERR_ARG, "--gate: '%.*s' is not a statistic kl reports (e.g. kld.mean, "
                        "kld.p99, kld.p99.9, kld.max, top1, ppl_ratio, ln_ppl_ratio; see kldeval kl --help)",
                        (int)name_n, s);
    size_t op_n = i + 1 < n && s[i + 1] == '=' ? 2 : 1;
    if (!strncmp(s + i, "<=", 2)) g->op = KLD_GATE_LE;
    else if (!strncmp(s + i, ">=", 2)) g->op = KLD_GATE_GE;
    else if (s[i] == '<' && op_n == 1) g->op = KLD_GATE_LT;
    else if (s[i] == '>' && op_n == 1) g->op = KLD_GATE_GT;
    else
        return kld_fail(err, KLD_ERR_ARG, "--gate: '%s': operator '%.*s' (expected <=, <, >= or >)", g->text,
                        (int)op_n, s + i);
    char num[64];
    snprintf(num, sizeof num, "%.*s", (int)(n - i - op_n), s + i + op_n);
    char *end;
    g->bound = strtod(num, &end);
    while (*end == ' ') end++;
    if (end == num || *end || !isfinite(g->bound))
        return kld_fail(err, KLD_ERR_ARG, "--gate: '%s': '%s' is not a finite number", g->text, num);
    return KLD_OK;
}

kld_status kld_gates_parse(const char *expr, kld_gates *out, kld_error *err) {
    memset(out, 0, sizeof *out);
    if (!expr || !*expr) return kld_fail(err, KLD_ERR_ARG, "--gate: empty (give STATISTIC OP NUMBER[,...])");
    size_t cap = 1;
    for (const char *p = expr; *p; p++) cap += *p == ',';
    out->g = calloc(cap, sizeof *out->g);
    if (!out->g) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    for (const char *p = expr;;) {
        const char *c = strchr(p, ',');
        size_t n = c ? (size_t)(c - p) : strlen(p);
        kld_status st = parse_one(p, n, &out->g[out->n], err);
        if (st) {
            kld_gates_free(out);
            return st;
        }
        out->n++;
        if (!c) break;
        p = c + 1;
    }
    return KLD_OK;
}

void kld_gates_free(kld_gates *g) {
    free(g->g);
    memset(g, 0, sizeof *g);
}

static const char *op_text(kld_gate_op op) {
    static const char *const t[] = {"<=", "<", ">=", ">"};
    return t[op];
}

json_t *kld_gates_eval(const kld_gates *g, const json_t *report, bool *all_pass) {
    *all_pass = true;
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < g->n; i++) {
        const kld_gate *q = &g->g[i];
        char head[64];
        const char *dot = strchr(q->stat, '.');
        snprintf(head, sizeof head, "%.*s", (int)(dot ? dot - q->stat : (long)strlen(q->stat)), q->stat);
        const json_t *v = json_object_get(report, head);
        if (dot) v = json_object_get(v, dot + 1);
        const bool have = json_is_number(v) && isfinite(json_number_value(v));
        const double x = have ? json_number_value(v) : NAN;
        bool pass = have && (q->op == KLD_GATE_LE   ? x <= q->bound
                             : q->op == KLD_GATE_LT ? x < q->bound
                             : q->op == KLD_GATE_GE ? x >= q->bound
                                                    : x > q->bound);
        *all_pass &= pass;
        json_t *r = json_pack("{s:s, s:s, s:s, s:f, s:o, s:b}", "condition", q->text, "statistic", q->stat, "op",
                              op_text(q->op), "bound", q->bound, "value", have ? json_real(x) : json_null(), "pass",
                              pass);
        if (!r || json_array_append_new(arr, r)) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

void kld_gates_print(FILE *f, const json_t *results) {
    size_t i;
    const json_t *r;
    json_array_foreach(results, i, r) {
        const json_t *v = json_object_get(r, "value");
        fprintf(f, "%-30s: %s %s %.6g: ", "gate", json_string_value(json_object_get(r, "statistic")),
                json_string_value(json_object_get(r, "op")), json_real_value(json_object_get(r, "bound")));
        if (json_is_number(v)) fprintf(f, "%.6g", json_number_value(v));
        else fprintf(f, "not reported");
        fprintf(f, " %s\n", json_is_true(json_object_get(r, "pass")) ? "PASS" : "FAIL");
    }
}
