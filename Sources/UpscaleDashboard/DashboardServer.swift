import Foundation
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle
import UpscaleQueue
import UnixSignals

/// The queue's web page, its JSON API and its metrics, served by Hummingbird.
///
/// Reads are served from one reading of the store at most `maxAge` old (taken on demand, so an
/// idle dashboard costs nothing and many open pages cost one read per second). Store calls run
/// on one thread of their own, never on the server's event loops.
public final class DashboardServer: @unchecked Sendable {
    public struct Configuration: Sendable {
        public var host: String
        public var port: Int
        /// Required of every API request (cookie or `Authorization: Bearer`) when set.
        public var token: String?
        public var maxAge: Double = 1

        public init(host: String = "127.0.0.1", port: Int = 8080, token: String? = nil) {
            self.host = host
            self.port = port
            self.token = token
        }

        /// "127.0.0.1:8080", "[::1]:8080".
        public var address: String { Self.address(host: host, port: port) }
        public static func address(host: String, port: Int) -> String { (host.contains(":") ? "[\(host)]" : host) + ":\(port)" }

        /// Serving off loopback without a token would let anyone who reaches the address steer
        /// the queue (the Host check alone does not stop a client that names 127.0.0.1).
        public func check() throws {
            guard token != nil || AccessGuard.isLoopback(host: host.lowercased()) else {
                throw UnsafeListenAddress(description: "serving on \(address) without a token would let anyone who reaches it steer the queue")
            }
        }
    }

    public struct UnsafeListenAddress: Error, CustomStringConvertible {
        public let description: String
    }

    let board: any QueueBoard
    let configuration: Configuration
    let cache: SnapshotCache
    let metrics = DashboardMetrics()
    private let lock = NSLock()
    private var group: ServiceGroup?
    private var stopRequested = false

    public init(board: any QueueBoard, configuration: Configuration) {
        self.board = board
        self.configuration = configuration
        cache = SnapshotCache(board: board)
    }

    /// Serves until `stop()` or one of `signals`; `onListening` gets the bound port.
    public func run(signals: [UnixSignal] = [.sigint, .sigterm], logger: Logger = Logger(label: "upscale.dashboard"),
                    onListening: @escaping @Sendable (Int) -> Void) async throws {
        try configuration.check()
        let router = Router(context: BasicRequestContext.self)
        router.add(middleware: AccessGuard(token: configuration.token))
        addRoutes(to: router)
        let requested = configuration.port
        let app = Application(
            router: router,
            configuration: .init(address: .hostname(configuration.host, port: requested), serverName: nil),
            onServerRunning: { channel in onListening(channel.localAddress?.port ?? requested) },
            logger: logger)
        let group = ServiceGroup(configuration: .init(services: [app], gracefulShutdownSignals: signals, logger: logger))
        let stopNow: Bool = lock.withLock {
            self.group = group
            return stopRequested
        }
        if stopNow { return }
        try await group.run()
    }

    public func stop() async {
        let group: ServiceGroup? = lock.withLock {
            stopRequested = true
            return self.group
        }
        await group?.triggerGracefulShutdown()
    }

    // MARK: Routes

    static let jsonHeaders: HTTPFields = [.contentType: "application/json; charset=utf-8", .cacheControl: "no-store"]

    func addRoutes(to router: Router<BasicRequestContext>) {
        // Every read answers HEAD as well (AccessGuard leaves the body out): every path answered
        // 404 to it, and uptime checks that probe with HEAD saw the dashboard down.
        func read<Output: ResponseGenerator>(_ path: RouterPath,
                                             _ handler: @escaping @Sendable (Request, BasicRequestContext) async throws -> Output) {
            router.get(path, use: handler)
            router.head(path, use: handler)
        }
        read("/") { _, _ in Self.asset(DashboardPage.html, type: "text/html; charset=utf-8") }
        read("/app.js") { _, _ in Self.asset(DashboardPage.script, type: "text/javascript; charset=utf-8") }
        read("/app.css") { _, _ in Self.asset(DashboardPage.style, type: "text/css; charset=utf-8") }

        read("/api/summary") { _, _ in
            try Self.json(try await self.snapshot().summary)
        }
        read("/api/workers") { _, _ in
            try Self.json(WorkerList(workers: try await self.snapshot().reading.workers))
        }
        read("/api/jobs") { request, _ in
            let snapshot = try await self.snapshot()
            let query = request.uri.queryParameters
            let offset = max(0, query["offset"].flatMap { Int(String($0)) } ?? 0)
            let limit = min(1000, max(1, query["limit"].flatMap { Int(String($0)) } ?? 100))
            let state = query["state"].map(String.init)
            let matching = state.map { wanted in snapshot.jobs.filter { $0.state == wanted } } ?? snapshot.jobs
            let page = offset < matching.count ? Array(matching[offset..<min(matching.count, offset + limit)]) : []
            return try Self.json(JobPage(total: matching.count, offset: offset, limit: limit, jobs: page))
        }
        read("/api/jobs/{id}/log") { _, context in
            let id = try context.parameters.require("id", as: Int64.self)
            guard let text = try await self.cache.perform({ try $0.log(job: id, limit: 16 * 1024) }) else {
                return Self.problem(.notFound, "no job \(id)")
            }
            return try Self.json(JobLog(id: id, text: text))
        }
        read("/metrics") { _, _ in
            self.metrics.update(try await self.snapshot())
            return Self.asset(self.metrics.text(), type: "text/plain; version=0.0.4; charset=utf-8", cache: "no-store")
        }

        router.post("/api/login") { request, context in
            let login = try await request.decode(as: Login.self, context: context)
            guard let token = self.configuration.token else { return Response(status: .noContent) }
            guard AccessGuard.same(login.token, token) else { return Self.problem(.unauthorized, "wrong token") }
            var response = Response(status: .noContent)
            response.setCookie(Cookie(name: AccessGuard.cookie, value: token, maxAge: 30 * 24 * 3600, path: "/", httpOnly: true, sameSite: .strict))
            return response
        }
        router.post("/api/jobs/{id}/retry") { _, context in
            let id = try context.parameters.require("id", as: Int64.self)
            return try await self.act(id, "retry", "is not failed or cancelled") { try $0.retry(job: id) }
        }
        router.post("/api/jobs/{id}/cancel") { _, context in
            let id = try context.parameters.require("id", as: Int64.self)
            return try await self.act(id, "cancel", "is not queued or running") { try $0.cancel(job: id) }
        }
        router.post("/api/jobs/{id}/priority") { request, context in
            let id = try context.parameters.require("id", as: Int64.self)
            let body = try await request.decode(as: PriorityChange.self, context: context)
            guard QueueActions.priorities.contains(body.priority) else {
                return Self.problem(.badRequest, "priority must be between \(QueueActions.priorities.lowerBound) and \(QueueActions.priorities.upperBound)")
            }
            return try await self.act(id, "priority", "is not open") { try $0.setPriority(job: id, priority: body.priority) }
        }
        router.post("/api/pause") { _, _ in try await self.act(nil, "pause", "") { try $0.setPaused(true); return true } }
        router.post("/api/resume") { _, _ in try await self.act(nil, "resume", "") { try $0.setPaused(false); return true } }
    }

