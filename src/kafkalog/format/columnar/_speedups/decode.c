/*
 * The entry walk (decode_entries) and the decode entry points: argument checks, the GIL released
 * around the kernels, fill levels restored on NEED_SPACE. The Sink type holds the driver's arrays.
 */
#include "speedups.h"

static const int slot_itemsize[NUM_SLOTS] = {8, 8, 4, 4, 1, 1, 4, 1, 1, 4, 4, 1, 4, 1, 1,
                                             8, 2, 4, 1, 1, 4, 8};

PyObject *kl_result_tuple(const result_t *r) {
    return Py_BuildValue("(iniLLLn)", r->status, r->pos, r->code, r->a, r->b, r->c,
                         r->entry_pos);
}

int kl_get_bytes(PyObject *obj, Py_buffer *view) {
    return PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS);
}

int kl_int_args(const char *name, PyObject *const *args, Py_ssize_t nargs, Py_ssize_t want,
                Py_ssize_t first, long long *v, int n) {
    if (nargs != want) {
        PyErr_Format(PyExc_TypeError, "%s takes %zd arguments", name, want);
        return -1;
    }
    for (int i = 0; i < n; i++) v[i] = PyLong_AsLongLong(args[first + i]);
    return PyErr_Occurred() ? -1 : 0;
}

SinkObject *kl_sink_args(const char *name, PyObject *const *args, Py_ssize_t nargs,
                         Py_ssize_t want, long long *v, int n) {
    if (nargs == want && !PyObject_TypeCheck(args[0], &kl_SinkType)) {
        PyErr_Format(PyExc_TypeError, "%s needs a Sink", name);
        return NULL;
    }
    if (kl_int_args(name, args, nargs, want, 2, v, n) < 0) return NULL;
    return (SinkObject *)args[0];
}

static void Sink_dealloc(SinkObject *self) {
    for (int i = 0; i < self->nviews; i++) PyBuffer_Release(&self->views[i]);
    Py_XDECREF(self->arrays);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Sink_init(SinkObject *self, PyObject *args, PyObject *kwds) {
    PyObject *arrays;
    if (!PyArg_ParseTuple(args, "O!:Sink", &PyTuple_Type, &arrays)) return -1;
    if (self->nviews) return 0;
    if (PyTuple_GET_SIZE(arrays) != NUM_SLOTS) {
        PyErr_Format(PyExc_ValueError, "a sink needs %d arrays, not %zd", NUM_SLOTS,
                     PyTuple_GET_SIZE(arrays));
        return -1;
    }
    for (int i = 0; i < NUM_SLOTS; i++) {
        Py_buffer *v = &self->views[i];
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(arrays, i), v, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS)
            < 0)
            return -1;
        self->nviews = i + 1;
        if (v->len % slot_itemsize[i]) {
            PyErr_Format(PyExc_ValueError, "sink slot %d: %zd bytes is not a whole number of "
                         "%d-byte items", i, v->len, slot_itemsize[i]);
            return -1;
        }
        self->p[i] = v->buf;
        self->cap[i] = v->len / slot_itemsize[i];
    }
    if (self->cap[S_STATE] < STATE_SIZE) {
        PyErr_SetString(PyExc_ValueError, "sink state array too small");
        return -1;
    }
    /* Offsets arrays hold one more item than their rows. */
    Py_ssize_t rows = self->cap[S_OFFSET];
    int row_slots[] = {S_TIMESTAMP, S_TIMESTAMP_TYPE, S_KEY_VALID, S_VALUE_VALID, S_PRODUCER_ID,
                       S_PRODUCER_EPOCH, S_SEQUENCE, S_IS_TRANSACTIONAL, S_IS_CONTROL,
                       S_PARTITION_LEADER_EPOCH};
    for (size_t i = 0; i < sizeof(row_slots) / sizeof(int); i++)
        if (self->cap[row_slots[i]] < rows) rows = self->cap[row_slots[i]];
    if (self->cap[S_KEY_OFFSETS] - 1 < rows) rows = self->cap[S_KEY_OFFSETS] - 1;
    if (self->cap[S_VALUE_OFFSETS] - 1 < rows) rows = self->cap[S_VALUE_OFFSETS] - 1;
    if (self->cap[S_HEADER_OFFSETS] - 1 < rows) rows = self->cap[S_HEADER_OFFSETS] - 1;
    Py_ssize_t hdrs = self->cap[S_HVAL_VALID];
    if (self->cap[S_HKEY_OFFSETS] - 1 < hdrs) hdrs = self->cap[S_HKEY_OFFSETS] - 1;
    if (self->cap[S_HVAL_OFFSETS] - 1 < hdrs) hdrs = self->cap[S_HVAL_OFFSETS] - 1;
    if (rows < 0 || hdrs < 0) {
        PyErr_SetString(PyExc_ValueError, "sink offsets arrays need at least one item");
        return -1;
    }
    self->cap[S_OFFSET] = rows;
    self->cap[S_HVAL_VALID] = hdrs;
    int64_t *st = self->p[S_STATE];
    for (int i = 0; i < ST_SHARED_VALUES; i++) /* fill levels, null counts, shared columns */
        if (st[i] < 0) {
            PyErr_SetString(PyExc_ValueError, "negative sink state");
            return -1;
        }
    if (st[ST_ROWS] > rows || st[ST_HEADERS] > hdrs || st[ST_KEY_BYTES] > self->cap[S_KEY_DATA] ||
        st[ST_VALUE_BYTES] > self->cap[S_VALUE_DATA] || st[ST_HKEY_BYTES] > self->cap[S_HKEY_DATA] ||
        st[ST_HVAL_BYTES] > self->cap[S_HVAL_DATA]) {
        PyErr_SetString(PyExc_ValueError, "sink state beyond its arrays");
        return -1;
    }
    Py_INCREF(arrays);
    self->arrays = arrays;
    return 0;
}

