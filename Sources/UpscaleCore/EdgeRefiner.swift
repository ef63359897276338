import CVector
import Foundation

/// Learned edge-directed refinement of an integer-ratio Lanczos upscale (RAISR-style, on
/// the input grid).
///
/// Every input sample away from the border is classified by the 5x5 structure tensor of
/// the input's gradients: dominant orientation (`angles` bins), strength and coherence.
/// Weak gradients (flat areas, fine texture) keep the Lanczos result. Elsewhere one 7x7
/// filter per output phase — `ratio`² of them, trained offline by least squares on real
/// photos (`upscale-bench train`) — maps the 7x7 input neighbourhood straight to the
/// `ratio`x`ratio` output samples the input sample covers. Along a coherent edge these
/// filters interpolate along the edge rather than across it. The result is clamped to the
/// range of the 3x3 input neighbourhood (no ringing beyond the nearest samples) and faded
/// in over `fade` above the strength threshold, so a sample whose gradient hovers at the
/// threshold does not switch between two results from frame to frame.
///
/// It runs after the Lanczos pass on the same band of output rows, reading only the input
/// plane and the band's own Lanczos rows: no full-size intermediate.
public struct EdgeRefiner: Sendable {
    public static let angles = 24
    public static let coherenceBins = 3
    /// Classes that have filters: angle × {medium, strong} × coherence.
    public static let classCount = angles * 2 * coherenceBins
    /// Filter window on the input grid.
    public static let window = 7
    public static let taps = window * window
    /// Half-size of the structure-tensor window (5x5).
    static let tensorRadius = 2

    public let ratio: Int
    /// Gradient strength (input-grid units) where refinement starts, and between medium and strong.
    public let strengthThresholds: (Float, Float)
    /// Coherence thresholds between the three coherence bins.
    public let coherenceThresholds: (Float, Float)
    /// Strength above the first threshold over which the refined result fades in.
    public let fade: Float
    /// `classCount * ratio² * taps` weights: class-major, then phase (py * ratio + px), then taps row-major.
    public let weights: [Float]
    /// Per class: whether it is refined. Training turns off classes whose filters gain too little
    /// over Lanczos to be worth their time (and their flicker); their samples keep Lanczos.
    public let active: [Bool]
    /// 3x and 4x: the weights in Q14 (`appliedWeight`) laid out for the inner loop (see `pack`); empty for 2x.
    let packed: [Int16]
    /// 2x: the active classes' weights in Q14 (`appliedWeight`), laid out for the inner loop
    /// (see `packFolded` where `folded`, else `packPairs`); empty for 3x and 4x.
    let packedPairs: [Int16]
    /// 2x: per class, where its weights start in `packedPairs` (0 for inactive classes, whose
    /// samples are never filtered).
    let pairOffsets: [Int32]
    /// 2x: whether `packedPairs` holds the folded layout (`packFolded`: every active class's
    /// filters are their half-turn partners' turned) rather than `packPairs`'.
    public let folded: Bool
    let fadeScale: Float

    public var phases: Int { ratio * ratio }

    /// With `folding` false, 2x filters in half-turn pairs keep the unfolded layout too (to
    /// compare the two; the output is the same).
    public init(ratio: Int, strengthThresholds: (Float, Float), coherenceThresholds: (Float, Float), fade: Float,
                weights: [Float], active: [Bool]? = nil, folding: Bool = true) {
        precondition((2...4).contains(ratio), "refinement is for 2x, 3x and 4x")
        precondition(weights.count == EdgeRefiner.classCount * ratio * ratio * EdgeRefiner.taps, "filter data has the wrong size")
        self.ratio = ratio
        self.strengthThresholds = strengthThresholds
        self.coherenceThresholds = coherenceThresholds
        self.fade = fade
        self.weights = weights
        let active = active ?? Array(repeating: true, count: EdgeRefiner.classCount)
        precondition(active.count == EdgeRefiner.classCount, "one activity flag per class")
        self.active = active
        packed = ratio == 2 ? [] : EdgeRefiner.pack(weights, ratio: ratio)
        if ratio == 2, folding, let halves = EdgeRefiner.packFolded(weights, active: active) {
            (packedPairs, pairOffsets, folded) = (halves.weights, halves.offsets, true)
        } else {
            (packedPairs, pairOffsets) = ratio == 2 ? EdgeRefiner.packPairs(weights, active: active) : ([], [])
            folded = false
        }
        fadeScale = 1 / fade
    }

    /// The trained refiner for an exact integer ratio between input and output, if there is one.
    public static func trained(input: (width: Int, height: Int), output: (width: Int, height: Int)) -> EdgeRefiner? {
        guard input.width > 0, input.height > 0, output.width % input.width == 0,
              output.width / input.width == output.height / input.height, output.height % input.height == 0 else { return nil }
        switch output.width / input.width {
        case 2: return .x2
        case 3: return .x3
        case 4: return .x4
        default: return nil
        }
    }

    /// 3x and 4x, per class: for each filter row and each of its four tap pairs (taps 2k and
    /// 2k + 1; tap 7 is 0), 16 32-bit lanes holding the pair's Q14 weights for each phase, phase
    /// (py, px) in lane 4·py + px, so that each output row's samples are one group of four
    /// lanes (3x leaves lanes 3, 7, 11 and 12-15 at 0; see `blendBlock`). One product of a
    /// broadcast sample pair covers two taps of every phase: 28 per refined sample where 49
    /// float multiply-adds, one per tap, were.
    static func pack(_ weights: [Float], ratio: Int) -> [Int16] {
        checkQ14Sums(weights)
        let phases = ratio * ratio
        var out = [Int16](repeating: 0, count: classCount * blockWords)
        for c in 0..<classCount {
            for p in 0..<phases {
                let lane = blockLane(p, ratio: ratio)
                for dy in 0..<window {
                    for dx in 0..<window {
                        out[c * blockWords + (dy * 4 + dx / 2) * 32 + 2 * lane + dx % 2] = q14(weights[(c * phases + p) * taps + dy * window + dx])
                    }
                }
            }
        }
        return out
    }

    /// 3x and 4x: 16-bit words per class in `pack`'s layout.
    static let blockWords = window * 4 * 32

    /// 3x and 4x: the lane of phase `p` (py · ratio + px) in `pack`'s layout.
    @inline(__always)
    static func blockLane(_ p: Int, ratio: Int) -> Int { (p / ratio) * 4 + p % ratio }

    /// 3x and 4x: 1 in the lanes of `pack`'s layout that hold a phase, 0 in the others.
    static func blockMask(ratio: Int) -> SIMD16<Float> {
        var mask = SIMD16<Float>()
        for p in 0..<(ratio * ratio) { mask[blockLane(p, ratio: ratio)] = 1 }
        return mask
    }

    /// Weights are applied in Q14 (weight × 2^14 rounded, within ±2^15: the trained ones
    /// are within ±1.1): with 16-bit samples, one vector instruction multiplies and adds 32 pairs.
    static let pairScale: Float = 16384

    static func q14(_ weight: Float) -> Int16 {
        let q = (weight * pairScale).rounded()
        precondition(abs(q) <= Float(Int16.max), "refinement weights must lie within ±2 (they are applied in Q14)")
        return Int16(q)
    }

    /// The weight at `index` of `weights` as `refine` applies it: its Q14 value.
    public func appliedWeight(at index: Int) -> Float {
        Float(EdgeRefiner.q14(weights[index])) / EdgeRefiner.pairScale
    }

    /// 12-bit samples (the most `Scratch.words` holds) times a filter's Q14 weights must sum
    /// inside 32 bits: at most 2^31 / 4096 in absolute weights, that is 32 in plain ones.
    static func checkQ14Sums(_ weights: [Float]) {
        for f in 0..<(weights.count / taps) {
            precondition(weights[(f * taps)..<((f + 1) * taps)].reduce(0) { $0 + abs(Int32(q14($1))) } < 1 << 19,
                         "refinement filters must have absolute weights summing under 32")
        }
    }

