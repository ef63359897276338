import Foundation

public enum JobState: String, Codable, Sendable, CaseIterable {
    case queued, running
    /// Not started: the output folder lacks the space the job may need; looked at again later.
    case waitingForSpace = "waiting-for-space"
    /// The child succeeded; the output is being checked and the original moved. A crash
    /// here is finished on restart from what the store says, never by guessing.
    case finishing
    case done, failed, cancelled

    /// Still to be done: a file with such a job is not queued again.
    public var isOpen: Bool { [.queued, .running, .finishing, .waitingForSpace].contains(self) }
}

/// One file's job as the store keeps it.
public struct JobRecord: Codable, Sendable, Equatable {
    public var id: Int64
    /// The input, relative to the watched folder.
    public var source: String
    public var size: Int64
    public var modified: Double
    public var state: JobState
    /// Runs started (a run ended by the watcher's own shutdown is not counted).
    public var attempts: Int
    /// Runs whose child process died from a signal.
    public var crashes: Int
    /// The encode options it was queued with, as command-line arguments.
    public var settings: [String]
    /// The final output path, relative to the folder, once chosen.
    public var output: String?
    public var error: String?
    public var framesDone: Int
    public var framesTotal: Int?
    public var fps: Double?
    public var owner: String?
    public var leaseExpires: Double?
    /// A queued job is not claimed before this time (retry backoff).
    public var notBefore: Double?
    public var created: Double
    public var updated: Double
    /// When the current (or last) run started.
    public var started: Double?
    /// The planned output picture size (known once the job is planned).
    public var outputWidth: Int?
    public var outputHeight: Int?
    /// Where a failed job's original was moved (Failed/…), for `queue retry` to bring it back.
    public var movedTo: String?
    /// Higher is claimed first (`queue priority`, the dashboard); ties in arrival order.
    public var priority: Int = 0
    /// What its runs noted (what the output does not keep, a damaged picture filled in…), as
    /// the plain command says it; each once.
    public var notes: [String] = []
}

/// Job notes as both queues (this store and the shared PostgreSQL one) keep them: a line each.
public enum JobNotes {
    /// `note` as stored: one line, ended.
    public static func line(_ note: String) -> String { note.replacingOccurrences(of: "\n", with: " ") + "\n" }
    /// The notes of a stored text.
    public static func list(_ stored: String) -> [String] { stored.split(separator: "\n").map(String.init) }
}

/// A running job and the token every write about it must carry. A worker whose lease
/// expired (and whose job was taken over) finds its token gone: its writes are refused.
public struct JobClaim: Sendable {
    public let job: JobRecord
    public let token: String
}

public struct JobProgress: Sendable {
    public var framesDone: Int
    public var framesTotal: Int?
    public var fps: Double?
    public init(framesDone: Int, framesTotal: Int?, fps: Double?) {
        self.framesDone = framesDone
        self.framesTotal = framesTotal
        self.fps = fps
    }
}

/// Where jobs live: the folder's SQLite file, or (later) a shared PostgreSQL queue.
/// Every state change is one atomic write; a claim is exclusive and carries a lease.
public protocol JobStore: AnyObject {
    /// Queues `source` unless a job for the same file (path, size, time) is queued, running,
    /// finishing, or was cancelled. Returns the new job, or nil.
    func enqueue(source: String, size: Int64, modified: Double, settings: [String]) throws -> JobRecord?
    /// Takes the oldest claimable queued job (none while the queue is paused).
    func claim(owner: String, lease: Double, now: Double) throws -> JobClaim?
    /// Progress and a renewed lease; false when the claim is no longer valid (cancelled, or taken over).
    func heartbeat(_ claim: JobClaim, progress: JobProgress, lease: Double, now: Double) throws -> Bool
    /// Whether the claim still holds a running or finishing job (not cancelled, not taken over).
    func holds(_ claim: JobClaim) throws -> Bool
    /// Records what planning found: the output picture size and the frame count (for the ETA).
    func setPlan(id: Int64, width: Int, height: Int, frames: Int?) throws
    /// Records the chosen output path.
    func setOutput(_ claim: JobClaim, output: String) throws -> Bool
    /// The child succeeded: state `finishing` until `finish` after the output is checked.
    func markFinishing(_ claim: JobClaim, now: Double) throws -> Bool
    /// A job whose watcher died after its child succeeded (`output` exists): check and finish it.
    func markFinishing(id: Int64, output: String, now: Double) throws
    func finish(id: Int64, now: Double) throws
    /// A failure: `retryAt` queues it again (transient), nil fails it for good.
    func fail(_ claim: JobClaim, error: String, crashed: Bool, retryAt: Double?, movedTo: String?, now: Double) throws -> Bool
    /// The job's original could not be moved out of the folder (to `Originals/` or `Failed/`):
    /// it stays, and is not queued again while its size and modification time are unchanged.
    func markStayed(id: Int64) throws
    /// Adds a note of a job's run (`JobRecord.notes`), unless it has it already.
    func addNote(id: Int64, _ note: String) throws
    /// The file changed while queued or running (still being written), or looks unfinished (an
    /// .mp4/.mov without its index yet): queued again at `retryAt` with `reason` as its error,
    /// judged from then on by its size and modification time as they are now, the run not
    /// counted as an attempt (a file still growing used them up before it was whole).
    func resettle(_ claim: JobClaim, size: Int64, modified: Double, reason: String, retryAt: Double, now: Double) throws -> Bool
    /// A failed job queued again from its original's new place (`queue retry`).
    func requeueFailed(id: Int64, source: String, size: Int64, modified: Double, now: Double) throws -> Bool
    /// Not started for lack of space: waits until `until` without counting the run.
    func waitForSpace(_ claim: JobClaim, reason: String, until: Double, now: Double) throws
    /// Back to queued without counting the run (the watcher is shutting down).
    func release(_ claim: JobClaim, now: Double) throws
    /// Running jobs whose lease ran out go back to the queue, but for those in `sparing`.
    func requeueExpired(now: Double, sparing: Set<Int64>) throws -> Int
    /// Every running (and, with `finishing`, finishing) job goes back to the queue: the caller
    /// holds the folder's lock, so their watcher is gone.
    func requeueAbandoned(id: Int64?, now: Double) throws -> Int
    func job(id: Int64) throws -> JobRecord?
    func list() throws -> [JobRecord]
    /// The jobs in `state`, by id (an index lookup, cheap to ask often).
    func jobs(in state: JobState) throws -> [JobRecord]
    /// Failed (and cancelled) jobs of these sources, or all when empty, are queued again.
    func retry(sources: [String], now: Double) throws -> Int
    /// Queued and running jobs of these sources become cancelled.
    func cancel(sources: [String], now: Double) throws -> Int
    func setPaused(_ paused: Bool) throws
    /// Sets an open job's priority; false when no open job has this id.
    func setPriority(id: Int64, priority: Int) throws -> Bool
    func isPaused() throws -> Bool
    func setting(_ key: String) throws -> String?
    func setSetting(_ key: String, _ value: String) throws
}

extension JobStore {
    /// Every running job whose lease ran out goes back to the queue.
    public func requeueExpired(now: Double) throws -> Int { try requeueExpired(now: now, sparing: []) }
}
