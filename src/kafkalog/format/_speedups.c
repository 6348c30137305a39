/*
 * kafkalog.format._speedups: the compiled twin of _pure_kernels.py (the columnar fast path).
 *
 * Same functions, arguments, results and error codes as the pure kernels; the contract is
 * _kernel_abi.py, whose numbers are repeated below and exported so a test can compare them.
 * Kernels never raise for bad bytes: they return (status, pos, code, a, b, c, entry_pos) and the
 * Python driver turns codes into kafkalog's exceptions, so both twins raise identical errors.
 *
 * Safety rules, because every input byte is hostile:
 *   - every read is bounded by the end of the entry, record or field being read, checked before
 *     the read (lengths and counts are compared with the bytes left before anything is copied);
 *   - every write is bounded by the capacity of the sink array written: when it would not fit,
 *     the kernel restores the fill levels and returns NEED_SPACE, and the driver grows and retries;
 *   - arithmetic on offsets and timestamps from the bytes is done in uint64 (wrapping like Java's
 *     long), never as signed overflow.
 * Buffers come in through the buffer protocol (bytes, bytearray, memoryview, mmap, numpy), so
 * nothing is copied on the way in; the GIL is released while a kernel runs.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define ABI_VERSION 1

/* output slots */
enum {
    S_OFFSET, S_TIMESTAMP, S_TIMESTAMP_TYPE, S_KEY_OFFSETS, S_KEY_VALID, S_KEY_DATA,
    S_VALUE_OFFSETS, S_VALUE_VALID, S_VALUE_DATA, S_HEADER_OFFSETS, S_HKEY_OFFSETS, S_HKEY_DATA,
    S_HVAL_OFFSETS, S_HVAL_VALID, S_HVAL_DATA, S_PRODUCER_ID, S_PRODUCER_EPOCH, S_SEQUENCE,
    S_IS_TRANSACTIONAL, S_IS_CONTROL, S_PARTITION_LEADER_EPOCH, S_STATE, S_ENTRIES, NUM_SLOTS
};
static const int slot_itemsize[NUM_SLOTS] = {8, 8, 4, 4, 1, 1, 4, 1, 1, 4, 4, 1, 4, 1, 1,
                                             8, 2, 4, 1, 1, 4, 8, 8};
enum { ST_ROWS, ST_KEY_BYTES, ST_VALUE_BYTES, ST_HEADERS, ST_HKEY_BYTES, ST_HVAL_BYTES,
       ST_ENTRIES, ST_PENDING_BYTES, STATE_SIZE = 8 };
#define CRC_WINDOW (1 << 20)
enum { END, DECOMPRESS, ROWS_FULL, NEED_SPACE, RANGE_END, ENTRIES_FULL, ERROR };
enum { GROW_ROWS, GROW_KEY_DATA, GROW_VALUE_DATA, GROW_HEADERS, GROW_HKEY_DATA, GROW_HVAL_DATA };
#define FLAG_VALIDATE_CRC 1
#define FLAG_KEEP_CONTROL 2
enum {
    E_ENTRY_SIZE = 1, E_MAGIC, E_BATCH_SIZE, E_COUNT_NEGATIVE, E_COUNT_TOO_LARGE, E_VARINT_EOF,
    E_VARINT_LONG, E_RECORD_SIZE_OVERRUN, E_RECORD_SIZE_SMALL, E_KEY_OVERRUN, E_VALUE_OVERRUN,
    E_HEADERS_NEGATIVE, E_HEADERS_TOO_MANY, E_HKEY_SIZE, E_HVAL_OVERRUN, E_RECORD_PAYLOAD,
    E_RECORDS_REMAINING, E_CRC, E_LEGACY_MSG_SIZE, E_LEGACY_OVERRUN, E_LEGACY_CODEC,
    E_LEGACY_NULL_WRAPPER, E_INNER_STRAY, E_INNER_SIZE, E_INNER_MAGIC, E_INNER_NESTED,
    E_INNER_EMPTY, E_WRAPPER_OFFSET
};
enum { F_RECORD_LENGTH, F_TIMESTAMP_DELTA, F_OFFSET_DELTA, F_KEY_LENGTH, F_VALUE_LENGTH,
       F_HEADER_COUNT, F_HKEY_LENGTH, F_HVAL_LENGTH };
enum { PLAN_START, PLAN_COUNT, PLAN_BYTES, PLAN_FIRST_TS, PLAN_MAX_TS, PLAN_WIDTH };
#define SOURCE_SLOTS 13

typedef struct {
    int status;
    Py_ssize_t pos;
    int code;
    long long a, b, c;
    Py_ssize_t entry_pos;
} result_t;

static PyObject *result_tuple(const result_t *r) {
    return Py_BuildValue("(iniLLLn)", r->status, r->pos, r->code, r->a, r->b, r->c,
                         r->entry_pos);
}

/* -- byte helpers ------------------------------------------------------------------------------ */
static inline int64_t be64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = (v << 8) | p[i];
    return (int64_t)v;
}
static inline int32_t be32(const uint8_t *p) {
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) |
                     (uint32_t)p[3]);
}
static inline int16_t be16(const uint8_t *p) { return (int16_t)(((uint16_t)p[0] << 8) | p[1]); }
static inline int64_t wadd(int64_t x, int64_t y) { return (int64_t)((uint64_t)x + (uint64_t)y); }
static inline int64_t wsub(int64_t x, int64_t y) { return (int64_t)((uint64_t)x - (uint64_t)y); }
static inline int32_t wrap32(int64_t x) { return (int32_t)(uint32_t)(uint64_t)x; }