PyTypeObject kl_SinkType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kafkalog.format.columnar._compiled.Sink",
    .tp_doc = "The driver's output arrays, held for the kernels.",
    .tp_basicsize = sizeof(SinkObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Sink_init,
    .tp_dealloc = (destructor)Sink_dealloc,
};


/* -- decode_entries --------------------------------------------------------------------------- */
/* The fields of the v2 batch header at b[pos] that its records need, keeping [start_off, end_off). */
static inline batch_t batch_header(const uint8_t *b, Py_ssize_t pos, int64_t start_off,
                                   int64_t end_off) {
    batch_t bt = {
        .base_offset = be64(b + pos), .base_ts = be64(b + pos + 27), .max_ts = be64(b + pos + 35),
        .base_seq = be32(b + pos + 53), .producer_id = be64(b + pos + 43),
        .start_off = start_off, .end_off = end_off, .count = be32(b + pos + 57),
        .leader_epoch = be32(b + pos + 12), .producer_epoch = be16(b + pos + 51),
        .attributes = be16(b + pos + 21), .last_delta = be32(b + pos + 23),
    };
    return bt;
}

/* Whether the v2 batch at ``pos`` has the CRC-32C it stores; if not, r says so (E_CRC). */
static int crc_matches(uint32_t stored, uint32_t computed, Py_ssize_t pos, result_t *r) {
    if (stored == computed) return 1;
    r->status = ERROR; r->pos = pos; r->code = E_CRC; r->a = stored; r->b = computed; r->c = 0;
    return 0;
}

