import Foundation
import UpscaleMedia
import UpscaleQueue

/// What the parent knows of the running child: its output path, progress (drawn as the
/// bar, created when the first frame is done so the child's notes print above it), and
/// the summary or error it reported.
final class ChildState: @unchecked Sendable {
    private let lock = NSLock()
    private let title: String
    private let console: ConsoleOutput
    private var display: ProgressDisplay?
    private(set) var output: String?
    private(set) var summary: String?
    private(set) var error: String?
    private(set) var framesDone = 0
    /// The finished file the child last said it was renaming into place.
    private var placing: PlacedFile?

    /// Where the child put its output, if it did: the file it said it was placing is there.
    /// Only a finished job renames its file there, so a child killed after that (while it
    /// removed its chunks) wrote its output in full.
    var placedOutput: String? {
        lock.lock()
        defer { lock.unlock() }
        guard let placing, placing.isInPlace else { return nil }
        return placing.path
    }

    init(title: String, console: ConsoleOutput) {
        self.title = title
        self.console = console
    }

    func handle(_ line: String) {
        guard let report = JobReport(line: line) else { return }
        lock.lock()
        defer { lock.unlock() }
        switch report {
        case .output(let path, _, _): output = path
        case .placing(let file): placing = file
        case .summary(_, let text): summary = text
        case .error(_, let text):
            error = text
            // A rename that failed removed its file: another file may get that identity later.
            if placing?.isInPlace == false { placing = nil }
        // (The child's own stderr has shown it.)
        case .note: break
        case .progress(let done, let total, let elapsed):
            framesDone = done
            // A still is one picture: no bar for it.
            if total == 1 { break }
            if display == nil { display = ProgressDisplay(title: title, console: console) }
            display?.update(TranscodeProgress(framesDone: done, framesTotal: total, elapsed: elapsed))
        }
    }

    func finish(success: Bool) {
        lock.lock()
        defer { lock.unlock() }
        display?.finish(success: success)
    }

    func printError(fallback: String? = nil) {
        lock.lock()
        defer { lock.unlock() }
        if let message = error ?? fallback { console.error(message) }
    }
}

/// The child being waited on, for the signal handler to stop.
final class RunningChild: @unchecked Sendable {
    /// Seconds a child has to end after a stop request before it is ended at once.
    static let stopGrace = 1.0
    private let lock = NSLock()
    private var child: JobProcess?
    private var state: ChildState?
    private var stopped = false

    /// Whether `stopNow` ended the child: the process exits from the signal handler once it
    /// has said what was not written. (Waited on, the SIGKILL it sent was reported as "the
    /// job was killed (out of memory?)" after that line, when the main thread got there first.)
    var stoppedNow: Bool {
        lock.lock()
        defer { lock.unlock() }
        return stopped
    }

    func set(_ value: JobProcess?, state: ChildState? = nil) {
        lock.lock()
        child = value
        self.state = state
        lock.unlock()
    }

    /// Ends the child at once and removes its temporary file: a second Ctrl-C, where the
    /// parent exits without waiting for the child's own clean-up (which went on for a second
    /// or two after the shell's prompt was back, the file still there meanwhile).
    /// Returns the line to print: what was not written, or where a chunked job's finished
    /// chunks are kept.
    func stopNow() -> String {
        lock.lock()
        defer { lock.unlock() }
        guard let child else { return "cancelled" }
        stopped = true
        child.kill9()
        // Until it has ended (left for the main thread to reap), so nothing it does follows.
        var info = siginfo_t()
        while waitid(P_PID, id_t(child.pid), &info, WEXITED | WNOWAIT) < 0 && errno == EINTR {}
        // What it said last (that it was placing its output, a moment before the kill).
        child.waitForLastReport(seconds: 0.5)
        guard let output = state?.output else { return "cancelled; no output was written" }
        PartialFile.remove(for: output, pid: child.pid)
        // Stopped after its output was in place (while it removed its chunks): complete. It
        // said the chunks were kept for a resume, which then refused the existing output.
        if let placed = state?.placedOutput {
            ChunkedJob.removeLeftWork(for: output)
            return "cancelled after '\(placed)' was written; the output is complete"
        }
        let work = ChunkedJob.workFolder(for: output)
        if FileManager.default.fileExists(atPath: work) {
            return "cancelled; the finished chunks of '\(output)' are kept in '\(work)': run the same command again to resume"
        }
        return "cancelled; '\(output)' was not written"
    }

    /// Asks the child to stop; returns it, for `stopIfStillRunning`.
    func terminate() -> JobProcess? {
        lock.lock()
        defer { lock.unlock() }
        child?.terminate()
        return child
    }

    /// `stopNow` for a child that a stop request has not ended: x265 sees the request only
    /// when it returns a picture, and at the start of a large job its look-ahead holds it for
    /// seconds (a Ctrl-C 0.5 s into a 2560x1920 job took 3.9 s to end it). Nil, doing
    /// nothing, where `expected` has ended or is no longer the running child.
    func stopIfStillRunning(_ expected: JobProcess) -> String? {
        lock.lock()
        let current = child
        lock.unlock()
        guard let current, current === expected else { return nil }
        var info = siginfo_t()
        // Ended: not yet reaped by the main thread, which reports it, or reaped already (waitid
        // fails, ECHILD; its pid may even be another process's by now).
        if waitid(P_PID, id_t(current.pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info._sifields._kill.si_pid != 0 { return nil }
        return stopNow()
    }
}
