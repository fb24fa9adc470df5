/* cmd_tokenize.c — `kldeval tokenize`: text to token ids, pieces or counts
 * with the tokenizer of a model or a tokenizer file. */
#include "cli/args.h"
#include "cli/commands.h"
#include "common/common.h"
#include "tokenizer/tokenizer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum out_kind { OUT_IDS, OUT_PIECES, OUT_COUNT } out_kind;

static void usage(FILE *f) {
    fprintf(f,
            "usage: kldeval tokenize -m MODEL_OR_TOKENIZER (--text T | --file F) [flags]\n\n"
            "Encodes text with the tokenizer of a model (.gguf, a Hugging Face folder, a\n"
            "llama2.c model.bin) or of a tokenizer file (tokenizer.json, a vocab-only .gguf,\n"
            "a llama2.c tokenizer.bin).\n\n"
            "  -m, --model PATH    model or tokenizer (required)\n"
            "  --text T            encode the whole string T (it may contain newlines)\n"
            "  --file F            encode each line of F separately (without its newline;\n"
            "                      lines end at LF only), one output line per input line;\n"
            "                      F = - reads standard input\n"
            "  --ids               print space-separated token ids (the default)\n"
            "  --pieces            print the tokens as spelled in the vocabulary, separated by\n"
            "                      spaces; backslash, space and control bytes are written \\xHH\n"
            "  --count             print the number of tokens\n"
            "  --json              print one JSON value per line instead: an array of ids, an\n"
            "                      array of piece strings, or the count\n"
            "  --no-special        add no BOS/EOS or template tokens around the text\n"
            "  --no-parse-special  treat special-token text (\"<s>\", \"<|im_end|>\") as plain\n"
            "                      text, as the kl command does with corpus text; by default it\n"
            "                      becomes the special token (Hugging Face encode semantics)\n"
            "  --threads N         accepted for symmetry with other commands; ignored\n"
            "  -h, --help          this text\n");
}

/* JSON string as JavaScript's JSON.stringify writes it (the form of the
 * reference *.pieces files): raw UTF-8, escapes for quote, backslash and
 * control characters. Bytes that are not UTF-8 are written as \u00XX. */
static void write_json_string(FILE *o, const char *s, size_t n) {
    fputc('"', o);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': fputs("\\\"", o); continue;
        case '\\': fputs("\\\\", o); continue;
        case '\b': fputs("\\b", o); continue;
        case '\f': fputs("\\f", o); continue;
        case '\n': fputs("\\n", o); continue;
        case '\r': fputs("\\r", o); continue;
        case '\t': fputs("\\t", o); continue;
        default: break;
        }
        if (c < 0x20) {
            fprintf(o, "\\u%04x", c);
        } else if (c < 0x80) {
            fputc(c, o);
        } else {
            size_t l = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
            if (l && i + l <= n && kld_utf8_valid(s + i, l)) {
                fwrite(s + i, 1, l, o);
                i += l - 1;
            } else {
                fprintf(o, "\\u%04x", c);
            }
        }
    }
    fputc('"', o);
}

static void plain_piece(FILE *o, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= 0x20 || c == 0x7F || c == '\\') fprintf(o, "\\x%02X", c);
        else fputc(c, o);
    }
}

static void print_result(const kld_tokenizer *t, const kld_tok_ids *ids, out_kind kind, bool json) {
    FILE *o = stdout;
    if (kind == OUT_COUNT) {
        fprintf(o, "%zu\n", ids->n);
        return;
    }
    if (json) fputc('[', o);
    for (size_t i = 0; i < ids->n; i++) {
        if (i) fputc(json ? ',' : ' ', o);
        if (kind == OUT_IDS) {
            fprintf(o, "%d", (int)ids->ids[i]);
            continue;
        }
        size_t len = 0;
        const char *p = kld_tok_piece(t, ids->ids[i], &len);
        if (json) write_json_string(o, p ? p : "", p ? len : 0);
        else plain_piece(o, p ? p : "", p ? len : 0);
    }
    if (json) fputc(']', o);
    fputc('\n', o);
}

