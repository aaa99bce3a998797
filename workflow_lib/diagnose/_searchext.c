/* numpy.searchsorted for int64 keys that mostly come in order, by galloping from the last answer.
 *
 * The diagnosis joins time-ordered columns of a rank (steps, kernels, calls, their unions) by
 * binary search: a 1M-step incident makes ~200 searches of up to 2M sorted keys into 1M-2M
 * sorted values. numpy's binary search starts every key's search from the whole upper part of
 * the array, so each key costs ~log2(n) probes at cache-missing distances (~35 ms for 2M keys
 * into 2M values, ~25% of that diagnosis's CPU). Keys in order are a merge: starting from the
 * previous key's answer and galloping (1, 2, 4, ... places, then a binary search inside the
 * last stride) costs O(log d) for a key d places on, O(n + m) in all, and stays correct (only
 * slower) for keys out of order, which gallop backwards the same way.
 *
 * Optional, like capture/_spanext.c and _stepext.c: without it diagnose/search.py calls
 * numpy.searchsorted, whose answers these equal (tests/test_diagnose_search.py).
 * Stable ABI (Py_LIMITED_API 3.11), buffers only: no numpy headers.
 */
#define Py_LIMITED_API 0x030B0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* The count of values before `key`: a[i] < key (left) or a[i] <= key (right), a sorted. The
 * answer r splits a into a prefix where the predicate holds and the rest; `hint` is where to
 * start looking (the previous key's answer). A few places are walked one by one first: keys
 * in order mostly move a place or two, where a gallop's branches cost more than the walk. */
#define WALK 4
#define GALLOP(NAME, BEFORE)                                                                           \
    static Py_ssize_t NAME(const int64_t *a, Py_ssize_t n, int64_t key, Py_ssize_t hint) {            \
        Py_ssize_t lo, hi, step = 1;                                                                   \
        if (hint < n && BEFORE(a[hint])) { /* r > hint: forward */                                   \
            lo = hint + 1;                                                                             \
            Py_ssize_t stop = lo + WALK < n ? lo + WALK : n;                                           \
            while (lo < stop && BEFORE(a[lo]))                                                         \
                lo++;                                                                                  \
            if (lo < stop || lo == n)                                                                  \
                return lo;                                                                             \
            Py_ssize_t probe = lo;                                                                     \
            while (probe < n && BEFORE(a[probe])) {                                                    \
                lo = probe + 1;                                                                        \
                step <<= 1;                                                                            \
                probe = lo + step - 1;                                                                 \
            }                                                                                          \
            hi = probe < n ? probe : n;                                                                \
        } else { /* r <= hint: backward */                                                             \
            hi = hint < n ? hint : n;                                                                  \
            Py_ssize_t probe = hi - 1;                                                                 \
            while (probe >= 0 && !BEFORE(a[probe])) {                                                  \
                hi = probe;                                                                            \
                step <<= 1;                                                                            \
                probe = hi - step;                                                                     \
            }                                                                                          \
            lo = probe >= 0 ? probe + 1 : 0;                                                           \
        }                                                                                              \
        while (lo < hi) { /* r in [lo, hi] */                                                          \
            Py_ssize_t mid = lo + ((hi - lo) >> 1);                                                    \
            if (BEFORE(a[mid]))                                                                        \
                lo = mid + 1;                                                                          \
            else                                                                                       \
                hi = mid;                                                                              \
        }                                                                                              \
        return lo;                                                                                     \
    }

#define BEFORE_LEFT(x) ((x) < key)
#define BEFORE_RIGHT(x) ((x) <= key)
GALLOP(gallop_left, BEFORE_LEFT)
GALLOP(gallop_right, BEFORE_RIGHT)

static int int64_buffer(PyObject *obj, Py_buffer *view, int writable, const char *what) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    const char *f = view->format ? view->format : "";
    while (*f == '@' || *f == '=' || *f == '<')
        f++;
    if (view->itemsize != 8 || (strcmp(f, "l") != 0 && strcmp(f, "q") != 0)) {
        PyErr_Format(PyExc_TypeError, "%s: a contiguous int64 buffer is needed (format %s)", what,
                     view->format ? view->format : "?");
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* search(values, keys, out, right): out[j] = the count of values before keys[j]. */
static PyObject *search(PyObject *self, PyObject *args) {
    PyObject *va, *vk, *vo;
    int right;
    if (!PyArg_ParseTuple(args, "OOOp", &va, &vk, &vo, &right))
        return NULL;
    Py_buffer a, k, o;
    if (int64_buffer(va, &a, 0, "values") < 0)
        return NULL;
    if (int64_buffer(vk, &k, 0, "keys") < 0) {
        PyBuffer_Release(&a);
        return NULL;
    }
    if (int64_buffer(vo, &o, 1, "out") < 0) {
        PyBuffer_Release(&a);
        PyBuffer_Release(&k);
        return NULL;
    }
    Py_ssize_t n = a.len / 8, m = k.len / 8;
    if (o.len / 8 != m) {
        PyErr_SetString(PyExc_ValueError, "out: one place per key is needed");
    } else {
        const int64_t *av = (const int64_t *)a.buf, *kv = (const int64_t *)k.buf;
        int64_t *ov = (int64_t *)o.buf;
        Py_BEGIN_ALLOW_THREADS
        Py_ssize_t hint = 0;
        if (right)
            for (Py_ssize_t j = 0; j < m; j++)
                ov[j] = (int64_t)(hint = gallop_right(av, n, kv[j], hint));
        else
            for (Py_ssize_t j = 0; j < m; j++)
                ov[j] = (int64_t)(hint = gallop_left(av, n, kv[j], hint));
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&a);
    PyBuffer_Release(&k);
    PyBuffer_Release(&o);
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"search", search, METH_VARARGS, "search(values, keys, out, right): numpy.searchsorted by galloping (int64)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "_searchext", "sorted search for the diagnosis (optional; see search.py)",
                                       0, methods, NULL};

PyMODINIT_FUNC PyInit__searchext(void) { return PyModuleDef_Init(&moduledef); }
