import CFFmpeg
import Foundation

/// An opened, probed input container. Opening checks the things users get wrong
/// (missing file, a folder, an empty file, not media) and says so in one line.
final class InputFile {
    let path: String
    private(set) var context: UnsafeMutablePointer<AVFormatContext>
    /// `MediaLibrary.demuxErrors` before this file was opened: errors since are this file's
    /// (its probe reads ahead, so they may come before the first packet is asked for).
    let demuxErrorsAtOpen = MediaLibrary.demuxErrors
    /// Evens out jumps in the clock of MPEG-TS and MPEG-PS files (nil for other containers).
    private var clock: ClockMend?

    init(path: String) throws {
        self.path = path
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            if path == "-" {
                throw UpscaleError(.input, "'-' is not standard input here; give /dev/stdin to read from a pipe (… | upscale /dev/stdin -o out.mp4)")
            }
            throw UpscaleError(.input, "'\(path)' does not exist; check the path")
        }
        if isDirectory.boolValue {
            throw UpscaleError(.input, "'\(path)' is a folder; give a video file (or use 'upscale watch' for folders)")
        }
        let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)??.intValue ?? -1
        // A pipe (/dev/stdin, a named pipe) has no size: it is read as it comes.
        if size == 0 && JobPlanner.isRegularFile(path) {
            throw UpscaleError(.input, "'\(path)' is empty (0 bytes); it may still be copying or the copy failed")
        }
        guard FileManager.default.isReadableFile(atPath: path) else {
            throw UpscaleError(.input, "'\(path)' cannot be read; check its permissions")
        }
        var ctx: UnsafeMutablePointer<AVFormatContext>?
        let opened = avformat_open_input(&ctx, localURL(path), nil, nil)
        guard opened >= 0, let ctx else {
            if ContainerLength.lacksIndex(path) {
                throw UpscaleError(.input, "'\(path)' \(UpscaleError.missingIndex): the recording or the copy stopped before it was finished; copy it again, or rebuild the index with a repair tool (such as untrunc, with a good file from the same camera)")
            }
            throw UpscaleError(.input, "'\(path)' is not a media file FFmpeg can read (\(ffmpegErrorText(opened)))")
        }
        context = ctx
        if ctx.pointee.iformat.pointee.flags & AVFMT_TS_DISCONT != 0 { clock = ClockMend() }
        InputFile.probed.countOpen()
        let probed = avformat_find_stream_info(ctx, nil)
        if probed < 0 {
            // deinit closes the context: every stored property is set, so it runs on this throw.
            throw UpscaleError(.input, "'\(path)' could not be probed: \(ffmpegErrorText(probed))")
        }
    }

    deinit {
        var c: UnsafeMutablePointer<AVFormatContext>? = context
        avformat_close_input(&c)
    }

    /// The input a job's plan probed, kept for that job's transcoder in the same process: a
    /// probe reads and decodes the first pictures on one thread (H.264: until it can tell the
    /// reorder delay), and opening the file again for the transcode did all of that twice
    /// (measured: two probes per job, ~50 ms of a 2 s 720p job; the ffmpeg command probes once).
    /// One slot, taken once; a file whose size or modification time changed in between is
    /// opened afresh.
    private static let probed = ProbedSlot()

    static func keepProbed(_ input: InputFile) {
        probed.put(input)
    }

    static func takeProbed(path: String) -> InputFile? {
        probed.take(path: path)
    }

    /// How many inputs this process has opened and probed (for the tests).
    static var opens: Int { probed.opens }

    var streamCount: Int { Int(context.pointee.nb_streams) }

    func stream(_ index: Int) -> UnsafeMutablePointer<AVStream> { context.pointee.streams[index]! }

    /// How long the file plays, in seconds (0 when unknown), for the progress total, the chunk
    /// plan and the disk estimate: the container's duration, unless a subtitle stream alone
    /// stretches it past every other stream's own length (FFmpeg's dvdsub encoder leaves
    /// captions with no end 2^32-1 ms long, and a 12 s file then said it lasted 50 days).
    var seconds: Double {
        let whole = context.pointee.duration > 0 ? Double(context.pointee.duration) / Double(AV_TIME_BASE) : 0
        var longest = 0.0, stretched = false
        for i in 0..<streamCount {
            let s = stream(i)
            // A stream's own length, or Matroska's per-track DURATION tag ("00:00:12.021000000";
            // mkvmerge's statistics name it DURATION-eng and so on).
            var length = s.pointee.duration > 0 ? Double(s.pointee.duration) * s.pointee.time_base.double : 0
            if length == 0, let tag = av_dict_get(s.pointee.metadata, "DURATION", nil, AV_DICT_IGNORE_SUFFIX) {
                let parts = String(cString: tag.pointee.value).split(separator: ":").compactMap { Double($0) }
                if parts.count == 3 { length = parts[0] * 3600 + parts[1] * 60 + parts[2] }
            }
            if s.pointee.codecpar.pointee.codec_type == AVMEDIA_TYPE_SUBTITLE {
                if length >= whole - 1 { stretched = true }
            } else {
                longest = max(longest, length)
            }
        }
        return stretched && longest > 0 && longest < whole / 2 ? longest : whole
    }

    var formatName: String { String(cString: context.pointee.iformat.pointee.name) }

    /// FFmpeg's name for its one demuxer of .mov, .mp4, .m4a, .3gp and .mj2.
    static let quickTimeDemuxer = "mov,mp4,m4a,3gp,3g2,mj2"

    /// Whether `context` was opened by that demuxer (whose index holds every packet's time).
    static func isQuickTime(_ context: UnsafeMutablePointer<AVFormatContext>) -> Bool {
        String(cString: context.pointee.iformat.pointee.name) == quickTimeDemuxer
    }

    var isQuickTime: Bool { InputFile.isQuickTime(context) }

    /// Whether every sample the index of stream `index` lists lies within the file: false for
    /// an .mp4/.mov cut short with its index at the front (faststart, a download stopped), whose
    /// index still lists what was cut away. True where there is no index or no size to compare.
    /// Every entry is looked at: samples need not be stored in the order they are shown.
    func indexIsWhole(_ index: Int) -> Bool {
        let stream = self.stream(index)
        let count = avformat_index_get_entries_count(stream)
        let size = avio_size(context.pointee.pb)
        guard count > 0, size > 0 else { return true }
        for entry in 0..<count {
            guard let sample = avformat_index_get_entry(stream, entry) else { continue }
            if sample.pointee.pos + Int64(sample.pointee.size) > size { return false }
        }
        return true
    }

    /// The first real video stream (cover art and other attached pictures are skipped).
    func videoStreamIndex() throws -> Int {
        if let index = InputFile.videoStreamIndex(in: context) { return index }
        throw UpscaleError(.input, "'\(path)' has no video stream (audio only?); nothing to upscale")
    }

    /// The stream `videoStreamIndex()` picks, in any opened container (the head start's too):
    /// the default video stream, else the first, never an attached picture.
    static func videoStreamIndex(in container: UnsafeMutablePointer<AVFormatContext>) -> Int? {
        var fallback: Int?
        for i in 0..<Int(container.pointee.nb_streams) {
            let s = container.pointee.streams[i]!
            guard s.pointee.codecpar.pointee.codec_type == AVMEDIA_TYPE_VIDEO else { continue }
            if s.pointee.disposition & AV_DISPOSITION_ATTACHED_PIC != 0 { continue }
            if s.pointee.disposition & AV_DISPOSITION_DEFAULT != 0 { return i }
            if fallback == nil { fallback = i }
        }
        return fallback
    }

    /// Reads the next packet into `packet`; false at the end of the file.
    func read(into packet: UnsafeMutablePointer<AVPacket>) throws -> Bool {
        let result = av_read_frame(context, packet)
        if result == averrorEOF { return false }
        if result < 0 {
            throw UpscaleError(.processing, "reading '\(path)' failed: \(ffmpegErrorText(result)); the file may be truncated or damaged")
        }
        clock?.mend(packet, stream: stream(Int(packet.pointee.stream_index)))
        return true
    }

    /// How many times the file's clock jumped (over 10 s, `ClockMend`) in what was read so far
    /// (MPEG-TS/PS: segments joined, a splice); the packets after a jump were moved on.
    var clockJumps: Int { clock?.jumps ?? 0 }

    /// Seeks (`av_seek_frame`) and forgets the clock read so far.
    func seek(stream index: Int, to timestamp: Int64, flags: Int32) -> Int32 {
        clock?.restart()
        return av_seek_frame(context, Int32(index), timestamp, flags)
    }
}

