import CFFmpeg
import Foundation
import UpscaleCore

/// A decoded or upscaled picture at the pipeline's working depth.
enum Picture {
    case eight(Frame)
    case deep(Frame16)
}

/// Recycles pictures of one size so an 8K pipeline does not allocate 50 MB per frame.
final class PicturePool {
    private let make: () -> Picture
    private var free: [Picture] = []
    private let lock = NSLock()

    /// 8-bit pictures are 4:2:0; 10-bit ones have `deepLayout`.
    init(width: Int, height: Int, highBitDepth: Bool, deepLayout: ChromaLayout = .yuv420) {
        make = highBitDepth
            ? { .deep(Frame16(width: width, height: height, layout: deepLayout, bitDepth: 10)) }
            : { .eight(Frame(width: width, height: height, layout: .yuv420)) }
    }

    func take() -> Picture {
        lock.lock()
        defer { lock.unlock() }
        return free.popLast() ?? make()
    }

    func give(_ picture: Picture) {
        lock.lock()
        free.append(picture)
        lock.unlock()
    }
}

extension ChromaLayout {
    /// The planar 10-bit FFmpeg format of this layout (gray is not used by the pipeline).
    var tenBitFormat: AVPixelFormat {
        switch self {
        case .yuv420, .gray: return AV_PIX_FMT_YUV420P10LE
        case .yuv422: return AV_PIX_FMT_YUV422P10LE
        case .yuv444: return AV_PIX_FMT_YUV444P10LE
        case .yuva444: return AV_PIX_FMT_YUVA444P10LE
        case .rgb: return AV_PIX_FMT_GBRP10LE
        case .rgba: return AV_PIX_FMT_GBRAP10LE
        }
    }

    /// The planar 8-bit FFmpeg format of this layout.
    var eightBitFormat: AVPixelFormat {
        switch self {
        case .yuv420: return AV_PIX_FMT_YUV420P
        case .yuv422: return AV_PIX_FMT_YUV422P
        case .yuv444: return AV_PIX_FMT_YUV444P
        case .yuva444: return AV_PIX_FMT_YUVA444P
        case .gray: return AV_PIX_FMT_GRAY8
        case .rgb: return AV_PIX_FMT_GBRP
        case .rgba: return AV_PIX_FMT_GBRAP
        }
    }
}
