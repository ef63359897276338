import Foundation

/// Seeded damage to a media file's bytes, as storage, transfers and cut-short copies
/// do it: flipped bytes, a truncated tail, a zeroed run, a duplicated chunk. The same
/// (bytes, seed) always gives the same damaged copy, so a failing case can be rebuilt
/// from its name alone. Used by the tests' damaged-input corpus and by `upscale-bench damage`.
public enum Damage: String, CaseIterable, Sendable {
    case flips, truncation, zeroRun = "zeroed", duplicate = "duplicated"

    /// The damage kind for copy number `index`: the four kinds take turns.
    public static func kind(for index: Int) -> Damage { allCases[index % allCases.count] }

    /// `bytes` damaged this way with `seed`. The first 1% of the file (at least its first
    /// 64 bytes) is left alone, so most copies still open and the damage is met while decoding.
    public func apply(to bytes: [UInt8], seed: UInt64) -> [UInt8] {
        var rng = SplitMix64(seed: seed)
        var out = bytes
        let guarded = min(bytes.count, max(64, bytes.count / 100))
        let span = bytes.count - guarded
        guard span > 16 else { return out }
        func offset() -> Int { guarded + Int(rng.next() % UInt64(span)) }
        switch self {
        case .flips:
            for _ in 0..<(1 + Int(rng.next() % 24)) {
                let at = offset()
                out[at] ^= UInt8(1 + rng.next() % 255)
            }
        case .truncation:
            out.removeSubrange(offset()...)
        case .zeroRun:
            let at = offset()
            let length = min(bytes.count - at, 16 + Int(rng.next() % 4096))
            out.replaceSubrange(at..<(at + length), with: repeatElement(0, count: length))
        case .duplicate:
            let from = offset()
            let length = min(bytes.count - from, 256 + Int(rng.next() % 16384))
            out.insert(contentsOf: bytes[from..<(from + length)], at: offset())
        }
        return out
    }
}

/// Writes damaged copies of real clips into a folder.
public struct DamagedCorpus {
    public struct Entry: Sendable {
        public let path: String
        public let source: String
        public let damage: Damage
        public let seed: UInt64
    }

    /// `copies` damaged copies of each source into `folder`, named
    /// `<source stem>-<index>-<kind>.<ext>`; seeds are `baseSeed + index`.
    public static func write(sources: [String], copies: Int, baseSeed: UInt64, into folder: String) throws -> [Entry] {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        var entries: [Entry] = []
        for source in sources {
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: source)))
            let url = URL(fileURLWithPath: source)
            let stem = url.deletingPathExtension().lastPathComponent
            for index in 0..<copies {
                let damage = Damage.kind(for: index)
                let seed = baseSeed &+ UInt64(index)
                let path = (folder as NSString).appendingPathComponent("\(stem)-\(index)-\(damage.rawValue).\(url.pathExtension)")
                try Data(damage.apply(to: bytes, seed: seed)).write(to: URL(fileURLWithPath: path))
                entries.append(Entry(path: path, source: source, damage: damage, seed: seed))
            }
        }
        return entries
    }
}

/// A small, fast, seedable generator (Steele, Lea and Flood's SplitMix64).
public struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64
    public init(seed: UInt64) { state = seed }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
