import Foundation

/// Debian's chromium in headless mode, with a throwaway profile.
public enum Chromium {
    public static func path() throws -> String {
        for path in ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"]
        where FileManager.default.isExecutableFile(atPath: path) {
            return path
        }
        throw ProbeError("chromium is not installed: apt-get install chromium (.ci/run and 'make test' do)")
    }

    /// Loads `url` (5 s of virtual time for its scripts and requests) with `extra` switches
    /// (`--dump-dom`, `--screenshot=PATH`); returns its standard output.
    public static func run(_ url: String, _ extra: [String]) throws -> String {
        let profile = NSTemporaryDirectory() + "upscale-chromium-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: profile) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try path())
        process.arguments = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
                             "--no-first-run", "--user-data-dir=\(profile)", "--virtual-time-budget=5000"] + extra + [url]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }
}

/// `upscale dashboard …` as a child process.
public enum DashboardProcess {
    /// Starts it and waits for the address it prints; returns the process and its URL.
    public static func start(binary: String, _ arguments: [String]) throws -> (Process, String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["dashboard"] + arguments
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        let line = LineReader(out.fileHandleForReading)
        guard let first = line.next(timeout: 30), let start = first.range(of: "http://") else {
            process.terminate()
            throw ProbeError("upscale dashboard printed no address")
        }
        return (process, String(first[start.lowerBound...].prefix { $0 != " " }))
    }
}

/// Lines from a pipe, with a time limit.
public final class LineReader: @unchecked Sendable {
    private let handle: FileHandle
    private var buffer = Data()
    public init(_ handle: FileHandle) { self.handle = handle }

    public func next(timeout: Double) -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let newline = buffer.firstIndex(of: 0x0A) {
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                return line
            }
            var poller = pollfd(fd: handle.fileDescriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 200) >= 0 else { return nil }
            if poller.revents != 0 {
                let data = handle.availableData
                if data.isEmpty { return nil }
                buffer.append(data)
            }
        }
        return nil
    }
}
