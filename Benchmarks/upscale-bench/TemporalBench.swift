import ArgumentParser
import Foundation
import UpscaleCore
import UpscaleMedia

struct TemporalResult: Codable {
    let method: String
    let mean_abs_frame_diff: Double
    /// With --halve: mean PSNR-Y of each 2x output against the frame before halving (motion included).
    let psnr_y: Double?
}

/// Flicker check for the refinement: on the static background of a real clip (pixels whose
/// input barely changes between frames), the output's mean absolute frame-to-frame change
/// with refinement should not exceed plain Lanczos'. The refinement is measured as the video
/// path runs it (with the previous frame) and per frame (as for stills).
struct TemporalBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "temporal",
        abstract: "Frame-to-frame change on a clip's static background, 2x, plain Lanczos vs refined.")

    @Argument(help: "Video (default: Samples/street.mp4, real static-camera street footage).") var input: String?
    @Option(help: "Frames to compare.") var frames = 30
    @Option(help: "Input change (8-bit levels) at or below which a pixel counts as static background.") var still = 2
    @Option(help: "A pixel is static background when every input sample within this distance is (0: the pixel alone).") var radius = 0
    @Option(parsing: .upToNextOption, help: "TemporalHold's stillness thresholds: hold up to, replace from (8-bit levels; default the video path's).") var stillness: [Float] = []
    @Flag(help: "Halve each frame (2x2 box) first and also report PSNR-Y of the 2x result against the frame: checks that the video path's hold leaves moving content alone.") var halve = false
    @Option(help: "Add a brightness ramp of this many levels per frame (a fade), to check the hold on slow global change.") var fade = 0.0
    @Flag(help: "Print JSON.") var json = false

    func validate() throws {
        if !stillness.isEmpty, stillness.count != 2 { throw ValidationError("--stillness takes two levels") }
    }

    func run() throws {
        let results = try measure()
        if json {
            print(try jsonText(results))
        } else {
            print("temporal: mean |Y(t) − Y(t−1)| on static background, \(frames) frames, 2x")
            for r in results { print("| \(r.method) | \(fmt(r.mean_abs_frame_diff, 4)) |" + (r.psnr_y.map { " \(fmt($0, 3)) dB |" } ?? "")) }
        }
    }

    func measure() throws -> [TemporalResult] {
        let reader = try VideoFrameReader(path: input ?? defaultClip())
        let size = halve ? (reader.width / 2, reader.height / 2) : (reader.width, reader.height)
        let out = (2 * size.0, 2 * size.1)
        let refiner = EdgeRefiner.trained(input: size, output: out)
        let hold = stillness.isEmpty ? TemporalHold() : TemporalHold(stillness: (stillness[0], stillness[1]))
        let scalers = [("upscale-lanczos3", FrameScaler(input: size, output: out, layout: .gray, threads: 2)),
                       ("upscale-refined-per-frame", FrameScaler(input: size, output: out, layout: .gray, threads: 2, refiner: refiner)),
                       ("upscale-refined", FrameScaler(input: size, output: out, layout: .gray, threads: 2, refiner: refiner, hold: hold))]
        var psnr = [Double](repeating: 0, count: scalers.count)
        var previousInput: Plane?
        var previous = [Plane?](repeating: nil, count: scalers.count)
        var sums = [Double](repeating: 0, count: scalers.count), count = 0
        var n = 0
        while n < frames, let next = try reader.next() {
            n += 1
            let original = next.frame.planes[0]
            if fade != 0 {
                // A global brightness ramp: frame n is brighter by n·fade levels (clamped).
                for y in 0..<original.height {
                    let row = original.row(y)
                    for x in 0..<original.width { row[x] = UInt8(clamping: Int((Double(row[x]) + Double(n) * fade).rounded())) }
                }
            }
            let luma = halve ? halved(original) : original
            let outputs = scalers.map { $0.1.scale(Frame(width: size.0, height: size.1, layout: .gray, planes: [luma])).planes[0] }
            if halve {
                let reference = ImageMetrics.crop(original, width: out.0, height: out.1)
                for i in scalers.indices { psnr[i] += ImageMetrics.psnr(outputs[i], reference, border: 8) }
            }
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
                        for i in scalers.indices { sums[i] += Double(abs(Int(outputs[i][x, y]) - Int(previous[i]![x, y]))) }
                        count += 1
                    }
                }
            }
            previousInput = luma
            previous = outputs
        }
        return scalers.indices.map {
            TemporalResult(method: scalers[$0].0, mean_abs_frame_diff: count > 0 ? sums[$0] / Double(count) : 0,
                           psnr_y: halve && n > 0 ? psnr[$0] / Double(n) : nil)
        }
    }

    /// 2x2 box average (rounded).
    private func halved(_ plane: Plane) -> Plane {
        let out = Plane(width: plane.width / 2, height: plane.height / 2)
        for y in 0..<out.height {
            let a = plane.row(2 * y), b = plane.row(2 * y + 1), o = out.row(y)
            for x in 0..<out.width {
                o[x] = UInt8((Int(a[2 * x]) + Int(a[2 * x + 1]) + Int(b[2 * x]) + Int(b[2 * x + 1]) + 2) / 4)
            }
        }
        return out
    }
}
