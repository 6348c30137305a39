/*
 * Encode: the Source type (the encoder's validated input arrays), the batch plan (rows per batch
 * within batch_bytes, with sizes computed exactly) and the records writer.
 */
#include "_speedups.h"

typedef struct {
    PyObject_HEAD
    Py_buffer views[SOURCE_SLOTS];
    int nviews;
    const int64_t *ts, *ko, *vo, *ho, *hko, *hvo;
    const uint8_t *kv, *kd, *vv, *vd, *hkd, *hvv, *hvd;
    Py_ssize_t n_kv, n_vv, n_ho, n_hvv;
    PyObject *arrays;
} SourceObject;

static void Source_dealloc(SourceObject *self) {
    for (int i = 0; i < self->nviews; i++) PyBuffer_Release(&self->views[i]);
    Py_XDECREF(self->arrays);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Source_init(SourceObject *self, PyObject *args, PyObject *kwds) {
    PyObject *arrays;
    if (!PyArg_ParseTuple(args, "O!:Source", &PyTuple_Type, &arrays)) return -1;
    if (self->nviews) return 0;
    if (PyTuple_GET_SIZE(arrays) != SOURCE_SLOTS) {
        PyErr_Format(PyExc_ValueError, "a source needs %d arrays", SOURCE_SLOTS);
        return -1;
    }
    static const int itemsize[SOURCE_SLOTS] = {8, 8, 1, 1, 8, 1, 1, 8, 8, 1, 8, 1, 1};
    for (int i = 0; i < SOURCE_SLOTS; i++) {
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(arrays, i), &self->views[i], PyBUF_C_CONTIGUOUS) < 0)
            return -1;
        self->nviews = i + 1;
        if (self->views[i].len % itemsize[i]) {
            PyErr_Format(PyExc_ValueError, "source slot %d has a partial item", i);
            return -1;
        }
    }
    Py_buffer *v = self->views;
    self->ts = v[0].buf; self->ko = v[1].buf; self->kv = v[2].buf; self->kd = v[3].buf;
    self->vo = v[4].buf; self->vv = v[5].buf; self->vd = v[6].buf; self->ho = v[7].buf;
    self->hko = v[8].buf; self->hkd = v[9].buf; self->hvo = v[10].buf; self->hvv = v[11].buf;
    self->hvd = v[12].buf;
    self->n_kv = v[2].len; self->n_vv = v[5].len; self->n_ho = v[7].len / 8;
    self->n_hvv = v[11].len;
    Py_INCREF(arrays);
    self->arrays = arrays;
    return 0;
}

PyTypeObject kl_SourceType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kafkalog.format._speedups.Source",
    .tp_doc = "The encoder's (validated) input arrays, held for the kernels.",
    .tp_basicsize = sizeof(SourceObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Source_init,
    .tp_dealloc = (destructor)Source_dealloc,
};

static inline int size_varint(int64_t v) {
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    int n = 1;
    while (z > 0x7F) { z >>= 7; n++; }
    return n;
}

static inline uint8_t *put_varint(uint8_t *o, int64_t v) {
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    while (z > 0x7F) { *o++ = (uint8_t)(z | 0x80); z >>= 7; }
    *o++ = (uint8_t)z;
    return o;
}

static inline int64_t key_len(const SourceObject *s, Py_ssize_t i) {
    return (s->n_kv && !s->kv[i]) ? -1 : s->ko[i + 1] - s->ko[i];
}
static inline int64_t value_len(const SourceObject *s, Py_ssize_t i) {
    return (s->n_vv && !s->vv[i]) ? -1 : s->vo[i + 1] - s->vo[i];
}
static inline int64_t hval_len(const SourceObject *s, int64_t h) {
    return (s->n_hvv && !s->hvv[h]) ? -1 : s->hvo[h + 1] - s->hvo[h];
}

static int64_t body_size(const SourceObject *s, Py_ssize_t i, int64_t offset_delta,
                         int64_t ts_delta) {
    int64_t k = key_len(s, i), v = value_len(s, i);
    int64_t body = 1 + size_varint(ts_delta) + size_varint(offset_delta);
    body += k < 0 ? 1 : size_varint(k) + k;
    body += v < 0 ? 1 : size_varint(v) + v;
    int64_t h0 = 0, h1 = 0;
    if (s->n_ho) { h0 = s->ho[i]; h1 = s->ho[i + 1]; }
    body += size_varint(h1 - h0);
    for (int64_t h = h0; h < h1; h++) {
        int64_t hk = s->hko[h + 1] - s->hko[h], hv = hval_len(s, h);
        body += size_varint(hk) + hk;
        body += hv < 0 ? 1 : size_varint(hv) + hv;
    }
    return body;
}

