/*
 * values_util.c - the value layer's shared helpers (values_internal.h): buffers, Python-worded errors, repr,
 * strip, truthiness, int()/float() of text, and the Unicode lookups.
 */
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "values_internal.h"

/* ------------------------------------------------------------------------------------------ Unicode lookups */

static int in_ranges(const cp_urange *r, size_t n, uint32_t cp) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cp < r[mid].lo) hi = mid;
        else if (cp > r[mid].hi) lo = mid + 1;
        else return 1;
    }
    return 0;
}

int vu_printable(uint32_t cp) { return !in_ranges(cp_u_nonprint, cp_u_nonprint_len, cp); }
int vu_word(uint32_t cp) {
    if (cp < 128) return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_';
    return in_ranges(cp_u_word, cp_u_word_len, cp);
}
int vu_word_env(const cp_values_env *env, uint32_t cp) {
    if (env && env->word) return env->word(env->word_ctx, cp) != 0;
    return vu_word(cp);
}
int vu_decimal(uint32_t cp) {
    size_t lo = 0, hi = cp_u_decimal_len;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cp < cp_u_decimal[mid].lo) hi = mid;
        else if (cp > cp_u_decimal[mid].hi) lo = mid + 1;
        else return cp_u_decimal[mid].value_of_lo + (int)(cp - cp_u_decimal[mid].lo);
    }
    return -1;
}
int vu_space(uint32_t c) {
    if (c <= 0x20) return c == 0x20 || (c >= 0x9 && c <= 0xd) || (c >= 0x1c && c <= 0x1f);
    if (c < 0x85) return 0;
    return c == 0x85 || c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 ||
           c == 0x202f || c == 0x205f || c == 0x3000;
}

/* ------------------------------------------------------------------------------------------ buffers */

static int vb_grow(vbuf *v, size_t extra) {
    if (v->oom) return 0;
    if (v->n + extra + 1 <= v->cap) return 1;
    size_t cap = v->cap ? v->cap : 64;
    while (cap < v->n + extra + 1) {
        if (cap > SIZE_MAX / 2) { v->oom = 1; return 0; }
        cap *= 2;
    }
    char *b = realloc(v->b, cap);
    if (!b) { v->oom = 1; return 0; }
    v->b = b;
    v->cap = cap;
    return 1;
}

void vb_put(vbuf *v, const char *s, size_t n) {
    if (!n || !vb_grow(v, n)) return;
    memcpy(v->b + v->n, s, n);
    v->n += n;
    v->b[v->n] = 0;
}
void vb_puts(vbuf *v, const char *s) { vb_put(v, s, strlen(s)); }
void vb_putc(vbuf *v, char c) { vb_put(v, &c, 1); }
void vb_cp(vbuf *v, uint32_t cp) {
    char out[4];
    vb_put(v, out, (size_t)cp_utf8_encode(cp, out));
}
void vb_printf(vbuf *v, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char small[256];
    int k = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (k < 0) return;
    if ((size_t)k < sizeof small) { vb_put(v, small, (size_t)k); return; }
    if (!vb_grow(v, (size_t)k)) return;
    va_start(ap, fmt);
    vsnprintf(v->b + v->n, (size_t)k + 1, fmt, ap);
    va_end(ap);
    v->n += (size_t)k;
}
void vb_free(vbuf *v) {
    free(v->b);
    v->b = NULL;
    v->n = v->cap = 0;
}
cp_value *vb_string(vbuf *v) {
    if (v->oom) { vb_free(v); return NULL; }
    if (!v->b) return cp_string("", 0);
    cp_value *s = cp_string_take(v->b, v->n);
    v->b = NULL;
    v->n = v->cap = 0;
    return s;
}

