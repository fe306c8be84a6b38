/*
 * engine_api.c - the parser part of the public API (chatparse.h, the
 * "PARSER API" block): cp_stream behind an opaque cp_parser, events and
 * messages out as Python's json.dumps(v, separators=(",", ":")) text.
 *
 * cp_parser_new builds the parser's own cp_eng from the tables (the compiled
 * patterns and start guards, 0.1-1 ms); a cp_engine builds it once and any
 * number of parsers, on any threads, share it (cp_engine_parser): less time
 * per parser and far less memory when many streams are live.
 */
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "engine.h"
#include "error.h"

struct cp_engine {
    cp_eng *eng;
    const cp_tables *tables;
};

struct cp_parser {
    const cp_eng *eng;          /* an engine's (cp_engine_parser) or its own (owned) */
    cp_eng *owned;
    cp_stream *stream;          /* the character engine (owned by tok when there is one) */
    cp_tok_stream *tok;         /* token mode: ids decoded, then fed to stream */
    char *initial_json;
    size_t initial_len;
    /* the struct events of the last feed (cp_parser_feed*_events): reused, grown geometrically */
    cp_event *ev;
    size_t ev_cap;
    long ev_field;              /* ev[0] is a fast-path region_chunk of this field but its text (-1: not so) */
    cp_buf fast;                /* the fast path's text (what its region_chunk points into) */
    cp_value *held;             /* the engine's events of the last feed (what the structs point into) */
};

/* A str as Python's json.dumps writes it with ensure_ascii (valid UTF-8 in). */
static void json_str(cp_buf *b, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    /* plain[c]: byte c is written as itself (printable ASCII but '"' and '\\') */
    static const unsigned char plain[256] = {
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
        1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1,
        1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    };
    cp_buf_putc(b, '"');
    size_t i = 0, run = 0;
    while (i < n) {
        const unsigned char *u = (const unsigned char *)s;
        while (i + 4 <= n && plain[u[i]] && plain[u[i + 1]] && plain[u[i + 2]] && plain[u[i + 3]]) i += 4;
        if (i < n && plain[u[i]]) {
            i++;
            continue;
        }
        if (i >= n) break;
        unsigned char c = u[i];
        cp_buf_append(b, s + run, i - run);
        if (c < 0x80) {
            i++;
            switch (c) {
            case '"': cp_buf_puts(b, "\\\""); break;
            case '\\': cp_buf_puts(b, "\\\\"); break;
            case '\n': cp_buf_puts(b, "\\n"); break;
            case '\r': cp_buf_puts(b, "\\r"); break;
            case '\t': cp_buf_puts(b, "\\t"); break;
            case '\b': cp_buf_puts(b, "\\b"); break;
            case '\f': cp_buf_puts(b, "\\f"); break;
            default: {
                char u[7] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15], 0};
                cp_buf_puts(b, u);
            }
            }
        } else {
            int32_t cp = cp_utf8_decode(s, n, &i, 1);
            if (cp < 0) cp = 0xFFFD;
            uint32_t units[2];
            int nu = 0;
            if (cp >= 0x10000) {
                uint32_t v = (uint32_t)cp - 0x10000;
                units[nu++] = 0xD800 + (v >> 10);
                units[nu++] = 0xDC00 + (v & 0x3FF);
            } else {
                units[nu++] = (uint32_t)cp;
            }
            for (int k = 0; k < nu; k++) {
                char u[7] = {'\\', 'u', hex[(units[k] >> 12) & 15], hex[(units[k] >> 8) & 15], hex[(units[k] >> 4) & 15],
                             hex[units[k] & 15], 0};
                cp_buf_puts(b, u);
            }
        }
        run = i;
    }
    cp_buf_append(b, s + run, n - run);
    cp_buf_putc(b, '"');
}

/* json.dumps(v, separators=(",", ":")) into b: strings, lists, objects, ints, bools and None written here,
 * floats and big ints by cp_json_dump (Python's repr). */
