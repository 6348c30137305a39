/*
 * Kafka's two checksums, computed inside the kernels in the same pass that walks the entries:
 * CRC-32 (zlib's polynomial) of magic 0/1 messages and CRC-32C (Castagnoli) of v2 batches.
 *
 * Both have a portable slicing-by-8 table version. On x86-64 the CPU is asked once, at import:
 * CRC-32 then folds 64 bytes at a time with PCLMULQDQ, and CRC-32C uses SSE4.2's crc32
 * instruction on three independent streams (the instruction's latency is three cycles, its
 * throughput one per cycle), whose states are joined with "zeros operator" tables: the CRC state
 * after n zero bytes is a linear function of the state before, so it is four table lookups.
 * A magic 0/1 message is short and carries its own CRC-32, so it has a path of its own
 * (crc32_short, crc32_short_wide with AVX-512): its 16-byte blocks are folded straight to the end
 * in parallel, not one after another, and the result is reduced without tables.
 */
#include "fold.h"

#define POLY_CRC32 0xEDB88320u  /* bit-reflected */
#define POLY_CRC32C 0x82F63B78u /* bit-reflected */
#define STREAM_LONG 8192        /* bytes per stream in a three-stream round, and a shorter one */
#define STREAM_SHORT 256

static uint32_t tab32[8][256], tab32c[8][256];
static uint32_t zeros_long[4][256], zeros_short[4][256]; /* CRC-32C over STREAM_* zero bytes */

#ifdef HAVE_X86_CRC
static int use_clmul = 0;  /* PCLMULQDQ (128-bit folding) */
static int use_vclmul = 0; /* AVX-512 VPCLMULQDQ (512-bit folding) */
static int use_sse42 = 0;  /* the crc32 instruction (CRC-32C only) */
static void short_constants(void);
#endif

static void slice8_tables(uint32_t tab[8][256], uint32_t poly) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? poly ^ (c >> 1) : c >> 1;
        tab[0][i] = c;
    }
    for (int t = 1; t < 8; t++)
        for (int i = 0; i < 256; i++)
            tab[t][i] = (tab[t - 1][i] >> 8) ^ tab[0][tab[t - 1][i] & 0xFF];
}

