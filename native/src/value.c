/* value.c - the JSON value model (value.h): constructors, objects with
 * insertion order and a hash index, copy, free, equality, UTF-8 helpers. */
#include "value.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Objects up to this many keys are searched linearly; past it a hash index
 * (open addressing over member positions) is kept. */
#define CP_OBJECT_LINEAR 8

static cp_value *new_value(cp_type t) {
    cp_value *v = calloc(1, sizeof *v);
    if (v) v->type = t;
    return v;
}

cp_value *cp_null(void) { return new_value(CP_NULL); }

cp_value *cp_bool(int b) {
    cp_value *v = new_value(CP_BOOL);
    if (v) v->u.boolean = b ? 1 : 0;
    return v;
}

cp_value *cp_int(int64_t i) {
    cp_value *v = new_value(CP_INT);
    if (v) v->u.integer = i;
    return v;
}

cp_value *cp_int_from_text(const char *text, size_t len) {
    size_t i = 0;
    int neg = 0;
    if (len > 0 && text[0] == '-') { neg = 1; i = 1; }
    if (i >= len) return NULL;
    for (size_t k = i; k < len; k++)
        if (text[k] < '0' || text[k] > '9') return NULL;
    while (i + 1 < len && text[i] == '0') i++;   /* strip leading zeros */
    size_t nd = len - i;
    if (nd <= 18 || (nd == 19)) {
        /* fits unsigned 64-bit accumulation for 19 digits */
        uint64_t acc = 0;
        for (size_t k = i; k < len; k++) acc = acc * 10 + (uint64_t)(text[k] - '0');
        if (!neg && acc <= (uint64_t)INT64_MAX) return cp_int((int64_t)acc);
        if (neg && acc <= (uint64_t)INT64_MAX + 1) {
            if (acc == (uint64_t)INT64_MAX + 1) return cp_int(INT64_MIN);
            return cp_int(-(int64_t)acc);
        }
    }
    cp_value *v = new_value(CP_BIGINT);
    if (!v) return NULL;
    char *b = malloc(nd + 2);
    if (!b) { free(v); return NULL; }
    size_t o = 0;
    if (neg) b[o++] = '-';
    memcpy(b + o, text + i, nd);
    o += nd;
    b[o] = 0;
    v->u.string.bytes = b;
    v->u.string.len = o;
    return v;
}

cp_value *cp_float(double d) {
    cp_value *v = new_value(CP_FLOAT);
    if (v) v->u.number = d;
    return v;
}

cp_value *cp_string(const char *bytes, size_t len) {
    char *b = malloc(len + 1);
    if (!b) return NULL;
    if (len) memcpy(b, bytes, len);
    return cp_string_take(b, len);
}

cp_value *cp_string_cstr(const char *s) { return cp_string(s, strlen(s)); }

cp_value *cp_string_take(char *bytes, size_t len) {
    cp_value *v = new_value(CP_STRING);
    if (!v) { free(bytes); return NULL; }
    bytes[len] = 0;
    v->u.string.bytes = bytes;
    v->u.string.len = len;
    return v;
}

cp_value *cp_list(void) { return new_value(CP_LIST); }
cp_value *cp_object(void) { return new_value(CP_OBJECT); }

/* ---- accessors ---------------------------------------------------------- */

cp_type cp_type_of(const cp_value *v) { return v ? v->type : CP_NULL; }
int cp_bool_value(const cp_value *v) { return v && v->type == CP_BOOL && v->u.boolean; }
int64_t cp_int_value(const cp_value *v) { return v && v->type == CP_INT ? v->u.integer : 0; }
double cp_float_value(const cp_value *v) { return v && v->type == CP_FLOAT ? v->u.number : 0.0; }

const char *cp_string_bytes(const cp_value *v, size_t *len) {
    if (v && (v->type == CP_STRING || v->type == CP_BIGINT)) {
        if (len) *len = v->u.string.len;
        return v->u.string.bytes;
    }
    if (len) *len = 0;
    return NULL;
}

