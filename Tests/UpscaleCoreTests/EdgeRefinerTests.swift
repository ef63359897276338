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

    /// 2x2 box average: the anti-aliased low-resolution input.
    private func halve(_ plane: Plane) -> Plane {
        let out = Plane(width: plane.width / 2, height: plane.height / 2)
        for y in 0..<out.height {
            for x in 0..<out.width {
                let s = Int(plane[2 * x, 2 * y]) + Int(plane[2 * x + 1, 2 * y]) + Int(plane[2 * x, 2 * y + 1]) + Int(plane[2 * x + 1, 2 * y + 1])
                out[x, y] = UInt8((s + 2) / 4)
            }
        }
        return out
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
            let lr = halve(hr)
            let plain = jaggedness(upscale(lr, refined: false), columns: 48..<144)
            let refined = jaggedness(upscale(lr, refined: true), columns: 48..<144)
            XCTAssertLessThan(refined, plain, "\(degrees)°: refined \(refined) vs Lanczos \(plain)")
        }
    }

    func testNoMoreOvershootThanLanczosAtAStep() {
        let hr = render(width: 96, height: 32) { x, _ in x > 40.3 }
        let lr = halve(hr)
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

    func testRefinementOnlyAppliesAtExactly2x() throws {
        let photo = try TestImages.pgm("baboon-crop.pgm")
        let frame = Frame(width: photo.width, height: photo.height, layout: .gray, planes: [photo])
        let plain = FrameScaler(input: (160, 120), output: (240, 180), layout: .gray).scale(frame).planes[0].samples
        let asked = FrameScaler(input: (160, 120), output: (240, 180), layout: .gray, refiner: .x2)
        XCTAssertNil(asked.refiner)
        XCTAssertEqual(asked.scale(frame).planes[0].samples, plain)
    }

    func testFastRefineMatchesPerPixelDefinition() throws {
        // The per-pixel definition: classify with `structure`, apply the class filter to the
        // clamped 9x9 neighbourhood, clamp to the 3x3 Lanczos range; flat pixels stay Lanczos.
        let photo = try TestImages.pgm("baboon-crop.pgm")
        let lanczos = upscale(photo, refined: false)
        let fast = upscale(photo, refined: true)
        let refiner = EdgeRefiner.x2
        let n = refiner.size * refiner.size
        let patch = UnsafeMutablePointer<Float>.allocate(capacity: n)
        defer { patch.deallocate() }
        var differing = 0
        for y in 0..<lanczos.height {
            for x in 0..<lanczos.width {
                let s = EdgeRefiner.structure(lanczos, x: x, y: y)
                var expected = lanczos[x, y]
                if s.strength >= refiner.strengthThresholds.0 {
                    let b = refiner.bucket(angle: s.angle, strength: s.strength, coherence: s.coherence, x: x, y: y)
                    EdgeRefiner.patch(lanczos, x: x, y: y, size: refiner.size, into: patch)
                    var acc: Float = 0
                    for k in 0..<n { acc += refiner.weights[b * n + k] * patch[k] }
                    var lo: UInt8 = 255, hi: UInt8 = 0
                    for yy in max(y - 1, 0)...min(y + 1, lanczos.height - 1) {
                        for xx in max(x - 1, 0)...min(x + 1, lanczos.width - 1) {
                            lo = min(lo, lanczos[xx, yy])
                            hi = max(hi, lanczos[xx, yy])
                        }
                    }
                    expected = UInt8(min(max(acc.rounded(), Float(lo)), Float(hi)))
                }
                let got = fast[x, y]
                XCTAssertLessThanOrEqual(abs(Int(got) - Int(expected)), 1, "(\(x), \(y))")
                if got != expected { differing += 1 }
            }
        }
        // Only float summation order differs, which can move a value across a rounding boundary.
        XCTAssertLessThan(differing, lanczos.width * lanczos.height / 1000)
    }
}
