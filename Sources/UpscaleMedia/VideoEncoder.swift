import CFFmpeg
import Foundation
import UpscaleCore

/// Encodes 4:2:0 core frames with the chosen codec, converting to the encoder's
/// pixel format (ProRes wants 4:2:2 10-bit) with libswscale when it differs.
final class VideoEncoder {
    let context: UnsafeMutablePointer<AVCodecContext>
    let settings: EncoderSettings
    /// The FFmpeg encoder in use.
    let name: String
    /// Whether the encoder copies a picture into its own memory within the call that is given
    /// it, and does its work on threads of its own: libx265 and libx264 take the copy first,
    /// then wait for a frame encoder to come free. Such a picture is free again as soon as
    /// `encode` returns, and the picture after it is best made then, not during the wait.
    var copiesOnEntry: Bool { name == "libx265" || name == "libx264" }
    /// Whether `encode(_:keyframe: true)` starts a picture nothing before it is referenced by
    /// or references (an IDR picture: x265 and x264 code the pictures shown before it first),
    /// so that one encoder can make consecutive chunks (`ChunkSpan`).
    var forcesKeyframes: Bool { copiesOnEntry }
    /// The times (encoder time base) of pictures sent with `keyframe` whose packet is not out yet.
    private var forcedKeys: Set<Int64> = []

    /// Whether the packet timed `pts` is the picture sent with `keyframe` at that time (each is
    /// answered once).
    func takeForcedKey(_ pts: Int64) -> Bool {
        forcedKeys.remove(pts) != nil
    }

    /// Whether `packet`'s picture is an IDR picture: an HEVC one (unit type 19 or 20) or an
    /// H.264 one (5); false for any other, or a packet not in Annex B form.
    static func isIDR(_ packet: UnsafeMutablePointer<AVPacket>, codec: VideoCodec) -> Bool {
        guard let data = packet.pointee.data, packet.pointee.size > 0 else { return false }
        let bytes = UnsafeBufferPointer(start: data, count: Int(packet.pointee.size))
        switch codec {
        case .hevc:
            guard let at = CaptionSEI.firstSlice(in: bytes) else { return false }
            let header = at + (bytes[at + 2] == 1 ? 3 : 4)
            return header < bytes.count && [19, 20].contains((bytes[header] >> 1) & 0x3F)
        case .h264:
            return H264Units.holdsIDR(bytes, extradata: nil)
        default:
            return false
        }
    }

    private let frame: UnsafeMutablePointer<AVFrame>
    private var converted: UnsafeMutablePointer<AVFrame>?
    private let converter = PixelConverter(flags: Int32(SWS_POINT | SWS_ACCURATE_RND))
    private let packet: UnsafeMutablePointer<AVPacket>
    /// `encode` takes timestamps in the source's time base; the encoder works in this finer
    /// one where the source's holds no frame exactly.
    let grid: FrameGrid?
    /// The time given to the last picture so far (encoder time base; pictures come in order).
    private(set) var lastPlaced: Int64?
    /// The furthest a packet's decode time may lie before the first picture's time (encoder
    /// time base): 64 frames, well beyond any encoder's reordering (x265 reorders at most 16);
    /// 10 s where the frame rate is unknown.
    private var reorderReach: Int64 = 0
    /// The time given to the first picture.
    private var firstPlaced: Int64?
    /// The last packet's decode time (see `mendDecodeTime`).
    private var lastDecodeTime: Int64?
    /// How long each picture sent is shown (encoder time base), by its time: until the next
    /// picture, the last for `endShown`'s length. Taken by `shownLength(of:)`.
    private var shownFor: [Int64: Int64] = [:]
    /// HEVC: the closed captions and HDR10+ messages of pictures sent and not yet out, by time
    /// (encoder time base), written into their packets (`CaptionSEI`).
    private var seiByTime: [Int64: (captions: [UInt8], hdr10Plus: [UInt8]?)] = [:]
    /// Captions that could not be written (a packet not in Annex B form, a picture with no time).
    private(set) var lostCaptions = false
    /// The same for HDR10+ messages.
    private(set) var lostHDR10Plus = false

