import Foundation
import UpscaleTestSupport
import XCTest

/// The real `upscale dashboard` command, and Debian's chromium in headless mode loading its page.
/// Not skipped when chromium is missing: CI installs it, and a missing browser is a failure.
final class DashboardBrowserTests: XCTestCase {
    static var binary: URL {
        var dir = Bundle.main.bundleURL
        if dir.pathExtension == "xctest" { dir = dir.deletingLastPathComponent() }
        return dir.appendingPathComponent("upscale")
    }

    /// `upscale dashboard` on a free port; returns the process and the URL it printed.
    static func serve(_ arguments: [String], listen: String = "127.0.0.1:0") throws -> (Process, String) {
        try DashboardProcess.start(binary: binary.path, arguments + ["--listen", listen])
    }

    static func browse(_ url: String, _ extra: [String]) throws -> String { try Chromium.run(url, extra) }

    func testPageShowsEveryStateInARealBrowser() throws {
        let fixture = try QueueFixture.make()
        defer { fixture.remove() }
        let (server, url) = try Self.serve([fixture.folder.root])
        defer { if server.isRunning { server.terminate() } }

        let dom = try Self.browse(url, ["--dump-dom"])
        // A row per job, each in its state.
        for (name, id) in fixture.ids {
            let state = try XCTUnwrap(fixture.store.job(id: id)?.state.rawValue)
            XCTAssertTrue(dom.contains(#"<tr data-job="\#(id)" data-state="\#(state)">"#), "no row for \(name) (\(state))")
        }
        // The running job's progress bar: 120 of 300 frames.
        let running = fixture.ids["running.mov"]!
        let row = try XCTUnwrap(dom.components(separatedBy: #"<tr data-job="\#(running)""#).dropFirst().first?.components(separatedBy: "</tr>").first)
        XCTAssertTrue(row.contains(#"<progress max="1" value="0.4000">"#) || row.contains(#"value="0.4000""#), row)
        XCTAssertTrue(row.contains("40%"), row)
        // The hostile file name is text: escaped in the DOM, and no image element was made.
        XCTAssertTrue(dom.contains("&lt;img src=x onerror=alert(1)&gt;.mov"), "hostile name not shown as text")
        XCTAssertFalse(dom.contains("<img"), "a file name became markup")
        // Totals, the worker, and the failed job's error.
        XCTAssertTrue(dom.contains("render-box:4242"))
        XCTAssertTrue(dom.contains("decoding failed at frame 12"))
        XCTAssertTrue(dom.contains(#"<b>3</b><span>queued</span>"#) || dom.contains("<b>4</b><span>queued</span>"), "queued total missing")
        XCTAssertTrue(dom.contains("data-first-render="), "the page never rendered its data")

        // A screenshot at the size asked for: a PNG, 1280x900.
        let shot = NSTemporaryDirectory() + "upscale-dashboard-\(UUID().uuidString).png"
        defer { try? FileManager.default.removeItem(atPath: shot) }
        _ = try Self.browse(url, ["--screenshot=\(shot)", "--window-size=1280,900"])
        let png = try Data(contentsOf: URL(fileURLWithPath: shot))
        XCTAssertEqual(Array(png.prefix(8)), [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
        let width = png[16..<20].reduce(0) { $0 << 8 | Int($1) }, height = png[20..<24].reduce(0) { $0 << 8 | Int($1) }
        XCTAssertEqual([width, height], [1280, 900])

        // SIGTERM: the server shuts down cleanly.
        server.terminate()
        server.waitUntilExit()
        XCTAssertEqual(server.terminationStatus, 0)
    }

    func testCommandRefusesToServeUnsafely() throws {
        let fixture = try QueueFixture.make()
        defer { fixture.remove() }
        func run(_ arguments: [String]) throws -> (Int32, String) {
            let process = Process()
            process.executableURL = Self.binary
            process.arguments = ["dashboard"] + arguments
            let err = Pipe()
            process.standardError = err
            process.standardOutput = FileHandle.nullDevice
            try process.run()
            let text = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            return (process.terminationStatus, text)
        }
        // Off loopback without a token: refused, one line, the reason and the way out.
        var (status, text) = try run([fixture.folder.root, "--listen", "0.0.0.0:0"])
        XCTAssertEqual(status, 2)
        XCTAssertEqual(text.split(separator: "\n").count, 1, text)
        XCTAssertTrue(text.contains("without a token") && text.contains("--token-file"), text)
        // A short token is refused too.
        let tokenFile = fixture.folder.state + "/token"
        try "short\n".write(toFile: tokenFile, atomically: true, encoding: .utf8)
        (status, text) = try run([fixture.folder.root, "--listen", "0.0.0.0:0", "--token-file", tokenFile])
        XCTAssertEqual(status, 2)
        XCTAssertTrue(text.contains("at least 16 characters"), text)
        // A folder without a queue, and one that is not there.
        try FileManager.default.createDirectory(atPath: fixture.folder.root + "/empty", withIntermediateDirectories: true)
        (status, text) = try run([fixture.folder.root + "/empty"])
        XCTAssertEqual(status, 1)
        XCTAssertTrue(text.hasPrefix("error: ") && text.contains("has no queue yet"), text)
        (status, text) = try run([fixture.folder.root + "/nowhere"])
        XCTAssertEqual(status, 1)
        XCTAssertTrue(text.hasPrefix("error: ") && text.contains("/nowhere' is not a folder"), text)
        // A port already taken.
        let (first, url) = try Self.serve([fixture.folder.root])
        defer { first.terminate() }
        let port = url.split(separator: ":").last!.filter(\.isNumber)
        (status, text) = try run([fixture.folder.root, "--listen", "127.0.0.1:\(port)"])
        XCTAssertEqual(status, 1)
        XCTAssertEqual(text.split(separator: "\n").count, 1, text)
        XCTAssertTrue(text.contains("in use"), text)
        // With a good token file it serves off loopback and wants the token.
        try "0123456789abcdef-token\n".write(toFile: tokenFile, atomically: true, encoding: .utf8)
        let (open, openURL) = try Self.serve([fixture.folder.root, "--token-file", tokenFile], listen: "0.0.0.0:0")
        defer { open.terminate() }
        XCTAssertTrue(openURL.hasPrefix("http://0.0.0.0:"), openURL)
        let http = HTTPProbe(port: Int(openURL.split(separator: ":").last!.filter(\.isNumber))!)
        XCTAssertEqual(try http.send("GET", "/api/jobs").status, 401)
        XCTAssertEqual(try http.send("GET", "/api/jobs", headers: ["Authorization": "Bearer 0123456789abcdef-token"]).status, 200)
    }

    /// `upscale queue priority`: the same store call as the page's Run next.
    func testQueuePriorityCommand() throws {
        let fixture = try QueueFixture.make()
        defer { fixture.remove() }
        func run(_ arguments: [String]) throws -> (Int32, String, String) {
            let process = Process()
            process.executableURL = Self.binary
            process.arguments = ["queue", "priority"] + arguments
            let out = Pipe(), err = Pipe()
            process.standardOutput = out
            process.standardError = err
            try process.run()
            let o = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            let e = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            return (process.terminationStatus, o, e)
        }
        var (status, out, err) = try run([fixture.folder.root, "queued-b.mov", "4"])
        XCTAssertEqual(status, 0, err)
        XCTAssertEqual(out, "queued-b.mov: priority 4\n")
        XCTAssertEqual(try fixture.store.job(id: fixture.ids["queued-b.mov"]!)?.priority, 4)
        XCTAssertEqual(try fixture.store.claim(owner: "t", lease: 10, now: fixture.now)?.job.id, fixture.ids["queued-b.mov"])
        (status, _, err) = try run([fixture.folder.root, "done-late.mov", "4"])
        XCTAssertEqual(status, 1)
        XCTAssertEqual(err, "error: no queued or running job for 'done-late.mov' in \(fixture.folder.root)\n")
        (status, _, err) = try run([fixture.folder.root, "queued-a.mov", "soon"])
        XCTAssertEqual(status, 2)
        XCTAssertTrue(err.hasPrefix("error: give the new priority last"), err)
    }
}
