/* policy.c — the precision-policy grammar: BASE[,SELECTOR=TYPE]…, where
 * BASE is a recipe (llama-quantize's names), a type or `keep`; SELECTOR is
 * head/output, embd/token_embd, blk:A-B, a tensor class, blk:A-B.CLASS or a
 * glob on the tensor name; TYPE is a type, `keep` (the stored type) or `base`
 * (what BASE alone gives the tensor). An `imatrix=FILE` item
 * names an importance matrix. Later selectors win (applied in plan.c). */
#include "quant/quant.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

const char *const kld_policy_classes[KLD_POLICY_N_CLASSES] = {
    "attn_q", "attn_k", "attn_v", "attn_qkv", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};

static const char *valid_selectors(void) {
    return "head, output, embd, token_embd, blk:A-B, blk:A-B.CLASS, a class (attn_q, attn_k, "
           "attn_v, attn_qkv, attn_output, ffn_gate, ffn_up, ffn_down) or a glob on the tensor "
           "name (e.g. 'blk.*.ffn_down.weight'), or imatrix=FILE";
}

/* Types a policy may ask for: floats and every type with a quantizer. */
static bool type_lookup(const char *s, uint32_t *out) {
    for (uint32_t id = 0; id < KLD_TYPE_COUNT; id++) {
        const kld_type_info *ti = kld_type_info_get(id);
        if (ti && ti->quantize_row && !strcasecmp(ti->name, s)) {
            *out = id;
            return true;
        }
    }
    return false;
}

static void valid_types(char *buf, size_t cap) {
    size_t o = (size_t)snprintf(buf, cap, "keep, base");
    for (uint32_t id = 0; id < KLD_TYPE_COUNT && o < cap; id++) {
        const kld_type_info *ti = kld_type_info_get(id);
        if (ti && ti->quantize_row) o += (size_t)snprintf(buf + o, cap - o, ", %s", ti->name);
    }
}

static bool is_class(const char *s) {
    for (size_t i = 0; i < KLD_POLICY_N_CLASSES; i++)
        if (!strcmp(kld_policy_classes[i], s)) return true;
    return false;
}

/* "A-B" or "A" → [lo, hi]; *end points after the digits. */
static bool parse_range(const char *s, int64_t *lo, int64_t *hi, const char **end) {
    char *e;
    if (!isdigit((unsigned char)*s)) return false;
    long long a = strtoll(s, &e, 10), b = a;
    if (*e == '-') {
        if (!isdigit((unsigned char)e[1])) return false;
        b = strtoll(e + 1, &e, 10);
    }
    if (a < 0 || b < a || b > 1000000) return false;
    *lo = a;
    *hi = b;
    *end = e;
    return true;
}

static kld_status parse_selector(const kld_policy *p, const char *sel, kld_policy_rule *r,
                                 kld_error *err) {
    r->blk_lo = r->blk_hi = -1;
    if (!strcmp(sel, "head") || !strcmp(sel, "output")) {
        r->kind = KLD_SEL_HEAD;
    } else if (!strcmp(sel, "embd") || !strcmp(sel, "token_embd")) {
        r->kind = KLD_SEL_EMBD;
    } else if (!strncmp(sel, "blk:", 4)) {
        const char *end;
        if (!parse_range(sel + 4, &r->blk_lo, &r->blk_hi, &end) ||
            (*end && (*end != '.' || !is_class(end + 1))))
            return kld_fail(err, KLD_ERR_ARG, "policy '%s': bad selector '%s' (blk:A-B or "
                            "blk:A-B.CLASS, CLASS one of attn_q, attn_k, attn_v, attn_qkv, "
                            "attn_output, ffn_gate, ffn_up, ffn_down)", p->text, sel);
        r->kind = *end ? KLD_SEL_CLASS : KLD_SEL_BLK;
        if (*end) snprintf(r->cls, sizeof r->cls, "%s", end + 1);
    } else if (is_class(sel)) {
        r->kind = KLD_SEL_CLASS;
        snprintf(r->cls, sizeof r->cls, "%s", sel);
    } else if (strpbrk(sel, "*?[.")) {
        r->kind = KLD_SEL_GLOB;
        r->glob = kld_strdup(sel);
        if (!r->glob) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    } else {
        return kld_fail(err, KLD_ERR_ARG, "policy '%s': unknown selector '%s' (valid: %s)",
                        p->text, sel, valid_selectors());
    }
    return KLD_OK;
}

