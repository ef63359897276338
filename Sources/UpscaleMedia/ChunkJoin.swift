import CFFmpeg
import Foundation

extension Transcoder {
    /// The last step of a chunked job: the chunks' video packets in order (their timestamps
    /// are the one-piece encoder's, so nothing is shifted), interleaved with the source's audio and
    /// subtitles routed as in one pass, with its metadata and chapters, into the output
    /// (temporary name, renamed when complete). No picture is decoded or encoded.
    /// Every chunk must carry the same parameter sets as the first.
    public func join(chunks: [String], cancel: CancellationFlag = CancellationFlag()) throws -> TranscodeSummary {
        MediaLibrary.configure()
        let start = Date()
        guard let firstPath = chunks.first else { throw UpscaleError(.processing, "no chunks to join for '\(job.input)'") }
        let input = try InputFile(path: job.input)
        let videoIndex = try input.videoStreamIndex()
        let videoStream = input.stream(videoIndex)
        videoStream.pointee.discard = AVDISCARD_ALL
        // Pass 1: every chunk's parameters (the same as the first's) and presentation times.
        // Each chunk's encoder started its decode timestamps anew, `depth` pictures before its
        // first presentation time; the joined stream gets them as one encoder would have made
        // them: the n-th decode timestamp is the (n - depth)-th presentation time.
        let first = try ChunkReader(path: firstPath)
        var times: [Int64] = []
        var depth = 0
        var probe: UnsafeMutablePointer<AVPacket>? = av_packet_alloc()
        defer { av_packet_free(&probe) }
        for (k, path) in chunks.enumerated() {
            let reader = k == 0 ? first : try ChunkReader(path: path)
            guard reader.extradata == first.extradata, reader.fields == first.fields,
                  av_cmp_q(reader.timeBase, first.timeBase) == 0 else {
                throw UpscaleError(.processing, "chunk \(k + 1) of '\(job.input)' was encoded with other parameters than chunk 1 (another upscale or encoder version); encode it again from the start (--no-resume; on a queue, with the same upscale version on every machine)")
            }
            var pts: [Int64] = [], dts: [Int64] = []
            while try reader.read(into: probe!, withData: false) {
                pts.append(probe!.pointee.pts)
                dts.append(probe!.pointee.dts)
            }
            let sorted = pts.sorted()
            guard let lowest = sorted.first else { throw ChunkReader.damaged(path) }
            if let last = times.last, lowest <= last {
                throw UpscaleError(.processing, "chunk \(k + 1) of '\(job.input)' overlaps chunk \(k); delete the work folder and run the job again")
            }
            depth = max(depth, dts.firstIndex(of: lowest) ?? 0)
            times += sorted
        }
        let step = times.count > 1 ? times[1] - times[0] : 1

        let output = try OutputFile(finalPath: job.output, muxer: job.muxer)
        output.stripsMetadata = job.stripMetadata
        output.startAtZero(input: input.context)
        let parameters = avcodec_parameters_alloc()!
        defer {
            var p: UnsafeMutablePointer<AVCodecParameters>? = parameters
            avcodec_parameters_free(&p)
        }
        first.describe(parameters)
        if parameters.pointee.codec_id == AV_CODEC_ID_HEVC && (job.muxer == "mov" || job.muxer == "mp4") {
            parameters.pointee.codec_tag = upscale_fourcc(0x68, 0x76, 0x63, 0x31) // "hvc1"
        }
        if parameters.pointee.codec_id == AV_CODEC_ID_PRORES {
            // A chunk keeps no codec tag, and the .mov muxer's guess from the pixel format takes
            // ProRes 4444 for HQ ("apch"); players pick the decoder's profile by the tag, as the
            // encoder set it: "ap4h" for 4444 (with alpha), "apcn" for the 422 standard profile.
            parameters.pointee.codec_tag = job.keepsAlpha ? upscale_fourcc(0x61, 0x70, 0x34, 0x68) : upscale_fourcc(0x61, 0x70, 0x63, 0x6e)
        }
        let videoOut = try output.addStream(parameters: parameters, timeBase: first.timeBase)
        let pq = parameters.pointee.color_trc == AVCOL_TRC_SMPTE2084
        describeVideo(output: output, videoOut: videoOut, input: input, videoStream: videoStream,
                      sampleAspect: parameters.pointee.sample_aspect_ratio, hdr: pq ? try Self.hdrMetadata(job.input, stream: videoStream) : nil)
        let (routes, copied, transcoded) = try addRoutes(input: input, videoIndex: videoIndex, output: output)

        var video: UnsafeMutablePointer<AVPacket>? = av_packet_alloc()
        var other: UnsafeMutablePointer<AVPacket>? = av_packet_alloc()
        defer {
            av_packet_free(&video)
            av_packet_free(&other)
        }
        let hidden = HiddenPackets(muxer: output.muxerName)
        var chunkIndex = 0
        var chunk = try ChunkReader(path: firstPath)
        var haveVideo = false, haveOther = false, otherDone = routes.isEmpty
        var frames = 0
        let placed: String
        do {
            noteLostTrackDetails(output)
            try output.open()
            while true {
                if cancel.isCancelled { throw UpscaleError.cancelled() }
                while !haveVideo && chunkIndex < chunks.count {
                    if try chunk.read(into: video!) {
                        haveVideo = true
                        video!.pointee.dts = frames >= depth ? times[frames - depth] : times[0] - Int64(depth - frames) * step
                    } else {
                        chunkIndex += 1
                        guard chunkIndex < chunks.count else { break }
                        chunk = try ChunkReader(path: chunks[chunkIndex])
                    }
                }
                while !haveOther && !otherDone {
                    if try input.read(into: other!) {
                        if routes[Int(other!.pointee.stream_index)] != nil { haveOther = true } else { av_packet_unref(other) }
                    } else {
                        otherDone = true
                    }
                }
                if !haveVideo && !haveOther { break }
                let videoFirst: Bool
                if haveVideo && haveOther {
                    let vt = video!.pointee.dts != noPTS ? video!.pointee.dts : video!.pointee.pts
                    let ot = other!.pointee.dts != noPTS ? other!.pointee.dts : other!.pointee.pts
                    videoFirst = av_compare_ts(vt, first.timeBase,
                                               ot, input.stream(Int(other!.pointee.stream_index)).pointee.time_base) <= 0
                } else {
                    videoFirst = haveVideo
                }
                if videoFirst {
                    video!.pointee.pos = -1
                    try output.write(video!, stream: videoOut)
                    av_packet_unref(video)
                    haveVideo = false
                    frames += 1
                } else {
                    let index = Int(other!.pointee.stream_index)
                    switch routes[index]! {
                    case .copy(let out):
                        other!.pointee.pos = -1
                        try hidden.pass(other!, stream: out) { try output.write($0, stream: out) }
                    case .audio(let t, let out):
                        try t.transcode(other) { try output.write($0, stream: out) }
                    case .subtitles(let t, let out):
                        try t.transcode(other!) { try output.write($0, stream: out) }
                    }
                    av_packet_unref(other)
                    haveOther = false
                }
            }
            for case .audio(let t, let out) in routes.values {
                try t.transcode(nil) { try output.write($0, stream: out) }
            }
            for case .subtitles(let t, let out) in routes.values {
                try t.transcode(nil) { try output.write($0, stream: out) }
            }
            placed = try output.finish(overwrite: job.overwrite, freeName: job.uniqueName)
            noteMendedDurations(output)
        } catch {
            output.abandon()
            throw error
        }
        return TranscodeSummary(output: placed, frames: frames, seconds: Date().timeIntervalSince(start),
                                encoderName: job.encoder.hevcEncoder ?? job.encoder.codec.encoderName, audioCopied: copied, audioTranscoded: transcoded)
    }
}
