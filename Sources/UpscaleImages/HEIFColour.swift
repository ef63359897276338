import CVips
import Foundation

/// The colour description a HEIF or AVIF file gives in an `nclx` colour box (code points of
/// ITU-T H.273; primaries and transfer are read, the matrix concerns only the decoder) rather
/// than an ICC profile, as Android, browsers' AVIF and HDR cameras write it. libvips 8.14 reads only the pixels ("ignoring nclx profile"):
/// a Display P3 picture was written untagged, shown as sRGB (its greens and reds duller), and an
/// HDR one (PQ, HLG) as if it were SDR.
struct HEIFColour: Equatable {
    let primaries: Int
    let transfer: Int

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

    /// The `nclx` colour box of `path`'s primary picture (meta → iprp → ipco, associated with
    /// the item `pitm` names through `ipma`: a thumbnail, alpha or gain map may have its own),
    /// or nil where the file is not HEIF/AVIF or gives none.
    static func of(_ path: String) -> HEIFColour? {
        guard let file = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? file.close() }
        guard let head = try? file.read(upToCount: 8), head.count == 8, Data(head[4..<8]) == Data("ftyp".utf8) else { return nil }
        // The top-level boxes, by their sizes, to `meta` (read whole: item properties are small).
        var offset: UInt64 = 0
        for _ in 0..<64 {
            guard (try? file.seek(toOffset: offset)) != nil, let header = try? file.read(upToCount: 16), header.count >= 8 else { return nil }
            let bytes = [UInt8](header)
            var size = UInt64(truncatingIfNeeded: number(bytes, 0, 4) ?? 0), headerSize: UInt64 = 8
            if size == 1, bytes.count == 16 {
                size = UInt64(truncatingIfNeeded: number(bytes, 8, 8) ?? 0)
                headerSize = 16
            }
            guard size >= headerSize else { return nil }
            if String(decoding: bytes[4..<8], as: UTF8.self) == "meta" {
                guard size <= 16 << 20, (try? file.seek(toOffset: offset + headerSize)) != nil,
                      let body = try? file.read(upToCount: Int(size - headerSize)) else { return nil }
                return primaryColour(meta: [UInt8](body))
            }
            offset += size
        }
        return nil
    }

    /// The boxes of `bytes[range]`: type and the range of each box's content.
    private static func boxes(_ bytes: [UInt8], _ range: Range<Int>) -> [(type: String, content: Range<Int>)] {
        var out: [(String, Range<Int>)] = [], at = range.lowerBound
        while at + 8 <= range.upperBound, let size = number(bytes, at, 4), size >= 8, at + size <= range.upperBound {
            out.append((String(decoding: bytes[(at + 4)..<(at + 8)], as: UTF8.self), (at + 8)..<(at + size)))
            at += size
        }
        return out
    }

    /// The meta box's content (a full box: version and flags first) → the primary item's nclx.
    private static func primaryColour(meta bytes: [UInt8]) -> HEIFColour? {
        guard bytes.count >= 4 else { return nil }
        let children = boxes(bytes, 4..<bytes.count)
        var primary: Int?
        if let pitm = children.first(where: { $0.type == "pitm" })?.content, pitm.count >= 6 {
            primary = bytes[pitm.lowerBound] == 0 ? number(bytes, pitm.lowerBound + 4, 2) : number(bytes, pitm.lowerBound + 4, 4)
        }
        guard let iprp = children.first(where: { $0.type == "iprp" })?.content else { return nil }
        let parts = boxes(bytes, iprp)
        guard let ipco = parts.first(where: { $0.type == "ipco" })?.content else { return nil }
        let properties = boxes(bytes, ipco)
        // Property indices (from 1) of each item.
        var associated: [Int: [Int]] = [:]
        if let ipma = parts.first(where: { $0.type == "ipma" })?.content, ipma.count >= 8 {
            let version = bytes[ipma.lowerBound], wide = bytes[ipma.lowerBound + 3] & 1 != 0
            var at = ipma.lowerBound + 8
            for _ in 0..<(number(bytes, ipma.lowerBound + 4, 4) ?? 0) {
                let idSize = version < 1 ? 2 : 4
                guard let item = number(bytes, at, idSize), at + idSize < ipma.upperBound else { break }
                let count = Int(bytes[at + idSize])
                at += idSize + 1
                var indices: [Int] = []
                for _ in 0..<count {
                    guard let value = number(bytes, at, wide ? 2 : 1), at + (wide ? 2 : 1) <= ipma.upperBound else { break }
                    indices.append(value & (wide ? 0x7FFF : 0x7F))
                    at += wide ? 2 : 1
                }
                associated[item] = indices
            }
        }
        let candidates = primary.flatMap { associated[$0] }?.compactMap { properties.indices.contains($0 - 1) ? properties[$0 - 1] : nil } ?? properties
        for property in candidates where property.type == "colr" && property.content.count >= 4 + 7 {
            let at = property.content.lowerBound
            guard String(decoding: bytes[at..<(at + 4)], as: UTF8.self) == "nclx",
                  let primaries = number(bytes, at + 4, 2), let transfer = number(bytes, at + 6, 2) else { continue }
            return HEIFColour(primaries: primaries, transfer: transfer)
        }
        return nil
    }

    /// The big-endian number of `count` bytes at `at`; nil past the end.
    private static func number(_ bytes: [UInt8], _ at: Int, _ count: Int) -> Int? {
        byteNumber(bytes, at: at, size: count, little: false)
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
