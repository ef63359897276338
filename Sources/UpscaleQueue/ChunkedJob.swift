import Foundation
import Logging
import UpscaleMedia

/// The chunks of one job on this machine and what became of them, kept in the job's work
/// folder (`chunks.sqlite`, synchronous writes): the settings key the chunks were made with,
/// the plan, and per chunk its state and the checksum of its finished file.
final class ChunkLedger {
    enum State: String { case queued, running, done }

    struct Chunk {
        var range: ChunkRange
        var state: State
        var checksum: UInt64?
    }

    private let db: SQLiteDatabase
    private let lock = NSLock()

    init(path: String) throws {
        db = try SQLiteDatabase(path: path)
        try db.transaction {
            try db.execute("""
                CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
                CREATE TABLE IF NOT EXISTS chunks (
                    idx INTEGER PRIMARY KEY, seek INTEGER, start INTEGER, end_pts INTEGER, frames INTEGER NOT NULL,
                    state TEXT NOT NULL, checksum INTEGER, attempts INTEGER NOT NULL DEFAULT 0, error TEXT);
                """)
        }
    }

    private func locked<T>(_ body: () throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }

    func value(_ key: String) throws -> String? {
        try locked { try db.query("SELECT value FROM meta WHERE key = ?", [key]).first?["value"]?.string }
    }

    func setValue(_ key: String, _ value: String) throws {
        try locked { _ = try db.query("INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)", [key, value]) }
    }

    func insert(_ plan: ChunkPlan) throws {
        try locked {
            try db.transaction {
                for c in plan.chunks {
                    _ = try db.query("INSERT INTO chunks(idx, seek, start, end_pts, frames, state) VALUES(?, ?, ?, ?, ?, 'queued')",
                                     [c.index, c.seek, c.start, c.end, c.frames])
                }
            }
        }
    }

    private static func range(_ row: [String: SQLValue]) -> ChunkRange {
        ChunkRange(index: row["idx"]!.int!, seek: row["seek"]?.int64, start: row["start"]?.int64,
                   end: row["end_pts"]?.int64, frames: row["frames"]!.int!)
    }

    func chunks() throws -> [Chunk] {
        try locked {
            try db.query("SELECT * FROM chunks ORDER BY idx").map { row in
                Chunk(range: Self.range(row), state: State(rawValue: row["state"]!.string!) ?? .queued,
                      checksum: row["checksum"]?.int64.map { UInt64(bitPattern: $0) })
            }
        }
    }

    /// A queued chunk for a new pipeline, now running; nil when none is left. The pipeline goes
    /// on into the chunks after it (`ChunkSpan`), so it starts where no running pipeline will
    /// get to (`start(queued:running:)`).
    func claim() throws -> ChunkRange? {
        try locked {
            try db.transaction {
                var queued: [Int: [String: SQLValue]] = [:], running: Set<Int> = []
                for row in try db.query("SELECT * FROM chunks WHERE state IN ('queued', 'running')") {
                    let index = row["idx"]!.int!
                    if row["state"]?.string == State.queued.rawValue { queued[index] = row } else { running.insert(index) }
                }
                guard let index = Self.start(queued: queued.keys.sorted(), running: running) else { return nil }
                return try take(queued[index]!)
            }
        }
    }

    /// Where a new pipeline starts among the `queued` chunks (in order): the first of the first
    /// stretch of consecutive queued chunks that no running pipeline goes on into (the chunk
    /// before it is not `running`); where a running one goes on into each, the middle of the
    /// longest stretch, so that two pipelines share it (one worker: always the lowest).
    static func start(queued: [Int], running: Set<Int>) -> Int? {
        var stretches: [ArraySlice<Int>] = []
        var from = 0
        for i in queued.indices where i == queued.count - 1 || queued[i + 1] != queued[i] + 1 {
            stretches.append(queued[from...i])
            from = i + 1
        }
        if let free = stretches.first(where: { !running.contains($0.first! - 1) }) { return free.first }
        guard let longest = stretches.max(by: { $0.count < $1.count }) else { return nil }
        return longest[longest.startIndex + longest.count / 2]
    }

