/* mmlu.c — MMLU data (hendrycks layout: <split>/<subject>_<split>.csv, no
 * header, `question,A,B,C,D,answer`), the k-shot prompt of the original
 * evaluation, and the pick from the four choices' logits. */
#include "cap/cap.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct strbuf {
    char *s;
    size_t n, cap;
} strbuf;

static bool sb_put(strbuf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t c = b->cap ? b->cap : 256;
        while (c < b->n + n + 1) c *= 2;
        char *ns = realloc(b->s, c);
        if (!ns) return false;
        b->s = ns;
        b->cap = c;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
    return true;
}
static bool sb_str(strbuf *b, const char *s) { return sb_put(b, s, strlen(s)); }

/* One RFC 4180 record starting at *p: fields into out (malloc'd). Returns
 * the field count, or -1 on a malformed quote / allocation failure. */
static int csv_record(const char **p, const char *end, char **out, int max_fields) {
    int nf = 0;
    const char *c = *p;
    for (;;) {
        strbuf f = {0};
        if (!sb_put(&f, "", 0)) return -1;
        if (c < end && *c == '"') {
            c++;
            for (;;) {
                if (c >= end) return free(f.s), -1;
                if (*c == '"') {
                    if (c + 1 < end && c[1] == '"') {
                        if (!sb_put(&f, "\"", 1)) return free(f.s), -1;
                        c += 2;
                        continue;
                    }
                    c++;
                    break;
                }
                if (!sb_put(&f, c, 1)) return free(f.s), -1;
                c++;
            }
        } else {
            const char *s = c;
            while (c < end && *c != ',' && *c != '\n' && *c != '\r') c++;
            if (!sb_put(&f, s, (size_t)(c - s))) return free(f.s), -1;
        }
        if (nf < max_fields) out[nf] = f.s;
        else free(f.s);
        nf++;
        if (c < end && *c == ',') {
            c++;
            continue;
        }
        if (c < end && *c == '\r') c++;
        if (c < end && *c == '\n') c++;
        else if (c < end) { /* text after a closing quote */
            for (int i = 0; i < nf && i < max_fields; i++) free(out[i]);
            return -1;
        }
        break;
    }
    *p = c;
    return nf;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static kld_status load_csv(const char *path, const char *subject, kld_mmlu_set *s,
                           kld_error *err) {
    char *text = NULL;
    size_t len = 0;
    kld_status st = kld_cap_read_file(path, &text, &len, err);
    if (st != KLD_OK) return st;
    const char *p = text, *end = text + len;
    size_t row = 0;
    while (p < end) {
        row++;
        char *f[6] = {0};
        int nf = csv_record(&p, end, f, 6);
        if (nf != 6) {
            for (int i = 0; i < 6 && nf > 0 && i < nf; i++) free(f[i]);
            free(text);
            return kld_fail(err, KLD_ERR_FORMAT, "%s: record %zu: %s", path, row,
                            nf < 0 ? "malformed CSV (quote)" : "expected 6 fields");
        }
        if (strlen(f[5]) != 1 || f[5][0] < 'A' || f[5][0] > 'D') {
            kld_fail(err, KLD_ERR_FORMAT, "%s: record %zu: answer '%.16s' is not A-D", path, row,
                     f[5]);
            for (int i = 0; i < 6; i++) free(f[i]);
            free(text);
            return KLD_ERR_FORMAT;
        }
        kld_mmlu_item *ni = realloc(s->items, (s->n + 1) * sizeof *ni);
        char *subj = kld_strdup(subject);
        if (!ni || !subj) {
            if (ni) s->items = ni;
            free(subj);
            for (int i = 0; i < 6; i++) free(f[i]);
            free(text);
            return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", path);
        }
        s->items = ni;
        kld_mmlu_item *it = &s->items[s->n++];
        it->subject = subj;
        it->question = f[0];
        for (int i = 0; i < 4; i++) it->choice[i] = f[1 + i];
        it->answer = f[5][0] - 'A';
        free(f[5]);
    }
    free(text);
    return KLD_OK;
}

kld_status kld_mmlu_load(const char *dir, const char *split, kld_mmlu_set *out, kld_error *err) {
    memset(out, 0, sizeof *out);
    char folder[4096];
    snprintf(folder, sizeof folder, "%s/%s", dir, split);
    DIR *d = opendir(folder);
    if (!d) return kld_fail(err, KLD_ERR_IO, "%s: cannot open the folder: %s", folder, strerror(errno));
    char suffix[64];
    snprintf(suffix, sizeof suffix, "_%s.csv", split);
    char **names = NULL;
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t l = strlen(e->d_name), sl = strlen(suffix);
        if (l <= sl || strcmp(e->d_name + l - sl, suffix)) continue;
        char **nn = realloc(names, (n + 1) * sizeof *nn);
        if (!nn || !(nn[n] = kld_strndup(e->d_name, l - sl))) {
            if (nn) names = nn;
            for (size_t i = 0; i < n; i++) free(names[i]);
            free(names);
            closedir(d);
            return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
        }
        names = nn;
        n++;
    }
    closedir(d);
    if (n == 0) return free(names), kld_fail(err, KLD_ERR_FORMAT, "%s: no *%s files", folder, suffix);
    qsort(names, n, sizeof *names, cmp_str);
    kld_status st = KLD_OK;
    for (size_t i = 0; i < n && st == KLD_OK; i++) {
        char path[8192];
        snprintf(path, sizeof path, "%s/%s%s", folder, names[i], suffix);
        st = load_csv(path, names[i], out, err);
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    if (st != KLD_OK) kld_mmlu_free(out);
    return st;
}

void kld_mmlu_free(kld_mmlu_set *s) {
    for (size_t i = 0; i < s->n; i++) {
        free(s->items[i].subject);
        free(s->items[i].question);
        for (int c = 0; c < 4; c++) free(s->items[i].choice[c]);
    }
    free(s->items);
    memset(s, 0, sizeof *s);
}

static bool put_example(strbuf *b, const kld_mmlu_item *it, bool with_answer) {
    static const char *const letter[4] = {"A", "B", "C", "D"};
    bool ok = sb_str(b, it->question);
    for (int c = 0; c < 4; c++)
        ok = ok && sb_str(b, "\n") && sb_str(b, letter[c]) && sb_str(b, ". ") && sb_str(b, it->choice[c]);
    ok = ok && sb_str(b, "\nAnswer:");
    if (with_answer) ok = ok && sb_str(b, " ") && sb_str(b, letter[it->answer]) && sb_str(b, "\n\n");
    return ok;
}

char *kld_mmlu_prompt(const kld_mmlu_set *dev, const kld_mmlu_item *item, int k_shot) {
    strbuf b = {0};
    /* The original evaluation's header: each subject word is preceded by a
     * space, so "about" is followed by two spaces. Kept for comparability. */
    bool ok = sb_str(&b, "The following are multiple choice questions (with answers) about ");
    for (const char *w = item->subject; ok && *w;) {
        const char *u = strchr(w, '_');
        size_t l = u ? (size_t)(u - w) : strlen(w);
        ok = sb_str(&b, " ") && sb_put(&b, w, l);
        w += l + (u ? 1 : 0);
    }
    ok = ok && sb_str(&b, ".\n\n");
    int shots = 0;
    for (size_t i = 0; ok && dev && i < dev->n && shots < k_shot; i++)
        if (!strcmp(dev->items[i].subject, item->subject)) {
            ok = put_example(&b, &dev->items[i], true);
            shots++;
        }
    ok = ok && put_example(&b, item, false);
    if (!ok) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

int kld_mmlu_pick(const float logits[4]) {
    int best = 0;
    for (int c = 1; c < 4; c++)
        if (logits[c] > logits[best]) best = c;
    return best;
}
