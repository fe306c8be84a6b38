/*
 * pyrepr.h - Python's repr() of a str, for messages that show one.
 */
#ifndef CHATPARSE_PYREPR_H
#define CHATPARSE_PYREPR_H

#include <stddef.h>

#include "buf.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Append repr(s) for a str of n bytes of generalized UTF-8 (value.h): the
 * quote Python picks, backslash escapes, non-printable characters as
 * \xhh/\uhhhh/\Uhhhhhhhh (printability from Unicode general categories, as
 * str.isprintable, via PCRE2's tables). When max_chars >= 0 the result is cut
 * to that many code points, as f"{s!r:.60}" does. */
void cp_py_repr_str(cp_buf *out, const char *s, size_t n, long max_chars);

/* Append repr(v) of a JSON value as Python writes it (None, True, 1, 1.5,
 * 'text', [..], {'k': v}), cut to max_chars code points when >= 0. */
struct cp_value;
void cp_py_repr_value(cp_buf *out, const struct cp_value *v, long max_chars);

/* type(v).__name__ of a JSON value: NoneType, bool, int, float, str, list, dict. */
const char *cp_py_type_name(const struct cp_value *v);

/* Python's str.isprintable() for one code point. */
int cp_py_isprintable(unsigned cp);

#ifdef __cplusplus
}
#endif

#endif /* CHATPARSE_PYREPR_H */
