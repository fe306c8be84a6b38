/* pyrepr.c - Python's repr() of a str (pyrepr.h). */
#include "pyrepr.h"

#include <pcre2.h>
#include <string.h>

#include "value.h"

int cp_py_isprintable(unsigned cp) {
    if (cp < 0x80) return cp >= 0x20 && cp < 0x7F;
    /* Not printable: Cc, Cf, Cs, Co, Cn, Zl, Zp, Zs (space is ASCII). A
     * compiled pattern per call keeps this free of global state; it runs only
     * while composing an error message. */
    static const char pat[] = "^[\\p{Cc}\\p{Cf}\\p{Cs}\\p{Co}\\p{Cn}\\p{Zl}\\p{Zp}\\p{Zs}]";
    int errcode;
    PCRE2_SIZE erroff;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_MATCH_INVALID_UTF,
                                   &errcode, &erroff, NULL);
    if (!re) return 1;
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    char enc[4];
    int k = cp_utf8_encode(cp, enc);
    int rc = md ? pcre2_match(re, (PCRE2_SPTR)enc, (PCRE2_SIZE)k, 0, 0, md, NULL) : -1;
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    if (cp >= 0xD800 && cp <= 0xDFFF) return 0;   /* Cs (not matchable as UTF-8) */
    return rc < 0;
}

static void cut_to(cp_buf *b, long max_chars) {
    if (max_chars < 0) return;
    size_t cut = 0;
    long chars = 0;
    while (cut < b->len && chars < max_chars) {
        cut++;
        while (cut < b->len && ((unsigned char)b->data[cut] & 0xC0) == 0x80) cut++;
        chars++;
    }
    b->len = cut;
}

static void repr_value(cp_buf *b, const cp_value *v) {
    char num[40];
    switch (cp_type_of(v)) {
    case CP_NULL: cp_buf_puts(b, "None"); return;
    case CP_BOOL: cp_buf_puts(b, v->u.boolean ? "True" : "False"); return;
    case CP_INT: cp_buf_printf(b, "%lld", (long long)v->u.integer); return;
    case CP_BIGINT: cp_buf_append(b, v->u.string.bytes, v->u.string.len); return;
    case CP_FLOAT: cp_buf_append(b, num, (size_t)cp_float_repr(v->u.number, num)); return;
    case CP_STRING: cp_py_repr_str(b, v->u.string.bytes, v->u.string.len, -1); return;
    case CP_LIST:
        cp_buf_putc(b, '[');
        for (size_t i = 0; i < v->u.list.len; i++) {
            if (i) cp_buf_puts(b, ", ");
            repr_value(b, v->u.list.items[i]);
        }
        cp_buf_putc(b, ']');
        return;
    case CP_OBJECT:
        cp_buf_putc(b, '{');
        for (size_t i = 0; i < v->u.object.len; i++) {
            const cp_member *m = &v->u.object.members[i];
            if (i) cp_buf_puts(b, ", ");
            cp_py_repr_str(b, m->key, m->key_len, -1);
            cp_buf_puts(b, ": ");
            repr_value(b, m->value);
        }
        cp_buf_putc(b, '}');
        return;
    }
}

void cp_py_repr_value(cp_buf *out, const cp_value *v, long max_chars) {
    cp_buf b = {0};
    repr_value(&b, v);
    if (b.failed) { out->failed = 1; cp_buf_free(&b); return; }
    cut_to(&b, max_chars);
    cp_buf_append(out, b.data, b.len);
    cp_buf_free(&b);
}

const char *cp_py_type_name(const cp_value *v) {
    switch (cp_type_of(v)) {
    case CP_NULL: return "NoneType";
    case CP_BOOL: return "bool";
    case CP_INT: case CP_BIGINT: return "int";
    case CP_FLOAT: return "float";
    case CP_STRING: return "str";
    case CP_LIST: return "list";
    default: return "dict";
    }
}

void cp_py_repr_str(cp_buf *out, const char *s, size_t n, long max_chars) {
    cp_buf b = {0};
    int has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    cp_buf_putc(&b, q);
    size_t i = 0;
    while (i < n) {
        size_t at = i;
        int32_t c = cp_utf8_decode(s, n, &i, 1);
        if (c < 0) c = (unsigned char)s[at];   /* not generalized UTF-8: show the byte */
        if (c == q || c == '\\') { cp_buf_putc(&b, '\\'); cp_buf_putc(&b, (char)c); }
        else if (c == '\t') cp_buf_puts(&b, "\\t");
        else if (c == '\n') cp_buf_puts(&b, "\\n");
        else if (c == '\r') cp_buf_puts(&b, "\\r");
        else if (c < 0x20 || c == 0x7F) cp_buf_printf(&b, "\\x%02x", (unsigned)c);
        else if (c < 0x7F) cp_buf_putc(&b, (char)c);
        else if (cp_py_isprintable((unsigned)c)) cp_buf_append(&b, s + at, i - at);
        else if (c < 0x100) cp_buf_printf(&b, "\\x%02x", (unsigned)c);
        else if (c < 0x10000) cp_buf_printf(&b, "\\u%04x", (unsigned)c);
        else cp_buf_printf(&b, "\\U%08x", (unsigned)c);
    }
    cp_buf_putc(&b, q);
    if (b.failed) { out->failed = 1; cp_buf_free(&b); return; }
    cut_to(&b, max_chars);
    cp_buf_append(out, b.data, b.len);
    cp_buf_free(&b);
}
