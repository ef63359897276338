import Foundation
import UpscaleFarm
import UpscaleMedia
import UpscaleTestSupport
import XCTest

/// The shared queue's guarantees, against a real PostgreSQL server.
final class QueueTests: XCTestCase {
    static var cluster: PostgresCluster?

    override class func setUp() {
        super.setUp()
        cluster = try? PostgresCluster()
    }

    override class func tearDown() {
        cluster?.stop()
        cluster = nil
        super.tearDown()
    }

    func server() throws -> PostgresCluster {
        // Never skipped: without PostgreSQL this fails (CI installs it).
        if Self.cluster == nil { Self.cluster = try PostgresCluster() }
        return Self.cluster!
    }

    func queue() throws -> PostgresQueue {
        try PostgresQueue(address: try QueueAddress(try server().url))
    }

    static func plan(chunks: Int) -> ChunkPlan {
        ChunkPlan(timeBase: .init(num: 1, den: 30), chunks: (0..<chunks).map {
            ChunkRange(index: $0, seek: $0 == 0 ? nil : Int64($0 * 300 - 30), start: $0 == 0 ? nil : Int64($0 * 300),
                       end: $0 == chunks - 1 ? nil : Int64($0 * 300 + 300), frames: 300)
        })
    }

    func submit(_ q: PostgresQueue, chunks: Int, name: String = UUID().uuidString) throws -> Int64 {
        try q.submit(input: "/in/\(name).mov", output: "/out/\(name) Upscaled.mov", settings: ["--no-refine"],
                     plan: Self.plan(chunks: chunks), priority: 0, host: "test")
    }

    /// 8 connections race for 1000 chunks: each is claimed exactly once. Prints the claim rate.
    func testClaimsAreExclusiveUnderConcurrency() throws {
        let q = try queue()
        try q.execute("UPDATE upscale_jobs SET state = 'done'")
        let id = try submit(q, chunks: 1000)
        let queues = try (0..<8).map { _ in try queue() }
        let lock = NSLock()
        var claimed: [Int: Int] = [:]
        let start = Date()
        DispatchQueue.concurrentPerform(iterations: 8) { n in
            while let task = try? queues[n].claim(owner: "racer\(n)", lease: 60) {
                XCTAssertEqual(task.jobID, id)
                lock.lock()
                claimed[task.index, default: 0] += 1
                lock.unlock()
            }
        }
        let seconds = Date().timeIntervalSince(start)
        XCTAssertEqual(claimed.count, 1000)
        XCTAssertEqual(claimed.values.filter { $0 != 1 }.count, 0, "chunks claimed more than once")
        print(String(format: "claims: 1000 by 8 connections in %.2f s = %.0f claims/s", seconds, 1000 / seconds))
    }

    /// A worker stopped past its lease: its chunk is rescued and claimed by another with a new
    /// token; the old claim's heartbeat, completion and failure are all refused.
    func testStaleClaimCannotWriteAfterItsLeaseWasTakenOver() throws {
        let q = try queue()
        try q.execute("UPDATE upscale_jobs SET state = 'done'")
        let id = try submit(q, chunks: 2)
        let old = try XCTUnwrap(try q.claim(owner: "sleeper", lease: 0.3))
        XCTAssertEqual(old.jobID, id)
        Thread.sleep(forTimeInterval: 0.6)
        XCTAssertEqual(try q.rescueExpired(), 1)
        let fresh = try XCTUnwrap(try q.claim(owner: "rescuer", lease: 60))
        XCTAssertEqual(fresh.index, old.index)
        XCTAssertNotEqual(fresh.token, old.token)
        XCTAssertEqual(fresh.attempts, 2)
        XCTAssertFalse(try q.heartbeat(old, lease: 60, framesDone: 10, fps: 1))
        XCTAssertEqual(try q.complete(old, checksum: 1, seconds: 1), .stale)
        XCTAssertFalse(try q.fail(old, reason: "late"))
        XCTAssertTrue(try q.heartbeat(fresh, lease: 60, framesDone: 10, fps: 1))
        XCTAssertEqual(try q.complete(fresh, checksum: 7, seconds: 1), .done(joinQueued: false))
        XCTAssertEqual(try q.chunkChecksums(job: id)[old.index], 7)
    }

