/* json.c - Python's json.loads / json.dumps on cp_value (value.h).
 *
 * The parser follows CPython 3.11's C scanner (Modules/_json.c) step for step,
 * so that the same text is accepted and the same error (message and offset)
 * is given. Offsets are counted in bytes while scanning and converted to code
 * points for the message. */
#include "value.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "error.h"

/* ===================================================================== */
/* parsing                                                                */

typedef struct {
    const char *s;
    size_t n;
    cp_error *err;
    int depth;
} parser;

/* Python's JSONDecodeError message for a byte offset. */
static void fail_at(parser *p, const char *msg, size_t pos) {
    size_t cp = 0, line = 1, col_base = 0;   /* col_base: code point index after the last '\n' */
    if (pos > p->n) pos = p->n;
    for (size_t i = 0; i < pos; i++) {
        unsigned char c = (unsigned char)p->s[i];
        if ((c & 0xC0) == 0x80) continue;
        cp++;
        if (c == '\n') { line++; col_base = cp; }
    }
    /* Python: colno = pos - doc.rfind('\n', 0, pos), or pos + 1 on line 1 */
    size_t col = line == 1 ? cp + 1 : cp - col_base + 1;
    cp_error_set(p->err, "JSONDecodeError", "%s: line %zu column %zu (char %zu)", msg, line, col, cp);
}

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static size_t skip_ws(const parser *p, size_t i) {
    while (i < p->n && is_ws(p->s[i])) i++;
    return i;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Four hex digits at s[i..i+4) (caller checked bounds): value or -1. */
static int32_t hex4(const char *s, size_t i) {
    int32_t v = 0;
    for (int k = 0; k < 4; k++) {
        int h = hexval(s[i + (size_t)k]);
        if (h < 0) return -1;
        v = (v << 4) | h;
    }
    return v;
}

/* scanstring: s[begin] is the opening quote. On success *end is past the
 * closing quote. */
static cp_value *parse_string(parser *p, size_t begin, size_t *end) {
    cp_buf b = {0};
    size_t i = begin + 1;
    const char *s = p->s;
    size_t n = p->n;
    for (;;) {
        size_t chunk = i;
        char c = 0;
        for (; i < n; i++) {
            c = s[i];
            if (c == '"' || c == '\\') break;
            if ((unsigned char)c <= 0x1f) {
                fail_at(p, "Invalid control character at", i);
                cp_buf_free(&b);
                return NULL;
            }
        }
        if (i >= n) {
            fail_at(p, "Unterminated string starting at", begin);
            cp_buf_free(&b);
            return NULL;
        }
        cp_buf_append(&b, s + chunk, i - chunk);
        i++;   /* past the quote or backslash */
        if (c == '"') break;
        if (i == n) {
            fail_at(p, "Unterminated string starting at", begin);
            cp_buf_free(&b);
            return NULL;
        }
        c = s[i];
        if (c != 'u') {
            char out;
            switch (c) {
            case '"': out = '"'; break;
            case '\\': out = '\\'; break;
            case '/': out = '/'; break;
            case 'b': out = '\b'; break;
            case 'f': out = '\f'; break;
            case 'n': out = '\n'; break;
            case 'r': out = '\r'; break;
            case 't': out = '\t'; break;
            default:
                fail_at(p, "Invalid \\escape", i - 1);
                cp_buf_free(&b);
                return NULL;
            }
            cp_buf_putc(&b, out);
            i++;
            continue;
        }
        /* \uXXXX: CPython wants a character after the four digits */
        i++;                       /* first hex digit */
        if (i + 4 >= n) {
            fail_at(p, "Invalid \\uXXXX escape", i - 1);
            cp_buf_free(&b);
            return NULL;
        }
        int32_t u = hex4(s, i);
        if (u < 0) {
            fail_at(p, "Invalid \\uXXXX escape", i - 1);
            cp_buf_free(&b);
            return NULL;
        }
        i += 4;
        if (u >= 0xD800 && u <= 0xDBFF && i + 6 < n && s[i] == '\\' && s[i + 1] == 'u') {
            int32_t lo = hex4(s, i + 2);
            if (lo < 0) {
                fail_at(p, "Invalid \\uXXXX escape", i + 1);
                cp_buf_free(&b);
                return NULL;
            }
            if (lo >= 0xDC00 && lo <= 0xDFFF) {
                u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
                i += 6;
            }
        }
        char enc[4];
        int k = cp_utf8_encode((uint32_t)u, enc);
        cp_buf_append(&b, enc, (size_t)k);
    }
    *end = i;
    size_t len;
    char *bytes = cp_buf_take(&b, &len);
    if (!bytes) { cp_error_oom(p->err); return NULL; }
    cp_value *v = cp_string_take(bytes, len);
    if (!v) cp_error_oom(p->err);
    return v;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

static cp_value *parse_value(parser *p, size_t i, size_t *end);

/* _match_number_unicode. Returns NULL with *matched 0 when no number starts
 * here (the caller reports "Expecting value"). */
static cp_value *parse_number(parser *p, size_t start, size_t *end, int *matched) {
    const char *s = p->s;
    size_t n = p->n, i = start;
    int is_float = 0;
    *matched = 0;
    if (s[i] == '-') {
        i++;
        if (i >= n) return NULL;
    }
    if (s[i] >= '1' && s[i] <= '9') {
        i++;
        while (i < n && is_digit(s[i])) i++;
    } else if (s[i] == '0') {
        i++;
    } else {
        return NULL;
    }
    if (i + 1 < n && s[i] == '.' && is_digit(s[i + 1])) {
        is_float = 1;
        i += 2;
        while (i < n && is_digit(s[i])) i++;
    }
    if (i + 1 < n && (s[i] == 'e' || s[i] == 'E')) {
        size_t e_start = i;
        i++;
        if (i + 1 < n && (s[i] == '-' || s[i] == '+')) i++;
        while (i < n && is_digit(s[i])) i++;
        if (is_digit(s[i - 1])) is_float = 1;
        else i = e_start;
    }
    *matched = 1;
    *end = i;
    size_t len = i - start;
    if (is_float) {
        char small[64];
        char *txt = len < sizeof small ? small : malloc(len + 1);
        if (!txt) { cp_error_oom(p->err); return NULL; }
        memcpy(txt, s + start, len);
        txt[len] = 0;
        double d = strtod(txt, NULL);
        if (txt != small) free(txt);
        cp_value *v = cp_float(d);
        if (!v) cp_error_oom(p->err);
        return v;
    }
    size_t digits = len - (s[start] == '-');
    if (digits > 4300) {
        cp_error_set(p->err, "ValueError",
                     "Exceeds the limit (4300 digits) for integer string conversion: value has %zu digits; "
                     "use sys.set_int_max_str_digits() to increase the limit", digits);
        return NULL;
    }
    cp_value *v = cp_int_from_text(s + start, len);
    if (!v) cp_error_oom(p->err);
    return v;
}

static int starts(const parser *p, size_t i, const char *lit) {
    size_t k = strlen(lit);
    return p->n - i >= k && memcmp(p->s + i, lit, k) == 0;
}

static cp_value *recursion(parser *p, const char *what) {
    cp_error_set(p->err, "RecursionError",
                 "maximum recursion depth exceeded while decoding a JSON %s from a unicode string", what);
    return NULL;
}

static cp_value *parse_object(parser *p, size_t i, size_t *end) {
    /* s[i-1] == '{' */
    if (p->depth >= CP_JSON_MAX_DEPTH) return recursion(p, "object");
    p->depth++;
    cp_value *obj = cp_object();
    if (!obj) { cp_error_oom(p->err); p->depth--; return NULL; }
    i = skip_ws(p, i);
    if (!(i < p->n && p->s[i] == '}')) {
        for (;;) {
            if (!(i < p->n && p->s[i] == '"')) {
                fail_at(p, "Expecting property name enclosed in double quotes", i);
                goto bail;
            }
            size_t next;
            cp_value *key = parse_string(p, i, &next);
            if (!key) goto bail;
            i = skip_ws(p, next);
            if (!(i < p->n && p->s[i] == ':')) {
                fail_at(p, "Expecting ':' delimiter", i);
                cp_value_free(key);
                goto bail;
            }
            i = skip_ws(p, i + 1);
            cp_value *val = parse_value(p, i, &next);
            if (!val) { cp_value_free(key); goto bail; }
            if (cp_object_set(obj, key->u.string.bytes, key->u.string.len, val) < 0) {
                cp_value_free(key);
                cp_error_oom(p->err);
                goto bail;
            }
            cp_value_free(key);
            i = skip_ws(p, next);
            if (i < p->n && p->s[i] == '}') break;
            if (!(i < p->n && p->s[i] == ',')) {
                fail_at(p, "Expecting ',' delimiter", i);
                goto bail;
            }
            i = skip_ws(p, i + 1);
        }
    }
    *end = i + 1;
    p->depth--;
    return obj;
bail:
    p->depth--;
    cp_value_free(obj);
    return NULL;
}

static cp_value *parse_array(parser *p, size_t i, size_t *end) {
    if (p->depth >= CP_JSON_MAX_DEPTH) return recursion(p, "array");
    p->depth++;
    cp_value *arr = cp_list();
    if (!arr) { cp_error_oom(p->err); p->depth--; return NULL; }
    i = skip_ws(p, i);
    if (!(i < p->n && p->s[i] == ']')) {
        for (;;) {
            size_t next;
            cp_value *val = parse_value(p, i, &next);
            if (!val) goto bail;
            if (cp_list_append(arr, val) < 0) { cp_error_oom(p->err); goto bail; }
            i = skip_ws(p, next);
            if (i < p->n && p->s[i] == ']') break;
            if (!(i < p->n && p->s[i] == ',')) {
                fail_at(p, "Expecting ',' delimiter", i);
                goto bail;
            }
            i = skip_ws(p, i + 1);
        }
    }
    *end = i + 1;
    p->depth--;
    return arr;
bail:
    p->depth--;
    cp_value_free(arr);
    return NULL;
}

/* scan_once_unicode */
static cp_value *parse_value(parser *p, size_t i, size_t *end) {
    if (i >= p->n) { fail_at(p, "Expecting value", i); return NULL; }
    cp_value *v = NULL;
    switch (p->s[i]) {
    case '"': return parse_string(p, i, end);
    case '{': return parse_object(p, i + 1, end);
    case '[': return parse_array(p, i + 1, end);
    case 'n':
        if (starts(p, i, "null")) { *end = i + 4; v = cp_null(); goto made; }
        break;
    case 't':
        if (starts(p, i, "true")) { *end = i + 4; v = cp_bool(1); goto made; }
        break;
    case 'f':
        if (starts(p, i, "false")) { *end = i + 5; v = cp_bool(0); goto made; }
        break;
    case 'N':
        if (starts(p, i, "NaN")) { *end = i + 3; v = cp_float(NAN); goto made; }
        break;
    case 'I':
        if (starts(p, i, "Infinity")) { *end = i + 8; v = cp_float(INFINITY); goto made; }
        break;
    case '-':
        if (starts(p, i, "-Infinity")) { *end = i + 9; v = cp_float(-INFINITY); goto made; }
        break;
    default:
        break;
    }
    {
        int matched;
        v = parse_number(p, i, end, &matched);
        if (!matched) fail_at(p, "Expecting value", i);
        return v;
    }
made:
    if (!v) cp_error_oom(p->err);
    return v;
}

cp_value *cp_json_parse(const char *text, size_t len, cp_error *err) {
    parser p = {text, len, err, 0};
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) {
        fail_at(&p, "Unexpected UTF-8 BOM (decode using utf-8-sig)", 0);
        return NULL;
    }
    size_t i = skip_ws(&p, 0), end = 0;
    cp_value *v = parse_value(&p, i, &end);
    if (!v) return NULL;
    end = skip_ws(&p, end);
    if (end != len) {
        fail_at(&p, "Extra data", end);
        cp_value_free(v);
        return NULL;
    }
    return v;
}

/* ===================================================================== */
/* float repr                                                             */

int cp_float_repr(double d, char out[32]) {
    if (isnan(d)) return snprintf(out, 32, "nan");
    if (isinf(d)) return snprintf(out, 32, d < 0 ? "-inf" : "inf");
    if (d == 0) return snprintf(out, 32, signbit(d) ? "-0.0" : "0.0");
    char tmp[40];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, d);
        if (strtod(tmp, NULL) == d) break;
    }
    /* tmp: [-]D[.DDD]e[+-]XX -> sign, digits, exponent */
    const char *q = tmp;
    int neg = 0;
    if (*q == '-') { neg = 1; q++; }
    char digits[20];
    int nd = 0;
    for (; *q && *q != 'e'; q++)
        if (*q != '.') digits[nd++] = *q;
    int exp10 = atoi(q + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    int decpt = exp10 + 1;   /* value = 0.DIGITS x 10^decpt */
    char *o = out;
    if (neg) *o++ = '-';
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            *o++ = '0';
            *o++ = '.';
            for (int k = 0; k < -decpt; k++) *o++ = '0';
            for (int k = 0; k < nd; k++) *o++ = digits[k];
        } else {
            for (int k = 0; k < decpt; k++) *o++ = k < nd ? digits[k] : '0';
            *o++ = '.';
            if (nd > decpt) for (int k = decpt; k < nd; k++) *o++ = digits[k];
            else *o++ = '0';
        }
        *o = 0;
    } else {
        *o++ = digits[0];
        if (nd > 1) {
            *o++ = '.';
            for (int k = 1; k < nd; k++) *o++ = digits[k];
        }
        int e = decpt - 1;
        o += snprintf(o, 12, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
    }
    return (int)(o - out);
}

