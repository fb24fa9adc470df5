/* cap_run.c — `kldeval cap -m MODEL [--arm MODEL]`: generates the tasks'
 * responses on kldeval's engine (greedy, bit-exact), scores them with the
 * same scorers as `cap score`, and pairs the two arms item by item.
 *
 * Prompts: the model's chat template (GGUF tokenizer.chat_template) when
 * it has one and --no-chat is not given, else raw completion. MMLU is
 * 5-shot from the dev split (fewer when the context is short), scored by
 * the next-token logits of " A" … " D"; GSM8K zero-shot ("Question: …
 * Answer:" raw, or the question as the user turn); IFEval the prompt;
 * HumanEval the prompt as raw completion with human-eval's stop strings;
 * BFCL simple_python the function documents and the question, answered in
 * the prompting-mode call syntax; HashHop one generated problem (--seed)
 * as large as the smaller model's context allows up to 12k tokens, hops 2,
 * 16-letter hashes, n queries, each continued after "key = '" and matched
 * exactly up to the closing quote. Items: n spread evenly over each task's
 * data (every (size/n)-th item), so a small n still covers subjects. */
#include "cap/cap.h"
#include "cap/chat.h"
#include "cap/hashhop.h"
#include "cap/run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct arm_items {
    unsigned char *ok;
    size_t n;
} arm_items;

static kld_status build_prompt(const kld_cap_lm *lm, bool chat, const char *user, char **out,
                               bool *add_bos, kld_error *err) {
    if (!chat || !lm->chat_template) {
        *add_bos = true;
        return (*out = kld_strdup(user)) ? KLD_OK : kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    }
    json_t *m = json_pack("[{s:s, s:s}]", "role", "user", "content", user);
    kld_chat_opts o = {.messages = m, .add_generation_prompt = true, .bos_token = lm->bos, .eos_token = lm->eos};
    kld_status st = kld_chat_render(lm->chat_template, &o, out, err);
    json_decref(m);
    /* no doubled BOS: the template may write it itself */
    *add_bos = st == KLD_OK && !kld_chat_has_bos(*out, lm->bos);
    return st;
}

static size_t pick(size_t i, size_t n, size_t size) { return n >= size ? i : i * (size / n); }

static json_t *acc_json(size_t correct, size_t n) {
    return json_pack("{s:f, s:f, s:I, s:I}", "accuracy", n ? (double)correct / (double)n : 0.0, "stderr",
                     kld_cap_stderr(correct, n), "correct", (json_int_t)correct, "n", (json_int_t)n);
}

