import CFFmpeg
import UpscaleCore
import Foundation
import Synchronization

public enum StreamKind: String, Sendable {
    case video, audio, subtitle, data, attachment, unknown
}

/// What one stream of a file holds, as FFmpeg reports it.
public struct StreamInfo: Sendable {
    public let index: Int
    public let kind: StreamKind
    public let codec: String
    /// The codec tag as four characters (for example "hvc1"), empty when none.
    public let codecTag: String
    public let width: Int
    public let height: Int
    public let pixelFormat: String?
    public let sampleAspect: (num: Int, den: Int)
    public let timeBase: (num: Int, den: Int)
    public let frameRate: Double
    public let frameCount: Int
    public let sampleRate: Int
    public let channels: Int
    /// The channel layout as FFmpeg names it ("stereo", "quad", "5.1(side)"; empty for video).
    public let channelLayout: String
    public let language: String?
    /// The start timecode the container gives the stream ("01:00:00:00"), if any.
    public let timecode: String?
    /// VP8/VP9 flagged as carrying alpha (WebM's `alpha_mode`), which only libvpx decodes.
    public let alphaTagged: Bool
    public let isAttachedPicture: Bool
    /// The stream's "default" flag (players pick it among streams of its kind).
    public let isDefault: Bool
    /// All its flags (FFmpeg's `AV_DISPOSITION_*` bits: commentary, forced, …).
    public let disposition: Int32
    /// The display matrix's rotation in degrees as FFmpeg's av_display_rotation_get reports it,
    /// normalized to 0, 90, 180 or 270; players turn the stored picture by it.
    public let rotation: Int
    public let colorRange: String
    public let colorPrimaries: String
    public let colorTransfer: String
    public let colorSpace: String
    /// Field order of interlaced video: "tt" or "bb" (top or bottom field first, coded so),
    /// "tb" or "bt" (coded one way, shown the other), "progressive", or "unknown".
    public fileprivate(set) var fieldOrder: String
    /// Every tag of the stream as FFmpeg reads it.
    public let tags: [String: String]
    /// A 360° video's projection as FFmpeg names it ("equirectangular"), nil for a flat one.
    public let projection: String?

    /// Interlaced video: pictures made of two fields taken at different times.
    public var isInterlaced: Bool { ["tt", "bb", "tb", "bt"].contains(fieldOrder) }
}

/// A whole file's streams and duration.
public struct MediaInfo: Sendable {
    public let path: String
    public let formatName: String
    public let duration: Double
    public let streams: [StreamInfo]
    public let videoStreamIndex: Int?
    /// Chapter titles with start and end in seconds.
    public let chapters: [(title: String, start: Double, end: Double)]
    /// The file's own tags (title, creation time, a phone's make and location…).
    public let tags: [String: String]

    public var video: StreamInfo? { videoStreamIndex.map { streams[$0] } }

    /// The picture size a player shows: stored size with the sample aspect ratio applied,
    /// turned by the display rotation.
    public var displaySize: (width: Double, height: Double)? {
        guard let v = video else { return nil }
        let sar = v.sampleAspect.num > 0 && v.sampleAspect.den > 0
            ? Double(v.sampleAspect.num) / Double(v.sampleAspect.den) : 1
        let size = (Double(v.width) * sar, Double(v.height))
        return v.rotation % 180 == 90 ? (size.1, size.0) : size
    }
}

/// One demuxed packet, summarized; the checksum is FNV-1a over its payload.
public struct PacketRecord: Sendable, Equatable {
    public let pts: Int64?
    public let dts: Int64?
    public let duration: Int64
    public let size: Int
    public let checksum: UInt64
    public let isKeyframe: Bool
    /// Where the packet lies in the file, in bytes (nil when the demuxer does not say).
    public let position: Int64?
}

