/*
 * values_transform.c - a closed region's value (runtime/values/transform.py process_value with the value steps of
 * steps.py, content_fallback.py, unwrap.py, optional_placeholders.py; JS processValue/transformValue):
 *
 *   unwrap_pattern -> the field's content parser (escaped_json_values) -> content_fallback's parsers on a
 *   ValueError/KeyError/TypeError -> as_list -> key_aliases -> transform (transform_each, optional_placeholders)
 *   -> decode_json_strings.
 *
 * Looked-up values are copied into the transform's output (Python inserts the same objects; the values are equal,
 * only aliasing between two places of one output differs).
 */
#include <stdlib.h>
#include <string.h>

#include "values_internal.h"

/* ------------------------------------------------------------------------------------------------ scope */

/* A transform's scope: `over` (content, or a transform_each element's keys) shadows `captures`. */
typedef struct scope {
    const cp_value *captures;          /* dict or NULL */
    const cp_value *element;           /* transform_each: the element dict, else NULL */
    const cp_value *content;           /* otherwise: the parsed value ("content"), else NULL */
} scope;

static const cp_value *scope_get(const scope *sc, const char *name, size_t n) {
    if (sc->element) {
        const cp_value *v = cp_object_get(sc->element, name, n);
        if (v) return v;
    } else if (sc->content && n == 7 && memcmp(name, "content", 7) == 0) return sc->content;
    return sc->captures ? cp_object_get(sc->captures, name, n) : NULL;
}

typedef struct kref { const char *s; size_t n; } kref;

static int kref_cmp(const void *a, const void *b) {
    const kref *x = a, *y = b;
    size_t n = x->n < y->n ? x->n : y->n;
    int c = memcmp(x->s, y->s, n);
    if (c) return c;
    return x->n < y->n ? -1 : x->n > y->n;
}

/* repr(sorted(names)) of a dict's keys, or of the scope's names (dicts a, b and the extra name) */
static void sorted_names(vbuf *m, const cp_value *a, const cp_value *b, const char *extra) {
    size_t total = cp_object_len(a) + cp_object_len(b) + 1, k = 0;
    kref *r = malloc(total * sizeof *r);
    if (!r) { m->oom = 1; return; }
    for (size_t i = 0; i < cp_object_len(a); i++) r[k++] = (kref){cp_object_at(a, i)->key, cp_object_at(a, i)->key_len};
    for (size_t i = 0; i < cp_object_len(b); i++) {
        kref x = {cp_object_at(b, i)->key, cp_object_at(b, i)->key_len};
        int dup = 0;
        for (size_t j = 0; j < k && !dup; j++) dup = r[j].n == x.n && memcmp(r[j].s, x.s, x.n) == 0;
        if (!dup) r[k++] = x;
    }
    if (extra) {
        kref x = {extra, strlen(extra)};
        int dup = 0;
        for (size_t j = 0; j < k && !dup; j++) dup = r[j].n == x.n && memcmp(r[j].s, x.s, x.n) == 0;
        if (!dup) r[k++] = x;
    }
    qsort(r, k, sizeof *r, kref_cmp);
    vb_putc(m, '[');
    for (size_t i = 0; i < k; i++) {
        if (i) vb_puts(m, ", ");
        vb_repr(m, r[i].s, r[i].n);
    }
    vb_putc(m, ']');
    free(r);
}

/* The dotted path of a string that is exactly one placeholder {w(.w)*}, or 0. */
static int placeholder(const cp_value *v, const char **path, size_t *n, const cp_values_env *env) {
    if (!vpy_is_str(v)) return 0;
    const char *s = v->u.string.bytes;
    size_t len = v->u.string.len;
    if (len < 3 || s[0] != '{' || s[len - 1] != '}') return 0;
    size_t i = 1, seg = 0;
    while (i < len - 1) {
        if (s[i] == '.') {
            if (!seg) return 0;
            seg = 0;
            i++;
            continue;
        }
        int32_t c = cp_utf8_decode(s, len - 1, &i, 1);
        if (c < 0 || !vu_word_env(env, (uint32_t)c)) return 0;
        seg++;
    }
    if (!seg) return 0;
    *path = s + 1;
    *n = len - 2;
    return 1;
}

