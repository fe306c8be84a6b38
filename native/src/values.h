/*
 * values.h - the value layer of the native runtime: what a closed region's body becomes (issue #40).
 *
 * The C twin of chatparse/runtime/values/ (and of js/chatparse.mjs from `pyStrip` to the end): content parsers
 * (text, int, float, bool, json, xml-inline, kv-lines and the extension parsers python-calls and json-values),
 * the value steps of FORMAT.md section 2 in their order (unwrap_pattern -> content parser with
 * escaped_json_values -> content_fallback -> as_list -> key_aliases -> transform with optional_placeholders ->
 * decode_json_strings), tool-argument typing (transformers' coercion, or "argument_types": "schema"), and the
 * close_json_end tracker (JsonEnd).
 *
 * Reference-exact: every function gives the value Python gives (cp_value of value.h: ints unbounded through
 * CP_BIGINT, floats as Python's, strings as generalized UTF-8) or fails with the exception class Python raises
 * and, where chatparse words it, the same message (cp_error.exception / .message; offsets in messages count
 * code points). Never a crash, an out-of-bounds read or a hang on any input; nesting is bounded as Python bounds
 * it (json: CP_JSON_MAX_DEPTH -> RecursionError; python-calls: 100 brackets; json-values: 512; JsonEnd: 512).
 * No global mutable state: every function may run on any thread (the Unicode tables are const).
 *
 * Ownership: a returned cp_value * belongs to the caller (cp_value_free). Inputs are borrowed and never changed,
 * except `value` of cp_values_type, which is consumed. On failure NULL is returned and `err` filled (err may
 * be NULL). Exception classes used: ValueError, TypeError, KeyError, AttributeError, JSONDecodeError (a
 * ValueError in Python: cp_values_is_value_error), RecursionError, MemoryError (every allocation failure, with
 * nothing leaked - but see values_internal.h "vshared" for the one rare exception), and "error" (the regex
 * module's exception for an invalid pattern, as the regex hook reports it). A message is the exception's args[0] where that is a str (a KeyError's is the key itself, as the vectors
 * hold it); one longer than cp_error holds is cut (cp_error.truncated). Texts are bytes of generalized UTF-8;
 * those given to the regex hook (bodies) must be valid UTF-8, as the engine's input is.
 *
 * Object sharing: a transform inserts looked-up values themselves in Python, so one naming a dict twice
 * ({"function": {"arguments": "{arguments}"}, "raw": "{arguments}"}) holds that object at two places and the
 * in-place steps after it (decode_json_strings, tool typing) change both. cp_values_make and cp_values_region do
 * the same (values_shared.c: the steps run on a graph, copied into a tree at the end); cp_values_type on a value
 * already made sees a tree, so typing there edits one place (use cp_values_region).
 *
 * Where C differs from Python (known; no bundled template and no vector reaches them):
 *  - a python-calls 0x/0o/0b integer of more than 14300 bits is refused ("an integer of more than 4300 digits",
 *    the decimal limit's message; Python reads it and cannot print it);
 *  - json's string_delims given as a list of multi-character items that hold regex syntax (which regex.escape
 *    passes through unescaped, so they would be a pattern) is a RuntimeError;
 *  - Python's \w is the built-in table (values_unicode.c, from the regex module that made the vectors) unless the
 *    engine passes the table file's class (cp_values_env.word);
 *  - a high and a low surrogate made adjacent (python-calls escapes "\ud83d" "\ude00") are one code point, as
 *    value.h stores every str (Python keeps two);
 *  - typing through cp_values_type (not cp_values_region) of a value whose transform shared a dict edits one copy.
 */
#ifndef CHATPARSE_VALUES_H
#define CHATPARSE_VALUES_H

#include <stddef.h>
#include <stdint.h>

