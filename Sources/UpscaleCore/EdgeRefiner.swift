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
    @inline(__always)
    public static func structure(_ plane: Plane, x: Int, y: Int) -> (angle: Float, strength: Float, coherence: Float) {
        var sxx: Float = 0, syy: Float = 0, sxy: Float = 0
        let w = plane.width, h = plane.height
        for dy in -2...2 {
            let yy = min(max(y + dy, 1), h - 2)
            let above = plane.row(yy - 1), row = plane.row(yy), below = plane.row(yy + 1)
            for dx in -2...2 {
                let xx = min(max(x + dx, 1), w - 2)
                let gx = (Float(row[xx + 1]) - Float(row[xx - 1])) * 0.5
                let gy = (Float(below[xx]) - Float(above[xx])) * 0.5
                sxx += gx * gx
                syy += gy * gy
                sxy += gx * gy
            }
        }
        sxx /= 25
        syy /= 25
        sxy /= 25
        let trace = sxx + syy
        let root = ((sxx - syy) * (sxx - syy) + 4 * sxy * sxy).squareRoot()
        let l1 = max(0, (trace + root) / 2), l2 = max(0, (trace - root) / 2)
        var angle = 0.5 * atan2(2 * sxy, sxx - syy)
        if angle < 0 { angle += Float.pi }
        let r1 = l1.squareRoot(), r2 = l2.squareRoot()
        let coherence = r1 + r2 > 1e-6 ? (r1 - r2) / (r1 + r2) : 0
        return (angle, r1, coherence)
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

    /// Refines rows `rows` of `lanczos` (a 2x Lanczos upscale) into the same rows of `output`.
    /// Flat areas (the lowest strength class) keep the Lanczos samples.
    public func refine(_ lanczos: Plane, into output: Plane, rows: Range<Int>) {
        let n = size * size, r = size / 2
        let patch = UnsafeMutablePointer<Float>.allocate(capacity: n)
        defer { patch.deallocate() }
        let width = lanczos.width, height = lanczos.height
        weights.withUnsafeBufferPointer { all in
            for y in rows {
                let out = output.row(y)
                let above = lanczos.row(max(y - 1, 0)), row = lanczos.row(y), below = lanczos.row(min(y + 1, height - 1))
                let interiorRow = y >= r && y < height - r
                for x in 0..<width {
                    let s = EdgeRefiner.structure(lanczos, x: x, y: y)
                    if s.strength < strengthThresholds.0 {
                        out[x] = row[x]
                        continue
                    }
                    let filter = all.baseAddress! + bucket(angle: s.angle, strength: s.strength, coherence: s.coherence, x: x, y: y) * n
                    var acc: Float = 0
                    if interiorRow && x >= r && x < width - r {
                        var f = filter
                        for dy in -r...r {
                            let src = lanczos.row(y + dy) + (x - r)
                            for k in 0..<size { acc += f[k] * Float(src[k]) }
                            f += size
                        }
                    } else {
                        EdgeRefiner.patch(lanczos, x: x, y: y, size: size, into: patch)
                        for k in 0..<n { acc += filter[k] * patch[k] }
                    }
                    var lo: UInt8 = 255, hi: UInt8 = 0
                    for xx in max(x - 1, 0)...min(x + 1, width - 1) {
                        lo = min(lo, above[xx], row[xx], below[xx])
                        hi = max(hi, above[xx], row[xx], below[xx])
                    }
                    out[x] = UInt8(min(max(acc.rounded(), Float(lo)), Float(hi)))
                }
            }
        }
    }
}
