import CFFmpeg
import Synchronization
import UpscaleCore

/// The color description a video stream carries, passed through to the encoder.
struct ColorDescription {
    var range: AVColorRange
    var primaries: AVColorPrimaries
    var transfer: AVColorTransferCharacteristic
    var space: AVColorSpace
    var chromaLocation: AVChromaLocation
}

/// Decodes one video stream and converts every picture to planar 8-bit 4:2:0
/// core frames with libswscale. Full-range input stays full range.
final class VideoDecoder {
    private(set) var context: UnsafeMutablePointer<AVCodecContext>
    let stream: UnsafeMutablePointer<AVStream>
    let path: String
    let width: Int
    let height: Int
    private let frame: UnsafeMutablePointer<AVFrame>
    private let converter = PixelConverter()
    private(set) var framesDecoded = 0
    let fullRange: Bool
    let matrix: Int32
    /// (Its transfer may come from the first picture instead: see `Transcoder.pictureTransfer`.)
    var color: ColorDescription
    /// More than 8 bits per sample in the source: the pipeline can keep 10 bits.
    let highBitDepth: Bool
    /// Chroma layout of 10-bit pictures: the source's for 4:2:2 and 4:4:4 YUV, else 4:2:0;
    /// 4:4:4 with alpha for a source with an alpha channel when the job keeps it.
    let deepLayout: ChromaLayout
    /// An 8-bit source with more colour resolution than 4:2:0 (4:4:4 or 4:2:2 YUV, RGB), which
    /// the 8-bit pipeline halves.
    let reducesChroma: Bool
    /// The source's chroma siting as tagged and its subsampling (1 or 2 across, down); nil
    /// for RGB and paletted pictures.
    private let sourceChroma: (location: AVChromaLocation, across: Int, down: Int)?
    /// Deinterlace pictures flagged interlaced (bwdif) before conversion.
    private let deinterlace: Bool
    private var deinterlacer: Deinterlacer?
    /// A head start this decoder continues from once the file's first video packets prove to
    /// be the ones it decoded (see `adopt`), and those packets so far (references).
    private var headStart: HeadStart?
    private var checked: [UnsafeMutablePointer<AVPacket>?] = []

