/*
 * vectors_template.c - the template vectors (kind "template") through the
 * character engine, compared as js/run_vectors.mjs compares them: load the
 * vector's tables, check the template hash, then per case feed the prefix and
 * the feeds exactly as listed and compare the initial events, each feed's
 * events, the final events and message, or the error (Python class, stage and
 * feed index); in a dialect, input_start and the input text; "oneshot" is
 * what cp_parse_response_value gives for the whole text. Event errors are
 * {"type", "message"}, the message compared unless the vector marks it
 * "loose". A case whose text holds a character of 4 UTF-8 bytes is also fed
 * one byte at a time (the C twin of the JavaScript runner's split surrogate
 * pairs: one more counted case), which must give the same regions and message.
 *
 * Token vectors (kind "tokens", cp_vectors_tokens) run the token engine
 * (engine_tokens.c): decoded texts per feed, then events, message or error
 * and the one-shot parse of all the ids, compared the same way.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "engine.h"
#include "tables.h"
#include "vectors.h"

/* ------------------------------------------------------------------ values */

/* A vector's expected value with the encoder's tags read ({"$py": "float", "v": "nan"|"inf"|"-inf"},
 * {"$py": "int", "v": "<digits>"}). */
static cp_value *decode(const cp_value *v) {
    if (cp_type_of(v) == CP_LIST) {
        cp_value *o = cp_list();
        for (size_t i = 0; o && i < cp_list_len(v); i++)
            if (cp_list_append(o, decode(cp_list_get(v, i))) < 0) {
                cp_value_free(o);
                return NULL;
            }
        return o;
    }
    if (cp_type_of(v) == CP_OBJECT) {
        const cp_value *py = cp_object_get_cstr(v, "$py");
        const cp_value *x = cp_object_get_cstr(v, "v");
        if (cp_object_len(v) == 2 && py && x) {
            size_t l = 0;
            const char *s = cp_string_bytes(x, &l);
            if (cp_string_equals(py, "float") && s) {
                double d = strcmp(s, "nan") == 0 ? (double)NAN : strcmp(s, "inf") == 0 ? (double)INFINITY : -(double)INFINITY;
                return cp_float(d);
            }
            if (s) return cp_int_from_text(s, l);
        }
        cp_value *o = cp_object();
        for (size_t i = 0; o && i < cp_object_len(v); i++) {
            const cp_member *m = cp_object_at(v, i);
            if (cp_object_set(o, m->key, m->key_len, decode(m->value)) < 0) {
                cp_value_free(o);
                return NULL;
            }
        }
        return o;
    }
    return cp_value_copy(v);
}

static void short_json(const cp_value *v, char *out, size_t n) {
    cp_json_dump_options o = cp_json_dump_compact();
    char *s = cp_json_dump(v, &o, NULL);
    snprintf(out, n, "%s", s ? s : "(none)");
    free(s);
}

/* Where a and b first differ ("" when equal): key order matters, as in the JavaScript runner. */
static int diff(const cp_value *a, const cp_value *b, char *path, size_t cap, char *why, size_t wcap) {
    if (cp_type_of(a) == CP_LIST && cp_type_of(b) == CP_LIST) {
        if (cp_list_len(a) != cp_list_len(b)) {
            snprintf(why, wcap, "%s: length %zu != %zu", path, cp_list_len(a), cp_list_len(b));
            return 1;
        }
        size_t pl = strlen(path);
        for (size_t i = 0; i < cp_list_len(a); i++) {
            snprintf(path + pl, cap - pl, "[%zu]", i);
            if (diff(cp_list_get(a, i), cp_list_get(b, i), path, cap, why, wcap)) return 1;
        }
        path[pl] = 0;
        return 0;
    }
    if (cp_type_of(a) == CP_OBJECT && cp_type_of(b) == CP_OBJECT) {
        size_t pl = strlen(path);
        int same_keys = cp_object_len(a) == cp_object_len(b);
        for (size_t i = 0; same_keys && i < cp_object_len(a); i++) {
            const cp_member *x = cp_object_at(a, i), *y = cp_object_at(b, i);
            same_keys = x->key_len == y->key_len && memcmp(x->key, y->key, x->key_len) == 0;
        }
        if (!same_keys) {
            char ka[200] = "", kb[200] = "";
            for (size_t i = 0; i < cp_object_len(a); i++)
                snprintf(ka + strlen(ka), sizeof ka - strlen(ka), "%s%s", i ? "," : "", cp_object_at(a, i)->key);
            for (size_t i = 0; i < cp_object_len(b); i++)
                snprintf(kb + strlen(kb), sizeof kb - strlen(kb), "%s%s", i ? "," : "", cp_object_at(b, i)->key);
            snprintf(why, wcap, "%s: keys [%s] != [%s]", path, ka, kb);
            return 1;
        }
        for (size_t i = 0; i < cp_object_len(a); i++) {
            const cp_member *x = cp_object_at(a, i);
            snprintf(path + pl, cap - pl, ".%s", x->key);
            if (diff(x->value, cp_object_at(b, i)->value, path, cap, why, wcap)) return 1;
        }
        path[pl] = 0;
        return 0;
    }
    if (cp_value_equal(a, b)) return 0;
    char sa[160], sb[160];
    short_json(a, sa, sizeof sa);
    short_json(b, sb, sizeof sb);
    snprintf(why, wcap, "%s: %s != %s", path, sa, sb);
    return 1;
}

