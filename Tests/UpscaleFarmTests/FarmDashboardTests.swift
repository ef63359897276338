import Foundation
import UpscaleDashboard
import UpscaleFarm
import UpscaleMedia
import UpscaleTestSupport
import XCTest

/// The dashboard on the shared PostgreSQL queue: what it shows of jobs, chunks and workers,
/// its metrics, and its actions' effect on the queue (a real server and a real cluster).
final class FarmDashboardTests: XCTestCase {
    func testDashboardShowsAndSteersTheSharedQueue() throws {
        let cluster = try PostgresCluster()
        defer { cluster.stop() }
        let q = try PostgresQueue(address: try QueueAddress(cluster.url))
        func submit(_ name: String, chunks: Int) throws -> Int64 {
            try q.submit(input: "/in/\(name)", output: "/out/\(name)", settings: [], plan: QueueTests.plan(chunks: chunks), priority: 0, host: "test")
        }
        let a = try submit("alpha.mov", chunks: 3)
        let b = try submit("beta.mov", chunks: 2)
        let c = try submit("<b onmouseover=alert(1)>gamma.mov", chunks: 1)
        // alpha: chunk 1 done in 4 s, chunk 2 running on node-a at 2.5 fps.
        let first = try XCTUnwrap(q.claim(owner: "node-a/1", lease: 60))
        XCTAssertEqual(try q.complete(first, checksum: 1, seconds: 4), .done(joinQueued: false))
        let second = try XCTUnwrap(q.claim(owner: "node-a/1", lease: 60))
        XCTAssertTrue(try q.heartbeat(second, lease: 60, framesDone: 30, fps: 2.5))
        try q.reportWorker(name: "node-a/1", fps: 2.5, current: "chunk 2/3 of job \(a)")
        // gamma fails three times (alpha and beta hold higher claims order, so move them aside).
        try q.execute("UPDATE upscale_jobs SET priority = 9 WHERE id = \(c)")
        for n in 1...3 {
            let task = try XCTUnwrap(q.claim(owner: "node-b/1", lease: 60))
            XCTAssertEqual(task.jobID, c)
            try q.fail(task, reason: "decoder error \(n)")
        }
        // One of beta's chunks is claimed with a lease that runs out: rescued once.
        try q.execute("UPDATE upscale_jobs SET priority = 9 WHERE id = \(b)")
        _ = try XCTUnwrap(q.claim(owner: "node-c/1", lease: 0.2))
        Thread.sleep(forTimeInterval: 0.5)
        XCTAssertEqual(try q.rescueExpired(), 1)
        try q.execute("UPDATE upscale_jobs SET priority = 0")

        let dashboard = try RunningDashboard(board: FarmBoard(queue: try PostgresQueue(address: try QueueAddress(cluster.url))))
        defer { dashboard.stop() }
        let http = dashboard.http
        let jobs = try http.send("GET", "/api/jobs").json()["jobs"] as? [[String: Any]] ?? []
        let alpha = try XCTUnwrap(jobs.first { $0["id"] as? Int == Int(a) })
        XCTAssertEqual(alpha["state"] as? String, "running")
        XCTAssertEqual(alpha["chunksDone"] as? Int, 1)
        XCTAssertEqual(alpha["chunks"] as? Int, 3)
        XCTAssertEqual(alpha["framesDone"] as? Int, 330)
        XCTAssertEqual(alpha["progress"] as! Double, 330.0 / 900, accuracy: 1e-9)
        XCTAssertEqual(alpha["fps"] as? Double, 2.5)
        XCTAssertEqual(alpha["machines"] as? [String], ["node-a"])
        let gamma = try XCTUnwrap(jobs.first { $0["id"] as? Int == Int(c) })
        XCTAssertEqual(gamma["state"] as? String, "failed")
        XCTAssertEqual(gamma["file"] as? String, "<b onmouseover=alert(1)>gamma.mov")
        XCTAssertEqual(gamma["attempts"] as? Int, 3)
        // One line with the last reason (the first line alone named none).
        XCTAssertEqual(gamma["error"] as? String, "chunk 1 failed 3 times: decoder error 3")
        let log = try http.send("GET", "/api/jobs/\(c)/log").json()["text"] as? String ?? ""
        XCTAssertTrue(log.contains("decoder error 1") && log.contains("decoder error 3"), log)
        let workers = try http.send("GET", "/api/workers").json()["workers"] as? [[String: Any]] ?? []
        XCTAssertEqual(workers.first { $0["name"] as? String == "node-a/1" }?["current"] as? String, "chunk 2/3 of job \(a) (alpha.mov)")
        let summary = try http.send("GET", "/api/summary").json()
        XCTAssertEqual((summary["counts"] as? [String: Int])?["failed"], 1)
        XCTAssertEqual(summary["framesPerSecond"] as? Double, 2.5)
        // alpha's first chunk: 300 frames in 4 s (75 fps); beta has no rate yet and gets the
        // queue's; 1500 - 330 frames left of the two.
        XCTAssertEqual(summary["secondsOfWorkLeft"] as? Double ?? 0, (1500.0 - 330) / 75, accuracy: 1e-6)

        let metrics = try http.send("GET", "/metrics").text
        XCTAssertTrue(metrics.contains(#"upscale_jobs{state="failed"} 1"#), metrics)
        // alpha and beta (started; its one claimed chunk was rescued back to the queue).
        XCTAssertTrue(metrics.contains(#"upscale_jobs{state="running"} 2"#), metrics)
        XCTAssertTrue(metrics.contains("upscale_chunk_seconds_count 1"), metrics)
        XCTAssertTrue(metrics.contains("upscale_lease_rescues_total 1"), metrics)
        XCTAssertTrue(metrics.contains(#"upscale_worker_fps{worker="node-a/1"} 2.5"#), metrics)

        // Actions, exactly as `upscale queue … --queue` applies them.
        let origin = ["Origin": dashboard.origin]
        XCTAssertEqual(try http.send("POST", "/api/jobs/\(c)/retry", headers: origin, body: "{}").status, 200)
        XCTAssertEqual(try q.job(id: c)?.state, "queued")
        XCTAssertEqual(try http.send("POST", "/api/jobs/\(b)/cancel", headers: origin, body: "{}").status, 200)
        XCTAssertEqual(try q.job(id: b)?.state, "cancelled")
        // Its file submitted again: Retry names the job that makes the output now, as `queue
        // retry` does (it said "job N is not failed or cancelled" of a cancelled job).
        let d = try submit("beta.mov", chunks: 1)
        let refused = try http.send("POST", "/api/jobs/\(b)/retry", headers: origin, body: "{}")
        XCTAssertEqual(refused.status, 409)
        XCTAssertEqual(try refused.json()["error"] as? String,
                       "job \(b) is not queued again: job \(d) makes its output '/out/beta.mov' now; wait for it, or cancel it first")
        XCTAssertEqual(try q.job(id: b)?.state, "cancelled")
        XCTAssertEqual(try http.send("POST", "/api/jobs/\(a)/priority", headers: origin, body: #"{"priority": 7}"#).status, 200)
        XCTAssertEqual(try q.job(id: a)?.priority, 7)
        XCTAssertEqual(try http.send("POST", "/api/pause", headers: origin, body: "{}").status, 200)
        XCTAssertTrue(try q.isPaused())
        XCTAssertNil(try q.claim(owner: "node-d/1", lease: 60))
        XCTAssertEqual(try http.send("POST", "/api/resume", headers: origin, body: "{}").status, 200)
        XCTAssertFalse(try q.isPaused())
        // The raised job's next chunk goes first.
        XCTAssertEqual(try q.claim(owner: "node-d/1", lease: 60)?.jobID, a)
        XCTAssertEqual(try http.send("POST", "/api/jobs/\(a)/retry", headers: origin, body: "{}").status, 409)

        // The server goes away: the page's requests answer 503 with one line within seconds.
        cluster.stop()
        Thread.sleep(forTimeInterval: 1.1)
        let start = Date()
        let down = try http.send("GET", "/api/summary")
        XCTAssertEqual(down.status, 503)
        let message = try down.json()["error"] as? String ?? ""
        XCTAssertTrue(message.hasPrefix("cannot reach the queue at postgres://") && !message.contains("\n"), message)
        XCTAssertLessThan(Date().timeIntervalSince(start), 20)
        print("queue down: HTTP 503 after \(String(format: "%.1f", Date().timeIntervalSince(start))) s: \(message)")
        XCTAssertEqual(try http.send("POST", "/api/pause", headers: origin, body: "{}").status, 503)
    }
}
