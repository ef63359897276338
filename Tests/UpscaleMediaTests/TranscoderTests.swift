import CFFmpeg
import Foundation
import Logging
import UpscaleCore
@testable import UpscaleMedia
import XCTest

final class TranscoderTests: XCTestCase {
    private func run(_ input: String, _ options: UpscaleOptions, cancel: CancellationFlag = CancellationFlag(),
                     progress: @escaping (TranscodeProgress) -> Void = { _ in }) throws -> (Job, TranscodeSummary) {
        let job = try JobPlanner.plan(input: input, options: options)
        return (job, try Transcoder(job: job).run(cancel: cancel, progress: progress))
    }

    func testRealClipToHEVCKeepsFramesTimestampsAndAudio() throws {
        let dir = try workspace(copying: ["street-2s.mp4"])
        let input = dir.appendingPathComponent("street-2s.mp4").path
        let (job, summary) = try run(input, UpscaleOptions(encoder: EncoderSettings(preset: "ultrafast", threads: 2), threads: 2))
        XCTAssertEqual(job.output, dir.appendingPathComponent("street-2s Upscaled.mp4").path)
        XCTAssertEqual(Fixtures.listing(dir), ["street-2s Upscaled.mp4", "street-2s.mp4"])

        let inInfo = try MediaProbe.info(input)
        let outInfo = try MediaProbe.info(job.output)
        let video = try XCTUnwrap(outInfo.video)
        XCTAssertEqual(video.codec, "hevc")
        XCTAssertEqual(video.codecTag, "hvc1")
        XCTAssertEqual(video.width, 1536)
        XCTAssertEqual(video.height, 1152)
        // The input is untagged 576-line video, which players show as PAL BT.601; untagged at
        // 1152 lines they would take BT.709: it is tagged as it was shown.
        XCTAssertEqual([inInfo.video!.colorSpace, inInfo.video!.colorPrimaries, inInfo.video!.colorTransfer], ["unknown", "unknown", "unknown"])
        XCTAssertEqual([video.colorSpace, video.colorPrimaries, video.colorTransfer], ["bt470bg", "bt470bg", "smpte170m"])

        // Same frames at the same presentation times, in seconds.
        let inVideo = try MediaProbe.packets(input, stream: inInfo.videoStreamIndex!)
        let outVideo = try MediaProbe.packets(job.output, stream: outInfo.videoStreamIndex!)
        XCTAssertEqual(outVideo.count, inVideo.count)
        XCTAssertEqual(summary.frames, inVideo.count)
        let seconds = { (records: [PacketRecord], tb: (num: Int, den: Int)) in
            records.compactMap { $0.pts }.sorted().map { Double($0) * Double(tb.num) / Double(tb.den) }
        }
        let inTimes = seconds(inVideo, inInfo.video!.timeBase), outTimes = seconds(outVideo, video.timeBase)
        XCTAssertEqual(inTimes.count, outTimes.count)
        for (a, b) in zip(inTimes, outTimes) { XCTAssertEqual(a, b, accuracy: 0.001) }
        XCTAssertEqual(outInfo.duration, inInfo.duration, accuracy: 1 / inInfo.video!.frameRate)

        // Audio copied packet for packet.
        let inAudio = inInfo.streams.first { $0.kind == .audio }!
        let outAudio = try XCTUnwrap(outInfo.streams.first { $0.kind == .audio })
        XCTAssertEqual(outAudio.codec, "aac")
        let a = try MediaProbe.packets(input, stream: inAudio.index)
        let b = try MediaProbe.packets(job.output, stream: outAudio.index)
        XCTAssertEqual(a.map(\.checksum), b.map(\.checksum))
        XCTAssertEqual(a.map(\.size), b.map(\.size))

        // Decodes cleanly, and matches the input scaled by swscale's Lanczos.
        let source = try Measure.frames(input)
        let result = try Measure.frames(job.output)
        XCTAssertEqual(result.count, source.count)
        let reference = try SwscaleScaler(input: (768, 576), output: (1536, 1152))
        for index in [0, source.count / 2, source.count - 1] {
            let expected = reference.scale(source[index].frame)
            let psnr = Measure.psnr(result[index].frame.planes[0], expected.planes[0])
            XCTAssertGreaterThan(psnr, 35, "frame \(index) luma")
            XCTAssertGreaterThan(Measure.psnr(result[index].frame.planes[1], expected.planes[1]), 35, "frame \(index) Cb")
            XCTAssertGreaterThan(Measure.psnr(result[index].frame.planes[2], expected.planes[2]), 35, "frame \(index) Cr")
        }
    }

    /// x265 writes the settings it encoded with into the stream (an SEI message); on two or
    /// three threads upscale asks for two frame encoders where x265 alone would use one.
    func testX265GetsTwoFrameEncodersOnTwoOrThreeThreads() throws {
        let dir = try workspace(copying: ["street-2s.mp4"])
        let input = dir.appendingPathComponent("street-2s.mp4").path
        for (threads, expected) in [(1, 1), (2, 2), (3, 2)] {
            var options = UpscaleOptions(width: 800, encoder: EncoderSettings(preset: "ultrafast", threads: threads), threads: threads)
            options.output = dir.appendingPathComponent("t\(threads).mp4").path
            let (job, summary) = try run(input, options)
            XCTAssertEqual(summary.frames, 20)
            let bytes = try Data(contentsOf: URL(fileURLWithPath: job.output))
            let said = try XCTUnwrap(bytes.range(of: Data("frame-threads=".utf8)), "x265's settings are in the stream")
            XCTAssertEqual(bytes[said.upperBound], UInt8(ascii: "0") + UInt8(expected), "\(threads) threads")
            XCTAssertEqual(X265Threading.frameThreads(poolThreads: threads) ?? 1, expected)
        }
    }

    func testLosslessFFV1OutputIsExactlyTheCoreOutput() throws {
        let dir = try workspace(copying: ["street-2s.mp4"])
        let input = dir.appendingPathComponent("street-2s.mp4").path
        let (job, _) = try run(input, UpscaleOptions(width: 1000, encoder: EncoderSettings(codec: .ffv1), threads: 2))
        XCTAssertTrue(job.output.hasSuffix("street-2s Upscaled.mkv"))
        XCTAssertEqual(job.height, 750)
        let source = try Measure.frames(input)
        let result = try Measure.frames(job.output)
        XCTAssertEqual(result.count, source.count)
        let scaler = FrameScaler(input: (768, 576), output: (1000, 750), layout: .yuv420, threads: 1)
        for index in [0, source.count - 1] {
            let expected = scaler.scale(source[index].frame)
            for p in 0..<3 {
                XCTAssertEqual(result[index].frame.planes[p].samples, expected.planes[p].samples, "frame \(index) plane \(p)")
            }
        }
    }

    func testRefinedLosslessOutputIsExactlyTheRefinedCoreOutput() throws {
        let dir = try workspace(copying: ["street-vp9-opus.webm"])
        let input = dir.appendingPathComponent("street-vp9-opus.webm").path
        let (job, _) = try run(input, UpscaleOptions(encoder: EncoderSettings(codec: .ffv1), threads: 2, refine: true))
        XCTAssertTrue(job.refine)
        let source = try Measure.frames(input)
        let result = try Measure.frames(job.output)
        XCTAssertEqual(result.count, source.count)
        // The video path refines with the temporal hold: the core fed the same frames in order.
        let refined = FrameScaler(input: (320, 240), output: (640, 480), layout: .yuv420, threads: 1, refiner: .x2, hold: TemporalHold())
        let perFrame = FrameScaler(input: (320, 240), output: (640, 480), layout: .yuv420, threads: 1, refiner: .x2)
        let plain = FrameScaler(input: (320, 240), output: (640, 480), layout: .yuv420, threads: 1)
        var heldFrames = 0
        for (index, frame) in source.prefix(12).enumerated() {
            let expected = refined.scale(frame.frame)
            // Compared as Bool: a mismatch must not print two 300 000-sample arrays.
            XCTAssertTrue(result[index].frame.planes[0].samples == expected.planes[0].samples, "frame \(index) luma")
            XCTAssertTrue(result[index].frame.planes[1].samples == expected.planes[1].samples, "frame \(index) Cb")
            if expected.planes[0].samples != perFrame.scale(frame.frame).planes[0].samples { heldFrames += 1 }
        }
        XCTAssertGreaterThan(heldFrames, 0, "the hold changed some frames of this static-camera clip")
        XCTAssertFalse(result[2].frame.planes[0].samples == plain.scale(source[2].frame).planes[0].samples)

        let notDouble = try JobPlanner.plan(input: input, options: UpscaleOptions(width: 480, refine: true, refineRequested: true))
        XCTAssertFalse(notDouble.refine)
        XCTAssertTrue(notDouble.notices.contains { $0.contains("trained for exactly 2x, 3x and 4x") }, "\(notDouble.notices)")
        let quietly = try JobPlanner.plan(input: input, options: UpscaleOptions(width: 480, overwrite: true, refine: true))
        XCTAssertFalse(quietly.refine)
        XCTAssertFalse(quietly.notices.contains { $0.contains("refinement") }, "\(quietly.notices)")
        let triple = try JobPlanner.plan(input: input, options: UpscaleOptions(width: 960, overwrite: true, refine: true))
        XCTAssertTrue(triple.refine)
    }

    func testPortraitPhoneClipKeepsRotationAndWidthMeansDisplayedWidth() throws {
        let dir = try workspace(copying: ["street-2s.mp4"])
        let input = dir.appendingPathComponent("portrait.mov").path
        // Stored 768x576, shown rotated a quarter turn: 576 wide, 768 tall, as phones record.
        try Remuxer.copy(dir.appendingPathComponent("street-2s.mp4").path, to: input, rotation: 90)
        let inInfo = try MediaProbe.info(input)
        let rotation = try XCTUnwrap(inInfo.video?.rotation)
        XCTAssertEqual(rotation % 180, 90)
        XCTAssertTrue(inInfo.displaySize! == (576, 768))
        let (job, _) = try run(input, UpscaleOptions(width: 288, encoder: EncoderSettings(preset: "ultrafast")))
        XCTAssertTrue(job.output.hasSuffix("portrait Upscaled.mov"))
        let info = try MediaProbe.info(job.output)
        XCTAssertEqual(info.video?.rotation, rotation)
        XCTAssertEqual(info.video?.width, 384)
        XCTAssertEqual(info.video?.height, 288)
        XCTAssertTrue(info.displaySize! == (288, 384), "\(info.displaySize!)")
        XCTAssertEqual(try Measure.frames(job.output).count, try Measure.frames(input).count)
    }

    func testSubtitlesAndChaptersAreKeptInMKVAndConvertedForMP4() throws {
        let dir = try workspace(copying: ["street-subs.mkv"])
        let input = dir.appendingPathComponent("street-subs.mkv").path
        let (job, _) = try run(input, UpscaleOptions(width: 384, encoder: EncoderSettings(preset: "ultrafast")))
        XCTAssertTrue(job.output.hasSuffix("street-subs Upscaled.mkv"))
        let inInfo = try MediaProbe.info(input), info = try MediaProbe.info(job.output)
        let inSubs = inInfo.streams.first { $0.kind == .subtitle }!
        let subs = try XCTUnwrap(info.streams.first { $0.kind == .subtitle })
        XCTAssertEqual(subs.codec, "subrip")
        XCTAssertEqual(subs.language, "eng")
        XCTAssertEqual(try MediaProbe.packets(job.output, stream: subs.index).map(\.checksum),
                       try MediaProbe.packets(input, stream: inSubs.index).map(\.checksum))
        XCTAssertEqual(info.chapters.map(\.title), ["First second", "Second second"])
        XCTAssertEqual(info.chapters[1].start, 1.0, accuracy: 0.001)

        // .mp4 cannot carry SubRip as it is: it becomes mov_text, cue for cue, at the same times.
        let mp4 = dir.appendingPathComponent("out.mp4").path
        let (_, summary) = try run(input, UpscaleOptions(width: 384, output: mp4, encoder: EncoderSettings(preset: "ultrafast")))
        XCTAssertEqual(summary.audioCopied, 1)
        let mp4Info = try MediaProbe.info(mp4)
        let movText = try XCTUnwrap(mp4Info.streams.first { $0.kind == .subtitle })
        XCTAssertEqual(movText.codec, "mov_text")
        XCTAssertEqual(movText.language, "eng")
        let cues = try MediaProbe.packets(mp4, stream: movText.index).filter { $0.size > 2 }
        XCTAssertEqual(cues.count, 2)
        let tb = Double(movText.timeBase.num) / Double(movText.timeBase.den)
        let inTB = Double(inSubs.timeBase.num) / Double(inSubs.timeBase.den)
        let inCues = try MediaProbe.packets(input, stream: inSubs.index)
        XCTAssertEqual(inCues.count, 2)
        for (a, b) in zip(inCues, cues) { XCTAssertEqual(Double(b.pts ?? -1) * tb, Double(a.pts ?? -2) * inTB, accuracy: 0.002) }
        XCTAssertEqual(mp4Info.chapters.count, 2)

        // And back: Matroska has no mov_text, so it becomes SubRip, cue for cue (it was dropped
        // with a note that said to use .mkv). The video stays the default track (it was not,
        // in every .mkv written).
        XCTAssertTrue(inInfo.video?.isDefault ?? false)
        let back = dir.appendingPathComponent("back.mkv").path
        _ = try run(mp4, UpscaleOptions(width: 384, output: back, encoder: EncoderSettings(preset: "ultrafast")))
        let backInfo = try MediaProbe.info(back)
        let srt = try XCTUnwrap(backInfo.streams.first { $0.kind == .subtitle })
        XCTAssertEqual(srt.codec, "subrip")
        XCTAssertEqual(srt.language, "eng")
        let srtTB = Double(srt.timeBase.num) / Double(srt.timeBase.den)
        let backCues = try MediaProbe.packets(back, stream: srt.index).filter { $0.size > 0 }
        XCTAssertEqual(backCues.count, 2)
        for (a, b) in zip(inCues, backCues) { XCTAssertEqual(Double(b.pts ?? -1) * srtTB, Double(a.pts ?? -2) * inTB, accuracy: 0.002) }
        XCTAssertEqual(backInfo.video?.isDefault, true)
        XCTAssertEqual(info.video?.isDefault, true)
    }

    /// HDR10 metadata kept outside the bitstream (Matroska's Colour, MP4's boxes: VP9 HDR10 as
    /// YouTube serves it) reaches the HEVC output, and so does a content light level with no
    /// mastering display. Both were dropped without a word: only the first picture's side data
    /// was read, and only with a mastering display.
    func testHDR10MetadataInTheContainerIsKept() throws {
        let dir = try workspace(copying: ["street-hdr10.mp4"])
        let input = dir.appendingPathComponent("street-hdr10.mp4").path
        // The same pictures without the metadata: FFV1 carries none in its bitstream, and the
        // copy leaves out the container's (which the upscale wrote there).
        let ffv1 = dir.appendingPathComponent("ffv1.mkv").path, bare = dir.appendingPathComponent("bare.mkv").path
        _ = try run(input, UpscaleOptions(width: 384, output: ffv1, encoder: EncoderSettings(codec: .ffv1)))
        XCTAssertEqual(try HDRMetadata.container(of: ffv1), try HDRMetadata.firstFrame(of: input))
        try Remuxer.copy(ffv1, to: bare)
        XCTAssertNil(try HDRMetadata.firstFrame(of: bare))
        let grade = try XCTUnwrap(try HDRMetadata.firstFrame(of: input))
        var lightOnly = grade
        lightOnly.hasMasteringDisplay = false
        lightOnly.contentLight = (800, 300)
        for (name, metadata) in [("mastered", grade), ("light-only", lightOnly)] {
            let tagged = dir.appendingPathComponent("\(name).mkv").path
            try Remuxer.copy(bare, to: tagged, hdr: metadata)
            XCTAssertEqual(try HDRMetadata.firstFrame(of: tagged), metadata, name)
            let (job, _) = try run(tagged, UpscaleOptions(output: dir.appendingPathComponent("\(name).mp4").path,
                                                          encoder: EncoderSettings(preset: "ultrafast")))
            let kept = try XCTUnwrap(try HDRMetadata.firstFrame(of: job.output), name)
            XCTAssertEqual(kept.x265Parameters, metadata.x265Parameters, name)
        }
    }

