/* The span hot path in C: `with rec.span(name):` without a Python frame.
 *
 * Optional. setup.py builds it when a C compiler and Python's headers are there; without
 * them (or on Python < 3.11, below this stable ABI) workflow_lib/capture/sources/host.py
 * keeps its pure-Python span, which records the same rows.
 *
 * Why C: in CPython the two Python frames of a context manager's __enter__/__exit__, a
 * next() on the ring counter, four int64 stores through array.array's item protocol and the
 * lookup frame are interpreter work that no rewrite of the Python removes (the variants
 * tried are in benchmarks/span_cost.py and docs/benchmarks.md). Here __enter__/__exit__ are
 * C methods, the clock is clock_gettime(CLOCK_MONOTONIC) (what time.monotonic_ns reads on
 * Linux), the stores go straight into the ring's buffers, and the per-thread lookup is a
 * C dict lookup in the thread state's dict.
 *
 * Ring contract kept (ring.py): the index comes from next() on the ring's itertools.count
 * (shared with bulk writers and readers), columns start/end/code are written first and
 * seq[j] = k last, all while holding the GIL, so a reader never sees a torn row. The ring's
 * arrays are held as exported buffers: array.array refuses to resize while exported.
 *
 * Stable ABI (Py_LIMITED_API 3.11): one build serves 3.11, 3.12 and later.
 */
#define Py_LIMITED_API 0x030B0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <time.h>

static inline int64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + (int64_t)ts.tv_nsec;
}

/* ---- Span: one per (thread, name) ------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    int64_t *col[4]; /* start, end, code, seq */
    Py_buffer buf[4];
    int nbuf;
    PyObject *ctr;
    int64_t mask;
    int64_t code;
    int64_t t0;     /* 0 while not open (monotonic time is never 0 once a process runs) */
    int64_t *outer; /* outer starts of a name re-entered on its thread (recursion) */
    Py_ssize_t nouter, capouter;
} SpanObject;

static int span_init(SpanObject *self, PyObject *args, PyObject *kwds) {
    PyObject *st, *en, *cd, *sq, *ctr;
    long long mask, code;
    if (kwds && PyDict_Size(kwds)) {
        PyErr_SetString(PyExc_TypeError, "Span takes positional arguments only");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "OOOOOLL", &st, &en, &cd, &sq, &ctr, &mask, &code))
        return -1;
    if (self->nbuf) {
        PyErr_SetString(PyExc_RuntimeError, "Span already initialized");
        return -1;
    }
    PyObject *arrs[4] = {st, en, cd, sq};
    Py_ssize_t n = -1;
    for (int i = 0; i < 4; i++) {
        if (PyObject_GetBuffer(arrs[i], &self->buf[i], PyBUF_WRITABLE | PyBUF_FORMAT) < 0)
            return -1;
        self->nbuf = i + 1;
        Py_buffer *b = &self->buf[i];
        if (b->itemsize != 8 || b->format == NULL || (b->format[0] != 'q' && b->format[0] != 'l')) {
            PyErr_SetString(PyExc_TypeError, "Span: ring columns must be int64 buffers");
            return -1;
        }
        Py_ssize_t len = b->len / 8;
        if (n >= 0 && len != n) {
            PyErr_SetString(PyExc_ValueError, "Span: ring columns differ in length");
            return -1;
        }
        n = len;
        self->col[i] = (int64_t *)b->buf;
    }
    if (mask < 0 || mask + 1 != n || (n & (n - 1))) {
        PyErr_SetString(PyExc_ValueError, "Span: mask must be capacity - 1 of a power-of-two ring");
        return -1;
    }
    Py_INCREF(ctr);
    self->ctr = ctr;
    self->mask = mask;
    self->code = code;
    self->t0 = 0;
    return 0;
}

static void span_dealloc(SpanObject *self) {
    PyTypeObject *tp = Py_TYPE((PyObject *)self);
    for (int i = 0; i < self->nbuf; i++)
        PyBuffer_Release(&self->buf[i]);
    Py_XDECREF(self->ctr);
    PyMem_Free(self->outer);
    freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    f(self);
    Py_DECREF(tp);
}

