import ArgumentParser
import Foundation

@main
struct Bench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "upscale-bench",
        abstract: "Measure upscale's core against swscale and libvips on the same real frames, in one run.",
        subcommands: [CoreBench.self, QualityBench.self, EndToEndBench.self, ReportBench.self, TrainBench.self, TemporalBench.self, DamageBench.self, WatchBench.self, StillsBench.self, PanBench.self, ChunkBench.self, DashboardBench.self],
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

/// Tests/Fixtures, from the working folder or next to this source.
func fixturesFolder() -> URL {
    let local = URL(fileURLWithPath: "Tests/Fixtures")
    if FileManager.default.fileExists(atPath: local.path) { return local }
    return URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Tests/Fixtures")
}

/// The real photos committed in Tests/Fixtures.
/// Arguments of the ffmpeg command a user runs for the same job (the end-to-end peer): Lanczos
/// to `width`, libx265 at `preset` and `crf`, tagged hvc1, audio copied; `x265` is appended to
/// its x265 parameters.
func ffmpegPeerArguments(input: String, width: Int, preset: String, crf: String, output: String, x265: String = "") -> [String] {
    ["-nostdin", "-v", "error", "-y", "-i", input, "-vf", "scale=\(width):-2:flags=lanczos", "-c:v", "libx265",
     "-preset", preset, "-crf", crf, "-tag:v", "hvc1", "-x265-params", "log-level=error" + x265, "-c:a", "copy", output]
}

func fixturePhotos() -> [String] {
    let dir = fixturesFolder()
    let names = (try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []
    return names.filter { $0.hasSuffix(".jpg") }.sorted().map { dir.appendingPathComponent($0).path }
}

func median(_ values: [Double]) -> Double {
    let s = values.sorted()
    guard !s.isEmpty else { return 0 }
    return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
}

/// A distribution-free interval for the median of `values` (order statistics, as the sign
/// test gives it): the widest-inside pair x(k), x(n+1-k) that holds the true median with at
/// least `confidence`, and the coverage it has; nil below 6 values at 95%, too few for any.
func medianInterval(_ values: [Double], confidence: Double = 0.95) -> (low: Double, high: Double, coverage: Double)? {
    let s = values.sorted(), n = s.count
    guard n > 0 else { return nil }
    // x(k) ≤ median ≤ x(n+1-k) but with probability 2·P(B ≤ k-1), B ~ Binomial(n, 1/2);
    // `term` is P(B = k-1), `below` P(B ≤ k-1).
    var term = pow(0.5, Double(n)), below = 0.0
    var best: (Double, Double, Double)?
    for k in 1...((n + 1) / 2) {
        below += term
        let coverage = 1 - 2 * below
        guard coverage >= confidence else { break }
        best = (s[k - 1], s[n - k], coverage)
        term *= Double(n - (k - 1)) / Double(k)
    }
    return best
}

/// Resident memory of this process now, in bytes (from /proc/self/statm).
func residentBytes() -> Int {
    guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
    let fields = text.split(separator: " ")
    return fields.count > 1 ? (Int(fields[1]) ?? 0) * Int(sysconf(Int32(_SC_PAGESIZE))) : 0
}

/// The growth of resident memory while `body` runs: the kernel's peak (VmHWM, reset
/// through /proc/self/clear_refs just before) minus the resident size before, so each
/// method's own peak (scratch, buffers) shows. Nothing polls while `body` runs: a 1 ms
/// sampling thread measurably slowed the 2-thread runs it shared the cores with. Where the
/// reset is refused, the peak is sampled every 10 ms instead.
func peakResidentGrowth(_ body: () throws -> Void) rethrows -> Int {
    let before = residentBytes()
    if let clear = FileHandle(forWritingAtPath: "/proc/self/clear_refs") {
        let reset = (try? clear.write(contentsOf: Data("5".utf8))) != nil
        try? clear.close()
        if reset, peakResidentBytes() > 0 {
            try body()
            return max(0, peakResidentBytes() - before)
        }
    }
    final class Sampler: @unchecked Sendable {
        let lock = NSLock()
        var peak = 0
        var running = true
    }
    let sampler = Sampler()
    sampler.peak = before
    let done = DispatchSemaphore(value: 0)
    Thread.detachNewThread {
        while true {
            let now = residentBytes()
            sampler.lock.lock()
            sampler.peak = max(sampler.peak, now)
            let go = sampler.running
            sampler.lock.unlock()
            if !go { break }
            usleep(10_000)
        }
        done.signal()
    }
    defer {
        sampler.lock.lock()
        sampler.running = false
        sampler.lock.unlock()
        done.wait()
    }
    try body()
    sampler.lock.lock()
    sampler.peak = max(sampler.peak, residentBytes())
    sampler.lock.unlock()
    return max(0, sampler.peak - before)
}

/// The kernel's record of this process's peak resident size (VmHWM), in bytes; 0 if unknown.
func peakResidentBytes() -> Int {
    guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
          let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }) else { return 0 }
    let kilobytes = line.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
    return kilobytes * 1024
}

func monotonicSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}
