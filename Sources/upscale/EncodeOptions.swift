import ArgumentParser
import UpscaleCore
import UpscaleImages
import UpscaleMedia

extension VideoCodec: ExpressibleByArgument {}
extension Kernel: ExpressibleByArgument {}

/// How each file is upscaled and encoded: shared by the plain command and the watch
/// folder, and turned back into arguments for a job's child process (and, in the watch
/// folder, stored with each job as the settings it was queued with).
struct EncodeOptions: ParsableArguments {
    @Option(parsing: .unconditional, help: "Output width in pixels (displayed width); height follows the aspect ratio when not given.")
    var width: Int?

    @Option(parsing: .unconditional, help: "Output height in pixels; width follows the aspect ratio when not given.")
    var height: Int?

    @Option(parsing: .unconditional, help: "Scale factor for both sides (default 2 when no size is given).")
    var scale: Double?

    @Option(help: "Output codec: hevc (libx265, default; ProRes 422 beyond 8192x4320 unless named), h264, prores (422, .mov; 4444 for input with alpha) or ffv1 (lossless, .mkv; keeps alpha).")
    var codec: VideoCodec?

    @Option(help: "HEVC encoder: auto (a hardware encoder that opens, else libx265), libx265, hevc_nvenc, hevc_vaapi or hevc_qsv.")
    var encoder = "auto"

    @Option(parsing: .unconditional, help: "Constant rate factor for hevc (default 20) and h264 (default 18); lower is better and larger.")
    var crf: Int?

    @Option(help: "Encoder preset for hevc/h264, ultrafast … veryslow (default medium).")
    var preset: String?

    @Option(parsing: .unconditional, help: "Worker threads for the upscaler (default: all cores).")
    var threads: Int?

    @Option(help: "Resampling kernel: lanczos3 (default), lanczos2 or bicubic.")
    var kernel: Kernel = .lanczos3

    @Flag(inversion: .prefixedNo, help: ArgumentHelp(
        "Learned edge-directed refinement of luma after Lanczos (default on; exactly 2x, 3x or 4x).",
        discussion: "Cleaner, straighter edges: +0.31 dB PSNR over Lanczos at 2x on photos it was not trained on. Other sizes use plain Lanczos."))
    var refine: Bool?

    @Flag(help: "Deinterlace interlaced input (bwdif, one output picture per input picture) before upscaling.")
    var deinterlace = false

    @Option(help: "Still images: output format jpg, png, webp, tiff, avif, heic, jxl or gif (default: the input's).")
    var format: String?

    @Option(parsing: .unconditional, help: "Still images: quality 1…100 for jpg, webp, avif, heic, jxl (5 at least) and jp2 (default 90).")
    var quality: Int?

    @Flag(help: "Drop metadata: a still's EXIF, XMP and ICC profile; a video's file tags (location, camera, dates), its tracks keeping only language, title and timecode.")
    var strip = false

    func validate() throws {
        // Video stops at 16384 per side (checked with the input); stills go to 65500.
        if let width, !(OutputSize.minimum...StillSize.maximum).contains(width) {
            throw ValidationError("--width must be between \(OutputSize.minimum) and \(OutputSize.maximum) (\(StillSize.maximum) for still images)")
        }
        if let height, !(OutputSize.minimum...StillSize.maximum).contains(height) {
            throw ValidationError("--height must be between \(OutputSize.minimum) and \(OutputSize.maximum) (\(StillSize.maximum) for still images)")
        }
        if let scale, !(scale > 0 && scale <= 16) {
            throw ValidationError("--scale must be greater than 0 and at most 16")
        }
        if scale != nil && (width != nil || height != nil) {
            throw ValidationError("give either --scale or --width/--height, not both")
        }
        if encoder != "auto" && !EncoderSettings.hevcEncoders.contains(encoder) {
            throw ValidationError("--encoder must be auto, " + EncoderSettings.hevcEncoders.joined(separator: ", "))
        }
        if encoder != "auto" && codec != nil && codec != .hevc {
            throw ValidationError("--encoder chooses an HEVC encoder; it does not go with --codec \(codec!.rawValue)")
        }
        if let preset, !EncoderSettings.presets.contains(preset) {
            throw ValidationError("--preset must be one of " + EncoderSettings.presets.joined(separator: ", "))
        }
        if let crf, !(0...51).contains(crf) {
            throw ValidationError("--crf must be between 0 and 51")
        }
        if let threads, !(1...256).contains(threads) {
            throw ValidationError("--threads must be between 1 and 256")
        }
        if let format, StillImage.formats[format.lowercased()] == nil {
            throw ValidationError("--format must be one of jpg, png, webp, tiff, avif, heic, jxl, gif")
        }
        if let quality, !(1...100).contains(quality) {
            throw ValidationError("--quality must be between 1 and 100")
        }
    }

    /// The options as arguments that parse back to the same values.
    var arguments: [String] {
        var list: [String] = []
        func add(_ name: String, _ value: CustomStringConvertible?) {
            if let value { list += ["--\(name)", value.description] }
        }
        add("width", width)
        add("height", height)
        add("scale", scale)
        add("codec", codec?.rawValue)
        if encoder != "auto" { add("encoder", encoder) }
        add("crf", crf)
        add("preset", preset)
        add("threads", threads)
        if kernel != .lanczos3 { add("kernel", kernel.rawValue) }
        if let refine { list.append(refine ? "--refine" : "--no-refine") }
        if deinterlace { list.append("--deinterlace") }
        add("format", format)
        add("quality", quality)
        if strip { list.append("--strip") }
        return list
    }

    func upscaleOptions(output: String?, overwrite: Bool) -> UpscaleOptions {
        var options = UpscaleOptions(
            width: width, height: height, scale: scale, output: output,
            encoder: EncoderSettings(codec: codec ?? .hevc, crf: crf, preset: preset, threads: threads,
                                     hevcEncoder: encoder == "auto" ? nil : encoder),
            kernel: kernel, threads: threads, overwrite: overwrite,
            refine: refine ?? true, refineRequested: refine == true, codecChosen: codec != nil,
            deinterlace: deinterlace)
        // Every caller's jobs (the plain command, the watch folder, a farm's workers).
        options.stripMetadata = strip
        return options
    }
}

/// How a long video is cut into chunks (the plain command and `submit`).
struct ChunkOptions: ParsableArguments {
    @Option(parsing: .unconditional, help: ArgumentHelp(
        "Videos at least twice this long are encoded in chunks of about this many seconds, split at keyframes (default 10; 0: one piece).",
        discussion: "Finished chunks are kept beside the output until the end, so an interrupted run continues where it was when run again."))
    var chunkSeconds: Double = 10

    func validate() throws {
        if !(chunkSeconds >= 0 && chunkSeconds <= 3600) {
            throw ValidationError("--chunk-seconds must be between 0 (one piece) and 3600")
        }
    }
}
