import Foundation
import UpscaleCore

/// A plain double-precision separable resampler written from the definitions
/// (centre-aligned mapping, edge clamp, normalized kernel), used to check the
/// fixed-point core. Deliberately simple and slow.
enum ReferenceResampler {
    static func weights(grid: SampleGrid, kernel: Kernel) -> [[(index: Int, weight: Double)]] {
        let stretch = max(1, grid.ratio)
        return (0..<grid.outputSize).map { i in
            let centre = grid.inputPosition(ofOutput: i)
            let support = kernel.radius * stretch
            var taps: [(Int, Double)] = []
            var j = Int(floor(centre - support))
            while Double(j) <= centre + support {
                let w = kernel.weight((Double(j) - centre) / stretch)
                if w != 0 { taps.append((min(max(j, 0), grid.inputSize - 1), w)) }
                j += 1
            }
            let total = taps.reduce(0) { $0 + $1.1 }
            return taps.map { ($0.0, $0.1 / total) }
        }
    }

    static func resample(_ plane: Plane, horizontal: SampleGrid, vertical: SampleGrid, kernel: Kernel) -> [UInt8] {
        values(height: plane.height, sample: { Double(plane[$0, $1]) }, horizontal: horizontal, vertical: vertical, kernel: kernel)
            .map { UInt8(min(max($0.rounded(), 0), 255)) }
    }

    static func resample(_ plane: Plane16, horizontal: SampleGrid, vertical: SampleGrid, kernel: Kernel) -> [UInt16] {
        values(height: plane.height, sample: { Double(plane[$0, $1]) }, horizontal: horizontal, vertical: vertical, kernel: kernel)
            .map { UInt16(min(max($0.rounded(), 0), Double(plane.maxValue))) }
    }

    /// The largest difference between `ours` (an upscale of `plane` to `size`) and the
    /// reference resampling of `plane` to `size`.
    static func worstDifference(_ ours: Plane, from plane: Plane, kernel: Kernel = .lanczos3) -> Int {
        let reference = resample(plane, horizontal: SampleGrid(lumaInput: plane.width, lumaOutput: ours.width),
                                 vertical: SampleGrid(lumaInput: plane.height, lumaOutput: ours.height), kernel: kernel)
        return zip(ours.samples, reference).map { abs(Int($0) - Int($1)) }.max() ?? 0
    }

    static func worstDifference(_ ours: Plane16, from plane: Plane16, kernel: Kernel = .lanczos3) -> Int {
        let reference = resample(plane, horizontal: SampleGrid(lumaInput: plane.width, lumaOutput: ours.width),
                                 vertical: SampleGrid(lumaInput: plane.height, lumaOutput: ours.height), kernel: kernel)
        return zip(ours.samples, reference).map { abs(Int($0) - Int($1)) }.max() ?? 0
    }

    /// Unrounded output values, row-major.
    static func values(height: Int, sample: (Int, Int) -> Double, horizontal: SampleGrid, vertical: SampleGrid, kernel: Kernel) -> [Double] {
        let hw = weights(grid: horizontal, kernel: kernel)
        let vw = weights(grid: vertical, kernel: kernel)
        let outW = horizontal.outputSize, outH = vertical.outputSize
        var rows = [Double](repeating: 0, count: outW * height)
        for y in 0..<height {
            for x in 0..<outW {
                rows[y * outW + x] = hw[x].reduce(0) { $0 + $1.weight * sample($1.index, y) }
            }
        }
        var out = [Double](repeating: 0, count: outW * outH)
        for y in 0..<outH {
            for x in 0..<outW {
                out[y * outW + x] = vw[y].reduce(0) { $0 + $1.weight * rows[$1.index * outW + x] }
            }
        }
        return out
    }
}

enum TestImages {
    static var fixtures: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fixtures")
    }

    /// A binary PGM (P5, 8-bit) from Tests/Fixtures as a plane.
    static func pgm(_ name: String) throws -> Plane {
        let data = try Data(contentsOf: fixtures.appendingPathComponent(name))
        var fields: [String] = []
        var index = 0
        while fields.count < 4 {
            while index < data.count, data[index] == 0x20 || data[index] == 0x0a || data[index] == 0x0d || data[index] == 0x09 { index += 1 }
            var token = ""
            while index < data.count, !(data[index] == 0x20 || data[index] == 0x0a || data[index] == 0x0d || data[index] == 0x09) {
                token.append(Character(Unicode.Scalar(data[index])))
                index += 1
            }
            fields.append(token)
        }
        precondition(fields[0] == "P5" && fields[3] == "255", "only 8-bit binary PGM is supported")
        let width = Int(fields[1])!, height = Int(fields[2])!
        let pixels = [UInt8](data[(index + 1)...].prefix(width * height))
        return Plane(width: width, height: height, samples: pixels)
    }

    /// Deterministic pseudo-random samples (a fixed LCG), for sizes no photo covers.
    /// 2x2 box average, rounded: an anti-aliased half-size picture.
    static func halve(_ plane: Plane) -> Plane {
        let out = Plane(width: plane.width / 2, height: plane.height / 2)
        for y in 0..<out.height {
            for x in 0..<out.width {
                let s = Int(plane[2 * x, 2 * y]) + Int(plane[2 * x + 1, 2 * y]) + Int(plane[2 * x, 2 * y + 1]) + Int(plane[2 * x + 1, 2 * y + 1])
                out[x, y] = UInt8((s + 2) / 4)
            }
        }
        return out
    }

    static func noise(width: Int, height: Int, seed: UInt32 = 1) -> Plane {
        var state = seed
        let samples = (0..<(width * height)).map { _ -> UInt8 in
            state = state &* 1_664_525 &+ 1_013_904_223
            return UInt8(truncatingIfNeeded: state >> 24)
        }
        return Plane(width: width, height: height, samples: samples)
    }
}