void vb_repr(vbuf *v, const char *s, size_t n) {
    int has_sq = 0, has_dq = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\'') has_sq = 1;
        else if (s[i] == '"') has_dq = 1;
    }
    char q = has_sq && !has_dq ? '"' : '\'';
    vb_putc(v, q);
    size_t i = 0;
    while (i < n) {
        size_t at = i;
        int32_t c = cp_utf8_decode(s, n, &i, 1);
        if (c < 0) { vb_printf(v, "\\x%02x", (unsigned char)s[at]); continue; }   /* (not a str: never given) */
        if (c == q || c == '\\') { vb_putc(v, '\\'); vb_putc(v, (char)c); }
        else if (c == '\n') vb_puts(v, "\\n");
        else if (c == '\r') vb_puts(v, "\\r");
        else if (c == '\t') vb_puts(v, "\\t");
        else if (c != ' ' && !vu_printable((uint32_t)c)) {
            if (c < 0x100) vb_printf(v, "\\x%02x", (unsigned)c);
            else if (c < 0x10000) vb_printf(v, "\\u%04x", (unsigned)c);
            else vb_printf(v, "\\U%08x", (unsigned)c);
        } else vb_put(v, s + at, i - at);
    }
    vb_putc(v, q);
}

void vb_repr_value(vbuf *v, const cp_value *x) {
    char num[40];
    switch (cp_type_of(x)) {
    case CP_NULL: vb_puts(v, "None"); return;
    case CP_BOOL: vb_puts(v, cp_bool_value(x) ? "True" : "False"); return;
    case CP_INT: vb_printf(v, "%lld", (long long)x->u.integer); return;
    case CP_BIGINT: vb_put(v, x->u.string.bytes, x->u.string.len); return;
    case CP_FLOAT: cp_float_repr(x->u.number, num); vb_puts(v, num); return;
    case CP_STRING: vb_repr(v, x->u.string.bytes, x->u.string.len); return;
    case CP_LIST:
        vb_putc(v, '[');
        for (size_t i = 0; i < x->u.list.len; i++) {
            if (i) vb_puts(v, ", ");
            vb_repr_value(v, x->u.list.items[i]);
        }
        vb_putc(v, ']');
        return;
    case CP_OBJECT:
        vb_putc(v, '{');
        for (size_t i = 0; i < x->u.object.len; i++) {
            if (i) vb_puts(v, ", ");
            vb_repr(v, x->u.object.members[i].key, x->u.object.members[i].key_len);
            vb_puts(v, ": ");
            vb_repr_value(v, x->u.object.members[i].value);
        }
        vb_putc(v, '}');
        return;
    }
}

/* ------------------------------------------------------------------------------------------ errors */

static void set_err(cp_error *err, const char *exception, const char *msg, size_t n) {
    if (!err || err->failed) return;
    err->failed = 1;
    snprintf(err->exception, sizeof err->exception, "%s", exception);
    err->truncated = 0;
    if (n >= sizeof err->message) {
        n = sizeof err->message - 1;
        while (n > 0 && ((unsigned char)msg[n] & 0xC0) == 0x80) n--;   /* cut on a character boundary */
        err->truncated = 1;
    }
    memcpy(err->message, msg, n);
    err->message[n] = 0;
}

void *verr(cp_error *err, const char *exception, const char *fmt, ...) {
    if (!err || err->failed) return NULL;
    char msg[CP_ERROR_MESSAGE_SIZE];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (k < 0) k = 0;
    set_err(err, exception, msg, (size_t)k < sizeof msg ? (size_t)k : sizeof msg);
    return NULL;
}

void *verr_buf(cp_error *err, const char *exception, vbuf *msg) {
    if (msg->oom) verr_oom(err);
    else set_err(err, exception, msg->b ? msg->b : "", msg->n);
    vb_free(msg);
    return NULL;
}

void *verr_oom(cp_error *err) { return verr(err, "MemoryError", ""); }

void *verr_key(cp_error *err, const char *key, size_t n) {
    vbuf m = {0};
    vb_put(&m, key, n);
    return verr_buf(err, "KeyError", &m);
}

int cp_values_is_value_error(const char *e) {
    return e && (strcmp(e, "ValueError") == 0 || strcmp(e, "JSONDecodeError") == 0);
}
int cp_values_is_recoverable(const char *e) {
    return cp_values_is_value_error(e) || (e && (strcmp(e, "KeyError") == 0 || strcmp(e, "TypeError") == 0));
}