    /// `midStream`: decoding starts at a keyframe after a seek (a chunk's pre-roll). H.264
    /// open-GOP streams then reference pictures from before the seek in their memory management
    /// commands, and under AV_EF_EXPLODE every later picture fails (measured: the ffmpeg CLI
    /// with `-err_detect explode -threads 1 -ss` fails all of them). Such a decoder conceals
    /// instead; pictures flagged corrupt still fail the job. A file that itself starts there (a
    /// stream-copied cut of such a stream, `-ss … -c copy`) is found at its first packet and
    /// decoded the same way (see `startsAtRecoveryPoint`).
    /// `keepAlpha`: a source with an alpha channel is decoded into 10-bit 4:4:4 pictures with
    /// alpha (`deepLayout` .yuva444), whatever its own depth and layout.
    init(stream: UnsafeMutablePointer<AVStream>, path: String, threads: Int, deinterlace: Bool = false,
         midStream: Bool = false, keepAlpha: Bool = false) throws {
        self.deinterlace = deinterlace
        self.stream = stream
        self.path = path
        let par = stream.pointee.codecpar!
        // VP8/VP9 alpha (WebM's alpha_mode) is a second stream inside the packets that only
        // libvpx decodes; FFmpeg's own decoders give the colour alone.
        let tagged = VideoDecoder.alphaTagged(stream)
        let libvpx = keepAlpha && tagged
            ? avcodec_find_decoder_by_name(par.pointee.codec_id == AV_CODEC_ID_VP9 ? "libvpx-vp9" : "libvpx") : nil
        guard let codec = libvpx ?? avcodec_find_decoder(par.pointee.codec_id) else {
            throw UpscaleError(.input, "'\(path)': no decoder for \(String(cString: avcodec_get_name(par.pointee.codec_id))) video in this FFmpeg build")
        }
        let ctx = try VideoDecoder.openContext(codec, stream: stream, path: path, threads: Int32(max(0, threads)), explode: !midStream)
        context = ctx
        frame = av_frame_alloc()
        width = Int(ctx.pointee.width)
        height = Int(ctx.pointee.height)
        guard width > 0, height > 0 else {
            throw UpscaleError(.input, "'\(path)': the video stream has no picture size; the file may be damaged")
        }
        let format = ctx.pointee.pix_fmt
        let alpha = keepAlpha && (VideoDecoder.hasAlpha(format) || libvpx != nil)
        highBitDepth = alpha || (format != AV_PIX_FMT_NONE && av_pix_fmt_desc_get(format).pointee.comp.0.depth > 8)
        deepLayout = alpha ? .yuva444 : VideoDecoder.layout(of: format)
        let jpegFormats: [AVPixelFormat] = [AV_PIX_FMT_YUVJ420P, AV_PIX_FMT_YUVJ422P, AV_PIX_FMT_YUVJ444P, AV_PIX_FMT_YUVJ440P, AV_PIX_FMT_YUVJ411P]
        // RGB and paletted pictures become limited-range YUV, as video is (PNG says "full range"
        // of its RGB, which is not a reason to write full-range YUV).
        let flags = format != AV_PIX_FMT_NONE ? av_pix_fmt_desc_get(format).pointee.flags : 0
        let paletted = flags & UInt64(AV_PIX_FMT_FLAG_PAL) != 0
        let isRGB = paletted || flags & UInt64(AV_PIX_FMT_FLAG_RGB) != 0
        fullRange = !isRGB && (ctx.pointee.color_range == AVCOL_RANGE_JPEG || jpegFormats.contains(format))
        reducesChroma = !highBitDepth && format != AV_PIX_FMT_NONE && !paletted && (isRGB || VideoDecoder.layout(of: format) != .yuv420)
        sourceChroma = format == AV_PIX_FMT_NONE || isRGB ? nil
            : (ctx.pointee.chroma_sample_location, 1 << Int(av_pix_fmt_desc_get(format).pointee.log2_chroma_w),
               1 << Int(av_pix_fmt_desc_get(format).pointee.log2_chroma_h))
        let guess = VideoDecoder.guessedColor(width: width, height: height)
        var space = ctx.pointee.colorspace
        var primaries = ctx.pointee.color_primaries
        var transfer = ctx.pointee.color_trc
        if isRGB {
            // RGB keeps its primaries and curve; untagged, they are sRGB's (BT.709 primaries,
            // the sRGB curve). Every tag was replaced by those: a PQ BT.2020 master came out
            // tagged SDR, P3 as BT.709. It becomes YUV by the matrix HDR and UHD use with
            // BT.2020 primaries, otherwise by the one its size suggests.
            if primaries == AVCOL_PRI_UNSPECIFIED { primaries = AVCOL_PRI_BT709 }
            if transfer == AVCOL_TRC_UNSPECIFIED { transfer = AVCOL_TRC_IEC61966_2_1 }
            space = primaries == AVCOL_PRI_BT2020 ? AVCOL_SPC_BT2020_NCL : guess.space
        } else {
            // (BT.2020 primaries with no matrix: BT.2020's, as players take it and as HDR is
            // made; it was tagged BT.601 by its size.)
            if space == AVCOL_SPC_UNSPECIFIED || space == AVCOL_SPC_RGB {
                space = primaries == AVCOL_PRI_BT2020 ? AVCOL_SPC_BT2020_NCL : guess.space
            }
            // Untagged video is shown as players guess from its size, and an upscale moves it to
            // another guess: SD (BT.601) became HD (BT.709), other colours for the same samples.
            // The output is tagged with what the input was shown as.
            if primaries == AVCOL_PRI_UNSPECIFIED { primaries = guess.primaries }
            if transfer == AVCOL_TRC_UNSPECIFIED { transfer = guess.transfer }
        }
        matrix = swsMatrix(for: space, height: Int32(height))
        color = ColorDescription(
            range: fullRange ? AVCOL_RANGE_JPEG : AVCOL_RANGE_MPEG,
            primaries: primaries, transfer: transfer, space: space,
            chromaLocation: AVCHROMA_LOC_LEFT)
    }

