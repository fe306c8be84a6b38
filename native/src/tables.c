/* tables.c - the `.cpt` loader: FORMAT.md section 1, "What a reader must
 * check", steps 1-8 (and 8.4), in that order, with the messages of
 * chatparse/runtime/tables/loader.py and of loadTables in js/chatparse.mjs.
 *
 * Checks fail by longjmp to cp_tables_load, which frees everything built so
 * far; temporaries are registered in the context so nothing leaks. */
#include "tables.h"

#include <pcre2.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "error.h"
#include "pyrepr.h"
#include "sha256.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "libchatparse reads the table arrays natively: little-endian hosts only"
#endif

static const uint8_t MAGIC[8] = {0x89, 0x43, 0x50, 0x54, 0x0D, 0x0A, 0x1A, 0x0A};
#define MAX_DEPTH 100
#define MAX_INT 2147483647LL
#define MAX_DELIM_CHARS 256

typedef unsigned __int128 u128;

/* ------------------------------------------------------------------------ */
/* context: failure and temporaries                                          */

enum { TMP_FREE, TMP_VALUE, TMP_CODE };
typedef struct { void *p; int kind; } tmp_entry;

typedef struct ctx {
    jmp_buf jb;
    cp_error *err;
    cp_tables *t;
    const uint8_t *bytes;
    size_t n;
    tmp_entry *tmp;
    size_t ntmp, captmp;
    cp_value *array_index;      /* name -> index into t->arrays */
    pcre2_code *placeholder, *whole_placeholder;   /* compiled when first needed */
    const uint8_t *meta_bytes;   /* the metadata section (its js.word serves the placeholder rule) */
    size_t meta_len;
} ctx;

static void free_tmp(ctx *c) {
    for (size_t i = 0; i < c->ntmp; i++) {
        if (c->tmp[i].kind == TMP_FREE) free(c->tmp[i].p);
        else if (c->tmp[i].kind == TMP_VALUE) cp_value_free(c->tmp[i].p);
        else pcre2_code_free(c->tmp[i].p);
    }
    free(c->tmp);
    c->tmp = NULL;
    c->ntmp = c->captmp = 0;
}

static void oom(ctx *c) {
    cp_error_oom(c->err);
    longjmp(c->jb, 1);
}

static void *keep(ctx *c, void *p, int kind) {
    if (!p) oom(c);
    if (c->ntmp == c->captmp) {
        size_t cap = c->captmp ? c->captmp * 2 : 32;
        tmp_entry *t = realloc(c->tmp, cap * sizeof *t);
        if (!t) {
            if (kind == TMP_FREE) free(p);
            else if (kind == TMP_VALUE) cp_value_free(p);
            else pcre2_code_free(p);
            oom(c);
        }
        c->tmp = t;
        c->captmp = cap;
    }
    c->tmp[c->ntmp].p = p;
    c->tmp[c->ntmp].kind = kind;
    c->ntmp++;
    return p;
}

static void *tmalloc(ctx *c, size_t n) { return keep(c, malloc(n ? n : 1), TMP_FREE); }
static void *tcalloc(ctx *c, size_t n, size_t k) { return keep(c, calloc(n ? n : 1, k ? k : 1), TMP_FREE); }

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3), noreturn))
#endif
static void fail(ctx *c, const char *fmt, ...) {
    cp_buf b = {0};
    cp_buf_puts(&b, "chatparse table file: ");
    va_list ap;
    va_start(ap, fmt);
    cp_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    if (b.failed) { cp_buf_free(&b); oom(c); }
    cp_error_set_text(c->err, "ValueError", b.data, b.len);
    cp_buf_free(&b);
    longjmp(c->jb, 1);
}

/* quote(s): json.dumps(s), ASCII with escapes (a temporary) */
static const char *quote_bytes(ctx *c, const char *s, size_t n) {
    return keep(c, cp_json_quote(s, n, 1, NULL), TMP_FREE);
}
static const char *quote(ctx *c, const cp_value *s) {
    size_t n;
    const char *b = cp_string_bytes(s, &n);
    return quote_bytes(c, b ? b : "", n);
}
static const char *quote_cstr(ctx *c, const char *s) { return quote_bytes(c, s, strlen(s)); }

typedef struct { const char *s; size_t n; } str_ref;

static int str_cmp(const str_ref *a, const str_ref *b) {
    size_t n = a->n < b->n ? a->n : b->n;
    int r = memcmp(a->s, b->s, n);
    if (r) return r;
    return a->n < b->n ? -1 : a->n > b->n;
}
static int str_ref_cmp(const void *x, const void *y) { return str_cmp(x, y); }

/* "[" + ", ".join(quote(s)) + "]" */
static const char *quote_list(ctx *c, const str_ref *items, size_t k) {
    cp_buf b = {0};
    cp_buf_putc(&b, '[');
    for (size_t i = 0; i < k; i++) {
        if (i) cp_buf_puts(&b, ", ");
        char *q = cp_json_quote(items[i].s, items[i].n, 1, NULL);
        if (!q) b.failed = 1;
        else cp_buf_puts(&b, q);
        free(q);
    }
    cp_buf_putc(&b, ']');
    return keep(c, cp_buf_take(&b, NULL), TMP_FREE);
}
static const char *quote_list_cstr(ctx *c, const char *const *items, size_t k) {
    str_ref *r = tmalloc(c, k * sizeof *r);
    for (size_t i = 0; i < k; i++) { r[i].s = items[i]; r[i].n = strlen(items[i]); }
    return quote_list(c, r, k);
}

/* ------------------------------------------------------------------------ */
/* typed access with Python's `type(v) is ...` semantics                     */

static cp_value *get(const cp_value *o, const char *k) { return cp_object_get_cstr(o, k); }
static int has(const cp_value *o, const char *k) { return cp_object_get_cstr(o, k) != NULL; }
static int is_obj(const cp_value *v) { return cp_type_of(v) == CP_OBJECT && v; }
static int is_list(const cp_value *v) { return v && v->type == CP_LIST; }
static int is_str(const cp_value *v) { return v && v->type == CP_STRING; }
static int is_bool(const cp_value *v) { return v && v->type == CP_BOOL; }
static int is_null(const cp_value *v) { return v && v->type == CP_NULL; }
static int is_true(const cp_value *v) { return v && v->type == CP_BOOL && v->u.boolean; }
static int is_int_in(const cp_value *v, int64_t lo, int64_t hi) {
    return v && v->type == CP_INT && v->u.integer >= lo && v->u.integer <= hi;
}
static int str_is(const cp_value *v, const char *s) { return cp_string_equals(v, s); }

static int64_t int_in(ctx *c, const cp_value *v, const char *where, int64_t lo, int64_t hi) {
    if (!is_int_in(v, lo, hi)) fail(c, "%s: expected an integer in %lld..%lld", where, (long long)lo, (long long)hi);
    return v->u.integer;
}
static int bool_of(ctx *c, const cp_value *v, const char *where) {
    if (!is_bool(v)) fail(c, "%s: expected true/false", where);
    return v->u.boolean;
}
static void str_of(ctx *c, const cp_value *v, const char *where) {
    if (!is_str(v)) fail(c, "%s: expected a string", where);
}
static void list_of(ctx *c, const cp_value *v, const char *where) {
    if (!is_list(v)) fail(c, "%s: expected a list", where);
}

static const char *fmt(ctx *c, const char *f, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static const char *fmt(ctx *c, const char *f, ...) {
    cp_buf b = {0};
    va_list ap;
    va_start(ap, f);
    cp_buf_vprintf(&b, f, ap);
    va_end(ap);
    return keep(c, cp_buf_take(&b, NULL), TMP_FREE);
}

static int in_list(const char *k, size_t kn, const char *const *names, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (strlen(names[i]) == kn && memcmp(names[i], k, kn) == 0) return 1;
    return 0;
}

/* _keys / checkKeys: missing keys (sorted), then unexpected keys (sorted). */
static void check_keys(ctx *c, const cp_value *o, const char *const *req, size_t nreq, const char *const *opt,
                       size_t nopt, const char *where) {
    str_ref *miss = tmalloc(c, (nreq + 1) * sizeof *miss);
    size_t nm = 0;
    for (size_t i = 0; i < nreq; i++)
        if (!has(o, req[i])) { miss[nm].s = req[i]; miss[nm].n = strlen(req[i]); nm++; }
    if (nm) {
        qsort(miss, nm, sizeof *miss, str_ref_cmp);
        fail(c, "%s: missing keys %s", where, quote_list(c, miss, nm));
    }
    size_t len = cp_object_len(o);
    str_ref *extra = tmalloc(c, (len + 1) * sizeof *extra);
    size_t ne = 0;
    for (size_t i = 0; i < len; i++) {
        const cp_member *m = cp_object_at(o, i);
        if (!in_list(m->key, m->key_len, req, nreq) && !in_list(m->key, m->key_len, opt, nopt)) {
            extra[ne].s = m->key;
            extra[ne].n = m->key_len;
            ne++;
        }
    }
    if (ne) {
        qsort(extra, ne, sizeof *extra, str_ref_cmp);
        fail(c, "%s: unexpected keys %s", where, quote_list(c, extra, ne));
    }
}
#define NKEYS(a) (sizeof(a) / sizeof((a)[0]))

/* ------------------------------------------------------------------------ */
/* UTF-8 as Python's strict decoder reports it                               */

/* The first ill-formed sequence: offset (or -1) and reason. */
static long long utf8_error(const uint8_t *b, size_t n, const char **reason) {
    size_t i = 0;
    while (i < n) {
        uint8_t x = b[i];
        if (x < 0x80) { i++; continue; }
        int need;
        uint8_t lo = 0x80, hi = 0xBF;
        if (x >= 0xC2 && x <= 0xDF) need = 1;
        else if (x == 0xE0) { need = 2; lo = 0xA0; }
        else if ((x >= 0xE1 && x <= 0xEC) || x == 0xEE || x == 0xEF) need = 2;
        else if (x == 0xED) { need = 2; hi = 0x9F; }
        else if (x == 0xF0) { need = 3; lo = 0x90; }
        else if (x >= 0xF1 && x <= 0xF3) need = 3;
        else if (x == 0xF4) { need = 3; hi = 0x8F; }
        else { *reason = "invalid start byte"; return (long long)i; }
        for (int k = 1; k <= need; k++) {
            if (i + (size_t)k >= n) { *reason = "unexpected end of data"; return (long long)i; }
            uint8_t y = b[i + (size_t)k];
            if (k == 1 ? (y < lo || y > hi) : (y < 0x80 || y > 0xBF)) {
                *reason = "invalid continuation byte";
                return (long long)i;
            }
        }
        i += (size_t)need + 1;
    }
    return -1;
}

/* check_depth: brackets counted outside strings, before parsing */
static void check_depth(ctx *c, const uint8_t *s, size_t n, const char *what) {
    int depth = 0, in_str = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t ch = s[i];
        if (in_str) {
            if (ch == '\\') {
                /* skip the next character (a whole code point) */
                i++;
                while (i + 1 < n && (s[i + 1] & 0xC0) == 0x80) i++;
            } else if (ch == '"') in_str = 0;
        } else if (ch == '"') in_str = 1;
        else if (ch == '[' || ch == '{') {
            if (++depth > MAX_DEPTH) fail(c, "%s section nests deeper than %d levels", what, MAX_DEPTH);
        } else if (ch == ']' || ch == '}') depth--;
    }
}

static int has_surrogate(const char *s, size_t n) {
    for (size_t i = 0; i + 1 < n; i++)
        if ((uint8_t)s[i] == 0xED && (uint8_t)s[i + 1] >= 0xA0) return 1;
    return 0;
}

static int has_lone_surrogate(const cp_value *v) {
    switch (cp_type_of(v)) {
    case CP_STRING: return has_surrogate(v->u.string.bytes, v->u.string.len);
    case CP_LIST:
        for (size_t i = 0; i < v->u.list.len; i++)
            if (has_lone_surrogate(v->u.list.items[i])) return 1;
        return 0;
    case CP_OBJECT:
        for (size_t i = 0; i < v->u.object.len; i++) {
            const cp_member *m = &v->u.object.members[i];
            if (has_surrogate(m->key, m->key_len) || has_lone_surrogate(m->value)) return 1;
        }
        return 0;
    default: return 0;
    }
}

