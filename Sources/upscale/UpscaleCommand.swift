import ArgumentParser
import Foundation
import Logging
import UpscaleCore
import UpscaleImages
import UpscaleFarm
import UpscaleMedia
import UpscaleQueue

struct UpscaleCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "upscale",
        abstract: "Upscale videos (to H.265) and still images with a SIMD Lanczos core and learned edge refinement.",
        discussion: """
            Without --width, --height or --scale the video is upscaled 2x. Giving only one side keeps \
            the displayed aspect ratio. The result is written beside the input as "<name> Upscaled.<ext>" \
            and an existing file is never replaced without --overwrite.

            Still images (JPEG, PNG, WebP, TIFF, GIF, BMP, HEIF/AVIF, JPEG XL) keep their format. Folders: 'upscale watch DIR' upscales every video or image dropped into DIR, and \
            'upscale queue list|retry|cancel|pause|resume DIR' shows and steers its queue \
            (see 'upscale watch --help', 'upscale queue --help').
            """)

    @Argument(help: "Video and image files to upscale.")
    var inputs: [String]

    @OptionGroup var encode: EncodeOptions
    @OptionGroup var chunking: ChunkOptions

    @Option(parsing: .unconditional, help: "Chunks encoded at once, each with its share of the threads (default 1).")
    var jobs: Int = 1

    @Flag(inversion: .prefixedNo, help: "Continue an interrupted chunked run from its finished chunks (default on; --no-resume starts over).")
    var resume = true

    @Option(name: .shortAndLong, help: "Output file, or a folder (required to be a folder with several inputs).",
            transform: expandingTilde)
    var output: String?

    @Flag(help: "Replace an existing output file.")
    var overwrite = false

    @Flag(name: .shortAndLong, help: "Print nothing but errors.")
    var quiet = false

    @Flag(help: "Also show FFmpeg's own warnings.")
    var verbose = false

    /// Set by the parent on a job's child process: run the single input here and report on this descriptor.
    @Option(help: .hidden) var childReportFd: Int32?
    /// A watched job's lock, where the outputs it reports are recorded too (see `JobLock`).
    @Option(help: .hidden) var childLockFd: Int32?

    /// Set on a child whose parent has several inputs (the output must then be a folder).
    @Flag(help: .hidden) var childBatch = false

    /// Set by the watch folder's planner: report the output size and frame count, do nothing.
    @Flag(help: .hidden) var childPlanOnly = false

    /// Set by the watch folder: a taken output name becomes "<name> Upscaled 2.<ext>".
    @Flag(help: .hidden) var uniqueName = false

    /// Set by the watch folder: when the output folder lacks the space the job may need,
    /// exit with `JobProcess.noSpaceStatus` before starting (the job waits) instead of a note.
    @Flag(help: .hidden) var waitForSpace = false
    /// Set on a child of a batch: the outputs earlier inputs of the batch were written to.
    @Option(help: .hidden) var childTaken: [String] = []
    /// Set on a child of a batch: the batch's other inputs an output could land on.
    @Option(help: .hidden) var childOtherInput: [String] = []

    /// The options that take no value ("--overwrite", "-q"), as argument-parser itself declares
    /// them (its help dump), so that `Main.dashedFile` tells them from those that take one.
    static func flagNames() -> Set<String> {
        guard let object = try? JSONSerialization.jsonObject(with: Data(_dumpHelp().utf8)) as? [String: Any],
              let command = object["command"] as? [String: Any],
              let arguments = command["arguments"] as? [[String: Any]] else { return [] }
        var names: Set<String> = []
        for argument in arguments where argument["kind"] as? String == "flag" {
            for name in argument["names"] as? [[String: Any]] ?? [] {
                guard let kind = name["kind"] as? String, let text = name["name"] as? String else { continue }
                names.insert((kind == "short" ? "-" : "--") + text)
            }
        }
        return names
    }

    func validate() throws {
        if !(1...64).contains(jobs) { throw ValidationError("--jobs must be between 1 and 64") }
    }

    func run() throws {
        MediaLibrary.configure(verbose: verbose)
        if let fd = childReportFd {
            let reporter = JobReporter(descriptor: fd, jobLock: childLockFd)
            NoticeLogHandler.reporter = reporter
            FolderWrites.willPlace = { temporary, target in
                if let file = PlacedFile(temporary: temporary, target: target) { reporter.send(JobReport.placing(file).line) }
            }
            FolderWrites.didPlace = { reporter.placed($0) }
            try runChild(reporter: reporter)
        } else {
            try runParent()
        }
    }

    /// The copy of this process made at start, for the first input (see `Main.main`); set
    /// before any thread exists, then used on the main thread only.
    nonisolated(unsafe) static var zygote: Zygote?

    private static func takeZygote() -> Zygote? {
        defer { zygote = nil }
        return zygote
    }

    /// Each input in its own child process (this binary again), so that nothing a damaged
    /// file does inside FFmpeg — an assertion, a segfault — can take the whole run down.
    private func runParent() throws {
        defer { Self.takeZygote()?.dismiss() }
        let console = ConsoleOutput(quiet: quiet)
        let cancel = CancellationFlag()
        let running = RunningChild()
        let trap = SignalTrap(onRepeat: {
            writeStandardError("error: \(running.stopNow())\n")
        }) {
            cancel.cancel()
            // A child that has not ended a second later is ended as a second Ctrl-C would.
            if let child = running.terminate() {
                DispatchQueue.global().asyncAfter(deadline: .now() + RunningChild.stopGrace) {
                    if let line = running.stopIfStillRunning(child) {
                        writeStandardError("error: \(line)\n")
                        _exit(130)
                    }
                }
            }
        }
        defer { withExtendedLifetime(trap) {} }
        let executable = selfExecutable()

        // Said once, before anything runs: each child said it again, a still's as "the output
        // folder … does not exist" even of an existing file.
        if inputs.count > 1, let output, !JobPlanner.isDirectory(output) {
            console.error("--output '\(output)' must be an existing folder when upscaling several files")
            throw ExitCode(2)
        }
        if let (first, second, path) = sharedOutput() {
            console.error(JobPlanner.sameFile(first, second) ? "'\(second)' is given twice; give each file once"
                : "'\(first)' and '\(second)' would both be written to '\(path)'; upscale them into separate folders (--output) so neither result is lost")
            throw ExitCode(2)
        }
        var failed = 0
        var explained = false
        // Outputs written so far: a later input whose output lands on one fails instead of replacing it
        // (`sharedOutput` finds most such pairs before the run; a size beyond HEVC's, known only
        // once planned, can still move a video to .mov).
        var written: [String] = []
        // A file left undone or stopped by Ctrl-C / SIGTERM. A stop that came after the last
        // job had finished said "cancelled; no output was written" under its "Wrote" line, exit 130.
        var interrupted = false
        for input in inputs {
            if cancel.isCancelled {
                interrupted = true
                break
            }
            var arguments = encode.arguments + ["--child-report-fd", String(JobProcess.reportDescriptor)]
            for path in written { arguments += ["--child-taken", path] }
            // Outputs are named "<name> Upscaled….<ext>" (an --output file name needs a single
            // input), so only inputs named so can be another input's output.
            for other in inputs where other != input && URL(fileURLWithPath: other).lastPathComponent.contains(" Upscaled") {
                arguments += ["--child-other-input", other]
            }
            if let output { arguments += ["--output", output] }
            if overwrite { arguments.append("--overwrite") }
            if verbose { arguments.append("--verbose") }
            if quiet { arguments.append("--quiet") }
            if inputs.count > 1 { arguments.append("--child-batch") }
            arguments += ["--chunk-seconds", String(chunking.chunkSeconds), "--jobs", String(jobs)]
            if !resume { arguments.append("--no-resume") }
            arguments += ["--", input]

            let state = ChildState(title: URL(fileURLWithPath: input).lastPathComponent, console: console)
            let child: JobProcess
            if let zygote = Self.takeZygote() {
                child = try JobProcess(zygote: zygote, arguments: arguments, onLine: state.handle)
            } else {
                child = try JobProcess(executable: executable, arguments: arguments, onLine: state.handle)
            }
            running.set(child, state: state)
            let outcome = child.wait()
            // A second Ctrl-C killed it: the signal handler says so and exits the process.
            if running.stoppedNow { while true { pause() } }
            running.set(nil)
            state.finish(success: outcome == .exited(0))
            switch outcome {
            case .exited(0):
                if let summary = state.summary { console.line(summary) }
                if let output = state.output { written.append(output) }
            case .exited(2):
                state.printError()
                throw ExitCode(2)
            case .exited(130):
                // An interrupted chunked job says where its finished chunks are kept (that line
                // is the whole story: no second "cancelled" line under it).
                if let text = state.error, text != UpscaleError.cancelled().message {
                    console.error(text)
                    explained = true
                }
                interrupted = true
                cancel.cancel()
            case .exited(let code):
                state.printError(fallback: "'\(input)': the job ended with exit status \(code)")
                failed += 1
            case .signaled(let signal) where state.placedOutput != nil:
                // Killed after its output was in place, while it removed its chunks: it said
                // "run the same command again to resume", which then refused the existing
                // output, and the chunks left stayed hidden beside it for good.
                let output = state.placedOutput ?? input
                if let planned = state.output {
                    PartialFile.remove(for: planned, pid: child.pid)
                    ChunkedJob.removeLeftWork(for: planned)
                }
                console.line("Wrote \(output) (the job was stopped (\(JobProcess.signalName(signal))) after that, while it cleaned up)")
                written.append(output)
            case .signaled(let signal):
                if let output = state.output { PartialFile.remove(for: output, pid: child.pid) }
                let at = state.framesDone > 0 ? " after frame \(state.framesDone)" : " before its first frame"
                // A chunked job's finished chunks outlive it: the same command continues.
                let work = state.output.map(ChunkedJob.workFolder(for:)).flatMap { FileManager.default.fileExists(atPath: $0) ? $0 : nil }
                let kept = work.map { "its finished chunks are kept in '\($0)': run the same command again to resume" } ?? "no output was written"
                if signal == SIGKILL {
                    // The kernel's out-of-memory killer, or someone's kill -9: not the file's fault.
                    console.error("'\(input)': the job was killed (SIGKILL: out of memory?)\(at); \(kept)")
                } else if [SIGHUP, SIGTERM, SIGINT, SIGQUIT].contains(signal) {
                    // Sent from outside (a closed terminal's SIGHUP to the job alone): it was said
                    // to be a crash on a damaged file.
                    console.error("'\(input)': the job was stopped from outside (\(JobProcess.signalName(signal)))\(at); \(kept)")
                } else {
                    console.error("'\(input)': upscaling crashed (\(JobProcess.signalName(signal)))\(at); the file is probably damaged in a way the decoder cannot handle — re-export or trim it (\(kept))")
                }
                failed += 1
            }
        }
        if interrupted {
            if !explained {
                console.error(written.isEmpty ? "cancelled; no output was written"
                    : "cancelled; \(written.count == 1 ? "the output" : "the \(written.count) outputs") written before it \(written.count == 1 ? "is" : "are") complete")
            }
            throw ExitCode(130)
        }
        if failed > 0 { throw ExitCode(1) }
    }

    /// The first two inputs whose outputs would be one file ("<name> Upscaled.<ext>" in the
    /// same folder: one name from two folders into one --output folder, a.webm beside a.mov),
    /// and that file, found before anything runs: the later input failed at its turn, after
    /// the earlier had been upscaled. Names as the planners give them (`JobPlanner.plan`,
    /// `stillOutputPath`), without opening the files.
    private func sharedOutput() -> (String, String, String)? {
        guard inputs.count > 1 else { return nil }
        let codec = encode.upscaleOptions(output: output, overwrite: overwrite).encoder.codec
        var seen: [String: String] = [:]
        for input in inputs {
            let url = URL(fileURLWithPath: input)
            let ext = url.pathExtension.lowercased()
            let still = StillImage.isStill(input)
            let outputExt = still ? stillExtension(input: input) : JobPlanner.defaultContainer(inputExtension: ext, codec: codec)
            let folder = output ?? (JobPlanner.isRegularFile(input) ? url.deletingLastPathComponent().path : FileManager.default.currentDirectoryPath)
            let name = still ? stillOutputName(for: input, extension: outputExt) : JobPlanner.outputName(for: input, extension: outputExt)
            let path = URL(fileURLWithPath: folder).appendingPathComponent(name)
                .standardizedFileURL.path
            if let first = seen[path] { return (first, input, path) }
            seen[path] = input
        }
        return nil
    }

    /// The child's side: plan and run one input, report on the pipe, exit 0, 1, 2 or 130.
    private func runChild(reporter: JobReporter) throws {
        JobProcess.followParent()
        // A job's threads are throughput work (see `runAsBatch`); planning only feeds the
        // queue's ETA and takes what the running jobs leave idle.
        if childPlanOnly { setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 19) } else { JobProcess.runAsBatch() }
        var logger = Logger(label: "upscale")
        logger.logLevel = quiet ? .error : .notice
        var options = encode.upscaleOptions(output: output, overwrite: overwrite)
        options.uniqueName = uniqueName
        options.taken = childTaken
        options.otherInputs = childOtherInput
        let cancel = CancellationFlag()
        let trap = SignalTrap(repeatable: true) { cancel.cancel() }
        defer { withExtendedLifetime(trap) {} }
        guard let input = inputs.first else { throw ExitCode(2) }
        // A recording still being made (or a copy still at it) is read as far as it is written:
        // the job would end there, with exit 0 and no word of it.
        let writer = !childPlanOnly && JobPlanner.isRegularFile(input) ? OpenWriters.writers(of: input).first : nil
        if let writer {
            logger.notice("'\(input)' is being written right now by another program (\(writer.name), pid \(writer.pid)); the output holds only what is written so far — run it again when that program is done")
        }
        do {
            if StillImage.isCameraRaw(input) {
                // FFmpeg reads some of them as a TIFF picture (a preview, or undeveloped sensor data).
                throw UpscaleError(.input, "'\(input)' is a camera raw file; upscale reads developed pictures: export it as TIFF or JPEG first (darktable, RawTherapee, Lightroom)")
            }
            if StillImage.isStill(input) {
                try runStill(input: input, reporter: reporter, logger: logger, cancel: cancel)
                return
            }
            var job = try JobPlanner.plan(input: input, options: options, multipleInputs: childBatch, keepProbe: !childPlanOnly)
            let stillOnly = [encode.format.map { _ in "--format" }, encode.quality.map { _ in "--quality" }].compactMap { $0 }
            if !stillOnly.isEmpty && !childPlanOnly {
                logger.notice("\(stillOnly.joined(separator: " and ")) \(stillOnly.count > 1 ? "apply" : "applies") to still images; '\(input)' is a video (its codec is chosen with --codec, its quality with --crf)")
            }
            if let text = ProcessInfo.processInfo.environment["UPSCALE_STALL_SECONDS"], let seconds = Double(text) {
                job.stallSeconds = seconds
            }
            job.notices.forEach { logger.notice("\($0)") }
            if childPlanOnly {
                let frames = job.frameRate > 0 && job.duration > 0 ? Int((job.duration * job.frameRate).rounded()) : nil
                reportPlan(reporter, output: job.output, width: job.width, height: job.height, frames: frames)
                return
            }
            let folder = URL(fileURLWithPath: job.output).deletingLastPathComponent().path
            if let free = freeBytes(folder), free < job.estimatedOutputBytes {
                let text = "'\(folder)' has \(megabytes(free)) free; this job may need up to \(megabytes(job.estimatedOutputBytes))"
                if waitForSpace {
                    reporter.send(JobReport.error(kind: "space", text: text).line)
                    throw ExitCode(JobProcess.noSpaceStatus)
                }
                logger.notice("\(text)")
            }
            reporter.send(JobReport.output(path: job.output, width: job.width, height: job.height).line)
            let report: (TranscodeProgress) -> Void = { p in
                reporter.send(JobReport.progress(done: p.framesDone, total: p.framesTotal, elapsed: p.elapsed).line)
            }
            var summary: TranscodeSummary
            var reusedFrames = 0
            if ChunkedJob.applies(to: job, chunkSeconds: chunking.chunkSeconds),
               let outcome = try ChunkedJob(job: job, chunkSeconds: chunking.chunkSeconds, workers: jobs, logger: logger)
                .run(resume: resume, cancel: cancel, progress: report) {
                summary = outcome.summary
                reusedFrames = outcome.reusedFrames
            } else {
                summary = try Transcoder(job: job, logger: logger).run(cancel: cancel, progress: report)
                ChunkedJob.removeLeftWork(for: summary.output)
            }
            if summary.output != job.output {
                // The planned name was taken while the job ran (`Job.uniqueName`): where it went.
                reporter.send(JobReport.output(path: summary.output, width: job.width, height: job.height).line)
            }
            reporter.send(JobReport.summary(frames: summary.frames, text: summaryLine(summary, job: job, reusedFrames: reusedFrames)).line)
            if TestHook.current == .reportMallocArenas { writeStandardError("test hook: \(ProcessMemory.arenas) malloc arenas\n") }
        } catch var error as UpscaleError {
            if let writer, error.message.contains(UpscaleError.missingIndex) {
                // A recording under way: its index comes when it stops (the advice was a repair tool).
                error = UpscaleError(.input, "'\(input)' \(UpscaleError.missingIndex) yet: \(writer.name) (pid \(writer.pid)) is still writing it, and an .mp4/.mov gets its index when the recording stops; run it again then")
            }
            reporter.send(JobReport.error(kind: "\(error.kind)", text: error.message).line)
            switch error.kind {
            case .cancelled: throw ExitCode(130)
            case .usage: throw ExitCode(2)
            default: throw ExitCode(1)
            }
        } catch let exit as ExitCode {
            throw exit
        } catch let error as ImagePlanes.ImageError {
            // libvips' errors name the file already.
            reporter.send(JobReport.error(kind: "input", text: error.message).line)
            throw ExitCode(1)
        } catch {
            reporter.send(JobReport.error(kind: "processing", text: "'\(input)': \(error)").line)
            throw ExitCode(1)
        }
    }

    /// What `--child-plan-only` reports: the output and its picture size, and the frame count as progress 0 of it.
    func reportPlan(_ reporter: JobReporter, output: String, width: Int, height: Int, frames: Int?) {
        reporter.send(JobReport.output(path: output, width: width, height: height).line)
        reporter.send(JobReport.progress(done: 0, total: frames, elapsed: 0).line)
    }

    func freeBytes(_ folder: String) -> Int64? {
        if let free = TestHook.freeBytes { return free }
        var info = statvfs()
        // A filesystem of no blocks (/proc, /sys) says nothing about room.
        guard statvfs(folder, &info) == 0, info.f_blocks > 0 else { return nil }
        return Int64(info.f_bavail) * Int64(info.f_frsize)
    }

    func megabytes(_ bytes: Int64) -> String {
        bytes >= 10_000_000_000 ? String(format: "%.1f GB", Double(bytes) / 1e9) : String(format: "%.0f MB", Double(bytes) / 1e6)
    }

    /// `reusedFrames`: frames of chunks an earlier run finished, not counted in the rate (a run
    /// that only joined said "301 frames in 0.0 s, 9383.4 fps").
    private func summaryLine(_ s: TranscodeSummary, job: Job, reusedFrames: Int = 0) -> String {
        let fps = s.seconds > 0 ? Double(s.frames - reusedFrames) / s.seconds : 0
        var audio = ""
        if s.audioCopied + s.audioTranscoded > 0 {
            audio = "; audio: \(s.audioCopied) copied" + (s.audioTranscoded > 0 ? ", \(s.audioTranscoded) re-encoded to AAC" : "")
        }
        let scaling = job.kernel.rawValue + (job.refine ? " + edge refinement" : "")
        // The size as shown, which is what --width and --height speak of; the stored size beside
        // it where rotation or non-square pixels make them differ.
        var size = "\(job.width)x\(job.height)"
        if job.shownWidth > 0, (job.shownWidth, job.shownHeight) != (job.width, job.height) {
            size = "\(job.shownWidth)x\(job.shownHeight) as shown, stored \(size)"
        }
        let head = "Wrote \(s.output) (\(size), \(scaling), \(job.encoder.codec.rawValue) via \(s.encoderName), "
        // A run that only joined the last run's chunks has no rate of its own ("0.0 fps" read
        // as a failure).
        if reusedFrames >= s.frames && s.frames > 0 {
            return head + "\(s.frames) frames, all from the last run, joined in \(String(format: "%.1f", s.seconds)) s\(audio))"
        }
        return head + "\(s.frames) frames\(reusedFrames > 0 ? " (\(reusedFrames) from the last run)" : "") in \(String(format: "%.1f", s.seconds)) s, "
            + "\(String(format: "%.1f", fps)) fps\(audio))"
    }
}

