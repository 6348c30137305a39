/*
 * v2 records: the varint walk of one uncompressed records section into the sink's columns, with
 * record.py's rules (and error positions) for every field; header keys are checked as UTF-8 and
 * replaced as Kafka's String decoding does.
 */
#include "fold.h"


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

/* The eight bytes at p as a little-endian word (one load on x86-64 and arm64). */
static inline uint64_t le64(const uint8_t *p) {
    uint64_t w;
    memcpy(&w, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    w = __builtin_bswap64(w);
#endif
    return w;
}

/* The high bit of each of a word's first n bytes (n = 0..8): nonzero after & if one is not ASCII. */
static const uint64_t HIGH_BITS[9] = {
    0, 0x80, 0x8080, 0x808080, 0x80808080, 0x8080808080ull, 0x808080808080ull,
    0x80808080808080ull, 0x8080808080808080ull,
};

/* memcpy for the short fields records are full of (keys, header keys and values): inline, with
 * overlapping loads and stores that stay inside [dst, dst + n) and [src, src + n). Values of up
 * to 128 bytes too: the walk that folds a CRC would save its vector register around each call. */
static inline void copy_bytes(uint8_t *dst, const uint8_t *src, size_t n) {
    if (n > 128) {
        memcpy(dst, src, n);
    } else if (n > 64) {
        memcpy(dst, src, 64);
        memcpy(dst + n - 64, src + n - 64, 64);
    } else if (n > 32) {
        memcpy(dst, src, 32);
        memcpy(dst + n - 32, src + n - 32, 32);
    } else if (n > 16) {
        memcpy(dst, src, 16);
        memcpy(dst + n - 16, src + n - 16, 16);
    } else if (n >= 8) {
        uint64_t head, tail;
        memcpy(&head, src, 8);
        memcpy(&tail, src + n - 8, 8);
        memcpy(dst, &head, 8);
        memcpy(dst + n - 8, &tail, 8);
    } else if (n >= 4) {
        uint32_t head, tail;
        memcpy(&head, src, 4);
        memcpy(&tail, src + n - 4, 4);
        memcpy(dst, &head, 4);
        memcpy(dst + n - 4, &tail, 4);
    } else {
        for (size_t i = 0; i < n; i++) dst[i] = src[i];
    }
}

/* Varints of one to three bytes (nearly all lengths, deltas and counts) decode inline with the
 * same result as varint_slow, which handles the rest and every error. */
#define READ_VARINT(dst, end_, maxb, field)                                              \
    do {                                                                                 \
        uint64_t z_;                                                                     \
        if (pos < (end_) && b[pos] < 0x80) {                                             \
            z_ = b[pos];                                                                 \
            pos += 1;                                                                    \
        } else if (pos + 2 <= (end_) && b[pos + 1] < 0x80) {                             \
            z_ = (uint64_t)(b[pos] & 0x7F) | ((uint64_t)b[pos + 1] << 7);                \
            pos += 2;                                                                    \
        } else if (pos + 3 <= (end_) && b[pos + 2] < 0x80) {                             \
            z_ = (uint64_t)(b[pos] & 0x7F) | ((uint64_t)(b[pos + 1] & 0x7F) << 7) |      \
                 ((uint64_t)b[pos + 2] << 14);                                           \
            pos += 3;                                                                    \
        } else {                                                                         \
            if (varint_slow(b, &pos, (end_), (maxb), (field), &(dst), r)) return -1;     \
            break;                                                                       \
        }                                                                                \
        (dst) = (int64_t)(z_ >> 1) ^ -(int64_t)(z_ & 1);                                 \
    } while (0)

/* One nullable item (len < 0: null) of a binary column at `row`: its bytes at *used (of cap),
 * its end at offsets[row + 1], its validity (written from the column's first null on, *nulls
 * counting them). 0, or nothing written and the size to grow the data to (`rest`: the input bytes
 * left, which bound what this buffer can still add). */
static inline __attribute__((always_inline)) int64_t put_item(uint8_t *data, int64_t *used,
                                                              Py_ssize_t cap, uint8_t *valid,
                                                              int64_t *nulls, int32_t *offsets,
                                                              int64_t row, const uint8_t *src,
                                                              int64_t len, int64_t rest) {
    if (len >= 0) {
        if (*used + len > cap) return *used + rest;
        copy_bytes(data + *used, src, (size_t)len);
        *used += len;
        if (*nulls) valid[row] = 1;
    } else {
        if (!*nulls) memset(valid, 1, (size_t)row);
        valid[row] = 0;
        (*nulls)++;
    }
    offsets[row + 1] = (int32_t)*used;
    return 0;
}

/* A v2 record's framing up to its headers, checked as record.py checks it (kl_records_v2 and
 * kl_validate_v2 walk records alike): *at is the record's start, then its headers'. */
typedef struct {
    int64_t length, ts_delta, offset_delta, k_len, v_len, h_count;
    Py_ssize_t body_end, k_pos, v_pos;
} record_head_t;

static inline __attribute__((always_inline)) int read_record_head(const uint8_t *b,
                                                                  Py_ssize_t *at, Py_ssize_t end,
                                                                  record_head_t *h, result_t *r) {
    Py_ssize_t pos = *at;
    const Py_ssize_t record_start = pos;
    READ_VARINT(h->length, end, 5, F_RECORD_LENGTH);
    if (h->length < 0 || h->length > (int64_t)(end - pos))
        FAIL(E_RECORD_SIZE_OVERRUN, record_start, h->length, end - pos, 0);
    const Py_ssize_t body_end = pos + (Py_ssize_t)h->length;
    if (h->length < 6) FAIL(E_RECORD_SIZE_SMALL, record_start, h->length, 0, 0);
    pos += 1; /* attributes: unused */
    READ_VARINT(h->ts_delta, body_end, 10, F_TIMESTAMP_DELTA);
    READ_VARINT(h->offset_delta, body_end, 5, F_OFFSET_DELTA);
    READ_VARINT(h->k_len, body_end, 5, F_KEY_LENGTH);
    h->k_pos = pos;
    if (h->k_len >= 0) { /* Kafka reads any negative size as null */
        if (h->k_len > (int64_t)(body_end - pos))
            FAIL(E_KEY_OVERRUN, pos, h->k_len, body_end - pos, 0);
        pos += (Py_ssize_t)h->k_len;
    }
    READ_VARINT(h->v_len, body_end, 5, F_VALUE_LENGTH);
    h->v_pos = pos;
    if (h->v_len >= 0) {
        if (h->v_len > (int64_t)(body_end - pos))
            FAIL(E_VALUE_OVERRUN, pos, h->v_len, body_end - pos, 0);
        pos += (Py_ssize_t)h->v_len;
    }
    READ_VARINT(h->h_count, body_end, 5, F_HEADER_COUNT);
    if (h->h_count < 0) FAIL(E_HEADERS_NEGATIVE, pos, h->h_count, 0, 0);
    h->body_end = body_end;
    *at = pos;
    return 0;
}

/* count items of ``width`` bytes (1, 2, 4 or 8), each a copy of ``item``, from dst, 64 bytes a
 * step. */
static void fill_items(void *dst, const void *item, size_t width, int64_t count) {
    uint8_t pattern[64], *d = dst;
    for (size_t i = 0; i < 64; i += width) memcpy(pattern + i, item, width);
    size_t total = width * (size_t)count;
    for (; total >= 64; total -= 64, d += 64) memcpy(d, pattern, 64);
    memcpy(d, pattern, total);
}

/* -- the batch-level columns ---------------------------------------------------------------------
 * timestampType, producerId, producerEpoch, baseSequence, isTransactional, isControl and
 * partitionLeaderEpoch are the same for every record of a batch (a sequence follows from its
 * offset), and most often for every batch of a chunk. They are filled after each batch's walk,
 * which then has fewer stores and fewer live pointers per record (about 6% faster on 1 MB
 * batches); and a column is not written at all while every row so far has one value (its bit in
 * ST_SHARED, the value at ST_SHARED_VALUES + B_*): the driver hands Arrow one constant array for
 * it, made once per value and kept (24 bytes a row less to write to memory: 1 MB batches 5-10%
 * faster). The first row of another value writes the rows before it, and the column is written
 * from then on. */
static const int BATCH_SLOT[BATCH_COLUMNS] = {S_TIMESTAMP_TYPE, S_PRODUCER_ID, S_PRODUCER_EPOCH,
                                              S_SEQUENCE, S_IS_TRANSACTIONAL, S_IS_CONTROL,
                                              S_PARTITION_LEADER_EPOCH};
static const size_t BATCH_WIDTH[BATCH_COLUMNS] = {4, 8, 2, 4, 1, 1, 4};

/* Rows [from, from + count) of batch-level column k, each ``value``. */
static void fill_column(SinkObject *s, int k, int64_t from, int64_t count, int64_t value) {
    const size_t width = BATCH_WIDTH[k];
    uint8_t *dst = (uint8_t *)s->p[BATCH_SLOT[k]] + (size_t)from * width;
    if (count == 1) { /* a magic 0/1 message's row */
        switch (width) {
        case 8: { int64_t x = value; memcpy(dst, &x, 8); return; }
        case 4: { int32_t x = (int32_t)value; memcpy(dst, &x, 4); return; }
        case 2: { int16_t x = (int16_t)value; memcpy(dst, &x, 2); return; }
        default: *dst = (uint8_t)value; return;
        }
    }
    switch (width) {
    case 8: { int64_t x = value; fill_items(dst, &x, 8, count); return; }
    case 4: { int32_t x = (int32_t)value; fill_items(dst, &x, 4, count); return; }
    case 2: { int16_t x = (int16_t)value; fill_items(dst, &x, 2, count); return; }
    default: memset(dst, (int)(uint8_t)value, (size_t)count); return;
    }
}

/* baseSequence + offset delta (offset - baseOffset, an int32, so the sum fits an int64) for rows
 * [from, to), wrapping past INT32_MAX to 0 as Kafka's sequences do. */
static void fill_sequences(SinkObject *s, int64_t from, int64_t to, const batch_t *bt) {
    int32_t *o_seq = (int32_t *)s->p[S_SEQUENCE] + from;
    const int64_t *o_off = (const int64_t *)s->p[S_OFFSET] + from;
    const int64_t first = wsub(bt->base_seq, bt->base_offset);
    for (int64_t k = 0; k < to - from; k++) {
        int64_t x = wadd(first, o_off[k]);
        o_seq[k] = wrap32(x > INT32_MAX ? x - ((int64_t)1 << 31) : x);
    }
}

void kl_batch_columns(SinkObject *s, int64_t from, int64_t to, const int64_t v[BATCH_COLUMNS],
                      const batch_t *sequences) {
    if (to <= from) return;
    int64_t *st = s->p[S_STATE], *same = st + ST_SHARED_VALUES;
    int64_t shared = st[ST_SHARED];
    if (from == 0) { /* a chunk's first rows */
        shared = ((int64_t)1 << BATCH_COLUMNS) - 1;
        memcpy(same, v, sizeof(int64_t) * BATCH_COLUMNS);
        if (sequences) shared &= ~((int64_t)1 << B_SEQUENCE);
    }
    for (int k = 0; k < BATCH_COLUMNS; k++) {
        const int64_t bit = (int64_t)1 << k;
        const int computed = k == B_SEQUENCE && sequences;
        if (shared & bit) {
            if (!computed && v[k] == same[k]) continue;
            fill_column(s, k, 0, from, same[k]); /* the rows before, which shared one value */
            shared &= ~bit;
        }
        if (computed) fill_sequences(s, from, to, sequences);
        else fill_column(s, k, from, to - from, v[k]);
    }
    st[ST_SHARED] = shared;
}

/* The batch-level columns of a v2 batch's rows [from, to). */
static void fill_batch_columns(SinkObject *s, int64_t from, int64_t to, const batch_t *bt) {
    const int64_t v[BATCH_COLUMNS] = {
        [B_TIMESTAMP_TYPE] = (bt->attributes & 0x08) != 0,
        [B_PRODUCER_ID] = bt->producer_id,
        [B_PRODUCER_EPOCH] = bt->producer_epoch,
        [B_SEQUENCE] = -1,
        [B_IS_TRANSACTIONAL] = (bt->attributes & 0x10) != 0,
        [B_IS_CONTROL] = (bt->attributes & 0x20) != 0,
        [B_PARTITION_LEADER_EPOCH] = bt->leader_epoch,
    };
    kl_batch_columns(s, from, to, v, bt->base_seq < 0 ? NULL : bt);
}

/* How the walk keeps bt->crc up to date behind it: told at each record how far it has walked,
 * with a state of its own. */
typedef void (*crc_follow_t)(void *state, crc_run_t *crc, const uint8_t *b, Py_ssize_t walked);

/* In steps of CRC_STEP bytes. */
static inline void crc_in_steps(void *unused, crc_run_t *crc, const uint8_t *b,
                                Py_ssize_t walked) {
    (void)unused;
    if (walked - crc->pos >= CRC_STEP) {
        crc->state = kl_crc32c_update(crc->state, b + crc->pos, walked - crc->pos);
        crc->pos = walked;
    }
}

/* The validity bytes of keys, values and header values are written only once their chunk has a
 * null (ST_*_NULLS > 0; the first null writes the ones before it): most chunks have none, and
 * the stores measured 2-2.5% of a walk of records with two headers.
 *
 * Append the records of b[start:end]; 0, or -1 with r filled (ERROR or NEED_SPACE). Fill levels
 * change only on success, so the caller can retry after growing. Inlined into each of its callers
 * below, with their ways of following the CRC (in steps, by words, folded). */
static inline __attribute__((always_inline)) int walk_v2(SinkObject *s, const uint8_t *b,
                                                         Py_ssize_t start, Py_ssize_t end,
                                                         const batch_t *bt, result_t *r,
                                                         crc_follow_t follow, void *state) {
    int64_t *st = s->p[S_STATE];
    int64_t count = bt->count;
    if (count * 7 > (int64_t)(end - start)) FAIL(E_COUNT_TOO_LARGE, start, count, end - start, 0);
    int64_t n = st[ST_ROWS];
    if (n + count > s->cap[S_OFFSET]) GROW(GROW_ROWS, n + count);
    int64_t ku = st[ST_KEY_BYTES], vu = st[ST_VALUE_BYTES];
    int64_t nh = st[ST_HEADERS], hku = st[ST_HKEY_BYTES], hvu = st[ST_HVAL_BYTES];
    int64_t k_nulls = st[ST_KEY_NULLS], v_nulls = st[ST_VALUE_NULLS], hv_nulls = st[ST_HVAL_NULLS];
    int64_t *o_off = s->p[S_OFFSET], *o_ts = s->p[S_TIMESTAMP];
    int32_t *o_ko = s->p[S_KEY_OFFSETS], *o_vo = s->p[S_VALUE_OFFSETS];
    int32_t *o_ho = s->p[S_HEADER_OFFSETS], *o_hko = s->p[S_HKEY_OFFSETS];
    int32_t *o_hvo = s->p[S_HVAL_OFFSETS];
    uint8_t *o_kv = s->p[S_KEY_VALID], *o_kd = s->p[S_KEY_DATA], *o_vv = s->p[S_VALUE_VALID];
    uint8_t *o_vd = s->p[S_VALUE_DATA], *o_hkd = s->p[S_HKEY_DATA], *o_hvv = s->p[S_HVAL_VALID];
    uint8_t *o_hvd = s->p[S_HVAL_DATA];
    const Py_ssize_t kcap = s->cap[S_KEY_DATA], vcap = s->cap[S_VALUE_DATA];
    const Py_ssize_t hcap = s->cap[S_HVAL_VALID], hkcap = s->cap[S_HKEY_DATA];
    const Py_ssize_t hvcap = s->cap[S_HVAL_DATA];
    const int log_append = (bt->attributes & 0x08) != 0;
    const int64_t last_delta = bt->last_delta; /* kept in a register, not reloaded per record */
    int64_t prev_delta = -1;
    Py_ssize_t pos = start;
    for (int64_t i = 0; i < count; i++) {
        Py_ssize_t record_start = pos;
        /* a record's value (the largest field) may span two lines; header values share one */
        prefetch_output(o_vd + vu, 512);
        prefetch_output(o_vd + vu, 576);
        prefetch_output(o_hvd + hvu, 256);
        if (bt->crc) follow(state, bt->crc, b, pos);
        record_head_t head;
        if (read_record_head(b, &pos, end, &head, r)) return -1;
        const int64_t length = head.length, ts_delta = head.ts_delta;
        const int64_t offset_delta = head.offset_delta, k_len = head.k_len, v_len = head.v_len;
        const int64_t h_count = head.h_count;
        const Py_ssize_t body_end = head.body_end, k_pos = head.k_pos, v_pos = head.v_pos;
        int64_t offset = wadd(bt->base_offset, offset_delta);
        int keep = offset >= bt->start_off && offset < bt->end_off;
        if (h_count) {
            if (h_count * 2 > (int64_t)(body_end - pos))
                FAIL(E_HEADERS_TOO_MANY, pos, h_count, body_end - pos, 0);
            if (keep && nh + h_count > hcap) GROW(GROW_HEADERS, nh + h_count + (end - pos) / 2);
            int64_t h = 0;
            if (keep && body_end + 32 <= end && hku + 8 * h_count <= hkcap &&
                hvu + 32 * h_count <= hvcap) {
                /* The common header in one step, while the headers have its shape: one-byte
                 * lengths, an ASCII key of up to 8 bytes and a value of up to 32, copied as one
                 * word and 32 bytes (what lands past a field stays past the fill level, in the
                 * slack checked above). Reads stay below body_end + 32. The first header of
                 * another shape, and any that is wrong, goes to the general loop below. */
                for (; h < h_count; h++) {
                    const unsigned zk = b[pos];
                    const Py_ssize_t kl = zk >> 1;
                    const unsigned zv = b[pos + 1 + (zk <= 16 ? kl : 0)];
                    const Py_ssize_t vl = zv >> 1;
                    if (((zk | zv) & 1) || zk > 16 || zv > 64 || pos + 2 + kl + vl > body_end ||
                        (le64(b + pos + 1) & HIGH_BITS[kl]))
                        break;
                    memcpy(o_hkd + hku, b + pos + 1, 8);
                    memcpy(o_hvd + hvu, b + pos + 2 + kl, 32);
                    hku += kl;
                    hvu += vl;
                    o_hko[nh + 1] = (int32_t)hku;
                    o_hvo[nh + 1] = (int32_t)hvu;
                    if (hv_nulls) o_hvv[nh] = 1;
                    nh++;
                    pos += 2 + kl + vl;
                }
            }
            for (; h < h_count; h++) {
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
                    if (hk_len <= 8 && hk_pos + 8 <= end && hku + 8 <= hkcap &&
                        !(le64(b + hk_pos) & HIGH_BITS[hk_len])) {
                        /* an ASCII key of up to 8 bytes, copied as one word: the bytes after it
                         * land past the fill level, in the array's slack */
                        memcpy(o_hkd + hku, b + hk_pos, 8);
                        hku += hk_len;
                    } else if (utf8_valid(b + hk_pos, (Py_ssize_t)hk_len)) {
                        if (hku + hk_len > hkcap) GROW(GROW_HKEY_DATA, hku + (end - hk_pos));
                        copy_bytes(o_hkd + hku, b + hk_pos, (size_t)hk_len);
                        hku += hk_len;
                    } else {
                        if (hku + 3 * hk_len > hkcap)
                            GROW(GROW_HKEY_DATA, hku + 3 * hk_len + (end - hk_pos));
                        hku += utf8_replace(b + hk_pos, (Py_ssize_t)hk_len, o_hkd + hku);
                    }
                    o_hko[nh + 1] = (int32_t)hku;
                    int64_t grow = put_item(o_hvd, &hvu, hvcap, o_hvv, &hv_nulls, o_hvo, nh,
                                            b + hv_pos, hv_len, end - hv_pos);
                    if (grow) GROW(GROW_HVAL_DATA, grow);
                    nh++;
                }
            }
        }
        if (pos != body_end)
            FAIL(E_RECORD_PAYLOAD, record_start, length, (int64_t)(pos - (body_end - length)), 0);
        /* the offset rule, once the record is read (as record.py): offset deltas increase
         * within [0, lastOffsetDelta], so every record's offset is within the batch's, which
         * its caller checked fit a log's */
        /* prev_delta < offset_delta <= last_delta, as one unsigned comparison */
        if (__builtin_expect((uint64_t)(offset_delta - prev_delta - 1) >=
                                 (uint64_t)(last_delta - prev_delta), 0))
            FAIL(E_RECORD_OFFSET, record_start, offset_delta, prev_delta, last_delta);
        prev_delta = offset_delta;
        if (!keep) continue;
        int64_t grow = put_item(o_kd, &ku, kcap, o_kv, &k_nulls, o_ko, n, b + k_pos, k_len,
                                end - k_pos);
        if (grow) GROW(GROW_KEY_DATA, grow);
        grow = put_item(o_vd, &vu, vcap, o_vv, &v_nulls, o_vo, n, b + v_pos, v_len, end - v_pos);
        if (grow) GROW(GROW_VALUE_DATA, grow);
        o_ho[n + 1] = (int32_t)nh;
        o_off[n] = offset;
        o_ts[n] = log_append ? bt->max_ts : wadd(bt->base_ts, ts_delta);
        n++;
    }
    if (pos != end) FAIL(E_RECORDS_REMAINING, pos, end - pos, count, 0);
    fill_batch_columns(s, st[ST_ROWS], n, bt);
    st[ST_ROWS] = n;
    st[ST_KEY_BYTES] = ku;
    st[ST_VALUE_BYTES] = vu;
    st[ST_HEADERS] = nh;
    st[ST_HKEY_BYTES] = hku;
    st[ST_HVAL_BYTES] = hvu;
    st[ST_KEY_NULLS] = k_nulls;
    st[ST_VALUE_NULLS] = v_nulls;
    st[ST_HVAL_NULLS] = hv_nulls;
    return 0;
}

