import UpscaleCore

/// The output video codecs the tool writes, with their defaults.
public enum VideoCodec: String, Sendable, CaseIterable {
    case hevc, h264, prores, ffv1

    /// The FFmpeg encoder used.
    public var encoderName: String {
        switch self {
        case .hevc: return "libx265"
        case .h264: return "libx264"
        case .prores: return "prores_ks"
        case .ffv1: return "ffv1"
        }
    }

    /// Constant-rate-factor default: chosen for visually transparent output.
    /// Whether the output keeps an input's alpha channel (ProRes 4444, FFV1); libx265 and
    /// libx264 write colour only.
    public var carriesAlpha: Bool { self == .prores || self == .ffv1 }

    public var defaultCRF: Int? {
        switch self {
        case .hevc: return 20
        case .h264: return 18
        case .prores, .ffv1: return nil
        }
    }

    public var defaultPreset: String? {
        switch self {
        case .hevc, .h264: return "medium"
        case .prores, .ffv1: return nil
        }
    }

    /// Containers (by file extension) that can hold this codec, preferred first.
    public var containers: [String] {
        switch self {
        case .hevc, .h264: return ["mov", "mp4", "m4v", "mkv"]
        case .prores: return ["mov"]
        case .ffv1: return ["mkv"]
        }
    }

    /// Largest picture the codec takes here: HEVC and H.264 at their highest levels.
    public func accepts(width: Int, height: Int) -> Bool {
        switch self {
        case .hevc: return max(width, height) <= 8192 && width * height <= 8192 * 4320
        case .h264: return max(width, height) <= 16384 && width * height <= 139_264 * 256
        case .prores, .ffv1: return true
        }
    }

    /// `accepts`' limit in words, for messages.
    public var sizeLimit: String {
        switch self {
        case .hevc: return "8192x4320"
        case .h264: return "16384 a side, 35.65 million pixels"
        case .prores, .ffv1: return "none"
        }
    }
}

/// How to encode the upscaled video.
public struct EncoderSettings: Sendable, Equatable {
    public var codec: VideoCodec
    public var crf: Int?
    public var preset: String?
    /// Encoder threads; nil lets the encoder decide.
    public var threads: Int?
    /// For HEVC: a named FFmpeg encoder, or nil for `auto` (a hardware encoder that opens, else libx265;
    /// see `encoderCandidates`).
    public var hevcEncoder: String?
    /// Most frames between keyframes; nil keeps the encoder's default (x265: 250). Chunks set it
    /// (see `ChunkTask.keyframeInterval`).
    public var keyframeInterval: Int?

    /// The hardware HEVC encoders' constant quality where `--crf` is not given.
    public static let hardwareQuality = 24

    /// libx264's and libx265's preset names, fastest first.
    public static let presets = ["ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow", "slower", "veryslow", "placebo"]

    public init(codec: VideoCodec = .hevc, crf: Int? = nil, preset: String? = nil, threads: Int? = nil, hevcEncoder: String? = nil) {
        self.codec = codec
        self.crf = crf
        self.preset = preset
        self.threads = threads
        self.hevcEncoder = hevcEncoder
    }

    /// The HEVC encoders `--encoder` accepts.
    public static let hevcEncoders = ["libx265", "hevc_nvenc", "hevc_vaapi", "hevc_qsv"]

    /// FFmpeg encoders to try, in order: the named one, or for `auto` the hardware HEVC
    /// encoders (NVENC, Quick Sync, VAAPI: the first that opens) before libx265. `auto` keeps
    /// libx265 where hardware would lose something: HDR10 sources (x265 writes the mastering
    /// display and light level SEI; the hardware encoders of this FFmpeg do not) and 10-bit
    /// 4:2:2/4:4:4 (they encode 4:2:0 only).
    public func encoderCandidates(tenBit: Bool, layout: ChromaLayout = .yuv420, hdr: Bool = false) -> [String] {
        guard codec == .hevc else { return [codec.encoderName] }
        if let hevcEncoder { return [hevcEncoder] }
        let hardwareFits = !hdr && (!tenBit || layout == .yuv420)
        return hardwareFits ? ["hevc_nvenc", "hevc_qsv", "hevc_vaapi", "libx265"] : ["libx265"]
    }
}

/// FFmpeg muxer name for a file extension the tool writes.
func muxerName(forExtension ext: String) -> String? {
    switch ext.lowercased() {
    case "mov": return "mov"
    case "mp4", "m4v": return "mp4"
    case "mkv": return "matroska"
    default: return nil
    }
}
