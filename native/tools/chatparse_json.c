/*
 * chatparse-json - Python's json.loads / json.dumps as libchatparse does them (value.h), for
 * tests/test_native_json.py to compare with Python.
 *
 * stdin: records "<byte length>\n<bytes>" (a JSON text as generalized UTF-8). stdout, per record: either
 * "E <ExceptionClass>: <message>\n" (cp_json_parse refused it) or two lines, "O <json.dumps(v)>\n" and
 * "C <json.dumps(v, separators=(',', ':'), ensure_ascii=False)>\n", then "S <json.dumps(v, sort_keys=True,
 * indent=1)>\n". A deep copy must compare equal (cp_value_equal) and Python-equal to the original, else
 * "COPYDIFF" is printed. Exit status 2 on malformed input.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "value.h"

int main(void) {
    cp_buf in = {0};
    char chunk[65536];
    size_t k;
    while ((k = fread(chunk, 1, sizeof chunk, stdin)) > 0) cp_buf_append(&in, chunk, k);
    if (in.failed) return 2;
    size_t i = 0;
    while (i < in.len) {
        char *nl = memchr(in.data + i, '\n', in.len - i);
        if (!nl) return 2;
        size_t len = strtoull(in.data + i, NULL, 10);
        i = (size_t)(nl - in.data) + 1;
        if (len > in.len - i) return 2;
        cp_error err = {0};
        cp_value *v = cp_json_parse(in.data + i, len, &err);
        i += len;
        if (!v) {
            printf("E %s: %s\n", err.exception, err.message);
            continue;
        }
        cp_json_dump_options o = cp_json_dump_defaults();
        size_t n;
        char *a = cp_json_dump(v, &o, &n);
        printf("O ");
        fwrite(a, 1, n, stdout);
        free(a);
        o = cp_json_dump_compact();
        a = cp_json_dump(v, &o, &n);
        printf("\nC ");
        fwrite(a, 1, n, stdout);
        free(a);
        o = cp_json_dump_defaults();
        o.sort_keys = 1;
        o.indent = 1;
        a = cp_json_dump(v, &o, &n);
        /* (newlines of the indented form escaped so a record stays one line) */
        printf("\nS ");
        for (size_t j = 0; j < n; j++) {
            if (a[j] == '\n') fputs("\\n", stdout);
            else putchar(a[j]);
        }
        putchar('\n');
        free(a);
        cp_value *c = cp_value_copy(v);
        if (!cp_value_equal(c, v) || !cp_value_py_equal(c, v)) {
            /* NaN is not Python-equal to itself: only strict equality is required then */
            if (!cp_value_equal(c, v)) printf("COPYDIFF\n");
        }
        cp_value_free(c);
        cp_value_free(v);
    }
    cp_buf_free(&in);
    return 0;
}
