/* The step hot path in C: a recorded step's rows and its sched marks without Python frames.
 *
 * Optional, like _spanext.c (the span path) and built beside it by setup.py; without it (or
 * with STALLCASE_SPAN_PATH=python) capture/step_core.py and sources/sched_marks.py keep their
 * pure-Python paths, which write the same rows (tests/test_capture_step_c.py compares them).
 * The ring contract is ring.py's, as in _spanext.c: the index from next() on the ring's
 * itertools.count, the columns, then seq[j] = k last, all while holding the GIL.
 *
 * Stable ABI (Py_LIMITED_API 3.11): one build serves 3.11, 3.12 and later.
 */
#define Py_LIMITED_API 0x030B0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/syscall.h>
#endif

static inline int64_t mono_ns(void) { /* time.monotonic_ns's clock (clock.py) */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + (int64_t)ts.tv_nsec;
}

/* The same work as the Python step path (capture/step_core.py and sources/sched_marks.py,
 * the fallback, which writes the same rows): a recorded step is then one C call at its start
 * and one at its end (steps.py), instead of some twenty Python frames whose lines, after a
 * step of GPU work has left the interpreter's caches cold, cost ~100 us a step on the H200
 * (issue 33; docs/benchmarks.md "The step path in C"). The rare work stays in Python, called
 * from here only when due: the launcher scan (every RESCAN step starts), the trigger and the
 * GPU windows (`after`, None when the recorder has neither), the error log.
 *
 * Per-thread state (the thread's id, its kept schedstat fd, its previous step) lives in a
 * capsule in the thread state's dict under a key, as Lookup's cache does: the id and the fd
 * under one key for the module (after_fork() replaces it in a forked child), a thread's
 * previous step and last mark under a key of the object. The schedstat
 * pread keeps the GIL: it takes about a microsecond, and releasing the GIL hands it to
 * whichever thread waits for it (a DataLoader's pin-memory thread holds it 18% of the time
 * on the H200 loop), so the step would wait far longer than the read. */

static int64_t native_tid(void) {
#if defined(__linux__) && defined(SYS_gettid)
    return (int64_t)syscall(SYS_gettid);
#else
    PyObject *mod = PyImport_ImportModule("threading");
    if (mod == NULL)
        return -1;
    PyObject *r = PyObject_CallMethod(mod, "get_native_id", NULL);
    Py_DECREF(mod);
    if (r == NULL)
        return -1;
    long long t = PyLong_AsLongLong(r);
    Py_DECREF(r);
    return (int64_t)t;
#endif
}

/* The calling thread's slot of `size` bytes under `key` (zeroed when new; `ready` is 0). */
static void *thread_slot(PyObject *key, const char *name, size_t size, PyCapsule_Destructor d) {
    PyObject *tsd = PyThreadState_GetDict(); /* borrowed */
    if (tsd == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "no thread state dict");
        return NULL;
    }
    PyObject *cap = PyDict_GetItemWithError(tsd, key); /* borrowed */
    if (cap != NULL)
        return PyCapsule_GetPointer(cap, name);
    if (PyErr_Occurred())
        return NULL;
    void *p = calloc(1, size);
    if (p == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    cap = PyCapsule_New(p, name, d);
    if (cap == NULL) {
        free(p);
        return NULL;
    }
    int rc = PyDict_SetItem(tsd, key, cap);
    Py_DECREF(cap); /* the thread dict holds it; on failure this frees p */
    return rc < 0 ? NULL : p;
}

static PyObject *new_key(void) { return PyObject_CallNoArgs((PyObject *)&PyBaseObject_Type); }

/* `on_error(message)`: the recorder's error log. Never raises into the caller. */
static void report(PyObject *on_error, PyObject *msg) {
    if (msg == NULL) {
        PyErr_Clear();
        return;
    }
    if (on_error != NULL && on_error != Py_None) {
        PyObject *r = PyObject_CallFunctionObjArgs(on_error, msg, NULL);
        if (r == NULL)
            PyErr_Clear();
        Py_XDECREF(r);
    }
    Py_DECREF(msg);
}

/* The pending exception, reported as `prefix` + its type and text, then cleared. */
static void report_exc(PyObject *on_error, PyObject *prefix) {
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    PyErr_NormalizeException(&t, &v, &tb);
    PyObject *tname = t ? PyType_GetName((PyTypeObject *)t) : NULL;
    PyObject *msg = PyUnicode_FromFormat("%U%S: %S", prefix, tname ? tname : Py_None, v ? v : Py_None);
    Py_XDECREF(tname);
    Py_XDECREF(t);
    Py_XDECREF(v);
    Py_XDECREF(tb);
    report(on_error, msg);
}

static int ring_next(PyObject *ctr, int64_t *k) {
    PyObject *ko = PyIter_Next(ctr);
    if (ko == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_RuntimeError, "ring counter exhausted");
        return -1;
    }
    long long v = PyLong_AsLongLong(ko);
    Py_DECREF(ko);
    if (v == -1 && PyErr_Occurred())
        return -1;
    *k = (int64_t)v;
    return 0;
}

/* int64 buffers of equal length from a tuple of `n` arrays, into bufs/cols; returns the
 * length, or -1 with an exception. `*nbuf` counts the buffers held (released by the caller). */
static Py_ssize_t get_columns(PyObject *tup, int n, Py_buffer *bufs, int64_t **cols, int *nbuf) {
    if (!PyTuple_Check(tup) || PyTuple_Size(tup) != n) {
        PyErr_Format(PyExc_TypeError, "expected a tuple of %d int64 arrays", n);
        return -1;
    }
    Py_ssize_t len = -1;
    for (int i = 0; i < n; i++) {
        if (PyObject_GetBuffer(PyTuple_GetItem(tup, i), &bufs[*nbuf], PyBUF_WRITABLE | PyBUF_FORMAT) < 0)
            return -1;
        Py_buffer *b = &bufs[(*nbuf)++];
        if (b->itemsize != 8 || b->format == NULL || (b->format[0] != 'q' && b->format[0] != 'l')) {
            PyErr_SetString(PyExc_TypeError, "columns must be int64 buffers");
            return -1;
        }
        if (len >= 0 && b->len / 8 != len) {
            PyErr_SetString(PyExc_ValueError, "columns differ in length");
            return -1;
        }
        len = b->len / 8;
        cols[i] = (int64_t *)b->buf;
    }
    return len;
}

