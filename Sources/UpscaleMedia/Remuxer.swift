import CFFmpeg
import Foundation

/// Copies every stream of a file into a new container without re-encoding, optionally
/// setting the video's display rotation. The tests use it to make phone-style clips
/// (rotated, re-containered) from real footage.
public enum Remuxer {
    /// `sampleAspect` sets the video's pixel aspect ratio in the container (as anamorphic DV or SD does).
    /// `retime` maps each video packet's pts and dts (in the input stream's time base; it must
    /// be increasing) to make variable-frame-rate clips. `adding` appends every stream of other
    /// files (say a second audio track). `timecode` gives the video a start timecode, which
    /// the .mov/.mp4 muxer writes as a timecode track, as cameras do. `attaching` adds files as
    /// Matroska attachments (fonts, cover art), each with its MIME type. `delay` (seconds) moves
    /// every packet later, as MPEG-TS recordings start well after 0. `audioPackets: false` keeps
    /// the audio streams' headers but none of their packets (a file cut before its first audio).
    /// `dropAudio` leaves out the audio packets that start in that stretch (seconds): a gap in the
    /// audio's timestamps, as a recorder that pauses its sound writes.
    /// `cover` adds an image as cover art (a picture stream marked as attached, as .mp4 holds it).
    /// `dispositions` sets output streams' flags by index (which audio track is the default).
    /// `metadata` adds file tags (a phone's `com.apple.quicktime.*` keys, written as it does);
    /// `streamTags` adds tags to output streams by index (mkvmerge's statistics); `color` tags
    /// the video's primaries and transfer, `range` its range; `hdr` puts HDR10 metadata on the
    /// video stream (where Matroska and MP4 keep it, outside the bitstream); `spherical` makes it
    /// an equirectangular 360° video. `frameRate` is the video's rate in the container (Matroska's
    /// default duration). `chromaLocation` tags where the video's chroma samples sit (Matroska
    /// keeps it in the container). `durations` sets every packet's duration of output streams by
    /// index, in their time base (captions with no end, as FFmpeg's dvdsub encoder writes them).
    public static func copy(_ input: String, to output: String, rotation degrees: Int? = nil,
                            sampleAspect: (num: Int, den: Int)? = nil, timecode: String? = nil, delay: Double = 0, audioPackets: Bool = true,
                            dropAudio: ClosedRange<Double>? = nil,
                            attaching attachments: [(path: String, mimeType: String)] = [], adding extras: [String] = [], cover: String? = nil,
                            retime: ((Int64) -> Int64)? = nil, dispositions: [Int: Int32] = [:],
                            metadata: [String: String] = [:], languages: [Int: String] = [:], streamTags: [Int: [String: String]] = [:],
                            color: (primaries: AVColorPrimaries, transfer: AVColorTransferCharacteristic)? = nil,
                            range: AVColorRange? = nil, hdr: HDRMetadata? = nil, spherical: Bool = false,
                            frameRate: AVRational? = nil, chromaLocation: AVChromaLocation? = nil, durations: [Int: Int64] = [:]) throws {
        MediaLibrary.configure()
        let sources = try ([input] + extras + (cover.map { [$0] } ?? [])).map { try InputFile(path: $0) }
        var ctx: UnsafeMutablePointer<AVFormatContext>?
        try check(avformat_alloc_output_context2(&ctx, nil, nil, output), "cannot choose a container for '\(output)'")
        defer { avformat_free_context(ctx) }
        let out = ctx!
        var firstIndex: [Int] = []
        for (n, source) in sources.enumerated() {
            firstIndex.append(Int(out.pointee.nb_streams))
            for i in 0..<source.streamCount {
                let s = source.stream(i)
                guard let o = avformat_new_stream(out, nil) else { throw UpscaleError(.processing, "out of memory") }
                try check(avcodec_parameters_copy(o.pointee.codecpar, s.pointee.codecpar), "cannot copy stream \(i)")
                o.pointee.codecpar.pointee.codec_tag = 0
                o.pointee.time_base = s.pointee.time_base
                // The .mov/.mp4 muxer needs the frame rate to write a timecode track.
                o.pointee.avg_frame_rate = s.pointee.avg_frame_rate
                if let frameRate, s.pointee.codecpar.pointee.codec_type == AVMEDIA_TYPE_VIDEO {
                    o.pointee.avg_frame_rate = frameRate
                    o.pointee.r_frame_rate = frameRate
                }
                av_dict_copy(&o.pointee.metadata, s.pointee.metadata, 0)
                if cover != nil && n == sources.count - 1 { o.pointee.disposition = AV_DISPOSITION_ATTACHED_PIC }
                if let disposition = dispositions[Int(o.pointee.index)] { o.pointee.disposition = disposition }
                if let language = languages[Int(o.pointee.index)] { av_dict_set(&o.pointee.metadata, "language", language, 0) }
                for (key, value) in streamTags[Int(o.pointee.index)] ?? [:] { av_dict_set(&o.pointee.metadata, key, value, 0) }
                let isVideo = s.pointee.codecpar.pointee.codec_type == AVMEDIA_TYPE_VIDEO
                if let sar = sampleAspect, isVideo {
                    let q = AVRational(num: Int32(sar.num), den: Int32(sar.den))
                    o.pointee.codecpar.pointee.sample_aspect_ratio = q
                    o.pointee.sample_aspect_ratio = q
                }
                if let timecode, isVideo { av_dict_set(&o.pointee.metadata, "timecode", timecode, 0) }
                if let range, isVideo { o.pointee.codecpar.pointee.color_range = range }
                if let hdr, isVideo { hdr.addSideData(to: o) }
                if spherical, isVideo {
                    // An equirectangular 360° video, as 360° cameras write it (.mov/.mp4: sv3d).
                    var size = 0
                    if let mapping = av_spherical_alloc(&size) {
                        mapping.pointee.projection = AV_SPHERICAL_EQUIRECTANGULAR
                        if av_stream_add_side_data(o, AV_PKT_DATA_SPHERICAL, UnsafeMutableRawPointer(mapping).assumingMemoryBound(to: UInt8.self), size) < 0 {
                            av_free(mapping)
                        }
                    }
                    out.pointee.strict_std_compliance = FF_COMPLIANCE_UNOFFICIAL
                }
                if let chromaLocation, isVideo { o.pointee.codecpar.pointee.chroma_location = chromaLocation }
                if let color, isVideo {
                    o.pointee.codecpar.pointee.color_primaries = color.primaries
                    o.pointee.codecpar.pointee.color_trc = color.transfer
                }
                if let degrees, isVideo, let data = av_stream_new_side_data(o, AV_PKT_DATA_DISPLAYMATRIX, 36) {
                    data.withMemoryRebound(to: Int32.self, capacity: 9) { av_display_rotation_set($0, Double(degrees)) }
                }
            }
        }
        for attachment in attachments {
            let bytes = try Data(contentsOf: URL(fileURLWithPath: attachment.path))
            try bytes.withUnsafeBytes {
                try addAttachment($0, filename: URL(fileURLWithPath: attachment.path).lastPathComponent, mimetype: attachment.mimeType, to: out)
            }
        }
        // The first file's chapters, moved by `delay` with everything else.
        copyChapters(from: sources[0].context, into: out, movedBy: Int64((delay * Double(AV_TIME_BASE)).rounded()))
        try check(avio_open(&out.pointee.pb, localURL(output), AVIO_FLAG_WRITE), "cannot write '\(output)'", kind: .output)
        defer { avio_closep(&out.pointee.pb) }
        for (key, value) in metadata { av_dict_set(&out.pointee.metadata, key, value, 0) }
        var options = headerOptions(for: out)
        defer { av_dict_free(&options) }
        if color != nil { av_dict_set(&options, "movflags", "+write_colr", AV_DICT_APPEND) } // .mov: a colr box
        try check(avformat_write_header(out, &options), "cannot start '\(output)'")
        var packet: UnsafeMutablePointer<AVPacket>? = av_packet_alloc()
        defer { av_packet_free(&packet) }
        for (n, source) in sources.enumerated() {
            while try source.read(into: packet!) {
                let index = Int(packet!.pointee.stream_index)
                let target = firstIndex[n] + index
                let isAudio = source.stream(index).pointee.codecpar.pointee.codec_type == AVMEDIA_TYPE_AUDIO
                let at = Double(packet!.pointee.pts) * source.stream(index).pointee.time_base.double
                if isAudio && (!audioPackets || (dropAudio?.contains(at) ?? false) && packet!.pointee.pts != noPTS) {
                    av_packet_unref(packet)
                    continue
                }
                if let retime, n == 0, source.stream(index).pointee.codecpar.pointee.codec_type == AVMEDIA_TYPE_VIDEO {
                    if packet!.pointee.pts != noPTS { packet!.pointee.pts = retime(packet!.pointee.pts) }
                    if packet!.pointee.dts != noPTS { packet!.pointee.dts = retime(packet!.pointee.dts) }
                    packet!.pointee.duration = 0
                }
                av_packet_rescale_ts(packet, source.stream(index).pointee.time_base, out.pointee.streams[target]!.pointee.time_base)
                if delay != 0 {
                    let shift = Int64((delay / out.pointee.streams[target]!.pointee.time_base.double).rounded())
                    if packet!.pointee.pts != noPTS { packet!.pointee.pts += shift }
                    if packet!.pointee.dts != noPTS { packet!.pointee.dts += shift }
                }
                packet!.pointee.stream_index = Int32(target)
                packet!.pointee.pos = -1
                if let duration = durations[target] { packet!.pointee.duration = duration }
                try check(av_interleaved_write_frame(out, packet), "writing '\(output)' failed", kind: .output)
            }
        }
        try check(av_write_trailer(out), "finishing '\(output)' failed", kind: .output)
    }
}
