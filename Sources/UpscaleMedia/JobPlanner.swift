import Foundation
import UpscaleCore

/// What the user asked for, before it is checked against the input.
public struct UpscaleOptions: Sendable {
    public var width: Int?
    public var height: Int?
    public var scale: Double?
    /// A file path, or a folder (required to be a folder when there are several inputs).
    public var output: String?
    public var encoder: EncoderSettings
    public var kernel: Kernel
    /// Threads for the upscaler core; nil = all cores.
    public var threads: Int?
    public var overwrite: Bool
    /// Learned edge-directed refinement of luma after Lanczos (exactly 2x, 3x or 4x).
    public var refine: Bool
    /// Whether the user asked for refinement by name: only then does a job that cannot use it say so.
    public var refineRequested: Bool
    /// Whether the user named the codec. When not, output beyond HEVC's limit switches to ProRes.
    public var codecChosen: Bool
    /// Deinterlace interlaced input (libavfilter's bwdif, one picture per picture) before upscaling.
    public var deinterlace: Bool
    /// When the output name in a folder is taken, use "<name> Upscaled 2.<ext>" (3, …) instead
    /// of refusing (the watch folder never overwrites and never stops on a collision).
    public var uniqueName = false
    /// Outputs written earlier in the same run (a batch): a job whose output is one of them is
    /// refused rather than replacing it, with or without `overwrite`.
    public var taken: [String] = []
    /// The run's other inputs that an output could land on: a job whose output is one of them
    /// is refused, with or without `overwrite`, so no input of a run is replaced by another's result.
    public var otherInputs: [String] = []
    /// `--strip`: no file tags in the output (see `Job.stripMetadata`).
    public var stripMetadata = false

    public init(width: Int? = nil, height: Int? = nil, scale: Double? = nil, output: String? = nil,
                encoder: EncoderSettings = EncoderSettings(), kernel: Kernel = .lanczos3,
                threads: Int? = nil, overwrite: Bool = false, refine: Bool = false, refineRequested: Bool = false,
                codecChosen: Bool = false, deinterlace: Bool = false) {
        self.width = width
        self.height = height
        self.scale = scale
        self.output = output
        self.encoder = encoder
        self.kernel = kernel
        self.threads = threads
        self.overwrite = overwrite
        self.refine = refine
        self.refineRequested = refineRequested
        self.codecChosen = codecChosen
        self.deinterlace = deinterlace
    }
}

/// A fully resolved job: every path and size decided, every check passed.
public struct Job: Sendable {
    public let input: String
    public var output: String
    public let width: Int
    public let height: Int
    public let muxer: String
    public var encoder: EncoderSettings
    public let kernel: Kernel
    public var threads: Int
    public var overwrite: Bool
    /// Whether the luma gets EdgeRefiner's pass (asked for, and the job is exactly 2x).
    public let refine: Bool
    /// The input's sample (pixel) aspect ratio, kept on the output; 1:1 when it has none.
    public let sampleAspect: (num: Int, den: Int)
    /// Deinterlace before upscaling (asked for, and the input is interlaced).
    public var deinterlace: Bool = false
    /// The input's alpha channel is upscaled and written (the input has one and the codec
    /// takes it: ProRes 4444, FFV1); elsewhere the output is opaque.
    public var keepsAlpha: Bool = false
    /// The output's size as players show it (turned by the rotation, with the pixel aspect);
    /// `width` and `height` are the stored picture's. Zero when not planned from a file.
    public var shownWidth = 0
    public var shownHeight = 0
    /// Seconds without a decoded picture (while not waiting on the scaler) before the input
    /// counts as stuck on damaged data and the job fails.
    public var stallSeconds: Double = 60
    /// Things the user should know (a changed container, rounded sizes).
    public let notices: [String]
    /// The input's duration in seconds and frame rate (0 when unknown).
    public var duration: Double = 0
    public var frameRate: Double = 0
    /// Set when this run makes one chunk of the job (video only, into `ChunkTask.path`)
    /// instead of the whole output.
    public var chunk: ChunkTask?
    /// `--strip`: the output gets no file tags, and its streams only language, title and timecode.
    public var stripMetadata = false
    /// The watch folder's naming: a name taken while the job ran gives the next free one at
    /// the end (see `FolderWrites.place`).
    public var uniqueName = false

