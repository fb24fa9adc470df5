/* cmd_merge_cap.c — `kldeval merge PART...` when the parts are capability
 * partials (kldeval cap --shard K/N --partial PART, told by their first
 * bytes): the report the single run gives (src/cap/units.h, kld_cap_merge),
 * printed, written with --json / --html, and one run-database row (mode
 * "cap") whose report's "merged" object names the shards. */
#include "cap/units.h"
#include "cli/commands.h"
#include "common/common.h"

#include <stdio.h>

int kld_merge_cap_main(const char *const *parts, size_t n, const char *json_path, const char *label,
                       const kld_kl_outputs *o) {
    double t0 = kld_now_s();
    json_t *rep = NULL;
    kld_error err = {0};
    if (kld_cap_merge(parts, n, &rep, &err) != KLD_OK) {
        fprintf(stderr, "kldeval merge: %s\n", err.msg);
        return 1;
    }
    kld_cap_print_report(stdout, rep);
    const json_t *m = json_object_get(rep, "merged");
    printf("merged: %lld shards (%s), evaluation hash %.16s...\n",
           (long long)json_integer_value(json_object_get(m, "shards")),
           json_string_value(json_object_get(m, "mode")), json_string_value(json_object_get(m, "eval_hash")));
    int rc = 0;
    if (json_path && json_dump_file(rep, json_path, JSON_INDENT(1) | JSON_REAL_PRECISION(17))) {
        fprintf(stderr, "kldeval merge: --json %s: cannot write\n", json_path);
        rc = 1;
    }
    kld_kl_outputs rec = *o;
    rec.label = label;
    if (!kld_record_cap_run("merge", &rec, "cap", rep, false, 0, kld_now_s() - t0)) rc = 1;
    json_decref(rep);
    return rc;
}
