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
    }

    public var bandCount: Int { (vertical.outputSize + bandHeight - 1) / bandHeight }

    /// Resamples output rows of band `band` of `destination` from `source`.
    /// `scratch` must hold `scratchCount` elements and belong to the calling worker.
    public func resample(band: Int, from source: Plane, into destination: Plane, scratch: UnsafeMutablePointer<Int16>) {
        let rows = (band * bandHeight)..<min((band + 1) * bandHeight, vertical.outputSize)
        let span = vertical.inputSpan(of: rows)
        let width = horizontal.outputSize
        horizontal.starts.withUnsafeBufferPointer { starts in
            horizontal.coefficients.withUnsafeBufferPointer { coefficients in
                for y in span {
                    Self.filterRow(
                        source.row(y), into: scratch + (y - span.lowerBound) * width, count: width,
                        starts: starts.baseAddress!, coefficients: coefficients.baseAddress!, taps: horizontal.taps)
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

    /// Horizontal pass: Q14 weights times 8-bit samples, kept as sample·64 in Int16.
    @inline(__always)
    static func filterRow(
        _ source: UnsafePointer<UInt8>, into output: UnsafeMutablePointer<Int16>, count: Int,
        starts: UnsafePointer<Int32>, coefficients: UnsafePointer<Int16>, taps: Int
    ) {
        var c = coefficients
        for x in 0..<count {
            let s = source + Int(starts[x])
            var acc: Int32 = 1 << 7
            for k in 0..<taps {
                acc &+= Int32(c[k]) &* Int32(s[k])
            }
            output[x] = Int16(truncatingIfNeeded: acc &>> 8)
            c += taps
        }
    }

    /// Vertical pass: `taps` consecutive intermediate rows weighted into one 8-bit row.
    @inline(__always)
    static func combineRows(
        _ first: UnsafePointer<Int16>, rowStride: Int, taps: Int, weights: UnsafePointer<Int16>,
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