    /// HEVC `auto` on a farm where some machines have a GPU encoder: the first finished chunk's
    /// encoder becomes the job's, a chunk another worker made with another encoder meanwhile
    /// goes back to be made again (its attempt not counted), and one made with the same joins.
    func testTheFirstFinishedChunksEncoderMakesTheRest() throws {
        let q = try queue()
        try q.execute("UPDATE upscale_jobs SET state = 'done'")
        let id = try submit(q, chunks: 3)
        let a = try XCTUnwrap(try q.claim(owner: "gpu", lease: 60))
        let b = try XCTUnwrap(try q.claim(owner: "cpu", lease: 60))
        XCTAssertNil(try q.job(id: id)?.encoder)
        XCTAssertEqual(try q.complete(a, checksum: 1, seconds: 1, encoder: "hevc_nvenc"), .done(joinQueued: false))
        XCTAssertEqual(try q.job(id: id)?.encoder, "hevc_nvenc")
        XCTAssertEqual(try q.complete(b, checksum: 2, seconds: 1, encoder: "libx265"), .otherEncoder("hevc_nvenc"))
        XCTAssertEqual(try q.job(id: id)?.encoder, "hevc_nvenc")
        XCTAssertNil(try q.chunkChecksums(job: id)[b.index])
        let again = try XCTUnwrap(try q.claim(owner: "gpu", lease: 60))
        let c = try XCTUnwrap(try q.claim(owner: "gpu", lease: 60))
        XCTAssertEqual(Set([again.index, c.index]), Set([b.index, 2]))
        XCTAssertEqual((again.index == b.index ? again : c).attempts, 1, "the chunk sent back counted an attempt")
        XCTAssertEqual(try q.complete(again, checksum: 3, seconds: 1, encoder: "hevc_nvenc"), .done(joinQueued: false))
        XCTAssertEqual(try q.complete(c, checksum: 4, seconds: 1, encoder: "hevc_nvenc"), .done(joinQueued: true))
        // A stale claim is refused before its encoder is looked at.
        XCTAssertEqual(try q.complete(b, checksum: 2, seconds: 1, encoder: "libx265"), .stale)
    }

    /// The two last chunks of a job finishing at the same instant: exactly one completion
    /// creates the join, never none and never two (20 jobs).
    func testJoinIsCreatedExactlyOnceWhenTheLastChunksFinishTogether() throws {
        let q = try queue()
        let a = try queue(), b = try queue()
        for _ in 0..<20 {
            try q.execute("UPDATE upscale_jobs SET state = 'done' WHERE state <> 'done'")
            let id = try submit(q, chunks: 2)
            let first = try XCTUnwrap(try a.claim(owner: "a", lease: 60))
            let second = try XCTUnwrap(try b.claim(owner: "b", lease: 60))
            var results: [PostgresQueue.Completion?] = [nil, nil]
            DispatchQueue.concurrentPerform(iterations: 2) { n in
                results[n] = try? (n == 0 ? a : b).complete(n == 0 ? first : second, checksum: 1, seconds: 1)
            }
            XCTAssertEqual(results.filter { $0 == .done(joinQueued: true) }.count, 1, "job \(id): \(results)")
            XCTAssertEqual(results.filter { $0 == .done(joinQueued: false) }.count, 1)
            let join = try XCTUnwrap(try q.claim(owner: "joiner", lease: 60))
            XCTAssertTrue(join.isJoin)
            XCTAssertEqual(join.jobID, id)
            XCTAssertNil(try q.claim(owner: "joiner", lease: 60), "one join only")
            XCTAssertEqual(try q.complete(join, checksum: 0, seconds: 0), .done(joinQueued: false))
            XCTAssertEqual(try q.job(id: id)?.state, "done")
        }
    }

