import CFFmpeg
import Foundation
import UpscaleCore
@testable import UpscaleMedia
import XCTest

/// The first picture decoded while the plan probes (`HeadStart`) must never change a frame:
/// continuing from it gives what decoding from the start gives, and any doubt falls back.
final class HeadStartTests: XCTestCase {
    override func setUpWithError() throws {
        try XCTSkipIf(ProcessInfo.processInfo.activeProcessorCount < 2, "head starts only run with a second core")
    }

    /// H.264 whose container gives the probed reorder depth (2), H.264 whose container gives
    /// less than the probe (1 vs 2: the bench's pans are such files), and 10-bit 4:4:4 HEVC.
    func testATranscodeContinuingFromItsHeadStartGivesTheFramesOfOneDecodingFromTheStart() throws {
        for name in ["street-2s.mp4", "damage/h264-aac.mp4", "street-444p10.mp4"] {
            let dir = try workspace()
            let input = dir.appendingPathComponent(URL(fileURLWithPath: name).lastPathComponent).path
            try FileManager.default.copyItem(atPath: Fixtures.path(name), toPath: input)
            var outputs: [String] = []
            for keepProbe in [true, false] {
                let output = dir.appendingPathComponent(keepProbe ? "continued.mkv" : "from-start.mkv").path
                let options = UpscaleOptions(scale: 2, output: output, encoder: EncoderSettings(codec: .ffv1), refine: true)
                let before = HeadStart.adopted
                let job = try JobPlanner.plan(input: input, options: options, keepProbe: keepProbe)
                _ = try Transcoder(job: job).run()
                // Only a plan that keeps its probe for the transcoder begins a head start.
                XCTAssertEqual(HeadStart.adopted - before, keepProbe ? 1 : 0, "\(name): continued from the head start")
                outputs.append(output)
            }
            try assertSameFrames(outputs[0], outputs[1], name)
        }
    }

    func testADecoderContinuesFromItsHeadStartOnlyWhenTheFileGivesTheSamePackets() throws {
        let path = Fixtures.path("street-2s.mp4")
        let reference = try decode(path, headStart: false)
        XCTAssertEqual(reference.count, 20)
        var before = HeadStart.adopted
        assertSame(try decode(path, headStart: true), reference, "the same packets")
        XCTAssertEqual(HeadStart.adopted - before, 1, "continued from the head start")

        // The second packet's timestamp differs from the one the head start decoded: decoded
        // from the start, with that timestamp.
        before = HeadStart.adopted
        let altered = try decode(path, headStart: false, alter: 1)
        XCTAssertEqual(Set(altered.map(\.pts)).subtracting(reference.map(\.pts)).count, 1, "the altered timestamp is in the pictures")
        assertSame(try decode(path, headStart: true, alter: 1), altered, "an altered packet")
        // The file ends before the head start's packets do.
        let short = try decode(path, headStart: false, limit: 2)
        XCTAssertEqual(short.count, 2)
        assertSame(try decode(path, headStart: true, limit: 2), short, "a shorter file")
        XCTAssertEqual(HeadStart.adopted, before, "neither continued from the head start")
    }

