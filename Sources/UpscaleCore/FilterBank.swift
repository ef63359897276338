/// Where the samples of one axis sit, for mapping output positions to input positions.
///
/// Positions are measured in luma samples. Luma sample `i` sits at `i`; a subsampled
/// chroma sample `j` sits at `subsampling * j + siting` (siting 0 = co-sited with
/// luma, MPEG-2 "left"; 0.5 = centred between two luma samples). The input's chroma may
/// sit elsewhere than the output's (`inputSiting`: a JPEG-style centred source made
/// left-sited); the mapping then moves it too.
public struct SampleGrid: Sendable, Equatable {
    public var lumaInput: Int
    public var lumaOutput: Int
    public var subsampling: Int
    /// Where the output's sample 0 sits.
    public var siting: Double
    /// Where the input's sample 0 sits.
    public var inputSiting: Double

    public init(lumaInput: Int, lumaOutput: Int, subsampling: Int = 1, siting: Double = 0, inputSiting: Double? = nil) {
        self.lumaInput = lumaInput
        self.lumaOutput = lumaOutput
        self.subsampling = subsampling
        self.siting = siting
        self.inputSiting = inputSiting ?? siting
    }

    public var inputSize: Int { (lumaInput + subsampling - 1) / subsampling }
    public var outputSize: Int { (lumaOutput + subsampling - 1) / subsampling }

    /// Input sample ratio per output sample (> 1 when downscaling).
    public var ratio: Double { Double(lumaInput) / Double(lumaOutput) }

    /// Centre-aligned mapping: output luma x sits over input luma (x + 0.5)·in/out − 0.5.
    public func inputPosition(ofOutput index: Int) -> Double {
        let outLuma = Double(subsampling * index) + siting
        let inLuma = (outLuma + 0.5) * ratio - 0.5
        return (inLuma - inputSiting) / Double(subsampling)
    }
}

/// Precomputed taps for resampling one axis: for every output sample, the first
/// input index and `taps` fixed-point weights (Q14, summing to exactly 16384).
///
/// Edges are clamped: weights that fall outside the input are folded onto the
/// nearest edge sample, so every window lies inside `0..<inputSize`.
public struct FilterBank: Sendable {
    public static let fractionBits = 14
    public static let one = 1 << fractionBits

    public let inputSize: Int
    public let outputSize: Int
    public let taps: Int
    public let starts: [Int32]
    /// `outputSize * taps` weights, output-major.
    public let coefficients: [Int16]

    public init(grid: SampleGrid, kernel: Kernel) {
        let inputSize = grid.inputSize
        let outputSize = grid.outputSize
        // Downscaling stretches the kernel over the input so it also low-passes.
        let stretch = max(1.0, grid.ratio)
        let support = kernel.radius * stretch

        var windows: [(first: Int, weights: [Double])] = []
        windows.reserveCapacity(outputSize)
        var taps = 1
        for index in 0..<outputSize {
            let centre = grid.inputPosition(ofOutput: index)
            let lo = Int((centre - support).rounded(.up))
            let hi = Int((centre + support).rounded(.down))
            var folded = [Int: Double]()
            var total = 0.0
            for j in lo...max(lo, hi) {
                let w = kernel.weight((Double(j) - centre) / stretch)
                if w == 0 { continue }
                folded[min(max(j, 0), inputSize - 1), default: 0] += w
                total += w
            }
            if folded.isEmpty || total == 0 {
                let nearest = min(max(Int(centre.rounded()), 0), inputSize - 1)
                folded = [nearest: 1]
                total = 1
            }
            let first = folded.keys.min()!
            let last = folded.keys.max()!
            var weights = [Double](repeating: 0, count: last - first + 1)
            for (j, w) in folded { weights[j - first] = w / total }
            taps = max(taps, weights.count)
            windows.append((first, weights))
        }

        var starts = [Int32](repeating: 0, count: outputSize)
        var coefficients = [Int16](repeating: 0, count: outputSize * taps)
        for (index, window) in windows.enumerated() {
            // Slide the window left where it would run past the end; the extra taps are zero.
            let start = min(window.first, inputSize - taps)
            starts[index] = Int32(start)
            let q = FilterBank.quantize(window.weights)
            for (k, value) in q.enumerated() {
                coefficients[index * taps + (window.first - start) + k] = value
            }
        }
        self.inputSize = inputSize
        self.outputSize = outputSize
        self.taps = taps
        self.starts = starts
        self.coefficients = coefficients
    }

    /// Rounds normalized weights to Q14 so that they sum to exactly `one`
    /// (constants stay constant); the rounding residue goes to the largest weight.
    static func quantize(_ weights: [Double]) -> [Int16] {
        var q = weights.map { Int(($0 * Double(one)).rounded()) }
        let residue = one - q.reduce(0, +)
        if residue != 0, let largest = weights.indices.max(by: { weights[$0] < weights[$1] }) {
            q[largest] += residue
        }
        return q.map { Int16($0) }
    }

