/* chatparse.runtime.tokens._stream_kernels: the two loops of TokenStreams that run over every stream (the native half
 * of kernels.py, which holds their Python spellings and says which one runs).
 *
 * advance(src, dst, rowoff, next, out, V) -> int
 *
 *   One step of every stream's row. src: the step's token ids (1-D int64, one per stream), copied to dst (the
 *   step's row of the ring buffer; may be src itself); rowoff: each stream's row offset (row * V); next: the
 *   row tables (next[rowoff + id] is the next row offset, or -1 where the tables do not know it); out: written
 *   with every stream's next row offset. Returns -1 - b when stream b's id is outside 0..V-1 (the first such b;
 *   dst and out are then partly written, nothing else), else 0 when every row stays, 1 when rows change and the
 *   tables know every one, 2 when some entry of out is -1.
 *
 * join_bytes_columns(blob, offsets, buf, cols, starts, stop) -> list of bytes
 * join_str_columns(items, buf, cols, starts, stop) -> list of str
 *
 *   texts   join_bytes_columns: text i is blob[offsets[i]:offsets[i + 1]]; join_str_columns: items[i], a list
 *           of str. Index -1 is the last text, as in Python (TokenStreams' last text is the empty one);
 *   buf     a 2-D buffer of int64 token ids (steps x streams, any strides: a numpy array or a view);
 *   cols    a list of column indexes into buf;
 *   starts  a list, as long as cols, of the first step of each column's run;
 *   stop    the step after every run's last.
 *
 *   Returns, for each k, text(buf[starts[k], cols[k]]) + ... + text(buf[stop - 1, cols[k]]) (b"" / "" for an
 *   empty run), exactly what b"".join / "".join of those texts gives.
 *
 * Why they exist: in a many-stream run (bench/streams_matrix.py) a step that the row tables take whole is a
 * handful of numpy operations on arrays of 256 (about 4 us: each call's overhead, not the work), and every
 * token's text is joined once, which in Python (a numpy gather, a list, a join) costs about 30 ns a token.
 * Together they were half of a run (bench/PERF_NOTES.md#native-kernels). Here a step is one pass over the streams, and bytes are copied straight
 * from one blob of every token's bytes (str texts are gathered into lists that PyUnicode_Join joins).
 *
 * Errors: TypeError for a buffer of another shape or type, or an item that is not str; IndexError for an id
 * or a column outside its range; ValueError for a start outside 0..stop, a stop past the buffer's rows, or
 * offsets outside the blob.
 * tests/test_stream_kernels.py checks each function against its Python spelling. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static int
item_index(Py_ssize_t n_items, int64_t id, Py_ssize_t *out)
{
    int64_t i = id < 0 ? id + (int64_t)n_items : id;
    if (i < 0 || i >= (int64_t)n_items) {
        PyErr_Format(PyExc_IndexError, "token id %lld is outside the %zd texts", (long long)id, n_items);
        return -1;
    }
    *out = (Py_ssize_t)i;
    return 0;
}

static int
int64_format(const Py_buffer *view)
{
    const char *fmt = view->format ? view->format : "B";
    if (fmt[0] == '<' || fmt[0] == '=' || fmt[0] == '@')
        fmt++;
    return view->itemsize == 8 && (strcmp(fmt, "l") == 0 || strcmp(fmt, "q") == 0);
}

/* The arguments both joins share: the 2-D int64 id buffer (`view`, to release), the columns and their starts
 * (one PyMem array: `cols`, `starts = cols + n`, and `n` zeroed sizes at `cols + 2n`) and the first step any
 * run reads (`lo`). Returns -1 with an exception set (the view released, nothing allocated). */
