/* sweep.c — one reference pass into a saved teacher, then every arm scored
 * against it (sweep.h). */
#include "eval/sweep.h"

#include "store/dump.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static bool file_exists(const char *dir, const char *name) {
    char p[4200];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* Removes the temporary teacher: the regular files a dump writes, then the
 * directory. Anything else in it (there should be nothing) stays. */
static void remove_teacher(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[4400];
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
    closedir(d);
    rmdir(dir);
}

static kld_status make_teacher(const kld_sweep_config *c, kld_sweep_result *out, kld_error *err) {
    kld_dump_config t = c->teacher;
    t.llamacpp = false;
    t.indices_from = NULL;
    /* The whole vocabulary: the reference's final hidden states (format 3),
     * n_embd floats a position instead of n_vocab, and its head applied again
     * when each arm is scored: the same exact figures. A top-k: float32 logits. */
    t.hidden = t.top_k <= 0;
    t.hidden_dtype = KLD_DUMP_HIDDEN_F32;
    t.format_version = t.hidden ? 0 : 2;
    t.stop = c->stop;
    t.progress = c->progress;
    t.progress_user = c->user;
    if (t.out) {
        snprintf(out->teacher_dir, sizeof out->teacher_dir, "%s", t.out);
        if (file_exists(t.out, "manifest.json")) {
            out->teacher_reused = true;
            return KLD_OK;
        }
        t.resume = file_exists(t.out, "dump.partial.json");
    } else {
        const char *tmp = getenv("TMPDIR");
        snprintf(out->teacher_dir, sizeof out->teacher_dir, "%s/kldeval-teacher-XXXXXX",
                 tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(out->teacher_dir))
            return kld_fail(err, KLD_ERR_IO, "%s: cannot create the temporary teacher directory: %s",
                            out->teacher_dir, strerror(errno));
        out->teacher_temp = true;
        t.out = out->teacher_dir;
    }
    if (c->on_pass) c->on_pass(c->user, -1, c->n_arms, t.model_path);
    kld_status st = kld_dump_run(&t, &out->teacher, err);
    if (!st && out->teacher.partial) out->partial = true;
    return st;
}

static kld_status score_arm(const kld_sweep_config *c, const kld_sweep_result *r,
                            const kld_sweep_arm *arm, long index, size_t n_arms,
                            kld_sweep_outcome *o, kld_error *err) {
    kld_kl_config k;
    kld_kl_config_defaults(&k);
    k.ref = (kld_arm_spec){.kind = KLD_ARM_TEACHER, .path = r->teacher_dir};
    k.arm = (kld_arm_spec){.kind = KLD_ARM_MODEL, .path = arm->model, .levers = arm->levers};
    k.n_threads = c->teacher.n_threads;
    k.chunk = c->teacher.chunk;
    k.topk = c->topk > 0 ? c->topk : KLD_TOPK_DEFAULT;
    k.allow_vocab_mismatch = c->teacher.allow_vocab_mismatch;
    k.stop = c->stop;
    k.progress = c->progress;
    k.progress_user = c->user;
    if (c->on_pass) c->on_pass(c->user, index, n_arms, arm->label);
    kld_status st = kld_kl_run(&k, &o->res, err);
    if (st) {
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err->msg);
        return kld_fail(err, st, "arm %s (%s): %s", arm->label, arm->model, why);
    }
    if (o->res.partial) return KLD_OK;
    st = kld_stats_finalize(o->res.stats, &o->sum, err);
    if (st) kld_kl_result_free(&o->res);
    return st;
}

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

static void outcome_free(kld_sweep_outcome *o) {
    kld_kl_result_free(&o->res);
    free(o->label);
    free(o->model);
    free(o->levers);
}

