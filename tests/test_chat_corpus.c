/* test_chat_corpus.c — JSONL corpora mixing {"text": …} and
 * {"messages": […]} lines on a model with a chat template (rand-llama-hf
 * with a tokenizer_config.json written here): a conversation becomes the
 * text its template renders (written out by hand below) tokenized with its
 * specials parsed and BOS not doubled; a second model whose template
 * renders differently is an error naming the first such document; kl's
 * JSON and text reports count the documents of each form; dump and imatrix
 * read the same corpus (dump's tokens.bin holds the rendered tokens); bad
 * lines and a model without a template are errors naming the file, the
 * line and the field. */
#include "testlib.h"

#include "chat/chat.h"
#include "engine/engine.h"
#include "eval/corpus.h"
#include "eval/plan.h"
#include "eval/strata.h"
#include "tokenizer/tokenizer.h"

#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define HF_MODEL KT_SHARED "/models/rand-llama-hf"

static const char *kldeval;
#define P 1024 /* our paths: the build folder + a short name */
static char dir_a[P], dir_b[P], dir_c[P], corpus[P];

/* A: writes BOS itself and EOS after each turn; B: neither (the tokenizer
 * adds BOS) and other markers. */
static const char *TMPL_A =
    "{{ bos_token }}{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}{{ eos_token }}\n"
    "{% endfor %}{% if add_generation_prompt %}[assistant] {% endif %}";
static const char *TMPL_B = "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}\n{% endfor %}";

static const char *CORPUS =
    "{\"text\": \"Once upon a time there was a little cat.\"}\n"
    "\n"
    "{\"messages\": [{\"role\": \"user\", \"content\": \"Hello, who are you?\"}, "
    "{\"role\": \"assistant\", \"content\": \"I am a small model.\"}]}\n"
    "{\"text\": \"The dog ran home.\"}\n"
    "{\"messages\": [{\"role\": \"user\", \"content\": \"Count to three.\"}, "
    "{\"role\": \"assistant\", \"content\": \"One, two, three.\"}]}\n";
/* Document 2 (line 3) as TMPL_A renders it, by hand. */
static const char *DOC2_A = "<s>[user] Hello, who are you?</s>\n[assistant] I am a small model.</s>\n";

static int run(const char *args, char **out) {
    char cmd[16 * P];
    snprintf(cmd, sizeof cmd, "'%s' %s 2>&1", kldeval, args);
    return kt_run_capture(cmd, out);
}

/* An HF folder: rand-llama-hf's files linked, plus a tokenizer_config.json
 * naming BOS and EOS (as transformers writes it) with tmpl as its
 * chat_template (NULL: none). */
static void make_model(char *dir, const char *name, const char *tmpl) {
    char src[PATH_MAX], path[PATH_MAX * 2];
    CHECK(realpath(HF_MODEL, src) != NULL, "realpath %s", HF_MODEL);
    snprintf(dir, P, "%s/chat_corpus_%s", kt_build_dir(), name);
    mkdir(dir, 0777);
    static const char *const files[] = {"config.json", "model.safetensors", "tokenizer.json"};
    for (int i = 0; i < 3; i++) {
        char target[PATH_MAX * 2];
        snprintf(target, sizeof target, "%s/%s", src, files[i]);
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
        CHECK(symlink(target, path) == 0, "symlink %s", path);
    }
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    unlink(path);
    json_t *j = json_pack("{s:s,s:s}", "bos_token", "<s>", "eos_token", "</s>");
    if (tmpl) json_object_set_new(j, "chat_template", json_string(tmpl));
    CHECK(json_dump_file(j, path, 0) == 0, "write %s", path);
    json_decref(j);
}

/* The text of window w's tokens of one role, each as it reads inside the
 * text (kld_tok_decode with KLD_TOK_DECODE_INNER), one after the other. */