size_t cp_string_length(const cp_value *v) {
    if (!v || v->type != CP_STRING) return 0;
    size_t n = 0;
    const unsigned char *s = (const unsigned char *)v->u.string.bytes;
    for (size_t i = 0; i < v->u.string.len; i++)
        if ((s[i] & 0xC0) != 0x80) n++;
    return n;
}

int cp_string_equals(const cp_value *v, const char *s) {
    if (!v || v->type != CP_STRING) return 0;
    size_t n = strlen(s);
    return n == v->u.string.len && memcmp(v->u.string.bytes, s, n) == 0;
}

size_t cp_list_len(const cp_value *v) { return v && v->type == CP_LIST ? v->u.list.len : 0; }

cp_value *cp_list_get(const cp_value *v, size_t i) {
    if (!v || v->type != CP_LIST || i >= v->u.list.len) return NULL;
    return v->u.list.items[i];
}

int cp_list_append(cp_value *list, cp_value *item) {
    if (!item) return -1;
    if (!list || list->type != CP_LIST) { cp_value_free(item); return -1; }
    if (list->u.list.len == list->u.list.cap) {
        size_t cap = list->u.list.cap ? list->u.list.cap * 2 : 4;
        cp_value **items = realloc(list->u.list.items, cap * sizeof *items);
        if (!items) { cp_value_free(item); return -1; }
        list->u.list.items = items;
        list->u.list.cap = cap;
    }
    list->u.list.items[list->u.list.len++] = item;
    return 0;
}

/* ---- objects -------------------------------------------------------------- */

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ULL;   /* FNV-1a */
    for (size_t i = 0; i < n; i++) { h ^= (unsigned char)s[i]; h *= 1099511628211ULL; }
    return h;
}

#define INDEX_EMPTY ((size_t)-1)

/* Rebuild the hash index for the current members with capacity >= 2*len. */
static int index_rebuild(cp_value *o) {
    size_t cap = 16;
    while (cap < o->u.object.len * 2 + 2) cap *= 2;
    size_t *idx = malloc(cap * sizeof *idx);
    if (!idx) return -1;
    for (size_t i = 0; i < cap; i++) idx[i] = INDEX_EMPTY;
    for (size_t m = 0; m < o->u.object.len; m++) {
        cp_member *mm = &o->u.object.members[m];
        size_t p = (size_t)hash_bytes(mm->key, mm->key_len) & (cap - 1);
        while (idx[p] != INDEX_EMPTY) p = (p + 1) & (cap - 1);
        idx[p] = m;
    }
    free(o->u.object.index);
    o->u.object.index = idx;
    o->u.object.index_cap = cap;
    return 0;
}

/* Position of key in members, or (size_t)-1. */
static size_t object_find(const cp_value *o, const char *key, size_t key_len) {
    const cp_member *ms = o->u.object.members;
    if (!o->u.object.index) {
        for (size_t m = 0; m < o->u.object.len; m++)
            if (ms[m].key_len == key_len && memcmp(ms[m].key, key, key_len) == 0) return m;
        return (size_t)-1;
    }
    size_t cap = o->u.object.index_cap;
    size_t p = (size_t)hash_bytes(key, key_len) & (cap - 1);
    for (;;) {
        size_t m = o->u.object.index[p];
        if (m == INDEX_EMPTY) return (size_t)-1;
        if (ms[m].key_len == key_len && memcmp(ms[m].key, key, key_len) == 0) return m;
        p = (p + 1) & (cap - 1);
    }
}

size_t cp_object_len(const cp_value *v) { return v && v->type == CP_OBJECT ? v->u.object.len : 0; }

const cp_member *cp_object_at(const cp_value *v, size_t i) {
    if (!v || v->type != CP_OBJECT || i >= v->u.object.len) return NULL;
    return &v->u.object.members[i];
}