static void decode_entries_impl(SinkObject *s, const uint8_t *b, Py_ssize_t pos, Py_ssize_t end,
                                int64_t start_off, int64_t end_off, int64_t max_rows, int flags,
                                result_t *r) {
    int64_t *st = s->p[S_STATE];
    const int validate = flags & FLAG_VALIDATE_CRC, keep_control = flags & FLAG_KEEP_CONTROL;
    const int check_order = flags & FLAG_CHECK_ORDER;
    int64_t saved[STATE_SIZE];
    for (;;) {
        r->status = END; r->pos = pos; r->code = 0; r->a = r->b = r->c = 0; r->entry_pos = pos;
        if (end - pos <= 17) return;
        int64_t offset = be64(b + pos);
        int64_t size = be32(b + pos + 8);
        if (size < 14) { r->status = ERROR; r->code = E_ENTRY_SIZE; r->a = size; r->b = offset; return; }
        if (size > (int64_t)(end - pos - 12)) return;
        int magic = b[pos + 16];
        if (magic > 2) { r->status = ERROR; r->code = E_MAGIC; r->a = magic; r->b = offset; return; }
        if (magic == 2 && size < 49) {
            r->status = ERROR; r->code = E_BATCH_SIZE; r->a = size + 12; r->b = offset;
            return;
        }
        if (st[ST_ROWS] >= max_rows) { r->status = ROWS_FULL; return; }
        /* The offset rule (offsets_rule.py), before anything else of the entry: its offsets fit
         * (the baseOffset is outside the CRC), and with check_order follow the previous one's. */
        const int32_t delta = magic == 2 ? be32(b + pos + 23) : 0;
        if (offset < 0 || offset > MAX_LAST_OFFSET || (delta > 0 && offset > MAX_LAST_OFFSET - delta)) {
            r->status = ERROR; r->code = E_OFFSETS; r->a = offset; r->b = delta;
            return;
        }
        const int64_t last = offset + delta; /* exact: checked above */
        if (check_order && st[ST_HAS_PREV] && offset <= st[ST_PREV_LAST]) {
            r->status = ERROR; r->code = E_OFFSET_ORDER; r->a = offset; r->b = st[ST_PREV_LAST];
            return;
        }
        Py_ssize_t entry_end = pos + 12 + (Py_ssize_t)size;
        memcpy(saved, st, sizeof(saved));
        int rc = 0;
        if (magic == 2) {
            if (offset >= end_off) { r->status = RANGE_END; return; }
            int attributes = be16(b + pos + 21);
            int32_t count = be32(b + pos + 57);
            uint32_t stored = (uint32_t)be32(b + pos + 17);
            /* Batches left out (before the range, or control batches not kept) are checked as
             * the others are: their CRC and header, as Kafka's consumer checks every batch. */
            const int skip = last < start_off || ((attributes & 0x20) && !keep_control);
            /* The CRC comes before anything else of the batch. An uncompressed batch's records
             * are decoded with the CRC computed behind the walk (see CRC_STEP), then its rows
             * are taken back if it fails; any other batch is checked first. */
            const int header_ok = count >= 0 && delta >= 0 && (int64_t)count <= (int64_t)delta + 1;
            int follow = validate && !skip && header_ok && !(attributes & 0x07);
            if (validate && !follow &&
                !crc_matches(stored, kl_crc32c(b + pos + 21, entry_end - pos - 21), pos, r))
                return;
            if (count < 0) { r->status = ERROR; r->code = E_COUNT_NEGATIVE; r->a = count; return; }
            if (!header_ok) {
                r->status = ERROR; r->code = E_BATCH_HEADER; r->a = delta; r->b = count;
                return;
            }
            if ((attributes & 0x07) > 4) {
                r->status = ERROR; r->code = E_CODEC; r->a = attributes & 0x07; r->b = offset;
                return;
            }
            if (skip) {
                /* Its records must decode (Kafka's consumer iterates a control batch's records
                 * too); a compressed one is left out whole, not inflated. */
                int64_t seen[4];
                if (!(attributes & 0x07) &&
                    kl_validate_v2(b, pos + 61, entry_end, count, be32(b + pos + 23),
                                   be64(b + pos + 27), be64(b + pos + 35),
                                   (attributes & 0x08) != 0, seen, r) != 0)
                    return;
                st[ST_PREV_LAST] = last; st[ST_HAS_PREV] = 1;
                pos = entry_end;
                continue;
            }
            /* Compressed, even with a count of 0: records hidden behind it are found inflated. */
            if (attributes & 0x07) { r->status = DECOMPRESS; return; }
            batch_t bt = batch_header(b, pos, start_off, end_off);
            crc_run_t crc = {0xFFFFFFFFu, pos + 21};
            if (follow) bt.crc = &crc;
            rc = kl_records_v2(s, b, pos + 61, entry_end, &bt, r);
            if (follow && (!rc || r->status == ERROR)) {
                /* the walk's steps end at a record it reached: the rest of the batch from there */
                uint32_t computed =
                    kl_crc32c_update(crc.state, b + crc.pos, entry_end - crc.pos) ^ 0xFFFFFFFFu;
                if (!crc_matches(stored, computed, pos, r)) {
                    memcpy(st, saved, sizeof(saved));
                    return;
                }
            }
        } else {
            if (size < legacy_min_size(magic)) {
                r->status = ERROR; r->code = E_LEGACY_MSG_SIZE; r->a = size; r->b = magic;
                return;
            }
            int attributes = b[pos + 17], codec = attributes & 0x07;
            if (codec == 0 && offset >= end_off) { r->status = RANGE_END; return; }
            if (offset < start_off) {
                st[ST_PREV_LAST] = last; st[ST_HAS_PREV] = 1;
                pos = entry_end;
                continue;
            }
            if (validate && codec) rc = kl_legacy_crc(b, pos, entry_end, r);
            if (!rc) {
                int64_t ts = -1;
                int32_t ts_type = -1;
                if (magic == 1) { ts = be64(b + pos + 18); ts_type = (attributes & 0x08) ? 1 : 0; }
                if (codec) {
                    if (codec > 3) {
                        r->status = ERROR; r->code = E_LEGACY_CODEC; r->a = codec; r->b = magic;
                        return;
                    }
                    Py_ssize_t kv[4];
                    rc = kl_legacy_key_value(b, pos, entry_end, magic, kv, r);
                    if (!rc) {
                        if (kv[3] < 0) {
                            r->status = ERROR; r->code = E_LEGACY_NULL_WRAPPER; r->a = magic;
                            return;
                        }
                        r->status = DECOMPRESS; r->a = kv[2]; r->b = kv[3];
                        return;
                    }
                } else {
                    /* A message's CRC is checked once its row is copied, with its bytes in
                     * cache; it comes first all the same: a failing CRC takes the row back and
                     * is the error reported, whatever else is wrong with the message. */
                    rc = kl_legacy_row(s, b, pos, entry_end, offset, ts, ts_type, magic, r);
                    if (validate && (!rc || r->status == ERROR) &&
                        kl_legacy_crc(b, pos, entry_end, r)) {
                        memcpy(st, saved, sizeof(saved));
                        rc = -1;
                    }
                }
            }
        }
        if (rc) {
            if (r->status == NEED_SPACE) {
                memcpy(st, saved, sizeof(saved));
                r->pos = pos;
            }
            r->entry_pos = pos;
            return;
        }
        st[ST_PREV_LAST] = last; st[ST_HAS_PREV] = 1;
        pos = entry_end;
    }
}