    /// A picture's SEI content that did not reach its packet.
    private func noteLost(_ sei: (captions: [UInt8], hdr10Plus: [UInt8]?)) {
        if !sei.captions.isEmpty { lostCaptions = true }
        if sei.hdr10Plus != nil { lostHDR10Plus = true }
    }

    /// The last picture sent is shown for `length` (encoder time base).
    func endShown(after length: Int64) {
        if let lastPlaced { shownFor[lastPlaced] = length }
    }

    /// How long the picture timed `pts` is shown, once the picture after it was sent (or
    /// `endShown`); nil before. Each is given once.
    func shownLength(of pts: Int64) -> Int64? {
        shownFor.removeValue(forKey: pts)
    }
    private let fullRange: Bool
    private let matrix: Int32
    /// Pictures arrive as 10-bit `Frame16`s rather than 8-bit `Frame`s.
    let tenBit: Bool
    /// Chroma layout of 10-bit pictures (8-bit ones are 4:2:0).
    let layout: ChromaLayout
    private var inputFormat: AVPixelFormat { tenBit ? layout.tenBitFormat : AV_PIX_FMT_YUV420P }
    /// VAAPI only: the device's pool of frames that converted pictures are uploaded into.
    private var hardwareFrames: UnsafeMutablePointer<AVBufferRef>?
    /// The format pictures are converted to in system memory: the encoder's, or for VAAPI
    /// its frame pool's.
    private var softwareFormat: AVPixelFormat {
        guard let hardwareFrames else { return context.pointee.pix_fmt }
        return UnsafeRawPointer(hardwareFrames.pointee.data).assumingMemoryBound(to: AVHWFramesContext.self).pointee.sw_format
    }

