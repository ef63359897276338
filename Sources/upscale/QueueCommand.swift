import ArgumentParser
import Foundation
import UpscaleFarm
import UpscaleQueue

/// `upscale queue list|retry|cancel|pause|resume DIR`: the watched folder's queue; works
/// while a watcher runs.
struct QueueCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "queue",
        abstract: "Show and steer a watched folder's queue, or the shared queue (--queue postgres://…).",
        subcommands: [List.self, Retry.self, Cancel.self, Pause.self, Resume.self, Priority.self])

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Every job: file, state, progress, fps, ETA, attempts, error, notes.")
        @Argument(help: "The watched folder.") var folder: String?
        @OptionGroup var queue: QueueOption
        @Flag(help: "One JSON object: the jobs and the queue's ETA.") var json = false

        func run() throws {
            if queue.isShared(folder: folder) { return try SharedQueue.list(try queue.open(), json: json) }
            let root = WatchFolder(root: try required(folder))
            let store = try root.openStore(create: false, readOnly: true)
            let jobs = try store.list()
            let eta = QueueActions.queueETA(jobs), unplanned = QueueActions.unplanned(jobs)
            if json {
                struct Listing: Encodable {
                    let paused: Bool
                    /// Of the planned jobs (`unplannedJobs` are not in it).
                    let etaSeconds: Double?
                    let unplannedJobs: Int
                    let jobs: [JobRecord]
                }
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
                print(String(decoding: try encoder.encode(Listing(paused: try store.isPaused(), etaSeconds: eta, unplannedJobs: unplanned, jobs: jobs)),
                                       as: UTF8.self))
                return
            }
            // A job shown running whose watcher is gone (killed, machine restarted) showed its last
            // fps and ETA for good, as if it were still at work.
            let watched = FolderLock.isHeld(folder: root)
            print(["id", "file", "state", "progress", "fps", "ETA", "tries", "error", "notes"].joined(separator: "\t"))
            for job in jobs {
                let progress = job.framesTotal.map { total in total > 0 ? "\(min(100, job.framesDone * 100 / total))%" : "-" }
                    ?? (job.state == .done ? "100%" : "-")
                let active = watched && job.state == .running
                let fps = active ? job.fps.map { String(format: "%.1f", $0) } ?? "-" : "-"
                let eta = active ? QueueActions.runningETA(job).map(clock) ?? "-" : "-"
                let state = !watched && (job.state == .running || job.state == .finishing) ? "interrupted" : job.state.rawValue
                print(["\(job.id)", job.source, state, progress, fps, eta, "\(job.attempts)", job.error ?? "", job.notes.joined(separator: " ")].joined(separator: "\t"))
            }
            if !watched && jobs.contains(where: { $0.state == .running || $0.state == .finishing }) {
                print("no watcher is running on '\(root.root)': its interrupted jobs start again when 'upscale watch \(root.root)' runs")
            }
            let open = jobs.filter { $0.state == .queued || $0.state == .running }.count
            // Jobs waiting for disk space are work left too ("nothing left to do" read as if they were not).
            let waiting = jobs.filter { $0.state == .waitingForSpace }.count
            let left: String
            if open + waiting == 0 {
                left = "nothing left to do"
            } else if unplanned == open + waiting {
                left = "queue ETA unknown (\(unplanned == 1 ? "the job is" : "its jobs are") not planned yet)"
            } else if let eta {
                left = "queue ETA " + clock(eta) + (unplanned > 0 ? " for all but \(unplanned) job(s) not planned yet" : "")
            } else {
                left = "queue ETA unknown (no finished job measured yet)"
            }
            print("\(jobs.count) jobs, \(open) queued or running\(waiting > 0 ? ", \(waiting) waiting for space" : "")\(try store.isPaused() ? ", paused" : ""); \(left)")
        }
    }

    struct Retry: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Queue failed jobs again (cancelled ones when named); their originals come back from Failed/.")
        @Argument(help: "The watched folder (not with --queue).") var folder: String?
        @Argument(help: "Files to retry, failed or cancelled (default: every failed job, no cancelled one); job ids with --queue.") var files: [String] = []
        @OptionGroup var queue: QueueOption

        func run() throws {
            if queue.isShared(folder: folder) {
                let ids = [folder].compactMap { $0 } + files
                let store = try queue.open()
                let numbers = try SharedQueue.ids(ids)
                // A job whose output another open job makes is refused, naming that job (it said
                // "no failed or cancelled job", of a job listed as failed); a watch folder's failed
                // original comes back from Failed/ (see `retryJobs`).
                let (count, refused, restored) = try store.retryJobs(ids: numbers)
                for back in restored { print("'\(back)' is back from Failed/") }
                if count == 0 && !refused.isEmpty { throw CLIError(status: 1, refused.joined(separator: "; ")) }
                for line in refused { writeStandardError("note: \(line)\n") }
                // Named jobs that match nothing are a mistake to report; "retry all" with none failed is not.
                if count == 0 && !ids.isEmpty { throw CLIError(status: 1, "no failed or cancelled job with id \(ids.joined(separator: ", ")) on the queue") }
                print(count == 0 ? "nothing to retry" : "queued again: \(count) job(s)")
                return
            }
            let root = WatchFolder(root: try required(folder))
            let (queued, gone) = try QueueActions.retry(folder: root, store: try root.openStore(create: false), files: files)
            // A job whose file was deleted or moved away while queued is listed as failed
            // ("disappeared"); it was passed over with "no failed or cancelled job".
            let goneText = gone.map { "'\($0)'" }.joined(separator: ", ")
            let advice = "\(gone.count == 1 ? "is" : "are") no longer in the folder (deleted or moved while queued); put \(gone.count == 1 ? "it" : "them") back in \(root.root) and retry"
            if queued.isEmpty && !gone.isEmpty && !files.isEmpty { throw CLIError(status: 1, "\(goneText) \(advice)") }
            if queued.isEmpty && !files.isEmpty {
                throw CLIError(status: 1, "no failed or cancelled job for \(files.map { "'\($0)'" }.joined(separator: ", ")) in \(root.root)")
            }
            // (Named files only: with no names, an old failure whose file the user removed on
            // purpose would be reported at every retry.)
            if !gone.isEmpty && !files.isEmpty { print("not queued again: \(goneText) \(advice)") }
            print(queued.isEmpty ? "nothing to retry" : "queued again: " + queued.joined(separator: ", "))
        }
    }

    struct Cancel: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Cancel queued or running jobs (a running one stops within a second).")
        @Argument(help: "The watched folder (not with --queue).") var folder: String?
        @Argument(help: "Files to cancel; job ids with --queue.") var files: [String] = []
        @OptionGroup var queue: QueueOption

        func run() throws {
            let count: Int, named: [String], place: String
            if queue.isShared(folder: folder) {
                named = [folder].compactMap { $0 } + files
                // Every open job of the farm, every machine's chunks in flight, was what no id meant.
                guard !named.isEmpty else {
                    throw CLIError(status: 2, "name the jobs to cancel: 'upscale queue cancel 7 8 --queue …' (their ids are in 'upscale queue list --queue …')")
                }
                count = try queue.open().cancel(ids: try SharedQueue.ids(named))
                place = "on the queue"
            } else {
                let root = WatchFolder(root: try required(folder))
                named = files
                // Every job of the folder, the running one killed mid-encode, was what no file meant.
                guard !named.isEmpty else {
                    throw CLIError(status: 2, "name the files to cancel: 'upscale queue cancel \(root.root) FILE…' (their names are in 'upscale queue list \(root.root)')")
                }
                count = try QueueActions.cancel(folder: root, store: try root.openStore(create: false), files: files)
                place = "in \(root.root)"
            }
            if count == 0 {
                let list = named.map { "'\($0)'" }.joined(separator: ", ")
                throw CLIError(status: 1, "no queued or running job for \(list) \(place)")
            }
            print("cancelled \(count) job(s)")
        }
    }

    struct Priority: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Set a queued or running job's priority (higher runs first; default 0).",
            discussion: "upscale queue priority DIR FILE N, or upscale queue priority JOB-ID N --queue URL")
        @Argument(parsing: .allUnrecognized, help: "DIR FILE PRIORITY, or JOB-ID PRIORITY with --queue (a negative one too).") var values: [String] = []
        @OptionGroup var queue: QueueOption

        func run() throws {
            guard let last = values.last, let priority = Int(last), QueueActions.priorities.contains(priority) else {
                throw CLIError(status: 2, "give the new priority last, a whole number from \(QueueActions.priorities.lowerBound) to \(QueueActions.priorities.upperBound): 'upscale queue priority DIR FILE 5'")
            }
            if queue.isShared(folder: values.first) {
                guard values.count == 2 else { throw CLIError(status: 2, "give a job id and a priority: 'upscale queue priority 7 5 --queue …'") }
                let id = try SharedQueue.ids([values[0]])[0]
                guard try queue.open().setPriority(id: id, priority: priority) else { throw CLIError(status: 1, "no queued or running job \(id) on the queue") }
                print("job \(id): priority \(priority)")
                return
            }
            guard values.count == 3 else { throw CLIError(status: 2, "give the folder, the file and a priority: 'upscale queue priority DIR FILE 5'") }
            let root = WatchFolder(root: values[0])
            let store = try root.openStore(create: false)
            let wanted = values[1]
            let name = QueueActions.relative(wanted, in: root)
            guard let job = try store.list().first(where: { $0.state.isOpen && ($0.source == name || URL(fileURLWithPath: $0.source).lastPathComponent == wanted) }),
                  try store.setPriority(id: job.id, priority: priority) else {
                throw CLIError(status: 1, "no queued or running job for '\(wanted)' in \(root.root)")
            }
            print("\(job.source): priority \(priority)")
        }
    }

    struct Pause: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Start no new job (running ones finish).")
        @Argument(help: "The watched folder.") var folder: String?
        @OptionGroup var queue: QueueOption
        func run() throws {
            if queue.isShared(folder: folder) { try queue.open().setPaused(true) } else { try WatchFolder(root: try required(folder)).openStore(create: false).setPaused(true) }
            print("paused")
        }
    }

    struct Resume: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Start jobs again after a pause.")
        @Argument(help: "The watched folder.") var folder: String?
        @OptionGroup var queue: QueueOption
        func run() throws {
            if queue.isShared(folder: folder) { try queue.open().setPaused(false) } else { try WatchFolder(root: try required(folder)).openStore(create: false).setPaused(false) }
            print("resumed")
        }
    }
}

