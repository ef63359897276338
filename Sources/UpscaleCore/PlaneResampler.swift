/// Separable resampling of one plane: a horizontal pass of each needed input row
/// into 16-bit intermediates (8-bit samples scaled by 64), then a vertical pass
/// straight into the output plane. Work is split into bands of output rows; a band
/// filters only the input rows it reads, so no full-size intermediate plane exists.
public struct PlaneResampler: Sendable {
    public let horizontal: FilterBank
    public let vertical: FilterBank
    public let bandHeight: Int
    /// Int16 elements of scratch one band needs.
    public let scratchCount: Int
    let polyphase: FilterBank.Polyphase?

    public init(horizontal: FilterBank, vertical: FilterBank, bandHeight: Int) {
        self.horizontal = horizontal
        self.vertical = vertical
        self.bandHeight = max(1, bandHeight)
        var rows = 0
        var y = 0
        while y < vertical.outputSize {
            let band = y..<min(y + self.bandHeight, vertical.outputSize)
            rows = max(rows, vertical.inputSpan(of: band).count)
            y = band.upperBound
        }
        scratchCount = rows * horizontal.outputSize
        polyphase = horizontal.polyphase
    }

    public var bandCount: Int { (vertical.outputSize + bandHeight - 1) / bandHeight }

    /// The output rows of band `band`.
    public func rows(band: Int) -> Range<Int> {
        (band * bandHeight)..<min((band + 1) * bandHeight, vertical.outputSize)
    }

    /// Resamples output rows of band `band` of `destination` from `source`.
    /// `scratch` must hold `scratchCount` elements and belong to the calling worker.
    public func resample(band: Int, from source: Plane, into destination: Plane, scratch: UnsafeMutablePointer<Int16>) {
        let rows = self.rows(band: band)
        let span = vertical.inputSpan(of: rows)
        let width = horizontal.outputSize
        horizontal.starts.withUnsafeBufferPointer { starts in
            horizontal.coefficients.withUnsafeBufferPointer { coefficients in
                let taps = horizontal.taps
                for y in span {
                    let out = scratch + (y - span.lowerBound) * width
                    let row = source.row(y)
                    if let polyphase {
                        // Vector blocks over the interior; the clamped edges and the tail go through the general path.
                        let done = Self.filterRowPolyphase(row, into: out, polyphase: polyphase, taps: taps)
                        let factor = polyphase.factor
                        Self.filterRange(row, into: out, range: 0..<(factor * polyphase.interior.lowerBound),
                                         starts: starts.baseAddress!, coefficients: coefficients.baseAddress!, taps: taps)
                        Self.filterRange(row, into: out, range: (factor * done)..<width,
                                         starts: starts.baseAddress!, coefficients: coefficients.baseAddress!, taps: taps)
                    } else {
                        Self.filterRange(row, into: out, range: 0..<width,
                                         starts: starts.baseAddress!, coefficients: coefficients.baseAddress!, taps: taps)
                    }
                }
            }
        }
        vertical.starts.withUnsafeBufferPointer { starts in
            vertical.coefficients.withUnsafeBufferPointer { coefficients in
                let taps = vertical.taps
                for y in rows {
                    let first = scratch + (Int(starts[y]) - span.lowerBound) * width
                    Self.combineRows(
                        first, rowStride: width, taps: taps, weights: coefficients.baseAddress! + y * taps,
                        into: destination.row(y), count: width)
                }
            }
        }
    }