    init(settings: EncoderSettings, width: Int, height: Int, timeBase: AVRational, frameRate: AVRational, startTime: Int64,
         color: ColorDescription, globalHeader: Bool, tagHVC1: Bool, tenBit: Bool = false, hdr: HDRMetadata? = nil,
         sampleAspect: AVRational = AVRational(num: 1, den: 1), encoderName: String? = nil,
         layout: ChromaLayout = .yuv420) throws {
        self.settings = settings
        self.tenBit = tenBit
        self.layout = tenBit ? layout : .yuv420
        let name = encoderName ?? settings.codec.encoderName
        self.name = name
        guard let codec = avcodec_find_encoder_by_name(name) else {
            throw UpscaleError(.processing, "this FFmpeg build has no \(name) encoder; install one with it (Debian's ffmpeg libraries have it) or pick another --codec")
        }
        // VAAPI's device and frames first: that encoder's context alone is 8 MB, zeroed (FFmpeg
        // 5.1 keeps H.265 parameter sets for 1024 layer sets in it), about 1,950 page faults
        // that `auto` paid on every run where no VAAPI device opens.
        // Hardware HEVC's pictures in system memory: 10-bit as P010 (Main 10), else NVENC's
        // planar 4:2:0 or QSV's and VAAPI's NV12.
        let hardwareFormat = tenBit ? AV_PIX_FMT_P010LE : (name == "hevc_nvenc" ? AV_PIX_FMT_YUV420P : AV_PIX_FMT_NV12)
        var vaapi: UnsafeMutablePointer<AVBufferRef>?
        if settings.codec == .hevc, name == "hevc_vaapi" {
            vaapi = try VideoEncoder.vaapiFrames(width: width, height: height, format: hardwareFormat)
        }
        guard let ctx = avcodec_alloc_context3(codec) else {
            av_buffer_unref(&vaapi)
            throw UpscaleError(.processing, "out of memory")
        }
        context = ctx
        hardwareFrames = vaapi
        frame = av_frame_alloc()
        packet = av_packet_alloc()
        fullRange = color.range == AVCOL_RANGE_JPEG
        // ProRes is limited range by definition: full-range pictures are converted on the way in.
        let outputRange = settings.codec == .prores ? AVCOL_RANGE_MPEG : color.range
        matrix = swsMatrix(for: color.space, height: Int32(height))

        ctx.pointee.width = Int32(width)
        ctx.pointee.height = Int32(height)
        grid = FrameGrid(source: timeBase, frameRate: frameRate, start: startTime)
        ctx.pointee.time_base = grid?.timeBase ?? timeBase
        ctx.pointee.framerate = frameRate
        let knownRate = frameRate.num > 0 && frameRate.den > 0
        reorderReach = knownRate ? av_rescale_q(64, AVRational(num: frameRate.den, den: frameRate.num), ctx.pointee.time_base)
                                 : av_rescale_q(10, AVRational(num: 1, den: 1), ctx.pointee.time_base)
        ctx.pointee.sample_aspect_ratio = sampleAspect
        ctx.pointee.color_range = outputRange
        ctx.pointee.color_primaries = color.primaries
        ctx.pointee.color_trc = color.transfer
        ctx.pointee.colorspace = color.space
        ctx.pointee.chroma_sample_location = color.chromaLocation
        if globalHeader { ctx.pointee.flags |= AV_CODEC_FLAG_GLOBAL_HEADER }
        let priv = ctx.pointee.priv_data
        switch settings.codec {
        case .hevc where name != "libx265":
            // Hardware HEVC from system memory: NVENC and QSV take the converted picture as it
            // is (`hardwareFormat`), VAAPI gets it uploaded into its device's frame pool.
            // Constant-quality rate control at the same number as x265's CRF.
            let quality = settings.crf ?? EncoderSettings.hardwareQuality
            if let vaapi {
                ctx.pointee.hw_frames_ctx = av_buffer_ref(vaapi)
                ctx.pointee.pix_fmt = AV_PIX_FMT_VAAPI
                av_opt_set(priv, "rc_mode", "CQP", 0)
                av_opt_set(priv, "qp", String(quality), 0)
            } else {
                ctx.pointee.pix_fmt = hardwareFormat
            }
            if tenBit { av_opt_set(priv, "profile", "main10", 0) }
            if tagHVC1 { ctx.pointee.codec_tag = upscale_fourcc(0x68, 0x76, 0x63, 0x31) } // "hvc1"
            if name == "hevc_nvenc" {
                av_opt_set(priv, "rc", "vbr", 0)
                av_opt_set(priv, "cq", String(quality), 0)
            }
            if name == "hevc_qsv" { ctx.pointee.global_quality = Int32(quality) }
        case .hevc:
            // 4:2:2 and 4:4:4 10-bit stay so (x265's Main 4:2:2 10 and Main 4:4:4 10 profiles).
            ctx.pointee.pix_fmt = tenBit ? self.layout.tenBitFormat : AV_PIX_FMT_YUV420P
            if tagHVC1 { ctx.pointee.codec_tag = upscale_fourcc(0x68, 0x76, 0x63, 0x31) } // "hvc1"
            var params = "log-level=error"
            if let threads = settings.threads { params += ":pools=\(threads)" }
            params += X265Threading.parameters(poolThreads: settings.threads)
            // A chunk (it has a keyframe interval): without x265's settings note (an SEI in the
            // stream header that lists the threads too), so chunks encoded with other --threads
            // or --jobs, or on other machines of a farm, have the same header and join.
            if let k = settings.keyframeInterval {
                // A chunk after another in one encoder starts with an IDR picture (its picture
                // order count begins anew), so it joins after the chunk before however that one
                // was made. With open GOPs x265 writes each keyframe as a CRA picture that goes on
                // counting: after a chunk made again by a new encoder (a resume), the join had
                // two pictures of one count, and the pictures after them decoded out of order.
                params += ":keyint=\(max(k, 1)):info=0:open-gop=0"
                av_opt_set(priv, "forced-idr", "1", 0)
            }
            if let hdr { params += ":hdr10=1:" + hdr.x265Parameters }
            av_opt_set(priv, "x265-params", params, 0)
        case .h264:
            ctx.pointee.pix_fmt = AV_PIX_FMT_YUV420P
            if let k = settings.keyframeInterval {
                ctx.pointee.gop_size = Int32(max(k, 1))
                av_opt_set(priv, "forced-idr", "1", 0)
            }
            if let threads = settings.threads { ctx.pointee.thread_count = Int32(threads) }
        case .prores where self.layout == .yuva444:
            // Pictures with alpha: ProRes 4444, alpha kept (16 bits in the stream).
            ctx.pointee.pix_fmt = AV_PIX_FMT_YUVA444P10LE
            av_opt_set(priv, "profile", "4444", 0)
            av_opt_set(priv, "vendor", "apl0", 0)
            if let threads = settings.threads { ctx.pointee.thread_count = Int32(threads) }
        case .prores:
            ctx.pointee.pix_fmt = AV_PIX_FMT_YUV422P10LE
            av_opt_set(priv, "profile", "standard", 0)
            av_opt_set(priv, "vendor", "apl0", 0)
            if let threads = settings.threads { ctx.pointee.thread_count = Int32(threads) }
        case .ffv1:
            ctx.pointee.pix_fmt = tenBit ? self.layout.tenBitFormat : AV_PIX_FMT_YUV420P
            av_opt_set(priv, "level", "3", 0)
            if let threads = settings.threads { ctx.pointee.thread_count = Int32(threads) }
        }
        let software = name == settings.codec.encoderName
        for (option, given) in [("crf", settings.crf != nil), ("preset", settings.preset != nil)]
        where software && given && av_opt_find(priv, option, nil, 0, 0) == nil {
            throw UpscaleError(.usage, "--\(option) is for hevc and h264; \(settings.codec.rawValue) has none, drop --\(option)")
        }
        if software, let crf = settings.crf ?? settings.codec.defaultCRF {
            av_opt_set(priv, "crf", String(crf), 0)
        }
        if software, let preset = settings.preset ?? settings.codec.defaultPreset {
            // libx265 takes any string here and fails only when opened.
            guard EncoderSettings.presets.contains(preset), av_opt_set(priv, "preset", preset, 0) >= 0 else {
                throw UpscaleError(.usage, "--preset '\(preset)' is not a \(name) preset; use one of \(EncoderSettings.presets.joined(separator: ", "))")
            }
        }
        let opened = avcodec_open2(ctx, codec, nil)
        if opened < 0 {
            throw UpscaleError(.processing, "cannot open the \(name) encoder at \(width)x\(height): \(ffmpegErrorText(opened))")
        }
        // A change of range needs a conversion too (full-range 10-bit 4:2:2 into ProRes went in
        // as it was, tagged limited: crushed blacks, clipped highlights).
        if softwareFormat != inputFormat || fullRange != (outputRange == AVCOL_RANGE_JPEG) {
            converted = av_frame_alloc()
            converted!.pointee.format = softwareFormat.rawValue
            converted!.pointee.width = Int32(width)
            converted!.pointee.height = Int32(height)
            try check(av_frame_get_buffer(converted, 0), "cannot allocate a \(width)x\(height) frame")
        }
    }

