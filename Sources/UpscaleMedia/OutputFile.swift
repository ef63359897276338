import CFFmpeg
import Foundation

/// The output container, written to a hidden temporary file beside the final path
/// and renamed into place only after the trailer is written.
final class OutputFile {
    let finalPath: String
    let temporaryPath: String
    let context: UnsafeMutablePointer<AVFormatContext>
    private var opened = false
    private var closed = false
    private var encoderTimeBases: [Int: AVRational] = [:]
    /// Copied Opus into Matroska: its codec delay, added back to its timestamps (see addCopiedStream).
    private var codecDelays: [Int: Int64] = [:]
    /// Subtracted from every timestamp written (and from chapter times), in microseconds: the
    /// input's start, so the output starts at 0 as the ffmpeg command's does. MPEG-TS files
    /// start at 1.4 s and more (an hour in, for a recording), which became an empty stretch
    /// before the picture in .mov/.mkv output. Streams keep their offsets to one another.
    private var startOffset: Int64 = 0
    /// .mov/.mp4, whose muxer refuses a packet duration over 2^31-1 (see `write`).
    private let refusesLongDurations: Bool
    /// .mov/.mp4: per stream, a packet whose duration the muxer refuses (negative, or over
    /// 2^31-1 in the stream's time base: FFmpeg's dvdsub encoder leaves 2^32-1 ms on captions
    /// with no end), held until the stream's next packet or the end gives it one.
    private var undated: [Int: UnsafeMutablePointer<AVPacket>] = [:]
    /// Per stream, how many packets got a duration so (see `mendedDurations`).
    private var mended: [Int: Int] = [:]
    /// Where the video written so far ends, in microseconds (for the last undated packet).
    private var videoEnd: Int64 = 0

    /// Takes the input's start as the offset: a positive one, and a negative one of MPEG
    /// program or transport streams, whose 33-bit clock wraps every 26.5 hours (FFmpeg gives
    /// what precedes the wrap negative times, which the .mov/.mp4 muxer's edit list then hid:
    /// 9 of 20 pictures of a recording that crossed it). Other negative starts, as .mov/.mp4
    /// edit lists and codec delays give, are left to the muxer. Call before chapters are
    /// copied and packets written.
    func startAtZero(input: UnsafeMutablePointer<AVFormatContext>) {
        let start = input.pointee.start_time
        let format = input.pointee.iformat.map { String(cString: $0.pointee.name) } ?? ""
        startOffset = start == noPTS ? 0 : start > 0 || ["mpegts", "mpeg"].contains(format) ? start : 0
    }

    init(finalPath: String, muxer: String) throws {
        self.finalPath = finalPath
        temporaryPath = PartialFile.temporaryPath(for: finalPath, pid: getpid())
        PartialFile.removeStale(in: URL(fileURLWithPath: finalPath).deletingLastPathComponent().path)
        var ctx: UnsafeMutablePointer<AVFormatContext>?
        try check(avformat_alloc_output_context2(&ctx, nil, muxer, temporaryPath), "cannot set up a \(muxer) file")
        context = ctx!
        muxerName = String(cString: ctx!.pointee.oformat.pointee.name)
        refusesLongDurations = ["mov", "mp4"].contains(muxerName)
    }

    deinit {
        if !closed { abandon() }
        avformat_free_context(context)
    }

    var needsGlobalHeader: Bool { context.pointee.oformat.pointee.flags & AVFMT_GLOBALHEADER != 0 }
    let muxerName: String

    /// Whether a stream of `codec` can be copied into this container as it is.
    func canHold(_ codec: AVCodecID) -> Bool { Self.format(context.pointee.oformat, holds: codec) }

    /// Whether a file of extension `ext` could take a stream of `parameters`' codec (the codec
    /// query alone, without the muxer's start), for a note's advice.
    static func muxer(_ ext: String, holds parameters: UnsafePointer<AVCodecParameters>) -> Bool {
        guard let name = UpscaleMedia.muxerName(forExtension: ext), let format = av_guess_format(name, nil, nil) else { return false }
        return self.format(format, holds: parameters.pointee.codec_id)
    }

    /// FFmpeg's codec query for `format`, less what its muxer then refuses or writes unplayably.
    private static func format(_ format: UnsafePointer<AVOutputFormat>, holds codec: AVCodecID) -> Bool {
        let name = String(cString: format.pointee.name)
        // The mov muxer shares its tag table with mp4, so FFmpeg's query says yes to
        // audio codecs it then refuses in .mov at header time.
        if name == "mov" && [AV_CODEC_ID_OPUS, AV_CODEC_ID_FLAC, AV_CODEC_ID_VORBIS].contains(codec) {
            return false
        }
        // FFmpeg writes Vorbis into .mp4 under a private object type (0xDD) that no MP4
        // specification registers; QuickTime and Safari play such a file without sound.
        if name == "mp4" && codec == AV_CODEC_ID_VORBIS { return false }
        return avformat_query_codec(format, codec, FF_COMPLIANCE_NORMAL) == 1
    }