/* The state update of a reflected CRC over n bytes, eight at a time (state not inverted). */
static uint32_t slice8(const uint32_t tab[8][256], uint32_t c, const uint8_t *p, Py_ssize_t n) {
    while (n >= 8) {
        uint32_t one = ((uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
                        ((uint32_t)p[3] << 24)) ^ c;
        uint32_t two = (uint32_t)p[4] | ((uint32_t)p[5] << 8) | ((uint32_t)p[6] << 16) |
                       ((uint32_t)p[7] << 24);
        c = tab[7][one & 0xFF] ^ tab[6][(one >> 8) & 0xFF] ^ tab[5][(one >> 16) & 0xFF] ^
            tab[4][one >> 24] ^ tab[3][two & 0xFF] ^ tab[2][(two >> 8) & 0xFF] ^
            tab[1][(two >> 16) & 0xFF] ^ tab[0][two >> 24];
        p += 8;
        n -= 8;
    }
    while (n-- > 0) c = tab[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    return c;
}

/* -- zeros operators: 32x32 matrices over GF(2), one column (uint32) per state bit ------------ */
static uint32_t gf2_times(const uint32_t m[32], uint32_t v) {
    uint32_t sum = 0;
    for (int i = 0; v; i++, v >>= 1)
        if (v & 1) sum ^= m[i];
    return sum;
}

static void gf2_compose(uint32_t out[32], const uint32_t a[32], const uint32_t b[32]) {
    uint32_t tmp[32];
    for (int i = 0; i < 32; i++) tmp[i] = gf2_times(a, b[i]);
    memcpy(out, tmp, sizeof(tmp));
}

/* Tables applying the CRC-32C state change of n zero bytes, a byte of the state per table. */
static void zeros_tables(uint32_t out[4][256], size_t n) {
    uint32_t byte_op[32], op[32];
    for (int i = 0; i < 32; i++) {
        uint32_t c = 1u << i;
        byte_op[i] = tab32c[0][c & 0xFF] ^ (c >> 8); /* one zero byte */
        op[i] = c;                                    /* identity */
    }
    for (; n; n >>= 1) { /* op = byte_op ** n, by squaring */
        if (n & 1) gf2_compose(op, byte_op, op);
        gf2_compose(byte_op, byte_op, byte_op);
    }
    for (int k = 0; k < 4; k++)
        for (uint32_t i = 0; i < 256; i++) out[k][i] = gf2_times(op, i << (8 * k));
}

static inline uint32_t zeros_shift(const uint32_t t[4][256], uint32_t c) {
    return t[0][c & 0xFF] ^ t[1][(c >> 8) & 0xFF] ^ t[2][(c >> 16) & 0xFF] ^ t[3][c >> 24];
}

/* Which instructions run, by level: 0 the tables, 1 SSE4.2's crc32 and PCLMULQDQ, 2 also AVX-512's
 * VPCLMULQDQ; each only where the CPU (and OS) has it. Returns the previous level. */
int kl_crc_set_hardware(int level) {
#ifdef HAVE_X86_CRC
    int before = use_vclmul ? 2 : (use_clmul || use_sse42) ? 1 : 0;
    use_clmul = level >= 1 && __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse2");
    use_sse42 = level >= 1 && __builtin_cpu_supports("sse4.2");
    use_vclmul = level >= 2 && use_clmul && __builtin_cpu_supports("avx512f") &&
                 __builtin_cpu_supports("vpclmulqdq");
    return before;
#else
    (void)level;
    return 0;
#endif
}

void kl_crc_init(void) {
    slice8_tables(tab32, POLY_CRC32);
    slice8_tables(tab32c, POLY_CRC32C);
    zeros_tables(zeros_long, STREAM_LONG);
    zeros_tables(zeros_short, STREAM_SHORT);
#ifdef HAVE_X86_CRC
    short_constants();
    __builtin_cpu_init();
    kl_crc_set_hardware(2);
#endif
}

int kl_crc_in_walk(void) {
#ifdef HAVE_X86_CRC
    if (use_vclmul) return CRC_WALK_FOLDED;
    if (use_sse42) return CRC_WALK_WORDS;
#endif
    return CRC_WALK_STEPS;
}

const char *kl_crc_implementation(void) {
#ifdef HAVE_X86_CRC
    if (use_vclmul) return "vpclmulqdq";
    if (use_sse42 && use_clmul) return "sse4.2+pclmulqdq";
    if (use_sse42) return "sse4.2";
    if (use_clmul) return "pclmulqdq";
#endif
    return "table";
}

#ifdef HAVE_X86_CRC
/* Carry-less multiplication folding (Intel's "Fast CRC Computation Using PCLMULQDQ"): 128-bit
 * lanes of data are multiplied forward by x^(D+-32) mod P, bit-reflected (D: the distance folded,
 * in bits), and added to the data D bits later, so that the last lane is congruent to everything
 * folded; a table then finishes from that lane with a zero state. Per polynomial: the pairs for
 * D = 2048, 512 and 128 (low qword: x^(D+32), high qword: x^(D-32)). */
typedef struct {
    long long k2048[2], k512[2], k128[2];
    const uint32_t (*tab)[256];
} fold_t;
static const fold_t fold32 = {{0x11542778aLL, 0x1322d1430LL}, {0x154442bd4LL, 0x1c6e41596LL},
                              {0x1751997d0LL, 0x0ccaa009eLL}, tab32};
static const fold_t fold32c = {{0x0dcb17aa4LL, 0x0b9e02b86LL}, CRC32C_K512, CRC32C_K128, tab32c};


/* Fold the rest 16 bytes at a time into lane x; returns the CRC state after *used bytes. */
CLMUL_TARGET static uint32_t finish_lanes(const fold_t *f, __m128i x, const uint8_t *start,
                                          const uint8_t *p, Py_ssize_t n, Py_ssize_t *used) {
    const __m128i k = _mm_set_epi64x(f->k128[1], f->k128[0]);
    for (; n >= 16; p += 16, n -= 16) x = fold128(x, k, _mm_loadu_si128((const __m128i *)p));
    uint8_t lane[16];
    _mm_storeu_si128((__m128i *)lane, x);
    *used = p - start;
    return slice8(f->tab, 0, lane, 16);
}

/* Four 128-bit lanes, 64 bytes a round. n >= 64. */
CLMUL_TARGET static uint32_t crc_clmul(const fold_t *f, uint32_t c, const uint8_t *p,
                                       Py_ssize_t n, Py_ssize_t *used) {
    const uint8_t *start = p;
    __m128i x1 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)p), _mm_cvtsi32_si128((int)c));
    __m128i x2 = _mm_loadu_si128((const __m128i *)(p + 16));
    __m128i x3 = _mm_loadu_si128((const __m128i *)(p + 32));
    __m128i x4 = _mm_loadu_si128((const __m128i *)(p + 48));
    __m128i k = _mm_set_epi64x(f->k512[1], f->k512[0]);
    for (p += 64, n -= 64; n >= 64; p += 64, n -= 64) {
        x1 = fold128(x1, k, _mm_loadu_si128((const __m128i *)p));
        x2 = fold128(x2, k, _mm_loadu_si128((const __m128i *)(p + 16)));
        x3 = fold128(x3, k, _mm_loadu_si128((const __m128i *)(p + 32)));
        x4 = fold128(x4, k, _mm_loadu_si128((const __m128i *)(p + 48)));
    }
    k = _mm_set_epi64x(f->k128[1], f->k128[0]);
    x1 = fold128(fold128(fold128(x1, k, x2), k, x3), k, x4);
    return finish_lanes(f, x1, start, p, n, used);
}