    /// Where the source's chroma sample 0 sits (luma samples across, down) in pictures of
    /// `layout`, when the source says it is not MPEG-2's left siting, which the scaler takes by
    /// default: JPEG-style centred chroma (4:2:0 MJPEG), HDR masters' top-left. Only along an
    /// axis the source is subsampled as `layout` is: libswscale re-makes the chroma along
    /// another (4:2:2 reduced to 4:2:0, down), where the layout's own siting holds. Nil when
    /// nothing differs from the layout's.
    func chromaSiting(in layout: ChromaLayout) -> (x: Double, y: Double)? {
        guard let sourceChroma, let tagged = VideoDecoder.siting(of: sourceChroma.location) else { return nil }
        let sub = layout.subsampling(plane: 1), own = layout.siting(plane: 1)
        let siting = (x: sub.x == sourceChroma.across ? tagged.x : own.x, y: sub.y == sourceChroma.down ? tagged.y : own.y)
        return siting == own ? nil : siting
    }

    /// Where chroma sample 0 sits for `location` (luma samples across, down), or nil for MPEG-2's
    /// left siting and for untagged video (which players take as left-sited).
    static func siting(of location: AVChromaLocation) -> (x: Double, y: Double)? {
        switch location {
        case AVCHROMA_LOC_CENTER: return (0.5, 0.5)
        case AVCHROMA_LOC_TOPLEFT: return (0, 0)
        case AVCHROMA_LOC_TOP: return (0.5, 0)
        case AVCHROMA_LOC_BOTTOMLEFT: return (0, 1)
        case AVCHROMA_LOC_BOTTOM: return (0.5, 1)
        default: return nil
        }
    }

    /// What players take untagged video of this size to be (mpv's and VLC's rule): BT.709 from
    /// 1280 wide or over 576 lines; below that BT.601, with PAL's primaries at 576 lines and
    /// NTSC's at 480 and 486, BT.709's for other small sizes.
    static func guessedColor(width: Int, height: Int)
        -> (space: AVColorSpace, primaries: AVColorPrimaries, transfer: AVColorTransferCharacteristic)
    {
        if width >= 1280 || height > 576 { return (AVCOL_SPC_BT709, AVCOL_PRI_BT709, AVCOL_TRC_BT709) }
        switch height {
        case 576: return (AVCOL_SPC_BT470BG, AVCOL_PRI_BT470BG, AVCOL_TRC_SMPTE170M)
        case 480, 486: return (AVCOL_SPC_SMPTE170M, AVCOL_PRI_SMPTE170M, AVCOL_TRC_SMPTE170M)
        default: return (AVCOL_SPC_SMPTE170M, AVCOL_PRI_BT709, AVCOL_TRC_SMPTE170M)
        }
    }

    deinit {
        var c: UnsafeMutablePointer<AVCodecContext>? = context
        avcodec_free_context(&c)
        var f: UnsafeMutablePointer<AVFrame>? = frame
        av_frame_free(&f)
        for var p in checked { av_packet_free(&p) }
    }

    /// Continues from `head` (the first picture decoded while the plan probed the file) where
    /// its decoder is the one this decoder opened: the same stream, parameter sets, picture
    /// size and time base, one thread, damaged data an error, progressive pictures. H.264
    /// holds pictures back for reordering by `has_b_frames`, which this decoder, opened from
    /// the probed parameters, starts at the probe's figure, and the head start's, opened from
    /// the container headers, at the container's (MP4: from the composition offsets) until
    /// its first picture raises it to the parameter set's; so it must have reached this
    /// decoder's figure and given its first picture only after that many pictures plus one,
    /// as this decoder would: then both give the same pictures in the same order. HEVC's
    /// output order does not depend on it. False (and nothing changes) otherwise.
    @discardableResult
    func adopt(_ head: HeadStart) -> Bool {
        let par = stream.pointee.codecpar.pointee
        guard let theirs = head.parameters?.pointee, let theirContext = head.context,
              head.streamIndex == Int(stream.pointee.index), HeadStart.codecs.contains(par.codec_id),
              theirs.codec_id == par.codec_id, theirs.width == par.width, theirs.height == par.height,
              theirs.extradata_size == par.extradata_size, par.extradata_size > 0,
              memcmp(theirs.extradata, par.extradata, Int(par.extradata_size)) == 0,
              av_cmp_q(head.timeBase, stream.pointee.time_base) == 0,
              context.pointee.thread_count == 1, theirContext.pointee.err_recognition == context.pointee.err_recognition,
              par.field_order == AV_FIELD_PROGRESSIVE
        else { return false }
        if par.codec_id == AV_CODEC_ID_H264 {
            guard head.reorderDepth == context.pointee.has_b_frames, head.frames.count == 1,
                  head.packets.count == Int(head.reorderDepth) + 1 else { return false }
        }
        headStart = head
        return true
    }

