import Foundation
import UpscaleImages
import UpscaleMedia

/// How a folder is watched.
public struct WatchConfiguration: Sendable {
    public var folder: WatchFolder
    /// Encode options for jobs queued from now on, as command-line arguments.
    public var settings: [String]
    /// The `upscale` binary that runs each job.
    public var executable: String
    public var jobs = 1
    public var once = false
    public var settle = 5.0
    /// How long after its last change an unfinished file (an .mp4/.mov without its index, a
    /// file shorter than its header says, a Matroska/WebM file whose length is left open) is
    /// looked at again rather than failed or taken as it is: a copy that paused (a network
    /// drive, a laptop asleep) or a recording under way ends it later. Not with `once`.
    public var unfinishedWait = WatchConfiguration.defaultUnfinishedWait
    public static let defaultUnfinishedWait = 600.0

    /// Whether a file last changed at `modified` is still within `wait` of its change (a time
    /// ahead of the clock, another machine's, by more than the wait is not).
    public static func changedWithin(_ wait: Double, modified: Double, now: Double) -> Bool {
        abs(now - modified) < wait
    }

    /// A wait as the watchers say it: "10 min" for whole minutes from two on, else "150 s"
    /// (under a second: "0.3 s").
    public static func spoken(_ seconds: Double) -> String {
        if seconds >= 120, seconds.truncatingRemainder(dividingBy: 60) == 0 { return "\(Int(seconds / 60)) min" }
        return seconds < 1 ? String(format: "%.1f s", seconds) : "\(Int(seconds.rounded())) s"
    }
    public var recursive = false
    public var execAfter: String?
    /// A child that reports no new frame for this long is killed and its job retried.
    public var stallSeconds = 600.0
    public var poll = 1.0
    /// How often a job waiting for disk space is tried again.
    public var spaceRetry = 60.0
    /// How often a vanished folder is looked for again.
    public var unavailableRetry = 30.0
    public var lease = 30.0
    public var maxAttempts = 3
    /// First retry delay of a transient failure; doubled each attempt.
    public var backoff = 10.0
    /// Environment added to each job's child (the tests' fault hooks).
    public var childEnvironment: [String: String] = [:]
    /// How long a job's child that a killed watcher left running is waited for at start
    /// before it is ended (see `JobLock`).
    public var orphanGrace = 120.0

    public init(folder: WatchFolder, settings: [String], executable: String) {
        self.folder = folder
        self.settings = settings
        self.executable = executable
    }
}

/// Turns files dropped into a folder into jobs and runs them, each in its own child
/// process, until stopped (or, with `once`, until nothing is left to do).
public final class Watcher: @unchecked Sendable {
    public static let videoExtensions: Set<String> = ["mov", "mp4", "m4v", "mkv", "avi", "webm", "mpg", "mpeg", "ts", "mts",
                                                      "m2ts", "flv", "wmv", "3gp", "mxf", "dv", "ogv", "vob", "y4m", "qt"]
    static let junkNames: Set<String> = [".ds_store", "thumbs.db", "desktop.ini"]
    static let junkSuffixes = [".part", ".crdownload", ".tmp", ".!qb", ".partial", ".download"]

    let config: WatchConfiguration
    let store: JobStore
    private let say: @Sendable (String) -> Void
    private let settler: FileSettler
    private let owner = "\(ProcessInfo.processInfo.hostName):\(getpid())"
    private let lock = NSLock()
    /// The running jobs, by run: a job cancelled and retried at once has two for a moment.
    private var running: [ObjectIdentifier: RunningJob] = [:]
    private var ignoredOnce: Set<String> = []
    /// Whether a file whose name says no format is a picture, by its first bytes, for the size
    /// and time it had then: read once, not at every scan (2000 sidecar files were opened
    /// 2000 times a second).
    private var sniffed: [String: (size: Int64, modified: Double, picture: Bool)] = [:]
    /// The notes said of each job (by id): a job run again (after a full disk) said them again.
    private var notesSaid: Set<String> = []
    private let notesLock = NSLock()
    /// Files the store would not queue again as they are (a cancelled job's, or one whose
    /// original could not be moved out), by their size and modification time: left alone
    /// until they change. Settled again at every scan, two of them whose settling had started
    /// at different scans were never both done with it, and a once-run never ended.
    private var refused: [String: (size: Int64, modified: Double)] = [:]
    /// Names that two files in the folder share in Swift's sense (see `candidates`), said once.
    private var twinsSaid: Set<String> = []
    private var failedThisRun = 0
    private var folderWasAvailable = true
    private lazy var planner = JobPlanning(watcher: self)
    /// Signalled when a job ends, so the next one starts at once.
    private let jobEnded = DispatchSemaphore(value: 0)

    public init(config: WatchConfiguration, store: JobStore, say: @escaping @Sendable (String) -> Void) {
        self.config = config
        self.store = store
        self.say = say
        settler = FileSettler(settle: config.settle)
    }

