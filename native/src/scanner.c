/*
 * scanner.c - the delimiter automaton at run time (FORMAT.md section 6,
 * "Scanner"; the twin of chatparse/runtime/stream/scanner.py and of the
 * JavaScript Scanner in js/chatparse.mjs).
 *
 * Contract: cp_scanner_decide returns the next delimiter of the text received
 * so far only once no continuation of the text can change it; text before
 * cp_scanner_safe_end can never be part of a delimiter. Every character is
 * stepped once per live attempt (nothing is re-scanned), so a feed costs what
 * its own characters cost. Every index into the text is below `end`, every
 * state below the mode's n_states (the loader checked the arrays; the
 * projected states are built in range).
 */
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "error.h"

int cp_scanner_init(cp_scanner *sc, const cp_eng *eng) {
    memset(sc, 0, sizeof *sc);
    sc->eng = eng;
    sc->mode = &eng->modes[0];
    sc->stop = -1;
    uint32_t w = 1;
    for (size_t m = 0; m < eng->n_modes; m++)
        if (eng->modes[m].W > w) w = eng->modes[m].W;
    sc->w_max = w;
    cp_rx_match_init(&sc->m);
    return 0;
}

void cp_scanner_fini(cp_scanner *sc) {
    free(sc->text);
    for (size_t i = 0; i < sc->cap_att; i++) {
        free(sc->att[i].loc);
        free(sc->att[i].end);
    }
    free(sc->att);
    cp_rx_match_fini(&sc->m);
    memset(sc, 0, sizeof *sc);
}

/* Drop the text no one can read any more: everything before the `keep` code points before pos (the history a
 * pattern's lookbehind may read back from an attempt, which starts at or after pos, plus one). Done only when
 * that frees at least half the buffer and 4 kB, so the copying costs O(1) per byte received. Called before new
 * text is appended, when no pointer into the text is held. */
/* (CP_SCANNER_TRIM_MIN: engine.h) */

static void trim(cp_scanner *sc) {
    size_t keep = sc->eng->keep;
    if (!keep || sc->pos - sc->base < 2 * CP_SCANNER_TRIM_MIN + 4 * (size_t)keep) return;
    size_t cut = sc->pos - sc->base; /* relative */
    for (size_t k = 0; k < keep && cut > 0; k++) {
        cut--;
        while (cut > 0 && ((unsigned char)sc->text[cut] & 0xC0) == 0x80) cut--;
    }
    size_t live = sc->end - sc->base;
    if (cut < CP_SCANNER_TRIM_MIN || (CP_SCANNER_TRIM_MIN > 1 && 2 * cut < live)) return;
    memmove(sc->text, sc->text + cut, live - cut + 1);
    sc->base += cut;
}

int cp_scanner_push(cp_scanner *sc, const char *s, size_t n, cp_error *err) {
    trim(sc);
    size_t live = sc->end - sc->base;
    if (live + n + 1 > sc->cap) {
        /* (16 kB: the size a streaming parser's buffer settles at, trimmed at 8 kB and more, from its first one) */
        size_t cap = sc->cap ? sc->cap : 4 * CP_SCANNER_TRIM_MIN;
        while (cap < live + n + 1) cap *= 2;
        char *t = realloc(sc->text, cap);
        if (!t) {
            cp_error_oom(err);
            return -1;
        }
        sc->text = t;
        sc->cap = cap;
    }
    memcpy(sc->text + live, s, n);
    sc->end += n;
    sc->text[live + n] = 0;
    return 0;
}

void cp_scanner_restart(cp_scanner *sc, size_t mode, size_t at) {
    sc->mode = &sc->eng->modes[mode];
    sc->pos = sc->scan = at;
    sc->n_att = 0;
    sc->eot_fed = 0;
    sc->stop = -1;
}

int cp_scanner_quiet(const cp_scanner *sc) { return sc->n_att == 0 && sc->scan == sc->end; }

size_t cp_scanner_safe_end(const cp_scanner *sc) { return sc->n_att ? sc->att[0].start : sc->scan; }

const char *cp_scanner_take(cp_scanner *sc, size_t upto, size_t *len) {
    const char *out = sc->text ? sc->text + (sc->pos - sc->base) : "";
    size_t n = upto > sc->pos ? upto - sc->pos : 0;
    if (n) sc->cp_pos += cp_rx_cp_count(out, 0, n);
    if (upto > sc->pos) sc->pos = upto;
    *len = n;
    return out;
}