    deinit {
        var c: UnsafeMutablePointer<AVCodecContext>? = context
        avcodec_free_context(&c)
        var f: UnsafeMutablePointer<AVFrame>? = frame
        av_frame_free(&f)
        av_frame_free(&converted)
        var p: UnsafeMutablePointer<AVPacket>? = packet
        av_packet_free(&p)
        av_buffer_unref(&hardwareFrames)
    }

    /// A VAAPI device (the default one) and a pool of its frames holding `format` pictures.
    private static func vaapiFrames(width: Int, height: Int, format: AVPixelFormat) throws -> UnsafeMutablePointer<AVBufferRef> {
        var device: UnsafeMutablePointer<AVBufferRef>?
        let created = av_hwdevice_ctx_create(&device, AV_HWDEVICE_TYPE_VAAPI, nil, nil, 0)
        guard created >= 0, device != nil else {
            throw UpscaleError(.processing, "no VAAPI device could be opened: \(ffmpegErrorText(created))")
        }
        defer { av_buffer_unref(&device) }
        var frames = av_hwframe_ctx_alloc(device)
        guard let pool = frames else { throw UpscaleError(.processing, "out of memory") }
        let description = UnsafeMutableRawPointer(pool.pointee.data).assumingMemoryBound(to: AVHWFramesContext.self)
        description.pointee.format = AV_PIX_FMT_VAAPI
        description.pointee.sw_format = format
        description.pointee.width = Int32(width)
        description.pointee.height = Int32(height)
        description.pointee.initial_pool_size = 20
        let initialized = av_hwframe_ctx_init(pool)
        guard initialized >= 0 else {
            av_buffer_unref(&frames)
            throw UpscaleError(.processing, "the VAAPI device has no \(width)x\(height) frames: \(ffmpegErrorText(initialized))")
        }
        return pool
    }

