/*
 * chatparse.h - the public C API of libchatparse, the native runtime of chatparse.
 *
 * libchatparse reads the chatparse table format (`.cpt`, FORMAT.md) and runs it.
 * No global state: a loaded cp_tables is read-only and may be shared by any number
 * of threads; everything else belongs to one thread at a time.
 */
#ifndef CHATPARSE_H
#define CHATPARSE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The `.cpt` format version this library reads (FORMAT.md, header field
 * format_version); a file of any other version is refused. */
#define CHATPARSE_FORMAT_VERSION 1
/* The oldest format version this library still reads. */
#define CHATPARSE_FORMAT_MIN_COMPATIBLE 1

/* The library's own version (semantic versioning). */
#define CHATPARSE_VERSION_MAJOR 0
#define CHATPARSE_VERSION_MINOR 1
#define CHATPARSE_VERSION_PATCH 0
#define CHATPARSE_VERSION_STRING "0.1.0"

/* Size of cp_error.message, terminating NUL included. Longer messages are cut
 * (never written past the buffer) and cp_error.truncated is set. */
#define CP_ERROR_MESSAGE_SIZE 2048

/* The one error type of the library.
 *
 * `exception` names the Python exception class chatparse raises for the same
 * condition ("ValueError", "TypeError", "KeyError", "MemoryError" ...), so a
 * binding can raise the same class; `message` is the exception's text,
 * byte-identical to Python's str(exception) (UTF-8, NUL-terminated).
 * A function that fails fills the cp_error passed to it (when not NULL); a
 * function that succeeds leaves it untouched. Zero-initialize before use:
 * `cp_error err = {0};`. */
typedef struct cp_error {
    int failed;                               /* 1 once an error is recorded */
    int truncated;                            /* 1 when message was cut to fit */
    char exception[32];                       /* Python exception class name */
    char message[CP_ERROR_MESSAGE_SIZE];      /* UTF-8, NUL-terminated */
} cp_error;

/* Loaded tables: one `.cpt` file, validated. Opaque; see src/tables.h for the
 * library-internal layout. */
typedef struct cp_tables cp_tables;

/* Library version string (CHATPARSE_VERSION_STRING of the built library). */
const char *cp_version(void);

/* Load and validate a `.cpt` file from `n` bytes at `bytes`.
 *
 * Runs exactly the checks of FORMAT.md section 1 ("What a reader must check",
 * steps 1-8, with section 8.4 for a token section) in their order; the first
 * failing check is the error, with the message the Python loader gives
 * ("chatparse table file: ..."), exception "ValueError". Of step 9 (the
 * template re-normalized is itself) it makes everything but what needs
 * Python's `regex` (that every pattern compiles): a file whose only defect is
 * a pattern Python's regex refuses loads here. A pattern whose translation
 * PCRE2 cannot run is refused by name when a parser is made from the tables
 * (the parser API below), not here. Never reads outside [bytes, bytes+n),
 * never crashes or hangs, whatever the bytes; loading is linear in n except
 * the prefilter check of FORMAT.md step 8 (one pass over the class intervals
 * per prefilter pair, as FORMAT.md states).
 *
 * Returns the tables (caller frees with cp_tables_free) or NULL with `err`
 * filled. The tables copy what they need: `bytes` may be freed afterwards. */
cp_tables *cp_tables_load(const uint8_t *bytes, size_t n, cp_error *err);

/* Free tables from cp_tables_load. NULL is allowed. */
void cp_tables_free(cp_tables *tables);

/* ---------------------------------------------------------------------------
 * PARSER API (engine): added below this line by the engine work (issue #40).
 * make a parser from a prompt (text or ids), feed text or ids, finalize,
 * read events and the message as JSON text.
 * ------------------------------------------------------------------------- */

/* A streaming parser for one generation over loaded tables (Python's
 * ResponseParser). One thread at a time; the tables must outlive it. */
typedef struct cp_parser cp_parser;

/* The event dialect (FORMAT.md section 9, "Dialects"). */
typedef enum cp_dialect {
    CP_DIALECT_TRANSFORMERS_EVENTS = 0,   /* transformers 5.23's events (the default) */
    CP_DIALECT_VLLM_EVENTS = 1            /* vLLM 0.33.0's serving dialect: spans, captures,
                                             region_malformed events, the input text kept */
} cp_dialect;

typedef struct cp_parser_options {
    cp_dialect dialect;
    /* The tools the request declared, as JSON text (a list, Python's
     * `tools=`), or NULL: tool-call arguments are then typed by the tools'
     * schemas as chatparse does. */
    const char *tools_json;
    size_t tools_json_len;
} cp_parser_options;

