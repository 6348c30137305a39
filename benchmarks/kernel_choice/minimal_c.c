/* Minimal C kernel for the numba-vs-C measurement (docs/benchmarks.md): v2, no codec. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static inline int64_t rd_varint(const uint8_t *b, Py_ssize_t *p) {
    uint64_t raw = 0; int shift = 0;
    for (;;) { uint8_t c = b[(*p)++]; raw |= (uint64_t)(c & 0x7F) << shift; if (c < 0x80) break; shift += 7; }
    return (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
}
static inline int64_t be64(const uint8_t *b) { uint64_t v; memcpy(&v, b, 8); return (int64_t)__builtin_bswap64(v); }
static inline int32_t be32(const uint8_t *b) { uint32_t v; memcpy(&v, b, 4); return (int32_t)__builtin_bswap32(v); }

static PyObject *decode(PyObject *self, PyObject *args) {
    Py_buffer in, o, t, ko, kd, vo, vd;
    if (!PyArg_ParseTuple(args, "y*w*w*w*w*w*w*", &in, &o, &t, &ko, &kd, &vo, &vd)) return NULL;
    const uint8_t *b = in.buf; Py_ssize_t end = in.len, pos = 0, n = 0, ku = 0, vu = 0;
    int64_t *off = o.buf, *ts = t.buf; int32_t *koff = ko.buf, *voff = vo.buf;
    uint8_t *kdat = kd.buf, *vdat = vd.buf;
    while (end - pos > 17) {
        int64_t base = be64(b + pos); int32_t size = be32(b + pos + 8);
        int64_t bts = be64(b + pos + 27); int32_t count = be32(b + pos + 57);
        Py_ssize_t p = pos + 61;
        for (int32_t i = 0; i < count; i++) {
            rd_varint(b, &p); p++;
            int64_t tsd = rd_varint(b, &p), od = rd_varint(b, &p), kl = rd_varint(b, &p);
            off[n] = base + od; ts[n] = bts + tsd;
            if (kl > 0) { memcpy(kdat + ku, b + p, kl); ku += kl; p += kl; }
            koff[n + 1] = (int32_t)ku;
            int64_t vl = rd_varint(b, &p);
            if (vl > 0) { memcpy(vdat + vu, b + p, vl); vu += vl; p += vl; }
            voff[n + 1] = (int32_t)vu;
            rd_varint(b, &p); n++;
        }
        pos += 12 + size;
    }
    PyBuffer_Release(&in); PyBuffer_Release(&o); PyBuffer_Release(&t); PyBuffer_Release(&ko);
    PyBuffer_Release(&kd); PyBuffer_Release(&vo); PyBuffer_Release(&vd);
    return Py_BuildValue("nnn", n, ku, vu);
}
static PyMethodDef methods[] = {{"decode", decode, METH_VARARGS, NULL}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "minimal_c", NULL, -1, methods};
PyMODINIT_FUNC PyInit_minimal_c(void) { return PyModule_Create(&mod); }