    /// A generous guess of the output's size in bytes, for checking free space before a job
    /// starts: bits per output pixel well above what these codecs use on upscaled footage
    /// (x265/x264 at their default CRF stay under 0.1; ProRes 422 standard is about 2.4;
    /// FFV1 lossless about 6 on 8-bit 4:2:0), plus 64 MB for containers and audio.
    public var estimatedOutputBytes: Int64 {
        let bitsPerPixel: Double
        switch encoder.codec {
        case .hevc, .h264: bitsPerPixel = 0.3
        case .prores: bitsPerPixel = 3
        case .ffv1: bitsPerPixel = 8
        }
        let fps = frameRate > 0 ? frameRate : 30
        let seconds = duration > 0 ? duration : 3600
        return Int64(Double(width * height) * fps * seconds * bitsPerPixel / 8) + 64 << 20
    }
}

/// One chunk of a job to encode: its frames and the chunk file to write (a `ChunkFile`, which
/// keeps the encoder's timestamps exactly; video only, parameter sets out of band).
public struct ChunkTask: Sendable {
    public let range: ChunkRange
    public let path: String
    /// Frames between keyframes for every chunk of the job: its longest chunk. Each chunk starts
    /// with a keyframe anyway, and one more shortly before the next chunk's would only cost
    /// bytes (measured: +27% on a 40 s pan with x265's default 250). The same for all chunks,
    /// as x265's parameter sets depend on it.
    public let keyframeInterval: Int

    public init(range: ChunkRange, path: String, keyframeInterval: Int) {
        self.range = range
        self.path = path
        self.keyframeInterval = keyframeInterval
    }
}

public enum OutputSize {
    public static let minimum = 16
    public static let maximum = 16384

    /// The output size for a picture displayed at `display` (stored size with the sample
    /// aspect applied). Only width or only height keeps the display aspect ratio; scale
    /// multiplies both; nothing means 2x. Sizes are rounded to even for 4:2:0.
    public static func resolve(display: (width: Double, height: Double), width: Int?, height: Int?, scale: Double?) throws
        -> (width: Int, height: Int, rounded: Bool)
    {
        if scale != nil && (width != nil || height != nil) {
            throw UpscaleError(.usage, "give either --scale or --width/--height, not both")
        }
        let aspect = display.width / display.height
        var w: Double, h: Double
        switch (width, height) {
        case let (w0?, h0?): (w, h) = (Double(w0), Double(h0))
        case let (w0?, nil): (w, h) = (Double(w0), Double(w0) / aspect)
        case let (nil, h0?): (w, h) = (Double(h0) * aspect, Double(h0))
        case (nil, nil):
            let s = scale ?? 2
            guard s > 0, s.isFinite else { throw UpscaleError(.usage, "--scale must be a positive number") }
            (w, h) = (display.width * s, display.height * s)
        }
        let ew = even(w), eh = even(h)
        let rounded = (width.map { $0 != ew } ?? false) || (height.map { $0 != eh } ?? false)
        for (name, value, asked) in [("width", ew, width), ("height", eh, height)] where value < minimum || value > maximum {
            // The number the user gave when that side was given (not its even rounding: 16385 read
            // 16386): a usage error, whatever the file. A side that follows from the picture's
            // own size or shape is that file's failure (`.input`), so a batch goes on without it.
            throw UpscaleError(asked == nil ? .input : .usage, "output \(name) \(asked ?? value) is outside \(minimum)...\(maximum); choose another size")
        }
        return (ew, eh, rounded)
    }

