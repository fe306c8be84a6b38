/*
 * vectors_values.c - the "values" conformance vectors (tests/vectors/values.json, tests/make_vectors.py
 * value_cases) run through the C value layer, as js/run_vectors.mjs runs them:
 *
 *   {"parser", "args", "text", "expect" | "error"}  -> cp_values_parse_content(text, parser, args)
 *   {"coerce", "types", "expect" | "error"}         -> cp_values_coerce(coerce, types)
 *
 * The Python test (tests/test_native_values.py) also writes cases of its own, made by the Python reference at test
 * time, of these kinds (each "expect" | "error" [, "message": compared word for word when given]):
 *
 *   {"python_calls": text}  {"json_values": text}            -> the extension parsers
 *   {"json_end": text, "expect": J in code points | null}   -> JsonEnd fed whole, byte by byte and in 3-byte
 *                                                               pieces (all three must agree)
 *   {"make": {"field", "body", "captures"[, "tools"]}, "regex": {pattern: translation}}
 *                                                           -> cp_values_make (cp_values_region with tools), the
 *                                                              content regexes run by regex.h
 *
 * A case passes when the value is the expected one (strictly: same types - int is not float, bool is not int -,
 * NaN equals NaN, 0.0 and -0.0 differ, dict keys in the same order) or when both fail with the same Python
 * exception class. Expected values spell what JSON cannot as {"$py": "float", "v": "nan"|"inf"|"-inf"} and
 * {"$py": "int", "v": "<digits>"} (make_vectors.encode).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "regex.h"
#include "values.h"
#include "vectors.h"

/* The expected value with the $py spellings decoded (a new value; NULL on allocation failure). */
static cp_value *decode(const cp_value *v) {
    if (cp_type_of(v) == CP_LIST) {
        cp_value *out = cp_list();
        for (size_t i = 0; out && i < cp_list_len(v); i++)
            if (cp_list_append(out, decode(cp_list_get(v, i))) < 0) { cp_value_free(out); return NULL; }
        return out;
    }
    if (cp_type_of(v) == CP_OBJECT) {
        const cp_value *py = cp_object_get_cstr(v, "$py"), *x = cp_object_get_cstr(v, "v");
        if (cp_object_len(v) == 2 && py && x && cp_type_of(x) == CP_STRING) {
            size_t n;
            const char *s = cp_string_bytes(x, &n);
            if (cp_string_equals(py, "float"))
                return cp_float(strcmp(s, "nan") == 0 ? NAN : strcmp(s, "inf") == 0 ? INFINITY : -INFINITY);
            return cp_int_from_text(s, n);
        }
        cp_value *out = cp_object();
        for (size_t i = 0; out && i < cp_object_len(v); i++) {
            const cp_member *m = cp_object_at(v, i);
            if (cp_object_set(out, m->key, m->key_len, decode(m->value)) < 0) { cp_value_free(out); return NULL; }
        }
        return out;
    }
    return cp_value_copy(v);
}

/* strict equality (see the file's comment) */
static int same(const cp_value *a, const cp_value *b) {
    if (cp_type_of(a) != cp_type_of(b)) return 0;
    switch (cp_type_of(a)) {
    case CP_NULL: return 1;
    case CP_BOOL: return cp_bool_value(a) == cp_bool_value(b);
    case CP_INT: return cp_int_value(a) == cp_int_value(b);
    case CP_FLOAT: {
        double x = cp_float_value(a), y = cp_float_value(b);
        if (isnan(x) || isnan(y)) return isnan(x) && isnan(y);
        return x == y && signbit(x) == signbit(y);
    }
    case CP_BIGINT: case CP_STRING: {
        size_t n, m;
        const char *s = cp_string_bytes(a, &n), *t = cp_string_bytes(b, &m);
        return n == m && memcmp(s, t, n) == 0;
    }
    case CP_LIST:
        if (cp_list_len(a) != cp_list_len(b)) return 0;
        for (size_t i = 0; i < cp_list_len(a); i++)
            if (!same(cp_list_get(a, i), cp_list_get(b, i))) return 0;
        return 1;
    case CP_OBJECT:
        if (cp_object_len(a) != cp_object_len(b)) return 0;
        for (size_t i = 0; i < cp_object_len(a); i++) {
            const cp_member *x = cp_object_at(a, i), *y = cp_object_at(b, i);
            if (x->key_len != y->key_len || memcmp(x->key, y->key, x->key_len) != 0 || !same(x->value, y->value)) return 0;
        }
        return 1;
    }
    return 0;
}

