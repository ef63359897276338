import CFFmpeg
import Foundation

/// The first picture of a job's video, decoded on a second core while the plan probes the file.
///
/// Probing (`avformat_find_stream_info`) decodes the first picture on one thread and throws it
/// away; the job's decoder then decodes it again before anything can be upscaled. For an
/// H.264 or HEVC keyframe that is long: measured on this project's machine, 34 ms per 720p
/// picture and 254 ms per 4K one, about 2% of a 720p → 2560 ultrafast job and of a 4K → 8K
/// medium one, with the other core idle both times. A head start opens the file a second time
/// (container headers only), opens the decoder the job will use and decodes up to its first
/// picture while the probe runs. The transcoder's decoder then checks that it is the decoder
/// it would have opened itself (`VideoDecoder.adopt`) and that the file hands it the same
/// packets again, and continues from there; anything else falls back to decoding from the
/// start, so no picture can differ.
final class HeadStart: @unchecked Sendable {
    let path: String
    /// The opened decoder, past `packets`; owned until `takeContext()`.
    private(set) var context: UnsafeMutablePointer<AVCodecContext>?
    /// The video packets sent to it, in order (references).
    private(set) var packets: [UnsafeMutablePointer<AVPacket>] = []
    /// The pictures it gave (references), in order.
    private(set) var frames: [UnsafeMutablePointer<AVFrame>] = []
    /// The chosen video stream, its parameters as read from the container headers, and its time base.
    private(set) var streamIndex = -1
    private(set) var parameters: UnsafeMutablePointer<AVCodecParameters>? = avcodec_parameters_alloc()
    private(set) var timeBase = AVRational(num: 0, den: 1)
    /// `has_b_frames` once the first picture came out.
    private(set) var reorderDepth: Int32 = 0
    private let finished = DispatchSemaphore(value: 0)
    private var succeeded = false

    /// Codecs decoded ahead: the slow camera codecs, whose output order the checks in
    /// `VideoDecoder.adopt` cover.
    static let codecs: [AVCodecID] = [AV_CODEC_ID_H264, AV_CODEC_ID_HEVC]
    /// Give up past this many video packets without a picture, or this many packets in all.
    static let maxVideoPackets = 32, maxPackets = 1024

    private init(path: String) {
        self.path = path
    }

    deinit {
        var c = context
        avcodec_free_context(&c)
        for var p in packets as [UnsafeMutablePointer<AVPacket>?] { av_packet_free(&p) }
        for var f in frames as [UnsafeMutablePointer<AVFrame>?] { av_frame_free(&f) }
        avcodec_parameters_free(&parameters)
    }

    /// Starts decoding `path`'s first picture on another thread (only where there are two or
    /// more cores) and keeps it for `take(path:)`.
    static func begin(path: String) {
        guard ProcessInfo.processInfo.activeProcessorCount >= 2, readableTwice(path) else { return }
        let head = HeadStart(path: path)
        slot.put(head)
        let thread = Thread { head.run() }
        thread.name = "head start"
        thread.start()
    }

    /// Whether `path` is a regular file: a second reader of a pipe or a device would take bytes
    /// the job's own reader needs.
    static func readableTwice(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFREG
    }

    /// The head start begun for `path`, once it has finished, if it has a picture; taken once.
    static func take(path: String) -> HeadStart? {
        guard let head = slot.take(), head.path == path else { return nil }
        head.finished.wait()
        head.finished.signal()
        return head.succeeded ? head : nil
    }

    /// Forgets any head start without waiting for it (its thread frees it when done).
    static func drop() {
        _ = slot.take()
    }

    /// How many transcodes continued from a head start (for the tests).
    static var adopted: Int { slot.adopted }

    static func countAdopted() { slot.countAdopted() }

    /// Hands over the decoder; the head start no longer frees it.
    func takeContext() -> UnsafeMutablePointer<AVCodecContext>? {
        defer { context = nil }
        return context
    }

    /// Hands over the pictures; the caller frees them.
    func takeFrames() -> [UnsafeMutablePointer<AVFrame>] {
        defer { frames = [] }
        return frames
    }

