/*
 * stream.c - the parser over the scanner (FORMAT.md section 6, "Parser"; the
 * twin of chatparse/runtime/stream/parser.py and dialect.py, and of the
 * JavaScript StreamParser / ResponseParser / parseResponse).
 *
 * Regions and events: text before a decided delimiter goes to the current
 * region (the implicit field opens lazily, on its first character); an open
 * closes the current region and opens its field; a close closes it and goes
 * back to mode 0. A closed region's value is made by the value layer
 * (cp_values_make, cp_values_type) and stored (join / repeats / flatten /
 * plain). Per feed, all text of one region is one region_chunk event.
 *
 * Dialects (cp_dialect_opts): spans in code points on region events, a
 * failing value as a region_malformed event, prompt characters released late
 * left out of chunks, the whole input kept. Format extensions acting on
 * regions: close_json_end (the region ends where its JSON value ends: the
 * value layer's cp_json_end tracker) and on_error (content / drop).
 *
 * Errors: a value error ends the parse (transformers' dialect) with the
 * Python class and message the value layer reports; after an error every call
 * raises RuntimeError, as Python's parser does.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "engine.h"
#include "error.h"

const cp_dialect_opts CP_DIALECT_TRANSFORMERS = {0, 0, 1, 0};
const cp_dialect_opts CP_DIALECT_VLLM = {1, 1, 0, 1};

struct cp_stream {
    const cp_eng *eng;
    cp_dialect_opts d;
    cp_value *tool_params;      /* object; empty: no typing */
    cp_value *output;           /* the message being built */
    long current;               /* field index, -1: the null sink */
    int opened;
    cp_value *captures;         /* object */
    cp_buf body;
    cp_buf pending;
    cp_scanner sc;
    int stalled;
    long long empty_open;
    int finished;
    int failed;
    char failed_exc[32];
    char *failed_msg;
    unsigned char held[4];
    size_t n_held;
    cp_value *malformed;        /* object used as a set of field names, or NULL */
    size_t prompt_end;          /* bytes; 0: none */
    int keep_input;
    int no_events;              /* one-shot: region_open/chunk/close events are not made (nobody reads them) */
    cp_buf input;
    size_t prefix_cp;
    int json_end_on;
    cp_json_end je;
    cp_buf open_text;
    size_t open_start;          /* code points */
    size_t open_at;             /* bytes */
    cp_buf closing;
    cp_value *initial;
};

/* ------------------------------------------------------------------ events */

static void mark_failed(cp_stream *p, const cp_error *err);
static size_t incomplete_tail(const unsigned char *s, size_t n);

static int ev_push(cp_value *events, cp_value *ev, cp_error *err) {
    if (!ev || cp_list_append(events, ev) < 0) {
        cp_error_oom(err);
        return -1;
    }
    return 0;
}

static cp_value *ev_new(const char *type, const cp_eng *eng, long field) {
    cp_value *ev = cp_object();
    if (!ev) return NULL;
    cp_object_set_cstr(ev, "type", cp_string_cstr(type));
    cp_object_set_cstr(ev, "field", cp_string(eng->field_names[field], eng->field_name_lens[field]));
    if (cp_object_len(ev) != 2) {
        cp_value_free(ev);
        return NULL;
    }
    return ev;
}

static int ev_span(cp_value *ev, size_t s, size_t e) {
    int r = cp_object_set_cstr(ev, "start", cp_int((int64_t)s));
    r |= cp_object_set_cstr(ev, "end", cp_int((int64_t)e));
    return r;
}

static cp_value *error_value(const cp_error *e) {
    cp_value *o = cp_object();
    if (!o) return NULL;
    cp_object_set_cstr(o, "type", cp_string_cstr(e->exception));
    cp_object_set_cstr(o, "message", cp_string_cstr(e->message));
    if (cp_object_len(o) != 2) {
        cp_value_free(o);
        return NULL;
    }
    return o;
}

static int emit_open(cp_stream *p, cp_value *events, long field, size_t s, size_t e, const cp_value *captures,
                     cp_error *err) {
    if (p->no_events) return 0;
    cp_value *ev = ev_new("region_open", p->eng, field);
    if (ev && p->d.offsets) {
        if (ev_span(ev, s, e) < 0) ev = (cp_value_free(ev), NULL);
        else if (captures && cp_object_set_cstr(ev, "captures", cp_value_copy(captures)) < 0)
            ev = (cp_value_free(ev), NULL);
    }
    return ev_push(events, ev, err);
}

static int emit_chunk(cp_stream *p, cp_value *events, long field, const char *text, size_t len, cp_error *err) {
    if (p->no_events) return 0;
    cp_value *ev = ev_new("region_chunk", p->eng, field);
    if (ev) {
        int r = cp_object_set_cstr(ev, "text", cp_string(text, len));
        r |= cp_object_set_cstr(ev, "dirty", cp_bool(p->eng->dirty[field]));
        if (r) ev = (cp_value_free(ev), NULL);
    }
    return ev_push(events, ev, err);
}

static int emit_close(cp_stream *p, cp_value *events, long field, size_t s, size_t e, const cp_value *value,
                      cp_error *err) {
    if (p->no_events) return 0;
    cp_value *ev = ev_new("region_close", p->eng, field);
    if (ev) {
        int r = p->d.offsets ? ev_span(ev, s, e) : 0;
        r |= cp_object_set_cstr(ev, "value", cp_value_copy(value));
        if (r) ev = (cp_value_free(ev), NULL);
    }
    return ev_push(events, ev, err);
}

