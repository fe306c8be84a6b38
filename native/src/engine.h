/*
 * engine.h - the character engine's run-time form of loaded tables, and the
 * pieces of the engine that share it (library-internal).
 *
 * Files, one concept each:
 *   engine_tables.c  cp_eng: what the engine runs, built once from validated
 *                    cp_tables (modes as flat arrays, the compiled patterns,
 *                    start guards with their projected states, the start
 *                    anchor, the content regexes lent to the value layer).
 *                    Read-only afterwards: any number of parsers may share
 *                    one (the public API still builds one per parser,
 *                    engine_api.c says why).
 *   scanner.c        the delimiter automaton stepping (FORMAT.md section 6,
 *                    "Scanner"): attempts, decide, resolve.
 *   stream.c         the parser over it (section 6, "Parser"): regions,
 *                    events, values, dialects, close_json_end, on_error.
 *   engine_tokens.c  the token mode: ids decoded as the tokenizer decodes
 *                    them (FORMAT.md section 8), the text fed to stream.c.
 *   engine_api.c     the public parser API of chatparse.h (cp_parser_*).
 *
 * Offsets inside the engine are BYTE offsets of the UTF-8 text a parser was
 * given (the cut prefix, then every feed); events report CODE POINT offsets,
 * as Python does. Text handed to a scanner is always valid UTF-8 (the parser
 * holds a character split across feeds and refuses ill-formed input).
 */
#ifndef CHATPARSE_ENGINE_H
#define CHATPARSE_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "chatparse.h"
#include "regex.h"
#include "tables.h"
#include "value.h"
#include "values.h"
#include "buf.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A start guard (FORMAT.md section 9, "Start guards") for one character
 * class: the distinct leading lookbehinds of the candidates there, and the
 * state to start in by the set of those that fail (bit j: rxs[j] fails). */
typedef struct cp_eng_lead {
    size_t n_rx;
    const cp_rx **rxs;      /* borrowed from cp_eng.lookbehinds */
    uint32_t *by_failed;    /* 1 << n_rx entries; [0] is the unguarded start */
} cp_eng_lead;

#define CP_STEP_BAIL UINT32_MAX

typedef struct cp_eng_mode {
    uint32_t n_states;      /* the file's states, then the projected ones */
    uint32_t n_classes;
    uint32_t W;             /* watched patterns */
    uint32_t *patterns;     /* local pattern -> global pattern index */
    uint32_t *trans;        /* [n_states * n_classes] */
    uint32_t *eot;          /* [n_states] */
    uint8_t *term;          /* [n_states] */
    uint32_t *acc_off;      /* [n_states + 1]: accepts of s are acc_item[acc_off[s] .. acc_off[s+1]) */
    uint32_t *acc_item;     /* local pattern | (characters back << 31) */
    uint32_t start0, startN;
    /* Prefilter (derived, FORMAT.md section 4 allows a runtime its own):
     * can_start[c] is 0 where an attempt starting with a character of class c
     * at an offset > 0 dies at once without a match; NULL: anywhere (startN
     * accepts the empty string). */
    uint8_t *can_start;
    uint8_t start_ascii[128]; /* can_start of the class of each ASCII character (all 1 when can_start is NULL) */
    /* For the steps that decide nothing (cp_scanner_push_undecided), with can_start: sflags[s] bit 0: state s
     * accepts, bit 1: it is terminal; start_step[c]: what an attempt started at a character of class c (offset
     * > 0) is after it: 0 none (nothing starts, or it ends at once without a match), CP_STEP_BAIL a start guard
     * or an accept (the step may decide), else its state. NULL without can_start. */
    uint8_t *sflags;
    uint32_t *start_step;
    /* Start guards per class (NULL entries: none), for startN and start0. */
    cp_eng_lead **lead, **lead0;
    cp_eng_lead *lead_store;  /* the distinct guards of lead (owned) */
    size_t n_lead_store;
    cp_eng_lead *lead_store0; /* ... of lead0 when it has its own */
    size_t n_lead_store0;
} cp_eng_mode;

