/*
 * kafkalog.format.columnar._compiled: the compiled twin of _pure/kernels.py (the columnar fast path).
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
 * nothing is copied on the way in; the GIL is released while a kernel runs (lz4_blocks keeps
 * it: it calls the codec library's Python function per block).
 *
 * Files: module.c (module), decode.c (entry walk, Sink, decode entry points),
 * records.c (v2 records, varints, UTF-8, the validation-only walk), legacy.c
 * (magic 0/1 messages), encode.c (Source, encode), columns.c (Python columns
 * as the encoder's arrays), crc.c (CRC-32 and CRC-32C), fold.h (carry-less
 * folding), inflate.c (an lz4 frame's blocks). Functions shared between files carry a
 * kl_ prefix; the build hides every symbol but the module's init.
 */
#ifndef KAFKALOG_SPEEDUPS_H
#define KAFKALOG_SPEEDUPS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define ABI_VERSION 15

/* output slots */
enum {
    S_OFFSET, S_TIMESTAMP, S_TIMESTAMP_TYPE, S_KEY_OFFSETS, S_KEY_VALID, S_KEY_DATA,
    S_VALUE_OFFSETS, S_VALUE_VALID, S_VALUE_DATA, S_HEADER_OFFSETS, S_HKEY_OFFSETS, S_HKEY_DATA,
    S_HVAL_OFFSETS, S_HVAL_VALID, S_HVAL_DATA, S_PRODUCER_ID, S_PRODUCER_EPOCH, S_SEQUENCE,
    S_IS_TRANSACTIONAL, S_IS_CONTROL, S_PARTITION_LEADER_EPOCH, S_STATE, NUM_SLOTS
};
enum { ST_ROWS, ST_KEY_BYTES, ST_VALUE_BYTES, ST_HEADERS, ST_HKEY_BYTES, ST_HVAL_BYTES,
       ST_KEY_NULLS, ST_VALUE_NULLS, ST_HVAL_NULLS, ST_SHARED, ST_SHARED_VALUES,
       /* the offset rule: the last offset of the entry before the walk's, and whether there is
        * one (_kernel_abi.py) */
       ST_PREV_LAST = ST_SHARED_VALUES + 7, ST_HAS_PREV, STATE_SIZE };
/* the batch-level columns, by their bit in ST_SHARED (see kl_batch_columns) */
enum { B_TIMESTAMP_TYPE, B_PRODUCER_ID, B_PRODUCER_EPOCH, B_SEQUENCE, B_IS_TRANSACTIONAL,
       B_IS_CONTROL, B_PARTITION_LEADER_EPOCH, BATCH_COLUMNS };