    /// Whether a stream described by `parameters` can be copied into this container as it
    /// is: the codec query above, then the muxer's own start on a scratch file in memory.
    /// The query's tag tables let through what the muxer then refuses when it starts — FLAC
    /// and TrueHD in .mp4 are "experimental" in FFmpeg 5.1 — and a copy the muxer refuses
    /// would fail the whole job at its header.
    /// With `keepingTag`, the stream keeps its codec tag and only the muxer's start decides (a
    /// data track, which the codec query knows nothing of, is known to the muxer by its tag).
    func canHold(_ parameters: UnsafePointer<AVCodecParameters>, keepingTag: Bool = false) -> Bool {
        guard keepingTag || canHold(parameters.pointee.codec_id) else { return false }
        var made: UnsafeMutablePointer<AVFormatContext>?
        guard avformat_alloc_output_context2(&made, context.pointee.oformat, nil, nil) >= 0, let scratch = made else { return false }
        defer { avformat_free_context(scratch) }
        guard let stream = avformat_new_stream(scratch, nil), avcodec_parameters_copy(stream.pointee.codecpar, parameters) >= 0,
              avio_open_dyn_buf(&scratch.pointee.pb) >= 0 else { return false }
        defer {
            var bytes: UnsafeMutablePointer<UInt8>?
            _ = avio_close_dyn_buf(scratch.pointee.pb, &bytes)
            av_free(bytes)
            scratch.pointee.pb = nil
        }
        if !keepingTag { stream.pointee.codecpar.pointee.codec_tag = 0 }
        let rate = parameters.pointee.sample_rate
        stream.pointee.time_base = AVRational(num: 1, den: rate > 0 ? rate : 90000)
        return avformat_init_output(scratch, nil) >= 0
    }

    /// A stream fed by one of our encoders; packets arrive in that encoder's time base.
    @discardableResult
    func addStream(encoder: UnsafeMutablePointer<AVCodecContext>) throws -> Int {
        guard let stream = avformat_new_stream(context, nil) else { throw UpscaleError(.processing, "out of memory") }
        try check(avcodec_parameters_from_context(stream.pointee.codecpar, encoder), "cannot describe the output stream")
        stream.pointee.time_base = encoder.pointee.time_base
        let index = Int(stream.pointee.index)
        encoderTimeBases[index] = encoder.pointee.time_base
        return index
    }

    /// A stream described by `parameters` (a chunk's encoder), packets in `timeBase`.
    func addStream(parameters: UnsafeMutablePointer<AVCodecParameters>, timeBase: AVRational) throws -> Int {
        guard let stream = avformat_new_stream(context, nil) else { throw UpscaleError(.processing, "out of memory") }
        try check(avcodec_parameters_copy(stream.pointee.codecpar, parameters), "cannot describe the output stream")
        stream.pointee.time_base = timeBase
        let index = Int(stream.pointee.index)
        encoderTimeBases[index] = timeBase
        return index
    }

    /// A stream copied from the input; packets keep the input stream's time base.
    func addCopiedStream(from input: UnsafeMutablePointer<AVStream>) throws -> Int {
        guard let stream = avformat_new_stream(context, nil) else { throw UpscaleError(.processing, "out of memory") }
        try check(avcodec_parameters_copy(stream.pointee.codecpar, input.pointee.codecpar), "cannot copy stream parameters")
        stream.pointee.codecpar.pointee.codec_tag = 0
        stream.pointee.time_base = input.pointee.time_base
        stream.pointee.disposition = input.pointee.disposition
        av_dict_copy(&stream.pointee.metadata, input.pointee.metadata, 0)
        let index = Int(stream.pointee.index)
        encoderTimeBases[index] = input.pointee.time_base
        // FFmpeg 5.1's Matroska reader takes Opus's codec delay (CodecDelay, 312 samples) off
        // the timestamps and its writer records it without adding it back: the sound began
        // 6.5 ms before 0, the muxer moved every stream by that, and each generation of an
        // upscale moved the picture 7 ms later. Added back here, as newer FFmpeg does.
        let par = input.pointee.codecpar.pointee
        if ["matroska", "webm"].contains(muxerName), par.codec_id == AV_CODEC_ID_OPUS, par.initial_padding > 0 {
            codecDelays[index] = av_rescale_q(Int64(par.initial_padding), AVRational(num: 1, den: 48_000), input.pointee.time_base)
        }
        return index
    }

