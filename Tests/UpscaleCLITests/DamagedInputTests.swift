import DamageCorpus
import Foundation
import XCTest

/// Damaged input through the real binary: every file ends in exit 0 with one output or
/// exit 1 with one error line and nothing left behind; never a crash, a hang or litter.
final class DamagedInputTests: XCTestCase {
    private var work: URL!

    override func setUpWithError() throws {
        work = FileManager.default.temporaryDirectory.appendingPathComponent("upscale-damage-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: work)
    }

    private var damageFixtures: [String] {
        let dir = CLITests.fixtures.appendingPathComponent("damage")
        return ((try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []).sorted().map { dir.appendingPathComponent($0).path }
    }

    private func folder(_ name: String) throws -> String {
        let path = work.appendingPathComponent(name).path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    private func listing(_ path: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted()
    }

    private func run(_ arguments: [String], environment: [String: String] = [:], timeout: Double = 120) throws -> DamageRun {
        try DamageRun.run(CLITests.binary.path, arguments, timeout: timeout, environment: environment)
    }

    /// 30 seeded damaged copies of each of 7 real clips (H.264+AAC/MP4, FFV1+FLAC/MKV,
    /// MPEG-4 Part 2+MP3/AVI, MJPEG/AVI, HEVC+Opus/MKV, ProRes+PCM/MOV, VP9+Opus/WebM).
    func testDamagedCorpusEndsInAnOutputOrOneCleanError() throws {
        let sources = damageFixtures
        XCTAssertEqual(sources.count, 7, "\(sources)")
        let corpus = try DamagedCorpus.write(sources: sources, copies: 30, baseSeed: 1, into: work.appendingPathComponent("in").path)
        var counts: [String: [String: Int]] = [:]
        var bad: [String] = []
        for (n, entry) in corpus.enumerated() {
            let out = try folder("out-\(n)")
            // Four upscaler threads: the decoders get frame threads, where FFmpeg 5.1 aborted.
            let result = try run([entry.path, "--width", "64", "--codec", "ffv1", "--no-refine", "--threads", "4", "--quiet", "--output", out],
                                 timeout: 90)
            let outcome = DamageRun.classify(status: result.status, hung: result.hung, stderr: result.stderr, leftFiles: listing(out))
            let clip = URL(fileURLWithPath: entry.source).lastPathComponent
            counts[clip, default: [:]][outcome, default: 0] += 1
            if !["ok", "failed cleanly"].contains(outcome) {
                bad.append("\(outcome): \(URL(fileURLWithPath: entry.path).lastPathComponent) status \(result.status) \(listing(out)) \(result.stderr.prefix(300))")
            }
            if outcome == "failed cleanly" {
                XCTAssertEqual(result.stderr.split(separator: "\n").count, 1, result.stderr)
            }
        }
        for clip in counts.keys.sorted() {
            print("damaged \(clip): \(counts[clip]!["ok"] ?? 0) ok, \(counts[clip]!["failed cleanly"] ?? 0) failed cleanly")
        }
        XCTAssertEqual(bad, [])
        let totals = counts.values.reduce(into: [String: Int]()) { t, row in row.forEach { t[$0.key, default: 0] += $0.value } }
        // The corpus really is damaged, and damage is not always fatal.
        XCTAssertGreaterThan(totals["failed cleanly"] ?? 0, 50, "\(totals)")
        XCTAssertGreaterThan(totals["ok"] ?? 0, 20, "\(totals)")
    }

    /// The MPEG-4 Part 2 AVI that made FFmpeg 5.1's frame-threaded decoder abort (SIGABRT,
    /// a crash report, the temporary file left behind) before the decoder used slice threads.
    func testMPEG4AVIThatAbortedFailsInOneLine() throws {
        let source = try XCTUnwrap(damageFixtures.first { $0.hasSuffix("mpeg4-mp3.avi") })
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: source)))
        let damaged = work.appendingPathComponent("mpeg4-mp3-2-zeroed.avi").path
        try Data(Damage.zeroRun.apply(to: bytes, seed: 3)).write(to: URL(fileURLWithPath: damaged))
        let out = try folder("out")
        let result = try run([damaged, "--scale", "2", "--preset", "ultrafast", "--threads", "4", "--output", out])
        XCTAssertEqual(result.status, 1, result.stderr)
        let lines = result.stderr.split(separator: "\n").filter { !$0.hasPrefix("note:") }
        XCTAssertEqual(lines.count, 1, result.stderr)
        XCTAssertTrue(result.stderr.contains("'\(damaged)' has undecodable video at frame 7"), result.stderr)
        XCTAssertEqual(listing(out), [])
    }

