/* chatparse.runtime._stream_kernels: the two loops of TokenStreams that run over every stream (the native half
 * of stream_kernels.py, which holds their Python spellings and says which one runs).
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
 * join_columns(items, buf, cols, starts, stop) -> list
 *
 *   items   a list of token texts, all bytes or all str (index -1 is the last item, as in Python);
 *   buf     a 2-D buffer of int64 token ids (steps x streams, any strides: a numpy array or a view);
 *   cols    a list of column indexes into buf;
 *   starts  a list, as long as cols, of the first step of each column's run;
 *   stop    the step after every run's last.
 *
 *   Returns, for each k, items[buf[starts[k], cols[k]]] + ... + items[buf[stop - 1, cols[k]]] (b"" / "" for an
 *   empty run), exactly what b"".join / "".join of those items gives.
 *
 * Why they exist: in a many-stream run (bench/streams_matrix.py) a step that the row tables take whole is a
 * handful of numpy operations on arrays of 256 (about 6 us: each call's overhead, not the work), and every
 * token's text is joined once, which in Python (a numpy gather, a list, a join) costs about 18 ns a token.
 * Together they were half of a run. Here a step is one pass over the streams, and bytes are copied straight
 * from the items (str items are gathered into lists that PyUnicode_Join joins: it picks the widest kind).
 *
 * Errors: TypeError for a buffer of another shape or type, or an item of the other type; IndexError for an id
 * or a column outside its range; ValueError for a start outside 0..stop or a stop past the buffer's rows.
 * tests/test_stream_kernels.py checks both functions against their Python spellings. */
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

/* Both joins read the ids row by row (steps x streams is row-major: a column is one id per cache line) and
 * write every column's result at once. */
static int
check_ids(PyObject *items, const char *buf, const Py_ssize_t *strides, const Py_ssize_t *cols,
          const Py_ssize_t *starts, Py_ssize_t n, Py_ssize_t lo, Py_ssize_t stop, int is_bytes, Py_ssize_t *size)
{
    Py_ssize_t n_items = PyList_GET_SIZE(items), i;
    for (Py_ssize_t t = lo; t < stop; t++) {
        const char *row = buf + t * strides[0];
#if defined(__GNUC__) || defined(__clang__)
        if (n == 1 && t + 16 < stop)  /* one column: one id per cache line, ahead of the hardware's prefetcher */
            __builtin_prefetch(row + 16 * strides[0] + cols[0] * strides[1]);
#endif
        for (Py_ssize_t k = 0; k < n; k++) {
            if (t < starts[k])
                continue;
            if (item_index(n_items, *(const int64_t *)(row + cols[k] * strides[1]), &i) < 0)
                return -1;
            PyObject *it = PyList_GET_ITEM(items, i);
            if (is_bytes ? !PyBytes_Check(it) : !PyUnicode_Check(it)) {
                PyErr_Format(PyExc_TypeError, "text %zd is %.100s, not %s", i, Py_TYPE(it)->tp_name,
                             is_bytes ? "bytes" : "str");
                return -1;
            }
            if (is_bytes)
                size[k] += PyBytes_GET_SIZE(it);
        }
    }
    return 0;
}

/* The ids are checked (`check_ids`) before: every one picks an item of the right type. */
static PyObject *
item_at(PyObject *items, const char *row, Py_ssize_t col_stride, Py_ssize_t col)
{
    int64_t id = *(const int64_t *)(row + col * col_stride);
    return PyList_GET_ITEM(items, (Py_ssize_t)(id < 0 ? id + PyList_GET_SIZE(items) : id));
}

static int
join_bytes(PyObject *items, const char *buf, const Py_ssize_t *strides, const Py_ssize_t *cols,
           const Py_ssize_t *starts, Py_ssize_t n, Py_ssize_t lo, Py_ssize_t stop, const Py_ssize_t *size,
           PyObject *out)
{
    char **w = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(char *));
    if (w == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *b = PyBytes_FromStringAndSize(NULL, size[k]);
        if (b == NULL) {
            PyMem_Free(w);
            return -1;
        }
        PyList_SET_ITEM(out, k, b);
        w[k] = PyBytes_AS_STRING(b);
    }
    for (Py_ssize_t t = lo; t < stop; t++) {
        const char *row = buf + t * strides[0];
        for (Py_ssize_t k = 0; k < n; k++) {
            if (t < starts[k])
                continue;
            PyObject *it = item_at(items, row, strides[1], cols[k]);
            Py_ssize_t m = PyBytes_GET_SIZE(it);
            memcpy(w[k], PyBytes_AS_STRING(it), (size_t)m);
            w[k] += m;
        }
    }
    PyMem_Free(w);
    return 0;
}

