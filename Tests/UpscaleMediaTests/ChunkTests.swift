import CFFmpeg
import Foundation
import UpscaleCore
@testable import UpscaleMedia
import XCTest

/// A job encoded in chunks and joined must be the job encoded in one pass.
final class ChunkTests: XCTestCase {
    /// Encodes `job` chunk by chunk into `work`, then joins them into `job.output`.
    private func chunked(_ job: Job, seconds: Double, work: URL) throws -> (ChunkPlan, TranscodeSummary) {
        let plan = try ChunkPlan.make(path: job.input, chunkSeconds: seconds)
        var paths: [String] = []
        for range in plan.chunks {
            var part = job
            part.chunk = ChunkTask(range: range, path: work.appendingPathComponent("chunk-\(range.index).chunk").path,
                                   keyframeInterval: plan.chunks.map(\.frames).max()!)
            let summary = try Transcoder(job: part).run()
            XCTAssertEqual(summary.frames, range.frames, "chunk \(range.index)")
            paths.append(part.chunk!.path)
        }
        return (plan, try Transcoder(job: job).join(chunks: paths))
    }

    private func jobs(_ name: String, _ options: UpscaleOptions, in dir: URL) throws -> (single: Job, chunked: Job) {
        let input = dir.appendingPathComponent(name).path
        var a = options, b = options
        let ext = options.encoder.codec == .ffv1 ? "mkv" : URL(fileURLWithPath: name).pathExtension
        a.output = dir.appendingPathComponent("single.\(ext)").path
        b.output = dir.appendingPathComponent("chunked.\(ext)").path
        return (try JobPlanner.plan(input: input, options: a), try JobPlanner.plan(input: input, options: b))
    }

    private func sortedSeconds(_ path: String) throws -> [Double] { try Measure.videoSeconds(path) }

    private func assertSameStreams(_ a: String, _ b: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let ia = try MediaProbe.info(a), ib = try MediaProbe.info(b)
        XCTAssertEqual(ia.streams.map(\.codec), ib.streams.map(\.codec), file: file, line: line)
        XCTAssertEqual(ia.duration, ib.duration, accuracy: 0.001, file: file, line: line)
        let va = ia.video!, vb = ib.video!
        XCTAssertEqual([va.codecTag, va.colorRange, va.colorPrimaries, va.colorTransfer, va.colorSpace, va.pixelFormat ?? ""],
                       [vb.codecTag, vb.colorRange, vb.colorPrimaries, vb.colorTransfer, vb.colorSpace, vb.pixelFormat ?? ""],
                       file: file, line: line)
        XCTAssertEqual(try sortedSeconds(a), try sortedSeconds(b), file: file, line: line)
        for s in ia.streams where s.kind == .audio {
            let pa = try MediaProbe.packets(a, stream: s.index), pb = try MediaProbe.packets(b, stream: s.index)
            XCTAssertEqual(pa.map(\.checksum), pb.map(\.checksum), "audio stream \(s.index) packets", file: file, line: line)
            XCTAssertEqual(pa.map(\.pts), pb.map(\.pts), "audio stream \(s.index) times", file: file, line: line)
        }
    }

    /// Open GOPs (leading B-pictures before each keyframe), B-frames, a VFR Matroska file with a
    /// start offset, and a QuickTime file whose edit list hides its first frames: the joined
    /// FFV1 output decodes to exactly the single-pass pictures at exactly its times.
    func testLosslessChunkedOutputIsBitIdenticalToOnePass() throws {
        let names = ["chunk-h264-bframes.mp4", "chunk-vfr.mkv", "chunk-offset.mov"]
        let dir = try workspace(copying: names)
        for name in names {
            let options = UpscaleOptions(encoder: EncoderSettings(codec: .ffv1, threads: 1), threads: 2, overwrite: true)
            let (single, job) = try jobs(name, options, in: dir)
            let one = try Transcoder(job: single).run()
            let (plan, joined) = try chunked(job, seconds: 1, work: dir)
            XCTAssertGreaterThanOrEqual(plan.chunks.count, 3, name)
            XCTAssertEqual(plan.frames, one.frames, name)
            XCTAssertEqual(joined.frames, one.frames, name)
            try assertSameStreams(single.output, job.output)
            let a = try Measure.frames(single.output), b = try Measure.frames(job.output)
            XCTAssertEqual(a.count, b.count, name)
            for (x, y) in zip(a, b) {
                XCTAssertEqual(x.pts, y.pts, name)
                for p in 0..<3 { XCTAssertEqual(Measure.psnr(x.frame.planes[p], y.frame.planes[p]), .infinity, "\(name) pts \(x.pts) plane \(p)") }
            }
        }
    }

