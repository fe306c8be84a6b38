/* chatparse.runtime.oneshot._lean_regions: the delimiters and regions of a whole text, for templates whose every mode is
 * decided by string tests alone (the native half of parse._parse_lean's `single` and `shaped` branches, and of
 * a mode that watches nothing; lean_regions.native_spec builds the spec, lean_regions.py says when it runs).
 *
 * compile(ws, implicit, opens, pat_field, modes) -> capsule
 *
 *   ws         every character `re`'s \s matches (plan._WS_CHARS), all below U+3001;
 *   implicit   the implicit field's index, or -1 when there is none;
 *   opens      per pattern: True for an open delimiter;
 *   pat_field  per pattern: its field's index (the mode an open enters is 1 + that);
 *   modes      per mode (mode 0: the implicit region; mode 1 + f: inside field f), one of
 *                ("nowhere",)                               no delimiter can occur: the text runs to its end;
 *                ("single", literal, pi, length)            the only delimiter is `literal` (pattern pi, the
 *                                                           match `length` long), where it occurs;
 *                ("shaped", led, literals, solos, entries)  plan._shaped's tables: `literals` in the
 *                                                           search's order (longest first), per literal its solo
 *                                                           (pi, run_min, run_max, length, after) or None, and
 *                                                           its entries ((pi, rank, ((run_min, run_max, length,
 *                                                           after), ...)), ...), rank an int (equal for equal
 *                                                           tie ranks, smaller first);
 *                ("keyed", literals, keys)                  plan._keyed's table: every match starts with one of
 *                                                           `literals`, none a prefix of another, so at the
 *                                                           leftmost occurrence of any of them that literal alone
 *                                                           says what can match there; per literal its key,
 *                                                           (pi, length) where it is pattern pi's whole match,
 *                                                           else a callable decide(text, p) -> None (no match:
 *                                                           the search goes on at p + 1) or (end, pi, match,
 *                                                           read) (parse.keyed_decider: `regex` asked there).
 *   Raises TypeError / ValueError naming what is wrong with a spec of another shape or out of range.
 *
 * regions(spec, text, budget, deadline, clock) -> (regions, status, at, end)
 *
 *   The delimiters of `text` as _parse_lean decides them, with its region rules, and what they close:
 *   `regions` a list of (field, body, open, match, read) per region to store, in order (open: the pattern
 *   index of the delimiter that opened the region, -1 for the implicit region; match and read: what a keyed
 *   decide gave for that delimiter, else None); status 0 when the text ended, 1 when a
 *   zero-width close of an empty implicit region stopped the parse at offset `at` (`end` its end), 2 when a
 *   zero-width close came at the offset of its region's zero-width open (`at`; `end` the field), 3 when the
 *   candidate budget or the deadline ran out (the caller redoes the parse with the automaton, after storing
 *   the regions found before, as _parse_lean would have). `budget` counts shaped and keyed candidates as
 *   _parse_lean does; every 64th, `clock()` (time.perf_counter) is compared with `deadline`. An exception
 *   a decide raises (parse._Fallback on a `regex` timeout) propagates, no region handed back.
 *
 * Literal occurrences are found with PyUnicode_Find, each literal's next one remembered while the search
 * start passes it (the start never moves back), so a text costs one pass per literal.
 * tests/test_lean_regions.py checks the parse against the Python spelling and the reference. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define CLOCK_EVERY 64
#define WS_LIMIT 0x3001
#define AFTER_END 0
#define AFTER_TRAIL 1
#define AFTER_AHEAD 2

typedef struct {
    Py_ssize_t run_min, run_max, length;
    int after;
} Alt;

typedef struct {
    Py_ssize_t pi, rank, nalts;
    Alt *alts;
} Entry;

typedef struct {
    PyObject *literal;  /* (owned) */
    Py_ssize_t nentries;
    Entry *entries;
    int has_solo;
    Py_ssize_t solo_pi;
    Alt solo;
    Py_ssize_t slot;  /* index of its next-occurrence memo */
    PyObject *decide;  /* (owned) a keyed literal's decide callable, NULL where it is pattern key_pi's match */
    Py_ssize_t key_pi, key_len;
} Lit;

enum { NOWHERE = 0, SINGLE = 1, SHAPED = 2, KEYED = 3 };