    /// Codecs whose frame-threaded decoders fail damaged pictures cleanly under AV_EF_EXPLODE
    /// (measured, see init); every other codec decodes with slice threads only.
    static let frameThreadSafe: [AVCodecID] = [AV_CODEC_ID_H264, AV_CODEC_ID_HEVC, AV_CODEC_ID_VP9, AV_CODEC_ID_FFV1]

    /// VP8/VP9 in WebM/Matroska flagged as carrying alpha (`alpha_mode` 1).
    static func alphaTagged(_ stream: UnsafeMutablePointer<AVStream>) -> Bool {
        let id = stream.pointee.codecpar.pointee.codec_id
        guard id == AV_CODEC_ID_VP9 || id == AV_CODEC_ID_VP8,
              let mode = metadata(stream, "alpha_mode") else { return false }
        return mode == "1"
    }

    /// Whether `format` has an alpha channel (paletted formats aside, as `StreamInfo.hasAlpha`).
    static func hasAlpha(_ format: AVPixelFormat) -> Bool {
        guard format != AV_PIX_FMT_NONE, let d = av_pix_fmt_desc_get(format) else { return false }
        return d.pointee.flags & UInt64(AV_PIX_FMT_FLAG_ALPHA) != 0 && d.pointee.flags & UInt64(AV_PIX_FMT_FLAG_PAL) == 0
    }

    /// 4:2:2 and 4:4:4 for planar or packed YUV formats of those subsamplings, 4:4:4 for RGB
    /// deeper than 8 bits (10-bit RGB masters were made 4:2:0 without a word; 8-bit RGB is, and
    /// gets a note), else 4:2:0.
    static func layout(of format: AVPixelFormat) -> ChromaLayout {
        guard format != AV_PIX_FMT_NONE, let d = av_pix_fmt_desc_get(format) else { return .yuv420 }
        let flags = d.pointee.flags
        guard d.pointee.nb_components >= 3, flags & UInt64(AV_PIX_FMT_FLAG_PAL) == 0 else { return .yuv420 }
        if flags & UInt64(AV_PIX_FMT_FLAG_RGB) != 0 { return d.pointee.comp.0.depth > 8 ? .yuv444 : .yuv420 }
        switch (d.pointee.log2_chroma_w, d.pointee.log2_chroma_h) {
        case (1, 0): return .yuv422
        case (0, 0): return .yuv444
        default: return .yuv420
        }
    }

    /// The time of `pts` from the video's start, as a player shows it (the output starts at 0).
    private func seconds(_ pts: Int64) -> String {
        guard pts != noPTS else { return "unknown time" }
        let t = Double(pts - startPTS) * stream.pointee.time_base.double
        return String(format: "%.2f s", t)
    }

    /// The 1-based frame number at `pts` (decoders deliver late, so counting output would lag).
    private func frameNumber(at pts: Int64) -> Int {
        let rate = frameRate.double
        guard pts != noPTS, rate > 0 else { return framesDecoded + 1 }
        return Int((Double(pts - startPTS) * stream.pointee.time_base.double * rate).rounded()) + 1
    }

    /// The stream's average frame rate, else its base rate (for frame numbers and missing times).
    private var frameRate: AVRational { stream.pointee.avg_frame_rate.double > 0 ? stream.pointee.avg_frame_rate : stream.pointee.r_frame_rate }

    /// The video's first timestamp (0 when unknown): frame numbers and times count from it.
    private var startPTS: Int64 { stream.pointee.start_time == noPTS ? 0 : stream.pointee.start_time }

    /// The timestamp of the last packet sent.
    private var lastSent = noPTS
    /// The time of the last picture delivered.
    private var lastDelivered: Int64?
    /// How long the last picture delivered is shown (stream time base): its packet's duration,
    /// else one frame at the stream's rate. The output's last picture gets it.
    private(set) var lastDuration: Int64 = 0
    /// The last damaged picture this decoder failed on: the error, and where ("frame 14 (2.72 s)").
    private(set) var damage: (error: UpscaleError, place: String)?