/* _json / sectionJson: strict UTF-8, bounded nesting, Python's JSON, no lone
 * surrogate. The value is owned by the caller. */
static cp_value *section_json(ctx *c, const uint8_t *b, size_t n, const char *what) {
    const char *reason;
    long long bad = utf8_error(b, n, &reason);
    if (bad >= 0) fail(c, "%s section is not UTF-8 (invalid byte at offset %lld)", what, bad);
    check_depth(c, b, n, what);
    cp_error jerr = {0};
    cp_value *v = cp_json_parse((const char *)b, n, &jerr);
    if (!v) {
        if (strcmp(jerr.exception, "JSONDecodeError") == 0)
            fail(c, "%s section is not valid JSON (%s)", what, jerr.message);
        if (strcmp(jerr.exception, "ValueError") == 0)
            fail(c, "%s section is not valid JSON (an integer has more than 4300 digits)", what);
        if (strcmp(jerr.exception, "MemoryError") == 0) oom(c);
        fail(c, "JSON nests too deeply");
    }
    keep(c, v, TMP_VALUE);
    if (has_lone_surrogate(v))
        fail(c, "%s section: a string holds a lone surrogate (an unpaired \\ud800-\\udfff escape)", what);
    return v;
}

/* Detach a value kept as a temporary (ownership passes to the tables). */
static cp_value *unkeep(ctx *c, cp_value *v) {
    for (size_t i = c->ntmp; i-- > 0;)
        if (c->tmp[i].p == v) { c->tmp[i].p = NULL; c->tmp[i].kind = TMP_FREE; return v; }
    return v;
}

/* ------------------------------------------------------------------------ */
/* the js.word class and the placeholder rule                                */

static const char CLASS_ESCAPES[] = "\\][-^";

/* decode the word into code points (temporary array) */
static uint32_t *code_points(ctx *c, const char *s, size_t n, size_t *count) {
    uint32_t *cps = tmalloc(c, (n + 1) * sizeof *cps);
    size_t k = 0, i = 0;
    while (i < n) {
        int32_t cp = cp_utf8_decode(s, n, &i, 1);
        cps[k++] = cp < 0 ? 0xFFFD : (uint32_t)cp;
    }
    *count = k;
    return cps;
}

static int hexdigit(uint32_t ch) {
    return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F');
}

/* class atom at cps[i] ending before end: code point or -1, *next */
static long class_atom(const uint32_t *cps, size_t i, size_t end, size_t *next) {
    *next = i;
    if (i >= end) return -1;
    uint32_t ch = cps[i];
    if (ch == '\\') {
        if (i + 1 < end && cps[i + 1] < 128 && cps[i + 1] && strchr(CLASS_ESCAPES, (int)cps[i + 1])) {
            *next = i + 2;
            return (long)cps[i + 1];
        }
        size_t j = i + 1;
        if (j + 1 >= end || cps[j] != 'u' || cps[j + 1] != '{') return -1;
        j += 2;
        size_t h0 = j;
        unsigned long v = 0;
        while (j < end && j - h0 <= 6 && hexdigit(cps[j])) {
            uint32_t d = cps[j];
            v = v * 16 + (d <= '9' ? d - '0' : (d | 0x20) - 'a' + 10);
            j++;
        }
        size_t hl = j - h0;
        if (j >= end || cps[j] != '}' || hl < 1 || hl > 6 || v > 0x10FFFF) return -1;
        *next = j + 1;
        return (long)v;
    }
    if ((ch < 128 && ch && strchr(CLASS_ESCAPES, (int)ch)) || (ch >= 0xD800 && ch <= 0xDFFF)) return -1;
    *next = i + 1;
    return (long)ch;
}

/* Whether `word` is a class of FORMAT.md section 7's form. */
static int word_ok(ctx *c, const char *s, size_t sn) {
    size_t n;
    uint32_t *cps = code_points(c, s, sn, &n);
    int ok = n >= 2 && cps[0] == '[' && cps[n - 1] == ']';
    size_t i = 1;
    if (ok && cps[i] == '^' && n > 2) i++;
    long prev = -1;
    while (ok && i < n - 1) {
        size_t next;
        if (cps[i] == '-' && prev >= 0) {
            long cp = class_atom(cps, i + 1, n - 1, &next);
            ok = cp >= prev;
            prev = -1;
        } else {
            long cp = class_atom(cps, i, n - 1, &next);
            ok = cp >= 0;
            prev = cp;
        }
        i = next;
    }
    return ok;
}

static void check_word(ctx *c, const cp_value *w) {
    if (!word_ok(c, w->u.string.bytes, w->u.string.len)) {
        cp_buf b = {0};
        cp_py_repr_str(&b, w->u.string.bytes, w->u.string.len, 60);
        const char *r = keep(c, cp_buf_take(&b, NULL), TMP_FREE);
        fail(c, "js.word: %s is not a character class of the form FORMAT.md section 7 describes", r);
    }
}

/* The word class as a PCRE2 class: \u{H} -> \x{H}. */
static const char *pcre_class(ctx *c, const char *s, size_t n) {
    cp_buf b = {0};
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\\' && i + 2 < n && s[i + 1] == 'u' && s[i + 2] == '{') {
            cp_buf_puts(&b, "\\x{");
            i += 2;
        } else if (s[i] == '\\' && i + 1 < n) {
            cp_buf_putc(&b, s[i]);
            cp_buf_putc(&b, s[++i]);
        } else cp_buf_putc(&b, s[i]);
    }
    return keep(c, cp_buf_take(&b, NULL), TMP_FREE);
}

static pcre2_code *compile(ctx *c, const char *pat) {
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &ec, &eo, NULL);
    if (re) keep(c, re, TMP_CODE);
    return re;
}

/* Build the placeholder patterns from js.word when the metadata holds a
 * well-formed one (wordOf in js/chatparse.mjs), else Python's \w. */
static void placeholder_patterns(ctx *c, const uint8_t *meta, size_t mlen) {
    const char *word = NULL;
    const char *reason;
    if (utf8_error(meta, mlen, &reason) < 0) {
        cp_error e = {0};
        cp_value *m = cp_json_parse((const char *)meta, mlen, &e);
        if (m) {
            keep(c, m, TMP_VALUE);
            const cp_value *js = get(m, "js");
            const cp_value *w = is_obj(js) ? get(js, "word") : NULL;
            if (is_str(w) && !has_surrogate(w->u.string.bytes, w->u.string.len) &&
                word_ok(c, w->u.string.bytes, w->u.string.len))
                word = pcre_class(c, w->u.string.bytes, w->u.string.len);
        }
    }
    static const char *fallbacks[] = {"[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}]",
                                      "[\\p{L}\\p{Nl}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}]"};
    for (int attempt = 0; attempt < 3; attempt++) {
        const char *w = attempt == 0 ? word : fallbacks[attempt - 1];
        if (!w) continue;
        c->placeholder = compile(c, fmt(c, "\\{%s+(?:\\.%s+)*\\}", w, w));
        c->whole_placeholder = compile(c, fmt(c, "\\A\\{%s+(?:\\.%s+)*\\}\\z", w, w));
        if (c->placeholder && c->whole_placeholder) return;
    }
    oom(c);   /* not reached with PCRE2 >= 10.40 */
}

static int re_search(ctx *c, pcre2_code *re, const cp_value *s) {
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    if (!md) oom(c);
    int rc = pcre2_match(re, (PCRE2_SPTR)s->u.string.bytes, s->u.string.len, 0, 0, md, NULL);
    pcre2_match_data_free(md);
    return rc >= 0;
}

static int mixed_placeholder(ctx *c, const cp_value *v) {
    switch (cp_type_of(v)) {
    case CP_LIST:
        for (size_t i = 0; i < v->u.list.len; i++)
            if (mixed_placeholder(c, v->u.list.items[i])) return 1;
        return 0;
    case CP_OBJECT:
        for (size_t i = 0; i < v->u.object.len; i++)
            if (mixed_placeholder(c, v->u.object.members[i].value)) return 1;
        return 0;
    case CP_STRING:
        /* a placeholder starts with '{': most strings need no regex (and the patterns are compiled on the
         * first string that does) */
        if (!memchr(v->u.string.bytes, '{', v->u.string.len)) return 0;
        if (!c->placeholder) placeholder_patterns(c, c->meta_bytes, c->meta_len);
        return re_search(c, c->placeholder, v) && !re_search(c, c->whole_placeholder, v);
    default: return 0;
    }
}

/* ------------------------------------------------------------------------ */
/* step 6: the template rules                                               */

static const char *const PARSER_NAMES[] = {"text", "int", "float", "bool", "json", "xml-inline", "kv-lines"};
static const char *const NORMALIZED_KEYS[] = {"version", "defaults", "start_anchor", "implicit", "fields"};
static const char *const EXT_NORMALIZED_KEYS[] = {"extensions", "version", "defaults", "start_anchor", "implicit",
                                                  "fields"};
static const char *const FIELD_KEYS[] = {"name", "open", "close", "content", "content_args", "repeats", "join",
                                         "optional", "transform", "transform_each"};

/* The format extensions this runtime implements (FORMAT.md section 2,
 * "Extensions"), in the order of Python's registry (runtime/values/extensions.py
 * EXTENSIONS, the order their keys are checked in): name, its field key (or
 * NULL), its content parser (or NULL). */
typedef struct { const char *name, *key, *content; } extension;
static const extension EXTENSIONS[] = {
    {"python_calls", NULL, "python-calls"},
    {"argument_types", "argument_types", NULL},
    {"key_aliases", "key_aliases", NULL},
    {"as_list", "as_list", NULL},
    {"decode_json_strings", "decode_json_strings", NULL},
    {"close_json_end", "close_json_end", NULL},
    {"on_error", "on_error", NULL},
    {"optional_placeholders", "optional_placeholders", NULL},
    {"content_fallback", "content_fallback", NULL},
    {"unwrap_pattern", "unwrap_pattern", NULL},
    {"json_values", NULL, "json-values"},
    {"flatten", "flatten", NULL},
    {"escaped_json_values", "escaped_json_values", NULL},
};
#define N_EXTENSIONS NKEYS(EXTENSIONS)

static const extension *ext_by_name(const cp_value *s) {
    for (size_t i = 0; i < N_EXTENSIONS; i++)
        if (str_is(s, EXTENSIONS[i].name)) return &EXTENSIONS[i];
    return NULL;
}
static const extension *ext_by_key(const char *k, size_t kn) {
    for (size_t i = 0; i < N_EXTENSIONS; i++)
        if (EXTENSIONS[i].key && strlen(EXTENSIONS[i].key) == kn && memcmp(EXTENSIONS[i].key, k, kn) == 0)
            return &EXTENSIONS[i];
    return NULL;
}
static const extension *ext_by_content(const cp_value *s) {
    for (size_t i = 0; i < N_EXTENSIONS; i++)
        if (EXTENSIONS[i].content && str_is(s, EXTENSIONS[i].content)) return &EXTENSIONS[i];
    return NULL;
}
static int is_parser_name(const cp_value *s) {
    for (size_t i = 0; i < NKEYS(PARSER_NAMES); i++)
        if (str_is(s, PARSER_NAMES[i])) return 1;
    return 0;
}

/* Same keys as a list of names (an object with exactly those keys). */
static int same_keys(const cp_value *o, const char *const *keys, size_t n) {
    if (!is_obj(o) || cp_object_len(o) != n) return 0;
    for (size_t i = 0; i < n; i++)
        if (!has(o, keys[i])) return 0;
    return 1;
}

/* whether a list of strings has a repeat (temporary sort) */
static int strings_repeat(ctx *c, const cp_value *list) {
    size_t n = cp_list_len(list);
    if (n < 2) return 0;
    str_ref *r = tmalloc(c, n * sizeof *r);
    for (size_t i = 0; i < n; i++) r[i].s = cp_string_bytes(cp_list_get(list, i), &r[i].n);
    qsort(r, n, sizeof *r, str_ref_cmp);
    for (size_t i = 1; i < n; i++)
        if (str_cmp(&r[i - 1], &r[i]) == 0) return 1;
    return 0;
}

