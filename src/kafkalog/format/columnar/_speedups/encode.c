/*
 * Encode: the Source type (the encoder's validated input arrays), the batch plan (rows per batch
 * within batch_bytes, with sizes computed exactly) and the records writer.
 */
#include "speedups.h"


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
    .tp_name = "kafkalog.format.columnar._compiled.Source",
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

/* The Source an encode kernel is called on (its first of `want` arguments), or NULL with the
 * kernel's signature as the TypeError. */
static SourceObject *source_args(PyObject *const *args, Py_ssize_t nargs, Py_ssize_t want,
                                 const char *signature) {
    if (nargs != want || !PyObject_TypeCheck(args[0], &kl_SourceType)) {
        PyErr_SetString(PyExc_TypeError, signature);
        return NULL;
    }
    return (SourceObject *)args[0];
}

PyObject *kl_encode_plan(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    SourceObject *s =
        source_args(args, nargs, 5, "encode_plan(source, n, batch_bytes, max_records, plan)");
    if (s == NULL) return NULL;
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

/* The records of one planned batch from o; returns where they end. */
static uint8_t *write_records(const SourceObject *s, const int64_t *row, uint8_t *o) {
    const int64_t start = row[PLAN_START], first = row[PLAN_FIRST_TS];
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
    return o;
}

PyObject *kl_encode_records(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    SourceObject *s =
        source_args(args, nargs, 7, "encode_records(source, plan, b_from, b_to, gap, out, pos)");
    if (s == NULL) return NULL;
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
    for (Py_ssize_t bi = b_from; bi < b_to; bi++) o = write_records(s, plan + bi * PLAN_WIDTH, o + gap);
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


/* -- whole batches: header, records (or compressed records) and CRC-32C, into one bytearray ---- */
static inline void put_be(uint8_t *p, uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; i--, v >>= 8) p[i] = (uint8_t)v;
}

/* What every batch of one encode shares (checked in range by the driver). */
typedef struct {
    int64_t base_offset, producer_id, append_time;
    int32_t leader_epoch, base_sequence;
    int16_t attributes, producer_epoch;
    int log_append;
} batch_fields_t;

/* The fields tuple (base offset, attributes, leader epoch, producer id, producer epoch, base
 * sequence, LogAppendTime or not, the append time); 0, or -1 with an exception set. */
static int parse_fields(PyObject *t, batch_fields_t *f) {
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 8) {
        PyErr_SetString(PyExc_TypeError, "batch fields: a tuple of 8 ints");
        return -1;
    }
    long long v[8];
    for (int i = 0; i < 8; i++) v[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(t, i));
    if (PyErr_Occurred()) return -1;
    *f = (batch_fields_t){v[0], v[3], v[7], (int32_t)v[2], (int32_t)v[5], (int16_t)v[1],
                          (int16_t)v[4], v[6] != 0};
    return 0;
}

/* Kafka's 61-byte header of a planned batch whose size bytes of records (or compressed records)
 * follow it at o + 61; its CRC-32C, over attributes to the end, is computed last, while the
 * batch is still in the cache. */
static void write_header(uint8_t *o, const int64_t *row, int64_t size, const batch_fields_t *f) {
    const int64_t start = row[PLAN_START], count = row[PLAN_COUNT];
    int64_t seq = f->base_sequence;
    if (seq >= 0) { /* DefaultRecordBatch.incrementSequence: past INT32_MAX from 0 */
        seq += start;
        if (seq > INT32_MAX) seq -= (int64_t)1 << 31;
    }
    put_be(o, (uint64_t)(f->base_offset + start), 8);
    put_be(o + 8, (uint64_t)(49 + size), 4);
    put_be(o + 12, (uint32_t)f->leader_epoch, 4);
    o[16] = 2;
    put_be(o + 21, (uint16_t)f->attributes, 2);
    put_be(o + 23, (uint64_t)(count - 1), 4);
    put_be(o + 27, (uint64_t)row[PLAN_FIRST_TS], 8);
    put_be(o + 35, (uint64_t)(f->log_append ? f->append_time : row[PLAN_MAX_TS]), 8);
    put_be(o + 43, (uint64_t)f->producer_id, 8);
    put_be(o + 51, (uint16_t)f->producer_epoch, 2);
    put_be(o + 53, (uint32_t)seq, 4);
    put_be(o + 57, (uint64_t)count, 4);
    put_be(o + 17, kl_crc32c(o + 21, 40 + size), 4);
}