PyObject *kl_encode_plan(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5 || !PyObject_TypeCheck(args[0], &kl_SourceType)) {
        PyErr_SetString(PyExc_TypeError, "encode_plan(source, n, batch_bytes, max_records, plan)");
        return NULL;
    }
    SourceObject *s = (SourceObject *)args[0];
    Py_ssize_t n = PyLong_AsSsize_t(args[1]);
    long long batch_bytes = PyLong_AsLongLong(args[2]), max_records = PyLong_AsLongLong(args[3]);
    if (PyErr_Occurred()) return NULL;
    if (n < 0 || n > s->views[0].len / 8 || n + 1 > s->views[1].len / 8 ||
        n + 1 > s->views[4].len / 8 || (s->n_ho && n + 1 > s->n_ho)) {
        PyErr_SetString(PyExc_ValueError, "encode_plan: arrays shorter than n");
        return NULL;
    }
    Py_buffer pv;
    if (PyObject_GetBuffer(args[4], &pv, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (pv.len / 8 < (Py_ssize_t)PLAN_WIDTH * n) {
        PyBuffer_Release(&pv);
        PyErr_SetString(PyExc_ValueError, "encode_plan: plan array too small");
        return NULL;
    }
    int64_t *plan = pv.buf;
    Py_ssize_t n_batches = 0;
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t i = 0;
    while (i < n) {
        int64_t first = s->ts[i], max_ts = first, start = i;
        int64_t body = body_size(s, i, 0, 0);
        int64_t size = size_varint(body) + body;
        i++;
        while (i < n && i - start < max_records) {
            int64_t bs = body_size(s, i, i - start, wsub(s->ts[i], first));
            int64_t rs = size_varint(bs) + bs;
            if (size + rs > batch_bytes) break;
            size += rs;
            if (s->ts[i] > max_ts) max_ts = s->ts[i];
            i++;
        }
        int64_t *row = plan + n_batches * PLAN_WIDTH;
        row[PLAN_START] = start;
        row[PLAN_COUNT] = i - start;
        row[PLAN_BYTES] = size;
        row[PLAN_FIRST_TS] = first;
        row[PLAN_MAX_TS] = max_ts;
        n_batches++;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&pv);
    return PyLong_FromSsize_t(n_batches);
}

PyObject *kl_encode_records(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7 || !PyObject_TypeCheck(args[0], &kl_SourceType)) {
        PyErr_SetString(PyExc_TypeError, "encode_records(source, plan, b_from, b_to, gap, out, pos)");
        return NULL;
    }
    SourceObject *s = (SourceObject *)args[0];
    Py_ssize_t b_from = PyLong_AsSsize_t(args[2]), b_to = PyLong_AsSsize_t(args[3]);
    Py_ssize_t gap = PyLong_AsSsize_t(args[4]), pos = PyLong_AsSsize_t(args[6]);
    if (PyErr_Occurred()) return NULL;
    Py_buffer pv, ov;
    if (PyObject_GetBuffer(args[1], &pv, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (PyObject_GetBuffer(args[5], &ov, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&pv);
        return NULL;
    }
    const int64_t *plan = pv.buf;
    Py_ssize_t n_ts = s->views[0].len / 8;
    int bad = b_from < 0 || b_to < b_from || b_to * PLAN_WIDTH > pv.len / 8 || pos < 0 || gap < 0;
    for (Py_ssize_t bi = b_from; !bad && bi < b_to; bi++) {
        const int64_t *row = plan + bi * PLAN_WIDTH;
        if (row[PLAN_START] < 0 || row[PLAN_COUNT] < 0 || row[PLAN_START] + row[PLAN_COUNT] > n_ts)
            bad = 1;
    }
    Py_ssize_t total = pos;
    for (Py_ssize_t bi = b_from; !bad && bi < b_to; bi++) total += gap + plan[bi * PLAN_WIDTH + PLAN_BYTES];
    if (bad || total > ov.len) {
        PyBuffer_Release(&pv);
        PyBuffer_Release(&ov);
        PyErr_SetString(PyExc_ValueError, "encode_records: plan does not fit the arrays or out");
        return NULL;
    }
    uint8_t *o = (uint8_t *)ov.buf + pos;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t bi = b_from; bi < b_to; bi++) {
        const int64_t *row = plan + bi * PLAN_WIDTH;
        int64_t start = row[PLAN_START], first = row[PLAN_FIRST_TS];
        o += gap;
        for (int64_t i = start; i < start + row[PLAN_COUNT]; i++) {
            int64_t od = i - start, tsd = wsub(s->ts[i], first);
            o = put_varint(o, body_size(s, (Py_ssize_t)i, od, tsd));
            *o++ = 0;
            o = put_varint(o, tsd);
            o = put_varint(o, od);
            int64_t k = key_len(s, (Py_ssize_t)i), v = value_len(s, (Py_ssize_t)i);
            o = put_varint(o, k);
            if (k > 0) { memcpy(o, s->kd + s->ko[i], (size_t)k); o += k; }
            o = put_varint(o, v);
            if (v > 0) { memcpy(o, s->vd + s->vo[i], (size_t)v); o += v; }
            int64_t h0 = 0, h1 = 0;
            if (s->n_ho) { h0 = s->ho[i]; h1 = s->ho[i + 1]; }
            o = put_varint(o, h1 - h0);
            for (int64_t h = h0; h < h1; h++) {
                int64_t hk = s->hko[h + 1] - s->hko[h], hv = hval_len(s, h);
                o = put_varint(o, hk);
                if (hk > 0) { memcpy(o, s->hkd + s->hko[h], (size_t)hk); o += hk; }
                o = put_varint(o, hv);
                if (hv > 0) { memcpy(o, s->hvd + s->hvo[h], (size_t)hv); o += hv; }
            }
        }
    }
    Py_END_ALLOW_THREADS
    Py_ssize_t written = o - (uint8_t *)ov.buf;
    PyBuffer_Release(&pv);
    PyBuffer_Release(&ov);
    if (written != total) {
        PyErr_SetString(PyExc_RuntimeError, "encode_records wrote a different size than planned");
        return NULL;
    }
    return PyLong_FromSsize_t(written);
}