/* ------------------------------------------------------------------ running a case */

/* An event list as the vector holds it: a region_malformed error's message replaced by the expected one where
 * that one is "loose" (and the flag added), paired by index with the expected events. */
static void encode_events(cp_value *events, const cp_value *want) {
    for (size_t i = 0; i < cp_list_len(events); i++) {
        cp_value *ev = cp_list_get(events, i);
        cp_value *e = cp_object_get_cstr(ev, "error");
        if (cp_type_of(e) != CP_OBJECT) continue;
        const cp_value *we = cp_object_get_cstr(cp_list_get(want, i), "error");
        if (cp_bool_value(cp_object_get_cstr(we, "loose"))) {
            cp_object_set_cstr(e, "message", cp_value_copy(cp_object_get_cstr(we, "message")));
            cp_object_set_cstr(e, "loose", cp_bool(1));
        }
    }
}

typedef struct case_result {
    cp_value *initial, *feeds, *final, *message, *error;
    long long input_start;      /* -1: none */
    char input_error[200];
} case_result;

static void result_free(case_result *r) {
    cp_value_free(r->initial);
    cp_value_free(r->feeds);
    cp_value_free(r->final);
    cp_value_free(r->message);
    cp_value_free(r->error);
}

static cp_value *stage_error(const cp_error *e, const char *stage, size_t index) {
    cp_value *o = cp_object();
    cp_object_set_cstr(o, "type", cp_string_cstr(e->exception));
    cp_object_set_cstr(o, "stage", cp_string_cstr(stage));
    cp_object_set_cstr(o, "index", cp_int((int64_t)index));
    return o;
}

/* Run a case; `feeds` overrides the case's feeds (for the byte-split run) when given as (texts, lens, n). */
static void run_case(const cp_eng *eng, const cp_value *c, const char **ftext, const size_t *flen, size_t nfeeds,
                     case_result *r) {
    memset(r, 0, sizeof *r);
    r->input_start = -1;
    r->initial = cp_list();
    r->feeds = cp_list();
    const cp_value *dv = cp_object_get_cstr(c, "dialect");
    int vllm = cp_string_equals(dv, "vllm");
    const cp_dialect_opts *d = vllm ? &CP_DIALECT_VLLM : &CP_DIALECT_TRANSFORMERS;
    size_t pl = 0;
    const char *prefix = cp_string_bytes(cp_object_get_cstr(c, "prefix"), &pl);
    cp_error err = {0};
    cp_stream *p = cp_stream_new(eng, prefix, pl, cp_object_get_cstr(c, "tools"), d, &err);
    if (!p) {
        r->error = stage_error(&err, "init", 0);
        return;
    }
    size_t in_len = 0, in_cp = 0;
    if (vllm && cp_stream_input_text(p, &in_len, &in_cp)) r->input_start = (long long)in_cp;
    cp_value_free(r->initial);
    r->initial = cp_value_copy(cp_stream_initial_events(p));
    encode_events(r->initial, cp_object_get_cstr(c, "initial_events"));
    const cp_value *want_feeds = cp_object_get_cstr(c, "feed_events");
    size_t i = 0;
    for (; i < nfeeds; i++) {
        cp_value *ev = cp_stream_feed(p, ftext[i], flen[i], &err);
        if (!ev) {
            r->error = stage_error(&err, "feed", i);
            break;
        }
        encode_events(ev, cp_list_get(want_feeds, i));
        cp_list_append(r->feeds, ev);
    }
    if (!r->error) {
        cp_value *msg = NULL;
        cp_value *fin = cp_stream_finish(p, &msg, &err);
        if (!fin) r->error = stage_error(&err, "finalize", 0);
        else {
            encode_events(fin, cp_object_get_cstr(c, "final_events"));
            r->final = fin;
            r->message = msg;
        }
    }
    if (vllm) {
        /* the input text: the cut prefix, then every feed, whatever happened */
        const char *text = cp_stream_input_text(p, &in_len, NULL);
        size_t total = 0;
        for (size_t k = 0; k < nfeeds; k++) total += flen[k];
        int ok = text && in_len >= total;
        size_t at = ok ? in_len - total : 0;
        for (size_t k = 0; ok && k < nfeeds; k++) {
            ok = memcmp(text + at, ftext[k], flen[k]) == 0;
            at += flen[k];
        }
        if (ok) ok = (long long)cp_rx_cp_count(text, 0, in_len - total) == r->input_start;
        if (!ok) snprintf(r->input_error, sizeof r->input_error, "input text is not the cut prefix and the feeds");
    }
    cp_stream_free(p);
}