/* The same with AVX-512's VPCLMULQDQ: four 512-bit registers of four lanes each, 256 bytes a
 * round. n >= 256. */
VCLMUL_TARGET static uint32_t crc_vclmul(const fold_t *f, uint32_t c, const uint8_t *p,
                                         Py_ssize_t n, Py_ssize_t *used) {
    const uint8_t *start = p;
    __m512i z0 = _mm512_xor_si512(_mm512_loadu_si512(p),
                                  _mm512_zextsi128_si512(_mm_cvtsi32_si128((int)c)));
    __m512i z1 = _mm512_loadu_si512(p + 64), z2 = _mm512_loadu_si512(p + 128);
    __m512i z3 = _mm512_loadu_si512(p + 192);
    __m512i k = _mm512_broadcast_i32x4(_mm_set_epi64x(f->k2048[1], f->k2048[0]));
    for (p += 256, n -= 256; n >= 256; p += 256, n -= 256) {
        z0 = fold512(z0, k, _mm512_loadu_si512(p));
        z1 = fold512(z1, k, _mm512_loadu_si512(p + 64));
        z2 = fold512(z2, k, _mm512_loadu_si512(p + 128));
        z3 = fold512(z3, k, _mm512_loadu_si512(p + 192));
    }
    k = _mm512_broadcast_i32x4(_mm_set_epi64x(f->k512[1], f->k512[0]));
    z0 = fold512(fold512(fold512(z0, k, z1), k, z2), k, z3);
    for (; n >= 64; p += 64, n -= 64) z0 = fold512(z0, k, _mm512_loadu_si512(p));
    const __m128i k128 = _mm_set_epi64x(f->k128[1], f->k128[0]);
    __m128i x = _mm512_extracti32x4_epi32(z0, 0);
    x = fold128(x, k128, _mm512_extracti32x4_epi32(z0, 1));
    x = fold128(x, k128, _mm512_extracti32x4_epi32(z0, 2));
    x = fold128(x, k128, _mm512_extracti32x4_epi32(z0, 3));
    /* Clean the upper register state before any SSE code runs: left dirty, every later legacy SSE
     * instruction in the process (ours, libc's, numpy's) pays a transition penalty. */
    _mm256_zeroupper();
    return finish_lanes(f, x, start, p, n, used);
}

/* The state after folding as much as the CPU allows (none below 64 bytes), advancing *p and *n. */
static uint32_t fold_prefix(const fold_t *f, uint32_t c, const uint8_t **p, Py_ssize_t *n) {
    Py_ssize_t used = 0;
    if (use_vclmul && *n >= 256) c = crc_vclmul(f, c, *p, *n, &used);
    else if (use_clmul && *n >= 64) c = crc_clmul(f, c, *p, *n, &used);
    *p += used;
    *n -= used;
    return c;
}

