import CFFmpeg
import Foundation

/// One chunk of a long job: the frames whose presentation times lie in `[start, end)`
/// (stream time base), decoded from the keyframe at `seek` (a keyframe before `start`, so
/// open-GOP leading pictures have their references and the temporal hold gets a pre-roll).
/// `start == nil` is the first frame of the file, `end == nil` its last.
public struct ChunkRange: Codable, Sendable, Equatable {
    public let index: Int
    public let seek: Int64?
    public let start: Int64?
    public let end: Int64?
    /// Frames the source has in the range; the encoded chunk must have exactly these.
    public let frames: Int

    public init(index: Int, seek: Int64?, start: Int64?, end: Int64?, frames: Int) {
        self.index = index
        self.seek = seek
        self.start = start
        self.end = end
        self.frames = frames
    }

    /// Whether a decoded frame at `pts` belongs to this chunk (-1: before it, 1: past it).
    public func place(_ pts: Int64) -> Int {
        if let start, pts < start { return -1 }
        if let end, pts >= end { return 1 }
        return 0
    }
}

/// A job split at its video's keyframes into chunks of about `seconds`, found by reading
/// the video packets once (no decoding). Chunks are frame-exact: every presented frame of
/// the source is in exactly one chunk, identified by its timestamp.
public struct ChunkPlan: Codable, Sendable, Equatable {
    public let timeBase: Rational
    public let chunks: [ChunkRange]
    public var frames: Int { chunks.reduce(0) { $0 + $1.frames } }

    public init(timeBase: Rational, chunks: [ChunkRange]) {
        self.timeBase = timeBase
        self.chunks = chunks
    }

    public struct Rational: Codable, Sendable, Equatable {
        public let num: Int
        public let den: Int
        public init(num: Int, den: Int) {
            self.num = num
            self.den = den
        }
        public var seconds: Double { den == 0 ? 0 : Double(num) / Double(den) }
    }

    /// Containers whose seeking by timestamp lands on or before the keyframe asked for
    /// (an index in the file). Others run in one piece.
    static let seekableFormats = [InputFile.quickTimeDemuxer, "matroska,webm", "avi", "nut"]

    /// Output muxers that take parameter sets out of band, so chunks encoded separately join
    /// without re-encoding.
    static let joinableMuxers: Set<String> = ["mov", "mp4", "matroska"]

    /// Whether `job` can run in chunks at all (its container and codec; not its length).
    public static func supports(_ job: Job) -> Bool {
        joinableMuxers.contains(job.muxer)
    }

    /// The plan for `path`; one chunk when the video is shorter than two chunks, has frames
    /// without timestamps, or its container cannot seek exactly.
    /// Pictures the first chunk may lack, as the one-piece run does: those read before the
    /// video's first keyframe (a stream-copied cut with -copyinkf, a capture that starts
    /// between keyframes: nothing to decode them from) and those read after it but shown before
    /// it (leading pictures of an open GOP), up to the next keyframe; 0 when the file cannot be
    /// read.
    static func leadingPictures(path: String) -> Int {
        guard let input = try? InputFile(path: path), let videoIndex = try? input.videoStreamIndex() else { return 0 }
        for i in 0..<input.streamCount where i != videoIndex { input.stream(i).pointee.discard = AVDISCARD_ALL }
        var packet: UnsafeMutablePointer<AVPacket>? = av_packet_alloc()
        defer { av_packet_free(&packet) }
        var key: Int64?
        var leading = 0
        while (try? input.read(into: packet!)) == true {
            defer { av_packet_unref(packet) }
            guard Int(packet!.pointee.stream_index) == videoIndex, packet!.pointee.flags & AV_PKT_FLAG_DISCARD == 0 else { continue }
            let pts = packet!.pointee.pts
            if packet!.pointee.flags & AV_PKT_FLAG_KEY != 0 {
                if key != nil { break }
                key = pts
            } else if let key, pts != noPTS, pts < key {
                leading += 1
            } else if key == nil, pts != noPTS {
                leading += 1
            }
        }
        return leading
    }

    public static func make(path: String, chunkSeconds: Double) throws -> ChunkPlan {
        MediaLibrary.configure()
        let input = try InputFile(path: path)
        let videoIndex = try input.videoStreamIndex()
        let stream = input.stream(videoIndex)
        for i in 0..<input.streamCount where i != videoIndex { input.stream(i).pointee.discard = AVDISCARD_ALL }
        let tb = stream.pointee.time_base
        var presented: [Int64] = []
        var keys: [Int64] = []
        var timed = true
        var packet: UnsafeMutablePointer<AVPacket>? = av_packet_alloc()
        defer { av_packet_free(&packet) }
        while try input.read(into: packet!) {
            defer { av_packet_unref(packet) }
            guard Int(packet!.pointee.stream_index) == videoIndex else { continue }
            // Packets before an edit list's start are decoded but never shown.
            if packet!.pointee.flags & AV_PKT_FLAG_DISCARD != 0 { continue }
            let pts = packet!.pointee.pts
            if pts == noPTS { timed = false; continue }
            presented.append(pts)
            if packet!.pointee.flags & AV_PKT_FLAG_KEY != 0 { keys.append(pts) }
        }
        // Pictures of one time are shown once: the decode path leaves out a picture timed at or
        // before one already given (a chunk holding a repeated time came out a frame short, and
        // the run failed after encoding the chunks before it).
        var shown: [Int64] = []
        for pts in presented.sorted() where pts != shown.last { shown.append(pts) }
        presented = shown
        let rational = Rational(num: Int(tb.num), den: Int(tb.den))
        let whole = ChunkPlan(timeBase: rational, chunks: [ChunkRange(index: 0, seek: nil, start: nil, end: nil, frames: presented.count)])
        let seekable = seekableFormats.contains(input.formatName)
        guard timed, seekable, let first = presented.first, let last = presented.last, chunkSeconds > 0 else { return whole }
        let step = Int64((chunkSeconds / rational.seconds).rounded())
        guard step > 0 else { return whole }

        // Boundaries: the first keyframe at least `step` after the last boundary, as long as
        // the remainder is at least half a chunk (no tiny last chunk).
        var boundaries: [Int64] = [first]
        for key in keys.sorted() where key >= boundaries.last! + step && last - key >= step / 2 {
            boundaries.append(key)
        }
        guard boundaries.count >= 2 else { return whole }
        let sortedKeys = keys.sorted()
        var chunks: [ChunkRange] = []
        var cursor = 0
        for (i, start) in boundaries.enumerated() {
            let end = i + 1 < boundaries.count ? boundaries[i + 1] : nil
            var count = 0
            while cursor < presented.count, end.map({ presented[cursor] < $0 }) ?? true {
                count += 1
                cursor += 1
            }
            // Decode from the keyframe before the boundary: leading pictures of an open GOP
            // at the boundary reference it, and refinement's temporal hold warms up on it.
            let seek = i == 0 ? nil : sortedKeys.last(where: { $0 < start }) ?? start
            chunks.append(ChunkRange(index: i, seek: seek, start: i == 0 ? nil : start, end: end, frames: count))
        }
        return ChunkPlan(timeBase: rational, chunks: chunks)
    }
}
