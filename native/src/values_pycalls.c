/*
 * values_pycalls.c - the python-calls content parser (format extension python_calls; runtime/values/pycalls.py,
 * JS PyCallsParser): Python call syntax to [{"name": str, "arguments": {...}}, ...], the same grammar, values and
 * error messages ("python-calls: <what> at offset N", N in code points of the body).
 *
 * One pass; brackets nest at most PY_MAX_DEPTH deep (the call list's [ and the call's ( count), so the recursion
 * is bounded. Hexadecimal, octal and binary integers are exact up to 14300 bits (a decimal integer is limited to
 * 4300 digits, as Python's is); a longer one is refused with the 4300-digit message (Python would read it, and
 * then fail to print it).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "values_internal.h"

#define PY_MAX_DEPTH 100

typedef struct pyc {
    const char *t;
    size_t n, pos;
    cp_error *err;
} pyc;

static const char *const KEYWORDS[] = {
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del",
    "elif", "else", "except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda",
    "nonlocal", "not", "or", "pass", "raise", "return", "try", "while", "with", "yield", NULL};

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\f' || c == '\r' || c == '\n'; }
static int is_inline_ws(char c) { return c == ' ' || c == '\t' || c == '\f'; }
static int is_id0(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
static int is_id(char c) { return is_id0(c) || (c >= '0' && c <= '9'); }
static int is_dig(char c) { return c >= '0' && c <= '9'; }

static void skip(pyc *p, int inline_only) {
    while (p->pos < p->n && (inline_only ? is_inline_ws(p->t[p->pos]) : is_ws(p->t[p->pos]))) p->pos++;
}
static char peek(const pyc *p) { return p->pos < p->n ? p->t[p->pos] : 0; }
static int at_end(const pyc *p) { return p->pos >= p->n; }

/* ValueError "python-calls: <what> at offset N"; `what` is built by the caller in `m` (consumed). */
static void *fail(pyc *p, vbuf *m, size_t at) {
    vb_printf(m, " at offset %zu", vpy_cplen(p->t, at));
    vbuf full = {0};
    vb_puts(&full, "python-calls: ");
    vb_put(&full, m->b ? m->b : "", m->n);
    if (m->oom) full.oom = 1;
    vb_free(m);
    return verr_buf(p->err, "ValueError", &full);
}
static void *failf(pyc *p, size_t at, const char *what) {
    vbuf m = {0};
    vb_puts(&m, what);
    return fail(p, &m, at);
}
/* repr of the character at pos, or "the end of the text" */
static void found(const pyc *p, vbuf *m) {
    if (at_end(p)) { vb_puts(m, "the end of the text"); return; }
    size_t j = p->pos;
    cp_utf8_decode(p->t, p->n, &j, 1);
    if (j == p->pos) j = p->pos + 1;
    vb_repr(m, p->t + p->pos, j - p->pos);
}
static void *fail_found(pyc *p, const char *before, const char *after) {
    vbuf m = {0};
    vb_puts(&m, before);
    found(p, &m);
    if (after) vb_puts(&m, after);
    return fail(p, &m, p->pos);
}

static size_t ident_len(const pyc *p, size_t i) {
    if (i >= p->n || !is_id0(p->t[i])) return 0;
    size_t j = i + 1;
    while (j < p->n && is_id(p->t[j])) j++;
    return j - i;
}

static int is_keyword(const char *s, size_t n) {
    for (int k = 0; KEYWORDS[k]; k++)
        if (strlen(KEYWORDS[k]) == n && memcmp(KEYWORDS[k], s, n) == 0) return 1;
    return 0;
}

/* an identifier at pos (advanced past it): its length, or 0 with the error filled */
static size_t ident(pyc *p, const char *what) {
    size_t k = ident_len(p, p->pos);
    if (!k) {
        vbuf m = {0};
        vb_printf(&m, "expected %s, found ", what);
        found(p, &m);
        fail(p, &m, p->pos);
        return 0;
    }
    if (is_keyword(p->t + p->pos, k)) {
        vbuf m = {0};
        vb_printf(&m, "%s ", what);
        vb_repr(&m, p->t + p->pos, k);
        vb_puts(&m, " is a Python keyword");
        fail(p, &m, p->pos);
        return 0;
    }
    p->pos += k;
    return k;
}