typedef struct {
    int kind, led;
    PyObject *single;  /* (owned) */
    Py_ssize_t single_pi, single_len, nlits;
    Lit *lits;
} Mode;

typedef struct {
    unsigned char ws[WS_LIMIT / 8 + 1];
    Py_ssize_t implicit, npatterns, nmodes, nslots;
    char *opens;
    Py_ssize_t *pat_field;
    Mode *modes;
} Spec;

static void
spec_free(Spec *s)
{
    if (s == NULL)
        return;
    if (s->modes != NULL) {
        for (Py_ssize_t m = 0; m < s->nmodes; m++) {
            Mode *md = &s->modes[m];
            Py_XDECREF(md->single);
            if (md->lits != NULL) {
                for (Py_ssize_t k = 0; k < md->nlits; k++) {
                    Py_XDECREF(md->lits[k].literal);
                    Py_XDECREF(md->lits[k].decide);
                    if (md->lits[k].entries != NULL)
                        for (Py_ssize_t j = 0; j < md->lits[k].nentries; j++)
                            PyMem_Free(md->lits[k].entries[j].alts);
                    PyMem_Free(md->lits[k].entries);
                }
                PyMem_Free(md->lits);
            }
        }
        PyMem_Free(s->modes);
    }
    PyMem_Free(s->opens);
    PyMem_Free(s->pat_field);
    PyMem_Free(s);
}

static void
capsule_free(PyObject *capsule)
{
    spec_free(PyCapsule_GetPointer(capsule, "chatparse.lean_regions"));
}

/* ---------------------------------------------------------------------------------------------- compile */
static int
index_in(PyObject *v, Py_ssize_t lo, Py_ssize_t hi, const char *what, Py_ssize_t *out)
{
    Py_ssize_t x = PyLong_Check(v) ? PyLong_AsSsize_t(v) : -1;
    if (x == -1 && PyErr_Occurred())
        return -1;
    if (!PyLong_Check(v) || x < lo || x >= hi) {
        PyErr_Format(PyExc_ValueError, "lean_regions spec: %s must be an int in %zd..%zd", what, lo, hi - 1);
        return -1;
    }
    *out = x;
    return 0;
}

static PyObject *
tuple_of(PyObject *v, Py_ssize_t size, const char *what)
{
    if (!PyTuple_Check(v) || (size >= 0 && PyTuple_GET_SIZE(v) != size)) {
        PyErr_Format(PyExc_TypeError, "lean_regions spec: %s must be a tuple%s", what, size >= 0 ? " of its size" : "");
        return NULL;
    }
    return v;
}

static int
read_alt(PyObject *v, Alt *a, const char *what)
{
    Py_ssize_t after;
    if (tuple_of(v, 4, what) == NULL || index_in(PyTuple_GET_ITEM(v, 0), 0, PY_SSIZE_T_MAX, what, &a->run_min) < 0
            || index_in(PyTuple_GET_ITEM(v, 1), 0, PY_SSIZE_T_MAX, what, &a->run_max) < 0
            || index_in(PyTuple_GET_ITEM(v, 2), 0, PY_SSIZE_T_MAX / 2, what, &a->length) < 0
            || index_in(PyTuple_GET_ITEM(v, 3), 0, 3, what, &after) < 0)
        return -1;
    a->after = (int)after;
    return 0;
}

/* A mode's literals (`lits`, a tuple of non-empty str, `what` naming the mode's kind): md->lits allocated, each
 * literal kept with its own next-occurrence memo slot. */
static int
read_literals(Spec *s, Mode *md, PyObject *lits, const char *what)
{
    md->nlits = PyTuple_GET_SIZE(lits);
    md->lits = PyMem_Calloc((size_t)md->nlits + 1, sizeof(Lit));
    if (md->lits == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t k = 0; k < md->nlits; k++) {
        PyObject *lit = PyTuple_GET_ITEM(lits, k);
        if (!PyUnicode_Check(lit) || PyUnicode_GET_LENGTH(lit) == 0) {
            PyErr_Format(PyExc_TypeError, "lean_regions spec: a %s mode's literals must be non-empty str", what);
            return -1;
        }
        md->lits[k].literal = Py_NewRef(lit);
        md->lits[k].slot = s->nslots++;
    }
    return 0;
}