    /// 2x: per active class and filter row, 32 16-bit weights: 32-bit lane 4·phase + k holds
    /// taps 2k and 2k+1 of that phase (tap 7 is 0). Against the row's eight samples as four
    /// pairs, repeated four times, one product covers the row's taps of all four phases. Only
    /// active classes are stored: a refined sample reads 448 bytes of a table that is 64 KB for
    /// all 144 classes, more than the level-1 cache holds.
    static let pairWords = window * 32

    static func packPairs(_ weights: [Float], active: [Bool]) -> (weights: [Int16], offsets: [Int32]) {
        checkQ14Sums(weights)
        var out = [Int16](), offsets = [Int32](repeating: 0, count: classCount)
        for c in 0..<classCount where active[c] {
            offsets[c] = Int32(out.count)
            var filter = [Int16](repeating: 0, count: pairWords)
            for p in 0..<4 {
                for dy in 0..<window {
                    for dx in 0..<window {
                        filter[dy * 32 + 2 * (4 * p + dx / 2) + dx % 2] = q14(weights[(c * 4 + p) * taps + dy * window + dx])
                    }
                }
            }
            out += filter
        }
        // With no class active nothing is filtered, but the table still needs an address.
        if out.isEmpty { out = [Int16](repeating: 0, count: pairWords) }
        return (out, offsets)
    }

    /// 2x filters whose phases come in half-turn pairs (phase 3 - p is phase p turned by 180°,
    /// in Q14, for every active class: how `upscale-bench train --half-turn` fits them) need
    /// half the products. With s a tap's sample and s̄ its half-turned tap's, a = s + s̄ and
    /// d = s - s̄, phase p's filter u and its partner's v: twice phase p is Σ (u+v)·a + (u-v)·d
    /// and twice its partner Σ (u+v)·a - (u-v)·d, over taps 0 ... 23 (rows 0-2, row 3's first
    /// three) and the centre tap (a = 2s, weight u, d = 0). Per active class four groups of 32
    /// words, one per row pair (0 and 6, 1 and 5, 2 and 4, 3 and itself): 32-bit lane 4·q + k
    /// holds folded taps 2k and 2k+1 of P = u+v of phases 0 and 1 (q = 0, 1) and of Q = u-v of
    /// the same (q = 2, 3), against `upscale_folded_words`' a, a, d, d. 4 products per sample
    /// instead of 7, the sums still exact. Nil where the weights are not so paired or a folded
    /// weight or sum would not fit (12-bit samples, doubled by the fold, times the weights
    /// must sum inside 32 bits).
    static func packFolded(_ weights: [Float], active: [Bool]) -> (weights: [Int16], offsets: [Int32])? {
        let n = taps
        var out = [Int16](), offsets = [Int32](repeating: 0, count: classCount)
        for c in 0..<classCount where active[c] {
            // Phases 0 and 1 against 3 and 2 (the same test read from the other side covers those).
            for p in 0..<2 {
                for t in 0..<n where q14(weights[(c * 4 + p) * n + t]) != q14(weights[(c * 4 + 3 - p) * n + n - 1 - t]) { return nil }
            }
            offsets[c] = Int32(out.count)
            var filter = [Int16](repeating: 0, count: 4 * 32)
            for p in 0..<2 {
                var total = 0
                for g in 0..<4 {
                    for dx in 0..<(g < 3 ? window : 4) {
                        let t = g * window + dx, u = Int(q14(weights[(c * 4 + p) * n + t]))
                        // The centre tap is its own partner: weight u against a = 2s.
                        let v = t == n / 2 ? 0 : Int(q14(weights[(c * 4 + 3 - p) * n + t]))
                        let sum = u + v, difference = u - v
                        guard abs(sum) <= Int(Int16.max), abs(difference) <= Int(Int16.max) else { return nil }
                        total += abs(sum) + abs(difference)
                        filter[g * 32 + 8 * p + dx] = Int16(sum)
                        filter[g * 32 + 8 * (2 + p) + dx] = Int16(difference)
                    }
                }
                guard total < 1 << 18 else { return nil }
            }
            out += filter
        }
        if out.isEmpty { out = [Int16](repeating: 0, count: 4 * 32) }
        return (out, offsets)
    }