static int enter(pyc *p, int *depth) {
    if (*depth >= PY_MAX_DEPTH) {
        vbuf m = {0};
        vb_printf(&m, "brackets nested more than %d deep", PY_MAX_DEPTH);
        fail(p, &m, p->pos);
        return -1;
    }
    (*depth)++;
    return 0;
}

static cp_value *value(pyc *p, int depth);

/* ---- numbers ---- */

static long long digits_end(const pyc *p, size_t i) {   /* [0-9](?:_?[0-9])* */
    if (i >= p->n || !is_dig(p->t[i])) return -1;
    size_t j = i + 1;
    for (;;) {
        if (j < p->n && is_dig(p->t[j])) j++;
        else if (j + 1 < p->n && p->t[j] == '_' && is_dig(p->t[j + 1])) j += 2;
        else break;
    }
    return (long long)j;
}

static long long exponent_end(const pyc *p, size_t i) {   /* [eE][+-]?DIGITS */
    if (i >= p->n || (p->t[i] != 'e' && p->t[i] != 'E')) return -1;
    size_t j = i + 1;
    if (j < p->n && (p->t[j] == '+' || p->t[j] == '-')) j++;
    return digits_end(p, j);
}

static long long float_end(const pyc *p, size_t i) {
    long long d = digits_end(p, i);
    size_t dot = d >= 0 ? (size_t)d : i;
    long long pf = -1;
    if (dot < p->n && p->t[dot] == '.') {
        long long f = digits_end(p, dot + 1);
        if (f >= 0) pf = f;                 /* (DIGITS)? . DIGITS */
        else if (d >= 0) pf = (long long)dot + 1;   /* DIGITS . */
    }
    if (pf >= 0) {
        long long e = exponent_end(p, (size_t)pf);
        return e >= 0 ? e : pf;
    }
    if (d >= 0) return exponent_end(p, (size_t)d);   /* DIGITS EXPONENT */
    return -1;
}

static long long based_end(const pyc *p, size_t i, int base) {   /* (?:_?[digit])+ after the 0x */
    size_t j = i;
    for (;;) {
        size_t k = j;
        if (k < p->n && p->t[k] == '_') k++;
        if (k >= p->n) break;
        char c = p->t[k];
        int ok = base == 16 ? (is_dig(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))
               : base == 8 ? (c >= '0' && c <= '7') : (c == '0' || c == '1');
        if (!ok) break;
        j = k + 1;
    }
    return j > i ? (long long)j : -1;
}

static long long int_end(const pyc *p, size_t i, int *base) {
    *base = 10;
    if (i >= p->n) return -1;
    if (p->t[i] == '0' && i + 1 < p->n) {
        char x = p->t[i + 1];
        int b = (x == 'x' || x == 'X') ? 16 : (x == 'o' || x == 'O') ? 8 : (x == 'b' || x == 'B') ? 2 : 0;
        if (b) {
            long long e = based_end(p, i + 2, b);
            if (e >= 0) { *base = b; return e; }
        }
    }
    if (p->t[i] >= '1' && p->t[i] <= '9') return digits_end(p, i);
    if (p->t[i] == '0') {   /* 0+(?:_?0)* */
        size_t j = i + 1;
        for (;;) {
            if (j < p->n && p->t[j] == '0') j++;
            else if (j + 1 < p->n && p->t[j] == '_' && p->t[j + 1] == '0') j += 2;
            else break;
        }
        return (long long)j;
    }
    return -1;
}

