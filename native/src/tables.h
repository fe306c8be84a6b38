/*
 * tables.h - a loaded `.cpt` table file (FORMAT.md), library-internal view.
 *
 * cp_tables_load (chatparse.h) validates a file with every check of FORMAT.md
 * section 1, steps 1-8 (and section 8.4 for a token section) and builds this
 * struct. After loading, the tables are read-only: any number of parsers and
 * threads may read them at once. Every index the file holds has been checked,
 * so the accessors below never read out of bounds for in-range arguments
 * (states < n_states, classes < n_classes, patterns < n_patterns, tokens <
 * size), which the engine guarantees by construction.
 *
 * Integers in the arrays are little-endian in the file; the data section is
 * copied to 16-byte aligned memory and read natively (the library refuses to
 * build on a big-endian host).
 */
#ifndef CHATPARSE_TABLES_H
#define CHATPARSE_TABLES_H

#include <stddef.h>
#include <stdint.h>

#include "chatparse.h"
#include "value.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CP_HEADER_SIZE 160
#define CP_TRAILER_SIZE 32
#define CP_N_CODEPOINTS 0x110000u

/* Element types of the data section (FORMAT.md section 3, "arrays"). */
typedef enum cp_dtype { CP_U1, CP_I1, CP_U2, CP_I2, CP_U4, CP_I4 } cp_dtype;

/* One array of the data section, as its metadata entry describes it. */
typedef struct cp_array {
    char *name;            /* e.g. "mode0.trans", "tokens.offsets" (owned, NUL-terminated) */
    size_t name_len;       /* bytes (a name from the file may hold a NUL) */
    cp_dtype dtype;
    int ndim;              /* 1 or 2 */
    size_t shape[2];       /* shape[1] is 1 for a 1-D array */
    size_t count;          /* shape[0] * shape[1] elements */
    size_t offset, nbytes; /* within the data section */
    const void *data;      /* count elements of dtype (into cp_tables.data) */
} cp_array;

/* Element i (flat index) of an array of any dtype, widened. i < a->count. */
int64_t cp_array_get(const cp_array *a, size_t i);

/* One delimiter pattern (metadata "patterns", FORMAT.md section 5), in the
 * template's order: per field, its open then its close. */
typedef struct cp_pattern {
    int is_close;          /* 0: "open", 1: "close" (kind) */
    size_t field;          /* index into the template's fields */
    int is_regex;          /* key "open_pattern"/"close_pattern" (1) or "open"/"close" literals (0) */
    const char *source;    /* the Python `regex` source (NUL-terminated, in the metadata value) */
    size_t source_len;
    int exact;             /* the automaton decides it alone (no regex needed) */
    int named_groups;      /* the source declares a named group */
    const cp_value *reasons;  /* list of strings: why it is not exact */
    int64_t history;       /* 1..2^31-1 */
    int64_t horizon;       /* -1..2^31-1 */
} cp_pattern;

/* One parser mode's delimiter automaton (FORMAT.md section 4): mode 0 is the
 * outside mode, mode i+1 is inside field i. */
typedef struct cp_mode {
    size_t n_watched;            /* W: patterns this mode watches */
    size_t *watched;             /* W pattern indices (owned) */
    size_t n_states;             /* S >= 1; state 0 is the dead state */
    const cp_array *trans;       /* [S, n_classes] u1/u2/u4: next state */
    const cp_array *eot;         /* [S] u1/u2/u4: state after end of text */
    const cp_array *acc;         /* [S, W] i1: -1 no, 0 accepts (needs regex/lookahead), 1 accepts */
    const cp_array *term;        /* [S] u1: 1 when no longer match is possible */
    size_t start0;               /* start state at offset 0 */
    size_t startN;               /* start state at offsets > 0 */
    const cp_value *first;       /* the prefilter as the file holds it (checked equal to the automaton's):
                                    [] / null / [[ranges, ranges|null], ...] */
} cp_mode;