static int check_mask(long long mask, Py_ssize_t len) {
    if (mask < 0 || mask + 1 != len || (len & (len - 1))) {
        PyErr_SetString(PyExc_ValueError, "mask must be capacity - 1 of a power-of-two ring");
        return -1;
    }
    return 0;
}

/* cpu, wait, timeslices from a schedstat fd: 0, -1 (errno set by pread) or -2 (unparsable). */
static int read_schedstat(int fd, int64_t out[3]) {
    char b[129];
    ssize_t n = pread(fd, b, 128, 0);
    if (n < 0)
        return -1;
    b[n] = 0;
    char *p = b, *e;
    for (int i = 0; i < 3; i++) {
        long long v = strtoll(p, &e, 10);
        if (e == p)
            return -2;
        out[i] = (int64_t)v;
        p = e;
    }
    return 0;
}

/* ---- Marker: a thread's step-boundary samples of its own schedstat (sched_marks.py) ---- */

#define MAX_LAUNCHERS 16

/* The calling thread's id and its schedstat fd, kept open (one per thread, for every Marker,
 * like sched_marks._TLS); a fresh key after fork (after_fork()). */
typedef struct {
    int ready;
    int opened; /* the schedstat fd was asked for */
    int fd;     /* /proc/thread-self/schedstat; -1: could not be opened */
    int64_t tid;
} TidSlot;

static PyObject *fd_key;

static void tidslot_free(PyObject *cap) {
    TidSlot *s = PyCapsule_GetPointer(cap, "stallcase.tidslot");
    if (s == NULL) {
        PyErr_Clear();
        return;
    }
    if (s->opened && s->fd >= 0)
        close(s->fd);
    free(s);
}

static TidSlot *tid_slot(void) {
    TidSlot *s = thread_slot(fd_key, "stallcase.tidslot", sizeof(TidSlot), tidslot_free);
    if (s == NULL || s->ready)
        return s;
    s->tid = native_tid();
    if (s->tid < 0)
        return NULL;
    s->ready = 1;
    return s;
}

static int schedstat_fd(TidSlot *s, PyObject *on_error) {
    if (!s->opened) {
        s->opened = 1;
        s->fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
        if (s->fd < 0)
            report(on_error, PyUnicode_FromFormat("step-boundary sample: %s", strerror(errno)));
    }
    return s->fd;
}

typedef struct {
    int ready;
    int64_t last; /* this thread's last boundary mark of this Marker (ns); 0: none */
} MarkSlot;

static void slot_free(PyObject *cap) {
    void *s = PyCapsule_GetPointer(cap, "stallcase.slot");
    if (s == NULL)
        PyErr_Clear();
    free(s);
}

/* Drop the calling thread's entry under `key` (the object's end; other threads' entries go
 * with their thread). Keeps any pending exception. */
static void drop_slot(PyObject *key) {
    if (key == NULL)
        return;
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    PyObject *tsd = PyThreadState_GetDict();
    if (tsd != NULL && PyDict_DelItem(tsd, key) < 0)
        PyErr_Clear();
    PyErr_Restore(t, v, tb);
}

typedef struct {
    PyObject_HEAD
    int64_t *col[7]; /* ts, tid, state, cpu, wait, slices, seq */
    Py_buffer buf[7];
    int nbuf;
    PyObject *ctr, *key, *scan, *on_error;
    int64_t mask;
    long long marks, reused, starts_since_scan, rescan, reuse_ns;
    int scanned;
    int64_t running, unknown; /* state codes: the marking thread; another (stat not read) */
    int nl;
    int64_t ltid[MAX_LAUNCHERS];
    int lfd[MAX_LAUNCHERS];
} MarkerObject;

static PyTypeObject *MarkerType;

static int marker_init(MarkerObject *self, PyObject *args, PyObject *kwds) {
    PyObject *cols, *ctr, *scan, *on_error;
    long long mask, rescan, reuse_ns, running, unknown;
    if (kwds && PyDict_Size(kwds)) {
        PyErr_SetString(PyExc_TypeError, "Marker takes positional arguments only");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "OOLOOLLLL", &cols, &ctr, &mask, &scan, &on_error, &rescan, &reuse_ns, &running,
                          &unknown))
        return -1;
    if (self->nbuf || self->ctr) {
        PyErr_SetString(PyExc_RuntimeError, "Marker already initialized");
        return -1;
    }
    Py_ssize_t n = get_columns(cols, 7, self->buf, self->col, &self->nbuf);
    if (n < 0 || check_mask(mask, n) < 0)
        return -1;
    if (!PyCallable_Check(scan) || !PyCallable_Check(on_error)) {
        PyErr_SetString(PyExc_TypeError, "Marker: scan and on_error must be callable");
        return -1;
    }
    self->key = new_key();
    if (self->key == NULL)
        return -1;
    Py_INCREF(ctr);
    Py_INCREF(scan);
    Py_INCREF(on_error);
    self->ctr = ctr;
    self->scan = scan;
    self->on_error = on_error;
    self->mask = mask;
    self->rescan = rescan;
    self->starts_since_scan = rescan; /* the first step start scans */
    self->reuse_ns = reuse_ns;
    self->running = running;
    self->unknown = unknown;
    return 0;
}

static int marker_traverse(MarkerObject *self, visitproc visit, void *arg) {
    Py_VISIT(Py_TYPE((PyObject *)self));
    Py_VISIT(self->ctr);
    Py_VISIT(self->scan);
    Py_VISIT(self->on_error);
    return 0;
}

