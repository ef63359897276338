import Foundation
import Logging
import UpscaleMedia
import UpscaleQueue

/// Claims chunks and joins from the shared queue and runs them until stopped (or, with
/// `once`, until no work is left). Each of `slots` runs one task at a time with its share of
/// the threads. Chunk files go to the job's work folder beside its output (on storage every
/// worker reaches), named with the claim's token so a stale worker never overwrites the
/// file of the worker that took its chunk over.
public final class FarmWorker: @unchecked Sendable {
    /// Lease on a task; heartbeats renew it every `lease / 4`, the rescuer requeues tasks
    /// whose lease ran out. 60 s: a worker paused or cut off for a minute loses its task.
    public static let defaultLease = 60.0
    /// Idle workers poll this often when no NOTIFY arrives (UPSCALE_IDLE_POLL_SECONDS for tests).
    public static let idlePoll = ProcessInfo.processInfo.environment["UPSCALE_IDLE_POLL_SECONDS"].flatMap(Double.init) ?? 5.0

    public struct Stats: Sendable {
        public var chunks = 0
        public var joins = 0
        /// Finished work thrown away because the claim was no longer valid.
        public var discarded = 0
        public var failures = 0
        public var rescued = 0
    }

    private let queue: PostgresQueue
    public let name: String
    private let slots: Int
    private let map: PathMap
    private let lease: Double
    private let threads: Int
    private let planJob: (_ settings: [String], _ input: String, _ output: String) throws -> Job
    private let logger: Logger
    private let wake = DispatchSemaphore(value: 0)
    private let statsLock = NSLock()
    private var stats = Stats()
    /// Jobs whose folders this machine cannot see (a wrong --map, a share not mounted): not
    /// claimed again by this worker.
    private var blind: [Int64: String] = [:]

    /// Jobs whose encoder this machine could not open, left to other workers for
    /// `encoderRetry` seconds: a GPU out of sessions or memory is one for a while only.
    private var leftForEncoder: [Int64: (encoder: String, until: Date)] = [:]
    static let encoderRetry = 300.0

    /// The jobs this worker could not see the files of, with the folder it missed.
    public var unseen: [Int64: String] {
        statsLock.lock()
        defer { statsLock.unlock() }
        return blind
    }

    /// The jobs left to other workers now because this machine cannot open their encoder, with it.
    public var lackingEncoder: [Int64: String] {
        statsLock.lock()
        defer { statsLock.unlock() }
        return leftForEncoder.filter { $0.value.until > Date() }.mapValues(\.encoder)
    }
    private var pausedWork = false
    /// Slots running a task, and whether the heap's free pages went back since the last one
    /// ended (under `statsLock`).
    private var busySlots = 0
    private var trimmedSinceWork = true

    /// `once`: whether the worker stopped with work left on a paused queue (it waited, silent,
    /// for good: a script's `worker --once` hung).
    public var stoppedPaused: Bool {
        statsLock.lock()
        defer { statsLock.unlock() }
        return pausedWork
    }
    private var lastRescue = Date.distantPast
    /// The heartbeats of the tasks running now, by slot name.
    private var beats: [String: Heartbeat] = [:]

    /// Every running task's heartbeat renews its lease now: a task whose job was cancelled
    /// finds its token gone and stops within a second, not at its next beat.
    private func nudgeHeartbeats() {
        statsLock.lock()
        let running = Array(beats.values)
        statsLock.unlock()
        running.forEach { $0.nudge() }
    }

    /// A task's threads on this machine: its share of the machine's `threads` among `slots`
    /// tasks at once, and no more than the job was submitted with (`submit --threads N` was
    /// stored and then ignored: every worker used all its cores).
    public static func shareThreads(of job: inout Job, threads: Int, slots: Int) {
        let share = max(1, threads / max(1, slots))
        job.threads = min(job.threads, share)
        if slots > 1 || job.encoder.threads != nil { job.encoder.threads = min(job.encoder.threads ?? share, share) }
    }

    /// `planJob` turns a queued job's settings (command-line options) into this machine's Job.
    public init(queue: PostgresQueue, name: String, slots: Int, map: PathMap, lease: Double = FarmWorker.defaultLease,
                threads: Int = ProcessInfo.processInfo.activeProcessorCount,
                logger: Logger = Logger(label: "upscale.worker"),
                planJob: @escaping (_ settings: [String], _ input: String, _ output: String) throws -> Job) {
        self.queue = queue
        self.name = name
        self.slots = max(1, slots)
        self.map = map
        self.lease = lease
        self.threads = threads
        self.logger = logger
        self.planJob = planJob
    }

