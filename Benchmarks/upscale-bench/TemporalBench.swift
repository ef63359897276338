import ArgumentParser
import Foundation
import UpscaleCore
import UpscaleMedia

struct TemporalResult: Codable {
    let method: String
    let mean_abs_frame_diff: Double
}

/// Flicker check for the refinement: on the static background of a real clip (pixels whose
/// input barely changes between frames), the output's mean absolute frame-to-frame change
/// with refinement should not exceed plain Lanczos'.
struct TemporalBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "temporal",
        abstract: "Frame-to-frame change on a clip's static background, 2x, plain Lanczos vs refined.")

    @Argument(help: "Video (default: Samples/street.mp4, real static-camera street footage).") var input: String?
    @Option(help: "Frames to compare.") var frames = 30
    @Option(help: "Input change (8-bit levels) at or below which a pixel counts as static background.") var still = 2
    @Option(help: "A pixel is static background when every input sample within this distance is (0: the pixel alone).") var radius = 0
    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        let results = try measure()
        if json {
            print(try jsonText(results))
        } else {
            print("temporal: mean |Y(t) − Y(t−1)| on static background, \(frames) frames, 2x")
            for r in results { print("| \(r.method) | \(fmt(r.mean_abs_frame_diff, 4)) |") }
        }
    }

    func measure() throws -> [TemporalResult] {
        let reader = try VideoFrameReader(path: input ?? defaultClip())
        let size = (reader.width, reader.height), out = (2 * reader.width, 2 * reader.height)
        let scalers = [("upscale-lanczos3", FrameScaler(input: size, output: out, layout: .yuv420, threads: 2)),
                       ("upscale-refined", FrameScaler(input: size, output: out, layout: .yuv420, threads: 2, refiner: EdgeRefiner.trained(input: size, output: out)))]
        var previousInput: Plane?
        var previous: [Plane?] = [nil, nil]
        var sums = [0.0, 0.0], count = 0
        var n = 0
        while n < frames, let next = try reader.next() {
            n += 1
            let luma = next.frame.planes[0]
            let outputs = scalers.map { $0.1.scale(next.frame).planes[0] }
            if let before = previousInput {
                // Static: every input sample within `radius` changed by at most `still`.
                var calm = [Bool](repeating: false, count: size.0 * size.1)
                for y in 0..<size.1 {
                    for x in 0..<size.0 {
                        var ok = true
                        for yy in max(y - radius, 0)...min(y + radius, size.1 - 1) where ok {
                            for xx in max(x - radius, 0)...min(x + radius, size.0 - 1) where abs(Int(luma[xx, yy]) - Int(before[xx, yy])) > still {
                                ok = false
                                break
                            }
                        }
                        calm[y * size.0 + x] = ok
                    }
                }
                for y in 0..<out.1 {
                    for x in 0..<out.0 where calm[(y / 2) * size.0 + x / 2] {
                        for i in 0..<2 { sums[i] += Double(abs(Int(outputs[i][x, y]) - Int(previous[i]![x, y]))) }
                        count += 1
                    }
                }
            }
            previousInput = luma
            previous = outputs
        }
        return scalers.indices.map { TemporalResult(method: scalers[$0].0, mean_abs_frame_diff: count > 0 ? sums[$0] / Double(count) : 0) }
    }
}
