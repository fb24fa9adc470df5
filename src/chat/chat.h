/* chat.h — chat templates, for cap's prompts and eval's chat corpora (a
 * module of its own so that both use it and neither reaches into the
 * other): the Jinja subset that models' own templates (GGUF
 * tokenizer.chat_template, HF tokenizer_config.json) are written in,
 * rendered with Hugging Face apply_chat_template semantics: variables
 * messages (a list of {role, content}), add_generation_prompt, bos_token,
 * eos_token; trim_blocks and lstrip_blocks on, as transformers sets them.
 *
 * Supported: text, {{ }}, {% if/elif/else %}, {% for x in … %} (with
 * loop.index/index0/first/last/length/revindex, else), {% set %} (also
 * ns.attr with namespace()), {# #}, whitespace control (-), literals,
 * lists, dicts, attribute/item access, slices, and/or/not/in/is, ==…>=,
 * + - * / // % ~, a if c else b, filters (trim length count upper lower
 * tojson string int first last join default capitalize list reverse
 * replace), tests (defined undefined none string number mapping sequence
 * iterable true false even odd eq), string methods (strip lstrip rstrip
 * startswith endswith split upper lower replace title), dict methods
 * (items keys values get), raise_exception, range, namespace. Anything
 * else is KLD_ERR_UNSUPPORTED naming the construct. */
#ifndef KLD_CHAT_CHAT_H
#define KLD_CHAT_CHAT_H

#include "common/common.h"
#include "io/source.h"
#include "tokenizer/tokenizer.h"

#include <jansson.h>

typedef struct kld_chat_opts {
    const json_t *messages;     /* [{role, content}, ...] */
    bool add_generation_prompt;
    const char *bos_token, *eos_token; /* NULL: "" */
    const json_t *extra;        /* more variables (an object), may be NULL */
} kld_chat_opts;

/* Renders template with opts into *out (malloc'd). A template's
 * raise_exception(...) is KLD_ERR_ARG with its message. */
kld_status kld_chat_render(const char *tmpl, const kld_chat_opts *opts, char **out, kld_error *err);

/* True when rendered text already begins with bos_token (then the
 * tokenizer must not add another BOS). */
bool kld_chat_has_bos(const char *rendered, const char *bos_token);

/* chat_source.c: a model's template and the pieces it is rendered with. */
typedef struct kld_chat_template {
    char *text;         /* NULL: the model has none */
    char *bos, *eos;    /* the tokenizer's BOS/EOS pieces ("" without one) */
    char origin[4200];  /* where text came from, for messages (a path + the key) */
} kld_chat_template;

/* GGUF tokenizer.chat_template, else tokenizer_config.json's
 * "chat_template" in the model's folder (a string, or the entry named
 * "default" of a list); neither is no template, not an error. tok may be
 * NULL (no BOS/EOS pieces). */
kld_status kld_chat_template_open(const kld_source *src, const kld_tokenizer *tok,
                                  kld_chat_template *out, kld_error *err);
void kld_chat_template_close(kld_chat_template *t);
/* Renders messages with t (KLD_ERR_ARG when t has no text); *add_bos says
 * whether the tokenizer should add BOS: not when the text already begins
 * with it. Tokenize *out with special tokens parsed. */
kld_status kld_chat_apply(const kld_chat_template *t, const json_t *messages,
                          bool add_generation_prompt, char **out, bool *add_bos, kld_error *err);
/* The same with extra template variables (e.g. {"enable_thinking": false};
 * NULL: none). */
kld_status kld_chat_apply_vars(const kld_chat_template *t, const json_t *messages,
                               bool add_generation_prompt, const json_t *extra, char **out,
                               bool *add_bos, kld_error *err);

#endif