    /// Submits of one output from several machines at the same moment: one job is queued, and
    /// every other submit is told which job makes that output. The check and the insert were
    /// two steps, and several submits passed the check.
    func testSubmitsOfOneOutputAtOnceQueueOneJob() throws {
        let q = try queue()
        try q.execute("UPDATE upscale_jobs SET state = 'done' WHERE state <> 'done'")
        let machines = try (0..<8).map { _ in try queue() }
        for round in 0..<10 {
            let output = "/out/race-\(round) Upscaled.mov"
            let lock = NSLock()
            var results: [Result<Int64, Error>] = []
            let gate = DispatchSemaphore(value: 0)
            let group = DispatchGroup()
            for (n, machine) in machines.enumerated() {
                group.enter()
                Thread.detachNewThread {
                    gate.wait()
                    let result = Result { try machine.submit(input: "/in/race-\(round)-\(n).mov", output: output, settings: [],
                                                             plan: Self.plan(chunks: 2), priority: 0, host: "machine-\(n)") }
                    lock.withLock { results.append(result) }
                    group.leave()
                }
            }
            for _ in machines { gate.signal() }
            group.wait()
            let ids = results.compactMap { try? $0.get() }
            XCTAssertEqual(ids.count, 1, "round \(round): \(results)")
            for case .failure(let error) in results {
                XCTAssertEqual(error as? PostgresQueue.OutputTaken, PostgresQueue.OutputTaken(job: ids.first ?? -1), "\(error)")
            }
            XCTAssertEqual(try q.openJobs(writing: output).count, 1)
        }
    }

    /// `queue retry` leaves a failed job failed while another job makes its output (the file was
    /// submitted again meanwhile): both were queued and raced for one file.
    func testRetryLeavesAJobWhoseOutputIsBeingMadeAgain() throws {
        let q = try queue()
        try q.execute("UPDATE upscale_jobs SET state = 'done' WHERE state <> 'done'")
        let failed = try submit(q, chunks: 1, name: "twice")
        try q.execute("UPDATE upscale_jobs SET state = 'failed' WHERE id = \(failed)")
        let again = try submit(q, chunks: 1, name: "twice")
        XCTAssertEqual(try q.retry(ids: []), 0)
        XCTAssertEqual(try q.retry(ids: [failed]), 0)
        XCTAssertEqual(try q.job(id: failed)?.state, "failed")
        XCTAssertEqual(try q.openJobs(writing: "/out/twice Upscaled.mov"), [again])
    }

    /// A chunk failing three times fails its job with every reason; `queue retry` requeues it.
    func testChunkFailingThreeTimesFailsItsJob() throws {
        let q = try queue()
        try q.execute("UPDATE upscale_jobs SET state = 'done' WHERE state <> 'done'")
        let id = try submit(q, chunks: 3)
        for attempt in 1...3 {
            let task = try XCTUnwrap(try q.claim(owner: "w", lease: 60))
            XCTAssertEqual(task.index, 0)
            XCTAssertEqual(try q.fail(task, reason: "encoder failed (\(attempt))"), attempt == 3)
        }
        let job = try XCTUnwrap(try q.job(id: id))
        XCTAssertEqual(job.state, "failed")
        for attempt in 1...3 { XCTAssertTrue(job.error?.contains("encoder failed (\(attempt))") ?? false, job.error ?? "") }
        XCTAssertNil(try q.claim(owner: "w", lease: 60), "a failed job's other chunks are not run")
        // Retry with no ids: the failed job, not a cancelled one (it revived every cancelled job).
        let stopped = try submit(q, chunks: 1, name: "stopped")
        XCTAssertEqual(try q.cancel(ids: [stopped]), 1)
        XCTAssertEqual(try q.retry(ids: []), 1)
        XCTAssertEqual(try q.job(id: stopped)?.state, "cancelled")
        XCTAssertEqual(try q.job(id: id)?.state, "queued")
        XCTAssertEqual(try q.claim(owner: "w", lease: 60)?.index, 0)
        // Named, a cancelled job is queued again.
        XCTAssertEqual(try q.retry(ids: [stopped]), 1)
        XCTAssertEqual(try q.job(id: stopped)?.state, "queued")
    }

