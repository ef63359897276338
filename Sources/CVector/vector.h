// Lane-wise vector operations for the core's hot loops, as clang's vector builtins. Swift's
// SIMD squareRoot and Int32 → Float conversion run lane by lane on this toolchain (a scalar
// instruction, or a libm call, per lane); through these the compiler emits one vector
// instruction. Each has a portable form that clang lowers for any target; the pair dot product
// uses AVX-512 VNNI's instruction where the core is built for a processor that has it.
#ifndef UPSCALE_VECTOR_H
#define UPSCALE_VECTOR_H

typedef float upscale_float16 __attribute__((ext_vector_type(16)));
typedef float upscale_float4 __attribute__((ext_vector_type(4)));
typedef int upscale_int4 __attribute__((ext_vector_type(4)));
typedef int upscale_int16 __attribute__((ext_vector_type(16)));
typedef unsigned char upscale_bytes16 __attribute__((ext_vector_type(16)));

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

static inline __attribute__((always_inline)) upscale_float4 upscale_float_from_int4(upscale_int4 v) {
    return __builtin_convertvector(v, upscale_float4);
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

/// Lane i of `table` at lane `index[i]` (0 ... 15).
static inline __attribute__((always_inline)) upscale_int16 upscale_lookup16(upscale_int16 table, upscale_int16 index) {
#if defined(__AVX512F__)
    typedef int raw __attribute__((__vector_size__(64)));
    return (upscale_int16)__builtin_ia32_permvarsi512((raw)table, (raw)index);
#else
    upscale_int16 out;
    for (int i = 0; i < 16; i++) out[i] = table[index[i] & 15];
    return out;
#endif
}

/// `acc` plus, in each 32-bit lane, the products of the lane's two 16-bit halves in `a` and `b`
/// (signed), added: 32 multiply-adds. The callers' sums stay far inside 32 bits.
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

/// Lanes k ... k + 15 of the 32 lanes of `lo` followed by `hi` (k = 1, 2, 14, 15): a row's
/// samples k - 16 places on from `lo`'s first, built from two aligned vectors. Unaligned
/// loads of them each cross a cache line. On AVX-512 this is one `valignd` as inline assembly:
/// written as a shuffle, LLVM merged such shuffles with the sums around them into chains of
/// permutes, slower than the unaligned loads.
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
        upscale_float16 out; \
        for (int i = 0; i < 16; i++) out[i] = i + k < 16 ? lo[i + k] : hi[i + k - 16]; \
        return out; \
    }
#endif
UPSCALE_LANES_FROM(1)
UPSCALE_LANES_FROM(2)
UPSCALE_LANES_FROM(14)
UPSCALE_LANES_FROM(15)

#endif
