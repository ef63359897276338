import Foundation
import Logging
import NIOCore
import NIOSSL
import PostgresNIO
import UpscaleMedia
import UpscaleQueue

/// A task of a job in the shared queue: one chunk to encode, or (index -1) the join.
public struct FarmTask: Sendable, Equatable {
    public let jobID: Int64
    public let index: Int
    public let range: ChunkRange
    /// Every write about this task must carry it; a worker whose lease ran out finds it gone.
    public let token: String
    public let attempts: Int
    public var isJoin: Bool { index < 0 }
}

/// A file's size and modification time, to tell whether it is still the file that was submitted.
public struct InputIdentity: Sendable, Codable, Equatable {
    public let size: Int64
    public let modified: Double

    public init(size: Int64, modified: Double) {
        self.size = size
        self.modified = modified
    }

    /// `path` as it is now; nil when it is not there.
    public static func of(_ path: String) -> InputIdentity? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return InputIdentity(size: Int64(info.st_size), modified: info.modificationTime)
    }

    /// The same file: the same size, and times within 2 s (SMB and FAT shares keep them coarser).
    public func matches(_ other: InputIdentity) -> Bool {
        size == other.size && abs(modified - other.modified) <= 2
    }
}

/// A job as the queue shows it.
public struct FarmJob: Sendable, Codable, Equatable {
    public let id: Int64
    public let input: String
    public let output: String
    public let settings: [String]
    public let state: String
    public let priority: Int
    public let error: String?
    public let chunks: Int
    public let frames: Int
    public let chunksDone: Int
    public let chunksRunning: Int
    public let framesDone: Int
    /// Hosts working on it now.
    public let machines: [String]
    /// Frames per second over its finished chunks (their encode time), nil before the first.
    public let fps: Double?
    /// Frames of its longest chunk (every chunk's keyframe interval).
    public let longestChunk: Int
    /// Most runs any of its chunks took (1 when nothing was retried; 0 before any ran).
    public var attempts: Int = 0
    /// Submitted and finished (seconds since 1970).
    public var created: Double = 0
    public var finished: Double?
    /// Frames per second of its chunks running now, summed (their last heartbeats).
    public var runningFPS: Double?
    /// The input as submitted (nil for jobs of an older upscale).
    public var identity: InputIdentity?
    /// What its output does not keep, one note each (captions, HDR10+ metadata), as the
    /// plain command says it; the workers whose chunks found it add them.
    public var notes: [String] = []
    /// For HEVC `auto`: the encoder its first finished chunk was made with, which makes the rest.
    public var encoder: String?

    /// The error in one line: what failed and the last attempt's reason ("chunk 4 failed 3
    /// times: '…' has undecodable video at …"); the first line alone named no reason.
    public var errorSummary: String? {
        guard let error else { return nil }
        let lines = error.split(separator: "\n").map(String.init)
        guard let head = lines.first else { return nil }
        guard let last = lines.dropFirst().last else { return head }
        // "attempt 3 on 1a2b3c4d: reason" → "reason"
        let reason = last.hasPrefix("attempt ") ? last.split(separator: ":", maxSplits: 1).last.map { $0.trimmingCharacters(in: .whitespaces) } ?? last : last
        return head.hasSuffix(":") ? head + " " + reason : head + ": " + reason
    }

    /// Seconds of work left at one worker's measured rate: its own finished chunks' rate, else
    /// `overall`. Nil when closed or nothing was measured.
    public func secondsOfWork(overall: Double?) -> Double? {
        guard ["queued", "running"].contains(state), let rate = fps ?? overall, rate > 0 else { return nil }
        return Double(frames - framesDone) / rate
    }

    /// Seconds until done: the work left spread over the chunks running now.
    public func eta(overall: Double?) -> Double? {
        secondsOfWork(overall: overall).map { $0 / Double(max(1, chunksRunning)) }
    }

    /// The mean of the jobs' measured rates (for jobs that have none yet).
    public static func overallRate(_ jobs: [FarmJob]) -> Double? {
        let rates = jobs.compactMap(\.fps)
        return rates.isEmpty ? nil : rates.reduce(0, +) / Double(rates.count)
    }
}

/// A finished chunk (or join): when it ran and what it encoded, for throughput over time.
public struct ChunkRun: Sendable, Equatable {
    public let job: Int64
    public let index: Int
    public let frames: Int
    public let started: Double
    public let finished: Double
    /// Its own encode time as the worker measured it.
    public let seconds: Double
}

/// The shared job queue in PostgreSQL (vapor/postgres-nio). Every call is one statement or
/// one transaction on this object's connection; a lost connection (the server restarted,
/// the network dropped) is reopened and the call repeated for up to `reconnectFor` seconds.
///
/// Claims take the oldest queued task of the highest-priority job with `FOR UPDATE SKIP
/// LOCKED`, so concurrent workers never get the same one, and give it a lease and a fresh
/// token. Heartbeats renew the lease; a rescuer requeues tasks whose lease ran out. Every
/// write about a task matches its token: a worker that was stopped past its lease (and whose
/// task went to another) has its writes refused. Completions lock the job row, so exactly one
/// of two chunks finishing at the same instant sees that none is left and creates the join.
public final class PostgresQueue: @unchecked Sendable {
    public static let schemaVersion = 4
    /// Workers are told about new work on this channel (empty payload), and about cancelled
    /// jobs (`cancelPayload`).
    public static let channel = "upscale_work"
    /// The payload of the notice `cancel` sends: workers check their running tasks at once
    /// instead of at their next heartbeat (up to a quarter of the lease, 15 s, later).
    public static let cancelPayload = "cancel"