/* Runs one task for one model: fills ok[] and appends per-item records. */
static kld_status run_task(const kld_cap_run_opts *o, kld_cap_lm *lm, const char *task, size_t n_items,
                           arm_items *res, json_t *items, kld_error *err) {
    char path[4096];
    const bool chat = !o->no_chat;
    kld_status st = KLD_OK;
    res->ok = calloc(n_items ? n_items : 1, 1);
    res->n = 0;
    if (!res->ok) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    if (!strcmp(task, "mmlu")) {
        kld_mmlu_set test, dev;
        snprintf(path, sizeof path, "%s/mmlu", o->data_dir);
        if ((st = kld_mmlu_load(path, "test", &test, err))) return st;
        if ((st = kld_mmlu_load(path, "dev", &dev, err))) return kld_mmlu_free(&test), st;
        int32_t letter_id[4];
        static const char *const letters[4] = {" A", " B", " C", " D"};
        for (int c = 0; c < 4 && st == KLD_OK; c++) {
            kld_tok_ids t = {0};
            st = kld_tok_encode(lm->tok, letters[c], 2, 0, &t, err);
            letter_id[c] = t.n ? t.ids[t.n - 1] : 0;
            kld_tok_ids_free(&t);
        }
        for (size_t i = 0; i < n_items && st == KLD_OK && !(o->stop && *o->stop); i++) {
            const kld_mmlu_item *it = &test.items[pick(i, n_items, test.n)];
            char *p = kld_mmlu_prompt(&dev, it, 5);
            if (!p) { st = kld_fail(err, KLD_ERR_NOMEM, "out of memory"); break; }
            st = kld_cap_next_logits(lm, p, true, err);
            free(p);
            if (st) break;
            float l[4];
            for (int c = 0; c < 4; c++) l[c] = lm->logits[letter_id[c]];
            int choice = kld_mmlu_pick(l);
            res->ok[res->n++] = choice == it->answer;
            char lt[2] = {(char)('A' + choice), 0};
            json_array_append_new(items, json_pack("{s:s, s:s, s:b}", "subject", it->subject, "choice", lt,
                                                   "correct", choice == it->answer));
        }
        kld_mmlu_free(&test);
        kld_mmlu_free(&dev);
        return st;
    }
    if (!strcmp(task, "hashhop")) {
        kld_hashhop_params hp = {o->hashhop_chars, 0, 2, 16, false};
        kld_hashhop_sample hs;
        size_t C = (hp.n_chars + (2 * 16 + 3) * 2 - 1) / ((2 * 16 + 3) * 2);
        hp.queries = n_items < C ? n_items : C;
        if ((st = kld_hashhop_generate(&hp, o->seed, &hs, err))) return st;
        static const char *const quote[] = {"'", NULL};
        for (size_t q = 0; q < hs.n_queries && st == KLD_OK && !(o->stop && *o->stop); q++) {
            char *qt = kld_hashhop_query_text(&hs, q), *text = NULL;
            st = qt ? kld_cap_generate(lm, qt, true, 16 + 4, quote, &text, err) : kld_fail(err, KLD_ERR_NOMEM, "out of memory");
            if (st == KLD_OK) {
                /* the stop string was cut off: put the quote back for the rule */
                size_t tl = strlen(text);
                char *withq = malloc(tl + 2);
                bool ok = withq && (memcpy(withq, text, tl), withq[tl] = '\'', withq[tl + 1] = 0, kld_hashhop_correct(&hs, q, withq));
                free(withq);
                res->ok[res->n++] = ok;
                json_array_append_new(items, json_pack("{s:s, s:s, s:s, s:b}", "key", hs.keys[q], "target", hs.targets[q],
                                                       "response", text, "correct", ok));
            }
            free(qt);
            free(text);
        }
        kld_hashhop_free(&hs);
        return st;
    }
    json_t *data = NULL, *answers = NULL;
    if (!strcmp(task, "gsm8k")) snprintf(path, sizeof path, "%s/gsm8k/test.jsonl", o->data_dir);
    else if (!strcmp(task, "ifeval")) snprintf(path, sizeof path, "%s/ifeval/input_data.jsonl", o->data_dir);
    else if (!strcmp(task, "humaneval")) snprintf(path, sizeof path, "%s/humaneval/HumanEval.jsonl.gz", o->data_dir);
    else if (!strcmp(task, "bfcl")) snprintf(path, sizeof path, "%s/bfcl/BFCL_v4_simple_python.json", o->data_dir);
    else return kld_fail(err, KLD_ERR_ARG, "cap: unknown task '%s' (mmlu, gsm8k, ifeval, humaneval, bfcl)", task);
    if ((st = kld_cap_read_jsonl(path, &data, err))) return st;
    if (!strcmp(task, "bfcl")) {
        snprintf(path, sizeof path, "%s/bfcl/possible_answer/BFCL_v4_simple_python.json", o->data_dir);
        if ((st = kld_cap_read_jsonl(path, &answers, err))) return json_decref(data), st;
    }
    const size_t size = json_array_size(data);
    static const char *const he_stops[] = {"\ndef ", "\nclass ", "\nif __name__", "\nprint(", "\n#", NULL};
    static const char *const qa_stops[] = {"\n\nQuestion:", NULL};
    for (size_t i = 0; i < n_items && i < size && st == KLD_OK && !(o->stop && *o->stop); i++) {
        const size_t ix = pick(i, n_items, size);
        const json_t *d = json_array_get(data, ix);
        const bool he = !strcmp(task, "humaneval"), bf = !strcmp(task, "bfcl"), gs = !strcmp(task, "gsm8k");
        const bool use_chat = chat && lm->chat_template && !he;
        char *user = NULL, *prompt = NULL, *text = NULL;
        bool add_bos = true, ok = false;
        if (gs) {
            const char *q = json_string_value(json_object_get(d, "question"));
            if (use_chat) user = kld_strdup(q ? q : "");
            else {
                size_t l = strlen(q ? q : "") + 32;
                if ((user = malloc(l))) snprintf(user, l, "Question: %s\nAnswer:", q ? q : "");
            }
        } else if (he || !strcmp(task, "ifeval")) {
            user = kld_strdup(json_string_value(json_object_get(d, "prompt")) ? json_string_value(json_object_get(d, "prompt")) : "");
        } else if (bf) {
            char *funcs = json_dumps(json_object_get(d, "function"), JSON_COMPACT);
            const char *q = json_string_value(json_object_get(json_array_get(json_array_get(json_object_get(d, "question"), 0), 0), "content"));
            size_t l = (funcs ? strlen(funcs) : 0) + (q ? strlen(q) : 0) + 400;
            if ((user = malloc(l)))
                snprintf(user, l, "You are an expert in composing functions. Given the functions below and a question, "
                         "answer only with the function call, in the format [func_name(param_name=value, ...)].\n\n"
                         "Functions: %s\n\nQuestion: %s\n%s", funcs ? funcs : "[]", q ? q : "", use_chat ? "" : "Answer: ");
            free(funcs);
        }
        if (!user) st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
        if (st == KLD_OK && he) {
            prompt = kld_strdup(user);
            add_bos = true;
        } else if (st == KLD_OK) st = build_prompt(lm, use_chat, user, &prompt, &add_bos, err);
        if (st == KLD_OK)
            st = kld_cap_generate(lm, prompt, add_bos, o->max_new, he ? he_stops : gs && !use_chat ? qa_stops : NULL,
                                  &text, err);
        json_t *rec = NULL;
        if (st == KLD_OK) {
            if (gs) {
                ok = kld_gsm8k_correct(text, json_string_value(json_object_get(d, "answer")));
            } else if (!strcmp(task, "ifeval")) {
                bool f[64];
                st = kld_ifeval_check(d, text, false, f, 64, err);
                ok = st == KLD_OK;
                for (size_t k = 0; ok && k < json_array_size(json_object_get(d, "instruction_id_list")); k++) ok = f[k];
            } else if (he) {
                char *prog = kld_humaneval_program(d, text);
                kld_sandbox_opts so = {.python = o->python};
                kld_sandbox_result r;
                st = prog ? kld_sandbox_run(&so, prog, &r, err) : kld_fail(err, KLD_ERR_NOMEM, "out of memory");
                ok = st == KLD_OK && r.outcome == KLD_SANDBOX_PASSED;
                free(prog);
            } else if (bf) {
                st = kld_bfcl_check(d, json_array_get(answers, ix), "python", text, &ok, NULL, 0, err);
            }
            rec = json_pack("{s:I, s:s, s:b}", "item", (json_int_t)ix, "response", text, "correct", ok);
        }
        if (rec) json_array_append_new(items, rec);
        if (st == KLD_OK) res->ok[res->n++] = ok;
        free(user), free(prompt), free(text);
    }
    json_decref(data);
    json_decref(answers);
    return st;
}