/* Make a parser. `prompt` (UTF-8, `prompt_len` bytes) is the chat prompt the
 * model continued: it is cut after the template's start anchor and parsed
 * first (its events: cp_parser_initial_events). A NULL prompt is the
 * ValueError Python raises (prefix required); pass "" (len 0) to opt out.
 * `opts` may be NULL (transformers' dialect, no tools). NULL with err filled
 * on failure (the prompt's own parse may fail as Python's constructor does). */
cp_parser *cp_parser_new(const cp_tables *tables, const char *prompt, size_t prompt_len,
                         const cp_parser_options *opts, cp_error *err);

/* The events of the prompt, as JSON text (owned by the parser, valid until it
 * is freed; *len may be NULL). */
const char *cp_parser_initial_events(cp_parser *p, size_t *len);

/* Feed `len` bytes of UTF-8 output; a character may be split across feeds
 * (its bytes are held until the next). Returns the events this feed produced
 * as a JSON list (caller frees with cp_free), or NULL with err filled: the
 * exception class and message Python raises, after which every call fails
 * with RuntimeError as Python's parser does. Ill-formed UTF-8 is a ValueError
 * that consumes nothing and leaves the parser usable. */
char *cp_parser_feed(cp_parser *p, const char *text, size_t len, size_t *out_len, cp_error *err);

/* The end of the stream: returns the final events as a JSON list and stores
 * the message (a JSON object) in *message (both freed with cp_free), or NULL
 * with err filled (e.g. a missing required field: ValueError). */
char *cp_parser_finalize(cp_parser *p, char **message, size_t *message_len, size_t *out_len, cp_error *err);

/* In the vLLM dialect: the parser's input text (the cut prompt, then every
 * feed; borrowed, valid until the next call) and the code points of the cut
 * prompt (where generation begins). NULL in other dialects. */
const char *cp_parser_input_text(cp_parser *p, size_t *len, size_t *prompt_code_points);

void cp_parser_free(cp_parser *p);

/* The message of a whole output (Python's parse_response), as JSON text
 * (caller frees with cp_free), or NULL with err filled. In the vLLM dialect
 * the whole text is parsed first; then a missing required field raises, else
 * the first malformed region's error. */
char *cp_parse_response(const cp_tables *tables, const char *text, size_t len, const char *prompt,
                        size_t prompt_len, const cp_parser_options *opts, size_t *out_len, cp_error *err);

/* An engine: the tables compiled for running (patterns on PCRE2, start
 * guards), built once - cp_parser_new builds one per parser - and shared
 * read-only by any number of parsers on any threads. The tables must outlive
 * it, and it must outlive its parsers. NULL with err filled when a pattern
 * cannot run (ValueError naming it: "... cannot run in C: ..."). */
typedef struct cp_engine cp_engine;
cp_engine *cp_engine_new(const cp_tables *tables, cp_error *err);
void cp_engine_free(cp_engine *engine);
/* cp_parser_new / cp_parser_new_ids over a shared engine. */
cp_parser *cp_engine_parser(const cp_engine *engine, const char *prompt, size_t prompt_len,
                            const cp_parser_options *opts, cp_error *err);
cp_parser *cp_engine_parser_ids(const cp_engine *engine, const char *prompt, size_t prompt_len,
                                const int64_t *prompt_ids, size_t n_prompt_ids, const cp_parser_options *opts,
                                cp_error *err);
/* cp_parse_response / cp_parse_ids over a shared engine (those two build one
 * per call). */
char *cp_engine_parse_response(const cp_engine *engine, const char *text, size_t len, const char *prompt,
                               size_t prompt_len, const cp_parser_options *opts, size_t *out_len, cp_error *err);
char *cp_engine_parse_ids(const cp_engine *engine, const int64_t *ids, size_t n, const char *prompt,
                          size_t prompt_len, const int64_t *prompt_ids, size_t n_prompt_ids,
                          const cp_parser_options *opts, size_t *out_len, cp_error *err);

/* Free what the parser API returned. NULL is allowed. */
void cp_free(void *p);

/* JSON text of events and messages is Python's json.dumps(value,
 * separators=(",", ":")) (ensure_ascii: pure ASCII; numbers spelled as
 * Python writes them, NaN/Infinity included). Events are objects as Python's
 * ResponseParser yields them; a region_malformed event's "error" is
 * {"type": <Python class>, "message": <str(exception)>}.
 *
 * Token mode: cp_parser_new_ids, cp_parser_feed_ids, cp_parse_ids below. */

