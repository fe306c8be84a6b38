/*
 * fuzz_feed.c - libFuzzer target for the engine: arbitrary feeds (text or
 * token ids) into parsers over real tables, in both dialects. What it checks
 * is what the sanitizers and libFuzzer's timeouts see: no crash, no read out of
 * bounds, no leak, no hang, whatever is fed.
 *
 * Tables: every *.cpt of the directory in CHATPARSE_FUZZ_TABLES (default
 * tests/vectors), loaded once. Input: byte 0 picks the tables, byte 1 the
 * mode (bit 0: vLLM dialect; bit 1: token ids when the tables have a token
 * section); the rest is split at 0xFF bytes (never in UTF-8) into the prompt
 * and the feeds; in token mode each feed's bytes are read as little-endian
 * 16-bit ids (out of range ids included: they must be refused cleanly).
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -DPCRE2_CODE_UNIT_WIDTH=8 -Inative/include -Inative/src \
 *       native/tools/fuzz_feed.c native/src/(all .c) -lpcre2-8 -lm -o fuzz-feed
 *   ./fuzz-feed -max_total_time=60 -timeout=10
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chatparse.h"
#include "tables.h"

static cp_tables **g_tables;
static size_t g_n;

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long l = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(l > 0 ? (size_t)l : 1);
    *n = b ? fread(b, 1, (size_t)l, f) : 0;
    fclose(f);
    return b;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    const char *dir = getenv("CHATPARSE_FUZZ_TABLES");
    if (!dir) dir = "tests/vectors";
    DIR *d = opendir(dir);
    if (!d) return 0;
    char **names = NULL;
    size_t nn = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        if (l < 4 || strcmp(e->d_name + l - 4, ".cpt") != 0) continue;
        char **nm = realloc(names, (nn + 1) * sizeof *nm);
        if (!nm) break;
        names = nm;
        names[nn] = malloc(l + 1);
        if (!names[nn]) break;
        memcpy(names[nn++], e->d_name, l + 1);
    }
    closedir(d);
    qsort(names, nn, sizeof *names, by_name); /* (sorted: an input picks the same tables on every machine) */
    for (size_t i = 0; i < nn; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        free(names[i]);
        size_t n = 0;
        unsigned char *b = slurp(path, &n);
        if (!b) continue;
        cp_error err = {0};
        cp_tables *t = cp_tables_load(b, n, &err);
        free(b);
        if (!t) continue;
        cp_tables **g = realloc(g_tables, (g_n + 1) * sizeof *g);
        if (!g) {
            cp_tables_free(t);
            continue;
        }
        g_tables = g;
        g_tables[g_n++] = t;
    }
    free(names);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2 || g_n == 0) return 0;
    const cp_tables *t = g_tables[data[0] % g_n];
    int vllm = data[1] & 1, ids = (data[1] & 2) && t->has_tokens;
    cp_parser_options o = {vllm ? CP_DIALECT_VLLM_EVENTS : CP_DIALECT_TRANSFORMERS_EVENTS, NULL, 0};
    const uint8_t *p = data + 2, *end = data + size;
    const uint8_t *cut = memchr(p, 0xFF, (size_t)(end - p));
    if (!cut) cut = end;
    cp_error err = {0};
    cp_parser *ps = ids ? cp_parser_new_ids(t, (const char *)p, (size_t)(cut - p), NULL, 0, &o, &err)
                        : cp_parser_new(t, (const char *)p, (size_t)(cut - p), &o, &err);
    if (!ps) return 0;
    p = cut < end ? cut + 1 : end;
    while (p < end) {
        cut = memchr(p, 0xFF, (size_t)(end - p));
        if (!cut) cut = end;
        cp_error fe = {0};
        char *ev;
        if (ids) {
            size_t n = (size_t)(cut - p) / 2;
            int64_t *v = malloc((n ? n : 1) * sizeof *v);
            for (size_t k = 0; v && k < n; k++) v[k] = (int64_t)(p[2 * k] | (p[2 * k + 1] << 8));
            ev = v ? cp_parser_feed_ids(ps, v, n, NULL, &fe) : NULL;
            free(v);
        } else {
            ev = cp_parser_feed(ps, (const char *)p, (size_t)(cut - p), NULL, &fe);
        }
        cp_free(ev);
        p = cut < end ? cut + 1 : end;
    }
    char *msg = NULL;
    cp_error fe = {0};
    cp_free(cp_parser_finalize(ps, &msg, NULL, NULL, &fe));
    cp_free(msg);
    size_t il = 0, icp = 0;
    (void)cp_parser_input_text(ps, &il, &icp);
    cp_parser_free(ps);
    return 0;
}