kld_status kld_sweep_begin(const kld_sweep_config *c, kld_sweep_result *out, kld_error *err) {
    memset(out, 0, sizeof *out);
    if (!c->teacher.model_path) return kld_fail(err, KLD_ERR_ARG, "a sweep needs a reference model");
    double t0 = kld_now_s();
    kld_status st = make_teacher(c, out, err);
    out->elapsed_s += kld_now_s() - t0;
    return st;
}

kld_status kld_sweep_add(const kld_sweep_config *c, kld_sweep_result *out,
                         const kld_sweep_arm *arms, size_t n, kld_error *err) {
    if (out->partial) return KLD_OK;
    if (out->n_done + n > out->cap) {
        size_t cap = out->n_done + n;
        kld_sweep_outcome *p = realloc(out->arms, cap * sizeof *p);
        if (!p) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
        out->arms = p;
        out->cap = cap;
    }
    double t0 = kld_now_s();
    kld_status st = KLD_OK;
    const size_t total = out->n_done + n;
    for (size_t i = 0; !st && i < n; i++) {
        kld_sweep_outcome *o = &out->arms[out->n_done];
        memset(o, 0, sizeof *o);
        if ((st = score_arm(c, out, &arms[i], (long)out->n_done, total, o, err))) break;
        if (o->res.partial) { /* stopped mid-arm: only complete arms are kept */
            kld_kl_result_free(&o->res);
            out->partial = true;
            break;
        }
        o->label = dup_or_null(arms[i].label);
        o->model = dup_or_null(arms[i].model);
        o->levers = dup_or_null(arms[i].levers);
        out->n_done++;
    }
    out->elapsed_s += kld_now_s() - t0;
    return st;
}

kld_status kld_sweep_run(const kld_sweep_config *c, kld_sweep_result *out, kld_error *err) {
    if (c->n_arms == 0) {
        memset(out, 0, sizeof *out);
        return kld_fail(err, KLD_ERR_ARG, "a sweep needs at least one arm");
    }
    kld_status st = kld_sweep_begin(c, out, err);
    return st ? st : kld_sweep_add(c, out, c->arms, c->n_arms, err);
}

void kld_sweep_end(kld_sweep_result *r) {
    for (size_t i = 0; r->arms && i < r->n_done; i++) outcome_free(&r->arms[i]);
    free(r->arms);
    r->arms = NULL;
    r->n_done = r->cap = 0;
    kld_dump_result_free(&r->teacher);
    if (r->teacher_temp) remove_teacher(r->teacher_dir);
    r->teacher_temp = false;
}
kld_status kld_sweep_paired(const kld_stats *a, const kld_stats *b, kld_paired_field f,
                            kld_paired *out, kld_error *err) {
    memset(out, 0, sizeof *out);
    size_t na = 0, nb = 0;
    const kld_position *pa = kld_stats_records(a, &na), *pb = kld_stats_records(b, &nb);
    if (na != nb)
        return kld_fail(err, KLD_ERR_MISMATCH, "paired comparison of %zu and %zu positions", na, nb);
    double *d = malloc((na ? na : 1) * sizeof *d);
    if (!d) return kld_fail(err, KLD_ERR_NOMEM, "out of memory for %zu positions", na);
    for (size_t i = 0; i < na; i++) {
        if (pa[i].token != pb[i].token || pa[i].ctx_pos != pb[i].ctx_pos) {
            free(d);
            return kld_fail(err, KLD_ERR_MISMATCH, "the position streams differ at position %zu", i);
        }
        double x = f == KLD_PAIRED_KLD ? pa[i].kld : (double)(pa[i].top_arm == pa[i].top_ref);
        double y = f == KLD_PAIRED_KLD ? pb[i].kld : (double)(pb[i].top_arm == pb[i].top_ref);
        d[i] = x - y;
        out->a_lower += x < y;
        out->b_lower += y < x;
    }
    out->n = na;
    if (na) kld_mean_se(d, na, &out->mean, &out->se);
    else out->mean = out->se = NAN;
    free(d);
    return KLD_OK;
}