static int
read_shaped(Spec *s, Mode *md, PyObject *t)
{
    PyObject *lits, *solos, *entries;
    int led = PyObject_IsTrue(PyTuple_GET_ITEM(t, 1));
    if (led < 0 || (lits = tuple_of(PyTuple_GET_ITEM(t, 2), -1, "a shaped mode's literals")) == NULL)
        return -1;
    md->led = led;
    Py_ssize_t nlits = PyTuple_GET_SIZE(lits);
    if ((solos = tuple_of(PyTuple_GET_ITEM(t, 3), nlits, "a shaped mode's solos")) == NULL
            || (entries = tuple_of(PyTuple_GET_ITEM(t, 4), nlits, "a shaped mode's entries")) == NULL
            || read_literals(s, md, lits, "shaped") < 0)
        return -1;
    for (Py_ssize_t k = 0; k < md->nlits; k++) {
        Lit *l = &md->lits[k];
        PyObject *solo = PyTuple_GET_ITEM(solos, k);
        PyObject *es = tuple_of(PyTuple_GET_ITEM(entries, k), -1, "a literal's entries");
        if (es == NULL)
            return -1;
        if (solo != Py_None) {
            Alt a;
            if (tuple_of(solo, 5, "a solo") == NULL
                    || index_in(PyTuple_GET_ITEM(solo, 0), 0, s->npatterns, "a solo's pattern", &l->solo_pi) < 0)
                return -1;
            PyObject *rest = PyTuple_GetSlice(solo, 1, 5);
            int r = rest == NULL ? -1 : read_alt(rest, &a, "a solo");
            Py_XDECREF(rest);
            if (r < 0)
                return -1;
            l->has_solo = 1;
            l->solo = a;
        }
        l->nentries = PyTuple_GET_SIZE(es);
        l->entries = PyMem_Calloc((size_t)l->nentries + 1, sizeof(Entry));
        if (l->entries == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        for (Py_ssize_t j = 0; j < l->nentries; j++) {
            Entry *e = &l->entries[j];
            PyObject *et = tuple_of(PyTuple_GET_ITEM(es, j), 3, "an entry"), *alts;
            if (et == NULL || index_in(PyTuple_GET_ITEM(et, 0), 0, s->npatterns, "an entry's pattern", &e->pi) < 0
                    || index_in(PyTuple_GET_ITEM(et, 1), 0, PY_SSIZE_T_MAX, "an entry's rank", &e->rank) < 0
                    || (alts = tuple_of(PyTuple_GET_ITEM(et, 2), -1, "an entry's alternatives")) == NULL)
                return -1;
            e->nalts = PyTuple_GET_SIZE(alts);
            e->alts = PyMem_Calloc((size_t)e->nalts + 1, sizeof(Alt));
            if (e->alts == NULL) {
                PyErr_NoMemory();
                return -1;
            }
            for (Py_ssize_t a = 0; a < e->nalts; a++)
                if (read_alt(PyTuple_GET_ITEM(alts, a), &e->alts[a], "an alternative") < 0)
                    return -1;
        }
    }
    return 0;
}

static int
read_keyed(Spec *s, Mode *md, PyObject *t)
{
    PyObject *lits = tuple_of(PyTuple_GET_ITEM(t, 1), -1, "a keyed mode's literals"), *keys;
    if (lits == NULL)
        return -1;
    if ((keys = tuple_of(PyTuple_GET_ITEM(t, 2), PyTuple_GET_SIZE(lits), "a keyed mode's keys")) == NULL
            || read_literals(s, md, lits, "keyed") < 0)
        return -1;
    for (Py_ssize_t k = 0; k < md->nlits; k++) {
        Lit *l = &md->lits[k];
        PyObject *key = PyTuple_GET_ITEM(keys, k);
        if (PyTuple_Check(key)) {
            if (tuple_of(key, 2, "a literal key") == NULL
                    || index_in(PyTuple_GET_ITEM(key, 0), 0, s->npatterns, "a literal key's pattern", &l->key_pi) < 0
                    || index_in(PyTuple_GET_ITEM(key, 1), 0, PY_SSIZE_T_MAX / 2, "a literal key's length",
                                &l->key_len) < 0)
                return -1;
        } else if (PyCallable_Check(key)) {
            l->decide = Py_NewRef(key);
        } else {
            PyErr_SetString(PyExc_TypeError, "lean_regions spec: a keyed mode's keys must be (pi, length) or callables");
            return -1;
        }
    }
    return 0;
}

static PyObject *
compile_spec(PyObject *self, PyObject *args)
{
    PyObject *ws, *opens, *fields, *modes;
    Py_ssize_t implicit;
    if (!PyArg_ParseTuple(args, "UnO!O!O!:compile", &ws, &implicit, &PyTuple_Type, &opens, &PyTuple_Type, &fields,
                          &PyTuple_Type, &modes))
        return NULL;
    Spec *s = PyMem_Calloc(1, sizeof(Spec));
    if (s == NULL)
        return PyErr_NoMemory();
    s->npatterns = PyTuple_GET_SIZE(opens);
    s->nmodes = PyTuple_GET_SIZE(modes);
    if (PyTuple_GET_SIZE(fields) != s->npatterns || s->nmodes < 1 || implicit < -1 || implicit >= s->nmodes - 1) {
        PyErr_SetString(PyExc_ValueError, "lean_regions spec: opens and pat_field must be as long, and the implicit "
                        "field one of the modes' fields (or -1)");
        goto fail;
    }
    for (Py_ssize_t i = 0; i < PyUnicode_GET_LENGTH(ws); i++) {
        Py_UCS4 c = PyUnicode_READ_CHAR(ws, i);
        if (c >= WS_LIMIT) {
            PyErr_SetString(PyExc_ValueError, "lean_regions spec: whitespace characters must be below U+3001");
            goto fail;
        }
        s->ws[c / 8] |= (unsigned char)(1 << (c % 8));
    }
    s->implicit = implicit;
    s->opens = PyMem_Calloc((size_t)s->npatterns + 1, 1);
    s->pat_field = PyMem_Calloc((size_t)s->npatterns + 1, sizeof(Py_ssize_t));
    s->modes = PyMem_Calloc((size_t)s->nmodes, sizeof(Mode));
    if (s->opens == NULL || s->pat_field == NULL || s->modes == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t p = 0; p < s->npatterns; p++) {
        int o = PyObject_IsTrue(PyTuple_GET_ITEM(opens, p));
        if (o < 0 || index_in(PyTuple_GET_ITEM(fields, p), 0, s->nmodes - 1, "a pattern's field", &s->pat_field[p]) < 0)
            goto fail;
        s->opens[p] = (char)o;
    }
    for (Py_ssize_t m = 0; m < s->nmodes; m++) {
        Mode *md = &s->modes[m];
        PyObject *t = PyTuple_GET_ITEM(modes, m), *kind;
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) < 1 || !PyUnicode_Check(kind = PyTuple_GET_ITEM(t, 0))) {
            PyErr_SetString(PyExc_TypeError, "lean_regions spec: a mode must be a tuple starting with its kind");
            goto fail;
        }
        if (PyUnicode_CompareWithASCIIString(kind, "nowhere") == 0 && PyTuple_GET_SIZE(t) == 1) {
            md->kind = NOWHERE;
        } else if (PyUnicode_CompareWithASCIIString(kind, "single") == 0 && PyTuple_GET_SIZE(t) == 4) {
            md->kind = SINGLE;
            PyObject *lit = PyTuple_GET_ITEM(t, 1);
            if (!PyUnicode_Check(lit) || PyUnicode_GET_LENGTH(lit) == 0) {
                PyErr_SetString(PyExc_TypeError, "lean_regions spec: a single mode's literal must be a non-empty str");
                goto fail;
            }
            md->single = Py_NewRef(lit);
            if (index_in(PyTuple_GET_ITEM(t, 2), 0, s->npatterns, "a single mode's pattern", &md->single_pi) < 0
                    || index_in(PyTuple_GET_ITEM(t, 3), 0, PY_SSIZE_T_MAX / 2, "a single mode's length",
                                &md->single_len) < 0)
                goto fail;
        } else if (PyUnicode_CompareWithASCIIString(kind, "shaped") == 0 && PyTuple_GET_SIZE(t) == 5) {
            md->kind = SHAPED;
            if (read_shaped(s, md, t) < 0)
                goto fail;
        } else if (PyUnicode_CompareWithASCIIString(kind, "keyed") == 0 && PyTuple_GET_SIZE(t) == 3) {
            md->kind = KEYED;
            if (read_keyed(s, md, t) < 0)
                goto fail;
        } else {
            PyErr_SetString(PyExc_ValueError, "lean_regions spec: a mode must be ('nowhere',), ('single', literal, pi, "
                            "length), ('shaped', led, literals, solos, entries) or ('keyed', literals, keys)");
            goto fail;
        }
    }
    PyObject *capsule = PyCapsule_New(s, "chatparse.lean_regions", capsule_free);
    if (capsule == NULL)
        goto fail;
    return capsule;
