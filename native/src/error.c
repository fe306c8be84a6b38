/* error.c - filling cp_error (error.h). */
#include "error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void set_exception(cp_error *err, const char *exception) {
    size_t n = strlen(exception);
    if (n >= sizeof err->exception) n = sizeof err->exception - 1;
    memcpy(err->exception, exception, n);
    err->exception[n] = 0;
}

void cp_error_set_text(cp_error *err, const char *exception, const char *msg, size_t n) {
    if (!err) return;
    err->failed = 1;
    err->truncated = 0;
    set_exception(err, exception);
    if (n >= sizeof err->message) {
        n = sizeof err->message - 1;
        /* cut at a character boundary */
        while (n > 0 && ((unsigned char)msg[n] & 0xC0) == 0x80) n--;
        err->truncated = 1;
    }
    memcpy(err->message, msg, n);
    err->message[n] = 0;
}

void cp_error_set(cp_error *err, const char *exception, const char *fmt, ...) {
    if (!err) return;
    char *big = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) { cp_error_set_text(err, exception, "", 0); return; }
    big = malloc((size_t)n + 1);
    if (!big) { cp_error_oom(err); return; }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    cp_error_set_text(err, exception, big, (size_t)n);
    free(big);
}

void cp_error_prefix(cp_error *err, const char *prefix) {
    if (!err) return;
    size_t p = strlen(prefix), m = strlen(err->message);
    char *tmp = malloc(p + m + 1);
    if (!tmp) return;
    memcpy(tmp, prefix, p);
    memcpy(tmp + p, err->message, m + 1);
    int trunc = err->truncated;
    char exc[sizeof err->exception];
    memcpy(exc, err->exception, sizeof exc);
    cp_error_set_text(err, exc, tmp, p + m);
    err->truncated |= trunc;
    free(tmp);
}

void cp_error_oom(cp_error *err) {
    if (!err) return;
    err->failed = 1;
    err->truncated = 0;
    set_exception(err, "MemoryError");
    err->message[0] = 0;
}
