import Foundation
import UpscaleQueue

/// A watched folder's queue (`.upscale/queue.sqlite`), read and steered as `upscale queue DIR` does.
public final class FolderBoard: QueueBoard, @unchecked Sendable {
    public let folder: WatchFolder
    private let store: SQLiteJobStore
    /// The watcher's running jobs heartbeat every second; one silent for longer is marked stale.
    static let staleAfter = 10.0

    public init(folder: WatchFolder) throws {
        self.folder = folder
        store = try folder.openStore(create: false)
    }

    public var title: String { folder.root }

    public func read(now: Double) throws -> BoardReading {
        let records = try store.listForDisplay()
        var jobs: [BoardJob] = []
        var workers: [BoardWorker] = []
        var work: [WorkSpan] = []
        var finished: [FinishedChunk] = []
        jobs.reserveCapacity(records.count)
        for record in records {
            let running = record.state == .running
            let total = record.framesTotal
            let done = record.state == .done ? (total ?? record.framesDone) : record.framesDone
            let progress: Double? = record.state == .done ? 1 : total.flatMap { $0 > 0 ? min(1, Double(done) / Double($0)) : nil }
            let finishedAt = [.done, .failed, .cancelled].contains(record.state) ? record.updated : nil
            jobs.append(BoardJob(
                id: record.id, file: record.source, input: record.source, output: record.output, state: record.state.rawValue,
                progress: progress, framesDone: done, frames: total, fps: running ? record.fps : nil,
                etaSeconds: QueueActions.runningETA(record), chunksDone: record.state == .done ? 1 : 0, chunks: 1,
                machines: running ? [Self.host(of: record.owner)] : [], attempts: record.attempts, priority: record.priority,
                error: record.error, created: record.created, finished: finishedAt, notes: record.notes))
            if running {
                let ago = max(0, now - record.updated)
                workers.append(BoardWorker(name: record.owner ?? "watcher", host: Self.host(of: record.owner), current: record.source,
                                           fps: record.fps, secondsAgo: ago, stale: ago > Self.staleAfter))
            }
            if let started = record.started, record.framesDone > 0, record.state == .done || running {
                work.append(WorkSpan(start: started, end: running ? now : record.updated, frames: record.framesDone))
                if record.state == .done {
                    finished.append(FinishedChunk(key: "\(record.id)@\(record.updated)", seconds: record.updated - started))
                }
            }
        }
        return BoardReading(jobs: jobs, workers: workers, paused: try store.isPaused(), secondsOfWorkLeft: QueueActions.queueETA(records),
                            unplannedJobs: QueueActions.unplanned(records), work: work, finishedChunks: finished, rescues: try store.rescues())
    }

    /// "host:pid" as the watcher names itself → "host".
    static func host(of owner: String?) -> String {
        guard let owner else { return "watcher" }
        return String(owner.split(separator: ":").first ?? Substring(owner))
    }

    public func log(job: Int64, limit: Int) throws -> String? {
        guard let record = try store.job(id: job) else { return nil }
        // The path comes from the job's number only; nothing from the request names a file.
        let path = folder.logs + "/job-\(record.id).log"
        var text = ""
        if let handle = FileHandle(forReadingAtPath: path) {
            defer { try? handle.close() }
            let size = (try? handle.seekToEnd()) ?? 0
            try? handle.seek(toOffset: size > UInt64(limit) ? size - UInt64(limit) : 0)
            text = String(decoding: (try? handle.readToEnd()) ?? Data(), as: UTF8.self)
        }
        if let error = record.error, !text.contains(error) { text += (text.isEmpty ? "" : "\n") + error }
        return text
    }

    public func retry(job: Int64) throws -> Bool {
        !(try QueueActions.retry(folder: folder, store: store, id: job)).isEmpty
    }

    public func cancel(job: Int64) throws -> Bool {
        guard let record = try store.job(id: job), record.state.isOpen else { return false }
        return try store.cancel(sources: [record.source], now: Date().timeIntervalSince1970) > 0
    }

    public func setPriority(job: Int64, priority: Int) throws -> Bool {
        try store.setPriority(id: job, priority: priority)
    }

    public func setPaused(_ paused: Bool) throws { try store.setPaused(paused) }
}
