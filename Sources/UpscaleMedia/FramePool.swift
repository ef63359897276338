import Foundation
import UpscaleCore

/// Recycles frames of one size so an 8K pipeline does not allocate 50 MB per picture.
final class FramePool {
    private let width: Int
    private let height: Int
    private var free: [Frame] = []
    private let lock = NSLock()

    init(width: Int, height: Int) {
        self.width = width
        self.height = height
    }

    func take() -> Frame {
        lock.lock()
        defer { lock.unlock() }
        return free.popLast() ?? Frame(width: width, height: height, layout: .yuv420)
    }

    func give(_ frame: Frame) {
        lock.lock()
        free.append(frame)
        lock.unlock()
    }
}
