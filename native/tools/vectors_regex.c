/*
 * vectors_regex.c - the regex vectors (tests/vectors/regex.json, kind "regex"):
 * each pattern's port-section translation run through native/src/regex.c with
 * Python's finditer semantics, compared case by case with Python's own
 * results [[start, end, groupdict], ...] (spans in code points), as
 * js/run_vectors.mjs compares them. A translation PCRE2 cannot run counts as
 * a failure of every case of that pattern (the vector holds only patterns the
 * compiler could translate).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "regex.h"
#include "vectors.h"

typedef struct collect {
    const char *text;
    cp_value *out;
    const cp_rx *rx;
    int oom;
} collect;

static int on_match(void *ctx, const cp_rx_match *m) {
    collect *c = ctx;
    cp_value *row = cp_list();
    if (!row) {
        c->oom = 1;
        return 1;
    }
    cp_list_append(row, cp_int((int64_t)cp_rx_cp_count(c->text, 0, m->start)));
    cp_list_append(row, cp_int((int64_t)cp_rx_cp_count(c->text, 0, m->end)));
    cp_list_append(row, cp_rx_groupdict(c->rx, c->text, m, 0));
    if (cp_list_len(row) != 3 || cp_list_append(c->out, row) < 0) {
        c->oom = 1;
        return 1;
    }
    return 0;
}

static void short_json(const cp_value *v, char *out, size_t n) {
    cp_json_dump_options o = cp_json_dump_compact();
    char *s = cp_json_dump(v, &o, NULL);
    snprintf(out, n, "%s", s ? s : "?");
    free(s);
}

void cp_vectors_regex(cp_vectors_run *run, const char *file, const cp_value *vec) {
    const cp_value *patterns = cp_object_get_cstr(vec, "patterns");
    for (size_t i = 0; i < cp_list_len(patterns); i++) {
        const cp_value *entry = cp_list_get(patterns, i);
        const cp_value *cases = cp_object_get_cstr(entry, "cases");
        cp_error err = {0};
        char what[64];
        snprintf(what, sizeof what, "regex vector %zu", i);
        cp_rx *rx = cp_rx_compile(cp_object_get_cstr(entry, "translation"), what, &err);
        for (size_t k = 0; k < cp_list_len(cases); k++) {
            const cp_value *c = cp_list_get(cases, k);
            size_t tl = 0;
            const char *text = cp_string_bytes(cp_object_get_cstr(c, "text"), &tl);
            const cp_value *expect = cp_object_get_cstr(c, "expect");
            char why[600] = "";
            if (!rx) {
                snprintf(why, sizeof why, "%s: %.500s", err.exception, err.message);
            } else if (!text) {
                snprintf(why, sizeof why, "case without text");
            } else {
                collect col = {text, cp_list(), rx, 0};
                cp_error merr = {0};
                cp_rx_match m;
                cp_rx_match_init(&m);
                int r = col.out ? cp_rx_finditer(rx, text, tl, &m, on_match, &col, &merr) : -1;
                cp_rx_match_fini(&m);
                if (r < 0 || col.oom) {
                    snprintf(why, sizeof why, "%s: %.500s", merr.failed ? merr.exception : "MemoryError", merr.message);
                } else if (!cp_value_equal(col.out, expect)) {
                    char got[250], want[250];
                    short_json(col.out, got, sizeof got);
                    short_json(expect, want, sizeof want);
                    snprintf(why, sizeof why, "%s != %s", got, want);
                }
                cp_value_free(col.out);
            }
            if (why[0]) cp_vectors_fail(run, "%s pattern %zu case %zu: %s", file, i, k, why);
            else cp_vectors_pass(run, NULL);
        }
        cp_rx_free(rx);
    }
}