/* The compressed v2 batch at ``pos`` (its CRC and count already checked by the walk), inflated
 * by the driver's ``inflate`` (Inflater.inflate, called with the arguments the driver would pass)
 * and its records appended, so that a run of compressed batches costs one Python call each
 * instead of a round trip through the driver. Returns the next entry's position when done; 0
 * to leave the batch to the driver, which redoes it and reports anything wrong with its context
 * (an unknown codec, an exception from ``inflate``, a records error, a full buffer); -1 when an
 * exception that is not an Exception (KeyboardInterrupt, SystemExit) stays raised. */
static Py_ssize_t inflate_v2_batch(SinkObject *s, PyObject *input, const uint8_t *b,
                                   Py_ssize_t pos, int64_t start_off, int64_t end_off,
                                   PyObject *inflate, PyObject *max_size) {
    Py_ssize_t entry_end = pos + 12 + (Py_ssize_t)be32(b + pos + 8);
    int attributes = be16(b + pos + 21);
    if ((attributes & 0x07) > 4) return 0;
    PyObject *records = PySequence_GetSlice(input, pos + 61, entry_end);
    if (!records) goto failed;
    PyObject *codec = PyLong_FromLong(attributes & 0x07), *magic = PyLong_FromLong(2);
    PyObject *argv[4] = {codec, records, magic, max_size};
    PyObject *data = codec && magic ? PyObject_Vectorcall(inflate, argv, 4, NULL) : NULL;
    Py_XDECREF(codec);
    Py_XDECREF(magic);
    Py_DECREF(records);
    if (!data) goto failed;
    Py_buffer out;
    if (kl_get_bytes(data, &out) < 0) {
        Py_DECREF(data);
        goto failed;
    }
    batch_t bt = batch_header(b, pos, start_off, end_off);
    int64_t *st = s->p[S_STATE], saved[STATE_SIZE];
    memcpy(saved, st, sizeof(saved));
    result_t r = {END, out.len, 0, 0, 0, 0, 0};
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = kl_records_v2(s, out.buf, 0, out.len, &bt, &r);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&out);
    Py_DECREF(data);
    if (rc) memcpy(st, saved, sizeof(saved));
    return rc ? 0 : entry_end;
