/* cap_score.c — `kldeval cap score`: scores a JSON Lines file of responses
 * generated elsewhere with kldeval's scorers. Each line names its item the
 * way the task's data does (GSM8K/MMLU `index`, IFEval `key` or `prompt`,
 * HumanEval `task_id`, BFCL `id`) and carries the text as `response`
 * (HumanEval: `completion`). The report gives every accuracy as a fraction
 * with its standard error, and one record per scored line. */
#include "cap/cap.h"

#include <ctype.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

static json_t *acc_obj(size_t correct, size_t n) {
    return json_pack("{s:f, s:I, s:I, s:f}", "accuracy", n ? (double)correct / (double)n : 0.0,
                     "correct", (json_int_t)correct, "n", (json_int_t)n, "stderr",
                     kld_cap_stderr(correct, n));
}

static const char *field_str(const json_t *o, const char *k) {
    return json_string_value(json_object_get(o, k));
}

static kld_status by_index(const char *path, size_t line, const json_t *r, size_t n, size_t *out,
                           kld_error *err) {
    json_t *ix = json_object_get(r, "index");
    if (!json_is_integer(ix) || json_integer_value(ix) < 0 || (size_t)json_integer_value(ix) >= n)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: line %zu: 'index' must be an integer in [0, %zu)",
                        path, line, n);
    *out = (size_t)json_integer_value(ix);
    return KLD_OK;
}

static kld_status need_str(const char *path, size_t line, const json_t *r, const char *k,
                           const char **out, kld_error *err) {
    *out = field_str(r, k);
    if (!*out) return kld_fail(err, KLD_ERR_FORMAT, "%s: line %zu: no string '%s'", path, line, k);
    return KLD_OK;
}

static void set_overall(json_t *rep, size_t correct, size_t n) {
    json_object_set_new(rep, "accuracy", json_real(n ? (double)correct / (double)n : 0.0));
    json_object_set_new(rep, "stderr", json_real(kld_cap_stderr(correct, n)));
    json_object_set_new(rep, "correct", json_integer((json_int_t)correct));
}

static kld_status score_gsm8k(const kld_cap_score_opts *o, const json_t *resp, json_t *rep,
                              kld_error *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/gsm8k/test.jsonl", o->data_dir);
    json_t *data;
    kld_status st = kld_cap_read_jsonl(path, &data, err);
    if (st != KLD_OK) return st;
    json_t *items = json_array();
    size_t correct = 0, i;
    json_t *r;
    json_array_foreach(resp, i, r) {
        size_t ix;
        const char *text;
        if ((st = by_index(o->responses, i + 1, r, json_array_size(data), &ix, err)) ||
            (st = need_str(o->responses, i + 1, r, "response", &text, err)))
            break;
        const char *gold = field_str(json_array_get(data, ix), "answer");
        char got[128] = "", want[128] = "";
        kld_gsm8k_extract(text, got, sizeof got);
        kld_gsm8k_extract(gold ? gold : "", want, sizeof want);
        bool ok = gold && kld_gsm8k_correct(text, gold);
        correct += ok;
        json_array_append_new(items, json_pack("{s:I, s:s, s:s, s:b}", "index", (json_int_t)ix,
                                               "extracted", got, "answer", want, "correct", ok));
    }
    json_decref(data);
    if (st != KLD_OK) return json_decref(items), st;
    set_overall(rep, correct, json_array_size(resp));
    json_object_set_new(rep, "items", items);
    return KLD_OK;
}

/* The letter a response chooses: its first A-D standing alone. */
static int mmlu_letter(const char *s) {
    for (const char *p = s; *p; p++)
        if (*p >= 'A' && *p <= 'D' && (p == s || !isalnum((unsigned char)p[-1])) &&
            !isalnum((unsigned char)p[1]))
            return *p - 'A';
    return -1;
}

