import Foundation
import UpscaleMedia
import XCTest

final class JobPlannerTests: XCTestCase {
    func testSizeInferenceKeepsDisplayAspectAndEvenSizes() throws {
        let display = (width: 768.0, height: 576.0)
        XCTAssertTrue(try OutputSize.resolve(display: display, width: nil, height: nil, scale: nil) == (1536, 1152, false))
        XCTAssertTrue(try OutputSize.resolve(display: display, width: 640, height: nil, scale: nil) == (640, 480, false))
        XCTAssertTrue(try OutputSize.resolve(display: display, width: nil, height: 100, scale: nil) == (134, 100, false))
        XCTAssertTrue(try OutputSize.resolve(display: (1920, 1080), width: 7680, height: nil, scale: nil) == (7680, 4320, false))
        XCTAssertTrue(try OutputSize.resolve(display: (1920, 1080), width: nil, height: nil, scale: 1.5) == (2880, 1620, false))
        XCTAssertTrue(try OutputSize.resolve(display: (853, 479), width: nil, height: nil, scale: nil) == (1706, 958, false))
        XCTAssertTrue(try OutputSize.resolve(display: display, width: 641, height: 481, scale: nil) == (642, 482, true))
        // Anamorphic PAL 720x576 shown at 768x576.
        XCTAssertTrue(try OutputSize.resolve(display: (768, 576), width: 1536, height: nil, scale: nil) == (1536, 1152, false))
        XCTAssertThrowsError(try OutputSize.resolve(display: display, width: 20000, height: nil, scale: nil))
        // The number given, not its even rounding (16385 was reported as 16386).
        XCTAssertThrowsError(try OutputSize.resolve(display: display, width: 16385, height: nil, scale: nil)) { error in
            XCTAssertEqual((error as? UpscaleError)?.message, "output width 16385 is outside 16...16384; choose another size")
        }
        XCTAssertThrowsError(try OutputSize.resolve(display: display, width: 100, height: nil, scale: 2))
    }

    /// A scale that takes this input's own size out of range fails this file (exit 1, as a
    /// damaged header claiming a 1x1 picture does; other inputs go on), not the run; the line
    /// names the scale as the cause.
    func testScaledSizeOutOfRangeIsAnInputError() throws {
        let dir = try workspace(copying: ["street-2s.mp4"])
        let input = dir.appendingPathComponent("street-2s.mp4").path
        XCTAssertThrowsError(try JobPlanner.plan(input: input, options: UpscaleOptions(scale: 0.01))) { error in
            let e = error as? UpscaleError
            XCTAssertEqual(e?.kind, .input)
            XCTAssertEqual(e?.message, "'\(input)' is 768x576, so with --scale 0.01 output width 8 is outside 16...16384; give a larger --scale, or --width or --height")
        }
    }

    /// The watch folder's output check decodes the last seconds of a file: a good clip gives
    /// its last pictures, a clip damaged at the end fails.
    func testDecodeTailFindsTheLastPicturesOrTheDamage() throws {
        let dir = try workspace(copying: ["street-2s.mp4", "street-subs.mkv"])
        let good = try MediaProbe.decodeTail(dir.appendingPathComponent("street-2s.mp4").path, seconds: 0.5)
        // From the keyframe before the tail: this clip has one, so all 20 pictures.
        XCTAssertEqual(good, 20)
        // Matroska reads without its index: zero the last quarter's frames.
        let mkv = dir.appendingPathComponent("street-subs.mkv")
        let intact = try MediaProbe.decodeTail(mkv.path, seconds: 0.5)
        XCTAssertGreaterThan(intact, 0)
        var bytes = [UInt8](try Data(contentsOf: mkv))
        let from = bytes.count * 3 / 4
        for i in from..<(bytes.count - 2048) { bytes[i] = 0 }
        try Data(bytes).write(to: mkv)
        // A damaged tail either fails or gives fewer of its last pictures.
        let damaged = (try? MediaProbe.decodeTail(mkv.path, seconds: 0.5)) ?? 0
        XCTAssertLessThan(damaged, intact)
    }