/* The case as one comparable object, in the runner's key order. */
static cp_value *result_object(const case_result *r, int with_message) {
    cp_value *o = cp_object();
    cp_object_set_cstr(o, "initial_events", cp_value_copy(r->initial));
    cp_object_set_cstr(o, "feed_events", cp_value_copy(r->feeds));
    cp_object_set_cstr(o, "error", r->error ? cp_value_copy(r->error) : cp_null());
    if (r->input_start >= 0) cp_object_set_cstr(o, "input_start", cp_int(r->input_start));
    if (with_message && r->message) {
        cp_object_set_cstr(o, "final_events", cp_value_copy(r->final));
        cp_object_set_cstr(o, "message", cp_value_copy(r->message));
    }
    return o;
}

static cp_value *want_object(const cp_value *c) {
    cp_value *o = cp_object();
    cp_object_set_cstr(o, "initial_events", decode(cp_object_get_cstr(c, "initial_events")));
    cp_object_set_cstr(o, "feed_events", decode(cp_object_get_cstr(c, "feed_events")));
    const cp_value *e = cp_object_get_cstr(c, "error");
    cp_object_set_cstr(o, "error", e ? decode(e) : cp_null());
    const cp_value *is = cp_object_get_cstr(c, "input_start");
    if (is) cp_object_set_cstr(o, "input_start", cp_value_copy(is));
    if (cp_object_get_cstr(c, "message")) {
        cp_object_set_cstr(o, "final_events", decode(cp_object_get_cstr(c, "final_events")));
        cp_object_set_cstr(o, "message", decode(cp_object_get_cstr(c, "message")));
    }
    return o;
}

static cp_value *run_oneshot(const cp_eng *eng, const cp_value *c) {
    const cp_value *feeds = cp_object_get_cstr(c, "feeds");
    cp_buf all = {0};
    for (size_t i = 0; i < cp_list_len(feeds); i++) {
        size_t l = 0;
        const char *s = cp_string_bytes(cp_list_get(feeds, i), &l);
        cp_buf_append(&all, s, l);
    }
    size_t pl = 0;
    const char *prefix = cp_string_bytes(cp_object_get_cstr(c, "prefix"), &pl);
    int vllm = cp_string_equals(cp_object_get_cstr(c, "dialect"), "vllm");
    cp_error err = {0};
    cp_value *msg = cp_parse_response_value(eng, all.data ? all.data : "", all.len, prefix, pl,
                                            cp_object_get_cstr(c, "tools"),
                                            vllm ? &CP_DIALECT_VLLM : &CP_DIALECT_TRANSFORMERS, &err);
    cp_buf_free(&all);
    cp_value *o = cp_object();
    if (msg) {
        cp_object_set_cstr(o, "message", msg);
        return o;
    }
    cp_value *e = cp_object();
    cp_object_set_cstr(e, "type", cp_string_cstr(err.exception));
    const cp_value *we = cp_object_get_cstr(cp_object_get_cstr(cp_object_get_cstr(c, "oneshot"), "error"), "loose");
    if (cp_bool_value(we)) {
        cp_object_set_cstr(e, "message", cp_value_copy(cp_object_get_cstr(
                                             cp_object_get_cstr(cp_object_get_cstr(c, "oneshot"), "error"), "message")));
        cp_object_set_cstr(e, "loose", cp_bool(1));
    } else {
        cp_object_set_cstr(e, "message", cp_string_cstr(err.message));
    }
    cp_object_set_cstr(o, "error", e);
    return o;
}