    /// Encodes one picture (nil flushes at the end); each finished packet goes to `emit`,
    /// timestamps in the encoder's time base. The picture may be reused once this returns.
    /// Encodes `picture` (nil flushes). `release` is called once the encoder no longer needs
    /// the picture's memory: a picture the encoder takes as it is is handed over without a
    /// copy, wrapped in a reference-counted buffer whose release gives it back (FFmpeg copies
    /// a picture that is not reference counted into a freshly allocated frame: at 8K that is
    /// 50 MB of new pages a frame, since glibc serves blocks over 32 MB with fresh mmaps).
    /// `captions`: the picture's closed captions (A/53 cc_data), which libx264 writes into its
    /// SEI and which HEVC packets get as an SEI of their own (ProRes and FFV1 have no place for them).
    /// `hdr10Plus`: the picture's HDR10+ message (`HDR10Plus.payload`), for HEVC packets only
    /// (empty: the picture's metadata could not be written).
    /// `keyframe`: the picture starts a chunk (see `forcesKeyframes`); its packet is known by
    /// `takeForcedKey`.
    func encode(_ picture: Picture?, pts: Int64, keyframe: Bool = false, captions: [UInt8]? = nil, hdr10Plus: [UInt8]? = nil,
                release: @escaping () -> Void = {},
                emit: (UnsafeMutablePointer<AVPacket>) throws -> Void) throws {
        var input: UnsafeMutablePointer<AVFrame>?
        var upload: UnsafeMutablePointer<AVFrame>?
        var handedOver = false
        defer {
            av_frame_free(&upload)
            // Our own reference to a handed-over picture; the encoder keeps its own until done.
            if handedOver { av_frame_unref(frame) } else if picture != nil { release() }
        }
        if let picture {
            // Plane pointers and byte strides of whichever depth the picture has.
            let planes: [(UnsafeMutablePointer<UInt8>, Int32)]
            let size: (Int32, Int32)
            switch picture {
            case .eight(let f):
                planes = f.planes.map { ($0.base, Int32($0.stride)) }
                size = (Int32(f.width), Int32(f.height))
            case .deep(let f):
                planes = f.planes.map { (UnsafeMutableRawPointer($0.base).assumingMemoryBound(to: UInt8.self), Int32($0.stride * 2)) }
                size = (Int32(f.width), Int32(f.height))
            }
            if let converted {
                try check(av_frame_make_writable(converted), "cannot write a frame")
                try converter.configure(
                    source: (size.0, size.1, inputFormat),
                    destination: (converted.pointee.width, converted.pointee.height, softwareFormat),
                    matrix: matrix, fullRange: fullRange,
                    destinationFullRange: context.pointee.color_range == AVCOL_RANGE_JPEG)
                converter.convert(
                    source: planes.map { $0.0 }, sourceStrides: planes.map { $0.1 }, sourceHeight: size.1,
                    destination: planePointers(converted), destinationStrides: planeStrides(converted))
                input = converted
            } else {
                let owner = Unmanaged.passRetained(PictureRelease(release)).toOpaque()
                guard let buffer = av_buffer_create(planes[0].0, Int(planes[0].1) * Int(size.1), { opaque, _ in
                    Unmanaged<PictureRelease>.fromOpaque(opaque!).takeRetainedValue().run()
                }, owner, 0) else {
                    Unmanaged<PictureRelease>.fromOpaque(owner).release()
                    throw UpscaleError(.processing, "out of memory")
                }
                handedOver = true
                frame.pointee.buf.0 = buffer
                frame.pointee.format = inputFormat.rawValue
                frame.pointee.width = size.0
                frame.pointee.height = size.1
                frame.pointee.data.0 = planes[0].0
                frame.pointee.linesize.0 = planes[0].1
                frame.pointee.data.1 = planes[1].0
                frame.pointee.linesize.1 = planes[1].1
                frame.pointee.data.2 = planes[2].0
                frame.pointee.linesize.2 = planes[2].1
                if planes.count > 3 {
                    frame.pointee.data.3 = planes[3].0
                    frame.pointee.linesize.3 = planes[3].1
                }
                input = frame
            }
            if let hardwareFrames, let software = input {
                // VAAPI: into a frame of the device's pool (freed once sent; the encoder keeps its own reference).
                upload = av_frame_alloc()
                try check(av_hwframe_get_buffer(hardwareFrames, upload, 0), "cannot get a frame from the VAAPI device")
                try check(av_hwframe_transfer_data(upload, software, 0), "cannot upload a picture to the VAAPI device")
                input = upload
            }
            let placed = grid?.place(pts) ?? pts
            input!.pointee.pts = placed
            // A reused frame (`converted`) keeps the type asked of the picture before.
            input!.pointee.pict_type = keyframe ? AV_PICTURE_TYPE_I : AV_PICTURE_TYPE_NONE
            if keyframe {
                guard forcesKeyframes, placed != noPTS else {
                    throw UpscaleError(.processing, "the \(name) encoder cannot start a chunk mid-stream")
                }
                forcedKeys.insert(placed)
            }
            if placed != noPTS {
                if let previous = lastPlaced, placed > previous { shownFor[previous] = placed - previous }
                lastPlaced = placed
                if firstPlaced == nil { firstPlaced = placed }
            }
            // Some encoders (prores_ks) write the picture's own colour description into the
            // bitstream, which players trust over the container's.
            input!.pointee.color_range = context.pointee.color_range
            input!.pointee.color_primaries = context.pointee.color_primaries
            input!.pointee.color_trc = context.pointee.color_trc
            input!.pointee.colorspace = context.pointee.colorspace
            input!.pointee.chroma_location = context.pointee.chroma_sample_location
            // A reused frame (`converted`) keeps side data from the picture before.
            av_frame_remove_side_data(input, AV_FRAME_DATA_A53_CC)
            if let hdr10Plus {
                if settings.codec == .hevc && placed != noPTS && !hdr10Plus.isEmpty {
                    // Two pictures placed at one time: the first one's is kept.
                    if seiByTime[placed]?.hdr10Plus == nil { seiByTime[placed, default: ([], nil)].hdr10Plus = hdr10Plus }
                } else {
                    lostHDR10Plus = true
                }
            }
            if let captions, !captions.isEmpty {
                if settings.codec == .hevc {
                    if placed == noPTS { lostCaptions = true } else { seiByTime[placed, default: ([], nil)].captions += captions }
                } else {
                    guard let data = av_frame_new_side_data(input, AV_FRAME_DATA_A53_CC, captions.count) else {
                        throw UpscaleError(.processing, "out of memory")
                    }
                    captions.withUnsafeBufferPointer { data.pointee.data.update(from: $0.baseAddress!, count: captions.count) }
                }
            }
        }
        let sent = avcodec_send_frame(context, input)
        if sent < 0 && sent != averrorEOF {
            throw UpscaleError(.processing, "the \(name) encoder failed: \(ffmpegErrorText(sent))")
        }
        while true {
            let received = avcodec_receive_packet(context, packet)
            if received == averrorEAGAIN { return }
            if received == averrorEOF {
                // A picture whose packet never came with its time.
                seiByTime.values.forEach(noteLost)
                return
            }
            try check(received, "the \(name) encoder failed")
            defer { av_packet_unref(packet) }
            mendDecodeTime(packet)
            if !seiByTime.isEmpty, let sei = seiByTime.removeValue(forKey: packet.pointee.pts),
               try !CaptionSEI.insert(sei.captions, registered: sei.hdr10Plus.map { [$0] } ?? [], into: packet) {
                noteLost(sei)
            }
            try emit(packet)
        }
    }