    /// Chunk `index`, now running, when it is queued and starts at `start` (the picture a
    /// pipeline that made the chunk before it decoded next); nil otherwise.
    func claim(index: Int, startingAt start: Int64) throws -> ChunkRange? {
        try locked {
            try db.transaction {
                guard let row = try db.query("SELECT * FROM chunks WHERE idx = ? AND state = 'queued' AND start = ?", [index, start]).first
                else { return nil }
                return try take(row)
            }
        }
    }

    /// The queued chunk `row`, now running (inside a claim's transaction).
    private func take(_ row: [String: SQLValue]) throws -> ChunkRange {
        let range = Self.range(row)
        _ = try db.query("UPDATE chunks SET state = 'running', attempts = attempts + 1 WHERE idx = ?", [range.index])
        return range
    }

    /// A chunk finished: its checksum; the encoder the first finished chunk was made with and
    /// the settings key that names it (see `ChunkedJob.settingsKey`; later chunks change
    /// neither); whether its pictures carried captions or HDR10+ metadata the output drops.
    func done(_ index: Int, checksum: UInt64, encoder: String, settings: String, droppedCaptions: Bool, droppedHDR10Plus: Bool) throws {
        try locked {
            try db.transaction {
                _ = try db.query("UPDATE chunks SET state = 'done', checksum = ?, error = NULL WHERE idx = ?",
                                 [Int64(bitPattern: checksum), index])
                if try db.query("SELECT value FROM meta WHERE key = 'encoder'").isEmpty {
                    _ = try db.query("INSERT INTO meta(key, value) VALUES('encoder', ?)", [encoder])
                    _ = try db.query("INSERT OR REPLACE INTO meta(key, value) VALUES('settings', ?)", [settings])
                }
                if droppedCaptions { _ = try db.query("INSERT OR REPLACE INTO meta(key, value) VALUES('captions', 'dropped')") }
                if droppedHDR10Plus { _ = try db.query("INSERT OR REPLACE INTO meta(key, value) VALUES('hdr10plus', 'dropped')") }
            }
        }
    }

    func requeue(_ index: Int, error: String? = nil) throws {
        try locked { _ = try db.query("UPDATE chunks SET state = 'queued', checksum = NULL, error = ? WHERE idx = ?", [error, index]) }
    }
}

/// A job run in chunks on this machine, resumable: finished chunks stay in a hidden work
/// folder beside the output (`.<output name>.upscale-work/`) until the join succeeds, so
/// after Ctrl-C, `kill -9`, a crash or a reboot the same command continues where it was and
/// redoes only the chunks that were in flight. `workers` chunks are encoded at once, each
/// pipeline with its share of the threads.
public final class ChunkedJob {
    public let job: Job
    public let chunkSeconds: Double
    public let workers: Int
    public let workFolder: String
    private let logger: Logger

    /// What a run did: the output summary and the chunk counts (for the resume test and notes).
    public struct Outcome: Sendable {
        public let summary: TranscodeSummary
        public let chunks: Int
        /// Chunks found finished (and intact) when the run started.
        public let reused: Int
        /// Chunks encoded by this run.
        public let encoded: Int
        /// Frames of the chunks found finished.
        public var reusedFrames = 0
    }

    /// Removes the work folder an interrupted chunked run left for `output`, once `output` was
    /// made in one piece (`--chunk-seconds 0`, which the chunk errors advise): its chunks, as
    /// big as the video, stayed hidden beside it for good. Not while another run holds it.
    public static func removeLeftWork(for output: String) {
        let folder = workFolder(for: output)
        let fd = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        defer { close(fd) }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else { return }
        try? FileManager.default.removeItem(atPath: folder)
    }