static int all_strings(const cp_value *list) {
    for (size_t i = 0; i < cp_list_len(list); i++)
        if (!is_str(cp_list_get(list, i))) return 0;
    return 1;
}

static void check_delimiter(ctx *c, const cp_value *d, const char *where, int allow_none) {
    if (is_null(d) && allow_none) return;
    const cp_value *lits = get(d, "literals"), *pat = get(d, "pattern");
    if (!is_obj(d) || cp_object_len(d) != 1 || !(is_list(lits) || is_str(pat)))
        fail(c, "%s: expected %s{\"literals\": [...]} or {\"pattern\": str}", where, allow_none ? "null, " : "");
    if (lits) {
        int bad = cp_list_len(lits) == 0;
        for (size_t i = 0; !bad && i < cp_list_len(lits); i++) {
            const cp_value *s = cp_list_get(lits, i);
            if (!is_str(s) || s->u.string.len == 0) bad = 1;
        }
        if (bad) fail(c, "%s.literals: expected non-empty strings", where);
        if (strings_repeat(c, lits)) fail(c, "%s.literals: a literal is repeated", where);
    }
}

static const char *repr_of(ctx *c, const cp_value *v, long max_chars) {
    cp_buf b = {0};
    cp_py_repr_value(&b, v, max_chars);
    return keep(c, cp_buf_take(&b, NULL), TMP_FREE);
}

static const char *repr_bytes(ctx *c, const char *s, size_t n, long max_chars) {
    cp_buf b = {0};
    cp_py_repr_str(&b, s, n, max_chars);
    return keep(c, cp_buf_take(&b, NULL), TMP_FREE);
}

/* One extension key's check (Extension.check of runtime/values/extensions.py):
 * fails with "template: {scope}: {key!r} {what} (format extension '{name}')";
 * returns 1 when the value is the key's default (OMIT: load_template would
 * leave the key out, so the normalized form differs). */
#define EXT_FAIL(...) fail(c, "template: %s: '%s' %s (format extension '%s')", scope, x->key, fmt(c, __VA_ARGS__), x->name)
static int ext_check(ctx *c, const char *scope, const extension *x, const cp_value *v) {
    const char *k = x->key;
    if (!strcmp(k, "argument_types")) {
        if (str_is(v, "json")) return 1;
        if (!str_is(v, "schema")) EXT_FAIL("must be \"schema\" or \"json\" (the default), got %s", repr_of(c, v, 60));
        return 0;
    }
    if (!strcmp(k, "key_aliases")) {
        if (!is_obj(v)) EXT_FAIL("must be a dict of alias -> canonical key, got %s", cp_py_type_name(v));
        if (cp_object_len(v) == 0) return 1;
        for (size_t i = 0; i < cp_object_len(v); i++) {
            const cp_member *m = cp_object_at(v, i);
            const char *alias = repr_bytes(c, m->key, m->key_len, 40);
            if (!is_str(m->value))
                EXT_FAIL("maps %s to a %s; the canonical key must be a string", alias, cp_py_type_name(m->value));
            if (m->value->u.string.len == m->key_len && !memcmp(m->value->u.string.bytes, m->key, m->key_len))
                EXT_FAIL("maps %s to itself", alias);
            if (cp_object_get(v, m->value->u.string.bytes, m->value->u.string.len))
                EXT_FAIL("maps %s to %s, which is itself an alias (no chains)", alias, repr_of(c, m->value, 40));
        }
        return 0;
    }
    if (!strcmp(k, "as_list") || !strcmp(k, "close_json_end") || !strcmp(k, "flatten") ||
        !strcmp(k, "escaped_json_values")) {
        if (!is_bool(v)) EXT_FAIL("must be a bool, got %s", cp_py_type_name(v));
        return !v->u.boolean;
    }
    if (!strcmp(k, "decode_json_strings")) {
        if (!is_list(v) || !all_strings(v)) EXT_FAIL("must be a list of dotted key paths (strings)");
        if (cp_list_len(v) == 0) return 1;
        for (size_t i = 0; i < cp_list_len(v); i++) {
            size_t n;
            const char *p = cp_string_bytes(cp_list_get(v, i), &n);
            int bad = n == 0 || p[0] == '.' || p[n - 1] == '.';
            for (size_t j = 0; !bad && j + 1 < n; j++) bad = p[j] == '.' && p[j + 1] == '.';
            if (bad)
                EXT_FAIL("holds %s, which is not a dotted key path (non-empty keys joined by '.')",
                         repr_of(c, cp_list_get(v, i), 60));
        }
        if (strings_repeat(c, v)) EXT_FAIL("lists a path twice");
        return 0;
    }
    if (!strcmp(k, "on_error")) {
        if (str_is(v, "raise")) return 1;
        if (!str_is(v, "content") && !str_is(v, "drop"))
            EXT_FAIL("must be \"content\", \"drop\" or \"raise\" (the default), got %s", repr_of(c, v, 60));
        return 0;
    }
    if (!strcmp(k, "optional_placeholders")) {
        if (!is_list(v) || !all_strings(v))
            EXT_FAIL("must be a list of named groups of the field's open_pattern (strings)");
        if (cp_list_len(v) == 0) return 1;
        if (strings_repeat(c, v)) EXT_FAIL("lists a name twice");
        return 0;
    }
    if (!strcmp(k, "content_fallback")) {
        if (!is_list(v))
            EXT_FAIL("must be a list of {\"content\": parser, \"content_args\": ..}, got %s", cp_py_type_name(v));
        if (cp_list_len(v) == 0) return 1;
        int omit = 0;
        for (size_t i = 0; i < cp_list_len(v); i++) {
            const cp_value *e = cp_list_get(v, i);
            int ok = is_obj(e) && has(e, "content");
            for (size_t j = 0; ok && j < cp_object_len(e); j++) {
                const cp_member *m = cp_object_at(e, j);
                ok = (m->key_len == 7 && !memcmp(m->key, "content", 7)) ||
                     (m->key_len == 12 && !memcmp(m->key, "content_args", 12));
            }
            if (!ok) EXT_FAIL("entry %zu must be a dict with 'content' and optional 'content_args' only", i);
            if (!is_str(get(e, "content"))) EXT_FAIL("entry %zu: 'content' must be a content parser name", i);
            if (!has(e, "content_args")) omit = 1;   /* normalized with "content_args": {} added */
        }
        return omit;
    }
    if (!strcmp(k, "unwrap_pattern")) {
        if (!is_str(v) || v->u.string.len == 0) EXT_FAIL("must be a non-empty regex string, got %s", repr_of(c, v, 60));
        return 0;
    }
    return 0;
}
#undef EXT_FAIL

static void template_rules(ctx *c, const cp_value *spec) {
    int extended = is_obj(spec) && has(spec, "extensions");
    const cp_value *names = extended ? get(spec, "extensions") : NULL;
    if (extended) {
        const cp_value *version = get(spec, "version");
        if (!is_list(names) || cp_list_len(names) == 0 || !(version && version->type == CP_INT) ||
            version->u.integer != 2)
            fail(c, "template: 'extensions' must be a non-empty list, with 'version': 2");
        for (size_t i = 0; i < cp_list_len(names); i++) {
            const cp_value *nm = cp_list_get(names, i);
            if (!is_str(nm)) fail(c, "template: 'extensions' must hold extension names (strings)");
            if (!ext_by_name(nm)) {
                int plain = 1;
                for (size_t k = 0; k < nm->u.string.len; k++) {
                    unsigned char ch = (unsigned char)nm->u.string.bytes[k];
                    if (ch < 0x20 || ch > 0x7E || ch == '\'') plain = 0;
                }
                if (plain) fail(c, "table uses format extension '%s', which this reader does not support",
                                nm->u.string.bytes);
                fail(c, "table uses format extension %s, which this reader does not support", quote(c, nm));
            }
        }
        for (size_t i = 1; i < cp_list_len(names); i++) {
            str_ref a, b;
            a.s = cp_string_bytes(cp_list_get(names, i - 1), &a.n);
            b.s = cp_string_bytes(cp_list_get(names, i), &b.n);
            if (str_cmp(&a, &b) >= 0) fail(c, "template: not in normalized form: 'extensions' must be sorted and distinct");
        }
    }
    const char *const *keys = extended ? EXT_NORMALIZED_KEYS : NORMALIZED_KEYS;
    size_t nkeys = extended ? NKEYS(EXT_NORMALIZED_KEYS) : NKEYS(NORMALIZED_KEYS);
    if (!same_keys(spec, keys, nkeys))
        fail(c, "template: expected an object with keys %s", quote_list_cstr(c, keys, nkeys));
    if (!extended && !is_int_in(get(spec, "version"), 1, 1)) fail(c, "template: version must be 1 (2 with 'extensions')");
    if (!is_obj(get(spec, "defaults"))) fail(c, "template.defaults: expected an object");
    const cp_value *fields = get(spec, "fields");
    if (!is_list(fields) || cp_list_len(fields) == 0) fail(c, "template: fields must be a non-empty list");
    size_t nf = cp_list_len(fields);
    cp_value *seen = keep(c, cp_object(), TMP_VALUE);
    int used[N_EXTENSIONS] = {0};
    for (size_t i = 0; i < nf; i++) {
        const cp_value *f = cp_list_get(fields, i);
        const char *where = fmt(c, "template.fields[%zu]", i);
        int ok = is_obj(f);
        for (size_t k = 0; ok && k < NKEYS(FIELD_KEYS); k++) ok = has(f, FIELD_KEYS[k]);
        for (size_t k = 0; ok && k < cp_object_len(f); k++) {
            const cp_member *m = cp_object_at(f, k);
            ok = in_list(m->key, m->key_len, FIELD_KEYS, NKEYS(FIELD_KEYS)) || ext_by_key(m->key, m->key_len);
        }
        if (!ok)
            fail(c, "%s: expected an object with keys %s (and format extension keys)", where,
                 quote_list_cstr(c, FIELD_KEYS, NKEYS(FIELD_KEYS)));
        const cp_value *name = get(f, "name");
        if (!is_str(name)) fail(c, "%s.name: expected a string", where);
        if (cp_object_get(seen, name->u.string.bytes, name->u.string.len))
            fail(c, "template: duplicate field name %s", quote(c, name));
        if (cp_object_set(seen, name->u.string.bytes, name->u.string.len, cp_null()) < 0) oom(c);
        const cp_value *content = get(f, "content");
        const extension *xp = is_str(content) ? ext_by_content(content) : NULL;
        if (!is_str(content) || (!is_parser_name(content) && !xp)) fail(c, "%s.content: unknown content parser", where);
        if (xp) {
            used[xp - EXTENSIONS] = 1;
            const cp_value *args = get(f, "content_args");
            if (!is_obj(args) || cp_object_len(args))
                fail(c, "%s.content_args: the %s parser takes none", where, quote(c, content));
        }
        const cp_value *open = get(f, "open");
        check_delimiter(c, open, fmt(c, "%s.open", where), 1);
        check_delimiter(c, get(f, "close"), fmt(c, "%s.close", where), 1);
        static const char *const bools[] = {"repeats", "optional", "transform_each"};
        for (size_t k = 0; k < 3; k++)
            if (!is_bool(get(f, bools[k]))) fail(c, "%s.%s: expected true/false", where, bools[k]);
        const cp_value *join = get(f, "join");
        if (!is_null(join) && !is_str(join)) fail(c, "%s.join: expected null or a string", where);
        if (!is_null(join) && !is_true(get(f, "repeats"))) fail(c, "%s.join: needs 'repeats': true", where);
        const cp_value *transform = get(f, "transform");
        if (is_true(get(f, "transform_each")) && is_null(transform)) fail(c, "%s.transform_each: needs a 'transform'", where);
        if (mixed_placeholder(c, transform)) fail(c, "%s.transform: a string mixes a {placeholder} with other text", where);
        /* the extension keys: check_field_keys(f"Field {name!r}", extra), in registry order */
        const char *scope = fmt(c, "Field %s", repr_of(c, name, -1));
        for (size_t k = 0; k < N_EXTENSIONS; k++) {
            const extension *x = &EXTENSIONS[k];
            const cp_value *v = x->key ? get(f, x->key) : NULL;
            if (!v) continue;
            ext_check(c, scope, x, v);
            used[k] = 1;
        }
    }
    /* implicit */
    const cp_value *implicit = NULL;
    size_t n_implicit = 0;
    for (size_t i = 0; i < nf; i++) {
        const cp_value *f = cp_list_get(fields, i);
        if (is_null(get(f, "open"))) {
            if (!n_implicit) implicit = get(f, "name");
            n_implicit++;
        }
    }
    const cp_value *si = get(spec, "implicit");
    int implicit_ok = n_implicit <= 1 && (n_implicit == 0 ? is_null(si) : cp_value_equal(si, implicit));
    if (!implicit_ok) fail(c, "template: 'implicit' does not name the one field without an open delimiter");
    check_delimiter(c, get(spec, "start_anchor"), "template.start_anchor", 0);
    /* extensions used, sorted, against the list */
    str_ref u[N_EXTENSIONS];
    size_t nu = 0;
    for (size_t i = 0; i < N_EXTENSIONS; i++)
        if (used[i]) { u[nu].s = EXTENSIONS[i].name; u[nu].n = strlen(EXTENSIONS[i].name); nu++; }
    qsort(u, nu, sizeof *u, str_ref_cmp);
    int same = nu == (extended ? cp_list_len(names) : 0);
    for (size_t i = 0; same && i < nu; i++) {
        str_ref b;
        b.s = cp_string_bytes(cp_list_get(names, i), &b.n);
        same = str_cmp(&u[i], &b) == 0;
    }
    if (!same)
        fail(c, "template: not in normalized form: 'extensions' does not list exactly the extensions the fields use");
}