#include "value.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- regex hook --------------------------------------------------------------------------------------------
 * The value layer runs no regex itself: xml-inline's tag_pattern and unwrap_pattern are content regexes of the
 * tables (the metadata section's translations), which the engine compiles. It hands them in through this hook.
 */

/* One match, byte offsets into the subject given to finditer. */
typedef struct cp_vmatch {
    size_t start, end;
    /* The span of the named group `name`: 1 with *s and *e set when it took part in the match, 0 when it did not,
     * -1 when the pattern has no group of that name. */
    int (*group)(const struct cp_vmatch *m, const char *name, size_t *s, size_t *e);
    const void *impl;   /* the engine's own match data */
} cp_vmatch;

typedef struct cp_vregex {
    void *ctx;
    /* Python's regex.finditer(pattern, text, flags=DOTALL) over `text` (generalized UTF-8): on_match for each
     * match, left to right (an empty match right after the previous one is skipped as regex does). Returns 0;
     * or -1 with err filled: the pattern is not a string / has no translation / is invalid (exception "error"
     * and the reference's message, or TypeError), or on_match returned nonzero (it filled err itself). */
    int (*finditer)(void *ctx, const cp_value *pattern, const char *text, size_t len,
                    int (*on_match)(void *arg, const cp_vmatch *m), void *arg, cp_error *err);
} cp_vregex;

/* What the value layer needs from the loaded tables. Zero-initialize; every member may be NULL. */
typedef struct cp_values_env {
    const cp_vregex *regex;   /* NULL: xml-inline and unwrap_pattern fail with a RuntimeError naming it */
    /* Python regex's \w for {placeholder} names and json's unquoted_keys: 1 when `cp` is a word character. NULL:
     * the built-in table (values_unicode.c, made from the regex module of the Python that made the vectors); an
     * engine may pass the table file's own class (metadata js.word), as the JS runtime does. */
    int (*word)(void *word_ctx, uint32_t cp);
    void *word_ctx;
} cp_values_env;

/* ---- content parsers ----------------------------------------------------------------------------------- */

/* Python's parse_content(text, name, args) (runtime/values/parsers.py, JS parseContent): the base parsers only
 * (text, int, float, bool, json, xml-inline, kv-lines); any other `name` is a KeyError (a list or dict name a
 * TypeError "unhashable type"), as a nested value_parser's name is. `args` is the JSON content_args (any value;
 * NULL is {}); options are read by Python truthiness, as the reference reads them. xml-inline runs its
 * tag_pattern through env->regex (none: RuntimeError). */
cp_value *cp_values_parse_content(const char *text, size_t len, const cp_value *name, const cp_value *args,
                                  const cp_values_env *env, cp_error *err);

/* The python-calls parser (FORMAT.md "python_calls"): [{"name", "arguments"}, ...] or ValueError
 * "python-calls: <what> at offset N". */
cp_value *cp_values_python_calls(const char *text, size_t len, cp_error *err);

/* The json-values parser (FORMAT.md "json_values"): the list of the comma-separated JSON values, or the
 * ValueError "json-values: ..." it states. */
cp_value *cp_values_json_values(const char *text, size_t len, cp_error *err);

/* ---- a region's value ---------------------------------------------------------------------------------- */

/* Python's process_value(body, field, captures) (JS processValue): `field` is one field dict of the template
 * section (FORMAT.md section 2, with its extension keys); `captures` the open match's named groups that took
 * part (a dict of strings; NULL is {}). Applies unwrap_pattern, the field's content parser (escaped_json_values,
 * content_fallback), as_list, key_aliases, the transform (transform_each, optional_placeholders) and
 * decode_json_strings. Errors: the parser's, the transform's (KeyError / ValueError with the reference's
 * messages), "Field 'x': transform_each requires ..." ValueErrors. */
cp_value *cp_values_make(const char *body, size_t len, const cp_value *field, const cp_value *captures,
                         const cp_values_env *env, cp_error *err);

/* A region's whole value: cp_values_make, then with a non-empty `params` the typing step of cp_values_type, in
 * one call so that Python's object sharing is kept through the typing too (a transform that puts one dict at two
 * places: Python's typing edits it at both; cp_values_make + cp_values_type would see two copies). Engines should
 * call this; `params` NULL or {} is cp_values_make. */
cp_value *cp_values_region(const char *body, size_t len, const cp_value *field, const cp_value *captures,
                           const cp_value *params, const cp_values_env *env, cp_error *err);

/* Tool name -> its parameter properties dict (Python's tool_params, JS toolParams): OpenAI-style entries
 * {"type": "function", "function": {...}} and bare {"name", "parameters"}; others skipped. `tools` NULL or
 * JSON null gives {}; a non-list is a TypeError. */
cp_value *cp_values_tool_params(const cp_value *tools, cp_error *err);

/* The typing step of a region's value with tools= (after cp_values_make): transformers' coercion
 * (coerce_tool_calls), or with the field's "argument_types": "schema" the schema-first typing, which makes the
 * region again without its value parser (from `body`/`captures`) for the arguments' texts. `params` is
 * cp_values_tool_params' result; an empty dict (or NULL) leaves the value as it is. Consumes `value` (also on
 * failure) and returns the typed value. Errors: a TypeError from a non-list anyOf/oneOf, MemoryError. */
cp_value *cp_values_type(cp_value *value, const char *body, size_t len, const cp_value *field,
                         const cp_value *captures, const cp_value *params, const cp_values_env *env,
                         cp_error *err);

/* Python's coerce(raw, types) (runtime/values/coerce.py): `raw` cast to the first of the JSON-Schema type
 * names `types` (a list of strings) that accepts it, else the string itself. */
cp_value *cp_values_coerce(const char *raw, size_t len, const cp_value *types, cp_error *err);

/* 1 when `exception` names a ValueError or a subclass of it (JSONDecodeError). */
int cp_values_is_value_error(const char *exception);
/* 1 for the classes a region's value may fail with and the serving dialect / on_error recover from:
 * KeyError, TypeError, ValueError, JSONDecodeError. */
int cp_values_is_recoverable(const char *exception);

/* ---- close_json_end: where the JSON value a body starts with ends (JS JsonEnd, json_end.py) --------------
 * Reads Python's json.JSONDecoder().raw_decode(body, i) grammar incrementally after JSON whitespace, at most
 * CP_JSON_END_MAX_DEPTH containers deep. Offsets are absolute BYTE offsets of the caller's stream (the value
 * grammar is ASCII: any non-ASCII byte outside a string kills it, inside one it is an ordinary character, so
 * byte offsets of UTF-8 text are exact; the caller converts to code points where it reports them). Memory:
 * the struct plus one bit per open container (a fixed array: no allocation). */
#define CP_JSON_END_MAX_DEPTH 512

typedef struct cp_json_end {
    size_t pos;         /* the next byte offset to read */
    int state;
    int key;            /* the string being read is an object key */
    const char *lit;    /* the literal being read */
    int need;
    long long cand;     /* a top-level number's pending '.'/'e' offset, or -1 */
    long long end;      /* the value's end J once state is done, else -1 */
    int dead;           /* 1: the body is not a value (the close never fires) */
    size_t depth;
    unsigned char stack[CP_JSON_END_MAX_DEPTH / 8 + 1];   /* bit i: container i is an object */
} cp_json_end;

/* A tracker reading from byte offset `start`. */
void cp_json_end_init(cp_json_end *je, size_t start);
/* Read text[pos - base .. upto - base) (text holds the stream from offset `base`); stops at the value's end. */
void cp_json_end_advance(cp_json_end *je, const char *text, size_t base, size_t upto);
/* The end of the stream: decides a pending top-level number, else the body is no value (dead). */
void cp_json_end_finish(cp_json_end *je);
/* 1 once the end J is known (je->end), 0 while undecided, -1 when dead. */
int cp_json_end_status(const cp_json_end *je);
/* The first offset that may not be body: J once known, a top-level number's pending ./e part, else pos;
 * -1 when dead (JS hold()). */
long long cp_json_end_hold(const cp_json_end *je);
/* The pending ./e offset, else pos (JS lowest()). */
long long cp_json_end_lowest(const cp_json_end *je);

#ifdef __cplusplus
}
#endif

#endif /* CHATPARSE_VALUES_H */