static size_t root_len(const char *path, size_t n) {
    const char *dot = memchr(path, '.', n);
    return dot ? (size_t)(dot - path) : n;
}

static cp_value *resolve(const char *path, size_t n, const scope *sc, cp_error *err) {
    size_t rl = root_len(path, n);
    const cp_value *v = scope_get(sc, path, rl);
    if (!v) {
        vbuf m = {0};
        vb_puts(&m, "transform placeholder '{");
        vb_put(&m, path, n);
        vb_puts(&m, "}' is not defined. Available: ");
        sorted_names(&m, sc->captures, sc->element, sc->element ? NULL : "content");
        return verr_buf(err, "KeyError", &m);
    }
    size_t i = rl;
    while (i < n) {
        const char *key = path + i + 1;
        size_t kl = root_len(key, n - i - 1);
        if (!vpy_is_dict(v)) {
            vbuf m = {0};
            vb_puts(&m, "transform placeholder '{");
            vb_put(&m, path, n);
            vb_printf(&m, "}' cannot index into %s at '", vpy_type_name(v));
            vb_put(&m, key, kl);
            vb_putc(&m, '\'');
            return verr_buf(err, "ValueError", &m);
        }
        const cp_value *next = cp_object_get(v, key, kl);
        if (!next) {
            vbuf m = {0};
            vb_puts(&m, "transform placeholder '{");
            vb_put(&m, path, n);
            vb_puts(&m, "}' is missing key '");
            vb_put(&m, key, kl);
            vb_puts(&m, "'. Available: ");
            sorted_names(&m, v, NULL, NULL);
            return verr_buf(err, "ValueError", &m);
        }
        v = next;
        i += 1 + kl;
    }
    return (cp_value *)v;   /* (the caller copies it, or inserts it itself in the shared mode) */
}

static int listed(const cp_value *optional, const char *root, size_t n) {
    for (size_t i = 0; i < cp_list_len(optional); i++) {
        const cp_value *x = cp_list_get(optional, i);
        if (vpy_is_str(x) && x->u.string.len == n && memcmp(x->u.string.bytes, root, n) == 0) return 1;
    }
    return 0;
}

/* How a transform is built: looked-up values copied (a tree: `sources` collects the looked-up containers, for
 * vshared_aliased), or inserted themselves (`share`: a graph; every node made here goes to `fresh` as soon as it
 * exists and nothing is freed here on failure: vshared_free frees it all). */
typedef struct tctx {
    const scope *sc;
    const cp_value *optional;
    const cp_values_env *env;
    int share;
    vptrs *sources;
    vptrs *fresh;
    cp_error *err;
} tctx;

static cp_value *made(tctx *c, cp_value *x) {   /* a node made here: registered in the shared mode */
    if (!x) return verr_oom(c->err);
    if (c->share) {
        vp_push(c->fresh, x);
        if (c->fresh->oom) { cp_value_free(x); return verr_oom(c->err); }   /* (x holds nothing shared yet) */
    }
    return x;
}

/* Append / set a child: in the shared mode through an owned placeholder, so that a failure frees no shared node. */
static int put_item(tctx *c, cp_value *list, cp_value *x) {
    if (!c->share) {
        if (cp_list_append(list, x) < 0) { verr_oom(c->err); return -1; }
        return 0;
    }
    if (cp_list_append(list, cp_null()) < 0) { verr_oom(c->err); return -1; }
    cp_value_free(list->u.list.items[list->u.list.len - 1]);
    list->u.list.items[list->u.list.len - 1] = x;
    return 0;
}
static int put_member(tctx *c, cp_value *obj, const char *key, size_t n, cp_value *x) {
    if (!c->share) {
        if (cp_object_set(obj, key, n, x) < 0) { verr_oom(c->err); return -1; }
        return 0;
    }
    if (cp_object_set(obj, key, n, cp_null()) < 0) { verr_oom(c->err); return -1; }
    cp_member *m = (cp_member *)cp_object_at(obj, cp_object_len(obj) - 1);   /* (template keys are distinct) */
    cp_value_free(m->value);
    m->value = x;
    return 0;
}