static kld_status score_mmlu(const kld_cap_score_opts *o, const json_t *resp, json_t *rep,
                             kld_error *err) {
    kld_mmlu_set test;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/mmlu", o->data_dir);
    kld_status st = kld_mmlu_load(dir, "test", &test, err);
    if (st != KLD_OK) return st;
    json_t *items = json_array(), *subj = json_object();
    size_t correct = 0, i;
    json_t *r;
    json_array_foreach(resp, i, r) {
        size_t ix;
        const char *text;
        if ((st = by_index(o->responses, i + 1, r, test.n, &ix, err)) ||
            (st = need_str(o->responses, i + 1, r, "response", &text, err)))
            break;
        const kld_mmlu_item *it = &test.items[ix];
        int pick = mmlu_letter(text);
        bool ok = pick == it->answer;
        correct += ok;
        json_t *s = json_object_get(subj, it->subject);
        if (!s) {
            s = json_pack("{s:I, s:I}", "correct", (json_int_t)0, "n", (json_int_t)0);
            json_object_set_new(subj, it->subject, s);
        }
        json_object_set_new(s, "n", json_integer(json_integer_value(json_object_get(s, "n")) + 1));
        json_object_set_new(s, "correct", json_integer(json_integer_value(json_object_get(s, "correct")) + ok));
        char lt[2] = {pick >= 0 ? (char)('A' + pick) : '?', 0};
        json_array_append_new(items, json_pack("{s:I, s:s, s:s, s:b}", "index", (json_int_t)ix,
                                               "subject", it->subject, "choice", lt, "correct", ok));
    }
    kld_mmlu_free(&test);
    if (st != KLD_OK) return json_decref(items), json_decref(subj), st;
    const char *k;
    json_t *v;
    json_object_foreach(subj, k, v) {
        size_t c = (size_t)json_integer_value(json_object_get(v, "correct"));
        size_t n = (size_t)json_integer_value(json_object_get(v, "n"));
        json_object_set_new(v, "accuracy", json_real((double)c / (double)n));
    }
    set_overall(rep, correct, json_array_size(resp));
    json_object_set_new(rep, "subjects", subj);
    json_object_set_new(rep, "items", items);
    return KLD_OK;
}

static kld_status score_ifeval(const kld_cap_score_opts *o, const json_t *resp, json_t *rep,
                               kld_error *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/ifeval/input_data.jsonl", o->data_dir);
    json_t *data;
    kld_status st = kld_cap_read_jsonl(path, &data, err);
    if (st != KLD_OK) return st;
    json_t *items = json_array();
    size_t p_ok[2] = {0}, i_ok[2] = {0}, n_instr = 0, i;
    /* the reference keeps one response per prompt: a second line for an
     * item would count it twice */
    size_t *seen_at = calloc(json_array_size(data) + 1, sizeof *seen_at);
    if (!seen_at) st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    json_t *r;
    json_array_foreach(resp, i, r) {
        if (st != KLD_OK) break;
        const char *text;
        if ((st = need_str(o->responses, i + 1, r, "response", &text, err))) break;
        json_t *item = NULL, *key = json_object_get(r, "key");
        const char *prompt = field_str(r, "prompt");
        size_t j, at = 0;
        json_t *d;
        json_array_foreach(data, j, d) {
            if (json_is_integer(key) ? json_equal(key, json_object_get(d, "key"))
                                     : prompt && field_str(d, "prompt") && !strcmp(prompt, field_str(d, "prompt"))) {
                item = d;
                at = j;
                break;
            }
        }
        if (!item && json_array_size(resp) == json_array_size(data)) {
            /* One line per prompt in the data's order: pair by line (the
             * shipped GPT-4 file's key 2785 carries an older prompt text). */
            item = json_array_get(data, i);
            at = i;
            if (!o->quiet)
                fprintf(stderr, "kldeval cap score: %s: line %zu names no IFEval prompt; paired "
                        "by line with key %lld\n", o->responses, i + 1,
                        (long long)json_integer_value(json_object_get(item, "key")));
        }
        if (!item) {
            st = kld_fail(err, KLD_ERR_FORMAT, "%s: line %zu: its key/prompt matches no IFEval item",
                          o->responses, i + 1);
            break;
        }
        if (seen_at[at]) {
            st = kld_fail(err, KLD_ERR_FORMAT, "%s: line %zu: IFEval key %lld was scored already (line %zu)",
                          o->responses, i + 1, (long long)json_integer_value(json_object_get(item, "key")),
                          seen_at[at]);
            break;
        }
        seen_at[at] = i + 1;
        bool f[2][64];
        size_t ni = json_array_size(json_object_get(item, "instruction_id_list"));
        json_t *rec = json_pack("{s:O}", "key", json_object_get(item, "key"));
        for (int loose = 0; loose < 2 && st == KLD_OK; loose++) {
            st = kld_ifeval_check(item, text, loose, f[loose], 64, err);
            if (st != KLD_OK) break;
            bool all = true;
            json_t *fl = json_array();
            for (size_t k = 0; k < ni; k++) {
                all = all && f[loose][k];
                i_ok[loose] += f[loose][k];
                json_array_append_new(fl, json_boolean(f[loose][k]));
            }
            p_ok[loose] += all;
            json_object_set_new(rec, loose ? "follow_loose" : "follow_strict", fl);
            json_object_set_new(rec, loose ? "all_loose" : "all_strict", json_boolean(all));
        }
        n_instr += ni;
        json_array_append_new(items, rec);
        if (st != KLD_OK) {
            kld_error_prefix(err, "%s: line %zu", o->responses, i + 1);
            break;
        }
    }
    json_decref(data);
    free(seen_at);
    if (st != KLD_OK) return json_decref(items), st;
    size_t n = json_array_size(resp);
    json_object_set_new(rep, "prompt_strict", acc_obj(p_ok[0], n));
    json_object_set_new(rep, "instruction_strict", acc_obj(i_ok[0], n_instr));
    json_object_set_new(rep, "prompt_loose", acc_obj(p_ok[1], n));
    json_object_set_new(rep, "instruction_loose", acc_obj(i_ok[1], n_instr));
    set_overall(rep, p_ok[0], n); /* the headline: prompt-level strict */
    json_object_set_new(rep, "items", items);
    return KLD_OK;
}