/* A new attempt slot at the end of the list (its buffers reused). */
static cp_attempt *new_attempt(cp_scanner *sc, size_t start, uint32_t state, cp_error *err) {
    if (sc->n_att == sc->cap_att) {
        size_t cap = sc->cap_att ? sc->cap_att * 2 : 8;
        cp_attempt *a = realloc(sc->att, cap * sizeof *a);
        if (!a) {
            cp_error_oom(err);
            return NULL;
        }
        memset(a + sc->cap_att, 0, (cap - sc->cap_att) * sizeof *a);
        sc->att = a;
        for (size_t i = sc->cap_att; i < cap; i++) {
            a[i].loc = malloc(sc->w_max * sizeof *a[i].loc);
            a[i].end = malloc(sc->w_max * sizeof *a[i].end);
            if (!a[i].loc || !a[i].end) {
                sc->cap_att = i + 1;
                cp_error_oom(err);
                return NULL;
            }
        }
        sc->cap_att = cap;
    }
    cp_attempt *a = &sc->att[sc->n_att];
    a->start = start;
    a->state = state;
    a->fin = -1;
    a->n_ends = 0;
    return a;
}

/* Keep att[i] where keep(i); the dropped slots go after the live ones. */
static void drop_attempts(cp_scanner *sc, int only_unmatched_decided) {
    size_t w = 0;
    for (size_t r = 0; r < sc->n_att; r++) {
        cp_attempt *a = &sc->att[r];
        int drop = only_unmatched_decided ? (a->fin >= 0 && a->n_ends == 0) : (a->n_ends == 0);
        if (drop) continue;
        if (w != r) {
            cp_attempt tmp = sc->att[w];
            sc->att[w] = *a;
            *a = tmp;
        }
        w++;
    }
    sc->n_att = w;
}

static void shift_attempt(cp_scanner *sc) {
    /* drop att[0], keep the order of the rest, and recycle its slot */
    cp_attempt first = sc->att[0];
    memmove(sc->att, sc->att + 1, (sc->n_att - 1) * sizeof *sc->att);
    sc->att[sc->n_att - 1] = first;
    sc->n_att--;
}

/* Previous character boundary before byte offset at (at > 0). */
static size_t back_one(const char *text, size_t at) {
    size_t i = at - 1;
    while (i > 0 && ((unsigned char)text[i] & 0xC0) == 0x80) i--;
    return i;
}

static void record(cp_scanner *sc, cp_attempt *a, uint32_t s, size_t at) {
    const cp_eng_mode *mode = sc->mode;
    for (uint32_t k = mode->acc_off[s]; k < mode->acc_off[s + 1]; k++) {
        uint32_t item = mode->acc_item[k];
        uint32_t p = item & 0x7FFFFFFFu;
        size_t e = (item >> 31) && at > sc->base ? back_one(sc->text, at - sc->base) + sc->base : at;
        uint32_t j = 0;
        while (j < a->n_ends && a->loc[j] != p) j++;
        if (j == a->n_ends) {
            a->loc[j] = p;
            a->n_ends++;
        }
        a->end[j] = e;
    }
}

static int has_acc(const cp_eng_mode *mode, uint32_t s) { return mode->acc_off[s + 1] > mode->acc_off[s]; }

static void feed_eot(cp_scanner *sc) {
    const cp_eng_mode *mode = sc->mode;
    sc->eot_fed = 1;
    for (size_t i = 0; i < sc->n_att; i++) {
        cp_attempt *a = &sc->att[i];
        if (a->fin < 0) {
            uint32_t st = mode->eot[a->state];
            if (st && has_acc(mode, st)) record(sc, a, st, sc->end);
            a->fin = (long long)sc->end;
        }
    }
    drop_attempts(sc, 0);
}

/* At least n code points received after byte offset `from`? */
static int has_chars(const cp_scanner *sc, size_t from, long long n) {
    if (n <= 0) return 1;
    size_t avail = sc->end - from;
    if ((long long)avail < n) return 0;
    if ((long long)avail >= 4 * n) return 1;
    return (long long)cp_rx_cp_count(sc->text, from - sc->base, sc->end - sc->base) >= n;
}