    /// The bank as `factor` repeating phases, when the output is an integer multiple of
    /// the input: output `factor·i + r` reads input `i + offsets[r] ..< + taps` with the
    /// weights of phase `r`, for every `i` in `interior` (edges differ: they are clamped).
    public struct Polyphase: Sendable {
        public let factor: Int
        public let offsets: [Int]
        public let coefficients: [Int16]
        public let interior: Range<Int>
    }

    public var polyphase: Polyphase? {
        guard outputSize > inputSize, outputSize % inputSize == 0, inputSize >= 8 else { return nil }
        let factor = outputSize / inputSize
        let mid = inputSize / 2
        let offsets = (0..<factor).map { Int(starts[factor * mid + $0]) - mid }
        let phases = (0..<factor).map { r in Array(coefficients[((factor * mid + r) * taps)..<((factor * mid + r + 1) * taps)]) }
        func matches(_ i: Int) -> Bool {
            (0..<factor).allSatisfy { r in
                let x = factor * i + r
                return Int(starts[x]) - i == offsets[r] && coefficients[(x * taps)..<((x + 1) * taps)].elementsEqual(phases[r])
            }
        }
        var lo = mid, hi = mid + 1
        while lo > 0 && matches(lo - 1) { lo -= 1 }
        while hi < inputSize && matches(hi) { hi += 1 }
        return Polyphase(factor: factor, offsets: offsets, coefficients: phases.flatMap { $0 }, interior: lo..<hi)
    }

    /// The input rows (or columns) that outputs `range` read.
    public func inputSpan(of range: Range<Int>) -> Range<Int> {
        var lo = Int.max, hi = Int.min
        for index in range {
            lo = min(lo, Int(starts[index]))
            hi = max(hi, Int(starts[index]) + taps)
        }
        return lo..<hi
    }
}

extension FilterBank {
    /// The bank as dense matrices over blocks of 32 consecutive outputs, for ratios without
    /// a cheap polyphase form (3x, 2.667x, downscaling, and every 16-bit pass).
    ///
    /// Block `b` (outputs `32b ..< 32b + 32`) reads inputs `starts[b] ..< starts[b] + window`;
    /// its matrix has one row of 32 weights per input: first the 16 even outputs' weights,
    /// then the 16 odd outputs' (zero where an output does not read that input). So a block
    /// is `window` broadcasts and multiply-adds into two vectors, and the two vectors pack
    /// into 32 outputs in order as 16-bit pairs of 32-bit lanes (no lane shuffles). Blocks of
    /// one ratio mostly share a matrix; only distinct ones are stored.
    public struct Blocks: Sendable {
        public static let size = 32
        /// Inputs one block reads.
        public let window: Int
        /// Full blocks; outputs from `32 * count` on are left to the per-sample path.
        public let count: Int
        public let starts: [Int32]
        /// Per block, the first element of its matrix in `weights`.
        public let offsets: [Int32]
        /// Distinct matrices, Q14 weights as Int32.
        public let weights: [Int32]
        /// The same as Float (Q14 / 16384, exact).
        public let floatWeights: [Float]
        /// The same as Float, divided by 4 (exact: two fraction bits), for the 8-bit pass's
        /// exact Float arithmetic (see `PlaneResampler.filterBlocks`).
        public let eightBitWeights: [Float]
    }

    /// Nil when a block would read more than `maxWindow` inputs or the input is narrower than one window.
    public func blocks(maxWindow: Int = 96) -> Blocks? {
        let size = Blocks.size, count = outputSize / size
        guard count > 0 else { return nil }
        var window = 0
        for b in 0..<count {
            let outputs = b * size..<(b + 1) * size
            window = max(window, outputs.map { Int(starts[$0]) + taps }.max()! - outputs.map { Int(starts[$0]) }.min()!)
        }
        guard window <= maxWindow, window <= inputSize else { return nil }
        var blockStarts: [Int32] = [], offsets: [Int32] = [], weights: [Int32] = []
        var known: [[Int32]: Int32] = [:]
        for b in 0..<count {
            let outputs = b * size..<(b + 1) * size
            // Slid left where the window would pass the end of the input.
            let start = min(outputs.map { Int(starts[$0]) }.min()!, inputSize - window)
            var matrix = [Int32](repeating: 0, count: window * size)
            for x in outputs {
                let lane = (x - b * size) / 2 + ((x - b * size) % 2) * (size / 2)
                for k in 0..<taps {
                    matrix[(Int(starts[x]) + k - start) * size + lane] = Int32(coefficients[x * taps + k])
                }
            }
            blockStarts.append(Int32(start))
            if let offset = known[matrix] {
                offsets.append(offset)
            } else {
                let offset = Int32(weights.count)
                known[matrix] = offset
                offsets.append(offset)
                weights += matrix
            }
        }
        return Blocks(window: window, count: count, starts: blockStarts, offsets: offsets, weights: weights,
                      floatWeights: weights.map { Float($0) / Float(FilterBank.one) }, eightBitWeights: weights.map { Float($0) / 4 })
    }
}
