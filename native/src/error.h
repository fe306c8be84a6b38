/*
 * error.h - filling a cp_error (chatparse.h) inside the library.
 */
#ifndef CHATPARSE_ERROR_H
#define CHATPARSE_ERROR_H

#include <stdarg.h>

#include "chatparse.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Record an error of Python class `exception` with a printf-formatted
 * message. err may be NULL (nothing recorded). A message longer than the
 * buffer is cut at a UTF-8 character boundary and `truncated` set. */
void cp_error_set(cp_error *err, const char *exception, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Same with a message of n bytes taken as is (may contain '%'). */
void cp_error_set_text(cp_error *err, const char *exception, const char *msg, size_t n);
/* Prepend `prefix` to an already recorded message (e.g. "chatparse table
 * file: "), keeping the exception class. */
void cp_error_prefix(cp_error *err, const char *prefix);
/* An allocation failure: MemoryError with an empty message, as Python's. */
void cp_error_oom(cp_error *err);

#ifdef __cplusplus
}
#endif

#endif /* CHATPARSE_ERROR_H */
