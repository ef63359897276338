import ArgumentParser
import Foundation
import Logging
import UpscaleFarm
import UpscaleImages
import UpscaleMedia
import UpscaleQueue

/// `--queue URL`, or the UPSCALE_QUEUE environment variable.
struct QueueOption: ParsableArguments {
    @Option(help: "The shared queue: postgres://user@host:port/database[?sslmode=require] (default: $UPSCALE_QUEUE). Password from PGPASSWORD or ~/.pgpass.")
    var queue: String?

    /// --queue, else $UPSCALE_QUEUE when it is set and not empty.
    var given: String? { queue ?? ProcessInfo.processInfo.environment["UPSCALE_QUEUE"].flatMap { $0.isEmpty ? nil : $0 } }

    /// Whether a `queue` or `dashboard` command acts on the shared queue: --queue given, or
    /// $UPSCALE_QUEUE set and `folder` (its first argument) not an existing folder. A folder
    /// named means that folder's own queue: with the variable set, 'queue pause DIR' paused
    /// the whole farm.
    func isShared(folder: String?) -> Bool {
        if queue != nil { return true }
        guard given != nil else { return false }
        return !(folder.map(JobPlanner.isDirectory) ?? false)
    }

    func open() throws -> PostgresQueue {
        guard let text = given else {
            throw CLIError(status: 2, "no queue given: use --queue postgres://user@host:port/database or set UPSCALE_QUEUE")
        }
        do {
            return try PostgresQueue(address: try QueueAddress(text))
        } catch let error as FarmError {
            throw CLIError(status: 1, error.description)
        }
    }
}

/// `upscale submit INPUT… --queue URL`: plan each input here (probe, keyframe scan) and queue
/// its chunks; returns at once. Any worker on the queue may run them.
struct SubmitCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "submit",
        abstract: "Queue videos on the shared PostgreSQL queue, split into chunks that any worker may encode.",
        discussion: "Inputs and the output folder must be on storage every worker reaches (NFS/SMB); workers on machines that mount it elsewhere use --map.")

    @Argument(help: "Video files to queue.") var inputs: [String]
    @OptionGroup var encode: EncodeOptions
    @OptionGroup var chunking: ChunkOptions
    @OptionGroup var queue: QueueOption
    @Option(name: .shortAndLong, help: "Output folder (default: beside each input).", transform: expandingTilde) var output: String?
    @Option(parsing: .unconditional, help: "Higher runs first (default 0).") var priority = 0
    @Flag(help: "Replace existing outputs.") var overwrite = false

    func validate() throws {
        guard QueueActions.priorities.contains(priority) else {
            throw ValidationError("--priority must be between \(QueueActions.priorities.lowerBound) and \(QueueActions.priorities.upperBound)")
        }
    }

    func run() throws {
        MediaLibrary.configure()
        let store = try queue.open()
        let host = FarmWorker.defaultName
        var failed = 0
        var outputs: [String: String] = [:]
        var unwritable: Set<String> = []
        for input in inputs {
            let path = URL(fileURLWithPath: input).standardizedFileURL.path
            do {
                // Stills are quick and run where they are; the farm's chunks are video.
                if StillImage.isStill(path) {
                    throw UpscaleError(.input, "'\(input)' is a still image: the queue takes videos; upscale it here with 'upscale \(input)'")
                }
                var options = encode.upscaleOptions(output: output.map { URL(fileURLWithPath: $0).standardizedFileURL.path }, overwrite: overwrite)
                options.uniqueName = false
                let job = try JobPlanner.plan(input: path, options: options, multipleInputs: inputs.count > 1)
                // Two jobs writing one file (a camera's C0001.MP4 of two days into one folder):
                // one result was lost, or every duplicate encoded in full and failed at its join.
                if let earlier = outputs[job.output] {
                    throw UpscaleError(.input, "'\(input)' would be written to '\(job.output)', as '\(earlier)' of this submit is; give them different output folders (-o) or rename one")
                }
                if let open = try store.openJobs(writing: job.output).first { throw UpscaleError(.input, Self.taken(input, job.output, by: open)) }
                outputs[job.output] = input
                // Queued all the same: another machine (or user) may write there, as a worker
                // with --map to a writable mount does. Said, as a typo in -o would leave every job
                // waiting for a worker that can.
                let folder = (job.output as NSString).deletingLastPathComponent
                if !unwritable.contains(folder), let reason = FarmWorker.writeProblem(in: folder) {
                    unwritable.insert(folder)
                    writeStandardError("note: this machine cannot write in '\(folder)' (\(reason)); its jobs wait for a worker that can\n")
                }
                let seconds = chunking.chunkSeconds > 0 ? chunking.chunkSeconds : 1e9
                let plan = try ChunkPlan.make(path: path, chunkSeconds: seconds)
                let settings = encode.arguments + (overwrite ? ["--overwrite"] : [])
                let id: Int64
                do {
                    id = try store.submit(input: path, output: job.output, settings: settings, plan: plan, priority: priority, host: host,
                                          identity: InputIdentity.of(path))
                } catch let taken as PostgresQueue.OutputTaken {
                    throw UpscaleError(.input, Self.taken(input, job.output, by: taken.job))
                }
                print("queued job \(id): \(path) → \(job.output) (\(plan.chunks.count) chunks, \(plan.frames) frames)")
            } catch let error as UpscaleError {
                writeStandardError("error: \(error.message)\n")
                if error.kind == .usage { throw ExitCode(2) }
                failed += 1
            }
        }
        if failed > 0 { throw ExitCode(1) }
    }

    static func taken(_ input: String, _ output: String, by job: Int64) -> String {
        "'\(input)' would be written to '\(output)', which job \(job) on the queue is making; wait for it, or cancel it first (upscale queue cancel \(job) --queue …)"
    }
}

