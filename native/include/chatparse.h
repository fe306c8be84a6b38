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
 * ("chatparse table file: ..."), exception "ValueError". Patterns the runtime
 * cannot run are refused by name. Never reads outside [bytes, bytes+n), never
 * crashes or hangs, whatever the bytes; loading is linear in n (except the
 * prefilter check, FORMAT.md step 8).
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

#ifdef __cplusplus
}
#endif

#endif /* CHATPARSE_H */