typedef struct cp_eng_pattern {
    int is_open;
    uint32_t field;
    int exact, named_groups;
    long long horizon;      /* -1: unbounded */
    cp_rx *rx;              /* regex-decided or named groups: the translation; else NULL */
} cp_eng_pattern;

typedef struct cp_eng_content_rx {
    char *pattern;          /* the Python tag_pattern (key of js.content) */
    size_t len;
    cp_rx *rx;              /* NULL: cannot run (see error) */
    char exception[32];
    char *error;            /* message when rx is NULL */
} cp_eng_content_rx;

typedef struct cp_eng {
    const cp_value *spec;       /* borrowed from the tables: the template section */
    const cp_value *defaults;
    size_t n_fields;
    const cp_value **fields;    /* borrowed field dicts */
    const char **field_names;   /* borrowed */
    size_t *field_name_lens;
    uint8_t *dirty;             /* per field: content is not text/int/float/bool */
    uint8_t *close_json_end;    /* per field */
    uint8_t *on_error;          /* per field: 0 raise, 1 content, 2 drop */
    long implicit;              /* field index, -1 none */

    uint32_t n_classes;
    uint16_t *bmp;              /* class of U+0000..U+FFFF */
    size_t n_intervals;
    uint32_t *class_starts;     /* for the rest: binary search */
    uint16_t *class_ids;

    size_t n_patterns;
    cp_eng_pattern *patterns;
    size_t n_modes;
    cp_eng_mode *modes;
    size_t n_lookbehinds;
    cp_rx **lookbehinds;        /* owned: start guards' compiled lookbehinds */

    cp_rx *anchor;              /* the start anchor (literals or pattern) */
    int anchor_is_pattern;
    size_t keep;                /* code points a scanner keeps before pos: the largest pattern history + 1
                                   (0: keep everything) */

    size_t n_content;
    cp_eng_content_rx *content;
    cp_vregex vregex;           /* the hook lent to the value layer */
    uint32_t *word_ranges;      /* js.word as sorted [lo, hi] pairs (NULL: the value layer's own \w) */
    size_t n_word_ranges;
    int word_negated;
    cp_values_env env;

    /* Token classes (cp_eng_token_classes; NULL until built, as for an engine a parser builds for itself):
     * tok_settles[mode * tok_size + id] is 1 when token id's own text, fed to a quiet scanner in that mode at an
     * offset > 0, leaves it quiet with nothing recorded (every attempt it starts dies inside it without an
     * accept, no start guard asked): its text is region text, as an inert token's. */
    uint8_t *tok_settles;
    size_t tok_size;
    /* The same, packed with what the fast path reads of a token (one cache line fetch for a token first seen),
     * when there are at most 8 modes (else NULL): its bytes at tokens.bytes + off, len of them (0 also for 64
     * kB and more); cps: the code points of a token of its own complete, non-empty text (CP_TOKEN_TEXT) of < 64
     * kB and < 256 code points, else 0; bit m of settles: tok_settles of mode m; bytes of at most 8 are also in
     * inl, zero-padded (16 bytes a token: a token first met costs one cache miss, not two; whole 2 MB pages of
     * the table on huge pages where Linux has them). */
    struct cp_tok_info {
        uint32_t off;
        uint16_t len;
        uint8_t cps, settles;
        char inl[8];
    } *tok_info;
} cp_eng;

/* Build eng->tok_settles for the tables' token section (no-op without one). 0, or -1 (MemoryError). */
int cp_eng_token_classes(cp_eng *eng, const cp_tables *t, cp_error *err);

/* Build the engine's form of loaded tables. Refuses (ValueError naming the
 * pattern: "patterns[i] (close_pattern of field 1: \"...\") cannot run in C:
 * ...") a pattern it must run - regex-decided, or with named groups, or the
 * start anchor pattern - whose translation is missing, an error, or not
 * accepted by PCRE2. NULL with err filled on failure. */
cp_eng *cp_eng_build(const cp_tables *tables, cp_error *err);
void cp_eng_free(cp_eng *eng);

