/*
 * chatparse-bench: times libchatparse on one table file and prints the timings as one JSON object on stdout.
 * bench/native_runtime.py runs it side by side with the Python runtime (one invocation per repetition,
 * interleaved with the Python side's repetitions); absolute times are printed there, targets are ratios.
 *
 *   chatparse-bench TABLES.cpt load MIN_S
 *       cp_tables_load on the file's bytes (read once, untimed), looped until MIN_S seconds: s_per_call.
 *   chatparse-bench TABLES.cpt pertoken IDS WINDOW L1,L2,... REPS [check]
 *       one token id per cp_parser_feed_ids call, one stream: for each length L the ids before L - WINDOW
 *       are fed untimed (4096 per call; then a feed of no ids, so that their events are released before the
 *       timing), then the WINDOW ids of [L - WINDOW, L) one per call, timed as one loop (each call's returned
 *       events freed, as a caller must): ns_per_token[rep][length]. REPS passes,
 *       each with a new parser; the rest is fed and finalized after the last window.
 *   chatparse-bench TABLES.cpt ids IDS MIN_S [check]
 *       cp_parse_ids on the whole sequence (prompt ""): s_per_call.
 *   chatparse-bench TABLES.cpt text TEXT MIN_S [check]
 *       cp_parse_response on the whole UTF-8 file (prompt ""): s_per_call.
 *   chatparse-bench TABLES.cpt streams MATRIX B MIN_S [check]
 *       B parsers (cp_parser_new_ids, prompt "") fed round-robin one id per call, MATRIX holding steps x B
 *       ids row by row (step k: stream 0, 1, ..., B-1), every call's events freed, then every parser
 *       finalized: s_per_call (parsers made, fed and finalized); last_new_s, last_feed_s, last_finalize_s:
 *       the last call's three phases.
 *
 * IDS and MATRIX files are raw little-endian int64. With `check` the message (the JSON list of the B
 * messages for streams) is printed too, under "message", for the driver to compare with Python's.
 * Timing: clock_gettime(CLOCK_MONOTONIC). MIN_S loops: the loop count is set from one first call (as
 * bench/pertoken.py's `timed`), then the loop is timed as a whole.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chatparse.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what, const cp_error *err) {
    if (err && err->failed)
        fprintf(stderr, "chatparse-bench: %s: %s: %s\n", what, err->exception, err->message);
    else
        fprintf(stderr, "chatparse-bench: %s\n", what);
    exit(1);
}

static uint8_t *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(1);
    }
    if (fseek(f, 0, SEEK_END) != 0) die("seek", NULL);
    long size = ftell(f);
    if (size < 0) die("ftell", NULL);
    rewind(f);
    uint8_t *buf = malloc((size_t)size + 1);
    if (!buf) die("out of memory", NULL);
    if (size > 0 && fread(buf, 1, (size_t)size, f) != (size_t)size) die("short read", NULL);
    fclose(f);
    buf[size] = 0;
    *n = (size_t)size;
    return buf;
}

static int64_t *read_ids(const char *path, size_t *n) {
    size_t bytes;
    uint8_t *raw = read_file(path, &bytes);
    if (bytes % 8) die("ids file: size is not a multiple of 8", NULL);
    *n = bytes / 8;
    int64_t *ids = malloc(bytes ? bytes : 8);
    if (!ids) die("out of memory", NULL);
    for (size_t i = 0; i < *n; i++) {
        uint64_t v = 0;
        for (int b = 7; b >= 0; b--) v = (v << 8) | raw[i * 8 + (size_t)b];
        ids[i] = (int64_t)v;
    }
    free(raw);
    return ids;
}

/* Seconds per call of fn(ctx): one first call sets the loop count so that the loop lasts about min_s. */
typedef void (*work_fn)(void *ctx);

static double timed(work_fn fn, void *ctx, double min_s, long *calls) {
    double t = now_s();
    fn(ctx);
    double one = now_s() - t;
    long n = one > 0 ? (long)(min_s / one) : 1000000;
    if (n <= 1) {
        *calls = 1;
        return one;
    }
    t = now_s();
    for (long k = 0; k < n; k++) fn(ctx);
    *calls = n;
    return (now_s() - t) / (double)n;
}

