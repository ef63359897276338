import CVips
import Foundation
import UpscaleCore

/// A photo or graphic decoded by libvips for upscaling: turned upright by its EXIF
/// orientation, colour kept in the file's own space (no conversion; its ICC profile is
/// carried over as it is), gray staying gray, 16-bit staying 16-bit, alpha kept apart.
public final class StillImage {
    /// Extensions taken as stills by the plain command.
    /// (.jfif and .jpe are JPEG; BMP and TGA go through libvips' ImageMagick loader and saver,
    /// and a libvips without them saves PNG. They were taken as video and became a one-frame
    /// HEVC .mov.)
    /// (Netpbm's .ppm/.pgm/.pnm/.pfm and JPEG 2000's .j2k/.jpx became a HEVC .mov the same way.)
    public static let extensions: Set<String> = ["jpg", "jpeg", "jfif", "jpe", "png", "webp", "tif", "tiff", "gif", "heic", "heif",
                                                 "avif", "jxl", "jp2", "j2k", "jpx", "bmp", "tga", "ppm", "pgm", "pnm", "pfm", "pbm",
                                                 // Drawn at their own size (SVG) or read through ImageMagick (icons,
                                                 // Photoshop, PCX): they became one-frame HEVC movies.
                                                 "svg", "svgz", "ico", "cur", "psd", "pcx",
                                                 // FITS (astronomy): read by libvips; it went down the video path
                                                 // ("has no video stream (audio only?)"). Radiance HDR (.hdr) is
                                                 // known by its first bytes (`looksLikeStill`): Analyze and ENVI
                                                 // headers end in .hdr too, beside their data files.
                                                 "fits", "fit", "fts"]
    /// `--format` names (and output name suffixes) and the suffix each writes.
    public static let formats: [String: String] = ["jpg": "jpg", "jpeg": "jpg", "jfif": "jpg", "jpe": "jpg", "png": "png", "webp": "webp",
                                                    "tiff": "tif", "tif": "tif", "avif": "avif", "heic": "heic", "heif": "heic",
                                                    "jxl": "jxl", "gif": "gif"]
    /// Formats whose savers take a quality (`Q`).
    static let lossy: Set<String> = ["jpg", "jpeg", "webp", "heic", "heif", "avif", "jxl", "jp2", "j2k", "jpx"]

    /// Whether files ending in `.ext` are saved at a quality (`--quality`).
    public static func takesQuality(extension ext: String) -> Bool { lossy.contains(ext.lowercased()) }

    /// Camera raw files: most are TIFF inside, and read as one they give their small preview.
    public static let rawExtensions: Set<String> = ["dng", "nef", "nrw", "cr2", "cr3", "crw", "arw", "srf", "sr2", "orf", "rw2", "raf",
                                                    "pef", "srw", "3fr", "erf", "kdc", "dcr", "mos", "mrw", "iiq", "x3f"]

    public static func isCameraRaw(_ path: String) -> Bool { rawExtensions.contains(URL(fileURLWithPath: path).pathExtension.lowercased()) }

    /// A still by its extension, or, for a file on disk whose extension is none of those, by
    /// its first bytes (a photo saved without an extension, or as "IMG_1.JPG_original", was
    /// upscaled into a one-frame HEVC .mov).
    public static func isStill(_ path: String) -> Bool {
        extensions.contains(URL(fileURLWithPath: path).pathExtension.lowercased()) || looksLikeStill(path)
    }

