/*
 * values_parsers.c - the base content parsers (runtime/values/parsers.py; JS parseContent): text, int, float,
 * bool, json (string_delims, unquoted_keys, allow_non_json), xml-inline, kv-lines, nested value parsers and the
 * escaped_json_values reading of a json value parser.
 *
 * A text is (s, n, none): `none` stands for Python's None, which a nested value parser is given for a `value`
 * group that did not take part; each parser then fails as Python's does on None.
 */
#include <stdlib.h>
#include <string.h>

#include "values_internal.h"

typedef struct vtext {
    const char *s;
    size_t n;
    int none;
} vtext;

/* args.get("strip", True) then text.strip(): *out the (sub)text; -1 on error. */
static int strip_if_asked(vtext *t, const cp_value *args, const char *method, cp_error *err) {
    int failed = 0;
    const cp_value *strip = vpy_get(args, "strip", &vconst_true, err, &failed);
    if (failed) return -1;
    if (!vpy_truthy(strip)) return 0;
    if (t->none) {
        verr(err, "AttributeError", "'NoneType' object has no attribute '%s'", method ? method : "strip");
        return -1;
    }
    size_t s, e;
    vpy_strip(t->s, t->n, &s, &e);
    t->s += s;
    t->n = e - s;
    return 0;
}

static cp_value *parse_text(vtext t, const cp_value *args, cp_error *err) {
    if (strip_if_asked(&t, args, NULL, err) < 0) return NULL;
    if (t.none) return cp_null();
    cp_value *v = cp_string(t.s, t.n);
    return v ? v : verr_oom(err);
}

static cp_value *parse_int(vtext t, const cp_value *args, cp_error *err) {
    if (strip_if_asked(&t, args, NULL, err) < 0) return NULL;
    if (t.none)
        return verr(err, "TypeError", "int() argument must be a string, a bytes-like object or a real number, not 'NoneType'");
    return vpy_int(t.s, t.n, err);
}

static cp_value *parse_float(vtext t, const cp_value *args, cp_error *err) {
    if (strip_if_asked(&t, args, NULL, err) < 0) return NULL;
    if (t.none) return verr(err, "TypeError", "float() argument must be a string or a real number, not 'NoneType'");
    double d;
    if (vpy_float(t.s, t.n, &d, err) < 0) return NULL;
    cp_value *v = cp_float(d);
    return v ? v : verr_oom(err);
}

static cp_value *parse_bool(vtext t, const cp_value *args, cp_error *err) {
    if (strip_if_asked(&t, args, NULL, err) < 0) return NULL;
    if (t.none) return verr(err, "AttributeError", "'NoneType' object has no attribute 'lower'");
    /* str.lower() maps no non-ASCII character to an ASCII one of "true"/"1" (only U+212A KELVIN SIGN and U+0130
     * lower to ASCII letters: 'k' and 'i' + U+0307), so an ASCII comparison decides */
    int r = (t.n == 1 && t.s[0] == '1');
    if (t.n == 4) {
        r = 1;
        for (int i = 0; i < 4; i++) {
            char c = t.s[i];
            if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
            if (c != "true"[i]) r = 0;
        }
    }
    cp_value *v = cp_bool(r);
    return v ? v : verr_oom(err);
}

/* ------------------------------------------------------------------------------------------------ json */

cp_value *vjson_loads(const char *s, size_t n, cp_error *err) { return cp_json_parse(s, n, err); }

