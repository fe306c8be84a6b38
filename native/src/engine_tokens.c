/*
 * engine_tokens.c - the token mode: ids in (FORMAT.md section 8; the twin of
 * chatparse/runtime/tokens/ and of the JavaScript TokenVocab, TokenDecoder,
 * tokenBinding, TokenParser and parseTokens).
 *
 * Token ids are decoded incrementally exactly as the tokenizer's decode
 * (FORMAT.md 8.2: skipped tokens, TEXT tokens, byte-level BPE bytes with one
 * U+FFFD per maximal invalid subpart, ByteFallback runs, Metaspace first-token
 * texts, strip_start, transformers' clean-up streamed), and the decoded text
 * of each feed goes to the character engine (cp_stream): the events of a feed
 * of ids are the events of its decoded text, which is what Python's token
 * parser guarantees. The fast path (cp_tok_stream_feed_fast) hands out the
 * same events without the character engine for a token of its own text that
 * cannot decide a delimiter: from a quiet scanner, by the shared engine's
 * per-mode token table (cp_eng_token_classes: its attempts all die inside
 * it), else by stepping its characters on the DFA alone over the live
 * match-free attempts (cp_scanner_push_undecided), committed only when
 * nothing can be decided.
 */
#if defined(__linux__) && !defined(_DEFAULT_SOURCE)
#define _DEFAULT_SOURCE /* (madvise) */
#endif
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "buf.h"
#include "engine.h"
#include "error.h"
#include "tables.h"

/* ------------------------------------------------------------------ UTF-8 with replacement */

/* Python's codecs.utf_8_decode(data, "replace", final) appended to out: returns the bytes consumed (unless
 * final, a valid but incomplete sequence at the end is left). */
static size_t utf8_replace(const unsigned char *d, size_t n, int final, cp_buf *out) {
    size_t i = 0, run = 0;
    while (i < n) {
        unsigned b = d[i];
        if (b < 0x80) {
            i++;
            continue;
        }
        unsigned need = 0, lo = 0x80, hi = 0xBF;
        if (b >= 0xC2 && b <= 0xDF) need = 1;
        else if (b == 0xE0) need = 2, lo = 0xA0;
        else if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) need = 2;
        else if (b == 0xED) need = 2, hi = 0x9F;
        else if (b == 0xF0) need = 3, lo = 0x90;
        else if (b >= 0xF1 && b <= 0xF3) need = 3;
        else if (b == 0xF4) need = 3, hi = 0x8F;
        size_t k = 0;
        if (need && i + 1 < n && d[i + 1] >= lo && d[i + 1] <= hi) {
            k = 1;
            while (k < need && i + 1 + k < n && d[i + 1 + k] >= 0x80 && d[i + 1 + k] <= 0xBF) k++;
        }
        if (need && k == need) {
            i += 1 + k;
            continue;
        }
        if (need && i + 1 + k == n && !final) break; /* an incomplete character at the end: held */
        cp_buf_append(out, d + run, i - run);
        cp_buf_append(out, "\xEF\xBF\xBD", 3);
        i += 1 + k;
        run = i;
    }
    cp_buf_append(out, d + run, i - run);
    return i;
}

/* ------------------------------------------------------------------ clean-up (transformers' clean_up_tokenization, streamed) */

static const char *const CLEANUP_OLD[] = {" .", " ?", " !", " ,", " ' ", " n't", " 'm", " 's", " 've", " 're"};
static const char *const CLEANUP_NEW[] = {".", "?", "!", ",", "'", "n't", "'m", "'s", "'ve", "'re"};
#define N_CLEANUP 10

