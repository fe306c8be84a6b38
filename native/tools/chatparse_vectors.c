/*
 * chatparse-vectors DIR [--json] [--verbose] [--mode char|token]
 *
 * Runs the conformance vectors of DIR (tests/vectors, tests/vectors/invalid)
 * through the C runtime and prints what js/run_vectors.mjs prints: a
 * "FAIL ..." line per failing case, then "N/M vector cases pass (F files)",
 * then with --json a JSON summary line. Exit status 0 only when every case
 * passes (and at least the directory could be read).
 */
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "vectors.h"

void cp_vectors_pass(cp_vectors_run *run, const char *what) {
    run->total++;
    if (run->verbose && what) printf("ok %s\n", what);
}

void cp_vectors_fail(cp_vectors_run *run, const char *fmt, ...) {
    run->total++;
    run->failed++;
    cp_buf b = {0};
    va_list ap;
    va_start(ap, fmt);
    cp_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    char *line = cp_buf_take(&b, NULL);
    if (!line) return;   /* counted; the text is lost only on OOM */
    if (run->failed > run->failures_cap) {
        size_t cap = run->failures_cap ? run->failures_cap * 2 : 64;
        char **f = realloc(run->failures, cap * sizeof *f);
        if (!f) { free(line); return; }
        run->failures = f;
        run->failures_cap = cap;
    }
    run->failures[run->failed - 1] = line;
}

unsigned char *cp_vectors_read(const cp_vectors_run *run, const char *name, size_t *len) {
    cp_buf path = {0};
    if (name[0] != '/') {
        cp_buf_puts(&path, run->dir);
        cp_buf_putc(&path, '/');
    }
    cp_buf_puts(&path, name);
    char *p = cp_buf_take(&path, NULL);
    if (!p) return NULL;
    FILE *f = fopen(p, "rb");
    free(p);
    if (!f) return NULL;
    cp_buf data = {0};
    char chunk[65536];
    size_t k;
    while ((k = fread(chunk, 1, sizeof chunk, f)) > 0) cp_buf_append(&data, chunk, k);
    int bad = ferror(f);
    fclose(f);
    if (bad) { cp_buf_free(&data); return NULL; }
    return (unsigned char *)cp_buf_take(&data, len);
}

size_t cp_vectors_case_count(const cp_value *vec) {
    const cp_value *cases = cp_object_get_cstr(vec, "cases");
    if (cp_type_of(cases) == CP_LIST) return cp_list_len(cases);
    const cp_value *patterns = cp_object_get_cstr(vec, "patterns");
    if (cp_type_of(patterns) == CP_LIST) {
        size_t n = 0;
        for (size_t i = 0; i < cp_list_len(patterns); i++)
            n += cp_list_len(cp_object_get_cstr(cp_list_get(patterns, i), "cases"));
        return n;
    }
    return 1;
}

/* The weak defaults: a kind whose file is not written yet fails every case. */
static void not_implemented(cp_vectors_run *run, const char *file, const cp_value *vec) {
    size_t n = cp_vectors_case_count(vec);
    for (size_t i = 0; i < n; i++)
        cp_vectors_fail(run, "%s[%zu]: not implemented in the C runtime yet", file, i);
}

