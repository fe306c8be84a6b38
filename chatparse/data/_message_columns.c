/* chatparse.data._message_columns: the Arrow buffers of a batch of parsed messages, in one pass (the native half of
 * chatparse/data/arrow.py's `_typed_arrays`, whose Python spelling stays the reference and the fallback).
 *
 * typed_columns(messages, errors, encode) -> tuple or None
 *
 *   messages  a list of message dicts, one per row ({} for a row that failed);
 *   errors    a list as long, of the row's error text (str) or None;
 *   encode    the Python function that gives a call's arguments as JSON text (arrow._ARGS_JSON: json.dumps with
 *             ensure_ascii=False, allow_nan=False), called only for a value this module does not encode itself.
 *
 *   Returns None unless every message has the shape the typed columns hold exactly: a dict whose keys are among
 *   role, reasoning_content, content (each a str) and tool_calls (a list), no key holding None, every string
 *   UTF-8 encodable, every error a str or None, every call's arguments encodable as strict JSON. Then the Python
 *   spelling decides (it keeps odd messages exactly, in `extra` or row by row); this function only takes the
 *   usual batch. A row whose list holds a call that is not {"type"?: str, "id"?: str, "function": {"name": str,
 *   "arguments": JSON data}} is usual too (about one generation in 2,000 of bench/datasets_gen.py's mix): its
 *   tool_calls are null and its index is listed, for the caller to put the list in `extra` as the Python
 *   spelling does. Else a tuple of the buffers of `arrow.MESSAGE_SCHEMA`'s columns but `extra`, and those rows:
 *
 *     (role, reasoning_content, content, error, tool_calls, name, arguments, type, id, odd rows)
 *
 *   each string column a tuple (validity, offsets, data, null_count): validity a bytes bitmap (LSB first, bit set
 *   = value) or None when no value is null, offsets int32 bytes (one more than the rows), data the UTF-8 bytes;
 *   tool_calls a tuple (validity, offsets, null_count) of the list column, whose child rows are the calls of
 *   every row in order, the last four string columns being the struct's fields.
 *
 * JSON text: the arguments' text is exactly json.dumps(value, ensure_ascii=False, allow_nan=False): ", " and
 * ": " separators, keys in insertion order, str escaped as the json module escapes it (\" \\ \b \f \n \r \t,
 * other characters below 0x20 as \u00xx, everything else as is), int as int.__repr__, float as float.__repr__.
 * Only exact dict (str keys), list, str, int, float, True, False and None are encoded here, nested 200 deep at
 * most; any other value (a tuple, a subclass, a non-str key, deeper nesting) is handed whole to `encode`, and an
 * error that call raises (TypeError, ValueError, RecursionError) makes the result None, as in the Python
 * spelling. tests/test_datasets.py checks both against json.dumps and against each other.
 *
 * Why it exists: building the columns of a short row's message took about 4 us in the Python spelling (C-level
 * passes with map, but one pass and one list per check) against about 10 us for parsing the row
 * (bench/PERF_NOTES.md#message-columns). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define MAX_DEPTH 200

/* ---------------------------------------------------------------------------------------------- growable bytes */
typedef struct {
    char *p;
    Py_ssize_t len, cap;
} Buf;

