/*
 * regex.c - port-section translations run on PCRE2 with Python's finditer
 * semantics (see regex.h for what is guaranteed and why the translation).
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "regex.h"
#include "error.h"

struct cp_rx {
    pcre2_code *code;
    uint32_t capture_count;
    /* per translation group, in the translation's order */
    size_t n_groups;
    uint32_t *group_num;   /* PCRE2 group number */
    char **group_py;       /* Python name (NUL-terminated) */
    size_t *group_py_len;
    size_t n_names;        /* distinct Python names */
};

size_t cp_rx_cp_count(const char *s, size_t from, size_t to) {
    /* code points = bytes - continuation bytes (10xxxxxx), counted 8 bytes at a time */
    size_t n = to > from ? to - from : 0, cont = 0, i = from;
    for (; i + 8 <= to; i += 8) {
        uint64_t x;
        memcpy(&x, s + i, 8);
        uint64_t m = x & ~(x << 1) & 0x8080808080808080ull; /* bit 7 set, bit 6 clear */
        m >>= 7;
        m *= 0x0101010101010101ull; /* (at most 8 per byte: no carry) */
        cont += (size_t)(m >> 56);
    }
    for (; i < to; i++)
        if (((unsigned char)s[i] & 0xC0) == 0x80) cont++;
    return n - cont;
}

/* ------------------------------------------------------------------ rewrite */

typedef struct buf {
    char *p;
    size_t len, cap;
    int oom;
} buf;

