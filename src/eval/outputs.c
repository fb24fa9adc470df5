/* outputs.c — the pre-flight check of an output path (outputs.h): before a
 * run that may take hours, prove that its result can be written there and
 * that writing it destroys no input. */
#include "eval/outputs.h"

#include "common/common.h"
#include "engine/engine.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool list_has(const char *name, const char *const *list) {
    for (; *list; list++)
        if (!strcmp(name, *list)) return true;
    return false;
}

/* The folder part of path (malloc'd; "." without a slash) and, in *base,
 * its last component. */
static char *folder_of(const char *path, const char **base) {
    const char *slash = strrchr(path, '/');
    *base = slash ? slash + 1 : path;
    if (!slash) return kld_strdup(".");
    if (slash == path) return kld_strdup("/");
    return kld_strndup(path, (size_t)(slash - path));
}

/* The absolute path a file that may not exist yet would have: its folder
 * resolved through symbolic links, plus the last component (malloc'd; NULL
 * if the folder cannot be resolved). */
static char *canonical(const char *path) {
    char *r = realpath(path, NULL);
    if (r) return r;
    const char *base;
    char *dir = folder_of(path, &base);
    char *rdir = dir ? realpath(dir, NULL) : NULL;
    free(dir);
    if (!rdir) return NULL;
    size_t n = strlen(rdir) + strlen(base) + 2;
    char *out = malloc(n);
    if (out) snprintf(out, n, "%s/%s", strcmp(rdir, "/") ? rdir : "", base);
    free(rdir);
    return out;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

/* Files a model folder, a .safetensors file or a llama2.c checkpoint is read
 * together with (config, tokenizer, weight shards; a PEFT adapter's config). */
static bool model_companion(const char *name) {
    static const char *const names[] = {"config.json", "tokenizer.json", "tokenizer_config.json",
                                        "tokenizer.bin", "model.bin",
                                        "model.safetensors.index.json", "adapter_config.json", NULL};
    return list_has(name, names) || ends_with(name, ".safetensors");
}

/* Would writing the file out_canon (out_st when it exists) destroy input
 * (or write the same file as an earlier output)?
 * 0: no, 1: it is the input, 2: it is a file read together with it. */
static int clobbers(const char *out_canon, const struct stat *out_st, const char *input) {
    struct stat in_st;
    const bool in_exists = stat(input, &in_st) == 0;
    if (in_exists && out_st && out_st->st_dev == in_st.st_dev && out_st->st_ino == in_st.st_ino)
        return 1;
    char *in_canon = canonical(input); /* an earlier output need not exist yet */
    if (!in_canon) return 0;
    int hit = !strcmp(in_canon, out_canon);
    const bool dir = in_exists && S_ISDIR(in_st.st_mode);
    if (!hit && in_exists &&
        (dir || ends_with(in_canon, ".safetensors") || ends_with(in_canon, ".bin"))) {
        const char *in_end = dir ? in_canon + strlen(in_canon) : strrchr(in_canon, '/');
        const char *out_slash = strrchr(out_canon, '/');
        const size_t n = in_end ? (size_t)(in_end - in_canon) : 0;
        if (in_end && out_slash && (size_t)(out_slash - out_canon) == n &&
            !strncmp(out_canon, in_canon, n) && model_companion(out_slash + 1))
            hit = 2;
    }
    free(in_canon);
    return hit;
}

static bool path_exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0;
}

/* p without a trailing "<sep>SUFFIX" when p does not exist and the part
 * before the last sep does (MODEL@POLICY, ADAPTER:SCALE); else p (owned). */
static char *strip_suffix(const char *p, int sep) {
    const char *at = strrchr(p, sep);
    if (!path_exists(p) && at) {
        char *left = kld_strndup(p, (size_t)(at - p));
        if (left && path_exists(left)) return left;
        free(left);
    }
    return kld_strdup(p);
}

/* The files a model spec MODEL[@POLICY][+ADAPTER[:SCALE]] reads: the model
 * and the adapter, as kld_model_open splits it (parts[1] NULL without one). */
static void spec_files(const char *input, char *parts[2]) {
    char *model = NULL;
    const char *adapter = NULL;
    kld_error err = {0};
    parts[0] = parts[1] = NULL;
    if (kld_model_split_adapter(input, &model, &adapter, &err) == KLD_OK && adapter) {
        parts[0] = strip_suffix(model, '@');
        parts[1] = strip_suffix(adapter, ':');
    } else {
        parts[0] = strip_suffix(input, '@');
    }
    free(model);
}


