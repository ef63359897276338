/// How a frame's planes relate to its luma size, and where chroma samples sit.
public enum ChromaLayout: Sendable, Equatable {
    /// 4:2:0 with MPEG-2/H.264 siting: chroma co-sited with even luma columns
    /// (left) and centred between luma rows.
    case yuv420
    /// 4:2:2, chroma co-sited with even luma columns.
    case yuv422
    case yuv444
    /// 4:4:4 and alpha last (video with transparency): four full-size planes. Alpha is scaled
    /// as stored, straight (not premultiplied), as ProRes 4444 and FFV1 keep it.
    case yuva444
    case gray
    /// Planar RGB (stills): three full-size colour planes, treated alike, so in any order
    /// (R, G, B as libvips gives them, or FFmpeg's G, B, R).
    case rgb
    /// Planar RGB and alpha last. Colour planes are scaled independently of alpha: give them
    /// premultiplied where transparent edges matter.
    case rgba

    public var planeCount: Int {
        switch self {
        case .gray: return 1
        case .yuv420, .yuv422, .yuv444, .rgb: return 3
        case .rgba, .yuva444: return 4
        }
    }

    /// The planes the edge refinement works on: luma, or each colour channel (never alpha,
    /// never chroma).
    public var detailPlanes: Range<Int> {
        switch self {
        case .rgb, .rgba: return 0..<3
        case .yuv420, .yuv422, .yuv444, .yuva444, .gray: return 0..<1
        }
    }

    /// Horizontal and vertical subsampling of plane `index` (1 or 2).
    public func subsampling(plane index: Int) -> (x: Int, y: Int) {
        guard index > 0 else { return (1, 1) }
        switch self {
        case .yuv420: return (2, 2)
        case .yuv422: return (2, 1)
        case .yuv444, .yuva444, .gray, .rgb, .rgba: return (1, 1)
        }
    }

    /// Position of chroma sample 0 in luma sample units along each axis.
    public func siting(plane index: Int) -> (x: Double, y: Double) {
        guard index > 0 else { return (0, 0) }
        switch self {
        case .yuv420: return (0, 0.5)
        case .yuv422, .yuv444, .yuva444, .gray, .rgb, .rgba: return (0, 0)
        }
    }

    /// Size of plane `index` for a frame of `width` x `height` luma samples.
    public func planeSize(plane index: Int, width: Int, height: Int) -> (width: Int, height: Int) {
        let s = subsampling(plane: index)
        return ((width + s.x - 1) / s.x, (height + s.y - 1) / s.y)
    }
}

/// A picture as planes: luma first, then Cb and Cr when the layout has them (the colour
/// planes, then alpha, for the RGB layouts).
public struct Frame: Sendable {
    public let width: Int
    public let height: Int
    public let layout: ChromaLayout
    public let planes: [Plane]

    public init(width: Int, height: Int, layout: ChromaLayout) {
        self.width = width
        self.height = height
        self.layout = layout
        planes = (0..<layout.planeCount).map { index in
            let size = layout.planeSize(plane: index, width: width, height: height)
            return Plane(width: size.width, height: size.height)
        }
    }

    public init(width: Int, height: Int, layout: ChromaLayout, planes: [Plane]) {
        precondition(planes.count == layout.planeCount, "plane count does not match layout")
        for (index, plane) in planes.enumerated() {
            let size = layout.planeSize(plane: index, width: width, height: height)
            precondition(plane.width == size.width && plane.height == size.height, "plane \(index) has the wrong size")
        }
        self.width = width
        self.height = height
        self.layout = layout
        self.planes = planes
    }
}