static void put(buf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

static void puts_(buf *b, const char *s) { put(b, s, strlen(s)); }

static void put_cp(buf *b, uint32_t cp) {
    char tmp[16];
    snprintf(tmp, sizeof tmp, "\\x{%X}", (unsigned)cp);
    puts_(b, tmp);
}

/* JavaScript's \s (WhiteSpace and LineTerminator), the class body. */
static const char JS_SPACE_BODY[] =
    "\\x{9}-\\x{D}\\x{20}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}\\x{FEFF}";

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Parse exactly n hex digits at s[*i]; -1 when not there. */
static long hexn(const char *s, size_t len, size_t *i, int n) {
    long v = 0;
    if (*i + (size_t)n > len) return -1;
    for (int k = 0; k < n; k++) {
        int h = hexval(s[*i + k]);
        if (h < 0) return -1;
        v = v * 16 + h;
    }
    *i += n;
    return v;
}

typedef struct names {
    size_t n, cap;
    char **js;        /* JavaScript names */
    size_t *js_len;
} names;

static long name_index(const names *nm, const char *s, size_t len) {
    for (size_t k = 0; k < nm->n; k++)
        if (nm->js_len[k] == len && memcmp(nm->js[k], s, len) == 0) return (long)k;
    return -1;
}

static int name_add(names *nm, const char *s, size_t len) {
    if (nm->n == nm->cap) {
        size_t cap = nm->cap ? nm->cap * 2 : 8;
        char **js = realloc(nm->js, cap * sizeof *js);
        if (!js) return -1;
        nm->js = js;
        size_t *jl = realloc(nm->js_len, cap * sizeof *jl);
        if (!jl) return -1;
        nm->js_len = jl;
        nm->cap = cap;
    }
    char *c = malloc(len + 1);
    if (!c) return -1;
    memcpy(c, s, len);
    c[len] = 0;
    nm->js[nm->n] = c;
    nm->js_len[nm->n] = len;
    nm->n++;
    return 0;
}

static void names_free(names *nm) {
    for (size_t k = 0; k < nm->n; k++) free(nm->js[k]);
    free(nm->js);
    free(nm->js_len);
}

/* Emit one class member code point or the low end of a range: a surrogate is
 * dropped by the caller (it can never match a valid UTF-8 subject). */
static int is_surrogate(long cp) { return cp >= 0xD800 && cp <= 0xDFFF; }

/* Just past the JavaScript group opening at s[i] == '(' (u-mode: `]` always ends a class), or 0. */
static size_t js_group_end(const char *s, size_t len, size_t i) {
    long depth = 0;
    while (i < len) {
        char c = s[i];
        if (c == '\\') {
            i += 2;
        } else if (c == '[') {
            i++;
            while (i < len && s[i] != ']') i += s[i] == '\\' ? 2 : 1;
            i++;
        } else {
            if (c == '(') depth++;
            else if (c == ')' && --depth == 0) return i + 1;
            i++;
        }
    }
    return 0;
}

/*
 * Rewrite a JavaScript (u-mode) source into PCRE2 syntax. Returns 0, or -1
 * with *why set to a static reason. Named groups become _0, _1, ... in order
 * of appearance (nm gets their JavaScript names).
 *
 * Inside a class, code points are collected as atoms so that a range with a
 * surrogate end can be clipped: every atom is emitted as \x{H}.
 */
static int rewrite(const char *s, size_t len, buf *out, names *nm, const char **why) {
    size_t i = 0;
    int in_class = 0;
    /* class range handling: a pending low end (cp) waiting for a possible '-' */
    long pend = -1;       /* pending atom code point in a class, -1 none */
    int range = 0;        /* saw "atom -" and waiting for the high end */
    /* A lookbehind whose whole body is one non-capturing group, (?<=(?:ab|c)), loses the group: PCRE2 10.42
     * takes top-level alternatives of different fixed lengths in a lookbehind, not nested ones. drop[] holds
     * the offsets of the group's closing parens still to come. */
    size_t drop[64];
    size_t n_drop = 0;
    while (i < len) {
        unsigned char c = (unsigned char)s[i];
        long cp = -2;     /* a code point atom to emit (-2: none; text already emitted) */
        if (c == '\\') {
            if (i + 1 >= len) {
                *why = "a trailing backslash";
                return -1;
            }
            char e = s[i + 1];
            i += 2;
            if (e == 'u') {
                long v;
                if (i < len && s[i] == '{') {
                    size_t j = i + 1;
                    v = 0;
                    int nd = 0;
                    while (j < len && hexval(s[j]) >= 0 && nd < 8) {
                        v = v * 16 + hexval(s[j]);
                        j++;
                        nd++;
                    }
                    if (j >= len || s[j] != '}' || nd == 0 || v > 0x10FFFF) {
                        *why = "a malformed \\u{...} escape";
                        return -1;
                    }
                    i = j + 1;
                } else {
                    v = hexn(s, len, &i, 4);
                    if (v < 0) {
                        *why = "a malformed \\u escape";
                        return -1;
                    }
                    if (v >= 0xD800 && v <= 0xDBFF && i + 6 <= len && s[i] == '\\' && s[i + 1] == 'u') {
                        size_t j = i + 2;
                        long lo = hexn(s, len, &j, 4);
                        if (lo >= 0xDC00 && lo <= 0xDFFF) {
                            v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
                            i = j;
                        }
                    }
                }
                cp = v;
            } else if (e == 'x') {
                long v = hexn(s, len, &i, 2);
                if (v < 0) {
                    *why = "a malformed \\x escape";
                    return -1;
                }
                cp = v;
            } else if (e == 'v') {
                cp = 0x0B;
            } else if (e == 'f') {
                cp = 0x0C;
            } else if (e == 'n') {
                cp = 0x0A;
            } else if (e == 'r') {
                cp = 0x0D;
            } else if (e == 't') {
                cp = 0x09;
            } else if (e == '0' && !(i < len && s[i] >= '0' && s[i] <= '9')) {
                cp = 0;
            } else if (e == 'c') {
                if (i >= len || !((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z'))) {
                    *why = "a malformed \\c escape";
                    return -1;
                }
                cp = s[i] % 32;
                i++;
            } else if (e == 's' || e == 'S') {
                if (in_class) {
                    if (e == 'S') {
                        *why = "\\S inside a character class";
                        return -1;
                    }
                    if (pend >= 0 || range) {
                        *why = "a class escape in a range";
                        return -1;
                    }
                    puts_(out, JS_SPACE_BODY);
                    continue;
                }
                puts_(out, e == 's' ? "[" : "[^");
                puts_(out, JS_SPACE_BODY);
                puts_(out, "]");
                continue;
            } else if (e == 'd' || e == 'D' || e == 'w' || e == 'W') {
                /* ASCII in both engines (PCRE2 without UCP, JavaScript without the i flag) */
                if (in_class && (e == 'D' || e == 'W')) {
                    *why = "a negated class escape inside a character class";
                    return -1;
                }
                if (in_class && (pend >= 0 || range)) {
                    /* flush a pending atom before a class escape */
                    if (range) {
                        *why = "a class escape in a range";
                        return -1;
                    }
                    if (!is_surrogate(pend)) put_cp(out, (uint32_t)pend);
                    pend = -1;
                }
                char t[3] = {'\\', e, 0};
                puts_(out, t);
                continue;
            } else if (e == 'b' || e == 'B') {
                if (in_class) {
                    if (e == 'B') {
                        *why = "\\B inside a character class";
                        return -1;
                    }
                    cp = 0x08; /* [\b] is backspace */
                } else {
                    char t[3] = {'\\', e, 0};
                    puts_(out, t);
                    continue;
                }
            } else if (e == 'k') {
                if (i >= len || s[i] != '<') {
                    *why = "a malformed \\k escape";
                    return -1;
                }
                size_t j = i + 1;
                while (j < len && s[j] != '>') j++;
                if (j >= len) {
                    *why = "a malformed \\k escape";
                    return -1;
                }
                long k = name_index(nm, s + i + 1, j - i - 1);
                if (k < 0) {
                    /* a forward reference: JavaScript allows it; keep it simple */
                    *why = "a backreference to a group defined later";
                    return -1;
                }
                char t[40];
                snprintf(t, sizeof t, "\\k<_%ld>", k);
                puts_(out, t);
                i = j + 1;
                continue;
            } else if (e == 'p' || e == 'P') {
                *why = "a Unicode property escape";
                return -1;
            } else if (e >= '1' && e <= '9') {
                if (in_class) {
                    *why = "a backreference inside a class";
                    return -1;
                }
                char t[3] = {'\\', e, 0};
                puts_(out, t);
                while (i < len && s[i] >= '0' && s[i] <= '9') {
                    put(out, s + i, 1);
                    i++;
                }
                continue;
            } else if (e == '0') {
                *why = "an octal escape";
                return -1;
            } else if ((unsigned char)e < 0x80 && strchr("^$\\.*+?()[]{}|/-", e)) {
                cp = (unsigned char)e;
            } else {
                *why = "an unknown escape";
                return -1;
            }
        } else if (in_class) {
            if (c == ']') {
                if (range) { /* "a-]": the '-' is literal */
                    if (!is_surrogate(pend)) put_cp(out, (uint32_t)pend);
                    puts_(out, "\\-");
                    pend = -1;
                    range = 0;
                } else if (pend >= 0) {
                    if (!is_surrogate(pend)) put_cp(out, (uint32_t)pend);
                    pend = -1;
                }
                puts_(out, "]");
                in_class = 0;
                i++;
                continue;
            }
            if (c == '-' && pend >= 0 && !range) {
                range = 1;
                i++;
                continue;
            }
            /* a literal code point */
            size_t j = i;
            int32_t v = cp_utf8_decode(s, len, &j, 0);
            if (v < 0) {
                *why = "ill-formed UTF-8";
                return -1;
            }
            cp = v;
            i = j;
        } else {
            if (c == '[') {
                puts_(out, "[");
                i++;
                if (i < len && s[i] == '^') {
                    puts_(out, "^");
                    i++;
                }
                in_class = 1;
                pend = -1;
                range = 0;
                continue;
            }
            if (c == ')' && n_drop && drop[n_drop - 1] == i) {
                n_drop--;
                i++;
                continue;
            }
            if (c == '(' && i + 6 < len && s[i + 1] == '?' && s[i + 2] == '<' && (s[i + 3] == '=' || s[i + 3] == '!') &&
                s[i + 4] == '(' && s[i + 5] == '?' && s[i + 6] == ':' && n_drop < sizeof drop / sizeof *drop) {
                size_t inner = js_group_end(s, len, i + 4), outer = js_group_end(s, len, i);
                if (inner && outer && inner + 1 == outer) {
                    put(out, s + i, 4);          /* (?<= or (?<! */
                    drop[n_drop++] = inner - 1;  /* the group's ')' */
                    i += 7;
                    continue;
                }
            }
            if (c == '(' && i + 2 < len && s[i + 1] == '?' && s[i + 2] == '<' && i + 3 < len && s[i + 3] != '=' &&
                s[i + 3] != '!') {
                size_t j = i + 3;
                while (j < len && s[j] != '>') j++;
                if (j >= len) {
                    *why = "a malformed group name";
                    return -1;
                }
                if (name_index(nm, s + i + 3, j - i - 3) >= 0) {
                    *why = "a duplicate group name";
                    return -1;
                }
                if (name_add(nm, s + i + 3, j - i - 3) < 0) {
                    out->oom = 1;
                    return 0;
                }
                char t[40];
                snprintf(t, sizeof t, "(?<_%zu>", nm->n - 1);
                puts_(out, t);
                i = j + 1;
                continue;
            }
            if (c >= 0x80) {
                size_t j = i;
                if (cp_utf8_decode(s, len, &j, 0) < 0) {
                    *why = "ill-formed UTF-8";
                    return -1;
                }
                put(out, s + i, j - i);
                i = j;
                continue;
            }
            if (c == '#' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
                put_cp(out, c);
                i++;
                continue;
            }
            put(out, s + i, 1);
            i++;
            continue;
        }
        /* a code point atom: outside a class, emit it; inside, range bookkeeping */
        if (!in_class) {
            if (is_surrogate(cp)) {
                puts_(out, "(?!)"); /* a lone surrogate never matches valid UTF-8 */
            } else {
                put_cp(out, (uint32_t)cp);
            }
            continue;
        }
        if (range) {
            long lo = pend, hi = cp;
            if (lo > hi) {
                *why = "a class range out of order";
                return -1;
            }
            /* clip the surrogates out of [lo, hi] */
            if (lo < 0xD800) {
                long h = hi < 0xD7FF ? hi : 0xD7FF;
                put_cp(out, (uint32_t)lo);
                if (h > lo) {
                    puts_(out, "-");
                    put_cp(out, (uint32_t)h);
                }
            }
            if (hi > 0xDFFF) {
                long l = lo > 0xE000 ? lo : 0xE000;
                put_cp(out, (uint32_t)l);
                if (hi > l) {
                    puts_(out, "-");
                    put_cp(out, (uint32_t)hi);
                }
            }
            pend = -1;
            range = 0;
        } else {
            if (pend >= 0 && !is_surrogate(pend)) put_cp(out, (uint32_t)pend);
            pend = cp;
        }
    }
    if (in_class) {
        *why = "an unterminated character class";
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ compile */

static cp_rx *compile_rewritten(const char *src, size_t len, const names *nm, const cp_value *groups,
                                const char *what, cp_error *err) {
    int ec = 0;
    PCRE2_SIZE eo = 0;
    /* (group numbering is JavaScript's: every capturing group counts, named or not) */
    uint32_t opts = PCRE2_UTF | PCRE2_DOTALL | PCRE2_DOLLAR_ENDONLY | PCRE2_ALLOW_EMPTY_CLASS;
    pcre2_code *code = pcre2_compile((PCRE2_SPTR)src, len, opts, &ec, &eo, NULL);
    if (!code) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(ec, msg, sizeof msg);
        cp_error_set(err, "ValueError", "%s cannot run in C: PCRE2 refuses its translation (%s at offset %zu)", what,
                    (const char *)msg, (size_t)eo);
        return NULL;
    }
    cp_rx *rx = calloc(1, sizeof *rx);
    if (!rx) goto oom;
    rx->code = code;
    pcre2_pattern_info(code, PCRE2_INFO_CAPTURECOUNT, &rx->capture_count);
    size_t ng = cp_object_len(groups);
    if (ng) {
        rx->group_num = calloc(ng, sizeof *rx->group_num);
        rx->group_py = calloc(ng, sizeof *rx->group_py);
        rx->group_py_len = calloc(ng, sizeof *rx->group_py_len);
        if (!rx->group_num || !rx->group_py || !rx->group_py_len) goto oom;
    }
    for (size_t k = 0; k < ng; k++) {
        const cp_member *mb = cp_object_at(groups, k);
        size_t pl = 0;
        const char *py = cp_string_bytes(mb->value, &pl);
        long idx = name_index(nm, mb->key, mb->key_len);
        if (!py || idx < 0) {
            cp_error_set(err, "ValueError", "%s cannot run in C: its translation maps a group it does not have", what);
            cp_rx_free(rx);
            return NULL;
        }
        char pname[40];
        snprintf(pname, sizeof pname, "_%ld", idx);
        int num = pcre2_substring_number_from_name(code, (PCRE2_SPTR)pname);
        if (num < 0) {
            cp_error_set(err, "ValueError", "%s cannot run in C: group %ld not found", what, idx);
            cp_rx_free(rx);
            return NULL;
        }
        rx->group_py[k] = malloc(pl + 1);
        if (!rx->group_py[k]) goto oom;
        memcpy(rx->group_py[k], py, pl);
        rx->group_py[k][pl] = 0;
        rx->group_py_len[k] = pl;
        rx->group_num[k] = (uint32_t)num;
        rx->n_groups = k + 1;
        int seen = 0;
        for (size_t q = 0; q < k; q++)
            if (rx->group_py_len[q] == pl && memcmp(rx->group_py[q], py, pl) == 0) seen = 1;
        if (!seen) rx->n_names++;
    }
    return rx;
oom:
    if (rx) cp_rx_free(rx);
    else pcre2_code_free(code);
    cp_error_set(err, "MemoryError", "out of memory compiling %s", what);
    return NULL;
}

cp_rx *cp_rx_compile(const cp_value *t, const char *what, cp_error *err) {
    if (cp_type_of(t) != CP_OBJECT) {
        cp_error_set(err, "ValueError", "%s cannot run in C: the table file has no translation of it (written with js=False)",
                    what);
        return NULL;
    }
    const cp_value *e = cp_object_get_cstr(t, "error");
    if (e) {
        size_t el = 0;
        const char *es = cp_string_bytes(e, &el);
        cp_error_set(err, "ValueError", "%s cannot run in C: %.*s", what, (int)(es ? el : 0), es ? es : "");
        return NULL;
    }
    size_t sl = 0;
    const char *src = cp_string_bytes(cp_object_get_cstr(t, "source"), &sl);
    const cp_value *groups = cp_object_get_cstr(t, "groups");
    if (!src) {
        cp_error_set(err, "ValueError", "%s cannot run in C: its translation has no source", what);
        return NULL;
    }
    buf out = {0};
    names nm = {0};
    const char *why = NULL;
    int r = rewrite(src, sl, &out, &nm, &why);
    cp_rx *rx = NULL;
    if (r < 0) {
        cp_error_set(err, "ValueError", "%s cannot run in C: its translation has %s", what, why);
    } else if (out.oom) {
        cp_error_set(err, "MemoryError", "out of memory compiling %s", what);
    } else {
        rx = compile_rewritten(out.p ? out.p : "", out.len, &nm, groups, what, err);
    }
    free(out.p);
    names_free(&nm);
    return rx;
}

cp_rx *cp_rx_compile_source(const char *js_source, size_t len, const char *what, cp_error *err) {
    buf out = {0};
    names nm = {0};
    const char *why = NULL;
    cp_rx *rx = NULL;
    if (rewrite(js_source, len, &out, &nm, &why) < 0)
        cp_error_set(err, "ValueError", "%s cannot run in C: its translation has %s", what, why);
    else if (out.oom)
        cp_error_set(err, "MemoryError", "out of memory compiling %s", what);
    else
        rx = compile_rewritten(out.p ? out.p : "", out.len, &nm, NULL, what, err);
    free(out.p);
    names_free(&nm);
    return rx;
}

void cp_rx_free(cp_rx *rx) {
    if (!rx) return;
    pcre2_code_free(rx->code);
    if (rx->group_py)
        for (size_t k = 0; k < rx->n_groups; k++) free(rx->group_py[k]);
    free(rx->group_py);
    free(rx->group_py_len);
    free(rx->group_num);
    free(rx);
}

size_t cp_rx_name_count(const cp_rx *rx) { return rx ? rx->n_names : 0; }

/* ------------------------------------------------------------------ match */

void cp_rx_match_init(cp_rx_match *m) { memset(m, 0, sizeof *m); }

void cp_rx_match_fini(cp_rx_match *m) {
    free(m->ov);
    memset(m, 0, sizeof *m);
}

int cp_rx_exec(const cp_rx *rx, const char *subject, size_t len, size_t start, unsigned flags, cp_rx_match *m,
               cp_error *err) {
    if (start > len) return 0;
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(rx->code, NULL);
    if (!md) {
        cp_error_set(err, "MemoryError", "out of memory matching a pattern");
        return -1;
    }
    uint32_t o = PCRE2_NO_UTF_CHECK;
    if (flags & CP_RX_ANCHORED) o |= PCRE2_ANCHORED;
    if (flags & CP_RX_END_ANCHORED) o |= PCRE2_ENDANCHORED;
    if (flags & CP_RX_NOTEMPTY_AT) o |= PCRE2_NOTEMPTY_ATSTART;
    if (flags & CP_RX_NOTBOL) o |= PCRE2_NOTBOL;
    int rc = pcre2_match(rx->code, (PCRE2_SPTR)subject, len, start, o, md, NULL);
    if (rc == PCRE2_ERROR_NOMATCH) {
        pcre2_match_data_free(md);
        return 0;
    }
    if (rc < 0) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(rc, msg, sizeof msg);
        pcre2_match_data_free(md);
        cp_error_set(err, "RuntimeError", "chatparse: a pattern could not be matched (PCRE2: %s)", (const char *)msg);
        return -1;
    }
    size_t pairs = (size_t)rx->capture_count + 1;
    if (m->ov_cap < pairs) {
        size_t *ov = realloc(m->ov, pairs * 2 * sizeof *ov);
        if (!ov) {
            pcre2_match_data_free(md);
            cp_error_set(err, "MemoryError", "out of memory matching a pattern");
            return -1;
        }
        m->ov = ov;
        m->ov_cap = pairs;
    }
    PCRE2_SIZE *v = pcre2_get_ovector_pointer(md);
    uint32_t nv = pcre2_get_ovector_count(md);
    for (size_t k = 0; k < pairs; k++) {
        if (k < nv && (size_t)rc > k && v[2 * k] != PCRE2_UNSET) {
            m->ov[2 * k] = v[2 * k];
            m->ov[2 * k + 1] = v[2 * k + 1];
        } else {
            m->ov[2 * k] = m->ov[2 * k + 1] = CP_RX_UNSET;
        }
    }
    m->n_groups = pairs;
    m->start = v[0];
    m->end = v[1];
    pcre2_match_data_free(md);
    return 1;
}

cp_value *cp_rx_groupdict(const cp_rx *rx, const char *subject, const cp_rx_match *m, int skip_null) {
    cp_value *out = cp_object();
    if (!out) return NULL;
    for (size_t k = 0; k < rx->n_groups; k++) {
        uint32_t g = rx->group_num[k];
        const char *py = rx->group_py[k];
        size_t pl = rx->group_py_len[k];
        if (g < m->n_groups && m->ov[2 * g] != CP_RX_UNSET) {
            size_t a = m->ov[2 * g], b = m->ov[2 * g + 1];
            if (cp_object_set(out, py, pl, cp_string(subject + a, b > a ? b - a : 0)) < 0) goto oom;
        } else if (!cp_object_get(out, py, pl)) {
            if (cp_object_set(out, py, pl, cp_null()) < 0) goto oom;
        }
    }
    if (skip_null) {
        /* the full groupdict first (key order as it gives it), then without the nulls */
        cp_value *kept = cp_object();
        if (!kept) goto oom;
        for (size_t k = 0; k < cp_object_len(out); k++) {
            const cp_member *mb = cp_object_at(out, k);
            if (cp_type_of(mb->value) == CP_NULL) continue;
            if (cp_object_set(kept, mb->key, mb->key_len, cp_value_copy(mb->value)) < 0) {
                cp_value_free(kept);
                goto oom;
            }
        }
        cp_value_free(out);
        out = kept;
    }
    return out;
oom:
    cp_value_free(out);
    return NULL;
}

/* The span of Python group `name` in m (the last alias that took part): 1, 0 (did not take part), -1 (no
 * such group). */
int cp_rx_group_span(const cp_rx *rx, const cp_rx_match *m, const char *name, size_t *s, size_t *e) {
    int found = -1;
    size_t nl = strlen(name);
    for (size_t k = 0; k < rx->n_groups; k++) {
        if (rx->group_py_len[k] != nl || memcmp(rx->group_py[k], name, nl) != 0) continue;
        if (found < 0) found = 0;
        uint32_t g = rx->group_num[k];
        if (g < m->n_groups && m->ov[2 * g] != CP_RX_UNSET) {
            *s = m->ov[2 * g];
            *e = m->ov[2 * g + 1];
            found = 1;
        }
    }
    return found;
}

int cp_rx_finditer(const cp_rx *rx, const char *subject, size_t len, cp_rx_match *m, cp_rx_each_fn fn, void *ctx,
                   cp_error *err) {
    size_t pos = 0;
    int must_advance = 0;
    for (;;) {
        int r = 0;
        if (must_advance) {
            r = cp_rx_exec(rx, subject, len, pos, CP_RX_ANCHORED | CP_RX_NOTEMPTY_AT, m, err);
            if (r < 0) return -1;
            if (r == 0) {
                if (pos >= len) return 0;
                pos++;
                while (pos < len && ((unsigned char)subject[pos] & 0xC0) == 0x80) pos++;
            }
        }
        if (r == 0) {
            r = cp_rx_exec(rx, subject, len, pos, 0, m, err);
            if (r < 0) return -1;
            if (r == 0) return 0;
        }
        int stop = fn(ctx, m);
        if (stop) return stop;
        must_advance = m->end == m->start;
        pos = m->end;
    }
}
