import CFFmpeg
import Foundation
import Logging
import Synchronization
import UpscaleCore

/// How far a job is, reported about every frame from the encoding stage.
public struct TranscodeProgress: Sendable {
    public let framesDone: Int
    /// Estimated from the container; nil when it does not say.
    public let framesTotal: Int?
    public let elapsed: Double

    public init(framesDone: Int, framesTotal: Int?, elapsed: Double) {
        self.framesDone = framesDone
        self.framesTotal = framesTotal
        self.elapsed = elapsed
    }
}

public struct TranscodeSummary: Sendable {
    public let output: String
    public let frames: Int
    public var seconds: Double
    public let encoderName: String
    public let audioCopied: Int
    public let audioTranscoded: Int
    /// A chunk's content hash (`ContentHash` of its file); 0 for whole outputs.
    public var checksum: UInt64 = 0
    /// The video carried closed captions in its pictures (A/53), which the output does not.
    public var droppedCaptions = false
    /// The video carried HDR10+ dynamic metadata, which the output does not.
    public var droppedHDR10Plus = false
}

extension Transcoder {
    /// HLG (or PQ) that a BT.2020 stream gives in its pictures only: broadcast HEVC/H.264
    /// keeps SDR BT.2020 in its headers for old players and names HLG in an alternative
    /// transfer characteristics SEI, which FFmpeg's decoder puts on each picture. The output
    /// was tagged SDR BT.2020 (the ffmpeg command tags it HLG). Read from the first picture
    /// where the file can be opened twice; nil where nothing changes.
    static func pictureTransfer(_ path: String, color: ColorDescription, codec: AVCodecID) -> AVColorTransferCharacteristic? {
        let hdr = [AVCOL_TRC_ARIB_STD_B67, AVCOL_TRC_SMPTE2084]
        // (Only HEVC and H.264 carry the SEI: other sources skip the extra decode.)
        guard color.primaries == AVCOL_PRI_BT2020, !hdr.contains(color.transfer), [AV_CODEC_ID_HEVC, AV_CODEC_ID_H264].contains(codec),
              HeadStart.readableTwice(path),
              let shown = try? InputFile.firstPicture(of: path, { frame, _ in frame?.pointee.color_trc }), hdr.contains(shown) else { return nil }
        return shown
    }

    /// The note for captions carried inside the pictures (CEA-608/708 in A/53 user data):
    /// they were dropped without a word (`ffmpeg -c copy` keeps them). H.264 and HEVC output keep them.
    public static func captionsNote(_ input: String, codec: VideoCodec) -> String {
        let extract = "extract them first (for example with ffmpeg's lavfi movie=…[out0+subcc] into .srt)"
        if codec == .hevc || codec == .h264 {
            // (Pictures whose packets were not in Annex B form, or had no time.)
            return "'\(input)' carries closed captions inside its video (CEA-608/708); some could not be written into the upscaled video's pictures — \(extract)"
        }
        return "'\(input)' carries closed captions inside its video (CEA-608/708); the upscaled video does not — use --codec hevc or h264 to keep them there, or \(extract)"
    }

    /// The notes for what the output dropped of its pictures' own data: captions, HDR10+.
    public static func droppedNotes(_ input: String, codec: VideoCodec, captions: Bool, hdr10Plus: Bool) -> [String] {
        (captions ? [captionsNote(input, codec: codec)] : []) + (hdr10Plus ? [hdr10PlusNote(input, codec: codec)] : [])
    }

    private static func unavailable(_ encoder: String) -> String { "the \(encoder) encoder is not available here" }

    /// Whether `error` says that the named hardware `encoder` could not be opened on this machine.
    public static func isUnavailable(_ error: UpscaleError, encoder: String) -> Bool {
        error.message.hasPrefix(unavailable(encoder))
    }

    /// The note for HDR10+ dynamic metadata (SMPTE ST 2094-40) the output does not keep: it was
    /// dropped without a word. HEVC output keeps it (`HDR10Plus`).
    public static func hdr10PlusNote(_ input: String, codec: VideoCodec) -> String {
        if codec == .hevc {
            return "'\(input)' carries HDR10+ dynamic metadata; that of some pictures could not be written into the upscaled video (it keeps the static HDR10 metadata)"
        }
        return "'\(input)' carries HDR10+ dynamic metadata; the upscaled video does not (it keeps the static HDR10 metadata) — use --codec hevc to keep it"
    }
}

/// Where the encoding stage writes packets: the output container, or a chunk file.
protocol PacketSink: AnyObject {
    func write(_ packet: UnsafeMutablePointer<AVPacket>, stream index: Int) throws
}

extension OutputFile: PacketSink {}

extension ChunkWriter: PacketSink {
    func write(_ packet: UnsafeMutablePointer<AVPacket>, stream index: Int) throws { try write(packet) }
}

/// Consecutive chunks made by one decoder, pipeline and encoder (`Transcoder.span`): where the
/// next chunk is still to be made when the last picture of one is decoded, the pipeline goes on
/// into it, and the encoder starts it with an IDR picture (x265, x264). A new encoder per chunk
/// cost every chunk its start and a heap grown in the pieces each one left (`ChunkedJob`).
public final class ChunkSpan: @unchecked Sendable {
    /// Claims the chunk after `range` for this pipeline when its first picture is the one timed
    /// `pts` (stream time base); nil ends the pipeline with `range`. On the reading thread.
    let claim: (_ range: ChunkRange, _ pts: Int64) -> ChunkTask?
    /// A chunk is complete, its file named and synced: each of the pipeline's chunks in turn,
    /// the last one included, on the writing thread. A throw stops the pipeline.
    let finished: (ChunkTask, TranscodeSummary) throws -> Void

    public init(claim: @escaping (_ range: ChunkRange, _ pts: Int64) -> ChunkTask?,
                finished: @escaping (ChunkTask, TranscodeSummary) throws -> Void) {
        self.claim = claim
        self.finished = finished
    }
}

/// How `pump` goes on into the next chunk: the reader claims it, the writer closes the chunk
/// before it and gets the new chunk's file once its first packet comes.
private final class ChunkFollow: @unchecked Sendable {
    let span: ChunkSpan
    let begin: (_ next: ChunkTask, _ framesSoFar: Int) throws -> PacketSink
    private let lock = NSLock()
    private var starts: [Int64: ChunkTask] = [:]

    init(span: ChunkSpan, begin: @escaping (ChunkTask, Int) throws -> PacketSink) {
        self.span = span
        self.begin = begin
    }

    /// The reader: the picture timed `pts` starts `task`.
    func announce(_ task: ChunkTask, at pts: Int64) {
        lock.lock()
        starts[pts] = task
        lock.unlock()
    }

    /// The writer: the chunk the picture timed `pts` starts, once.
    func start(at pts: Int64) -> ChunkTask? {
        lock.lock()
        defer { lock.unlock() }
        return starts.removeValue(forKey: pts)
    }
}

/// Runs one job: decode → convert → upscale → encode/mux on three threads joined by
/// bounded queues, so decoding, scaling and encoding overlap and memory stays bounded.
/// On any failure or cancel the temporary output is removed and the final path untouched.
public final class Transcoder {
    public let job: Job
    private let logger: Logger
    /// Where the packets read so far end, in seconds: the latest of any stream's.
    private let lastRead = LatestTime()
    /// Where the file's last picture could not be decoded, when nothing came after it (see `pump`).
    private let endDamage = Mutex<String?>(nil)
    /// Pictures left out for coming at or before the time of one already given (see `pump`).
    private let backwards = Mutex(0)
    /// The frame total counted from the bytes read, once the input's clock has jumped.
    private let reckoned = Mutex<Int?>(nil)

