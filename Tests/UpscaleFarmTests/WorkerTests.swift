import Foundation
import UpscaleDashboard
import UpscaleFarm
import UpscaleMedia
import UpscaleQueue
import UpscaleTestSupport
import XCTest

/// Real `upscale submit` and `upscale worker` processes on one queue.
final class WorkerTests: XCTestCase {
    static var binary: URL {
        var dir = Bundle.main.bundleURL
        if dir.pathExtension == "xctest" { dir = dir.deletingLastPathComponent() }
        return dir.appendingPathComponent("upscale")
    }

    static let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/chunk-h264-bframes.mp4")
    static let exact = ["--codec", "ffv1", "--no-refine", "--threads", "1"]

    private var cluster: PostgresCluster!

    override func setUpWithError() throws {
        cluster = try PostgresCluster()
    }

    override func tearDown() {
        cluster?.stop()
        cluster = nil
    }

    private func workspace() throws -> URL {
        let dir = URL(fileURLWithPath: "/tmp").appendingPathComponent("upscale-farm-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir.appendingPathComponent("out"), withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: Self.fixture, to: dir.appendingPathComponent("clip.mp4"))
        addTeardownBlock { try? FileManager.default.removeItem(at: dir) }
        return dir
    }

    /// `hook`: a test hook for the process (`UPSCALE_TEST_HOOK`).
    private func start(_ arguments: [String], lease: Double = 2, idlePoll: Double? = nil, hook: String? = nil) throws -> (Process, Pipe) {
        let p = Process()
        p.executableURL = Self.binary
        p.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        env["UPSCALE_LEASE_SECONDS"] = String(lease)
        env["UPSCALE_QUEUE"] = cluster.url
        if let idlePoll { env["UPSCALE_IDLE_POLL_SECONDS"] = String(idlePoll) }
        if let hook { env["UPSCALE_TEST_HOOK"] = hook }
        p.environment = env
        let out = Pipe()
        p.standardOutput = out
        p.standardError = out
        try p.run()
        return (p, out)
    }

    @discardableResult
    private func run(_ arguments: [String]) throws -> String {
        let (p, out) = try start(arguments)
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self)
        XCTAssertEqual(p.terminationStatus, 0, "\(arguments): \(text)")
        return text
    }

    private func finish(_ p: (Process, Pipe)) -> String {
        let data = p.1.fileHandleForReading.readDataToEndOfFile()
        p.0.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }

    /// The one-pass reference: the same settings, never chunked.
    private func reference(_ dir: URL) throws -> URL {
        let out = dir.appendingPathComponent("single.mkv")
        try run([dir.appendingPathComponent("clip.mp4").path, "-o", out.path, "--chunk-seconds", "0"] + Self.exact)
        return out
    }

    private func assertSamePictures(_ a: URL, _ b: URL, file: StaticString = #filePath, line: UInt = #line) throws {
        let x = try VideoFrameReader(path: a.path), y = try VideoFrameReader(path: b.path)
        var n = 0
        while let p = try x.next() {
            let q = try XCTUnwrap(try y.next(), file: file, line: line)
            XCTAssertEqual(p.pts, q.pts, file: file, line: line)
            for i in 0..<3 {
                XCTAssertEqual(memcmp(p.frame.planes[i].base, q.frame.planes[i].base, p.frame.planes[i].stride * p.frame.planes[i].height), 0,
                               "frame \(n) plane \(i)", file: file, line: line)
            }
            n += 1
        }
        XCTAssertNil(try y.next(), file: file, line: line)
        XCTAssertEqual(n, 60, file: file, line: line)
    }

    private func queue() throws -> PostgresQueue { try PostgresQueue(address: try QueueAddress(cluster.url)) }

    /// Submits the test clip in chunks of `seconds` into `dir/out`.
    private func submit(_ dir: URL, seconds: String = "1") throws {
        try run(["submit", dir.appendingPathComponent("clip.mp4").path, "-o", dir.appendingPathComponent("out").path,
                 "--chunk-seconds", seconds] + Self.exact)
    }

    /// Polls `condition` every 20 ms for up to a minute.
    private func waitUntil(_ what: String, _ condition: () throws -> Bool) throws {
        let deadline = Date().addingTimeInterval(60)
        while try !condition() {
            guard Date() < deadline else { throw NSError(domain: "WorkerTests", code: 1, userInfo: [NSLocalizedDescriptionKey: "timed out: \(what)"]) }
            usleep(20_000)
        }
    }

    /// Two workers; one is killed with SIGKILL while it holds a chunk. The other rescues the
    /// chunk when its lease runs out and finishes the job; the output is the one-pass output.
    func testKilledWorkersChunkIsRedoneByAnotherAndTheOutputIsExact() throws {
        let dir = try workspace()
        let single = try reference(dir)
        try submit(dir)
        let q = try queue()
        let victim = try start(["worker", "--once", "--name", "victim"])
        try waitUntil("the victim holds a chunk") { try q.list().first?.machines.contains("victim") == true }
        kill(victim.0.processIdentifier, SIGKILL)
        victim.0.waitUntilExit()
        let survivor = finish(try start(["worker", "--once", "--name", "survivor"]))
        XCTAssertTrue(survivor.contains(" rescued") && !survivor.contains(" 0 rescued"), survivor)
        let job = try XCTUnwrap(try q.list().first)
        XCTAssertEqual(job.state, "done", survivor)
        XCTAssertEqual(job.chunksDone, job.chunks)
        try assertSamePictures(single, URL(fileURLWithPath: job.output))
        XCTAssertFalse(FileManager.default.fileExists(atPath: ChunkedJob.workFolder(for: job.output)), "work folder removed")
        print("survivor: \(survivor.split(separator: "\n").last ?? "")")
    }