/* One [open, close] pair: `open(.*?)close` (DOTALL) substituted by sentinels over `in`, captures appended. */
static int sub_pair(vbuf *out, const char *in, size_t n, const char *od, size_t lo, const char *cd, size_t lc,
                    cp_value *captured) {
    size_t pos = 0;
    if (lo == 0 && lc == 0) {
        /* the pattern `(.*?)`: an empty match at each position, and between two of them the next character (a
         * non-empty match may start where an empty one was): every character becomes a captured string */
        size_t i = 0;
        for (;;) {
            vb_printf(out, "\x01%zu\x02", cp_list_len(captured));
            if (cp_list_append(captured, cp_string("", 0)) < 0) return -1;
            if (i >= n) break;
            size_t j = i;
            cp_utf8_decode(in, n, &j, 1);
            vb_printf(out, "\x01%zu\x02", cp_list_len(captured));
            if (cp_list_append(captured, cp_string(in + i, j - i)) < 0) return -1;
            i = j;
        }
        return out->oom ? -1 : 0;
    }
    for (;;) {
        const char *hit = NULL;
        if (pos + lo <= n) {
            if (lo == 0) hit = in + pos;
            else {
                for (size_t k = pos; k + lo <= n; k++)
                    if (memcmp(in + k, od, lo) == 0) { hit = in + k; break; }
            }
        }
        if (!hit) break;
        size_t i = (size_t)(hit - in), j = (size_t)-1;
        for (size_t k = i + lo; k + lc <= n; k++)
            if (memcmp(in + k, cd, lc) == 0) { j = k; break; }
        if (j == (size_t)-1) break;
        vb_put(out, in + pos, i - pos);
        vb_printf(out, "\x01%zu\x02", cp_list_len(captured));
        if (cp_list_append(captured, cp_string(in + i + lo, j - i - lo)) < 0) return -1;
        pos = j + lc;
    }
    vb_put(out, in + pos, n - pos);
    return out->oom ? -1 : 0;
}

/* regex.sub(r'(?<=[{,])(\w+):', r'"\1":', text) */
static void quote_bare_keys(vbuf *out, const char *s, size_t n, const cp_values_env *env) {
    size_t pos = 0;
    for (size_t q = 0; q < n; q++) {
        if (s[q] != '{' && s[q] != ',') continue;
        size_t p = q + 1, k = p;
        while (k < n) {
            size_t j = k;
            int32_t c = cp_utf8_decode(s, n, &j, 1);
            if (c < 0 || !vu_word_env(env, (uint32_t)c)) break;
            k = j;
        }
        if (k > p && k < n && s[k] == ':') {
            vb_put(out, s + pos, p - pos);
            vb_putc(out, '"');
            vb_put(out, s + p, k - p);
            vb_puts(out, "\":");
            pos = k + 1;
            q = k;
        }
    }
    vb_put(out, s + pos, n - pos);
}

/* The sentinels \x01<index>\x02 replaced by json.dumps(captured[index]) (ensure_ascii). */
static int put_back(vbuf *out, const char *s, size_t n, const cp_value *captured) {
    cp_json_dump_options o = cp_json_dump_defaults();
    size_t pos = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\x01') continue;
        size_t j = i + 1, idx = 0;
        int ok = j < n && s[j] >= '0' && s[j] <= '9' && !(s[j] == '0' && j + 1 < n && s[j + 1] != '\x02');
        while (ok && j < n && s[j] >= '0' && s[j] <= '9') {
            if (idx > (SIZE_MAX - 9) / 10) { ok = 0; break; }
            idx = idx * 10 + (size_t)(s[j] - '0');
            j++;
        }
        if (!ok || j >= n || s[j] != '\x02' || idx >= cp_list_len(captured)) continue;
        size_t dn;
        char *d = cp_json_dump(cp_list_get(captured, idx), &o, &dn);
        if (!d) return -1;
        vb_put(out, s + pos, i - pos);
        vb_put(out, d, dn);
        free(d);
        pos = j + 1;
        i = j;
    }
    vb_put(out, s + pos, n - pos);
    return out->oom ? -1 : 0;
}

static void *unpack_error(cp_error *err, size_t got) {
    if (got > 2) return verr(err, "ValueError", "too many values to unpack (expected 2)");
    return verr(err, "ValueError", "not enough values to unpack (expected 2, got %zu)", got);
}

/* What regex.escape(d) + "(.*?)" makes of one delimiter, as the literal text it then matches, into `out`: a str is
 * itself; a list (or a dict's keys) is the concatenation of its items, which regex.escape iterates (an item that
 * is not a str fails as there: AttributeError "no attribute 'isspace'", or TypeError "unhashable type"); anything
 * else is a TypeError "'T' object is not iterable". A multi-character item holding regex syntax would be a
 * pattern there, not a literal: refused (RuntimeError: not supported here). */
