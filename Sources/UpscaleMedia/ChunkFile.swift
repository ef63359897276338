import CFFmpeg
import Foundation

/// The file one encoded chunk is kept in until the join: the encoder's stream parameters,
/// then its packets with their timestamps exactly as the encoder gave them, in its time base
/// (the source's, or the source's frame grid: `FrameGrid`). No FFmpeg container keeps both: NUT and Matroska shift or drop negative decode
/// timestamps (a B-frame encoder's first packets), Matroska rounds to milliseconds.
///
/// Layout (little endian): "UPSCHNK1", the parameters (`fields` Int64s, extradata size and
/// bytes), then per packet pts, dts, duration, flags, size (Int64 each) and the bytes, then an
/// end record (size -1) with the packet count, so a file cut short is never taken for complete.
enum ChunkFile {
    static let magic = Array("UPSCHNK1".utf8)

    /// The codec parameters kept: enough to describe the stream to any muxer as the encoder did.
    static func fields(_ p: UnsafeMutablePointer<AVCodecParameters>) -> [Int64] {
        let q = p.pointee
        return [Int64(q.codec_type.rawValue), Int64(q.codec_id.rawValue), Int64(q.format), q.bit_rate,
                Int64(q.bits_per_coded_sample), Int64(q.bits_per_raw_sample), Int64(q.profile), Int64(q.level),
                Int64(q.width), Int64(q.height), Int64(q.sample_aspect_ratio.num), Int64(q.sample_aspect_ratio.den),
                Int64(q.field_order.rawValue), Int64(q.color_range.rawValue), Int64(q.color_primaries.rawValue),
                Int64(q.color_trc.rawValue), Int64(q.color_space.rawValue), Int64(q.chroma_location.rawValue),
                Int64(q.video_delay)]
    }

    static func apply(_ f: [Int64], to p: UnsafeMutablePointer<AVCodecParameters>) {
        p.pointee.codec_type = AVMediaType(rawValue: Int32(f[0]))
        p.pointee.codec_id = AVCodecID(rawValue: UInt32(f[1]))
        p.pointee.format = Int32(f[2])
        p.pointee.bit_rate = f[3]
        p.pointee.bits_per_coded_sample = Int32(f[4])
        p.pointee.bits_per_raw_sample = Int32(f[5])
        p.pointee.profile = Int32(f[6])
        p.pointee.level = Int32(f[7])
        p.pointee.width = Int32(f[8])
        p.pointee.height = Int32(f[9])
        p.pointee.sample_aspect_ratio = AVRational(num: Int32(f[10]), den: Int32(f[11]))
        p.pointee.field_order = AVFieldOrder(rawValue: UInt32(f[12]))
        p.pointee.color_range = AVColorRange(rawValue: UInt32(f[13]))
        p.pointee.color_primaries = AVColorPrimaries(rawValue: UInt32(f[14]))
        p.pointee.color_trc = AVColorTransferCharacteristic(rawValue: UInt32(f[15]))
        p.pointee.color_space = AVColorSpace(rawValue: UInt32(f[16]))
        p.pointee.chroma_location = AVChromaLocation(rawValue: UInt32(f[17]))
        p.pointee.video_delay = Int32(f[18])
    }
    static let fieldCount = 19
}

/// Writes a chunk file under a temporary name; `finish` makes it durable and names it.
final class ChunkWriter {
    let path: String
    private let temporaryPath: String
    private var file: UnsafeMutablePointer<FILE>?
    private let timeBase: AVRational
    private var packets: Int64 = 0
    private var hash = ContentHash()

    init(path: String, encoder: UnsafeMutablePointer<AVCodecContext>) throws {
        self.path = path
        temporaryPath = PartialFile.temporaryPath(for: path, pid: getpid())
        timeBase = encoder.pointee.time_base
        guard let f = fopen(temporaryPath, "wb") else {
            throw UpscaleError(.output, "cannot write the chunk '\(path)': \(String(cString: strerror(errno)))")
        }
        file = f
        let par = avcodec_parameters_alloc()!
        defer {
            var p: UnsafeMutablePointer<AVCodecParameters>? = par
            avcodec_parameters_free(&p)
        }
        avcodec_parameters_from_context(par, encoder)
        try put(ChunkFile.magic)
        try put([Int64(timeBase.num), Int64(timeBase.den)] + ChunkFile.fields(par) + [Int64(par.pointee.extradata_size)])
        if let data = par.pointee.extradata, par.pointee.extradata_size > 0 {
            try put(Array(UnsafeBufferPointer(start: data, count: Int(par.pointee.extradata_size))))
        }
    }

    deinit { abandon() }

    /// One packet, its timestamps in the encoder's time base.
    func write(_ packet: UnsafeMutablePointer<AVPacket>) throws {
        let p = packet.pointee
        try put([p.pts, p.dts, p.duration, Int64(p.flags), Int64(p.size)])
        if p.size > 0 { try put(Array(UnsafeBufferPointer(start: p.data, count: Int(p.size)))) }
        packets += 1
    }

    /// The end record, fsync, rename; returns the content hash of everything written.
    @discardableResult
    func finish() throws -> UInt64 {
        try put([0, 0, 0, 0, -1, packets])
        guard let f = file else { throw UpscaleError(.output, "chunk '\(path)' was already closed") }
        let flushed = fflush(f) == 0 && fsync(fileno(f)) == 0
        let code = errno
        fclose(f)
        file = nil
        guard flushed else {
            unlink(temporaryPath)
            throw Self.writeError(path, code)
        }
        guard rename(temporaryPath, path) == 0 else {
            let code = errno
            unlink(temporaryPath)
            throw Self.writeError(path, code)
        }
        // The name too, before the ledger says done: after a power cut a chunk recorded done
        // whose rename was lost is only made again, but that is a chunk's work for nothing.
        FolderWrites.sync(folder: (path as NSString).deletingLastPathComponent)
        return hash.value
    }