/* -- CRC-32 of a short magic 0/1 message ------------------------------------------------------
 * The n bytes are taken as whole 16-byte blocks by starting up to 15 bytes early and masking
 * those bytes to zero (leading zeros leave a CRC from the zero state unchanged; the initial
 * state is XORed into the message's first four bytes instead). Block j of m is folded forward
 * by m-1-j blocks in one step, all blocks at once, and the 128-bit result is reduced without
 * tables: its two top 32-bit words are multiplied by x^96 and x^64 mod P into 64 bits, and
 * Barrett's reduction finishes (the quotient from mu = floor(x^96 / P), the remainder the low 32
 * bits of quotient * P). The constants are computed from the polynomial at import. */
static long long fold_down[24][2]; /* [15 - d]: fold a block forward by d blocks; 0 for d <= 0 */
#define FOLD_BLOCKS(d) fold_down[15 - (d)]
static long long reduce_k[2];  /* x^96 and x^64 mod P, as the folds take them */
static long long barrett_k[2]; /* mu without its x^64 term, and P; bit-reflected */
static const uint8_t short_init[80] = {[16] = 0xFF, [17] = 0xFF, [18] = 0xFF, [19] = 0xFF};
static uint8_t short_mask[80]; /* 16 zero bytes, then ones */

/* x^e mod P for CRC-32, bit-reflected and shifted as the fold constants above are. */
static long long fold_constant(unsigned e) {
    uint32_t v = 0x80000000u; /* x^0 */
    while (e--) v = (v >> 1) ^ ((v & 1) ? POLY_CRC32 : 0);
    return (long long)v << 1;
}

static void short_constants(void) {
    for (unsigned d = 1; d < 16; d++) {
        FOLD_BLOCKS(d)[0] = fold_constant(128 * d + 32);
        FOLD_BLOCKS(d)[1] = fold_constant(128 * d - 32);
    }
    memset(short_mask + 16, 0xFF, sizeof(short_mask) - 16);
    reduce_k[0] = fold_constant(96);
    reduce_k[1] = fold_constant(64);
    uint64_t poly = 0, quotient = 0, mu = 0; /* P in normal bit order, without x^32 */
    for (int i = 0; i < 32; i++)
        if (POLY_CRC32 & (1u << i)) poly |= 1ull << (31 - i);
    unsigned __int128 rem = (unsigned __int128)1 << 96; /* floor(x^96 / P) by long division */
    for (int i = 64; i >= 0; i--)
        if ((rem >> (i + 32)) & 1) {
            rem ^= ((unsigned __int128)poly | ((unsigned __int128)1 << 32)) << i;
            if (i < 64) quotient |= 1ull << i;
        }
    for (int i = 0; i < 64; i++)
        if (quotient & (1ull << i)) mu |= 1ull << (63 - i);
    barrett_k[0] = (long long)mu;
    barrett_k[1] = ((long long)POLY_CRC32 << 1) | 1;
}

#define LOAD128(a) _mm_loadu_si128((const __m128i *)(a))

CLMUL_TARGET static inline __m128i fold_by(__m128i x, const long long k[2]) {
    return clmul_pair(x, LOAD128(k));
}

/* The CRC from the 128-bit sum: 128 -> 64 bits, then Barrett (the quotient's low 32 bits, then
 * the remainder). */
CLMUL_TARGET static inline uint32_t crc32_short_finish(__m128i acc) {
    __m128i f = _mm_xor_si128(fold_by(_mm_unpacklo_epi32(acc, _mm_setzero_si128()), reduce_k),
                              _mm_srli_si128(acc, 8));
    const __m128i bk = LOAD128(barrett_k);
    __m128i quot = _mm_xor_si128(_mm_srli_epi64(_mm_clmulepi64_si128(f, bk, 0x00), 31),
                                 _mm_srli_epi64(f, 32));
    quot = _mm_and_si128(quot, _mm_set_epi32(0, 0, 0, -1));
    __m128i rem = _mm_clmulepi64_si128(quot, bk, 0x10);
    return (uint32_t)((uint64_t)_mm_cvtsi128_si64(rem) >> 32) ^ 0xFFFFFFFFu;
}