/* The class of code point cp. */
static inline uint32_t cp_eng_class(const cp_eng *e, uint32_t cp) {
    if (cp < 0x10000) return e->bmp[cp];
    size_t lo = 0, hi = e->n_intervals; /* last start <= cp */
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (e->class_starts[mid] <= cp) lo = mid;
        else hi = mid;
    }
    return e->class_ids[lo];
}

/* The code point at s[*i], s being valid UTF-8 (checked where the text came in); *i moves past it. */
static inline uint32_t cp_utf8_valid_at(const unsigned char *s, size_t *i) {
    const unsigned char *u = s + *i;
    if (u[0] < 0x80) {
        *i += 1;
        return u[0];
    }
    if (u[0] < 0xE0) {
        *i += 2;
        return ((uint32_t)(u[0] & 0x1F) << 6) | (u[1] & 0x3F);
    }
    if (u[0] < 0xF0) {
        *i += 3;
        return ((uint32_t)(u[0] & 0x0F) << 12) | ((uint32_t)(u[1] & 0x3F) << 6) | (u[2] & 0x3F);
    }
    *i += 4;
    return ((uint32_t)(u[0] & 0x07) << 18) | ((uint32_t)(u[1] & 0x3F) << 12) | ((uint32_t)(u[2] & 0x3F) << 6) |
           (u[3] & 0x3F);
}

/* Room for live attempts in cp_undecided_steps. */
#define CP_UNDECIDED_LIVE 32

/* The DFA steps of the n bytes of valid UTF-8 at s, which begin at offset `base` of a text in mode m (m has
 * can_start; base > 0, or m's start0 is its startN: attempts start as at an offset > 0), from the *nl
 * attempts in st[] / at[] (states, start offsets; room for CP_UNDECIDED_LIVE): 1 with the attempts alive
 * after them in st / at / *nl, in start order; 0 as soon as a step could decide something (an accepting
 * state, a start guard, more live attempts than there is room for), st / at / *nl then meaningless. The steps
 * of cp_scanner_push_undecided, and of the token table's `settles`. */
static inline int cp_undecided_steps(const cp_eng *eng, const cp_eng_mode *m, const unsigned char *s, size_t n,
                                     size_t base, uint32_t *st, size_t *at, size_t *nl) {
    const uint8_t *sflags = m->sflags;
    const uint32_t ncls = m->n_classes;
    size_t live = *nl, i = 0;
    while (i < n) {
        size_t here = base + i;
        uint32_t cls = cp_eng_class(eng, cp_utf8_valid_at(s, &i));
        size_t w = 0;
        for (size_t k = 0; k < live; k++) {
            uint32_t next = m->trans[(size_t)st[k] * ncls + cls];
            if (!next) continue;
            if (sflags[next] & 1) return 0;
            if (!(sflags[next] & 2)) {
                st[w] = next;
                at[w++] = at[k];
            }
        }
        live = w;
        uint32_t first = m->start_step[cls];
        if (!first) continue;
        if (first == CP_STEP_BAIL || live == CP_UNDECIDED_LIVE) return 0;
        st[live] = first;
        at[live++] = here;
    }
    *nl = live;
    return 1;
}

/* ------------------------------------------------------------------ scanner */

typedef struct cp_attempt {
    size_t start;           /* byte offset */
    uint32_t state;
    long long fin;          /* -1 undecided, else the byte offset it was decided at */
    uint32_t n_ends;
    uint32_t *loc;          /* [W max]: local patterns in the order first recorded */
    size_t *end;            /* their match ends */
} cp_attempt;

typedef struct cp_scanner {
    const cp_eng *eng;
    const cp_eng_mode *mode;
    char *text;             /* the received text from offset `base` on (UTF-8): what is before the
                               history a pattern may read back from pos is dropped (trim) */
    size_t base;            /* absolute offset of text[0] */
    size_t end, cap;        /* bytes received (absolute end), allocated */
    size_t pos;             /* first byte not yet handed out */
    size_t scan;            /* next byte to step */
    size_t cp_pos;          /* code points before pos */
    cp_attempt *att;        /* live attempts in start order: att[0 .. n_att) */
    size_t n_att, cap_att;  /* slots (each with its own loc/end buffers) */
    uint32_t w_max;
    int eot_fed;
    long long stop;         /* no delimiter starting after this offset matters (-1: none) */
    cp_rx_match m;
} cp_scanner;

