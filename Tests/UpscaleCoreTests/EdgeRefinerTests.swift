import Foundation
import UpscaleCore
import XCTest

final class EdgeRefinerTests: XCTestCase {
    /// A picture rendered at 8x8 supersampling: `inside(x, y)` in pixel units, 40 outside, 200 inside.
    private func render(width: Int, height: Int, inside: (Double, Double) -> Bool) -> Plane {
        let plane = Plane(width: width, height: height)
        for y in 0..<height {
            for x in 0..<width {
                var hits = 0
                for sy in 0..<8 { for sx in 0..<8 where inside(Double(x) + (Double(sx) + 0.5) / 8, Double(y) + (Double(sy) + 0.5) / 8) { hits += 1 } }
                plane[x, y] = UInt8((40 + 160 * Double(hits) / 64).rounded())
            }
        }
        return plane
    }

    private func upscale(_ lr: Plane, refined: Bool, threads: Int = 1) -> Plane {
        let scaler = FrameScaler(input: (lr.width, lr.height), output: (2 * lr.width, 2 * lr.height), layout: .gray,
                                 threads: threads, refiner: refined ? EdgeRefiner.x2 : nil)
        return scaler.scale(Frame(width: lr.width, height: lr.height, layout: .gray, planes: [lr])).planes[0]
    }

    /// RMS distance of the 50% contour from its best straight line, for an edge crossing columns.
    private func jaggedness(_ plane: Plane, columns: Range<Int>) -> Double {
        var points: [(Double, Double)] = []
        for x in columns {
            for y in 1..<plane.height where (Double(plane[x, y - 1]) - 120) * (Double(plane[x, y]) - 120) <= 0 && plane[x, y] != plane[x, y - 1] {
                let t = (120 - Double(plane[x, y - 1])) / (Double(plane[x, y]) - Double(plane[x, y - 1]))
                points.append((Double(x), Double(y - 1) + t))
                break
            }
        }
        let n = Double(points.count)
        let mx = points.map(\.0).reduce(0, +) / n, my = points.map(\.1).reduce(0, +) / n
        let slope = points.map { ($0.0 - mx) * ($0.1 - my) }.reduce(0, +) / points.map { ($0.0 - mx) * ($0.0 - mx) }.reduce(0, +)
        let residuals = points.map { $0.1 - (my + slope * ($0.0 - mx)) }
        return (residuals.map { $0 * $0 }.reduce(0, +) / n).squareRoot()
    }

    func testDiagonalEdgesComeOutStraighterThanLanczos() {
        for degrees in [20.0, 33.0, 52.0] {
            let angle = degrees * .pi / 180
            let hr = render(width: 192, height: 192) { x, y in (y - 96) * cos(angle) - (x - 96) * sin(angle) > 0 }
            let lr = TestImages.halve(hr)
            let plain = jaggedness(upscale(lr, refined: false), columns: 48..<144)
            let refined = jaggedness(upscale(lr, refined: true), columns: 48..<144)
            XCTAssertLessThan(refined, plain, "\(degrees)°: refined \(refined) vs Lanczos \(plain)")
        }
    }

    func testNoMoreOvershootThanLanczosAtAStep() {
        let hr = render(width: 96, height: 32) { x, _ in x > 40.3 }
        let lr = TestImages.halve(hr)
        let plain = upscale(lr, refined: false), refined = upscale(lr, refined: true)
        let p = plain.samples, r = refined.samples
        XCTAssertLessThanOrEqual(Int(r.max()!) - 200, Int(p.max()!) - 200)
        XCTAssertLessThanOrEqual(40 - Int(r.min()!), 40 - Int(p.min()!))
    }

    func testRefinedOutputIdenticalForAnyThreadCount() throws {
        let photo = try TestImages.pgm("baboon-crop.pgm")
        let one = upscale(photo, refined: true).samples
        XCTAssertEqual(upscale(photo, refined: true, threads: 2).samples, one)
        XCTAssertEqual(upscale(photo, refined: true, threads: 5).samples, one)
        XCTAssertNotEqual(upscale(photo, refined: false).samples, one)
    }

