import Foundation
import Logging

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
        FileHandle.standardError.write(Data("error: \(text)\n".utf8))
    }
}

/// Prints log records as "note: …" lines on stderr; the CLI's only log output.
struct NoticeLogHandler: LogHandler {
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
        FileHandle.standardError.write(Data("\(prefix): \(message)\n".utf8))
    }
}