/* A decided delimiter. */
typedef struct cp_decision {
    size_t s, e;            /* byte span */
    long pattern;           /* global pattern index, CP_JSON_END_PATTERN for close_json_end */
    cp_value *captures;     /* named groups that took part (owned; NULL: none) */
} cp_decision;

#define CP_JSON_END_PATTERN (-1L)

/* A push trims the kept text once that frees CP_SCANNER_TRIM_MIN bytes and half the buffer (scanner.c). */
#ifndef CP_SCANNER_TRIM_MIN
#define CP_SCANNER_TRIM_MIN 4096 /* (a test build sets 1: every push trims what it can) */
#endif

int cp_scanner_init(cp_scanner *sc, const cp_eng *eng);
void cp_scanner_fini(cp_scanner *sc);
/* Append n bytes of valid UTF-8 (whole characters). 0, or -1 (MemoryError). */
int cp_scanner_push(cp_scanner *sc, const char *s, size_t n, cp_error *err);
/* Switch to mode i at byte offset `at`: attempts dropped, pos = scan = at. */
void cp_scanner_restart(cp_scanner *sc, size_t mode, size_t at);
/* No attempt and everything stepped. */
int cp_scanner_quiet(const cp_scanner *sc);
/* The first offset that may still belong to a delimiter. */
size_t cp_scanner_safe_end(const cp_scanner *sc);
/* Hand out [pos, upto): returns a pointer into the text and its length; pos
 * moves to upto (cp_pos follows). */
const char *cp_scanner_take(cp_scanner *sc, size_t upto, size_t *len);
/* The next delimiter once no continuation can change it: 1 with d filled, 0
 * when nothing is decided yet, -1 on error (err). With eos, the end of the
 * stream has come (the EOT symbol is fed once). */
int cp_scanner_decide(cp_scanner *sc, int eos, cp_decision *d, cp_error *err);

/* Append n bytes of valid UTF-8 (whole characters) and step them when that cannot decide anything: every live
 * attempt is undecided without a match, and no attempt (live or started in the text) reaches an accepting
 * state or needs a start guard. Then the attempts are left exactly as cp_scanner_decide would leave them
 * (dead ones dropped, new ones added), scan = end: 1. 0 when that does not hold (nothing changed), -1 on
 * error. `inert`: the caller knows that the text, stepped from no attempt, leaves none and records nothing
 * (an inert token, or one that settles: cp_eng.tok_settles); it is then not stepped when no attempt is live.
 * `text` has 8 readable bytes (n may be less). */
int cp_scanner_push_undecided(cp_scanner *sc, const char *text, size_t n, int inert, cp_error *err);

/* ------------------------------------------------------------------ stream */

typedef struct cp_dialect_opts {
    int offsets;            /* spans (and captures) on region events */
    int malformed_event;    /* a failing value is a region_malformed event */
    int prompt_chunks;      /* prompt characters released late are chunks too */
    int input_text;         /* keep the whole input */
} cp_dialect_opts;

extern const cp_dialect_opts CP_DIALECT_TRANSFORMERS;
extern const cp_dialect_opts CP_DIALECT_VLLM;

typedef struct cp_stream cp_stream;

/* A parser for one generation (the JS ResponseParser): the prefix is cut after
 * the start anchor's last match and fed first (its events: initial events).
 * `tools` is the JSON tools list or NULL. NULL with err on failure (the
 * prefix's own events may fail: Python's constructor raises then too). */
cp_stream *cp_stream_new(const cp_eng *eng, const char *prefix, size_t prefix_len, const cp_value *tools,
                         const cp_dialect_opts *dialect, cp_error *err);
void cp_stream_free(cp_stream *p);
/* The events of the prefix (borrowed list). */
const cp_value *cp_stream_initial_events(const cp_stream *p);
/* Feed UTF-8 text (a character may be split across feeds: its bytes are
 * held). Returns a new list of events, or NULL with err (the parser is then
 * failed: later calls raise RuntimeError, as Python's). Ill-formed UTF-8 is a
 * ValueError that consumes nothing and leaves the parser usable. */
