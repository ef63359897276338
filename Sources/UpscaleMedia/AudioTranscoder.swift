import CFFmpeg

/// Re-encodes an audio stream the output container cannot carry to AAC:
/// decode, resample to the encoder's format, regroup into 1024-sample frames, encode.
final class AudioTranscoder {
    let encoder: UnsafeMutablePointer<AVCodecContext>
    let inputCodecName: String
    private let decoder: UnsafeMutablePointer<AVCodecContext>
    private var resampler: OpaquePointer?
    private let fifo: OpaquePointer
    private let decoded: UnsafeMutablePointer<AVFrame>
    private let chunk: UnsafeMutablePointer<AVFrame>
    private let packet: UnsafeMutablePointer<AVPacket>
    private let inputTimeBase: AVRational
    private var nextPTS: Int64?
    /// The first sample's time and how many samples went into the FIFO since, in the encoder's
    /// time base (1/sample rate): where the next decoded sample belongs.
    private var firstPTS: Int64 = 0
    private var samplesIn: Int64 = 0
    /// The longest gap filled, in seconds: the file's length (a jump longer than the whole file
    /// is a damaged timestamp, not a pause, and would have been hours of silence).
    private let longestGap: Double

    init(stream: UnsafeMutablePointer<AVStream>, path: String, globalHeader: Bool, longestGap: Double) throws {
        self.longestGap = longestGap
        let par = stream.pointee.codecpar!
        inputCodecName = String(cString: avcodec_get_name(par.pointee.codec_id))
        inputTimeBase = stream.pointee.time_base
        guard let decoderCodec = avcodec_find_decoder(par.pointee.codec_id) else {
            throw UpscaleError(.input, "'\(path)': no decoder for its \(inputCodecName) audio")
        }
        guard let aac = avcodec_find_encoder(AV_CODEC_ID_AAC) else {
            throw UpscaleError(.processing, "this FFmpeg build has no AAC encoder")
        }
        decoder = avcodec_alloc_context3(decoderCodec)
        decoded = av_frame_alloc()
        chunk = av_frame_alloc()
        packet = av_packet_alloc()
        try check(avcodec_parameters_to_context(decoder, par), "'\(path)': bad audio parameters")
        decoder.pointee.pkt_timebase = stream.pointee.time_base
        try check(avcodec_open2(decoder, decoderCodec, nil), "'\(path)': cannot decode its \(inputCodecName) audio")
        if decoder.pointee.ch_layout.order == AV_CHANNEL_ORDER_UNSPEC {
            let count = decoder.pointee.ch_layout.nb_channels
            av_channel_layout_uninit(&decoder.pointee.ch_layout)
            av_channel_layout_default(&decoder.pointee.ch_layout, count)
        }

        let rates: Set<Int32> = [8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000, 64000, 88200, 96000]
        let rate = rates.contains(decoder.pointee.sample_rate) ? decoder.pointee.sample_rate : 48000
        // The source's layout where the AAC encoder takes it (a program config element names
        // it): the default layout of as many channels made quad (rear left, rear right) 4.0
        // (front centre, back centre), both rear channels mixed into one and the centre silent.
        // Else that default layout.
        let channels = decoder.pointee.ch_layout.nb_channels
        let open = { (source: UnsafePointer<AVChannelLayout>?) -> UnsafeMutablePointer<AVCodecContext>? in
            var made: UnsafeMutablePointer<AVCodecContext>? = avcodec_alloc_context3(aac)
            guard let context = made else { return nil }
            context.pointee.sample_rate = rate
            context.pointee.sample_fmt = AV_SAMPLE_FMT_FLTP
            if let source {
                guard av_channel_layout_copy(&context.pointee.ch_layout, source) >= 0 else { avcodec_free_context(&made); return nil }
            } else {
                av_channel_layout_default(&context.pointee.ch_layout, min(channels, 8))
            }
            context.pointee.bit_rate = Int64(96_000 * min(Int(context.pointee.ch_layout.nb_channels), 6))
            context.pointee.time_base = AVRational(num: 1, den: rate)
            if globalHeader { context.pointee.flags |= AV_CODEC_FLAG_GLOBAL_HEADER }
            guard avcodec_open2(context, aac, nil) >= 0 else { avcodec_free_context(&made); return nil }
            return context
        }
        let decoderContext = decoder
        let sourceLayout = channels <= 8 ? withUnsafePointer(to: &decoderContext.pointee.ch_layout) { open($0) } : nil
        guard let opened = sourceLayout ?? open(nil) else { throw UpscaleError(.processing, "cannot open the AAC encoder") }
        encoder = opened

        try check(swr_alloc_set_opts2(&resampler,
                                      &encoder.pointee.ch_layout, encoder.pointee.sample_fmt, encoder.pointee.sample_rate,
                                      &decoder.pointee.ch_layout, decoder.pointee.sample_fmt, decoder.pointee.sample_rate,
                                      0, nil), "cannot set up audio resampling")
        try check(swr_init(resampler), "cannot set up audio resampling")
        guard let fifo = av_audio_fifo_alloc(encoder.pointee.sample_fmt, encoder.pointee.ch_layout.nb_channels, 4096) else {
            throw UpscaleError(.processing, "out of memory")
        }
        self.fifo = fifo
    }

