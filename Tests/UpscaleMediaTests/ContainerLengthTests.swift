import Foundation
@testable import UpscaleMedia
import XCTest

/// A file shorter than its own structure says (a copy or download under way) is found from
/// its bytes, for MP4/QuickTime and Matroska/WebM; whole files and open-ended ones are not.
final class ContainerLengthTests: XCTestCase {
    private static let matroska = ["street-853x479.mkv", "street-subs.mkv", "hdr10plus-tos.mkv", "chunk-vfr.mkv",
                                   "street-vp9-opus.webm", "street-vp9-alpha.webm"]
    private static let mp4 = ["street-2s-faststart.mp4", "street-2s.mp4", "street-hdr10.mp4", "chunk-offset.mov"]
    /// Files whose whole length is one Segment, or one box after the first third (fast start: the index first).
    private static let endsInOne = Set(matroska + ["street-2s-faststart.mp4"])

    private func write(_ data: Data, _ name: String, in dir: URL) throws -> String {
        let path = dir.appendingPathComponent(name).path
        try data.write(to: URL(fileURLWithPath: path))
        return path
    }

    func testWholeFilesAreNotCutShort() throws {
        for name in Self.matroska + Self.mp4 + ["street-opengop-mmco-cut.ts", "street-ts-untimed-first.ts", "street-mjpeg.avi", "street-theora.ogv"] {
            XCTAssertNil(ContainerLength.cutShort(Fixtures.path(name)), name)
        }
        // Bytes after the Segment or the last box (a second segment, padding) are not a cut.
        let dir = try workspace()
        for name in ["street-853x479.mkv", "street-2s-faststart.mp4"] {
            let padded = try Data(contentsOf: URL(fileURLWithPath: Fixtures.path(name))) + Data(repeating: 0, count: 100)
            XCTAssertNil(ContainerLength.cutShort(try write(padded, "padded-" + name, in: dir)), name)
        }
        // Nor are bytes after an .mp4's last box that read as a large size: binary, an ID3v1
        // tag ("TAG" and a title: a box "Some" of 0x54414753 bytes), text.
        let mp4 = try Data(contentsOf: URL(fileURLWithPath: Fixtures.path("street-2s.mp4")))
        let id3 = Data("TAGSome title".utf8) + Data(repeating: 0x20, count: 115)
        for (i, trailer) in [Data([0x7F, 0xFF, 0xFF, 0xFF, 0x01, 0x9C, 0x00, 0xFE] + [UInt8](repeating: 7, count: 24)), id3,
                             Data("notes about this clip\n".utf8)].enumerated() {
            XCTAssertNil(ContainerLength.cutShort(try write(mp4 + trailer, "trailer-\(i).mp4", in: dir)), "trailer \(i)")
        }
        // A garbage 64-bit size (past 2^64 from where it stands) gives no length, and no trap.
        let garbage = Data([0, 0, 0, 16] + Array("ftypisom".utf8) + [0, 0, 0, 0] + [0, 0, 0, 1] + Array("mdat".utf8) + [UInt8](repeating: 0xFF, count: 7) + [0xEC])
        XCTAssertNil(ContainerLength.cutShort(try write(garbage + Data(count: 100), "garbage.mp4", in: dir)))
    }