    /// Runs until `stop` is set (then the running jobs are stopped and queued again) or, with
    /// `once`, until no job is queued or running and no file is settling. Returns the exit
    /// status: 0, or 1 when a job failed in a `once` run.
    public func run(stop: CancellationFlag) throws -> Int32 {
        // This process holds the folder's lock: every running job in the store belongs to a
        // watcher that is gone. Their children may not be gone yet (one placing its output
        // goes on after its watcher's death): they are waited for. Then a job whose child
        // placed its output is finished from it, and the others run again from the start.
        guard let runs = JobLock.waitForAll(folder: config.folder, grace: config.orphanGrace, stop: stop, say: say) else { return 0 }
        let now = Date().timeIntervalSince1970
        for job in try store.list() where job.state == .running {
            // What its child recorded. A run that started no child has nothing to finish (the
            // store's output may be an earlier attempt's).
            let recorded = runs.unknown ? job.output.map { JobLock.Recorded(output: config.folder.path($0)) } : runs.outputs[job.id] ?? nil
            // (Recorded by the path the last watcher was given: a watcher started through a link
            // to the folder, or on its real path after one was, ran the job again beside its output.)
            if let output = recorded?.placed, let relative = config.folder.relativeAnyWay(output) {
                try store.markFinishing(id: job.id, output: relative, now: now)
            }
        }
        let abandoned = try store.requeueAbandoned(id: nil, now: now)
        if abandoned > 0 { say("\(abandoned) job(s) interrupted by the last watcher go back to the queue") }
        try recoverFinishing()
        // Only now that the store has what they said (a write above could fail: the disk a
        // stopped watcher could not record a result on may still be full).
        runs.removeFiles()
        for folder in [config.folder.originals, config.folder.failed] { SafeFiles.removeStaleCopies(under: folder) }
        var lastRescan = 0.0
        while !stop.isCancelled {
            let now = Date().timeIntervalSince1970
            guard config.folder.isAvailable else {
                if folderWasAvailable {
                    say("'\(config.folder.root)' is not reachable (unmounted or renamed?); pausing, nothing in the queue changes; retrying every \(Int(config.unavailableRetry)) s")
                    folderWasAvailable = false
                }
                sleepWatching(config.unavailableRetry, stop: stop)
                continue
            }
            if !folderWasAvailable {
                say("'\(config.folder.root)' is back; resuming")
                folderWasAvailable = true
            }
            do {
                // A job whose output is in place while the store could not be written (its
                // lease ran out meanwhile) stays its run's: taken again, it was made again.
                let jobs = lock.withLock { Array(running.values) }
                _ = try store.requeueExpired(now: now, sparing: Set(jobs.filter(\.isRecording).map(\.claim.job.id)))
                // While files are settling, look again sooner (a settle time under the poll interval is honoured).
                let rescan = settler.pending > 0 ? max(0.1, min(config.poll, config.settle / 2)) : config.poll
                if now - lastRescan >= rescan {
                    try scan(now: now)
                    recoverLeftFinishing()
                    lastRescan = now
                    // A paused queue gave no sign: files were queued and nothing started.
                    let paused = try store.isPaused()
                    if paused != (wasPaused ?? false) {
                        if paused { say("the queue is paused: no job starts until 'upscale queue resume \(config.folder.root)'") }
                        else if wasPaused != nil { say("the queue was resumed") }
                    }
                    wasPaused = paused
                }
                while runningCount < config.jobs, !stop.isCancelled, let claim = try store.claim(owner: owner, lease: config.lease, now: now) {
                    start(claim)
                }
            } catch let error as SQLiteError where error.diskFull && !config.once {
                // The watcher ended here (a service restarted it into the same error); running
                // jobs go on, and nothing is taken or changed until the queue can be written.
                if !storeWasFull {
                    say("the disk holding '\(config.folder.state)' is full: no new file is queued or started until there is room (free some space); retrying every \(Int(config.unavailableRetry)) s")
                    storeWasFull = true
                }
                sleepWatching(config.unavailableRetry, stop: stop)
                continue
            }
            if storeWasFull {
                say("the queue can be written again; resuming")
                storeWasFull = false
            }
            if config.once && runningCount == 0 && settler.pending == 0 {
                let open = try store.list().filter(\.state.isOpen)
                // Jobs waiting out a retry delay still count; a paused queue ends a once-run.
                let paused = try store.isPaused()
                // Jobs waiting for space end a once-run too (cron comes back later).
                if open.isEmpty || open.allSatisfy({ $0.state == .waitingForSpace })
                    || (paused && open.allSatisfy { $0.state == .queued || $0.state == .waitingForSpace }) { break }
            }
            _ = jobEnded.wait(timeout: .now() + min(config.poll, 0.1))
        }
        if stop.isCancelled {
            let jobs = lock.withLock { Array(running.values) }
            if !jobs.isEmpty { say("stopping: \(jobs.count) running job(s) go back to the queue") }
            jobs.forEach { $0.stopForShutdown() }
        }
        while runningCount > 0 { usleep(50_000) }
        // --exec-after commands still running: waited for (a once-run ends with them done), or
        // stopped with the watcher (they were left running, and a slow one held its job's slot
        // and the watcher's exit).
        hooks.finish(stop: stop, say: say)
        planner.waitIdle()
        return config.once && failedThisRun > 0 ? 1 : 0
    }

    private var runningCount: Int { lock.withLock { running.count } }
    /// The last write to the store failed for a full disk (said once until it works again).
    private var storeWasFull = false
    /// Whether the queue was paused at the last look (nil: not looked yet).
    private var wasPaused: Bool?

    let hooks = Hooks()

    private func sleepWatching(_ seconds: Double, stop: CancellationFlag) {
        let end = Date().addingTimeInterval(seconds)
        while Date() < end && !stop.isCancelled { usleep(50_000) }
    }

    // MARK: scanning

    /// A picture whose name says no format, known by its first bytes (cached while the file
    /// keeps its size and time). Camera raw files (TIFF inside, refused by a job) and camera
    /// sidecars (.THM: a JPEG thumbnail beside its clip) stay where they are, as before.
    private func isPictureByContent(_ rel: String, path: String, ext: String, info: stat) -> Bool {
        guard !StillImage.rawExtensions.contains(ext), !Self.sidecarExtensions.contains(ext) else { return false }
        let size = Int64(info.st_size), modified = info.modificationTime
        if let known = sniffed[rel], known.size == size, known.modified == modified { return known.picture }
        let picture = StillImage.contentExtension(path) != nil
        sniffed[rel] = (size, modified, picture)
        return picture
    }

    static let sidecarExtensions: Set<String> = ["thm", "xmp", "lrv", "lrf", "srt", "txt", "json", "xml"]

    /// Whether `text` is a note not yet said of job `id`.
    func firstTime(note text: String, job id: Int64) -> Bool {
        notesLock.withLock { notesSaid.insert("\(id)\u{0}\(text)").inserted }
    }