static int
buf_reserve(Buf *b, Py_ssize_t extra)
{
    if (b->len + extra <= b->cap)
        return 0;
    Py_ssize_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra) {
        if (cap > PY_SSIZE_T_MAX / 2) {
            PyErr_NoMemory();
            return -1;
        }
        cap *= 2;
    }
    char *p = PyMem_Realloc(b->p, (size_t)cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

static int
buf_put(Buf *b, const char *s, Py_ssize_t n)
{
    if (buf_reserve(b, n) < 0)
        return -1;
    memcpy(b->p + b->len, s, (size_t)n);
    b->len += n;
    return 0;
}

#define BUF_LIT(b, s) buf_put((b), (s), (Py_ssize_t)(sizeof(s) - 1))

static PyObject *
buf_bytes(const Buf *b)
{
    return PyBytes_FromStringAndSize(b->p ? b->p : "", b->len);
}

/* ---------------------------------------------------------------------------------------------- string columns */
typedef struct {
    Buf data, offsets, valid;
    Py_ssize_t rows, nulls;
} Col;

/* Outcomes of the steps below: OK, GIVE_UP (the batch is not one this module takes: return None), or ERR (an
 * exception is set and propagates). */
enum { OK = 0, GIVE_UP = 1, ERR = -1, OTHER = 2 };

static int
col_init(Col *c, Py_ssize_t rows)
{
    memset(c, 0, sizeof(*c));
    int32_t zero = 0;
    if (buf_reserve(&c->offsets, (rows + 1) * 4) < 0 || buf_reserve(&c->valid, rows / 8 + 1) < 0)
        return ERR;
    return buf_put(&c->offsets, (const char *)&zero, 4) < 0 ? ERR : OK;
}

static void
col_free(Col *c)
{
    PyMem_Free(c->data.p);
    PyMem_Free(c->offsets.p);
    PyMem_Free(c->valid.p);
}

/* Row `rows` of a validity bitmap: set (a value) or not (null). */
static int
bit_push(Buf *valid, Py_ssize_t rows, int value)
{
    if (rows % 8 == 0) {
        if (buf_reserve(valid, 1) < 0)
            return ERR;
        valid->p[valid->len++] = 0;
    }
    if (value)
        valid->p[rows / 8] |= (char)(1 << (rows % 8));
    return OK;
}

/* Close the current row: its value is the data written since the previous row (valid) or nothing (null). */
static int
col_end_row(Col *c, int valid)
{
    if (c->data.len > INT32_MAX)
        return GIVE_UP;  /* (Arrow's string type holds 2 GB; the Python spelling decides what to do) */
    if (bit_push(&c->valid, c->rows, valid) < 0)
        return ERR;
    c->nulls += !valid;
    c->rows++;
    int32_t end = (int32_t)c->data.len;
    return buf_put(&c->offsets, (const char *)&end, 4) < 0 ? ERR : OK;
}

/* Close a row of the list column `c` (its offsets count calls, its data stays empty). */
static int
list_end_row(Col *c, int valid, Py_ssize_t ncalls)
{
    if (ncalls > INT32_MAX)
        return GIVE_UP;
    if (bit_push(&c->valid, c->rows, valid) < 0)
        return ERR;
    c->nulls += !valid;
    c->rows++;
    int32_t end = (int32_t)ncalls;
    return buf_put(&c->offsets, (const char *)&end, 4) < 0 ? ERR : OK;
}

/* `s`'s UTF-8 (an exact str's, cached by CPython) in *u, *n: OK, or GIVE_UP when it has none (a lone surrogate:
 * the Python spelling decides what to do with it), ERR on another error. */
static int
utf8_of(PyObject *s, const char **u, Py_ssize_t *n)
{
    *u = PyUnicode_AsUTF8AndSize(s, n);
    if (*u != NULL)
        return OK;
    if (PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
        PyErr_Clear();
        return GIVE_UP;
    }
    return ERR;
}

/* The UTF-8 of `s` (an exact str) appended to `b`; GIVE_UP when it has none (a lone surrogate). */
static int
put_utf8(Buf *b, PyObject *s)
{
    Py_ssize_t n;
    const char *u;
    int r = utf8_of(s, &u, &n);
    return r != OK ? r : buf_put(b, u, n) < 0 ? ERR : OK;
}

/* A row of column `c`: `value` an exact str, or NULL for null; anything else gives up. */
static int
col_add(Col *c, PyObject *value)
{
    if (value == NULL)
        return col_end_row(c, 0);
    if (!PyUnicode_CheckExact(value))
        return GIVE_UP;
    int r = put_utf8(&c->data, value);
    return r != OK ? r : col_end_row(c, 1);
}

static PyObject *
col_result(const Col *c)
{
    PyObject *valid;
    if (c->nulls) {
        valid = buf_bytes(&c->valid);
        if (valid == NULL)
            return NULL;
    } else {
        valid = Py_NewRef(Py_None);
    }
    return Py_BuildValue("(NNNn)", valid, buf_bytes(&c->offsets), buf_bytes(&c->data), c->nulls);
}

/* ---------------------------------------------------------------------------------------------- JSON text */
static int
put_json_str(Buf *b, PyObject *s)
{
    Py_ssize_t n, i, run = 0;
    const char *u;
    int got = utf8_of(s, &u, &n);
    if (got != OK)
        return got;
    /* (UTF-8 bytes of non-ASCII characters are all >= 0x80, so escaping byte by byte is escaping by character) */
    if (buf_reserve(b, n + 2) < 0 || BUF_LIT(b, "\"") < 0)
        return ERR;
    for (i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)u[i];
        if (ch >= 0x20 && ch != '"' && ch != '\\')
            continue;
        if (buf_put(b, u + run, i - run) < 0)
            return ERR;
        run = i + 1;
        char esc[7] = {'\\', 0, 0, 0, 0, 0, 0};
        Py_ssize_t len = 2;
        switch (ch) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        default:
            esc[1] = 'u';
            esc[2] = '0';
            esc[3] = '0';
            esc[4] = "0123456789abcdef"[ch >> 4];
            esc[5] = "0123456789abcdef"[ch & 15];
            len = 6;
        }
        if (buf_put(b, esc, len) < 0)
            return ERR;
    }
    if (buf_put(b, u + run, n - run) < 0 || BUF_LIT(b, "\"") < 0)
        return ERR;
    return OK;
}

