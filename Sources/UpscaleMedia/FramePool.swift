import CFFmpeg
import Foundation
import UpscaleCore

/// A decoded or upscaled picture at the pipeline's working depth.
enum Picture {
    case eight(Frame)
    case deep(Frame16)
}

/// Recycles pictures of one size so an 8K pipeline does not allocate 50 MB per frame.
/// With a `limit`, at most that many pictures exist: `take` waits for one given back.
final class PicturePool {
    private let make: () -> Picture
    private var free: [Picture] = []
    private var limit: Int?
    private var made = 0
    private var gives = 0
    private var cancelled = false
    private let condition = NSCondition()

    /// 8-bit pictures are 4:2:0; 10-bit ones have `deepLayout`.
    init(width: Int, height: Int, highBitDepth: Bool, deepLayout: ChromaLayout = .yuv420, limit: Int? = nil) {
        make = highBitDepth
            ? { .deep(Frame16(width: width, height: height, layout: deepLayout, bitDepth: 10)) }
            : { .eight(Frame(width: width, height: height, layout: .yuv420)) }
        self.limit = limit.map { max(1, $0) }
    }

    /// A free picture, a new one while under the limit, or (at the limit) the next one given
    /// back; nil once cancelled.
    func take() -> Picture? {
        condition.lock()
        defer { condition.unlock() }
        while !cancelled && free.isEmpty, let limit, made >= limit { condition.wait() }
        if cancelled { return nil }
        if let picture = free.popLast() { return picture }
        made += 1
        return make()
    }

    func give(_ picture: Picture) {
        condition.lock()
        free.append(picture)
        gives += 1
        condition.signal()
        condition.unlock()
    }

    /// How many pictures were given back so far.
    var givenBack: Int {
        condition.lock()
        defer { condition.unlock() }
        return gives
    }

    /// No limit from now on: a picture its user kept past the point it should have given it
    /// back (an encoder that holds pictures after all) cannot stall the pipeline.
    func lift() {
        condition.lock()
        limit = nil
        condition.broadcast()
        condition.unlock()
    }

    /// Wakes a waiting `take`, which returns nil from now on.
    func cancel() {
        condition.lock()
        cancelled = true
        condition.broadcast()
        condition.unlock()
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