    /// For a chunk (`job.chunk`): the chunks after it this run may go on into, and where each
    /// finished one is recorded. Nil: the one chunk, recorded by the caller from the summary.
    public var span: ChunkSpan?

    public init(job: Job, logger: Logger = Logger(label: "upscale")) {
        self.job = job
        self.logger = logger
    }

    private enum Item {
        case picture(Picture, pts: Int64)
        case packet(UnsafeMutablePointer<AVPacket>, stream: Int)
        /// A frame before a chunk's first, for the temporal hold only.
        case preroll(Picture)
    }

    /// Thrown out of the decoder's callback at the first frame past a chunk.
    private struct ChunkComplete: Error {}

    /// Where packets of a non-video input stream go: copied, or re-encoded (audio to AAC,
    /// text subtitles to mov_text) into output stream `output`.
    enum StreamRoute {
        case copy(output: Int)
        case audio(AudioTranscoder, output: Int)
        case subtitles(SubtitleTranscoder, output: Int)
    }

    /// The HDR10 metadata of `path`'s video: its first frame's and its container's for a file,
    /// the container's alone for a pipe or device (opened twice, stdin's second reader began
    /// mid-stream and a FIFO's blocked for good).
    static func hdrMetadata(_ path: String, stream: UnsafeMutablePointer<AVStream>) throws -> HDRMetadata? {
        HeadStart.readableTwice(path) ? try HDRMetadata.firstFrame(of: path) : HDRMetadata(frame: nil, stream: stream)
    }

    /// What the output will lose of `job`'s input, one line each: depth, colour resolution,
    /// HDR10 metadata.
    static func lossNotes(job: Job, decoder: VideoDecoder, stream: UnsafeMutablePointer<AVStream>, hdr: HDRMetadata?) -> [String] {
        var notes: [String] = []
        let codec = job.encoder.codec
        if decoder.highBitDepth && codec == .h264 {
            // A deep 4:2:2/4:4:4 (or RGB) source loses its colour resolution too.
            let layout = decoder.deepLayout == .yuv420 ? "" : " 4:2:0"
            let keep = decoder.deepLayout == .yuv420 ? "10 bits" : "10 bits and \(decoder.deepLayout == .yuv422 ? "4:2:2" : "4:4:4")"
            notes.append("'\(job.input)': H.264 output is 8-bit\(layout); use --codec hevc to keep \(keep)")
        }
        // Screen recordings and animation lost half their colour resolution with no word.
        if decoder.reducesChroma {
            notes.append("'\(job.input)' is 8-bit with full colour resolution (4:4:4, 4:2:2 or RGB); the output is 4:2:0, with half of it (only 10-bit and deeper sources keep 4:2:2 and 4:4:4)")
        }
        let format = av_pix_fmt_desc_get(AVPixelFormat(rawValue: stream.pointee.codecpar.pointee.format))
        let depth = format.map { Int($0.pointee.comp.0.depth) } ?? 8
        // ProRes is written as 422 (apcn) at 10 bits: a 4444 or 12-bit master lost its colour
        // resolution and depth with no word. (With alpha it is 4444, and keeps it.)
        if codec == .prores && !job.keepsAlpha, let format {
            // An 8-bit one is made 4:2:0 whatever the codec (said above): no advice for it.
            let fuller = decoder.highBitDepth && format.pointee.nb_components >= 3 && format.pointee.log2_chroma_w == 0
                && format.pointee.log2_chroma_h == 0
            if depth > 10 || fuller {
                let what = [depth > 10 ? "\(depth)-bit" : nil, fuller ? "full colour resolution (4:4:4 or RGB)" : nil].compactMap { $0 }
                // FFV1 keeps 4:4:4 at 10 bits: no way to keep 12 (it said "use --codec ffv1 to keep it all").
                let keep = fuller ? " (--codec ffv1 keeps full colour resolution\(depth > 10 ? ", at 10 bits" : ""))" : ""
                notes.append("'\(job.input)' is \(what.joined(separator: " with ")); --codec prores writes ProRes 422 at 10 bits\(keep)")
            }
        } else if depth > 10 && codec != .h264 {
            // 12- and 16-bit sources become 10-bit without a word.
            notes.append("'\(job.input)' is \(depth)-bit; the output is 10-bit")
        }
        if let line = dolbyVisionNote(job.input, stream: stream) { notes.append(line) }
        if hdr == nil, decoder.color.transfer == AVCOL_TRC_SMPTE2084, !HeadStart.readableTwice(job.input) {
            notes.append("'\(job.input)' is PQ video read from a pipe: HDR10 metadata in its pictures cannot be read ahead, and the output keeps the PQ and BT.2020 tags without it (give the file itself to keep it)")
        }
        return notes
    }

    /// Dolby Vision (a dvcC/dvvC record): its layer (the RPU, per picture) cannot be made
    /// again for the upscaled pictures, and went without a word. The output is the base
    /// picture, which players show as the HDR10, HLG or SDR it is compatible with; a profile 5
    /// base (compatibility 0) is not meant to be seen without the layer.
    static func dolbyVisionNote(_ input: String, stream: UnsafeMutablePointer<AVStream>) -> String? {
        var size = 0
        guard let raw = av_stream_get_side_data(stream, AV_PKT_DATA_DOVI_CONF, &size),
              size >= MemoryLayout<AVDOVIDecoderConfigurationRecord>.size else { return nil }
        let record = UnsafeRawPointer(raw).loadUnaligned(as: AVDOVIDecoderConfigurationRecord.self)
        let base: String
        switch record.dv_bl_signal_compatibility_id {
        case 1, 6: base = "HDR10"
        case 2: base = "SDR"
        case 4: base = "HLG"
        default:
            return "'\(input)' is Dolby Vision profile \(record.dv_profile), whose picture needs its Dolby Vision layer to show the right colours; the output cannot keep that layer, so its colours will be wrong — upscale an HDR10 or SDR export instead"
        }
        return "'\(input)' is Dolby Vision (profile \(record.dv_profile)); the output keeps its \(base) picture without the Dolby Vision layer, which cannot be made again for the upscaled pictures"
    }

    /// The same for a job run in chunks, said once by `ChunkedJob` before its chunks run.
    public static func lossNotes(for job: Job) throws -> [String] {
        MediaLibrary.configure()
        let input = try InputFile(path: job.input)
        let stream = input.stream(try input.videoStreamIndex())
        let decoder = try VideoDecoder(stream: stream, path: job.input, threads: 1, keepAlpha: job.keepsAlpha)
        let hdr = decoder.color.transfer == AVCOL_TRC_SMPTE2084 ? try hdrMetadata(job.input, stream: stream) : nil
        return lossNotes(job: job, decoder: decoder, stream: stream, hdr: hdr)
    }

