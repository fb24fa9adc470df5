/* kl_sweep.c — `kldeval kl … --sweep NAME=V1,V2,… [--floor]`: ExLlamaV3's
 * cache-quantization sweep and noise floor. The reference is forwarded
 * once into a saved teacher; each lever value (or grid point of
 * `NAME=…×NAME=…`) is one candidate arm, and --floor adds the noise=bf16
 * arm, beside which every arm's KLD is shown with the paired per-position
 * difference (KLD − floor). */
#include "cli/kl_sweep.h"

#include "cli/sweep_cli.h"
#include "engine/engine.h"
#include "report/report_sweep.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_AXES 3
#define MAX_VALUES 64
#define MAX_ARMS 257

typedef struct axis {
    char name[32];
    char *values[MAX_VALUES];
    int n;
} axis;

/* "kv=f16,q8_0" → name kv, values f16 q8_0; a list holding ';' is split on
 * ';' instead, so values may be per-layer maps ("kv=blk:0-1=q8_0,q4_0;q4_0"). */
static bool parse_axis(char *text, axis *ax) {
    char *eq = strchr(text, '=');
    if (!eq || eq == text || (size_t)(eq - text) >= sizeof ax->name) {
        fprintf(stderr, "kldeval kl: --sweep expects NAME=VALUE,VALUE,... (e.g. kv=f16,q8_0,q4_0), "
                        "got '%s'\n", text);
        return false;
    }
    snprintf(ax->name, sizeof ax->name, "%.*s", (int)(eq - text), text);
    const char *sep = strchr(eq + 1, ';') ? ";" : ",";
    char *save = NULL;
    for (char *v = strtok_r(eq + 1, sep, &save); v; v = strtok_r(NULL, sep, &save)) {
        if (ax->n == MAX_VALUES) {
            fprintf(stderr, "kldeval kl: --sweep %s: at most %d values\n", ax->name, MAX_VALUES);
            return false;
        }
        ax->values[ax->n++] = v;
    }
    if (ax->n == 0) {
        fprintf(stderr, "kldeval kl: --sweep %s: no values\n", ax->name);
        return false;
    }
    return true;
}

/* Splits the grid on "×" (or "*") into axes. */
static int parse_grid(char *spec, axis *axes) {
    int n = 0;
    char *p = spec;
    while (p) {
        char *next = strstr(p, "×"), *star = strchr(p, '*');
        size_t skip = 2;
        if (star && (!next || star < next)) next = star, skip = 1;
        if (next) *next = '\0';
        if (n == MAX_AXES) {
            fprintf(stderr, "kldeval kl: --sweep: at most %d axes\n", MAX_AXES);
            return -1;
        }
        if (!parse_axis(p, &axes[n++])) return -1;
        p = next ? next + skip : NULL;
    }
    return n;
}

typedef struct arm_list {
    kld_sweep_arm a[MAX_ARMS];
    char *owned[2 * MAX_ARMS];
    size_t n, n_owned;
    long floor; /* index of the floor arm, or -1 */
} arm_list;

static char *join_levers(const char *base, const char *extra) {
    size_t n = (base ? strlen(base) + 1 : 0) + strlen(extra) + 1;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s%s%s", base ? base : "", base ? "," : "", extra);
    return s;
}

/* Every grid point as levers NAME=V[,NAME=V]… after the --arm-lever base,
 * each checked by the lever parser now rather than after the teacher pass. */
static bool build_arms(const kld_kl_config *c, const axis *axes, int n_axes, bool floor,
                       arm_list *L) {
    const char *model = c->arm.kind == KLD_ARM_MODEL ? c->arm.path : c->ref.path;
    int idx[MAX_AXES] = {0};
    size_t total = 1;
    for (int k = 0; k < n_axes; k++) total *= (size_t)axes[k].n;
    if (total + 1 > MAX_ARMS) {
        fprintf(stderr, "kldeval kl: --sweep: %zu arms (at most %d)\n", total, MAX_ARMS - 1);
        return false;
    }
    L->floor = -1;
    for (size_t t = 0; n_axes > 0 && t < total; t++) {
        char point[1024] = "";
        size_t w = 0;
        for (int k = 0; k < n_axes; k++)
            w += (size_t)snprintf(point + w, sizeof point - (w < sizeof point ? w : sizeof point), "%s%s=%s",
                                  k ? "," : "", axes[k].name, axes[k].values[idx[k]]);
        char *label = strdup(point), *levers = join_levers(c->arm.levers, point);
        L->owned[L->n_owned++] = label;
        L->owned[L->n_owned++] = levers;
        if (!label || !levers || w >= sizeof point) return false;
        kld_levers l;
        kld_levers_default(&l);
        kld_error e = {0};
        if (kld_levers_parse(levers, &l, &e) != KLD_OK) {
            fprintf(stderr, "kldeval kl: --sweep: %s\n", e.msg);
            return false;
        }
        L->a[L->n++] = (kld_sweep_arm){label, model, levers};
        for (int k = n_axes - 1; k >= 0; k--) { /* the last axis varies fastest */
            if (++idx[k] < axes[k].n) break;
            idx[k] = 0;
        }
    }
    if (n_axes == 0) /* --floor alone: the run's own arm beside the floor */
        L->a[L->n++] = (kld_sweep_arm){c->arm.levers ? c->arm.levers : "arm", model, c->arm.levers};
    if (floor) {
        char *lv = join_levers(c->ref.levers, "noise=bf16");
        L->owned[L->n_owned++] = lv;
        if (!lv) return false;
        L->floor = (long)L->n;
        L->a[L->n++] = (kld_sweep_arm){"floor (noise=bf16)", c->ref.path, lv};
    }
    return true;
}

