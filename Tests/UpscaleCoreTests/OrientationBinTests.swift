@testable import UpscaleCore
import XCTest

/// The refinement's orientation classes: ⌊ψ·12/π⌋ of ψ = atan2(y, x) in [0, 2π), by comparisons.
final class OrientationBinTests: XCTestCase {
    private func expected(_ y: Float, _ x: Float) -> (bin: Int, margin: Double) {
        var psi = atan2(Double(y), Double(x))
        if psi < 0 { psi += 2 * Double.pi }
        let v = psi * 12 / Double.pi, margin = abs(v - v.rounded())
        // Exactly on a boundary (up to Double's rounding of atan2): the bin above it.
        return (min(Int((margin < 1e-9 ? v.rounded() : v).rounded(.down)), 23), margin)
    }

    func testBinsMatchTheArctangentAwayFromBoundaries() {
        var rng = SystemRandomNumberGenerator()
        var checked = 0, nearBoundary = 0
        for round in 0..<20_000 {
            var y = SIMD16<Float>(), x = SIMD16<Float>()
            for i in 0..<16 {
                // Tensor values of real pictures: multiples of 1/4 (8-bit) and larger spreads.
                let scale: Float = round % 2 == 0 ? 1000 : 4
                y[i] = Float.random(in: -scale...scale, using: &rng).rounded() / (round % 2 == 0 ? 1 : 4)
                x[i] = Float.random(in: -scale...scale, using: &rng).rounded() / (round % 2 == 0 ? 1 : 4)
            }
            let bins = orientationBin(y, x)
            for i in 0..<16 where x[i] != 0 || y[i] != 0 {
                let e = expected(y[i], x[i])
                // Within float rounding of tan 15° / tan 30° of a boundary either bin is right.
                if e.margin < 1e-4 && e.margin >= 1e-9 { nearBoundary += 1; continue }
                XCTAssertEqual(Int(bins[i]), e.bin, "y \(y[i]) x \(x[i])")
                checked += 1
            }
        }
        XCTAssertGreaterThan(checked, 300_000)
        XCTAssertLessThan(nearBoundary, checked / 1000)
    }

    func testAxesAndDiagonalsFallInTheBinTheyStart() {
        // ψ = 0°, 45°, 90°, ... exactly: the boundary belongs to the bin above it.
        let cases: [(Float, Float, Int32)] = [
            (0, 5, 0), (5, 5, 3), (5, 0, 6), (5, -5, 9), (0, -5, 12), (-5, -5, 15), (-5, 0, 18), (-5, 5, 21),
            (-0.0, 5, 0), (5, -0.0, 6), (-0.0, -5, 12),
        ]
        for (y, x, bin) in cases {
            XCTAssertEqual(orientationBin(SIMD16(repeating: y), SIMD16(repeating: x))[0], bin, "y \(y) x \(x)")
        }
    }
}