    /// Matroska keeps milliseconds, so 23.976 fps pictures come 41 or 42 ms apart; into MP4
    /// they were written so, a variable frame rate (editors flag it and conform the clip). Each
    /// picture is put on the frame grid (1001 ticks of 1/24000 s a frame), in one piece and in
    /// chunks alike, within 1 ms of its time in the source.
    /// At 59.94 fps (OBS, gameplay) FFmpeg guessed the rate from the milliseconds as 19001/317,
    /// and no grid was made: the steps were 16 and 17 ms.
    func testMatroskaAt23976FpsComesOutAtAConstantRateInOnePieceAndInChunks() throws {
        let dir = try workspace(copying: ["chunk-h264-bframes.mp4"])
        let rates: [(Int64, Set<Int>)] = [(24000, [41, 42]), (60000, [16, 17])]
        for (rate, millis) in rates {
        let source = dir.appendingPathComponent("ntsc-\(rate).mkv").path
        // 10 fps in milliseconds (100 a frame) made rate/1001 fps; the muxer rounds to milliseconds.
        try Remuxer.copy(dir.appendingPathComponent("chunk-h264-bframes.mp4").path, to: source,
                         retime: { (t: Int64) -> Int64 in (t * 10010 + (t >= 0 ? rate / 2 : -rate / 2)) / rate },
                         frameRate: AVRational(num: Int32(rate), den: 1001))
        let inTimes = try Measure.videoSeconds(source)
        let inSteps: [Int] = zip(inTimes.dropFirst(), inTimes).map { Int((($0 - $1) * 1000).rounded()) }
        XCTAssertEqual(Set(inSteps), millis,
                       "the source is \(rate)/1001 fps in milliseconds")
        var a = UpscaleOptions(width: 512, encoder: EncoderSettings(preset: "ultrafast", threads: 1), threads: 2, overwrite: true), b = a
        a.output = dir.appendingPathComponent("single-\(rate).mp4").path
        b.output = dir.appendingPathComponent("chunked-\(rate).mp4").path
        let single = try JobPlanner.plan(input: source, options: a), job = try JobPlanner.plan(input: source, options: b)
        _ = try Transcoder(job: single).run()
        // Chunks of 12 pictures at either rate.
        let (plan, _) = try chunked(job, seconds: 12 * 1001 / Double(rate), work: dir)
        XCTAssertGreaterThanOrEqual(plan.chunks.count, 3)
        for output in [single.output, job.output] {
            let video = try XCTUnwrap(try MediaProbe.info(output).video)
            let pts = try MediaProbe.packets(output, stream: video.index).compactMap(\.pts).sorted()
            XCTAssertEqual(pts.count, inTimes.count, output)
            let steps = Set(zip(pts.dropFirst(), pts).map { $0 - $1 })
            XCTAssertEqual(steps.count, 1, "\(output): steps \(steps.sorted()) in 1/\(video.timeBase.den)")
            XCTAssertEqual(steps.first.map { $0 * Int64(video.timeBase.num) * rate }, Int64(1001 * video.timeBase.den), "one step is 1001/\(rate) s: \(output)")
            for (x, y) in zip(inTimes, try Measure.videoSeconds(output)) { XCTAssertEqual(x, y, accuracy: 0.001, output) }
        }
        }
    }

    /// ProRes 4444 with alpha (all intra, so chunk by frame): the joined file is the one-pass
    /// file, codec tag ("ap4h", which the .mov muxer guessed as HQ for a chunk) and alpha included.
    func testProRes4444ChunksKeepTheirTagAndAlpha() throws {
        let name = "street-prores4444-alpha.mov"
        let dir = try workspace(copying: [name])
        let options = UpscaleOptions(encoder: EncoderSettings(codec: .prores, threads: 1), threads: 2, overwrite: true)
        let (single, job) = try jobs(name, options, in: dir)
        XCTAssertTrue(job.keepsAlpha)
        let one = try Transcoder(job: single).run()
        let (plan, joined) = try chunked(job, seconds: 0.1, work: dir)
        XCTAssertGreaterThanOrEqual(plan.chunks.count, 2)
        XCTAssertEqual(joined.frames, one.frames)
        try assertSameStreams(single.output, job.output)
        XCTAssertEqual(try MediaProbe.info(job.output).video?.codecTag, "ap4h")
        let read = { (path: String) throws -> [Frame] in
            let reader = try VideoFrameReader(path: path, layout: .yuva444)
            var frames: [Frame] = []
            while let next = try reader.next() { frames.append(next.frame) }
            return frames
        }
        let a = try read(single.output), b = try read(job.output)
        XCTAssertEqual(a.count, b.count)
        for (x, y) in zip(a, b) {
            for p in 0..<4 { XCTAssertEqual(Measure.psnr(x.planes[p], y.planes[p]), .infinity, "plane \(p)") }
        }
    }

