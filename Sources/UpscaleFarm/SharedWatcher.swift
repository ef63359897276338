import Foundation
import UpscaleMedia
import UpscaleQueue

extension PostgresQueue {
    /// Failed or cancelled jobs of these ids (none: every failed job; a cancelled one was
    /// stopped on purpose) queued again, as `queue retry --queue` and the dashboard's Retry do
    /// it. A job whose output another open job makes (it was submitted again) is not: each
    /// such refusal names that job. A watch folder's original comes back from its Failed/
    /// first (the retried job failed at once, "gone since it was submitted"). Returns how many
    /// were queued, the refusals, and the originals put back.
    public func retryJobs(ids: [Int64]) throws -> (queued: Int, refused: [String], restored: [String]) {
        var refused: [String] = [], restored: [String] = []
        for job in try list() where ids.isEmpty ? job.state == "failed" : ["failed", "cancelled"].contains(job.state) && ids.contains(job.id) {
            if let other = try openJobs(writing: job.output).first(where: { $0 != job.id }) {
                refused.append("job \(job.id) is not queued again: job \(other) makes its output '\(job.output)' now; wait for it, or cancel it first")
                continue
            }
            if let back = SharedWatcher.restoreFailedOriginal(of: job) { restored.append(back) }
        }
        return (try retry(ids: ids), refused, restored)
    }
}

/// `upscale watch DIR --queue URL`: files dropped into DIR (complete by the same rules as the
/// local watch folder) are submitted to the shared queue once each, for any worker to run;
/// outputs go to DIR/Upscaled, and once its job is done an original moves to DIR/Originals
/// (failed: DIR/Failed with a .error.txt). What was submitted is remembered in the folder's
/// store (`shared:<name>|<size>|<mtime>` → job id), so a restarted watcher never submits a
/// file twice and picks up following its jobs where it was.
public final class SharedWatcher {
    public typealias Planner = (_ input: String, _ outputFolder: String) throws -> (output: String, plan: ChunkPlan)

    private let folder: WatchFolder
    private let store: SQLiteJobStore
    private let queue: PostgresQueue
    private let settings: [String]
    private let settler: FileSettler
    /// How long after its last change an unfinished file (cut short, or a Matroska/WebM file
    /// whose length is left open) waits for the rest of its bytes before it is submitted as it
    /// is (`watch --unfinished-minutes`; 0: at once).
    private let unfinishedWait: Double
    private let plan: Planner
    private let say: (String) -> Void
    private static let prefix = "shared:"
    /// Unfinished files waited for (cut short, or their length left open), by their key
    /// (name, size and time), and why: said once, and said again when they change.
    private var unfinishedFound: [String: String] = [:]

    public init(folder: WatchFolder, store: SQLiteJobStore, queue: PostgresQueue, settings: [String], settle: Double,
                unfinishedWait: Double = WatchConfiguration.defaultUnfinishedWait, say: @escaping (String) -> Void, plan: @escaping Planner) {
        self.folder = folder
        self.store = store
        self.queue = queue
        self.settings = settings
        settler = FileSettler(settle: settle)
        self.unfinishedWait = unfinishedWait
        self.plan = plan
        self.say = say
    }

    /// A retried job's original, moved to its watch folder's Failed/ when the job failed, put
    /// back where the job reads it: when its input is gone and `Failed/<name>` is the file that
    /// was submitted (its size and time). Returns the path put back, nil when there was none.
    public static func restoreFailedOriginal(of job: FarmJob) -> String? {
        let input = URL(fileURLWithPath: job.input)
        guard !FileManager.default.fileExists(atPath: job.input), let identity = job.identity else { return nil }
        let folder = WatchFolder(root: input.deletingLastPathComponent().path)
        let parked = folder.failed + "/" + input.lastPathComponent
        guard let found = InputIdentity.of(parked), identity.matches(found), FolderWrites.renameNoReplace(parked, job.input) == 0 else { return nil }
        unlink(WatchFolder.errorNote(for: parked))
        return job.input
    }