/* CRC-32 of p[0:n] for 4 <= n <= 256; reads (and ignores) up to 15 bytes before p. */
CLMUL_TARGET static uint32_t crc32_short(const uint8_t *p, Py_ssize_t n) {
    const Py_ssize_t pad = (16 - (n & 15)) & 15, last = (n + pad) / 16 - 1;
    const uint8_t *q = p - pad;
    __m128i b0 = _mm_and_si128(LOAD128(q), LOAD128(short_mask + 16 - pad));
    __m128i acc = b0 = _mm_xor_si128(b0, LOAD128(short_init + 16 - pad));
    if (last) {
        /* the initial state reaches into block 1 when the message starts 13-15 bytes in */
        __m128i b1 = _mm_xor_si128(LOAD128(q + 16), LOAD128(short_init + 32 - pad));
        __m128i other = fold_by(b0, FOLD_BLOCKS(last));
        if (last == 1) {
            acc = b1;
        } else {
            acc = _mm_xor_si128(LOAD128(q + 16 * last), fold_by(b1, FOLD_BLOCKS(last - 1)));
            Py_ssize_t j = 2;
            for (; j + 1 < last; j += 2) { /* two sums, so that the XORs are not one chain */
                acc = _mm_xor_si128(acc, fold_by(LOAD128(q + 16 * j), FOLD_BLOCKS(last - j)));
                other = _mm_xor_si128(
                    other, fold_by(LOAD128(q + 16 * j + 16), FOLD_BLOCKS(last - j - 1)));
            }
            if (j < last)
                acc = _mm_xor_si128(acc, fold_by(LOAD128(q + 16 * j), FOLD_BLOCKS(last - j)));
        }
        acc = _mm_xor_si128(acc, other);
    }
    return crc32_short_finish(acc);
}

/* The 512-bit sum of the block products, XORed down into acc. */
VCLMUL_TARGET static inline __m128i fold_sum_into(__m128i acc, __m512i sum) {
    __m256i half = _mm256_xor_si256(_mm512_castsi512_si256(sum),
                                    _mm512_extracti64x4_epi64(sum, 1));
    return _mm_xor_si128(acc, _mm_xor_si128(_mm256_castsi256_si128(half),
                                            _mm256_extracti128_si256(half, 1)));
}

/* The same with AVX-512: four blocks per register, one multiplication pair for four; the
 * blocks past the last are masked off the load (a masked load does not touch them). Messages of
 * 33-144 bytes (most v1 messages) take two registers without a loop or a branch: the second's
 * lanes past the last block are masked off, and its fold constants for d <= 0 are zero (the
 * check's cost in the decoder, per million 134-byte messages: 2.8-4.7 ms before, 1.8-2.7). */
VCLMUL_TARGET static uint32_t crc32_short_wide(const uint8_t *p, Py_ssize_t n) {
    const Py_ssize_t pad = (16 - (n & 15)) & 15, last = (n + pad) / 16 - 1;
    const uint8_t *q = p - pad;
    __m128i acc = LOAD128(q + 16 * last);
    if (last >= 2 && last <= 8) {
        const __mmask8 m0 = last >= 4 ? 0xFF : (__mmask8)((1u << (2 * last)) - 1);
        const __mmask8 m1 = last > 4 ? (__mmask8)((1u << (2 * (last - 4))) - 1) : 0;
        __m512i b0 = _mm512_maskz_loadu_epi64(m0, q), b1 = _mm512_maskz_loadu_epi64(m1, q + 64);
        b0 = _mm512_xor_si512(_mm512_and_si512(b0, _mm512_loadu_si512(short_mask + 16 - pad)),
                              _mm512_loadu_si512(short_init + 16 - pad));
        const __m512i k0 = _mm512_loadu_si512(FOLD_BLOCKS(last));
        const __m512i k1 = _mm512_loadu_si512(FOLD_BLOCKS(last - 4));
        __m512i sum = _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(b0, k0, 0x00),
                                                _mm512_clmulepi64_epi128(b0, k0, 0x11),
                                                _mm512_clmulepi64_epi128(b1, k1, 0x00), 0x96);
        sum = _mm512_xor_si512(sum, _mm512_clmulepi64_epi128(b1, k1, 0x11));
        acc = fold_sum_into(acc, sum);
        _mm256_zeroupper();
        return crc32_short_finish(acc);
    }
    if (last <= 1) /* the last block holds some of the front mask or the initial state */
        acc = _mm_xor_si128(_mm_and_si128(acc, LOAD128(short_mask + 16 - pad + 16 * last)),
                            LOAD128(short_init + 16 - pad + 16 * last));
    if (last) {
        __m512i sum = _mm512_setzero_si512();
        for (Py_ssize_t j = 0; j < last; j += 4) { /* blocks j..j+3 of those before the last */
            Py_ssize_t left = last - j;
            __mmask8 lanes = left >= 4 ? 0xFF : (__mmask8)((1u << (2 * left)) - 1);
            __m512i blocks = _mm512_maskz_loadu_epi64(lanes, q + 16 * j);
            if (j == 0)
                blocks = _mm512_xor_si512(
                    _mm512_and_si512(blocks, _mm512_loadu_si512(short_mask + 16 - pad)),
                    _mm512_loadu_si512(short_init + 16 - pad));
            __m512i k = _mm512_loadu_si512(FOLD_BLOCKS(last - j));
            sum = _mm512_ternarylogic_epi64(sum, _mm512_clmulepi64_epi128(blocks, k, 0x00),
                                            _mm512_clmulepi64_epi128(blocks, k, 0x11), 0x96);
        }
        acc = fold_sum_into(acc, sum);
    }
    _mm256_zeroupper();
    return crc32_short_finish(acc);
}