    /// HEVC in MP4: one parameter set (hvc1), the same frames and times, audio packets identical,
    /// every chunk starts with a keyframe, and the bytes stay close to one pass at the same CRF.
    func testHEVCChunksJoinIntoOneStreamLikeOnePass() throws {
        let dir = try workspace(copying: ["chunk-h264-bframes.mp4"])
        let options = UpscaleOptions(encoder: EncoderSettings(preset: "ultrafast", threads: 1), threads: 2, overwrite: true)
        let (single, job) = try jobs("chunk-h264-bframes.mp4", options, in: dir)
        _ = try Transcoder(job: single).run()
        let (plan, _) = try chunked(job, seconds: 1.5, work: dir)
        XCTAssertGreaterThanOrEqual(plan.chunks.count, 3)
        try assertSameStreams(single.output, job.output)
        let info = try MediaProbe.info(job.output)
        XCTAssertEqual(info.video?.codecTag, "hvc1")
        let packets = try MediaProbe.packets(job.output, stream: info.videoStreamIndex!)
        let onePass = try MediaProbe.packets(single.output, stream: info.videoStreamIndex!)
        XCTAssertEqual(packets.map(\.dts), onePass.map(\.dts), "decode timestamps as one encoder makes them")
        // Each chunk's first picture in decode order is a keyframe.
        let tb = info.video!.timeBase
        var decodeOrder = 0
        var chunkStarts: [Int] = []
        var expected = 0
        for range in plan.chunks {
            chunkStarts.append(expected)
            expected += range.frames
        }
        for (i, p) in packets.enumerated() where chunkStarts.contains(i) {
            XCTAssertTrue(p.isKeyframe, "packet \(i) (pts \(Double(p.pts ?? 0) * Double(tb.num) / Double(tb.den)) s) starts a chunk")
            decodeOrder += 1
        }
        XCTAssertEqual(decodeOrder, plan.chunks.count)
        // Decoding across every join reports nothing, and the pictures match one pass closely.
        let a = try Measure.frames(single.output), b = try Measure.frames(job.output)
        XCTAssertEqual(a.count, b.count)
        for (x, y) in zip(a, b) { XCTAssertGreaterThan(Measure.psnr(x.frame.planes[0], y.frame.planes[0]), 30) }
        let sizeSingle = try FileManager.default.attributesOfItem(atPath: single.output)[.size] as! Int
        let sizeChunked = try FileManager.default.attributesOfItem(atPath: job.output)[.size] as! Int
        print("HEVC single \(sizeSingle) B, chunked \(sizeChunked) B in \(plan.chunks.count) chunks")
    }

    /// `job`'s plan in chunks of half a second (at least 4), and each chunk's task: its file in
    /// `dir`, the longest chunk as keyframe interval.
    private func halfSecondChunks(_ job: Job, in dir: URL) throws -> (ChunkPlan, (ChunkRange) -> ChunkTask) {
        let plan = try ChunkPlan.make(path: job.input, chunkSeconds: 0.5)
        XCTAssertGreaterThanOrEqual(plan.chunks.count, 4)
        let longest = plan.chunks.map(\.frames).max()!
        return (plan, { ChunkTask(range: $0, path: dir.appendingPathComponent("span-\($0.index).chunk").path, keyframeInterval: longest) })
    }

