import Foundation
import UpscaleCore
import XCTest

final class ImageMetricsTests: XCTestCase {
    func testIdenticalPlanesScoreInfinityAndOne() throws {
        let photo = try TestImages.pgm("baboon-crop.pgm")
        XCTAssertEqual(ImageMetrics.psnr(photo, photo), .infinity)
        XCTAssertEqual(ImageMetrics.ssim(photo, photo, border: 4), 1, accuracy: 1e-12)
    }

    func testKnownNoiseGivesAnalyticPSNR() throws {
        // ±3 in a checkerboard: MSE is exactly 9, PSNR = 10·log10(255²/9) = 38.588 dB.
        let photo = try TestImages.pgm("baboon-crop.pgm")
        let clipped = Plane(width: photo.width, height: photo.height, samples: photo.samples.map { min(max($0, 3), 252) })
        let noisy = Plane(width: photo.width, height: photo.height)
        for y in 0..<photo.height {
            for x in 0..<photo.width {
                noisy[x, y] = UInt8(Int(clipped[x, y]) + ((x + y) % 2 == 0 ? 3 : -3))
            }
        }
        XCTAssertEqual(ImageMetrics.psnr(clipped, noisy), 10 * log10(65025.0 / 9), accuracy: 1e-9)
        XCTAssertEqual(ImageMetrics.psnr(clipped, noisy, border: 8), 10 * log10(65025.0 / 9), accuracy: 1e-9)
        let ssim = ImageMetrics.ssim(clipped, noisy)
        XCTAssertLessThan(ssim, 1)
        XCTAssertGreaterThan(ssim, 0.5)
    }

    func testBorderIsExcluded() throws {
        let photo = try TestImages.pgm("baboon-crop.pgm")
        let damaged = Plane(width: photo.width, height: photo.height, samples: photo.samples)
        for x in 0..<photo.width { damaged[x, 0] = 0; damaged[x, photo.height - 1] = 255 }
        XCTAssertLessThan(ImageMetrics.psnr(photo, damaged), 40)
        XCTAssertEqual(ImageMetrics.psnr(photo, damaged, border: 1), .infinity)
        XCTAssertEqual(ImageMetrics.ssim(photo, damaged, border: 1), 1, accuracy: 1e-12)
    }

    func testSSIMOfAConstantOffsetMatchesTheFormula() {
        // Flat planes a and a+d: SSIM = (2ab + C1)/(a² + b² + C1) since variances are zero.
        let a = Plane(width: 32, height: 32, samples: [UInt8](repeating: 100, count: 1024))
        let b = Plane(width: 32, height: 32, samples: [UInt8](repeating: 120, count: 1024))
        let c1 = (0.01 * 255.0) * (0.01 * 255.0)
        XCTAssertEqual(ImageMetrics.ssim(a, b), (2 * 100 * 120 + c1) / (100 * 100 + 120 * 120 + c1), accuracy: 1e-9)
    }
}