/* ------------------------------------------------------------------ regions */

static void fail_oom(cp_error *err) { cp_error_oom(err); }

/* `text` (just handed out by the scanner; it ends at sc.pos) goes to the current region. */
static int region_text(cp_stream *p, const char *text, size_t len, cp_value *events, cp_error *err) {
    if (!len || p->current < 0) return 0;
    if (!p->opened) {
        size_t at = p->sc.cp_pos - cp_rx_cp_count(text, 0, len);
        if (emit_open(p, events, p->current, at, at, NULL, err) < 0) return -1;
        p->opened = 1;
    }
    cp_buf_append(&p->body, text, len);
    if (p->prompt_end) {
        size_t start = p->sc.pos - len;
        if (start < p->prompt_end) {
            size_t skip = p->prompt_end - start;
            if (skip >= len) return p->body.failed ? (fail_oom(err), -1) : 0;
            text += skip;
            len -= skip;
        }
    }
    cp_buf_append(&p->pending, text, len);
    if (p->body.failed || p->pending.failed) {
        fail_oom(err);
        return -1;
    }
    return 0;
}

static int flush(cp_stream *p, cp_value *events, cp_error *err) {
    if (p->pending.len) {
        int r = emit_chunk(p, events, p->current, p->pending.data, p->pending.len, err);
        p->pending.len = 0;
        if (p->pending.data) p->pending.data[0] = 0;
        return r;
    }
    return 0;
}

static const char *py_type_name(const cp_value *v) {
    switch (cp_type_of(v)) {
    case CP_NULL: return "NoneType";
    case CP_BOOL: return "bool";
    case CP_INT:
    case CP_BIGINT: return "int";
    case CP_FLOAT: return "float";
    case CP_STRING: return "str";
    case CP_LIST: return "list";
    default: return "dict";
    }
}

/* The region's value, stored into the message; returns a copy for the event (NULL with err). */
static cp_value *store(cp_stream *p, long fi, const char *body, size_t len, const cp_value *captures, cp_error *err) {
    const cp_eng *eng = p->eng;
    const cp_value *field = eng->fields[fi];
    const char *name = eng->field_names[fi];
    size_t nl = eng->field_name_lens[fi];
    /* made and typed in one call, so that a dict a transform put at two places is typed at both (Python's
     * object sharing, values.h) */
    cp_value *value = cp_values_region(body, len, field, captures, p->tool_params, &eng->env, err);
    if (!value) return NULL;
    const cp_value *join = cp_object_get_cstr(field, "join");
    cp_value *repeats = cp_object_get_cstr(field, "repeats");
    cp_value *ret = cp_value_copy(value);
    if (!ret) {
        cp_value_free(value);
        fail_oom(err);
        return NULL;
    }
    if (cp_type_of(join) == CP_STRING) {
        if (cp_type_of(value) != CP_STRING) {
            cp_error_set(err, "ValueError", "Field '%.*s': 'join' requires each match to parse to a string, got %s.",
                         (int)nl, name, py_type_name(value));
            cp_value_free(value);
            cp_value_free(ret);
            return NULL;
        }
        cp_value *prev = cp_object_get(p->output, name, nl);
        if (prev && cp_type_of(prev) != CP_NULL) {
            size_t pl = 0, jl = 0, vl = 0;
            const char *ps = cp_string_bytes(prev, &pl);
            const char *js = cp_string_bytes(join, &jl);
            const char *vs = cp_string_bytes(value, &vl);
            if (!ps) {
                cp_error_set(err, "TypeError", "unsupported operand type(s) for +: '%s' and 'str'", py_type_name(prev));
                cp_value_free(value);
                cp_value_free(ret);
                return NULL;
            }
            cp_buf b = {0};
            cp_buf_append(&b, ps, pl);
            cp_buf_append(&b, js, jl);
            cp_buf_append(&b, vs, vl);
            cp_value_free(value);
            size_t bl = 0;
            char *bytes = cp_buf_take(&b, &bl);
            value = bytes ? cp_string_take(bytes, bl) : NULL;
            if (!value) {
                cp_value_free(ret);
                fail_oom(err);
                return NULL;
            }
        }
        if (cp_object_set(p->output, name, nl, value) < 0) goto oom;
    } else if (cp_bool_value(repeats)) {
        cp_value *list = cp_object_get(p->output, name, nl);
        if (!list) {
            if (cp_object_set(p->output, name, nl, cp_list()) < 0) {
                cp_value_free(value);
                goto oom;
            }
            list = cp_object_get(p->output, name, nl);
        }
        if (cp_type_of(list) != CP_LIST) {
            cp_error_set(err, "AttributeError", "'%s' object has no attribute 'append'", py_type_name(list));
            cp_value_free(value);
            cp_value_free(ret);
            return NULL;
        }
        if (cp_bool_value(cp_object_get_cstr(field, "flatten")) && cp_type_of(value) == CP_LIST) {
            for (size_t i = 0; i < cp_list_len(value); i++)
                if (cp_list_append(list, cp_value_copy(cp_list_get(value, i))) < 0) {
                    cp_value_free(value);
                    goto oom;
                }
            cp_value_free(value);
        } else if (cp_list_append(list, value) < 0) {
            goto oom;
        }
    } else if (cp_object_set(p->output, name, nl, value) < 0) {
        goto oom;
    }
    return ret;
oom:
    cp_value_free(ret);
    fail_oom(err);
    return NULL;
}

