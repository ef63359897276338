import CFFmpeg
import UpscaleCore

/// FFmpeg's libswscale as a frame scaler: the reference the tests and the bench
/// compare the core against (same planes in, same planes out).
public final class SwscaleScaler {
    public enum Algorithm: Sendable {
        case lanczos, bicubic, bilinear

        var flag: Int32 {
            switch self {
            case .lanczos: return SWS_LANCZOS
            case .bicubic: return SWS_BICUBIC
            case .bilinear: return SWS_BILINEAR
            }
        }
    }

    private let context: OpaquePointer
    public let input: (width: Int, height: Int)
    public let output: (width: Int, height: Int)
    public let layout: ChromaLayout

    /// `threads` is honoured where libswscale supports it (FFmpeg 5.0 and later).
    /// `bitDepth` 8 scales `Frame`s; 10 scales `Frame16`s with 10-bit samples.
    public init(input: (width: Int, height: Int), output: (width: Int, height: Int), layout: ChromaLayout = .yuv420,
                algorithm: Algorithm = .lanczos, threads: Int = 1, bitDepth: Int = 8) throws {
        let format: AVPixelFormat
        switch bitDepth {
        case 8: format = layout.eightBitFormat
        case 10: format = layout == .gray ? AV_PIX_FMT_GRAY10LE : layout.tenBitFormat
        default: throw UpscaleError(.usage, "libswscale comparison supports 8 and 10 bits, not \(bitDepth)")
        }
        guard let ctx = sws_alloc_context() else { throw UpscaleError(.processing, "out of memory") }
        av_opt_set_int(UnsafeMutableRawPointer(ctx), "srcw", Int64(input.width), 0)
        av_opt_set_int(UnsafeMutableRawPointer(ctx), "srch", Int64(input.height), 0)
        av_opt_set_int(UnsafeMutableRawPointer(ctx), "src_format", Int64(format.rawValue), 0)
        av_opt_set_int(UnsafeMutableRawPointer(ctx), "dstw", Int64(output.width), 0)
        av_opt_set_int(UnsafeMutableRawPointer(ctx), "dsth", Int64(output.height), 0)
        av_opt_set_int(UnsafeMutableRawPointer(ctx), "dst_format", Int64(format.rawValue), 0)
        av_opt_set_int(UnsafeMutableRawPointer(ctx), "sws_flags", Int64(algorithm.flag | SWS_ACCURATE_RND), 0)
        av_opt_set_int(UnsafeMutableRawPointer(ctx), "threads", Int64(threads), 0)
        if sws_init_context(ctx, nil, nil) < 0 {
            var c: OpaquePointer? = ctx
            sws_freeContext(c)
            c = nil
            throw UpscaleError(.processing, "libswscale rejected \(input.width)x\(input.height) → \(output.width)x\(output.height)")
        }
        context = ctx
        self.input = input
        self.output = output
        self.layout = layout
    }

    deinit { sws_freeContext(context) }

    public func scale(_ source: Frame, into destination: Frame) {
        var src = source.planes.map { UnsafePointer<UInt8>($0.base) as UnsafePointer<UInt8>? }
        var srcStride = source.planes.map { Int32($0.stride) }
        var dst = destination.planes.map { $0.base as UnsafeMutablePointer<UInt8>? }
        var dstStride = destination.planes.map { Int32($0.stride) }
        while src.count < 4 { src.append(nil); srcStride.append(0); dst.append(nil); dstStride.append(0) }
        _ = sws_scale(context, &src, &srcStride, 0, Int32(source.height), &dst, &dstStride)
    }

    public func scale(_ source: Frame16, into destination: Frame16) {
        var src = source.planes.map { UnsafeRawPointer($0.base).assumingMemoryBound(to: UInt8.self) as UnsafePointer<UInt8>? }
        var srcStride = source.planes.map { Int32($0.stride * 2) }
        var dst = destination.planes.map { UnsafeMutableRawPointer($0.base).assumingMemoryBound(to: UInt8.self) as UnsafeMutablePointer<UInt8>? }
        var dstStride = destination.planes.map { Int32($0.stride * 2) }
        while src.count < 4 { src.append(nil); srcStride.append(0); dst.append(nil); dstStride.append(0) }
        _ = sws_scale(context, &src, &srcStride, 0, Int32(source.height), &dst, &dstStride)
    }

    public func scale(_ source: Frame) -> Frame {
        let out = Frame(width: output.width, height: output.height, layout: layout)
        scale(source, into: out)
        return out
    }
}
