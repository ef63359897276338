import Foundation

/// Learned edge-directed refinement of a 2x Lanczos luma plane (RAISR-style).
///
/// Every output sample is classified by the local gradient structure of the Lanczos
/// result — dominant orientation (`angles` bins), strength (3 bins) and coherence
/// (3 bins) of the 5x5 structure tensor — and by its output phase (x mod 2, y mod 2).
/// Each class has a `size`x`size` filter, fitted offline by least squares on real photos
/// (`upscale-bench train`), that maps the Lanczos neighbourhood to the true sample. Along
/// a coherent edge the filter interpolates along the edge rather than across it. The
/// result is clamped to the range of the 3x3 Lanczos neighbourhood, so refinement never
/// adds overshoot beyond Lanczos' own.
public struct EdgeRefiner: Sendable {
    public static let angles = 24
    public static let strengthBins = 3
    public static let coherenceBins = 3
    public static let phases = 4
    public static let bucketCount = angles * strengthBins * coherenceBins * phases

    public let size: Int
    /// Gradient-strength thresholds between the three strength bins (in sample units).
    public let strengthThresholds: (Float, Float)
    /// Coherence thresholds between the three coherence bins.
    public let coherenceThresholds: (Float, Float)
    /// `bucketCount * size * size` filter weights, bucket-major, row-major within a filter.
    public let weights: [Float]