static void role_text(const kld_tokenizer *tok, const kld_window *w, int role, char *buf, size_t cap) {
    size_t at = 0;
    buf[0] = '\0';
    for (int64_t i = 0; i < w->len; i++) {
        if (!w->roles || w->roles[i] != role) continue;
        char *t = NULL;
        size_t n = 0;
        if (kld_tok_decode(tok, &w->tokens[i], 1, KLD_TOK_DECODE_INNER, &t, &n, NULL) == KLD_OK && at + n < cap) {
            memcpy(buf + at, t, n);
            at += n;
            buf[at] = '\0';
        }
        free(t);
    }
}

/* Turn roles (the role strata): in DOC2_A the user's content and its </s>
 * are the user's, the assistant's likewise; the template's "[user] "
 * headers, BOS and the newlines belong to no turn; a text line has none. */
static void check_roles(const kld_tokenizer *tok, const kld_plan *pl) {
    char user[512], assistant[512], none[512];
    const kld_window *w = &pl->windows[1];
    role_text(tok, w, KLD_ROLE_USER, user, sizeof user);
    role_text(tok, w, KLD_ROLE_ASSISTANT, assistant, sizeof assistant);
    role_text(tok, w, KLD_ROLE_NONE, none, sizeof none);
    CHECK(!strcmp(user, " Hello, who are you?</s>") || !strcmp(user, "Hello, who are you?</s>"),
          "the user's turn: '%s'", user);
    CHECK(!strcmp(assistant, " I am a small model.</s>") || !strcmp(assistant, "I am a small model.</s>"),
          "the assistant's turn: '%s'", assistant);
    CHECK(strstr(none, "[user]") && strstr(none, "[assistant]") && !strstr(none, "Hello") && !strstr(none, "model"),
          "outside the turns: '%s'", none);
    size_t with_role = 0;
    for (int64_t i = 0; pl->windows[0].roles && i < pl->windows[0].len; i++) with_role += pl->windows[0].roles[i] != 0;
    CHECK(pl->windows[0].roles && with_role == 0, "a text line: no roles (%zu)", with_role);
}

/* The corpus on model A through the library: documents, BOS handling and
 * the plan's token ids against rendering + tokenizing by hand. */
