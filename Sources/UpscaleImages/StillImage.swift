import CVips
import Foundation
import UpscaleCore

/// A photo or graphic decoded by libvips for upscaling: turned upright by its EXIF
/// orientation, colour kept in the file's own space (no conversion; its ICC profile is
/// carried over as it is), gray staying gray, 16-bit staying 16-bit, alpha kept apart.
public final class StillImage {
    /// Extensions taken as stills by the plain command.
    public static let extensions: Set<String> = ["jpg", "jpeg", "png", "webp", "tif", "tiff", "gif", "heic", "heif", "avif", "jxl", "jp2"]
    /// `--format` names and the suffix each writes.
    public static let formats: [String: String] = ["jpg": "jpg", "jpeg": "jpg", "png": "png", "webp": "webp", "tiff": "tif",
                                                    "tif": "tif", "avif": "avif", "heic": "heic", "jxl": "jxl", "gif": "gif"]
    /// Formats whose savers take a quality (`Q`).
    static let lossy: Set<String> = ["jpg", "jpeg", "webp", "heic", "heif", "avif", "jxl"]

    public static func isStill(_ path: String) -> Bool { extensions.contains(URL(fileURLWithPath: path).pathExtension.lowercased()) }

    public let path: String
    public let width: Int
    public let height: Int
    /// 1 (gray) or 3 (RGB) colour bands.
    public let colourBands: Int
    public let hasAlpha: Bool
    public let sixteenBit: Bool
    public let notices: [String]
    private let image: UnsafeMutablePointer<VipsImage>
    private let interpretation: VipsInterpretation

