/* fuzz_corpus.c — libFuzzer harness for the corpus reader (eval/corpus.c:
 * plain text and JSONL with {"text"} or {"messages"} lines). The first
 * input byte picks the format (text, jsonl, auto with a .jsonl name); the
 * rest is the file. A JSONL corpus that loads has its conversations
 * rendered with a small ChatML template (the path a chat corpus takes
 * before tokenizing). Every document of a loaded corpus is touched whole. */
#include "eval/corpus.h"
#include "fuzz_common.h"
#include "fuzz_scratch.h"

#include <string.h>

static const char *const CHATML =
    "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    static const char *const formats[3] = {"text", "jsonl", "auto"};
    const char *format = formats[data[0] % 3];
    char path[128];
    snprintf(path, sizeof path, "%s/corpus.%s", fuzz_scratch_dir("corpus"), data[0] % 3 == 2 ? "jsonl" : "txt");
    fuzz_write(path, data + 1, size - 1);
    kld_corpus *c = NULL;
    kld_error err = {0};
    kld_status st = kld_corpus_load_text(path, format, &c, &err);
    fuzz_check_failure(st, &err);
    if (st != KLD_OK) return 0;
    kld_chat_template t = {.text = (char *)CHATML, .bos = "", .eos = ""};
    snprintf(t.origin, sizeof t.origin, "fuzz template");
    st = kld_corpus_render_chat(c, &t, "fuzz", &err);
    fuzz_check_failure(st, &err);
    if (st == KLD_OK) {
        for (size_t i = 0; i < c->n_docs; i++) {
            if (!c->docs[i] || strlen(c->docs[i]) != c->doc_len[i]) abort();
            if (c->doc_len[i]) fuzz_sink ^= (uint8_t)c->docs[i][c->doc_len[i] - 1];
        }
    }
    kld_corpus_free(c);
    return 0;
}