    public static var defaultName: String {
        var host = [CChar](repeating: 0, count: 256)
        gethostname(&host, 255)
        return "\(String(cString: host)):\(getpid())"
    }

    public func run(once: Bool, stop: CancellationFlag) throws -> Stats {
        guard try queue.holdWorkerName(name) else {
            throw FarmError("a worker named '\(name)' is already running on this queue; give this one another --name (or stop that one first)")
        }
        try queue.listen { [self] payload in
            if payload == PostgresQueue.cancelPayload { nudgeHeartbeats() } else { wake.signal() }
        }
        let group = DispatchGroup()
        let failure = FirstError()
        for slot in 0..<slots {
            group.enter()
            Thread.detachNewThread { [self] in
                defer { group.leave() }
                do { try loop(slot: slot, once: once, stop: stop) } catch {
                    failure.record(error)
                    stop.cancel()
                }
            }
        }
        while group.wait(timeout: .now() + .milliseconds(200)) == .timedOut {
            if stop.isCancelled {
                for _ in 0..<slots { wake.signal() }
                // The running tasks' heartbeats stop their pipelines now; a stop (Ctrl-C,
                // SIGTERM) took until the next beat, a quarter of the lease (15 s by default).
                statsLock.lock()
                let running = Array(beats.values)
                statsLock.unlock()
                running.forEach { $0.nudge() }
            }
        }
        // Gone from the list (a stopped worker stayed there, stale, for good).
        try? queue.removeWorker(name: name)
        if let error = failure.current { throw error }
        statsLock.lock()
        defer { statsLock.unlock() }
        return stats
    }

    private func count(_ change: (inout Stats) -> Void) {
        statsLock.lock()
        change(&stats)
        statsLock.unlock()
    }

    private func loop(slot: Int, once: Bool, stop: CancellationFlag) throws {
        let owner = "\(name)/\(slot)"
        while !stop.isCancelled {
            if Date().timeIntervalSince(lastRescue) > lease / 2 {
                lastRescue = Date()
                let rescued = try queue.rescueExpired()
                if rescued > 0 {
                    count { $0.rescued += rescued }
                    logger.notice("requeued \(rescued) task(s) whose worker stopped answering")
                }
            }
            let excluded = Array(unseen.keys) + Array(lackingEncoder.keys)
            guard let task = try queue.claim(owner: owner, lease: lease, excluding: excluded) else {
                if once, try !queue.hasOpenWork(excluding: excluded) { return }
                if once, try queue.isPaused() {
                    statsLock.lock()
                    pausedWork = true
                    statsLock.unlock()
                    return
                }
                // Idle, and alive: a worker that reported only while working showed as stale,
                // still on its last task.
                try? queue.reportWorker(name: owner, fps: nil, current: nil)
                // Out of work on every slot: the last tasks' memory goes back to the machine,
                // once (the worker keeps what an encoder frees for the next, see `ProcessMemory`).
                statsLock.lock()
                let trim = busySlots == 0 && !trimmedSinceWork
                if trim { trimmedSinceWork = true }
                statsLock.unlock()
                if trim { ProcessMemory.releaseFreeMemory() }
                _ = wake.wait(timeout: .now() + (once ? 0.5 : Self.idlePoll))
                continue
            }
            statsLock.lock()
            busySlots += 1
            trimmedSinceWork = false
            statsLock.unlock()
            defer {
                statsLock.lock()
                busySlots -= 1
                statsLock.unlock()
            }
            try perform(task, owner: owner, stop: stop)
        }
    }