static int delim_literal(const cp_value *d, vbuf *out, cp_error *err) {
    if (vpy_is_str(d)) { vb_put(out, d->u.string.bytes, d->u.string.len); return 0; }
    if (!vpy_is_list(d) && !vpy_is_dict(d)) {
        verr(err, "TypeError", "'%s' object is not iterable", vpy_type_name(d));
        return -1;
    }
    size_t n = vpy_is_list(d) ? cp_list_len(d) : cp_object_len(d);
    for (size_t i = 0; i < n; i++) {
        const char *s;
        size_t len;
        if (vpy_is_dict(d)) { s = cp_object_at(d, i)->key; len = cp_object_at(d, i)->key_len; }
        else {
            const cp_value *x = cp_list_get(d, i);
            if (vpy_is_list(x) || vpy_is_dict(x)) { verr(err, "TypeError", "unhashable type: '%s'", vpy_type_name(x)); return -1; }
            if (!vpy_is_str(x)) { verr(err, "AttributeError", "'%s' object has no attribute 'isspace'", vpy_type_name(x)); return -1; }
            s = x->u.string.bytes;
            len = x->u.string.len;
        }
        if (vpy_cplen(s, len) > 1) {
            for (size_t k = 0; k < len; k++)
                if (s[k] && strchr("\\.^$*+?{}[]|()", s[k])) {
                    verr(err, "RuntimeError", "string_delims: a delimiter given as a list holds regex syntax in an item "
                         "(not supported by the C runtime)");
                    return -1;
                }
        }
        vb_put(out, s, len);
    }
    return 0;
}

/* One string_delims entry unpacked as (open, close) into two literals. */
static int delim_pair(const cp_value *pair, vbuf *od, vbuf *cd, cp_error *err) {
    if (vpy_is_str(pair)) {
        size_t n = pair->u.string.len, i = 0;
        size_t cps = vpy_cplen(pair->u.string.bytes, n);
        if (cps != 2) { unpack_error(err, cps); return -1; }
        cp_utf8_decode(pair->u.string.bytes, n, &i, 1);
        vb_put(od, pair->u.string.bytes, i);
        vb_put(cd, pair->u.string.bytes + i, n - i);
        return 0;
    }
    if (vpy_is_list(pair)) {
        if (cp_list_len(pair) != 2) { unpack_error(err, cp_list_len(pair)); return -1; }
        if (delim_literal(cp_list_get(pair, 0), od, err) < 0 || delim_literal(cp_list_get(pair, 1), cd, err) < 0) return -1;
        return 0;
    }
    if (vpy_is_dict(pair)) {   /* unpacking a dict gives its keys */
        if (cp_object_len(pair) != 2) { unpack_error(err, cp_object_len(pair)); return -1; }
        vb_put(od, cp_object_at(pair, 0)->key, cp_object_at(pair, 0)->key_len);
        vb_put(cd, cp_object_at(pair, 1)->key, cp_object_at(pair, 1)->key_len);
        return 0;
    }
    verr(err, "TypeError", "cannot unpack non-iterable %s object", vpy_type_name(pair));
    return -1;
}

static int has_sentinel(const char *s, size_t n) {
    return memchr(s, '\x01', n) != NULL || memchr(s, '\x02', n) != NULL;
}