enum { END, DECOMPRESS, ROWS_FULL, NEED_SPACE, RANGE_END, ERROR };
enum { GROW_ROWS, GROW_KEY_DATA, GROW_VALUE_DATA, GROW_HEADERS, GROW_HKEY_DATA, GROW_HVAL_DATA };
#define FLAG_VALIDATE_CRC 1
#define FLAG_KEEP_CONTROL 2
#define FLAG_CHECK_ORDER 4
/* The largest last offset of an entry: a log's next offset (last + 1) must fit int64. */
#define MAX_LAST_OFFSET (INT64_MAX - 1)
enum {
    E_ENTRY_SIZE = 1, E_MAGIC, E_BATCH_SIZE, E_COUNT_NEGATIVE, E_COUNT_TOO_LARGE, E_VARINT_EOF,
    E_VARINT_LONG, E_RECORD_SIZE_OVERRUN, E_RECORD_SIZE_SMALL, E_KEY_OVERRUN, E_VALUE_OVERRUN,
    E_HEADERS_NEGATIVE, E_HEADERS_TOO_MANY, E_HKEY_SIZE, E_HVAL_OVERRUN, E_RECORD_PAYLOAD,
    E_RECORDS_REMAINING, E_CRC, E_LEGACY_MSG_SIZE, E_LEGACY_OVERRUN, E_LEGACY_CODEC,
    E_LEGACY_NULL_WRAPPER, E_INNER_STRAY, E_INNER_SIZE, E_INNER_MAGIC, E_INNER_NESTED,
    E_INNER_EMPTY, E_WRAPPER_OFFSET, E_OFFSETS, E_OFFSET_ORDER, E_INNER_OFFSETS, E_BATCH_HEADER,
    E_CODEC, E_RECORD_OFFSET
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

/* The driver's output arrays, with their pointers and capacities (decode.c). */
typedef struct {
    PyObject_HEAD
    Py_buffer views[NUM_SLOTS];
    int nviews;
    void *p[NUM_SLOTS];
    Py_ssize_t cap[NUM_SLOTS];
    PyObject *arrays;
} SinkObject;

/* A CRC-32C computed in steps behind a record walk: the register so far and where it stopped. */
typedef struct {
    uint32_t state;
    Py_ssize_t pos;
} crc_run_t;

/* The record walk folds the bytes it has walked into ``crc`` every CRC_STEP bytes, while they
 * are still in the L1 cache (a separate pass over a batch larger than the L2 cache reads it from
 * memory a second time); or, where the CPU has AVX-512's VPCLMULQDQ, 64 bytes at a time as it
 * goes (fold.h), else, with SSE4.2, eight bytes at a time through the crc32
 * instruction (records.c). */
#define CRC_STEP 16384

/* One v2 batch's header fields and the kept offset range. With ``crc`` set, the record walk
 * keeps that CRC up to date behind it (the caller finishes and checks it). */
typedef struct {
    int64_t base_offset, base_ts, max_ts, base_seq, producer_id, start_off, end_off;
    int32_t count, leader_epoch, last_delta;
    int16_t producer_epoch;
    int attributes;
    crc_run_t *crc;
} batch_t;

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
static inline int legacy_min_size(int magic) { return magic == 0 ? 14 : 22; }

/* Ask for the cache line `ahead` bytes past p of an output column, to be written. The columns
 * go to memory (a million records are hundreds of MB of them), and a store to a line that is not
 * in the cache waits for it: asked for a few records early, the walk of a record with two
 * headers measured 7-10% faster. A prefetch never faults, so the line may lie past the array. */
static inline void prefetch_output(const void *p, size_t ahead) {
#if defined(__GNUC__)
    __builtin_prefetch((const void *)((uintptr_t)p + ahead), 1, 3);
#else
    (void)p; (void)ahead;
#endif
}

/* Record an error (rule, position, values) in r and fail the enclosing int function. */
#define FAIL(code_, pos_, a_, b_, c_)                                                    \
    do {                                                                                 \
        r->status = ERROR; r->pos = (pos_); r->code = (code_);                           \
        r->a = (a_); r->b = (b_); r->c = (c_);                                           \
        return -1;                                                                       \
    } while (0)

/* Ask the driver to grow buffer group ``group`` to ``need`` items, and fail. */
#define GROW(group, need)                                                                \
    do {                                                                                 \
        r->status = NEED_SPACE; r->pos = -1; r->code = (group); r->a = (need);           \
        r->b = 0; r->c = 0;                                                              \
        return -1;                                                                       \
    } while (0)

/* -- CRCs (crc.c) -------------------------------------------------------------------- */
void kl_crc_init(void);
uint32_t kl_crc32(const uint8_t *p, Py_ssize_t n);  /* zlib's CRC-32: magic 0/1 messages */
/* The same for a message's bytes after its CRC field: the 16 bytes before p must be readable. */
uint32_t kl_crc32_message(const uint8_t *p, Py_ssize_t n);
uint32_t kl_crc32c(const uint8_t *p, Py_ssize_t n); /* Castagnoli's CRC-32C: v2 batches */
/* CRC-32C register ``c`` (not inverted) after ``n`` more bytes: a CRC computed in steps */
uint32_t kl_crc32c_update(uint32_t c, const uint8_t *p, Py_ssize_t n);
const char *kl_crc_implementation(void);
/* How the v2 record walk follows its batch's CRC-32C: folded as it goes (AVX-512,
 * fold.h), eight bytes at a time through SSE4.2's crc32 instruction as it goes, or in
 * steps of CRC_STEP bytes */
enum { CRC_WALK_STEPS, CRC_WALK_WORDS, CRC_WALK_FOLDED };
int kl_crc_in_walk(void);
int kl_crc_set_hardware(int level); /* 0 tables, 1 SSE4.2/PCLMULQDQ, 2 AVX-512 */

/* -- records and messages (records.c, legacy.c) ---------------------------- */
/* The framing rules of kl_records_v2 over a batch's records, nothing written: 0, or -1 with r. */
int kl_validate_v2(const uint8_t *b, Py_ssize_t start, Py_ssize_t end, int64_t count,
                   int64_t last_delta, int64_t base_ts, int64_t max_ts, int log_append,
                   int64_t out[4], result_t *r);
int kl_records_v2(SinkObject *s, const uint8_t *b, Py_ssize_t start, Py_ssize_t end,
                  const batch_t *bt, result_t *r);
/* Rows [from, to) of the batch-level columns take the values v (by B_*); with ``sequences``, the
 * rows' sequences follow from their offsets and its baseSequence instead of v[B_SEQUENCE]. */
void kl_batch_columns(SinkObject *s, int64_t from, int64_t to, const int64_t v[BATCH_COLUMNS],
                      const batch_t *sequences);
int kl_legacy_key_value(const uint8_t *b, Py_ssize_t pos, Py_ssize_t end, int magic,
                        Py_ssize_t out[4], result_t *r);
int kl_legacy_row(SinkObject *s, const uint8_t *b, Py_ssize_t pos, Py_ssize_t end, int64_t offset,
                  int64_t ts, int32_t ts_type, int magic, result_t *r);
int kl_legacy_crc(const uint8_t *b, Py_ssize_t pos, Py_ssize_t end, result_t *r);
void kl_legacy_set(SinkObject *s, const uint8_t *b, Py_ssize_t end, int64_t wrapper_offset,
                   int magic, int wrapper_attributes, int64_t wrapper_ts, int64_t start_off,
                   int64_t end_off, int flags, result_t *r);

/* -- Python entry points and types ------------------------------------------------------------- */
extern PyTypeObject kl_SinkType, kl_SourceType;
PyObject *kl_result_tuple(const result_t *r);
int kl_get_bytes(PyObject *obj, Py_buffer *view);
/* A kernel's call checked: `want` arguments, of which the `n` from args[first] are integers (into
 * v); -1 with a TypeError (or the conversion's error) set when not. */
int kl_int_args(const char *name, PyObject *const *args, Py_ssize_t nargs, Py_ssize_t want,
                Py_ssize_t first, long long *v, int n);
/* The same for a decoding kernel: args[0] is the Sink (returned, NULL on error), args[1] the
 * input and the `n` integers follow. */
SinkObject *kl_sink_args(const char *name, PyObject *const *args, Py_ssize_t nargs,
                         Py_ssize_t want, long long *v, int n);
PyObject *kl_decode_entries(PyObject *mod, PyObject *const *args, Py_ssize_t nargs);
PyObject *kl_decode_records_v2(PyObject *mod, PyObject *const *args, Py_ssize_t nargs);
PyObject *kl_decode_legacy_set(PyObject *mod, PyObject *const *args, Py_ssize_t nargs);
PyObject *kl_encode_plan(PyObject *mod, PyObject *const *args, Py_ssize_t nargs);
PyObject *kl_encode_records(PyObject *mod, PyObject *const *args, Py_ssize_t nargs);
PyObject *kl_encode_batches(PyObject *mod, PyObject *const *args, Py_ssize_t nargs);
PyObject *kl_encode_compressed(PyObject *mod, PyObject *const *args, Py_ssize_t nargs);
PyObject *kl_binary_column(PyObject *mod, PyObject *seq);
PyObject *kl_int64_column(PyObject *mod, PyObject *seq);
PyObject *kl_header_columns(PyObject *mod, PyObject *seq);
PyObject *kl_new_bytearray(Py_ssize_t n); /* uninitialized; huge pages where large */
PyObject *kl_validate_records_v2(PyObject *mod, PyObject *const *args, Py_ssize_t nargs);
PyObject *kl_lz4_blocks(PyObject *mod, PyObject *const *args, Py_ssize_t nargs);
PyObject *kl_dump_lines(PyObject *mod, PyObject *const *args, Py_ssize_t nargs);
PyObject *kl_valid_prefix_run(PyObject *mod, PyObject *const *args, Py_ssize_t nargs);
PyObject *kl_frame_run(PyObject *mod, PyObject *const *args, Py_ssize_t nargs);

#endif
