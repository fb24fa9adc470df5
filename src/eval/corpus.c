/* corpus.c — loads and validates KLD corpora (text, JSONL, int32 ids). */
#include "eval/corpus.h"

#include "io/mapped_file.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CORPUS_MAX_BYTES (1ull << 32) /* 4 GiB of text is far beyond any KLD run */

void kld_hex_digest(const uint8_t d[32], char buf[65]) {
    for (int i = 0; i < 32; i++) snprintf(buf + 2 * i, 3, "%02x", d[i]);
}

static void sha256(const void *data, size_t n, uint8_t out[32]) {
    unsigned int len = 32;
    EVP_Digest(data, n, out, &len, EVP_sha256(), NULL);
}

kld_status kld_sha256_file(const char *path, uint8_t out[32], kld_error *err) {
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return kld_fail(err, KLD_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    /* read(2) into one buffer per call (no static buffer: two files may be
     * hashed at once, see file_hash.c); 1 MiB amortises the system calls */
    const size_t cap = 1u << 20;
    unsigned char *buf = malloc(cap);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!buf || !ctx) {
        free(buf);
        EVP_MD_CTX_free(ctx);
        close(fd);
        return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    }
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
    ssize_t n;
    while ((n = read(fd, buf, cap)) > 0 || (n < 0 && errno == EINTR))
        if (n > 0) EVP_DigestUpdate(ctx, buf, (size_t)n);
    const int read_errno = n < 0 ? errno : 0;
    close(fd);
    free(buf);
    unsigned int len = 32;
    EVP_DigestFinal_ex(ctx, out, &len);
    EVP_MD_CTX_free(ctx);
    if (read_errno) return kld_fail(err, KLD_ERR_IO, "%s: read error: %s", path, strerror(read_errno));
    return KLD_OK;
}

static bool grow(void **p, size_t cap, size_t size) {
    void *q = realloc(*p, cap * size);
    if (q) *p = q;
    return q != NULL;
}

/* A text document (text != NULL) or a conversation (messages, referenced). */
static kld_status add_doc(kld_corpus *c, const char *text, size_t n, json_t *messages,
                          size_t line, size_t *cap, kld_error *err) {
    if (c->n_docs == *cap) {
        size_t nc = *cap ? 2 * *cap : 64;
        if (!grow((void **)&c->docs, nc, sizeof *c->docs) ||
            !grow((void **)&c->doc_len, nc, sizeof *c->doc_len) ||
            !grow((void **)&c->doc_line, nc, sizeof *c->doc_line) ||
            !grow((void **)&c->messages, nc, sizeof *c->messages) ||
            !grow((void **)&c->doc_add_bos, nc, sizeof *c->doc_add_bos))
            return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", c->name);
        *cap = nc;
    }
    size_t d = c->n_docs;
    c->docs[d] = text ? kld_strndup(text, n) : NULL;
    if (text && !c->docs[d]) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", c->name);
    c->doc_len[d] = text ? n : 0;
    c->doc_line[d] = line;
    c->messages[d] = messages ? json_incref(messages) : NULL;
    c->doc_add_bos[d] = true;
    c->n_docs++;
    if (messages) c->n_chat_docs++;
    else c->n_text_docs++;
    return KLD_OK;
}

/* A messages field: a non-empty array of objects with string role and
 * content (other keys pass to the template). */
static kld_status check_messages(const kld_corpus *c, size_t line_no, const json_t *m,
                                 kld_error *err) {
    if (!json_is_array(m) || json_array_size(m) == 0)
        return kld_fail(err, KLD_ERR_FORMAT, "%s:%zu: field \"messages\" is not a non-empty array",
                        c->name, line_no);
    size_t i;
    json_t *e;
    json_array_foreach(m, i, e) {
        if (!json_is_object(e))
            return kld_fail(err, KLD_ERR_FORMAT, "%s:%zu: messages[%zu] is not an object", c->name,
                            line_no, i);
        static const char *const keys[] = {"role", "content"};
        for (int k = 0; k < 2; k++)
            if (!json_is_string(json_object_get(e, keys[k])))
                return kld_fail(err, KLD_ERR_FORMAT, "%s:%zu: messages[%zu] has no string field \"%s\"",
                                c->name, line_no, i, keys[k]);
    }
    return KLD_OK;
}

/* Splits on LF; a CR before the LF is dropped. */
static kld_status split_lines(kld_corpus *c, bool jsonl, kld_error *err) {
    size_t cap = 0, pos = 0, line_no = 0;
    while (pos < c->whole_len) {
        size_t end = pos;
        while (end < c->whole_len && c->whole[end] != '\n') end++;
        size_t n = end - pos;
        line_no++;
        if (n && c->whole[pos + n - 1] == '\r') n--;
        const char *line = c->whole + pos;
        pos = end + 1;
        if (n == 0) continue;
        if (!jsonl) {
            if (line[0] == '#') continue;
            kld_status st = add_doc(c, line, n, NULL, line_no, &cap, err);
            if (st) return st;
            continue;
        }
        json_error_t jerr;
        json_t *o = json_loadb(line, n, JSON_REJECT_DUPLICATES, &jerr);
        if (!o || !json_is_object(o)) {
            json_decref(o);
            return kld_fail(err, KLD_ERR_FORMAT, "%s:%zu: not a JSON object%s%s", c->name, line_no,
                            o ? "" : ": ", o ? "" : jerr.text);
        }
        json_t *t = json_object_get(o, "text"), *m = json_object_get(o, "messages");
        kld_status st = KLD_OK;
        if (t && m)
            st = kld_fail(err, KLD_ERR_FORMAT, "%s:%zu: both fields \"text\" and \"messages\" "
                          "(a line is one or the other)", c->name, line_no);
        else if (!t && !m)
            st = kld_fail(err, KLD_ERR_FORMAT, "%s:%zu: neither field \"text\" nor \"messages\"",
                          c->name, line_no);
        else if (t && !json_is_string(t))
            st = kld_fail(err, KLD_ERR_FORMAT, "%s:%zu: field \"text\" is not a string", c->name,
                          line_no);
        else if (m)
            st = check_messages(c, line_no, m, err);
        if (!st)
            st = t ? add_doc(c, json_string_value(t), json_string_length(t), NULL, line_no, &cap, err)
                   : add_doc(c, NULL, 0, m, line_no, &cap, err);
        json_decref(o);
        if (st) return st;
    }
    if (c->n_docs == 0)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: the corpus has no documents", c->name);
    return KLD_OK;
}

