/* cap_run.c — `kldeval cap -m MODEL [--arm MODEL]`: generates the tasks'
 * responses on kldeval's engine (greedy or seeded sampling, bit-exact),
 * scores them with the same scorers as `cap score` (without the thinking
 * block, think.c), and pairs the two arms item by item; --samples N
 * generates each item N times (an item scores the fraction right).
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
#include "cap/checkpoint.h"
#include "chat/chat.h"
#include "cap/hashhop.h"
#include "cap/langdetect.h"
#include "cap/run.h"
#include "cap/units.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct arm_items {
    unsigned char *ok;
    size_t n;
    size_t total;  /* the unit's items in the whole evaluation (every shard) */
    json_t *pos;   /* the item number of each record (shards take some of 0 .. total-1) */
} arm_items;

/* Whether item i of total belongs to this run's shard. */
static bool take(const kld_cap_run_opts *o, size_t i, size_t total) {
    return !o->shard.n || kld_shard_has(&o->shard, i, total);
}

/* Records item i: its outcome and its number. */
static void took(arm_items *res, size_t i, bool ok) {
    res->ok[res->n++] = ok;
    json_array_append_new(res->pos, json_integer((json_int_t)i));
}

/* thinking: KLD_CAP_THINKING_ON/OFF pass enable_thinking (Qwen3-style
 * templates read it), DEFAULT leaves it undefined. */
static kld_status build_prompt(const kld_cap_lm *lm, bool chat, int thinking, const char *user, char **out,
                               bool *add_bos, kld_error *err) {
    if (!chat || !lm->chat_template) {
        *add_bos = true;
        return (*out = kld_strdup(user)) ? KLD_OK : kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    }
    json_t *m = json_pack("[{s:s, s:s}]", "role", "user", "content", user);
    json_t *extra = thinking == KLD_CAP_THINKING_DEFAULT ? NULL
                    : json_pack("{s:b}", "enable_thinking", thinking == KLD_CAP_THINKING_ON);
    const kld_chat_template t = {.text = lm->chat_template, .bos = lm->bos, .eos = lm->eos};
    kld_status st = kld_chat_apply_vars(&t, m, true, extra, out, add_bos, err);
    json_decref(m);
    json_decref(extra);
    return st;
}

static size_t pick(size_t i, size_t n, size_t size) { return n >= size ? i : i * (size / n); }

/* A task's prompts generated together (kld_cap_generate_batch): the shard's
 * items, index[k] the item number of prompt k. */
/* How one model generates a task's items: its sampler, responses per
 * item, the thinking budget. */
typedef struct gen_setup {
    const kld_cap_sampler *sampler;
    int samples;
    int think_budget;
    int arm;                /* 0 reference, 1 arm (the checkpoint's key) */
} gen_setup;

typedef struct gen_batch {
    kld_cap_gen_item *items;
    char **prompts, **texts;
    size_t *index;
    size_t n, done;
} gen_batch;

static kld_status gen_batch_init(gen_batch *g, size_t cap, kld_error *err) {
    g->n = g->done = 0;
    g->items = calloc(cap ? cap : 1, sizeof *g->items);
    g->prompts = calloc(cap ? cap : 1, sizeof *g->prompts);
    g->texts = calloc(cap ? cap : 1, sizeof *g->texts);
    g->index = calloc(cap ? cap : 1, sizeof *g->index);
    return g->items && g->prompts && g->texts && g->index ? KLD_OK : kld_fail(err, KLD_ERR_NOMEM, "out of memory");
}

/* Appends item i's prompt (owned by the batch from now on), its samples
 * s = 0 .. samples-1 drawn with the keys (key, s). */
static void gen_batch_add(gen_batch *g, const gen_setup *gs, size_t i, uint64_t key, char *prompt, bool add_bos,
                          int max_new, const char *const *stops) {
    for (int s = 0; s < gs->samples; s++) {
        g->items[g->n] = (kld_cap_gen_item){prompt, add_bos, max_new, stops, gs->sampler, key, (uint64_t)s,
                                            gs->think_budget};
        g->prompts[g->n] = s ? NULL : prompt;
        g->index[g->n++] = i;
    }
}

/* The scored text of entry k: the response without its thinking block. */
static char *scored_text(const gen_batch *g, size_t k) {
    return kld_cap_strip_thinking(g->texts[k], kld_cap_thinking_open(g->items[k].prompt, false));
}

/* The record fields of an item's samples (samples > 1): score = c / S,
 * n_correct, samples, every scored response. */