    /// The H.264 note names its file. No note says an HDR10 source's metadata is lost with a
    /// codec other than HEVC: the container keeps it for every codec (see
    /// `testHDR10MetadataIsInTheContainerForEveryCodec`).
    func testTheLossNotesSayOnlyWhatIsLost() throws {
        let dir = try workspace(copying: ["street-hdr10.mp4", "street-prores4444-alpha.mov"])
        let input = dir.appendingPathComponent("street-hdr10.mp4").path
        func notes(_ path: String, _ codec: VideoCodec) throws -> [String] {
            try Transcoder.lossNotes(for: JobPlanner.plan(input: path, options: UpscaleOptions(output: dir.appendingPathComponent("x.mkv").path,
                                                                                              encoder: EncoderSettings(codec: codec), overwrite: true)))
        }
        XCTAssertEqual(try notes(input, .ffv1), [])
        XCTAssertEqual(try notes(input, .hevc), [])
        XCTAssertEqual(try notes(input, .h264), ["'\(input)': H.264 output is 8-bit; use --codec hevc to keep 10 bits"])
        // A 12-bit master (ProRes 4444) into HEVC or FFV1 becomes 10-bit, said.
        let master = dir.appendingPathComponent("street-prores4444-alpha.mov").path
        for codec in [VideoCodec.hevc, .ffv1] {
            XCTAssertTrue(try notes(master, codec).contains("'\(master)' is 12-bit; the output is 10-bit"), codec.rawValue)
        }
    }

    /// 10-bit RGB (a graded master exported as RGB) keeps full colour resolution where the codec
    /// takes it: it was made 4:2:0 without a word (red and blue 6-10 dB below ffmpeg's own
    /// upscale in a helper's probe). H.264 says what it loses.
    func testTenBitRGBKeepsFullColourResolution() throws {
        let dir = try workspace(copying: ["street-rgb10.mkv"])
        let input = dir.appendingPathComponent("street-rgb10.mkv").path
        XCTAssertEqual(try MediaProbe.info(input).video?.pixelFormat, "gbrp10le")
        for codec in [VideoCodec.ffv1, .hevc] {
            let (job, summary) = try run(input, UpscaleOptions(output: dir.appendingPathComponent("out.\(codec == .hevc ? "mp4" : "mkv")").path,
                                                               encoder: EncoderSettings(codec: codec, preset: codec == .hevc ? "ultrafast" : nil)))
            XCTAssertEqual(summary.frames, 2)
            XCTAssertEqual(try MediaProbe.info(job.output).video?.pixelFormat, "yuv444p10le", codec.rawValue)
        }
        let h264 = try JobPlanner.plan(input: input, options: UpscaleOptions(output: dir.appendingPathComponent("x.mp4").path,
                                                                            encoder: EncoderSettings(codec: .h264)))
        XCTAssertEqual(try Transcoder.lossNotes(for: h264), ["'\(input)': H.264 output is 8-bit 4:2:0; use --codec hevc to keep 10 bits and 4:4:4"])
    }

    /// Decode times an encoder gives from memory it never set (x265 on a clip shorter than its
    /// B-frame delay: -1.5e15 for pictures at 0 and 1600) become the presentation times;
    /// reordered B-frames' times (up to 64 frames before the first picture) stay, as do those
    /// trailing far behind after a long pause in a variable-rate video.
    func testDecodeTimesFromUnsetMemoryAreMended() {
        let earliest: Int64 = -64 * 1600
        XCTAssertEqual(VideoEncoder.decodeTime(pts: 0, dts: -1_508_624_704_539_904, previous: nil, earliest: earliest), 0)
        XCTAssertEqual(VideoEncoder.decodeTime(pts: 1600, dts: -1_508_624_704_538_304, previous: 0, earliest: earliest), 1600)
        XCTAssertEqual(VideoEncoder.decodeTime(pts: 0, dts: 94_570_540_277_632, previous: nil, earliest: earliest), 0)
        // x265's own: the first picture 2 frames early, a B-frame after its reference.
        XCTAssertEqual(VideoEncoder.decodeTime(pts: 0, dts: -3200, previous: nil, earliest: earliest), -3200)
        XCTAssertEqual(VideoEncoder.decodeTime(pts: 1600, dts: 0, previous: -1600, earliest: earliest), 0)
        // The picture after a 60 s pause, decoded right after the one before the pause.
        XCTAssertEqual(VideoEncoder.decodeTime(pts: 96_000 * 16 + 16_000, dts: 16_000, previous: 14_400, earliest: earliest), 16_000)
        // A video opening on a 5 s still (ms): x265's first decode time 5067 ms early is within
        // the span sent (the reach `mendDecodeTime` gives), and kept.
        XCTAssertEqual(VideoEncoder.decodeTime(pts: 0, dts: -5067, previous: nil, earliest: -5067), -5067)
        XCTAssertEqual(VideoEncoder.decodeTime(pts: 5067, dts: -33, previous: -5067, earliest: -5067), -33)
        XCTAssertEqual(VideoEncoder.decodeTime(pts: noPTS, dts: 5, previous: nil, earliest: earliest), 5)
    }

    /// Closed captions carried in the pictures (CEA-608 in A/53 user data) are kept with
    /// `--codec h264`: libx264 writes the cc_data it is given, picture by picture (they were
    /// dropped with every codec). HEVC keeps them too, as an SEI in each packet (x265 drops
    /// them), in .mp4 and .mkv, at preset medium too (B-frames: packets out of picture order);
    /// FFV1 has no place for them.
    func testClosedCaptionsAreKeptInH264AndHEVC() throws {
        let dir = try workspace(copying: ["street-captions.mp4"])
        let input = dir.appendingPathComponent("street-captions.mp4").path
        let captions = MediaProbe.pictureCaptions
        let sent = try captions(input)
        XCTAssertGreaterThan(sent.count, 10)
        let h264 = dir.appendingPathComponent("h264.mp4").path
        _ = try run(input, UpscaleOptions(width: 640, output: h264, encoder: EncoderSettings(codec: .h264, preset: "ultrafast")))
        XCTAssertEqual(try captions(h264), sent)
        for (name, preset) in [("hevc.mp4", "ultrafast"), ("hevc.mkv", "medium")] {
            let hevc = dir.appendingPathComponent(name).path
            _ = try run(input, UpscaleOptions(width: 640, output: hevc, encoder: EncoderSettings(preset: preset)))
            XCTAssertEqual(try captions(hevc), sent, name)
            XCTAssertEqual(try MediaProbe.packets(hevc, stream: 0).count, 80, name)
        }
        let ffv1 = dir.appendingPathComponent("ffv1.mkv").path
        _ = try run(input, UpscaleOptions(width: 320, output: ffv1, encoder: EncoderSettings(codec: .ffv1)))
        XCTAssertEqual(try captions(ffv1).count, 0)
    }

    /// HDR10+ dynamic metadata (SMPTE ST 2094-40) is kept picture by picture in HEVC output, in
    /// .mp4 and .mkv, at preset medium too (B-frames: packets out of picture order): FFmpeg's
    /// decoder reads back from the upscaled file what it reads from the source, for every
    /// picture (it was dropped without a word). H.264 output keeps none (the note says so).
    func testHDR10PlusIsKeptPictureByPictureInHEVC() throws {
        let dir = try workspace(copying: ["hdr10plus-tos.mkv", "hdr10plus-bezier.hevc"])
        // The film excerpt has three scenes, each with its own statistics.
        for (name, width, pictures, scenes) in [("hdr10plus-tos.mkv", 512, 259, 3), ("hdr10plus-bezier.hevc", 1280, 1, 1)] {
            let input = dir.appendingPathComponent(name).path
            let sent = try MediaProbe.pictureHDR10Plus(input)
            XCTAssertEqual(sent.count, pictures, name)
            for (out, preset) in [("hevc.mp4", "ultrafast"), ("hevc.mkv", "medium")] {
                let output = dir.appendingPathComponent(name + "-" + out).path
                _ = try run(input, UpscaleOptions(width: width, output: output, encoder: EncoderSettings(preset: preset)))
                let kept = try MediaProbe.pictureHDR10Plus(output)
                XCTAssertEqual(kept.count, pictures, "\(name) → \(out)")
                // In picture order (a .mkv source's millisecond times and the output's own differ
                // by rounding).
                func messages(_ pictures: [Int: [UInt8]]) -> [[UInt8]] { pictures.sorted { $0.key < $1.key }.map(\.value) }
                let expected = messages(sent)
                XCTAssertFalse(expected.contains([]))
                XCTAssertEqual(messages(kept), expected, "\(name) → \(out)")
                XCTAssertEqual(Set(expected).count, scenes)
            }
        }
        let input = dir.appendingPathComponent("hdr10plus-tos.mkv").path
        let h264 = dir.appendingPathComponent("h264.mp4").path
        _ = try run(input, UpscaleOptions(width: 512, output: h264, encoder: EncoderSettings(codec: .h264, preset: "ultrafast")))
        XCTAssertEqual(try MediaProbe.pictureHDR10Plus(h264).count, 0)
    }

    /// Where the first HDR10+ message in `bytes` starts: its T.35 header (United States, SMPTE,
    /// ST 2094-40, application 4), found after at least one byte (the message's size).
    private func hdr10PlusMessage(in bytes: [UInt8]) -> Int? {
        let header: [UInt8] = [0xB5, 0x00, 0x3C, 0x00, 0x01, 0x04]
        return (1..<(bytes.count - header.count)).first { Array(bytes[$0..<($0 + header.count)]) == header }
    }

    /// The HDR10+ message written from FFmpeg's parsed fields is the source's own, byte for byte
    /// (the first picture's registered user data, read straight from the file and unescaped): one
    /// window with its luminance distribution, and a tone-mapping curve with 9 Bézier anchors.
    func testHDR10PlusMessageIsTheSourcesBytes() throws {
        for name in ["hdr10plus-tos.mkv", "hdr10plus-bezier.hevc"] {
            let path = Fixtures.path(name)
            let file = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
            // After its payload size (under 255 here).
            let at = try XCTUnwrap(hdr10PlusMessage(in: file), name)
            let size = Int(file[at - 1])
            var raw: [UInt8] = [], zeros = 0, i = at
            while raw.count < size {
                if zeros >= 2 && file[i] == 3 { zeros = 0; i += 1; continue }
                raw.append(file[i])
                zeros = file[i] == 0 ? zeros + 1 : 0
                i += 1
            }
            let parsed = try MediaProbe.pictureHDR10Plus(path)
            XCTAssertEqual(parsed.min { $0.key < $1.key }?.value, raw, name)
        }
    }

    /// The parts of an HDR10+ message the test streams lack, as FFmpeg's HEVC decoder reads them
    /// back from an upscaled picture: three windows (the extra two's corners, ellipse centre and
    /// axes scaled 2x: a source pixel's first, last or centre output pixel), both 4-bit
    /// luminance tables (25 x 2 and 3 x 25), colour saturation, and a message over 255 bytes
    /// (its size in two bytes) before the pictures' captions in one SEI.
    func testHDR10PlusEveryFieldSurvivesTheDecoder() throws {
        var m = AVDynamicHDRPlus()
        m.itu_t_t35_country_code = 0xB5
        m.application_version = 1
        m.num_windows = 3
        m.targeted_system_display_maximum_luminance = AVRational(num: 1000, den: 1)
        m.targeted_system_display_actual_peak_luminance_flag = 1
        m.num_rows_targeted_system_display_actual_peak_luminance = 25
        m.num_cols_targeted_system_display_actual_peak_luminance = 2
        m.mastering_display_actual_peak_luminance_flag = 1
        m.num_rows_mastering_display_actual_peak_luminance = 3
        m.num_cols_mastering_display_actual_peak_luminance = 25
        withUnsafeMutableBytes(of: &m.targeted_system_display_actual_peak_luminance) { raw in
            let t = raw.bindMemory(to: AVRational.self)
            for i in 0..<25 { for j in 0..<2 { t[i * 25 + j] = AVRational(num: Int32((i + 3 * j) % 16), den: 15) } }
        }
        withUnsafeMutableBytes(of: &m.mastering_display_actual_peak_luminance) { raw in
            let t = raw.bindMemory(to: AVRational.self)
            for i in 0..<3 { for j in 0..<25 { t[i * 25 + j] = AVRational(num: Int32((7 * i + j) % 16), den: 15) } }
        }
        func window(_ k: Int32) -> AVHDRPlusColorTransformParams {
            var p = AVHDRPlusColorTransformParams()
            p.window_upper_left_corner_x = AVRational(num: 10 * k, den: 1)
            p.window_upper_left_corner_y = AVRational(num: 5 * k, den: 1)
            p.window_lower_right_corner_x = AVRational(num: 100 + k, den: 1)
            p.window_lower_right_corner_y = AVRational(num: 60 + k, den: 1)
            p.center_of_ellipse_x = UInt16(50 + k)
            p.center_of_ellipse_y = UInt16(30 + k)
            p.rotation_angle = UInt8(45 * k)
            p.semimajor_axis_internal_ellipse = UInt16(8 * k)
            p.semimajor_axis_external_ellipse = UInt16(20 * k)
            p.semiminor_axis_external_ellipse = UInt16(12 * k)
            p.overlap_process_option = k == 1 ? AV_HDR_PLUS_OVERLAP_PROCESS_LAYERING : AV_HDR_PLUS_OVERLAP_PROCESS_WEIGHTED_AVERAGING
            p.maxscl = (AVRational(num: 1000 * k, den: 100_000), AVRational(num: 2000, den: 100_000), AVRational(num: 3000 + k, den: 100_000))
            p.average_maxrgb = AVRational(num: 500 + k, den: 100_000)
            p.num_distribution_maxrgb_percentiles = 15
            withUnsafeMutableBytes(of: &p.distribution_maxrgb) { raw in
                let d = raw.bindMemory(to: AVHDRPlusPercentile.self)
                for i in 0..<15 { d[i] = AVHDRPlusPercentile(percentage: UInt8(6 * i + 1), percentile: AVRational(num: Int32(100 * i * i) + k, den: 100_000)) }
            }
            p.fraction_bright_pixels = AVRational(num: 100 + k, den: 1000)
            p.tone_mapping_flag = 1
            p.knee_point_x = AVRational(num: 1000 + k, den: 4095)
            p.knee_point_y = AVRational(num: 2000 + k, den: 4095)
            p.num_bezier_curve_anchors = 15
            withUnsafeMutableBytes(of: &p.bezier_curve_anchors) { raw in
                let a = raw.bindMemory(to: AVRational.self)
                for i in 0..<15 { a[i] = AVRational(num: Int32(60 * i) + k, den: 1023) }
            }
            p.color_saturation_mapping_flag = 1
            p.color_saturation_weight = AVRational(num: 5 + k, den: 8)
            return p
        }
        m.params = (window(0), window(1), window(2))
        // The whole picture for the first window, as FFmpeg's parser leaves it.
        m.params.0.window_upper_left_corner_x = AVRational(num: 0, den: 1)
        m.params.0.window_upper_left_corner_y = AVRational(num: 0, den: 1)
        m.params.0.window_lower_right_corner_x = AVRational(num: 0, den: 1)
        m.params.0.window_lower_right_corner_y = AVRational(num: 0, den: 1)
        let message = try XCTUnwrap(HDR10Plus.payload(m, scale: (2, 2), output: (1280, 960)))
        XCTAssertGreaterThan(message.count, 255)
        // The upscaled picture's message, as written, in the first packet of an upscaled stream
        // (with a caption), read back by FFmpeg's decoder.
        var expected = m
        for k in 1...2 {
            func scaled(_ p: inout AVHDRPlusColorTransformParams) {
                let k = Int32(k)
                p.window_upper_left_corner_x = AVRational(num: 20 * k, den: 1)
                p.window_upper_left_corner_y = AVRational(num: 10 * k, den: 1)
                p.window_lower_right_corner_x = AVRational(num: 2 * (100 + k) + 1, den: 1)
                p.window_lower_right_corner_y = AVRational(num: 2 * (60 + k) + 1, den: 1)
                p.center_of_ellipse_x = UInt16(2 * (50 + k) + 1)
                p.center_of_ellipse_y = UInt16(2 * (30 + k) + 1)
                p.semimajor_axis_internal_ellipse = UInt16(16 * k)
                p.semimajor_axis_external_ellipse = UInt16(40 * k)
                p.semiminor_axis_external_ellipse = UInt16(24 * k)
            }
            if k == 1 { scaled(&expected.params.1) } else { scaled(&expected.params.2) }
        }
        let dir = try workspace(copying: ["hdr10plus-bezier.hevc"])
        let stream = try Data(contentsOf: URL(fileURLWithPath: dir.appendingPathComponent("hdr10plus-bezier.hevc").path))
        // The stream's own HDR10+ SEI gives way to the one made here: the picture's prefix SEI
        // units other than the first (its HDR10 mastering data) are kept; its HDR10+ one is cut.
        var bytes = [UInt8](stream)
        let at = try XCTUnwrap(hdr10PlusMessage(in: bytes))
        // The unit holding it starts at the last start code before it and ends at the next.
        let start = try XCTUnwrap((0..<at).last { bytes[$0] == 0 && bytes[$0 + 1] == 0 && bytes[$0 + 2] == 1 })
        let end = try XCTUnwrap((at..<(bytes.count - 3)).first { bytes[$0] == 0 && bytes[$0 + 1] == 0 && bytes[$0 + 2] == 1 })
        bytes.removeSubrange(start..<end)
        let slice = try XCTUnwrap(bytes.withUnsafeBufferPointer { CaptionSEI.firstSlice(in: $0) })
        let unit = try XCTUnwrap(CaptionSEI.unit([0xFC, 0x94, 0x2C], registered: [message]))
        bytes.insert(contentsOf: unit, at: slice)
        let made = dir.appendingPathComponent("made.hevc").path
        try Data(bytes).write(to: URL(fileURLWithPath: made))
        let read = try XCTUnwrap(MediaProbe.pictureHDR10Plus(made).first?.value)
        XCTAssertEqual(read, HDR10Plus.payload(expected, scale: (1, 1), output: (1280, 960)))
        XCTAssertEqual(try MediaProbe.pictureCaptions(made).first?.value, [0xFC, 0x94, 0x2C])
    }