static char *show(const cp_value *v) {
    cp_json_dump_options o = cp_json_dump_compact();
    char *s = v ? cp_json_dump(v, &o, NULL) : NULL;
    if (s && strlen(s) > 160) strcpy(s + 157, "...");
    return s;
}

/* ---- the regex hook of the "make" cases: translations given by the case, run by the engine's regex.h ---- */

typedef struct rx_hook {
    const cp_value *translations;   /* pattern -> translation */
} rx_hook;

typedef struct rx_each {
    const cp_rx *rx;
    int (*on_match)(void *arg, const cp_vmatch *m);
    void *arg;
} rx_each;

static int rx_group(const cp_vmatch *m, const char *name, size_t *s, size_t *e) {
    const rx_each *x = ((const void *const *)m->impl)[0];
    const cp_rx_match *rm = ((const void *const *)m->impl)[1];
    return cp_rx_group_span(x->rx, rm, name, s, e);
}

static int rx_each_fn(void *ctx, const cp_rx_match *rm) {
    rx_each *x = ctx;
    const void *impl[2] = {x, rm};
    cp_vmatch m = {rm->start, rm->end, rx_group, impl};
    return x->on_match(x->arg, &m) ? 2 : 0;
}

static int rx_finditer(void *ctx, const cp_value *pattern, const char *text, size_t len,
                       int (*on_match)(void *arg, const cp_vmatch *m), void *arg, cp_error *err) {
    rx_hook *h = ctx;
    if (cp_type_of(pattern) != CP_STRING) {
        cp_error_set(err, "TypeError", "first argument must be a string or compiled pattern");
        return -1;
    }
    size_t pn;
    const char *ps = cp_string_bytes(pattern, &pn);
    const cp_value *t = cp_object_get(h->translations, ps, pn);
    const cp_value *terr = cp_object_get_cstr(t, "error");
    if (!t || terr) {
        const char *why = terr ? cp_string_bytes(terr, NULL) : "the case has no translation of this pattern";
        cp_error_set(err, why && strncmp(why, "invalid regex", 13) == 0 ? "error" : "ValueError", "%s", why ? why : "?");
        return -1;
    }
    cp_rx *rx = cp_rx_compile(t, "content pattern", err);
    if (!rx) return -1;
    cp_rx_match m;
    cp_rx_match_init(&m);
    rx_each x = {rx, on_match, arg};
    int r = cp_rx_finditer(rx, text, len, &m, rx_each_fn, &x, err);
    cp_rx_match_fini(&m);
    cp_rx_free(rx);
    return r == 0 ? 0 : -1;
}

/* ---- json_end cases: where the value ends, fed whole, byte by byte and in 3-byte pieces ---- */

static long long json_end_run(const char *s, size_t n, size_t piece) {
    cp_json_end je;
    cp_json_end_init(&je, 0);
    for (size_t at = 0; at < n && cp_json_end_status(&je) == 0; at += piece) {
        size_t upto = at + piece < n ? at + piece : n;
        cp_json_end_advance(&je, s, 0, upto);
    }
    cp_json_end_finish(&je);
    if (cp_json_end_status(&je) != 1) return -1;
    return je.end;
}

static size_t cps(const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xC0) != 0x80;
    return k;
}

