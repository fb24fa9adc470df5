/* arm.c — what every kind of arm shares: its allocation (the arm, its
 * kind's state, a copy of its path, the plan a saved arm defines), its
 * description once complete, and its release. */
#include "eval/arm.h"

#include "eval/file_hash.h"

#include <stdlib.h>

kld_arm *kld_arm_new(const kld_arm_ops *ops, const char *kind, const char *path, size_t impl_size,
                     bool with_plan) {
    kld_arm *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    a->ops = ops;
    a->kind = kind;
    a->path = kld_strdup(path);
    a->impl = calloc(1, impl_size);
    a->plan = with_plan ? calloc(1, sizeof *a->plan) : NULL;
    if (!a->path || !a->impl || (with_plan && !a->plan)) {
        free(a->path);
        free(a->impl);
        free(a->plan);
        free(a);
        return NULL;
    }
    return a;
}

json_t *kld_arm_desc(kld_arm *a) {
    if (a->pending_sha) {
        char hex[65];
        const bool ok = kld_sha256_finish(a->pending_sha, hex);
        a->pending_sha = NULL;
        json_object_set_new(a->desc, "sha256", ok ? json_string(hex) : json_null());
    }
    if (a->sha_from) {
        json_t *sha = json_object_get(kld_arm_desc(a->sha_from), "sha256");
        json_object_set(a->desc, "sha256", sha ? sha : json_null());
        a->sha_from = NULL;
    }
    return a->desc;
}

void kld_arm_free(kld_arm *a) {
    if (!a) return;
    if (a->pending_sha) {
        char hex[65];
        (void)kld_sha256_finish(a->pending_sha, hex); /* joins the thread */
    }
    if (a->ops && a->ops->free) a->ops->free(a);
    kld_tok_free(a->tok);
    json_decref(a->desc);
    if (a->plan) kld_plan_free(a->plan);
    free(a->plan);
    free(a->path);
    free(a);
}