    func testTenBitPlanesAreRefinedAsTheirEightBitValues() throws {
        let photo = try TestImages.pgm("baboon-crop.pgm")
        let deep = Plane16(width: photo.width, height: photo.height, bitDepth: 10)
        for y in 0..<photo.height { for x in 0..<photo.width { deep[x, y] = UInt16(photo[x, y]) << 2 } }
        let size = (2 * photo.width, 2 * photo.height)
        let eight = upscale(photo, refined: true)
        let frame16 = Frame16(width: photo.width, height: photo.height, layout: .gray, planes: [deep])
        let refined = FrameScaler(input: (photo.width, photo.height), output: size, layout: .gray, threads: 2, refiner: .x2).scale(frame16).planes[0]
        let plain = FrameScaler(input: (photo.width, photo.height), output: size, layout: .gray).scale(frame16).planes[0]
        XCTAssertEqual(FrameScaler(input: (photo.width, photo.height), output: size, layout: .gray, threads: 1, refiner: .x2)
            .scale(frame16).planes[0].samples, refined.samples, "thread invariance")
        var changed = 0, total = 0, worst = 0
        for y in 0..<size.1 {
            for x in 0..<size.0 {
                let d = abs(Int(refined[x, y]) - 4 * Int(eight[x, y]))
                worst = max(worst, d)
                total += d
                if refined[x, y] != plain[x, y] { changed += 1 }
            }
        }
        // The same classes and filters; only the Lanczos base (Float here, Q14 at 8 bits) and rounding differ.
        XCTAssertLessThanOrEqual(worst, 8)
        XCTAssertLessThan(Double(total) / Double(size.0 * size.1), 1.5)
        XCTAssertGreaterThan(changed, size.0 * size.1 / 50, "the refinement changed the 10-bit picture")
    }

    func testFoldedSumsEqualTheUnfoldedOnesAt8And12Bits() throws {
        // The trained 2x filters in half-turn pairs, applied folded and unfolded: the same
        // integer sums, so the same output to the bit. At 12 bits the photo is spread over the
        // whole range (samples up to 4095), where the folded sums (s + s̄ up to 8190) are largest.
        let photo = try TestImages.pgm("baboon-crop.pgm")
        let x2 = EdgeRefiner.x2
        let unfolded = EdgeRefiner(ratio: 2, strengthThresholds: x2.strengthThresholds, coherenceThresholds: x2.coherenceThresholds,
                                   fade: x2.fade, weights: x2.weights, active: x2.active, folding: false)
        XCTAssertTrue(x2.folded)
        XCTAssertFalse(unfolded.folded)
        let size = (2 * photo.width, 2 * photo.height)
        let frame = Frame(width: photo.width, height: photo.height, layout: .gray, planes: [photo])
        let folded8 = FrameScaler(input: (photo.width, photo.height), output: size, layout: .gray, refiner: x2).scale(frame).planes[0]
        XCTAssertEqual(FrameScaler(input: (photo.width, photo.height), output: size, layout: .gray, refiner: unfolded).scale(frame).planes[0].samples,
                       folded8.samples)
        XCTAssertNotEqual(FrameScaler(input: (photo.width, photo.height), output: size, layout: .gray).scale(frame).planes[0].samples,
                          folded8.samples, "the refinement changed the picture")
        let deep = Plane16(width: photo.width, height: photo.height, bitDepth: 12)
        let lo = Int(photo.samples.min()!), hi = Int(photo.samples.max()!)
        for y in 0..<photo.height { for x in 0..<photo.width { deep[x, y] = UInt16((Int(photo[x, y]) - lo) * 4095 / (hi - lo)) } }
        let frame16 = Frame16(width: photo.width, height: photo.height, layout: .gray, planes: [deep])
        let folded12 = FrameScaler(input: (photo.width, photo.height), output: size, layout: .gray, refiner: x2).scale(frame16).planes[0]
        XCTAssertEqual(FrameScaler(input: (photo.width, photo.height), output: size, layout: .gray, refiner: unfolded).scale(frame16).planes[0].samples,
                       folded12.samples)
        XCTAssertEqual(deep.samples.max(), 4095, "the 12-bit picture reaches full scale")
    }

    func testRefinementOnlyAppliesAtTrainedRatios() throws {
        let photo = try TestImages.pgm("baboon-crop.pgm")
        let frame = Frame(width: photo.width, height: photo.height, layout: .gray, planes: [photo])
        let plain = FrameScaler(input: (160, 120), output: (240, 180), layout: .gray).scale(frame).planes[0].samples
        let asked = FrameScaler(input: (160, 120), output: (240, 180), layout: .gray, refiner: .x2)
        XCTAssertNil(asked.refiner)
        XCTAssertEqual(asked.scale(frame).planes[0].samples, plain)
        XCTAssertNil(EdgeRefiner.trained(input: (160, 120), output: (240, 180)))
        XCTAssertNil(EdgeRefiner.trained(input: (160, 120), output: (960, 720)))
        XCTAssertNil(EdgeRefiner.trained(input: (160, 120), output: (320, 360)))
        XCTAssertEqual(EdgeRefiner.trained(input: (160, 120), output: (320, 240))?.ratio, 2)
        XCTAssertEqual(EdgeRefiner.trained(input: (160, 120), output: (480, 360))?.ratio, 3)
        XCTAssertEqual(EdgeRefiner.trained(input: (160, 120), output: (640, 480))?.ratio, 4)
    }