static kld_status parse_item(kld_policy *p, char *item, kld_error *err) {
    char *eq = strchr(item, '=');
    if (!eq || eq == item || !eq[1])
        return kld_fail(err, KLD_ERR_ARG, "policy '%s': '%s' is not SELECTOR=TYPE (selectors: %s)",
                        p->text, item, valid_selectors());
    *eq = 0;
    const char *val = eq + 1;
    if (!strcmp(item, "imatrix")) {
        free(p->imatrix_path);
        p->imatrix_path = kld_strdup(val);
        return p->imatrix_path ? KLD_OK : kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    }
    kld_policy_rule r;
    memset(&r, 0, sizeof r);
    if (!strcmp(val, "keep")) {
        r.keep = true;
    } else if (!strcmp(val, "base")) {
        r.base = true;
    } else if (!type_lookup(val, &r.type)) {
        char vt[512];
        valid_types(vt, sizeof vt);
        return kld_fail(err, KLD_ERR_ARG, "policy '%s': unknown type '%s' for '%s' (valid: %s)",
                        p->text, val, item, vt);
    }
    kld_status s = parse_selector(p, item, &r, err);
    if (s) return s;
    const size_t n = strlen(item) + strlen(val) + 2;
    kld_policy_rule *nr = (r.text = malloc(n)) ? realloc(p->rules, (p->n_rules + 1) * sizeof *nr) : NULL;
    if (!nr) {
        free(r.glob);
        free(r.text);
        return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    }
    snprintf(r.text, n, "%s=%s", item, val);
    p->rules = nr;
    p->rules[p->n_rules++] = r;
    return KLD_OK;
}

kld_status kld_policy_parse(const char *text, kld_policy **out, kld_error *err) {
    *out = NULL;
    kld_policy *p = calloc(1, sizeof *p);
    char *copy = kld_strdup(text);
    if (!p || !copy || !(p->text = kld_strdup(text))) {
        free(p);
        free(copy);
        return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    }
    kld_status s = KLD_OK;
    char *save = NULL;
    char *base = strtok_r(copy, ",", &save);
    if (!base) {
        s = kld_fail(err, KLD_ERR_ARG, "policy '%s' is empty: it starts with a recipe (%s), a "
                     "type or keep", text, kld_recipe_names());
    } else if (!strcmp(base, "keep")) {
        p->base_keep = true;
    } else if ((p->recipe = kld_recipe_find(base)) == NULL && !type_lookup(base, &p->base_type)) {
        char vt[512];
        valid_types(vt, sizeof vt);
        s = kld_fail(err, KLD_ERR_ARG, "policy '%s': unknown base '%s' (a recipe: %s; or a type: %s)",
                     text, base, kld_recipe_names(), vt);
    }
    for (char *it; s == KLD_OK && (it = strtok_r(NULL, ",", &save)) != NULL;)
        s = parse_item(p, it, err);
    if (s == KLD_OK && text[strlen(text) - 1] == ',')
        s = kld_fail(err, KLD_ERR_ARG, "policy '%s': trailing ','", text);
    if (s == KLD_OK && strstr(text, ",,"))
        s = kld_fail(err, KLD_ERR_ARG, "policy '%s': empty item (',,')", text);
    free(copy);
    if (s) {
        kld_policy_free(p);
        return s;
    }
    *out = p;
    return KLD_OK;
}

void kld_policy_free(kld_policy *p) {
    if (!p) return;
    for (size_t i = 0; i < p->n_rules; i++) free(p->rules[i].glob), free(p->rules[i].text);
    free(p->rules);
    free(p->imatrix_path);
    free(p->text);
    free(p);
}