    deinit {
        var d: UnsafeMutablePointer<AVCodecContext>? = decoder
        avcodec_free_context(&d)
        var e: UnsafeMutablePointer<AVCodecContext>? = encoder
        avcodec_free_context(&e)
        swr_free(&resampler)
        av_audio_fifo_free(fifo)
        var f: UnsafeMutablePointer<AVFrame>? = decoded
        av_frame_free(&f)
        var c: UnsafeMutablePointer<AVFrame>? = chunk
        av_frame_free(&c)
        var p: UnsafeMutablePointer<AVPacket>? = packet
        av_packet_free(&p)
    }

    /// Feeds one input packet (nil at the end); AAC packets, in the encoder's time base, go to `emit`.
    func transcode(_ input: UnsafeMutablePointer<AVPacket>?, emit: (UnsafeMutablePointer<AVPacket>) throws -> Void) throws {
        let sent = avcodec_send_packet(decoder, input)
        if sent < 0 && sent != averrorEOF && sent != averrorEAGAIN {
            throw UpscaleError(.processing, "undecodable \(inputCodecName) audio: \(ffmpegErrorText(sent))")
        }
        while true {
            let received = avcodec_receive_frame(decoder, decoded)
            if received == averrorEAGAIN || received == averrorEOF { break }
            try check(received, "undecodable \(inputCodecName) audio")
            let pts = decoded.pointee.best_effort_timestamp
            if nextPTS == nil {
                firstPTS = pts == noPTS ? 0 : av_rescale_q(pts, inputTimeBase, encoder.pointee.time_base)
                nextPTS = firstPTS
            } else if pts != noPTS {
                // A gap in the input's timestamps (a recorder that paused, a stretch lost to
                // damage): the AAC frames are numbered by their samples, so the sound after it
                // would play early by the gap. Silence fills it, as long as it is, once it is over
                // 20 ms: Matroska's millisecond timestamps jitter below that, and what is left
                // unfilled counts in the next gap, so the sound is never more than 20 ms early.
                // (At 0.1 s, one 85 ms dropout left the sound 85 ms early for the rest of the file;
                // about 45 ms of lead is noticeable.)
                let rate = Int64(encoder.pointee.sample_rate)
                let expected = firstPTS + samplesIn + swr_get_delay(resampler, rate)
                let gap = av_rescale_q(pts, inputTimeBase, encoder.pointee.time_base) - expected
                if gap > rate / 50 && Double(gap) <= longestGap * Double(rate) { try fillSilence(gap, emit: emit) }
            }
            try resample(decoded)
            av_frame_unref(decoded)
            try drain(final: false, emit: emit)
        }
        if input == nil {
            try resample(nil)
            try drain(final: true, emit: emit)
            try send(nil, emit: emit)
        }
    }