static int
columns_args(PyObject *bufobj, PyObject *colsobj, PyObject *startsobj, Py_ssize_t stop, Py_buffer *view,
             Py_ssize_t **cols, Py_ssize_t *lo)
{
    Py_ssize_t n = PyList_GET_SIZE(colsobj), *c = NULL;
    if (PyList_GET_SIZE(startsobj) != n) {
        PyErr_SetString(PyExc_ValueError, "join_columns: cols and starts differ in length");
        return -1;
    }
    if (PyObject_GetBuffer(bufobj, view, PyBUF_STRIDES | PyBUF_FORMAT) < 0)
        return -1;
    if (view->ndim != 2 || !int64_format(view)) {
        PyErr_SetString(PyExc_TypeError, "join_columns: the ids must be a 2-D int64 buffer");
        goto fail;
    }
    Py_ssize_t rows = view->shape[0], ncols = view->shape[1];
    if (stop < 0 || stop > rows) {
        PyErr_Format(PyExc_ValueError, "join_columns: stop %zd is outside 0..%zd", stop, rows);
        goto fail;
    }
    c = PyMem_Calloc((size_t)(3 * n + 1), sizeof(Py_ssize_t));
    if (c == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    *lo = stop;
    for (Py_ssize_t k = 0; k < n; k++) {
        c[k] = PyLong_AsSsize_t(PyList_GET_ITEM(colsobj, k));
        c[n + k] = PyLong_AsSsize_t(PyList_GET_ITEM(startsobj, k));
        if ((c[k] == -1 || c[n + k] == -1) && PyErr_Occurred())
            goto fail;
        if (c[k] < 0 || c[k] >= ncols) {
            PyErr_Format(PyExc_IndexError, "join_columns: column %zd is outside 0..%zd", c[k], ncols - 1);
            goto fail;
        }
        if (c[n + k] < 0 || c[n + k] > stop) {
            PyErr_Format(PyExc_ValueError, "join_columns: start %zd is outside 0..%zd", c[n + k], stop);
            goto fail;
        }
        if (c[n + k] < *lo)
            *lo = c[n + k];
    }
    *cols = c;
    return 0;
fail:
    PyMem_Free(c);
    PyBuffer_Release(view);
    return -1;
}

/* Both joins read the ids row by row (steps x streams is row-major: a column is one id per cache line) and
 * fill every column's result at once; a lone column's ids are prefetched ahead. */
#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH_COLUMN(n, t, stop, row, stride, at) \
    if ((n) == 1 && (t) + 16 < (stop)) __builtin_prefetch((row) + 16 * (stride) + (at))
#else
#define PREFETCH_COLUMN(n, t, stop, row, stride, at)
#endif
#define ID_AT(row, strides, col) (*(const int64_t *)((row) + (col) * (strides)[1]))

/* join_bytes_columns(blob, offsets, buf, cols, starts, stop): text i is blob[offsets[i]:offsets[i + 1]] (one
 * bytes object and a contiguous 1-D int64 buffer of len(texts) + 1 offsets: a token's text is read from two
 * adjacent offsets and one place of the blob rather than from an object of its own; a 131k vocabulary's
 * bytes objects do not fit the cache, its offsets and blob, 1 MB each, nearly do). */
static PyObject *
join_bytes_columns(PyObject *self, PyObject *args)
{
    PyObject *blob, *offobj, *bufobj, *colsobj, *startsobj, *out = NULL;
    Py_ssize_t stop, lo, *cols = NULL, i;
    if (!PyArg_ParseTuple(args, "O!OOO!O!n:join_bytes_columns", &PyBytes_Type, &blob, &offobj, &bufobj,
                          &PyList_Type, &colsobj, &PyList_Type, &startsobj, &stop))
        return NULL;
    Py_buffer ov, view;
    if (PyObject_GetBuffer(offobj, &ov, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return NULL;
    if (ov.ndim != 1 || ov.shape[0] < 2 || !int64_format(&ov)) {
        PyErr_SetString(PyExc_TypeError, "join_bytes_columns: the offsets must be a 1-D int64 buffer of 2 or more");
        PyBuffer_Release(&ov);
        return NULL;
    }
    if (columns_args(bufobj, colsobj, startsobj, stop, &view, &cols, &lo) < 0) {
        PyBuffer_Release(&ov);
        return NULL;
    }
    const int64_t *off = ov.buf;
    const char *src = PyBytes_AS_STRING(blob), *buf = view.buf;
    Py_ssize_t n = PyList_GET_SIZE(colsobj), n_items = ov.shape[0] - 1, blen = PyBytes_GET_SIZE(blob);
    Py_ssize_t *starts = cols + n, *size = cols + 2 * n;
    char **w = NULL;
    for (Py_ssize_t t = lo; t < stop; t++) {  /* the ids and their offsets checked, the sizes summed */
        const char *row = buf + t * view.strides[0];
        PREFETCH_COLUMN(n, t, stop, row, view.strides[0], cols[0] * view.strides[1]);
        for (Py_ssize_t k = 0; k < n; k++) {
            if (t < starts[k])
                continue;
            if (item_index(n_items, ID_AT(row, view.strides, cols[k]), &i) < 0)
                goto done;
            if (off[i] < 0 || off[i] > off[i + 1] || off[i + 1] > blen) {
                PyErr_Format(PyExc_ValueError, "join_bytes_columns: text %zd's offsets %lld..%lld are outside "
                             "the blob of %zd bytes", i, (long long)off[i], (long long)off[i + 1], blen);
                goto done;
            }
            size[k] += (Py_ssize_t)(off[i + 1] - off[i]);
        }
    }
    w = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(char *));
    if (w == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    out = PyList_New(n);
    for (Py_ssize_t k = 0; out != NULL && k < n; k++) {
        PyObject *b = PyBytes_FromStringAndSize(NULL, size[k] + 16);  /* (16 spare: see the copy below) */
        if (b == NULL) {
            Py_CLEAR(out);  /* (the unset items are NULL: the list's deallocation skips them) */
            break;
        }
        PyList_SET_ITEM(out, k, b);
        w[k] = PyBytes_AS_STRING(b);
    }
    for (Py_ssize_t t = lo; out != NULL && t < stop; t++) {
        const char *row = buf + t * view.strides[0];
        for (Py_ssize_t k = 0; k < n; k++) {
            if (t < starts[k])
                continue;
            int64_t id = ID_AT(row, view.strides, cols[k]);
            i = (Py_ssize_t)(id < 0 ? id + n_items : id);
            Py_ssize_t m = (Py_ssize_t)(off[i + 1] - off[i]);
            if (m <= 16 && off[i] + 16 <= blen)  /* most tokens: 16 bytes copied at once, the rest overwritten */
                memcpy(w[k], src + off[i], 16);
            else
                memcpy(w[k], src + off[i], (size_t)m);
            w[k] += m;
        }
    }
    for (Py_ssize_t k = 0; out != NULL && k < n; k++) {  /* the spare bytes dropped (shrinking: in place) */
        PyObject *b = PyList_GET_ITEM(out, k);
        PyList_SET_ITEM(out, k, NULL);
        if (_PyBytes_Resize(&b, size[k]) < 0)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, k, b);
    }
done:
    PyMem_Free(w);
    PyMem_Free(cols);
    PyBuffer_Release(&view);
    PyBuffer_Release(&ov);
    return out;
}

/* join_str_columns(items, buf, cols, starts, stop): the texts are a list of str; each column's are gathered
 * into a list that PyUnicode_Join joins (it finds the widest character kind itself). */
static PyObject *
join_str_columns(PyObject *self, PyObject *args)
{
    PyObject *items, *bufobj, *colsobj, *startsobj;
    Py_ssize_t stop, lo, *cols = NULL, i = 0;
    if (!PyArg_ParseTuple(args, "O!OO!O!n:join_str_columns", &PyList_Type, &items, &bufobj, &PyList_Type,
                          &colsobj, &PyList_Type, &startsobj, &stop))
        return NULL;
    Py_buffer view;
    if (columns_args(bufobj, colsobj, startsobj, stop, &view, &cols, &lo) < 0)
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(colsobj), n_items = PyList_GET_SIZE(items);
    Py_ssize_t *starts = cols + n;
    const char *buf = view.buf;
    PyObject *empty = NULL, *out = PyList_New(n);
    for (Py_ssize_t k = 0; out != NULL && k < n; k++) {
        PyObject *parts = PyList_New(stop - starts[k]);
        if (parts == NULL)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, k, parts);
    }
    for (Py_ssize_t t = lo; out != NULL && t < stop; t++) {
        const char *row = buf + t * view.strides[0];
        PREFETCH_COLUMN(n, t, stop, row, view.strides[0], cols[0] * view.strides[1]);
        for (Py_ssize_t k = 0; k < n; k++) {
            if (t < starts[k])
                continue;
            if (item_index(n_items, ID_AT(row, view.strides, cols[k]), &i) < 0) {
                Py_CLEAR(out);  /* (a parts list's unset items are NULL: its deallocation skips them) */
                break;
            }
            PyObject *it = PyList_GET_ITEM(items, i);
            if (!PyUnicode_Check(it)) {
                PyErr_Format(PyExc_TypeError, "text %zd is %.100s, not str", i, Py_TYPE(it)->tp_name);
                Py_CLEAR(out);
                break;
            }
            Py_INCREF(it);
            PyList_SET_ITEM(PyList_GET_ITEM(out, k), t - starts[k], it);
        }
    }
    if (out != NULL && (empty = PyUnicode_New(0, 0)) == NULL)
        Py_CLEAR(out);
    for (Py_ssize_t k = 0; out != NULL && k < n; k++) {
        PyObject *joined = PyUnicode_Join(empty, PyList_GET_ITEM(out, k));
        if (joined == NULL)
            Py_CLEAR(out);
        else
            PyList_SetItem(out, k, joined);  /* (drops the parts' list) */
    }
    Py_XDECREF(empty);
    PyMem_Free(cols);
    PyBuffer_Release(&view);
    return out;
}

static int
int64_vector(PyObject *obj, Py_buffer *view, const char *what, int writable)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_STRIDES | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    if (view->ndim != 1 || !int64_format(view)) {
        PyErr_Format(PyExc_TypeError, "advance: %s must be a 1-D int64 buffer", what);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

#define AT(v, i) (*(int64_t *)((char *)(v).buf + (i) * (v).strides[0]))

static PyObject *
advance(PyObject *self, PyObject *args)
{
    PyObject *o[5];
    Py_ssize_t V;
    if (!PyArg_ParseTuple(args, "OOOOOn:advance", &o[0], &o[1], &o[2], &o[3], &o[4], &V))
        return NULL;
    static const char *names[5] = {"src", "dst", "rowoff", "next", "out"};
    Py_buffer v[5];
    int k;
    for (k = 0; k < 5; k++) {
        if (int64_vector(o[k], &v[k], names[k], k == 1 || k == 4) < 0) {
            while (k--)
                PyBuffer_Release(&v[k]);
            return NULL;
        }
    }
    PyObject *result = NULL;
    Py_ssize_t n = v[2].shape[0], n_next = v[3].shape[0], b;
    if (v[0].shape[0] != n || v[1].shape[0] != n || v[4].shape[0] != n) {
        PyErr_SetString(PyExc_ValueError, "advance: src, dst, rowoff and out differ in length");
        goto done;
    }
    long code = 0;
    for (b = 0; b < n; b++) {
        int64_t id = AT(v[0], b);
        AT(v[1], b) = id;
        if ((uint64_t)id >= (uint64_t)V) {
            code = -1 - (long)b;
            break;
        }
        int64_t at = AT(v[2], b) + id;
        if (at < 0 || at >= n_next) {
            PyErr_Format(PyExc_IndexError, "advance: stream %zd's row offset %lld is outside the tables", b,
                         (long long)AT(v[2], b));
            goto done;
        }
        int64_t to = AT(v[3], at);
        AT(v[4], b) = to;
        if (to < 0)
            code = 2;
        else if (code == 0 && to != AT(v[2], b))
            code = 1;
    }
    result = PyLong_FromLong(code);
done:
    for (k = 0; k < 5; k++)
        PyBuffer_Release(&v[k]);
    return result;
}

static PyMethodDef methods[] = {
    {"advance", advance, METH_VARARGS,
     "advance(src, dst, rowoff, next, out, V): one step of every stream's row (see the module's source)."},
    {"join_bytes_columns", join_bytes_columns, METH_VARARGS,
     "join_bytes_columns(blob, offsets, buf, cols, starts, stop): per column, the texts of its ids from its "
     "start to stop, joined (see the module's source)."},
    {"join_str_columns", join_str_columns, METH_VARARGS,
     "join_str_columns(items, buf, cols, starts, stop): per column, the texts of its ids from its start to "
     "stop, joined (see the module's source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_stream_kernels", NULL, 0, methods};

PyMODINIT_FUNC
PyInit__stream_kernels(void)
{
    return PyModule_Create(&module);
}