static PyObject *span_enter(SpanObject *self, PyObject *unused) {
    if (self->t0) { /* re-entered on this thread: keep the outer start */
        if (self->nouter == self->capouter) {
            Py_ssize_t cap = self->capouter ? self->capouter * 2 : 4;
            int64_t *p = PyMem_Realloc(self->outer, (size_t)cap * sizeof(int64_t));
            if (p == NULL)
                return PyErr_NoMemory();
            self->outer = p;
            self->capouter = cap;
        }
        self->outer[self->nouter++] = self->t0;
    }
    self->t0 = mono_ns();
    Py_INCREF((PyObject *)self);
    return (PyObject *)self;
}

static PyObject *span_exit(SpanObject *self, PyObject *const *args, Py_ssize_t nargs) {
    int64_t t1 = mono_ns();
    if (self->ctr == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Span not initialized");
        return NULL;
    }
    PyObject *ko = PyIter_Next(self->ctr);
    if (ko == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_RuntimeError, "ring counter exhausted");
        return NULL;
    }
    long long k = PyLong_AsLongLong(ko);
    Py_DECREF(ko);
    if (k == -1 && PyErr_Occurred())
        return NULL;
    int64_t j = (int64_t)k & self->mask;
    self->col[0][j] = self->t0;
    self->t0 = self->nouter ? self->outer[--self->nouter] : 0;
    self->col[1][j] = t1;
    self->col[2][j] = self->code;
    self->col[3][j] = (int64_t)k; /* last: the commit mark */
    Py_RETURN_FALSE;
}

static PyObject *span_get_t0(SpanObject *self, void *c) { return PyLong_FromLongLong(self->t0); }
static PyObject *span_get_code(SpanObject *self, void *c) { return PyLong_FromLongLong(self->code); }
static PyObject *span_get_depth(SpanObject *self, void *c) { return PyLong_FromSsize_t(self->nouter); }

