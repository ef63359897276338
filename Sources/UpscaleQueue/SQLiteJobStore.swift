import Foundation

/// The watch folder's job store: `<folder>/.upscale/queue.sqlite`. Each call opens no
/// transaction longer than itself; claims take SQLite's write lock first (BEGIN IMMEDIATE),
/// so two claimers, in one process or several, never get the same job.
public final class SQLiteJobStore: JobStore {
    private let db: SQLiteDatabase
    private let lock = NSLock()
    public let path: String

    static let schemaVersion = 4

    /// `readOnly`: opened only to be read, by a user who may not write it (see `WatchFolder.openStore`).
    public init(path: String, readOnly: Bool = false) throws {
        self.path = path
        db = try SQLiteDatabase(path: path, readOnly: readOnly)
        if readOnly {
            let version = try db.query("SELECT value FROM meta WHERE key = 'schema'").first?["value"]?.string
            guard let found = version.flatMap({ Int($0) }), found == Self.schemaVersion else {
                throw SQLiteError(description: "the job store '\(path)' was written by another version of upscale; list it as the user the watcher runs as")
            }
            return
        }
        try db.transaction {
            try db.execute("""
                CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
                CREATE TABLE IF NOT EXISTS jobs (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    source TEXT NOT NULL, size INTEGER NOT NULL, modified REAL NOT NULL,
                    state TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, crashes INTEGER NOT NULL DEFAULT 0,
                    settings TEXT NOT NULL, output TEXT, error TEXT,
                    frames_done INTEGER NOT NULL DEFAULT 0, frames_total INTEGER, fps REAL,
                    owner TEXT, token TEXT, lease_expires REAL, not_before REAL,
                    created REAL NOT NULL, updated REAL NOT NULL, started REAL, moved_to TEXT,
                    out_width INTEGER, out_height INTEGER);
                CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state, id);
                CREATE INDEX IF NOT EXISTS jobs_source ON jobs(source);
                """)
            let version = try db.query("SELECT value FROM meta WHERE key = 'schema'").first?["value"]?.string
            let found = version.flatMap { Int($0) } ?? 0
            if found > Self.schemaVersion {
                throw SQLiteError(description: "the job store '\(path)' was written by a newer upscale (schema \(found)); update upscale")
            }
            // Schema 2: job priorities (claimed highest first).
            if try !db.query("PRAGMA table_info(jobs)").contains(where: { $0["name"]?.string == "priority" }) {
                try db.execute("ALTER TABLE jobs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0")
            }
            // Schema 3: an original that could not be moved out of the folder stays, once upscaled.
            if try !db.query("PRAGMA table_info(jobs)").contains(where: { $0["name"]?.string == "stayed" }) {
                try db.execute("ALTER TABLE jobs ADD COLUMN stayed INTEGER NOT NULL DEFAULT 0")
            }
            // Schema 4: what a job's output does not keep and other notes of its runs, one a line.
            if try !db.query("PRAGMA table_info(jobs)").contains(where: { $0["name"]?.string == "notes" }) {
                try db.execute("ALTER TABLE jobs ADD COLUMN notes TEXT NOT NULL DEFAULT ''")
            }
            if found < Self.schemaVersion {
                try db.query("INSERT INTO meta(key, value) VALUES('schema', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                             [String(Self.schemaVersion)])
            }
        }
    }

    private func locked<T>(_ body: () throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }

    private static let settingsDecoder = JSONDecoder()

    private static func record(_ row: [String: SQLValue]) -> JobRecord {
        record(row, settings: true)
    }

    private static func record(_ row: [String: SQLValue], settings withSettings: Bool) -> JobRecord {
        let settings = withSettings
            ? (try? settingsDecoder.decode([String].self, from: Data((row["settings"]?.string ?? "[]").utf8))) ?? [] : []
        let id: Int64 = row["id"]?.int64 ?? 0
        let source: String = row["source"]?.string ?? ""
        let size: Int64 = row["size"]?.int64 ?? 0
        let modified: Double = row["modified"]?.double ?? 0
        let state: JobState = JobState(rawValue: row["state"]?.string ?? "") ?? .failed
        let attempts: Int = row["attempts"]?.int ?? 0
        let crashes: Int = row["crashes"]?.int ?? 0
        let framesDone: Int = row["frames_done"]?.int ?? 0
        let created: Double = row["created"]?.double ?? 0
        let updated: Double = row["updated"]?.double ?? 0
        var job = JobRecord(
            id: id, source: source, size: size, modified: modified, state: state, attempts: attempts, crashes: crashes,
            settings: settings, output: nil, error: nil, framesDone: framesDone, framesTotal: nil, fps: nil, owner: nil,
            leaseExpires: nil, notBefore: nil, created: created, updated: updated, started: nil,
            outputWidth: nil, outputHeight: nil, movedTo: nil)
        job.output = row["output"]?.string
        job.error = row["error"]?.string
        job.framesTotal = row["frames_total"]?.int
        job.fps = row["fps"]?.double
        job.owner = row["owner"]?.string
        job.leaseExpires = row["lease_expires"]?.double
        job.notBefore = row["not_before"]?.double
        job.started = row["started"]?.double
        job.movedTo = row["moved_to"]?.string
        job.outputWidth = row["out_width"]?.int
        job.outputHeight = row["out_height"]?.int
        job.priority = row["priority"]?.int ?? 0
        job.notes = JobNotes.list(row["notes"]?.string ?? "")
        return job
    }

    public func enqueue(source: String, size: Int64, modified: Double, settings: [String]) throws -> JobRecord? {
        try locked {
            try db.transaction {
                let existing = try db.query("""
                    SELECT id FROM jobs WHERE source = ? AND (state IN ('queued', 'running', 'finishing', 'waiting-for-space')
                        OR ((state = 'cancelled' OR (state IN ('done', 'failed') AND stayed = 1)) AND size = ? AND modified = ?)) LIMIT 1
                    """, [source, size, modified])
                guard existing.isEmpty else { return nil }
                let json = String(decoding: try JSONEncoder().encode(settings), as: UTF8.self)
                let now = Date().timeIntervalSince1970
                try db.query("""
                    INSERT INTO jobs(source, size, modified, state, settings, created, updated)
                    VALUES(?, ?, ?, 'queued', ?, ?, ?)
                    """, [source, size, modified, json, now, now])
                return try db.query("SELECT * FROM jobs WHERE id = last_insert_rowid()").first.map(Self.record)
            }
        }
    }

    public func claim(owner: String, lease: Double, now: Double) throws -> JobClaim? {
        try locked {
            try db.transaction {
                if try db.query("SELECT value FROM meta WHERE key = 'paused'").first?["value"]?.string == "1" { return nil }
                guard let row = try db.query("""
                    SELECT * FROM jobs WHERE state IN ('queued', 'waiting-for-space') AND (not_before IS NULL OR not_before <= ?)
                    ORDER BY priority DESC, id LIMIT 1
                    """, [now]).first else { return nil }
                let token = UUID().uuidString
                try db.query("""
                    UPDATE jobs SET state = 'running', owner = ?, token = ?, lease_expires = ?, attempts = attempts + 1,
                        frames_done = 0, fps = NULL, error = NULL, not_before = NULL, updated = ?, started = ? WHERE id = ?
                    """, [owner, token, now + lease, now, now, row["id"]?.int64 ?? 0])
                let job = try db.query("SELECT * FROM jobs WHERE id = ?", [row["id"]?.int64 ?? 0]).first.map(Self.record)!
                return JobClaim(job: job, token: token)
            }
        }
    }

    /// An UPDATE that applies only while `claim` still holds the job.
    private func update(_ claim: JobClaim, _ assignments: String, _ values: [SQLBindable], states: String = "'running'") throws -> Bool {
        try locked {
            try db.query("UPDATE jobs SET \(assignments) WHERE id = ? AND token = ? AND state IN (\(states))",
                         values + [claim.job.id, claim.token])
            return db.changes == 1
        }
    }

    public func heartbeat(_ claim: JobClaim, progress: JobProgress, lease: Double, now: Double) throws -> Bool {
        try update(claim, "frames_done = ?, frames_total = ?, fps = ?, lease_expires = ?, updated = ?",
                   [progress.framesDone, progress.framesTotal, progress.fps, now + lease, now])
    }

    public func holds(_ claim: JobClaim) throws -> Bool {
        try update(claim, "updated = updated", [], states: "'running', 'finishing'")
    }

    public func setPlan(id: Int64, width: Int, height: Int, frames: Int?) throws {
        try locked {
            try db.query("UPDATE jobs SET out_width = ?, out_height = ?, frames_total = COALESCE(?, frames_total) WHERE id = ?",
                         [width, height, frames, id])
        }
    }

    public func setOutput(_ claim: JobClaim, output: String) throws -> Bool {
        try update(claim, "output = ?", [output])
    }

    public func markFinishing(_ claim: JobClaim, now: Double) throws -> Bool {
        try update(claim, "state = 'finishing', lease_expires = NULL, updated = ?", [now])
    }

    public func markFinishing(id: Int64, output: String, now: Double) throws {
        try locked {
            try db.query("UPDATE jobs SET state = 'finishing', output = ?, lease_expires = NULL, updated = ? WHERE id = ? AND state = 'running'",
                         [output, now, id])
        }
    }

    public func finish(id: Int64, now: Double) throws {
        try locked {
            try db.query("UPDATE jobs SET state = 'done', token = NULL, owner = NULL, updated = ? WHERE id = ? AND state = 'finishing'", [now, id])
        }
    }

    public func fail(_ claim: JobClaim, error: String, crashed: Bool, retryAt: Double?, movedTo: String?, now: Double) throws -> Bool {
        try update(claim, """
            state = ?, error = ?, crashes = crashes + ?, not_before = ?, token = NULL, owner = NULL,
            lease_expires = NULL, updated = ?, moved_to = ?
            """, [retryAt == nil ? "failed" : "queued", error, crashed ? 1 : 0, retryAt, now, movedTo], states: "'running', 'finishing'")
    }

    public func addNote(id: Int64, _ note: String) throws {
        let line = JobNotes.line(note)
        try locked { try db.query("UPDATE jobs SET notes = notes || ? WHERE id = ? AND instr(notes, ?) = 0", [line, id, line]) }
    }

    public func markStayed(id: Int64) throws {
        try locked { try db.query("UPDATE jobs SET stayed = 1 WHERE id = ?", [id]) }
    }

    public func resettle(_ claim: JobClaim, size: Int64, modified: Double, reason: String, retryAt: Double, now: Double) throws -> Bool {
        try update(claim, """
            state = 'queued', size = ?, modified = ?, attempts = MAX(attempts - 1, 0), error = ?, notes = '',
            not_before = ?, token = NULL, owner = NULL, lease_expires = NULL, updated = ?
            """, [size, modified, reason, retryAt, now], states: "'running', 'finishing'")
    }

    public func requeueFailed(id: Int64, source: String, size: Int64, modified: Double, now: Double) throws -> Bool {
        try locked {
            try db.query("""
                UPDATE jobs SET state = 'queued', source = ?, size = ?, modified = ?, attempts = 0, crashes = 0, error = NULL, notes = '',
                    not_before = NULL, moved_to = NULL, output = NULL, stayed = 0, updated = ? WHERE id = ? AND state IN ('failed', 'cancelled')
                """, [source, size, modified, now, id])
            return db.changes == 1
        }
    }

    public func waitForSpace(_ claim: JobClaim, reason: String, until: Double, now: Double) throws {
        _ = try update(claim, """
            state = 'waiting-for-space', attempts = MAX(attempts - 1, 0), error = ?, not_before = ?, token = NULL,
            owner = NULL, lease_expires = NULL, updated = ?
            """, [reason, until, now])
    }

    public func release(_ claim: JobClaim, now: Double) throws {
        _ = try update(claim, """
            state = 'queued', attempts = MAX(attempts - 1, 0), token = NULL, owner = NULL, lease_expires = NULL,
            frames_done = 0, fps = NULL, updated = ?
            """, [now])
    }

    public func requeueExpired(now: Double, sparing: Set<Int64>) throws -> Int {
        try locked {
            let spared = sparing.sorted()
            try db.query("""
                UPDATE jobs SET state = 'queued', token = NULL, owner = NULL, lease_expires = NULL, frames_done = 0,
                    fps = NULL, updated = ? WHERE state = 'running' AND lease_expires < ?
                """ + (spared.isEmpty ? "" : " AND id NOT IN (" + spared.map { _ in "?" }.joined(separator: ", ") + ")"),
                [now, now] as [SQLBindable] + spared.map { $0 as SQLBindable })
            let rescued = db.changes
            try countRescues(rescued)
            return rescued
        }
    }

    public func requeueAbandoned(id: Int64?, now: Double) throws -> Int {
        try locked {
            if let id {
                try db.query("""
                    UPDATE jobs SET state = 'queued', token = NULL, owner = NULL, lease_expires = NULL, frames_done = 0,
                        fps = NULL, updated = ? WHERE id = ? AND state IN ('running', 'finishing')
                    """, [now, id])
            } else {
                try db.query("""
                    UPDATE jobs SET state = 'queued', token = NULL, owner = NULL, lease_expires = NULL, frames_done = 0,
                        fps = NULL, updated = ? WHERE state = 'running'
                    """, [now])
            }
            let rescued = db.changes
            try countRescues(rescued)
            return rescued
        }
    }

    /// Jobs taken back from a run that stopped answering (lease ran out, watcher gone), counted
    /// for the dashboard's metrics. Called with the store's lock held.
    private func countRescues(_ count: Int) throws {
        guard count > 0 else { return }
        try db.query("""
            INSERT INTO meta(key, value) VALUES('rescues', ?)
            ON CONFLICT(key) DO UPDATE SET value = CAST(CAST(value AS INTEGER) + ? AS TEXT)
            """, [String(count), count])
    }

    /// How many jobs were taken back from runs that stopped answering, ever.
    public func rescues() throws -> Int { Int(try setting("rescues") ?? "0") ?? 0 }

    public func setPriority(id: Int64, priority: Int) throws -> Bool {
        try locked {
            try db.query("""
                UPDATE jobs SET priority = ? WHERE id = ?
                    AND state IN ('queued', 'running', 'finishing', 'waiting-for-space')
                """, [priority, id])
            return db.changes == 1
        }
    }

    public func job(id: Int64) throws -> JobRecord? {
        try locked { try db.query("SELECT * FROM jobs WHERE id = ?", [id]).first.map(Self.record) }
    }

    public func list() throws -> [JobRecord] {
        try locked { try db.query("SELECT * FROM jobs ORDER BY id").map(Self.record) }
    }

    public func jobs(in state: JobState) throws -> [JobRecord] {
        try locked { try db.query("SELECT * FROM jobs WHERE state = ? ORDER BY id", [state.rawValue]).map(Self.record) }
    }

    /// Every job without its encode options (`settings` empty): for views that show the queue
    /// (decoding each job's options was a fifth of a 10,000-job dashboard reading).
    public func listForDisplay() throws -> [JobRecord] {
        try locked { try db.query("SELECT * FROM jobs ORDER BY id").map { Self.record($0, settings: false) } }
    }

    private func sourceFilter(_ sources: [String]) -> (String, [SQLBindable]) {
        sources.isEmpty ? ("", []) : (" AND source IN (\(sources.map { _ in "?" }.joined(separator: ",")))", sources)
    }

    public func retry(sources: [String], now: Double) throws -> Int {
        let (filter, values) = sourceFilter(sources)
        return try locked {
            try db.query("""
                UPDATE jobs SET state = 'queued', attempts = 0, crashes = 0, error = NULL, not_before = NULL, stayed = 0, notes = '', updated = ?
                WHERE state IN ('failed', 'cancelled')\(filter)
                """, [now] + values)
            return db.changes
        }
    }

    public func cancel(sources: [String], now: Double) throws -> Int {
        let (filter, values) = sourceFilter(sources)
        return try locked {
            try db.query("""
                UPDATE jobs SET state = 'cancelled', token = NULL, owner = NULL, lease_expires = NULL, updated = ?
                WHERE state IN ('queued', 'running', 'waiting-for-space')\(filter)
                """, [now] + values)
            return db.changes
        }
    }

    public func setPaused(_ paused: Bool) throws { try setSetting("paused", paused ? "1" : "0") }

    public func isPaused() throws -> Bool { try setting("paused") == "1" }

    public func setting(_ key: String) throws -> String? {
        try locked { try db.query("SELECT value FROM meta WHERE key = ?", [key]).first?["value"]?.string }
    }

    /// Every setting whose key starts with `prefix`.
    public func settings(prefix: String) throws -> [String: String] {
        try locked {
            var result: [String: String] = [:]
            for row in try db.query("SELECT key, value FROM meta WHERE substr(key, 1, ?) = ?", [prefix.count, prefix]) {
                if let k = row["key"]?.string, let v = row["value"]?.string { result[k] = v }
            }
            return result
        }
    }

    public func setSetting(_ key: String, _ value: String) throws {
        try locked {
            try db.query("INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value", [key, value])
        }
    }
}