    /// The SEI unit for captions: registered user data (ATSC's GA94 cc_data) with its counts, at
    /// most 31 triplets a message, and emulation prevention wherever two zeros precede 0...3.
    func testCaptionSEIUnit() throws {
        XCTAssertEqual(CaptionSEI.escaped([0, 0, 1, 0, 0, 0, 0, 0, 4, 0, 0]), [0, 0, 3, 1, 0, 0, 3, 0, 0, 3, 0, 4, 0, 0])
        XCTAssertNil(CaptionSEI.unit([0xFC, 0x94]))
        let one = try XCTUnwrap(CaptionSEI.unit([0xFC, 0x94, 0x2C, 0xFA]))
        XCTAssertEqual(one, [0, 0, 0, 1, 0x4E, 0x01, 4, 14, 0xB5, 0x00, 0x31, 0x47, 0x41, 0x39, 0x34, 0x03, 0x41, 0xFF, 0xFC, 0x94, 0x2C, 0xFF, 0x80])
        // 40 padding triplets (FA 00 00): two messages of 31 and 9, escaped after each 00 00.
        let many = try XCTUnwrap(CaptionSEI.unit(Array(repeating: [0xFA, 0, 0], count: 40).flatMap { $0 }))
        XCTAssertEqual(Array(many[6...17]), [4, 104, 0xB5, 0x00, 0x31, 0x47, 0x41, 0x39, 0x34, 0x03, 0x40 | 31, 0xFF])
        XCTAssertEqual(Array(many[112...123]), [4, 38, 0xB5, 0x00, 0x31, 0x47, 0x41, 0x39, 0x34, 0x03, 0x40 | 9, 0xFF])
        XCTAssertEqual(many.count, 4 + 2 + 106 + 40 + 1, "00 00 before FA or FF needs no escape")
        let zeros = try XCTUnwrap(CaptionSEI.unit([0xFC, 0, 0, 0, 0, 1]))
        XCTAssertEqual(Array(zeros[(zeros.count - 12)...]), [0x42, 0xFF, 0xFC, 0, 0, 3, 0, 0, 3, 1, 0xFF, 0x80])
        // A slice after parameter sets and an SEI, its start code three or four bytes long.
        let unit: [UInt8] = [0, 0, 0, 1, 0x40, 1, 9, 0, 0, 1, 0x4E, 1, 5, 0, 0, 0, 1, 0x26, 1, 0xAF]
        XCTAssertEqual(unit.withUnsafeBufferPointer { CaptionSEI.firstSlice(in: $0) }, 13)
        XCTAssertEqual(Array(unit[7...]).withUnsafeBufferPointer { CaptionSEI.firstSlice(in: $0) }, 6)
        XCTAssertNil([UInt8]([0, 0, 0, 9, 0x26, 1]).withUnsafeBufferPointer { CaptionSEI.firstSlice(in: $0) }, "length-prefixed")
    }

    /// `mp4` with a Dolby Vision configuration record (dvvC, or dvcC up to profile 7) in its
    /// HEVC sample entry: the boxes on the way there grow by it (the index lies after the
    /// pictures, so no offset moves).
    private func withDolbyVision(_ mp4: Data, profile: UInt8, compatibility: UInt8) throws -> Data {
        var d = [UInt8](mp4)
        func u32(_ at: Int) -> Int { d[at..<(at + 4)].reduce(0) { $0 << 8 | Int($1) } }
        func type(_ at: Int) -> String { String(decoding: d[(at + 4)..<(at + 8)], as: UTF8.self) }
        // The path to the first hvc1 entry: moov, a trak, mdia, minf, stbl, stsd, hvc1.
        func find(_ names: ArraySlice<String>, in range: Range<Int>) -> [Int]? {
            var at = range.lowerBound
            while at + 8 <= range.upperBound, u32(at) >= 8 {
                if type(at) == names.first {
                    if names.count == 1 { return [at] }
                    let inner = type(at) == "stsd" ? 16 : 8
                    if let rest = find(names.dropFirst(), in: (at + inner)..<(at + u32(at))) { return [at] + rest }
                }
                at += u32(at)
            }
            return nil
        }
        let path = try XCTUnwrap(find(["moov", "trak", "mdia", "minf", "stbl", "stsd", "hvc1"], in: 0..<d.count))
        let bits = UInt16(profile) << 9 | 4 << 3 | 1 << 2 | 1
        let payload: [UInt8] = [1, 0, UInt8(bits >> 8), UInt8(bits & 0xFF), compatibility << 4] + [UInt8](repeating: 0, count: 19)
        let record = withUnsafeBytes(of: UInt32(8 + payload.count).bigEndian, Array.init) + Array((profile <= 7 ? "dvcC" : "dvvC").utf8) + payload
        let entry = path.last!
        d.insert(contentsOf: record, at: entry + u32(entry))
        for at in path { d.replaceSubrange(at..<(at + 4), with: withUnsafeBytes(of: UInt32(u32(at) + record.count).bigEndian, Array.init)) }
        return Data(d)
    }

    /// Dolby Vision went without a word: its layer cannot be made again for the upscaled
    /// pictures. A profile 8.1 source is told it keeps its HDR10 picture; a profile 5 one (no
    /// compatible base) that its colours will be wrong. A plain HDR10 source says nothing of it.
    func testDolbyVisionIsSaidToBeLeftOut() throws {
        let dir = try workspace(copying: ["street-hdr10.mp4"])
        let hdr10 = dir.appendingPathComponent("street-hdr10.mp4")
        func notes(_ name: String) throws -> [String] {
            try Transcoder.lossNotes(for: JobPlanner.plan(input: dir.appendingPathComponent(name).path,
                                                          options: UpscaleOptions(output: dir.appendingPathComponent("out-\(name)").path)))
        }
        XCTAssertFalse(try notes("street-hdr10.mp4").contains { $0.contains("Dolby") })
        for (profile, compatibility, expected) in [(8 as UInt8, 1 as UInt8, "is Dolby Vision (profile 8); the output keeps its HDR10 picture without the Dolby Vision layer"),
                                                   (5, 0, "is Dolby Vision profile 5, whose picture needs its Dolby Vision layer to show the right colours")] {
            let name = "dv\(profile).mp4"
            try withDolbyVision(Data(contentsOf: hdr10), profile: profile, compatibility: compatibility).write(to: dir.appendingPathComponent(name))
            let said = try notes(name)
            XCTAssertEqual(said.filter { $0.contains(expected) }.count, 1, "\(said)")
            // It still upscales, and the output claims no Dolby Vision.
            let (job, _) = try run(dir.appendingPathComponent(name).path, UpscaleOptions(width: 192, encoder: EncoderSettings(preset: "ultrafast")))
            let output = try InputFile(path: job.output)
            var size = 0
            XCTAssertNil(av_stream_get_side_data(output.stream(try output.videoStreamIndex()), AV_PKT_DATA_DOVI_CONF, &size))
        }
    }

    /// Half a mastering display (primaries without luminance, or luminance alone) is left out
    /// of x265's parameters: the missing half was written as zeros (a white point of (0,0), a
    /// peak of 0 nits), which a display may tone-map against. A light level alone stays.
    func testHalfAMasteringDisplayIsLeftOut() throws {
        var m = AVMasteringDisplayMetadata()
        m.max_luminance = AVRational(num: 1000, den: 1)
        m.min_luminance = AVRational(num: 1, den: 10_000)
        m.has_luminance = 1
        var light = AVContentLightMetadata(MaxCLL: 800, MaxFALL: 300)
        let lumaOnly = withUnsafePointer(to: &m) { mp in withUnsafePointer(to: &light) { HDRMetadata(mastering: UnsafeRawPointer(mp), light: UnsafeRawPointer($0)) } }
        XCTAssertEqual(lumaOnly?.x265Parameters, "max-cll=800,300")
        XCTAssertNil(withUnsafePointer(to: &m) { HDRMetadata(mastering: UnsafeRawPointer($0), light: nil) })
        m.has_primaries = 1
        m.display_primaries = ((AVRational(num: 34000, den: 50000), AVRational(num: 16000, den: 50000)),
                               (AVRational(num: 13250, den: 50000), AVRational(num: 34500, den: 50000)),
                               (AVRational(num: 7500, den: 50000), AVRational(num: 3000, den: 50000)))
        m.white_point = (AVRational(num: 15635, den: 50000), AVRational(num: 16450, den: 50000))
        let whole = withUnsafePointer(to: &m) { HDRMetadata(mastering: UnsafeRawPointer($0), light: nil) }
        XCTAssertEqual(whole?.x265Parameters, "master-display=G(13250,34500)B(7500,3000)R(34000,16000)WP(15635,16450)L(10000000,1)")
    }

    func testTenBitHDR10StaysTenBitWithItsMetadata() throws {
        let dir = try workspace(copying: ["street-hdr10.mp4"])
        let input = dir.appendingPathComponent("street-hdr10.mp4").path
        let (job, _) = try run(input, UpscaleOptions(encoder: EncoderSettings(preset: "ultrafast"), refine: true))
        XCTAssertTrue(job.refine, "10-bit video is refined too")
        let inInfo = try MediaProbe.info(input), info = try MediaProbe.info(job.output)
        let video = try XCTUnwrap(info.video)
        XCTAssertEqual(video.pixelFormat, "yuv420p10le")
        XCTAssertEqual(video.width, 768)
        XCTAssertEqual(video.codecTag, "hvc1")
        XCTAssertEqual(video.colorTransfer, "smpte2084")
        XCTAssertEqual(video.colorPrimaries, "bt2020")
        XCTAssertEqual(video.colorSpace, inInfo.video?.colorSpace)
        let hdr = try XCTUnwrap(try HDRMetadata.firstFrame(of: input))
        XCTAssertEqual(hdr.maxLuminance, 10_000_000)
        XCTAssertEqual(try HDRMetadata.firstFrame(of: job.output), hdr)
        XCTAssertEqual(try HDRMetadata.firstFrame(of: job.output)?.contentLight?.maxCLL, 1000)
        // Picture check at 8 bits: the output is the input scaled, not shifted or swapped.
        let source = try Measure.frames(input), result = try Measure.frames(job.output)
        XCTAssertEqual(result.count, source.count)
        let expected = try SwscaleScaler(input: (384, 288), output: (768, 576)).scale(source[4].frame)
        XCTAssertGreaterThan(Measure.psnr(result[4].frame.planes[0], expected.planes[0]), 35)

        // H.264 has no 10-bit here: it is written at 8 bits.
        let h264 = try run(input, UpscaleOptions(output: dir.appendingPathComponent("h264.mp4").path,
                                                 encoder: EncoderSettings(codec: .h264, preset: "ultrafast")))
        XCTAssertEqual(try MediaProbe.info(h264.0.output).video?.pixelFormat, "yuv420p")
    }

    func testNonSquarePixelsAreKeptAndWidthIsTheDisplayedWidth() throws {
        let dir = try workspace(copying: ["street-2s.mp4"])
        let input = dir.appendingPathComponent("anamorphic.mov").path
        // Stored 768x576 with 4:3 pixels: shown 1024x576.
        try Remuxer.copy(dir.appendingPathComponent("street-2s.mp4").path, to: input, sampleAspect: (4, 3))
        XCTAssertTrue(try MediaProbe.info(input).displaySize! == (1024, 576))
        let (job, _) = try run(input, UpscaleOptions(width: 2048, encoder: EncoderSettings(preset: "ultrafast")))
        XCTAssertEqual(job.width, 1536)
        XCTAssertEqual(job.height, 1152)
        let info = try MediaProbe.info(job.output)
        XCTAssertEqual(info.video?.width, 1536)
        XCTAssertTrue(info.video!.sampleAspect == (4, 3), "\(info.video!.sampleAspect)")
        XCTAssertTrue(info.displaySize! == (2048, 1152), "\(info.displaySize!)")
    }

    /// A scale multiplies the stored picture: NTSC DV (720x480, 10:11 pixels) at 2x is stored
    /// 1440x960 and refined. Through its shown width (1309.1, rounded to 1310) it was 1442 wide,
    /// not 2x, and the refinement was off.
    func testAScaleOfNonSquarePixelsIsExactOnTheStoredPicture() throws {
        let dir = try workspace(copying: ["street-2s.mp4"])
        let dv = dir.appendingPathComponent("dv.mp4").path
        _ = try run(dir.appendingPathComponent("street-2s.mp4").path,
                    UpscaleOptions(width: 720, height: 480, output: dv, encoder: EncoderSettings(codec: .h264, preset: "ultrafast")))
        let input = dir.appendingPathComponent("dv.mov").path
        try Remuxer.copy(dv, to: input, sampleAspect: (10, 11))
        for (scale, expected) in [(nil, (1440, 960)), (2.0, (1440, 960)), (3.0, (2160, 1440)), (1.5, (1080, 720))] {
            let job = try JobPlanner.plan(input: input, options: UpscaleOptions(scale: scale, refine: true))
            XCTAssertEqual([job.width, job.height], [expected.0, expected.1], "\(String(describing: scale))")
            XCTAssertTrue(job.sampleAspect == (10, 11))
            XCTAssertEqual(job.refine, scale != 1.5, "\(String(describing: scale))")
        }
    }