/* the decimal text of a hex/octal/binary digit string (underscores skipped), or NULL when over 14300 bits */
static char *based_decimal(const char *s, size_t n, int base, int *too_long) {
    size_t ndig = 0;
    for (size_t i = 0; i < n; i++) ndig += s[i] != '_';
    int bits = base == 16 ? 4 : base == 8 ? 3 : 1;
    if (ndig * (size_t)bits > 14300 + 8) {
        /* leading zeros do not count */
        size_t i = 0;
        while (i < n && (s[i] == '0' || s[i] == '_')) { if (s[i] == '0') ndig--; i++; }
        if (ndig * (size_t)bits > 14300 + 8) { *too_long = 1; return NULL; }
    }
    size_t cap = ndig * (size_t)bits / 29 + 2, len = 1;
    uint32_t *limb = calloc(cap, sizeof *limb);
    if (!limb) return NULL;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '_') continue;
        uint32_t d = (uint32_t)(is_dig(c) ? c - '0' : (c | 0x20) - 'a' + 10);
        uint64_t carry = d;
        for (size_t j = 0; j < len; j++) {
            uint64_t t = (uint64_t)limb[j] * (uint64_t)base + carry;
            limb[j] = (uint32_t)(t % 1000000000u);
            carry = t / 1000000000u;
        }
        while (carry && len < cap) { limb[len++] = (uint32_t)(carry % 1000000000u); carry /= 1000000000u; }
    }
    vbuf b = {0};
    vb_printf(&b, "%u", limb[len - 1]);
    for (size_t j = len - 1; j-- > 0;) vb_printf(&b, "%09u", limb[j]);
    free(limb);
    if (b.oom) { vb_free(&b); return NULL; }
    return b.b;
}

/* a number at pos; `neg` applies the sign before it. */
static cp_value *number(pyc *p, int neg) {
    size_t start = p->pos;
    long long f = float_end(p, start), d = digits_end(p, start), end;
    int kind, base = 10;   /* 0 imag, 1 float, 2 int */
    if (f >= 0 && (size_t)f < p->n && (p->t[f] == 'j' || p->t[f] == 'J')) { kind = 0; end = f + 1; }
    else if (f < 0 && d >= 0 && (size_t)d < p->n && (p->t[d] == 'j' || p->t[d] == 'J')) { kind = 0; end = d + 1; }
    else if (f >= 0) { kind = 1; end = f; }
    else {
        end = int_end(p, start, &base);
        kind = 2;
        if (end < 0) return fail_found(p, "expected a number, found ", NULL);
    }
    if ((size_t)end < p->n && (is_id(p->t[end]) || p->t[end] == '.')) return failf(p, start, "invalid number literal");
    p->pos = (size_t)end;
    if (kind == 0) return failf(p, start, "imaginary numbers are not supported");
    const char *s = p->t + start;
    size_t n = (size_t)end - start;
    if (kind == 1) {
        char *b = malloc(n + 1);
        if (!b) return verr_oom(p->err);
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (s[i] != '_') b[k++] = s[i];
        b[k] = 0;
        double x = vstrtod(b);
        free(b);
        cp_value *v = cp_float(neg ? -x : x);
        return v ? v : verr_oom(p->err);
    }
    char *dec;
    if (base == 10) {
        size_t digits = 0;
        for (size_t i = 0; i < n; i++) digits += s[i] != '_';
        if (digits > 4300) return failf(p, start, "an integer of more than 4300 digits");
        dec = malloc(digits + 1);
        if (!dec) return verr_oom(p->err);
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (s[i] != '_') dec[k++] = s[i];
        dec[k] = 0;
    } else {
        int too_long = 0;
        dec = based_decimal(s + 2, n - 2, base, &too_long);
        if (!dec) return too_long ? failf(p, start, "an integer of more than 4300 digits") : verr_oom(p->err);
    }
    size_t dn = strlen(dec);
    char *signed_text = malloc(dn + 2);
    if (!signed_text) { free(dec); return verr_oom(p->err); }
    signed_text[0] = '-';
    memcpy(signed_text + 1, dec, dn + 1);
    free(dec);
    cp_value *v = neg ? cp_int_from_text(signed_text, dn + 1) : cp_int_from_text(signed_text + 1, dn);
    free(signed_text);
    return v ? v : verr_oom(p->err);
}