__attribute__((weak)) void cp_vectors_template(cp_vectors_run *run, const char *file, const cp_value *vec) {
    not_implemented(run, file, vec);
}
__attribute__((weak)) void cp_vectors_tokens(cp_vectors_run *run, const char *file, const cp_value *vec) {
    not_implemented(run, file, vec);
}
__attribute__((weak)) void cp_vectors_values(cp_vectors_run *run, const char *file, const cp_value *vec) {
    not_implemented(run, file, vec);
}
__attribute__((weak)) void cp_vectors_regex(cp_vectors_run *run, const char *file, const cp_value *vec) {
    not_implemented(run, file, vec);
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int usage(void) {
    fprintf(stderr, "usage: chatparse-vectors DIR [--json] [--verbose] [--mode char|token]\n");
    return 2;
}

int main(int argc, char **argv) {
    cp_vectors_run run = {0};
    run.dir = NULL;
    int as_json = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) as_json = 1;
        else if (strcmp(argv[i], "--verbose") == 0) run.verbose = 1;
        else if (strcmp(argv[i], "--mode") == 0 && i + 1 < argc) {
            i++;
            if (strcmp(argv[i], "char") == 0) run.mode = CP_VECTORS_CHAR;
            else if (strcmp(argv[i], "token") == 0) run.mode = CP_VECTORS_TOKEN;
            else return usage();
        } else if (strncmp(argv[i], "--", 2) == 0) return usage();
        else if (!run.dir) run.dir = argv[i];
        else return usage();
    }
    if (!run.dir) run.dir = "tests/vectors";

    DIR *d = opendir(run.dir);
    if (!d) {
        fprintf(stderr, "chatparse-vectors: cannot read the directory %s\n", run.dir);
        return 2;
    }
    char **files = NULL;
    size_t nfiles = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n < 5 || strcmp(e->d_name + n - 5, ".json") != 0) continue;
        if (nfiles == cap) {
            cap = cap ? cap * 2 : 64;
            char **f = realloc(files, cap * sizeof *f);
            if (!f) { fprintf(stderr, "chatparse-vectors: out of memory\n"); return 2; }
            files = f;
        }
        files[nfiles] = malloc(n + 1);
        if (files[nfiles]) memcpy(files[nfiles], e->d_name, n + 1);
        if (!files[nfiles]) { fprintf(stderr, "chatparse-vectors: out of memory\n"); return 2; }
        nfiles++;
    }
    closedir(d);
    qsort(files, nfiles, sizeof *files, by_name);

    for (size_t i = 0; i < nfiles; i++) {
        const char *file = files[i];
        size_t len;
        unsigned char *text = cp_vectors_read(&run, file, &len);
        if (!text) {
            cp_vectors_fail(&run, "%s: cannot be read", file);
            continue;
        }
        cp_error err = {0};
        cp_value *vec = cp_json_parse((const char *)text, len, &err);
        free(text);
        if (!vec) {
            cp_vectors_fail(&run, "%s: not JSON (%s: %s)", file, err.exception, err.message);
            continue;
        }
        const cp_value *kind = cp_object_get_cstr(vec, "kind");
        if (cp_string_equals(kind, "invalid")) cp_vectors_invalid(&run, file, vec);
        else if (cp_string_equals(kind, "values")) cp_vectors_values(&run, file, vec);
        else if (cp_string_equals(kind, "regex")) cp_vectors_regex(&run, file, vec);
        else if (cp_string_equals(kind, "tokens")) cp_vectors_tokens(&run, file, vec);
        else if (cp_string_equals(kind, "template") || kind == NULL) cp_vectors_template(&run, file, vec);
        else {
            size_t kl = 0;
            const char *k = cp_string_bytes(kind, &kl);
            cp_vectors_fail(&run, "%s: unknown vector kind %.*s", file, (int)kl, k ? k : "(not a string)");
        }
        cp_value_free(vec);
    }

    for (size_t i = 0; i < run.failed && i < run.failures_cap; i++)
        if (run.failures[i]) printf("FAIL %s\n", run.failures[i]);
    printf("%zu/%zu vector cases pass (%zu files)\n", run.total - run.failed, run.total, nfiles);
    if (as_json)
        printf("{\"total\":%zu,\"passed\":%zu,\"failed\":%zu,\"files\":%zu}\n", run.total,
               run.total - run.failed, run.failed, nfiles);
    for (size_t i = 0; i < run.failed && i < run.failures_cap; i++) free(run.failures[i]);
    free(run.failures);
    for (size_t i = 0; i < nfiles; i++) free(files[i]);
    free(files);
    return run.failed == 0 && run.total > 0 ? 0 : 1;
}
