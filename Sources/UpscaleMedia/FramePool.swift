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

    init(width: Int, height: Int, highBitDepth: Bool) {
        make = highBitDepth
            ? { .deep(Frame16(width: width, height: height, layout: .yuv420, bitDepth: 10)) }
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