    private func damaged(_ detail: String, pts: Int64) -> UpscaleError {
        let place = "frame \(frameNumber(at: pts)) (\(seconds(pts)))"
        // The input's own fault: not worth another attempt (a farm retried it three times).
        let error = UpscaleError(.input, "'\(path)' has undecodable video at \(place): \(detail); the file is damaged there — re-export or trim the source")
        damage = (error, place)
        return error
    }

    /// Sends one packet (nil flushes at the end) and hands every finished picture to `emit`,
    /// converted into a frame obtained from `makeFrame`, with its presentation timestamp.
    func decode(
        _ packet: UnsafeMutablePointer<AVPacket>?, makeFrame: () -> Frame, emit: (Frame, Int64) throws -> Void
    ) throws {
        try decode(packet, make: { .eight(makeFrame()) }) { picture, pts in
            if case .eight(let frame) = picture { try emit(frame, pts) }
        }
    }

    /// As above, into 8-bit `Frame`s or 10-bit `Frame16`s, whichever `make` hands out.
    func decode(
        _ packet: UnsafeMutablePointer<AVPacket>?, make: () -> Picture, emit: (Picture, Int64) throws -> Void
    ) throws {
        if !firstPacketSeen, let packet {
            firstPacketSeen = true
            if context.pointee.err_recognition & AV_EF_EXPLODE != 0, startsAtRecoveryPoint(packet) {
                forgetHeadStart()
                try reopenConcealing()
            }
        }
        if let head = headStart {
            if let packet, head.matches(packet, at: checked.count) {
                checked.append(av_packet_clone(packet))
                if checked.count == head.packets.count {
                    // The file is where the head start's decoder is: go on with that decoder.
                    var opened: UnsafeMutablePointer<AVCodecContext>? = context
                    avcodec_free_context(&opened)
                    context = head.takeContext()!
                    let frames = head.takeFrames()
                    forgetHeadStart()
                    HeadStart.countAdopted()
                    defer { for var f in frames as [UnsafeMutablePointer<AVFrame>?] { av_frame_free(&f) } }
                    for f in frames { try deliver(f, make: make, emit: emit) }
                }
                return
            }
            // Other packets than the head start decoded (or the end first): decode from the start.
            let earlier = checked
            checked = []
            forgetHeadStart()
            defer { for var p in earlier { av_packet_free(&p) } }
            for p in earlier { try feed(p, make: make, emit: emit) }
        }
        try feed(packet, make: make, emit: emit)
    }

    /// Whether a picture carried closed captions (A/53 user data).
    private(set) var sawCaptions = false
    /// With `keepsCaptions`, each picture's closed captions (A/53 cc_data) by its time, until
    /// the encoder takes them (`captions(at:)`).
    private let captionsByTime = Mutex<[Int64: [UInt8]]>([:])
    /// Whether pictures' closed captions are kept for the encoder (H.264: libx264 writes them).
    var keepsCaptions = false
    /// Whether pictures carried closed captions the output does not keep.
    var dropsCaptions: Bool { sawCaptions && !keepsCaptions }

    /// The closed captions of the picture timed `pts` (once), if it carried any.
    func captions(at pts: Int64) -> [UInt8]? {
        captionsByTime.withLock { $0.removeValue(forKey: pts) }
    }

    /// Whether a picture carried HDR10+ dynamic metadata (SMPTE ST 2094-40).
    private(set) var sawHDR10Plus = false
    /// With `hdr10PlusOutput`, each picture's HDR10+ message for the output (`HDR10Plus.payload`;
    /// empty where it cannot be written) by its time, until the encoder takes it (`hdr10Plus(at:)`).
    private let hdr10PlusByTime = Mutex<[Int64: [UInt8]]>([:])
    /// Where pictures' HDR10+ metadata is kept for the encoder (HEVC output only): the output
    /// picture's size and its scale from the source's, for `HDR10Plus.payload`.
    var hdr10PlusOutput: (scale: (x: Double, y: Double), size: (width: Int, height: Int))?
    /// Whether pictures carried HDR10+ metadata the output does not keep.
    var dropsHDR10Plus: Bool { sawHDR10Plus && hdr10PlusOutput == nil }