/* -- CRC-32 (zlib's polynomial), slicing by 8, for magic 0/1 messages --------------------------- */
static uint32_t crc_tab[8][256];
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_CLMUL_CRC 1
static int use_clmul = 0; /* set at import when the CPU has PCLMULQDQ */
#endif

static void crc32_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_tab[0][i] = c;
    }
    for (int t = 1; t < 8; t++)
        for (int i = 0; i < 256; i++)
            crc_tab[t][i] = (crc_tab[t - 1][i] >> 8) ^ crc_tab[0][crc_tab[t - 1][i] & 0xFF];
#ifdef HAVE_CLMUL_CRC
    __builtin_cpu_init();
    use_clmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse2");
#endif
}

static uint32_t crc32_update(uint32_t c, const uint8_t *p, Py_ssize_t n) {
    while (n >= 8) {
        uint32_t one = ((uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
                        ((uint32_t)p[3] << 24)) ^ c;
        uint32_t two = (uint32_t)p[4] | ((uint32_t)p[5] << 8) | ((uint32_t)p[6] << 16) |
                       ((uint32_t)p[7] << 24);
        c = crc_tab[7][one & 0xFF] ^ crc_tab[6][(one >> 8) & 0xFF] ^
            crc_tab[5][(one >> 16) & 0xFF] ^ crc_tab[4][one >> 24] ^ crc_tab[3][two & 0xFF] ^
            crc_tab[2][(two >> 8) & 0xFF] ^ crc_tab[1][(two >> 16) & 0xFF] ^ crc_tab[0][two >> 24];
        p += 8;
        n -= 8;
    }
    while (n-- > 0) c = crc_tab[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    return c;
}

#ifdef HAVE_CLMUL_CRC
/* Carry-less multiplication folding (Intel's "Fast CRC Computation Using PCLMULQDQ"): folds the
 * data 64 bytes at a time into four 128-bit lanes, then into one, whose 16 bytes are congruent to
 * everything folded so far: the table finishes from there with a zero state. The constants are
 * x^(32*k) mod P, bit-reflected, for the distances 512+-32 and 128+-32 bits. n >= 64; returns the
 * CRC state (not inverted) after the first *used bytes. */
__attribute__((target("pclmul,sse2"))) static uint32_t crc32_clmul(uint32_t c, const uint8_t *p,
                                                                   Py_ssize_t n, Py_ssize_t *used) {
    const uint8_t *start = p;
    __m128i x1 = _mm_loadu_si128((const __m128i *)p), x2 = _mm_loadu_si128((const __m128i *)(p + 16));
    __m128i x3 = _mm_loadu_si128((const __m128i *)(p + 32)), x4 = _mm_loadu_si128((const __m128i *)(p + 48));
    x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)c));
    p += 64;
    n -= 64;
    __m128i k = _mm_set_epi64x(0x01c6e41596LL, 0x0154442bd4LL);
#define FOLD(x, next)                                                                      \
    x = _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00),                      \
                                    _mm_clmulepi64_si128(x, k, 0x11)), (next))
    while (n >= 64) {
        FOLD(x1, _mm_loadu_si128((const __m128i *)p));
        FOLD(x2, _mm_loadu_si128((const __m128i *)(p + 16)));
        FOLD(x3, _mm_loadu_si128((const __m128i *)(p + 32)));
        FOLD(x4, _mm_loadu_si128((const __m128i *)(p + 48)));
        p += 64;
        n -= 64;
    }
    k = _mm_set_epi64x(0x00ccaa009eLL, 0x01751997d0LL);
    FOLD(x1, x2);
    FOLD(x1, x3);
    FOLD(x1, x4);
    while (n >= 16) {
        FOLD(x1, _mm_loadu_si128((const __m128i *)p));
        p += 16;
        n -= 16;
    }
#undef FOLD
    uint8_t lane[16];
    _mm_storeu_si128((__m128i *)lane, x1);
    *used = p - start;
    return crc32_update(0, lane, 16);
}
#endif

static uint32_t crc32_of(const uint8_t *p, Py_ssize_t n) {
    uint32_t c = 0xFFFFFFFFu;
#ifdef HAVE_CLMUL_CRC
    if (use_clmul && n >= 64) {
        Py_ssize_t used;
        c = crc32_clmul(c, p, n, &used);
        p += used;
        n -= used;
    }
#endif
    return crc32_update(c, p, n) ^ 0xFFFFFFFFu;
}

/* -- UTF-8: header keys decode as Kafka's new String(bytes, UTF_8), i.e. Python's "replace" ---- */
/* Strict validity as Python's decoder sees it (no surrogates, no overlongs, <= U+10FFFF). */
static int utf8_valid(const uint8_t *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (n - i >= 8) { /* ASCII fast path, eight bytes at a time */
        uint64_t w;
        memcpy(&w, s + i, 8);
        if (w & 0x8080808080808080ull) break;
        i += 8;
    }
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) { i++; continue; }
        if (c < 0xC2) return 0;
        if (c < 0xE0) {
            if (n - i < 2 || (s[i + 1] & 0xC0) != 0x80) return 0;
            i += 2;
        } else if (c < 0xF0) {
            if (n - i < 3) return 0;
            uint8_t c1 = s[i + 1], c2 = s[i + 2];
            if ((c1 & 0xC0) != 0x80 || (c2 & 0xC0) != 0x80) return 0;
            if (c == 0xE0 && c1 < 0xA0) return 0;
            if (c == 0xED && c1 >= 0xA0) return 0;
            i += 3;
        } else if (c < 0xF5) {
            if (n - i < 4) return 0;
            uint8_t c1 = s[i + 1], c2 = s[i + 2], c3 = s[i + 3];
            if ((c1 & 0xC0) != 0x80 || (c2 & 0xC0) != 0x80 || (c3 & 0xC0) != 0x80) return 0;
            if (c == 0xF0 && c1 < 0x90) return 0;
            if (c == 0xF4 && c1 >= 0x90) return 0;
            i += 4;
        } else {
            return 0;
        }
    }
    return 1;
}