static void region_reset(cp_stream *p) {
    p->current = p->eng->implicit;
    cp_value_free(p->captures);
    p->captures = NULL;
    p->body.len = 0;
    p->opened = 0;
    p->json_end_on = 0;
    p->closing.len = 0;
}

static int is_recoverable(const cp_error *e) { return cp_values_is_recoverable(e->exception); }

/* Close the current region at [s, e) (code points), store its value and go back to the implicit field. */
static int region_close(cp_stream *p, cp_value *events, size_t s, size_t e, cp_error *err) {
    const cp_eng *eng = p->eng;
    long fi = p->current;
    if (fi >= 0 && p->opened) {
        if (flush(p, events, err) < 0) return -1;
        int mode = eng->on_error[fi];
        cp_error verr = {0};
        cp_value *value = store(p, fi, p->body.data ? p->body.data : "", p->body.len, p->captures, &verr);
        if (!value) {
            if (!(p->d.malformed_event || mode) || !is_recoverable(&verr)) {
                if (err) *err = verr;
                return -1;
            }
        }
        int recovered = 0;
        cp_value *rec_value = NULL;
        cp_buf raw = {0};
        if (!value && mode) {
            if (mode == 1) {
                cp_buf_append(&raw, p->open_text.data ? p->open_text.data : "", p->open_text.len);
                cp_buf_append(&raw, p->body.data ? p->body.data : "", p->body.len);
                cp_buf_append(&raw, p->closing.data ? p->closing.data : "", p->closing.len);
                if (raw.failed) {
                    cp_buf_free(&raw);
                    fail_oom(err);
                    return -1;
                }
                cp_value *empty = cp_object();
                cp_error rerr = {0};
                rec_value = store(p, eng->implicit, raw.data ? raw.data : "", raw.len, empty, &rerr);
                cp_value_free(empty);
                if (rec_value) recovered = 1;
                else if (!is_recoverable(&rerr)) {
                    cp_buf_free(&raw);
                    if (err) *err = rerr;
                    return -1;
                }
            } else {
                recovered = 1;
            }
        }
        if (!value && !recovered && !p->d.malformed_event) {
            cp_buf_free(&raw);
            if (err) *err = verr;
            return -1;
        }
        int r = 0;
        if (!value) {
            const char *name = eng->field_names[fi];
            size_t nl = eng->field_name_lens[fi];
            if (!p->malformed) p->malformed = cp_object();
            if (!p->malformed || cp_object_set(p->malformed, name, nl, cp_bool(1)) < 0) r = -1;
            cp_value *ev = r ? NULL : ev_new("region_malformed", eng, fi);
            if (ev && p->d.offsets && ev_span(ev, s, e) < 0) ev = (cp_value_free(ev), NULL);
            if (ev && cp_object_set_cstr(ev, "error", error_value(&verr)) < 0) ev = (cp_value_free(ev), NULL);
            if (ev && recovered &&
                cp_object_set_cstr(ev, "recovered", cp_string_cstr(mode == 1 ? "content" : "drop")) < 0)
                ev = (cp_value_free(ev), NULL);
            if (ev_push(events, ev, err) < 0) r = -1;
            if (!r && recovered && mode == 1) {
                long imp = eng->implicit;
                r = emit_open(p, events, imp, p->open_start, p->open_start, NULL, err);
                const char *chunk = raw.data ? raw.data : "";
                size_t cl = raw.len;
                if (p->prompt_end > p->open_at) {
                    size_t skip = p->prompt_end - p->open_at;
                    if (skip > cl) skip = cl;
                    chunk += skip;
                    cl -= skip;
                }
                if (!r && cl) r = emit_chunk(p, events, imp, chunk, cl, err);
                if (!r) r = emit_close(p, events, imp, e, e, rec_value, err);
            }
        } else {
            r = emit_close(p, events, fi, s, e, value, err);
        }
        cp_value_free(value);
        cp_value_free(rec_value);
        cp_buf_free(&raw);
        if (r < 0) return -1;
    }
    region_reset(p);
    return 0;
}

static int region_open(cp_stream *p, cp_value *events, long fi, cp_value *captures, size_t s, size_t e,
                       cp_error *err) {
    p->current = fi;
    cp_value_free(p->captures);
    p->captures = captures ? captures : cp_object();
    if (!p->captures) {
        fail_oom(err);
        return -1;
    }
    p->body.len = 0;
    p->opened = 1;
    return emit_open(p, events, fi, s, e, p->captures, err);
}

/* ------------------------------------------------------------------ deciding */

