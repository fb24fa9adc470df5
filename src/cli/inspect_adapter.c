/* inspect_adapter.c — `kldeval inspect MODEL+ADAPTER[:SCALE]`: the
 * adapter's file(s), form, rank, alpha, effective scale, the base weights
 * it targets (by class) and its size, as JSON and as text. */
#include "cli/inspect_facts.h"

#include <inttypes.h>

json_t *inspect_adapter_json(const kld_adapter_facts *a) {
    json_t *classes = json_object();
    for (int k = 0; k < a->n_classes; k++)
        json_object_set_new(classes, a->class_name[k], json_integer(a->class_count[k]));
    json_t *o = json_pack("{s:s,s:s,s:o,s:s,s:I,s:I,s:o,s:f,s:f,s:f,s:I,s:o,s:I,s:I,s:I}",
                          "spec", a->spec, "file", a->file, "config",
                          a->config ? json_string(a->config) : json_null(), "format",
                          a->peft ? "peft" : "gguf", "rank", (json_int_t)a->rank_max, "rank_min",
                          (json_int_t)a->rank_min, "alpha",
                          a->has_alpha ? json_real(a->alpha) : json_null(), "user_scale",
                          (double)a->user_scale, "scale", (double)a->scale_max, "scale_min",
                          (double)a->scale_min, "n_targets", (json_int_t)a->n_targets, "classes",
                          classes, "n_params", (json_int_t)a->n_params, "stored_bytes",
                          (json_int_t)a->stored_bytes, "file_bytes", (json_int_t)a->file_bytes);
    return o;
}

void inspect_print_adapter(FILE *out, const json_t *a) {
    char b1[32], b2[32];
    const json_t *cfg = json_object_get(a, "config");
    const bool peft = !strcmp(json_string_value(json_object_get(a, "format")), "peft");
    fprintf(out, "%-14s %s (%s LoRA adapter, %s on disk)\n", "adapter",
            json_string_value(json_object_get(a, "spec")), peft ? "PEFT" : "GGUF",
            kld_format_bytes((uint64_t)json_integer_value(json_object_get(a, "file_bytes")), b1, sizeof b1));
    fprintf(out, "%-14s %s%s%s\n", "", json_string_value(json_object_get(a, "file")),
            json_is_string(cfg) ? " + " : "", json_is_string(cfg) ? json_string_value(cfg) : "");
    const json_int_t r = json_integer_value(json_object_get(a, "rank"));
    const json_int_t r0 = json_integer_value(json_object_get(a, "rank_min"));
    const double s = json_real_value(json_object_get(a, "scale"));
    const double s0 = json_real_value(json_object_get(a, "scale_min"));
    const json_t *alpha = json_object_get(a, "alpha");
    fprintf(out, "%-14s rank ", "");
    if (r0 != r) fprintf(out, "%" JSON_INTEGER_FORMAT "-", r0);
    fprintf(out, "%" JSON_INTEGER_FORMAT ", alpha ", r);
    if (json_is_real(alpha)) fprintf(out, "%g", json_real_value(alpha));
    else fprintf(out, "absent");
    fprintf(out, ", scale ");
    if (s0 != s) fprintf(out, "%g-", s0);
    fprintf(out, "%g (%s × SCALE %g)\n", s, json_is_real(alpha) ? "alpha/r" : "no alpha: 1",
            json_real_value(json_object_get(a, "user_scale")));
    fprintf(out, "%-14s %" JSON_INTEGER_FORMAT " base weights:", "",
            json_integer_value(json_object_get(a, "n_targets")));
    const char *k;
    const json_t *v;
    int i = 0;
    json_object_foreach((json_t *)json_object_get(a, "classes"), k, v)
        fprintf(out, "%s %s %" JSON_INTEGER_FORMAT, i++ ? "," : "", k, json_integer_value(v));
    fprintf(out, "\n%-14s %" JSON_INTEGER_FORMAT " parameters, %s stored (A and B)\n", "",
            json_integer_value(json_object_get(a, "n_params")),
            kld_format_bytes((uint64_t)json_integer_value(json_object_get(a, "stored_bytes")), b2, sizeof b2));
}