static void test_library(void) {
    kld_error err = {0};
    kld_model *m = NULL;
    kld_tokenizer *tok = NULL;
    kld_corpus *c = NULL;
    CHECK_OK(kld_model_open(dir_a, NULL, &m, &err), err);
    if (!m) return;
    CHECK_OK(kld_tok_open_source(kld_model_source(m), &tok, &err), err);
    CHECK_OK(kld_corpus_load_text(corpus, "auto", &c, &err), err);
    if (!tok || !c) goto done;
    CHECK(c->n_docs == 4 && c->n_text_docs == 2 && c->n_chat_docs == 2, "docs %zu text %zu chat %zu",
          c->n_docs, c->n_text_docs, c->n_chat_docs);
    CHECK(c->docs[1] == NULL, "a conversation has no text before rendering");
    CHECK_OK(kld_corpus_chat_with(c, false, kld_model_source(m), tok, &err), err);
    CHECK(c->docs[1] && !strcmp(c->docs[1], DOC2_A), "document 2 rendered: '%s'", c->docs[1]);
    CHECK(!c->doc_add_bos[1] && c->doc_add_bos[0], "BOS: the template writes it, the text line gets it");
    CHECK(c->doc_line[1] == 3 && c->doc_line[2] == 4, "lines %zu %zu", c->doc_line[1], c->doc_line[2]);

    kld_plan pl;
    kld_plan_opts po = {KLD_CHUNKING_DOC, 256, 0, 0, 0, false, 32000};
    CHECK_OK(kld_plan_from_corpus(c, tok, &po, &pl, &err), err);
    if (err.msg[0]) goto done;
    CHECK(pl.n_windows == 4, "%zu windows", pl.n_windows);
    kld_tok_ids want = {0}, doubled = {0}, text = {0};
    CHECK_OK(kld_tok_encode(tok, DOC2_A, strlen(DOC2_A), KLD_TOK_PARSE_SPECIAL, &want, &err), err);
    CHECK_OK(kld_tok_encode(tok, DOC2_A, strlen(DOC2_A), KLD_TOK_PARSE_SPECIAL | KLD_TOK_ADD_SPECIAL,
                            &doubled, &err), err);
    const char *t1 = "Once upon a time there was a little cat.";
    CHECK_OK(kld_tok_encode(tok, t1, strlen(t1), KLD_TOK_ADD_SPECIAL, &text, &err), err);
    const kld_window *w = &pl.windows[1];
    CHECK(w->len == (int64_t)want.n && !memcmp(w->tokens, want.ids, want.n * sizeof *want.ids),
          "document 2: %lld tokens, by hand %zu", (long long)w->len, want.n);
    int32_t bos = kld_tok_bos(tok), eos = kld_tok_eos(tok);
    CHECK(want.n > 3 && want.ids[0] == bos && want.ids[1] != bos, "one BOS first (%d %d)", want.ids[0],
          want.ids[1]);
    CHECK(doubled.n == want.n + 1, "adding specials as well would double BOS (%zu vs %zu)", doubled.n,
          want.n);
    size_t n_eos = 0;
    for (size_t i = 0; i < want.n; i++) n_eos += want.ids[i] == eos;
    CHECK(n_eos == 2, "the template's </s> parsed as EOS twice (%zu)", n_eos);
    CHECK(pl.windows[0].len == (int64_t)text.n &&
              !memcmp(pl.windows[0].tokens, text.ids, text.n * sizeof *text.ids),
          "a text line as before");
    check_roles(tok, &pl);
    kld_tok_ids all = {0};
    CHECK_OK(kld_corpus_encode(c, tok, &all, &err), err);
    CHECK(all.n > text.n + want.n && !memcmp(all.ids + text.n, want.ids, want.n * sizeof *want.ids),
          "kld_corpus_encode: documents one after the other");
    kld_tok_ids_free(&all);
    kld_tok_ids_free(&want);
    kld_tok_ids_free(&doubled);
    kld_tok_ids_free(&text);
    kld_plan_free(&pl);

    /* template B: the other arm must render the same text */
    kld_chat_template tb = {.text = (char *)TMPL_B, .bos = "<s>", .eos = "</s>", .origin = "B"};
    kld_status st = kld_corpus_check_chat(c, &tb, "model-b", &err);
    CHECK(st == KLD_ERR_MISMATCH && strstr(err.msg, ":3: document 2 renders differently") &&
              strstr(err.msg, "model-b"),
          "different template: %s", err.msg);
    err.msg[0] = '\0';
    kld_chat_template ta = {.text = (char *)TMPL_A, .bos = "<s>", .eos = "</s>", .origin = "A"};
    CHECK_OK(kld_corpus_check_chat(c, &ta, "model-a2", &err), err);
    /* the same text without its BOS decision is still a difference */
    kld_chat_template tn = {.text = (char *)TMPL_A, .bos = "", .eos = "</s>", .origin = "A-no-bos"};
    st = kld_corpus_check_chat(c, &tn, "model-x", &err);
    CHECK(st == KLD_ERR_MISMATCH && strstr(err.msg, "document 2"), "BOS piece differs: %s", err.msg);
done:
    kld_corpus_free(c);
    kld_tok_free(tok);
    kld_model_close(m);
}

static void expect_load_error(const char *name, const char *line, const char *want) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/chat_corpus_%s.jsonl", kt_build_dir(), name);
    char text[1024];
    snprintf(text, sizeof text, "{\"text\": \"fine\"}\n%s\n", line);
    kt_write_file(path, text, strlen(text));
    kld_corpus *c = NULL;
    kld_error err = {0};
    kld_status st = kld_corpus_load_text(path, "auto", &c, &err);
    CHECK(st == KLD_ERR_FORMAT && strstr(err.msg, path) && strstr(err.msg, ":2: ") && strstr(err.msg, want),
          "%s: %s", name, err.msg);
    kld_corpus_free(c);
}