#ifdef HAVE_X86_CRC
VCLMUL_TARGET static inline void crc_folded(void *fold, crc_run_t *crc, const uint8_t *b,
                                            Py_ssize_t walked) {
    crc_fold_to((crc_fold_t *)fold, crc, b, walked);
}

/* Where the CPU has no VPCLMULQDQ but SSE4.2: the CRC run through the crc32 instruction eight
 * bytes at a time as the walk passes them, inline, its register kept in `words` (one chain of
 * 3-cycle steps, which the walk's own work hides in part): on this machine with the AVX-512 code
 * turned off, 1 MB uncompressed batches +67% -> +33% against 16 KiB steps, 16 KB ones +52% ->
 * +29%. Three streams a round of 768 bytes (as kl_crc32c_update runs them) measured no better. */
typedef struct {
    uint64_t state;
    Py_ssize_t pos;
} crc_words_t;

__attribute__((target("sse4.2"))) static inline void crc_by_words(void *words, crc_run_t *crc,
                                                                  const uint8_t *b,
                                                                  Py_ssize_t walked) {
    crc_words_t *w = words;
    (void)crc;
    for (; walked - w->pos >= 8; w->pos += 8)
        w->state = _mm_crc32_u64(w->state, le64(b + w->pos));
}

__attribute__((target("sse4.2"))) static int walk_v2_crc32(SinkObject *s, const uint8_t *b,
                                                          Py_ssize_t start, Py_ssize_t end,
                                                          const batch_t *bt, result_t *r) {
    crc_words_t words = {bt->crc->state, bt->crc->pos};
    int rc = walk_v2(s, b, start, end, bt, r, crc_by_words, &words);
    bt->crc->state = (uint32_t)words.state;
    bt->crc->pos = words.pos;
    return rc;
}

