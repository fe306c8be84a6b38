/*
 * chatparse-load FILE...
 *
 * Loads each table file with cp_tables_load and prints one JSON line per
 * file, in order: {"loaded": true} or {"refused": "<message>"} (the message of
 * a ValueError; another exception class as "<Class>: <message>"). Used by
 * tests/table_fuzz.py to compare the C loader's verdict with Python's and
 * JavaScript's. Exit status 0 unless a file cannot be read.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "chatparse.h"
#include "value.h"

static unsigned char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    cp_buf b = {0};
    char chunk[65536];
    size_t k;
    while ((k = fread(chunk, 1, sizeof chunk, f)) > 0) cp_buf_append(&b, chunk, k);
    int bad = ferror(f);
    fclose(f);
    if (bad) { cp_buf_free(&b); return NULL; }
    return (unsigned char *)cp_buf_take(&b, len);
}

int main(int argc, char **argv) {
    int status = 0;
    cp_json_dump_options opts = cp_json_dump_defaults();
    for (int i = 1; i < argc; i++) {
        size_t n = 0;
        unsigned char *bytes = read_file(argv[i], &n);
        if (!bytes) {
            fprintf(stderr, "chatparse-load: cannot read %s\n", argv[i]);
            printf("{\"unreadable\": true}\n");
            status = 1;
            continue;
        }
        cp_error err = {0};
        cp_tables *t = cp_tables_load(bytes, n, &err);
        free(bytes);
        if (t) {
            cp_tables_free(t);
            printf("{\"loaded\": true}\n");
            continue;
        }
        cp_buf msg = {0};
        if (strcmp(err.exception, "ValueError") != 0) cp_buf_printf(&msg, "%s: ", err.exception);
        cp_buf_puts(&msg, err.message);
        size_t ml;
        char *m = cp_buf_take(&msg, &ml);
        cp_value *v = cp_string(m ? m : "", m ? ml : 0);
        char *j = cp_json_dump(v, &opts, NULL);
        printf("{\"refused\": %s}\n", j ? j : "\"(out of memory)\"");
        free(j);
        cp_value_free(v);
        free(m);
    }
    fflush(stdout);
    return status;
}
