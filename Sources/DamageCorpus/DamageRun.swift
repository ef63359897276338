import Foundation

/// One run of a command on a damaged file: exit status (128 + signal when killed),
/// whether it had to be killed for taking too long, and what it printed on stderr.
public struct DamageRun: Sendable {
    public let status: Int32
    public let hung: Bool
    public let stderr: String

    public static func run(_ executable: String, _ arguments: [String], timeout: Double,
                           environment: [String: String] = [:]) throws -> DamageRun {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let collected = ErrorText()
        let reader = Thread { collected.set(errors.fileHandleForReading.readDataToEndOfFile()) }
        reader.start()
        let deadline = Date().addingTimeInterval(timeout)
        var hung = false
        while process.isRunning {
            if Date() > deadline {
                hung = true
                kill(process.processIdentifier, SIGKILL)
                break
            }
            usleep(10_000)
        }
        process.waitUntilExit()
        while !collected.done { usleep(1_000) }
        let status = process.terminationReason == .uncaughtSignal ? 128 + process.terminationStatus : process.terminationStatus
        return DamageRun(status: status, hung: hung, stderr: collected.text)
    }

    /// "ok" (exit 0, one visible output, nothing hidden left), "failed cleanly" (exit 1, one
    /// `error:` line, the output folder empty), or what went wrong: "crashed", "hung",
    /// "left files", "no message".
    public static func classify(status: Int32, hung: Bool, stderr: String, leftFiles: [String]) -> String {
        if hung { return "hung" }
        if status >= 128 || stderr.contains("Program crashed") || stderr.contains("Fatal error") { return "crashed" }
        switch status {
        case 0:
            let hidden = leftFiles.filter { $0.hasPrefix(".") }
            return hidden.isEmpty && leftFiles.count == 1 ? "ok" : "left files"
        case 1:
            if !leftFiles.isEmpty { return "left files" }
            let lines = stderr.split(separator: "\n").filter { !$0.isEmpty }
            return lines.contains { $0.hasPrefix("error: ") } ? "failed cleanly" : "no message"
        default:
            return "crashed"
        }
    }
}

private final class ErrorText: @unchecked Sendable {
    private let lock = NSLock()
    private var data: Data?
    func set(_ d: Data) { lock.lock(); data = d; lock.unlock() }
    var done: Bool { lock.lock(); defer { lock.unlock() }; return data != nil }
    var text: String { lock.lock(); defer { lock.unlock() }; return String(decoding: data ?? Data(), as: UTF8.self) }
}
