import Foundation
import CFFmpeg
import DamageCorpus
import UpscaleMedia
import XCTest

/// Runs the built `upscale` binary the way a user does and checks exit codes,
/// messages and what is left on disk.
final class CLITests: XCTestCase {
    struct Result {
        let status: Int32
        let stdout: String
        let stderr: String
    }

    static var binary: URL {
        var dir = Bundle.main.bundleURL
        if dir.pathExtension == "xctest" { dir = dir.deletingLastPathComponent() }
        return dir.appendingPathComponent("upscale")
    }

    static var fixtures: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fixtures")
    }

    /// Writes `file` until its disk has no room left (a small tmpfs in the disk-full tests).
    static func fillDisk(with file: URL) throws {
        FileManager.default.createFile(atPath: file.path, contents: nil)
        let handle = try FileHandle(forWritingTo: file)
        let block = Data(count: 1 << 16)
        while (try? handle.write(contentsOf: block)) != nil {}
        try handle.close()
    }

    private func workspace(_ names: [String]) throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("upscale-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        for name in names {
            try FileManager.default.copyItem(at: Self.fixtures.appendingPathComponent(name), to: dir.appendingPathComponent(name))
        }
        addTeardownBlock { try? FileManager.default.removeItem(at: dir) }
        return dir
    }

    private func listing(_ dir: URL) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []).sorted()
    }

    private func launch(_ arguments: [String], in dir: URL, environment: [String: String] = [:]) throws -> (Process, Pipe, Pipe) {
        let process = Process()
        process.executableURL = Self.binary
        process.arguments = arguments
        if !environment.isEmpty { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
        process.currentDirectoryURL = dir
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        return (process, out, err)
    }

    /// `dir/pipes/<name>`: a named pipe that `fixture`, remuxed into `name`'s container, is
    /// written into from another thread, as a recorder or `cat` would.
    private func stream(_ fixture: String, as name: String, in dir: URL) throws {
        try FileManager.default.createDirectory(at: dir.appendingPathComponent("pipes"), withIntermediateDirectories: true)
        let remuxed = dir.appendingPathComponent(name).path
        try Remuxer.copy(dir.appendingPathComponent(fixture).path, to: remuxed)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: remuxed))
        try FileManager.default.removeItem(atPath: remuxed)
        let pipe = dir.appendingPathComponent("pipes/" + name).path
        XCTAssertEqual(mkfifo(pipe, 0o644), 0)
        let writer = Thread {
            // Blocks until upscale opens the pipe; a reader that ends early ends the write (EPIPE).
            signal(SIGPIPE, SIG_IGN)
            let fd = open(pipe, O_WRONLY)
            guard fd >= 0 else { return }
            _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            close(fd)
        }
        writer.start()
    }

    @discardableResult
    private func upscale(_ arguments: [String], in dir: URL, environment: [String: String] = [:]) throws -> Result {
        let (process, out, err) = try launch(arguments, in: dir, environment: environment)
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Result(status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self),
                      stderr: String(decoding: stderr, as: UTF8.self))
    }

    func testDefaultRunWritesUpscaledFileBesideInputAndRefusesToOverwrite() throws {
        let dir = try workspace(["street-2s.mp4"])
        let first = try upscale(["street-2s.mp4", "--width", "320", "--preset", "ultrafast"], in: dir)
        XCTAssertEqual(first.status, 0, first.stderr)
        XCTAssertTrue(first.stdout.contains("Wrote"), first.stdout)
        XCTAssertTrue(first.stdout.contains("320x240"), first.stdout)
        XCTAssertEqual(listing(dir), ["street-2s Upscaled.mp4", "street-2s.mp4"])

        let output = dir.appendingPathComponent("street-2s Upscaled.mp4")
        let before = try Data(contentsOf: output)
        let second = try upscale(["street-2s.mp4", "--width", "320", "--preset", "ultrafast"], in: dir)
        XCTAssertEqual(second.status, 1)
        XCTAssertTrue(second.stderr.contains("already exists; use --overwrite"), second.stderr)
        XCTAssertEqual(second.stderr.split(separator: "\n").count, 1, second.stderr)
        XCTAssertEqual(try Data(contentsOf: output), before)
        XCTAssertEqual(listing(dir), ["street-2s Upscaled.mp4", "street-2s.mp4"])

        let third = try upscale(["street-2s.mp4", "--height", "100", "--preset", "ultrafast", "--overwrite", "--quiet"], in: dir)
        XCTAssertEqual(third.status, 0, third.stderr)
        XCTAssertEqual(third.stdout, "")
        XCTAssertEqual(third.stderr, "")
        XCTAssertNotEqual(try Data(contentsOf: output), before)
        XCTAssertTrue(try Self.probeSize(output).hasPrefix("134x100"))
        // Not asked for by name: a size the refinement has no filters for says nothing about it.
        XCTAssertFalse(first.stdout.contains("refinement") || first.stderr.contains("refinement"), first.stdout + first.stderr)
    }

    /// libavfilter (deinterlacing only) and libvips (stills, charts) are opened when first
    /// needed, not at every start: the dynamic loader's own list of what the binary loads
    /// (LD_TRACE_LOADED_OBJECTS, what `ldd` prints) has FFmpeg's codec library but neither.
    func testStartLoadsNeitherTheFilterLibraryNorLibvips() throws {
        let process = Process()
        process.executableURL = Self.binary
        process.environment = ["LD_TRACE_LOADED_OBJECTS": "1"]
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        let listing = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0)
        XCTAssertTrue(listing.contains("libavcodec.so"), listing)
        XCTAssertFalse(listing.contains("libavfilter"), listing)
        XCTAssertFalse(listing.contains("libvips"), listing)
    }

    func testRefinementIsOnByDefaultAtTwiceTheSize() throws {
        let dir = try workspace(["street-2s.mp4"])
        let refined = try upscale(["street-2s.mp4", "--scale", "2", "--preset", "ultrafast", "--crf", "40"], in: dir)
        XCTAssertEqual(refined.status, 0, refined.stderr)
        XCTAssertTrue(refined.stdout.contains("(1536x1152, lanczos3 + edge refinement, hevc"), refined.stdout)
        let plain = try upscale(["street-2s.mp4", "--scale", "2", "--preset", "ultrafast", "--crf", "40", "--no-refine", "--overwrite"], in: dir)
        XCTAssertEqual(plain.status, 0, plain.stderr)
        XCTAssertTrue(plain.stdout.contains("(1536x1152, lanczos3, hevc"), plain.stdout)
    }

    /// Without a terminal, progress is a plain line on stderr every few seconds (here at every
    /// frame), the first after that time; stdout has the result alone. Progress lines went to
    /// stdout, the first at frame 1 with the decoder's start-up fps and ETA.
    func testAVIInputBecomesMovWithANoticeAndPlainProgressWithoutTTY() throws {
        let dir = try workspace(["street-mjpeg.avi"])
        let arguments = ["street-mjpeg.avi", "--scale", "1", "--preset", "ultrafast", "--overwrite"]
        let result = try upscale(arguments, in: dir, environment: ["UPSCALE_PROGRESS_SECONDS": "0"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.stderr.contains("note: .avi cannot hold hevc; writing .mov"), result.stderr)
        let progress = result.stderr.split(separator: "\n").filter { $0.hasPrefix("street-mjpeg.avi: ") }
        XCTAssertFalse(progress.isEmpty, "plain progress lines expected on stderr: \(result.stderr)")
        XCTAssertTrue(progress.allSatisfy { $0.contains(" fps, ETA ") }, result.stderr)
        XCTAssertEqual(result.stdout.split(separator: "\n").count, 1, result.stdout)
        XCTAssertTrue(result.stdout.hasPrefix("Wrote "), result.stdout)
        XCTAssertEqual(listing(dir), ["street-mjpeg Upscaled.mov", "street-mjpeg.avi"])
        // A job shorter than the interval prints no progress line at all.
        let short = try upscale(arguments, in: dir, environment: ["UPSCALE_PROGRESS_SECONDS": "60"])
        XCTAssertEqual(short.status, 0, short.stderr)
        XCTAssertFalse(short.stderr.contains("street-mjpeg.avi: ") || short.stdout.contains("fps,"), short.stderr + short.stdout)
    }

    func testSeveralInputsGoToTheOutputFolder() throws {
        let dir = try workspace(["street-2s.mp4", "street-vp9-opus.webm"])
        try FileManager.default.createDirectory(at: dir.appendingPathComponent("out"), withIntermediateDirectories: true)
        let result = try upscale(["street-2s.mp4", "street-vp9-opus.webm", "--width", "256", "--output", "out",
                                  "--preset", "ultrafast", "--quiet"], in: dir)
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(listing(dir.appendingPathComponent("out")), ["street-2s Upscaled.mp4", "street-vp9-opus Upscaled.mov"])
        // A file whose own shape puts the side not given out of range (pixels stretched 100
        // times: 640 wide is 4 high) fails alone; the batch goes on (it stopped there, exit 2).
        try Remuxer.copy(dir.appendingPathComponent("street-2s.mp4").path, to: dir.appendingPathComponent("stretched.mp4").path,
                         sampleAspect: (100, 1))
        let mixed = try upscale(["stretched.mp4", "street-2s.mp4", "--width", "640", "--output", "out", "--overwrite",
                                 "--preset", "ultrafast", "--quiet"], in: dir)
        XCTAssertEqual(mixed.status, 1, mixed.stderr)
        XCTAssertTrue(mixed.stderr.hasPrefix("error: 'stretched.mp4' is 768x576, so output height 4 is outside 16...16384; give both --width and --height"),
                      mixed.stderr)
        XCTAssertEqual(try MediaProbe.info(dir.appendingPathComponent("out/street-2s Upscaled.mp4").path).video?.width, 640)
        // A --scale that takes a side out of range is said to be the cause (the file was blamed:
        // "check the file: a damaged header can report a wrong size").
        let tiny = try upscale(["street-2s.mp4", "--scale", "0.02", "--output", "out", "--overwrite"], in: dir)
        XCTAssertEqual(tiny.status, 1, tiny.stderr)
        XCTAssertEqual(tiny.stderr, "error: 'street-2s.mp4' is 768x576, so with --scale 0.02 output height 12 is outside 16...16384; give a larger --scale, or --width or --height\n")
        let notFolder = try upscale(["street-2s.mp4", "street-vp9-opus.webm", "--output", "x.mp4"], in: dir)
        XCTAssertEqual(notFolder.status, 2)
        XCTAssertTrue(notFolder.stderr.contains("must be an existing folder"), notFolder.stderr)
    }

    /// A clip read from a named pipe (as from /dev/stdin): it was refused as "empty (0 bytes)",
    /// and its output went beside it (for /dev/stdin: into /dev). Now it is read as it comes
    /// and the output lands in the current folder.
    func testAClipFromAPipeIsReadAndLandsInTheCurrentFolder() throws {
        let dir = try workspace(["street-2s.mp4"])
        // MPEG-TS, as a recorder or `cat` would stream it (an .mp4 needs its index, at its end).
        try stream("street-2s.mp4", as: "clip.ts", in: dir)
        let result = try upscale(["pipes/clip.ts", "--width", "256", "--preset", "ultrafast", "--quiet"], in: dir)
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(listing(dir), ["clip Upscaled.mov", "pipes", "street-2s.mp4"])
        let output = dir.appendingPathComponent("clip Upscaled.mov").path
        XCTAssertEqual(try MediaProbe.packets(output, stream: try XCTUnwrap(MediaProbe.info(output).videoStreamIndex)).count, 20)

        // /dev/stdin given a file (`upscale /dev/stdin < clip.mp4`): it leads to a regular file,
        // and the output went beside it, into /dev. It goes to the current folder.
        try FileManager.default.removeItem(atPath: output)
        let process = Process()
        process.executableURL = Self.binary
        process.arguments = ["/dev/stdin", "--width", "256", "--preset", "ultrafast", "--quiet"]
        process.currentDirectoryURL = dir
        process.standardInput = try FileHandle(forReadingFrom: dir.appendingPathComponent("street-2s.mp4"))
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0)
        XCTAssertEqual(listing(dir), ["pipes", "stdin Upscaled.mov", "street-2s.mp4"])
        XCTAssertFalse(FileManager.default.fileExists(atPath: "/dev/stdin Upscaled.mov"))
        // "-", as other tools take standard input, names /dev/stdin (it said "'-' does not exist").
        let dash = try upscale(["-", "--width", "256"], in: dir)
        XCTAssertEqual(dash.status, 1, dash.stderr)
        XCTAssertEqual(dash.stderr.split(separator: "\n").count, 1, dash.stderr)
        XCTAssertTrue(dash.stderr.contains("give /dev/stdin to read from a pipe"), dash.stderr)
    }

    /// WebM damaged in the middle: FFmpeg's Matroska demuxer skips to the next cluster it
    /// recognises and goes on, so 4 of 10 pictures were missing from an output made without a
    /// word (exit 0). A note now says the file is damaged; the sound file gets none.
    func testMatroskaDamagedInTheMiddleGetsANote() throws {
        let dir = try workspace([])
        var bytes = [UInt8](try Data(contentsOf: Self.fixtures.appendingPathComponent("damage/vp9-opus.webm")))
        try Data(bytes).write(to: dir.appendingPathComponent("sound.webm"))
        bytes.replaceSubrange(bytes.count / 3..<(bytes.count / 3 + bytes.count / 8), with: [UInt8](repeating: 0, count: bytes.count / 8))
        try Data(bytes).write(to: dir.appendingPathComponent("damaged.webm"))
        let damaged = try upscale(["damaged.webm", "--width", "240", "--preset", "ultrafast"], in: dir)
        XCTAssertEqual(damaged.status, 0, damaged.stderr)
        XCTAssertTrue(damaged.stderr.contains("'damaged.webm' is damaged: FFmpeg skipped unreadable data while reading it"), damaged.stderr)
        let sound = try upscale(["sound.webm", "--width", "240", "--preset", "ultrafast"], in: dir)
        XCTAssertEqual(sound.status, 0, sound.stderr)
        XCTAssertFalse(sound.stderr.contains("damaged"), sound.stderr)
    }

    /// Damage a Matroska file long enough for chunks runs as in one piece (the same pictures,
    /// the note): here a group of pictures with the header of its cluster lost. A chunk seeks
    /// into the damage and the demuxer resyncs elsewhere than when reading through it: the run
    /// failed on a chunk's frame count, saying the file's timestamps were irregular. Reading
    /// through it, the decoder gave pictures timed before ones already written, and the
    /// muxer refused the encoder's packets ("writing failed: Invalid argument"): they are left
    /// out, with a note.
    func testDamagedMatroskaLongEnoughForChunksRunsAsInOnePiece() throws {
        let dir = try workspace(["chunk-h264-bframes.mp4"])
        let mkv = dir.appendingPathComponent("whole.mkv")
        try Remuxer.copy(dir.appendingPathComponent("chunk-h264-bframes.mp4").path, to: mkv.path)
        let keyframes = try MediaProbe.packets(mkv.path, stream: 0).filter(\.isKeyframe).compactMap(\.position).map { Int($0) }
        XCTAssertGreaterThanOrEqual(keyframes.count, 6, "\(keyframes)")
        for group in [2, 3] {
            // From just before the group's first block (its cluster's header) to just before the next's.
            var bytes = [UInt8](try Data(contentsOf: mkv))
            bytes.replaceSubrange((keyframes[group] - 12)..<(keyframes[group + 1] - 40),
                                  with: [UInt8](repeating: 0, count: keyframes[group + 1] - 40 - keyframes[group] + 12))
            let name = "damaged-\(group).mkv"
            try Data(bytes).write(to: dir.appendingPathComponent(name))
            let one = try upscale([name, "--width", "320", "--codec", "ffv1", "--no-refine", "--chunk-seconds", "0", "--output", "one-\(name)"], in: dir)
            XCTAssertEqual(one.status, 0, one.stderr)
            XCTAssertTrue(one.stderr.contains("'\(name)' is damaged: FFmpeg skipped"), one.stderr)
            XCTAssertTrue(one.stderr.contains("picture(s) timed at or before a picture already written (after damaged data, or repeated timestamps) were left out"), one.stderr)
            let chunked = try upscale([name, "--width", "320", "--codec", "ffv1", "--no-refine", "--chunk-seconds", "1", "--output", "chunked-\(name)"], in: dir)
            XCTAssertEqual(chunked.status, 0, chunked.stderr)
            XCTAssertTrue(chunked.stderr.contains("'\(name)' is damaged: FFmpeg skipped"), chunked.stderr)
            XCTAssertEqual(try MediaProbe.packets(dir.appendingPathComponent("chunked-\(name)").path, stream: 0).count,
                           try MediaProbe.packets(dir.appendingPathComponent("one-\(name)").path, stream: 0).count, name)
        }
    }

    /// A size x265 refuses (an extreme shape): one line naming the file and a way out (it named
    /// neither), exit 1, nothing left.
    func testASizeTheEncoderRefusesNamesTheFile() throws {
        let dir = try workspace(["street-2s.mp4"])
        let result = try upscale(["street-2s.mp4", "--width", "5120", "--height", "16", "--preset", "ultrafast"], in: dir)
        XCTAssertEqual(result.status, 1, result.stderr)
        // (A note on the stretched shape comes first.)
        let error = result.stderr.split(separator: "\n").last.map(String.init) ?? ""
        XCTAssertTrue(error.hasPrefix("error: 'street-2s.mp4': cannot open the libx265 encoder at 5120x16: "), result.stderr)
        XCTAssertTrue(error.hasSuffix("the encoder refuses this picture size — choose another --width/--height or --codec"), result.stderr)
        XCTAssertEqual(result.stderr.split(separator: "\n").filter { $0.hasPrefix("error:") }.count, 1, result.stderr)
        XCTAssertEqual(listing(dir), ["street-2s.mp4"])
    }

    func testBadInputsExitOneWithOneLineAndLeaveNothing() throws {
        let dir = try workspace(["tone.m4a"])
        FileManager.default.createFile(atPath: dir.appendingPathComponent("empty.mov").path, contents: Data())
        try Data("hello\n".utf8).write(to: dir.appendingPathComponent("text.mp4"))
        try FileManager.default.createDirectory(at: dir.appendingPathComponent("folder"), withIntermediateDirectories: true)
        let before = listing(dir)
        let cases: [([String], String)] = [
            (["missing.mov"], "does not exist"),
            (["folder"], "is a folder"),
            (["empty.mov"], "is empty"),
            (["text.mp4"], "not a media file"),
            (["tone.m4a"], "no video stream"),
        ]
        for (arguments, phrase) in cases {
            let result = try upscale(arguments, in: dir)
            XCTAssertEqual(result.status, 1, "\(arguments)")
            XCTAssertTrue(result.stderr.hasPrefix("error: "), result.stderr)
            XCTAssertTrue(result.stderr.contains(phrase), "\(arguments): \(result.stderr)")
            XCTAssertEqual(result.stderr.split(separator: "\n").count, 1, result.stderr)
            XCTAssertFalse(result.stderr.contains("Fatal error"), result.stderr)
        }
        XCTAssertEqual(listing(dir), before)
    }

    func testEncoderChoiceIsHonouredAndNamedInTheSummary() throws {
        let dir = try workspace(["street-2s.mp4"])
        let auto = try upscale(["street-2s.mp4", "--width", "256", "--preset", "ultrafast"], in: dir)
        XCTAssertEqual(auto.status, 0, auto.stderr)
        // No GPU on these machines: auto falls back to libx265 (NVENC where one opens).
        XCTAssertTrue(auto.stdout.contains("hevc via libx265") || auto.stdout.contains("hevc via hevc_nvenc"), auto.stdout)
        let named = try upscale(["street-2s.mp4", "--width", "256", "--encoder", "libx265", "--preset", "ultrafast", "--overwrite"], in: dir)
        XCTAssertEqual(named.status, 0, named.stderr)
        XCTAssertTrue(named.stdout.contains("hevc via libx265"), named.stdout)
        let before = try Data(contentsOf: dir.appendingPathComponent("street-2s Upscaled.mp4"))
        // A named hardware encoder either encodes (where its device exists) or fails in one line
        // and leaves the earlier output alone; never a silent switch to another encoder.
        for name in ["hevc_vaapi", "hevc_qsv", "hevc_nvenc"] {
            let hardware = try upscale(["street-2s.mp4", "--width", "256", "--encoder", name, "--overwrite"], in: dir)
            if hardware.status == 0 {
                XCTAssertTrue(hardware.stdout.contains("hevc via \(name)"), hardware.stdout)
                continue
            }
            XCTAssertEqual(hardware.status, 1)
            XCTAssertTrue(hardware.stderr.contains("\(name) encoder is not available"), hardware.stderr)
            XCTAssertEqual(hardware.stderr.split(separator: "\n").count, 1, hardware.stderr)
            XCTAssertEqual(try Data(contentsOf: dir.appendingPathComponent("street-2s Upscaled.mp4")), before)
        }
        XCTAssertEqual(listing(dir), ["street-2s Upscaled.mp4", "street-2s.mp4"])
        XCTAssertEqual(try upscale(["street-2s.mp4", "--encoder", "x264"], in: dir).status, 2)
        XCTAssertEqual(try upscale(["street-2s.mp4", "--encoder", "libx265", "--codec", "prores"], in: dir).status, 2)
    }

    /// An output name taken by a folder is said to be a folder, before any work, with or
    /// without --overwrite (it said "already exists; use --overwrite", and with --overwrite a
    /// still was made in full and then "cannot move the finished file …: Is a directory").
    func testAnOutputNameTakenByAFolderIsNamedSoBeforeAnyWork() throws {
        let dir = try workspace(["street-2s.mp4", "baboon.jpg"])
        for name in ["street-2s Upscaled.mp4", "baboon Upscaled.jpg"] {
            try FileManager.default.createDirectory(at: dir.appendingPathComponent(name), withIntermediateDirectories: true)
        }
        for input in ["street-2s.mp4", "baboon.jpg"] {
            for extra in [[], ["--overwrite"]] {
                let result = try upscale([input, "--preset", "ultrafast"] + extra, in: dir)
                XCTAssertEqual(result.status, 1, result.stderr)
                XCTAssertTrue(result.stderr.hasSuffix(" Upscaled.\(input.hasSuffix("jpg") ? "jpg" : "mp4")' is a folder; choose a file name for --output\n"), result.stderr)
                XCTAssertEqual(result.stderr.split(separator: "\n").count, 1, result.stderr)
            }
        }
        XCTAssertEqual(listing(dir), ["baboon Upscaled.jpg", "baboon.jpg", "street-2s Upscaled.mp4", "street-2s.mp4"])
        // A dangling link is a name taken too: said at once (the final rename, which never
        // replaces, refused it after the whole upscale).
        try FileManager.default.createSymbolicLink(atPath: dir.appendingPathComponent("clip Upscaled.mp4").path, withDestinationPath: "/nonexistent")
        try FileManager.default.copyItem(at: dir.appendingPathComponent("street-2s.mp4"), to: dir.appendingPathComponent("clip.mp4"))
        let linked = try upscale(["clip.mp4", "--preset", "ultrafast"], in: dir)
        XCTAssertEqual(linked.status, 1, linked.stderr)
        XCTAssertTrue(linked.stderr.hasSuffix("clip Upscaled.mp4' already exists; use --overwrite to replace it\n"), linked.stderr)
    }

    func testUnwritableOutputFolderFailsCleanly() throws {
        let dir = try workspace(["street-2s.mp4"])
        // /proc takes no new files, even for root.
        let result = try upscale(["street-2s.mp4", "--output", "/proc/out.mp4", "--preset", "ultrafast"], in: dir)
        XCTAssertEqual(result.status, 1)
        XCTAssertTrue(result.stderr.contains("cannot write in '/proc'"), result.stderr)
        XCTAssertEqual(listing(dir), ["street-2s.mp4"])
    }

    /// Two inputs of a batch whose outputs would be one file — one name from two folders into
    /// one --output folder (videos or stills), a.avi beside a.mov (both become .mov), one file
    /// given twice — are refused before anything runs, in one line naming both, even with
    /// --overwrite. Before, the later one failed at its turn, after the earlier had been
    /// upscaled (and the rest of the batch had to be run again on its own).
    func testBatchWhoseOutputsWouldCollideIsRefusedBeforeAnythingRuns() throws {
        let dir = try workspace(["street-2s.mp4", "street-hlg.mp4", "baboon.jpg", "fruits.jpg"])
        for folder in ["one", "two", "out"] {
            try FileManager.default.createDirectory(at: dir.appendingPathComponent(folder), withIntermediateDirectories: true)
        }
        let copy = { (from: String, to: String) in
            try FileManager.default.copyItem(at: dir.appendingPathComponent(from), to: dir.appendingPathComponent(to))
        }
        try copy("street-2s.mp4", "one/clip.mp4")
        try copy("street-hlg.mp4", "two/clip.mp4")
        try copy("baboon.jpg", "one/photo.jpg")
        try copy("fruits.jpg", "two/photo.jpg")
        try FileManager.default.createDirectory(at: dir.appendingPathComponent("three"), withIntermediateDirectories: true)
        try copy("street-hlg.mp4", "three/clip.avi")
        try copy("street-hlg.mp4", "three/clip.mov")
        let common = ["--overwrite", "--preset", "ultrafast", "--scale", "0.5"]
        let cases: [([String], String)] = [
            (["street-hlg.mp4", "one/clip.mp4", "two/clip.mp4", "--output", "out"],
             "'one/clip.mp4' and 'two/clip.mp4' would both be written to '\(dir.path)/out/clip Upscaled.mp4'"),
            (["one/photo.jpg", "street-hlg.mp4", "two/photo.jpg", "--output", "out"],
             "'one/photo.jpg' and 'two/photo.jpg' would both be written to '\(dir.path)/out/photo Upscaled.jpg'"),
            (["three/clip.avi", "three/clip.mov"], "'three/clip.avi' and 'three/clip.mov' would both be written to '\(dir.path)/three/clip Upscaled.mov'"),
            (["one/clip.mp4", "two/photo.jpg", "./one/clip.mp4"], "'./one/clip.mp4' is given twice"),
        ]
        for (arguments, message) in cases {
            let result = try upscale(arguments + common, in: dir)
            XCTAssertEqual(result.status, 2, result.stderr)
            XCTAssertEqual(result.stderr.split(separator: "\n"), ["error: " + message + (message.hasSuffix("twice") ? "; give each file once"
                : "; upscale them into separate folders (--output) so neither result is lost")], "\(arguments)")
            XCTAssertEqual(listing(dir.appendingPathComponent("out")), [], "\(arguments)")
            XCTAssertEqual(listing(dir.appendingPathComponent("one")), ["clip.mp4", "photo.jpg"], "\(arguments)")
            XCTAssertEqual(listing(dir.appendingPathComponent("three")), ["clip.avi", "clip.mov"], "\(arguments)")
        }
        // Several inputs and an --output that is no folder (no such name, or a file): one line,
        // once (each input's job said it, a still's as "the output folder … does not exist").
        XCTAssertTrue(FileManager.default.createFile(atPath: dir.appendingPathComponent("taken.jpg").path, contents: Data("x".utf8)))
        for target in ["x.jpg", "taken.jpg"] {
            let result = try upscale(["one/photo.jpg", "one/clip.mp4", "--output", target], in: dir)
            XCTAssertEqual(result.status, 2, result.stderr)
            XCTAssertEqual(result.stderr, "error: --output '\(target)' must be an existing folder when upscaling several files\n")
        }
        XCTAssertEqual(try Data(contentsOf: dir.appendingPathComponent("taken.jpg")), Data("x".utf8))
        // Each into its own folder: both written, each from its own input (768x576 and 192x144 halved).
        let apart = try upscale(["one/clip.mp4", "two/clip.mp4"] + common, in: dir)
        XCTAssertEqual(apart.status, 0, apart.stderr)
        XCTAssertEqual(try Self.probeSize(dir.appendingPathComponent("one/clip Upscaled.mp4")), "384x288")
        XCTAssertEqual(try Self.probeSize(dir.appendingPathComponent("two/clip Upscaled.mp4")), "96x72")
    }

    /// An input named like another input's output ("clip Upscaled.mp4" beside "clip.mp4"), in
    /// either order and with --overwrite: that output is refused and the file kept (before, the
    /// earlier input's result replaced it, and then it was upscaled from that result).
    func testNoInputOfARunIsReplacedByAnotherInputsOutput() throws {
        let dir = try workspace(["street-2s.mp4", "street-hlg.mp4", "baboon.jpg", "fruits.jpg"])
        let move = { (from: String, to: String) in
            try FileManager.default.moveItem(at: dir.appendingPathComponent(from), to: dir.appendingPathComponent(to))
        }
        try move("street-2s.mp4", "clip.mp4")
        try move("street-hlg.mp4", "clip Upscaled.mp4")
        try move("baboon.jpg", "photo.jpg")
        try move("fruits.jpg", "photo Upscaled.jpg")
        let bytes = { (name: String) in try Data(contentsOf: dir.appendingPathComponent(name)) }
        let kept = try [bytes("clip Upscaled.mp4"), bytes("photo Upscaled.jpg")]
        for order in [["clip.mp4", "clip Upscaled.mp4", "photo.jpg", "photo Upscaled.jpg"],
                      ["clip Upscaled.mp4", "clip.mp4", "photo Upscaled.jpg", "photo.jpg"]] {
            let result = try upscale(order + ["--overwrite", "--preset", "ultrafast", "--scale", "0.5"], in: dir)
            XCTAssertEqual(result.status, 1, result.stderr)
            XCTAssertTrue(result.stderr.contains("'clip.mp4' would be written to"), result.stderr)
            XCTAssertTrue(result.stderr.contains("'photo.jpg' would be written to"), result.stderr)
            XCTAssertTrue(result.stderr.contains("another input of this run"), result.stderr)
            XCTAssertEqual(try [bytes("clip Upscaled.mp4"), bytes("photo Upscaled.jpg")], kept, "\(order)")
            // The named inputs' own results: the HLG clip's (192x144 halved), the fruits' (512x480).
            XCTAssertEqual(try Self.probeSize(dir.appendingPathComponent("clip Upscaled Upscaled.mp4")), "96x72")
            XCTAssertEqual(try Self.probeSize(dir.appendingPathComponent("photo Upscaled Upscaled.jpg")), "256x240")
        }
    }

    /// Names with a colon are files, not FFmpeg protocols: "file:clip.mp4" was read as clip.mp4
    /// (another file), "pipe:0.mp4" as standard input, and "10:30.mp4" failed ("Protocol not found").
    func testNamesWithAColonAreLocalFiles() throws {
        let dir = try workspace(["street-2s.mp4", "street-hlg.mp4"])
        try FileManager.default.moveItem(at: dir.appendingPathComponent("street-2s.mp4"), to: dir.appendingPathComponent("clip.mp4"))
        for name in ["file:clip.mp4", "pipe:0.mp4", "10:30.mp4"] {
            try FileManager.default.copyItem(at: dir.appendingPathComponent("street-hlg.mp4"), to: dir.appendingPathComponent(name))
            let result = try upscale([name, "--preset", "ultrafast", "--output", "out:\(name.prefix(2)).mkv"], in: dir)
            XCTAssertEqual(result.status, 0, "\(name): \(result.stderr)")
            // street-hlg.mp4 is 192x144; clip.mp4 (street-2s) is 768x576.
            XCTAssertEqual(try Self.probeSize(dir.appendingPathComponent("out:\(name.prefix(2)).mkv")), "384x288", name)
        }
    }

    /// A Matroska file cut short (as an unfinished copy leaves it) just ends early for FFmpeg:
    /// the run says so instead of writing the shorter video without a word (at 90% of its bytes,
    /// 5 of 10 pictures), and fails with nothing written where no picture is left (at half:
    /// before, an output of 0 frames and exit 0).
    func testACutShortFileIsNamedAsSuch() throws {
        let dir = try workspace(["street-853x479.mkv"])
        let whole = try Data(contentsOf: dir.appendingPathComponent("street-853x479.mkv"))
        try whole.prefix(whole.count * 9 / 10).write(to: dir.appendingPathComponent("cut.mkv"))
        try whole.prefix(whole.count / 2).write(to: dir.appendingPathComponent("half.mkv"))
        let cut = try upscale(["cut.mkv", "--width", "426", "--preset", "ultrafast"], in: dir)
        XCTAssertEqual(cut.status, 0, cut.stderr)
        XCTAssertTrue(cut.stderr.contains("'cut.mkv' ends at "), cut.stderr)
        XCTAssertTrue(cut.stderr.contains("it may be cut short"), cut.stderr)
        // Said before the run too, from the file's own structure (its Segment's size).
        XCTAssertTrue(cut.stderr.contains("'cut.mkv' is cut short: \(whole.count * 9 / 10) bytes of at least \(whole.count) bytes"), cut.stderr)
        let half = try upscale(["half.mkv", "--width", "426", "--preset", "ultrafast"], in: dir)
        XCTAssertEqual(half.status, 1, half.stderr)
        XCTAssertTrue(half.stderr.contains("'half.mkv' gave no picture to upscale"), half.stderr)
        XCTAssertFalse(listing(dir).contains("half Upscaled.mkv"), "\(listing(dir))")
        let full = try upscale(["street-853x479.mkv", "--width", "426", "--preset", "ultrafast"], in: dir)
        XCTAssertEqual(full.status, 0, full.stderr)
        XCTAssertFalse(full.stderr.contains("cut short"), full.stderr)
        // Complete, but starting 5 s in: Matroska's duration is its last timestamp (7 s), which
        // read as a length from 5 s gave this note (2 s of a promised 7).
        try Remuxer.copy(dir.appendingPathComponent("street-853x479.mkv").path, to: dir.appendingPathComponent("late.mkv").path, delay: 5)
        let late = try upscale(["late.mkv", "--width", "426", "--preset", "ultrafast"], in: dir)
        XCTAssertEqual(late.status, 0, late.stderr)
        XCTAssertFalse(late.stderr.contains("cut short"), late.stderr)
    }

    /// An MPEG-TS recording cut short in the middle of a picture (a recorder stopped by a crash
    /// or a full disk) gives the pictures before it, with a note naming where it ends; it failed
    /// as damaged with nothing written. Damage followed by more pictures still fails the job.
    func testATransportStreamCutMidPictureKeepsWhatIsWhole() throws {
        let dir = try workspace(["street-2s.mp4"])
        let ts = dir.appendingPathComponent("clip.ts").path
        try Remuxer.copy(dir.appendingPathComponent("street-2s.mp4").path, to: ts)
        let whole = try Data(contentsOf: URL(fileURLWithPath: ts))
        let videoPackets = { (path: String) throws -> [PacketRecord] in
            try MediaProbe.packets(path, stream: try XCTUnwrap(MediaProbe.info(path).videoStreamIndex))
        }
        let sizes = Dictionary(try videoPackets(ts).map { ($0.pts, $0.size) }, uniquingKeysWith: { a, _ in a })
        // The first cut from 85% on that ends inside a picture: its last packet is shorter there.
        let cutPath = dir.appendingPathComponent("cut.ts").path
        var read = 0
        for tenth in 850..<950 {
            try whole.prefix(whole.count * tenth / 1000).write(to: URL(fileURLWithPath: cutPath))
            let packets = try videoPackets(cutPath)
            if let last = packets.last, last.size < sizes[last.pts] ?? 0 {
                read = packets.count
                break
            }
        }
        XCTAssertGreaterThan(read, 0, "no cut ends inside a picture")
        let cut = try upscale(["cut.ts", "--width", "256", "--preset", "ultrafast"], in: dir)
        XCTAssertEqual(cut.status, 0, cut.stderr)
        XCTAssertTrue(cut.stderr.contains("'cut.ts' ends in a picture that cannot be decoded, at frame "), cut.stderr)
        let output = dir.appendingPathComponent("cut Upscaled.mov").path
        let written = try MediaProbe.packets(output, stream: try XCTUnwrap(MediaProbe.info(output).videoStreamIndex)).count
        // All but the cut picture; H.264's frame-threaded decoder also loses the picture it was
        // to give out with the damaged one (measured: 15 of 17 packets here).
        XCTAssertTrue((read - 2...read - 1).contains(written), "\(written) pictures written of \(read) packets")
        // The same bytes with a stretch taken out of the middle: damage with pictures after it.
        try (whole.prefix(whole.count * 4 / 10 + 100) + whole.suffix(whole.count * 4 / 10)).write(to: dir.appendingPathComponent("gap.ts"))
        let gap = try upscale(["gap.ts", "--width", "256", "--preset", "ultrafast"], in: dir)
        XCTAssertEqual(gap.status, 1, gap.stderr)
        XCTAssertTrue(gap.stderr.contains("'gap.ts' has undecodable video at frame "), gap.stderr)
        XCTAssertFalse(listing(dir).contains("gap Upscaled.mov"), "\(listing(dir))")
    }

    /// --strip on a video drops its file tags (a phone's location, make, model): they were
    /// kept, with no word, as --strip was for stills only. --quality, which is, says so.
    func testStripDropsAVideosTagsAndStillOptionsSaySo() throws {
        let dir = try workspace(["street-2s.mp4"])
        let keys = ["com.apple.quicktime.location.ISO6709": "+48.8584+002.2945+035.000/", "com.apple.quicktime.model": "iPhone 15 Pro",
                    "title": "Street", "creation_time": "2024-05-06T07:08:09.000000Z"]
        try Remuxer.copy(dir.appendingPathComponent("street-2s.mp4").path, to: dir.appendingPathComponent("phone.mov").path, metadata: keys)
        let kept = try upscale(["phone.mov", "--width", "256", "--preset", "ultrafast", "--output", "kept.mov"], in: dir)
        XCTAssertEqual(kept.status, 0, kept.stderr)
        XCTAssertEqual(try MediaProbe.info(dir.appendingPathComponent("kept.mov").path).tags.filter { keys[$0.key] != nil }.count, keys.count)
        let stripped = try upscale(["phone.mov", "--width", "256", "--preset", "ultrafast", "--strip", "--quality", "50", "--output", "stripped.mov"], in: dir)
        XCTAssertEqual(stripped.status, 0, stripped.stderr)
        XCTAssertTrue(stripped.stderr.contains("--quality applies to still images; 'phone.mov' is a video"), stripped.stderr)
        let info = try MediaProbe.info(dir.appendingPathComponent("stripped.mov").path)
        XCTAssertEqual(info.tags.filter { keys[$0.key] != nil }, [:])
        XCTAssertEqual(info.streams.count, 2)
    }

    /// PQ video read from a named pipe: the HDR10 metadata was read ahead by opening the path a
    /// second time, which blocked for good on a FIFO (and began mid-stream on /dev/stdin: "not
    /// a media file"). It runs, keeps the PQ tags and says what it cannot keep.
    func testPQVideoFromAPipeRunsAndSaysItsMetadataCannotBeReadAhead() throws {
        let dir = try workspace(["street-hdr10.mp4"])
        try stream("street-hdr10.mp4", as: "clip.mkv", in: dir)
        let (process, out, err) = try launch(["pipes/clip.mkv", "--preset", "ultrafast", "--no-refine", "-o", "out.mkv"], in: dir)
        let deadline = Date().addingTimeInterval(60)
        while process.isRunning && Date() < deadline { usleep(50_000) }
        if process.isRunning { process.terminate() }
        _ = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0, stderr)
        XCTAssertTrue(stderr.contains("'pipes/clip.mkv' is PQ video read from a pipe: HDR10 metadata in its pictures cannot be read ahead"), stderr)
        let video = try XCTUnwrap(try MediaProbe.info(dir.appendingPathComponent("out.mkv").path).video)
        XCTAssertEqual([video.colorTransfer, video.colorPrimaries, video.pixelFormat], ["smpte2084", "bt2020", "yuv420p10le"])
    }

    /// An audio track that can be neither copied nor decoded (a codec this FFmpeg does not
    /// know) is left out with a note naming it; it failed the whole job ("no decoder for its
    /// none audio") and nothing was written.
    func testAnUnknownAudioTrackIsLeftOutNotTheJob() throws {
        let dir = try workspace(["street-vp9-vorbis.webm"])
        var bytes = try Data(contentsOf: dir.appendingPathComponent("street-vp9-vorbis.webm"))
        let codecID = try XCTUnwrap(bytes.range(of: Data("A_VORBIS".utf8)))
        bytes.replaceSubrange(codecID, with: Data("A_ZORBIS".utf8))
        try bytes.write(to: dir.appendingPathComponent("odd.mkv"))
        for output in ["odd-out.mkv", "odd-out.mp4"] {
            let result = try upscale(["odd.mkv", "--width", "384", "--preset", "ultrafast", "-o", output], in: dir)
            XCTAssertEqual(result.status, 0, result.stderr)
            let ext = URL(fileURLWithPath: output).pathExtension
            XCTAssertTrue(result.stderr.contains("note: audio stream 1 (an unknown codec) cannot go in .\(ext) and this FFmpeg cannot decode it; not copied"), result.stderr)
            let info = try MediaProbe.info(dir.appendingPathComponent(output).path)
            XCTAssertEqual(info.streams.map(\.kind), [.video], output)
            XCTAssertEqual(try MediaProbe.packets(dir.appendingPathComponent(output).path, stream: 0).count, 15, output)
        }
    }

    /// HDR10+ dynamic metadata that the output cannot keep (H.264, FFV1) is said to be lost
    /// once, in one piece and in chunks; it went without a word. HEVC keeps it picture by
    /// picture in one piece and in chunks (the join copies the SEI with the pictures): nothing
    /// to say. A plain HDR10 clip says nothing of it. The film excerpt has two keyframes, too few
    /// for chunks: it is first upscaled 1.5x in HEVC with a keyframe every 24 pictures, which
    /// keeps its HDR10+ (`testHDR10PlusIsKeptPictureByPictureInHEVC`).
    func testHDR10PlusIsKeptInChunksOrSaidToBeLost() throws {
        let dir = try workspace(["hdr10plus-tos.mkv", "street-hdr10.mp4"])
        var keyed = EncoderSettings(preset: "ultrafast")
        keyed.keyframeInterval = 24
        let source = dir.appendingPathComponent("keyed.mkv").path
        _ = try Transcoder(job: JobPlanner.plan(input: dir.appendingPathComponent("hdr10plus-tos.mkv").path,
                                                options: UpscaleOptions(width: 384, output: source, encoder: keyed))).run()
        let sent = try MediaProbe.pictureHDR10Plus(source)
        XCTAssertEqual(sent.count, 259)
        let note = "note: 'keyed.mkv' carries HDR10+ dynamic metadata; the upscaled video does not (it keeps the static HDR10 metadata) — use --codec hevc to keep it"
        for (codec, output, chunks) in [("h264", "one.mp4", "0"), ("h264", "chunked.mp4", "2"), ("ffv1", "ffv1.mkv", "0")] {
            let preset = codec == "h264" ? ["--preset", "ultrafast"] : []
            let result = try upscale(["keyed.mkv", "--codec", codec, "--no-refine", "--chunk-seconds", chunks, "-o", output] + preset, in: dir)
            XCTAssertEqual(result.status, 0, result.stderr)
            XCTAssertEqual(result.stderr.components(separatedBy: note).count - 1, 1, result.stderr)
            XCTAssertEqual(try MediaProbe.pictureHDR10Plus(dir.appendingPathComponent(output).path).count, 0, output)
        }
        // Picture by picture, every field as FFmpeg reads it from the source.
        func fields(_ pictures: [Int: [UInt8]]) -> [[UInt8]] { pictures.sorted { $0.key < $1.key }.map(\.value) }
        for (output, chunks) in [("hevc.mkv", "2"), ("hevc.mp4", "0")] {
            let result = try upscale(["keyed.mkv", "--preset", "ultrafast", "--no-refine", "--chunk-seconds", chunks, "-o", output], in: dir)
            XCTAssertEqual(result.status, 0, result.stderr)
            XCTAssertFalse(result.stderr.contains("HDR10+"), result.stderr)
            XCTAssertEqual(fields(try MediaProbe.pictureHDR10Plus(dir.appendingPathComponent(output).path)), fields(sent), output)
        }
        let plain = try upscale(["street-hdr10.mp4", "--codec", "h264", "--preset", "ultrafast", "--no-refine", "-o", "plain.mp4"], in: dir)
        XCTAssertEqual(plain.status, 0, plain.stderr)
        XCTAssertFalse(plain.stderr.contains("HDR10+"), plain.stderr)
    }

    /// Closed captions carried inside the pictures (CEA-608 in A/53 user data) that the output
    /// cannot keep (ProRes) are said to be lost once, in one piece and in chunks; they went
    /// without a word. HEVC (the default) and H.264 keep them, in one piece and in chunks
    /// (the join copies the SEI with the pictures): nothing to say.
    func testCaptionsInsideThePicturesAreSaidToBeLost() throws {
        let dir = try workspace(["street-captions.mp4"])
        let note = "note: 'street-captions.mp4' carries closed captions inside its video (CEA-608/708); the upscaled video does not — use --codec hevc or h264 to keep them there"
        for (output, chunks) in [("one.mov", "0"), ("chunked.mov", "1")] {
            let result = try upscale(["street-captions.mp4", "--codec", "prores", "--scale", "1.25", "--no-refine", "--chunk-seconds", chunks, "-o", output], in: dir)
            XCTAssertEqual(result.status, 0, result.stderr)
            XCTAssertEqual(result.stderr.components(separatedBy: note).count - 1, 1, result.stderr)
            XCTAssertEqual(try MediaProbe.packets(dir.appendingPathComponent(output).path, stream: 0).count, 80, output)
        }
        for (codec, output, chunks) in [("hevc", "one.mp4", "0"), ("hevc", "chunked.mp4", "1"), ("h264", "h264.mp4", "0"), ("h264", "h264-chunked.mp4", "1")] {
            let result = try upscale(["street-captions.mp4", "--codec", codec, "--preset", "ultrafast", "--no-refine", "--chunk-seconds", chunks, "-o", output], in: dir)
            XCTAssertEqual(result.status, 0, result.stderr)
            XCTAssertFalse(result.stderr.contains("closed captions"), result.stderr)
            XCTAssertEqual(try MediaProbe.pictureCaptions(dir.appendingPathComponent(output).path).count, 80, output)
        }
        // A clip without them says nothing of them.
        let plain = try upscale(["one.mp4", "--preset", "ultrafast", "--no-refine", "-o", "again.mp4"], in: dir)
        XCTAssertEqual(plain.status, 0, plain.stderr)
        XCTAssertFalse(plain.stderr.contains("closed captions"), plain.stderr)
    }

    /// A clip shorter than x265's B-frame delay (here two 4:4:4 10-bit pictures) got decode times
    /// from memory x265 never set (-1.5e15), and the .mp4/.mov muxer refused them: "writing
    /// failed: Not yet implemented in FFmpeg" in 29 of 30 runs. They are mended.
    func testATwoPictureClipGetsDecodeTimes() throws {
        let dir = try workspace(["street-rgb10.mkv"])
        for name in ["two.mp4", "two.mov"] {
            let run = try upscale(["street-rgb10.mkv", "--preset", "ultrafast", "-o", name], in: dir)
            XCTAssertEqual(run.status, 0, run.stderr)
            let packets = try MediaProbe.packets(dir.appendingPathComponent(name).path, stream: 0)
            XCTAssertEqual(packets.count, 2, name)
            XCTAssertEqual(packets.map(\.dts), packets.map(\.pts), name)
            XCTAssertEqual(packets.first?.pts, 0, name)
            XCTAssertEqual(try MediaProbe.info(dir.appendingPathComponent(name).path).video?.pixelFormat, "yuv444p10le", name)
        }
    }

    /// An MPEG-TS whose first picture's packet has no time (its stream's start is the next
    /// picture's) crashed the job (SIGILL: the encoder's timing subtracted "no time"). The
    /// picture comes a frame before the next, as the ffmpeg command has it; every picture is kept.
    func testAFirstPictureWithNoTimeGetsOne() throws {
        let dir = try workspace(["street-ts-untimed-first.ts"])
        XCTAssertNil(try MediaProbe.packets(dir.appendingPathComponent("street-ts-untimed-first.ts").path, stream: 0).first?.pts)
        for name in ["untimed.mkv", "untimed.mp4"] {
            let run = try upscale(["street-ts-untimed-first.ts", "--scale", "2", "--preset", "ultrafast", "-o", name], in: dir)
            XCTAssertEqual(run.status, 0, run.stderr)
            let packets = try MediaProbe.packets(dir.appendingPathComponent(name).path, stream: 0)
            XCTAssertEqual(packets.count, 10, name)
            let times = packets.compactMap(\.pts).sorted()
            XCTAssertEqual(times.count, 10, name)
            XCTAssertEqual(Set(zip(times, times.dropFirst()).map { $1 - $0 }).count, 1, "evenly spaced: \(times)")
        }
    }

    /// A variable-rate video that opens on a 30 s still: the encoder's first decode times lie
    /// that far before the first picture, rightly. A rule for x265's bad decode times took them
    /// for bad and the .mp4 muxer then wrote the 2nd and 3rd pictures at 1 and 2 ticks.
    func testAVideoOpeningOnALongStillKeepsItsTimes() throws {
        let dir = try workspace(["street-2s.mp4"])
        let source = dir.appendingPathComponent("street-2s.mp4").path
        let first = try XCTUnwrap(try MediaProbe.packets(source, stream: 0).compactMap(\.pts).min())
        let timeBase = try MediaProbe.info(source).streams[0].timeBase
        let still = Int64(30 * timeBase.1 / timeBase.0)
        try Remuxer.copy(source, to: dir.appendingPathComponent("still.mkv").path, retime: { $0 <= first ? $0 : $0 + still })
        let sent = try MediaProbe.packets(dir.appendingPathComponent("still.mkv").path, stream: 0).compactMap(\.pts).sorted()
        for name in ["still.mp4", "still-h264.mp4"] {
            let codec = name == "still.mp4" ? "hevc" : "h264"
            let run = try upscale(["still.mkv", "--width", "384", "--preset", "ultrafast", "--no-refine", "--codec", codec, "-o", name], in: dir)
            XCTAssertEqual(run.status, 0, run.stderr)
            let out = dir.appendingPathComponent(name).path
            let outBase = try MediaProbe.info(out).streams[0].timeBase
            let shown = try MediaProbe.packets(out, stream: 0).compactMap(\.pts).sorted()
            XCTAssertEqual(shown.count, sent.count, name)
            // The same times, in seconds from the first picture (ms resolution).
            func seconds(_ times: [Int64], _ base: (Int, Int)) -> [Int] {
                times.map { Int((Double($0 - times[0]) * Double(base.0) / Double(base.1) * 1000).rounded()) }
            }
            XCTAssertEqual(seconds(shown, outBase), seconds(sent, try MediaProbe.info(dir.appendingPathComponent("still.mkv").path).streams[0].timeBase), name)
        }
    }

    /// HDR10 metadata is written into the container for every codec (Matroska's Colour, the
    /// .mp4/.mov mdcv and clli boxes), as the ffmpeg command does: it was passed to x265 only,
    /// and an H.264, FFV1 or ProRes output had none, with a note sending users to HEVC.
    func testHDR10MetadataIsInTheContainerForEveryCodec() throws {
        let dir = try workspace(["street-hdr10.mp4"])
        let source = try XCTUnwrap(try HDRMetadata.firstFrame(of: dir.appendingPathComponent("street-hdr10.mp4").path))
        XCTAssertTrue(source.hasMasteringDisplay)
        XCTAssertNotNil(source.contentLight)
        for (codec, name) in [("h264", "h264.mp4"), ("ffv1", "ffv1.mkv"), ("prores", "prores.mov"), ("hevc", "hevc.mkv"), ("hevc", "hevc.mp4")] {
            let fast = ["hevc", "h264"].contains(codec) ? ["--preset", "ultrafast"] : []
            let run = try upscale(["street-hdr10.mp4", "--scale", "2", "--codec", codec, "--no-refine", "--output", name] + fast, in: dir)
            XCTAssertEqual(run.status, 0, run.stderr)
            XCTAssertFalse(run.stderr.contains("is HDR10"), run.stderr)
            XCTAssertEqual(try HDRMetadata.container(of: dir.appendingPathComponent(name).path), source, name)
            XCTAssertEqual(try MediaProbe.info(dir.appendingPathComponent(name).path).video?.colorTransfer, "smpte2084", name)
        }
        // x265 also writes it into the bitstream (the first picture's).
        XCTAssertEqual(try HDRMetadata.firstFrame(of: dir.appendingPathComponent("hevc.mkv").path), source)
    }

    /// --verbose shows FFmpeg's own warnings, not the failures of the hardware encoders that
    /// `--encoder auto` tries in turn ("[hevc_nvenc] Cannot load libcuda.so.1", "[hevc_qsv]
    /// Error initializing an internal MFX session" on every run of a machine without them).
    func testVerboseLeavesOutTheHardwareEncodersTriedInTurn() throws {
        let dir = try workspace(["street-2s.mp4"])
        let result = try upscale(["street-2s.mp4", "--width", "256", "--preset", "ultrafast", "--verbose"], in: dir)
        XCTAssertEqual(result.status, 0, result.stderr)
        let tried = result.stderr.split(separator: "\n").filter { line in
            ["[hevc_nvenc", "[hevc_qsv", "[hevc_vaapi"].contains { line.hasPrefix($0) }
        }
        XCTAssertEqual(tried, [], result.stderr)
    }

    /// Standard output read by a program that has gone (`upscale … | head -1`): the run goes on
    /// and writes its file. SIGPIPE killed it at its next line (exit 141), mid-job for a long one.
    func testAClosedOutputPipeDoesNotEndTheRun() throws {
        let dir = try workspace(["street-2s.mp4"])
        let process = Process()
        process.executableURL = Self.binary
        process.arguments = ["street-2s.mp4", "--width", "256", "--preset", "ultrafast"]
        process.currentDirectoryURL = dir
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        try out.fileHandleForReading.close()
        let stderr = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationReason, .exit, stderr)
        XCTAssertEqual(process.terminationStatus, 0, stderr)
        XCTAssertEqual(try Self.probeSize(dir.appendingPathComponent("street-2s Upscaled.mp4")), "256x192")
        // Both gone (`… 2>&1 | head -1`), with a note to write: FileHandle's write stopped the
        // process on the failed write.
        let both = Process()
        both.executableURL = Self.binary
        both.arguments = ["street-2s.mp4", "--width", "256", "--preset", "ultrafast", "--quality", "50", "--output", "noted.mp4"]
        both.currentDirectoryURL = dir
        let pipe = Pipe()
        both.standardOutput = pipe
        both.standardError = pipe
        try both.run()
        try pipe.fileHandleForReading.close()
        both.waitUntilExit()
        XCTAssertEqual(both.terminationReason, .exit)
        XCTAssertEqual(both.terminationStatus, 0)
        XCTAssertEqual(try Self.probeSize(dir.appendingPathComponent("noted.mp4")), "256x192")
    }

    /// A file another program holds open for writing (a recording still being made) gets a
    /// note naming that program: its output holds only what is written so far. It was read
    /// to where the writer had got, with exit 0 and no word.
    func testAFileStillBeingWrittenIsNamedSo() throws {
        let dir = try workspace(["street-2s.mp4"])
        let writer = try FileHandle(forUpdating: dir.appendingPathComponent("street-2s.mp4"))
        let busy = try upscale(["street-2s.mp4", "--width", "256", "--preset", "ultrafast"], in: dir)
        XCTAssertEqual(busy.status, 0, busy.stderr)
        XCTAssertTrue(busy.stderr.contains("'street-2s.mp4' is being written right now by another program ("), busy.stderr)
        XCTAssertTrue(busy.stderr.contains(", pid \(getpid())); the output holds only what is written so far"), busy.stderr)
        try writer.close()
        let done = try upscale(["street-2s.mp4", "--width", "256", "--preset", "ultrafast", "--overwrite"], in: dir)
        XCTAssertEqual(done.status, 0, done.stderr)
        XCTAssertFalse(done.stderr.contains("being written"), done.stderr)
        // An .mp4 being recorded has no index until it stops: that is said, not a repair tool
        // (its mdat written so far, without the moov that comes at the end).
        let data = try Data(contentsOf: dir.appendingPathComponent("street-2s.mp4"))
        let moov = try XCTUnwrap(data.range(of: Data("moov".utf8)))
        let recording = dir.appendingPathComponent("recording.mp4")
        try data.prefix(moov.lowerBound - 4).write(to: recording)
        let recorder = try FileHandle(forUpdating: recording)
        defer { try? recorder.close() }
        let early = try upscale(["recording.mp4", "--width", "256"], in: dir)
        XCTAssertEqual(early.status, 1, early.stderr)
        XCTAssertTrue(early.stderr.contains("error: 'recording.mp4' has no index (no moov box) yet: "), early.stderr)
        XCTAssertTrue(early.stderr.contains("(pid \(getpid())) is still writing it, and an .mp4/.mov gets its index when the recording stops; run it again then"), early.stderr)
        XCTAssertFalse(early.stderr.contains("untrunc"), early.stderr)
    }

    /// `--output=~/x.mp4`, where the shell leaves `~` as it is, is the home folder's x.mp4. The
    /// job ran to its end and failed at the last step ("cannot move the finished file to
    /// '~/x.mp4'"), its work thrown away.
    func testATildeInTheOutputIsTheHomeFolder() throws {
        let dir = try workspace(["street-2s.mp4"])
        let home = dir.appendingPathComponent("home")
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        let (process, out, err) = try launch(["street-2s.mp4", "--width", "256", "--preset", "ultrafast", "--output=~/x.mp4"], in: dir,
                                             environment: ["HOME": home.path])
        _ = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0, stderr)
        XCTAssertEqual(listing(home), ["x.mp4"])
        XCTAssertEqual(try Self.probeSize(home.appendingPathComponent("x.mp4")), "256x192")
    }

    /// Ctrl-C during the second file of a batch: the first file's output is kept, and the last
    /// line says so ("cancelled; no output was written" was said under its "Wrote" line, also
    /// when the stop came after the last job had finished).
    func testCtrlCInABatchSaysWhatWasWritten() throws {
        let dir = try workspace(["street-2s.mp4", "chunk-h264-bframes.mp4"])
        let (process, out, err) = try launch(["chunk-h264-bframes.mp4", "street-2s.mp4", "--no-refine", "--preset", "ultrafast", "--chunk-seconds", "0"], in: dir)
        let first = dir.appendingPathComponent("chunk-h264-bframes Upscaled.mp4")
        let deadline = Date().addingTimeInterval(120)
        while !FileManager.default.fileExists(atPath: first.path) && Date() < deadline && process.isRunning { usleep(20_000) }
        usleep(300_000)
        kill(process.processIdentifier, SIGINT)
        let stdout = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let stderr = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 130, stderr)
        XCTAssertTrue(stdout.contains("Wrote"), stdout)
        XCTAssertTrue(stderr.hasSuffix("error: cancelled; the output written before it is complete\n"), stderr)
        XCTAssertEqual(listing(dir), ["chunk-h264-bframes Upscaled.mp4", "chunk-h264-bframes.mp4", "street-2s.mp4"])
    }

    /// Captions with no end (2^32-1 ms, as FFmpeg's dvdsub encoder leaves them) failed the whole
    /// job into .mp4/.mov ("writing failed: Invalid argument": the muxer takes no duration over
    /// 2^31-1), and chunked the same at every rerun; the file's length, stretched to 50 days by
    /// them, also gave a disk-space note of thousands of GB. Each caption now lasts until the
    /// next, the last until the video ends, and a note says so; .mkv keeps them as they are.
    func testCaptionsWithNoEndLastUntilTheNextOne() throws {
        let dir = try workspace(["street-subs.mkv", "chunk-h264-bframes.mp4"])
        let noEnd: Int64 = 4_294_967_295
        try Remuxer.copy(dir.appendingPathComponent("street-subs.mkv").path, to: dir.appendingPathComponent("noend.mkv").path, durations: [2: noEnd])
        XCTAssertEqual(try MediaProbe.packets(dir.appendingPathComponent("noend.mkv").path, stream: 2).map(\.duration), [noEnd, noEnd])
        XCTAssertEqual(try MediaProbe.info(dir.appendingPathComponent("noend.mkv").path).duration, 2.023, accuracy: 0.05)
        // The same captions beside a 6 s video with a keyframe every second, in 1 s chunks (joined
        // by `ChunkJoin`); its subtitle stream is input stream 4 (the second file's video is left out).
        try Remuxer.copy(dir.appendingPathComponent("chunk-h264-bframes.mp4").path, to: dir.appendingPathComponent("long.mkv").path,
                         adding: [dir.appendingPathComponent("street-subs.mkv").path], durations: [4: noEnd])
        for (input, name, chunk, stream) in [("noend.mkv", "noend.mp4", "0", 2), ("long.mkv", "long.mov", "1", 3)] {
            let sent = try MediaProbe.packets(dir.appendingPathComponent(input).path, stream: stream == 2 ? 2 : 4).compactMap(\.pts)
            let run = try upscale([input, "-o", name, "--width", "384", "--preset", "ultrafast", "--no-refine", "--chunk-seconds", chunk], in: dir)
            XCTAssertEqual(run.status, 0, run.stderr)
            XCTAssertTrue(run.stderr.contains("2 captions of output stream \(stream) (mov_text) had no duration"), run.stderr)
            XCTAssertFalse(run.stderr.contains("may need up to"), run.stderr)
            // The text samples (the muxer adds empty ones between captions), in ms: the first until
            // the second, the second until the video's end.
            let out = dir.appendingPathComponent(name).path
            let captions = try MediaProbe.packets(out, stream: stream).filter { $0.size > 2 }
            XCTAssertEqual(captions.map(\.pts), sent, name)
            let timeBase = try MediaProbe.info(out).streams[0].timeBase
            let videoEnd = try MediaProbe.packets(out, stream: 0).map { ($0.pts! + $0.duration) * Int64(timeBase.0) * 1000 / Int64(timeBase.1) }.max()!
            XCTAssertEqual(captions.map(\.duration), [sent[1] - sent[0], videoEnd - sent[1]], name)
            XCTAssertGreaterThan(videoEnd, 2000)
        }
    }

    /// DVD bitmap subtitles as FFmpeg's dvdsub encoder writes them (no end: 2^32-1 ms): copied
    /// into .mp4 with the caption lasting until the video ends (the job failed), into .mkv as they
    /// are; .mov cannot hold them, and the note names both containers that can (it said .mkv).
    func testDVDSubtitlesWithNoEndAreCopied() throws {
        let dir = try workspace(["street-dvdsub.mkv"])
        let sent = try XCTUnwrap(try MediaProbe.packets(dir.appendingPathComponent("street-dvdsub.mkv").path, stream: 2).first)
        XCTAssertEqual(sent.duration, 4_294_967_295)
        for name in ["dvd.mp4", "dvd.mkv", "dvd.mov"] {
            let run = try upscale(["street-dvdsub.mkv", "-o", name, "--width", "384", "--preset", "ultrafast", "--no-refine"], in: dir)
            XCTAssertEqual(run.status, 0, run.stderr)
            let out = dir.appendingPathComponent(name).path
            let subtitles = try MediaProbe.info(out).streams.filter { $0.kind == .subtitle }
            if name == "dvd.mov" {
                XCTAssertEqual(subtitles.count, 0)
                XCTAssertTrue(run.stderr.contains("subtitle stream 2 (dvd_subtitle) cannot go in .mov; not copied (use .mp4 or .mkv to keep it)"), run.stderr)
                continue
            }
            XCTAssertEqual(subtitles.map(\.codec), ["dvd_subtitle"], name)
            let caption = try XCTUnwrap(try MediaProbe.packets(out, stream: 2).first, name)
            XCTAssertEqual(caption.checksum, sent.checksum, name)
            XCTAssertEqual(run.stderr.contains("1 caption of output stream 2 (dvd_subtitle) had no duration .mp4 can record"), name == "dvd.mp4", run.stderr)
            if name == "dvd.mkv" {
                XCTAssertEqual(caption.duration, sent.duration)
            } else {
                // Until the video's end (2.0 s, ms time base), from where the caption starts.
                let timeBase = try MediaProbe.info(out).streams[2].timeBase
                XCTAssertEqual(timeBase.1 / timeBase.0, 1000)
                XCTAssertEqual(caption.duration + (caption.pts ?? 0), 2023, accuracy: 25)
            }
        }
    }

    /// A .mov output keeps a German track's language: FFmpeg's .mov muxer knows "ger", not
    /// "deu", and wrote none. A file with chapters (a QuickTime chapter track, which FFmpeg
    /// reads as a data stream) no longer gets "data stream (bin_data) is not copied": its
    /// chapters are copied.
    func testMOVKeepsLanguagesAndChaptersAreNotCalledALostStream() throws {
        let dir = try workspace(["street-subs.mkv"])
        let german = dir.appendingPathComponent("german.mkv").path
        try Remuxer.copy(dir.appendingPathComponent("street-subs.mkv").path, to: german, languages: [1: "deu", 2: "fre"])
        let mp4 = try upscale(["german.mkv", "-o", "chapters.mp4", "--width", "384", "--preset", "ultrafast", "--no-refine"], in: dir)
        XCTAssertEqual(mp4.status, 0, mp4.stderr)
        XCTAssertEqual(try MediaProbe.info(dir.appendingPathComponent("chapters.mp4").path).chapters.count, 2)
        let mov = try upscale(["chapters.mp4", "-o", "german.mov", "--width", "384", "--preset", "ultrafast", "--no-refine"], in: dir)
        XCTAssertEqual(mov.status, 0, mov.stderr)
        XCTAssertFalse(mov.stderr.contains("is not copied"), mov.stderr)
        let info = try MediaProbe.info(dir.appendingPathComponent("german.mov").path)
        XCTAssertEqual(info.streams.filter { $0.kind == .audio || $0.kind == .subtitle }.map(\.language), ["ger", "fra"])
        XCTAssertEqual(info.chapters.count, 2)
        // Swedish ("swe") is "sve" in the muxer's table; Croatian has no code there, and is said
        // to be left out (both were dropped without a word).
        try Remuxer.copy(dir.appendingPathComponent("street-subs.mkv").path, to: dir.appendingPathComponent("nordic.mkv").path, languages: [1: "swe", 2: "hrv"])
        let nordic = try upscale(["nordic.mkv", "-o", "nordic.mov", "--width", "384", "--preset", "ultrafast", "--no-refine"], in: dir)
        XCTAssertEqual(nordic.status, 0, nordic.stderr)
        XCTAssertTrue(nordic.stderr.contains("the language 'hrv' of output stream 2 cannot be recorded in .mov"), nordic.stderr)
        XCTAssertFalse(nordic.stderr.contains("'swe'"), nordic.stderr)
        let languages = try MediaProbe.info(dir.appendingPathComponent("nordic.mov").path).streams.filter { $0.kind == .audio || $0.kind == .subtitle }.map(\.language)
        XCTAssertEqual(languages.first, "sve")
        // A track's title ("Commentary") is kept: .mov and .mp4 get a 'name' box (which FFmpeg
        // 5.1's demuxer does not read back), .mkv its title tag. No note says otherwise (one said
        // .mov could not hold it).
        try Remuxer.copy(dir.appendingPathComponent("street-subs.mkv").path, to: dir.appendingPathComponent("titled.mkv").path,
                         streamTags: [1: ["title": "Commentary"]])
        for ext in ["mov", "mp4", "mkv"] {
            let titled = try upscale(["titled.mkv", "-o", "titled-out.\(ext)", "--width", "384", "--preset", "ultrafast", "--no-refine"], in: dir)
            XCTAssertEqual(titled.status, 0, titled.stderr)
            XCTAssertFalse(titled.stderr.contains("Commentary"), titled.stderr)
            if ext != "mkv" {
                let box = try Data(contentsOf: dir.appendingPathComponent("titled-out.\(ext)"))
                XCTAssertNotNil(box.range(of: Data("nameCommentary".utf8)), "the .\(ext) has the title in a 'name' box")
            }
        }
        XCTAssertEqual(try MediaProbe.info(dir.appendingPathComponent("titled-out.mkv").path).streams[1].tags["title"], "Commentary")
        // Track flags: .mov keeps none but "default", .mp4 all but "original"; each loss is said
        // (they were dropped without a word); .mkv keeps them all.
        try Remuxer.copy(dir.appendingPathComponent("street-subs.mkv").path, to: dir.appendingPathComponent("flagged.mkv").path,
                         dispositions: [1: AV_DISPOSITION_COMMENT | AV_DISPOSITION_ORIGINAL, 2: AV_DISPOSITION_FORCED])
        for ext in ["mov", "mp4", "mkv"] {
            let flagged = try upscale(["flagged.mkv", "-o", "flagged-out.\(ext)", "--width", "384", "--preset", "ultrafast", "--no-refine"], in: dir)
            XCTAssertEqual(flagged.status, 0, flagged.stderr)
            let notes = flagged.stderr.split(separator: "\n").filter { $0.contains("cannot be recorded in .\(ext)") && $0.contains("flag") }
            switch ext {
            case "mov": XCTAssertEqual(notes.count, 2, flagged.stderr)
                XCTAssertTrue(notes.contains { $0.contains("flags 'commentary', 'original' of output stream 1") }, flagged.stderr)
                XCTAssertTrue(notes.contains { $0.contains("flag 'forced' of output stream 2") }, flagged.stderr)
            case "mp4": XCTAssertEqual(notes.count, 1, flagged.stderr)
                XCTAssertTrue(notes.contains { $0.contains("flag 'original' of output stream 1") }, flagged.stderr)
            default: XCTAssertEqual(notes.count, 0, flagged.stderr)
            }
            let streams = try MediaProbe.info(dir.appendingPathComponent("flagged-out.\(ext)").path).streams
            let kept = { (index: Int, flag: Int32) in streams[index].disposition & flag != 0 }
            XCTAssertEqual([kept(1, AV_DISPOSITION_COMMENT), kept(1, AV_DISPOSITION_ORIGINAL), kept(2, AV_DISPOSITION_FORCED)],
                           ext == "mov" ? [false, false, false] : ext == "mp4" ? [true, false, true] : [true, true, true], ext)
        }
    }

    /// A 4:4:4 10-bit master into ProRes (written as 422 at 10 bits) is told what it loses; it
    /// was not. An 8-bit 4:4:4 source, made 4:2:0 whatever the codec, is told so once, without
    /// the advice to use FFV1 (which wrote 4:2:0 for it too).
    func testProResSaysWhatA444SourceLoses() throws {
        let dir = try workspace(["street-444p10.mp4", "street-853x479.mkv"])
        let result = try upscale(["street-444p10.mp4", "--codec", "prores", "--width", "256", "--no-refine"], in: dir)
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.stderr.contains("is full colour resolution (4:4:4 or RGB); --codec prores writes ProRes 422 at 10 bits (--codec ffv1 keeps full colour resolution)"), result.stderr)
        let eight = try upscale(["street-853x479.mkv", "--codec", "prores", "--width", "1280", "--no-refine"], in: dir)
        XCTAssertEqual(eight.status, 0, eight.stderr)
        XCTAssertTrue(eight.stderr.contains("is 8-bit with full colour resolution (4:4:4, 4:2:2 or RGB); the output is 4:2:0"), eight.stderr)
        XCTAssertFalse(eight.stderr.contains("--codec ffv1"), eight.stderr)
    }

    /// HLG given only in the pictures (an alternative transfer SEI under SDR BT.2020 headers) is
    /// tagged HLG in chunks too (it was tagged SDR BT.2020).
    func testHLGGivenInThePicturesIsTaggedHLGInChunks() throws {
        let dir = try workspace(["street-hlg-atc.mp4"])
        let result = try upscale(["street-hlg-atc.mp4", "--preset", "ultrafast", "--chunk-seconds", "0.2", "-o", "out.mp4"], in: dir)
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(try MediaProbe.info(dir.appendingPathComponent("out.mp4").path).video?.colorTransfer, "arib-std-b67")
    }

    /// A device is not a file being written: `upscale /dev/null` said it was being written right
    /// now by another program (whichever had it open), then gave its error.
    func testADeviceIsNotCalledBeingWritten() throws {
        let dir = try workspace([])
        let holder = try FileHandle(forWritingTo: URL(fileURLWithPath: "/dev/null")) // open for writing, as shells keep it
        defer { try? holder.close() }
        let result = try upscale(["/dev/null"], in: dir)
        XCTAssertEqual(result.status, 1, result.stderr)
        XCTAssertFalse(result.stderr.contains("being written"), result.stderr)
        XCTAssertEqual(result.stderr.split(separator: "\n").count, 1, result.stderr)
    }

    /// 8-bit 4:4:4 input becomes 4:2:0: said in a note (screen recordings and animation lost
    /// half their colour resolution with no word). 4:2:0 input gets no such note.
    func testEightBitFullChromaInputIsSaidToBeHalved() throws {
        let dir = try workspace(["street-853x479.mkv", "street-2s.mp4"])
        let full = try upscale(["street-853x479.mkv", "--width", "256", "--preset", "ultrafast", "--no-refine"], in: dir)
        XCTAssertEqual(full.status, 0, full.stderr)
        XCTAssertTrue(full.stderr.contains("'street-853x479.mkv' is 8-bit with full colour resolution (4:4:4, 4:2:2 or RGB); the output is 4:2:0"), full.stderr)
        let plain = try upscale(["street-2s.mp4", "--width", "256", "--preset", "ultrafast", "--no-refine"], in: dir)
        XCTAssertEqual(plain.status, 0, plain.stderr)
        XCTAssertFalse(plain.stderr.contains("full colour resolution"), plain.stderr)
    }

    /// `worker --jobs` had no bounds: 100000 hung for good, deaf to SIGTERM; 0 and -1 were taken.
    func testWorkerJobsAreBounded() throws {
        for jobs in ["0", "-1", "100000"] {
            let run = try DamageRun.run(CLITests.binary.path, ["worker", "--jobs", jobs, "--queue", "postgres://nobody@127.0.0.1:1/farm"], timeout: 30)
            XCTAssertEqual(run.status, 2, jobs + ": " + run.stderr)
            XCTAssertTrue(run.stderr.contains("--jobs must be between 1 and 64"), run.stderr)
        }
    }

    /// A name that is not UTF-8 ("café" in Latin-1) was said not to exist: its byte became
    /// U+FFFD in a Swift string. Now one line names it, with that byte, and says what to do.
    func testANameThatIsNotUTF8IsNamedSo() throws {
        let dir = try workspace(["street-hlg.mp4"])
        let run = try DamageRun.run("/bin/sh", ["-c", "cd \"$1\" && mv street-hlg.mp4 \"$(printf 'caf\\351.mp4')\" && exec \"$0\" \"$(printf 'caf\\351.mp4')\" --preset ultrafast",
                                                CLITests.binary.path, dir.path], timeout: 60)
        XCTAssertEqual(run.status, 2, run.stderr)
        XCTAssertEqual(run.stderr, "error: 'caf\\xE9.mp4' is not a UTF-8 name, which upscale cannot open; rename it (for Latin-1 names: convmv -f latin1 -t utf8 --notest NAME) and run again\n")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir.path).count, 1, "nothing written")
    }

    /// A file named "-….mp4" given as it is: argument-parser reads it as short options, and
    /// "-dash.mp4" printed the help (its "h") and exited 0. Now one line says how to name it.
    func testAFileNamedLikeAnOptionIsNamedSo() throws {
        let dir = try workspace(["street-hlg.mp4"])
        try FileManager.default.moveItem(at: dir.appendingPathComponent("street-hlg.mp4"), to: dir.appendingPathComponent("-dash.mp4"))
        let bare = try upscale(["-dash.mp4", "--preset", "ultrafast"], in: dir)
        XCTAssertEqual(bare.status, 2, bare.stderr)
        XCTAssertEqual(bare.stderr, "error: '-dash.mp4' is read as options; to upscale that file write ./-dash.mp4 (or put -- before it)\n")
        XCTAssertEqual(listing(dir), ["-dash.mp4"])
        let dotted = try upscale(["./-dash.mp4", "--preset", "ultrafast", "-q"], in: dir)
        XCTAssertEqual(dotted.status, 0, dotted.stderr)
        let separated = try upscale(["--preset", "ultrafast", "-q", "--overwrite", "--", "-dash.mp4"], in: dir)
        XCTAssertEqual(separated.status, 0, separated.stderr)
        XCTAssertEqual(listing(dir), ["-dash Upscaled.mp4", "-dash.mp4"])
        // After every option that takes no value, as argument-parser lists them: a flag it
        // declares is never mistaken for one that takes the file as its value.
        let dump = try upscale(["--experimental-dump-help"], in: dir)
        let command = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(dump.stdout.utf8)) as? [String: Any])["command"] as? [String: Any]
        var flags: [String] = []
        for argument in try XCTUnwrap(command?["arguments"] as? [[String: Any]]) where argument["kind"] as? String == "flag" {
            for name in argument["names"] as? [[String: Any]] ?? [] {
                flags.append((name["kind"] as? String == "short" ? "-" : "--") + (name["name"] as? String ?? ""))
            }
        }
        XCTAssertTrue(flags.contains("--overwrite") && flags.contains("-q") && flags.contains("--no-refine"), "\(flags)")
        for flag in flags {
            let after = try upscale([flag, "-dash.mp4", "--preset", "ultrafast"], in: dir)
            XCTAssertEqual(after.status, 2, flag + ": " + after.stderr)
            XCTAssertTrue(after.stderr.hasPrefix("error: '-dash.mp4' is read as options;"), flag + ": " + after.stderr)
        }
    }

    /// The summary names the size as shown (what --width speaks of), and the stored size beside
    /// it for a phone clip stored sideways (it gave the stored size alone).
    func testSummaryGivesTheShownSizeOfARotatedClip() throws {
        let dir = try workspace(["street-hlg.mp4"])
        try Remuxer.copy(dir.appendingPathComponent("street-hlg.mp4").path, to: dir.appendingPathComponent("phone.mov").path, rotation: 90)
        let result = try upscale(["phone.mov", "--width", "288", "--preset", "ultrafast"], in: dir)
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.stdout.contains("(288x384 as shown, stored 384x288, "), result.stdout)
        // Into .mkv, which cannot record the turn, it plays as stored: that is the size given
        // (it gave the turned size "as shown", which the file does not show).
        let mkv = try upscale(["phone.mov", "--width", "288", "--preset", "ultrafast", "--output", "phone.mkv"], in: dir)
        XCTAssertEqual(mkv.status, 0, mkv.stderr)
        XCTAssertTrue(mkv.stdout.contains("phone.mkv (384x288, "), mkv.stdout)
        let plain = try upscale(["street-hlg.mp4", "--width", "384", "--preset", "ultrafast"], in: dir)
        XCTAssertTrue(plain.stdout.contains("Upscaled.mp4 (384x288, "), plain.stdout)
    }

    /// An input whose output name (with upscale's temporary name around it) would pass the
    /// 255 bytes a file name may have: one line about the name (it said "cannot write in
    /// '<folder>': File name too long; pick another --output folder"); --output a shorter one works.
    func testAnOutputNameTooLongIsNamedSo() throws {
        let dir = try workspace(["street-hlg.mp4"])
        let stem = String(repeating: "a", count: PartialFile.longestName - " Upscaled.mp4".utf8.count + 1)
        try FileManager.default.moveItem(at: dir.appendingPathComponent("street-hlg.mp4"), to: dir.appendingPathComponent(stem + ".mp4"))
        let long = try upscale([stem + ".mp4", "--preset", "ultrafast"], in: dir)
        XCTAssertEqual(long.status, 2, long.stderr)
        XCTAssertTrue(long.stderr.contains(" Upscaled.mp4' is too long (\(PartialFile.longestName + 1) bytes"), long.stderr)
        let short = try upscale([stem + ".mp4", "--preset", "ultrafast", "-q", "--output", "short.mp4"], in: dir)
        XCTAssertEqual(short.status, 0, short.stderr)
        XCTAssertEqual(listing(dir), [stem + ".mp4", "short.mp4"])
    }

    func testUsageErrorsExitTwo() throws {
        let dir = try workspace(["street-2s.mp4"])
        for arguments in [["street-2s.mp4", "--width", "8"], ["street-2s.mp4", "--scale", "2", "--width", "640"],
                          ["street-2s.mp4", "--codec", "vp9"], [], ["street-2s.mp4", "--crf", "99"]] {
            let result = try upscale(arguments, in: dir)
            XCTAssertEqual(result.status, 2, "\(arguments): \(result.stderr)")
        }
        // A preset name neither x264 nor x265 has: refused before any work (libx265 took it and
        // failed to open, exit 1).
        let preset = try upscale(["street-2s.mp4", "--preset", "warp"], in: dir)
        XCTAssertEqual(preset.status, 2, preset.stderr)
        XCTAssertTrue(preset.stderr.contains("--preset must be one of ultrafast, superfast"), preset.stderr)
        // A negative number is a value, out of range: said so (it was "Missing value for '--crf'").
        for (option, value) in [("--crf", "-1"), ("--scale", "-2"), ("--width", "-640"), ("--chunk-seconds", "-1")] {
            let negative = try upscale(["street-2s.mp4", option, value], in: dir)
            XCTAssertEqual(negative.status, 2, negative.stderr)
            XCTAssertTrue(negative.stderr.hasPrefix("Error: \(option) must be "), negative.stderr)
        }
        let tooWide = try upscale(["street-2s.mp4", "--width", "10240", "--codec", "hevc"], in: dir)
        XCTAssertEqual(tooWide.status, 2)
        XCTAssertTrue(tooWide.stderr.contains("--codec prores"), tooWide.stderr)
        XCTAssertEqual(listing(dir), ["street-2s.mp4"])
    }

    func testInterruptRemovesTemporaryFileAndExits130() throws {
        let dir = try workspace(["street-2s.mp4"])
        let (process, out, _) = try launch(["street-2s.mp4", "--scale", "3", "--preset", "slow"], in: dir)
        // Wait until the job is running (the temporary file exists), then interrupt it.
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline && !listing(dir).contains(where: { $0.hasSuffix(".partial") }) {
            Thread.sleep(forTimeInterval: 0.05)
        }
        XCTAssertTrue(listing(dir).contains { $0.hasSuffix(".partial") }, "job never started: \(listing(dir))")
        Thread.sleep(forTimeInterval: 0.5)
        kill(process.processIdentifier, SIGINT)
        _ = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 130)
        XCTAssertEqual(listing(dir), ["street-2s.mp4"])
    }

    /// A Ctrl-C while x265 is deep in its work (here the flush of a veryslow encode, whose
    /// look-ahead decides all 20 pictures at once) ends the job within about a second: the
    /// job sees a stop only between the encoder's pictures, and a 3x veryslow picture takes
    /// seconds. Ended at once after the grace second, as a second Ctrl-C would end it.
    func testAnInterruptEndsAJobStuckInTheEncoderWithinAboutASecond() throws {
        let dir = try workspace(["street-2s.mp4"])
        let (process, _, err) = try launch(["street-2s.mp4", "--scale", "3", "--no-refine", "--preset", "veryslow"], in: dir)
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline && !listing(dir).contains(where: { $0.hasSuffix(".partial") }) {
            Thread.sleep(forTimeInterval: 0.05)
        }
        XCTAssertTrue(listing(dir).contains { $0.hasSuffix(".partial") }, "job never started: \(listing(dir))")
        // All 20 pictures are scaled within about 2 s here (debug build); then the flush.
        Thread.sleep(forTimeInterval: 4)
        let sent = Date()
        kill(process.processIdentifier, SIGINT)
        let text = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        let took = Date().timeIntervalSince(sent)
        print("interrupt to exit: \(String(format: "%.2f", took)) s")
        XCTAssertEqual(process.terminationStatus, 130, text)
        XCTAssertLessThan(took, 3, text)
        // Ended after the grace second, the parent names the file; a job that was already past
        // the look-ahead (a picture out every second or so: one CI run on a fresh clone got
        // there first) stops by itself at the next picture and says nothing was written.
        let named = "error: cancelled; '\(dir.appendingPathComponent("street-2s Upscaled.mp4").path)' was not written\n"
        XCTAssertTrue(text.hasSuffix(named) || text.hasSuffix("error: cancelled; no output was written\n"), text)
        XCTAssertEqual(listing(dir), ["street-2s.mp4"])
    }

    /// street-2s.mp4 in `dir` upscaled 3x (slow), once its job writes its temporary file, with
    /// the parent's child processes then.
    private func launchUntilWriting(_ dir: URL) throws -> (Process, Pipe, Pipe, [pid_t]) {
        let (process, out, err) = try launch(["street-2s.mp4", "--scale", "3", "--preset", "slow"], in: dir)
        let parent = process.processIdentifier
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline && !listing(dir).contains(where: { $0.hasSuffix(".partial") }) {
            Thread.sleep(forTimeInterval: 0.05)
        }
        XCTAssertTrue(listing(dir).contains { $0.hasSuffix(".partial") }, "job never started: \(listing(dir))")
        let children = (try? String(contentsOfFile: "/proc/\(parent)/task/\(parent)/children", encoding: .utf8)) ?? ""
        return (process, out, err, children.split(separator: " ").compactMap { pid_t($0) })
    }

    /// A job ended by a signal from outside (SIGHUP to the job alone, as a closed terminal may
    /// send) is said to be stopped, not a crash blamed on a damaged file.
    func testAJobStoppedFromOutsideIsNotCalledACrash() throws {
        let dir = try workspace(["street-2s.mp4"])
        let (process, _, err, children) = try launchUntilWriting(dir)
        kill(try XCTUnwrap(children.first), SIGHUP)
        let text = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 1, text)
        XCTAssertTrue(text.contains("'street-2s.mp4': the job was stopped from outside (SIGHUP)"), text)
        XCTAssertFalse(text.contains("damaged"), text)
        XCTAssertEqual(listing(dir), ["street-2s.mp4"])
    }

    /// A second Ctrl-C exits at once, and with the job: its process is ended and its temporary
    /// file removed before the prompt is back. The parent left before, while the job went on
    /// cleaning up (measured: 0.1 to 0.3 s at 1280x960, its file still there meanwhile).
    func testASecondInterruptEndsTheJobBeforeExiting() throws {
        let dir = try workspace(["street-2s.mp4"])
        let (process, _, err, children) = try launchUntilWriting(dir)
        let parent = process.processIdentifier
        let child = try XCTUnwrap(children.first)
        // Into the encode; then Ctrl-C and a SIGTERM just after it (two of one kind so close
        // together are taken as one), before the job can have stopped on its own.
        Thread.sleep(forTimeInterval: 0.5)
        kill(parent, SIGINT)
        Thread.sleep(forTimeInterval: 0.005)
        kill(parent, SIGTERM)
        // Gone, or a zombie nobody has reaped yet: not running. (Foundation's Process sees its
        // end only when every process holding its descriptors has ended, the job included.)
        let running = { (pid: pid_t) -> Bool in
            let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
            let state = stat.lastIndex(of: ")").map { stat[stat.index(after: $0)...].trimmingCharacters(in: .whitespaces).prefix(1) } ?? ""
            return state != "" && state != "Z"
        }
        let exited = Date().addingTimeInterval(30)
        while Date() < exited && running(parent) { Thread.sleep(forTimeInterval: 0.001) }
        XCTAssertFalse(running(child), "the job still runs")
        XCTAssertEqual(listing(dir), ["street-2s.mp4"])
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 130)
        // It names what was not written.
        let text = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        XCTAssertTrue(text.hasSuffix("error: cancelled; '\(dir.appendingPathComponent("street-2s Upscaled.mp4").path)' was not written\n"), text)
    }

    /// The first file runs in a copy of the command forked at start (no second exec): one
    /// child, with the parent's own command line, in a process group of its own (a terminal's
    /// Ctrl-C reaches only the parent, which forwards it). Killing the parent with SIGKILL
    /// stops the child, which removes its temporary file.
    func testFirstFileRunsInAForkedCopyThatStopsWithItsParent() throws {
        let dir = try workspace(["street-2s.mp4"])
        let (process, _, _, pids) = try launchUntilWriting(dir)
        let parent = process.processIdentifier
        XCTAssertEqual(pids.count, 1, "children: \(pids)")
        let child = try XCTUnwrap(pids.first)
        let commandLine = { (pid: pid_t) in try? Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/cmdline")) }
        XCTAssertEqual(commandLine(child), commandLine(parent), "the child was started again rather than forked")
        XCTAssertNotEqual(getpgid(child), getpgid(parent))
        // Every thread of the running job (x265's, the scaler's, the decoder's) is batch work.
        let threads = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(child)/task")) ?? []).compactMap { pid_t($0) }
        XCTAssertGreaterThan(threads.count, 2)
        let policies = threads.map { sched_getscheduler($0) }.filter { $0 >= 0 }
        let batch: Int32 = 3 // SCHED_BATCH (linux/sched.h), not imported into Swift
        XCTAssertEqual(Set(policies), [batch], "scheduling policies of the job's threads")
        kill(parent, SIGKILL)
        process.waitUntilExit()
        // Running (or stopping) rather than gone or a zombie nobody has reaped yet.
        let running = { () -> Bool in
            guard let stat = try? String(contentsOfFile: "/proc/\(child)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { return false }
            return !stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).hasPrefix("Z")
        }
        let gone = Date().addingTimeInterval(20)
        while Date() < gone && running() { Thread.sleep(forTimeInterval: 0.05) }
        XCTAssertFalse(running(), "the child outlived its parent")
        XCTAssertEqual(listing(dir), ["street-2s.mp4"])
    }

    static func probeSize(_ url: URL) throws -> String {
        let video = try XCTUnwrap(try MediaProbe.info(url.path).video)
        return "\(video.width)x\(video.height)"
    }
}
