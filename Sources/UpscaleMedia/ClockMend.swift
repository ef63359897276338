import CFFmpeg

/// Evens out the clock of a container whose timestamps may jump (FFmpeg marks them
/// `AVFMT_TS_DISCONT`: MPEG-TS and MPEG-PS). Recordings joined with `cat`, a broadcast with
/// a splice, an encoder restarted mid-recording: the file goes on, its clock starts again
/// elsewhere. Read as they are, a jump forward became a still picture as long as the jump
/// (an hour of one frame for two clips joined), and a jump back stopped the job at the
/// muxer. Here a jump moves everything after it to where the stream would have gone on.
///
/// A jump is seen on a picture or sound packet whose decoding time lies more than 10 s
/// after its stream's next expected time (FFmpeg's command takes the same 10 s), or before
/// the stream's previous packet. The shift is one for the whole file, so the streams keep
/// their places relative to one another; a later stream that would then run backwards moves
/// everything on again, leaving a short gap rather than overlapping sound. A file without
/// jumps is left exactly as it is.
final class ClockMend {
    /// The longest step forward that is still the same clock (microseconds).
    static let leap = Int64(10 * AV_TIME_BASE)
    private static let micro = AVRational(num: 1, den: AV_TIME_BASE)

    /// Microseconds added to every packet read from here on.
    private var offset: Int64 = 0
    /// Per stream: its last packet's decoding time, and where the next one is expected
    /// (microseconds, mended).
    private var last: [Int: Int64] = [:]
    private var next: [Int: Int64] = [:]
    /// Jumps of a second or more (small corrections, such as a packet a tick early, are not counted).
    private(set) var jumps = 0

    /// Moves `packet` (of `stream`) by the file's shift so far, after checking it for a jump.
    func mend(_ packet: UnsafeMutablePointer<AVPacket>, stream: UnsafeMutablePointer<AVStream>) {
        let tb = stream.pointee.time_base
        let par = stream.pointee.codecpar.pointee
        let index = Int(packet.pointee.stream_index)
        let dts = packet.pointee.dts
        if par.codec_type == AVMEDIA_TYPE_VIDEO || par.codec_type == AVMEDIA_TYPE_AUDIO, dts != noPTS {
            var at = av_rescale_q(dts, tb, Self.micro) + offset
            if let previous = last[index], let expected = next[index], at - expected > Self.leap || at < previous {
                let step = expected - at
                offset += step
                at += step
                if abs(step) >= Int64(AV_TIME_BASE) { jumps += 1 }
            }
            last[index] = at
            next[index] = at + Self.length(of: packet, stream: stream)
        }
        guard offset != 0 else { return }
        let shift = av_rescale_q(offset, Self.micro, tb)
        if packet.pointee.pts != noPTS { packet.pointee.pts += shift }
        if dts != noPTS { packet.pointee.dts += shift }
    }

    /// Forgets the clock after a seek: what was read before no longer precedes what comes next.
    func restart() {
        offset = 0
        last = [:]
        next = [:]
    }

    /// How long `packet` lasts (microseconds): its own duration, else one frame of its stream
    /// (a picture at the stream's rate, a block of sound samples), else nothing.
    private static func length(of packet: UnsafeMutablePointer<AVPacket>, stream: UnsafeMutablePointer<AVStream>) -> Int64 {
        if packet.pointee.duration > 0 { return av_rescale_q(packet.pointee.duration, stream.pointee.time_base, micro) }
        let par = stream.pointee.codecpar.pointee
        if par.codec_type == AVMEDIA_TYPE_VIDEO {
            let rate = stream.pointee.r_frame_rate
            return rate.num > 0 && rate.den > 0 ? av_rescale_q(1, AVRational(num: rate.den, den: rate.num), micro) : 0
        }
        return par.frame_size > 0 && par.sample_rate > 0
            ? av_rescale_q(Int64(par.frame_size), AVRational(num: 1, den: par.sample_rate), micro) : 0
    }
}