/* Once the text's start is cut off, `^` (Python's ^ and \\A as translated) cannot hold at the buffer's start. */
static unsigned notbol(const cp_scanner *sc) { return sc->base ? CP_RX_NOTBOL : 0; }

static int field_name_less(const cp_eng *e, uint32_t a, uint32_t b) {
    size_t la = e->field_name_lens[a], lb = e->field_name_lens[b];
    int c = memcmp(e->field_names[a], e->field_names[b], la < lb ? la : lb);
    if (c != 0) return c < 0;
    return la < lb;
}

/* Resolve the decided attempt a: 1 (d filled), 0 (no match: drop it), 2 (wait), -1 (error). */
static int resolve(cp_scanner *sc, cp_attempt *a, int eos, cp_decision *d, cp_error *err) {
    const cp_eng *eng = sc->eng;
    const cp_eng_mode *mode = sc->mode;
    int have = 0;
    size_t best_end = 0;
    uint32_t best_pi = 0;
    int best_regex = 0;
    size_t best_m_end = 0;
    cp_value *best_caps = NULL;
    for (uint32_t j = 0; j < a->n_ends; j++) {
        uint32_t pi = mode->patterns[a->loc[j]];
        const cp_eng_pattern *p = &eng->patterns[pi];
        size_t end = a->end[j];
        int from_regex = 0;
        if (!p->exact) {
            if (!eos && (p->horizon < 0 || !has_chars(sc, (size_t)a->fin, p->horizon))) {
                cp_value_free(best_caps);
                return 2;
            }
            int r = cp_rx_exec(p->rx, sc->text, sc->end - sc->base, a->start - sc->base, CP_RX_ANCHORED | notbol(sc),
                               &sc->m, err);
            if (r < 0) {
                cp_value_free(best_caps);
                return -1;
            }
            if (r == 0) continue;
            end = sc->m.end + sc->base;
            from_regex = 1;
        }
        /* key: (start - end, open before close, field name) */
        int better;
        if (!have) better = 1;
        else if (end != best_end) better = end > best_end;
        else {
            const cp_eng_pattern *b = &eng->patterns[best_pi];
            if (p->is_open != b->is_open) better = p->is_open;
            else better = field_name_less(eng, p->field, b->field);
        }
        if (better) {
            cp_value_free(best_caps);
            best_caps = NULL;
            if (from_regex && p->named_groups) {
                best_caps = cp_rx_groupdict(p->rx, sc->text, &sc->m, 1);
                if (!best_caps) {
                    cp_error_oom(err);
                    return -1;
                }
            }
            have = 1;
            best_end = end;
            best_pi = pi;
            best_regex = from_regex;
            best_m_end = end;
        }
    }
    (void)best_m_end;
    if (!have) return 0;
    const cp_eng_pattern *p = &eng->patterns[best_pi];
    if (!best_regex && p->named_groups) {
        int r = cp_rx_exec(p->rx, sc->text, best_end - sc->base, a->start - sc->base,
                           CP_RX_ANCHORED | CP_RX_END_ANCHORED | notbol(sc), &sc->m, err);
        if (r < 0) return -1;
        if (r == 0) {
            cp_error_set(err, "RuntimeError",
                         "chatparse internal error: tables matched pattern %u at %zu..%zu but the regex does not",
                         best_pi, a->start, best_end);
            return -1;
        }
        best_caps = cp_rx_groupdict(p->rx, sc->text, &sc->m, 1);
        if (!best_caps) {
            cp_error_oom(err);
            return -1;
        }
    }
    d->s = a->start;
    d->e = best_end;
    d->pattern = (long)best_pi;
    d->captures = best_caps;
    return 1;
}

static uint32_t guarded_start(cp_scanner *sc, const cp_eng_lead *g, size_t at, cp_error *err, int *failed) {
    uint32_t k = 0;
    for (size_t j = 0; j < g->n_rx; j++) {
        int r = cp_rx_exec(g->rxs[j], sc->text, sc->end - sc->base, at - sc->base, CP_RX_ANCHORED | notbol(sc), &sc->m,
                           err);
        if (r < 0) {
            *failed = 1;
            return 0;
        }
        if (r == 0) k |= 1u << j;
    }
    return g->by_failed[k];
}

