/*
 * engine_tables.c - cp_eng: the engine's run-time form of validated tables
 * (the twin of the JavaScript Tables/Mode/Pattern classes and of
 * chatparse/runtime/regex/lead_assert.py's start guards).
 *
 * Built once from a cp_tables (every index of which the loader checked):
 * modes as flat uint32 arrays with the accepts as per-state lists, the
 * patterns the engine must run compiled (regex.h; a pattern that cannot run
 * is refused by name), start guards with their projected states (FORMAT.md
 * section 9, "Start guards"), the start anchor, and the content regexes the
 * value layer asks for through its regex hook. Read-only afterwards.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "engine.h"
#include "error.h"
#include "tables.h"

/* ------------------------------------------------------------------ helpers */

static const char *str_of(const cp_value *v, size_t *len) {
    size_t l = 0;
    const char *s = cp_string_bytes(v, &l);
    if (cp_type_of(v) != CP_STRING) s = NULL;
    if (len) *len = s ? l : 0;
    return s;
}

/* Python's source-level group scan (lead_assert.leading_assertion), on bytes. */
static size_t py_class_end(const char *s, size_t n, size_t i) {
    i++;
    if (i < n && s[i] == '^') i++;
    if (i < n && s[i] == ']') i++;
    while (i < n && s[i] != ']') i += s[i] == '\\' ? 2 : 1;
    return i + 1;
}

static long py_group_end(const char *s, size_t n, size_t i) {
    long depth = 0;
    while (i < n) {
        char c = s[i];
        if (c == '\\') {
            i += 2;
            continue;
        }
        if (c == '[') {
            i = py_class_end(s, n, i);
            continue;
        }
        if (c == '(') depth++;
        else if (c == ')') {
            depth--;
            if (depth == 0) return (long)(i + 1);
        }
        i++;
    }
    return -1;
}

static int py_top_level_bar(const char *s, size_t n, size_t i) {
    while (i < n) {
        char c = s[i];
        if (c == '|') return 1;
        if (c == '\\') i += 2;
        else if (c == '[') i = py_class_end(s, n, i);
        else if (c == '(') {
            long e = py_group_end(s, n, i);
            if (e < 0) return 1;
            i = (size_t)e;
        } else i++;
    }
    return 0;
}

/* The leading lookbehind of a Python source: its length, or 0. */
static size_t leading_assertion(const char *s, size_t n) {
    if (n < 4 || !(memcmp(s, "(?<=", 4) == 0 || memcmp(s, "(?<!", 4) == 0)) return 0;
    long end = py_group_end(s, n, 0);
    if (end < 0 || py_top_level_bar(s, n, (size_t)end)) return 0;
    return (size_t)end;
}