/* Make a parser fed token ids (Python's TokenParser), from tables with a
 * token section (FORMAT.md section 8; without one: ValueError). The prompt is
 * text (`prompt`, prompt_ids NULL) or token ids (`prompt_ids`, prompt NULL);
 * both NULL is the ValueError Python raises (pass "" or an empty id list to
 * opt out). Ids are decoded exactly as the tokenizer decodes them and each
 * feed's text is parsed as cp_parser_feed parses text. */
cp_parser *cp_parser_new_ids(const cp_tables *tables, const char *prompt, size_t prompt_len,
                             const int64_t *prompt_ids, size_t n_prompt_ids, const cp_parser_options *opts,
                             cp_error *err);

/* Feed `n` token ids: the events of the text they complete, as a JSON list
 * (cp_free), or NULL with err filled (an id out of range: Python's ValueError,
 * nothing consumed, the parser still usable). Only for cp_parser_new_ids
 * parsers; cp_parser_feed on them feeds text (refused while the bytes of a
 * character split across tokens are held). cp_parser_finalize ends both. */
char *cp_parser_feed_ids(cp_parser *p, const int64_t *ids, size_t n, size_t *out_len, cp_error *err);

/* The message of a whole sequence of ids (Python's parse_tokens), as JSON
 * text (cp_free), or NULL with err filled. Prompt as for cp_parser_new_ids.
 * (Everywhere, an id pointer may be NULL only with a count of 0.) */
char *cp_parse_ids(const cp_tables *tables, const int64_t *ids, size_t n, const char *prompt, size_t prompt_len,
                   const int64_t *prompt_ids, size_t n_prompt_ids, const cp_parser_options *opts, size_t *out_len,
                   cp_error *err);

/* ---------------------------------------------------------------------------
 * EVENTS AS STRUCTS
 *
 * The same events as the JSON API's, as plain structs in a parser-owned array
 * that stays valid until the parser's next call (feed, finalize, free): no
 * JSON is written and, on the token path's steady state (a region open and
 * tokens that cannot decide a delimiter), nothing is allocated (the buffers
 * are reused and grow geometrically).
 *
 * Every event has its type and, where it names a field, the field's index in
 * the template (cp_parser_field_name) and name. A region_chunk has its text
 * (and dirty flag). An event built by the character engine (any type) also has
 * `detail`: its complete value (spans, captures, a region_close's value...),
 * which cp_events_json writes; fast-path region_chunks have no detail and need
 * none. cp_events_json(events) is byte for byte the JSON the JSON API returns
 * for the same feed (the JSON API is that call over these events).
 * ------------------------------------------------------------------------- */
typedef enum cp_event_type {
    CP_EVENT_OTHER = 0,              /* a type not listed here: see its JSON */
    CP_EVENT_REGION_OPEN = 1,
    CP_EVENT_REGION_CHUNK = 2,
    CP_EVENT_REGION_CLOSE = 3,
    CP_EVENT_REGION_MALFORMED = 4
} cp_event_type;

typedef struct cp_event {
    cp_event_type type;
    long field;                  /* index of the event's field, -1 when it names none */
    const char *field_name;      /* UTF-8, not NUL-terminated (NULL when field < 0) */
    size_t field_name_len;
    const char *text;            /* the event's "text" (UTF-8), NULL when it has none */
    size_t text_len;
    int dirty;                   /* region_chunk's "dirty" */
    const void *detail;          /* the engine's value of the event (opaque), NULL for a fast-path chunk */
} cp_event;

/* Feed token ids (a parser from cp_parser_new_ids / cp_engine_parser_ids):
 * *events (parser-owned, valid until the next call on p) and *count get the
 * feed's events. 0, or -1 with err (as cp_parser_feed_ids fails). */
int cp_parser_feed_ids_events(cp_parser *p, const int64_t *ids, size_t n, const cp_event **events, size_t *count,
                              cp_error *err);
/* Feed UTF-8 text, the events as structs (as cp_parser_feed). */
int cp_parser_feed_events(cp_parser *p, const char *text, size_t len, const cp_event **events, size_t *count,
                          cp_error *err);
/* The events as the JSON list the JSON API writes (caller frees with cp_free). */
char *cp_events_json(const cp_event *events, size_t count, size_t *out_len, cp_error *err);
/* The name of field index `field` of the parser's template (NULL when out of range). */
const char *cp_parser_field_name(const cp_parser *p, long field, size_t *len);

#ifdef __cplusplus
}
#endif

#endif /* CHATPARSE_H */