    /// Relative paths of candidate files with their size and modification time.
    private func candidates() -> [String: (size: Int64, modified: Double)] {
        var found: [String: (Int64, Double)] = [:]
        // Files whose name another file's equals in Swift's sense but not in bytes.
        var twins: [String] = []
        let root = config.folder.root
        func walk(_ relative: String) {
            let dir = relative.isEmpty ? root : root + "/" + relative
            guard let (names, undecodable) = Self.names(in: dir) else { return }
            // A name that is not UTF-8 (from an old Latin-1 system or archive) cannot be named to
            // FFmpeg or the store: said once, instead of being passed over without a word.
            for raw in undecodable {
                sayOnce(about: relative + "/" + raw, "ignoring '\(relative.isEmpty ? "" : relative + "/")\(raw)': its name is not UTF-8; rename it to have it upscaled")
            }
            for name in names {
                if relative.isEmpty && WatchFolder.ownFolders.contains(name) { continue }
                let rel = relative.isEmpty ? name : relative + "/" + name
                var info = stat()
                guard lstat(dir + "/" + name, &info) == 0 else { continue }
                if (info.st_mode & S_IFMT) == S_IFDIR {
                    // A folder with its own queue is another watch folder (watched now or before):
                    // its Upscaled/ results were upscaled again here and its originals moved away.
                    if config.recursive && !name.hasPrefix(".") {
                        if access(dir + "/" + name + "/.upscale", F_OK) == 0 {
                            sayOnce(about: rel, "ignoring '\(rel)': it is a watch folder of its own (it has .upscale/)")
                        } else {
                            walk(rel)
                        }
                    } else if !config.recursive && !name.hasPrefix(".") && access(dir + "/" + name + "/.upscale", F_OK) != 0 {
                        // A folder dropped in was passed over without a word.
                        sayOnce(about: rel, "ignoring the folder '\(rel)': watch with --recursive to take the files in folders")
                    }
                    continue
                }
                guard !Self.isJunk(name) else { continue }
                guard (info.st_mode & S_IFMT) == S_IFREG else {
                    // A link would be upscaled and then moved, not the file it names: said once.
                    if (info.st_mode & S_IFMT) == S_IFLNK { sayOnce(about: rel, "ignoring '\(rel)': a symbolic link (drop the file itself)") }
                    continue
                }
                let ext = URL(fileURLWithPath: name).pathExtension.lowercased()
                // (A Radiance picture by its first bytes: other .hdr files are headers beside their data.
                // A picture whose name says no format, such as "IMG_1.JPG_original" or one with no
                // extension, by its first bytes too, as the plain command takes it: it was ignored.)
                guard Self.videoExtensions.contains(ext) || StillImage.extensions.contains(ext) || ext == "hdr" && StillImage.isStill(dir + "/" + name)
                        || isPictureByContent(rel, path: dir + "/" + name, ext: ext, info: info) else {
                    sayOnce(about: rel, "ignoring '\(rel)': not a video or image file")
                    continue
                }
                // An empty file is a placeholder (Firefox makes one, then renames its .part download
                // over it) or a copy not begun: it waits for content instead of failing.
                guard info.st_size > 0 else {
                    sayOnce(about: rel, "waiting for '\(rel)': it is empty (0 bytes) so far")
                    continue
                }
                // Swift's strings are equal when their names differ only in Unicode normalisation
                // ("café" composed, as Linux and Windows write it, or decomposed, as macOS does):
                // two such files were one entry, taken as one job that then "was replaced", made
                // two outputs of one of them and left the other. Both are left until one is renamed.
                if let at = found.index(forKey: rel), !found[at].key.utf8.elementsEqual(rel.utf8) {
                    twins.append(rel)
                    continue
                }
                ignoredOnce.remove(rel)
                found[rel] = (Int64(info.st_size), info.modificationTime)
            }
        }
        walk("")
        // One entry per name as Swift compares them: each such name is said once while it clashes,
        // and again if it clashes after one of the pair was renamed.
        let clashing = Set(twins)
        for rel in clashing {
            found[rel] = nil
            if !twinsSaid.contains(rel) { say("ignoring '\(rel)': another file in the folder has the same name with its accents written in other Unicode code points (NFC and NFD); rename one of them to have both upscaled") }
        }
        twinsSaid = clashing
        return found
    }

    /// Says `text` the first time a scan finds `key` (a file left alone is named once).
    private func sayOnce(about key: String, _ text: String) {
        if ignoredOnce.insert(key).inserted { say(text) }
    }

    /// The names in `dir`: those that are UTF-8, and the others with their odd bytes as \xNN.
    static func names(in dir: String) -> ([String], [String])? {
        guard let handle = opendir(dir) else { return nil }
        defer { closedir(handle) }
        var valid: [String] = [], undecodable: [String] = []
        while let entry = readdir(handle) {
            let bytes = withUnsafeBytes(of: entry.pointee.d_name) { Array($0.prefix { $0 != 0 }) }
            if bytes == [0x2E] || bytes == [0x2E, 0x2E] { continue }
            if let name = String(validating: bytes, as: UTF8.self) {
                valid.append(name)
            } else {
                undecodable.append(bytes.map { $0 < 0x80 ? String(UnicodeScalar($0)) : String(format: "\\x%02x", $0) }.joined())
            }
        }
        return (valid, undecodable)
    }

    static func isJunk(_ name: String) -> Bool {
        let lower = name.lowercased()
        return name.hasPrefix(".") || junkNames.contains(lower) || junkSuffixes.contains { lower.hasSuffix($0) } || name.hasPrefix("~$")
    }

    private func scan(now: Double) throws {
        let files = candidates()
        let active = Set(try store.list().filter(\.state.isOpen).map(\.source))
        refused = refused.filter { rel, was in files[rel].map { $0.size == was.size && $0.modified == was.modified } ?? false }
        let waiting = files.filter { !active.contains($0.key) && refused[$0.key] == nil }
        guard !waiting.isEmpty else {
            _ = settler.settled([:], now: now, network: false, openForWriting: [])
            return
        }
        let writers = OpenWriters.scan(under: config.folder.root)
        let writing = Set(waiting.keys.filter { writers.contains(config.folder.path($0)) })
        let network = isNetworkFilesystem(config.folder.root)
        for rel in settler.settled(waiting, now: now, network: network, openForWriting: writing) {
            let stat = waiting[rel]!
            if let job = try store.enqueue(source: rel, size: stat.size, modified: stat.modified, settings: config.settings) {
                say("queued '\(rel)' (\(Self.megabytes(stat.size)), job \(job.id))")
                planner.add(job)
            } else {
                refused[rel] = (stat.size, stat.modified)
            }
            settler.forget(rel)
        }
    }

    static func megabytes(_ bytes: Int64) -> String { String(format: "%.1f MB", Double(bytes) / 1_000_000) }

    // MARK: running

    private func start(_ claim: JobClaim) {
        let job = RunningJob(claim: claim, watcher: self)
        let key = ObjectIdentifier(job)
        lock.withLock { running[key] = job }
        Thread.detachNewThread {
            // A job cancelled and retried at once, claimed again by another slot while its last
            // run is still stopping (a second at most, or finishing its output): the new run
            // starts once the last one has ended and removed what it placed, or it would have
            // planned around that output and been numbered ('… Upscaled 2').
            while self.lock.withLock({ self.running.values.contains { $0 !== job && $0.claim.job.id == claim.job.id } }) {
                usleep(50_000)
            }
            if !job.releasedOnShutdown() { job.run() }
            self.lock.withLock { self.running[key] = nil }
            self.jobEnded.signal()
        }
    }

    func jobFailed() { lock.withLock { failedThisRun += 1 } }

    /// What was said of a job that is looked at again and again ("\(id) unfinished", "\(id)
    /// changed"): said once, not at every look, until the job ends or its file changes.
    private var said: Set<String> = []

    /// Says `text` unless `what` was said of job `id` since it was last forgotten.
    func sayOnce(job id: Int64, _ what: String, _ text: String) {
        if lock.withLock({ said.insert("\(id) \(what)").inserted }) { say(text) }
    }

    func wasSaid(_ id: Int64, _ what: String) -> Bool { lock.withLock { said.contains("\(id) \(what)") } }

    /// Forgets what was said of job `id` (`what`, or everything).
    func forgetSaid(_ id: Int64, _ what: String? = nil) {
        lock.withLock { said = said.filter { !($0.hasPrefix("\(id) ") && (what == nil || $0 == "\(id) \(what!)")) } }
    }

    func log(_ text: String) { say(text) }

