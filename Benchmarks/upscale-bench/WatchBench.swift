import ArgumentParser
import DamageCorpus
import Foundation
import UpscaleMedia

/// The watch folder measured as a user runs it: its overhead against one plain call on the
/// same files, and what `kill -9` of the watcher at random moments loses.
struct WatchBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Watch-folder overhead (watch --once vs one plain call) and kill -9 cycles (files lost, duplicated, left partial).")

    @Option(help: "Clips for the overhead run.") var clips = 20
    @Option(help: "Kill cycles (0 skips them).") var cycles = 50
    @Option(help: "Clips in each kill cycle's folder.") var cycleClips = 5
    @Option(help: "Source clip (default: Tests/Fixtures/street-2s.mp4).") var clip: String?
    @Option(help: "The upscale binary (default: next to this one).") var upscale: String?
    @Option(help: "Seed for the kill moments.") var seed: UInt64 = 7

    private var encode: [String] { ["--width", "640", "--preset", "ultrafast", "--quiet"] }

    func run() throws {
        let binary = upscale ?? upscaleBinary()
        let source = clip ?? fixturesFolder().appendingPathComponent("street-2s.mp4").path
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("upscale-watchbench-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: work) }
        if clips > 0 { try overhead(binary: binary, source: source, work: work + "/overhead") }
        if cycles > 0 { try killCycles(binary: binary, source: source, work: work + "/kill") }
    }

    private func fill(_ folder: String, with source: String, count: Int) throws -> [String] {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        return try (1...count).map { i in
            let path = folder + "/clip \(i).mp4"
            try FileManager.default.copyItem(atPath: source, toPath: path)
            return path
        }
    }

    private func wall(_ executable: String, _ arguments: [String]) throws -> (seconds: Double, status: Int32) {
        let start = Date()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        return (Date().timeIntervalSince(start), process.terminationStatus)
    }

    /// Alternating runs (plain, watch, plain, watch) on fresh copies; the ratio of medians.
    private func overhead(binary: String, source: String, work: String) throws {
        var plain: [Double] = [], watch: [Double] = []
        for round in 0..<2 {
            let plainIn = "\(work)/plain-\(round)", plainOut = "\(work)/plain-out-\(round)"
            let inputs = try fill(plainIn, with: source, count: clips)
            try FileManager.default.createDirectory(atPath: plainOut, withIntermediateDirectories: true)
            let p = try wall(binary, inputs + encode + ["--output", plainOut])
            guard p.status == 0 else { throw ValidationError("the plain run failed (\(p.status))") }
            plain.append(p.seconds)
            let inbox = "\(work)/inbox-\(round)"
            _ = try fill(inbox, with: source, count: clips)
            let w = try wall(binary, ["watch", inbox, "--once", "--settle", "0"] + encode.filter { $0 != "--quiet" })
            guard w.status == 0 else { throw ValidationError("the watch run failed (\(w.status))") }
            let done = (try? FileManager.default.contentsOfDirectory(atPath: inbox + "/Upscaled"))?.count ?? 0
            guard done == clips else { throw ValidationError("the watch run made \(done) of \(clips) outputs") }
            watch.append(w.seconds)
        }
        print(String(format: "overhead, %d clips (%@): plain call %.1f s, watch --once %.1f s (medians of %d), ratio %.3f",
                     clips, URL(fileURLWithPath: source).lastPathComponent, median(plain), median(watch), plain.count,
                     median(watch) / median(plain)))
    }

    /// Each cycle: a fresh folder, a watcher killed with SIGKILL at a random moment, then
    /// `watch --once`; counts originals lost or changed, outputs duplicated, missing or bad,
    /// and temporary files or processes left behind.
    private func killCycles(binary: String, source: String, work: String) throws {
        var rng = SplitMix64(seed: seed)
        let sourceBytes = try Data(contentsOf: URL(fileURLWithPath: source))
        let sourceFrames = try frames(source)
        // How long a full run takes, to spread the kill moments over it.
        let probe = "\(work)/probe"
        _ = try fill(probe, with: source, count: cycleClips)
        let full = try wall(binary, ["watch", probe, "--once", "--settle", "0"] + encode.filter { $0 != "--quiet" }).seconds
        var lost = 0, changed = 0, duplicated = 0, missing = 0, bad = 0, partial = 0, orphans = 0, killedMidJob = 0
        for cycle in 0..<cycles {
            let inbox = "\(work)/cycle-\(cycle)"
            _ = try fill(inbox, with: source, count: cycleClips)
            let watcher = Process()
            watcher.executableURL = URL(fileURLWithPath: binary)
            watcher.arguments = ["watch", inbox, "--settle", "0"] + encode.filter { $0 != "--quiet" }
            watcher.standardOutput = FileHandle.nullDevice
            try watcher.run()
            usleep(UInt32(Double(rng.next() % 1000) / 1000 * full * 1_000_000))
            if (try? FileManager.default.contentsOfDirectory(atPath: inbox + "/Upscaled"))?.contains(where: { $0.hasSuffix(".partial") }) == true {
                killedMidJob += 1
            }
            kill(watcher.processIdentifier, SIGKILL)
            watcher.waitUntilExit()
            usleep(300_000)
            let again = try wall(binary, ["watch", inbox, "--once", "--settle", "0"] + encode.filter { $0 != "--quiet" })
            if again.status != 0 { print("  cycle \(cycle): the once-run exited \(again.status)") }
            let originals = (try? FileManager.default.contentsOfDirectory(atPath: inbox + "/Originals")) ?? []
            let outputs = (try? FileManager.default.contentsOfDirectory(atPath: inbox + "/Upscaled")) ?? []
            lost += max(0, cycleClips - originals.count)
            for name in originals where (try? Data(contentsOf: URL(fileURLWithPath: inbox + "/Originals/" + name))) != sourceBytes { changed += 1 }
            duplicated += outputs.filter { $0.contains(" Upscaled 2") }.count
            partial += outputs.filter { $0.hasPrefix(".") }.count
            missing += max(0, cycleClips - outputs.filter { !$0.hasPrefix(".") }.count)
            for name in outputs where !name.hasPrefix(".") {
                if (try? frames(inbox + "/Upscaled/" + name)) != sourceFrames { bad += 1 }
            }
            let ps = Process()
            ps.executableURL = URL(fileURLWithPath: "/usr/bin/pgrep")
            ps.arguments = ["-f", inbox]
            let pipe = Pipe()
            ps.standardOutput = pipe
            try ps.run()
            ps.waitUntilExit()
            orphans += String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).split(separator: "\n").count
            try? FileManager.default.removeItem(atPath: inbox)
        }
        print("kill -9 cycles: \(cycles) (\(cycleClips) clips each, killed at a random moment of a \(String(format: "%.1f", full)) s run; \(killedMidJob) while a job was writing)")
        print("  originals lost \(lost), changed \(changed); outputs duplicated \(duplicated), missing \(missing), wrong frame count \(bad); partial files left \(partial); processes left \(orphans)")
    }

    private func frames(_ path: String) throws -> Int {
        let info = try MediaProbe.info(path)
        guard let video = info.video else { return -1 }
        return try MediaProbe.packets(path, stream: video.index).count
    }
}
