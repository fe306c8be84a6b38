/*
 * vectors.h - the conformance-vector runner's interface (chatparse-vectors).
 *
 * tools/chatparse_vectors.c reads every *.json of a vector directory (sorted
 * by name, as js/run_vectors.mjs does), parses it with cp_json_parse and hands
 * it to the function of its "kind":
 *
 *   "invalid"  -> cp_vectors_invalid   (tools/vectors_invalid.c)
 *   "template" -> cp_vectors_template  (tools/vectors_template.c, engine work)
 *   "tokens"   -> cp_vectors_tokens    (tools/vectors_template.c, engine work)
 *   "values"   -> cp_vectors_values    (tools/vectors_values.c)
 *   "regex"    -> cp_vectors_regex     (tools/vectors_regex.c)
 *
 * A kind function counts every case it checks with exactly one call of
 * cp_vectors_pass or cp_vectors_fail (a case that cannot be run is a
 * failure, never a pass). Until a kind's file exists, the runner's weak
 * default reports each of its cases failed with the reason
 * "not implemented in the C runtime yet".
 */
#ifndef CHATPARSE_VECTORS_H
#define CHATPARSE_VECTORS_H

#include <stddef.h>

#include "value.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How the vectors are run. */
typedef enum cp_vectors_mode {
    CP_VECTORS_CHAR = 0,    /* --mode char (default): text fed as the vector's feeds */
    CP_VECTORS_TOKEN = 1    /* --mode token: token ids where the vector has them */
} cp_vectors_mode;

/* The run's state: options and the tally. */
typedef struct cp_vectors_run {
    const char *dir;        /* the vector directory (files are relative to it) */
    cp_vectors_mode mode;
    int verbose;            /* print "ok FILE ID" for passing cases */
    size_t total;           /* cases counted */
    size_t failed;
    char **failures;        /* "FILE ...: why" lines, printed as "FAIL <line>" */
    size_t failures_cap;
} cp_vectors_run;

/* Count one passing case; with --verbose prints "ok <what>" (what may be NULL). */
void cp_vectors_pass(cp_vectors_run *run, const char *what);
/* Count one failing case with a printf-formatted line (without "FAIL "). */
void cp_vectors_fail(cp_vectors_run *run, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Read a whole file (path relative to run->dir when not absolute) into a
 * malloc'd buffer; NULL when it cannot be read. */
unsigned char *cp_vectors_read(const cp_vectors_run *run, const char *name, size_t *len);

/* The kind functions: `file` is the vector file's name (for messages), `vec`
 * its parsed JSON. Each counts its cases as said above. */
void cp_vectors_invalid(cp_vectors_run *run, const char *file, const cp_value *vec);
void cp_vectors_template(cp_vectors_run *run, const char *file, const cp_value *vec);
void cp_vectors_tokens(cp_vectors_run *run, const char *file, const cp_value *vec);
void cp_vectors_values(cp_vectors_run *run, const char *file, const cp_value *vec);
void cp_vectors_regex(cp_vectors_run *run, const char *file, const cp_value *vec);

/* The number of cases of a vector of any kind (what a kind function that is
 * not implemented yet reports failed): "cases", or the cases of every
 * "patterns" entry (regex), or 1 (invalid). */
size_t cp_vectors_case_count(const cp_value *vec);

#ifdef __cplusplus
}
#endif

#endif /* CHATPARSE_VECTORS_H */