static void test_bad_lines(void) {
    expect_load_error("both", "{\"text\": \"a\", \"messages\": [{\"role\": \"user\", \"content\": \"b\"}]}",
                      "both fields \"text\" and \"messages\"");
    expect_load_error("neither", "{\"role\": \"user\"}", "neither field \"text\" nor \"messages\"");
    expect_load_error("no_content", "{\"messages\": [{\"role\": \"user\"}]}",
                      "messages[0] has no string field \"content\"");
    expect_load_error("no_role", "{\"messages\": [{\"content\": \"x\"}, 3]}",
                      "messages[0] has no string field \"role\"");
    expect_load_error("not_array", "{\"messages\": \"hi\"}", "field \"messages\" is not a non-empty array");
}

/* --strata on a chat corpus brings the role strata; --score-only
 * role:assistant equals that stratum of the full run. */
static void test_cli_roles(void) {
    char args[8 * P], full[P], only[P], *out;
    snprintf(full, sizeof full, "%s/chat_corpus_roles.json", kt_build_dir());
    snprintf(only, sizeof only, "%s/chat_corpus_assistant.json", kt_build_dir());
    snprintf(args, sizeof args, "kl -m '%s' --lever kv=q4_0 --corpus '%s' --ctx 64 --quiet --no-db --strata "
             "'any=.' --json '%s'", dir_a, corpus, full);
    int rc = run(args, &out);
    CHECK(rc == 0 && strstr(out, "role:assistant"), "kl --strata on a chat corpus: %d %.2000s", rc, out);
    free(out);
    snprintf(args, sizeof args, "kl -m '%s' --lever kv=q4_0 --corpus '%s' --ctx 64 --quiet --no-db "
             "--score-only role:assistant --json '%s'", dir_a, corpus, only);
    rc = run(args, &out);
    CHECK(rc == 0, "--score-only role:assistant: %d %.2000s", rc, out);
    free(out);
    json_error_t je;
    json_t *a = json_load_file(full, 0, &je), *b = json_load_file(only, 0, &je);
    const json_t *st = json_object_get(json_object_get(a, "strata"), "role:assistant");
    double n = json_number_value(json_object_get(st, "n_positions"));
    double mean = json_number_value(json_object_get(json_object_get(st, "kld"), "mean"));
    /* " I am a small model." and </s>: at least 6 tokens, in two conversations */
    CHECK(n >= 12 && mean > 0 && json_number_value(json_object_get(b, "n_positions")) == n &&
              json_number_value(json_object_get(json_object_get(b, "kld"), "mean")) == mean,
          "role:assistant: %g positions, mean %.17g; scored alone: %g, %.17g", n, mean,
          json_number_value(json_object_get(b, "n_positions")),
          json_number_value(json_object_get(json_object_get(b, "kld"), "mean")));
    double nu = json_number_value(json_object_get(json_object_get(json_object_get(a, "strata"), "role:user"),
                                                  "n_positions"));
    CHECK(nu >= 8 && nu + n < json_number_value(json_object_get(a, "n_positions")),
          "role:user %g positions, the turns fewer than all positions", nu);
    json_decref(a);
    json_decref(b);
}