/* Opens the path for writing without changing it: a new file is created
 * and removed again, an existing one is opened without truncation. This
 * is the proof access() cannot give (a read-only mount, /proc, a full
 * quota on create, a folder where a file is expected). */
static bool probe_write(const char *path, bool exists, char *why, size_t n) {
    int fd = exists ? open(path, O_WRONLY | O_CLOEXEC)
                    : open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        snprintf(why, n, "cannot %s it: %s", exists ? "open" : "create", strerror(errno));
        return false;
    }
    close(fd);
    if (!exists && unlink(path) != 0) {
        snprintf(why, n, "created it but cannot remove it again: %s", strerror(errno));
        return false;
    }
    return true;
}

kld_status kld_input_check(const char *what, const char *path, kld_error *err) {
    struct stat sb;
    if (!path) return KLD_OK;
    if (stat(path, &sb) != 0 || access(path, R_OK) != 0)
        return kld_fail(err, KLD_ERR_IO, "%s %s: %s", what, path, strerror(errno));
    if (S_ISDIR(sb.st_mode)) return kld_fail(err, KLD_ERR_IO, "%s %s: is a folder, not a file", what, path);
    return KLD_OK;
}

kld_status kld_output_check(const char *what, const char *path, const char *const *inputs,
                            int n_inputs, kld_error *err) {

    char why[1024] = "";
    struct stat st;
    const bool exists = stat(path, &st) == 0;
    if (exists && S_ISDIR(st.st_mode)) {
        snprintf(why, sizeof why, "is a folder");
    } else if (exists && access(path, W_OK) != 0) {
        snprintf(why, sizeof why, "cannot write: %s", strerror(errno));
    } else if (!exists) {
        const char *base;
        char *dir = folder_of(path, &base);
        struct stat ds;
        if (!dir) snprintf(why, sizeof why, "out of memory");
        else if (stat(dir, &ds) != 0) snprintf(why, sizeof why, "folder %s: %s", dir, strerror(errno));
        else if (!S_ISDIR(ds.st_mode)) snprintf(why, sizeof why, "%s is not a folder", dir);
        else if (access(dir, W_OK) != 0)
            snprintf(why, sizeof why, "cannot write into folder %s: %s", dir, strerror(errno));
        free(dir);
    }
    if (!why[0]) {
        char *canon = canonical(path);
        for (int i = 0; canon && i < n_inputs && !why[0]; i++) {
            char *parts[2] = {NULL, NULL};
            if (inputs[i]) spec_files(inputs[i], parts); /* MODEL@POLICY+ADAPTER reads two files */
            for (int k = 0; k < 2 && parts[k] && !why[0]; k++) {
                const int c = clobbers(canon, exists ? &st : NULL, parts[k]);
                if (c == 1) snprintf(why, sizeof why, "is the same file as %s", parts[k]);
                if (c == 2) snprintf(why, sizeof why, "would overwrite a file the input %s is read from",
                                     parts[k]);
            }
            free(parts[0]), free(parts[1]);
        }
        free(canon);
    }
    if (!why[0]) probe_write(path, exists, why, sizeof why);
    if (why[0]) return kld_fail(err, KLD_ERR_IO, "%s %s: %s", what, path, why);
    return KLD_OK;
}

kld_status kld_output_dir_check(const char *what, const char *dir, kld_error *err) {
    struct stat sb;
    char probe[4200];
    if (stat(dir, &sb) == 0) {
        if (!S_ISDIR(sb.st_mode)) return kld_fail(err, KLD_ERR_IO, "%s %s: is not a folder", what, dir);
        /* a file made and removed inside it: access() is no proof */
        snprintf(probe, sizeof probe, "%s/.kldeval-probe-%ld", dir, (long)getpid());
        int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0)
            return kld_fail(err, KLD_ERR_IO, "%s %s: cannot write into it: %s", what, dir, strerror(errno));
        close(fd);
        unlink(probe);
        return KLD_OK;
    }
    if (errno != ENOENT) return kld_fail(err, KLD_ERR_IO, "%s %s: %s", what, dir, strerror(errno));
    if (mkdir(dir, 0755) != 0)
        return kld_fail(err, KLD_ERR_IO, "%s %s: cannot create it: %s", what, dir, strerror(errno));
    rmdir(dir);
    return KLD_OK;
}