    /// Runs one task under a heartbeat; the result is written only while the claim holds.
    private func perform(_ task: FarmTask, owner: String, stop: CancellationFlag) throws {
        guard let record = try queue.job(id: task.jobID) else { return }
        let input = map.apply(record.input), output = map.apply(record.output)
        let what = task.isJoin ? "join of job \(task.jobID)" : "chunk \(task.index + 1)/\(record.chunks) of job \(task.jobID)"
        if try !checkPaths(task, record: record, input: input, output: output, what: what) { return }
        try? queue.reportWorker(name: owner, fps: nil, current: what)
        let flag = CancellationFlag()
        let beat = Heartbeat()
        statsLock.lock()
        beats[owner] = beat
        statsLock.unlock()
        let started = Date()
        let beaten = DispatchSemaphore(value: 0)
        let beater = Thread { [self] in
            defer { beaten.signal() }
            while !beat.finished {
                beat.sleep(lease / 4)
                if beat.finished { break }
                if stop.isCancelled { flag.cancel() }
                do {
                    let elapsed = Date().timeIntervalSince(started)
                    let fps = elapsed > 0 ? Double(beat.frames) / elapsed : nil
                    if try !queue.heartbeat(task, lease: lease, framesDone: beat.frames, fps: fps) {
                        beat.lost = true
                        flag.cancel()
                    }
                    try? queue.reportWorker(name: owner, fps: fps, current: what)
                } catch let error as FarmError where error.nameTaken {
                    // The worker stops: its chunk with it (it encoded to the end, for nothing).
                    stop.cancel()
                    flag.cancel()
                    break
                } catch {
                    // The server is unreachable for longer than the reconnect window; keep
                    // working: the write at the end is checked against the token anyway.
                    logger.notice("heartbeat for \(what) failed: \(error)")
                }
            }
        }
        beater.start()
        defer {
            statsLock.lock()
            beats[owner] = nil
            statsLock.unlock()
            beat.finish()
            // Its last report before the next task's (or the worker's removal from the list).
            _ = beaten.wait(timeout: .now() + 5)
        }

        do {
            var job = try planJob(record.settings, input, output)
            Self.shareThreads(of: &job, threads: threads, slots: slots)
            // HEVC `auto`: the encoder the job's first chunk was made with makes this one too (on
            // a farm where some machines have a GPU encoder, chunks of two encoders do not join).
            let auto = job.encoder.codec == .hevc && job.encoder.hevcEncoder == nil
            let pinned = auto ? record.encoder : nil
            if let pinned { job.encoder.hevcEncoder = pinned }
            let work = ChunkedJob.workFolder(for: job.output)
            do {
                try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
            } catch {
                throw UpscaleError(.output, "cannot write in the output folder '\((job.output as NSString).deletingLastPathComponent)' (\(fileErrorReason(error))); make it writable for this machine or submit with another -o")
            }
            if task.isJoin {
                if try join(task, job: job, record: record, work: work, cancel: flag) { count { $0.joins += 1 } }
                return
            }
            let path = (work as NSString).appendingPathComponent(String(format: "chunk-%05d.", task.index) + task.token.prefix(8) + ".chunk")
            job.chunk = ChunkTask(range: task.range, path: path, keyframeInterval: record.longestChunk)
            logger.notice("\(owner): \(what)")
            let summary: TranscodeSummary
            do {
                summary = try Transcoder(job: job, logger: logger).run(cancel: flag) { p in beat.frames = p.framesDone }
            } catch let error as UpscaleError where pinned.map({ Transcoder.isUnavailable(error, encoder: $0) }) ?? false {
                // This machine cannot open the encoder the job's chunks are made with: left to
                // others for a while, and the job says what it waits for.
                let made = pinned!
                try queue.release(task, reason: "worker \(name) cannot open \(made)")
                statsLock.lock()
                let first = leftForEncoder.updateValue((made, Date().addingTimeInterval(Self.encoderRetry)), forKey: task.jobID) == nil
                statsLock.unlock()
                if first {
                    logger.error("\(owner): job \(task.jobID)'s chunks are made with \(made), which this machine cannot open (\(error)); leaving it to the other workers")
                    try? queue.addNote(job: task.jobID, "its chunks are made with \(made), the encoder of its first finished chunk: workers that cannot open it leave it to those that can (to make it on any machine, cancel it and submit it again with --encoder libx265)")
                }
                return
            }
            if beat.lost {
                unlink(path)
                count { $0.discarded += 1 }
                return
            }
            let notes = Transcoder.droppedNotes(record.input, codec: job.encoder.codec, captions: summary.droppedCaptions,
                                                hdr10Plus: summary.droppedHDR10Plus)
            for note in notes { logger.notice("\(what): \(note)") }
            switch try queue.complete(task, checksum: summary.checksum, seconds: summary.seconds, notes: notes,
                                      encoder: auto ? summary.encoderName : nil) {
            case .done:
                count { $0.chunks += 1 }
            case .stale:
                unlink(path)
                count { $0.discarded += 1 }
            case .otherEncoder(let made):
                // Another worker's chunk of this job finished first, with another encoder.
                unlink(path)
                count { $0.discarded += 1 }
                logger.notice("\(what) was made with \(summary.encoderName), the job's other chunks with \(made); queued again to be made with it")
            }
        } catch {
            if let lost = error as? FarmError, lost.nameTaken { throw lost }
            if beat.lost {
                count { $0.discarded += 1 }
                if (try? queue.job(id: task.jobID))??.state == "cancelled" {
                    logger.notice("\(what): job \(task.jobID) was cancelled; stopped")
                } else {
                    logger.notice("\(what): lease lost (taken over by another worker); discarded")
                }
                return
            }
            if stop.isCancelled {
                // Shutting down: the task goes back without counting against it.
                try queue.release(task, reason: "worker \(owner) stopped")
                return
            }
            count { $0.failures += 1 }
            // An input saved over while the chunk read it fails as such (it was "damaged there —
            // re-export or trim the source"). One no longer seen (a share gone mid-chunk) takes
            // the usual way: the next claim's check leaves the job to other workers.
            if let now = InputIdentity.of(input), let problem = Self.inputProblem(record, input: input, now: now) {
                logger.error("\(what) failed: \(problem)")
                try queue.fail(task, reason: problem, retry: false)
                return
            }
            logger.error("\(what) failed: \(error)")
            let unrecoverable = (error as? UpscaleError).map { $0.kind == .input || $0.kind == .usage } ?? false
            try queue.fail(task, reason: "\(error)", retry: !unrecoverable)
        }
    }