    func testOddSizedPackedRGBAndPalettedInputsComeOutEvenAndFaithful() throws {
        let dir = try workspace(copying: ["street-853x479.mkv", "street-qtrle.mov", "street-pal8-png.mov"])
        for (name, expected) in [("street-853x479.mkv", (1706, 958)), ("street-qtrle.mov", (426, 322)), ("street-pal8-png.mov", (384, 288))] {
            let input = dir.appendingPathComponent(name).path
            let (job, _) = try run(input, UpscaleOptions(encoder: EncoderSettings(crf: 16, preset: "ultrafast")))
            let info = try MediaProbe.info(job.output)
            XCTAssertEqual(info.video?.width, expected.0, name)
            XCTAssertEqual(info.video?.height, expected.1, name)
            XCTAssertEqual(info.video?.pixelFormat, "yuv420p", name)
            // RGB: sRGB's colours, BT.709 primaries with the sRGB curve (SMPTE C primaries were
            // written below 720 lines), and the matrix of the conversion. The untagged YUV as
            // players show 479 lines: BT.601's matrix and curve, BT.709's primaries.
            XCTAssertEqual([info.video!.colorPrimaries, info.video!.colorTransfer, info.video!.colorSpace],
                           ["bt709", name == "street-853x479.mkv" ? "smpte170m" : "iec61966-2-1", "smpte170m"], name)
            let source = try Measure.frames(input), result = try Measure.frames(job.output)
            XCTAssertEqual(result.count, source.count, name)
            let reference = try SwscaleScaler(input: (source[0].frame.width, source[0].frame.height), output: expected)
                .scale(source[2].frame)
            XCTAssertGreaterThan(Measure.psnr(result[2].frame.planes[0], reference.planes[0]), 35, name)
        }
    }

    func testInterlacedInputIsFlaggedAndDeinterlacedOnRequest() throws {
        // Real street footage woven into top-field-first interlaced H.264: the fields are 0.1 s apart.
        let dir = try workspace(copying: ["street-interlaced.mp4"])
        let input = dir.appendingPathComponent("street-interlaced.mp4").path
        let inInfo = try MediaProbe.info(input)
        XCTAssertEqual(inInfo.video?.fieldOrder, "tt")
        let codec = EncoderSettings(codec: .ffv1)
        let (plain, _) = try run(input, UpscaleOptions(output: dir.appendingPathComponent("plain.mkv").path, encoder: codec))
        XCTAssertFalse(plain.deinterlace)
        XCTAssertTrue(plain.notices.contains { $0.contains("is interlaced (top field first)") && $0.contains("--deinterlace") }, "\(plain.notices)")
        let (job, _) = try run(input, UpscaleOptions(output: dir.appendingPathComponent("deinterlaced.mkv").path, encoder: codec,
                                                     deinterlace: true))
        XCTAssertTrue(job.deinterlace)
        XCTAssertTrue(job.notices.isEmpty, "\(job.notices)")

        // One picture per picture, at the same times.
        let inTimes = try Measure.videoSeconds(input), outTimes = try Measure.videoSeconds(job.output)
        XCTAssertEqual(outTimes.count, 20)
        XCTAssertEqual(outTimes.count, inTimes.count)
        for (a, b) in zip(inTimes, outTimes) { XCTAssertEqual(a, b, accuracy: 0.0015) }

        let before = try combing(plain.output, source: input), after = try combing(job.output, source: input)
        // Measured: 1.79 woven, 0.38 deinterlaced.
        XCTAssertGreaterThan(before, 1.2, "the woven upscale is combed where people move")
        XCTAssertLessThan(after, 0.6, "deinterlaced \(after) vs woven \(before)")

        // A progressive input is left as it is, and says so.
        let progressive = try JobPlanner.plan(input: Fixtures.path("street-2s.mp4"),
                                              options: UpscaleOptions(output: dir.appendingPathComponent("p.mp4").path, deinterlace: true))
        XCTAssertFalse(progressive.deinterlace)
        XCTAssertTrue(progressive.notices.contains { $0.contains("is not flagged interlaced") }, "\(progressive.notices)")
    }

    /// Combing of a 2x upscale at `path` where the scene moves (the input `source` changes by
    /// more than 12 levels from the previous picture): at the input's row pitch (output rows
    /// paired), the vertical second difference across neighbouring rows (the two fields) over
    /// the one across rows two apart (one field). Woven fields of moving people make the first large.
    private func combing(_ path: String, source input: String) throws -> Double {
        let source = try Measure.frames(input)
        var across = 0.0, within = 0.0
        for (index, (frame, _)) in try Measure.frames(path).enumerated() where index > 0 {
            let y = frame.planes[0], now = source[index].frame.planes[0], before = source[index - 1].frame.planes[0]
            func row(_ i: Int, _ x: Int) -> Double { (Double(y[x, 2 * i]) + Double(y[x, 2 * i + 1])) / 2 }
            for i in 2..<(y.height / 2 - 2) {
                for x in stride(from: 0, to: y.width, by: 2) where abs(Int(now[x / 2, i]) - Int(before[x / 2, i])) > 12 {
                    across += abs(2 * row(i, x) - row(i - 1, x) - row(i + 1, x))
                    within += abs(2 * row(i, x) - row(i - 2, x) - row(i + 2, x))
                }
            }
        }
        return across / within
    }

    /// Interlaced pictures in a stream that gives no field order (MPEG-4 in AVI here; every DV
    /// file): the first picture's flags say so. It was "not flagged interlaced": no note, and
    /// `--deinterlace` refused with that line while the fields were scaled together.
    func testInterlacedPicturesOfAStreamWithNoFieldOrderAreFound() throws {
        let dir = try workspace(copying: ["street-interlaced-mpeg4.avi"])
        let input = dir.appendingPathComponent("street-interlaced-mpeg4.avi").path
        XCTAssertEqual(try MediaProbe.info(input).video?.fieldOrder, "tt")
        let codec = EncoderSettings(codec: .ffv1)
        let (plain, _) = try run(input, UpscaleOptions(output: dir.appendingPathComponent("plain.mkv").path, encoder: codec))
        XCTAssertTrue(plain.notices.contains { $0.contains("is interlaced (top field first)") }, "\(plain.notices)")
        let (job, _) = try run(input, UpscaleOptions(output: dir.appendingPathComponent("deinterlaced.mkv").path, encoder: codec,
                                                     deinterlace: true))
        XCTAssertTrue(job.deinterlace)
        XCTAssertTrue(job.notices.isEmpty, "\(job.notices)")
        let before = try combing(plain.output, source: input), after = try combing(job.output, source: input)
        XCTAssertGreaterThan(before, 1.2, "the woven upscale is combed where people move")
        XCTAssertLessThan(after, 0.6, "deinterlaced \(after) vs woven \(before)")
        // A progressive stream whose container gives no field order stays progressive.
        XCTAssertEqual(try MediaProbe.info(Fixtures.path("street-mjpeg.avi")).video?.fieldOrder, "progressive")
    }

    func testAutoTriesHardwareEncodersOnlyWhereTheyLoseNothing() throws {
        let auto = EncoderSettings()
        XCTAssertEqual(auto.encoderCandidates(tenBit: false), ["hevc_nvenc", "hevc_qsv", "hevc_vaapi", "libx265"])
        XCTAssertEqual(auto.encoderCandidates(tenBit: true, layout: .yuv420), ["hevc_nvenc", "hevc_qsv", "hevc_vaapi", "libx265"])
        XCTAssertEqual(auto.encoderCandidates(tenBit: true, layout: .yuv420, hdr: true), ["libx265"], "HDR10 metadata SEI needs x265")
        XCTAssertEqual(auto.encoderCandidates(tenBit: true, layout: .yuv422), ["libx265"], "4:2:2 stays 4:2:2")
        XCTAssertEqual(EncoderSettings(hevcEncoder: "hevc_vaapi").encoderCandidates(tenBit: false), ["hevc_vaapi"])
        XCTAssertEqual(EncoderSettings(codec: .prores).encoderCandidates(tenBit: true), ["prores_ks"])

        // On a machine without those devices auto still produces the file with libx265, and an
        // HDR10 source keeps its mastering metadata (never handed to a hardware encoder).
        let dir = try workspace(copying: ["street-hdr10.mp4"])
        let input = dir.appendingPathComponent("street-hdr10.mp4").path
        let (_, summary) = try run(input, UpscaleOptions(width: 320, encoder: EncoderSettings(preset: "ultrafast")))
        XCTAssertEqual(summary.encoderName, "libx265")
    }

    /// `auto` tries VAAPI on every run; where no VAAPI device opens, the attempt ends before
    /// the encoder's context is made: that context alone is 8 MB, zeroed (1,945 page faults
    /// measured), which each run paid for nothing. Counted on this thread (its minor faults,
    /// field 10 of /proc/thread-self/stat).
    func testAVAAPIEncoderWithoutADeviceCostsNoContext() throws {
        func faults() throws -> Int {
            let stat = try String(contentsOfFile: "/proc/thread-self/stat", encoding: .utf8)
            // After the name in parentheses: state is field 3, minflt field 10.
            let fields = stat[stat.range(of: ")", options: .backwards)!.upperBound...].split(separator: " ")
            return try XCTUnwrap(Int(fields[7]))
        }
        var device: UnsafeMutablePointer<AVBufferRef>?
        if av_hwdevice_ctx_create(&device, AV_HWDEVICE_TYPE_VAAPI, nil, nil, 0) >= 0 {
            av_buffer_unref(&device)
            throw XCTSkip("a VAAPI device opens here")
        }
        let open = {
            try VideoEncoder(settings: EncoderSettings(), width: 1280, height: 720, timeBase: AVRational(num: 1, den: 30),
                             frameRate: AVRational(num: 30, den: 1), startTime: 0, color: ColorDescription(range: AVCOL_RANGE_MPEG, primaries: AVCOL_PRI_BT709, transfer: AVCOL_TRC_BT709, space: AVCOL_SPC_BT709, chromaLocation: AVCHROMA_LOC_LEFT), globalHeader: false,
                             tagHVC1: false, encoderName: "hevc_vaapi")
        }
        XCTAssertThrowsError(try open())  // the first: libraries and messages loaded
        let before = try faults()
        XCTAssertThrowsError(try open()) { error in
            XCTAssertTrue("\(error)".contains("no VAAPI device could be opened"), "\(error)")
        }
        XCTAssertLessThan(try faults() - before, 500)
    }