static void dump_into(cp_buf *b, const cp_value *v) {
    switch (cp_type_of(v)) {
    case CP_NULL: cp_buf_puts(b, "null"); return;
    case CP_BOOL: cp_buf_puts(b, cp_bool_value(v) ? "true" : "false"); return;
    case CP_INT: cp_buf_printf(b, "%lld", (long long)cp_int_value(v)); return;
    case CP_STRING: {
        size_t n = 0;
        const char *s = cp_string_bytes(v, &n);
        json_str(b, s ? s : "", n);
        return;
    }
    case CP_LIST:
        cp_buf_putc(b, '[');
        for (size_t i = 0; i < cp_list_len(v); i++) {
            if (i) cp_buf_putc(b, ',');
            dump_into(b, cp_list_get(v, i));
        }
        cp_buf_putc(b, ']');
        return;
    case CP_OBJECT:
        cp_buf_putc(b, '{');
        for (size_t i = 0; i < cp_object_len(v); i++) {
            const cp_member *m = cp_object_at(v, i);
            if (i) cp_buf_putc(b, ',');
            json_str(b, m->key, m->key_len);
            cp_buf_putc(b, ':');
            dump_into(b, m->value);
        }
        cp_buf_putc(b, '}');
        return;
    default: {
        cp_json_dump_options o = cp_json_dump_defaults();
        size_t n = 0;
        char *s = cp_json_dump(v, &o, &n);
        if (!s) {
            b->failed = 1;
            return;
        }
        cp_buf_append(b, s, n);
        free(s);
    }
    }
}

static char *dump(const cp_value *v, size_t *len, cp_error *err) {
    cp_buf b = {0};
    dump_into(&b, v);
    size_t n = 0;
    char *s = b.failed ? NULL : cp_buf_take(&b, &n);
    cp_buf_free(&b);
    if (!s) cp_error_oom(err);
    if (len) *len = s ? n : 0;
    return s;
}

/* One struct event as JSON: its value when the engine made it, else the fast path's region_chunk. */
static void event_json(cp_buf *b, const cp_event *e) {
    if (e->detail) {
        dump_into(b, (const cp_value *)e->detail);
        return;
    }
    cp_buf_puts(b, "{\"type\":\"region_chunk\",\"field\":");
    json_str(b, e->field_name, e->field_name_len);
    cp_buf_puts(b, ",\"text\":");
    json_str(b, e->text ? e->text : "", e->text_len);
    cp_buf_puts(b, e->dirty ? ",\"dirty\":true}" : ",\"dirty\":false}");
}

char *cp_events_json(const cp_event *events, size_t count, size_t *out_len, cp_error *err) {
    cp_buf b = {0};
    cp_buf_putc(&b, '[');
    for (size_t i = 0; i < count; i++) {
        if (i) cp_buf_putc(&b, ',');
        event_json(&b, &events[i]);
    }
    cp_buf_putc(&b, ']');
    size_t n = 0;
    char *s = b.failed ? NULL : cp_buf_take(&b, &n);
    cp_buf_free(&b);
    if (!s) cp_error_oom(err);
    if (out_len) *out_len = s ? n : 0;
    return s;
}

/* Room for n events in p->ev. */
static int reserve_events(cp_parser *p, size_t n, cp_error *err) {
    if (n <= p->ev_cap) return 0;
    size_t cap = p->ev_cap ? p->ev_cap : 8;
    while (cap < n) cap *= 2;
    cp_event *e = realloc(p->ev, cap * sizeof *e);
    if (!e) {
        cp_error_oom(err);
        return -1;
    }
    p->ev = e;
    p->ev_cap = cap;
    return 0;
}