/* Python's bytes.decode("utf-8", "replace"), re-encoded: each maximal invalid subpart (Unicode's
 * "substitution of maximal subparts", which CPython follows) becomes U+FFFD. Writes at most 3n. */
static Py_ssize_t utf8_replace(const uint8_t *s, Py_ssize_t n, uint8_t *o) {
    Py_ssize_t i = 0, w = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) { o[w++] = c; i++; continue; }
        int need = 0;
        uint8_t lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) need = 1;
        else if (c >= 0xE0 && c <= 0xEF) {
            need = 2;
            if (c == 0xE0) lo = 0xA0;
            else if (c == 0xED) hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            need = 3;
            if (c == 0xF0) lo = 0x90;
            else if (c == 0xF4) hi = 0x8F;
        }
        Py_ssize_t j = 1;
        int ok = need > 0;
        for (int k = 0; ok && k < need; k++) {
            if (i + j >= n) { ok = 0; break; }
            uint8_t d = s[i + j];
            if (d < (k == 0 ? lo : 0x80) || d > (k == 0 ? hi : 0xBF)) { ok = 0; break; }
            j++;
        }
        if (ok) {
            memcpy(o + w, s + i, (size_t)j);
            w += j;
        } else {
            o[w++] = 0xEF; o[w++] = 0xBF; o[w++] = 0xBD;
        }
        i += j;
    }
    return w;
}

/* -- varints (zigzag), exactly record.py's rules: > max_bytes is corruption, 5-byte keeps 32 bits */
/* Returns 0, or the error code with r filled (position = start of the varint). */
static int varint_slow(const uint8_t *b, Py_ssize_t *p, Py_ssize_t end, int max_bytes, int field,
                       int64_t *out, result_t *r) {
    Py_ssize_t q = *p, start = q;
    uint64_t raw = 0;
    int shift = 0;
    for (;;) {
        if (q >= end) {
            r->status = ERROR; r->pos = start; r->code = E_VARINT_EOF; r->a = field;
            return E_VARINT_EOF;
        }
        uint8_t c = b[q++];
        if (shift < 64) raw |= (uint64_t)(c & 0x7F) << shift;
        if (c < 0x80) break;
        shift += 7;
        if (q - start >= max_bytes) {
            r->status = ERROR; r->pos = start; r->code = E_VARINT_LONG; r->a = field;
            r->b = max_bytes;
            return E_VARINT_LONG;
        }
    }
    if (max_bytes == 5) raw &= 0xFFFFFFFFu;
    *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
    *p = q;
    return 0;
}

#define READ_VARINT(dst, end_, maxb, field)                                              \
    do {                                                                                 \
        if (pos < (end_) && b[pos] < 0x80) {                                             \
            uint8_t c_ = b[pos++];                                                       \
            (dst) = (int64_t)(c_ >> 1) ^ -(int64_t)(c_ & 1);                             \
        } else if (varint_slow(b, &pos, (end_), (maxb), (field), &(dst), r)) {           \
            return -1;                                                                   \
        }                                                                                \
    } while (0)

#define FAIL(code_, pos_, a_, b_, c_)                                                    \
    do {                                                                                 \
        r->status = ERROR; r->pos = (pos_); r->code = (code_);                           \
        r->a = (a_); r->b = (b_); r->c = (c_);                                           \
        return -1;                                                                       \
    } while (0)

#define GROW(group, need)                                                                \
    do {                                                                                 \
        r->status = NEED_SPACE; r->pos = -1; r->code = (group); r->a = (need);           \
        r->b = 0; r->c = 0;                                                              \
        return -1;                                                                       \
    } while (0)

/* -- Sink: the driver's output arrays, with their pointers and capacities ---------------------- */
typedef struct {
    PyObject_HEAD
    Py_buffer views[NUM_SLOTS];
    int nviews;
    void *p[NUM_SLOTS];
    Py_ssize_t cap[NUM_SLOTS];
    PyObject *arrays;
} SinkObject;

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
    for (int i = 0; i < ST_ENTRIES; i++)
        if (st[i] < 0) {
            PyErr_SetString(PyExc_ValueError, "negative sink state");
            return -1;
        }
    if (st[ST_ROWS] > rows || st[ST_HEADERS] > hdrs || st[ST_KEY_BYTES] > self->cap[S_KEY_DATA] ||
        st[ST_VALUE_BYTES] > self->cap[S_VALUE_DATA] || st[ST_HKEY_BYTES] > self->cap[S_HKEY_DATA] ||
        st[ST_HVAL_BYTES] > self->cap[S_HVAL_DATA] || 3 * st[ST_ENTRIES] > self->cap[S_ENTRIES]) {
        PyErr_SetString(PyExc_ValueError, "sink state beyond its arrays");
        return -1;
    }
    Py_INCREF(arrays);
    self->arrays = arrays;
    return 0;
}

static PyTypeObject SinkType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kafkalog.format._speedups.Sink",
    .tp_doc = "The driver's output arrays, held for the kernels.",
    .tp_basicsize = sizeof(SinkObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Sink_init,
    .tp_dealloc = (destructor)Sink_dealloc,
};

/* -- v2 records ------------------------------------------------------------------------------ */
typedef struct {
    int64_t base_offset, base_ts, max_ts, base_seq, producer_id, start_off, end_off;
    int32_t count, leader_epoch;
    int16_t producer_epoch;
    int attributes;
} batch_t;