static int marker_clear(MarkerObject *self) {
    Py_CLEAR(self->scan);
    Py_CLEAR(self->on_error);
    return 0;
}

static void marker_dealloc(MarkerObject *self) {
    PyTypeObject *tp = Py_TYPE((PyObject *)self);
    PyObject_GC_UnTrack((PyObject *)self);
    marker_clear(self);
    Py_CLEAR(self->ctr);
    drop_slot(self->key);
    Py_CLEAR(self->key);
    for (int i = 0; i < self->nbuf; i++)
        PyBuffer_Release(&self->buf[i]);
    for (int i = 0; i < self->nl; i++)
        close(self->lfd[i]);
    freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    f(self);
    Py_DECREF(tp);
}

static MarkSlot *marker_slot(MarkerObject *m) {
    MarkSlot *s = thread_slot(m->key, "stallcase.slot", sizeof(MarkSlot), slot_free);
    if (s != NULL)
        s->ready = 1;
    return s;
}

static int marker_write(MarkerObject *m, int64_t ts, int64_t tid, int64_t state, const int64_t v[3]) {
    int64_t k;
    if (ring_next(m->ctr, &k) < 0)
        return -1;
    int64_t j = k & m->mask;
    m->col[0][j] = ts;
    m->col[1][j] = tid;
    m->col[2][j] = state;
    m->col[3][j] = v[0];
    m->col[4][j] = v[1];
    m->col[5][j] = v[2];
    m->col[6][j] = k; /* last: the commit mark */
    return 0;
}

static int marker_scan(MarkerObject *m) {
    m->scanned = 1;
    PyObject *r = PyObject_CallNoArgs(m->scan);
    if (r == NULL) {
        PyObject *prefix = PyUnicode_FromString("launcher scan: ");
        if (prefix == NULL)
            return -1;
        report_exc(m->on_error, prefix);
        Py_DECREF(prefix);
        return 0;
    }
    Py_DECREF(r);
    return 0;
}

static int marker_launchers(MarkerObject *m, int64_t self_tid) {
    if (!m->nl)
        return 0;
    int64_t ts = mono_ns(), v[3];
    for (int i = 0; i < m->nl;) {
        if (m->ltid[i] == self_tid) {
            i++;
            continue;
        }
        if (read_schedstat(m->lfd[i], v)) { /* the thread ended */
            close(m->lfd[i]);
            memmove(&m->ltid[i], &m->ltid[i + 1], (size_t)(m->nl - i - 1) * sizeof(int64_t));
            memmove(&m->lfd[i], &m->lfd[i + 1], (size_t)(m->nl - i - 1) * sizeof(int));
            m->nl--;
            continue;
        }
        /* State unknown without reading stat (costly): counters are what the diagnosis reads. */
        if (marker_write(m, ts, m->ltid[i], m->unknown, v) < 0)
            return -1;
        i++;
    }
    return 0;
}

/* One sample of the calling thread, now (SchedSampler.mark_current_thread). */
static int marker_mark_impl(MarkerObject *m, MarkSlot *s) {
    TidSlot *t = tid_slot();
    if (t == NULL)
        return -1;
    int fd = schedstat_fd(t, m->on_error);
    if (fd < 0)
        return 0;
    if (!m->scanned && marker_scan(m) < 0) /* a first mark outside a step start: scan first */
        return -1;
    int64_t v[3];
    int rc = read_schedstat(fd, v);
    if (rc) {
        report(m->on_error, rc == -1 ? PyUnicode_FromFormat("step-boundary sample: [Errno %d] %s", errno,
                                                            strerror(errno))
                                     : PyUnicode_FromString("step-boundary sample: unreadable schedstat"));
        return 0;
    }
    int64_t ts = mono_ns();
    if (marker_write(m, ts, t->tid, m->running, v) < 0)
        return -1;
    s->last = ts;
    m->marks++;
    return marker_launchers(m, t->tid);
}

/* The mark at a step's start: reuses this thread's mark under reuse_ns old (sched_marks.py). */
static int marker_start_impl(MarkerObject *m) {
    MarkSlot *s = marker_slot(m);
    if (s == NULL)
        return -1;
    if (++m->starts_since_scan >= m->rescan) {
        m->starts_since_scan = 0;
        if (marker_scan(m) < 0)
            return -1;
        s->last = 0; /* the scan took time: this start takes its own sample */
    }
    if (s->last && mono_ns() - s->last < m->reuse_ns) {
        m->reused++;
        return 0;
    }
    return marker_mark_impl(m, s);
}