/* The fast path's events: one region_chunk of field `field` with the released text, none when it is empty. */
static inline int fast_event(cp_parser *p, long field, const char *text, size_t len, const cp_event **events,
                             size_t *count, cp_error *err) {
    *events = p->ev;
    *count = 0;
    if (!len) return 0;
    if (!p->ev_cap && reserve_events(p, 1, err) < 0) return -1;
    cp_event *e = &p->ev[0];
    if (field != p->ev_field) {
        e->type = CP_EVENT_REGION_CHUNK;
        e->field = field;
        e->field_name = p->eng->field_names[field];
        e->field_name_len = p->eng->field_name_lens[field];
        e->dirty = p->eng->dirty[field] != 0;
        e->detail = NULL;
        p->ev_field = field;
    }
    e->text = text;
    e->text_len = len;
    *events = p->ev;
    *count = 1;
    return 0;
}

static cp_event_type event_type(const char *t, size_t n) {
    static const struct {
        const char *name;
        cp_event_type type;
    } types[] = {{"region_open", CP_EVENT_REGION_OPEN},
                 {"region_chunk", CP_EVENT_REGION_CHUNK},
                 {"region_close", CP_EVENT_REGION_CLOSE},
                 {"region_malformed", CP_EVENT_REGION_MALFORMED}};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (strlen(types[i].name) == n && memcmp(types[i].name, t, n) == 0) return types[i].type;
    return CP_EVENT_OTHER;
}

/* The engine's events (a list, owned by the parser from here on) as structs pointing into it. */
static int held_events(cp_parser *p, cp_value *list, const cp_event **events, size_t *count, cp_error *err) {
    cp_value_free(p->held);
    p->held = list;
    p->ev_field = -1;
    size_t n = cp_list_len(list);
    if (reserve_events(p, n ? n : 1, err) < 0) return -1;
    for (size_t i = 0; i < n; i++) {
        const cp_value *v = cp_list_get(list, i);
        cp_event *e = &p->ev[i];
        memset(e, 0, sizeof *e);
        e->field = -1;
        e->detail = v;
        size_t l = 0;
        const char *t;
        const cp_value *m = cp_object_get_cstr(v, "type");
        if (m && cp_type_of(m) == CP_STRING && (t = cp_string_bytes(m, &l))) e->type = event_type(t, l);
        m = cp_object_get_cstr(v, "field");
        if (m && cp_type_of(m) == CP_STRING && (t = cp_string_bytes(m, &l))) {
            for (size_t f = 0; f < p->eng->n_fields; f++)
                if (p->eng->field_name_lens[f] == l && memcmp(p->eng->field_names[f], t, l) == 0) {
                    e->field = (long)f;
                    e->field_name = p->eng->field_names[f];
                    e->field_name_len = l;
                    break;
                }
        }
        m = cp_object_get_cstr(v, "text");
        if (m && cp_type_of(m) == CP_STRING) {
            e->text = cp_string_bytes(m, &e->text_len);
            if (!e->text) e->text = "";
        }
        m = cp_object_get_cstr(v, "dirty");
        e->dirty = m && cp_bool_value(m);
    }
    *events = p->ev;
    *count = n;
    return 0;
}

/* Drop what the last feed's structs pointed into. */
static void release_events(cp_parser *p) {
    if (p->held) cp_value_free(p->held);
    p->held = NULL;
    p->fast.len = 0;
    p->fast.failed = 0;
}

static int dialect_of(const cp_parser_options *opts, cp_dialect_opts *d, cp_value **tools, cp_error *err) {
    *d = CP_DIALECT_TRANSFORMERS;
    *tools = NULL;
    if (!opts) return 0;
    if (opts->dialect == CP_DIALECT_VLLM_EVENTS) *d = CP_DIALECT_VLLM;
    else if (opts->dialect != CP_DIALECT_TRANSFORMERS_EVENTS) {
        cp_error_set(err, "ValueError", "dialect must be 'transformers', 'vllm' or a chatparse.Dialect");
        return -1;
    }
    if (opts->tools_json) {
        *tools = cp_json_parse(opts->tools_json, opts->tools_json_len, err);
        if (!*tools) return -1;
    }
    return 0;
}

