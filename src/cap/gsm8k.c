/* gsm8k.c — GSM8K answer extraction and comparison: the number after the
 * last "####" (the dataset's own answer marker) if there is one, else the
 * last number in the text; thousands commas removed; compared as numbers.
 * Also the 8-shot completion prompt (lm-eval-harness's "gsm8k" task:
 * "Question: …\nAnswer: …" exemplars joined by a blank line). */
#include "cap/cap.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* The number starting at or after p: [-]digits[,digits...][.digits]. Sets
 * start and end to its span (end exclusive); false when there is none. */
static bool next_number(const char *base, const char *p, const char **start, const char **end) {
    for (; *p; p++) {
        if (!isdigit((unsigned char)*p)) continue;
        const char *s = p;
        if (p > base && p[-1] == '-') s--; /* a minus sign directly before */
        const char *q = p;
        while (isdigit((unsigned char)*q) ||
               (*q == ',' && isdigit((unsigned char)q[1]) && q > p))
            q++;
        if (*q == '.' && isdigit((unsigned char)q[1])) {
            q++;
            while (isdigit((unsigned char)*q)) q++;
        }
        *start = s;
        *end = q;
        return true;
    }
    return false;
}

static bool copy_number(const char *s, const char *e, char *out, size_t out_size) {
    size_t n = 0;
    for (const char *c = s; c < e; c++) {
        if (*c == ',') continue;
        if (n + 1 >= out_size) return false;
        out[n++] = *c;
    }
    out[n] = '\0';
    return n > 0;
}

bool kld_gsm8k_extract(const char *text, char *out, size_t out_size) {
    if (!text || !out_size) return false;
    const char *marker = NULL;
    for (const char *m = strstr(text, "####"); m; m = strstr(m + 4, "####")) marker = m;
    const char *s, *e;
    if (marker && next_number(marker + 4, marker + 4, &s, &e)) {
        return copy_number(s, e, out, out_size);
    }
    const char *ls = NULL, *le = NULL;
    for (const char *p = text; next_number(text, p, &s, &e); p = e) {
        ls = s;
        le = e;
    }
    return ls && copy_number(ls, le, out, out_size);
}

bool kld_gsm8k_correct(const char *response, const char *gold) {
    char got[128];
    if (!kld_gsm8k_extract(response, got, sizeof got)) return false;
    char want[128];
    if (!kld_gsm8k_extract(gold, want, sizeof want)) return false;
    char *e1, *e2;
    double a = strtod(got, &e1), b = strtod(want, &e2);
    if (*e1 || *e2) return false;
    return a == b || fabs(a - b) <= 1e-9 * fmax(1.0, fabs(b));
}

char *kld_gsm8k_fewshot_prompt(const json_t *data, size_t n_shots, const char *question) {
    size_t len = strlen(question) + 32;
    for (size_t i = 0; i < n_shots && i < json_array_size(data); i++) {
        const json_t *d = json_array_get(data, i);
        len += json_string_length(json_object_get(d, "question")) +
               json_string_length(json_object_get(d, "answer")) + 32;
    }
    char *out = malloc(len);
    if (!out) return NULL;
    size_t n = 0;
    for (size_t i = 0; i < n_shots && i < json_array_size(data); i++) {
        const json_t *d = json_array_get(data, i);
        const char *q = json_string_value(json_object_get(d, "question"));
        const char *a = json_string_value(json_object_get(d, "answer"));
        n += (size_t)snprintf(out + n, len - n, "Question: %s\nAnswer: %s\n\n", q ? q : "", a ? a : "");
    }
    snprintf(out + n, len - n, "Question: %s\nAnswer:", question);
    return out;
}