    /// A crash inside the job (here a test hook raising the signal after two frames) fails
    /// that file in one line naming the signal; its temporary file is removed and the next
    /// file still runs.
    func testCrashInAJobIsOneLineAndTheNextFileRuns() throws {
        for (hook, name) in [("abort:2", "SIGABRT"), ("segv:2", "SIGSEGV")] {
            let out = try folder("out-\(name)")
            let clip = CLITests.fixtures.appendingPathComponent("street-2s.mp4").path
            let result = try run([clip, "--width", "128", "--preset", "ultrafast", "--output", out], environment: ["UPSCALE_TEST_HOOK": hook])
            XCTAssertEqual(result.status, 1, result.stderr)
            XCTAssertEqual(result.stderr.split(separator: "\n").count, 1, result.stderr)
            XCTAssertTrue(result.stderr.hasPrefix("error: '\(clip)': upscaling crashed (\(name)) after frame 1"), result.stderr)
            XCTAssertFalse(result.stderr.contains("Program crashed"), result.stderr)
            XCTAssertEqual(listing(out), [])
        }
        // SIGKILL (the out-of-memory killer) is not blamed on the file (it was: "probably
        // damaged … re-export or trim it").
        let out = try folder("out-SIGKILL")
        let clip = CLITests.fixtures.appendingPathComponent("street-2s.mp4").path
        let killed = try run([clip, "--width", "128", "--preset", "ultrafast", "--output", out], environment: ["UPSCALE_TEST_HOOK": "kill:2"])
        XCTAssertEqual(killed.status, 1, killed.stderr)
        XCTAssertTrue(killed.stderr.hasPrefix("error: '\(clip)': the job was killed (SIGKILL: out of memory?) after frame 1; no output was written"), killed.stderr)
        XCTAssertEqual(listing(out), [])
        // A damaged file first, a good one second: the first fails cleanly, the second is written.
        let source = try XCTUnwrap(damageFixtures.first { $0.hasSuffix("mpeg4-mp3.avi") })
        let damaged = work.appendingPathComponent("broken.avi").path
        try Data(Damage.zeroRun.apply(to: [UInt8](try Data(contentsOf: URL(fileURLWithPath: source))), seed: 3))
            .write(to: URL(fileURLWithPath: damaged))
        let batchOut = try folder("out-batch")
        let good = CLITests.fixtures.appendingPathComponent("street-2s.mp4").path
        let batch = try run([damaged, good, "--width", "128", "--preset", "ultrafast", "--output", batchOut, "--quiet"])
        XCTAssertEqual(batch.status, 1, batch.stderr)
        XCTAssertEqual(listing(batchOut), ["street-2s Upscaled.mp4"])
    }

    /// A reader that stops producing pictures (a test hook standing in for a demuxer or
    /// decoder looping on damaged data) fails the job after the stall limit.
    func testStuckDecoderFailsAfterTheStallLimit() throws {
        let out = try folder("out")
        let clip = CLITests.fixtures.appendingPathComponent("street-2s.mp4").path
        let start = Date()
        let result = try run([clip, "--width", "128", "--preset", "ultrafast", "--output", out],
                             environment: ["UPSCALE_TEST_HOOK": "stall", "UPSCALE_STALL_SECONDS": "2"], timeout: 60)
        XCTAssertFalse(result.hung)
        XCTAssertEqual(result.status, 1, result.stderr)
        XCTAssertTrue(result.stderr.contains("made no progress for 2 s after frame 1"), result.stderr)
        XCTAssertEqual(result.stderr.split(separator: "\n").count, 1, result.stderr)
        XCTAssertLessThan(Date().timeIntervalSince(start), 40)
        XCTAssertEqual(listing(out), [])
    }

    /// Temporary files of processes of this host that no longer exist are removed by the
    /// next job in that folder; a live process's and another host's are kept.
    func testStaleTemporaryFilesOfDeadProcessesAreRemoved() throws {
        let out = try folder("out")
        let dead = Process()
        dead.executableURL = URL(fileURLWithPath: "/bin/true")
        try dead.run()
        dead.waitUntilExit()
        var name = [CChar](repeating: 0, count: 256)
        gethostname(&name, 255)
        let host = String(cString: name)
        let stale = ".old Upscaled.mp4.\(host).\(dead.processIdentifier).partial"
        let live = ".running Upscaled.mp4.\(host).\(getpid()).partial"
        let foreign = ".other Upscaled.mp4.some-other-host.\(dead.processIdentifier).partial"
        for file in [stale, live, foreign] {
            try Data("x".utf8).write(to: URL(fileURLWithPath: out).appendingPathComponent(file))
        }
        let clip = CLITests.fixtures.appendingPathComponent("street-2s.mp4").path
        let result = try run([clip, "--width", "64", "--preset", "ultrafast", "--quiet", "--output", out])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(listing(out), [live, foreign, "street-2s Upscaled.mp4"].sorted())
    }

    /// The parent killed with SIGKILL: its child gets SIGTERM from the kernel, removes its
    /// temporary file and stops; nothing keeps writing into the folder.
    func testChildStopsAndCleansUpWhenTheParentIsKilled() throws {
        let out = try folder("out")
        let clip = CLITests.fixtures.appendingPathComponent("street-2s.mp4").path
        let parent = Process()
        parent.executableURL = CLITests.binary
        parent.arguments = [clip, "--scale", "3", "--preset", "slow", "--quiet", "--output", out]
        parent.standardOutput = FileHandle.nullDevice
        parent.standardError = FileHandle.nullDevice
        try parent.run()
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline && !listing(out).contains(where: { $0.hasSuffix(".partial") }) { usleep(50_000) }
        let partial = try XCTUnwrap(listing(out).first { $0.hasSuffix(".partial") }, "job never started")
        let childPid = try XCTUnwrap(pid_t(partial.split(separator: ".").dropLast().last ?? ""))
        XCTAssertNotEqual(childPid, parent.processIdentifier)
        kill(parent.processIdentifier, SIGKILL)
        parent.waitUntilExit()
        let gone = Date().addingTimeInterval(30)
        while Date() < gone && (running(childPid) || !listing(out).isEmpty) { usleep(50_000) }
        XCTAssertFalse(running(childPid), "the child is still running")
        XCTAssertEqual(listing(out), [])
    }

    /// Whether `pid` exists and is not a zombie waiting to be reaped.
    private func running(_ pid: pid_t) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return false }
        return stat[stat.index(close, offsetBy: 2)] != "Z"
    }
}