    func testNamingAndContainerRules() throws {
        let dir = try workspace(copying: ["street-2s.mp4", "street-mjpeg.avi", "street-vp9-opus.webm"])
        let mp4 = try JobPlanner.plan(input: dir.appendingPathComponent("street-2s.mp4").path, options: UpscaleOptions())
        XCTAssertEqual(URL(fileURLWithPath: mp4.output).lastPathComponent, "street-2s Upscaled.mp4")
        XCTAssertEqual(mp4.muxer, "mp4")
        XCTAssertTrue(mp4.notices.isEmpty)
        // Both sides given: that size, and a changed shape is said (768x576 is 4:3).
        let street = dir.appendingPathComponent("street-2s.mp4").path
        let square = try JobPlanner.plan(input: street, options: UpscaleOptions(width: 1000, height: 1000))
        XCTAssertEqual([square.width, square.height], [1000, 1000])
        XCTAssertEqual(square.notices, ["'\(street)' is shown at 768x576; 1000x1000 stretches it to another shape (give only --width or --height to keep its shape)"])
        XCTAssertTrue(try JobPlanner.plan(input: street, options: UpscaleOptions(width: 1536, height: 1152)).notices.isEmpty)
        // Not enlarged: said (a --scale under 1 or a mistyped --width ran without a word).
        XCTAssertEqual(try JobPlanner.plan(input: street, options: UpscaleOptions(scale: 1)).notices,
                       ["'\(street)' stays 768x576: nothing is enlarged, the video is only re-encoded"])
        XCTAssertEqual(try JobPlanner.plan(input: street, options: UpscaleOptions(scale: 0.5)).notices,
                       ["'\(street)' is shown at 768x576; --scale 0.5 makes it smaller, 384x288 (Lanczos only)"])
        XCTAssertTrue(try JobPlanner.plan(input: street, options: UpscaleOptions(width: 384)).notices.isEmpty)
        XCTAssertTrue(try JobPlanner.plan(input: street, options: UpscaleOptions(width: 770)).notices.isEmpty)
        let avi = try JobPlanner.plan(input: dir.appendingPathComponent("street-mjpeg.avi").path, options: UpscaleOptions())
        XCTAssertEqual(URL(fileURLWithPath: avi.output).lastPathComponent, "street-mjpeg Upscaled.mov")
        XCTAssertEqual(avi.notices, [".avi cannot hold hevc; writing .mov"])
        let ffv1 = try JobPlanner.plan(input: dir.appendingPathComponent("street-2s.mp4").path,
                                       options: UpscaleOptions(encoder: EncoderSettings(codec: .ffv1)))
        XCTAssertEqual(URL(fileURLWithPath: ffv1.output).lastPathComponent, "street-2s Upscaled.mkv")
        let folder = try JobPlanner.plan(input: dir.appendingPathComponent("street-2s.mp4").path,
                                         options: UpscaleOptions(output: "/tmp"))
        XCTAssertEqual(folder.output, "/tmp/street-2s Upscaled.mp4")
        XCTAssertThrowsError(try JobPlanner.plan(input: dir.appendingPathComponent("street-2s.mp4").path,
                                                 options: UpscaleOptions(output: dir.appendingPathComponent("x.webm").path))) { error in
            XCTAssertEqual((error as? UpscaleError)?.message.hasSuffix("hevc cannot be written to a .webm file; use .mov, .mp4, .m4v, .mkv"), true, "\(error)")
        }
        // The input itself as the output, even with --overwrite: by its own path, and through a
        // symlinked folder (renaming over that name would replace the original).
        let input = dir.appendingPathComponent("street-2s.mp4").path
        let alias = dir.deletingLastPathComponent().appendingPathComponent(dir.lastPathComponent + "-alias")
        try FileManager.default.createSymbolicLink(at: alias, withDestinationURL: dir)
        defer { try? FileManager.default.removeItem(at: alias) }
        for output in [input, alias.appendingPathComponent("street-2s.mp4").path] {
            XCTAssertThrowsError(try JobPlanner.plan(input: input, options: UpscaleOptions(output: output, overwrite: true))) { error in
                XCTAssertEqual((error as? UpscaleError)?.message, "the output '\(output)' is the input itself; choose another --output")
            }
        }
        // A name without an extension that is no folder: neither a file type nor a folder to write into.
        let missing = dir.appendingPathComponent("no-such-folder").path
        XCTAssertThrowsError(try JobPlanner.plan(input: dir.appendingPathComponent("street-2s.mp4").path,
                                                 options: UpscaleOptions(output: missing))) { error in
            XCTAssertEqual((error as? UpscaleError)?.kind, .usage)
            XCTAssertEqual((error as? UpscaleError)?.message,
                           "'\(missing)' is not a folder and its name has no extension; give an existing folder, or a file name ending in .mov, .mp4, .m4v, .mkv")
        }
    }