static inline int32_t sequence_of(int64_t base, int64_t delta) {
    if (base < 0) return -1;
    if (base > INT32_MAX - delta) return wrap32(delta - (INT32_MAX - base) - 1);
    return wrap32(base + delta);
}

/* Append the records of b[start:end]; 0, or -1 with r filled (ERROR or NEED_SPACE). Fill levels
 * change only on success, so the caller can retry after growing. */
static int records_v2(SinkObject *s, const uint8_t *b, Py_ssize_t start, Py_ssize_t end,
                      const batch_t *bt, result_t *r) {
    int64_t *st = s->p[S_STATE];
    int64_t count = bt->count;
    if (count * 7 > (int64_t)(end - start)) FAIL(E_COUNT_TOO_LARGE, start, count, end - start, 0);
    int64_t n = st[ST_ROWS];
    if (n + count > s->cap[S_OFFSET]) GROW(GROW_ROWS, n + count);
    int64_t ku = st[ST_KEY_BYTES], vu = st[ST_VALUE_BYTES];
    int64_t nh = st[ST_HEADERS], hku = st[ST_HKEY_BYTES], hvu = st[ST_HVAL_BYTES];
    int64_t *o_off = s->p[S_OFFSET], *o_ts = s->p[S_TIMESTAMP], *o_pid = s->p[S_PRODUCER_ID];
    int32_t *o_tt = s->p[S_TIMESTAMP_TYPE], *o_ko = s->p[S_KEY_OFFSETS], *o_vo = s->p[S_VALUE_OFFSETS];
    int32_t *o_ho = s->p[S_HEADER_OFFSETS], *o_hko = s->p[S_HKEY_OFFSETS];
    int32_t *o_hvo = s->p[S_HVAL_OFFSETS], *o_seq = s->p[S_SEQUENCE];
    int32_t *o_ple = s->p[S_PARTITION_LEADER_EPOCH];
    int16_t *o_ep = s->p[S_PRODUCER_EPOCH];
    uint8_t *o_kv = s->p[S_KEY_VALID], *o_kd = s->p[S_KEY_DATA], *o_vv = s->p[S_VALUE_VALID];
    uint8_t *o_vd = s->p[S_VALUE_DATA], *o_hkd = s->p[S_HKEY_DATA], *o_hvv = s->p[S_HVAL_VALID];
    uint8_t *o_hvd = s->p[S_HVAL_DATA], *o_txn = s->p[S_IS_TRANSACTIONAL], *o_ctl = s->p[S_IS_CONTROL];
    const Py_ssize_t kcap = s->cap[S_KEY_DATA], vcap = s->cap[S_VALUE_DATA];
    const Py_ssize_t hcap = s->cap[S_HVAL_VALID], hkcap = s->cap[S_HKEY_DATA];
    const Py_ssize_t hvcap = s->cap[S_HVAL_DATA];
    const int log_append = (bt->attributes & 0x08) != 0;
    const uint8_t txn = (bt->attributes & 0x10) ? 1 : 0, ctl = (bt->attributes & 0x20) ? 1 : 0;
    Py_ssize_t pos = start;
    for (int64_t i = 0; i < count; i++) {
        Py_ssize_t record_start = pos;
        int64_t length, ts_delta, offset_delta, k_len, v_len, h_count;
        READ_VARINT(length, end, 5, F_RECORD_LENGTH);
        if (length < 0 || length > (int64_t)(end - pos))
            FAIL(E_RECORD_SIZE_OVERRUN, record_start, length, end - pos, 0);
        Py_ssize_t body_end = pos + (Py_ssize_t)length;
        if (length < 6) FAIL(E_RECORD_SIZE_SMALL, record_start, length, 0, 0);
        pos += 1; /* attributes: unused */
        READ_VARINT(ts_delta, body_end, 10, F_TIMESTAMP_DELTA);
        READ_VARINT(offset_delta, body_end, 5, F_OFFSET_DELTA);
        READ_VARINT(k_len, body_end, 5, F_KEY_LENGTH);
        Py_ssize_t k_pos = pos;
        if (k_len >= 0) { /* Kafka reads any negative size as null */
            if (k_len > (int64_t)(body_end - pos)) FAIL(E_KEY_OVERRUN, pos, k_len, body_end - pos, 0);
            pos += (Py_ssize_t)k_len;
        }
        READ_VARINT(v_len, body_end, 5, F_VALUE_LENGTH);
        Py_ssize_t v_pos = pos;
        if (v_len >= 0) {
            if (v_len > (int64_t)(body_end - pos))
                FAIL(E_VALUE_OVERRUN, pos, v_len, body_end - pos, 0);
            pos += (Py_ssize_t)v_len;
        }
        READ_VARINT(h_count, body_end, 5, F_HEADER_COUNT);
        if (h_count < 0) FAIL(E_HEADERS_NEGATIVE, pos, h_count, 0, 0);
        int64_t offset = wadd(bt->base_offset, offset_delta);
        int keep = offset >= bt->start_off && offset < bt->end_off;
        if (h_count) {
            if (h_count * 2 > (int64_t)(body_end - pos))
                FAIL(E_HEADERS_TOO_MANY, pos, h_count, body_end - pos, 0);
            if (keep && nh + h_count > hcap) GROW(GROW_HEADERS, nh + h_count + (end - pos) / 2);
            int64_t nh0 = nh, hku0 = hku, hvu0 = hvu;
            for (int64_t h = 0; h < h_count; h++) {
                int64_t hk_len, hv_len;
                READ_VARINT(hk_len, body_end, 5, F_HKEY_LENGTH);
                if (hk_len < 0 || hk_len > (int64_t)(body_end - pos))
                    FAIL(E_HKEY_SIZE, pos, hk_len, 0, 0);
                Py_ssize_t hk_pos = pos;
                pos += (Py_ssize_t)hk_len;
                READ_VARINT(hv_len, body_end, 5, F_HVAL_LENGTH);
                Py_ssize_t hv_pos = pos;
                if (hv_len >= 0) {
                    if (hv_len > (int64_t)(body_end - pos)) FAIL(E_HVAL_OVERRUN, pos, hv_len, 0, 0);
                    pos += (Py_ssize_t)hv_len;
                }
                if (keep) {
                    if (utf8_valid(b + hk_pos, (Py_ssize_t)hk_len)) {
                        if (hku + hk_len > hkcap) GROW(GROW_HKEY_DATA, hku + (end - hk_pos));
                        memcpy(o_hkd + hku, b + hk_pos, (size_t)hk_len);
                        hku += hk_len;
                    } else {
                        if (hku + 3 * hk_len > hkcap)
                            GROW(GROW_HKEY_DATA, hku + 3 * hk_len + (end - hk_pos));
                        hku += utf8_replace(b + hk_pos, (Py_ssize_t)hk_len, o_hkd + hku);
                    }
                    o_hko[nh + 1] = (int32_t)hku;
                    if (hv_len >= 0) {
                        if (hvu + hv_len > hvcap) GROW(GROW_HVAL_DATA, hvu + (end - hv_pos));
                        memcpy(o_hvd + hvu, b + hv_pos, (size_t)hv_len);
                        hvu += hv_len;
                        o_hvv[nh] = 1;
                    } else {
                        o_hvv[nh] = 0;
                    }
                    o_hvo[nh + 1] = (int32_t)hvu;
                    nh++;
                }
            }
            if (!keep) { nh = nh0; hku = hku0; hvu = hvu0; }
        }
        if (pos != body_end)
            FAIL(E_RECORD_PAYLOAD, record_start, length, (int64_t)(pos - (body_end - length)), 0);
        if (!keep) continue;
        if (k_len >= 0) {
            if (ku + k_len > kcap) GROW(GROW_KEY_DATA, ku + (end - k_pos));
            memcpy(o_kd + ku, b + k_pos, (size_t)k_len);
            ku += k_len;
            o_kv[n] = 1;
        } else {
            o_kv[n] = 0;
        }
        o_ko[n + 1] = (int32_t)ku;
        if (v_len >= 0) {
            if (vu + v_len > vcap) GROW(GROW_VALUE_DATA, vu + (end - v_pos));
            memcpy(o_vd + vu, b + v_pos, (size_t)v_len);
            vu += v_len;
            o_vv[n] = 1;
        } else {
            o_vv[n] = 0;
        }
        o_vo[n + 1] = (int32_t)vu;
        o_ho[n + 1] = (int32_t)nh;
        o_off[n] = offset;
        o_ts[n] = log_append ? bt->max_ts : wadd(bt->base_ts, ts_delta);
        o_tt[n] = log_append;
        o_pid[n] = bt->producer_id;
        o_ep[n] = bt->producer_epoch;
        o_seq[n] = sequence_of(bt->base_seq, offset_delta);
        o_txn[n] = txn;
        o_ctl[n] = ctl;
        o_ple[n] = bt->leader_epoch;
        n++;
    }
    if (pos != end) FAIL(E_RECORDS_REMAINING, pos, end - pos, count, 0);
    st[ST_ROWS] = n;
    st[ST_KEY_BYTES] = ku;
    st[ST_VALUE_BYTES] = vu;
    st[ST_HEADERS] = nh;
    st[ST_HKEY_BYTES] = hku;
    st[ST_HVAL_BYTES] = hvu;
    return 0;
}

