import CVips
import Foundation
import UpscaleCore

/// Still images through libvips: the only place the project calls libvips.
public enum ImagePlanes {
    private static let started: Bool = upscale_vips_init("upscale") == 0

    static func start() throws {
        guard started else {
            let reason = String(cString: upscale_vips_failure())
            throw ImageError(message: reason.isEmpty ? "libvips failed to start" : "images need libvips: \(reason)")
        }
    }

    /// The damage libjpeg warned of, as libvips keeps it in its error buffer, which is then
    /// cleared: "Corrupt JPEG data: …", a damaged stretch of the picture that libjpeg decodes
    /// as best it can rather than failing. Not "extraneous bytes before marker", which many
    /// cameras write and which costs no pixel.
    static func takeDamage() -> String? {
        let lines = String(cString: upscale_vips_error_buffer()).split(separator: "\n")
        upscale_vips_error_clear()
        return lines.lazy.compactMap { line -> String? in
            guard let range = line.range(of: "Corrupt JPEG data"), !line.contains("extraneous bytes") else { return nil }
            return String(line[range.lowerBound...])
        }.first
    }

    static func failure(_ what: String) -> Error {
        let detail = String(cString: upscale_vips_error_buffer()).split(separator: "\n").first.map(String.init) ?? "unknown error"
        upscale_vips_error_clear()
        return ImageError(message: "\(what): \(detail)")
    }

    public struct ImageError: Error, CustomStringConvertible {
        public let message: String
        public var description: String { message }
        public init(message: String) { self.message = message }
    }

    /// The luma (Rec. 601 weights, as libvips' `b-w` colourspace) of a photo, as an 8-bit plane,
    /// after applying its EXIF orientation.
    public static func loadLuma(_ path: String) throws -> Plane {
        try loadBands(path, space: VIPS_INTERPRETATION_B_W, count: 1)[0]
    }

    /// A photo as planar 8-bit sRGB (`.rgb` frame: R, G, B planes), after applying its EXIF
    /// orientation; alpha, if any, is dropped.
    public static func loadRGB(_ path: String) throws -> Frame {
        let planes = try loadBands(path, space: VIPS_INTERPRETATION_sRGB, count: 3)
        return Frame(width: planes[0].width, height: planes[0].height, layout: .rgb, planes: planes)
    }

    /// The first `count` bands of a photo in colourspace `space`, oriented, as 8-bit planes.
    private static func loadBands(_ path: String, space: VipsInterpretation, count: Int) throws -> [Plane] {
        try start()
        guard let image = upscale_vips_load(path) else { throw failure("cannot load '\(path)'") }
        defer { upscale_vips_unref(image) }
        var rotated: UnsafeMutablePointer<VipsImage>?
        guard upscale_vips_autorot(image, &rotated) == 0, let rotated else { throw failure("cannot orient '\(path)'") }
        defer { upscale_vips_unref(rotated) }
        var converted: UnsafeMutablePointer<VipsImage>?
        guard upscale_vips_colourspace(rotated, &converted, space) == 0, let converted else {
            throw failure("cannot convert the colours of '\(path)'")
        }
        defer { upscale_vips_unref(converted) }
        // Decoded once into memory: the file is opened for one sequential read, and each band
        // would otherwise read it again.
        guard let decoded = upscale_vips_copy_memory(converted) else { throw failure("cannot decode '\(path)'") }
        defer { upscale_vips_unref(decoded) }
        return try (0..<count).map { index in
            var band: UnsafeMutablePointer<VipsImage>?
            guard upscale_vips_extract_band(decoded, &band, Int32(index)) == 0, let band else { throw failure("cannot read '\(path)'") }
            defer { upscale_vips_unref(band) }
            var bytes: UnsafeMutablePointer<VipsImage>?
            guard upscale_vips_cast_uchar(band, &bytes) == 0, let bytes else { throw failure("cannot read '\(path)'") }
            defer { upscale_vips_unref(bytes) }
            return try plane(from: bytes)
        }
    }

    /// Shrinks a plane by an integer `factor` with libvips' box filter (`shrink`): each output
    /// sample is the mean of a factor x factor block, a second degradation for the quality protocol.
    public static func shrinkBox(_ plane: Plane, factor: Int) throws -> Plane {
        try withImage(plane) { image in
            var out: UnsafeMutablePointer<VipsImage>?
            guard upscale_vips_shrink(image, &out, Double(factor)) == 0, let out else { throw failure("shrink failed") }
            defer { upscale_vips_unref(out) }
            return try self.plane(from: out)
        }
    }

    private static func withImage(_ plane: Plane, _ body: (UnsafeMutablePointer<VipsImage>) throws -> Plane) throws -> Plane {
        try start()
        let packed = plane.samples
        return try packed.withUnsafeBytes { raw -> Plane in
            guard let image = upscale_vips_from_memory(raw.baseAddress, raw.count, Int32(plane.width), Int32(plane.height), 1, VIPS_FORMAT_UCHAR) else {
                throw failure("cannot wrap a plane")
            }
            defer { upscale_vips_unref(image) }
            return try body(image)
        }
    }

    /// Resizes a plane with libvips' Lanczos3 `resize` by `scale` (< 1 shrinks, antialiased).
    public static func resizeLanczos3(_ plane: Plane, scale: Double) throws -> Plane {
        try withImage(plane) { image in
            var resized: UnsafeMutablePointer<VipsImage>?
            guard upscale_vips_resize_lanczos3(image, &resized, scale) == 0, let resized else { throw failure("resize failed") }
            defer { upscale_vips_unref(resized) }
            return try self.plane(from: resized)
        }
    }

    static func plane(from image: UnsafeMutablePointer<VipsImage>) throws -> Plane {
        var size = 0
        guard let memory = upscale_vips_to_memory(image, &size) else { throw failure("cannot render image") }
        defer { g_free(memory) }
        let width = Int(upscale_vips_width(image)), height = Int(upscale_vips_height(image))
        guard size == width * height else { throw ImageError(message: "unexpected image layout") }
        let plane = Plane(width: width, height: height)
        plane.copy(from: memory.assumingMemoryBound(to: UInt8.self), sourceStride: width)
        return plane
    }
}