PyObject *kl_encode_batches(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    SourceObject *s =
        source_args(args, nargs, 4, "encode_batches(source, plan, n_batches, fields)");
    if (s == NULL) return NULL;
    Py_ssize_t n_batches = PyLong_AsSsize_t(args[2]);
    batch_fields_t f;
    if ((n_batches == -1 && PyErr_Occurred()) || parse_fields(args[3], &f) < 0) return NULL;
    Py_buffer pv;
    if (PyObject_GetBuffer(args[1], &pv, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    const int64_t *plan = pv.buf;
    Py_ssize_t n_ts = s->views[0].len / 8, total = 0;
    int bad = n_batches < 0 || n_batches * PLAN_WIDTH > pv.len / 8;
    for (Py_ssize_t bi = 0; !bad && bi < n_batches; bi++) {
        const int64_t *row = plan + bi * PLAN_WIDTH;
        bad = row[PLAN_START] < 0 || row[PLAN_COUNT] < 1 || row[PLAN_BYTES] < 0 ||
              row[PLAN_START] + row[PLAN_COUNT] > n_ts ||
              row[PLAN_BYTES] > PY_SSIZE_T_MAX / 2 - total;
        total += 61 + (bad ? 0 : row[PLAN_BYTES]);
    }
    if (bad) {
        PyBuffer_Release(&pv);
        PyErr_SetString(PyExc_ValueError, "encode_batches: plan does not fit the arrays");
        return NULL;
    }
    PyObject *out = kl_new_bytearray(total);
    if (!out) {
        PyBuffer_Release(&pv);
        return NULL;
    }
    uint8_t *base = (uint8_t *)PyByteArray_AS_STRING(out), *o = base;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t bi = 0; bi < n_batches; bi++) {
        const int64_t *row = plan + bi * PLAN_WIDTH;
        uint8_t *end = write_records(s, row, o + 61);
        if (end != o + 61 + row[PLAN_BYTES]) break; /* a plan that is not this source's */
        write_header(o, row, row[PLAN_BYTES], &f);
        o = end;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&pv);
    if (o != base + total) {
        Py_DECREF(out);
        PyErr_SetString(PyExc_RuntimeError, "encode_batches wrote a different size than planned");
        return NULL;
    }
    return out;
}

/* encode_compressed(plan, n_batches, fields, bodies) -> bytearray: each planned batch's header
 * before its compressed records (bodies[i], bytes), the CRC-32C over both. */
PyObject *kl_encode_compressed(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || !PyList_CheckExact(args[3])) {
        PyErr_SetString(PyExc_TypeError, "encode_compressed(plan, n_batches, fields, bodies)");
        return NULL;
    }
    Py_ssize_t n_batches = PyLong_AsSsize_t(args[1]);
    batch_fields_t f;
    if ((n_batches == -1 && PyErr_Occurred()) || parse_fields(args[2], &f) < 0) return NULL;
    PyObject *bodies = args[3];
    Py_buffer pv;
    if (PyObject_GetBuffer(args[0], &pv, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    const int64_t *plan = pv.buf;
    int bad = n_batches < 0 || n_batches * PLAN_WIDTH > pv.len / 8 ||
              PyList_GET_SIZE(bodies) != n_batches;
    Py_ssize_t total = 0;
    for (Py_ssize_t bi = 0; !bad && bi < n_batches; bi++) {
        PyObject *body = PyList_GET_ITEM(bodies, bi);
        bad = !PyBytes_CheckExact(body) || PyBytes_GET_SIZE(body) > PY_SSIZE_T_MAX / 2 - total ||
              plan[bi * PLAN_WIDTH + PLAN_COUNT] < 1;
        if (!bad) total += 61 + PyBytes_GET_SIZE(body);
    }
    if (bad) {
        PyBuffer_Release(&pv);
        PyErr_SetString(PyExc_ValueError, "encode_compressed: a body per planned batch, as bytes");
        return NULL;
    }
    PyObject *out = kl_new_bytearray(total);
    if (out) {
        uint8_t *o = (uint8_t *)PyByteArray_AS_STRING(out);
        for (Py_ssize_t bi = 0; bi < n_batches; bi++) { /* the list cannot change: GIL held */
            PyObject *body = PyList_GET_ITEM(bodies, bi);
            Py_ssize_t size = PyBytes_GET_SIZE(body);
            memcpy(o + 61, PyBytes_AS_STRING(body), (size_t)size);
            write_header(o, plan + bi * PLAN_WIDTH, size, &f);
            o += 61 + size;
        }
    }
    PyBuffer_Release(&pv);
    return out;
}