/* ------------------------------------------------------------------------------------------ Python semantics */

const cp_value vconst_none = {.type = CP_NULL};
const cp_value vconst_true = {.type = CP_BOOL, .u.boolean = 1};
const cp_value vconst_false = {.type = CP_BOOL, .u.boolean = 0};
const cp_value vconst_empty_list = {.type = CP_LIST};
const cp_value vconst_empty_dict = {.type = CP_OBJECT};
const cp_value vconst_newline = {.type = CP_STRING, .u.string = {(char *)"\n", 1}};
const cp_value vconst_colon = {.type = CP_STRING, .u.string = {(char *)":", 1}};
const cp_value vconst_text = {.type = CP_STRING, .u.string = {(char *)"text", 4}};

int vpy_is_str(const cp_value *v) { return cp_type_of(v) == CP_STRING; }
int vpy_is_dict(const cp_value *v) { return cp_type_of(v) == CP_OBJECT; }
int vpy_is_list(const cp_value *v) { return cp_type_of(v) == CP_LIST; }

int vpy_truthy(const cp_value *v) {
    switch (cp_type_of(v)) {
    case CP_NULL: return 0;
    case CP_BOOL: return v->u.boolean != 0;
    case CP_INT: return v->u.integer != 0;
    case CP_BIGINT: return 1;
    case CP_FLOAT: return v->u.number != 0.0;   /* NaN is true */
    case CP_STRING: return v->u.string.len > 0;
    case CP_LIST: return v->u.list.len > 0;
    case CP_OBJECT: return v->u.object.len > 0;
    }
    return 0;
}

const char *vpy_type_name(const cp_value *v) {
    switch (cp_type_of(v)) {
    case CP_NULL: return "NoneType";
    case CP_BOOL: return "bool";
    case CP_INT: case CP_BIGINT: return "int";
    case CP_FLOAT: return "float";
    case CP_STRING: return "str";
    case CP_LIST: return "list";
    case CP_OBJECT: return "dict";
    }
    return "NoneType";
}

void vpy_strip(const char *t, size_t n, size_t *s, size_t *e) {
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        int32_t c = cp_utf8_decode(t, n, &j, 1);
        if (c < 0 || !vu_space((uint32_t)c)) break;
        i = j;
    }
    size_t k = n;
    while (k > i) {
        size_t b = k - 1;   /* the start of the last code point */
        while (b > i && ((unsigned char)t[b] & 0xC0) == 0x80) b--;
        size_t j = b;
        int32_t c = cp_utf8_decode(t, n, &j, 1);
        if (c < 0 || j != k || !vu_space((uint32_t)c)) break;
        k = b;
    }
    *s = i;
    *e = k;
}

size_t vpy_cplen(const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80) k++;
    return k;
}

const cp_value *vpy_get(const cp_value *d, const char *key, const cp_value *dflt, cp_error *err, int *failed) {
    if (!vpy_is_dict(d)) {
        *failed = 1;
        return verr(err, "AttributeError", "'%s' object has no attribute 'get'", vpy_type_name(d));
    }
    const cp_value *v = cp_object_get_cstr(d, key);
    return v ? v : dflt;
}

/* ------------------------------------------------------------------------------------------ int() and float() */

/* CPython's _PyUnicode_TransformDecimalAndSpaceToASCII, then the ASCII whitespace stripped: 0 when a character
 * is neither ASCII, whitespace nor a decimal digit. *out is malloc'd (NUL-terminated). */