    public let address: QueueAddress
    public var reconnectFor: Double = 300
    private let logger: Logger
    private let lock = NSLock()
    private var connection: PostgresConnection?
    private var listener: ((String) -> Void)?
    private var everConnected = false
    /// The worker name this queue's connection holds (`holdWorkerName`), taken again on each
    /// new connection: the lock ends with the session it was taken in.
    private var heldName: String?
    /// The server session (backend process id) that holds `heldName`.
    private var nameSession: Int32?
    /// Connections let go of by `dropConnectionAsACutWould`, kept open.
    private var cutConnections: [PostgresConnection] = []
    private static let ids = IDCounter()

    public init(address: QueueAddress, logger: Logger = Logger(label: "upscale.queue")) throws {
        self.address = address
        var quiet = logger
        quiet.logLevel = .critical
        self.logger = quiet
        try migrate()
    }

    deinit {
        for c in cutConnections + (connection.map { [$0] } ?? []) where !c.isClosed { _ = try? bounded(c.close()) }
    }

    // MARK: Connection

    private func connect() throws -> PostgresConnection {
        if let connection, !connection.isClosed { return connection }
        let tls: PostgresConnection.Configuration.TLS
        if address.requireTLS {
            var config = TLSConfiguration.makeClientConfiguration()
            if !address.verifyCertificate { config.certificateVerification = .none }
            tls = .require(try NIOSSLContext(configuration: config))
        } else {
            tls = .disable
        }
        let config = PostgresConnection.Configuration(host: address.host, port: address.port, username: address.user,
                                                      password: address.password, database: address.database, tls: tls)
        let made = try bounded(PostgresConnection.connect(on: PostgresConnection.defaultEventLoopGroup.any(), configuration: config,
                                                          id: Self.ids.next(), logger: logger))
        everConnected = true
        if let heldName {
            do {
                try takeNameAgain(heldName, on: made)
            } catch {
                _ = try? bounded(made.close())
                throw error
            }
        }
        connection = made
        if let listener {
            made.addListener(channel: Self.channel) { _, notice in listener(notice.payload) }
            _ = try bounded(made.query("LISTEN \(unescaped: Self.channel)", logger: logger))
        }
        return made
    }

    /// Takes the worker name again on a new connection. The server may not have noticed the
    /// old connection is gone (after a network cut it keeps the session, and its lock, until
    /// TCP keepalive gives up: up to two hours), so a name held by this queue's own earlier
    /// session is taken from it. One another worker took meanwhile stops this one rather than
    /// run beside it under one name (they showed as one row, and the first to stop took the
    /// other's slots off the list).
    private func takeNameAgain(_ name: String, on made: PostgresConnection) throws {
        var (taken, session) = try tryName(name, on: made)
        if !taken, let earlier = nameSession {
            let ended = try bounded(made.query("""
                SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND classid = 74156 AND objsubid = 2
                AND objid::bigint = (hashtext(\(name))::bigint & 4294967295) AND pid = \(earlier)
                """, logger: logger)).rows.first != nil
            // The ended session lets go of its locks as it exits.
            for _ in 0..<50 where ended && !taken {
                Thread.sleep(forTimeInterval: 0.2)
                (taken, session) = try tryName(name, on: made)
            }
        }
        guard taken else {
            throw FarmError("while this worker was cut off from the queue, another worker took its name '\(name)'; this one stops (give one of them another --name)",
                            nameTaken: true)
        }
        nameSession = session
    }

    /// Tries to take the worker name `name` on `c`: whether it did, and the server session
    /// (backend process id) that asked.
    private func tryName(_ name: String, on c: PostgresConnection) throws -> (Bool, Int32) {
        try bounded(c.query("SELECT pg_try_advisory_lock(74156, hashtext(\(name))), pg_backend_pid()", logger: logger))
            .rows.first!.decode((Bool, Int32).self)
    }

    /// For tests: lets go of the connection without closing it, as a network cut does (the
    /// server keeps its session until it notices); the next call connects again.
    public func dropConnectionAsACutWould() {
        lock.withLock {
            if let connection { cutConnections.append(connection) }
            connection = nil
        }
    }