    /// Little-endian Float32 weights from base64 (how `upscale-bench train` stores them).
    static func decodeWeights(_ base64: String) -> [Float] {
        guard let data = Data(base64Encoded: base64) else { preconditionFailure("corrupt refinement filter data") }
        var weights = [Float](repeating: 0, count: data.count / 4)
        data.withUnsafeBytes { raw in
            for i in weights.indices {
                weights[i] = Float(bitPattern: UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: i * 4, as: UInt32.self)))
            }
        }
        return weights
    }

    /// Plain Lanczos3 as 7x7 filters per phase (the separable taps multiplied out): what
    /// training pulls sparse classes towards.
    public static func lanczosWeights(ratio: Int) -> [Float] {
        let r = window / 2
        func taps(_ phase: Int) -> [Double] {
            let offset = (Double(phase) + 0.5) / Double(ratio) - 0.5
            let raw = (-r...r).map { Kernel.lanczos3.weight(Double($0) - offset) }
            let sum = raw.reduce(0, +)
            return raw.map { $0 / sum }
        }
        var out: [Float] = []
        for py in 0..<ratio {
            for px in 0..<ratio {
                let ty = taps(py), tx = taps(px)
                for dy in 0..<window { for dx in 0..<window { out.append(Float(ty[dy] * tx[dx])) } }
            }
        }
        return out
    }

    /// How much of the refined result replaces Lanczos at this strength (0 below the threshold).
    @inline(__always)
    public func weight(strength: Float) -> Float {
        min(max((strength - strengthThresholds.0) * fadeScale, 0), 1)
    }

    /// Input samples at least this far from every border are refined; the rest keep Lanczos.
    public static let margin = 3

    /// The structure of every refinable input sample, computed by the code `refine` uses:
    /// strength (0 at the margin), coherence (only where the strength reaches the threshold and
    /// the class is active, else 0) and class index (-1 where the strength is under the threshold,
    /// at the margin, or where the class is inactive). `refine` changes the samples with a class.
    public func analyze(_ source: Plane) -> (strength: [Float], coherence: [Float], classes: [Int32]) {
        let w = source.width, h = source.height
        var strength = [Float](repeating: 0, count: w * h), classes = [Int32](repeating: -1, count: w * h)
        var coherence = strength
        let scratch = Scratch(width: w, ratio: ratio)
        let m = EdgeRefiner.margin
        guard w > 2 * m, h > 2 * m else { return (strength, coherence, classes) }
        let classifier = Classifier(self)
        scratch.start(.eight(source), at: m)
        for y in m..<(h - m) {
            scratch.advance(.eight(source), row: y, classifier: classifier)
            for x in m..<(w - m) {
                strength[y * w + x] = scratch.strength(at: x)
                if scratch.edge[x] >= 0 {
                    classes[y * w + x] = scratch.classes[x]
                    coherence[y * w + x] = scratch.coherence(at: x)
                }
            }
        }
        return (strength, coherence, classes)
    }

    /// Refines the output rows of input rows `rows`: `output` holds the Lanczos upscale of
    /// `source` by `ratio` in those rows, and is updated in place. `scratch` belongs to the
    /// calling worker and was made for `source.width`.
    public func refine(_ source: Plane, into output: Plane, rows: Range<Int>, scratch: Scratch) {
        refine(.eight(source), into: .eight(output), rows: rows, scratch: scratch)
    }

    /// The same for 10/12/16-bit planes: samples are classified and filtered in 8-bit units
    /// (divided by 2^(bits-8)), so the thresholds and filters trained on 8-bit photos apply.
    public func refine(_ source: Plane16, into output: Plane16, rows: Range<Int>, scratch: Scratch) {
        refine(.deep(source), into: .deep(output), rows: rows, scratch: scratch)
    }

    /// A plane of either depth.
    enum Samples {
        case eight(Plane)
        case deep(Plane16)

        var width: Int {
            switch self {
            case .eight(let p): return p.width
            case .deep(let p): return p.width
            }
        }

        var height: Int {
            switch self {
            case .eight(let p): return p.height
            case .deep(let p): return p.height
            }
        }
    }

    private func refine(_ source: Samples, into output: Samples, rows: Range<Int>, scratch: Scratch) {
        let w = source.width, h = source.height, m = EdgeRefiner.margin
        let first = max(rows.lowerBound, m), end = min(rows.upperBound, h - m)
        guard w > 2 * m, first < end else { return }
        let classifier = Classifier(self)
        // Filter sums are in Q14 of `Scratch`'s 16-bit samples; this turns them into 8-bit units.
        let sumScale: Float
        switch source {
        case .eight: sumScale = 1 / EdgeRefiner.pairScale
        case .deep(let plane): sumScale = Float(1 << Scratch.wordShift(plane.bitDepth)) / Float(1 << (plane.bitDepth - 8)) / EdgeRefiner.pairScale
        }
        withFilters { filters, offsets in
            scratch.start(source, at: first)
            for y in first..<end {
                scratch.advance(source, row: y, classifier: classifier)
                switch output {
                case .eight(let plane): refineRow(y, filters: filters, offsets: offsets, sumScale: sumScale, scratch: scratch, into: plane)
                case .deep(let plane): refineRow(y, filters: filters, offsets: offsets, sumScale: sumScale, scratch: scratch, into: plane)
                }
            }
        }
    }

    /// This ratio's packed filters (`packedPairs` and `pairOffsets` for 2x, else `packed` and
    /// no offsets: 3x and 4x keep every class's filters).
    private func withFilters<R>(_ body: (UnsafeRawPointer, UnsafePointer<Int32>?) -> R) -> R {
        if ratio == 2 {
            return packedPairs.withUnsafeBytes { filters in
                pairOffsets.withUnsafeBufferPointer { body(filters.baseAddress!, $0.baseAddress!) }
            }
        }
        return packed.withUnsafeBytes { body($0.baseAddress!, nil) }
    }

    /// Filters and stores the row's edge samples (those that passed `classify`'s edge test). Generic so that
    /// each depth gets its own compiled loop (a depth switch per sample cost about 4%).
    func refineRow<Output: RefinedPlane>(_ y: Int, filters: UnsafeRawPointer, offsets: UnsafePointer<Int32>?, sumScale: Float,
                                         scratch: Scratch, into plane: Output) {
        let classes = scratch.classes, m = EdgeRefiner.margin, end = scratch.width - m
        if ratio == 2 {
            // Two passes: the filters' sums for every sample of the row, then the blends. One
            // pass made each sample one long chain of dependent steps (filter, sum, blend, store)
            // and the processor could overlap little of the next sample with it.
            let sums = scratch.sums.unsafelyUnwrapped, below = scratch.sumsBelow.unsafelyUnwrapped
            let pairs = filters.assumingMemoryBound(to: Int16.self), offsets = offsets.unsafelyUnwrapped
            // The seven rows' addresses once per row (the ring's index arithmetic per product
            // and sample cost more integer work than the products' own).
            let rows = (scratch.wordRow(-3), scratch.wordRow(-2), scratch.wordRow(-1), scratch.wordRow(0),
                        scratch.wordRow(1), scratch.wordRow(2), scratch.wordRow(3))
            let count = scratch.collectEdges(from: m, to: end, alpha: scratch.blendAlpha), list = scratch.list
            guard count > 0 else {
                plane.blendRow2x(2 * y, from: m, to: end, scratch: scratch)
                return
            }
            // Four samples at a time, their phase sums reduced together (`upscale_phase_sums4`):
            // one sample's reduction was a chain of dependent shuffles, half the loop's time. The
            // list is padded with its last sample (filtered again, the same values stored again).
            list[count] = list[count - 1]; list[count + 1] = list[count - 1]; list[count + 2] = list[count - 1]
            // One loop per layout (a test of `folded` per sample cost about 7% of the loop).
            @inline(__always) func eachFour(scale: Float, _ filter: (_ weights: UnsafePointer<Int16>, _ x: Int) -> SIMD16<Int32>,
                                            _ finish: (SIMD16<Int32>) -> SIMD16<Int32>) {
                var i = 0
                while i < count {
                    let x0 = Int(list[i]), x1 = Int(list[i + 1]), x2 = Int(list[i + 2]), x3 = Int(list[i + 3])
                    let s0 = filter(pairs + Int(offsets[Int(classes[x0])]), x0), s1 = filter(pairs + Int(offsets[Int(classes[x1])]), x1)
                    let s2 = filter(pairs + Int(offsets[Int(classes[x2])]), x2), s3 = filter(pairs + Int(offsets[Int(classes[x3])]), x3)
                    let values = upscale_float_from_int16(finish(upscale_phase_sums4(s0, s1, s2, s3))) * scale
                    upscale_store_blocks4(sums, below, x0, x1, x2, x3, values)
                    i += 4
                }
            }
            if folded {
                eachFour(scale: sumScale * 0.5, { foldedSums($0, rows: rows, x: $1) }, { upscale_unfolded4($0) })
            } else {
                eachFour(scale: sumScale, { pairSums($0, rows: rows, x: $1) }, { $0 })
            }
            plane.blendRow2x(2 * y, from: m, to: end, scratch: scratch)
            return
        }
        let count = scratch.collectEdges(from: m, to: end), list = scratch.list
        let filters = filters.assumingMemoryBound(to: Int16.self)
        let rows = (scratch.wordRow(-3), scratch.wordRow(-2), scratch.wordRow(-1), scratch.wordRow(0),
                    scratch.wordRow(1), scratch.wordRow(2), scratch.wordRow(3))
        let mask = EdgeRefiner.blockMask(ratio: ratio)
        for i in 0..<count {
            let x = Int(list[i]), c = Int(classes[x])
            let value = upscale_float_from_int16(filterBlock(filters + c * EdgeRefiner.blockWords, rows: rows, x: x)) * sumScale
            plane.blendBlock(value, lo: scratch.low[x], hi: scratch.high[x], alpha: scratch.alpha[x], mask: mask, x: ratio * x, y: ratio * y, ratio: ratio)
        }
    }

    /// 3x and 4x: the Q14 sums of a sample's phases in `pack`'s lanes: per filter row, its
    /// eight samples as four pairs, each broadcast against its pair of weights of every phase.
    /// Four sums (one per pair), each a chain of seven products: exact integers, so any order
    /// gives the same bits.
    @inline(__always)
    func filterBlock(_ f: UnsafePointer<Int16>, rows: SevenRows, x: Int) -> SIMD16<Int32> {
        let w = UnsafeRawPointer(f)
        var sums = (SIMD16<Int32>(), SIMD16<Int32>(), SIMD16<Int32>(), SIMD16<Int32>())
        @inline(__always) func add(_ row: UnsafeMutablePointer<Int16>, _ dy: Int) {
            let s = UnsafeRawPointer(row + x - 3)
            @inline(__always) func product(_ k: Int, _ acc: SIMD16<Int32>) -> SIMD16<Int32> {
                upscale_dot_pairs(acc, SIMD16<Int32>(repeating: s.loadUnaligned(fromByteOffset: 4 * k, as: Int32.self)),
                                  w.loadUnaligned(fromByteOffset: (dy * 4 + k) * 64, as: SIMD16<Int32>.self))
            }
            sums = (product(0, sums.0), product(1, sums.1), product(2, sums.2), product(3, sums.3))
        }
        add(rows.0, 0); add(rows.1, 1); add(rows.2, 2); add(rows.3, 3); add(rows.4, 4); add(rows.5, 5); add(rows.6, 6)
        return (sums.0 &+ sums.1) &+ (sums.2 &+ sums.3)
    }

    typealias SevenRows = (UnsafeMutablePointer<Int16>, UnsafeMutablePointer<Int16>, UnsafeMutablePointer<Int16>, UnsafeMutablePointer<Int16>,
                           UnsafeMutablePointer<Int16>, UnsafeMutablePointer<Int16>, UnsafeMutablePointer<Int16>)

    /// Four sample pairs, four times over: one 16-byte broadcast load, no shuffle (a permute
    /// per product, the layout before, competed with the products for the vector units).
    @inline(__always)
    func repeated(_ v: SIMD4<Int32>) -> SIMD16<Int32> {
        SIMD16<Int32>(v[0], v[1], v[2], v[3], v[0], v[1], v[2], v[3], v[0], v[1], v[2], v[3], v[0], v[1], v[2], v[3])
    }

    /// 2x: one product per filter row covers its eight taps (seven used) of the four phases: the
    /// row's eight 16-bit samples as four pairs, repeated against `packPairs`' layout, 32
    /// multiply-adds into 16 lanes of 32 bits (AVX-512 VNNI's one instruction where the core
    /// is built for it). 7 such products per sample instead of 14 of 16 floats; the sums are
    /// exact integers. Two chains (even and odd rows), added: each phase's four lanes hold its
    /// sum in parts (`upscale_phase_sums4` adds them).
    @inline(__always)
    func pairSums(_ f: UnsafePointer<Int16>, rows: SevenRows, x: Int) -> SIMD16<Int32> {
        let w = UnsafeRawPointer(f)
        @inline(__always) func product(_ row: UnsafeMutablePointer<Int16>, _ k: Int) -> (SIMD16<Int32>, SIMD16<Int32>) {
            (repeated(UnsafeRawPointer(row + x - 3).loadUnaligned(as: SIMD4<Int32>.self)), w.loadUnaligned(fromByteOffset: k * 64, as: SIMD16<Int32>.self))
        }
        var p = product(rows.0, 0), a = upscale_dot_pairs(SIMD16<Int32>(), p.0, p.1)
        p = product(rows.1, 1); var b = upscale_dot_pairs(SIMD16<Int32>(), p.0, p.1)
        p = product(rows.2, 2); a = upscale_dot_pairs(a, p.0, p.1)
        p = product(rows.3, 3); b = upscale_dot_pairs(b, p.0, p.1)
        p = product(rows.4, 4); a = upscale_dot_pairs(a, p.0, p.1)
        p = product(rows.5, 5); b = upscale_dot_pairs(b, p.0, p.1)
        p = product(rows.6, 6); a = upscale_dot_pairs(a, p.0, p.1)
        return a &+ b
    }

    /// 2x with `packFolded`'s weights: `pairSums`' result from four products, one per row
    /// pair (rows 0 and 6, 1 and 5, 2 and 4, 3 and itself), each against the pair's folded sums
    /// and differences (`upscale_folded_words`); reduced, these are the A and D sums of which
    /// `upscale_unfolded4` makes the four phases' doubled sums (halved in the scale: exact, a
    /// power of two).
    @inline(__always)
    func foldedSums(_ f: UnsafePointer<Int16>, rows: SevenRows, x: Int) -> SIMD16<Int32> {
        let w = UnsafeRawPointer(f)
        @inline(__always) func weights(_ g: Int) -> SIMD16<Int32> { w.loadUnaligned(fromByteOffset: g * 64, as: SIMD16<Int32>.self) }
        let a = upscale_dot_pairs(upscale_dot_pairs(SIMD16<Int32>(), upscale_folded_words(rows.0 + x - 3, rows.6 + x - 4), weights(0)),
                                  upscale_folded_words(rows.2 + x - 3, rows.4 + x - 4), weights(2))
        let b = upscale_dot_pairs(upscale_dot_pairs(SIMD16<Int32>(), upscale_folded_words(rows.1 + x - 3, rows.5 + x - 4), weights(1)),
                                  upscale_folded_words(rows.3 + x - 3, rows.3 + x - 4), weights(3))
        return a &+ b
    }

    /// The thresholds as the vector tests use them. With l1 ≥ l2 the tensor sums' eigenvalues
    /// (25x the mean tensor's, l = t ± √q): strength = √(l1/25); coherence
    /// (√l1-√l2)/(√l1+√l2) ≥ k ⇔ l1·(1-k)² ≥ l2·(1+k)²; orientation bin = ⌊ψ·12/π⌋ with
    /// ψ = atan2(sxy, (sxx-syy)/2) in [0, 2π).
    struct Classifier {
        let edgeLimit: Float, strongLimit: Float
        let coherence0: (Float, Float), coherence1: (Float, Float)
        /// `weight(strength:)`'s threshold and scale.
        let fadeStart: Float, fadeScale: Float
        /// Bit c of the 144-bit string in lanes 0-4 is set where class c is active.
        let activeWords: SIMD16<Int32>

        init(_ r: EdgeRefiner) {
            var words = SIMD16<Int32>()
            for (c, on) in r.active.enumerated() where on { words[c >> 5] |= Int32(bitPattern: 1 << UInt32(c & 31)) }
            activeWords = words
            fadeStart = r.strengthThresholds.0
            fadeScale = r.fadeScale
            edgeLimit = 25 * r.strengthThresholds.0 * r.strengthThresholds.0
            strongLimit = 25 * r.strengthThresholds.1 * r.strengthThresholds.1
            let k0 = r.coherenceThresholds.0, k1 = r.coherenceThresholds.1
            // With A = (1-k)², B = (1+k)²: (t+√q)·A ≥ (t-√q)·B ⇔ q·(A+B)² ≥ t²·(B-A)².
            func factors(_ k: Float) -> (Float, Float) {
                let a = (1 - k) * (1 - k), b = (1 + k) * (1 + k)
                return ((a + b) * (a + b), (b - a) * (b - a))
            }
            coherence0 = factors(k0)
            coherence1 = factors(k1)
        }
    }
    /// Per-worker rows for the refinement: the last 8 input rows as Float (and for 2x as 16-bit
    /// samples), the last 8 rows of gradient products, the last 4 rows' 3-wide minimum and
    /// maximum, and for the current row the column sums of the tensor and, per sample, the edge
    /// test, the class, the 3x3 range, the fade weight, the list of edge samples, and for 2x the
    /// filters' values and the blend weights. Rows carry 16 floats of padding on both sides
    /// so vector loops can run past the ends (the sample rows' padding stays 0).
    public final class Scratch: @unchecked Sendable {
        let width: Int
        let stride: Int
        private let memory: UnsafeMutableRawPointer
        let samples: UnsafeMutablePointer<Float>
        let products: UnsafeMutablePointer<Float>
        /// Column sums of the five product rows around the current row: sxx, syy, sxy.
        let columns: UnsafeMutablePointer<Float>
        /// Rows `y & 3` hold the minimum and maximum of each sample of input row y and its left
        /// and right neighbours (as the bit patterns of the non-negative Float samples).
        let rowLow: UnsafeMutablePointer<Float>
        let rowHigh: UnsafeMutablePointer<Float>
        /// ≥ 0 where the strength reaches the refinement threshold.
        let edge: UnsafeMutablePointer<Float>
        let low: UnsafeMutablePointer<Float>
        let high: UnsafeMutablePointer<Float>
        /// `weight(strength:)` of each sample (in chunks with an edge).
        let alpha: UnsafeMutablePointer<Float>
        let classes: UnsafeMutablePointer<Int32>
        /// Positions of the current row's edge samples (see `collectEdges`), with room for 2x's
        /// padding to a multiple of four.
        let list: UnsafeMutablePointer<Int32>
        /// For 2x: 2 floats per sample of the row (at 2·x), where `refineRow` leaves each edge
        /// sample's upper two values, and its lower two in `sumsBelow`: the blend reads each
        /// output row's values in order, no shuffle (across the halves of a 256-bit register,
        /// `vperm2f128`, 8 micro-ops on a Zen 1 core). Other samples hold earlier values (always finite).
        let sums: UnsafeMutablePointer<Float>?
        let sumsBelow: UnsafeMutablePointer<Float>?
        /// For 2x: `alpha` where the sample passed the edge test (and so was filtered), else 0.
        let blendAlpha: UnsafeMutablePointer<Float>?
        /// The last 8 input rows as 16-bit samples (deep ones shifted right by
        /// `wordShift`, so that Q14 sums of them fit 32 bits).
        let words: UnsafeMutablePointer<Int16>
        private var current = 0
        /// The input row whose tensor column sums `columns` holds (-1: none yet).
        private var columnsRow = -1
        /// Whether column sums may be updated row to row (see `slideColumns`).
        private var exactSums = true

        /// Scratch for input rows of `width` samples, refined by `ratio`.
        public init(width: Int, ratio: Int) {
            self.width = width
            stride = (width + 15) / 16 * 16 + 48
            let rows = 8 + 24 + 3 + 8 + 6 + (ratio == 2 ? 5 + 1 : 0) + 4
            memory = UnsafeMutableRawPointer.allocate(byteCount: rows * stride * 4, alignment: 64)
            memory.initializeMemory(as: Float.self, repeating: 0, count: rows * stride)
            let base = memory.assumingMemoryBound(to: Float.self) + 16
            samples = base
            products = base + 8 * stride
            columns = base + 32 * stride
            rowLow = base + 35 * stride
            rowHigh = base + 39 * stride
            edge = base + 43 * stride
            low = base + 44 * stride
            high = base + 45 * stride
            alpha = base + 46 * stride
            classes = UnsafeMutableRawPointer(base + 47 * stride).assumingMemoryBound(to: Int32.self)
            list = UnsafeMutableRawPointer(base + 48 * stride).assumingMemoryBound(to: Int32.self)
            sums = ratio == 2 ? base + 49 * stride : nil
            sumsBelow = ratio == 2 ? base + 51 * stride + 16 : nil
            blendAlpha = ratio == 2 ? base + 54 * stride : nil
            words = UnsafeMutableRawPointer(base + (ratio == 2 ? 55 : 49) * stride).assumingMemoryBound(to: Int16.self)
        }

        deinit { memory.deallocate() }

        /// Input row `current + dy` as 16-bit samples.
        @inline(__always) func wordRow(_ dy: Int) -> UnsafeMutablePointer<Int16> { words + ((current + dy) & 7) * stride }
        /// Deep samples keep their top 12 bits in `words`.
        static func wordShift(_ bitDepth: Int) -> Int { max(0, bitDepth - 12) }
        @inline(__always) func productRow(_ y: Int, _ k: Int) -> UnsafeMutablePointer<Float> { products + ((y & 7) * 3 + k) * stride }

        /// Prepares rows for the input row `y` (rows y-3 ... y+2 and their products).
        func start(_ source: Samples, at y: Int) {
            columnsRow = -1
            // Gradient products are multiples of 2^-2 (8-bit) or 2^-6 (9, 10-bit) below 2^14, so
            // every partial sum of a column is exact in Float: a running sum gives the same bits.
            switch source {
            case .eight: exactSums = true
            case .deep(let plane): exactSums = plane.bitDepth <= 10
            }
            for k in (y - 3)...(y + 2) { convert(source, row: k) }
            for k in (y - 2)...(y + 1) { computeProducts(row: k) }
            rowRange(row: y - 1)
            rowRange(row: y)
        }

        /// Moves to input row `y` (after `start` at some earlier row, one row at a time) and classifies it.
        func advance(_ source: Samples, row y: Int, classifier: Classifier) {
            current = y
            convert(source, row: y + 3)
            rowRange(row: y + 1)
            if exactSums && columnsRow == y - 1 {
                slideColumns(row: y)
            } else {
                computeProducts(row: y + 2)
                sumColumns(row: y)
            }
            classify(row: y, classifier)
        }

        /// Writes the positions in `from..<to` whose edge test passes (`classify` failed it for
        /// inactive classes) to `list`; returns how many. With `alpha` (2x's `blendAlpha`), also
        /// stores there each sample's `alpha` where the test passed and 0 elsewhere (past `to`
        /// too, within the last 16: never read).
        func collectEdges(from start: Int, to end: Int, alpha blend: UnsafeMutablePointer<Float>? = nil) -> Int {
            var count = 0, x = start
            while x < end {
                // A bit per sample whose edge test passed (its sign bit is clear), then one
                // step per set bit: photos have an edge in most runs of 16 samples, and a step
                // per sample cost more than the filters' sums in some rows.
                let test = UnsafeRawPointer(edge + x).loadUnaligned(as: SIMD16<Int32>.self)
                if let blend {
                    UnsafeMutableRawPointer(blend + x).storeBytes(of: UnsafeRawPointer(alpha + x).loadUnaligned(as: SIMD16<Int32>.self) & ~(test &>> 31),
                                                                  as: SIMD16<Int32>.self)
                }
                var bits = UInt32(~upscale_sign_bits16(test))
                if end - x < 16 { bits &= (1 << UInt32(end - x)) - 1 }
                while bits != 0 {
                    list[count] = Int32(truncatingIfNeeded: x + bits.trailingZeroBitCount)
                    count &+= 1
                    bits &= bits &- 1
                }
                x += 16
            }
            return count
        }

        private func convert(_ source: Samples, row y: Int) {
            let dst = samples + (y & 7) * stride
            switch source {
            case .eight(let plane): convert(plane.row(y), into: dst)
            case .deep(let plane): convert(plane.row(y), into: dst, scale: 1 / Float(1 << (plane.bitDepth - 8)))
            }
            let out = words + (y & 7) * stride
            switch source {
            case .eight(let plane):
                let src = plane.row(y)
                var x = 0
                while x + 16 <= width {
                    let v = SIMD16<Int16>(truncatingIfNeeded: UnsafeRawPointer(src + x).loadUnaligned(as: SIMD16<UInt8>.self))
                    UnsafeMutableRawPointer(out + x).storeBytes(of: v, as: SIMD16<Int16>.self)
                    x += 16
                }
                while x < width { out[x] = Int16(src[x]); x += 1 }
            case .deep(let plane):
                let src = plane.row(y), shift = UInt16(Scratch.wordShift(plane.bitDepth))
                var x = 0
                while x + 16 <= width {
                    let v = UnsafeRawPointer(src + x).loadUnaligned(as: SIMD16<UInt16>.self) &>> shift
                    UnsafeMutableRawPointer(out + x).storeBytes(of: v, as: SIMD16<UInt16>.self)
                    x += 16
                }
                while x < width { out[x] = Int16(src[x] >> shift); x += 1 }
            }
        }

        private func convert(_ src: UnsafeMutablePointer<UInt16>, into dst: UnsafeMutablePointer<Float>, scale: Float) {
            var x = 0
            while x + 16 <= width {
                let words = UnsafeRawPointer(src + x).loadUnaligned(as: SIMD16<UInt16>.self)
                let bits = SIMD16<UInt32>(truncatingIfNeeded: words) | 0x4B00_0000
                storeVector((unsafeBitCast(bits, to: SIMD16<Float>.self) - 8_388_608) * scale, dst + x)
                x += 16
            }
            while x < width { dst[x] = Float(src[x]) * scale; x += 1 }
        }

        private func convert(_ src: UnsafeMutablePointer<UInt8>, into dst: UnsafeMutablePointer<Float>) {
            var x = 0
            while x + 16 <= width {
                let bytes = UnsafeRawPointer(src + x).loadUnaligned(as: SIMD16<UInt8>.self)
                // The 2^23 trick: the byte in the low mantissa bits of 8388608.0.
                let bits = SIMD16<UInt32>(truncatingIfNeeded: bytes) | 0x4B00_0000
                storeVector(unsafeBitCast(bits, to: SIMD16<Float>.self) - 8_388_608, dst + x)
                x += 16
            }
            while x < width { dst[x] = Float(src[x]); x += 1 }
        }

        /// The 3-wide minimum and maximum of sample row y into `rowLow` and `rowHigh`: each row's
        /// are made once and serve the 3x3 ranges of the three rows around it. Samples are
        /// non-negative floats, whose bit patterns order as integers do: integer min/max. At
        /// x = -1 and x = width they take the rows' zero padding (never read: the margin is 3).
        private func rowRange(row y: Int) {
            let row = samples + (y & 7) * stride, lows = rowLow + (y & 3) * stride, highs = rowHigh + (y & 3) * stride
            var x = 0
            while x < width {
                let left = bits(row + x - 1), here = bits(row + x), right = bits(row + x + 1)
                storeBits(minimum(minimum(left, here), right), lows + x)
                storeBits(maximum(maximum(left, here), right), highs + x)
                x += 16
            }
        }

        /// Central-difference gradient products of row y (reads rows y-1 ... y+1).
        private func computeProducts(row y: Int) {
            var gradients = Gradients(self, row: y)
            let pxx = productRow(y, 0), pyy = productRow(y, 1), pxy = productRow(y, 2)
            var x = 0
            while x < width {
                let (gx, gy) = gradients.next(at: x)
                storeVector(gx * gx, pxx + x)
                storeVector(gy * gy, pyy + x)
                storeVector(gx * gy, pxy + x)
                x += 16
            }
        }

        /// The central differences of one sample row (and its neighbours above and below), 16
        /// samples at a time from x = 0, the only place they are computed: every product the
        /// column sums add or subtract comes from here, so the sliding sums stay exact. Where the
        /// processor shifts lanes in one instruction (`valignd`), the row's vectors before and at x
        /// are carried, so each step loads one aligned vector of it; elsewhere two unaligned loads.
        struct Gradients {
            let above: UnsafeMutablePointer<Float>, row: UnsafeMutablePointer<Float>, below: UnsafeMutablePointer<Float>
            var before: SIMD16<Float>, here: SIMD16<Float>

            init(_ scratch: Scratch, row k: Int) {
                above = scratch.samples + ((k - 1) & 7) * scratch.stride
                row = scratch.samples + (k & 7) * scratch.stride
                below = scratch.samples + ((k + 1) & 7) * scratch.stride
                before = UnsafeRawPointer(row - 16).loadUnaligned(as: SIMD16<Float>.self)
                here = UnsafeRawPointer(row).loadUnaligned(as: SIMD16<Float>.self)
            }

            /// (gx, gy) at x ... x + 15; x steps by 16.
            @inline(__always) mutating func next(at x: Int) -> (SIMD16<Float>, SIMD16<Float>) {
                let gx: SIMD16<Float>
                if upscale_lane_shifts_native != 0 {
                    let after = UnsafeRawPointer(row + x + 16).loadUnaligned(as: SIMD16<Float>.self)
                    gx = (upscale_lanes_from1(here, after) - upscale_lanes_from15(before, here)) * 0.5
                    before = here
                    here = after
                } else {
                    // Without a one-instruction lane shift, two unaligned loads: with AVX2 the
                    // shifts took a `vperm2f128` across the register's halves each, 8 micro-ops
                    // on a Zen 1 core (a quarter of `slideColumns`' time there).
                    gx = (UnsafeRawPointer(row + x + 1).loadUnaligned(as: SIMD16<Float>.self)
                          - UnsafeRawPointer(row + x - 1).loadUnaligned(as: SIMD16<Float>.self)) * 0.5
                }
                let gy = (UnsafeRawPointer(below + x).loadUnaligned(as: SIMD16<Float>.self)
                          - UnsafeRawPointer(above + x).loadUnaligned(as: SIMD16<Float>.self)) * 0.5
                return (gx, gy)
            }
        }

        /// The tensor's column sums for row y: the sums of the five product rows around it.
        private func sumColumns(row y: Int) {
            for p in 0..<3 {
                let column = columns + p * stride
                let r0 = productRow(y - 2, p), r1 = productRow(y - 1, p), r2 = productRow(y, p)
                let r3 = productRow(y + 1, p), r4 = productRow(y + 2, p)
                var x = -16
                while x < width + 16 {
                    storeVector(((load(r0 + x) + load(r1 + x)) + (load(r2 + x) + load(r3 + x))) + load(r4 + x), column + x)
                    x += 16
                }
            }
            columnsRow = y
        }

        /// The column sums for row y from row y - 1's (where `exactSums` allows): the gradient
        /// products of row y + 2, entering the window, added and those of row y - 3, leaving it,
        /// subtracted, both made from the sample rows by `Gradients` as `computeProducts` makes
        /// them (the ring holds rows y - 4 ... y + 3). One pass, no product rows written or read
        /// back. Outside 0 ..< width (rounded up to 16) the products are 0, so there the sums
        /// stay 0 as in `sumColumns`.
        private func slideColumns(row y: Int) {
            let cxx = columns, cyy = columns + stride, cxy = columns + 2 * stride
            var entering = Gradients(self, row: y + 2), leaving = Gradients(self, row: y - 3)
            var x = 0
            while x < width {
                let (gx, gy) = entering.next(at: x), (hx, hy) = leaving.next(at: x)
                storeVector((load(cxx + x) + gx * gx) - hx * hx, cxx + x)
                storeVector((load(cyy + x) + gy * gy) - hy * hy, cyy + x)
                storeVector((load(cxy + x) + gx * gy) - hx * hy, cxy + x)
                x += 16
            }
            columnsRow = y
        }

        /// Row y's 5x5 tensor sums (5-wide sums of `columns`), and from them each sample's
        /// eigenvalues, edge test and — in chunks with an edge — class and 3x3 range.
        private func classify(row y: Int, _ k: Classifier) {
            let cxx = columns, cyy = columns + stride, cxy = columns + 2 * stride
            // Each column row's 16 sums before, at and after x, carried from chunk to chunk: one
            // aligned load per row and chunk.
            var xx = (load(cxx - 16), load(cxx)), yy = (load(cyy - 16), load(cyy)), xy = (load(cxy - 16), load(cxy))
            var x = 0
            while x < width {
                let a: SIMD16<Float>, b: SIMD16<Float>, c: SIMD16<Float>
                if upscale_lane_shifts_native != 0 {
                    let nextXX = load(cxx + x + 16), nextYY = load(cyy + x + 16), nextXY = load(cxy + x + 16)
                    a = box(xx.0, xx.1, nextXX)
                    b = box(yy.0, yy.1, nextYY)
                    c = box(xy.0, xy.1, nextXY)
                    xx = (xx.1, nextXX)
                    yy = (yy.1, nextYY)
                    xy = (xy.1, nextXY)
                } else {
                    a = box(at: cxx + x)
                    b = box(at: cyy + x)
                    c = box(at: cxy + x)
                }
                // Eigenvalues t ± √q; every test below is squared, so none needs a square root.
                let half = (a - b) * 0.5, t = (a + b) * 0.5
                let q = half * half + c * c
                let gap0 = positive(k.edgeLimit - t), gap1 = positive(k.strongLimit - t)
                let e = q - gap0 * gap0
                storeVector(e, edge + x)
                // The rest only matters where some sample is refined.
                guard any(e .>= 0) else {
                    x += 16
                    continue
                }
                // -1/0 lane masks: the negated strength bin and coherence bin.
                let strong = signClear(q - gap1 * gap1)
                let t2 = t * t
                let coherent = signClear(q * k.coherence0.0 - t2 * k.coherence0.1) &+ signClear(q * k.coherence1.0 - t2 * k.coherence1.1)
                let angle = orientationBin(c, half)
                let index = (angle &* 2 &- strong) &* Int32(EdgeRefiner.coherenceBins) &- coherent
                UnsafeMutableRawPointer(classes + x).storeBytes(of: index, as: SIMD16<Int32>.self)
                // Samples of inactive classes fail the edge test (-1): they keep Lanczos, and
                // no later step looks their class up.
                let off = ((upscale_lookup16(k.activeWords, index &>> 5) &>> (index & 31)) & 1) &- 1
                storeBits((unsafeBitCast(e, to: SIMD16<Int32>.self) & ~off) | (Int32(bitPattern: (-1 as Float).bitPattern) & off), edge + x)
                // The fade weight, as `strength(at:)` and `weight(strength:)` compute it per
                // sample, with vector square roots (two scalar ones per sample cost ~7% of a
                // refined frame).
                let strength = upscale_sqrt16(positive((t + upscale_sqrt16(q)) * 0.04))
                // Clamped to 0...1 on the bit patterns: negative floats are negative integers, and
                // non-negative ones order as integers do.
                let fade = unsafeBitCast((strength - k.fadeStart) * k.fadeScale, to: SIMD16<Int32>.self)
                storeBits(minimum(maximum(fade, SIMD16<Int32>()), SIMD16<Int32>(repeating: 0x3F80_0000)), alpha + x)
                // Range of each 3x3 neighbourhood: the 3-wide ranges of the rows above, at and
                // below (`rowRange`).
                let above = ((y - 1) & 3) * stride + x, at = (y & 3) * stride + x, below = ((y + 1) & 3) * stride + x
                storeBits(minimum(minimum(bits(rowLow + above), bits(rowLow + at)), bits(rowLow + below)), low + x)
                storeBits(maximum(maximum(bits(rowHigh + above), bits(rowHigh + at)), bits(rowHigh + below)), high + x)
                x += 16
            }
        }

        @inline(__always) private func bits(_ p: UnsafePointer<Float>) -> SIMD16<Int32> {
            UnsafeRawPointer(p).loadUnaligned(as: SIMD16<Int32>.self)
        }

        @inline(__always) private func storeBits(_ v: SIMD16<Int32>, _ p: UnsafeMutablePointer<Float>) {
            UnsafeMutableRawPointer(p).storeBytes(of: v, as: SIMD16<Int32>.self)
        }

        /// The 5x5 tensor sums (sxx, syy, sxy) at x of the current row: the 5-wide sums of
        /// `columns`, added in the vector pass's order (`box`).
        private func tensorSums(at x: Int) -> (Float, Float, Float) {
            func box(_ p: UnsafeMutablePointer<Float>) -> Float { ((p[x - 2] + p[x - 1]) + (p[x] + p[x + 1])) + p[x + 2] }
            return (box(columns), box(columns + stride), box(columns + 2 * stride))
        }

        /// Coherence at x of the current row, (√l1 - √l2) / (√l1 + √l2) of the mean tensor's
        /// eigenvalues, from the column sums added in the vector pass's order.
        func coherence(at x: Int) -> Float {
            let (sxx, syy, sxy) = tensorSums(at: x)
            let a = sxx / 25, b = syy / 25, c = sxy / 25
            let root = ((a - b) * (a - b) + 4 * c * c).squareRoot()
            let r1 = max(0, (a + b + root) / 2).squareRoot(), r2 = max(0, (a + b - root) / 2).squareRoot()
            return r1 + r2 > 1e-6 ? (r1 - r2) / (r1 + r2) : 0
        }

        /// Gradient strength at x of the current row, √(largest eigenvalue / 25) of the mean
        /// tensor, from the column sums in the vector pass's order and with its arithmetic, so
        /// that `weight(strength:)` of it is the pass's fade weight to the bit.
        func strength(at x: Int) -> Float {
            let (a, b, c) = tensorSums(at: x)
            let half = (a - b) * 0.5, t = (a + b) * 0.5
            let q = half * half + c * c
            return max((t + q.squareRoot()) * 0.04, 0).squareRoot()
        }

        /// The 5-wide sums at p's 16 positions from five unaligned loads, in `box(_:_:_:)`'s order:
        /// where the processor has no one-instruction lane shift (without AVX-512 the carried
        /// vectors took 12 of AVX2's 16 registers and `classify` spilled).
        @inline(__always) private func box(at p: UnsafePointer<Float>) -> SIMD16<Float> {
            ((load(p - 2) + load(p - 1)) + (load(p) + load(p + 1))) + load(p + 2)
        }

        /// The 5-wide sums at `here`'s 16 positions, from the 16 values before, at and after them.
        @inline(__always) private func box(_ before: SIMD16<Float>, _ here: SIMD16<Float>, _ after: SIMD16<Float>) -> SIMD16<Float> {
            ((upscale_lanes_from14(before, here) + upscale_lanes_from15(before, here)) + (here + upscale_lanes_from1(here, after)))
                + upscale_lanes_from2(here, after)
        }

        @inline(__always) private func load(_ p: UnsafePointer<Float>) -> SIMD16<Float> {
            UnsafeRawPointer(p).loadUnaligned(as: SIMD16<Float>.self)
        }

        @inline(__always) private func storeVector(_ v: SIMD16<Float>, _ p: UnsafeMutablePointer<Float>) {
            UnsafeMutableRawPointer(p).storeBytes(of: v, as: SIMD16<Float>.self)
        }
    }
}