    public func run(cancel: CancellationFlag = CancellationFlag(),
                    progress: @escaping (TranscodeProgress) -> Void = { _ in }) throws -> TranscodeSummary {
        MediaLibrary.configure()
        let start = Date()
        let probed = InputFile.takeProbed(path: job.input)
        // A head start not taken below (a failure on the way there) is not held on to.
        defer { HeadStart.drop() }
        let input = try probed ?? InputFile(path: job.input)
        let videoIndex = try input.videoStreamIndex()
        let videoStream = input.stream(videoIndex)
        // Frame-threaded decoding keeps a picture in flight per thread. Where the output has at
        // least twice the input's pixels, encoding each picture costs many times its decoding,
        // so one decoding thread stays ahead and the pictures are saved (6 MB at 720p, 26 MB at
        // 4K input); other jobs keep up to four.
        let par = videoStream.pointee.codecpar.pointee
        let enlarges = job.width * job.height >= 2 * Int(par.width) * Int(par.height)
        let decoder = try VideoDecoder(stream: videoStream, path: job.input, threads: enlarges ? 1 : min(job.threads, 4),
                                       deinterlace: job.deinterlace, midStream: job.chunk?.range.seek != nil,
                                       keepAlpha: job.keepsAlpha)
        // Closed captions carried in the pictures (CEA-608/708 in A/53) go into H.264 (libx264
        // writes them) and HEVC (`CaptionSEI`) pictures; ProRes and FFV1 have no place for them.
        decoder.keepsCaptions = job.encoder.codec == .h264 || job.encoder.codec == .hevc
        // HDR10+ dynamic metadata goes into HEVC pictures as an SEI (`HDR10Plus`), extra
        // windows' positions scaled with the picture; the other codecs here have no place for it.
        if job.encoder.codec == .hevc {
            decoder.hdr10PlusOutput = ((Double(job.width) / Double(decoder.width), Double(job.height) / Double(decoder.height)),
                                       (job.width, job.height))
        }
        let chunk = job.chunk
        var settings = job.encoder
        if let chunk, settings.keyframeInterval == nil { settings.keyframeInterval = chunk.keyframeInterval }
        let file = chunk == nil ? try OutputFile(finalPath: job.output, muxer: job.muxer) : nil
        file?.stripsMetadata = job.stripMetadata
        file?.startAtZero(input: input.context)

        let frameRate = FrameGrid.nominal(av_guess_frame_rate(input.context, videoStream, nil))
        // 10-bit sources stay 10-bit where the codec takes it (H.264 output stays 8-bit).
        let tenBit = decoder.highBitDepth && job.encoder.codec != .h264
        // HDR10 metadata only exists with the PQ transfer; other sources skip the extra open and
        // decode. A pipe or device cannot be opened twice: its container's metadata alone (the
        // frames' own is in the first picture, which the encoder is opened before).
        if let shown = Self.pictureTransfer(job.input, color: decoder.color, codec: videoStream.pointee.codecpar.pointee.codec_id) {
            decoder.color.transfer = shown
        }
        let pq = decoder.color.transfer == AVCOL_TRC_SMPTE2084
        let hdr = pq && (job.encoder.codec == .hevc || chunk == nil) ? try Self.hdrMetadata(job.input, stream: videoStream) : nil
        // What the output loses, said once per job: here for a job in one piece, by `ChunkedJob`
        // (`lossNotes(for:)`) for one in chunks (each chunk said them, or none did).
        if chunk == nil {
            for line in Self.lossNotes(job: job, decoder: decoder, stream: videoStream, hdr: hdr) { logger.notice("\(line)") }
        }
        var encoder: VideoEncoder?
        var lastError: Error?
        let candidates = job.encoder.encoderCandidates(tenBit: tenBit, layout: decoder.deepLayout, hdr: hdr != nil)
        for name in candidates {
            // Hardware encoders tried in turn by `auto` fail quietly where there is none.
            let tried = candidates.count > 1 && name != candidates.last
            do {
                let open = { [self] in try VideoEncoder(
                    settings: settings, width: job.width, height: job.height,
                    timeBase: videoStream.pointee.time_base, frameRate: frameRate, startTime: videoStream.pointee.start_time,
                    color: decoder.color,
                    // Chunks carry their parameter sets out of band, as the joined file will.
                    globalHeader: file?.needsGlobalHeader ?? true,
                    tagHVC1: chunk == nil && (job.muxer == "mov" || job.muxer == "mp4"),
                    tenBit: tenBit, hdr: hdr,
                    sampleAspect: AVRational(num: Int32(job.sampleAspect.num), den: Int32(job.sampleAspect.den)),
                    encoderName: name, layout: decoder.deepLayout) }
                encoder = try tried ? MediaLibrary.quietly(open) : open()
                break
            } catch {
                lastError = error
            }
        }
        guard let encoder else {
            if let named = job.encoder.hevcEncoder, named != "libx265" {
                throw UpscaleError(.processing, Self.unavailable(named) + " (\(lastError.map { "\($0)" } ?? "no device")); use --encoder auto or libx265")
            }
            // A picture size the encoder refuses (x265 takes no extreme shapes such as 5120x16):
            // said of this file, with a way out.
            if let error = lastError as? UpscaleError, error.message.hasPrefix("cannot open the") {
                let extreme = min(job.width, job.height) < 64 || max(job.width, job.height) > 32 * min(job.width, job.height)
                throw UpscaleError(.processing, "'\(job.input)': \(error.message)"
                    + (extreme ? "; the encoder refuses this picture size — choose another --width/--height or --codec" : ""))
            }
            throw lastError ?? UpscaleError(.processing, "no encoder could be opened")
        }
        guard let output = file else {
            HeadStart.drop()
            return try runChunk(job.chunk!, input: input, videoIndex: videoIndex, decoder: decoder, encoder: encoder,
                                cancel: cancel, start: start, progress: progress)
        }
        let videoOut = try output.addStream(encoder: encoder.context)
        describeVideo(output: output, videoOut: videoOut, input: input, videoStream: videoStream,
                      sampleAspect: encoder.context.pointee.sample_aspect_ratio, hdr: hdr)

        let (routes, copied, transcoded) = try addRoutes(input: input, videoIndex: videoIndex, output: output)

        // The plan's head start, only with the file it probed (else it may be other bytes).
        if probed != nil, let head = HeadStart.take(path: job.input) {
            decoder.adopt(head)
        } else {
            HeadStart.drop()
        }
        noteLostTrackDetails(output)
        do {
            try output.open()
            let frames = try pump(input: input, videoIndex: videoIndex, decoder: decoder, encoder: encoder,
                                  output: output, videoOut: videoOut, routes: routes, range: nil, follow: nil, cancel: cancel,
                                  start: start, progress: progress)
            if cancel.isCancelled { throw UpscaleError.cancelled() }
            guard frames > 0 else {
                throw UpscaleError(.input, "'\(job.input)' gave no picture to upscale: it is cut short or damaged; nothing was written (copy or export it again)")
            }
            if input.clockJumps > 0 {
                logger.notice("'\(job.input)': its clock jumps \(input.clockJumps) time(s) (recordings joined, or a splice); the output runs on without the jumps")
            } else {
                noteEarlyEnd(input: input)
            }
            let left = backwards.withLock { $0 }
            if left > 0 {
                logger.notice("'\(job.input)': \(left) picture(s) timed at or before a picture already written (after damaged data, or repeated timestamps) were left out")
            }
            if let place = endDamage.withLock({ $0 }) {
                logger.notice("'\(job.input)' ends in a picture that cannot be decoded, at \(place): it may be cut short (a recording that was stopped, an unfinished copy); that picture is left out")
            }
            if MediaLibrary.demuxErrors > input.demuxErrorsAtOpen {
                // Matroska skips a damaged stretch to the next cluster it recognises and goes on:
                // pictures are missing there, with nothing but FFmpeg's log to say so.
                logger.notice("\(MediaLibrary.skippedDataNote(job.input, places: MediaLibrary.demuxErrors - input.demuxErrorsAtOpen))")
            }
            for note in Self.droppedNotes(job.input, codec: job.encoder.codec, captions: decoder.dropsCaptions || encoder.lostCaptions,
                                          hdr10Plus: decoder.dropsHDR10Plus || encoder.lostHDR10Plus) { logger.notice("\(note)") }
            let placed = try output.finish(overwrite: job.overwrite, freeName: job.uniqueName)
            noteMendedDurations(output)
            return TranscodeSummary(output: placed, frames: frames, seconds: Date().timeIntervalSince(start),
                                    encoderName: encoder.name, audioCopied: copied, audioTranscoded: transcoded)
        } catch {
            output.abandon()
            throw error
        }
    }