static cp_value *parse_json(vtext t, const cp_value *args, const cp_values_env *env, cp_error *err) {
    int failed = 0;
    const cp_value *delims = vpy_get(args, "string_delims", &vconst_empty_list, err, &failed);
    if (failed) return NULL;
    const cp_value *unquoted = vpy_get(args, "unquoted_keys", &vconst_false, err, &failed);
    const cp_value *allow = vpy_get(args, "allow_non_json", &vconst_none, err, &failed);
    if (vpy_truthy(delims)) {
        if (t.none) return verr(err, "TypeError", "argument of type 'NoneType' is not iterable");
        if (has_sentinel(t.s, t.n))
            return verr(err, "ValueError",
                        "json: input contains reserved sentinel characters (\\x01/\\x02); cannot parse safely.");
    }
    cp_type dt = cp_type_of(delims);
    if (dt != CP_STRING && dt != CP_LIST && dt != CP_OBJECT)
        return verr(err, "TypeError", "'%s' object is not iterable", vpy_type_name(delims));
    /* the entries: a list's items, a dict's keys, a string's characters */
    size_t count = dt == CP_LIST ? cp_list_len(delims) : dt == CP_OBJECT ? cp_object_len(delims)
                 : vpy_cplen(delims->u.string.bytes, delims->u.string.len);
    if (count && t.none) return verr(err, "TypeError", "expected string or buffer");
    cp_value *captured = cp_list();
    if (!captured) return verr_oom(err);
    vbuf work = {0};
    if (!t.none) vb_put(&work, t.s, t.n);
    /* (each stage reads the previous stage's text: an allocation failure in one stops here, as MemoryError) */
#define WORK_OOM_CHECK() do { if (work.oom) { cp_value_free(captured); vb_free(&work); return verr_oom(err); } } while (0)
    WORK_OOM_CHECK();
    size_t spos = 0;
    for (size_t k = 0; k < count; k++) {
        vbuf od = {0}, cd = {0};
        cp_value *tmp = NULL;
        const cp_value *pair;
        if (dt == CP_LIST) pair = cp_list_get(delims, k);
        else if (dt == CP_OBJECT) {
            const cp_member *m = cp_object_at(delims, k);
            tmp = cp_string(m->key, m->key_len);
            pair = tmp;
        } else {
            size_t j = spos;
            cp_utf8_decode(delims->u.string.bytes, delims->u.string.len, &j, 1);
            tmp = cp_string(delims->u.string.bytes + spos, j - spos);
            spos = j;
            pair = tmp;
        }
        if (!pair) { cp_value_free(captured); vb_free(&work); return verr_oom(err); }
        int r = delim_pair(pair, &od, &cd, err);
        if (r == 0 && (od.oom || cd.oom)) { r = -1; verr_oom(err); }
        if (r == 0) {
            vbuf next = {0};
            r = sub_pair(&next, work.b ? work.b : "", work.n, od.b ? od.b : "", od.n, cd.b ? cd.b : "", cd.n, captured);
            vb_free(&work);
            work = next;
            if (r < 0 || work.oom) { r = -1; verr_oom(err); }
        }
        vb_free(&od);
        vb_free(&cd);
        cp_value_free(tmp);
        if (r < 0) { cp_value_free(captured); vb_free(&work); return NULL; }
    }
    if (vpy_truthy(unquoted)) {
        if (t.none) { cp_value_free(captured); vb_free(&work); return verr(err, "TypeError", "expected string or buffer"); }
        vbuf next = {0};
        quote_bare_keys(&next, work.b ? work.b : "", work.n, env);
        vb_free(&work);
        work = next;
        WORK_OOM_CHECK();
    }
    if (cp_list_len(captured)) {
        vbuf next = {0};
        if (put_back(&next, work.b ? work.b : "", work.n, captured) < 0) next.oom = 1;
        vb_free(&work);
        work = next;
    }
    WORK_OOM_CHECK();
#undef WORK_OOM_CHECK
    cp_value_free(captured);
    if (t.none) {
        vb_free(&work);
        return verr(err, "TypeError", "the JSON object must be str, bytes or bytearray, not NoneType");
    }
    const char *w = work.b ? work.b : "";
    cp_error jerr = {0};
    cp_value *v = vjson_loads(w, work.n, &jerr);
    if (v) { vb_free(&work); return v; }
    if (strcmp(jerr.exception, "JSONDecodeError") != 0) {   /* the int limit, recursion, memory: propagate */
        vb_free(&work);
        if (err && !err->failed) *err = jerr;
        return NULL;
    }
    if (vpy_truthy(allow)) {
        vb_free(&work);
        return parse_text(t, args, err);
    }
    vbuf m = {0};
    if (work.n == t.n && memcmp(w, t.s, t.n) == 0) {
        vb_puts(&m, "json parser could not parse region as JSON.\nContent: ");
        vb_repr(&m, t.s, t.n);
    } else {
        vb_puts(&m, "json: could not parse after dialect transforms.\nOriginal: ");
        vb_repr(&m, t.s, t.n);
        vb_puts(&m, "\nTransformed: ");
        vb_repr(&m, w, work.n);
    }
    vb_puts(&m, "\nError: ");
    vb_puts(&m, jerr.message);
    vb_free(&work);
    return verr_buf(err, "ValueError", &m);
}

