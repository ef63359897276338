import ArgumentParser
import Foundation
import Logging
import UpscaleDashboard
import UpscaleQueue

/// `upscale dashboard DIR | --queue URL [--listen HOST:PORT] [--token-file PATH]`: the queue's
/// web page, JSON API and Prometheus metrics.
struct DashboardCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dashboard",
        abstract: "Serve a web page for a watched folder's queue or the shared queue: jobs, workers, throughput, and its actions.",
        discussion: """
            Listens on 127.0.0.1:8080 by default. Any other address needs --token-file: the page asks for the token once \
            (kept in a cookie); API clients send 'Authorization: Bearer TOKEN'. JSON: /api/summary, /api/jobs, /api/workers; \
            metrics: /metrics.
            """)

    @Argument(help: "The watched folder (or --queue for the shared queue).") var folder: String?
    @OptionGroup var queue: QueueOption
    @Option(help: "HOST:PORT to serve on (default 127.0.0.1:8080; port 0 picks a free one).") var listen = "127.0.0.1:8080"
    @Option(help: "A file holding the access token (at least 16 characters); required off loopback.", transform: expandingTilde) var tokenFile: String?

    func run() throws {
        let (host, port) = try Self.address(listen)
        let configuration = DashboardServer.Configuration(host: host, port: port, token: try tokenFile.map(Self.readToken))
        do {
            try configuration.check()
        } catch is DashboardServer.UnsafeListenAddress {
            throw CLIError(status: 2, "refusing to serve on \(listen) without a token: anyone who reaches that address could cancel jobs; give --token-file PATH (e.g. made with 'head -c 24 /dev/urandom | base64 > PATH') or listen on 127.0.0.1")
        }
        let board: any QueueBoard
        if queue.isShared(folder: folder) {
            board = FarmBoard(queue: try queue.open())
        } else {
            board = try FolderBoard(folder: WatchFolder(root: try required(folder)))
        }
        let server = DashboardServer(board: board, configuration: configuration)
        let token = configuration.token
        let outcome = Outcome()
        let done = DispatchSemaphore(value: 0)
        Task {
            do {
                try await server.run(logger: Logger(label: "upscale.dashboard")) { bound in
                    print("dashboard for \(board.title): http://\(DashboardServer.Configuration.address(host: host, port: bound))/" + (token == nil ? "" : " (token required)"))
                    fflush(stdout)
                }
            } catch {
                outcome.error = error
            }
            done.signal()
        }
        done.wait()
        if let error = outcome.error {
            throw CLIError(status: 1, "cannot serve the dashboard on \(listen): \(Self.reason(error)); pick another address with --listen")
        }
    }

    final class Outcome: @unchecked Sendable {
        var error: Error?
    }

    static func reason(_ error: Error) -> String {
        let text = String(describing: error)
        if text.contains("Address already in use") || text.contains("EADDRINUSE") { return "the address is in use" }
        if text.contains("Cannot assign requested address") { return "this machine has no such address" }
        return text.split(separator: "\n").first.map(String.init) ?? text
    }

    /// "127.0.0.1:8080", "[::1]:8080", "0.0.0.0:80", or a bare port (on 127.0.0.1).
    static func address(_ text: String) throws -> (String, Int) {
        var host = "127.0.0.1", portText = text
        if text.hasPrefix("["), let close = text.firstIndex(of: "]") {
            host = String(text[text.index(after: text.startIndex)..<close])
            portText = String(text[text.index(after: close)...].dropFirst())
        } else if let colon = text.lastIndex(of: ":") {
            host = String(text[..<colon])
            portText = String(text[text.index(after: colon)...])
        }
        guard !host.isEmpty, let port = Int(portText), (0...65535).contains(port) else {
            throw CLIError(status: 2, "--listen '\(text)' is not HOST:PORT (for example 127.0.0.1:8080 or 0.0.0.0:8080)")
        }
        return (host, port)
    }

    static func readToken(_ path: String) throws -> String {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CLIError(status: 2, "cannot read the token file '\(path)'; create it with 'head -c 24 /dev/urandom | base64 > \(path)'")
        }
        let token = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        // Printable ASCII without what a cookie value or a header cannot hold.
        let allowed = token.unicodeScalars.allSatisfy { $0.value > 0x20 && $0.value < 0x7f && !"\";,\\".unicodeScalars.contains($0) }
        guard token.count >= 16, allowed else {
            throw CLIError(status: 2, "the token in '\(path)' must be at least 16 characters of printable ASCII without spaces, quotes, commas or semicolons; make one with 'head -c 24 /dev/urandom | base64 > \(path)'")
        }
        return token
    }
}