cp_value *cp_object_get(const cp_value *obj, const char *key, size_t key_len) {
    if (!obj || obj->type != CP_OBJECT) return NULL;
    size_t m = object_find(obj, key, key_len);
    return m == (size_t)-1 ? NULL : obj->u.object.members[m].value;
}

cp_value *cp_object_get_cstr(const cp_value *obj, const char *key) {
    return cp_object_get(obj, key, strlen(key));
}

int cp_object_set(cp_value *obj, const char *key, size_t key_len, cp_value *value) {
    if (!value) return -1;
    if (!obj || obj->type != CP_OBJECT) { cp_value_free(value); return -1; }
    size_t m = object_find(obj, key, key_len);
    if (m != (size_t)-1) {
        cp_value_free(obj->u.object.members[m].value);
        obj->u.object.members[m].value = value;
        return 0;
    }
    if (obj->u.object.len == obj->u.object.cap) {
        size_t cap = obj->u.object.cap ? obj->u.object.cap * 2 : 4;
        cp_member *ms = realloc(obj->u.object.members, cap * sizeof *ms);
        if (!ms) { cp_value_free(value); return -1; }
        obj->u.object.members = ms;
        obj->u.object.cap = cap;
    }
    char *k = malloc(key_len + 1);
    if (!k) { cp_value_free(value); return -1; }
    if (key_len) memcpy(k, key, key_len);
    k[key_len] = 0;
    size_t pos = obj->u.object.len;
    obj->u.object.members[pos].key = k;
    obj->u.object.members[pos].key_len = key_len;
    obj->u.object.members[pos].value = value;
    obj->u.object.len++;
    if (obj->u.object.index) {
        if (obj->u.object.len * 2 + 2 > obj->u.object.index_cap) {
            if (index_rebuild(obj) < 0) goto undo;
        } else {
            size_t cap = obj->u.object.index_cap;
            size_t p = (size_t)hash_bytes(k, key_len) & (cap - 1);
            while (obj->u.object.index[p] != INDEX_EMPTY) p = (p + 1) & (cap - 1);
            obj->u.object.index[p] = pos;
        }
    } else if (obj->u.object.len > CP_OBJECT_LINEAR) {
        if (index_rebuild(obj) < 0) goto undo;
    }
    return 0;
undo:
    obj->u.object.len--;
    free(k);
    cp_value_free(value);
    return -1;
}

int cp_object_set_cstr(cp_value *obj, const char *key, cp_value *value) {
    return cp_object_set(obj, key, strlen(key), value);
}

cp_value *cp_object_pop(cp_value *obj, const char *key, size_t key_len) {
    if (!obj || obj->type != CP_OBJECT) return NULL;
    size_t m = object_find(obj, key, key_len);
    if (m == (size_t)-1) return NULL;
    cp_value *v = obj->u.object.members[m].value;
    free(obj->u.object.members[m].key);
    memmove(&obj->u.object.members[m], &obj->u.object.members[m + 1],
            (obj->u.object.len - m - 1) * sizeof(cp_member));
    obj->u.object.len--;
    if (obj->u.object.index) {
        /* positions shifted: rebuild (or drop the index when small again) */
        if (obj->u.object.len <= CP_OBJECT_LINEAR || index_rebuild(obj) < 0) {
            free(obj->u.object.index);
            obj->u.object.index = NULL;
            obj->u.object.index_cap = 0;
        }
    }
    return v;
}

/* ---- whole values ------------------------------------------------------- */

