import UpscaleCore
import XCTest

final class HighBitDepthTests: XCTestCase {
    /// The real photo crop widened to `bits` bits, with low bits from a fixed pattern so every bit matters.
    private func photo16(bits: Int) throws -> Plane16 {
        let photo = try TestImages.pgm("baboon-crop.pgm")
        let noise = TestImages.noise(width: photo.width, height: photo.height, seed: 3)
        let shift = bits - 8
        let samples = zip(photo.samples, noise.samples).map { UInt16(Int($0) << shift | (Int($1) & ((1 << shift) - 1))) }
        return Plane16(width: photo.width, height: photo.height, bitDepth: bits, samples: samples)
    }

    private func scale(_ plane: Plane16, to size: (Int, Int), threads: Int = 1) -> Plane16 {
        FrameScaler(input: (plane.width, plane.height), output: size, layout: .gray, threads: threads)
            .scale(Frame16(width: plane.width, height: plane.height, layout: .gray, planes: [plane])).planes[0]
    }

    func testMatchesDoubleReferenceWithinFourCodes() throws {
        for bits in [10, 12, 16] {
            let plane = try photo16(bits: bits)
            for size in [(320, 240), (480, 360), (640, 480), (960, 240), (427, 240), (53, 41), (1, 1)] {
                XCTAssertLessThanOrEqual(ReferenceResampler.worstDifference(scale(plane, to: size), from: plane), 4, "\(bits)-bit to \(size)")
            }
        }
    }

    func testEveryWidthAgainstTheReference() {
        // 16-bit rows go through 32-output blocks and a per-sample tail: every tail length.
        for w in 1...67 {
            for h in [1, 4] {
                let noise = TestImages.noise(width: w, height: h, seed: UInt32(w * 7 + h))
                let plane = Plane16(width: w, height: h, bitDepth: 10, samples: noise.samples.map { UInt16($0) << 2 | UInt16($0 >> 6) })
                for size in [(2 * w, 2 * h), (4 * w, h), (max(1, w * 8 / 3), h), (max(1, w / 2), h)] {
                    XCTAssertLessThanOrEqual(ReferenceResampler.worstDifference(scale(plane, to: size), from: plane), 4, "\(w)x\(h) → \(size)")
                }
            }
        }
    }

    func testConstantsStayAndValuesStayInRange() {
        for (bits, value) in [(10, 1023), (10, 64), (12, 4000), (16, 65535), (16, 0)] {
            let plane = Plane16(width: 21, height: 9, bitDepth: bits, samples: [UInt16](repeating: UInt16(value), count: 21 * 9))
            XCTAssertEqual(Set(scale(plane, to: (63, 20)).samples), [UInt16(value)], "\(bits)-bit \(value)")
        }
        // A hard black/white edge rings above the maximum under Lanczos: it must clamp, not wrap.
        let edge = Plane16(width: 16, height: 4, bitDepth: 10, samples: (0..<64).map { $0 % 16 < 8 ? 0 : 1023 })
        XCTAssertLessThanOrEqual(Int(scale(edge, to: (48, 8)).samples.max()!), 1023)
    }

    func testIdenticalForAnyThreadCount() throws {
        let plane = try photo16(bits: 10)
        let one = scale(plane, to: (333, 250)).samples
        XCTAssertEqual(scale(plane, to: (333, 250), threads: 2).samples, one)
        XCTAssertEqual(scale(plane, to: (333, 250), threads: 7).samples, one)
    }
}