/* ===================================================================== */
/* dumping                                                                */

cp_json_dump_options cp_json_dump_defaults(void) {
    cp_json_dump_options o = {1, NULL, NULL, -1, 0};
    return o;
}

cp_json_dump_options cp_json_dump_compact(void) {
    cp_json_dump_options o = {0, ",", ":", -1, 0};
    return o;
}

static void dump_string(cp_buf *b, const char *s, size_t n, int ensure_ascii) {
    static const char hex[] = "0123456789abcdef";
    cp_buf_putc(b, '"');
    size_t i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x80) {
            i++;
            switch (c) {
            case '"': cp_buf_append(b, "\\\"", 2); continue;
            case '\\': cp_buf_append(b, "\\\\", 2); continue;
            case '\n': cp_buf_append(b, "\\n", 2); continue;
            case '\r': cp_buf_append(b, "\\r", 2); continue;
            case '\t': cp_buf_append(b, "\\t", 2); continue;
            case '\b': cp_buf_append(b, "\\b", 2); continue;
            case '\f': cp_buf_append(b, "\\f", 2); continue;
            default: break;
            }
            if (c < 0x20 || (ensure_ascii && c == 0x7F)) {
                char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
                cp_buf_append(b, e, 6);
            } else {
                cp_buf_putc(b, (char)c);
            }
            continue;
        }
        size_t at = i;
        int32_t cp = cp_utf8_decode(s, n, &i, 1);
        if (!ensure_ascii) {
            cp_buf_append(b, s + at, i - at);   /* raw (an ill-formed byte too) */
            continue;
        }
        if (cp < 0) cp = 0xFFFD;   /* not generalized UTF-8: never from a valid value */
        uint32_t u = (uint32_t)cp;
        if (u >= 0x10000) {
            u -= 0x10000;
            uint32_t hi = 0xD800 | (u >> 10), lo = 0xDC00 | (u & 0x3FF);
            char e[12] = {'\\', 'u', hex[hi >> 12], hex[(hi >> 8) & 15], hex[(hi >> 4) & 15], hex[hi & 15],
                          '\\', 'u', hex[lo >> 12], hex[(lo >> 8) & 15], hex[(lo >> 4) & 15], hex[lo & 15]};
            cp_buf_append(b, e, 12);
        } else {
            char e[6] = {'\\', 'u', hex[u >> 12], hex[(u >> 8) & 15], hex[(u >> 4) & 15], hex[u & 15]};
            cp_buf_append(b, e, 6);
        }
    }
    cp_buf_putc(b, '"');
}

