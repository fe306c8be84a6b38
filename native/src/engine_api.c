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
};

/* A str as Python's json.dumps writes it with ensure_ascii (valid UTF-8 in). */
static void json_str(cp_buf *b, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    cp_buf_putc(b, '"');
    size_t i = 0, run = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
            i++;
            continue;
        }
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

/* [{"type": "region_chunk", "field", "text", "dirty"}] as JSON text (the fast paths' one event). */
static char *chunk_json(const cp_parser *p, long field, const char *text, size_t len, size_t *out_len, cp_error *err) {
    cp_buf b = {0};
    cp_buf_puts(&b, "[{\"type\":\"region_chunk\",\"field\":");
    json_str(&b, p->eng->field_names[field], p->eng->field_name_lens[field]);
    cp_buf_puts(&b, ",\"text\":");
    json_str(&b, text, len);
    cp_buf_puts(&b, p->eng->dirty[field] ? ",\"dirty\":true}]" : ",\"dirty\":false}]");
    size_t bl = 0;
    char *out = cp_buf_take(&b, &bl);
    if (!out) cp_error_oom(err);
    if (out_len) *out_len = out ? bl : 0;
    return out;
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
    if (!e->eng) {
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

char *cp_parser_feed(cp_parser *p, const char *text, size_t len, size_t *out_len, cp_error *err) {
    if (p->tok && cp_stream_check_usable(p->stream, err) < 0) return NULL;
    if (p->tok && cp_tok_stream_holds(p->tok)) {
        cp_error_set(err, "ValueError",
                     "feed(text) while the bytes of a character split across tokens are held; feed the token ids that "
                     "complete it first");
        return NULL;
    }
    if (text && len && cp_stream_check_usable(p->stream, err) == 0) {
        /* the fast path: text no delimiter can start in a quiet open region is one region_chunk */
        long field = cp_stream_feed_quiet(p->stream, text, len, err);
        if (field == -2) return NULL;
        if (field >= 0) return chunk_json(p, field, text, len, out_len, err);
    }
    cp_value *ev = cp_stream_feed(p->stream, text ? text : "", text ? len : 0, err);
    if (!ev) return NULL;
    char *s = dump(ev, out_len, err);
    cp_value_free(ev);
    return s;
}

char *cp_parser_finalize(cp_parser *p, char **message, size_t *message_len, size_t *out_len, cp_error *err) {
    cp_value *msg = NULL;
    *message = NULL;
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

char *cp_parser_feed_ids(cp_parser *p, const int64_t *ids, size_t n, size_t *out_len, cp_error *err) {
    if (!p->tok) {
        cp_error_set(err, "TypeError", "cp_parser_feed_ids needs a parser made with cp_parser_new_ids");
        return NULL;
    }
    if (cp_stream_check_usable(p->stream, err) < 0) return NULL;
    {
        /* the fast path: inert ids in a quiet region are one region_chunk, written straight as JSON */
        cp_buf text = {0};
        long field = -1;
        int r = cp_tok_stream_feed_fast(p->tok, ids, n, &text, &field, err);
        if (r < 0) {
            cp_buf_free(&text);
            return NULL;
        }
        if (r > 0) {
            char *out = chunk_json(p, field, text.data ? text.data : "", text.len, out_len, err);
            cp_buf_free(&text);
            return out;
        }
        cp_buf_free(&text);
    }
    cp_value *ev = cp_tok_stream_feed(p->tok, ids, n, err);
    if (!ev) return NULL;
    char *s = dump(ev, out_len, err);
    cp_value_free(ev);
    return s;
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
