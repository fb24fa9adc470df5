/* checkpoint.c — see checkpoint.h. */
#include "cap/checkpoint.h"

#include "cap/units.h"
#include "eval/corpus.h"
#include "eval/merge.h"

#include <errno.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define SCHEMA "kldeval.cap-checkpoint/1"
#define MAX_BYTES (4ull << 30)

struct kld_cap_ckpt {
    char *path;
    FILE *f;
    json_t *kept;   /* key (arm|unit|item|sample|prompt hash) → response text */
    size_t resumed;
};

static void prompt_hash(const char *prompt, char hex[65]) {
    uint8_t d[32];
    unsigned len = 0;
    EVP_Digest(prompt, strlen(prompt), d, &len, EVP_sha256(), NULL);
    kld_hex_digest(d, hex);
}

static void key_of(char *buf, size_t n, int arm, const char *unit, uint64_t item, uint64_t sample,
                   const char *hash) {
    snprintf(buf, n, "%d|%s|%" PRIu64 "|%" PRIu64 "|%s", arm, unit, item, sample, hash);
}

static json_t *header(const json_t *config) {
    uint8_t h[32];
    char hex[65];
    kld_cap_eval_hash(config, h);
    kld_hex_digest(h, hex);
    return json_pack("{s:s, s:s, s:O}", "schema", SCHEMA, "eval_hash", hex, "config", config);
}

static kld_status write_line(kld_cap_ckpt *c, json_t *o, kld_error *err) {
    char *s = o ? json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
    json_decref(o);
    if (!s) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", c->path);
    bool ok = fputs(s, c->f) >= 0 && fputc('\n', c->f) != EOF;
    free(s);
    return ok ? KLD_OK : kld_fail(err, KLD_ERR_IO, "%s: write failed: %s", c->path, strerror(errno));
}

kld_status kld_cap_ckpt_sync(kld_cap_ckpt *c, kld_error *err) {
    if (fflush(c->f) != 0 || fsync(fileno(c->f)) != 0)
        return kld_fail(err, KLD_ERR_IO, "%s: write failed: %s", c->path, strerror(errno));
    return KLD_OK;
}

/* One response line (line_no for messages) into c->kept. */
static kld_status read_response(kld_cap_ckpt *c, const char *line, size_t n, size_t line_no, kld_error *err) {
    json_error_t je;
    json_t *o = json_loadb(line, n, JSON_REJECT_DUPLICATES, &je);
    json_int_t arm = 0, item = 0, sample = 0;
    const char *unit = NULL, *hash = NULL, *text = NULL;
    if (!o || json_unpack(o, "{s:I, s:s, s:I, s:I, s:s, s:s}", "arm", &arm, "unit", &unit, "item", &item,
                          "sample", &sample, "prompt", &hash, "text", &text) != 0 ||
        arm < 0 || arm > 1 || item < 0 || sample < 0 || strlen(hash) != 64) {
        json_decref(o);
        return kld_fail(err, KLD_ERR_FORMAT, "%s:%zu: not a response line (arm 0|1, unit, item, sample, prompt "
                        "hash, text)%s%s", c->path, line_no, o ? "" : ": ", o ? "" : je.text);
    }
    char key[400];
    key_of(key, sizeof key, (int)arm, unit, (uint64_t)item, (uint64_t)sample, hash);
    int rc = json_object_set_new(c->kept, key, json_string(text));
    json_decref(o);
    if (rc) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", c->path);
    c->resumed++;
    return KLD_OK;
}

/* Reads an existing checkpoint: its header must match want (the header of
 * this run); a last line without its newline (a cut write) is dropped and
 * *keep set to the bytes up to it. */