    /// The nearest even size (4:2:0), at least 2.
    static func even(_ v: Double) -> Int { max(2, Int((v / 2).rounded()) * 2) }
}

public enum JobPlanner {
    /// Containers kept as they are; any other input container becomes .mov.
    static let keptContainers: Set<String> = ["mov", "mp4", "m4v", "mkv"]

    /// Whether `a` and `b` name the same file: the same path, or (both existing) the same inode
    /// through another path (a symlinked folder, a hard link). Writing the output renames over
    /// its name, so an output that is the input under another name would replace the original.
    public static func sameFile(_ a: String, _ b: String) -> Bool {
        if URL(fileURLWithPath: a).standardizedFileURL.path == URL(fileURLWithPath: b).standardizedFileURL.path { return true }
        var sa = stat(), sb = stat()
        guard stat(a, &sa) == 0, stat(b, &sb) == 0 else { return false }
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino
    }

    /// The checks every output path gets, videos' and stills' alike: its folder exists; it is
    /// not the input itself (by any path), nor a file an earlier input of the same run was
    /// written to (two inputs of one name from different folders into one --output folder, or
    /// a.avi beside a.mov), nor an existing file unless `overwrite`.
    public static func checkOutput(_ output: String, input: String, taken: [String], otherInputs: [String] = [], overwrite: Bool) throws {
        let folder = URL(fileURLWithPath: output).deletingLastPathComponent().path
        guard isDirectory(folder) else {
            if FileManager.default.fileExists(atPath: folder) {
                throw UpscaleError(.output, "'\(folder)' is a file, not a folder; pick another --output")
            }
            throw UpscaleError(.output, "the output folder '\(folder)' does not exist; create it or pick another --output")
        }
        if sameFile(output, input) {
            throw UpscaleError(.usage, "the output '\(output)' is the input itself; choose another --output")
        }
        // Before the overwrite check: a folder of that name was "already exists; use --overwrite",
        // and with --overwrite a still was made in full, then could not be put in its place.
        if isDirectory(output) {
            throw UpscaleError(.output, "'\(output)' is a folder; choose a file name for --output")
        }
        let name = URL(fileURLWithPath: output).lastPathComponent
        if name.utf8.count > PartialFile.longestName {
            throw UpscaleError(.usage, "the output name '\(name)' is too long (\(name.utf8.count) bytes; at most \(PartialFile.longestName) here, with room for its temporary name); give a shorter one with --output")
        }
        if let other = otherInputs.first(where: { sameFile($0, output) }) {
            throw UpscaleError(.output, "'\(input)' would be written to '\(output)', which is '\(other)', another input of this run; choose another --output folder so that file is kept")
        }
        if taken.contains(where: { sameFile($0, output) }) {
            throw UpscaleError(.output, "'\(input)' would be written to '\(output)', which an earlier file of this run was just upscaled to; upscale it on its own into another folder (--output) so neither result is lost")
        }
        // lstat: a dangling link there is a name taken too (the final rename, which never
        // replaces, would refuse it after all the work).
        var info = stat()
        if lstat(output, &info) == 0 && !overwrite {
            throw UpscaleError(.output, "'\(output)' already exists; use --overwrite to replace it")
        }
    }

    /// A file on disk: not a pipe or a device, and not a name under /dev or /proc for one
    /// (`/dev/stdin < clip.mp4` leads to a regular file, yet is no folder to write beside).
    public static func isRegularFile(_ path: String) -> Bool {
        let absolute = URL(fileURLWithPath: path).standardizedFileURL.path
        if absolute.hasPrefix("/dev/") || absolute.hasPrefix("/proc/") { return false }
        var info = stat()
        return stat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFREG
    }

    /// The container of a video's output when no file name is given: the input's own when
    /// upscale keeps it and `codec` goes in it, else the codec's first.
    public static func defaultContainer(inputExtension: String, codec: VideoCodec) -> String {
        codec.containers.contains(inputExtension) && keptContainers.contains(inputExtension) ? inputExtension : codec.containers[0]
    }