fail:
    spec_free(s);
    return NULL;
}

/* ---------------------------------------------------------------------------------------------- regions */
typedef struct {
    const Spec *s;
    PyObject *text;
    int kind;
    const void *data;
    Py_ssize_t n;
    Py_ssize_t *next;  /* per literal slot: its next occurrence at or after the search start, -1 none, -2 unknown */
} Run;

static inline int
is_ws(const Run *r, Py_ssize_t i)
{
    Py_UCS4 c = PyUnicode_READ(r->kind, r->data, i);
    return c < WS_LIMIT && (r->s->ws[c / 8] >> (c % 8)) & 1;
}

/* The next occurrence of literal `l` at or after `i` (-1: none), -2 on error. */
static Py_ssize_t
find_lit(Run *r, const Lit *l, Py_ssize_t i)
{
    Py_ssize_t *memo = &r->next[l->slot];
    if (*memo == -1 || (*memo >= i))
        return *memo;
    *memo = PyUnicode_Find(r->text, l->literal, i, r->n, 1);
    return *memo;
}

/* Where a delimiter alternative `al` whose literal starts at q ends: at q for a lookahead, else after the
 * literal and, for a trailing \s*, the whitespace after it. */
static inline Py_ssize_t
alt_end(const Run *r, const Alt *al, Py_ssize_t q)
{
    if (al->after == AFTER_AHEAD)
        return q;
    Py_ssize_t e = q + al->length;
    if (al->after == AFTER_TRAIL)
        while (e < r->n && is_ws(r, e))
            e++;
    return e;
}