/* ---------------------------------------------------------------------------------------------- workloads */

struct load_ctx {
    const uint8_t *bytes;
    size_t n;
};

static void load_once(void *vctx) {
    struct load_ctx *c = vctx;
    cp_error err = {0};
    cp_tables *t = cp_tables_load(c->bytes, c->n, &err);
    if (!t) die("cp_tables_load", &err);
    cp_tables_free(t);
}

struct ids_ctx {
    const cp_engine *engine;
    const int64_t *ids;
    size_t n;
    char *message; /* the last call's (kept for `check`) */
};

static void ids_once(void *vctx) {
    struct ids_ctx *c = vctx;
    cp_error err = {0};
    size_t len;
    char *msg = cp_engine_parse_ids(c->engine, c->ids, c->n, "", 0, NULL, 0, NULL, &len, &err);
    if (!msg) die("cp_engine_parse_ids", &err);
    cp_free(c->message);
    c->message = msg;
}

struct text_ctx {
    const cp_engine *engine;
    const char *text;
    size_t n;
    char *message;
};

static void text_once(void *vctx) {
    struct text_ctx *c = vctx;
    cp_error err = {0};
    size_t len;
    char *msg = cp_engine_parse_response(c->engine, c->text, c->n, "", 0, NULL, &len, &err);
    if (!msg) die("cp_engine_parse_response", &err);
    cp_free(c->message);
    c->message = msg;
}

/* Feed ids to p, the events made as structs (cp_parser_feed_ids_events; json: as JSON text, cp_parser_feed_ids,
 * freed): a checksum of what was handed out (events and text bytes), so the events are read, as a caller would. */
static int use_json = 0;
static size_t sink = 0;

static cp_error feed_err; /* one error record for every feed (the library writes it only when a call fails; a
                             caller need not clear its 2 kB per call) */

static void feed(cp_parser *p, const int64_t *ids, size_t n) {
    cp_error *err = &feed_err;
    if (use_json) {
        size_t len = 0;
        char *ev = cp_parser_feed_ids(p, ids, n, &len, err);
        if (!ev) die("cp_parser_feed_ids", err);
        sink += len;
        cp_free(ev);
        return;
    }
    const cp_event *ev = NULL;
    size_t k = 0;
    if (cp_parser_feed_ids_events(p, ids, n, &ev, &k, err) < 0) die("cp_parser_feed_ids_events", err);
    for (size_t i = 0; i < k; i++) sink += (size_t)ev[i].type + ev[i].text_len;
}

struct streams_ctx {
    const cp_engine *engine;
    const int64_t *mat;
    size_t steps, b;
    cp_parser **ps;
    char **messages; /* the last call's (kept for `check`) */
    double phase_s[3]; /* the last call's seconds making the parsers, feeding, finalizing */
};

static void streams_once(void *vctx) {
    struct streams_ctx *c = vctx;
    cp_error err = {0};
    size_t len;
    double t0 = now_s();
    for (size_t j = 0; j < c->b; j++) {
        c->ps[j] = cp_engine_parser_ids(c->engine, "", 0, NULL, 0, NULL, &err);
        if (!c->ps[j]) die("cp_engine_parser_ids", &err);
    }
    double t1 = now_s();
    const int64_t *row = c->mat;
    for (size_t k = 0; k < c->steps; k++, row += c->b) {
        for (size_t j = 0; j < c->b; j++) feed(c->ps[j], row + j, 1);
    }
    double t2 = now_s();
    for (size_t j = 0; j < c->b; j++) {
        char *msg = NULL;
        size_t mlen;
        char *ev = cp_parser_finalize(c->ps[j], &msg, &mlen, &len, &err);
        if (!ev) die("cp_parser_finalize", &err);
        cp_free(ev);
        cp_free(c->messages[j]);
        c->messages[j] = msg;
        cp_parser_free(c->ps[j]);
    }
    c->phase_s[0] = t1 - t0;
    c->phase_s[1] = t2 - t1;
    c->phase_s[2] = now_s() - t2;
}