static void test_cli(void) {
    char args[8 * P], json_path[P], *out;
    snprintf(json_path, sizeof json_path, "%s/chat_corpus_kl.json", kt_build_dir());
    snprintf(args, sizeof args, "kl -m '%s' --lever act=q8 --corpus '%s' --ctx 64 --quiet --json '%s'",
             dir_a, corpus, json_path);
    int rc = run(args, &out);
    CHECK(rc == 0 && strstr(out, "(2 text + 2 messages documents; chat template:"),
          "kl text report: %d %.2000s", rc, out);
    free(out);
    json_error_t je;
    json_t *j = rc == 0 ? json_load_file(json_path, 0, &je) : NULL;
    const json_t *co = json_object_get(json_object_get(j, "config"), "corpus");
    CHECK(json_integer_value(json_object_get(co, "documents_text")) == 2 &&
              json_integer_value(json_object_get(co, "documents_messages")) == 2 &&
              strstr(json_string_value(json_object_get(co, "chat_template")) ?: "", "tokenizer_config.json"),
          "kl JSON counts");
    json_decref(j);

    test_cli_roles();

    snprintf(args, sizeof args, "kl -m '%s' --arm '%s' --corpus '%s' --ctx 64 --quiet", dir_a, dir_b, corpus);
    rc = run(args, &out);
    CHECK(rc != 0 && strstr(out, ":3: document 2 renders differently") && strstr(out, dir_b),
          "two templates: %d %s", rc, out);
    free(out);
    snprintf(args, sizeof args, "kl -m '%s' --lever act=q8 --corpus '%s' --ctx 64 --quiet", dir_c, corpus);
    rc = run(args, &out);
    CHECK(rc != 0 && strstr(out, ":3: field \"messages\"") && strstr(out, "has no chat template"),
          "no template: %d %s", rc, out);
    free(out);

    char dump_dir[P];
    snprintf(dump_dir, sizeof dump_dir, "%s/chat_corpus_dump", kt_build_dir());
    snprintf(args, sizeof args, "rm -rf '%s'", dump_dir);
    CHECK(system(args) == 0, "rm");
    snprintf(args, sizeof args, "dump -m '%s' --corpus '%s' --ctx 16 --out '%s' --quiet", dir_a, corpus, dump_dir);
    rc = run(args, &out);
    CHECK(rc == 0, "dump: %d %s", rc, out);
    free(out);
    char path[PATH_MAX * 2];
    snprintf(path, sizeof path, "%s/manifest.json", dump_dir);
    j = rc == 0 ? json_load_file(path, 0, &je) : NULL;
    CHECK(strstr(json_string_value(json_object_get(j, "windows")) ?: "", "documents: 2 text, 2 messages"),
          "the manifest's windows note records the forms");
    json_decref(j);
    /* tokens.bin: the stream of the rendered documents */
    snprintf(path, sizeof path, "%s/tokens.bin", dump_dir);
    size_t n = 0;
    char *bin = rc == 0 ? kt_read_file(path, &n) : NULL;
    kld_error err = {0};
    kld_model *m = NULL;
    kld_tokenizer *tok = NULL;
    kld_corpus *c = NULL;
    kld_tok_ids all = {0};
    if (bin && !kld_model_open(dir_a, NULL, &m, &err) && !kld_tok_open_source(kld_model_source(m), &tok, &err) &&
        !kld_corpus_load_text(corpus, "jsonl", &c, &err) &&
        !kld_corpus_chat_with(c, false, kld_model_source(m), tok, &err))
        CHECK_OK(kld_corpus_encode(c, tok, &all, &err), err);
    CHECK(bin && n % 64 == 0 && n / 4 <= all.n && n >= 64 && !memcmp(bin, all.ids, n),
          "tokens.bin (%zu bytes) = the rendered stream's first windows (%zu tokens): %s", n, all.n, err.msg);
    free(bin);
    kld_tok_ids_free(&all);
    kld_corpus_free(c);
    kld_tok_free(tok);
    kld_model_close(m);

    char imx[P];
    snprintf(imx, sizeof imx, "%s/chat_corpus.imatrix", kt_build_dir());
    snprintf(args, sizeof args, "imatrix -m '%s' --corpus '%s' --ctx 16 -o '%s'", dir_a, corpus, imx);
    rc = run(args, &out);
    CHECK(rc == 0 && strstr(out, "4 documents (2 text, 2 messages)"), "imatrix: %d %s", rc, out);
    free(out);
    snprintf(args, sizeof args, "imatrix -m '%s' --corpus '%s' --ctx 16 -o '%s'", dir_b, corpus, imx);
    rc = run(args, &out);
    CHECK(rc == 0, "imatrix with template B: %d %s", rc, out);
    free(out);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_chat_corpus KLDEVAL\n");
        return 2;
    }
    kldeval = argv[1];
    kld_kernels_init();
    make_model(dir_a, "a", TMPL_A);
    make_model(dir_b, "b", TMPL_B);
    make_model(dir_c, "none", NULL);
    snprintf(corpus, sizeof corpus, "%s/chat_corpus.jsonl", kt_build_dir());
    kt_write_file(corpus, CORPUS, strlen(CORPUS));
    test_library();
    test_bad_lines();
    test_cli();
    return kt_finish();
}