/* -- legacy messages ------------------------------------------------------------------------- */
static inline int legacy_min_size(int magic) { return magic == 0 ? 14 : 22; }

/* Key and value of the message whose entry is b[pos:end] (its size already checked >= min). */
static int legacy_key_value(const uint8_t *b, Py_ssize_t pos, Py_ssize_t end, int magic,
                            Py_ssize_t out[4], result_t *r) {
    Py_ssize_t p = pos + 12 + legacy_min_size(magic) - 8;
    for (int field = 0; field < 2; field++) {
        int64_t length = be32(b + p);
        p += 4;
        if (length < 0) { /* any negative size is null, as LegacyRecord reads it */
            out[2 * field] = p;
            out[2 * field + 1] = -1;
        } else {
            int64_t remaining = (int64_t)(end - p) - (field == 0 ? 4 : 0);
            if (length > remaining) FAIL(E_LEGACY_OVERRUN, pos, field, length, remaining);
            out[2 * field] = p;
            out[2 * field + 1] = (Py_ssize_t)length;
            p += (Py_ssize_t)length;
        }
    }
    return 0;
}

static int legacy_row(SinkObject *s, const uint8_t *b, Py_ssize_t pos, Py_ssize_t end,
                      int64_t offset, int64_t ts, int32_t ts_type, int magic, result_t *r) {
    int64_t *st = s->p[S_STATE];
    int64_t n = st[ST_ROWS], ku = st[ST_KEY_BYTES], vu = st[ST_VALUE_BYTES];
    Py_ssize_t kv[4];
    if (legacy_key_value(b, pos, end, magic, kv, r)) return -1;
    Py_ssize_t k_len = kv[1], v_len = kv[3];
    if (n + 1 > s->cap[S_OFFSET]) GROW(GROW_ROWS, n + 1);
    if (k_len > 0 && ku + k_len > s->cap[S_KEY_DATA]) GROW(GROW_KEY_DATA, ku + k_len);
    if (v_len > 0 && vu + v_len > s->cap[S_VALUE_DATA]) GROW(GROW_VALUE_DATA, vu + v_len);
    if (k_len >= 0) {
        memcpy((uint8_t *)s->p[S_KEY_DATA] + ku, b + kv[0], (size_t)k_len);
        ku += k_len;
    }
    if (v_len >= 0) {
        memcpy((uint8_t *)s->p[S_VALUE_DATA] + vu, b + kv[2], (size_t)v_len);
        vu += v_len;
    }
    ((uint8_t *)s->p[S_KEY_VALID])[n] = k_len >= 0;
    ((uint8_t *)s->p[S_VALUE_VALID])[n] = v_len >= 0;
    ((int32_t *)s->p[S_KEY_OFFSETS])[n + 1] = (int32_t)ku;
    ((int32_t *)s->p[S_VALUE_OFFSETS])[n + 1] = (int32_t)vu;
    ((int32_t *)s->p[S_HEADER_OFFSETS])[n + 1] = (int32_t)st[ST_HEADERS];
    ((int64_t *)s->p[S_OFFSET])[n] = offset;
    ((int64_t *)s->p[S_TIMESTAMP])[n] = ts;
    ((int32_t *)s->p[S_TIMESTAMP_TYPE])[n] = ts_type;
    ((int64_t *)s->p[S_PRODUCER_ID])[n] = -1;
    ((int16_t *)s->p[S_PRODUCER_EPOCH])[n] = -1;
    ((int32_t *)s->p[S_SEQUENCE])[n] = -1;
    ((uint8_t *)s->p[S_IS_TRANSACTIONAL])[n] = 0;
    ((uint8_t *)s->p[S_IS_CONTROL])[n] = 0;
    ((int32_t *)s->p[S_PARTITION_LEADER_EPOCH])[n] = -1;
    st[ST_ROWS] = n + 1;
    st[ST_KEY_BYTES] = ku;
    st[ST_VALUE_BYTES] = vu;
    return 0;
}