    /// Whether this machine sees the job's files as submitted. A folder it cannot see (a wrong
    /// --map, a share not mounted: missing, or an empty mount point) is this machine's problem:
    /// the task goes back uncounted, and this worker leaves the job to others and goes on with
    /// the rest (it failed every job of the farm in seconds, three attempts each). An input
    /// changed since it was submitted, or gone from a folder this machine sees, fails the job
    /// at once (a re-export mid-job gave an output half of the old file, half of the new).
    private func checkPaths(_ task: FarmTask, record: FarmJob, input: String, output: String, what: String) throws -> Bool {
        let inputFolder = (input as NSString).deletingLastPathComponent
        let outputFolder = (output as NSString).deletingLastPathComponent
        let now = InputIdentity.of(input)
        let missing = !JobPlanner.isDirectory(outputFolder) ? outputFolder : !JobPlanner.isDirectory(inputFolder) ? inputFolder
            : now == nil && ((try? FileManager.default.contentsOfDirectory(atPath: inputFolder))?.isEmpty ?? true) ? inputFolder : nil
        if let missing {
            // An empty folder is an unmounted share's mount point, or a folder whose only file
            // was removed since: said both ways (it blamed --map alone, and the job waits).
            let empty = JobPlanner.isDirectory(missing) ? " (it is empty here: a share not mounted, or '\((input as NSString).lastPathComponent)' was removed since it was submitted; then cancel job \(task.jobID))" : ""
            try leave(task, reason: "cannot see '\(missing)'", blind: "'\(missing)'",
                      log: "this machine cannot see '\(missing)'\(empty) (job \(task.jobID)); check --map and that the share is mounted — the job is left to other workers")
            return false
        }
        // A folder it sees but cannot write in (a share mounted read-only on this machine) is
        // this machine's problem as well: it took the task again at once, three times, and
        // one such node failed every job of the farm within seconds.
        if let reason = Self.writeProblem(in: outputFolder) {
            try leave(task, reason: "cannot write in '\(outputFolder)' (\(reason))", blind: "'\(outputFolder)': cannot write there (\(reason))",
                      log: "this machine cannot write in '\(outputFolder)' (\(reason)) (job \(task.jobID)); check that the share is mounted read-write here — the job is left to other workers")
            return false
        }
        if let problem = Self.inputProblem(record, input: input, now: now) {
            logger.error("\(what) failed: \(problem)")
            try queue.fail(task, reason: problem, retry: false)
            count { $0.failures += 1 }
            return false
        }
        return true
    }