    /// A file cut short (an unfinished copy or download) in a container that says how long it
    /// is but not where its packets are (Matroska, MPEG-TS) just ends early: every stream's
    /// packets stop well before the duration the header gives (one stream ending before
    /// another, as audio after the picture, is no sign). Says so.
    private func noteEarlyEnd(input: InputFile) {
        let context = input.context.pointee
        guard context.duration > 0, let end = lastRead.value else { return }
        let start = context.start_time == noPTS ? 0 : Double(context.start_time) / Double(AV_TIME_BASE)
        let duration = Double(context.duration) / Double(AV_TIME_BASE)
        // Where the header says the file ends. Matroska's duration is its last timestamp rather
        // than a length from the start, so of the two readings the earlier end is taken (a file
        // starting 5 s in that lasts 2 s was read as ending at 12 s, and got this note).
        let promisedEnd = start > 0 ? min(start + duration, max(duration, start)) : start + duration
        let promised = promisedEnd - start
        let shown = end - start
        if promisedEnd - end > max(0.25, promised / 20) {
            logger.notice("'\(job.input)' ends at \(String(format: "%.2f", shown)) s of the \(String(format: "%.2f", promised)) s its header gives: it may be cut short (an unfinished copy or download); the output holds what is there")
        }
    }

    /// The source's metadata, rotation, chapters, frame rate and pixel aspect on the output's video.
    func describeVideo(output: OutputFile, videoOut: Int, input: InputFile, videoStream: UnsafeMutablePointer<AVStream>,
                       sampleAspect: AVRational, hdr: HDRMetadata?) {
        output.copyMetadata(from: input.context, videoStream: videoOut, from: videoStream)
        // HDR10 metadata in the container too (x265 also puts it in the bitstream; other codecs
        // have only this): players and editors that read the container's found none.
        hdr?.addSideData(to: output.stream(videoOut))
        output.copyRotation(from: videoStream, to: videoOut)
        var size = 0
        if output.muxerName == "mov", av_stream_get_side_data(videoStream, AV_PKT_DATA_SPHERICAL, &size) != nil {
            // FFmpeg 5.1 writes the sv3d and st3d boxes into .mp4 only.
            logger.notice("'\(job.input)' is a 360° video: .mov keeps no projection with this FFmpeg, so players show it flat; use .mp4 or .mkv")
        } else if output.muxerName == "mov", av_stream_get_side_data(videoStream, AV_PKT_DATA_STEREO3D, &size) != nil {
            logger.notice("'\(job.input)' is stereo 3D: .mov keeps no stereo layout with this FFmpeg; use .mp4 or .mkv")
        }
        output.copyChapters(from: input.context)
        output.stream(videoOut).pointee.avg_frame_rate = videoStream.pointee.avg_frame_rate
        output.stream(videoOut).pointee.sample_aspect_ratio = sampleAspect
        // Its flags (forced…), and default, as the one video (Matroska wrote the upscaled video as
        // not default; MPEG-TS, AVI and FLV inputs carry no such flag).
        output.stream(videoOut).pointee.disposition = videoStream.pointee.disposition | AV_DISPOSITION_DEFAULT
    }

    /// Says which track languages and flags the output leaves out (they were dropped without a word).
    func noteLostTrackDetails(_ output: OutputFile) {
        for (index, code) in output.movLanguagesLost() {
            logger.notice("the language '\(code)' of output stream \(index) cannot be recorded in .mov (FFmpeg's .mov muxer knows only the old Macintosh language codes); use .mp4 or .mkv to keep it")
        }
        for (index, flags) in output.flagsLost() {
            let these = flags.count == 1 ? "flag" : "flags"
            logger.notice("the \(these) \(flags.map { "'\($0)'" }.joined(separator: ", ")) of output stream \(index) cannot be recorded in .\(output.muxerName) (FFmpeg's muxer writes no such \(these) there); use \(output.muxerName == "mov" && !flags.contains("original") ? ".mp4 or .mkv" : ".mkv") to keep \(flags.count == 1 ? "it" : "them")")
        }
    }

    /// Says which streams' packets were given a duration the container takes (see `OutputFile.write`).
    func noteMendedDurations(_ output: OutputFile) {
        for (index, count) in output.mendedDurations() {
            let par = output.stream(index).pointee.codecpar.pointee
            let what = par.codec_type == AVMEDIA_TYPE_SUBTITLE ? (count == 1 ? "caption" : "captions") : (count == 1 ? "packet" : "packets")
            logger.notice("'\(job.input)': \(count) \(what) of output stream \(index) (\(String(cString: avcodec_get_name(par.codec_id)))) had no duration .\(output.muxerName) can record (a negative one, or one too long for it); each now lasts until the stream's next one, the last until the video ends")
        }
    }

