/*
 * Carry-less folding steps (Intel's "Fast CRC Computation Using PCLMULQDQ"), shared by
 * crc.c and the v2 record walk, and the CRC-32C that walk folds as it passes the bytes
 * (AVX-512 VPCLMULQDQ).
 *
 * Computed in steps between stretches of the walk (CRC_STEP), the CRC runs apart from the walk
 * and adds its whole time to it. Folded record by record, 64 bytes at a time, its carry-less
 * multiplications run on the vector units while the walk's chain of varints keeps the integer
 * units busy, and the CPU does both at once: 1 MB uncompressed batches decoded with CRC
 * validation measured +39-44% -> +9-12% slower than without (no headers), +24-25% -> +9-13%
 * (two headers). crc.c finishes the CRC from the state and position crc_fold_end
 * leaves.
 */
#ifndef KAFKALOG_SPEEDUPS_FOLD_H
#define KAFKALOG_SPEEDUPS_FOLD_H

#include "speedups.h"

/* CRC-32C's fold constants for a distance of 512 and of 128 bits (x^(D+32) and x^(D-32) mod P,
 * bit-reflected; crc.c has them for every distance it folds) */
#define CRC32C_K512 {0x0740eef02LL, 0x09e4addf8LL}
#define CRC32C_K128 {0x0f20c0dfeLL, 0x14cd00bd6LL}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_X86_CRC 1
#define CLMUL_TARGET __attribute__((target("pclmul,sse2")))
#define VCLMUL_TARGET __attribute__((target("avx,avx512f,vpclmulqdq,pclmul,sse2")))

/* Lane x multiplied forward: its low qword by k's low, its high by k's high, summed. */
CLMUL_TARGET static inline __m128i clmul_pair(__m128i x, __m128i k) {
    return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

/* Lane x folded forward by k's distance onto the lane there. */
CLMUL_TARGET static inline __m128i fold128(__m128i x, __m128i k, __m128i next) {
    return _mm_xor_si128(clmul_pair(x, k), next);
}

/* The same for the four lanes of a 512-bit register. */
VCLMUL_TARGET static inline __m512i fold512(__m512i z, __m512i k, __m512i next) {
    return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(z, k, 0x00),
                                     _mm512_clmulepi64_epi128(z, k, 0x11), next, 0x96);
}

/* What has been folded of a batch: b[crc->pos : pos] in z, once started. */
typedef struct {
    __m512i z;
    Py_ssize_t pos;
    int started;
} crc_fold_t;

/* Fold into f the whole 64-byte blocks of b[f->pos : walked] (the first from crc's state and
 * position). */
VCLMUL_TARGET static inline void crc_fold_to(crc_fold_t *f, const crc_run_t *crc,
                                             const uint8_t *b, Py_ssize_t walked) {
    if (!f->started) {
        if (walked - crc->pos < 64) return;
        f->z = _mm512_xor_si512(_mm512_loadu_si512(b + crc->pos),
                                _mm512_zextsi128_si512(_mm_cvtsi32_si128((int)crc->state)));
        f->pos = crc->pos + 64;
        f->started = 1;
    }
    static const long long k512[2] = CRC32C_K512;
    const __m512i k = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)k512));
    for (; walked - f->pos >= 64; f->pos += 64)
        f->z = fold512(f->z, k, _mm512_loadu_si512(b + f->pos));
}

/* crc's state and position after what f folded: its four lanes folded into one, and that lane's
 * 16 bytes run through the CRC from a zero state. */
VCLMUL_TARGET static inline void crc_fold_end(const crc_fold_t *f, crc_run_t *crc) {
    if (!f->started) return;
    static const long long k128[2] = CRC32C_K128;
    const __m128i k = _mm_loadu_si128((const __m128i *)k128);
    __m128i x = fold128(_mm512_castsi512_si128(f->z), k, _mm512_extracti32x4_epi32(f->z, 1));
    x = fold128(x, k, _mm512_extracti32x4_epi32(f->z, 2));
    x = fold128(x, k, _mm512_extracti32x4_epi32(f->z, 3));
    uint8_t lane[16];
    _mm_storeu_si128((__m128i *)lane, x);
    _mm256_zeroupper();
    crc->state = kl_crc32c_update(0, lane, 16);
    crc->pos = f->pos;
}
#endif

#endif