    /// A job its run left "finishing" (a write after its output was checked failed, the disk
    /// full) is finished as at a start, at each look at the folder: it stayed so until the
    /// next start, its file was not taken again, and a `--once` run never ended. Jobs still
    /// running are spared (their ids read first: a run takes its job out once done with it).
    /// A store that cannot be written yet is tried again at the next look (thrown, it ended a
    /// `--once` run without waiting for its running jobs).
    private func recoverLeftFinishing() {
        let held = Set(lock.withLock { running.values.map(\.claim.job.id) })
        try? recoverFinishing(sparing: held)
    }

    /// Jobs whose child succeeded but whose finish (check, move of the original) was cut
    /// short by a crash: finished now from what the store recorded.
    private func recoverFinishing(sparing held: Set<Int64> = []) throws {
        for job in try store.jobs(in: .finishing) where !held.contains(job.id) {
            let source = config.folder.path(job.source)
            let now = Date().timeIntervalSince1970
            let file = WatchFolder.stamp(of: source)
            if let file, file.size != job.size || file.modified != job.modified {
                // Replaced while it was upscaled (as `finishSucceeded` finds it): the output, of the
                // version queued, stays, and the file runs again as it is now. It was moved to
                // Originals/ as done, never upscaled.
                _ = try store.requeueAbandoned(id: job.id, now: now)
                say("job \(job.id) ('\(job.source)') was interrupted while finishing, and its file has changed since it was queued; it runs again")
                continue
            }
            if file != nil {
                // (Its planned size, stored with its run's last writes: an output of another size
                // failed its check; without it, one that could not be moved aside was kept.)
                let planned = job.outputWidth.flatMap { w in job.outputHeight.map { (width: w, height: $0) } }
                guard let output = job.output, (try? Self.check(output: config.folder.path(output), source: source, planned: planned, frames: nil)) != nil else {
                    // No finished output to keep: run the job again (a partial one is moved aside, never used).
                    if let output = job.output, FileManager.default.fileExists(atPath: config.folder.path(output)) {
                        _ = try? SafeFiles.move(config.folder.path(output), into: config.folder.failed)
                    }
                    _ = try store.requeueAbandoned(id: job.id, now: now)
                    say("job \(job.id) ('\(job.source)') was interrupted while finishing; it runs again")
                    continue
                }
                // A chunked job's child killed after its join placed the output (stuck, ended by
                // this watcher's start) left its chunks, hidden under Upscaled/ for good.
                ChunkedJob.removeLeftWork(for: config.folder.path(output))
                do {
                    let moved = try SafeFiles.move(source, into: config.folder.mirror(config.folder.originals, of: job.source))
                    say("recovered job \(job.id): '\(output)' checked, original moved to '\(moved)'")
                } catch {
                    // As when finishing: it stays, and is not taken again (this threw, and the
                    // watcher could not start at all).
                    try store.markStayed(id: job.id)
                    say("recovered job \(job.id): '\(output)' checked; '\(job.source)': \(error); the original stays in place and is not taken again unless it changes")
                }
            }
            try store.finish(id: job.id, now: now)
        }
    }

    /// The output opens, has the planned picture size, as many frames as the job wrote, and
    /// lasts as long as the input (within a second or three frames).
    static func check(output: String, source: String, planned: (width: Int, height: Int)?, frames: Int?) throws {
        let name = URL(fileURLWithPath: output).lastPathComponent
        if StillImage.isStill(output) {
            // A still: libvips opens it and it has the planned size.
            let still = try StillImage(path: output)
            if let planned, still.width != planned.width || still.height != planned.height {
                throw WatchError("the output '\(name)' is \(still.width)x\(still.height), not the planned \(planned.width)x\(planned.height)")
            }
            return
        }
        let info = try MediaProbe.info(output)
        guard let video = info.video else { throw WatchError("the output '\(name)' has no video") }
        if let planned, video.width != planned.width || video.height != planned.height {
            throw WatchError("the output '\(name)' is \(video.width)x\(video.height), not the planned \(planned.width)x\(planned.height)")
        }
        let packets = try MediaProbe.packets(output, stream: video.index).count
        if let frames, packets != frames {
            throw WatchError("the output '\(name)' has \(packets) frames; the job wrote \(frames)")
        }
        guard try MediaProbe.decodeTail(output) > 0 else {
            throw WatchError("the last seconds of the output '\(name)' decode to no picture")
        }
        if let input = try? MediaProbe.info(source), input.duration > 0, info.duration > 0 {
            let frame = video.frameRate > 0 ? 1 / video.frameRate : 0.1
            let close = { (seconds: Double) in abs(seconds - info.duration) <= max(1.0, 3 * frame) }
            // An MPEG-TS/PS whose clock jumps says it lasts from its first time to its last
            // (5000 s for two clips joined): the output runs as the mended clock does.
            guard close(input.duration) || (try? MediaProbe.mendedVideoSeconds(source)).flatMap({ $0 }).map(close) == true else {
                throw WatchError("the output '\(name)' lasts \(String(format: "%.2f", info.duration)) s, the input \(String(format: "%.2f", input.duration)) s")
            }
        }
    }
}

/// Plans queued jobs in the background, each in a child process (`--child-plan-only`: the
/// output size and frame count, no work, at the lowest CPU priority), so `queue list` can
/// estimate the whole queue. Only a job still queued after `delay` seconds is planned: one that
/// starts at once needs no estimate, and planning it would take CPU from the jobs.
final class JobPlanning: @unchecked Sendable {
    private unowned let watcher: Watcher
    private let lock = NSLock()
    private var waiting: [(job: JobRecord, due: Date)] = []
    private var running = false
    private var flushing = false
    let delay: Double

    init(watcher: Watcher, delay: Double = 30) {
        self.watcher = watcher
        self.delay = delay
    }

    func add(_ job: JobRecord) {
        lock.withLock {
            waiting.append((job, Date().addingTimeInterval(delay)))
            if !running {
                running = true
                Thread.detachNewThread { self.drain() }
            }
        }
    }

    /// Plans what is left at once (a once-run ending with jobs still queued) and waits.
    func waitIdle() {
        lock.withLock { flushing = true }
        while lock.withLock({ running || !waiting.isEmpty }) { usleep(20_000) }
    }

    private func drain() {
        while true {
            let next: JobRecord? = lock.withLock {
                guard let first = waiting.first else {
                    running = false
                    return nil
                }
                guard flushing || first.due <= Date() else { return JobRecord?.none }
                waiting.removeFirst()
                return first.job
            }
            if let next {
                plan(next)
            } else if lock.withLock({ !running }) {
                return
            } else {
                usleep(100_000)
            }
        }
    }