    /// Adds an output stream for every input stream other than the video that the output can
    /// hold (copied, or re-encoded when the container needs it), with the notices about the rest.
    func addRoutes(input: InputFile, videoIndex: Int, output: OutputFile) throws
        -> (routes: [Int: StreamRoute], copied: Int, transcoded: Int)
    {
        var routes: [Int: StreamRoute] = [:]
        var copied = 0, transcoded = 0
        for i in 0..<input.streamCount where i != videoIndex {
            let s = input.stream(i)
            let par = s.pointee.codecpar!
            let codecName = String(cString: avcodec_get_name(par.pointee.codec_id))
            switch par.pointee.codec_type {
            case AVMEDIA_TYPE_AUDIO where par.pointee.sample_rate <= 0 || par.pointee.ch_layout.nb_channels <= 0:
                // Nothing of it could be read (a file cut off before its first audio frame):
                // neither copy nor AAC can describe it, and failing the picture for it helps no one.
                logger.notice("audio stream \(i) (\(codecName)) has no readable audio (no sample rate or channels found); not copied")
            case AVMEDIA_TYPE_AUDIO where !output.canHold(par) && avcodec_find_decoder(par.pointee.codec_id) == nil:
                // Neither copied nor decodable (a codec this FFmpeg does not know): that track is
                // left out, not the whole job ("no decoder for its none audio", nothing written).
                let what = par.pointee.codec_id == AV_CODEC_ID_NONE ? "an unknown codec" : codecName
                logger.notice("audio stream \(i) (\(what)) cannot go in .\(URL(fileURLWithPath: job.output).pathExtension) and this FFmpeg cannot decode it; not copied")
            case AVMEDIA_TYPE_AUDIO:
                if output.canHold(par) {
                    routes[i] = .copy(output: try output.addCopiedStream(from: s))
                    copied += 1
                } else {
                    let length = input.context.pointee.duration > 0 ? Double(input.context.pointee.duration) / Double(AV_TIME_BASE) : 3600
                    let t = try AudioTranscoder(stream: s, path: job.input, globalHeader: output.needsGlobalHeader, longestGap: length)
                    let out = try output.addStream(encoder: t.encoder)
                    av_dict_copy(&output.stream(out).pointee.metadata, s.pointee.metadata, 0)
                    OutputFile.dropStatistics(&output.stream(out).pointee.metadata)
                    // Which track plays first (default, forced) as in the source: the first
                    // became the default when another was.
                    output.stream(out).pointee.disposition = s.pointee.disposition
                    routes[i] = .audio(t, output: out)
                    transcoded += 1
                    logger.notice("audio stream \(i) (\(codecName)) cannot go in .\(URL(fileURLWithPath: job.output).pathExtension); re-encoded to AAC")
                }
            case AVMEDIA_TYPE_SUBTITLE:
                if output.canHold(par) {
                    routes[i] = .copy(output: try output.addCopiedStream(from: s))
                } else if let target = [AV_CODEC_ID_MOV_TEXT, AV_CODEC_ID_SUBRIP].first(where: { output.canHold($0) }),
                          let t = SubtitleTranscoder(stream: s, to: target) {
                    let out = try output.addStream(encoder: t.encoder)
                    av_dict_copy(&output.stream(out).pointee.metadata, s.pointee.metadata, 0)
                    output.stream(out).pointee.disposition = s.pointee.disposition
                    routes[i] = .subtitles(t, output: out)
                    logger.notice("subtitle stream \(i) (\(codecName)) converted to \(String(cString: avcodec_get_name(target))) for .\(URL(fileURLWithPath: job.output).pathExtension)")
                } else {
                    // Where it can go: .mkv takes every subtitle codec, .mp4 the bitmap ones too.
                    let homes = ["mp4", "mkv"].filter { $0 != URL(fileURLWithPath: job.output).pathExtension.lowercased() && OutputFile.muxer($0, holds: par) }
                    let keep = homes.isEmpty ? "" : " (use \(homes.map { "." + $0 }.joined(separator: " or ")) to keep it)"
                    logger.notice("subtitle stream \(i) (\(codecName)) cannot go in .\(URL(fileURLWithPath: job.output).pathExtension); not copied\(keep)")
                }
            case AVMEDIA_TYPE_ATTACHMENT:
                // Matroska's attachments: the fonts an ASS track is drawn with, notes (FFmpeg reads
                // an image attachment as cover art instead). They have no packets; the file is the
                // stream's extradata, named by its tags.
                let name = metadata(s, "filename") ?? "stream \(i)"
                if output.muxerName == "matroska" && par.pointee.extradata_size > 0 {
                    _ = try output.addCopiedStream(from: s)
                } else {
                    logger.notice("attachment '\(name)' (stream \(i)) cannot go in .\(URL(fileURLWithPath: job.output).pathExtension); not copied (use .mkv to keep it)")
                }
            case AVMEDIA_TYPE_VIDEO where s.pointee.disposition & AV_DISPOSITION_ATTACHED_PIC != 0:
                // Cover art (a thumbnail embedded by a downloader or an editor): one picture, read
                // as the first packet. .mp4 holds it as such ("covr"); Matroska as an attachment,
                // which is where an .mkv had it (FFmpeg 5.1's Matroska muxer would make a copied
                // picture a one-frame video track instead); .mov drops it.
                let picture = s.pointee.attached_pic
                if job.stripMetadata {
                    // Its own EXIF would go on (a phone's or camera's location, make, model).
                    logger.notice("cover art (stream \(i)) is not copied under --strip: it carries its own metadata")
                    continue
                }
                let kind: (mime: String, ext: String)? = switch par.pointee.codec_id {
                case AV_CODEC_ID_MJPEG: ("image/jpeg", "jpg")
                case AV_CODEC_ID_PNG: ("image/png", "png")
                default: nil
                }
                if output.muxerName == "matroska", picture.size > 0, let kind {
                    try output.addAttachment(UnsafeRawBufferPointer(start: picture.data, count: Int(picture.size)),
                                             filename: metadata(s, "filename") ?? "cover.\(kind.ext)",
                                             mimetype: metadata(s, "mimetype") ?? kind.mime)
                } else if output.muxerName == "mp4", kind != nil, output.canHold(par) {
                    routes[i] = .copy(output: try output.addCopiedStream(from: s))
                } else if kind == nil {
                    logger.notice("cover art (stream \(i), \(codecName)) is not copied: only JPEG and PNG covers are kept")
                } else {
                    let ext = URL(fileURLWithPath: job.output).pathExtension
                    logger.notice("cover art (stream \(i), \(codecName)) cannot go in .\(ext); not copied (use .mp4 or .mkv to keep it)")
                }
            case AVMEDIA_TYPE_VIDEO:
                logger.notice("extra video stream \(i) (\(codecName)) is not copied; only video stream \(videoIndex) is upscaled")
            default:
                let kind = cName(av_get_media_type_string(par.pointee.codec_type))
                let tag = fourCC(par.pointee.codec_tag)
                let name = par.pointee.codec_id == AV_CODEC_ID_NONE && !tag.isEmpty ? tag : codecName
                // A QuickTime timecode track: its start is also on the video stream (as FFmpeg
                // reads .mov/.mp4), and that tag is copied, which the .mov/.mp4 muxer writes back
                // as a timecode track and Matroska keeps as a tag.
                if tag == "tmcd", let timecode = metadata(input.stream(videoIndex), "timecode") {
                    logger.notice("timecode \(timecode) (stream \(i)) is kept as the video's start timecode")
                } else if tag == "gpmd" {
                    // A GoPro's (or a camera app's) telemetry: GPS, accelerometer, gyroscope, read
                    // by stabilizers, map overlays and speed gauges. .mov and .mp4 keep it as the
                    // camera wrote it; it was dropped as "data stream (bin_data)".
                    let ext = URL(fileURLWithPath: job.output).pathExtension
                    if job.stripMetadata {
                        // Its GPS track is where the camera was: --strip drops it, as a cover's EXIF.
                        logger.notice("GoPro telemetry (GPS and motion, gpmd: stream \(i)) is not copied under --strip: it holds where the camera was")
                    } else if ["mov", "mp4"].contains(output.muxerName), output.canHold(par, keepingTag: true) {
                        let out = try output.addCopiedStream(from: s)
                        output.stream(out).pointee.codecpar.pointee.codec_tag = par.pointee.codec_tag
                        routes[i] = .copy(output: out)
                    } else {
                        logger.notice("GoPro telemetry (GPS and motion, gpmd: stream \(i)) cannot go in .\(ext); not copied (use .mp4 or .mov to keep it)")
                    }
                } else if tag == "text" && input.context.pointee.nb_chapters > 0 {
                    // A QuickTime chapter track, read as the file's chapters, which are copied
                    // ("data stream (bin_data) is not copied" was said of every file with chapters).
                } else {
                    logger.notice("\(kind) stream \(i) (\(name)) is not copied")
                }
            }
        }
        return (routes, copied, transcoded)
    }

