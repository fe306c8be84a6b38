/* value_check.c - CTest "value-model": the guarantees of value.h that JSON round trips do not reach (object
 * order after pop and re-insert across the hash index, Python equality, int normalization, code points).
 * Prints each failed check and exits 1 if any failed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "value.h"

static int failures = 0;
#define CHECK(cond)                                                     \
    do {                                                                \
        if (!(cond)) {                                                  \
            printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);      \
            failures++;                                                 \
        }                                                               \
    } while (0)

static char *dump(const cp_value *v) {
    cp_json_dump_options o = cp_json_dump_compact();
    return cp_json_dump(v, &o, NULL);
}

static int dumps_as(const cp_value *v, const char *want) {
    char *d = dump(v);
    int ok = d && strcmp(d, want) == 0;
    if (!ok) printf("  got %s, want %s\n", d ? d : "(null)", want);
    free(d);
    return ok;
}

int main(void) {
    /* insertion order, replacement in place, pop then set goes last, across the hash index (> 8 keys) */
    cp_value *o = cp_object();
    char key[16];
    for (int i = 0; i < 20; i++) {
        snprintf(key, sizeof key, "k%d", i);
        CHECK(cp_object_set_cstr(o, key, cp_int(i)) == 0);
    }
    CHECK(cp_object_set_cstr(o, "k3", cp_string_cstr("three")) == 0);
    CHECK(cp_object_len(o) == 20);
    CHECK(cp_string_equals(cp_object_get_cstr(o, "k3"), "three"));
    CHECK(strcmp(cp_object_at(o, 3)->key, "k3") == 0);
    cp_value *p = cp_object_pop(o, "k5", 2);
    CHECK(p && cp_int_value(p) == 5);
    cp_value_free(p);
    CHECK(cp_object_get_cstr(o, "k5") == NULL && cp_object_len(o) == 19);
    CHECK(cp_object_get_cstr(o, "k19") && cp_int_value(cp_object_get_cstr(o, "k19")) == 19);
    CHECK(cp_object_set_cstr(o, "k5", cp_null()) == 0);
    CHECK(strcmp(cp_object_at(o, 19)->key, "k5") == 0);
    for (int i = 0; i < 15; i++) {   /* shrink below the linear threshold and look up again */
        snprintf(key, sizeof key, "k%d", i);
        cp_value_free(cp_object_pop(o, key, strlen(key)));
    }
    CHECK(cp_object_len(o) == 5);
    CHECK(dumps_as(o, "{\"k15\":15,\"k16\":16,\"k17\":17,\"k18\":18,\"k19\":19}"));
    CHECK(cp_object_pop(o, "nope", 4) == NULL);
    cp_value *c = cp_value_copy(o);
    CHECK(cp_value_equal(c, o) && cp_value_py_equal(c, o));
    cp_value_free(c);
    cp_value_free(o);

    /* keys with a NUL are whole keys */
    o = cp_object();
    CHECK(cp_object_set(o, "a\0b", 3, cp_int(1)) == 0);
    CHECK(cp_object_get(o, "a", 1) == NULL && cp_object_get(o, "a\0b", 3) != NULL);
    cp_value_free(o);

    /* ints: int64 range kept, beyond it canonical decimal text */
    cp_value *i = cp_int_from_text("-0009223372036854775808", 23);
    CHECK(cp_type_of(i) == CP_INT && cp_int_value(i) == INT64_MIN);
    cp_value_free(i);
    i = cp_int_from_text("9223372036854775808", 19);
    CHECK(cp_type_of(i) == CP_BIGINT && dumps_as(i, "9223372036854775808"));
    cp_value_free(i);
    i = cp_int_from_text("-000", 4);
    CHECK(cp_type_of(i) == CP_INT && cp_int_value(i) == 0);
    cp_value_free(i);
    CHECK(cp_int_from_text("1x", 2) == NULL && cp_int_from_text("-", 1) == NULL && cp_int_from_text("", 0) == NULL);

    /* Python equality: True == 1 == 1.0, NaN != NaN; strict equality tells them apart */
    cp_value *t = cp_bool(1), *one = cp_int(1), *f1 = cp_float(1.0), *nan = cp_float(NAN);
    CHECK(cp_value_py_equal(t, one) && cp_value_py_equal(one, f1) && cp_value_py_equal(t, f1));
    CHECK(!cp_value_equal(t, one) && !cp_value_equal(one, f1));
    CHECK(!cp_value_py_equal(nan, nan) && cp_value_equal(nan, nan));
    cp_value *big = cp_int_from_text("100000000000000000000", 21), *fbig = cp_float(1e20);
    CHECK(cp_value_py_equal(big, fbig) && !cp_value_equal(big, fbig));
    cp_value_free(t); cp_value_free(one); cp_value_free(f1); cp_value_free(nan); cp_value_free(big); cp_value_free(fbig);

    /* dict equality ignores order in Python's sense only */
    cp_value *a = cp_json_parse("{\"x\":1,\"y\":2}", 13, NULL), *b = cp_json_parse("{\"y\":2,\"x\":1}", 13, NULL);
    CHECK(a && b && cp_value_py_equal(a, b) && !cp_value_equal(a, b));
    cp_value_free(a); cp_value_free(b);

    /* code points: a lone surrogate is one, a pair escaped in JSON joins into one */
    const char *js = "\"a\\ud800\\ud83d\\ude00\"";
    cp_value *s = cp_json_parse(js, strlen(js), NULL);
    CHECK(s && cp_string_length(s) == 3);
    cp_json_dump_options d = cp_json_dump_defaults();
    char *txt = cp_json_dump(s, &d, NULL);
    CHECK(txt && strcmp(txt, "\"a\\ud800\\ud83d\\ude00\"") == 0);
    free(txt);
    cp_value_free(s);
    size_t pos = 0;
    CHECK(cp_utf8_decode("\xED\xA0\x80", 3, &pos, 1) == 0xD800 && pos == 3);
    pos = 0;
    CHECK(cp_utf8_decode("\xED\xA0\x80", 3, &pos, 0) == -1 && pos == 1);
    pos = 0;
    CHECK(cp_utf8_decode("\xC0\x80", 2, &pos, 1) == -1);
    CHECK(cp_utf8_first_invalid("ab\xE2\x82", 4) == 2 && cp_utf8_first_invalid("ok", 2) == (size_t)-1);

    /* errors: Python's class and message */
    cp_error err = {0};
    CHECK(cp_json_parse("", 0, &err) == NULL && strcmp(err.exception, "JSONDecodeError") == 0 &&
          strcmp(err.message, "Expecting value: line 1 column 1 (char 0)") == 0);
    cp_error err2 = {0};
    CHECK(cp_json_parse("[\"\xC3\xA9\", x]", 9, &err2) == NULL &&
          strcmp(err2.message, "Expecting value: line 1 column 7 (char 6)") == 0);

    /* float repr */
    char r[32];
    struct { double d; const char *s; } fr[] = {{1e16, "1e+16"}, {1e-5, "1e-05"}, {1.0, "1.0"}, {0.1, "0.1"},
                                                {-0.0, "-0.0"}, {1e15, "1000000000000000.0"}, {INFINITY, "inf"},
                                                {5e-324, "5e-324"}, {123456789.125, "123456789.125"}};
    for (size_t k = 0; k < sizeof fr / sizeof fr[0]; k++) {
        cp_float_repr(fr[k].d, r);
        if (strcmp(r, fr[k].s) != 0) printf("  repr %s, want %s\n", r, fr[k].s);
        CHECK(strcmp(r, fr[k].s) == 0);
    }

    /* wrong types give defaults, not crashes */
    CHECK(cp_list_len(NULL) == 0 && cp_list_get(NULL, 0) == NULL && cp_object_get_cstr(NULL, "x") == NULL);
    CHECK(cp_list_append(NULL, cp_null()) == -1 && cp_object_set_cstr(NULL, "x", cp_null()) == -1);

    printf("%s\n", failures ? "value-model: FAILED" : "value-model: all checks pass");
    return failures ? 1 : 0;
}