public enum MediaProbe {
    /// `keepForJob`: the opened file is kept for the transcoder of the job being planned (see
    /// `InputFile.keepProbed`).
    public static func info(_ path: String, keepForJob: Bool = false) throws -> MediaInfo {
        MediaLibrary.configure()
        // The job's first picture decodes on the other core while this probe runs.
        if keepForJob { HeadStart.begin(path: path) }
        let input: InputFile
        do { input = try InputFile(path: path) } catch {
            HeadStart.drop()
            throw error
        }
        if keepForJob { InputFile.keepProbed(input) }
        var streams: [StreamInfo] = []
        for i in 0..<input.streamCount {
            let s = input.stream(i)
            let par = s.pointee.codecpar.pointee
            let kind: StreamKind
            switch par.codec_type {
            case AVMEDIA_TYPE_VIDEO: kind = .video
            case AVMEDIA_TYPE_AUDIO: kind = .audio
            case AVMEDIA_TYPE_SUBTITLE: kind = .subtitle
            case AVMEDIA_TYPE_DATA: kind = .data
            case AVMEDIA_TYPE_ATTACHMENT: kind = .attachment
            default: kind = .unknown
            }
            let sar = av_guess_sample_aspect_ratio(input.context, s, nil)
            let rate = av_guess_frame_rate(input.context, s, nil)
            streams.append(StreamInfo(
                index: i, kind: kind,
                codec: String(cString: avcodec_get_name(par.codec_id)),
                codecTag: fourCC(par.codec_tag),
                width: Int(par.width), height: Int(par.height),
                pixelFormat: kind == .video ? pixelFormatName(AVPixelFormat(rawValue: par.format)) : nil,
                sampleAspect: (Int(sar.num), Int(sar.den)),
                timeBase: (Int(s.pointee.time_base.num), Int(s.pointee.time_base.den)),
                frameRate: rate.double,
                frameCount: Int(s.pointee.nb_frames),
                sampleRate: Int(par.sample_rate),
                channels: Int(par.ch_layout.nb_channels),
                channelLayout: par.codec_type == AVMEDIA_TYPE_AUDIO ? layoutName(par.ch_layout) : "",
                language: metadata(s, "language"),
                timecode: metadata(s, "timecode"),
                alphaTagged: VideoDecoder.alphaTagged(s),
                isAttachedPicture: s.pointee.disposition & AV_DISPOSITION_ATTACHED_PIC != 0,
                isDefault: s.pointee.disposition & AV_DISPOSITION_DEFAULT != 0,
                disposition: s.pointee.disposition,
                rotation: displayRotation(of: s),
                colorRange: cName(av_color_range_name(par.color_range)),
                colorPrimaries: cName(av_color_primaries_name(par.color_primaries)),
                colorTransfer: cName(av_color_transfer_name(par.color_trc)),
                colorSpace: cName(av_color_space_name(par.color_space)),
                fieldOrder: fieldOrderName(par.field_order),
                tags: tags(of: s.pointee.metadata),
                projection: sphericalProjection(of: s)))
        }
        // A stream whose field order the container and parser leave unknown (DV, MPEG-4 in AVI)
        // has it in its pictures' flags: every DV picture is interlaced, bottom field first.
        if let main = try? input.videoStreamIndex(), streams[main].fieldOrder == "unknown",
           let order = try? InputFile.firstPicture(of: path, { frame, _ in frame.map(fieldOrderName(of:)) }) {
            streams[main].fieldOrder = order
        }
        let duration = input.seconds
        var chapters: [(String, Double, Double)] = []
        for i in 0..<Int(input.context.pointee.nb_chapters) {
            guard let c = input.context.pointee.chapters[i] else { continue }
            let title = av_dict_get(c.pointee.metadata, "title", nil, 0).map { String(cString: $0.pointee.value) } ?? ""
            let tb = c.pointee.time_base.double
            chapters.append((title, Double(c.pointee.start) * tb, Double(c.pointee.end) * tb))
        }
        let fileTags = tags(of: input.context.pointee.metadata)
        return MediaInfo(path: path, formatName: input.formatName, duration: duration, streams: streams,
                         videoStreamIndex: try? input.videoStreamIndex(), chapters: chapters, tags: fileTags)
    }

    /// Decodes the last `seconds` of the main video stream (seeking to the keyframe before
    /// them) and returns how many pictures came out; throws on any damaged picture. Checks a
    /// finished output without decoding all of it.
    public static func decodeTail(_ path: String, seconds: Double = 2) throws -> Int {
        MediaLibrary.configure()
        let input = try InputFile(path: path)
        let index = try input.videoStreamIndex()
        let stream = input.stream(index)
        let decoder = try VideoDecoder(stream: stream, path: path, threads: 1)
        let duration = input.context.pointee.duration
        let timeBase = stream.pointee.time_base.double
        if duration > 0 && timeBase > 0 {
            let start = stream.pointee.start_time == noPTS ? 0 : stream.pointee.start_time
            let target = max(0, Double(duration) / Double(AV_TIME_BASE) - seconds)
            // On failure the file is simply read from the start.
            _ = input.seek(stream: index, to: start + Int64(target / timeBase), flags: AVSEEK_FLAG_BACKWARD)
        }
        var count = 0
        try decodeRest(input, stream: index, decoder: decoder) { _ in count += 1 }
        return count
    }