    /// x265 gives the packets of a clip shorter than its B-frame delay (one or two pictures) a
    /// decode time from memory it never set (-1.5e15 for 4:4:4), and the muxer refused them
    /// ("writing failed: Not yet implemented"). Such a time, after the packet's presentation or
    /// further before the first picture than any reordering reaches, becomes its presentation
    /// time (there was nothing to reorder). An encoder's own decode times start before the
    /// first picture by at most the span of the pictures it had when it gave its first packet
    /// (a variable-rate video that opens on a 5 s still: 5 s), so the reach is the larger of
    /// 64 frames and the span sent so far.
    private func mendDecodeTime(_ packet: UnsafeMutablePointer<AVPacket>) {
        guard let firstPlaced, let lastPlaced else { return }
        let span = max(reorderReach, lastPlaced.subtractingReportingOverflow(firstPlaced).partialValue)
        let earliest = firstPlaced.subtractingReportingOverflow(span)
        packet.pointee.dts = Self.decodeTime(pts: packet.pointee.pts, dts: packet.pointee.dts, previous: lastDecodeTime,
                                             earliest: earliest.overflow ? Int64.min : earliest.partialValue)
        if packet.pointee.dts != noPTS { lastDecodeTime = packet.pointee.dts }
    }

    /// The decode time a packet is written with (see `mendDecodeTime`): `dts` where it lies
    /// from `earliest` to `pts`, else `pts` where that comes after the `previous` packet's. A
    /// bad time on a picture shown before the previous decode time has no good value (only a
    /// reordered picture is, and x265's bad times come with nothing to reorder): just after
    /// the previous one, which the muxer refuses as it would have refused the bad one.
    static func decodeTime(pts: Int64, dts: Int64, previous: Int64?, earliest: Int64) -> Int64 {
        guard pts != noPTS, dts != noPTS, dts > pts || dts < earliest else { return dts }
        return previous.map { pts > $0 ? pts : $0 + 1 } ?? pts
    }
}