cp_value *cp_stream_feed(cp_stream *p, const char *text, size_t len, cp_error *err);
/* The end of the stream: *message gets the message (owned), the return value
 * the final events; NULL with err on failure. */
cp_value *cp_stream_finish(cp_stream *p, cp_value **message, cp_error *err);
/* The dialect's input text (the cut prefix, then every feed), or NULL when
 * the dialect does not keep it. *cp_len_prefix: code points of the cut prefix. */
const char *cp_stream_input_text(const cp_stream *p, size_t *len, size_t *cp_len_prefix);

/* parse_response: the message of a whole text (NULL with err). In a dialect
 * with region_malformed events, the whole text is parsed first, then a missing
 * required field raises, else the first unrecovered malformed region's error. */
cp_value *cp_parse_response_value(const cp_eng *eng, const char *text, size_t len, const char *prefix, size_t prefix_len,
                            const cp_value *tools, const cp_dialect_opts *dialect, cp_error *err);

/* Feed text (whole valid characters) that cannot decide a delimiter while a region is open and nothing is
 * held (cp_scanner_push_undecided): the region text it releases, *out (into the scanner's buffer, valid until
 * the next feed) and *out_len (0: no event), is what cp_stream_feed would hand out as its one region_chunk.
 * Returns the open region's field, -1 when that does not apply (nothing changed), -2 on error (failed). */
/* cp_stream_feed_undecided for text the caller knows settles from quiet (cp_eng.tok_settles), when the scanner
 * is quiet or every live attempt dies at the text's first character: the same effect and result without
 * stepping it; -1 when that does not apply (nothing changed). `cps`: the code points of text; text has 8
 * readable bytes (len may be less). */
long cp_stream_feed_settled(cp_stream *p, const char *text, size_t len, size_t cps, const char **out, size_t *out_len,
                            cp_error *err);
/* cp_stream_feed_settled again right after it applied, the text it handed out ending at byte offset `at`
 * (cp_stream_end then): only what can have changed since is checked. -1 when that does not apply. */
long cp_stream_feed_settled_again(cp_stream *p, size_t at, const char *text, size_t len, size_t cps,
                                  const char **out, size_t *out_len, cp_error *err);
/* 1 when cp_stream_feed_settled_again applies with at = cp_stream_end now (to text that settles): the parser
 * is where cp_stream_feed_settled leaves it. */
int cp_stream_settled(const cp_stream *p);
/* The token fast path's feed of one token's text (valid UTF-8, cps code points, 8 readable bytes) past the
 * steady state: cp_stream_feed_settled when bit `mode` of `settles` (the token's cp_eng.tok_settles bits) is
 * set, else or when that does not apply cp_stream_feed_undecided (inert: that bit). *mode gets the scanner's
 * mode; *settled_at the stream's end when the parser is left where cp_stream_feed_settled_again applies to
 * the next settling text (cp_stream_settled), else (size_t)-1. Returns as cp_stream_feed_undecided. */
long cp_stream_feed_token(cp_stream *p, const char *text, size_t len, size_t cps, unsigned settles, size_t *mode,
                          size_t *settled_at, const char **out, size_t *out_len, cp_error *err);
/* Bytes received (the scanner's end). */
size_t cp_stream_end(const cp_stream *p);
/* The index of the scanner's current mode. */
size_t cp_stream_mode(const cp_stream *p);
/* (cp_stream_feed_undecided: `text` has 8 readable bytes, len may be less) */
long cp_stream_feed_undecided(cp_stream *p, const char *text, size_t len, int inert, const char **out, size_t *out_len,
                              cp_error *err);

/* RuntimeError when the parser is finalized or failed (Python's message), else 0. */
int cp_stream_check_usable(cp_stream *p, cp_error *err);

/* The token fast path (Python's TokenParser fast state). cp_stream_quiet_region
 * gives the open region's field (and *mode the scanner's mode) when text of
 * which no character can start a delimiter in that mode would just be region
 * text now: nothing held or pending, no attempt, everything stepped, the
 * region open and past the prompt; else -1. cp_stream_hand_out then takes
 * such text as feeding it would, without making the region_chunk event (the
 * caller makes it: {"type": "region_chunk", "field", "text", "dirty"}). */
