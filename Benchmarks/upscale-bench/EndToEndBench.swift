import ArgumentParser
import Foundation
import UpscaleCore
import UpscaleMedia

struct EndToEndResult: Codable {
    let tool: String
    let wall_s: Double
    let fps: Double
    let peak_rss_mb: Double
    let size_mb: Double
    let psnr_y_vs_zimg: Double
}

struct EndToEndReport: Codable {
    let input: String
    let width: Int
    let preset: String
    let crf: Int
    let frames: Int
    let results: [EndToEndResult]
    let wall_ratio_ffmpeg_over_upscale: Double
}

struct EndToEndBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "e2e",
        abstract: "The upscale binary against the equivalent ffmpeg command (swscale Lanczos + libx265), alternately, three runs each.")

    @Argument(help: "Input video (default: Samples/street.mp4).") var input: String?
    @Option(help: "Output width (default: 2x the input).") var width: Int?
    @Option(help: "libx265 preset for both.") var preset = "medium"
    @Option(help: "libx265 CRF for both.") var crf = 20
    @Option(help: "Runs per tool.") var runs = 3
    @Flag(help: "Print one JSON object instead of a table.") var json = false

    func run() throws {
        guard let report = try measure() else { return }
        if json {
            print(try jsonText(report))
        } else {
            print(report.table())
        }
    }

    /// Nil (after saying why) when the ffmpeg CLI is not installed.
    func measure() throws -> EndToEndReport? {
        guard ChildRun.available("ffmpeg") else {
            print("e2e skipped: the ffmpeg command is not installed (apt-get install ffmpeg)")
            return nil
        }
        let source = input ?? defaultClip()
        let info = try MediaProbe.info(source)
        guard let video = info.video, let display = info.displaySize else { throw ValidationError("'\(source)' has no video") }
        let size = try OutputSize.resolve(display: display, width: width ?? Int(display.width * 2), height: nil, scale: nil)
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("upscale-e2e-\(getpid())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let ext = ["mov", "mp4", "m4v", "mkv"].contains(URL(fileURLWithPath: source).pathExtension.lowercased())
            ? URL(fileURLWithPath: source).pathExtension.lowercased() : "mov"
        let ours = dir.appendingPathComponent("upscale.\(ext)").path
        let theirs = dir.appendingPathComponent("ffmpeg.\(ext)").path
        let commands: [(String, String, [String])] = [
            ("upscale", upscaleBinary(), [source, "--width", "\(size.width)", "--preset", preset, "--crf", "\(crf)",
                                          "--output", ours, "--overwrite", "--quiet"]),
            ("ffmpeg", "ffmpeg", ffmpegPeerArguments(input: source, width: size.width, preset: preset, crf: "\(crf)", output: theirs)),
        ]
        var walls: [String: [Double]] = [:], rss: [String: Int] = [:]
        for _ in 0..<runs {
            for (name, executable, arguments) in commands {
                let run = try ChildRun.run(executable, arguments)
                guard run.status == 0 else { throw ValidationError("\(name) failed with exit code \(run.status)") }
                walls[name, default: []].append(run.seconds)
                rss[name] = max(rss[name] ?? 0, run.peakRSS)
            }
        }
        let frames = try MediaProbe.packets(source, stream: video.index).count
        let results = try [("upscale", ours), ("ffmpeg", theirs)].map { name, path -> EndToEndResult in
            let wall = median(walls[name]!)
            let bytes = (try FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.doubleValue ?? 0
            return EndToEndResult(tool: name, wall_s: round2(wall), fps: round2(Double(frames) / wall),
                                  peak_rss_mb: round2(Double(rss[name]!) / 1e6), size_mb: round2(bytes / 1e6),
                                  psnr_y_vs_zimg: round2(try lumaPSNRAgainstZimg(source: source, output: path)))
        }
        return EndToEndReport(input: URL(fileURLWithPath: source).lastPathComponent, width: size.width, preset: preset,
                              crf: crf, frames: frames, results: results,
                              wall_ratio_ffmpeg_over_upscale: round3(median(walls["ffmpeg"]!) / median(walls["upscale"]!)))
    }

    /// Mean luma PSNR of every frame of `output` against the input scaled by zimg's Lanczos.
    private func lumaPSNRAgainstZimg(source: String, output: String) throws -> Double {
        let a = try VideoFrameReader(path: source), b = try VideoFrameReader(path: output)
        let zimg = try ZimgScaler(input: (a.width, a.height), output: (b.width, b.height), layout: .yuv420)
        let reference = Frame(width: b.width, height: b.height, layout: .yuv420)
        var total = 0.0, count = 0
        while let x = try a.next(), let y = try b.next() {
            try zimg.scale(x.frame, into: reference)
            let p = ImageMetrics.psnr(reference.planes[0], y.frame.planes[0])
            total += p.isFinite ? p : 100
            count += 1
        }
        return count > 0 ? total / Double(count) : 0
    }
}

extension EndToEndReport {
    func table() -> String {
        var lines = ["e2e: \(input) → width \(width), libx265 preset \(preset) CRF \(crf), \(frames) frames, median of runs",
                     "| tool | wall s | fps | peak RSS MB | output MB | PSNR-Y vs zimg Lanczos |",
                     "| --- | ---: | ---: | ---: | ---: | ---: |"]
        for r in results {
            lines.append("| \(r.tool) | \(fmt(r.wall_s)) | \(fmt(r.fps)) | \(fmt(r.peak_rss_mb, 1)) | \(fmt(r.size_mb)) | \(fmt(r.psnr_y_vs_zimg)) |")
        }
        lines.append("ffmpeg wall time / upscale wall time: \(fmt(wall_ratio_ffmpeg_over_upscale, 3))")
        return lines.joined(separator: "\n")
    }
}
