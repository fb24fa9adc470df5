/* sampler.c — one sampling step of the capability tasks' generation.
 *
 * The row of float logits is sorted into candidates by logit, descending,
 * ties to the lower id. The filters run in llama.cpp's default chain order,
 * top-k → top-p → min-p, on the temperature-1 distribution, and the
 * temperature is applied to the survivors last (llama.cpp's chain and
 * mlx-lm's sampler both filter before the temperature, so a temperature
 * sweep keeps one candidate set and top-p means the same at every T):
 *   top-k: the first K candidates (K = 0 or K >= n: all);
 *   top-p: p_i = exp(l_i - l_0) / sum over the survivors (double); the
 *          shortest prefix whose cumulative p reaches P (P = 1: all);
 *   min-p: the candidates with exp(l_i - l_0) >= M, i.e. p_i >= M · p_max
 *          (M = 0: all);
 *   at least the first candidate always survives.
 * Probabilities at temperature T: w_i = exp((l_i - l_0) / T) in double,
 * p_i = w_i / W with W the sum over the survivors in candidate order.
 * The draw: the first survivor i (in candidate order) whose running sum
 * p_0 + … + p_i (double, in that order) exceeds u, the last survivor when
 * rounding leaves none.
 * Temperature 0 is the argmax, exactly the greedy decoding; top_k = 1 is
 * the argmax at any temperature.
 *
 * The uniform u of (seed, item, sample, step) is counter-based: with
 * SplitMix64's finaliser mix(z) (z + 0x9E3779B97F4A7C15, then xor-shift 30
 * · 0xBF58476D1CE4E5B9, xor-shift 27 · 0x94D049BB133111EB, xor-shift 31),
 * h = mix(mix(mix(mix(seed) ^ item) ^ sample) ^ step) and u = (h >> 11) ·
 * 2^-53. No generator state travels between steps or prompts. */
#include "cap/sampler.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

void kld_cap_sampler_greedy(kld_cap_sampler *s) { *s = (kld_cap_sampler){0, 0, 1, 0, 0}; }

bool kld_cap_sampler_is_greedy(const kld_cap_sampler *s) { return !s || s->temperature == 0; }

static bool parse_double(const char *v, size_t n, double *out) {
    char buf[64], *end;
    if (n == 0 || n >= sizeof buf) return false;
    memcpy(buf, v, n);
    buf[n] = 0;
    errno = 0;
    *out = strtod(buf, &end);
    return !errno && *end == 0 && isfinite(*out);
}

static bool parse_u64(const char *v, size_t n, uint64_t *out) {
    char buf[32], *end;
    if (n == 0 || n >= sizeof buf || v[0] == '-' || v[0] == '+') return false;
    memcpy(buf, v, n);
    buf[n] = 0;
    errno = 0;
    unsigned long long x = strtoull(buf, &end, 10);
    *out = x;
    return !errno && *end == 0;
}

kld_status kld_cap_sampler_parse(const char *text, kld_cap_sampler *s, kld_error *err) {
    kld_cap_sampler_greedy(s);
    if (!strcmp(text, "greedy")) return KLD_OK;
    s->temperature = 1;
    for (const char *p = text; *p;) {
        const char *c = strchr(p, ',');
        const size_t len = c ? (size_t)(c - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        if (!eq) return kld_fail(err, KLD_ERR_ARG, "sampler '%s': '%.*s' is not KEY=VALUE", text, (int)len, p);
        const size_t kl = (size_t)(eq - p), vl = len - kl - 1;
        const char *v = eq + 1;
        double d = 0;
        uint64_t u = 0;
        bool ok;
        if (kl == 11 && !strncmp(p, "temperature", kl)) ok = parse_double(v, vl, &d) && d >= 0 && d <= 1000, s->temperature = d;
        else if (kl == 5 && !strncmp(p, "top_k", kl)) ok = parse_u64(v, vl, &u) && u <= INT32_MAX, s->top_k = (int64_t)u;
        else if (kl == 5 && !strncmp(p, "top_p", kl)) ok = parse_double(v, vl, &d) && d > 0 && d <= 1, s->top_p = d;
        else if (kl == 5 && !strncmp(p, "min_p", kl)) ok = parse_double(v, vl, &d) && d >= 0 && d <= 1, s->min_p = d;
        else if (kl == 4 && !strncmp(p, "seed", kl)) ok = parse_u64(v, vl, &u), s->seed = u;
        else
            return kld_fail(err, KLD_ERR_ARG, "sampler '%s': unknown key '%.*s' (temperature, top_k, top_p, min_p, seed)",
                            text, (int)kl, p);
        if (!ok)
            return kld_fail(err, KLD_ERR_ARG, "sampler '%s': bad value '%.*s' for %.*s (temperature 0..1000, top_k "
                            "0..2^31-1, top_p (0, 1], min_p [0, 1], seed an unsigned 64-bit integer)",
                            text, (int)vl, v, (int)kl, p);
        p += len + (c ? 1 : 0);
    }
    return KLD_OK;
}

/* The shortest %g text that reads back as x. */
static void fmt_double(double x, char *buf, size_t size) {
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(buf, size, "%.*g", prec, x);
        if (strtod(buf, NULL) == x) return;
    }
}

