import CFFmpeg
import UpscaleCore

/// Plane pointers and strides of an AVFrame (C fixed arrays import as tuples).
func planePointers(_ frame: UnsafeMutablePointer<AVFrame>) -> [UnsafeMutablePointer<UInt8>?] {
    withUnsafeBytes(of: frame.pointee.data) { Array($0.bindMemory(to: UnsafeMutablePointer<UInt8>?.self)) }
}

func planeStrides(_ frame: UnsafeMutablePointer<AVFrame>) -> [Int32] {
    withUnsafeBytes(of: frame.pointee.linesize) { Array($0.bindMemory(to: Int32.self)) }
}

/// Converts between pixel formats and sizes with libswscale into or out of core frames.
final class PixelConverter {
    private var context: OpaquePointer?
    private var key: (Int32, Int32, Int32, Int32, Int32, Int32)?
    private let flags: Int32

    init(flags: Int32 = Int32(SWS_BICUBIC | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT | SWS_FULL_CHR_H_INP)) {
        self.flags = flags
    }

    deinit { sws_freeContext(context) }

    /// Prepares a context for one conversion; reused while the formats and sizes stay the same.
    /// `matrix` is an SWS_CS_* constant; samples keep their range unless `destinationFullRange` says otherwise.
    func configure(
        source: (width: Int32, height: Int32, format: AVPixelFormat),
        destination: (width: Int32, height: Int32, format: AVPixelFormat),
        matrix: Int32, fullRange: Bool, destinationFullRange: Bool? = nil
    ) throws {
        let range: Int32 = fullRange ? 1 : 0
        let destinationRange: Int32 = (destinationFullRange ?? fullRange) ? 1 : 0
        let newKey = (source.width, source.height, source.format.rawValue,
                      destination.width, destination.height, destination.format.rawValue)
        if let key, key == newKey, context != nil { return }
        sws_freeContext(context)
        // The ranges are set before the context is made: libswscale 6 applies a range change
        // given afterwards (sws_setColorspaceDetails) only to 8-bit YUV sources, and copies a
        // picture whose format does not change as it is. Full-range 10-bit went into ProRes
        // unconverted, tagged limited.
        context = sws_alloc_context()
        guard let context else { throw UpscaleError(.processing, "out of memory") }
        let options: [(String, Int64)] = [
            ("srcw", Int64(source.width)), ("srch", Int64(source.height)), ("src_format", Int64(source.format.rawValue)),
            ("dstw", Int64(destination.width)), ("dsth", Int64(destination.height)), ("dst_format", Int64(destination.format.rawValue)),
            ("sws_flags", Int64(flags)), ("src_range", Int64(range)), ("dst_range", Int64(destinationRange))]
        for (name, value) in options { av_opt_set_int(UnsafeMutableRawPointer(context), name, value, 0) }
        guard sws_init_context(context, nil, nil) >= 0 else {
            sws_freeContext(context)
            self.context = nil
            throw UpscaleError(.processing, "libswscale cannot convert \(pixelFormatName(source.format)) to \(pixelFormatName(destination.format))")
        }
        let coefficients = sws_getCoefficients(matrix)
        sws_setColorspaceDetails(context, coefficients, range, coefficients, destinationRange, 0, 1 << 16, 1 << 16)
        key = newKey
    }

    func convert(
        source: [UnsafeMutablePointer<UInt8>?], sourceStrides: [Int32], sourceHeight: Int32,
        destination: [UnsafeMutablePointer<UInt8>?], destinationStrides: [Int32]
    ) {
        var src = source.map { UnsafePointer<UInt8>($0) }
        while src.count < 4 { src.append(nil) }
        var srcStride = sourceStrides
        while srcStride.count < 4 { srcStride.append(0) }
        var dst = destination
        while dst.count < 4 { dst.append(nil) }
        var dstStride = destinationStrides
        while dstStride.count < 4 { dstStride.append(0) }
        _ = sws_scale(context, &src, &srcStride, 0, sourceHeight, &dst, &dstStride)
    }

    /// Converts an AVFrame into a planar 8-bit 4:2:0 core frame of the same size.
    func convert(_ frame: UnsafeMutablePointer<AVFrame>, into output: Frame) {
        convert(source: planePointers(frame), sourceStrides: planeStrides(frame), sourceHeight: frame.pointee.height,
                destination: output.planes.map { $0.base }, destinationStrides: output.planes.map { Int32($0.stride) })
    }
}

func pixelFormatName(_ format: AVPixelFormat) -> String {
    guard let name = av_get_pix_fmt_name(format) else { return "unknown pixel format" }
    return String(cString: name)
}

/// The swscale matrix constant for an FFmpeg colorspace value.
func swsMatrix(for space: AVColorSpace, height: Int32) -> Int32 {
    switch space {
    case AVCOL_SPC_BT709: return SWS_CS_ITU709
    case AVCOL_SPC_BT470BG, AVCOL_SPC_SMPTE170M: return SWS_CS_ITU601
    case AVCOL_SPC_SMPTE240M: return SWS_CS_SMPTE240M
    case AVCOL_SPC_FCC: return SWS_CS_FCC
    case AVCOL_SPC_BT2020_NCL, AVCOL_SPC_BT2020_CL: return SWS_CS_BT2020
    default: return height >= 720 ? SWS_CS_ITU709 : SWS_CS_ITU601
    }
}