    private func resample(_ frame: UnsafeMutablePointer<AVFrame>?) throws {
        let inCount = frame.map { $0.pointee.nb_samples } ?? 0
        let capacity = swr_get_out_samples(resampler, inCount)
        guard capacity > 0 else { return }
        try withSamples(capacity) { buffers in
            let produced: Int32
            if let frame {
                produced = frame.pointee.extended_data.withMemoryRebound(to: UnsafePointer<UInt8>?.self, capacity: 8) {
                    swr_convert(resampler, buffers, capacity, $0, inCount)
                }
            } else {
                produced = swr_convert(resampler, buffers, capacity, nil, 0)
            }
            try check(produced, "audio resampling failed")
            try buffer(buffers, count: produced)
        }
    }

    private func fillSilence(_ samples: Int64, emit: (UnsafeMutablePointer<AVPacket>) throws -> Void) throws {
        var left = samples
        while left > 0 {
            let count = Int32(min(left, 8192))
            try withSamples(count) { buffers in
                av_samples_set_silence(buffers, 0, count, encoder.pointee.ch_layout.nb_channels, encoder.pointee.sample_fmt)
                try buffer(buffers, count: count)
            }
            left -= Int64(count)
            try drain(final: false, emit: emit)
        }
    }

    /// Planes for `count` samples in the encoder's format, for the length of `body`.
    private func withSamples(_ count: Int32, _ body: (UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>) throws -> Void) throws {
        var buffers: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>?
        try check(av_samples_alloc_array_and_samples(&buffers, nil, encoder.pointee.ch_layout.nb_channels, count, encoder.pointee.sample_fmt, 0), "out of memory")
        defer {
            av_freep(buffers)
            av_freep(&buffers)
        }
        try body(buffers!)
    }

    /// Appends `count` samples to the FIFO the AAC frames are cut from.
    private func buffer(_ buffers: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>, count: Int32) throws {
        guard count > 0 else { return }
        let written = buffers.withMemoryRebound(to: UnsafeMutableRawPointer?.self, capacity: 8) {
            av_audio_fifo_write(fifo, $0, count)
        }
        try check(written, "audio buffering failed")
        samplesIn += Int64(count)
    }

    private func drain(final: Bool, emit: (UnsafeMutablePointer<AVPacket>) throws -> Void) throws {
        let size = encoder.pointee.frame_size > 0 ? encoder.pointee.frame_size : 1024
        while av_audio_fifo_size(fifo) >= size || (final && av_audio_fifo_size(fifo) > 0) {
            let count = min(size, av_audio_fifo_size(fifo))
            chunk.pointee.nb_samples = count
            chunk.pointee.format = encoder.pointee.sample_fmt.rawValue
            chunk.pointee.sample_rate = encoder.pointee.sample_rate
            try check(av_channel_layout_copy(&chunk.pointee.ch_layout, &encoder.pointee.ch_layout), "audio layout")
            try check(av_frame_get_buffer(chunk, 0), "out of memory")
            let read = chunk.pointee.extended_data.withMemoryRebound(to: UnsafeMutableRawPointer?.self, capacity: 8) {
                av_audio_fifo_read(fifo, $0, count)
            }
            try check(read, "audio buffering failed")
            chunk.pointee.pts = nextPTS ?? 0
            nextPTS = (nextPTS ?? 0) + Int64(count)
            try send(chunk, emit: emit)
            av_frame_unref(chunk)
        }
    }

    private func send(_ frame: UnsafeMutablePointer<AVFrame>?, emit: (UnsafeMutablePointer<AVPacket>) throws -> Void) throws {
        let sent = avcodec_send_frame(encoder, frame)
        if sent < 0 && sent != averrorEOF { try check(sent, "the AAC encoder failed") }
        while true {
            let received = avcodec_receive_packet(encoder, packet)
            if received == averrorEAGAIN || received == averrorEOF { return }
            try check(received, "the AAC encoder failed")
            defer { av_packet_unref(packet) }
            try emit(packet)
        }
    }
}