/// ⌊ψ·12/π⌋ for ψ = atan2(y, x) in [0, 2π), clamped to 0 ... 23, by comparisons instead of an
/// arctangent: within an octant the bin boundaries are at tan 15° and tan 30° of the ratio
/// small/big of |x| and |y|, and each of the three mirrorings that map ψ into the first octant
/// (|y| > |x|, x < 0, y < 0) flips the direction in which bins count (and which side of a
/// boundary belongs to the bin). About half the work of the polynomial arctangent it replaced
/// (no division); that one differed from the exact bin within ~2e-6 rad of a boundary.
@inline(__always)
func orientationBin(_ y: SIMD16<Float>, _ x: SIMD16<Float>) -> SIMD16<Int32> {
    typealias V = SIMD16<Float>
    typealias I = SIMD16<Int32>
    let magnitude = I(repeating: 0x7FFF_FFFF)
    let bx = unsafeBitCast(x, to: I.self) & magnitude, by = unsafeBitCast(y, to: I.self) & magnitude
    let big = unsafeBitCast(maximum(bx, by), to: V.self), small = unsafeBitCast(minimum(bx, by), to: V.self)
    let at15 = big * 0.267_949_19, at30 = big * 0.577_350_27
    // Bin within the octant counted upwards (a boundary belongs to the bin above it; at 45°,
    // small = big, that is the next octant's first) and downwards (it belongs to the bin below),
    // as sums of -1/0 lane masks: minus the counts.
    let up = (signClear(small - at15) &+ signClear(small - at30)) &+ signClear(small - big)
    let down = (signSet(0 - small) &+ signSet(at15 - small)) &+ signSet(at30 - small)
    // Octant base (in bins) after each mirroring, and whether an odd number of them reversed
    // the direction bins count in. Masks select: b ^ ((a ^ b) & m) is a where m is -1, else b.
    let swap = (bx &- by) &>> 31, left = signSet(x + 0), below = signSet(y + 0)
    let base0 = swap & 6
    let base1 = base0 ^ ((base0 ^ (12 &- base0)) & left)
    let base2 = base1 ^ ((base1 ^ (24 &- base1)) & below)
    let reversed = swap ^ left ^ below
    let rising = 0 &- up
    let bin = base2 &+ (rising ^ ((rising ^ down) & reversed))
    return minimum(maximum(bin, I()), I(repeating: Int32(EdgeRefiner.angles - 1)))
}