/* ------------------------------------------------------------------------ */
/* patterns: delimiter sources as Python's regex.escape writes them          */

static int py_space(uint32_t cp) {
    static const uint32_t S[] = {0x9, 0xa, 0xb, 0xc, 0xd, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x85, 0xa0, 0x1680,
                                 0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009,
                                 0x200a, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000};
    for (size_t i = 0; i < NKEYS(S); i++)
        if (S[i] == cp) return 1;
    return 0;
}

typedef struct { const cp_value *s; size_t idx, cps; } lit_ref;
static int lit_cmp(const void *x, const void *y) {
    const lit_ref *a = x, *b = y;
    if (a->cps != b->cps) return a->cps > b->cps ? -1 : 1;   /* longest first */
    return a->idx < b->idx ? -1 : a->idx > b->idx;           /* stable */
}

/* The Python `regex` source of a delimiter (temporary): its pattern, or the
 * literals longest first (code points), each regex.escape'd, joined by '|'. */
static const char *delimiter_source(ctx *c, const cp_value *d, size_t *len) {
    const cp_value *p = get(d, "pattern");
    if (p) { *len = p->u.string.len; return p->u.string.bytes; }
    const cp_value *lits = get(d, "literals");
    size_t n = cp_list_len(lits);
    lit_ref *r = tmalloc(c, n * sizeof *r);
    for (size_t i = 0; i < n; i++) {
        r[i].s = cp_list_get(lits, i);
        r[i].idx = i;
        r[i].cps = cp_string_length(r[i].s);
    }
    qsort(r, n, sizeof *r, lit_cmp);
    cp_buf b = {0};
    static const char META[] = "()[]{}?*+|^$\\.-#&~";
    for (size_t i = 0; i < n; i++) {
        if (i) cp_buf_putc(&b, '|');
        const char *s = r[i].s->u.string.bytes;
        size_t sn = r[i].s->u.string.len, k = 0;
        while (k < sn) {
            size_t at = k;
            int32_t cp = cp_utf8_decode(s, sn, &k, 1);
            if ((cp > 0 && cp < 128 && strchr(META, (int)cp)) || (cp >= 0 && py_space((uint32_t)cp))) cp_buf_putc(&b, '\\');
            cp_buf_append(&b, s + at, k - at);
        }
    }
    return keep(c, cp_buf_take(&b, len), TMP_FREE);
}

typedef struct { int is_close; size_t field; int is_regex; const char *source; size_t source_len; } expected_pattern;

static expected_pattern *expected_patterns(ctx *c, const cp_value *spec, size_t *count) {
    const cp_value *fields = get(spec, "fields");
    size_t nf = cp_list_len(fields), k = 0;
    expected_pattern *out = tmalloc(c, (2 * nf + 1) * sizeof *out);
    for (size_t fi = 0; fi < nf; fi++) {
        const cp_value *f = cp_list_get(fields, fi);
        for (int close = 0; close < 2; close++) {
            const cp_value *d = get(f, close ? "close" : "open");
            if (is_null(d)) continue;
            out[k].is_close = close;
            out[k].field = fi;
            out[k].is_regex = has(d, "pattern");
            out[k].source = delimiter_source(c, d, &out[k].source_len);
            k++;
        }
    }
    *count = k;
    return out;
}

static const char *pattern_key(const expected_pattern *e) {
    return e->is_close ? (e->is_regex ? "close_pattern" : "close") : (e->is_regex ? "open_pattern" : "open");
}

/* pyClassEnd: just past the class opening at s[i] == '[' */
static size_t py_class_end(const char *s, size_t n, size_t i) {
    i++;
    if (i < n && s[i] == '^') i++;
    if (i < n && s[i] == ']') i++;
    while (i < n && s[i] != ']') i += s[i] == '\\' ? 2 : 1;
    return i + 1;
}

/* Whether a Python regex source declares a named group (?P<name> / (?<name>
 * outside classes and escapes. */
static int py_has_named_groups(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        if (s[i] == '\\') i += 2;
        else if (s[i] == '[') i = py_class_end(s, n, i);
        else if ((n - i >= 4 && !memcmp(s + i, "(?P<", 4)) ||
                 (n - i >= 3 && !memcmp(s + i, "(?<", 3) && !(n - i >= 4 && (s[i + 3] == '=' || s[i + 3] == '!'))))
            return 1;
        else i++;
    }
    return 0;
}

static int str_equals_bytes(const cp_value *v, const char *s, size_t n) {
    return is_str(v) && v->u.string.len == n && !memcmp(v->u.string.bytes, s, n);
}

static void check_patterns(ctx *c, const cp_value *raw, const cp_value *spec) {
    size_t ne;
    expected_pattern *exp = expected_patterns(c, spec, &ne);
    list_of(c, raw, "patterns");
    size_t n = cp_list_len(raw);
    if (n != ne) fail(c, "patterns: %zu entries but the template defines %zu delimiters", n, ne);
    cp_tables *t = c->t;
    t->patterns = calloc(n ? n : 1, sizeof *t->patterns);
    if (!t->patterns) oom(c);
    t->n_patterns = n;
    static const char *const KEYS[] = {"kind", "field", "key", "source", "exact", "reasons", "named_groups", "history",
                                       "horizon"};
    const cp_value *fields = get(spec, "fields");
    for (size_t i = 0; i < n; i++) {
        const cp_value *p = cp_list_get(raw, i);
        const expected_pattern *e = &exp[i];
        const char *where = fmt(c, "patterns[%zu]", i);
        if (!is_obj(p)) fail(c, "%s: expected an object", where);
        check_keys(c, p, KEYS, NKEYS(KEYS), NULL, 0, where);
        const cp_value *f = cp_list_get(fields, e->field);
        if (!str_is(get(p, "kind"), e->is_close ? "close" : "open") ||
            !is_int_in(get(p, "field"), (int64_t)e->field, (int64_t)e->field) || !str_is(get(p, "key"), pattern_key(e)) ||
            !str_equals_bytes(get(p, "source"), e->source, e->source_len))
            fail(c, "%s: does not match the template's %s of field %s", where, pattern_key(e), quote(c, get(f, "name")));
        int exact = bool_of(c, get(p, "exact"), fmt(c, "%s.exact", where));
        const cp_value *reasons = get(p, "reasons");
        list_of(c, reasons, fmt(c, "%s.reasons", where));
        if (!all_strings(reasons)) fail(c, "%s.reasons: expected strings", where);
        int named = bool_of(c, get(p, "named_groups"), fmt(c, "%s.named_groups", where));
        if (named != py_has_named_groups(e->source, e->source_len)) fail(c, "%s: named_groups does not match the pattern", where);
        if (named && is_null(get(f, "transform")))
            fail(c, "%s: the pattern has named groups but field %zu has no transform", where, e->field);
        if (!e->is_regex && !exact) fail(c, "%s: a literal delimiter must be exact", where);
        int64_t history = int_in(c, get(p, "history"), fmt(c, "%s.history", where), 1, MAX_INT);
        int64_t horizon = int_in(c, get(p, "horizon"), fmt(c, "%s.horizon", where), -1, MAX_INT);
        cp_pattern *o = &t->patterns[i];
        o->is_close = e->is_close;
        o->field = e->field;
        o->is_regex = e->is_regex;
        o->source = get(p, "source")->u.string.bytes;   /* (in the metadata value the tables keep) */
        o->source_len = e->source_len;
        o->exact = exact;
        o->named_groups = named;
        o->reasons = reasons;
        o->history = history;
        o->horizon = horizon;
    }
}

/* ------------------------------------------------------------------------ */
/* arrays                                                                   */

static const char *const DTYPE_NAMES[] = {"u1", "i1", "u2", "i2", "u4", "i4"};
static const size_t DTYPE_SIZE[] = {1, 1, 2, 2, 4, 4};

int64_t cp_array_get(const cp_array *a, size_t i) {
    switch (a->dtype) {
    case CP_U1: return ((const uint8_t *)a->data)[i];
    case CP_I1: return ((const int8_t *)a->data)[i];
    case CP_U2: return ((const uint16_t *)a->data)[i];
    case CP_I2: return ((const int16_t *)a->data)[i];
    case CP_U4: return ((const uint32_t *)a->data)[i];
    default: return ((const int32_t *)a->data)[i];
    }
}

typedef struct { size_t start, end; const char *name; size_t name_len; } span;
static int span_cmp(const void *x, const void *y) {
    const span *a = x, *b = y;
    if (a->start != b->start) return a->start < b->start ? -1 : 1;
    if (a->end != b->end) return a->end < b->end ? -1 : 1;
    str_ref ra = {a->name, a->name_len}, rb = {b->name, b->name_len};
    return str_cmp(&ra, &rb);
}