static int
put_repr(Buf *b, PyObject *v)
{
    PyObject *r = PyObject_Repr(v);
    if (r == NULL) {  /* (an int past sys.get_int_max_str_digits: json.dumps raises the same ValueError) */
        if (PyErr_ExceptionMatches(PyExc_ValueError)) {
            PyErr_Clear();
            return GIVE_UP;
        }
        return ERR;
    }
    int res = put_utf8(b, r);
    Py_DECREF(r);
    return res;
}

/* The JSON text of `v` appended to `b`: OK; OTHER where `v` holds a value encoded only by the Python encoder
 * (then `b` may hold part of the text: the caller cuts it); GIVE_UP where json.dumps would raise; ERR. */
static int
put_json(Buf *b, PyObject *v, int depth)
{
    if (v == Py_None)
        return BUF_LIT(b, "null") < 0 ? ERR : OK;
    if (v == Py_True)
        return BUF_LIT(b, "true") < 0 ? ERR : OK;
    if (v == Py_False)
        return BUF_LIT(b, "false") < 0 ? ERR : OK;
    if (PyUnicode_CheckExact(v))
        return put_json_str(b, v);
    if (PyLong_CheckExact(v))
        return put_repr(b, v);
    if (PyFloat_CheckExact(v)) {
        double d = PyFloat_AS_DOUBLE(v);
        if (!isfinite(d))
            return GIVE_UP;  /* (allow_nan=False: json.dumps raises ValueError) */
        char *s = PyOS_double_to_string(d, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);  /* float.__repr__ */
        if (s == NULL)
            return ERR;
        int r = buf_put(b, s, (Py_ssize_t)strlen(s)) < 0 ? ERR : OK;
        PyMem_Free(s);
        return r;
    }
    if (depth >= MAX_DEPTH)
        return OTHER;
    if (PyList_CheckExact(v)) {
        if (BUF_LIT(b, "[") < 0)
            return ERR;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(v); i++) {
            if (i && BUF_LIT(b, ", ") < 0)
                return ERR;
            PyObject *item = PyList_GET_ITEM(v, i);
            Py_INCREF(item);
            int r = put_json(b, item, depth + 1);
            Py_DECREF(item);
            if (r != OK)
                return r;
        }
        return BUF_LIT(b, "]") < 0 ? ERR : OK;
    }
    if (PyDict_CheckExact(v)) {
        Py_ssize_t pos = 0, k = 0;
        PyObject *key, *value;
        if (BUF_LIT(b, "{") < 0)
            return ERR;
        while (PyDict_Next(v, &pos, &key, &value)) {
            if (!PyUnicode_CheckExact(key))
                return OTHER;  /* (json.dumps turns int, float, bool and None keys into text, and refuses others) */
            if ((k++ && BUF_LIT(b, ", ") < 0))
                return ERR;
            int r = put_json_str(b, key);
            if (r != OK)
                return r;
            if (BUF_LIT(b, ": ") < 0)
                return ERR;
            Py_INCREF(value);
            r = put_json(b, value, depth + 1);
            Py_DECREF(value);
            if (r != OK)
                return r;
        }
        return BUF_LIT(b, "}") < 0 ? ERR : OK;
    }
    return OTHER;
}

/* A call's arguments as a row of `c`. */
static int
add_arguments(Col *c, PyObject *value, PyObject *encode)
{
    Py_ssize_t start = c->data.len;
    int r = put_json(&c->data, value, 0);
    if (r == OTHER) {
        c->data.len = start;
        PyObject *text = PyObject_CallOneArg(encode, value);
        if (text == NULL) {
            if (PyErr_ExceptionMatches(PyExc_TypeError) || PyErr_ExceptionMatches(PyExc_ValueError)
                    || PyErr_ExceptionMatches(PyExc_RecursionError)) {
                PyErr_Clear();
                return GIVE_UP;
            }
            return ERR;
        }
        r = PyUnicode_CheckExact(text) ? put_utf8(&c->data, text) : GIVE_UP;
        Py_DECREF(text);
    }
    return r != OK ? r : col_end_row(c, 1);
}

