// Lane-wise vector operations for the core's hot loops, as clang's vector builtins. Swift's
// SIMD squareRoot and Int32 → Float conversion run lane by lane on this toolchain (a scalar
// instruction, or a libm call, per lane); through these the compiler emits one vector
// instruction. Each has a portable form that clang lowers for any target; the pair dot product
// uses AVX-512 VNNI's instruction where the core is built for a processor that has it.
#ifndef UPSCALE_VECTOR_H
#define UPSCALE_VECTOR_H

typedef float upscale_float16 __attribute__((ext_vector_type(16)));
typedef int upscale_int16 __attribute__((ext_vector_type(16)));
typedef unsigned char upscale_bytes16 __attribute__((ext_vector_type(16)));
typedef int upscale_int8 __attribute__((ext_vector_type(8)));

static inline __attribute__((always_inline)) upscale_float16 upscale_sqrt16(upscale_float16 v) {
    return __builtin_elementwise_sqrt(v);
}

static inline __attribute__((always_inline)) upscale_int16 upscale_min16(upscale_int16 a, upscale_int16 b) {
    return __builtin_elementwise_min(a, b);
}

static inline __attribute__((always_inline)) upscale_int16 upscale_max16(upscale_int16 a, upscale_int16 b) {
    return __builtin_elementwise_max(a, b);
}

static inline __attribute__((always_inline)) upscale_float16 upscale_maxf16(upscale_float16 a, upscale_float16 b) {
    return __builtin_elementwise_max(a, b);
}

/// `v` raised to `lo` and lowered to `hi`, for values that are never NaN: as comparisons, one
/// `vmaxps` and one `vminps`. The elementwise builtins' NaN rules (the other operand wins) cost
/// each of them a NaN test and a masked move on x86.
static inline __attribute__((always_inline)) upscale_float16 upscale_clamp16(upscale_float16 v, upscale_float16 lo, upscale_float16 hi) {
    upscale_float16 raised = v < lo ? lo : v;
    return raised > hi ? hi : raised;
}

static inline __attribute__((always_inline)) upscale_float16 upscale_float_from_int16(upscale_int16 v) {
    return __builtin_convertvector(v, upscale_float16);
}

static inline __attribute__((always_inline)) upscale_int16 upscale_int_from_bytes16(upscale_bytes16 v) {
    return __builtin_convertvector(v, upscale_int16);
}

static inline __attribute__((always_inline)) upscale_float16 upscale_float_from_bytes16(upscale_bytes16 v) {
    return __builtin_convertvector(v, upscale_float16);
}

/// Values in 0 ..< 256, truncated to bytes.
static inline __attribute__((always_inline)) upscale_bytes16 upscale_bytes_from_float16(upscale_float16 v) {
    return __builtin_convertvector(__builtin_convertvector(v, upscale_int16), upscale_bytes16);
}

/// Bit i set where lane i is negative (its sign bit is set).
static inline __attribute__((always_inline)) unsigned short upscale_sign_bits16(upscale_int16 v) {
    typedef _Bool flags __attribute__((ext_vector_type(16)));
    return __builtin_bit_cast(unsigned short, __builtin_convertvector(v < 0, flags));
}

#if !defined(__AVX512F__) && defined(__AVX2__)
/// Eight lanes of `upscale_lookup16`: `vpermd` in both halves of the table (it reads an index's
/// low three bits), the half picked by the index's fourth bit.
static inline __attribute__((always_inline)) upscale_int8 upscale_lookup8(upscale_int8 low, upscale_int8 high, upscale_int8 index) {
    typedef int raw __attribute__((__vector_size__(32)));
    return (index & 8) != 0 ? (upscale_int8)__builtin_ia32_permvarsi256((raw)high, (raw)index)
                            : (upscale_int8)__builtin_ia32_permvarsi256((raw)low, (raw)index);
}
#endif