static int legacy_crc(const uint8_t *b, Py_ssize_t pos, Py_ssize_t end, result_t *r) {
    uint32_t stored = (uint32_t)be32(b + pos + 12);
    uint32_t computed = crc32_of(b + pos + 16, end - pos - 16);
    if (stored != computed) FAIL(E_CRC, pos, stored, computed, 0);
    return 0;
}

/* -- buffers in --------------------------------------------------------------------------------- */
static int get_bytes(PyObject *obj, Py_buffer *view) {
    return PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS);
}

/* -- decode_entries --------------------------------------------------------------------------- */
static void decode_entries_impl(SinkObject *s, const uint8_t *b, Py_ssize_t pos, Py_ssize_t end,
                                int64_t start_off, int64_t end_off, int64_t max_rows, int flags,
                                result_t *r) {
    int64_t *st = s->p[S_STATE];
    int64_t *entries = s->p[S_ENTRIES];
    const int validate = flags & FLAG_VALIDATE_CRC, keep_control = flags & FLAG_KEEP_CONTROL;
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
        Py_ssize_t entry_end = pos + 12 + (Py_ssize_t)size;
        memcpy(saved, st, sizeof(saved));
        int rc = 0;
        if (magic == 2) {
            if (offset >= end_off) { r->status = RANGE_END; return; }
            int attributes = be16(b + pos + 21);
            int64_t last = wadd(offset, be32(b + pos + 23));
            if (last < start_off || ((attributes & 0x20) && !keep_control)) {
                pos = entry_end;
                continue;
            }
            if (validate) {
                int64_t n_ent = st[ST_ENTRIES];
                if (3 * n_ent + 3 > s->cap[S_ENTRIES] || st[ST_PENDING_BYTES] >= CRC_WINDOW) {
                    r->status = ENTRIES_FULL;
                    return;
                }
                entries[3 * n_ent] = pos;
                entries[3 * n_ent + 1] = entry_end;
                entries[3 * n_ent + 2] = (uint32_t)be32(b + pos + 17);
                st[ST_ENTRIES] = n_ent + 1;
                st[ST_PENDING_BYTES] += size + 12;
            }
            int32_t count = be32(b + pos + 57);
            if (count < 0) { r->status = ERROR; r->code = E_COUNT_NEGATIVE; r->a = count; return; }
            if (attributes & 0x07) {
                if (count) { r->status = DECOMPRESS; return; }
                pos = entry_end;
                continue;
            }
            batch_t bt = {
                .base_offset = offset, .base_ts = be64(b + pos + 27), .max_ts = be64(b + pos + 35),
                .base_seq = be32(b + pos + 53), .producer_id = be64(b + pos + 43),
                .start_off = start_off, .end_off = end_off, .count = count,
                .leader_epoch = be32(b + pos + 12), .producer_epoch = be16(b + pos + 51),
                .attributes = attributes,
            };
            rc = records_v2(s, b, pos + 61, entry_end, &bt, r);
        } else {
            if (size < legacy_min_size(magic)) {
                r->status = ERROR; r->code = E_LEGACY_MSG_SIZE; r->a = size; r->b = magic;
                return;
            }
            int attributes = b[pos + 17], codec = attributes & 0x07;
            if (codec == 0 && offset >= end_off) { r->status = RANGE_END; return; }
            if (offset < start_off) { pos = entry_end; continue; }
            if (validate) rc = legacy_crc(b, pos, entry_end, r);
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
                    rc = legacy_key_value(b, pos, entry_end, magic, kv, r);
                    if (!rc) {
                        if (kv[3] < 0) {
                            r->status = ERROR; r->code = E_LEGACY_NULL_WRAPPER; r->a = magic;
                            return;
                        }
                        r->status = DECOMPRESS; r->a = kv[2]; r->b = kv[3];
                        return;
                    }
                } else {
                    rc = legacy_row(s, b, pos, entry_end, offset, ts, ts_type, magic, r);
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
        pos = entry_end;
    }
}