static cp_value *apply(tctx *c, const cp_value *t, int depth) {
    cp_error *err = c->err;
    if (depth > CP_JSON_MAX_DEPTH) return verr(err, "RecursionError", "maximum recursion depth exceeded");
    const char *path;
    size_t n;
    if (vpy_is_list(t)) {
        cp_value *out = made(c, cp_list());
        if (!out) return NULL;
        for (size_t i = 0; i < cp_list_len(t); i++) {
            cp_value *x = apply(c, cp_list_get(t, i), depth + 1);
            if (!x || put_item(c, out, x) < 0) { if (!c->share) cp_value_free(out); return NULL; }
        }
        return out;
    }
    if (vpy_is_dict(t)) {
        cp_value *out = made(c, cp_object());
        if (!out) return NULL;
        for (size_t i = 0; i < cp_object_len(t); i++) {
            const cp_member *m = cp_object_at(t, i);
            if (c->optional && placeholder(m->value, &path, &n, c->env)) {
                size_t rl = root_len(path, n);
                if (listed(c->optional, path, rl) && !scope_get(c->sc, path, rl)) continue;
            }
            cp_value *x = apply(c, m->value, depth + 1);
            if (!x || put_member(c, out, m->key, m->key_len, x) < 0) { if (!c->share) cp_value_free(out); return NULL; }
        }
        return out;
    }
    if (placeholder(t, &path, &n, c->env)) {
        cp_value *v = resolve(path, n, c->sc, err);
        if (!v || c->share) return v;
        if (c->sources && (vpy_is_dict(v) || vpy_is_list(v))) {
            vp_push(c->sources, v);
            if (c->sources->oom) return verr_oom(err);
        }
        cp_value *copy = cp_value_copy(v);
        return copy ? copy : verr_oom(err);
    }
    return made(c, cp_value_copy(t));
}

/* ------------------------------------------------------------------------------------------------ steps */

static int is_true(const cp_value *v) { return cp_type_of(v) == CP_BOOL && cp_bool_value(v); }

static cp_value *renamed(cp_value *d, const cp_value *aliases, cp_error *err) {
    size_t n = cp_object_len(d);
    const cp_value **target = calloc(n ? n : 1, sizeof *target);
    if (!target) { cp_value_free(d); return verr_oom(err); }
    int any = 0;
    for (size_t i = 0; i < n; i++) {
        const cp_member *m = cp_object_at(d, i);
        const cp_value *canon = cp_object_get(aliases, m->key, m->key_len);
        if (!vpy_is_str(canon)) continue;
        if (cp_object_get(d, canon->u.string.bytes, canon->u.string.len)) continue;
        int taken = 0;
        for (size_t j = 0; j < i && !taken; j++)
            taken = target[j] && target[j]->u.string.len == canon->u.string.len &&
                    memcmp(target[j]->u.string.bytes, canon->u.string.bytes, canon->u.string.len) == 0;
        if (taken) continue;
        target[i] = canon;
        any = 1;
    }
    if (!any) { free(target); return d; }
    cp_value *out = cp_object();
    for (size_t i = 0; out && i < n; i++) {
        cp_member *m = (cp_member *)cp_object_at(d, i);
        cp_value *v = m->value;
        m->value = cp_null();   /* (moved out; d is freed below) */
        if (!m->value) { m->value = v; cp_value_free(out); out = NULL; break; }
        int r = target[i] ? cp_object_set(out, target[i]->u.string.bytes, target[i]->u.string.len, v)
                          : cp_object_set(out, m->key, m->key_len, v);
        if (r < 0) { cp_value_free(out); out = NULL; }
    }
    free(target);
    cp_value_free(d);
    return out ? out : verr_oom(err);
}

static cp_value *rename_aliases(cp_value *value, const cp_value *aliases, cp_error *err) {
    if (vpy_is_dict(value)) return renamed(value, aliases, err);
    if (vpy_is_list(value)) {
        for (size_t i = 0; i < cp_list_len(value); i++) {
            cp_value *x = value->u.list.items[i];
            if (!vpy_is_dict(x)) continue;
            value->u.list.items[i] = NULL;
            cp_value *r = renamed(x, aliases, err);
            if (!r) {
                value->u.list.items[i] = cp_null();
                cp_value_free(value);
                return NULL;
            }
            value->u.list.items[i] = r;
        }
    }
    return value;
}