/* ---------------------------------------------------------------------------------------------- the batch */
static PyObject *K_ROLE, *K_REASONING, *K_CONTENT, *K_TOOL_CALLS, *K_TYPE, *K_ID, *K_FUNCTION, *K_NAME,
    *K_ARGUMENTS;

/* `d[key]` (borrowed) or NULL when absent; *err set when the lookup raised. */
static PyObject *
get(PyObject *d, PyObject *key, int *err)
{
    PyObject *v = PyDict_GetItemWithError(d, key);
    if (v == NULL && PyErr_Occurred())
        *err = 1;
    return v;
}

enum { ROLE, REASONING, CONTENT, ERROR, NAME, ARGUMENTS, TYPE, ID, NCOLS };

/* Whether call `c` has the struct's shape (arrow._call_fits): {"type"?: str, "id"?: str, "function": {"name": str,
 * "arguments": anything}}, exact types, no other key. 1 or 0; ERR when a lookup raised. */
static int
call_fits(PyObject *c)
{
    if (!PyDict_CheckExact(c))
        return 0;
    int err = 0;
    PyObject *type = get(c, K_TYPE, &err), *id = get(c, K_ID, &err), *f = get(c, K_FUNCTION, &err);
    if (err)
        return ERR;
    if (f == NULL || PyDict_GET_SIZE(c) != 1 + (type != NULL) + (id != NULL)
            || (type != NULL && !PyUnicode_CheckExact(type)) || (id != NULL && !PyUnicode_CheckExact(id))
            || !PyDict_CheckExact(f) || PyDict_GET_SIZE(f) != 2)
        return 0;
    PyObject *name = get(f, K_NAME, &err), *arguments = get(f, K_ARGUMENTS, &err);
    if (err)
        return ERR;
    return name != NULL && arguments != NULL && PyUnicode_CheckExact(name);
}

/* The calls of one row (a list whose every call_fits), appended to the struct's columns (`ncalls` counts them). */
static int
add_calls(Col *cols, Py_ssize_t *ncalls, PyObject *calls, PyObject *encode)
{
    for (Py_ssize_t j = 0; j < PyList_GET_SIZE(calls); j++) {
        PyObject *call = PyList_GET_ITEM(calls, j);
        Py_INCREF(call);  /* (the encoder may run Python code for an odd value) */
        PyObject *f = PyDict_GetItemWithError(call, K_FUNCTION);
        int r = f == NULL ? ERR : col_add(&cols[NAME], PyDict_GetItemWithError(f, K_NAME));
        if (r == OK)
            r = col_add(&cols[TYPE], PyDict_GetItemWithError(call, K_TYPE));
        if (r == OK)
            r = col_add(&cols[ID], PyDict_GetItemWithError(call, K_ID));
        if (r == OK && PyErr_Occurred())
            r = ERR;
        if (r == OK) {
            PyObject *arguments = PyDict_GetItemWithError(f, K_ARGUMENTS);
            r = arguments == NULL ? ERR : add_arguments(&cols[ARGUMENTS], arguments, encode);
        }
        Py_DECREF(call);
        if (r != OK)
            return r;
        (*ncalls)++;
    }
    return OK;
}

/* One message (and its error) as a row of every column. A row whose tool_calls list holds a call of another
 * shape gets a null there, and its index in `odd` (its list goes to `extra`, made by the caller). */
static int
add_row(Col *cols, Col *calls_col, Py_ssize_t *ncalls, PyObject *m, PyObject *error, PyObject *encode,
        Py_ssize_t row, PyObject *odd)
{
    if (!PyDict_CheckExact(m))
        return GIVE_UP;
    int err = 0, r;
    PyObject *role = get(m, K_ROLE, &err), *reasoning = get(m, K_REASONING, &err),
             *content = get(m, K_CONTENT, &err), *calls = get(m, K_TOOL_CALLS, &err);
    if (err)
        return ERR;
    if (PyDict_GET_SIZE(m) != (role != NULL) + (reasoning != NULL) + (content != NULL) + (calls != NULL))
        return GIVE_UP;  /* another key */
    /* (col_add refuses anything but an exact str: a None value, a number, a list...) */
    if ((r = col_add(&cols[ROLE], role)) != OK || (r = col_add(&cols[REASONING], reasoning)) != OK
            || (r = col_add(&cols[CONTENT], content)) != OK
            || (r = col_add(&cols[ERROR], error == Py_None ? NULL : error)) != OK)
        return r;
    if (calls == NULL)
        return list_end_row(calls_col, 0, *ncalls);
    if (!PyList_CheckExact(calls))
        return GIVE_UP;
    Py_INCREF(calls);
    int fit = 1;
    for (Py_ssize_t j = 0; j < PyList_GET_SIZE(calls) && fit == 1; j++)
        fit = call_fits(PyList_GET_ITEM(calls, j));
    if (fit == 1)
        r = add_calls(cols, ncalls, calls, encode);
    else if (fit == 0) {
        PyObject *i = PyLong_FromSsize_t(row);
        r = i == NULL || PyList_Append(odd, i) < 0 ? ERR : OK;
        Py_XDECREF(i);
    } else
        r = ERR;
    Py_DECREF(calls);
    return r != OK ? r : list_end_row(calls_col, fit == 1, *ncalls);
}