/// An output plane the refinement can write: `blend` clamps `value` (8-bit units) to
/// `lo...hi`, mixes it over the Lanczos sample at (x, y) by `alpha` and stores the result;
/// `blend2x` does the same for the 2x2 block at (x, y) (values in row-major order).
protocol RefinedPlane {
    func blend(_ value: Float, lo: Float, hi: Float, alpha: Float, x: Int, y: Int)
    /// 3x and 4x: blends one input sample's `ratio`x`ratio` refined samples (`values` in
    /// `EdgeRefiner.pack`'s lanes; `mask` is `blockMask`) into output rows y ..< y + ratio
    /// from column x, each as `blend` does.
    func blendBlock(_ values: SIMD16<Float>, lo: Float, hi: Float, alpha: Float, mask: SIMD16<Float>, x: Int, y: Int, ratio: Int)
    func blend2x(_ values: SIMD4<Float>, lo: Float, hi: Float, alpha: Float, x: Int, y: Int)
    /// 2x: blends the refined samples of input row `y / 2` (`scratch`'s `sums`, `sumsBelow`,
    /// `low`, `high` and `blendAlpha` over `from..<to`) into output rows y and y + 1.
    func blendRow2x(_ y: Int, from start: Int, to end: Int, scratch: EdgeRefiner.Scratch)
}