    func stream(_ index: Int) -> UnsafeMutablePointer<AVStream> { context.pointee.streams[index]! }

    /// A Matroska attachment holding `data` (a file, as the fonts or cover art of an .mkv),
    /// named `filename`, of MIME type `mimetype`.
    func addAttachment(_ data: UnsafeRawBufferPointer, filename: String, mimetype: String) throws {
        try UpscaleMedia.addAttachment(data, filename: filename, mimetype: mimetype, to: context)
    }

    /// Copies chapters (times and titles), moved back with the packets by the input's start.
    func copyChapters(from input: UnsafeMutablePointer<AVFormatContext>) {
        UpscaleMedia.copyChapters(from: input, into: context, movedBy: -startOffset)
    }

    /// Copies how the input video is shown: its display matrix (players rotate the output as
    /// they did the input), its 360° projection and its stereo 3D layout. The last two were
    /// dropped: an upscaled 360° video played as a flat equirectangular picture, and
    /// side-by-side 3D lost what explained its doubled width.
    func copyRotation(from input: UnsafeMutablePointer<AVStream>, to videoStream: Int) {
        for (type, least) in [(AV_PKT_DATA_DISPLAYMATRIX, 36), (AV_PKT_DATA_SPHERICAL, 1), (AV_PKT_DATA_STEREO3D, 1)] {
            var size: Int = 0
            guard let data = av_stream_get_side_data(input, type, &size), size >= least,
                  let copy = av_stream_new_side_data(stream(videoStream), type, size) else { continue }
            copy.update(from: data, count: size)
            // FFmpeg writes .mov/.mp4's boxes for them (sv3d, st3d) only when told it may.
            if type != AV_PKT_DATA_DISPLAYMATRIX { context.pointee.strict_std_compliance = FF_COMPLIANCE_UNOFFICIAL }
        }
    }

    func copyMetadata(from input: UnsafeMutablePointer<AVFormatContext>, videoStream: Int, from inputStream: UnsafeMutablePointer<AVStream>) {
        av_dict_copy(&context.pointee.metadata, input.pointee.metadata, 0)
        av_dict_copy(&stream(videoStream).pointee.metadata, inputStream.pointee.metadata, 0)
        for key in ["encoder", "handler_name", "alpha_mode"] { av_dict_set(&stream(videoStream).pointee.metadata, key, nil, 0) }
        Self.dropStatistics(&stream(videoStream).pointee.metadata)
    }

    /// Removes the figures mkvmerge records per track (`BPS`, `NUMBER_OF_BYTES`,
    /// `NUMBER_OF_FRAMES`, `DURATION`, `_STATISTICS_*`, each also with a language suffix) from
    /// a re-encoded stream's tags: they described the source's packets (an upscaled 4K video
    /// was reported at its SD source's bit rate and size).
    static func dropStatistics(_ metadata: inout OpaquePointer?) {
        for (key, _) in entries(of: metadata) {
            let name = key.uppercased().split(separator: "-").first.map(String.init) ?? ""
            if ["BPS", "NUMBER_OF_BYTES", "NUMBER_OF_FRAMES", "DURATION"].contains(name) || name.hasPrefix("_STATISTICS_") {
                av_dict_set(&metadata, key, nil, 0)
            }
        }
    }

    /// Tags a stream keeps under `--strip`: what a player needs to name and place a track.
    static let tagsKeptWhenStripped: Set<String> = ["language", "title", "timecode"]

    /// `--strip` for a video: the file's tags (a phone's location, make, model, creation time,
    /// the software that made it) are not written, and each stream keeps only its language,
    /// title and start timecode. Chapters, rotation and colour stay.
    var stripsMetadata = false

    /// ISO 639-2 codes that FFmpeg's .mov muxer does not know (it writes the old Macintosh
    /// language codes, which take one of each pair), and their other form: a German track
    /// ("deu") came out with no language.
    static let movLanguages = ["deu": "ger", "fre": "fra", "cze": "ces", "zho": "chi", "nld": "dut", "ell": "gre", "fas": "per",
                               "hye": "arm", "kat": "geo", "eus": "baq", "isl": "ice", "mkd": "mac", "msa": "may", "mya": "bur",
                               "rum": "ron", "slo": "slk", "sqi": "alb", "bod": "tib", "cym": "wel",
                               // Its Macintosh spellings, and the codes that took over from them.
                               "swe": "sve", "nob": "nor", "nno": "nor", "gle": "iri", "fil": "tgl"]