/* ------------------------------------------------------------------------------------------------ nested */

/* json.loads(json.loads('"' + raw + '"')) where both read and the inner text nests at most 512 deep, else NULL
 * (no error: the caller keeps its own outcome). *failed_hard: an error that must propagate (memory). */
static cp_value *unescaped_json(vtext raw, int *hard, cp_error *err) {
    *hard = 0;
    if (raw.none) return NULL;
    char *q = malloc(raw.n + 3);
    if (!q) { *hard = 1; return verr_oom(err); }
    q[0] = '"';
    memcpy(q + 1, raw.s, raw.n);
    q[raw.n + 1] = '"';
    q[raw.n + 2] = 0;
    cp_error e1 = {0};
    cp_value *inner = vjson_loads(q, raw.n + 2, &e1);
    free(q);
    if (!inner) {
        if (strcmp(e1.exception, "MemoryError") == 0) { *hard = 1; if (err && !err->failed) *err = e1; }
        return NULL;
    }
    if (!vpy_is_str(inner)) { cp_value_free(inner); return NULL; }
    if (vjson_too_deep_at(inner->u.string.bytes, inner->u.string.len) >= 0) { cp_value_free(inner); return NULL; }
    cp_error e2 = {0};
    cp_value *v = vjson_loads(inner->u.string.bytes, inner->u.string.len, &e2);
    cp_value_free(inner);
    if (!v && !cp_values_is_value_error(e2.exception)) { *hard = 1; if (err && !err->failed) *err = e2; }
    return v;
}

/* The parser of a nested value_parser entry. */
static cp_value *parse_nested(vtext raw, const cp_value *vp, const cp_values_env *env, int unescape, cp_error *err) {
    if (cp_type_of(vp) == CP_NULL) {
        if (raw.none) return cp_null();
        cp_value *v = cp_string(raw.s, raw.n);
        return v ? v : verr_oom(err);
    }
    int failed = 0;
    const cp_value *name = vpy_get(vp, "name", &vconst_text, err, &failed);
    if (failed) return NULL;
    if (vpy_is_str(name) && (cp_string_equals(name, "python-calls") || cp_string_equals(name, "json-values")))
        return verr_key(err, name->u.string.bytes, name->u.string.len);   /* not a value parser: unknown here */
    const cp_value *args = vpy_get(vp, "args", &vconst_empty_dict, err, &failed);
    if (!unescape || !cp_string_equals(name, "json"))
        return vparse(raw.s, raw.n, raw.none, name, args, env, 0, err);
    /* escaped_json_values: where the json value parser raises a ValueError or gives a string, the text read as the
     * inside of a JSON string literal, then as JSON, wins when it reads */
    cp_error own = {0};
    cp_value *v = vparse(raw.s, raw.n, raw.none, name, args, env, 0, &own);
    if (!v) {
        if (!cp_values_is_value_error(own.exception)) { if (err && !err->failed) *err = own; return NULL; }
        int hard;
        cp_value *again = unescaped_json(raw, &hard, err);
        if (again || hard) return again;
        if (err && !err->failed) *err = own;
        return NULL;
    }
    if (vpy_is_str(v)) {
        int hard;
        cp_value *again = unescaped_json(raw, &hard, err);
        if (hard) { cp_value_free(v); return NULL; }
        if (again) { cp_value_free(v); return again; }
    }
    return v;
}

/* ------------------------------------------------------------------------------------------------ kv-lines */