    func testPartsOfFilesAreCutShortByWhatTheirHeadersGive() throws {
        let dir = try workspace()
        for name in Self.matroska + Self.mp4 {
            let whole = try Data(contentsOf: URL(fileURLWithPath: Fixtures.path(name)))
            for part in [whole.count / 3, whole.count / 2, whole.count - 1] {
                let path = try write(whole.prefix(part), "part-" + name, in: dir)
                let cut = try XCTUnwrap(ContainerLength.cutShort(path), "\(name), \(part) of \(whole.count) bytes")
                XCTAssertEqual(cut.size, UInt64(part), name)
                // The end of the box or Segment the cut falls in: the whole file's end, where
                // that is the last one (an .mp4's mdat before its index ends where the index begins).
                XCTAssertGreaterThan(cut.declared, UInt64(part), name)
                XCTAssertLessThanOrEqual(cut.declared, UInt64(whole.count), name)
                if Self.endsInOne.contains(name) { XCTAssertEqual(cut.declared, UInt64(whole.count), name) }
            }
        }
        let half = try write(try Data(contentsOf: URL(fileURLWithPath: Fixtures.path("street-853x479.mkv"))).prefix(30_000), "half.mkv", in: dir)
        XCTAssertEqual(ContainerLength.describe(ContainerLength.cutShort(half)!), "30000 bytes of at least 55781 bytes")
    }