static PyObject *decode_entries(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "decode_entries takes 8 arguments");
        return NULL;
    }
    if (!PyObject_TypeCheck(args[0], &SinkType)) {
        PyErr_SetString(PyExc_TypeError, "decode_entries needs a Sink");
        return NULL;
    }
    SinkObject *s = (SinkObject *)args[0];
    Py_ssize_t pos = PyLong_AsSsize_t(args[2]), end = PyLong_AsSsize_t(args[3]);
    long long start_off = PyLong_AsLongLong(args[4]), end_off = PyLong_AsLongLong(args[5]);
    long long max_rows = PyLong_AsLongLong(args[6]);
    long flags = PyLong_AsLong(args[7]);
    if (PyErr_Occurred()) return NULL;
    Py_buffer in;
    if (get_bytes(args[1], &in) < 0) return NULL;
    if (pos < 0 || end > in.len || pos > end) {
        PyBuffer_Release(&in);
        PyErr_SetString(PyExc_ValueError, "decode_entries: pos/end outside the buffer");
        return NULL;
    }
    result_t r;
    Py_BEGIN_ALLOW_THREADS
    decode_entries_impl(s, in.buf, pos, end, start_off, end_off, max_rows, (int)flags, &r);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&in);
    return result_tuple(&r);
}

static PyObject *decode_records_v2(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 13) {
        PyErr_SetString(PyExc_TypeError, "decode_records_v2 takes 13 arguments");
        return NULL;
    }
    if (!PyObject_TypeCheck(args[0], &SinkType)) {
        PyErr_SetString(PyExc_TypeError, "decode_records_v2 needs a Sink");
        return NULL;
    }
    SinkObject *s = (SinkObject *)args[0];
    long long v[11];
    for (int i = 0; i < 11; i++) v[i] = PyLong_AsLongLong(args[i + 2]);
    if (PyErr_Occurred()) return NULL;
    if (v[0] < 0 || v[0] > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "decode_records_v2: count out of range");
        return NULL;
    }
    batch_t bt = {
        .count = (int32_t)v[0], .base_offset = v[1], .base_ts = v[2], .max_ts = v[3],
        .attributes = (int)v[4], .base_seq = v[5], .producer_id = v[6],
        .producer_epoch = (int16_t)v[7], .leader_epoch = (int32_t)v[8], .start_off = v[9],
        .end_off = v[10],
    };
    Py_buffer in;
    if (get_bytes(args[1], &in) < 0) return NULL;
    result_t r = {END, in.len, 0, 0, 0, 0, 0};
    int rc;
    int64_t saved[STATE_SIZE];
    memcpy(saved, s->p[S_STATE], sizeof(saved));
    Py_BEGIN_ALLOW_THREADS
    rc = records_v2(s, in.buf, 0, in.len, &bt, &r);
    Py_END_ALLOW_THREADS
    if (rc) {
        if (r.status == NEED_SPACE) memcpy(s->p[S_STATE], saved, sizeof(saved));
        r.entry_pos = 0;
    }
    PyBuffer_Release(&in);
    return result_tuple(&r);
}

static void legacy_set_impl(SinkObject *s, const uint8_t *b, Py_ssize_t end, int64_t wrapper_offset,
                            int magic, int wrapper_attributes, int64_t wrapper_ts,
                            int64_t start_off, int64_t end_off, int flags, result_t *r) {
    Py_ssize_t pos = 0, n_inner = 0, last_pos = 0;
    r->entry_pos = 0;
    while (pos < end) {
        if (end - pos < 12) {
            r->status = ERROR; r->pos = pos; r->code = E_INNER_STRAY; r->a = end - pos;
            return;
        }
        int64_t size = be32(b + pos + 8);
        if (size < 14 || size > (int64_t)(end - pos - 12)) {
            r->status = ERROR; r->pos = pos; r->code = E_INNER_SIZE; r->a = pos; r->b = size;
            r->c = end - pos - 12;
            return;
        }
        int inner_magic = b[pos + 16];
        if (inner_magic != magic) {
            r->status = ERROR; r->pos = pos; r->code = E_INNER_MAGIC; r->a = inner_magic;
            r->b = magic;
            return;
        }
        if (size < legacy_min_size(magic)) {
            r->status = ERROR; r->pos = pos; r->code = E_LEGACY_MSG_SIZE; r->a = size; r->b = magic;
            return;
        }
        if (b[pos + 17] & 0x07) {
            r->status = ERROR; r->pos = pos; r->code = E_INNER_NESTED;
            return;
        }
        n_inner++;
        last_pos = pos;
        pos += 12 + (Py_ssize_t)size;
    }
    if (!n_inner) { r->status = ERROR; r->pos = 0; r->code = E_INNER_EMPTY; return; }
    int64_t base = 0;
    if (magic > 0) {
        int64_t last_inner = be64(b + last_pos);
        if (wrapper_offset != 0) {
            if (wrapper_offset < last_inner) {
                r->status = ERROR; r->pos = 0; r->code = E_WRAPPER_OFFSET; r->a = wrapper_offset;
                r->b = last_inner;
                return;
            }
            base = wsub(wrapper_offset, last_inner);
        }
    }
    const int log_append = magic > 0 && (wrapper_attributes & 0x08);
    pos = 0;
    while (pos < end) {
        Py_ssize_t e = pos + 12 + be32(b + pos + 8);
        int64_t offset = wadd(base, be64(b + pos));
        if ((flags & FLAG_VALIDATE_CRC) && legacy_crc(b, pos, e, r)) return;
        int64_t ts = -1;
        int32_t ts_type = -1;
        if (magic == 1) {
            if (log_append) { ts = wrapper_ts; ts_type = 1; }
            else { ts = be64(b + pos + 18); ts_type = 0; } /* the wrapper's type (LegacyRecord) */
        }
        if (offset < start_off || offset >= end_off) {
            Py_ssize_t kv[4];
            if (legacy_key_value(b, pos, e, magic, kv, r)) return;
        } else if (legacy_row(s, b, pos, e, offset, ts, ts_type, magic, r)) {
            return;
        }
        pos = e;
    }
    r->status = END; r->pos = end; r->code = 0; r->a = r->b = r->c = 0;
}