    func testLanczosFiltersReproduceTheResampler() {
        // With every class's filters set to Lanczos itself, refinement may only clamp.
        let lr = render(width: 40, height: 30) { x, y in (x - 20) * (x - 20) + (y - 15) * (y - 15) < 90 }
        for ratio in [2, 4] {
            let lanczos = EdgeRefiner.lanczosWeights(ratio: ratio)
            let identity = EdgeRefiner(ratio: ratio, strengthThresholds: (0, 0), coherenceThresholds: (0.3, 0.6), fade: 1e-6,
                                       weights: Array(repeating: lanczos, count: EdgeRefiner.classCount).flatMap { $0 })
            let frame = Frame(width: lr.width, height: lr.height, layout: .gray, planes: [lr])
            let size = (lr.width * ratio, lr.height * ratio)
            let plain = FrameScaler(input: (lr.width, lr.height), output: size, layout: .gray).scale(frame).planes[0]
            let refined = FrameScaler(input: (lr.width, lr.height), output: size, layout: .gray, refiner: identity).scale(frame).planes[0]
            for y in (3 * ratio)..<(size.1 - 3 * ratio) {
                for x in (3 * ratio)..<(size.0 - 3 * ratio) where plain[x, y] > 45 && plain[x, y] < 195 {
                    XCTAssertLessThanOrEqual(abs(Int(refined[x, y]) - Int(plain[x, y])), 1, "x\(ratio) (\(x), \(y))")
                }
            }
        }
    }

    func testFastRefineMatchesPerSampleDefinition() throws {
        // The definition: classify each input sample (`analyze`), apply its class's filter for
        // every phase to the 7x7 input neighbourhood, clamp to the 3x3 input range, blend over
        // Lanczos by the strength weight. Samples under the threshold or at the margin stay Lanczos.
        let photo = try TestImages.pgm("baboon-crop.pgm")
        // The trained 2x filters come in half-turn pairs and are applied folded; the same with
        // one tap of every phase-0 filter moved are not, and take the unfolded layout.
        let x2 = EdgeRefiner.x2
        var moved = x2.weights
        for c in 0..<EdgeRefiner.classCount { moved[c * 4 * EdgeRefiner.taps + 10] += 0.01 }
        let unpaired = EdgeRefiner(ratio: 2, strengthThresholds: x2.strengthThresholds, coherenceThresholds: x2.coherenceThresholds,
                                   fade: x2.fade, weights: moved, active: x2.active)
        XCTAssertTrue(x2.folded)
        XCTAssertFalse(unpaired.folded)
        for refiner in [x2, unpaired, .x3, .x4] {
            let r = refiner.ratio, phases = r * r, n = EdgeRefiner.taps
            let frame = Frame(width: photo.width, height: photo.height, layout: .gray, planes: [photo])
            let size = (photo.width * r, photo.height * r)
            let lanczos = FrameScaler(input: (photo.width, photo.height), output: size, layout: .gray).scale(frame).planes[0]
            let fast = FrameScaler(input: (photo.width, photo.height), output: size, layout: .gray, threads: 2, refiner: refiner)
                .scale(frame).planes[0]
            let analysis = refiner.analyze(photo)
            var refinedCount = 0, differing = 0
            for y in 0..<photo.height {
                for x in 0..<photo.width {
                    let c = Int(analysis.classes[y * photo.width + x]) >= 0 && refiner.active[Int(analysis.classes[y * photo.width + x])]
                        ? Int(analysis.classes[y * photo.width + x]) : -1
                    var lo: UInt8 = 255, hi: UInt8 = 0
                    if c >= 0 {
                        refinedCount += 1
                        for yy in (y - 1)...(y + 1) { for xx in (x - 1)...(x + 1) { lo = min(lo, photo[xx, yy]); hi = max(hi, photo[xx, yy]) } }
                    }
                    for py in 0..<r {
                        for px in 0..<r {
                            let ox = r * x + px, oy = r * y + py
                            var expected = lanczos[ox, oy]
                            if c >= 0 {
                                var acc: Double = 0, k = 0
                                let w = (c * phases + py * r + px) * n
                                for dy in -3...3 {
                                    for dx in -3...3 { acc += Double(refiner.appliedWeight(at: w + k)) * Double(photo[x + dx, y + dy]); k += 1 }
                                }
                                let clamped = min(max(Float(acc), Float(lo)), Float(hi))
                                let alpha = refiner.weight(strength: analysis.strength[y * photo.width + x])
                                expected = UInt8((Float(expected) + alpha * (clamped - Float(expected))).rounded())
                            }
                            let got = fast[ox, oy]
                            XCTAssertLessThanOrEqual(abs(Int(got) - Int(expected)), 1, "x\(r) (\(ox), \(oy))")
                            if got != expected { differing += 1 }
                        }
                    }
                }
            }
            XCTAssertGreaterThan(refinedCount, photo.width * photo.height / 20, "x\(r): the photo has edges to refine")
            // 3x and 4x: only float summation order differs, which can move a value across a
            // rounding boundary. 2x sums Q14 weights in integers: exact, as here.
            XCTAssertLessThan(differing, r == 2 ? 1 : size.0 * size.1 / 500, "x\(r)")
        }
    }