    func testAlphaChannelIsKeptWhereTheCodecTakesItAndNamedWhereNot() throws {
        let dir = try workspace(copying: ["street-prores4444-alpha.mov", "street-pal8-png.mov", "street-qtrle.mov"])
        let input = dir.appendingPathComponent("street-prores4444-alpha.mov").path
        let job = try JobPlanner.plan(input: input, options: UpscaleOptions())
        XCTAssertFalse(job.keepsAlpha)
        XCTAssertEqual(job.notices, ["'\(input)' has an alpha channel (yuva444p12le); hevc has none, so the upscaled video is opaque (transparent areas show the colour stored under them) — use --codec prores (ProRes 4444) or --codec ffv1 to keep it"])
        let prores = try JobPlanner.plan(input: input, options: UpscaleOptions(encoder: EncoderSettings(codec: .prores)))
        XCTAssertTrue(prores.keepsAlpha)
        XCTAssertEqual(prores.notices, ["'\(input)' has an alpha channel (yuva444p12le); writing ProRes 4444 to keep it"])
        let ffv1 = try JobPlanner.plan(input: input, options: UpscaleOptions(encoder: EncoderSettings(codec: .ffv1)))
        XCTAssertTrue(ffv1.keepsAlpha)
        XCTAssertFalse(ffv1.notices.contains { $0.contains("alpha") }, "\(ffv1.notices)")
        // Paletted and RGB pictures without an alpha channel get no such notice.
        for name in ["street-pal8-png.mov", "street-qtrle.mov"] {
            let other = try JobPlanner.plan(input: dir.appendingPathComponent(name).path, options: UpscaleOptions())
            XCTAssertFalse(other.notices.contains { $0.contains("alpha") }, name)
        }
    }

    /// A rotated phone clip into .mkv, which cannot record the turn here, gets a note.
    func testRotationIntoMatroskaIsNamed() throws {
        let dir = try workspace(copying: ["street-hlg.mp4"])
        let input = dir.appendingPathComponent("phone.mov").path
        try Remuxer.copy(dir.appendingPathComponent("street-hlg.mp4").path, to: input, rotation: 90)
        let mkv = try JobPlanner.plan(input: input, options: UpscaleOptions(output: dir.appendingPathComponent("x.mkv").path))
        XCTAssertTrue(mkv.notices.contains { $0.contains("is shown turned 90° clockwise, which .mkv cannot record here") }, "\(mkv.notices)")
        let mov = try JobPlanner.plan(input: input, options: UpscaleOptions())
        XCTAssertFalse(mov.notices.contains { $0.contains("turned") }, "\(mov.notices)")
    }

