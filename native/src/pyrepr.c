/* pyrepr.c - Python's repr() of a str (pyrepr.h). */
#include "pyrepr.h"

#include <pcre2.h>
#include <string.h>

#include "value.h"

/* Not printable: Cc, Cf, Cs, Co, Cn, Zl, Zp, Zs (the space is ASCII). */
static pcre2_code *nonprintable_class(void) {
    static const char pat[] = "^[\\p{Cc}\\p{Cf}\\p{Cs}\\p{Co}\\p{Cn}\\p{Zl}\\p{Zp}\\p{Zs}]";
    int errcode;
    PCRE2_SIZE erroff;
    return pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, PCRE2_UTF, &errcode, &erroff, NULL);
}

static int printable_with(pcre2_code *re, pcre2_match_data *md, unsigned cp) {
    if (cp < 0x80) return cp >= 0x20 && cp < 0x7F;
    if (cp >= 0xD800 && cp <= 0xDFFF) return 0;   /* Cs (not matchable as UTF-8) */
    if (!re || !md) return 1;
    char enc[4];
    int k = cp_utf8_encode(cp, enc);
    return pcre2_match(re, (PCRE2_SPTR)enc, (PCRE2_SIZE)k, 0, 0, md, NULL) < 0;
}

int cp_py_isprintable(unsigned cp) {
    /* a pattern compiled per call keeps this free of global state: it serves messages only */
    pcre2_code *re = cp < 0x80 ? NULL : nonprintable_class();
    pcre2_match_data *md = re ? pcre2_match_data_create_from_pattern(re, NULL) : NULL;
    int r = printable_with(re, md, cp);
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    return r;
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

/* repr of v appended to b; stops early once b holds more than `budget`
 * bytes (the caller cuts the text to fewer characters than that anyway). */
static void repr_value(cp_buf *b, const cp_value *v, size_t budget) {
    if (b->len > budget) return;
    char num[40];
    switch (cp_type_of(v)) {
    case CP_NULL: cp_buf_puts(b, "None"); return;
    case CP_BOOL: cp_buf_puts(b, v->u.boolean ? "True" : "False"); return;
    case CP_INT: cp_buf_printf(b, "%lld", (long long)v->u.integer); return;
    case CP_BIGINT: cp_buf_append(b, v->u.string.bytes, v->u.string.len); return;
    case CP_FLOAT: cp_buf_append(b, num, (size_t)cp_float_repr(v->u.number, num)); return;
    case CP_STRING: cp_py_repr_str(b, v->u.string.bytes, v->u.string.len, budget > 1 << 30 ? -1 : (long)budget + 1); return;
    case CP_LIST:
        cp_buf_putc(b, '[');
        for (size_t i = 0; i < v->u.list.len; i++) {
            if (i) cp_buf_puts(b, ", ");
            repr_value(b, v->u.list.items[i], budget);
            if (b->len > budget) return;
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
            repr_value(b, m->value, budget);
            if (b->len > budget) return;
        }
        cp_buf_putc(b, '}');
        return;
    }
}

void cp_py_repr_value(cp_buf *out, const cp_value *v, long max_chars) {
    cp_buf b = {0};
    /* a character is at least one byte: past 4 * max_chars + 16 bytes the cut is certain */
    repr_value(&b, v, max_chars < 0 ? (size_t)-1 : (size_t)max_chars * 4 + 16);
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
    pcre2_code *re = NULL;
    pcre2_match_data *md = NULL;
    size_t i = 0;
    while (i < n) {
        if (max_chars >= 0 && b.len > (size_t)max_chars * 4 + 16) break;   /* will be cut anyway */
        size_t at = i;
        int32_t c = cp_utf8_decode(s, n, &i, 1);
        if (c < 0) c = (unsigned char)s[at];   /* not generalized UTF-8: show the byte */
        if (c == q || c == '\\') { cp_buf_putc(&b, '\\'); cp_buf_putc(&b, (char)c); }
        else if (c == '\t') cp_buf_puts(&b, "\\t");
        else if (c == '\n') cp_buf_puts(&b, "\\n");
        else if (c == '\r') cp_buf_puts(&b, "\\r");
        else if (c < 0x20 || c == 0x7F) cp_buf_printf(&b, "\\x%02x", (unsigned)c);
        else if (c < 0x7F) cp_buf_putc(&b, (char)c);
        else if ((re || (re = nonprintable_class()) != NULL) && !md &&
                 (md = pcre2_match_data_create_from_pattern(re, NULL)) == NULL) cp_buf_append(&b, s + at, i - at);
        else if (printable_with(re, md, (unsigned)c)) cp_buf_append(&b, s + at, i - at);
        else if (c < 0x100) cp_buf_printf(&b, "\\x%02x", (unsigned)c);
        else if (c < 0x10000) cp_buf_printf(&b, "\\u%04x", (unsigned)c);
        else cp_buf_printf(&b, "\\U%08x", (unsigned)c);
    }
    cp_buf_putc(&b, q);
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    if (b.failed) { out->failed = 1; cp_buf_free(&b); return; }
    cut_to(&b, max_chars);
    cp_buf_append(out, b.data, b.len);
    cp_buf_free(&b);
}
