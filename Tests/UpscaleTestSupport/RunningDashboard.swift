import Foundation
import UpscaleDashboard

/// A dashboard server started in this process on a free loopback port, stopped by `stop()`.
public final class RunningDashboard: @unchecked Sendable {
    public let server: DashboardServer
    public let port: Int
    public let http: HTTPProbe
    private let finished = DispatchSemaphore(value: 0)

    public init(board: any QueueBoard, token: String? = nil) throws {
        server = DashboardServer(board: board, configuration: .init(host: "127.0.0.1", port: 0, token: token))
        let bound = PortBox()
        let started = DispatchSemaphore(value: 0)
        let done = finished
        let server = self.server
        Task {
            do {
                try await server.run(signals: []) { port in
                    bound.port = port
                    started.signal()
                }
            } catch {
                bound.error = error
                started.signal()
            }
            done.signal()
        }
        guard started.wait(timeout: .now() + 30) == .success, let port = bound.port else {
            throw ProbeError("the dashboard did not start: \(bound.error.map { "\($0)" } ?? "no port within 30 s")")
        }
        self.port = port
        http = HTTPProbe(port: port)
    }

    /// The page's own origin, as a browser sends it with a POST.
    public var origin: String { "http://127.0.0.1:\(port)" }

    public func stop() {
        let server = self.server
        Task { await server.stop() }
        _ = finished.wait(timeout: .now() + 30)
    }

    private final class PortBox: @unchecked Sendable {
        var port: Int?
        var error: Error?
    }
}