    public init(job: Job, chunkSeconds: Double, workers: Int = 1, logger: Logger = Logger(label: "upscale")) {
        self.job = job
        self.chunkSeconds = chunkSeconds
        self.workers = max(1, workers)
        self.logger = logger
        workFolder = Self.workFolder(for: job.output)
    }

    public static func workFolder(for output: String) -> String {
        let url = URL(fileURLWithPath: output)
        return url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent).upscale-work").path
    }

    /// Whether this job is long enough for chunks (by the container's duration; the keyframe
    /// scan decides in the end) and its output can be joined.
    public static func applies(to job: Job, chunkSeconds: Double) -> Bool {
        chunkSeconds > 0 && job.duration >= 2 * chunkSeconds && ChunkPlan.supports(job)
    }

    /// Everything that changes a chunk's bytes: the input file as it is and the encode settings,
    /// each as it takes effect. A default given by name (`--crf 20`, `--preset medium`,
    /// `--encoder libx265` where `auto` made the chunks with libx265) is the same setting: a
    /// resume with it started over. `resolved` is the encoder the finished chunks were made
    /// with (the ledger's `encoder`), used where this run's `--encoder` allows it.
    /// `input`: the input as the run found it at its start (a key made later, when the first
    /// chunk is recorded, would name a version saved over it meanwhile).
    func settingsKey(resolved: String?, input: stat) -> String {
        let size = Int64(input.st_size), modified = input.modificationTime
        let e = job.encoder
        let encoder = Self.effectiveEncoder(e, resolved: resolved)
        let crf: String
        switch encoder {
        case nil: crf = e.crf.map(String.init) ?? "-"
        case e.codec.encoderName?: crf = (e.crf ?? e.codec.defaultCRF).map(String.init) ?? "-"
        default: crf = String(e.crf ?? EncoderSettings.hardwareQuality)
        }
        let parts: [String] = [
            "v4", URL(fileURLWithPath: job.input).standardizedFileURL.path, String(size), String(modified),
            "\(job.width)x\(job.height)", job.muxer, e.codec.rawValue, crf, e.preset ?? e.codec.defaultPreset ?? "-",
            encoder ?? "auto", job.kernel.rawValue, String(job.refine), String(job.deinterlace),
            "\(job.sampleAspect.num):\(job.sampleAspect.den)", String(chunkSeconds),
        ]
        var hash = ContentHash()
        let text = parts.joined(separator: "|")
        text.utf8CString.withUnsafeBytes { hash.add($0) }
        return String(hash.value, radix: 16)
    }

    /// For HEVC `auto`, the encoder the ledger's finished chunks were made with (nil before
    /// any was, or where this run names one or another codec).
    private func madeWith(_ ledger: ChunkLedger) throws -> String? {
        job.encoder.codec == .hevc && job.encoder.hevcEncoder == nil ? try ledger.value("encoder") : nil
    }

    /// The FFmpeg encoder the chunks are made with: the codec's own, the named one, or for
    /// HEVC `auto` the one earlier chunks were made with (nil before any was).
    static func effectiveEncoder(_ e: EncoderSettings, resolved: String?) -> String? {
        guard e.codec == .hevc else { return e.codec.encoderName }
        return e.hevcEncoder ?? resolved
    }

    /// Runs the job; nil when the keyframe scan finds fewer than two chunks (run it in one piece).
    /// `resume: false` starts over. A clean failure removes the work folder; cancelling or a
    /// failure to write (a full disk) keeps it.
    public func run(resume: Bool = true, cancel: CancellationFlag = CancellationFlag(),
                    progress: @escaping (TranscodeProgress) -> Void = { _ in }) throws -> Outcome? {
        let started = Date()
        // Damage the demuxer skips (a Matroska file damaged mid-way) is seen by the keyframe
        // scan, the chunks that read it and the join: counted over the whole run.
        let demuxErrorsBefore = MediaLibrary.demuxErrors
        let fm = FileManager.default
        let ledgerPath = (workFolder as NSString).appendingPathComponent("chunks.sqlite")
        // Each chunk opens the input again: the file as it is now, to see it change or go.
        var original = stat()
        stat(job.input, &original)
        let existed = fm.fileExists(atPath: workFolder)
        do {
            try fm.createDirectory(atPath: workFolder, withIntermediateDirectories: true)
        } catch {
            throw UpscaleError(.output, "cannot create the work folder '\(workFolder)': \(fileErrorReason(error)); pick another --output folder")
        }
        // One run at a time per work folder: a second run of the same command took the first's
        // live chunks for an interrupted run's, redid them, and removed the folder under it.
        let lock = open(workFolder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard lock >= 0 else {
            throw UpscaleError(.output, "cannot open the work folder '\(workFolder)': \(String(cString: strerror(errno))); pick another --output folder")
        }
        defer { close(lock) }
        guard flock(lock, LOCK_EX | LOCK_NB) == 0 else {
            throw UpscaleError(.output, "'\(job.output)' is being made by another upscale run right now (work folder '\(workFolder)'); let it finish or stop it first")
        }
        // A folder that cannot be written (its file system now read-only) said "holds chunks
        // made with other settings; starting over", then failed on the ledger; where only the
        // ledger could not be opened, its chunks were removed.
        if access(workFolder, W_OK) != 0 {
            throw UpscaleError(.output, "cannot write in the work folder '\(workFolder)' (\(String(cString: strerror(errno)))); its chunks are kept: make it writable and run the same command again")
        }
        if existed {
            let existing = try? ChunkLedger(path: ledgerPath)
            let recorded = (try? existing?.value("encoder")) ?? nil
            let stored = (try? existing?.value("settings")) ?? nil
            let matches = stored != nil && stored == settingsKey(resolved: recorded, input: original)
            if !resume || !matches {
                let names = (try? fm.contentsOfDirectory(atPath: workFolder)) ?? []
                // Said as it is: other settings, or chunks whose ledger is gone or unreadable (that
                // was called "other settings" too), and nothing when there were no chunks to lose.
                if resume && stored != nil {
                    logger.notice("'\(workFolder)' holds chunks made with other settings or another version of the input; starting over")
                } else if resume && names.contains(where: { $0.hasSuffix(".chunk") }) {
                    logger.notice("'\(workFolder)' holds chunks with no readable record of how they were made (its chunks.sqlite is missing or damaged); starting over")
                }
                // Emptied, not removed: the lock is on the folder itself.
                for name in names {
                    try? fm.removeItem(atPath: (workFolder as NSString).appendingPathComponent(name))
                }
            }
        }
        let ledger = try ChunkLedger(path: ledgerPath)
        if try ledger.value("settings") == nil {
            let plan = try ChunkPlan.make(path: job.input, chunkSeconds: chunkSeconds)
            // A file whose scan met damage the demuxer skipped runs in one piece, which reads
            // it as the scan did and names the damage: a chunk, which seeks into it, resyncs
            // elsewhere, and the run failed on its frame count ("timestamps are irregular").
            guard plan.chunks.count >= 2, MediaLibrary.demuxErrors == demuxErrorsBefore else {
                try? fm.removeItem(atPath: workFolder)
                return nil
            }
            try ledger.insert(plan)
            try ledger.setValue("settings", settingsKey(resolved: nil, input: original))
        }
        // HEVC `auto` keeps the encoder the finished chunks were made with: a resume on a
        // machine where another one now opens (a GPU added or gone) made chunks the join refuses.
        let pinnedEncoder = try madeWith(ledger)
        var pinned = self.job
        if let made = pinnedEncoder { pinned.encoder.hevcEncoder = made }
        let job = pinned
        PartialFile.removeStale(in: workFolder)
        // What the output loses (depth, colour resolution, HDR10 metadata), said once: the chunks
        // do not say it (each would, or a resumed run's reused ones would not).
        for line in (try? Transcoder.lossNotes(for: job)) ?? [] { logger.notice("\(line)") }

        // What an earlier run left: finished chunks are kept when their file is intact.
        var reused = 0, reusedFrames = 0
        var redone = 0
        let all = try ledger.chunks()
        for chunk in all {
            switch chunk.state {
            case .done where ContentHash.of(file: chunkPath(chunk.range.index)) == chunk.checksum:
                reused += 1
                reusedFrames += chunk.range.frames
            case .queued:
                break
            default:
                redone += 1
                try ledger.requeue(chunk.range.index)
            }
        }
        if reused > 0 || redone > 0 {
            logger.notice("resuming: \(reused) of \(all.count) chunks done\(redone > 0 ? ", \(redone) to redo" : "") (work folder '\(workFolder)')")
        }
        let meter = ChunkMeter(done: reusedFrames, total: all.reduce(0) { $0 + $1.range.frames },
                               started: started, progress: progress)

        let longest = all.map(\.range.frames).max() ?? 1
        // Encode the rest, `workers` at a time, each with its share of the threads.
        let failure = FirstError()
        let stop = CancellationFlag()
        let group = DispatchGroup()
        let share = max(1, job.threads / workers)
        var encoded = 0, pipelines = 0
        let countLock = NSLock()
        // Several workers: set before any of them allocates (glibc's free() adjusts the same
        // thresholds without a lock).
        if workers > 1 { ProcessMemory.keepFreedMemory() }
        let held = HeldChunks()
        for worker in 0..<workers {
            group.enter()
            Thread.detachNewThread { [self] in
                defer { group.leave() }
                while !stop.isCancelled && !cancel.isCancelled {
                    let range: ChunkRange
                    do {
                        guard let next = try ledger.claim() else { return }
                        range = next
                    } catch {
                        failure.record(error)
                        stop.cancel()
                        return
                    }
                    if let error = inputChange(from: original, ledger: ledger) {
                        try? ledger.requeue(range.index)
                        failure.record(error)
                        stop.cancel()
                        return
                    }
                    var part = job
                    if workers > 1 {
                        part.threads = share
                        part.encoder.threads = share
                    }
                    let task = { (range: ChunkRange) in ChunkTask(range: range, path: self.chunkPath(range.index), keyframeInterval: longest) }
                    part.chunk = task(range)
                    held.add(range.index, worker: worker)
                    // A second pipeline after the first (its span ended: the next chunk was done,
                    // or the encoder cannot start one mid-stream) takes the memory the first one
                    // freed (see `ProcessMemory`; no other thread allocates then). One pipeline
                    // for the whole run frees nothing big before it ends, and keeps the heap as
                    // one piece does.
                    if workers == 1 {
                        pipelines += 1
                        if pipelines == 2 { ProcessMemory.keepFreedMemory() }
                    }
                    let transcoder = Transcoder(job: part, logger: logger)
                    // One decoder and encoder go on into the chunks after this one while they are
                    // still to be made (with one worker, all of them).
                    transcoder.span = ChunkSpan(claim: { [self] after, pts in
                        guard !stop.isCancelled, !cancel.isCancelled, inputChange(from: original, ledger: ledger) == nil,
                              let next = try? ledger.claim(index: after.index + 1, startingAt: pts) else { return nil }
                        held.add(next.index, worker: worker)
                        return task(next)
                    }, finished: { [self] chunk, summary in
                        // Done, with the encoder it was made with and whether captions were dropped
                        // (a resumed run that only joins says so too), in one transaction.
                        try ledger.done(chunk.range.index, checksum: summary.checksum, encoder: summary.encoderName,
                                        settings: settingsKey(resolved: summary.encoderName, input: original),
                                        droppedCaptions: summary.droppedCaptions, droppedHDR10Plus: summary.droppedHDR10Plus)
                        held.remove(chunk.range.index, worker: worker)
                        meter.finish(worker: worker, frames: chunk.range.frames)
                        countLock.lock()
                        encoded += 1
                        countLock.unlock()
                    })
                    do {
                        _ = try transcoder.run(cancel: stop) { p in
                            meter.update(worker: worker, frames: p.framesDone)
                        }
                    } catch {
                        meter.finish(worker: worker, frames: 0)
                        for index in held.take(worker: worker) { try? ledger.requeue(index, error: "\(error)") }
                        // A chunk that failed on its input ("does not exist") may have met the
                        // file going or changing: that is said instead.
                        if let made = pinnedEncoder, let e = error as? UpscaleError, e.message.hasPrefix("the \(made) encoder is not available here") {
                            // `auto` kept the encoder the last run's chunks were made with; it does not
                            // open now (a GPU gone, its sessions taken). Its chunks are kept.
                            failure.record(UpscaleError(.output, "the finished chunks in '\(workFolder)' were made with \(made), which does not open here now; run where it does to resume, or add --no-resume to start over with this machine's encoder"))
                        } else if (error as? UpscaleError)?.kind != .cancelled {
                            failure.record(inputChange(from: original, ledger: ledger) ?? error)
                        }
                        stop.cancel()
                        return
                    }
                }
            }
        }
        // Ctrl-C / SIGTERM reaches the workers' pipelines through `stop`.
        while group.wait(timeout: .now() + .milliseconds(200)) == .timedOut {
            if cancel.isCancelled { stop.cancel() }
        }
        if failure.current == nil, !cancel.isCancelled, let error = inputChange(from: original, ledger: ledger) { failure.record(error) }
        if let error = failure.current {
            // A clean failure of the input or the processing: nothing to resume. One of the
            // output (a full disk, a folder made read-only) keeps the finished chunks for the
            // next run, as its message says: they were removed, and a rerun after freeing
            // space started from zero. So does an input that went away (moved, a drive gone).
            if (error as? UpscaleError)?.kind != .output && access(job.input, F_OK) == 0 { try? fm.removeItem(atPath: workFolder) }
            throw error
        }
        if cancel.isCancelled {
            let done = (try? ledger.chunks().filter { $0.state == .done }.count) ?? 0
            throw UpscaleError(.cancelled, "interrupted; \(done) of \(all.count) chunks are kept in '\(workFolder)': run the same command again to resume (--no-resume starts over)")
        }
        let paths = all.map { chunkPath($0.range.index) }
        if TestHook.current == .interruptAtJoin {
            kill(getpid(), SIGINT)
            for _ in 0..<500 where !cancel.isCancelled { usleep(10_000) }
        }
        let joined: TranscodeSummary
        do {
            // Named as the chunks were made (a fresh `auto` run's summary said libx265 of NVENC chunks).
            var joining = job
            if let made = try? madeWith(ledger) { joining.encoder.hevcEncoder = made }
            joined = try Transcoder(job: joining, logger: logger).join(chunks: paths, cancel: cancel)
        } catch let error as UpscaleError where error.kind == .cancelled || error.kind == .output {
            // The chunks stay for the next run, which only joins them: said, as when a chunk
            // is stopped (the join's own line offered another --output folder, whose run
            // would not find them).
            var reason = error.message
            for elsewhere in [" or choose another --output folder", "; pick another --output folder"] where reason.hasSuffix(elsewhere) {
                reason = String(reason.dropLast(elsewhere.count))
            }
            // An output that appeared meanwhile is replaced only when asked.
            let again = reason.contains("--overwrite") && !job.overwrite ? "run the same command with --overwrite to join them" : "run the same command again to join them"
            let kept = "the \(all.count) finished chunks are kept in '\(workFolder)': \(again)"
            if error.kind == .cancelled { throw UpscaleError(.cancelled, "interrupted while joining; \(kept)") }
            throw UpscaleError(.output, "\(reason); \(kept)")
        }
        for note in Transcoder.droppedNotes(job.input, codec: job.encoder.codec, captions: (try? ledger.value("captions")) == "dropped",
                                            hdr10Plus: (try? ledger.value("hdr10plus")) == "dropped") { logger.notice("\(note)") }
        if TestHook.current == .crashAfterJoin { kill(getpid(), SIGKILL) }
        if TestHook.current == .stallAfterJoin { TestHook.stallForever() }
        try? fm.removeItem(atPath: workFolder)
        if MediaLibrary.demuxErrors > demuxErrorsBefore {
            logger.notice("\(MediaLibrary.skippedDataNote(job.input, places: MediaLibrary.demuxErrors - demuxErrorsBefore))")
        }
        var summary = joined
        summary.seconds = Date().timeIntervalSince(started)
        var outcome = Outcome(summary: summary, chunks: all.count, reused: reused, encoded: encoded)
        outcome.reusedFrames = reusedFrames
        return outcome
    }

    /// The input gone or changed since the run began (`original`), as an error to end it
    /// with; nil when it is the same file. A replaced input (a re-export saved over it) gave
    /// an output of two versions, later chunks and the sound from the new one; a moved one
    /// failed as missing, and its finished chunks were removed.
    private func inputChange(from original: stat, ledger: ChunkLedger) -> Error? {
        var now = stat()
        guard stat(job.input, &now) == 0 else {
            guard errno == ENOENT || errno == ENOTDIR else { return nil }
            let done = (try? ledger.chunks().filter { $0.state == .done }.count) ?? 0
            return UpscaleError(.input, "'\(job.input)' went away while it was upscaled (moved, renamed or its drive gone); \(done) finished chunks are kept in '\(workFolder)': put it back and run the same command again to resume")
        }
        guard now.isSameVersion(of: original) else {
            return UpscaleError(.input, "'\(job.input)' changed while it was upscaled (saved over or replaced); nothing was written: run the same command again to upscale it as it is now")
        }
        return nil
    }

    func chunkPath(_ index: Int) -> String {
        (workFolder as NSString).appendingPathComponent(String(format: "chunk-%05d.chunk", index))
    }
}

