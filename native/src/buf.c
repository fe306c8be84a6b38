/* buf.c - growable byte buffer (buf.h). */
#include "buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int reserve(cp_buf *b, size_t extra) {
    if (b->failed) return -1;
    if (extra > (size_t)-1 - b->len - 1) { b->failed = 1; return -1; }
    size_t need = b->len + extra + 1;
    if (need <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) cap = cap > ((size_t)-1) / 2 ? need : cap * 2;
    char *d = realloc(b->data, cap);
    if (!d) { b->failed = 1; return -1; }
    b->data = d;
    b->cap = cap;
    return 0;
}

void cp_buf_append(cp_buf *b, const void *data, size_t n) {
    if (reserve(b, n) < 0) return;
    if (n) memcpy(b->data + b->len, data, n);
    b->len += n;
    b->data[b->len] = 0;
}

void cp_buf_puts(cp_buf *b, const char *s) { cp_buf_append(b, s, strlen(s)); }

void cp_buf_putc(cp_buf *b, char c) {
    if (reserve(b, 1) < 0) return;
    b->data[b->len++] = c;
    b->data[b->len] = 0;
}

void cp_buf_vprintf(cp_buf *b, const char *fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    char small[256];
    int n = vsnprintf(small, sizeof small, fmt, ap);
    if (n < 0) { va_end(ap2); b->failed = 1; return; }
    if ((size_t)n < sizeof small) {
        cp_buf_append(b, small, (size_t)n);
    } else if (reserve(b, (size_t)n) == 0) {
        vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap2);
        b->len += (size_t)n;
    }
    va_end(ap2);
}

void cp_buf_printf(cp_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cp_buf_vprintf(b, fmt, ap);
    va_end(ap);
}

char *cp_buf_take(cp_buf *b, size_t *len) {
    if (b->failed) { cp_buf_free(b); if (len) *len = 0; return NULL; }
    if (!b->data && reserve(b, 0) < 0) { cp_buf_free(b); return NULL; }
    if (!b->data) return NULL;
    b->data[b->len] = 0;
    char *d = b->data;
    if (len) *len = b->len;
    b->data = NULL;
    b->len = b->cap = 0;
    return d;
}

void cp_buf_free(cp_buf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    b->failed = 0;
}
