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

/* name (aliases resolved) is a statistic of the kl report; a stratum's
 * ("strata.NAME.kld.mean") is the same statistic under its name (that the
 * run has the stratum: kld_gates_check_strata) */
static bool known(const char *name) {
    if (!strncmp(name, "strata.", 7)) {
        const char *stat = strchr(name + 7, '.');
        return stat && stat > name + 7 && known(stat + 1);
    }
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
    /* a stratum's statistic: resolve the aliases of the part after its name */
    if (!strncmp(out, "strata.", 7) && (p = strchr(out + 7, '.'))) {
        char rest[64];
        canonical(p + 1, strlen(p + 1), rest, sizeof rest);
        snprintf(p + 1, cap - (size_t)(p + 1 - out), "%s", rest);
        return;
    }
    if ((p = strstr(out, ".p99.9")) && !p[6]) memcpy(p, ".p99_9", 6);
    if ((p = strstr(out, ".p0.1")) && !p[5]) memcpy(p, ".p0_1", 5);
}

kld_status kld_gates_check_strata(const kld_gates *g, bool (*has)(const void *, const char *),
                                  const void *strata, kld_error *err) {
    for (size_t i = 0; i < g->n; i++) {
        if (strncmp(g->g[i].stat, "strata.", 7)) continue;
        const char *name = g->g[i].stat + 7, *dot = strchr(name, '.');
        char nm[64];
        snprintf(nm, sizeof nm, "%.*s", (int)(dot - name), name);
        if (!has(strata, nm))
            return kld_fail(err, KLD_ERR_ARG, "--gate: '%s': the run has no stratum '%s' (--strata NAME=REGEX, "
                            "special, role:…)", g->g[i].text, nm);
    }
    return KLD_OK;
}

static const char *const PAIRED[] = {"paired.kld.mean", "paired.kld.p99", "paired.kld.p99_9", "paired.top1", NULL};

static bool known_paired(const char *name) { return listed(PAIRED, name, strlen(name)); }

static const char *const TASKS[] = {"mmlu", "gsm8k", "ifeval", "humaneval", "bfcl", "hashhop", NULL};

/* A capability statistic into its report path; "?" stands for the arm
 * when the run has one, else the reference (resolved when judged). */
static bool cap_path(const char *name, char *out, size_t cap) {
    if (!strcmp(name, "capability_score")) return snprintf(out, cap, "capability_score.?"), true;
    if (!strncmp(name, "capability_score.", 17)) {
        const char *f = name + 17;
        if (strcmp(f, "ref") && strcmp(f, "arm") && strcmp(f, "diff")) return false;
        return snprintf(out, cap, "%s", name), true;
    }
    const char *dot = strchr(name, '.');
    if (!dot || !listed(TASKS, name, (size_t)(dot - name))) return false;
    const int tn = (int)(dot - name);
    const char *rest = dot + 1;
    if (!strcmp(rest, "accuracy")) snprintf(out, cap, "tasks.%.*s.?.accuracy", tn, name);
    else if (!strcmp(rest, "diff")) snprintf(out, cap, "tasks.%.*s.paired.diff", tn, name);
    else if (!strcmp(rest, "ref.accuracy") || !strcmp(rest, "arm.accuracy") || !strcmp(rest, "ref.stderr") ||
             !strcmp(rest, "arm.stderr"))
        snprintf(out, cap, "tasks.%.*s.%s", tn, name, rest);
    else return false;
    return true;
}

enum { NS_KL, NS_PAIRED, NS_CAP };

static kld_status parse_one(const char *s, size_t n, int ns, kld_gate *g, kld_error *err) {
    const bool paired = ns == NS_PAIRED;
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
    if (ns == NS_CAP) {
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)name_n, s);
        if (!cap_path(name, g->stat, sizeof g->stat))
            return kld_fail(err, KLD_ERR_ARG, "--gate: '%s' is not a statistic of a capability run "
                            "(capability_score[.ref|.arm|.diff], TASK.accuracy, TASK.ref.accuracy, "
                            "TASK.arm.accuracy, TASK.diff; TASK: mmlu, gsm8k, ifeval, humaneval, bfcl, hashhop)",
                            name);
    } else if (paired && !known_paired(g->stat))
        return kld_fail(err, KLD_ERR_ARG, "--gate: '%.*s' is not a paired statistic (paired.kld.mean, "
                        "paired.kld.p99, paired.kld.p99.9, paired.top1)", (int)name_n, s);
    if (ns == NS_KL && !known(g->stat))
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
    char *at = strchr(num, '@');
    g->level = 0;
    if (at) {
        if (!paired || strcmp(at, "@95"))
            return kld_fail(err, KLD_ERR_ARG, "--gate: '%s': '%s' (only paired gates take a level, and only @95)",
                            g->text, at);
        g->level = 95;
        *at = '\0';
    }
    char *end;
    g->bound = strtod(num, &end);
    while (*end == ' ') end++;
    if (end == num || *end || !isfinite(g->bound))
        return kld_fail(err, KLD_ERR_ARG, "--gate: '%s': '%s' is not a finite number", g->text, num);
    return KLD_OK;
}

