import CVips
import Foundation

/// The colour description a HEIF or AVIF file gives in an `nclx` colour box (code points of
/// ITU-T H.273: primaries, transfer, matrix) rather than an ICC profile, as Android, browsers'
/// AVIF and HDR cameras write it. libvips 8.14 reads only the pixels ("ignoring nclx profile"):
/// a Display P3 picture was written untagged, shown as sRGB (its greens and reds duller), and an
/// HDR one (PQ, HLG) as if it were SDR.
struct HEIFColour: Equatable {
    let primaries: Int
    let transfer: Int
    let matrix: Int

    /// What the output does with it.
    enum Reading: Equatable {
        /// sRGB or BT.709 colours, or nothing said: read as sRGB, as libvips does.
        case asSRGB
        /// Display P3 (P3 primaries, D65, sRGB curve): tagged with the Display P3 ICC profile.
        case displayP3
        /// Anything else (BT.2020, PQ, HLG, P3 with another curve …): named, kept as samples.
        case unread(String)
    }

    var reading: Reading {
        // H.273: primaries 1 BT.709, 2 unspecified, 12 P3-D65 (Display P3); transfer 1/6/14/15
        // BT.709-like, 2 unspecified, 13 sRGB, 16 PQ, 18 HLG.
        let srgbCurve = [2, 13].contains(transfer)
        if [1, 2].contains(primaries) && (srgbCurve || [1, 6, 14, 15].contains(transfer)) { return .asSRGB }
        if primaries == 12 && srgbCurve { return .displayP3 }
        let names = [9: "BT.2020", 12: "Display P3", 11: "DCI-P3", 1: "BT.709"]
        let curves = [16: "PQ (HDR)", 18: "HLG (HDR)", 8: "linear", 1: "BT.709", 6: "BT.709", 13: "sRGB"]
        let what = [names[primaries] ?? "primaries \(primaries)", curves[transfer] ?? "transfer \(transfer)"]
        return .unread(what.joined(separator: ", "))
    }

    /// The first `nclx` colour box of `path`'s item properties (meta → iprp → ipco → colr), or
    /// nil where the file is not HEIF/AVIF or has none.
    static func of(_ path: String) -> HEIFColour? {
        guard let file = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? file.close() }
        guard let head = try? file.read(upToCount: 8), head.count == 8, Data(head[4..<8]) == Data("ftyp".utf8) else { return nil }
        // The top-level boxes, by their sizes, to `meta` (read whole: item properties are small).
        var offset: UInt64 = 0
        for _ in 0..<64 {
            guard (try? file.seek(toOffset: offset)) != nil, let header = try? file.read(upToCount: 16), header.count >= 8 else { return nil }
            let bytes = [UInt8](header)
            var size = UInt64(number(bytes, 0, 4)), headerSize: UInt64 = 8
            if size == 1, bytes.count == 16 {
                size = UInt64(number(bytes, 8, 8))
                headerSize = 16
            }
            guard size >= headerSize else { return nil }
            if String(decoding: bytes[4..<8], as: UTF8.self) == "meta" {
                guard size <= 16 << 20, (try? file.seek(toOffset: offset + headerSize)) != nil,
                      let body = try? file.read(upToCount: Int(size - headerSize)) else { return nil }
                // A full box: version and flags first.
                return find(in: [UInt8](body), from: 4, path: ["iprp", "ipco", "colr"][...])
            }
            offset += size
        }
        return nil
    }

    /// Walks the boxes of `bytes` from `start` down `path`; at its end, reads an nclx colour box.
    private static func find(in bytes: [UInt8], from start: Int, to end: Int? = nil, path: ArraySlice<String>) -> HEIFColour? {
        let end = end ?? bytes.count
        var at = start
        while at + 8 <= end {
            let size = number(bytes, at, 4)
            guard size >= 8, at + size <= end else { return nil }
            if String(decoding: bytes[(at + 4)..<(at + 8)], as: UTF8.self) == path.first {
                if path.count > 1 {
                    if let found = find(in: bytes, from: at + 8, to: at + size, path: path.dropFirst()) { return found }
                } else if size >= 8 + 4 + 7, String(decoding: bytes[(at + 8)..<(at + 12)], as: UTF8.self) == "nclx" {
                    return HEIFColour(primaries: number(bytes, at + 12, 2), transfer: number(bytes, at + 14, 2), matrix: number(bytes, at + 16, 2))
                }
            }
            at += size
        }
        return nil
    }

    /// The big-endian number of `count` bytes at `at`.
    private static func number(_ bytes: [UInt8], _ at: Int, _ count: Int) -> Int {
        bytes[at..<(at + count)].reduce(0) { $0 << 8 | Int($1) }
    }
}

extension StillImage {
    /// One of libvips' built-in ICC profiles ("srgb", "p3", "cmyk"), as bytes.
    public static func builtInProfile(_ name: String) -> Data? {
        try? ImagePlanes.start()
        guard let profile = upscale_vips_profile(name) else { return nil }
        defer { upscale_vips_blob_unref(profile) }
        var length = 0
        guard let bytes = upscale_vips_blob_bytes(profile, &length) else { return nil }
        return Data(bytes: bytes, count: length)
    }
}