    public init(size: Int, strengthThresholds: (Float, Float), coherenceThresholds: (Float, Float), weights: [Float]) {
        precondition(weights.count == EdgeRefiner.bucketCount * size * size, "filter data has the wrong size")
        self.size = size
        self.strengthThresholds = strengthThresholds
        self.coherenceThresholds = coherenceThresholds
        self.weights = weights
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

    /// Local structure of `plane` at (x, y): orientation in [0, π), gradient strength, coherence.
    /// Gradients are central differences (clamped one sample inside the plane); the tensor is
    /// their products summed over a 5x5 window, column sums first — the same order the fast
    /// path in `refine` uses, so training and refinement classify identically.
    @inline(__always)
    public static func structure(_ plane: Plane, x: Int, y: Int) -> (angle: Float, strength: Float, coherence: Float) {
        var sxx: Float = 0, syy: Float = 0, sxy: Float = 0
        let w = plane.width, h = plane.height
        for dx in -2...2 {
            let xx = min(max(x + dx, 1), w - 2)
            var cxx: Float = 0, cyy: Float = 0, cxy: Float = 0
            for dy in -2...2 {
                let yy = min(max(y + dy, 1), h - 2)
                let g = gradient(plane, x: xx, y: yy)
                cxx += g.x * g.x
                cyy += g.y * g.y
                cxy += g.x * g.y
            }
            sxx += cxx
            syy += cyy
            sxy += cxy
        }
        return classify(sxx: sxx, syy: syy, sxy: sxy)
    }

    @inline(__always)
    static func gradient(_ plane: Plane, x: Int, y: Int) -> (x: Float, y: Float) {
        let row = plane.row(y)
        return ((Float(row[x + 1]) - Float(row[x - 1])) * 0.5, (Float(plane.row(y + 1)[x]) - Float(plane.row(y - 1)[x])) * 0.5)
    }

    /// Orientation, strength and coherence from the summed tensor of a 5x5 window.
    @inline(__always)
    static func classify(sxx: Float, syy: Float, sxy: Float) -> (angle: Float, strength: Float, coherence: Float) {
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
    /// the angle only picks one of 24 bins, and libm's atan2f cost more than the filter.
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

    @inline(__always)
    public func bucket(angle: Float, strength: Float, coherence: Float, x: Int, y: Int) -> Int {
        let a = min(Int(angle / Float.pi * Float(EdgeRefiner.angles)), EdgeRefiner.angles - 1)
        let s = strength < strengthThresholds.0 ? 0 : (strength < strengthThresholds.1 ? 1 : 2)
        let c = coherence < coherenceThresholds.0 ? 0 : (coherence < coherenceThresholds.1 ? 1 : 2)
        let phase = (y & 1) * 2 + (x & 1)
        return ((a * EdgeRefiner.strengthBins + s) * EdgeRefiner.coherenceBins + c) * EdgeRefiner.phases + phase
    }

    /// The `size`x`size` neighbourhood of (x, y) with edge clamping, row-major, into `patch`.
    @inline(__always)
    public static func patch(_ plane: Plane, x: Int, y: Int, size: Int, into patch: UnsafeMutablePointer<Float>) {
        let r = size / 2
        var i = 0
        for dy in -r...r {
            let row = plane.row(min(max(y + dy, 0), plane.height - 1))
            for dx in -r...r {
                patch[i] = Float(row[min(max(x + dx, 0), plane.width - 1)])
                i += 1
            }
        }
    }

    /// The filters with each row padded to 16 weights, for one 16-lane multiply per row.
    public var paddedWeights: [Float] {
        var out = [Float](repeating: 0, count: EdgeRefiner.bucketCount * size * 16)
        for b in 0..<EdgeRefiner.bucketCount {
            for r in 0..<size {
                for k in 0..<size { out[(b * size + r) * 16 + k] = weights[(b * size + r) * size + k] }
            }
        }
        return out
    }

    /// Refines rows `rows` of `lanczos` (a 2x Lanczos upscale) into the same rows of `output`.
    /// Flat areas (the lowest strength class) keep the Lanczos samples.
    ///
    /// Per band: the rows the 9x9 filters read are converted to Float once (edge samples
    /// repeated into the padding), gradient products are computed once per row, and the 5x5
    /// tensor sums come from column sums — each output sample then costs a class lookup,
    /// nine 16-lane multiply-adds and a 3x3 clamp.
    public func refine(_ lanczos: Plane, into output: Plane, rows: Range<Int>, padded: [Float]) {
        precondition(size == 9, "the fast path is written for 9x9 filters")
        let width = lanczos.width, height = lanczos.height, r = size / 2
        let pad = 8, stride = width + 2 * pad + 16
        // Float rows y0-4 ... y1+4 (clamped to the plane), padded left and right with edge samples.
        let first = rows.lowerBound - r, count = rows.count + 2 * r
        let pixels = UnsafeMutablePointer<Float>.allocate(capacity: count * stride)
        defer { pixels.deallocate() }
        for i in 0..<count {
            let src = lanczos.row(min(max(first + i, 0), height - 1))
            let dst = pixels + i * stride + pad
            for x in -pad..<(width + pad + 16) { dst[x] = Float(src[min(max(x, 0), width - 1)]) }
        }
        // Gradient products for tensor rows y0-2 ... y1+2, at clamped positions as in `structure`.
        let tFirst = rows.lowerBound - 2, tCount = rows.count + 4
        let products = UnsafeMutablePointer<Float>.allocate(capacity: 3 * tCount * width)
        defer { products.deallocate() }
        for i in 0..<tCount {
            let yy = min(max(tFirst + i, 1), height - 2)
            let above = lanczos.row(yy - 1), row = lanczos.row(yy), below = lanczos.row(yy + 1)
            let pxx = products + (3 * i) * width, pyy = pxx + width, pxy = pyy + width
            for x in 0..<width {
                let xx = min(max(x, 1), width - 2)
                let gx = (Float(row[xx + 1]) - Float(row[xx - 1])) * 0.5
                let gy = (Float(below[xx]) - Float(above[xx])) * 0.5
                pxx[x] = gx * gx
                pyy[x] = gy * gy
                pxy[x] = gx * gy
            }
        }
        let columns = UnsafeMutablePointer<Float>.allocate(capacity: 3 * (width + 4))
        defer { columns.deallocate() }
        padded.withUnsafeBufferPointer { all in
            let filters = all.baseAddress!
            for y in rows {
                // Column sums over the five tensor rows, in dy order; index c holds column c-2 (clamped).
                let base = y - 2 - tFirst
                for c in 0..<(width + 4) {
                    let x = min(max(c - 2, 0), width - 1)
                    var cxx: Float = 0, cyy: Float = 0, cxy: Float = 0
                    for dy in 0..<5 {
                        let p = products + 3 * (base + dy) * width
                        cxx += p[x]
                        cyy += p[width + x]
                        cxy += p[2 * width + x]
                    }
                    columns[c] = cxx
                    columns[(width + 4) + c] = cyy
                    columns[2 * (width + 4) + c] = cxy
                }
                let out = output.row(y)
                let above = lanczos.row(max(y - 1, 0)), row = lanczos.row(y), below = lanczos.row(min(y + 1, height - 1))
                let centre = pixels + (y - first) * stride + pad
                for x in 0..<width {
                    var sxx: Float = 0, syy: Float = 0, sxy: Float = 0
                    for dx in 0..<5 {
                        sxx += columns[x + dx]
                        syy += columns[(width + 4) + x + dx]
                        sxy += columns[2 * (width + 4) + x + dx]
                    }
                    let s = EdgeRefiner.classify(sxx: sxx, syy: syy, sxy: sxy)
                    if s.strength < strengthThresholds.0 {
                        out[x] = row[x]
                        continue
                    }
                    var f = filters + bucket(angle: s.angle, strength: s.strength, coherence: s.coherence, x: x, y: y) * size * 16
                    var acc = SIMD16<Float>()
                    var src = centre + x - r - r * stride
                    for _ in 0..<9 {
                        acc += UnsafeRawPointer(f).loadUnaligned(as: SIMD16<Float>.self)
                            * UnsafeRawPointer(src).loadUnaligned(as: SIMD16<Float>.self)
                        f += 16
                        src += stride
                    }
                    let half = acc.lowHalf + acc.highHalf, quarter = half.lowHalf + half.highHalf
                    let value = (quarter[0] + quarter[2]) + (quarter[1] + quarter[3])
                    let x0 = max(x - 1, 0), x1 = min(x + 1, width - 1)
                    let lo = min(min(min(above[x0], above[x], above[x1]), min(row[x0], row[x], row[x1])), min(below[x0], below[x], below[x1]))
                    let hi = max(max(max(above[x0], above[x], above[x1]), max(row[x0], row[x], row[x1])), max(below[x0], below[x], below[x1]))
                    out[x] = UInt8(min(max(value.rounded(), Float(lo)), Float(hi)))
                }
            }
        }
    }
}
