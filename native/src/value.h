/*
 * value.h - the JSON value model shared by the whole native runtime.
 *
 * A cp_value is what Python's json.loads returns: None, bool, int, float, str,
 * list or dict. Every value is a heap node owned by exactly one parent (or by
 * the caller for a root); cp_value_free frees a whole tree.
 *
 *  - CP_INT holds an int that fits int64_t; CP_BIGINT holds any other Python
 *    int as its canonical decimal text (optional '-', no leading zeros, never a
 *    value that fits int64_t: constructors normalize), in u.string.
 *  - CP_FLOAT is a double; NaN and +-inf are allowed (Python's json allows them).
 *  - CP_STRING is a Python str (a sequence of code points 0..0x10FFFF) in
 *    "generalized UTF-8": each code point encoded as UTF-8 would, including a
 *    surrogate code point U+D800..U+DFFF (which Python's json.loads produces
 *    from a lone "\ud800") as its own 3-byte sequence ED A0..BF xx. As in
 *    Python, two adjacent surrogate code points stay two code points (they are
 *    not the astral character; json.loads joins an escaped PAIR "\ud83d\ude00"
 *    into U+1F600, stored as 4 bytes). So every Python str has exactly one
 *    encoding and byte equality is str equality. The bytes are NUL-terminated
 *    (not counted in len) for convenience; they may contain NUL themselves.
 *    Code points: cp_utf8_decode walks them; cp_string_length counts them
 *    (Python's len); offsets in error messages are code points, as Python's.
 *  - CP_LIST is an array of owned children.
 *  - CP_OBJECT is a dict: keys are strings (as above), kept in INSERTION ORDER;
 *    setting an existing key replaces its value and keeps its position (as a
 *    Python dict does); removing a key and setting it again puts it last.
 *    Lookup is O(1) on average (a hash index is kept past a few keys).
 *
 * Allocation failure: constructors return NULL, mutators return -1; nothing
 * leaks and the value stays valid. Functions taking a `cp_value *` child take
 * ownership of it even when they fail (they free it), so a caller can write
 * `cp_list_append(l, cp_int(1))` without checking the inner call.
 */
#ifndef CHATPARSE_VALUE_H
#define CHATPARSE_VALUE_H

#include <stddef.h>
#include <stdint.h>

#include "chatparse.h"   /* cp_error */

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cp_type {
    CP_NULL = 0,
    CP_BOOL,
    CP_INT,
    CP_BIGINT,
    CP_FLOAT,
    CP_STRING,
    CP_LIST,
    CP_OBJECT
} cp_type;

typedef struct cp_value cp_value;

/* One key/value pair of an object, in insertion order. */
typedef struct cp_member {
    char *key;          /* generalized UTF-8, NUL-terminated, owned */
    size_t key_len;     /* bytes, NUL excluded */
    cp_value *value;    /* owned, never NULL */
} cp_member;

struct cp_value {
    cp_type type;
    union {
        int boolean;                                   /* CP_BOOL: 0 or 1 */
        int64_t integer;                               /* CP_INT */
        double number;                                 /* CP_FLOAT */
        struct { char *bytes; size_t len; } string;    /* CP_STRING, CP_BIGINT */
        struct { cp_value **items; size_t len, cap; } list;              /* CP_LIST */
        struct {
            cp_member *members; size_t len, cap;
            size_t *index; size_t index_cap;           /* private hash index */
        } object;                                      /* CP_OBJECT */
    } u;
};

/* ---- constructors (NULL on allocation failure) -------------------------- */

cp_value *cp_null(void);
cp_value *cp_bool(int b);                     /* any nonzero is True */
cp_value *cp_int(int64_t i);
/* An int from decimal text: optional '-' then digits (leading zeros allowed,
 * "-0" is 0). Gives CP_INT when it fits int64_t, else CP_BIGINT in canonical
 * form. NULL on allocation failure or when the text is not of that form. */
cp_value *cp_int_from_text(const char *text, size_t len);
cp_value *cp_float(double d);
/* A string copied from `len` bytes (must be generalized UTF-8; not checked). */
cp_value *cp_string(const char *bytes, size_t len);
/* Same, from a NUL-terminated C string. */
cp_value *cp_string_cstr(const char *s);
/* A string taking ownership of malloc'd `bytes` (which must have room for
 * len+1 bytes; a NUL is written at bytes[len]). On failure frees bytes. */
cp_value *cp_string_take(char *bytes, size_t len);
cp_value *cp_list(void);
cp_value *cp_object(void);

/* ---- accessors (a wrong type gives the stated default, never a crash) ---- */

cp_type cp_type_of(const cp_value *v);        /* CP_NULL for a NULL pointer */
int cp_bool_value(const cp_value *v);         /* 0 unless CP_BOOL true */
/* The int64 of a CP_INT (0 otherwise). A CP_BIGINT's text is u.string. */
int64_t cp_int_value(const cp_value *v);
double cp_float_value(const cp_value *v);     /* CP_FLOAT only, else 0.0 */
/* String bytes and length (for CP_STRING and CP_BIGINT); NULL/0 otherwise. */
const char *cp_string_bytes(const cp_value *v, size_t *len);
/* Python's len(str): number of code points (a lone surrogate counts one). */
size_t cp_string_length(const cp_value *v);
/* 1 when v is a CP_STRING equal to the NUL-terminated `s`. */
int cp_string_equals(const cp_value *v, const char *s);

size_t cp_list_len(const cp_value *v);                     /* 0 if not a list */
cp_value *cp_list_get(const cp_value *v, size_t i);        /* NULL out of range */
/* Append, taking ownership of item. 0 or -1 (OOM, item freed, or v not a list). */
int cp_list_append(cp_value *list, cp_value *item);

