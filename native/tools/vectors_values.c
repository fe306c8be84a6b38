/*
 * vectors_values.c - the "values" conformance vectors (tests/vectors/values.json, tests/make_vectors.py
 * value_cases) run through the C value layer, as js/run_vectors.mjs runs them:
 *
 *   {"parser", "args", "text", "expect" | "error"}  -> cp_values_parse_content(text, parser, args)
 *   {"coerce", "types", "expect" | "error"}         -> cp_values_coerce(coerce, types)
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

void cp_vectors_values(cp_vectors_run *run, const char *file, const cp_value *vec) {
    const cp_value *cases = cp_object_get_cstr(vec, "cases");
    for (size_t i = 0; i < cp_list_len(cases); i++) {
        const cp_value *c = cp_list_get(cases, i);
        const cp_value *parser = cp_object_get_cstr(c, "parser");
        const cp_value *raw = parser ? cp_object_get_cstr(c, "text") : cp_object_get_cstr(c, "coerce");
        if (cp_type_of(c) != CP_OBJECT || cp_type_of(raw) != CP_STRING) {
            cp_vectors_fail(run, "%s[%zu]: not a values case", file, i);
            continue;
        }
        size_t n;
        const char *text = cp_string_bytes(raw, &n);
        cp_error err = {0};
        cp_value *got = parser ? cp_values_parse_content(text, n, parser, cp_object_get_cstr(c, "args"), NULL, &err)
                               : cp_values_coerce(text, n, cp_object_get_cstr(c, "types"), &err);
        const cp_value *want_err = cp_object_get_cstr(c, "error");
        char what[64];
        snprintf(what, sizeof what, "%s[%zu]", file, i);
        if (want_err) {
            if (!got && cp_string_equals(want_err, err.exception)) cp_vectors_pass(run, what);
            else {
                char *g = show(got);
                cp_vectors_fail(run, "%s: expected %s, got %s%s%s", what, cp_string_bytes(want_err, NULL),
                                got ? "the value " : err.exception, got ? (g ? g : "?") : ": ", got ? "" : err.message);
                free(g);
            }
        } else {
            cp_value *want = decode(cp_object_get_cstr(c, "expect"));
            if (got && want && same(got, want)) cp_vectors_pass(run, what);
            else {
                char *g = show(got), *w = show(want);
                cp_vectors_fail(run, "%s: expected %s, got %s%s%s", what, w ? w : "?", got ? (g ? g : "?") : err.exception,
                                got ? "" : ": ", got ? "" : err.message);
                free(g);
                free(w);
            }
            cp_value_free(want);
        }
        cp_value_free(got);
    }
}