extension RefinedPlane {
    func blendRow2x(_ y: Int, from start: Int, to end: Int, scratch: EdgeRefiner.Scratch) {
        blendEach2x(y, from: start, to: end, scratch: scratch)
    }

    /// One 2x2 block per refined sample (alpha above 0: at 0 the block keeps Lanczos anyway).
    func blendEach2x(_ y: Int, from start: Int, to end: Int, scratch: EdgeRefiner.Scratch) {
        let sums = scratch.sums.unsafelyUnwrapped, below = scratch.sumsBelow.unsafelyUnwrapped, alphas = scratch.blendAlpha.unsafelyUnwrapped
        for x in start..<end where alphas[x] != 0 {
            let upper = UnsafeRawPointer(sums + 2 * x).loadUnaligned(as: SIMD2<Float>.self)
            let lower = UnsafeRawPointer(below + 2 * x).loadUnaligned(as: SIMD2<Float>.self)
            blend2x(SIMD4(lowHalf: upper, highHalf: lower), lo: scratch.low[x], hi: scratch.high[x],
                    alpha: alphas[x], x: 2 * x, y: y)
        }
    }
}

/// Each lane twice, in order.
@inline(__always)
private func twice(_ v: SIMD8<Float>) -> SIMD16<Float> {
    SIMD16<Float>(v[0], v[0], v[1], v[1], v[2], v[2], v[3], v[3], v[4], v[4], v[5], v[5], v[6], v[6], v[7], v[7])
}

