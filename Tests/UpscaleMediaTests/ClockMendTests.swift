import CFFmpeg
@testable import UpscaleMedia
import XCTest

/// The MPEG-TS/PS clock mend on packets as a demuxer gives them: a picture stream at 25 fps
/// and a sound stream of 1024-sample AAC blocks at 48 kHz, in 1/90000 s.
final class ClockMendTests: XCTestCase {
    private var context: UnsafeMutablePointer<AVFormatContext>!
    private var video: UnsafeMutablePointer<AVStream>!
    private var audio: UnsafeMutablePointer<AVStream>!

    override func setUpWithError() throws {
        context = try XCTUnwrap(avformat_alloc_context())
        video = try XCTUnwrap(avformat_new_stream(context, nil))
        audio = try XCTUnwrap(avformat_new_stream(context, nil))
        for (s, type) in [(video!, AVMEDIA_TYPE_VIDEO), (audio!, AVMEDIA_TYPE_AUDIO)] {
            s.pointee.time_base = AVRational(num: 1, den: 90000)
            s.pointee.codecpar.pointee.codec_type = type
        }
        video.pointee.r_frame_rate = AVRational(num: 25, den: 1)
    }

    override func tearDown() {
        avformat_free_context(context)
    }

    /// Mends one packet of `stream` timed `dts` (its pts the same) and returns its time after.
    private func mended(_ mend: ClockMend, _ stream: UnsafeMutablePointer<AVStream>, _ dts: Int64) -> Int64 {
        var packet: UnsafeMutablePointer<AVPacket>? = av_packet_alloc()
        defer { av_packet_free(&packet) }
        packet!.pointee.stream_index = stream.pointee.index
        packet!.pointee.dts = dts
        packet!.pointee.pts = dts
        packet!.pointee.duration = stream == video ? 3600 : 1920
        mend.mend(packet!, stream: stream)
        XCTAssertEqual(packet!.pointee.pts, packet!.pointee.dts)
        return packet!.pointee.dts
    }

    /// Sound that stops for 15 s while the picture goes on is a gap in one stream, not a jump:
    /// nothing moves. (Measured against the stream's own next time, it was taken for a jump
    /// back and forth on every packet.)
    func testAGapInOneStreamMovesNothing() {
        let mend = ClockMend()
        var times: [Int64] = []
        for i in 0..<(20 * 25) {
            let t = Int64(i) * 3600
            times.append(mended(mend, video, t))
            // Sound for the first 2 s and from 17 s on.
            if t < 2 * 90000 || t >= 17 * 90000 {
                for k in 0..<2 { times.append(mended(mend, audio, t + Int64(k) * 1920)) }
            }
        }
        var expected: [Int64] = []
        for i in 0..<(20 * 25) {
            let t = Int64(i) * 3600
            expected.append(t)
            if t < 2 * 90000 || t >= 17 * 90000 { expected += [t, t + 1920] }
        }
        XCTAssertEqual(times, expected)
        XCTAssertEqual(mend.jumps, 0)
    }

    /// Both streams jump 5000 s on: what follows goes on from where everything before ended.
    /// A sound packet a tick before its stream's previous one moves everything on just enough
    /// for it to follow; a picture a tick early is left as it is.
    func testAJumpGoesOnFromTheEndAndAGlitchMovesLittle() {
        let mend = ClockMend()
        XCTAssertEqual(mended(mend, video, 0), 0)
        XCTAssertEqual(mended(mend, audio, 0), 0)
        XCTAssertEqual(mended(mend, video, 3600), 3600)
        let jump: Int64 = 5000 * 90000
        // The end so far: the picture at 3600 lasts to 7200.
        XCTAssertEqual(mended(mend, audio, jump), 7200)
        XCTAssertEqual(mended(mend, video, jump + 100), 7300)
        XCTAssertEqual(mend.jumps, 1)
        XCTAssertEqual(mended(mend, video, jump + 99), 7299, "a picture a tick early is left to the decoder")
        XCTAssertEqual(mended(mend, audio, jump - 1), 7200 + 1920, "a sound packet a tick early follows the one before")
        XCTAssertEqual(mend.jumps, 1)
    }
}