static int to_ascii_number(const char *s, size_t n, char **out, size_t *outn) {
    char *b = malloc(n + 1);
    if (!b) return -1;
    size_t k = 0, i = 0;
    while (i < n) {
        int32_t c = cp_utf8_decode(s, n, &i, 1);
        if (c >= 0 && c < 127) b[k++] = (char)c;
        else if (c >= 0 && vu_space((uint32_t)c)) b[k++] = ' ';
        else {
            int d = c < 0 ? -1 : vu_decimal((uint32_t)c);
            if (d < 0) { free(b); return 0; }
            b[k++] = (char)('0' + d);
        }
    }
    size_t a = 0;
    while (a < k && strchr(" \t\n\v\f\r", b[a]) && b[a]) a++;
    while (k > a && strchr(" \t\n\v\f\r", b[k - 1]) && b[k - 1]) k--;
    memmove(b, b + a, k - a);
    b[k - a] = 0;
    *out = b;
    *outn = k - a;
    return 1;
}

/* digits with single underscores between them, from s[*i]; returns the count of digits (0: none). */
static size_t scan_digits(const char *s, size_t n, size_t *i) {
    size_t j = *i, count = 0;
    if (j >= n || s[j] < '0' || s[j] > '9') return 0;
    while (j < n) {
        if (s[j] >= '0' && s[j] <= '9') { j++; count++; continue; }
        if (s[j] == '_' && j + 1 < n && s[j + 1] >= '0' && s[j + 1] <= '9') { j++; continue; }
        break;
    }
    *i = j;
    return count;
}

static void *int_error(cp_error *err, const char *s, size_t n) {
    vbuf r = {0};
    vb_repr(&r, s, n);
    if (r.oom) { vb_free(&r); return verr_oom(err); }
    /* %.200R: the repr cut to 200 code points */
    size_t cut = r.n, cps = 0;
    for (size_t i = 0; i < r.n; i++) {
        if (((unsigned char)r.b[i] & 0xC0) != 0x80) {
            if (cps == 200) { cut = i; break; }
            cps++;
        }
    }
    vbuf m = {0};
    vb_puts(&m, "invalid literal for int() with base 10: ");
    vb_put(&m, r.b, cut);
    vb_free(&r);
    return verr_buf(err, "ValueError", &m);
}

cp_value *vpy_int(const char *s, size_t n, cp_error *err) {
    char *a;
    size_t an;
    int ok = to_ascii_number(s, n, &a, &an);
    if (ok < 0) return verr_oom(err);
    if (!ok) return int_error(err, s, n);
    size_t i = 0;
    int neg = 0;
    if (i < an && (a[i] == '+' || a[i] == '-')) neg = a[i++] == '-';
    size_t start = i;
    size_t digits = scan_digits(a, an, &i);
    if (!digits || i != an) { free(a); return int_error(err, s, n); }
    if (digits > 4300) {
        free(a);
        return verr(err, "ValueError", "Exceeds the limit (4300 digits) for integer string conversion: value has %zu "
                    "digits; use sys.set_int_max_str_digits() to increase the limit", digits);
    }
    char *d = malloc(digits + 2);
    if (!d) { free(a); return verr_oom(err); }
    size_t k = 0;
    if (neg) d[k++] = '-';
    for (size_t j = start; j < an; j++)
        if (a[j] != '_') d[k++] = a[j];
    free(a);
    cp_value *v = cp_int_from_text(d, k);
    free(d);
    return v ? v : verr_oom(err);
}

static int ci_eq(const char *a, size_t n, const char *b) {
    if (strlen(b) != n) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = a[i];
        if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
        if (c != b[i]) return 0;
    }
    return 1;
}

double vstrtod(const char *s) {
    /* strtod reads the C locale's '.' only while LC_NUMERIC is "C"; a program that embeds the library may have set
     * another (setlocale(LC_ALL, "") with a ',' locale): then the '.' is given as that locale's decimal point */
    const struct lconv *lc = localeconv();
    const char *dp = lc && lc->decimal_point && lc->decimal_point[0] ? lc->decimal_point : ".";
    if (strcmp(dp, ".") == 0 || !strchr(s, '.')) return strtod(s, NULL);
    size_t n = strlen(s), dn = strlen(dp);
    char small[128];
    char *b = n + dn < sizeof small ? small : malloc(n + dn + 1);
    if (!b) return strtod(s, NULL);   /* (allocation failure: the plain reading) */
    const char *dot = strchr(s, '.');
    size_t head = (size_t)(dot - s);
    memcpy(b, s, head);
    memcpy(b + head, dp, dn);
    memcpy(b + head + dn, dot + 1, n - head);   /* (with the NUL) */
    double d = strtod(b, NULL);
    if (b != small) free(b);
    return d;
}