/// The folder commands: `upscale watch …` and `upscale queue …`.
struct FolderCommands: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "upscale",
        abstract: "Upscale the videos dropped into a folder, and steer its queue.",
        subcommands: [WatchCommand.self, QueueCommand.self, SubmitCommand.self, WorkerCommand.self, DashboardCommand.self])
}

/// `upscale FILE…` is the plain command; a first argument of `watch` or `queue` picks the
/// folder commands (a file named so is given as `./watch`). Argument-parser's own usage
/// errors exit 2, as the README documents; everything else keeps its code.
@main
enum Main {
    static func main() {
        // Before any thread (see `ProcessMemory.useOneArena`): every command that runs jobs or
        // chunks. The dashboard, a web server whose event loops allocate on each request,
        // keeps glibc's per-thread arenas.
        let command = CommandLine.arguments.dropFirst().first
        if command != "dashboard" { ProcessMemory.useOneArena() }
        // A farm worker runs chunk after chunk for as long as it runs (a chunked job sets the
        // same when it starts).
        if command == "worker" { ProcessMemory.keepFreedMemory() }
        // A reader of the output that goes away (`| head -1`, a log tailer that ends) must not
        // end the run: a write to it fails, and the work goes on. SIGPIPE killed the command
        // at its next progress line (exit 141, no word), and the job with it.
        signal(SIGPIPE, SIG_IGN)
        if let name = notUTF8Argument() {
            writeStandardError("error: '\(name)' is not a UTF-8 name, which upscale cannot open; rename it (for Latin-1 names: convmv -f latin1 -t utf8 --notest NAME) and run again\n")
            exit(2)
        }
        var arguments = Array(CommandLine.arguments.dropFirst())
        let folder = arguments.first.map { ["watch", "queue", "submit", "worker", "dashboard"].contains($0) } ?? false
        // The plain command runs each file in a child process; the first one is a copy of
        // this process made now, while it has no thread yet (see `Zygote`).
        if !folder, !arguments.contains("--child-report-fd"), let name = dashedFile(in: arguments) {
            writeStandardError("error: '\(name)' is read as options; to upscale that file write ./\(name) (or put -- before it)\n")
            exit(2)
        }
        if !folder, !arguments.isEmpty, !arguments.contains("--child-report-fd") {
            switch Zygote.start() {
            case .job(let job):
                // A test hook reads the job's input off its arguments.
                TestHook.jobArguments = job
                arguments = job
            case .parent(let zygote):
                UpscaleCommand.zygote = zygote
            }
        }
        LoggingSystem.bootstrap { label in NoticeLogHandler(label: label) }
        if folder { run(FolderCommands.self, arguments) }
        run(UpscaleCommand.self, arguments)
    }