    /// The ISO 639-2 codes FFmpeg's .mov muxer writes (its table of Macintosh language codes);
    /// any other language is left out of a .mov.
    static let movKnownLanguages: Set<String> = [
        "eng", "fra", "ger", "ita", "dut", "sve", "spa", "dan", "por", "nor", "heb", "jpn", "ara", "fin", "gre", "ice", "mlt",
        "tur", "chi", "urd", "hin", "tha", "kor", "lit", "pol", "hun", "est", "lav", "rus", "iri", "alb", "ron", "ces", "slk",
        "slv", "yid", "mac", "bul", "ukr", "bel", "uzb", "kaz", "aze", "arm", "geo", "mol", "kir", "tgk", "tuk", "mon", "pus",
        "kur", "kas", "snd", "tib", "nep", "san", "mar", "ben", "asm", "guj", "ori", "mal", "kan", "tam", "tel", "bur", "khm",
        "lao", "vie", "ind", "tgl", "may", "amh", "tir", "orm", "som", "swa", "run", "mlg", "epo", "wel", "baq", "cat", "lat",
        "que", "grn", "aym", "tat", "uig", "dzo", "jav"]

    /// Track flags and how notes name them. FFmpeg 5.1's .mov muxer writes none of them (only
    /// "default", as the track's enabled flag); its .mp4 muxer writes all but "original" as
    /// `kind` boxes; Matroska keeps them all.
    static let trackFlags: [(flag: Int32, name: String)] = [
        (AV_DISPOSITION_COMMENT, "commentary"), (AV_DISPOSITION_FORCED, "forced"), (AV_DISPOSITION_VISUAL_IMPAIRED, "visually impaired"),
        (AV_DISPOSITION_HEARING_IMPAIRED, "hearing impaired"), (AV_DISPOSITION_DUB, "dub"), (AV_DISPOSITION_ORIGINAL, "original"),
    ]

    /// The streams whose flags (a commentary track, forced subtitles, an audio description)
    /// this container cannot record, with their names, to be said: they were dropped without a word.
    func flagsLost() -> [(stream: Int, flags: [String])] {
        let lost: [Int32]
        switch muxerName {
        case "mov": lost = Self.trackFlags.map(\.flag)
        case "mp4": lost = [AV_DISPOSITION_ORIGINAL]
        default: return []
        }
        return (0..<Int(context.pointee.nb_streams)).compactMap { index in
            let disposition = stream(index).pointee.disposition
            let names = Self.trackFlags.filter { lost.contains($0.flag) && disposition & $0.flag != 0 }.map(\.name)
            return names.isEmpty ? nil : (index, names)
        }
    }

    /// For a .mov: the streams whose language it cannot record (index, code), to be said; the
    /// codes for no particular language are not counted.
    func movLanguagesLost() -> [(stream: Int, code: String)] {
        guard muxerName == "mov" else { return [] }
        return (0..<Int(context.pointee.nb_streams)).compactMap { index in
            guard let entry = av_dict_get(stream(index).pointee.metadata, "language", nil, 0) else { return nil }
            let code = String(cString: entry.pointee.value).lowercased()
            let written = Self.movLanguages[code] ?? code
            return Self.movKnownLanguages.contains(written) || ["", "und", "mul", "zxx", "mis"].contains(code) ? nil : (index, code)
        }
    }

    func open() throws {
        if muxerName == "mov" {
            for index in 0..<Int(context.pointee.nb_streams) {
                let target = stream(index)
                if let entry = av_dict_get(target.pointee.metadata, "language", nil, 0),
                   let other = Self.movLanguages[String(cString: entry.pointee.value).lowercased()] {
                    av_dict_set(&target.pointee.metadata, "language", other, 0)
                }
            }
        }
        if stripsMetadata {
            av_dict_free(&context.pointee.metadata)
            for index in 0..<Int(context.pointee.nb_streams) {
                let target = stream(index)
                var kept: OpaquePointer?
                // An attachment is named by its tags (the Matroska muxer refused a font without them).
                let keep = target.pointee.codecpar.pointee.codec_type == AVMEDIA_TYPE_ATTACHMENT
                    ? Self.tagsKeptWhenStripped.union(["filename", "mimetype"]) : Self.tagsKeptWhenStripped
                for key in keep {
                    if let entry = av_dict_get(target.pointee.metadata, key, nil, 0) { av_dict_set(&kept, key, entry.pointee.value, 0) }
                }
                av_dict_free(&target.pointee.metadata)
                target.pointee.metadata = kept
            }
        }
        let dir = URL(fileURLWithPath: finalPath).deletingLastPathComponent().path
        let result = avio_open(&context.pointee.pb, localURL(temporaryPath), AVIO_FLAG_WRITE)
        if result < 0 {
            throw UpscaleError(.output, "cannot write in '\(dir)': \(ffmpegErrorText(result)); pick another --output folder")
        }
        opened = true
        var options = headerOptions(for: context)
        defer { av_dict_free(&options) }
        try writeCheck(avformat_write_header(context, &options), "cannot start '\(finalPath)'")
    }