/* ---- strings ---- */

static int hexval(char c) {
    if (is_dig(c)) return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* append a code point, joining a low surrogate to a high one just before it (value.h: one encoding per str) */
static void put_cp(vbuf *b, uint32_t cp) {
    if (cp >= 0xDC00 && cp <= 0xDFFF && b->n >= 3) {
        size_t j = b->n - 3;
        int32_t hi = cp_utf8_decode(b->b, b->n, &j, 1);
        if (hi >= 0xD800 && hi <= 0xDBFF && j == b->n) {
            b->n -= 3;
            cp = 0x10000 + (((uint32_t)hi - 0xD800) << 10) + (cp - 0xDC00);
        }
    }
    vb_cp(b, cp);
}

static int string_lit(pyc *p, vbuf *out) {
    const char *t = p->t;
    size_t start = p->pos;
    char q = t[start];
    int triple = start + 2 < p->n && t[start + 1] == q && t[start + 2] == q;
    size_t i = start + (triple ? 3 : 1);
    for (;;) {
        if (i >= p->n) { failf(p, start, "unterminated string"); return -1; }
        char c = t[i];
        if (c == q && (!triple || (i + 2 < p->n && t[i + 1] == q && t[i + 2] == q))) {
            p->pos = i + (triple ? 3 : 1);
            return 0;
        }
        if (c == '\\') {
            if (i + 1 >= p->n) { failf(p, start, "unterminated string"); return -1; }
            char d = t[i + 1];
            const char *simple = "\\\\''\"\"a\ab\bf\fn\nr\rt\tv\v";
            const char *hit = NULL;
            for (const char *k = simple; *k; k += 2)
                if (*k == d) { hit = k; break; }
            if (hit) { vb_putc(out, hit[1]); i += 2; }
            else if (d == '\n') i += 2;
            else if (d == '\r') i += (i + 2 < p->n && t[i + 2] == '\n') ? 3 : 2;
            else if (d >= '0' && d <= '7') {
                uint32_t v = 0;
                size_t j = i + 1;
                while (j < p->n && j < i + 4 && t[j] >= '0' && t[j] <= '7') v = v * 8 + (uint32_t)(t[j++] - '0');
                put_cp(out, v);
                i = j;
            } else if (d == 'x' || d == 'u' || d == 'U') {
                int width = d == 'x' ? 2 : d == 'u' ? 4 : 8;
                uint32_t v = 0;
                int ok = i + 2 + (size_t)width <= p->n;
                for (int k = 0; ok && k < width; k++) {
                    int h = hexval(t[i + 2 + (size_t)k]);
                    if (h < 0) ok = 0;
                    else v = v * 16 + (uint32_t)h;
                }
                if (!ok) {
                    vbuf m = {0};
                    vb_printf(&m, "truncated \\%c escape (needs %d hex digits)", d, width);
                    fail(p, &m, i);
                    return -1;
                }
                if (v > 0x10FFFF) {
                    vbuf m = {0};
                    vb_printf(&m, "\\%c escape out of range", d);
                    fail(p, &m, i);
                    return -1;
                }
                put_cp(out, v);
                i += 2 + (size_t)width;
            } else if (d == 'N') { failf(p, i, "\\N{...} escapes are not supported"); return -1; }
            else { vb_putc(out, '\\'); i += 1; }
            continue;
        }
        if (c == '\r' || c == '\n') {
            if (!triple) { failf(p, start, "unterminated string (a new line inside a quoted string)"); return -1; }
            vb_putc(out, '\n');
            i += (c == '\r' && i + 1 < p->n && t[i + 1] == '\n') ? 2 : 1;
            continue;
        }
        size_t j = i;
        int32_t cp = cp_utf8_decode(t, p->n, &j, 1);
        if (cp < 0) { vb_putc(out, c); i++; }
        else { put_cp(out, (uint32_t)cp); i = j; }
    }
}

/* ---- values ---- */

static cp_value *sequence(pyc *p, int depth, char end, cp_value *items) {
    if (!items) return verr_oom(p->err);
    skip(p, 0);
    while (peek(p) != end || at_end(p)) {
        cp_value *v = value(p, depth);
        if (!v) { cp_value_free(items); return NULL; }
        if (cp_list_append(items, v) < 0) { cp_value_free(items); return verr_oom(p->err); }
        skip(p, 0);
        if (peek(p) == ',' && !at_end(p)) { p->pos++; skip(p, 0); }
        else if (peek(p) != end || at_end(p)) {
            char e[2] = {end, 0};
            vbuf m = {0};
            vb_puts(&m, "expected ',' or ");
            vb_repr(&m, e, 1);
            vb_puts(&m, ", found ");
            found(p, &m);
            cp_value_free(items);
            return fail(p, &m, p->pos);
        }
    }
    p->pos++;
    return items;
}

static cp_value *dict(pyc *p, int depth) {
    cp_value *out = cp_object();
    if (!out) return verr_oom(p->err);
    skip(p, 0);
    while (peek(p) != '}' || at_end(p)) {
        size_t at = p->pos;
        cp_value *key = value(p, depth);
        if (!key) { cp_value_free(out); return NULL; }
        skip(p, 0);
        if (peek(p) != ':' || at_end(p)) {
            cp_value_free(key);
            cp_value_free(out);
            if (!at_end(p) && (peek(p) == ',' || peek(p) == '}'))
                return failf(p, p->pos, "sets are not supported (expected ':' after a dict key)");
            return fail_found(p, "expected ':' after a dict key, found ", NULL);
        }
        if (!vpy_is_str(key)) { cp_value_free(key); cp_value_free(out); return failf(p, at, "dict keys must be strings"); }
        p->pos++;
        skip(p, 0);
        cp_value *v = value(p, depth);
        if (!v) { cp_value_free(key); cp_value_free(out); return NULL; }
        int r = cp_object_set(out, key->u.string.bytes, key->u.string.len, v);
        cp_value_free(key);
        if (r < 0) { cp_value_free(out); return verr_oom(p->err); }
        skip(p, 0);
        if (peek(p) == ',' && !at_end(p)) { p->pos++; skip(p, 0); }
        else if (peek(p) != '}' || at_end(p)) {
            cp_value_free(out);
            return fail_found(p, "expected ',' or '}', found ", NULL);
        }
    }
    p->pos++;
    return out;
}

static cp_value *value(pyc *p, int depth) {
    char ch = peek(p);
    size_t start = p->pos;
    if (at_end(p)) return fail_found(p, "expected a value, found ", NULL);
    if (ch == '\'' || ch == '"') {
        vbuf out = {0};
        if (string_lit(p, &out) < 0) { vb_free(&out); return NULL; }
        for (;;) {
            size_t save = p->pos;
            skip(p, 0);
            if (at_end(p) || (peek(p) != '\'' && peek(p) != '"')) {
                p->pos = save;
                cp_value *v = vb_string(&out);
                return v ? v : verr_oom(p->err);
            }
            if (string_lit(p, &out) < 0) { vb_free(&out); return NULL; }
        }
    }
    if (ch == '+' || ch == '-') {
        p->pos++;
        skip(p, 0);
        if (at_end(p) || !(is_dig(peek(p)) || peek(p) == '.'))
            return fail_found(p, "a sign must be followed by a number, found ", NULL);
        return number(p, ch == '-');
    }
    if (is_dig(ch) || ch == '.') return number(p, 0);
    if (ch == '[') {
        if (enter(p, &depth) < 0) return NULL;
        p->pos++;
        return sequence(p, depth, ']', cp_list());
    }
    if (ch == '(') {
        if (enter(p, &depth) < 0) return NULL;
        p->pos++;
        skip(p, 0);
        if (peek(p) == ')' && !at_end(p)) { p->pos++; cp_value *v = cp_list(); return v ? v : verr_oom(p->err); }
        cp_value *first = value(p, depth);
        if (!first) return NULL;
        skip(p, 0);
        if (peek(p) == ')' && !at_end(p)) { p->pos++; return first; }
        if (peek(p) != ',' || at_end(p)) { cp_value_free(first); return fail_found(p, "expected ',' or ')', found ", NULL); }
        p->pos++;
        cp_value *items = cp_list();
        if (!items) { cp_value_free(first); return verr_oom(p->err); }
        if (cp_list_append(items, first) < 0) { cp_value_free(items); return verr_oom(p->err); }
        return sequence(p, depth, ')', items);
    }
    if (ch == '{') {
        if (enter(p, &depth) < 0) return NULL;
        p->pos++;
        return dict(p, depth);
    }
    size_t k = ident_len(p, p->pos);
    if (k) {
        const char *w = p->t + p->pos;
        static const struct { const char *name; int kind; } consts[] = {
            {"True", 1}, {"False", 0}, {"None", 2}, {"true", 1}, {"false", 0}, {"null", 2}};
        for (size_t c = 0; c < sizeof consts / sizeof consts[0]; c++) {
            if (strlen(consts[c].name) == k && memcmp(consts[c].name, w, k) == 0) {
                p->pos += k;
                cp_value *v = consts[c].kind == 2 ? cp_null() : cp_bool(consts[c].kind);
                return v ? v : verr_oom(p->err);
            }
        }
        char next = p->pos + k < p->n ? p->t[p->pos + k] : 0;
        vbuf m = {0};
        if (next == '\'' || next == '"') {
            vb_puts(&m, "string prefix ");
            vb_repr(&m, w, k);
            vb_puts(&m, " is not supported (f-strings, raw and byte strings)");
            return fail(p, &m, p->pos);
        }
        vb_repr(&m, w, k);
        vb_puts(&m, " is not a literal value (names, calls and expressions are not supported)");
        return fail(p, &m, start);
    }
    return fail_found(p, "expected a value, found ", NULL);
}

static cp_value *call(pyc *p, int depth, int inline_only) {
    vbuf name = {0};
    size_t k = ident(p, "a function name");
    if (!k) return NULL;
    vb_put(&name, p->t + p->pos - k, k);
    skip(p, inline_only);
    while (peek(p) == '.' && !at_end(p)) {
        p->pos++;
        skip(p, inline_only);
        k = ident(p, "a function name");
        if (!k) { vb_free(&name); return NULL; }
        vb_putc(&name, '.');
        vb_put(&name, p->t + p->pos - k, k);
        skip(p, inline_only);
    }
    if (name.oom) { vb_free(&name); return verr_oom(p->err); }
    if (peek(p) != '(' || at_end(p)) {
        vbuf m = {0};
        vb_puts(&m, "expected '(' after the function name ");
        vb_repr(&m, name.b, name.n);
        vb_puts(&m, ", found ");
        found(p, &m);
        vb_free(&name);
        return fail(p, &m, p->pos);
    }
    if (enter(p, &depth) < 0) { vb_free(&name); return NULL; }
    p->pos++;
    cp_value *args = cp_object();
    if (!args) { vb_free(&name); return verr_oom(p->err); }
    size_t count = 0;
    skip(p, 0);
    while (peek(p) != ')' || at_end(p)) {
        size_t at = p->pos;
        vbuf m = {0};
        if (peek(p) == '*' && !at_end(p)) {
            vb_puts(&m, "*args and **kwargs are not supported (call ");
            vb_repr(&m, name.b, name.n);
            vb_puts(&m, ")");
            goto failed;
        }
        size_t idl = ident_len(p, p->pos);
        size_t eq = p->pos + idl;
        while (idl && eq < p->n && is_ws(p->t[eq])) eq++;
        if (!idl || eq >= p->n || p->t[eq] != '=' || (eq + 1 < p->n && p->t[eq + 1] == '=')) {
            vb_printf(&m, "positional argument %zu in the call to ", count + 1);
            vb_repr(&m, name.b, name.n);
            vb_puts(&m, "; only keyword arguments (name=value) are supported");
            goto failed;
        }
        size_t kl = ident(p, "an argument name");
        if (!kl) { cp_value_free(args); vb_free(&name); return NULL; }
        const char *key = p->t + p->pos - kl;
        if (cp_object_get(args, key, kl)) {
            vb_puts(&m, "keyword argument ");
            vb_repr(&m, key, kl);
            vb_puts(&m, " repeated in the call to ");
            vb_repr(&m, name.b, name.n);
            p->pos = at;
            goto failed;
        }
        skip(p, 0);
        p->pos++;   /* the '=' */
        skip(p, 0);
        cp_value *v = value(p, depth);
        if (!v) { cp_value_free(args); vb_free(&name); return NULL; }
        if (cp_object_set(args, key, kl, v) < 0) { cp_value_free(args); vb_free(&name); return verr_oom(p->err); }
        count++;
        skip(p, 0);
        if (peek(p) == ',' && !at_end(p)) { p->pos++; skip(p, 0); }
        else if (peek(p) != ')' || at_end(p)) {
            vb_puts(&m, "expected ',' or ')' in the call to ");
            vb_repr(&m, name.b, name.n);
            vb_puts(&m, ", found ");
            found(p, &m);
            goto failed;
        }
        continue;
    failed:
        cp_value_free(args);
        vb_free(&name);
        return fail(p, &m, p->pos);
    }
    p->pos++;
    cp_value *out = cp_object();
    cp_value *nm = vb_string(&name);   /* (consumes name) */
    if (!out || !nm) {
        cp_value_free(out);
        cp_value_free(nm);
        cp_value_free(args);
        return verr_oom(p->err);
    }
    /* (cp_object_set_cstr frees what it is given when it fails) */
    if (cp_object_set_cstr(out, "name", nm) < 0) { cp_value_free(args); cp_value_free(out); return verr_oom(p->err); }
    if (cp_object_set_cstr(out, "arguments", args) < 0) { cp_value_free(out); return verr_oom(p->err); }
    return out;
}

cp_value *cp_values_python_calls(const char *text, size_t len, cp_error *err) {
    pyc p = {text ? text : "", text ? len : 0, 0, err};
    skip(&p, 0);
    cp_value *calls = cp_list();
    if (!calls) return verr_oom(err);
    if (at_end(&p)) return calls;
    if (peek(&p) == '[') {
        p.pos++;
        skip(&p, 0);
        while (peek(&p) != ']' || at_end(&p)) {
            cp_value *c = call(&p, 1, 0);
            if (!c) { cp_value_free(calls); return NULL; }
            if (cp_list_append(calls, c) < 0) { cp_value_free(calls); return verr_oom(err); }
            skip(&p, 0);
            if (peek(&p) == ',' && !at_end(&p)) { p.pos++; skip(&p, 0); }
            else if (peek(&p) != ']' || at_end(&p)) {
                cp_value_free(calls);
                return fail_found(&p, "expected ',' or ']' after a call, found ", NULL);
            }
        }
        p.pos++;
        skip(&p, 0);
        if (!at_end(&p)) {
            cp_value_free(calls);
            return fail_found(&p, "unexpected ", " after the list of calls");
        }
        return calls;
    }
    for (;;) {
        cp_value *c = call(&p, 0, 1);
        if (!c) { cp_value_free(calls); return NULL; }
        if (cp_list_append(calls, c) < 0) { cp_value_free(calls); return verr_oom(err); }
        skip(&p, 1);
        if (at_end(&p)) return calls;
        char ch = peek(&p);
        if (ch == ',') p.pos++;
        else if (ch != '\r' && ch != '\n') {
            cp_value_free(calls);
            return fail_found(&p, "expected ',' or a new line after a call, found ", NULL);
        }
        skip(&p, 0);
        if (at_end(&p)) return calls;
    }
}
