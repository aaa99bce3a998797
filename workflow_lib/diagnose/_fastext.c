/* The diagnosis's optional C paths: numpy.searchsorted by galloping, and the steps' longest-gap
 * JSON texts. Each has a pure Python/numpy path that gives the same answers (diagnose/search.py,
 * columns._longest_json; tests/test_diagnose_search.py and test_diagnose_fastext.py compare).
 *
 * search: the diagnosis joins time-ordered columns of a rank (steps, kernels, calls, their
 * unions) by binary search: a 1M-step incident makes ~200 searches of up to 2M sorted keys into
 * 1M-2M sorted values. numpy's binary search starts every key's search from the whole upper
 * part of the array, so each key costs ~log2(n) probes at cache-missing distances (~50-70 ms
 * for 2M keys into 2M values, ~25% of that diagnosis's CPU). Keys in order are a merge:
 * starting from the previous key's answer and galloping (1, 2, 4, ... places, then a binary
 * search inside the last stride) costs O(log d) for a key d places on, O(n + m) in all, and
 * stays correct (only slower) for keys out of order, which gallop backwards the same way.
 *
 * gaps_json: each step's `[{"end_ns":E,"length_ns":L,"start_ns":S},...]` (the steps table's
 * gaps_longest_json, keys sorted as step_tables.canonical writes them): a 1M-step diagnosis
 * formats ~2.6M gaps, ~1.6 s as Python f-strings.
 *
 * Optional, like capture/_spanext.c and _stepext.c (setup.py builds it when it can).
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

/* Decimal text of v at p; returns the bytes written (at most 20). */
static Py_ssize_t put_int(char *p, int64_t v) {
    char tmp[24];
    Py_ssize_t n = 0, w = 0;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[n++] = (char)('0' + (u % 10));
        u /= 10;
    } while (u);
    if (v < 0)
        p[w++] = '-';
    while (n)
        p[w++] = tmp[--n];
    return w;
}

static Py_ssize_t put_lit(char *p, const char *s) {
    Py_ssize_t n = (Py_ssize_t)strlen(s);
    memcpy(p, s, (size_t)n);
    return n;
}

#define GAP_MAX_BYTES 96 /* {"end_ns":,"length_ns":,"start_ns":} is 36, three ints 60, a comma */

/* gaps_json(start, end, length, offsets, out_offsets, out_data) -> bytes used. Step k's gaps
 * are rows offsets[k]..offsets[k+1] (int64, from 0); out_offsets (int32, steps + 1) and
 * out_data (bytes, at least 2 a step + GAP_MAX_BYTES a gap) are the Arrow string column's. */
static PyObject *gaps_json(PyObject *self, PyObject *args) {
    PyObject *vs, *ve, *vl, *vo, *voo, *vd;
    if (!PyArg_ParseTuple(args, "OOOOOO", &vs, &ve, &vl, &vo, &voo, &vd))
        return NULL;
    Py_buffer bs, be, bl, bo, boo, bd;
    int got = 0;
    Py_ssize_t w = 0;
    if (int64_buffer(vs, &bs, 0, "start") < 0)
        goto done;
    got = 1;
    if (int64_buffer(ve, &be, 0, "end") < 0)
        goto done;
    got = 2;
    if (int64_buffer(vl, &bl, 0, "length") < 0)
        goto done;
    got = 3;
    if (int64_buffer(vo, &bo, 0, "offsets") < 0)
        goto done;
    got = 4;
    if (PyObject_GetBuffer(voo, &boo, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0)
        goto done;
    got = 5;
    if (PyObject_GetBuffer(vd, &bd, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0)
        goto done;
    got = 6;
    Py_ssize_t gaps = bs.len / 8, steps = bo.len / 8 - 1;
    const int64_t *s = (const int64_t *)bs.buf, *e = (const int64_t *)be.buf, *l = (const int64_t *)bl.buf,
                  *off = (const int64_t *)bo.buf;
    if (be.len / 8 != gaps || bl.len / 8 != gaps || steps < 0 || boo.len != (steps + 1) * 4 || off[0] != 0 || off[steps] != gaps) {
        PyErr_SetString(PyExc_ValueError, "gaps_json: columns of unequal length, or offsets that do not cover them");
        goto done;
    }
    for (Py_ssize_t k = 0; k < steps; k++)
        if (off[k + 1] < off[k]) {
            PyErr_SetString(PyExc_ValueError, "gaps_json: offsets out of order");
            goto done;
        }
    if (bd.len < 2 * steps + GAP_MAX_BYTES * gaps) {
        PyErr_SetString(PyExc_ValueError, "gaps_json: out_data too small");
        goto done;
    }
    int32_t *oo = (int32_t *)boo.buf;
    char *d = (char *)bd.buf;
    oo[0] = 0;
    for (Py_ssize_t k = 0; k < steps; k++) {
        d[w++] = '[';
        for (int64_t i = off[k]; i < off[k + 1]; i++) {
            if (i > off[k])
                d[w++] = ',';
            w += put_lit(d + w, "{\"end_ns\":");
            w += put_int(d + w, e[i]);
            w += put_lit(d + w, ",\"length_ns\":");
            w += put_int(d + w, l[i]);
            w += put_lit(d + w, ",\"start_ns\":");
            w += put_int(d + w, s[i]);
            d[w++] = '}';
        }
        d[w++] = ']';
        if (w > INT32_MAX) {
            PyErr_SetString(PyExc_OverflowError, "gaps_json: over 2 GiB of text in one column");
            goto done;
        }
        oo[k + 1] = (int32_t)w;
    }
done:
    if (got >= 6)
        PyBuffer_Release(&bd);
    if (got >= 5)
        PyBuffer_Release(&boo);
    if (got >= 4)
        PyBuffer_Release(&bo);
    if (got >= 3)
        PyBuffer_Release(&bl);
    if (got >= 2)
        PyBuffer_Release(&be);
    if (got >= 1)
        PyBuffer_Release(&bs);
    if (PyErr_Occurred())
        return NULL;
    return PyLong_FromSsize_t(w);
}

static PyMethodDef methods[] = {
    {"search", search, METH_VARARGS, "search(values, keys, out, right): numpy.searchsorted by galloping (int64)"},
    {"gaps_json", gaps_json, METH_VARARGS, "gaps_json(start, end, length, offsets, out_offsets, out_data) -> bytes used"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "_fastext", "the diagnosis's optional C paths (search.py, columns.py)",
                                       0, methods, NULL};

PyMODINIT_FUNC PyInit__fastext(void) { return PyModuleDef_Init(&moduledef); }