static cp_value *parse_kv_lines(vtext t, const cp_value *args, const cp_values_env *env, int unescape, cp_error *err) {
    int failed = 0;
    const cp_value *line_sep = vpy_get(args, "line_sep", &vconst_newline, err, &failed);
    if (failed) return NULL;
    const cp_value *kv_sep = vpy_get(args, "kv_sep", &vconst_colon, err, &failed);
    const cp_value *vp = vpy_get(args, "value_parser", &vconst_none, err, &failed);
    if (t.none) return verr(err, "AttributeError", "'NoneType' object has no attribute 'split'");
    int ws_split = 0;
    const char *sep = NULL;
    size_t sepn = 0;
    if (cp_type_of(line_sep) == CP_NULL) ws_split = 1;
    else if (!vpy_is_str(line_sep)) return verr(err, "TypeError", "must be str or None, not %s", vpy_type_name(line_sep));
    else {
        sep = line_sep->u.string.bytes;
        sepn = line_sep->u.string.len;
        if (!sepn) return verr(err, "ValueError", "empty separator");
    }
    cp_value *result = cp_object();
    if (!result) return verr_oom(err);
    size_t pos = 0;
    while (pos <= t.n) {
        /* the next line [ls, le) */
        size_t ls = pos, le, next;
        if (ws_split) {
            while (ls < t.n) {
                size_t j = ls;
                int32_t c = cp_utf8_decode(t.s, t.n, &j, 1);
                if (c < 0 || !vu_space((uint32_t)c)) break;
                ls = j;
            }
            if (ls >= t.n) break;
            le = ls;
            while (le < t.n) {
                size_t j = le;
                int32_t c = cp_utf8_decode(t.s, t.n, &j, 1);
                if (c >= 0 && vu_space((uint32_t)c)) break;
                le = j;
            }
            next = le;
        } else {
            le = t.n;
            for (size_t k = ls; k + sepn <= t.n; k++)
                if (memcmp(t.s + k, sep, sepn) == 0) { le = k; break; }
            next = le == t.n ? t.n + 1 : le + sepn;
        }
        pos = next;
        vtext line = {t.s + ls, le - ls, 0};
        if (strip_if_asked(&line, args, NULL, err) < 0) { cp_value_free(result); return NULL; }
        if (!line.n) continue;
        if (!vpy_is_str(kv_sep)) {
            cp_value_free(result);
            return verr(err, "TypeError", "'in <string>' requires string as left operand, not %s", vpy_type_name(kv_sep));
        }
        const char *ks = kv_sep->u.string.bytes;
        size_t kn = kv_sep->u.string.len, at = (size_t)-1;
        for (size_t k = 0; k + kn <= line.n; k++)
            if (memcmp(line.s + k, ks, kn) == 0) { at = k; break; }
        if (at == (size_t)-1) continue;
        if (!kn) { cp_value_free(result); return verr(err, "ValueError", "empty separator"); }
        vtext key = {line.s, at, 0}, val = {line.s + at + kn, line.n - at - kn, 0};
        if (strip_if_asked(&val, args, NULL, err) < 0) { cp_value_free(result); return NULL; }
        cp_value *v = parse_nested(val, vp, env, unescape, err);
        if (!v) { cp_value_free(result); return NULL; }
        if (strip_if_asked(&key, args, NULL, err) < 0) { cp_value_free(v); cp_value_free(result); return NULL; }
        if (cp_object_set(result, key.s, key.n, v) < 0) { cp_value_free(result); return verr_oom(err); }
    }
    return result;
}

/* ------------------------------------------------------------------------------------------------ xml-inline */

typedef struct xml_ctx {
    const char *text;
    const cp_value *tag_pattern, *vp;
    int merge, unescape;
    const cp_values_env *env;
    cp_value *result;
    cp_error *err;
} xml_ctx;