static int
join_str(PyObject *items, const char *buf, const Py_ssize_t *strides, const Py_ssize_t *cols,
         const Py_ssize_t *starts, Py_ssize_t n, Py_ssize_t lo, Py_ssize_t stop, PyObject *out)
{
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *parts = PyList_New(stop - starts[k]);
        if (parts == NULL)
            return -1;
        PyList_SET_ITEM(out, k, parts);
    }
    for (Py_ssize_t t = lo; t < stop; t++) {
        const char *row = buf + t * strides[0];
        for (Py_ssize_t k = 0; k < n; k++) {
            if (t < starts[k])
                continue;
            PyObject *it = item_at(items, row, strides[1], cols[k]);
            Py_INCREF(it);
            PyList_SET_ITEM(PyList_GET_ITEM(out, k), t - starts[k], it);
        }
    }
    PyObject *empty = PyUnicode_New(0, 0);
    if (empty == NULL)
        return -1;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *s = PyUnicode_Join(empty, PyList_GET_ITEM(out, k));
        if (s == NULL) {
            Py_DECREF(empty);
            return -1;
        }
        PyList_SetItem(out, k, s);  /* (drops the parts' list) */
    }
    Py_DECREF(empty);
    return 0;
}

static PyObject *
join_columns(PyObject *self, PyObject *args)
{
    PyObject *items, *bufobj, *colsobj, *startsobj;
    Py_ssize_t stop;
    if (!PyArg_ParseTuple(args, "O!OO!O!n:join_columns", &PyList_Type, &items, &bufobj, &PyList_Type, &colsobj,
                          &PyList_Type, &startsobj, &stop))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(colsobj);
    if (PyList_GET_SIZE(startsobj) != n) {
        PyErr_SetString(PyExc_ValueError, "join_columns: cols and starts differ in length");
        return NULL;
    }
    if (PyList_GET_SIZE(items) == 0) {
        PyErr_SetString(PyExc_ValueError, "join_columns: no texts");
        return NULL;
    }
    int is_bytes = PyBytes_Check(PyList_GET_ITEM(items, 0));
    Py_buffer view;
    if (PyObject_GetBuffer(bufobj, &view, PyBUF_STRIDES | PyBUF_FORMAT) < 0)
        return NULL;
    PyObject *out = NULL;
    Py_ssize_t *cols = PyMem_Calloc((size_t)(3 * n + 1), sizeof(Py_ssize_t));
    if (cols == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t *starts = cols + n, *size = cols + 2 * n;
    const char *fmt = view.format ? view.format : "B";
    if (fmt[0] == '<' || fmt[0] == '=' || fmt[0] == '@')
        fmt++;
    if (view.ndim != 2 || view.itemsize != 8 || (strcmp(fmt, "l") != 0 && strcmp(fmt, "q") != 0)) {
        PyErr_SetString(PyExc_TypeError, "join_columns: the ids must be a 2-D int64 buffer");
        goto done;
    }
    Py_ssize_t rows = view.shape[0], ncols = view.shape[1], lo = stop;
    if (stop < 0 || stop > rows) {
        PyErr_Format(PyExc_ValueError, "join_columns: stop %zd is outside 0..%zd", stop, rows);
        goto done;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        cols[k] = PyLong_AsSsize_t(PyList_GET_ITEM(colsobj, k));
        starts[k] = PyLong_AsSsize_t(PyList_GET_ITEM(startsobj, k));
        if ((cols[k] == -1 || starts[k] == -1) && PyErr_Occurred())
            goto done;
        if (cols[k] < 0 || cols[k] >= ncols) {
            PyErr_Format(PyExc_IndexError, "join_columns: column %zd is outside 0..%zd", cols[k], ncols - 1);
            goto done;
        }
        if (starts[k] < 0 || starts[k] > stop) {
            PyErr_Format(PyExc_ValueError, "join_columns: start %zd is outside 0..%zd", starts[k], stop);
            goto done;
        }
        if (starts[k] < lo)
            lo = starts[k];
    }
    if (check_ids(items, view.buf, view.strides, cols, starts, n, lo, stop, is_bytes, size) < 0)
        goto done;
    out = PyList_New(n);
    if (out == NULL)
        goto done;
    if ((is_bytes ? join_bytes(items, view.buf, view.strides, cols, starts, n, lo, stop, size, out)
                  : join_str(items, view.buf, view.strides, cols, starts, n, lo, stop, out)) < 0)
        Py_CLEAR(out);
done:
    PyMem_Free(cols);
    PyBuffer_Release(&view);
    return out;
}

static int
int64_vector(PyObject *obj, Py_buffer *view, const char *what, int writable)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_STRIDES | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    const char *fmt = view->format ? view->format : "B";
    if (fmt[0] == '<' || fmt[0] == '=' || fmt[0] == '@')
        fmt++;
    if (view->ndim != 1 || view->itemsize != 8 || (strcmp(fmt, "l") != 0 && strcmp(fmt, "q") != 0)) {
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
    {"join_columns", join_columns, METH_VARARGS,
     "join_columns(items, buf, cols, starts, stop): per column, the items of its ids from its start to stop, "
     "joined."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_stream_kernels", NULL, 0, methods};

PyMODINIT_FUNC
PyInit__stream_kernels(void)
{
    return PyModule_Create(&module);
}