static void read_arrays(ctx *c, const cp_value *entries) {
    cp_tables *t = c->t;
    size_t d_len = t->data_len;
    list_of(c, entries, "arrays");
    size_t n = cp_list_len(entries);
    t->arrays = calloc(n ? n : 1, sizeof *t->arrays);
    if (!t->arrays) oom(c);
    c->array_index = keep(c, cp_object(), TMP_VALUE);
    span *spans = tmalloc(c, (n + 1) * sizeof *spans);
    size_t nspans = 0;
    static const char *const KEYS[] = {"name", "dtype", "shape", "offset", "nbytes"};
    for (size_t i = 0; i < n; i++) {
        const cp_value *e = cp_list_get(entries, i);
        const char *where = fmt(c, "arrays[%zu]", i);
        if (!is_obj(e)) fail(c, "%s: expected an object", where);
        check_keys(c, e, KEYS, NKEYS(KEYS), NULL, 0, where);
        const cp_value *name = get(e, "name");
        str_of(c, name, fmt(c, "%s.name", where));
        if (cp_object_get(c->array_index, name->u.string.bytes, name->u.string.len))
            fail(c, "%s: duplicate array %s", where, quote(c, name));
        const cp_value *dt = get(e, "dtype");
        int dtype = -1;
        for (int k = 0; k < 6 && is_str(dt); k++)
            if (str_is(dt, DTYPE_NAMES[k])) dtype = k;
        if (dtype < 0) {
            static const char *const sorted[] = {"i1", "i2", "i4", "u1", "u2", "u4"};
            fail(c, "%s (%s): dtype is not one of %s", where, quote(c, name), quote_list_cstr(c, sorted, 6));
        }
        const cp_value *shape = get(e, "shape");
        list_of(c, shape, fmt(c, "%s.shape", where));
        size_t nd = cp_list_len(shape);
        if (nd < 1 || nd > 2) fail(c, "%s (%s): arrays have 1 or 2 dimensions", where, quote(c, name));
        u128 count = 1;
        size_t dims[2] = {1, 1};
        for (size_t k = 0; k < nd; k++) {
            dims[k] = (size_t)int_in(c, cp_list_get(shape, k), fmt(c, "%s.shape", where), 0, (int64_t)d_len);
            count *= dims[k];
        }
        int64_t offset = int_in(c, get(e, "offset"), fmt(c, "%s.offset", where), 0, (int64_t)d_len);
        int64_t nbytes = int_in(c, get(e, "nbytes"), fmt(c, "%s.nbytes", where), 0, (int64_t)d_len);
        if ((u128)nbytes != count * DTYPE_SIZE[dtype])
            fail(c, "%s (%s): nbytes %lld does not match its shape and dtype", where, quote(c, name), (long long)nbytes);
        if (offset % 8 || (u128)offset + (u128)nbytes > d_len)
            fail(c, "%s (%s): offset %lld (+%lld) is unaligned or outside the data section", where, quote(c, name),
                 (long long)offset, (long long)nbytes);
        cp_array *a = &t->arrays[i];
        a->name = malloc(name->u.string.len + 1);
        if (!a->name) oom(c);
        memcpy(a->name, name->u.string.bytes, name->u.string.len + 1);
        a->name_len = name->u.string.len;
        t->n_arrays = i + 1;
        a->dtype = (cp_dtype)dtype;
        a->ndim = (int)nd;
        a->shape[0] = dims[0];
        a->shape[1] = nd == 2 ? dims[1] : 1;
        a->count = (size_t)count;
        a->offset = (size_t)offset;
        a->nbytes = (size_t)nbytes;
        a->data = t->data + offset;
        if (cp_object_set(c->array_index, name->u.string.bytes, name->u.string.len, cp_int((int64_t)i)) < 0) oom(c);
        if (nbytes > 0) {
            spans[nspans].start = (size_t)offset;
            spans[nspans].end = (size_t)(offset + nbytes);
            spans[nspans].name = name->u.string.bytes;
            spans[nspans].name_len = name->u.string.len;
            nspans++;
        }
    }
    qsort(spans, nspans, sizeof *spans, span_cmp);
    for (size_t i = 1; i < nspans; i++)
        if (spans[i].start < spans[i - 1].end)
            fail(c, "arrays %s and %s overlap", quote_bytes(c, spans[i - 1].name, spans[i - 1].name_len),
                 quote_bytes(c, spans[i].name, spans[i].name_len));
}

static const cp_array *array_named(ctx *c, const char *name) {
    const cp_value *i = cp_object_get_cstr(c->array_index, name);
    return i ? &c->t->arrays[i->u.integer] : NULL;
}

/* _get / getArray */
static const cp_array *get_array(ctx *c, const char *name, const cp_dtype *dtypes, size_t ndt, int ndim) {
    const cp_array *a = array_named(c, name);
    if (!a) fail(c, "missing array %s", quote_cstr(c, name));   /* (names asked for hold no NUL) */
    int ok = 0;
    for (size_t k = 0; k < ndt; k++)
        if (a->dtype == dtypes[k]) ok = 1;
    if (!ok) {
        cp_buf b = {0};
        for (size_t k = 0; k < ndt; k++) {
            if (k) cp_buf_putc(&b, '/');
            cp_buf_puts(&b, DTYPE_NAMES[dtypes[k]]);
        }
        const char *exp = keep(c, cp_buf_take(&b, NULL), TMP_FREE);
        fail(c, "array %s: dtype %s not allowed here (expected %s)", quote_cstr(c, name), DTYPE_NAMES[a->dtype], exp);
    }
    if (a->ndim != ndim) fail(c, "array %s: expected %d dimension(s)", quote_cstr(c, name), ndim);
    return a;
}

/* ------------------------------------------------------------------------ */
/* class map and modes                                                      */

static void check_class_map(ctx *c) {
    cp_tables *t = c->t;
    static const cp_dtype U4[] = {CP_U4}, IDS[] = {CP_U1, CP_U2};
    const cp_array *starts = get_array(c, "class_starts", U4, 1, 1);
    const cp_array *ids = get_array(c, "class_ids", IDS, 2, 1);
    const uint32_t *s = starts->data;
    if (starts->count != ids->count || starts->count == 0 || s[0] != 0)
        fail(c, "class map must start at code point 0 with one class id per interval");
    for (size_t i = 1; i < starts->count; i++)
        if (s[i] <= s[i - 1]) fail(c, "class map intervals must be strictly increasing");
    if (s[starts->count - 1] >= CP_N_CODEPOINTS) fail(c, "class map interval beyond U+10FFFF");
    for (size_t i = 0; i < ids->count; i++)
        if ((size_t)cp_array_get(ids, i) >= t->n_classes) fail(c, "class id out of range");
    uint8_t *seen = tcalloc(c, t->n_classes, 1);
    size_t used = 0;
    for (size_t i = 0; i < ids->count; i++) {
        size_t k = (size_t)cp_array_get(ids, i);
        if (!seen[k]) { seen[k] = 1; used++; }
    }
    if (used != t->n_classes) fail(c, "class map does not use every class");
    t->class_starts = s;
    t->class_ids = ids;
    t->n_intervals = starts->count;
}

size_t cp_class_of(const cp_tables *t, uint32_t cp) {
    size_t lo = 0, hi = t->n_intervals;   /* last start <= cp */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->class_starts[mid] <= cp) lo = mid;
        else hi = mid;
    }
    return (size_t)cp_array_get(t->class_ids, lo);
}

static int accepts(const cp_mode *m, size_t s) {
    for (size_t w = 0; w < m->n_watched; w++)
        if (cp_mode_acc(m, s, w) >= 0) return 1;
    return 0;
}

/* ranges of code points whose class is a member, merged when adjacent */
static cp_value *class_ranges(ctx *c, const uint8_t *member) {
    const cp_tables *t = c->t;
    cp_value *out = keep(c, cp_list(), TMP_VALUE);
    int64_t lo = -1, hi = -1;
    for (size_t i = 0; i < t->n_intervals; i++) {
        if (!member[cp_array_get(t->class_ids, i)]) continue;
        int64_t a = t->class_starts[i];
        int64_t b = (i + 1 < t->n_intervals ? (int64_t)t->class_starts[i + 1] : (int64_t)CP_N_CODEPOINTS) - 1;
        if (lo >= 0 && a <= hi + 1) hi = b;
        else {
            if (lo >= 0) {
                cp_value *p = cp_list();
                if (!p || cp_list_append(p, cp_int(lo)) < 0 || cp_list_append(p, cp_int(hi)) < 0 ||
                    cp_list_append(out, p) < 0) { cp_value_free(p); oom(c); }
            }
            lo = a;
            hi = b;
        }
    }
    if (lo >= 0) {
        cp_value *p = cp_list();
        if (!p || cp_list_append(p, cp_int(lo)) < 0 || cp_list_append(p, cp_int(hi)) < 0 || cp_list_append(out, p) < 0)
            oom(c);
    }
    unkeep(c, out);
    return out;
}

/* prefilter_pairs: the prefilter a mode's automaton gives (FORMAT.md section 4) */
static cp_value *prefilter(ctx *c, const cp_mode *m, size_t start) {
    const cp_tables *t = c->t;
    size_t C = t->n_classes;
    if (start == 0) return keep(c, cp_list(), TMP_VALUE);
    if (accepts(m, start)) return keep(c, cp_null(), TMP_VALUE);
    /* per distinct t1: its group; groups keyed by the second-class set */
    size_t S = m->n_states;
    size_t *group_of_state = tmalloc(c, S * sizeof *group_of_state);
    for (size_t s = 0; s < S; s++) group_of_state[s] = (size_t)-1;
    size_t ngroups = 0;
    uint8_t **second = tmalloc(c, (C + 1) * sizeof *second);   /* NULL: the null group */
    uint8_t **firsts = tmalloc(c, (C + 1) * sizeof *firsts);
    uint64_t *hash = tmalloc(c, (C + 1) * sizeof *hash);
    for (size_t c1 = 0; c1 < C; c1++) {
        size_t t1 = cp_mode_trans(m, start, c1, C);
        if (t1 == 0) continue;
        size_t g = group_of_state[t1];
        if (g == (size_t)-1) {
            uint8_t *row = NULL;
            uint64_t h = 1469598103934665603ULL;
            if (!(accepts(m, t1) || cp_mode_term(m, t1))) {
                row = tcalloc(c, C, 1);
                for (size_t c2 = 0; c2 < C; c2++)
                    if (cp_mode_trans(m, t1, c2, C)) { row[c2] = 1; h = (h ^ c2) * 1099511628211ULL; }
            } else h = 0;
            for (g = 0; g < ngroups; g++) {
                if (hash[g] != h || (second[g] == NULL) != (row == NULL)) continue;
                if (row == NULL || !memcmp(second[g], row, C)) break;
            }
            if (g == ngroups) {
                second[g] = row;
                hash[g] = h;
                firsts[g] = tcalloc(c, C, 1);
                ngroups++;
            }
            group_of_state[t1] = g;
        }
        firsts[g][c1] = 1;
    }
    cp_value *out = keep(c, cp_list(), TMP_VALUE);
    for (size_t g = 0; g < ngroups; g++) {
        cp_value *pair = cp_list();
        if (!pair || cp_list_append(out, pair) < 0) oom(c);
        if (cp_list_append(pair, class_ranges(c, firsts[g])) < 0) oom(c);
        if (cp_list_append(pair, second[g] ? class_ranges(c, second[g]) : cp_null()) < 0) oom(c);
    }
    return out;
}