    func testHEVCLimitNamesProRes() throws {
        let dir = try workspace(copying: ["street-2s.mp4"])
        let input = dir.appendingPathComponent("street-2s.mp4").path
        // Without a named codec, output beyond HEVC's limit becomes ProRes in .mov, with a notice.
        let auto = try JobPlanner.plan(input: input, options: UpscaleOptions(width: 10240))
        XCTAssertEqual(auto.encoder.codec, .prores)
        XCTAssertTrue(auto.output.hasSuffix("street-2s Upscaled.mov"))
        XCTAssertEqual(auto.muxer, "mov")
        XCTAssertTrue(auto.notices.contains { $0.contains("ProRes") }, "\(auto.notices)")
        // An output named .mp4 then says why ProRes, and what to do ("prores cannot be written
        // to a .mp4 file" named a codec the user never asked for).
        XCTAssertThrowsError(try JobPlanner.plan(input: input, options: UpscaleOptions(width: 10240, output: dir.appendingPathComponent("big.mp4").path))) { error in
            XCTAssertEqual((error as? UpscaleError)?.kind, .usage)
            XCTAssertTrue("\(error)".contains("big.mp4': 10240x7680 is beyond HEVC's limit (8192x4320), and ProRes, which upscale writes past it, cannot go in a .mp4 file; name the output .mov"), "\(error)")
        }
        XCTAssertThrowsError(try JobPlanner.plan(input: input, options: UpscaleOptions(width: 10240, codecChosen: true))) { error in
            XCTAssertEqual((error as? UpscaleError)?.kind, .usage)
            XCTAssertTrue("\(error)".contains("hevc can encode (8192x4320); use --codec prores"), "\(error)")
        }
        // H.264 has its own limit (level 6.2), named as such.
        let h264 = UpscaleOptions(width: 16384, encoder: EncoderSettings(codec: .h264), codecChosen: true)
        XCTAssertThrowsError(try JobPlanner.plan(input: input, options: h264)) { error in
            XCTAssertTrue("\(error)".contains("16384x12288 is beyond what h264 can encode (16384 a side, 35.65 million pixels)"), "\(error)")
        }
        XCTAssertNoThrow(try JobPlanner.plan(input: input, options: UpscaleOptions(width: 10240, encoder: EncoderSettings(codec: .prores))))
        XCTAssertNoThrow(try JobPlanner.plan(input: input, options: UpscaleOptions(height: 4320)))
    }

    func testBadInputsGiveOneLineErrors() throws {
        let dir = try workspace(copying: ["tone.m4a", "street-2s.mp4"])
        // A recording cut off before its index (moov, written last) was "not a media file".
        let cut = dir.appendingPathComponent("cut.mp4")
        try Data(try Data(contentsOf: dir.appendingPathComponent("street-2s.mp4")).prefix(60_000)).write(to: cut)
        let empty = dir.appendingPathComponent("empty.mp4")
        FileManager.default.createFile(atPath: empty.path, contents: Data())
        let text = dir.appendingPathComponent("notes.mp4")
        try Data("not a video, just text\n".utf8).write(to: text)
        let cases: [(String, String)] = [
            (dir.appendingPathComponent("missing.mov").path, "does not exist"),
            (dir.path, "is a folder"),
            (empty.path, "is empty"),
            (text.path, "not a media file"),
            (cut.path, "has no index (no moov box): the recording or the copy stopped before it was finished"),
            (dir.appendingPathComponent("tone.m4a").path, "no video stream"),
        ]
        for (path, phrase) in cases {
            XCTAssertThrowsError(try JobPlanner.plan(input: path, options: UpscaleOptions())) { error in
                let message = "\(error)"
                XCTAssertTrue(message.contains(phrase), "\(path): \(message)")
                XCTAssertFalse(message.contains("\n"))
                XCTAssertEqual((error as? UpscaleError)?.kind, .input)
            }
        }
    }

    /// An --output whose folder is missing, or is a file: one line naming which (a file was
    /// "the output folder … does not exist").
    func testOutputFolderThatIsMissingOrAFileIsNamedAsSuch() throws {
        let dir = try workspace(copying: ["street-2s.mp4"])
        let input = dir.appendingPathComponent("street-2s.mp4").path
        let file = dir.appendingPathComponent("notes")
        try Data("x".utf8).write(to: file)
        let cases = [
            (dir.appendingPathComponent("missing/out.mp4").path,
             "the output folder '\(dir.appendingPathComponent("missing").path)' does not exist; create it or pick another --output"),
            (file.appendingPathComponent("out.mp4").path, "'\(file.path)' is a file, not a folder; pick another --output"),
        ]
        for (output, message) in cases {
            XCTAssertThrowsError(try JobPlanner.checkOutput(output, input: input, taken: [], overwrite: false)) { error in
                XCTAssertEqual((error as? UpscaleError)?.message, message)
                XCTAssertEqual((error as? UpscaleError)?.kind, .output)
            }
        }
        XCTAssertEqual(try Data(contentsOf: file), Data("x".utf8))
    }
}