    func testPresetOrCRFForACodecWithoutThemIsAUsageError() throws {
        let dir = try workspace(copying: ["street-2s.mp4"])
        let input = dir.appendingPathComponent("street-2s.mp4").path
        for settings in [EncoderSettings(codec: .ffv1, preset: "fast"), EncoderSettings(codec: .prores, crf: 20)] {
            XCTAssertThrowsError(try run(input, UpscaleOptions(width: 384, encoder: settings, overwrite: true))) { error in
                let e = error as? UpscaleError
                XCTAssertEqual(e?.kind, .usage)
                XCTAssertTrue(e?.message.contains("has none, drop --") ?? false, "\(error)")
            }
        }
        for codec in [VideoCodec.hevc, .h264] {
            let settings = EncoderSettings(codec: codec, preset: "warp", hevcEncoder: codec == .hevc ? "libx265" : nil)
            XCTAssertThrowsError(try run(input, UpscaleOptions(width: 384, encoder: settings, overwrite: true))) { error in
                XCTAssertEqual((error as? UpscaleError)?.kind, .usage, "\(error)")
                XCTAssertTrue("\(error)".contains("--preset 'warp' is not a lib"), "\(error)")
            }
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir.path), ["street-2s.mp4"], "nothing left behind")
    }

    func testHLGKeepsItsTransferAndTenBits() throws {
        let dir = try workspace(copying: ["street-hlg.mp4"])
        let input = dir.appendingPathComponent("street-hlg.mp4").path
        for (index, settings) in [EncoderSettings(preset: "ultrafast"), EncoderSettings(codec: .prores)].enumerated() {
            let (job, _) = try run(input, UpscaleOptions(output: dir.appendingPathComponent("hlg\(index).mov").path, encoder: settings))
            let video = try XCTUnwrap(try MediaProbe.info(job.output).video)
            XCTAssertEqual(video.colorTransfer, "arib-std-b67", "\(settings.codec)")
            XCTAssertEqual(video.colorPrimaries, "bt2020")
            XCTAssertEqual(video.colorSpace, "bt2020nc")
            XCTAssertEqual(video.pixelFormat, settings.codec == .prores ? "yuv422p10le" : "yuv420p10le")
            XCTAssertNil(try HDRMetadata.firstFrame(of: job.output), "HLG carries no mastering metadata")
        }
        // BT.2020 primaries with no matrix: BT.2020's matrix, as players take it (it was tagged
        // BT.601, the guess for its size).
        let untagged = try workspace(copying: ["street-pq-nomatrix.mp4"]).appendingPathComponent("street-pq-nomatrix.mp4").path
        XCTAssertEqual(try MediaProbe.info(untagged).video?.colorSpace, "unknown")
        let (pqJob, _) = try run(untagged, UpscaleOptions(output: dir.appendingPathComponent("nomatrix.mp4").path, encoder: EncoderSettings(preset: "ultrafast")))
        XCTAssertEqual(try MediaProbe.info(pqJob.output).video?.colorSpace, "bt2020nc")
        XCTAssertEqual(try MediaProbe.info(pqJob.output).video?.colorTransfer, "smpte2084")
        // HLG sent as broadcast sends it: SDR BT.2020 in the headers, HLG in an alternative
        // transfer SEI (on the decoded pictures). Tagged HLG, as the ffmpeg command does; it was
        // tagged SDR BT.2020. (In chunks: the CLI test of the same name.)
        let atc = try workspace(copying: ["street-hlg-atc.mp4"]).appendingPathComponent("street-hlg-atc.mp4").path
        XCTAssertEqual(try MediaProbe.info(atc).video?.colorTransfer, "bt2020-10")
        for (name, settings) in [("atc.mp4", EncoderSettings(preset: "ultrafast")), ("atc.mkv", EncoderSettings(codec: .ffv1))] {
            let out = dir.appendingPathComponent(name).path
            _ = try run(atc, UpscaleOptions(output: out, encoder: settings))
            XCTAssertEqual(try MediaProbe.info(out).video?.colorTransfer, "arib-std-b67", name)
        }
    }

    func testTenBit422And444StayAsTheyAre() throws {
        let dir = try workspace(copying: ["street-2s.mp4", "street-444p10.mp4"])
        // A 4:2:2 10-bit source: ProRes 422 made from the real clip by the pipeline itself.
        let (prores, _) = try run(dir.appendingPathComponent("street-2s.mp4").path,
                                  UpscaleOptions(width: 384, output: dir.appendingPathComponent("422.mov").path,
                                                 encoder: EncoderSettings(codec: .prores)))
        XCTAssertEqual(try MediaProbe.info(prores.output).video?.pixelFormat, "yuv422p10le")
        let cases: [(String, EncoderSettings, String)] = [
            (prores.output, EncoderSettings(preset: "ultrafast"), "yuv422p10le"),
            (prores.output, EncoderSettings(codec: .ffv1), "yuv422p10le"),
            (dir.appendingPathComponent("street-444p10.mp4").path, EncoderSettings(preset: "ultrafast"), "yuv444p10le"),
            // ProRes 422 takes 4:4:4 down to 4:2:2.
            (dir.appendingPathComponent("street-444p10.mp4").path, EncoderSettings(codec: .prores), "yuv422p10le"),
        ]
        for (index, (input, settings, format)) in cases.enumerated() {
            let out = dir.appendingPathComponent("out\(index).\(settings.codec == .ffv1 ? "mkv" : "mov")").path
            let (job, _) = try run(input, UpscaleOptions(output: out, encoder: settings))
            let info = try MediaProbe.info(job.output), inInfo = try MediaProbe.info(input)
            XCTAssertEqual(info.video?.pixelFormat, format, "\(input) with \(settings.codec)")
            XCTAssertEqual(info.video?.width, 2 * inInfo.video!.width)
            // The picture is the input upscaled (compared at 8 bits, 4:2:0).
            let source = try Measure.frames(input), result = try Measure.frames(job.output)
            XCTAssertEqual(result.count, source.count)
            let size = (inInfo.video!.width, inInfo.video!.height)
            let expected = try SwscaleScaler(input: size, output: (2 * size.0, 2 * size.1)).scale(source[3].frame)
            for plane in 0..<3 {
                XCTAssertGreaterThan(Measure.psnr(result[3].frame.planes[plane], expected.planes[plane]), 35, "\(format) plane \(plane)")
            }
        }
    }

    func testVariableFrameRateKeepsEveryPresentationTime() throws {
        let dir = try workspace(copying: ["street-2s.mp4"])
        let input = dir.appendingPathComponent("vfr.mkv").path
        // 10 fps for the first second, then 20 fps: time base 1/10240, 1024 ticks a frame at first.
        try Remuxer.copy(dir.appendingPathComponent("street-2s.mp4").path, to: input) { t in t < 10240 ? t : 10240 + (t - 10240) / 2 }
        let inTimes = try Measure.videoSeconds(input)
        XCTAssertEqual(inTimes[11] - inTimes[10], 0.05, accuracy: 0.002, "the clip is variable-rate")
        XCTAssertEqual(inTimes[5] - inTimes[4], 0.1, accuracy: 0.002)
        let (job, _) = try run(input, UpscaleOptions(width: 384, encoder: EncoderSettings(preset: "ultrafast")))
        let outTimes = try Measure.videoSeconds(job.output)
        XCTAssertEqual(outTimes.count, inTimes.count)
        for (a, b) in zip(inTimes, outTimes) { XCTAssertEqual(a, b, accuracy: 0.0015) }
    }

    func testStartOffsetIsKept() throws {
        let dir = try workspace(copying: ["street-2s.mp4"])
        for ext in ["mkv", "mov"] {
            let input = dir.appendingPathComponent("late.\(ext)").path
            // The video starts 0.5 s into the timeline (time base 1/10240).
            try Remuxer.copy(dir.appendingPathComponent("street-2s.mp4").path, to: input) { $0 + 5120 }
            let firstPTS = { (path: String) -> Double in
                let info = try MediaProbe.info(path)
                let first = try MediaProbe.packets(path, stream: info.videoStreamIndex!).compactMap(\.pts).min()!
                return Double(first) * Double(info.video!.timeBase.num) / Double(info.video!.timeBase.den)
            }
            let start = try firstPTS(input)
            XCTAssertGreaterThanOrEqual(start, 0.5, ext)
            let (job, _) = try run(input, UpscaleOptions(width: 384, encoder: EncoderSettings(preset: "ultrafast")))
            XCTAssertEqual(try firstPTS(job.output), start, accuracy: 0.002, ext)
        }
    }

    func testEveryAudioStreamIsKept() throws {
        let dir = try workspace(copying: ["street-2s.mp4", "tone.m4a"])
        let input = dir.appendingPathComponent("two-tracks.mov").path
        try Remuxer.copy(dir.appendingPathComponent("street-2s.mp4").path, to: input,
                         adding: [dir.appendingPathComponent("tone.m4a").path])
        let inAudio = try MediaProbe.info(input).streams.filter { $0.kind == .audio }
        XCTAssertEqual(inAudio.count, 2)
        let (job, summary) = try run(input, UpscaleOptions(width: 384, encoder: EncoderSettings(preset: "ultrafast")))
        XCTAssertEqual(summary.audioCopied, 2)
        let outAudio = try MediaProbe.info(job.output).streams.filter { $0.kind == .audio }
        XCTAssertEqual(outAudio.count, 2)
        for (a, b) in zip(inAudio, outAudio) {
            XCTAssertEqual(try MediaProbe.packets(job.output, stream: b.index).map(\.checksum),
                           try MediaProbe.packets(input, stream: a.index).map(\.checksum))
        }
    }

    func testOpusInWebMIsReencodedToAACInMov() throws {
        let dir = try workspace(copying: ["street-vp9-opus.webm"])
        let input = dir.appendingPathComponent("street-vp9-opus.webm").path
        let (job, summary) = try run(input, UpscaleOptions(encoder: EncoderSettings(codec: .h264, preset: "ultrafast")))
        XCTAssertTrue(job.output.hasSuffix("street-vp9-opus Upscaled.mov"))
        XCTAssertTrue(job.notices.contains { $0.contains(".webm cannot hold hevc") || $0.contains(".webm") })
        XCTAssertEqual(summary.audioTranscoded, 1)
        let inInfo = try MediaProbe.info(input)
        let info = try MediaProbe.info(job.output)
        XCTAssertEqual(info.video?.codec, "h264")
        XCTAssertEqual(info.video?.width, 640)
        let audio = try XCTUnwrap(info.streams.first { $0.kind == .audio })
        XCTAssertEqual(audio.codec, "aac")
        XCTAssertEqual(audio.sampleRate, 48000)
        XCTAssertEqual(info.duration, inInfo.duration, accuracy: 0.15)
        XCTAssertEqual(try Measure.frames(job.output).count, try Measure.frames(input).count)
    }

    /// ProRes 4444, and VP9 with alpha in WebM (which only libvpx decodes with its alpha: FFmpeg's
    /// own VP9 decoder gave the colour alone, and the output was opaque without a note).
    func testAlphaChannelIsUpscaledIntoProRes4444AndFFV1() throws {
        for name in ["street-prores4444-alpha.mov", "street-vp9-alpha.webm"] { try checkAlphaKept(name) }
    }

    private func checkAlphaKept(_ name: String) throws {
        let dir = try workspace(copying: [name])
        let input = dir.appendingPathComponent(name).path
        XCTAssertEqual(try MediaProbe.info(input).video?.hasAlpha, true, name)
        let source = try VideoFrameReader(path: input, layout: .yuva444)
        var sources: [Frame] = []
        while let next = try source.next() { sources.append(next.frame) }
        let (w, h) = (source.width, source.height)
        // The fixture's alpha: left half opaque, right half transparent.
        XCTAssertGreaterThanOrEqual(sources[0].planes[3][10, h / 2], 250, name)
        XCTAssertLessThanOrEqual(sources[0].planes[3][w - 10, h / 2], 5, name)
        let alphaReference = try SwscaleScaler(input: (w, h), output: (2 * w, 2 * h), layout: .gray)
        for (codec, ext) in [(VideoCodec.prores, "mov"), (.ffv1, "mkv")] {
            let out = dir.appendingPathComponent("out.\(ext)").path
            let (job, summary) = try run(input, UpscaleOptions(output: out, encoder: EncoderSettings(codec: codec)))
            XCTAssertTrue(job.keepsAlpha)
            XCTAssertEqual(summary.frames, sources.count)
            let info = try MediaProbe.info(out)
            XCTAssertEqual(info.video?.hasAlpha, true, "\(codec)")
            XCTAssertEqual(info.video?.width, 2 * w)
            let reader = try VideoFrameReader(path: out, layout: .yuva444)
            var count = 0
            while let next = try reader.next() {
                let expected = alphaReference.scale(Frame(width: w, height: h, layout: .gray, planes: [sources[count].planes[3]]))
                XCTAssertGreaterThan(Measure.psnr(next.frame.planes[3], expected.planes[0]), 40, "\(name) \(codec) frame \(count) alpha")
                // Within what the source gives there (VP9's alpha is lossy: 254 for 255).
                XCTAssertEqual(Int(next.frame.planes[3][20, h]), Int(sources[count].planes[3][10, h / 2]), accuracy: 1, "\(name) \(codec): opaque stays opaque")
                XCTAssertEqual(Int(next.frame.planes[3][2 * w - 20, h]), Int(sources[count].planes[3][w - 10, h / 2]), accuracy: 1, "\(name) \(codec): transparent stays transparent")
                count += 1
            }
            XCTAssertEqual(count, sources.count)
        }
    }

    /// Matroska attachments (the fonts an ASS track is drawn with, notes) are kept byte for byte
    /// in .mkv (they were dropped with a note), and named as not copied in .mp4. (An image
    /// attachment is read by FFmpeg as cover art, a picture stream, which stays as it was.)
    func testMatroskaAttachmentsAreKept() throws {
        let dir = try workspace(copying: ["street-subs.mkv", "README.md"])
        let input = dir.appendingPathComponent("film.mkv").path
        try Remuxer.copy(dir.appendingPathComponent("street-subs.mkv").path, to: input,
                         attaching: [(dir.appendingPathComponent("README.md").path, "text/markdown")])
        let source = try MediaProbe.attachments(input)
        XCTAssertEqual(source.count, 1)
        for ext in ["mkv", "mp4"] {
            let out = dir.appendingPathComponent("out.\(ext)").path
            _ = try run(input, UpscaleOptions(width: 384, output: out, encoder: EncoderSettings(preset: "ultrafast")))
            let kept = try MediaProbe.attachments(out)
            if ext == "mkv" {
                XCTAssertEqual(kept.map(\.name), ["README.md"])
                XCTAssertEqual(kept.map(\.mimeType), ["text/markdown"])
                XCTAssertEqual(kept.first?.bytes, try Data(contentsOf: dir.appendingPathComponent("README.md")))
            } else {
                XCTAssertTrue(kept.isEmpty)
            }
            XCTAssertEqual(try MediaProbe.info(out).video?.width, 384, ext)
        }
        // --strip keeps them too: the muxer refused an attachment stripped of its name and type
        // ("cannot start … Invalid argument", nothing written).
        let stripped = dir.appendingPathComponent("stripped.mkv").path
        var strip = UpscaleOptions(width: 384, output: stripped, encoder: EncoderSettings(preset: "ultrafast"))
        strip.stripMetadata = true
        _ = try run(input, strip)
        XCTAssertEqual(try MediaProbe.attachments(stripped).map(\.name), ["README.md"])
    }

    /// A stream-copied cut (an MP4 edit list hides its run-in: `ffmpeg -ss … -c copy`, a phone's
    /// trim) into Matroska, which has no edit list: the picture starts at 0 and the file is as
    /// long as the cut. The hidden audio packets were copied, and the muxer moved everything by
    /// their length: the picture started a second late and the sound cut away was heard.
    func testAnEditListCutKeepsItsStartInMatroska() throws {
        let dir = try workspace(copying: ["street-2s.mp4"])
        let cut = dir.appendingPathComponent("cut.mp4").path
        try Remuxer.copy(dir.appendingPathComponent("street-2s.mp4").path, to: cut, delay: -1.0)
        let source = try MediaProbe.info(cut)
        XCTAssertEqual(source.duration, 1.0, accuracy: 0.1, "the edit list hides the first second")
        for ext in ["mkv", "mp4"] {
            let (job, summary) = try run(cut, UpscaleOptions(width: 256, output: dir.appendingPathComponent("out.\(ext)").path,
                                                             encoder: EncoderSettings(preset: "ultrafast")))
            XCTAssertEqual(summary.audioCopied, 1)
            XCTAssertEqual(try MediaProbe.info(job.output).duration, source.duration, accuracy: 0.1, ext)
            XCTAssertEqual(try Measure.videoSeconds(job.output).first ?? -1, 0, accuracy: 0.05, ext)
        }
    }

    /// A 360° video stays one: its projection reaches .mp4 and .mkv outputs (it was dropped,
    /// and players showed a flat equirectangular picture; FFmpeg 5.1 writes none into .mov,
    /// which gets a note).
    func testA360VideoKeepsItsProjection() throws {
        let dir = try workspace(copying: ["street-2s.mp4"])
        let vr = dir.appendingPathComponent("vr.mp4").path
        try Remuxer.copy(dir.appendingPathComponent("street-2s.mp4").path, to: vr, spherical: true)
        XCTAssertEqual(try MediaProbe.info(vr).video?.projection, "equirectangular")
        for ext in ["mp4", "mkv"] {
            let (job, _) = try run(vr, UpscaleOptions(width: 256, output: dir.appendingPathComponent("out.\(ext)").path,
                                                      encoder: EncoderSettings(preset: "ultrafast")))
            XCTAssertEqual(try MediaProbe.info(job.output).video?.projection, "equirectangular", ext)
        }
    }

    /// Opus copied from Matroska into Matroska keeps its place, generation after generation:
    /// FFmpeg 5.1 reads its codec delay off the timestamps and wrote it without adding it back,
    /// so the sound began 6.5 ms before 0 and the muxer moved the picture 7 ms later each time.
    func testOpusInMatroskaKeepsItsPlaceAcrossGenerations() throws {
        let dir = try workspace(copying: ["street-vp9-opus.webm"])
        var input = dir.appendingPathComponent("street-vp9-opus.webm").path
        let videoStart = try XCTUnwrap(try Measure.videoSeconds(input).first)
        for generation in 1...2 {
            let (job, summary) = try run(input, UpscaleOptions(width: 256, output: dir.appendingPathComponent("gen\(generation).mkv").path,
                                                               encoder: EncoderSettings(preset: "ultrafast")))
            XCTAssertEqual(summary.audioCopied, 1)
            XCTAssertEqual(try XCTUnwrap(try Measure.videoSeconds(job.output).first), videoStart, accuracy: 0.001, "generation \(generation)")
            input = job.output
        }
    }

    /// Closed captions (EIA-608, a QuickTime c608 track) converted to mov_text for .mp4 and
    /// SubRip for .mkv keep their times. Each caption came a caption late (the decoder gives one
    /// while decoding a later packet, and it was stamped with that packet's time), and the last,
    /// which it gives only when flushed at the end, was lost.
    func testConvertedClosedCaptionsKeepTheirTimes() throws {
        let dir = try workspace(copying: ["street-2s.mp4"])
        let scc = dir.appendingPathComponent("captions.scc")
        let cue = "9420 9420 94ae 94ae 9452 9452 97a2 97a2"
        try ("Scenarist_SCC V1.0\n\n00:00:00:01\t\(cue) c8e5 ecec ef80 942f 942f\n\n00:00:00:10\t\(cue) 54f7 ef80 942f 942f\n\n"
             + "00:00:00:20\t\(cue) 54e8 f2e5 e580 942f 942f\n\n00:00:00:28\t942c 942c\n\n").write(to: scc, atomically: true, encoding: .utf8)
        let captioned = dir.appendingPathComponent("captioned.mov").path
        try Remuxer.copy(dir.appendingPathComponent("street-2s.mp4").path, to: captioned, adding: [scc.path])
        XCTAssertEqual(try MediaProbe.info(captioned).streams.filter { $0.kind == .subtitle }.map(\.codec), ["eia_608"])
        for (ext, codec) in [("mp4", "mov_text"), ("mkv", "subrip")] {
            let (job, _) = try run(captioned, UpscaleOptions(width: 256, output: dir.appendingPathComponent("out.\(ext)").path,
                                                             encoder: EncoderSettings(preset: "ultrafast")))
            let info = try MediaProbe.info(job.output)
            let track = try XCTUnwrap(info.streams.first { $0.kind == .subtitle })
            XCTAssertEqual(track.codec, codec)
            // mov_text's empty samples (2 bytes) fill the time between captions. (.mkv moves every
            // stream by the AAC priming, 21 ms.)
            let shown = try MediaProbe.packets(job.output, stream: track.index).filter { $0.size > 2 }
                .compactMap { $0.pts.map { Double($0) * Double(track.timeBase.num) / Double(track.timeBase.den) } }
            XCTAssertEqual(shown.count, 3, "\(ext): \(shown)")
            for (time, expected) in zip(shown, [1.0 / 29.97, 10 / 29.97, 20 / 29.97]) { XCTAssertEqual(time, expected, accuracy: 0.03, "\(ext): \(shown)") }
        }
    }

    /// Audio re-encoded to AAC keeps its timing across a gap in its timestamps (a recorder that
    /// paused its sound, a stretch lost to damage): silence fills the gap. The AAC frames were
    /// numbered by their samples, so the sound after a 0.5 s gap played 0.5 s early and the
    /// track ended 0.5 s short. (Copied audio keeps its timestamps as they are.)
    func testReencodedAudioKeepsItsTimingAcrossAGap() throws {
        let dir = try workspace(copying: ["street-vp9-opus.webm"])
        // A 0.5 s gap, and a dropout of 4 Opus packets (80 ms), which was left unfilled below 0.1 s.
        for (name, lost) in [("gapped", 0.4...0.9), ("dropout", 0.4...0.47)] {
            let gapped = dir.appendingPathComponent("\(name).webm").path
            try Remuxer.copy(dir.appendingPathComponent("street-vp9-opus.webm").path, to: gapped, dropAudio: lost)
            let sourceEnd = try Measure.audioEnd(gapped)
            XCTAssertGreaterThan(sourceEnd, 1.3)
            let out = dir.appendingPathComponent("\(name).mov").path
            let (_, summary) = try run(gapped, UpscaleOptions(width: 256, output: out, encoder: EncoderSettings(preset: "ultrafast")))
            XCTAssertEqual(summary.audioTranscoded, 1)
            XCTAssertEqual(try Measure.audioEnd(out), sourceEnd, accuracy: 0.03, name)
        }
    }

    /// Cover art (the thumbnail a downloader or editor embeds) is kept byte for byte: as the
    /// .mp4's cover, and as an .mkv image attachment whichever it came from (FFmpeg 5.1's
    /// Matroska muxer makes a copied picture a one-frame video track, so it is written as the
    /// attachment it is in .mkv files). .mov cannot hold it. It was dropped with a note.
    func testCoverArtIsKept() throws {
        let dir = try workspace(copying: ["street-2s.mp4", "butterfly.jpg"])
        let picture = dir.appendingPathComponent("butterfly.jpg").path
        let jpeg = try Data(contentsOf: URL(fileURLWithPath: picture))
        let mp4 = dir.appendingPathComponent("thumbnailed.mp4").path
        try Remuxer.copy(dir.appendingPathComponent("street-2s.mp4").path, to: mp4, cover: picture)
        let mkv = dir.appendingPathComponent("thumbnailed.mkv").path
        try Remuxer.copy(dir.appendingPathComponent("street-2s.mp4").path, to: mkv, attaching: [(picture, "image/jpeg")])
        for input in [mp4, mkv] {
            XCTAssertEqual(try MediaProbe.coverArt(input), [jpeg], input)
            for ext in input == mp4 ? ["mp4", "mkv", "mov"] : ["mkv", "mp4"] {
                let out = dir.appendingPathComponent("out.\(ext)").path
                _ = try run(input, UpscaleOptions(width: 384, output: out, encoder: EncoderSettings(preset: "ultrafast"), overwrite: true))
                XCTAssertEqual(try MediaProbe.coverArt(out), ext == "mov" ? [] : [jpeg], "\(input) → .\(ext)")
                let info = try MediaProbe.info(out)
                // One real video track (the upscaled one), whatever holds the picture.
                XCTAssertEqual(info.streams.filter { $0.kind == .video && !$0.isAttachedPicture }.count, 1, "\(input) → .\(ext)")
                XCTAssertEqual(info.video?.width, 384)
                XCTAssertEqual(info.streams.filter { $0.kind == .audio }.count, 1)
            }
        }
        // --strip leaves the cover out: it carries its own EXIF (a camera's location, make,
        // model), which was copied with it.
        let out = dir.appendingPathComponent("stripped.mp4").path
        var strip = UpscaleOptions(width: 384, output: out, encoder: EncoderSettings(preset: "ultrafast"))
        strip.stripMetadata = true
        _ = try run(mp4, strip)
        XCTAssertEqual(try MediaProbe.coverArt(out), [])
    }

    /// Full-range 10-bit into ProRes, which is limited range: the samples are converted (black
    /// 64 of 1023 becomes 119). They went in as they were, tagged limited: crushed blacks and
    /// clipped whites. 4:4:4 and 4:2:0 sources (4:2:2 ProRes is made with and without a
    /// change of layout); 4:2:2 full range was copied, 4:2:0 converted without its range.
    func testFullRange10BitIntoProResIsConverted() throws {
        let dir = try workspace(copying: ["street-444p10.mp4", "street-hdr10.mp4"])
        // 4:2:2 10-bit, ProRes's own layout (no layout change, which alone had converted nothing).
        let prores = dir.appendingPathComponent("source-422p10.mov").path
        _ = try run(dir.appendingPathComponent("street-444p10.mp4").path,
                    UpscaleOptions(scale: 1, output: prores, encoder: EncoderSettings(codec: .prores), refine: false))
        XCTAssertEqual(try MediaProbe.info(prores).video?.pixelFormat, "yuv422p10le")
        for name in ["street-444p10", "street-hdr10", "street-422p10"] {
            let lossless = dir.appendingPathComponent("\(name)-ffv1.mkv").path
            let original = name == "street-422p10" ? prores : dir.appendingPathComponent("\(name).mp4").path
            let source = try XCTUnwrap(try MediaProbe.info(original).video)
            _ = try run(original, UpscaleOptions(width: source.width, output: lossless, encoder: EncoderSettings(codec: .ffv1)))
            // The same samples (64…940 at most) said to be full range.
            let full = dir.appendingPathComponent("\(name)-full.mkv").path
            try Remuxer.copy(lossless, to: full, range: AVCOL_RANGE_JPEG)
            XCTAssertEqual(try MediaProbe.info(full).video?.colorRange, "pc")
            let limits = try lumaLimits(full)
            let (job, _) = try run(full, UpscaleOptions(output: dir.appendingPathComponent("\(name).mov").path,
                                                        encoder: EncoderSettings(codec: .prores), refine: false))
            XCTAssertEqual(try MediaProbe.info(job.output).video?.colorRange, "tv")
            let converted = try lumaLimits(job.output)
            // Read as 8-bit, each in its own range: v → 16 + v·219/255 (a Lanczos upscale
            // overshoots a little at edges; unconverted, the limits stayed where they were).
            XCTAssertEqual(Double(converted.low), 16 + Double(limits.low) * 219 / 255, accuracy: 8, "\(name): \(limits) → \(converted)")
            XCTAssertEqual(Double(converted.high), 16 + Double(limits.high) * 219 / 255, accuracy: 8, "\(name): \(limits) → \(converted)")
        }
    }

    /// The lowest and highest luma sample of a file's first picture, read as 8-bit.
    private func lumaLimits(_ path: String) throws -> (low: Int, high: Int) {
        let plane = try XCTUnwrap(try VideoFrameReader(path: path).next()).frame.planes[0]
        var low = Int.max, high = Int.min
        for y in 0..<plane.height {
            for x in 0..<plane.width {
                let v = Int(plane.base[y * plane.stride + x])
                low = min(low, v)
                high = max(high, v)
            }
        }
        return (low, high)
    }

    /// mkvmerge's per-track statistics (bit rate, bytes, frames, its name) and WebM's alpha flag
    /// describe the source's packets: a re-encoded stream leaves them out (an upscaled video was
    /// reported at its source's bit rate and size, and an opaque HEVC as having alpha); a copied
    /// stream keeps them. RGB keeps its primaries and curve (every RGB source was tagged BT.709
    /// with the sRGB curve: a PQ BT.2020 master came out tagged SDR).
    func testStaleStatisticsAreDroppedAndRGBKeepsItsColourTags() throws {
        let dir = try workspace(copying: ["street-2s.mp4", "street-qtrle.mov"])
        let stats = ["BPS": "318384", "NUMBER_OF_BYTES": "39798", "NUMBER_OF_FRAMES": "48", "_STATISTICS_WRITING_APP": "mkvmerge v74.0.0"]
        let input = dir.appendingPathComponent("muxed.mkv").path
        try Remuxer.copy(dir.appendingPathComponent("street-2s.mp4").path, to: input,
                         streamTags: [0: stats.merging(["alpha_mode": "1"]) { a, _ in a }, 1: stats])
        XCTAssertEqual(try MediaProbe.info(input).streams[0].tags["BPS"], "318384")
        let out = dir.appendingPathComponent("out.mkv").path
        _ = try run(input, UpscaleOptions(width: 384, output: out, encoder: EncoderSettings(preset: "ultrafast")))
        let streams = try MediaProbe.info(out).streams
        let video = try XCTUnwrap(streams.first { $0.kind == .video })
        for key in ["BPS", "NUMBER_OF_BYTES", "NUMBER_OF_FRAMES", "_STATISTICS_WRITING_APP", "ALPHA_MODE"] {
            XCTAssertNil(video.tags.first { $0.key.uppercased() == key }, "\(key): \(video.tags)")
        }
        XCTAssertFalse(video.alphaTagged)
        XCTAssertEqual(streams.first { $0.kind == .audio }?.tags["BPS"], "318384", "the copied audio keeps its own")

        let hdr = dir.appendingPathComponent("rgb-pq.mov").path
        try Remuxer.copy(dir.appendingPathComponent("street-qtrle.mov").path, to: hdr, color: (AVCOL_PRI_BT2020, AVCOL_TRC_SMPTE2084))
        let source = try XCTUnwrap(try MediaProbe.info(hdr).video)
        XCTAssertEqual([source.colorPrimaries, source.colorTransfer], ["bt2020", "smpte2084"])
        let (job, _) = try run(hdr, UpscaleOptions(output: dir.appendingPathComponent("rgb-pq.mkv").path, encoder: EncoderSettings(codec: .ffv1)))
        let result = try XCTUnwrap(try MediaProbe.info(job.output).video)
        XCTAssertEqual([result.colorPrimaries, result.colorTransfer, result.colorSpace], ["bt2020", "smpte2084", "bt2020nc"])
    }

    /// A phone's QuickTime keys (an iPhone's location, make and model; Android's capture rate,
    /// which marks slow motion) are kept in .mov and .mp4, beside the title. They were dropped:
    /// the muxer writes only the keys it has an atom for, unless told to write them all.
    func testPhoneMetadataKeysAreKept() throws {
        let dir = try workspace(copying: ["street-2s.mp4"])
        let phone = dir.appendingPathComponent("phone.mov").path
        let keys = ["com.apple.quicktime.location.ISO6709": "+48.8584+002.2945+035.000/",
                    "com.apple.quicktime.make": "Apple", "com.apple.quicktime.model": "iPhone 15 Pro",
                    "com.android.capture.fps": "240.000000", "title": "Street"]
        try Remuxer.copy(dir.appendingPathComponent("street-2s.mp4").path, to: phone, metadata: keys)
        XCTAssertEqual(try MediaProbe.info(phone).tags.filter { keys[$0.key] != nil }, keys)
        for ext in ["mov", "mp4", "mkv"] {
            let out = dir.appendingPathComponent("out.\(ext)").path
            _ = try run(phone, UpscaleOptions(width: 256, output: out, encoder: EncoderSettings(preset: "ultrafast")))
            let tags = try MediaProbe.info(out).tags
            for (key, value) in keys { XCTAssertEqual(tags[key] ?? tags[key.uppercased()], value, "\(ext): \(key)") }
        }
    }

    /// Audio tracks re-encoded to AAC keep their flags: the second track, the default (say the
    /// original language of a film), stays the default. Re-encoded tracks had none, and the
    /// first became the default.
    func testReencodedAudioKeepsWhichTrackIsTheDefault() throws {
        let dir = try workspace(copying: ["street-vp9-opus.webm"])
        let source = dir.appendingPathComponent("street-vp9-opus.webm").path
        let two = dir.appendingPathComponent("two.mkv").path
        // Streams: the video and its Opus, then the same again (the second video is left out).
        try Remuxer.copy(source, to: two, adding: [source], dispositions: [1: 0, 3: 1]) // AV_DISPOSITION_DEFAULT
        XCTAssertEqual(try MediaProbe.info(two).streams.filter { $0.kind == .audio }.map(\.isDefault), [false, true])
        let out = dir.appendingPathComponent("two.mov").path
        _ = try run(two, UpscaleOptions(width: 256, output: out, encoder: EncoderSettings(preset: "ultrafast")))
        let audio = try MediaProbe.info(out).streams.filter { $0.kind == .audio }
        XCTAssertEqual(audio.map(\.codec), ["aac", "aac"])
        XCTAssertEqual(audio.map(\.isDefault), [false, true])
    }

    /// An open-GOP H.264 clip cut with `ffmpeg -ss 1.3 -c copy`: its first pictures in decoding
    /// order (before the edit list's start, never shown) lost their references to the cut. Their
    /// decoding failure failed the whole job as damaged ("undecodable video at frame -2"); the
    /// 17 pictures shown are upscaled, each at its time.
    func testAnOpenGOPCutWhoseHiddenPicturesFailIsUpscaled() throws {
        let dir = try workspace(copying: ["street-opengop-cut.mp4"])
        let input = dir.appendingPathComponent("street-opengop-cut.mp4").path
        let (job, summary) = try run(input, UpscaleOptions(width: 640, encoder: EncoderSettings(preset: "ultrafast")))
        XCTAssertEqual(summary.frames, 17)
        let times = try Measure.videoSeconds(job.output)
        XCTAssertEqual(times.count, 17)
        XCTAssertEqual(times.first ?? -1, 0, accuracy: 0.001)
        XCTAssertEqual(zip(times, times.dropFirst()).map { $1 - $0 }.max() ?? 0, 0.1, accuracy: 0.001)
    }

    /// Stream-copied cuts of an open-GOP H.264 stream with reference B-pictures (x264's
    /// pyramid), in Matroska (length-prefixed units) and MPEG-TS (start codes): the first
    /// keyframe is no IDR picture, and a picture after it names cut-away pictures in its
    /// reference commands ("mmco: unref short failure"). The ffmpeg command decodes them with
    /// that warning; under AV_EF_EXPLODE the whole file failed as damaged at frame 4 or 5.
    /// They are decoded as FFmpeg decodes them: at the picture's own size into FFV1 the same
    /// pictures bit for bit, as many, and upscaled 2x in H.265.
    func testOpenGOPCutsThatStartWithoutAnIDRPictureDecodeAsFFmpegDecodesThem() throws {
        for (name, count) in [("street-opengop-mmco-cut.mkv", 24), ("street-opengop-mmco-cut.ts", 9)] {
            let dir = try workspace(copying: [name])
            let input = dir.appendingPathComponent(name).path
            let reference = try plainLuma(input)
            XCTAssertEqual(reference.count, count, name)
            let same = dir.appendingPathComponent("same.mkv").path
            let (_, summary) = try run(input, UpscaleOptions(width: 320, output: same, encoder: EncoderSettings(codec: .ffv1)))
            XCTAssertEqual(summary.frames, count, name)
            let reader = try VideoFrameReader(path: same)
            var index = 0
            while let (frame, _) = try reader.next() {
                let plane = frame.planes[0]
                XCTAssertEqual(plane.width * plane.height, 320 * 240)
                let rows = (0..<plane.height).flatMap { y in Array(UnsafeBufferPointer(start: plane.base + y * plane.stride, count: plane.width)) }
                XCTAssertTrue(index < reference.count && rows == reference[index], "\(name) picture \(index) differs from FFmpeg's")
                index += 1
            }
            XCTAssertEqual(index, count, name)
            let (job, upscaled) = try run(input, UpscaleOptions(width: 640, encoder: EncoderSettings(preset: "ultrafast")))
            XCTAssertEqual(upscaled.frames, count, name)
            XCTAssertEqual(try Measure.videoSeconds(job.output).count, count, name)
        }
    }

    /// The Matroska cut stream-copied into MPEG-TS: the parameter sets live in Matroska's
    /// header, and the TS muxer's conversion writes them only before an IDR picture, which
    /// this cut never reaches. The stream probes as 0x0; its aspect ratio was NaN and the
    /// planner trapped (the parent said "upscaling crashed (SIGILL)"). One line, of the file.
    func testAStreamWithoutParameterSetsIsRefusedAsDamaged() throws {
        let dir = try workspace(copying: ["street-opengop-mmco-cut.mkv"])
        let input = dir.appendingPathComponent("remuxed.ts").path
        try Remuxer.copy(dir.appendingPathComponent("street-opengop-mmco-cut.mkv").path, to: input)
        XCTAssertThrowsError(try JobPlanner.plan(input: input, options: UpscaleOptions(width: 640))) { error in
            let e = error as? UpscaleError
            XCTAssertEqual(e?.kind, .input)
            XCTAssertEqual(e?.message, "'\(input)': the video stream has no picture size (its decoder found no parameter sets); the file may be damaged — re-export it")
        }
    }

    /// The luma of every picture of `path`'s video as FFmpeg decodes it with its defaults
    /// (concealing, one thread): the reference the ffmpeg command would give.
    private func plainLuma(_ path: String) throws -> [[UInt8]] {
        var opened: UnsafeMutablePointer<AVFormatContext>?
        XCTAssertGreaterThanOrEqual(avformat_open_input(&opened, path, nil, nil), 0)
        let format = try XCTUnwrap(opened, path)
        defer { avformat_close_input(&opened) }
        XCTAssertGreaterThanOrEqual(avformat_find_stream_info(format, nil), 0)
        let index = av_find_best_stream(format, AVMEDIA_TYPE_VIDEO, -1, -1, nil, 0)
        let par = try XCTUnwrap(format.pointee.streams[Int(index)]?.pointee.codecpar)
        let codec = try XCTUnwrap(avcodec_find_decoder(par.pointee.codec_id))
        var context = avcodec_alloc_context3(codec)
        defer { avcodec_free_context(&context) }
        XCTAssertGreaterThanOrEqual(avcodec_parameters_to_context(context, par), 0)
        context!.pointee.thread_count = 1
        XCTAssertGreaterThanOrEqual(avcodec_open2(context, codec, nil), 0)
        var packet = av_packet_alloc(), frame = av_frame_alloc()
        defer { av_packet_free(&packet); av_frame_free(&frame) }
        var pictures: [[UInt8]] = []
        func receive() {
            while avcodec_receive_frame(context, frame) >= 0 {
                let f = frame!.pointee
                pictures.append((0..<Int(f.height)).flatMap { y in
                    Array(UnsafeBufferPointer(start: f.data.0! + y * Int(f.linesize.0), count: Int(f.width)))
                })
                av_frame_unref(frame)
            }
        }
        while av_read_frame(format, packet) >= 0 {
            if packet!.pointee.stream_index == index { _ = avcodec_send_packet(context, packet); receive() }
            av_packet_unref(packet)
        }
        _ = avcodec_send_packet(context, nil)
        receive()
        return pictures
    }

    /// MPEG-4 Part 2 in AVI with packed B-pictures (DivX, Xvid): the decoder gives the last
    /// picture no time. It went to the encoder untimed and was written at the time of the one
    /// before (0.8 s twice), and players dropped it: it comes last, one frame after.
    func testTheUntimedLastPictureOfAnAVIComesLast() throws {
        let dir = try workspace()
        let input = dir.appendingPathComponent("clip.avi").path
        try FileManager.default.copyItem(atPath: Fixtures.path("damage/mpeg4-mp3.avi"), toPath: input)
        let (job, summary) = try run(input, UpscaleOptions(width: 480, encoder: EncoderSettings(preset: "ultrafast")))
        XCTAssertEqual(summary.frames, 10)
        let times = try Measure.videoSeconds(job.output)
        XCTAssertEqual(times.count, 10)
        // One tenth of a second apart from the first (this AVI starts at 0.1 s), the last one last.
        for (index, time) in times.enumerated() { XCTAssertEqual(time, times[0] + 0.1 * Double(index), accuracy: 0.001, "picture \(index)") }
    }

    /// Quad audio (rear left and right) re-encoded to AAC stays quad: it became 4.0 (front
    /// centre, back centre), both rear channels mixed into one and the centre silent.
    func testQuadAudioStaysQuadInAAC() throws {
        let dir = try workspace(copying: ["street-quad-flac.mkv"])
        let input = dir.appendingPathComponent("street-quad-flac.mkv").path
        XCTAssertEqual(try MediaProbe.info(input).streams.filter { $0.kind == .audio }.map(\.channelLayout), ["quad"])
        let out = dir.appendingPathComponent("out.mp4").path
        _ = try run(input, UpscaleOptions(width: 384, output: out, encoder: EncoderSettings(preset: "ultrafast")))
        let audio = try MediaProbe.info(out).streams.filter { $0.kind == .audio }
        XCTAssertEqual(audio.map(\.codec), ["aac"])
        XCTAssertEqual(audio.map(\.channelLayout), ["quad"])
    }

    /// Vorbis is re-encoded to AAC for .mp4, where FFmpeg would copy it under a private object
    /// type that QuickTime and Safari play without sound; Matroska, which registers Vorbis,
    /// keeps the stream as it is.
    func testVorbisGoesToAACInMP4AndIsCopiedIntoMatroska() throws {
        let dir = try workspace(copying: ["street-vp9-vorbis.webm"])
        let source = dir.appendingPathComponent("street-vp9-vorbis.webm").path
        XCTAssertEqual(try MediaProbe.info(source).streams.filter { $0.kind == .audio }.map(\.codec), ["vorbis"])
        for (ext, codec) in [("mp4", "aac"), ("mkv", "vorbis")] {
            let out = dir.appendingPathComponent("out.\(ext)").path
            _ = try run(source, UpscaleOptions(width: 384, output: out, encoder: EncoderSettings(preset: "ultrafast")))
            let audio = try MediaProbe.info(out).streams.filter { $0.kind == .audio }
            XCTAssertEqual(audio.map(\.codec), [codec], ext)
            XCTAssertEqual(audio.first?.sampleRate, 48000, ext)
            XCTAssertEqual(try Measure.audioEnd(out), try Measure.audioEnd(source), accuracy: 0.05, ext)
        }
    }

    /// A file whose timestamps start late (an MPEG-TS recording an hour in; Matroska with
    /// chapters 10 s in) gives an output that starts at 0 and lasts as long as the input, its
    /// streams and chapters moved together. Before, the start became an empty stretch before
    /// the picture (an hour and a second for a one-second clip in .mov).
    func testOutputStartsAtZeroWhateverTheInputsStart() throws {
        let dir = try workspace(copying: ["street-2s.mp4", "street-subs.mkv"])
        let ts = dir.appendingPathComponent("recording.ts").path
        try Remuxer.copy(dir.appendingPathComponent("street-2s.mp4").path, to: ts, delay: 3600)
        let source = try MediaProbe.info(ts)
        for ext in ["mov", "mkv"] {
            let out = dir.appendingPathComponent("ts.\(ext)").path
            _ = try run(ts, UpscaleOptions(width: 384, output: out, encoder: EncoderSettings(preset: "ultrafast")))
            let info = try MediaProbe.info(out)
            XCTAssertEqual(info.duration, source.duration, accuracy: 0.1, ext)
            XCTAssertEqual(try Measure.videoSeconds(out).first ?? -1, 0, accuracy: 0.05, ext)
            // MPEG-TS has no default flag: the one video is made the default (not so in .mkv).
            XCTAssertEqual(info.video?.isDefault, true, ext)
        }
        // A recording that crosses MPEG's 33-bit clock wrap (every 26.5 hours) 0.6 s in: FFmpeg
        // gives what precedes the wrap negative times, which the .mov edit list hid (9 of 20
        // pictures and their sound).
        let wrap = dir.appendingPathComponent("wrap.ts").path
        try Remuxer.copy(dir.appendingPathComponent("street-2s.mp4").path, to: wrap, delay: 95441.5)
        XCTAssertLessThan(try Measure.videoSeconds(wrap).first ?? 0, -0.5)
        let wrapped = dir.appendingPathComponent("wrap.mov").path
        _ = try run(wrap, UpscaleOptions(width: 384, output: wrapped, encoder: EncoderSettings(preset: "ultrafast")))
        let times = try Measure.videoSeconds(wrapped)
        XCTAssertEqual(times.count, 20)
        XCTAssertEqual(times.first ?? -1, 0, accuracy: 0.05)
        XCTAssertEqual(try MediaProbe.info(wrapped).duration, source.duration, accuracy: 0.1)
        let mkv = dir.appendingPathComponent("late.mkv").path
        try Remuxer.copy(dir.appendingPathComponent("street-subs.mkv").path, to: mkv, delay: 10)
        let late = try MediaProbe.info(mkv)
        let out = dir.appendingPathComponent("late-out.mkv").path
        _ = try run(mkv, UpscaleOptions(width: 384, output: out, encoder: EncoderSettings(preset: "ultrafast")))
        let info = try MediaProbe.info(out)
        XCTAssertEqual(try Measure.videoSeconds(out).first ?? -1, 0, accuracy: 0.05)
        XCTAssertEqual(late.chapters.count, 2)
        XCTAssertEqual(info.chapters.count, 2)
        for (a, b) in zip(info.chapters, late.chapters) { XCTAssertEqual(a.start, b.start - 10, accuracy: 0.01, a.title) }
    }

    /// A GoPro's telemetry track (`gpmd`: GPS, accelerometer, gyroscope) is copied into .mp4 and
    /// .mov byte for byte, with its tag and handler name (it was dropped as "data stream
    /// (bin_data)"); Matroska cannot hold it, and a note says so.
    func testGoProTelemetryIsKept() throws {
        let dir = try workspace(copying: ["street-gpmd.mp4"])
        let source = dir.appendingPathComponent("street-gpmd.mp4").path
        let telemetry = { (path: String) throws -> (tag: String?, handler: String?, packets: [String]) in
            let info = try MediaProbe.info(path)
            guard let stream = info.streams.first(where: { $0.kind == .data }) else { return (nil, nil, []) }
            return (stream.codecTag, stream.tags["handler_name"], try MediaProbe.packets(path, stream: stream.index).map { "\($0.size) \($0.checksum)" })
        }
        let original = try telemetry(source)
        XCTAssertEqual(original.tag, "gpmd")
        XCTAssertEqual(original.packets.count, 1)
        for ext in ["mp4", "mov", "mkv"] {
            let out = dir.appendingPathComponent("out.\(ext)").path
            let log = NoteCollector()
            let job = try JobPlanner.plan(input: source, options: UpscaleOptions(width: 320, output: out, encoder: EncoderSettings(preset: "ultrafast")))
            _ = try Transcoder(job: job, logger: Logger(label: "test") { _ in log }).run()
            let notes = log.lines
            let kept = try telemetry(out)
            if ext == "mkv" {
                XCTAssertNil(kept.tag)
                XCTAssertTrue(notes.contains { $0.contains("GoPro telemetry") && $0.contains("cannot go in .mkv") }, "\(notes)")
            } else {
                XCTAssertEqual(kept.tag, "gpmd", ext)
                XCTAssertEqual(kept.handler, "GoPro MET", ext)
                XCTAssertEqual(kept.packets, original.packets, ext)
                XCTAssertFalse(notes.contains { $0.contains("not copied") }, "\(notes)")
            }
            XCTAssertEqual(try Measure.frames(out).count, 20, ext)
        }
        // --strip drops it, with a note: its GPS track is where the camera was.
        let stripped = dir.appendingPathComponent("stripped.mp4").path
        let log = NoteCollector()
        var options = UpscaleOptions(width: 320, output: stripped, encoder: EncoderSettings(preset: "ultrafast"))
        options.stripMetadata = true
        _ = try Transcoder(job: try JobPlanner.plan(input: source, options: options), logger: Logger(label: "test") { _ in log }).run()
        XCTAssertNil(try telemetry(stripped).tag)
        XCTAssertTrue(log.lines.contains { $0.contains("GoPro telemetry") && $0.contains("not copied under --strip") }, "\(log.lines)")
    }

    /// Every picture keeps its time and its length to the end of the video:
    /// - a raw H.264 stream (no container, no timestamps at all) comes out at its frame rate;
    ///   its pictures were numbered 0, 1, 2 in ticks of 1/1200000 s (2 s played in 0.02 s);
    /// - an Ogg source (no frame rate) into .mp4/.mov keeps its last picture, which got no
    ///   length there, so players dropped it;
    /// - a last picture an .mp4 holds for 3 s (a slide) is held 3 s, in .mp4 and .mkv; it got
    ///   one frame's time.
    func testEveryPictureKeepsItsTimeAndLengthToTheEnd() throws {
        let dir = try workspace(copying: ["street-320x240.h264", "street-theora.ogv", "street-held-end.mp4", "street-2s.mp4"])
        let raw = dir.appendingPathComponent("street-320x240.h264").path
        XCTAssertTrue(try MediaProbe.packets(raw, stream: 0).allSatisfy { $0.pts == nil }, "a raw stream has no times")
        let rawOut = dir.appendingPathComponent("raw.mp4").path
        var totals: [Int] = []
        _ = try run(raw, UpscaleOptions(width: 640, output: rawOut, encoder: EncoderSettings(preset: "ultrafast"))) { p in
            if let total = p.framesTotal { totals.append(total) }
        }
        // No length in a raw stream: progress counts the total from the share of bytes read.
        XCTAssertFalse(totals.isEmpty, "a progress total")
        XCTAssertEqual(Double(totals.last ?? 0), 20, accuracy: 4)
        let times = try Measure.videoSeconds(rawOut)
        XCTAssertEqual(times.count, 20)
        for (a, b) in zip(times, times.dropFirst()) { XCTAssertEqual(b - a, 0.1, accuracy: 0.001) }
        XCTAssertEqual(try MediaProbe.info(rawOut).duration, 2.0, accuracy: 0.01)

        for ext in ["mp4", "mov"] {
            let out = dir.appendingPathComponent("ogg.\(ext)").path
            _ = try run(dir.appendingPathComponent("street-theora.ogv").path,
                        UpscaleOptions(width: 640, output: out, encoder: EncoderSettings(preset: "ultrafast")))
            XCTAssertEqual(try Measure.frames(out).count, 20, ext)
            XCTAssertEqual(try Measure.videoSeconds(out).last ?? 0, 1.9, accuracy: 0.01, ext)
        }

        // A rate that falls (a screen recording at 40 fps, then 10): the track ran on past its last
        // picture's end by the longer reordering delay at the end (x265's B-pictures).
        let vfr = dir.appendingPathComponent("falling.mp4").path
        try Remuxer.copy(dir.appendingPathComponent("street-2s.mp4").path, to: vfr, audioPackets: false,
                         retime: { (t: Int64) -> Int64 in t <= 10240 ? t / 4 : 2560 + (t - 10240) })
        let vfrTimes = try Measure.videoSeconds(vfr)
        XCTAssertEqual(vfrTimes.count, 20)
        let vfrLength = try MediaProbe.info(vfr).duration
        XCTAssertEqual(vfrLength, 1.25, accuracy: 0.001)
        for ext in ["mp4", "mkv"] {
            let out = dir.appendingPathComponent("falling-up.\(ext)").path
            // (veryfast: its B-pictures leave the last picture last in decoding order here.)
            _ = try run(vfr, UpscaleOptions(width: 640, output: out, encoder: EncoderSettings(preset: "veryfast")))
            XCTAssertEqual(try Measure.videoSeconds(out), vfrTimes, ext)
            XCTAssertEqual(try MediaProbe.info(out).duration, vfrLength, accuracy: 0.002, ext)
        }

        let held = dir.appendingPathComponent("street-held-end.mp4").path
        XCTAssertEqual(try MediaProbe.info(held).duration, 5.0, accuracy: 0.01, "the source holds its last picture 3 s")
        for ext in ["mp4", "mkv"] {
            let out = dir.appendingPathComponent("held.\(ext)").path
            _ = try run(held, UpscaleOptions(width: 384, output: out, encoder: EncoderSettings(preset: "ultrafast")))
            XCTAssertEqual(try Measure.frames(out).count, 20, ext)
            let shown = try Measure.videoSeconds(out)
            XCTAssertEqual((shown.last ?? 0) - (shown.first ?? 0), 1.9, accuracy: 0.01, ext)
            XCTAssertEqual(try MediaProbe.info(out).duration, 5.0, accuracy: 0.03, ext)
        }
    }

    /// An .mp4 cut short with its index at the front (faststart; a download stopped) lists
    /// samples it no longer holds. Its last picture took the rest of the track's length: 10
    /// pictures of 0.1 s came out 2.0 s long, frozen for a second with the sound gone. It now
    /// keeps its own length, into .mp4 and .mkv; the whole file still lasts its 2 s.
    func testAFileCutShortWithItsIndexAtTheFrontIsNotStretched() throws {
        let dir = try workspace(copying: ["street-2s-faststart.mp4"])
        let whole = dir.appendingPathComponent("street-2s-faststart.mp4").path
        let bytes = try Data(contentsOf: URL(fileURLWithPath: whole))
        let cut = dir.appendingPathComponent("cut.mp4").path
        try bytes.prefix(bytes.count * 8 / 10).write(to: URL(fileURLWithPath: cut))
        for ext in ["mp4", "mkv"] {
            let out = dir.appendingPathComponent("cut-out.\(ext)").path
            _ = try run(cut, UpscaleOptions(width: 384, output: out, encoder: EncoderSettings(preset: "ultrafast")))
            let shown = try Measure.videoSeconds(out)
            XCTAssertEqual(shown.count, 10, ext)
            XCTAssertEqual(try MediaProbe.info(out).duration, 1.0, accuracy: 0.03, ext)
        }
        let out = dir.appendingPathComponent("whole.mp4").path
        _ = try run(whole, UpscaleOptions(width: 384, output: out, encoder: EncoderSettings(preset: "ultrafast")))
        XCTAssertEqual(try Measure.videoSeconds(out).count, 20)
        XCTAssertEqual(try MediaProbe.info(out).duration, 2.0, accuracy: 0.01)
    }

    /// A source whose chroma the container tags as centred (JPEG-style) or top-left (HDR
    /// masters) is upscaled with its chroma read where it sits: each output picture's chroma is
    /// the core's for that siting, exactly (FFV1 in and out), and its luma the untagged
    /// source's. Before, every source was read as left-sited (MPEG-2's), half a luma sample
    /// off for these. (FFV1, whose bitstream says nothing of siting: H.264's decoder reports
    /// its own siting whatever the container says.)
    func testTheSourcesChromaSitingIsFollowed() throws {
        let dir = try workspace(copying: ["street-2s.mp4"])
        let base = dir.appendingPathComponent("base.mkv").path
        _ = try run(dir.appendingPathComponent("street-2s.mp4").path,
                    UpscaleOptions(width: 384, output: base, encoder: EncoderSettings(codec: .ffv1), threads: 2))
        let first = try XCTUnwrap(Measure.frames(base).first).frame
        let size = (first.width * 2, first.height * 2)
        var lumas: [[UInt8]] = []
        for (location, siting) in [(AVCHROMA_LOC_UNSPECIFIED, nil), (AVCHROMA_LOC_CENTER, (x: 0.5, y: 0.5)), (AVCHROMA_LOC_TOPLEFT, (x: 0.0, y: 0.0))] {
            let name = String(location.rawValue)
            let tagged = dir.appendingPathComponent("\(name).mkv").path
            try Remuxer.copy(base, to: tagged, chromaLocation: location)
            let out = dir.appendingPathComponent("\(name)-out.mkv").path
            _ = try run(tagged, UpscaleOptions(width: size.0, output: out, encoder: EncoderSettings(codec: .ffv1), threads: 2))
            let picture = try XCTUnwrap(Measure.frames(out).first).frame
            let expected = FrameScaler(input: (first.width, first.height), output: size, layout: .yuv420, chromaSiting: siting).scale(first)
            for plane in 1...2 {
                let differing = zip(picture.planes[plane].samples, expected.planes[plane].samples).filter { $0 != $1 }.count
                XCTAssertEqual(differing, 0, "\(name) plane \(plane)")
            }
            lumas.append(picture.planes[0].samples)
        }
        XCTAssertEqual(Set(lumas).count, 1, "the luma does not depend on the chroma's siting")
    }

    /// MPEG-TS recordings joined with `cat` whose clock jumps (the second starts 5000 s later,
    /// or earlier) come out as one run of pictures and sound: every picture, evenly timed
    /// across the join, the second recording's first picture right after the first's last.
    /// Before, the jump forward became a still picture 5000 s long, and the jump back failed
    /// the job at the muxer ("Not yet implemented in FFmpeg, patches welcome").
    func testMPEGTSRecordingsJoinedWithAJumpInTheirClockComeOutAsOneRun() throws {
        let dir = try workspace(copying: ["street-2s.mp4"])
        let source = dir.appendingPathComponent("street-2s.mp4").path
        var parts: [Data] = []
        for (name, delay) in [("early.ts", 1.4), ("late.ts", 5000.0)] {
            let part = dir.appendingPathComponent(name)
            try Remuxer.copy(source, to: part.path, delay: delay)
            parts.append(try Data(contentsOf: part))
        }
        let original = try Measure.frames(source)
        for (name, joined) in [("forward", parts[0] + parts[1]), ("back", parts[1] + parts[0])] {
            let ts = dir.appendingPathComponent("\(name).ts")
            try joined.write(to: ts)
            let out = dir.appendingPathComponent("\(name).mp4").path
            var totals: [Int] = []
            _ = try run(ts.path, UpscaleOptions(width: 384, output: out, encoder: EncoderSettings(preset: "ultrafast"))) { p in
                if let total = p.framesTotal { totals.append(total) }
            }
            let times = try Measure.videoSeconds(out)
            XCTAssertEqual(times.count, 2 * original.count, name)
            let steps = zip(times.dropFirst(), times).map { $0 - $1 }
            XCTAssertEqual(steps.min() ?? 0, 0.1, accuracy: 0.002, name)
            // The first recording's sound outlasts its picture by 43 ms: the second starts after both.
            XCTAssertLessThan(steps.max() ?? 1, 0.15, name)
            XCTAssertEqual(try MediaProbe.info(out).duration, 4.1, accuracy: 0.1, name)
            XCTAssertEqual(try Measure.audioEnd(out), times.last! + 0.1, accuracy: 0.1, name)
            // Once the jump is read, progress counts about 40 pictures, not the 50 000 of the raw
            // clock's 5000 s (before it is read, the header's length is all there is).
            XCTAssertEqual(Double(totals.last ?? 0), 40, accuracy: 20, name)
            // The join: picture 20 is the clip's first picture again, not its last held.
            let frames = try Measure.frames(out)
            let again = Measure.psnr(frames[20].frame.planes[0], frames[0].frame.planes[0])
            let held = Measure.psnr(frames[20].frame.planes[0], frames[19].frame.planes[0])
            XCTAssertGreaterThan(again, held + 3, name)
        }
    }

    /// An audio stream of which nothing can be read (an MPEG-TS cut before its first audio
    /// packet: the stream is declared, its sample rate unknown) is left out with a note; the
    /// picture is upscaled. Before, the job failed: "cannot open the AAC encoder: Invalid argument".
    func testAnAudioStreamWithNothingReadableIsLeftOut() throws {
        let dir = try workspace(copying: ["street-2s.mp4"])
        let ts = dir.appendingPathComponent("mute.ts").path
        try Remuxer.copy(dir.appendingPathComponent("street-2s.mp4").path, to: ts, audioPackets: false)
        let audio = try XCTUnwrap(try MediaProbe.info(ts).streams.first { $0.kind == .audio })
        XCTAssertEqual(audio.sampleRate, 0)
        let out = dir.appendingPathComponent("mute.mov").path
        let (_, summary) = try run(ts, UpscaleOptions(width: 384, output: out, encoder: EncoderSettings(preset: "ultrafast")))
        XCTAssertEqual(summary.audioCopied + summary.audioTranscoded, 0)
        XCTAssertTrue(try MediaProbe.info(out).streams.allSatisfy { $0.kind != .audio })
        XCTAssertEqual(try Measure.frames(out).count, try Measure.frames(ts).count)
    }

    func testCameraTimecodeIsKept() throws {
        let dir = try workspace(copying: ["street-hlg.mp4"])
        let input = dir.appendingPathComponent("camera.mov").path
        try Remuxer.copy(dir.appendingPathComponent("street-hlg.mp4").path, to: input, timecode: "10:20:30:04")
        let source = try MediaProbe.info(input)
        XCTAssertEqual(source.streams.filter { $0.codecTag == "tmcd" }.count, 1)
        let start = try XCTUnwrap(source.video?.timecode)
        XCTAssertTrue(start.hasPrefix("10:20:30:"), start)
        for ext in ["mov", "mp4", "mkv"] {
            let out = dir.appendingPathComponent("out.\(ext)").path
            let (job, _) = try run(input, UpscaleOptions(width: 288, output: out, encoder: EncoderSettings(preset: "ultrafast")))
            let info = try MediaProbe.info(job.output)
            XCTAssertEqual(info.video?.timecode, start, ext)
            // QuickTime-family files carry it as a timecode track again, as the camera wrote it.
            XCTAssertEqual(info.streams.filter { $0.codecTag == "tmcd" }.count, ext == "mkv" ? 0 : 1, ext)
        }
    }

    func testFLACIsCopiedWhereTheContainerTakesItAndReencodedWhereNot() throws {
        // FFmpeg 5.1's codec query says .mp4 holds FLAC, but its mp4 muxer refuses FLAC when it
        // starts ("experimental"): a copy failed the whole job at its header.
        let dir = try workspace()
        let input = Fixtures.path("damage/ffv1-flac.mkv")
        let source = try XCTUnwrap(try MediaProbe.info(input).streams.first { $0.kind == .audio })
        XCTAssertEqual(source.codec, "flac")
        let frames = try Measure.frames(input).count
        for ext in ["mp4", "mov", "mkv"] {
            let out = dir.appendingPathComponent("out.\(ext)").path
            let (job, summary) = try run(input, UpscaleOptions(width: 480, output: out, encoder: EncoderSettings(preset: "ultrafast")))
            let info = try MediaProbe.info(job.output)
            let audio = try XCTUnwrap(info.streams.first { $0.kind == .audio }, ext)
            if ext == "mkv" {
                XCTAssertEqual(summary.audioCopied, 1)
                XCTAssertEqual(try MediaProbe.packets(out, stream: audio.index).map(\.checksum),
                               try MediaProbe.packets(input, stream: source.index).map(\.checksum))
            } else {
                XCTAssertEqual(summary.audioTranscoded, 1, ext)
                XCTAssertEqual(audio.codec, "aac", ext)
                XCTAssertEqual(audio.sampleRate, source.sampleRate, ext)
            }
            XCTAssertEqual(info.video?.width, 480, ext)
            XCTAssertEqual(try Measure.frames(out).count, frames, ext)
        }
    }

    func testFullRangeMJPEGInAVIKeepsFullRangeInHEVC() throws {
        let dir = try workspace(copying: ["street-mjpeg.avi"])
        let input = dir.appendingPathComponent("street-mjpeg.avi").path
        let (job, _) = try run(input, UpscaleOptions(scale: 1.5, encoder: EncoderSettings(crf: 16, preset: "ultrafast")))
        XCTAssertTrue(job.output.hasSuffix("street-mjpeg Upscaled.mov"))
        let info = try MediaProbe.info(job.output)
        XCTAssertEqual(info.video?.codec, "hevc")
        XCTAssertEqual(info.video?.width, 576)
        XCTAssertEqual(info.video?.height, 432)
        XCTAssertEqual(info.video?.colorRange, "pc")
        let source = try Measure.frames(input)
        let result = try Measure.frames(job.output)
        XCTAssertEqual(result.count, source.count)
        let reference = try SwscaleScaler(input: (384, 288), output: (576, 432))
        XCTAssertGreaterThan(Measure.psnr(result[3].frame.planes[0], reference.scale(source[3].frame).planes[0]), 35)
    }

    func testFullRangeInputIsConvertedToLimitedRangeForProRes() throws {
        let dir = try workspace(copying: ["street-mjpeg.avi"])
        let input = dir.appendingPathComponent("street-mjpeg.avi").path
        let (job, _) = try run(input, UpscaleOptions(scale: 1.5, encoder: EncoderSettings(codec: .prores)))
        let info = try MediaProbe.info(job.output)
        XCTAssertEqual(info.video?.codec, "prores")
        XCTAssertEqual(info.video?.colorRange, "tv")
        let source = try Measure.frames(input)
        let result = try Measure.frames(job.output)
        XCTAssertEqual(result.count, source.count)
        // Expected luma: the scaled full-range picture mapped to 16...235.
        let expected = try SwscaleScaler(input: (384, 288), output: (576, 432)).scale(source[3].frame).planes[0]
        let limited = Plane(width: expected.width, height: expected.height,
                            samples: expected.samples.map { UInt8((16 + Double($0) * 219 / 255).rounded()) })
        XCTAssertGreaterThan(Measure.psnr(result[3].frame.planes[0], limited), 35)
    }

    func testCancelLeavesNothingBehind() throws {
        let dir = try workspace(copying: ["street-2s.mp4"])
        let input = dir.appendingPathComponent("street-2s.mp4").path
        let cancel = CancellationFlag()
        XCTAssertThrowsError(try run(input, UpscaleOptions(encoder: EncoderSettings(preset: "ultrafast")), cancel: cancel) { p in
            if p.framesDone >= 3 { cancel.cancel() }
        }) { error in
            XCTAssertEqual((error as? UpscaleError)?.kind, .cancelled)
        }
        XCTAssertEqual(Fixtures.listing(dir), ["street-2s.mp4"])
    }

    func testDamagedVideoMidStreamFailsNamingTheFrame() throws {
        // The fixture's first keyframe fills bytes 48-58849 (53% of the file); the packet at
        // bytes 82050-83101 is frame 7 (0.60 s). Damage from half-way lands in frame 1, from
        // three quarters in frame 7: the frame named is the one whose packet holds the damage.
        for (fraction, frame) in [(0.5, 1), (0.75, 7)] {
            let dir = try workspace(copying: ["street-2s.mp4"])
            let input = dir.appendingPathComponent("street-2s.mp4")
            var bytes = [UInt8](try Data(contentsOf: input))
            var state: UInt32 = 7
            let first = Int(Double(bytes.count) * fraction)
            for i in first..<(first + 4000) {
                state = state &* 1_664_525 &+ 1_013_904_223
                bytes[i] = UInt8(truncatingIfNeeded: state >> 24)
            }
            try Data(bytes).write(to: input)
            let before = try Data(contentsOf: input)
            XCTAssertThrowsError(try run(input.path, UpscaleOptions(encoder: EncoderSettings(preset: "ultrafast")))) { error in
                let e = error as? UpscaleError
                // The input's fault: a farm does not try it again (it did, three times).
                XCTAssertEqual(e?.kind, .input)
                let message = e?.message ?? "\(error)"
                XCTAssertTrue(message.contains("undecodable video at frame \(frame) "), message)
            }
            XCTAssertEqual(Fixtures.listing(dir), ["street-2s.mp4"])
            XCTAssertEqual(try Data(contentsOf: input), before)
        }
    }

    func testFullDiskIsReportedAndNoPartialFileRemains() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root to mount a small tmpfs") }
        let dir = try workspace(copying: ["street-2s.mp4"])
        let small = dir.appendingPathComponent("small")
        try FileManager.default.createDirectory(at: small, withIntermediateDirectories: true)
        guard mountTmpfs(small.path, size: "64k") else { throw XCTSkip("tmpfs cannot be mounted here") }
        defer { _ = shell("umount '\(small.path)'") }
        let input = dir.appendingPathComponent("street-2s.mp4").path
        let options = UpscaleOptions(output: small.appendingPathComponent("out.mkv").path,
                                     encoder: EncoderSettings(codec: .ffv1))
        XCTAssertThrowsError(try run(input, options)) { error in
            XCTAssertEqual((error as? UpscaleError)?.kind, .output)
            XCTAssertTrue((error as? UpscaleError)?.message.contains("disk is full") ?? false, "\(error)")
        }
        XCTAssertEqual(Fixtures.listing(small), [])
    }

    private func mountTmpfs(_ path: String, size: String) -> Bool {
        shell("mount -t tmpfs -o size=\(size) tmpfs '\(path)'") == 0
    }

    @discardableResult
    private func shell(_ command: String) -> Int32 {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/sh")
        p.arguments = ["-c", command]
        p.standardError = FileHandle.nullDevice
        guard (try? p.run()) != nil else { return -1 }
        p.waitUntilExit()
        return p.terminationStatus
    }
}

/// Collects a logger's lines (the transcoder's notes), for tests that check them.
final class NoteCollector: LogHandler, @unchecked Sendable {
    private let lock = NSLock()
    private var collected: [String] = []
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace
    var lines: [String] { lock.withLock { collected } }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(level: Logger.Level, message: Logger.Message, metadata: Logger.Metadata?, source: String, file: String, function: String, line: UInt) {
        lock.withLock { collected.append(message.description) }
    }
}