    /// Writes one packet; `packet`'s timestamps are in the time base its stream was added with.
    func write(_ packet: UnsafeMutablePointer<AVPacket>, stream index: Int) throws {
        packet.pointee.stream_index = Int32(index)
        if let delay = codecDelays[index] {
            if packet.pointee.pts != noPTS { packet.pointee.pts += delay }
            if packet.pointee.dts != noPTS { packet.pointee.dts += delay }
        }
        if startOffset != 0 {
            let shift = av_rescale_q(startOffset, AVRational(num: 1, den: AV_TIME_BASE), encoderTimeBases[index]!)
            if packet.pointee.pts != noPTS { packet.pointee.pts -= shift }
            if packet.pointee.dts != noPTS { packet.pointee.dts -= shift }
        }
        av_packet_rescale_ts(packet, encoderTimeBases[index]!, stream(index).pointee.time_base)
        let p = packet.pointee
        if refusesLongDurations, stream(index).pointee.codecpar.pointee.codec_type == AVMEDIA_TYPE_VIDEO, p.pts != noPTS {
            videoEnd = max(videoEnd, av_rescale_q(p.pts + max(p.duration, 0), stream(index).pointee.time_base, AVRational(num: 1, den: AV_TIME_BASE)))
        }
        if let held = undated.removeValue(forKey: index) {
            try writeUndated(held, until: p.pts != noPTS ? p.pts : p.dts)
        }
        if refusesLongDurations, p.duration < 0 || p.duration > Int64(Int32.max) {
            guard let held = av_packet_clone(packet) else { throw UpscaleError(.processing, "out of memory") }
            mended[index, default: 0] += 1
            undated[index] = held
            return
        }
        try writeCheck(av_interleaved_write_frame(context, packet), "writing '\(finalPath)' failed")
    }

    /// Writes a held packet lasting until `end` (its stream's time base), within what the muxer takes.
    private func writeUndated(_ held: UnsafeMutablePointer<AVPacket>, until end: Int64) throws {
        var packet: UnsafeMutablePointer<AVPacket>? = held
        defer { av_packet_free(&packet) }
        let start = held.pointee.pts != noPTS ? held.pointee.pts : held.pointee.dts
        held.pointee.duration = start == noPTS || end == noPTS ? 0 : min(max(end - start, 0), Int64(Int32.max))
        try writeCheck(av_interleaved_write_frame(context, held), "writing '\(finalPath)' failed")
    }