/// `lanczos + alpha · (clamp(values, lo, hi) - lanczos)`, floored after adding 0.5 (as the
/// scalar conversion truncates a non-negative value), lane by lane as the scalar `blend`.
@inline(__always)
private func mix(_ values: SIMD4<Float>, _ lanczos: SIMD4<Float>, lo: Float, hi: Float, alpha: Float) -> SIMD4<Int32> {
    let refined = values.replacing(with: lo, where: values .< lo).replacing(with: hi, where: values .> hi)
    // Whole numbers after the floor: `exactInt` converts them exactly.
    return exactInt((lanczos + alpha * (refined - lanczos) + 0.5).rounded(.down))
}

extension Plane: RefinedPlane {
    /// The block's rows as four bytes each, one vector: 3x also reads and writes back the
    /// column after the block and no fourth row, whose lanes have alpha 0 and so keep their
    /// value exactly (the refinement has whole rows: no other thread writes that column).
    /// Lane for lane `blend`'s arithmetic (one sample at a time, a refined sample of 3x or 4x
    /// spent about as long in its 9 or 16 blends as in its filter).
    @inline(__always)
    func blendBlock(_ values: SIMD16<Float>, lo: Float, hi: Float, alpha: Float, mask: SIMD16<Float>, x: Int, y: Int, ratio: Int) {
        var words = SIMD4<UInt32>()
        for py in 0..<ratio { words[py] = UnsafeRawPointer(row(y + py) + x).loadUnaligned(as: UInt32.self) }
        let lanczos = upscale_float_from_bytes16(unsafeBitCast(words, to: SIMD16<UInt8>.self))
        let refined = upscale_clamp16(values, SIMD16(repeating: lo), SIMD16(repeating: hi))
        // Truncation is `blend`'s conversion: the mix is within 0 ... 255.
        let out = unsafeBitCast(upscale_bytes_from_float16(lanczos + alpha * mask * (refined - lanczos) + 0.5), to: SIMD4<UInt32>.self)
        for py in 0..<ratio { UnsafeMutableRawPointer(row(y + py) + x).storeBytes(of: out[py], as: UInt32.self) }
    }