    /// One chunk: the video frames of `chunk.range` only, decoded from its seek keyframe
    /// (earlier frames only prime the temporal hold), checked against the planned count. With
    /// a `span` and an encoder that can start a chunk mid-stream, the chunks after it that the
    /// span hands over, each into its own file.
    private func runChunk(
        _ chunk: ChunkTask, input: InputFile, videoIndex: Int, decoder: VideoDecoder, encoder: VideoEncoder,
        cancel: CancellationFlag, start: Date,
        progress: @escaping (TranscodeProgress) -> Void
    ) throws -> TranscodeSummary {
        for i in 0..<input.streamCount where i != videoIndex { input.stream(i).pointee.discard = AVDISCARD_ALL }
        var task = chunk
        var output = try ChunkWriter(path: chunk.path, encoder: encoder.context)
        // Packets written for the span's chunks before `task`.
        var base = 0
        let close = { [self] (frames: Int) throws -> TranscodeSummary in
            // The first chunk of a stream-copied cut may start with pictures before its first
            // keyframe, or at an open-GOP keyframe whose leading pictures reference the GOP cut
            // away: they cannot be decoded, and the one-piece run leaves them out too (Matroska
            // has no edit list to mark them).
            let range = task.range
            guard frames == range.frames || (range.index == 0 && frames < range.frames
                && range.frames - frames <= ChunkPlan.leadingPictures(path: job.input)) else {
                throw UpscaleError(.processing, "'\(job.input)': chunk \(range.index + 1) has \(frames) frames, the source \(range.frames) in its range; the file's timestamps are irregular — run it with --chunk-seconds 0 (one piece)")
            }
            let checksum = try output.finish()
            var summary = TranscodeSummary(output: task.path, frames: frames, seconds: Date().timeIntervalSince(start),
                                           encoderName: encoder.name, audioCopied: 0, audioTranscoded: 0, checksum: checksum)
            summary.droppedCaptions = decoder.dropsCaptions || encoder.lostCaptions
            summary.droppedHDR10Plus = decoder.dropsHDR10Plus || encoder.lostHDR10Plus
            return summary
        }
        let follow = span.flatMap { span in
            encoder.forcesKeyframes ? ChunkFollow(span: span, begin: { next, framesSoFar in
                try span.finished(task, try close(framesSoFar - base))
                base = framesSoFar
                task = next
                output = try ChunkWriter(path: next.path, encoder: encoder.context)
                return output
            }) : nil
        }
        do {
            if let seek = chunk.range.seek {
                try check(input.seek(stream: videoIndex, to: seek, flags: AVSEEK_FLAG_BACKWARD),
                          "'\(job.input)': cannot seek to chunk \(chunk.range.index + 1)")
            }
            let frames = try pump(input: input, videoIndex: videoIndex, decoder: decoder, encoder: encoder,
                                  output: output, videoOut: 0, routes: [:], range: chunk.range, follow: follow, cancel: cancel,
                                  start: start) { p in
                // Each chunk's own frames (the meter adds the finished ones).
                progress(TranscodeProgress(framesDone: p.framesDone - base, framesTotal: task.range.frames, elapsed: p.elapsed))
            }
            if cancel.isCancelled { throw UpscaleError.cancelled() }
            let summary = try close(frames - base)
            try span?.finished(task, summary)
            return summary
        } catch {
            output.abandon()
            throw error
        }
    }