/// `upscale worker --queue URL`: run chunks and joins from the shared queue.
struct WorkerCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "worker",
        abstract: "Encode chunks and join outputs from the shared PostgreSQL queue until stopped.")

    @OptionGroup var queue: QueueOption
    @Option(parsing: .unconditional, help: "Tasks run at once, each with its share of the threads (default 1).") var jobs = 1
    @Flag(help: "Stop when the queue has no work left.") var once = false
    @Option(help: "Rewrite a path prefix for this machine, FROM=TO (repeatable).") var map: [String] = []
    @Option(help: "Name shown in the queue (default host:pid).") var name: String?
    @Flag(name: .shortAndLong, help: "Print nothing but errors.") var quiet = false

    func validate() throws {
        // As for the plain command and watch: --jobs 100000 hung for good, deaf to SIGTERM.
        guard (1...64).contains(jobs) else { throw ValidationError("--jobs must be between 1 and 64") }
    }

    func run() throws {
        MediaLibrary.configure()
        // A render node's worker is throughput work like a job's child process (see
        // `runAsBatch`): every thread, and every thread started later (x265's, the scaler's,
        // the connection's), under SCHED_BATCH. Heartbeats still run within milliseconds of
        // waking; a lease is a minute.
        JobProcess.runAsBatch()
        let paths: PathMap
        do { paths = try PathMap(map) } catch let e as FarmError { throw CLIError(status: 2, e.description) }
        let store = try queue.open()
        let lease = ProcessInfo.processInfo.environment["UPSCALE_LEASE_SECONDS"].flatMap(Double.init) ?? FarmWorker.defaultLease
        var logger = Logger(label: "upscale.worker")
        logger.logLevel = quiet ? .error : .notice
        let worker = FarmWorker(queue: store, name: name ?? FarmWorker.defaultName, slots: jobs, map: paths, lease: lease,
                                logger: logger) { settings, input, output in
            let parsed = try EncodeOptions.parse(settings.filter { $0 != "--overwrite" })
            let options = parsed.upscaleOptions(output: output, overwrite: settings.contains("--overwrite"))
            // The output was decided at submit; an existing one then means a join that already
            // ran (its work folder is gone) or a file that appeared since: never replaced silently.
            var planned = options
            planned.overwrite = true
            var job = try JobPlanner.plan(input: input, options: planned)
            job.overwrite = options.overwrite
            return job
        }
        let stop = CancellationFlag()
        let trap = SignalTrap(repeatable: true) { stop.cancel() }
        defer { withExtendedLifetime(trap) {} }
        let stats = try worker.run(once: once, stop: stop)
        if !quiet {
            print("worker \(worker.name): \(stats.chunks) chunks, \(stats.joins) joins, \(stats.failures) failures, \(stats.discarded) discarded (lease lost), \(stats.rescued) rescued")
        }
        if stop.isCancelled { throw ExitCode(130) }
        if worker.stoppedPaused {
            throw CLIError(status: 1, "the queue is paused: its open jobs were left undone (upscale queue resume --queue …)")
        }
        let unseen = worker.unseen, lacking = worker.lackingEncoder
        if !unseen.isEmpty || !lacking.isEmpty {
            func list(_ jobs: [Int64: String], _ say: (String) -> String) -> String {
                jobs.keys.sorted().map { "job \($0) (\(say(jobs[$0]!)))" }.joined(separator: ", ")
            }
            var problems: [String] = []
            if !unseen.isEmpty { problems.append("could not see or write the files of \(list(unseen) { $0 }); check --map and that the shares are mounted, read-write for the outputs") }
            if !lacking.isEmpty { problems.append("lacks the encoder of \(list(lacking) { "cannot open " + $0 }), which the rest of their chunks need") }
            throw CLIError(status: 1, "this machine " + problems.joined(separator: "; it ") + " (those jobs were left to other workers)")
        }
        // As `watch --once`: a script learns that something failed (each failure was said above).
        if once && stats.failures > 0 { throw ExitCode(1) }
    }
}