/* The walk with its batch's CRC folded as it goes, compiled for AVX-512 to have it inline. */
VCLMUL_TARGET static int walk_v2_folding(SinkObject *s, const uint8_t *b, Py_ssize_t start,
                                         Py_ssize_t end, const batch_t *bt, result_t *r) {
    crc_fold_t fold = {.started = 0};
    int rc = walk_v2(s, b, start, end, bt, r, crc_folded, &fold);
    if (!rc) crc_fold_to(&fold, bt->crc, b, end);
    crc_fold_end(&fold, bt->crc);
    return rc;
}
#endif

int kl_records_v2(SinkObject *s, const uint8_t *b, Py_ssize_t start, Py_ssize_t end,
                  const batch_t *bt, result_t *r) {
#ifdef HAVE_X86_CRC
    if (bt->crc) {
        const int how = kl_crc_in_walk();
        if (how == CRC_WALK_FOLDED) return walk_v2_folding(s, b, start, end, bt, r);
        if (how == CRC_WALK_WORDS) return walk_v2_crc32(s, b, start, end, bt, r);
    }
#endif
    return walk_v2(s, b, start, end, bt, r, crc_in_steps, NULL);
}

/* -- validation only: the same walk as kl_records_v2, writing nothing per record --------------- */
/* What a leader's validation of an uncompressed batch needs of its records, with the framing
 * rules (and error codes and positions) of kl_records_v2: the smallest and largest timestamp
 * other than -1 (base + delta wrapping as Java longs; the batch's max for LogAppendTime), how
 * many keys are null, and whether offset deltas run 0..count-1 (they must increase within
 * [0, last_delta], as kl_records_v2 checks). 0, or -1 with r filled. */