    /// The HDR10+ message of the picture timed `pts` (once), if it carried any: empty where the
    /// picture's metadata cannot be written.
    func hdr10Plus(at pts: Int64) -> [UInt8]? {
        hdr10PlusByTime.withLock { $0.removeValue(forKey: pts) }
    }

    /// Whether the first packet was looked at by `startsAtRecoveryPoint`.
    private var firstPacketSeen = false

    /// An H.264 stream whose first packet holds no IDR picture starts where a chunk's pre-roll
    /// does: its first pictures' reference commands name pictures cut away, which under
    /// AV_EF_EXPLODE failed the whole file as damaged ("mmco: unref short failure"; the ffmpeg
    /// command and players show it).
    private func startsAtRecoveryPoint(_ packet: UnsafeMutablePointer<AVPacket>) -> Bool {
        let par = stream.pointee.codecpar!
        guard par.pointee.codec_id == AV_CODEC_ID_H264, let data = packet.pointee.data, packet.pointee.size > 0 else { return false }
        let bytes = UnsafeBufferPointer(start: data, count: Int(packet.pointee.size))
        let extra = par.pointee.extradata.map { UnsafeBufferPointer(start: $0, count: Int(par.pointee.extradata_size)) }
        return !H264Units.holdsIDR(bytes, extradata: extra)
    }

    /// Opens the decoder again as `midStream` does, before any packet was sent to it.
    private func reopenConcealing() throws {
        guard let codec = context.pointee.codec else { throw UpscaleError(.processing, "'\(path)': the decoder has no codec") }
        let ctx = try VideoDecoder.openContext(codec, stream: stream, path: path, threads: context.pointee.thread_count, explode: false)
        var old: UnsafeMutablePointer<AVCodecContext>? = context
        avcodec_free_context(&old)
        context = ctx
    }

    /// An opened decoder context for `stream` (freed again when opening fails). `explode`:
    /// damaged data is an error instead of concealed. FFmpeg 5.1's frame-threaded decoding
    /// meets an internal assertion (frame->buf[0] in decode.c) and aborts the process when a
    /// codec's frame thread fails a damaged picture under AV_EF_EXPLODE; measured with
    /// `upscale-bench damage` on 280 seeded damaged copies of seven real clips: MPEG-4 Part 2
    /// aborted on 21 of 40, while H.264, HEVC, VP9 and FFV1 (the other frame-threaded codecs
    /// there) failed cleanly on every one. So explode stays on for every codec, frame threads
    /// only for codecs measured safe with it, slice threads for the rest (with slice threads
    /// the same 40 MPEG-4 files fail cleanly; MPEG-4, MJPEG and ProRes decode far faster than
    /// any upscale, so they lose nothing).
    private static func openContext(_ codec: UnsafePointer<AVCodec>, stream: UnsafeMutablePointer<AVStream>, path: String,
                                    threads: Int32, explode: Bool) throws -> UnsafeMutablePointer<AVCodecContext> {
        guard let ctx = avcodec_alloc_context3(codec) else { throw UpscaleError(.processing, "out of memory") }
        var opened: UnsafeMutablePointer<AVCodecContext>? = ctx
        do {
            try check(avcodec_parameters_to_context(ctx, stream.pointee.codecpar), "'\(path)': bad video parameters")
            ctx.pointee.pkt_timebase = stream.pointee.time_base
            ctx.pointee.thread_count = threads
            if explode { ctx.pointee.err_recognition |= AV_EF_EXPLODE }
            if !frameThreadSafe.contains(stream.pointee.codecpar.pointee.codec_id) { ctx.pointee.thread_type = FF_THREAD_SLICE }
            try check(avcodec_open2(ctx, codec, nil), "'\(path)': cannot open the \(String(cString: codec.pointee.name)) decoder")
        } catch {
            avcodec_free_context(&opened)
            throw error
        }
        return ctx
    }

    private func forgetHeadStart() {
        headStart = nil
        for var p in checked { av_packet_free(&p) }
        checked = []
    }

