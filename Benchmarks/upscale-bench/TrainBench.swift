import ArgumentParser
import Foundation
import UpscaleCore
import UpscaleImages

/// Fits the refinement filters (see EdgeRefiner) by regularized least squares on real
/// photos and writes them as a Swift source file for UpscaleCore. Training photos must be
/// disjoint from the photos the quality protocol reports on.
struct TrainBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "train",
        abstract: "Fit EdgeRefiner's x2 filters on photos (libvips Lanczos3 downscale, our Lanczos3 upscale, least squares per class).")

    @Option(help: "Filter size (odd).") var size = 9
    @Option(help: "Ridge weight pulling each filter towards plain Lanczos (per sample).") var ridge = 0.02
    @Option(help: "Standard deviation of Gaussian noise added to the low-resolution input (8-bit levels), so filters do not amplify the noise of real footage.")
    var noise = 0.0
    @Option(help: "Swift file to write.") var output = "Sources/UpscaleCore/EdgeRefinerFilters.swift"
    @Argument(help: "Training photos.") var photos: [String]

    func run() throws {
        let n = size * size
        let buckets = EdgeRefiner.bucketCount
        // Thresholds from the data: strength and coherence terciles over all training samples.
        var pairs: [(Plane, Plane)] = []
        var strengths: [Float] = [], coherences: [Float] = []
        for path in photos {
            let full = try ImagePlanes.loadLuma(path)
            let hr = ImageMetrics.crop(full, width: full.width / 4 * 4, height: full.height / 4 * 4)
            let lr = try ImagePlanes.resizeLanczos3(hr, scale: 0.5)
            if noise > 0 { addNoise(to: lr, sigma: noise, seed: UInt64(pairs.count + 1)) }
            let up = FrameScaler(input: (lr.width, lr.height), output: (hr.width, hr.height), layout: .gray, threads: 2)
                .scale(Frame(width: lr.width, height: lr.height, layout: .gray, planes: [lr])).planes[0]
            pairs.append((hr, up))
            for y in stride(from: 4, to: up.height - 4, by: 3) {
                for x in stride(from: 4, to: up.width - 4, by: 3) {
                    let s = EdgeRefiner.structure(up, x: x, y: y)
                    strengths.append(s.strength)
                    coherences.append(s.coherence)
                }
            }
        }
        strengths.sort()
        coherences.sort()
        let st = (strengths[strengths.count / 3], strengths[strengths.count * 2 / 3])
        let ct = (coherences[coherences.count / 3], coherences[coherences.count * 2 / 3])
        let classifier = EdgeRefiner(size: size, strengthThresholds: st, coherenceThresholds: ct,
                                     weights: [Float](repeating: 0, count: buckets * n))

        var ata = [Double](repeating: 0, count: buckets * n * n)
        var atb = [Double](repeating: 0, count: buckets * n)
        var counts = [Int](repeating: 0, count: buckets)
        let patch = UnsafeMutablePointer<Float>.allocate(capacity: n)
        defer { patch.deallocate() }
        var p = [Double](repeating: 0, count: n)
        for (hr, up) in pairs {
            let margin = size / 2 + 4
            for y in margin..<(up.height - margin) {
                for x in margin..<(up.width - margin) {
                    let s = EdgeRefiner.structure(up, x: x, y: y)
                    let b = classifier.bucket(angle: s.angle, strength: s.strength, coherence: s.coherence, x: x, y: y)
                    EdgeRefiner.patch(up, x: x, y: y, size: size, into: patch)
                    for i in 0..<n { p[i] = Double(patch[i]) }
                    let target = Double(hr[x, y])
                    ata.withUnsafeMutableBufferPointer { m in
                        let base = b * n * n
                        for i in 0..<n {
                            let pi = p[i]
                            let rowBase = base + i * n
                            for j in i..<n { m[rowBase + j] += pi * p[j] }
                        }
                    }
                    for i in 0..<n { atb[b * n + i] += p[i] * target }
                    counts[b] += 1
                }
            }
        }

        var weights = [Float](repeating: 0, count: buckets * n)
        for b in 0..<buckets {
            // (AᵀA + λ·count·I) h = Aᵀb + λ·count·δ: few samples → plain Lanczos (δ at the centre).
            let lambda = ridge * Double(max(counts[b], 1)) * 255 * 255
            var m = [Double](repeating: 0, count: n * n)
            var rhs = [Double](repeating: 0, count: n)
            for i in 0..<n {
                for j in i..<n {
                    m[i * n + j] = ata[b * n * n + i * n + j]
                    m[j * n + i] = m[i * n + j]
                }
                m[i * n + i] += lambda
                rhs[i] = atb[b * n + i]
            }
            rhs[n / 2] += lambda
            let h = try solveSymmetric(m, rhs, n: n)
            for i in 0..<n { weights[b * n + i] = Float(h[i]) }
        }
        try writeSwift(size: size, st: st, ct: ct, weights: weights, samples: counts.reduce(0, +))
        print("trained \(buckets) classes on \(counts.reduce(0, +)) samples from \(photos.count) photos; " +
              "strength thresholds \(st), coherence thresholds \(ct); empty classes: \(counts.filter { $0 == 0 }.count); wrote \(output)")
    }

    /// Deterministic Gaussian noise (Box-Muller over a 64-bit LCG), clamped to 0...255.
    private func addNoise(to plane: Plane, sigma: Double, seed: UInt64) {
        var state = seed &* 0x9E37_79B9_7F4A_7C15
        func uniform() -> Double {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return (Double(state >> 11) + 0.5) / 9_007_199_254_740_992
        }
        for y in 0..<plane.height {
            for x in 0..<plane.width {
                let g = (-2 * log(uniform())).squareRoot() * cos(2 * .pi * uniform())
                plane[x, y] = UInt8(min(max((Double(plane[x, y]) + sigma * g).rounded(), 0), 255))
            }
        }
    }

    /// Cholesky solve of a symmetric positive definite system.
    private func solveSymmetric(_ a: [Double], _ b: [Double], n: Int) throws -> [Double] {
        var l = [Double](repeating: 0, count: n * n)
        for i in 0..<n {
            for j in 0...i {
                var s = a[i * n + j]
                for k in 0..<j { s -= l[i * n + k] * l[j * n + k] }
                if i == j {
                    guard s > 0 else { throw ValidationError("normal equations are not positive definite") }
                    l[i * n + i] = s.squareRoot()
                } else {
                    l[i * n + j] = s / l[j * n + j]
                }
            }
        }
        var y = [Double](repeating: 0, count: n)
        for i in 0..<n {
            var s = b[i]
            for k in 0..<i { s -= l[i * n + k] * y[k] }
            y[i] = s / l[i * n + i]
        }
        var x = [Double](repeating: 0, count: n)
        for i in stride(from: n - 1, through: 0, by: -1) {
            var s = y[i]
            for k in (i + 1)..<n { s -= l[k * n + i] * x[k] }
            x[i] = s / l[i * n + i]
        }
        return x
    }

    private func writeSwift(size: Int, st: (Float, Float), ct: (Float, Float), weights: [Float], samples: Int) throws {
        var bytes = [UInt8]()
        bytes.reserveCapacity(weights.count * 4)
        for w in weights { withUnsafeBytes(of: w.bitPattern.littleEndian) { bytes.append(contentsOf: $0) } }
        let names = photos.map { URL(fileURLWithPath: $0).lastPathComponent }.joined(separator: ", ")
        let text = """
            // Generated by `upscale-bench train --size \(size) --ridge \(ridge) --noise \(noise)`; do not edit.
            // Training photos (\(photos.count), from Debian's opencv-doc, none used by the quality reports): \(names).
            // \(samples) samples; weights are little-endian Float32, base64.

            extension EdgeRefiner {
                /// Filters for 2x upscaling, fitted on real photos.
                public static let x2 = EdgeRefiner(
                    size: \(size), strengthThresholds: (\(st.0), \(st.1)), coherenceThresholds: (\(ct.0), \(ct.1)),
                    weights: decodeWeights(x2Data))

                private static let x2Data = "\(Data(bytes).base64EncodedString())"
            }

            """
        try text.write(toFile: output, atomically: true, encoding: .utf8)
    }
}
