import CVector

/// Temporal stabilization of the refinement's input for video.
///
/// The refinement sharpens edges, and with them the small changes a static background goes
/// through from frame to frame (sensor noise, the codec re-coding a block). Averaging frames
/// does not help with the second kind: a step of δ split over two frames still adds up to δ.
/// So the refinement reads a *held* copy of the luma instead: a sample keeps its held value
/// while the frame stays within `stillness.0` of it, takes the frame's value once it moves
/// `stillness.1` or more away, and lags by less and less in between. Where the picture moves
/// the held copy is the frame; on a static background the refined edges stay put and only
/// the Lanczos share of the result follows the noise. The held copy never drifts more than
/// `stillness.0` from the frame.
public struct TemporalHold: Sendable {
    /// 8-bit levels (deeper samples scale them by 2^(bits-8)).
    public let stillness: (Float, Float)

    public init(stillness: (Float, Float) = (2, 6)) {
        precondition(stillness.0 >= 0 && stillness.1 > stillness.0, "stillness needs 0 ≤ hold < replace")
        self.stillness = stillness
    }

    /// Moves rows `rows` of `held` toward `current` (both the same size).
    public func update(_ held: Plane, toward current: Plane, rows: Range<Int>) {
        let slope = 1 / (stillness.1 - stillness.0)
        let exact = wholeLevels
        for y in rows {
            var done = 0
            if let exact { done = Self.updateRowWhole(held.row(y), toward: current.row(y), count: held.width, lo: exact.lo, shift: exact.shift) }
            Self.updateRow(held.row(y) + done, toward: current.row(y) + done, count: held.width - done, lo: stillness.0, slope: slope)
        }
    }

    /// The same for 10/12/16-bit planes, with the thresholds scaled to their depth.
    public func update(_ held: Plane16, toward current: Plane16, rows: Range<Int>) {
        let unit = Float(1 << (held.bitDepth - 8))
        let lo = stillness.0 * unit, slope = 1 / ((stillness.1 - stillness.0) * unit)
        for y in rows { Self.updateRow(held.row(y), toward: current.row(y), count: held.width, lo: lo, slope: slope) }
    }

    /// The levels as `updateRowWhole` takes them, where they are whole numbers a power of two
    /// (2 to 64) apart, as the default 2 and 6 are: then every step of `lag` is exact in
    /// Float, and so reproducible in integers.
    var wholeLevels: (lo: Int16, shift: Int16)? {
        let (lo, hi) = stillness
        guard lo == lo.rounded(), hi == hi.rounded(), lo <= 255, (2...64).contains(hi - lo) else { return nil }
        let gap = Int(hi - lo)
        guard gap.nonzeroBitCount == 1 else { return nil }
        return (Int16(lo), Int16(gap.trailingZeroBitCount))
    }

    /// `updateRow` for 8-bit rows with whole levels lo and hi = lo + 2^shift, in 16-bit integer
    /// lanes (CVector's `upscale_hold_words`, 32 samples a step, where the Float form widened each
    /// sample to 32 bits): with d = frame - held and a = |d|, the held value stays for a ≤ lo, the frame's is taken for
    /// a ≥ hi, and in between it is frame - sign(d)·lo·(hi - a)/2^shift rounded half to even,
    /// as `exactInt` rounds the Float form. The same values (checked for every pair of samples
    /// by the tests). Returns how many samples it did (a multiple of 32).
    static func updateRowWhole(_ h: UnsafeMutablePointer<UInt8>, toward c: UnsafePointer<UInt8>, count: Int, lo: Int16, shift: Int16) -> Int {
        var x = 0
        while x + 32 <= count {
            let out = upscale_hold_words(upscale_words_at(h + x), upscale_words_at(c + x), lo, shift)
            UnsafeMutableRawPointer(h + x).storeBytes(of: upscale_bytes_from_words(out), as: SIMD8<Int32>.self)
            x += 32
        }
        return x
    }

