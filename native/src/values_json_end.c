/*
 * values_json_end.c - where a JSON value ends (close_json_end; runtime/values/json_end.py, JS JsonEnd), and what is
 * built on it: Python's json.JSONDecoder().raw_decode(s, i) and the json-values parser (json_values.py).
 *
 * The tracker reads bytes: every structural character of JSON is ASCII, so a non-ASCII byte is an ordinary string
 * character inside a string and kills the value anywhere else, as a non-ASCII code point does in Python.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "values_internal.h"

enum {
    J_BEFORE, J_VALUE, J_ARR_FIRST, J_ARR_AFTER, J_OBJ_FIRST, J_OBJ_KEY, J_OBJ_COLON, J_OBJ_AFTER, J_STR, J_ESC,
    J_HEX, J_LIT, J_MINUS, J_ZERO, J_INT, J_DOT, J_FRAC, J_EXP, J_ESIGN, J_EDIG, J_DONE, J_DEAD
};

static int is_ws(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
static int ws_state(int s) { return s <= J_OBJ_AFTER; }

static int top_is_object(const cp_json_end *je) {
    size_t i = je->depth - 1;
    return (je->stack[i / 8] >> (i % 8)) & 1;
}

void cp_json_end_init(cp_json_end *je, size_t start) {
    memset(je, 0, sizeof *je);
    je->pos = start;
    je->state = J_BEFORE;
    je->cand = -1;
    je->end = -1;
}

static int die(cp_json_end *je) {
    je->dead = 1;
    je->state = J_DEAD;
    je->depth = 0;
    return J_DEAD;
}

static int value_done(cp_json_end *je, long long at) {
    if (!je->depth) {
        je->end = at;
        je->state = J_DONE;
        return J_DONE;
    }
    return top_is_object(je) ? J_OBJ_AFTER : J_ARR_AFTER;
}

static int begin_value(cp_json_end *je, unsigned char c) {
    if (c == '"') { je->key = 0; return J_STR; }
    if (c == '{' || c == '[') {
        if (je->depth >= CP_JSON_END_MAX_DEPTH) return die(je);
        size_t i = je->depth++;
        if (c == '{') je->stack[i / 8] |= (unsigned char)(1u << (i % 8));
        else je->stack[i / 8] &= (unsigned char)~(1u << (i % 8));
        return c == '{' ? J_OBJ_FIRST : J_ARR_FIRST;
    }
    if (c == '-') return J_MINUS;
    if (c == '0') return J_ZERO;
    if (c >= '1' && c <= '9') return J_INT;
    const char *lit = c == 'n' ? "null" : c == 't' ? "true" : c == 'f' ? "false" : c == 'N' ? "NaN" : c == 'I' ? "Infinity" : NULL;
    if (lit) { je->lit = lit; je->need = 1; return J_LIT; }
    return die(je);
}

static int step(cp_json_end *je, unsigned char c, long long at);

static int number_end(cp_json_end *je, unsigned char c, long long at, long long cand) {
    je->cand = -1;
    if (!je->depth) {
        je->end = cand < 0 ? at : cand;
        je->state = J_DONE;
        return J_DONE;
    }
    if (cand >= 0) return die(je);
    je->state = top_is_object(je) ? J_OBJ_AFTER : J_ARR_AFTER;
    if (is_ws(c)) return je->state;
    return step(je, c, at);
}

static int is_hex(unsigned char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

static int step(cp_json_end *je, unsigned char c, long long at) {
    int state = je->state;
    switch (state) {
    case J_BEFORE: case J_VALUE: return begin_value(je, c);
    case J_ARR_FIRST:
        if (c == ']') { je->depth--; return value_done(je, at + 1); }
        return begin_value(je, c);
    case J_ARR_AFTER:
        if (c == ',') return J_VALUE;
        if (c == ']') { je->depth--; return value_done(je, at + 1); }
        return die(je);
    case J_OBJ_FIRST: case J_OBJ_KEY:
        if (c == '"') { je->key = 1; return J_STR; }
        if (c == '}' && state == J_OBJ_FIRST) { je->depth--; return value_done(je, at + 1); }
        return die(je);
    case J_OBJ_COLON: return c == ':' ? J_VALUE : die(je);
    case J_OBJ_AFTER:
        if (c == ',') return J_OBJ_KEY;
        if (c == '}') { je->depth--; return value_done(je, at + 1); }
        return die(je);
    case J_ESC:
        if (c == 'u') { je->need = 4; return J_HEX; }
        return c && strchr("\"\\/bfnrt", c) ? J_STR : die(je);
    case J_HEX:
        if (!is_hex(c)) return die(je);
        return --je->need == 0 ? J_STR : J_HEX;
    case J_LIT:
        if ((char)c != je->lit[je->need]) return die(je);
        je->need++;
        return je->lit[je->need] == 0 ? value_done(je, at + 1) : J_LIT;
    case J_MINUS:
        if (c == '0') return J_ZERO;
        if (c >= '1' && c <= '9') return J_INT;
        if (c == 'I') { je->lit = "-Infinity"; je->need = 2; return J_LIT; }
        return die(je);
    case J_ZERO: case J_INT: case J_FRAC:
        if (c == '.' && state != J_FRAC) { je->cand = at; return J_DOT; }
        if (c == 'e' || c == 'E') { je->cand = at; return J_EXP; }
        return number_end(je, c, at, -1);
    case J_DOT:
        if (is_digit(c)) { je->cand = -1; return J_FRAC; }
        return number_end(je, c, at, je->cand);
    case J_EXP:
        if (is_digit(c)) { je->cand = -1; return J_EDIG; }
        if (c == '+' || c == '-') return J_ESIGN;
        return number_end(je, c, at, je->cand);
    case J_ESIGN:
        if (is_digit(c)) { je->cand = -1; return J_EDIG; }
        return number_end(je, c, at, je->cand);
    case J_EDIG: return number_end(je, c, at, -1);
    default: return die(je);
    }
}

void cp_json_end_advance(cp_json_end *je, const char *text, size_t base, size_t upto) {
    int state = je->state;
    if (state >= J_DONE || upto <= je->pos || je->pos < base) return;
    const unsigned char *t = (const unsigned char *)text;
    size_t i = je->pos - base, n = upto - base;
    while (i < n) {
        if (state == J_STR) {
            while (i < n && t[i] != '"' && t[i] != '\\' && t[i] >= 0x20) i++;
            if (i >= n) break;
            unsigned char c = t[i];
            if (c == '"') {
                i++;
                if (je->key) { je->key = 0; state = J_OBJ_COLON; }
                else {
                    state = value_done(je, (long long)(i + base));
                    if (state >= J_DONE) break;
                }
            } else if (c == '\\') { i++; state = J_ESC; }
            else { state = die(je); break; }
            continue;
        }
        if (ws_state(state)) {
            while (i < n && is_ws(t[i])) i++;
            if (i >= n) break;
        } else if (state == J_INT || state == J_FRAC || state == J_EDIG) {
            while (i < n && is_digit(t[i])) i++;
            if (i >= n) break;
        }
        je->state = state;
        state = step(je, t[i], (long long)(i + base));
        if (state == J_DONE && je->end <= (long long)(i + base)) break;   /* (the byte at i was not part of it) */
        i++;
        if (state >= J_DONE) break;
    }
    je->state = state;
    if (state < J_DONE) je->pos = n + base;
    else if (state == J_DONE) je->pos = (size_t)je->end;
}