    /// A chunk queued again at the join (its file missing) runs before the join: a join is
    /// claimed only once every chunk is done. The join went first, failed on the chunk three
    /// times and failed the job. A released task keeps its attempts; a job's error reads in one
    /// line with its last reason; open jobs are found by their output.
    func testAChunkRedoneAtTheJoinRunsBeforeTheJoin() throws {
        let q = try queue()
        try q.execute("UPDATE upscale_jobs SET state = 'done' WHERE state <> 'done'")
        let id = try submit(q, chunks: 2, name: "redo")
        XCTAssertEqual(try q.openJobs(writing: "/out/redo Upscaled.mov"), [id])
        for _ in 0..<2 {
            let chunk = try XCTUnwrap(try q.claim(owner: "w", lease: 60))
            _ = try q.complete(chunk, checksum: 1, seconds: 1)
        }
        let join = try XCTUnwrap(try q.claim(owner: "w", lease: 60))
        XCTAssertTrue(join.isJoin)
        XCTAssertEqual(try q.job(id: id)?.state, "running")
        try q.redo(job: id, index: 0, reason: "chunk file missing")
        try q.release(join, reason: "1 chunk file missing")
        let next = try XCTUnwrap(try q.claim(owner: "w", lease: 60))
        XCTAssertFalse(next.isJoin, "the join was claimed before the chunk it needs")
        XCTAssertEqual(next.index, 0)
        XCTAssertNil(try q.claim(owner: "w", lease: 60), "the join waits for the chunk")
        _ = try q.complete(next, checksum: 1, seconds: 1)
        let again = try XCTUnwrap(try q.claim(owner: "w", lease: 60))
        XCTAssertTrue(again.isJoin)
        XCTAssertEqual(again.attempts, 1, "the released attempt is not counted")
        XCTAssertTrue(try q.fail(again, reason: "x", retry: false))
        let failed = try XCTUnwrap(try q.job(id: id))
        XCTAssertEqual(failed.errorSummary, "the join failed: x", "failed at once, not three times")
        XCTAssertEqual(try q.openJobs(writing: "/out/redo Upscaled.mov"), [])

        // A job whose only task went back untouched (a worker that cannot see its files) is
        // queued again, not shown running with nothing running it; one with a chunk done stays.
        let untouched = try submit(q, chunks: 1, name: "untouched")
        let blind = try XCTUnwrap(try q.claim(owner: "w", lease: 60))
        XCTAssertEqual(try q.job(id: untouched)?.state, "running")
        try q.release(blind, reason: "cannot see '/in'")
        XCTAssertEqual(try q.job(id: untouched)?.state, "queued")
        try q.execute("UPDATE upscale_jobs SET state = 'done' WHERE state <> 'done'")
        let half = try submit(q, chunks: 2, name: "half")
        _ = try q.complete(try XCTUnwrap(try q.claim(owner: "w", lease: 60)), checksum: 1, seconds: 1)
        try q.release(try XCTUnwrap(try q.claim(owner: "w", lease: 60)), reason: "cannot see '/in'")
        XCTAssertEqual(try q.job(id: half)?.state, "running")
    }

    /// `pg_ctl restart -m immediate` between calls: the queue reconnects and nothing is lost.
    func testQueueSurvivesAServerRestart() throws {
        let q = try queue()
        try q.execute("UPDATE upscale_jobs SET state = 'done' WHERE state <> 'done'")
        let id = try submit(q, chunks: 2)
        let task = try XCTUnwrap(try q.claim(owner: "w", lease: 60))
        try server().restartImmediately()
        XCTAssertTrue(try q.heartbeat(task, lease: 60, framesDone: 5, fps: 1))
        XCTAssertEqual(try q.complete(task, checksum: 3, seconds: 1), .done(joinQueued: false))
        XCTAssertEqual(try q.job(id: id)?.chunksDone, 1)
    }