    /// The streams whose packets had no duration this container takes, and how many: each was
    /// given one lasting until the stream's next packet, the last until the video's end.
    func mendedDurations() -> [(stream: Int, packets: Int)] {
        mended.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    /// Writes the trailer, closes the file and renames it into place (`FolderWrites.place`);
    /// returns the path it was given.
    func finish(overwrite: Bool, freeName: Bool = false) throws -> String {
        for (index, held) in undated.sorted(by: { $0.key < $1.key }) {
            undated[index] = nil
            try writeUndated(held, until: av_rescale_q(videoEnd, AVRational(num: 1, den: AV_TIME_BASE), stream(index).pointee.time_base))
        }
        try writeCheck(av_write_trailer(context), "finishing '\(finalPath)' failed")
        try writeCheck(avio_closep(&context.pointee.pb), "closing '\(finalPath)' failed")
        closed = true
        // On disk before it gets its name, and the name on disk before success is reported.
        let fd = Glibc.open(temporaryPath, O_RDONLY)
        if fd >= 0 {
            let synced = fsync(fd)
            close(fd)
            if synced != 0 && errno == ENOSPC {
                unlink(temporaryPath)
                throw UpscaleError(.output, "the disk is full: finishing '\(finalPath)' failed; free some space or choose another --output folder")
            }
        }
        TestHook.pauseIfBeforePlacing()
        return try FolderWrites.place(temporaryPath, at: finalPath, overwrite: overwrite, freeName: freeName)
    }

    /// Closes and deletes the temporary file; the final path is never touched.
    func abandon() {
        for (_, held) in undated {
            var packet: UnsafeMutablePointer<AVPacket>? = held
            av_packet_free(&packet)
        }
        undated = [:]
        guard !closed else { return }
        closed = true
        if opened { avio_closep(&context.pointee.pb) }
        unlink(temporaryPath)
    }

    private func writeCheck(_ code: Int32, _ what: String) throws {
        guard code < 0 else { return }
        if code == upscale_averror(ENOSPC) {
            throw UpscaleError(.output, "the disk is full: \(what); free some space or choose another --output folder")
        }
        throw UpscaleError(.output, "\(what): \(ffmpegErrorText(code))")
    }
}

/// The muxer's options for `context`: a .mov/.mp4 whose metadata holds QuickTime's
/// reverse-DNS keys (an iPhone's location, make, model, software and capture date; Android's
/// capture rate, which marks slow motion) writes every key in a `keys`/`mdta` list, as the
/// source held them; otherwise the muxer drops each key it has no atom for. Nil otherwise.
func headerOptions(for context: UnsafeMutablePointer<AVFormatContext>) -> OpaquePointer? {
    guard let format = context.pointee.oformat, ["mov", "mp4"].contains(String(cString: format.pointee.name)),
          entries(of: context.pointee.metadata).contains(where: { $0.key.hasPrefix("com.") }) else { return nil }
    var options: OpaquePointer?
    av_dict_set(&options, "movflags", "use_metadata_tags", 0)
    return options
}

/// Every key and value of an FFmpeg dictionary (a file's or a stream's tags), in order.
/// A dictionary's entries as a Swift dictionary (the last of a repeated key).
func tags(of dictionary: OpaquePointer?) -> [String: String] {
    Dictionary(entries(of: dictionary).map { ($0.key, $0.value) }, uniquingKeysWith: { _, last in last })
}

func entries(of dictionary: OpaquePointer?) -> [(key: String, value: String)] {
    var result: [(key: String, value: String)] = []
    var entry: UnsafeMutablePointer<AVDictionaryEntry>?
    while let next = av_dict_get(dictionary, "", entry, AV_DICT_IGNORE_SUFFIX) {
        result.append((String(cString: next.pointee.key), String(cString: next.pointee.value)))
        entry = next
    }
    return result
}

/// Copies `input`'s chapters (times and titles) into `output`, which has none yet, each moved
/// by `shift` microseconds (never before 0). The muxer frees them with the context.
func copyChapters(from input: UnsafeMutablePointer<AVFormatContext>, into output: UnsafeMutablePointer<AVFormatContext>, movedBy shift: Int64) {
    let count = Int(input.pointee.nb_chapters)
    guard count > 0, output.pointee.nb_chapters == 0,
          let list = av_calloc(count, MemoryLayout<UnsafeMutablePointer<AVChapter>?>.stride) else { return }
    let chapters = list.bindMemory(to: UnsafeMutablePointer<AVChapter>?.self, capacity: count)
    var made = 0
    for i in 0..<count {
        guard let source = input.pointee.chapters[i],
              let chapter = av_mallocz(MemoryLayout<AVChapter>.size)?.bindMemory(to: AVChapter.self, capacity: 1) else { continue }
        chapter.pointee.id = source.pointee.id
        chapter.pointee.time_base = source.pointee.time_base
        let moved = av_rescale_q(shift, AVRational(num: 1, den: AV_TIME_BASE), source.pointee.time_base)
        chapter.pointee.start = max(0, source.pointee.start + moved)
        chapter.pointee.end = max(0, source.pointee.end + moved)
        av_dict_copy(&chapter.pointee.metadata, source.pointee.metadata, 0)
        chapters[made] = chapter
        made += 1
    }
    output.pointee.chapters = chapters
    output.pointee.nb_chapters = UInt32(made)
}

/// Temporary outputs are named `.<output name>.<host>.<pid>.partial`. A process that died
/// without cleaning up (killed with SIGKILL, a crash inside a C library) leaves one behind;
/// the next job writing into that folder removes those of this host whose process is gone.
/// Other hosts' files (a folder shared over NFS/SMB) are never touched.
public enum PartialFile {
    static let host: String = {
        var name = [CChar](repeating: 0, count: 256)
        gethostname(&name, name.count - 1)
        let text = String(cString: name).replacingOccurrences(of: "/", with: "_")
        return text.isEmpty ? "localhost" : text
    }()

    /// The longest output file name (in bytes) whose temporary names still fit the 255 bytes
    /// a name may have here: the temporary file's decoration, and a still's ".tiff.raw" after it.
    public static var longestName: Int {
        255 - (URL(fileURLWithPath: temporaryPath(for: "/x", pid: pid_t.max)).lastPathComponent.utf8.count - 1) - ".tiff.raw".utf8.count
    }

