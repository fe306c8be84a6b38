/*
 * values_coerce.c - tool-argument typing: transformers' coercion (runtime/values/coerce.py: coerce_tool_calls,
 * schema_types, tool_params) and the schema-first typing of the argument_types extension
 * (runtime/values/schema_typing.py: type_tool_calls, fit_value), with the same values and exception classes.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "values_internal.h"

/* ------------------------------------------------------------------------------------------------ schema types */

/* The type names of a parameter schema appended to `names` (a list of borrowed string pointers). */
typedef struct tnames {
    const cp_value **v;
    size_t n, cap;
} tnames;

static int tn_push(tnames *t, const cp_value *s) {
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 8;
        const cp_value **v = realloc(t->v, cap * sizeof *v);
        if (!v) return -1;
        t->v = v;
        t->cap = cap;
    }
    t->v[t->n++] = s;
    return 0;
}

static int tn_has(const tnames *t, const char *name) {
    for (size_t i = 0; i < t->n; i++)
        if (cp_string_equals(t->v[i], name)) return 1;
    return 0;
}

static const cp_value vconst_null_name = {.type = CP_STRING, .u.string = {(char *)"null", 4}};

/* schema_types(schema); -1 with err on a TypeError (a non-iterable anyOf) or memory; depth bounds the recursion
 * through anyOf/oneOf as Python's recursion limit would (RecursionError). */
static int schema_types(const cp_value *schema, tnames *out, int depth, cp_error *err) {
    if (!vpy_is_dict(schema)) return 0;
    if (depth > 900) { verr(err, "RecursionError", "maximum recursion depth exceeded"); return -1; }
    const cp_value *declared = cp_object_get_cstr(schema, "type");
    if (vpy_is_str(declared)) { if (tn_push(out, declared) < 0) goto oom; }
    else if (vpy_is_list(declared)) {
        for (size_t i = 0; i < cp_list_len(declared); i++)
            if (vpy_is_str(cp_list_get(declared, i)) && tn_push(out, cp_list_get(declared, i)) < 0) goto oom;
    }
    static const char *const unions[] = {"anyOf", "oneOf"};
    for (int u = 0; u < 2; u++) {
        const cp_value *br = cp_object_get_cstr(schema, unions[u]);
        if (!vpy_truthy(br)) continue;
        if (vpy_is_list(br)) {
            for (size_t i = 0; i < cp_list_len(br); i++)
                if (schema_types(cp_list_get(br, i), out, depth + 1, err) < 0) return -1;
        } else if (vpy_is_str(br)) {
            /* iterating a str gives one-character strs: not dicts, no types */
        } else if (vpy_is_dict(br)) {
            /* iterating a dict gives its keys: strs, no types */
        } else {
            verr(err, "TypeError", "'%s' object is not iterable", vpy_type_name(br));
            return -1;
        }
    }
    if (vpy_truthy(cp_object_get_cstr(schema, "nullable")) && !tn_has(out, "null") && tn_push(out, &vconst_null_name) < 0)
        goto oom;
    return 0;
oom:
    verr_oom(err);
    return -1;
}

/* ------------------------------------------------------------------------------------------------ casts */

static int is_whole(double x) { return isfinite(x) && x == floor(x); }

/* _try_cast: 1 with *out, 0 when the type does not apply or the text does not cast (a ValueError: try the next
 * type), -1 on another error. */
