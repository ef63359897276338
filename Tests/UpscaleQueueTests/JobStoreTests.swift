import Foundation
@testable import UpscaleQueue
import XCTest

/// The SQLite job store on its own: exclusive claims, leases, stale writers, retry/cancel/pause.
final class JobStoreTests: XCTestCase {
    private var dir: URL!

    override func setUpWithError() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("upscale-store-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(at: dir) }

    private var path: String { dir.appendingPathComponent("queue.sqlite").path }

    func testTwoConnectionsRacingNeverClaimTheSameJob() throws {
        let store = try SQLiteJobStore(path: path)
        for i in 0..<300 {
            XCTAssertNotNil(try store.enqueue(source: "clip-\(i).mov", size: Int64(i), modified: 1, settings: ["--width", "128"]))
        }
        final class Claimed: @unchecked Sendable {
            let lock = NSLock()
            var ids: [[Int64]] = [[], [], []]
            var tokens: Set<String> = []
        }
        let claimed = Claimed()
        DispatchQueue.concurrentPerform(iterations: 3) { worker in
            // Each worker its own connection, as separate processes would have.
            let own = try! SQLiteJobStore(path: path)
            while let claim = try! own.claim(owner: "worker-\(worker)", lease: 30, now: Date().timeIntervalSince1970) {
                claimed.lock.lock()
                claimed.ids[worker].append(claim.job.id)
                claimed.tokens.insert(claim.token)
                claimed.lock.unlock()
            }
        }
        let all = claimed.ids.flatMap { $0 }
        XCTAssertEqual(all.count, 300)
        XCTAssertEqual(Set(all).count, 300, "a job was claimed twice")
        XCTAssertEqual(claimed.tokens.count, 300)
        XCTAssertTrue(try store.list().allSatisfy { $0.state == .running && $0.attempts == 1 })
        XCTAssertEqual(try store.list().first?.settings, ["--width", "128"])
    }

    func testExpiredLeaseIsReclaimedAndTheOldHolderIsRefused() throws {
        let store = try SQLiteJobStore(path: path)
        _ = try store.enqueue(source: "a.mov", size: 10, modified: 1, settings: [])
        let first = try XCTUnwrap(try store.claim(owner: "one", lease: 5, now: 100))
        XCTAssertNil(try store.claim(owner: "two", lease: 5, now: 101))
        XCTAssertTrue(try store.heartbeat(first, progress: JobProgress(framesDone: 3, framesTotal: 10, fps: 1), lease: 5, now: 102))
        XCTAssertEqual(try store.requeueExpired(now: 106), 0, "the heartbeat extended the lease to 107")
        // A job whose result its watcher is still recording is spared.
        XCTAssertEqual(try store.requeueExpired(now: 108, sparing: [first.job.id, first.job.id + 1]), 0)
        XCTAssertTrue(try store.holds(first))
        XCTAssertEqual(try store.requeueExpired(now: 108), 1)
        let second = try XCTUnwrap(try store.claim(owner: "two", lease: 5, now: 109))
        XCTAssertEqual(second.job.id, first.job.id)
        XCTAssertEqual(second.job.attempts, 2)
        // The first holder, back from a pause, writes with its old token: refused, nothing changes.
        XCTAssertFalse(try store.heartbeat(first, progress: JobProgress(framesDone: 9, framesTotal: 10, fps: 1), lease: 5, now: 110))
        XCTAssertFalse(try store.markFinishing(first, now: 110))
        XCTAssertFalse(try store.fail(first, error: "stale", crashed: false, retryAt: nil, movedTo: nil, now: 110))
        let job = try XCTUnwrap(try store.job(id: first.job.id))
        XCTAssertEqual(job.state, .running)
        XCTAssertEqual(job.owner, "two")
        XCTAssertEqual(job.framesDone, 0)
        XCTAssertTrue(try store.markFinishing(second, now: 111))
        try store.finish(id: job.id, now: 112)
        XCTAssertEqual(try store.job(id: job.id)?.state, .done)
    }

    func testTransientFailureWaitsItsBackoffAndPermanentFailureStays() throws {
        let store = try SQLiteJobStore(path: path)
        _ = try store.enqueue(source: "a.mov", size: 10, modified: 1, settings: [])
        let claim = try XCTUnwrap(try store.claim(owner: "w", lease: 30, now: 100))
        XCTAssertTrue(try store.fail(claim, error: "disk full", crashed: false, retryAt: 160, movedTo: nil, now: 101))
        XCTAssertNil(try store.claim(owner: "w", lease: 30, now: 150), "claimed before its retry time")
        let again = try XCTUnwrap(try store.claim(owner: "w", lease: 30, now: 161))
        XCTAssertEqual(again.job.attempts, 2)
        XCTAssertTrue(try store.fail(again, error: "damaged", crashed: true, retryAt: nil, movedTo: "Failed/a.mov", now: 162))
        let failed = try XCTUnwrap(try store.job(id: again.job.id))
        XCTAssertEqual(failed.state, .failed)
        XCTAssertEqual(failed.crashes, 1)
        XCTAssertEqual(failed.movedTo, "Failed/a.mov")
        XCTAssertNil(try store.claim(owner: "w", lease: 30, now: 1000))
        XCTAssertTrue(try store.requeueFailed(id: failed.id, source: "a.mov", size: 10, modified: 2, now: 1001))
        XCTAssertEqual(try store.job(id: failed.id)?.state, .queued)
        XCTAssertEqual(try store.job(id: failed.id)?.attempts, 0)
    }

    func testEnqueueSkipsActiveAndCancelledCopiesOfTheSameFile() throws {
        let store = try SQLiteJobStore(path: path)
        XCTAssertNotNil(try store.enqueue(source: "a.mov", size: 10, modified: 1, settings: []))
        XCTAssertNil(try store.enqueue(source: "a.mov", size: 10, modified: 1, settings: []), "queued twice")
        XCTAssertEqual(try store.cancel(sources: ["a.mov"], now: 5), 1)
        XCTAssertNil(try store.enqueue(source: "a.mov", size: 10, modified: 1, settings: []), "a cancelled file came back")
        XCTAssertNotNil(try store.enqueue(source: "a.mov", size: 11, modified: 2, settings: []), "a new file of the same name")
    }

    func testPauseStopsClaimsAndSettingsPersistAcrossConnections() throws {
        let store = try SQLiteJobStore(path: path)
        _ = try store.enqueue(source: "a.mov", size: 10, modified: 1, settings: [])
        try store.setPaused(true)
        XCTAssertNil(try store.claim(owner: "w", lease: 30, now: 1))
        let other = try SQLiteJobStore(path: path)
        XCTAssertTrue(try other.isPaused())
        try other.setPaused(false)
        XCTAssertNotNil(try store.claim(owner: "w", lease: 30, now: 2))
        try store.setSetting("options", "[\"--width\",\"640\"]")
        XCTAssertEqual(try SQLiteJobStore(path: path).setting("options"), "[\"--width\",\"640\"]")
    }

    func testReleaseQueuesAgainWithoutCountingTheRun() throws {
        let store = try SQLiteJobStore(path: path)
        _ = try store.enqueue(source: "a.mov", size: 10, modified: 1, settings: [])
        let claim = try XCTUnwrap(try store.claim(owner: "w", lease: 30, now: 1))
        try store.release(claim, now: 2)
        let job = try XCTUnwrap(try store.job(id: claim.job.id))
        XCTAssertEqual(job.state, .queued)
        XCTAssertEqual(job.attempts, 0)
    }

    /// Higher priority is claimed first, ties in arrival order; only open jobs take a priority;
    /// a store written by an earlier schema (no priority column) gains it, its jobs kept.
    func testPriorityOrdersClaimsAndOldStoresGainIt() throws {
        // A schema-1 store as the previous release wrote it.
        do {
            let old = try SQLiteDatabase(path: path)
            try old.execute("""
                CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
                CREATE TABLE jobs (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    source TEXT NOT NULL, size INTEGER NOT NULL, modified REAL NOT NULL,
                    state TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, crashes INTEGER NOT NULL DEFAULT 0,
                    settings TEXT NOT NULL, output TEXT, error TEXT,
                    frames_done INTEGER NOT NULL DEFAULT 0, frames_total INTEGER, fps REAL,
                    owner TEXT, token TEXT, lease_expires REAL, not_before REAL,
                    created REAL NOT NULL, updated REAL NOT NULL, started REAL, moved_to TEXT,
                    out_width INTEGER, out_height INTEGER);
                INSERT INTO meta VALUES ('schema', '1');
                INSERT INTO jobs (source, size, modified, state, settings, created, updated) VALUES ('old.mov', 1, 1, 'queued', '[]', 1, 1);
                """)
        }
        let store = try SQLiteJobStore(path: path)
        XCTAssertEqual(try store.setting("schema"), "4")
        XCTAssertEqual(try store.list().map(\.source), ["old.mov"])
        // Schema 4: notes, each once.
        let old = try XCTUnwrap(store.list().first)
        XCTAssertEqual(old.notes, [])
        for note in ["captions dropped", "a picture filled in", "captions dropped"] { try store.addNote(id: old.id, note) }
        XCTAssertEqual(try store.job(id: old.id)?.notes, ["captions dropped", "a picture filled in"])
        // A job run again (retried, or its file changed) starts with no notes.
        let claim = try XCTUnwrap(try store.claim(owner: "t", lease: 30, now: 2))
        XCTAssertEqual(claim.job.id, old.id)
        XCTAssertTrue(try store.fail(claim, error: "x", crashed: false, retryAt: nil, movedTo: nil, now: 3))
        XCTAssertEqual(try store.retry(sources: ["old.mov"], now: 4), 1)
        XCTAssertEqual(try store.job(id: old.id)?.notes, [])
        let a = try XCTUnwrap(store.enqueue(source: "a.mov", size: 1, modified: 1, settings: []))
        let b = try XCTUnwrap(store.enqueue(source: "b.mov", size: 1, modified: 1, settings: []))
        XCTAssertTrue(try store.setPriority(id: b.id, priority: 3))
        XCTAssertEqual(try store.job(id: b.id)?.priority, 3)
        let now = Date().timeIntervalSince1970
        XCTAssertEqual(try store.claim(owner: "t", lease: 30, now: now)?.job.source, "b.mov")
        XCTAssertEqual(try store.claim(owner: "t", lease: 30, now: now)?.job.source, "old.mov")
        XCTAssertEqual(try store.claim(owner: "t", lease: 30, now: now)?.job.id, a.id)
        // The running job can still be raised; a finished one cannot.
        XCTAssertTrue(try store.setPriority(id: a.id, priority: 1))
        try store.markFinishing(id: a.id, output: "Upscaled/a Upscaled.mov", now: now)
        XCTAssertEqual(try store.job(id: a.id)?.output, "Upscaled/a Upscaled.mov")
        try store.finish(id: a.id, now: now)
        XCTAssertFalse(try store.setPriority(id: a.id, priority: 5))
        XCTAssertEqual(try store.job(id: a.id)?.priority, 1)
        // Lease rescues are counted for the dashboard's metrics.
        XCTAssertEqual(try store.rescues(), 0)
        XCTAssertEqual(try store.requeueExpired(now: now + 60), 2)
        XCTAssertEqual(try store.rescues(), 2)
    }
}