    /// The first argument that is not UTF-8, with its other bytes as \xNN. Such a name (Latin-1,
    /// from an old archive or a FAT card) cannot be a Swift string: its bytes became U+FFFD, and
    /// an existing file was said not to exist.
    static func notUTF8Argument() -> String? {
        for index in 1..<Int(CommandLine.argc) {
            guard let raw = CommandLine.unsafeArgv[index], String(validatingCString: raw) == nil else { continue }
            let bytes = Array(UnsafeRawBufferPointer(start: raw, count: strlen(raw)))
            var shown = "", i = 0
            while i < bytes.count {
                // The longest valid character here (UTF-8 has at most 4 bytes), else one byte escaped.
                if let n = (1...4).reversed().first(where: { i + $0 <= bytes.count && String(validating: bytes[i..<i + $0], as: UTF8.self) != nil }) {
                    shown += String(decoding: bytes[i..<i + n], as: UTF8.self)
                    i += n
                } else {
                    shown += String(format: "\\x%02X", bytes[i])
                    i += 1
                }
            }
            return shown
        }
        return nil
    }

    /// An existing file whose name starts with one "-", given without ./ or a "--" before it:
    /// argument-parser reads it as short options ("-dash.mp4" printed the help, for its "h",
    /// and exited 0; "-x.mp4" said an input was missing). Not a value after an option.
    static func dashedFile(in arguments: [String]) -> String? {
        let arguments = arguments.prefix { $0 != "--" }
        let isShort = { (argument: String) in argument.hasPrefix("-") && !argument.hasPrefix("--") && argument.count > 1 }
        // Only a run naming such a file asks argument-parser which options take no value.
        guard arguments.contains(where: { isShort($0) && FileManager.default.fileExists(atPath: $0) }) else { return nil }
        let flags = UpscaleCommand.flagNames()
        var previousTakesValue = false
        for argument in arguments {
            if previousTakesValue {
                previousTakesValue = false
                continue
            }
            if isShort(argument) && !flags.contains(argument) && FileManager.default.fileExists(atPath: argument) {
                return argument
            }
            // "-o X" and "--width X" take a value; flags ("--overwrite", "-q") and "--x=y" do not.
            previousTakesValue = argument.hasPrefix("-") && !argument.contains("=") && !flags.contains(argument)
        }
        return nil
    }

    static func run<Root: ParsableCommand>(_ root: Root.Type, _ arguments: [String]) -> Never {
        do {
            var command = try Root.parseAsRoot(arguments)
            try command.run()
            exit(0)
        } catch let error as CLIError {
            writeStandardError("error: \(error.description)\n")
            exit(error.status)
        } catch let error as FarmError {
            // A queue's error from a command's work (a worker refused, a server lost): one
            // line as every other (it came out as argument-parser's "Error: …").
            writeStandardError("error: \(error.description)\n")
            exit(1)
        } catch let error as WatchError {
            writeStandardError("error: \(error.description)\n")
            exit(1)
        } catch {
            let code = Root.exitCode(for: error)
            let message = Root.fullMessage(for: error)
            if code == .validationFailure {
                writeStandardError((message + "\n"))
                exit(2)
            }
            if !message.isEmpty {
                if code == .success {
                    print(message)
                } else {
                    writeStandardError((message + "\n"))
                }
            }
            exit(code.rawValue)
        }
    }
}