    /// Runs until `stop`, or with `once` until every file there is submitted and its job ended.
    /// Returns 1 when a job failed, else 0.
    public func run(once: Bool, stop: CancellationFlag) throws -> Int32 {
        var status: Int32 = 0
        let network = isNetworkFilesystem(folder.root)
        var waitingFor: [String: Int64] = [:]
        while !stop.isCancelled {
            let files = scan()
            let keys = Set(files.map { key($0.key, $0.value) })
            unfinishedFound = unfinishedFound.filter { keys.contains($0.key) }
            let writers = OpenWriters.scan(under: folder.root)
            var waiting = 0
            for (path, stat) in files where try store.setting(key(path, stat)) == nil { waiting += 1 }
            for path in settler.settled(files, now: Date().timeIntervalSince1970, network: network, openForWriting: writers) {
                guard let stat = files[path] else { continue }
                let key = key(path, stat)
                if try store.setting(key) != nil { continue }
                // A copy, download or recording under way that paused longer than the settle
                // time: its job would be a part of the video. Submitted once it is whole, or as
                // it is once it has not changed for `unfinishedWait` (a download that broke off:
                // its job fails, shorter than its header says); with `once`, at once.
                let wait = unfinishedWait
                if !once, wait > 0, WatchConfiguration.changedWithin(wait, modified: stat.modified, now: Date().timeIntervalSince1970) {
                    // Read once per version of the file (a fragmented .mp4 has thousands of boxes).
                    if let why = unfinishedFound[key] ?? ContainerLength.inspect(path).unfinished {
                        if unfinishedFound.updateValue(why, forKey: key) == nil {
                            say("waiting for '\(URL(fileURLWithPath: path).lastPathComponent)': \(why); submitted when it is finished, or as it is \(WatchConfiguration.spoken(wait)) after its last change")
                        }
                        continue
                    }
                }
                do {
                    let (output, chunks) = try plan(path, folder.upscaled)
                    // Another job (an earlier version of this file, a clip.avi beside a
                    // clip.mov) still makes that output: this one waits until it is written,
                    // then gets a free name.
                    let id: Int64
                    do {
                        id = try queue.submit(input: path, output: output, settings: settings, plan: chunks, priority: 0,
                                              host: FarmWorker.defaultName, identity: InputIdentity(size: stat.size, modified: stat.modified))
                    } catch let taken as PostgresQueue.OutputTaken {
                        if waitingFor[path] != taken.job { say("'\(URL(fileURLWithPath: path).lastPathComponent)' waits for job \(taken.job), which makes '\(output)'") }
                        waitingFor[path] = taken.job
                        continue
                    }
                    try store.setSetting(key, "queued \(id)")
                    say("submitted '\(URL(fileURLWithPath: path).lastPathComponent)' as job \(id) (\(chunks.chunks.count) chunks)")
                } catch let error as UpscaleError where error.kind == .input {
                    // Not a video we can read: left where it is, not looked at again until it changes.
                    try store.setSetting(key, "skipped")
                    say("skipped '\(URL(fileURLWithPath: path).lastPathComponent)': \(error.message)")
                }
            }
            var open = 0
            for (key, value) in try store.settings(prefix: Self.prefix) {
                // A failed or cancelled job retried ('queue retry --queue') is followed again (a
                // cancelled one was not: its output was written and the original left in the folder).
                let words = value.split(separator: " ")
                guard words.count == 2, ["queued", "failed", "cancelled"].contains(words[0]), let id = Int64(words[1]),
                      let job = try queue.job(id: id) else { continue }
                if words[0] != "queued" {
                    guard ["queued", "running"].contains(job.state) else { continue }
                    try store.setSetting(key, "queued \(id)")
                }
                let parts = key.dropFirst(Self.prefix.count).split(separator: "|")
                let name = String(parts.first ?? "")
                let original = folder.path(name)
                // The file that was submitted, not a newer version put there meanwhile (a
                // re-export: it is submitted on its own, and went to Failed/ or Originals/ with
                // the old one's result).
                let submitted = parts.count == 3 ? InputIdentity(size: Int64(parts[1]) ?? -1, modified: Double(parts[2]) ?? 0) : nil
                let same = submitted != nil && InputIdentity.of(original) == submitted
                switch job.state {
                case "done":
                    if same { _ = try SafeFiles.move(original, into: folder.originals) }
                    try store.setSetting(key, "done \(id)")
                    say("done: '\(name)' → '\(job.output)'")
                    for note in job.notes { say("note: \(note)") }
                case "failed":
                    if same {
                        let moved = try SafeFiles.move(original, into: folder.failed)
                        try? ((job.error ?? "failed") + "\n").write(toFile: WatchFolder.errorNote(for: moved), atomically: true, encoding: .utf8)
                    }
                    try store.setSetting(key, "failed \(id)")
                    say("failed: '\(name)': \(job.errorSummary ?? "")")
                    status = 1
                case "cancelled":
                    try store.setSetting(key, "cancelled \(id)")
                default:
                    open += 1
                }
            }
            if once && open == 0 && waiting == 0 { break }
            Thread.sleep(forTimeInterval: 1)
        }
        return status
    }

    private func key(_ path: String, _ stat: (size: Int64, modified: Double)) -> String {
        Self.prefix + "\(URL(fileURLWithPath: path).lastPathComponent)|\(stat.size)|\(stat.modified)"
    }

    /// Regular, non-hidden files directly in the folder (its own sub-folders excluded).
    private func scan() -> [String: (size: Int64, modified: Double)] {
        var files: [String: (size: Int64, modified: Double)] = [:]
        for name in (try? FileManager.default.contentsOfDirectory(atPath: folder.root)) ?? [] where !name.hasPrefix(".") {
            let path = folder.path(name)
            var st = stat()
            guard stat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { continue }
            files[path] = (Int64(st.st_size), st.modificationTime)
        }
        return files
    }
}
