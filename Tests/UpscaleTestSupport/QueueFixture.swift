import Foundation
import UpscaleQueue

/// A watched folder whose store holds a job in every state, made through the store's own
/// calls (as the watcher makes them), with the files present so Retry can find them.
public struct QueueFixture {
    public let folder: WatchFolder
    public let store: SQLiteJobStore
    /// File name → job id.
    public let ids: [String: Int64]
    public let now: Double

    public static let hostile = "<img src=x onerror=alert(1)>.mov"
    public static let failure = "decoding failed at frame 12: Invalid data found when processing input"

    /// In `parent` (default /tmp), with `extraQueued` more queued jobs (batch/clip-NNNNN.mov).
    public static func make(extraQueued: Int = 0, parent: String = "/tmp") throws -> QueueFixture {
        let root = URL(fileURLWithPath: parent).appendingPathComponent("upscale-dash-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let folder = WatchFolder(root: root)
        let store = try folder.openStore(create: true)
        let now = Date().timeIntervalSince1970
        var ids: [String: Int64] = [:]

        func add(_ name: String) throws -> Int64 {
            let path = folder.path(name)
            FileManager.default.createFile(atPath: path, contents: Data("not really a video: \(name)".utf8))
            let job = try store.enqueue(source: name, size: 10, modified: 1, settings: ["--width", "3840"])!
            ids[name] = job.id
            return job.id
        }
        func claim(_ name: String, at time: Double, owner: String = "render-box:4242") throws -> JobClaim {
            let id = try add(name)
            let claim = try store.claim(owner: owner, lease: 3600, now: time)!
            precondition(claim.job.id == id)
            return claim
        }
        // Two finished jobs, 3 h and 1 h ago, 240 frames in 200 s each.
        for (name, ago) in [("done-early.mov", 3 * 3600.0), ("done-late.mov", 3600.0)] {
            let c = try claim(name, at: now - ago)
            try store.setPlan(id: c.job.id, width: 3840, height: 2160, frames: 240)
            _ = try store.heartbeat(c, progress: JobProgress(framesDone: 240, framesTotal: 240, fps: 1.2), lease: 3600, now: now - ago + 200)
            _ = try store.markFinishing(c, now: now - ago + 200)
            try store.finish(id: c.job.id, now: now - ago + 200)
        }
        let failed = try claim("failed.mov", at: now - 1800)
        _ = try store.fail(failed, error: failure, crashed: false, retryAt: nil, movedTo: nil, now: now - 1700)
        try "job \(failed.job.id): failed.mov\nffmpeg: [h264] error while decoding MB 12 4\n\(failure)\n"
            .write(toFile: folder.logs + "/job-\(failed.job.id).log", atomically: true, encoding: .utf8)
        let waiting = try claim("waiting.mov", at: now - 60)
        try store.waitForSpace(waiting, reason: "Upscaled/ needs 20 GB, 3 GB free", until: now + 600, now: now - 60)
        let finishing = try claim("finishing.mov", at: now - 300)
        try store.setPlan(id: finishing.job.id, width: 3840, height: 2160, frames: 100)
        _ = try store.heartbeat(finishing, progress: JobProgress(framesDone: 100, framesTotal: 100, fps: 2), lease: 3600, now: now - 5)
        _ = try store.markFinishing(finishing, now: now - 5)
        let running = try claim("running.mov", at: now - 48)
        try store.setPlan(id: running.job.id, width: 3840, height: 2160, frames: 300)
        _ = try store.heartbeat(running, progress: JobProgress(framesDone: 120, framesTotal: 300, fps: 2.5), lease: 3600, now: now)
        _ = try add("cancelled.mov")
        _ = try store.cancel(sources: ["cancelled.mov"], now: now - 10)
        _ = try add(hostile)
        _ = try add("queued-a.mov")
        _ = try add("queued-b.mov")
        for i in 0..<extraQueued { _ = try add(String(format: "batch/clip-%05d.mov", i)) }
        return QueueFixture(folder: folder, store: store, ids: ids, now: now)
    }

    public func remove() {
        try? FileManager.default.removeItem(atPath: folder.root)
    }
}