    private func plan(_ job: JobRecord) {
        // Only a job still waiting needs an estimate (a finished one has its measured figures).
        guard let current = try? watcher.store.job(id: job.id), [.queued, .waitingForSpace].contains(current.state) else { return }
        let config = watcher.config
        let found = PlanResult()
        let outputFolder = config.folder.mirror(config.folder.upscaled, of: job.source)
        let arguments = job.settings + ["--child-report-fd", String(JobProcess.reportDescriptor), "--child-plan-only", "--unique-name",
                                        "--output", outputFolder + "/", "--", config.folder.path(job.source)]
        guard let process = try? JobProcess(executable: config.executable, arguments: arguments, log: "/dev/null", onLine: { line in
            switch JobReport(line: line) {
            case .output(_, let w, let h)?: found.set(size: (w, h))
            case .progress(_, let total, _)?: found.set(frames: total)
            default: break
            }
        }) else { return }
        guard process.wait() == .exited(0), let size = found.size else { return }
        try? watcher.store.setPlan(id: job.id, width: size.width, height: size.height, frames: found.frames)
    }
}

private final class PlanResult: @unchecked Sendable {
    private let lock = NSLock()
    private(set) var size: (width: Int, height: Int)?
    private(set) var frames: Int?
    func set(size: (Int, Int)) { lock.withLock { self.size = size } }
    func set(frames: Int?) { lock.withLock { self.frames = frames } }
}

/// One claimed job: its child process, heartbeats, and what happens after.
final class RunningJob: @unchecked Sendable {
    let claim: JobClaim
    unowned let watcher: Watcher
    private let lock = NSLock()
    private var child: JobProcess?
    private var shuttingDown = false
    private var output: (path: String, width: Int, height: Int)?
    /// The finished file its child last said it was renaming into place.
    private var placing: PlacedFile?
    private var frames = 0
    private var total: Int?
    private var elapsed = 0.0
    private var summaryFrames: Int?
    private var error: (kind: String, text: String)?
    private var lastFrameAt = Date()
    /// Stopped before its finished result could be recorded: its lock file stays (`JobLock.leave`).
    private var leavesLock = false
    /// Its child placed its output and ended, and its result is being recorded (`recordResult`).
    private var recording = false
    var isRecording: Bool { lock.withLock { recording } }

    init(claim: JobClaim, watcher: Watcher) {
        self.claim = claim
        self.watcher = watcher
    }

    private var config: WatchConfiguration { watcher.config }
    private var store: JobStore { watcher.store }
    private var now: Double { Date().timeIntervalSince1970 }

    func stopForShutdown() {
        lock.withLock {
            shuttingDown = true
            child?.terminate()
        }
    }

    /// Removes the output a child placed as its job's claim went (cancelled, or taken again).
    private func removeStray(_ output: String) {
        guard unlink(output) == 0 else { return }
        watcher.log("'\(claim.job.source)' was cancelled or taken again as its output was placed; removed '\(config.folder.relative(output) ?? output)'")
    }

    /// Whether a stop came before this run started (while it waited for its job's last run to
    /// end): its claim then goes back to the queue, as a stopped job's does.
    func releasedOnShutdown() -> Bool {
        guard lock.withLock({ shuttingDown }) else { return false }
        try? store.release(claim, now: now)
        return true
    }

    private func handle(_ line: String) {
        guard let report = JobReport(line: line) else { return }
        if case .note(let text) = report {
            // On the watcher's console too: it was only in the job's log file, and a damaged
            // picture filled in or an animation cut to its first frame was reported "done".
            // Once a job (a run again after a full disk said it again).
            if watcher.firstTime(note: text, job: claim.job.id) { watcher.log("note on '\(claim.job.source)': \(text)") }
            // Kept with the job (once there; a file changed or retried starts with none).
            try? store.addNote(id: claim.job.id, text)
            return
        }
        lock.withLock {
            switch report {
            case .output(let path, let w, let h): output = (path, w, h)
            case .placing(let file): placing = file
            case .progress(let done, let t, let e):
                if done != frames { lastFrameAt = Date() }
                frames = done
                total = t
                elapsed = e
            case .summary(let f, _): summaryFrames = f
            case .error(let kind, let text):
                error = (kind, WatchFolder.advice(text))
                // A rename that failed removed its file: another file may get that identity later.
                if placing?.isInPlace == false { placing = nil }
            case .note: break
            }
        }
    }