static int decode_path(cp_value *d, const char *path, size_t n, vptrs *g) {
    size_t i = 0;
    for (;;) {
        const char *dot = memchr(path + i, '.', n - i);
        size_t kl = dot ? (size_t)(dot - (path + i)) : n - i;
        if (!dot) {
            cp_value *text = cp_object_get(d, path + i, kl);
            if (!vpy_is_str(text)) return 0;
            cp_error e = {0};
            cp_value *v = vjson_loads(text->u.string.bytes, text->u.string.len, &e);
            if (!v) return strcmp(e.exception, "MemoryError") == 0 ? -1 : 0;
            if (!vpy_is_dict(v)) { cp_value_free(v); return 0; }
            return vset_member(d, path + i, kl, v, g);
        }
        d = cp_object_get(d, path + i, kl);
        if (!vpy_is_dict(d)) return 0;
        i += kl + 1;
    }
}

static int decode_json_strings(cp_value *value, const cp_value *paths, vptrs *g, cp_error *err) {
    size_t count = vpy_is_list(value) ? cp_list_len(value) : 1;
    for (size_t k = 0; k < count; k++) {
        cp_value *d = vpy_is_list(value) ? cp_list_get(value, k) : value;
        if (!vpy_is_dict(d)) continue;
        for (size_t p = 0; p < cp_list_len(paths); p++) {
            const cp_value *path = cp_list_get(paths, p);
            if (!vpy_is_str(path)) continue;
            if (decode_path(d, path->u.string.bytes, path->u.string.len, g) < 0) { verr_oom(err); return -1; }
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------------ parsing */

static int is_ext_parser(const cp_value *content) {
    return cp_string_equals(content, "python-calls") || cp_string_equals(content, "json-values");
}

static cp_value *parse_own(const char *body, size_t len, const cp_value *field, const cp_values_env *env, cp_error *err) {
    const cp_value *content = cp_object_get_cstr(field, "content");
    const cp_value *args = cp_object_get_cstr(field, "content_args");
    if (cp_string_equals(content, "python-calls")) return cp_values_python_calls(body, len, err);
    if (cp_string_equals(content, "json-values")) return cp_values_json_values(body, len, err);
    int unescape = is_true(cp_object_get_cstr(field, "escaped_json_values")) &&
                   (cp_string_equals(content, "xml-inline") || cp_string_equals(content, "kv-lines"));
    return vparse(body, len, 0, content ? content : &vconst_none, args ? args : &vconst_empty_dict, env, unescape, err);
}

static cp_value *parse_with_fallback(const char *body, size_t len, const cp_value *field, const cp_values_env *env,
                                     cp_error *err) {
    const cp_value *fallback = cp_object_get_cstr(field, "content_fallback");
    if (!vpy_truthy(fallback) || !vpy_is_list(fallback)) return parse_own(body, len, field, env, err);
    cp_error first = {0};
    cp_value *v = parse_own(body, len, field, env, &first);
    if (v) return v;
    if (cp_values_is_recoverable(first.exception)) {
        for (size_t i = 0; i < cp_list_len(fallback); i++) {
            const cp_value *entry = cp_list_get(fallback, i);
            const cp_value *content = cp_object_get_cstr(entry, "content");
            const cp_value *args = cp_object_get_cstr(entry, "content_args");
            cp_error e = {0};
            v = is_ext_parser(content) ? NULL
                : vparse(body, len, 0, content ? content : &vconst_none, args ? args : &vconst_empty_dict, env, 0, &e);
            if (v) return v;
            if (is_ext_parser(content)) continue;   /* (load_template allows base parsers only) */
            if (!cp_values_is_recoverable(e.exception)) {
                if (err && !err->failed) *err = e;
                return NULL;
            }
        }
    }
    if (err && !err->failed) *err = first;
    return NULL;
}

typedef struct unwrap_ctx {
    const char *body;
    vbuf out;
    size_t at;
    int any;
} unwrap_ctx;

static int unwrap_match(void *arg, const cp_vmatch *m) {
    unwrap_ctx *u = arg;
    if (m->end == m->start) return 0;
    vb_put(&u->out, u->body + u->at, m->start - u->at);
    size_t s, e;
    if (m->group(m, "keep", &s, &e) == 1) vb_put(&u->out, u->body + s, e - s);
    u->at = m->end;
    u->any = 1;
    return 0;
}

/* The transform of `value` (consumed) as a tree, with the looked-up containers in c->sources; NULL with err. */
static cp_value *transform(tctx *c, const cp_value *t, const cp_value *field, const cp_value *caps, cp_value *value) {
    cp_error *err = c->err;
    if (!vpy_truthy(cp_object_get_cstr(field, "transform_each"))) {
        scope sc = {caps, NULL, value};
        c->sc = &sc;
        return apply(c, t, 0);
    }
    const cp_value *name = cp_object_get_cstr(field, "name");
    size_t nn = 0;
    const char *ns = vpy_is_str(name) ? cp_string_bytes(name, &nn) : "";
    if (!vpy_is_list(value)) {
        vbuf m = {0};
        vb_puts(&m, "Field '");
        vb_put(&m, ns, nn);
        vb_printf(&m, "': transform_each requires the parsed content to be a list, got %s.", vpy_type_name(value));
        return verr_buf(err, "ValueError", &m);
    }
    cp_value *out = made(c, cp_list());
    if (!out) return NULL;
    for (size_t i = 0; i < cp_list_len(value); i++) {
        const cp_value *el = cp_list_get(value, i);
        if (!vpy_is_dict(el)) {
            vbuf m = {0};
            vb_puts(&m, "Field '");
            vb_put(&m, ns, nn);
            vb_printf(&m, "': transform_each requires each list element to be a dict, got %s.", vpy_type_name(el));
            if (!c->share) cp_value_free(out);
            return verr_buf(err, "ValueError", &m);
        }
        scope sc = {caps, el, NULL};
        c->sc = &sc;
        cp_value *x = apply(c, t, 0);
        if (!x || put_item(c, out, x) < 0) { if (!c->share) cp_value_free(out); return NULL; }
    }
    return out;
}

/* The steps after the transform (decode_json_strings; tool typing with params): 0 or -1 with err. */
static int after(cp_value *value, const char *body, size_t len, const cp_value *field, const cp_value *captures,
                 const cp_value *params, const cp_values_env *env, vptrs *g, cp_error *err) {
    const cp_value *paths = cp_object_get_cstr(field, "decode_json_strings");
    if (vpy_is_list(paths) && cp_list_len(paths) && decode_json_strings(value, paths, g, err) < 0) return -1;
    if (params && vtype_value(value, body, len, field, captures, params, env, g, err) < 0) return -1;
    if (g && g->oom) { verr_oom(err); return -1; }
    return 0;
}

/* A transform whose output holds one dict at two places: Python's shared objects (values_shared.c). `value`
 * consumed. The looked-up values are inserted themselves, the steps run on that graph, and a tree copy of it is
 * the value. */
static cp_value *shared_make(const cp_value *t, const cp_value *field, const cp_value *captures, cp_value *value,
                             const char *body, size_t len, const cp_value *params, const cp_values_env *env,
                             cp_error *err) {
    vshared sh;
    size_t elements = vpy_is_list(value) ? cp_list_len(value) : 0;
    size_t nodes = vshared_count(value) + (captures ? vshared_count(captures) : 0) + vshared_count(t) * (elements + 1);
    if (vshared_init(&sh, nodes) < 0) {
        vshared_free(&sh, NULL, 0);
        cp_value_free(value);
        return verr_oom(err);
    }
    cp_value *caps = vpy_is_dict(captures) ? cp_value_copy(captures) : NULL;   /* (the caller's stays untouched) */
    tctx c = {NULL, NULL, env, 1, NULL, &sh.fresh, err};
    const cp_value *optional = cp_object_get_cstr(field, "optional_placeholders");
    c.optional = vpy_truthy(optional) && vpy_is_list(optional) ? optional : NULL;
    cp_value *out = NULL, *result = NULL;
    if (vpy_is_dict(captures) && !caps) verr_oom(err);
    else out = transform(&c, t, field, caps, value);
    if (out && after(out, body, len, field, captures, params, env, &sh.grave, err) == 0) {
        result = cp_value_copy(out);
        if (!result) verr_oom(err);
    }
    cp_value *roots[3] = {out, value, caps};
    vshared_free(&sh, roots, 3);
    return result;
}

/* A region's value, typed when params is given (NULL: cp_values_make). */
static cp_value *make(const char *body, size_t len, const cp_value *field, const cp_value *captures,
                      const cp_value *params, const cp_values_env *env, cp_error *err) {
    if (!body) { body = ""; len = 0; }
    if (!vpy_is_dict(field)) return verr(err, "TypeError", "a field must be a dict, got %s", vpy_type_name(field));
    const char *raw = body;
    size_t raw_len = len;   /* (typing's text twin reads the body as given) */
    const cp_value *pattern = cp_object_get_cstr(field, "unwrap_pattern");
    unwrap_ctx u = {body, {0}, 0, 0};
    if (pattern && cp_type_of(pattern) != CP_NULL) {
        if (!env || !env->regex || !env->regex->finditer)
            return verr(err, "RuntimeError", "unwrap_pattern: no regex engine was given to run it");
        if (env->regex->finditer(env->regex->ctx, pattern, body, len, unwrap_match, &u, err) != 0) {
            vb_free(&u.out);
            if (err && !err->failed) verr(err, "RuntimeError", "unwrap_pattern failed");
            return NULL;
        }
        if (u.any) {
            vb_put(&u.out, body + u.at, len - u.at);
            if (u.out.oom) { vb_free(&u.out); return verr_oom(err); }
            body = u.out.b;
            len = u.out.n;
        }
    }
    cp_value *value = parse_with_fallback(body, len, field, env, err);
    vb_free(&u.out);
    if (!value) return NULL;
    if (is_true(cp_object_get_cstr(field, "as_list")) && !vpy_is_list(value)) {
        cp_value *l = cp_list();
        if (!l || cp_list_append(l, value) < 0) { if (!l) cp_value_free(value); return verr_oom(err); }
        value = l;
    }
    const cp_value *aliases = cp_object_get_cstr(field, "key_aliases");
    if (vpy_is_dict(aliases) && cp_object_len(aliases)) {
        value = rename_aliases(value, aliases, err);
        if (!value) return NULL;
    }
    const cp_value *t = cp_object_get_cstr(field, "transform");
    if (t && cp_type_of(t) != CP_NULL) {
        vptrs sources = {0};
        tctx c = {NULL, NULL, env, 0, &sources, NULL, err};
        const cp_value *optional = cp_object_get_cstr(field, "optional_placeholders");
        c.optional = vpy_truthy(optional) && vpy_is_list(optional) ? optional : NULL;
        const cp_value *caps = vpy_is_dict(captures) ? captures : NULL;
        cp_value *out = transform(&c, t, field, caps, value);
        int aliased = 0;
        if (out && sources.n > 1) {
            const cp_value *paths = cp_object_get_cstr(field, "decode_json_strings");
            int edits = (vpy_is_list(paths) && cp_list_len(paths)) || (params && cp_object_len(params));
            aliased = edits ? vshared_aliased(&sources) : 0;   /* (without an in-place step a copy is the same) */
        }
        vp_free(&sources);
        if (aliased < 0) { cp_value_free(out); cp_value_free(value); return verr_oom(err); }
        if (aliased) {
            cp_value_free(out);
            return shared_make(t, field, captures, value, raw, raw_len, params, env, err);
        }
        cp_value_free(value);
        if (!out) return NULL;
        value = out;
    }
    if (after(value, raw, raw_len, field, captures, params, env, NULL, err) < 0) {
        cp_value_free(value);
        return NULL;
    }
    return value;
}

cp_value *cp_values_make(const char *body, size_t len, const cp_value *field, const cp_value *captures,
                         const cp_values_env *env, cp_error *err) {
    return make(body, len, field, captures, NULL, env, err);
}

cp_value *cp_values_region(const char *body, size_t len, const cp_value *field, const cp_value *captures,
                           const cp_value *params, const cp_values_env *env, cp_error *err) {
    return make(body, len, field, captures, params && cp_object_len(params) ? params : NULL, env, err);
}