    private func pump(
        input: InputFile, videoIndex: Int, decoder: VideoDecoder, encoder: VideoEncoder, output: PacketSink,
        videoOut: Int, routes: [Int: StreamRoute], range first: ChunkRange?, follow: ChunkFollow?, cancel: CancellationFlag,
        start: Date, progress: @escaping (TranscodeProgress) -> Void
    ) throws -> Int {
        // The chunk being read (after `first`, those `follow` hands over).
        var range = first
        let videoStream = input.stream(videoIndex)
        // One decoded picture waits: decoding one is a small part of upscaling and encoding it.
        let decoded = BoundedQueue<Item>(capacity: 1)
        let scaled = BoundedQueue<Item>(capacity: 1)
        let inputPool = PicturePool(width: decoder.width, height: decoder.height, highBitDepth: encoder.tenBit, deepLayout: encoder.layout)
        let outputPool = PicturePool(width: job.width, height: job.height, highBitDepth: encoder.tenBit, deepLayout: encoder.layout,
                                     limit: encoder.copiesOnEntry ? 1 : nil)
        let layout: ChromaLayout = encoder.tenBit ? encoder.layout : .yuv420
        let scaler = FrameScaler(input: (decoder.width, decoder.height), output: (job.width, job.height),
                                 layout: layout, kernel: job.kernel, threads: job.threads,
                                 refiner: job.refine ? EdgeRefiner.trained(input: (decoder.width, decoder.height), output: (job.width, job.height)) : nil,
                                 hold: TemporalHold(), chromaSiting: decoder.chromaSiting(in: layout))
        let failure = FirstError()
        let watch = ReaderWatch()
        let stopAll = {
            decoded.cancel()
            scaled.cancel()
            outputPool.cancel()
        }
        var total = Int(videoStream.pointee.nb_frames)
        if total <= 0 {
            let duration = input.seconds
            let rate = av_guess_frame_rate(input.context, videoStream, nil).double
            if duration > 0 && rate > 0 { total = Int((duration * rate).rounded()) }
        }
        if let range { total = range.frames }
        // After a jump in an MPEG-TS/PS clock the length the header gives (first to last
        // timestamp) says nothing, and a raw stream (.h264, .hevc) has no length at all: the
        // total is then counted from the share of bytes read (a pipe has no size: no total).
        let planned = total > 0 ? total : nil
        let fileSize = avio_size(input.context.pointee.pb)
        reckoned.withLock { $0 = nil }

        let hidden = HiddenPackets(muxer: (output as? OutputFile)?.muxerName)
        // The last picture given to the scaler: its time and how long it is shown (stream time
        // base). Set by the reader, read by the writer once the reader is done.
        var lastShown: (pts: Int64, length: Int64)?
        let readStage = {
            var packet: UnsafeMutablePointer<AVPacket>? = av_packet_alloc()
            defer { av_packet_free(&packet) }
            do {
                var kept = 0
                var lastGiven: Int64?
                // A damaged picture fails the job when another picture follows it; the last
                // picture of a file cut short mid-picture (a recording stopped by a crash or a
                // full disk, MPEG-TS above all) ends the output with a note instead, as the
                // pictures before it are whole. The damage is then in the file's last packets
                // (a frame-threaded decoder reports it a packet or two late); what the decoder
                // still gives at the end is kept.
                var heldDamage: UpscaleError?
                let pushPicture: (Picture, Int64) throws -> Void = { frame, pts in
                    if let chunk = range {
                        var place = pts == noPTS ? 1 : chunk.place(pts)
                        // The first picture past the chunk: on into the next one where it is ours to make.
                        if place > 0, kept > 0, let follow, let next = follow.span.claim(chunk, pts) {
                            follow.announce(next, at: pts)
                            range = next.range
                            kept = 0
                            place = 0
                        }
                        if place != 0 {
                            // Before the chunk: only the hold sees it. Past it: the chunk is complete.
                            // (Only before the first: a picture timed back into a chunk already read is
                            // one out of order, left out.)
                            if place < 0 && scaler.needsPreroll && range == first {
                                if !decoded.push(.preroll(frame)) { throw UpscaleError.cancelled() }
                            } else {
                                inputPool.give(frame)
                            }
                            if place > 0 { throw ChunkComplete() }
                            return
                        }
                        if kept == 0, let first = range?.start, pts != first {
                            throw UpscaleError(.processing, "'\(self.job.input)': chunk \(range!.index + 1) should start at timestamp \(first) but decoding from its keyframe gave \(pts) first; run it with --chunk-seconds 0 (one piece)")
                        }
                        kept += 1
                    }
                    // After damage the demuxer skipped, a decoder may give a picture timed at or
                    // before one already given; the encoder's timestamps then went backwards and
                    // the muxer refused them ("writing failed: Invalid argument"). Left out.
                    if pts != noPTS {
                        if let last = lastGiven, pts <= last {
                            inputPool.give(frame)
                            self.backwards.withLock { $0 += 1 }
                            return
                        }
                        lastGiven = pts
                    }
                    watch.waiting(true)
                    defer { watch.waiting(false) }
                    if !decoded.push(.picture(frame, pts: pts)) { throw UpscaleError.cancelled() }
                    if pts != noPTS { lastShown = (pts, decoder.lastDuration) }
                    watch.picture()
                }
                let forward: (UnsafeMutablePointer<AVPacket>, Int) -> Void = { p, stream in
                    decoded.push(.packet(av_packet_clone(p), stream: stream), cost: 0)
                }
                // Room first, then a picture: no decoded picture waits, converted, on a full queue.
                let take: () -> Picture = {
                    watch.waiting(true)
                    _ = decoded.waitForRoom()
                    watch.waiting(false)
                    return inputPool.take()!
                }
                reading: while try input.read(into: packet!) {
                    defer { av_packet_unref(packet) }
                    if cancel.isCancelled { throw UpscaleError.cancelled() }
                    let index = Int(packet!.pointee.stream_index)
                    let p = packet!.pointee
                    if p.pts != noPTS { self.lastRead.see(Double(p.pts + max(p.duration, 0)) * input.stream(index).pointee.time_base.double) }
                    if index == videoIndex {
                        if let heldDamage { throw heldDamage }
                        if input.clockJumps > 0 || planned == nil, range == nil, fileSize > 0, watch.pictures > 0 {
                            let share = Double(avio_tell(input.context.pointee.pb)) / Double(fileSize)
                            if share > 0 { self.reckoned.withLock { $0 = max(watch.pictures, Int((Double(watch.pictures) / share).rounded())) } }
                        }
                        if TestHook.current == .stall && watch.pictures > 0 { TestHook.stallForever() }
                        do {
                            try decoder.decode(packet, make: take, emit: pushPicture)
                        } catch is ChunkComplete {
                            decoded.finish()
                            return
                        } catch let error as UpscaleError where range?.seek != nil && range == first && kept == 0 && error == decoder.damage?.error {
                            // Pre-roll from the keyframe before a chunk: that keyframe's own open-GOP
                            // leading pictures lack their references (they belong to an earlier
                            // chunk, which decodes them whole). Frames of this chunk are checked.
                        } catch let error as UpscaleError where error == decoder.damage?.error {
                            heldDamage = error
                        }
                    } else if let route = routes[index] {
                        switch route {
                        case .copy(let out):
                            packet!.pointee.pos = -1
                            hidden.pass(packet!, stream: out) { forward($0, out) }
                        case .audio(let t, let out):
                            try t.transcode(packet) { forward($0, out) }
                        case .subtitles(let t, let out):
                            try t.transcode(packet!) { forward($0, out) }
                        }
                    }
                }
                // The pictures held back for reordering come at the end; a damaged one among
                // them (a frame-threaded decoder's error comes late) is skipped for the rest.
                var draining = true
                for _ in 0..<64 where draining {
                    do {
                        try decoder.decode(nil, make: take, emit: pushPicture)
                        draining = false
                    } catch is ChunkComplete {
                        draining = false
                    } catch let error as UpscaleError where error == decoder.damage?.error {
                        heldDamage = heldDamage ?? error
                    }
                }
                if heldDamage != nil, let place = decoder.damage?.place { self.endDamage.withLock { $0 = place } }
                for case .audio(let t, let out) in routes.values {
                    try t.transcode(nil) { forward($0, out) }
                }
                for case .subtitles(let t, let out) in routes.values {
                    try t.transcode(nil) { forward($0, out) }
                }
                decoded.finish()
            } catch {
                failure.record(error)
                stopAll()
            }
            watch.waiting(true)
        }

        let scaleStage = {
            while let item = decoded.pop() {
                switch item {
                case .picture(let picture, let pts):
                    // At most two output pictures, the one the encoder holds and the next; one
                    // for an encoder that copies on entry (the pool waits for it to come back).
                    if !scaled.waitForRoom() { return }
                    guard let out = outputPool.take() else { return }
                    switch (picture, out) {
                    case (.eight(let a), .eight(let b)): scaler.scale(a, into: b)
                    case (.deep(let a), .deep(let b)): scaler.scale(a, into: b)
                    default: preconditionFailure("pools of different depths")
                    }
                    inputPool.give(picture)
                    if !scaled.push(.picture(out, pts: pts)) { return }
                case .preroll(let picture):
                    switch picture {
                    case .eight(let a): scaler.prime(a)
                    case .deep(let a): scaler.prime(a)
                    }
                    inputPool.give(picture)
                case .packet:
                    if !scaled.push(item, cost: 0) { return }
                }
            }
            scaled.finish()
        }

        var framesDone = 0
        // Where video packets go: `output`, then the file of each chunk `follow` hands over.
        var sink = output
        // Chunks whose first picture went to the encoder, its packet not out yet.
        var pendingChunks: [ChunkTask] = []
        // The video packet last handed back, written once the next one comes, when the length
        // of its picture is known (FFmpeg's encoders give none): the last of them also reaches
        // the end of the last picture shown.
        var heldVideo: UnsafeMutablePointer<AVPacket>?
        var reorderDelay: Int64?
        // How long the last picture is shown. An .mp4/.mov says so only in its track's length
        // (a slide or a frozen end held for seconds): FFmpeg's demuxer gives its packet one
        // frame's time when B-pictures reorder the stream. Where every sample the index lists was
        // read, the length is the source's own. A file cut short with its index at the front
        // (faststart, a download stopped) lists samples it no longer holds: its last picture
        // took the rest of the track's length (a 6 s clip cut at 1.2 s came out 6 s long,
        // frozen for 4.8 s with the sound gone), so there it keeps its own length, as in a
        // Matroska or MPEG-TS file cut short.
        let tail = { () -> Int64 in
            guard let (last, shownFor) = lastShown else { return 0 }
            var length = shownFor
            let stream = videoStream.pointee
            if range?.end == nil, input.isQuickTime, stream.duration > 0, input.indexIsWhole(videoIndex) {
                length = max(length, (stream.start_time == noPTS ? 0 : stream.start_time) + stream.duration - last)
            }
            return av_rescale_q(length, stream.time_base, encoder.context.pointee.time_base)
        }
        // `ending`: at the end of the run, the last picture's length (`tail`), else nil.
        let writeHeld = { (ending: Int64?) throws in
            guard let held = heldVideo else { return }
            if let length = encoder.shownLength(of: held.pointee.pts) { held.pointee.duration = length }
            // The muxers end the video at the last packet in decoding order (.mp4/.mov: the
            // sample table's end) or at its latest picture's end (the edit list, Matroska):
            // both must reach the last picture's end. With B-pictures the last picture shown
            // is not the last packet, and a held last picture (a slide) outlasts a frame;
            // with no length at all (an Ogg source, which has no frame rate) the .mp4/.mov
            // muxer gave the last picture none, and players lost it. Neither may go past that
            // end: where the rate fell towards the end (a screen recording at 30 fps, then 15)
            // the reordering delay there is longer than the first one, which the decoding-order
            // end allows for, and the track ran a frame long.
            if let ending, let end = encoder.lastPlaced.map({ $0 + ending }), held.pointee.dts != noPTS {
                var length = end - held.pointee.dts - (reorderDelay ?? 0)
                if held.pointee.pts != noPTS { length = min(length, end - held.pointee.pts) }
                held.pointee.duration = max(held.pointee.duration, length)
            }
            try sink.write(held, stream: videoOut)
            av_packet_free(&heldVideo)
        }
        let writeStage = {
            defer { av_packet_free(&heldVideo) }
            do {
                // A frame counts as done when the encoder hands back its packet, so fps and ETA
                // include the encoder's own delay instead of racing ahead into its look-ahead.
                let writeVideo: (UnsafeMutablePointer<AVPacket>) throws -> Void = {
                    // The encoder's last packets come from its flush, one picture per call (x265
                    // holds its look-ahead: 40 pictures at veryslow, seconds each at 4K and up).
                    // A stop is seen between packets, not after the last of them.
                    if cancel.isCancelled { throw UpscaleError.cancelled() }
                    if let follow, !pendingChunks.isEmpty, encoder.takeForcedKey($0.pointee.pts) {
                        let next = pendingChunks.removeFirst()
                        // The next chunk's first packet: the chunk before it is complete. It must
                        // be an IDR picture to join after any version of that chunk (`isIDR`).
                        guard $0.pointee.flags & AV_PKT_FLAG_KEY != 0, VideoEncoder.isIDR($0, codec: encoder.settings.codec) else {
                            throw UpscaleError(.processing, "the \(encoder.name) encoder did not start chunk \(next.range.index + 1) with an IDR picture; run it with --chunk-seconds 0 (one piece)")
                        }
                        try writeHeld(nil)
                        sink = try follow.begin(next, framesDone)
                    }
                    if reorderDelay == nil, $0.pointee.pts != noPTS, $0.pointee.dts != noPTS { reorderDelay = $0.pointee.pts - $0.pointee.dts }
                    try writeHeld(nil)
                    guard let copy = av_packet_clone($0) else { throw UpscaleError(.processing, "out of memory") }
                    heldVideo = copy
                    framesDone += 1
                    TestHook.crashIfDue(frames: framesDone)
                    let framesTotal = self.reckoned.withLock { $0 } ?? planned
                    progress(TranscodeProgress(framesDone: framesDone, framesTotal: framesTotal,
                                               elapsed: Date().timeIntervalSince(start)))
                }
                while let item = scaled.pop() {
                    switch item {
                    case .picture(let frame, let pts):
                        let givenBack = outputPool.givenBack
                        // The first picture of a chunk `follow` handed over (its packet starts the chunk's file).
                        let next = follow?.start(at: pts)
                        if let next { pendingChunks.append(next) }
                        try encoder.encode(frame, pts: pts, keyframe: next != nil, captions: decoder.keepsCaptions ? decoder.captions(at: pts) : nil,
                                           hdr10Plus: decoder.hdr10Plus(at: pts),
                                           release: { outputPool.give(frame) }, emit: writeVideo)
                        // An encoder that copies on entry gave it back: the next picture is made
                        // into it. One that still holds it lifts the pool's limit.
                        if outputPool.givenBack == givenBack { outputPool.lift() }
                    case .preroll:
                        break
                    case .packet(let p, let stream):
                        var owned: UnsafeMutablePointer<AVPacket>? = p
                        defer { av_packet_free(&owned) }
                        try sink.write(p, stream: stream)
                    }
                }
                if failure.current == nil && !cancel.isCancelled {
                    let ending = tail()
                    encoder.endShown(after: ending)
                    try encoder.encode(nil, pts: 0, emit: writeVideo)
                    try writeHeld(ending)
                }
            } catch {
                failure.record(error)
                stopAll()
            }
        }

        let stages: [() -> Void] = [readStage, scaleStage, writeStage]
        let tracker = StageTracker(count: stages.count)
        for (index, stage) in stages.enumerated() {
            Thread.detachNewThread {
                stage()
                tracker.finished(index)
            }
        }
        // The reader may never come back from a damaged file (a demuxer or decoder caught in a
        // loop). It is left behind once it has produced no picture for `stallSeconds` without
        // waiting on the scaler; the scale and write stages always finish, so the output can
        // be abandoned safely and the process can end.
        while !tracker.allFinished {
            if tracker.wait(milliseconds: 200) { continue }
            if cancel.isCancelled { stopAll() }
            if !tracker.isFinished(0), watch.stalled(for: job.stallSeconds) {
                failure.record(UpscaleError(.processing, "'\(job.input)' made no progress for \(Int(job.stallSeconds)) s after frame \(watch.pictures) (the demuxer or decoder is stuck on damaged data); re-export or trim the source"))
                stopAll()
                while !(tracker.isFinished(1) && tracker.isFinished(2)) { _ = tracker.wait(milliseconds: 200) }
                break
            }
        }
        if let error = failure.current { throw error }
        if cancel.isCancelled { throw UpscaleError.cancelled() }
        return framesDone
    }
}