/* The whole of path ("-": standard input), or NULL with errno set. */
static char *read_all(const char *path, size_t *n) {
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (len == cap) {
            char *b = cap > SIZE_MAX / 2 ? NULL : realloc(buf, cap * 2);
            if (!b) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = b;
            cap *= 2;
        }
        size_t r = fread(buf + len, 1, cap - len, f);
        len += r;
        if (r == 0) break;
    }
    bool failed = ferror(f);
    int saved = buf ? errno : ENOMEM;
    if (f != stdin) fclose(f);
    if (failed || !buf) {
        free(buf);
        errno = saved;
        return NULL;
    }
    *n = len;
    return buf;
}

int kld_cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *text = NULL, *file = NULL;
    out_kind kind = OUT_IDS;
    bool json = false;
    unsigned flags = KLD_TOK_ADD_SPECIAL | KLD_TOK_PARSE_SPECIAL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--ids")) kind = OUT_IDS;
        else if (!strcmp(a, "--pieces")) kind = OUT_PIECES;
        else if (!strcmp(a, "--count")) kind = OUT_COUNT;
        else if (!strcmp(a, "--json")) json = true;
        else if (!strcmp(a, "--no-special")) flags &= ~(unsigned)KLD_TOK_ADD_SPECIAL;
        else if (!strcmp(a, "--no-parse-special")) flags &= ~(unsigned)KLD_TOK_PARSE_SPECIAL;
        else if (!strcmp(a, "-m") || !strcmp(a, "--model") || !strcmp(a, "--text") ||
                 !strcmp(a, "--file") || !strcmp(a, "--threads")) {
            if (!(v = kld_arg_value(argc, argv, &i))) return 2;
            int64_t n;
            if (!strcmp(a, "--text")) text = v;
            else if (!strcmp(a, "--file")) file = v;
            else if (!strcmp(a, "--threads")) {
                if (!kld_arg_int(a, v, 1, 4096, &n)) return 2;
            } else model = v;
        } else {
            fprintf(stderr, "kldeval tokenize: unknown flag '%s' (see --help)\n", a);
            return 2;
        }
    }
    if (!model) {
        fprintf(stderr, "kldeval tokenize: -m MODEL_OR_TOKENIZER is required (see --help)\n");
        return 2;
    }
    if (!text == !file) {
        fprintf(stderr, "kldeval tokenize: give exactly one of --text and --file\n");
        return 2;
    }
    kld_error err = {0};
    kld_tokenizer *t = NULL;
    if (kld_tok_open_path(model, &t, &err) != KLD_OK) {
        fprintf(stderr, "kldeval tokenize: %s\n", err.msg);
        return 1;
    }
    int rc = 0;
    kld_tok_ids ids = {0};
    if (text) {
        if (kld_tok_encode(t, text, strlen(text), flags, &ids, &err) != KLD_OK) {
            fprintf(stderr, "kldeval tokenize: %s\n", err.msg);
            rc = 1;
        } else {
            print_result(t, &ids, kind, json);
        }
    } else {
        size_t n = 0;
        char *buf = read_all(file, &n);
        if (!buf) {
            fprintf(stderr, "kldeval tokenize: cannot read %s: %s\n", file, strerror(errno));
            rc = 1;
        }
        size_t pos = 0, line = 0;
        while (buf && pos < n) {
            const char *nl = memchr(buf + pos, '\n', n - pos);
            size_t end = nl ? (size_t)(nl - buf) : n;
            line++;
            ids.n = 0;
            if (kld_tok_encode(t, buf + pos, end - pos, flags, &ids, &err) != KLD_OK) {
                fprintf(stderr, "kldeval tokenize: %s line %zu: %s\n", file, line, err.msg);
                rc = 1;
                break;
            }
            print_result(t, &ids, kind, json);
            pos = end + 1;
        }
        free(buf);
    }
    kld_tok_ids_free(&ids);
    kld_tok_free(t);
    if (fflush(stdout) != 0) rc = 1;
    return rc;
}