long cp_stream_quiet_region(const cp_stream *p, size_t *mode);
int cp_stream_hand_out(cp_stream *p, const char *text, size_t len, cp_error *err);
/* The same for a text feed: when the region is quiet and no character of
 * `text` (whole valid UTF-8) can start a delimiter in its mode, the text is
 * handed out and the region's field returned (the caller makes the
 * region_chunk event); -1 when it does not apply (nothing done), -2 on error. */
long cp_stream_feed_quiet(cp_stream *p, const char *text, size_t len, cp_error *err);

/* ------------------------------------------------------------------ tokens (engine_tokens.c) */

/* Incremental decode of token ids (FORMAT.md 8.2): the texts of every call
 * plus the final one are exactly the tokenizer's decode of all the ids. */
typedef struct cp_tok_decoder cp_tok_decoder;
cp_tok_decoder *cp_tok_decoder_new(const cp_token_section *v);
void cp_tok_decoder_free(cp_tok_decoder *d);
/* 1 while the bytes of a character split across tokens are held. */
int cp_tok_decoder_holds(const cp_tok_decoder *d);
/* Python's range check of ids: ValueError "token id N is out of range ...". */
int cp_tok_check_ids(const cp_token_section *v, const int64_t *ids, size_t n, cp_error *err);
/* Decode ids[0..n) (range-checked first) and append the text they complete
 * to out; `final` ends the sequence (held bytes and clean-up flushed). */
int cp_tok_decode(cp_tok_decoder *d, const int64_t *ids, size_t n, int final, cp_buf *out, cp_error *err);

/* The checks a token parser makes on the tables (FORMAT.md 8.4, last
 * paragraph; JS tokenBinding) with Python's messages. */
int cp_tok_binding_check(const cp_eng *eng, const cp_tables *t, cp_error *err);

/* A parser fed token ids (Python's TokenParser): the prompt is `prefix` text
 * (NULL: required unless has_ids) or the decode of prefix_ids; each feed of
 * ids is decoded and its text fed to the character engine. */
typedef struct cp_tok_stream cp_tok_stream;
cp_tok_stream *cp_tok_stream_new(const cp_eng *eng, const cp_tables *t, const char *prefix, size_t prefix_len,
                                 const int64_t *prefix_ids, size_t n_ids, int has_ids, const cp_value *tools,
                                 const cp_dialect_opts *dialect, cp_error *err);
void cp_tok_stream_free(cp_tok_stream *p);
cp_stream *cp_tok_stream_core(cp_tok_stream *p);
/* 1 while the decoder holds the bytes of a split character. */
int cp_tok_stream_holds(const cp_tok_stream *p);
cp_value *cp_tok_stream_feed(cp_tok_stream *p, const int64_t *ids, size_t n, cp_error *err);
/* The fast path alone: when the decoder holds nothing, every id is a token
 * of its own complete text, a region is open and that text cannot decide a
 * delimiter (cp_stream_feed_undecided), the text is fed: 1 with *field set
 * and the released region text in *out / *out_len (0: no event; valid until
 * the next feed). 0 when it does not apply (nothing done), -1 error.
 * `scratch` holds the text of several ids (reused by the caller). */
int cp_tok_stream_feed_fast(cp_tok_stream *p, const int64_t *ids, size_t n, cp_buf *scratch, const char **out,
                            size_t *out_len, long *field, cp_error *err);
cp_value *cp_tok_stream_finish(cp_tok_stream *p, cp_value **message, cp_error *err);
/* parse_tokens: the message of a whole sequence of ids. */
cp_value *cp_parse_tokens_value(const cp_eng *eng, const cp_tables *t, const int64_t *ids, size_t n,
                                const char *prefix, size_t prefix_len, const int64_t *prefix_ids, size_t n_prefix_ids,
                                int has_prefix_ids, const cp_value *tools, const cp_dialect_opts *dialect,
                                cp_error *err);

#ifdef __cplusplus
}
#endif

#endif /* CHATPARSE_ENGINE_H */