failed:
    if (!PyErr_ExceptionMatches(PyExc_Exception)) return -1;
    PyErr_Clear();
    return 0;
}

PyObject *kl_decode_entries(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 8 && nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "decode_entries takes 8 or 10 arguments");
        return NULL;
    }
    if (!PyObject_TypeCheck(args[0], &kl_SinkType)) {
        PyErr_SetString(PyExc_TypeError, "decode_entries needs a Sink");
        return NULL;
    }
    SinkObject *s = (SinkObject *)args[0];
    Py_ssize_t pos = PyLong_AsSsize_t(args[2]), end = PyLong_AsSsize_t(args[3]);
    long long start_off = PyLong_AsLongLong(args[4]), end_off = PyLong_AsLongLong(args[5]);
    long long max_rows = PyLong_AsLongLong(args[6]);
    long flags = PyLong_AsLong(args[7]);
    if (PyErr_Occurred()) return NULL;
    /* With (inflate, max_size), compressed v2 batches are inflated here: see inflate_v2_batch. */
    PyObject *inflate = nargs == 10 && args[8] != Py_None ? args[8] : NULL;
    if (inflate && (!PyMemoryView_Check(args[1]) || PyMemoryView_GET_BUFFER(args[1])->ndim != 1 ||
                    PyMemoryView_GET_BUFFER(args[1])->itemsize != 1))
        inflate = NULL; /* slices of a byte view only: they must not copy, or count items */
    Py_buffer in;
    if (kl_get_bytes(args[1], &in) < 0) return NULL;
    if (pos < 0 || end > in.len || pos > end) {
        PyBuffer_Release(&in);
        PyErr_SetString(PyExc_ValueError, "decode_entries: pos/end outside the buffer");
        return NULL;
    }
    const uint8_t *b = in.buf;
    result_t r;
    for (;;) {
        Py_BEGIN_ALLOW_THREADS
        decode_entries_impl(s, b, pos, end, start_off, end_off, max_rows, (int)flags, &r);
        Py_END_ALLOW_THREADS
        if (r.status != DECOMPRESS || !inflate || b[r.pos + 16] != 2) break;
        Py_ssize_t next = inflate_v2_batch(s, args[1], b, r.pos, start_off, end_off, inflate,
                                           args[9]);
        if (next < 0) {
            PyBuffer_Release(&in);
            return NULL;
        }
        if (!next) break;
        /* the offset rule: the walk checked this batch's offsets; the next entry follows them */
        int64_t *st = s->p[S_STATE];
        st[ST_PREV_LAST] = be64(b + r.pos) + be32(b + r.pos + 23);
        st[ST_HAS_PREV] = 1;
        pos = next;
    }
    PyBuffer_Release(&in);
    return kl_result_tuple(&r);
}

/* A whole decompressed set is decoded all or nothing: a run stopped for space leaves the sink's
 * state as it found it (saved), and the driver names the entry (entry_pos 0). */
static PyObject *set_result(SinkObject *s, const int64_t *saved, result_t *r, Py_buffer *in) {
    if (r->status == NEED_SPACE) memcpy(s->p[S_STATE], saved, STATE_SIZE * sizeof(int64_t));
    r->entry_pos = 0;
    PyBuffer_Release(in);
    return kl_result_tuple(r);
}