cp_value *cp_value_copy(const cp_value *v) {
    if (!v) return NULL;
    switch (v->type) {
    case CP_NULL: return cp_null();
    case CP_BOOL: return cp_bool(v->u.boolean);
    case CP_INT: return cp_int(v->u.integer);
    case CP_FLOAT: return cp_float(v->u.number);
    case CP_STRING: return cp_string(v->u.string.bytes, v->u.string.len);
    case CP_BIGINT: {
        cp_value *c = cp_string(v->u.string.bytes, v->u.string.len);
        if (c) c->type = CP_BIGINT;
        return c;
    }
    case CP_LIST: {
        cp_value *c = cp_list();
        if (!c) return NULL;
        for (size_t i = 0; i < v->u.list.len; i++) {
            cp_value *item = cp_value_copy(v->u.list.items[i]);
            if (!item || cp_list_append(c, item) < 0) { cp_value_free(c); return NULL; }
        }
        return c;
    }
    case CP_OBJECT: {
        cp_value *c = cp_object();
        if (!c) return NULL;
        for (size_t i = 0; i < v->u.object.len; i++) {
            const cp_member *m = &v->u.object.members[i];
            cp_value *item = cp_value_copy(m->value);
            if (!item || cp_object_set(c, m->key, m->key_len, item) < 0) { cp_value_free(c); return NULL; }
        }
        return c;
    }
    }
    return NULL;
}

void cp_value_free(cp_value *v) {
    if (!v) return;
    switch (v->type) {
    case CP_STRING:
    case CP_BIGINT:
        free(v->u.string.bytes);
        break;
    case CP_LIST:
        for (size_t i = 0; i < v->u.list.len; i++) cp_value_free(v->u.list.items[i]);
        free(v->u.list.items);
        break;
    case CP_OBJECT:
        for (size_t i = 0; i < v->u.object.len; i++) {
            free(v->u.object.members[i].key);
            cp_value_free(v->u.object.members[i].value);
        }
        free(v->u.object.members);
        free(v->u.object.index);
        break;
    default:
        break;
    }
    free(v);
}

int cp_value_equal(const cp_value *a, const cp_value *b) {
    if (a == b) return 1;
    if (!a || !b || a->type != b->type) return 0;
    switch (a->type) {
    case CP_NULL: return 1;
    case CP_BOOL: return a->u.boolean == b->u.boolean;
    case CP_INT: return a->u.integer == b->u.integer;
    case CP_FLOAT:
        if (isnan(a->u.number)) return isnan(b->u.number);
        return a->u.number == b->u.number;
    case CP_STRING:
    case CP_BIGINT:
        return a->u.string.len == b->u.string.len &&
               memcmp(a->u.string.bytes, b->u.string.bytes, a->u.string.len) == 0;
    case CP_LIST:
        if (a->u.list.len != b->u.list.len) return 0;
        for (size_t i = 0; i < a->u.list.len; i++)
            if (!cp_value_equal(a->u.list.items[i], b->u.list.items[i])) return 0;
        return 1;
    case CP_OBJECT:
        if (a->u.object.len != b->u.object.len) return 0;
        for (size_t i = 0; i < a->u.object.len; i++) {
            const cp_member *x = &a->u.object.members[i], *y = &b->u.object.members[i];
            if (x->key_len != y->key_len || memcmp(x->key, y->key, x->key_len) != 0) return 0;
            if (!cp_value_equal(x->value, y->value)) return 0;
        }
        return 1;
    }
    return 0;
}

