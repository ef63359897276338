import UpscaleCore
import XCTest

final class RGBLayoutTests: XCTestCase {
    /// Four real-content planes of one size: two photo crops, one inverted, and an alpha
    /// made from a photo too (so refinement would visibly change it if it touched alpha).
    private func planes() throws -> [Plane] {
        let baboon = try TestImages.pgm("baboon-crop.pgm"), butterfly = try TestImages.pgm("butterfly-crop.pgm")
        let w = baboon.width, h = baboon.height
        let crop = Plane(width: w, height: h), inverted = Plane(width: w, height: h)
        for y in 0..<h {
            for x in 0..<w {
                crop[x, y] = butterfly[x + 20, y + 20]
                inverted[x, y] = 255 - butterfly[x, y]
            }
        }
        let alpha = Plane(width: w, height: h)
        for y in 0..<h { for x in 0..<w { alpha[x, y] = butterfly[x + 40, y + 30] } }
        return [crop, baboon, inverted, alpha]
    }

    private func gray(_ p: Plane, refined: Bool) -> [UInt8] {
        FrameScaler(input: (p.width, p.height), output: (2 * p.width, 2 * p.height), layout: .gray, refiner: refined ? .x2 : nil)
            .scale(Frame(width: p.width, height: p.height, layout: .gray, planes: [p])).planes[0].samples
    }

    func testColourPlanesAreRefinedAloneAndAlphaKeepsLanczos() throws {
        let p = try planes()
        let w = p[0].width, h = p[0].height
        for threads in [1, 3] {
            let rgba = FrameScaler(input: (w, h), output: (2 * w, 2 * h), layout: .rgba, threads: threads, refiner: .x2)
                .scale(Frame(width: w, height: h, layout: .rgba, planes: p))
            XCTAssertEqual(rgba.planes.count, 4)
            for c in 0..<3 {
                // Each colour plane: exactly what refining it as a grey picture gives.
                XCTAssertTrue(rgba.planes[c].samples == gray(p[c], refined: true), "plane \(c), \(threads) thread(s)")
                XCTAssertFalse(rgba.planes[c].samples == gray(p[c], refined: false), "plane \(c) was refined")
            }
            XCTAssertTrue(rgba.planes[3].samples == gray(p[3], refined: false), "alpha is plain Lanczos")
            XCTAssertFalse(gray(p[3], refined: true) == gray(p[3], refined: false), "refining this alpha would have changed it")
        }
        let rgb = FrameScaler(input: (w, h), output: (3 * w, 3 * h), layout: .rgb, refiner: .x3)
            .scale(Frame(width: w, height: h, layout: .rgb, planes: Array(p.prefix(3))))
        XCTAssertEqual(rgb.planes.map(\.width), [3 * w, 3 * w, 3 * w])
        XCTAssertEqual(ChromaLayout.rgb.detailPlanes, 0..<3)
        XCTAssertEqual(ChromaLayout.yuv420.detailPlanes, 0..<1)
    }

    func testVideoWithAlphaRefinesLumaOnlyAndKeepsItsHold() throws {
        let p = try planes()
        let w = p[0].width, h = p[0].height
        let yuva = FrameScaler(input: (w, h), output: (2 * w, 2 * h), layout: .yuva444, threads: 2, refiner: .x2)
            .scale(Frame(width: w, height: h, layout: .yuva444, planes: p))
        XCTAssertEqual(yuva.planes.map(\.width), [2 * w, 2 * w, 2 * w, 2 * w])
        XCTAssertTrue(yuva.planes[0].samples == gray(p[0], refined: true), "luma is refined")
        for c in 1..<4 {
            XCTAssertTrue(yuva.planes[c].samples == gray(p[c], refined: false), "plane \(c) is plain Lanczos")
        }
        XCTAssertNotNil(FrameScaler(input: (w, h), output: (2 * w, 2 * h), layout: .yuva444, refiner: .x2, hold: TemporalHold()).hold,
                        "video luma keeps the temporal hold with alpha beside it")
    }

    func testRGBLayoutsIgnoreTheTemporalHold() throws {
        let p = try planes()
        let w = p[0].width, h = p[0].height
        let scaler = FrameScaler(input: (w, h), output: (2 * w, 2 * h), layout: .rgb, refiner: .x2, hold: TemporalHold())
        XCTAssertNil(scaler.hold, "the hold is for video luma")
        XCTAssertNotNil(FrameScaler(input: (w, h), output: (2 * w, 2 * h), layout: .yuv420, refiner: .x2, hold: TemporalHold()).hold)
    }
}
