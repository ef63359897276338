import ArgumentParser
import Foundation
import UpscaleFarm
import UpscaleTestSupport

/// `upscale-bench dashboard`: the web page's weight, its first render in headless chromium,
/// the server's memory idle and with 10,000 jobs, and `/api/jobs` latency; refreshes the
/// screenshot in Benchmarks/report/.
struct DashboardBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dashboard",
        abstract: "The queue's web page: weight, first render in chromium, server RSS, /api/jobs latency with 10,000 jobs.")

    @Option(help: "The upscale binary (default: next to this bench).") var upscale: String?
    @Option(help: "Jobs in the large store.") var jobs = 10_000
    @Option(help: "Where the screenshot goes (default Benchmarks/report when present; '' for none).") var report: String?

    func run() throws {
        for line in try measure() { print(line) }
    }

    /// One line per figure.
    func measure() throws -> [String] {
        var lines: [String] = []
        func print(_ line: String) { lines.append(line) }
        let binary = upscale ?? upscaleBinary()
        // The stores live in memory (tmpfs) where there is one: filling 10,000 jobs one
        // transaction each would otherwise spend a minute in fsync.
        let parent = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : "/tmp"

        let small = try QueueFixture.make(parent: parent)
        defer { small.remove() }
        let (server, url) = try DashboardProcess.start(binary: binary, [small.folder.root, "--listen", "127.0.0.1:0"])
        defer { server.terminate() }
        let http = HTTPProbe(port: Int(url.split(separator: ":").last!.filter(\.isNumber))!)
        let idle = residentKB(server.processIdentifier)
        let assets = try ["/", "/app.js", "/app.css"].map { try http.send("GET", $0).body.count }
        print("page weight: \(assets.reduce(0, +)) bytes (HTML \(assets[0]), script \(assets[1]), CSS \(assets[2])), uncompressed, no other requests but the JSON API")

        // First render: the page's own clock (navigation start → first data drawn), and
        // chromium's whole run against the same run on an empty page.
        var rendered: [Double] = [], walls: [Double] = [], blanks: [Double] = []
        for _ in 0..<5 {
            var start = monotonicSeconds()
            _ = try Chromium.run("data:text/html,<p>blank</p>", ["--dump-dom"])
            blanks.append(monotonicSeconds() - start)
            start = monotonicSeconds()
            let dom = try Chromium.run(url, ["--dump-dom"])
            walls.append(monotonicSeconds() - start)
            if let r = dom.range(of: "data-first-render=\""), let ms = Double(dom[r.upperBound...].prefix { $0.isNumber }) { rendered.append(ms) }
        }
        print(String(format: "first render (10 jobs): %.0f ms by the page's clock (median of %d); chromium run %.2f s vs %.2f s for an empty page (+%.0f ms)",
                     median(rendered), rendered.count, median(walls), median(blanks), (median(walls) - median(blanks)) * 1000))
        let served = residentKB(server.processIdentifier)
        print("server RSS: \(idle / 1024) MB idle, \(served / 1024) MB after serving the page 5 times (10 jobs)")

        let folder = report ?? (FileManager.default.fileExists(atPath: "Benchmarks/report") ? "Benchmarks/report" : "")
        if !folder.isEmpty {
            for (name, size) in [("dashboard.png", "1280,1000"), ("dashboard-phone.png", "390,844")] {
                _ = try Chromium.run(url, ["--screenshot=\(folder)/\(name)", "--window-size=\(size)"])
                print("screenshot: \(folder)/\(name)")
            }
        }

        // The large store.
        let large = try QueueFixture.make(extraQueued: max(0, jobs - 10), parent: parent)
        defer { large.remove() }
        try measureLarge(binary: binary, [large.folder.root], label: "watch folder", print)
        if FileManager.default.fileExists(atPath: "/usr/lib/postgresql") {
            let cluster = try PostgresCluster()
            defer { cluster.stop() }
            try fillSharedQueue(cluster.url)
            try measureLarge(binary: binary, ["--queue", cluster.url], label: "shared queue, 4 chunks each", print)
        } else {
            print("shared queue: skipped (PostgreSQL is not installed)")
        }
        return lines
    }

    /// `jobs` jobs of 4 chunks: the first fifth done an hour ago, one running, the rest queued.
    private func fillSharedQueue(_ url: String) throws {
        let queue = try PostgresQueue(address: try QueueAddress(url))
        for statement in [
            """
            INSERT INTO upscale_jobs (input, output, settings, chunks, frames, submitted_by)
                SELECT '/in/clip-' || g || '.mov', '/out/clip-' || g || ' Upscaled.mov', '[]', 4, 1200, 'bench' FROM generate_series(1, \(jobs)) g
            """,
            "INSERT INTO upscale_tasks (job_id, idx, frames) SELECT j.id, i, 300 FROM upscale_jobs j, generate_series(0, 3) i",
            """
            UPDATE upscale_tasks SET state = 'done', started = now() - interval '70 minutes', finished = now() - interval '60 minutes',
                seconds = 600, frames_done = 300, checksum = 1 WHERE job_id <= \(jobs / 5)
            """,
            "UPDATE upscale_jobs SET state = 'done', finished = now() - interval '60 minutes' WHERE id <= \(jobs / 5)",
        ] {
            try queue.execute(statement)
        }
        let task = try queue.claim(owner: "bench/1", lease: 600)
        if let task { _ = try queue.heartbeat(task, lease: 600, framesDone: 100, fps: 2.5) }
        try queue.reportWorker(name: "bench/1", fps: 2.5, current: task.map { "chunk \($0.index + 1)/4 of job \($0.jobID)" })
    }

    private func measureLarge(binary: String, _ source: [String], label: String, _ print: (String) -> Void) throws {
        let (big, bigURL) = try DashboardProcess.start(binary: binary, source + ["--listen", "127.0.0.1:0"])
        defer { big.terminate() }
        let bigHTTP = HTTPProbe(port: Int(bigURL.split(separator: ":").last!.filter(\.isNumber))!)
        let bigIdle = residentKB(big.processIdentifier)
        func timed(_ path: String) throws -> Double {
            let start = monotonicSeconds()
            let reply = try bigHTTP.send("GET", path)
            guard reply.status == 200 else { throw ProbeError("\(path): HTTP \(reply.status)") }
            return (monotonicSeconds() - start) * 1000
        }
        let cold = try timed("/api/jobs")
        var fresh: [Double] = []
        for _ in 0..<5 {
            Thread.sleep(forTimeInterval: 1.1)
            fresh.append(try timed("/api/jobs"))
        }
        var cached: [Double] = []
        for _ in 0..<20 { cached.append(try timed("/api/jobs")) }
        let lastPage = try timed("/api/jobs?offset=\(jobs - 100)&limit=100")
        let full = try timed("/api/jobs?limit=1000")
        let summary = try timed("/api/summary")
        print(String(format: "\(label): /api/jobs with %d jobs (100 per page): first %.0f ms; with a fresh store read %.0f ms (median of 5); from the 1 s reading %.1f ms (median of 20); last page %.1f ms; 1000 rows %.1f ms; /api/summary %.1f ms",
                     jobs, cold, median(fresh), median(cached), lastPage, full, summary))
        var bigRendered: [Double] = []
        for _ in 0..<3 {
            let dom = try Chromium.run(bigURL, ["--dump-dom"])
            if let r = dom.range(of: "data-first-render=\""), let ms = Double(dom[r.upperBound...].prefix { $0.isNumber }) { bigRendered.append(ms) }
        }
        print(String(format: "\(label): first render (%d jobs, 200 rows drawn): %.0f ms by the page's clock (median of %d)", jobs, median(bigRendered), bigRendered.count))
        print("\(label): server RSS with \(jobs) jobs: \(bigIdle / 1024) MB idle (before any request), \(residentKB(big.processIdentifier) / 1024) MB after serving, peak \(peakKB(big.processIdentifier) / 1024) MB")
    }

    private func residentKB(_ pid: Int32) -> Int { statusField(pid, "VmRSS:") }
    private func peakKB(_ pid: Int32) -> Int { statusField(pid, "VmHWM:") }

    private func statusField(_ pid: Int32, _ name: String) -> Int {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = text.split(separator: "\n").first(where: { $0.hasPrefix(name) }) else { return 0 }
        return line.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
    }
}