/* The 1-based line holding the first invalid UTF-8 byte. Lines split at
 * '\n' never cut a valid sequence (continuation bytes are >= 0x80), so
 * checking line by line finds the same error as the whole-text check. */
static size_t first_invalid_line(const char *s, size_t n) {
    size_t line = 1;
    for (size_t pos = 0; pos < n; line++) {
        const char *nl = memchr(s + pos, '\n', n - pos);
        size_t end = nl ? (size_t)(nl - s) : n;
        if (!kld_utf8_valid(s + pos, end - pos)) return line;
        pos = end + 1;
    }
    return line;
}

kld_status kld_corpus_load_text(const char *path, const char *format, kld_corpus **out,
                                kld_error *err) {
    *out = NULL;
    kld_corpus *c = calloc(1, sizeof *c);
    if (!c) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    c->kind = KLD_CORPUS_TEXT;
    kld_status st;
    if (path) {
        c->name = kld_strdup(path);
        uint64_t n;
        st = kld_read_file(path, CORPUS_MAX_BYTES, &c->whole, &n, err);
        c->whole_len = (size_t)n;
    } else {
        c->name = kld_strdup("built-in");
        c->whole = kld_strndup((const char *)kld_builtin_corpus, kld_builtin_corpus_len);
        c->whole_len = kld_builtin_corpus_len;
        st = c->whole ? KLD_OK : kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    }
    if (!st && !c->name) st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    if (!st && !kld_utf8_valid(c->whole, c->whole_len))
        st = kld_fail(err, KLD_ERR_FORMAT, "%s: line %zu is not valid UTF-8 text", c->name,
                      first_invalid_line(c->whole, c->whole_len));
    /* a NUL would end the document early for every C-string consumer */
    const char *nul = st ? NULL : memchr(c->whole, 0, c->whole_len);
    if (nul) {
        size_t line = 1;
        for (const char *p = c->whole; p < nul; p++) line += *p == '\n';
        st = kld_fail(err, KLD_ERR_FORMAT, "%s: line %zu holds a NUL byte (byte %zu): not text", c->name,
                      line, (size_t)(nul - c->whole));
    }
    bool jsonl = false;
    if (!st) {
        if (!format || !strcmp(format, "auto")) jsonl = path && kld_ends_with(path, strlen(path), ".jsonl");
        else if (!strcmp(format, "jsonl")) jsonl = true;
        else if (strcmp(format, "text") != 0)
            st = kld_fail(err, KLD_ERR_ARG, "%s: corpus format '%s' (expected auto, text or jsonl)", c->name,
                          format);
    }
    if (!st) {
        sha256(c->whole, c->whole_len, c->sha256);
        st = split_lines(c, jsonl, err);
    }
    if (st) {
        kld_corpus_free(c);
        return st;
    }
    *out = c;
    return KLD_OK;
}

kld_status kld_corpus_load_ids(const char *path, kld_corpus **out, kld_error *err) {
    *out = NULL;
    char *raw;
    uint64_t n;
    kld_status st = kld_read_file(path, CORPUS_MAX_BYTES, &raw, &n, err);
    if (st) return st;
    if (n == 0) {
        free(raw);
        return kld_fail(err, KLD_ERR_FORMAT, "%s: empty file (no ids)", path);
    }
    if (n % 4 != 0) {
        free(raw);
        return kld_fail(err, KLD_ERR_FORMAT, "%s: %llu bytes is not a whole number of int32 ids",
                        path, (unsigned long long)n);
    }
    kld_corpus *c = calloc(1, sizeof *c);
    if (!c) {
        free(raw);
        return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    }
    c->kind = KLD_CORPUS_IDS;
    c->name = kld_strdup(path);
    c->n_ids = (size_t)(n / 4);
    c->ids = malloc(c->n_ids * sizeof *c->ids);
    if (!c->name || !c->ids) {
        free(raw);
        kld_corpus_free(c);
        return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < c->n_ids; i++) c->ids[i] = (int32_t)kld_load_u32(raw + 4 * i);
    sha256(raw, (size_t)n, c->sha256);
    free(raw);
    *out = c;
    return KLD_OK;
}

void kld_corpus_free(kld_corpus *c) {
    if (!c) return;
    for (size_t i = 0; i < c->n_docs; i++) {
        free(c->docs[i]);
        json_decref(c->messages[i]);
    }
    free(c->docs);
    free(c->doc_len);
    free(c->doc_line);
    free(c->messages);
    free(c->doc_add_bos);
    free(c->chat_origin);
    free(c->whole);
    free(c->ids);
    free(c->name);
    free(c);
}