/// When the reading stage last handed on a picture, and whether it is waiting on the
/// scaler (a full queue is not a stall).
private final class ReaderWatch: @unchecked Sendable {
    private let lock = NSLock()
    private var last = DispatchTime.now()
    private var isWaiting = false
    private var count = 0

    func picture() {
        lock.lock()
        count += 1
        last = .now()
        lock.unlock()
    }

    func waiting(_ value: Bool) {
        lock.lock()
        isWaiting = value
        last = .now()
        lock.unlock()
    }

    var pictures: Int {
        lock.lock()
        defer { lock.unlock() }
        return count
    }

    func stalled(for seconds: Double) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        return !isWaiting && Double(DispatchTime.now().uptimeNanoseconds - last.uptimeNanoseconds) / 1e9 > seconds
    }
}

/// Which pipeline stages have returned.
private final class StageTracker: @unchecked Sendable {
    private let lock = NSLock()
    private let signal = DispatchSemaphore(value: 0)
    private var done: [Bool]

    init(count: Int) { done = Array(repeating: false, count: count) }

    func finished(_ index: Int) {
        lock.lock()
        done[index] = true
        lock.unlock()
        signal.signal()
    }

    func isFinished(_ index: Int) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        return done[index]
    }

    var allFinished: Bool {
        lock.lock()
        defer { lock.unlock() }
        return !done.contains(false)
    }

    /// True when a stage finished within the time.
    func wait(milliseconds: Int) -> Bool { signal.wait(timeout: .now() + .milliseconds(milliseconds)) == .success }
}

/// The first error any of several threads hit (pipeline stages, chunk workers); the others stop.
/// The latest of the times seen, from any thread.
final class LatestTime: @unchecked Sendable {
    private let lock = NSLock()
    private var latest: Double?
    func see(_ time: Double) {
        lock.lock()
        latest = max(latest ?? time, time)
        lock.unlock()
    }
    var value: Double? {
        lock.lock()
        defer { lock.unlock() }
        return latest
    }
}

public final class FirstError: @unchecked Sendable {
    private let lock = NSLock()
    private var error: Error?
    public init() {}
    public func record(_ e: Error) {
        lock.lock()
        if error == nil { error = e }
        lock.unlock()
    }
    public var current: Error? {
        lock.lock()
        defer { lock.unlock() }
        return error
    }
}