static inline uint64_t load64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* Rounds of three interleaved streams of `stream` bytes while three are left (the crc32
 * instruction's latency hidden behind two more), each round's CRCs joined by `zeros` (the shift
 * over `stream` zero bytes); inlined so that `stream` stays a constant. */
__attribute__((target("sse4.2"), always_inline)) static inline uint64_t
crc32c_rounds(uint64_t c, const uint8_t **pp, Py_ssize_t *np, Py_ssize_t stream,
              const uint32_t zeros[4][256]) {
    const uint8_t *p = *pp;
    Py_ssize_t n = *np;
    while (n >= 3 * stream) {
        uint64_t c1 = 0, c2 = 0;
        for (const uint8_t *end = p + stream; p < end; p += 8) {
            c = _mm_crc32_u64(c, load64(p));
            c1 = _mm_crc32_u64(c1, load64(p + stream));
            c2 = _mm_crc32_u64(c2, load64(p + 2 * stream));
        }
        c = zeros_shift(zeros, (uint32_t)c) ^ (uint32_t)c1;
        c = zeros_shift(zeros, (uint32_t)c) ^ (uint32_t)c2;
        p += 2 * stream;
        n -= 3 * stream;
    }
    *pp = p;
    *np = n;
    return c;
}

/* CRC-32C state update with the crc32 instruction: three streams per round while the data lasts,
 * then one. */
__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(uint32_t c32, const uint8_t *p,
                                                               Py_ssize_t n) {
    uint64_t c = crc32c_rounds(c32, &p, &n, STREAM_LONG, zeros_long);
    c = crc32c_rounds(c, &p, &n, STREAM_SHORT, zeros_short);
    for (; n >= 8; p += 8, n -= 8) c = _mm_crc32_u64(c, load64(p));
    for (; n > 0; n--) c = _mm_crc32_u8((uint32_t)c, *p++);
    return (uint32_t)c;
}
#endif

uint32_t kl_crc32(const uint8_t *p, Py_ssize_t n) {
    uint32_t c = 0xFFFFFFFFu;
#ifdef HAVE_X86_CRC
    c = fold_prefix(&fold32, c, &p, &n);
#endif
    return slice8(tab32, c, p, n) ^ 0xFFFFFFFFu;
}

uint32_t kl_crc32_message(const uint8_t *p, Py_ssize_t n) {
#ifdef HAVE_X86_CRC
    if (use_vclmul && n >= 4 && n <= 256) return crc32_short_wide(p, n);
    if (use_clmul && n >= 4 && n <= 256) return crc32_short(p, n);
#endif
    return kl_crc32(p, n);
}

uint32_t kl_crc32c_update(uint32_t c, const uint8_t *p, Py_ssize_t n) {
#ifdef HAVE_X86_CRC
    if (use_vclmul) c = fold_prefix(&fold32c, c, &p, &n);
    if (use_sse42) return crc32c_sse42(c, p, n);
#endif
    return slice8(tab32c, c, p, n);
}

uint32_t kl_crc32c(const uint8_t *p, Py_ssize_t n) {
    return kl_crc32c_update(0xFFFFFFFFu, p, n) ^ 0xFFFFFFFFu;
}
