import Foundation

/// What a file's own structure says about its length, read from its first bytes and its
/// top-level boxes, without FFmpeg: an MP4/QuickTime file's boxes and a Matroska/WebM
/// file's Segment each give their size up front. A copy or download that has not finished
/// (or was cut off) is shorter than that, and FFmpeg reads such a file without a word until
/// its data ends: the upscale of a half-copied file is a half-length video.
public enum ContainerLength {
    /// A file shorter than its structure says: the length that gives (at least), and the
    /// length the file has. `packet`: an MPEG transport stream's packet size, for one that
    /// ends inside a packet.
    public struct Cut: Sendable, Equatable {
        public let declared: UInt64
        public let size: UInt64
        public var packet: Int?
    }

    /// What `inspect` finds: an MP4/QuickTime file without its index (`lacksIndex`), a file
    /// cut short (`cut`), and a Matroska/WebM file whose Segment's size is left open
    /// (`openEnded`): a recording under way writes it so and fills it in when it stops.
    public struct Finding: Sendable {
        public var lacksIndex = false
        public var cut: Cut?
        public var openEnded = false

        /// Why a watch folder waits for more of the file before it is taken (a copy, download
        /// or recording under way that paused longer than the settle time), or nil.
        public var unfinished: String? {
            if let cut { return "cut short, \(ContainerLength.describe(cut)) (a copy or download under way?)" }
            if openEnded { return "its length is left open, as a recording under way leaves it (paused, or written from another machine?; a browser's recording or a file written through a pipe stays so, finished)" }
            return nil
        }
    }

    /// One look at the file (one walk of an .mp4's boxes: a long fragmented recording has
    /// thousands). Nothing is found for a whole file, an MP4 box running "to the end of the
    /// file", and formats that give no length (AVI). A Matroska Segment of unknown size is
    /// `openEnded` (a finished file written to a pipe is too: bytes cannot tell the two
    /// apart). An MPEG transport stream is whole packets of 188 bytes (192 in .m2ts/.mts): a
    /// copy stopped anywhere else ends inside one, while one stopped between packets looks whole.
    public static func inspect(_ path: String) -> Finding {
        var finding = Finding()
        // (A named pipe would block the open, and a pipe has no length.)
        guard JobPlanner.isRegularFile(path), let handle = FileHandle(forReadingAtPath: path) else { return finding }
        defer { try? handle.close() }
        guard let size = try? handle.seekToEnd(), size >= 8, (try? handle.seek(toOffset: 0)) != nil,
              let data = try? handle.read(upToCount: 512), data.count >= 8 else { return finding }
        let head = [UInt8](data)
        let declared: UInt64?
        if head.prefix(4).elementsEqual([0x1A, 0x45, 0xDF, 0xA3]) {
            let segment = matroskaEnd(head, handle: handle)
            declared = segment.end
            finding.openEnded = segment.openEnded
        } else if let packet = transportPacket(head) {
            if size % UInt64(packet) != 0 { finding.cut = Cut(declared: (size / UInt64(packet) + 1) * UInt64(packet), size: size, packet: packet) }
            return finding
        } else {
            let walk = boxes(handle: handle, size: size)
            guard walk.isBoxes else { return finding }
            finding.lacksIndex = walk.types.contains("mdat") && !walk.types.contains("moov")
            declared = walk.overrun
        }
        if let declared, declared > size { finding.cut = Cut(declared: declared, size: size) }
        return finding
    }

    /// The packet size of an MPEG transport stream (three sync bytes a packet apart; a .m2ts
    /// packet has a 4-byte time code first), or nil.
    private static func transportPacket(_ head: [UInt8]) -> Int? {
        for (packet, first) in [(188, 0), (192, 4)] where head.count > first + 2 * packet
            && (0..<3).allSatisfy({ head[first + $0 * packet] == 0x47 }) { return packet }
        return nil
    }

    /// The length the file's structure gives and the length it has, when the first is
    /// longer: the file is cut short (see `inspect`).
    public static func cutShort(_ path: String) -> Cut? { inspect(path).cut }

    /// Whether `path` is an MP4/QuickTime file whose top-level boxes hold pictures and sound
    /// (`mdat`) but no index (`moov`): a phone or camera that stopped recording, or a copy cut
    /// short, before the index was written at the end. FFmpeg only says "invalid data".
    public static func lacksIndex(_ path: String) -> Bool { inspect(path).lacksIndex }

    /// "6.1 MB of at least 12.0 MB", for a `cutShort` result: the length given is where the
    /// part the file stops in ends (the whole file, but for a fragmented .mp4 its fragment).
    /// A transport stream: "it ends inside a 188-byte packet, at 6.1 MB".
    public static func describe(_ cut: Cut) -> String {
        if let packet = cut.packet { return "it ends inside a \(packet)-byte packet, at \(amount(cut.size))" }
        let (has, gives) = (amount(cut.size), amount(cut.declared))
        return has == gives ? "\(cut.size) of at least \(cut.declared) bytes" : "\(has) of at least \(gives)"
    }