static bool task_listed(const char *list, const char *task) {
    if (!strcmp(list, "all")) return true;
    size_t l = strlen(task);
    for (const char *p = list; *p;) {
        const char *c = strchr(p, ',');
        size_t n = c ? (size_t)(c - p) : strlen(p);
        if (n == l && !strncmp(p, task, l)) return true;
        p += n + (c ? 1 : 0);
    }
    return false;
}

/* HashHop's prompt size in characters: the same problem for both arms, as
 * large as fits the smaller context (and the token budget) in both. */
static kld_status hashhop_size(kld_cap_run_opts *o, kld_cap_lm *lm, int n_arms, kld_error *err) {
    int64_t budget = o->hashhop_tokens > 0 ? o->hashhop_tokens : 12000;
    for (int a = 0; a < n_arms; a++)
        if (lm[a].n_ctx - 40 < budget) budget = lm[a].n_ctx - 40;
    if (budget < 16) return kld_fail(err, KLD_ERR_ARG, "hashhop: the context (%lld) is too small", (long long)lm[0].n_ctx);
    size_t chars = (size_t)budget * 2;
    for (int round = 0; round < 8; round++) {
        kld_hashhop_params hp = {chars, 1, 2, 16, false};
        kld_hashhop_sample hs;
        kld_status st = kld_hashhop_generate(&hp, o->seed, &hs, err);
        if (st) return st;
        char *qt = kld_hashhop_query_text(&hs, 0);
        int64_t worst = 0;
        for (int a = 0; a < n_arms && qt; a++) {
            kld_tok_ids ids = {0};
            st = kld_tok_encode(lm[a].tok, qt, strlen(qt), KLD_TOK_ADD_SPECIAL, &ids, err);
            if ((int64_t)ids.n > worst) worst = (int64_t)ids.n;
            kld_tok_ids_free(&ids);
            if (st) break;
        }
        free(qt);
        kld_hashhop_free(&hs);
        if (st) return st;
        if (worst <= budget) break;
        size_t next = (size_t)((double)chars * (double)budget / (double)worst * 0.95);
        chars = next < 40 ? 40 : next;
    }
    o->hashhop_chars = chars;
    return KLD_OK;
}