/* trans[state][cls], eot[state], acc[state][w], term[state]. */
static inline uint32_t cp_mode_trans(const cp_mode *m, size_t state, size_t cls, size_t n_classes) {
    size_t i = state * n_classes + cls;
    switch (m->trans->dtype) {
    case CP_U1: return ((const uint8_t *)m->trans->data)[i];
    case CP_U2: return ((const uint16_t *)m->trans->data)[i];
    default: return ((const uint32_t *)m->trans->data)[i];
    }
}
static inline uint32_t cp_mode_eot(const cp_mode *m, size_t state) {
    switch (m->eot->dtype) {
    case CP_U1: return ((const uint8_t *)m->eot->data)[state];
    case CP_U2: return ((const uint16_t *)m->eot->data)[state];
    default: return ((const uint32_t *)m->eot->data)[state];
    }
}
static inline int cp_mode_acc(const cp_mode *m, size_t state, size_t w) {
    return ((const int8_t *)m->acc->data)[state * m->n_watched + w];
}
static inline int cp_mode_term(const cp_mode *m, size_t state) {
    return ((const uint8_t *)m->term->data)[state];
}

/* Token flags (FORMAT.md section 8.2). */
#define CP_TOKEN_SKIP 1
#define CP_TOKEN_TEXT 2
#define CP_TOKEN_BYTE 4

/* The token section (FORMAT.md section 8), present when has_tokens. */
typedef struct cp_token_section {
    size_t size;                 /* number of token ids */
    int kind_pieces;             /* kind: 0 "bytes", 1 "pieces" */
    uint32_t strip_char;         /* code point */
    int64_t strip_start;
    int cleanup;
    const cp_value *name;        /* string */
    const cp_value *tokenizer_sha256;   /* null or 64 lowercase hex digits */
    const uint32_t *offsets;     /* [size+1]: token i's bytes are bytes[offsets[i]..offsets[i+1]) */
    const uint8_t *bytes;        /* [n_bytes] */
    size_t n_bytes;
    const uint8_t *flags;        /* [size] CP_TOKEN_* */
    const uint32_t *first_ids;   /* [n_first] increasing ids with a first-token text */
    size_t n_first;
    const uint32_t *first_offsets;  /* [n_first+1] into first_bytes */
    const uint8_t *first_bytes;
    size_t n_first_bytes;
    const uint8_t *inert;        /* [n_modes, size] 0/1 */
    const uint32_t *delims;      /* [n_delims, 3]: (mode, token, pattern), sorted by (mode, token) */
    size_t n_delims;
} cp_token_section;

struct cp_tables {
    /* header */
    uint32_t format_version;
    uint32_t flags;              /* bit 0 vocabulary hash, bit 1 token section */
    char chatparse_version[17];  /* NUL-terminated */
    uint8_t template_sha256[32];
    uint8_t vocab_sha256[32];    /* all zero without flag bit 0 */
    int has_vocab_hash;
    int has_tokens;

    /* sections */
    cp_value *spec;              /* the template section: the normalized template (object), FORMAT.md section 2 */
    cp_value *metadata;          /* the metadata section (object), FORMAT.md section 3 */
    const cp_value *js;          /* metadata "js" (port section, section 7) or NULL */

    /* data section: a 16-byte aligned copy */
    uint8_t *data;
    size_t data_len;
    cp_array *arrays;            /* in the metadata's order */
    size_t n_arrays;

    /* alphabet (FORMAT.md section 4) */
    size_t n_classes;            /* 1..65535 */
    const uint32_t *class_starts;   /* n_intervals strictly increasing code points, [0] == 0 */
    const cp_array *class_ids;      /* n_intervals ids (u1/u2) < n_classes */
    size_t n_intervals;

    cp_pattern *patterns;        /* n_patterns, template order */
    size_t n_patterns;
    cp_mode *modes;              /* n_modes = fields + 1 */
    size_t n_modes;

    cp_token_section tokens;     /* valid when has_tokens */
};

/* The class of a code point (0..0x10FFFF; larger values give the class of
 * the last interval): a binary search over class_starts. */
size_t cp_class_of(const cp_tables *t, uint32_t codepoint);

/* The array of that name, or NULL. */
const cp_array *cp_tables_array(const cp_tables *t, const char *name);

/* The template's field i (an object), or NULL. */
const cp_value *cp_tables_field(const cp_tables *t, size_t i);
size_t cp_tables_n_fields(const cp_tables *t);

#ifdef __cplusplus
}
#endif

#endif /* CHATPARSE_TABLES_H */
