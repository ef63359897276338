import Foundation

/// One method's speed figures, named as in the JSON the bench prints.
struct SpeedResult: Codable {
    let method: String
    let fps: Double
    let mpix_per_s: Double
    let fps_min: Double
    let fps_max: Double
    let ratio_to_swscale: Double
    let peak_rss_delta_mb: Double
}

struct SpeedReport: Codable {
    let from: String
    let to: String
    let threads: Int
    let frames: Int
    /// Share of the frames' luma samples the refinement changes (nil where it does not apply).
    var refined_share: Double? = nil
    let results: [SpeedResult]

    func table() -> String {
        var lines = ["| method | fps | Mpix/s | min–max fps | × swscale | peak RSS Δ (MB) |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
        for r in results {
            lines.append("| \(r.method) | \(fmt(r.fps)) | \(fmt(r.mpix_per_s, 1)) | \(fmt(r.fps_min))–\(fmt(r.fps_max)) | \(fmt(r.ratio_to_swscale, 3)) | \(fmt(r.peak_rss_delta_mb, 1)) |")
        }
        return lines.joined(separator: "\n")
    }
}

/// One JSON object with sorted keys, as every subcommand prints with --json.
func jsonText<T: Encodable>(_ value: T) throws -> String {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    return String(decoding: try encoder.encode(value), as: UTF8.self)
}

func fmt(_ v: Double, _ digits: Int = 2) -> String { String(format: "%.\(digits)f", v) }
