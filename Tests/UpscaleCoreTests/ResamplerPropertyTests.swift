import UpscaleCore
import XCTest

/// Properties a correct centre-aligned Lanczos resampler has, checked on the core.
final class ResamplerPropertyTests: XCTestCase {
    private func scale(_ plane: Plane, to size: (Int, Int), kernel: Kernel = .lanczos3) -> Plane {
        FrameScaler(input: (plane.width, plane.height), output: size, layout: .gray, kernel: kernel, threads: 2)
            .scale(Frame(width: plane.width, height: plane.height, layout: .gray, planes: [plane])).planes[0]
    }

    func testEveryWidthAndHeightAgainstTheReference() {
        // Vector bodies and scalar tails of every length, up and down, all ratios named in the issue.
        for w in 1...67 {
            for h in 1...9 {
                let plane = TestImages.noise(width: w, height: h, seed: UInt32(w * 13 + h))
                for size in [(2 * w, 2 * h), (3 * w, h), (4 * w, 4 * h), (6 * w, 2 * h), (max(1, w * 8 / 3), max(1, h * 8 / 3)), (max(1, w / 2), max(1, (h + 1) / 2))] {
                    XCTAssertLessThanOrEqual(ReferenceResampler.worstDifference(scale(plane, to: size), from: plane), 1, "\(w)x\(h) → \(size)")
                }
            }
        }
    }

    func testStrideWiderThanWidthIsIgnored() throws {
        let photo = try TestImages.pgm("baboon-crop.pgm")
        let wide = Plane(width: photo.width, height: photo.height, stride: photo.width + 200)
        for y in 0..<photo.height {
            for x in 0..<photo.width { wide[x, y] = photo[x, y] }
            for x in photo.width..<wide.stride { wide.row(y)[x] = 255 }  // garbage beyond the width
        }
        XCTAssertEqual(scale(wide, to: (320, 240)).samples, scale(photo, to: (320, 240)).samples)
    }

    func testLinearRampIsReproducedAwayFromBorders() {
        // Lanczos reproduces linear functions: a horizontal ramp stays a ramp at the new scale.
        let ramp = Plane(width: 64, height: 8, samples: (0..<(64 * 8)).map { UInt8(40 + 2 * ($0 % 64)) })
        let out = scale(ramp, to: (128, 8))
        for x in 12..<116 {
            let expected = 40 + 2 * ((Double(x) + 0.5) / 2 - 0.5)
            XCTAssertEqual(Double(out[x, 4]), expected, accuracy: 1.0, "x \(x)")
        }
    }

    func testUpscaledDotKeepsItsCentroid() {
        // A dot at (20, 13) maps to output (2·20 + 0.5, 2·13 + 0.5) under centre alignment.
        let dot = Plane(width: 40, height: 30)
        dot[20, 13] = 200
        for kernel in Kernel.allCases {
            let out = scale(dot, to: (80, 60), kernel: kernel)
            var sum = 0.0, cx = 0.0, cy = 0.0
            for y in 0..<60 { for x in 0..<80 { let v = Double(out[x, y]); sum += v; cx += v * Double(x); cy += v * Double(y) } }
            XCTAssertEqual(cx / sum, 40.5, accuracy: 0.05, "\(kernel)")
            XCTAssertEqual(cy / sum, 26.5, accuracy: 0.05, "\(kernel)")
        }
    }

    func testDownscalingIsAntialiased() {
        // A one-pixel checkerboard has no content a 4x smaller picture can show: it must go grey.
        let board = Plane(width: 64, height: 64, samples: (0..<(64 * 64)).map { (($0 % 64) + ($0 / 64)) % 2 == 0 ? 0 : 255 })
        let out = scale(board, to: (16, 16))
        var worst = 0
        for y in 2..<14 { for x in 2..<14 { worst = max(worst, abs(Int(out[x, y]) - 128)) } }
        XCTAssertLessThanOrEqual(worst, 2, "away from the clamped borders")
        XCTAssertLessThanOrEqual(out.samples.map { abs(Int($0) - 128) }.max()!, 6, "at the borders")
    }

    func testEveryChromaLayoutScalesEachPlaneAtItsOwnSize() throws {
        let photo = try TestImages.pgm("baboon-crop.pgm")
        for layout in [ChromaLayout.yuv420, .yuv422, .yuv444] {
            let planes = (0..<3).map { index -> Plane in
                let size = layout.planeSize(plane: index, width: 160, height: 120)
                let p = Plane(width: size.width, height: size.height)
                for y in 0..<size.height { for x in 0..<size.width { p[x, y] = photo[x, y] } }
                return p
            }
            let frame = Frame(width: 160, height: 120, layout: layout, planes: planes)
            let out = FrameScaler(input: (160, 120), output: (321, 241), layout: layout, threads: 3).scale(frame)
            for index in 0..<3 {
                let sub = layout.subsampling(plane: index), site = layout.siting(plane: index)
                let expected = ReferenceResampler.resample(
                    planes[index],
                    horizontal: SampleGrid(lumaInput: 160, lumaOutput: 321, subsampling: sub.x, siting: site.x),
                    vertical: SampleGrid(lumaInput: 120, lumaOutput: 241, subsampling: sub.y, siting: site.y), kernel: .lanczos3)
                XCTAssertEqual(out.planes[index].width, layout.planeSize(plane: index, width: 321, height: 241).width)
                let worst = zip(out.planes[index].samples, expected).map { abs(Int($0) - Int($1)) }.max() ?? 0
                XCTAssertLessThanOrEqual(worst, 1, "\(layout) plane \(index)")
            }
        }
    }
}