/* Scanner.decide for a close_json_end region (StreamParser._decide_json_end). */
static int decide_json_end(cp_stream *p, int eos, cp_decision *d, cp_error *err) {
    cp_scanner *sc = &p->sc;
    cp_json_end_advance(&p->je, sc->text ? sc->text : "", sc->base, sc->end);
    if (eos) cp_json_end_finish(&p->je);
    long long j = cp_json_end_status(&p->je) == 1 ? p->je.end : -1;
    sc->stop = j;
    int r = cp_scanner_decide(sc, eos, d, err);
    if (r < 0) return -1;
    if (j < 0) {
        if (r == 0 || p->je.dead || (long long)d->s <= cp_json_end_lowest(&p->je)) return r;
        cp_value_free(d->captures);
        d->captures = NULL;
        return 0;
    }
    if (r == 1) {
        if ((long long)d->s <= j) return 1;
        cp_value_free(d->captures);
        d->captures = NULL;
    } else if (!(eos || (long long)cp_scanner_safe_end(sc) > j)) {
        return 0;
    }
    d->s = d->e = (size_t)j;
    d->pattern = CP_JSON_END_PATTERN;
    d->captures = NULL;
    return 1;
}

static int take_text(cp_stream *p, size_t upto, cp_value *events, cp_error *err) {
    size_t n = 0;
    const char *t = cp_scanner_take(&p->sc, upto, &n);
    return region_text(p, t, n, events, err);
}

static int process(cp_stream *p, cp_value *events, int eos, cp_error *err) {
    cp_scanner *sc = &p->sc;
    const cp_eng *eng = p->eng;
    for (;;) {
        cp_decision d = {0};
        int r = p->json_end_on ? decide_json_end(p, eos, &d, err) : cp_scanner_decide(sc, eos, &d, err);
        if (r < 0) return -1;
        if (r == 0) break;
        if (d.pattern == CP_JSON_END_PATTERN) {
            if (take_text(p, d.s, events, err) < 0) return -1;
            if (region_close(p, events, sc->cp_pos, sc->cp_pos, err) < 0) return -1;
            cp_scanner_restart(sc, 0, d.s);
            continue;
        }
        if (take_text(p, d.s, events, err) < 0) {
            cp_value_free(d.captures);
            return -1;
        }
        size_t cs = sc->cp_pos;
        size_t dl = 0;
        const char *delim = cp_scanner_take(sc, d.e, &dl);
        size_t ce = sc->cp_pos;
        const cp_eng_pattern *pat = &eng->patterns[d.pattern];
        if (pat->is_open) {
            /* (the delimiter's text, for on_error "content", copied before the buffer can move) */
            cp_buf delim_copy = {0};
            cp_buf_append(&delim_copy, delim, dl);
            if (region_close(p, events, cs, cs, err) < 0) {
                cp_buf_free(&delim_copy);
                cp_value_free(d.captures);
                return -1;
            }
            if (region_open(p, events, (long)pat->field, d.captures, cs, ce, err) < 0) {
                cp_buf_free(&delim_copy);
                return -1;
            }
            p->open_text.len = 0;
            cp_buf_append(&p->open_text, delim_copy.data ? delim_copy.data : "", delim_copy.len);
            cp_buf_free(&delim_copy);
            p->open_start = cs;
            p->open_at = d.s;
            p->empty_open = d.s == d.e ? (long long)d.s : -1;
            cp_scanner_restart(sc, 1 + pat->field, d.e);
            if (eng->close_json_end[pat->field]) {
                cp_json_end_init(&p->je, d.e);
                p->json_end_on = 1;
            }
        } else {
            cp_value_free(d.captures);
            int had = p->opened;
            p->closing.len = 0;
            cp_buf_append(&p->closing, delim, dl);
            if (p->closing.failed || p->open_text.failed) {
                fail_oom(err);
                return -1;
            }
            if (region_close(p, events, cs, ce, err) < 0) return -1;
            if (!had && d.s == d.e) {
                p->stalled = 1;
                return 0;
            }
            if (d.s == d.e && (long long)d.s == p->empty_open) {
                p->stalled = 1;
                return 0;
            }
            cp_scanner_restart(sc, 0, d.e);
        }
    }
    if (eos) {
        if (take_text(p, sc->end, events, err) < 0) return -1;
        return region_close(p, events, sc->cp_pos, sc->cp_pos, err);
    }
    size_t upto = cp_scanner_safe_end(sc);
    if (p->json_end_on) {
        long long hold = cp_json_end_hold(&p->je);
        if (hold >= 0 && (size_t)hold < upto) upto = (size_t)hold;
    }
    return take_text(p, upto, events, err);
}

/* ------------------------------------------------------------------ API */

static int check_usable(cp_stream *p, cp_error *err) {
    if (p->finished) {
        cp_error_set(err, "RuntimeError", "ResponseParser already finalized");
        return -1;
    }
    if (p->failed) {
        cp_error_set(err, "RuntimeError", "ResponseParser failed earlier (%s: %s); start a new parser", p->failed_exc,
                     p->failed_msg ? p->failed_msg : "");
        return -1;
    }
    return 0;
}

int cp_stream_check_usable(cp_stream *p, cp_error *err) { return check_usable(p, err); }

long cp_stream_quiet_region(const cp_stream *p, size_t *mode) {
    const cp_scanner *sc = &p->sc;
    if (p->stalled || p->failed || p->finished || p->json_end_on || p->n_held || p->pending.len) return -1;
    if (sc->n_att || sc->scan != sc->end || !sc->mode->can_start) return -1;
    if (!(sc->end || sc->mode->start0 == sc->mode->startN)) return -1;
    if (p->current < 0 || !p->opened || sc->pos < p->prompt_end) return -1;
    *mode = (size_t)(sc->mode - p->eng->modes);
    return p->current;
}