    /// An EBML header whose size takes 8 bytes, a Void element before the Segment, and a
    /// second segment after the first (files joined) are read through.
    func testUnusualMatroskaLayoutsAreRead() throws {
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: Fixtures.path("street-853x479.mkv"))))
        let headerSize = Int(bytes[4] & 0x7F)
        XCTAssertEqual(bytes[4] & 0x80, 0x80, "a one-byte size")
        let body = Array(bytes[5..<(5 + headerSize)]), segment = Array(bytes[(5 + headerSize)...])
        let wide: [UInt8] = [0x1A, 0x45, 0xDF, 0xA3, 0x01, 0, 0, 0, 0, 0, 0, UInt8(headerSize)] + body + [0xEC, 0x85, 0, 0, 0, 0, 0] + segment
        let dir = try workspace()
        XCTAssertNil(ContainerLength.cutShort(try write(Data(wide), "wide.mkv", in: dir)))
        let cut = try XCTUnwrap(ContainerLength.cutShort(try write(Data(wide.prefix(wide.count / 2)), "wide-half.mkv", in: dir)))
        XCTAssertEqual(cut.declared, UInt64(wide.count))
        // Two segments: the first ends where the second begins. Only the first is judged, so a
        // cut in the second goes unseen (files joined so are rare).
        XCTAssertNil(ContainerLength.cutShort(try write(Data(bytes + bytes), "two.mkv", in: dir)))
        XCTAssertNil(ContainerLength.cutShort(try write(Data(bytes + bytes.prefix(bytes.count / 2)), "two-half.mkv", in: dir)))
    }

    /// A transport stream is whole packets: one that stops inside a packet is cut short, one
    /// that stops between packets cannot be told from a whole one. The same with .m2ts's
    /// 192-byte packets (a 4-byte time code before each).
    func testATransportStreamEndingInsideAPacketIsCutShort() throws {
        let dir = try workspace()
        let ts = [UInt8](try Data(contentsOf: URL(fileURLWithPath: Fixtures.path("street-opengop-mmco-cut.ts"))))
        XCTAssertEqual(ts.count % 188, 0)
        var m2ts: [UInt8] = []
        for start in stride(from: 0, to: ts.count, by: 188) { m2ts += [0, 0, 0, UInt8(start / 188 & 0xFF)] + ts[start..<(start + 188)] }
        XCTAssertNil(ContainerLength.cutShort(try write(Data(m2ts), "whole.m2ts", in: dir)))
        for (bytes, packet, name) in [(ts, 188, "part.ts"), (m2ts, 192, "part.m2ts")] {
            for part in [packet * 40 + 1, bytes.count / 2 + 7, bytes.count - 1] where part % packet != 0 {
                let cut = try XCTUnwrap(ContainerLength.cutShort(try write(Data(bytes.prefix(part)), name, in: dir)), "\(name) \(part)")
                XCTAssertEqual(cut, ContainerLength.Cut(declared: UInt64((part / packet + 1) * packet), size: UInt64(part), packet: packet))
            }
            XCTAssertNil(ContainerLength.cutShort(try write(Data(bytes.prefix(packet * 40)), name, in: dir)), "between packets")
        }
        let cut = try XCTUnwrap(ContainerLength.cutShort(try write(Data(ts.prefix(20_000)), "cut.ts", in: dir)))
        XCTAssertEqual(ContainerLength.describe(cut), "it ends inside a 188-byte packet, at 20000 bytes")
        // Close to the end of a Matroska file: the two lengths in bytes, not as the same MB.
        XCTAssertEqual(ContainerLength.describe(ContainerLength.Cut(declared: 6_104_400, size: 6_104_311)), "6104311 of at least 6104400 bytes")
        XCTAssertEqual(ContainerLength.describe(ContainerLength.Cut(declared: 12_000_000, size: 6_100_000)), "6.1 MB of at least 12.0 MB")
    }

    /// A Segment of unknown size (a live recording's, before it is closed) gives no length:
    /// such a file cannot be told from a finished one by its bytes.
    func testAnOpenEndedSegmentIsNotCutShort() throws {
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: Fixtures.path("street-853x479.mkv"))))
        // The EBML header: ID (4 bytes), its size (a 1-byte vint here), its body; then the Segment's ID and size.
        XCTAssertEqual(Array(bytes[0..<4]), [0x1A, 0x45, 0xDF, 0xA3])
        let headerSize = Int(bytes[4] & 0x7F)
        XCTAssertEqual(bytes[4] & 0x80, 0x80, "a one-byte size")
        let segment = 5 + headerSize
        XCTAssertEqual(Array(bytes[segment..<(segment + 4)]), [0x18, 0x53, 0x80, 0x67])
        let length = bytes[segment + 4].leadingZeroBitCount + 1
        // All value bits set, in the size's own length: "unknown".
        bytes[segment + 4] = UInt8(0xFF >> (length - 1))
        for i in 1..<length { bytes[segment + 4 + i] = 0xFF }
        XCTAssertEqual(bytes[segment + 4].leadingZeroBitCount + 1, length)
        let dir = try workspace()
        let open = try write(Data(bytes.prefix(bytes.count / 2)), "open.mkv", in: dir)
        XCTAssertNil(ContainerLength.cutShort(open))
        // Said to be open-ended (a watch folder waits for it while it changes), whole or not.
        let found = ContainerLength.inspect(open)
        XCTAssertTrue(found.openEnded)
        XCTAssertEqual(found.unfinished, "its length is left open, as a recording under way leaves it (paused, or written from another machine?; a browser's recording or a file written through a pipe stays so, finished)")
        XCTAssertTrue(ContainerLength.inspect(try write(Data(bytes), "open-whole.mkv", in: dir)).openEnded)
        for name in ["street-853x479.mkv", "street-2s-faststart.mp4"] {
            let whole = ContainerLength.inspect(Fixtures.path(name))
            XCTAssertFalse(whole.openEnded, name)
            XCTAssertNil(whole.unfinished, name)
        }
    }

    /// An .mp4 whose index is at the end, cut before it: no index (the error FFmpeg cannot
    /// give), and cut short as well; with its index first (fast start), only cut short.
    func testAHalfMP4WithoutItsIndexLacksIt() throws {
        let dir = try workspace()
        let late = try Data(contentsOf: URL(fileURLWithPath: Fixtures.path("street-2s.mp4")))
        let early = try Data(contentsOf: URL(fileURLWithPath: Fixtures.path("street-2s-faststart.mp4")))
        let lateHalf = try write(late.prefix(late.count / 2), "late.mp4", in: dir)
        let earlyHalf = try write(early.prefix(early.count / 2), "early.mp4", in: dir)
        XCTAssertTrue(ContainerLength.lacksIndex(lateHalf))
        XCTAssertFalse(ContainerLength.lacksIndex(earlyHalf))
        XCTAssertFalse(ContainerLength.lacksIndex(Fixtures.path("street-2s.mp4")))
        XCTAssertNotNil(ContainerLength.cutShort(earlyHalf))
    }
}
