/* report_pin.c — the --pin line: one compact JSON object per run appended
 * to a history file (the seeds' scoreboard-pin convention), written with a
 * single O_APPEND write so that parallel runs never clobber each other. */
#include "report/report.h"

#include "common/common.h"
#include "report/report_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static json_t *pin_json(const kld_summary *s, const kld_report_run *run) {
    char label[512], when[32];
    if (run->label) {
        snprintf(label, sizeof label, "%s", run->label);
    } else {
        snprintf(label, sizeof label, "%s vs %s", run->ref_label ? run->ref_label : "ref",
                 run->arm_label ? run->arm_label : "arm");
    }
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);

    json_t *o = json_object();
    if (!o) return NULL;
    json_t *v;
    bool ok = (v = json_string(label)) && json_object_set_new(o, "label", v) == 0 &&
              (v = json_string(when)) && json_object_set_new(o, "time", v) == 0 &&
              (v = json_string(kld_version())) && json_object_set_new(o, "version", v) == 0 &&
              (v = json_boolean(run->partial)) && json_object_set_new(o, "partial", v) == 0 &&
              kld_json_set_uint(o, "n_positions", s->n_positions) &&
              kld_json_set_real(o, "kld_mean", s->kld.mean) &&
              kld_json_set_real(o, "kld_stderr", s->kld.se) &&
              kld_json_set_real(o, "kld_doc_mean", s->kld_doc_mean) &&
              kld_json_set_real(o, "kld_median", s->kld.median) &&
              kld_json_set_real(o, "kld_p99", s->kld.pct[8]) &&
              kld_json_set_real(o, "kld_max", s->kld.max) &&
              kld_json_set_real(o, "jsd_mean", s->jsd.mean) &&
              kld_json_set_real(o, "top1_agreement", s->top1_agreement) &&
              kld_json_set_real(o, "topk_overlap", s->topk_overlap) &&
              kld_json_set_real(o, "ppl_ref", s->ppl_ref) &&
              kld_json_set_real(o, "ppl_arm", s->ppl_arm) &&
              kld_json_set_real(o, "ln_ppl_ratio", s->ln_ppl_ratio) &&
              kld_json_set_real(o, "ln_ppl_ratio_stderr", s->ln_ppl_ratio_se) &&
              kld_json_set_real(o, "elapsed_s", run->elapsed_s) &&
              kld_json_set_real(o, "ref_tokens_per_s", kld_report_rate(run->ref_tokens, run->ref_seconds)) &&
              kld_json_set_real(o, "arm_tokens_per_s", kld_report_rate(run->arm_tokens, run->arm_seconds)) &&
              (v = run->config ? json_deep_copy(run->config) : json_object()) &&
              json_object_set_new(o, "config", v) == 0;
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

kld_status kld_report_pin_append(const char *path, const kld_summary *s, const kld_report_run *run,
                                 kld_error *err) {
    _Static_assert(KLD_N_PCT == 10, "kld_p99 is pct[8]");
    json_t *o = pin_json(s, run);
    char *line = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!line) return kld_fail(err, KLD_ERR_NOMEM, "%s: cannot build the pin line", path);
    size_t n = strlen(line);
    line[n] = '\n'; /* json_dumps' terminator becomes the newline; written as n+1 bytes */

    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        kld_status st = kld_fail(err, KLD_ERR_IO, "%s: cannot open the pin file: %s", path,
                                 strerror(errno));
        free(line);
        return st;
    }
    size_t done = 0;
    kld_status st = KLD_OK;
    while (done < n + 1) {
        ssize_t w = write(fd, line + done, n + 1 - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            st = kld_fail(err, KLD_ERR_IO, "%s: cannot append the pin line: %s", path,
                          w < 0 ? strerror(errno) : "short write");
            break;
        }
        done += (size_t)w;
    }
    if (close(fd) != 0 && st == KLD_OK)
        st = kld_fail(err, KLD_ERR_IO, "%s: cannot close the pin file: %s", path, strerror(errno));
    free(line);
    return st;
}