size_t cp_object_len(const cp_value *v);                   /* 0 if not an object */
/* The i-th member in insertion order; NULL out of range. */
const cp_member *cp_object_at(const cp_value *v, size_t i);
/* Value of a key, or NULL when absent (or v not an object). */
cp_value *cp_object_get(const cp_value *obj, const char *key, size_t key_len);
cp_value *cp_object_get_cstr(const cp_value *obj, const char *key);
/* Python's d[key] = value: replaces in place (old value freed, position kept)
 * or appends. Takes ownership of value. 0, or -1 (OOM: value freed). */
int cp_object_set(cp_value *obj, const char *key, size_t key_len, cp_value *value);
int cp_object_set_cstr(cp_value *obj, const char *key, cp_value *value);
/* Python's d.pop(key): detaches and returns the value (caller owns it), or
 * NULL when absent. Order of the other keys is kept. */
cp_value *cp_object_pop(cp_value *obj, const char *key, size_t key_len);

/* ---- whole values -------------------------------------------------------- */

/* Deep copy; NULL on allocation failure. */
cp_value *cp_value_copy(const cp_value *v);
/* Free a value and all it owns. NULL is allowed. */
void cp_value_free(cp_value *v);
/* Strict structural equality: same types (bool is not int, int is not float,
 * CP_INT never equals CP_BIGINT since both are canonical), same numbers (NaN
 * equals NaN, 0.0 equals -0.0 as in Python), same bytes, same lists, objects
 * with the same keys in the SAME ORDER with equal values. Equal values dump to
 * the same JSON text except for the sign of a zero float. */
int cp_value_equal(const cp_value *a, const cp_value *b);
/* Python's `a == b` on json values: True == 1 == 1.0, int vs float compared
 * exactly, NaN != NaN, dict equality ignores order. */
int cp_value_py_equal(const cp_value *a, const cp_value *b);

/* ---- UTF-8 helpers ------------------------------------------------------- */

/* Decode one code point of generalized UTF-8 at s[*pos] (pos < len), strictly:
 * no overlong forms, nothing above U+10FFFF; surrogates U+D800..DFFF are
 * accepted only when `allow_surrogates`. Advances *pos past it and returns the
 * code point; on an ill-formed sequence returns -1 and advances *pos by 1. */
int32_t cp_utf8_decode(const char *s, size_t len, size_t *pos, int allow_surrogates);
/* Encode a code point 0..0x10FFFF (surrogates too) into out; returns 1..4. */
int cp_utf8_encode(uint32_t cp, char out[4]);
/* Offset of the first byte of the first ill-formed sequence under strict
 * UTF-8 (surrogates ill-formed, as Python's bytes.decode("utf-8") sees them),
 * or (size_t)-1 when the bytes are valid UTF-8. */
size_t cp_utf8_first_invalid(const char *s, size_t len);

/* ---- JSON (Python's json module; implemented in json.c) ------------------ */

/* Limit of container nesting for cp_json_parse (Python's C scanner refuses
 * deep nesting with RecursionError; its exact depth depends on the stack,
 * so this is a fixed, documented stand-in). */
#define CP_JSON_MAX_DEPTH 990

/* Python's json.loads(text) for a str `text` given as generalized UTF-8.
 *
 * Accepts NaN, Infinity, -Infinity; duplicate keys keep the last value at the
 * first key's position (a dict); leading/trailing JSON whitespace allowed;
 * refuses ints of more than 4300 digits as Python does. On failure returns
 * NULL and fills err with exception "JSONDecodeError" and Python's message,
 * e.g. "Expecting value: line 1 column 1 (char 0)"; char/column offsets count
 * code points. The int-size refusal is "ValueError" with Python's message.
 * Nesting deeper than CP_JSON_MAX_DEPTH gives "RecursionError". Allocation
 * failure gives "MemoryError". */
cp_value *cp_json_parse(const char *text, size_t len, cp_error *err);

/* Options of cp_json_dump, as json.dumps' keyword arguments. */
typedef struct cp_json_dump_options {
    int ensure_ascii;            /* escape non-ASCII as \uXXXX (pairs for >U+FFFF) */
    const char *item_separator;  /* NULL means ", " */
    const char *key_separator;   /* NULL means ": " */
    int indent;                  /* < 0: no indent (None); >= 0 spaces per level */
    int sort_keys;               /* 0: insertion order; 1: sorted by code point */
} cp_json_dump_options;

/* json.dumps(v) defaults: ensure_ascii=True, separators (", ", ": "). */
cp_json_dump_options cp_json_dump_defaults(void);
/* The compact form of the table format: separators (",", ":"),
 * ensure_ascii=False. */
cp_json_dump_options cp_json_dump_compact(void);

/* Python's json.dumps(v, **opts) as a malloc'd NUL-terminated string of
 * *out_len bytes (out_len may be NULL). Floats are spelled as Python's repr
 * ("1.0", "1e+16", "1e-05", "0.1"), NaN/inf as NaN/Infinity/-Infinity.
 * Without ensure_ascii the output is generalized UTF-8 (a lone surrogate is
 * written raw, as Python's str would hold it). NULL on allocation failure. */
char *cp_json_dump(const cp_value *v, const cp_json_dump_options *opts, size_t *out_len);

/* json.dumps(s) of one string given as n bytes of generalized UTF-8, with
 * or without ensure_ascii: a malloc'd NUL-terminated text (NULL on OOM). */
char *cp_json_quote(const char *s, size_t n, int ensure_ascii, size_t *out_len);

/* Python's repr(float) into out (at most 32 bytes with the NUL): shortest
 * text that round-trips, "inf", "-inf", "nan". Returns the length. */
int cp_float_repr(double d, char out[32]);

#ifdef __cplusplus
}
#endif

#endif /* CHATPARSE_VALUE_H */