typedef struct {
    const cp_json_dump_options *o;
    const char *item_sep, *key_sep;
} dumper;

static void newline_indent(cp_buf *b, const dumper *d, int level) {
    cp_buf_putc(b, '\n');
    for (long k = 0; k < (long)d->o->indent * level; k++) cp_buf_putc(b, ' ');
}

static int member_cmp(const void *x, const void *y) {
    const cp_member *a = *(const cp_member *const *)x, *b = *(const cp_member *const *)y;
    size_t n = a->key_len < b->key_len ? a->key_len : b->key_len;
    int c = memcmp(a->key, b->key, n);
    if (c) return c;
    return a->key_len < b->key_len ? -1 : a->key_len > b->key_len;
}

static void dump_value(cp_buf *b, const cp_value *v, const dumper *d, int level) {
    char num[40];
    switch (v->type) {
    case CP_NULL: cp_buf_append(b, "null", 4); return;
    case CP_BOOL: cp_buf_puts(b, v->u.boolean ? "true" : "false"); return;
    case CP_INT: cp_buf_printf(b, "%lld", (long long)v->u.integer); return;
    case CP_BIGINT: cp_buf_append(b, v->u.string.bytes, v->u.string.len); return;
    case CP_FLOAT:
        if (isnan(v->u.number)) cp_buf_append(b, "NaN", 3);
        else if (isinf(v->u.number)) cp_buf_puts(b, v->u.number < 0 ? "-Infinity" : "Infinity");
        else cp_buf_append(b, num, (size_t)cp_float_repr(v->u.number, num));
        return;
    case CP_STRING: dump_string(b, v->u.string.bytes, v->u.string.len, d->o->ensure_ascii); return;
    case CP_LIST:
        if (v->u.list.len == 0) { cp_buf_append(b, "[]", 2); return; }
        cp_buf_putc(b, '[');
        for (size_t i = 0; i < v->u.list.len; i++) {
            if (i) cp_buf_puts(b, d->item_sep);
            if (d->o->indent >= 0) newline_indent(b, d, level + 1);
            dump_value(b, v->u.list.items[i], d, level + 1);
        }
        if (d->o->indent >= 0) newline_indent(b, d, level);
        cp_buf_putc(b, ']');
        return;
    case CP_OBJECT: {
        size_t n = v->u.object.len;
        if (n == 0) { cp_buf_append(b, "{}", 2); return; }
        const cp_member **order = malloc(n * sizeof *order);
        if (!order) { b->failed = 1; return; }
        for (size_t i = 0; i < n; i++) order[i] = &v->u.object.members[i];
        if (d->o->sort_keys) qsort(order, n, sizeof *order, member_cmp);
        cp_buf_putc(b, '{');
        for (size_t i = 0; i < n; i++) {
            if (i) cp_buf_puts(b, d->item_sep);
            if (d->o->indent >= 0) newline_indent(b, d, level + 1);
            dump_string(b, order[i]->key, order[i]->key_len, d->o->ensure_ascii);
            cp_buf_puts(b, d->key_sep);
            dump_value(b, order[i]->value, d, level + 1);
        }
        free(order);
        if (d->o->indent >= 0) newline_indent(b, d, level);
        cp_buf_putc(b, '}');
        return;
    }
    }
}

char *cp_json_dump(const cp_value *v, const cp_json_dump_options *opts, size_t *out_len) {
    cp_json_dump_options def = cp_json_dump_defaults();
    if (!opts) opts = &def;
    dumper d = {opts, opts->item_separator, opts->key_separator};
    if (!d.item_sep) d.item_sep = opts->indent >= 0 ? "," : ", ";
    if (!d.key_sep) d.key_sep = ": ";
    cp_buf b = {0};
    cp_value null_value = {0};
    dump_value(&b, v ? v : &null_value, &d, 0);
    return cp_buf_take(&b, out_len);
}

char *cp_json_quote(const char *s, size_t n, int ensure_ascii, size_t *out_len) {
    cp_buf b = {0};
    dump_string(&b, s, n, ensure_ascii);
    return cp_buf_take(&b, out_len);
}
