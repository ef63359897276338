import CFFmpeg

/// HDR10 static metadata: mastering display colour volume and content light level,
/// in the units x265's `master-display` and `max-cll` parameters take.
public struct HDRMetadata: Sendable, Equatable {
    /// Display primaries and white point, in 0.00002 units: (G, B, R, WP) x and y; all 0
    /// when the source gives only its content light level.
    public var green: (x: Int, y: Int) = (0, 0)
    public var blue: (x: Int, y: Int) = (0, 0)
    public var red: (x: Int, y: Int) = (0, 0)
    public var whitePoint: (x: Int, y: Int) = (0, 0)
    /// Luminance in 0.0001 cd/m² units.
    public var maxLuminance = 0
    public var minLuminance = 0
    /// Whether the source gave a mastering display (the fields above).
    public var hasMasteringDisplay = false
    /// MaxCLL and MaxFALL in cd/m², nil when the source has none.
    public var contentLight: (maxCLL: Int, maxFALL: Int)?

    public static func == (a: HDRMetadata, b: HDRMetadata) -> Bool {
        a.x265Parameters == b.x265Parameters
    }

    /// Writes this as stream side data (where .mkv, .mp4 and .mov keep it, for any codec): the mastering display when given, the content light level when given.
    func addSideData(to stream: UnsafeMutablePointer<AVStream>) {
        if hasMasteringDisplay,
           let raw = av_stream_new_side_data(stream, AV_PKT_DATA_MASTERING_DISPLAY_METADATA, MemoryLayout<AVMasteringDisplayMetadata>.size) {
            let m = UnsafeMutableRawPointer(raw).bindMemory(to: AVMasteringDisplayMetadata.self, capacity: 1)
            func chroma(_ v: Int) -> AVRational { AVRational(num: Int32(v), den: 50_000) }
            func luma(_ v: Int) -> AVRational { AVRational(num: Int32(v), den: 10_000) }
            m.pointee.display_primaries = ((chroma(red.x), chroma(red.y)), (chroma(green.x), chroma(green.y)),
                                           (chroma(blue.x), chroma(blue.y)))
            m.pointee.white_point = (chroma(whitePoint.x), chroma(whitePoint.y))
            m.pointee.max_luminance = luma(maxLuminance)
            m.pointee.min_luminance = luma(minLuminance)
            m.pointee.has_primaries = 1
            m.pointee.has_luminance = 1
        }
        if let light = contentLight,
           let raw = av_stream_new_side_data(stream, AV_PKT_DATA_CONTENT_LIGHT_LEVEL, MemoryLayout<AVContentLightMetadata>.size) {
            let c = UnsafeMutableRawPointer(raw).bindMemory(to: AVContentLightMetadata.self, capacity: 1)
            c.pointee.MaxCLL = UInt32(light.maxCLL)
            c.pointee.MaxFALL = UInt32(light.maxFALL)
        }
    }

    /// "master-display=G(x,y)B(x,y)R(x,y)WP(x,y)L(max,min):max-cll=C,F" for x265, either part
    /// alone when the source has only that.
    public var x265Parameters: String {
        var parts: [String] = []
        if hasMasteringDisplay {
            parts.append("master-display=G(\(green.x),\(green.y))B(\(blue.x),\(blue.y))R(\(red.x),\(red.y))"
                + "WP(\(whitePoint.x),\(whitePoint.y))L(\(maxLuminance),\(minLuminance))")
        }
        if let cll = contentLight { parts.append("max-cll=\(cll.maxCLL),\(cll.maxFALL)") }
        return parts.joined(separator: ":")
    }

    /// From FFmpeg's two side-data records, either of which may be missing; nil without both.
    init?(mastering: UnsafeRawPointer?, light: UnsafeRawPointer?) {
        if let mastering {
            let m = mastering.assumingMemoryBound(to: AVMasteringDisplayMetadata.self).pointee
            // Both halves or none: x265's master-display takes them together, and the half a
            // source lacked was written as zeros (a white point of (0,0), a peak of 0 nits).
            if m.has_primaries != 0 && m.has_luminance != 0 {
                func chroma(_ q: AVRational) -> Int { q.den == 0 ? 0 : Int((q.double * 50_000).rounded()) }
                func luma(_ q: AVRational) -> Int { q.den == 0 ? 0 : Int((q.double * 10_000).rounded()) }
                // AVMasteringDisplayMetadata orders primaries R, G, B.
                let p = withUnsafeBytes(of: m.display_primaries) { Array($0.bindMemory(to: AVRational.self)) }
                red = (chroma(p[0]), chroma(p[1]))
                green = (chroma(p[2]), chroma(p[3]))
                blue = (chroma(p[4]), chroma(p[5]))
                let wp = withUnsafeBytes(of: m.white_point) { Array($0.bindMemory(to: AVRational.self)) }
                whitePoint = (chroma(wp[0]), chroma(wp[1]))
                maxLuminance = luma(m.max_luminance)
                minLuminance = luma(m.min_luminance)
                hasMasteringDisplay = true
            }
        }
        if let light {
            let c = light.assumingMemoryBound(to: AVContentLightMetadata.self).pointee
            if c.MaxCLL > 0 || c.MaxFALL > 0 { contentLight = (Int(c.MaxCLL), Int(c.MaxFALL)) }
        }
        guard hasMasteringDisplay || contentLight != nil else { return nil }
    }

    /// Reads the metadata from a decoded frame's side data (HEVC/AV1 carry it in the bitstream)
    /// and, for what the frame lacks, from the stream's (Matroska's Colour, MP4's mdcv/clli or
    /// SmDm/CoLL boxes: VP9 HDR10 from YouTube has it there only). A content light level with
    /// no mastering display is kept too.
    init?(frame: UnsafeMutablePointer<AVFrame>?, stream: UnsafeMutablePointer<AVStream>) {
        func frameData(_ type: AVFrameSideDataType) -> UnsafeRawPointer? {
            frame.flatMap { av_frame_get_side_data($0, type) }.map { UnsafeRawPointer($0.pointee.data) }
        }
        func streamData(_ type: AVPacketSideDataType, _ size: Int) -> UnsafeRawPointer? {
            var length = 0
            guard let data = av_stream_get_side_data(stream, type, &length), length >= size else { return nil }
            return UnsafeRawPointer(data)
        }
        self.init(mastering: frameData(AV_FRAME_DATA_MASTERING_DISPLAY_METADATA)
                    ?? streamData(AV_PKT_DATA_MASTERING_DISPLAY_METADATA, MemoryLayout<AVMasteringDisplayMetadata>.size),
                  light: frameData(AV_FRAME_DATA_CONTENT_LIGHT_LEVEL)
                    ?? streamData(AV_PKT_DATA_CONTENT_LIGHT_LEVEL, MemoryLayout<AVContentLightMetadata>.size))
    }

    /// The HDR10 metadata a file's container gives its video stream, if any.
    public static func container(of path: String) throws -> HDRMetadata? {
        MediaLibrary.configure()
        let input = try InputFile(path: path)
        return HDRMetadata(frame: nil, stream: input.stream(try input.videoStreamIndex()))
    }

    /// The HDR10 metadata of a file's first video frame, if it has any.
    public static func firstFrame(of path: String) throws -> HDRMetadata? {
        try InputFile.firstPicture(of: path) { HDRMetadata(frame: $0, stream: $1) }
    }
}