static void add_samples(json_t *rec, const gen_batch *g, size_t k0, int samples, size_t c) {
    if (samples <= 1 || !rec) return;
    json_t *all = json_array();
    for (int s = 0; s < samples; s++) {
        char *t = scored_text(g, k0 + (size_t)s);
        json_array_append_new(all, json_string(t ? t : ""));
        free(t);
    }
    json_object_set_new(rec, "score", json_real((double)c / samples));
    json_object_set_new(rec, "n_correct", json_integer((json_int_t)c));
    json_object_set_new(rec, "samples", json_integer(samples));
    json_object_set_new(rec, "responses", all);
}

/* The prompts of g not kept by the checkpoint, generated a group at a time
 * and each group appended to it, so a kill loses one group at most. */
static kld_status gen_batch_checkpointed(gen_batch *g, const kld_cap_run_opts *o, kld_cap_lm *lm, int arm,
                                         const char *unit, kld_error *err) {
    size_t *todo = malloc((g->n ? g->n : 1) * sizeof *todo), n_todo = 0;
    kld_cap_gen_item *sub = malloc((g->n ? g->n : 1) * sizeof *sub);
    char **texts = calloc(g->n ? g->n : 1, sizeof *texts);
    kld_status st = todo && sub && texts ? KLD_OK : kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    for (size_t k = 0; k < g->n && st == KLD_OK; k++) {
        const kld_cap_gen_item *it = &g->items[k];
        const char *kept = kld_cap_ckpt_find(o->ckpt, arm, unit, it->item, it->sample, it->prompt);
        if (!kept) todo[n_todo++] = k;
        else if (!(g->texts[k] = kld_strdup(kept))) st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    }
    const size_t group = (size_t)(o->batch > 0 ? o->batch : kld_cap_default_batch(lm)) * 2;
    for (size_t a = 0; a < n_todo && st == KLD_OK && !(o->stop && *o->stop); a += group) {
        const size_t m = n_todo - a < group ? n_todo - a : group;
        for (size_t j = 0; j < m; j++) sub[j] = g->items[todo[a + j]];
        size_t done = 0;
        st = kld_cap_generate_batch(lm, sub, m, o->batch, o->stop, texts, &done, err);
        for (size_t j = 0; j < done && st == KLD_OK; j++) {
            st = kld_cap_ckpt_add(o->ckpt, arm, unit, sub[j].item, sub[j].sample, sub[j].prompt, texts[j], err);
            g->texts[todo[a + j]] = texts[j];
            texts[j] = NULL;
        }
        for (size_t j = 0; j < m; j++) free(texts[j]), texts[j] = NULL;
        if (st == KLD_OK) st = kld_cap_ckpt_sync(o->ckpt, err);
    }
    /* done: the prefix of prompts with a text (kld_cap_generate_batch's rule) */
    for (g->done = 0; g->done < g->n && g->texts[g->done];) g->done++;
    free(todo), free(sub), free(texts);
    return st;
}

static kld_status gen_batch_run(gen_batch *g, const kld_cap_run_opts *o, kld_cap_lm *lm, const gen_setup *gs,
                                const char *unit, kld_error *err) {
    if (o->ckpt) return gen_batch_checkpointed(g, o, lm, gs->arm, unit, err);
    return kld_cap_generate_batch(lm, g->items, g->n, o->batch, o->stop, g->texts, &g->done, err);
}

static void gen_batch_free(gen_batch *g) {
    for (size_t i = 0; i < g->n; i++) {
        if (g->prompts) free(g->prompts[i]);
        if (g->texts) free(g->texts[i]);
    }
    free(g->items), free(g->prompts), free(g->texts), free(g->index);
}

/* Scores one response of a data item d (number ix) of task. */
static kld_status score_text(const kld_cap_run_opts *o, const char *task, const json_t *d, const json_t *answers,
                             size_t ix, const char *text, bool *ok, kld_error *err) {
    kld_status st = KLD_OK;
    *ok = false;
    if (!strcmp(task, "gsm8k")) {
        *ok = kld_gsm8k_correct(text, json_string_value(json_object_get(d, "answer")));
    } else if (!strcmp(task, "ifeval")) {
        bool f[64];
        st = kld_ifeval_check(d, text, false, f, 64, err);
        *ok = st == KLD_OK;
        for (size_t m = 0; *ok && m < json_array_size(json_object_get(d, "instruction_id_list")); m++) *ok = f[m];
    } else if (!strcmp(task, "humaneval")) {
        char *prog = kld_humaneval_program(d, text);
        kld_sandbox_opts so = {.python = o->python};
        kld_sandbox_result r;
        st = prog ? kld_sandbox_run(&so, prog, &r, err) : kld_fail(err, KLD_ERR_NOMEM, "out of memory");
        *ok = st == KLD_OK && r.outcome == KLD_SANDBOX_PASSED;
        free(prog);
    } else if (!strncmp(task, "bfcl_", 5)) {
        /* BFCL v4: Java and JavaScript categories name their language; the rest are Python */
        const char *lang = !strcmp(task, "bfcl_simple_java") ? "java"
                           : !strcmp(task, "bfcl_simple_javascript") ? "javascript" : "python";
        st = kld_bfcl_check(d, json_array_get(answers, ix), lang, text, ok, NULL, 0, err);
    }
    return st;
}