/* oneshot._decide_shaped: the best match at p (the whitespace run p..q ends at q) among `l`'s entries. */
static int
decide_shaped(const Run *r, const Lit *l, Py_ssize_t p, Py_ssize_t q, Py_ssize_t *pe, Py_ssize_t *ppi)
{
    int found = 0;
    Py_ssize_t best_len = 0, best_rank = 0, run = q - p;
    for (Py_ssize_t j = 0; j < l->nentries; j++) {
        const Entry *en = &l->entries[j];
        for (Py_ssize_t a = 0; a < en->nalts; a++) {
            const Alt *al = &en->alts[a];
            if (run < al->run_min || run > al->run_max)
                continue;
            Py_ssize_t e = alt_end(r, al, q);
            /* key (p - e, rank): the longest, then the smallest rank */
            if (!found || e - p > best_len || (e - p == best_len && en->rank < best_rank)) {
                found = 1;
                best_len = e - p;
                best_rank = en->rank;
                *pe = e;
                *ppi = en->pi;
            }
            break;
        }
    }
    return found;
}

enum { FOUND = 1, NONE = 0, FAIL = -1, OUT_OF_BUDGET = 2 };

static int
over_deadline(PyObject *clock, double deadline)
{
    PyObject *now = PyObject_CallNoArgs(clock);
    if (now == NULL)
        return -1;
    double t = PyFloat_AsDouble(now);
    Py_DECREF(now);
    if (t == -1.0 && PyErr_Occurred())
        return -1;
    return t > deadline;
}

/* One candidate spent: OUT_OF_BUDGET when the budget has run out or, at every 64th, the deadline has passed. */
static int
spend(Py_ssize_t *budget, double deadline, PyObject *clock)
{
    *budget -= 1;
    if (*budget < 0)
        return OUT_OF_BUDGET;
    if (*budget % CLOCK_EVERY == 0) {
        int late = over_deadline(clock, deadline);
        if (late != 0)
            return late < 0 ? FAIL : OUT_OF_BUDGET;
    }
    return NONE;
}

/* The leftmost occurrence at or after `i` of any of `md`'s literals, and at one offset the first in order (the
 * longest; keyed literals never share an offset): the literal, or NULL with *pq -1 when none occurs, or NULL
 * with *pq -2 on error. */