func clock(_ seconds: Double) -> String {
    let s = Int(seconds.rounded())
    return s >= 3600 ? String(format: "%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60) : String(format: "%d:%02d", s / 60, s % 60)
}

func required(_ folder: String?) throws -> String {
    guard let folder else { throw CLIError(status: 2, "give the watched folder, or --queue postgres://… for the shared queue") }
    return folder
}

/// `queue …` on the shared PostgreSQL queue.
enum SharedQueue {
    static func ids(_ texts: [String]) throws -> [Int64] {
        try texts.map { text in
            guard let id = Int64(text) else { throw CLIError(status: 2, "'\(text)' is not a job id; 'upscale queue list --queue …' shows them") }
            return id
        }
    }

    static func list(_ queue: PostgresQueue, json: Bool) throws {
        let jobs = try queue.list()
        let paused = try queue.isPaused()
        // ETA from each job's measured chunk rate (frames/s over its finished chunks), else the queue's.
        let overall = FarmJob.overallRate(jobs)
        func eta(_ job: FarmJob) -> Double? { job.eta(overall: overall) }
        if json {
            struct Row: Encodable {
                let job: FarmJob
                let etaSeconds: Double?
            }
            struct Listing: Encodable {
                let paused: Bool
                let jobs: [Row]
                let workers: [PostgresQueue.WorkerStatus]
            }
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            print(String(decoding: try encoder.encode(Listing(paused: paused, jobs: jobs.map { Row(job: $0, etaSeconds: eta($0)) }, workers: try queue.workers())), as: UTF8.self))
            return
        }
        print(["id", "file", "state", "chunks done/running/queued", "progress", "fps", "ETA", "machines", "error", "notes"].joined(separator: "\t"))
        for job in jobs {
            let queued = max(0, job.chunks - job.chunksDone - job.chunksRunning)
            let progress = job.frames > 0 ? "\(min(100, job.framesDone * 100 / job.frames))%" : "-"
            print(["\(job.id)", URL(fileURLWithPath: job.input).lastPathComponent, job.state,
                   "\(job.chunksDone)/\(job.chunksRunning)/\(queued)", progress, job.fps.map { String(format: "%.1f", $0) } ?? "-",
                   eta(job).map(clock) ?? "-", job.machines.joined(separator: ","),
                   job.errorSummary ?? "", job.notes.joined(separator: " ")].joined(separator: "\t"))
        }
        let open = jobs.filter { ["queued", "running"].contains($0.state) }.count
        print("\(jobs.count) jobs, \(open) queued or running\(paused ? ", paused" : "")")
        let workers = try queue.workers()
        if !workers.isEmpty {
            print("")
            print(["worker", "working on", "fps", "last heard"].joined(separator: "\t"))
            for w in workers {
                let heard = String(format: "%.0f s ago", w.secondsAgo) + (w.isStale ? " (stale)" : "")
                print([w.name, w.current ?? "-", w.fps.map { String(format: "%.1f", $0) } ?? "-", heard].joined(separator: "\t"))
            }
        }
    }
}
