/* test_bad_corpus.c — opens every input of tests/bad/MANIFEST.tsv (written
 * by tests/bad/make_bad_corpus.py) and checks the status and that the
 * message names the file and contains the expected substring. Files named
 * tok_* are llama2.c tokenizers read with n_vocab 4; the rest go through
 * kld_source_open. Run it under ASan+UBSan too (-DKLD_SANITIZE=ON). */
#include "io/io.h"
#include "testlib.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#define BAD_DIR "tests/bad"
#define MAX_ROWS 1024

static kld_status status_from_name(const char *s, bool *ok) {
    static const struct {
        const char *name;
        kld_status st;
    } map[] = {{"OK", KLD_OK},
               {"FORMAT", KLD_ERR_FORMAT},
               {"UNSUPPORTED", KLD_ERR_UNSUPPORTED},
               {"MISMATCH", KLD_ERR_MISMATCH},
               {"IO", KLD_ERR_IO}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strcmp(map[i].name, s) == 0) {
            *ok = true;
            return map[i].st;
        }
    *ok = false;
    return KLD_ERR_ARG;
}

/* A successfully opened source must be internally consistent: sizes agree
 * with the type table and data lies inside the files. */
static void check_source(const char *path, const kld_source *src) {
    for (size_t i = 0; i < src->n_tensors; i++) {
        const kld_tensor *t = &src->tensors[i];
        CHECK(t->name != NULL, "%s: tensor %zu has no name", path, i);
        if (t->type == KLD_SAFETENSORS_NO_TYPE || t->n_dims == 0) continue;
        uint64_t nb = 0;
        kld_error err = {0};
        kld_status st = kld_type_tensor_bytes(t->type, t->n_dims, t->ne, &nb, t->name, &err);
        CHECK(st == KLD_OK && nb == t->nbytes, "%s: tensor '%s': %llu bytes, type table says %llu",
              path, t->name, (unsigned long long)t->nbytes, (unsigned long long)nb);
    }
}

static void run_row(const char *file, kld_status want, const char *sub) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", BAD_DIR, file);
    kld_error err = {0};
    kld_status st;
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    if (strncmp(base, "tok_", 4) == 0) {
        kld_llama2c_vocab *v = NULL;
        st = kld_llama2c_vocab_open(path, 4, &v, &err);
        if (st == KLD_OK) {
            CHECK(v->n_vocab == 4 && v->pieces[3] != NULL, "%s: vocab incomplete", path);
            kld_llama2c_vocab_free(v);
        }
    } else {
        kld_source *src = NULL;
        st = kld_source_open(path, &src, &err);
        if (st == KLD_OK) {
            check_source(path, src);
            kld_source_close(src);
        }
    }
    CHECK(st == want, "%s: expected %s, got %s: %s", path, kld_status_name(want),
          kld_status_name(st), st == KLD_OK ? "" : err.msg);
    if (want == KLD_OK || st != want) return;
    CHECK(strstr(err.msg, sub) != NULL, "%s: message lacks '%s': %s", path, sub, err.msg);
    CHECK(strstr(err.msg, path) != NULL, "%s: message does not name the file: %s", path, err.msg);
}

int main(void) {
    char *text = kt_read_file(BAD_DIR "/MANIFEST.tsv", NULL);
    char *names[MAX_ROWS];
    int n_rows = 0, n_bad = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] == '#') continue;
        char *file = line, *status = strchr(file, '\t');
        CHECK(status != NULL, "manifest line without status: %s", line);
        if (!status) continue;
        *status++ = '\0';
        char *sub = strchr(status, '\t');
        CHECK(sub != NULL, "manifest line without substring: %s", file);
        if (!sub) continue;
        *sub++ = '\0';
        bool known;
        kld_status want = status_from_name(status, &known);
        CHECK(known, "%s: unknown status '%s' in manifest", file, status);
        if (!known) continue;
        CHECK(want == KLD_OK || *sub, "%s: a bad input needs a message substring", file);
        run_row(file, want, sub);
        if (n_rows < MAX_ROWS) names[n_rows++] = file;
        if (want != KLD_OK) n_bad++;
    }
    CHECK(n_bad >= 40, "only %d bad inputs in the corpus", n_bad);

    /* Every corpus file is in the manifest (no stale, untested files). */
    DIR *d = opendir(BAD_DIR);
    CHECK(d != NULL, "cannot list %s", BAD_DIR);
    for (struct dirent *e = d ? readdir(d) : NULL; e; e = readdir(d)) {
        if (e->d_name[0] == '.' || !strcmp(e->d_name, "MANIFEST.tsv") ||
            !strcmp(e->d_name, "make_bad_corpus.py"))
            continue;
        bool listed = false;
        for (int i = 0; i < n_rows && !listed; i++) listed = !strcmp(names[i], e->d_name);
        CHECK(listed, "%s/%s is not in MANIFEST.tsv", BAD_DIR, e->d_name);
    }
    if (d) closedir(d);
    printf("%d corpus inputs (%d bad)\n", n_rows, n_bad);
    free(text);
    return kt_finish();
}