/* A parser over `eng` (owned by the parser when `owned`), fed text (ids == 0) or token ids. */
static cp_parser *parser_make(const cp_eng *eng, cp_eng *owned, const cp_tables *tables, int ids, const char *prompt,
                              size_t prompt_len, const int64_t *prompt_ids, size_t n_prompt_ids,
                              const cp_parser_options *opts, cp_error *err) {
    cp_dialect_opts d;
    cp_value *tools = NULL;
    if (dialect_of(opts, &d, &tools, err) < 0) {
        cp_eng_free(owned);
        return NULL;
    }
    cp_parser *p = calloc(1, sizeof *p);
    if (!p) {
        cp_eng_free(owned);
        cp_value_free(tools);
        cp_error_oom(err);
        return NULL;
    }
    p->eng = eng;
    p->owned = owned;
    p->ev_field = -1;
    if (ids) {
        p->tok = cp_tok_stream_new(eng, tables, prompt, prompt_len, prompt_ids, n_prompt_ids, prompt_ids != NULL,
                                   tools, &d, err);
        if (p->tok) p->stream = cp_tok_stream_core(p->tok);
    } else {
        p->stream = cp_stream_new(eng, prompt, prompt_len, tools, &d, err);
    }
    cp_value_free(tools);
    if (p->stream) p->initial_json = dump(cp_stream_initial_events(p->stream), &p->initial_len, err);
    if (!p->initial_json) {
        cp_parser_free(p);
        return NULL;
    }
    return p;
}

cp_parser *cp_parser_new(const cp_tables *tables, const char *prompt, size_t prompt_len,
                         const cp_parser_options *opts, cp_error *err) {
    if (!tables) {
        cp_error_set(err, "TypeError", "ResponseParser needs tables from cp_tables_load()");
        return NULL;
    }
    cp_eng *eng = cp_eng_build(tables, err);
    if (!eng) return NULL;
    return parser_make(eng, eng, tables, 0, prompt, prompt_len, NULL, 0, opts, err);
}

cp_engine *cp_engine_new(const cp_tables *tables, cp_error *err) {
    if (!tables) {
        cp_error_set(err, "TypeError", "cp_engine_new needs tables from cp_tables_load()");
        return NULL;
    }
    cp_engine *e = calloc(1, sizeof *e);
    if (!e) {
        cp_error_oom(err);
        return NULL;
    }
    e->tables = tables;
    e->eng = cp_eng_build(tables, err);
    if (!e->eng || cp_eng_token_classes(e->eng, tables, err) < 0) {
        cp_eng_free(e->eng);
        free(e);
        return NULL;
    }
    return e;
}

void cp_engine_free(cp_engine *e) {
    if (!e) return;
    cp_eng_free(e->eng);
    free(e);
}

cp_parser *cp_engine_parser(const cp_engine *e, const char *prompt, size_t prompt_len, const cp_parser_options *opts,
                            cp_error *err) {
    return parser_make(e->eng, NULL, e->tables, 0, prompt, prompt_len, NULL, 0, opts, err);
}

cp_parser *cp_engine_parser_ids(const cp_engine *e, const char *prompt, size_t prompt_len, const int64_t *prompt_ids,
                                size_t n_prompt_ids, const cp_parser_options *opts, cp_error *err) {
    return parser_make(e->eng, NULL, e->tables, 1, prompt, prompt_len, prompt_ids, n_prompt_ids, opts, err);
}

const char *cp_parser_initial_events(cp_parser *p, size_t *len) {
    if (len) *len = p->initial_len;
    return p->initial_json;
}