/// What to do when FFmpeg lets go of a picture handed to an encoder.
private final class PictureRelease {
    let run: () -> Void
    init(_ run: @escaping () -> Void) { self.run = run }
}

/// The frame threads upscale asks of libx265. x265 picks one frame encoder below four pool
/// threads; on two or three cores that leaves them idle while a frame's wavefront waits on
/// its rows (x265 spent ~10% of a 2-core machine idle on a 720p medium encode). A second
/// frame encoder fills those waits: 4-8% less wall time at 720p, 26% at 8K ultrafast (same
/// preset and CRF; sizes within 0.1%, PSNR within 0.01 dB on real footage). It costs x265
/// one or two more frames in flight (+40 MB at 1440p, +0.5% at 8K). Elsewhere x265 decides.
public enum X265Threading {
    /// Frame encoders for a pool of `poolThreads` threads (nil: one per core), or nil for x265's choice.
    public static func frameThreads(poolThreads: Int? = nil) -> Int? {
        (2...3).contains(poolThreads ?? ProcessInfo.processInfo.activeProcessorCount) ? 2 : nil
    }

    /// The `x265-params` suffix (":frame-threads=N", or empty) for `frameThreads`.
    public static func parameters(poolThreads: Int? = nil) -> String {
        frameThreads(poolThreads: poolThreads).map { ":frame-threads=\($0)" } ?? ""
    }
}