/* One stage: buf (held + text) with every `old` replaced; keeps back what could still begin `old`. */
static void cleanup_stage(cp_buf *held, const char *old, const char *rep, const char *text, size_t n, int final,
                          cp_buf *out) {
    cp_buf b = {0};
    cp_buf_append(&b, held->data ? held->data : "", held->len);
    cp_buf_append(&b, text, n);
    held->len = 0;
    size_t ol = strlen(old), rl = strlen(rep);
    const char *s = b.data ? b.data : "";
    size_t len = b.len, pos = 0;
    for (;;) {
        const char *j = NULL;
        if (len >= ol)
            for (size_t q = pos; q + ol <= len; q++)
                if (memcmp(s + q, old, ol) == 0) {
                    j = s + q;
                    break;
                }
        if (!j) break;
        cp_buf_append(out, s + pos, (size_t)(j - s) - pos);
        cp_buf_append(out, rep, rl);
        pos = (size_t)(j - s) + ol;
    }
    if (final) {
        cp_buf_append(out, s + pos, len - pos);
    } else {
        size_t back = len; /* len(old) - 1 code points from the end */
        for (size_t c = 0; c + 1 < ol && back > 0; c++) {
            back--;
            while (back > 0 && ((unsigned char)s[back] & 0xC0) == 0x80) back--;
        }
        size_t cut = pos > back ? pos : back;
        cp_buf_append(out, s + pos, cut - pos);
        cp_buf_append(held, s + cut, len - cut);
    }
    cp_buf_free(&b);
}

/* ------------------------------------------------------------------ the decoder */

struct cp_tok_decoder {
    const cp_token_section *v;
    int bytes_kind;
    unsigned char held[8];
    size_t n_held;
    cp_buf run;             /* pieces: a pending ByteFallback run */
    int first;
    int64_t strip_left;
    int cleanup;
    cp_buf cheld[N_CLEANUP];
};

static int has_first(const cp_token_section *v, uint32_t id, const char **s, size_t *n) {
    size_t lo = 0, hi = v->n_first;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v->first_ids[mid] < id) lo = mid + 1;
        else hi = mid;
    }
    if (lo < v->n_first && v->first_ids[lo] == id) {
        *s = (const char *)v->first_bytes + v->first_offsets[lo];
        *n = v->first_offsets[lo + 1] - v->first_offsets[lo];
        return 1;
    }
    return 0;
}

cp_tok_decoder *cp_tok_decoder_new(const cp_token_section *v) {
    cp_tok_decoder *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    d->v = v;
    d->bytes_kind = !v->kind_pieces;
    d->first = v->n_first > 0;
    d->strip_left = v->strip_start;
    d->cleanup = v->cleanup;
    return d;
}

void cp_tok_decoder_free(cp_tok_decoder *d) {
    if (!d) return;
    cp_buf_free(&d->run);
    for (int k = 0; k < N_CLEANUP; k++) cp_buf_free(&d->cheld[k]);
    free(d);
}

int cp_tok_decoder_holds(const cp_tok_decoder *d) { return d->n_held || d->run.len; }

static void flush_run(cp_tok_decoder *d, cp_buf *out) {
    const char *r = d->run.data ? d->run.data : "";
    if (cp_utf8_first_invalid(r, d->run.len) == (size_t)-1) cp_buf_append(out, r, d->run.len);
    else
        for (size_t k = 0; k < d->run.len; k++) cp_buf_append(out, "\xEF\xBF\xBD", 3);
    d->run.len = 0;
}

static void post(cp_tok_decoder *d, cp_buf *text, int final, cp_buf *out) {
    const char *s = text->data ? text->data : "";
    size_t n = text->len, at = 0;
    if (d->strip_left && n) {
        char c[4];
        int cl = cp_utf8_encode(d->v->strip_char, c);
        int64_t k = 0;
        while (k < d->strip_left && at + (size_t)cl <= n && memcmp(s + at, c, (size_t)cl) == 0) {
            k++;
            at += (size_t)cl;
        }
        if (at < n) d->strip_left = 0;
        else d->strip_left -= k;
    }
    if (!d->cleanup) {
        cp_buf_append(out, s + at, n - at);
        return;
    }
    cp_buf cur = {0};
    cp_buf_append(&cur, s + at, n - at);
    for (int k = 0; k < N_CLEANUP; k++) {
        cp_buf next = {0};
        cleanup_stage(&d->cheld[k], CLEANUP_OLD[k], CLEANUP_NEW[k], cur.data ? cur.data : "", cur.len, final, &next);
        cp_buf_free(&cur);
        cur = next;
    }
    cp_buf_append(out, cur.data ? cur.data : "", cur.len);
    cp_buf_free(&cur);
}

