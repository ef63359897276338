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
        abstract: "Fit EdgeRefiner's filters for one ratio on photos (libvips Lanczos3 downscale, least squares per class).")

    @Option(help: "Scale factor the filters are for: 2, 3 or 4.") var ratio = 2
    @Option(help: "Ridge weight pulling each filter towards plain Lanczos (per sample).") var ridge = 0.01
    @Option(help: "Standard deviation of Gaussian noise added to the low-resolution input (8-bit levels), so filters do not amplify the noise of real footage.")
    var noise = 0.0
    @Option(help: "Fraction of samples (by gradient strength) that keep Lanczos.") var flat = 0.5
    @Option(help: "Fade-in width above the strength threshold, as a fraction of the threshold.") var fade = 0.5
    @Option(help: "Largest noise gain (sum of squared weights) of a filter, as a fraction of plain Lanczos' for its phase (0: no bound). Measured: a bound of 1 cut the PSNR gain by more than half and the flicker only a little.")
    var maxGain = 0.0
    @Option(help: "Blend each filter with its two angle neighbours by this weight each (0 keeps them as fitted): neighbouring orientation classes then give closer results, so a sample whose orientation wobbles between frames does not flicker.")
    var angleBlend = 0.0
    @Option(help: "Turn off classes whose filters reduce the squared error per output sample by less than this (8-bit levels², on the training photos) compared with Lanczos: their samples keep Lanczos, which saves time and flicker.")
    var minGain = 0.0
    @Option(help: "Taps per axis each phase's filter may use (2 to 7): the ones nearest the output sample's position; the others are 0, or with --residual plain Lanczos'.")
    var support = 7
    @Flag(help: "Fit only the supported taps on top of plain Lanczos: the taps outside --support keep Lanczos' weights.")
    var residual = false
    @Flag(help: ArgumentHelp("Fit each phase's filter together with its half-turn partner's (the phase at the opposite corner of the block, its taps turned by 180°), so that one is the other turned.",
                             discussion: "A half turn negates the gradients and leaves the structure tensor, and so the class, as it was: the constraint is least squares over the training samples and their turned copies. Unconstrained fits were already 98.6% so (2x). With it the 2x filters' sums share folded neighbourhoods (EdgeRefiner.packFolded): half the multiplies."))
    var halfTurn = false
    @Option(help: "Swift file to write (default Sources/UpscaleCore/EdgeRefinerFiltersX<ratio>.swift).") var output: String?
    @Argument(help: "Training photos.") var photos: [String]

    func run() throws {
        guard (2...4).contains(ratio) else { throw ValidationError("--ratio is 2, 3 or 4") }
        guard (2...EdgeRefiner.window).contains(support) else { throw ValidationError("--support is 2 to \(EdgeRefiner.window)") }
        guard !halfTurn || (support == EdgeRefiner.window && !residual) else { throw ValidationError("--half-turn fits whole 7x7 filters: it takes no --support or --residual") }
        let n = EdgeRefiner.taps, phases = ratio * ratio, classes = EdgeRefiner.classCount
        let lanczos = EdgeRefiner.lanczosWeights(ratio: ratio)
        let probe = EdgeRefiner(ratio: ratio, strengthThresholds: (0, 0), coherenceThresholds: (0, 0), fade: 1,
                                weights: Array(repeating: lanczos, count: classes).flatMap { $0 })
        // Thresholds from the data: strength quantiles, coherence terciles of the refined samples.
        var pairs: [(hr: Plane, lr: Plane)] = []
        var strengths: [Float] = []
        for path in photos {
            let full = try ImagePlanes.loadLuma(path)
            let hr = ImageMetrics.crop(full, width: full.width / (2 * ratio) * 2 * ratio, height: full.height / (2 * ratio) * 2 * ratio)
            let lr = try ImagePlanes.resizeLanczos3(hr, scale: 1 / Double(ratio))
            if noise > 0 { addNoise(to: lr, sigma: noise, seed: UInt64(pairs.count + 1)) }
            pairs.append((hr, lr))
            let m = EdgeRefiner.margin
            let s = probe.analyze(lr).strength
            for y in m..<(lr.height - m) { for x in m..<(lr.width - m) { strengths.append(s[y * lr.width + x]) } }
        }
        strengths.sort()
        let t0 = strengths[Int(Double(strengths.count) * flat)]
        let t1 = strengths[Int(Double(strengths.count) * (1 + flat) / 2)]
        var coherences: [Float] = []
        let withStrength = EdgeRefiner(ratio: ratio, strengthThresholds: (t0, t1), coherenceThresholds: (0, 0), fade: 1,
                                       weights: probe.weights)
        for (_, lr) in pairs {
            let a = withStrength.analyze(lr)
            for i in a.classes.indices where a.classes[i] >= 0 { coherences.append(a.coherence[i]) }
        }
        coherences.sort()
        let ct = (coherences[coherences.count / 3], coherences[coherences.count * 2 / 3])
        let classifier = EdgeRefiner(ratio: ratio, strengthThresholds: (t0, t1), coherenceThresholds: ct,
                                     fade: Float(fade) * t0, weights: probe.weights)

        // Every refined training sample once per pass: its class, position, photo pair and 7x7 input patch.
        let maps = pairs.map { classifier.analyze($0.lr).classes }
        var patch = [Double](repeating: 0, count: n)
        func eachSample(_ body: (_ c: Int, _ x: Int, _ y: Int, _ hr: Plane, _ p: [Double]) -> Void) {
            for ((hr, lr), map) in zip(pairs, maps) {
                for y in 0..<lr.height {
                    for x in 0..<lr.width {
                        let c = Int(map[y * lr.width + x])
                        guard c >= 0 else { continue }
                        var i = 0
                        for dy in -3...3 { for dx in -3...3 { patch[i] = Double(lr[x + dx, y + dy]); i += 1 } }
                        body(c, x, y, hr, patch)
                    }
                }
            }
        }

        var ata = [Double](repeating: 0, count: classes * n * n)
        var atb = [Double](repeating: 0, count: classes * n * phases)
        var counts = [Int](repeating: 0, count: classes)
        eachSample { c, x, y, hr, p in
            ata.withUnsafeMutableBufferPointer { m in
                let base = c * n * n
                for i in 0..<n {
                    let pi = p[i], rowBase = base + i * n
                    for j in i..<n { m[rowBase + j] += pi * p[j] }
                }
            }
            atb.withUnsafeMutableBufferPointer { b in
                for py in 0..<ratio {
                    for px in 0..<ratio {
                        let target = Double(hr[ratio * x + px, ratio * y + py])
                        let base = (c * phases + py * ratio + px) * n
                        for i in 0..<n { b[base + i] += p[i] * target }
                    }
                }
            }
            counts[c] += 1
        }

        var weights = [Float](repeating: 0, count: classes * phases * n)
        for c in 0..<classes {
            // (AᵀA + λ·count·I) h = Aᵀb + λ·count·lanczos: few samples → plain Lanczos.
            let lambda = ridge * Double(max(counts[c], 1)) * 255 * 255
            var m = [Double](repeating: 0, count: n * n)
            for i in 0..<n {
                for j in i..<n {
                    m[i * n + j] = ata[c * n * n + i * n + j]
                    m[j * n + i] = m[i * n + j]
                }
                m[i * n + i] += lambda
            }
            for phase in 0..<phases {
                let limit = maxGain <= 0 ? Double.infinity : maxGain * (0..<n).map { Double(lanczos[phase * n + $0] * lanczos[phase * n + $0]) }.reduce(0, +)
                if halfTurn {
                    // Phase p and its partner q = phases - 1 - p: minimise both phases' errors with
                    // h_q = h_p turned (tap i ↔ n - 1 - i), that is least squares over the samples
                    // and their turned copies. Averaged with the turned system (the ridge term is
                    // its own turn), so λ weighs as in the unconstrained fit.
                    let partner = phases - 1 - phase
                    if partner < phase {
                        for i in 0..<n { weights[(c * phases + phase) * n + i] = weights[(c * phases + partner) * n + n - 1 - i] }
                        continue
                    }
                    var turned = [Double](repeating: 0, count: n * n)
                    for i in 0..<n { for j in 0..<n { turned[i * n + j] = (m[i * n + j] + m[(n - 1 - i) * n + n - 1 - j]) / 2 } }
                    let rhs = (0..<n).map { i in
                        (atb[(c * phases + phase) * n + i] + atb[(c * phases + partner) * n + n - 1 - i]) / 2
                            + lambda * Double(lanczos[phase * n + i] + lanczos[partner * n + n - 1 - i]) / 2
                    }
                    let h = try constrainedSolve(turned, rhs, n: n, maxGain: limit, scale: Double(max(counts[c], 1)) * 255 * 255)
                    for i in 0..<n { weights[(c * phases + phase) * n + i] = Float(h[i]) }
                    continue
                }
                let fitted = supportedTaps(phase: phase), k = fitted.count
                // Taps outside the support keep 0 or (--residual) Lanczos' weight; what they
                // contribute comes off the target.
                var fixed = [Double](repeating: 0, count: n)
                if residual { for i in 0..<n where !fitted.contains(i) { fixed[i] = Double(lanczos[phase * n + i]) } }
                var sub = [Double](repeating: 0, count: k * k)
                for (a, i) in fitted.enumerated() { for (b, j) in fitted.enumerated() { sub[a * k + b] = m[i * n + j] } }
                let rhs = fitted.map { i in
                    atb[(c * phases + phase) * n + i] + lambda * Double(lanczos[phase * n + i])
                        - (0..<n).reduce(0.0) { $0 + (i == $1 ? 0 : ata[c * n * n + min(i, $1) * n + max(i, $1)]) * fixed[$1] }
                }
                let h = try constrainedSolve(sub, rhs, n: k, maxGain: limit, scale: Double(max(counts[c], 1)) * 255 * 255)
                for i in 0..<n { weights[(c * phases + phase) * n + i] = Float(fixed[i]) }
                for (a, i) in fitted.enumerated() { weights[(c * phases + phase) * n + i] = Float(h[a]) }
            }
        }
        if angleBlend > 0 {
            // Classes are (angle, strength, coherence) with angle outermost; angles wrap around.
            let perAngle = classes / EdgeRefiner.angles * phases * n
            let fitted = weights
            let keep = Float(1 - 2 * angleBlend), side = Float(angleBlend)
            for a in 0..<EdgeRefiner.angles {
                let before = (a + EdgeRefiner.angles - 1) % EdgeRefiner.angles, after = (a + 1) % EdgeRefiner.angles
                for i in 0..<perAngle {
                    weights[a * perAngle + i] = keep * fitted[a * perAngle + i] + side * (fitted[before * perAngle + i] + fitted[after * perAngle + i])
                }
            }
        }
        // What each class gains over Lanczos on the training data, per output sample.
        var gain = [Double](repeating: 0, count: classes)
        eachSample { c, x, y, hr, p in
            for py in 0..<ratio {
                for px in 0..<ratio {
                    let phase = py * ratio + px
                    var fitted = 0.0, plain = 0.0
                    for i in 0..<n {
                        fitted += Double(weights[(c * phases + phase) * n + i]) * p[i]
                        plain += Double(lanczos[phase * n + i]) * p[i]
                    }
                    let target = Double(hr[ratio * x + px, ratio * y + py])
                    gain[c] += ((plain - target) * (plain - target) - (fitted - target) * (fitted - target)) / Double(phases)
                }
            }
        }
        let active = (0..<classes).map { counts[$0] > 0 && gain[$0] / Double(counts[$0]) >= minGain }
        let activeGain = (0..<classes).filter { active[$0] }.map { gain[$0] }.reduce(0, +)
        print(String(format: "gain over Lanczos on the training photos: %.3f levels² per refined sample (active classes)", activeGain / Double(max(1, counts.reduce(0, +)))))
        let total = counts.reduce(0, +)
        let path = output ?? "Sources/UpscaleCore/EdgeRefinerFiltersX\(ratio).swift"
        let kept = (0..<classes).filter { active[$0] }.map { counts[$0] }.reduce(0, +)
        print("active classes: \(active.filter { $0 }.count) of \(classes), holding \(kept) of \(total) samples")
        try writeSwift(to: path, refiner: EdgeRefiner(ratio: ratio, strengthThresholds: (t0, t1), coherenceThresholds: ct,
                                                        fade: Float(fade) * t0, weights: weights, active: active), samples: total)
        print("trained \(classes) classes x \(phases) phases on \(total) samples from \(photos.count) photos; " +
              "strength thresholds (\(t0), \(t1)), coherence thresholds \(ct); empty classes: \(counts.filter { $0 == 0 }.count); wrote \(path)")
    }

    /// The 7x7 window's taps (row-major indices) that a phase's filter fits: the `support`
    /// nearest its output position on each axis.
    private func supportedTaps(phase: Int) -> [Int] {
        func axis(_ p: Int) -> [Int] {
            let offset = (Double(p) + 0.5) / Double(ratio) - 0.5
            let first = max(-EdgeRefiner.window / 2, min(EdgeRefiner.window / 2 - support + 1, Int((offset - Double(support) / 2).rounded(.up))))
            return Array(first..<(first + support))
        }
        let r = EdgeRefiner.window / 2
        return axis(phase / ratio).flatMap { dy in axis(phase % ratio).map { dx in (dy + r) * EdgeRefiner.window + dx + r } }
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

    /// Solves (m + μ·I) h = rhs with the smallest μ ≥ 0 (bisection on a log scale) for which
    /// Σh² ≤ maxGain: least squares with a bound on how much noise the filter passes.
    private func constrainedSolve(_ m: [Double], _ rhs: [Double], n: Int, maxGain: Double, scale: Double) throws -> [Double] {
        func solved(_ mu: Double) throws -> [Double] {
            var shifted = m
            for i in 0..<n { shifted[i * n + i] += mu }
            return solve(try cholesky(shifted, n: n), rhs, n: n)
        }
        func gain(_ h: [Double]) -> Double { h.map { $0 * $0 }.reduce(0, +) }
        let free = try solved(0)
        if gain(free) <= maxGain { return free }
        var low = 0.0, high = 1e-6 * scale
        var best = try solved(high)
        while gain(best) > maxGain {
            low = high
            high *= 4
            best = try solved(high)
        }
        for _ in 0..<30 {
            let mid = (low + high) / 2
            let h = try solved(mid)
            if gain(h) > maxGain { low = mid } else { high = mid; best = h }
        }
        return best
    }

    /// Cholesky factor L (row-major, lower) of a symmetric positive definite matrix.
    private func cholesky(_ a: [Double], n: Int) throws -> [Double] {
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
        return l
    }

    /// Solves L Lᵀ x = b.
    private func solve(_ l: [Double], _ b: [Double], n: Int) -> [Double] {
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

    private func writeSwift(to path: String, refiner: EdgeRefiner, samples: Int) throws {
        var bytes = [UInt8]()
        bytes.reserveCapacity(refiner.weights.count * 4)
        for w in refiner.weights { withUnsafeBytes(of: w.bitPattern.littleEndian) { bytes.append(contentsOf: $0) } }
        let names = photos.map { URL(fileURLWithPath: $0).lastPathComponent }.joined(separator: ", ")
        let r = refiner.ratio, st = refiner.strengthThresholds, ct = refiner.coherenceThresholds
        let text = """
            // Generated by `upscale-bench train --ratio \(r) --ridge \(ridge) --noise \(noise) --flat \(flat) --fade \(fade) --max-gain \(maxGain) --angle-blend \(angleBlend) --min-gain \(minGain)\(halfTurn ? " --half-turn" : "")`; do not edit.
            // Training photos (\(photos.count), from Debian's opencv-doc, none used by the quality reports): \(names).
            // \(samples) samples; weights are little-endian Float32, base64.

            extension EdgeRefiner {
                /// Filters for \(r)x upscaling, fitted on real photos.
                public static let x\(r) = EdgeRefiner(
                    ratio: \(r), strengthThresholds: (\(st.0), \(st.1)), coherenceThresholds: (\(ct.0), \(ct.1)),
                    fade: \(refiner.fade), weights: decodeWeights(x\(r)Data),
                    active: "\(String(refiner.active.map { $0 ? "1" : "0" }))".map { $0 == "1" })

                private static let x\(r)Data = "\(Data(bytes).base64EncodedString())"
            }

            """
        try text.write(toFile: path, atomically: true, encoding: .utf8)
    }
}