static int xml_match(void *arg, const cp_vmatch *m) {
    xml_ctx *x = arg;
    size_t ks, ke, vs, ve;
    int hk = m->group(m, "key", &ks, &ke);
    if (hk != 1) {
        vbuf msg = {0};
        vb_puts(&msg, "xml-inline: tag_pattern must have a named group 'key'. Pattern: ");
        if (vpy_is_str(x->tag_pattern)) vb_put(&msg, x->tag_pattern->u.string.bytes, x->tag_pattern->u.string.len);
        else vb_repr_value(&msg, x->tag_pattern);
        verr_buf(x->err, "ValueError", &msg);
        return 1;
    }
    int hv = m->group(m, "value", &vs, &ve);
    vtext val = {"", 0, 0};
    if (hv == 1) { val.s = x->text + vs; val.n = ve - vs; }
    else if (hv == 0) val.none = 1;
    cp_value *v = parse_nested(val, x->vp, x->env, x->unescape, x->err);
    if (!v) return 1;
    const char *key = x->text + ks;
    size_t kn = ke - ks;
    cp_value *existing = x->merge ? cp_object_get(x->result, key, kn) : NULL;
    if (existing) {
        if (!vpy_is_list(existing)) {
            /* result[key] = [existing], at the key's place */
            cp_value *l = cp_list();
            if (!l) { cp_value_free(v); verr_oom(x->err); return 1; }
            int r = cp_list_append(l, cp_value_copy(existing));   /* (frees the copy on failure) */
            if (r < 0) cp_value_free(l);
            else r = cp_object_set(x->result, key, kn, l);          /* (frees l on failure) */
            if (r < 0) {
                cp_value_free(v);
                verr_oom(x->err);
                return 1;
            }
            existing = cp_object_get(x->result, key, kn);
        }
        if (cp_list_append(existing, v) < 0) { verr_oom(x->err); return 1; }
        return 0;
    }
    if (cp_object_set(x->result, key, kn, v) < 0) { verr_oom(x->err); return 1; }
    return 0;
}

static cp_value *parse_xml_inline(vtext t, const cp_value *args, const cp_values_env *env, int unescape, cp_error *err) {
    int failed = 0;
    const cp_value *tag = vpy_get(args, "tag_pattern", &vconst_none, err, &failed);
    if (failed) return NULL;
    if (cp_type_of(tag) == CP_NULL) return verr(err, "ValueError", "xml-inline: 'tag_pattern' content_arg is required");
    const cp_value *vp = vpy_get(args, "value_parser", &vconst_none, err, &failed);
    const cp_value *merge = vpy_get(args, "merge_duplicates", &vconst_false, err, &failed);
    if (!env || !env->regex || !env->regex->finditer)
        return verr(err, "RuntimeError", "xml-inline: no regex engine was given to run tag_pattern");
    if (t.none) return verr(err, "TypeError", "expected string or buffer");
    xml_ctx x = {t.s, tag, vp, vpy_truthy(merge), unescape, env, cp_object(), err};
    if (!x.result) return verr_oom(err);
    if (env->regex->finditer(env->regex->ctx, tag, t.s, t.n, xml_match, &x, err) != 0) {
        cp_value_free(x.result);
        if (err && !err->failed) verr(err, "RuntimeError", "xml-inline: tag_pattern failed");
        return NULL;
    }
    return x.result;
}

/* ------------------------------------------------------------------------------------------------ dispatch */

cp_value *vparse(const char *text, size_t len, int is_none, const cp_value *name, const cp_value *args,
                 const cp_values_env *env, int unescape, cp_error *err) {
    vtext t = {text ? text : "", text ? len : 0, is_none || !text};
    if (!args) args = &vconst_empty_dict;
    if (!vpy_is_str(name)) {
        if (vpy_is_list(name) || vpy_is_dict(name)) return verr(err, "TypeError", "unhashable type: '%s'", vpy_type_name(name));
        vbuf m = {0};
        vb_repr_value(&m, name);
        return verr_buf(err, "KeyError", &m);
    }
    if (cp_string_equals(name, "text")) return parse_text(t, args, err);
    if (cp_string_equals(name, "int")) return parse_int(t, args, err);
    if (cp_string_equals(name, "float")) return parse_float(t, args, err);
    if (cp_string_equals(name, "bool")) return parse_bool(t, args, err);
    if (cp_string_equals(name, "json")) return parse_json(t, args, env, err);
    if (cp_string_equals(name, "xml-inline")) return parse_xml_inline(t, args, env, unescape, err);
    if (cp_string_equals(name, "kv-lines")) return parse_kv_lines(t, args, env, unescape, err);
    return verr_key(err, name->u.string.bytes, name->u.string.len);
}

cp_value *cp_values_parse_content(const char *text, size_t len, const cp_value *name, const cp_value *args,
                                  const cp_values_env *env, cp_error *err) {
    return vparse(text ? text : "", text ? len : 0, 0, name, args, env, 0, err);
}