/* The text ids[0..n) complete (ids in range), appended to out. */
static void decode_ids(cp_tok_decoder *d, const int64_t *ids, size_t n, int final, cp_buf *out) {
    const cp_token_section *v = d->v;
    cp_buf raw = {0};
    for (size_t k = 0; k < n; k++) {
        uint32_t i = (uint32_t)ids[k];
        uint8_t f = v->flags[i];
        const char *b = (const char *)v->bytes + v->offsets[i];
        size_t bl = v->offsets[i + 1] - v->offsets[i];
        if (d->bytes_kind) {
            if (f & CP_TOKEN_SKIP) continue;
            if (!d->n_held && (f & CP_TOKEN_TEXT)) {
                cp_buf_append(&raw, b, bl);
                continue;
            }
            if (!bl) continue;
            /* held bytes (at most 3) and this token's */
            cp_buf data = {0};
            cp_buf_append(&data, d->held, d->n_held);
            cp_buf_append(&data, b, bl);
            size_t used = utf8_replace((const unsigned char *)(data.data ? data.data : ""), data.len, 0, &raw);
            d->n_held = data.len - used;
            if (d->n_held > sizeof d->held) d->n_held = sizeof d->held; /* (never: an incomplete sequence is < 4 bytes) */
            memcpy(d->held, data.data + used, d->n_held);
            cp_buf_free(&data);
        } else {
            if (f & CP_TOKEN_SKIP) continue;
            if (f & CP_TOKEN_BYTE) {
                cp_buf_append(&d->run, b, bl);
                d->first = 0;
                continue;
            }
            if (d->run.len) flush_run(d, &raw);
            const char *s = b;
            size_t sl = bl;
            if (d->first) {
                d->first = 0;
                has_first(v, i, &s, &sl);
            }
            cp_buf_append(&raw, s, sl);
        }
    }
    if (final) {
        if (d->bytes_kind && d->n_held) {
            utf8_replace(d->held, d->n_held, 1, &raw);
            d->n_held = 0;
        }
        if (!d->bytes_kind && d->run.len) flush_run(d, &raw);
    }
    post(d, &raw, final, out);
    cp_buf_free(&raw);
}

int cp_tok_check_ids(const cp_token_section *v, const int64_t *ids, size_t n, cp_error *err) {
    if (!n) return 0;
    int64_t lo = ids[0], hi = ids[0];
    for (size_t k = 1; k < n; k++) {
        if (ids[k] < lo) lo = ids[k];
        if (ids[k] > hi) hi = ids[k];
    }
    if (lo < 0 || hi >= (int64_t)v->size) {
        cp_error_set(err, "ValueError", "token id %lld is out of range for this tokenizer (valid ids: 0..%zu)",
                     (long long)(lo < 0 ? lo : hi), v->size - 1);
        return -1;
    }
    return 0;
}