/* Events with a region_malformed error reduced to its class, chunks of one region merged (the runner's
 * normalize), initial + feeds + final. */
static cp_value *flat_events(const case_result *r) {
    cp_value *out = cp_list();
    cp_value *all = cp_list();
    for (size_t i = 0; i < cp_list_len(r->initial); i++) cp_list_append(all, cp_value_copy(cp_list_get(r->initial, i)));
    for (size_t f = 0; f < cp_list_len(r->feeds); f++) {
        const cp_value *l = cp_list_get(r->feeds, f);
        for (size_t i = 0; i < cp_list_len(l); i++) cp_list_append(all, cp_value_copy(cp_list_get(l, i)));
    }
    for (size_t i = 0; i < cp_list_len(r->final); i++) cp_list_append(all, cp_value_copy(cp_list_get(r->final, i)));
    for (size_t i = 0; i < cp_list_len(all); i++) {
        cp_value *ev = cp_value_copy(cp_list_get(all, i));
        cp_value *e = cp_object_get_cstr(ev, "error");
        if (cp_type_of(e) == CP_OBJECT) cp_object_set_cstr(ev, "error", cp_value_copy(cp_object_get_cstr(e, "type")));
        cp_value *last = cp_list_len(out) ? cp_list_get(out, cp_list_len(out) - 1) : NULL;
        if (last && cp_string_equals(cp_object_get_cstr(ev, "type"), "region_chunk") &&
            cp_string_equals(cp_object_get_cstr(last, "type"), "region_chunk") &&
            cp_value_equal(cp_object_get_cstr(ev, "field"), cp_object_get_cstr(last, "field"))) {
            size_t a = 0, b = 0;
            const char *sa = cp_string_bytes(cp_object_get_cstr(last, "text"), &a);
            const char *sb = cp_string_bytes(cp_object_get_cstr(ev, "text"), &b);
            cp_buf t = {0};
            cp_buf_append(&t, sa, a);
            cp_buf_append(&t, sb, b);
            size_t tl = 0;
            char *tb = cp_buf_take(&t, &tl);
            cp_object_set_cstr(last, "text", tb ? cp_string_take(tb, tl) : cp_null());
            cp_value_free(ev);
        } else {
            cp_list_append(out, ev);
        }
    }
    cp_value_free(all);
    return out;
}

static cp_value *flat_result(const case_result *r) {
    cp_value *o = cp_object();
    if (r->error) {
        cp_object_set_cstr(o, "error", cp_value_copy(cp_object_get_cstr(r->error, "type")));
        return o;
    }
    cp_object_set_cstr(o, "events", flat_events(r));
    cp_object_set_cstr(o, "message", cp_value_copy(r->message));
    return o;
}

static int has_four_byte_char(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] >= 0xF0) return 1;
    return 0;
}

/* ------------------------------------------------------------------ the kind function */

static void hex32(const uint8_t *h, char out[65]) {
    for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", h[i]);
}

