import CFFmpeg

/// Re-encodes a text subtitle stream (SubRip, ASS, WebVTT, mov_text…) to one the output
/// container carries: mov_text, the only text subtitles .mp4 and .mov hold, or SubRip for
/// Matroska (which has no mov_text). Bitmap subtitles cannot be converted this way.
final class SubtitleTranscoder {
    let encoder: UnsafeMutablePointer<AVCodecContext>
    private let decoder: UnsafeMutablePointer<AVCodecContext>
    private let inputTimeBase: AVRational
    private var buffer = [UInt8](repeating: 0, count: 64 * 1024)
    private let packet: UnsafeMutablePointer<AVPacket>

    init?(stream: UnsafeMutablePointer<AVStream>, to target: AVCodecID) {
        let par = stream.pointee.codecpar!
        guard let descriptor = avcodec_descriptor_get(par.pointee.codec_id),
              descriptor.pointee.props & AV_CODEC_PROP_TEXT_SUB != 0,
              let decoderCodec = avcodec_find_decoder(par.pointee.codec_id),
              let targetCodec = avcodec_find_encoder(target),
              let d = avcodec_alloc_context3(decoderCodec), let e = avcodec_alloc_context3(targetCodec) else { return nil }
        decoder = d
        encoder = e
        packet = av_packet_alloc()
        inputTimeBase = stream.pointee.time_base
        decoder.pointee.pkt_timebase = stream.pointee.time_base
        encoder.pointee.time_base = stream.pointee.time_base
        guard avcodec_parameters_to_context(decoder, par) >= 0, avcodec_open2(decoder, decoderCodec, nil) >= 0 else { return nil }
        // The encoder's header describes styles (mov_text's does); take the decoder's (ASS-style) header as its base.
        if let header = decoder.pointee.subtitle_header, decoder.pointee.subtitle_header_size > 0 {
            let size = Int(decoder.pointee.subtitle_header_size)
            let copy = av_mallocz(size + 1)!.assumingMemoryBound(to: UInt8.self)
            copy.update(from: header, count: size)
            encoder.pointee.subtitle_header = copy
            encoder.pointee.subtitle_header_size = Int32(size)
        }
        guard avcodec_open2(encoder, targetCodec, nil) >= 0 else { return nil }
    }

    deinit {
        var d: UnsafeMutablePointer<AVCodecContext>? = decoder
        avcodec_free_context(&d)
        var e: UnsafeMutablePointer<AVCodecContext>? = encoder
        avcodec_free_context(&e)
        var p: UnsafeMutablePointer<AVPacket>? = packet
        av_packet_free(&p)
    }

    /// Converts one subtitle packet, or with nil gives what a decoder with delay still holds
    /// (closed captions); the converted packet (timestamps in the input time base) goes to `emit`.
    func transcode(_ input: UnsafeMutablePointer<AVPacket>?, emit: (UnsafeMutablePointer<AVPacket>) throws -> Void) throws {
        let delayed = decoder.pointee.codec.pointee.capabilities & AV_CODEC_CAP_DELAY != 0
        guard input != nil || delayed else { return }
        var empty: UnsafeMutablePointer<AVPacket>? = input == nil ? av_packet_alloc() : nil
        defer { av_packet_free(&empty) }
        var subtitle = AVSubtitle()
        var got: Int32 = 0
        let decoded = avcodec_decode_subtitle2(decoder, &subtitle, &got, input ?? empty!)
        guard decoded >= 0, got != 0 else { return }
        defer { avsubtitle_free(&subtitle) }
        let size = buffer.withUnsafeMutableBufferPointer {
            avcodec_encode_subtitle(encoder, $0.baseAddress, Int32($0.count), &subtitle)
        }
        guard size > 0 else { return }
        try check(av_new_packet(packet, size), "out of memory")
        defer { av_packet_unref(packet) }
        buffer.withUnsafeBufferPointer { packet.pointee.data.update(from: $0.baseAddress!, count: Int(size)) }
        if delayed {
            // A decoder with delay (EIA-608 captions) gives a caption while decoding a later
            // packet: its time is the subtitle's own. Stamped with the packet's, every caption
            // showed when the next should, and the last (given only at the end) was lost.
            let start = av_rescale_q(subtitle.pts, AVRational(num: 1, den: AV_TIME_BASE), inputTimeBase)
                + av_rescale_q(Int64(subtitle.start_display_time), AVRational(num: 1, den: 1000), inputTimeBase)
            let shown = subtitle.end_display_time > subtitle.start_display_time && subtitle.end_display_time != UInt32.max
                ? av_rescale_q(Int64(subtitle.end_display_time - subtitle.start_display_time), AVRational(num: 1, den: 1000), inputTimeBase)
                : input?.pointee.duration ?? 0
            packet.pointee.pts = subtitle.pts == noPTS ? input?.pointee.pts ?? noPTS : start
            packet.pointee.duration = shown
        } else {
            packet.pointee.pts = input!.pointee.pts
            packet.pointee.duration = input!.pointee.duration
        }
        packet.pointee.dts = packet.pointee.pts
        try emit(packet)
    }
}
