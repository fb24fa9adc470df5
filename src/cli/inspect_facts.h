/* inspect_facts.h — collects what `kldeval inspect` reports about a model
 * into one JSON object; the text view is printed from the same object. */
#ifndef KLD_CLI_INSPECT_FACTS_H
#define KLD_CLI_INSPECT_FACTS_H

#include "engine/engine.h"
#include "io/source.h"

#include <jansson.h>
#include <stdio.h>

typedef struct inspect_options {
    bool tensors; /* include the tensor table */
    bool meta;    /* include all metadata */
    bool plan;    /* include the engine's memory plan for ctx/chunk/threads */
    const char *path; /* the model path (the plan opens the model) */
    int64_t ctx, chunk; /* 0: the model's training context, min(512, ctx) */
    int threads;
    const char *levers; /* session levers of the plan (engine.h syntax), or NULL */
} inspect_options;

/* Builds the facts object (never NULL unless out of memory). Parts that
 * cannot be derived (unknown architecture, no tokenizer) carry an "error". */
json_t *inspect_facts(const kld_source *src, const inspect_options *opt);

/* Prints the facts as aligned text. */
void inspect_print_text(FILE *f, const json_t *facts);

/* MODEL+ADAPTER: the adapter's facts (inspect_adapter.c), and as text. */
json_t *inspect_adapter_json(const kld_adapter_facts *a);
void inspect_print_adapter(FILE *f, const json_t *adapter);

#endif