void cp_vectors_template(cp_vectors_run *run, const char *file, const cp_value *vec) {
    const cp_value *cases = cp_object_get_cstr(vec, "cases");
    size_t n_cases = cp_list_len(cases);
    size_t tl = 0;
    const char *tname = cp_string_bytes(cp_object_get_cstr(vec, "tables"), &tl);
    char why[1200] = "";
    cp_tables *tables = NULL;
    cp_eng *eng = NULL;
    cp_error err = {0};
    size_t blen = 0;
    unsigned char *bytes = tname ? cp_vectors_read(run, tname, &blen) : NULL;
    if (!bytes) snprintf(why, sizeof why, "tables file not read");
    else {
        tables = cp_tables_load(bytes, blen, &err);
        free(bytes);
        if (!tables) snprintf(why, sizeof why, "%s: %.900s", err.exception, err.message);
        else {
            char hex[65];
            hex32(tables->template_sha256, hex);
            if (!cp_string_equals(cp_object_get_cstr(vec, "template_sha256"), hex))
                snprintf(why, sizeof why, "template hash differs from the vector's");
            else {
                eng = cp_eng_build(tables, &err);
                if (!eng) snprintf(why, sizeof why, "%s: %.900s", err.exception, err.message);
            }
        }
    }
    if (!eng) {
        for (size_t i = 0; i < n_cases; i++) {
            size_t il = 0;
            const char *id = cp_string_bytes(cp_object_get_cstr(cp_list_get(cases, i), "id"), &il);
            cp_vectors_fail(run, "%s %.*s: tables not loaded (%s)", file, (int)il, id ? id : "?", why);
        }
        cp_tables_free(tables);
        return;
    }
    for (size_t ci = 0; ci < n_cases; ci++) {
        const cp_value *c = cp_list_get(cases, ci);
        size_t il = 0;
        const char *id = cp_string_bytes(cp_object_get_cstr(c, "id"), &il);
        const cp_value *feeds = cp_object_get_cstr(c, "feeds");
        size_t nf = cp_list_len(feeds);
        const char **ft = calloc(nf ? nf : 1, sizeof *ft);
        size_t *fl = calloc(nf ? nf : 1, sizeof *fl);
        for (size_t k = 0; k < nf; k++) ft[k] = cp_string_bytes(cp_list_get(feeds, k), &fl[k]);
        case_result r;
        run_case(eng, c, ft, fl, nf, &r);
        cp_value *got = result_object(&r, 1);
        cp_value *want = want_object(c);
        char path[400] = "$";
        why[0] = 0;
        if (!diff(got, want, path, sizeof path, why, sizeof why)) {
            if (r.input_error[0]) snprintf(why, sizeof why, "%s", r.input_error);
            else if (cp_object_get_cstr(c, "oneshot")) {
                cp_value *o = run_oneshot(eng, c);
                cp_value *wo = decode(cp_object_get_cstr(c, "oneshot"));
                char p2[400] = "$";
                char w2[1000] = "";
                if (diff(o, wo, p2, sizeof p2, w2, sizeof w2)) snprintf(why, sizeof why, "parse_response: %s", w2);
                cp_value_free(o);
                cp_value_free(wo);
            }
        }
        if (why[0]) cp_vectors_fail(run, "%s %.*s: %s", file, (int)il, id ? id : "?", why);
        else cp_vectors_pass(run, NULL);
        /* a character of 4 UTF-8 bytes split across feeds: fed one byte at a time */
        cp_buf whole = {0};
        for (size_t k = 0; k < nf; k++) cp_buf_append(&whole, ft[k], fl[k]);
        if (!why[0] && has_four_byte_char(whole.data ? whole.data : "", whole.len)) {
            const char **bt = calloc(whole.len ? whole.len : 1, sizeof *bt);
            size_t *bl = calloc(whole.len ? whole.len : 1, sizeof *bl);
            for (size_t k = 0; k < whole.len; k++) {
                bt[k] = whole.data + k;
                bl[k] = 1;
            }
            case_result rb;
            run_case(eng, c, bt, bl, whole.len, &rb);
            cp_value *a = flat_result(&rb), *b = flat_result(&r);
            char p3[400] = "$";
            char w3[1000] = "";
            if (diff(a, b, p3, sizeof p3, w3, sizeof w3))
                cp_vectors_fail(run, "%s %.*s (fed one byte at a time): %s", file, (int)il, id ? id : "?", w3);
            else cp_vectors_pass(run, NULL);
            cp_value_free(a);
            cp_value_free(b);
            result_free(&rb);
            free(bt);
            free(bl);
        }
        cp_buf_free(&whole);
        result_free(&r);
        cp_value_free(got);
        cp_value_free(want);
        free(ft);
        free(fl);
    }
    cp_eng_free(eng);
    cp_tables_free(tables);
}

/* ------------------------------------------------------------------ token-mode vectors */

/* The ids of a JSON list as int64 (n set); NULL for an empty list. */
static int64_t *ids_of(const cp_value *list, size_t *n) {
    *n = cp_list_len(list);
    int64_t *ids = calloc(*n ? *n : 1, sizeof *ids);
    for (size_t k = 0; ids && k < *n; k++) ids[k] = cp_int_value(cp_list_get(list, k));
    return ids;
}

/* The decoded text of each feed, then of the end (an id out of range: the texts up to it). */
static cp_value *decoded_texts(const cp_tables *t, const cp_value *feeds) {
    cp_value *out = cp_list();
    cp_tok_decoder *d = cp_tok_decoder_new(&t->tokens);
    int ok = 1;
    for (size_t f = 0; ok && f < cp_list_len(feeds); f++) {
        size_t n = 0;
        int64_t *ids = ids_of(cp_list_get(feeds, f), &n);
        cp_buf b = {0};
        cp_error e = {0};
        if (cp_tok_decode(d, ids, n, 0, &b, &e) < 0) ok = 0;
        else cp_list_append(out, cp_string(b.data ? b.data : "", b.len));
        cp_buf_free(&b);
        free(ids);
    }
    if (ok) {
        cp_buf b = {0};
        cp_error e = {0};
        if (cp_tok_decode(d, NULL, 0, 1, &b, &e) == 0) cp_list_append(out, cp_string(b.data ? b.data : "", b.len));
        cp_buf_free(&b);
    }
    cp_tok_decoder_free(d);
    return out;
}

