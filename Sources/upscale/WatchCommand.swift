import ArgumentParser
import Foundation
import UpscaleMedia
import UpscaleFarm
import UpscaleImages
import UpscaleQueue

/// `upscale watch DIR`: files dropped into DIR become jobs, each run in its own process.
struct WatchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Upscale every video or image dropped into a folder, one queued job each.",
        discussion: """
            Outputs go to DIR/Upscaled, originals move to DIR/Originals after success (never deleted), \
            failures to DIR/Failed with a .error.txt beside them. The queue lives in DIR/.upscale/queue.sqlite \
            and survives crashes and restarts. Without encode options the folder's last ones are reused.
            """)

    @Argument(help: "The folder to watch.") var folder: String
    @OptionGroup var encode: EncodeOptions
    @OptionGroup var chunking: ChunkOptions
    @OptionGroup var queue: QueueOption
    @Option(parsing: .unconditional, help: "Jobs run at once.") var jobs = 1
    @Flag(help: "Process what is there (and whatever arrives meanwhile), then exit: 0, 1 if a job failed, 130 if stopped first.") var once = false
    @Option(parsing: .unconditional, help: "Seconds a file's size and time must stay unchanged before it is taken.") var settle = 5.0
    @Flag(help: "Also watch sub-folders; their paths are kept under Upscaled/, Originals/ and Failed/.") var recursive = false
    @Option(help: "Shell command run after each job, with UPSCALE_INPUT, UPSCALE_OUTPUT, UPSCALE_STATE (done/failed) and UPSCALE_ERROR set.")
    var execAfter: String?
    @Option(parsing: .unconditional, help: "Minutes without a new frame before a job is killed and retried.") var stallMinutes = 10.0
    @Option(parsing: .unconditional, help: "Minutes after its last change that an unfinished file (a copy that paused, a recording under way: an .mp4/.mov without its index, an .mkv/.webm whose length is left open, or a file shorter than its header says) is looked at again before it goes to Failed/ or is taken as it is (0: at once; with --once always at once; with --queue a cut-short or open-ended file is submitted as it is after the wait, and an .mp4/.mov without its index is looked at again whenever it changes).")
    var unfinishedMinutes = WatchConfiguration.defaultUnfinishedWait / 60

    func validate() throws {
        guard (1...64).contains(jobs) else { throw ValidationError("--jobs must be between 1 and 64") }
        guard settle >= 0 else { throw ValidationError("--settle must be 0 or more seconds") }
        guard stallMinutes > 0 else { throw ValidationError("--stall-minutes must be more than 0") }
        guard unfinishedMinutes >= 0 else { throw ValidationError("--unfinished-minutes must be 0 or more") }
    }

    func run() throws {
        let root = WatchFolder(root: folder)
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: root.root, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw CLIError(status: 2, "'\(folder)' is not a folder; create it or check the path")
        }
        // A watch folder's own Upscaled/, Originals/ or Failed/ (or a folder inside one): its
        // results were upscaled again and moved out from under the outer folder's records.
        // (Its real path too: a link to one was watched.)
        for path in Set([root.root, URL(fileURLWithPath: root.root).resolvingSymlinksInPath().path]) {
            var inner = URL(fileURLWithPath: path)
            while inner.path != "/" {
                let parent = inner.deletingLastPathComponent()
                if WatchFolder.ownFolders.contains(inner.lastPathComponent),
                   FileManager.default.fileExists(atPath: WatchFolder(root: parent.path).state) {
                    throw CLIError(status: 2, "'\(folder)' is in the \(inner.lastPathComponent)/ folder of the watch folder '\(parent.path)', which keeps its files there; watch another folder")
                }
                inner = parent
            }
        }
        let lock: FolderLock
        do { lock = try FolderLock(folder: root) } catch { throw CLIError(status: 2, "\(error)") }
        defer { withExtendedLifetime(lock) {} }
        let store = try root.openStore(create: true)
        var settings = encode.arguments
            + (chunking.chunkSeconds != 10 ? ["--chunk-seconds", String(chunking.chunkSeconds)] : [])
        if settings.isEmpty, let saved = try store.setting("options"),
           let remembered = try? JSONDecoder().decode([String].self, from: Data(saved.utf8)) {
            settings = remembered
            if !settings.isEmpty { say("using the options this folder was last watched with: \(settings.joined(separator: " "))") }
        } else {
            try store.setSetting("options", String(decoding: try JSONEncoder().encode(settings), as: UTF8.self))
        }
        if queue.given != nil {
            return try runShared(root: root, store: store, settings: settings)
        }
        var config = WatchConfiguration(folder: root, settings: settings, executable: selfExecutable())
        config.jobs = jobs
        config.once = once
        config.settle = settle
        config.recursive = recursive
        config.execAfter = execAfter
        config.stallSeconds = stallMinutes * 60
        config.unfinishedWait = unfinishedMinutes * 60
        // Test hooks: shorter retry, stall, orphan and lease times than a person would want.
        let seconds = { (name: String) in ProcessInfo.processInfo.environment[name].flatMap(Double.init) }
        if let retry = seconds("UPSCALE_WATCH_RETRY_SECONDS") {
            config.unavailableRetry = retry
            config.backoff = retry
            config.spaceRetry = retry
        }
        config.stallSeconds = seconds("UPSCALE_WATCH_STALL_SECONDS") ?? config.stallSeconds
        config.orphanGrace = seconds("UPSCALE_WATCH_ORPHAN_SECONDS") ?? config.orphanGrace
        config.lease = seconds("UPSCALE_WATCH_LEASE_SECONDS") ?? config.lease
        let stop = CancellationFlag()
        let trap = SignalTrap { stop.cancel() }
        defer { withExtendedLifetime(trap) {} }
        say("watching '\(root.root)'\(once ? " (once)" : ""): \(jobs) job(s) at a time, settle \(settle) s")
        let watcher = Watcher(config: config, store: store, say: say)
        let status = try watcher.run(stop: stop)
        // --once promises the folder processed: stopped early, it says so by its status, as the
        // plain command does (a service's watcher stopped by SIGTERM exits 0).
        if once && stop.isCancelled { throw ExitCode(130) }
        if status != 0 { throw ExitCode(status) }
    }
}