static PyObject *decode_legacy_set(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "decode_legacy_set takes 9 arguments");
        return NULL;
    }
    if (!PyObject_TypeCheck(args[0], &SinkType)) {
        PyErr_SetString(PyExc_TypeError, "decode_legacy_set needs a Sink");
        return NULL;
    }
    SinkObject *s = (SinkObject *)args[0];
    long long v[7];
    for (int i = 0; i < 7; i++) v[i] = PyLong_AsLongLong(args[i + 2]);
    if (PyErr_Occurred()) return NULL;
    Py_buffer in;
    if (get_bytes(args[1], &in) < 0) return NULL;
    result_t r = {END, 0, 0, 0, 0, 0, 0};
    int64_t saved[STATE_SIZE];
    memcpy(saved, s->p[S_STATE], sizeof(saved));
    Py_BEGIN_ALLOW_THREADS
    legacy_set_impl(s, in.buf, in.len, v[0], (int)v[1], (int)v[2], v[3], v[4], v[5], (int)v[6], &r);
    Py_END_ALLOW_THREADS
    if (r.status == NEED_SPACE) memcpy(s->p[S_STATE], saved, sizeof(saved));
    r.entry_pos = 0;
    PyBuffer_Release(&in);
    return result_tuple(&r);
}

/* -- encode ---------------------------------------------------------------------------------- */
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

static PyTypeObject SourceType = {
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

static PyObject *encode_plan(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5 || !PyObject_TypeCheck(args[0], &SourceType)) {
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

static PyObject *encode_records(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7 || !PyObject_TypeCheck(args[0], &SourceType)) {
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

/* -- module ---------------------------------------------------------------------------------- */
static PyObject *crc32_py(PyObject *mod, PyObject *arg) {
    Py_buffer in;
    if (get_bytes(arg, &in) < 0) return NULL;
    uint32_t c = crc32_of(in.buf, in.len);
    PyBuffer_Release(&in);
    return PyLong_FromUnsignedLong(c);
}

static PyMethodDef methods[] = {
    {"decode_entries", (PyCFunction)(void (*)(void))decode_entries, METH_FASTCALL,
     "Walk log entries, appending uncompressed records to the sink; stop at a status."},
    {"decode_records_v2", (PyCFunction)(void (*)(void))decode_records_v2, METH_FASTCALL,
     "Append the records of one decompressed v2 records section (all or nothing)."},
    {"decode_legacy_set", (PyCFunction)(void (*)(void))decode_legacy_set, METH_FASTCALL,
     "Append the inner messages of one decompressed legacy wrapper (all or nothing)."},
    {"encode_plan", (PyCFunction)(void (*)(void))encode_plan, METH_FASTCALL,
     "Split rows into batches that fit batch_bytes; return the number of batches."},
    {"encode_records", (PyCFunction)(void (*)(void))encode_records, METH_FASTCALL,
     "Write the records of planned batches; return the end position."},
    {"crc32", crc32_py, METH_O, "CRC-32 (zlib's), as used for magic 0/1 messages."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "kafkalog.format._speedups",
    "Compiled twin of kafkalog.format._pure_kernels (see _kernel_abi).", -1, methods,
};

PyMODINIT_FUNC PyInit__speedups(void) {
    crc32_init();
    if (PyType_Ready(&SinkType) < 0 || PyType_Ready(&SourceType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&SinkType);
    Py_INCREF(&SourceType);
    if (PyModule_AddObject(m, "Sink", (PyObject *)&SinkType) < 0 ||
        PyModule_AddObject(m, "Source", (PyObject *)&SourceType) < 0 ||
        PyModule_AddStringConstant(m, "IMPLEMENTATION", "compiled") < 0 ||
        PyModule_AddIntConstant(m, "ABI_VERSION", ABI_VERSION) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    static const struct { const char *name; int value; } consts[] = {
        {"NUM_SLOTS", NUM_SLOTS}, {"STATE_SIZE", STATE_SIZE}, {"ERROR", ERROR},
        {"NEED_SPACE", NEED_SPACE}, {"DECOMPRESS", DECOMPRESS}, {"ENTRIES_FULL", ENTRIES_FULL},
        {"RANGE_END", RANGE_END}, {"ROWS_FULL", ROWS_FULL}, {"END", END},
        {"E_WRAPPER_OFFSET", E_WRAPPER_OFFSET}, {"E_CRC", E_CRC}, {"E_HVAL_OVERRUN", E_HVAL_OVERRUN},
        {"F_HVAL_LENGTH", F_HVAL_LENGTH}, {"PLAN_WIDTH", PLAN_WIDTH},
        {"FLAG_KEEP_CONTROL", FLAG_KEEP_CONTROL}, {"GROW_HVAL_DATA", GROW_HVAL_DATA},
        {"ST_ENTRIES", ST_ENTRIES}, {"CRC_WINDOW", CRC_WINDOW},
    };
    for (size_t i = 0; i < sizeof(consts) / sizeof(consts[0]); i++)
        if (PyModule_AddIntConstant(m, consts[i].name, consts[i].value) < 0) {
            Py_DECREF(m);
            return NULL;
        }
    return m;
}
