import ArgumentParser
import Foundation
import UpscaleCore
import UpscaleImages
import UpscaleMedia

/// One method's quality on one photo, or its mean over the set.
struct QualityResult: Codable {
    let method: String
    let psnr: Double
    let ssim: Double
}

struct PhotoQuality: Codable {
    let photo: String
    let results: [QualityResult]
}

struct QualityReport: Codable {
    let scale: Int
    let downscale: String
    /// "Y" (luma) or "RGB".
    let planes: String
    let photos: [PhotoQuality]
    let mean: [QualityResult]
}

extension QualityReport {
    func table() -> String {
        let names = mean.map(\.method)
        var lines = ["quality: x\(scale), \(downscale) downscale, \(photos.count) photo(s), PSNR-\(planes) dB / SSIM, border \(2 * scale)",
                     "| photo | " + names.joined(separator: " | ") + " |",
                     "| --- |" + String(repeating: " ---: |", count: names.count)]
        for p in photos {
            lines.append("| \(p.photo) | " + p.results.map { "\(fmt($0.psnr)) / \(fmt($0.ssim, 4))" }.joined(separator: " | ") + " |")
        }
        lines.append("| **mean** | " + mean.map { "\(fmt($0.psnr, 3)) / \(fmt($0.ssim, 4))" }.joined(separator: " | ") + " |")
        return lines.joined(separator: "\n")
    }
}

struct QualityBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "quality",
        abstract: "The quality protocol of shared/notes/peers.md: luma of real photos, libvips Lanczos3 downscale by S, upscale by S with each method, PSNR and SSIM without a 2·S border.")

    @Option(help: "Integer scale factor S.") var scale = 2
    @Option(help: "How the low-resolution input is made: lanczos3 (the protocol) or box (a second degradation).")
    var downscale = "lanczos3"
    @Flag(help: "Colour: every sRGB plane is degraded and upscaled (refined as an .rgb frame); PSNR of the three planes' mean squared error, SSIM their mean.")
    var rgb = false
    @Flag(help: "Print one JSON object instead of tables.") var json = false
    @Argument(help: "Photos (default: the photos in Tests/Fixtures).") var photos: [String] = []

    func run() throws {
        let report = try measure()
        if json {
            print(try jsonText(report))
        } else {
            print(report.table())
        }
    }

    func measure() throws -> QualityReport {
        guard (2...8).contains(scale) else { throw ValidationError("--scale must be 2...8") }
        guard ["lanczos3", "box"].contains(downscale) else { throw ValidationError("--downscale is lanczos3 or box") }
        let paths = photos.isEmpty ? fixturePhotos() : photos
        guard !paths.isEmpty else { throw ValidationError("no photos given and none found in Tests/Fixtures") }
        var perPhoto: [PhotoQuality] = []
        for path in paths {
            let unit = 2 * scale
            let planes: [Plane] = rgb ? try ImagePlanes.loadRGB(path).planes : [try ImagePlanes.loadLuma(path)]
            var hrs: [Plane] = [], lrs: [Plane] = []
            for full in planes {
                let hr = ImageMetrics.crop(full, width: full.width / unit * unit, height: full.height / unit * unit)
                let lr = downscale == "box" ? try ImagePlanes.shrinkBox(hr, factor: scale)
                    : try ImagePlanes.resizeLanczos3(hr, scale: 1 / Double(scale))
                guard lr.width * scale == hr.width, lr.height * scale == hr.height else {
                    throw ValidationError("libvips made \(lr.width)x\(lr.height) from \(hr.width)x\(hr.height)")
                }
                hrs.append(hr)
                lrs.append(lr)
            }
            let from = (lrs[0].width, lrs[0].height), to = (hrs[0].width, hrs[0].height)
            var results: [QualityResult] = []
            for (name, upscale) in try methods(from: from, to: to) {
                var outs: [Plane]
                if rgb, name == "upscale-refined" {
                    // The colour path itself: one .rgb frame, every colour plane refined.
                    let scaler = FrameScaler(input: from, output: to, layout: .rgb, kernel: .lanczos3, threads: 2,
                                             refiner: EdgeRefiner.trained(input: from, output: to))
                    outs = scaler.scale(Frame(width: from.0, height: from.1, layout: .rgb, planes: lrs)).planes
                } else {
                    outs = try lrs.map(upscale)
                }
                let mse = zip(hrs, outs).map { ImageMetrics.meanSquaredError($0, $1, border: unit) }.reduce(0, +) / Double(hrs.count)
                let ssim = zip(hrs, outs).map { ImageMetrics.ssim($0, $1, border: unit) }.reduce(0, +) / Double(hrs.count)
                results.append(QualityResult(method: name, psnr: ImageMetrics.psnr(mse: mse), ssim: ssim))
            }
            perPhoto.append(PhotoQuality(photo: URL(fileURLWithPath: path).lastPathComponent, results: results))
        }
        let names = perPhoto[0].results.map(\.method)
        let mean = names.enumerated().map { index, name in
            QualityResult(method: name,
                          psnr: perPhoto.map { $0.results[index].psnr }.reduce(0, +) / Double(perPhoto.count),
                          ssim: perPhoto.map { $0.results[index].ssim }.reduce(0, +) / Double(perPhoto.count))
        }
        return QualityReport(scale: scale, downscale: downscale, planes: rgb ? "RGB" : "Y", photos: perPhoto, mean: mean)
    }

    private func methods(from: (Int, Int), to: (Int, Int)) throws -> [(String, (Plane) throws -> Plane)] {
        let ours = FrameScaler(input: from, output: to, layout: .gray, kernel: .lanczos3, threads: 2)
        let sws = try SwscaleScaler(input: from, output: to, layout: .gray, algorithm: .lanczos)
        let zimg = try ZimgScaler(input: from, output: to, layout: .gray)
        let refined = FrameScaler(input: from, output: to, layout: .gray, kernel: .lanczos3, threads: 2,
                                  refiner: EdgeRefiner.trained(input: from, output: to))
        let gray = { (p: Plane, w: Int, h: Int) in Frame(width: w, height: h, layout: .gray, planes: [p]) }
        return [
            ("upscale-lanczos3", { ours.scale(gray($0, from.0, from.1)).planes[0] }),
            ("upscale-refined", { refined.scale(gray($0, from.0, from.1)).planes[0] }),
            ("swscale-lanczos", { sws.scale(gray($0, from.0, from.1)).planes[0] }),
            ("zimg-lanczos", { p in
                let out = Frame(width: to.0, height: to.1, layout: .gray)
                try zimg.scale(gray(p, from.0, from.1), into: out)
                return out.planes[0]
            }),
            ("vips-lanczos3", { p in
                let out = try ImagePlanes.resizeLanczos3(p, scale: Double(to.0) / Double(from.0))
                return ImageMetrics.crop(out, width: to.0, height: to.1)
            }),
        ]
    }
}