int cp_parser_feed_events(cp_parser *p, const char *text, size_t len, const cp_event **events, size_t *count,
                          cp_error *err) {
    *events = NULL;
    *count = 0;
    release_events(p);
    if (p->tok && cp_stream_check_usable(p->stream, err) < 0) return -1;
    if (p->tok && cp_tok_stream_holds(p->tok)) {
        cp_error_set(err, "ValueError",
                     "feed(text) while the bytes of a character split across tokens are held; feed the token ids that "
                     "complete it first");
        return -1;
    }
    if (text && len && cp_stream_check_usable(p->stream, err) == 0) {
        /* the fast path: text no delimiter can start in a quiet open region is one region_chunk */
        long field = cp_stream_feed_quiet(p->stream, text, len, err);
        if (field == -2) return -1;
        if (field >= 0) {
            p->fast.len = 0;
            cp_buf_append(&p->fast, text, len);
            if (p->fast.failed) {
                cp_error_oom(err);
                return -1;
            }
            return fast_event(p, field, p->fast.data, p->fast.len, events, count, err);
        }
    }
    cp_value *ev = cp_stream_feed(p->stream, text ? text : "", text ? len : 0, err);
    if (!ev) return -1;
    return held_events(p, ev, events, count, err);
}

char *cp_parser_feed(cp_parser *p, const char *text, size_t len, size_t *out_len, cp_error *err) {
    const cp_event *ev = NULL;
    size_t n = 0;
    if (cp_parser_feed_events(p, text, len, &ev, &n, err) < 0) return NULL;
    return cp_events_json(ev, n, out_len, err);
}

const char *cp_parser_field_name(const cp_parser *p, long field, size_t *len) {
    if (field < 0 || (size_t)field >= p->eng->n_fields) return NULL;
    if (len) *len = p->eng->field_name_lens[field];
    return p->eng->field_names[field];
}

char *cp_parser_finalize(cp_parser *p, char **message, size_t *message_len, size_t *out_len, cp_error *err) {
    cp_value *msg = NULL;
    *message = NULL;
    release_events(p);
    cp_value *ev = p->tok ? cp_tok_stream_finish(p->tok, &msg, err) : cp_stream_finish(p->stream, &msg, err);
    if (!ev) return NULL;
    char *s = dump(ev, out_len, err);
    char *m = s ? dump(msg, message_len, err) : NULL;
    cp_value_free(ev);
    cp_value_free(msg);
    if (!m) {
        free(s);
        return NULL;
    }
    *message = m;
    return s;
}

const char *cp_parser_input_text(cp_parser *p, size_t *len, size_t *prompt_code_points) {
    size_t l = 0;
    const char *s = cp_stream_input_text(p->stream, &l, prompt_code_points);
    if (len) *len = l;
    return s;
}

void cp_parser_free(cp_parser *p) {
    if (!p) return;
    if (p->tok) cp_tok_stream_free(p->tok);
    else cp_stream_free(p->stream);
    cp_eng_free(p->owned);
    free(p->initial_json);
    cp_value_free(p->held);
    cp_buf_free(&p->fast);
    free(p->ev);
    free(p);
}

/* parse_response (use_ids 0: text) / parse_tokens (use_ids 1: ids) over an engine. */
static char *oneshot(const cp_eng *eng, const cp_tables *tables, int use_ids, const char *text, size_t len,
                     const int64_t *ids,
                     size_t n, const char *prompt, size_t prompt_len, const int64_t *prompt_ids, size_t n_prompt_ids,
                     const cp_parser_options *opts, size_t *out_len, cp_error *err) {
    cp_dialect_opts d;
    cp_value *tools = NULL;
    if (dialect_of(opts, &d, &tools, err) < 0) return NULL;
    cp_value *msg = use_ids ? cp_parse_tokens_value(eng, tables, ids, n, prompt, prompt_len, prompt_ids, n_prompt_ids,
                                                prompt_ids != NULL, tools, &d, err)
                        : cp_parse_response_value(eng, text ? text : "", text ? len : 0, prompt, prompt_len, tools,
                                                  &d, err);
    char *out = msg ? dump(msg, out_len, err) : NULL;
    cp_value_free(msg);
    cp_value_free(tools);
    return out;
}

char *cp_parse_response(const cp_tables *tables, const char *text, size_t len, const char *prompt,
                        size_t prompt_len, const cp_parser_options *opts, size_t *out_len, cp_error *err) {
    if (!tables) {
        cp_error_set(err, "TypeError", "parse_response needs tables from cp_tables_load()");
        return NULL;
    }
    cp_eng *eng = cp_eng_build(tables, err);
    char *out = eng ? oneshot(eng, tables, 0, text, len, NULL, 0, prompt, prompt_len, NULL, 0, opts, out_len, err) : NULL;
    cp_eng_free(eng);
    return out;
}