    /// Why `input` is no longer the file submitted (gone, or saved again), or nil.
    static func inputProblem(_ record: FarmJob, input: String, now: InputIdentity?) -> String? {
        guard let now else { return "'\(input)' is gone since it was submitted; submit it again if it comes back" }
        guard let submitted = record.identity, !submitted.matches(now) else { return nil }
        // Said by what changed: "(1250805 bytes then, 1250805 now)" read as unchanged.
        let what = submitted.size != now.size ? "\(submitted.size) bytes then, \(now.size) now"
            : "saved again at \(Self.timeText(now.modified)), after it was submitted at \(Self.timeText(submitted.modified))"
        return "'\(input)' changed since it was submitted (\(what)); submit it again"
    }

    /// This machine's problem with a task's files: the task goes back uncounted (`reason`, after
    /// the worker's name), its job is left to other workers (`blind`: what the worker's last
    /// line names for it, quoted paths and all), and `log` is said the first time.
    private func leave(_ task: FarmTask, reason: String, blind what: String, log: String) throws {
        try queue.release(task, reason: "worker \(name) \(reason)")
        statsLock.lock()
        let first = blind.updateValue(what, forKey: task.jobID) == nil
        statsLock.unlock()
        if first { logger.error("\(log)") }
    }

    /// A file time as people read it, to the second, in this machine's time zone.
    static func timeText(_ seconds: Double) -> String {
        let format = DateFormatter()
        format.dateFormat = "yyyy-MM-dd HH:mm:ss"
        return format.string(from: Date(timeIntervalSince1970: seconds))
    }