    /// The 16-bit counterpart of `resample`: the same filter banks, with weights as Float
    /// (exact: Q14 values divided by 16384), Float intermediates, and the result rounded and
    /// clamped to `0...maxValue`.
    public func resample16(band: Int, from source: Plane16, into destination: Plane16, scratch: UnsafeMutablePointer<Float>) {
        let rows = self.rows(band: band)
        let span = vertical.inputSpan(of: rows)
        let width = horizontal.outputSize
        let scale: Float = 1 / Float(FilterBank.one)
        horizontal.starts.withUnsafeBufferPointer { starts in
            horizontal.coefficients.withUnsafeBufferPointer { coefficients in
                let taps = horizontal.taps
                for y in span {
                    let out = scratch + (y - span.lowerBound) * width
                    let row = source.row(y)
                    var done = 0
                    if let polyphase, polyphase.factor == 2 {
                        done = Self.filterRowPolyphase16(row, into: out, polyphase: polyphase, taps: taps, scale: scale)
                        Self.filterRange16(row, into: out, range: 0..<(2 * polyphase.interior.lowerBound), starts: starts.baseAddress!,
                                           coefficients: coefficients.baseAddress!, fixedTaps: taps, scale: scale)
                    }
                    let rest = (2 * done)..<width
                    switch taps {
                    case 6: Self.filterRange16(row, into: out, range: rest, starts: starts.baseAddress!, coefficients: coefficients.baseAddress!, fixedTaps: 6, scale: scale)
                    case 4: Self.filterRange16(row, into: out, range: rest, starts: starts.baseAddress!, coefficients: coefficients.baseAddress!, fixedTaps: 4, scale: scale)
                    default: Self.filterRange16(row, into: out, range: rest, starts: starts.baseAddress!, coefficients: coefficients.baseAddress!, fixedTaps: taps, scale: scale)
                    }
                }
            }
        }
        let maxValue = Float(destination.maxValue)
        vertical.starts.withUnsafeBufferPointer { starts in
            vertical.coefficients.withUnsafeBufferPointer { coefficients in
                let taps = vertical.taps
                for y in rows {
                    let first = scratch + (Int(starts[y]) - span.lowerBound) * width
                    let weights = coefficients.baseAddress! + y * taps
                    let out = destination.row(y)
                    var x = 0
                    while x + 16 <= width {
                        var acc = SIMD16<Float>()
                        for k in 0..<taps {
                            acc += UnsafeRawPointer(first + k * width + x).loadUnaligned(as: SIMD16<Float>.self)
                                * SIMD16<Float>(repeating: Float(weights[k]) * scale)
                        }
                        // Round with the 1.5·2^23 trick and clamp in integer lanes (the generic
                        // rounding and clamping calls are slow; see shared SIMD notes).
                        let clamped = pointwiseMin(pointwiseMax(acc, SIMD16(repeating: 0)), SIMD16(repeating: maxValue))
                        let bits = unsafeBitCast(clamped + 12_582_912.0, to: SIMD16<Int32>.self) &- 0x4B40_0000
                        UnsafeMutableRawPointer(out + x).storeBytes(of: SIMD16<UInt16>(truncatingIfNeeded: bits), as: SIMD16<UInt16>.self)
                        x += 16
                    }
                    while x < width {
                        var acc: Float = 0
                        for k in 0..<taps { acc += first[k * width + x] * (Float(weights[k]) * scale) }
                        out[x] = UInt16(min(max(acc.rounded(), 0), maxValue))
                        x += 1
                    }
                }
            }
        }
    }

    @inline(__always)
    static func filterRange16(
        _ row: UnsafePointer<UInt16>, into out: UnsafeMutablePointer<Float>, range: Range<Int>,
        starts: UnsafePointer<Int32>, coefficients: UnsafePointer<Int16>, fixedTaps taps: Int, scale: Float
    ) {
        for x in range {
            let s = row + Int(starts[x])
            let c = coefficients + x * taps
            var acc: Int64 = 0
            for k in 0..<taps { acc &+= Int64(c[k]) &* Int64(s[k]) }
            out[x] = Float(acc) * scale
        }
    }

    /// 2x polyphase horizontal pass for 16-bit rows in Float, 16 input positions at a time;
    /// returns the first input position it did not cover. Same scheme as the 8-bit pass.
    @inline(__always)
    static func filterRowPolyphase16(
        _ source: UnsafePointer<UInt16>, into output: UnsafeMutablePointer<Float>,
        polyphase: FilterBank.Polyphase, taps: Int, scale: Float
    ) -> Int {
        var i = polyphase.interior.lowerBound
        let end = polyphase.interior.upperBound
        polyphase.coefficients.withUnsafeBufferPointer { weights in
            let even = polyphase.offsets[0], odd = polyphase.offsets[1]
            while i + 16 <= end {
                let e = phase16(source + i + even, weights.baseAddress!, taps: taps) * scale
                let o = phase16(source + i + odd, weights.baseAddress! + taps, taps: taps) * scale
                // Interleave through 64-bit lanes: the even value lands first (little-endian).
                let pairs = SIMD16<UInt64>(truncatingIfNeeded: unsafeBitCast(e, to: SIMD16<UInt32>.self))
                    | SIMD16<UInt64>(truncatingIfNeeded: unsafeBitCast(o, to: SIMD16<UInt32>.self)) &<< 32
                UnsafeMutableRawPointer(output + 2 * i).storeBytes(of: pairs, as: SIMD16<UInt64>.self)
                i += 16
            }
        }
        return i
    }