    /// Eight input samples (16 output samples per row) at a time, wherever one of them is
    /// refined: the samples that are not keep their Lanczos value exactly (alpha 0, finite
    /// stand-in values). Per listed sample the arithmetic is `blend2x`'s, lane for lane. On
    /// detailed pictures most runs of eight have a refined sample; one block per sample cost
    /// about as much as its filter.
    func blendRow2x(_ y: Int, from start: Int, to end: Int, scratch: EdgeRefiner.Scratch) {
        let sums = scratch.sums.unsafelyUnwrapped, below = scratch.sumsBelow.unsafelyUnwrapped, alphas = scratch.blendAlpha.unsafelyUnwrapped
        let top = row(y), bottom = row(y + 1)
        var x = start
        while x + 8 <= end {
            let a = UnsafeRawPointer(alphas + x).loadUnaligned(as: SIMD8<Float>.self)
            if any(a .!= 0) {
                let upper = UnsafeRawPointer(sums + 2 * x).loadUnaligned(as: SIMD16<Float>.self)
                let lower = UnsafeRawPointer(below + 2 * x).loadUnaligned(as: SIMD16<Float>.self)
                let lo = twice(UnsafeRawPointer(scratch.low + x).loadUnaligned(as: SIMD8<Float>.self))
                let hi = twice(UnsafeRawPointer(scratch.high + x).loadUnaligned(as: SIMD8<Float>.self))
                let alpha = twice(a)
                @inline(__always) func store(_ values: SIMD16<Float>, _ out: UnsafeMutablePointer<UInt8>) {
                    let raw = UnsafeMutableRawPointer(out)
                    let lanczos = upscale_float_from_bytes16(raw.loadUnaligned(as: SIMD16<UInt8>.self))
                    let refined = upscale_clamp16(values, lo, hi)
                    // Truncation is `blend2x`'s floor here: the mix is within 0 ... 255.
                    raw.storeBytes(of: upscale_bytes_from_float16(lanczos + alpha * (refined - lanczos) + 0.5), as: SIMD16<UInt8>.self)
                }
                store(upper, top + 2 * x)
                store(lower, bottom + 2 * x)
            }
            x += 8
        }
        blendEach2x(y, from: x, to: end, scratch: scratch)
    }

    @inline(__always)
    func blend(_ value: Float, lo: Float, hi: Float, alpha: Float, x: Int, y: Int) {
        let out = row(y) + x
        let lanczos = Float(out.pointee)
        let refined = min(max(value, lo), hi)
        out.pointee = UInt8(lanczos + alpha * (refined - lanczos) + 0.5)
    }

    @inline(__always)
    func blend2x(_ values: SIMD4<Float>, lo: Float, hi: Float, alpha: Float, x: Int, y: Int) {
        let top = UnsafeMutableRawPointer(row(y) + x), bottom = UnsafeMutableRawPointer(row(y + 1) + x)
        // The four bytes in one integer: one vector move, no lane inserts.
        let word = UInt32(top.loadUnaligned(as: UInt16.self)) | UInt32(bottom.loadUnaligned(as: UInt16.self)) << 16
        let lanczos = float(SIMD4<UInt32>(truncatingIfNeeded: unsafeBitCast(word, to: SIMD4<UInt8>.self)))
        let out = unsafeBitCast(SIMD4<UInt8>(truncatingIfNeeded: mix(values, lanczos, lo: lo, hi: hi, alpha: alpha)), to: UInt32.self)
        top.storeBytes(of: UInt16(truncatingIfNeeded: out), as: UInt16.self)
        bottom.storeBytes(of: UInt16(truncatingIfNeeded: out >> 16), as: UInt16.self)
    }
}

extension Plane16: RefinedPlane {
    /// Sample by sample (deep 3x and 4x sources are rare; the 8-bit plane's is one vector).
    @inline(__always)
    func blendBlock(_ values: SIMD16<Float>, lo: Float, hi: Float, alpha: Float, mask: SIMD16<Float>, x: Int, y: Int, ratio: Int) {
        for py in 0..<ratio {
            for px in 0..<ratio { blend(values[4 * py + px], lo: lo, hi: hi, alpha: alpha, x: x + px, y: y + py) }
        }
    }

    @inline(__always)
    func blend(_ value: Float, lo: Float, hi: Float, alpha: Float, x: Int, y: Int) {
        let out = row(y) + x
        let lanczos = Float(out.pointee)
        let refined = min(max(value, lo), hi) * Float(1 << (bitDepth - 8))
        out.pointee = UInt16(lanczos + alpha * (refined - lanczos) + 0.5)
    }

    @inline(__always)
    func blend2x(_ values: SIMD4<Float>, lo: Float, hi: Float, alpha: Float, x: Int, y: Int) {
        let top = UnsafeMutableRawPointer(row(y) + x), bottom = UnsafeMutableRawPointer(row(y + 1) + x)
        let pair = SIMD2<UInt32>(top.loadUnaligned(as: UInt32.self), bottom.loadUnaligned(as: UInt32.self))
        let lanczos = float(SIMD4<UInt32>(truncatingIfNeeded: unsafeBitCast(pair, to: SIMD4<UInt16>.self)))
        let scale = Float(1 << (bitDepth - 8))
        let words = unsafeBitCast(SIMD4<UInt16>(truncatingIfNeeded: mix(values * scale, lanczos, lo: lo * scale, hi: hi * scale, alpha: alpha)),
                                  to: SIMD2<UInt32>.self)
        top.storeBytes(of: words[0], as: UInt32.self)
        bottom.storeBytes(of: words[1], as: UInt32.self)
    }
}
