/*
 * values_oom.c - allocation-failure check of the value layer (native/src/values*.c).
 *
 * For each operation below, fails its 1st, 2nd, 3rd, ... allocation in turn (malloc, calloc and realloc are
 * wrapped at link time) until a run completes with no failure injected, and checks that every run with a failed
 * allocation ends in MemoryError, never another error, a crash or a leak. Build against the library with the
 * wrappers and a leak checker (tests/test_native_values.py does):
 *
 *   cc -std=c11 -fsanitize=address -Inative/src -Inative/include native/tools/values_oom.c \
 *      build/native-values/libchatparse.a -lpcre2-8 -lm -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc
 *
 * Prints "N allocation points" per operation and "ok" at the end; exit status 1 on a wrong error (and
 * LeakSanitizer's status on a leak).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "values.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t a, size_t b);
void *__real_realloc(void *p, size_t n);

static long countdown = -1;   /* allocations to let through before the failure; -1 none; -2 the failure came */

static int fail_now(void) {
    if (countdown < 0) return 0;
    if (countdown == 0) { countdown = -2; return 1; }
    countdown--;
    return 0;
}
void *__wrap_malloc(size_t n) { return fail_now() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t a, size_t b) { return fail_now() ? NULL : __real_calloc(a, b); }
void *__wrap_realloc(void *p, size_t n) { return fail_now() ? NULL : __real_realloc(p, n); }

static cp_value *J(const char *s) {
    long saved = countdown;
    countdown = -1;
    cp_value *v = cp_json_parse(s, strlen(s), NULL);
    countdown = saved;
    if (!v) { fprintf(stderr, "bad JSON in the check itself: %s\n", s); exit(2); }
    return v;
}

typedef struct op {
    const char *kind;     /* make (+ type) | region (make and type in one, shared objects) | parse | coerce |
                             pycalls | jsonvalues */
    const char *spec;     /* make: field JSON; parse: [name, args] JSON; coerce: types JSON */
    const char *text;     /* the body */
} op;

static const op OPS[] = {
    {"make", "{\"name\":\"tool_calls\",\"content\":\"json\",\"content_args\":{\"string_delims\":[[\"<s>\",\"</s>\"]],"
             "\"unquoted_keys\":true},\"as_list\":true,\"key_aliases\":{\"parameters\":\"arguments\"},"
             "\"transform\":{\"type\":\"function\",\"function\":{\"name\":\"{name}\",\"arguments\":\"{arguments}\"}},"
             "\"transform_each\":true,\"decode_json_strings\":[\"function.arguments\"],\"argument_types\":\"schema\"}",
     "[{name: \"f\",parameters: \"{\\\"i\\\": \\\"2\\\", \\\"s\\\": 3}\"}, "
     "{\"name\": \"f\", \"arguments\": {\"l\": [\"1\", \"x\"], \"s\": <s>\xc3\xa9</s>}}]"},
    {"make", "{\"name\":\"c\",\"content\":\"kv-lines\",\"content_args\":{\"value_parser\":{\"name\":\"json\","
             "\"args\":{\"allow_non_json\":true}}},\"escaped_json_values\":true,\"transform\":{\"type\":\"function\","
             "\"function\":{\"name\":\"f\",\"arguments\":\"{content}\"}},\"argument_types\":\"schema\"}",
     "i: 10\ns: [\\\"x\\\"]\nl: 2.0\nb: TRUE\nz: 1e999"},
    {"make", "{\"name\":\"c\",\"content\":\"python-calls\",\"content_args\":{},\"transform\":{\"type\":\"function\","
             "\"function\":{\"name\":\"{name}\",\"arguments\":\"{arguments}\"}},\"transform_each\":true}",
     "[f(i='1', s=\"\\u00e9\", l=[1, 0x1F, 2.5e3, {'k': (1, 2)}]), g(x=-12345678901234567890)]"},
    {"make", "{\"name\":\"c\",\"content\":\"json-values\",\"content_args\":{},"
             "\"content_fallback\":[{\"content\":\"int\",\"content_args\":{}}]}",
     " {\"a\": [1, 2, {\"b\": null}]}, \"s\", 1.5e300 "},
    {"make", "{\"name\":\"c\",\"content\":\"json\",\"content_args\":{},\"transform\":{\"v\":\"{content.a.b}\"}}",
     "{\"a\": {\"c\": 1, \"d\": 2}}"},
    {"make", "{\"name\":\"c\",\"content\":\"json\",\"content_args\":{},\"transform\":{\"id\":\"{id}\",\"n\":\"{name}\"},"
             "\"optional_placeholders\":[\"id\"]}", "{}"},
    {"region", "{\"name\":\"t\",\"content\":\"json\",\"content_args\":{},\"transform\":{\"type\":\"function\","
               "\"function\":{\"name\":\"{name}\",\"arguments\":\"{arguments}\"},\"raw\":\"{arguments}\"},"
               "\"transform_each\":true,\"decode_json_strings\":[\"function.arguments\",\"raw.x\"]}",
     "[{\"name\": \"f\", \"arguments\": {\"i\": \"1\", \"x\": \"{\\\"k\\\": 2}\", \"l\": [\"3\", 4]}}, "
     "{\"name\": \"f\", \"arguments\": \"{\\\"i\\\": \\\"5\\\"}\"}]"},
    {"region", "{\"name\":\"t\",\"content\":\"json\",\"content_args\":{},\"argument_types\":\"schema\","
               "\"transform\":[{\"function\":\"{content}\"},{\"function\":\"{content}\"},\"{content.arguments}\"]}",
     "{\"name\": \"f\", \"arguments\": {\"i\": \"1\", \"s\": 2, \"l\": \"7\"}}"},
    {"parse", "[\"json\", {\"string_delims\": [[\"\", \"\"]], \"allow_non_json\": true}]", "ab{c}"},
    {"parse", "[\"json\", {\"string_delims\": [[\"<\", \">\"], [\"[\", \"]\"]], \"unquoted_keys\": 1}]", "{a:<x>,b:[y]}"},
    {"parse", "[\"json\", {}]", "{\"a\": bad}"},
    {"parse", "[\"kv-lines\", {\"line_sep\": null, \"value_parser\": {\"name\": \"int\"}}]", "a:1 b:x"},
    {"parse", "[\"kv-lines\", {\"value_parser\": {\"name\": \"json\"}}]", "a: [1, {\"b\": 2}]\nc: 1e5"},
    {"parse", "[\"int\", {}]", "  \xd9\xa3\xd9\xa4 "},
    {"parse", "[\"int\", {}]", "forty-two and a long text to repr"},
    {"parse", "[\"float\", {}]", "x1.5"},
    {"coerce", "[\"integer\", \"object\", \"number\"]", "1e30"},
    {"coerce", "[\"array\", \"boolean\"]", "[1, {\"a\": [2]}]"},
    {"pycalls", "", "f(a='x' 'y', b=None), g.h(c=[1, 2.5, -3], d={'k': 1e999})\n"},
    {"pycalls", "", "f(a=1, a=2)"},
    {"jsonvalues", "", "{\"a\": 1}, [2, 3], \"x\""},
    {"jsonvalues", "", "1 2"},
};

