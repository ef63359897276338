import Foundation
import UpscaleDashboard
import UpscaleQueue
import UpscaleTestSupport
import XCTest

/// The dashboard's HTTP surface against a real server on a free loopback port, reading and
/// steering a watched folder's store.
final class DashboardHTTPTests: XCTestCase {
    private var fixture: QueueFixture!
    private var dashboard: RunningDashboard!

    private func start(token: String? = nil, extraQueued: Int = 0) throws {
        fixture = try QueueFixture.make(extraQueued: extraQueued)
        dashboard = try RunningDashboard(board: try FolderBoard(folder: fixture.folder), token: token)
    }

    override func tearDown() {
        dashboard?.stop()
        fixture?.remove()
        dashboard = nil
        fixture = nil
    }

    private var http: HTTPProbe { dashboard.http }

    private func post(_ path: String, _ body: String = "{}", headers: [String: String]? = nil) throws -> HTTPProbe.Reply {
        try http.send("POST", path, headers: headers ?? ["Origin": dashboard.origin], body: body)
    }

    private func id(_ name: String) -> Int64 { fixture.ids[name]! }

    func testAPIRoutesShowTheStore() throws {
        try start()
        let summary = try http.send("GET", "/api/summary")
        XCTAssertEqual(summary.status, 200)
        XCTAssertEqual(summary.header("content-type"), "application/json; charset=utf-8")
        let s = try summary.json()
        let counts = s["counts"] as? [String: Int]
        XCTAssertEqual(counts, ["done": 2, "failed": 1, "waiting-for-space": 1, "finishing": 1, "running": 1,
                                "cancelled": 1, "queued": 3])
        XCTAssertEqual(s["jobs"] as? Int, 10)
        XCTAssertEqual(s["paused"] as? Bool, false)
        XCTAssertEqual(s["framesPerSecond"] as? Double, 2.5)
        XCTAssertEqual(s["workers"] as? Int, 1)
        // Done today: both finished jobs, unless the test runs in the first 3 hours of a day.
        let midnight = Calendar.current.startOfDay(for: Date()).timeIntervalSince1970
        XCTAssertEqual(s["doneToday"] as? Int, [3 * 3600.0, 3600].filter { fixture.now - $0 + 200 >= midnight }.count)
        // Throughput: 24 buckets of 15 min; the two done jobs' 240 frames each over 200 s, and
        // the running job's 120 frames over its 48 s so far.
        let chart = s["throughput"] as? [[String: Double]] ?? []
        XCTAssertEqual(chart.count, 24)
        let frames = chart.enumerated().reduce(0.0) { total, point in
            let seconds = point.offset == 23 ? min(900, max(1, (s["now"] as! Double) - point.element["start"]!)) : 900
            return total + point.element["fps"]! * seconds
        }
        XCTAssertEqual(frames, 600, accuracy: 0.5)

        let jobs = try http.send("GET", "/api/jobs").json()
        XCTAssertEqual(jobs["total"] as? Int, 10)
        let rows = jobs["jobs"] as? [[String: Any]] ?? []
        XCTAssertEqual(rows.map { $0["file"] as? String }.prefix(2), ["finishing.mov", "running.mov"])
        let running = rows.first { $0["file"] as? String == "running.mov" }!
        XCTAssertEqual(running["progress"] as? Double, 0.4)
        XCTAssertEqual(running["fps"] as? Double, 2.5)
        XCTAssertEqual(running["etaSeconds"] as? Double, 72)
        XCTAssertEqual(running["machines"] as? [String], ["render-box"])
        XCTAssertEqual(rows.first { $0["file"] as? String == "failed.mov" }?["error"] as? String, QueueFixture.failure)
        // Pages and a state filter.
        let page = try http.send("GET", "/api/jobs?offset=2&limit=3").json()
        XCTAssertEqual((page["jobs"] as? [[String: Any]])?.compactMap { $0["id"] as? Int }, rows[2..<5].compactMap { $0["id"] as? Int })
        let failed = try http.send("GET", "/api/jobs?state=failed").json()
        XCTAssertEqual(failed["total"] as? Int, 1)

        let workers = try http.send("GET", "/api/workers").json()["workers"] as? [[String: Any]] ?? []
        XCTAssertEqual(workers.count, 1)
        XCTAssertEqual(workers.first?["name"] as? String, "render-box:4242")
        XCTAssertEqual(workers.first?["current"] as? String, "running.mov")

        let log = try http.send("GET", "/api/jobs/\(id("failed.mov"))/log")
        XCTAssertEqual(log.status, 200)
        XCTAssertTrue((try log.json()["text"] as? String ?? "").contains("error while decoding MB 12 4"))
        XCTAssertEqual(try http.send("GET", "/api/jobs/999999/log").status, 404)
        XCTAssertEqual(try http.send("GET", "/api/jobs/abc/log").status, 400)
        XCTAssertTrue([400, 404].contains(try http.send("GET", "/api/jobs/..%2F..%2Fetc%2Fpasswd/log").status))
    }