/* One pass of the per-token workload: ns per token of each window (out[len_index]); *message: the final
 * message (caller frees). */
static void pertoken_pass(const cp_engine *engine, const int64_t *ids, size_t n, size_t window, const size_t *lens,
                          size_t n_lens, double *out, char **message) {
    cp_error err = {0};
    size_t len;
    cp_parser *p = cp_engine_parser_ids(engine, "", 0, NULL, 0, NULL, &err);
    if (!p) die("cp_engine_parser_ids", &err);
    size_t pos = 0;
    for (size_t li = 0; li < n_lens; li++) {
        size_t start = lens[li] - window;
        while (pos < start) {
            size_t next = pos + 4096 < start ? pos + 4096 : start;
            feed(p, ids + pos, next - pos);
            pos = next;
        }
        /* a feed of no ids releases the events of the last untimed feed (they are the parser's until its next
         * call): else the first timed call would free them, where Python's were freed before its timing */
        feed(p, ids + pos, 0);
        double t = now_s();
        for (size_t i = start; i < lens[li]; i++) feed(p, ids + i, 1);
        out[li] = (now_s() - t) * 1e9 / (double)window;
        pos = lens[li];
    }
    if (pos < n) feed(p, ids + pos, n - pos);
    char *msg = NULL;
    size_t mlen;
    char *ev = cp_parser_finalize(p, &msg, &mlen, &len, &err);
    if (!ev) die("cp_parser_finalize", &err);
    cp_free(ev);
    cp_parser_free(p);
    *message = msg;
}

/* ------------------------------------------------------------------------------------------------- main */

static const cp_tables *load_tables(const uint8_t *bytes, size_t n) {
    cp_error err = {0};
    cp_tables *t = cp_tables_load(bytes, n, &err);
    if (!t) die("cp_tables_load", &err);
    return t;
}

static void usage(void) {
    fprintf(stderr,
            "usage: chatparse-bench TABLES.cpt load MIN_S\n"
            "       chatparse-bench TABLES.cpt pertoken IDS WINDOW L1,L2,... REPS [check]\n"
            "       chatparse-bench TABLES.cpt ids IDS MIN_S [check]\n"
            "       chatparse-bench TABLES.cpt text TEXT MIN_S [check]\n"
            "       chatparse-bench TABLES.cpt streams MATRIX B MIN_S [check]\n");
    exit(2);
}