int vpy_float(const char *s, size_t n, double *out, cp_error *err) {
    char *a;
    size_t an;
    int ok = to_ascii_number(s, n, &a, &an);
    if (ok < 0) { verr_oom(err); return -1; }
    if (ok) {
        size_t i = 0;
        int neg = 0;
        if (i < an && (a[i] == '+' || a[i] == '-')) neg = a[i++] == '-';
        if (ci_eq(a + i, an - i, "inf") || ci_eq(a + i, an - i, "infinity")) {
            free(a);
            *out = neg ? -INFINITY : INFINITY;
            return 0;
        }
        if (ci_eq(a + i, an - i, "nan")) {
            free(a);
            *out = neg ? -NAN : NAN;
            return 0;
        }
        size_t mant = scan_digits(a, an, &i);
        int good = 1;
        if (i < an && a[i] == '.') {
            i++;
            size_t frac = scan_digits(a, an, &i);
            if (!mant && !frac) good = 0;
        } else if (!mant) good = 0;
        if (good && i < an && (a[i] == 'e' || a[i] == 'E')) {
            i++;
            if (i < an && (a[i] == '+' || a[i] == '-')) i++;
            if (!scan_digits(a, an, &i)) good = 0;
        }
        if (good && i == an) {
            size_t k = 0;
            for (size_t j = 0; j < an; j++)
                if (a[j] != '_') a[k++] = a[j];
            a[k] = 0;
            errno = 0;
            *out = vstrtod(a);   /* correctly rounded, as Python's; overflow gives +-inf as Python's */
            free(a);
            return 0;
        }
        free(a);
    }
    vbuf m = {0};
    vb_puts(&m, "could not convert string to float: ");
    vb_repr(&m, s, n);
    verr_buf(err, "ValueError", &m);
    return -1;
}

cp_value *vpy_int_of_double(double x) {
    if (x > -9.2e18 && x < 9.2e18) return cp_int((int64_t)x);
    /* |x| >= 2^63: x = m * 2^e exactly, m < 2^53; the decimal digits by doubling a decimal number */
    int e;
    double fr = frexp(fabs(x), &e);
    uint64_t m = (uint64_t)ldexp(fr, 53);
    e -= 53;
    /* little-endian base-1e9 limbs */
    size_t cap = (size_t)(e / 29 + 8), len = 1;
    uint32_t *limb = calloc(cap, sizeof *limb);
    if (!limb) return NULL;
    limb[0] = (uint32_t)(m % 1000000000u);
    uint64_t rest = m / 1000000000u;
    while (rest) { limb[len++] = (uint32_t)(rest % 1000000000u); rest /= 1000000000u; }
    for (int k = 0; k < e; k++) {
        uint32_t carry = 0;
        for (size_t j = 0; j < len; j++) {
            uint64_t t = (uint64_t)limb[j] * 2 + carry;
            limb[j] = (uint32_t)(t % 1000000000u);
            carry = (uint32_t)(t / 1000000000u);
        }
        if (carry) {
            if (len == cap) {
                uint32_t *nl = realloc(limb, (cap *= 2) * sizeof *limb);
                if (!nl) { free(limb); return NULL; }
                limb = nl;
            }
            limb[len++] = carry;
        }
    }
    vbuf b = {0};
    if (x < 0) vb_putc(&b, '-');
    vb_printf(&b, "%u", limb[len - 1]);
    for (size_t j = len - 1; j-- > 0;) vb_printf(&b, "%09u", limb[j]);
    free(limb);
    if (b.oom) { vb_free(&b); return NULL; }
    cp_value *v = cp_int_from_text(b.b, b.n);
    vb_free(&b);
    return v;
}
