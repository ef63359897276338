import CVips
import DamageCorpus
import Foundation
import UpscaleCore
import UpscaleImages
import UpscaleMedia
import XCTest

/// `upscale photo.jpg` through the binary; variants (orientation, ICC, alpha, 16-bit, gray)
/// are made here with libvips from the committed real photos.
final class StillImageTests: XCTestCase {
    private var dir: URL!

    override func setUpWithError() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("upscale-still-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        _ = ImagePlanes.self
        XCTAssertEqual(upscale_vips_init("tests"), 0)
        // Each test image is made afresh: libvips' operation cache would hand back an earlier
        // result whose metadata a test changed.
        vips_cache_set_max(0)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(at: dir) }

    private var butterfly: String { CLITests.fixtures.appendingPathComponent("butterfly.jpg").path }

    private func run(_ arguments: [String]) throws -> DamageRun {
        try DamageRun.run(CLITests.binary.path, arguments, timeout: 120)
    }

    private func path(_ name: String) -> String { dir.appendingPathComponent(name).path }

    private func listing() -> [String] { ((try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []).sorted() }

    /// Opens an image with libvips (the caller unrefs it).
    private func open(_ path: String) throws -> UnsafeMutablePointer<VipsImage> {
        try XCTUnwrap(upscale_vips_open(path), "cannot open \(path)")
    }

    /// Saves `transform(butterfly)` to `name`.
    private func make(_ name: String, from source: String? = nil, _ transform: (UnsafeMutablePointer<VipsImage>) throws -> UnsafeMutablePointer<VipsImage>) throws -> String {
        let image = try open(source ?? butterfly)
        defer { upscale_vips_unref(image) }
        let out = try transform(image)
        defer { upscale_vips_unref(out) }
        XCTAssertEqual(upscale_vips_save_plain(out, path(name)), 0, String(cString: vips_error_buffer()))
        return path(name)
    }

    private func header(_ path: String) throws -> (width: Int, height: Int, bands: Int, format: VipsBandFormat) {
        let image = try open(path)
        defer { upscale_vips_unref(image) }
        return (Int(vips_image_get_width(image)), Int(vips_image_get_height(image)), Int(vips_image_get_bands(image)), vips_image_get_format(image))
    }

    private func blob(_ path: String, _ name: String) throws -> Data? {
        let image = try open(path)
        defer { upscale_vips_unref(image) }
        guard vips_image_get_typeof(image, name) != 0 else { return nil }
        var data: UnsafeRawPointer?
        var length = 0
        guard vips_image_get_blob(image, name, &data, &length) == 0, let data else { return nil }
        return Data(bytes: data, count: length)
    }

    func testPhotoIsUpscaledTwiceInItsFormatBesideTheInputAndBeatsPlainLanczos() throws {
        // The quality protocol in small: halve a real photo, upscale it back, compare with the original.
        let original = try make("original.png") { image in
            var out: UnsafeMutablePointer<VipsImage>?
            XCTAssertEqual(upscale_vips_colourspace(image, &out, VIPS_INTERPRETATION_sRGB), 0)
            return try XCTUnwrap(out)
        }
        let plane = try ImagePlanes.loadLuma(original)
        let half = try ImagePlanes.shrinkBox(plane, factor: 2)
        let small = try make("small.png", from: original) { image in
            var out: UnsafeMutablePointer<VipsImage>?
            XCTAssertEqual(upscale_vips_shrink(image, &out, 2), 0)
            return try XCTUnwrap(out)
        }
        XCTAssertEqual(try header(small).width, half.width)
        let refined = try run([small, "--scale", "2"])
        XCTAssertEqual(refined.status, 0, refined.stderr)
        let plain = try run([small, "--scale", "2", "--no-refine", "--output", path("plain.png")])
        XCTAssertEqual(plain.status, 0, plain.stderr)
        let outRefined = path("small Upscaled.png")
        XCTAssertEqual(try header(outRefined).width, half.width * 2)
        XCTAssertEqual(try header(outRefined).bands, 3)
        let crop = { (p: Plane) in Plane(width: half.width * 2, height: half.height * 2, samples: (0..<(half.height * 2)).flatMap { y in (0..<(half.width * 2)).map { p[$0, y] } }) }
        let reference = crop(plane)
        let psnrRefined = ImageMetrics.psnr(crop(try ImagePlanes.loadLuma(outRefined)), reference)
        let psnrPlain = ImageMetrics.psnr(crop(try ImagePlanes.loadLuma(path("plain.png"))), reference)
        print("still 2x PSNR: refined \(psnrRefined) dB, plain Lanczos \(psnrPlain) dB")
        XCTAssertGreaterThan(psnrRefined, psnrPlain + 0.1)
        XCTAssertGreaterThan(psnrPlain, 20)
    }

    /// An EXIF block (with its "Exif" header) saying `orientation`, with `thumbnail` (JPEG
    /// bytes) as its thumbnail, as cameras write it: the first directory, then the thumbnail's.
    private func exifWithThumbnail(orientation: Int, thumbnail: Data) -> Data {
        func le(_ value: Int, _ size: Int) -> [UInt8] { (0..<size).map { UInt8((value >> (8 * $0)) & 0xFF) } }
        var tiff: [UInt8] = Array("II".utf8) + le(42, 2) + le(8, 4)
        tiff += le(1, 2) + le(0x0112, 2) + le(3, 2) + le(1, 4) + le(orientation, 2) + le(0, 2) + le(26, 4)
        tiff += le(2, 2) + le(0x0201, 2) + le(4, 2) + le(1, 4) + le(56, 4) + le(0x0202, 2) + le(4, 2) + le(1, 4) + le(thumbnail.count, 4) + le(0, 4)
        return Data(Array("Exif".utf8) + [0, 0] + tiff + [UInt8](thumbnail))
    }

    func testOrientationIsAppliedAndReset() throws {
        let thumbnailFile = try make("thumb.jpg") { image in
            var out: UnsafeMutablePointer<VipsImage>?
            XCTAssertEqual(upscale_vips_shrink(image, &out, 8), 0)
            vips_image_remove(out, "exif-data")
            return try XCTUnwrap(out)
        }
        let thumbnail = try Data(contentsOf: URL(fileURLWithPath: thumbnailFile))
        for tag in [6, 8] {
            let name = "rotated-\(tag).jpg"
            _ = try make(name) { image in
                var out: UnsafeMutablePointer<VipsImage>?
                XCTAssertEqual(upscale_vips_cast(image, &out, VIPS_FORMAT_UCHAR), 0)
                // A fresh EXIF block carries the tag (the photo's own says 1), and a thumbnail.
                exifWithThumbnail(orientation: tag, thumbnail: thumbnail).withUnsafeBytes { upscale_vips_set_blob_copy(out, "exif-data", $0.baseAddress, $0.count) }
                vips_image_set_int(out, "orientation", Int32(tag))
                // XMP says it too, as an attribute or as an element, as cameras and editors write it.
                let field = tag == 6 ? "<rdf:Description tiff:Orientation=\"\(tag)\"/>" : "<rdf:Description><tiff:Orientation>\(tag)</tiff:Orientation></rdf:Description>"
                let xmp = Data(("<x:xmpmeta xmlns:x=\"adobe:ns:meta/\"><rdf:RDF xmlns:rdf=\"http://www.w3.org/1999/02/22-rdf-syntax-ns#\" "
                    + "xmlns:tiff=\"http://ns.adobe.com/tiff/1.0/\">" + field + "</rdf:RDF></x:xmpmeta>").utf8)
                xmp.withUnsafeBytes { upscale_vips_set_blob_copy(out, "xmp-data", $0.baseAddress, $0.count) }
                return try XCTUnwrap(out)
            }
            let saved = try open(path(name))
            var written: Int32 = 0
            vips_image_get_int(saved, "orientation", &written)
            XCTAssertNotEqual(vips_image_get_typeof(saved, "jpeg-thumbnail-data"), 0, "the test image has no EXIF thumbnail")
            upscale_vips_unref(saved)
            XCTAssertEqual(written, Int32(tag), "the test image has no orientation \(tag)")
            let stored = try header(path(name))
            let result = try run([path(name), "--width", "712"])
            XCTAssertEqual(result.status, 0, result.stderr)
            let out = path("rotated-\(tag) Upscaled.jpg")
            let upright = try header(out)
            // Stored 493x356 turned upright is 356x493: --width 712 is the upright width.
            XCTAssertEqual(upright.width, 712)
            XCTAssertEqual(upright.height, stored.width * 2)
            let image = try open(out)
            var orientation: Int32 = 1
            if vips_image_get_typeof(image, "orientation") != 0 { vips_image_get_int(image, "orientation", &orientation) }
            // The thumbnail (of the picture as stored, on its side) is left out; it was kept.
            XCTAssertEqual(vips_image_get_typeof(image, "jpeg-thumbnail-data"), 0, "\(tag): the EXIF thumbnail was kept")
            upscale_vips_unref(image)
            XCTAssertEqual(orientation, 1)
            // The XMP says upright too (it kept 6 or 8, and programs reading it turned the picture again).
            let xmp = String(decoding: try XCTUnwrap(try blob(out, "xmp-data")), as: UTF8.self)
            XCTAssertTrue(xmp.contains(tag == 6 ? "tiff:Orientation=\"1\"" : "<tiff:Orientation>1</tiff:Orientation>"), xmp)
        }
        // An XMP orientation with no EXIF one: the pixels are not turned, so it stays as it was
        // for the programs that turn by it.
        let xmpOnly = try make("xmp-only.png") { image in
            var out: UnsafeMutablePointer<VipsImage>?
            XCTAssertEqual(upscale_vips_cast(image, &out, VIPS_FORMAT_UCHAR), 0)
            vips_image_remove(out, "exif-data")
            vips_image_remove(out, "orientation")
            let xmp = Data("<x:xmpmeta xmlns:x=\"adobe:ns:meta/\"><rdf:RDF xmlns:rdf=\"http://www.w3.org/1999/02/22-rdf-syntax-ns#\" xmlns:tiff=\"http://ns.adobe.com/tiff/1.0/\"><rdf:Description tiff:Orientation=\"6\"/></rdf:RDF></x:xmpmeta>".utf8)
            xmp.withUnsafeBytes { upscale_vips_set_blob_copy(out, "xmp-data", $0.baseAddress, $0.count) }
            return try XCTUnwrap(out)
        }
        XCTAssertEqual(try run([xmpOnly]).status, 0)
        let kept = String(decoding: try XCTUnwrap(try blob(path("xmp-only Upscaled.png"), "xmp-data")), as: UTF8.self)
        XCTAssertTrue(kept.contains("tiff:Orientation=\"6\""), kept)
    }

    /// Mean of each band of an 8-bit image.
    private func bandMeans(_ path: String, toSRGB: Bool = false) throws -> [Double] {
        var image = try open(path)
        if toSRGB {
            var converted: UnsafeMutablePointer<VipsImage>?
            XCTAssertEqual(upscale_vips_to_srgb(image, &converted, 8), 0)
            upscale_vips_unref(image)
            image = try XCTUnwrap(converted)
        }
        defer { upscale_vips_unref(image) }
        let bands = Int(vips_image_get_bands(image))
        var size = 0
        let memory = try XCTUnwrap(vips_image_write_to_memory(image, &size))
        defer { g_free(memory) }
        let bytes = UnsafeBufferPointer(start: memory.assumingMemoryBound(to: UInt8.self), count: size)
        return (0..<bands).map { b in stride(from: b, to: size, by: bands).reduce(0.0) { $0 + Double(bytes[$1]) } / Double(size / bands) }
    }

    /// IPTC as a JPEG's APP13 holds it: Photoshop's 8BIM resource 0x0404 with one IIM field
    /// (2:116, the copyright notice).
    private var iptc: Data {
        let notice = Array("(c) upscale test".utf8)
        let field: [UInt8] = [0x1C, 0x02, 0x74, 0, UInt8(notice.count)] + notice
        var resource = Array("8BIM".utf8) + [0x04, 0x04, 0, 0] + withUnsafeBytes(of: UInt32(field.count).bigEndian, Array.init) + field
        if field.count % 2 == 1 { resource.append(0) }
        return Data(Array("Photoshop 3.0".utf8) + [0] + resource)
    }

    /// One of libvips' built-in ICC profiles ("srgb", "p3"), as bytes.
    private func builtInProfile(_ name: String) throws -> Data {
        try XCTUnwrap(StillImage.builtInProfile(name))
    }

    /// The butterfly photo as an 8-bit JPEG named `name` whose ICC profile is `profile`.
    private func photo(_ name: String, profile: Data) throws -> String {
        try make(name) { image in
            var out: UnsafeMutablePointer<VipsImage>?
            XCTAssertEqual(upscale_vips_cast(image, &out, VIPS_FORMAT_UCHAR), 0)
            profile.withUnsafeBytes { upscale_vips_set_blob_copy(out, "icc-profile-data", $0.baseAddress, $0.count) }
            return try XCTUnwrap(out)
        }
    }

    func testICCProfileBytesAndEXIFAreKeptAndStripRemovesThem() throws {
        let icc = try builtInProfile("p3")
        let tagged = try make("tagged.jpg") { image in
            var out: UnsafeMutablePointer<VipsImage>?
            XCTAssertEqual(upscale_vips_cast(image, &out, VIPS_FORMAT_UCHAR), 0)
            icc.withUnsafeBytes { upscale_vips_set_blob_copy(out, "icc-profile-data", $0.baseAddress, $0.count) }
            vips_image_set_string(out, "exif-ifd0-Artist", "upscale test")
            iptc.withUnsafeBytes { upscale_vips_set_blob_copy(out, "iptc-data", $0.baseAddress, $0.count) }
            return try XCTUnwrap(out)
        }
        XCTAssertEqual(try blob(tagged, "icc-profile-data"), icc)
        XCTAssertEqual(try blob(tagged, "iptc-data"), iptc)
        XCTAssertEqual(try run([tagged]).status, 0)
        let out = path("tagged Upscaled.jpg")
        XCTAssertEqual(try blob(out, "icc-profile-data"), icc, "ICC profile bytes changed")
        let exif = try XCTUnwrap(try blob(out, "exif-data"))
        XCTAssertNotNil(exif.range(of: Data("upscale test".utf8)), "EXIF lost")
        // The EXIF pixel dimensions say the new size.
        let outImage = try open(out)
        var text: UnsafePointer<CChar>?
        XCTAssertEqual(vips_image_get_string(outImage, "exif-ifd2-PixelXDimension", &text), 0)
        XCTAssertTrue(text.map { String(cString: $0).hasPrefix("986 ") } == true, text.map { String(cString: $0) } ?? "none")
        upscale_vips_unref(outImage)
        let stripped = try run([tagged, "--strip", "--output", path("stripped.jpg")])
        XCTAssertEqual(stripped.status, 0, stripped.stderr)
        XCTAssertNil(try blob(path("stripped.jpg"), "icc-profile-data"))
        XCTAssertNil(try blob(path("stripped.jpg"), "exif-data"))
        XCTAssertNil(try blob(path("stripped.jpg"), "iptc-data"))
        // IPTC (captions, credits) is kept; it was left out.
        XCTAssertEqual(try blob(out, "iptc-data"), iptc)
        // Formats that cannot hold some of it say so: TIFF (no EXIF; its IPTC was written with a
        // quarter of its length, a damaged block) and PNG (no IPTC). Nothing was said before.
        let tiff = try run([tagged, "--format", "tiff", "--output", path("tagged.tif")])
        XCTAssertEqual(tiff.status, 0, tiff.stderr)
        XCTAssertTrue(tiff.stderr.contains(".tif files as this libvips writes them keep no EXIF (camera, date, location) or IPTC (captions, keywords, credits)"), tiff.stderr)
        XCTAssertNil(try blob(path("tagged.tif"), "iptc-data"))
        let png = try run([tagged, "--format", "png", "--output", path("tagged.png")])
        XCTAssertEqual(png.status, 0, png.stderr)
        XCTAssertTrue(png.stderr.contains(".png files as this libvips writes them keep no IPTC (captions, keywords, credits)"), png.stderr)
        XCTAssertFalse(try run([tagged, "--output", path("again.jpg")]).stderr.contains("keep no"))
        let gif = try run([tagged, "--format", "gif", "--output", path("tagged.gif")])
        XCTAssertEqual(gif.status, 0, gif.stderr)
        XCTAssertTrue(gif.stderr.contains(".gif files as this libvips writes them keep no EXIF (camera, date, location) or IPTC (captions, keywords, credits)"), gif.stderr)
        // Stripped of its Display P3 profile, the picture is turned to sRGB first, so it looks the
        // same: each band's mean within 1 of the P3 original shown in sRGB. (Left in P3 values,
        // blue was 8 too high, as it is in the kept-profile output read without its profile.)
        let shown = try bandMeans(tagged, toSRGB: true)
        for (band, (made, expected)) in zip(try bandMeans(path("stripped.jpg")), shown).enumerated() {
            XCTAssertEqual(made, expected, accuracy: 1, "band \(band)")
        }
        XCTAssertGreaterThan(abs(try bandMeans(out)[2] - shown[2]), 3, "P3 and sRGB values of this photo differ")
        // The same Display P3 profile named "sRGB" (as Artifex's esRGB is named): whether a
        // profile is sRGB is measured, not read from its name, so it is turned to sRGB too. (It
        // was taken for sRGB and dropped, the P3 values left as they were.)
        var misnamed = icc
        let name = try XCTUnwrap(misnamed.range(of: Data("sP3C".utf8)), "the P3 profile's description")
        misnamed.replaceSubrange(name, with: Data("sRGB".utf8))
        XCTAssertNotEqual(misnamed, icc)
        let named = try photo("named.jpg", profile: misnamed)
        XCTAssertEqual(try run([named, "--strip", "--output", path("named-stripped.jpg")]).status, 0)
        for (band, (made, expected)) in zip(try bandMeans(path("named-stripped.jpg")), shown).enumerated() {
            XCTAssertEqual(made, expected, accuracy: 1, "misnamed profile, band \(band)")
        }
        // A real sRGB profile is left out with the pixels as they are.
        let plain = try photo("plain.jpg", profile: try builtInProfile("srgb"))
        XCTAssertEqual(try run([plain, "--strip", "--output", path("plain-stripped.jpg")]).status, 0)
        for (band, (made, expected)) in zip(try bandMeans(path("plain-stripped.jpg")), try bandMeans(plain)).enumerated() {
            XCTAssertEqual(made, expected, accuracy: 0.5, "sRGB profile, band \(band)")
        }
        // The print resolution stays the input's: 300 dpi (11.811 pixels per mm), not 25.4.
        let dense = try make("dense.png") { image in
            var out: UnsafeMutablePointer<VipsImage>?
            XCTAssertEqual(upscale_vips_cast(image, &out, VIPS_FORMAT_UCHAR), 0)
            out!.pointee.Xres = 300 / 25.4
            out!.pointee.Yres = 300 / 25.4
            return try XCTUnwrap(out)
        }
        XCTAssertEqual(try run([dense]).status, 0)
        let denseOut = try open(path("dense Upscaled.png"))
        defer { upscale_vips_unref(denseOut) }
        XCTAssertEqual(denseOut.pointee.Xres * 25.4, 300, accuracy: 0.5)
        XCTAssertEqual(denseOut.pointee.Yres * 25.4, 300, accuracy: 0.5)
        // Stripped into a JPEG too (libvips' stripped JPEG had no JFIF header: 72 dpi), with no
        // EXIF to carry it.
        let denseStripped = try run([dense, "--strip", "--format", "jpg", "--output", path("dense-stripped.jpg")])
        XCTAssertEqual(denseStripped.status, 0, denseStripped.stderr)
        let strippedOut = try open(path("dense-stripped.jpg"))
        defer { upscale_vips_unref(strippedOut) }
        XCTAssertEqual(strippedOut.pointee.Xres * 25.4, 300, accuracy: 0.5)
        XCTAssertEqual(strippedOut.pointee.Yres * 25.4, 300, accuracy: 0.5)
        XCTAssertNil(try blob(path("dense-stripped.jpg"), "exif-data"))
        XCTAssertEqual([UInt8](try Data(contentsOf: URL(fileURLWithPath: path("dense-stripped.jpg"))).prefix(6)), [0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10])
    }

    /// An SVG is a still: drawn at its own size, upscaled, saved as PNG (libvips writes no SVG).
    /// It was taken for video and became a one-frame HEVC .mov, and "-o logo.png" was refused.
    /// AVIF/HEIF colour given as an nclx box (no ICC profile), which libvips 8.14 ignores: a
    /// Display P3 picture came out untagged, its colours shown as sRGB (duller), and an HDR one
    /// (BT.2020 PQ) with no word. P3 now carries the Display P3 profile into AVIF and PNG, and
    /// is turned into sRGB where no profile is written (--strip); PQ is named.
    func testNCLXColourOfAVIFIsKeptOrNamed() throws {
        let p3 = CLITests.fixtures.appendingPathComponent("butterfly-p3.avif").path
        let pq = CLITests.fixtures.appendingPathComponent("butterfly-pq.avif").path
        XCTAssertNil(try blob(p3, "icc-profile-data"), "the fixture has no ICC profile of its own")
        let profile = try builtInProfile("p3")
        for (name, extra) in [("p3.avif", [String]()), ("p3.png", ["--format", "png"])] {
            let result = try run([p3, "--output", path(name)] + extra)
            XCTAssertEqual(result.status, 0, result.stderr)
            XCTAssertEqual(result.stderr, "", name)
            XCTAssertEqual(try blob(path(name), "icc-profile-data"), profile, name)
        }
        // Stripped: no profile, and the pixels are the tagged output's turned into sRGB.
        let stripped = try run([p3, "--format", "png", "--strip", "--output", path("stripped.png")])
        XCTAssertEqual(stripped.status, 0, stripped.stderr)
        XCTAssertNil(try blob(path("stripped.png"), "icc-profile-data"))
        let converted = try bandMeans(path("p3.png"), toSRGB: true), out = try bandMeans(path("stripped.png"))
        for band in 0..<3 { XCTAssertEqual(out[band], converted[band], accuracy: 0.5, "band \(band)") }
        // The saturated wings move most: some samples by far more than rounding.
        let raw = try pixels(path("p3.png")), turned = try pixels(path("stripped.png"))
        XCTAssertEqual(raw.count, turned.count)
        XCTAssertGreaterThan(zip(raw, turned).map { abs(Int($0) - Int($1)) }.max() ?? 0, 12, "P3 into sRGB moves these colours")

        // A colour box of another picture (a thumbnail's, a gain map's) ahead of the primary
        // picture's: the primary's counts (the first one was taken: PQ named, the profile lost).
        let decoy = try insertingColourBox(into: Data(contentsOf: URL(fileURLWithPath: p3)), primaries: 9, transfer: 16)
        try decoy.write(to: URL(fileURLWithPath: path("decoy.avif")))
        let decoyed = try run([path("decoy.avif"), "--output", path("decoy-out.avif")])
        XCTAssertEqual(decoyed.status, 0, decoyed.stderr)
        XCTAssertEqual(decoyed.stderr, "")
        XCTAssertEqual(try blob(path("decoy-out.avif"), "icc-profile-data"), profile)

        let hdr = try run([pq, "--output", path("pq.avif")])
        XCTAssertEqual(hdr.status, 0, hdr.stderr)
        XCTAssertTrue(hdr.stderr.contains("gives its colour as BT.2020, PQ (HDR) (an nclx box), which this libvips cannot read"), hdr.stderr)
        XCTAssertNil(try blob(path("pq.avif"), "icc-profile-data"))
    }

    /// `avif` (ffmpeg's layout: one item, one extent, 32-bit offsets) with an nclx colour box of
    /// no picture first in its property list: the sizes around it, the property indices and the
    /// picture data's offset moved to match.
    private func insertingColourBox(into avif: Data, primaries: UInt16, transfer: UInt16) throws -> Data {
        var d = [UInt8](avif)
        func u32(_ at: Int) -> Int { d[at..<(at + 4)].reduce(0) { $0 << 8 | Int($1) } }
        func put(_ value: Int, _ at: Int) { d.replaceSubrange(at..<(at + 4), with: withUnsafeBytes(of: UInt32(value).bigEndian, Array.init)) }
        func box(_ type: String) throws -> Int { try XCTUnwrap(Data(d).range(of: Data(type.utf8))).lowerBound - 4 }
        let colour = [0, 0, 0, 19] + Array("colrnclx".utf8) + withUnsafeBytes(of: primaries.bigEndian, Array.init)
            + withUnsafeBytes(of: transfer.bigEndian, Array.init) + [0, 9, 0]
        d.insert(contentsOf: colour, at: try box("ipco") + 8)
        for type in ["ipco", "iprp", "meta"] { let at = try box(type); put(u32(at) + colour.count, at) }
        let ipma = try box("ipma")
        var at = ipma + 16
        for _ in 0..<u32(ipma + 12) {
            at += 2
            let count = Int(d[at])
            at += 1
            for _ in 0..<count { d[at] = (d[at] & 0x80) | ((d[at] & 0x7F) + 1); at += 1 }
        }
        let extent = try box("iloc") + 8 + 4 + 2 + 2 + 2 + 2 + 2
        put(u32(extent) + colour.count, extent)
        return Data(d)
    }

    /// An ICC v2 gray profile whose curve is a plain gamma (Photoshop's "Gray Gamma 1.8" kind).
    private func grayProfile(gamma: Double) -> Data {
        func u32(_ v: Int) -> [UInt8] { withUnsafeBytes(of: UInt32(v).bigEndian, Array.init) }
        func fixed(_ v: Double) -> [UInt8] { u32(Int((v * 65536).rounded())) }
        let d50 = fixed(0.9642) + fixed(1.0) + fixed(0.8249)
        let text = Array("Gray Gamma \(gamma)".utf8) + [0]
        var desc = Array("desc".utf8) + [0, 0, 0, 0] + u32(text.count) + text + u32(0) + u32(0) + [0, 0, 0] + [UInt8](repeating: 0, count: 67)
        while desc.count % 4 != 0 { desc.append(0) }
        let wtpt = Array("XYZ ".utf8) + [0, 0, 0, 0] + d50
        let trc = Array("curv".utf8) + [0, 0, 0, 0] + u32(1) + [UInt8(gamma), UInt8(((gamma - gamma.rounded(.down)) * 256).rounded()), 0, 0]
        let tags: [(String, [UInt8])] = [("desc", desc), ("wtpt", wtpt), ("kTRC", trc)]
        var offset = 128 + 4 + 12 * tags.count
        var table = u32(tags.count), body: [UInt8] = []
        for (signature, data) in tags {
            table += Array(signature.utf8) + u32(offset) + u32(data.count)
            body += data
            offset += data.count
        }
        var header = u32(0) + Array("lcms".utf8) + [2, 0x10, 0, 0] + Array("mntrGRAYXYZ ".utf8) + [UInt8](repeating: 0, count: 12)
        header += Array("acsp".utf8) + [UInt8](repeating: 0, count: 24) + u32(0) + d50 + [UInt8](repeating: 0, count: 48)
        var profile = header + table + body
        profile.replaceSubrange(0..<4, with: u32(profile.count))
        return Data(profile)
    }

    /// A gray photo whose profile is not sRGB's (gamma 1.8 here; Photoshop's gray default is
    /// "Dot Gain 20%") loses that profile with --strip and in GIF: its grays are turned into
    /// sRGB's first, and it stays one band. They were left as they were, ~16 levels darker in
    /// the mid-tones once shown as sRGB.
    func testAGrayPictureIsTurnedIntoSRGBBeforeItsProfileIsLeftOut() throws {
        let profile = grayProfile(gamma: 1.8)
        let gray = try make("gray.png") { image in
            var band: UnsafeMutablePointer<VipsImage>?, out: UnsafeMutablePointer<VipsImage>?
            XCTAssertEqual(upscale_vips_extract_band(image, &band, 1), 0)
            defer { upscale_vips_unref(band) }
            XCTAssertEqual(upscale_vips_copy_as(try XCTUnwrap(band), &out, VIPS_INTERPRETATION_B_W), 0)
            profile.withUnsafeBytes { upscale_vips_set_blob_copy(out, "icc-profile-data", $0.baseAddress, $0.count) }
            return try XCTUnwrap(out)
        }
        XCTAssertEqual(try blob(gray, "icc-profile-data"), profile)
        let shown = try bandMeans(gray, toSRGB: true)[1], stored = try bandMeans(gray)[0]
        XCTAssertGreaterThan(shown - stored, 8, "gamma 1.8 grays are lighter shown as sRGB")
        for (name, extra) in [("stripped.png", ["--strip"]), ("gray.gif", [String]())] {
            let result = try run([gray, "--output", path(name), "--no-refine"] + extra)
            XCTAssertEqual(result.status, 0, result.stderr)
            XCTAssertNil(try blob(path(name), "icc-profile-data"), name)
            // (libvips reads any GIF back as RGBA.)
            if name.hasSuffix(".png") { XCTAssertEqual(try header(path(name)).bands, 1, name) }
            XCTAssertEqual(try bandMeans(path(name))[0], shown, accuracy: 1, name)
        }
        // Kept where the format holds it: the grays as they were, with their profile.
        let kept = try run([gray, "--output", path("kept.png"), "--no-refine"])
        XCTAssertEqual(kept.status, 0, kept.stderr)
        XCTAssertEqual(try blob(path("kept.png"), "icc-profile-data"), profile)
        XCTAssertEqual(try bandMeans(path("kept.png"))[0], stored, accuracy: 1)
        // A gray picture carrying an RGB profile (which cannot apply to it) is left as it was,
        // as before; it failed ("cannot convert … to sRGB").
        let mislabelled = try make("mislabelled.jpg", from: gray) { image in
            var out: UnsafeMutablePointer<VipsImage>?
            XCTAssertEqual(upscale_vips_copy_as(image, &out, VIPS_INTERPRETATION_B_W), 0)
            try builtInProfile("p3").withUnsafeBytes { upscale_vips_set_blob_copy(out, "icc-profile-data", $0.baseAddress, $0.count) }
            return try XCTUnwrap(out)
        }
        let odd = try run([mislabelled, "--strip", "--output", path("odd.jpg"), "--no-refine"])
        XCTAssertEqual(odd.status, 0, odd.stderr)
        XCTAssertEqual(try header(path("odd.jpg")).bands, 1)
    }

    func testSVGIsUpscaledAsAStill() throws {
        let svg = path("logo.svg")
        try Data(##"<svg xmlns="http://www.w3.org/2000/svg" width="64" height="48"><rect width="64" height="48" fill="#fff"/><circle cx="32" cy="24" r="16" fill="#c00"/></svg>"##.utf8)
            .write(to: URL(fileURLWithPath: svg))
        let result = try run([svg, "--scale", "2"])
        XCTAssertEqual(result.status, 0, result.stderr)
        let out = try header(path("logo Upscaled.png"))
        XCTAssertEqual([out.width, out.height], [128, 96])
        XCTAssertEqual(try run([svg, "--width", "256", "-o", path("logo.png")]).status, 0)
        XCTAssertEqual(try header(path("logo.png")).width, 256)
    }

    func testTransparentEdgesGetNoFringeAndAlphaGrayAnd16BitAreKept() throws {
        // A red disc on a transparent background whose hidden colour is green.
        let size = 64
        var rgba = [UInt8](repeating: 0, count: size * size * 4)
        for y in 0..<size {
            for x in 0..<size {
                let inside = (x - 32) * (x - 32) + (y - 32) * (y - 32) < 20 * 20
                let i = (y * size + x) * 4
                rgba[i] = inside ? 255 : 0
                rgba[i + 1] = inside ? 0 : 255
                rgba[i + 3] = inside ? 255 : 0
            }
        }
        let image = try XCTUnwrap(rgba.withUnsafeBytes { vips_image_new_from_memory_copy($0.baseAddress, $0.count, Int32(size), Int32(size), 4, VIPS_FORMAT_UCHAR) })
        var tagged: UnsafeMutablePointer<VipsImage>?
        XCTAssertEqual(upscale_vips_copy_as(image, &tagged, VIPS_INTERPRETATION_sRGB), 0)
        upscale_vips_unref(image)
        XCTAssertEqual(upscale_vips_save_plain(tagged!, path("disc.png")), 0)
        upscale_vips_unref(tagged!)
        let result = try run([path("disc.png"), "--scale", "2"])
        XCTAssertEqual(result.status, 0, result.stderr)
        let out = path("disc Upscaled.png")
        XCTAssertEqual(try header(out).bands, 4)
        let outImage = try open(out)
        var bytes = 0
        let memory = try XCTUnwrap(vips_image_write_to_memory(outImage, &bytes))
        upscale_vips_unref(outImage)
        let pixels = memory.assumingMemoryBound(to: UInt8.self)
        var worstGreen = 0, worstRed = 255, edgePixels = 0
        for i in stride(from: 0, to: bytes, by: 4) where pixels[i + 3] >= 16 {
            worstGreen = max(worstGreen, Int(pixels[i + 1]))
            worstRed = min(worstRed, Int(pixels[i]))
            if pixels[i + 3] < 240 { edgePixels += 1 }
        }
        g_free(memory)
        print("transparent edge: \(edgePixels) partly transparent pixels, worst green \(worstGreen), worst red \(worstRed)")
        XCTAssertGreaterThan(edgePixels, 50)
        // Without premultiplied scaling the hidden green bleeds in at ~half strength.
        XCTAssertLessThanOrEqual(worstGreen, 4)
        // The rim stays red (refined colour divided by alpha scaled without the refinement made
        // it nearly black).
        XCTAssertGreaterThanOrEqual(worstRed, 250)

        let gray = try make("gray.png") { image in
            var out: UnsafeMutablePointer<VipsImage>?
            XCTAssertEqual(upscale_vips_colourspace(image, &out, VIPS_INTERPRETATION_B_W), 0)
            return try XCTUnwrap(out)
        }
        XCTAssertEqual(try run([gray]).status, 0)
        XCTAssertEqual(try header(path("gray Upscaled.png")).bands, 1)

        let deep = try make("deep.png") { image in
            var out: UnsafeMutablePointer<VipsImage>?
            XCTAssertEqual(upscale_vips_colourspace(image, &out, VIPS_INTERPRETATION_RGB16), 0)
            return try XCTUnwrap(out)
        }
        XCTAssertEqual(try header(deep).format, VIPS_FORMAT_USHORT)
        let deepRun = try run([deep, "--format", "tiff"])
        XCTAssertEqual(deepRun.status, 0, deepRun.stderr)
        let deepOut = try header(path("deep Upscaled.tif"))
        XCTAssertEqual(deepOut.format, VIPS_FORMAT_USHORT)
        XCTAssertEqual(deepOut.bands, 3)
        XCTAssertEqual(deepOut.width, 986)
    }

    private func pixels(_ path: String) throws -> Data {
        let image = try open(path)
        defer { upscale_vips_unref(image) }
        var size = 0
        let memory = try XCTUnwrap(vips_image_write_to_memory(image, &size))
        defer { g_free(memory) }
        return Data(bytes: memory, count: size)
    }

    /// The butterfly in sRGB with its own luma as alpha: soft, varied transparency, most
    /// transparent where the photo is darkest.
    private func lumaAlpha(_ name: String) throws -> String {
        try make(name) { image in
            var rgb: UnsafeMutablePointer<VipsImage>?
            XCTAssertEqual(upscale_vips_colourspace(image, &rgb, VIPS_INTERPRETATION_sRGB), 0)
            defer { upscale_vips_unref(rgb!) }
            var luma: UnsafeMutablePointer<VipsImage>?
            XCTAssertEqual(upscale_vips_colourspace(image, &luma, VIPS_INTERPRETATION_B_W), 0)
            defer { upscale_vips_unref(luma!) }
            var joined: UnsafeMutablePointer<VipsImage>?
            XCTAssertEqual(upscale_vips_bandjoin2(rgb!, luma!, &joined), 0)
            return try XCTUnwrap(joined)
        }
    }

    /// The output made in strips (here one band of the core, 96 rows, at a time) has the
    /// same pixels as made in one piece: RGBA refined at 2x, and 16-bit at 3x.
    func testStripsGiveTheSamePixelsAsOnePiece() throws {
        let rgba = try lumaAlpha("rgba.png")
        let deep = try make("deep.png") { image in
            var out: UnsafeMutablePointer<VipsImage>?
            XCTAssertEqual(upscale_vips_colourspace(image, &out, VIPS_INTERPRETATION_RGB16), 0)
            return try XCTUnwrap(out)
        }
        for (input, scale) in [(rgba, "2"), (deep, "3")] {
            let whole = try DamageRun.run(CLITests.binary.path, [input, "--scale", scale, "--output", path("whole.png"), "--overwrite"], timeout: 120)
            XCTAssertEqual(whole.status, 0, whole.stderr)
            let strips = try DamageRun.run(CLITests.binary.path, [input, "--scale", scale, "--output", path("strips.png"), "--overwrite"],
                                           timeout: 120, environment: ["UPSCALE_STILL_STRIP_BYTES": "1"])
            XCTAssertEqual(strips.status, 0, strips.stderr)
            XCTAssertEqual(try header(path("strips.png")).height, try header(input).height * Int(scale)!)
            XCTAssertEqual(try pixels(path("strips.png")), try pixels(path("whole.png")), "\(input) x\(scale)")
        }
        XCTAssertFalse(listing().contains { $0.contains(".partial") || $0.hasSuffix(".raw") }, "\(listing())")
    }

    /// Ctrl-C while a still is being made: it stops between strips, exits 130 and replaces
    /// nothing, even with --overwrite (before, the photo was finished and put in place over the
    /// earlier file, and then the run said "cancelled; no output was written").
    func testInterruptKeepsTheEarlierOutputAndLeavesNothing() throws {
        let first = try run([butterfly, "--output", path("kept.jpg")])
        XCTAssertEqual(first.status, 0, first.stderr)
        let before = try Data(contentsOf: URL(fileURLWithPath: path("kept.jpg")))
        let process = Process()
        process.executableURL = CLITests.binary
        process.arguments = [butterfly, "--scale", "4", "--output", path("kept.jpg"), "--overwrite"]
        var environment = ProcessInfo.processInfo.environment
        environment["UPSCALE_STILL_STRIP_BYTES"] = "1"
        process.environment = environment
        process.standardOutput = FileHandle.nullDevice
        let errors = Pipe()
        process.standardError = errors
        try process.run()
        // The strip file exists from the first strip on.
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline && !listing().contains(where: { $0.hasSuffix(".raw") }) { Thread.sleep(forTimeInterval: 0.01) }
        XCTAssertTrue(listing().contains { $0.hasSuffix(".raw") }, "the job never started: \(listing())")
        kill(process.processIdentifier, SIGINT)
        let text = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 130, text)
        XCTAssertFalse(text.contains("Wrote"), text)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: path("kept.jpg"))), before)
        XCTAssertEqual(listing(), ["kept.jpg"])
    }

    /// Ctrl-C while libvips encodes AVIF (which runs for seconds without looking up) ends the
    /// job within moments: it waited for the encoder to finish (30 s at 6000 wide).
    func testInterruptDuringASlowSaveEndsAtOnce() throws {
        let fruits = CLITests.fixtures.appendingPathComponent("fruits.jpg").path
        let process = Process()
        process.executableURL = CLITests.binary
        process.arguments = [fruits, "--width", "4000", "--format", "avif", "--no-refine", "--output", path("slow.avif")]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        // The strips are all written (4000x3750 RGB) once the raw file has its full size: the save runs.
        let full = 4000 * 3750 * 3
        let deadline = Date().addingTimeInterval(120)
        func rawSize() -> Int {
            guard let raw = listing().first(where: { $0.hasSuffix(".raw") }) else { return 0 }
            return ((try? FileManager.default.attributesOfItem(atPath: path(raw))[.size]) as? Int) ?? 0
        }
        while Date() < deadline && process.isRunning && rawSize() < full { Thread.sleep(forTimeInterval: 0.02) }
        XCTAssertEqual(rawSize(), full, "the save never started")
        let asked = Date()
        kill(process.processIdentifier, SIGINT)
        process.waitUntilExit()
        let took = Date().timeIntervalSince(asked)
        print("interrupt during an AVIF save: ended \(String(format: "%.2f", took)) s after the signal")
        XCTAssertEqual(process.terminationStatus, 130)
        XCTAssertLessThan(took, 5, "waited for the encoder")
        XCTAssertEqual(listing(), [])
    }

    func testCMYKBecomesSRGBAndAnAnimatedGIFGivesItsFirstFrame() throws {
        let cmyk = try make("print.jpg") { image in
            var out: UnsafeMutablePointer<VipsImage>?
            XCTAssertEqual(upscale_vips_icc_export(image, &out, "cmyk"), 0, String(cString: vips_error_buffer()))
            return try XCTUnwrap(out)
        }
        XCTAssertEqual(try header(cmyk).bands, 4)
        let printed = try run([cmyk])
        XCTAssertEqual(printed.status, 0, printed.stderr)
        XCTAssertTrue(printed.stderr.contains("is CMYK; converted to sRGB with its embedded profile"), printed.stderr)
        let rgb = try header(path("print Upscaled.jpg"))
        XCTAssertEqual(rgb.bands, 3)
        XCTAssertEqual(rgb.width, 986)

        let anim = try make("anim.gif") { image in
            var pages: [UnsafeMutablePointer<VipsImage>?] = [image, image]
            var out: UnsafeMutablePointer<VipsImage>?
            XCTAssertEqual(pages.withUnsafeMutableBufferPointer { upscale_vips_arrayjoin($0.baseAddress, &out, 2, 1) }, 0)
            vips_image_set_int(out, "page-height", vips_image_get_height(image))
            return try XCTUnwrap(out)
        }
        let gif = try run([anim])
        XCTAssertEqual(gif.status, 0, gif.stderr)
        XCTAssertTrue(gif.stderr.contains("has 2 frames; only the first is upscaled"), gif.stderr)
        let first = try header(path("anim Upscaled.gif"))
        XCTAssertEqual(first.width, 986)
        XCTAssertEqual(first.height, 712)

        // An animated PNG (an acTL chunk before the pictures): libvips reads its first frame and
        // does not count frames, so this went by without the note.
        var png = [UInt8](try Data(contentsOf: URL(fileURLWithPath: try make("still.png") { image in
            var out: UnsafeMutablePointer<VipsImage>?
            XCTAssertEqual(upscale_vips_cast(image, &out, VIPS_FORMAT_UCHAR), 0)
            return try XCTUnwrap(out)
        })))
        let control: [UInt8] = Array("acTL".utf8) + [0, 0, 0, 3, 0, 0, 0, 0] // 3 frames, looping
        let crc = control.reduce(UInt32.max) { crc, byte in
            (0..<8).reduce(crc ^ UInt32(byte)) { c, _ in c & 1 == 1 ? (c >> 1) ^ 0xEDB8_8320 : c >> 1 }
        } ^ UInt32.max
        let chunk = [0, 0, 0, 8] + control + withUnsafeBytes(of: crc.bigEndian, Array.init)
        png.insert(contentsOf: chunk, at: 8 + 25) // after the signature and IHDR
        try Data(png).write(to: URL(fileURLWithPath: path("moving.png")))
        let apng = try run([path("moving.png")])
        XCTAssertEqual(apng.status, 0, apng.stderr)
        XCTAssertTrue(apng.stderr.contains("has 3 frames; only the first is upscaled"), apng.stderr)
        XCTAssertEqual(try header(path("moving Upscaled.png")).width, 986)

        // CMYK without a profile of its own is converted with libvips' generic one, and says so
        // (the note claimed an embedded profile).
        let bare = try make("bare.jpg", from: cmyk) { image in
            var out: UnsafeMutablePointer<VipsImage>?
            XCTAssertEqual(upscale_vips_cast(image, &out, VIPS_FORMAT_UCHAR), 0)
            vips_image_remove(out, "icc-profile-data")
            return try XCTUnwrap(out)
        }
        XCTAssertNil(try blob(bare, "icc-profile-data"))
        let generic = try run([bare])
        XCTAssertEqual(generic.status, 0, generic.stderr)
        XCTAssertTrue(generic.stderr.contains("is CMYK without a profile of its own; converted to sRGB with a generic CMYK profile"), generic.stderr)
    }

    /// A transparent PNG saved as JPEG is flattened onto white, with a note (libvips' own
    /// default was black, without a word); --format and an --output name that disagree are refused.
    func testTransparencyIntoJPEGIsFlattenedOntoWhiteAndFormatMustAgreeWithTheName() throws {
        let rgba = try lumaAlpha("clear.png")
        let result = try run([rgba, "--format", "jpg", "--output", path("flat.jpg")])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.stderr.contains("has transparency and JPEG has none: it is flattened onto white"), result.stderr)
        // Where the photo is darkest its alpha (its own luma) is lowest: white shows through.
        let source = try pixels(rgba), flat = try pixels(path("flat.jpg"))
        let (w, h) = (try header(rgba).width, try header(rgba).height)
        var darkest = (x: 0, y: 0, alpha: 255)
        for y in 8..<(h - 8) {
            for x in 8..<(w - 8) where Int(source[(y * w + x) * 4 + 3]) < darkest.alpha { darkest = (x, y, Int(source[(y * w + x) * 4 + 3])) }
        }
        XCTAssertLessThan(darkest.alpha, 40)
        let at = ((2 * darkest.y) * (2 * w) + 2 * darkest.x) * 3
        XCTAssertGreaterThan(Int(flat[at]) + Int(flat[at + 1]) + Int(flat[at + 2]), 3 * 180, "flattened onto white, not black")
        let disagree = try run([rgba, "--format", "jpg", "--output", path("named.png")])
        XCTAssertEqual(disagree.status, 2, disagree.stderr)
        XCTAssertTrue(disagree.stderr.contains("--format jpg and --output"), disagree.stderr)
        XCTAssertFalse(listing().contains("named.png"))
    }

    /// A lossless WebP (screenshots, graphics) is saved lossless: it came out at quality 90, its
    /// pixels changed. `--quality` still asks for a lossy one.
    func testALosslessWebPStaysLossless() throws {
        // The butterfly at half size, saved as lossless WebP ("[lossless]": libvips' save option).
        _ = try make("shot.webp[lossless]") { image in
            var out: UnsafeMutablePointer<VipsImage>?
            XCTAssertEqual(upscale_vips_shrink(image, &out, 2), 0)
            return try XCTUnwrap(out)
        }
        let source = path("shot.webp")
        // The picture's chunk: "VP8L" lossless, "VP8 " lossy (after a VP8X header and metadata chunks).
        let chunk = { (path: String) throws -> String in
            let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
            return ["VP8L", "VP8 "].first { bytes.range(of: Data($0.utf8)) != nil } ?? "none"
        }
        XCTAssertEqual(try chunk(source), "VP8L", "the source is lossless")
        for arguments in [[source], [source, "--format", "png"], [source, "--quality", "80", "-o", path("lossy.webp")]] {
            let result = try run(arguments)
            XCTAssertEqual(result.status, 0, result.stderr)
        }
        XCTAssertEqual(try chunk(path("shot Upscaled.webp")), "VP8L")
        XCTAssertEqual(try pixels(path("shot Upscaled.webp")), try pixels(path("shot Upscaled.png")), "the WebP's pixels are the PNG's")
        XCTAssertEqual(try chunk(path("lossy.webp")), "VP8 ")
    }

    /// A lossless JPEG XL (read from its header: samples not in XYB) stays lossless, pixels
    /// exact, also with alpha and at 16 bits; it came out at quality 90. A lossy one stays
    /// lossy, and `--quality` makes any JPEG XL lossy.
    func testALosslessJPEGXLStaysLossless() throws {
        let half = { (image: UnsafeMutablePointer<VipsImage>) throws -> UnsafeMutablePointer<VipsImage> in
            var out: UnsafeMutablePointer<VipsImage>?
            XCTAssertEqual(upscale_vips_shrink(image, &out, 2), 0)
            return try XCTUnwrap(out)
        }
        _ = try make("shot.jxl[lossless]", half)
        _ = try make("photo.jxl[Q=80]", half)
        let alpha = try lumaAlpha("alpha.png")
        _ = try make("alpha.jxl[lossless]", from: alpha, half)
        _ = try make("deep.jxl[lossless]", from: path("shot.jxl")) { image in
            var out: UnsafeMutablePointer<VipsImage>?
            XCTAssertEqual(upscale_vips_colourspace(image, &out, VIPS_INTERPRETATION_RGB16), 0)
            return try XCTUnwrap(out)
        }
        XCTAssertEqual(["shot", "photo", "alpha", "deep"].map { StillImage.isLosslessJXL(path("\($0).jxl")) }, [true, false, true, true])
        XCTAssertFalse(StillImage.isLosslessJXL(butterfly))
        for name in ["shot", "photo", "alpha", "deep"] {
            for arguments in [[path("\(name).jxl")], [path("\(name).jxl"), "--format", "png"]] {
                let result = try run(arguments)
                XCTAssertEqual(result.status, 0, result.stderr)
            }
            let out = path("\(name) Upscaled.jxl")
            XCTAssertEqual(StillImage.isLosslessJXL(out), name != "photo", name)
            if name != "photo" { XCTAssertEqual(try pixels(out), try pixels(path("\(name) Upscaled.png")), "\(name): the JPEG XL's pixels are the PNG's") }
        }
        XCTAssertEqual(try run([path("shot.jxl"), "--quality", "80", "-o", path("lossy.jxl")]).status, 0)
        XCTAssertFalse(StillImage.isLosslessJXL(path("lossy.jxl")))
        // In the container form, behind a 70 KB metadata box (only the first 64 KB were read);
        // a JPEG to rebuild (a recompressed JPEG) is lossy by origin.
        func box(_ type: String, _ payload: [UInt8]) -> [UInt8] {
            withUnsafeBytes(of: UInt32(8 + payload.count).bigEndian, Array.init) + Array(type.utf8) + payload
        }
        let naked = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path("shot.jxl"))))
        let start: [UInt8] = [0, 0, 0, 0x0C, 0x4A, 0x58, 0x4C, 0x20, 0x0D, 0x0A, 0x87, 0x0A] + box("ftyp", Array("jxl \0\0\0\0jxl ".utf8))
        try Data(start + box("xml ", [UInt8](repeating: 0x20, count: 70_000)) + box("jxlc", naked)).write(to: URL(fileURLWithPath: path("boxed.jxl")))
        try Data(start + box("jbrd", [0]) + box("jxlc", naked)).write(to: URL(fileURLWithPath: path("rebuilt.jxl")))
        XCTAssertTrue(StillImage.isLosslessJXL(path("boxed.jxl")))
        XCTAssertFalse(StillImage.isLosslessJXL(path("rebuilt.jxl")))
        XCTAssertEqual(try run([path("boxed.jxl")]).status, 0)
        XCTAssertTrue(StillImage.isLosslessJXL(path("boxed Upscaled.jxl")))
    }

    /// A PNG's text chunks (the generation settings AI image tools write under "parameters",
    /// a title in UTF-8) are kept in a PNG output; they were dropped. A JPEG output, which
    /// cannot hold them, says so in a note; --strip drops them.
    func testPNGTextChunksAreKept() throws {
        let plain = try make("plain.png") { image in
            var out: UnsafeMutablePointer<VipsImage>?
            XCTAssertEqual(upscale_vips_shrink(image, &out, 4), 0)
            return try XCTUnwrap(out)
        }
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: plain)))
        XCTAssertEqual(String(decoding: bytes[12..<16], as: UTF8.self), "IHDR")
        let settings = "a photo of a butterfly, Steps: 20, Sampler: Euler a, CFG scale: 7, Seed: 1234"
        // After the signature and the 13-byte IHDR chunk: a tEXt (Latin-1) and an iTXt (UTF-8) chunk.
        bytes.insert(contentsOf: pngChunk("tEXt", Array("parameters".utf8) + [0] + Array(settings.utf8))
                     + pngChunk("iTXt", Array("Title".utf8) + [0, 0, 0, 0, 0] + Array("Café ☕".utf8)), at: 33)
        try Data(bytes).write(to: URL(fileURLWithPath: path("texts.png")))
        let expected = ["parameters": settings, "Title": "Café ☕"]
        XCTAssertEqual(try pngTexts(path("texts.png")), expected, "the source")
        for arguments in [[path("texts.png")], [path("texts.png"), "--strip", "-o", path("stripped.png")]] {
            let result = try run(arguments)
            XCTAssertEqual(result.status, 0, result.stderr)
            XCTAssertFalse(result.stderr.contains("text"), result.stderr)
        }
        XCTAssertEqual(try pngTexts(path("texts Upscaled.png")), expected)
        XCTAssertEqual(try pngTexts(path("stripped.png")), [:])
        let jpeg = try run([path("texts.png"), "--format", "jpg"])
        XCTAssertEqual(jpeg.status, 0, jpeg.stderr)
        XCTAssertTrue(jpeg.stderr.contains("its 2 PNG text entries"), jpeg.stderr)
        XCTAssertTrue(jpeg.stderr.contains("use --format png to keep them"), jpeg.stderr)
    }

    /// A PFM (floats whose white is 1) with a highlight above 1 is read as 0…1 with the highlight
    /// clipped: the picture is the one without the highlight, not black (it was taken as
    /// 0…255). A PFM output holds 0…1 again (it held 0…65535).
    func testPFMIsReadAndWrittenWithWhiteAtOne() throws {
        let photo = try open(butterfly)
        defer { upscale_vips_unref(photo) }
        let width = Int(vips_image_get_width(photo)), height = Int(vips_image_get_height(photo))
        let samples = [UInt8](try pixels(butterfly))
        XCTAssertEqual(samples.count, width * height * 3)
        // PFM rows run bottom to top, little-endian floats (a negative scale says so).
        let pfm = { (name: String, highlight: Bool) throws in
            var data = Data("PF\n\(width) \(height)\n-1.0\n".utf8)
            for y in (0..<height).reversed() {
                for x in 0..<width {
                    for band in 0..<3 {
                        var value = Float(samples[(y * width + x) * 3 + band]) / 255
                        if highlight && x < 10 && y < 10 { value = 1.5 }
                        withUnsafeBytes(of: value.bitPattern.littleEndian) { data.append(contentsOf: $0) }
                    }
                }
            }
            try data.write(to: URL(fileURLWithPath: self.path(name)))
        }
        try pfm("plain.pfm", false)
        try pfm("bright.pfm", true)
        var means: [Double] = []
        for name in ["plain", "bright"] {
            let result = try run([path("\(name).pfm"), "--format", "png"])
            XCTAssertEqual(result.status, 0, result.stderr)
            XCTAssertEqual(result.stderr.contains("samples above 1 (brighter than white) are clipped"), name == "bright", result.stderr)
            let out = [UInt8](try pixels(path("\(name) Upscaled.png")))
            means.append(stride(from: 0, to: out.count, by: 2).reduce(0.0) { $0 + Double(UInt16(out[$1]) | UInt16(out[$1 + 1]) << 8) } / Double(out.count / 2))
        }
        XCTAssertGreaterThan(means[0], 10000, "the photo at its own brightness")
        XCTAssertEqual(means[1], means[0], accuracy: means[0] * 0.01, "a small highlight leaves the picture as it was")
        // Out as PFM: floats of 0…1, as bright as the source.
        let result = try run([path("plain.pfm"), "-o", path("out.pfm")])
        XCTAssertEqual(result.status, 0, result.stderr)
        let written = try open(path("out.pfm"))
        defer { upscale_vips_unref(written) }
        var largest = 0.0
        XCTAssertEqual(upscale_vips_max(written, &largest), 0)
        XCTAssertLessThanOrEqual(largest, 1.0)
        XCTAssertGreaterThan(largest, 0.9)
        let floats = try pixels(path("out.pfm")).withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
        let mean = floats.reduce(0.0) { $0 + Double($1) } / Double(floats.count)
        let sourceMean = samples.reduce(0.0) { $0 + Double($1) } / Double(samples.count) / 255
        XCTAssertEqual(mean, sourceMean, accuracy: sourceMean * 0.02)
    }

    /// A multi-size icon (16, 32 and 64 px wide, smallest first, as favicons list them) is
    /// upscaled from its largest size, with a note; the 16-px one was ("has 3 frames").
    func testAnIconIsUpscaledFromItsLargestSize() throws {
        var entries: [(width: Int, height: Int, png: Data)] = []
        for width in [16, 32, 64] {
            let made = try make("icon\(width).png") { image in
                var out: UnsafeMutablePointer<VipsImage>?
                XCTAssertEqual(upscale_vips_resize_lanczos3(image, &out, Double(width) / Double(vips_image_get_width(image))), 0)
                return try XCTUnwrap(out)
            }
            let (w, h, _, _) = try header(made)
            entries.append((w, h, try Data(contentsOf: URL(fileURLWithPath: made))))
        }
        // ICONDIR, then one ICONDIRENTRY per size (PNG-compressed entries), then the PNGs.
        let little = { (value: Int, bytes: Int) in (0..<bytes).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) } }
        var icon = little(0, 2) + little(1, 2) + little(entries.count, 2)
        var offset = 6 + 16 * entries.count
        for entry in entries {
            icon += [UInt8(entry.width), UInt8(entry.height), 0, 0] + little(1, 2) + little(32, 2) + little(entry.png.count, 4) + little(offset, 4)
            offset += entry.png.count
        }
        try Data(icon + entries.flatMap { [UInt8]($0.png) }).write(to: URL(fileURLWithPath: path("icon.ico")))
        let largest = try XCTUnwrap(entries.last)
        let result = try run([path("icon.ico"), "--scale", "2", "--format", "png"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.stderr.contains("holds the icon at 3 sizes; the largest (\(largest.width)x\(largest.height)) is upscaled"), result.stderr)
        let out = try header(path("icon Upscaled.png"))
        XCTAssertEqual([out.width, out.height], [2 * largest.width, 2 * largest.height])
    }

    /// One PNG chunk: length, type, data, CRC-32 of type and data.
    private func pngChunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
        let body = Array(type.utf8) + data
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in body {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 != 0 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        let bigEndian = { (value: UInt32) in (0..<4).map { UInt8(truncatingIfNeeded: value >> (24 - 8 * $0)) } }
        return bigEndian(UInt32(data.count)) + body + bigEndian(~crc)
    }

    /// A PNG's text entries as libvips reads them ("png-comment-N-key"), by key.
    private func pngTexts(_ path: String) throws -> [String: String] {
        let image = try open(path)
        defer { upscale_vips_unref(image) }
        guard let names = vips_image_get_fields(image) else { return [:] }
        defer { g_strfreev(names) }
        var texts: [String: String] = [:]
        var i = 0
        while let name = names[i] {
            let parts = String(cString: name).split(separator: "-", maxSplits: 3)
            var value: UnsafePointer<CChar>?
            if parts.count == 4, parts[0] == "png", parts[1] == "comment", vips_image_get_string(image, name, &value) == 0, let value {
                texts[String(parts[3])] = String(cString: value)
            }
            i += 1
        }
        return texts
    }

    func testBadImagesFailInOneLineAndLeaveNothing() throws {
        FileManager.default.createFile(atPath: path("empty.jpg"), contents: Data())
        try Data("not an image".utf8).write(to: URL(fileURLWithPath: path("text.png")))
        let bytes = try Data(contentsOf: URL(fileURLWithPath: butterfly))
        try bytes.prefix(bytes.count / 3).write(to: URL(fileURLWithPath: path("truncated.jpg")))
        try Data(Damage.zeroRun.apply(to: [UInt8](bytes), seed: 11)).write(to: URL(fileURLWithPath: path("zeroed.jpg")))
        try FileManager.default.createDirectory(atPath: path("folder.jpg"), withIntermediateDirectories: true)
        let before = listing()
        for (name, extra, expected) in [("empty.jpg", [String](), "is empty"), ("text.png", [], "is not an image libvips can read"),
                                        ("folder.jpg", [], "is a folder; give an image file"),
                                        ("truncated.jpg", [], "truncated.jpg"), ("butterfly.jpg", ["--width", "17000", "--format", "webp"], "webp")] {
            let input = name == "butterfly.jpg" ? butterfly : path(name)
            let result = try run([input, "--output", dir.path] + extra)
            XCTAssertEqual(result.status, 1, "\(name): \(result.stderr)")
            XCTAssertEqual(result.stderr.split(separator: "\n").count, 1, result.stderr)
            XCTAssertTrue(result.stderr.contains(expected), "\(name): \(result.stderr)")
            XCTAssertEqual(listing(), before, "\(name) left files")
        }
        // An output name libvips has no saver for: a usage error before any work, nothing written.
        for (output, expected) in [(path("no-such-folder"), "is not a folder and its name has no extension"),
                                   (path("big.mp4"), "this libvips cannot write .mp4 files")] {
            let result = try run([butterfly, "--output", output])
            XCTAssertEqual(result.status, 2, "\(output): \(result.stderr)")
            XCTAssertEqual(result.stderr.split(separator: "\n").count, 1, result.stderr)
            XCTAssertTrue(result.stderr.contains(expected), "\(output): \(result.stderr)")
            XCTAssertEqual(listing(), before, "\(output) left files")
        }
        // A folder without room for the working file: said before any work, with what it needs
        // (it failed at the first strip that did not fit, naming a hidden file).
        let tight = try DamageRun.run(CLITests.binary.path, [butterfly, "--output", dir.path + "/"], timeout: 60,
                                      environment: ["UPSCALE_TEST_FREE_BYTES": "1000000"])
        XCTAssertEqual(tight.status, 1, tight.stderr)
        XCTAssertTrue(tight.stderr.contains("has 1 MB free; upscaling '\(butterfly)' to 986x712 needs 2 MB there for its working file"), tight.stderr)
        XCTAssertEqual(listing(), before)
        // A folder nothing can be created in (/proc): the folder named, not the strip file inside it.
        let unwritable = try run([butterfly, "--output", "/proc/"])
        XCTAssertEqual(unwritable.status, 1, unwritable.stderr)
        XCTAssertEqual(unwritable.stderr, "error: cannot write in '/proc': No such file or directory; pick another --output folder\n")
        // The photo itself as the output, even with --overwrite: refused, the photo untouched.
        try bytes.write(to: URL(fileURLWithPath: path("photo.jpg")))
        let itself = try run([path("photo.jpg"), "--output", path("photo.jpg"), "--overwrite"])
        XCTAssertEqual(itself.status, 2, itself.stderr)
        XCTAssertTrue(itself.stderr.contains("is the input itself"), itself.stderr)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: path("photo.jpg"))), bytes)
        // Damage in the middle of a JPEG: an output, or one clean error, never a crash.
        let zeroed = try run([path("zeroed.jpg")])
        XCTAssertTrue([0, 1].contains(zeroed.status), zeroed.stderr)
        // 4 KB zeroed in the middle of the scan: libjpeg only warns and fills in what it can (the
        // lower half came out shifted and mixed up), which went by without a word. Now a note
        // names the damage; a sound photo gets none.
        var scan = [UInt8](try Data(contentsOf: CLITests.fixtures.appendingPathComponent("fruits.jpg")))
        scan.replaceSubrange(30000..<34096, with: [UInt8](repeating: 0, count: 4096))
        try Data(scan).write(to: URL(fileURLWithPath: path("scan.jpg")))
        let damaged = try run([path("scan.jpg"), "--width", "600"])
        XCTAssertEqual(damaged.status, 0, damaged.stderr)
        XCTAssertTrue(damaged.stderr.contains("'\(path("scan.jpg"))' is damaged (Corrupt JPEG data: "), damaged.stderr)
        let sound = try run([butterfly, "--width", "600", "--output", dir.path])
        XCTAssertEqual(sound.status, 0, sound.stderr)
        XCTAssertFalse(sound.stderr.contains("damaged"), sound.stderr)
    }

    /// TIFFs in Lab, in linear scRGB floats, in 32-bit integers, in gray floats of 0…1 and in
    /// signed 16- and 32-bit integers come out as the photo they hold, in 16-bit sRGB or gray:
    /// their mean level within 1% of the original's. They were cast sample by sample (floats
    /// of 0…1 to black, 32-bit integers clipped to white, Lab read as RGB, signed integers at
    /// half level).
    func testLabFloatAnd32BitTIFFsAreConvertedNotCast() throws {
        let mean = { (path: String) throws -> Double in
            let image = try self.open(path)
            defer { upscale_vips_unref(image) }
            var sixteen: UnsafeMutablePointer<VipsImage>?
            XCTAssertEqual(upscale_vips_colourspace(image, &sixteen, VIPS_INTERPRETATION_RGB16), 0)
            defer { upscale_vips_unref(sixteen!) }
            var size = 0
            let memory = try XCTUnwrap(vips_image_write_to_memory(sixteen!, &size))
            defer { g_free(memory) }
            let samples = UnsafeBufferPointer(start: memory.assumingMemoryBound(to: UInt16.self), count: size / 2)
            return samples.reduce(0.0) { $0 + Double($1) } / Double(samples.count)
        }
        let reference = try mean(butterfly)
        let grayReference = try mean(try make("gray16.tif") { image in
            var out: UnsafeMutablePointer<VipsImage>?
            XCTAssertEqual(upscale_vips_colourspace(image, &out, VIPS_INTERPRETATION_GREY16), 0)
            return try XCTUnwrap(out)
        })
        /// `image` in `space`, every sample times `factor` and cast to `format`.
        func scaled(_ image: UnsafeMutablePointer<VipsImage>, _ space: VipsInterpretation, _ factor: Double,
                    _ format: VipsBandFormat) throws -> UnsafeMutablePointer<VipsImage> {
            var converted: UnsafeMutablePointer<VipsImage>?
            XCTAssertEqual(upscale_vips_colourspace(image, &converted, space), 0)
            defer { upscale_vips_unref(converted!) }
            var out: UnsafeMutablePointer<VipsImage>?
            XCTAssertEqual(upscale_vips_scale_cast(converted!, &out, factor, format), 0)
            return try XCTUnwrap(out)
        }
        let grays: Set = ["grayfloat.tif", "signed16.tif"]
        let variants: [(String, (UnsafeMutablePointer<VipsImage>) throws -> UnsafeMutablePointer<VipsImage>)] = [
            ("grayfloat.tif", { try scaled($0, VIPS_INTERPRETATION_B_W, 1.0 / 255, VIPS_FORMAT_FLOAT) }),
            ("signed16.tif", { try scaled($0, VIPS_INTERPRETATION_GREY16, 0.5, VIPS_FORMAT_SHORT) }),
            ("signed32.tif", { try scaled($0, VIPS_INTERPRETATION_sRGB, 2147483647.0 / 255, VIPS_FORMAT_INT) }),
            ("lab.tif", { image in
                var out: UnsafeMutablePointer<VipsImage>?
                XCTAssertEqual(upscale_vips_colourspace(image, &out, VIPS_INTERPRETATION_LAB), 0)
                return try XCTUnwrap(out)
            }),
            ("linear.tif", { image in
                var out: UnsafeMutablePointer<VipsImage>?
                XCTAssertEqual(upscale_vips_colourspace(image, &out, VIPS_INTERPRETATION_scRGB), 0)
                return try XCTUnwrap(out)
            }),
            ("wide.tif", { image in
                var out: UnsafeMutablePointer<VipsImage>?
                XCTAssertEqual(upscale_vips_cast_shift(image, &out, VIPS_FORMAT_UINT), 0)
                return try XCTUnwrap(out)
            }),
        ]
        for (name, transform) in variants {
            let input = try make(name, transform)
            let result = try run([input, "--scale", "2", "--output", path("out-" + name)])
            XCTAssertEqual(result.status, 0, result.stderr)
            let made = try header(path("out-" + name))
            XCTAssertEqual(made.format, VIPS_FORMAT_USHORT, name)
            XCTAssertEqual(try mean(path("out-" + name)) / (grays.contains(name) ? grayReference : reference), 1, accuracy: 0.01, name)
        }
    }

    /// --quality reaches the savers: lower is smaller for JPEG, WebP, JPEG XL and JPEG 2000.
    /// JPEG XL under 5 (libvips maps it to a distance libjxl refuses) was saved at its default,
    /// the size of quality 90, and JPEG 2000 ignored the option.
    func testQualityReachesEverySaverThatTakesOne() throws {
        var jp2Source = ""
        for ext in ["jpg", "webp", "jxl", "jp2"] {
            let input: String
            if ext == "jp2" {
                jp2Source = try make("source.jp2") { image in
                    var out: UnsafeMutablePointer<VipsImage>?
                    XCTAssertEqual(upscale_vips_cast(image, &out, VIPS_FORMAT_UCHAR), 0)
                    return try XCTUnwrap(out)
                }
                input = jp2Source
            } else {
                input = butterfly
            }
            var sizes: [Int] = []
            for quality in [1, 90] {
                let out = path("q\(quality).\(ext)")
                let result = try run([input, "--width", "600", "--quality", "\(quality)", "--output", out])
                XCTAssertEqual(result.status, 0, result.stderr)
                XCTAssertFalse(result.stderr.contains("encode.cc"), result.stderr)
                // JPEG 2000's resolution levels are not frames (it said "has 3 frames; only the first is upscaled").
                XCTAssertFalse(result.stderr.contains("frames"), result.stderr)
                sizes.append(try XCTUnwrap(try FileManager.default.attributesOfItem(atPath: out)[.size] as? Int))
            }
            XCTAssertLessThan(Double(sizes[0]), Double(sizes[1]) * 0.5, "\(ext): \(sizes)")
        }
        // A lossless format has no quality: said, not silently ignored.
        for ext in ["png", "tif"] {
            let result = try run([butterfly, "--width", "600", "--quality", "50", "--output", path("q.\(ext)")])
            XCTAssertEqual(result.status, 0, result.stderr)
            XCTAssertTrue(result.stderr.contains("--quality is for lossy formats") && result.stderr.contains(".\(ext) is saved losslessly"), result.stderr)
        }
        for ext in ["jpg", "j2k"] {
            let lossy = try run([butterfly, "--width", "600", "--quality", "50", "--output", path("q50.\(ext)")])
            XCTAssertFalse(lossy.stderr.contains("--quality is for lossy formats"), lossy.stderr)
        }
    }

    /// TIFF output is compressed losslessly as its input was: libvips wrote every TIFF
    /// uncompressed (5-46x the size of an LZW or Deflate input). An uncompressed input stays
    /// uncompressed; the pixels are those of a PNG output of the same job.
    func testTIFFOutputKeepsLosslessCompression() throws {
        let reference = path("reference.png")
        XCTAssertEqual(try run([butterfly, "--output", reference]).status, 0)
        let expected = try pixels(reference)
        // Compression tag 259: 1 none, 5 LZW, 8 Deflate.
        for (name, compression, tag) in [("none", "none", 1), ("lzw", "lzw", 5), ("deflate", "deflate", 8), ("jpeg", "jpeg", 5)] {
            let input = try make("\(name).tif") { image in
                var out: UnsafeMutablePointer<VipsImage>?
                XCTAssertEqual(upscale_vips_copy_as(image, &out, VIPS_INTERPRETATION_sRGB), 0)
                return try XCTUnwrap(out)
            }
            // Re-saved with the compression asked for (make saves with libvips' default, none).
            let source = try open(input)
            XCTAssertEqual(upscale_vips_write(source, path("\(name)-c.tif") + "[compression=\(compression)]"), 0)
            upscale_vips_unref(source)
            XCTAssertEqual(StillImage.tiffCompressionTag(path("\(name)-c.tif")), name == "none" ? 1 : name == "jpeg" ? 7 : tag)
            let out = path("\(name)-up.tif")
            let result = try run([path("\(name)-c.tif"), "--output", out])
            XCTAssertEqual(result.status, 0, result.stderr)
            XCTAssertEqual(StillImage.tiffCompressionTag(out), tag, name)
            if name == "jpeg" { continue }
            XCTAssertEqual(try pixels(out), expected, "\(name): lossless")
            let size = try XCTUnwrap(try FileManager.default.attributesOfItem(atPath: out)[.size] as? Int)
            if tag != 1 { XCTAssertLessThan(size, expected.count * 3 / 4, "\(name): compressed") }
        }
        // 16-bit samples get Deflate where the input's method is not kept: LZW made them larger
        // than uncompressed.
        _ = try make("deep.tif[compression=lzw]") { image in
            var out: UnsafeMutablePointer<VipsImage>?
            XCTAssertEqual(upscale_vips_colourspace(image, &out, VIPS_INTERPRETATION_RGB16), 0)
            return try XCTUnwrap(out)
        }
        let deep = path("deep.tif")
        XCTAssertEqual(StillImage.tiffCompressionTag(deep), 5)
        for ext in ["tif", "png"] { XCTAssertEqual(try run([deep, "--output", path("deep-up.\(ext)")]).status, 0) }
        XCTAssertEqual(StillImage.tiffCompressionTag(path("deep-up.tif")), 8)
        let deepPixels = try pixels(path("deep-up.png"))
        XCTAssertEqual(try pixels(path("deep-up.tif")), deepPixels, "lossless")
        let deepSize = try XCTUnwrap(try FileManager.default.attributesOfItem(atPath: path("deep-up.tif"))[.size] as? Int)
        XCTAssertLessThan(deepSize, deepPixels.count * 9 / 10, "smaller than uncompressed")
    }

    /// `--strip` into WebP leaves no EXIF or XMP chunk: libvips 8.14's saver wrote an EXIF
    /// block (resolution, size, colour space) whatever it was told.
    func testStripIntoWebPLeavesNoMetadataChunk() throws {
        for strip in [true, false] {
            let out = path("strip-\(strip).webp")
            let result = try run([butterfly, "--output", out] + (strip ? ["--strip"] : []))
            XCTAssertEqual(result.status, 0, result.stderr)
            let bytes = try Data(contentsOf: URL(fileURLWithPath: out))
            // RIFF's length is the file's, less its first 8 bytes.
            XCTAssertEqual(bytes.subdata(in: 4..<8).reversed().reduce(0) { $0 << 8 | Int($1) }, bytes.count - 8)
            XCTAssertEqual(bytes.range(of: Data("EXIF".utf8)) != nil, !strip, "strip \(strip)")
            XCTAssertEqual(try blob(out, "exif-data") != nil, !strip)
            XCTAssertEqual(try header(out).width, 2 * (try header(butterfly)).width)
        }
        // A wide-gamut picture is turned into sRGB and left with no profile: the saver wrote the
        // sRGB one it was turned into.
        let wide = try photo("wide.jpg", profile: try builtInProfile("p3"))
        let out = path("wide-stripped.webp")
        let result = try run([wide, "--strip", "--output", out])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertNil(try Data(contentsOf: URL(fileURLWithPath: out)).range(of: Data("ICCP".utf8)))
        XCTAssertNil(try blob(out, "icc-profile-data"))
        XCTAssertNotNil(try blob(path("strip-false.webp"), "exif-data"), "unstripped keeps its metadata")
    }

    /// Radiance HDR (.hdr, packed RGBE) and FITS are stills: they went down the video path
    /// ("has no video stream (audio only?)"). HDR's linear light comes out as bright as the
    /// photo it was made from; highlights above white are clipped, with a note.
    func testRadianceHDRAndFITSAreStills() throws {
        let photoMean = try bandMeans(butterfly).reduce(0, +) / 3
        for (name, gain) in [("plain", 1.0), ("bright", 4.0)] {
            let hdr = try make("\(name).hdr") { image in
                var linear: UnsafeMutablePointer<VipsImage>?, scaled: UnsafeMutablePointer<VipsImage>?
                XCTAssertEqual(upscale_vips_colourspace(image, &linear, VIPS_INTERPRETATION_scRGB), 0)
                defer { linear.map(upscale_vips_unref) }
                XCTAssertEqual(upscale_vips_scale_cast(try XCTUnwrap(linear), &scaled, gain, VIPS_FORMAT_FLOAT), 0)
                return try XCTUnwrap(scaled)
            }
            let result = try run([hdr, "--output", path("\(name).png")])
            XCTAssertEqual(result.status, 0, result.stderr)
            XCTAssertEqual(result.stderr.contains("samples above 1 (brighter than white) are clipped"), name == "bright", result.stderr)
            let (w, h, bands, format) = try header(path("\(name).png"))
            let (sw, sh, _, _) = try header(butterfly)
            XCTAssertEqual([w, h, bands], [2 * sw, 2 * sh, 3])
            XCTAssertEqual(format, VIPS_FORMAT_USHORT)
            let words = try pixels(path("\(name).png")).withUnsafeBytes { Array($0.bindMemory(to: UInt16.self)) }
            let mean = words.reduce(0.0) { $0 + Double($1) } / Double(words.count) / 257
            if name == "plain" { XCTAssertEqual(mean, photoMean, accuracy: 1.5, "as bright as the photo") }
            else { XCTAssertGreaterThan(mean, photoMean + 40, "four times the light") }
        }
        // In as .hdr, out as .hdr by default, at the photo's brightness.
        XCTAssertEqual(try run([path("plain.hdr")]).status, 0)
        XCTAssertEqual(try header(path("plain Upscaled.hdr")).width, 2 * (try header(butterfly)).width)
        let fits = try make("photo.fits") { image in
            var out: UnsafeMutablePointer<VipsImage>?
            XCTAssertEqual(upscale_vips_copy_as(image, &out, VIPS_INTERPRETATION_sRGB), 0)
            return try XCTUnwrap(out)
        }
        let result = try run([fits, "--output", path("fits.png")])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(try header(path("fits.png")).width, 2 * (try header(butterfly)).width)
        // Floats far past 255 (photon counts) are scaled so that the brightest is white: they came
        // out white. The picture's levels are the photo's, 40 times over.
        let counts = try make("counts.fits") { image in
            var out: UnsafeMutablePointer<VipsImage>?
            XCTAssertEqual(upscale_vips_scale_cast(image, &out, 40, VIPS_FORMAT_FLOAT), 0)
            return try XCTUnwrap(out)
        }
        var brightest = 0.0
        let source = try open(butterfly)
        XCTAssertEqual(upscale_vips_max(source, &brightest), 0)
        upscale_vips_unref(source)
        let measured = try run([counts, "--output", path("counts.png")])
        XCTAssertEqual(measured.status, 0, measured.stderr)
        XCTAssertTrue(measured.stderr.contains("scaled so that the brightest is white"), measured.stderr)
        let words = try pixels(path("counts.png")).withUnsafeBytes { Array($0.bindMemory(to: UInt16.self)) }
        let countsMean = words.reduce(0.0) { $0 + Double($1) } / Double(words.count) / 257
        XCTAssertEqual(countsMean, photoMean * 255 / brightest, accuracy: 2, "the photo's levels")
    }

    /// What a killed still job left in a folder (its temporary file and its strip file, which
    /// can be gigabytes) is removed by the next still job there; only video jobs cleaned up
    /// before. A live process's temporary file stays.
    func testAStillJobRemovesWhatAKilledOneLeft() throws {
        let gone = Process()
        gone.executableURL = URL(fileURLWithPath: "/bin/true")
        try gone.run()
        gone.waitUntilExit()
        let stale = PartialFile.temporaryPath(for: path("fruits Upscaled.jpg"), pid: gone.processIdentifier) + ".jpg"
        for name in [stale, StillImage.stripFile(for: stale)] { XCTAssertTrue(FileManager.default.createFile(atPath: name, contents: Data(count: 4096))) }
        let live = PartialFile.temporaryPath(for: path("other Upscaled.jpg"), pid: getpid()) + ".jpg"
        XCTAssertTrue(FileManager.default.createFile(atPath: live, contents: Data()))
        XCTAssertEqual(listing().count, 3)
        let result = try run([butterfly, "--width", "300", "--output", path("small.jpg")])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(listing(), [URL(fileURLWithPath: live).lastPathComponent, "small.jpg"])
    }

    /// .jfif and .jpe are JPEGs, and BMP loads (and saves) through libvips' ImageMagick loader:
    /// stills in their own format. They were taken as video and became a one-frame HEVC .mov
    /// (and `--format png` was refused). `--format heic` with a .heif name agrees. So are
    /// Netpbm files, and pictures without an extension, by their first bytes.
    func testJFIFAndBMPAreStillsInTheirFormat() throws {
        try FileManager.default.copyItem(atPath: butterfly, toPath: path("scan.jfif"))
        let bmp = try make("paint.bmp") { image in
            var copy: UnsafeMutablePointer<VipsImage>?
            XCTAssertEqual(upscale_vips_cast(image, &copy, VIPS_FORMAT_UCHAR), 0)
            return try XCTUnwrap(copy)
        }
        let source = try header(butterfly)
        for (input, output) in [(path("scan.jfif"), "scan Upscaled.jpg"), (bmp, "paint Upscaled.bmp")] {
            let result = try run([input, "--width", "600"])
            XCTAssertEqual(result.status, 0, result.stderr)
            let made = try header(path(output))
            XCTAssertEqual(made.width, 600, output)
            XCTAssertEqual(made.height, (600 * source.height + source.width / 2) / source.width, output)
        }
        let png = try run([bmp, "--width", "600", "--format", "png"])
        XCTAssertEqual(png.status, 0, png.stderr)
        XCTAssertEqual(try header(path("paint Upscaled.png")).width, 600)
        // Netpbm by its extension, a JPEG without one (or with a backup suffix) by its first
        // bytes: stills, not one-frame HEVC movies, and JPEGs out (they came out as PNGs 25 times
        // the size, with a note that "this libvips cannot write . files").
        let ppm = try make("scan.ppm") { image in
            var copy: UnsafeMutablePointer<VipsImage>?
            XCTAssertEqual(upscale_vips_cast(image, &copy, VIPS_FORMAT_UCHAR), 0)
            return try XCTUnwrap(copy)
        }
        try FileManager.default.copyItem(atPath: butterfly, toPath: path("photo"))
        try FileManager.default.copyItem(atPath: butterfly, toPath: path("IMG_1.JPG_original"))
        // An AVIF whose major brand is "mif1" ("avif" among the compatible ones) stays AVIF.
        var avif = try Data(contentsOf: CLITests.fixtures.appendingPathComponent("butterfly-p3.avif"))
        avif.replaceSubrange(8..<12, with: Data("mif1".utf8))
        try avif.write(to: URL(fileURLWithPath: path("picture")))
        for (input, output) in [(ppm, "scan Upscaled.ppm"), (path("photo"), "photo Upscaled.jpg"), (path("IMG_1.JPG_original"), "IMG_1.JPG_original Upscaled.jpg"),
                                (path("picture"), "picture Upscaled.avif")] {
            let result = try run([input, "--width", "600"])
            XCTAssertEqual(result.status, 0, result.stderr)
            XCTAssertFalse(result.stderr.contains("cannot write"), result.stderr)
            if output.hasSuffix(".jpg") { XCTAssertEqual(StillImage.sniffedExtension(path(output)), "jpg", output) }
            let made = try header(path(output))
            XCTAssertEqual(made.width, 600, output)
            if input != path("picture") { XCTAssertEqual(made.height, (600 * source.height + source.width / 2) / source.width, output) }
        }
        // The camera file and its backup in one batch: two outputs (they clashed, and the batch stopped).
        try FileManager.default.copyItem(atPath: butterfly, toPath: path("IMG_1.JPG"))
        try FileManager.default.removeItem(atPath: path("IMG_1.JPG_original Upscaled.jpg"))
        let both = try run([path("IMG_1.JPG"), path("IMG_1.JPG_original"), "--width", "300"])
        XCTAssertEqual(both.status, 0, both.stderr)
        XCTAssertEqual(try header(path("IMG_1 Upscaled.jpg")).width, 300)
        XCTAssertEqual(try header(path("IMG_1.JPG_original Upscaled.jpg")).width, 300, listing().joined(separator: ", "))
        // A camera raw file (TIFF inside) is refused in one line: read as a TIFF it gave its preview.
        try FileManager.default.copyItem(atPath: try make("raw.tif") { image in
            var copy: UnsafeMutablePointer<VipsImage>?
            XCTAssertEqual(upscale_vips_cast(image, &copy, VIPS_FORMAT_UCHAR), 0)
            return try XCTUnwrap(copy)
        }, toPath: path("DSC_0001.NEF"))
        let raw = try run([path("DSC_0001.NEF"), "--width", "600"])
        XCTAssertEqual(raw.status, 1, raw.stderr)
        XCTAssertEqual(raw.stderr, "error: '\(path("DSC_0001.NEF"))' is a camera raw file; upscale reads developed pictures: export it as TIFF or JPEG first (darktable, RawTherapee, Lightroom)\n")
        XCTAssertFalse(listing().contains { $0.hasPrefix("DSC_0001 Upscaled") })
        // A raw Motion JPEG stream starts as a JPEG does, and is video: every picture, in a movie.
        let avi = CLITests.fixtures.appendingPathComponent("street-mjpeg.avi").path
        try Remuxer.copy(avi, to: path("camera.mjpeg"))
        let motion = try run([path("camera.mjpeg"), "--width", "192", "--preset", "ultrafast"])
        XCTAssertEqual(motion.status, 0, motion.stderr)
        let pictures = { (file: String) in try MediaProbe.packets(file, stream: try XCTUnwrap(MediaProbe.info(file).videoStreamIndex)).count }
        XCTAssertEqual(try pictures(path("camera Upscaled.mov")), try pictures(avi))
        let heif = try run([butterfly, "--width", "300", "--format", "heic", "--output", path("small.heif")])
        XCTAssertEqual(heif.status, 0, heif.stderr)
        XCTAssertEqual(try header(path("small.heif")).width, 300)
    }

    func testMixedVideoAndImageBatch() throws {
        try FileManager.default.createDirectory(atPath: path("out"), withIntermediateDirectories: true)
        let clip = CLITests.fixtures.appendingPathComponent("street-2s.mp4").path
        let result = try run([clip, butterfly, "--width", "320", "--preset", "ultrafast", "--output", path("out")])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(((try? FileManager.default.contentsOfDirectory(atPath: path("out"))) ?? []).sorted(),
                       ["butterfly Upscaled.jpg", "street-2s Upscaled.mp4"])
        XCTAssertEqual(try header(path("out/butterfly Upscaled.jpg")).width, 320)
    }
}