static double kv_bytes(const kld_sweep_outcome *o) {
    const json_t *b = json_object_get(json_object_get(o->res.config, "arm"), "kv_bytes_per_token");
    return json_is_integer(b) ? (double)json_integer_value(b) : NAN;
}

static int print_and_write(const kld_sweep_cli_common *k, const kld_kl_sweep_opts *so,
                           const arm_list *L, const kld_sweep_result *r) {
    kld_error err = {0};
    bool has_floor = L->floor >= 0 && (size_t)L->floor < r->n_done;
    kld_sweep_row *rows = calloc(r->n_done ? r->n_done : 1, sizeof *rows);
    json_t *arms = json_array();
    int rc = rows && arms ? 0 : 1;
    for (size_t i = 0; !rc && i < r->n_done; i++) {
        const kld_sweep_outcome *o = &r->arms[i];
        rows[i] = (kld_sweep_row){o->label, &o->sum, false, 0, 0, 0, 0, kv_bytes(o), NAN};
        json_t *a = kld_sweep_cli_arm_json(o, NAN);
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
    }
    free(rows);
    if (!rc && so->json_path) {
        json_t *doc = kld_sweep_cli_json_head("kldeval.kl-sweep/1", k, r);
        json_object_set_new(doc, "sweep", so->spec ? json_string(so->spec) : json_null());
        json_object_set_new(doc, "floor", json_boolean(has_floor));
        json_object_set(doc, "arms", arms);
        if (json_dump_file(doc, so->json_path, JSON_INDENT(1) | JSON_REAL_PRECISION(17))) {
            fprintf(stderr, "kldeval kl: --json %s: cannot write\n", so->json_path);
            rc = 1;
        }
        json_decref(doc);
    }
    json_decref(arms);
    return rc;
}

int kld_kl_sweep_main(const kld_kl_config *c, const kld_kl_outputs *o, const kld_kl_sweep_opts *so) {
    kld_sweep_cli_common k;
    kld_sweep_cli_defaults(&k);
    kld_dump_config *t = &k.teacher;
    t->model_path = c->ref.path;
    t->levers = c->ref.levers;
    t->corpus_path = c->corpus_path;
    t->corpus_format = c->corpus_format;
    t->ids_path = c->ids_path;
    t->max_docs = c->max_docs;
    t->max_tokens = c->max_tokens;
    t->max_chunks = c->max_chunks;
    t->ctx = c->ctx;
    t->chunk = c->chunk;
    t->chunking = c->chunking;
    t->n_threads = c->n_threads;
    t->allow_vocab_mismatch = c->allow_vocab_mismatch;
    t->out = so->teacher_dir;
    t->top_k = so->teacher_top_k;
    k.topk = c->topk;
    k.o = *o;
    axis axes[MAX_AXES];
    memset(axes, 0, sizeof axes);
    arm_list *L = calloc(1, sizeof *L);
    char *spec = so->spec ? strdup(so->spec) : NULL;
    int rc = 2, n_axes = 0;
    if (!L || (so->spec && !spec)) goto done;
    if (spec && (n_axes = parse_grid(spec, axes)) < 0) goto done;
    if (!build_arms(c, axes, n_axes, so->floor, L)) goto done;
    kld_sweep_config sc;
    kld_sweep_result r;
    kld_sweep_cli_config(&k, &sc);
    sc.arms = L->a;
    sc.n_arms = L->n;
    kld_error err = {0};
    rc = 1;
    if (kld_sweep_cli_run(&sc, &r, &err) != KLD_OK) fprintf(stderr, "kldeval kl: %s\n", err.msg);
    else {
        rc = print_and_write(&k, so, L, &r);
        if (!kld_sweep_cli_record("kl", &k, &r) && !rc) rc = 1;
        if (!rc && r.partial) rc = 130;
    }
    kld_sweep_cli_end(&sc, &r);
done:
    for (size_t i = 0; L && i < L->n_owned; i++) free(L->owned[i]);
    free(L);
    free(spec);
    return rc;
}