    /// Decodes stream `index` of `input` from where it is read to its end, flushing the decoder;
    /// `picture` gets each picture's time.
    private static func decodeRest(_ input: InputFile, stream index: Int, decoder: VideoDecoder, picture: (Int64) -> Void) throws {
        var packet: UnsafeMutablePointer<AVPacket>? = av_packet_alloc()
        defer { av_packet_free(&packet) }
        let make = { Frame(width: decoder.width, height: decoder.height, layout: .yuv420) }
        while try input.read(into: packet!) {
            defer { av_packet_unref(packet) }
            if Int(packet!.pointee.stream_index) == index {
                try decoder.decode(packet, makeFrame: make) { picture($1) }
            }
        }
        try decoder.decode(nil, makeFrame: make) { picture($1) }
    }

    /// The closed captions carried inside the main video's pictures (A/53 cc_data), by picture
    /// time in milliseconds: decodes the whole stream. Checks that an output kept them.
    public static func pictureCaptions(_ path: String) throws -> [Int: [UInt8]] {
        try perPicture(path, keep: { $0.keepsCaptions = true }, take: { $0.captions(at: $1) }, merge: +)
    }

    /// What `take` gives for each picture of the file, decoded to the end by a decoder `keep`
    /// has set up, by the picture's time in milliseconds (`merge` joins two of one millisecond).
    private static func perPicture<Value>(_ path: String, keep: (VideoDecoder) -> Void, take: (VideoDecoder, Int64) -> Value?,
                                          merge: (Value, Value) -> Value) throws -> [Int: Value] {
        MediaLibrary.configure()
        let input = try InputFile(path: path)
        let index = try input.videoStreamIndex()
        let stream = input.stream(index)
        let decoder = try VideoDecoder(stream: stream, path: path, threads: 1)
        keep(decoder)
        var times: [Int64] = []
        try decodeRest(input, stream: index, decoder: decoder) { times.append($0) }
        let base = stream.pointee.time_base.double
        return Dictionary(times.compactMap { t in take(decoder, t).map { (Int((Double(t) * base * 1000).rounded()), $0) } },
                          uniquingKeysWith: merge)
    }

    /// Each picture's HDR10+ metadata (SMPTE ST 2094-40) as FFmpeg's decoder parses it, written
    /// again as a message for a picture of its own size (`HDR10Plus.payload`; empty where it
    /// cannot be), by its time in milliseconds.
    public static func pictureHDR10Plus(_ path: String) throws -> [Int: [UInt8]] {
        try perPicture(path, keep: { $0.hdr10PlusOutput = ((1, 1), ($0.width, $0.height)) }, take: { $0.hdr10Plus(at: $1) },
                       merge: { first, _ in first })
    }

    /// The file's attachments (Matroska: fonts, cover art): name, MIME type and bytes.
    public static func attachments(_ path: String) throws -> [(name: String, mimeType: String, bytes: Data)] {
        MediaLibrary.configure()
        let input = try InputFile(path: path)
        return (0..<input.streamCount).compactMap { i in
            let s = input.stream(i)
            let par = s.pointee.codecpar.pointee
            guard par.codec_type == AVMEDIA_TYPE_ATTACHMENT, let bytes = par.extradata else { return nil }
            return (metadata(s, "filename") ?? "", metadata(s, "mimetype") ?? "", Data(bytes: bytes, count: Int(par.extradata_size)))
        }
    }

    /// The file's cover art (pictures FFmpeg reads as attached: an .mp4's "covr", an .mkv's
    /// image attachment), the bytes of each.
    public static func coverArt(_ path: String) throws -> [Data] {
        MediaLibrary.configure()
        let input = try InputFile(path: path)
        return (0..<input.streamCount).compactMap { i in
            let s = input.stream(i)
            let picture = s.pointee.attached_pic
            guard s.pointee.disposition & AV_DISPOSITION_ATTACHED_PIC != 0, let data = picture.data else { return nil }
            return Data(bytes: data, count: Int(picture.size))
        }
    }