    private func feed(
        _ packet: UnsafeMutablePointer<AVPacket>?, make: () -> Picture, emit: (Picture, Int64) throws -> Void
    ) throws {
        let sent = avcodec_send_packet(context, packet)
        // While draining (nil), an error is of the last pictures sent: a frame-threaded
        // decoder's come late, also from the send, which takes a finished picture first.
        if let packet { lastSent = packet.pointee.pts }
        // A picture before the edit list's start (its packet flagged discard) is decoded only
        // as a reference and never shown: an open-GOP cut made with `-ss … -c copy` starts
        // with leading B-pictures whose own references were cut away. Their failure is no
        // damage to what is shown (such a file failed as damaged, with nothing written).
        let hidden = packet.map { $0.pointee.flags & AV_PKT_FLAG_DISCARD != 0 } ?? false
        if sent < 0 && sent != averrorEOF && sent != averrorEAGAIN {
            if hidden && sent == averrorInvalidData { return }
            throw damaged(ffmpegErrorText(sent), pts: packet?.pointee.pts ?? lastSent)
        }
        while true {
            let received = avcodec_receive_frame(context, frame)
            if received == averrorEOF, let deinterlacer {
                // The filter holds a picture back (it looks one ahead): drain it.
                try deinterlacer.filter(nil) { try convert($0, pts: $1, make: make, emit: emit) }
                return
            }
            if received == averrorEAGAIN || received == averrorEOF { return }
            if received < 0 {
                if hidden && received == averrorInvalidData { return }
                throw damaged(ffmpegErrorText(received), pts: packet?.pointee.pts ?? lastSent)
            }
            defer { av_frame_unref(frame) }
            try deliver(frame, make: make, emit: emit)
        }
    }

    /// Checks, deinterlaces where asked, converts and emits one decoded picture.
    private func deliver(
        _ frame: UnsafeMutablePointer<AVFrame>, make: () -> Picture, emit: (Picture, Int64) throws -> Void
    ) throws {
        var pts = frame.pointee.best_effort_timestamp
        let rate = frameRate
        let frameStep = rate.num > 0 ? av_rescale_q(1, AVRational(num: rate.den, den: rate.num), stream.pointee.time_base) : 0
        let step = max(1, frame.pointee.pkt_duration > 0 ? frame.pointee.pkt_duration : frameStep)
        // A picture with no time is the one after the picture before it: AVI with packed
        // B-pictures (DivX, Xvid) gives its last picture none (it went to the encoder untimed,
        // was written with the time of the picture before, and players dropped it). A raw
        // H.264/HEVC stream (.h264, .hevc: no container) gives none to any picture, and has no
        // start time: they start at 0 and follow at its frame rate (they were numbered 0, 1, 2
        // in ticks of 1/1200000 s, and 4 s of video played in 0.1 s). A first picture with no
        // time in a stream that has a start time (an MPEG-TS whose first picture's packet has
        // none: the start is the next one's) comes a frame before that start, as the ffmpeg
        // command has it (left untimed, it crashed the encoder's timing).
        if pts == noPTS, let last = lastDelivered {
            pts = last + step
        } else if pts == noPTS {
            pts = stream.pointee.start_time == noPTS ? 0 : stream.pointee.start_time - step
        }
        lastDelivered = pts
        lastDuration = step
        if frame.pointee.decode_error_flags != 0 || frame.pointee.flags & AV_FRAME_FLAG_CORRUPT != 0 {
            throw damaged("corrupt picture data", pts: pts)
        }
        if let captions = av_frame_get_side_data(frame, AV_FRAME_DATA_A53_CC) {
            sawCaptions = true
            if keepsCaptions, captions.pointee.size > 0 {
                let bytes = Array(UnsafeBufferPointer(start: captions.pointee.data, count: Int(captions.pointee.size)))
                // Two pictures of one time (after damage, repeated timestamps): the one kept
                // carries both's captions (cc_data is a run of 3-byte groups).
                captionsByTime.withLock { $0[pts, default: []] += bytes }
            }
        }
        if let plus = av_frame_get_side_data(frame, AV_FRAME_DATA_DYNAMIC_HDR_PLUS) {
            sawHDR10Plus = true
            if let output = hdr10PlusOutput {
                let message = Int(plus.pointee.size) < MemoryLayout<AVDynamicHDRPlus>.size ? nil
                    : HDR10Plus.payload(UnsafeRawPointer(plus.pointee.data).loadUnaligned(as: AVDynamicHDRPlus.self),
                                        scale: output.scale, output: output.size)
                // Two pictures of one time (after damage, repeated timestamps): the first is kept.
                hdr10PlusByTime.withLock { if $0[pts] == nil { $0[pts] = message ?? [] } }
            }
        }
        if Int(frame.pointee.width) != width || Int(frame.pointee.height) != height {
            throw UpscaleError(.processing, "'\(path)': the picture size changes mid-stream at \(seconds(pts)) (\(width)x\(height) to \(frame.pointee.width)x\(frame.pointee.height)); split the file there first")
        }
        if deinterlace {
            if deinterlacer == nil {
                deinterlacer = try Deinterlacer(width: frame.pointee.width, height: frame.pointee.height,
                                                format: AVPixelFormat(rawValue: frame.pointee.format),
                                                timeBase: stream.pointee.time_base, sampleAspect: frame.pointee.sample_aspect_ratio,
                                                path: path)
            }
            frame.pointee.pts = pts
            try deinterlacer!.filter(frame) { try convert($0, pts: $1, make: make, emit: emit) }
        } else {
            try convert(frame, pts: pts, make: make, emit: emit)
        }
    }

