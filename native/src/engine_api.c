/*
 * engine_api.c - the parser part of the public API (chatparse.h, the
 * "PARSER API" block): cp_stream behind an opaque cp_parser, events and
 * messages out as Python's json.dumps(v, separators=(",", ":")) text.
 *
 * Each parser builds its own cp_eng from the tables (the compiled patterns
 * and start guards): tables stay read-only and shareable without locks. The
 * cost is paid per parser (the patterns compiled again); building cp_eng once
 * at load time, inside cp_tables, is the intended next step.
 */
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "error.h"

struct cp_parser {
    cp_eng *eng;
    cp_stream *stream;          /* the character engine (owned by tok when there is one) */
    cp_tok_stream *tok;         /* token mode: ids decoded, then fed to stream */
    char *initial_json;
    size_t initial_len;
};

static char *dump(const cp_value *v, size_t *len, cp_error *err) {
    cp_json_dump_options o = cp_json_dump_defaults();
    o.item_separator = ",";
    o.key_separator = ":";
    size_t n = 0;
    char *s = cp_json_dump(v, &o, &n);
    if (!s) cp_error_oom(err);
    if (len) *len = s ? n : 0;
    return s;
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

cp_parser *cp_parser_new(const cp_tables *tables, const char *prompt, size_t prompt_len,
                         const cp_parser_options *opts, cp_error *err) {
    if (!tables) {
        cp_error_set(err, "TypeError", "ResponseParser needs tables from cp_tables_load()");
        return NULL;
    }
    cp_dialect_opts d;
    cp_value *tools = NULL;
    if (dialect_of(opts, &d, &tools, err) < 0) return NULL;
    cp_parser *p = calloc(1, sizeof *p);
    if (!p) {
        cp_value_free(tools);
        cp_error_oom(err);
        return NULL;
    }
    p->eng = cp_eng_build(tables, err);
    if (p->eng) p->stream = cp_stream_new(p->eng, prompt, prompt_len, tools, &d, err);
    cp_value_free(tools);
    if (p->stream) p->initial_json = dump(cp_stream_initial_events(p->stream), &p->initial_len, err);
    if (!p->initial_json) {
        cp_parser_free(p);
        return NULL;
    }
    return p;
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
    cp_eng_free(p->eng);
    free(p->initial_json);
    free(p);
}

char *cp_parse_response(const cp_tables *tables, const char *text, size_t len, const char *prompt,
                        size_t prompt_len, const cp_parser_options *opts, size_t *out_len, cp_error *err) {
    if (!tables) {
        cp_error_set(err, "TypeError", "parse_response needs tables from cp_tables_load()");
        return NULL;
    }
    cp_dialect_opts d;
    cp_value *tools = NULL;
    if (dialect_of(opts, &d, &tools, err) < 0) return NULL;
    cp_eng *eng = cp_eng_build(tables, err);
    char *out = NULL;
    if (eng) {
        cp_value *msg = cp_parse_response_value(eng, text ? text : "", text ? len : 0, prompt, prompt_len, tools, &d, err);
        if (msg) out = dump(msg, out_len, err);
        cp_value_free(msg);
    }
    cp_eng_free(eng);
    cp_value_free(tools);
    return out;
}

cp_parser *cp_parser_new_ids(const cp_tables *tables, const char *prompt, size_t prompt_len,
                             const int64_t *prompt_ids, size_t n_prompt_ids, const cp_parser_options *opts,
                             cp_error *err) {
    if (!tables) {
        cp_error_set(err, "TypeError", "TokenParser needs tables from cp_tables_load()");
        return NULL;
    }
    cp_dialect_opts d;
    cp_value *tools = NULL;
    if (dialect_of(opts, &d, &tools, err) < 0) return NULL;
    cp_parser *p = calloc(1, sizeof *p);
    if (!p) {
        cp_value_free(tools);
        cp_error_oom(err);
        return NULL;
    }
    p->eng = cp_eng_build(tables, err);
    if (p->eng)
        p->tok = cp_tok_stream_new(p->eng, tables, prompt, prompt_len, prompt_ids, n_prompt_ids, prompt_ids != NULL,
                                   tools, &d, err);
    cp_value_free(tools);
    if (p->tok) {
        p->stream = cp_tok_stream_core(p->tok);
        p->initial_json = dump(cp_stream_initial_events(p->stream), &p->initial_len, err);
    }
    if (!p->initial_json) {
        cp_parser_free(p);
        return NULL;
    }
    return p;
}

char *cp_parser_feed_ids(cp_parser *p, const int64_t *ids, size_t n, size_t *out_len, cp_error *err) {
    if (!p->tok) {
        cp_error_set(err, "TypeError", "cp_parser_feed_ids needs a parser made with cp_parser_new_ids");
        return NULL;
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
    cp_dialect_opts d;
    cp_value *tools = NULL;
    if (dialect_of(opts, &d, &tools, err) < 0) return NULL;
    cp_eng *eng = cp_eng_build(tables, err);
    char *out = NULL;
    if (eng) {
        cp_value *msg = cp_parse_tokens_value(eng, tables, ids, n, prompt, prompt_len, prompt_ids, n_prompt_ids,
                                              prompt_ids != NULL, tools, &d, err);
        if (msg) out = dump(msg, out_len, err);
        cp_value_free(msg);
    }
    cp_eng_free(eng);
    cp_value_free(tools);
    return out;
}

void cp_free(void *p) { free(p); }