    func abandon() {
        if let f = file {
            fclose(f)
            file = nil
            unlink(temporaryPath)
        }
    }

    private func put(_ values: [Int64]) throws {
        var le = values.map { $0.littleEndian }
        try le.withUnsafeMutableBytes { try put(UnsafeRawBufferPointer($0)) }
    }

    private func put(_ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { try put($0) }
    }

    private func put(_ raw: UnsafeRawBufferPointer) throws {
        guard let f = file else { return }
        hash.add(raw)
        if raw.count > 0 && fwrite(raw.baseAddress, 1, raw.count, f) != raw.count { throw Self.writeError(path, errno) }
    }

    static func writeError(_ path: String, _ code: Int32) -> UpscaleError {
        if code == ENOSPC {
            return UpscaleError(.output, "the disk is full: writing the chunk '\(path)' failed; free some space and run the job again (finished chunks are kept)")
        }
        return UpscaleError(.output, "writing the chunk '\(path)' failed: \(String(cString: strerror(code)))")
    }
}

/// Reads a chunk file back: its parameters, then its packets in order.
final class ChunkReader {
    let path: String
    let timeBase: AVRational
    let fields: [Int64]
    let extradata: [UInt8]
    private var file: UnsafeMutablePointer<FILE>?
    private(set) var packets: Int64 = 0

    init(path: String) throws {
        self.path = path
        guard let f = fopen(path, "rb") else {
            throw UpscaleError(.processing, "the chunk '\(path)' is missing (\(String(cString: strerror(errno)))); run the job again to redo it")
        }
        file = f
        var magic = [UInt8](repeating: 0, count: ChunkFile.magic.count)
        guard fread(&magic, 1, magic.count, f) == magic.count, magic == ChunkFile.magic else {
            fclose(f)
            file = nil
            throw Self.damaged(path)
        }
        let head = try Self.int64s(f, 2 + ChunkFile.fieldCount + 1, path)
        timeBase = AVRational(num: Int32(head[0]), den: Int32(head[1]))
        fields = Array(head[2..<(2 + ChunkFile.fieldCount)])
        let size = Int(head.last!)
        guard size >= 0 && size < 1 << 24 else { throw Self.damaged(path) }
        var extra = [UInt8](repeating: 0, count: size)
        guard size == 0 || fread(&extra, 1, size, f) == size else { throw Self.damaged(path) }
        extradata = extra
    }

    deinit { if let file { fclose(file) } }

    func describe(_ par: UnsafeMutablePointer<AVCodecParameters>) {
        ChunkFile.apply(fields, to: par)
        av_freep(&par.pointee.extradata)
        par.pointee.extradata_size = 0
        if !extradata.isEmpty, let data = av_mallocz(extradata.count + Int(AV_INPUT_BUFFER_PADDING_SIZE)) {
            data.copyMemory(from: extradata, byteCount: extradata.count)
            par.pointee.extradata = data.assumingMemoryBound(to: UInt8.self)
            par.pointee.extradata_size = Int32(extradata.count)
        }
    }

    /// The next packet into `packet` (data only when `withData`); false after the end record.
    func read(into packet: UnsafeMutablePointer<AVPacket>, withData: Bool = true) throws -> Bool {
        guard let f = file else { return false }
        let h = try Self.int64s(f, 5, path)
        if h[4] == -1 {
            let count = try Self.int64s(f, 1, path)[0]
            guard count == packets else { throw Self.damaged(path) }
            return false
        }
        let size = Int(h[4])
        guard size >= 0 && size < 1 << 30 else { throw Self.damaged(path) }
        if withData {
            try check(av_new_packet(packet, Int32(size)), "out of memory reading '\(path)'")
            guard size == 0 || fread(packet.pointee.data, 1, size, f) == size else { throw Self.damaged(path) }
        } else {
            av_packet_unref(packet)
            guard fseeko(f, off_t(size), SEEK_CUR) == 0 else { throw Self.damaged(path) }
        }
        packet.pointee.pts = h[0]
        packet.pointee.dts = h[1]
        packet.pointee.duration = h[2]
        packet.pointee.flags = Int32(h[3])
        packets += 1
        return true
    }

    private static func int64s(_ f: UnsafeMutablePointer<FILE>, _ n: Int, _ path: String) throws -> [Int64] {
        var values = [Int64](repeating: 0, count: n)
        guard fread(&values, 8, n, f) == n else { throw damaged(path) }
        return values.map { Int64(littleEndian: $0) }
    }

    static func damaged(_ path: String) -> UpscaleError {
        UpscaleError(.processing, "the chunk '\(path)' is incomplete or damaged; delete it and run the job again to redo it")
    }
}

/// FNV-1a (64-bit) over the bytes written: a chunk's checksum in the job store, checked
/// again before the join.
public struct ContentHash: Sendable {
    public private(set) var value: UInt64 = 0xcbf2_9ce4_8422_2325

    public init() {}

    public mutating func add(_ bytes: UnsafeRawBufferPointer) {
        var h = value
        for b in bytes {
            h ^= UInt64(b)
            h = h &* 0x0000_0100_0000_01b3
        }
        value = h
    }

    /// The hash of a whole file, as `ChunkWriter` computed it while writing.
    public static func of(file path: String) -> UInt64? {
        guard let f = fopen(path, "rb") else { return nil }
        defer { fclose(f) }
        var hash = ContentHash()
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let n = fread(&buffer, 1, buffer.count, f)
            if n == 0 { break }
            buffer.withUnsafeBytes { hash.add(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
        }
        return ferror(f) == 0 ? hash.value : nil
    }
}