static const Lit *
leftmost_lit(Run *r, const Mode *md, Py_ssize_t i, Py_ssize_t *pq)
{
    const Lit *hit = NULL;
    Py_ssize_t q = -1;
    for (Py_ssize_t k = 0; k < md->nlits; k++) {
        Py_ssize_t at = find_lit(r, &md->lits[k], i);
        if (at == -2) {
            *pq = -2;
            return NULL;
        }
        if (at >= 0 && (hit == NULL || at < q)) {
            hit = &md->lits[k];
            q = at;
        }
    }
    *pq = q;
    return hit;
}

/* A keyed literal's decide(text, q): FOUND with [q, *pe) of pattern *ppi and the match and its capture reader
 * (new references), NONE when nothing matches at q, FAIL with the exception set. */
static int
decide_keyed(const Run *r, const Lit *l, Py_ssize_t q, Py_ssize_t *pe, Py_ssize_t *ppi, PyObject **pm,
             PyObject **pread)
{
    PyObject *at = PyLong_FromSsize_t(q);
    if (at == NULL)
        return FAIL;
    PyObject *args[2] = {r->text, at};
    PyObject *got = PyObject_Vectorcall(l->decide, args, 2, NULL);
    Py_DECREF(at);
    if (got == NULL)
        return FAIL;
    if (got == Py_None) {
        Py_DECREF(got);
        return NONE;
    }
    if (tuple_of(got, 4, "a keyed decision") == NULL
            || index_in(PyTuple_GET_ITEM(got, 0), q, r->n + 1, "a keyed decision's end", pe) < 0
            || index_in(PyTuple_GET_ITEM(got, 1), 0, r->s->npatterns, "a keyed decision's pattern", ppi) < 0) {
        Py_DECREF(got);
        return FAIL;
    }
    *pm = Py_NewRef(PyTuple_GET_ITEM(got, 2));
    *pread = Py_NewRef(PyTuple_GET_ITEM(got, 3));
    Py_DECREF(got);
    return FOUND;
}

/* The next delimiter at or after `scan` in mode `md`: [*ps, *pe) of pattern *ppi; for a keyed decision by
 * `regex`, its match and capture reader in *pm and *pread (new references; left NULL otherwise). */
static int
next_delimiter(Run *r, const Mode *md, Py_ssize_t scan, Py_ssize_t *ps, Py_ssize_t *pe, Py_ssize_t *ppi,
               PyObject **pm, PyObject **pread, Py_ssize_t *budget, double deadline, PyObject *clock)
{
    if (md->kind == NOWHERE)
        return NONE;
    if (md->kind == SINGLE) {
        Py_ssize_t s = PyUnicode_Find(r->text, md->single, scan, r->n, 1);
        if (s == -2)
            return FAIL;
        if (s < 0)
            return NONE;
        *ps = s;
        *pe = s + md->single_len;
        *ppi = md->single_pi;
        return FOUND;
    }
    Py_ssize_t i = scan;
    for (;;) {
        Py_ssize_t q;
        const Lit *hit = leftmost_lit(r, md, i, &q);
        if (hit == NULL)
            return q == -2 ? FAIL : NONE;
        Py_ssize_t p = q;
        if (md->led)
            while (p > i && is_ws(r, p - 1))
                p--;
        int spent = spend(budget, deadline, clock);
        if (spent != NONE)
            return spent;
        if (md->kind == KEYED) {
            *ps = q;
            if (hit->decide == NULL) {
                *pe = q + hit->key_len;
                *ppi = hit->key_pi;
                return FOUND;
            }
            int got = decide_keyed(r, hit, q, pe, ppi, pm, pread);
            if (got != NONE)
                return got;
            i = q + 1;
            continue;
        }
        if (hit->has_solo) {
            const Alt *al = &hit->solo;
            if (q - p > al->run_max)
                p = q;
            if (q - p >= al->run_min) {
                *ps = p;
                *pe = alt_end(r, al, q);
                *ppi = hit->solo_pi;
                return FOUND;
            }
            i = q + 1;
            continue;
        }
        if (decide_shaped(r, hit, p, q, pe, ppi)) {
            *ps = p;
            return FOUND;
        }
        if (p < q && decide_shaped(r, hit, q, q, pe, ppi)) {  /* (an alternative without a lead, at q) */
            *ps = q;
            return FOUND;
        }
        i = q + 1;
    }
}

