/*
 * kafkalog.format.columnar._compiled: the module (see speedups.h for the kernels' contract and files).
 */
#include "speedups.h"

static PyObject *crc_py(PyObject *arg, uint32_t (*fn)(const uint8_t *, Py_ssize_t)) {
    Py_buffer in;
    if (kl_get_bytes(arg, &in) < 0) return NULL;
    uint32_t c = fn(in.buf, in.len);
    PyBuffer_Release(&in);
    return PyLong_FromUnsignedLong(c);
}

static PyObject *crc32_py(PyObject *mod, PyObject *arg) { return crc_py(arg, kl_crc32); }
static PyObject *crc32c_py(PyObject *mod, PyObject *arg) { return crc_py(arg, kl_crc32c); }

static PyObject *crc_hardware_py(PyObject *mod, PyObject *arg) {
    long level = PyLong_AsLong(arg);
    if (level == -1 && PyErr_Occurred()) return NULL;
    return PyLong_FromLong(kl_crc_set_hardware((int)level));
}

static PyObject *crc_implementation_py(PyObject *mod, PyObject *unused) {
    return PyUnicode_FromString(kl_crc_implementation());
}

#define KERNEL(name, doc) \
    {#name, (PyCFunction)(void (*)(void))kl_##name, METH_FASTCALL, doc}

static PyMethodDef methods[] = {
    KERNEL(decode_entries,
           "Walk log entries, appending uncompressed records to the sink; stop at a status."),
    KERNEL(decode_records_v2,
           "Append the records of one decompressed v2 records section (all or nothing)."),
    KERNEL(decode_legacy_set,
           "Append the inner messages of one decompressed legacy wrapper (all or nothing)."),
    KERNEL(validate_records_v2,
           "Check one v2 records section's framing, writing nothing; return its timestamp "
           "range, null keys and offset delta run."),
    KERNEL(encode_plan, "Split rows into batches that fit batch_bytes; return the number of batches."),
    KERNEL(encode_records, "Write the records of planned batches; return the end position."),
    KERNEL(encode_batches,
           "Uncompressed planned batches, headers and CRCs included, as a new bytearray."),
    KERNEL(encode_compressed,
           "Planned batches from their compressed records, headers and CRCs included, as a new "
           "bytearray."),
    KERNEL(dump_lines,
           "kafka-dump-log's record lines (no data, no header keys) of int64 columns."),
    KERNEL(valid_prefix_run,
           "The magic 2 batches of a window that recovery keeps, as int64 rows; stop at the "
           "first entry the walk must judge."),
    KERNEL(frame_run,
           "The ends and offset fields of the entries framed one after another, as int64 pairs; "
           "stop at the first partial or corrupt one."),
    KERNEL(lz4_blocks,
           "Decompress an lz4 frame's blocks into a buffer; return the size, None to leave the "
           "frame to the codec module, or minus the size the buffer must have."),
    {"binary_column", kl_binary_column, METH_O,
     "A list or tuple of bytes/None as (offsets, validity, data) bytearrays; else None."},
    {"int64_column", kl_int64_column, METH_O,
     "A list or tuple of ints as int64s in a bytearray; else None."},
    {"header_columns", kl_header_columns, METH_O,
     "A list or tuple of header lists ((str, bytes/None) tuples) as the encoder's six header "
     "arrays, in bytearrays; else None."},
    {"crc32", crc32_py, METH_O, "CRC-32 (zlib's), as used for magic 0/1 messages."},
    {"crc32c", crc32c_py, METH_O, "CRC-32C (Castagnoli), as used for v2 batches."},
    {"set_crc_hardware", crc_hardware_py, METH_O,
     "CRC code level: 0 portable tables, 1 SSE4.2 crc32 and PCLMULQDQ, 2 also AVX-512 "
     "VPCLMULQDQ (each where the CPU has it); returns the previous level. For tests and "
     "measurements."},
    {"crc_implementation", crc_implementation_py, METH_NOARGS,
     "Which CRC code runs: the CPU's instructions or the portable tables."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "kafkalog.format.columnar._compiled",
    "Compiled twin of kafkalog.format._pure_kernels (see _kernel_abi).", -1, methods,
};

PyMODINIT_FUNC PyInit__compiled(void) {
    kl_crc_init();
    if (PyType_Ready(&kl_SinkType) < 0 || PyType_Ready(&kl_SourceType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&kl_SinkType);
    Py_INCREF(&kl_SourceType);
    if (PyModule_AddObject(m, "Sink", (PyObject *)&kl_SinkType) < 0 ||
        PyModule_AddObject(m, "Source", (PyObject *)&kl_SourceType) < 0 ||
        PyModule_AddStringConstant(m, "IMPLEMENTATION", "compiled") < 0 ||
        PyModule_AddIntConstant(m, "ABI_VERSION", ABI_VERSION) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    static const struct { const char *name; int value; } consts[] = {
        {"NUM_SLOTS", NUM_SLOTS}, {"STATE_SIZE", STATE_SIZE}, {"ERROR", ERROR},
        {"NEED_SPACE", NEED_SPACE}, {"DECOMPRESS", DECOMPRESS}, {"RANGE_END", RANGE_END},
        {"ROWS_FULL", ROWS_FULL}, {"END", END}, {"E_WRAPPER_OFFSET", E_WRAPPER_OFFSET},
        {"E_CRC", E_CRC}, {"E_HVAL_OVERRUN", E_HVAL_OVERRUN}, {"F_HVAL_LENGTH", F_HVAL_LENGTH},
        {"PLAN_WIDTH", PLAN_WIDTH}, {"FLAG_KEEP_CONTROL", FLAG_KEEP_CONTROL},
        {"FLAG_VALIDATE_CRC", FLAG_VALIDATE_CRC}, {"FLAG_CHECK_ORDER", FLAG_CHECK_ORDER},
        {"E_OFFSETS", E_OFFSETS}, {"E_OFFSET_ORDER", E_OFFSET_ORDER},
        {"E_INNER_OFFSETS", E_INNER_OFFSETS}, {"E_BATCH_HEADER", E_BATCH_HEADER},
        {"E_CODEC", E_CODEC}, {"E_RECORD_OFFSET", E_RECORD_OFFSET},
        {"ST_PREV_LAST", ST_PREV_LAST},
        {"ST_HAS_PREV", ST_HAS_PREV}, {"GROW_HVAL_DATA", GROW_HVAL_DATA},
        {"ST_HVAL_BYTES", ST_HVAL_BYTES}, {"STATE", S_STATE}, {"ST_KEY_NULLS", ST_KEY_NULLS},
        {"ST_HVAL_NULLS", ST_HVAL_NULLS}, {"ST_SHARED", ST_SHARED},
        {"ST_SHARED_VALUES", ST_SHARED_VALUES}, {"BATCH_COLUMNS", BATCH_COLUMNS},
        {"B_SEQUENCE", B_SEQUENCE}, {"B_PARTITION_LEADER_EPOCH", B_PARTITION_LEADER_EPOCH},
    };
    for (size_t i = 0; i < sizeof(consts) / sizeof(consts[0]); i++)
        if (PyModule_AddIntConstant(m, consts[i].name, consts[i].value) < 0) {
            Py_DECREF(m);
            return NULL;
        }
    return m;
}
