import CVector

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
    /// Float elements of scratch one band of a 16-bit plane needs: the band's rows, then one
    /// input row as Float.
    public var floatScratchCount: Int { scratchCount + horizontal.inputSize + 16 }
    let polyphase: FilterBank.Polyphase?
    /// Dense block matrices for the horizontal pass: every 16-bit pass, and 8-bit ratios
    /// other than 2x (whose polyphase form is cheaper).
    let blocks: FilterBank.Blocks?
    /// The 2x polyphase weights as Float (Q14 / 16384, exact) for the 16-bit pass; empty otherwise.
    let polyphaseFloatWeights: [Float]

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
        blocks = horizontal.blocks()
        polyphaseFloatWeights = polyphase.map { $0.factor == 2 ? $0.coefficients.map { Float($0) / Float(FilterBank.one) } : [] } ?? []
    }

    /// Whether the 8-bit horizontal pass uses the polyphase form (2x only).
    private var eightBitPolyphase: Bool { polyphase.map { $0.factor == 2 } ?? false }

    public var bandCount: Int { (vertical.outputSize + bandHeight - 1) / bandHeight }

    /// The output rows of band `band`.
    public func rows(band: Int) -> Range<Int> {
        (band * bandHeight)..<min((band + 1) * bandHeight, vertical.outputSize)
    }

    /// Resamples output rows of band `band` of `destination` from `source`.
    /// `scratch` must hold `scratchCount` elements and belong to the calling worker.
    @inline(__always)
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
                    if let polyphase, eightBitPolyphase {
                        // Vector blocks over the interior; the clamped edges and the tail go through the general path.
                        let done = Self.filterRowPolyphase(row, into: out, polyphase: polyphase, taps: taps)
                        let factor = polyphase.factor
                        Self.filterRange(row, into: out, range: 0..<(factor * polyphase.interior.lowerBound),
                                         starts: starts.baseAddress!, coefficients: coefficients.baseAddress!, taps: taps)
                        Self.filterRange(row, into: out, range: (factor * done)..<width,
                                         starts: starts.baseAddress!, coefficients: coefficients.baseAddress!, taps: taps)
                    } else if let blocks {
                        Self.filterBlocks(row, into: out, blocks: blocks)
                        Self.filterRange(row, into: out, range: (FilterBank.Blocks.size * blocks.count)..<width,
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
    /// clamped to `0...maxValue`. With block matrices, the intermediates of each full block
    /// of 32 outputs are stored as its 16 even outputs, then its 16 odd ones; the vertical
    /// pass then packs the two halves into 32 samples in order as 16-bit pairs.
    @inline(__always)
    public func resample16(band: Int, from source: Plane16, into destination: Plane16, scratch: UnsafeMutablePointer<Float>) {
        let rows = self.rows(band: band)
        let span = vertical.inputSpan(of: rows)
        let width = horizontal.outputSize
        let scale: Float = 1 / Float(FilterBank.one)
        let blocked = blocks.map { FilterBank.Blocks.size * $0.count } ?? 0
        horizontal.starts.withUnsafeBufferPointer { starts in
            horizontal.coefficients.withUnsafeBufferPointer { coefficients in
                let taps = horizontal.taps
                for y in span {
                    let out = scratch + (y - span.lowerBound) * width
                    let row = source.row(y)
                    if let blocks {
                        if let polyphase, polyphase.factor == 2 {
                            Self.filterBlocks16Polyphase(row, into: out, blocks: blocks, polyphase: polyphase, weights: polyphaseFloatWeights,
                                                         floatRow: scratch + scratchCount, inputWidth: horizontal.inputSize)
                        } else {
                            Self.filterBlocks16(row, into: out, blocks: blocks, range: 0..<blocks.count)
                        }
                    }
                    let rest = blocked..<width
                    switch taps {
                    case 6: Self.filterRange16(row, into: out, range: rest, starts: starts.baseAddress!, coefficients: coefficients.baseAddress!, fixedTaps: 6, scale: scale)
                    case 4: Self.filterRange16(row, into: out, range: rest, starts: starts.baseAddress!, coefficients: coefficients.baseAddress!, fixedTaps: 4, scale: scale)
                    default: Self.filterRange16(row, into: out, range: rest, starts: starts.baseAddress!, coefficients: coefficients.baseAddress!, fixedTaps: taps, scale: scale)
                    }
                }
            }
        }
        let maxValue = destination.maxValue
        vertical.starts.withUnsafeBufferPointer { starts in
            vertical.coefficients.withUnsafeBufferPointer { coefficients in
                let taps = vertical.taps
                for y in rows {
                    let first = scratch + (Int(starts[y]) - span.lowerBound) * width
                    let weights = coefficients.baseAddress! + y * taps
                    let out = destination.row(y)
                    let top = SIMD16<Int32>(repeating: Int32(maxValue)), zero = SIMD16<Int32>()
                    var x = 0
                    while x < blocked {
                        var even = SIMD16<Float>(), odd = SIMD16<Float>()
                        for k in 0..<taps {
                            let w = SIMD16<Float>(repeating: Float(weights[k]) * scale)
                            let p = UnsafeRawPointer(first + k * width + x)
                            even.addProduct(p.loadUnaligned(as: SIMD16<Float>.self), w)
                            odd.addProduct(p.loadUnaligned(fromByteOffset: 64, as: SIMD16<Float>.self), w)
                        }
                        // Round, clamp in integer lanes, pack the pairs (even sample in the low half).
                        let e = minimum(maximum(exactInt(even), zero), top), o = minimum(maximum(exactInt(odd), zero), top)
                        let pairs = unsafeBitCast(e | o &<< 16, to: SIMD16<UInt32>.self)
                        UnsafeMutableRawPointer(out + x).storeBytes(of: pairs, as: SIMD16<UInt32>.self)
                        x += FilterBank.Blocks.size
                    }
                    while x < width {
                        var acc: Float = 0
                        for k in 0..<taps { acc += first[k * width + x] * (Float(weights[k]) * scale) }
                        out[x] = UInt16(min(max(acc.rounded(), 0), Float(maxValue)))
                        x += 1
                    }
                }
            }
        }
    }

    /// The block horizontal pass for 16-bit rows in Float: 32 outputs per block, stored as
    /// the 16 even outputs then the 16 odd ones (see `resample16`).
    static func filterBlocks16(_ source: UnsafePointer<UInt16>, into output: UnsafeMutablePointer<Float>, blocks: FilterBank.Blocks,
                               range: Range<Int>) {
        let window = blocks.window
        blocks.floatWeights.withUnsafeBufferPointer { all in
            blocks.starts.withUnsafeBufferPointer { starts in
                blocks.offsets.withUnsafeBufferPointer { offsets in
                    for b in range {
                        let s = source + Int(starts[b])
                        var w = UnsafeRawPointer(all.baseAddress! + Int(offsets[b]))
                        var even = SIMD16<Float>(), odd = SIMD16<Float>()
                        for j in 0..<window {
                            let v = SIMD16<Float>(repeating: Float(s[j]))
                            even.addProduct(w.loadUnaligned(as: SIMD16<Float>.self), v)
                            odd.addProduct(w.loadUnaligned(fromByteOffset: 64, as: SIMD16<Float>.self), v)
                            w += 128
                        }
                        let out = UnsafeMutableRawPointer(output + FilterBank.Blocks.size * b)
                        out.storeBytes(of: even, as: SIMD16<Float>.self)
                        out.storeBytes(of: odd, toByteOffset: 64, as: SIMD16<Float>.self)
                    }
                }
            }
        }
    }

    /// 2x for 16-bit rows: the row is first widened to Float (a plain loop, which LLVM
    /// vectorizes), then every block whose 16 inputs lie in the polyphase interior is two
    /// 16-lane convolutions of contiguous Floats — `taps` multiply-adds per phase instead of a
    /// block matrix's `window` (22 at 2x) — stored in the blocks' layout (even outputs, then
    /// odd ones). The other blocks take the matrix path.
    static func filterBlocks16Polyphase(
        _ source: UnsafePointer<UInt16>, into output: UnsafeMutablePointer<Float>, blocks: FilterBank.Blocks,
        polyphase: FilterBank.Polyphase, weights: [Float], floatRow: UnsafeMutablePointer<Float>, inputWidth: Int
    ) {
        for i in 0..<inputWidth { floatRow[i] = Float(source[i]) }
        let half = FilterBank.Blocks.size / 2
        // Blocks b whose inputs 16b ..< 16b + 16 are all interior.
        let first = min((polyphase.interior.lowerBound + half - 1) / half, blocks.count)
        let end = max(first, min(polyphase.interior.upperBound / half, blocks.count))
        filterBlocks16(source, into: output, blocks: blocks, range: 0..<first)
        filterBlocks16(source, into: output, blocks: blocks, range: end..<blocks.count)
        let taps = weights.count / 2
        weights.withUnsafeBufferPointer { w in
            let evenInput = floatRow + polyphase.offsets[0], oddInput = floatRow + polyphase.offsets[1]
            for b in first..<end {
                var even = SIMD16<Float>(), odd = SIMD16<Float>()
                for t in 0..<taps {
                    even.addProduct(UnsafeRawPointer(evenInput + half * b + t).loadUnaligned(as: SIMD16<Float>.self),
                                    SIMD16<Float>(repeating: w[t]))
                    odd.addProduct(UnsafeRawPointer(oddInput + half * b + t).loadUnaligned(as: SIMD16<Float>.self),
                                   SIMD16<Float>(repeating: w[taps + t]))
                }
                let out = UnsafeMutableRawPointer(output + FilterBank.Blocks.size * b)
                out.storeBytes(of: even, as: SIMD16<Float>.self)
                out.storeBytes(of: odd, toByteOffset: 64, as: SIMD16<Float>.self)
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

    /// Horizontal pass over the full blocks (see `FilterBank.Blocks`), 32 outputs per block,
    /// in Float fused multiply-adds (twice the throughput of 32-bit integer multiplies).
    /// Exact: the weights are Q14/4 (two fraction bits), so every product and partial sum
    /// (below 2^21 in magnitude even with Lanczos' overshoot on 0/255 edges) is a multiple of
    /// 1/4 within Float's 24 bits. The result is `filterRange`'s (128 + Σ)>>8, computed as
    /// floor((32 + Σ/4) / 64): the floor of a quarter-step value is round-to-nearest of it
    /// minus 3/8, then an arithmetic shift by 6.
    static func filterBlocks(_ source: UnsafePointer<UInt8>, into output: UnsafeMutablePointer<Int16>, blocks: FilterBank.Blocks) {
        let window = blocks.window
        blocks.eightBitWeights.withUnsafeBufferPointer { all in
            blocks.starts.withUnsafeBufferPointer { starts in
                blocks.offsets.withUnsafeBufferPointer { offsets in
                    for b in 0..<blocks.count {
                        let s = source + Int(starts[b])
                        var w = UnsafeRawPointer(all.baseAddress! + Int(offsets[b]))
                        var even = SIMD16<Float>(repeating: 32), odd = even
                        for j in 0..<window {
                            let v = SIMD16<Float>(repeating: Float(s[j]))
                            even.addProduct(w.loadUnaligned(as: SIMD16<Float>.self), v)
                            odd.addProduct(w.loadUnaligned(fromByteOffset: 64, as: SIMD16<Float>.self), v)
                            w += 128
                        }
                        // Int16 pairs in 32-bit lanes, the even output in the low half (little-endian).
                        let e = unsafeBitCast(exactInt(even - 0.375) &>> 6, to: SIMD16<UInt32>.self)
                        let o = unsafeBitCast(exactInt(odd - 0.375) &>> 6, to: SIMD16<UInt32>.self)
                        let pairs = e & 0xFFFF | o &<< 16
                        UnsafeMutableRawPointer(output + FilterBank.Blocks.size * b).storeBytes(of: pairs, as: SIMD16<UInt32>.self)
                    }
                }
            }
        }
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

    /// 2x horizontal pass over the polyphase interior, 16 input positions at a time: each
    /// phase is a plain convolution of contiguous input, so every tap is one vector load and
    /// one multiply-add; the two phases are then interleaved into output order as Int16
    /// pairs. Other ratios use `filterBlocks`. Returns the first input position it did not cover.
    @inline(__always)
    static func filterRowPolyphase(
        _ source: UnsafePointer<UInt8>, into output: UnsafeMutablePointer<Int16>,
        polyphase: FilterBank.Polyphase, taps: Int
    ) -> Int {
        // Lanczos3's six taps get their own unrolled loop (with the count unknown, each tap was
        // a trip round an inner loop of its own). Measured against one loop for every count,
        // 720p → 1440p Lanczos on photo tiles, alternating: no difference built for AVX-512,
        // about 2% faster built for AVX2 (`-target-cpu haswell`).
        taps == 6 ? filterRowPolyphase(source, into: output, polyphase: polyphase, fixedTaps: 6)
            : filterRowPolyphase(source, into: output, polyphase: polyphase, fixedTaps: taps)
    }

    @inline(__always)
    static func filterRowPolyphase(
        _ source: UnsafePointer<UInt8>, into output: UnsafeMutablePointer<Int16>,
        polyphase: FilterBank.Polyphase, fixedTaps taps: Int
    ) -> Int {
        precondition(polyphase.factor == 2, "the polyphase pass is for 2x")
        var i = polyphase.interior.lowerBound
        let end = polyphase.interior.upperBound
        let evenOffset = polyphase.offsets[0], oddOffset = polyphase.offsets[1]
        polyphase.coefficients.withUnsafeBufferPointer { weights in
            if upscale_pairs_native != 0 { i = filterPairsPolyphase(source, into: output, from: i, to: end, offsets: (evenOffset, oddOffset),
                                                                    weights: weights.baseAddress!, taps: taps) }
            while i + 16 <= end {
                let even = phase(source + i + evenOffset, weights.baseAddress!, taps: taps)
                let odd = phase(source + i + oddOffset, weights.baseAddress! + taps, taps: taps)
                // Little-endian: the low half of each 32-bit lane lands first.
                let pairs = unsafeBitCast(even, to: SIMD16<UInt32>.self) & 0xFFFF | unsafeBitCast(odd, to: SIMD16<UInt32>.self) &<< 16
                UnsafeMutableRawPointer(output + 2 * i).storeBytes(of: pairs, as: SIMD16<UInt32>.self)
                i += 16
            }
        }
        return i
    }

    /// `filterRowPolyphase` 32 input positions at a time, two taps per product: the row's
    /// samples as 16-bit words, each beside the next (`upscale_pair_words_lo`/`_hi`), against
    /// pairs of weights (`upscale_dot_pairs`: `vpmaddwd`), where one product per tap widened the
    /// samples to 32 bits and used half of each multiply. The same integer sums, so the same
    /// output. Returns the first position it did not cover.
    @inline(__always)
    static func filterPairsPolyphase(
        _ source: UnsafePointer<UInt8>, into output: UnsafeMutablePointer<Int16>, from start: Int, to end: Int,
        offsets: (Int, Int), weights: UnsafePointer<Int16>, taps: Int
    ) -> Int {
        @inline(__always) func phase(_ s: UnsafePointer<UInt8>, _ w: UnsafePointer<Int16>) -> (SIMD16<Int32>, SIMD16<Int32>) {
            var lo = SIMD16<Int32>(repeating: 1 << 7), hi = lo
            var k = 0
            while k < taps {
                // An odd last tap is paired with itself at weight 0.
                let a = upscale_words_at(s + k), b = k + 1 < taps ? upscale_words_at(s + k + 1) : a
                let pair = weightPair(w, k, taps: taps)
                lo = upscale_dot_pairs(lo, upscale_pair_words_lo(a, b), pair)
                hi = upscale_dot_pairs(hi, upscale_pair_words_hi(a, b), pair)
                k += 2
            }
            return (lo &>> 8, hi &>> 8)
        }
        var i = start
        while i + 32 <= end {
            let even = phase(source + i + offsets.0, weights), odd = phase(source + i + offsets.1, weights + taps)
            // Output 2j is the even phase's sum j, 2j + 1 the odd one's: Int16 pairs in 32-bit lanes.
            let lo = even.0 & 0xFFFF | odd.0 &<< 16, hi = even.1 & 0xFFFF | odd.1 &<< 16
            let out = UnsafeMutableRawPointer(output + 2 * i)
            out.storeBytes(of: upscale_pairs_in_order_first(lo, hi), as: SIMD16<Int32>.self)
            out.storeBytes(of: upscale_pairs_in_order_second(lo, hi), toByteOffset: 64, as: SIMD16<Int32>.self)
            i += 32
        }
        return i
    }

    /// One phase for 16 consecutive input positions: Σ weight[k]·source[l + k], rounded, >> 8.
    @inline(__always)
    static func phase(_ source: UnsafePointer<UInt8>, _ weights: UnsafePointer<Int16>, taps: Int) -> SIMD16<Int32> {
        var acc = SIMD16<Int32>(repeating: 1 << 7)
        for k in 0..<taps {
            let v = UnsafeRawPointer(source + k).loadUnaligned(as: SIMD16<UInt8>.self)
            acc &+= upscale_int_from_bytes16(v) &* SIMD16<Int32>(repeating: Int32(weights[k]))
        }
        return acc &>> 8
    }

    /// Taps k and k + 1 of `weights` as one 32-bit lane (tap k in the low half), in all 16
    /// lanes: the weights of an `upscale_dot_pairs` product. Past the last tap the high half is 0.
    @inline(__always)
    static func weightPair(_ weights: UnsafePointer<Int16>, _ k: Int, taps: Int) -> SIMD16<Int32> {
        let high = k + 1 < taps ? UInt32(UInt16(bitPattern: weights[k + 1])) : 0
        return SIMD16<Int32>(repeating: Int32(bitPattern: UInt32(UInt16(bitPattern: weights[k])) | high << 16))
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

    /// Two intermediate rows at a time: their words paired (`upscale_pair_words_lo/hi`), one
    /// `upscale_dot_pairs` product covers two taps of 32 outputs (a tap cost a sign extension and
    /// a 32-bit multiply per 16 outputs in the plain loop LLVM vectorized before). The sums are
    /// the plain loop's, exactly (integer products, same rounding and clamp); the row's tail
    /// takes that loop, as does every sample where the core is built without those instructions
    /// (`upscale_pairs_native`: AVX2 or later). An odd last tap is paired with itself at weight 0.
    @inline(__always)
    static func combineRows(
        _ first: UnsafePointer<Int16>, rowStride: Int, fixedTaps taps: Int, weights: UnsafePointer<Int16>,
        into output: UnsafeMutablePointer<UInt8>, count: Int
    ) {
        @inline(__always) func row(_ k: Int, _ x: Int) -> SIMD16<Int32> {
            UnsafeRawPointer(first + k * rowStride + x).loadUnaligned(as: SIMD16<Int32>.self)
        }
        var x = 0
        while upscale_pairs_native != 0 && x + 32 <= count {
            var lo = SIMD16<Int32>(repeating: 1 << 19), hi = lo
            var k = 0
            while k < taps {
                let a = row(k, x), b = k + 1 < taps ? row(k + 1, x) : a, w = weightPair(weights, k, taps: taps)
                lo = upscale_dot_pairs(lo, upscale_pair_words_lo(a, b), w)
                hi = upscale_dot_pairs(hi, upscale_pair_words_hi(a, b), w)
                k += 2
            }
            UnsafeMutableRawPointer(output + x).storeBytes(of: upscale_bytes_from_pairs(lo &>> 20, hi &>> 20), as: SIMD8<Int32>.self)
            x += 32
        }
        while x < count {
            var acc: Int32 = 1 << 19
            for k in 0..<taps {
                acc &+= Int32(weights[k]) &* Int32(first[k * rowStride + x])
            }
            output[x] = UInt8(clamping: acc &>> 20)
            x += 1
        }
    }
}