PyObject *kl_decode_records_v2(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    long long v[12];
    SinkObject *s = kl_sink_args("decode_records_v2", args, nargs, 14, v, 12);
    if (s == NULL) return NULL;
    if (v[0] < 0 || v[0] > INT32_MAX || v[11] < INT32_MIN || v[11] > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "decode_records_v2: count or lastOffsetDelta out of range");
        return NULL;
    }
    batch_t bt = {
        .count = (int32_t)v[0], .base_offset = v[1], .base_ts = v[2], .max_ts = v[3],
        .attributes = (int)v[4], .base_seq = v[5], .producer_id = v[6],
        .producer_epoch = (int16_t)v[7], .leader_epoch = (int32_t)v[8], .start_off = v[9],
        .end_off = v[10], .last_delta = (int32_t)v[11],
    };
    Py_buffer in;
    if (kl_get_bytes(args[1], &in) < 0) return NULL;
    result_t r = {END, in.len, 0, 0, 0, 0, 0};
    int64_t saved[STATE_SIZE];
    memcpy(saved, s->p[S_STATE], sizeof(saved));
    Py_BEGIN_ALLOW_THREADS
    kl_records_v2(s, in.buf, 0, in.len, &bt, &r);
    Py_END_ALLOW_THREADS
    return set_result(s, saved, &r, &in);
}

PyObject *kl_decode_legacy_set(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    long long v[7];
    SinkObject *s = kl_sink_args("decode_legacy_set", args, nargs, 9, v, 7);
    if (s == NULL) return NULL;
    Py_buffer in;
    if (kl_get_bytes(args[1], &in) < 0) return NULL;
    result_t r = {END, 0, 0, 0, 0, 0, 0};
    int64_t saved[STATE_SIZE];
    memcpy(saved, s->p[S_STATE], sizeof(saved));
    Py_BEGIN_ALLOW_THREADS
    kl_legacy_set(s, in.buf, in.len, v[0], (int)v[1], (int)v[2], v[3], v[4], v[5], (int)v[6], &r);
    Py_END_ALLOW_THREADS
    return set_result(s, saved, &r, &in);
}

/* -- valid_prefix_run: the v2 batches recovery keeps, a window at a time ----------------------
 * valid_prefix_run(buf, pos, end, segment_base, prev_last, has_prev, out) walks the entries of
 * buf[pos:end] and accepts each magic 2 batch that kafkalog.log.segment.valid_prefix's rule keeps
 * (entries.frame_entry's framing, the stored CRC-32C, offsets_rule.check_entry_offsets' range and
 * increase, a last offset within 2^31 - 1 of segment_base), writing one row of VP_WIDTH int64s
 * to out per batch (VP_* below; positions in buf). It stops at the first entry it does not
 * accept or leave to the walk: a partial entry or the end (VP_END), an entry the walk must judge
 * (VP_STOP: a legacy entry, a transaction marker with a producer id, or one that breaks a rule:
 * the Python walk raises its error), or a full out (VP_FULL). Returns (status, pos, rows,
 * prev_last, has_prev): where it stopped and the offset rule's memory there. */
enum { VP_END, VP_STOP, VP_FULL };
enum { VP_POSITION, VP_SIZE, VP_BASE_OFFSET, VP_LAST_OFFSET, VP_MAX_TIMESTAMP, VP_LEADER_EPOCH,
       VP_PRODUCER_ID, VP_WIDTH };

static int vp_accepts(const uint8_t *p, Py_ssize_t size, int64_t segment_base, int64_t prev_last,
                      int has_prev, int64_t *last_out) {
    if (p[16] != 2 || size < 61) return 0;
    int attributes = be16(p + 21);
    int64_t producer_id = be64(p + 43);
    if ((attributes & 0x20) && producer_id >= 0) return 0; /* a marker: producer state's check */
    uint32_t stored = (uint32_t)be32(p + 17);
    if (kl_crc32c(p + 21, size - 21) != stored) return 0;
    int64_t base = be64(p);
    int64_t delta = be32(p + 23);
    if (base < 0 || base > MAX_LAST_OFFSET) return 0;
    if (delta > 0 && base > MAX_LAST_OFFSET - delta) return 0;
    int64_t last = base + delta;
    if (has_prev && base <= prev_last) return 0;
    if (segment_base < 0 || last < segment_base || last - segment_base > INT32_MAX) return 0;
    *last_out = last;
    return 1;
}

/* A window kernel's two buffers: the input (bytes-like) and the int64 rows it writes (writable,
 * contiguous), with pos/end checked against the input; 0, or -1 with the error set and nothing
 * held. */
