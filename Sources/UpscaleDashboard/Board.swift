import Foundation

/// What the dashboard shows of one queue, and the actions it offers. Two implementations: a
/// watch folder's SQLite store (`FolderBoard`) and the shared PostgreSQL queue (`FarmBoard`).
/// Calls are synchronous and made from one thread at a time; each action is the same store
/// call the `upscale queue …` command makes.
public protocol QueueBoard: AnyObject, Sendable {
    /// A description for the page's title line ("~/Inbox", "postgres://farm@db/upscale").
    var title: String { get }
    /// Everything the page and the metrics need, read now.
    func read(now: Double) throws -> BoardReading
    /// The job's log (or error text), at most `limit` bytes from its end; nil for an unknown job.
    func log(job: Int64, limit: Int) throws -> String?
    /// Each returns false when the job is in no state the action applies to.
    func retry(job: Int64) throws -> Bool
    func cancel(job: Int64) throws -> Bool
    func setPriority(job: Int64, priority: Int) throws -> Bool
    func setPaused(_ paused: Bool) throws
}

/// An action the board refused for a reason it names (answered 409 with that reason).
public struct BoardRefusal: Error {
    public let message: String
}

/// One read of a queue's store.
public struct BoardReading: Sendable {
    public var jobs: [BoardJob]
    public var workers: [BoardWorker]
    public var paused: Bool
    /// Seconds of work left, estimated from measured rates; nil when nothing was measured yet.
    public var secondsOfWorkLeft: Double?
    /// Open jobs not in `secondsOfWorkLeft`: not planned yet (see `QueueActions.unplanned`).
    public var unplannedJobs = 0
    /// Pieces of finished (or still running) work with when they ran, for the throughput chart.
    public var work: [WorkSpan]
    /// Finished chunks (or, for a folder, whole jobs) and their encode seconds, for the histogram.
    public var finishedChunks: [FinishedChunk]
    /// Units of work taken back from a worker that stopped answering, ever.
    public var rescues: Int
}

/// A job as the page and `/api/jobs` show it.
public struct BoardJob: Codable, Sendable, Equatable {
    public var id: Int64
    /// The file's name as shown (relative to the watched folder, or the input's last component).
    public var file: String
    public var input: String
    public var output: String?
    public var state: String
    /// 0…1, nil when the job's length is not known yet.
    public var progress: Double?
    public var framesDone: Int
    public var frames: Int?
    public var fps: Double?
    public var etaSeconds: Double?
    public var chunksDone: Int
    public var chunks: Int
    public var machines: [String]
    public var attempts: Int
    public var priority: Int
    public var error: String?
    public var created: Double
    public var finished: Double?
    /// What its output does not keep (captions, HDR10+ metadata), as the plain command says it.
    public var notes: [String] = []
}

/// A worker (a shared-queue worker slot, or a watcher's running job).
public struct BoardWorker: Codable, Sendable, Equatable {
    public var name: String
    public var host: String
    public var current: String?
    public var fps: Double?
    public var secondsAgo: Double
    /// Not heard from for longer than its heartbeat allows: likely stopped or cut off.
    public var stale: Bool
}

/// Frames encoded between two instants.
public struct WorkSpan: Sendable, Equatable {
    public var start: Double
    public var end: Double
    public var frames: Int
}

public struct FinishedChunk: Sendable, Hashable {
    public var key: String
    public var seconds: Double
}

extension BoardJob {
    static let openStates: Set<String> = ["queued", "running", "finishing", "waiting-for-space"]

    /// The page's order: work in progress, then what runs next (priority, then arrival), then
    /// what needs attention, then history (newest first). Compared as tuples.
    static func pageKey(_ job: BoardJob) -> PageKey {
        let newestFirst = { (rank: Int) in PageKey(rank: rank, first: -(job.finished ?? job.created), second: -Double(job.id)) }
        switch job.state {
        case "running", "finishing": return PageKey(rank: 0, first: 0, second: Double(job.id))
        case "queued", "waiting-for-space": return PageKey(rank: 1, first: -Double(job.priority), second: Double(job.id))
        case "failed": return newestFirst(2)
        case "cancelled": return newestFirst(3)
        default: return newestFirst(4)
        }
    }

    struct PageKey: Comparable {
        let rank: Int
        let first: Double
        let second: Double
        static func < (a: PageKey, b: PageKey) -> Bool { (a.rank, a.first, a.second) < (b.rank, b.first, b.second) }
    }
}