static int
add_region(PyObject *out, const Run *r, Py_ssize_t field, Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t open,
           PyObject *m, PyObject *read)
{
    PyObject *body = PyUnicode_Substring(r->text, lo, hi);
    if (body == NULL)
        return -1;
    PyObject *t = Py_BuildValue("(nNnOO)", field, body, open, m == NULL ? Py_None : m, read == NULL ? Py_None : read);
    if (t == NULL)
        return -1;
    int res = PyList_Append(out, t);
    Py_DECREF(t);
    return res;
}

static PyObject *
regions(PyObject *self, PyObject *args)
{
    PyObject *capsule, *text, *clock, *out = NULL;
    Py_ssize_t budget;
    double deadline;
    if (!PyArg_ParseTuple(args, "OUndO:regions", &capsule, &text, &budget, &deadline, &clock))
        return NULL;
    const Spec *s = PyCapsule_GetPointer(capsule, "chatparse.lean_regions");
    if (s == NULL || PyUnicode_READY(text) < 0)
        return NULL;
    Py_ssize_t small[32], *next = s->nslots <= 32 ? small : PyMem_Calloc((size_t)s->nslots, sizeof(Py_ssize_t));
    if (next == NULL)
        return PyErr_NoMemory();
    for (Py_ssize_t k = 0; k < s->nslots; k++)
        next[k] = -2;
    Run r = {s, text, PyUnicode_KIND(text), PyUnicode_DATA(text), PyUnicode_GET_LENGTH(text), next};
    Py_ssize_t n = r.n, current = s->implicit, open = -1, pos = 0, scan = 0, empty_open = -1, at = 0, end = 0;
    PyObject *open_m = NULL, *open_read = NULL;  /* (owned) the keyed decision that opened the current region */
    int opened = 0, status = 0;
    const Mode *md = &s->modes[0];
    out = PyList_New(0);
    if (out == NULL)
        goto fail;
    for (;;) {
        Py_ssize_t st = 0, e = 0, pi = 0;
        PyObject *m = NULL, *read = NULL;
        int got = next_delimiter(&r, md, scan, &st, &e, &pi, &m, &read, &budget, deadline, clock);
        if (got == FAIL)
            goto fail;
        if (got == OUT_OF_BUDGET) {
            status = 3;
            break;
        }
        if (got == NONE)
            break;
        /* the delimiter closes the current region ... */
        if (st > pos && current >= 0)
            opened = 1;
        int had = opened;
        if (current >= 0 && opened && add_region(out, &r, current, pos, st, open, open_m, open_read) < 0) {
            Py_XDECREF(m);
            Py_XDECREF(read);
            goto fail;
        }
        Py_CLEAR(open_m);
        Py_CLEAR(open_read);
        if (s->opens[pi]) {  /* ... and opens its field */
            current = s->pat_field[pi];
            opened = 1;
            open = pi;
            open_m = m;
            open_read = read;
            md = &s->modes[1 + current];
            empty_open = st == e ? st : -1;
        } else {  /* ... and the implicit field may open after it */
            Py_XDECREF(m);
            Py_XDECREF(read);
            if (!had && st == e) {
                status = 1;
                at = st;
                end = e;
                break;
            }
            if (st == e && e == empty_open) {
                status = 2;
                at = st;
                end = current;
                break;
            }
            current = s->implicit;
            opened = 0;
            open = -1;
            md = &s->modes[0];
        }
        pos = scan = e;
    }
    if (status == 0) {
        if (n > pos && current >= 0)
            opened = 1;
        if (current >= 0 && opened && add_region(out, &r, current, pos, n, open, open_m, open_read) < 0)
            goto fail;
    }
    Py_XDECREF(open_m);
    Py_XDECREF(open_read);
    if (next != small)
        PyMem_Free(next);
    return Py_BuildValue("(Ninn)", out, status, at, end);
fail:
    Py_XDECREF(open_m);
    Py_XDECREF(open_read);
    if (next != small)
        PyMem_Free(next);
    Py_XDECREF(out);
    return NULL;
}

static PyMethodDef methods[] = {
    {"compile", compile_spec, METH_VARARGS,
     "compile(ws, implicit, opens, pat_field, modes): a spec for regions() (see the module's source)."},
    {"regions", regions, METH_VARARGS,
     "regions(spec, text, budget, deadline, clock): the regions of text to store, and how the parse ended (see "
     "the module's source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_lean_regions", NULL, 0, methods};

PyMODINIT_FUNC
PyInit__lean_regions(void)
{
    return PyModule_Create(&module);
}
