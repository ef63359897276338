import ArgumentParser
import Foundation
import UpscaleImages

/// Stills end to end, as a user runs them: `upscale photo.jpg --scale 2` (refined and plain)
/// beside `vips resize photo.jpg out.jpg 2 --kernel lanczos3` on the same 12-megapixel photo
/// mosaic, alternately; and a 5000x5000 photo upscaled 4x to 20000x20000 for peak memory.
struct StillsBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stills",
        abstract: "upscale vs vips resize on a 12 MP photo (wall, peak RSS), and a 20000x20000 output's peak RSS.")

    @Option(help: "Runs per tool.") var runs = 3
    @Flag(help: "Skip the 20000x20000 run.") var noLarge = false
    @Option(help: "The upscale binary (default: next to this one).") var upscale: String?

    func run() throws {
        let binary = upscale ?? upscaleBinary()
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("upscale-stills-\(getpid())").path
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: work) }
        let photo = work + "/photo-12mp.jpg"
        try ImagePlanes.writeMosaic(of: fixturePhotos(), width: 4000, height: 3000, to: photo)
        var times: [String: [Double]] = [:], peaks: [String: Int] = [:]
        let vips = ChildRun.available("vips")
        for _ in 0..<runs {
            for (name, args) in [("upscale refined", [photo, "--scale", "2", "--quiet", "--overwrite", "--output", work + "/a.jpg"]),
                                 ("upscale --no-refine", [photo, "--scale", "2", "--no-refine", "--quiet", "--overwrite", "--output", work + "/b.jpg"])] {
                let r = try ChildRun.run(binary, args)
                guard r.status == 0 else { throw ValidationError("\(name) failed (\(r.status))") }
                times[name, default: []].append(r.seconds)
                peaks[name] = max(peaks[name] ?? 0, r.peakRSS)
            }
            if vips {
                let r = try ChildRun.run("/usr/bin/vips", ["resize", photo, work + "/c.jpg[Q=90]", "2", "--kernel", "lanczos3"])
                guard r.status == 0 else { throw ValidationError("vips resize failed (\(r.status))") }
                times["vips resize lanczos3", default: []].append(r.seconds)
                peaks["vips resize lanczos3"] = max(peaks["vips resize lanczos3"] ?? 0, r.peakRSS)
            }
        }
        print("4000x3000 photo mosaic → 8000x6000 JPEG (Q 90), median of \(runs), same run:")
        let base = times["vips resize lanczos3"].map(median)
        for name in ["upscale refined", "upscale --no-refine", "vips resize lanczos3"] {
            guard let t = times[name] else { print("  \(name): not measured (apt-get install libvips-tools)"); continue }
            let ratio = base.map { String(format: ", %.2fx vips's time", median(t) / $0) } ?? ""
            print("  " + name.padding(toLength: 22, withPad: " ", startingAt: 0) + String(format: "%6.2f s, peak RSS %5.0f MB", median(t), Double(peaks[name] ?? 0) / 1e6) + ratio)
        }
        guard !noLarge else { return }
        let big = work + "/photo-5000.jpg"
        try ImagePlanes.writeMosaic(of: fixturePhotos(), width: 5000, height: 5000, to: big)
        let r = try ChildRun.run(binary, [big, "--scale", "4", "--quiet", "--overwrite", "--output", work + "/big.jpg"])
        guard r.status == 0 else { throw ValidationError("the 20000x20000 run failed (\(r.status))") }
        print(String(format: "5000x5000 → 20000x20000 JPEG, refined 4x: %.1f s, peak RSS %.0f MB (input planes 75 MB, output 1200 MB uncompressed)",
                     r.seconds, Double(r.peakRSS) / 1e6))
    }
}