    /// JPEG, PNG, GIF, WebP, TIFF, JPEG XL, JPEG 2000, or HEIF/AVIF (an ISO file whose brand is
    /// an image one), by the file's first 16 bytes. Only regular files are read: a pipe's
    /// bytes would be gone for the job.
    static func looksLikeStill(_ path: String) -> Bool {
        // A raw Motion JPEG stream (webcams, IP cameras) starts as a JPEG does: it is video.
        let ext = URL(fileURLWithPath: path).pathExtension.lowercased()
        guard !rawExtensions.contains(ext), !["mjpeg", "mjpg"].contains(ext) else { return false }
        var info = stat()
        guard !path.hasPrefix("/dev/"), !path.hasPrefix("/proc/"), stat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return false }
        return sniffedExtension(path) != nil
    }

    /// The format a still's content names where its extension names none (none at all, or a
    /// backup suffix such as `IMG_1.JPG_original`): its output is named and saved by it.
    public static func contentExtension(_ path: String) -> String? {
        let ext = URL(fileURLWithPath: path).pathExtension.lowercased()
        // (A Radiance picture is known by its bytes, its .hdr then naming it.)
        guard !extensions.contains(ext), let sniffed = sniffedExtension(path), sniffed != ext else { return nil }
        return sniffed
    }

    /// The still format `path`'s first bytes say it is in, as its usual extension; nil for none
    /// known. Names the output of a file whose own extension says nothing (a JPEG named
    /// `IMG_1.JPG_original` or with none came out as a PNG 25 times its size).
    public static func sniffedExtension(_ path: String) -> String? {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        let head = [UInt8]((try? handle.read(upToCount: 64)) ?? Data())
        func starts(_ bytes: [UInt8], at offset: Int = 0) -> Bool {
            head.count >= offset + bytes.count && Array(head[offset..<offset + bytes.count]) == bytes
        }
        let ascii = { (text: String) in [UInt8](text.utf8) }
        if starts([0xFF, 0xD8, 0xFF]) { return "jpg" }
        if starts([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return "png" }
        if starts(ascii("GIF8")) { return "gif" }
        if starts(ascii("RIFF")) && starts(ascii("WEBP"), at: 8) { return "webp" }
        if starts([0x49, 0x49, 0x2A, 0x00]) || starts([0x4D, 0x4D, 0x00, 0x2A]) { return "tif" }
        if starts([0xFF, 0x0A]) || starts([0, 0, 0, 0x0C, 0x4A, 0x58, 0x4C, 0x20]) { return "jxl" }
        if starts([0, 0, 0, 0x0C, 0x6A, 0x50, 0x20, 0x20]) || starts([0xFF, 0x4F, 0xFF, 0x51]) { return "jp2" }
        if starts(ascii("ftyp"), at: 4) {
            // The major brand, then the compatible ones (an AVIF may name "mif1" first).
            let size = min(head.count, head[0..<4].reduce(0) { $0 << 8 | Int($1) })
            let brands = [8] + Array(stride(from: 16, to: size - 3, by: 4))
            if brands.contains(where: { starts(ascii("avif"), at: $0) || starts(ascii("avis"), at: $0) }) { return "avif" }
            if ["heic", "heix", "mif1"].contains(where: { starts(ascii($0), at: 8) }) { return "heic" }
        }
        if starts(ascii("#?RADIANCE")) || starts(ascii("#?RGBE")) { return "hdr" }
        if starts(ascii("SIMPLE  =")) { return "fits" }
        return nil
    }

    /// Whether `path` is a lossless WebP: its picture is a VP8L chunk (after a VP8X header and
    /// any ICC profile or other chunks in the extended form); a lossy one has a "VP8 " chunk.
    static func isLosslessWebP(_ path: String) -> Bool {
        guard let file = FileHandle(forReadingAtPath: path) else { return false }
        defer { try? file.close() }
        guard let head = try? file.read(upToCount: 12), head.count == 12,
              head.prefix(4) == Data("RIFF".utf8), head.suffix(4) == Data("WEBP".utf8) else { return false }
        var offset: UInt64 = 12
        for _ in 0..<64 {
            guard (try? file.seek(toOffset: offset)) != nil, let chunk = try? file.read(upToCount: 8), chunk.count == 8 else { return false }
            switch String(decoding: chunk.prefix(4), as: UTF8.self) {
            case "VP8L": return true
            case "VP8 ", "ANMF": return false
            default:
                let size = chunk.suffix(4).reversed().reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
                offset += 8 + size + size % 2
            }
        }
        return false
    }

    /// Whether `path` is a lossless JPEG XL: its image header says the samples are coded as
    /// they are (`xyb_encoded` false, as `cjxl -d 0` and libvips' `lossless` write), and it
    /// holds no JPEG to rebuild (a `jbrd` box: a recompressed JPEG, lossy by origin).
    public static func isLosslessJXL(_ path: String) -> Bool {
        guard let handle = FileHandle(forReadingAtPath: path) else { return false }
        defer { try? handle.close() }
        // The image header lies within a codestream's first kilobytes.
        let headerBytes = 1 << 14
        guard let head = try? handle.read(upToCount: headerBytes) else { return false }
        let bytes = [UInt8](head)
        if bytes.starts(with: [0xFF, 0x0A]) { return JXLHeader.xybEncoded(Array(bytes.dropFirst(2))) == false }
        // The container: boxes of size (32 bits, big-endian; 1: 64 bits follow; 0: to the end),
        // type, data; stepped through in the file (metadata boxes before the codestream can be
        // large: a 70 KB XMP).
        guard bytes.starts(with: [0, 0, 0, 0x0C, 0x4A, 0x58, 0x4C, 0x20]) else { return false }
        var offset: UInt64 = 0
        var codestream: [UInt8]?
        for _ in 0..<1000 {
            guard (try? handle.seek(toOffset: offset)) != nil, let top = try? handle.read(upToCount: 16), top.count >= 8 else { break }
            let box = [UInt8](top)
            var size = box[0..<4].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            let type = String(decoding: box[4..<8], as: UTF8.self)
            var header: UInt64 = 8
            if size == 1 {
                guard box.count == 16 else { return false }
                size = box[8..<16].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
                header = 16
            }
            switch type {
            case "jbrd": return false
            case "jxlc", "jxlp":
                guard codestream == nil else { break }
                let start = offset + header + (type == "jxlp" ? 4 : 0)
                guard (try? handle.seek(toOffset: start)) != nil, let data = try? handle.read(upToCount: headerBytes) else { return false }
                codestream = [UInt8](data)
            default: break
            }
            guard size >= header || size == 0 else { return false }
            if size == 0 { break }
            offset += size
        }
        guard let codestream, codestream.starts(with: [0xFF, 0x0A]) else { return false }
        return JXLHeader.xybEncoded(Array(codestream.dropFirst(2))) == false
    }

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
    /// Whether the EXIF orientation turned the picture (its XMP orientation is then made upright too).
    private let turned: Bool

    public init(path: String) throws {
        try ImagePlanes.start()
        self.path = path
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw ImagePlanes.ImageError(message: "'\(path)' does not exist; check the path")
        }
        if isDirectory.boolValue {
            throw ImagePlanes.ImageError(message: "'\(path)' is a folder; give an image file (or use 'upscale watch' for folders)")
        }
        let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)??.intValue ?? -1
        if size == 0 { throw ImagePlanes.ImageError(message: "'\(path)' is empty (0 bytes); it may still be copying or the copy failed") }
        guard var loaded = upscale_vips_open(path) else {
            let detail = String(cString: upscale_vips_error_buffer()).split(separator: "\n").first.map(String.init) ?? "unknown format"
            upscale_vips_error_clear()
            throw ImagePlanes.ImageError(message: "'\(path)' is not an image libvips can read (\(detail))")
        }
        defer { upscale_vips_unref(loaded) }
        var notices: [String] = []
        // JPEG 2000's "pages" are its resolution levels (page 1 is the half-size picture): one picture.
        let levels = ["jp2", "j2k", "jpx"].contains(URL(fileURLWithPath: path).pathExtension.lowercased())
        let frames = levels ? 1 : max(Int(upscale_vips_pages(loaded)), StillImage.animatedPNGFrames(path) ?? 1)
        if frames > 1 && StillImage.isICO(path) {
            // An icon holds one picture at several sizes, the smallest usually first: the
            // largest is upscaled (the 16x16 one was, with a 64x64 in the file).
            for page in 1..<frames {
                guard var other = upscale_vips_open_page(path, Int32(page)) else { continue }
                if Int(upscale_vips_width(other)) * Int(upscale_vips_height(other)) > Int(upscale_vips_width(loaded)) * Int(upscale_vips_height(loaded)) {
                    swap(&loaded, &other)
                }
                upscale_vips_unref(other)
            }
            notices.append("'\(path)' holds the icon at \(frames) sizes; the largest (\(upscale_vips_width(loaded))x\(upscale_vips_height(loaded))) is upscaled")
        } else if frames > 1 {
            notices.append("'\(path)' has \(frames) frames; only the first is upscaled")
        }
        var upright: UnsafeMutablePointer<VipsImage>?
        turned = (2...8).contains(upscale_vips_orientation(loaded))
        guard upscale_vips_autorot(loaded, &upright) == 0, var current = upright else { throw ImagePlanes.failure("cannot orient '\(path)'") }
        // Radiance HDR's samples are packed (RGBE, four bytes a pixel): unpacked to Float
        // scRGB, as they would otherwise have been read as RGBA bytes.
        if upscale_vips_coded(current) != 0 {
            var unpacked: UnsafeMutablePointer<VipsImage>?
            let failed = upscale_vips_decode(current, &unpacked) != 0
            upscale_vips_unref(current)
            guard !failed, let unpacked else { throw ImagePlanes.failure("cannot unpack the samples of '\(path)'") }
            current = unpacked
        }
        // HEIF/AVIF colour given as an nclx box, which libvips does not read: Display P3 gets
        // its ICC profile (kept, or turned to sRGB where the output keeps none, as for a P3
        // JPEG); what cannot be described so is named.
        if upscale_vips_has(current, "icc-profile-data") == 0, let colour = HEIFColour.of(path) {
            switch colour.reading {
            case .asSRGB: break
            case .displayP3:
                if let profile = StillImage.builtInProfile("p3") {
                    profile.withUnsafeBytes { upscale_vips_set_blob_copy(current, "icc-profile-data", $0.baseAddress, $0.count) }
                }
            case .unread(let what):
                notices.append("'\(path)' gives its colour as \(what) (an nclx box), which this libvips cannot read: the output keeps the samples as they are, untagged, and shows them as sRGB (colours off)")
            }
        }
        var space = upscale_vips_interpretation(current)
        /// `current` converted to `target` by libvips (the old one released either way).
        func convert(to target: VipsInterpretation) throws {
            var converted: UnsafeMutablePointer<VipsImage>?
            let failed = upscale_vips_colourspace(current, &converted, target) != 0
            upscale_vips_unref(current)
            guard !failed, let converted else {
                throw ImagePlanes.failure("cannot convert '\(path)' (\(String(cString: upscale_vips_interpretation_name(space)))) to RGB")
            }
            current = converted
            space = target
        }
        // CMYK (print JPEGs) becomes sRGB through its embedded profile: upscaled pictures are for screens.
        if space == VIPS_INTERPRETATION_CMYK {
            let own = upscale_vips_has(current, "icc-profile-data") != 0
            try convert(to: VIPS_INTERPRETATION_sRGB)
            notices.append(own ? "'\(path)' is CMYK; converted to sRGB with its embedded profile"
                               : "'\(path)' is CMYK without a profile of its own; converted to sRGB with a generic CMYK profile (colours may be off)")
        }
        // Other colour spaces (Lab, XYZ, linear scRGB…) and floating-point samples become 16-bit
        // sRGB or gray, as libvips converts them; they were cast sample by sample (float 0…1 to
        // 0 or 1: black; Lab as if RGB).
        let floating = [VIPS_FORMAT_FLOAT, VIPS_FORMAT_DOUBLE, VIPS_FORMAT_COMPLEX, VIPS_FORMAT_DPCOMPLEX].contains(upscale_vips_format(current))
        let plain = [VIPS_INTERPRETATION_sRGB, VIPS_INTERPRETATION_RGB16, VIPS_INTERPRETATION_B_W, VIPS_INTERPRETATION_GREY16]
        // libvips takes gray and sRGB floats as 0…255; most programs that write them (GIMP,
        // ImageMagick, scientific tools) mean 0…1, which came out black. A picture whose
        // brightest sample is at most 1 is taken as 0…1, and a PFM always is (its format's
        // white is 1; an HDR render's highlights above it made the whole picture black).
        var unitRange = false
        var clipped = false
        // Floats past 255 (a FITS of photon counts, a scientific export) are measured, not a
        // picture's levels: scaled so that the brightest sample is white (they came out white).
        var measuredTop: Double?
        if floating && (space == VIPS_INTERPRETATION_B_W || space == VIPS_INTERPRETATION_sRGB) {
            var largest = 0.0
            var stretched: UnsafeMutablePointer<VipsImage>?
            if upscale_vips_max(current, &largest) == 0, largest <= 1 || StillImage.isPFM(path),
               upscale_vips_scale_cast(current, &stretched, 255, VIPS_FORMAT_FLOAT) == 0, let stretched {
                upscale_vips_unref(current)
                current = stretched
                unitRange = true
                clipped = largest > 1
            } else if largest > 255, upscale_vips_scale_cast(current, &stretched, 255 / largest, VIPS_FORMAT_FLOAT) == 0, let stretched {
                upscale_vips_unref(current)
                current = stretched
                measuredTop = largest
            }
        }
        // Linear light in floating point (a Radiance HDR picture, an OpenEXR-like render):
        // white is 1, and what is brighter cannot be held by 16-bit sRGB.
        if floating && space == VIPS_INTERPRETATION_scRGB {
            var largest = 0.0
            if upscale_vips_max(current, &largest) == 0 { clipped = largest > 1 }
        }
        if !plain.contains(space) && space != VIPS_INTERPRETATION_MULTIBAND || floating && plain.contains(space) {
            let grayTarget = space == VIPS_INTERPRETATION_B_W || space == VIPS_INTERPRETATION_GREY16 || upscale_vips_bands(current) <= 2
            notices.append("'\(path)' is \(String(cString: upscale_vips_interpretation_name(space)))\(floating ? " in floating point" : "")\(unitRange ? " (samples of 0 to 1)" : "")\(measuredTop.map { " (samples up to \(String(format: "%g", $0)), scaled so that the brightest is white)" } ?? ""); converted to 16-bit \(grayTarget ? "gray" : "sRGB")"
                + (clipped ? "; samples above 1 (brighter than white) are clipped" : ""))
            try convert(to: grayTarget ? VIPS_INTERPRETATION_GREY16 : VIPS_INTERPRETATION_RGB16)
        }
        let bands = Int(upscale_vips_bands(current))
        let format = upscale_vips_format(current)
        let gray = space == VIPS_INTERPRETATION_B_W || space == VIPS_INTERPRETATION_GREY16 || bands <= 2
        colourBands = gray ? 1 : 3
        hasAlpha = bands == colourBands + 1
        guard bands == colourBands || hasAlpha else {
            upscale_vips_unref(current)
            throw ImagePlanes.ImageError(message: "'\(path)' has \(bands) bands in \(String(cString: upscale_vips_interpretation_name(space))); only gray and RGB, with or without alpha, can be upscaled")
        }
        sixteenBit = format == VIPS_FORMAT_USHORT || format == VIPS_FORMAT_SHORT || format == VIPS_FORMAT_UINT
            || format == VIPS_FORMAT_INT || format == VIPS_FORMAT_FLOAT || format == VIPS_FORMAT_DOUBLE
        if format != VIPS_FORMAT_UCHAR && format != VIPS_FORMAT_USHORT {
            var cast: UnsafeMutablePointer<VipsImage>?
            // Unsigned 32-bit integers keep their top 16 bits (a plain cast clipped them to
            // white). Signed samples are stretched so that their largest positive value is
            // white (cast or shifted, they came out at half level); negatives are black.
            let target = sixteenBit ? VIPS_FORMAT_USHORT : VIPS_FORMAT_UCHAR
            let signedTop: Double? = format == VIPS_FORMAT_CHAR ? 127 : format == VIPS_FORMAT_SHORT ? 32767 : format == VIPS_FORMAT_INT ? 2147483647 : nil
            let status = if let signedTop {
                upscale_vips_scale_cast(current, &cast, (sixteenBit ? 65535 : 255) / signedTop, target)
            } else if format == VIPS_FORMAT_UINT {
                upscale_vips_cast_shift(current, &cast, target)
            } else {
                upscale_vips_cast(current, &cast, target)
            }
            guard status == 0, let cast else {
                upscale_vips_unref(current)
                throw ImagePlanes.failure("cannot read the samples of '\(path)'")
            }
            upscale_vips_unref(current)
            current = cast
        }
        image = current
        interpretation = space
        width = Int(upscale_vips_width(current))
        height = Int(upscale_vips_height(current))
        self.notices = notices
    }

    deinit { upscale_vips_unref(image) }

    /// What the decoder warned of while decoding, when it decoded a damaged stretch as best it
    /// could rather than failing (libjpeg's "Corrupt JPEG data: …"); set by `upscale`.
    public private(set) var damage: String?

    /// The pixels, decoded (a damaged file fails here), as planes: colour, then alpha.
    private func planes() throws -> (colour: [Any], alpha: Any?) {
        var size = 0
        _ = ImagePlanes.takeDamage()
        guard let memory = upscale_vips_to_memory(image, &size) else {
            throw ImagePlanes.failure("'\(path)' cannot be decoded; the file may be damaged or truncated")
        }
        damage = ImagePlanes.takeDamage()
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

    /// Upscales to `size` with the core and saves to `path` (its suffix picks the format):
    /// the colour planes premultiplied by alpha (transparent pixels lend no colour to their
    /// neighbours) and alpha, each with Lanczos and, where trained, the edge refinement. The
    /// output is made in strips of about `stripBytes` (whole bands of the core), appended to a
    /// raw file beside `path` that libvips maps and saves from, so only the input and one strip
    /// are ever in memory. Returns whether the refinement ran, or nil when
    /// `cancelled` said so between strips (nothing is saved then).
    public func upscale(to size: (width: Int, height: Int), kernel: Kernel, refine: Bool, threads: Int,
                        saveTo path: String, quality: Int?, strip: Bool, stripBytes: Int = 64 << 20,
                        cancelled: () -> Bool = { false }) throws -> Bool? {
        let (colour, alpha) = try planes()
        let layout: ChromaLayout = colourBands == 1 ? .gray : .rgb
        let refiner = refine ? EdgeRefiner.trained(input: (width, height), output: size) : nil
        let colourScaler = FrameScaler(input: (width, height), output: size, layout: layout, kernel: kernel, threads: threads, refiner: refiner)
        // Alpha gets the colour's refinement: premultiplied colour divided by an alpha scaled
        // otherwise came out darker at every soft edge (a red disc's rim nearly black, a grey
        // outline around a white logo). For a single colour the two planes are the same shape,
        // refined alike, and the division gives the colour back.
        let alphaScaler = FrameScaler(input: (width, height), output: size, layout: .gray, kernel: kernel, threads: threads, refiner: refiner)
        precondition((0..<colourScaler.bandCount).allSatisfy { colourScaler.rows(band: $0) == alphaScaler.rows(band: $0) },
                     "colour and alpha bands differ")
        let bands = colourBands + (hasAlpha ? 1 : 0)
        let raw = StillImage.stripFile(for: path)
        defer { unlink(raw) }
        guard let file = fopen(raw, "wb") else {
            // The strip file is ours; the folder is what the user can change. (The reason is read
            // first: finding the folder's name reset errno, and "permission denied" read "no such file".)
            let reason = String(cString: strerror(errno))
            let folder = URL(fileURLWithPath: path).deletingLastPathComponent().path
            throw ImagePlanes.ImageError(message: "cannot write in '\(folder)': \(reason); pick another --output folder")
        }
        var closed = false
        defer { if !closed { fclose(file) } }
        let rowBytes = rowBytes(width: size.width)
        let stripRows = max(1, stripBytes / max(1, rowBytes))
        var groups: [Range<Int>] = []
        var first = 0
        while first < colourScaler.bandCount {
            var end = first + 1
            while end < colourScaler.bandCount,
                  colourScaler.rows(band: end).upperBound - colourScaler.rows(band: first).lowerBound <= stripRows { end += 1 }
            groups.append(first..<end)
            first = end
        }
        let tallest = groups.map { colourScaler.rows(band: $0.upperBound - 1).upperBound - colourScaler.rows(band: $0.lowerBound).lowerBound }.max() ?? 1
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: tallest * rowBytes, alignment: 64)
        defer { buffer.deallocate() }
        func emit(rows: Int) throws {
            if fwrite(buffer, rowBytes, rows, file) != rows {
                let reason = errno == ENOSPC ? "the disk is full" : String(cString: strerror(errno))
                throw ImagePlanes.ImageError(message: "writing '\(path)' failed: \(reason); free some space or choose another --output folder")
            }
        }
        if sixteenBit {
            let colour = colour as! [Plane16], alpha = alpha as! Plane16?
            if let alpha { colour.forEach { Premultiply.apply($0, alpha: alpha) } }
            let stripPlanes = (0..<bands).map { _ in Plane16(width: size.width, height: tallest, bitDepth: 16) }
            for group in groups {
                if cancelled() { return nil }
                let top = colourScaler.rows(band: group.lowerBound).lowerBound
                let rows = colourScaler.rows(band: group.upperBound - 1).upperBound - top
                let views = stripPlanes.map { Plane16(viewing: $0.base - top * $0.stride, width: size.width, height: size.height, bitDepth: 16, stride: $0.stride) }
                colourScaler.scale(Frame16(width: width, height: height, layout: layout, planes: colour), bands: group,
                                   into: Frame16(width: size.width, height: size.height, layout: layout, planes: Array(views.prefix(colourBands))))
                if let alpha {
                    alphaScaler.scale(Frame16(width: width, height: height, layout: .gray, planes: [alpha]), bands: group,
                                      into: Frame16(width: size.width, height: size.height, layout: .gray, planes: [views[colourBands]]))
                    stripPlanes.prefix(colourBands).forEach { Premultiply.undo($0, alpha: stripPlanes[colourBands], rows: rows) }
                }
                Interleaving.join(stripPlanes, rows: rows, into: buffer.assumingMemoryBound(to: UInt16.self))
                try emit(rows: rows)
            }
        } else {
            let colour = colour as! [Plane], alpha = alpha as! Plane?
            if let alpha { colour.forEach { Premultiply.apply($0, alpha: alpha) } }
            let stripPlanes = (0..<bands).map { _ in Plane(width: size.width, height: tallest) }
            for group in groups {
                if cancelled() { return nil }
                let top = colourScaler.rows(band: group.lowerBound).lowerBound
                let rows = colourScaler.rows(band: group.upperBound - 1).upperBound - top
                let views = stripPlanes.map { Plane(viewing: $0.base - top * $0.stride, width: size.width, height: size.height, stride: $0.stride) }
                colourScaler.scale(Frame(width: width, height: height, layout: layout, planes: colour), bands: group,
                                   into: Frame(width: size.width, height: size.height, layout: layout, planes: Array(views.prefix(colourBands))))
                if let alpha {
                    alphaScaler.scale(Frame(width: width, height: height, layout: .gray, planes: [alpha]), bands: group,
                                      into: Frame(width: size.width, height: size.height, layout: .gray, planes: [views[colourBands]]))
                    stripPlanes.prefix(colourBands).forEach { Premultiply.undo($0, alpha: stripPlanes[colourBands], rows: rows) }
                }
                Interleaving.join(stripPlanes, rows: rows, into: buffer.assumingMemoryBound(to: UInt8.self))
                try emit(rows: rows)
            }
        }
        closed = true
        guard fclose(file) == 0 else { throw ImagePlanes.ImageError(message: "writing '\(path)' failed: \(String(cString: strerror(errno)))") }
        if cancelled() { return nil }
        try save(raw: raw, size: size, bands: bands, to: path, quality: quality, strip: strip)
        return colourScaler.refiner != nil
    }

    private func save(raw: String, size: (width: Int, height: Int), bands: Int, to path: String, quality: Int?, strip: Bool) throws {
        guard let mapped = upscale_vips_rawload(raw, Int32(size.width), Int32(size.height), Int32(bands),
                                                sixteenBit ? VIPS_FORMAT_USHORT : VIPS_FORMAT_UCHAR) else {
            throw ImagePlanes.failure("cannot prepare '\(path)'")
        }
        defer { upscale_vips_unref(mapped) }
        var copy: UnsafeMutablePointer<VipsImage>?
        guard upscale_vips_copy_as(mapped, &copy, outputInterpretation) == 0, var tagged = copy else { throw ImagePlanes.failure("cannot prepare '\(path)'") }
        defer { upscale_vips_unref(tagged) }
        let ext = URL(fileURLWithPath: path).pathExtension.lowercased()
        if ext == "pfm" {
            // A PFM holds floats whose white is 1: the 16-bit samples were written as they are
            // (0…65535), 65535 times too bright for every reader.
            // (Tagged sRGB or B_W: libvips' saver converts 16-bit-tagged floats first.)
            var unit: UnsafeMutablePointer<VipsImage>?, floats: UnsafeMutablePointer<VipsImage>?
            guard upscale_vips_scale_cast(tagged, &unit, 1 / (sixteenBit ? 65535 : 255), VIPS_FORMAT_FLOAT) == 0, let unit else {
                throw ImagePlanes.failure("cannot prepare '\(path)'")
            }
            defer { upscale_vips_unref(unit) }
            guard upscale_vips_copy_as(unit, &floats, colourBands == 3 ? VIPS_INTERPRETATION_sRGB : VIPS_INTERPRETATION_B_W) == 0, let floats else {
                throw ImagePlanes.failure("cannot prepare '\(path)'")
            }
            upscale_vips_unref(tagged)
            tagged = floats
        }
        // The print resolution stays the input's (a PNG's or TIFF's became libvips' 25.4 dpi).
        tagged.pointee.Xres = image.pointee.Xres
        tagged.pointee.Yres = image.pointee.Yres
        var converted = false
        // (A gray picture is converted by a gray profile only: one carrying an RGB profile, which
        // lcms cannot apply to it, is left as it was.)
        if let profile = blob("icc-profile-data"), strip || !StillImage.keepsProfile(extension: ext),
           colourBands == 3 || StillImage.profileSpace(profile) == "GRAY", !StillImage.isSRGB(profile, bands: colourBands) {
            // A profile that will not be written (--strip, GIF) and is not sRGB's: the pixels are
            // turned to sRGB by it first, or their colours shift (Display P3's blue by +8; a gray
            // photo in Photoshop's "Dot Gain 20%" or gamma 1.8 darkened by ~16 levels in its
            // mid-tones).
            profile.withUnsafeBytes { upscale_vips_set_blob_copy(tagged, "icc-profile-data", $0.baseAddress, $0.count) }
            var srgb: UnsafeMutablePointer<VipsImage>?
            guard upscale_vips_to_srgb(tagged, &srgb, sixteenBit ? 16 : 8) == 0, var srgb else {
                throw ImagePlanes.failure("cannot convert '\(self.path)' to sRGB")
            }
            if colourBands == 1 {
                // Gray stays gray: a neutral gray comes out with three equal bands; one (and the
                // alpha, where there is one) is kept.
                do { srgb = try StillImage.grayBand(of: srgb, alpha: hasAlpha, as: outputInterpretation) } catch {
                    throw ImagePlanes.failure("cannot convert '\(self.path)' to sRGB")
                }
            }
            upscale_vips_unref(tagged)
            tagged = srgb
            converted = true
        }
        if !strip {
            copyMetadata(to: tagged, profile: !converted, extension: ext)
            // The pixels are upright now: the EXIF block the saver writes says so.
            upscale_vips_set_int(tagged, "orientation", 1)
        }
        var options: [String] = []
        // libvips maps JPEG XL's Q under 5 to a distance libjxl refuses (over 25), which it then
        // ignored, saving at its default quality with a stray line from libjxl: 5 is its lowest.
        if ext == "webp" && quality == nil && StillImage.isLosslessWebP(self.path) {
            // A lossless WebP (screenshots, graphics) stays lossless: it came out at quality 90.
            options.append("lossless")
        } else if ext == "jxl" && quality == nil && StillImage.isLosslessJXL(self.path) {
            // So does a lossless JPEG XL (it came out at quality 90).
            options.append("lossless")
        } else if StillImage.lossy.contains(ext) {
            options.append("Q=\(ext == "jxl" ? max(5, quality ?? 90) : quality ?? 90)")
        }
        if ext == "tif" || ext == "tiff" {
            // libvips writes TIFF uncompressed unless told: 5-46x the size of an LZW or Deflate
            // input. Lossless always; an uncompressed input stays uncompressed.
            let method = StillImage.tiffCompression(for: self.path, sixteenBit: sixteenBit)
            options.append("compression=\(method)")
            if method != "none" { options.append("predictor=horizontal") }
        }
        if strip { options.append("strip") }
        // JPEG has no alpha: libvips flattens onto black unless told; white, as image editors do.
        if hasAlpha && !StillImage.keepsAlpha(extension: ext) { options.append("background=\(sixteenBit ? 65535 : 255)") }
        let target = options.isEmpty ? path : path + "[" + options.joined(separator: ",") + "]"
        if upscale_vips_write(tagged, target) != 0 {
            // libvips' savers often say only "write error": a folder left without room is the disk full.
            let code = errno
            var info = statvfs()
            let left = statvfs(URL(fileURLWithPath: path).deletingLastPathComponent().path, &info) == 0 ? Int64(info.f_bavail) * Int64(info.f_frsize) : -1
            let full = code == ENOSPC || (0..<(1 << 20)).contains(left)
            let failure = ImagePlanes.failure("writing '\(path)' failed")
            unlink(path)
            if full { throw ImagePlanes.ImageError(message: "the disk is full: writing '\(path)' failed; free some space or choose another --output folder") }
            throw failure
        }
        // libvips 8.14's WebP saver writes an EXIF block (resolution, size, colour space) even
        // when told to strip: `--strip` leaves no EXIF or XMP at all.
        if strip && ext == "webp" && !StillImage.dropWebPMetadata(path) {
            unlink(path)
            throw ImagePlanes.ImageError(message: "writing '\(path)' failed: its metadata could not be removed")
        }
        // libvips 8.14's JPEG saver told to strip writes no JFIF header either, so the print
        // resolution went too (readers then assume 72 dpi: a 300 dpi scan came out 72). PNG and
        // TIFF keep theirs in the image header; WebP has none outside EXIF.
        if strip && (ext == "jpg" || ext == "jpeg") && !StillImage.addJFIFDensity(path, dotsPerMillimetre: (tagged.pointee.Xres, tagged.pointee.Yres)) {
            unlink(path)
            throw ImagePlanes.ImageError(message: "writing '\(path)' failed: its print resolution could not be written")
        }
    }

    /// The TIFF compression a TIFF output gets (libvips' names): "none" where the input is a
    /// TIFF stored uncompressed (it may be meant to be mapped as it is), "deflate" where the
    /// input uses Deflate, else LZW (lossless, and read by every TIFF reader) for 8-bit samples
    /// and Deflate for 16-bit ones: LZW made an upscaled 16-bit photo 9% larger than
    /// uncompressed (6.42 MB against 5.90; Deflate 4.96).
    static func tiffCompression(for input: String, sixteenBit: Bool) -> String {
        switch tiffCompressionTag(input) {
        case 1: return "none"
        case 8, 32946: return "deflate"
        default: return sixteenBit ? "deflate" : "lzw"
        }
    }

    /// Tag 259 (Compression) of a classic TIFF's first directory, or nil for any other file.
    public static func tiffCompressionTag(_ path: String) -> Int? {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        guard let head = try? handle.read(upToCount: 8), head.count == 8 else { return nil }
        let bytes = [UInt8](head)
        let little: Bool
        switch (bytes[0], bytes[1], bytes[2], bytes[3]) {
        case (0x49, 0x49, 0x2A, 0x00): little = true
        case (0x4D, 0x4D, 0x00, 0x2A): little = false
        default: return nil
        }
        guard let directory = byteNumber(bytes, at: 4, size: 4, little: little),
              (try? handle.seek(toOffset: UInt64(directory))) != nil, let countBytes = try? handle.read(upToCount: 2),
              let count = byteNumber([UInt8](countBytes), at: 0, size: 2, little: little),
              count < 4096, let entries = try? handle.read(upToCount: 12 * count), entries.count == 12 * count else { return nil }
        let table = [UInt8](entries)
        for i in 0..<count where byteNumber(table, at: 12 * i, size: 2, little: little) == 259 {
            return byteNumber(table, at: 12 * i + 8, size: 2, little: little)
        }
        return nil
    }

    /// Removes a WebP file's EXIF, XMP and ICC profile chunks and their flags in its VP8X header;
    /// false when the file is not a WebP this can read or cannot be rewritten. (libvips 8.14's
    /// saver writes EXIF, and the sRGB profile a stripped wide-gamut picture was turned into,
    /// whatever it is told.)
    static func dropWebPMetadata(_ path: String) -> Bool {
        guard let data = FileManager.default.contents(atPath: path), data.count >= 12 else { return false }
        let bytes = [UInt8](data)
        guard bytes[0..<4] == [0x52, 0x49, 0x46, 0x46][...], bytes[8..<12] == [0x57, 0x45, 0x42, 0x50][...] else { return false }
        var out = Array(bytes[0..<12])
        var offset = 12
        var dropped = false
        while offset + 8 <= bytes.count {
            let type = String(decoding: bytes[offset..<offset + 4], as: UTF8.self)
            let size = bytes[offset + 4..<offset + 8].reversed().reduce(0) { $0 << 8 | Int($1) }
            let end = min(bytes.count, offset + 8 + size + size % 2)
            if type == "EXIF" || type == "XMP " || type == "ICCP" {
                dropped = true
            } else {
                var chunk = Array(bytes[offset..<end])
                // VP8X flags: 0x20 ICC profile, 0x08 EXIF, 0x04 XMP.
                if type == "VP8X" && chunk.count > 8 { chunk[8] &= ~0x2C }
                out += chunk
            }
            offset = end
        }
        guard dropped else { return true }
        let riffSize = UInt32(out.count - 8)
        for i in 0..<4 { out[4 + i] = UInt8(truncatingIfNeeded: riffSize >> (8 * UInt32(i))) }
        return FileManager.default.createFile(atPath: path, contents: Data(out))
    }

    /// Gives the JPEG at `path` a JFIF header (APP0) with this print resolution in dots per inch,
    /// right after its start, where it has none; false where `path` is not a JPEG or cannot be
    /// written.
    static func addJFIFDensity(_ path: String, dotsPerMillimetre: (Double, Double)) -> Bool {
        guard let data = FileManager.default.contents(atPath: path), data.count >= 4 else { return false }
        let bytes = [UInt8](data)
        guard bytes[0] == 0xFF, bytes[1] == 0xD8 else { return false }
        if bytes[2] == 0xFF && bytes[3] == 0xE0 { return true }
        func dpi(_ perMillimetre: Double) -> [UInt8] {
            let d = UInt16(min(max((perMillimetre * 25.4).rounded(), 1), 65535))
            return [UInt8(d >> 8), UInt8(d & 0xFF)]
        }
        // Length 16, "JFIF\0", version 1.01, units 1 (dots per inch), densities, no thumbnail.
        let header: [UInt8] = [0xFF, 0xE0, 0x00, 0x10, 0x4A, 0x46, 0x49, 0x46, 0x00, 0x01, 0x01, 0x01]
            + dpi(dotsPerMillimetre.0) + dpi(dotsPerMillimetre.1) + [0, 0]
        return FileManager.default.createFile(atPath: path, contents: Data(bytes[0..<2] + header + bytes[2...]))
    }

    /// Whether `path` is a Windows icon (.ico: reserved 0, type 1).
    static func isICO(_ path: String) -> Bool {
        guard let handle = FileHandle(forReadingAtPath: path) else { return false }
        defer { try? handle.close() }
        guard let head = try? handle.read(upToCount: 4), head.count == 4 else { return false }
        return [UInt8](head) == [0, 0, 1, 0]
    }

    /// Whether `path` is a Portable Float Map ("PF" colour or "Pf" gray header).
    static func isPFM(_ path: String) -> Bool {
        guard let handle = FileHandle(forReadingAtPath: path) else { return false }
        defer { try? handle.close() }
        guard let head = try? handle.read(upToCount: 3), head.count == 3 else { return false }
        return head[0] == 0x50 && (head[1] == 0x46 || head[1] == 0x66) && (head[2] == 0x0A || head[2] == 0x0D || head[2] == 0x20)
    }

    /// The frame count of an animated PNG (its `acTL` chunk, before the first `IDAT`), which
    /// libvips reads as its first frame only and does not count; nil for any other file.
    static func animatedPNGFrames(_ path: String) -> Int? {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        guard let head = try? handle.read(upToCount: 1 << 16), head.count > 8,
              head.prefix(8) == Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) else { return nil }
        var offset = 8
        let bytes = [UInt8](head)
        while offset + 12 <= bytes.count {
            let length = bytes[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
            let type = String(decoding: bytes[offset + 4..<offset + 8], as: UTF8.self)
            if type == "IDAT" { return nil }
            if type == "acTL", offset + 12 <= bytes.count {
                return bytes[offset + 8..<offset + 12].reduce(0) { $0 << 8 | Int($1) }
            }
            offset += 12 + length
        }
        return nil
    }

    /// Bytes of one output row of `width` samples as the strips hold it (all bands, 8 or 16 bits).
    private func rowBytes(width: Int) -> Int { width * (colourBands + (hasAlpha ? 1 : 0)) * (sixteenBit ? 2 : 1) }

    /// Bytes of the raw strip file for an output of `size`: the room it needs beside the output
    /// until the save is done.
    public func stripFileBytes(for size: (width: Int, height: Int)) -> Int64 { Int64(rowBytes(width: size.width)) * Int64(size.height) }

    /// The raw strip file `upscale` writes beside the file it saves to `path`.
    public static func stripFile(for path: String) -> String { path + ".raw" }

    /// Whether images saved with this extension keep an alpha channel (all but JPEG here).
    public static func keepsAlpha(extension ext: String) -> Bool { !["jpg", "jpeg"].contains(ext.lowercased()) }

    /// The metadata blobs carried to the output (unless stripped): the ICC profile as it is (unless
    /// the pixels were turned to sRGB), EXIF, XMP, IPTC (captions, credits, keywords: it was left out).
    fileprivate func copyMetadata(to out: UnsafeMutablePointer<VipsImage>, profile: Bool, extension ext: String) {
        for name in (profile ? ["icc-profile-data"] : []) + ["exif-data", "xmp-data", "iptc-data"] {
            // libvips 8.14's TIFF saver writes IPTC with a quarter of its length (a block readers
            // call damaged): left out, and said so (`metadataNote`).
            if name == "iptc-data" && ["tif", "tiff"].contains(ext) { continue }
            guard var data = blob(name) else { continue }
            if name == "xmp-data" && turned { data = StillImage.uprightXMP(data) }
            if name == "exif-data" && turned { data = StillImage.withoutThumbnail(data) }
            data.withUnsafeBytes { upscale_vips_set_blob_copy(out, name, $0.baseAddress, $0.count) }
        }
        // A PNG's text chunks (an AI image's generation settings under "parameters", a
        // title, a comment): libvips' PNG saver writes them back from these fields.
        if ext == "png" { _ = upscale_vips_copy_strings(image, out, StillImage.pngTextPrefix) }
    }

    /// The prefix libvips gives the fields it reads from a PNG's text chunks.
    static let pngTextPrefix = "png-comment-"

    /// A note when this PNG's text chunks (tEXt, zTXt, iTXt) cannot go to a file ending in
    /// `.ext` (only PNG holds them), or nil.
    public func pngTextNote(forExtension ext: String) -> String? {
        guard ext.lowercased() != "png" else { return nil }
        let count = Int(upscale_vips_copy_strings(image, nil, StillImage.pngTextPrefix))
        guard count > 0 else { return nil }
        return "'\(path)': its \(count) PNG text entr\(count == 1 ? "y" : "ies") (such as generation settings or a comment) cannot go into a .\(ext.lowercased()) file and are left out (use --format png to keep them)"
    }

    /// What of this picture's metadata a file ending in `.ext` will not hold with libvips 8.14
    /// (TIFF: no EXIF, and IPTC left out rather than written damaged; PNG, WebP, HEIF, AVIF: no
    /// IPTC; JPEG XL: none of them), as a note, or nil when everything is kept.
    public func metadataNote(forExtension ext: String) -> String? {
        let kept: Set<String>
        switch ext.lowercased() {
        case "jpg", "jpeg": return nil
        case "tif", "tiff": kept = ["xmp-data"]
        case "png", "webp", "heic", "heif", "avif": kept = ["exif-data", "xmp-data"]
        // GIF, BMP, JPEG 2000, the HDR and scientific formats: none (GIF's loss went unsaid).
        default: kept = []
        }
        let names = ["exif-data": "EXIF (camera, date, location)", "iptc-data": "IPTC (captions, keywords, credits)", "xmp-data": "XMP"]
        let lost = ["exif-data", "iptc-data", "xmp-data"].filter { !kept.contains($0) && blob($0) != nil }.map { names[$0]! }
        guard !lost.isEmpty else { return nil }
        return "'\(path)': .\(ext.lowercased()) files as this libvips writes them keep no \(lost.joined(separator: " or ")); they are left out (save as JPEG to keep them)"
    }

    /// EXIF without its thumbnail (the link from the first directory to the second, the
    /// thumbnail's, cleared; libvips re-writes the block without what is no longer linked).
    /// The thumbnail shows the picture as stored: once the picture is turned upright, file
    /// browsers, cameras and import dialogs that show the thumbnail showed it on its side.
    static func withoutThumbnail(_ exif: Data) -> Data {
        var bytes = [UInt8](exif)
        let start = bytes.starts(with: Array("Exif".utf8) + [0, 0]) ? 6 : 0
        guard bytes.count >= start + 8 else { return exif }
        let little: Bool
        switch (bytes[start], bytes[start + 1]) {
        case (0x49, 0x49): little = true
        case (0x4D, 0x4D): little = false
        default: return exif
        }
        guard let first = byteNumber(bytes, at: start + 4, size: 4, little: little),
              let entries = byteNumber(bytes, at: start + first, size: 2, little: little) else { return exif }
        let link = start + first + 2 + 12 * entries
        guard link + 4 <= bytes.count else { return exif }
        bytes.replaceSubrange(link..<link + 4, with: [0, 0, 0, 0])
        return Data(bytes)
    }

    /// XMP with its orientation said upright (`tiff:Orientation` 1), as the pixels now are: an
    /// XMP that still said 6 made programs that read it turn the picture a second time.
    static func uprightXMP(_ xmp: Data) -> Data {
        guard let text = String(data: xmp, encoding: .utf8), text.contains("tiff:Orientation") else { return xmp }
        var fixed = text
        for (pattern, template) in [(#"tiff:Orientation="[0-9]""#, #"tiff:Orientation="1""#),
                                    (#"<tiff:Orientation>\s*[0-9]\s*</tiff:Orientation>"#, "<tiff:Orientation>1</tiff:Orientation>")] {
            guard let expression = try? NSRegularExpression(pattern: pattern) else { continue }
            fixed = expression.stringByReplacingMatches(in: fixed, range: NSRange(fixed.startIndex..., in: fixed), withTemplate: template)
        }
        return Data(fixed.utf8)
    }

    private func blob(_ name: String) -> Data? {
        guard upscale_vips_has(image, name) != 0 else { return nil }
        var data: UnsafeRawPointer?
        var length = 0
        guard upscale_vips_get_blob(image, name, &data, &length) == 0, let data else { return nil }
        return Data(bytes: data, count: length)
    }

    /// Formats whose libvips saver writes an ICC profile (8.14's GIF and JPEG 2000 savers do not).
    static func keepsProfile(extension ext: String) -> Bool { !["gif", "jp2"].contains(ext.lowercased()) }

    /// Whether pixels in an RGB profile are sRGB already, so that leaving the profile out shifts
    /// no colour: 125 colours (each band 0, 64, 128, 192, 255) converted through it to sRGB
    /// (lcms, via libvips) all come back within 2. The profile's name said so before, and
    /// Artifex's "esRGB" (extended, encoded far from sRGB) passed as sRGB: its colours shifted
    /// by up to 40 levels. A profile lcms cannot use is judged by its name as before.
    static func isSRGB(_ profile: Data, bands: Int = 3) -> Bool {
        let levels: [UInt8] = [0, 64, 128, 192, 255]
        var colours: [UInt8] = []
        if bands == 1 {
            // A gray profile: 17 grays, each coming back as three equal bands.
            colours = stride(from: 0, through: 256, by: 16).map { UInt8(min($0, 255)) }
        } else {
            for r in levels { for g in levels { for b in levels { colours += [r, g, b] } } }
        }
        let measured: Bool? = colours.withUnsafeBytes { raw in
            guard let plain = upscale_vips_from_memory(raw.baseAddress, raw.count, Int32(colours.count / bands), 1, Int32(bands), VIPS_FORMAT_UCHAR) else { return nil }
            defer { upscale_vips_unref(plain) }
            var tagged: UnsafeMutablePointer<VipsImage>?, converted: UnsafeMutablePointer<VipsImage>?
            guard upscale_vips_copy_as(plain, &tagged, bands == 1 ? VIPS_INTERPRETATION_B_W : VIPS_INTERPRETATION_sRGB) == 0, let tagged else { return nil }
            defer { upscale_vips_unref(tagged) }
            profile.withUnsafeBytes { upscale_vips_set_blob_copy(tagged, "icc-profile-data", $0.baseAddress, $0.count) }
            guard upscale_vips_to_srgb(tagged, &converted, 8) == 0, let converted else { return nil }
            defer { upscale_vips_unref(converted) }
            var size = 0
            guard let memory = upscale_vips_to_memory(converted, &size) else { return nil }
            defer { g_free(memory) }
            guard size == colours.count * 3 / bands else { return nil }
            let out = memory.assumingMemoryBound(to: UInt8.self)
            return (0..<size).allSatisfy { abs(Int(out[$0]) - Int(colours[bands == 1 ? $0 / 3 : $0])) <= 2 }
        }
        upscale_vips_error_clear()
        if let measured { return measured }
        let says = { (text: String) in
            profile.range(of: Data(text.utf8)) != nil || profile.range(of: Data(text.utf8.flatMap { [0, $0] })) != nil
        }
        return says("sRGB") && !says("inear")
    }

    /// The colour space an ICC profile's header names ("RGB ", "GRAY", "CMYK"…), nil if too short.
    static func profileSpace(_ profile: Data) -> String? {
        profile.count >= 20 ? String(decoding: profile[profile.startIndex + 16..<profile.startIndex + 20], as: UTF8.self) : nil
    }

    /// The gray of an sRGB image made from a gray one (its second band: a neutral gray's three
    /// are equal), with the alpha after it where `alpha`, tagged `space`. Takes `image`.
    static func grayBand(of image: UnsafeMutablePointer<VipsImage>, alpha: Bool, as space: VipsInterpretation) throws -> UnsafeMutablePointer<VipsImage> {
        defer { upscale_vips_unref(image) }
        struct Failed: Error {}
        var gray: UnsafeMutablePointer<VipsImage>?
        guard upscale_vips_extract_band(image, &gray, 1) == 0, var joined = gray else { throw Failed() }
        if alpha {
            var alphaBand: UnsafeMutablePointer<VipsImage>?, both: UnsafeMutablePointer<VipsImage>?
            guard upscale_vips_extract_band(image, &alphaBand, 3) == 0, let alphaBand else { upscale_vips_unref(joined); throw Failed() }
            defer { upscale_vips_unref(alphaBand) }
            let status = upscale_vips_bandjoin2(joined, alphaBand, &both)
            upscale_vips_unref(joined)
            guard status == 0, let both else { throw Failed() }
            joined = both
        }
        defer { upscale_vips_unref(joined) }
        var tagged: UnsafeMutablePointer<VipsImage>?
        guard upscale_vips_copy_as(joined, &tagged, space) == 0, let tagged else { throw Failed() }
        return tagged
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
        let found = upscale_vips_can_save("x." + ext) != 0
        upscale_vips_error_clear()
        return found
    }
}

/// The unsigned number of `size` bytes at `offset` in `bytes`, little- or big-endian (a TIFF
/// structure's byte order, an ISO box's big-endian sizes), or nil past the end.
func byteNumber(_ bytes: [UInt8], at offset: Int, size: Int, little: Bool) -> Int? {
    guard offset >= 0, offset + size <= bytes.count else { return nil }
    return (0..<size).reduce(0) { $0 << 8 | Int(bytes[offset + (little ? size - 1 - $1 : $1)]) }
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

    static func join<P: SamplePlane>(_ planes: [P], rows: Int, into samples: UnsafeMutablePointer<P.Sample>) {
        guard let first = planes.first else { return }
        let bands = planes.count, width = first.width
        for y in 0..<rows {
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

    static func undo<P: SamplePlane>(_ plane: P, alpha: P, rows: Int) {
        let full = Int(P.Sample.max)
        for y in 0..<rows {
            let c = plane.row(y), a = alpha.row(y)
            for x in 0..<plane.width {
                let alpha = Int(a[x])
                c[x] = alpha == 0 ? 0 : P.Sample(min(full, (Int(c[x]) * full + alpha / 2) / alpha))
            }
        }
    }
}

/// Output sizes for stills: as for video (one side keeps the aspect ratio, no size means 2x),
/// but exact rather than even (no chroma subsampling), 1…65500 per side: JPEG's limit (WebP
/// stops at 16383 and says so). The output is made in strips, so memory is the input plus one
/// strip; the raw strips wait on disk beside the output (width x height x bands bytes).
public enum StillSize {
    public static let maximum = 65500
    /// Formats with a smaller limit per side.
    static let formatLimits: [String: Int] = ["webp": 16383, "heic": 16384, "avif": 16384]

    /// Refuses a size the output format cannot hold, before any work is done.
    public static func check(_ size: (width: Int, height: Int), extension ext: String, path: String) throws {
        if let limit = formatLimits[ext.lowercased()], size.width > limit || size.height > limit {
            throw ImagePlanes.ImageError(message: "'\(path)': .\(ext) holds at most \(limit) pixels per side, and \(size.width)x\(size.height) was asked for; choose --format png, jpg or tiff, or a smaller size")
        }
    }

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

extension ImagePlanes {
    /// A large real photo for measurements: `photos` (sRGB) tiled in turn and cropped to
    /// `width` x `height`, saved as a JPEG (quality 92).
    public static func writeMosaic(of photos: [String], width: Int, height: Int, to path: String) throws {
        try start()
        var tiles: [UnsafeMutablePointer<VipsImage>?] = []
        defer { tiles.forEach { $0.map(upscale_vips_unref) } }
        var loaded: [UnsafeMutablePointer<VipsImage>] = []
        for photo in photos {
            guard let image = upscale_vips_open(photo) else { throw failure("cannot load '\(photo)'") }
            var rgb: UnsafeMutablePointer<VipsImage>?
            let converted = upscale_vips_colourspace(image, &rgb, VIPS_INTERPRETATION_sRGB)
            upscale_vips_unref(image)
            guard converted == 0, let rgb else { throw failure("cannot convert '\(photo)'") }
            var bytes: UnsafeMutablePointer<VipsImage>?
            let cast = upscale_vips_cast(rgb, &bytes, VIPS_FORMAT_UCHAR)
            upscale_vips_unref(rgb)
            guard cast == 0, let bytes else { throw failure("cannot convert '\(photo)'") }
            loaded.append(bytes)
        }
        defer { loaded.forEach(upscale_vips_unref) }
        // Same-size tiles: each photo cropped to the smallest one's size.
        let tileW = loaded.map { Int(upscale_vips_width($0)) }.min() ?? 1
        let tileH = loaded.map { Int(upscale_vips_height($0)) }.min() ?? 1
        let across = (width + tileW - 1) / tileW, down = (height + tileH - 1) / tileH
        for i in 0..<(across * down) {
            var tile: UnsafeMutablePointer<VipsImage>?
            guard upscale_vips_crop(loaded[i % loaded.count], &tile, 0, 0, Int32(tileW), Int32(tileH)) == 0 else { throw failure("cannot tile") }
            tiles.append(tile)
        }
        var joined: UnsafeMutablePointer<VipsImage>?
        guard tiles.withUnsafeMutableBufferPointer({ upscale_vips_arrayjoin($0.baseAddress, &joined, Int32($0.count), Int32(across)) }) == 0,
              let joined else { throw failure("cannot join the tiles") }
        defer { upscale_vips_unref(joined) }
        var cut: UnsafeMutablePointer<VipsImage>?
        guard upscale_vips_crop(joined, &cut, 0, 0, Int32(width), Int32(height)) == 0, let cut else { throw failure("cannot crop the mosaic") }
        defer { upscale_vips_unref(cut) }
        guard upscale_vips_write(cut, path + "[Q=92]") == 0 else { throw failure("cannot write '\(path)'") }
    }
}

/// Reads a JPEG XL codestream's image header (after its 0xFF0A signature) as far as
/// `xyb_encoded`: the bits come least significant first, and most fields are `U32`s, a 2-bit
/// selector picking one of four encodings.
enum JXLHeader {
    private enum Field { case value(Int), bits(Int), offset(Int, Int) }

    private struct Reader {
        let bytes: [UInt8]
        var position = 0

        mutating func bits(_ count: Int) -> Int? {
            var value = 0
            for i in 0..<count {
                guard position >> 3 < bytes.count else { return nil }
                value |= Int(bytes[position >> 3] >> UInt8(position & 7) & 1) << i
                position += 1
            }
            return value
        }

        mutating func flag() -> Bool? { bits(1).map { $0 == 1 } }

        /// Steps over `count` bits; false past the end of what was read.
        mutating func skip(_ count: Int) -> Bool {
            position += count
            return (position + 7) >> 3 <= bytes.count
        }

        mutating func u32(_ fields: [Field]) -> Int? {
            guard let selector = bits(2) else { return nil }
            switch fields[selector] {
            case .value(let v): return v
            case .bits(let n): return bits(n)
            case .offset(let n, let base): return bits(n).map { $0 + base }
            }
        }
    }

    /// Whether the samples are coded in XYB (lossy), or nil when the header cannot be read.
    static func xybEncoded(_ codestream: [UInt8]) -> Bool? {
        var r = Reader(bytes: codestream)
        let sizes: [Field] = [.bits(9), .bits(13), .bits(18), .bits(30)]
        func size() -> Bool? {
            guard let small = r.flag() else { return nil }
            if small {
                guard r.bits(5) != nil, let ratio = r.bits(3) else { return nil }
                if ratio == 0 && r.bits(5) == nil { return nil }
            } else {
                guard r.u32(sizes) != nil, let ratio = r.bits(3) else { return nil }
                if ratio == 0 && r.u32(sizes) == nil { return nil }
            }
            return true
        }
        func bitDepth() -> Bool? {
            guard let float = r.flag() else { return nil }
            if float { return r.u32([.value(32), .value(16), .value(24), .offset(6, 1)]) != nil && r.bits(4) != nil }
            return r.u32([.value(8), .value(10), .value(12), .offset(6, 1)]) != nil
        }
        guard size() != nil, let allDefault = r.flag() else { return nil }
        if allDefault { return true }
        guard let extra = r.flag() else { return nil }
        if extra {
            guard r.bits(3) != nil, let intrinsic = r.flag() else { return nil }
            if intrinsic && size() == nil { return nil }
            guard let preview = r.flag() else { return nil }
            if preview {
                guard let div8 = r.flag() else { return nil }
                let side: [Field] = div8 ? [.value(16), .value(32), .offset(5, 1), .offset(9, 33)]
                    : [.offset(6, 1), .offset(8, 65), .offset(10, 321), .offset(12, 1345)]
                guard r.u32(side) != nil, let ratio = r.bits(3) else { return nil }
                if ratio == 0 && r.u32(side) == nil { return nil }
            }
            guard let animation = r.flag() else { return nil }
            if animation {
                guard r.u32([.value(100), .value(1000), .offset(10, 1), .offset(30, 1)]) != nil,
                      r.u32([.value(1), .value(1001), .offset(8, 1), .offset(10, 1)]) != nil,
                      r.u32([.value(0), .bits(3), .bits(16), .bits(32)]) != nil, r.bits(1) != nil else { return nil }
            }
        }
        guard bitDepth() != nil, r.bits(1) != nil,
              let channels = r.u32([.value(0), .value(1), .offset(4, 2), .offset(12, 1)]) else { return nil }
        for _ in 0..<channels {
            guard let plain = r.flag() else { return nil }
            if plain { continue }
            guard let type = r.u32([.value(0), .value(1), .offset(4, 2), .offset(6, 18)]), bitDepth() != nil,
                  r.u32([.value(0), .value(3), .value(4), .offset(3, 1)]) != nil,
                  let nameLength = r.u32([.value(0), .bits(4), .offset(5, 16), .offset(10, 48)]), r.skip(8 * nameLength)
            else { return nil }
            switch type {
            case 0: guard r.bits(1) != nil else { return nil }           // alpha: associated
            case 2: guard r.skip(64) else { return nil }                       // spot colour: four 16-bit floats
            case 5: guard r.u32([.value(1), .bits(2), .offset(4, 3), .offset(8, 19)]) != nil else { return nil } // CFA channel
            default: break
            }
        }
        return r.flag()
    }
}
