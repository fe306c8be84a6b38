/*
 * values_shared.c - Python's object sharing inside one region's value (values_internal.h, "object sharing").
 *
 * A transform inserts looked-up values themselves (transform.py), so a transform naming one dict twice gives an
 * output holding that object at two places, and decode_json_strings and tool typing, which edit dicts in place,
 * change it at both. The value layer copies looked-up values (a tree); only where `vshared_aliased` finds a dict
 * reachable twice does values_transform.c build the graph these helpers manage, run the steps on it and copy it
 * into a tree at the end.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "values_internal.h"

void vp_push(vptrs *s, cp_value *p) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        cp_value **v = realloc(s->v, cap * sizeof *v);
        if (!v) { s->oom = 1; return; }
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = p;
}

void vp_free(vptrs *s) {
    free(s->v);
    s->v = NULL;
    s->n = s->cap = 0;
}

void vg_drop(vptrs *g, cp_value *old) {
    if (!g) { cp_value_free(old); return; }
    vp_push(g, old);   /* (on allocation failure the node is not freed: it may be held elsewhere; g->oom says so) */
}

int vset_member(cp_value *d, const char *key, size_t n, cp_value *v, vptrs *g) {
    if (!g) return cp_object_set(d, key, n, v);
    for (size_t i = 0; i < cp_object_len(d); i++) {
        cp_member *m = (cp_member *)cp_object_at(d, i);
        if (m->key_len == n && memcmp(m->key, key, n) == 0) {
            vg_drop(g, m->value);
            m->value = v;
            return 0;
        }
    }
    return cp_object_set(d, key, n, v);
}

/* ---- a set of node pointers (open addressing) ---- */

static size_t ph(uintptr_t p, size_t cap) {
    uint64_t h = (uint64_t)p * 0x9E3779B97F4A7C15ULL;
    return (size_t)(h >> 17) & (cap - 1);
}

static int set_grow(uintptr_t **slots, size_t *cap, size_t want) {
    size_t c = *cap ? *cap : 64;
    while (c < want) c *= 2;
    uintptr_t *slot = calloc(c, sizeof *slot);
    if (!slot) return -1;
    for (size_t i = 0; i < *cap; i++) {
        if (!(*slots)[i]) continue;
        size_t j = ph((*slots)[i], c);
        while (slot[j]) j = (j + 1) & (c - 1);
        slot[j] = (*slots)[i];
    }
    free(*slots);
    *slots = slot;
    *cap = c;
    return 0;
}

/* 1 when added, 0 when already there, -1 on allocation failure */
static int set_add(uintptr_t **slots, size_t *cap, size_t *n, const void *p) {
    if ((*n + 1) * 2 > *cap && set_grow(slots, cap, (*n + 1) * 2) < 0) return -1;
    uintptr_t x = (uintptr_t)p;
    size_t j = ph(x, *cap);
    while ((*slots)[j]) {
        if ((*slots)[j] == x) return 0;
        j = (j + 1) & (*cap - 1);
    }
    (*slots)[j] = x;
    (*n)++;
    return 1;
}

static void push_children(vptrs *stack, cp_value *x) {
    if (cp_type_of(x) == CP_OBJECT)
        for (size_t k = 0; k < cp_object_len(x); k++) vp_push(stack, cp_object_at(x, k)->value);
    else if (cp_type_of(x) == CP_LIST)
        for (size_t k = 0; k < cp_list_len(x); k++) vp_push(stack, cp_list_get(x, k));
}

int vshared_aliased(const vptrs *sources) {
    /* every dict under every source, with multiplicity: a repeat is sharing (only dicts are edited in place) */
    uintptr_t *slot = NULL;
    size_t cap = 0, n = 0;
    vptrs stack = {0};
    int aliased = 0;
    for (size_t i = 0; i < sources->n && !aliased; i++) {
        vp_push(&stack, sources->v[i]);
        while (stack.n && !aliased && !stack.oom) {
            cp_value *x = stack.v[--stack.n];
            if (cp_type_of(x) == CP_OBJECT) {
                int r = set_add(&slot, &cap, &n, x);
                if (r < 0) { aliased = -1; break; }
                if (r == 0) { aliased = 1; break; }
            }
            push_children(&stack, x);
        }
        if (stack.oom) aliased = -1;
        stack.n = 0;
    }
    vp_free(&stack);
    free(slot);
    return aliased;
}

size_t vshared_count(const cp_value *v) {
    size_t n = 1;
    if (cp_type_of(v) == CP_OBJECT)
        for (size_t k = 0; k < cp_object_len(v); k++) n += vshared_count(cp_object_at(v, k)->value);
    else if (cp_type_of(v) == CP_LIST)
        for (size_t k = 0; k < cp_list_len(v); k++) n += vshared_count(cp_list_get(v, k));
    return n;
}

static int reserve(vptrs *s, size_t cap) {
    s->v = malloc(cap * sizeof *s->v);
    if (!s->v) return -1;
    s->cap = cap;
    return 0;
}

int vshared_init(vshared *sh, size_t nodes) {
    memset(sh, 0, sizeof *sh);
    size_t cap = nodes * 4 + 64;
    if (reserve(&sh->fresh, cap) < 0 || reserve(&sh->grave, cap) < 0 || reserve(&sh->all, cap) < 0 ||
        reserve(&sh->stack, cap) < 0 || set_grow(&sh->slot, &sh->slot_cap, cap * 2) < 0)
        return -1;
    return 0;
}

void vshared_free(vshared *sh, cp_value *const *roots, size_t n_roots) {
    vptrs *stack = &sh->stack, *all = &sh->all;
    stack->n = all->n = 0;
    for (size_t r = 0; r < n_roots + sh->fresh.n + sh->grave.n; r++) {
        cp_value *root = r < n_roots ? roots[r] : r < n_roots + sh->fresh.n ? sh->fresh.v[r - n_roots]
                                                   : sh->grave.v[r - n_roots - sh->fresh.n];
        if (!root) continue;
        vp_push(stack, root);
        while (stack->n) {
            cp_value *x = stack->v[--stack->n];
            if (!x) continue;
            int added = set_add(&sh->slot, &sh->slot_cap, &sh->slot_n, x);
            if (added <= 0) continue;   /* (seen; or no memory: then the node is not freed - a leak, never a double free) */
            vp_push(all, x);
            if (all->oom) continue;     /* (the same) */
            push_children(stack, x);
        }
    }
    /* each node once, its children detached first (cp_value_free of a NULL child does nothing) */
    for (size_t i = 0; i < all->n; i++) {
        cp_value *x = all->v[i];
        if (cp_type_of(x) == CP_OBJECT)
            for (size_t k = 0; k < x->u.object.len; k++) x->u.object.members[k].value = NULL;
        else if (cp_type_of(x) == CP_LIST)
            for (size_t k = 0; k < x->u.list.len; k++) x->u.list.items[k] = NULL;
        cp_value_free(x);
    }
    vp_free(&sh->fresh);
    vp_free(&sh->grave);
    vp_free(all);
    vp_free(stack);
    free(sh->slot);
    memset(sh, 0, sizeof *sh);
}