long cp_stream_feed_quiet(cp_stream *p, const char *text, size_t len, cp_error *err) {
    size_t mode = 0;
    if (!len) return -1;
    long f = cp_stream_quiet_region(p, &mode);
    if (f < 0) return -1;
    const cp_eng_mode *m = &p->eng->modes[mode];
    /* whole, valid characters none of which can start a delimiter here */
    if (incomplete_tail((const unsigned char *)text, len) || cp_utf8_first_invalid(text, len) != (size_t)-1) return -1;
    for (size_t i = 0; i < len;) {
        int32_t c = cp_utf8_decode(text, len, &i, 0);
        if (c < 0 || m->can_start[cp_eng_class(p->eng, (uint32_t)c)]) return -1;
    }
    if (cp_stream_hand_out(p, text, len, err) < 0) return -2;
    return f;
}

static long settled_commit(cp_stream *p, const char *text, size_t len, size_t cps, const char **out, size_t *out_len,
                           cp_error *err);

/* What cp_stream_feed_settled needs of the parser but a quiet scanner and pos == end. */
static int settled_ready(const cp_stream *p) {
    const cp_scanner *sc = &p->sc;
    const cp_eng_mode *m = sc->mode;
    if (sc->scan != sc->end || sc->stop >= 0 || sc->eot_fed || !m->can_start) return 0;
    if (!sc->end && m->start0 != m->startN) return 0;
    if (p->stalled || p->failed || p->finished || p->json_end_on || p->n_held || p->pending.len) return 0;
    return p->current >= 0 && p->opened && sc->pos >= p->prompt_end && !p->keep_input;
}

int cp_stream_settled(const cp_stream *p) {
    return !p->sc.n_att && p->sc.pos == p->sc.end && settled_ready(p);
}

long cp_stream_feed_settled(cp_stream *p, const char *text, size_t len, size_t cps, const char **out, size_t *out_len,
                            cp_error *err) {
    cp_scanner *sc = &p->sc;
    if (!len || !settled_ready(p)) return -1;
    if (sc->n_att) {
        /* live attempts (undecided, without a match) that all die at the text's first character end there, as
         * cp_scanner_push_undecided would step them: then the text settles as from a quiet scanner */
        size_t first = 0;
        const cp_eng_mode *m = sc->mode;
        const uint32_t cls = cp_eng_class(p->eng, cp_utf8_valid_at((const unsigned char *)text, &first));
        for (size_t k = 0; k < sc->n_att; k++) {
            const cp_attempt *a = &sc->att[k];
            if (a->fin >= 0 || a->n_ends || m->trans[(size_t)a->state * m->n_classes + cls]) return -1;
        }
        sc->n_att = 0;
    }
    if (sc->pos != sc->end) {
        /* text received before and not handed out yet goes out with this (cps counts this text only) */
        const char *t = sc->text + (sc->pos - sc->base);
        for (size_t i = 0; i < sc->end - sc->pos; i++) cps += ((unsigned char)t[i] & 0xC0) != 0x80;
    }
    return settled_commit(p, text, len, cps, out, out_len, err);
}

long cp_stream_feed_settled_again(cp_stream *p, size_t at, const char *text, size_t len, size_t cps,
                                  const char **out, size_t *out_len, cp_error *err) {
    /* nothing that can change what feed_settled checked happened since it held with the text ending at `at`
     * (and pos == end then): every such change pushes text (end moves), holds bytes, fails or finishes the
     * parser */
    if (p->sc.end != at || p->n_held || p->failed || p->finished || !len) return -1;
    return settled_commit(p, text, len, cps, out, out_len, err);
}

size_t cp_stream_end(const cp_stream *p) { return p->sc.end; }

/* n bytes from src to dst; when n <= 8, 8 bytes are copied (src has 8 readable bytes, dst room for 8). */
static inline void copy_short(char *dst, const char *src, size_t n) {
    if (n <= 8) memcpy(dst, src, 8); /* (one 8-byte move) */
    else memcpy(dst, src, n);
}

/* The commit of cp_stream_feed_settled: `text` (len bytes, cps code points with the text not yet handed
 * out before it) is received, stepped (nothing to step: it settles) and handed out with what precedes it
 * since pos; *out points to the handed out text in the scanner's buffer. `text` has 8 readable bytes. */