void cp_json_end_finish(cp_json_end *je) {
    int s = je->state;
    if (s >= J_DONE) return;
    if (!je->depth && (s == J_ZERO || s == J_INT || s == J_FRAC || s == J_EDIG)) {
        je->end = (long long)je->pos;
        je->state = J_DONE;
    } else if (!je->depth && (s == J_DOT || s == J_EXP || s == J_ESIGN)) {
        je->end = je->cand;
        je->state = J_DONE;
    } else die(je);
}

int cp_json_end_status(const cp_json_end *je) {
    return je->state == J_DONE ? 1 : je->state == J_DEAD ? -1 : 0;
}

long long cp_json_end_hold(const cp_json_end *je) {
    if (je->state == J_DONE) return je->end;
    if (je->state == J_DEAD) return -1;
    return je->cand >= 0 ? je->cand : (long long)je->pos;
}

long long cp_json_end_lowest(const cp_json_end *je) { return je->cand >= 0 ? je->cand : (long long)je->pos; }

/* ------------------------------------------------------------------------------------------------ raw_decode */

/* A JSONDecodeError message of a parse of s[i..n) rebased to s: "MSG: line L column C (char P)" with P, L and C
 * counted in the whole text (P code points; L lines; C from the last newline before it). */
static void rebase_error(cp_error *e, const char *s, size_t n, size_t i) {
    char *tail = strstr(e->message, ": line ");
    char *ch = tail ? strstr(tail, "(char ") : NULL;
    if (!ch) return;
    size_t rel = (size_t)strtoull(ch + 6, NULL, 10);
    /* byte position of code point `rel` of s[i..] */
    size_t b = i, k = 0;
    while (b < n && k < rel) {
        b++;
        while (b < n && ((unsigned char)s[b] & 0xC0) == 0x80) b++;
        k++;
    }
    size_t pos = vpy_cplen(s, b), line = 1, nl = (size_t)-1;
    for (size_t j = 0; j < b; j++)
        if (s[j] == '\n') { line++; nl = j; }
    size_t col = nl == (size_t)-1 ? pos + 1 : pos - vpy_cplen(s, nl + 1) + 1;
    char msg[CP_ERROR_MESSAGE_SIZE];
    size_t head = (size_t)(tail - e->message);
    if (head > sizeof msg - 80) head = sizeof msg - 80;
    memcpy(msg, e->message, head);
    snprintf(msg + head, sizeof msg - head, ": line %zu column %zu (char %zu)", line, col, pos);
    memcpy(e->message, msg, strlen(msg) + 1);
}