    /// Σ weight[k]·source[l + k] for 16 consecutive positions, in Float (samples converted
    /// exactly with the 2^23 exponent trick, which avoids the slow generic conversion).
    @inline(__always)
    static func phase16(_ source: UnsafePointer<UInt16>, _ weights: UnsafePointer<Int16>, taps: Int) -> SIMD16<Float> {
        var acc = SIMD16<Float>()
        for k in 0..<taps {
            let v = UnsafeRawPointer(source + k).loadUnaligned(as: SIMD16<UInt16>.self)
            let f = unsafeBitCast(SIMD16<UInt32>(truncatingIfNeeded: v) | 0x4B00_0000, to: SIMD16<Float>.self) - 8_388_608
            acc += f * SIMD16<Float>(repeating: Float(weights[k]))
        }
        return acc
    }

    /// Horizontal pass for outputs `range`: Q14 weights times 8-bit samples, kept as sample·64 in Int16.
    @inline(__always)
    static func filterRange(
        _ source: UnsafePointer<UInt8>, into output: UnsafeMutablePointer<Int16>, range: Range<Int>,
        starts: UnsafePointer<Int32>, coefficients: UnsafePointer<Int16>, taps: Int
    ) {
        // Fixed tap counts get their own unrolled loops.
        switch taps {
        case 6: filterRange(source, into: output, range: range, starts: starts, coefficients: coefficients, fixedTaps: 6)
        case 4: filterRange(source, into: output, range: range, starts: starts, coefficients: coefficients, fixedTaps: 4)
        case 7: filterRange(source, into: output, range: range, starts: starts, coefficients: coefficients, fixedTaps: 7)
        default: filterRange(source, into: output, range: range, starts: starts, coefficients: coefficients, fixedTaps: taps)
        }
    }

    @inline(__always)
    static func filterRange(
        _ source: UnsafePointer<UInt8>, into output: UnsafeMutablePointer<Int16>, range: Range<Int>,
        starts: UnsafePointer<Int32>, coefficients: UnsafePointer<Int16>, fixedTaps taps: Int
    ) {
        for x in range {
            let s = source + Int(starts[x])
            let c = coefficients + x * taps
            var acc: Int32 = 1 << 7
            for k in 0..<taps {
                acc &+= Int32(c[k]) &* Int32(s[k])
            }
            output[x] = Int16(truncatingIfNeeded: acc &>> 8)
        }
    }

    /// Horizontal pass over the polyphase interior, 16 input positions at a time: each
    /// phase is a plain convolution of contiguous input, so every tap is one vector load
    /// and one multiply-add; the phases are then interleaved into output order.
    /// Returns the first input position it did not cover.
    @inline(__always)
    static func filterRowPolyphase(
        _ source: UnsafePointer<UInt8>, into output: UnsafeMutablePointer<Int16>,
        polyphase: FilterBank.Polyphase, taps: Int
    ) -> Int {
        let factor = polyphase.factor
        var i = polyphase.interior.lowerBound
        let end = polyphase.interior.upperBound
        polyphase.coefficients.withUnsafeBufferPointer { weights in
            polyphase.offsets.withUnsafeBufferPointer { offsets in
                while i + 16 <= end {
                    switch factor {
                    case 2:
                        let even = phase(source + i + offsets[0], weights.baseAddress!, taps: taps)
                        let odd = phase(source + i + offsets[1], weights.baseAddress! + taps, taps: taps)
                        // Little-endian: the low half of each 32-bit lane lands first.
                        let pairs = SIMD16<UInt32>(truncatingIfNeeded: even) & 0xFFFF | SIMD16<UInt32>(truncatingIfNeeded: odd) &<< 16
                        UnsafeMutableRawPointer(output + 2 * i).storeBytes(of: pairs, as: SIMD16<UInt32>.self)
                    case 4:
                        let p0 = SIMD16<UInt64>(truncatingIfNeeded: phase(source + i + offsets[0], weights.baseAddress!, taps: taps)) & 0xFFFF
                        let p1 = SIMD16<UInt64>(truncatingIfNeeded: phase(source + i + offsets[1], weights.baseAddress! + taps, taps: taps)) & 0xFFFF
                        let p2 = SIMD16<UInt64>(truncatingIfNeeded: phase(source + i + offsets[2], weights.baseAddress! + 2 * taps, taps: taps)) & 0xFFFF
                        let p3 = SIMD16<UInt64>(truncatingIfNeeded: phase(source + i + offsets[3], weights.baseAddress! + 3 * taps, taps: taps)) & 0xFFFF
                        let quads = p0 | p1 &<< 16 | p2 &<< 32 | p3 &<< 48
                        UnsafeMutableRawPointer(output + 4 * i).storeBytes(of: quads, as: SIMD16<UInt64>.self)
                    default:
                        for r in 0..<factor {
                            let v = SIMD16<Int16>(truncatingIfNeeded: phase(source + i + offsets[r], weights.baseAddress! + r * taps, taps: taps))
                            let out = output + factor * i + r
                            for l in 0..<16 { out[l * factor] = v[l] }
                        }
                    }
                    i += 16
                }
            }
        }
        return i
    }