static int try_cast(const char *raw, size_t n, const cp_value *type, cp_value **out, cp_error *err) {
    cp_error e = {0};
    if (cp_string_equals(type, "integer")) {
        cp_value *v = vpy_int(raw, n, &e);
        if (v) { *out = v; return 1; }
        if (!cp_values_is_value_error(e.exception)) goto other;
        memset(&e, 0, sizeof e);
        double x;
        if (vpy_float(raw, n, &x, &e) < 0) { if (cp_values_is_value_error(e.exception)) return 0; goto other; }
        if (!is_whole(x)) return 0;
        *out = vpy_int_of_double(x);
        if (!*out) { verr_oom(err); return -1; }
        return 1;
    }
    if (cp_string_equals(type, "number")) {
        double x;
        if (vpy_float(raw, n, &x, &e) < 0) { if (cp_values_is_value_error(e.exception)) return 0; goto other; }
        if (!isfinite(x)) return 0;
        if (is_whole(x) && !memchr(raw, '.', n)) *out = vpy_int_of_double(x);
        else *out = cp_float(x);
        if (!*out) { verr_oom(err); return -1; }
        return 1;
    }
    if (cp_string_equals(type, "boolean") || cp_string_equals(type, "null")) {
        size_t s, t;
        vpy_strip(raw, n, &s, &t);
        const char *w = raw + s;
        size_t wn = t - s;
        if (cp_string_equals(type, "null")) {
            if ((wn == 4 && memcmp(w, "null", 4) == 0) || (wn == 4 && memcmp(w, "None", 4) == 0)) {
                *out = cp_null();
                if (!*out) { verr_oom(err); return -1; }
                return 1;
            }
            return 0;
        }
        /* str.lower(): only ASCII letters can lower to the ASCII of "true"/"false" (see values_parsers.c) */
        char low[6];
        if (wn > 5) return 0;
        for (size_t i = 0; i < wn; i++) {
            char c = w[i];
            low[i] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
        }
        int b = -1;
        if (wn == 4 && memcmp(low, "true", 4) == 0) b = 1;
        else if (wn == 5 && memcmp(low, "false", 5) == 0) b = 0;
        else if (wn == 1 && low[0] == '1') b = 1;
        else if (wn == 1 && low[0] == '0') b = 0;
        if (b < 0) return 0;
        *out = cp_bool(b);
        if (!*out) { verr_oom(err); return -1; }
        return 1;
    }
    if (cp_string_equals(type, "object") || cp_string_equals(type, "array")) {
        cp_value *v = vjson_loads(raw, n, &e);
        if (!v) { if (cp_values_is_value_error(e.exception)) return 0; goto other; }
        if (cp_type_of(v) == (cp_string_equals(type, "object") ? CP_OBJECT : CP_LIST)) { *out = v; return 1; }
        cp_value_free(v);
        return 0;
    }
    return 0;
other:
    if (err && !err->failed) *err = e;
    return -1;
}

/* cast_first: 1 with *out, 0 when no type accepts, -1 on error. With keep_string, "string" accepts the text. */
static int cast_first(const char *raw, size_t n, const tnames *types, int keep_string, cp_value **out, cp_error *err) {
    for (size_t i = 0; i < types->n; i++) {
        if (keep_string && cp_string_equals(types->v[i], "string")) {
            *out = cp_string(raw, n);
            if (!*out) { verr_oom(err); return -1; }
            return 1;
        }
        int r = try_cast(raw, n, types->v[i], out, err);
        if (r != 0) return r;
    }
    return 0;
}

static cp_value *coerce_text(const cp_value *s, const tnames *types, cp_error *err) {
    cp_value *v = NULL;
    int r = cast_first(s->u.string.bytes, s->u.string.len, types, 0, &v, err);
    if (r < 0) return NULL;
    if (r == 1) return v;
    v = cp_value_copy(s);
    return v ? v : verr_oom(err);
}

cp_value *cp_values_coerce(const char *raw, size_t len, const cp_value *types, cp_error *err) {
    tnames t = {0};
    for (size_t i = 0; i < cp_list_len(types); i++)
        if (tn_push(&t, cp_list_get(types, i)) < 0) { free(t.v); return verr_oom(err); }
    cp_value *v = NULL;
    int r = cast_first(raw ? raw : "", raw ? len : 0, &t, 0, &v, err);
    free(t.v);
    if (r < 0) return NULL;
    if (r == 1) return v;
    v = cp_string(raw ? raw : "", raw ? len : 0);
    return v ? v : verr_oom(err);
}

/* ------------------------------------------------------------------------------------------------ tool params */