    /// How long the main video runs as the transcoder reads it, for an MPEG-TS/PS whose clock
    /// jumps (the jumps evened out, `ClockMend`): from its first picture's time to the end of
    /// its last. Nil when the clock does not jump: the file's own duration then holds. Reads
    /// every packet (no decoding).
    public static func mendedVideoSeconds(_ path: String) throws -> Double? {
        MediaLibrary.configure()
        let input = try InputFile(path: path)
        let index = try input.videoStreamIndex()
        var packet: UnsafeMutablePointer<AVPacket>? = av_packet_alloc()
        defer { av_packet_free(&packet) }
        var first: Int64?, end: Int64?
        while try input.read(into: packet!) {
            let p = packet!.pointee
            if Int(p.stream_index) == index, p.pts != noPTS {
                first = min(first ?? p.pts, p.pts)
                end = max(end ?? p.pts, p.pts + max(p.duration, 0))
            }
            av_packet_unref(packet)
        }
        guard input.clockJumps > 0, let first, let end else { return nil }
        return Double(end - first) * input.stream(index).pointee.time_base.double
    }

    /// Every packet of stream `index`, in file order.
    public static func packets(_ path: String, stream index: Int) throws -> [PacketRecord] {
        MediaLibrary.configure()
        let input = try InputFile(path: path)
        var packet: UnsafeMutablePointer<AVPacket>? = av_packet_alloc()
        defer { av_packet_free(&packet) }
        var records: [PacketRecord] = []
        while try input.read(into: packet!) {
            let p = packet!.pointee
            if Int(p.stream_index) == index {
                var hash: UInt64 = 0xcbf2_9ce4_8422_2325
                if let data = p.data {
                    for i in 0..<Int(p.size) { hash = (hash ^ UInt64(data[i])) &* 0x100_0000_01b3 }
                }
                records.append(PacketRecord(
                    pts: p.pts == noPTS ? nil : p.pts, dts: p.dts == noPTS ? nil : p.dts,
                    duration: p.duration, size: Int(p.size), checksum: hash,
                    isKeyframe: p.flags & AV_PKT_FLAG_KEY != 0, position: p.pos >= 0 ? p.pos : nil))
            }
            av_packet_unref(packet)
        }
        return records
    }
}

/// The stream's display-matrix rotation, normalized to 0, 90, 180 or 270 degrees counter-clockwise.
func displayRotation(of stream: UnsafeMutablePointer<AVStream>) -> Int {
    var size: Int = 0
    guard let data = av_stream_get_side_data(stream, AV_PKT_DATA_DISPLAYMATRIX, &size), size >= 36 else { return 0 }
    let degrees = data.withMemoryRebound(to: Int32.self, capacity: 9) { av_display_rotation_get($0) }
    guard degrees.isFinite else { return 0 }
    let quarter = Int((degrees / 90).rounded()) * 90
    return ((quarter % 360) + 360) % 360
}

/// `path` as FFmpeg's URL of that local file ("file:" and the absolute path). FFmpeg reads a
/// name with a colon as a protocol: "pipe:0.mp4" read standard input, "file:x.mp4" read
/// x.mp4, and "10:30.mp4" failed with "Protocol not found".
func localURL(_ path: String) -> String {
    let absolute = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
    return "file:" + absolute
}

/// The value of a stream's metadata entry `key` (a tag such as "language"), if it has one.
func metadata(_ stream: UnsafeMutablePointer<AVStream>, _ key: String) -> String? {
    av_dict_get(stream.pointee.metadata, key, nil, 0).map { String(cString: $0.pointee.value) }
}

func cName(_ text: UnsafePointer<CChar>?) -> String {
    text.map { String(cString: $0) } ?? "unknown"
}

func fourCC(_ tag: UInt32) -> String {
    guard tag != 0 else { return "" }
    let bytes = [tag & 0xff, (tag >> 8) & 0xff, (tag >> 16) & 0xff, (tag >> 24) & 0xff]
    return String(bytes.map { Character(Unicode.Scalar(UInt8($0))) })
}

/// Process-wide FFmpeg set-up: FFmpeg's own console output is off unless asked for,
/// because every failure reaches the user as one line of ours.
public enum MediaLibrary {
    nonisolated(unsafe) private static var verbose = false
    private static let once: Void = {
        av_log_set_level(AV_LOG_QUIET)
        upscale_log_install()
    }()