extension AVRational {
    var double: Double { den == 0 ? 0 : Double(num) / Double(den) }
}

private final class ProbedSlot: @unchecked Sendable {
    private let lock = NSLock()
    /// What the kept probe was made from: the file's size and modification time.
    private struct Stamp: Equatable {
        let size: Int, modified: Date?

        init?(_ path: String) {
            guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
                  let size = (attributes[.size] as? NSNumber)?.intValue else { return nil }
            self.size = size
            modified = attributes[.modificationDate] as? Date
        }
    }

    private var kept: (input: InputFile, stamp: Stamp)?
    private var openCount = 0

    func countOpen() {
        lock.lock()
        openCount += 1
        lock.unlock()
    }

    var opens: Int {
        lock.lock()
        defer { lock.unlock() }
        return openCount
    }

    func put(_ input: InputFile) {
        let stamp = Stamp(input.path)
        lock.lock()
        defer { lock.unlock() }
        kept = stamp.map { (input, $0) }
    }

    func take(path: String) -> InputFile? {
        lock.lock()
        let taken = kept
        kept = nil
        lock.unlock()
        guard let taken, taken.input.path == path, Stamp(path) == taken.stamp else { return nil }
        return taken.input
    }
}

extension InputFile {
    /// Decodes the first picture of `path`'s main video stream and hands it to `body` with the
    /// stream (nil where no picture decodes, or there is no decoder for it).
    static func firstPicture<R>(of path: String, _ body: (UnsafeMutablePointer<AVFrame>?, UnsafeMutablePointer<AVStream>) throws -> R) throws -> R {
        MediaLibrary.configure()
        let input = try InputFile(path: path)
        let index = try input.videoStreamIndex()
        let stream = input.stream(index)
        guard let codec = avcodec_find_decoder(stream.pointee.codecpar.pointee.codec_id) else { return try body(nil, stream) }
        var ctx: UnsafeMutablePointer<AVCodecContext>? = avcodec_alloc_context3(codec)
        defer { avcodec_free_context(&ctx) }
        guard avcodec_parameters_to_context(ctx, stream.pointee.codecpar) >= 0, avcodec_open2(ctx, codec, nil) >= 0 else { return try body(nil, stream) }
        var packet: UnsafeMutablePointer<AVPacket>? = av_packet_alloc()
        var frame: UnsafeMutablePointer<AVFrame>? = av_frame_alloc()
        defer {
            av_packet_free(&packet)
            av_frame_free(&frame)
        }
        var sentEnd = false, sent = 0
        while true {
            if avcodec_receive_frame(ctx, frame) >= 0 { return try body(frame, stream) }
            // No picture from the first 256 packets: none is taken (a damaged file was read whole).
            if sentEnd || sent >= 256 { return try body(nil, stream) }
            if try input.read(into: packet!) {
                if Int(packet!.pointee.stream_index) == index {
                    _ = avcodec_send_packet(ctx, packet)
                    sent += 1
                }
                av_packet_unref(packet)
            } else {
                _ = avcodec_send_packet(ctx, nil)
                sentEnd = true
            }
        }
    }
}
