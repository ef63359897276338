import Foundation
import Logging
import UpscaleQueue

/// Where the CLI's lines go: results to stdout, errors and notes to stderr.
struct ConsoleOutput {
    let quiet: Bool
    let isTerminal = isatty(STDOUT_FILENO) == 1

    func line(_ text: String) {
        guard !quiet else { return }
        print(text)
        fflush(stdout)
    }

    func error(_ text: String) {
        writeStandardError("error: \(text)\n")
    }
}

/// Prints log records as "note: …" lines on stderr; the CLI's only log output.
struct NoticeLogHandler: LogHandler {
    /// A job child's reporter: its notes also go to the parent (a watcher shows them; its
    /// stderr goes to the job's log file).
    nonisolated(unsafe) static var reporter: JobReporter?
    let label: String
    var logLevel: Logger.Level = .notice
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(level: Logger.Level, message: Logger.Message, metadata: Logger.Metadata?,
             source: String, file: String, function: String, line: UInt) {
        let prefix = level >= .error ? "error" : (level >= .warning ? "warning" : "note")
        writeStandardError("\(prefix): \(message)\n")
        if level < .error { Self.reporter?.send(JobReport.note(text: "\(message)").line) }
    }
}

/// `~` and `~/…` as `$HOME`, as in the shell (and `~user/…` as that user's home): a shell
/// leaves them as they are in `--output=~/x.mp4`, and the job then ran to its end to fail at
/// the final rename (its temporary file, made through Foundation, had been put in the home folder).
func expandingTilde(_ path: String) -> String {
    guard path.hasPrefix("~") else { return path }
    if path == "~" || path.hasPrefix("~/"), let home = ProcessInfo.processInfo.environment["HOME"], !home.isEmpty {
        return home + path.dropFirst()
    }
    return (path as NSString).expandingTildeInPath
}

/// Writes `text` to standard error, whatever becomes of it: SIGPIPE is ignored (see `main`),
/// and FileHandle's write stops the process on a failed write (a reader that went away,
/// `upscale … 2>&1 | head -1`).
func writeStandardError(_ text: String) {
    var bytes = Array(text.utf8)[...]
    while !bytes.isEmpty {
        let n = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
        if n < 0 && errno == EINTR { continue }
        if n <= 0 { return }
        bytes = bytes.dropFirst(n)
    }
}