static PyMethodDef span_methods[] = {
    {"__enter__", (PyCFunction)span_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))span_exit, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef span_getset[] = {
    {"t0", (getter)span_get_t0, NULL, "start of the open span (0 when not open)", NULL},
    {"code", (getter)span_get_code, NULL, "tid << 20 | name id", NULL},
    {"open_outer", (getter)span_get_depth, NULL, "outer starts kept for re-entry", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot span_slots[] = {
    {Py_tp_init, (void *)span_init},
    {Py_tp_dealloc, (void *)span_dealloc},
    {Py_tp_methods, span_methods},
    {Py_tp_getset, span_getset},
    {Py_tp_new, (void *)PyType_GenericNew},
    {Py_tp_doc, "Span(start, end, code, seq, ctr, mask, code): a ring-writing context manager"},
    {0, NULL},
};

static PyType_Spec span_spec = {
    "workflow_lib.capture._spanext.Span", sizeof(SpanObject), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, span_slots,
};

/* ---- Lookup: name -> this thread's Span, cached in the thread state's dict ------------- */

typedef struct {
    PyObject_HEAD
    PyObject *factory; /* name -> new Span for the calling thread */
    PyObject *key;     /* this lookup's key in each thread's dict; replaced by reset() */
    Py_ssize_t limit;  /* names cached per thread; beyond it, spans are made and not kept */
} LookupObject;

static int lookup_init(LookupObject *self, PyObject *args, PyObject *kwds) {
    PyObject *factory;
    Py_ssize_t limit;
    if (!PyArg_ParseTuple(args, "On", &factory, &limit))
        return -1;
    PyObject *key = PyObject_CallNoArgs((PyObject *)&PyBaseObject_Type);
    if (key == NULL)
        return -1;
    Py_INCREF(factory);
    PyObject *old_f = self->factory, *old_k = self->key;
    self->factory = factory;
    self->key = key;
    Py_XDECREF(old_f);
    Py_XDECREF(old_k);
    self->limit = limit;
    return 0;
}

static void lookup_dealloc(LookupObject *self) {
    PyTypeObject *tp = Py_TYPE((PyObject *)self);
    Py_XDECREF(self->factory);
    Py_XDECREF(self->key);
    freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    f(self);
    Py_DECREF(tp);
}

static PyObject *lookup_call(LookupObject *self, PyObject *args, PyObject *kwds) {
    if (self->key == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Lookup not initialized");
        return NULL;
    }
    if (PyTuple_Size(args) != 1 || (kwds && PyDict_Size(kwds))) {
        PyErr_SetString(PyExc_TypeError, "span() takes one name");
        return NULL;
    }
    PyObject *name = PyTuple_GetItem(args, 0);
    PyObject *tsd = PyThreadState_GetDict(); /* borrowed */
    if (tsd == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "no thread state dict");
        return NULL;
    }
    PyObject *cache = PyDict_GetItemWithError(tsd, self->key); /* borrowed */
    if (cache == NULL) {
        if (PyErr_Occurred())
            return NULL;
        cache = PyDict_New();
        if (cache == NULL || PyDict_SetItem(tsd, self->key, cache) < 0) {
            Py_XDECREF(cache);
            return NULL;
        }
        Py_DECREF(cache); /* the thread dict holds it */
    }
    PyObject *span = PyDict_GetItemWithError(cache, name);
    if (span != NULL) {
        Py_INCREF(span);
        return span;
    }
    if (PyErr_Occurred())
        return NULL;
    span = PyObject_CallFunctionObjArgs(self->factory, name, NULL);
    if (span == NULL)
        return NULL;
    if (PyDict_Size(cache) < self->limit && PyDict_SetItem(cache, name, span) < 0) {
        Py_DECREF(span);
        return NULL;
    }
    return span;
}

static PyObject *lookup_reset(LookupObject *self, PyObject *unused) {
    /* After fork: the child's main thread keeps the parent's thread dict, whose spans carry
     * the parent's tid. A fresh key makes every thread build its spans again. */
    PyObject *key = PyObject_CallNoArgs((PyObject *)&PyBaseObject_Type);
    if (key == NULL)
        return NULL;
    PyObject *old = self->key;
    self->key = key;
    Py_XDECREF(old);
    Py_RETURN_NONE;
}

static PyMethodDef lookup_methods[] = {
    {"reset", (PyCFunction)lookup_reset, METH_NOARGS, "forget every thread's cached spans"},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot lookup_slots[] = {
    {Py_tp_init, (void *)lookup_init},
    {Py_tp_dealloc, (void *)lookup_dealloc},
    {Py_tp_call, (void *)lookup_call},
    {Py_tp_methods, lookup_methods},
    {Py_tp_new, (void *)PyType_GenericNew},
    {Py_tp_doc, "Lookup(factory, limit): span(name) -> the calling thread's Span for name"},
    {0, NULL},
};

static PyType_Spec lookup_spec = {
    "workflow_lib.capture._spanext.Lookup", sizeof(LookupObject), 0, Py_TPFLAGS_DEFAULT, lookup_slots,
};

static PyObject *ext_now_ns(PyObject *m, PyObject *unused) { return PyLong_FromLongLong(mono_ns()); }

static PyMethodDef module_methods[] = {
    {"now_ns", ext_now_ns, METH_NOARGS, "clock_gettime(CLOCK_MONOTONIC) in ns (time.monotonic_ns's clock)"},
    {NULL, NULL, 0, NULL},
};

static int ext_exec(PyObject *m) {
    PyObject *span = PyType_FromSpec(&span_spec);
    if (span == NULL || PyModule_AddObject(m, "Span", span) < 0) {
        Py_XDECREF(span);
        return -1;
    }
    PyObject *lookup = PyType_FromSpec(&lookup_spec);
    if (lookup == NULL || PyModule_AddObject(m, "Lookup", lookup) < 0) {
        Py_XDECREF(lookup);
        return -1;
    }
    return 0;
}

static PyModuleDef_Slot module_slots[] = {{Py_mod_exec, (void *)ext_exec}, {0, NULL}};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_spanext", "C span hot path (optional; see host.py)", 0, module_methods, module_slots,
};

PyMODINIT_FUNC PyInit__spanext(void) { return PyModuleDef_Init(&moduledef); }