    func run() {
        let job = claim.job
        let source = config.folder.path(job.source)
        let started = Date()
        let outputFolder = config.folder.mirror(config.folder.upscaled, of: job.source)
        // Changed while it waited its turn (a copy that went on after a pause): taken once it
        // settles again, rather than upscaled now, found "replaced" at the end and run again.
        if let changed = changedSinceQueued() {
            settleAgain(changed)
            watcher.forgetSaid(job.id, "unfinished")
            watcher.forgetSaid(job.id, "cut")
            watcher.sayOnce(job: job.id, "changed", "'\(job.source)' changed since it was queued; it will be taken once it settles")
            return
        }
        // A copy, download or recording under way that paused longer than the settle time
        // (the file is shorter than its header says, or its length is left open): its upscale
        // would be a part of the video, and the original moved to Originals/ unfinished.
        // (An .mp4/.mov cut before its index is cut short too: its child's error says more.)
        let found = ContainerLength.inspect(source)
        if !found.lacksIndex, let why = found.unfinished,
           waitUnfinished(why, then: found.cut != nil ? "upscaled as it is and moved to Failed/ with its part of the video" : "upscaled as it is", key: "cut") {
            return
        }
        // A file looked at again for its index is said once (`waitUnfinished`), not at every look.
        if !watcher.wasSaid(job.id, "unfinished") {
            watcher.log("start '\(job.source)' (\(Watcher.megabytes(job.size)), job \(job.id), attempt \(job.attempts))")
        }
        guard config.folder.isAvailable else {
            try? store.release(claim, now: now)
            return
        }
        guard FileManager.default.fileExists(atPath: source) else {
            finishFailed(reason: "'\(job.source)' disappeared from the folder before it was upscaled", detail: "", transient: false, crashed: false, move: false)
            return
        }
        do {
            try FileManager.default.createDirectory(atPath: outputFolder, withIntermediateDirectories: true)
        } catch {
            finishFailed(reason: "cannot create '\(outputFolder)': \(error)", detail: "", transient: true, crashed: false)
            return
        }
        // Made again if it was removed (every job failed, three attempts each, while it was gone).
        try? WatchFolder.makeFolder(config.folder.logs, root: config.folder.root)
        let logPath = config.folder.logs + "/job-\(job.id).log"
        // Held by the child for its life and kept until the job's result is recorded (see
        // `JobLock`). Without it (the folder cannot be written) the job runs all the same.
        let jobLock: JobLock?
        do {
            jobLock = try JobLock.take(folder: config.folder, id: job.id)
        } catch {
            jobLock = nil
            // (Said once for the whole watcher: job ids start at 1.)
            watcher.sayOnce(job: 0, "lock", "\(error); jobs run without their locks, and one whose child outlives a killed watcher may be made twice")
        }
        defer { if lock.withLock({ leavesLock }) { jobLock?.leave() } else { jobLock?.release() } }
        var arguments = job.settings + ["--child-report-fd", String(JobProcess.reportDescriptor), "--unique-name", "--wait-for-space"]
        if jobLock != nil { arguments += ["--child-lock-fd", String(JobLock.childDescriptor)] }
        arguments += ["--output", outputFolder + "/", "--", source]
        let process: JobProcess
        do {
            process = try JobProcess(executable: config.executable, arguments: arguments, environment: config.childEnvironment,
                                     log: logPath, holding: jobLock) { [weak self] in self?.handle($0) }
        } catch {
            finishFailed(reason: "\(error)", detail: "", transient: true, crashed: false)
            return
        }
        lock.withLock { child = process }
        var outcome: JobProcess.Outcome?
        var lastBeat = Date.distantPast
        var lastCancelCheck = Date()
        // The output in the store (for `queue list` and a cancel's cleanup): stored again when
        // the child names another, and tried again after a failed write.
        var outputStored: String?
        var outputTried = Date.distantPast
        var stalled = false
        var cancelled = false
        var cancelledAt = Date.distantFuture
        while outcome == nil {
            outcome = process.poll()
            if outcome != nil { break }
            usleep(20_000)
            if let planned = lock.withLock({ output }), planned.path != outputStored, Date().timeIntervalSince(outputTried) >= 1 {
                outputTried = Date()
                if (try? store.setOutput(claim, output: config.folder.relative(planned.path) ?? planned.path)) != nil {
                    outputStored = planned.path
                }
            }
            // A cancel is looked for four times a second (a read); the heartbeat writes once a
            // second and is refused once the claim is gone (cancelled, or taken over).
            var ours = true
            if Date().timeIntervalSince(lastCancelCheck) >= 0.25 {
                lastCancelCheck = Date()
                ours = (try? store.job(id: job.id))??.state != .cancelled
            }
            if Date().timeIntervalSince(lastBeat) >= 1 {
                lastBeat = Date()
                let (done, t, e) = lock.withLock { (frames, total, elapsed) }
                let progress = JobProgress(framesDone: done, framesTotal: t, fps: e > 0 ? Double(done) / e : nil)
                ours = ours && ((try? store.heartbeat(claim, progress: progress, lease: config.lease, now: now)) ?? true)
            }
            if !ours && !cancelled {
                cancelled = true
                cancelledAt = Date()
                watcher.log("cancel '\(job.source)': stopping its job")
                process.terminate()
            }
            // Its result is not kept: a job that has not stopped a second later (x265 sees the
            // request only when it returns a picture, seconds into a large job's look-ahead)
            // is ended at once.
            if Date().timeIntervalSince(cancelledAt) > 1 {
                cancelledAt = .distantFuture
                process.kill9()
            }
            if !stalled, Date().timeIntervalSince(lock.withLock { lastFrameAt }) > config.stallSeconds {
                stalled = true
                watcher.log("'\(job.source)' made no progress for \(Int(config.stallSeconds)) s; killing its job")
                process.kill9()
            }
        }
        // The output its child renamed into place, if it got that far: found by the identity
        // it said it was placing (a child killed after the rename, while it removed its
        // chunks or synced the folder, says nothing more), in the output's folder (not a chunk).
        let placed = lock.withLock { () -> String? in
            guard let placing, let output, placing.isInPlace,
                  URL(fileURLWithPath: placing.path).deletingLastPathComponent() == URL(fileURLWithPath: output.path).deletingLastPathComponent()
            else { return nil }
            return placing.path
        }
        lock.withLock {
            child = nil
            recording = (outcome == .exited(0) || placed != nil) && !cancelled
        }
        if !cancelled { TestHook.pauseIfBeforeRecording() }
        let seconds = Date().timeIntervalSince(started)
        let planned = lock.withLock { output }
        // A child that died left its temporary file; remove it (the next run would too).
        if let planned, outcome != .exited(0) { PartialFile.remove(for: planned.path, pid: process.pid) }
        let logTail = Self.tail(of: logPath, lines: 20)
        if cancelled {
            // Kept for resuming after a stop; a cancelled job will not resume. (A claim lost to
            // an expired lease, after a sleep, is not a cancel: its chunks are the next run's.)
            if let planned, (try? store.job(id: job.id))??.state == .cancelled { QueueActions.removeChunks(of: planned.path) }
            // A job that placed its output just before the stop reached it (its last chunk and
            // join within the quarter second between checks), or as it came (killed a second
            // later, after the rename) leaves none: cancelled, its file stays in the folder;
            // cancelled and retried at once, or taken over, the job's next run makes the one output.
            if let placed { removeStray(placed) }
            return
        }
        // A child ended by a signal (or a stop) once its output was in place had written it
        // whole (only a finished file is renamed there): the job is finished from it. Run
        // again, it was made a second time, "… Upscaled 2" beside the first.
        if outcome != .exited(0), let placed, let planned {
            let how: String
            switch outcome! {
            case .signaled(let signal): how = "was stopped (\(JobProcess.signalName(signal)))"
            case .exited(let code): how = "ended with exit status \(code)"
            }
            watcher.log("'\(job.source)': its job \(how) after its output was in place; finishing it from '\(config.folder.relative(placed) ?? placed)'")
            ChunkedJob.removeLeftWork(for: planned.path)
            finishSucceeded(output: (placed, planned.width, planned.height), seconds: seconds, logTail: logTail)
            return
        }
        // A job that was done when the stop reached it (past its last look for a stop, it
        // placed its output) is finished as usual: queued again, it was made a second time.
        if lock.withLock({ shuttingDown }) && outcome != .exited(0) {
            try? store.release(claim, now: now)
            return
        }
        switch outcome! {
        case .exited(0):
            guard let planned else {
                finishFailed(reason: "the job ended without naming its output", detail: logTail, transient: true, crashed: false)
                return
            }
            finishSucceeded(output: planned, seconds: seconds, logTail: logTail)
        case .signaled(let signal):
            let name = JobProcess.signalName(signal)
            if stalled {
                finishFailed(reason: "no new frame for \(Int(config.stallSeconds)) s; killed (\(name))", detail: logTail, transient: true, crashed: false, status: "signal \(name)")
            } else if signal == SIGKILL {
                finishFailed(reason: "the job was killed (SIGKILL; out of memory?)", detail: logTail, transient: true, crashed: false, status: "signal \(name)")
            } else {
                let crashes = claim.job.crashes + 1
                finishFailed(reason: "the job crashed (\(name)) after frame \(lock.withLock { frames })", detail: logTail,
                             transient: crashes < 2, crashed: true, status: "signal \(name)")
            }
        case .exited(JobProcess.noSpaceStatus):
            let text = lock.withLock { error?.text } ?? "not enough disk space"
            try? store.waitForSpace(claim, reason: text, until: now + config.spaceRetry, now: now)
            watcher.log("waiting for space: '\(job.source)': \(text); checking again in \(Int(config.spaceRetry)) s")
        case .exited(let code):
            let (kind, text) = lock.withLock { error } ?? ("processing", "the job ended with exit status \(code)")
            // A chunked job whose file went away mid-run keeps its chunks for the file's
            // return; a watch folder's file that went is not coming back under that name.
            if let planned, !FileManager.default.fileExists(atPath: source) { QueueActions.removeChunks(of: planned.path) }
            if text.contains(UpscaleError.missingIndex),
               waitUnfinished("no index yet (an .mp4/.mov gets it when its copy or recording ends)", then: "moved to Failed/", key: "unfinished") { return }
            finishFailed(reason: text, detail: logTail, transient: kind == "output", crashed: false, status: "exit \(code)")
        }
    }