    /// The server ends the connection in the middle of a transaction (as at a restart, or an
    /// administrator's pg_terminate_backend): the call is made again on a new connection and
    /// comes back, without a ROLLBACK on the lost one. (A worker waited for good after a server
    /// restart when a ROLLBACK sent on the closing connection was never answered; that timing
    /// is not made here: this ROLLBACK failed at once.)
    func testATransactionWhoseConnectionIsEndedIsMadeAgain() throws {
        let q = try queue()
        try q.execute("DROP SEQUENCE IF EXISTS upscale_test_once")
        try q.execute("CREATE SEQUENCE upscale_test_once")
        let done = DispatchSemaphore(value: 0)
        final class Outcome: @unchecked Sendable { var error: String? }
        let outcome = Outcome()
        Thread.detachNewThread {
            do {
                // A sequence is outside transactions: only the first attempt ends its connection
                // (so the call fails unless it is made again).
                try q.executeInTransaction("SELECT CASE WHEN nextval('upscale_test_once') = 1 THEN pg_terminate_backend(pg_backend_pid()) ELSE true END")
            } catch {
                outcome.error = "\(error)"
            }
            done.signal()
        }
        XCTAssertEqual(done.wait(timeout: .now() + 90), .success, "the call never came back")
        XCTAssertNil(outcome.error)
    }

    /// A worker's name is held again when its connection is made again (the lock ended with
    /// the lost session, and a second worker could then start under the same name); taken by
    /// another meanwhile, the first worker's next call stops it with a line that says so.
    func testAWorkerNameIsHeldAgainAfterItsConnectionIsEnded() throws {
        let a = try queue(), b = try queue()
        XCTAssertTrue(try a.holdWorkerName("twice"))
        XCTAssertFalse(try b.holdWorkerName("twice"))
        // Waits (up to 10 s) for the ended session to exit and let go of its locks: without the
        // wait, the name was sometimes still held when `b` asked for it at once.
        let endOthers = "SELECT pg_terminate_backend(pid, 10000) FROM pg_locks WHERE locktype = 'advisory' AND classid = 74156 AND pid <> pg_backend_pid()"
        try b.execute(endOthers)
        _ = try a.workers()
        XCTAssertFalse(try b.holdWorkerName("twice"), "the name is held again after the reconnect")
        try b.execute(endOthers)
        XCTAssertTrue(try b.holdWorkerName("twice"))
        XCTAssertThrowsError(try a.workers()) { error in
            XCTAssertTrue("\(error)".contains("another worker took its name 'twice'"), "\(error)")
        }
    }

    /// A network cut: the server keeps the old session, and its hold on the name, until it
    /// notices (up to two hours). The new connection takes the name from that session of its
    /// own instead of stopping the worker as if another had taken it.
    func testAWorkerNameHeldByItsOwnCutSessionIsTakenBack() throws {
        let a = try queue(), b = try queue()
        XCTAssertTrue(try a.holdWorkerName("cut"))
        a.dropConnectionAsACutWould()
        XCTAssertNoThrow(try a.workers())
        XCTAssertFalse(try b.holdWorkerName("cut"))
    }

    /// A stopped worker's slots leave the list, whatever its name holds (one ending in a
    /// backslash, LIKE's escape character, stayed; a name with % or _ must not take others).
    func testAStoppedWorkerLeavesTheListWhateverItsName() throws {
        let q = try queue()
        let names: Set<String> = ["back\\/0", "back\\/1", "50%/0", "a_b/0", "axb/0", "5000/0"]
        for name in names { try q.reportWorker(name: name, fps: nil, current: nil) }
        try q.removeWorker(name: "back\\")
        try q.removeWorker(name: "50%")
        try q.removeWorker(name: "a_b")
        XCTAssertEqual(Set(try q.workers().map(\.name)).intersection(names), ["axb/0", "5000/0"])
    }

