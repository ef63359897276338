import ArgumentParser
import Foundation

@main
struct Bench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "upscale-bench",
        abstract: "Measure upscale's core against swscale and libvips on the same real frames, in one run.",
        subcommands: [CoreBench.self, QualityBench.self, EndToEndBench.self, ReportBench.self, TrainBench.self, TemporalBench.self],
        defaultSubcommand: CoreBench.self)
}

/// A "WxH" size argument.
struct Size: ExpressibleByArgument, CustomStringConvertible {
    let width: Int
    let height: Int

    init?(argument: String) {
        let parts = argument.lowercased().split(separator: "x").compactMap { Int($0) }
        guard parts.count == 2, parts[0] > 0, parts[1] > 0 else { return nil }
        width = parts[0]
        height = parts[1]
    }

    var description: String { "\(width)x\(height)" }
}

/// Finds the bundled sample clip from the repository root or next to the sources.
func defaultClip() -> String {
    let candidates = [
        "Samples/street.mp4",
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Samples/street.mp4").path,
    ]
    return candidates.first { FileManager.default.fileExists(atPath: $0) } ?? candidates[0]
}

func median(_ values: [Double]) -> Double {
    let s = values.sorted()
    guard !s.isEmpty else { return 0 }
    return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
}

/// Peak resident set size of this process so far, in bytes (Linux ru_maxrss is in KiB).
func peakRSS() -> Int {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return usage.ru_maxrss * 1024
}

func monotonicSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}