    /// Errors the demuxers have logged in this process so far (damaged data they skipped).
    public static var demuxErrors: Int { demuxErrorCount.withLock { $0 } }

    /// The note for `count` places of `input` the demuxer skipped as unreadable.
    public static func skippedDataNote(_ input: String, places count: Int) -> String {
        "'\(input)' is damaged: FFmpeg skipped unreadable data while reading it (\(count) place(s)), so the output misses what was there — re-export or copy the file again"
    }
    fileprivate static let demuxErrorCount = Mutex(0)

    /// Runs `body` with FFmpeg's log silenced, for attempts whose failure is expected and
    /// said otherwise (the hardware encoders tried in turn: "Cannot load libcuda.so.1" on
    /// every --verbose run of a machine without a GPU read as an error). The level is the
    /// process's: overlapping calls (chunks encoded at once) restore it when the last ends.
    static func quietly<T>(_ body: () throws -> T) rethrows -> T {
        quiet.withLock { state in
            if state.depth == 0 { state.saved = av_log_get_level() }
            state.depth += 1
            av_log_set_level(AV_LOG_QUIET)
        }
        defer {
            quiet.withLock { state in
                state.depth -= 1
                if state.depth == 0 { av_log_set_level(state.saved) }
            }
        }
        return try body()
    }
    private static let quiet = Mutex((depth: 0, saved: Int32(0)))

    public static func configure(verbose: Bool = false) {
        _ = once
        if verbose || self.verbose {
            self.verbose = true
            av_log_set_level(AV_LOG_WARNING)
        }
    }
}

/// The log callback's count of demuxer errors (see `upscale_log`).
@_cdecl("upscale_count_demux_error")
func countDemuxError() {
    MediaLibrary.demuxErrorCount.withLock { $0 += 1 }
}

extension StreamInfo {
    /// Whether the pixel format has an alpha channel (paletted formats aside: whether a
    /// palette holds transparency is only known from its pictures).
    public var hasAlpha: Bool {
        guard let name = pixelFormat else { return alphaTagged }
        return alphaTagged || VideoDecoder.hasAlpha(av_get_pix_fmt(name))
    }

    /// Bits per sample of the first component of the pixel format (8 when unknown).
    public var bitDepth: Int {
        guard let name = pixelFormat else { return 8 }
        let format = av_get_pix_fmt(name)
        guard format != AV_PIX_FMT_NONE, let descriptor = av_pix_fmt_desc_get(format) else { return 8 }
        return Int(descriptor.pointee.comp.0.depth)
    }
}

/// A decoded picture's field order as `fieldOrderName` names a stream's ("progressive" where
/// the picture is not flagged interlaced).
private func fieldOrderName(of frame: UnsafeMutablePointer<AVFrame>) -> String {
    frame.pointee.interlaced_frame == 0 ? "progressive" : frame.pointee.top_field_first != 0 ? "tt" : "bb"
}

private func fieldOrderName(_ order: AVFieldOrder) -> String {
    switch order {
    case AV_FIELD_PROGRESSIVE: return "progressive"
    case AV_FIELD_TT: return "tt"
    case AV_FIELD_BB: return "bb"
    case AV_FIELD_TB: return "tb"
    case AV_FIELD_BT: return "bt"
    default: return "unknown"
    }
}

/// FFmpeg's name of `layout` ("quad"; "4 channels" when it has none).
func layoutName(_ layout: AVChannelLayout) -> String {
    var copy = layout
    var buffer = [CChar](repeating: 0, count: 128)
    return av_channel_layout_describe(&copy, &buffer, buffer.count) >= 0 ? String(cString: buffer) : ""
}

/// The name of a stream's 360° projection, if it has one.
private func sphericalProjection(of stream: UnsafeMutablePointer<AVStream>) -> String? {
    var size = 0
    guard let data = av_stream_get_side_data(stream, AV_PKT_DATA_SPHERICAL, &size), size >= MemoryLayout<AVSphericalMapping>.size else { return nil }
    let mapping = UnsafeRawPointer(data).assumingMemoryBound(to: AVSphericalMapping.self)
    return String(cString: av_spherical_projection_name(mapping.pointee.projection))
}
