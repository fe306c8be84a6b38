/* fuzz_load.c - libFuzzer target for the table loader (cmake -DCMAKE_C_COMPILER=clang -DCHATPARSE_FUZZ=ON).
 *
 * Any bytes must be loaded or refused with a message: never a crash, a hang or an out-of-bounds read (the
 * sanitizers report those). Most mutations of a file only break its checksum, so, like tests/table_fuzz.py,
 * every input is also loaded RESEALED: its file-size field set to its length, its template hash recomputed
 * from its template section (when that is in range and parses) and its SHA-256 trailer recomputed, so the
 * fuzzer reaches every later check. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "chatparse.h"
#include "sha256.h"
#include "value.h"

static void check(const uint8_t *data, size_t size) {
    cp_error err = {0};
    cp_tables *t = cp_tables_load(data, size, &err);
    if (t) cp_tables_free(t);
    else if (!err.failed) __builtin_trap();   /* a refusal always says why */
}

static uint64_t u64le(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    check(data, size);
    if (size < 192) return 0;
    uint8_t *b = malloc(size);
    if (!b) return 0;
    memcpy(b, data, size);
    for (int i = 0; i < 8; i++) b[16 + i] = (uint8_t)((uint64_t)size >> (8 * i));
    uint64_t t_off = u64le(b + 24), t_len = u64le(b + 32);
    if (t_off == 160 && t_len <= size - 192) {
        cp_value *spec = cp_json_parse((const char *)b + 160, (size_t)t_len, NULL);
        if (spec) {
            cp_json_dump_options o = cp_json_dump_compact();
            o.sort_keys = 1;
            size_t n;
            char *canon = cp_json_dump(spec, &o, &n);
            if (canon) cp_sha256_digest(canon, n, b + 80);
            free(canon);
            cp_value_free(spec);
        }
    }
    cp_sha256_digest(b, size - 32, b + size - 32);
    check(b, size);
    free(b);
    return 0;
}