/* ---- HumanEval: programs run by a few worker threads ---- */

typedef struct he_job {
    const kld_cap_score_opts *o;
    char **programs;
    kld_sandbox_result *res;
    kld_status *st;
    kld_error *errs;
    size_t n;
    atomic_size_t next;
} he_job;

static void *he_worker(void *p) {
    he_job *j = p;
    kld_sandbox_opts so = {0};
    so.python = j->o->python;
    for (;;) {
        size_t k = atomic_fetch_add(&j->next, 1);
        if (k >= j->n) break;
        j->st[k] = kld_sandbox_run(&so, j->programs[k], &j->res[k], &j->errs[k]);
    }
    return NULL;
}

static kld_status score_humaneval(const kld_cap_score_opts *o, const json_t *resp, json_t *rep,
                                  kld_error *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/humaneval/HumanEval.jsonl.gz", o->data_dir);
    json_t *data;
    kld_status st = kld_cap_read_jsonl(path, &data, err);
    if (st != KLD_OK) return st;
    size_t n = json_array_size(resp);
    he_job j = {.o = o, .n = n};
    j.programs = calloc(n ? n : 1, sizeof *j.programs);
    j.res = calloc(n ? n : 1, sizeof *j.res);
    j.st = calloc(n ? n : 1, sizeof *j.st);
    j.errs = calloc(n ? n : 1, sizeof *j.errs);
    atomic_init(&j.next, 0);
    if (!j.programs || !j.res || !j.st || !j.errs) st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n && st == KLD_OK; i++) {
        json_t *r = json_array_get(resp, i);
        const char *tid, *comp;
        if ((st = need_str(o->responses, i + 1, r, "task_id", &tid, err)) ||
            (st = need_str(o->responses, i + 1, r, "completion", &comp, err)))
            break;
        json_t *task = NULL, *d;
        size_t k;
        json_array_foreach(data, k, d) if (field_str(d, "task_id") && !strcmp(field_str(d, "task_id"), tid)) task = d;
        if (!task) {
            st = kld_fail(err, KLD_ERR_FORMAT, "%s: line %zu: no HumanEval task '%s'", o->responses,
                          i + 1, tid);
            break;
        }
        if (!(j.programs[i] = kld_humaneval_program(task, comp)))
            st = kld_fail(err, KLD_ERR_FORMAT, "HumanEval task %s: malformed", tid);
    }
    if (st == KLD_OK) {
        int jobs = o->jobs > 0 ? o->jobs : 2;
        if (jobs > 64) jobs = 64;
        pthread_t th[64];
        int started = 0;
        for (int t = 0; t < jobs; t++)
            if (!pthread_create(&th[t], NULL, he_worker, &j)) started++;
            else break;
        if (!started) he_worker(&j);
        for (int t = 0; t < started; t++) pthread_join(th[t], NULL);
        size_t correct = 0;
        json_t *items = json_array();
        for (size_t i = 0; i < n; i++) {
            if (j.st[i] != KLD_OK) {
                *err = j.errs[i];
                st = j.st[i];
                break;
            }
            correct += j.res[i].outcome == KLD_SANDBOX_PASSED;
            json_array_append_new(items, json_pack("{s:O, s:s, s:b, s:s}", "task_id",
                                                   json_object_get(json_array_get(resp, i), "task_id"),
                                                   "result", kld_sandbox_outcome_name(j.res[i].outcome),
                                                   "passed", j.res[i].outcome == KLD_SANDBOX_PASSED,
                                                   "detail", j.res[i].detail));
        }
        if (st == KLD_OK) {
            set_overall(rep, correct, n);
            json_object_set_new(rep, "network_isolated", json_boolean(n && j.res[0].network_isolated));
            json_object_set_new(rep, "items", items);
        } else json_decref(items);
    }
    for (size_t i = 0; j.programs && i < n; i++) free(j.programs[i]);
    free(j.programs);
    free(j.res);
    free(j.st);
    free(j.errs);
    json_decref(data);
    return st;
}

