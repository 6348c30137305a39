/*
 * Plain Python columns as the encoder's arrays, without pyarrow's per-item conversion: a list or
 * tuple of bytes (or None) as offsets, validity and data; a list or tuple of ints as int64s. Any
 * other item (bytearray, str, an int past 64 bits...) returns None, and the driver converts the
 * column with pyarrow as before, so that both paths accept and reject the same inputs.
 */
#include "speedups.h"

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

/* x (exact bytes, or None for nothing) copied to data[at:]; the fill level after it. */
static inline Py_ssize_t put_binary(uint8_t *data, Py_ssize_t at, PyObject *x) {
    if (x == Py_None) return at;
    Py_ssize_t len = PyBytes_GET_SIZE(x);
    memcpy(data + at, PyBytes_AS_STRING(x), (size_t)len);
    return at + len;
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
            at = put_binary(d, at, x);
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

/* The UTF-8 of a header key (an exact str), or NULL (no exception) for anything else, a str
 * that cannot be encoded included: pyarrow then converts the column and reports it. */
static const char *key_utf8(PyObject *k, Py_ssize_t *len) {
    if (!PyUnicode_CheckExact(k)) return NULL;
    const char *s = PyUnicode_AsUTF8AndSize(k, len);
    if (!s) PyErr_Clear();
    return s;
}

/* A record's headers: None, or an exact list or tuple of exact (str, bytes or None) tuples. */
static int header_shape_ok(PyObject *hs) {
    return hs == Py_None || PyList_CheckExact(hs) || PyTuple_CheckExact(hs);
}

/* header_columns(seq) -> (list offsets int64[n+1], key offsets int64[m+1], key data, value
 * offsets int64[m+1], value validity uint8[m] or b"", value data) as bytearrays, or None when
 * seq is not a list or tuple of such headers (a Header object, a bytes key...: pyarrow). */
PyObject *kl_header_columns(PyObject *mod, PyObject *seq) {
    if (!PyList_CheckExact(seq) && !PyTuple_CheckExact(seq)) Py_RETURN_NONE;
    PyObject *fast = PySequence_Fast(seq, "header_columns");
    if (!fast) return NULL;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    PyObject **rows = PySequence_Fast_ITEMS(fast);
    Py_ssize_t m = 0, key_bytes = 0, value_bytes = 0, nulls = 0;
    for (Py_ssize_t i = 0; i < n; i++) { /* shapes and sizes */
        PyObject *hs = rows[i];
        if (!header_shape_ok(hs)) goto other;
        if (hs == Py_None) continue;
        Py_ssize_t count = PySequence_Fast_GET_SIZE(hs);
        PyObject **items = PySequence_Fast_ITEMS(hs);
        for (Py_ssize_t j = 0; j < count; j++) {
            PyObject *h = items[j];
            if (!PyTuple_CheckExact(h) || PyTuple_GET_SIZE(h) != 2) goto other;
            PyObject *v = PyTuple_GET_ITEM(h, 1);
            Py_ssize_t klen;
            if (!key_utf8(PyTuple_GET_ITEM(h, 0), &klen)) goto other;
            key_bytes += klen;
            if (v == Py_None) nulls++;
            else if (PyBytes_CheckExact(v)) value_bytes += PyBytes_GET_SIZE(v);
            else goto other;
        }
        m += count;
    }
    PyObject *lo = kl_new_bytearray(8 * (n + 1)), *ko = kl_new_bytearray(8 * (m + 1));
    PyObject *kd = kl_new_bytearray(key_bytes), *vo = kl_new_bytearray(8 * (m + 1));
    PyObject *vv = kl_new_bytearray(nulls ? m : 0), *vd = kl_new_bytearray(value_bytes);
    PyObject *out = NULL;
    if (lo && ko && kd && vo && vv && vd) {
        int64_t *plo = (int64_t *)PyByteArray_AS_STRING(lo), *pko = (int64_t *)PyByteArray_AS_STRING(ko);
        int64_t *pvo = (int64_t *)PyByteArray_AS_STRING(vo);
        uint8_t *pkd = (uint8_t *)PyByteArray_AS_STRING(kd), *pvd = (uint8_t *)PyByteArray_AS_STRING(vd);
        uint8_t *pvv = (uint8_t *)PyByteArray_AS_STRING(vv);
        Py_ssize_t h = 0, kat = 0, vat = 0;
        plo[0] = pko[0] = pvo[0] = 0;
        for (Py_ssize_t i = 0; i < n; i++) { /* the objects cannot change: the GIL is held */
            PyObject *hs = rows[i];
            Py_ssize_t count = hs == Py_None ? 0 : PySequence_Fast_GET_SIZE(hs);
            PyObject **items = hs == Py_None ? NULL : PySequence_Fast_ITEMS(hs);
            for (Py_ssize_t j = 0; j < count; j++, h++) {
                PyObject *k = PyTuple_GET_ITEM(items[j], 0), *v = PyTuple_GET_ITEM(items[j], 1);
                Py_ssize_t klen;
                const char *ks = key_utf8(k, &klen); /* cached by the str since the first pass */
                memcpy(pkd + kat, ks, (size_t)klen);
                kat += klen;
                pko[h + 1] = kat;
                vat = put_binary(pvd, vat, v);
                if (nulls) pvv[h] = v != Py_None;
                pvo[h + 1] = vat;
            }
            plo[i + 1] = h;
        }
        out = PyTuple_Pack(6, lo, ko, kd, vo, vv, vd);
    }
    Py_DECREF(fast);
    Py_XDECREF(lo);
    Py_XDECREF(ko);
    Py_XDECREF(kd);
    Py_XDECREF(vo);
    Py_XDECREF(vv);
    Py_XDECREF(vd);
    return out;
other:
    Py_DECREF(fast);
    Py_RETURN_NONE;
}

/* -- kafka-dump-log's record lines ------------------------------------------------------------ */
static const char DIGIT_PAIRS[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

/* Decimal digits of v at p; the end. Two digits a division: a line holds five numbers, a
 * timestamp of 13 digits among them. */
static inline char *put_i64(char *p, int64_t v) {
    char tmp[24];
    char *t = tmp + sizeof tmp;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    while (u >= 100) {
        const char *pair = DIGIT_PAIRS + 2 * (u % 100);
        u /= 100;
        *--t = pair[1];
        *--t = pair[0];
    }
    if (u >= 10) {
        *--t = DIGIT_PAIRS[2 * u + 1];
        *--t = DIGIT_PAIRS[2 * u];
    } else {
        *--t = (char)('0' + u);
    }
    if (v < 0) *p++ = '-';
    const size_t n = (size_t)(tmp + sizeof tmp - t);
    memcpy(p, t, n);
    return p + n;
}

static inline char *put_str(char *p, const char *s, size_t n) {
    memcpy(p, s, n);
    return p + n;
}

/* dump_lines(offsets, ts_types, timestamps, key_sizes, value_sizes, sequences, ends) -> bytes:
 * for each of the n rows of the int64 columns (ts_types: -1, 0 or 1), kafka-dump-log's record
 * line without data and with no header keys, "| offset: O CreateTime: T keySize: K valueSize: V
 * sequence: S headerKeys: []\n"; ends (int64[n + 1], written) says where each line ends. */
PyObject *kl_dump_lines(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    (void)mod;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "dump_lines takes 7 arguments");
        return NULL;
    }
    Py_buffer in[7];
    int got = 0;
    PyObject *out = NULL;
    for (; got < 7; got++)
        if (PyObject_GetBuffer(args[got], &in[got], got == 6 ? PyBUF_WRITABLE : PyBUF_SIMPLE) < 0)
            goto done;
    const Py_ssize_t n = in[0].len / 8;
    for (int i = 1; i < 6; i++)
        if (in[i].len != in[0].len) {
            PyErr_SetString(PyExc_ValueError, "dump_lines: columns of different lengths");
            goto done;
        }
    if (in[0].len % 8 || in[6].len != 8 * (n + 1)) {
        PyErr_SetString(PyExc_ValueError, "dump_lines: int64 columns and n + 1 ends expected");
        goto done;
    }
    /* the longest line: fixed text 68 + the longest type 15 + five numbers of at most 20 */
    out = PyBytes_FromStringAndSize(NULL, n * 184);
    if (!out) goto done;
    const int64_t *off = in[0].buf, *tt = in[1].buf, *ts = in[2].buf, *ks = in[3].buf;
    const int64_t *vs = in[4].buf, *sq = in[5].buf;
    int64_t *ends = in[6].buf;
    char *const start = PyBytes_AS_STRING(out);
    char *p = start;
    ends[0] = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        p = put_str(p, "| offset: ", 10);
        p = put_i64(p, off[i]);
        if (tt[i] == 1) p = put_str(p, " LogAppendTime: ", 16);
        else if (tt[i] == 0) p = put_str(p, " CreateTime: ", 13);
        else p = put_str(p, " NoTimestampType: ", 18);
        p = put_i64(p, ts[i]);
        p = put_str(p, " keySize: ", 10);
        p = put_i64(p, ks[i]);
        p = put_str(p, " valueSize: ", 12);
        p = put_i64(p, vs[i]);
        p = put_str(p, " sequence: ", 11);
        p = put_i64(p, sq[i]);
        p = put_str(p, " headerKeys: []\n", 16);
        ends[i + 1] = p - start;
    }
    if (_PyBytes_Resize(&out, p - start) < 0) out = NULL;
done:
    for (int i = 0; i < got; i++) PyBuffer_Release(&in[i]);
    return out;
}