static int window_buffers(const char *name, PyObject *buf, PyObject *rows, Py_ssize_t pos,
                          Py_ssize_t end, Py_buffer *in, Py_buffer *out) {
    if (kl_get_bytes(buf, in) < 0) return -1;
    if (PyObject_GetBuffer(rows, out, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(in);
        return -1;
    }
    if (pos < 0 || end > in->len || pos > end) {
        PyBuffer_Release(in);
        PyBuffer_Release(out);
        PyErr_Format(PyExc_ValueError, "%s: pos/end outside the buffer", name);
        return -1;
    }
    return 0;
}

PyObject *kl_valid_prefix_run(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    (void)mod;
    long long v[5];
    if (kl_int_args("valid_prefix_run", args, nargs, 7, 1, v, 5) < 0) return NULL;
    Py_ssize_t pos = (Py_ssize_t)v[0], end = (Py_ssize_t)v[1];
    int64_t segment_base = v[2], prev_last = v[3];
    int has_prev = v[4] != 0;
    Py_buffer in, out;
    if (window_buffers("valid_prefix_run", args[0], args[6], pos, end, &in, &out) < 0) return NULL;
    const uint8_t *b = in.buf;
    int64_t *rows = out.buf;
    const Py_ssize_t capacity = out.len / (Py_ssize_t)(VP_WIDTH * sizeof(int64_t));
    Py_ssize_t n = 0;
    int status = VP_END;
    Py_BEGIN_ALLOW_THREADS
    while (end - pos > 17) {
        const uint8_t *p = b + pos;
        int64_t size = be32(p + 8);
        if (size < 14) { status = VP_STOP; break; }
        if (size > end - pos - 12) break; /* partial: VP_END */
        if (p[16] > 2 || (p[16] == 2 && size < 49)) { status = VP_STOP; break; }
        if (n == capacity) { status = VP_FULL; break; }
        int64_t last;
        if (!vp_accepts(p, (Py_ssize_t)size + 12, segment_base, prev_last, has_prev, &last)) {
            status = VP_STOP;
            break;
        }
        int64_t *row = rows + n * VP_WIDTH;
        row[VP_POSITION] = pos;
        row[VP_SIZE] = size + 12;
        row[VP_BASE_OFFSET] = be64(p);
        row[VP_LAST_OFFSET] = last;
        row[VP_MAX_TIMESTAMP] = be64(p + 35);
        row[VP_LEADER_EPOCH] = be32(p + 12);
        row[VP_PRODUCER_ID] = be64(p + 43);
        n++;
        prev_last = last;
        has_prev = 1;
        pos += (Py_ssize_t)size + 12;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&in);
    PyBuffer_Release(&out);
    return Py_BuildValue("(innLi)", status, pos, n, (long long)prev_last, has_prev);
}

/* -- frame_run: where a run of entries ends -------------------------------------------------
 * frame_run(buf, pos, end, out) -> (pos, n): the entries kafkalog.format.entries.framed_run frames
 * one after another from buf[pos:end] (its rules: a size of at least 14 that the window holds
 * whole, magic 0-2, a magic 2 batch of at least 61 bytes), up to the first partial or corrupt one
 * or a full out; out (int64[2 * capacity]) gets each entry's end and offset field. No CRC: the
 * reader's decoding checks it. */
PyObject *kl_frame_run(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    (void)mod;
    long long v[2];
    if (kl_int_args("frame_run", args, nargs, 4, 1, v, 2) < 0) return NULL;
    Py_ssize_t pos = (Py_ssize_t)v[0], end = (Py_ssize_t)v[1];
    Py_buffer in, out;
    if (window_buffers("frame_run", args[0], args[3], pos, end, &in, &out) < 0) return NULL;
    const uint8_t *b = in.buf;
    int64_t *rows = out.buf;
    const Py_ssize_t capacity = out.len / (Py_ssize_t)(2 * sizeof(int64_t));
    Py_ssize_t n = 0;
    while (end - pos > 17 && n < capacity) {
        const uint8_t *p = b + pos;
        int64_t size = be32(p + 8);
        if (size < 14 || size > end - pos - 12) break;
        if (p[16] > 2 || (p[16] == 2 && size < 49)) break;
        pos += (Py_ssize_t)size + 12;
        rows[2 * n] = pos;
        rows[2 * n + 1] = be64(p);
        n++;
    }
    PyBuffer_Release(&in);
    PyBuffer_Release(&out);
    return Py_BuildValue("(nn)", pos, n);
}
