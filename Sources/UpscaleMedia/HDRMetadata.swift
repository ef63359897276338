import CFFmpeg

/// HDR10 static metadata: mastering display colour volume and content light level,
/// in the units x265's `master-display` and `max-cll` parameters take.
public struct HDRMetadata: Sendable, Equatable {
    /// Display primaries and white point, in 0.00002 units: (G, B, R, WP) x and y.
    public var green: (x: Int, y: Int)
    public var blue: (x: Int, y: Int)
    public var red: (x: Int, y: Int)
    public var whitePoint: (x: Int, y: Int)
    /// Luminance in 0.0001 cd/m² units.
    public var maxLuminance: Int
    public var minLuminance: Int
    /// MaxCLL and MaxFALL in cd/m², nil when the source has none.
    public var contentLight: (maxCLL: Int, maxFALL: Int)?

    public static func == (a: HDRMetadata, b: HDRMetadata) -> Bool {
        a.x265Parameters == b.x265Parameters
    }

    /// "master-display=G(x,y)B(x,y)R(x,y)WP(x,y)L(max,min):max-cll=C,F" for x265.
    public var x265Parameters: String {
        var text = "master-display=G(\(green.x),\(green.y))B(\(blue.x),\(blue.y))R(\(red.x),\(red.y))"
            + "WP(\(whitePoint.x),\(whitePoint.y))L(\(maxLuminance),\(minLuminance))"
        if let cll = contentLight { text += ":max-cll=\(cll.maxCLL),\(cll.maxFALL)" }
        return text
    }

    /// Reads the metadata from a decoded frame's side data (HEVC/AV1 carry it in the bitstream).
    init?(frame: UnsafeMutablePointer<AVFrame>) {
        guard let side = av_frame_get_side_data(frame, AV_FRAME_DATA_MASTERING_DISPLAY_METADATA) else { return nil }
        let m = UnsafeRawPointer(side.pointee.data).assumingMemoryBound(to: AVMasteringDisplayMetadata.self).pointee
        guard m.has_primaries != 0 || m.has_luminance != 0 else { return nil }
        func chroma(_ q: AVRational) -> Int { Int((q.double * 50_000).rounded()) }
        func luma(_ q: AVRational) -> Int { Int((q.double * 10_000).rounded()) }
        // AVMasteringDisplayMetadata orders primaries R, G, B.
        let p = withUnsafeBytes(of: m.display_primaries) { Array($0.bindMemory(to: AVRational.self)) }
        red = (chroma(p[0]), chroma(p[1]))
        green = (chroma(p[2]), chroma(p[3]))
        blue = (chroma(p[4]), chroma(p[5]))
        let wp = withUnsafeBytes(of: m.white_point) { Array($0.bindMemory(to: AVRational.self)) }
        whitePoint = (chroma(wp[0]), chroma(wp[1]))
        maxLuminance = luma(m.max_luminance)
        minLuminance = luma(m.min_luminance)
        if let light = av_frame_get_side_data(frame, AV_FRAME_DATA_CONTENT_LIGHT_LEVEL) {
            let c = UnsafeRawPointer(light.pointee.data).assumingMemoryBound(to: AVContentLightMetadata.self).pointee
            contentLight = (Int(c.MaxCLL), Int(c.MaxFALL))
        } else {
            contentLight = nil
        }
    }

    /// The HDR10 metadata of a file's first video frame, if it has any.
    public static func firstFrame(of path: String) throws -> HDRMetadata? {
        MediaLibrary.configure()
        let input = try InputFile(path: path)
        let index = try input.videoStreamIndex()
        let stream = input.stream(index)
        guard let codec = avcodec_find_decoder(stream.pointee.codecpar.pointee.codec_id) else { return nil }
        var ctx: UnsafeMutablePointer<AVCodecContext>? = avcodec_alloc_context3(codec)
        defer { avcodec_free_context(&ctx) }
        guard avcodec_parameters_to_context(ctx, stream.pointee.codecpar) >= 0, avcodec_open2(ctx, codec, nil) >= 0 else { return nil }
        var packet: UnsafeMutablePointer<AVPacket>? = av_packet_alloc()
        var frame: UnsafeMutablePointer<AVFrame>? = av_frame_alloc()
        defer {
            av_packet_free(&packet)
            av_frame_free(&frame)
        }
        var sentEnd = false
        while true {
            if avcodec_receive_frame(ctx, frame) >= 0 { return HDRMetadata(frame: frame!) }
            if sentEnd { return nil }
            if try input.read(into: packet!) {
                if Int(packet!.pointee.stream_index) == index { _ = avcodec_send_packet(ctx, packet) }
                av_packet_unref(packet)
            } else {
                _ = avcodec_send_packet(ctx, nil)
                sentEnd = true
            }
        }
    }
}