    func testAddressAndPathMap() throws {
        let env = ["PGPASSWORD": "pw", "USER": "me"]
        let a = try QueueAddress("postgres://farm@nas.local:6543/upscale?sslmode=require", environment: env)
        XCTAssertEqual([a.host, String(a.port), a.user, a.database, a.password ?? ""], ["nas.local", "6543", "farm", "upscale", "pw"])
        XCTAssertTrue(a.requireTLS)
        // An IPv6 literal is the address without its brackets (it was looked up as the name "[::1]").
        let six = try QueueAddress("postgres://farm@[::1]:6543/upscale", environment: env)
        XCTAssertEqual([six.host, String(six.port), six.description], ["::1", "6543", "postgres://farm@[::1]:6543/upscale"])
        XCTAssertThrowsError(try QueueAddress("postgres://farm:secret@nas/upscale", environment: env))
        XCTAssertThrowsError(try QueueAddress("mysql://nas/upscale", environment: env))
        let pass = FileManager.default.temporaryDirectory.appendingPathComponent("pgpass-\(UUID().uuidString)").path
        try "other:*:*:*:no\nnas:5432:up\\:scale:farm:right\n".write(toFile: pass, atomically: true, encoding: .utf8)
        defer { unlink(pass) }
        XCTAssertEqual(try QueueAddress("postgres://farm@nas/up:scale", environment: ["PGPASSFILE": pass]).password, "right")
        let map = try PathMap(["/mnt/nas=/Volumes/NAS", "/mnt/nas/raw/=/data/raw"])
        XCTAssertEqual(map.apply("/mnt/nas/a.mov"), "/Volumes/NAS/a.mov")
        XCTAssertEqual(map.apply("/mnt/nas/raw/b.mov"), "/data/raw/b.mov")
        XCTAssertEqual(map.apply("/mnt/nasty/c.mov"), "/mnt/nasty/c.mov")
        XCTAssertThrowsError(try PathMap(["/only-from"]))
        // One prefix to two places: only one could apply; the same place twice is fine.
        XCTAssertThrowsError(try PathMap(["/mnt/nas=/Volumes/NAS", "/mnt/nas/=/data"])) { error in
            XCTAssertEqual("\(error)", "--map gives '/mnt/nas' twice, to '/Volumes/NAS' and to '/data'; keep one")
        }
        XCTAssertEqual(try PathMap(["/mnt/nas=/Volumes/NAS", "/mnt/nas/=/Volumes/NAS/"]).apply("/mnt/nas/a.mov"), "/Volumes/NAS/a.mov")
        // Paths on the queue are absolute: a relative prefix would never match.
        XCTAssertThrowsError(try PathMap(["mnt/nas=/Volumes/NAS"]))
        XCTAssertThrowsError(try PathMap(["/mnt/nas=NAS"]))
    }

    /// sslmode=require encrypts (the server says so) without checking the certificate, as
    /// libpq does; verify-full refuses a self-signed one in one line; no sslmode stays plain.
    func testTLSModes() throws {
        let secure = try PostgresCluster(tls: true)
        defer { secure.stop() }
        XCTAssertTrue(try PostgresQueue(address: try QueueAddress(secure.url + "?sslmode=require")).usesTLS())
        XCTAssertFalse(try PostgresQueue(address: try QueueAddress(secure.url)).usesTLS())
        var verify = try QueueAddress(secure.url + "?sslmode=verify-full")
        XCTAssertTrue(verify.verifyCertificate)
        verify.port = secure.port
        XCTAssertThrowsError(try PostgresQueue(address: verify)) { error in
            XCTAssertFalse("\(error)".contains("\n"), "\(error)")
            print("verify-full against a self-signed certificate: \(error)")
        }
    }
}