    private func finishSucceeded(output planned: (path: String, width: Int, height: Int), seconds: Double, logTail: String) {
        let job = claim.job
        let source = config.folder.path(job.source)
        let relativeOutput = config.folder.relative(planned.path) ?? planned.path
        // The final count and rate (a job shorter than a heartbeat would otherwise show none):
        // finished jobs are what the queue's ETA is measured on.
        let written = lock.withLock { summaryFrames ?? frames }
        let progress = JobProgress(framesDone: written, framesTotal: written, fps: seconds > 0 ? Double(written) / seconds : nil)
        // The lease is renewed with each try, so that the job is not taken again while the
        // store cannot be written.
        let recorded = recordResult(of: relativeOutput) {
            try store.heartbeat(claim, progress: progress, lease: config.lease, now: now)
                && store.setOutput(claim, output: relativeOutput) && store.markFinishing(claim, now: now)
        }
        guard recorded == true else {
            // The claim went after the child's last look for a stop and before it was marked
            // finishing (the child placed its output and exited 0 within the quarter second
            // between the loop's checks): as above, the output goes (its chunks went with its
            // join). A watcher stopping meanwhile leaves it to the next one (nil).
            if recorded == false { removeStray(planned.path) }
            return
        }
        try? store.setPlan(id: job.id, width: planned.width, height: planned.height, frames: written)
        if TestHook.current == .crashWhileFinishing { kill(getpid(), SIGKILL) }
        TestHook.pauseIfWhileFinishing()
        // Replaced while it was upscaled (saved under a temporary name, then renamed over it, as
        // rsync and editors do): the job read the version queued to the end, and the new one was
        // moved out as done, never upscaled. The output stays (it is of the version queued) and
        // the new version is taken again once it settles.
        if let changed = changedSinceQueued() {
            settleAgain(changed)
            watcher.log("'\(job.source)' was replaced while it was upscaled; '\(relativeOutput)' is of the version queued, and the new one will be taken once it settles")
            return
        }
        // Check the output before the original is moved.
        do {
            try Watcher.check(output: planned.path, source: source, planned: (planned.width, planned.height),
                              frames: lock.withLock { summaryFrames })
        } catch {
            // The original stays where it is; the bad output is moved aside with the failure.
            let bad = (try? SafeFiles.move(planned.path, into: config.folder.failed)) ?? planned.path
            finishFailed(reason: "\(error) (kept as '\(bad)')", detail: logTail, transient: false, crashed: false, status: "check failed")
            return
        }
        let originals = config.folder.mirror(config.folder.originals, of: job.source)
        var original = source
        var stayed = false
        do {
            original = try SafeFiles.move(source, into: originals)
        } catch {
            stayed = stays(error)
        }
        // (It stayed "finishing" until the watcher's next start after a failed write.) The
        // original's "stays" goes with it: done without it, the file was queued again.
        guard recordResult(of: relativeOutput, {
            if stayed { try store.markStayed(id: job.id) }
            try store.finish(id: job.id, now: now)
            return true
        }) != nil else { return }
        watcher.forgetSaid(job.id)
        let done = lock.withLock { summaryFrames ?? frames }
        watcher.log("done '\(job.source)' → '\(relativeOutput)' (\(String(format: "%.1f", seconds)) s, \(String(format: "%.1f", seconds > 0 ? Double(done) / seconds : 0)) fps)")
        runExecAfter(input: original, output: planned.path, state: "done", error: "")
    }

    /// Writes a finished job's result to the store with `write`, tried again every second while
    /// the store cannot be written (its disk full, say: the output may have taken the last of
    /// it): true once written, false if the claim is seen gone (cancelled, or taken again),
    /// nil if the watcher stops first (the job's lock file then stays with its output, and the
    /// next watcher finishes the job from it). A job left "running" by one failed write was
    /// taken again after its lease and made a second output beside the first (`… 2`).
    private func recordResult(of output: String, _ write: () throws -> Bool) -> Bool? {
        var failedSince: Date?
        var said = Date.distantPast
        while true {
            do {
                let written = try write()
                if failedSince != nil && written { watcher.log("'\(claim.job.source)': its result is recorded") }
                return written
            } catch {
                // Said again each minute it lasts.
                if Date().timeIntervalSince(said) >= 60 {
                    said = Date()
                    let since = failedSince.map { " for \(Int(Date().timeIntervalSince($0))) s" } ?? ""
                    watcher.log("'\(claim.job.source)' is done, but the queue cannot record it\(since) (\(error)); '\(output)' is kept, and the record is tried again every second (free some space if the disk is full)")
                }
                if failedSince == nil { failedSince = Date() }
            }
            if lock.withLock({ shuttingDown }) {
                lock.withLock { leavesLock = true }
                return nil
            }
            usleep(1_000_000)
        }
    }

    /// A file not whole yet that changed less than `unfinishedWait` ago: a copy that paused
    /// longer than the settle time (a network drive, a laptop asleep) or a recording under
    /// way. An .mp4/.mov without its index was moved to Failed/ half copied, and the copy,
    /// going on, began the file anew in the folder with the rest of its bytes; a file shorter
    /// than its header says was upscaled in part. Queued again to be looked at after twice
    /// the settle time (at least a second), with its size and time as they are now; true when
    /// so. `why` is what is unfinished, `then` what happens once the wait is over; `key` what
    /// the log line is said once under. A time ahead of the clock (another machine's) by more
    /// than the wait is not waited for.
    private func waitUnfinished(_ why: String, then: String, key: String) -> Bool {
        guard !config.once, config.unfinishedWait > 0, let file = currentFile(),
              WatchConfiguration.changedWithin(config.unfinishedWait, modified: file.modified, now: now) else { return false }
        let delay = max(2 * config.settle, 1)
        let reason = "\(why); looked at again every \(WatchConfiguration.spoken(delay)) until \(WatchConfiguration.spoken(config.unfinishedWait)) after its last change, then \(then)"
        guard (try? store.resettle(claim, size: file.size, modified: file.modified, reason: reason, retryAt: now + delay, now: now)) == true else { return false }
        watcher.sayOnce(job: claim.job.id, key, "waiting for '\(claim.job.source)': \(reason)")
        return true
    }