/* Python's numeric comparison of two numbers (bool/int/bigint/float). */
static int py_num_equal(const cp_value *a, const cp_value *b) {
    if (a->type == CP_BIGINT || b->type == CP_BIGINT) {
        if (a->type == CP_BIGINT && b->type == CP_BIGINT) return cp_value_equal(a, b);
        const cp_value *big = a->type == CP_BIGINT ? a : b, *o = a->type == CP_BIGINT ? b : a;
        if (o->type != CP_FLOAT || !isfinite(o->u.number)) return 0;   /* int64 never equals a bigint */
        /* compare the float's exact integer value with the text */
        double d = o->u.number;
        if (d != floor(d)) return 0;
        char buf[400];
        int n = snprintf(buf, sizeof buf, "%.0f", d);
        return n > 0 && (size_t)n == big->u.string.len && memcmp(buf, big->u.string.bytes, (size_t)n) == 0;
    }
    if (a->type == CP_FLOAT || b->type == CP_FLOAT) {
        if (a->type == CP_FLOAT && b->type == CP_FLOAT) return a->u.number == b->u.number;
        const cp_value *f = a->type == CP_FLOAT ? a : b, *o = a->type == CP_FLOAT ? b : a;
        int64_t i = o->type == CP_BOOL ? o->u.boolean : o->u.integer;
        double d = f->u.number;
        if (!isfinite(d) || d != floor(d)) return 0;
        if (d < -9223372036854775808.0 || d >= 9223372036854775808.0) return 0;
        return (int64_t)d == i;
    }
    int64_t x = a->type == CP_BOOL ? a->u.boolean : a->u.integer;
    int64_t y = b->type == CP_BOOL ? b->u.boolean : b->u.integer;
    return x == y;
}

static int is_number(const cp_value *v) {
    return v->type == CP_BOOL || v->type == CP_INT || v->type == CP_BIGINT || v->type == CP_FLOAT;
}

int cp_value_py_equal(const cp_value *a, const cp_value *b) {
    if (!a || !b) return a == b;
    if (is_number(a) && is_number(b)) return py_num_equal(a, b);
    if (a->type != b->type) return 0;
    switch (a->type) {
    case CP_NULL: return 1;
    case CP_STRING: return cp_value_equal(a, b);
    case CP_LIST:
        if (a->u.list.len != b->u.list.len) return 0;
        for (size_t i = 0; i < a->u.list.len; i++)
            if (!cp_value_py_equal(a->u.list.items[i], b->u.list.items[i])) return 0;
        return 1;
    case CP_OBJECT:
        if (a->u.object.len != b->u.object.len) return 0;
        for (size_t i = 0; i < a->u.object.len; i++) {
            const cp_member *x = &a->u.object.members[i];
            const cp_value *y = cp_object_get(b, x->key, x->key_len);
            if (!y || !cp_value_py_equal(x->value, y)) return 0;
        }
        return 1;
    default: return 0;
    }
}

/* ---- UTF-8 ----------------------------------------------------------------- */

int32_t cp_utf8_decode(const char *str, size_t len, size_t *pos, int allow_surrogates) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = *pos;
    unsigned c = s[i];
    if (c < 0x80) { *pos = i + 1; return (int32_t)c; }
    size_t n;
    uint32_t cp, min;
    if (c >= 0xC2 && c <= 0xDF) { n = 2; cp = c & 0x1F; min = 0x80; }
    else if (c >= 0xE0 && c <= 0xEF) { n = 3; cp = c & 0x0F; min = 0x800; }
    else if (c >= 0xF0 && c <= 0xF4) { n = 4; cp = c & 0x07; min = 0x10000; }
    else { *pos = i + 1; return -1; }
    if (len - i < n) { *pos = i + 1; return -1; }
    for (size_t k = 1; k < n; k++) {
        unsigned cc = s[i + k];
        if ((cc & 0xC0) != 0x80) { *pos = i + 1; return -1; }
        cp = (cp << 6) | (cc & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (!allow_surrogates && cp >= 0xD800 && cp <= 0xDFFF)) {
        *pos = i + 1;
        return -1;
    }
    *pos = i + n;
    return (int32_t)cp;
}

int cp_utf8_encode(uint32_t cp, char out[4]) {
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

size_t cp_utf8_first_invalid(const char *s, size_t len) {
    size_t pos = 0;
    while (pos < len) {
        size_t at = pos;
        if ((unsigned char)s[pos] < 0x80) { pos++; continue; }
        if (cp_utf8_decode(s, len, &pos, 0) < 0) return at;
    }
    return (size_t)-1;
}
