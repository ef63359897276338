import Foundation
import UpscaleCore
import UpscaleMedia
import XCTest

enum Fixtures {
    static var folder: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fixtures")
    }

    static func path(_ name: String) -> String { folder.appendingPathComponent(name).path }

    /// A fresh temporary folder holding copies of the named fixtures.
    static func workspace(copying names: [String] = []) throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("upscale-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        for name in names {
            try FileManager.default.copyItem(atPath: path(name), toPath: dir.appendingPathComponent(name).path)
        }
        return dir
    }

    static func listing(_ dir: URL) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []).sorted()
    }
}

extension XCTestCase {
    /// A temporary folder with copies of the named fixtures, removed when the test ends.
    func workspace(copying names: [String] = []) throws -> URL {
        let dir = try Fixtures.workspace(copying: names)
        addTeardownBlock { try? FileManager.default.removeItem(at: dir) }
        return dir
    }
}

enum Measure {
    /// PSNR in dB between two planes of the same size (infinity when identical).
    static func psnr(_ a: Plane, _ b: Plane) -> Double {
        precondition(a.width == b.width && a.height == b.height)
        var sum = 0.0
        for y in 0..<a.height {
            for x in 0..<a.width {
                let d = Double(a[x, y]) - Double(b[x, y])
                sum += d * d
            }
        }
        let mse = sum / Double(a.width * a.height)
        return mse == 0 ? .infinity : 10 * log10(255 * 255 / mse)
    }

    /// Presentation times of the main video stream's packets, sorted, in seconds.
    static func videoSeconds(_ path: String) throws -> [Double] {
        let info = try MediaProbe.info(path)
        let timeBase = info.video!.timeBase
        return try MediaProbe.packets(path, stream: info.videoStreamIndex!).compactMap(\.pts).sorted()
            .map { Double($0) * Double(timeBase.num) / Double(timeBase.den) }
    }

    /// Where the audio stream's last packet ends, in seconds.
    static func audioEnd(_ path: String) throws -> Double {
        let info = try MediaProbe.info(path)
        let audio = try XCTUnwrap(info.streams.first { $0.kind == .audio })
        let end = try MediaProbe.packets(path, stream: audio.index).compactMap { p in p.pts.map { $0 + p.duration } }.max() ?? 0
        return Double(end) * Double(audio.timeBase.num) / Double(audio.timeBase.den)
    }

    static func frames(_ path: String) throws -> [(frame: Frame, pts: Int64)] {
        let reader = try VideoFrameReader(path: path)
        var out: [(Frame, Int64)] = []
        while let next = try reader.next() { out.append(next) }
        return out
    }
}