cp_value *cp_values_tool_params(const cp_value *tools, cp_error *err) {
    cp_value *params = cp_object();
    if (!params) return verr_oom(err);
    if (!tools || cp_type_of(tools) == CP_NULL) return params;
    if (!vpy_is_list(tools)) {
        cp_value_free(params);
        return verr(err, "TypeError", "`tools` must be a list of tool schemas (dicts) or functions, not %s%s",
                    vpy_type_name(tools), vpy_is_dict(tools) ? " (wrap one tool in a list: tools=[tool])" : "");
    }
    for (size_t i = 0; i < cp_list_len(tools); i++) {
        const cp_value *tool = cp_list_get(tools, i);
        if (!vpy_is_dict(tool)) continue;
        const cp_value *fn = cp_object_get_cstr(tool, "function");
        if (!fn) fn = tool;
        if (!vpy_is_dict(fn)) continue;
        const cp_value *name = cp_object_get_cstr(fn, "name");
        if (!vpy_is_str(name)) continue;
        const cp_value *parameters = cp_object_get_cstr(fn, "parameters");
        const cp_value *props = vpy_is_dict(parameters) ? cp_object_get_cstr(parameters, "properties") : NULL;
        cp_value *copy = vpy_is_dict(props) ? cp_value_copy(props) : cp_object();
        if (!copy || cp_object_set(params, name->u.string.bytes, name->u.string.len, copy) < 0) {
            cp_value_free(params);
            return verr_oom(err);
        }
    }
    return params;
}

/* known_call: the arguments dict (mutable, inside value) and the properties, or NULL. */
static cp_value *known_call(cp_value *value, const cp_value *params, const cp_value **props) {
    cp_value *fn = vpy_is_dict(value) ? cp_object_get_cstr(value, "function") : NULL;
    if (!vpy_is_dict(fn)) return NULL;
    const cp_value *name = cp_object_get_cstr(fn, "name");
    cp_value *args = cp_object_get_cstr(fn, "arguments");
    if (!vpy_is_str(name) || !vpy_is_dict(args)) return NULL;
    const cp_value *p = cp_object_get(params, name->u.string.bytes, name->u.string.len);
    if (!vpy_truthy(p)) return NULL;
    *props = p;
    return args;
}

/* Append x to the new list `l`: a value of its own, or (shared) one the old list still holds. In the shared mode
 * through an owned placeholder, so that a failure frees nothing shared. 0 or -1 (OOM; x freed unless shared). */
static int put_new(cp_value *l, cp_value *x, int shared) {
    if (!shared) return cp_list_append(l, x);
    if (cp_list_append(l, cp_null()) < 0) return -1;
    cp_value_free(l->u.list.items[l->u.list.len - 1]);
    l->u.list.items[l->u.list.len - 1] = x;
    return 0;
}