/// Lane i of `table` at lane `index[i]` (0 ... 15).
static inline __attribute__((always_inline)) upscale_int16 upscale_lookup16(upscale_int16 table, upscale_int16 index) {
#if defined(__AVX512F__)
    typedef int raw __attribute__((__vector_size__(64)));
    return (upscale_int16)__builtin_ia32_permvarsi512((raw)table, (raw)index);
#elif defined(__AVX2__)
    // Each half of the lanes on its own (the lane loop below was compiled lane by lane
    // through the stack: about 14% of a haswell build's classification).
    upscale_int8 low = __builtin_shufflevector(table, table, 0, 1, 2, 3, 4, 5, 6, 7);
    upscale_int8 high = __builtin_shufflevector(table, table, 8, 9, 10, 11, 12, 13, 14, 15);
    upscale_int8 a = upscale_lookup8(low, high, __builtin_shufflevector(index, index, 0, 1, 2, 3, 4, 5, 6, 7));
    upscale_int8 b = upscale_lookup8(low, high, __builtin_shufflevector(index, index, 8, 9, 10, 11, 12, 13, 14, 15));
    return __builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
#else
    upscale_int16 out;
    for (int i = 0; i < 16; i++) out[i] = table[index[i] & 15];
    return out;
#endif
}