    /// Converts one decoded (or deinterlaced) picture into a pipeline picture and emits it.
    private func convert(
        _ frame: UnsafeMutablePointer<AVFrame>, pts: Int64, make: () -> Picture, emit: (Picture, Int64) throws -> Void
    ) throws {
        let output = make()
        let source = (frame.pointee.width, frame.pointee.height, AVPixelFormat(rawValue: frame.pointee.format))
        switch output {
        case .eight(let picture):
            try converter.configure(source: source, destination: (Int32(width), Int32(height), picture.layout.eightBitFormat),
                                    matrix: matrix, fullRange: fullRange)
            converter.convert(frame, into: picture)
        case .deep(let picture):
            try converter.configure(source: source, destination: (Int32(width), Int32(height), picture.layout.tenBitFormat),
                                    matrix: matrix, fullRange: fullRange)
            converter.convert(source: planePointers(frame), sourceStrides: planeStrides(frame), sourceHeight: frame.pointee.height,
                              destination: picture.planes.map { UnsafeMutableRawPointer($0.base).assumingMemoryBound(to: UInt8.self) },
                              destinationStrides: picture.planes.map { Int32($0.stride * 2) })
        }
        framesDecoded += 1
        try emit(output, pts)
    }
}

/// Reads the pictures of a file's main video stream as 8-bit core frames (4:2:0, or
/// `layout`), in order. For tests, the bench and anything else that only needs pictures.
public final class VideoFrameReader {
    private let input: InputFile
    private let decoder: VideoDecoder
    private let streamIndex: Int
    private var packet: UnsafeMutablePointer<AVPacket>? = av_packet_alloc()
    private var pending: [(Frame, Int64)] = []
    private var finished = false

    public var width: Int { decoder.width }
    public var height: Int { decoder.height }

    private let layout: ChromaLayout

    public init(path: String, threads: Int = 0, layout: ChromaLayout = .yuv420) throws {
        self.layout = layout
        MediaLibrary.configure()
        input = try InputFile(path: path)
        streamIndex = try input.videoStreamIndex()
        // A layout with alpha reads it where only libvpx has it (VP8/VP9 alpha).
        decoder = try VideoDecoder(stream: input.stream(streamIndex), path: path, threads: threads, keepAlpha: layout == .yuva444)
    }

    deinit { av_packet_free(&packet) }

    /// The next picture and its presentation timestamp (in the stream's time base), or nil at the end.
    public func next() throws -> (frame: Frame, pts: Int64)? {
        while pending.isEmpty && !finished {
            let make = { Frame(width: self.decoder.width, height: self.decoder.height, layout: self.layout) }
            if try input.read(into: packet!) {
                defer { av_packet_unref(packet) }
                if Int(packet!.pointee.stream_index) == streamIndex {
                    try decoder.decode(packet, makeFrame: make) { pending.append(($0, $1)) }
                }
            } else {
                try decoder.decode(nil, makeFrame: make) { pending.append(($0, $1)) }
                finished = true
            }
        }
        return pending.isEmpty ? nil : pending.removeFirst()
    }
}