char *cp_engine_parse_response(const cp_engine *e, const char *text, size_t len, const char *prompt,
                               size_t prompt_len, const cp_parser_options *opts, size_t *out_len, cp_error *err) {
    return oneshot(e->eng, e->tables, 0, text, len, NULL, 0, prompt, prompt_len, NULL, 0, opts, out_len, err);
}

char *cp_engine_parse_ids(const cp_engine *e, const int64_t *ids, size_t n, const char *prompt, size_t prompt_len,
                          const int64_t *prompt_ids, size_t n_prompt_ids, const cp_parser_options *opts,
                          size_t *out_len, cp_error *err) {
    return oneshot(e->eng, e->tables, 1, NULL, 0, ids, n, prompt, prompt_len, prompt_ids,
                   n_prompt_ids, opts, out_len, err);
}

cp_parser *cp_parser_new_ids(const cp_tables *tables, const char *prompt, size_t prompt_len,
                             const int64_t *prompt_ids, size_t n_prompt_ids, const cp_parser_options *opts,
                             cp_error *err) {
    if (!tables) {
        cp_error_set(err, "TypeError", "TokenParser needs tables from cp_tables_load()");
        return NULL;
    }
    cp_eng *eng = cp_eng_build(tables, err);
    if (!eng) return NULL;
    return parser_make(eng, eng, tables, 1, prompt, prompt_len, prompt_ids, n_prompt_ids, opts, err);
}

int cp_parser_feed_ids_events(cp_parser *p, const int64_t *ids, size_t n, const cp_event **events, size_t *count,
                              cp_error *err) {
    *events = NULL;
    *count = 0;
    release_events(p);
    if (!p->tok) {
        cp_error_set(err, "TypeError", "cp_parser_feed_ids needs a parser made with cp_parser_new_ids");
        return -1;
    }
    /* the fast path: ids that cannot decide anything in an open region hand out at most one region_chunk (it
     * does not apply to a finalized or failed parser, which the slow path's check then refuses) */
    long field = -1;
    const char *out = NULL;
    size_t out_len = 0;
    int r = cp_tok_stream_feed_fast(p->tok, ids, n, &p->fast, &out, &out_len, &field, err);
    if (r < 0) return -1;
    if (r > 0) return fast_event(p, field, out, out_len, events, count, err);
    if (cp_stream_check_usable(p->stream, err) < 0) return -1;
    cp_value *ev = cp_tok_stream_feed(p->tok, ids, n, err);
    if (!ev) return -1;
    return held_events(p, ev, events, count, err);
}

char *cp_parser_feed_ids(cp_parser *p, const int64_t *ids, size_t n, size_t *out_len, cp_error *err) {
    const cp_event *ev = NULL;
    size_t k = 0;
    if (cp_parser_feed_ids_events(p, ids, n, &ev, &k, err) < 0) return NULL;
    return cp_events_json(ev, k, out_len, err);
}

char *cp_parse_ids(const cp_tables *tables, const int64_t *ids, size_t n, const char *prompt, size_t prompt_len,
                   const int64_t *prompt_ids, size_t n_prompt_ids, const cp_parser_options *opts, size_t *out_len,
                   cp_error *err) {
    if (!tables) {
        cp_error_set(err, "TypeError", "parse_tokens needs tables from cp_tables_load()");
        return NULL;
    }
    cp_eng *eng = cp_eng_build(tables, err);
    char *out = eng ? oneshot(eng, tables, 1, NULL, 0, ids, n, prompt, prompt_len, prompt_ids,
                              n_prompt_ids, opts, out_len, err)
                    : NULL;
    cp_eng_free(eng);
    return out;
}

void cp_free(void *p) { free(p); }