static PyObject *marker_mark(MarkerObject *self, PyObject *unused) {
    if (self->ctr == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Marker not initialized");
        return NULL;
    }
    MarkSlot *s = marker_slot(self);
    if (s == NULL || marker_mark_impl(self, s) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *marker_mark_start(MarkerObject *self, PyObject *unused) {
    if (self->ctr == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Marker not initialized");
        return NULL;
    }
    if (marker_start_impl(self) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *marker_watch(MarkerObject *self, PyObject *args) {
    long long tid;
    int fd;
    if (!PyArg_ParseTuple(args, "Li", &tid, &fd))
        return NULL;
    for (int i = 0; i < self->nl; i++)
        if (self->ltid[i] == tid)
            Py_RETURN_FALSE;
    if (self->nl >= MAX_LAUNCHERS)
        Py_RETURN_FALSE;
    self->ltid[self->nl] = tid;
    self->lfd[self->nl++] = fd; /* the marker owns it now */
    Py_RETURN_TRUE;
}

static PyObject *marker_watching(MarkerObject *self, PyObject *unused) {
    PyObject *t = PyTuple_New(self->nl);
    if (t == NULL)
        return NULL;
    for (int i = 0; i < self->nl; i++) {
        PyObject *v = PyLong_FromLongLong(self->ltid[i]);
        if (v == NULL) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SetItem(t, i, v);
    }
    return t;
}

static PyObject *marker_get_marks(MarkerObject *self, void *c) { return PyLong_FromLongLong(self->marks); }
static PyObject *marker_get_reused(MarkerObject *self, void *c) { return PyLong_FromLongLong(self->reused); }
static PyObject *marker_get_scanned(MarkerObject *self, void *c) { return PyBool_FromLong(self->scanned); }

static PyMethodDef marker_methods[] = {
    {"mark", (PyCFunction)marker_mark, METH_NOARGS, "one sample of the calling thread (and the launchers), now"},
    {"mark_start", (PyCFunction)marker_mark_start, METH_NOARGS, "the mark at a step's start (may reuse the last)"},
    {"watch", (PyCFunction)marker_watch, METH_VARARGS, "watch(tid, fd): sample this thread too; owns fd"},
    {"watching", (PyCFunction)marker_watching, METH_NOARGS, "the watched threads' ids"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef marker_getset[] = {
    {"boundary_marks", (getter)marker_get_marks, NULL, "samples taken at step boundaries", NULL},
    {"reused_marks", (getter)marker_get_reused, NULL, "step starts that reused the previous end mark", NULL},
    {"scanned", (getter)marker_get_scanned, NULL, "launchers scanned at least once", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot marker_slots[] = {
    {Py_tp_init, (void *)marker_init},
    {Py_tp_dealloc, (void *)marker_dealloc},
    {Py_tp_traverse, (void *)marker_traverse},
    {Py_tp_clear, (void *)marker_clear},
    {Py_tp_methods, marker_methods},
    {Py_tp_getset, marker_getset},
    {Py_tp_new, (void *)PyType_GenericNew},
    {Py_tp_doc, "Marker(cols, ctr, mask, scan, on_error, rescan, reuse_ns, running, unknown)"},
    {0, NULL},
};

static PyType_Spec marker_spec = {
    "workflow_lib.capture._stepext.Marker", sizeof(MarkerObject), 0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    marker_slots,
};

/* ---- StepCore: one recorder's step rows (step_core.py) ----------------------------------- */

typedef struct {
    int ready;
    int has_last;
    int64_t last_id, last_end; /* this thread's previous step (for `follow`) */
} StepSlot;

/* The most steps the gate lets pass between two calls of `after` (step_core.GATE_MAX). */
#define GATE_MAX 64

enum { ST_ID, ST_TID, ST_START, ST_END, ST_ITEMS, ST_TOKENS, ST_SEQ, SP_START, SP_END, SP_CODE, SP_SEQ, DU_D, DU_I,
       DU_T, NCOLS };

typedef struct {
    PyObject_HEAD
    int64_t *col[NCOLS];
    Py_buffer buf[NCOLS];
    int nbuf;
    Py_ssize_t du_len;
    PyObject *st_ctr, *sp_ctr, *du_ctr, *key;
    int64_t st_mask, sp_mask, between_id;
    PyObject *marker; /* a Marker, or NULL */
    PyObject *after;  /* after(step_id, t1, duration, passed) or NULL: the trigger and GPU windows */
    PyObject *on_error;
    PyObject *owner; /* the FlightRecorder whose steps step() makes, or NULL */
    /* The gate (step_core.py's module doc): steps that `after` need not see one by one pass
     * it, their durations kept in `passed` for the next call. Set by gate(); every call of
     * `after` opens it again (gate_ns -1: every step calls). */
    int64_t gate_ns, gate_left, gate_at_ns;
    int64_t passed[GATE_MAX];
    int npassed;
} StepCoreObject;

static PyObject *core_take(StepCoreObject *self, PyObject *unused);

static int core_init(StepCoreObject *self, PyObject *args, PyObject *kwds) {
    PyObject *st, *sp, *du, *st_ctr, *sp_ctr, *du_ctr, *marker, *on_error;
    long long st_mask, sp_mask, between_id;
    if (kwds && PyDict_Size(kwds)) {
        PyErr_SetString(PyExc_TypeError, "StepCore takes positional arguments only");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "OOLOOLLOOOO", &st, &st_ctr, &st_mask, &sp, &sp_ctr, &sp_mask, &between_id, &du,
                          &du_ctr, &marker, &on_error))
        return -1;
    if (self->nbuf || self->st_ctr) {
        PyErr_SetString(PyExc_RuntimeError, "StepCore already initialized");
        return -1;
    }
    Py_ssize_t n = get_columns(st, 7, self->buf, &self->col[ST_ID], &self->nbuf);
    if (n < 0 || check_mask(st_mask, n) < 0)
        return -1;
    n = get_columns(sp, 4, self->buf, &self->col[SP_START], &self->nbuf);
    if (n < 0 || check_mask(sp_mask, n) < 0)
        return -1;
    n = get_columns(du, 3, self->buf, &self->col[DU_D], &self->nbuf);
    if (n < 0)
        return -1;
    self->du_len = n;
    if (marker != Py_None && !PyObject_TypeCheck(marker, MarkerType)) {
        PyErr_SetString(PyExc_TypeError, "StepCore: marker must be a Marker or None");
        return -1;
    }
    if (!PyCallable_Check(on_error)) {
        PyErr_SetString(PyExc_TypeError, "StepCore: on_error must be callable");
        return -1;
    }
    self->key = new_key();
    if (self->key == NULL)
        return -1;
    Py_INCREF(st_ctr);
    Py_INCREF(sp_ctr);
    Py_INCREF(du_ctr);
    Py_INCREF(on_error);
    self->st_ctr = st_ctr;
    self->sp_ctr = sp_ctr;
    self->du_ctr = du_ctr;
    self->on_error = on_error;
    if (marker != Py_None) {
        Py_INCREF(marker);
        self->marker = marker;
    }
    self->st_mask = st_mask;
    self->sp_mask = sp_mask;
    self->between_id = between_id;
    self->gate_ns = -1;
    return 0;
}

static int core_traverse(StepCoreObject *self, visitproc visit, void *arg) {
    Py_VISIT(Py_TYPE((PyObject *)self));
    Py_VISIT(self->marker);
    Py_VISIT(self->after);
    Py_VISIT(self->on_error);
    Py_VISIT(self->owner);
    return 0;
}

static int core_clear(StepCoreObject *self) {
    Py_CLEAR(self->marker);
    Py_CLEAR(self->after);
    Py_CLEAR(self->on_error);
    Py_CLEAR(self->owner);
    return 0;
}

static void core_dealloc(StepCoreObject *self) {
    PyTypeObject *tp = Py_TYPE((PyObject *)self);
    PyObject_GC_UnTrack((PyObject *)self);
    core_clear(self);
    Py_CLEAR(self->st_ctr);
    Py_CLEAR(self->sp_ctr);
    Py_CLEAR(self->du_ctr);
    drop_slot(self->key);
    Py_CLEAR(self->key);
    for (int i = 0; i < self->nbuf; i++)
        PyBuffer_Release(&self->buf[i]);
    freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    f(self);
    Py_DECREF(tp);
}

static StepSlot *core_slot(StepCoreObject *c) {
    StepSlot *s = thread_slot(c->key, "stallcase.slot", sizeof(StepSlot), slot_free);
    if (s != NULL)
        s->ready = 1;
    return s;
}

/* A declared count as int64 (-1: None); 0 ok, -1 with an exception. */
static int as_count(PyObject *o, int64_t *out) {
    if (o == Py_None) {
        *out = -1;
        return 0;
    }
    PyObject *v = PyLong_Check(o) ? (Py_INCREF(o), o) : PyNumber_Long(o);
    if (v == NULL)
        return -1;
    long long x = PyLong_AsLongLong(v);
    Py_DECREF(v);
    if (x == -1 && PyErr_Occurred())
        return -1;
    *out = (int64_t)x;
    return 0;
}

static int core_row(PyObject *ctr, int64_t mask, int64_t **col, int n, const int64_t *v) {
    int64_t k;
    if (ring_next(ctr, &k) < 0)
        return -1;
    int64_t j = k & mask;
    for (int i = 0; i < n; i++)
        col[i][j] = v[i];
    col[n][j] = k; /* last: the commit mark */
    return 0;
}

/* The step [t0, t1] (FlightRecorder._end_step; step_core.PyStepCore.record, the same rules).
 * thread_id < 0: the calling thread's, which then keeps this step as its previous one. */
static int core_record(StepCoreObject *c, StepSlot *s, TidSlot *ts, PyObject *step_id, int64_t t0, int64_t t1, int64_t thread_id,
                       PyObject *items, PyObject *tokens, int follow) {
    int64_t sid = 0;
    int have_id = as_count(step_id, &sid) == 0; /* int(step_id), as record_step takes it */
    if (!have_id)
        PyErr_Clear();
    int gap = 0;
    int64_t gap_from = 0;
    if (follow) {
        if (have_id && s->has_last && s->last_id + 1 == sid && s->last_end <= t0) {
            gap = 1;
            gap_from = s->last_end;
        }
        s->has_last = have_id;
        s->last_id = sid;
        s->last_end = t1;
    } else if (thread_id < 0) {
        s->has_last = have_id;
        s->last_id = sid;
        s->last_end = t1;
    }
    int64_t start = gap ? gap_from : t0;
    int64_t n_items, n_tokens;
    if (as_count(items, &n_items) < 0 || as_count(tokens, &n_tokens) < 0) {
        PyObject *t, *v, *tb;
        PyErr_Fetch(&t, &v, &tb);
        PyErr_NormalizeException(&t, &v, &tb);
        report(c->on_error, PyUnicode_FromFormat("step %S: items/tokens: %S", step_id, v ? v : Py_None));
        Py_XDECREF(t);
        Py_XDECREF(v);
        Py_XDECREF(tb);
        n_items = n_tokens = -1;
    }
    int64_t k;
    if (ring_next(c->du_ctr, &k) < 0)
        return -1;
    if (k < c->du_len) { /* the first du_len steps' durations (steps_out.StepDurations) */
        c->col[DU_D][k] = t1 - start;
        c->col[DU_I][k] = n_items;
        c->col[DU_T][k] = n_tokens;
    }
    if (gap) {
        int64_t v[3] = {gap_from, t0, (ts->tid << 20) | c->between_id};
        if (core_row(c->sp_ctr, c->sp_mask, &c->col[SP_START], 3, v) < 0)
            return -1;
    }
    if (!have_id) {
        PyObject *p = PyUnicode_FromFormat("step %S: ", step_id);
        if (p == NULL)
            return -1;
        as_count(step_id, &sid); /* the exception again, to report it */
        report_exc(c->on_error, p);
        Py_DECREF(p);
        return 0;
    }
    int64_t v[6] = {sid, thread_id < 0 ? ts->tid : thread_id, start, t1, n_items, n_tokens};
    if (core_row(c->st_ctr, c->st_mask, &c->col[ST_ID], 6, v) < 0)
        return -1;
    if (c->after != NULL) {
        int64_t d = t1 - start;
        if (d <= c->gate_ns && --c->gate_left > 0 && !(c->gate_at_ns && t1 >= c->gate_at_ns) && c->npassed < GATE_MAX) {
            c->passed[c->npassed++] = d; /* the gate's bounds say `after` has nothing to do for it */
            return 0;
        }
        PyObject *passed = core_take(c, NULL); /* the gate opens: `after` sets it again when it can */
        if (passed == NULL)
            return -1;
        PyObject *a1 = PyLong_FromLongLong(t1), *a2 = PyLong_FromLongLong(d);
        PyObject *r = (a1 && a2) ? PyObject_CallFunctionObjArgs(c->after, step_id, a1, a2, passed, NULL) : NULL;
        Py_XDECREF(a1);
        Py_XDECREF(a2);
        Py_DECREF(passed);
        if (r == NULL)
            return -1;
        Py_DECREF(r);
    }
    return 0;
}

static void core_failed(StepCoreObject *c, PyObject *step_id) {
    PyObject *p = PyUnicode_FromFormat("step %S: ", step_id);
    if (p == NULL) {
        PyErr_Clear();
        return;
    }
    report_exc(c->on_error, p); /* a recorder bug must not become the workload's exception */
    Py_DECREF(p);
}

/* A step starts: its start mark, then its start time. Never raises. */
static int64_t core_start_impl(StepCoreObject *self) {
    if (self->marker != NULL && marker_start_impl((MarkerObject *)self->marker) < 0) {
        PyObject *p = PyUnicode_FromString("step start: ");
        if (p == NULL)
            PyErr_Clear();
        else {
            report_exc(self->on_error, p); /* never into the workload */
            Py_DECREF(p);
        }
    }
    return mono_ns();
}

static PyObject *core_start(StepCoreObject *self, PyObject *unused) {
    return PyLong_FromLongLong(core_start_impl(self));
}

/* The step that started at t0 ends now: its rows, then its end mark. Never raises. */
static void core_end_impl(StepCoreObject *self, PyObject *step_id, int64_t t0, PyObject *items, PyObject *tokens,
                          int follow) {
    int64_t t1 = mono_ns();
    StepSlot *s = core_slot(self);
    TidSlot *ts = s ? tid_slot() : NULL;
    if (ts == NULL || core_record(self, s, ts, step_id, t0, t1, -1, items, tokens, follow) < 0) {
        core_failed(self, step_id);
        return;
    }
    if (self->marker != NULL) {
        MarkerObject *m = (MarkerObject *)self->marker;
        MarkSlot *ms = marker_slot(m);
        if (ms == NULL || marker_mark_impl(m, ms) < 0) {
            core_failed(self, step_id);
            return;
        }
        /* The next step starts after this sample, so each step stays bracketed by two samples
         * of its thread; the few microseconds of sampling belong to no step. */
        if (follow)
            s->last_end = mono_ns();
    }
}

/* step_end(step_id, t0, items, tokens[, follow=True]): the step ends now. */
static PyObject *core_step_end(StepCoreObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 4 || nargs > 5) {
        PyErr_SetString(PyExc_TypeError, "step_end(step_id, t0, items, tokens[, follow])");
        return NULL;
    }
    long long t0 = PyLong_AsLongLong(args[1]);
    if (t0 == -1 && PyErr_Occurred())
        return NULL;
    int follow = nargs < 5 ? 1 : PyObject_IsTrue(args[4]);
    if (follow < 0)
        return NULL;
    core_end_impl(self, args[0], t0, args[2], args[3], follow);
    Py_RETURN_NONE;
}

/* record(step_id, t0, t1, thread_id, items, tokens, follow): a step whose times were taken
 * elsewhere (the sidecar, in-process capture); thread_id None: the calling thread. */
static PyObject *core_record_m(StepCoreObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "record(step_id, t0, t1, thread_id, items, tokens, follow)");
        return NULL;
    }
    long long t0 = PyLong_AsLongLong(args[1]), t1 = PyLong_AsLongLong(args[2]);
    long long tid = args[3] == Py_None ? -1 : PyLong_AsLongLong(args[3]);
    if (PyErr_Occurred())
        return NULL;
    int follow = PyObject_IsTrue(args[6]);
    if (follow < 0)
        return NULL;
    StepSlot *s = core_slot(self);
    TidSlot *ts = s ? tid_slot() : NULL;
    if (ts == NULL || core_record(self, s, ts, args[0], t0, t1, tid, args[4], args[5], follow) < 0)
        core_failed(self, args[0]);
    Py_RETURN_NONE;
}

static PyObject *core_forget_last(StepCoreObject *self, PyObject *unused) {
    StepSlot *s = core_slot(self);
    if (s == NULL)
        return NULL;
    s->has_last = 0;
    Py_RETURN_NONE;
}

static PyObject *core_get_after(StepCoreObject *self, void *c) {
    PyObject *a = self->after ? self->after : Py_None;
    Py_INCREF(a);
    return a;
}

static int core_set_after(StepCoreObject *self, PyObject *v, void *c) {
    if (v != NULL && v != Py_None && !PyCallable_Check(v)) {
        PyErr_SetString(PyExc_TypeError, "after must be callable or None");
        return -1;
    }
    PyObject *old = self->after;
    self->after = (v == NULL || v == Py_None) ? NULL : (Py_INCREF(v), v);
    Py_XDECREF(old);
    self->gate_ns = -1; /* a new `after` sees every step until it sets the gate */
    self->gate_left = self->gate_at_ns = 0;
    self->npassed = 0;
    return 0;
}

/* gate(max_ns, steps, at_ns): until `after` is next called, a step passes (its duration kept
 * for that call) while its duration is <= max_ns, it is not the steps-th step from now, its
 * end is before at_ns (0: no time) and fewer than GATE_MAX have passed. */
static PyObject *core_gate(StepCoreObject *self, PyObject *args) {
    long long ns, steps, at;
    if (!PyArg_ParseTuple(args, "LLL", &ns, &steps, &at))
        return NULL;
    self->gate_ns = ns;
    self->gate_left = steps;
    self->gate_at_ns = at;
    Py_RETURN_NONE;
}

/* take(): the durations of the steps that passed since `after` last ran, in order; the gate
 * opens (the caller handles them now: the recorder before it changes what the bounds assumed). */
static PyObject *core_take(StepCoreObject *self, PyObject *unused) {
    PyObject *passed = PyTuple_New(self->npassed);
    if (passed == NULL)
        return NULL;
    for (int i = 0; i < self->npassed; i++) {
        PyObject *v = PyLong_FromLongLong(self->passed[i]);
        if (v == NULL || PyTuple_SetItem(passed, i, v) < 0) { /* SetItem steals v */
            Py_DECREF(passed);
            return NULL;
        }
    }
    self->npassed = 0;
    self->gate_ns = -1;
    self->gate_left = self->gate_at_ns = 0;
    return passed;
}

static PyObject *core_get_gate(StepCoreObject *self, void *c) {
    return Py_BuildValue("(LLLi)", (long long)self->gate_ns, (long long)self->gate_left, (long long)self->gate_at_ns,
                         self->npassed);
}

/* ---- Step: `with rec.step(i, items=n):` in C (steps.Step is the Python one) ------------- *
 * The recorder's state is read and written as steps.Step does: `paused` when the step begins
 * (a step keeps the state it began in), `_open` while it is open (pause()/resume() inside it
 * wait for its end), `_pending` and `_apply_pending()` after it. */

static PyTypeObject *StepType;
static PyObject *str_paused, *str_open, *str_pending, *str_apply_pending;

typedef struct {
    PyObject_HEAD
    PyObject *core; /* StepCoreObject */
    PyObject *step_id, *items, *tokens;
    long long t0;
    char live;
} StepObject;

static int stepobj_traverse(StepObject *self, visitproc visit, void *arg) {
    Py_VISIT(Py_TYPE((PyObject *)self));
    Py_VISIT(self->core);
    Py_VISIT(self->step_id);
    Py_VISIT(self->items);
    Py_VISIT(self->tokens);
    return 0;
}

static int stepobj_clear(StepObject *self) {
    Py_CLEAR(self->core);
    Py_CLEAR(self->step_id);
    Py_CLEAR(self->items);
    Py_CLEAR(self->tokens);
    return 0;
}

static void stepobj_dealloc(StepObject *self) {
    PyTypeObject *tp = Py_TYPE((PyObject *)self);
    PyObject_GC_UnTrack((PyObject *)self);
    stepobj_clear(self);
    freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    f(self);
    Py_DECREF(tp);
}

static PyObject *stepobj_enter(StepObject *self, PyObject *unused) {
    StepCoreObject *c = (StepCoreObject *)self->core;
    if (c == NULL || c->owner == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Step: its recorder is gone");
        return NULL;
    }
    PyObject *paused = PyObject_GetAttr(c->owner, str_paused);
    if (paused == NULL)
        return NULL;
    int p = PyObject_IsTrue(paused);
    Py_DECREF(paused);
    if (p < 0)
        return NULL;
    self->live = !p;
    if (PyObject_SetAttr(c->owner, str_open, (PyObject *)self) < 0)
        return NULL;
    if (self->live)
        self->t0 = core_start_impl(c);
    Py_INCREF((PyObject *)self);
    return (PyObject *)self;
}

static PyObject *stepobj_exit(StepObject *self, PyObject *const *args, Py_ssize_t nargs) {
    StepCoreObject *c = (StepCoreObject *)self->core;
    if (c == NULL || c->owner == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Step: its recorder is gone");
        return NULL;
    }
    PyObject *owner = c->owner;
    Py_INCREF(owner);
    PyObject *r = NULL;
    if (PyObject_SetAttr(owner, str_open, Py_None) < 0)
        goto done;
    if (self->live)
        core_end_impl(c, self->step_id, self->t0, self->items, self->tokens, 1);
    PyObject *pending = PyObject_GetAttr(owner, str_pending);
    if (pending == NULL)
        goto done;
    int has = pending != Py_None;
    Py_DECREF(pending);
    if (has) {
        PyObject *a = PyObject_CallMethodObjArgs(owner, str_apply_pending, NULL);
        if (a == NULL)
            goto done;
        Py_DECREF(a);
    }
    r = Py_False;
    Py_INCREF(r);
done:
    Py_DECREF(owner);
    return r;
}

static PyObject *stepobj_get(StepObject *self, void *which) {
    PyObject *v = which == (void *)0 ? self->step_id : which == (void *)1 ? self->items : self->tokens;
    v = v ? v : Py_None;
    Py_INCREF(v);
    return v;
}

static int stepobj_set(StepObject *self, PyObject *v, void *which) {
    if (v == NULL) {
        PyErr_SetString(PyExc_AttributeError, "cannot delete a step's attribute");
        return -1;
    }
    PyObject **slot = which == (void *)0 ? &self->step_id : which == (void *)1 ? &self->items : &self->tokens;
    PyObject *old = *slot;
    Py_INCREF(v);
    *slot = v;
    Py_XDECREF(old);
    return 0;
}

static PyObject *stepobj_get_live(StepObject *self, void *c) { return PyBool_FromLong(self->live); }
static PyObject *stepobj_get_t0(StepObject *self, void *c) { return PyLong_FromLongLong(self->t0); }

static PyMethodDef stepobj_methods[] = {
    {"__enter__", (PyCFunction)stepobj_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))stepobj_exit, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef stepobj_getset[] = {
    {"step_id", (getter)stepobj_get, (setter)stepobj_set, "the step's id", (void *)0},
    {"items", (getter)stepobj_get, (setter)stepobj_set, "items this step processes (int, or None)", (void *)1},
    {"tokens", (getter)stepobj_get, (setter)stepobj_set, "tokens this step processes (int, or None)", (void *)2},
    {"live", (getter)stepobj_get_live, NULL, "recorded (began while the recorder was not paused)", NULL},
    {"t0", (getter)stepobj_get_t0, NULL, "its start (host ns), once entered live", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot stepobj_slots[] = {
    {Py_tp_dealloc, (void *)stepobj_dealloc},
    {Py_tp_traverse, (void *)stepobj_traverse},
    {Py_tp_clear, (void *)stepobj_clear},
    {Py_tp_methods, stepobj_methods},
    {Py_tp_getset, stepobj_getset},
    {Py_tp_doc, "`with rec.step(i, items=n):` (made by StepCore.step)"},
    {0, NULL},
};

static PyType_Spec stepobj_spec = {
    "workflow_lib.capture._stepext.Step", sizeof(StepObject), 0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    stepobj_slots,
};

/* step(step_id, *, items=None, tokens=None): FlightRecorder.step, for the recorder `owner`. */
static PyObject *core_step(StepCoreObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"step_id", "items", "tokens", NULL};
    PyObject *step_id, *items = Py_None, *tokens = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|$OO:step", kwlist, &step_id, &items, &tokens))
        return NULL;
    allocfunc alloc = (allocfunc)PyType_GetSlot(StepType, Py_tp_alloc);
    StepObject *o = (StepObject *)alloc(StepType, 0);
    if (o == NULL)
        return NULL;
    Py_INCREF((PyObject *)self);
    o->core = (PyObject *)self;
    Py_INCREF(step_id);
    o->step_id = step_id;
    Py_INCREF(items);
    o->items = items;
    Py_INCREF(tokens);
    o->tokens = tokens;
    return (PyObject *)o;
}

static PyObject *core_get_owner(StepCoreObject *self, void *c) {
    PyObject *a = self->owner ? self->owner : Py_None;
    Py_INCREF(a);
    return a;
}

static int core_set_owner(StepCoreObject *self, PyObject *v, void *c) {
    PyObject *old = self->owner;
    self->owner = (v == NULL || v == Py_None) ? NULL : (Py_INCREF(v), v);
    Py_XDECREF(old);
    return 0;
}

static PyMethodDef core_methods[] = {
    {"start", (PyCFunction)core_start, METH_NOARGS, "a step starts: its start mark; returns its start time"},
    {"step", (PyCFunction)(void (*)(void))core_step, METH_VARARGS | METH_KEYWORDS,
     "step(step_id, *, items=None, tokens=None): a Step of the recorder `owner`"},
    {"step_end", (PyCFunction)(void (*)(void))core_step_end, METH_FASTCALL, "the step ends now"},
    {"record", (PyCFunction)(void (*)(void))core_record_m, METH_FASTCALL, "a step timed elsewhere"},
    {"forget_last", (PyCFunction)core_forget_last, METH_NOARGS, "the calling thread's next step follows none"},
    {"gate", (PyCFunction)core_gate, METH_VARARGS, "gate(max_ns, steps, at_ns): which steps pass `after`"},
    {"take", (PyCFunction)core_take, METH_NOARGS, "the passed steps' durations; the gate opens"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef core_getset[] = {
    {"after", (getter)core_get_after, (setter)core_set_after, "after(step_id, t1, duration, passed) or None", NULL},
    {"gate_state", (getter)core_get_gate, NULL, "(max_ns, steps, at_ns, passed so far)", NULL},
    {"owner", (getter)core_get_owner, (setter)core_set_owner, "the recorder whose steps step() makes", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot core_slots[] = {
    {Py_tp_init, (void *)core_init},
    {Py_tp_dealloc, (void *)core_dealloc},
    {Py_tp_traverse, (void *)core_traverse},
    {Py_tp_clear, (void *)core_clear},
    {Py_tp_methods, core_methods},
    {Py_tp_getset, core_getset},
    {Py_tp_new, (void *)PyType_GenericNew},
    {Py_tp_doc, "StepCore(steps_cols, steps_ctr, steps_mask, spans_cols, spans_ctr, spans_mask, between_id, "
                "durations_cols, durations_ctr, marker, on_error)"},
    {0, NULL},
};

static PyType_Spec core_spec = {
    "workflow_lib.capture._stepext.StepCore", sizeof(StepCoreObject), 0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    core_slots,
};

static PyObject *ext_after_fork(PyObject *m, PyObject *unused) {
    /* The child's threads have other ids and the parent's schedstat fds read the parent's
     * threads: a fresh key makes each thread open its own again. */
    PyObject *key = new_key();
    if (key == NULL)
        return NULL;
    PyObject *old = fd_key;
    fd_key = key;
    Py_XDECREF(old);
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"after_fork", ext_after_fork, METH_NOARGS, "forget every thread's id and schedstat fd (in a forked child)"},
    {NULL, NULL, 0, NULL},
};

static int ext_exec(PyObject *m) {
    if (fd_key == NULL && (fd_key = new_key()) == NULL)
        return -1;
    PyObject *marker = PyType_FromSpec(&marker_spec);
    if (marker == NULL)
        return -1;
    MarkerType = (PyTypeObject *)marker; /* the module keeps it alive */
    if (PyModule_AddObject(m, "Marker", marker) < 0) {
        Py_DECREF(marker);
        return -1;
    }
    if ((str_paused = PyUnicode_InternFromString("paused")) == NULL ||
        (str_open = PyUnicode_InternFromString("_open")) == NULL ||
        (str_pending = PyUnicode_InternFromString("_pending")) == NULL ||
        (str_apply_pending = PyUnicode_InternFromString("_apply_pending")) == NULL)
        return -1;
    PyObject *stepobj = PyType_FromSpec(&stepobj_spec);
    if (stepobj == NULL)
        return -1;
    StepType = (PyTypeObject *)stepobj; /* the module keeps it alive */
    if (PyModule_AddObject(m, "Step", stepobj) < 0) {
        Py_DECREF(stepobj);
        return -1;
    }
    PyObject *core = PyType_FromSpec(&core_spec);
    if (core == NULL || PyModule_AddObject(m, "StepCore", core) < 0) {
        Py_XDECREF(core);
        return -1;
    }
    return 0;
}

static PyModuleDef_Slot module_slots[] = {{Py_mod_exec, (void *)ext_exec}, {0, NULL}};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_stepext", "C step hot path (optional; see step_core.py)", 0, module_methods, module_slots,
};

PyMODINIT_FUNC PyInit__stepext(void) { return PyModuleDef_Init(&moduledef); }
