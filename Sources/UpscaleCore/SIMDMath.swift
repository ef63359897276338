import CVector

/// Vector helpers for the core's hot loops, written with bit operations or CVector's builtins because the
/// standard library's versions are not inlined on this toolchain: a call returns a
/// SIMD16 through four xmm registers and keeps the code around it 128 bits wide
/// (pointwiseMin/Max, Float ↔ integer conversions, lane narrowing and widening).

/// Lane minimum and maximum, one instruction each (CVector): the standard library's
/// pointwiseMin/Max are not inlined here, and a call splits the vectors into xmm registers
/// (and keeps the code around it 4 lanes wide); the bit-trick form cost 2-3 instructions.
@inline(__always)
func minimum(_ a: SIMD16<Int32>, _ b: SIMD16<Int32>) -> SIMD16<Int32> {
    upscale_min16(a, b)
}

@inline(__always)
func maximum(_ a: SIMD16<Int32>, _ b: SIMD16<Int32>) -> SIMD16<Int32> {
    upscale_max16(a, b)
}

/// max(v, 0), one instruction (CVector). Where v < 0 this is +0 (the product form it replaces
/// gave -0); every caller adds, subtracts, multiplies or takes the root of it, which treats
/// both zeros alike.
@inline(__always)
func positive(_ v: SIMD16<Float>) -> SIMD16<Float> {
    upscale_maxf16(v, SIMD16<Float>())
}

/// -1 where v's sign bit is set, else 0, as an integer lane mask (one shift).
@inline(__always)
func signSet(_ v: SIMD16<Float>) -> SIMD16<Int32> {
    unsafeBitCast(v, to: SIMD16<Int32>.self) &>> 31
}

/// -1 where v's sign bit is clear (v ≥ 0, +0 included), else 0.
@inline(__always)
func signClear(_ v: SIMD16<Float>) -> SIMD16<Int32> {
    ~signSet(v)
}

/// Values in -2^22..<2^22 rounded to the nearest integer (ties to even) as Int32 (the 1.5·2^23 trick).
@inline(__always)
func exactInt(_ v: SIMD16<Float>) -> SIMD16<Int32> {
    unsafeBitCast(v + 12_582_912, to: SIMD16<Int32>.self) &- 0x4B40_0000
}

@inline(__always)
func exactInt(_ v: SIMD4<Float>) -> SIMD4<Int32> {
    unsafeBitCast(v + 12_582_912, to: SIMD4<Int32>.self) &- 0x4B40_0000
}

/// Non-negative 16-bit lanes (below 2^23) as Float, the 2^23 exponent trick.
@inline(__always)
func float(_ v: SIMD16<UInt32>) -> SIMD16<Float> {
    unsafeBitCast(v | 0x4B00_0000, to: SIMD16<Float>.self) - 8_388_608
}

@inline(__always)
func float(_ v: SIMD4<UInt32>) -> SIMD4<Float> {
    unsafeBitCast(v | 0x4B00_0000, to: SIMD4<Float>.self) - 8_388_608
}