    /// One phase for 16 consecutive input positions: Σ weight[k]·source[l + k], rounded, >> 8.
    @inline(__always)
    static func phase(_ source: UnsafePointer<UInt8>, _ weights: UnsafePointer<Int16>, taps: Int) -> SIMD16<Int32> {
        var acc = SIMD16<Int32>(repeating: 1 << 7)
        for k in 0..<taps {
            let v = UnsafeRawPointer(source + k).loadUnaligned(as: SIMD16<UInt8>.self)
            acc &+= SIMD16<Int32>(truncatingIfNeeded: v) &* SIMD16<Int32>(repeating: Int32(weights[k]))
        }
        return acc &>> 8
    }

    /// Vertical pass: `taps` consecutive intermediate rows weighted into one 8-bit row.
    @inline(__always)
    static func combineRows(
        _ first: UnsafePointer<Int16>, rowStride: Int, taps: Int, weights: UnsafePointer<Int16>,
        into output: UnsafeMutablePointer<UInt8>, count: Int
    ) {
        switch taps {
        case 6: combineRows(first, rowStride: rowStride, fixedTaps: 6, weights: weights, into: output, count: count)
        case 4: combineRows(first, rowStride: rowStride, fixedTaps: 4, weights: weights, into: output, count: count)
        default: combineRows(first, rowStride: rowStride, fixedTaps: taps, weights: weights, into: output, count: count)
        }
    }

    /// 16 outputs per step in two SIMD8<Int32> accumulators.
    @inline(__always)
    static func combineRows(
        _ first: UnsafePointer<Int16>, rowStride: Int, fixedTaps taps: Int, weights: UnsafePointer<Int16>,
        into output: UnsafeMutablePointer<UInt8>, count: Int
    ) {
        let rounding: Int32 = 1 << 19
        var x = 0
        while x + 16 <= count {
            var lo = SIMD8<Int32>(repeating: rounding)
            var hi = SIMD8<Int32>(repeating: rounding)
            for k in 0..<taps {
                let v = UnsafeRawPointer(first + k * rowStride + x).loadUnaligned(as: SIMD16<Int16>.self)
                let w = SIMD8<Int32>(repeating: Int32(weights[k]))
                lo &+= SIMD8<Int32>(truncatingIfNeeded: v.lowHalf) &* w
                hi &+= SIMD8<Int32>(truncatingIfNeeded: v.highHalf) &* w
            }
            let zero = SIMD8<Int32>(repeating: 0), max = SIMD8<Int32>(repeating: 255)
            lo = pointwiseMin(pointwiseMax(lo &>> 20, zero), max)
            hi = pointwiseMin(pointwiseMax(hi &>> 20, zero), max)
            let packed = SIMD16<UInt8>(
                lowHalf: SIMD8<UInt8>(truncatingIfNeeded: lo), highHalf: SIMD8<UInt8>(truncatingIfNeeded: hi))
            UnsafeMutableRawPointer(output + x).storeBytes(of: packed, as: SIMD16<UInt8>.self)
            x += 16
        }
        while x < count {
            var acc = rounding
            for k in 0..<taps {
                acc &+= Int32(weights[k]) &* Int32(first[k * rowStride + x])
            }
            output[x] = UInt8(clamping: acc &>> 20)
            x += 1
        }
    }
}
