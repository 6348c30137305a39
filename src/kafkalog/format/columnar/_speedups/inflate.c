/*
 * The blocks of an lz4 frame (its header already read by the Inflater) into the Inflater's
 * buffer: a 1 MB batch is some 16 blocks, and each one's size word, bounds and slices cost about
 * 0.7 microseconds in Python around cramjam's call; here they cost the call alone. The twin of
 * _pure_kernels.lz4_blocks (the contract is there).
 */
#include "speedups.h"

#define LZ4_RAW 0x80000000u

/* min(max_size, what the blocks from pos may need of the buffer), or -1 if the block table is
 * not whole: a size word missing, a block longer than max_block or than what is left, the
 * trailer missing. */
static int64_t blocks_bound(const uint8_t *b, Py_ssize_t size, Py_ssize_t pos, int64_t checksum,
                            int64_t trailer, int64_t max_block, int64_t max_size,
                            int64_t expansion, int64_t slack) {
    int64_t need = 0;
    for (;;) {
        if (size - pos < 4) return -1;
        const uint32_t word = (uint32_t)b[pos] | (uint32_t)b[pos + 1] << 8 |
                              (uint32_t)b[pos + 2] << 16 | (uint32_t)b[pos + 3] << 24;
        const int64_t length = word & ~LZ4_RAW;
        pos += 4;
        if (length == 0) break;
        if (length > max_block || length + checksum > (int64_t)(size - pos)) return -1;
        int64_t room = length;
        if (!(word & LZ4_RAW)) {
            room = expansion * length + slack;
            if (room > max_block) room = max_block;
        }
        need = room > max_size - need ? max_size : need + room; /* need <= max_size throughout */
        pos += (Py_ssize_t)(length + checksum);
    }
    if (size - pos < trailer) return -1;
    return need;
}

/* decompress_into(b[pos:pos+length], out[at:at+room]): the bytes it wrote, -1 with an
 * exception set, -2 for a count outside 0..room. */
static int64_t decompress_block(PyObject *decompress_into, const uint8_t *b, Py_ssize_t pos,
                                int64_t length, uint8_t *out, int64_t at, int64_t room) {
    PyObject *src = PyMemoryView_FromMemory((char *)(b + pos), (Py_ssize_t)length, PyBUF_READ);
    if (!src) return -1;
    PyObject *dst = PyMemoryView_FromMemory((char *)(out + at), (Py_ssize_t)room, PyBUF_WRITE);
    if (!dst) {
        Py_DECREF(src);
        return -1;
    }
    PyObject *argv[2] = {src, dst};
    PyObject *n_obj = PyObject_Vectorcall(decompress_into, argv, 2, NULL);
    Py_DECREF(src);
    Py_DECREF(dst);
    if (!n_obj) return -1;
    const long long n = PyLong_AsLongLong(n_obj);
    Py_DECREF(n_obj);
    if (n == -1 && PyErr_Occurred()) return -1;
    return n < 0 || n > room ? -2 : n;
}

PyObject *kl_lz4_blocks(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    long long v[7];
    if (kl_int_args("lz4_blocks", args, nargs, 10, 1, v, 7) < 0) return NULL;
    const long long pos0 = v[0], checksum = v[1], trailer = v[2], max_block = v[3];
    const long long max_size = v[4], expansion = v[5], slack = v[6];
    if (pos0 < 0 || checksum < 0 || trailer < 0 || max_block < 0 || max_size < 0 ||
        expansion < 0 || expansion > (1 << 20) || slack < 0 || slack > (1 << 20) ||
        max_block > ((int64_t)1 << 40)) {
        PyErr_SetString(PyExc_ValueError, "lz4_blocks: an argument is out of range");
        return NULL;
    }
    Py_buffer in, out;
    if (kl_get_bytes(args[0], &in) < 0) return NULL;
    if (PyObject_GetBuffer(args[8], &out, PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&in);
        return NULL;
    }
    PyObject *result = NULL;
    const uint8_t *b = in.buf;
    const Py_ssize_t size = in.len;
    if (pos0 > size) goto fallback;
    const int64_t need = blocks_bound(b, size, (Py_ssize_t)pos0, checksum, trailer, max_block,
                                      max_size, expansion, slack);
    if (need < 0) goto fallback;
    if (out.len < need) {
        result = PyLong_FromLongLong(-need);
        goto done;
    }
    int64_t total = 0;
    /* the checks again: decompress_into is Python and may change what the buffers hold */
    for (Py_ssize_t pos = (Py_ssize_t)pos0;;) {
        if (size - pos < 4) goto fallback;
        const uint32_t word = (uint32_t)b[pos] | (uint32_t)b[pos + 1] << 8 |
                              (uint32_t)b[pos + 2] << 16 | (uint32_t)b[pos + 3] << 24;
        const int64_t length = word & ~LZ4_RAW;
        pos += 4;
        if (length == 0) break;
        if (length > max_block || length + checksum > (int64_t)(size - pos)) goto fallback;
        if (word & LZ4_RAW) {
            if (total + length > max_size || total + length > out.len) goto fallback;
            memmove((uint8_t *)out.buf + total, b + pos, (size_t)length);
            total += length;
        } else {
            int64_t room = expansion * length + slack;
            if (room > max_block) room = max_block;
            if (room > max_size - total) room = max_size - total;
            if (total + room > out.len) goto fallback;
            const int64_t n = decompress_block(args[9], b, pos, length, out.buf, total, room);
            if (n == -1) goto done;
            if (n == -2) goto fallback;
            total += n;
        }
        pos += (Py_ssize_t)(length + checksum);
    }
    result = PyLong_FromLongLong(total);
    goto done;
fallback:
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&out);
    PyBuffer_Release(&in);
    return result;
}
