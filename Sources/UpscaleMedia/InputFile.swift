import CFFmpeg
import Foundation

/// An opened, probed input container. Opening checks the things users get wrong
/// (missing file, a folder, an empty file, not media) and says so in one line.
final class InputFile {
    let path: String
    private(set) var context: UnsafeMutablePointer<AVFormatContext>

    init(path: String) throws {
        self.path = path
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw UpscaleError(.input, "'\(path)' does not exist; check the path")
        }
        if isDirectory.boolValue {
            throw UpscaleError(.input, "'\(path)' is a folder; give a video file (or use 'upscale watch' for folders)")
        }
        let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)??.intValue ?? -1
        if size == 0 {
            throw UpscaleError(.input, "'\(path)' is empty (0 bytes); it may still be copying or the copy failed")
        }
        guard FileManager.default.isReadableFile(atPath: path) else {
            throw UpscaleError(.input, "'\(path)' cannot be read; check its permissions")
        }
        var ctx: UnsafeMutablePointer<AVFormatContext>?
        let opened = avformat_open_input(&ctx, path, nil, nil)
        guard opened >= 0, let ctx else {
            throw UpscaleError(.input, "'\(path)' is not a media file FFmpeg can read (\(ffmpegErrorText(opened)))")
        }
        context = ctx
        let probed = avformat_find_stream_info(ctx, nil)
        if probed < 0 {
            // deinit closes the context: every stored property is set, so it runs on this throw.
            throw UpscaleError(.input, "'\(path)' could not be probed: \(ffmpegErrorText(probed))")
        }
    }

    deinit {
        var c: UnsafeMutablePointer<AVFormatContext>? = context
        avformat_close_input(&c)
    }

    var streamCount: Int { Int(context.pointee.nb_streams) }

    func stream(_ index: Int) -> UnsafeMutablePointer<AVStream> { context.pointee.streams[index]! }

    var formatName: String { String(cString: context.pointee.iformat.pointee.name) }

    /// The first real video stream (cover art and other attached pictures are skipped).
    func videoStreamIndex() throws -> Int {
        var fallback: Int?
        for i in 0..<streamCount {
            let s = stream(i)
            guard s.pointee.codecpar.pointee.codec_type == AVMEDIA_TYPE_VIDEO else { continue }
            if s.pointee.disposition & AV_DISPOSITION_ATTACHED_PIC != 0 { continue }
            if s.pointee.disposition & AV_DISPOSITION_DEFAULT != 0 { return i }
            if fallback == nil { fallback = i }
        }
        if let fallback { return fallback }
        throw UpscaleError(.input, "'\(path)' has no video stream (audio only?); nothing to upscale")
    }

    /// Reads the next packet into `packet`; false at the end of the file.
    func read(into packet: UnsafeMutablePointer<AVPacket>) throws -> Bool {
        let result = av_read_frame(context, packet)
        if result == averrorEOF { return false }
        if result < 0 {
            throw UpscaleError(.processing, "reading '\(path)' failed: \(ffmpegErrorText(result)); the file may be truncated or damaged")
        }
        return true
    }
}

extension AVRational {
    var double: Double { den == 0 ? 0 : Double(num) / Double(den) }
}