static long settled_commit(cp_stream *p, const char *text, size_t len, size_t cps, const char **out, size_t *out_len,
                           cp_error *err) {
    cp_scanner *sc = &p->sc;
    /* (the scanner's fields are read once into locals and written once: a field re-read right after a narrower
     * store to it would stall on store forwarding) */
    size_t base = sc->base, end = sc->end, pos = sc->pos, live = end - base;
    /* cp_scanner_push, inline while the text fits without a trim (else the call, which trims and grows) */
    if (live + len + 9 <= sc->cap && (!sc->eng->keep || pos - base < 2 * CP_SCANNER_TRIM_MIN + 4 * sc->eng->keep)) {
        copy_short(sc->text + live, text, len);
        sc->text[live + len] = 0;
        end += len;
        sc->end = end;
    } else {
        if (cp_scanner_push(sc, text, len, err) < 0) {
            mark_failed(p, err);
            return -2;
        }
        base = sc->base;
        end = sc->end;
    }
    /* stepped (nothing to step), then cp_scanner_take up to the end, and the region's body */
    const char *t = sc->text + (pos - base);
    size_t n = end - pos;
    sc->scan = end;
    sc->pos = end;
    sc->cp_pos += cps;
    size_t blen = p->body.len;
    if (n == len) {
        /* (from the text itself: a load of the bytes just stored and NUL-terminated would stall) */
        if (blen + n + 9 <= p->body.cap) {
            copy_short(p->body.data + blen, text, n);
            p->body.data[blen + n] = 0;
            p->body.len = blen + n;
        } else {
            cp_buf_append(&p->body, text, n);
        }
    } else if (blen + n + 9 <= p->body.cap && end - base + 8 <= sc->cap) {
        copy_short(p->body.data + blen, t, n);
        p->body.data[blen + n] = 0;
        p->body.len = blen + n;
    } else {
        cp_buf_append(&p->body, t, n);
    }
    if (p->body.failed) {
        cp_error_oom(err);
        mark_failed(p, err);
        return -2;
    }
    *out = t;
    *out_len = n;
    return p->current;
}

long cp_stream_feed_token(cp_stream *p, const char *text, size_t len, size_t cps, unsigned settles, size_t *mode,
                          size_t *settled_at, const char **out, size_t *out_len, cp_error *err) {
    *mode = (size_t)(p->sc.mode - p->eng->modes);
    *settled_at = (size_t)-1;
    int known = (settles >> *mode) & 1;
    long f = known ? cp_stream_feed_settled(p, text, len, cps, out, out_len, err) : -1;
    if (f == -1) {
        f = cp_stream_feed_undecided(p, text, len, known, out, out_len, err);
        if (f < 0 || !cp_stream_settled(p)) return f;
    }
    if (f >= 0) *settled_at = p->sc.end;
    return f;
}

size_t cp_stream_mode(const cp_stream *p) { return (size_t)(p->sc.mode - p->eng->modes); }

long cp_stream_feed_undecided(cp_stream *p, const char *text, size_t len, int inert, const char **out, size_t *out_len,
                              cp_error *err) {
    cp_scanner *sc = &p->sc;
    if (p->stalled || p->failed || p->finished || p->json_end_on || p->n_held || p->pending.len) return -1;
    if (p->current < 0 || !p->opened || sc->pos < p->prompt_end || !len) return -1;
    int r = cp_scanner_push_undecided(sc, text, len, inert, err);
    if (r == 0) return -1;
    if (r > 0) {
        /* cp_scanner_take up to the safe end, and the region's body (inline while it fits) */
        const char *t = sc->text + (sc->pos - sc->base);
        size_t upto = sc->n_att ? sc->att[0].start : sc->scan; /* (cp_scanner_safe_end) */
        size_t n = upto > sc->pos ? upto - sc->pos : 0, cps = 0;
        for (size_t i = 0; i < n; i++) cps += ((unsigned char)t[i] & 0xC0) != 0x80;
        sc->cp_pos += cps;
        if (n) sc->pos = upto;
        if (!n) {
            /* (nothing handed out: every byte received since pos may begin a delimiter) */
        } else if (p->body.len + n + 1 <= p->body.cap) {
            memcpy(p->body.data + p->body.len, t, n);
            p->body.len += n;
            p->body.data[p->body.len] = 0;
        } else {
            cp_buf_append(&p->body, t, n);
        }
        if (p->keep_input) cp_buf_append(&p->input, text, len);
        if (!p->body.failed && !p->input.failed) {
            *out = t;
            *out_len = n;
            return p->current;
        }
        cp_error_oom(err);
    }
    mark_failed(p, err);
    return -2;
}

int cp_stream_hand_out(cp_stream *p, const char *text, size_t len, cp_error *err) {
    cp_scanner *sc = &p->sc;
    if (cp_scanner_push(sc, text, len, err) < 0) return -1;
    sc->scan = sc->end;
    size_t n = 0;
    const char *t = cp_scanner_take(sc, sc->end, &n);
    cp_buf_append(&p->body, t, n);
    if (p->keep_input) cp_buf_append(&p->input, text, len);
    if (p->body.failed || p->input.failed) {
        cp_error_oom(err);
        mark_failed(p, err);
        return -1;
    }
    return 0;
}

static void mark_failed(cp_stream *p, const cp_error *err) {
    p->failed = 1;
    snprintf(p->failed_exc, sizeof p->failed_exc, "%s", err->exception);
    free(p->failed_msg);
    size_t n = strlen(err->message);
    p->failed_msg = malloc(n + 1);
    if (p->failed_msg) memcpy(p->failed_msg, err->message, n + 1);
}

/* Length of an incomplete UTF-8 sequence at the end of s[0..n) (0..3). */
static size_t incomplete_tail(const unsigned char *s, size_t n) {
    for (size_t k = 1; k <= 3 && k <= n; k++) {
        unsigned char c = s[n - k];
        if ((c & 0xC0) == 0x80) continue;        /* continuation: look further back */
        size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        return need > k ? k : 0;
    }
    return 0;
}

