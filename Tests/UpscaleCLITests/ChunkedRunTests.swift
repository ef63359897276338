import Foundation
import UpscaleCore
import UpscaleMedia
import XCTest

/// The plain command on a video long enough for chunks: interrupted, killed, and run again.
final class ChunkedRunTests: XCTestCase {
    private let source = "chunk-h264-bframes.mp4"
    /// Lossless and unrefined, so chunked output must decode to exactly the one-pass pictures.
    private let exact = ["--codec", "ffv1", "--no-refine", "--threads", "1", "--chunk-seconds", "1"]

    private func workspace() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("upscale-chunks-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: CLITests.fixtures.appendingPathComponent(source), to: dir.appendingPathComponent(source))
        addTeardownBlock { try? FileManager.default.removeItem(at: dir) }
        return dir
    }

    private func start(_ arguments: [String], in dir: URL, environment: [String: String] = [:]) throws -> (Process, Pipe) {
        let process = Process()
        process.executableURL = CLITests.binary
        process.arguments = arguments
        process.currentDirectoryURL = dir
        if !environment.isEmpty { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
        let err = Pipe()
        process.standardOutput = FileHandle.nullDevice
        process.standardError = err
        try process.run()
        return (process, err)
    }

    private func run(_ arguments: [String], in dir: URL, environment: [String: String] = [:]) throws -> (status: Int32, stderr: String) {
        let (process, err) = try start(arguments, in: dir, environment: environment)
        let data = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    /// Runs a shell command (mount, umount); its exit status.
    private func shell(_ command: String) throws -> Int32 {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/sh")
        p.arguments = ["-c", command]
        try p.run()
        p.waitUntilExit()
        return p.terminationStatus
    }

    /// Finished chunk files in a work folder.
    private func finishedChunks(_ work: URL) -> Int {
        ((try? FileManager.default.contentsOfDirectory(atPath: work.path)) ?? []).filter { $0.hasSuffix(".chunk") && !$0.hasPrefix(".") }.count
    }

    /// Every process below `pid` (its job child).
    private func descendants(of pid: pid_t) -> [pid_t] {
        var found: [pid_t] = []
        for task in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? [] {
            let text = (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/children", encoding: .utf8)) ?? ""
            for child in text.split(separator: " ").compactMap({ pid_t($0) }) { found += [child] + descendants(of: child) }
        }
        return found
    }

    private func waitForChunks(_ work: URL, atLeast count: Int, process: Process) throws {
        let deadline = Date().addingTimeInterval(120)
        while finishedChunks(work) < count {
            XCTAssertTrue(process.isRunning, "the job ended before \(count) chunks were done")
            if !process.isRunning || Date() > deadline { throw XCTSkip("unreachable") }
            usleep(20_000)
        }
    }

    /// Starts `arguments`, stops it with Ctrl-C once `count` chunks are finished, and returns
    /// what it said (its exit status 130 asserted).
    @discardableResult
    private func interruptAfterChunks(_ arguments: [String], in dir: URL, work: URL, atLeast count: Int = 1,
                                      file: StaticString = #filePath, line: UInt = #line) throws -> String {
        let (process, err) = try start(arguments, in: dir)
        try waitForChunks(work, atLeast: count, process: process)
        kill(process.processIdentifier, SIGINT)
        let text = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 130, text, file: file, line: line)
        return text
    }

    private func assertSamePictures(_ a: URL, _ b: URL, count expected: Int = 60, file: StaticString = #filePath, line: UInt = #line) throws {
        let x = try VideoFrameReader(path: a.path), y = try VideoFrameReader(path: b.path)
        var count = 0
        while let p = try x.next() {
            let q = try XCTUnwrap(try y.next(), "fewer frames", file: file, line: line)
            XCTAssertEqual(p.pts, q.pts, file: file, line: line)
            for i in 0..<3 {
                XCTAssertTrue(memcmp(p.frame.planes[i].base, q.frame.planes[i].base, p.frame.planes[i].stride * p.frame.planes[i].height) == 0,
                              "frame \(count) plane \(i)", file: file, line: line)
            }
            count += 1
        }
        XCTAssertNil(try y.next(), "more frames", file: file, line: line)
        XCTAssertEqual(count, expected, file: file, line: line)
    }

    /// A chunked run makes a decoder, pipeline threads and an x265 encoder with its thread pool
    /// for each chunk. With glibc's malloc arenas per thread, what a chunk freed was not reused
    /// by the next (this run ended with 14 arenas), and peak memory grew with the number of
    /// chunks (a 30 s 720p pan → 2560: 509 MB in one piece, 751 MB in 10 s chunks, 1,331 MB in
    /// 1 s chunks; `ProcessMemory.useOneArena`). The job process keeps one arena, which the
    /// next chunk reuses, also with two chunk workers at once.
    func testAChunkedRunKeepsOneMallocArena() throws {
        let dir = try workspace()
        let result = try run([source, "--preset", "ultrafast", "--scale", "2", "--chunk-seconds", "1", "--jobs", "2", "-o", "out.mp4"],
                             in: dir, environment: ["UPSCALE_TEST_HOOK": "malloc-arenas"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.stderr.contains("test hook: 1 malloc arenas"), result.stderr)
        XCTAssertEqual(try MediaProbe.packets(dir.appendingPathComponent("out.mp4").path, stream: 0).count, 60)
    }

    /// A chunked run's job makes about as many page faults as one piece: one decoder and
    /// encoder make chunk after chunk (`ChunkSpan`), and where a new one starts it takes the
    /// memory the last one freed. With a new encoder per chunk whose pages went back to the
    /// kernel, every page was touched anew (a fault and a zeroed page each): 2.1–2.2x on this
    /// clip; 1.04x with the freed memory kept, 1.03–1.04x with one encoder.
    func testAChunkedRunMakesAboutTheFaultsOfOnePiece() throws {
        let dir = try workspace()
        func faults(chunkSeconds: String) throws -> Int {
            var before = rusage(), after = rusage()
            getrusage(RUSAGE_CHILDREN.rawValue, &before)
            let result = try run([source, "--scale", "4", "--preset", "ultrafast", "--no-refine", "--chunk-seconds", chunkSeconds,
                                  "-o", "out-\(chunkSeconds).mp4"], in: dir)
            getrusage(RUSAGE_CHILDREN.rawValue, &after)
            XCTAssertEqual(result.status, 0, result.stderr)
            return after.ru_minflt - before.ru_minflt
        }
        let whole = try faults(chunkSeconds: "0"), chunked = try faults(chunkSeconds: "1")
        // It ran in chunks: each starts with a keyframe (one piece has one, x265's interval being longer).
        XCTAssertGreaterThan(try MediaProbe.packets(dir.appendingPathComponent("out-1.mp4").path, stream: 0).filter(\.isKeyframe).count, 3)
        XCTAssertLessThan(Double(chunked), 1.15 * Double(whole), "page faults: \(chunked) in chunks, \(whole) in one piece")
    }

    /// `kill -9` of the parent and its job child mid-run, as a power cut would: the same
    /// command continues from the chunks on disk, redoes only the one in flight, and the
    /// result decodes to the one-pass pictures bit for bit.
    func testKilledRunResumesAndRedoesOnlyTheChunkInFlight() throws {
        let resumed = try killAfterTwoChunksAndResume(exact)
        XCTAssertLessThanOrEqual(resumed.redo, 1, "only the chunk in flight is redone: \(resumed.line)")
    }

    /// The same with an encoder that goes on from chunk to chunk (x264 here; FFV1 above makes a
    /// new one per chunk): killed after two of its chunks are finished, while it holds the one it
    /// is finishing and the one it has begun. The resume keeps every finished chunk, redoes at
    /// most those two, and the joined chunks decode to exactly one pass's pictures (lossless
    /// H.264, no refinement), the kept ones and the redone ones alike.
    func testAKilledRunOfOneEncoderForManyChunksResumesToTheOnePassPictures() throws {
        let resumed = try killAfterTwoChunksAndResume(["--codec", "h264", "--crf", "0", "--preset", "veryfast", "--no-refine",
                                                       "--threads", "1", "--chunk-seconds", "1"])
        XCTAssertLessThan(resumed.kept, resumed.total, "killed before its last chunk: \(resumed.line)")
        XCTAssertLessThanOrEqual(resumed.redo, 2, "only the two chunks in flight are redone: \(resumed.line)")
    }

    /// The clip chunked into chunked.mkv with `options`, killed with SIGKILL (the command and its
    /// job child) once two chunk files are finished, then run again: the kill left no output,
    /// the resume says it found every finished chunk ("resuming: 3 of 5 chunks done, 1 to
    /// redo"), removes its work folder, and its output decodes to one FFV1 pass's pictures bit
    /// for bit. Returns the chunk files the kill left and the resume's chunk counts.
    private func killAfterTwoChunksAndResume(_ options: [String], file: StaticString = #filePath,
                                             line: UInt = #line) throws -> (kept: Int, total: Int, redo: Int, line: String) {
        let dir = try workspace()
        let single = try run([source, "-o", "single.mkv", "--codec", "ffv1", "--no-refine", "--threads", "1", "--chunk-seconds", "0"], in: dir)
        XCTAssertEqual(single.status, 0, single.stderr, file: file, line: line)
        let arguments = [source, "-o", "chunked.mkv"] + options
        let work = dir.appendingPathComponent(".chunked.mkv.upscale-work")
        let (process, _) = try start(arguments, in: dir)
        try waitForChunks(work, atLeast: 2, process: process)
        let children = descendants(of: process.processIdentifier)
        XCTAssertFalse(children.isEmpty, file: file, line: line)
        for pid in [process.processIdentifier] + children { kill(pid, SIGKILL) }
        process.waitUntilExit()
        usleep(200_000)
        let kept = finishedChunks(work)
        XCTAssertGreaterThanOrEqual(kept, 2, file: file, line: line)
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir.appendingPathComponent("chunked.mkv").path), file: file, line: line)

        let again = try run(arguments, in: dir)
        XCTAssertEqual(again.status, 0, again.stderr, file: file, line: line)
        let said = String(try XCTUnwrap(again.stderr.split(separator: "\n").first { $0.contains("resuming:") }, again.stderr, file: file, line: line))
        print("after kill -9 with \(kept) chunk files:", said)
        let numbers = said.split(whereSeparator: { !$0.isNumber }).compactMap { Int($0) }
        XCTAssertEqual(numbers.first, kept, said, file: file, line: line)
        XCTAssertFalse(FileManager.default.fileExists(atPath: work.path), "work folder removed after success", file: file, line: line)
        try assertSamePictures(dir.appendingPathComponent("single.mkv"), dir.appendingPathComponent("chunked.mkv"), file: file, line: line)
        return (kept, numbers[1], said.contains("to redo") ? numbers[2] : 0, said)
    }

    /// x265's settings note in each chunk's stream header listed its threads: a resume with
    /// other --threads (or --jobs, or a farm's other machines) kept the chunks, failed at the
    /// join, and so did every run after it.
    func testAResumeWithOtherThreadsJoins() throws {
        let dir = try workspace()
        let hevc = [source, "-o", "chunked.mp4", "--preset", "ultrafast", "--no-refine", "--chunk-seconds", "1"]
        let work = dir.appendingPathComponent(".chunked.mp4.upscale-work")
        try interruptAfterChunks(hevc + ["--threads", "1"], in: dir, work: work)
        let again = try run(hevc + ["--threads", "2"], in: dir)
        XCTAssertEqual(again.status, 0, again.stderr)
        XCTAssertTrue(again.stderr.contains("resuming: "), again.stderr)
        XCTAssertEqual(try MediaProbe.packets(dir.appendingPathComponent("chunked.mp4").path, stream: 0).count, 60)
    }

    /// A resume that names the defaults the chunks were made with (`--crf 20`, `--encoder
    /// libx265` where `auto` chose libx265) keeps them: the settings key stored "not given",
    /// and the run started over. Another CRF still starts over.
    func testAResumeNamingTheDefaultsKeepsTheChunksAndAnotherCRFStartsOver() throws {
        let dir = try workspace()
        let hevc = [source, "-o", "chunked.mp4", "--preset", "ultrafast", "--no-refine", "--chunk-seconds", "1", "--threads", "1"]
        let work = dir.appendingPathComponent(".chunked.mp4.upscale-work")
        try interruptAfterChunks(hevc, in: dir, work: work)
        let named = try run(hevc + ["--crf", "20", "--encoder", "libx265"], in: dir)
        XCTAssertEqual(named.status, 0, named.stderr)
        XCTAssertTrue(named.stderr.contains("resuming: "), named.stderr)
        XCTAssertFalse(named.stderr.contains("other settings"), named.stderr)
        XCTAssertEqual(try MediaProbe.packets(dir.appendingPathComponent("chunked.mp4").path, stream: 0).count, 60)

        try FileManager.default.removeItem(at: dir.appendingPathComponent("chunked.mp4"))
        try interruptAfterChunks(hevc, in: dir, work: work)
        let other = try run(hevc + ["--crf", "22"], in: dir)
        XCTAssertEqual(other.status, 0, other.stderr)
        XCTAssertTrue(other.stderr.contains("holds chunks made with other settings or another version of the input; starting over"), other.stderr)
        XCTAssertFalse(other.stderr.contains("resuming: "), other.stderr)
    }

    /// What the output loses is said once for a job run in chunks: the H.264 note was said by
    /// every chunk, and the others by none (HDR10 metadata, depth, colour resolution).
    func testAChunkedRunSaysWhatItLosesOnce() throws {
        let dir = try workspace()
        // ProRes (every picture a keyframe, 10-bit 4:2:2) as the source.
        let made = try run([source, "-o", "master.mov", "--codec", "prores", "--scale", "1", "--no-refine", "--chunk-seconds", "0"], in: dir)
        XCTAssertEqual(made.status, 0, made.stderr)
        let result = try run(["master.mov", "-o", "chunked.mp4", "--codec", "h264", "--preset", "ultrafast", "--scale", "1",
                              "--no-refine", "--chunk-seconds", "0.5"], in: dir)
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(result.stderr.components(separatedBy: "H.264 output is 8-bit").count - 1, 1, result.stderr)
        XCTAssertTrue(result.stderr.contains("note: 'master.mov': H.264 output is 8-bit 4:2:0; use --codec hevc to keep 10 bits and 4:2:2"), result.stderr)
        XCTAssertEqual(try MediaProbe.packets(dir.appendingPathComponent("chunked.mp4").path, stream: 0).count, 60)
    }

    /// Chunks whose ledger is gone are redone, and the note says why (it said "made with other
    /// settings", as for a real change of settings).
    func testChunksWithoutTheirLedgerAreRedoneAndTheNoteSaysWhy() throws {
        let dir = try workspace()
        let arguments = [source, "-o", "chunked.mkv"] + exact
        let work = dir.appendingPathComponent(".chunked.mkv.upscale-work")
        try interruptAfterChunks(arguments, in: dir, work: work)
        try FileManager.default.removeItem(at: work.appendingPathComponent("chunks.sqlite"))
        let again = try run(arguments, in: dir)
        XCTAssertEqual(again.status, 0, again.stderr)
        XCTAssertTrue(again.stderr.contains("holds chunks with no readable record of how they were made (its chunks.sqlite is missing or damaged); starting over"), again.stderr)
        XCTAssertFalse(again.stderr.contains("other settings"), again.stderr)
        XCTAssertEqual(try MediaProbe.packets(dir.appendingPathComponent("chunked.mkv").path, stream: 0).count, 60)
    }

    /// Each chunk opens the input again: one saved over mid-run gave an output of two
    /// versions (later chunks from the new file), with exit 0. It now fails in one line, and
    /// the next run upscales the new version.
    func testAnInputReplacedMidRunFailsAndTheNextRunTakesTheNewVersion() throws {
        let dir = try workspace()
        let arguments = [source, "-o", "chunked.mkv"] + exact
        let work = dir.appendingPathComponent(".chunked.mkv.upscale-work")
        let (process, err) = try start(arguments, in: dir)
        try waitForChunks(work, atLeast: 1, process: process)
        let replacement = dir.appendingPathComponent("new.mp4")
        try FileManager.default.copyItem(at: CLITests.fixtures.appendingPathComponent("street-2s.mp4"), to: replacement)
        XCTAssertEqual(rename(replacement.path, dir.appendingPathComponent(source).path), 0)
        let text = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 1, text)
        XCTAssertTrue(text.contains("error: '\(source)' changed while it was upscaled (saved over or replaced); nothing was written"), text)
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir.appendingPathComponent("chunked.mkv").path))
        let again = try run(arguments, in: dir)
        XCTAssertEqual(again.status, 0, again.stderr)
        XCTAssertFalse(again.stderr.contains("resuming"), again.stderr)
        XCTAssertEqual(try MediaProbe.info(dir.appendingPathComponent("chunked.mkv").path).video?.width, 1536, "the new version")
    }

    /// An input moved away mid-run failed as missing, and its finished chunks were removed;
    /// they are kept, and put back it resumes.
    func testAnInputMovedMidRunKeepsTheChunks() throws {
        let dir = try workspace()
        let arguments = [source, "-o", "chunked.mkv"] + exact
        let work = dir.appendingPathComponent(".chunked.mkv.upscale-work")
        let (process, err) = try start(arguments, in: dir)
        try waitForChunks(work, atLeast: 1, process: process)
        let input = dir.appendingPathComponent(source).path, away = dir.appendingPathComponent("away.mp4").path
        XCTAssertEqual(rename(input, away), 0)
        let text = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 1, text)
        XCTAssertTrue(text.contains("error: '\(source)' went away while it was upscaled (moved, renamed or its drive gone);"), text)
        XCTAssertGreaterThanOrEqual(finishedChunks(work), 1)
        XCTAssertEqual(rename(away, input), 0)
        let again = try run(arguments, in: dir)
        XCTAssertEqual(again.status, 0, again.stderr)
        XCTAssertTrue(again.stderr.contains("resuming: "), again.stderr)
        XCTAssertEqual(try MediaProbe.packets(dir.appendingPathComponent("chunked.mkv").path, stream: 0).count, 60)
    }

    /// A Matroska cut made with `-ss … -c copy` that starts at an open-GOP keyframe: its two
    /// leading pictures cannot be decoded, and the first chunk failed its frame count ("the
    /// file's timestamps are irregular") with the default chunking of a long file. The chunks
    /// now give the one-piece run's pictures.
    func testAnOpenGOPCutRunsInChunks() throws {
        let dir = try workspace()
        let cut = "chunk-opengop-cut.mkv"
        try FileManager.default.copyItem(at: CLITests.fixtures.appendingPathComponent(cut), to: dir.appendingPathComponent(cut))
        let single = try run([cut, "-o", "single.mkv", "--codec", "ffv1", "--no-refine", "--threads", "1", "--chunk-seconds", "0"], in: dir)
        XCTAssertEqual(single.status, 0, single.stderr)
        let chunked = try run([cut, "-o", "chunked.mkv"] + exact, in: dir)
        XCTAssertEqual(chunked.status, 0, chunked.stderr)
        let frames = try MediaProbe.packets(dir.appendingPathComponent("single.mkv").path, stream: 0).count
        XCTAssertEqual(frames, 31)
        try assertSamePictures(dir.appendingPathComponent("single.mkv"), dir.appendingPathComponent("chunked.mkv"), count: frames)
    }

    /// A job killed after its joined output is in place, before its chunks are removed: the
    /// output is complete, and the run says so and removes the chunks (it said "the job was
    /// killed … run the same command again to resume", which then refused the existing output,
    /// and the chunks stayed hidden beside it for good).
    func testAJobKilledAfterItsOutputIsInPlaceCountsAsWritten() throws {
        let dir = try workspace()
        let result = try run([source, "-o", "chunked.mkv"] + exact, in: dir, environment: ["UPSCALE_TEST_HOOK": "worker-dies-after-join"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertFalse(result.stderr.contains("error"), result.stderr)
        XCTAssertEqual(try MediaProbe.packets(dir.appendingPathComponent("chunked.mkv").path, stream: 0).count, 60)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted(), [source, "chunked.mkv"])
    }

    /// The same, ended by one Ctrl-C: a job that has not stopped a second later is killed,
    /// and one killed after its output was in place is said to have written it (it said its
    /// chunks were kept for a resume, which then refused the existing output).
    func testACtrlCAfterTheOutputIsInPlaceSaysItIsComplete() throws {
        let dir = try workspace()
        let (process, err) = try start([source, "-o", "chunked.mkv"] + exact, in: dir, environment: ["UPSCALE_TEST_HOOK": "stall-after-join"])
        let output = dir.appendingPathComponent("chunked.mkv")
        let deadline = Date().addingTimeInterval(120)
        while Date() < deadline && !FileManager.default.fileExists(atPath: output.path) { usleep(20_000) }
        kill(process.processIdentifier, SIGINT)
        let text = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 130, text)
        XCTAssertEqual(text, "error: cancelled after 'chunked.mkv' was written; the output is complete\n")
        XCTAssertEqual(try MediaProbe.packets(output.path, stream: 0).count, 60)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted(), [source, "chunked.mkv"])
    }

    /// A repeated timestamp, and a file that starts between keyframes, run in chunks as in
    /// one piece: the same pictures (a chunk came out short of what the plan counted, and the
    /// run failed after encoding the chunks before it, which it then removed).
    func testARepeatedTimeAndAStartBetweenKeyframesRunInChunks() throws {
        let dir = try workspace()
        for (name, expected) in [("chunk-dup-pts.mp4", 59), ("chunk-nokey-start.mkv", 44)] {
            try FileManager.default.copyItem(at: CLITests.fixtures.appendingPathComponent(name), to: dir.appendingPathComponent(name))
            let single = try run([name, "-o", "single-\(name).mkv", "--codec", "ffv1", "--no-refine", "--threads", "1", "--chunk-seconds", "0"], in: dir)
            XCTAssertEqual(single.status, 0, single.stderr)
            let chunked = try run([name, "-o", "chunked-\(name).mkv"] + exact, in: dir)
            XCTAssertEqual(chunked.status, 0, "\(name): \(chunked.stderr)")
            let frames = try MediaProbe.packets(dir.appendingPathComponent("single-\(name).mkv").path, stream: 0).count
            XCTAssertEqual(frames, expected, name)
            try assertSamePictures(dir.appendingPathComponent("single-\(name).mkv"), dir.appendingPathComponent("chunked-\(name).mkv"), count: frames)
        }
    }

    /// After an interrupted chunked run: a resume's line counts its rate on the frames it
    /// encoded, naming those from the last run (a run that only joined said "60 frames in
    /// 0.0 s, 9383.4 fps"); and a one-piece run of the same output (what the chunk errors
    /// advise) removes the chunks left beside it, which stayed hidden for good.
    func testAResumeCountsOnlyItsFramesAndAOnePieceRunRemovesLeftChunks() throws {
        let dir = try workspace()
        let arguments = [source, "-o", "chunked.mkv"] + exact
        let work = dir.appendingPathComponent(".chunked.mkv.upscale-work")
        try interruptAfterChunks(arguments, in: dir, work: work)
        let resume = Process()
        resume.executableURL = CLITests.binary
        resume.arguments = arguments
        resume.currentDirectoryURL = dir
        let out = Pipe()
        resume.standardOutput = out
        resume.standardError = FileHandle.nullDevice
        try resume.run()
        let line = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        resume.waitUntilExit()
        XCTAssertEqual(resume.terminationStatus, 0, line)
        XCTAssertTrue(line.contains("60 frames ("), line)
        XCTAssertTrue(line.contains(" from the last run) in "), line)
        try FileManager.default.removeItem(at: dir.appendingPathComponent("chunked.mkv"))

        try interruptAfterChunks(arguments, in: dir, work: work)
        XCTAssertGreaterThanOrEqual(finishedChunks(work), 1)
        let single = try run([source, "-o", "chunked.mkv", "--codec", "ffv1", "--no-refine", "--threads", "1", "--chunk-seconds", "0"], in: dir)
        XCTAssertEqual(single.status, 0, single.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: work.path), "left chunks removed")
    }

    /// Ctrl-C keeps the finished chunks and says where; --no-resume starts over; a finished
    /// run leaves no work folder.
    /// The same command started again while the first still runs: refused in one line. Before,
    /// the second took the first's live chunks for an interrupted run's, redid them and removed
    /// the work folder, and the first then failed on a missing chunk.
    func testASecondRunOfTheSameJobIsRefusedWhileTheFirstRuns() throws {
        let dir = try workspace()
        let work = dir.appendingPathComponent(".\(source.replacingOccurrences(of: ".mp4", with: "")) Upscaled.mkv.upscale-work")
        let (first, firstErrors) = try start([source] + exact, in: dir)
        try waitForChunks(work, atLeast: 1, process: first)
        let second = try run([source] + exact, in: dir)
        XCTAssertEqual(second.status, 1, second.stderr)
        XCTAssertTrue(second.stderr.contains("is being made by another upscale run right now"), second.stderr)
        let text = String(decoding: firstErrors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        first.waitUntilExit()
        XCTAssertEqual(first.terminationStatus, 0, text)
        let reader = try VideoFrameReader(path: dir.appendingPathComponent("chunk-h264-bframes Upscaled.mkv").path)
        var frames = 0
        while try reader.next() != nil { frames += 1 }
        XCTAssertEqual(frames, 60)
        XCTAssertFalse(FileManager.default.fileExists(atPath: work.path))
    }

    /// A disk that fills up while a chunk is written fails the run and keeps the finished
    /// chunks, as its message says; after space is freed the same command resumes from them
    /// and the result is whole. The work folder was removed, and the rerun started from zero.
    func testADiskFullRunKeepsItsChunksForTheNextRun() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root to mount a small tmpfs") }
        let dir = try workspace()
        let small = dir.appendingPathComponent("small")
        try FileManager.default.createDirectory(at: small, withIntermediateDirectories: true)
        guard try shell("mount -t tmpfs -o size=48m tmpfs '\(small.path)'") == 0 else { throw XCTSkip("tmpfs cannot be mounted here") }
        defer { _ = try? shell("umount '\(small.path)'") }
        let arguments = [source, "-o", small.appendingPathComponent("chunked.mkv").path] + exact
        let work = small.appendingPathComponent(".chunked.mkv.upscale-work")
        let (process, err) = try start(arguments, in: dir)
        try waitForChunks(work, atLeast: 1, process: process)
        // Fill what is left of the disk.
        let filler = small.appendingPathComponent("filler")
        try CLITests.fillDisk(with: filler)
        let text = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 1, text)
        XCTAssertTrue(text.contains("the disk is full"), text)
        let kept = finishedChunks(work)
        XCTAssertGreaterThanOrEqual(kept, 1, "finished chunks were removed")
        // The disk made read-only meanwhile: one line, and the chunks stay (it said "holds
        // chunks made with other settings; starting over", then failed on the ledger).
        XCTAssertEqual(try shell("mount -o remount,ro '\(small.path)'"), 0)
        let readOnly = try run(arguments, in: dir)
        XCTAssertEqual(readOnly.status, 1, readOnly.stderr)
        XCTAssertFalse(readOnly.stderr.contains("starting over"), readOnly.stderr)
        XCTAssertTrue(readOnly.stderr.contains("(Read-only file system)"), readOnly.stderr)
        XCTAssertEqual(readOnly.stderr.split(separator: "\n").filter { $0.hasPrefix("error:") }.count, 1, readOnly.stderr)
        XCTAssertEqual(finishedChunks(work), kept)
        XCTAssertEqual(try shell("mount -o remount,rw '\(small.path)'"), 0)

        try FileManager.default.removeItem(at: filler)
        let again = try run(arguments, in: dir)
        XCTAssertEqual(again.status, 0, again.stderr)
        let line = try XCTUnwrap(again.stderr.split(separator: "\n").first { $0.contains("resuming:") }, again.stderr)
        XCTAssertEqual(line.split(whereSeparator: { !$0.isNumber }).compactMap { Int($0) }.first, kept, String(line))
        XCTAssertEqual(try MediaProbe.packets(small.appendingPathComponent("chunked.mkv").path, stream: 0).count, 60)
        XCTAssertFalse(FileManager.default.fileExists(atPath: work.path))
    }

    /// A join stopped by Ctrl-C or by a full disk keeps every chunk and says so; the next run
    /// only joins them. Both ended on the join's own line, with no word of the chunks (the
    /// disk's offered another --output folder, where a rerun would not find them).
    func testAJoinStoppedOrOutOfSpaceKeepsItsChunksAndSaysSo() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root to mount a small tmpfs") }
        let dir = try workspace()
        let arguments = [source, "-o", "joined.mkv"] + exact
        let work = dir.appendingPathComponent(".joined.mkv.upscale-work")
        let stopped = try run(arguments, in: dir, environment: ["UPSCALE_TEST_HOOK": "interrupt-at-join"])
        XCTAssertEqual(stopped.status, 130, stopped.stderr)
        let chunks = finishedChunks(work)
        XCTAssertGreaterThan(chunks, 1)
        XCTAssertTrue(stopped.stderr.contains("interrupted while joining; the \(chunks) finished chunks are kept in '\(work.path)': run the same command again to join them"), stopped.stderr)
        XCTAssertEqual(stopped.stderr.split(separator: "\n").filter { $0.hasPrefix("error:") }.count, 1, stopped.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir.appendingPathComponent("joined.mkv").path))
        let joiner = Process()
        joiner.executableURL = CLITests.binary
        joiner.arguments = arguments
        joiner.currentDirectoryURL = dir
        let out = Pipe(), err = Pipe()
        joiner.standardOutput = out
        joiner.standardError = err
        try joiner.run()
        let said = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let joined = (status: { joiner.waitUntilExit(); return joiner.terminationStatus }(),
                      stderr: String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))
        XCTAssertEqual(joined.status, 0, joined.stderr)
        XCTAssertTrue(joined.stderr.contains("resuming: \(chunks) of \(chunks) chunks done"), joined.stderr)
        // A run that only joined has no rate of its own (it said "0.0 fps").
        XCTAssertTrue(said.contains("60 frames, all from the last run, joined in "), said)
        XCTAssertFalse(said.contains(" fps"), said)
        let size = try XCTUnwrap(try FileManager.default.attributesOfItem(atPath: dir.appendingPathComponent("joined.mkv").path)[.size] as? Int)

        // A disk with room for the chunks and half the joined output.
        let small = dir.appendingPathComponent("small")
        try FileManager.default.createDirectory(at: small, withIntermediateDirectories: true)
        guard try shell("mount -t tmpfs -o size=\(3 * size + (8 << 20)) tmpfs '\(small.path)'") == 0 else { throw XCTSkip("tmpfs cannot be mounted here") }
        defer { _ = try? shell("umount '\(small.path)'") }
        let free = try XCTUnwrap(try FileManager.default.attributesOfFileSystem(forPath: small.path)[.systemFreeSize] as? Int)
        let filler = small.appendingPathComponent("filler")
        FileManager.default.createFile(atPath: filler.path, contents: nil)
        let handle = try FileHandle(forWritingTo: filler)
        var left = free - size * 3 / 2
        while left > 0 {
            try handle.write(contentsOf: Data(count: min(left, 1 << 20)))
            left -= 1 << 20
        }
        try handle.close()
        let onSmall = [source, "-o", small.appendingPathComponent("joined.mkv").path] + exact
        let smallWork = small.appendingPathComponent(".joined.mkv.upscale-work")
        let full = try run(onSmall, in: dir)
        XCTAssertEqual(full.status, 1, full.stderr)
        XCTAssertTrue(full.stderr.contains("the disk is full"), full.stderr)
        XCTAssertTrue(full.stderr.contains("the \(chunks) finished chunks are kept in '\(smallWork.path)': run the same command again to join them"), full.stderr)
        XCTAssertFalse(full.stderr.contains("another --output folder"), full.stderr)
        XCTAssertEqual(finishedChunks(smallWork), chunks)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: small.path).sorted(), [".joined.mkv.upscale-work", "filler"])
        try FileManager.default.removeItem(at: filler)
        let again = try run(onSmall, in: dir)
        XCTAssertEqual(again.status, 0, again.stderr)
        XCTAssertTrue(again.stderr.contains("resuming: \(chunks) of \(chunks) chunks done"), again.stderr)
        XCTAssertEqual(try MediaProbe.packets(small.appendingPathComponent("joined.mkv").path, stream: 0).count, 60)
    }

    func testInterruptedRunKeepsItsChunksAndNoResumeStartsOver() throws {
        let dir = try workspace()
        let arguments = [source, "-o", "chunked.mkv"] + exact
        let work = dir.appendingPathComponent(".chunked.mkv.upscale-work")
        let text = try interruptAfterChunks(arguments, in: dir, work: work)
        XCTAssertTrue(text.contains("chunks are kept in '\(work.path)'"), text)
        // That line says it all: no "cancelled; no output was written" under it.
        XCTAssertEqual(text.split(separator: "\n").filter { $0.hasPrefix("error:") }.count, 1, text)
        XCTAssertGreaterThanOrEqual(finishedChunks(work), 1)
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir.appendingPathComponent("chunked.mkv").path))

        let fresh = try run(arguments + ["--no-resume"], in: dir)
        XCTAssertEqual(fresh.status, 0, fresh.stderr)
        XCTAssertFalse(fresh.stderr.contains("resuming"), fresh.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: work.path))
        XCTAssertEqual(try MediaProbe.packets(dir.appendingPathComponent("chunked.mkv").path, stream: 0).count, 60)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted(), ["chunk-h264-bframes.mp4", "chunked.mkv"])
    }
}
