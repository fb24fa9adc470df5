/* cmd_merge_dump.c — `kldeval merge --dump OUT_DIR SHARD_DIR...`: the shards
 * of one dump (kldeval dump --shard K/N) assembled into the dump directory
 * one unsharded run writes (src/store/dump.h, kld_dump_merge). */
#include "cli/commands.h"
#include "common/common.h"
#include "store/dump.h"

#include <math.h>
#include <stdio.h>

int kld_merge_dump_main(const char *out, const char *const *dirs, size_t n,
                        const kld_kl_outputs *o) {
    double t0 = kld_now_s();
    kld_dump_merge_info info;
    kld_error err = {0};
    if (kld_dump_merge(out, dirs, n, &info, &err) != KLD_OK) {
        fprintf(stderr, "kldeval merge: %s\n", err.msg);
        return 1;
    }
    double wall = kld_now_s() - t0;
    printf("%s: %lld sequences, %lld records from %u shards (%s), evaluation hash %.16s...; "
           "manifest.json written last\n", out, (long long)info.n_seqs, (long long)info.records,
           info.n_shards, info.mode, info.eval_hash);
    /* one row for the merged dump; its "merged" object names the shards */
    json_t *parts = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(parts, json_pack("{s:s,s:i,s:I,s:s}", "path", info.parts[i].dir, "shard",
                                               (int)info.parts[i].k, "windows",
                                               (json_int_t)info.parts[i].n_windows, "created",
                                               info.parts[i].created));
    json_t *report = json_pack("{s:{s:s,s:{s:s,s:s},s:s,s:s,s:i,s:i,s:s,s:I,s:I,s:{s:s,s:i,s:s,s:o}}}",
                               "config", "mode", "dump", "ref", "kind", "model", "path", info.model,
                               "out", out, "format", "dump", "top_k", (int)info.top_k,
                               "format_version", info.format_version, "kind",
                               info.candidate ? "candidate" : "teacher", "records",
                               (json_int_t)info.records, "windows_n", (json_int_t)info.n_seqs,
                               "merged", "eval_hash", info.eval_hash, "shards", (int)info.n_shards,
                               "mode", info.mode, "parts", parts);
    kld_record_run("merge", o, "dump", report, NULL, NULL, false, wall, NAN);
    json_decref(report);
    kld_dump_merge_info_free(&info);
    return 0;
}
