/* report_inspect.h — the text view of `kldeval inspect`'s facts
 * (eval/inspect.h) and of a dump's description. */
#ifndef KLD_REPORT_INSPECT_H
#define KLD_REPORT_INSPECT_H

#include <jansson.h>
#include <stdio.h>

/* The facts as aligned text (without the policy's plan and the adapter). */
void kld_report_inspect_text(FILE *f, const json_t *facts);
/* A LoRA adapter's facts (facts.adapter). */
void kld_report_inspect_adapter(FILE *f, const json_t *adapter);
/* A dump's description (kld_dump_describe): one "key: value" line each. */
void kld_report_inspect_dump(FILE *f, const json_t *describe);

#endif