    /// Back to settling, judged from now on by the file as it is (`changedSinceQueued`).
    private func settleAgain(_ changed: (size: Int64, modified: Double)) {
        _ = try? store.resettle(claim, size: changed.size, modified: changed.modified, reason: "the file changed while queued; waiting for it to settle",
                                retryAt: now + max(2 * config.settle, 5), now: now)
    }

    /// The job's file as it is now, when its size or modification time is not what was queued.
    private func changedSinceQueued() -> (size: Int64, modified: Double)? {
        guard let file = currentFile() else { return nil }
        return file.size != claim.job.size || file.modified != claim.job.modified ? file : nil
    }

    /// The job's file's size and modification time now (nil when it is gone).
    private func currentFile() -> (size: Int64, modified: Double)? {
        WatchFolder.stamp(of: config.folder.path(claim.job.source))
    }

    /// The original could not be moved out: it stays, and is not taken again unless it changes
    /// (it was queued again at the next scan, and upscaled again and again). True when it is
    /// still there, for the caller to mark so in the store (`markStayed`).
    private func stays(_ error: Error) -> Bool {
        guard FileManager.default.fileExists(atPath: config.folder.path(claim.job.source)) else {
            watcher.log("'\(claim.job.source)': \(error)")
            return false
        }
        watcher.log("'\(claim.job.source)': \(error); the original stays in place and is not taken again unless it changes (move it out yourself)")
        return true
    }

    private func finishFailed(reason: String, detail: String, transient: Bool, crashed: Bool, status: String = "", move: Bool = true) {
        let job = claim.job
        let source = config.folder.path(job.source)
        // A file that changed since it was queued was still being written: look at it again later.
        if !crashed, let changed = changedSinceQueued() {
            // Judged by its new size and time from now on: a file replaced by one that fails was
            // "changed" at every retry before, for good (and `--once` never returned).
            settleAgain(changed)
            watcher.log("'\(job.source)' changed since it was queued; it will be taken again once it settles")
            return
        }
        if transient && job.attempts < config.maxAttempts {
            let delay = config.backoff * pow(2, Double(job.attempts - 1))
            _ = try? store.fail(claim, error: reason, crashed: crashed, retryAt: now + delay, movedTo: nil, now: now)
            watcher.log("retry '\(job.source)' in \(Int(delay)) s: \(reason)")
            return
        }
        // Still ours? (A cancelled job, or one taken over after a lost lease, is left alone.) A job
        // whose output check failed is `finishing`, which a heartbeat no longer renews: asking
        // with one left it finishing for good, and `--once` waiting on it.
        guard (try? store.holds(claim)) == true else { return }
        watcher.jobFailed()
        var movedTo = ""
        if move, FileManager.default.fileExists(atPath: source) {
            let failed = config.folder.mirror(config.folder.failed, of: job.source)
            do {
                let moved = try SafeFiles.move(source, into: failed)
                movedTo = moved
                let text = """
                    \(reason)
                    status: \(status.isEmpty ? "failed" : status); attempts: \(job.attempts)
                    \(detail.isEmpty ? "" : "last lines of the job's log:\n" + detail)
                    """
                try? Data(text.utf8).write(to: URL(fileURLWithPath: WatchFolder.errorNote(for: moved)))
            } catch {
                if stays(error) { try? store.markStayed(id: job.id) }
            }
        }
        watcher.forgetSaid(job.id)
        _ = try? store.fail(claim, error: reason, crashed: crashed, retryAt: nil,
                            movedTo: movedTo.isEmpty ? nil : config.folder.relative(movedTo) ?? movedTo, now: now)
        watcher.log("failed '\(job.source)': \(reason)\(movedTo.isEmpty ? "" : " (moved to '\(movedTo)')")")
        runExecAfter(input: movedTo.isEmpty ? source : movedTo, output: "", state: "failed", error: reason)
    }

    private func runExecAfter(input: String, output: String, state: String, error: String) {
        guard let command = config.execAfter else { return }
        watcher.hooks.start(command, environment: ["UPSCALE_INPUT": input, "UPSCALE_OUTPUT": output, "UPSCALE_STATE": state, "UPSCALE_ERROR": error],
                            job: "'\(claim.job.source)' (the job is \(state) regardless)", log: watcher.log)
    }

    static func tail(of path: String, lines: Int) -> String {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return "" }
        return text.split(separator: "\n", omittingEmptySubsequences: true).suffix(lines).joined(separator: "\n")
    }
}

extension NSLock {
    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        lock()
        defer { unlock() }
        return try body()
    }
}

/// The `--exec-after` commands started and not yet ended: each runs in its own process group
/// (so all it starts can be stopped with it), off its job's thread, so a slow one holds no
/// job slot.
final class Hooks: @unchecked Sendable {
    private let lock = NSLock()
    /// Shells still running, and the process groups of all started (kept until no process is
    /// left in them: a command's own background processes outlive its shell).
    private var running: Set<pid_t> = []
    private var groups: Set<pid_t> = []

    func start(_ command: String, environment: [String: String], job: String, log: @escaping @Sendable (String) -> Void) {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        let env = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        lock.lock()
        let (spawned, pid) = spawnInOwnGroup("/bin/sh", ["-c", command], environment: env, actions: &actions)
        if spawned == 0 {
            running.insert(pid)
            groups.insert(pid)
        }
        lock.unlock()
        guard spawned == 0 else {
            log("--exec-after could not run for \(job): \(String(cString: strerror(spawned)))")
            return
        }
        Thread.detachNewThread { [self] in
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            lock.withLock { _ = running.remove(pid) }
            let exited = status & 0x7f == 0, code = (status >> 8) & 0xff
            if !exited || code != 0 {
                log("--exec-after \(exited ? "exited with \(code)" : "was stopped (signal \(status & 0x7f))") for \(job)")
            }
        }
    }

    /// Waits for the commands still running; once `stop` is set (or at once if it is), their
    /// process groups are sent SIGTERM, and SIGKILL five seconds later, until none is left.
    func finish(stop: CancellationFlag, say: (String) -> Void) {
        var terminatedAt: Date?
        while true {
            let (shells, alive) = lock.withLock {
                groups = groups.filter { kill(-$0, 0) == 0 || errno != ESRCH }
                return (running, groups)
            }
            if shells.isEmpty && (terminatedAt == nil || alive.isEmpty) {
                if stop.isCancelled && terminatedAt == nil && !alive.isEmpty {
                    // Left behind by commands that have ended (started in the background): stopped with the watcher.
                    alive.forEach { kill(-$0, SIGTERM) }
                }
                return
            }
            if stop.isCancelled && terminatedAt == nil {
                say("stopping \(shells.count) --exec-after command(s)")
                alive.forEach { kill(-$0, SIGTERM) }
                terminatedAt = Date()
            }
            if let at = terminatedAt, Date().timeIntervalSince(at) > 5 { alive.forEach { kill(-$0, SIGKILL) } }
            usleep(50_000)
        }
    }
}