    func testClassificationMatchesTheStructureTensorDefinition() throws {
        // The definition, in Double on a real photo: central-difference gradients (half the
        // difference of the two neighbours), their products summed over the 5x5 window, the
        // tensor's eigenvalues l1 ≥ l2; strength √(l1/25), coherence (√l1-√l2)/(√l1+√l2), the
        // orientation bin ⌊ψ·12/π⌋ of ψ = atan2(2·sxy, sxx-syy) in [0, 2π). A sample has a class
        // where its strength reaches the first threshold and that class is active. The vector
        // code computes the same sums in Float (exact for 8-bit samples); samples within a hair
        // of a bin boundary are left out.
        let photo = try TestImages.pgm("baboon-crop.pgm")
        let w = photo.width, h = photo.height, m = EdgeRefiner.margin
        for refiner in [EdgeRefiner.x2, .x3, .x4] {
            let analysis = refiner.analyze(photo)
            let s0 = Double(refiner.strengthThresholds.0), s1 = Double(refiner.strengthThresholds.1)
            let k0 = Double(refiner.coherenceThresholds.0), k1 = Double(refiner.coherenceThresholds.1)
            func sample(_ x: Int, _ y: Int) -> Double { Double(photo[x, y]) }
            var compared = 0, classified = 0, wrong: [String] = []
            for y in m..<(h - m) {
                for x in m..<(w - m) {
                    var sxx = 0.0, syy = 0.0, sxy = 0.0
                    for dy in -2...2 {
                        for dx in -2...2 {
                            let gx = (sample(x + dx + 1, y + dy) - sample(x + dx - 1, y + dy)) / 2
                            let gy = (sample(x + dx, y + dy + 1) - sample(x + dx, y + dy - 1)) / 2
                            sxx += gx * gx
                            syy += gy * gy
                            sxy += gx * gy
                        }
                    }
                    let t = (sxx + syy) / 2, root = (((sxx - syy) / 2) * ((sxx - syy) / 2) + sxy * sxy).squareRoot()
                    let l1 = t + root, l2 = max(t - root, 0)
                    let strength = (l1 / 25).squareRoot()
                    let got = Double(analysis.strength[y * w + x])
                    if abs(got - strength) > 1e-4 * max(1, strength) {
                        wrong.append("strength \(got), not \(strength), at (\(x), \(y))")
                    }
                    let coherence = l1 > 0 ? (l1.squareRoot() - l2.squareRoot()) / (l1.squareRoot() + l2.squareRoot()) : 0
                    var psi = atan2(sxy, (sxx - syy) / 2)
                    if psi < 0 { psi += 2 * Double.pi }
                    let bin = psi * 12 / Double.pi
                    // Within a hair of a threshold or a bin boundary either side is right.
                    let near = [strength - s0, strength - s1].contains { abs($0) < 1e-3 }
                        || [coherence - k0, coherence - k1].contains { abs($0) < 1e-4 }
                        || abs(bin - bin.rounded()) < 1e-4 || root < 1e-6
                    if near { continue }
                    compared += 1
                    var expected = -1
                    if strength >= s0 {
                        let c = ((min(Int(bin), EdgeRefiner.angles - 1) * 2) + (strength >= s1 ? 1 : 0)) * EdgeRefiner.coherenceBins
                            + (coherence >= k0 ? 1 : 0) + (coherence >= k1 ? 1 : 0)
                        if refiner.active[c] { expected = c }
                    }
                    if expected >= 0 { classified += 1 }
                    if Int(analysis.classes[y * w + x]) != expected {
                        wrong.append("class \(analysis.classes[y * w + x]), not \(expected), at (\(x), \(y))")
                    }
                }
            }
            XCTAssertEqual(wrong.count, 0, "x\(refiner.ratio): \(wrong.count) samples differ from the definition, first \(wrong.first ?? "")")
            XCTAssertGreaterThan(compared, (w - 2 * m) * (h - 2 * m) * 9 / 10, "x\(refiner.ratio): most samples are compared")
            XCTAssertGreaterThan(classified, (w - 2 * m) * (h - 2 * m) / 20, "x\(refiner.ratio): many samples have a class")
        }
    }
}