/* From byte offset `at` (> 0, where a character that can start an attempt is, no attempt live), the steps of
 * cp_scanner_decide on the DFA alone: the offset after the character where every attempt started from `at` on
 * is dead without having reached an accepting state or asked a start guard, or 0 when that does not happen
 * before the received text's end (the caller then steps for real). */
static size_t settle_from(const cp_scanner *sc, size_t at) {
    enum { MAX_LIVE = 32 };
    const cp_eng_mode *m = sc->mode;
    const uint32_t ncls = m->n_classes;
    uint32_t live[MAX_LIVE];
    size_t nl = 0, i = at - sc->base, n = sc->end - sc->base;
    while (i < n) {
        uint32_t c = cp_utf8_valid_at((const unsigned char *)sc->text, &i);
        uint32_t cls = cp_eng_class(sc->eng, c);
        size_t w = 0;
        for (size_t k = 0; k < nl; k++) {
            uint32_t st = m->trans[(size_t)live[k] * ncls + cls];
            if (!st) continue;
            if (has_acc(m, st)) return 0;
            if (!m->term[st]) live[w++] = st;
        }
        nl = w;
        if (m->can_start[cls]) {
            if (m->lead && m->lead[cls]) return 0;
            uint32_t st = m->startN;
            if (st) {
                if (has_acc(m, st)) return 0;
                if (!m->term[st]) {
                    st = m->trans[(size_t)st * ncls + cls];
                    if (st) {
                        if (has_acc(m, st)) return 0;
                        if (!m->term[st]) {
                            if (nl == MAX_LIVE) return 0;
                            live[nl++] = st;
                        }
                    }
                }
            }
        }
        if (!nl) return i + sc->base;
    }
    return 0;
}

int cp_scanner_decide(cp_scanner *sc, int eos, cp_decision *d, cp_error *err) {
    const cp_eng *eng = sc->eng;
    for (;;) {
        const cp_eng_mode *mode = sc->mode;
        const uint32_t ncls = mode->n_classes;
        long long stop = sc->stop;
        if (stop >= 0 && (long long)(sc->n_att ? sc->att[0].start : sc->scan) > stop) return 0;
        while (sc->n_att && sc->att[0].fin >= 0) {
            int r = resolve(sc, &sc->att[0], eos, d, err);
            if (r < 0) return -1;
            if (r == 2) return 0;
            if (r == 1) return 1;
            shift_attempt(sc);
        }
        if (sc->scan >= sc->end) {
            if (eos && !sc->eot_fed) {
                feed_eot(sc);
                continue;
            }
            return 0;
        }
        size_t scan = sc->scan;
        if (!sc->n_att && !(scan == 0 && mode->start0) && mode->can_start) {
            /* skip ahead to the first offset where an attempt can matter */
            size_t i = scan;
            const unsigned char *t = (const unsigned char *)sc->text;
            for (;;) {
                /* a run of ASCII characters that cannot start an attempt, a byte at a time */
                size_t lim = sc->end;
                if (stop >= 0 && (size_t)stop + 1 < lim) lim = (size_t)stop + 1;
                size_t q = i - sc->base, ql = lim > i ? lim - sc->base : q;
                while (q < ql && t[q] < 0x80 && !mode->start_ascii[t[q]]) q++;
                i = q + sc->base;
                if (i >= sc->end) break;
                if (stop >= 0 && (long long)i > stop) break;
                size_t j = i - sc->base;
                uint32_t c = cp_eng_class(eng, cp_utf8_valid_at((const unsigned char *)sc->text, &j));
                if (mode->can_start[c]) {
                    /* attempts that all die before the text's end without a match change nothing: past them */
                    size_t past = stop < 0 && i > 0 ? settle_from(sc, i) : 0;
                    if (!past) break;
                    i = past;
                    continue;
                }
                i = j + sc->base;
            }
            if (i >= sc->end) {
                sc->scan = sc->end;
                continue;
            }
            scan = i;
            if (stop >= 0 && (long long)scan > stop) {
                sc->scan = scan;
                return 0;
            }
        }
        size_t nxt = scan - sc->base;
        uint32_t cls = cp_eng_class(eng, cp_utf8_valid_at((const unsigned char *)sc->text, &nxt));
        nxt += sc->base;
        int decided = 0; /* an attempt was decided at this step (drop_attempts has work) */
        for (size_t i = 0; i < sc->n_att; i++) {
            cp_attempt *a = &sc->att[i];
            if (a->fin >= 0) continue;
            uint32_t st = mode->trans[(size_t)a->state * ncls + cls];
            a->state = st;
            if (st == 0) a->fin = (long long)nxt, decided = 1;
            else {
                if (has_acc(mode, st)) record(sc, a, st, nxt);
                if (mode->term[st]) a->fin = (long long)nxt, decided = 1;
            }
        }
        uint32_t st = scan == 0 ? mode->start0 : mode->startN;
        cp_eng_lead *const *lead = scan == 0 ? mode->lead0 : mode->lead;
        if (lead && lead[cls]) {
            int failed = 0;
            st = guarded_start(sc, lead[cls], scan, err, &failed);
            if (failed) return -1;
        }
        /* an attempt that would be dropped at once (no match, decided at its first step) is not made */
        if (st && !has_acc(mode, st)) {
            uint32_t s1 = mode->term[st] ? 0 : mode->trans[(size_t)st * ncls + cls];
            if (!s1 || (!has_acc(mode, s1) && mode->term[s1])) st = 0;
        }
        if (st) {
            cp_attempt *a = new_attempt(sc, scan, st, err);
            if (!a) return -1;
            if (has_acc(mode, st)) record(sc, a, st, scan);
            if (mode->term[st]) a->fin = (long long)scan;
            else {
                st = mode->trans[(size_t)st * ncls + cls];
                a->state = st;
                if (st == 0) a->fin = (long long)nxt;
                else {
                    if (has_acc(mode, st)) record(sc, a, st, nxt);
                    if (mode->term[st]) a->fin = (long long)nxt;
                }
            }
            if (a->fin < 0 || a->n_ends) sc->n_att++;
        }
        sc->scan = nxt;
        if (decided) drop_attempts(sc, 1);
    }
}

