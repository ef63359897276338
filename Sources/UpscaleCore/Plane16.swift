/// One plane of high-bit-depth samples (10, 12 or 16 bits in `UInt16`), `stride` samples
/// between rows, owning its memory. Same sharing rule as `Plane`: concurrent workers write
/// disjoint rows only.
public final class Plane16: @unchecked Sendable {
    public let width: Int
    public let height: Int
    /// Distance between rows, in samples.
    public let stride: Int
    public let bitDepth: Int
    public let base: UnsafeMutablePointer<UInt16>
    private let owned: Bool

    /// A plane over memory someone else owns, as `Plane(viewing:…)`.
    public init(viewing base: UnsafeMutablePointer<UInt16>, width: Int, height: Int, bitDepth: Int, stride: Int) {
        self.width = width
        self.height = height
        self.stride = stride
        self.bitDepth = bitDepth
        self.base = base
        owned = false
    }

    public init(width: Int, height: Int, bitDepth: Int = 10, stride: Int? = nil) {
        precondition(width > 0 && height > 0, "plane size must be positive")
        precondition((9...16).contains(bitDepth), "bit depth must be 9...16")
        let rowSamples = stride ?? ((width + 31) & ~31)
        precondition(rowSamples >= width, "stride shorter than width")
        self.width = width
        self.height = height
        self.stride = rowSamples
        self.bitDepth = bitDepth
        base = .allocate(capacity: rowSamples * height)
        base.initialize(repeating: 0, count: rowSamples * height)
        owned = true
    }

    public convenience init(width: Int, height: Int, bitDepth: Int, samples: [UInt16]) {
        precondition(samples.count == width * height, "sample count does not match size")
        self.init(width: width, height: height, bitDepth: bitDepth)
        for y in 0..<height { for x in 0..<width { base[y * stride + x] = samples[y * width + x] } }
    }

    deinit { if owned { base.deallocate() } }

    public var maxValue: Int { (1 << bitDepth) - 1 }

    @inlinable public func row(_ y: Int) -> UnsafeMutablePointer<UInt16> { base + y * stride }

    @inlinable public subscript(x: Int, y: Int) -> UInt16 {
        get { base[y * stride + x] }
        set { base[y * stride + x] = newValue }
    }

    public var samples: [UInt16] {
        var out = [UInt16](repeating: 0, count: width * height)
        for y in 0..<height { for x in 0..<width { out[y * width + x] = base[y * stride + x] } }
        return out
    }
}

/// A high-bit-depth picture as planes: luma first, then Cb and Cr when the layout has them.
public struct Frame16: Sendable {
    public let width: Int
    public let height: Int
    public let layout: ChromaLayout
    public let bitDepth: Int
    public let planes: [Plane16]

    public init(width: Int, height: Int, layout: ChromaLayout, bitDepth: Int) {
        self.width = width
        self.height = height
        self.layout = layout
        self.bitDepth = bitDepth
        planes = (0..<layout.planeCount).map { index in
            let size = layout.planeSize(plane: index, width: width, height: height)
            return Plane16(width: size.width, height: size.height, bitDepth: bitDepth)
        }
    }

    public init(width: Int, height: Int, layout: ChromaLayout, planes: [Plane16]) {
        precondition(planes.count == layout.planeCount, "plane count does not match layout")
        for (index, plane) in planes.enumerated() {
            let size = layout.planeSize(plane: index, width: width, height: height)
            precondition(plane.width == size.width && plane.height == size.height, "plane \(index) has the wrong size")
            precondition(plane.bitDepth == planes[0].bitDepth, "planes differ in bit depth")
        }
        self.width = width
        self.height = height
        self.layout = layout
        bitDepth = planes[0].bitDepth
        self.planes = planes
    }
}