static void check_modes(ctx *c, const cp_value *raw, const cp_value *spec) {
    cp_tables *t = c->t;
    size_t ne;
    expected_pattern *exp = expected_patterns(c, spec, &ne);
    const cp_value *fields = get(spec, "fields");
    const cp_value *implicit = get(spec, "implicit");
    size_t nf = cp_list_len(fields), nmodes = nf + 1;
    list_of(c, raw, "modes");
    if (cp_list_len(raw) != nmodes)
        fail(c, "modes: %zu entries, expected %zu (one per field plus the outside mode)", cp_list_len(raw), nmodes);
    t->modes = calloc(nmodes, sizeof *t->modes);
    if (!t->modes) oom(c);
    t->n_modes = nmodes;
    /* _expected_watch, in one pass over the patterns: mode 0 watches every open and the implicit field's
     * close, mode f+1 the close of field f (unless f is the implicit field); in pattern order. */
    uint8_t *field_implicit = tcalloc(c, nf, 1);
    for (size_t fi = 0; fi < nf; fi++)
        field_implicit[fi] = (uint8_t)cp_value_equal(get(cp_list_get(fields, fi), "name"), implicit);
    size_t *mode_of = tmalloc(c, (ne + 1) * sizeof *mode_of);
    for (size_t pi = 0; pi < ne; pi++) {
        int to_outside = !exp[pi].is_close || field_implicit[exp[pi].field];
        mode_of[pi] = to_outside ? 0 : exp[pi].field + 1;
        t->modes[mode_of[pi]].n_watched++;
    }
    for (size_t mi = 0; mi < nmodes; mi++) {
        cp_mode *m = &t->modes[mi];
        m->watched = malloc((m->n_watched + 1) * sizeof *m->watched);
        if (!m->watched) oom(c);
        m->n_watched = 0;
    }
    for (size_t pi = 0; pi < ne; pi++) {
        cp_mode *m = &t->modes[mode_of[pi]];
        m->watched[m->n_watched++] = pi;
    }
    static const char *const KEYS[] = {"patterns", "start0", "startN", "first"};
    static const cp_dtype ST[] = {CP_U1, CP_U2, CP_U4}, I1[] = {CP_I1}, U1[] = {CP_U1};
    for (size_t mi = 0; mi < nmodes; mi++) {
        cp_mode *m = &t->modes[mi];
        const cp_value *rm = cp_list_get(raw, mi);
        const char *where = fmt(c, "modes[%zu]", mi);
        if (!is_obj(rm)) fail(c, "%s: expected an object", where);
        check_keys(c, rm, KEYS, 4, NULL, 0, where);
        const cp_value *pats = get(rm, "patterns");
        int ok = is_list(pats) && cp_list_len(pats) == m->n_watched;
        for (size_t k = 0; ok && k < m->n_watched; k++)
            ok = is_int_in(cp_list_get(pats, k), (int64_t)m->watched[k], (int64_t)m->watched[k]);
        if (!ok) {
            cp_buf b = {0};
            cp_buf_putc(&b, '[');
            for (size_t k = 0; k < m->n_watched; k++) cp_buf_printf(&b, k ? ", %zu" : "%zu", m->watched[k]);
            cp_buf_putc(&b, ']');
            const char *w = keep(c, cp_buf_take(&b, NULL), TMP_FREE);
            fail(c, "%s: watched patterns are not the template's %s", where, w);
        }
        const cp_array *trans = get_array(c, fmt(c, "mode%zu.trans", mi), ST, 3, 2);
        size_t S = trans->shape[0];
        if (S < 1 || trans->shape[1] != t->n_classes)
            fail(c, "%s: transition table has shape (%zu, %zu), expected (states >= 1, %zu)", where, trans->shape[0],
                 trans->shape[1], t->n_classes);
        const cp_array *eot = get_array(c, fmt(c, "mode%zu.eot", mi), ST, 3, 1);
        const cp_array *acc = get_array(c, fmt(c, "mode%zu.acc", mi), I1, 1, 2);
        const cp_array *term = get_array(c, fmt(c, "mode%zu.term", mi), U1, 1, 1);
        size_t W = m->n_watched;
        if (eot->shape[0] != S || term->shape[0] != S || acc->shape[0] != S || acc->shape[1] != W)
            fail(c, "%s: per-state arrays do not match %zu states and %zu patterns", where, S, W);
        for (size_t i = 0; i < trans->count; i++)
            if ((size_t)cp_array_get(trans, i) >= S) fail(c, "%s: transition to a state outside 0..%zu", where, S - 1);
        for (size_t i = 0; i < eot->count; i++)
            if ((size_t)cp_array_get(eot, i) >= S)
                fail(c, "%s: end-of-text transition to a state outside 0..%zu", where, S - 1);
        const int8_t *a = acc->data;
        for (size_t i = 0; i < acc->count; i++)
            if (a[i] < -1 || a[i] > 1) fail(c, "%s: accept codes must be -1, 0 or 1", where);
        const uint8_t *tm = term->data;
        for (size_t i = 0; i < term->count; i++)
            if (tm[i] > 1) fail(c, "%s: terminal flags must be 0 or 1", where);
        m->n_states = S;
        m->trans = trans;
        m->eot = eot;
        m->acc = acc;
        m->term = term;
        int dead = cp_mode_eot(m, 0) == 0 && tm[0] == 1;
        for (size_t k = 0; k < t->n_classes; k++)
            if (cp_mode_trans(m, 0, k, t->n_classes)) dead = 0;
        for (size_t w = 0; w < W; w++)
            if (a[w] != -1) dead = 0;
        if (!dead) fail(c, "%s: state 0 must be the dead state", where);
        for (size_t s = 1; s < S; s++)
            if (tm[s] && !accepts(m, s))
                fail(c, "%s: terminal state %zu accepts no pattern (only the dead state 0 may be terminal without "
                        "accepting)", where, s);
        m->start0 = (size_t)int_in(c, get(rm, "start0"), fmt(c, "%s.start0", where), 0, (int64_t)S - 1);
        m->startN = (size_t)int_in(c, get(rm, "startN"), fmt(c, "%s.startN", where), 0, (int64_t)S - 1);
        cp_value *first = prefilter(c, m, m->startN);
        if (!cp_value_equal(first, get(rm, "first")))
            fail(c, "%s.first: not the prefilter the mode's automaton gives (FORMAT.md section 4)", where);
        m->first = get(rm, "first");
    }
}

/* ------------------------------------------------------------------------ */
/* the port section (js)                                                    */

static void check_translation(ctx *c, const cp_value *t, const char *where, const char *pattern, size_t plen) {
    if (!is_obj(t)) fail(c, "%s: expected an object", where);
    if (pattern && !str_equals_bytes(get(t, "pattern"), pattern, plen)) fail(c, "%s: translation is not for this pattern", where);
    static const char *const PAT[] = {"pattern"};
    if (has(t, "error")) {
        static const char *const ERR[] = {"error"};
        check_keys(c, t, ERR, 1, PAT, pattern ? 1 : 0, where);
        str_of(c, get(t, "error"), where);
        return;
    }
    static const char *const REQ[] = {"source", "groups"};
    static const char *const OPT[] = {"caveats", "pattern"};
    check_keys(c, t, REQ, 2, OPT, pattern ? 2 : 1, where);
    str_of(c, get(t, "source"), where);
    const cp_value *g = get(t, "groups");
    int ok = is_obj(g);
    for (size_t k = 0; ok && k < cp_object_len(g); k++) ok = is_str(cp_object_at(g, k)->value);
    if (!ok) fail(c, "%s.groups: expected an object of strings", where);
    const cp_value *cav = get(t, "caveats");
    if (cav) {
        list_of(c, cav, where);
        if (!all_strings(cav)) fail(c, "%s.caveats: expected strings", where);
    }
}

static void check_js(ctx *c, const cp_value *js, const cp_value *spec) {
    if (!is_obj(js)) fail(c, "js: expected an object");
    static const char *const KEYS[] = {"patterns", "anchor", "content", "word"};
    check_keys(c, js, KEYS, 4, NULL, 0, "js");
    size_t ne;
    expected_pattern *exp = expected_patterns(c, spec, &ne);
    const cp_value *pats = get(js, "patterns");
    list_of(c, pats, "js.patterns");
    if (cp_list_len(pats) != ne) fail(c, "js.patterns: one translation per pattern expected");
    for (size_t i = 0; i < ne; i++)
        check_translation(c, cp_list_get(pats, i), fmt(c, "js.patterns[%zu]", i), exp[i].source, exp[i].source_len);
    size_t alen;
    const char *anchor = delimiter_source(c, get(spec, "start_anchor"), &alen);
    check_translation(c, get(js, "anchor"), "js.anchor", anchor, alen);
    const cp_value *content = get(js, "content");
    if (!is_obj(content)) fail(c, "js.content: expected an object");
    for (size_t k = 0; k < cp_object_len(content); k++)
        check_translation(c, cp_object_at(content, k)->value, "js.content", NULL, 0);
    const cp_value *word = get(js, "word");
    if (!is_null(word)) {
        str_of(c, word, "js.word");
        check_word(c, word);
    }
}

/* ------------------------------------------------------------------------ */
/* the token section (FORMAT.md 8.4)                                        */

static const char *py_shape(ctx *c, const cp_array *a) {
    if (a->ndim == 1) return fmt(c, "(%zu,)", a->shape[0]);
    return fmt(c, "(%zu, %zu)", a->shape[0], a->shape[1]);
}

static void check_offsets(ctx *c, const cp_array *a, size_t n, size_t total, const char *what) {
    if (a->shape[0] != n + 1) fail(c, "token section: %s has shape %s, expected (%zu,)", what, py_shape(c, a), n + 1);
    const uint32_t *o = a->data;
    int ok = o[0] == 0 && o[n] == total;
    for (size_t i = 1; ok && i <= n; i++)
        if (o[i] < o[i - 1]) ok = 0;
    if (!ok) fail(c, "token section: %s must rise from 0 to %zu without decreasing", what, total);
}

static void put_u64le(cp_sha256 *h, uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
    cp_sha256_update(h, b, 8);
}