    /// The default output name: "<name> Upscaled.<ext>".
    public static func outputName(for input: String, extension ext: String) -> String {
        let base = URL(fileURLWithPath: input).deletingPathExtension().lastPathComponent
        return "\(base) Upscaled.\(ext)"
    }

    /// `keepProbe`: the caller transcodes this job next, in this process, so the opened and
    /// probed input is kept for its transcoder (see `InputFile.keepProbed`). Callers that only
    /// plan (a watcher, a submit) leave it off and keep no file open.
    public static func plan(input: String, options: UpscaleOptions, multipleInputs: Bool = false, keepProbe: Bool = false) throws -> Job {
        let info = try MediaProbe.info(input, keepForJob: keepProbe)
        guard let display = info.displaySize, info.video != nil else {
            throw UpscaleError(.input, "'\(input)' has no video stream (audio only?); nothing to upscale")
        }
        // A stream whose parameter sets never come (an MPEG-TS remuxed from a cut that starts
        // without an IDR picture) probes as 0x0: its aspect ratio was NaN and the planner trapped.
        guard display.width >= 1, display.height >= 1, display.width.isFinite, display.height.isFinite else {
            throw UpscaleError(.input, "'\(input)': the video stream has no picture size (its decoder found no parameter sets); the file may be damaged — re-export it")
        }
        var notices: [String] = []
        if let cut = ContainerLength.cutShort(input) {
            notices.append("'\(input)' is cut short: \(ContainerLength.describe(cut)) (an unfinished copy or download); the output holds what is there")
        }
        let shown: (width: Int, height: Int, rounded: Bool)
        do {
            shown = try OutputSize.resolve(display: display, width: options.width, height: options.height, scale: options.scale)
        } catch let error as UpscaleError where error.kind == .input {
            // The input's own size or shape put a side the user did not give out of range: say so
            // about the file (a damaged header often claims a tiny picture).
            let v = info.video!
            let outcome = error.message.replacingOccurrences(of: "; choose another size", with: "")
            if let scale = options.scale, options.width == nil, options.height == nil {
                // The user's --scale against a plausible size: about the scale, not the header.
                throw UpscaleError(.input, "'\(input)' is \(v.width)x\(v.height), so with --scale \(scale) \(outcome); give a \(min(display.width, display.height) * scale < 16 ? "larger" : "smaller") --scale, or --width or --height")
            }
            let advice = options.width == nil && options.height == nil ? "give --width or --height" : "give both --width and --height"
            throw UpscaleError(.input, "'\(input)' is \(v.width)x\(v.height), so \(outcome); \(advice) (or check the file: a damaged header can report a wrong size)")
        }
        if shown.rounded { notices.append("output size rounded to \(shown.width)x\(shown.height) (4:2:0 needs even sizes)") }
        // Both sides given: the size asked for, in any shape, but a changed shape is said (a
        // portrait clip given a landscape size came out squashed without a word).
        if options.width != nil, options.height != nil {
            let before = Double(display.width) / Double(display.height), after = Double(shown.width) / Double(shown.height)
            if abs(after / before - 1) > 0.01 {
                notices.append("'\(input)' is shown at \(Int(display.width.rounded()))x\(Int(display.height.rounded())); \(shown.width)x\(shown.height) stretches it to another shape (give only --width or --height to keep its shape)")
            }
        }
        // Not enlarged: said of the same size, and of a --scale of 1 or less (they ran without a
        // word). A smaller --width or --height is a size asked for, and the summary gives it.
        let before = (width: Int(display.width.rounded()), height: Int(display.height.rounded()))
        if (shown.width == before.width && shown.height == before.height) || options.scale == 1 {
            notices.append("'\(input)' stays \(shown.width)x\(shown.height): nothing is enlarged, the video is only re-encoded")
        } else if let scale = options.scale, scale < 1 {
            notices.append("'\(input)' is shown at \(before.width)x\(before.height); --scale \(scale) makes it smaller, \(shown.width)x\(shown.height) (Lanczos only)")
        }
        // Sizes are as displayed; a picture stored sideways (rotation 90/270) is scaled as stored.
        // Non-square pixels are kept: the stored width is the displayed width over the pixel aspect.
        let video = info.video!
        let sar: (num: Int, den: Int) = video.sampleAspect.num > 0 && video.sampleAspect.den > 0 ? video.sampleAspect : (1, 1)
        let sideways = video.rotation % 180 == 90
        let upright = sideways ? (width: shown.height, height: shown.width) : (width: shown.width, height: shown.height)
        var size = (width: sar.num == sar.den ? upright.width : OutputSize.even(Double(upright.width) * Double(sar.den) / Double(sar.num)),
                    height: upright.height)
        if options.width == nil && options.height == nil {
            // A scale (2x when none is given) multiplies the stored picture. Through the shown
            // size, NTSC DV's 720x480 at 10:11 was shown 1309.1 wide, rounded to 1310, stored
            // 1442: not 2x, so the refinement (exact ratios only) was off.
            let s = options.scale ?? 2
            size = (OutputSize.even(Double(video.width) * s), OutputSize.even(Double(video.height) * s))
        }
        var encoder = options.encoder
        if !encoder.codec.accepts(width: size.width, height: size.height) {
            guard !options.codecChosen else {
                throw UpscaleError(.usage, "\(size.width)x\(size.height) is beyond what \(encoder.codec.rawValue) can encode (\(encoder.codec.sizeLimit)); use --codec prores for larger output")
            }
            // As fx-upscale does: past HEVC's picture size limit, ProRes 422 in .mov.
            notices.append("\(size.width)x\(size.height) is beyond HEVC's limit (8192x4320); writing ProRes \(video.hasAlpha ? "4444" : "422") in .mov instead")
            encoder = EncoderSettings(codec: .prores, threads: encoder.threads)
        }
        let codec = encoder.codec

        let inputExt = URL(fileURLWithPath: input).pathExtension.lowercased()
        var output: String
        var ext: String
        let outputIsFolder = options.output.map { isDirectory($0) || multipleInputs || $0.hasSuffix("/") } ?? false
        if let given = options.output, !outputIsFolder {
            output = given
            ext = URL(fileURLWithPath: given).pathExtension.lowercased()
            let choices = codec.containers.map { "." + $0 }.joined(separator: ", ")
            guard !ext.isEmpty else {
                throw UpscaleError(.usage, "'\(given)' is not a folder and its name has no extension; give an existing folder, or a file name ending in \(choices)")
            }
            guard codec.containers.contains(ext) else {
                // ProRes chosen here, past HEVC's size: "prores cannot be written to a .mp4
                // file" named a codec the user never asked for.
                if codec != options.encoder.codec {
                    throw UpscaleError(.usage, "'\(given)': \(size.width)x\(size.height) is beyond HEVC's limit (8192x4320), and ProRes, which upscale writes past it, cannot go in a .\(ext) file; name the output .mov, or ask for a smaller --width/--height")
                }
                throw UpscaleError(.usage, "'\(given)': \(codec.rawValue) cannot be written to a .\(ext) file; use \(choices)")
            }
        } else {
            ext = defaultContainer(inputExtension: inputExt, codec: codec)
            if !inputExt.isEmpty && ext != inputExt {
                notices.append(keptContainers.contains(inputExt)
                    ? "\(codec.rawValue) cannot go in .\(inputExt); writing .\(ext)"
                    : ".\(inputExt) cannot hold \(codec.rawValue); writing .\(ext)")
            }
            // Beside the input; for input that is not a file on disk (/dev/stdin, a named pipe) in
            // the current folder, not in /dev.
            let folder = options.output ?? (isRegularFile(input) ? URL(fileURLWithPath: input).deletingLastPathComponent().path
                                                                 : FileManager.default.currentDirectoryPath)
            if multipleInputs, let given = options.output, !isDirectory(given) {
                throw UpscaleError(.usage, "--output '\(given)' must be an existing folder when upscaling several files")
            }
            let name = outputName(for: input, extension: ext)
            let free = options.uniqueName && !options.overwrite ? FolderWrites.freeName(name, in: folder) : name
            output = URL(fileURLWithPath: folder).appendingPathComponent(free).path
        }

        try checkOutput(output, input: input, taken: options.taken, otherInputs: options.otherInputs, overwrite: options.overwrite)
        let stored = (width: info.video!.width, height: info.video!.height)
        let refine = options.refine && EdgeRefiner.trained(input: stored, output: size) != nil
        if options.refine && options.refineRequested && !refine {
            notices.append("refinement is trained for exactly 2x, 3x and 4x (\(2 * stored.width)x\(2 * stored.height) for 2x here); this job uses plain Lanczos")
        }
        let deinterlace = options.deinterlace && video.isInterlaced
        if video.isInterlaced && !options.deinterlace {
            let first = video.fieldOrder.hasPrefix("t") ? "top" : "bottom"
            notices.append("'\(input)' is interlaced (\(first) field first); its fields are scaled together, which blurs motion into combs — add --deinterlace to deinterlace it first")
        } else if options.deinterlace && !video.isInterlaced {
            notices.append("'\(input)' is not flagged interlaced (field order: \(video.fieldOrder)); --deinterlace leaves it as it is")
        }
        if video.rotation != 0 && ext == "mkv" {
            // FFmpeg 5.1's Matroska muxer writes no display matrix.
            // The display matrix's angle is counter-clockwise; people (and players' "rotate" tags) say clockwise.
            notices.append("'\(input)' is shown turned \((360 - video.rotation) % 360)° clockwise, which .mkv cannot record here: the upscale plays as stored (sideways); write .mov or .mp4 to keep the turn")
        }
        let keepsAlpha = video.hasAlpha && codec.carriesAlpha
        // VP8/VP9 alpha decodes (with libvpx) as yuva420p; the stream's own format says yuv420p.
        let alphaFormat = video.alphaTagged ? "yuva420p" : video.pixelFormat ?? "unknown"
        if keepsAlpha && codec == .prores {
            notices.append("'\(input)' has an alpha channel (\(alphaFormat)); writing ProRes 4444 to keep it")
        } else if video.hasAlpha && !keepsAlpha {
            notices.append("'\(input)' has an alpha channel (\(alphaFormat)); \(codec.rawValue) has none, so the upscaled video is opaque (transparent areas show the colour stored under them) — use --codec prores (ProRes 4444) or --codec ffv1 to keep it")
        }
        let threads = options.threads ?? ProcessInfo.processInfo.activeProcessorCount
        guard threads >= 1 && threads <= 256 else { throw UpscaleError(.usage, "--threads must be between 1 and 256") }
        var job = Job(input: input, output: output, width: size.width, height: size.height,
                      muxer: muxerName(forExtension: ext)!, encoder: encoder, kernel: options.kernel,
                      threads: threads, overwrite: options.overwrite, refine: refine, sampleAspect: sar, deinterlace: deinterlace,
                      notices: notices)
        job.keepsAlpha = keepsAlpha
        job.stripMetadata = options.stripMetadata
        job.uniqueName = options.uniqueName && !options.overwrite
        // Played as stored where .mkv loses the turn: that is the size it shows.
        (job.shownWidth, job.shownHeight) = video.rotation % 180 != 0 && ext == "mkv" ? (shown.height, shown.width) : (shown.width, shown.height)
        job.duration = info.duration
        job.frameRate = video.frameRate
        return job
    }

    /// Whether `path` is a folder (following links).
    public static func isDirectory(_ path: String) -> Bool {
        var flag: ObjCBool = false
        return FileManager.default.fileExists(atPath: path, isDirectory: &flag) && flag.boolValue
    }
}
