/* report_progress.c — the live progress line of `kldeval kl` on stderr:
 * documents, positions, rate, ETA and the running mean KLD, redrawn in place
 * and only when stderr is a terminal (logs stay clean). */
#include "report/report.h"

#include <unistd.h>

/* "1h02m", "3m05s", "42s" */
static void format_duration(double s, char *buf, size_t size) {
    if (!(s >= 0.0) || s > 1e9) {
        snprintf(buf, size, "?");
        return;
    }
    unsigned long t = (unsigned long)(s + 0.5);
    if (t >= 3600) snprintf(buf, size, "%luh%02lum", t / 3600, t % 3600 / 60);
    else if (t >= 60) snprintf(buf, size, "%lum%02lus", t / 60, t % 60);
    else snprintf(buf, size, "%lus", t);
}

/* Appends to buf at *len, never past size. */
#define APPEND(...)                                                                   \
    do {                                                                              \
        if (*len < size) {                                                            \
            int w_ = snprintf(buf + *len, size - *len, __VA_ARGS__);                  \
            if (w_ > 0) *len = *len + (size_t)w_ < size ? *len + (size_t)w_ : size - 1; \
        }                                                                             \
    } while (0)

static void count_part(char *buf, size_t size, size_t *len, const char *what, uint64_t done,
                       uint64_t total) {
    if (total) APPEND("%s %llu/%llu", what, (unsigned long long)done, (unsigned long long)total);
    else APPEND("%s %llu", what, (unsigned long long)done);
}

size_t kld_progress_format(const kld_progress *p, char *buf, size_t size) {
    if (!size) return 0;
    buf[0] = '\0';
    size_t n = 0, *len = &n;
    count_part(buf, size, len, "docs", p->docs_done, p->docs_total);
    APPEND("  ");
    count_part(buf, size, len, "positions", p->positions_done, p->positions_total);
    if (p->elapsed_s > 0.0) APPEND("  %.1f pos/s", (double)p->positions_done / p->elapsed_s);
    double frac = -1.0;
    if (p->positions_total && p->positions_done) frac = (double)p->positions_done / (double)p->positions_total;
    else if (p->docs_total && p->docs_done) frac = (double)p->docs_done / (double)p->docs_total;
    char eta[32];
    if (frac > 0.0 && p->elapsed_s > 0.0) {
        format_duration(p->elapsed_s * (1.0 - frac) / frac, eta, sizeof eta);
        APPEND("  ETA %s", eta);
    }
    if (p->positions_done) APPEND("  mean KLD %.6f", p->kld_mean);
    return n;
}

bool kld_progress_enabled(FILE *f) { return f && isatty(fileno(f)); }

void kld_progress_print(FILE *f, const kld_progress *p) {
    if (!kld_progress_enabled(f)) return;
    /* At most ~10 redraws a second: tiny models finish chunks far faster
     * than a terminal needs, and the last state is drawn by the final call
     * (elapsed time 0 resets the throttle for a new run). */
    static double last_drawn = -1.0;
    bool done = p->positions_total && p->positions_done >= p->positions_total;
    if (!done && last_drawn >= 0 && p->elapsed_s >= last_drawn && p->elapsed_s - last_drawn < 0.1) return;
    last_drawn = p->elapsed_s;
    char line[256];
    kld_progress_format(p, line, sizeof line);
    fprintf(f, "\r%s\033[K", line); /* \033[K clears what a longer line left */
    fflush(f);
}

void kld_progress_end(FILE *f) {
    if (!kld_progress_enabled(f)) return;
    fputc('\n', f);
    fflush(f);
}