static PyObject *
typed_columns(PyObject *self, PyObject *args)
{
    PyObject *messages, *errors, *encode, *result = NULL, *odd = NULL;
    if (!PyArg_ParseTuple(args, "O!O!O:typed_columns", &PyList_Type, &messages, &PyList_Type, &errors, &encode))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(messages), ncalls = 0, i;
    if (PyList_GET_SIZE(errors) != n)
        return PyErr_Format(PyExc_ValueError, "typed_columns: %zd messages but %zd errors", n,
                            PyList_GET_SIZE(errors));
    Col cols[NCOLS], calls_col;
    int r = OK, k;
    for (k = 0; k < NCOLS; k++)
        memset(&cols[k], 0, sizeof(Col));
    memset(&calls_col, 0, sizeof(Col));
    for (k = 0; k < NCOLS && r == OK; k++)
        r = col_init(&cols[k], k < NAME ? n : n + 8);
    if (r == OK)
        r = col_init(&calls_col, n);
    if (r == OK && (odd = PyList_New(0)) == NULL)
        r = ERR;
    for (i = 0; i < n && r == OK; i++) {
        PyObject *m = PyList_GET_ITEM(messages, i), *e = PyList_GET_ITEM(errors, i);
        Py_INCREF(m);
        Py_INCREF(e);
        r = add_row(cols, &calls_col, &ncalls, m, e, encode, i, odd);
        Py_DECREF(m);
        Py_DECREF(e);
    }
    if (r == OK) {
        PyObject *parts[NCOLS];
        int ok = 1;
        for (k = 0; k < NCOLS; k++)
            ok &= (parts[k] = col_result(&cols[k])) != NULL;
        PyObject *list = NULL;
        if (ok) {  /* (col_result's tuple less its empty data) */
            PyObject *whole = col_result(&calls_col);
            if (whole != NULL) {
                list = PyTuple_Pack(3, PyTuple_GET_ITEM(whole, 0), PyTuple_GET_ITEM(whole, 1),
                                    PyTuple_GET_ITEM(whole, 3));
                Py_DECREF(whole);
            }
        }
        if (list != NULL)
            result = Py_BuildValue("(OOOOOOOOOO)", parts[ROLE], parts[REASONING], parts[CONTENT], parts[ERROR],
                                   list, parts[NAME], parts[ARGUMENTS], parts[TYPE], parts[ID], odd);
        Py_XDECREF(list);
        for (k = 0; k < NCOLS; k++)
            Py_XDECREF(parts[k]);
    } else if (r == GIVE_UP) {
        result = Py_NewRef(Py_None);
    }
    for (k = 0; k < NCOLS; k++)
        col_free(&cols[k]);
    col_free(&calls_col);
    Py_XDECREF(odd);
    return result;
}

static PyMethodDef methods[] = {
    {"typed_columns", typed_columns, METH_VARARGS,
     "typed_columns(messages, errors, encode): the Arrow buffers of the message columns, or None where the "
     "batch is not the usual one (see the module's source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_message_columns", NULL, 0, methods};

PyMODINIT_FUNC
PyInit__message_columns(void)
{
    const char *names[] = {"role", "reasoning_content", "content", "tool_calls", "type", "id", "function", "name",
                           "arguments"};
    PyObject **keys[] = {&K_ROLE, &K_REASONING, &K_CONTENT, &K_TOOL_CALLS, &K_TYPE, &K_ID, &K_FUNCTION, &K_NAME,
                         &K_ARGUMENTS};
    for (int k = 0; k < 9; k++)
        if ((*keys[k] = PyUnicode_InternFromString(names[k])) == NULL)
            return NULL;
    return PyModule_Create(&module);
}