    func testMetricsDescribeTheQueue() throws {
        try start()
        var metrics = try http.send("GET", "/metrics")
        XCTAssertEqual(metrics.status, 200)
        XCTAssertTrue(metrics.header("content-type")?.hasPrefix("text/plain") == true)
        var text = metrics.text
        XCTAssertTrue(text.contains(#"upscale_jobs{state="failed"} 1"#), text)
        XCTAssertTrue(text.contains(#"upscale_jobs{state="queued"} 3"#), text)
        // 240 + 240 done, 100 finishing, 120 running.
        XCTAssertTrue(text.contains("upscale_frames_encoded_total 700"), text)
        XCTAssertTrue(text.contains(#"upscale_worker_fps{worker="render-box:4242"} 2.5"#), text)
        XCTAssertTrue(text.contains("upscale_chunk_seconds_count 2"), text)
        XCTAssertTrue(text.contains(#"upscale_chunk_seconds_bucket{le="300.0"} 2"#) || text.contains(#"upscale_chunk_seconds_bucket{le="300"} 2"#), text)
        XCTAssertTrue(text.contains("upscale_lease_rescues_total 0"), text)

        // The running job's lease runs out and the store takes it back: one rescue.
        XCTAssertEqual(try fixture.store.requeueExpired(now: fixture.now + 7200), 1)
        Thread.sleep(forTimeInterval: 1.1)
        metrics = try http.send("GET", "/metrics")
        text = metrics.text
        XCTAssertTrue(text.contains("upscale_lease_rescues_total 1"), text)
        XCTAssertTrue(text.contains(#"upscale_jobs{state="running"} 0"#), text)
        XCTAssertFalse(text.contains("upscale_worker_fps{"), text)
    }

    func testActionsApplyToTheStore() throws {
        try start()
        // Retry a failed job: queued again with fresh attempts.
        var reply = try post("/api/jobs/\(id("failed.mov"))/retry")
        XCTAssertEqual(reply.status, 200, reply.text)
        XCTAssertEqual(try fixture.store.job(id: id("failed.mov"))?.state, .queued)
        XCTAssertEqual(try fixture.store.job(id: id("failed.mov"))?.attempts, 0)
        XCTAssertEqual((try reply.json()["job"] as? [String: Any])?["state"] as? String, "queued")
        // Retrying a job that is not failed is refused and changes nothing.
        reply = try post("/api/jobs/\(id("done-late.mov"))/retry")
        XCTAssertEqual(reply.status, 409)
        XCTAssertEqual(try fixture.store.job(id: id("done-late.mov"))?.state, .done)
        // Cancel a queued job.
        reply = try post("/api/jobs/\(id("queued-a.mov"))/cancel")
        XCTAssertEqual(reply.status, 200, reply.text)
        XCTAssertEqual(try fixture.store.job(id: id("queued-a.mov"))?.state, .cancelled)
        // Run next: priority above the rest; the next claim takes it.
        reply = try post("/api/jobs/\(id("queued-b.mov"))/priority", #"{"priority": 5}"#)
        XCTAssertEqual(reply.status, 200, reply.text)
        XCTAssertEqual(try fixture.store.job(id: id("queued-b.mov"))?.priority, 5)
        // Pause: nothing is claimed; resume: the prioritised job is.
        XCTAssertEqual(try post("/api/pause").status, 200)
        XCTAssertTrue(try fixture.store.isPaused())
        XCTAssertNil(try fixture.store.claim(owner: "t", lease: 10, now: fixture.now + 1000))
        XCTAssertEqual((try http.send("GET", "/api/summary").json())["paused"] as? Bool, true)
        XCTAssertEqual(try post("/api/resume").status, 200)
        XCTAssertFalse(try fixture.store.isPaused())
        XCTAssertEqual(try fixture.store.claim(owner: "t", lease: 10, now: fixture.now + 1000)?.job.id, id("queued-b.mov"))
        // The API shows each change at once (no stale reading after an action).
        let rows = try http.send("GET", "/api/jobs?state=cancelled").json()["jobs"] as? [[String: Any]] ?? []
        XCTAssertEqual(Set(rows.compactMap { $0["file"] as? String }), ["cancelled.mov", "queued-a.mov"])
        // No such job is a 404 (it was a 409, as for a job in the wrong state); a priority
        // out of range a 400 (on the shared queue it was the server's "integer out of range", a 503).
        XCTAssertEqual(try post("/api/jobs/424242/cancel").status, 404)
        // Every refusal has one shape, {"error": "…"}: Hummingbird's own (a body that does not
        // decode, an id that is not a number, no such path) came as {"error": {"message": …}}.
        for (response, status) in [(try post("/api/jobs/\(id("queued-b.mov"))/priority", #"{"priority": "high"}"#), 400),
                                   (try post("/api/jobs/\(id("queued-b.mov"))/priority", #"{"priority": 99999999999}"#), 400),
                                   (try post("/api/jobs/abc/cancel"), 400), (try post("/api/jobs/424242/cancel"), 404),
                                   (try http.send("GET", "/api/jobs/abc/log"), 400), (try http.send("GET", "/api/nothing"), 404)] {
            XCTAssertEqual(response.status, status)
            let message = (try? response.json())?["error"] as? String
            XCTAssertFalse(message?.isEmpty ?? true, "\(status): \(response.text)")
        }
    }

    func testForeignOriginsMethodsAndHostsAreRefused() throws {
        try start()
        let queued = id("queued-a.mov")
        // Another site's page posting to this one.
        var reply = try post("/api/jobs/\(queued)/cancel", headers: ["Origin": "http://evil.example"])
        XCTAssertEqual(reply.status, 403)
        XCTAssertEqual(try fixture.store.job(id: queued)?.state, .queued)
        XCTAssertEqual(try post("/api/pause", headers: ["Origin": "http://127.0.0.1:1"]).status, 403)
        // No Origin and no token: not from this page; said how a script gets a token to send.
        reply = try post("/api/pause", headers: [:])
        XCTAssertEqual(reply.status, 403)
        XCTAssertTrue((try reply.json()["error"] as? String)?.contains("start the dashboard with --token-file") == true, reply.text)
        XCTAssertFalse(try fixture.store.isPaused())
        // Actions are POST only; reads GET (or HEAD) only: 405, with what is allowed.
        for method in ["GET", "PUT", "DELETE"] {
            reply = try http.send(method, "/api/pause", headers: ["Origin": dashboard.origin])
            XCTAssertEqual(reply.status, 405, method)
            XCTAssertEqual(reply.header("allow"), "POST", method)
            reply = try http.send(method, "/api/jobs/\(queued)/cancel", headers: ["Origin": dashboard.origin])
            XCTAssertEqual(reply.status, 405, method)
        }
        for method in ["PUT", "DELETE", "OPTIONS", "POST"] {
            reply = try http.send(method, "/api/summary", headers: ["Origin": dashboard.origin])
            XCTAssertEqual(reply.status, 405, method)
            XCTAssertEqual(reply.header("allow"), "GET, HEAD", method)
        }
        // HEAD answers as GET does, without the body (it was 404 on every path).
        for path in ["/", "/api/summary", "/metrics"] {
            reply = try http.send("HEAD", path)
            XCTAssertEqual(reply.status, 200, path)
            XCTAssertEqual(reply.body.count, 0, path)
        }
        XCTAssertEqual(try http.send("HEAD", "/nowhere").status, 404)
        XCTAssertFalse(try fixture.store.isPaused())
        XCTAssertEqual(try fixture.store.job(id: queued)?.state, .queued)
        // A name that rebinds to 127.0.0.1 (DNS rebinding) is not this dashboard.
        reply = try http.send("GET", "/api/jobs", headers: ["Host": "evil.example:\(dashboard.port)"])
        XCTAssertEqual(reply.status, 403)
        XCTAssertEqual(try http.send("GET", "/api/jobs", headers: ["Host": "localhost:\(dashboard.port)"]).status, 200)
        // Every answer forbids framing, inline script and sniffing.
        reply = try http.send("GET", "/")
        XCTAssertEqual(reply.status, 200)
        XCTAssertTrue(reply.header("content-security-policy")?.contains("script-src 'self'") == true)
        XCTAssertEqual(reply.header("x-content-type-options"), "nosniff")
        XCTAssertEqual(reply.header("x-frame-options"), "DENY")
    }

    func testTokenGuardsTheAPIAndTheActions() throws {
        let token = "s3cret-token-for-the-test-0123"
        try start(token: token)
        let queued = id("queued-a.mov")
        // Without the token: 401 on data and actions; the page and its script still load.
        XCTAssertEqual(try http.send("GET", "/api/jobs").status, 401)
        XCTAssertEqual(try http.send("GET", "/api/summary", headers: ["Authorization": "Bearer wrong-token-wrong-token"]).status, 401)
        XCTAssertEqual(try http.send("GET", "/metrics").status, 401)
        XCTAssertEqual(try post("/api/jobs/\(queued)/cancel").status, 401)
        XCTAssertEqual(try fixture.store.job(id: queued)?.state, .queued)
        XCTAssertEqual(try http.send("GET", "/").status, 200)
        XCTAssertEqual(try http.send("GET", "/app.js").status, 200)
        // A foreign Host is fine with a token (it is what the token is for), the token is not.
        XCTAssertEqual(try http.send("GET", "/api/jobs", headers: ["Host": "farm.example:8080", "Authorization": "Bearer " + token]).status, 200)
        // API clients: Bearer, no Origin needed.
        var reply = try http.send("POST", "/api/pause", headers: ["Authorization": "Bearer " + token], body: "{}")
        XCTAssertEqual(reply.status, 200, reply.text)
        XCTAssertTrue(try fixture.store.isPaused())
        // The page: a wrong token is refused, the right one sets an HttpOnly, SameSite cookie.
        XCTAssertEqual(try post("/api/login", #"{"token": "nope"}"#).status, 401)
        reply = try post("/api/login", #"{"token": "\#(token)"}"#)
        XCTAssertEqual(reply.status, 204)
        let cookie = reply.header("set-cookie") ?? ""
        XCTAssertTrue(cookie.hasPrefix("upscale_token=\(token)"), cookie)
        XCTAssertTrue(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"), cookie)
        let session = ["Cookie": "upscale_token=\(token)", "Origin": dashboard.origin]
        XCTAssertEqual(try http.send("GET", "/api/jobs", headers: session).status, 200)
        XCTAssertEqual(try post("/api/jobs/\(queued)/cancel", headers: session).status, 200)
        XCTAssertEqual(try fixture.store.job(id: queued)?.state, .cancelled)
        // The cookie from another site's page: the Origin gives it away.
        var foreign = session
        foreign["Origin"] = "https://evil.example"
        XCTAssertEqual(try post("/api/resume", headers: foreign).status, 403)
        XCTAssertTrue(try fixture.store.isPaused())
    }

    /// The server itself (not only the command) refuses to listen off loopback without a token.
    func testServerRefusesAnOpenAddressWithoutAToken() throws {
        for host in ["0.0.0.0", "192.168.1.20", "::", "127.foo.0.1"] {
            XCTAssertThrowsError(try DashboardServer.Configuration(host: host, port: 0).check(), host)
            XCTAssertNoThrow(try DashboardServer.Configuration(host: host, port: 0, token: "0123456789abcdef").check(), host)
        }
        for host in ["127.0.0.1", "127.1.2.3", "localhost", "::1"] {
            XCTAssertNoThrow(try DashboardServer.Configuration(host: host, port: 0).check(), host)
        }
        // run() makes the same check before binding anything.
        fixture = try QueueFixture.make()
        let server = DashboardServer(board: try FolderBoard(folder: fixture.folder), configuration: .init(host: "0.0.0.0", port: 0))
        let outcome = DispatchSemaphore(value: 0)
        final class Box: @unchecked Sendable { var error: Error? }
        let box = Box()
        Task {
            do { try await server.run(signals: []) { _ in } } catch { box.error = error }
            outcome.signal()
        }
        XCTAssertEqual(outcome.wait(timeout: .now() + 10), .success)
        XCTAssertTrue(box.error is DashboardServer.UnsafeListenAddress, "\(String(describing: box.error))")
    }

    func testHostileFileNameComesBackAsData() throws {
        try start()
        let reply = try http.send("GET", "/api/jobs?state=queued")
        // JSON carries the name unchanged (the page puts it in textContent); the page itself
        // holds no data at all.
        let files = (try reply.json()["jobs"] as? [[String: Any]])?.compactMap { $0["file"] as? String } ?? []
        XCTAssertTrue(files.contains(QueueFixture.hostile), "\(files)")
        let page = try http.send("GET", "/").text + (try http.send("GET", "/app.js").text)
        XCTAssertFalse(page.contains("onerror=alert"))
        XCTAssertFalse(page.contains("innerHTML"), "the page builds elements with textContent only")
    }

    func testLargeQueuePaginates() throws {
        try start(extraQueued: 2000)
        let first = try http.send("GET", "/api/jobs").json()
        XCTAssertEqual(first["total"] as? Int, 2010)
        XCTAssertEqual((first["jobs"] as? [Any])?.count, 100)
        let last = try http.send("GET", "/api/jobs?offset=2000&limit=1000").json()
        XCTAssertEqual((last["jobs"] as? [Any])?.count, 10)
        XCTAssertEqual((try http.send("GET", "/api/jobs?limit=100000").json()["jobs"] as? [Any])?.count, 1000)
    }
}