/* The public API's parser for the same case (cp_engine_parser_ids), fed in lockstep by run_token_case: each
 * feed's struct events (cp_parser_feed_ids_events) written as JSON (cp_events_json), which is the JSON API's
 * text, must read back as the engine's events. NULL when it cannot be made (then the check says so). */
static cp_parser *public_parser(const cp_engine *pe, const cp_value *c, int vllm) {
    cp_parser_options o = {vllm ? CP_DIALECT_VLLM_EVENTS : CP_DIALECT_TRANSFORMERS_EVENTS, NULL, 0};
    char *tools = NULL;
    const cp_value *tv = cp_object_get_cstr(c, "tools");
    if (tv && cp_type_of(tv) != CP_NULL) {
        cp_json_dump_options d = cp_json_dump_compact();
        tools = cp_json_dump(tv, &d, &o.tools_json_len);
        o.tools_json = tools;
    }
    size_t pl = 0, np = 0;
    const cp_value *pids = cp_object_get_cstr(c, "prefix_ids");
    const char *prefix = pids ? NULL : cp_string_bytes(cp_object_get_cstr(c, "prefix"), &pl);
    int64_t *prefix_ids = pids ? ids_of(pids, &np) : NULL;
    cp_error err = {0};
    cp_parser *pp = cp_engine_parser_ids(pe, prefix, pl, prefix_ids, np, &o, &err);
    free(prefix_ids);
    free(tools);
    return pp;
}

/* 0 when the public parser's struct events for ids, as JSON, equal `want` (NULL: the engine failed, so must it). */
static int public_feed_differs(cp_parser *pp, const int64_t *ids, size_t n, const cp_value *want) {
    const cp_event *ev = NULL;
    size_t k = 0;
    cp_error err = {0};
    int r = cp_parser_feed_ids_events(pp, ids, n, &ev, &k, &err);
    if (r < 0) return want != NULL;
    if (!want) return 1;
    size_t jl = 0;
    char *js = cp_events_json(ev, k, &jl, &err);
    cp_value *got = js ? cp_json_parse(js, jl, &err) : NULL;
    int differs = !got || !cp_value_equal(got, want);
    cp_value_free(got);
    free(js);
    return differs;
}

