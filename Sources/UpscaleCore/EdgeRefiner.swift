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
    /// The same weights laid out for the inner loop (see `pack`).
    let packed: [Float]

    public var phases: Int { ratio * ratio }

    public init(ratio: Int, strengthThresholds: (Float, Float), coherenceThresholds: (Float, Float), fade: Float,
                weights: [Float]) {
        precondition((2...4).contains(ratio), "refinement is for 2x, 3x and 4x")
        precondition(weights.count == EdgeRefiner.classCount * ratio * ratio * EdgeRefiner.taps, "filter data has the wrong size")
        self.ratio = ratio
        self.strengthThresholds = strengthThresholds
        self.coherenceThresholds = coherenceThresholds
        self.fade = fade
        self.weights = weights
        packed = EdgeRefiner.pack(weights, ratio: ratio)
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

    /// 2x: per class and filter row, 32 floats: for taps 0...7 (7 is 0) the four phases.
    /// 3x/4x: per class, for each tap, the phases as 16 floats (unused lanes 0).
    static func pack(_ weights: [Float], ratio: Int) -> [Float] {
        let phases = ratio * ratio, w = window
        if ratio == 2 {
            var out = [Float](repeating: 0, count: classCount * w * phases * 8)
            for c in 0..<classCount {
                for p in 0..<phases {
                    for dy in 0..<w {
                        for dx in 0..<w {
                            out[((c * w + dy) * 8 + dx) * phases + p] = weights[(c * phases + p) * taps + dy * w + dx]
                        }
                    }
                }
            }
            return out
        }
        var out = [Float](repeating: 0, count: classCount * taps * 16)
        for c in 0..<classCount {
            for p in 0..<phases {
                for t in 0..<taps { out[(c * taps + t) * 16 + p] = weights[(c * phases + p) * taps + t] }
            }
        }
        return out
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

    /// Orientation in [0, π), strength and coherence from a tensor summed over the 5x5 window.
    @inline(__always)
    static func structure(sxx: Float, syy: Float, sxy: Float) -> (angle: Float, strength: Float, coherence: Float) {
        let a = sxx / 25, b = syy / 25, c = sxy / 25
        let trace = a + b
        let root = ((a - b) * (a - b) + 4 * c * c).squareRoot()
        let l1 = max(0, (trace + root) / 2), l2 = max(0, (trace - root) / 2)
        var angle = 0.5 * fastAtan2(2 * c, a - b)
        if angle < 0 { angle += Float.pi }
        let r1 = l1.squareRoot(), r2 = l2.squareRoot()
        let coherence = r1 + r2 > 1e-6 ? (r1 - r2) / (r1 + r2) : 0
        return (angle, r1, coherence)
    }

    /// atan2 to within 2e-6 rad (an 11th-order odd polynomial on [0, 1] with octant folding);
    /// the angle only picks one of 24 bins.
    @inline(__always)
    static func fastAtan2(_ y: Float, _ x: Float) -> Float {
        let ax = abs(x), ay = abs(y)
        let big = max(ax, ay), small = min(ax, ay)
        guard big > 0 else { return 0 }
        let t = small / big, t2 = t * t
        var r = t * (0.99997726 + t2 * (-0.33262347 + t2 * (0.19354346 + t2 * (-0.11643287 + t2 * (0.05265332 + t2 * -0.01172120)))))
        if ay > ax { r = Float.pi / 2 - r }
        if x < 0 { r = Float.pi - r }
        return y < 0 ? -r : r
    }

    /// Class index of a structure whose strength is at least the first threshold.
    @inline(__always)
    public func classIndex(angle: Float, strength: Float, coherence: Float) -> Int {
        let a = min(Int(angle * (Float(EdgeRefiner.angles) / Float.pi)), EdgeRefiner.angles - 1)
        let s = strength < strengthThresholds.1 ? 0 : 1
        let c = coherence < coherenceThresholds.0 ? 0 : (coherence < coherenceThresholds.1 ? 1 : 2)
        return (a * 2 + s) * EdgeRefiner.coherenceBins + c
    }

    /// How much of the refined result replaces Lanczos at this strength (0 below the threshold).
    @inline(__always)
    public func weight(strength: Float) -> Float {
        min(max((strength - strengthThresholds.0) / fade, 0), 1)
    }

    /// Input samples at least this far from every border are refined; the rest keep Lanczos.
    public static let margin = 3

    /// The structure of every refinable input sample, computed by the same code `refine` uses:
    /// strength and coherence (0 at the margin) and class index (-1 where the strength is under the threshold).
    public func analyze(_ source: Plane) -> (strength: [Float], coherence: [Float], classes: [Int32]) {
        let w = source.width, h = source.height
        var strength = [Float](repeating: 0, count: w * h), classes = [Int32](repeating: -1, count: w * h)
        var coherence = strength
        let scratch = Scratch(width: w)
        let m = EdgeRefiner.margin
        guard w > 2 * m, h > 2 * m else { return (strength, coherence, classes) }
        scratch.start(source, at: m)
        for y in m..<(h - m) {
            scratch.advance(source, row: y)
            for x in m..<(w - m) {
                let s = scratch.structure(at: x)
                strength[y * w + x] = s.strength
                coherence[y * w + x] = s.coherence
                if s.strength >= strengthThresholds.0 {
                    classes[y * w + x] = Int32(classIndex(angle: s.angle, strength: s.strength, coherence: s.coherence))
                }
            }
        }
        return (strength, coherence, classes)
    }

    /// Refines the output rows of input rows `rows`: `output` holds the Lanczos upscale of
    /// `source` by `ratio` in those rows, and is updated in place. `scratch` belongs to the
    /// calling worker and was made for `source.width`.
    public func refine(_ source: Plane, into output: Plane, rows: Range<Int>, scratch: Scratch) {
        let w = source.width, h = source.height, m = EdgeRefiner.margin
        let first = max(rows.lowerBound, m), end = min(rows.upperBound, h - m)
        guard w > 2 * m, first < end else { return }
        let t0 = strengthThresholds.0
        // The tensor sums' largest eigenvalue is 25·strength².
        let limit = 25 * t0 * t0
        packed.withUnsafeBufferPointer { all in
            let filters = all.baseAddress!
            scratch.start(source, at: first)
            for y in first..<end {
                scratch.advance(source, row: y, limit: limit)
                let edge = scratch.edge
                var x = m
                while x < w - m {
                    // Skip 16 flat samples at a time.
                    if x + 16 <= w - m, !any(UnsafeRawPointer(edge + x).loadUnaligned(as: SIMD16<Float>.self) .>= 0) {
                        x += 16
                        continue
                    }
                    if edge[x] >= 0 {
                        let s = scratch.structure(at: x)
                        if s.strength >= t0 {
                            let c = classIndex(angle: s.angle, strength: s.strength, coherence: s.coherence)
                            if ratio == 2 {
                                apply2(filters + c * EdgeRefiner.window * 4 * 8, scratch: scratch, x: x, y: y,
                                       alpha: weight(strength: s.strength), output: output)
                            } else {
                                applyWide(filters + c * EdgeRefiner.taps * 16, scratch: scratch, x: x, y: y,
                                          alpha: weight(strength: s.strength), output: output)
                            }
                        }
                    }
                    x += 1
                }
            }
        }
    }

    /// Range of the 3x3 input neighbourhood of (x, current row).
    @inline(__always)
    static func localRange(_ scratch: Scratch, x: Int) -> (Float, Float) {
        let a = scratch.sampleRow(-1), b = scratch.sampleRow(0), c = scratch.sampleRow(1)
        let lo = min(min(min(a[x - 1], a[x], a[x + 1]), min(b[x - 1], b[x], b[x + 1])), min(c[x - 1], c[x], c[x + 1]))
        let hi = max(max(max(a[x - 1], a[x], a[x + 1]), max(b[x - 1], b[x], b[x + 1])), max(c[x - 1], c[x], c[x + 1]))
        return (lo, hi)
    }

    /// Clamps `value` to `range`, blends it over the Lanczos sample at `out` by `alpha`, stores it.
    @inline(__always)
    static func store(_ value: Float, range: (Float, Float), alpha: Float, into out: UnsafeMutablePointer<UInt8>) {
        let lanczos = Float(out.pointee)
        let refined = min(max(value, range.0), range.1)
        out.pointee = UInt8(lanczos + alpha * (refined - lanczos) + 0.5)
    }

    /// 2x: per filter row, taps 0-3 and 4-7 each repeated for the four phases (16 lanes:
    /// tap-major, phase-minor) times the packed weights; the four tap groups then summed.
    @inline(__always)
    func apply2(_ f: UnsafePointer<Float>, scratch: Scratch, x: Int, y: Int, alpha: Float, output: Plane) {
        var acc = SIMD16<Float>()
        var w = UnsafeRawPointer(f)
        for dy in -3...3 {
            let v = UnsafeRawPointer(scratch.sampleRow(dy) + x - 3).loadUnaligned(as: SIMD8<Float>.self)
            let low = SIMD16<Float>(v[0], v[0], v[0], v[0], v[1], v[1], v[1], v[1], v[2], v[2], v[2], v[2], v[3], v[3], v[3], v[3])
            let high = SIMD16<Float>(v[4], v[4], v[4], v[4], v[5], v[5], v[5], v[5], v[6], v[6], v[6], v[6], v[7], v[7], v[7], v[7])
            acc += w.loadUnaligned(as: SIMD16<Float>.self) * low
            acc += w.loadUnaligned(fromByteOffset: 64, as: SIMD16<Float>.self) * high
            w += 128
        }
        let half = acc.lowHalf + acc.highHalf
        let v = half.lowHalf + half.highHalf
        let range = EdgeRefiner.localRange(scratch, x: x)
        let top = output.row(2 * y) + 2 * x, bottom = top + output.stride
        EdgeRefiner.store(v[0], range: range, alpha: alpha, into: top)
        EdgeRefiner.store(v[1], range: range, alpha: alpha, into: top + 1)
        EdgeRefiner.store(v[2], range: range, alpha: alpha, into: bottom)
        EdgeRefiner.store(v[3], range: range, alpha: alpha, into: bottom + 1)
    }

    /// 3x/4x: every tap broadcast against all phases at once (one 16-lane vector of phases per tap).
    @inline(__always)
    func applyWide(_ f: UnsafePointer<Float>, scratch: Scratch, x: Int, y: Int, alpha: Float, output: Plane) {
        var acc = SIMD16<Float>()
        var w = f
        for dy in -3...3 {
            let row = scratch.sampleRow(dy) + x - 3
            var part = SIMD16<Float>()
            for dx in 0..<7 {
                part += UnsafeRawPointer(w).loadUnaligned(as: SIMD16<Float>.self) * SIMD16<Float>(repeating: row[dx])
                w += 16
            }
            acc += part
        }
        let range = EdgeRefiner.localRange(scratch, x: x)
        for py in 0..<ratio {
            let out = output.row(ratio * y + py) + ratio * x
            for px in 0..<ratio {
                EdgeRefiner.store(acc[py * ratio + px], range: range, alpha: alpha, into: out + px)
            }
        }
    }

    /// Per-worker rows for the refinement: the last 8 input rows as Float, the last 8 rows of
    /// gradient products, and the tensor sums of the current row. Rows carry 16 floats of
    /// padding on both sides so vector loops can run past the ends.
    public final class Scratch: @unchecked Sendable {
        let width: Int
        let stride: Int
        let samples: UnsafeMutablePointer<Float>
        let products: UnsafeMutablePointer<Float>
        let sums: UnsafeMutablePointer<Float>
        /// Per sample of the current row: ≥ 0 where the strength reaches the refinement threshold.
        let edge: UnsafeMutablePointer<Float>
        private var current = 0

        public init(width: Int) {
            self.width = width
            stride = (width + 15) / 16 * 16 + 48
            let count = 8 * stride + 3 * 8 * stride + 6 * stride + stride
            let all = UnsafeMutablePointer<Float>.allocate(capacity: count)
            all.initialize(repeating: 0, count: count)
            samples = all + 16
            products = all + 8 * stride + 16
            sums = all + 32 * stride + 16
            edge = all + 38 * stride + 16
        }

        deinit { (samples - 16).deallocate() }

        /// Input row `current + dy` as Float.
        @inline(__always) func sampleRow(_ dy: Int) -> UnsafeMutablePointer<Float> { samples + ((current + dy) & 7) * stride }
        @inline(__always) func productRow(_ y: Int, _ k: Int) -> UnsafeMutablePointer<Float> { products + ((y & 7) * 3 + k) * stride }

        /// Prepares rows for the input row `y` (rows y-3 ... y+2 and their products).
        func start(_ source: Plane, at y: Int) {
            for k in (y - 3)...(y + 2) { convert(source, row: k) }
            for k in (y - 2)...(y + 1) { computeProducts(row: k) }
        }

        /// Moves to input row `y` (after `start` at some earlier row, one row at a time).
        func advance(_ source: Plane, row y: Int, limit: Float = 0) {
            current = y
            convert(source, row: y + 3)
            computeProducts(row: y + 2)
            sumTensor(row: y, limit: limit)
        }

        private func convert(_ source: Plane, row y: Int) {
            let src = source.row(y), dst = samples + (y & 7) * stride
            var x = 0
            while x + 16 <= width {
                let bytes = UnsafeRawPointer(src + x).loadUnaligned(as: SIMD16<UInt8>.self)
                // The 2^23 trick: the byte in the low mantissa bits of 8388608.0.
                let bits = SIMD16<UInt32>(truncatingIfNeeded: bytes) | 0x4B00_0000
                UnsafeMutableRawPointer(dst + x).storeBytes(of: unsafeBitCast(bits, to: SIMD16<Float>.self) - 8_388_608, as: SIMD16<Float>.self)
                x += 16
            }
            while x < width { dst[x] = Float(src[x]); x += 1 }
        }

        /// Central-difference gradient products of row y (reads rows y-1 ... y+1).
        private func computeProducts(row y: Int) {
            let above = samples + ((y - 1) & 7) * stride, row = samples + (y & 7) * stride
            let below = samples + ((y + 1) & 7) * stride
            let pxx = productRow(y, 0), pyy = productRow(y, 1), pxy = productRow(y, 2)
            var x = 0
            while x < width {
                let gx = (load(row + x + 1) - load(row + x - 1)) * 0.5
                let gy = (load(below + x) - load(above + x)) * 0.5
                storeVector(gx * gx, pxx + x)
                storeVector(gy * gy, pyy + x)
                storeVector(gx * gy, pxy + x)
                x += 16
            }
        }

        /// Column sums of the five product rows around y, then 5-wide row sums: the 5x5 tensor
        /// (sxx, syy, sxy rows). Also marks each sample whose largest eigenvalue reaches
        /// `limit`, without a square root: l1 = t + √q with t = (sxx+syy)/2, q = ((sxx-syy)/2)² + sxy²,
        /// so l1 ≥ limit ⇔ q - max(limit - t, 0)² ≥ 0, stored in `edge`.
        func sumTensor(row y: Int, limit: Float) {
            for k in 0..<3 {
                let r0 = productRow(y - 2, k), r1 = productRow(y - 1, k), r2 = productRow(y, k)
                let r3 = productRow(y + 1, k), r4 = productRow(y + 2, k)
                let column = sums + (3 + k) * stride
                var x = -16
                while x < width + 16 {
                    storeVector(((load(r0 + x) + load(r1 + x)) + (load(r2 + x) + load(r3 + x))) + load(r4 + x), column + x)
                    x += 16
                }
            }
            let cxx = sums + 3 * stride, cyy = sums + 4 * stride, cxy = sums + 5 * stride
            var x = 0
            while x < width {
                let a = box(cxx + x), b = box(cyy + x), c = box(cxy + x)
                storeVector(a, sums + x)
                storeVector(b, sums + stride + x)
                storeVector(c, sums + 2 * stride + x)
                let half = (a - b) * 0.5, gap = pointwiseMax(SIMD16<Float>(repeating: limit) - (a + b) * 0.5, SIMD16<Float>())
                storeVector(half * half + c * c - gap * gap, edge + x)
                x += 16
            }
        }

        @inline(__always) private func box(_ p: UnsafePointer<Float>) -> SIMD16<Float> {
            ((load(p - 2) + load(p - 1)) + (load(p) + load(p + 1))) + load(p + 2)
        }

        @inline(__always) func structure(at x: Int) -> (angle: Float, strength: Float, coherence: Float) {
            EdgeRefiner.structure(sxx: sums[x], syy: sums[stride + x], sxy: sums[2 * stride + x])
        }

        @inline(__always) private func load(_ p: UnsafePointer<Float>) -> SIMD16<Float> {
            UnsafeRawPointer(p).loadUnaligned(as: SIMD16<Float>.self)
        }

        @inline(__always) private func storeVector(_ v: SIMD16<Float>, _ p: UnsafeMutablePointer<Float>) {
            UnsafeMutableRawPointer(p).storeBytes(of: v, as: SIMD16<Float>.self)
        }
    }
}