int cp_tok_decode(cp_tok_decoder *d, const int64_t *ids, size_t n, int final, cp_buf *out, cp_error *err) {
    if (cp_tok_check_ids(d->v, ids, n, err) < 0) return -1;
    decode_ids(d, ids, n, final, out);
    if (out->failed) {
        cp_error_oom(err);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ binding checks */

/* The pattern index when `text`, fed alone to a quiet scanner in mode m (not at offset 0), is decided as exactly
 * one whole delimiter; else -1. */
static long whole_delimiter(const cp_eng *eng, size_t m, const char *text, size_t n) {
    cp_scanner sc;
    cp_scanner_init(&sc, eng);
    cp_error e = {0};
    long out = -1;
    if (cp_scanner_push(&sc, "\0", 1, &e) == 0) {
        cp_scanner_restart(&sc, m, 1);
        if (cp_scanner_push(&sc, text, n, &e) == 0) {
            cp_decision d = {0};
            int r = cp_scanner_decide(&sc, 0, &d, &e);
            if (r == 1 && d.s == 1 && d.e == 1 + n) out = d.pattern;
            if (r == 1) cp_value_free(d.captures);
        }
    }
    cp_scanner_fini(&sc);
    return out;
}

int cp_tok_binding_check(const cp_eng *eng, const cp_tables *t, cp_error *err) {
    if (!t->has_tokens) {
        cp_error_set(err, "ValueError",
                     "this compiled template carries no token tables: bind it to a tokenizer with "
                     "chatparse.bind(template, tokenizer), or load a table file written with token tables "
                     "(`chatparse compile DIR` with a tokenizer.json)");
        return -1;
    }
    const cp_token_section *v = &t->tokens;
    size_t n_modes = t->n_modes;
    for (size_t r = 0; r < v->n_delims; r++) {
        uint32_t m = v->delims[3 * r], i = v->delims[3 * r + 1], pi = v->delims[3 * r + 2];
        if (m >= n_modes || i >= v->size) {
            cp_error_set(err, "ValueError", "chatparse table file: token section: whole-delimiter entry (%u, %u) out of range",
                         m, i);
            return -1;
        }
        int exact = 1;
        for (size_t w = 0; w < t->modes[m].n_watched; w++)
            if (!t->patterns[t->modes[m].watched[w]].exact) exact = 0;
        if (cp_type_of(t->modes[m].first) == CP_NULL || !exact) {
            cp_error_set(err, "ValueError", "chatparse table file: token section: mode %u cannot have whole-delimiter tokens", m);
            return -1;
        }
        size_t bl = v->offsets[i + 1] - v->offsets[i];
        long d = -1;
        if ((v->flags[i] & CP_TOKEN_TEXT) && !(v->flags[i] & CP_TOKEN_SKIP) && bl)
            d = whole_delimiter(eng, m, (const char *)v->bytes + v->offsets[i], bl);
        if (d < 0 || (uint32_t)d != pi) {
            cp_error_set(err, "ValueError",
                         "chatparse table file: token section: token %u is not a whole delimiter (pattern %u) in mode %u", i,
                         pi, m);
            return -1;
        }
    }
    for (size_t m = 0; m < n_modes; m++) {
        if (cp_type_of(t->modes[m].first) != CP_NULL) continue;
        for (size_t i = 0; i < v->size; i++)
            if (v->inert[m * v->size + i]) {
                cp_error_set(err, "ValueError",
                             "chatparse table file: token section: mode %zu has no prefilter, so no token can be inert in it", m);
                return -1;
            }
    }
    return 0;
}

/* ------------------------------------------------------------------ the token parser */

struct cp_tok_stream {
    const cp_eng *eng;
    cp_stream *stream;
    cp_tok_decoder *dec;
    const cp_token_section *v;
    /* the last feed was one settling token in this mode, its text ending at settled_at (-1: not so) */
    int settled_mode;
    size_t settled_at;
};

static const char TOKENS_PREFIX_REQUIRED[] =
    "`TokenParser`/`parse_tokens` requires `prefix` or `prefix_ids` (the chat prompt sent to the model before "
    "generation), because chat templates often pre-write part of the assistant message (e.g. an opening "
    "`<think>` tag) that the parser must see to parse the output correctly. If the generation already contains "
    "the complete message, pass `prefix=\"\"` or `prefix_ids=[]` to opt out explicitly.";

/* The prompt as text: `prefix` (text), or the decode of `prefix_ids` (n ids) when prefix is NULL and ids given. */
static int prompt_text(const cp_token_section *v, const char *prefix, size_t prefix_len, const int64_t *prefix_ids,
                       size_t n_ids, int has_ids, cp_buf *out, cp_error *err) {
    if (has_ids) {
        if (prefix) {
            cp_error_set(err, "ValueError", "pass either `prefix` (text) or `prefix_ids` (token ids), not both");
            return -1;
        }
        cp_tok_decoder *d = cp_tok_decoder_new(v);
        if (!d) {
            cp_error_oom(err);
            return -1;
        }
        int r = cp_tok_decode(d, prefix_ids, n_ids, 1, out, err);
        cp_tok_decoder_free(d);
        return r;
    }
    if (!prefix) {
        cp_error_set(err, "ValueError", "%s", TOKENS_PREFIX_REQUIRED);
        return -1;
    }
    cp_buf_append(out, prefix, prefix_len);
    return 0;
}

cp_tok_stream *cp_tok_stream_new(const cp_eng *eng, const cp_tables *t, const char *prefix, size_t prefix_len,
                                 const int64_t *prefix_ids, size_t n_ids, int has_ids, const cp_value *tools,
                                 const cp_dialect_opts *dialect, cp_error *err) {
    if (cp_tok_binding_check(eng, t, err) < 0) return NULL;
    cp_buf text = {0};
    if (prompt_text(&t->tokens, prefix, prefix_len, prefix_ids, n_ids, has_ids, &text, err) < 0) {
        cp_buf_free(&text);
        return NULL;
    }
    cp_tok_stream *p = calloc(1, sizeof *p);
    if (!p) {
        cp_buf_free(&text);
        cp_error_oom(err);
        return NULL;
    }
    p->v = &t->tokens;
    p->eng = eng;
    p->settled_mode = -1;
    p->stream = cp_stream_new(eng, text.data ? text.data : "", text.len, tools, dialect, err);
    cp_buf_free(&text);
    p->dec = p->stream ? cp_tok_decoder_new(&t->tokens) : NULL;
    if (!p->dec) {
        if (p->stream) cp_error_oom(err);
        cp_tok_stream_free(p);
        return NULL;
    }
    return p;
}

void cp_tok_stream_free(cp_tok_stream *p) {
    if (!p) return;
    cp_stream_free(p->stream);
    cp_tok_decoder_free(p->dec);
    free(p);
}

cp_stream *cp_tok_stream_core(cp_tok_stream *p) { return p->stream; }

int cp_tok_stream_holds(const cp_tok_stream *p) { return cp_tok_decoder_holds(p->dec); }

static int decoder_clean(const cp_tok_decoder *d) {
    return !d->n_held && !d->run.len && !d->first && !d->strip_left && !d->cleanup;
}

/* 1 when `s` (n bytes of valid UTF-8), fed to a quiet scanner in mode m at an offset > 0, leaves it quiet with
 * nothing recorded (cp_scanner_push_undecided's steps from no attempt, with nothing live at the end). */
static int settles(const cp_eng *eng, const cp_eng_mode *m, const unsigned char *s, size_t n) {
    uint32_t st[CP_UNDECIDED_LIVE];
    size_t at[CP_UNDECIDED_LIVE], nl = 0;
    return m->can_start && cp_undecided_steps(eng, m, s, n, 1, st, at, &nl) && nl == 0;
}

/* n zeroed bytes (free() frees them) for a table read at random, one entry per token id: its whole 2 MB
 * pages on huge pages where the system has them (Linux transparent huge pages, asked for with madvise), so
 * that a token first met costs one cache miss and no page walk (a 131k-token table spans 512 small pages). */
static void *table_alloc(size_t n) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const size_t huge = (size_t)2 << 20;
    if (n >= huge) {
        void *t = aligned_alloc(huge, (n + huge - 1) / huge * huge);
        if (t) {
            madvise(t, n / huge * huge, MADV_HUGEPAGE); /* (advice: a refusal changes nothing) */
            memset(t, 0, n);
        }
        return t;
    }
#endif
    return calloc(1, n);
}

int cp_eng_token_classes(cp_eng *eng, const cp_tables *t, cp_error *err) {
    if (!t->has_tokens || eng->tok_settles) return 0;
    const cp_token_section *v = &t->tokens;
    uint8_t *tab = calloc(eng->n_modes * v->size + 1, 1);
    if (!tab) {
        cp_error_oom(err);
        return -1;
    }
    for (size_t m = 0; m < eng->n_modes; m++) {
        const cp_eng_mode *mode = &eng->modes[m];
        if (!mode->can_start) continue;
        for (size_t i = 0; i < v->size; i++) {
            size_t bl = v->offsets[i + 1] - v->offsets[i];
            if (!(v->flags[i] & CP_TOKEN_TEXT) || !bl) continue;
            tab[m * v->size + i] = (uint8_t)settles(eng, mode, v->bytes + v->offsets[i], bl);
        }
    }
    eng->tok_settles = tab;
    eng->tok_size = v->size;
    if (eng->n_modes <= 8) {
        struct cp_tok_info *info = table_alloc((v->size ? v->size : 1) * sizeof *info);
        if (!info) {
            cp_error_oom(err);
            return -1;
        }
        for (size_t i = 0; i < v->size; i++) {
            size_t bl = v->offsets[i + 1] - v->offsets[i];
            const unsigned char *b = v->bytes + v->offsets[i];
            size_t cps = 0;
            for (size_t k = 0; k < bl; k++) cps += (b[k] & 0xC0) != 0x80;
            int ok = (v->flags[i] & CP_TOKEN_TEXT) && bl && bl < 65536 && cps < 256;
            info[i].off = v->offsets[i];
            info[i].len = (uint16_t)(bl < 65536 ? bl : 0);
            info[i].cps = (uint8_t)(ok ? cps : 0);
            if (bl <= sizeof info[i].inl) memcpy(info[i].inl, b, bl);
            for (size_t m = 0; m < eng->n_modes; m++)
                if (tab[m * v->size + i]) info[i].settles |= (uint8_t)(1u << m);
        }
        eng->tok_info = info;
    }
    return 0;
}

/* One token id when the decoder holds the bytes of a split character or the token is bytes of one (a byte-level
 * vocabulary, nothing else pending in the decoder): what decode_ids would hand out, decoded into `scratch`, fed
 * to the stream as text that cannot decide a delimiter; the decoder's held bytes are updated only when that
 * applied. Returns as cp_tok_stream_feed_fast. */
static int feed_bytes(cp_tok_stream *p, uint32_t id, const struct cp_tok_info *tp, cp_buf *scratch, const char **out,
                      size_t *out_len, long *field, cp_error *err) {
    cp_tok_decoder *d = p->dec;
    const cp_token_section *v = p->v;
    if (!d->bytes_kind || d->run.len || d->first || d->strip_left || d->cleanup) return 0;
    size_t bl = tp->len;
    unsigned char data[64];
    if (v->flags[id] & CP_TOKEN_SKIP || d->n_held + bl > sizeof data) return 0;
    if (!bl && v->offsets[id + 1] != v->offsets[id]) return 0; /* (a token of 64 kB and more) */
    const void *b = bl <= sizeof tp->inl ? (const void *)tp->inl : (const void *)(v->bytes + tp->off);
    memcpy(data, d->held, d->n_held);
    memcpy(data + d->n_held, b, bl);
    size_t n = d->n_held + bl;
    scratch->len = 0;
    size_t used = utf8_replace(data, n, 0, scratch);
    if (scratch->failed) {
        cp_error_oom(err);
        return -1;
    }
    if (n - used > sizeof d->held) return 0; /* (never: an incomplete sequence is < 4 bytes) */
    *out_len = 0;
    *field = -1;
    if (scratch->len) {
        /* (scratch holds at least 64 bytes once used: 8 readable) */
        long r = cp_stream_feed_undecided(p->stream, scratch->data, scratch->len, 0, out, out_len, err);
        if (r == -2) return -1;
        if (r < 0) return 0;
        *field = r;
    } else if (cp_stream_check_usable(p->stream, err) < 0) {
        return -1;
    }
    p->settled_mode = -1;
    d->n_held = n - used;
    memcpy(d->held, data + used, d->n_held);
    return 1;
}

/* One token id of its own complete text (a packed record of the shared engine). */
static int feed_one(cp_tok_stream *p, const struct cp_tok_info *tp, const char **out, size_t *out_len, long *field,
                    cp_error *err) {
    const size_t len = tp->len;
    const char *text = len <= sizeof tp->inl ? tp->inl : (const char *)p->v->bytes + tp->off;
    long f = -1;
    if (p->settled_mode >= 0 && ((tp->settles >> p->settled_mode) & 1)) {
        /* the steady state: the last feed left the parser where this token's text is region text */
        f = cp_stream_feed_settled_again(p->stream, p->settled_at, text, len, tp->cps, out, out_len, err);
        if (f >= 0) {
            p->settled_at += len;
            *field = f;
            return 1;
        }
        if (f == -2) return -1;
    }
    p->settled_mode = -1;
    size_t mode = 0, at = 0;
    f = cp_stream_feed_token(p->stream, text, len, tp->cps, tp->settles, &mode, &at, out, out_len, err);
    if (f >= 0 && at != (size_t)-1) {
        /* the next token that settles takes the steady state */
        p->settled_mode = (int)mode;
        p->settled_at = at;
    }
    if (f == -2) return -1;
    if (f < 0) return 0;
    *field = f;
    return 1;
}

int cp_tok_stream_feed_fast(cp_tok_stream *p, const int64_t *ids, size_t n, cp_buf *scratch, const char **out,
                            size_t *out_len, long *field, cp_error *err) {
    const cp_token_section *v = p->v;
    const struct cp_tok_info *ti = p->eng->tok_info;
    if (n == 1 && ti && p->eng->tok_size == v->size) {
        /* one token, from the shared engine's packed table */
        if (ids[0] < 0 || ids[0] >= (int64_t)v->size) return 0;
        const struct cp_tok_info *tp = &ti[ids[0]];
        if (tp->cps && decoder_clean(p->dec)) return feed_one(p, tp, out, out_len, field, err);
        if (!tp->cps || p->dec->n_held) return feed_bytes(p, (uint32_t)ids[0], tp, scratch, out, out_len, field, err);
        return 0;
    }
    if (!n || !decoder_clean(p->dec)) return 0;
    /* (the file's inert flags are not needed here: stepping a token's few characters on the DFA, where nothing
     * can start, costs less than finding its mode's row) */
    for (size_t k = 0; k < n; k++) {
        if (ids[k] < 0 || ids[k] >= (int64_t)v->size) return 0;
        uint32_t i = (uint32_t)ids[k];
        if (!(v->flags[i] & CP_TOKEN_TEXT) || v->offsets[i + 1] == v->offsets[i]) return 0;
    }
    scratch->len = 0;
    for (size_t k = 0; k < n; k++) {
        uint32_t i = (uint32_t)ids[k];
        cp_buf_append(scratch, (const char *)v->bytes + v->offsets[i], v->offsets[i + 1] - v->offsets[i]);
    }
    cp_buf_append(scratch, "\0\0\0\0\0\0\0\0", 8); /* (8 readable bytes past a short text) */
    if (scratch->failed) {
        cp_error_oom(err);
        return -1;
    }
    scratch->len -= 8;
    const char *text = scratch->data;
    size_t len = scratch->len;
    p->settled_mode = -1;
    /* one token that settles from quiet in this mode (the shared engine's table): nothing to step when quiet */
    int known = n == 1 && p->eng->tok_settles && p->eng->tok_size == v->size &&
                p->eng->tok_settles[cp_stream_mode(p->stream) * v->size + (size_t)ids[0]];
    long f = known ? cp_stream_feed_settled(p->stream, text, len, cp_rx_cp_count(text, 0, len), out, out_len, err) : -1;
    if (f == -1) f = cp_stream_feed_undecided(p->stream, text, len, known, out, out_len, err);
    if (f == -2) return -1;
    if (f < 0) return 0;
    *field = f;
    return 1;
}

cp_value *cp_tok_stream_feed(cp_tok_stream *p, const int64_t *ids, size_t n, cp_error *err) {
    if (cp_stream_check_usable(p->stream, err) < 0) return NULL;
    {
        cp_buf scratch = {0};
        long field = -1;
        const char *out = NULL;
        size_t out_len = 0;
        int r = cp_tok_stream_feed_fast(p, ids, n, &scratch, &out, &out_len, &field, err);
        if (r != 0) {
            cp_value *events = NULL;
            if (r > 0) {
                const cp_eng *eng = p->eng;
                events = cp_list();
                int bad = !events;
                if (events && out_len) {
                    cp_value *ev = cp_object();
                    bad = !ev;
                    if (ev) {
                        bad |= cp_object_set_cstr(ev, "type", cp_string_cstr("region_chunk")) < 0;
                        bad |= cp_object_set_cstr(ev, "field", cp_string(eng->field_names[field], eng->field_name_lens[field])) < 0;
                        bad |= cp_object_set_cstr(ev, "text", cp_string(out, out_len)) < 0;
                        bad |= cp_object_set_cstr(ev, "dirty", cp_bool(eng->dirty[field])) < 0;
                    }
                    /* (cp_list_append frees ev when it fails) */
                    if (bad) cp_value_free(ev);
                    else bad = cp_list_append(events, ev) < 0;
                }
                if (bad) {
                    cp_value_free(events);
                    events = NULL;
                    cp_error_oom(err);
                }
            }
            cp_buf_free(&scratch);
            return events;
        }
        cp_buf_free(&scratch);
    }
    cp_buf text = {0};
    if (cp_tok_decode(p->dec, ids, n, 0, &text, err) < 0) {
        cp_buf_free(&text);
        return NULL;
    }
    cp_value *ev = text.len ? cp_stream_feed(p->stream, text.data, text.len, err) : cp_list();
    if (!ev && !err->failed) cp_error_oom(err);
    cp_buf_free(&text);
    return ev;
}

cp_value *cp_tok_stream_finish(cp_tok_stream *p, cp_value **message, cp_error *err) {
    *message = NULL;
    if (cp_stream_check_usable(p->stream, err) < 0) return NULL;
    cp_buf rest = {0};
    if (cp_tok_decode(p->dec, NULL, 0, 1, &rest, err) < 0) {
        cp_buf_free(&rest);
        return NULL;
    }
    cp_value *events = rest.len ? cp_stream_feed(p->stream, rest.data, rest.len, err) : cp_list();
    cp_buf_free(&rest);
    if (!events) return NULL;
    cp_value *final = cp_stream_finish(p->stream, message, err);
    if (!final) {
        cp_value_free(events);
        return NULL;
    }
    for (size_t i = 0; i < cp_list_len(final); i++) cp_list_append(events, cp_value_copy(cp_list_get(final, i)));
    cp_value_free(final);
    return events;
}

cp_value *cp_parse_tokens_value(const cp_eng *eng, const cp_tables *t, const int64_t *ids, size_t n,
                                const char *prefix, size_t prefix_len, const int64_t *prefix_ids, size_t n_prefix_ids,
                                int has_prefix_ids, const cp_value *tools, const cp_dialect_opts *dialect,
                                cp_error *err) {
    if (cp_tok_binding_check(eng, t, err) < 0) return NULL;
    cp_buf ptext = {0}, text = {0};
    cp_value *msg = NULL;
    if (prompt_text(&t->tokens, prefix, prefix_len, prefix_ids, n_prefix_ids, has_prefix_ids, &ptext, err) == 0) {
        cp_tok_decoder *d = cp_tok_decoder_new(&t->tokens);
        if (!d) cp_error_oom(err);
        else if (cp_tok_decode(d, ids, n, 1, &text, err) == 0)
            msg = cp_parse_response_value(eng, text.data ? text.data : "", text.len, ptext.data ? ptext.data : "",
                                          ptext.len, tools, dialect, err);
        cp_tok_decoder_free(d);
    }
    cp_buf_free(&ptext);
    cp_buf_free(&text);
    return msg;
}