static kld_status parse_list(const char *expr, int ns, kld_gates *out, kld_error *err) {
    memset(out, 0, sizeof *out);
    if (!expr || !*expr) return kld_fail(err, KLD_ERR_ARG, "--gate: empty (give STATISTIC OP NUMBER[,...])");
    size_t cap = 1;
    for (const char *p = expr; *p; p++) cap += *p == ',';
    out->g = calloc(cap, sizeof *out->g);
    if (!out->g) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    for (const char *p = expr;;) {
        const char *c = strchr(p, ',');
        size_t n = c ? (size_t)(c - p) : strlen(p);
        kld_status st = parse_one(p, n, ns, &out->g[out->n], err);
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

kld_status kld_gates_parse(const char *expr, kld_gates *out, kld_error *err) {
    return parse_list(expr, NS_KL, out, err);
}

kld_status kld_gates_parse_paired(const char *expr, kld_gates *out, kld_error *err) {
    return parse_list(expr, NS_PAIRED, out, err);
}

kld_status kld_gates_parse_cap(const char *expr, kld_gates *out, kld_error *err) {
    return parse_list(expr, NS_CAP, out, err);
}

/* One condition of a list that routes each to one of two lists: parsed
 * into *one, *second set when it goes to the second. */
typedef kld_status (*route_fn)(const char *cond, kld_gates *one, bool *second, kld_error *err);

static kld_status parse_routed(const char *expr, kld_gates *first, kld_gates *second, route_fn route,
                               kld_error *err) {
    memset(first, 0, sizeof *first);
    memset(second, 0, sizeof *second);
    if (!expr || !*expr) return kld_fail(err, KLD_ERR_ARG, "--gate: empty (give STATISTIC OP NUMBER[,...])");
    kld_status st = KLD_OK;
    for (const char *p = expr; st == KLD_OK;) {
        const char *c = strchr(p, ',');
        char cond[200];
        snprintf(cond, sizeof cond, "%.*s", (int)(c ? (size_t)(c - p) : strlen(p)), p);
        kld_gates one;
        bool to_second = false;
        st = route(cond, &one, &to_second, err);
        if (st == KLD_OK) {
            kld_gates *dst = to_second ? second : first;
            kld_gate *g = realloc(dst->g, (dst->n + 1) * sizeof *g);
            if (!g) st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
            else dst->g = g, dst->g[dst->n++] = one.g[0];
            kld_gates_free(&one);
        }
        if (!c) break;
        p = c + 1;
    }
    if (st) kld_gates_free(first), kld_gates_free(second);
    return st;
}

/* kl's statistic names first, then a capability run's. */
static kld_status route_kl_or_cap(const char *cond, kld_gates *one, bool *cap, kld_error *err) {
    kld_error e1 = {0};
    kld_status st = parse_list(cond, NS_KL, one, &e1);
    if (st == KLD_ERR_ARG && strstr(e1.msg, "is not a statistic")) {
        *cap = true;
        st = parse_list(cond, NS_CAP, one, err);
        if (st && strstr(err->msg, "is not a statistic"))
            kld_fail(err, KLD_ERR_ARG, "--gate: '%s': neither a statistic of kl (%s) nor of the capability "
                     "run", cond, "kld.mean, kld.p99, top1, ppl_ratio, ...");
    } else if (st) {
        *err = e1;
    }
    return st;
}

static kld_status route_kl_or_paired(const char *cond, kld_gates *one, bool *paired, kld_error *err) {
    const char *q = cond;
    while (*q == ' ') q++;
    *paired = !strncmp(q, "paired.", 7);
    return parse_list(cond, *paired ? NS_PAIRED : NS_KL, one, err);
}

kld_status kld_gates_parse_split(const char *expr, kld_gates *kl, kld_gates *cap, kld_error *err) {
    return parse_routed(expr, kl, cap, route_kl_or_cap, err);
}

kld_status kld_gates_parse_with_paired(const char *expr, kld_gates *kl, kld_gates *paired, kld_error *err) {
    return parse_routed(expr, kl, paired, route_kl_or_paired, err);
}

json_t *kld_gates_eval_with_paired(const kld_gates *kl, const json_t *report, const kld_gates *paired,
                                   const json_t *paired_json, bool *all_pass) {
    bool p1 = true, p2 = true;
    json_t *a = kl->n ? kld_gates_eval(kl, report, &p1) : json_array();
    json_t *wrap = paired->n ? json_pack("{s:O}", "paired", paired_json ? (json_t *)paired_json : json_null()) : NULL;
    json_t *b = paired->n ? (wrap ? kld_gates_eval_paired(paired, wrap, &p2) : NULL) : json_array();
    json_decref(wrap);
    *all_pass = p1 && p2;
    if (!a || !b || json_array_extend(a, b)) {
        json_decref(a);
        json_decref(b);
        return NULL;
    }
    json_decref(b);
    return a;
}

void kld_gates_free(kld_gates *g) {
    free(g->g);
    memset(g, 0, sizeof *g);
}

static const char *op_text(kld_gate_op op) {
    static const char *const t[] = {"<=", "<", ">=", ">"};
    return t[op];
}

const json_t *kld_json_at_path(const json_t *o, const char *path) {
    char part[64];
    while (o && *path) {
        const char *dot = strchr(path, '.');
        size_t n = dot ? (size_t)(dot - path) : strlen(path);
        snprintf(part, sizeof part, "%.*s", (int)n, path);
        o = json_object_get(o, part);
        path += n + (dot ? 1 : 0);
    }
    return o;
}

static bool holds(kld_gate_op op, double x, double bound) {
    return op == KLD_GATE_LE ? x <= bound : op == KLD_GATE_LT ? x < bound : op == KLD_GATE_GE ? x >= bound : x > bound;
}

/* paired: the gate's statistic is an object {diff, ci95, p}; judged on diff,
 * or with a level on the interval's end that could still satisfy it */
static json_t *eval_list(const kld_gates *g, const json_t *report, bool paired, bool *all_pass) {
    *all_pass = true;
    json_t *arr = json_array();
    /* a capability run's "?": the arm when it has one */
    const bool has_arm = json_object_get(json_object_get(report, "capability_score"), "arm") != NULL &&
                         !json_is_null(json_object_get(json_object_get(report, "capability_score"), "arm"));
    for (size_t i = 0; arr && i < g->n; i++) {
        const kld_gate *q = &g->g[i];
        char path[sizeof q->stat + 4];
        snprintf(path, sizeof path, "%s", q->stat);
        char *side = strchr(path, '?');
        if (side) {
            memmove(side + 3, side + 1, strlen(side + 1) + 1);
            memcpy(side, has_arm ? "arm" : "ref", 3);
        }
        const json_t *v = kld_json_at_path(report, path);
        if (paired) {
            const json_t *ci = json_object_get(v, "ci95");
            v = !q->level ? json_object_get(v, "diff")
                : json_array_get(ci, q->op == KLD_GATE_LE || q->op == KLD_GATE_LT ? 0 : 1);
        }
        const bool have = json_is_number(v) && isfinite(json_number_value(v));
        const double x = have ? json_number_value(v) : NAN;
        bool pass = have && holds(q->op, x, q->bound);
        *all_pass &= pass;
        json_t *r = json_pack("{s:s, s:s, s:s, s:f, s:o, s:b}", "condition", q->text, "statistic", path, "op",
                              op_text(q->op), "bound", q->bound, "value", have ? json_real(x) : json_null(), "pass",
                              pass);
        if (r && q->level)
            json_object_set_new(r, "judged_on", json_string(q->op == KLD_GATE_LE || q->op == KLD_GATE_LT
                                                                ? "the 95% interval's low end"
                                                                : "the 95% interval's high end"));
        if (!r || json_array_append_new(arr, r)) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

json_t *kld_gates_eval(const kld_gates *g, const json_t *report, bool *all_pass) {
    return eval_list(g, report, false, all_pass);
}

json_t *kld_gates_eval_paired(const kld_gates *g, const json_t *comparison, bool *all_pass) {
    return eval_list(g, comparison, true, all_pass);
}

kld_status kld_gates_judge(const kld_gates *g, json_t *report, bool stopped, FILE *f, bool *pass) {
    *pass = true;
    if (!g->n) return KLD_OK;
    if (stopped) {
        fprintf(f, "%-30s: not judged (the run was stopped: partial figures)\n", "gate");
        return KLD_OK;
    }
    json_t *v = report ? kld_gates_eval(g, report, pass) : NULL;
    if (!v) return KLD_ERR_NOMEM;
    kld_gates_print(f, v);
    json_object_set_new(report, "gates", v);
    return KLD_OK;
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
        const char *on = json_string_value(json_object_get(r, "judged_on"));
        fprintf(f, "%s%s%s %s\n", on ? " (" : "", on ? on : "", on ? ")" : "",
                json_is_true(json_object_get(r, "pass")) ? "PASS" : "FAIL");
    }
}