static kld_status load(kld_cap_ckpt *c, const json_t *want, uint64_t *keep, kld_error *err) {
    char *text;
    uint64_t size;
    kld_status st = kld_read_file(c->path, MAX_BYTES, &text, &size, err);
    if (st) return st;
    size_t pos = 0, line_no = 0;
    *keep = 0;
    while (st == KLD_OK && pos < size) {
        const char *nl = memchr(text + pos, '\n', size - pos);
        if (!nl) break; /* a cut last line */
        const size_t n = (size_t)(nl - (text + pos));
        line_no++;
        if (line_no == 1) {
            json_error_t je;
            json_t *h = json_loadb(text + pos, n, JSON_REJECT_DUPLICATES, &je);
            const char *schema = json_string_value(json_object_get(h, "schema"));
            const char *hash = json_string_value(json_object_get(h, "eval_hash"));
            if (!schema || strcmp(schema, SCHEMA) || !hash || !json_is_object(json_object_get(h, "config"))) {
                st = kld_fail(err, KLD_ERR_FORMAT, "%s: not a capability checkpoint (first line: schema \"%s\", "
                              "eval_hash, config)", c->path, SCHEMA);
            } else if (strcmp(hash, json_string_value(json_object_get(want, "eval_hash")))) {
                char why[300];
                json_t *a = json_deep_copy(json_object_get(h, "config")),
                       *b = json_deep_copy(json_object_get(want, "config"));
                json_object_del(a, "data");
                json_object_del(b, "data");
                kld_eval_first_difference(b, a, why, sizeof why);
                json_decref(a);
                json_decref(b);
                st = kld_fail(err, KLD_ERR_MISMATCH, "%s: a checkpoint of another capability run (this run vs the checkpoint: %s)",
                              c->path, why);
            }
            json_decref(h);
        } else {
            st = read_response(c, text + pos, n, line_no, err);
        }
        pos += n + 1;
        *keep = pos;
    }
    if (st == KLD_OK && line_no == 0)
        st = kld_fail(err, KLD_ERR_FORMAT, "%s: empty (not a capability checkpoint)", c->path);
    free(text);
    return st;
}

kld_status kld_cap_ckpt_check(const char *path, bool resume, kld_error *err) {
    struct stat sb;
    const bool exists = stat(path, &sb) == 0;
    if (resume && !exists)
        return kld_fail(err, KLD_ERR_IO, "%s: no such checkpoint (--checkpoint FILE starts one)", path);
    if (!resume && exists)
        return kld_fail(err, KLD_ERR_ARG, "%s: exists (--resume %s continues it; remove it to start over)", path,
                        path);
    return KLD_OK;
}

kld_status kld_cap_ckpt_open(const char *path, bool resume, const json_t *config, kld_cap_ckpt **out,
                             kld_error *err) {
    *out = NULL;
    kld_cap_ckpt *c = calloc(1, sizeof *c);
    json_t *head = header(config);
    kld_status st = KLD_OK;
    if (!c || !head || !(c->path = kld_strdup(path)) || !(c->kept = json_object()))
        st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    if (st == KLD_OK) st = kld_cap_ckpt_check(path, resume, err);
    if (st == KLD_OK && resume) {
        uint64_t keep = 0;
        st = load(c, head, &keep, err);
        if (st == KLD_OK && truncate(path, (off_t)keep) != 0) /* drop a cut last line */
            st = kld_fail(err, KLD_ERR_IO, "%s: cannot truncate: %s", path, strerror(errno));
        if (st == KLD_OK && !(c->f = fopen(path, "ab")))
            st = kld_fail(err, KLD_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    } else if (st == KLD_OK) {
        if (!(c->f = fopen(path, "wbx")))
            st = kld_fail(err, KLD_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
        if (st == KLD_OK) st = write_line(c, json_incref(head), err);
        if (st == KLD_OK) st = kld_cap_ckpt_sync(c, err);
    }
    json_decref(head);
    if (st) {
        kld_cap_ckpt_close(c);
        return st;
    }
    *out = c;
    return KLD_OK;
}

const char *kld_cap_ckpt_find(const kld_cap_ckpt *c, int arm, const char *unit, uint64_t item,
                              uint64_t sample, const char *prompt) {
    char hash[65], key[400];
    prompt_hash(prompt, hash);
    key_of(key, sizeof key, arm, unit, item, sample, hash);
    return json_string_value(json_object_get(c->kept, key));
}

kld_status kld_cap_ckpt_add(kld_cap_ckpt *c, int arm, const char *unit, uint64_t item, uint64_t sample,
                            const char *prompt, const char *text, kld_error *err) {
    char hash[65], key[400];
    prompt_hash(prompt, hash);
    key_of(key, sizeof key, arm, unit, item, sample, hash);
    if (json_object_set_new(c->kept, key, json_string(text)))
        return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", c->path);
    return write_line(c, json_pack("{s:i, s:s, s:I, s:I, s:s, s:s}", "arm", arm, "unit", unit, "item",
                                   (json_int_t)item, "sample", (json_int_t)sample, "prompt", hash, "text", text),
                      err);
}

size_t kld_cap_ckpt_resumed(const kld_cap_ckpt *c) { return c->resumed; }

void kld_cap_ckpt_close(kld_cap_ckpt *c) {
    if (!c) return;
    if (c->f) fclose(c->f);
    json_decref(c->kept);
    free(c->path);
    free(c);
}