int main(int argc, char **argv) {
    if (argc < 4) usage();
    size_t nbytes;
    uint8_t *bytes = read_file(argv[1], &nbytes);
    const char *mode = argv[2];
    int check = 0;
    while (argc > 4 && (strcmp(argv[argc - 1], "check") == 0 || strcmp(argv[argc - 1], "json") == 0)) {
        if (strcmp(argv[argc - 1], "check") == 0) check = 1;
        else use_json = 1;
        argc--;
    }
    long calls = 0;
    printf("{\"version\":\"%s\",\"mode\":\"%s\"", cp_version(), mode);
    if (strcmp(mode, "load") == 0) {
        struct load_ctx c = {bytes, nbytes};
        double s = timed(load_once, &c, atof(argv[3]), &calls);
        printf(",\"bytes\":%zu,\"calls\":%ld,\"s_per_call\":%.9g}\n", nbytes, calls, s);
        free(bytes);
        return 0;
    }
    const cp_tables *tables = load_tables(bytes, nbytes);
    free(bytes);
    cp_error eerr = {0};
    cp_engine *engine = cp_engine_new(tables, &eerr); /* compiled once, shared by every parser and call */
    if (!engine) die("cp_engine_new", &eerr);
    if (strcmp(mode, "pertoken") == 0) {
        if (argc < 7) usage();
        size_t n;
        int64_t *ids = read_ids(argv[3], &n);
        size_t window = (size_t)atol(argv[4]);
        size_t lens[64], n_lens = 0;
        for (char *s = argv[5]; *s && n_lens < 64;) {
            lens[n_lens] = (size_t)strtoul(s, &s, 10);
            if (lens[n_lens] < window || lens[n_lens] > n) die("a length is shorter than the window or past the ids", NULL);
            if (n_lens && lens[n_lens] <= lens[n_lens - 1]) die("lengths must increase", NULL);
            n_lens++;
            if (*s == ',') s++;
        }
        int reps = atoi(argv[6]);
        printf(",\"tokens\":%zu,\"window\":%zu,\"lengths\":[", n, window);
        for (size_t li = 0; li < n_lens; li++) printf("%s%zu", li ? "," : "", lens[li]);
        printf("],\"ns_per_token\":[");
        char *message = NULL;
        double out[64];
        for (int r = 0; r < reps; r++) {
            cp_free(message);
            message = NULL;
            pertoken_pass(engine, ids, n, window, lens, n_lens, out, &message);
            printf("%s[", r ? "," : "");
            for (size_t li = 0; li < n_lens; li++) printf("%s%.4f", li ? "," : "", out[li]);
            printf("]");
        }
        printf("]");
        if (check && message) printf(",\"message\":%s", message);
        printf("}\n");
        cp_free(message);
        free(ids);
    } else if (strcmp(mode, "ids") == 0) {
        struct ids_ctx c = {engine, NULL, 0, NULL};
        int64_t *ids = read_ids(argv[3], &c.n);
        c.ids = ids;
        double s = timed(ids_once, &c, atof(argv[4]), &calls);
        printf(",\"tokens\":%zu,\"calls\":%ld,\"s_per_call\":%.9g", c.n, calls, s);
        if (check) printf(",\"message\":%s", c.message);
        printf("}\n");
        cp_free(c.message);
        free(ids);
    } else if (strcmp(mode, "text") == 0) {
        struct text_ctx c = {engine, NULL, 0, NULL};
        uint8_t *text = read_file(argv[3], &c.n);
        c.text = (const char *)text;
        double s = timed(text_once, &c, atof(argv[4]), &calls);
        printf(",\"bytes\":%zu,\"calls\":%ld,\"s_per_call\":%.9g", c.n, calls, s);
        if (check) printf(",\"message\":%s", c.message);
        printf("}\n");
        cp_free(c.message);
        free(text);
    } else if (strcmp(mode, "streams") == 0) {
        if (argc < 6) usage();
        struct streams_ctx c = {engine, NULL, 0, (size_t)atol(argv[4]), NULL, NULL, {0, 0, 0}};
        size_t n;
        int64_t *mat = read_ids(argv[3], &n);
        if (c.b == 0 || n % c.b) die("matrix size is not a multiple of B", NULL);
        c.mat = mat;
        c.steps = n / c.b;
        c.ps = calloc(c.b, sizeof *c.ps);
        c.messages = calloc(c.b, sizeof *c.messages);
        if (!c.ps || !c.messages) die("out of memory", NULL);
        double s = timed(streams_once, &c, atof(argv[5]), &calls);
        printf(",\"streams\":%zu,\"steps\":%zu,\"calls\":%ld,\"s_per_call\":%.9g", c.b, c.steps, calls, s);
        printf(",\"last_new_s\":%.9g,\"last_feed_s\":%.9g,\"last_finalize_s\":%.9g", c.phase_s[0], c.phase_s[1],
               c.phase_s[2]);
        if (check) {
            printf(",\"message\":[");
            for (size_t j = 0; j < c.b; j++) printf("%s%s", j ? "," : "", c.messages[j]);
            printf("]");
        }
        printf("}\n");
        for (size_t j = 0; j < c.b; j++) cp_free(c.messages[j]);
        free(c.messages);
        free(c.ps);
        free(mat);
    } else {
        usage();
    }
    cp_engine_free(engine);
    cp_tables_free((cp_tables *)tables);
    return sink == (size_t)-1; /* (the checksum is used: the events are read) */
}
