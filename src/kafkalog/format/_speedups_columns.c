/*
 * Plain Python columns as the encoder's arrays, without pyarrow's per-item conversion: a list or
 * tuple of bytes (or None) as offsets, validity and data; a list or tuple of ints as int64s. Any
 * other item (bytearray, str, an int past 64 bits...) returns None, and the driver converts the
 * column with pyarrow as before, so that both paths accept and reject the same inputs.
 */
#include "_speedups.h"

#if defined(__linux__)
#include <sys/mman.h>
#endif

/* A bytearray of n bytes, uninitialized; large ones backed by huge pages where the OS allows. */
PyObject *kl_new_bytearray(Py_ssize_t n) {
    PyObject *out = PyByteArray_FromStringAndSize(NULL, n);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (out && n >= ((Py_ssize_t)4 << 20)) {
        const uintptr_t huge = (uintptr_t)2 << 20, at = (uintptr_t)PyByteArray_AS_STRING(out);
        uintptr_t from = (at + huge - 1) & ~(huge - 1), to = (at + (uintptr_t)n) & ~(huge - 1);
        if (to > from) (void)madvise((void *)from, to - from, MADV_HUGEPAGE);
    }
#endif
    return out;
}

/* binary_column(seq) -> (offsets int64[n+1], validity uint8[n] or b"", data) as bytearrays, or
 * None when seq is not a list or tuple of bytes and None. */
PyObject *kl_binary_column(PyObject *mod, PyObject *seq) {
    if (!PyList_CheckExact(seq) && !PyTuple_CheckExact(seq)) Py_RETURN_NONE;
    PyObject *fast = PySequence_Fast(seq, "binary_column");
    if (!fast) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast), total = 0, nulls = 0;
    PyObject **items = PySequence_Fast_ITEMS(fast);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = items[i];
        if (x == Py_None) nulls++;
        else if (PyBytes_CheckExact(x)) total += PyBytes_GET_SIZE(x);
        else {
            Py_DECREF(fast);
            Py_RETURN_NONE;
        }
    }
    PyObject *offsets = kl_new_bytearray(8 * (n + 1)), *data = kl_new_bytearray(total);
    PyObject *valid = kl_new_bytearray(nulls ? n : 0), *out = NULL;
    if (offsets && data && valid) {
        int64_t *o = (int64_t *)PyByteArray_AS_STRING(offsets);
        uint8_t *d = (uint8_t *)PyByteArray_AS_STRING(data);
        uint8_t *v = (uint8_t *)PyByteArray_AS_STRING(valid);
        Py_ssize_t at = 0;
        o[0] = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *x = items[i];
            if (x != Py_None) {
                Py_ssize_t len = PyBytes_GET_SIZE(x);
                memcpy(d + at, PyBytes_AS_STRING(x), (size_t)len);
                at += len;
            }
            if (nulls) v[i] = x != Py_None;
            o[i + 1] = at;
        }
        out = PyTuple_Pack(3, offsets, valid, data);
    }
    Py_DECREF(fast);
    Py_XDECREF(offsets);
    Py_XDECREF(valid);
    Py_XDECREF(data);
    return out;
}

/* int64_column(seq) -> int64[n] as a bytearray, or None when seq is not a list or tuple of ints
 * that fit 64 bits. */
PyObject *kl_int64_column(PyObject *mod, PyObject *seq) {
    if (!PyList_CheckExact(seq) && !PyTuple_CheckExact(seq)) Py_RETURN_NONE;
    PyObject *fast = PySequence_Fast(seq, "int64_column");
    if (!fast) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    PyObject **items = PySequence_Fast_ITEMS(fast);
    PyObject *out = kl_new_bytearray(8 * n);
    if (!out) {
        Py_DECREF(fast);
        return NULL;
    }
    int64_t *o = (int64_t *)PyByteArray_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        int overflow = 0;
        long long x = PyLong_CheckExact(items[i]) ? PyLong_AsLongLongAndOverflow(items[i], &overflow)
                                                  : (overflow = 1, 0);
        if (overflow) {
            Py_DECREF(fast);
            Py_DECREF(out);
            Py_RETURN_NONE;
        }
        o[i] = x;
    }
    Py_DECREF(fast);
    return out;
}