cp_value *vjson_raw_decode(const char *s, size_t n, size_t i, size_t *end, cp_error *err) {
    if (i < n && !is_ws((unsigned char)s[i])) {
        cp_json_end je;
        cp_json_end_init(&je, i);
        cp_json_end_advance(&je, s, 0, n);
        cp_json_end_finish(&je);
        if (cp_json_end_status(&je) == 1) {
            cp_value *v = vjson_loads(s + i, (size_t)je.end - i, err);
            if (v) *end = (size_t)je.end;
            else if (err && strcmp(err->exception, "JSONDecodeError") == 0) rebase_error(err, s, n, i);
            return v;
        }
    }
    /* not a value: the scanner's error at the first place it fails (parse the rest for it) */
    cp_error e = {0};
    cp_value *v = NULL;
    if (i >= n || is_ws((unsigned char)s[i])) cp_error_set(&e, "JSONDecodeError", "Expecting value: line 1 column 1 (char 0)");
    else v = vjson_loads(s + i, n - i, &e);
    if (v) {   /* (cannot happen: the tracker and the scanner read one grammar) */
        cp_value_free(v);
        return verr(err, "RuntimeError", "json-values: internal error: the value's end was not found");
    }
    if (strcmp(e.exception, "JSONDecodeError") == 0) rebase_error(&e, s, n, i);
    if (err && !err->failed) *err = e;
    return NULL;
}

long long vjson_too_deep_at(const char *s, size_t n) {
    size_t openers = 0;
    for (size_t k = 0; k < n; k++)
        if (s[k] == '[' || s[k] == '{') openers++;
    if (openers <= CP_JSON_END_MAX_DEPTH) return -1;
    long long depth = 0;
    int unclosed = 0;   /* a string literal ran to the end: every later '"' was escaped in that run, and a run from
                           just after it is the rest of that run, so no later literal closes either (linear time) */
    for (size_t k = 0; k < n; k++) {
        char c = s[k];
        if (c == '"' && !unclosed) {
            /* a string literal "..." with backslash escapes, when it closes; else the quote is skipped */
            size_t j = k + 1;
            while (j < n && s[j] != '"') {
                if (s[j] == '\\') {
                    if (j + 1 >= n) { j = n; break; }
                    j += 2;
                } else j++;
            }
            if (j < n) { k = j; continue; }
            unclosed = 1;
        } else if (c == '[' || c == '{') {
            if (++depth > CP_JSON_END_MAX_DEPTH) return (long long)k;
        } else if (c == ']' || c == '}') depth--;
    }
    return -1;
}

/* ------------------------------------------------------------------------------------------------ json-values */

static size_t skip_ws(const char *s, size_t n, size_t i) {
    while (i < n && is_ws((unsigned char)s[i])) i++;
    return i;
}

cp_value *cp_values_json_values(const char *text, size_t n, cp_error *err) {
    if (!text) { text = ""; n = 0; }
    long long deep = vjson_too_deep_at(text, n);
    if (deep >= 0)
        return verr(err, "ValueError", "json-values: brackets nested more than %d deep at offset %zu",
                    CP_JSON_END_MAX_DEPTH, vpy_cplen(text, (size_t)deep));
    cp_value *out = cp_list();
    if (!out) return verr_oom(err);
    size_t i = skip_ws(text, n, 0);
    for (;;) {
        cp_error e = {0};
        size_t end = i;
        cp_value *v = vjson_raw_decode(text, n, i, &end, &e);
        if (!v) {
            cp_value_free(out);
            if (cp_values_is_value_error(e.exception)) return verr(err, "ValueError", "json-values: %s", e.message);
            if (err && !err->failed) *err = e;
            return NULL;
        }
        if (cp_list_append(out, v) < 0) { cp_value_free(out); return verr_oom(err); }
        i = skip_ws(text, n, end);
        if (i == n) return out;
        if (text[i] != ',') {
            cp_value_free(out);
            return verr(err, "ValueError", "json-values: expected ',' or the end of the body at offset %zu", vpy_cplen(text, i));
        }
        i = skip_ws(text, n, i + 1);
    }
}