/// The chunks each worker has claimed and not finished: the one it makes and the one its
/// reader went on into (`ChunkSpan`), given back together when it stops.
private final class HeldChunks: @unchecked Sendable {
    private let lock = NSLock()
    private var held: [Int: Set<Int>] = [:]

    func add(_ index: Int, worker: Int) {
        lock.lock()
        held[worker, default: []].insert(index)
        lock.unlock()
    }

    func remove(_ index: Int, worker: Int) {
        lock.lock()
        held[worker]?.remove(index)
        lock.unlock()
    }

    func take(worker: Int) -> [Int] {
        lock.lock()
        defer { lock.unlock() }
        return (held.removeValue(forKey: worker) ?? []).sorted()
    }
}

/// Frames done across chunk workers, reported as one job's progress.
private final class ChunkMeter: @unchecked Sendable {
    private let lock = NSLock()
    private var done: Int
    private var inFlight: [Int: Int] = [:]
    private let total: Int
    private let started: Date
    private let progress: (TranscodeProgress) -> Void

    init(done: Int, total: Int, started: Date, progress: @escaping (TranscodeProgress) -> Void) {
        self.done = done
        self.total = total
        self.started = started
        self.progress = progress
    }

    func reset(done: Int) {
        lock.lock()
        self.done = done
        lock.unlock()
    }

    func update(worker: Int, frames: Int) {
        lock.lock()
        inFlight[worker] = frames
        let now = done + inFlight.values.reduce(0, +)
        lock.unlock()
        progress(TranscodeProgress(framesDone: now, framesTotal: total, elapsed: Date().timeIntervalSince(started)))
    }

    func finish(worker: Int, frames: Int) {
        lock.lock()
        inFlight[worker] = nil
        done += frames
        lock.unlock()
    }
}