    private func run() {
        defer { finished.signal() }
        var input: UnsafeMutablePointer<AVFormatContext>?
        guard avformat_open_input(&input, localURL(path), nil, nil) >= 0, let input else { return }
        defer {
            var c: UnsafeMutablePointer<AVFormatContext>? = input
            avformat_close_input(&c)
        }
        // MP4 and MOV only: their headers carry the parameter sets, picture size and every
        // packet's timestamps. Matroska stores no decoding timestamps; the demuxer derives them
        // from what the probe learnt, so the probed file's packets differ from these (measured:
        // the third packet's) and the head start would always be dropped.
        guard InputFile.isQuickTime(input) else { return }
        // The stream the transcoder will choose, from the headers.
        guard let chosen = InputFile.videoStreamIndex(in: input) else { return }
        let stream = input.pointee.streams[chosen]!
        let par = stream.pointee.codecpar!
        // Without parameter sets and a size in the headers the probe can change what the stream is.
        guard HeadStart.codecs.contains(par.pointee.codec_id), par.pointee.extradata_size > 0,
              par.pointee.width > 0, par.pointee.height > 0,
              let parameters, avcodec_parameters_copy(parameters, par) >= 0,
              let codec = avcodec_find_decoder(par.pointee.codec_id),
              let ctx = avcodec_alloc_context3(codec) else { return }
        context = ctx
        streamIndex = chosen
        timeBase = stream.pointee.time_base
        // As `VideoDecoder` opens it for an enlarging job: one thread, damaged data an error.
        guard avcodec_parameters_to_context(ctx, par) >= 0 else { return }
        ctx.pointee.pkt_timebase = stream.pointee.time_base
        ctx.pointee.thread_count = 1
        ctx.pointee.err_recognition |= AV_EF_EXPLODE
        guard avcodec_open2(ctx, codec, nil) >= 0 else { return }

        var packet: UnsafeMutablePointer<AVPacket>? = av_packet_alloc()
        defer { av_packet_free(&packet) }
        var read = 0
        while frames.isEmpty, packets.count < HeadStart.maxVideoPackets, read < HeadStart.maxPackets {
            guard let packet, av_read_frame(input, packet) >= 0 else { return }
            defer { av_packet_unref(packet) }
            read += 1
            guard Int(packet.pointee.stream_index) == chosen else { continue }
            guard avcodec_send_packet(ctx, packet) >= 0, let kept = av_packet_clone(packet) else { return }
            packets.append(kept)
            while true {
                guard let frame = av_frame_alloc() else { return }
                let received = avcodec_receive_frame(ctx, frame)
                guard received >= 0 else {
                    var f: UnsafeMutablePointer<AVFrame>? = frame
                    av_frame_free(&f)
                    // Anything but "send more" is an error the job's own decoder reports itself.
                    if received == averrorEAGAIN { break } else { return }
                }
                frames.append(frame)
            }
        }
        reorderDepth = ctx.pointee.has_b_frames
        succeeded = !frames.isEmpty
    }

    /// Whether `packet` is the head start's video packet `index`: same timestamps, flags and bytes.
    func matches(_ packet: UnsafeMutablePointer<AVPacket>, at index: Int) -> Bool {
        guard index < packets.count else { return false }
        let p = packets[index].pointee, q = packet.pointee
        guard p.pts == q.pts, p.dts == q.dts, p.flags == q.flags, p.size == q.size, p.duration == q.duration else { return false }
        return p.size == 0 || memcmp(p.data, q.data, Int(p.size)) == 0
    }

    private static let slot = HeadStartSlot()
}

/// One head start at a time: a plan begins it, its transcoder takes it (or the next plan's replaces it).
private final class HeadStartSlot: @unchecked Sendable {
    private let lock = NSLock()
    private var kept: HeadStart?
    private var adoptedCount = 0

    func put(_ head: HeadStart) { lock.withLock { kept = head } }

    func take() -> HeadStart? {
        lock.withLock {
            defer { kept = nil }
            return kept
        }
    }

    func countAdopted() { lock.withLock { adoptedCount += 1 } }

    var adopted: Int { lock.withLock { adoptedCount } }
}
