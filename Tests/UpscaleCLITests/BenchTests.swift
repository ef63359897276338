import Foundation
import XCTest

/// The bench's machine-readable output: the shape other tools and the README rely on.
final class BenchTests: XCTestCase {
    private func bench(_ arguments: [String]) throws -> [String: Any] {
        let process = Process()
        process.executableURL = CLITests.binary.deletingLastPathComponent().appendingPathComponent("upscale-bench")
        process.arguments = arguments
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0)
        return try XCTUnwrap(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    func testCoreJSONHasEveryMethodAndField() throws {
        let clip = CLITests.fixtures.appendingPathComponent("street-2s.mp4").path
        let json = try bench(["core", "--input", clip, "--from", "192x144", "--to", "384x288", "--frames", "2", "--runs", "1", "--json"])
        XCTAssertEqual(json["from"] as? String, "192x144")
        XCTAssertEqual(json["to"] as? String, "384x288")
        XCTAssertEqual(json["threads"] as? Int, 1)
        XCTAssertEqual(json["frames"] as? Int, 2)
        let results = try XCTUnwrap(json["results"] as? [[String: Any]])
        XCTAssertEqual(results.compactMap { $0["method"] as? String },
                       ["upscale-lanczos3", "upscale-refined", "swscale-lanczos", "zimg-lanczos", "vips-lanczos3"])
        for r in results {
            for key in ["fps", "mpix_per_s", "fps_min", "fps_max", "ratio_to_swscale"] {
                XCTAssertNotNil(r[key] as? Double ?? (r[key] as? Int).map(Double.init), "\(key) in \(r)")
            }
            XCTAssertGreaterThan(r["fps"] as? Double ?? 0, 0)
            XCTAssertGreaterThanOrEqual(r["peak_rss_delta_mb"] as? Double ?? (r["peak_rss_delta_mb"] as? Int).map(Double.init) ?? -1, 0)
        }
        XCTAssertEqual(results[2]["ratio_to_swscale"] as? Double, 1)
    }

    func testQualityJSONScoresPlainLanczosLikeZimg() throws {
        let photos = ["baboon.jpg", "fruits.jpg"].map { CLITests.fixtures.appendingPathComponent($0).path }
        let json = try bench(["quality", "--json"] + photos)
        XCTAssertEqual(json["scale"] as? Int, 2)
        XCTAssertEqual((json["photos"] as? [Any])?.count, 2)
        let mean = try XCTUnwrap(json["mean"] as? [[String: Any]])
        let psnr = Dictionary(uniqueKeysWithValues: mean.map { ($0["method"] as! String, $0["psnr"] as! Double) })
        let ssim = Dictionary(uniqueKeysWithValues: mean.map { ($0["method"] as! String, $0["ssim"] as! Double) })
        XCTAssertEqual(psnr["upscale-lanczos3"]!, psnr["zimg-lanczos"]!, accuracy: 0.05)
        // The protocol itself is aligned: swscale's Lanczos round trip scores as zimg's does.
        XCTAssertEqual(psnr["swscale-lanczos"]!, psnr["zimg-lanczos"]!, accuracy: 0.05)
        XCTAssertEqual(ssim["upscale-lanczos3"]!, ssim["zimg-lanczos"]!, accuracy: 0.002)
        XCTAssertGreaterThan(psnr["upscale-lanczos3"]!, 25)
        // Measured on these two photos: +0.148 dB (baboon's fur gains least).
        XCTAssertGreaterThan(psnr["upscale-refined"]!, psnr["zimg-lanczos"]! + 0.1)
        XCTAssertGreaterThan(ssim["upscale-refined"]!, ssim["zimg-lanczos"]!)
    }
}