    /// Runs `body` on the connection, reconnecting and repeating it after connection failures.
    func with<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        lock.lock()
        defer { lock.unlock() }
        // Reconnecting is for a server lost mid-run; a queue that was never reached fails at once.
        let deadline = Date().addingTimeInterval(everConnected ? reconnectFor : 0)
        var delay = 0.2
        while true {
            do {
                return try body(try connect())
            } catch {
                guard Self.isConnectionProblem(error), Date() < deadline else { throw Self.explain(error, address) }
                if let lost = connection { _ = try? bounded(lost.close()) }
                connection = nil
                Thread.sleep(forTimeInterval: delay)
                delay = min(delay * 2, 5)
            }
        }
    }

    /// One transaction; a failure inside rolls it back (and a lost connection repeats it whole).
    func transaction<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        try with { c in
            // Read committed whatever the server's default: the claims and the submit's check
            // under its lock rely on each statement seeing what committed before it.
            _ = try bounded(c.query("BEGIN ISOLATION LEVEL READ COMMITTED", logger: logger))
            do {
                let value = try body(c)
                _ = try c.query("COMMIT", logger: logger).wait()
                return value
            } catch {
                // A lost connection is asked nothing more: the server ends its transaction with
                // it, and a ROLLBACK sent while the connection closed was never answered (a
                // worker hung for good after a server restart, seen once in the suite).
                if !Self.isConnectionProblem(error) && !c.isClosed {
                    _ = try? bounded(c.query("ROLLBACK", logger: logger))
                }
                throw error
            }
        }
    }

    @discardableResult
    func run(_ c: PostgresConnection, _ query: PostgresQuery) throws -> PostgresQueryResult {
        try c.query(query, logger: logger).wait()
    }

    /// The longest a connection's opening, closing, its LISTEN, a BEGIN or a ROLLBACK is waited
    /// for: postgres-nio 1.33 can leave a request on a connection that is closing unanswered
    /// for good. Past it the connection is taken as lost, closed and made again (and the call
    /// repeated, as for any lost connection). Statements that do the queue's work are waited
    /// for as long as they take: one may wait on a lock, and a COMMIT past a limit may have
    /// committed, so repeating it would not be safe.
    static let answerTimeout = TimeAmount.seconds(30)

    /// `future`'s value, or a lost-connection error once `answerTimeout` has passed.
    private func bounded<T: Sendable>(_ future: EventLoopFuture<T>) throws -> T {
        let answer = future.eventLoop.makePromise(of: T.self)
        future.cascade(to: answer)
        let timer = future.eventLoop.scheduleTask(in: Self.answerTimeout) { answer.fail(ChannelError.ioOnClosedChannel) }
        defer { timer.cancel() }
        return try answer.futureResult.wait()
    }

    /// A TLS failure (the server's certificate refused, no TLS on the server): not retried.
    static func tlsProblem(_ error: Error) -> Error? {
        let inner = (error as? PSQLError)?.underlying ?? error
        if inner is NIOSSLError || inner is BoringSSLError || inner is NIOSSLExtraError { return inner }
        if let e = error as? PSQLError, e.code == .sslUnsupported { return e }
        return nil
    }

    static func isConnectionProblem(_ error: Error) -> Bool {
        if tlsProblem(error) != nil { return false }
        if let e = error as? PSQLError {
            switch e.code {
            case .connectionError, .serverClosedConnection, .clientClosedConnection, .uncleanShutdown:
                return true
            case .server:
                // 57P01 admin_shutdown, 57P02 crash_shutdown, 57P03 cannot_connect_now (starting up)
                let state = e.serverInfo?[.sqlState] ?? ""
                return state.hasPrefix("57P") || state.hasPrefix("08")
            default:
                return false
            }
        }
        return error is ChannelError || error is IOError || error is NIOConnectionError
    }

    static func explain(_ error: Error, _ address: QueueAddress) -> Error {
        if let tls = tlsProblem(error) {
            if (tls as? PSQLError)?.code == .sslUnsupported {
                return FarmError("the queue at \(address) does not accept TLS connections; enable ssl on the server or leave sslmode out")
            }
            return FarmError("TLS with the queue at \(address) failed (\(tls)); with sslmode=verify-full the server's certificate must be signed by a CA this machine trusts and name the host — sslmode=require encrypts without checking it")
        }
        if let e = error as? PSQLError {
            if let message = e.serverInfo?[.message] { return FarmError("the queue at \(address) says: \(message)") }
            if isConnectionProblem(e) { return FarmError("cannot reach the queue at \(address); is PostgreSQL running there and reachable from this machine?") }
            if e.code == .authMechanismRequiresPassword {
                return FarmError("the queue at \(address) asks for a password; put it in PGPASSWORD or ~/.pgpass (host:port:database:user:password, mode 0600)")
            }
            return FarmError("the queue at \(address) failed: \(String(reflecting: e.code))")
        }
        if isConnectionProblem(error) { return FarmError("cannot reach the queue at \(address): \(error); is PostgreSQL running there and reachable from this machine?") }
        return error
    }

    /// `wake` is called with the payload when another process announces new work or a
    /// cancel (LISTEN/NOTIFY); kept across reconnects.
    public func listen(_ wake: @escaping @Sendable (_ payload: String) -> Void) throws {
        try with { c in
            listener = wake
            c.addListener(channel: Self.channel) { _, notice in wake(notice.payload) }
            try run(c, "LISTEN \(unescaped: Self.channel)")
        }
    }

    // MARK: Schema

    private func migrate() throws {
        try transaction { c in
            // One migrator at a time when several workers start together.
            try run(c, "SELECT pg_advisory_xact_lock(74155)")
            try run(c, """
                CREATE TABLE IF NOT EXISTS upscale_meta (key text PRIMARY KEY, value text NOT NULL)
                """)
            let version = try run(c, "SELECT value FROM upscale_meta WHERE key = 'schema'").rows.first
                .flatMap { try? $0.decode(String.self) }.flatMap(Int.init) ?? 0
            if version > Self.schemaVersion {
                throw FarmError("the queue at \(address) was set up by a newer upscale (schema \(version)); update upscale on this machine")
            }
            if version < 1 {
                try run(c, """
                    CREATE TABLE upscale_jobs (
                        id bigserial PRIMARY KEY, input text NOT NULL, output text NOT NULL, settings text NOT NULL,
                        state text NOT NULL DEFAULT 'queued', priority int NOT NULL DEFAULT 0, error text,
                        chunks int NOT NULL, frames int NOT NULL, submitted_by text NOT NULL,
                        created timestamptz NOT NULL DEFAULT now(), updated timestamptz NOT NULL DEFAULT now(),
                        finished timestamptz)
                    """)
                try run(c, """
                    CREATE TABLE upscale_tasks (
                        job_id bigint NOT NULL REFERENCES upscale_jobs(id) ON DELETE CASCADE, idx int NOT NULL,
                        seek bigint, start_pts bigint, end_pts bigint, frames int NOT NULL,
                        state text NOT NULL DEFAULT 'queued', attempts int NOT NULL DEFAULT 0,
                        owner text, token uuid, lease_expires timestamptz, checksum bigint,
                        frames_done int NOT NULL DEFAULT 0, fps real, errors text NOT NULL DEFAULT '',
                        started timestamptz, finished timestamptz, seconds real,
                        PRIMARY KEY (job_id, idx))
                    """)
                try run(c, "CREATE INDEX upscale_tasks_queued ON upscale_tasks (state, job_id, idx)")
                try run(c, """
                    CREATE TABLE upscale_workers (
                        name text PRIMARY KEY, seen timestamptz NOT NULL, fps real, current text)
                    """)
                try run(c, "INSERT INTO upscale_meta (key, value) VALUES ('schema', '1') ON CONFLICT (key) DO UPDATE SET value = '1'")
            }
            if version < 2 {
                // The input as submitted (size, modification time): a worker that finds it
                // otherwise fails the job instead of joining chunks of two versions of the file.
                try run(c, "ALTER TABLE upscale_jobs ADD COLUMN IF NOT EXISTS input_size bigint, ADD COLUMN IF NOT EXISTS input_mtime float8")
                try run(c, "INSERT INTO upscale_meta (key, value) VALUES ('schema', '2') ON CONFLICT (key) DO UPDATE SET value = '2'")
            }
            if version < 3 {
                // What the output does not keep (captions, HDR10+ metadata), one line each, said
                // by the workers whose chunks found it: the plain command prints these notes.
                try run(c, "ALTER TABLE upscale_jobs ADD COLUMN IF NOT EXISTS notes text NOT NULL DEFAULT ''")
                try run(c, "INSERT INTO upscale_meta (key, value) VALUES ('schema', '3') ON CONFLICT (key) DO UPDATE SET value = '3'")
            }
            if version < 4 {
                // The HEVC encoder an `auto` job's first finished chunk was made with: every other
                // chunk is made with it too (the join refuses chunks of two encoders).
                try run(c, "ALTER TABLE upscale_jobs ADD COLUMN IF NOT EXISTS encoder text")
                try run(c, "INSERT INTO upscale_meta (key, value) VALUES ('schema', '4') ON CONFLICT (key) DO UPDATE SET value = '4'")
            }
        }
    }

    // MARK: Jobs

    /// Queues a job and its chunks in one transaction and wakes idle workers.
    /// `identity`: the input's size and modification time as the submitting machine sees it.
    public func submit(input: String, output: String, settings: [String], plan: ChunkPlan, priority: Int, host: String,
                       identity: InputIdentity? = nil) throws -> Int64 {
        let encoded = String(decoding: try JSONEncoder().encode(settings), as: UTF8.self)
        return try transaction { c in
            // The check for an open job writing this output and the insert are one step across
            // machines: two submits of one output at the same moment both passed the check.
            try run(c, "SELECT pg_advisory_xact_lock(\(Self.submitLock), hashtext(\(output)))")
            if let open = try run(c, "SELECT id FROM upscale_jobs WHERE output = \(output) AND state IN ('queued', 'running') ORDER BY id LIMIT 1").rows.first {
                throw OutputTaken(job: try open.decode(Int64.self))
            }
            let row = try run(c, """
                INSERT INTO upscale_jobs (input, output, settings, priority, chunks, frames, submitted_by, input_size, input_mtime)
                VALUES (\(input), \(output), \(encoded), \(priority), \(plan.chunks.count), \(plan.frames), \(host),
                        \(identity?.size), \(identity?.modified)) RETURNING id
                """).rows.first!
            let id = try row.decode(Int64.self)
            for chunk in plan.chunks {
                try run(c, """
                    INSERT INTO upscale_tasks (job_id, idx, seek, start_pts, end_pts, frames)
                    VALUES (\(id), \(chunk.index), \(chunk.seek), \(chunk.start), \(chunk.end), \(chunk.frames))
                    """)
            }
            try run(c, "NOTIFY \(unescaped: Self.channel)")
            return id
        }
    }

    /// What `submit` throws when an open job already writes that output.
    public struct OutputTaken: Error, Equatable {
        public let job: Int64
        public init(job: Int64) { self.job = job }
    }

    /// First key of the advisory lock `submit` takes on an output (the second is its hash).
    static let submitLock: Int32 = 0x7570_7363

    /// Open jobs (queued or running) that write `output`.
    public func openJobs(writing output: String) throws -> [Int64] {
        try with { c in
            try run(c, "SELECT id FROM upscale_jobs WHERE output = \(output) AND state IN ('queued', 'running') ORDER BY id")
                .rows.map { try $0.decode(Int64.self) }
        }
    }

    /// The oldest queued task of the highest-priority open job, now running with a lease. A
    /// join only once every chunk of its job is done (a chunk queued again at the join waited
    /// behind the join, which failed on it until the job failed).
    /// `excluding`: jobs this worker cannot see the files of.
    public func claim(owner: String, lease: Double, excluding excluded: [Int64] = []) throws -> FarmTask? {
        try transaction { c in
            if try paused(c) { return nil }
            let rows = try run(c, """
                UPDATE upscale_tasks t SET state = 'running', attempts = t.attempts + 1, owner = \(owner),
                    token = gen_random_uuid(), lease_expires = now() + make_interval(secs => \(lease)),
                    started = now(), frames_done = 0
                FROM (SELECT t2.job_id, t2.idx FROM upscale_tasks t2 JOIN upscale_jobs j ON j.id = t2.job_id
                      WHERE t2.state = 'queued' AND j.state IN ('queued', 'running') AND j.id <> ALL(\(excluded))
                        AND (t2.idx >= 0 OR NOT EXISTS (SELECT 1 FROM upscale_tasks t3
                                                         WHERE t3.job_id = t2.job_id AND t3.idx >= 0 AND t3.state <> 'done'))
                      ORDER BY j.priority DESC, j.id, t2.idx LIMIT 1 FOR UPDATE OF t2 SKIP LOCKED) pick
                WHERE t.job_id = pick.job_id AND t.idx = pick.idx
                RETURNING t.job_id, t.idx, t.seek, t.start_pts, t.end_pts, t.frames, t.token::text, t.attempts
                """).rows
            guard let row = rows.first else { return nil }
            let (job, idx, seek, start, end, frames, token, attempts) =
                try row.decode((Int64, Int, Int64?, Int64?, Int64?, Int, String, Int).self)
            try run(c, "UPDATE upscale_jobs SET state = 'running', updated = now() WHERE id = \(job) AND state = 'queued'")
            return FarmTask(jobID: job, index: idx, range: ChunkRange(index: idx, seek: seek, start: start, end: end, frames: frames),
                            token: token, attempts: attempts)
        }
    }

    /// Renews the lease with progress; false when the task is no longer this claim's
    /// (lease expired and rescued, job cancelled): the worker must stop and discard its work.
    public func heartbeat(_ task: FarmTask, lease: Double, framesDone: Int, fps: Double?) throws -> Bool {
        try with { c in
            try run(c, """
                UPDATE upscale_tasks SET lease_expires = now() + make_interval(secs => \(lease)),
                    frames_done = \(framesDone), fps = \(fps)
                WHERE job_id = \(task.jobID) AND idx = \(task.index) AND token = \(task.token)::uuid AND state = 'running'
                """).metadata.rows == 1
        }
    }

    public enum Completion: Equatable, Sendable {
        /// Done; `joinQueued` when it was the job's last chunk (exactly one completion sees that).
        case done(joinQueued: Bool)
        /// The claim was no longer valid: nothing was written.
        case stale
        /// Made with another encoder than the job's other chunks (`FarmJob.encoder`, named
        /// here): queued again, its attempt not counted.
        case otherEncoder(String)
    }

    /// A chunk encoded and checked (`frames` = its range) into its file, or the join written.
    /// `notes`: what the chunk's output does not keep (`Transcoder.captionsNote`…), added to
    /// the job's notes once each. `encoder`: for HEVC `auto`, the encoder the chunk was made
    /// with; the first becomes the job's (`FarmJob.encoder`), another sends the chunk back.
    public func complete(_ task: FarmTask, checksum: UInt64, seconds: Double, notes: [String] = [],
                         encoder: String? = nil) throws -> Completion {
        try transaction { c in
            let pinned = try run(c, "SELECT encoder FROM upscale_jobs WHERE id = \(task.jobID) FOR UPDATE").rows.first
                .flatMap { try $0.decode(String?.self) }
            if let encoder, let pinned, encoder != pinned {
                let requeued = try run(c, """
                    UPDATE upscale_tasks SET state = 'queued', owner = NULL, token = NULL, lease_expires = NULL, frames_done = 0,
                        fps = NULL, attempts = greatest(attempts - 1, 0)
                    WHERE job_id = \(task.jobID) AND idx = \(task.index) AND token = \(task.token)::uuid AND state = 'running'
                    """).metadata.rows ?? 0
                guard requeued == 1 else { return .stale }
                try run(c, "NOTIFY \(unescaped: Self.channel)")
                return .otherEncoder(pinned)
            }
            let updated = try run(c, """
                UPDATE upscale_tasks SET state = 'done', checksum = \(Int64(bitPattern: checksum)), lease_expires = NULL,
                    finished = now(), seconds = \(seconds), frames_done = frames
                WHERE job_id = \(task.jobID) AND idx = \(task.index) AND token = \(task.token)::uuid AND state = 'running'
                """).metadata.rows ?? 0
            guard updated == 1 else { return .stale }
            if let encoder, pinned == nil {
                try run(c, "UPDATE upscale_jobs SET encoder = \(encoder) WHERE id = \(task.jobID)")
            }
            for note in notes { try appendNote(c, job: task.jobID, note) }
            if task.isJoin {
                try run(c, "UPDATE upscale_jobs SET state = 'done', updated = now(), finished = now() WHERE id = \(task.jobID)")
                return .done(joinQueued: false)
            }
            let left = try run(c, """
                SELECT count(*) FROM upscale_tasks WHERE job_id = \(task.jobID) AND idx >= 0 AND state <> 'done'
                """).rows.first!.decode(Int64.self)
            guard left == 0 else { return .done(joinQueued: false) }
            let total = try run(c, "SELECT frames FROM upscale_jobs WHERE id = \(task.jobID)").rows.first!.decode(Int.self)
            try run(c, """
                INSERT INTO upscale_tasks (job_id, idx, frames) VALUES (\(task.jobID), -1, \(total)) ON CONFLICT DO NOTHING
                """)
            try run(c, "NOTIFY \(unescaped: Self.channel)")
            return .done(joinQueued: true)
        }
    }

    /// Adds `note` to the job's notes (`FarmJob.notes`) unless it has it.
    public func addNote(job: Int64, _ note: String) throws {
        try with { c in try appendNote(c, job: job, note) }
    }

    private func appendNote(_ c: PostgresConnection, job: Int64, _ note: String) throws {
        let line = JobNotes.line(note)
        try run(c, "UPDATE upscale_jobs SET notes = notes || \(line) WHERE id = \(job) AND strpos(notes, \(line)) = 0")
    }

    /// A task that failed: queued again, or after `maxAttempts` the job fails with every reason.
    /// Returns whether the job failed; false also when the claim was stale (nothing written).
    public static let maxAttempts = 3

    @discardableResult
    public func fail(_ task: FarmTask, reason: String, retry: Bool = true) throws -> Bool {
        try transaction { c in
            let line = "attempt \(task.attempts) on \(task.token.prefix(8)): \(reason)\n"
            let rows = try run(c, """
                UPDATE upscale_tasks SET state = CASE WHEN \(retry) AND attempts < \(Self.maxAttempts) THEN 'queued' ELSE 'failed' END,
                    token = NULL, lease_expires = NULL, errors = errors || \(line)
                WHERE job_id = \(task.jobID) AND idx = \(task.index) AND token = \(task.token)::uuid AND state = 'running'
                RETURNING state, errors
                """).rows
            guard let row = rows.first else { return false }
            let (state, errors) = try row.decode((String, String).self)
            if state == "failed" { try failJob(c, task.jobID, errors: errors, index: task.index, once: !retry) }
            try run(c, "NOTIFY \(unescaped: Self.channel)")
            return state == "failed"
        }
    }

    /// A task handed back without counting the attempt (its chunks queued again at the join).
    public func release(_ task: FarmTask, reason: String) throws {
        try with { c in
            try run(c, """
                UPDATE upscale_tasks SET state = 'queued', attempts = greatest(attempts - 1, 0), token = NULL, lease_expires = NULL,
                    errors = errors || \(reason + "\n")
                WHERE job_id = \(task.jobID) AND idx = \(task.index) AND token = \(task.token)::uuid AND state = 'running'
                """)
            // A job none of whose tasks runs or has run is queued again: it showed as running,
            // with an ETA, while it waited for a worker that can see its files.
            try run(c, """
                UPDATE upscale_jobs SET state = 'queued', updated = now() WHERE id = \(task.jobID) AND state = 'running'
                    AND NOT EXISTS (SELECT 1 FROM upscale_tasks WHERE job_id = \(task.jobID) AND state IN ('running', 'done'))
                """)
            try run(c, "NOTIFY \(unescaped: Self.channel)")
        }
    }

    private func failJob(_ c: PostgresConnection, _ job: Int64, errors: String, index: Int, once: Bool = false) throws {
        let what = index < 0 ? "the join" : "chunk \(index + 1)"
        let text = (once ? "\(what) failed:\n" : "\(what) failed \(Self.maxAttempts) times:\n") + errors
        try run(c, "UPDATE upscale_jobs SET state = 'failed', error = \(text), updated = now() WHERE id = \(job)")
        try run(c, """
            UPDATE upscale_tasks SET state = 'cancelled', token = NULL WHERE job_id = \(job) AND state IN ('queued', 'running')
            """)
    }

    /// Running tasks whose lease ran out (worker killed, machine gone, paused past it) go back
    /// to the queue, or fail their job after `maxAttempts`. Returns how many were rescued.
    @discardableResult
    public func rescueExpired() throws -> Int {
        try transaction { c in
            let rows = try run(c, """
                UPDATE upscale_tasks SET state = CASE WHEN attempts < \(Self.maxAttempts) THEN 'queued' ELSE 'failed' END,
                    errors = errors || 'attempt ' || attempts || ': lease expired on ' || coalesce(owner, '?') || E'\\n',
                    token = NULL, lease_expires = NULL
                WHERE state = 'running' AND lease_expires < now()
                RETURNING job_id, idx, state, errors
                """).rows
            for row in rows {
                let (job, idx, state, errors) = try row.decode((Int64, Int, String, String).self)
                if state == "failed" { try failJob(c, job, errors: errors, index: idx) }
            }
            if !rows.isEmpty {
                try run(c, """
                    INSERT INTO upscale_meta (key, value) VALUES ('rescues', \(String(rows.count)))
                    ON CONFLICT (key) DO UPDATE SET value = (upscale_meta.value::bigint + \(rows.count))::text
                    """)
                try run(c, "NOTIFY \(unescaped: Self.channel)")
            }
            return rows.count
        }
    }

    /// Chunks' checksums of a job in order (all done), for the join.
    public func chunkChecksums(job: Int64) throws -> [Int: UInt64] {
        try with { c in
            var result: [Int: UInt64] = [:]
            for row in try run(c, "SELECT idx, checksum FROM upscale_tasks WHERE job_id = \(job) AND idx >= 0 AND state = 'done'").rows {
                let (idx, sum) = try row.decode((Int, Int64).self)
                result[idx] = UInt64(bitPattern: sum)
            }
            return result
        }
    }

    /// A chunk whose file turned out missing or damaged at the join goes back to the queue.
    public func redo(job: Int64, index: Int, reason: String) throws {
        try with { c in
            try run(c, """
                UPDATE upscale_tasks SET state = 'queued', checksum = NULL, errors = errors || \(reason + "\n")
                WHERE job_id = \(job) AND idx = \(index)
                """)
        }
    }

    public func job(id: Int64) throws -> FarmJob? { try jobs(where: id).first }

    /// Whether a job submitted after job `id` writes `output` and is not cancelled or failed:
    /// one submitted to the same place once `id` was cancelled, which may have made or taken
    /// over the file there.
    public func laterJob(writing output: String, after id: Int64) throws -> Bool {
        try with { c in
            try run(c, "SELECT 1 FROM upscale_jobs WHERE output = \(output) AND id > \(id) AND state IN ('queued', 'running', 'done') LIMIT 1").rows.first != nil
        }
    }

    public func list() throws -> [FarmJob] { try jobs(where: nil) }

    private func jobs(where id: Int64?) throws -> [FarmJob] {
        try with { c in
            let filter: PostgresQuery = id.map { "WHERE j.id = \($0)" } ?? ""
            var query: PostgresQuery = """
                SELECT j.id, j.input, j.output, j.settings, j.state, j.priority, j.error, j.chunks, j.frames,
                    count(*) FILTER (WHERE t.idx >= 0 AND t.state = 'done'),
                    count(*) FILTER (WHERE t.state = 'running'),
                    coalesce(sum(CASE WHEN t.idx < 0 THEN 0 WHEN t.state = 'done' THEN t.frames WHEN t.state = 'running' THEN t.frames_done ELSE 0 END), 0),
                    coalesce(string_agg(DISTINCT t.owner, ',') FILTER (WHERE t.state = 'running'), ''),
                    sum(t.frames) FILTER (WHERE t.idx >= 0 AND t.state = 'done') / nullif(sum(t.seconds) FILTER (WHERE t.idx >= 0 AND t.state = 'done'), 0),
                    coalesce(max(t.frames) FILTER (WHERE t.idx >= 0), 1),
                    coalesce(max(t.attempts), 0), extract(epoch FROM j.created)::float8, extract(epoch FROM j.finished)::float8,
                    sum(t.fps) FILTER (WHERE t.state = 'running')::float8, j.input_size, j.input_mtime, j.notes, j.encoder
                FROM upscale_jobs j LEFT JOIN upscale_tasks t ON t.job_id = j.id
                """
            query.sql += " " + filter.sql + " GROUP BY j.id ORDER BY j.id"
            query.binds = filter.binds
            return try run(c, query).rows.map { row in
                let (id, input, output, settings, state, priority, error, chunks, frames, done, running, framesDone, machines, fps, longest) =
                    try row.decode((Int64, String, String, String, String, Int, String?, Int, Int, Int64, Int64, Int64, String, Double?, Int).self)
                var job = FarmJob(id: id, input: input, output: output,
                               settings: (try? JSONDecoder().decode([String].self, from: Data(settings.utf8))) ?? [],
                               state: state, priority: priority, error: error, chunks: chunks, frames: frames,
                               chunksDone: Int(done), chunksRunning: Int(running), framesDone: Int(framesDone),
                               machines: machines.split(separator: ",").map { String($0.split(separator: "/").first ?? $0) }.sorted(),
                               fps: fps, longestChunk: longest)
                let columns = Array(row)
                job.attempts = try columns[15].decode(Int.self)
                job.created = try columns[16].decode(Double.self)
                job.finished = try columns[17].decode(Double?.self)
                job.runningFPS = try columns[18].decode(Double?.self)
                if let size = try columns[19].decode(Int64?.self), let modified = try columns[20].decode(Double?.self) {
                    job.identity = InputIdentity(size: size, modified: modified)
                }
                job.notes = JobNotes.list(try columns[21].decode(String.self))
                job.encoder = try columns[22].decode(String?.self)
                return job
            }
        }
    }

    /// Chunks and joins finished since `since` (seconds since 1970), oldest first.
    public func history(since: Double) throws -> [ChunkRun] {
        try with { c in
            try run(c, """
                SELECT job_id, idx, frames, extract(epoch FROM started)::float8, extract(epoch FROM finished)::float8, coalesce(seconds, 0)::float8
                FROM upscale_tasks WHERE state = 'done' AND finished > to_timestamp(\(since)) ORDER BY finished
                """).rows.map { row in
                let (job, idx, frames, started, finished, seconds) = try row.decode((Int64, Int, Int, Double?, Double, Double).self)
                return ChunkRun(job: job, index: idx, frames: frames, started: started ?? finished - seconds, finished: finished, seconds: seconds)
            }
        }
    }

    /// Tasks taken back from workers whose lease ran out, ever.
    public func rescues() throws -> Int {
        try with { c in
            try run(c, "SELECT value FROM upscale_meta WHERE key = 'rescues'").rows.first.flatMap { Int(try $0.decode(String.self)) } ?? 0
        }
    }

    /// What went wrong with a job: its error, then every chunk's failed attempts.
    public func log(job: Int64) throws -> String? {
        try with { c in
            guard let head = try run(c, "SELECT coalesce(error, '') FROM upscale_jobs WHERE id = \(job)").rows.first else { return nil }
            var text = try head.decode(String.self)
            for row in try run(c, "SELECT idx, errors FROM upscale_tasks WHERE job_id = \(job) AND errors <> '' ORDER BY idx").rows {
                let (idx, errors) = try row.decode((Int, String).self)
                text += (text.isEmpty ? "" : "\n") + (idx < 0 ? "join" : "chunk \(idx + 1)") + ":\n" + errors
            }
            return text
        }
    }

    /// These ids' failed or cancelled jobs, or with none every failed job (a cancelled one was
    /// stopped on purpose), go back to the queue with fresh attempts.
    public func retry(ids: [Int64]) throws -> Int {
        try transaction { c in
            let rows = try run(c, """
                UPDATE upscale_jobs SET state = 'queued', error = NULL, updated = now()
                WHERE ((cardinality(\(ids)::bigint[]) = 0 AND state = 'failed')
                       OR (state IN ('failed', 'cancelled') AND id = ANY(\(ids)::bigint[])))
                  -- Not while another job makes its output (it was submitted again meanwhile).
                  AND NOT EXISTS (SELECT 1 FROM upscale_jobs other WHERE other.output = upscale_jobs.output
                                  AND other.state IN ('queued', 'running') AND other.id <> upscale_jobs.id)
                RETURNING id
                """).rows
            for row in rows {
                let id = try row.decode(Int64.self)
                try run(c, """
                    UPDATE upscale_tasks SET state = 'queued', attempts = 0, token = NULL WHERE job_id = \(id) AND state <> 'done'
                    """)
            }
            try run(c, "NOTIFY \(unescaped: Self.channel)")
            return rows.count
        }
    }

    /// Queued and running jobs become cancelled; their workers find their tokens gone.
    public func cancel(ids: [Int64]) throws -> Int {
        try transaction { c in
            let rows = try run(c, """
                UPDATE upscale_jobs SET state = 'cancelled', updated = now()
                WHERE state IN ('queued', 'running') AND (cardinality(\(ids)::bigint[]) = 0 OR id = ANY(\(ids)::bigint[]))
                RETURNING id
                """).rows
            for row in rows {
                try run(c, "UPDATE upscale_tasks SET state = 'cancelled', token = NULL WHERE job_id = \(try row.decode(Int64.self)) AND state IN ('queued', 'running')")
            }
            if !rows.isEmpty { try run(c, "NOTIFY \(unescaped: Self.channel), '\(unescaped: Self.cancelPayload)'") }
            return rows.count
        }
    }

    public func setPriority(id: Int64, priority: Int) throws -> Bool {
        // Only an open job's (as for a watch folder): a done one's was set and said so.
        try with { c in
            try run(c, "UPDATE upscale_jobs SET priority = \(priority), updated = now() WHERE id = \(id) AND state IN ('queued', 'running')").metadata.rows == 1
        }
    }

    public func setPaused(_ value: Bool) throws {
        try with { c in
            try run(c, """
                INSERT INTO upscale_meta (key, value) VALUES ('paused', \(value ? "1" : "0"))
                ON CONFLICT (key) DO UPDATE SET value = excluded.value
                """)
            if !value { try run(c, "NOTIFY \(unescaped: Self.channel)") }
        }
    }

    public func isPaused() throws -> Bool { try with { try paused($0) } }

    private func paused(_ c: PostgresConnection) throws -> Bool {
        try run(c, "SELECT value FROM upscale_meta WHERE key = 'paused'").rows.first.map { try $0.decode(String.self) } == "1"
    }

    /// Whether any task is queued or running (for `worker --once`).
    /// Whether a job other than `excluded` has work queued or running.
    public func hasOpenWork(excluding excluded: [Int64] = []) throws -> Bool {
        try with { c in
            try run(c, """
                SELECT count(*) FROM upscale_tasks t JOIN upscale_jobs j ON j.id = t.job_id
                WHERE t.state IN ('queued', 'running') AND j.state IN ('queued', 'running') AND j.id <> ALL(\(excluded))
                """).rows.first!.decode(Int64.self) > 0
        }
    }

    /// A worker's heartbeat for `queue list` and the dashboard.
    public func reportWorker(name: String, fps: Double?, current: String?) throws {
        try with { c in
            try run(c, """
                INSERT INTO upscale_workers (name, seen, fps, current) VALUES (\(name), now(), \(fps.map { Float($0) }), \(current))
                ON CONFLICT (name) DO UPDATE SET seen = now(), fps = excluded.fps, current = excluded.current
                """)
        }
    }

    /// A worker slot as it last reported: what it runs, its fps, seconds since it was heard from.
    public struct WorkerStatus: Sendable, Codable, Equatable {
        public let name: String
        public let current: String?
        public let fps: Double?
        public let secondsAgo: Double

        /// Workers heartbeat every 15 s (a quarter of the default lease): two missed beats mark a slot stale.
        public static let staleAfter = 30.0
        public var isStale: Bool { secondsAgo > Self.staleAfter }
    }

    /// Takes `name` for this connection's worker: false while another live worker holds it.
    /// A session advisory lock, so a worker that crashed or was killed frees its name with its
    /// connection (a check of the list's rows would refuse a restart for half a minute). Two
    /// workers of one name showed as one row, and the first to stop took the other's slots
    /// off the list. A connection lost and made again takes the name again (see `connect`).
    public func holdWorkerName(_ name: String) throws -> Bool {
        let (taken, session) = try with { try tryName(name, on: $0) }
        if taken { lock.withLock { (heldName, nameSession) = (name, session) } }
        return taken
    }

    /// A stopped worker's slots leave the list (they stayed, stale, for good).
    public func removeWorker(name: String) throws {
        // A prefix match on the text itself: a LIKE pattern missed a name ending in a backslash
        // (its escape character), whose slots then stayed listed for an hour.
        let prefix = name + "/"
        try with { c in _ = try run(c, "DELETE FROM upscale_workers WHERE left(name, char_length(\(prefix))) = \(prefix)") }
    }

    /// Worker slots heard from in the last `within` seconds, most recent first.
    public func workers(within: Double = 3600) throws -> [WorkerStatus] {
        try with { c in
            try run(c, """
                SELECT name, current, fps, extract(epoch FROM now() - seen)::float8 FROM upscale_workers
                WHERE seen > now() - make_interval(secs => \(within)) ORDER BY seen DESC
                """).rows.map { row in
                let (name, current, fps, ago) = try row.decode((String, String?, Double?, Double).self)
                return WorkerStatus(name: name, current: current, fps: fps, secondsAgo: ago)
            }
        }
    }

    /// Whether this connection is encrypted (the server's own view, pg_stat_ssl).
    public func usesTLS() throws -> Bool {
        try with { c in
            try run(c, "SELECT coalesce((SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()), false)").rows.first!.decode(Bool.self)
        }
    }

    /// Runs `sql` as given (tests and the bench only).
    public func execute(_ sql: String) throws {
        try with { c in _ = try run(c, PostgresQuery(unsafeSQL: sql)) }
    }

    /// Runs `sql` in a transaction of its own, as the queue's own calls run (for the tests).
    public func executeInTransaction(_ sql: String) throws {
        try transaction { c in _ = try run(c, PostgresQuery(unsafeSQL: sql)) }
    }
}

private final class IDCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var value = 0
    func next() -> Int {
        lock.lock()
        defer { lock.unlock() }
        value += 1
        return value
    }
}