    func testAHeadStartIsOnlyTakenForItsOwnFileAndNotForOtherContainersOrCodecs() throws {
        let path = Fixtures.path("street-2s.mp4")
        HeadStart.begin(path: path)
        XCTAssertNil(HeadStart.take(path: path + ".other"))
        XCTAssertNil(HeadStart.take(path: path), "a mismatched take empties the slot")
        HeadStart.begin(path: path)
        let head = try XCTUnwrap(HeadStart.take(path: path))
        XCTAssertEqual(head.frames.count, 1)
        XCTAssertEqual(head.packets.count, 3, "H.264 with a reorder depth of 2 gives its first picture after 3 packets")
        // The container's reorder depth below the stream's (what `adopt` checks for H.264):
        // the head start reaches the stream's before its first picture.
        let lower = Fixtures.path("damage/h264-aac.mp4")
        HeadStart.begin(path: lower)
        let raised = try XCTUnwrap(HeadStart.take(path: lower))
        XCTAssertEqual(raised.parameters?.pointee.video_delay, 1)
        XCTAssertEqual(raised.reorderDepth, 2)
        XCTAssertEqual(raised.packets.count, 3)
        // A pipe (or a device) is never opened a second time.
        let fifo = try workspace().appendingPathComponent("pipe.mp4").path
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        XCTAssertFalse(HeadStart.readableTwice(fifo))
        XCTAssertFalse(HeadStart.readableTwice("/dev/zero"))
        XCTAssertTrue(HeadStart.readableTwice(path))
        // Matroska (no decoding timestamps in the file) and VP9 are decoded from the start.
        for name in ["street-853x479.mkv", "street-vp9-opus.webm"] {
            HeadStart.begin(path: Fixtures.path(name))
            XCTAssertNil(HeadStart.take(path: Fixtures.path(name)), name)
        }
        // Interlaced pictures: the head start decodes, the decoder does not continue from it.
        let interlaced = Fixtures.path("street-interlaced.mp4")
        HeadStart.begin(path: interlaced)
        let other = try XCTUnwrap(HeadStart.take(path: interlaced))
        let input = try InputFile(path: interlaced)
        let stream = input.stream(try input.videoStreamIndex())
        XCTAssertNotEqual(stream.pointee.codecpar.pointee.field_order, AV_FIELD_PROGRESSIVE)
        let decoder = try VideoDecoder(stream: stream, path: interlaced, threads: 1)
        XCTAssertFalse(decoder.adopt(other))
        // Everything else matches: the same file marked progressive is taken.
        stream.pointee.codecpar.pointee.field_order = AV_FIELD_PROGRESSIVE
        XCTAssertTrue(decoder.adopt(other))
    }

    /// Every picture of `path`'s video through a one-thread decoder (as an enlarging job's),
    /// with packet `alter`'s timestamp moved by one and only the first `limit` video packets.
    private func decode(_ path: String, headStart: Bool, alter: Int? = nil, limit: Int? = nil) throws -> [(frame: Frame, pts: Int64)] {
        var head: HeadStart?
        if headStart {
            HeadStart.begin(path: path)
            head = try XCTUnwrap(HeadStart.take(path: path))
        }
        let input = try InputFile(path: path)
        let index = try input.videoStreamIndex()
        let decoder = try VideoDecoder(stream: input.stream(index), path: path, threads: 1)
        if let head { XCTAssertTrue(decoder.adopt(head)) }
        var pictures: [(frame: Frame, pts: Int64)] = []
        let make = { Frame(width: decoder.width, height: decoder.height, layout: .yuv420) }
        var packet: UnsafeMutablePointer<AVPacket>? = av_packet_alloc()
        defer { av_packet_free(&packet) }
        var sent = 0
        while try input.read(into: packet!) {
            defer { av_packet_unref(packet) }
            guard Int(packet!.pointee.stream_index) == index else { continue }
            if let limit, sent == limit { break }
            if sent == alter { packet!.pointee.pts += 1 }
            sent += 1
            try decoder.decode(packet, makeFrame: make) { pictures.append(($0, $1)) }
        }
        try decoder.decode(nil, makeFrame: make) { pictures.append(($0, $1)) }
        return pictures
    }

    private func assertSameFrames(_ a: String, _ b: String, _ what: String) throws {
        let first = try Measure.frames(a), second = try Measure.frames(b)
        XCTAssertGreaterThan(first.count, 0, what)
        assertSame(first, second, what)
    }

    private func assertSame(_ a: [(frame: Frame, pts: Int64)], _ b: [(frame: Frame, pts: Int64)], _ what: String) {
        XCTAssertEqual(a.map(\.pts), b.map(\.pts), "\(what): timestamps")
        guard a.count == b.count else { return }
        for (x, y) in zip(a, b) {
            for (p, q) in zip(x.frame.planes, y.frame.planes) {
                XCTAssertEqual(p.width, q.width)
                XCTAssertEqual(p.height, q.height)
                let rowsDiffer = (0..<min(p.height, q.height)).filter { memcmp(p.row($0), q.row($0), p.width) != 0 }.count
                XCTAssertEqual(rowsDiffer, 0, "\(what): picture at \(x.pts)")
            }
        }
    }
}