static void run_token_case(const cp_eng *eng, const cp_engine *pe, const cp_tables *t, const cp_value *c,
                           case_result *r) {
    memset(r, 0, sizeof *r);
    r->input_start = -1;
    r->initial = cp_list();
    r->feeds = cp_list();
    int vllm = cp_string_equals(cp_object_get_cstr(c, "dialect"), "vllm");
    const cp_dialect_opts *d = vllm ? &CP_DIALECT_VLLM : &CP_DIALECT_TRANSFORMERS;
    size_t pl = 0, np = 0;
    const cp_value *pids = cp_object_get_cstr(c, "prefix_ids");
    const char *prefix = pids ? NULL : cp_string_bytes(cp_object_get_cstr(c, "prefix"), &pl);
    int64_t *prefix_ids = pids ? ids_of(pids, &np) : NULL;
    cp_error err = {0};
    cp_tok_stream *p = cp_tok_stream_new(eng, t, prefix, pl, prefix_ids, np, pids != NULL,
                                         cp_object_get_cstr(c, "tools"), d, &err);
    free(prefix_ids);
    if (!p) {
        r->error = stage_error(&err, "init", 0);
        return;
    }
    cp_stream *core = cp_tok_stream_core(p);
    size_t in_len = 0, in_cp = 0;
    if (vllm && cp_stream_input_text(core, &in_len, &in_cp)) r->input_start = (long long)in_cp;
    cp_value_free(r->initial);
    r->initial = cp_value_copy(cp_stream_initial_events(core));
    encode_events(r->initial, cp_object_get_cstr(c, "initial_events"));
    const cp_value *feeds = cp_object_get_cstr(c, "feeds");
    const cp_value *want_feeds = cp_object_get_cstr(c, "feed_events");
    cp_parser *pp = pe ? public_parser(pe, c, vllm) : NULL;
    if (!pp) snprintf(r->input_error, sizeof r->input_error, "cp_engine_parser_ids failed where the engine did not");
    for (size_t i = 0; i < cp_list_len(feeds); i++) {
        size_t n = 0;
        int64_t *ids = ids_of(cp_list_get(feeds, i), &n);
        cp_value *ev = cp_tok_stream_feed(p, ids, n, &err);
        if (pp && public_feed_differs(pp, ids, n, ev) && !r->input_error[0])
            snprintf(r->input_error, sizeof r->input_error,
                     "feed %zu: the struct events (cp_parser_feed_ids_events) as JSON differ from the engine's", i);
        free(ids);
        if (!ev) {
            r->error = stage_error(&err, "feed", i);
            break;
        }
        encode_events(ev, cp_list_get(want_feeds, i));
        cp_list_append(r->feeds, ev);
    }
    if (!r->error) {
        cp_value *msg = NULL;
        cp_value *fin = cp_tok_stream_finish(p, &msg, &err);
        if (!fin) r->error = stage_error(&err, "finalize", 0);
        else {
            encode_events(fin, cp_object_get_cstr(c, "final_events"));
            r->final = fin;
            r->message = msg;
        }
    }
    if (vllm && !r->error) {
        /* the input text: the cut prompt, then every decoded text */
        const char *text = cp_stream_input_text(core, &in_len, NULL);
        const cp_value *texts = cp_object_get_cstr(c, "texts");
        cp_buf all = {0};
        for (size_t k = 0; k < cp_list_len(texts); k++) {
            size_t l = 0;
            const char *s = cp_string_bytes(cp_list_get(texts, k), &l);
            cp_buf_append(&all, s, l);
        }
        int ok = text && in_len >= all.len && memcmp(text + in_len - all.len, all.data ? all.data : "", all.len) == 0 &&
                 (long long)cp_rx_cp_count(text, 0, in_len - all.len) == r->input_start;
        if (!ok) snprintf(r->input_error, sizeof r->input_error, "input text is not the cut prompt and the texts");
        cp_buf_free(&all);
    }
    cp_parser_free(pp);
    cp_tok_stream_free(p);
}

static cp_value *run_token_oneshot(const cp_eng *eng, const cp_tables *t, const cp_value *c) {
    const cp_value *feeds = cp_object_get_cstr(c, "feeds");
    size_t total = 0;
    for (size_t f = 0; f < cp_list_len(feeds); f++) total += cp_list_len(cp_list_get(feeds, f));
    int64_t *ids = calloc(total ? total : 1, sizeof *ids);
    size_t k = 0;
    for (size_t f = 0; f < cp_list_len(feeds); f++)
        for (size_t i = 0; i < cp_list_len(cp_list_get(feeds, f)); i++) ids[k++] = cp_int_value(cp_list_get(cp_list_get(feeds, f), i));
    size_t pl = 0, np = 0;
    const cp_value *pids = cp_object_get_cstr(c, "prefix_ids");
    const char *prefix = pids ? NULL : cp_string_bytes(cp_object_get_cstr(c, "prefix"), &pl);
    int64_t *prefix_ids = pids ? ids_of(pids, &np) : NULL;
    int vllm = cp_string_equals(cp_object_get_cstr(c, "dialect"), "vllm");
    cp_error err = {0};
    cp_value *msg = cp_parse_tokens_value(eng, t, ids, total, prefix, pl, prefix_ids, np, pids != NULL,
                                          cp_object_get_cstr(c, "tools"),
                                          vllm ? &CP_DIALECT_VLLM : &CP_DIALECT_TRANSFORMERS, &err);
    free(ids);
    free(prefix_ids);
    cp_value *o = cp_object();
    if (msg) {
        cp_object_set_cstr(o, "message", msg);
        return o;
    }
    cp_value *e = cp_object();
    cp_object_set_cstr(e, "type", cp_string_cstr(err.exception));
    const cp_value *we = cp_object_get_cstr(cp_object_get_cstr(c, "oneshot"), "error");
    if (cp_bool_value(cp_object_get_cstr(we, "loose"))) {
        cp_object_set_cstr(e, "message", cp_value_copy(cp_object_get_cstr(we, "message")));
        cp_object_set_cstr(e, "loose", cp_bool(1));
    } else {
        cp_object_set_cstr(e, "message", cp_string_cstr(err.message));
    }
    cp_object_set_cstr(o, "error", e);
    return o;
}

