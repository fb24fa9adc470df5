/* inspect.h — what `kldeval inspect` reports of a model, as one JSON
 * object: format and version, architecture and hyper-parameters, parameter
 * count, bytes and bits per weight, a histogram of tensor types, the
 * tokenizer, optionally the tensor table, every metadata key and the
 * engine's memory plan; for MODEL@POLICY the policy's plan (nothing
 * quantized), for MODEL+ADAPTER[:SCALE] the adapter bound to the model.
 * The text view is the report's (report/report_inspect.h). */
#ifndef KLD_EVAL_INSPECT_H
#define KLD_EVAL_INSPECT_H

#include "engine/engine.h"
#include "quant/quant.h"

#include <jansson.h>

typedef struct kld_inspect_options {
    bool tensors;             /* include the tensor table */
    bool meta;                /* include all metadata */
    bool plan;                /* include the engine's memory plan for ctx/chunk/threads */
    int64_t ctx, chunk;       /* 0: the model's training context, min(512, ctx) */
    int threads;
    const kld_levers *levers; /* the plan's session levers (NULL: reference values) */
} kld_inspect_options;

typedef struct kld_inspect {
    json_t *facts;            /* with "policy" and "adapter" where the path names them */
    const char *policy;       /* MODEL@POLICY's policy (in path), or NULL */
    kld_quant_view view;      /* its plan (view.plan) when policy */
    struct kld_source *src;   /* owned while policy: the plan points into its tensors */
    char *left;               /* owned: the path without its +ADAPTER */
} kld_inspect;

/* A dump directory (kldeval dump, or another engine writing docs/dump-format.md). */
bool kld_inspect_is_dump(const char *path);
/* path: MODEL[@POLICY][+ADAPTER[:SCALE]] as kl takes it. A memory plan that
 * cannot be made is not an error here: facts.plan carries an "error". */
kld_status kld_inspect_model(const char *path, const kld_inspect_options *opt, kld_inspect *out,
                             kld_error *err);
void kld_inspect_free(kld_inspect *in);

#endif