    /// A worker killed after its join put the output in place, before that was recorded: the
    /// rescued join finds the output with the very packets it makes, and records the job done.
    /// It refused the output as "appeared while upscaling" three times, and the job failed for
    /// good. A stranger's file there is still left untouched.
    func testAJoinWhoseWorkerDiedAfterWritingIsRecordedDone() throws {
        let dir = try workspace()
        try submit(dir)
        let q = try queue()
        let victim = try start(["worker", "--once", "--name", "victim"], hook: "worker-dies-after-join")
        _ = finish(victim)
        XCTAssertEqual(victim.0.terminationReason, .uncaughtSignal)
        var job = try XCTUnwrap(try q.list().first)
        XCTAssertNotEqual(job.state, "done")
        XCTAssertTrue(FileManager.default.fileExists(atPath: job.output))
        let rescuer = finish(try start(["worker", "--once", "--name", "rescuer"]))
        job = try XCTUnwrap(try q.list().first)
        XCTAssertEqual(job.state, "done", rescuer)
        XCTAssertTrue(rescuer.contains("is the output of this job's join"), rescuer)
        XCTAssertEqual(try MediaProbe.packets(job.output, stream: 0).count, 60)
        XCTAssertFalse(FileManager.default.fileExists(atPath: ChunkedJob.workFolder(for: job.output)), "work folder removed")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir.appendingPathComponent("out").path), ["clip Upscaled.mkv"])

        // Another file in its place: not this job's, left untouched, and the join fails.
        let other = dir.appendingPathComponent("other")
        try FileManager.default.createDirectory(at: other, withIntermediateDirectories: true)
        try run(["submit", dir.appendingPathComponent("clip.mp4").path, "-o", other.path, "--chunk-seconds", "1"] + Self.exact)
        let stranger = other.appendingPathComponent("clip Upscaled.mkv")
        let second = try start(["worker", "--once", "--name", "victim2"], hook: "worker-dies-after-join")
        _ = finish(second)
        try FileManager.default.removeItem(at: stranger)
        try FileManager.default.copyItem(at: Self.fixture, to: stranger)
        let before = try Data(contentsOf: stranger)
        _ = finish(try start(["worker", "--once", "--name", "rescuer2"]))
        let failed = try XCTUnwrap(try q.list().first { $0.output == stranger.path })
        XCTAssertEqual(failed.state, "failed")
        XCTAssertEqual(try Data(contentsOf: stranger), before)
        // At once, with what to do (it failed three times, each after a trial join, saying
        // "use --overwrite", which a queued job cannot take); the retry after it joins.
        XCTAssertEqual(failed.errorSummary, "the join failed: '\(stranger.path)' appeared while upscaling and is not this job's output; left it untouched: remove or rename it, then run 'upscale queue retry \(failed.id)' (the chunks are kept)")
        try FileManager.default.removeItem(at: stranger)
        try run(["queue", "retry", String(failed.id), "--queue", cluster.url])
        _ = finish(try start(["worker", "--once", "--name", "rescuer3"]))
        XCTAssertEqual(try q.job(id: failed.id)?.state, "done")
        XCTAssertEqual(try MediaProbe.packets(stranger.path, stream: 0).count, 60)
    }

    /// A worker frozen (`kill -STOP`) past its lease: its chunk goes to another worker; when it
    /// is thawed (`kill -CONT`) it finds its token gone and throws its chunk away. The output is exact.
    func testWorkerStoppedPastItsLeaseDiscardsItsChunk() throws {
        let dir = try workspace()
        let single = try reference(dir)
        try submit(dir)
        let q = try queue()
        let sleeper = try start(["worker", "--once", "--name", "sleeper"])
        try waitUntil("the sleeper holds a chunk") { try q.list().first?.machines.contains("sleeper") == true }
        kill(sleeper.0.processIdentifier, SIGSTOP)
        let other = try start(["worker", "--once", "--name", "other"])
        // The other worker takes the sleeper's chunk over once its 2 s lease has run out.
        try waitUntil("the sleeper's chunk is taken over") { try q.list().first?.machines.contains("sleeper") != true }
        kill(sleeper.0.processIdentifier, SIGCONT)
        let sleeperText = finish(sleeper), otherText = finish(other)
        XCTAssertTrue(sleeperText.contains("1 discarded"), sleeperText)
        XCTAssertTrue(otherText.contains("1 rescued"), otherText)
        let job = try XCTUnwrap(try q.list().first)
        XCTAssertEqual(job.state, "done")
        try assertSamePictures(single, URL(fileURLWithPath: job.output))
    }

    /// PostgreSQL restarted (immediate mode) while a worker encodes: the worker reconnects and
    /// the job completes with the exact output.
    func testWorkerSurvivesAServerRestart() throws {
        let dir = try workspace()
        let single = try reference(dir)
        try submit(dir)
        let q = try queue()
        let worker = try start(["worker", "--once"], lease: 30)
        try waitUntil("a chunk is done") { try (q.list().first?.chunksDone ?? 0) >= 1 }
        try cluster.restartImmediately()
        let text = finish(worker)
        XCTAssertEqual(worker.0.terminationStatus, 0, text)
        let job = try XCTUnwrap(try q.list().first)
        XCTAssertEqual(job.state, "done", text)
        try assertSamePictures(single, URL(fileURLWithPath: job.output))
    }

    /// Paths as the submitting machine saw them; the worker's machine mounts them elsewhere.
    func testMapRewritesPathsForTheWorkersMachine() throws {
        let dir = try workspace()
        let seen = URL(fileURLWithPath: "/tmp/upscale-nas-\(UUID().uuidString)")
        try FileManager.default.createSymbolicLink(at: seen, withDestinationURL: dir)
        try run(["submit", seen.appendingPathComponent("clip.mp4").path, "-o", seen.appendingPathComponent("out").path,
                 "--chunk-seconds", "2"] + Self.exact)
        try FileManager.default.removeItem(at: seen) // this "machine" has no such path
        let text = try run(["worker", "--once", "--map", "\(seen.path)=\(dir.path)"])
        let job = try XCTUnwrap(try queue().list().first)
        XCTAssertEqual(job.state, "done", text)
        XCTAssertEqual(job.output, seen.appendingPathComponent("out/clip Upscaled.mkv").path)
        XCTAssertEqual(try MediaProbe.packets(dir.appendingPathComponent("out/clip Upscaled.mkv").path, stream: 0).count, 60)
        let listing = try run(["queue", "list"])
        XCTAssertTrue(listing.contains("\tdone\t\(job.chunks)/0/0\t100%"), listing)
        // The worker has stopped: it is no longer listed (it stayed, stale, on its last task).
        XCTAssertFalse(listing.contains("working on"), listing)
    }

    /// Half a copy whose structure gives its length (a fast-start .mp4: FFmpeg reads it to where
    /// it stops) is not submitted while the copy may go on; it is submitted once it is whole.
    func testAWatchFolderWaitsForAHalfCopyBeforeSubmittingIt() throws {
        let dir = try workspace()
        let inbox = dir.appendingPathComponent("Inbox")
        try FileManager.default.createDirectory(at: inbox, withIntermediateDirectories: true)
        let watcher = try start(["watch", inbox.path, "--settle", "0.3", "--chunk-seconds", "1"] + Self.exact)
        let whole = try Data(contentsOf: Self.fixture.deletingLastPathComponent().appendingPathComponent("street-2s-faststart.mp4"))
        let half = inbox.appendingPathComponent("half.mp4")
        try whole.prefix(whole.count / 2).write(to: half)
        // Settled (0.3 s) and looked at every second: not submitted.
        Thread.sleep(forTimeInterval: 3)
        XCTAssertEqual(try queue().list().count, 0)
        let handle = try FileHandle(forWritingTo: half)
        try handle.seekToEnd()
        try handle.write(contentsOf: whole.suffix(from: whole.count / 2))
        try handle.close()
        try waitUntil("the whole copy to be submitted") { try queue().list().count == 1 }
        kill(watcher.0.processIdentifier, SIGTERM)
        let text = finish(watcher)
        XCTAssertTrue(text.contains("waiting for 'half.mp4': cut short, \(whole.count / 2) bytes of at least \(whole.count) bytes"), text)
        XCTAssertTrue(text.contains("submitted 'half.mp4'"), text)
        let job = try XCTUnwrap(try queue().list().first)
        XCTAssertEqual(job.input, half.path)
        XCTAssertEqual(try Data(contentsOf: half), whole)
    }

    /// `--unfinished-minutes` holds for the shared queue too (it waited 10 minutes whatever
    /// the option said): a cut-short copy that stays cut is submitted as it is once it has not
    /// changed for that long, not before.
    func testAWatchFolderSubmitsACutCopyAsItIsAfterItsUnfinishedWait() throws {
        let dir = try workspace()
        let inbox = dir.appendingPathComponent("Inbox")
        try FileManager.default.createDirectory(at: inbox, withIntermediateDirectories: true)
        let watcher = try start(["watch", inbox.path, "--settle", "0.3", "--chunk-seconds", "1", "--unfinished-minutes", "0.1"] + Self.exact)
        let whole = try Data(contentsOf: Self.fixture.deletingLastPathComponent().appendingPathComponent("street-2s-faststart.mp4"))
        let half = inbox.appendingPathComponent("half.mp4")
        try whole.prefix(whole.count / 2).write(to: half)
        let written = try XCTUnwrap(try FileManager.default.attributesOfItem(atPath: half.path)[.modificationDate] as? Date)
        try waitUntil("the cut copy to be submitted as it is") { try queue().list().count == 1 }
        let submittedAfter = Date().timeIntervalSince(written)
        kill(watcher.0.processIdentifier, SIGTERM)
        let text = finish(watcher)
        // 6 s after its last change, looked at every second.
        XCTAssertGreaterThanOrEqual(submittedAfter, 6, text)
        XCTAssertLessThan(submittedAfter, 60, text)
        XCTAssertTrue(text.contains("waiting for 'half.mp4': cut short, \(whole.count / 2) bytes of at least \(whole.count) bytes"), text)
        XCTAssertTrue(text.contains("submitted when it is finished, or as it is 6 s after its last change"), text)
        XCTAssertTrue(text.contains("submitted 'half.mp4'"), text)
        XCTAssertEqual(try queue().list().first?.input, half.path)
        XCTAssertEqual(try Data(contentsOf: half), whole.prefix(whole.count / 2))
    }

    /// Two workers and a watch folder on one queue: files dropped into the folder become jobs,
    /// the workers share their chunks, outputs land in Upscaled/ and originals move to
    /// Originals/ once their job is done; a file that is not a video stays where it is.
    func testTwoWorkersAndAWatchFolderShareOneQueue() throws {
        let dir = try workspace()
        let inbox = dir.appendingPathComponent("Inbox")
        try FileManager.default.createDirectory(at: inbox, withIntermediateDirectories: true)
        let workers = try ["left", "right"].map { try start(["worker", "--name", $0]) }
        try FileManager.default.copyItem(at: dir.appendingPathComponent("clip.mp4"), to: inbox.appendingPathComponent("one.mp4"))
        try FileManager.default.copyItem(at: dir.appendingPathComponent("clip.mp4"), to: inbox.appendingPathComponent("two.mp4"))
        try "not a video".write(to: inbox.appendingPathComponent("notes.txt"), atomically: true, encoding: .utf8)
        // A still stays where it is, said so (it became a one-frame HEVC movie).
        try FileManager.default.copyItem(at: Self.fixture.deletingLastPathComponent().appendingPathComponent("baboon.jpg"),
                                         to: inbox.appendingPathComponent("photo.jpg"))
        let watch = try run(["watch", inbox.path, "--once", "--settle", "0.5", "--chunk-seconds", "1"] + Self.exact)
        for w in workers { kill(w.0.processIdentifier, SIGTERM) }
        let texts = workers.map(finish)
        XCTAssertTrue(watch.contains("submitted 'one.mp4'") && watch.contains("submitted 'two.mp4'"), watch)
        XCTAssertTrue(watch.contains("skipped 'notes.txt'"), watch)
        XCTAssertTrue(watch.contains("skipped 'photo.jpg': a still image: the shared queue takes videos"), watch)
        XCTAssertTrue(FileManager.default.fileExists(atPath: inbox.appendingPathComponent("photo.jpg").path))
        let jobs = try queue().list()
        XCTAssertEqual(jobs.map(\.state), ["done", "done"], watch)
        let outputs = try FileManager.default.contentsOfDirectory(atPath: inbox.appendingPathComponent("Upscaled").path).sorted()
        XCTAssertEqual(outputs, ["one Upscaled.mkv", "two Upscaled.mkv"])
        for name in outputs {
            XCTAssertEqual(try MediaProbe.packets(inbox.appendingPathComponent("Upscaled/\(name)").path, stream: 0).count, 60)
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: inbox.appendingPathComponent("Originals").path).sorted(),
                       ["one.mp4", "two.mp4"])
        XCTAssertTrue(FileManager.default.fileExists(atPath: inbox.appendingPathComponent("notes.txt").path))
        // Every chunk and join ran exactly once across the two workers (each prints its counts).
        let counts = texts.map { text -> (Int, Int) in
            let line = text.split(separator: "\n").last { $0.contains(" chunks, ") } ?? ""
            let numbers = line.split(separator: ":").last.map { $0.split(whereSeparator: { !$0.isNumber }).compactMap { Int($0) } } ?? []
            return (numbers.first ?? -1, numbers.count > 1 ? numbers[1] : -1)
        }
        XCTAssertEqual(counts.map(\.0).reduce(0, +), jobs.map(\.chunks).reduce(0, +), "\(texts)")
        XCTAssertEqual(counts.map(\.1).reduce(0, +), 2, "\(texts)")
        print("chunks, joins per worker: \(counts)")
        print("watch: \(watch.split(separator: "\n").count) lines")
    }

    /// A shared watch folder (`Inbox`) holding the clip as one.mp4, its `watch --once` started
    /// (and its arguments, to start it again) once the job is submitted, and the queue.
    private func watchedInbox() throws -> (URL, [String], (Process, Pipe), PostgresQueue) {
        let dir = try workspace()
        let inbox = dir.appendingPathComponent("Inbox")
        try FileManager.default.createDirectory(at: inbox, withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: dir.appendingPathComponent("clip.mp4"), to: inbox.appendingPathComponent("one.mp4"))
        let watchArguments = ["watch", inbox.path, "--once", "--settle", "0.3", "--chunk-seconds", "1"] + Self.exact
        let watch = try start(watchArguments)
        let q = try queue()
        try waitUntil("the job is submitted") { try q.list().count == 1 }
        return (inbox, watchArguments, watch, q)
    }

    /// `watchedInbox`'s job failed for good (as a worker whose chunk met an error would), its
    /// watcher ended and its original in Failed/.
    private func failedWatchInboxJob() throws -> (URL, [String], PostgresQueue, Int64) {
        let (inbox, watchArguments, watch, q) = try watchedInbox()
        let task = try XCTUnwrap(try q.claim(owner: "test", lease: 60))
        _ = try q.fail(task, reason: "a test failure", retry: false)
        let first = finish(watch)
        XCTAssertEqual(watch.0.terminationStatus, 1, first)
        XCTAssertTrue(FileManager.default.fileExists(atPath: inbox.appendingPathComponent("Failed/one.mp4").path), first)
        return (inbox, watchArguments, q, try XCTUnwrap(try q.list().first).id)
    }

    /// A shared watch folder's failed original goes to Failed/; 'queue retry --queue' puts it
    /// back where the job reads it (the retried job failed at once: "gone since it was
    /// submitted"), and the watcher follows the job again: done, the original goes to Originals/.
    func testARetriedWatchFolderJobGetsItsOriginalBack() throws {
        let (inbox, watchArguments, q, id) = try failedWatchInboxJob()
        let retry = try run(["queue", "retry", String(id), "--queue", cluster.url])
        XCTAssertTrue(retry.contains("'\(inbox.appendingPathComponent("one.mp4").path)' is back from Failed/"), retry)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: inbox.appendingPathComponent("Failed").path), [])
        let again = try start(watchArguments)
        let worker = finish(try start(["worker", "--once", "--name", "w"]))
        let second = finish(again)
        XCTAssertEqual(again.0.terminationStatus, 0, second)
        XCTAssertEqual(try XCTUnwrap(try q.list().first).state, "done", worker)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: inbox.appendingPathComponent("Originals").path), ["one.mp4"])
        XCTAssertEqual(try MediaProbe.packets(inbox.appendingPathComponent("Upscaled/one Upscaled.mkv").path, stream: 0).count, 60)
        // A done job's priority is not set (it was, and said so).
        let priority = try start(["queue", "priority", String(id), "5", "--queue", cluster.url])
        let priorityText = finish(priority)
        XCTAssertEqual(priority.0.terminationStatus, 1, priorityText)
        XCTAssertTrue(priorityText.contains("no queued or running job \(id) on the queue"), priorityText)
    }

    /// A shared watch folder's job cancelled, then retried ('queue retry --queue' takes a
    /// cancelled job named by id), is followed again: done, its original goes to Originals/
    /// (the watcher had let go of it for good: the output was written and the original stayed
    /// in the folder). And 'worker --once' on a paused queue says so and exits 1 (it waited,
    /// silent, for good).
    func testACancelledWatchFolderJobRetriedIsFollowedAndAPausedQueueEndsAOnceWorker() throws {
        let (inbox, watchArguments, watch, q) = try watchedInbox()
        let id = try XCTUnwrap(try q.list().first).id
        try run(["queue", "cancel", String(id), "--queue", cluster.url])
        let first = finish(watch)
        XCTAssertEqual(watch.0.terminationStatus, 0, first)
        try run(["queue", "retry", String(id), "--queue", cluster.url])
        XCTAssertEqual(try XCTUnwrap(try q.list().first).state, "queued")

        try run(["queue", "pause", "--queue", cluster.url])
        let paused = try start(["worker", "--once", "--name", "p"])
        let pausedText = finish(paused)
        XCTAssertEqual(paused.0.terminationStatus, 1, pausedText)
        XCTAssertTrue(pausedText.contains("error: the queue is paused: its open jobs were left undone (upscale queue resume --queue …)"), pausedText)
        try run(["queue", "resume", "--queue", cluster.url])

        let again = try start(watchArguments)
        let worker = finish(try start(["worker", "--once", "--name", "w"]))
        let second = finish(again)
        XCTAssertEqual(again.0.terminationStatus, 0, second)
        XCTAssertEqual(try XCTUnwrap(try q.list().first).state, "done", worker)
        XCTAssertTrue(second.contains("done: 'one.mp4'"), second)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: inbox.appendingPathComponent("Originals").path), ["one.mp4"])
        XCTAssertEqual(try MediaProbe.packets(inbox.appendingPathComponent("Upscaled/one Upscaled.mkv").path, stream: 0).count, 60)
    }

    /// An input saved over while its chunk reads it fails the job as changed since it was
    /// submitted (it failed as "damaged there — re-export or trim the source").
    func testAnInputSavedOverMidChunkFailsAsChanged() throws {
        let dir = try workspace()
        let input = dir.appendingPathComponent("clip.mp4")
        try run(["submit", input.path, "-o", dir.appendingPathComponent("out").path, "--chunk-seconds", "100"] + Self.exact)
        let worker = try start(["worker", "--once", "--name", "w"])
        let work = dir.appendingPathComponent("out/.clip Upscaled.mkv.upscale-work").path
        try waitUntil("the chunk is written") { ((try? FileManager.default.contentsOfDirectory(atPath: work)) ?? []).contains { $0.contains(".chunk") } }
        // Its second half overwritten in place: the same size, later bytes unreadable.
        let size = try XCTUnwrap(try FileManager.default.attributesOfItem(atPath: input.path)[.size] as? Int)
        let handle = try FileHandle(forWritingTo: input)
        try handle.seek(toOffset: UInt64(size / 2))
        try handle.write(contentsOf: Data(count: size / 4))
        try handle.close()
        // Saved later than the 2 s a share's coarse times are allowed.
        var times = [timeval(tv_sec: Int(Date().timeIntervalSince1970) + 60, tv_usec: 0), timeval(tv_sec: Int(Date().timeIntervalSince1970) + 60, tv_usec: 0)]
        XCTAssertEqual(utimes(input.path, &times), 0)
        let text = finish(worker)
        XCTAssertEqual(worker.0.terminationStatus, 1, text)
        let job = try XCTUnwrap(try queue().list().first)
        XCTAssertEqual(job.state, "failed", text)
        XCTAssertTrue(job.error?.contains("changed since it was submitted (saved again at ") ?? false, job.error ?? "")
        XCTAssertFalse(job.error?.contains("re-export") ?? true, (job.error ?? "") + "\n" + text)
    }

    /// A second worker of a name that is running is refused in one line: the two showed as one
    /// row, and the first to stop took the other's slots off the list. The name is free again
    /// as soon as its worker stops (killed too: it goes with its connection).
    func testASecondWorkerOfARunningWorkersNameIsRefused() throws {
        let q = try queue()
        let first = try start(["worker", "--name", "w"])
        try waitUntil("the first worker is listed") { try q.workers().contains { $0.name == "w/0" } }
        let second = try start(["worker", "--once", "--name", "w"])
        let text = finish(second)
        XCTAssertEqual(second.0.terminationStatus, 1, text)
        XCTAssertEqual(text, "error: a worker named 'w' is already running on this queue; give this one another --name (or stop that one first)\n")
        XCTAssertEqual(try q.workers().map(\.name), ["w/0"])
        kill(first.0.processIdentifier, SIGKILL)
        _ = finish(first)
        let third = try start(["worker", "--once", "--name", "w"])
        let thirdText = finish(third)
        XCTAssertEqual(third.0.terminationStatus, 0, thirdText)
    }

    /// The dashboard's Retry of that job does the same as `queue retry`: the original comes
    /// back from Failed/ (it stayed there, and the retried job failed at once).
    func testTheDashboardsRetryGetsAWatchFolderJobsOriginalBack() throws {
        let (inbox, _, q, id) = try failedWatchInboxJob()
        let dashboard = try RunningDashboard(board: FarmBoard(queue: try PostgresQueue(address: try QueueAddress(cluster.url))))
        defer { dashboard.stop() }
        let reply = try dashboard.http.send("POST", "/api/jobs/\(id)/retry", headers: ["Origin": dashboard.origin], body: "{}")
        XCTAssertEqual(reply.status, 200, reply.text)
        XCTAssertEqual(try q.job(id: id)?.state, "queued")
        XCTAssertTrue(FileManager.default.fileExists(atPath: inbox.appendingPathComponent("one.mp4").path))
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: inbox.appendingPathComponent("Failed").path), [])
    }

    /// 'queue retry ID' of a failed job whose output a newer job makes says so (it said "no
    /// failed or cancelled job with id …" of a job listed as failed).
    func testRetryOfAJobWhoseOutputAnotherMakesSaysWhich() throws {
        let dir = try workspace()
        try submit(dir)
        let q = try queue()
        let first = try XCTUnwrap(try q.list().first).id
        try q.execute("UPDATE upscale_jobs SET state = 'failed', error = 'a test failure' WHERE id = \(first)")
        try submit(dir)
        let second = try XCTUnwrap(try q.list().map(\.id).max())
        let retry = try start(["queue", "retry", String(first), "--queue", cluster.url])
        let text = finish(retry)
        XCTAssertEqual(retry.0.terminationStatus, 1, text)
        XCTAssertEqual(text, "error: job \(first) is not queued again: job \(second) makes its output '\(dir.appendingPathComponent("out/clip Upscaled.mkv").path)' now; wait for it, or cancel it first\n")
        XCTAssertEqual(try q.job(id: first)?.state, "failed")
    }

    /// An idle worker polling only every 10 minutes starts a job submitted after it went idle
    /// within the test's deadline: it was woken by NOTIFY. Its threads, idle and working, are
    /// all batch work.
    func testIdleWorkerIsWokenByNotify() throws {
        let dir = try workspace()
        let q = try queue()
        let worker = try start(["worker", "--name", "idle"], idlePoll: 600)
        Thread.sleep(forTimeInterval: 2) // started, listening, idle: its one claim found nothing
        XCTAssertTrue(worker.0.isRunning)
        let pid = worker.0.processIdentifier
        let idle = threadPolicies(pid)
        XCTAssertEqual(Set(idle.values), [batch], "scheduling policies of the idle worker's \(idle.count) threads")
        try submit(dir, seconds: "2")
        // The threads the job starts (x265's, the scaler's, the stages') inherit it.
        var busiest = idle
        try waitUntil("the job is done") {
            let now = threadPolicies(pid)
            if now.count > busiest.count { busiest = now }
            return try q.list().first?.state == "done"
        }
        XCTAssertGreaterThan(busiest.count, idle.count + 2, "the job's threads were never seen")
        XCTAssertEqual(Set(busiest.values), [batch], "scheduling policies of the working worker's \(busiest.count) threads")
        kill(worker.0.processIdentifier, SIGTERM)
        let text = finish(worker)
        XCTAssertTrue(text.contains("1 joins"), text)
    }

    /// A cancelled job's running chunk stops at once: the cancel's NOTIFY has the worker renew
    /// its leases now, and the task's token is gone. It went on encoding until its next
    /// heartbeat, a quarter of the lease (15 s by default). Nothing of the chunk is left.
    func testCancelStopsARunningChunkAtOnce() throws {
        let dir = try workspace()
        // Slow on purpose: one 3 s chunk (30 pictures at 1024x768, x265 veryslow, one thread) takes far longer than the wait.
        try run(["submit", dir.appendingPathComponent("clip.mp4").path, "-o", dir.appendingPathComponent("out").path,
                 "--chunk-seconds", "3", "--scale", "4", "--preset", "veryslow", "--no-refine", "--threads", "1"])
        let q = try queue()
        let worker = try start(["worker", "--once", "--name", "w"], lease: 60)
        try waitUntil("the worker encodes a chunk") { try q.list().first?.machines.contains("w") == true }
        Thread.sleep(forTimeInterval: 1)
        let job = try XCTUnwrap(try q.list().first)
        XCTAssertEqual(job.chunksDone, 0)
        let cancelled = Date()
        try run(["queue", "cancel", "--queue", cluster.url, String(job.id)])
        let text = finish(worker)
        let took = Date().timeIntervalSince(cancelled)
        XCTAssertEqual(worker.0.terminationStatus, 0, text)
        XCTAssertLessThan(took, 7, "the worker stopped \(took) s after the cancel: \(text)")
        XCTAssertTrue(text.contains("job \(job.id) was cancelled; stopped"), text)
        XCTAssertEqual(try q.job(id: job.id)?.state, "cancelled")
        let work = ChunkedJob.workFolder(for: job.output)
        XCTAssertEqual((try? FileManager.default.contentsOfDirectory(atPath: work)) ?? [], [], "left in \(work)")
    }

    /// A job submitted (1 s chunks) and a `worker --once` that holds still for `seconds` once
    /// its join has put the output in place, before it records it; returned once the output is there.
    private func workerHeldAfterItsJoin(seconds: Int) throws -> (URL, PostgresQueue, (Process, Pipe)) {
        let dir = try workspace()
        try submit(dir)
        let q = try queue()
        let worker = try start(["worker", "--once", "--name", "held"], lease: 60, hook: "pause-before-recording:\(seconds)")
        let output = dir.appendingPathComponent("out/clip Upscaled.mkv")
        try waitUntil("the join places the output") { FileManager.default.fileExists(atPath: output.path) }
        return (dir, q, worker)
    }

    /// A cancel that reaches the queue after a join put the output in place, before the worker
    /// recorded it (the hook holds the worker there for 3 s): the job stays cancelled and leaves
    /// no output, only its chunks, which a retry joins. Before, the joined output stayed beside
    /// a cancelled job.
    func testACancelAsTheJoinEndsLeavesNoOutput() throws {
        let (dir, q, worker) = try workerHeldAfterItsJoin(seconds: 3)
        let out = dir.appendingPathComponent("out")
        let job = try XCTUnwrap(try q.list().first)
        XCTAssertEqual(job.state, "running")
        try run(["queue", "cancel", "--queue", cluster.url, String(job.id)])
        let text = finish(worker)
        XCTAssertEqual(worker.0.terminationStatus, 0, text)
        XCTAssertTrue(text.contains("job \(job.id) was cancelled as its join ended; removed its output"), text)
        XCTAssertEqual(try q.job(id: job.id)?.state, "cancelled")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: out.path), [".clip Upscaled.mkv.upscale-work"])
        try run(["queue", "retry", String(job.id), "--queue", cluster.url])
        let again = finish(try start(["worker", "--once", "--name", "w2"]))
        XCTAssertEqual(try q.job(id: job.id)?.state, "done", again)
        XCTAssertTrue(again.contains("0 chunks, 1 joins"), again)
        XCTAssertEqual(try MediaProbe.packets(job.output, stream: 0).count, 60)
    }

    /// The same held-up worker, while a job submitted to the same place after the cancel (with
    /// --overwrite, as the file is there) is made and replaces the file: the file is that job's
    /// now, and stays when the held worker goes on.
    func testACancelledJoinLeavesALaterJobsOutput() throws {
        let (dir, q, held) = try workerHeldAfterItsJoin(seconds: 10)
        let output = dir.appendingPathComponent("out/clip Upscaled.mkv")
        let first = try XCTUnwrap(try q.list().first)
        try run(["queue", "cancel", "--queue", cluster.url, String(first.id)])
        try run(["submit", dir.appendingPathComponent("clip.mp4").path, "-o", dir.appendingPathComponent("out").path,
                 "--chunk-seconds", "1", "--overwrite"] + Self.exact)
        let other = finish(try start(["worker", "--once", "--name", "other"]))
        let second = try XCTUnwrap(try q.list().first { $0.id != first.id })
        XCTAssertEqual(second.state, "done", other)
        let text = finish(held)
        XCTAssertTrue(text.contains("job \(first.id) was cancelled as its join ended"), text)
        XCTAssertFalse(text.contains("removed its output"), text)
        XCTAssertEqual(try MediaProbe.packets(output.path, stream: 0).count, 60)
    }

    /// A worker stopped (SIGTERM, Ctrl-C) mid-chunk stops at once and hands the task back
    /// uncounted; it went on encoding until its next heartbeat, a quarter of the lease.
    func testAStoppedWorkerStopsItsChunkAtOnce() throws {
        let dir = try workspace()
        try run(["submit", dir.appendingPathComponent("clip.mp4").path, "-o", dir.appendingPathComponent("out").path,
                 "--chunk-seconds", "3", "--scale", "4", "--preset", "veryslow", "--no-refine", "--threads", "1"])
        let q = try queue()
        let worker = try start(["worker", "--name", "w"], lease: 60)
        try waitUntil("the worker encodes a chunk") { try q.list().first?.machines.contains("w") == true }
        Thread.sleep(forTimeInterval: 1)
        let stopped = Date()
        kill(worker.0.processIdentifier, SIGTERM)
        let text = finish(worker)
        let took = Date().timeIntervalSince(stopped)
        XCTAssertEqual(worker.0.terminationStatus, 130, text)
        XCTAssertLessThan(took, 7, "the worker stopped \(took) s after SIGTERM: \(text)")
        let job = try XCTUnwrap(try q.list().first)
        XCTAssertEqual(job.attempts, 0, "a stop is not an attempt")
        XCTAssertEqual(job.chunksDone, 0)
    }

    private let batch: Int32 = 3 // SCHED_BATCH (linux/sched.h), not imported into Swift

    /// The scheduling policy of each thread of process `pid` (threads gone while read are left out).
    private func threadPolicies(_ pid: pid_t) -> [pid_t: Int32] {
        let threads = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []).compactMap { pid_t($0) }
        return Dictionary(uniqueKeysWithValues: threads.map { ($0, sched_getscheduler($0)) }.filter { $0.1 >= 0 })
    }

    /// `submit` refuses what the farm would get wrong: a second job writing the same output
    /// (in the same call or open on the queue: one result was lost, or every duplicate was
    /// encoded in full and failed at its join), and a still image (it became a one-frame
    /// HEVC movie). `queue cancel --queue` with no id refuses instead of cancelling every job.
    func testSubmitRefusesADuplicateOutputAndAStill() throws {
        let dir = try workspace()
        let clip = dir.appendingPathComponent("clip.mp4").path
        let out = dir.appendingPathComponent("out").path
        try FileManager.default.createDirectory(at: dir.appendingPathComponent("day2"), withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: clip, toPath: dir.appendingPathComponent("day2/clip.mp4").path)
        let both = try start(["submit", clip, dir.appendingPathComponent("day2/clip.mp4").path, "-o", out, "--chunk-seconds", "1"] + Self.exact)
        let bothText = finish(both)
        XCTAssertEqual(both.0.terminationStatus, 1, bothText)
        XCTAssertTrue(bothText.contains("would be written to '\(out)/clip Upscaled.mkv', as '\(clip)' of this submit is"), bothText)
        let again = try start(["submit", clip, "-o", out, "--chunk-seconds", "1"] + Self.exact)
        let againText = finish(again)
        XCTAssertEqual(again.0.terminationStatus, 1, againText)
        XCTAssertTrue(againText.contains("which job 1 on the queue is making"), againText)
        XCTAssertEqual(try queue().list().count, 1)
        let photo = Self.fixture.deletingLastPathComponent().appendingPathComponent("baboon.jpg").path
        let still = try start(["submit", photo, "-o", out])
        let stillText = finish(still)
        XCTAssertEqual(still.0.terminationStatus, 1, stillText)
        XCTAssertTrue(stillText.contains("is a still image: the queue takes videos"), stillText)
        let cancel = try start(["queue", "cancel", "--queue", cluster.url])
        let cancelText = finish(cancel)
        XCTAssertEqual(cancel.0.terminationStatus, 2, cancelText)
        XCTAssertTrue(cancelText.contains("name the jobs to cancel"), cancelText)
        XCTAssertEqual(try queue().list().map(\.state), ["queued"])
    }

    /// A worker that cannot see a job's folders (a wrong --map, a share not mounted) hands the
    /// task back uncounted and stops, saying so; it failed every job of the farm in seconds.
    /// An input changed since it was submitted fails its job at once, instead of an output
    /// made half of each version. A stopped worker leaves the list of workers.
    func testAWorkerThatCannotSeeTheFilesStopsAndAChangedInputFailsItsJob() throws {
        let dir = try workspace()
        try submit(dir)
        let blind = try start(["worker", "--once", "--name", "blind", "--map", "\(dir.path)=/nowhere\(dir.path)"])
        let blindText = finish(blind)
        XCTAssertEqual(blind.0.terminationStatus, 1, blindText)
        XCTAssertTrue(blindText.contains("this machine cannot see '/nowhere\(dir.path)"), blindText)
        XCTAssertTrue(blindText.contains("check --map"), blindText)
        let q = try queue()
        var job = try XCTUnwrap(try q.list().first)
        // Queued again, not shown running with nothing running it.
        XCTAssertEqual(job.state, "queued")
        XCTAssertEqual(job.attempts, 0, "the blind worker's attempt is not counted")
        // The input re-exported (other bytes) after it was submitted.
        let handle = try FileHandle(forWritingTo: dir.appendingPathComponent("clip.mp4"))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(count: 4096))
        try handle.close()
        let worker = try start(["worker", "--once", "--name", "seer"])
        let text = finish(worker)
        // A task that failed here is a failed --once run (it exited 0).
        XCTAssertEqual(worker.0.terminationStatus, 1, text)
        job = try XCTUnwrap(try q.list().first)
        XCTAssertEqual(job.state, "failed", text)
        XCTAssertTrue(job.errorSummary?.contains("changed since it was submitted") ?? false, job.error ?? "")
        XCTAssertEqual(job.attempts, 1, "failed at once")
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir.appendingPathComponent("out/clip Upscaled.mkv").path))
    }

    /// An input saved again with the same size fails with when it was saved ("1250805 bytes
    /// then, 1250805 now" read as unchanged). An input removed from a folder it was alone in
    /// leaves that folder empty, which is also how an unmounted share looks: the worker says
    /// both (it blamed --map alone).
    func testChangedAndRemovedInputsAreSaidAsTheyAre() throws {
        let dir = try workspace()
        try submit(dir)
        let input = dir.appendingPathComponent("clip.mp4").path
        var times = [timeval(tv_sec: Int(Date().timeIntervalSince1970) + 60, tv_usec: 0), timeval(tv_sec: Int(Date().timeIntervalSince1970) + 60, tv_usec: 0)]
        XCTAssertEqual(utimes(input, &times), 0)
        let text = finish(try start(["worker", "--once", "--name", "w"]))
        let job = try XCTUnwrap(try queue().list().first)
        XCTAssertEqual(job.state, "failed", text)
        XCTAssertTrue(job.error?.contains("changed since it was submitted (saved again at ") ?? false, job.error ?? "")

        let solo = dir.appendingPathComponent("solo")
        try FileManager.default.createDirectory(at: solo, withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: Self.fixture, to: solo.appendingPathComponent("only.mp4"))
        try run(["submit", solo.appendingPathComponent("only.mp4").path, "-o", dir.appendingPathComponent("out").path, "--chunk-seconds", "1"] + Self.exact)
        try FileManager.default.removeItem(at: solo.appendingPathComponent("only.mp4"))
        let blind = try start(["worker", "--once", "--name", "w2"])
        let blindText = finish(blind)
        XCTAssertEqual(blind.0.terminationStatus, 1, blindText)
        XCTAssertTrue(blindText.contains("cannot see '\(solo.path)' (it is empty here: a share not mounted, or 'only.mp4' was removed since it was submitted; then cancel job "), blindText)
    }

    /// --strip reaches the workers: the output of a farm job has none of the file's tags (its
    /// workers planned the job without it, and kept a phone's location and model).
    func testStripReachesTheWorkers() throws {
        let dir = try workspace()
        let tagged = dir.appendingPathComponent("tagged.mp4").path
        try Remuxer.copy(dir.appendingPathComponent("clip.mp4").path, to: tagged,
                         metadata: ["title": "Street", "com.apple.quicktime.model": "iPhone 15 Pro"])
        try run(["submit", tagged, "-o", dir.appendingPathComponent("out").path, "--chunk-seconds", "1", "--strip"] + Self.exact)
        _ = finish(try start(["worker", "--once"]))
        let job = try XCTUnwrap(try queue().list().first)
        XCTAssertEqual(job.state, "done")
        let tags = try MediaProbe.info(job.output).tags
        XCTAssertNil(tags["title"] ?? tags["TITLE"], "\(tags)")
        XCTAssertNil(tags["com.apple.quicktime.model"] ?? tags["COM.APPLE.QUICKTIME.MODEL"], "\(tags)")
    }

    /// Captions the output cannot keep (FFV1 has no place for them): the note the plain
    /// command prints reaches the job in the queue once, however many chunks found it, and
    /// `queue list` and the dashboard show it; a job whose output keeps everything has none.
    func testWhatAnOutputDropsIsNotedOnItsJob() throws {
        let dir = try workspace()
        let captioned = dir.appendingPathComponent("street-captions.mp4")
        try FileManager.default.copyItem(at: Self.fixture.deletingLastPathComponent().appendingPathComponent("street-captions.mp4"), to: captioned)
        for input in [captioned, dir.appendingPathComponent("clip.mp4")] {
            try run(["submit", input.path, "-o", dir.appendingPathComponent("out").path, "--chunk-seconds", "1"] + Self.exact)
        }
        let log = finish(try start(["worker", "--once"]))
        let jobs = try queue().list()
        XCTAssertEqual(jobs.map(\.state), ["done", "done"], log)
        XCTAssertGreaterThan(jobs[0].chunks, 1)
        let note = Transcoder.captionsNote(captioned.path, codec: .ffv1)
        XCTAssertEqual(jobs[0].notes, [note])
        XCTAssertEqual(jobs[1].notes, [])
        XCTAssertTrue(log.contains(note), log)
        let listing = try run(["queue", "list"]).split(separator: "\n").map { $0.split(separator: "\t", omittingEmptySubsequences: false) }
        XCTAssertEqual(listing.first?.last, "notes")
        XCTAssertEqual(listing.dropFirst().first { $0.first == "\(jobs[0].id)" }?.last.map(String.init), note)
        XCTAssertEqual(listing.dropFirst().first { $0.first == "\(jobs[1].id)" }?.last, "")
        let board = try FarmBoard(queue: try queue()).read(now: Date().timeIntervalSince1970)
        XCTAssertEqual(board.jobs.map(\.notes), [[note], []])
    }

    /// HEVC `auto` chunks are all made with the encoder the job's first finished chunk was
    /// made with: a worker that cannot open it (a machine without the GPU) leaves the job to
    /// the others, its attempts uncounted, and says so in one line; one that can makes them.
    func testAWorkerWithoutTheJobsEncoderLeavesItToOthers() throws {
        let dir = try workspace()
        try run(["submit", dir.appendingPathComponent("clip.mp4").path, "-o", dir.appendingPathComponent("out").path,
                 "--chunk-seconds", "1", "--preset", "ultrafast", "--no-refine", "--threads", "1"])
        let q = try queue()
        let id = try XCTUnwrap(try q.list().first?.id)
        // As if a worker with an NVIDIA GPU had finished the job's first chunk.
        try q.execute("UPDATE upscale_jobs SET encoder = 'hevc_nvenc' WHERE id = \(id)")
        let (p, out) = try start(["worker", "--once"])
        let text = finish((p, out))
        XCTAssertEqual(p.terminationStatus, 1, text)
        XCTAssertTrue(text.contains("this machine lacks the encoder of job \(id) (cannot open hevc_nvenc), which the rest of their chunks need (those jobs were left to other workers)"), text)
        let left = try XCTUnwrap(try q.job(id: id))
        XCTAssertEqual(left.state, "queued")
        XCTAssertEqual(left.chunksDone, 0)
        XCTAssertEqual(left.attempts, 0, "leaving counted an attempt")
        // What it waits for is on the job, where `queue list` and the dashboard show it.
        XCTAssertEqual(left.notes.count, 1)
        XCTAssertTrue(left.notes.first?.hasPrefix("its chunks are made with hevc_nvenc") == true, "\(left.notes)")
        try q.execute("UPDATE upscale_jobs SET encoder = 'libx265' WHERE id = \(id)")
        let made = finish(try start(["worker", "--once"]))
        let job = try XCTUnwrap(try q.job(id: id))
        XCTAssertEqual(job.state, "done", made)
        XCTAssertEqual(job.encoder, "libx265")
        XCTAssertEqual(try MediaProbe.info(job.output).video?.codec, "hevc")
    }

    /// An output folder a worker sees but cannot write in (a share mounted read-only on that
    /// machine) is that machine's problem, as one it cannot see: the task goes back uncounted,
    /// the job is left to other workers, and the worker names the folder with the system's
    /// reason in one line. It took the task again at once, three times, and failed the job
    /// (one such node failed every job of the farm within seconds).
    func testAnOutputFolderAWorkerCannotWriteIsLeftToOtherWorkers() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root to mount a read-only tmpfs") }
        let dir = try workspace()
        let shut = dir.appendingPathComponent("shut")
        try FileManager.default.createDirectory(at: shut, withIntermediateDirectories: true)
        let mount = Process()
        mount.executableURL = URL(fileURLWithPath: "/bin/mount")
        mount.arguments = ["-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", shut.path]
        try mount.run()
        mount.waitUntilExit()
        guard mount.terminationStatus == 0 else { throw XCTSkip("tmpfs cannot be mounted here") }
        defer {
            let umount = Process()
            umount.executableURL = URL(fileURLWithPath: "/bin/umount")
            umount.arguments = [shut.path]
            try? umount.run()
            umount.waitUntilExit()
        }
        // Queued with a note: the submitting machine cannot write there either.
        let submitted = try run(["submit", dir.appendingPathComponent("clip.mp4").path, "-o", shut.path, "--chunk-seconds", "1"] + Self.exact)
        XCTAssertTrue(submitted.contains("note: this machine cannot write in '\(shut.path)' (Read-only file system); its jobs wait for a worker that can"), submitted)
        let worker = try start(["worker", "--once", "--name", "readonly"])
        let text = finish(worker)
        XCTAssertEqual(worker.0.terminationStatus, 1, text)
        XCTAssertTrue(text.contains("this machine cannot write in '\(shut.path)' (Read-only file system)"), text)
        XCTAssertFalse(text.contains("NSCocoaErrorDomain"), text)
        let job = try XCTUnwrap(try queue().list().first)
        XCTAssertEqual(job.state, "queued", "waiting for a worker that can, not shown running")
        XCTAssertEqual(job.attempts, 0, "not counted")
        // A machine that can write there does the job.
        let mapped = dir.appendingPathComponent("writable")
        try FileManager.default.createDirectory(at: mapped, withIntermediateDirectories: true)
        let good = try start(["worker", "--once", "--map", "\(shut.path)=\(mapped.path)"])
        let goodText = finish(good)
        XCTAssertEqual(good.0.terminationStatus, 0, goodText)
        XCTAssertEqual(try XCTUnwrap(try queue().list().first).state, "done")
        XCTAssertEqual(try MediaProbe.packets(mapped.appendingPathComponent("clip Upscaled.mkv").path, stream: 0).count, 60)
    }

    /// No server there, a password in the address, no queue at all: one line each, at once.
    func testQueueProblemsAreOneLineErrors() throws {
        let cases: [([String], Int32, String)] = [
            (["queue", "list", "--queue", "postgres://upscale@127.0.0.1:1/postgres"], 1, "cannot reach the queue at postgres://upscale@127.0.0.1:1/postgres"),
            (["worker", "--queue", "postgres://upscale:secret@127.0.0.1:1/postgres"], 1, "PGPASSWORD"),
            (["submit", "x.mp4", "--queue", "mysql://h/db"], 1, "is not a queue address"),
        ]
        for (arguments, status, text) in cases {
            let p = try start(arguments)
            let output = finish(p)
            XCTAssertEqual(p.0.terminationStatus, status, output)
            XCTAssertTrue(output.contains(text), output)
            XCTAssertEqual(output.split(separator: "\n").count, 1, output)
            XCTAssertTrue(output.hasPrefix("error: "), output)
        }
    }
}