/* Token-mode vectors (kind "tokens"): the tables file with its token section, then per case the decoded texts,
 * the events, message or error of the token parser, and the one-shot parse of all the ids. */
void cp_vectors_tokens(cp_vectors_run *run, const char *file, const cp_value *vec) {
    const cp_value *cases = cp_object_get_cstr(vec, "cases");
    size_t n_cases = cp_list_len(cases);
    size_t tl = 0;
    const char *tname = cp_string_bytes(cp_object_get_cstr(vec, "tables"), &tl);
    char why[1200] = "";
    cp_tables *tables = NULL;
    cp_eng *eng = NULL;
    cp_error err = {0};
    size_t blen = 0;
    unsigned char *bytes = tname ? cp_vectors_read(run, tname, &blen) : NULL;
    if (!bytes) snprintf(why, sizeof why, "tables file not read");
    else {
        tables = cp_tables_load(bytes, blen, &err);
        free(bytes);
        if (!tables) snprintf(why, sizeof why, "%s: %.900s", err.exception, err.message);
        else {
            char hex[65], vhex[65];
            hex32(tables->template_sha256, hex);
            hex32(tables->vocab_sha256, vhex);
            if (!cp_string_equals(cp_object_get_cstr(vec, "template_sha256"), hex))
                snprintf(why, sizeof why, "template hash differs from the vector's");
            else if (!cp_string_equals(cp_object_get_cstr(vec, "vocab_sha256"), vhex))
                snprintf(why, sizeof why, "vocabulary hash differs from the vector's");
            else if (!tables->has_tokens || (int64_t)tables->tokens.size != cp_int_value(cp_object_get_cstr(vec, "vocab_size")))
                snprintf(why, sizeof why, "vocabulary size differs from the vector's");
            else {
                eng = cp_eng_build(tables, &err);
                if (!eng) snprintf(why, sizeof why, "%s: %.900s", err.exception, err.message);
                else if (cp_tok_binding_check(eng, tables, &err) < 0) {
                    snprintf(why, sizeof why, "%s: %.900s", err.exception, err.message);
                    cp_eng_free(eng);
                    eng = NULL;
                }
            }
        }
    }
    if (!eng) {
        for (size_t i = 0; i < n_cases; i++) {
            size_t il = 0;
            const char *id = cp_string_bytes(cp_object_get_cstr(cp_list_get(cases, i), "id"), &il);
            cp_vectors_fail(run, "%s %.*s: tables not loaded (%s)", file, (int)il, id ? id : "?", why);
        }
        cp_tables_free(tables);
        return;
    }
    cp_engine *pub = cp_engine_new(tables, &err);
    for (size_t ci = 0; ci < n_cases; ci++) {
        const cp_value *c = cp_list_get(cases, ci);
        size_t il = 0;
        const char *id = cp_string_bytes(cp_object_get_cstr(c, "id"), &il);
        char path[400] = "$";
        why[0] = 0;
        cp_value *texts = decoded_texts(tables, cp_object_get_cstr(c, "feeds"));
        char w0[1000] = "";
        if (diff(texts, cp_object_get_cstr(c, "texts"), path, sizeof path, w0, sizeof w0))
            snprintf(why, sizeof why, "decoded texts: %s", w0);
        cp_value_free(texts);
        if (!why[0]) {
            case_result r;
            run_token_case(eng, pub, tables, c, &r);
            cp_value *got = result_object(&r, 1);
            cp_value *want = want_object(c);
            strcpy(path, "$");
            if (!diff(got, want, path, sizeof path, why, sizeof why) && r.input_error[0])
                snprintf(why, sizeof why, "%s", r.input_error);
            cp_value_free(got);
            cp_value_free(want);
            result_free(&r);
        }
        if (!why[0] && cp_object_get_cstr(c, "oneshot")) {
            cp_value *o = run_token_oneshot(eng, tables, c);
            cp_value *wo = decode(cp_object_get_cstr(c, "oneshot"));
            char p2[400] = "$";
            char w2[1000] = "";
            if (diff(o, wo, p2, sizeof p2, w2, sizeof w2)) snprintf(why, sizeof why, "parse_tokens: %s", w2);
            cp_value_free(o);
            cp_value_free(wo);
        }
        if (why[0]) cp_vectors_fail(run, "%s %.*s: %s", file, (int)il, id ? id : "?", why);
        else cp_vectors_pass(run, NULL);
    }
    cp_engine_free(pub);
    cp_eng_free(eng);
    cp_tables_free(tables);
}