kld_status kld_cap_run(const kld_cap_run_opts *opts, json_t **report, kld_error *err) {
    *report = NULL;
    kld_cap_run_opts o = *opts;
    if (!o.data_dir) o.data_dir = "../shared/capability";
    if (o.n <= 0) o.n = 10;
    if (o.max_new <= 0) o.max_new = 128;
    if (!o.tasks) o.tasks = "all";
    static const char *const all[] = {"mmlu", "gsm8k", "ifeval", "humaneval", "bfcl", "hashhop", NULL};
    for (const char *p = o.tasks; strcmp(o.tasks, "all") && *p;) { /* every listed name is known */
        const char *c = strchr(p, ',');
        size_t n = c ? (size_t)(c - p) : strlen(p);
        bool known = false;
        for (int k = 0; all[k]; k++) known |= strlen(all[k]) == n && !strncmp(all[k], p, n);
        if (!known)
            return kld_fail(err, KLD_ERR_ARG, "cap: unknown task '%.*s' in --tasks (mmlu, gsm8k, ifeval, humaneval, "
                            "bfcl, hashhop)", (int)n, p);
        p += n + (c ? 1 : 0);
    }
    const char *paths[2] = {o.ref_path, o.arm_path};
    const int n_arms = o.arm_path ? 2 : 1;
    kld_cap_lm lm[2];
    memset(lm, 0, sizeof lm);
    kld_status st = KLD_OK;
    for (int a = 0; a < n_arms && st == KLD_OK; a++) st = kld_cap_lm_open(paths[a], o.threads, 0, &lm[a], err);
    if (st == KLD_OK && task_listed(o.tasks, "hashhop")) st = hashhop_size(&o, lm, n_arms, err);
    json_t *rep = json_pack("{s:s, s:I, s:I, s:b, s:o}", "ref", o.ref_path, "n", (json_int_t)o.n, "max_new",
                            (json_int_t)o.max_new, "chat", !o.no_chat, "tasks", json_object());
    if (o.arm_path) json_object_set_new(rep, "arm", json_string(o.arm_path));
    json_t *tasks = json_object_get(rep, "tasks");
    double score[2] = {0, 0};
    int n_tasks = 0;
    for (int t = 0; all[t] && st == KLD_OK; t++) {
        if (!task_listed(o.tasks, all[t])) continue;
        if (!o.quiet) fprintf(stderr, "cap: %s ...\n", all[t]);
        arm_items res[2] = {{0}};
        json_t *tj = json_object();
        for (int a = 0; a < n_arms && st == KLD_OK; a++) {
            json_t *items = json_array();
            st = run_task(&o, &lm[a], all[t], (size_t)o.n, &res[a], items, err);
            size_t c = 0;
            for (size_t i = 0; i < res[a].n; i++) c += res[a].ok[i];
            json_t *aj = acc_json(c, res[a].n);
            json_object_set_new(aj, "items", items);
            json_object_set_new(tj, a ? "arm" : "ref", aj);
            score[a] += res[a].n ? (double)c / (double)res[a].n : 0.0;
        }
        if (st == KLD_OK && n_arms == 2) { /* paired on the same items */
            size_t n = res[0].n < res[1].n ? res[0].n : res[1].n, n01 = 0, n10 = 0;
            double mean = 0, var = 0;
            for (size_t i = 0; i < n; i++) {
                int d = (int)res[1].ok[i] - (int)res[0].ok[i];
                n01 += d > 0;
                n10 += d < 0;
                mean += d;
            }
            mean = n ? mean / (double)n : 0;
            for (size_t i = 0; i < n; i++) {
                double d = (double)((int)res[1].ok[i] - (int)res[0].ok[i]) - mean;
                var += d * d;
            }
            double se = n > 1 ? sqrt(var / (double)(n - 1) / (double)n) : 0;
            json_object_set_new(tj, "paired", json_pack("{s:f, s:f, s:I, s:I, s:I}", "diff", mean, "stderr", se,
                                                        "arm_only_right", (json_int_t)n01, "ref_only_right",
                                                        (json_int_t)n10, "n", (json_int_t)n));
        }
        free(res[0].ok);
        free(res[1].ok);
        json_object_set_new(tasks, all[t], tj);
        n_tasks++;
    }
    if (st == KLD_OK) {
        json_t *cs = json_pack("{s:f}", "ref", n_tasks ? score[0] / n_tasks : 0.0);
        if (n_arms == 2) {
            json_object_set_new(cs, "arm", json_real(n_tasks ? score[1] / n_tasks : 0.0));
            json_object_set_new(cs, "diff", json_real(n_tasks ? (score[1] - score[0]) / n_tasks : 0.0));
        }
        json_object_set_new(rep, "capability_score", cs);
        json_object_set_new(rep, "interrupted", json_boolean(o.stop && *o.stop));
        const char *run_tasks[8];
        size_t n_run = 0;
        for (int t = 0; all[t]; t++)
            if (task_listed(o.tasks, all[t])) run_tasks[n_run++] = all[t];
        json_object_set_new(rep, "config", kld_cap_run_config(&o, &lm[0], n_arms == 2 ? &lm[1] : NULL,
                                                              run_tasks, n_run));
    }
    for (int a = 0; a < 2; a++) kld_cap_lm_close(&lm[a]);
    if (st != KLD_OK) return json_decref(rep), st;
    *report = rep;
    return KLD_OK;
}