    public init(path: String) throws {
        try ImagePlanes.start()
        self.path = path
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue else {
            throw ImagePlanes.ImageError(message: "'\(path)' does not exist; check the path")
        }
        let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)??.intValue ?? -1
        if size == 0 { throw ImagePlanes.ImageError(message: "'\(path)' is empty (0 bytes); it may still be copying or the copy failed") }
        guard let loaded = upscale_vips_open(path) else {
            let detail = String(cString: vips_error_buffer()).split(separator: "\n").first.map(String.init) ?? "unknown format"
            vips_error_clear()
            throw ImagePlanes.ImageError(message: "'\(path)' is not an image libvips can read (\(detail))")
        }
        defer { upscale_vips_unref(loaded) }
        var notices: [String] = []
        if upscale_vips_pages(loaded) > 1 {
            notices.append("'\(path)' has \(upscale_vips_pages(loaded)) frames; only the first is upscaled")
        }
        var upright: UnsafeMutablePointer<VipsImage>?
        guard upscale_vips_autorot(loaded, &upright) == 0, var current = upright else { throw ImagePlanes.failure("cannot orient '\(path)'") }
        var space = vips_image_get_interpretation(current)
        // CMYK (print JPEGs) becomes sRGB through its embedded profile: upscaled pictures are for screens.
        if space == VIPS_INTERPRETATION_CMYK {
            var rgb: UnsafeMutablePointer<VipsImage>?
            guard upscale_vips_colourspace(current, &rgb, VIPS_INTERPRETATION_sRGB) == 0, let rgb else {
                upscale_vips_unref(current)
                throw ImagePlanes.failure("cannot convert the CMYK image '\(path)' to RGB")
            }
            upscale_vips_unref(current)
            current = rgb
            space = VIPS_INTERPRETATION_sRGB
            notices.append("'\(path)' is CMYK; converted to sRGB with its embedded profile")
        }
        let bands = Int(vips_image_get_bands(current))
        let format = vips_image_get_format(current)
        let gray = space == VIPS_INTERPRETATION_B_W || space == VIPS_INTERPRETATION_GREY16 || bands <= 2
        colourBands = gray ? 1 : 3
        hasAlpha = bands == colourBands + 1
        guard bands == colourBands || hasAlpha else {
            upscale_vips_unref(current)
            throw ImagePlanes.ImageError(message: "'\(path)' has \(bands) bands in \(String(cString: vips_enum_nick(vips_interpretation_get_type(), Int32(space.rawValue)))); only gray and RGB, with or without alpha, can be upscaled")
        }
        sixteenBit = format == VIPS_FORMAT_USHORT || format == VIPS_FORMAT_SHORT || format == VIPS_FORMAT_UINT
            || format == VIPS_FORMAT_INT || format == VIPS_FORMAT_FLOAT || format == VIPS_FORMAT_DOUBLE
        if format != VIPS_FORMAT_UCHAR && format != VIPS_FORMAT_USHORT {
            var cast: UnsafeMutablePointer<VipsImage>?
            guard upscale_vips_cast(current, &cast, sixteenBit ? VIPS_FORMAT_USHORT : VIPS_FORMAT_UCHAR) == 0, let cast else {
                upscale_vips_unref(current)
                throw ImagePlanes.failure("cannot read the samples of '\(path)'")
            }
            upscale_vips_unref(current)
            current = cast
        }
        image = current
        interpretation = space
        width = Int(vips_image_get_width(current))
        height = Int(vips_image_get_height(current))
        self.notices = notices
    }

    deinit { upscale_vips_unref(image) }

    /// The pixels, decoded (a damaged file fails here), as planes: colour, then alpha.
    private func planes() throws -> (colour: [Any], alpha: Any?) {
        var size = 0
        guard let memory = vips_image_write_to_memory(image, &size) else {
            throw ImagePlanes.failure("'\(path)' cannot be decoded; the file may be damaged or truncated")
        }
        defer { g_free(memory) }
        let bands = colourBands + (hasAlpha ? 1 : 0)
        let count = width * height
        if sixteenBit {
            guard size == count * bands * 2 else { throw ImagePlanes.ImageError(message: "'\(path)': unexpected sample layout") }
            let planes = (0..<bands).map { _ in Plane16(width: width, height: height, bitDepth: 16) }
            Interleaving.split(memory.assumingMemoryBound(to: UInt16.self), into: planes)
            return (Array(planes.prefix(colourBands)), hasAlpha ? planes[colourBands] : nil)
        }
        guard size == count * bands else { throw ImagePlanes.ImageError(message: "'\(path)': unexpected sample layout") }
        let planes = (0..<bands).map { _ in Plane(width: width, height: height) }
        Interleaving.split(memory.assumingMemoryBound(to: UInt8.self), into: planes)
        return (Array(planes.prefix(colourBands)), hasAlpha ? planes[colourBands] : nil)
    }

    /// Upscales to `size` with the core: the colour planes (premultiplied by alpha, so
    /// transparent pixels lend no colour to their neighbours) with Lanczos and, where trained,
    /// the edge refinement; alpha with plain Lanczos. Returns the saved result's writer.
    public func upscale(to size: (width: Int, height: Int), kernel: Kernel, refine: Bool, threads: Int) throws -> UpscaledStill {
        let (colour, alpha) = try planes()
        let layout: ChromaLayout = colourBands == 1 ? .gray : .rgb
        let refiner = refine ? EdgeRefiner.trained(input: (width, height), output: size) : nil
        let colourScaler = FrameScaler(input: (width, height), output: size, layout: layout, kernel: kernel, threads: threads, refiner: refiner)
        let alphaScaler = FrameScaler(input: (width, height), output: size, layout: .gray, kernel: kernel, threads: threads)
        if sixteenBit {
            let colour = colour as! [Plane16], alpha = alpha as! Plane16?
            if let alpha { colour.forEach { Premultiply.apply($0, alpha: alpha) } }
            let out = colourScaler.scale(Frame16(width: width, height: height, layout: layout, planes: colour))
            var planes = out.planes
            if let alpha {
                let a = alphaScaler.scale(Frame16(width: width, height: height, layout: .gray, planes: [alpha])).planes[0]
                planes.forEach { Premultiply.undo($0, alpha: a) }
                planes.append(a)
            }
            return UpscaledStill(source: self, width: size.width, height: size.height, planes16: planes, planes8: [], refined: colourScaler.refiner != nil)
        }
        let colour8 = colour as! [Plane], alpha8 = alpha as! Plane?
        if let alpha8 { colour8.forEach { Premultiply.apply($0, alpha: alpha8) } }
        let out = colourScaler.scale(Frame(width: width, height: height, layout: layout, planes: colour8))
        var planes = out.planes
        if let alpha8 {
            let a = alphaScaler.scale(Frame(width: width, height: height, layout: .gray, planes: [alpha8])).planes[0]
            planes.forEach { Premultiply.undo($0, alpha: a) }
            planes.append(a)
        }
        return UpscaledStill(source: self, width: size.width, height: size.height, planes16: [], planes8: planes, refined: colourScaler.refiner != nil)
    }

    /// The metadata blobs carried to the output (unless stripped): ICC profile as it is, EXIF, XMP.
    fileprivate func copyMetadata(to out: UnsafeMutablePointer<VipsImage>) {
        for name in ["icc-profile-data", "exif-data", "xmp-data"] where vips_image_get_typeof(image, name) != 0 {
            var data: UnsafeRawPointer?
            var length = 0
            if vips_image_get_blob(image, name, &data, &length) == 0, let data {
                upscale_vips_set_blob_copy(out, name, data, length)
            }
        }
    }

    fileprivate var outputInterpretation: VipsInterpretation {
        switch (colourBands, sixteenBit) {
        case (1, false): return VIPS_INTERPRETATION_B_W
        case (1, true): return VIPS_INTERPRETATION_GREY16
        case (_, false): return VIPS_INTERPRETATION_sRGB
        default: return VIPS_INTERPRETATION_RGB16
        }
    }

    /// Whether this libvips can write files ending in `.ext`.
    public static func canSave(extension ext: String) -> Bool {
        try? ImagePlanes.start()
        let found = vips_foreign_find_save("x." + ext) != nil
        vips_error_clear()
        return found
    }
}