    /// One decoder and encoder for consecutive chunks (`ChunkSpan`): a chunk's run goes on into
    /// each next chunk the span hands over, each into its own file starting with an IDR
    /// picture, and stops where the span hands none (another worker has it). With lossless
    /// H.264 and refinement on, the joined chunks decode to exactly the one-pass pictures at
    /// its times (the temporal hold runs on across the chunks), each chunk file keeps exactly
    /// its frames, and the chunk after a stop is made by a new run.
    func testChunksMadeByOneEncoderDecodeToTheOnePassPictures() throws {
        let dir = try workspace(copying: ["chunk-h264-bframes.mp4"])
        let lossless = UpscaleOptions(encoder: EncoderSettings(codec: .h264, crf: 0, preset: "veryfast", threads: 1), threads: 2,
                                      overwrite: true, refine: true)
        var reference = lossless
        reference.encoder = EncoderSettings(codec: .ffv1, threads: 1)
        let (single, _) = try jobs("chunk-h264-bframes.mp4", reference, in: dir)
        var spanned = lossless
        spanned.output = dir.appendingPathComponent("spanned.mkv").path
        let job = try JobPlanner.plan(input: dir.appendingPathComponent("chunk-h264-bframes.mp4").path, options: spanned)
        XCTAssertTrue(job.refine)
        _ = try Transcoder(job: single).run()
        let (plan, task) = try halfSecondChunks(job, in: dir)
        // The span hands over every chunk but the third: that one is made by a second run.
        let refused = 2
        var finished: [Int] = []
        var runs = 0
        for first in [0, refused] {
            var part = job
            part.chunk = task(plan.chunks[first])
            let transcoder = Transcoder(job: part)
            transcoder.span = ChunkSpan(claim: { range, pts in
                let next = range.index + 1
                guard next != refused, next < plan.chunks.count, plan.chunks[next].start == pts else { return nil }
                return task(plan.chunks[next])
            }, finished: { chunk, summary in
                XCTAssertEqual(summary.frames, chunk.range.frames, "chunk \(chunk.range.index)")
                XCTAssertEqual(summary.output, chunk.path)
                XCTAssertTrue(FileManager.default.fileExists(atPath: chunk.path), "chunk \(chunk.range.index) named when finished")
                finished.append(chunk.range.index)
            })
            let last = try transcoder.run()
            runs += 1
            XCTAssertEqual(last.output, task(plan.chunks[finished.last!]).path)
            if first == 0 { XCTAssertEqual(finished, [0, 1], "the run stops where the span hands no chunk") }
        }
        XCTAssertEqual(finished, Array(plan.chunks.indices))
        XCTAssertEqual(runs, 2)
        let joined = try Transcoder(job: job).join(chunks: plan.chunks.map { task($0).path })
        XCTAssertEqual(joined.frames, plan.frames)
        // Every chunk starts with a keyframe.
        let packets = try MediaProbe.packets(job.output, stream: 0)
        var starts: Set<Int> = [], n = 0
        for range in plan.chunks {
            starts.insert(n)
            n += range.frames
        }
        XCTAssertTrue(starts.isSubset(of: packets.indices.filter { packets[$0].isKeyframe }))
        // The first run's pictures are one pass's, across its chunks; the second run's start
        // anew from its keyframe (the temporal hold warmed on the pre-roll, as any chunk's).
        let a = try Measure.frames(single.output), b = try Measure.frames(job.output)
        XCTAssertEqual(a.count, b.count)
        XCTAssertEqual(a.map(\.pts), b.map(\.pts))
        let secondRun = plan.chunks[..<refused].reduce(0) { $0 + $1.frames }
        for (i, (x, y)) in zip(a, b).enumerated() {
            for p in 0..<3 {
                let psnr = Measure.psnr(x.frame.planes[p], y.frame.planes[p])
                if i < secondRun {
                    XCTAssertEqual(psnr, .infinity, "frame \(i) plane \(p)")
                } else {
                    XCTAssertGreaterThanOrEqual(psnr, 50, "frame \(i) plane \(p)")
                }
            }
        }
    }