/* See engine.h. The steps of cp_scanner_decide on the DFA alone, first simulated (nothing changes when they
 * would record a match, ask a start guard or meet a stop), then committed. */
int cp_scanner_push_undecided(cp_scanner *sc, const char *text, size_t n, int inert, cp_error *err) {
    const cp_eng *eng = sc->eng;
    const cp_eng_mode *m = sc->mode;
    if (sc->scan != sc->end || sc->stop >= 0 || sc->eot_fed || !m->can_start || sc->n_att > CP_UNDECIDED_LIVE)
        return 0;
    if (!sc->end && m->start0 != m->startN) return 0;
    uint32_t st_[CP_UNDECIDED_LIVE];
    size_t at_[CP_UNDECIDED_LIVE];
    size_t nl = 0;
    for (size_t k = 0; k < sc->n_att; k++) {
        const cp_attempt *a = &sc->att[k];
        if (a->fin >= 0 || a->n_ends) return 0;
        st_[nl] = a->state;
        at_[nl++] = a->start;
    }
    if (!(inert && nl == 0) && !cp_undecided_steps(eng, m, (const unsigned char *)text, n, sc->end, st_, at_, &nl))
        return 0;
    /* commit: the text (cp_scanner_push, inline while it fits without a trim), then the surviving attempts in
     * start order (slots reused: every slot below cap_att has its buffers) */
    size_t live = sc->end - sc->base;
    if (live + n + 9 <= sc->cap && (!eng->keep || sc->pos - sc->base < 2 * CP_SCANNER_TRIM_MIN + 4 * eng->keep)) {
        if (n <= 8) memcpy(sc->text + live, text, 8); /* (one 8-byte move: text has 8 readable bytes) */
        else memcpy(sc->text + live, text, n);
        sc->text[live + n] = 0;
        sc->end += n;
    } else if (cp_scanner_push(sc, text, n, err) < 0) {
        return -1;
    }
    sc->n_att = 0;
    for (size_t k = 0; k < nl; k++) {
        if (k >= sc->cap_att) {
            if (!new_attempt(sc, at_[k], st_[k], err)) return -1;
        } else {
            cp_attempt *a = &sc->att[k];
            a->start = at_[k];
            a->state = st_[k];
            a->fin = -1;
            a->n_ends = 0;
        }
        sc->n_att = k + 1;
    }
    sc->scan = sc->end;
    return 1;
}