static void check_tokens(ctx *c, const cp_value *tm) {
    cp_tables *t = c->t;
    cp_token_section *ts = &t->tokens;
    if (!is_obj(tm)) fail(c, "tokens: expected an object");
    static const char *const KEYS[] = {"size", "kind", "strip_char", "strip_start", "cleanup", "name", "tokenizer_sha256"};
    check_keys(c, tm, KEYS, NKEYS(KEYS), NULL, 0, "tokens");
    size_t size = (size_t)int_in(c, get(tm, "size"), "tokens.size", 1, MAX_INT);
    const cp_value *kind = get(tm, "kind");
    if (!str_is(kind, "bytes") && !str_is(kind, "pieces")) fail(c, "tokens.kind: expected 'bytes' or 'pieces'");
    int pieces = str_is(kind, "pieces");
    const cp_value *sc = get(tm, "strip_char");
    if (!is_str(sc) || cp_string_length(sc) != 1) fail(c, "tokens.strip_char: expected one character");
    const cp_value *tsha = get(tm, "tokenizer_sha256");
    if (!is_null(tsha)) {
        int ok = is_str(tsha) && tsha->u.string.len == 64;
        for (size_t i = 0; ok && i < 64; i++) {
            char ch = tsha->u.string.bytes[i];
            ok = (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f');
        }
        if (!ok) fail(c, "tokens.tokenizer_sha256: expected null or 64 lowercase hex digits");
    }
    int64_t strip_start = int_in(c, get(tm, "strip_start"), "tokens.strip_start", 0, MAX_INT);
    int cleanup = bool_of(c, get(tm, "cleanup"), "tokens.cleanup");
    str_of(c, get(tm, "name"), "tokens.name");
    static const cp_dtype U4[] = {CP_U4}, U1[] = {CP_U1};
    const cp_array *a_off = get_array(c, "tokens.offsets", U4, 1, 1);
    const cp_array *a_bytes = get_array(c, "tokens.bytes", U1, 1, 1);
    const cp_array *a_flags = get_array(c, "tokens.flags", U1, 1, 1);
    const cp_array *a_fids = get_array(c, "tokens.first_ids", U4, 1, 1);
    const cp_array *a_foff = get_array(c, "tokens.first_offsets", U4, 1, 1);
    const cp_array *a_fbytes = get_array(c, "tokens.first_bytes", U1, 1, 1);
    const cp_array *a_inert = get_array(c, "tokens.inert", U1, 1, 2);
    const cp_array *a_delims = get_array(c, "tokens.delims", U4, 1, 2);

    const uint8_t *blob = a_bytes->data;
    check_offsets(c, a_off, size, a_bytes->count, "offsets");
    const uint32_t *off = a_off->data;
    const uint8_t *flags = a_flags->data;
    if (a_flags->shape[0] != size) fail(c, "token section: flags has shape %s, expected (%zu,)", py_shape(c, a_flags), size);
    int found[5] = {0};
    for (size_t i = 0; i < size; i++) {
        uint8_t f = flags[i];
        if (f & ~(CP_TOKEN_SKIP | CP_TOKEN_TEXT | CP_TOKEN_BYTE)) found[0] = 1;
        if ((f & CP_TOKEN_SKIP) && (f & CP_TOKEN_TEXT)) found[1] = 1;
        if ((f & CP_TOKEN_BYTE) && ((f & CP_TOKEN_TEXT) || off[i + 1] - off[i] != 1)) found[2] = 1;
        if (f & CP_TOKEN_BYTE) found[3] = 1;
        if (!(f & CP_TOKEN_SKIP) && !(f & CP_TOKEN_TEXT) == !(f & CP_TOKEN_BYTE)) found[4] = 1;
    }
    if (found[0]) fail(c, "token section: unknown token flags");
    if (found[1]) fail(c, "token section: a skipped token cannot have text");
    if (found[2]) fail(c, "token section: a byte token holds exactly one byte and has no text of its own");
    if (!pieces && found[3]) fail(c, "token section: byte tokens only exist in the 'pieces' kind");
    if (pieces && found[4]) fail(c, "token section: every piece that is not skipped is either text or a byte token");

    const uint32_t *fids = a_fids->data;
    size_t n_first = a_fids->count;
    const uint8_t *fbytes = a_fbytes->data;
    check_offsets(c, a_foff, n_first, a_fbytes->count, "first_offsets");
    const uint32_t *foff = a_foff->data;
    if (n_first) {
        if (!pieces) fail(c, "token section: first-token texts only exist in the 'pieces' kind");
        int ok = fids[n_first - 1] < size;
        for (size_t k = 1; ok && k < n_first; k++)
            if (fids[k] <= fids[k - 1]) ok = 0;
        if (!ok) fail(c, "token section: first_ids must be increasing token ids");
        for (size_t k = 0; k < n_first; k++)
            if (flags[fids[k]] & CP_TOKEN_SKIP) fail(c, "token section: a skipped token has a first-token text");
    }

    size_t nmodes = t->n_modes;
    const uint8_t *inert = a_inert->data;
#define USABLE(i) ((flags[(i)] & CP_TOKEN_TEXT) && off[(i) + 1] > off[(i)])
    if (a_inert->shape[0] != nmodes || a_inert->shape[1] != size)
        fail(c, "token section: inert has shape %s, expected (%zu, %zu)", py_shape(c, a_inert), nmodes, size);
    for (size_t k = 0; k < a_inert->count; k++)
        if (inert[k] > 1) fail(c, "token section: inert flags must be 0 or 1");
    for (size_t k = 0; k < a_inert->count; k++)
        if (inert[k] && !USABLE(k % size)) fail(c, "token section: only tokens with non-empty text of their own can be inert");

    /* strict UTF-8 of the TEXT tokens' bytes concatenated, each token at a character boundary */
    size_t text_len = 0;
    for (size_t i = 0; i < size; i++)
        if (flags[i] & CP_TOKEN_TEXT) text_len += off[i + 1] - off[i];
    uint8_t *text = tmalloc(c, text_len + 1);
    for (size_t i = 0, p = 0; i < size; i++) {
        if (!(flags[i] & CP_TOKEN_TEXT)) continue;
        memcpy(text + p, blob + off[i], off[i + 1] - off[i]);
        p += off[i + 1] - off[i];
    }
    const char *reason;
    long long bad = utf8_error(text, text_len, &reason);
    if (bad >= 0) fail(c, "token section: token text is not valid UTF-8 (%s at byte %lld)", reason, bad);
    for (size_t i = 0, p = 0; i < size; i++) {
        if (!(flags[i] & CP_TOKEN_TEXT)) continue;
        if (off[i + 1] > off[i] && (text[p] & 0xC0) == 0x80)
            fail(c, "token section: token text: a token's bytes do not start at a character boundary");
        p += off[i + 1] - off[i];
    }
    bad = utf8_error(fbytes, a_fbytes->count, &reason);
    if (bad >= 0) fail(c, "token section: first-token text is not valid UTF-8 (%s at byte %lld)", reason, bad);
    for (size_t k = 0; k < n_first; k++)
        if (foff[k + 1] > foff[k] && (fbytes[foff[k]] & 0xC0) == 0x80)
            fail(c, "token section: first-token text: a token's bytes do not start at a character boundary");

    const uint32_t *dl = a_delims->data;
    if (a_delims->shape[1] != 3) fail(c, "token section: delims has shape %s, expected (n, 3)", py_shape(c, a_delims));
    size_t rows = a_delims->shape[0];
    if (rows) {
        for (size_t r = 0; r < rows; r++)
            if (dl[3 * r] >= nmodes || dl[3 * r + 1] >= size)
                fail(c, "token section: a whole-delimiter entry names a mode or token out of range");
        for (size_t r = 1; r < rows; r++) {
            uint32_t m0 = dl[3 * r - 3], i0 = dl[3 * r - 2], m1 = dl[3 * r], i1 = dl[3 * r + 1];
            if (m1 < m0 || (m1 == m0 && i1 <= i0))
                fail(c, "token section: whole-delimiter entries must be sorted by (mode, token) without repeats");
        }
        int64_t wm = -1, wp = -1;
        for (size_t r = 0; r < rows; r++) {
            uint32_t mm = dl[3 * r], pp = dl[3 * r + 2];
            const cp_mode *m = &t->modes[mm];
            int watched = 0;
            for (size_t k = 0; k < m->n_watched; k++)
                if (m->watched[k] == pp) watched = 1;
            if (!watched && (wm < 0 || mm < wm || (mm == wm && pp < wp))) { wm = mm; wp = pp; }
        }
        if (wm >= 0) fail(c, "token section: pattern %lld is not watched in mode %lld", (long long)wp, (long long)wm);
        for (size_t r = 0; r < rows; r++) {
            uint32_t i = dl[3 * r + 1];
            size_t chars = 0;
            for (uint32_t j = off[i]; j < off[i + 1]; j++)
                if ((blob[j] & 0xC0) != 0x80) chars++;
            if (!USABLE(i) || chars > MAX_DELIM_CHARS)
                fail(c, "token section: a whole-delimiter token must have text of 1..%d characters", MAX_DELIM_CHARS);
        }
        for (size_t r = 0; r < rows; r++)
            if (inert[(size_t)dl[3 * r] * size + dl[3 * r + 1]])
                fail(c, "token section: a whole-delimiter token cannot be inert in its mode");
    }
#undef USABLE

    /* the vocabulary hash (8.3) */
    cp_sha256 h;
    cp_sha256_init(&h);
    const char *tag = "chatparse vocabulary v1\n";
    cp_sha256_update(&h, tag, strlen(tag));
    const char *kq = keep(c, cp_json_quote(kind->u.string.bytes, kind->u.string.len, 0, NULL), TMP_FREE);
    const char *sq = keep(c, cp_json_quote(sc->u.string.bytes, sc->u.string.len, 0, NULL), TMP_FREE);
    const char *scalars = fmt(c, "{\"cleanup\":%s,\"kind\":%s,\"size\":%zu,\"strip_char\":%s,\"strip_start\":%lld}\n",
                              cleanup ? "true" : "false", kq, size, sq, (long long)strip_start);
    cp_sha256_update(&h, scalars, strlen(scalars));
    const cp_array *vocab[] = {a_off, a_bytes, a_flags, a_fids, a_foff, a_fbytes};
    for (size_t k = 0; k < 6; k++) {
        put_u64le(&h, vocab[k]->nbytes);
        cp_sha256_update(&h, vocab[k]->data, vocab[k]->nbytes);
    }
    uint8_t digest[32];
    cp_sha256_final(&h, digest);
    if (memcmp(digest, t->vocab_sha256, 32) != 0) fail(c, "vocabulary hash does not match the token section");

    ts->size = size;
    ts->kind_pieces = pieces;
    size_t pos = 0;
    ts->strip_char = (uint32_t)cp_utf8_decode(sc->u.string.bytes, sc->u.string.len, &pos, 1);
    ts->strip_start = strip_start;
    ts->cleanup = cleanup;
    ts->name = get(tm, "name");
    ts->tokenizer_sha256 = tsha;
    ts->offsets = off;
    ts->bytes = blob;
    ts->n_bytes = a_bytes->count;
    ts->flags = flags;
    ts->first_ids = fids;
    ts->n_first = n_first;
    ts->first_offsets = foff;
    ts->first_bytes = fbytes;
    ts->n_first_bytes = a_fbytes->count;
    ts->inert = inert;
    ts->delims = dl;
    ts->n_delims = rows;
}

/* ------------------------------------------------------------------------ */
/* step 9, what a port can make of it                                       */

/* Whether the Python regex source declares the named group `name` ((?P<name>
 * or (?<name>, outside classes and escapes): its groupindex holds it. */
static int py_declares_group(const char *s, size_t n, const char *name, size_t nl) {
    size_t i = 0;
    while (i < n) {
        if (s[i] == '\\') { i += 2; continue; }
        if (s[i] == '[') { i = py_class_end(s, n, i); continue; }
        size_t at = 0;
        if (n - i >= 4 && !memcmp(s + i, "(?P<", 4)) at = i + 4;
        else if (n - i >= 3 && !memcmp(s + i, "(?<", 3) && !(n - i >= 4 && (s[i + 3] == '=' || s[i + 3] == '!'))) at = i + 3;
        if (at) {
            size_t e = at;
            while (e < n && s[e] != '>') e++;
            if (e < n && e - at == nl && !memcmp(s + at, name, nl)) return 1;
        }
        i++;
    }
    return 0;
}

/* check_normalized (runtime/tables/validate.py) after every other check: the
 * template re-normalized by load_template is itself. What needs Python's
 * `regex` (every pattern compiles) a port cannot check; the rest, in
 * load_template's order: per field the extension rules that need the whole
 * field (close_json_end, optional_placeholders, content_fallback, flatten,
 * escaped_json_values, on_error), then on_error's implicit field, then a key
 * holding its default or a content_fallback entry without content_args (which
 * load_template would normalize differently). */
static void check_normalized_lite(ctx *c, const cp_value *spec) {
    const cp_value *fields = get(spec, "fields");
    size_t nf = cp_list_len(fields);
    int any_implicit = 0, differs = 0;
    for (size_t i = 0; i < nf; i++)
        if (is_null(get(cp_list_get(fields, i), "open"))) any_implicit = 1;
    for (size_t i = 0; i < nf; i++) {
        const cp_value *f = cp_list_get(fields, i);
        const cp_value *name = get(f, "name"), *open = get(f, "open"), *content = get(f, "content");
        const char *scope = fmt(c, "Field '%s'", name->u.string.bytes);
        for (size_t k = 0; k < N_EXTENSIONS; k++) {
            const extension *x = &EXTENSIONS[k];
            const cp_value *v = x->key ? get(f, x->key) : NULL;
            if (v && ext_check(c, scope, x, v)) differs = 1;
        }
        if (is_true(get(f, "close_json_end")) && is_null(open))
            fail(c, "template: %s: 'close_json_end' needs an explicit 'open' or 'open_pattern': the implicit field has "
                    "no region body of its own to read a JSON value from (format extension 'close_json_end')", scope);
        const cp_value *op = get(f, "optional_placeholders");
        for (size_t k = 0; op && k < cp_list_len(op); k++) {
            const cp_value *g = cp_list_get(op, k);
            const cp_value *pat = get(open, "pattern");
            if (is_null(get(f, "transform")) || !is_str(pat) ||
                !py_declares_group(pat->u.string.bytes, pat->u.string.len, g->u.string.bytes, g->u.string.len))
                fail(c, "template: %s: 'optional_placeholders' names %s, which is not a named group of the field's "
                        "'open_pattern' (and the field needs a 'transform') (format extension 'optional_placeholders')",
                     scope, repr_of(c, g, 40));
        }
        const cp_value *cf = get(f, "content_fallback");
        for (size_t k = 0; cf && k < cp_list_len(cf); k++) {
            const cp_value *e = get(cp_list_get(cf, k), "content");
            if (!is_parser_name(e))
                fail(c, "template: %s: 'content_fallback' entry %zu names content parser %s; available: ['bool', "
                        "'float', 'int', 'json', 'kv-lines', 'text', 'xml-inline'] (format extension 'content_fallback')",
                     scope, k, repr_of(c, e, 40));
        }
        if (is_true(get(f, "flatten")) && (!is_true(get(f, "repeats")) || !is_null(get(f, "join"))))
            fail(c, "template: %s: 'flatten' needs 'repeats': true and no 'join': it adds a list value's elements to "
                    "the field's list (format extension 'flatten')", scope);
        if (is_true(get(f, "escaped_json_values"))) {
            const cp_value *args = get(f, "content_args");
            const cp_value *vp = is_obj(args) ? get(args, "value_parser") : NULL;
            const cp_value *vname = is_obj(vp) ? get(vp, "name") : NULL;
            int json = vname ? str_is(vname, "json") : 0;   /* (default "text") */
            if ((!str_is(content, "xml-inline") && !str_is(content, "kv-lines")) || !is_obj(vp) || !json)
                fail(c, "template: %s: 'escaped_json_values' needs 'content' xml-inline or kv-lines with a "
                        "'value_parser' named 'json' in 'content_args' (format extension 'escaped_json_values')", scope);
        }
        if (str_is(get(f, "on_error"), "content") && is_null(open))
            fail(c, "template: %s: 'on_error': 'content' cannot be set on the implicit field: its text would be "
                    "recovered into itself (use 'drop') (format extension 'on_error')", scope);
    }
    for (size_t i = 0; i < nf; i++) {
        const cp_value *f = cp_list_get(fields, i);
        if (str_is(get(f, "on_error"), "content") && !any_implicit)
            fail(c, "template: Field '%s': 'on_error': 'content' needs an implicit field (one without "
                    "'open'/'open_pattern') to keep the text in (format extension 'on_error')",
                 get(f, "name")->u.string.bytes);
    }
    if (differs) fail(c, "template: not in normalized form (load_template would normalize it differently)");
}

/* Whether an array name is one of FORMAT.md section 3: class_starts,
 * class_ids, mode<i>.trans/eot/acc/term for i < n_modes (i in canonical
 * decimal), tokens.<name> with a token section. Constant time per name. */
static int array_name_known(const cp_tables *t, const char *nm, size_t n) {
    if ((n == 12 && !memcmp(nm, "class_starts", 12)) || (n == 9 && !memcmp(nm, "class_ids", 9))) return 1;
    if (n > 4 && !memcmp(nm, "mode", 4)) {
        size_t i = 4, mi = 0;
        if (i < n && nm[i] == '0' && i + 1 < n && nm[i + 1] != '.') return 0;   /* no leading zeros */
        size_t d0 = i;
        while (i < n && nm[i] >= '0' && nm[i] <= '9' && i - d0 < 12) mi = mi * 10 + (size_t)(nm[i++] - '0');
        if (i == d0 || i >= n || nm[i] != '.' || mi >= t->n_modes) return 0;
        const char *k = nm + i + 1;
        size_t kn = n - i - 1;
        return (kn == 5 && !memcmp(k, "trans", 5)) || (kn == 3 && !memcmp(k, "eot", 3)) ||
               (kn == 3 && !memcmp(k, "acc", 3)) || (kn == 4 && !memcmp(k, "term", 4));
    }
    if (t->has_tokens && n > 7 && !memcmp(nm, "tokens.", 7)) {
        static const char *const TK[] = {"offsets", "bytes", "flags", "first_ids", "first_offsets", "first_bytes",
                                         "inert", "delims"};
        for (int k = 0; k < 8; k++)
            if (strlen(TK[k]) == n - 7 && !memcmp(nm + 7, TK[k], n - 7)) return 1;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* steps 1-4: header, trailer, flags, layout                                */

static uint32_t u32le(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t u64le(const uint8_t *p) { return (uint64_t)u32le(p) | (uint64_t)u32le(p + 4) << 32; }

static void load(ctx *c) {
    const uint8_t *b = c->bytes;
    size_t n = c->n;
    cp_tables *t = c->t;
    /* 1. header */
    if (n < CP_HEADER_SIZE + CP_TRAILER_SIZE) fail(c, "%zu bytes is too short to be a table file (truncated?)", n);
    if (memcmp(b, MAGIC, 8) != 0) fail(c, "not a chatparse table file (bad magic number)");
    uint32_t version = u32le(b + 8);
    if (version != CHATPARSE_FORMAT_VERSION)
        fail(c, "format version %u is not supported (this chatparse reads version %d)", version, CHATPARSE_FORMAT_VERSION);
    if (u32le(b + 12) != CP_HEADER_SIZE) fail(c, "header size %u, expected %d", u32le(b + 12), CP_HEADER_SIZE);
    uint64_t file_size = u64le(b + 16);
    if (file_size != (uint64_t)n)
        fail(c, "header says %llu bytes but the file has %zu (truncated or padded)", (unsigned long long)file_size, n);
    /* 2. trailer */
    uint8_t digest[32];
    cp_sha256_digest(b, n - CP_TRAILER_SIZE, digest);
    if (memcmp(digest, b + n - CP_TRAILER_SIZE, 32) != 0) fail(c, "checksum mismatch: the file is corrupted");
    /* 3. flags */
    uint32_t flags = u32le(b + 72);
    if (flags & ~3u) fail(c, "unknown header flags 0x%x", flags);
    if ((flags & 2) && !(flags & 1)) fail(c, "token section without its vocabulary hash");
    if (u32le(b + 76) != 0) fail(c, "reserved header field is not zero");
    /* 4. layout (exact 128-bit arithmetic) */
    u128 t_off = u64le(b + 24), t_len = u64le(b + 32), m_off = u64le(b + 40), m_len = u64le(b + 48);
    u128 d_off = u64le(b + 56), d_len = u64le(b + 64);
    u128 m_end = m_off + m_len;
    if (t_off != CP_HEADER_SIZE || m_off != t_off + t_len || d_off != ((m_end + 7) & ~(u128)7) || d_len % 8 ||
        d_off + d_len != (u128)(n - CP_TRAILER_SIZE))
        fail(c, "section offsets/lengths are inconsistent");
    for (size_t i = (size_t)m_end; i < (size_t)d_off; i++)
        if (b[i]) fail(c, "non-zero padding before the data section");
    int vocab_nonzero = 0;
    for (int i = 112; i < 144; i++)
        if (b[i]) vocab_nonzero = 1;
    if (!(flags & 1) && vocab_nonzero) fail(c, "vocabulary hash present but its flag is clear");
    size_t vend = 0;
    while (vend < 16 && b[144 + vend]) vend++;
    int vok = vend > 0;
    for (size_t i = 0; i < vend; i++)
        if (b[144 + i] < 0x21 || b[144 + i] > 0x7E) vok = 0;
    for (size_t i = vend; i < 16; i++)
        if (b[144 + i]) vok = 0;
    if (!vok) fail(c, "chatparse version field is not NUL-padded printable ASCII");
    t->format_version = version;
    t->flags = flags;
    memcpy(t->chatparse_version, b + 144, vend);
    t->chatparse_version[vend] = 0;
    memcpy(t->template_sha256, b + 80, 32);
    memcpy(t->vocab_sha256, b + 112, 32);
    t->has_vocab_hash = flags & 1;
    t->has_tokens = (flags & 2) != 0;
    size_t t0 = (size_t)t_off, t1 = (size_t)(t_off + t_len), m0 = (size_t)m_off, m1 = (size_t)m_end;
    size_t d0 = (size_t)d_off;

    /* 5. the template section */
    cp_value *spec = section_json(c, b + t0, t1 - t0, "template");
    cp_json_dump_options compact = cp_json_dump_compact();
    size_t dl;
    char *dumped = keep(c, cp_json_dump(spec, &compact, &dl), TMP_FREE);
    if (dl != t1 - t0 || memcmp(dumped, b + t0, dl) != 0) fail(c, "template section is not in the format's compact JSON form");
    cp_json_dump_options canonical = compact;
    canonical.sort_keys = 1;
    char *canon = keep(c, cp_json_dump(spec, &canonical, &dl), TMP_FREE);
    cp_sha256_digest(canon, dl, digest);
    if (memcmp(digest, t->template_sha256, 32) != 0) fail(c, "template hash does not match the template section");
    /* 6. the template rules */
    c->meta_bytes = b + m0;
    c->meta_len = m1 - m0;
    template_rules(c, spec);
    t->spec = unkeep(c, spec);

    /* 7. the metadata section */
    cp_value *meta = section_json(c, b + m0, m1 - m0, "metadata");
    t->metadata = unkeep(c, meta);
    if (!is_obj(meta)) fail(c, "metadata is not a JSON object");
    static const char *const REQ[] = {"chatparse_version", "n_classes", "patterns", "modes", "arrays"};
    static const char *const OPT[] = {"js", "tokens"};
    check_keys(c, meta, REQ, 5, OPT, 2, "metadata");
    if (has(meta, "tokens") != t->has_tokens) fail(c, "the token-section flag and the metadata's 'tokens' entry disagree");
    if (!str_is(get(meta, "chatparse_version"), t->chatparse_version))
        fail(c, "metadata chatparse_version differs from the header's");
    t->n_classes = (size_t)int_in(c, get(meta, "n_classes"), "n_classes", 1, 65535);
    /* the data section, copied to aligned memory */
    t->data_len = (size_t)d_len;
    t->data = aligned_alloc(16, ((size_t)d_len + 16) & ~(size_t)15);
    if (!t->data) oom(c);
    memcpy(t->data, b + d0, (size_t)d_len);
    read_arrays(c, get(meta, "arrays"));
    check_patterns(c, get(meta, "patterns"), spec);
    /* 8. automata */
    check_class_map(c);
    check_modes(c, get(meta, "modes"), spec);
    /* no array that is not one of section 3 */
    str_ref *extra = tmalloc(c, (t->n_arrays + 1) * sizeof *extra);
    size_t ne = 0;
    for (size_t i = 0; i < t->n_arrays; i++) {
        if (!array_name_known(t, t->arrays[i].name, t->arrays[i].name_len)) {
            extra[ne].s = t->arrays[i].name;
            extra[ne].n = t->arrays[i].name_len;
            ne++;
        }
    }
    if (ne) {
        qsort(extra, ne, sizeof *extra, str_ref_cmp);
        fail(c, "unknown arrays %s", quote_list(c, extra, ne));
    }
    if (has(meta, "js")) {
        check_js(c, get(meta, "js"), spec);
        t->js = get(meta, "js");
    }
    if (t->has_tokens) check_tokens(c, get(meta, "tokens"));
    /* 9. the template re-normalized is itself (all but what needs Python's regex) */
    check_normalized_lite(c, spec);
}

/* ------------------------------------------------------------------------ */
/* public                                                                   */

const char *cp_version(void) { return CHATPARSE_VERSION_STRING; }

void cp_tables_free(cp_tables *t) {
    if (!t) return;
    cp_value_free(t->spec);
    cp_value_free(t->metadata);
    for (size_t i = 0; i < t->n_arrays; i++) free(t->arrays[i].name);
    free(t->arrays);
    free(t->patterns);
    for (size_t i = 0; i < t->n_modes; i++) free(t->modes[i].watched);
    free(t->modes);
    free(t->data);
    free(t);
}

cp_tables *cp_tables_load(const uint8_t *bytes, size_t n, cp_error *err) {
    /* The context lives on the heap and only this pointer (never changed after setjmp) is read after a
     * longjmp: no automatic variable of this function is modified between setjmp and longjmp (C11 7.13.2.1). */
    ctx *const c = calloc(1, sizeof *c);
    if (!c) { cp_error_oom(err); return NULL; }
    c->err = err;
    if (!c->err) {
        c->err = calloc(1, sizeof *c->err);   /* (the caller does not want the message) */
        if (!c->err) { free(c); return NULL; }
    }
    c->bytes = bytes;
    c->n = bytes ? n : 0;
    c->t = calloc(1, sizeof *c->t);
    if (!c->t) {
        cp_error_oom(c->err);
        if (!err) free(c->err);
        free(c);
        return NULL;
    }
    cp_tables *result = NULL;
    if (setjmp(c->jb) == 0) {
        if (!bytes && n) fail(c, "0 bytes is too short to be a table file (truncated?)");
        load(c);
        result = c->t;
    } else {
        cp_tables_free(c->t);
    }
    free_tmp(c);
    if (!err) free(c->err);
    free(c);
    return result;
}

const cp_array *cp_tables_array(const cp_tables *t, const char *name) {
    for (size_t i = 0; i < t->n_arrays; i++)
        if (t->arrays[i].name_len == strlen(name) && !memcmp(t->arrays[i].name, name, t->arrays[i].name_len))
            return &t->arrays[i];
    return NULL;
}

const cp_value *cp_tables_field(const cp_tables *t, size_t i) {
    return cp_list_get(cp_object_get_cstr(t->spec, "fields"), i);
}

size_t cp_tables_n_fields(const cp_tables *t) { return cp_list_len(cp_object_get_cstr(t->spec, "fields")); }