void kld_cap_sampler_format(const kld_cap_sampler *s, char *buf, size_t size) {
    if (kld_cap_sampler_is_greedy(s)) {
        snprintf(buf, size, "greedy");
        return;
    }
    char t[32], p[32], m[32];
    fmt_double(s->temperature, t, sizeof t);
    fmt_double(s->top_p, p, sizeof p);
    fmt_double(s->min_p, m, sizeof m);
    snprintf(buf, size, "temperature=%s,top_k=%lld,top_p=%s,min_p=%s,seed=%llu", t, (long long)s->top_k, p, m,
             (unsigned long long)s->seed);
}

static uint64_t mix(uint64_t z) {
    z += UINT64_C(0x9E3779B97F4A7C15);
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

double kld_cap_uniform(uint64_t seed, uint64_t item, uint64_t sample, uint64_t step) {
    const uint64_t h = mix(mix(mix(mix(seed) ^ item) ^ sample) ^ step);
    return (double)(h >> 11) * 0x1.0p-53;
}

/* The order key of a logit: unsigned, ascending with the logit (-0 as +0,
 * so the two tie as they compare equal), complemented for descending. */
static uint32_t desc_key(float f) {
    uint32_t u;
    if (f == 0) f = 0; /* -0 → +0 */
    memcpy(&u, &f, sizeof u);
    u = (u & 0x80000000u) ? ~u : u | 0x80000000u;
    return ~u;
}

/* cand[0..n) by logit descending, ties in their given (ascending id)
 * order: a stable LSD radix sort, four 8-bit passes through tmp — the
 * comparison sort's result in O(n), which matters at 150k-token vocabularies. */
static void sort_desc(kld_cap_cand *cand, kld_cap_cand *tmp, size_t n) {
    kld_cap_cand *src = cand, *dst = tmp;
    for (int shift = 0; shift < 32; shift += 8) {
        size_t count[257] = {0};
        for (size_t i = 0; i < n; i++) count[((desc_key(src[i].logit) >> shift) & 0xFF) + 1]++;
        for (int b = 0; b < 256; b++) count[b + 1] += count[b];
        for (size_t i = 0; i < n; i++) dst[count[(desc_key(src[i].logit) >> shift) & 0xFF]++] = src[i];
        kld_cap_cand *t = src;
        src = dst;
        dst = t;
    }
    /* four passes: the result is back in cand */
}

size_t kld_cap_sampler_filter(const kld_cap_sampler *s, const float *logits, int64_t n, kld_cap_cand *cand,
                              double *prob) {
    for (int64_t i = 0; i < n; i++) cand[i] = (kld_cap_cand){isnan(logits[i]) ? -INFINITY : logits[i], (int32_t)i};
    sort_desc(cand, cand + n, (size_t)n);
    size_t m = (size_t)n;
    if (s->top_k > 0 && (uint64_t)s->top_k < m) m = (size_t)s->top_k;
    const double l0 = cand[0].logit;
    if (s->top_p < 1) {
        double sum = 0, cum = 0;
        for (size_t i = 0; i < m; i++) sum += prob[i] = exp((double)cand[i].logit - l0);
        for (size_t i = 0; i < m; i++) {
            cum += prob[i] / sum;
            if (cum >= s->top_p) {
                m = i + 1;
                break;
            }
        }
    }
    if (s->min_p > 0) {
        size_t keep = 1;
        while (keep < m && exp((double)cand[keep].logit - l0) >= s->min_p) keep++;
        m = keep;
    }
    const double t = s->temperature > 0 ? s->temperature : 1;
    double w = 0;
    for (size_t i = 0; i < m; i++) w += prob[i] = exp(((double)cand[i].logit - l0) / t);
    for (size_t i = 0; i < m; i++) prob[i] /= w;
    return m;
}

int32_t kld_cap_sample(const kld_cap_sampler *s, const float *logits, int64_t n, double u, kld_cap_cand *cand,
                       double *prob) {
    if (kld_cap_sampler_is_greedy(s)) {
        int64_t b = 0;
        for (int64_t i = 1; i < n; i++)
            if (logits[i] > logits[b]) b = i; /* strict: ties keep the lower id */
        return (int32_t)b;
    }
    const size_t m = kld_cap_sampler_filter(s, logits, n, cand, prob);
    double cum = 0;
    for (size_t i = 0; i < m; i++) {
        cum += prob[i];
        if (u < cum) return cand[i].id;
    }
    return cand[m - 1].id;
}

double kld_cap_pass_at_k(size_t n, size_t c, size_t k) {
    if (k > n || c > n || k == 0) return NAN;
    if (n - c < k) return 1.0;
    /* C(n-c, k) / C(n, k) = prod_{i = n-c+1}^{n} (1 - k / i) (Chen et al. 2021) */
    double q = 1.0;
    for (size_t i = n - c + 1; i <= n; i++) q *= 1.0 - (double)k / (double)i;
    return 1.0 - q;
}