/* The leading lookbehind of a JavaScript translation: its length, or 0. */
static size_t js_leading_lookbehind(const char *s, size_t n) {
    if (!s || n < 4 || !(memcmp(s, "(?<=", 4) == 0 || memcmp(s, "(?<!", 4) == 0)) return 0;
    long depth = 0;
    size_t i = 0;
    while (i < n) {
        char c = s[i];
        if (c == '\\') i += 2;
        else if (c == '[') {
            i++;
            while (i < n && s[i] != ']') i += s[i] == '\\' ? 2 : 1;
            i++;
        } else {
            if (c == '(') depth++;
            else if (c == ')' && --depth == 0) return i + 1;
            i++;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ modes */

static int mode_has_acc(const cp_eng_mode *m, uint32_t s, uint32_t p) {
    for (uint32_t k = m->acc_off[s]; k < m->acc_off[s + 1]; k++)
        if ((m->acc_item[k] & 0x7FFFFFFFu) == p) return 1;
    return 0;
}

static int build_mode(cp_eng_mode *em, const cp_mode *fm, size_t n_classes) {
    uint32_t S = (uint32_t)fm->n_states, C = (uint32_t)n_classes, W = (uint32_t)fm->n_watched;
    em->n_states = S;
    em->n_classes = C;
    em->W = W;
    em->patterns = malloc((W ? W : 1) * sizeof *em->patterns);
    em->trans = malloc((size_t)S * C * sizeof *em->trans);
    em->eot = malloc(S * sizeof *em->eot);
    em->term = malloc(S);
    em->acc_off = malloc((S + 1) * sizeof *em->acc_off);
    size_t n_acc = 0;
    for (uint32_t s = 0; s < S; s++)
        for (uint32_t w = 0; w < W; w++)
            if (cp_mode_acc(fm, s, w) >= 0) n_acc++;
    em->acc_item = malloc((n_acc ? n_acc : 1) * sizeof *em->acc_item);
    if (!em->patterns || !em->trans || !em->eot || !em->term || !em->acc_off || !em->acc_item) return -1;
    for (uint32_t w = 0; w < W; w++) em->patterns[w] = (uint32_t)fm->watched[w];
    for (uint32_t s = 0; s < S; s++) {
        for (uint32_t c = 0; c < C; c++) em->trans[(size_t)s * C + c] = cp_mode_trans(fm, s, c, C);
        em->eot[s] = cp_mode_eot(fm, s);
        em->term[s] = (uint8_t)cp_mode_term(fm, s);
    }
    size_t k = 0;
    for (uint32_t s = 0; s < S; s++) {
        em->acc_off[s] = (uint32_t)k;
        for (uint32_t w = 0; w < W; w++) {
            int a = cp_mode_acc(fm, s, w);
            if (a >= 0) em->acc_item[k++] = w | ((uint32_t)(a == 1) << 31);
        }
    }
    em->acc_off[S] = (uint32_t)k;
    em->start0 = (uint32_t)fm->start0;
    em->startN = (uint32_t)fm->startN;
    return 0;
}

/* live[s * W + p]: some path from s (end of text included) still accepts p. */
static uint8_t *live_patterns(const cp_eng_mode *m) {
    uint32_t n = m->n_states, C = m->n_classes, W = m->W;
    uint8_t *live = calloc((size_t)n * (W ? W : 1), 1);
    /* predecessor lists (CSR) */
    uint32_t *deg = calloc((size_t)n + 1, sizeof *deg);
    if (!live || !deg) {
        free(live);
        free(deg);
        return NULL;
    }
    size_t edges = 0;
    for (uint32_t s = 1; s < n; s++) {
        for (uint32_t c = 0; c < C; c++) {
            uint32_t t = m->trans[(size_t)s * C + c];
            if (t) {
                deg[t]++;
                edges++;
            }
        }
        if (m->eot[s]) {
            deg[m->eot[s]]++;
            edges++;
        }
    }
    uint32_t *off = malloc(((size_t)n + 1) * sizeof *off);
    uint32_t *pred = malloc((edges ? edges : 1) * sizeof *pred);
    uint32_t *work = malloc(((size_t)n + edges + 1) * sizeof *work);
    if (!off || !pred || !work) {
        free(live);
        free(deg);
        free(off);
        free(pred);
        free(work);
        return NULL;
    }
    uint32_t acc = 0;
    for (uint32_t s = 0; s < n; s++) {
        off[s] = acc;
        acc += deg[s];
        deg[s] = off[s];
    }
    off[n] = acc;
    for (uint32_t s = 1; s < n; s++) {
        for (uint32_t c = 0; c < C; c++) {
            uint32_t t = m->trans[(size_t)s * C + c];
            if (t) pred[deg[t]++] = s;
        }
        if (m->eot[s]) pred[deg[m->eot[s]]++] = s;
    }
    size_t top = 0;
    for (uint32_t s = 0; s < n; s++) {
        for (uint32_t k = m->acc_off[s]; k < m->acc_off[s + 1]; k++) live[(size_t)s * W + (m->acc_item[k] & 0x7FFFFFFFu)] = 1;
        if (m->acc_off[s + 1] > m->acc_off[s]) work[top++] = s;
    }
    /* work list: a state is pushed again only when its set grew (bounded by n * W pushes) */
    size_t cap = (size_t)n + edges + 1;
    while (top) {
        uint32_t t = work[--top];
        for (uint32_t k = off[t]; k < off[t + 1]; k++) {
            uint32_t s = pred[k];
            int changed = 0;
            for (uint32_t p = 0; p < W; p++)
                if (live[(size_t)t * W + p] && !live[(size_t)s * W + p]) {
                    live[(size_t)s * W + p] = 1;
                    changed = 1;
                }
            if (changed) {
                if (top == cap) {
                    size_t nc = cap * 2;
                    uint32_t *w2 = realloc(work, nc * sizeof *w2);
                    if (!w2) {
                        free(live);
                        live = NULL;
                        goto done;
                    }
                    work = w2;
                    cap = nc;
                }
                work[top++] = s;
            }
        }
    }
done:
    free(deg);
    free(off);
    free(pred);
    free(work);
    return live;
}

/* ------------------------------------------------------------------ projection */

#define MAX_LOOKBEHINDS 6
#define MAX_EXTRA_STATES 4096
#define MAX_EXTRA_CELLS (1u << 21)

typedef struct prow {
    uint32_t *row;          /* NULL for a terminal state */
    uint32_t eot;
    uint32_t *acc;          /* items */
    uint32_t n_acc;
    int term;
} prow;

typedef struct pkey {
    uint32_t s;
    uint8_t *mask;
    uint32_t sid;
} pkey;

typedef struct projection {
    const cp_eng_mode *m;
    const uint8_t *live;
    uint32_t n, W;
    prow *rows;
    size_t n_rows, cap_rows;
    pkey *memo;
    size_t n_memo, cap_memo;
    size_t *hidx;           /* open addressing over memo: index + 1, 0 empty */
    size_t hcap;            /* a power of two, > 2 * n_memo */
    uint32_t *row_stamp;    /* per original state: the row being built that mapped it ... */
    uint32_t *row_val;      /* ... and to what */
    uint32_t stamp;
    struct { uint32_t s, sid; uint8_t *mask; } *todo;
    size_t n_todo, cap_todo;
    int too_many, oom;
} projection;

static void proj_free(projection *pj) {
    for (size_t i = 0; i < pj->n_rows; i++) {
        free(pj->rows[i].row);
        free(pj->rows[i].acc);
    }
    free(pj->rows);
    for (size_t i = 0; i < pj->n_memo; i++) free(pj->memo[i].mask);
    free(pj->memo);
    free(pj->hidx);
    free(pj->row_stamp);
    free(pj->row_val);
    free(pj->todo);
}

static size_t memo_hash(uint32_t s, const uint8_t *mask, uint32_t W) {
    uint64_t h = 1469598103934665603ull ^ s;
    for (uint32_t p = 0; p < W; p++) h = (h ^ mask[p]) * 1099511628211ull;
    h ^= h >> 29;
    return (size_t)h;
}

static long proj_id(projection *pj, uint32_t s, const uint8_t *mask) {
    const cp_eng_mode *m = pj->m;
    uint32_t W = pj->W, C = m->n_classes;
    if (s == 0) return 0;
    int touches = 0;
    for (uint32_t p = 0; p < W; p++)
        if (mask[p] && pj->live[(size_t)s * W + p]) touches = 1;
    if (!touches) return s;
    size_t h = memo_hash(s, mask, W);
    if (pj->hcap)
        for (size_t q = h & (pj->hcap - 1); pj->hidx[q]; q = (q + 1) & (pj->hcap - 1)) {
            const pkey *k = &pj->memo[pj->hidx[q] - 1];
            if (k->s == s && memcmp(k->mask, mask, W) == 0) return k->sid;
        }
    /* hits: the accepts of s outside the mask; future: patterns outside the mask some next step can still reach */
    uint32_t n_hits = 0;
    for (uint32_t k = m->acc_off[s]; k < m->acc_off[s + 1]; k++)
        if (!mask[m->acc_item[k] & 0x7FFFFFFFu]) n_hits++;
    int future = 0;
    {
        uint32_t t = m->eot[s];
        if (t)
            for (uint32_t p = 0; p < W && !future; p++)
                if (!mask[p] && pj->live[(size_t)t * W + p]) future = 1;
        for (uint32_t c = 0; c < C && !future; c++) {
            t = m->trans[(size_t)s * C + c];
            if (!t) continue;
            for (uint32_t p = 0; p < W; p++)
                if (!mask[p] && pj->live[(size_t)t * W + p]) {
                    future = 1;
                    break;
                }
        }
    }
    uint32_t sid;
    if (!n_hits && !future) sid = 0;
    else {
        if (pj->n_rows >= MAX_EXTRA_STATES || (pj->n_rows + 1) * (size_t)C > MAX_EXTRA_CELLS) {
            pj->too_many = 1;
            return -1;
        }
        if (pj->n_rows == pj->cap_rows) {
            size_t cap = pj->cap_rows ? pj->cap_rows * 2 : 16;
            prow *r = realloc(pj->rows, cap * sizeof *r);
            if (!r) {
                pj->oom = 1;
                return -1;
            }
            pj->rows = r;
            pj->cap_rows = cap;
        }
        sid = pj->n + (uint32_t)pj->n_rows;
        prow *r = &pj->rows[pj->n_rows++];
        memset(r, 0, sizeof *r);
        r->acc = malloc((n_hits ? n_hits : 1) * sizeof *r->acc);
        if (!r->acc) {
            pj->oom = 1;
            return -1;
        }
        for (uint32_t k = m->acc_off[s]; k < m->acc_off[s + 1]; k++)
            if (!mask[m->acc_item[k] & 0x7FFFFFFFu]) r->acc[r->n_acc++] = m->acc_item[k];
        r->term = !future;
        if (future) {
            if (pj->n_todo == pj->cap_todo) {
                size_t cap = pj->cap_todo ? pj->cap_todo * 2 : 16;
                void *t = realloc(pj->todo, cap * sizeof *pj->todo);
                if (!t) {
                    pj->oom = 1;
                    return -1;
                }
                pj->todo = t;
                pj->cap_todo = cap;
            }
        }
    }
    if (pj->n_memo == pj->cap_memo) {
        size_t cap = pj->cap_memo ? pj->cap_memo * 2 : 16;
        pkey *k = realloc(pj->memo, cap * sizeof *k);
        if (!k) {
            pj->oom = 1;
            return -1;
        }
        pj->memo = k;
        pj->cap_memo = cap;
    }
    uint8_t *mk = malloc(W ? W : 1);
    if (!mk) {
        pj->oom = 1;
        return -1;
    }
    memcpy(mk, mask, W);
    pj->memo[pj->n_memo].s = s;
    pj->memo[pj->n_memo].mask = mk;
    pj->memo[pj->n_memo].sid = sid;
    pj->n_memo++;
    if (2 * pj->n_memo >= pj->hcap) {
        size_t cap = pj->hcap ? pj->hcap * 2 : 64;
        size_t *hx = calloc(cap, sizeof *hx);
        if (!hx) {
            pj->oom = 1;
            return -1;
        }
        for (size_t i = 0; i < pj->n_memo; i++) {
            size_t q = memo_hash(pj->memo[i].s, pj->memo[i].mask, W) & (cap - 1);
            while (hx[q]) q = (q + 1) & (cap - 1);
            hx[q] = i + 1;
        }
        free(pj->hidx);
        pj->hidx = hx;
        pj->hcap = cap;
    } else {
        size_t q = h & (pj->hcap - 1);
        while (pj->hidx[q]) q = (q + 1) & (pj->hcap - 1);
        pj->hidx[q] = pj->n_memo;
    }
    if (sid && future) {
        pj->todo[pj->n_todo].s = s;
        pj->todo[pj->n_todo].sid = sid;
        pj->todo[pj->n_todo].mask = mk;
        pj->n_todo++;
    }
    return sid;
}

static long proj_state(projection *pj, uint32_t s, const uint8_t *mask) {
    long first = proj_id(pj, s, mask);
    if (first < 0) return -1;
    const cp_eng_mode *m = pj->m;
    uint32_t C = m->n_classes;
    while (pj->n_todo) {
        pj->n_todo--;
        uint32_t s0 = pj->todo[pj->n_todo].s, sid = pj->todo[pj->n_todo].sid;
        const uint8_t *mk = pj->todo[pj->n_todo].mask;
        uint32_t *row = malloc((size_t)C * sizeof *row);
        if (!row) {
            pj->oom = 1;
            return -1;
        }
        if (!pj->row_stamp) {
            pj->row_stamp = calloc(pj->n ? pj->n : 1, sizeof *pj->row_stamp);
            pj->row_val = calloc(pj->n ? pj->n : 1, sizeof *pj->row_val);
            if (!pj->row_stamp || !pj->row_val) {
                free(row);
                pj->oom = 1;
                return -1;
            }
        }
        uint32_t stamp = ++pj->stamp;
        for (uint32_t c = 0; c < C; c++) {
            /* the same target earlier in the row maps alike */
            uint32_t t = m->trans[(size_t)s0 * C + c];
            if (pj->row_stamp[t] == stamp) {
                row[c] = pj->row_val[t];
                continue;
            }
            long v = proj_id(pj, t, mk);
            if (v < 0) {
                free(row);
                return -1;
            }
            pj->row_stamp[t] = stamp;
            pj->row_val[t] = (uint32_t)v;
            row[c] = (uint32_t)v;
        }
        long e = proj_id(pj, m->eot[s0], mk);
        if (e < 0) {
            free(row);
            return -1;
        }
        prow *r = &pj->rows[sid - pj->n];
        r->row = row;
        r->eot = (uint32_t)e;
    }
    return first;
}

/* Append the projected states to the mode. */
static int proj_install(projection *pj, cp_eng_mode *m) {
    if (!pj->n_rows) return 0;
    uint32_t C = m->n_classes, n = m->n_states, total = n + (uint32_t)pj->n_rows;
    size_t extra_acc = 0;
    for (size_t i = 0; i < pj->n_rows; i++) extra_acc += pj->rows[i].n_acc;
    uint32_t *trans = realloc(m->trans, (size_t)total * C * sizeof *trans);
    if (!trans) return -1;
    m->trans = trans;
    uint32_t *eot = realloc(m->eot, total * sizeof *eot);
    if (!eot) return -1;
    m->eot = eot;
    uint8_t *term = realloc(m->term, total);
    if (!term) return -1;
    m->term = term;
    uint32_t *off = realloc(m->acc_off, ((size_t)total + 1) * sizeof *off);
    if (!off) return -1;
    m->acc_off = off;
    size_t base = off[n];
    uint32_t *items = realloc(m->acc_item, (base + extra_acc + 1) * sizeof *items);
    if (!items) return -1;
    m->acc_item = items;
    size_t k = base;
    for (size_t i = 0; i < pj->n_rows; i++) {
        prow *r = &pj->rows[i];
        uint32_t s = n + (uint32_t)i;
        if (r->row) memcpy(trans + (size_t)s * C, r->row, (size_t)C * sizeof *trans);
        else memset(trans + (size_t)s * C, 0, (size_t)C * sizeof *trans);
        eot[s] = r->eot;
        term[s] = (uint8_t)r->term;
        off[s] = (uint32_t)k;
        for (uint32_t a = 0; a < r->n_acc; a++) items[k++] = r->acc[a];
    }
    off[total] = (uint32_t)k;
    m->n_states = total;
    return 0;
}

/* ------------------------------------------------------------------ start guards */

typedef struct guard_ctx {
    cp_eng *eng;
    const cp_tables *t;
    size_t *lb_len;            /* per local pattern: its leading lookbehind (Python source) length, 0 none */
    const char **lb_src;
    const cp_rx **lb_rx;       /* per local pattern: its compiled (JS) lookbehind */
    size_t n_distinct;         /* distinct lookbehind sources in the mode */
} guard_ctx;

/* The compiled lookbehinds of a mode, per local pattern (NULL: none). Returns 0 (unguarded mode: all NULL),
 * 1 (some), -1 (out of memory). */
static int mode_lookbehinds(cp_eng *eng, const cp_tables *t, const cp_eng_mode *m, guard_ctx *g) {
    uint32_t W = m->W;
    g->lb_len = calloc(W ? W : 1, sizeof *g->lb_len);
    g->lb_src = calloc(W ? W : 1, sizeof *g->lb_src);
    g->lb_rx = calloc(W ? W : 1, sizeof *g->lb_rx);
    if (!g->lb_len || !g->lb_src || !g->lb_rx) return -1;
    int any = 0;
    for (uint32_t j = 0; j < W; j++) {
        const cp_pattern *p = &t->patterns[m->patterns[j]];
        size_t n = leading_assertion(p->source, p->source_len);
        if (n) {
            g->lb_len[j] = n;
            g->lb_src[j] = p->source;
            any = 1;
        }
    }
    if (!any) return 0;
    const cp_value *jsp = cp_object_get_cstr(t->js, "patterns");
    g->n_distinct = 0;
    for (uint32_t j = 0; j < W; j++) {
        if (!g->lb_len[j]) continue;
        /* the same Python lookbehind as an earlier pattern shares its compiled form */
        int shared = 0;
        for (uint32_t q = 0; q < j; q++)
            if (g->lb_len[q] == g->lb_len[j] && memcmp(g->lb_src[q], g->lb_src[j], g->lb_len[j]) == 0 && g->lb_rx[q]) {
                g->lb_rx[j] = g->lb_rx[q];
                shared = 1;
                break;
            }
        if (shared) continue;
        const cp_value *tr = cp_list_get(jsp, m->patterns[j]);
        size_t sl = 0;
        const char *js = cp_object_get_cstr(tr, "error") ? NULL : str_of(cp_object_get_cstr(tr, "source"), &sl);
        size_t lb = js_leading_lookbehind(js, sl);
        if (!lb) goto unguarded;
        cp_error e = {0};
        cp_rx *rx = cp_rx_compile_source(js, lb, "lookbehind", &e);
        if (!rx) goto unguarded;
        cp_rx **l = realloc(eng->lookbehinds, (eng->n_lookbehinds + 1) * sizeof *l);
        if (!l) {
            cp_rx_free(rx);
            return -1;
        }
        eng->lookbehinds = l;
        l[eng->n_lookbehinds++] = rx;
        g->lb_rx[j] = rx;
        g->n_distinct++;
    }
    return 1;
unguarded:
    for (uint32_t j = 0; j < W; j++) g->lb_rx[j] = NULL;
    return 0;
}

static void guard_ctx_free(guard_ctx *g) {
    free(g->lb_len);
    free(g->lb_src);
    free(g->lb_rx);
}

typedef struct target_guard {
    uint32_t target;
    int has;                  /* some guarded candidate */
    size_t n_rx;
    const cp_rx **rxs;
    uint8_t **bits;           /* per rx: mask of its candidate patterns */
    int every;
    uint32_t *by_failed;      /* NULL: none */
} target_guard;

static void tg_free(target_guard *g) {
    if (g->bits)
        for (size_t j = 0; j < g->n_rx; j++) free(g->bits[j]);
    free(g->bits);
    free(g->rxs);
    free(g->by_failed);
}

/* leadStarts of the JavaScript runtime: per class the guard of an attempt starting in `start`, installed
 * into m->lead (or lead0). 0, or -1 out of memory. */
static int lead_starts(cp_eng *eng, const cp_tables *t, cp_eng_mode *m, uint32_t start, int for_start0) {
    guard_ctx g = {0};
    int r = mode_lookbehinds(eng, t, m, &g);
    if (r <= 0) {
        guard_ctx_free(&g);
        return r;
    }
    uint32_t W = m->W, C = m->n_classes;
    uint8_t *live = live_patterns(m);
    if (!live) {
        guard_ctx_free(&g);
        return -1;
    }
    uint8_t *nullable = calloc(W ? W : 1, 1);
    target_guard *tgs = NULL;
    size_t n_tg = 0;
    uint32_t *cls_tg = malloc((size_t)C * sizeof *cls_tg);
    uint8_t *ps = malloc(W ? W : 1);
    int rc = -1;
    projection pj = {0};
    if (!nullable || !cls_tg || !ps) goto out;
    for (uint32_t p = 0; p < W; p++)
        if (mode_has_acc(m, start, p)) nullable[p] = live[(size_t)start * W + p];
    tgs = calloc(C ? C : 1, sizeof *tgs);
    if (!tgs) goto out;
    for (uint32_t c = 0; c < C; c++) {
        uint32_t tt = m->trans[(size_t)start * C + c];
        size_t k = 0;
        while (k < n_tg && tgs[k].target != tt) k++;
        cls_tg[c] = (uint32_t)k;
        if (k < n_tg) continue;
        target_guard *tg = &tgs[n_tg++];
        tg->target = tt;
        size_t n_ps = 0, n_guarded = 0;
        for (uint32_t p = 0; p < W; p++) {
            ps[p] = nullable[p] || (tt && live[(size_t)tt * W + p]);
            if (ps[p]) {
                n_ps++;
                if (g.lb_rx[p]) n_guarded++;
            }
        }
        if (!n_guarded) continue;
        tg->has = 1;
        tg->every = n_guarded == n_ps;
        tg->rxs = calloc(W, sizeof *tg->rxs);
        tg->bits = calloc(W, sizeof *tg->bits);
        if (!tg->rxs || !tg->bits) goto out;
        for (uint32_t p = 0; p < W; p++) {
            if (!ps[p] || !g.lb_rx[p]) continue;
            size_t j = 0;
            while (j < tg->n_rx && tg->rxs[j] != g.lb_rx[p]) j++;
            if (j == tg->n_rx) {
                tg->rxs[j] = g.lb_rx[p];
                tg->bits[j] = calloc(W, 1);
                if (!tg->bits[j]) goto out;
                tg->n_rx++;
            }
            tg->bits[j][p] = 1;
        }
    }
    int project = g.n_distinct <= MAX_LOOKBEHINDS;
    if (project) {
        pj.m = m;
        pj.live = live;
        pj.n = m->n_states;
        pj.W = W;
        uint8_t *mask = malloc(W ? W : 1);
        if (!mask) goto out;
        for (size_t k = 0; k < n_tg && project; k++) {
            target_guard *tg = &tgs[k];
            if (!tg->has) continue;
            size_t nb = (size_t)1 << tg->n_rx;
            tg->by_failed = malloc(nb * sizeof *tg->by_failed);
            if (!tg->by_failed) {
                free(mask);
                goto out;
            }
            tg->by_failed[0] = start;
            for (size_t bits = 1; bits < nb; bits++) {
                if (tg->every && bits == nb - 1) {
                    tg->by_failed[bits] = 0;
                    continue;
                }
                memset(mask, 0, W);
                for (size_t j = 0; j < tg->n_rx; j++)
                    if ((bits >> j) & 1)
                        for (uint32_t p = 0; p < W; p++)
                            if (tg->bits[j][p]) mask[p] = 1;
                long st = proj_state(&pj, start, mask);
                if (st < 0) {
                    if (pj.oom) {
                        free(mask);
                        goto out;
                    }
                    project = 0; /* too many states: the all-guarded rule alone */
                    break;
                }
                tg->by_failed[bits] = (uint32_t)st;
            }
        }
        free(mask);
        if (project && proj_install(&pj, m) < 0) goto out;
    }
    if (!project) {
        for (size_t k = 0; k < n_tg; k++) {
            target_guard *tg = &tgs[k];
            free(tg->by_failed);
            tg->by_failed = NULL;
            if (!tg->has || !tg->every) continue;
            size_t nb = (size_t)1 << tg->n_rx;
            tg->by_failed = malloc(nb * sizeof *tg->by_failed);
            if (!tg->by_failed) goto out;
            for (size_t bits = 0; bits + 1 < nb; bits++) tg->by_failed[bits] = start;
            tg->by_failed[nb - 1] = 0;
        }
    }
    /* the guards that change something, per class */
    size_t n_store = 0;
    for (size_t k = 0; k < n_tg; k++) {
        target_guard *tg = &tgs[k];
        int useful = 0;
        if (tg->has && tg->by_failed) {
            size_t nb = (size_t)1 << tg->n_rx;
            for (size_t b = 0; b < nb; b++)
                if (tg->by_failed[b] != start) useful = 1;
        }
        if (!useful) {
            free(tg->by_failed);
            tg->by_failed = NULL;
        } else n_store++;
    }
    rc = 0;
    if (n_store) {
        cp_eng_lead *store = calloc(n_store, sizeof *store);
        cp_eng_lead **per = calloc(C, sizeof *per);
        if (!store || !per) {
            free(store);
            free(per);
            rc = -1;
            goto out;
        }
        size_t w = 0;
        size_t *slot = malloc(n_tg * sizeof *slot);
        if (!slot) {
            free(store);
            free(per);
            rc = -1;
            goto out;
        }
        for (size_t k = 0; k < n_tg; k++) {
            slot[k] = (size_t)-1;
            if (!tgs[k].by_failed) continue;
            store[w].n_rx = tgs[k].n_rx;
            store[w].rxs = tgs[k].rxs;
            store[w].by_failed = tgs[k].by_failed;
            tgs[k].rxs = NULL;
            tgs[k].by_failed = NULL;
            slot[k] = w++;
        }
        for (uint32_t c = 0; c < C; c++)
            per[c] = slot[cls_tg[c]] == (size_t)-1 ? NULL : &store[slot[cls_tg[c]]];
        free(slot);
        if (for_start0) {
            m->lead0 = per;
            m->lead_store0 = store;
            m->n_lead_store0 = n_store;
        } else {
            m->lead = per;
            m->lead_store = store;
            m->n_lead_store = n_store;
        }
    }
out:
    if (tgs)
        for (size_t k = 0; k < n_tg; k++) tg_free(&tgs[k]);
    free(tgs);
    proj_free(&pj);
    free(cls_tg);
    free(ps);
    free(nullable);
    free(live);
    guard_ctx_free(&g);
    return rc;
}

/* ------------------------------------------------------------------ content regexes (the value layer's hook) */

typedef struct hook_match {
    cp_vmatch vm;
    const cp_rx *rx;
    const cp_rx_match *m;
} hook_match;

static int hook_group(const cp_vmatch *vm, const char *name, size_t *s, size_t *e) {
    const hook_match *h = (const hook_match *)vm;
    return cp_rx_group_span(h->rx, h->m, name, s, e);
}

typedef struct hook_iter {
    const cp_rx *rx;
    int (*on_match)(void *arg, const cp_vmatch *m);
    void *arg;
} hook_iter;

static int hook_each(void *ctx, const cp_rx_match *m) {
    hook_iter *it = ctx;
    hook_match h;
    h.vm.start = m->start;
    h.vm.end = m->end;
    h.vm.group = hook_group;
    h.vm.impl = &h;
    h.rx = it->rx;
    h.m = m;
    return it->on_match(it->arg, &h.vm) ? 1 : 0;
}

static int hook_finditer(void *ctx, const cp_value *pattern, const char *text, size_t len,
                         int (*on_match)(void *arg, const cp_vmatch *m), void *arg, cp_error *err) {
    const cp_eng *eng = ctx;
    size_t pl = 0;
    const char *ps = str_of(pattern, &pl);
    if (!ps) {
        cp_error_set(err, "TypeError", "first argument must be a string or compiled pattern");
        return -1;
    }
    const cp_eng_content_rx *c = NULL;
    for (size_t i = 0; i < eng->n_content; i++)
        if (eng->content[i].len == pl && memcmp(eng->content[i].pattern, ps, pl) == 0) c = &eng->content[i];
    if (!c) {
        cp_error_set(err, "ValueError", "pattern cannot run in C: the table file has no translation of this tag_pattern");
        return -1;
    }
    if (!c->rx) {
        cp_error_set(err, c->exception, "%s", c->error ? c->error : "");
        return -1;
    }
    hook_iter it = {c->rx, on_match, arg};
    cp_rx_match m;
    cp_rx_match_init(&m);
    int r = cp_rx_finditer(c->rx, text, len, &m, hook_each, &it, err);
    cp_rx_match_fini(&m);
    return r == 0 ? 0 : -1;
}

static int build_content(cp_eng *eng, const cp_value *content) {
    size_t n = cp_object_len(content);
    if (!n) return 0;
    eng->content = calloc(n, sizeof *eng->content);
    if (!eng->content) return -1;
    for (size_t i = 0; i < n; i++) {
        const cp_member *mb = cp_object_at(content, i);
        cp_eng_content_rx *c = &eng->content[i];
        eng->n_content = i + 1;
        c->pattern = malloc(mb->key_len + 1);
        if (!c->pattern) return -1;
        memcpy(c->pattern, mb->key, mb->key_len + 1);
        c->len = mb->key_len;
        size_t el = 0;
        const char *es = str_of(cp_object_get_cstr(mb->value, "error"), &el);
        if (es && el >= 13 && memcmp(es, "invalid regex", 13) == 0) {
            /* the reference raises regex.error when such a tag_pattern is used */
            snprintf(c->exception, sizeof c->exception, "error");
            c->error = malloc(el + 1);
            if (!c->error) return -1;
            memcpy(c->error, es, el);
            c->error[el] = 0;
            continue;
        }
        cp_error e = {0};
        c->rx = cp_rx_compile(mb->value, "pattern", &e);
        if (!c->rx) {
            snprintf(c->exception, sizeof c->exception, "%s", e.exception);
            size_t ml = strlen(e.message);
            c->error = malloc(ml + 1);
            if (!c->error) return -1;
            memcpy(c->error, e.message, ml + 1);
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ \w from the port section */

/* One atom of the js.word class (FORMAT.md section 7): a code point, `\` and one of `\ ] [ - ^`, or `\u{H}`.
 * -1 when malformed. */
static long word_atom(const char *s, size_t n, size_t *i) {
    if (*i >= n) return -1;
    if (s[*i] == '\\') {
        if (*i + 1 >= n) return -1;
        char c = s[*i + 1];
        if (c == 'u') {
            size_t j = *i + 2;
            if (j >= n || s[j] != '{') return -1;
            j++;
            long v = 0;
            int nd = 0;
            while (j < n && s[j] != '}') {
                char h = s[j];
                int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                        : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
                if (d < 0 || ++nd > 6) return -1;
                v = v * 16 + d;
                j++;
            }
            if (j >= n || nd == 0 || v > 0x10FFFF) return -1;
            *i = j + 1;
            return v;
        }
        if (!strchr("\\][-^", c)) return -1;
        *i += 2;
        return (unsigned char)c;
    }
    int32_t c = cp_utf8_decode(s, n, i, 0);
    return c < 0 ? -1 : c;
}

static int range_cmp(const void *a, const void *b) {
    const uint32_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Parse js.word into sorted, merged ranges; 0, or -1 (malformed or out of memory: the built-in table then). */
static int build_word(cp_eng *eng, const cp_value *word) {
    size_t n = 0;
    const char *s = str_of(word, &n);
    if (!s || n < 2 || s[0] != '[' || s[n - 1] != ']') return -1;
    size_t i = 1, end = n - 1;
    int negated = 0;
    if (i < end && s[i] == '^') {
        negated = 1;
        i++;
    }
    size_t cap = 64, k = 0;
    uint32_t *r = malloc(cap * 2 * sizeof *r);
    if (!r) return -1;
    while (i < end) {
        long lo = word_atom(s, end, &i), hi = lo;
        if (lo < 0) goto bad;
        if (i + 1 < end && s[i] == '-') {
            i++;
            hi = word_atom(s, end, &i);
            if (hi < lo) goto bad;
        }
        if (k == cap) {
            cap *= 2;
            uint32_t *q = realloc(r, cap * 2 * sizeof *q);
            if (!q) goto bad;
            r = q;
        }
        r[2 * k] = (uint32_t)lo;
        r[2 * k + 1] = (uint32_t)hi;
        k++;
    }
    qsort(r, k, 2 * sizeof *r, range_cmp);
    size_t w = 0;
    for (size_t q = 0; q < k; q++) {
        if (w && r[2 * q] <= r[2 * (w - 1) + 1] + 1) {
            if (r[2 * q + 1] > r[2 * (w - 1) + 1]) r[2 * (w - 1) + 1] = r[2 * q + 1];
        } else {
            r[2 * w] = r[2 * q];
            r[2 * w + 1] = r[2 * q + 1];
            w++;
        }
    }
    eng->word_ranges = r;
    eng->n_word_ranges = w;
    eng->word_negated = negated;
    return 0;
bad:
    free(r);
    return -1;
}

static int word_hook(void *ctx, uint32_t cp) {
    const cp_eng *eng = ctx;
    size_t lo = 0, hi = eng->n_word_ranges;
    int in = 0;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (eng->word_ranges[2 * mid + 1] < cp) lo = mid + 1;
        else hi = mid;
    }
    if (lo < eng->n_word_ranges && eng->word_ranges[2 * lo] <= cp) in = 1;
    return in != eng->word_negated;
}

/* ------------------------------------------------------------------ anchor */

static int by_len_desc(const void *a, const void *b) {
    const size_t *x = a, *y = b; /* [cp length, index] pairs */
    if (x[0] != y[0]) return x[0] > y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

static cp_rx *build_anchor(cp_eng *eng, const cp_tables *t, cp_error *err) {
    const cp_value *anchor = cp_object_get_cstr(t->spec, "start_anchor");
    const cp_value *lits = cp_object_get_cstr(anchor, "literals");
    if (lits) {
        size_t n = cp_list_len(lits);
        size_t *order = malloc((n ? n : 1) * 2 * sizeof *order);
        if (!order) {
            cp_error_oom(err);
            return NULL;
        }
        for (size_t i = 0; i < n; i++) {
            order[2 * i] = cp_string_length(cp_list_get(lits, i));
            order[2 * i + 1] = i;
        }
        qsort(order, n, 2 * sizeof *order, by_len_desc);
        cp_buf b = {0};
        for (size_t k = 0; k < n; k++) {
            if (k) cp_buf_putc(&b, '|');
            size_t l = 0;
            const char *s = str_of(cp_list_get(lits, order[2 * k + 1]), &l);
            size_t i = 0;
            while (s && i < l) {
                int32_t c = cp_utf8_decode(s, l, &i, 1);
                if (c < 0) c = 0xFFFD;
                cp_buf_printf(&b, "\\u{%X}", (unsigned)c);
            }
        }
        free(order);
        if (b.failed) {
            cp_buf_free(&b);
            cp_error_oom(err);
            return NULL;
        }
        cp_rx *rx = cp_rx_compile_source(b.data ? b.data : "", b.len, "start_anchor", err);
        cp_buf_free(&b);
        eng->anchor_is_pattern = 0;
        return rx;
    }
    eng->anchor_is_pattern = 1;
    return cp_rx_compile(cp_object_get_cstr(t->js, "anchor"), "start_anchor_pattern", err);
}

/* ------------------------------------------------------------------ build */

static const char *const STREAMABLE[] = {"text", "int", "float", "bool"};

/* m->sflags and m->start_step (engine.h) of a mode with can_start. 0, or -1 (out of memory). */
static int build_steps(cp_eng_mode *m) {
    m->sflags = malloc(m->n_states ? m->n_states : 1);
    m->start_step = malloc((m->n_classes ? m->n_classes : 1) * sizeof *m->start_step);
    if (!m->sflags || !m->start_step) return -1;
    for (uint32_t s = 0; s < m->n_states; s++)
        m->sflags[s] = (uint8_t)((m->acc_off[s + 1] > m->acc_off[s]) | (m->term[s] ? 2 : 0));
    const uint32_t startN = m->startN;
    for (uint32_t c = 0; c < m->n_classes; c++) {
        uint32_t st = 0;
        if (!m->can_start[c]) st = 0;
        else if (m->lead && m->lead[c]) st = CP_STEP_BAIL;
        else if (!startN) st = 0;
        else if (m->sflags[startN] & 1) st = CP_STEP_BAIL;
        else if (m->sflags[startN] & 2) st = 0;
        else if ((st = m->trans[(size_t)startN * m->n_classes + c]) != 0)
            st = m->sflags[st] & 1 ? CP_STEP_BAIL : m->sflags[st] & 2 ? 0 : st;
        m->start_step[c] = st;
    }
    return 0;
}

cp_eng *cp_eng_build(const cp_tables *t, cp_error *err) {
    cp_eng *eng = calloc(1, sizeof *eng);
    if (!eng) {
        cp_error_oom(err);
        return NULL;
    }
    eng->spec = t->spec;
    eng->defaults = cp_object_get_cstr(t->spec, "defaults");
    const cp_value *fields = cp_object_get_cstr(t->spec, "fields");
    size_t nf = cp_list_len(fields);
    eng->n_fields = nf;
    eng->fields = calloc(nf ? nf : 1, sizeof *eng->fields);
    eng->field_names = calloc(nf ? nf : 1, sizeof *eng->field_names);
    eng->field_name_lens = calloc(nf ? nf : 1, sizeof *eng->field_name_lens);
    eng->dirty = calloc(nf ? nf : 1, 1);
    eng->close_json_end = calloc(nf ? nf : 1, 1);
    eng->on_error = calloc(nf ? nf : 1, 1);
    if (!eng->fields || !eng->field_names || !eng->field_name_lens || !eng->dirty || !eng->close_json_end ||
        !eng->on_error)
        goto oom;
    eng->implicit = -1;
    size_t il = 0;
    const char *implicit = str_of(cp_object_get_cstr(t->spec, "implicit"), &il);
    for (size_t i = 0; i < nf; i++) {
        const cp_value *f = cp_list_get(fields, i);
        eng->fields[i] = f;
        eng->field_names[i] = str_of(cp_object_get_cstr(f, "name"), &eng->field_name_lens[i]);
        if (!eng->field_names[i]) eng->field_names[i] = "";
        const cp_value *content = cp_object_get_cstr(f, "content");
        int streamable = 0;
        for (size_t k = 0; k < 4; k++)
            if (cp_string_equals(content, STREAMABLE[k])) streamable = 1;
        eng->dirty[i] = !streamable;
        eng->close_json_end[i] = cp_type_of(cp_object_get_cstr(f, "close_json_end")) == CP_BOOL &&
                                 cp_bool_value(cp_object_get_cstr(f, "close_json_end"));
        const cp_value *oe = cp_object_get_cstr(f, "on_error");
        eng->on_error[i] = cp_string_equals(oe, "content") ? 1 : cp_string_equals(oe, "drop") ? 2 : 0;
        if (implicit && eng->field_name_lens[i] == il && memcmp(eng->field_names[i], implicit, il) == 0)
            eng->implicit = (long)i;
    }
    /* class map */
    eng->n_classes = (uint32_t)t->n_classes;
    eng->n_intervals = t->n_intervals;
    eng->bmp = malloc(0x10000 * sizeof *eng->bmp);
    eng->class_starts = malloc(t->n_intervals * sizeof *eng->class_starts);
    eng->class_ids = malloc(t->n_intervals * sizeof *eng->class_ids);
    if (!eng->bmp || !eng->class_starts || !eng->class_ids) goto oom;
    for (size_t i = 0; i < t->n_intervals; i++) {
        eng->class_starts[i] = t->class_starts[i];
        eng->class_ids[i] = (uint16_t)cp_array_get(t->class_ids, i);
    }
    for (size_t i = 0; i < t->n_intervals; i++) {
        uint32_t lo = eng->class_starts[i], hi = i + 1 < t->n_intervals ? eng->class_starts[i + 1] : 0x110000;
        for (uint32_t c = lo; c < hi && c < 0x10000; c++) eng->bmp[c] = eng->class_ids[i];
    }
    /* patterns */
    eng->n_patterns = t->n_patterns;
    eng->patterns = calloc(t->n_patterns ? t->n_patterns : 1, sizeof *eng->patterns);
    if (!eng->patterns) goto oom;
    const cp_value *jsp = cp_object_get_cstr(t->js, "patterns");
    for (size_t i = 0; i < t->n_patterns; i++) {
        const cp_pattern *p = &t->patterns[i];
        cp_eng_pattern *ep = &eng->patterns[i];
        ep->is_open = !p->is_close;
        ep->field = (uint32_t)p->field;
        ep->exact = p->exact;
        ep->named_groups = p->named_groups;
        ep->horizon = p->horizon;
        if (!p->exact || p->named_groups) {
            cp_buf what = {0};
            cp_json_dump_options o = cp_json_dump_defaults();
            cp_value *src = cp_string(p->source, p->source_len);
            char *srcj = src ? cp_json_dump(src, &o, NULL) : NULL;
            cp_value_free(src);
            cp_buf_printf(&what, "patterns[%zu] (%s%s of field %zu: %s)", i, p->is_close ? "close" : "open",
                          p->is_regex ? "_pattern" : "", p->field, srcj ? srcj : "?");
            free(srcj);
            if (what.failed) {
                cp_buf_free(&what);
                goto oom;
            }
            ep->rx = cp_rx_compile(cp_list_get(jsp, i), what.data, err);
            cp_buf_free(&what);
            if (!ep->rx) goto fail;
        }
    }
    /* the text a scanner keeps before its first undecided offset (Python's Scanner.keep) */
    {
        int64_t h = 1;
        for (size_t i = 0; i < t->n_patterns; i++)
            if (t->patterns[i].history > h) h = t->patterns[i].history;
        eng->keep = h < (1 << 20) ? (size_t)h + 1 : 0;
    }
    /* modes */
    eng->n_modes = t->n_modes;
    eng->modes = calloc(t->n_modes ? t->n_modes : 1, sizeof *eng->modes);
    if (!eng->modes) goto oom;
    for (size_t mi = 0; mi < t->n_modes; mi++)
        if (build_mode(&eng->modes[mi], &t->modes[mi], t->n_classes) < 0) goto oom;
    for (size_t mi = 0; mi < t->n_modes; mi++) {
        cp_eng_mode *m = &eng->modes[mi];
        uint32_t startN = m->startN, start0 = m->start0;
        if (lead_starts(eng, t, m, startN, 0) < 0) goto oom;
        if (start0 != startN && start0) {
            if (lead_starts(eng, t, m, start0, 1) < 0) goto oom;
        } else {
            m->lead0 = m->lead; /* shared (freed once) */
        }
        /* the derived prefilter (after the projections: it reads startN's own row) */
        if (m->acc_off[startN + 1] == m->acc_off[startN] || startN == 0) {
            m->can_start = malloc(m->n_classes ? m->n_classes : 1);
            if (!m->can_start) goto oom;
            for (uint32_t c = 0; c < m->n_classes; c++)
                m->can_start[c] = startN != 0 && m->trans[(size_t)startN * m->n_classes + c] != 0;
        }
        for (uint32_t c = 0; c < 128; c++) m->start_ascii[c] = m->can_start ? m->can_start[eng->bmp[c]] : 1;
        if (m->can_start && build_steps(m) < 0) goto oom;
    }
    /* anchor and content regexes */
    eng->anchor = build_anchor(eng, t, err);
    if (!eng->anchor) goto fail;
    if (build_content(eng, cp_object_get_cstr(t->js, "content")) < 0) goto oom;
    eng->vregex.ctx = eng;
    eng->vregex.finditer = hook_finditer;
    eng->env.regex = &eng->vregex;
    /* \w as the table file's port section spells it (the JS runtime's choice), else the value layer's table */
    if (cp_type_of(cp_object_get_cstr(t->js, "word")) == CP_STRING && build_word(eng, cp_object_get_cstr(t->js, "word")) == 0) {
        eng->env.word = word_hook;
        eng->env.word_ctx = eng;
    }
    return eng;
oom:
    cp_error_oom(err);
fail:
    cp_eng_free(eng);
    return NULL;
}

static void free_mode(cp_eng_mode *m) {
    free(m->sflags);
    free(m->start_step);
    free(m->patterns);
    free(m->trans);
    free(m->eot);
    free(m->term);
    free(m->acc_off);
    free(m->acc_item);
    free(m->can_start);
    for (size_t k = 0; k < m->n_lead_store; k++) {
        free((void *)m->lead_store[k].rxs);
        free(m->lead_store[k].by_failed);
    }
    for (size_t k = 0; k < m->n_lead_store0; k++) {
        free((void *)m->lead_store0[k].rxs);
        free(m->lead_store0[k].by_failed);
    }
    free(m->lead_store);
    free(m->lead_store0);
    if (m->lead0 != m->lead) free(m->lead0);
    free(m->lead);
}

void cp_eng_free(cp_eng *eng) {
    if (!eng) return;
    free(eng->tok_settles);
    free(eng->tok_info);
    free(eng->fields);
    free(eng->field_names);
    free(eng->field_name_lens);
    free(eng->dirty);
    free(eng->close_json_end);
    free(eng->on_error);
    free(eng->bmp);
    free(eng->class_starts);
    free(eng->class_ids);
    if (eng->patterns)
        for (size_t i = 0; i < eng->n_patterns; i++) cp_rx_free(eng->patterns[i].rx);
    free(eng->patterns);
    if (eng->modes)
        for (size_t i = 0; i < eng->n_modes; i++) free_mode(&eng->modes[i]);
    free(eng->modes);
    for (size_t i = 0; i < eng->n_lookbehinds; i++) cp_rx_free(eng->lookbehinds[i]);
    free(eng->lookbehinds);
    cp_rx_free(eng->anchor);
    for (size_t i = 0; i < eng->n_content; i++) {
        free(eng->content[i].pattern);
        cp_rx_free(eng->content[i].rx);
        free(eng->content[i].error);
    }
    free(eng->content);
    free(eng->word_ranges);
    free(eng);
}
