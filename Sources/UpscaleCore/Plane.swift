/// One plane of 8-bit samples, `stride` bytes between rows, owning its memory.
///
/// Concurrency rule: a plane may be shared between workers of a `TileScheduler`
/// only while each worker writes rows no other worker reads or writes. The core's
/// resamplers follow it by giving every task its own band of output rows.
public final class Plane: @unchecked Sendable {
    public let width: Int
    public let height: Int
    public let stride: Int
    public let base: UnsafeMutablePointer<UInt8>
    private let owned: Bool

    /// A plane over memory someone else owns (and frees): rows `y` are at `base + y * stride`.
    /// The scaler writes a strip of a tall output through such a view of the strip's rows.
    public init(viewing base: UnsafeMutablePointer<UInt8>, width: Int, height: Int, stride: Int) {
        self.width = width
        self.height = height
        self.stride = stride
        self.base = base
        owned = false
    }

    /// A zero-filled plane; `stride` defaults to `width` rounded up to 64 bytes.
    public init(width: Int, height: Int, stride: Int? = nil) {
        precondition(width > 0 && height > 0, "plane size must be positive")
        let rowBytes = stride ?? ((width + 63) & ~63)
        precondition(rowBytes >= width, "stride shorter than width")
        self.width = width
        self.height = height
        self.stride = rowBytes
        let raw = UnsafeMutableRawPointer.allocate(byteCount: rowBytes * height, alignment: 64)
        raw.initializeMemory(as: UInt8.self, repeating: 0, count: rowBytes * height)
        base = raw.assumingMemoryBound(to: UInt8.self)
        owned = true
    }

    deinit { if owned { base.deallocate() } }

    @inlinable public func row(_ y: Int) -> UnsafeMutablePointer<UInt8> { base + y * stride }

    @inlinable public subscript(x: Int, y: Int) -> UInt8 {
        get { base[y * stride + x] }
        set { base[y * stride + x] = newValue }
    }

    /// Copies `height` rows of `width` bytes from memory laid out with `sourceStride`.
    public func copy(from source: UnsafePointer<UInt8>, sourceStride: Int) {
        for y in 0..<height {
            (base + y * stride).update(from: source + y * sourceStride, count: width)
        }
    }

    /// Copies this plane's visible samples into memory laid out with `destinationStride`.
    public func copy(to destination: UnsafeMutablePointer<UInt8>, destinationStride: Int) {
        for y in 0..<height {
            (destination + y * destinationStride).update(from: base + y * stride, count: width)
        }
    }

    /// The visible samples row by row, without stride padding.
    public var samples: [UInt8] {
        var out = [UInt8](repeating: 0, count: width * height)
        out.withUnsafeMutableBufferPointer { copy(to: $0.baseAddress!, destinationStride: width) }
        return out
    }

    /// A plane filled from tightly packed row-major samples.
    public convenience init(width: Int, height: Int, samples: [UInt8]) {
        precondition(samples.count == width * height, "sample count does not match size")
        self.init(width: width, height: height)
        samples.withUnsafeBufferPointer { copy(from: $0.baseAddress!, sourceStride: width) }
    }
}