    /// The temporary file process `pid` writes while making `finalPath`. Stills add their
    /// format's suffix after it (libvips picks the saver by suffix) and a raw strip file after that.
    public static func temporaryPath(for finalPath: String, pid: pid_t) -> String {
        let url = URL(fileURLWithPath: finalPath)
        return url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent).\(host).\(pid).partial").path
    }

    /// Removes every temporary file process `pid` left while making `finalPath` (it died):
    /// `temporaryPath` and the names that continue it.
    public static func remove(for finalPath: String, pid: pid_t) {
        let prefix = URL(fileURLWithPath: temporaryPath(for: finalPath, pid: pid)).lastPathComponent
        let folder = URL(fileURLWithPath: finalPath).deletingLastPathComponent().path
        for name in (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
        where name == prefix || name.hasPrefix(prefix + ".") {
            unlink((folder as NSString).appendingPathComponent(name))
        }
    }

    /// Deletes `.*.<this host>.<pid>.partial` files in `folder` whose process no longer exists.
    @discardableResult
    public static func removeStale(in folder: String) -> [String] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else { return [] }
        var removed: [String] = []
        let marker = ".\(host)."
        // Stills' temporary files keep their format's suffix after ".partial" (".partial.jpg", ".partial.jpg.raw").
        for name in names where name.hasPrefix(".") {
            guard let marked = name.range(of: ".partial", options: .backwards),
                  marked.upperBound == name.endIndex || name[marked.upperBound] == "." else { continue }
            let stem = name[..<marked.lowerBound]
            guard let dot = stem.lastIndex(of: "."), let pid = pid_t(stem[stem.index(after: dot)...]),
                  stem[..<dot].hasSuffix(marker.dropLast()) else { continue }
            if kill(pid, 0) == 0 || errno != ESRCH { continue }
            let path = (folder as NSString).appendingPathComponent(name)
            if unlink(path) == 0 { removed.append(path) }
        }
        return removed
    }
}

/// Writing into folders without replacing anything, and making a rename durable.
public enum FolderWrites {
    /// `name` in `folder`, or `stem N.ext` for the first N ≥ 2 that is not taken. A dangling
    /// symbolic link takes its name too (a rename refuses it, and a loop choosing it again spun).
    public static func freeName(_ name: String, in folder: String) -> String {
        let ext = URL(fileURLWithPath: name).pathExtension
        let stem = ext.isEmpty ? name : String(name.dropLast(ext.count + 1))
        var candidate = name
        var n = 2
        var info = stat()
        while lstat((folder as NSString).appendingPathComponent(candidate), &info) == 0 {
            candidate = ext.isEmpty ? "\(stem) \(n)" : "\(stem) \(n).\(ext)"
            n += 1
        }
        return candidate
    }

    private typealias RenameAt2 = @convention(c) (Int32, UnsafePointer<CChar>, Int32, UnsafePointer<CChar>, UInt32) -> Int32
    /// glibc's renameat2 (2.28+), which Swift's Glibc module does not declare.
    private static let renameat2: RenameAt2? = dlsym(nil, "renameat2").map { unsafeBitCast($0, to: RenameAt2.self) }

    /// rename(2) that fails with EEXIST rather than replace `to` (RENAME_NOREPLACE). It needs only
    /// write access to both folders: a link, as before, is refused for another user's file where
    /// `fs.protected_hardlinks` is on (Debian's default), and a shared inbox's files were then
    /// upscaled again at every scan. Link and unlink on filesystems without RENAME_NOREPLACE.
    public static func renameNoReplace(_ from: String, _ to: String) -> Int32 {
        if let renameat2 {
            let result = renameat2(AT_FDCWD, from, AT_FDCWD, to, 1) // RENAME_NOREPLACE
            if result == 0 || (errno != EINVAL && errno != ENOSYS) { return result }
        }
        guard link(from, to) == 0 else { return -1 }
        guard unlink(from) == 0 else {
            // Not removable (a sticky folder, another user's file): undo, and say why.
            let code = errno
            unlink(to)
            errno = code
            return -1
        }
        return 0
    }

    /// Told just before each rename `place` tries, of the finished file and the name it is to
    /// get: a job's child tells its parent (`JobReport.placing`), which can then tell the
    /// output from another file of that name should the child be killed right after the
    /// rename. Set once, as the child starts, before other threads run.
    nonisolated(unsafe) public static var willPlace: ((_ temporary: String, _ target: String) -> Void)?
    /// Told once the rename to `target` is done (before the folder is synced). Set as `willPlace` is.
    nonisolated(unsafe) public static var didPlace: ((_ target: String) -> Void)?