cp_value *cp_stream_feed(cp_stream *p, const char *text, size_t len, cp_error *err) {
    if (check_usable(p, err) < 0) return NULL;
    cp_value *events = cp_list();
    if (!events) {
        fail_oom(err);
        return NULL;
    }
    if (!len) return events;
    /* the held bytes of a split character, then this feed (copied together only when bytes are held); a new
     * split character at the end is held */
    cp_buf all = {0};
    const char *data = text;
    size_t dlen = len;
    if (p->n_held) {
        cp_buf_append(&all, p->held, p->n_held);
        cp_buf_append(&all, text, len);
        if (all.failed) {
            cp_value_free(events);
            fail_oom(err);
            return NULL;
        }
        data = all.data;
        dlen = all.len;
    }
    size_t tail = incomplete_tail((const unsigned char *)data, dlen);
    size_t bad = cp_utf8_first_invalid(data, dlen - tail);
    if (bad != (size_t)-1) {
        cp_buf_free(&all);
        cp_value_free(events);
        cp_error_set(err, "ValueError", "feed: the text is not valid UTF-8 (byte %zu)", bad);
        return NULL;
    }
    if (p->keep_input) {
        cp_buf_append(&p->input, text, len);
        if (p->input.failed) {
            cp_buf_free(&all);
            cp_value_free(events);
            fail_oom(err);
            return NULL;
        }
    }
    size_t n = dlen - tail;
    if (n && !p->stalled) {
        cp_error e; /* (not zeroed whole: 2 kB per feed; filled on failure) */
        e.failed = 0;
        e.truncated = 0;
        e.exception[0] = 0;
        e.message[0] = 0;
        if (cp_scanner_push(&p->sc, data, n, &e) < 0 || process(p, events, 0, &e) < 0 || flush(p, events, &e) < 0) {
            mark_failed(p, &e);
            if (err) *err = e;
            cp_buf_free(&all);
            cp_value_free(events);
            return NULL;
        }
    }
    memmove(p->held, data + dlen - tail, tail);
    p->n_held = tail;
    cp_buf_free(&all);
    return events;
}

static int is_empty_value(const cp_value *v) {
    switch (cp_type_of(v)) {
    case CP_NULL: return 1;
    case CP_STRING: return cp_string_length(v) == 0;
    case CP_LIST: return cp_list_len(v) == 0;
    case CP_OBJECT: return cp_object_len(v) == 0;
    default: return 0;
    }
}

/* Python's repr of a str, for the messages chatparse words itself. */
static void repr_str(cp_buf *b, const char *s, size_t n) {
    int has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    cp_buf_putc(b, q);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == (unsigned char)q || c == '\\') {
            cp_buf_putc(b, '\\');
            cp_buf_putc(b, (char)c);
        } else if (c == '\n') cp_buf_puts(b, "\\n");
        else if (c == '\r') cp_buf_puts(b, "\\r");
        else if (c == '\t') cp_buf_puts(b, "\\t");
        else if (c < 0x20 || c == 0x7F) cp_buf_printf(b, "\\x%02x", c);
        else cp_buf_putc(b, (char)c);
    }
    cp_buf_putc(b, q);
}

cp_value *cp_stream_finish(cp_stream *p, cp_value **message, cp_error *err) {
    *message = NULL;
    if (check_usable(p, err) < 0) return NULL;
    cp_value *events = cp_list();
    if (!events) {
        fail_oom(err);
        return NULL;
    }
    cp_error e = {0};
    if (p->n_held && !p->stalled) {
        /* the stream ended inside a character: U+FFFD, as a decoder with errors="replace" */
        if (cp_scanner_push(&p->sc, "\xEF\xBF\xBD", 3, &e) < 0) goto fail;
        p->n_held = 0;
    }
    if (!p->stalled && process(p, events, 1, &e) < 0) goto fail;
    if (flush(p, events, &e) < 0) goto fail;
    p->finished = 1;
    const cp_eng *eng = p->eng;
    cp_buf missing = {0};
    size_t n_missing = 0;
    for (size_t i = 0; i < eng->n_fields; i++) {
        if (cp_bool_value(cp_object_get_cstr(eng->fields[i], "optional"))) continue;
        const char *name = eng->field_names[i];
        size_t nl = eng->field_name_lens[i];
        if (cp_object_get(p->output, name, nl)) continue;
        if (p->malformed && cp_object_get(p->malformed, name, nl)) continue;
        cp_buf_puts(&missing, n_missing ? ", " : "[");
        repr_str(&missing, name, nl);
        n_missing++;
    }
    if (n_missing) {
        cp_buf_putc(&missing, ']');
        cp_error_set(&e, "ValueError", "Required response_template fields missing from parsed output: %s",
                     missing.data ? missing.data : "[]");
        cp_buf_free(&missing);
        goto fail;
    }
    cp_buf_free(&missing);
    cp_value *out = cp_object();
    if (!out) {
        cp_error_oom(&e);
        goto fail;
    }
    for (size_t i = 0; i < cp_object_len(p->output); i++) {
        const cp_member *m = cp_object_at(p->output, i);
        if (cp_object_get(eng->defaults, m->key, m->key_len) || !is_empty_value(m->value)) {
            if (cp_object_set(out, m->key, m->key_len, cp_value_copy(m->value)) < 0) {
                cp_value_free(out);
                cp_error_oom(&e);
                goto fail;
            }
        }
    }
    *message = out;
    return events;
fail:
    mark_failed(p, &e);
    if (err) *err = e;
    cp_value_free(events);
    return NULL;
}

