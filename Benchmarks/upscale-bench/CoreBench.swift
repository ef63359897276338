import ArgumentParser
import Foundation
import UpscaleCore
import UpscaleImages
import UpscaleMedia

/// One scaler under test: a name and a function from an input frame to an output frame.
struct Method {
    let name: String
    let run: (Frame, Frame) throws -> Void
    var run10: ((Frame16, Frame16) throws -> Void)? = nil
}

struct CoreBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "core",
        abstract: "Scaler speed on real yuv420p frames: methods interleaved A B C A B C after a warm-up.")

    @Option(help: "Input frame size.") var from = Size(argument: "3840x2160")!
    @Option(help: "Output frame size.") var to = Size(argument: "7680x4320")!
    @Option(help: "Frames per run.") var frames = 4
    @Option(help: "Timed runs per method (after one warm-up run).") var runs = 5
    @Option(help: "Threads for every method that takes a thread count.") var threads = 1
    @Option(help: "Sample bit depth: 8, or 10 (16-bit planes; the 8-bit frames widened, upscale-lanczos3 and swscale-lanczos only).")
    var depth = 8
    @Option(help: "Video whose first frames are used (default: Samples/street.mp4), scaled to --from once, untimed.")
    var input: String?
    @Option(parsing: .upToNextOption, help: ArgumentHelp(
        "Photos to tile at their own resolution into the frames' luma instead of a video (chroma grey): detail in every sample, as in footage shot at the input size.",
        valueName: "photo"))
    var photos: [String] = []
    @Option(parsing: .upToNextOption, help: "Methods to run (default: all).") var methods: [String] = []
    @Flag(help: "Print one JSON object instead of a table.") var json = false

    func run() throws {
        let report = try measure()
        if json {
            print(try jsonText(report))
        } else {
            print("core: \(report.from) → \(report.to) yuv420p \(depth)-bit, \(report.frames) real frames, \(threads) thread(s), median of \(runs) runs")
            print(report.table())
            if let share = report.refined_share { print("upscale-refined changes \(fmt(100 * share, 1))% of the luma samples of these frames") }
        }
    }

    func measure() throws -> SpeedReport {
        var inputs: [Frame] = []
        if photos.isEmpty {
            let source = input ?? defaultClip()
            let reader = try VideoFrameReader(path: source)
            let prepare = try SwscaleScaler(input: (reader.width, reader.height), output: (from.width, from.height))
            while inputs.count < frames, let next = try reader.next() { inputs.append(prepare.scale(next.frame)) }
            guard !inputs.isEmpty else { throw ValidationError("'\(source)' has no frames") }
        } else {
            let tiles = try photos.map(ImagePlanes.loadLuma)
            inputs = (0..<frames).map { Self.mosaic(tiles, width: from.width, height: from.height, shift: $0) }
        }

        guard depth == 8 || depth == 10 else { throw ValidationError("--depth is 8 or 10") }
        var all = depth == 8 ? try makeMethods() : try makeMethods10()
        let wide = depth == 10 ? inputs.map(Self.widen) : []
        let output16 = Frame16(width: to.width, height: to.height, layout: .yuv420, bitDepth: 10)
        if !methods.isEmpty { all = all.filter { methods.contains($0.name) } }
        let output = Frame(width: to.width, height: to.height, layout: .yuv420)
        var times: [String: [Double]] = [:]
        var rss: [String: Int] = [:]
        for round in 0...runs {
            for method in all {
                var elapsed = 0.0
                let growth = try peakResidentGrowth {
                    let start = monotonicSeconds()
                    if depth == 10 {
                        for frame in wide { try method.run10?(frame, output16) }
                    } else {
                        for frame in inputs { try method.run(frame, output) }
                    }
                    elapsed = monotonicSeconds() - start
                }
                rss[method.name] = max(rss[method.name] ?? 0, growth)
                if round > 0 { times[method.name, default: []].append(Double(inputs.count) / elapsed) }
            }
        }
        let swscale = median(times["swscale-lanczos"] ?? [])
        let results = all.map { method -> SpeedResult in
            let fps = times[method.name]!
            let m = median(fps)
            return SpeedResult(
                method: method.name, fps: round2(m), mpix_per_s: round2(m * Double(to.width * to.height) / 1e6),
                fps_min: round2(fps.min()!), fps_max: round2(fps.max()!),
                ratio_to_swscale: swscale > 0 ? round3(m / swscale) : 0,
                peak_rss_delta_mb: round2(Double(rss[method.name]!) / 1e6))
        }
        var share: Double?
        if let refiner = EdgeRefiner.trained(input: (from.width, from.height), output: (to.width, to.height)) {
            let counts = inputs.map { frame in refiner.analyze(frame.planes[0]).classes.filter { $0 >= 0 && refiner.active[Int($0)] }.count }
            share = round3(Double(counts.reduce(0, +)) / Double(inputs.count * from.width * from.height))
        }
        return SpeedReport(from: from.description, to: to.description, threads: threads, frames: inputs.count,
                           refined_share: share, results: results)
    }

    /// A yuv420p frame whose luma is `tiles` laid edge to edge, row after row (starting with
    /// tile `shift`), at their own resolution; chroma is neutral grey.
    static func mosaic(_ tiles: [Plane], width: Int, height: Int, shift: Int) -> Frame {
        let frame = Frame(width: width, height: height, layout: .yuv420)
        for plane in frame.planes.dropFirst() {
            for y in 0..<plane.height { plane.row(y).update(repeating: 128, count: plane.width) }
        }
        let luma = frame.planes[0]
        var next = shift, top = 0
        while top < height {
            var left = 0, rowHeight = 0
            while left < width {
                let tile = tiles[next % tiles.count]
                next += 1
                let w = min(tile.width, width - left), h = min(tile.height, height - top)
                for y in 0..<h { (luma.row(top + y) + left).update(from: tile.row(y), count: w) }
                left += w
                rowHeight = max(rowHeight, h)
            }
            top += rowHeight
        }
        return frame
    }

    /// An 8-bit frame as 10-bit samples (value·4 plus the top two bits again, so all ten bits vary).
    static func widen(_ frame: Frame) -> Frame16 {
        let planes = frame.planes.map { p -> Plane16 in
            let out = Plane16(width: p.width, height: p.height, bitDepth: 10)
            for y in 0..<p.height { for x in 0..<p.width { out[x, y] = UInt16(p[x, y]) << 2 | UInt16(p[x, y] >> 6) } }
            return out
        }
        return Frame16(width: frame.width, height: frame.height, layout: frame.layout, planes: planes)
    }


    /// Each scaler is built on its first call, inside the measured region, so its own
    /// buffers count towards its peak resident growth.
    private func makeMethods() throws -> [Method] {
        let (input, output) = ((from.width, from.height), (to.width, to.height))
        let ours = Lazy { FrameScaler(input: input, output: output, layout: .yuv420, kernel: .lanczos3, threads: threads) }
        let refined = Lazy {
            // As the video path runs it: with the temporal hold (its held luma counts in the memory figure).
            FrameScaler(input: input, output: output, layout: .yuv420, kernel: .lanczos3, threads: threads,
                        refiner: EdgeRefiner.trained(input: input, output: output), hold: TemporalHold())
        }
        // With several threads, one-thread twins run interleaved with them: thread scaling from one run.
        let ours1 = Lazy { FrameScaler(input: input, output: output, layout: .yuv420, kernel: .lanczos3, threads: 1) }
        let refined1 = Lazy {
            FrameScaler(input: input, output: output, layout: .yuv420, kernel: .lanczos3, threads: 1,
                        refiner: EdgeRefiner.trained(input: input, output: output), hold: TemporalHold())
        }
        let sws = Lazy { try SwscaleScaler(input: input, output: output, threads: threads) }
        let zimg = Lazy { try ZimgScaler(input: input, output: output, layout: .yuv420) }
        let scaleX = Double(to.width) / Double(from.width)
        let twins = threads > 1 ? [
            Method(name: "upscale-lanczos3-1t") { try ours1.get().scale($0, into: $1) },
            Method(name: "upscale-refined-1t") { try refined1.get().scale($0, into: $1) },
        ] : []
        return twins + [
            Method(name: "upscale-lanczos3") { try ours.get().scale($0, into: $1) },
            Method(name: "upscale-refined") { try refined.get().scale($0, into: $1) },
            Method(name: "swscale-lanczos") { try sws.get().scale($0, into: $1) },
            Method(name: "zimg-lanczos") { try zimg.get().scale($0, into: $1) },
            Method(name: "vips-lanczos3") { source, _ in
                for plane in source.planes { _ = try ImagePlanes.resizeLanczos3(plane, scale: scaleX) }
            },
        ]
    }

    private func makeMethods10() throws -> [Method] {
        let (input, output) = ((from.width, from.height), (to.width, to.height))
        let ours = Lazy { FrameScaler(input: input, output: output, layout: .yuv420, kernel: .lanczos3, threads: threads) }
        let sws = Lazy { try SwscaleScaler(input: input, output: output, threads: threads, bitDepth: 10) }
        return [
            Method(name: "upscale-lanczos3", run: { _, _ in }, run10: { try ours.get().scale($0, into: $1) }),
            Method(name: "swscale-lanczos", run: { _, _ in }, run10: { try sws.get().scale($0, into: $1) }),
        ]
    }
}

/// A value made on first use.
final class Lazy<Value> {
    private let make: () throws -> Value
    private var value: Value?

    init(_ make: @escaping () throws -> Value) { self.make = make }

    func get() throws -> Value {
        if let value { return value }
        let made = try make()
        value = made
        return made
    }
}

func round2(_ v: Double) -> Double { (v * 100).rounded() / 100 }
func round3(_ v: Double) -> Double { (v * 1000).rounded() / 1000 }