    /// Gives the finished file `temporary` the name `finalPath`, replacing a file there only
    /// with `overwrite`; with `freeName`, a name taken meanwhile (another job of the watch
    /// folder planned the same one: clip.avi and clip.ts both become "clip Upscaled.mov")
    /// gives the next free one, "clip Upscaled 2.mov", instead of failing a finished job.
    /// Returns the path given. The temporary file is removed when it cannot be placed.
    public static func place(_ temporary: String, at finalPath: String, overwrite: Bool, freeName: Bool = false) throws -> String {
        let folder = URL(fileURLWithPath: finalPath).deletingLastPathComponent().path
        var target = finalPath
        while true {
            willPlace?(temporary, target)
            if (overwrite ? rename(temporary, target) : renameNoReplace(temporary, target)) == 0 {
                didPlace?(target)
                sync(folder: folder)
                return target
            }
            let code = errno
            if code == EEXIST && freeName {
                target = (folder as NSString).appendingPathComponent(self.freeName(URL(fileURLWithPath: finalPath).lastPathComponent, in: folder))
                continue
            }
            unlink(temporary)
            if code == EEXIST {
                throw UpscaleError(.output, "'\(finalPath)' appeared while upscaling; left it untouched (use --overwrite to replace it)")
            }
            throw UpscaleError(.output, "cannot move the finished file to '\(target)': \(String(cString: strerror(code)))")
        }
    }

    /// fsync of a folder: the names created or removed in it are on disk.
    public static func sync(folder path: String) {
        let fd = Glibc.open(path, O_RDONLY | O_DIRECTORY)
        if fd >= 0 {
            fsync(fd)
            close(fd)
        }
    }
}

/// Adds to `context` an attachment stream (Matroska's: a file kept whole, as fonts or cover
/// art) holding `data`, named `filename`, of MIME type `mimetype`.
func addAttachment(_ data: UnsafeRawBufferPointer, filename: String, mimetype: String,
                   to context: UnsafeMutablePointer<AVFormatContext>) throws {
    guard let stream = avformat_new_stream(context, nil),
          let bytes = av_mallocz(data.count + Int(AV_INPUT_BUFFER_PADDING_SIZE))?.assumingMemoryBound(to: UInt8.self)
    else { throw UpscaleError(.processing, "out of memory") }
    if let base = data.baseAddress { bytes.update(from: base.assumingMemoryBound(to: UInt8.self), count: data.count) }
    stream.pointee.codecpar.pointee.codec_type = AVMEDIA_TYPE_ATTACHMENT
    stream.pointee.codecpar.pointee.extradata = bytes
    stream.pointee.codecpar.pointee.extradata_size = Int32(data.count)
    av_dict_set(&stream.pointee.metadata, "filename", filename, 0)
    av_dict_set(&stream.pointee.metadata, "mimetype", mimetype, 0)
}

/// Copied packets into a container without edit lists (Matroska, WebM). Of the packets an
/// MP4/MOV edit list hides (read with AV_PKT_FLAG_DISCARD: a stream-copied cut's run-in, AAC's
/// priming), only the last before a stream's first shown packet is written, as the decoder's
/// run-in. All were written, and the muxer moved every stream by their length: a cut's picture
/// started a second late, the sound cut away was heard, and the chapters were a second early.
final class HiddenPackets {
    private let active: Bool
    private var held: [Int: UnsafeMutablePointer<AVPacket>] = [:]
    private var shown: Set<Int> = []

    init(muxer: String?) {
        active = ["matroska", "webm"].contains(muxer ?? "")
    }

    deinit {
        for packet in held.values {
            var owned: UnsafeMutablePointer<AVPacket>? = packet
            av_packet_free(&owned)
        }
    }

    /// Hands `write` what to write now for `packet` of output stream `stream`: nothing, or
    /// the packet, after the hidden one held before it.
    func pass(_ packet: UnsafeMutablePointer<AVPacket>, stream: Int, write: (UnsafeMutablePointer<AVPacket>) throws -> Void) rethrows {
        guard active, !shown.contains(stream) else { return try write(packet) }
        if packet.pointee.flags & AV_PKT_FLAG_DISCARD != 0 {
            var earlier = held[stream]
            av_packet_free(&earlier)
            held[stream] = av_packet_clone(packet)
            return
        }
        shown.insert(stream)
        if let runIn = held.removeValue(forKey: stream) {
            var owned: UnsafeMutablePointer<AVPacket>? = runIn
            defer { av_packet_free(&owned) }
            try write(runIn)
        }
        try write(packet)
    }
}
