/*
 * Magic 0/1 messages: key and value of one message, one row, the CRC-32 check, and the inner
 * messages of a decompressed wrapper (with LegacyRecord's offset and timestamp rules).
 */
#include "speedups.h"

#define ALL_SHARED (((int64_t)1 << BATCH_COLUMNS) - 1)


/* Key and value of the message whose entry is b[pos:end] (its size already checked >= min). */
int kl_legacy_key_value(const uint8_t *b, Py_ssize_t pos, Py_ssize_t end, int magic,
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

/* Row n's validity, written only once the chunk has a null (as the v2 walk does). */
static inline void set_valid(uint8_t *valid, int64_t n, int present, int64_t *nulls) {
    if (present) {
        if (*nulls) valid[n] = 1;
        return;
    }
    if (!*nulls) memset(valid, 1, (size_t)n);
    valid[n] = 0;
    ++*nulls;
}

int kl_legacy_row(SinkObject *s, const uint8_t *b, Py_ssize_t pos, Py_ssize_t end, int64_t offset,
                  int64_t ts, int32_t ts_type, int magic, result_t *r) {
    int64_t *st = s->p[S_STATE];
    int64_t n = st[ST_ROWS], ku = st[ST_KEY_BYTES], vu = st[ST_VALUE_BYTES];
    Py_ssize_t kv[4];
    if (kl_legacy_key_value(b, pos, end, magic, kv, r)) return -1;
    Py_ssize_t k_len = kv[1], v_len = kv[3];
    if (n + 1 > s->cap[S_OFFSET]) GROW(GROW_ROWS, n + 1);
    if (k_len > 0 && ku + k_len > s->cap[S_KEY_DATA]) GROW(GROW_KEY_DATA, ku + k_len);
    if (v_len > 0 && vu + v_len > s->cap[S_VALUE_DATA]) GROW(GROW_VALUE_DATA, vu + v_len);
    prefetch_output((uint8_t *)s->p[S_VALUE_DATA] + vu, 512);
    prefetch_output((uint8_t *)s->p[S_VALUE_DATA] + vu, 576);
    if (k_len >= 0) {
        memcpy((uint8_t *)s->p[S_KEY_DATA] + ku, b + kv[0], (size_t)k_len);
        ku += k_len;
    }
    if (v_len >= 0) {
        memcpy((uint8_t *)s->p[S_VALUE_DATA] + vu, b + kv[2], (size_t)v_len);
        vu += v_len;
    }
    set_valid(s->p[S_KEY_VALID], n, k_len >= 0, &st[ST_KEY_NULLS]);
    set_valid(s->p[S_VALUE_VALID], n, v_len >= 0, &st[ST_VALUE_NULLS]);
    ((int32_t *)s->p[S_KEY_OFFSETS])[n + 1] = (int32_t)ku;
    ((int32_t *)s->p[S_VALUE_OFFSETS])[n + 1] = (int32_t)vu;
    ((int32_t *)s->p[S_HEADER_OFFSETS])[n + 1] = (int32_t)st[ST_HEADERS];
    ((int64_t *)s->p[S_OFFSET])[n] = offset;
    ((int64_t *)s->p[S_TIMESTAMP])[n] = ts;
    /* a message's batch-level columns: no producer, sequence or leader epoch; its timestamp type */
    const int64_t *same = st + ST_SHARED_VALUES;
    if (n == 0 || st[ST_SHARED] != ALL_SHARED || same[B_TIMESTAMP_TYPE] != ts_type ||
        same[B_PRODUCER_ID] != -1 || same[B_PRODUCER_EPOCH] != -1 || same[B_SEQUENCE] != -1 ||
        same[B_IS_TRANSACTIONAL] || same[B_IS_CONTROL] || same[B_PARTITION_LEADER_EPOCH] != -1) {
        const int64_t v[BATCH_COLUMNS] = {ts_type, -1, -1, -1, 0, 0, -1};
        kl_batch_columns(s, n, n + 1, v, NULL);
    }
    st[ST_ROWS] = n + 1;
    st[ST_KEY_BYTES] = ku;
    st[ST_VALUE_BYTES] = vu;
    return 0;
}

int kl_legacy_crc(const uint8_t *b, Py_ssize_t pos, Py_ssize_t end, result_t *r) {
    uint32_t stored = (uint32_t)be32(b + pos + 12);
    uint32_t computed = kl_crc32_message(b + pos + 16, end - pos - 16);
    if (stored != computed) FAIL(E_CRC, pos, stored, computed, 0);
    return 0;
}


void kl_legacy_set(SinkObject *s, const uint8_t *b, Py_ssize_t end, int64_t wrapper_offset,
                   int magic, int wrapper_attributes, int64_t wrapper_ts, int64_t start_off,
                   int64_t end_off, int flags, result_t *r) {
    Py_ssize_t pos = 0, n_inner = 0, last_pos = 0;
    int64_t lowest = INT64_MAX, highest = INT64_MIN;
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
        int64_t inner_offset = be64(b + pos);
        if (inner_offset < lowest) lowest = inner_offset;
        if (inner_offset > highest) highest = inner_offset;
        n_inner++;
        last_pos = pos;
        pos += 12 + (Py_ssize_t)size;
    }
    if (!n_inner) { r->status = ERROR; r->pos = 0; r->code = E_INNER_EMPTY; return; }
    int64_t base = 0, anchor = wrapper_offset; /* the inner offset that maps to the wrapper's */
    if (magic > 0) {
        int64_t last_inner = be64(b + last_pos);
        if (wrapper_offset != 0) {
            if (wrapper_offset < last_inner) {
                r->status = ERROR; r->pos = 0; r->code = E_WRAPPER_OFFSET; r->a = wrapper_offset;
                r->b = last_inner;
                return;
            }
            base = wsub(wrapper_offset, last_inner);
            anchor = last_inner;
        }
    }
    /* the offset rule: the absolute inner offsets (inner + wrapper - anchor, exact) fit a log's */
    __extension__ typedef __int128 i128;
    const i128 shift = (i128)wrapper_offset - anchor;
    if (shift + lowest < 0 || shift + highest > MAX_LAST_OFFSET) {
        r->status = ERROR; r->pos = 0; r->code = E_INNER_OFFSETS; r->a = lowest; r->b = highest;
        r->c = anchor;
        return;
    }
    const int log_append = magic > 0 && (wrapper_attributes & 0x08);
    pos = 0;
    while (pos < end) {
        Py_ssize_t e = pos + 12 + be32(b + pos + 8);
        int64_t offset = wadd(base, be64(b + pos));
        if ((flags & FLAG_VALIDATE_CRC) && kl_legacy_crc(b, pos, e, r)) return;
        int64_t ts = -1;
        int32_t ts_type = -1;
        if (magic == 1) {
            if (log_append) { ts = wrapper_ts; ts_type = 1; }
            else { ts = be64(b + pos + 18); ts_type = 0; } /* the wrapper's type (LegacyRecord) */
        }
        if (offset < start_off || offset >= end_off) {
            Py_ssize_t kv[4];
            if (kl_legacy_key_value(b, pos, e, magic, kv, r)) return;
        } else if (kl_legacy_row(s, b, pos, e, offset, ts, ts_type, magic, r)) {
            return;
        }
        pos = e;
    }
    r->status = END; r->pos = end; r->code = 0; r->a = r->b = r->c = 0;
}