extension WatchCommand {
    /// `watch DIR --queue URL`: files become jobs on the shared queue; workers anywhere run them.
    func runShared(root: WatchFolder, store: SQLiteJobStore, settings all: [String]) throws {
        let shared = try queue.open()
        // Chunk length is decided here, at submission; workers get the encode options only.
        var settings: [String] = []
        var rest = all[...]
        while let first = rest.popFirst() {
            if first == "--chunk-seconds" { _ = rest.popFirst() } else { settings.append(first) }
        }
        let parsed = try EncodeOptions.parse(settings)
        let seconds = chunking.chunkSeconds > 0 ? chunking.chunkSeconds : 1e9
        let watcher = SharedWatcher(folder: root, store: store, queue: shared, settings: settings, settle: settle,
                                    unfinishedWait: unfinishedMinutes * 60, say: say) { input, folder in
            // The farm's chunks are video; a still became a one-frame HEVC movie.
            if StillImage.isStill(input) {
                throw UpscaleError(.input, "a still image: the shared queue takes videos; upscale it with 'upscale FILE' or a folder watched without --queue")
            }
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            var options = parsed.upscaleOptions(output: folder, overwrite: false)
            options.uniqueName = true
            let job = try JobPlanner.plan(input: input, options: options, multipleInputs: true)
            return (job.output, try ChunkPlan.make(path: input, chunkSeconds: seconds))
        }
        let stop = CancellationFlag()
        let trap = SignalTrap { stop.cancel() }
        defer { withExtendedLifetime(trap) {} }
        say("watching '\(root.root)' for the shared queue \(shared.address)\(once ? " (once)" : ""), settle \(settle) s")
        let status = try watcher.run(once: once, stop: stop)
        if once && stop.isCancelled { throw ExitCode(130) }
        if status != 0 { throw ExitCode(status) }
    }
}

/// The watcher's lines go to stdout, one per event, flushed at once (journald reads them as they come).
func say(_ text: String) {
    print(text)
    fflush(stdout)
}

/// This binary's own path, for starting job children.
func selfExecutable() -> String {
    (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
}

/// A one-line error with its exit status.
struct CLIError: Error, CustomStringConvertible {
    let status: Int32
    let description: String
    init(status: Int32, _ description: String) {
        self.status = status
        self.description = description
    }
}