    /// Applies an action through the store and answers with the job (or summary) as it is now.
    private func act(_ id: Int64?, _ name: String, _ refusal: String,
                     _ body: @escaping @Sendable (any QueueBoard) throws -> Bool) async throws -> Response {
        let applied: Bool
        do {
            applied = try await cache.perform(body)
        } catch let refusal as BoardRefusal {
            return Self.problem(.conflict, refusal.message)
        }
        let snapshot = try await cache.current(maxAge: configuration.maxAge, notBefore: Date().timeIntervalSince1970)
        if !applied, let id, !snapshot.jobs.contains(where: { $0.id == id }) { return Self.problem(.notFound, "no job \(id)") }
        guard applied else { return Self.problem(.conflict, "job \(id.map(String.init) ?? "?") \(refusal)") }
        let job = id.flatMap { id in snapshot.jobs.first { $0.id == id } }
        return try Self.json(ActionResult(action: name, job: job, paused: snapshot.summary.paused))
    }

    func snapshot() async throws -> BoardSnapshot {
        try await cache.current(maxAge: configuration.maxAge)
    }

    struct WorkerList: Encodable { let workers: [BoardWorker] }
    struct JobPage: Encodable { let total: Int; let offset: Int; let limit: Int; let jobs: [BoardJob] }
    struct JobLog: Encodable { let id: Int64; let text: String }
    struct Login: Decodable { let token: String }
    struct PriorityChange: Decodable { let priority: Int }
    struct ActionResult: Encodable { let action: String; let job: BoardJob?; let paused: Bool }
    struct Problem: Encodable { let error: String }

    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }()

    static func json<T: Encodable>(_ value: T, status: HTTPResponse.Status = .ok) throws -> Response {
        let data = try encoder.encode(value)
        return Response(status: status, headers: jsonHeaders, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    static func problem(_ status: HTTPResponse.Status, _ message: String) -> Response {
        (try? json(Problem(error: message), status: status)) ?? Response(status: status)
    }

    static func asset(_ text: String, type: String, cache: String = "no-cache") -> Response {
        Response(status: .ok, headers: [.contentType: type, .cacheControl: cache], body: .init(byteBuffer: ByteBuffer(string: text)))
    }
}

/// One reading of the store shared by every request within `maxAge`; one read at a time, on
/// a thread of its own (the stores are synchronous).
actor SnapshotCache {
    private let board: any QueueBoard
    private let thread = DispatchQueue(label: "upscale.dashboard.store")
    private var latest: BoardSnapshot?
    private var reading: Task<BoardSnapshot, Error>?

    init(board: any QueueBoard) {
        self.board = board
    }

    /// A reading at most `maxAge` old and taken no earlier than `notBefore` (an action asks
    /// for one that includes its own write).
    func current(maxAge: Double, notBefore: Double = 0) async throws -> BoardSnapshot {
        while true {
            let now = Date().timeIntervalSince1970
            if let latest, now - latest.taken <= maxAge, latest.taken >= notBefore { return latest }
            if let reading {
                let snapshot = try await reading.value
                if snapshot.taken >= notBefore { return snapshot }
                continue
            }
            let task = Task { () throws -> BoardSnapshot in
                try await self.perform { board in
                    let now = Date().timeIntervalSince1970
                    let day = Calendar.current.startOfDay(for: Date(timeIntervalSince1970: now)).timeIntervalSince1970
                    return BoardSnapshot(title: board.title, reading: try board.read(now: now), now: now, startOfDay: day)
                }
            }
            reading = task
            defer { reading = nil }
            let snapshot = try await task.value
            latest = snapshot
            return snapshot
        }
    }

    nonisolated func perform<T: Sendable>(_ body: @escaping @Sendable (any QueueBoard) throws -> T) async throws -> T {
        let board = self.board
        return try await withCheckedThrowingContinuation { continuation in
            thread.async {
                continuation.resume(with: Result { try body(board) })
            }
        }
    }
}
