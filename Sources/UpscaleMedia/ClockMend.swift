import CFFmpeg

/// Evens out the clock of a container whose timestamps may jump (FFmpeg marks them
/// `AVFMT_TS_DISCONT`: MPEG-TS and MPEG-PS). Recordings joined with `cat`, a broadcast with
/// a splice, an encoder restarted mid-recording: the file goes on, its clock starts again
/// elsewhere. Read as they are, a jump forward became a still picture as long as the jump
/// (an hour of one frame for two clips joined), and a jump back stopped the job at the
/// muxer. Here a jump moves everything after it on from where everything read so far ends.
///
/// A jump is a packet whose time lies more than 10 s past everything read so far
/// (FFmpeg's command takes the same 10 s), or more than 10 s before its own stream's
/// previous packet: what comes from there on is moved to go on where everything read so far
/// ends. The shift is one for the whole file, so the streams keep their places relative to
/// one another. A stream with a long gap of its own (sound that stops for a minute) is not a
/// jump: it comes back in step with the others. A sound packet a little before its stream's
/// previous one (a glitch; the new recording's sound starting a little before the picture
/// that showed the jump) moves everything on just enough for it to follow, as a muxer needs
/// sound to run forwards (a picture so placed is left to the decoder, which goes by its
/// presentation time). A file without jumps is left exactly as it is.
final class ClockMend {
    /// The longest step that is still the same clock (microseconds).
    static let leap = Int64(10 * AV_TIME_BASE)
    private static let micro = AVRational(num: 1, den: AV_TIME_BASE)

    /// Microseconds added to every packet read from here on.
    private var offset: Int64 = 0
    /// Per stream: its last packet's time, and where the next one is expected (microseconds,
    /// mended).
    private var last: [Int: Int64] = [:]
    private var next: [Int: Int64] = [:]
    /// Where everything read so far ends: the latest expected time of any picture or sound stream.
    private var end: Int64?
    /// Jumps of the clock (not the small corrections).
    private(set) var jumps = 0

    /// Moves `packet` (of `stream`) by the file's shift so far, after checking it for a jump.
    /// Times are presentation times where the packet has one (a picture's decoding time runs
    /// behind it by the reordering delay: the new recording's first picture would come that
    /// much late), else decoding times.
    func mend(_ packet: UnsafeMutablePointer<AVPacket>, stream: UnsafeMutablePointer<AVStream>) {
        let tb = stream.pointee.time_base
        let type = stream.pointee.codecpar.pointee.codec_type
        let index = Int(packet.pointee.stream_index)
        let stamp = packet.pointee.pts != noPTS ? packet.pointee.pts : packet.pointee.dts
        let timed = type == AVMEDIA_TYPE_VIDEO || type == AVMEDIA_TYPE_AUDIO
        if timed || type == AVMEDIA_TYPE_SUBTITLE, stamp != noPTS {
            var at = av_rescale_q(stamp, tb, Self.micro) + offset
            if let end, at - end > Self.leap || last[index].map({ $0 - at > Self.leap }) ?? false {
                // The clock jumped: on from the end of everything so far.
                offset += end - at
                at = end
                jumps += 1
            } else if type == AVMEDIA_TYPE_AUDIO, let previous = last[index], let expected = next[index], at < previous {
                offset += expected - at
                at = expected
            }
            last[index] = at
            if timed {
                let following = at + Self.length(of: packet, stream: stream)
                next[index] = following
                end = max(end ?? following, following)
            }
        }
        guard offset != 0 else { return }
        let shift = av_rescale_q(offset, Self.micro, tb)
        if packet.pointee.pts != noPTS { packet.pointee.pts += shift }
        if packet.pointee.dts != noPTS { packet.pointee.dts += shift }
    }

    /// Forgets the clock after a seek: what was read before no longer precedes what comes next.
    func restart() {
        offset = 0
        last = [:]
        next = [:]
        end = nil
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