/// An upscaled picture, ready to be written.
public struct UpscaledStill {
    let source: StillImage
    public let width: Int
    public let height: Int
    let planes16: [Plane16]
    let planes8: [Plane]
    public let refined: Bool

    /// Writes the picture to `path` (its suffix picks the format) with `quality` for lossy
    /// formats; metadata kept unless `strip`.
    public func save(to path: String, quality: Int?, strip: Bool) throws {
        let bands = planes8.isEmpty ? planes16.count : planes8.count
        let sixteen = !planes16.isEmpty
        let bytes = width * height * bands * (sixteen ? 2 : 1)
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: bytes, alignment: 16)
        defer { buffer.deallocate() }
        if sixteen {
            Interleaving.join(planes16, into: buffer.assumingMemoryBound(to: UInt16.self))
        } else {
            Interleaving.join(planes8, into: buffer.assumingMemoryBound(to: UInt8.self))
        }
        guard let raw = vips_image_new_from_memory(buffer, bytes, Int32(width), Int32(height), Int32(bands),
                                                   sixteen ? VIPS_FORMAT_USHORT : VIPS_FORMAT_UCHAR) else {
            throw ImagePlanes.failure("cannot prepare '\(path)'")
        }
        defer { upscale_vips_unref(raw) }
        var tagged: UnsafeMutablePointer<VipsImage>?
        guard upscale_vips_copy_as(raw, &tagged, source.outputInterpretation) == 0, let tagged else { throw ImagePlanes.failure("cannot prepare '\(path)'") }
        defer { upscale_vips_unref(tagged) }
        if !strip {
            source.copyMetadata(to: tagged)
            // The pixels are upright now: the EXIF block the saver writes says so.
            vips_image_set_int(tagged, "orientation", 1)
        }
        let ext = URL(fileURLWithPath: path).pathExtension.lowercased()
        var options: [String] = []
        if StillImage.lossy.contains(ext) { options.append("Q=\(quality ?? 90)") }
        if strip { options.append("strip") }
        let target = options.isEmpty ? path : path + "[" + options.joined(separator: ",") + "]"
        if upscale_vips_write(tagged, target) != 0 {
            let failure = ImagePlanes.failure("writing '\(path)' failed")
            unlink(path)
            if errno == ENOSPC { throw ImagePlanes.ImageError(message: "the disk is full: writing '\(path)' failed; free some space or choose another --output folder") }
            throw failure
        }
    }
}