    /// x265 in one encoder across chunks: each chunk starts with an IDR picture (unit type 19
    /// or 20, its picture order count begun anew), not a CRA picture whose count goes on (x265's
    /// open GOPs), so a chunk made again by a new encoder, as a resume does, joins before a
    /// chunk the span made: every picture at its time, each close to one pass's. (With CRA
    /// pictures such a join could hold two pictures of one count, and decoded out of order.)
    func testX265ChunksMadeByOneEncoderStartWithIDRPicturesAndJoinAfterARedoneChunk() throws {
        let dir = try workspace(copying: ["chunk-h264-bframes.mp4"])
        let options = UpscaleOptions(encoder: EncoderSettings(preset: "ultrafast", threads: 1), threads: 2, overwrite: true)
        let (single, job) = try jobs("chunk-h264-bframes.mp4", options, in: dir)
        _ = try Transcoder(job: single).run()
        let (plan, task) = try halfSecondChunks(job, in: dir)
        var part = job
        part.chunk = task(plan.chunks[0])
        let transcoder = Transcoder(job: part)
        var finished: [Int] = []
        transcoder.span = ChunkSpan(claim: { range, pts in
            let next = range.index + 1
            return next < plan.chunks.count && plan.chunks[next].start == pts ? task(plan.chunks[next]) : nil
        }, finished: { chunk, _ in finished.append(chunk.range.index) })
        _ = try transcoder.run()
        XCTAssertEqual(finished, Array(plan.chunks.indices), "one encoder made every chunk")
        var packet: UnsafeMutablePointer<AVPacket>? = av_packet_alloc()
        defer { av_packet_free(&packet) }
        for range in plan.chunks {
            let reader = try ChunkReader(path: task(range).path)
            XCTAssertTrue(try reader.read(into: packet!))
            XCTAssertTrue(VideoEncoder.isIDR(packet!, codec: .hevc), "chunk \(range.index) starts with an IDR picture")
            av_packet_unref(packet)
        }
        // Chunk 1 made again by a new encoder; the chunks after it stay as the span made them.
        var redo = job
        redo.chunk = task(plan.chunks[1])
        _ = try Transcoder(job: redo).run()
        _ = try Transcoder(job: job).join(chunks: plan.chunks.map { task($0).path })
        let a = try Measure.frames(single.output), b = try Measure.frames(job.output)
        XCTAssertEqual(a.count, b.count)
        XCTAssertEqual(a.map(\.pts), b.map(\.pts))
        for (i, (x, y)) in zip(a, b).enumerated() {
            XCTAssertGreaterThan(Measure.psnr(x.frame.planes[0], y.frame.planes[0]), 30, "frame \(i)")
        }
    }

    /// Refinement on: each chunk's temporal hold is warmed on the pre-roll frames before it, so
    /// the seams do not show: every frame within 50 dB of one pass, and the frame-to-frame
    /// change at each chunk's first frame no larger than one pass has there.
    func testRefinedChunksHaveNoMeasurableSeam() throws {
        let dir = try workspace(copying: ["chunk-h264-bframes.mp4"])
        let options = UpscaleOptions(encoder: EncoderSettings(codec: .ffv1, threads: 1), threads: 2, overwrite: true, refine: true)
        let (single, job) = try jobs("chunk-h264-bframes.mp4", options, in: dir)
        XCTAssertTrue(single.refine)
        _ = try Transcoder(job: single).run()
        let (plan, _) = try chunked(job, seconds: 1, work: dir)
        let a = try Measure.frames(single.output), b = try Measure.frames(job.output)
        XCTAssertEqual(a.count, b.count)
        var firsts: Set<Int> = []
        var n = 0
        for range in plan.chunks.dropLast() {
            n += range.frames
            firsts.insert(n)
        }
        func change(_ x: Plane, _ y: Plane) -> Double {
            var sum = 0
            for row in 0..<x.height { for col in 0..<x.width { sum += abs(Int(x[col, row]) - Int(y[col, row])) } }
            return Double(sum) / Double(x.width * x.height)
        }
        var worst = Double.infinity
        for i in 0..<a.count {
            let psnr = Measure.psnr(a[i].frame.planes[0], b[i].frame.planes[0])
            worst = min(worst, psnr)
            XCTAssertGreaterThanOrEqual(psnr, 50, "frame \(i)\(firsts.contains(i) ? " (a chunk's first)" : "")")
            if firsts.contains(i) {
                let oneCut = change(a[i].frame.planes[0], a[i - 1].frame.planes[0])
                let chunkCut = change(b[i].frame.planes[0], b[i - 1].frame.planes[0])
                XCTAssertLessThanOrEqual(chunkCut, oneCut * 1.01 + 0.01, "frame \(i): change from the previous frame")
                print("seam at frame \(i): change \(chunkCut) (one pass \(oneCut)), PSNR \(psnr) dB")
            }
        }
        print("refined chunks vs one pass: lowest PSNR \(worst) dB over \(a.count) frames")
    }
}