/* coerce_tool_calls in place; -1 on error. */
static int coerce_calls(cp_value *value, const cp_value *params, vptrs *g, cp_error *err) {
    if (vpy_is_list(value)) {
        for (size_t i = 0; i < cp_list_len(value); i++)
            if (coerce_calls(cp_list_get(value, i), params, g, err) < 0) return -1;
        return 0;
    }
    const cp_value *props;
    cp_value *args = known_call(value, params, &props);
    if (!args) return 0;
    for (size_t i = 0; i < cp_object_len(args); i++) {
        cp_member *m = (cp_member *)cp_object_at(args, i);
        const cp_value *schema = cp_object_get(props, m->key, m->key_len);
        if (!schema) continue;
        tnames t = {0};
        if (schema_types(schema, &t, 0, err) < 0) { free(t.v); return -1; }
        if (!t.n) { free(t.v); continue; }
        cp_value *arg = m->value;
        if (vpy_is_str(arg)) {
            cp_value *v = coerce_text(arg, &t, err);
            if (!v) { free(t.v); return -1; }
            vg_drop(g, m->value);
            m->value = v;
        } else if (vpy_is_list(arg) && !tn_has(&t, "array") && !g) {
            /* (a tree: the new list Python makes is the old one edited in place) */
            for (size_t k = 0; k < cp_list_len(arg); k++) {
                cp_value *x = arg->u.list.items[k];
                if (!vpy_is_str(x)) continue;
                cp_value *v = coerce_text(x, &t, err);
                if (!v) { free(t.v); return -1; }
                cp_value_free(x);
                arg->u.list.items[k] = v;
            }
        } else if (vpy_is_list(arg) && !tn_has(&t, "array")) {
            /* (shared objects: a new list holding the old one's other items themselves) */
            cp_value *l = cp_list();
            if (!l) { free(t.v); verr_oom(err); return -1; }
            for (size_t k = 0; k < cp_list_len(arg); k++) {
                cp_value *x = arg->u.list.items[k], *v = x;
                if (vpy_is_str(x) && !(v = coerce_text(x, &t, err))) { vg_drop(g, l); free(t.v); return -1; }
                if (put_new(l, v, v == x) < 0) { vg_drop(g, l); free(t.v); verr_oom(err); return -1; }
            }
            vg_drop(g, m->value);
            m->value = l;
        }
        free(t.v);
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------------ schema-first */

static int is_type(const cp_value *v, const cp_value *type) {
    cp_type k = cp_type_of(v);
    if (cp_string_equals(type, "string")) return k == CP_STRING;
    if (cp_string_equals(type, "boolean")) return k == CP_BOOL;
    if (cp_string_equals(type, "null")) return k == CP_NULL;
    if (cp_string_equals(type, "object")) return k == CP_OBJECT;
    if (cp_string_equals(type, "array")) return k == CP_LIST;
    if (cp_string_equals(type, "integer")) return k == CP_INT || k == CP_BIGINT || (k == CP_FLOAT && is_whole(v->u.number));
    if (cp_string_equals(type, "number")) return k == CP_INT || k == CP_BIGINT || k == CP_FLOAT;
    return 0;
}

/* fit_value: the typed value (new) of `v` with its text `text` (NULL: none). */
/* fit_value: the typed value of `v` with its text `text` (NULL: none): a new value, or NULL with *kept = 1 when
 * `v` itself stays (Python keeps the same object), or NULL with *kept = 0 and err on a failure. */
static cp_value *fit_value(const cp_value *v, const tnames *types, const cp_value *text, int *kept, cp_error *err) {
    cp_value *out = NULL;
    *kept = 0;
    if (vpy_is_str(v) || vpy_is_str(text)) {
        const cp_value *s = vpy_is_str(v) ? v : text;
        int r = cast_first(s->u.string.bytes, s->u.string.len, types, 1, &out, err);
        if (r < 0) return NULL;
        if (r == 1) return out;
        *kept = 1;   /* (a str v: the text itself; else v stays) */
        return NULL;
    }
    for (size_t i = 0; i < types->n; i++)
        if (is_type(v, types->v[i])) { *kept = 1; return NULL; }
    if (tn_has(types, "string")) {
        cp_json_dump_options o = cp_json_dump_defaults();
        o.ensure_ascii = 0;
        size_t n;
        char *d = cp_json_dump(v, &o, &n);
        if (!d) return verr_oom(err);
        out = cp_string_take(d, n);
        return out ? out : verr_oom(err);
    }
    *kept = 1;
    return NULL;
}


/* the texts' arguments dict for a call, when its keys are the call's keys in the same order */
static const cp_value *call_texts(const cp_value *args, const cp_value *texts) {
    const cp_value *fn = vpy_is_dict(texts) ? cp_object_get_cstr(texts, "function") : NULL;
    const cp_value *targs = vpy_is_dict(fn) ? cp_object_get_cstr(fn, "arguments") : NULL;
    if (!vpy_is_dict(targs) || cp_object_len(targs) != cp_object_len(args)) return NULL;
    for (size_t i = 0; i < cp_object_len(args); i++) {
        const cp_member *a = cp_object_at(args, i), *b = cp_object_at(targs, i);
        if (a->key_len != b->key_len || memcmp(a->key, b->key, a->key_len) != 0) return NULL;
    }
    return targs;
}

static int type_calls(cp_value *value, const cp_value *params, const cp_value *texts, vptrs *g, cp_error *err) {
    if (vpy_is_list(value)) {
        int twins = vpy_is_list(texts) && cp_list_len(texts) == cp_list_len(value);
        for (size_t i = 0; i < cp_list_len(value); i++)
            if (type_calls(cp_list_get(value, i), params, twins ? cp_list_get(texts, i) : NULL, g, err) < 0) return -1;
        return 0;
    }
    const cp_value *props;
    cp_value *args = known_call(value, params, &props);
    if (!args) return 0;
    const cp_value *arg_texts = call_texts(args, texts);
    for (size_t i = 0; i < cp_object_len(args); i++) {
        cp_member *m = (cp_member *)cp_object_at(args, i);
        const cp_value *schema = cp_object_get(props, m->key, m->key_len);
        if (!schema) continue;
        tnames t = {0};
        if (schema_types(schema, &t, 0, err) < 0) { free(t.v); return -1; }
        if (!t.n) { free(t.v); continue; }
        const cp_value *text = arg_texts ? cp_object_get(arg_texts, m->key, m->key_len) : NULL;
        cp_value *arg = m->value, *v;
        int kept;
        if (vpy_is_list(arg) && !tn_has(&t, "array") && !vpy_is_str(text)) {
            /* a new list: typed items, and the old list's other items themselves (moved out of it in a tree,
             * shared with it otherwise) */
            int each = vpy_is_list(text) && cp_list_len(text) == cp_list_len(arg);
            v = cp_list();
            if (!v) { free(t.v); verr_oom(err); return -1; }
            for (size_t k = 0; k < cp_list_len(arg); k++) {
                cp_value *item = arg->u.list.items[k];
                cp_value *x = fit_value(item, &t, each ? cp_list_get(text, k) : NULL, &kept, err);
                if (!x && !kept) { vg_drop(g, v); free(t.v); return -1; }
                if (kept && !g) arg->u.list.items[k] = NULL;   /* (moved) */
                if (put_new(v, kept ? item : x, kept && g) < 0) { vg_drop(g, v); free(t.v); verr_oom(err); return -1; }
            }
        } else {
            v = fit_value(arg, &t, text, &kept, err);
            if (!v && !kept) { free(t.v); return -1; }
        }
        free(t.v);
        if (!v) continue;   /* (the argument itself stays) */
        vg_drop(g, m->value);
        m->value = v;
    }
    return 0;
}

/* the field without its value parser (schema_typing.text_field) in *twin, or NULL when the field has none;
 * -1 on allocation failure */
static int text_field(const cp_value *field, cp_value **twin) {
    *twin = NULL;
    const cp_value *content = cp_object_get_cstr(field, "content");
    const cp_value *args = cp_object_get_cstr(field, "content_args");
    if (!(cp_string_equals(content, "xml-inline") || cp_string_equals(content, "kv-lines")) || !vpy_is_dict(args))
        return 0;
    const cp_value *vp = cp_object_get_cstr(args, "value_parser");
    if (!vp || cp_type_of(vp) == CP_NULL) return 0;
    *twin = cp_value_copy(field);
    if (!*twin) return -1;
    cp_value *targs = cp_object_get_cstr(*twin, "content_args");
    cp_value_free(cp_object_pop(targs, "value_parser", strlen("value_parser")));
    return 0;
}

int vtype_value(cp_value *value, const char *body, size_t len, const cp_value *field, const cp_value *captures,
                const cp_value *params, const cp_values_env *env, vptrs *g, cp_error *err) {
    if (!params || !cp_object_len(params)) return 0;
    const cp_value *mode = vpy_is_dict(field) ? cp_object_get_cstr(field, "argument_types") : NULL;
    if (!cp_string_equals(mode, "schema")) return coerce_calls(value, params, g, err);
    cp_value *texts = NULL, *twin;
    if (text_field(field, &twin) < 0) { verr_oom(err); return -1; }
    if (twin) {
        cp_error e = {0};
        texts = cp_values_make(body, len, twin, captures, env, &e);
        cp_value_free(twin);
        if (!texts && !cp_values_is_recoverable(e.exception) && strcmp(e.exception, "RecursionError") != 0) {
            if (err && !err->failed) *err = e;
            return -1;
        }
    }
    int r = type_calls(value, params, texts, g, err);
    cp_value_free(texts);
    return r;
}

cp_value *cp_values_type(cp_value *value, const char *body, size_t len, const cp_value *field,
                         const cp_value *captures, const cp_value *params, const cp_values_env *env,
                         cp_error *err) {
    if (!value) return NULL;
    if (vtype_value(value, body, len, field, captures, params, env, NULL, err) < 0) {
        cp_value_free(value);
        return NULL;
    }
    return value;
}
