import UpscaleCore
import XCTest

final class ResamplerTests: XCTestCase {
    private func scale(_ plane: Plane, to size: (Int, Int), kernel: Kernel = .lanczos3, threads: Int = 1, band: Int = 32) -> Plane {
        let scaler = FrameScaler(input: (plane.width, plane.height), output: size, layout: .gray,
                                 kernel: kernel, threads: threads, bandHeight: band)
        return scaler.scale(Frame(width: plane.width, height: plane.height, layout: .gray, planes: [plane])).planes[0]
    }

    private func assertMatchesReference(_ plane: Plane, to size: (Int, Int), kernel: Kernel = .lanczos3,
                                        file: StaticString = #filePath, line: UInt = #line) {
        let ours = scale(plane, to: size, kernel: kernel).samples
        let reference = ReferenceResampler.resample(
            plane, horizontal: SampleGrid(lumaInput: plane.width, lumaOutput: size.0),
            vertical: SampleGrid(lumaInput: plane.height, lumaOutput: size.1), kernel: kernel)
        let worst = zip(ours, reference).map { abs(Int($0) - Int($1)) }.max() ?? 0
        XCTAssertLessThanOrEqual(worst, 1, "\(plane.width)x\(plane.height) → \(size.0)x\(size.1) \(kernel)", file: file, line: line)
    }

    func testRealPhotoMatchesDoubleReferenceUpAndDown() throws {
        let photo = try TestImages.pgm("baboon-crop.pgm")
        for size in [(320, 240), (480, 360), (640, 480), (960, 720), (427, 240), (211, 157), (80, 60), (53, 41), (160, 120)] {
            assertMatchesReference(photo, to: size)
        }
        for kernel in [Kernel.lanczos2, .bicubic] {
            assertMatchesReference(photo, to: (320, 240), kernel: kernel)
            assertMatchesReference(photo, to: (70, 50), kernel: kernel)
        }
    }

    func testTinyAndOddSizesMatchReference() {
        for (w, h) in [(1, 1), (1, 7), (7, 1), (2, 3), (5, 5), (17, 3), (33, 9)] {
            let plane = TestImages.noise(width: w, height: h, seed: UInt32(w * 31 + h))
            for size in [(w * 2, h * 2), (w * 3 + 1, h + 2), (1, 1), (max(1, w / 2), max(1, h / 2)), (37, 19)] {
                assertMatchesReference(plane, to: size)
            }
        }
    }

    func testConstantPlaneStaysConstant() {
        for value in [UInt8(0), 1, 17, 128, 254, 255] {
            let plane = Plane(width: 23, height: 11, samples: [UInt8](repeating: value, count: 23 * 11))
            for size in [(46, 22), (69, 33), (7, 5), (100, 3)] {
                XCTAssertEqual(Set(scale(plane, to: size).samples), [value], "value \(value) to \(size)")
            }
        }
    }

    func testOutputIdenticalForAnyThreadCountAndBandHeight() throws {
        let photo = try TestImages.pgm("baboon-crop.pgm")
        let expected = scale(photo, to: (333, 250)).samples
        for (threads, band) in [(2, 32), (7, 32), (3, 1), (8, 5), (2, 1000)] {
            XCTAssertEqual(scale(photo, to: (333, 250), threads: threads, band: band).samples, expected,
                           "threads \(threads), band \(band)")
        }
    }

    func testChromaPlanesUseMPEG2Siting() throws {
        // 4:2:0 chroma is co-sited with even luma columns and centred between rows:
        // the frame scaler must map chroma with those offsets, not as a plain image.
        let photo = try TestImages.pgm("baboon-crop.pgm")
        let luma = Plane(width: photo.width * 2, height: photo.height * 2)
        let frame = Frame(width: luma.width, height: luma.height, layout: .yuv420,
                          planes: [luma, photo, TestImages.noise(width: photo.width, height: photo.height)])
        let scaler = FrameScaler(input: (luma.width, luma.height), output: (luma.width * 3 / 2, luma.height * 3 / 2),
                                 layout: .yuv420, threads: 2)
        let out = scaler.scale(frame)
        let reference = ReferenceResampler.resample(
            photo,
            horizontal: SampleGrid(lumaInput: luma.width, lumaOutput: out.width, subsampling: 2, siting: 0),
            vertical: SampleGrid(lumaInput: luma.height, lumaOutput: out.height, subsampling: 2, siting: 0.5),
            kernel: .lanczos3)
        let worst = zip(out.planes[1].samples, reference).map { abs(Int($0) - Int($1)) }.max() ?? 0
        XCTAssertLessThanOrEqual(worst, 1)
        XCTAssertEqual(out.planes[1].width, out.width / 2)
    }

    func testFilterBankWeightsSumToOneAndStayInside() {
        for (input, output) in [(10, 20), (1920, 3840), (1440, 3840), (7, 3), (100, 1), (1, 50)] {
            let bank = FilterBank(grid: SampleGrid(lumaInput: input, lumaOutput: output), kernel: .lanczos3)
            for i in 0..<output {
                let sum = (0..<bank.taps).reduce(0) { $0 + Int(bank.coefficients[i * bank.taps + $1]) }
                XCTAssertEqual(sum, FilterBank.one)
                XCTAssertGreaterThanOrEqual(bank.starts[i], 0)
                XCTAssertLessThanOrEqual(Int(bank.starts[i]) + bank.taps, input)
            }
        }
    }
}