/* Runs one task for one model: fills ok[] and appends per-item records. */
static kld_status run_task(const kld_cap_run_opts *o, kld_cap_lm *lm, const gen_setup *gs, const char *task,
                           size_t n_items, arm_items *res, json_t *items, kld_error *err) {
    char path[4096];
    const bool chat = !o->no_chat;
    kld_status st = KLD_OK;
    res->ok = calloc(n_items ? n_items : 1, 1);
    res->n = 0;
    res->pos = json_array();
    if (!res->ok || !res->pos) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
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
        res->total = n_items < test.n ? n_items : test.n;
        for (size_t i = 0; i < res->total && st == KLD_OK && !(o->stop && *o->stop); i++) {
            if (!take(o, i, res->total)) continue;
            const kld_mmlu_item *it = &test.items[pick(i, n_items, test.n)];
            char *p = kld_mmlu_prompt(&dev, it, 5);
            if (!p) { st = kld_fail(err, KLD_ERR_NOMEM, "out of memory"); break; }
            st = kld_cap_next_logits(lm, p, true, err);
            free(p);
            if (st) break;
            float l[4];
            for (int c = 0; c < 4; c++) l[c] = lm->logits[letter_id[c]];
            int choice = kld_mmlu_pick(l);
            took(res, i, choice == it->answer);
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
        res->total = hs.n_queries;
        gen_batch gb;
        const size_t S = (size_t)gs->samples;
        st = gen_batch_init(&gb, hs.n_queries * S, err);
        for (size_t q = 0; q < hs.n_queries && st == KLD_OK; q++) {
            if (!take(o, q, res->total)) continue;
            char *qt = kld_hashhop_query_text(&hs, q);
            if (!qt) st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
            else gen_batch_add(&gb, gs, q, q, qt, true, 16 + 4, quote);
        }
        if (st == KLD_OK) st = gen_batch_run(&gb, o, lm, gs, task, err);
        for (size_t k0 = 0; k0 + S <= gb.done && st == KLD_OK; k0 += S) {
            const size_t q = gb.index[k0];
            size_t c = 0;
            for (size_t k = k0; k < k0 + S; k++) {
                /* the stop string was cut off: put the quote back for the rule */
                const char *text = gb.texts[k];
                size_t tl = strlen(text);
                char *withq = malloc(tl + 2);
                c += withq && (memcpy(withq, text, tl), withq[tl] = '\'', withq[tl + 1] = 0, kld_hashhop_correct(&hs, q, withq));
                free(withq);
            }
            took(res, q, c > 0);
            json_t *rec = json_pack("{s:s, s:s, s:s, s:b}", "key", hs.keys[q], "target", hs.targets[q],
                                    "response", gb.texts[k0], "correct", c > 0);
            add_samples(rec, &gb, k0, gs->samples, c);
            json_array_append_new(items, rec);
        }
        gen_batch_free(&gb);
        kld_hashhop_free(&hs);
        return st;
    }
    json_t *data = NULL, *answers = NULL;
    if (!strcmp(task, "gsm8k")) snprintf(path, sizeof path, "%s/gsm8k/test.jsonl", o->data_dir);
    else if (!strcmp(task, "ifeval")) snprintf(path, sizeof path, "%s/ifeval/input_data.jsonl", o->data_dir);
    else if (!strcmp(task, "humaneval")) snprintf(path, sizeof path, "%s/humaneval/HumanEval.jsonl.gz", o->data_dir);
    else if (!strncmp(task, "bfcl_", 5)) snprintf(path, sizeof path, "%s/bfcl/BFCL_v4_%s.json", o->data_dir, task + 5);
    else return kld_fail(err, KLD_ERR_ARG, "cap: unknown task '%s' (mmlu, gsm8k, ifeval, humaneval, bfcl)", task);
    if ((st = kld_cap_read_jsonl(path, &data, err))) return st;
    const bool bf = !strncmp(task, "bfcl_", 5);
    if (bf) {
        snprintf(path, sizeof path, "%s/bfcl/possible_answer/BFCL_v4_%s.json", o->data_dir, task + 5);
        if ((st = kld_cap_read_jsonl(path, &answers, err))) return json_decref(data), st;
    }
    /* GSM8K 8-shot: the first 8 problems are the exemplars (the data has no
     * train split), so they are not scored */
    const bool shots8 = !strcmp(task, "gsm8k") && o->gsm8k_8shot;
    const size_t skip = shots8 && json_array_size(data) > KLD_GSM8K_SHOTS ? KLD_GSM8K_SHOTS : 0;
    const size_t size = json_array_size(data) - skip;
    res->total = n_items < size ? n_items : size;
    static const char *const he_stops[] = {"\ndef ", "\nclass ", "\nif __name__", "\nprint(", "\n#", NULL};
    static const char *const qa_stops[] = {"\n\nQuestion:", NULL};
    static const char *const shot_stops[] = {"\n\nQuestion:", "Question:", NULL};
    const bool he = !strcmp(task, "humaneval"), gsm = !strcmp(task, "gsm8k");
    const bool use_chat = chat && lm->chat_template && !he && !shots8;
    /* every prompt first, then all generated together (--batch in flight), then scored in item order */
    gen_batch gb;
    const size_t S = (size_t)gs->samples;
    if ((st = gen_batch_init(&gb, res->total * S, err))) {
        gen_batch_free(&gb);
        return json_decref(data), json_decref(answers), st;
    }
    for (size_t i = 0; i < res->total && st == KLD_OK; i++) {
        if (!take(o, i, res->total)) continue;
        const json_t *d = json_array_get(data, skip + pick(i, n_items, size));
        char *user = NULL, *prompt = NULL;
        bool add_bos = true;
        if (gsm) {
            const char *q = json_string_value(json_object_get(d, "question"));
            if (shots8) user = kld_gsm8k_fewshot_prompt(data, KLD_GSM8K_SHOTS, q ? q : "");
            else if (use_chat) user = kld_strdup(q ? q : "");
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
            if (!(prompt = kld_strdup(user))) st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
            add_bos = true;
        } else if (st == KLD_OK) st = build_prompt(lm, use_chat, o->thinking, user, &prompt, &add_bos, err);
        if (st == KLD_OK)
            gen_batch_add(&gb, gs, i, skip + pick(i, n_items, size), prompt, add_bos, o->max_new,
                          he ? he_stops : shots8 ? shot_stops : gsm && !use_chat ? qa_stops : NULL);
        else
            free(prompt);
        free(user);
    }
    if (st == KLD_OK) st = gen_batch_run(&gb, o, lm, gs, task, err);
    for (size_t k0 = 0; k0 + S <= gb.done && st == KLD_OK; k0 += S) {
        const size_t i = gb.index[k0], ix = skip + pick(i, n_items, size);
        const json_t *d = json_array_get(data, ix);
        size_t c = 0;
        char *first = NULL;
        for (size_t k = k0; k < k0 + S && st == KLD_OK; k++) {
            char *text = scored_text(&gb, k);
            bool ok = false;
            st = text ? score_text(o, task, d, answers, ix, text, &ok, err) : kld_fail(err, KLD_ERR_NOMEM, "out of memory");
            c += ok;
            if (k == k0) first = text;
            else free(text);
        }
        if (st == KLD_OK) {
            json_t *rec = json_pack("{s:I, s:s, s:b}", "item", (json_int_t)ix, "response", first, "correct", c > 0);
            if (rec && strcmp(first, gb.texts[k0])) json_object_set_new(rec, "raw_response", json_string(gb.texts[k0]));
            if (rec && bf) json_object_set_new(rec, "category", json_string(task + 5));
            add_samples(rec, &gb, k0, gs->samples, c);
            if (rec) json_array_append_new(items, rec);
            took(res, i, c > 0);
        }
        free(first);
    }
    gen_batch_free(&gb);
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
    char data[4096];
    kld_status dst = kld_cap_data_dir(o.data_dir, data, sizeof data, err);
    if (dst) return dst;
    o.data_dir = data;
    if (o.n <= 0) o.n = 10;
    if (o.max_new <= 0) o.max_new = 128;
    if (o.samples <= 0) o.samples = 1;
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
    /* the tasks' data and IFEval's langdetect profiles: said before any model
     * loads, not at the first item or response that needs them */
    const kld_langdetect *ld;
    kld_status st = kld_cap_data_check(o.data_dir, o.tasks, err);
    if (!st && task_listed(o.tasks, "ifeval")) st = kld_langdetect_shared(&ld, err);
    if (st != KLD_OK) return st;
    int n_arms = 1;
    kld_cap_lm lm[2];
    st = kld_cap_open_models(&o, lm, &n_arms, err);
    if (st != KLD_OK) return st;
    if (task_listed(o.tasks, "hashhop")) st = hashhop_size(&o, lm, n_arms, err);
    /* the configuration: known before the first item (a checkpoint is bound to it) */
    const char *run_tasks[8];
    size_t n_run = 0;
    for (int t = 0; all[t]; t++)
        if (task_listed(o.tasks, all[t])) run_tasks[n_run++] = all[t];
    json_t *config = NULL;
    if (st == KLD_OK && !(config = kld_cap_run_config(&o, &lm[0], n_arms == 2 ? &lm[1] : NULL, run_tasks, n_run)))
        st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    o.ckpt = NULL;
    if (st == KLD_OK && o.checkpoint_path) {
        st = kld_cap_ckpt_open(o.checkpoint_path, o.resume, config, &o.ckpt, err);
        if (st == KLD_OK && o.resume && !o.quiet)
            fprintf(stderr, "cap: resuming from %s: %zu responses kept\n", o.checkpoint_path,
                    kld_cap_ckpt_resumed(o.ckpt));
    }
    /* the arm's name: its model, or the reference's weights (self-flag) */
    const char *arm_name = o.arm_path ? o.arm_path : o.ref_path;
    kld_cap_unit units[16];
    size_t n_units = 0;
    memset(units, 0, sizeof units);
    for (int t = 0; all[t] && st == KLD_OK; t++) {
        if (!task_listed(o.tasks, all[t])) continue;
        if (!o.quiet) fprintf(stderr, "cap: %s ...\n", all[t]);
        const bool bfcl = !strcmp(all[t], "bfcl");
        for (int c = 0; c < (bfcl ? 4 : 1) && st == KLD_OK; c++) {
            kld_cap_unit *u = &units[n_units++];
            snprintf(u->task, sizeof u->task, "%s", all[t]);
            if (bfcl) snprintf(u->name, sizeof u->name, "bfcl_%s", kld_cap_bfcl_categories[c]);
            else snprintf(u->name, sizeof u->name, "%s", all[t]);
            for (int a = 0; a < n_arms && st == KLD_OK; a++) {
                arm_items res = {0};
                u->items[a] = json_array();
                const gen_setup gs = {a == 1 && o.has_arm_sampler ? &o.arm_sampler : &o.sampler, o.samples,
                                      o.thinking_budget, a};
                st = run_task(&o, &lm[a], &gs, u->name, (size_t)o.n, &res, u->items[a], err);
                u->pos[a] = res.pos;
                u->total = res.total;
                free(res.ok);
            }
        }
    }
    const bool interrupted = o.stop && *o.stop;
    kld_cap_ckpt_close(o.ckpt);
    json_t *head = NULL, *arm = NULL;
    if (st == KLD_OK) {
        head = json_pack("{s:s, s:I, s:I, s:b}", "ref", o.ref_path, "n", (json_int_t)o.n, "max_new",
                         (json_int_t)o.max_new, "chat", !o.no_chat);
        arm = n_arms == 2 ? json_string(arm_name) : NULL;
        if (!head || (n_arms == 2 && !arm)) st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    }
    if (st == KLD_OK && (o.shard.n || o.partial_path)) {
        uint8_t hash[32];
        char hex[65];
        kld_cap_eval_hash(config, hash);
        kld_hex_digest(hash, hex);
        kld_shard sh = o.shard.n ? o.shard : (kld_shard){0, 1, KLD_SHARD_MOD};
        json_object_set_new(config, "shard", json_pack("{s:i, s:i, s:s, s:s}", "k", (int)sh.k, "n", (int)sh.n,
                                                       "mode", kld_shard_mode_name(sh.mode), "eval_hash", hex));
    }
    if (st == KLD_OK && o.partial_path) {
        if (interrupted)
            st = kld_fail(err, KLD_ERR_INTERRUPTED, "%s: the run was stopped early; a partial must hold every "
                          "item of its shard (run the shard again)", o.partial_path);
        else
            st = kld_cap_partial_write(o.partial_path, units, n_units, n_arms, head, arm, config, err);
    }
    for (int a = 0; a < 2; a++) kld_cap_lm_close(&lm[a]);
    if (st == KLD_OK) {
        *report = kld_cap_build_report(units, n_units, n_arms, head, arm, interrupted, config);
        head = arm = config = NULL;
        if (!*report) st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    }
    json_decref(head);
    json_decref(arm);
    json_decref(config);
    kld_cap_units_free(units, n_units);
    return st;
}
