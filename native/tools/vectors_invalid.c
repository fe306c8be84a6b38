/* vectors_invalid.c - kind "invalid" (tests/vectors/invalid/): the loader
 * must refuse the vector's table file with exactly the vector's error (a
 * ValueError whose message is "error"), as js/run_vectors.mjs checks. */
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "chatparse.h"
#include "vectors.h"

void cp_vectors_invalid(cp_vectors_run *run, const char *file, const cp_value *vec) {
    const cp_value *tables = cp_object_get_cstr(vec, "tables");
    const cp_value *want = cp_object_get_cstr(vec, "error");
    if (cp_type_of(tables) != CP_STRING || cp_type_of(want) != CP_STRING) {
        cp_vectors_fail(run, "%s: not an invalid-file vector (needs \"tables\" and \"error\" strings)", file);
        return;
    }
    size_t n;
    unsigned char *bytes = cp_vectors_read(run, cp_string_bytes(tables, NULL), &n);
    if (!bytes) {
        cp_vectors_fail(run, "%s: cannot read %s", file, cp_string_bytes(tables, NULL));
        return;
    }
    cp_error err = {0};
    cp_tables *t = cp_tables_load(bytes, n, &err);
    free(bytes);
    /* got: the message of a ValueError, else "<Class>: <message>", or "loaded" */
    cp_buf got = {0};
    if (t) {
        cp_tables_free(t);
        cp_buf_puts(&got, "loaded");
    } else if (strcmp(err.exception, "ValueError") == 0) {
        cp_buf_puts(&got, err.message);
    } else {
        cp_buf_printf(&got, "%s: %s", err.exception, err.message);
    }
    char *g = cp_buf_take(&got, NULL);
    size_t wl;
    const char *w = cp_string_bytes(want, &wl);
    if (g && strlen(g) == wl && memcmp(g, w, wl) == 0) {
        cp_vectors_pass(run, file);
    } else {
        /* both shown as JSON strings */
        cp_value *gv = cp_string_cstr(g ? g : "(out of memory)");
        cp_json_dump_options o = cp_json_dump_defaults();
        char *gj = cp_json_dump(gv, &o, NULL), *wj = cp_json_dump(want, &o, NULL);
        cp_vectors_fail(run, "%s: %.300s != %s", file, gj ? gj : "?", wj ? wj : "?");
        free(gj);
        free(wj);
        cp_value_free(gv);
    }
    free(g);
}