/// `acc` plus, in each 32-bit lane, the products of the lane's two 16-bit halves in `a` and `b`
/// (signed), added: 32 multiply-adds. The callers' sums stay inside 32 bits (their packing
/// checks the filters' weights against the largest samples).
static inline __attribute__((always_inline)) upscale_int16 upscale_dot_pairs(upscale_int16 acc, upscale_int16 a, upscale_int16 b) {
#if defined(__AVX512VNNI__)
    typedef int raw __attribute__((__vector_size__(64)));
    return (upscale_int16)__builtin_ia32_vpdpwssd512((raw)acc, (raw)a, (raw)b);
#else
    typedef short halves __attribute__((ext_vector_type(32)));
    typedef int wide __attribute__((ext_vector_type(32)));
    wide p = __builtin_convertvector((halves)a, wide) * __builtin_convertvector((halves)b, wide);
    upscale_int16 even = __builtin_shufflevector(p, p, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    upscale_int16 odd = __builtin_shufflevector(p, p, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    return acc + even + odd;
#endif
}

/// The 2x filters' phase sums of four samples (`EdgeRefiner.pairSums`, or `foldedSums`' A and D
/// sums): sample i's 16 lanes s_i hold phase p's sum in parts in lanes 4·p ... 4·p + 3; lane
/// 4·i + p of the result is their sum. A 4x4 transpose-and-add per phase (the 32-bit lanes of s0
/// and s1, and of s2 and s3, interleaved and added, then the 64-bit halves of those), then one
/// permute to sample-major order: 9 instructions on AVX-512 for four samples, where one sample's
/// reduction alone was a dependent chain of 5 (on AVX2, where the 16 lanes are two 256-bit
/// halves, the same steps stay within each half until the last permute).
static inline __attribute__((always_inline)) upscale_int16 upscale_phase_sums4(upscale_int16 s0, upscale_int16 s1, upscale_int16 s2, upscale_int16 s3) {
    upscale_int16 u = __builtin_shufflevector(s0, s1, 0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29)
                    + __builtin_shufflevector(s0, s1, 2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11, 27, 14, 30, 15, 31);
    upscale_int16 w = __builtin_shufflevector(s2, s3, 0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29)
                    + __builtin_shufflevector(s2, s3, 2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11, 27, 14, 30, 15, 31);
    // Lane 4·p + i: phase p of sample i.
    upscale_int16 x = __builtin_shufflevector(u, w, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29)
                    + __builtin_shufflevector(u, w, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
    return __builtin_shufflevector(x, x, 0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
}

/// Four samples' four phases' doubled sums (lanes 4·i ... 4·i + 3: sample i's 2x2 block in
/// row-major order) from their folded sums [A0, A1, D0, D1] in the same lanes: phase p is A + D,
/// its half-turn partner 3 - p is A - D.
static inline __attribute__((always_inline)) upscale_int16 upscale_unfolded4(upscale_int16 sums) {
    upscale_int16 a = __builtin_shufflevector(sums, sums, 0, 1, 1, 0, 4, 5, 5, 4, 8, 9, 9, 8, 12, 13, 13, 12);
    upscale_int16 d = __builtin_shufflevector(sums, sums, 2, 3, 3, 2, 6, 7, 7, 6, 10, 11, 11, 10, 14, 15, 15, 14);
    upscale_int16 negate = {0, 0, -1, -1, 0, 0, -1, -1, 0, 0, -1, -1, 0, 0, -1, -1};
    return a + ((d ^ negate) - negate);
}

typedef float upscale_float2 __attribute__((ext_vector_type(2)));

/// Four samples' 2x blocks (lanes 4·i ... 4·i + 3: sample i's 2x2 block in row-major order):
/// the upper two values at `upper + 2·x_i`, the lower two at `lower + 2·x_i`.
static inline __attribute__((always_inline)) void upscale_store_blocks4(float *upper, float *lower, long x0, long x1, long x2, long x3, upscale_float16 v) {
    upscale_float2 p0 = __builtin_shufflevector(v, v, 0, 1), q0 = __builtin_shufflevector(v, v, 2, 3);
    upscale_float2 p1 = __builtin_shufflevector(v, v, 4, 5), q1 = __builtin_shufflevector(v, v, 6, 7);
    upscale_float2 p2 = __builtin_shufflevector(v, v, 8, 9), q2 = __builtin_shufflevector(v, v, 10, 11);
    upscale_float2 p3 = __builtin_shufflevector(v, v, 12, 13), q3 = __builtin_shufflevector(v, v, 14, 15);
    __builtin_memcpy(upper + 2 * x0, &p0, 8); __builtin_memcpy(lower + 2 * x0, &q0, 8);
    __builtin_memcpy(upper + 2 * x1, &p1, 8); __builtin_memcpy(lower + 2 * x1, &q1, 8);
    __builtin_memcpy(upper + 2 * x2, &p2, 8); __builtin_memcpy(lower + 2 * x2, &q2, 8);
    __builtin_memcpy(upper + 2 * x3, &p3, 8); __builtin_memcpy(lower + 2 * x3, &q3, 8);
}

typedef short upscale_words8 __attribute__((ext_vector_type(8)));
typedef short upscale_words16 __attribute__((ext_vector_type(16)));

/// The folded 2x filters' operand of one row pair (`EdgeRefiner.packFolded`): the 8 words at
/// `row` (a row's taps 0 ... 7) and the 8 at `mirror` in reverse order (the half-turned row's),
/// their sums a and differences d, as 16 32-bit lanes of word pairs: a, a, d, d (four pairs
/// each), against the P weights of phases 0 and 1 and the Q weights of the same.
static inline __attribute__((always_inline)) upscale_int16 upscale_folded_words(const short *row, const short *mirror) {
    upscale_words8 s, m;
    __builtin_memcpy(&s, row, sizeof(s));
    __builtin_memcpy(&m, mirror, sizeof(m));
    upscale_words8 turned = __builtin_shufflevector(m, m, 7, 6, 5, 4, 3, 2, 1, 0);
    upscale_words8 a = s + turned, d = s - turned;
    upscale_words16 aa = __builtin_shufflevector(a, a, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7);
    upscale_words16 dd = __builtin_shufflevector(d, d, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7);
    return (upscale_int16)__builtin_shufflevector(aa, dd, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
                                                  16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31);
}

/// Lanes k ... k + 15 of the 32 lanes of `lo` followed by `hi` (k = 1, 2, 14, 15): a row's
/// samples k - 16 places on from `lo`'s first, built from two aligned vectors. Unaligned
/// loads of them each cross a cache line. On AVX-512 this is one `valignd` as inline assembly:
/// written as a shuffle, LLVM merged such shuffles with the sums around them into chains of
/// permutes, slower than the unaligned loads. Elsewhere a shuffle (a loop over the lanes was
/// compiled lane by lane for AVX2: the refinement ran at a quarter of its speed).
#if defined(__AVX512F__)
#define UPSCALE_LANES_FROM(k) \
    static inline __attribute__((always_inline)) upscale_float16 upscale_lanes_from##k(upscale_float16 lo, upscale_float16 hi) { \
        upscale_float16 out; \
        __asm__("valignd $" #k ", %1, %2, %0" : "=v"(out) : "v"(lo), "v"(hi)); \
        return out; \
    }
#else
#define UPSCALE_LANES_FROM(k) \
    static inline __attribute__((always_inline)) upscale_float16 upscale_lanes_from##k(upscale_float16 lo, upscale_float16 hi) { \
        return __builtin_shufflevector(lo, hi, k, k + 1, k + 2, k + 3, k + 4, k + 5, k + 6, k + 7, k + 8, k + 9, \
                                       k + 10, k + 11, k + 12, k + 13, k + 14, k + 15); \
    }
#endif
UPSCALE_LANES_FROM(1)
UPSCALE_LANES_FROM(2)
UPSCALE_LANES_FROM(14)
UPSCALE_LANES_FROM(15)

/// 1 where `upscale_lanes_from*` are one instruction (AVX-512's `valignd`).
#if defined(__AVX512F__)
static const int upscale_lane_shifts_native = 1;
#else
static const int upscale_lane_shifts_native = 0;
#endif

/// 1 where the core is built for a processor with AVX2 (or later), whose pair products
/// (`vpmaddwd`, AVX-512 VNNI's `vpdpwssd`), word interleaves and saturating packs make the paired
/// loops pay: for AVX2 alone LLVM lowers the portable forms below to those instructions (a
/// `-target-cpu haswell` build's Lanczos 1.54x → 1.97x swscale at 720p → 1440p). Without AVX2
/// the plain loops, vectorized by LLVM, run.
#if defined(__AVX2__)
static const int upscale_pairs_native = 1;
#else
static const int upscale_pairs_native = 0;
#endif

/// The 16-bit words of `a` and `b` (32 each) interleaved in pairs, word i of `a` beside word i
/// of `b`: `lo` takes words 0-3 of each 128-bit lane, `hi` words 4-7 (AVX-512's `vpunpcklwd` and
/// `vpunpckhwd`). Two rows so paired feed `upscale_dot_pairs` two filter taps per product.
typedef short upscale_words32 __attribute__((ext_vector_type(32)));
static inline __attribute__((always_inline)) upscale_int16 upscale_pair_words_lo(upscale_int16 a, upscale_int16 b) {
    return (upscale_int16)__builtin_shufflevector((upscale_words32)a, (upscale_words32)b,
        0, 32, 1, 33, 2, 34, 3, 35, 8, 40, 9, 41, 10, 42, 11, 43,
        16, 48, 17, 49, 18, 50, 19, 51, 24, 56, 25, 57, 26, 58, 27, 59);
}

static inline __attribute__((always_inline)) upscale_int16 upscale_pair_words_hi(upscale_int16 a, upscale_int16 b) {
    return (upscale_int16)__builtin_shufflevector((upscale_words32)a, (upscale_words32)b,
        4, 36, 5, 37, 6, 38, 7, 39, 12, 44, 13, 45, 14, 46, 15, 47,
        20, 52, 21, 53, 22, 54, 23, 55, 28, 60, 29, 61, 30, 62, 31, 63);
}

typedef unsigned char upscale_bytes32 __attribute__((ext_vector_type(32)));
typedef int upscale_int32x32 __attribute__((ext_vector_type(32)));

/// The 32 bytes at `p` as 16-bit words (zero-extended), in the lanes' halves as
/// `upscale_pair_words_lo` and `_hi` take them: `vpmovzxbw` where the core is built for AVX2.
static inline __attribute__((always_inline)) upscale_int16 upscale_words_at(const unsigned char *p) {
    upscale_bytes32 bytes;
    __builtin_memcpy(&bytes, p, sizeof(bytes));
    return (upscale_int16)__builtin_convertvector(bytes, upscale_words32);
}

/// `TemporalHold`'s new held values of 32 8-bit samples for whole levels lo and hi = lo +
/// 2^shift (1 ≤ shift ≤ 6), as 16-bit words: with d = frame - held and a = |d|, held where
/// a ≤ lo, frame where a ≥ hi, and in between frame - sign(d)·lo·(hi - a)/2^shift rounded half to
/// even. Swift's SIMD32<Int16> operators ran lane by lane here.
static inline __attribute__((always_inline)) upscale_int16 upscale_hold_words(upscale_int16 heldWords, upscale_int16 frameWords, short lo, short shift) {
    upscale_words32 held = (upscale_words32)heldWords, frame = (upscale_words32)frameWords;
    short hi = lo + (short)(1 << shift), half = (short)(1 << (shift - 1)), low = (short)((1 << shift) - 1);
    upscale_words32 d = frame - held;
    upscale_words32 negative = d >> 15;
    upscale_words32 a = (d ^ negative) - negative;
    upscale_words32 kept = lo * (hi - a);
    upscale_words32 n = (frame << shift) - ((kept ^ negative) - negative);
    upscale_words32 q = n >> shift, r = n & low;
    upscale_words32 up = ((half - r) >> 15) | ((((r ^ half) - 1) >> 15) & (0 - (q & 1)));
    upscale_words32 between = q - up;
    upscale_words32 keep = ~((lo - a) >> 15), take = ~((a - hi) >> 15);
    return (upscale_int16)((held & keep) | (frame & take) | (between & ~(keep | take)));
}

/// 32 16-bit words with values in 0 ... 255 as bytes, in order (stored as 8 ints).
static inline __attribute__((always_inline)) upscale_int8 upscale_bytes_from_words(upscale_int16 words) {
    return (upscale_int8)__builtin_convertvector((upscale_words32)words, upscale_bytes32);
}

/// Lanes 0 ... 15 of the 32 results of `upscale_pair_words_lo` and `_hi` products in order
/// (lane l of `lo` holds word 8·(l/4) + l%4, of `hi` the four after it): outputs 0 ... 15.
static inline __attribute__((always_inline)) upscale_int16 upscale_pairs_in_order_first(upscale_int16 lo, upscale_int16 hi) {
    return __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
}

/// Outputs 16 ... 31 of the same.
static inline __attribute__((always_inline)) upscale_int16 upscale_pairs_in_order_second(upscale_int16 lo, upscale_int16 hi) {
    return __builtin_shufflevector(lo, hi, 8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
}
/// The 32 sums of `upscale_pair_words_lo` and `_hi` products back in order (lane l of `lo`
/// holds word 8·(l/4) + l%4, of `hi` the four after it), each clamped to 0 ... 255 as a byte.
/// Lanes must lie within ±2^15 (the callers' sums shifted down): on AVX-512 the clamp is a
/// signed pack to 16 bits, a maximum with 0 and an unsigned saturating narrow.
static inline __attribute__((always_inline)) upscale_int8 upscale_bytes_from_pairs(upscale_int16 lo, upscale_int16 hi) {
#if defined(__AVX512BW__)
    typedef int raw __attribute__((__vector_size__(64)));
    typedef short words __attribute__((__vector_size__(64)));
    typedef char narrow __attribute__((__vector_size__(32)));
    words packed = (words)__builtin_ia32_packssdw512((raw)lo, (raw)hi);
    words zero = {0};
    packed = __builtin_elementwise_max(packed, zero);
    return (upscale_int8)__builtin_ia32_pmovuswb512_mask((words)packed, (narrow){0}, (unsigned)-1);
#else
    upscale_int32x32 ordered = __builtin_shufflevector(lo, hi,
        0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23,
        8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
    upscale_int32x32 zero = {0}, top = zero + 255;
    return (upscale_int8)__builtin_convertvector(__builtin_elementwise_min(__builtin_elementwise_max(ordered, zero), top), upscale_bytes32);
#endif
}

#endif
