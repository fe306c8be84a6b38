/*
 * regex.h - the patterns a template has to run, on PCRE2 with Python's semantics.
 *
 * What is compiled is the port section's translation (FORMAT.md section 7: the
 * JavaScript source, with every class spelled out as the exact code-point set
 * Python's `regex` uses), rewritten to PCRE2 syntax by cp_rx_compile: `\u{H}`,
 * `\uHHHH` (surrogate pairs joined) and `\xHH` become `\x{H}`, `\v` U+000B,
 * JavaScript's Unicode `\s` its explicit set, every named group gets a PCRE2
 * name of its own (JavaScript names such as `$a1` are not PCRE2 names), and
 * the pattern runs with PCRE2_UTF | PCRE2_DOTALL | PCRE2_DOLLAR_ENDONLY |
 * PCRE2_ALLOW_EMPTY_CLASS (so `[^]` is any character, `[]` none, `$` only the
 * end). Surrogate code points in classes are dropped (subjects are valid
 * UTF-8, so they can never match; `[^\u{D800}]` stays "any character").
 * Where PCRE2 and Python still differ PCRE2 is the closer of the two engines:
 * a capture inside a repetition keeps its last value, and a backreference to a
 * group that did not take part fails, as in Python.
 *
 * Why the translation and not the Python source: PCRE2 10.42's Unicode tables
 * are older than the `regex` module's, so `\w`, `\d`, `\s` and case folding
 * would differ on recent characters; the translation carries Python's sets.
 *
 * A lookbehind whose body is one non-capturing group, `(?<=(?:ab|c))` as the
 * translation writes Python's `(?<=ab|c)`, is compiled as `(?<=ab|c)`: PCRE2
 * 10.42 takes top-level alternatives of different fixed lengths there.
 *
 * Refused (cp_rx_compile fails with a ValueError naming `what`): a translation
 * that is an error, syntax with no PCRE2 equivalent (`\p{..}`, `\S`/`\D`/`\W`
 * inside a class), and whatever PCRE2 itself refuses (a lookbehind that is not
 * of fixed length per alternative, such as `(?<=a{1,3})`, in PCRE2 10.42).
 *
 * Offsets are bytes of UTF-8 subjects; cp_rx_cp_count converts to Python's
 * code points. A compiled cp_rx is read-only after compilation and may be
 * shared by threads; a cp_rx_match belongs to one thread.
 */
#ifndef CHATPARSE_REGEX_H
#define CHATPARSE_REGEX_H

#include <stddef.h>
#include <stdint.h>

#include "value.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cp_rx cp_rx;

/* A match's offsets: ov[2k], ov[2k+1] are group k's byte span, CP_RX_UNSET
 * for a group that did not take part; group 0 is the whole match. */
#define CP_RX_UNSET ((size_t)-1)

typedef struct cp_rx_match {
    size_t start, end;        /* the whole match, bytes */
    size_t n_groups;          /* groups + 1 entries (pairs) in ov */
    size_t *ov;               /* owned; grown as needed */
    size_t ov_cap;            /* pairs allocated */
} cp_rx_match;

/* Compile a port-section translation `t` (an object {"source": str,
 * "groups": {js name: python name}} or {"error": str}). `what` names the
 * pattern in messages ("patterns[3] (close_pattern of field 1: ...)").
 * On failure returns NULL with err = ValueError "<what> cannot run in C: ..."
 * (the translation's own error, or PCRE2's message with its offset). */
cp_rx *cp_rx_compile(const cp_value *t, const char *what, cp_error *err);

/* Compile a literal JavaScript-syntax source without groups (used for
 * sources the engine builds itself, e.g. a start guard's lookbehind). */
cp_rx *cp_rx_compile_source(const char *js_source, size_t len, const char *what, cp_error *err);

void cp_rx_free(cp_rx *rx);

/* Number of Python group names (distinct, in the translation's order). */
size_t cp_rx_name_count(const cp_rx *rx);

void cp_rx_match_init(cp_rx_match *m);
void cp_rx_match_fini(cp_rx_match *m);

/* Match flags. */
#define CP_RX_ANCHORED      1u   /* the match must start at `start` (JavaScript's y flag) */
#define CP_RX_END_ANCHORED  2u   /* ... and end at `len` (the "(?:src)$" full match) */
#define CP_RX_NOTEMPTY_AT   4u   /* an empty match at `start` does not count */
#define CP_RX_NOTBOL        8u   /* the subject's start is not the text's: `^` does not hold there */

/* Search subject[0..len) from byte offset `start` (a character boundary; the
 * text before it is seen by lookbehinds, `^` holds only at 0). Returns 1 with
 * m filled, 0 when there is no match, -1 with err filled (PCRE2's match limit
 * or memory: "RuntimeError"). The subject must be valid UTF-8 (not checked
 * again here: the engine validates what it is fed). Never reads outside it. */
int cp_rx_exec(const cp_rx *rx, const char *subject, size_t len, size_t start, unsigned flags,
               cp_rx_match *m, cp_error *err);

/* The match's groupdict as the JavaScript runtime's `groupdict` builds it: per
 * translation group in order, its Python name -> the captured text, or null
 * when it did not take part (of aliases of one Python name, the last that took
 * part wins). A new object (NULL on allocation failure). With `skip_null`,
 * names that did not take part are left out (the captures of an open). */
cp_value *cp_rx_groupdict(const cp_rx *rx, const char *subject, const cp_rx_match *m, int skip_null);

/* The span of the Python group `name` in m (of aliases, the last that took
 * part): 1 with *s and *e set, 0 when it did not take part, -1 when the pattern
 * has no group of that name. */
int cp_rx_group_span(const cp_rx *rx, const cp_rx_match *m, const char *name, size_t *s, size_t *e);

/* Python's finditer over subject[0..len): calls `fn` per match in order
 * (after an empty match at p, the next match may start at p only if it is not
 * empty). `fn` returns 0 to go on, nonzero to stop (that value is returned).
 * Returns 0 when done, -1 on a match error (err filled). */
typedef int (*cp_rx_each_fn)(void *ctx, const cp_rx_match *m);
int cp_rx_finditer(const cp_rx *rx, const char *subject, size_t len, cp_rx_match *m, cp_rx_each_fn fn,
                   void *ctx, cp_error *err);

/* Code points in s[from..to) of valid UTF-8 (Python's len of that slice). */
size_t cp_rx_cp_count(const char *s, size_t from, size_t to);

#ifdef __cplusplus
}
#endif

#endif /* CHATPARSE_REGEX_H */
