/* fuzz_load.c - libFuzzer target for the table loader: any bytes must be
 * loaded or refused with a message, never crash, hang or read out of bounds
 * (the sanitizers report). Built with -DCHATPARSE_FUZZ=ON and clang. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "chatparse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    cp_error err = {0};
    cp_tables *t = cp_tables_load(data, size, &err);
    if (t) cp_tables_free(t);
    else if (!err.failed || strlen(err.message) >= sizeof err.message) __builtin_trap();   /* a refusal always says why */
    return 0;
}