const cp_value *cp_stream_initial_events(const cp_stream *p) { return p->initial; }

const char *cp_stream_input_text(const cp_stream *p, size_t *len, size_t *cp_len_prefix) {
    if (!p->keep_input) return NULL;
    *len = p->input.len;
    if (cp_len_prefix) *cp_len_prefix = p->prefix_cp;
    return p->input.data ? p->input.data : "";
}

void cp_stream_free(cp_stream *p) {
    if (!p) return;
    cp_value_free(p->tool_params);
    cp_value_free(p->output);
    cp_value_free(p->captures);
    cp_buf_free(&p->body);
    cp_buf_free(&p->pending);
    cp_scanner_fini(&p->sc);
    free(p->failed_msg);
    cp_value_free(p->malformed);
    cp_buf_free(&p->input);
    cp_buf_free(&p->open_text);
    cp_buf_free(&p->closing);
    cp_value_free(p->initial);
    free(p);
}

typedef struct last_end {
    size_t end;
    int found;
} last_end;

static int on_anchor(void *ctx, const cp_rx_match *m) {
    last_end *l = ctx;
    l->end = m->end;
    l->found = 1;
    return 0;
}

cp_stream *cp_stream_new(const cp_eng *eng, const char *prefix, size_t prefix_len, const cp_value *tools,
                         const cp_dialect_opts *dialect, cp_error *err) {
    if (!prefix) {
        cp_error_set(err, "ValueError",
                     "`ResponseParser`/`parse_response` requires `prefix` (the chat prompt sent to the model before "
                     "generation); pass \"\" to opt out explicitly.");
        return NULL;
    }
    cp_stream *p = calloc(1, sizeof *p);
    if (!p) {
        cp_error_oom(err);
        return NULL;
    }
    p->eng = eng;
    p->d = dialect ? *dialect : CP_DIALECT_TRANSFORMERS;
    p->keep_input = p->d.input_text;
    p->current = eng->implicit;
    p->empty_open = -1;
    cp_scanner_init(&p->sc, eng);
    p->output = cp_value_copy(eng->defaults);
    p->initial = cp_list();
    if (!p->output || !p->initial) {
        cp_error_oom(err);
        goto fail;
    }
    p->tool_params = cp_values_tool_params(tools, err);
    if (!p->tool_params) goto fail;
    if (prefix_len) {
        if (cp_utf8_first_invalid(prefix, prefix_len) != (size_t)-1) {
            cp_error_set(err, "ValueError", "prefix: the text is not valid UTF-8");
            goto fail;
        }
        last_end l = {0, 0};
        cp_rx_match m;
        cp_rx_match_init(&m);
        int r = cp_rx_finditer(eng->anchor, prefix, prefix_len, &m, on_anchor, &l, err);
        cp_rx_match_fini(&m);
        if (r < 0) goto fail;
        const char *cut = l.found ? prefix + l.end : prefix;
        size_t cut_len = l.found ? prefix_len - l.end : prefix_len;
        if (cut_len) {
            cp_value *ev = cp_stream_feed(p, cut, cut_len, err);
            if (!ev) goto fail;
            cp_value_free(p->initial);
            p->initial = ev;
            if (!p->d.prompt_chunks) p->prompt_end = cut_len;
            p->prefix_cp = cp_rx_cp_count(cut, 0, cut_len);
        }
    }
    return p;
fail:
    cp_stream_free(p);
    return NULL;
}

cp_value *cp_parse_response_value(const cp_eng *eng, const char *text, size_t len, const char *prefix, size_t prefix_len,
                            const cp_value *tools, const cp_dialect_opts *dialect, cp_error *err) {
    cp_stream *p = cp_stream_new(eng, prefix, prefix_len, tools, dialect, err);
    if (!p) return NULL;
    /* only the message and region_malformed events are read here: the others are not made */
    p->no_events = 1;
    cp_value *message = NULL;
    cp_value *fed = cp_stream_feed(p, text, len, err);
    cp_value *final = fed ? cp_stream_finish(p, &message, err) : NULL;
    if (final && p->d.malformed_event) {
        const cp_value *lists[3] = {p->initial, fed, final};
        for (int k = 0; k < 3 && message; k++)
            for (size_t i = 0; i < cp_list_len(lists[k]); i++) {
                const cp_value *ev = cp_list_get(lists[k], i);
                if (!cp_string_equals(cp_object_get_cstr(ev, "type"), "region_malformed")) continue;
                if (cp_object_get_cstr(ev, "recovered")) continue;
                const cp_value *e = cp_object_get_cstr(ev, "error");
                size_t tl = 0, ml = 0;
                const char *t = cp_string_bytes(cp_object_get_cstr(e, "type"), &tl);
                const char *m = cp_string_bytes(cp_object_get_cstr(e, "message"), &ml);
                char exc[32];
                snprintf(exc, sizeof exc, "%.*s", (int)tl, t ? t : "");
                cp_error_set_text(err, exc, m ? m : "", ml);
                cp_value_free(message);
                message = NULL;
                break;
            }
    }
    cp_value_free(fed);
    cp_value_free(final);
    cp_stream_free(p);
    return message;
}