    // The standard library's vector widening and narrowing (UInt8 ↔ UInt32 lanes) are not
    // inlined here: calls returning through four xmm registers, 11 ms of a 4K frame. The
    // update is per sample, so lane order does not matter: 64 bytes are read as 16 UInt32
    // lanes and each of the four byte positions is processed as its own vector.
    static func updateRow(_ h: UnsafeMutablePointer<UInt8>, toward c: UnsafePointer<UInt8>, count: Int, lo: Float, slope: Float) {
        var x = 0
        while x + 64 <= count {
            let held = UnsafeRawPointer(h + x).loadUnaligned(as: SIMD16<UInt32>.self)
            let frame = UnsafeRawPointer(c + x).loadUnaligned(as: SIMD16<UInt32>.self)
            let byte = SIMD16<UInt32>(repeating: 0xFF)
            let out = step(frame & byte, held & byte, lo: lo, slope: slope)
                | step(frame &>> 8 & byte, held &>> 8 & byte, lo: lo, slope: slope) &<< 8
                | step(frame &>> 16 & byte, held &>> 16 & byte, lo: lo, slope: slope) &<< 16
                | step(frame &>> 24, held &>> 24, lo: lo, slope: slope) &<< 24
            UnsafeMutableRawPointer(h + x).storeBytes(of: out, as: SIMD16<UInt32>.self)
            x += 64
        }
        updateTail(h, toward: c, from: x, count: count, lo: lo, slope: slope)
    }

    static func updateRow(_ h: UnsafeMutablePointer<UInt16>, toward c: UnsafePointer<UInt16>, count: Int, lo: Float, slope: Float) {
        var x = 0
        while x + 32 <= count {
            let held = UnsafeRawPointer(h + x).loadUnaligned(as: SIMD16<UInt32>.self)
            let frame = UnsafeRawPointer(c + x).loadUnaligned(as: SIMD16<UInt32>.self)
            let word = SIMD16<UInt32>(repeating: 0xFFFF)
            let out = step(frame & word, held & word, lo: lo, slope: slope) | step(frame &>> 16, held &>> 16, lo: lo, slope: slope) &<< 16
            UnsafeMutableRawPointer(h + x).storeBytes(of: out, as: SIMD16<UInt32>.self)
            x += 32
        }
        updateTail(h, toward: c, from: x, count: count, lo: lo, slope: slope)
    }

    /// Samples `start..<count` one at a time, with the vector loop's arithmetic.
    static func updateTail<Sample: FixedWidthInteger & UnsignedInteger>(
        _ h: UnsafeMutablePointer<Sample>, toward c: UnsafePointer<Sample>, from start: Int, count: Int, lo: Float, slope: Float
    ) {
        for x in start..<max(start, count) {
            let f = Float(c[x])
            h[x] = Sample(round(f - lag(f - Float(h[x]), lo: lo, slope: slope)))
        }
    }

    /// The new held values of 16 samples given as UInt32 lanes (frame, held).
    @inline(__always)
    static func step(_ frame: SIMD16<UInt32>, _ held: SIMD16<UInt32>, lo: Float, slope: Float) -> SIMD16<UInt32> {
        let f = float(frame)
        return unsafeBitCast(exactInt(f - lag(f - float(held), lo: lo, slope: slope)), to: SIMD16<UInt32>.self)
    }

    /// How far the held sample stays behind the frame, given their difference d = frame - held:
    /// all of d up to `lo`; above it `lo`, shrinking linearly to nothing at `lo + 1/slope`.
    /// So the held value never lags by more than `lo`. Branch-free (`positive` is max(v, 0)).
    @inline(__always)
    static func lag(_ d: SIMD16<Float>, lo: Float, slope: Float) -> SIMD16<Float> {
        let bits = unsafeBitCast(d, to: SIMD16<UInt32>.self)
        let size = unsafeBitCast(bits & 0x7FFF_FFFF, to: SIMD16<Float>.self)
        let over = size - lo
        let follow = positive(over * slope)
        let kept = (size - positive(over)) * (1 - (follow - positive(follow - 1)))
        return unsafeBitCast(unsafeBitCast(kept, to: SIMD16<UInt32>.self) | (bits & 0x8000_0000), to: SIMD16<Float>.self)
    }

    @inline(__always)
    static func lag(_ d: Float, lo: Float, slope: Float) -> Float {
        let size = abs(d)
        let kept = min(size, lo) * (1 - min(max((size - lo) * slope, 0), 1))
        return d < 0 ? -kept : kept
    }

    /// The scalar tail's rounding, the same as `exactInt`'s.
    @inline(__always)
    private static func round(_ v: Float) -> Float {
        v.rounded(.toNearestOrEven)
    }
}
