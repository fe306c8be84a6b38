/*
 * buf.h - a growable byte buffer, the one string builder of the runtime.
 *
 * A cp_buf starts zeroed (`cp_buf b = {0};`). Appends never write out of
 * bounds; on allocation failure the buffer records `failed` and further
 * appends do nothing, so a caller checks once at the end. data is always
 * NUL-terminated when non-NULL (the NUL is not counted in len).
 */
#ifndef CHATPARSE_BUF_H
#define CHATPARSE_BUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cp_buf {
    char *data;
    size_t len, cap;
    int failed;        /* 1 after an allocation failure */
} cp_buf;

/* Append n bytes. */
void cp_buf_append(cp_buf *b, const void *data, size_t n);
/* Append a NUL-terminated string. */
void cp_buf_puts(cp_buf *b, const char *s);
/* Append one byte. */
void cp_buf_putc(cp_buf *b, char c);
/* Append printf-style formatted text. */
void cp_buf_printf(cp_buf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void cp_buf_vprintf(cp_buf *b, const char *fmt, va_list ap);
/* Take the bytes (caller frees; NULL if failed; "" for an empty buffer) and
 * reset the buffer. */
char *cp_buf_take(cp_buf *b, size_t *len);
/* Free the bytes and reset. */
void cp_buf_free(cp_buf *b);

#ifdef __cplusplus
}
#endif

#endif /* CHATPARSE_BUF_H */