    /// Why nothing can be made in `folder` (a read-only file system, no permission), found by
    /// making and removing a hidden file there; nil when it can be written.
    public static func writeProblem(in folder: String) -> String? {
        let probe = (folder as NSString).appendingPathComponent(".upscale-write-check.\(getpid()).\(UInt32.random(in: 0...UInt32.max))")
        let fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            return [EROFS, EACCES, EPERM].contains(errno) ? String(cString: strerror(errno)) : nil
        }
        close(fd)
        unlink(probe)
        return nil
    }

    /// The join: every chunk's file as recorded (checksum), in order, into the output. False
    /// when chunk files were missing: those are queued again, and the join after them.
    private func join(_ task: FarmTask, job: Job, record: FarmJob, work: String, cancel: CancellationFlag) throws -> Bool {
        let sums = try queue.chunkChecksums(job: task.jobID)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: work)) ?? []
        var paths: [String] = []
        var missing: [Int] = []
        for index in 0..<record.chunks {
            let prefix = String(format: "chunk-%05d.", index)
            let candidates = names.filter { $0.hasPrefix(prefix) && $0.hasSuffix(".chunk") }
                .map { (work as NSString).appendingPathComponent($0) }
            if let sum = sums[index], let match = candidates.first(where: { ContentHash.of(file: $0) == sum }) {
                paths.append(match)
            } else {
                missing.append(index)
            }
        }
        if !missing.isEmpty {
            for index in missing { try queue.redo(job: task.jobID, index: index, reason: "chunk file missing or damaged at the join") }
            // The join waits for them (claimed only once every chunk is done). Its attempt
            // counts: chunk files that never reach the machine that joins fail the job.
            try queue.fail(task, reason: "\(missing.count) chunk file(s) missing or damaged; queued again", retry: true)
            logger.notice("\(missing.count) chunk file(s) of job \(task.jobID) are missing or damaged in '\(work)'; they are queued again, the join after them")
            return false
        }
        if !job.overwrite, FileManager.default.fileExists(atPath: job.output) {
            // A join whose worker died after it put the output in place, before that was
            // recorded: the rescued join found it and failed three times ("appeared while
            // upscaling"), for good. An output with the very packets this join makes is this
            // job's own; anything else is a stranger's file and stays untouched (the join fails).
            var check = job
            let url = URL(fileURLWithPath: job.output)
            check.output = url.deletingLastPathComponent().appendingPathComponent(".\(url.deletingPathExtension().lastPathComponent).check-\(getpid()).\(url.pathExtension)").path
            check.overwrite = true
            defer { unlink(check.output) }
            _ = try Transcoder(job: check, logger: logger).join(chunks: paths, cancel: cancel)
            if Self.samePackets(check.output, job.output) {
                logger.notice("'\(job.output)' is the output of this job's join, whose worker stopped before recording it; recorded as done")
                return try markJoined(task, work: work, output: job.output, placed: nil)
            }
            // Failed at once, with what can be done here: it failed three times, each after a
            // trial join, saying "use --overwrite", which a queued job cannot take.
            throw UpscaleError(.usage, "'\(job.output)' appeared while upscaling and is not this job's output; left it untouched: remove or rename it, then run 'upscale queue retry \(task.jobID)' (the chunks are kept)")
        }
        _ = try Transcoder(job: job, logger: logger).join(chunks: paths, cancel: cancel)
        // The file this join placed, to remove it only as it is if the job turns out cancelled.
        var placed = stat()
        let made = stat(job.output, &placed) == 0 ? placed : nil
        if TestHook.current == .crashAfterJoin { kill(getpid(), SIGKILL) }
        TestHook.pauseIfBeforeRecording()
        return try markJoined(task, work: work, output: job.output, placed: made)
    }

    /// Whether two files hold the same streams with the same packets (their containers may
    /// differ in what the muxer draws at random, as Matroska's identifiers).
    static func samePackets(_ a: String, _ b: String) -> Bool {
        guard let x = try? MediaProbe.info(a), let y = try? MediaProbe.info(b), x.streams.count == y.streams.count else { return false }
        for index in 0..<x.streams.count {
            guard let p = try? MediaProbe.packets(a, stream: index), let q = try? MediaProbe.packets(b, stream: index), p.count == q.count,
                  zip(p, q).allSatisfy({ $0.pts == $1.pts && $0.dts == $1.dts && $0.size == $1.size && $0.checksum == $1.checksum }) else { return false }
        }
        return true
    }

    /// The join's end: marked done (and its work folder removed) while its claim holds.
    /// `placed`: the file this join put at `output` (nil for one found there, an earlier
    /// worker's join of the same chunks).
    private func markJoined(_ task: FarmTask, work: String, output: String, placed: stat?) throws -> Bool {
        switch try queue.complete(task, checksum: 0, seconds: 0) {
        case .done:
            try? FileManager.default.removeItem(atPath: work)
        case .stale where (try? queue.job(id: task.jobID))??.state == "cancelled":
            // Cancelled after the join's last look for a stop, before it was recorded: a
            // cancelled job leaves no output. Its chunks stay for a `queue retry`, as those of
            // a job cancelled earlier do. Only the very file this join placed is removed, and
            // not once a later job writes there: a worker held up here (stopped, a long
            // reconnect) may find at that path a newer job's output, or this file taken over
            // by a newer job of the same chunks as its own join's.
            count { $0.discarded += 1 }
            var now = stat()
            if let placed, stat(output, &now) == 0, now.isSameVersion(of: placed),
               (try? queue.laterJob(writing: output, after: task.jobID)) == false, unlink(output) == 0 {
                logger.notice("job \(task.jobID) was cancelled as its join ended; removed its output '\(output)'")
            } else {
                logger.notice("job \(task.jobID) was cancelled as its join ended")
            }
            return false
        case .stale, .otherEncoder:
            // Another worker took the join over; its output is as good as this one.
            count { $0.discarded += 1 }
            return false
        }
        return true
    }
}

private final class Heartbeat: @unchecked Sendable {
    private let lock = NSLock()
    private let signal = DispatchSemaphore(value: 0)
    private var _frames = 0, _lost = false, _finished = false
    var frames: Int {
        get { lock.lock(); defer { lock.unlock() }; return _frames }
        set { lock.lock(); _frames = newValue; lock.unlock() }
    }
    var lost: Bool {
        get { lock.lock(); defer { lock.unlock() }; return _lost }
        set { lock.lock(); _lost = newValue; lock.unlock() }
    }
    var finished: Bool { lock.lock(); defer { lock.unlock() }; return _finished }
    func finish() {
        lock.lock()
        _finished = true
        lock.unlock()
        signal.signal()
    }
    func sleep(_ seconds: Double) { _ = signal.wait(timeout: .now() + seconds) }
    /// Ends the current (or next) sleep early.
    func nudge() { signal.signal() }
}