static const char *TOOLS =
    "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"properties\":{\"i\":{\"type\":\"integer\"},"
    "\"s\":{\"type\":\"string\"},\"l\":{\"type\":\"integer\"},\"b\":{\"type\":\"boolean\"},"
    "\"z\":{\"anyOf\":[{\"type\":\"null\"},{\"type\":\"number\"}]}}}}}]";

static cp_value *run(const op *o, const cp_value *spec, const cp_value *tools, cp_error *e) {
    size_t n = strlen(o->text);
    if (strcmp(o->kind, "make") == 0) {
        cp_value *params = cp_values_tool_params(tools, e);
        if (!params) return NULL;
        cp_value *v = cp_values_make(o->text, n, spec, NULL, NULL, e);
        if (v) v = cp_values_type(v, o->text, n, spec, NULL, params, NULL, e);
        cp_value_free(params);
        return v;
    }
    if (strcmp(o->kind, "region") == 0) {
        cp_value *params = cp_values_tool_params(tools, e);
        if (!params) return NULL;
        cp_value *v = cp_values_region(o->text, n, spec, NULL, params, NULL, e);
        cp_value_free(params);
        return v;
    }
    if (strcmp(o->kind, "parse") == 0)
        return cp_values_parse_content(o->text, n, cp_list_get(spec, 0), cp_list_get(spec, 1), NULL, e);
    if (strcmp(o->kind, "coerce") == 0) return cp_values_coerce(o->text, n, spec, e);
    if (strcmp(o->kind, "pycalls") == 0) return cp_values_python_calls(o->text, n, e);
    return cp_values_json_values(o->text, n, e);
}

int main(void) {
    int bad = 0;
    cp_value *tools = J(TOOLS);
    for (size_t i = 0; i < sizeof OPS / sizeof OPS[0]; i++) {
        const op *o = &OPS[i];
        cp_value *spec = o->spec[0] ? J(o->spec) : NULL;
        long k;
        for (k = 0;; k++) {
            countdown = k;
            cp_error e = {0};
            cp_value *v = run(o, spec, tools, &e);
            int injected = countdown == -2;
            countdown = -1;
            if (injected && (v || strcmp(e.exception, "MemoryError") != 0)) {
                printf("op %zu, allocation %ld failed: %s %s: %s\n", i, k, v ? "a value" : "error", e.exception,
                       e.message);
                bad = 1;
            }
            int got = v != NULL;
            cp_value_free(v);
            if (!injected) {
                printf("op %zu (%s): %ld allocation points, then %s%s\n", i, o->kind, k, got ? "a value" : "error ",
                       got ? "" : e.exception);
                break;
            }
        }
        cp_value_free(spec);
    }
    cp_value_free(tools);
    puts(bad ? "FAILED" : "ok");
    return bad;
}