    private static func amount(_ bytes: UInt64) -> String {
        bytes < 1_000_000 ? "\(bytes) bytes" : bytes < 1_000_000_000 ? String(format: "%.1f MB", Double(bytes) / 1e6) : String(format: "%.2f GB", Double(bytes) / 1e9)
    }

    /// Top-level boxes a file can stop inside when its copy stops: media data, the index,
    /// fragments and what stands between them. Bytes after the last box (an ID3 or APE tag, a
    /// camera's trailer, text) can read as a box of any size, but not as one of these.
    private static let lengthBoxes: Set<String> = ["mdat", "moov", "moof", "mfra", "free", "skip", "wide", "uuid", "udta",
                                                   "meta", "sidx", "ssix", "styp", "emsg", "prft", "ftyp", "pdin"]

    /// The top-level boxes of an MP4/QuickTime file (their types, in order), and where the
    /// last one would end when that is past the end of the file. `isBoxes` is false when the
    /// file does not begin as such a file does, or is not box structure throughout.
    private static func boxes(handle: FileHandle, size end: UInt64) -> (isBoxes: Bool, types: [String], overrun: UInt64?) {
        var offset: UInt64 = 0
        var types: [String] = []
        var overrun: UInt64?
        // A fragmented recording has a moof and an mdat per fragment: thousands in a long one.
        while end - offset >= 8, types.count < 100_000 {
            guard (try? handle.seek(toOffset: offset)) != nil, let head = try? handle.read(upToCount: 16), head.count >= 8 else { break }
            let bytes = [UInt8](head)
            var size = bytes[0..<4].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            // Box types are four printable characters (© in some): anything else is bytes after
            // the last box (a camera's trailer, padding), which give no length.
            guard bytes[4..<8].allSatisfy({ (0x20...0x7E).contains($0) || $0 == 0xA9 }) else { break }
            let type = String(decoding: bytes[4..<8], as: UTF8.self)
            types.append(type)
            if size == 1 {
                // A 64-bit size follows the type; a file cut inside it gives no length.
                guard bytes.count >= 16 else { break }
                size = bytes[8..<16].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            }
            if size == 0 { break } // to the end of the file
            guard size >= 8 else { return (false, types, nil) } // not box structure
            if size > end - offset {
                // The file stops inside this box, if it is one (and its size is not garbage).
                if lengthBoxes.contains(type), size < 1 << 50 { overrun = offset + size }
                break
            }
            offset += size
        }
        let first = types.first
        let isBoxes = first == "ftyp" || first == "wide" || first == "free" || first == "mdat"
        return (isBoxes, types, overrun)
    }

    /// Where a Matroska/WebM file's Segment ends (nil: unknown size, or not read), and whether
    /// its size is the unknown one: the EBML header, then the Segment, each an element ID and
    /// a variable-length size.
    private static func matroskaEnd(_ head: [UInt8], handle: FileHandle) -> (end: UInt64?, openEnded: Bool) {
        guard let header = elementSize(head, at: 4) else { return (nil, false) }
        var offset = 4 + UInt64(header.length) + header.value
        // Void elements (ID 0xEC) may stand before the Segment.
        for _ in 0..<16 {
            guard (try? handle.seek(toOffset: offset)) != nil, let data = try? handle.read(upToCount: 16), data.count >= 2 else { return (nil, false) }
            let bytes = [UInt8](data)
            if bytes[0] == 0xEC, let void = elementSize(bytes, at: 1), !void.unknown {
                let (next, overflow) = offset.addingReportingOverflow(1 + UInt64(void.length) + void.value)
                guard !overflow else { return (nil, false) }
                offset = next
                continue
            }
            guard bytes.count >= 5, Array(bytes.prefix(4)) == [0x18, 0x53, 0x80, 0x67], let segment = elementSize(bytes, at: 4) else { return (nil, false) }
            if segment.unknown { return (nil, true) }
            let (end, overflow) = (offset + 4 + UInt64(segment.length)).addingReportingOverflow(segment.value)
            return (overflow ? nil : end, false)
        }
        return (nil, false)
    }

    /// An EBML variable-length size at `index`: its value, its length in bytes (1-8), and
    /// whether it is the reserved "unknown" value (all value bits set).
    private static func elementSize(_ bytes: [UInt8], at index: Int) -> (value: UInt64, length: Int, unknown: Bool)? {
        guard index < bytes.count, bytes[index] != 0 else { return nil }
        let length = bytes[index].leadingZeroBitCount + 1
        guard index + length <= bytes.count else { return nil }
        var value = UInt64(bytes[index] & (0xFF >> length))
        for byte in bytes[(index + 1)..<(index + length)] { value = value << 8 | UInt64(byte) }
        return (value, length, value == (UInt64(1) << (7 * length)) - 1)
    }
}
