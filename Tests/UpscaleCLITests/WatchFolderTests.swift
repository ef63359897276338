import DamageCorpus
import Foundation
import UpscaleImages
import UpscaleMedia
@testable import UpscaleQueue
import XCTest

/// `upscale watch` and `upscale queue` as a user runs them: real child processes, a real
/// folder in /tmp, the committed clips.
final class WatchFolderTests: XCTestCase {
    private var inbox: URL!

    override func setUpWithError() throws {
        inbox = FileManager.default.temporaryDirectory.appendingPathComponent("upscale-watch-\(UUID().uuidString)/Inbox")
        try FileManager.default.createDirectory(at: inbox, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: inbox.deletingLastPathComponent())
    }

    private static let clip = CLITests.fixtures.appendingPathComponent("street-2s.mp4")
    private static let encode = ["--width", "128", "--preset", "ultrafast"]

    private func drop(_ source: URL, as name: String) throws {
        let target = inbox.appendingPathComponent(name)
        try FileManager.default.createDirectory(at: target.deletingLastPathComponent(), withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: source, to: target)
    }

    private func files(_ sub: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: inbox.appendingPathComponent(sub).path)) ?? []).sorted()
    }

    @discardableResult
    private func upscale(_ arguments: [String], environment: [String: String] = [:], timeout: Double = 180) throws -> DamageRun {
        try DamageRun.run(CLITests.binary.path, arguments, timeout: timeout, environment: environment)
    }

    private func watchOnce(_ extra: [String] = [], environment: [String: String] = [:]) throws -> DamageRun {
        try upscale(["watch", inbox.path, "--once", "--settle", "0.3"] + extra, environment: environment)
    }

    /// `watchOnce` with the watcher's log (its standard output) in `stderr`.
    private func watchOnceLogged(_ extra: [String]) throws -> DamageRun {
        try DamageRun.run("/bin/sh", ["-c", "exec \"$0\" \"$@\" 1>&2", CLITests.binary.path, "watch", inbox.path, "--once", "--settle", "0.3"] + extra,
                          timeout: 180)
    }

    private func background(_ arguments: [String], environment: [String: String] = [:]) throws -> Process {
        let process = Process()
        process.executableURL = CLITests.binary
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        return process
    }

    struct Listing: Decodable {
        struct Job: Decodable {
            let id: Int
            let source: String
            let state: String
            let attempts: Int
            let crashes: Int
            let settings: [String]
            let output: String?
            let error: String?
            let notes: [String]
        }
        let paused: Bool
        let etaSeconds: Double?
        let unplannedJobs: Int
        let jobs: [Job]
    }

    /// `queue list --json`, read through a pipe.
    private func listing() throws -> Listing {
        let process = Process()
        process.executableURL = CLITests.binary
        process.arguments = ["queue", "list", inbox.path, "--json"]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return try JSONDecoder().decode(Listing.self, from: data)
    }

    private func waitFor(_ what: String, timeout: Double = 60, _ condition: () throws -> Bool) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if (try? condition()) == true { return }
            usleep(100_000)
        }
        XCTFail("timed out waiting for \(what)")
        throw XCTSkip("gave up")
    }

    private func frames(_ url: URL) throws -> Int {
        let info = try MediaProbe.info(url.path)
        let video = try XCTUnwrap(info.video)
        return try MediaProbe.packets(url.path, stream: video.index).count
    }

    /// A job's notes reach the watcher's console: they were only in the job's log file, so a
    /// damaged picture filled in, an animation cut to its first frame or a clip made smaller was
    /// reported as plainly "done". The plain command says each once. They stay on the job:
    /// `queue list` (and --json, and the dashboard) shows them after the watcher is gone.
    func testAJobsNotesAreShownByTheWatcher() throws {
        try drop(Self.clip, as: "clip.mp4")
        let run = try watchOnceLogged(["--scale", "0.5", "--preset", "ultrafast"])
        XCTAssertEqual(run.status, 0, run.stderr)
        let said = "'\(inbox.path)/clip.mp4' is shown at 768x576; --scale 0.5 makes it smaller, 384x288 (Lanczos only)"
        let note = "note on 'clip.mp4': " + said
        XCTAssertEqual(run.stderr.components(separatedBy: note).count - 1, 1, run.stderr)
        XCTAssertEqual(try listing().jobs.map(\.notes), [[said]])
        let list = try DamageRun.run("/bin/sh", ["-c", "exec \"$0\" \"$@\" 1>&2", CLITests.binary.path, "queue", "list", inbox.path], timeout: 60)
        let rows = list.stderr.split(separator: "\n").map { $0.split(separator: "\t", omittingEmptySubsequences: false) }
        XCTAssertEqual(rows.first?.last, "notes", list.stderr)
        XCTAssertEqual(rows.dropFirst().first?.last.map(String.init), said, list.stderr)
        let plain = try upscale([Self.clip.path, "--scale", "0.5", "--preset", "ultrafast", "--output", inbox.appendingPathComponent("Upscaled").path + "/", "--overwrite"])
        XCTAssertEqual(plain.status, 0, plain.stderr)
        XCTAssertEqual(plain.stderr.components(separatedBy: "makes it smaller").count - 1, 1, plain.stderr)
    }

    func testOnceUpscalesGoodFilesFailsBrokenOnesAndLeavesJunkAlone() throws {
        let odd = "-dash clip ü.mp4"
        try drop(Self.clip, as: odd)
        try drop(CLITests.fixtures.appendingPathComponent("fruits.jpg"), as: "fruits.jpg")
        // A photo whose name says no format (exiftool's backup) is one by its bytes, as for the
        // plain command: it was ignored as "not a video or image file".
        try drop(CLITests.fixtures.appendingPathComponent("fruits.jpg"), as: "IMG_1.JPG_original")
        // Not so a camera raw file (TIFF inside: a job refuses it, and it went to Failed/) or a
        // camera's sidecar thumbnail (a JPEG that belongs beside its clip).
        try Data([0x49, 0x49, 0x2A, 0x00] + [UInt8](repeating: 0, count: 200)).write(to: inbox.appendingPathComponent("DSC_0001.NEF"))
        try drop(CLITests.fixtures.appendingPathComponent("fruits.jpg"), as: "MVI_0001.THM")
        let damaged = try Data(contentsOf: CLITests.fixtures.appendingPathComponent("damage/mpeg4-mp3.avi"))
        try Data(Damage.zeroRun.apply(to: [UInt8](damaged), seed: 3)).write(to: inbox.appendingPathComponent("broken.avi"))
        for junk in ["notes.txt", ".DS_Store", "Thumbs.db", "movie.mp4.part", "big.crdownload"] {
            try Data("junk".utf8).write(to: inbox.appendingPathComponent(junk))
        }
        let run = try watchOnce(Self.encode + ["--exec-after", "printf '%s|%s|%s|%s\\n' \"$UPSCALE_STATE\" \"$UPSCALE_INPUT\" \"$UPSCALE_OUTPUT\" \"$UPSCALE_ERROR\" >> '\(inbox.deletingLastPathComponent().path)/after.log'"])
        XCTAssertEqual(run.status, 1, "a job failed, so --once exits 1: \(run.stderr)")
        XCTAssertEqual(files("Upscaled"), ["-dash clip ü Upscaled.mp4", "IMG_1.JPG_original Upscaled.jpg", "fruits Upscaled.jpg"])
        XCTAssertEqual(files("Originals"), [odd, "IMG_1.JPG_original", "fruits.jpg"])
        XCTAssertEqual(try Data(contentsOf: inbox.appendingPathComponent("Originals/\(odd)")), try Data(contentsOf: Self.clip), "original changed")
        let output = inbox.appendingPathComponent("Upscaled/-dash clip ü Upscaled.mp4")
        XCTAssertEqual(try MediaProbe.info(output.path).video?.width, 128)
        XCTAssertEqual(try frames(output), try frames(Self.clip))
        XCTAssertEqual(files("Failed"), ["broken.avi", "broken.avi.error.txt"])
        let error = try String(contentsOf: inbox.appendingPathComponent("Failed/broken.avi.error.txt"), encoding: .utf8)
        XCTAssertTrue(error.contains("has undecodable video at frame 7"), error)
        XCTAssertTrue(error.contains("status: exit 1"), error)
        XCTAssertEqual(files("").filter { !$0.hasPrefix(".") || $0 == ".DS_Store" }.sorted(),
                       [".DS_Store", "DSC_0001.NEF", "Failed", "MVI_0001.THM", "Originals", "Thumbs.db", "Upscaled", "big.crdownload", "movie.mp4.part", "notes.txt"])
        let jobs = try listing().jobs
        XCTAssertEqual(jobs.map(\.state).sorted(), ["done", "done", "done", "failed"])
        XCTAssertEqual(jobs.first { $0.state == "done" }?.settings, Self.encode)
        let after = try String(contentsOf: inbox.deletingLastPathComponent().appendingPathComponent("after.log"), encoding: .utf8)
        // The hook is told where the original is now (it was told its old place in the inbox).
        XCTAssertTrue(after.contains("done|\(inbox.path)/Originals/\(odd)|\(output.path)|\n"), after)
        XCTAssertTrue(after.contains("failed|\(inbox.path)/Failed/broken.avi||'"), after)
    }

    /// An original that cannot be moved out (here `Originals` is a file; a shared inbox's file
    /// of another user was refused the same way) is upscaled once and stays: it was queued again
    /// at every scan and upscaled again and again. `Failed/` and `Originals/` on another disk
    /// (links to /dev/shm) get the files copied, checked and removed from the inbox: the move
    /// failed ("Invalid cross-device link") with the same endless result.
    func testOriginalsThatCannotBeMovedStayAndAreNotTakenAgainAndAnotherDiskIsCopiedTo() throws {
        try drop(Self.clip, as: "stuck.mp4")
        try Data("a file, not a folder".utf8).write(to: inbox.appendingPathComponent("Originals"))
        let first = try watchOnceLogged(Self.encode)
        XCTAssertEqual(first.status, 0, first.stderr)
        XCTAssertTrue(first.stderr.contains("the original stays in place and is not taken again unless it changes"), first.stderr)
        XCTAssertEqual(try watchOnce(Self.encode).status, 0)
        XCTAssertEqual(files("Upscaled"), ["stuck Upscaled.mp4"])
        XCTAssertEqual(try listing().jobs.map(\.state), ["done"])
        XCTAssertTrue(files("").contains("stuck.mp4"))

        let elsewhere = URL(fileURLWithPath: "/dev/shm/upscale-test-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: elsewhere) }
        for name in ["Originals", "Failed"] {
            try FileManager.default.createDirectory(at: elsewhere.appendingPathComponent(name), withIntermediateDirectories: true)
            try? FileManager.default.removeItem(at: inbox.appendingPathComponent(name))
            try FileManager.default.createSymbolicLink(at: inbox.appendingPathComponent(name), withDestinationURL: elsewhere.appendingPathComponent(name))
        }
        var here = stat(), there = stat()
        XCTAssertEqual(stat(inbox.path, &here), 0)
        XCTAssertEqual(stat(elsewhere.path, &there), 0)
        XCTAssertNotEqual(here.st_dev, there.st_dev, "/dev/shm is another filesystem")
        try drop(Self.clip, as: "moved.mp4")
        try Data("not a video".utf8).write(to: inbox.appendingPathComponent("bad.mov"))
        let second = try watchOnce(Self.encode)
        XCTAssertEqual(second.status, 1, second.stderr)
        XCTAssertEqual(files("Upscaled"), ["moved Upscaled.mp4", "stuck Upscaled.mp4"])
        XCTAssertEqual(try Data(contentsOf: elsewhere.appendingPathComponent("Originals/moved.mp4")), try Data(contentsOf: Self.clip))
        XCTAssertEqual(try Data(contentsOf: elsewhere.appendingPathComponent("Failed/bad.mov")), Data("not a video".utf8))
        XCTAssertEqual(files("").filter { !$0.hasPrefix(".") }, ["Failed", "Originals", "Upscaled", "stuck.mp4"])
        XCTAssertEqual(try watchOnce(Self.encode).status, 0)
        XCTAssertEqual(files("Upscaled").count, 2)
    }

    /// A name with a newline: the child's report line ended there, the watcher looked for a name
    /// with a space instead, and failed a job whose output was complete (and made another at each
    /// retry). An empty placeholder (Firefox's, before its .part download is renamed over it)
    /// waits for content instead of failing. A file replaced by one that fails, while queued,
    /// fails once: it was "changed since it was queued" at every retry, and `--once` never ended.
    func testOddNamesPlaceholdersAndFilesReplacedWhileQueued() throws {
        try drop(Self.clip, as: "new\nline.mp4")
        FileManager.default.createFile(atPath: inbox.appendingPathComponent("download.mp4").path, contents: Data())
        try FileManager.default.createSymbolicLink(at: inbox.appendingPathComponent("link.mp4"), withDestinationURL: Self.clip)
        // "café.mp4" in Latin-1: not UTF-8, so no String can name it; it was passed over without a word.
        let latin1: [CChar] = (Array(inbox.path.utf8) + [0x2F, 0x63, 0x61, 0x66, 0xE9] + Array(".mp4".utf8) + [0]).map { CChar(bitPattern: $0) }
        let fd = open(latin1, O_WRONLY | O_CREAT, 0o644)
        XCTAssertGreaterThanOrEqual(fd, 0)
        _ = write(fd, "x", 1)
        close(fd)
        let first = try watchOnceLogged(Self.encode)
        XCTAssertEqual(first.status, 0, first.stderr)
        // A symbolic link is left alone, and now said so (it was skipped without a word).
        XCTAssertTrue(first.stderr.contains("ignoring 'link.mp4': a symbolic link"), first.stderr)
        XCTAssertTrue(first.stderr.contains("ignoring 'caf\\xe9.mp4': its name is not UTF-8"), first.stderr)
        XCTAssertEqual(files("Upscaled"), ["new\nline Upscaled.mp4"])
        XCTAssertEqual(files("Originals"), ["new\nline.mp4"])
        XCTAssertEqual(files("Failed"), [])
        XCTAssertTrue(first.stderr.contains("waiting for 'download.mp4': it is empty"), first.stderr)
        try FileManager.default.removeItem(at: inbox.appendingPathComponent("download.mp4"))
        try FileManager.default.copyItem(at: Self.clip, to: inbox.appendingPathComponent("download.mp4"))
        XCTAssertEqual(try watchOnce(Self.encode).status, 0)
        XCTAssertEqual(files("Upscaled"), ["download Upscaled.mp4", "new\nline Upscaled.mp4"])

        XCTAssertEqual(try upscale(["queue", "pause", inbox.path]).status, 0)
        try drop(Self.clip, as: "replaced.mp4")
        XCTAssertEqual(try watchOnce(Self.encode).status, 0)
        XCTAssertEqual(try listing().jobs.first { $0.source == "replaced.mp4" }?.state, "queued")
        try Data(repeating: 7, count: 5000).write(to: inbox.appendingPathComponent("replaced.mp4"))
        XCTAssertEqual(try upscale(["queue", "resume", inbox.path]).status, 0)
        let replaced = try upscale(["watch", inbox.path, "--once", "--settle", "0.3"] + Self.encode, timeout: 60)
        XCTAssertFalse(replaced.hung, replaced.stderr)
        XCTAssertEqual(replaced.status, 1, replaced.stderr)
        XCTAssertEqual(files("Failed"), ["replaced.mp4", "replaced.mp4.error.txt"])
    }

    /// A slow --exec-after command holds no job slot (the next file waited for it), and stopping
    /// the watcher stops it and all it started, also what a command that has ended left running
    /// (they were left running, and the first SIGTERM waited for them).
    func testSlowExecAfterHoldsNoSlotAndStopsWithTheWatcher() throws {
        try drop(Self.clip, as: "a.mp4")
        try drop(Self.clip, as: "b.mp4")
        let pids = inbox.deletingLastPathComponent().appendingPathComponent("hook-pids").path
        let watcher = try background(["watch", inbox.path, "--settle", "0.3", "--jobs", "1",
                                      // a's command waits for its sleep; b's ends and leaves it running.
                                      "--exec-after", "sleep 300 & echo $! >> '\(pids)'; echo $$ >> '\(pids)'; case \"$UPSCALE_INPUT\" in *a.mp4) wait;; esac"] + Self.encode)
        defer { if watcher.isRunning { kill(watcher.processIdentifier, SIGKILL) } }
        try waitFor("both files upscaled while the first command sleeps", timeout: 60) { files("Upscaled").count == 2 }
        try waitFor("both commands started") { ((try? String(contentsOfFile: pids, encoding: .utf8)) ?? "").split(separator: "\n").count == 4 }
        let started = Date()
        kill(watcher.processIdentifier, SIGTERM)
        watcher.waitUntilExit()
        XCTAssertLessThan(Date().timeIntervalSince(started), 10, "one SIGTERM ends the watcher and its commands")
        usleep(200_000)
        for pid in try String(contentsOfFile: pids, encoding: .utf8).split(separator: "\n").compactMap({ pid_t($0) }) {
            XCTAssertFalse(Self.isRunning(pid), "process \(pid) of --exec-after still runs")
            if Self.isRunning(pid) { kill(pid, SIGKILL) }
        }
    }

    func testCrashingJobFailsAloneAfterTwoCrashesWithTheSignalInItsErrorFile() throws {
        try drop(Self.clip, as: "crashy.mp4")
        try drop(Self.clip, as: "fine.mp4")
        let run = try watchOnce(Self.encode, environment: ["UPSCALE_TEST_HOOK": "segv:1", "UPSCALE_TEST_HOOK_ONLY": "crashy",
                                                           "UPSCALE_WATCH_RETRY_SECONDS": "0.5"])
        XCTAssertEqual(run.status, 1, run.stderr)
        XCTAssertEqual(files("Upscaled"), ["fine Upscaled.mp4"])
        XCTAssertEqual(files("Failed"), ["crashy.mp4", "crashy.mp4.error.txt"])
        let error = try String(contentsOf: inbox.appendingPathComponent("Failed/crashy.mp4.error.txt"), encoding: .utf8)
        XCTAssertTrue(error.contains("crashed (SIGSEGV)"), error)
        XCTAssertTrue(error.contains("status: signal SIGSEGV; attempts: 2"), error)
        let crashy = try XCTUnwrap(try listing().jobs.first { $0.source == "crashy.mp4" })
        XCTAssertEqual(crashy.crashes, 2)
        XCTAssertEqual(files("Upscaled").filter { $0.hasSuffix(".partial") }, [])
    }

    func testStalledJobIsKilledAndRetriedThenFails() throws {
        try drop(Self.clip, as: "stuck.mp4")
        let run = try watchOnce(Self.encode, environment: ["UPSCALE_TEST_HOOK": "stall", "UPSCALE_WATCH_STALL_SECONDS": "1.5",
                                                           "UPSCALE_WATCH_RETRY_SECONDS": "0.3"])
        XCTAssertEqual(run.status, 1, run.stderr)
        let job = try XCTUnwrap(try listing().jobs.first)
        XCTAssertEqual(job.state, "failed")
        XCTAssertEqual(job.attempts, 3)
        XCTAssertTrue(job.error?.contains("no new frame for 1 s") == true, job.error ?? "")
        XCTAssertEqual(files("Failed"), ["stuck.mp4", "stuck.mp4.error.txt"])
    }

    func testKill9OfTheWatcherMidJobThenOnceFinishesWithoutLossOrDuplicate() throws {
        try drop(Self.clip, as: "long.mp4")
        let watcher = try background(["watch", inbox.path, "--settle", "0.3", "--width", "960", "--no-refine", "--preset", "slower"])
        try waitFor("the job to run") { files("Upscaled").contains { $0.hasSuffix(".partial") } }
        kill(watcher.processIdentifier, SIGKILL)
        watcher.waitUntilExit()
        // The child follows its parent: its temporary file goes, nothing keeps writing.
        try waitFor("the child to clean up", timeout: 30) { files("Upscaled").isEmpty }
        XCTAssertEqual(files(""), [".upscale", "Upscaled", "long.mp4"])
        let run = try watchOnce(["--width", "320", "--preset", "ultrafast"])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(files("Upscaled"), ["long Upscaled.mp4"])
        XCTAssertEqual(files("Originals"), ["long.mp4"])
        XCTAssertEqual(try Data(contentsOf: inbox.appendingPathComponent("Originals/long.mp4")), try Data(contentsOf: Self.clip))
        XCTAssertEqual(try frames(inbox.appendingPathComponent("Upscaled/long Upscaled.mp4")), try frames(Self.clip))
        let job = try XCTUnwrap(try listing().jobs.first)
        XCTAssertEqual(job.state, "done")
        XCTAssertEqual(job.attempts, 2)
        // It ran with the settings it was queued with, not the later run's.
        XCTAssertEqual(job.settings, ["--width", "960", "--preset", "slower", "--no-refine"])
    }

    /// Starts a watcher on `a.mp4` whose job pauses as its output is about to be placed (for
    /// `pause` seconds, or for good), and returns it once the job's child is there.
    private func watchUntilItsJobPlaces(pause: String, through folder: String? = nil) throws -> Process {
        try drop(Self.clip, as: "a.mp4")
        let watcher = try background(["watch", folder ?? inbox.path, "--settle", "0.3"] + Self.encode,
                                     environment: ["UPSCALE_TEST_HOOK": "pause-before-placing\(pause)"])
        let log = inbox.appendingPathComponent(".upscale/logs/job-1.log").path
        do {
            try waitFor("the job to reach its placing", timeout: 60) {
                ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").contains("pausing before the output is placed")
            }
        } catch {
            kill(watcher.processIdentifier, SIGKILL)
            throw error
        }
        return watcher
    }

    /// `watchUntilItsJobPlaces`, then the watcher killed with SIGKILL there: the job's child
    /// lives on, past its last look for a stop. Returns the child's pid.
    private func killWatcherWhileItsJobPlaces(pause: String, through folder: String? = nil) throws -> pid_t {
        let watcher = try watchUntilItsJobPlaces(pause: pause, through: folder)
        // (Not the planner's child, which plans a queued job for the ETA.)
        let child = Self.children(of: watcher.processIdentifier).first {
            ((try? String(contentsOfFile: "/proc/\($0)/cmdline", encoding: .utf8)) ?? "").contains("--child-report-fd\u{0}3\u{0}--unique-name")
        }
        kill(watcher.processIdentifier, SIGKILL)
        watcher.waitUntilExit()
        return try XCTUnwrap(child, "the job's child")
    }

    /// (Listed by the thread that started each: the watcher starts its jobs on their own threads.)
    private static func children(of pid: pid_t) -> [pid_t] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return tasks.flatMap { task in
            ((try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/children", encoding: .utf8)) ?? "").split(separator: " ").compactMap { pid_t($0) }
        }
    }

    /// Not gone, nor a zombie left to init (it has stopped running).
    private static func isRunning(_ pid: pid_t) -> Bool {
        let state = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8))?.split(separator: ")").last?.dropFirst().first
        return state != nil && state != "Z"
    }

    /// The watcher killed while a job's child places its finished output (its fsync of a large
    /// file, here a pause): the child, past its last look for a stop, places it after the next
    /// watcher started. That watcher found no output, ran the job again and made a second one
    /// ("a Upscaled 2.mp4", about one kill in 60). It now waits for the child to end, finds
    /// the output, checks it and moves the original: one output, the job run once.
    func testAJobPlacingItsOutputWhenTheWatcherIsKilledIsNotRunTwice() throws {
        let child = try killWatcherWhileItsJobPlaces(pause: ":3")
        XCTAssertTrue(Self.isRunning(child), "the child outlives its watcher")
        let run = try watchOnceLogged([])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertFalse(Self.isRunning(child))
        XCTAssertEqual(files("Upscaled"), ["a Upscaled.mp4"])
        XCTAssertEqual(files("Originals"), ["a.mp4"])
        XCTAssertEqual(try Data(contentsOf: inbox.appendingPathComponent("Originals/a.mp4")), try Data(contentsOf: Self.clip))
        XCTAssertEqual(try frames(inbox.appendingPathComponent("Upscaled/a Upscaled.mp4")), try frames(Self.clip))
        let job = try XCTUnwrap(try listing().jobs.first)
        XCTAssertEqual(job.state, "done")
        XCTAssertEqual(job.attempts, 1, "ran twice")
        XCTAssertTrue(run.stderr.contains("recovered job 1"), run.stderr)
    }

    /// The same with the killed watcher started through a symbolic link to the folder and the
    /// next one on its real path, and Upscaled/ a link to a folder elsewhere (another disk):
    /// the output the child recorded (by the link's path) is found. The job was run again
    /// beside it ("a Upscaled 2.mp4").
    func testAnOutputPlacedThroughALinkToTheFolderIsFoundByTheNextWatcher() throws {
        let link = inbox.deletingLastPathComponent().appendingPathComponent("Link to Inbox")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: inbox)
        let elsewhere = inbox.deletingLastPathComponent().appendingPathComponent("Elsewhere")
        try FileManager.default.createDirectory(at: elsewhere, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(at: inbox.appendingPathComponent("Upscaled"), withDestinationURL: elsewhere)
        let child = try killWatcherWhileItsJobPlaces(pause: ":3", through: link.path)
        let run = try watchOnceLogged([])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertFalse(Self.isRunning(child))
        XCTAssertEqual(files("Upscaled"), ["a Upscaled.mp4"])
        XCTAssertEqual(files("Originals"), ["a.mp4"])
        XCTAssertEqual(try listing().jobs.map(\.attempts), [1], "ran twice")
        XCTAssertTrue(run.stderr.contains("recovered job 1"), run.stderr)
    }

    /// A watcher stopped (SIGTERM) while a job's child places its output: the job is done, not
    /// queued again (the next run made it a second time, "a Upscaled 2.mp4").
    func testAJobPlacingItsOutputWhenTheWatcherIsStoppedIsDone() throws {
        let watcher = try watchUntilItsJobPlaces(pause: ":2")
        defer { if watcher.isRunning { kill(watcher.processIdentifier, SIGKILL) } }
        kill(watcher.processIdentifier, SIGTERM)
        watcher.waitUntilExit()
        XCTAssertEqual(watcher.terminationStatus, 0)
        let job = try XCTUnwrap(try listing().jobs.first)
        XCTAssertEqual(job.state, "done")
        XCTAssertEqual(job.attempts, 1)
        XCTAssertEqual(try watchOnce().status, 0)
        XCTAssertEqual(files("Upscaled"), ["a Upscaled.mp4"])
        XCTAssertEqual(files("Originals"), ["a.mp4"])
    }

    /// The same with a child that never ends (stuck in a write to a dead network share): the
    /// next watcher waits a while, ends it with SIGKILL, removes its temporary file and runs
    /// the job again. One output, no process left.
    func testAStuckChildOfAKilledWatcherIsEndedAndItsJobRunsAgain() throws {
        let child = try killWatcherWhileItsJobPlaces(pause: "")
        defer { if Self.isRunning(child) { kill(child, SIGKILL) } }
        let run = try DamageRun.run("/bin/sh", ["-c", "exec \"$0\" \"$@\" 1>&2", CLITests.binary.path, "watch", inbox.path, "--once", "--settle", "0.3"],
                                    timeout: 120, environment: ["UPSCALE_WATCH_ORPHAN_SECONDS": "1"])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertFalse(Self.isRunning(child), "the stuck child was left running")
        XCTAssertTrue(run.stderr.contains("did not end in 1 s; stopped it (SIGKILL); its job runs again unless its output was in place"), run.stderr)
        XCTAssertEqual(files("Upscaled"), ["a Upscaled.mp4"])
        XCTAssertEqual(files("Originals"), ["a.mp4"])
        XCTAssertEqual(try frames(inbox.appendingPathComponent("Upscaled/a Upscaled.mp4")), try frames(Self.clip))
        XCTAssertEqual(try listing().jobs.first?.attempts, 2)
    }

    /// `long.mp4` (60 frames) dropped in and watched in 1 s chunks (lossless, one thread), once
    /// `chunks` of its chunks are finished: the watcher and the job's work folder.
    private static let chunkedClip = CLITests.fixtures.appendingPathComponent("chunk-h264-bframes.mp4")

    private func watchChunkedJob(untilChunks chunks: Int = 1, environment: [String: String] = [:]) throws -> (Process, URL) {
        try drop(Self.chunkedClip, as: "long.mp4")
        let watcher = try background(["watch", inbox.path, "--settle", "0.3", "--codec", "ffv1", "--no-refine", "--threads", "1", "--chunk-seconds", "1"],
                                     environment: environment)
        let work = inbox.appendingPathComponent("Upscaled/.long Upscaled.mkv.upscale-work")
        do {
            try waitFor("\(chunks) chunk(s)") {
                ((try? FileManager.default.contentsOfDirectory(atPath: work.path)) ?? []).filter { $0.hasSuffix(".chunk") && !$0.hasPrefix(".") }.count >= chunks
            }
        } catch {
            kill(watcher.processIdentifier, SIGTERM)
            watcher.waitUntilExit()
            throw error
        }
        return (watcher, work)
    }

    /// A cancelled chunked job leaves no work folder: its chunks were kept for a resume that a
    /// cancelled job never gets, in a hidden folder under Upscaled/ for good.
    func testCancelledChunkedJobLeavesNoChunksBehind() throws {
        let (watcher, work) = try watchChunkedJob()
        defer {
            kill(watcher.processIdentifier, SIGTERM)
            watcher.waitUntilExit()
        }
        XCTAssertEqual(try upscale(["queue", "cancel", inbox.path, "long.mp4"]).status, 0)
        try waitFor("the job to stop and its chunks to go", timeout: 30) {
            try listing().jobs.first?.state == "cancelled" && !FileManager.default.fileExists(atPath: work.path)
        }
        XCTAssertEqual(files("Upscaled"), [])
    }

    /// Job 1 put back as a run leaves it when its last writes fail (the store's disk full) after
    /// its output was checked: "finishing", its output in place, its original (from
    /// Originals/, as `change` leaves it) back in the folder.
    /// With `width`, the planned output width its run stored is that.
    private func leaveJobFinishing(width: Int? = nil, change: (URL) throws -> Void = { _ in }) throws {
        let original = inbox.appendingPathComponent("a.mp4")
        try FileManager.default.moveItem(at: inbox.appendingPathComponent("Originals/a.mp4"), to: original)
        try change(original)
        try SQLiteDatabase(path: WatchFolder(root: inbox.path).storePath)
            .execute("UPDATE jobs SET state = 'finishing', output = 'Upscaled/a Upscaled.mp4', lease_expires = NULL\(width.map { ", out_width = \($0)" } ?? "") WHERE id = 1")
    }

    /// A job its run left "finishing" while the watcher runs is finished at the watcher's next
    /// look, as a start finishes one: the output checked and kept, the original moved to
    /// Originals/. It stayed "finishing" until the next start, its file was not taken again,
    /// and a `--once` run waited on it for good. (The queue is paused while the test puts the
    /// job back: the file reappearing beside a done job is queued again.)
    func testAJobLeftFinishingWhileTheWatcherRunsIsFinished() throws {
        try drop(Self.clip, as: "a.mp4")
        let watcher = try background(["watch", inbox.path, "--settle", "0.3"] + Self.encode)
        defer {
            kill(watcher.processIdentifier, SIGTERM)
            watcher.waitUntilExit()
        }
        try waitFor("the job to be done") { try listing().jobs.first?.state == "done" }
        XCTAssertEqual(try upscale(["queue", "pause", inbox.path]).status, 0)
        try leaveJobFinishing()
        try waitFor("the job to be finished again", timeout: 30) { try listing().jobs.first?.state == "done" && files("Originals") == ["a.mp4"] }
        Thread.sleep(forTimeInterval: 1)
        XCTAssertEqual(try listing().jobs.map(\.state), ["done"])
        XCTAssertFalse(files("").contains("a.mp4"))
        XCTAssertEqual(files("Originals"), ["a.mp4"])
        XCTAssertEqual(files("Upscaled"), ["a Upscaled.mp4"])
        XCTAssertTrue(watcher.isRunning)
    }

    /// A job "finishing" in its run (held there 3 s by the hook, its output placed and recorded,
    /// not checked yet) is its run's: the main loop's look for jobs left so passes it by, and
    /// the run finishes it once. Finished by both, its original was moved by one and found gone
    /// by the other.
    func testAJobFinishingInItsRunIsLeftToIt() throws {
        try drop(Self.clip, as: "a.mp4")
        let log = inbox.deletingLastPathComponent().appendingPathComponent("watch.log")
        FileManager.default.createFile(atPath: log.path, contents: nil)
        let output = try FileHandle(forWritingTo: log)
        let watcher = Process()
        watcher.executableURL = CLITests.binary
        watcher.arguments = ["watch", inbox.path, "--settle", "0.3"] + Self.encode
        watcher.environment = ProcessInfo.processInfo.environment.merging(["UPSCALE_TEST_HOOK": "pause-while-finishing:3"]) { $1 }
        watcher.standardOutput = output
        watcher.standardError = output
        try watcher.run()
        defer {
            kill(watcher.processIdentifier, SIGTERM)
            watcher.waitUntilExit()
        }
        try waitFor("the job to be finishing") { try listing().jobs.first?.state == "finishing" }
        try waitFor("the job to be done", timeout: 30) { try listing().jobs.first?.state == "done" }
        Thread.sleep(forTimeInterval: 0.5)
        let text = try String(contentsOf: log, encoding: .utf8)
        XCTAssertFalse(text.contains("recovered job"), text)
        XCTAssertTrue(text.contains("done 'a.mp4'"), text)
        XCTAssertEqual(files("Upscaled"), ["a Upscaled.mp4"])
        XCTAssertEqual(files("Originals"), ["a.mp4"])
    }

    /// Such a job whose file changed meanwhile (replaced while it was upscaled), found at a
    /// start: the output stays (it is of the version queued) and the file runs again as it is
    /// now. It was moved to Originals/ as done, never upscaled.
    func testAJobLeftFinishingWhoseFileChangedRunsAgain() throws {
        try drop(Self.clip, as: "a.mp4")
        XCTAssertEqual(try watchOnce(Self.encode).status, 0)
        let replacement = try Data(contentsOf: CLITests.fixtures.appendingPathComponent("street-2s-faststart.mp4"))
        try leaveJobFinishing { try replacement.write(to: $0) }
        let run = try watchOnceLogged(Self.encode)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stderr.contains("its file has changed since it was queued; it runs again"), run.stderr)
        XCTAssertEqual(files("Upscaled"), ["a Upscaled 2.mp4", "a Upscaled.mp4"])
        XCTAssertEqual(files("Originals"), ["a.mp4"])
        XCTAssertEqual(try Data(contentsOf: inbox.appendingPathComponent("Originals/a.mp4")), replacement)
        XCTAssertEqual(try listing().jobs.map(\.state), ["done"])
    }

    /// Such a job whose output is not of the planned size its run stored, found at a start: the
    /// output goes to Failed/ and the job runs again. The size was not checked there, so an
    /// output whose failed check could not be recorded (nor itself moved aside) was kept.
    func testAJobLeftFinishingWithAnOutputOfAnotherSizeRunsAgain() throws {
        try drop(Self.clip, as: "a.mp4")
        XCTAssertEqual(try watchOnce(Self.encode).status, 0)
        try leaveJobFinishing(width: 130)
        let run = try watchOnceLogged(Self.encode)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stderr.contains("was interrupted while finishing; it runs again"), run.stderr)
        XCTAssertEqual(files("Upscaled"), ["a Upscaled.mp4"])
        XCTAssertEqual(files("Failed"), ["a Upscaled.mp4"])
        XCTAssertEqual(files("Originals"), ["a.mp4"])
        XCTAssertEqual(try listing().jobs.map(\.state), ["done"])
    }

    /// A cancel that reaches the job's child after it placed its output, while it still ends
    /// (the hook holds it after its join, so the SIGKILL a second after the cancel's SIGTERM
    /// ends it): the output goes with the job, found by the identity the child said it was
    /// placing. It stayed beside a job shown as cancelled (seen once in a full run of this
    /// suite: the child killed while it removed its chunks).
    func testACancelWhileTheJobEndsAfterPlacingItsOutputLeavesNoOutput() throws {
        let (watcher, work) = try watchChunkedJob(environment: ["UPSCALE_TEST_HOOK": "stall-after-join"])
        defer {
            kill(watcher.processIdentifier, SIGTERM)
            watcher.waitUntilExit()
        }
        try waitFor("the output to be placed") { files("Upscaled").contains("long Upscaled.mkv") }
        XCTAssertEqual(try listing().jobs.first?.state, "running")
        XCTAssertEqual(try upscale(["queue", "cancel", inbox.path, "long.mp4"]).status, 0)
        try waitFor("the job to stop and its output to go", timeout: 30) {
            try listing().jobs.first?.state == "cancelled" && files("Upscaled").isEmpty
        }
        Thread.sleep(forTimeInterval: 0.5)
        XCTAssertEqual(files("Upscaled"), [])
        XCTAssertFalse(FileManager.default.fileExists(atPath: work.path))
        XCTAssertTrue(files("").contains("long.mp4"), "the original stays where it was")
        XCTAssertEqual(files("Originals"), [])
    }

    /// A chunked job's child stuck once its output is in place (the hook holds it after its
    /// join) when its watcher is killed: the next watcher ends it, finishes the job from the
    /// output the child recorded as placed, and removes its chunks, which stayed hidden under
    /// Upscaled/ for good.
    func testAStuckChildOfAKilledWatcherThatPlacedItsOutputLeavesNoChunks() throws {
        let (watcher, work) = try watchChunkedJob(environment: ["UPSCALE_TEST_HOOK": "stall-after-join"])
        try waitFor("the output to be placed") { files("Upscaled").contains("long Upscaled.mkv") }
        kill(watcher.processIdentifier, SIGKILL)
        watcher.waitUntilExit()
        let run = try DamageRun.run("/bin/sh", ["-c", "exec \"$0\" \"$@\" 1>&2", CLITests.binary.path, "watch", inbox.path, "--once", "--settle", "0.3"],
                                    timeout: 120, environment: ["UPSCALE_WATCH_ORPHAN_SECONDS": "1"])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stderr.contains("recovered job 1"), run.stderr)
        XCTAssertEqual(files("Upscaled"), ["long Upscaled.mkv"])
        XCTAssertFalse(FileManager.default.fileExists(atPath: work.path))
        XCTAssertEqual(files("Originals"), ["long.mp4"])
        XCTAssertEqual(try listing().jobs.map(\.attempts), [1])
        XCTAssertEqual(try frames(inbox.appendingPathComponent("Upscaled/long Upscaled.mkv")), try frames(Self.chunkedClip))
    }

    /// A job's child that stops answering once its output is in place (the hook holds it after
    /// its join) is killed as stalled, and the job is finished from that output: done, run
    /// once, its one output whole, the original in Originals/, no chunks left. It was run
    /// again (the kill counted as a failed run) and made "long Upscaled 2.mkv" beside the first.
    func testAJobKilledAfterPlacingItsOutputIsFinishedFromIt() throws {
        let (watcher, work) = try watchChunkedJob(environment: ["UPSCALE_TEST_HOOK": "stall-after-join", "UPSCALE_WATCH_STALL_SECONDS": "5"])
        defer {
            kill(watcher.processIdentifier, SIGTERM)
            watcher.waitUntilExit()
        }
        try waitFor("the job to end", timeout: 90) { try ["done", "failed"].contains(listing().jobs.first?.state) }
        Thread.sleep(forTimeInterval: 0.5)
        XCTAssertEqual(try listing().jobs.map(\.state), ["done"])
        XCTAssertEqual(try listing().jobs.map(\.attempts), [1], "run once")
        XCTAssertEqual(files("Upscaled"), ["long Upscaled.mkv"])
        XCTAssertFalse(FileManager.default.fileExists(atPath: work.path))
        XCTAssertEqual(files("Originals"), ["long.mp4"])
        XCTAssertEqual(try frames(inbox.appendingPathComponent("Upscaled/long Upscaled.mkv")), try frames(Self.chunkedClip))
    }

    /// A cancel that reaches the store after the job's child placed its output and exited, before
    /// the watcher recorded it (the hook holds the watcher there for 3 s): the job is cancelled,
    /// so its output goes and its file stays where it was. Before this was handled, the output
    /// stayed beside a job shown as cancelled (seen once in CI, on a chunked job).
    func testACancelAfterTheOutputIsPlacedLeavesNoOutput() throws {
        try drop(Self.clip, as: "a.mp4")
        let watcher = try background(["watch", inbox.path, "--settle", "0.3"] + Self.encode,
                                     environment: ["UPSCALE_TEST_HOOK": "pause-before-recording:3"])
        defer {
            kill(watcher.processIdentifier, SIGTERM)
            watcher.waitUntilExit()
        }
        try waitFor("the output to be placed") { files("Upscaled") == ["a Upscaled.mp4"] }
        XCTAssertEqual(try listing().jobs.first?.state, "running")
        XCTAssertEqual(try upscale(["queue", "cancel", inbox.path, "a.mp4"]).status, 0)
        try waitFor("the output to go", timeout: 10) { files("Upscaled").isEmpty }
        Thread.sleep(forTimeInterval: 0.5)
        XCTAssertEqual(files("Upscaled"), [])
        XCTAssertEqual(try listing().jobs.first?.state, "cancelled")
        XCTAssertTrue(files("").contains("a.mp4"), "the original stays where it was")
        XCTAssertEqual(files("Originals"), [])
    }

    /// The watch folder's disk filled up after a job's child placed its output and before the
    /// watcher recorded it (the hook holds the watcher there for 3 s while the test fills the
    /// disk): the record is tried again until there is room, the job stays the watcher's
    /// meanwhile, past its lease (2 s here), and it ends done with its one output, run once, and
    /// its original in Originals/. One failed write left the job "running"; once its lease ran
    /// out (30 s) it was taken again and made `a Upscaled 2.mp4` beside the first output. Then,
    /// with the record tried again, a lease that ran out while the disk was full had the output
    /// removed and the job made a second time.
    func testAJobWhoseResultCannotBeRecordedYetKeepsItsOneOutput() throws {
        let (watcher, filler) = try jobHeldByAFullDisk()
        try FileManager.default.removeItem(at: filler)
        try waitFor("the job to be done", timeout: 45) { try listing().jobs.first?.state == "done" }
        Thread.sleep(forTimeInterval: 1)
        XCTAssertTrue(watcher.isRunning)
        try assertDoneWithOneOutput()
    }

    /// The same with the watcher stopped (SIGTERM) while it waits to record: it exits, and the
    /// next watcher finishes the job from the output its child recorded in the job's lock
    /// file, which stays (the job was run again beside its output). A watcher started while
    /// the disk is still full fails before it can write that down, and leaves the file too (it
    /// removed it as it read it).
    func testAWatcherStoppedBeforeItCouldRecordAResultLeavesItToTheNext() throws {
        let (watcher, filler) = try jobHeldByAFullDisk()
        kill(watcher.processIdentifier, SIGTERM)
        watcher.waitUntilExit()
        XCTAssertEqual(watcher.terminationStatus, 0)
        let locks = { (try? FileManager.default.contentsOfDirectory(atPath: self.inbox.appendingPathComponent(".upscale/running").path)) ?? [] }
        XCTAssertEqual(locks().count, 1)
        // (What the store's closing freed is filled too.)
        let more = inbox.appendingPathComponent(".upscale/filler-2")
        try CLITests.fillDisk(with: more)
        XCTAssertNotEqual(try watchOnce(Self.encode).status, 0)
        XCTAssertEqual(locks().count, 1)
        XCTAssertEqual(files("Upscaled"), ["a Upscaled.mp4"])
        try FileManager.default.removeItem(at: filler)
        try FileManager.default.removeItem(at: more)
        XCTAssertEqual(try watchOnce(Self.encode).status, 0)
        XCTAssertEqual(locks(), [])
        try assertDoneWithOneOutput()
    }

    /// A job of `a.mp4` whose output is placed in Upscaled/ while the watch folder's disk (a
    /// small tmpfs) is full, so that the watcher cannot record it: the watcher, and the filler
    /// file to remove for room.
    private func jobHeldByAFullDisk() throws -> (Process, URL) {
        guard getuid() == 0 else { throw XCTSkip("needs root to mount a small tmpfs") }
        let mount = try DamageRun.run("/bin/sh", ["-c", "mount -t tmpfs -o size=96m tmpfs \"$0\"", inbox.path], timeout: 30)
        guard mount.status == 0 else { throw XCTSkip("tmpfs cannot be mounted here: \(mount.stderr)") }
        addTeardownBlock { [inbox] in _ = try? DamageRun.run("/bin/sh", ["-c", "umount \"$0\"", inbox!.path], timeout: 30) }
        try drop(Self.clip, as: "a.mp4")
        let watcher = try background(["watch", inbox.path, "--settle", "0.3"] + Self.encode,
                                     environment: ["UPSCALE_TEST_HOOK": "pause-before-recording:3", "UPSCALE_WATCH_LEASE_SECONDS": "2",
                                                   "UPSCALE_WATCH_RETRY_SECONDS": "0.1"])
        // (Teardown blocks run last-added first: the watcher ends before the unmount.)
        addTeardownBlock {
            if watcher.isRunning { kill(watcher.processIdentifier, SIGTERM) }
            watcher.waitUntilExit()
        }
        try waitFor("the output to be placed") { files("Upscaled") == ["a Upscaled.mp4"] }
        // Fill what is left of the disk (in the watcher's own folder, which it does not scan).
        let filler = inbox.appendingPathComponent(".upscale/filler")
        try CLITests.fillDisk(with: filler)
        // Past the hook's hold: the record failed, and is tried again.
        Thread.sleep(forTimeInterval: 5)
        XCTAssertEqual(try listing().jobs.first?.state, "running")
        XCTAssertEqual(files("Upscaled"), ["a Upscaled.mp4"])
        XCTAssertTrue(files("").contains("a.mp4"), "the original stays until the result is recorded")
        return (watcher, filler)
    }

    private func assertDoneWithOneOutput(file: StaticString = #filePath, line: UInt = #line) throws {
        XCTAssertEqual(files("Upscaled"), ["a Upscaled.mp4"], file: file, line: line)
        XCTAssertEqual(files("Originals"), ["a.mp4"], file: file, line: line)
        XCTAssertEqual(try listing().jobs.map(\.state), ["done"], file: file, line: line)
        XCTAssertEqual(try listing().jobs.map(\.attempts), [1], "run once", file: file, line: line)
        XCTAssertEqual(try frames(inbox.appendingPathComponent("Upscaled/a Upscaled.mp4")), try frames(Self.clip), file: file, line: line)
    }

    /// The same cancel followed at once by a retry, with a second job slot that claims the
    /// retried job while its first run is held: the job runs again once the first run has
    /// ended, and makes the one output (the first run's stayed beside it, and the retried
    /// run's was numbered, as it was if it started while the first run's output was there).
    func testACancelAndRetryAfterTheOutputIsPlacedLeaveOneOutput() throws {
        try drop(Self.clip, as: "a.mp4")
        let watcher = try background(["watch", inbox.path, "--settle", "0.3", "--jobs", "2"] + Self.encode,
                                     environment: ["UPSCALE_TEST_HOOK": "pause-before-recording:3"])
        defer {
            kill(watcher.processIdentifier, SIGTERM)
            watcher.waitUntilExit()
        }
        try waitFor("the output to be placed") { files("Upscaled") == ["a Upscaled.mp4"] }
        XCTAssertEqual(try upscale(["queue", "cancel", inbox.path, "a.mp4"]).status, 0)
        XCTAssertEqual(try upscale(["queue", "retry", inbox.path, "a.mp4"]).status, 0)
        try waitFor("the job to be done again") { try listing().jobs.first?.state == "done" }
        XCTAssertEqual(files("Upscaled"), ["a Upscaled.mp4"])
        XCTAssertEqual(files("Originals"), ["a.mp4"])
        XCTAssertEqual(try frames(inbox.appendingPathComponent("Upscaled/a Upscaled.mp4")), try frames(Self.clip))
    }

    /// A stop (SIGTERM) while that retried run waits for the held first run: the first run
    /// removes its output as it ends, the retried run hands its claim back without starting a
    /// child, and the watcher exits 0 with the job queued; the next run makes the one output.
    func testAStopWhileARetriedRunWaitsHandsItsClaimBack() throws {
        try drop(Self.clip, as: "a.mp4")
        let watcher = try background(["watch", inbox.path, "--settle", "0.3", "--jobs", "2"] + Self.encode,
                                     environment: ["UPSCALE_TEST_HOOK": "pause-before-recording:4"])
        try waitFor("the output to be placed") { files("Upscaled") == ["a Upscaled.mp4"] }
        XCTAssertEqual(try upscale(["queue", "cancel", inbox.path, "a.mp4"]).status, 0)
        XCTAssertEqual(try upscale(["queue", "retry", inbox.path, "a.mp4"]).status, 0)
        try waitFor("the retried job to be claimed") { try listing().jobs.first?.state == "running" }
        kill(watcher.processIdentifier, SIGTERM)
        watcher.waitUntilExit()
        XCTAssertEqual(watcher.terminationStatus, 0)
        XCTAssertEqual(files("Upscaled"), [])
        XCTAssertEqual(try listing().jobs.first?.state, "queued")
        XCTAssertEqual(try watchOnce(Self.encode).status, 0)
        XCTAssertEqual(files("Upscaled"), ["a Upscaled.mp4"])
        XCTAssertEqual(files("Originals"), ["a.mp4"])
    }

    /// The same when its watcher was killed: the job shows "interrupted", and a cancel then
    /// left its chunks for good (only a running watcher removed them).
    func testCancelledInterruptedJobLeavesNoChunksBehind() throws {
        let (watcher, work) = try watchChunkedJob()
        kill(watcher.processIdentifier, SIGKILL)
        watcher.waitUntilExit()
        XCTAssertEqual(try listing().jobs.first?.state, "running")
        let cancel = try upscale(["queue", "cancel", inbox.path, "long.mp4"])
        XCTAssertEqual(cancel.status, 0, cancel.stderr)
        XCTAssertEqual(try listing().jobs.first?.state, "cancelled")
        XCTAssertFalse(FileManager.default.fileExists(atPath: work.path))
        XCTAssertEqual(files("Upscaled"), [])
        XCTAssertEqual(files(""), [".upscale", "Upscaled", "long.mp4"], "the file stays")
    }

    /// A chunked job whose file is taken out of the folder mid-run fails, and leaves no chunks:
    /// the plain command keeps them for the file's return, which a watch folder does not wait for.
    func testAFileTakenOutMidChunkedJobLeavesNoChunks() throws {
        let (watcher, work) = try watchChunkedJob()
        defer {
            kill(watcher.processIdentifier, SIGTERM)
            watcher.waitUntilExit()
        }
        let away = inbox.deletingLastPathComponent().appendingPathComponent("long.mp4")
        XCTAssertEqual(rename(inbox.appendingPathComponent("long.mp4").path, away.path), 0)
        try waitFor("the job to fail", timeout: 30) { try listing().jobs.first?.state == "failed" }
        XCTAssertFalse(FileManager.default.fileExists(atPath: work.path))
        XCTAssertEqual(files("Upscaled"), [])
    }

    /// A long video runs in chunks under the watch folder too: a watcher killed with SIGKILL
    /// mid-job loses only the chunk in flight; the next run resumes from the kept chunks.
    func testKilledWatcherResumesAChunkedJob() throws {
        let (watcher, work) = try watchChunkedJob(untilChunks: 2)
        kill(watcher.processIdentifier, SIGKILL)
        watcher.waitUntilExit()
        // With no watcher, the job is shown interrupted, without a rate or an ETA (it showed
        // "running" with its last fps and ETA for good).
        let list = try DamageRun.run("/bin/sh", ["-c", "exec \"$0\" \"$@\" 1>&2", CLITests.binary.path, "queue", "list", inbox.path], timeout: 60)
        XCTAssertEqual(list.status, 0, list.stderr)
        let row = try XCTUnwrap(list.stderr.split(separator: "\n").first { $0.contains("long.mp4") }).split(separator: "\t", omittingEmptySubsequences: false)
        XCTAssertEqual(row[2], "interrupted", "\(row)")
        XCTAssertEqual(Array(row[4...5]), ["-", "-"], "\(row)")
        XCTAssertTrue(list.stderr.contains("no watcher is running on '\(inbox.path)': its interrupted jobs start again when 'upscale watch \(inbox.path)' runs"), list.stderr)
        let run = try watchOnce([])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(files("Upscaled"), ["long Upscaled.mkv"])
        XCTAssertEqual(files("Originals"), ["long.mp4"])
        XCTAssertEqual(try MediaProbe.packets(inbox.appendingPathComponent("Upscaled/long Upscaled.mkv").path, stream: 0).count, 60)
        let logs = try FileManager.default.contentsOfDirectory(atPath: inbox.appendingPathComponent(".upscale/logs").path)
        let text = try logs.map { try String(contentsOfFile: inbox.appendingPathComponent(".upscale/logs/\($0)").path, encoding: .utf8) }.joined()
        XCTAssertTrue(text.contains("resuming: "), text)
        XCTAssertFalse(FileManager.default.fileExists(atPath: work.path))
    }

    func testSigtermRequeuesTheRunningJobAndASecondWatcherIsRefused() throws {
        try drop(Self.clip, as: "a.mp4")
        let watcher = try background(["watch", inbox.path, "--settle", "0.3", "--width", "960", "--no-refine", "--preset", "slower"])
        try waitFor("the job to run") { files("Upscaled").contains { $0.hasSuffix(".partial") } }
        let second = try upscale(["watch", inbox.path, "--once"], timeout: 30)
        XCTAssertEqual(second.status, 2)
        XCTAssertTrue(second.stderr.contains("is already being watched"), second.stderr)
        // Queue commands work beside the running watcher.
        XCTAssertEqual(try listing().jobs.first?.state, "running")
        kill(watcher.processIdentifier, SIGTERM)
        watcher.waitUntilExit()
        XCTAssertEqual(watcher.terminationStatus, 0)
        XCTAssertEqual(files("Upscaled"), [])
        XCTAssertEqual(try listing().jobs.first?.state, "queued")
        XCTAssertEqual(try listing().jobs.first?.attempts, 0)
        XCTAssertTrue(files("").contains("a.mp4"))
    }

    /// A job whose output fails the finish check (here a Matroska file cut short: its header
    /// says 2 s, what is there gives one picture) fails cleanly: the original and the output in
    /// Failed/ with the reason, and `--once` exits 1. Before, the job stayed "finishing" for good
    /// and `--once` never returned.
    func testAnOutputThatFailsItsCheckFailsTheJobAndOnceReturns() throws {
        let whole = try Data(contentsOf: CLITests.fixtures.appendingPathComponent("street-subs.mkv"))
        try whole.prefix(whole.count * 6 / 10).write(to: inbox.appendingPathComponent("cut.mkv"))
        let run = try upscale(["watch", inbox.path, "--once", "--settle", "0.3"] + Self.encode, timeout: 120)
        XCTAssertFalse(run.hung, "watch --once did not return")
        XCTAssertEqual(run.status, 1, run.stderr)
        XCTAssertEqual(files("Failed"), ["cut Upscaled.mkv", "cut.mkv", "cut.mkv.error.txt"])
        let reason = try String(contentsOf: inbox.appendingPathComponent("Failed/cut.mkv.error.txt"), encoding: .utf8)
        XCTAssertTrue(reason.contains("the output 'cut Upscaled.mkv' lasts"), reason)
        XCTAssertEqual(try listing().jobs.first?.state, "failed")
    }

    /// `watch --once` stopped before it is done exits 130 (it exited 0), its job back in the queue.
    func testOnceStoppedEarlyExits130() throws {
        try drop(Self.clip, as: "a.mp4")
        let watcher = try background(["watch", inbox.path, "--once", "--settle", "0.3", "--width", "960", "--no-refine", "--preset", "slower"])
        try waitFor("the job to run") { files("Upscaled").contains { $0.hasSuffix(".partial") } }
        kill(watcher.processIdentifier, SIGTERM)
        watcher.waitUntilExit()
        XCTAssertEqual(watcher.terminationStatus, 130)
        XCTAssertEqual(try listing().jobs.first?.state, "queued")
        XCTAssertTrue(files("").contains("a.mp4"))
    }

    /// A once-run ends when nothing is left to do, also with cancelled files left in the folder
    /// (they stay where they are). Two cancelled a second or more apart kept it waiting for
    /// good: each was settled again at every scan, and never both at once.
    func testAOnceRunEndsWithCancelledFilesLeftInTheFolder() throws {
        // (a.mp4 runs first: files are queued in order of their names.)
        try drop(Self.clip, as: "a.mp4")
        try drop(Self.clip, as: "b.mp4")
        try drop(Self.clip, as: "c.mp4")
        // (The default settle time, and the cancels 2.5 s apart: the two files' settling then
        // never ended at the same scan, as it can with other timings.)
        let watcher = try background(["watch", inbox.path, "--once", "--width", "1280", "--preset", "medium"])
        defer {
            if watcher.isRunning { kill(watcher.processIdentifier, SIGTERM) }
            watcher.waitUntilExit()
        }
        try waitFor("the first job to start") { try listing().jobs.contains { $0.state == "running" } }
        XCTAssertEqual(try upscale(["queue", "cancel", inbox.path, "b.mp4"]).status, 0)
        usleep(2_500_000)
        XCTAssertEqual(try upscale(["queue", "cancel", inbox.path, "c.mp4"]).status, 0)
        try waitFor("the once-run to end", timeout: 60) { !watcher.isRunning }
        XCTAssertEqual(watcher.terminationStatus, 0)
        let states = Dictionary(uniqueKeysWithValues: try listing().jobs.map { ($0.source, $0.state) })
        XCTAssertEqual(states, ["a.mp4": "done", "b.mp4": "cancelled", "c.mp4": "cancelled"])
        XCTAssertEqual(files("").filter { $0.hasSuffix(".mp4") }, ["b.mp4", "c.mp4"])
    }

    /// A watch folder's own Upscaled/ (or Originals/, Failed/, or a folder in one) is refused
    /// as a watch folder: its results were upscaled again and moved out from under the outer
    /// folder's records.
    func testAWatchFoldersOwnFoldersCannotBeWatched() throws {
        try drop(Self.clip, as: "a.mp4")
        XCTAssertEqual(try watchOnce(Self.encode).status, 0)
        let results = files("Upscaled")
        XCTAssertEqual(results.count, 1)
        let deeper = inbox.appendingPathComponent("Originals/trip")
        try FileManager.default.createDirectory(at: deeper, withIntermediateDirectories: true)
        // Also through a link to one.
        let link = inbox.deletingLastPathComponent().appendingPathComponent("results")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: inbox.appendingPathComponent("Upscaled"))
        for (folder, name) in [(inbox.appendingPathComponent("Upscaled"), "Upscaled"), (deeper, "Originals"), (link, "Upscaled")] {
            let refused = try upscale(["watch", folder.path, "--once"] + Self.encode)
            XCTAssertEqual(refused.status, 2, refused.stderr)
            XCTAssertEqual(refused.stderr, "error: '\(folder.path)' is in the \(name)/ folder of the watch folder '\(inbox.path)', which keeps its files there; watch another folder\n")
        }
        XCTAssertEqual(files("Upscaled"), results, "nothing was taken")
        XCTAssertEqual(files("Originals"), ["a.mp4", "trip"])
    }

    /// A file deleted while its job was queued fails as gone; `queue retry` names it and says to
    /// put it back (it said "no failed or cancelled job", with the job listed as failed), and
    /// retries it once it is back.
    func testRetryingAJobWhoseFileIsGoneSaysSo() throws {
        XCTAssertEqual(try watchOnce(Self.encode).status, 0, "the folder's queue made")
        XCTAssertEqual(try upscale(["queue", "pause", inbox.path]).status, 0)
        try drop(Self.clip, as: "q.mp4")
        XCTAssertEqual(try watchOnce(Self.encode).status, 0)
        XCTAssertEqual(try listing().jobs.first?.state, "queued")
        try FileManager.default.removeItem(at: inbox.appendingPathComponent("q.mp4"))
        XCTAssertEqual(try upscale(["queue", "resume", inbox.path]).status, 0)
        _ = try watchOnce(Self.encode)
        XCTAssertEqual(try listing().jobs.first?.state, "failed")
        let named = try upscale(["queue", "retry", inbox.path, "q.mp4"])
        XCTAssertEqual(named.status, 1, named.stderr)
        XCTAssertEqual(named.stderr, "error: 'q.mp4' is no longer in the folder (deleted or moved while queued); put it back in \(inbox.path) and retry\n")
        // (Its output, on standard output, read as standard error.)
        let all = try DamageRun.run("/bin/sh", ["-c", "exec \"$0\" \"$@\" 1>&2", CLITests.binary.path, "queue", "retry", inbox.path], timeout: 60)
        XCTAssertEqual(all.status, 0, all.stderr)
        // With no names nothing is said of it (an old failure whose file was removed on purpose
        // would come up at every retry).
        XCTAssertEqual(all.stderr, "nothing to retry\n")
        try drop(Self.clip, as: "q.mp4")
        let back = try upscale(["queue", "retry", inbox.path, "q.mp4"])
        XCTAssertEqual(back.status, 0, back.stderr)
        XCTAssertEqual(try listing().jobs.first?.state, "queued")
    }

    /// A .hdr file is taken only when it is a Radiance picture: Analyze and ENVI headers end in
    /// .hdr too, beside their data files, and would have failed into Failed/, away from them.
    func testOnlyARadianceHDRIsTaken() throws {
        try Data([0x5C, 0x01, 0, 0] + [UInt8](repeating: 0, count: 344)).write(to: inbox.appendingPathComponent("scan.hdr"))
        try Data(repeating: 7, count: 4096).write(to: inbox.appendingPathComponent("scan.img"))
        let run = try watchOnceLogged(Self.encode)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stderr.contains("ignoring 'scan.hdr': not a video or image file"), run.stderr)
        XCTAssertEqual(files("").filter { !$0.hasPrefix(".") }, ["scan.hdr", "scan.img"])
        XCTAssertTrue(try listing().jobs.isEmpty)
        XCTAssertTrue(StillImage.isStill(inbox.appendingPathComponent("scan.hdr").path) == false)
    }

    /// Also while x265 is deep in its work (the flush of a veryslow 3x encode, whose
    /// look-ahead decides all 20 pictures at once: the job sees a stop only between pictures,
    /// and took 15 s to stop there): a job not stopped a second after the request is killed.
    func testCancelStopsARunningJobWithinASecondOrTwo() throws {
        try drop(Self.clip, as: "long.mp4")
        let watcher = try background(["watch", inbox.path, "--settle", "0.3", "--scale", "3", "--no-refine", "--preset", "veryslow"])
        defer {
            kill(watcher.processIdentifier, SIGTERM)
            watcher.waitUntilExit()
        }
        try waitFor("the job to run") { files("Upscaled").contains { $0.hasSuffix(".partial") } }
        // All 20 pictures are scaled within about 2 s here (debug build); then the flush.
        Thread.sleep(forTimeInterval: 4)
        let asked = Date()
        XCTAssertEqual(try upscale(["queue", "cancel", inbox.path, "long.mp4"]).status, 0)
        try waitFor("the job to stop", timeout: 10) { files("Upscaled").isEmpty }
        let took = Date().timeIntervalSince(asked)
        print("cancel: the running job stopped \(String(format: "%.2f", took)) s after 'queue cancel'")
        // Seen within a quarter second, killed a second later.
        XCTAssertLessThan(took, 3)
        XCTAssertEqual(try listing().jobs.first?.state, "cancelled")
        XCTAssertTrue(files("").contains("long.mp4"), "the original stays where it was")
    }

    /// The watcher dies after a job's output is complete and checked state is recorded, before
    /// the original moves: the next run finishes it from the store (one output, original moved).
    func testCrashBetweenOutputAndOriginalMoveIsFinishedOnRestart() throws {
        try drop(Self.clip, as: "a.mp4")
        let first = try watchOnce(Self.encode, environment: ["UPSCALE_TEST_HOOK": "watcher-dies-finishing"])
        XCTAssertEqual(first.status, 128 + SIGKILL)
        XCTAssertEqual(files("Upscaled"), ["a Upscaled.mp4"])
        XCTAssertTrue(files("").contains("a.mp4"))
        XCTAssertEqual(try listing().jobs.first?.state, "finishing")
        let second = try watchOnce()
        XCTAssertEqual(second.status, 0, second.stderr)
        XCTAssertEqual(files("Upscaled"), ["a Upscaled.mp4"])
        XCTAssertEqual(files("Originals"), ["a.mp4"])
        let job = try XCTUnwrap(try listing().jobs.first)
        XCTAssertEqual(job.state, "done")
        XCTAssertEqual(job.attempts, 1, "ran twice")

        // The same, with an original that cannot be moved out: it stays, as when finishing (the
        // restarted watcher failed on it and could not start at all).
        try drop(Self.clip, as: "b.mp4")
        let third = try watchOnce(Self.encode, environment: ["UPSCALE_TEST_HOOK": "watcher-dies-finishing"])
        XCTAssertEqual(third.status, 128 + SIGKILL)
        let originals = inbox.appendingPathComponent("Originals")
        try FileManager.default.moveItem(at: originals, to: inbox.deletingLastPathComponent().appendingPathComponent("kept"))
        try Data("a file, not a folder".utf8).write(to: originals)
        let fourth = try watchOnce()
        XCTAssertEqual(fourth.status, 0, fourth.stderr)
        XCTAssertEqual(try listing().jobs.first { $0.source == "b.mp4" }?.state, "done")
        XCTAssertTrue(files("").contains("b.mp4"))
        XCTAssertEqual(try watchOnce().status, 0)
        XCTAssertEqual(files("Upscaled"), ["a Upscaled.mp4", "b Upscaled.mp4"])
    }

    /// A name in Originals/ taken by a dangling symbolic link (an archive disk not mounted): the
    /// original gets the next free name. The link was not seen as taken, the rename refused it,
    /// and the move chose the same name again, for good, at full speed.
    func testADanglingLinkInOriginalsTakesItsName() throws {
        try drop(Self.clip, as: "clip.mp4")
        try FileManager.default.createDirectory(at: inbox.appendingPathComponent("Originals"), withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: inbox.appendingPathComponent("Originals/clip.mp4").path, withDestinationPath: "/nowhere/clip.mp4")
        let run = try upscale(["watch", inbox.path, "--once", "--settle", "0.3"] + Self.encode, timeout: 60)
        XCTAssertFalse(run.hung, "the move spun")
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(files("Originals"), ["clip 2.mp4", "clip.mp4"])
        XCTAssertEqual(try Data(contentsOf: inbox.appendingPathComponent("Originals/clip 2.mp4")), try Data(contentsOf: Self.clip))
    }

    func testCollisionsGetNumberedNamesAndOptionsAreRemembered() throws {
        try drop(Self.clip, as: "a.mp4")
        XCTAssertEqual(try watchOnce(Self.encode).status, 0)
        try drop(Self.clip, as: "a.mp4")
        // No options: the folder's last ones are used.
        let second = try watchOnce()
        XCTAssertEqual(second.status, 0, second.stderr)
        XCTAssertEqual(files("Upscaled"), ["a Upscaled 2.mp4", "a Upscaled.mp4"])
        XCTAssertEqual(files("Originals"), ["a 2.mp4", "a.mp4"])
        XCTAssertEqual(try MediaProbe.info(inbox.appendingPathComponent("Upscaled/a Upscaled 2.mp4").path).video?.width, 128)
    }

    func testJobWaitsForSpaceInsteadOfFailingHalfWay() throws {
        try drop(Self.clip, as: "big.mp4")
        let tight = try watchOnce(Self.encode, environment: ["UPSCALE_TEST_FREE_BYTES": "1000000", "UPSCALE_WATCH_RETRY_SECONDS": "0.2"])
        XCTAssertEqual(tight.status, 0, tight.stderr)
        let job = try XCTUnwrap(try listing().jobs.first)
        XCTAssertEqual(job.state, "waiting-for-space")
        XCTAssertEqual(job.attempts, 0)
        XCTAssertTrue(job.error?.contains("has 1 MB free; this job may need up to") == true, job.error ?? "")
        XCTAssertEqual(files("Upscaled"), [])
        XCTAssertTrue(files("").contains("big.mp4"))
        // `queue list` counts it as work left (it said "nothing left to do").
        let list = try DamageRun.run("/bin/sh", ["-c", "exec \"$0\" \"$@\" 1>&2", CLITests.binary.path, "queue", "list", inbox.path], timeout: 60)
        XCTAssertTrue(list.stderr.contains("0 queued or running, 1 waiting for space; queue ETA"), list.stderr)
        usleep(300_000)
        let roomy = try watchOnce()
        XCTAssertEqual(roomy.status, 0, roomy.stderr)
        XCTAssertEqual(try listing().jobs.first?.state, "done")
        XCTAssertEqual(files("Upscaled"), ["big Upscaled.mp4"])
    }

    func testFileWrittenInChunksWithPausesIsNotTakenEarly() throws {
        // A copy over SMB/NFS: reopened and appended every 0.8 s, closed in between (invisible
        // to /proc), for 4 s; the settle time (2 s) is longer than each pause.
        let data = try Data(contentsOf: Self.clip)
        let watcher = try background(["watch", inbox.path, "--settle", "2"] + Self.encode)
        defer {
            kill(watcher.processIdentifier, SIGTERM)
            watcher.waitUntilExit()
        }
        let path = inbox.appendingPathComponent("slow.mp4").path
        FileManager.default.createFile(atPath: path, contents: nil)
        let chunks = 5
        for i in 0..<chunks {
            let handle = try XCTUnwrap(FileHandle(forWritingAtPath: path))
            try handle.seekToEnd()
            let range = (data.count * i / chunks)..<(data.count * (i + 1) / chunks)
            try handle.write(contentsOf: data.subdata(in: range))
            try handle.close()
            usleep(800_000)
            XCTAssertEqual((try? listing().jobs.count) ?? 0, 0, "taken after chunk \(i + 1) of \(chunks)")
        }
        try waitFor("the complete file to be upscaled") { try listing().jobs.first?.state == "done" }
        XCTAssertEqual(try Data(contentsOf: inbox.appendingPathComponent("Originals/slow.mp4")), data)
    }

    /// The queue's ETA: queued jobs' planned frames and output size at the output-pixel rate
    /// measured on the finished ones.
    func testQueueETAComesFromMeasuredRatesAndPlannedSizes() throws {
        try drop(Self.clip, as: "a.mp4")
        try drop(Self.clip, as: "b.mp4")
        let start = Date()
        XCTAssertEqual(try watchOnce(Self.encode).status, 0)
        let perJob = Date().timeIntervalSince(start) / 2
        XCTAssertNil(try listing().etaSeconds.flatMap { $0 > 0 ? $0 : nil }, "nothing is left to do")
        XCTAssertEqual(try upscale(["queue", "pause", inbox.path]).status, 0)
        try drop(Self.clip, as: "c.mp4")
        XCTAssertEqual(try watchOnce().status, 0)
        let eta = try XCTUnwrap(try listing().etaSeconds)
        print("queue ETA for one queued job: \(String(format: "%.2f", eta)) s; the same job took about \(String(format: "%.2f", perJob)) s")
        XCTAssertGreaterThan(eta, 0)
        XCTAssertLessThan(eta, perJob * 3)
        XCTAssertEqual(try listing().unplannedJobs, 0)

        // A file that cannot be planned yet (half an .mp4: no index) is left out of the ETA,
        // and said to be; it made the whole queue's ETA unknown.
        let whole = try Data(contentsOf: Self.clip)
        try whole.prefix(whole.count / 2).write(to: inbox.appendingPathComponent("d.mp4"))
        XCTAssertEqual(try watchOnce().status, 0)
        let listed = try listing()
        XCTAssertEqual(listed.jobs.map(\.state), ["done", "done", "queued", "queued"])
        XCTAssertEqual(listed.unplannedJobs, 1)
        XCTAssertEqual(try XCTUnwrap(listed.etaSeconds), eta, accuracy: 1e-9, "the same as for c.mp4 alone")
        let text = try DamageRun.run("/bin/sh", ["-c", "exec \"$0\" \"$@\" 1>&2", CLITests.binary.path, "queue", "list", inbox.path], timeout: 60).stderr
        XCTAssertTrue(text.contains("4 jobs, 2 queued or running, paused; queue ETA ") && text.contains(" for all but 1 job(s) not planned yet"), text)
    }

    func testRecursiveKeepsSubfolderPaths() throws {
        try drop(Self.clip, as: "trip/day 1/a.mp4")
        // Without --recursive the folder is left, and said to be (it was passed over without a word).
        let flat = try watchOnceLogged(Self.encode)
        XCTAssertEqual(flat.status, 0, flat.stderr)
        XCTAssertTrue(flat.stderr.contains("ignoring the folder 'trip': watch with --recursive to take the files in folders"), flat.stderr)
        XCTAssertEqual(files("trip/day 1"), ["a.mp4"])
        let run = try watchOnce(Self.encode + ["--recursive"])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(files("Upscaled/trip/day 1"), ["a Upscaled.mp4"])
        XCTAssertEqual(files("Originals/trip/day 1"), ["a.mp4"])
        XCTAssertEqual(files("trip/day 1"), [])
        // A sub-folder that is a watch folder of its own is left to its watcher: its results
        // were upscaled again ("x Upscaled Upscaled.mp4") and its originals moved out of it.
        let inner = inbox.appendingPathComponent("camera")
        try drop(Self.clip, as: "camera/x.mp4")
        let own = try upscale(["watch", inner.path, "--once", "--settle", "0.3"] + Self.encode)
        XCTAssertEqual(own.status, 0, own.stderr)
        XCTAssertEqual(files("camera/Upscaled"), ["x Upscaled.mp4"])
        let outer = try watchOnceLogged(Self.encode + ["--recursive"])
        XCTAssertEqual(outer.status, 0, outer.stderr)
        XCTAssertTrue(outer.stderr.contains("ignoring 'camera': it is a watch folder of its own"), outer.stderr)
        XCTAssertEqual(files("camera/Upscaled"), ["x Upscaled.mp4"])
        XCTAssertEqual(files("camera/Originals"), ["x.mp4"])
        XCTAssertEqual(files("Upscaled"), ["trip"])
        XCTAssertEqual(files("Originals"), ["trip"])
    }

    /// A copy of an .mp4 that pauses longer than the settle time, half written (its index, at
    /// the end, not yet there): it was moved to Failed/ half copied, and the copy going on then
    /// began the file anew in the folder with only the rest of its bytes. It stays, is looked at
    /// again, and is upscaled once, whole, when the copy ends. One that never ends goes to
    /// Failed/ once `--unfinished-minutes` have passed since its last change.
    func testAPausedCopyOfAnMP4IsUpscaledWhenItEnds() throws {
        let whole = try Data(contentsOf: Self.clip)
        let copy = inbox.appendingPathComponent("copy.mp4")
        try whole.prefix(whole.count / 2).write(to: copy)
        let watcher = try background(["watch", inbox.path, "--settle", "0.3", "--unfinished-minutes", "5"] + Self.encode)
        defer { watcher.terminate(); watcher.waitUntilExit() }
        try waitFor("the half copy to be looked at") { try listing().jobs.first?.error?.contains("no index yet") == true }
        XCTAssertEqual(files("Failed"), [])
        XCTAssertEqual(try Data(contentsOf: copy), whole.prefix(whole.count / 2), "the half copy is left as it is")
        let handle = try FileHandle(forWritingTo: copy)
        try handle.seekToEnd()
        try handle.write(contentsOf: whole.suffix(from: whole.count / 2))
        try handle.close()
        try waitFor("the whole copy to be upscaled") { files("Originals") == ["copy.mp4"] }
        XCTAssertEqual(try Data(contentsOf: inbox.appendingPathComponent("Originals/copy.mp4")), whole)
        XCTAssertEqual(files("Upscaled"), ["copy Upscaled.mp4"], "upscaled once")
        XCTAssertEqual(try frames(inbox.appendingPathComponent("Upscaled/copy Upscaled.mp4")), try frames(Self.clip))
        XCTAssertEqual(files("Failed"), [])
        // Looks at the half copy and the start that found it changed are not attempts.
        XCTAssertEqual(try listing().jobs.map(\.state), ["done"])
        XCTAssertEqual(try listing().jobs.map(\.attempts), [1])
        watcher.terminate()
        watcher.waitUntilExit()

        // A copy that never ends: looked at again until 3 s after its last change, then failed.
        let cut = inbox.appendingPathComponent("cut.mp4")
        try whole.prefix(whole.count / 2).write(to: cut)
        let second = try background(["watch", inbox.path, "--settle", "0.3", "--unfinished-minutes", "0.05"] + Self.encode)
        defer { second.terminate(); second.waitUntilExit() }
        try waitFor("the cut copy to be looked at") { try listing().jobs.contains { $0.source == "cut.mp4" && $0.error?.contains("no index yet") == true } }
        XCTAssertEqual(files("Failed"), [], "not failed before its time")
        try waitFor("the cut copy to fail") { files("Failed") == ["cut.mp4", "cut.mp4.error.txt"] }
        let note = try String(contentsOf: inbox.appendingPathComponent("Failed/cut.mp4.error.txt"), encoding: .utf8)
        XCTAssertTrue(note.contains("has no index (no moov box)"), note)
        XCTAssertEqual(try Data(contentsOf: inbox.appendingPathComponent("Failed/cut.mp4")), whole.prefix(whole.count / 2))
    }

    /// An .mkv, a fast-start .mp4 (index first) or an MPEG-TS half copied, the copy paused longer
    /// than the settle time: FFmpeg reads each without a word up to where its data ends, so it was
    /// upscaled in part and the half copy moved to Originals/. It is left as it is while it
    /// is shorter than its header says, and upscaled whole once the copy goes on to the end.
    func testAPausedCopyOfAFileShorterThanItsHeaderIsUpscaledWhole() throws {
        let watcher = try background(["watch", inbox.path, "--settle", "0.3", "--unfinished-minutes", "5"] + Self.encode)
        defer { watcher.terminate(); watcher.waitUntilExit() }
        // A transport stream made from the clip: half of it ends inside a packet.
        let transport = FileManager.default.temporaryDirectory.appendingPathComponent("upscale-\(UUID().uuidString).ts")
        try Remuxer.copy(Self.clip.path, to: transport.path)
        defer { try? FileManager.default.removeItem(at: transport) }
        for source in [CLITests.fixtures.appendingPathComponent("chunk-vfr.mkv"), CLITests.fixtures.appendingPathComponent("street-2s-faststart.mp4"), transport] {
            let name = source.lastPathComponent
            let whole = try Data(contentsOf: source)
            let copy = inbox.appendingPathComponent("copy-" + name)
            // (Of the stream's 188-byte packets, half may end between two: 7 bytes on.)
            let split = whole.count / 2 + (source.pathExtension == "ts" ? 7 : 0)
            try whole.prefix(split).write(to: copy)
            let said = source.pathExtension == "ts" ? "cut short, it ends inside a 188-byte packet" : "cut short, \(split) bytes of at least \(whole.count) bytes"
            try waitFor("the half copy of \(name) to be looked at") {
                try listing().jobs.first { $0.source == copy.lastPathComponent }?.error?.contains(said) == true
            }
            // Looked at again a few times (every second), still left alone.
            Thread.sleep(forTimeInterval: 2.5)
            XCTAssertEqual(try Data(contentsOf: copy), whole.prefix(split), "the half copy is left as it is")
            XCTAssertFalse(files("Originals").contains(copy.lastPathComponent))
            XCTAssertEqual(files("Upscaled").filter { $0.hasPrefix("copy-" + source.deletingPathExtension().lastPathComponent) }, [])
            let handle = try FileHandle(forWritingTo: copy)
            try handle.seekToEnd()
            try handle.write(contentsOf: whole.suffix(from: split))
            try handle.close()
            try waitFor("the whole copy of \(name) to be upscaled") { files("Originals").contains(copy.lastPathComponent) }
            XCTAssertEqual(try Data(contentsOf: inbox.appendingPathComponent("Originals/" + copy.lastPathComponent)), whole)
            // (HEVC in MPEG-TS is written as .mov.)
            let output = "copy-\(source.deletingPathExtension().lastPathComponent) Upscaled.\(source.pathExtension == "ts" ? "mov" : source.pathExtension)"
            XCTAssertTrue(files("Upscaled").contains(output), "\(files("Upscaled"))")
            XCTAssertEqual(try frames(inbox.appendingPathComponent("Upscaled/" + output)), try frames(source), name)
        }
        XCTAssertEqual(files("Failed"), [])
        XCTAssertEqual(try listing().jobs.map(\.state), ["done", "done", "done"])
        XCTAssertEqual(try listing().jobs.map(\.attempts), [1, 1, 1], "looks at a cut-short file are not attempts")
        watcher.terminate()
        watcher.waitUntilExit()

        // A file that stays cut short (a download that broke off): once it has not changed for
        // --unfinished-minutes, upscaled as it is and failed (its output is shorter than its
        // header says), the part made kept beside it in Failed/.
        let mkv = CLITests.fixtures.appendingPathComponent("chunk-vfr.mkv")
        let whole = try Data(contentsOf: mkv)
        let cut = inbox.appendingPathComponent("cut.mkv")
        // (Written once the watcher runs: its 6 s count from the file's last change.)
        let second = try background(["watch", inbox.path, "--settle", "0.3", "--unfinished-minutes", "0.1"] + Self.encode)
        defer { second.terminate(); second.waitUntilExit() }
        try whole.prefix(whole.count / 2).write(to: cut)
        try waitFor("the cut file to be looked at") { try listing().jobs.contains { $0.source == "cut.mkv" && $0.error?.contains("cut short") == true } }
        XCTAssertEqual(files("Failed"), [], "not taken before its time")
        try waitFor("the cut file to fail") { files("Failed").contains("cut.mkv.error.txt") }
        XCTAssertEqual(files("Failed"), ["cut Upscaled.mkv", "cut.mkv", "cut.mkv.error.txt"])
        let job = try XCTUnwrap(try listing().jobs.first { $0.source == "cut.mkv" })
        XCTAssertEqual(job.state, "failed")
        XCTAssertTrue(job.notes.contains { $0.contains("is cut short: \(whole.count / 2) bytes of at least \(whole.count) bytes") }, "\(job.notes)")
        XCTAssertEqual(try Data(contentsOf: inbox.appendingPathComponent("Failed/cut.mkv")), whole.prefix(whole.count / 2))
        let made = try frames(inbox.appendingPathComponent("Failed/cut Upscaled.mkv"))
        XCTAssertGreaterThan(made, 0)
        XCTAssertLessThan(made, try frames(mkv))
    }

    /// A Matroska recording under way leaves its Segment's size open (all ones) until it stops,
    /// then fills it in: paused longer than the settle time (a recording paused, or written
    /// on another machine to a shared folder, where no open writer is seen), it was upscaled
    /// in part and moved to Originals/ while it was still being written. It is left as it is
    /// while its length is open, and upscaled whole once the recording ends.
    func testAPausedMatroskaRecordingIsUpscaledOnceItEnds() throws {
        let source = CLITests.fixtures.appendingPathComponent("chunk-vfr.mkv")
        let whole = try Data(contentsOf: source)
        var open = [UInt8](whole)
        // The EBML header (its ID, a one-byte size, its body), then the Segment's ID and size.
        let segment = 5 + Int(open[4] & 0x7F)
        XCTAssertEqual(open[4] & 0x80, 0x80, "a one-byte header size")
        XCTAssertEqual(Array(open[segment..<(segment + 4)]), [0x18, 0x53, 0x80, 0x67])
        let length = open[segment + 4].leadingZeroBitCount + 1
        open[segment + 4] = UInt8(0xFF >> (length - 1))
        for i in 1..<length { open[segment + 4 + i] = 0xFF }
        let watcher = try background(["watch", inbox.path, "--settle", "0.3", "--unfinished-minutes", "5"] + Self.encode)
        defer { watcher.terminate(); watcher.waitUntilExit() }
        let recording = inbox.appendingPathComponent("recording.mkv")
        let split = whole.count * 3 / 5
        try Data(open.prefix(split)).write(to: recording)
        try waitFor("the recording to be looked at") {
            try listing().jobs.first { $0.source == "recording.mkv" }?.error?.contains("its length is left open, as a recording under way leaves it") == true
        }
        Thread.sleep(forTimeInterval: 2.5)
        XCTAssertEqual(try Data(contentsOf: recording), Data(open.prefix(split)), "the recording is left as it is")
        XCTAssertEqual(files("Originals"), [])
        XCTAssertEqual(files("Upscaled"), [])
        // The recording ends: the rest written, then the size filled in.
        let handle = try FileHandle(forWritingTo: recording)
        try handle.seekToEnd()
        try handle.write(contentsOf: whole.suffix(from: split))
        try handle.seek(toOffset: 0)
        try handle.write(contentsOf: whole.prefix(segment + 4 + length))
        try handle.close()
        try waitFor("the whole recording to be upscaled") { files("Originals").contains("recording.mkv") }
        XCTAssertEqual(try Data(contentsOf: inbox.appendingPathComponent("Originals/recording.mkv")), whole)
        XCTAssertEqual(try frames(inbox.appendingPathComponent("Upscaled/recording Upscaled.mkv")), try frames(source))
        XCTAssertEqual(try listing().jobs.map(\.state), ["done"])
        XCTAssertEqual(try listing().jobs.map(\.attempts), [1])
        watcher.terminate()
        watcher.waitUntilExit()

        // A finished file that keeps the open length (written through a pipe, or by a
        // browser): upscaled as it is once it has not changed for --unfinished-minutes.
        let second = try background(["watch", inbox.path, "--settle", "0.3", "--unfinished-minutes", "0.1"] + Self.encode)
        defer { second.terminate(); second.waitUntilExit() }
        let piped = inbox.appendingPathComponent("piped.mkv")
        try Data(open).write(to: piped)
        try waitFor("the piped file to be looked at") {
            try listing().jobs.first { $0.source == "piped.mkv" }?.error?.contains("its length is left open") == true
        }
        XCTAssertEqual(files("Originals"), ["recording.mkv"], "not taken before its time")
        try waitFor("the piped file to be upscaled as it is") { files("Originals").contains("piped.mkv") }
        XCTAssertEqual(try Data(contentsOf: inbox.appendingPathComponent("Originals/piped.mkv")), Data(open))
        XCTAssertEqual(try frames(inbox.appendingPathComponent("Upscaled/piped Upscaled.mkv")), try frames(source))
        XCTAssertEqual(files("Failed"), [])
    }

    /// Failed files whose names are too long for "<name>.error.txt" (253 bytes) get their notes
    /// under shortened names (once none was written, unsaid), and two that begin alike keep a
    /// note each (both were cut to the same 245 bytes, the second failure's note over the
    /// first's). A retry takes its file's note away with the file.
    func testLongNamesThatBeginAlikeKeepANoteEach() throws {
        let stem = String(repeating: "holiday clip ", count: 18) + "on the beach, "
        let names = [stem + "1.mp4", stem + "2.mp4"]
        // Too long for a note's name, and alike in all the 245 bytes a note could keep of them.
        XCTAssertTrue(names.allSatisfy { ($0 + ".error.txt").utf8.count > 255 && $0.utf8.count <= 255 && stem.utf8.count >= 245 })
        for (i, name) in names.enumerated() {
            try Data("not a video \(i)".utf8).write(to: inbox.appendingPathComponent(name))
        }
        let run = try watchOnce(Self.encode)
        XCTAssertEqual(run.status, 1, run.stderr)
        let failed = files("Failed")
        XCTAssertEqual(failed.filter { !$0.hasSuffix(".error.txt") }, names.sorted())
        let notes = failed.filter { $0.hasSuffix(".error.txt") }
        XCTAssertEqual(notes.count, 2, "one note each: \(failed)")
        for note in notes {
            XCTAssertEqual(note.utf8.count, 255)
            XCTAssertTrue(note.hasPrefix(String(stem.prefix(200))), note)
            let text = try String(contentsOf: inbox.appendingPathComponent("Failed/" + note), encoding: .utf8)
            XCTAssertFalse(text.isEmpty)
        }
        // The retry finds each note again and removes it with its file's move back.
        let retry = try upscale(["queue", "retry", inbox.path, names[1]])
        XCTAssertEqual(retry.status, 0, retry.stderr)
        XCTAssertEqual(files("Failed").filter { $0.hasSuffix(".error.txt") }.count, 1, "\(files("Failed"))")
        XCTAssertTrue(files("").contains(names[1]))
    }

    /// `queue retry DIR NAME` with a bare name that two sub-folders' failed jobs share queued
    /// both again; it is refused, naming them, and their paths inside the folder pick one. A
    /// bare name of a file at the top of the folder means that one.
    func testRetryOfANameSeveralSubfoldersShareIsRefused() throws {
        for name in ["trip/bad.mov", "home/bad.mov", "bad.mov"] {
            try FileManager.default.createDirectory(at: inbox.appendingPathComponent(name).deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data("not a video".utf8).write(to: inbox.appendingPathComponent(name))
        }
        XCTAssertEqual(try watchOnce(Self.encode + ["--recursive"]).status, 1, "all three failed")
        XCTAssertEqual(try listing().jobs.filter { $0.state == "failed" }.map(\.source).sorted(), ["bad.mov", "home/bad.mov", "trip/bad.mov"])
        // (Its output, on standard output, read as standard error.)
        let top = try DamageRun.run("/bin/sh", ["-c", "exec \"$0\" \"$@\" 1>&2", CLITests.binary.path, "queue", "retry", inbox.path, "bad.mov"], timeout: 60)
        XCTAssertEqual(top.status, 0, top.stderr)
        XCTAssertEqual(top.stderr, "queued again: bad.mov\n")
        XCTAssertEqual(try listing().jobs.filter { $0.state == "failed" }.map(\.source).sorted(), ["home/bad.mov", "trip/bad.mov"])
        // With the top one queued, the bare name is the sub-folders' failed jobs'.
        let shared = try upscale(["queue", "retry", inbox.path, "bad.mov"])
        XCTAssertEqual(shared.status, 1, shared.stderr)
        XCTAssertEqual(shared.stderr, "error: 'bad.mov' names 2 jobs, in different folders ('home/bad.mov', 'trip/bad.mov'); give the file's path inside the folder, as 'upscale queue retry DIR home/bad.mov'\n")
        XCTAssertEqual(try listing().jobs.filter { $0.state == "failed" }.count, 2, "neither queued again")
        XCTAssertEqual(files("Failed/trip"), ["bad.mov", "bad.mov.error.txt"])
        let one = try upscale(["queue", "retry", inbox.path, "trip/bad.mov"])
        XCTAssertEqual(one.status, 0, one.stderr)
        XCTAssertEqual(try listing().jobs.filter { $0.state == "queued" }.map(\.source).sorted(), ["bad.mov", "trip/bad.mov"])
        XCTAssertEqual(try Data(contentsOf: inbox.appendingPathComponent("trip/bad.mov")), Data("not a video".utf8))
        XCTAssertEqual(files("Failed/home"), ["bad.mov", "bad.mov.error.txt"])
    }

    /// Two files whose names differ only in Unicode normalisation ("café" composed and
    /// decomposed) were one entry: one job, said to be "replaced" while it ran, two outputs of
    /// one file and the other left. Both are left, said once, until one is renamed.
    func testNamesDifferingOnlyInNormalisationAreLeftUntilOneIsRenamed() throws {
        let composed = "caf\u{E9}.mp4", decomposed = "cafe\u{301}.mp4"
        // The same clip in two layouts, to tell them apart.
        let first = try Data(contentsOf: Self.clip), second = try Data(contentsOf: CLITests.fixtures.appendingPathComponent("street-2s-faststart.mp4"))
        XCTAssertNotEqual(first, second)
        for (name, data) in [(composed, first), (decomposed, second)] {
            XCTAssertTrue(FileManager.default.createFile(atPath: inbox.path + "/" + name, contents: data))
        }
        try drop(Self.clip, as: "plain.mp4")
        func names(_ sub: String) -> [[UInt8]] { files(sub).map { Array($0.utf8) }.sorted { $0.lexicographicallyPrecedes($1) } }
        XCTAssertEqual(names("").filter { $0.first != 0x2E }.count, 3)
        let run = try watchOnceLogged(Self.encode)
        XCTAssertEqual(run.status, 0, run.stderr)
        let said = run.stderr.components(separatedBy: "\n").filter { $0.contains("another file in the folder has the same name") }
        XCTAssertEqual(said.count, 1, run.stderr)
        XCTAssertTrue(said.first?.hasSuffix("(NFC and NFD); rename one of them to have both upscaled") == true, run.stderr)
        XCTAssertEqual(files("Upscaled"), ["plain Upscaled.mp4"])
        XCTAssertEqual(try listing().jobs.map(\.source), ["plain.mp4"])
        for (name, data) in [(composed, first), (decomposed, second)] {
            XCTAssertEqual(FileManager.default.contents(atPath: inbox.path + "/" + name), data, "\(Array(name.utf8)) untouched")
        }
        XCTAssertEqual(rename(inbox.path + "/" + decomposed, inbox.path + "/cafe2.mp4"), 0)
        let renamed = try watchOnce(Self.encode)
        XCTAssertEqual(renamed.status, 0, renamed.stderr)
        XCTAssertEqual(names("Upscaled"), [Array("caf\u{E9} Upscaled.mp4".utf8), Array("cafe2 Upscaled.mp4".utf8), Array("plain Upscaled.mp4".utf8)].sorted { $0.lexicographicallyPrecedes($1) })
        XCTAssertEqual(FileManager.default.contents(atPath: inbox.path + "/Originals/" + composed), first)
        XCTAssertEqual(FileManager.default.contents(atPath: inbox.path + "/Originals/cafe2.mp4"), second)
    }

    func testFileStillOpenForWritingIsNotTakenUntilClosed() throws {
        let data = try Data(contentsOf: Self.clip)
        let path = inbox.appendingPathComponent("copying.mp4").path
        let handle = try XCTUnwrap(FileHandle(forWritingAtPath: { FileManager.default.createFile(atPath: path, contents: nil); return path }()))
        try handle.write(contentsOf: data.prefix(data.count / 2))
        // Watched through a symbolic link (~/Inbox on a data disk): the kernel names the open
        // file by its real path, which was never matched, and the half copy was taken.
        let link = inbox.deletingLastPathComponent().appendingPathComponent("InboxLink")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: inbox)
        let watcher = try background(["watch", link.path, "--settle", "0.3"] + Self.encode)
        defer {
            kill(watcher.processIdentifier, SIGTERM)
            watcher.waitUntilExit()
        }
        // Paused longer than the settle time, but still open for writing: not taken.
        sleep(3)
        XCTAssertEqual(try listing().jobs.count, 0)
        try handle.write(contentsOf: data.suffix(from: data.count / 2))
        try handle.close()
        try waitFor("the finished copy to be upscaled") { try listing().jobs.first?.state == "done" }
        XCTAssertEqual(files("Upscaled"), ["copying Upscaled.mp4"])
        XCTAssertEqual(try Data(contentsOf: inbox.appendingPathComponent("Originals/copying.mp4")), data)
    }

    func testQueuePauseCancelAndRetry() throws {
        try drop(Self.clip, as: "keep.mp4")
        try drop(Self.clip, as: "skip.mp4")
        try Data("not a video".utf8).write(to: inbox.appendingPathComponent("bad.mov"))
        XCTAssertEqual(try watchOnce(Self.encode).status, 1, "bad.mov failed")
        XCTAssertEqual(files("Upscaled").count, 2)
        // Paused: a once-run ends with a new file still queued.
        XCTAssertEqual(try upscale(["queue", "pause", inbox.path]).status, 0)
        XCTAssertTrue(try listing().paused)
        try drop(Self.clip, as: "later.mp4")
        let paused = try watchOnceLogged([])
        XCTAssertEqual(paused.status, 0)
        // It says so (it gave no sign: files were queued and nothing started).
        XCTAssertTrue(paused.stderr.contains("the queue is paused: no job starts until 'upscale queue resume \(inbox.path)'"), paused.stderr)
        XCTAssertEqual(try listing().jobs.first { $0.source == "later.mp4" }?.state, "queued")
        // A negative priority (after the others) is a number, not an unknown option.
        let lower = try upscale(["queue", "priority", inbox.path, "later.mp4", "-3"])
        XCTAssertEqual(lower.status, 0, lower.stderr)
        let huge = try upscale(["queue", "priority", inbox.path, "later.mp4", "99999999999"])
        XCTAssertEqual(huge.status, 2, huge.stderr)
        XCTAssertTrue(huge.stderr.contains("a whole number from -1000000 to 1000000"), huge.stderr)
        // No file named: refused, nothing cancelled (every job of the folder was, the running one killed).
        let all = try upscale(["queue", "cancel", inbox.path])
        XCTAssertEqual(all.status, 2, all.stderr)
        XCTAssertEqual(all.stderr, "error: name the files to cancel: 'upscale queue cancel \(inbox.path) FILE…' (their names are in 'upscale queue list \(inbox.path)')\n")
        XCTAssertEqual(try listing().jobs.first { $0.source == "later.mp4" }?.state, "queued")
        XCTAssertEqual(try upscale(["queue", "cancel", inbox.path, "later.mp4"]).status, 0)
        XCTAssertEqual(try upscale(["queue", "resume", inbox.path]).status, 0)
        XCTAssertEqual(try watchOnce().status, 0)
        XCTAssertEqual(try listing().jobs.first { $0.source == "later.mp4" }?.state, "cancelled")
        XCTAssertTrue(files("").contains("later.mp4"), "a cancelled file stays where it is")
        // The bad file failed into Failed/; retry brings it back and it fails again, cleanly.
        XCTAssertEqual(files("Failed"), ["bad.mov", "bad.mov.error.txt"])
        // Names that match no job: one line on stderr, exit 1, nothing changed.
        let noRetry = try upscale(["queue", "retry", inbox.path, "nope.mov"])
        XCTAssertEqual(noRetry.status, 1, noRetry.stderr)
        XCTAssertEqual(noRetry.stderr, "error: no failed or cancelled job for 'nope.mov' in \(inbox.path)\n")
        let noCancel = try upscale(["queue", "cancel", inbox.path, "nope.mov"])
        XCTAssertEqual(noCancel.status, 1, noCancel.stderr)
        XCTAssertEqual(noCancel.stderr, "error: no queued or running job for 'nope.mov' in \(inbox.path)\n")
        XCTAssertEqual(files("Failed"), ["bad.mov", "bad.mov.error.txt"])
        // Named by its full path in the folder, where it no longer is (it is in Failed/).
        let retried = try upscale(["queue", "retry", inbox.path, inbox.appendingPathComponent("bad.mov").path])
        XCTAssertEqual(retried.status, 0, retried.stderr)
        XCTAssertEqual(files("Failed"), [])
        XCTAssertTrue(files("").contains("bad.mov"))
        XCTAssertEqual(try listing().jobs.first { $0.source == "bad.mov" }?.state, "queued")
        XCTAssertEqual(try watchOnce().status, 1)
        XCTAssertEqual(files("Failed"), ["bad.mov", "bad.mov.error.txt"])
        // No names: the failed job again, not the cancelled one (it revived every cancelled job).
        XCTAssertEqual(try upscale(["queue", "retry", inbox.path]).status, 0)
        XCTAssertEqual(try listing().jobs.first { $0.source == "bad.mov" }?.state, "queued")
        XCTAssertEqual(try listing().jobs.first { $0.source == "later.mp4" }?.state, "cancelled")
        // Named, a cancelled job is queued again.
        XCTAssertEqual(try upscale(["queue", "retry", inbox.path, "later.mp4"]).status, 0)
        XCTAssertEqual(try listing().jobs.first { $0.source == "later.mp4" }?.state, "queued")
    }

    /// Two MPEG-TS recordings joined with `cat` (the second's clock 5000 s on) come out whole
    /// and pass the check after the job: it compared the output (4 s) with the length the
    /// file's header gives (first time to last: 5002 s) and put the source in Failed/.
    func testAJoinedRecordingWhoseClockJumpsPassesTheCheck() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("upscale-tsjoin-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        var joined = Data()
        for (name, delay) in [("a.ts", 1.4), ("b.ts", 5000.0)] {
            let part = dir.appendingPathComponent(name)
            try Remuxer.copy(Self.clip.path, to: part.path, delay: delay)
            joined += try Data(contentsOf: part)
        }
        let made = dir.appendingPathComponent("joined.ts")
        try joined.write(to: made)
        try drop(made, as: "joined.ts")
        let result = try watchOnceLogged(Self.encode)
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(files("Failed"), [], result.stderr)
        XCTAssertEqual(files("Originals"), ["joined.ts"])
        XCTAssertEqual(files("Upscaled"), ["joined Upscaled.mov"])
    }

    /// Files of one name stem running at once (clip.ts and clip.webm both become "clip
    /// Upscaled.mov") with --jobs 2: the one that finishes second gets the next free name.
    /// It failed at the end of its whole encode ("appeared while upscaling") and was retried;
    /// with four such files one ended in Failed/.
    func testJobsOfOneNameRunningTogetherEachKeepTheirOutput() throws {
        let made = FileManager.default.temporaryDirectory.appendingPathComponent("upscale-ts-\(UUID().uuidString).ts")
        defer { try? FileManager.default.removeItem(at: made) }
        try Remuxer.copy(Self.clip.path, to: made.path)
        try drop(made, as: "clip.ts")
        try drop(CLITests.fixtures.appendingPathComponent("street-vp9-opus.webm"), as: "clip.webm")
        let result = try watchOnceLogged(Self.encode + ["--jobs", "2"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertFalse(result.stderr.contains("retry"), result.stderr)
        XCTAssertEqual(files("Upscaled"), ["clip Upscaled 2.mov", "clip Upscaled.mov"])
        XCTAssertEqual(files("Originals"), ["clip.ts", "clip.webm"])
        XCTAssertEqual(files("Failed"), [])
        // Each source's own result: the street clip is 768x576 and the VP9 one 320x240, both 128 wide.
        let heights = try files("Upscaled").map { try XCTUnwrap(MediaProbe.info(inbox.appendingPathComponent("Upscaled/" + $0).path).video).height }
        XCTAssertEqual(Set(heights), [96])
        let jobs = try listing().jobs
        XCTAssertEqual(Set(jobs.map(\.state)), ["done"])
        XCTAssertEqual(Set(jobs.compactMap(\.output)), ["Upscaled/clip Upscaled.mov", "Upscaled/clip Upscaled 2.mov"])
    }

    /// A file replaced by a rename while its job runs (saved under another name, then renamed
    /// over it, as rsync and editors do): the job reads the version queued to the end, so its
    /// output is of that version; the new version is taken again once it settles and gets its
    /// own output. Before, the new version was moved to Originals/ as done, never upscaled.
    func testAFileReplacedByARenameWhileUpscaledIsTakenAgain() throws {
        let first = CLITests.fixtures.appendingPathComponent("chunk-h264-bframes.mp4")
        try drop(first, as: "clip.mp4")
        let watcher = try background(["watch", inbox.path, "--once", "--settle", "0.3", "--width", "512", "--preset", "medium", "--chunk-seconds", "0"])
        // Its output is being written: the input is open (what a rename puts in its place is another file).
        try waitFor("the job writes its output") { files("Upscaled").contains { $0.hasSuffix(".partial") } }
        try FileManager.default.copyItem(at: Self.clip, to: inbox.appendingPathComponent(".clip.mp4.new"))
        XCTAssertEqual(rename(inbox.appendingPathComponent(".clip.mp4.new").path, inbox.appendingPathComponent("clip.mp4").path), 0)
        let deadline = Date().addingTimeInterval(170)
        while watcher.isRunning && Date() < deadline { usleep(100_000) }
        XCTAssertFalse(watcher.isRunning)
        if watcher.isRunning { watcher.terminate() }
        watcher.waitUntilExit()
        XCTAssertEqual(watcher.terminationStatus, 0)
        XCTAssertEqual(files("Upscaled"), ["clip Upscaled 2.mp4", "clip Upscaled.mp4"])
        // The version queued first (60 pictures), then the one put in its place (20).
        XCTAssertEqual(try frames(inbox.appendingPathComponent("Upscaled/clip Upscaled.mp4")), 60)
        XCTAssertEqual(try frames(inbox.appendingPathComponent("Upscaled/clip Upscaled 2.mp4")), 20)
        XCTAssertEqual(files("Originals"), ["clip.mp4"])
        XCTAssertEqual(try Data(contentsOf: inbox.appendingPathComponent("Originals/clip.mp4")), try Data(contentsOf: Self.clip))
        XCTAssertEqual(files("Failed"), [])
    }

    /// The job logs' folder removed (a clean-up of hidden folders) is made again and the files
    /// are upscaled. Every job failed ("cannot start …/upscale: No such file or directory",
    /// naming a binary that was there), three attempts each, into Failed/.
    func testARemovedLogFolderIsMadeAgain() throws {
        try drop(Self.clip, as: "a.mp4")
        XCTAssertEqual(try watchOnce(Self.encode).status, 0)
        try FileManager.default.removeItem(at: inbox.appendingPathComponent(".upscale/logs"))
        try drop(Self.clip, as: "b.mp4")
        let result = try watchOnce(Self.encode)
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(files("Upscaled"), ["a Upscaled.mp4", "b Upscaled.mp4"])
        XCTAssertEqual(files("Failed"), [])
        XCTAssertFalse(files(".upscale/logs").isEmpty)
    }

    /// A job's advice is a watch folder's: `watch` has no --output or --overwrite. A name too
    /// long for its output said "give a shorter one with --output".
    func testAFailedJobsAdviceFitsTheWatchFolder() throws {
        let name = String(repeating: "x", count: 220) + ".mp4"
        try drop(Self.clip, as: name)
        XCTAssertEqual(try watchOnce(Self.encode).status, 1)
        XCTAssertEqual(files("Failed"), [name, name + ".error.txt"])
        let note = try String(contentsOf: inbox.appendingPathComponent("Failed/" + name + ".error.txt"), encoding: .utf8)
        XCTAssertTrue(note.contains("is too long"), note)
        XCTAssertTrue(note.contains("rename the file to something shorter"), note)
        XCTAssertFalse(note.contains("--output"), note)
    }

    /// The watcher runs as a service account; `queue list` by another user, who may read the
    /// folder but not write it, failed ("attempt to write a readonly database") whenever no
    /// watcher was running. Changing the queue as that user says whose it is.
    func testAnotherUserListsTheQueue() throws {
        try drop(Self.clip, as: "a.mp4")
        XCTAssertEqual(try watchOnce(Self.encode).status, 0)
        // A copy of the binary that `nobody` may run, wherever the checkout is.
        let binary = inbox.deletingLastPathComponent().appendingPathComponent("upscale")
        try FileManager.default.copyItem(at: CLITests.binary, to: binary)
        for path in [inbox.deletingLastPathComponent().path, binary.path] { chmod(path, 0o755) }
        /// Its standard output in `stderr` too.
        func asNobody(_ arguments: [String]) throws -> DamageRun {
            try DamageRun.run("/usr/sbin/runuser", ["-u", "nobody", "--", "/bin/sh", "-c", "exec \"$0\" \"$@\" 1>&2", binary.path] + arguments, timeout: 60)
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: inbox.path + "/.upscale/queue.sqlite-shm"), "no watcher, no shared memory")
        let list = try asNobody(["queue", "list", inbox.path])
        XCTAssertEqual(list.status, 0, list.stderr)
        XCTAssertTrue(list.stderr.contains("a.mp4\tdone"), list.stderr)
        let json = try asNobody(["queue", "list", "--json", inbox.path])
        XCTAssertEqual(json.status, 0, json.stderr)
        XCTAssertEqual(try JSONDecoder().decode(Listing.self, from: Data(json.stderr.utf8)).jobs.map(\.source), ["a.mp4"])
        let pause = try asNobody(["queue", "pause", inbox.path])
        XCTAssertEqual(pause.status, 1)
        XCTAssertEqual(pause.stderr, "error: cannot change the queue of '\(inbox.path)': no write access to '\(inbox.path)/.upscale/queue.sqlite'; run this as the user the watcher runs as ('root')\n")
        XCTAssertEqual(try upscale(["queue", "pause", inbox.path]).status, 0, "its owner still can")
    }

    /// A copy to another disk that a killed watcher left half made (as big as the file) is
    /// removed when a watcher starts; it stayed until a later move into the same folder.
    func testAStaleCopyIsRemovedAtStart() throws {
        let nested = inbox.appendingPathComponent("Originals/trip")
        try FileManager.default.createDirectory(at: nested, withIntermediateDirectories: true)
        let dead = "4194305" // over the largest process id: no such process
        let stale = [inbox.appendingPathComponent("Failed/.a.mp4.\(dead).copying"), nested.appendingPathComponent(".b.mp4.\(dead).copying")]
        try FileManager.default.createDirectory(at: stale[0].deletingLastPathComponent(), withIntermediateDirectories: true)
        for file in stale { try Data(count: 1000).write(to: file) }
        let alive = nested.appendingPathComponent(".c.mp4.\(getpid()).copying") // this process: being copied
        try Data(count: 1000).write(to: alive)
        XCTAssertEqual(try watchOnce().status, 0)
        for file in stale { XCTAssertFalse(FileManager.default.fileExists(atPath: file.path), file.path) }
        XCTAssertTrue(FileManager.default.fileExists(atPath: alive.path))
    }

    /// With $UPSCALE_QUEUE set (a farm's machine), a folder named is that folder's queue:
    /// 'queue pause DIR' paused the whole farm, and 'queue list DIR' listed it.
    func testAFolderNamedIsItsOwnQueueWhenAFarmQueueIsSet() throws {
        XCTAssertEqual(try watchOnce().status, 0)
        let farm = ["UPSCALE_QUEUE": "postgres://nobody@127.0.0.1:1/farm"]
        let pause = try upscale(["queue", "pause", inbox.path], environment: farm)
        XCTAssertEqual(pause.status, 0, pause.stderr)
        XCTAssertTrue(try listing().paused)
        let list = try upscale(["queue", "list", inbox.path], environment: farm)
        XCTAssertEqual(list.status, 0, list.stderr)
        XCTAssertEqual(try upscale(["queue", "resume", inbox.path], environment: farm).status, 0)
        XCTAssertFalse(try listing().paused)
        // No folder: the farm's queue (here unreachable), and an empty variable is no queue.
        let farmList = try upscale(["queue", "list"], environment: farm)
        XCTAssertEqual(farmList.status, 1)
        XCTAssertTrue(farmList.stderr.contains("127.0.0.1"), farmList.stderr)
        let empty = try upscale(["queue", "pause", inbox.path], environment: ["UPSCALE_QUEUE": ""])
        XCTAssertEqual(empty.status, 0, empty.stderr)
    }

    func testVanishedFolderChangesNothingInTheStore() throws {
        try drop(Self.clip, as: "a.mp4")
        let early = try upscale(["queue", "pause", inbox.path])
        XCTAssertEqual(early.status, 1, "no queue before the first watch")
        XCTAssertTrue(early.stderr.hasPrefix("error: '\(inbox.path)' has no queue yet"), early.stderr)
        // A folder that is not there is named so (it said to start watching it, which then failed).
        let nowhere = try upscale(["queue", "list", inbox.path + "-nowhere"])
        XCTAssertEqual(nowhere.status, 1)
        XCTAssertTrue(nowhere.stderr.contains("-nowhere' is not a folder"), nowhere.stderr)
        // A folder the watcher cannot write in (/proc/1, even for root): one line with the
        // system's reason, not Foundation's error dump ("Error Domain=NSCocoaErrorDomain Code=513 …").
        let unwritable = try upscale(["watch", "/proc/1", "--once"])
        XCTAssertEqual(unwritable.status, 2, unwritable.stderr)
        XCTAssertTrue(unwritable.stderr.hasPrefix("error: cannot create '/proc/1/.upscale' ("), unwritable.stderr)
        XCTAssertTrue(unwritable.stderr.hasSuffix("); the watcher keeps its queue in '/proc/1/.upscale': it must be able to write in '/proc/1'\n"), unwritable.stderr)
        XCTAssertEqual(unwritable.stderr.split(separator: "\n").count, 1, unwritable.stderr)
        let watcher = try background(["watch", inbox.path, "--settle", "0.3"] + Self.encode, environment: ["UPSCALE_WATCH_RETRY_SECONDS": "0.5"])
        defer {
            kill(watcher.processIdentifier, SIGTERM)
            watcher.waitUntilExit()
        }
        try waitFor("the first job") { try listing().jobs.first?.state == "done" }
        let away = inbox.deletingLastPathComponent().appendingPathComponent("Away")
        try FileManager.default.moveItem(at: inbox, to: away)
        sleep(2)
        XCTAssertFalse(FileManager.default.fileExists(atPath: inbox.path), "the watcher wrote into the vanished folder's place")
        try FileManager.default.moveItem(at: away, to: inbox)
        try drop(Self.clip, as: "b.mp4")
        try waitFor("the job after the folder came back") { try listing().jobs.filter { $0.state == "done" }.count == 2 }
        let jobs = try listing().jobs
        XCTAssertEqual(jobs.map(\.state), ["done", "done"])
        XCTAssertEqual(jobs.map(\.attempts), [1, 1])
    }
}