/// Planes of one sample type, 8- or 16-bit.
protocol SamplePlane {
    associatedtype Sample: FixedWidthInteger & UnsignedInteger
    var width: Int { get }
    var height: Int { get }
    func row(_ y: Int) -> UnsafeMutablePointer<Sample>
}

extension Plane: SamplePlane {}
extension Plane16: SamplePlane {}

/// libvips hands over and takes pixels interleaved (RGBARGBA…); the core works on planes.
enum Interleaving {
    static func split<P: SamplePlane>(_ samples: UnsafePointer<P.Sample>, into planes: [P]) {
        guard let first = planes.first else { return }
        let bands = planes.count, width = first.width
        for y in 0..<first.height {
            let row = samples + y * width * bands
            for (b, plane) in planes.enumerated() {
                let out = plane.row(y)
                for x in 0..<width { out[x] = row[x * bands + b] }
            }
        }
    }

    static func join<P: SamplePlane>(_ planes: [P], into samples: UnsafeMutablePointer<P.Sample>) {
        guard let first = planes.first else { return }
        let bands = planes.count, width = first.width
        for y in 0..<first.height {
            let row = samples + y * width * bands
            for (b, plane) in planes.enumerated() {
                let src = plane.row(y)
                for x in 0..<width { row[x * bands + b] = src[x] }
            }
        }
    }
}

/// Colour times alpha before scaling and divided by it after, so a transparent neighbour's
/// (meaningless) colour never bleeds into an edge as a dark or light fringe.
enum Premultiply {
    static func apply<P: SamplePlane>(_ plane: P, alpha: P) {
        let full = Int(P.Sample.max)
        for y in 0..<plane.height {
            let c = plane.row(y), a = alpha.row(y)
            for x in 0..<plane.width { c[x] = P.Sample((Int(c[x]) * Int(a[x]) + full / 2) / full) }
        }
    }

    static func undo<P: SamplePlane>(_ plane: P, alpha: P) {
        let full = Int(P.Sample.max)
        for y in 0..<plane.height {
            let c = plane.row(y), a = alpha.row(y)
            for x in 0..<plane.width {
                let alpha = Int(a[x])
                c[x] = alpha == 0 ? 0 : P.Sample(min(full, (Int(c[x]) * full + alpha / 2) / alpha))
            }
        }
    }
}

/// Output sizes for stills: as for video (one side keeps the aspect ratio, no size means 2x),
/// but exact rather than even (no chroma subsampling), 1…16384 per side: the core holds the
/// whole picture in memory (a 16384x16384 RGB output is 800 MB), and WebP stops at 16383.
public enum StillSize {
    public static let maximum = 16384

    public static func resolve(width: Int, height: Int, to size: (width: Int?, height: Int?), scale: Double?, path: String) throws
        -> (width: Int, height: Int)
    {
        let w: Int, h: Int
        switch (size.width, size.height) {
        case let (sw?, sh?): (w, h) = (sw, sh)
        case let (sw?, nil): (w, h) = (sw, max(1, Int((Double(sw) * Double(height) / Double(width)).rounded())))
        case let (nil, sh?): (w, h) = (max(1, Int((Double(sh) * Double(width) / Double(height)).rounded())), sh)
        case (nil, nil):
            let f = scale ?? 2
            (w, h) = (max(1, Int((Double(width) * f).rounded())), max(1, Int((Double(height) * f).rounded())))
        }
        guard w <= maximum && h <= maximum else {
            throw ImagePlanes.ImageError(message: "'\(path)' is \(width)x\(height); \(w)x\(h) is over the \(maximum)-pixel limit per side for stills; ask for a smaller --width or --scale")
        }
        return (w, h)
    }
}
