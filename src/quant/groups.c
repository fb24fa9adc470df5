/* groups.c — the groups a sensitivity sweep scores (layers, tensor classes
 * or both, plus the embedding and the head), each as a policy selector, and
 * the policy of one group's arm: `BASE,*=UP,GROUP=base` (only the group at
 * the base's types, everything else at UP) or `BASE,GROUP=UP` (inverted),
 * UP being `keep` (the stored types) unless an upgrade type is given.
 * `base` keeps a recipe's positional choices (attn_v/ffn_down by layer) for
 * the group. */
#include "quant/quant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "attn_q" of "blk.3.attn_q.weight"; false for other names. */
static bool class_of(const char *name, int *layer, char *cls, size_t cap) {
    int used = 0;
    if (sscanf(name, "blk.%d.%n", layer, &used) != 1 || used == 0) return false;
    const char *s = name + used, *dot = strstr(s, ".weight");
    if (!dot || dot[7] || (size_t)(dot - s) >= cap) return false;
    snprintf(cls, cap, "%.*s", (int)(dot - s), s);
    return true;
}

static kld_quant_group *find_or_add(kld_quant_group **g, size_t *n, size_t *cap, const char *sel) {
    for (size_t i = 0; i < *n; i++)
        if (!strcmp((*g)[i].selector, sel)) return &(*g)[i];
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 32;
        kld_quant_group *p = realloc(*g, c * sizeof *p);
        if (!p) return NULL;
        *g = p;
        *cap = c;
    }
    kld_quant_group *e = &(*g)[(*n)++];
    memset(e, 0, sizeof *e);
    snprintf(e->selector, sizeof e->selector, "%s", sel);
    return e;
}

void kld_quant_item_group(const kld_quant_plan *plan, size_t i, kld_group_kind kind, char *sel,
                          size_t cap) {
    bool has_output = false;
    for (size_t j = 0; j < plan->n; j++) has_output |= !strcmp(plan->items[j].name, "output.weight");
    const char *name = plan->items[i].name;
    char cls[32];
    int layer;
    if (!strcmp(name, "token_embd.weight")) snprintf(sel, cap, has_output ? "embd" : "head");
    else if (!strcmp(name, "output.weight")) snprintf(sel, cap, "head");
    else if (class_of(name, &layer, cls, sizeof cls)) {
        if (kind == KLD_GROUPS_LAYERS) snprintf(sel, cap, "blk:%d", layer);
        else if (kind == KLD_GROUPS_CLASSES) snprintf(sel, cap, "%s", cls);
        else snprintf(sel, cap, "blk:%d.%s", layer, cls);
    } else {
        snprintf(sel, cap, "%s", name); /* a glob matching just this name */
    }
}

kld_status kld_quant_groups(const kld_quant_plan *plan, kld_group_kind kind,
                            kld_quant_group **out, size_t *n_out, kld_error *err) {
    *out = NULL;
    *n_out = 0;
    kld_quant_group *g = NULL;
    size_t n = 0, cap = 0;
    for (size_t i = 0; i < plan->n; i++) {
        const kld_quant_item *it = &plan->items[i];
        if (!it->eligible) continue;
        char sel[64];
        kld_quant_item_group(plan, i, kind, sel, sizeof sel);
        kld_quant_group *e = find_or_add(&g, &n, &cap, sel);
        if (!e) {
            free(g);
            return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
        }
        e->n_tensors++;
        e->base_bytes += it->dst_bytes;
        e->keep_bytes += it->t->nbytes;
    }
    *out = g;
    *n_out = n;
    return KLD_OK;
}

kld_status kld_quant_group_policy(const char *base, const kld_quant_group *g, bool invert,
                                  const char *upgrade, char *buf, size_t cap, kld_error *err) {
    const char *up = upgrade ? upgrade : "keep";
    int w = invert ? snprintf(buf, cap, "%s,%s=%s", base, g->selector, up)
                   : snprintf(buf, cap, "%s,*=%s,%s=base", base, up, g->selector);
    if (w < 0 || (size_t)w >= cap)
        return kld_fail(err, KLD_ERR_ARG, "policy for group '%s' does not fit %zu bytes", g->selector, cap);
    return KLD_OK;
}