static kld_status score_bfcl(const kld_cap_score_opts *o, const char *cat, const json_t *resp,
                             json_t *rep, kld_error *err) {
    char qp[4096], ap[4096];
    snprintf(qp, sizeof qp, "%s/bfcl/BFCL_v4_%s.json", o->data_dir, cat);
    snprintf(ap, sizeof ap, "%s/bfcl/possible_answer/BFCL_v4_%s.json", o->data_dir, cat);
    const char *lang = !strcmp(cat, "simple_java") ? "java"
                       : !strcmp(cat, "simple_javascript") ? "javascript" : "python";
    json_t *qs = NULL, *as = NULL;
    kld_status st = kld_cap_read_jsonl(qp, &qs, err);
    if (st == KLD_OK) st = kld_cap_read_jsonl(ap, &as, err);
    if (st == KLD_OK && json_array_size(qs) != json_array_size(as))
        st = kld_fail(err, KLD_ERR_MISMATCH, "%s and %s: %zu questions, %zu answers", qp, ap,
                      json_array_size(qs), json_array_size(as));
    json_t *items = json_array();
    size_t correct = 0, i;
    json_t *r;
    json_array_foreach(resp, i, r) {
        if (st != KLD_OK) break;
        const char *id, *text;
        if ((st = need_str(o->responses, i + 1, r, "id", &id, err)) ||
            (st = need_str(o->responses, i + 1, r, "response", &text, err)))
            break;
        size_t k;
        json_t *q = NULL, *d;
        json_array_foreach(qs, k, d) if (field_str(d, "id") && !strcmp(field_str(d, "id"), id)) {
            q = d;
            break;
        }
        if (!q) {
            st = kld_fail(err, KLD_ERR_FORMAT, "%s: line %zu: no BFCL %s entry '%s'", o->responses,
                          i + 1, cat, id);
            break;
        }
        bool ok;
        char why[256];
        st = kld_bfcl_check(q, json_array_get(as, k), lang, text, &ok, why, sizeof why, err);
        if (st != KLD_OK) break;
        correct += ok;
        json_array_append_new(items, json_pack("{s:s, s:b, s:s}", "id", id, "correct", ok, "why", why));
    }
    json_decref(qs);
    json_decref(as);
    if (st != KLD_OK) return json_decref(items), st;
    set_overall(rep, correct, json_array_size(resp));
    json_object_set_new(rep, "items", items);
    return KLD_OK;
}

kld_status kld_cap_score(const kld_cap_score_opts *opts, json_t **report, kld_error *err) {
    *report = NULL;
    kld_cap_score_opts o = *opts;
    char data[4096];
    kld_status dst = kld_cap_data_dir(o.data_dir, data, sizeof data, err);
    if (dst) return dst;
    o.data_dir = data;
    if (!o.task || !o.responses) return kld_fail(err, KLD_ERR_ARG, "cap score: need a task and a responses file");
    json_t *resp;
    kld_status st = kld_cap_read_jsonl(o.responses, &resp, err);
    if (st != KLD_OK) return st;
    if (json_array_size(resp) == 0) { /* else every accuracy reads 0 of 0 */
        json_decref(resp);
        return kld_fail(err, KLD_ERR_FORMAT, "%s: no responses (the file has no JSON line)", o.responses);
    }
    json_t *rep = json_pack("{s:s, s:s, s:I}", "task", o.task, "responses", o.responses, "n",
                            (json_int_t)json_array_size(resp));
    if (!strcmp(o.task, "gsm8k")) st = score_gsm8k(&o, resp, rep, err);
    else if (!strcmp(o.task, "mmlu")) st = score_mmlu(&o, resp, rep, err);
    else if (!strcmp(o.task, "ifeval")) st = score_ifeval(&o, resp, rep, err);
    else if (!strcmp(o.task, "humaneval")) st = score_humaneval(&o, resp, rep, err);
    else if (!strncmp(o.task, "bfcl_", 5) &&
             (!strcmp(o.task + 5, "simple_python") || !strcmp(o.task + 5, "simple_java") ||
              !strcmp(o.task + 5, "simple_javascript") || !strcmp(o.task + 5, "multiple")))
        st = score_bfcl(&o, o.task + 5, resp, rep, err);
    else
        st = kld_fail(err, KLD_ERR_ARG, "cap score: unknown task '%s' (gsm8k, mmlu, ifeval, "
                      "humaneval, bfcl_simple_python, bfcl_simple_java, bfcl_simple_javascript, "
                      "bfcl_multiple)", o.task);
    if (st == KLD_OK) json_object_set_new(rep, "config", kld_cap_score_config(&o, json_array_size(resp)));
    json_decref(resp);
    if (st != KLD_OK) return json_decref(rep), st;
    *report = rep;
    return KLD_OK;
}