int kl_validate_v2(const uint8_t *b, Py_ssize_t start, Py_ssize_t end, int64_t count,
                   int64_t last_delta, int64_t base_ts, int64_t max_ts, int log_append,
                   int64_t out[4], result_t *r) {
    if (count * 7 > (int64_t)(end - start)) FAIL(E_COUNT_TOO_LARGE, start, count, end - start, 0);
    int64_t lo = INT64_MAX, hi = INT64_MIN, null_keys = 0, deltas_ok = 1, prev_delta = -1;
    Py_ssize_t pos = start;
    for (int64_t i = 0; i < count; i++) {
        Py_ssize_t record_start = pos;
        record_head_t head;
        if (read_record_head(b, &pos, end, &head, r)) return -1;
        const int64_t length = head.length, ts_delta = head.ts_delta;
        const int64_t offset_delta = head.offset_delta, h_count = head.h_count;
        const Py_ssize_t body_end = head.body_end;
        if (head.k_len < 0) null_keys++;
        if (h_count) {
            if (h_count * 2 > (int64_t)(body_end - pos))
                FAIL(E_HEADERS_TOO_MANY, pos, h_count, body_end - pos, 0);
            for (int64_t h = 0; h < h_count; h++) {
                int64_t hk_len, hv_len;
                READ_VARINT(hk_len, body_end, 5, F_HKEY_LENGTH);
                if (hk_len < 0 || hk_len > (int64_t)(body_end - pos))
                    FAIL(E_HKEY_SIZE, pos, hk_len, 0, 0);
                pos += (Py_ssize_t)hk_len;
                READ_VARINT(hv_len, body_end, 5, F_HVAL_LENGTH);
                if (hv_len >= 0) {
                    if (hv_len > (int64_t)(body_end - pos)) FAIL(E_HVAL_OVERRUN, pos, hv_len, 0, 0);
                    pos += (Py_ssize_t)hv_len;
                }
            }
        }
        if (pos != body_end)
            FAIL(E_RECORD_PAYLOAD, record_start, length, (int64_t)(pos - (body_end - length)), 0);
        if (offset_delta <= prev_delta || offset_delta > last_delta)
            FAIL(E_RECORD_OFFSET, record_start, offset_delta, prev_delta, last_delta);
        prev_delta = offset_delta;
        if (offset_delta != i) deltas_ok = 0;
        int64_t ts = log_append ? max_ts : wadd(base_ts, ts_delta);
        if (ts != -1) {
            if (ts < lo) lo = ts;
            if (ts > hi) hi = ts;
        }
    }
    if (pos != end) FAIL(E_RECORDS_REMAINING, pos, end - pos, count, 0);
    if (lo > hi) lo = hi = -1; /* no record has a timestamp */
    out[0] = lo; out[1] = hi; out[2] = null_keys; out[3] = deltas_ok;
    r->pos = pos;
    return 0;
}

PyObject *kl_validate_records_v2(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    long long v[7];
    if (kl_int_args("validate_records_v2", args, nargs, 8, 1, v, 7) < 0) return NULL;
    Py_buffer in;
    if (kl_get_bytes(args[0], &in) < 0) return NULL;
    if (v[0] < 0 || v[0] > v[1] || v[1] > in.len || v[2] < 0 || v[2] > INT32_MAX) {
        PyBuffer_Release(&in);
        PyErr_SetString(PyExc_ValueError, "validate_records_v2: range or count out of range");
        return NULL;
    }
    result_t r = {END, v[1], 0, 0, 0, 0, -1};
    int64_t out[4] = {-1, -1, 0, 0};
    Py_BEGIN_ALLOW_THREADS
    kl_validate_v2(in.buf, (Py_ssize_t)v[0], (Py_ssize_t)v[1], v[2], v[6], v[3], v[4], v[5] != 0,
                   out, &r);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&in);
    return Py_BuildValue("(iniLLLLLLi)", r.status, r.pos, r.code, r.a, r.b, r.c, (long long)out[0],
                         (long long)out[1], (long long)out[2], (int)out[3]);
}