/* One case's outcome: a value, or an error. */
static cp_value *run_case(const cp_value *c, cp_error *err, const char **kind) {
    const cp_value *x;
    size_t n;
    if ((x = cp_object_get_cstr(c, "parser"))) {
        *kind = "parser";
        const char *text = cp_string_bytes(cp_object_get_cstr(c, "text"), &n);
        return cp_values_parse_content(text, n, x, cp_object_get_cstr(c, "args"), NULL, err);
    }
    if ((x = cp_object_get_cstr(c, "coerce"))) {
        *kind = "coerce";
        const char *text = cp_string_bytes(x, &n);
        return cp_values_coerce(text, n, cp_object_get_cstr(c, "types"), err);
    }
    if ((x = cp_object_get_cstr(c, "python_calls"))) {
        *kind = "python_calls";
        const char *text = cp_string_bytes(x, &n);
        return cp_values_python_calls(text, n, err);
    }
    if ((x = cp_object_get_cstr(c, "json_values"))) {
        *kind = "json_values";
        const char *text = cp_string_bytes(x, &n);
        return cp_values_json_values(text, n, err);
    }
    if ((x = cp_object_get_cstr(c, "json_end"))) {
        *kind = "json_end";
        const char *text = cp_string_bytes(x, &n);
        long long a = json_end_run(text, n, n ? n : 1), b = json_end_run(text, n, 1), d = json_end_run(text, n, 3);
        if (a != b || a != d) {
            cp_error_set(err, "SplitError", "the end depends on the feeding: %lld, %lld, %lld", a, b, d);
            return NULL;
        }
        return a < 0 ? cp_null() : cp_int((int64_t)cps(text, (size_t)a));
    }
    if ((x = cp_object_get_cstr(c, "make"))) {
        *kind = "make";
        rx_hook h = {cp_object_get_cstr(c, "regex")};
        cp_vregex rx = {&h, rx_finditer};
        cp_values_env env = {.regex = &rx};
        const cp_value *field = cp_object_get_cstr(x, "field"), *captures = cp_object_get_cstr(x, "captures");
        const char *body = cp_string_bytes(cp_object_get_cstr(x, "body"), &n);
        const cp_value *tools = cp_object_get_cstr(x, "tools");
        if (!tools) return cp_values_make(body, n, field, captures, &env, err);
        cp_value *params = cp_values_tool_params(tools, err);
        if (!params) return NULL;
        cp_value *v = cp_values_region(body, n, field, captures, params, &env, err);
        cp_value_free(params);
        return v;
    }
    *kind = NULL;
    return NULL;
}

void cp_vectors_values(cp_vectors_run *run, const char *file, const cp_value *vec) {
    const cp_value *cases = cp_object_get_cstr(vec, "cases");
    for (size_t i = 0; i < cp_list_len(cases); i++) {
        const cp_value *c = cp_list_get(cases, i);
        cp_error err = {0};
        const char *kind = NULL;
        cp_value *got = cp_type_of(c) == CP_OBJECT ? run_case(c, &err, &kind) : NULL;
        char what[64];
        snprintf(what, sizeof what, "%s[%zu]", file, i);
        if (!kind) {
            cp_vectors_fail(run, "%s: not a values case", what);
            continue;
        }
        const cp_value *want_err = cp_object_get_cstr(c, "error");
        const cp_value *want_msg = cp_object_get_cstr(c, "message");   /* (extra cases only: compared when given) */
        if (want_err) {
            /* (a message longer than cp_error holds is cut: then its start must be the expected one's) */
            size_t mn = 0;
            const char *ms = want_msg ? cp_string_bytes(want_msg, &mn) : NULL;
            int msg_ok = !want_msg || cp_string_equals(want_msg, err.message) ||
                         (err.truncated && strlen(err.message) <= mn && strncmp(ms, err.message, strlen(err.message)) == 0);
            if (!got && cp_string_equals(want_err, err.exception) && msg_ok)
                cp_vectors_pass(run, what);
            else {
                char *g = show(got);
                cp_vectors_fail(run, "%s (%s): expected %s%s%s, got %s%s%s", what, kind, cp_string_bytes(want_err, NULL),
                                want_msg ? ": " : "", want_msg ? cp_string_bytes(want_msg, NULL) : "",
                                got ? "the value " : err.exception, got ? (g ? g : "?") : ": ", got ? "" : err.message);
                free(g);
            }
        } else {
            cp_value *want = decode(cp_object_get_cstr(c, "expect"));
            if (got && want && same(got, want)) cp_vectors_pass(run, what);
            else {
                char *g = show(got), *w = show(want);
                cp_vectors_fail(run, "%s (%s): expected %s, got %s%s%s", what, kind, w ? w : "?",
                                got ? (g ? g : "?") : err.exception, got ? "" : ": ", got ? "" : err.message);
                free(g);
                free(w);
            }
            cp_value_free(want);
        }
        cp_value_free(got);
    }
}
