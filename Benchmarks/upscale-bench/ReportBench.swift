import ArgumentParser
import Foundation
import UpscaleCore
import UpscaleImages
import UpscaleMedia
import UpscaleTestSupport

struct ReportBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "report",
        abstract: "Run core (2 frames, 3 runs, 1 and 2 threads), quality (x2, x4, box), temporal, e2e and dashboard; write bench.md, bench.png (fps and PSNR bars), compare.png (crops at 4x) and the dashboard's screenshots.")

    @Option(help: "Folder for bench.md, bench.png and compare.png.") var out: String

    func run() throws {
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        let started = monotonicSeconds()
        print("core, 1 thread…")
        let core1 = try CoreBench.parse(["--frames", "2", "--runs", "3"]).measure()
        print("core, 2 threads…")
        let core2 = try CoreBench.parse(["--frames", "2", "--runs", "5", "--threads", "2"]).measure()
        print("core, photo mosaic…")
        let mosaic = try CoreBench.parse(["--frames", "2", "--runs", "3", "--methods", "upscale-lanczos3", "upscale-refined",
                                          "swscale-lanczos", "zimg-lanczos", "--photos"] + fixturePhotos()).measure()
        print("core, other ratios and 10-bit…")
        var ratios: [(String, SpeedReport)] = []
        for (from, to, label) in [("1920x1080", "3840x2160", "2x, 1080p → 4K"), ("1280x720", "3840x2160", "3x, 720p → 4K"),
                                  ("1440x810", "3840x2160", "2.667x, 1440 → 3840"), ("960x540", "3840x2160", "4x"),
                                  ("1280x720", "7680x4320", "6x, 720p → 8K")] {
            ratios.append((label, try CoreBench.parse(["--from", from, "--to", to, "--frames", "4", "--runs", "3",
                                                       "--methods", "upscale-lanczos3", "upscale-refined", "swscale-lanczos"]).measure()))
        }
        ratios.append(("4K → 8K, 10-bit (yuv420p10le)", try CoreBench.parse(["--frames", "2", "--runs", "3", "--depth", "10"]).measure()))
        print("quality…")
        let quality2 = try QualityBench.parse([]).measure()
        let quality3 = try QualityBench.parse(["--scale", "3"]).measure()
        let quality4 = try QualityBench.parse(["--scale", "4"]).measure()
        let qualityBox = try QualityBench.parse(["--downscale", "box"]).measure()
        let qualityRGB = try QualityBench.parse(["--rgb"]).measure()
        print("temporal…")
        let temporal = try TemporalBench.parse([]).measure()
        let temporalStrict = try TemporalBench.parse(["--radius", "3"]).measure()
        let temporalHalved = try TemporalBench.parse(["--halve"]).measure()
        print("e2e…")
        let e2e = try EndToEndBench.parse([]).measure()
        print("dashboard…")
        let dashboard = (try? Chromium.path()) != nil ? try DashboardBench.parse(["--report", out]).measure() : nil

        var md = ["# upscale-bench report", "",
                  "\(Self.machine()), \(Self.today()). Produced by `upscale-bench report` in \(Int(monotonicSeconds() - started)) s; every table compares methods measured in the same run.", "",
                  "## Scaler speed (\(core1.from) → \(core1.to), yuv420p 8-bit, real frames)", "",
                  "Frames of the sample clip (768x576 street footage scaled to 4K, so soft):", "",
                  "1 thread:", "", core1.table(), "", Self.share(core1),
                  "2 threads, with one-thread twins (`-1t`) interleaved in the same run:", "", core2.table(), "", Self.scaling(core2), "",
                  "Frames whose luma is the fixture photos tiled at their own resolution (detail in every sample, the refinement's worst case), 1 thread:", "",
                  mosaic.table(), "", Self.share(mosaic),
                  "Other ratios and 10-bit, sample-clip frames, 1 thread (each line one run):", "",
                  "| scale | upscale-lanczos3 fps | upscale-refined fps | swscale-lanczos fps | Lanczos × swscale | refined × swscale |",
                  "| --- | ---: | ---: | ---: | ---: | ---: |"]
                  + ratios.map { label, r in
                      func fps(_ name: String) -> Double? { r.results.first { $0.method == name }?.fps }
                      let sws = fps("swscale-lanczos") ?? 0
                      func cell(_ v: Double?) -> String { v.map { fmt($0) } ?? "—" }
                      func ratio(_ v: Double?) -> String { v.map { sws > 0 ? fmt($0 / sws, 2) + "x" : "—" } ?? "—" }
                      return "| \(label) | \(cell(fps("upscale-lanczos3"))) | \(cell(fps("upscale-refined"))) | \(cell(sws)) | \(ratio(fps("upscale-lanczos3"))) | \(ratio(fps("upscale-refined"))) |"
                  }
                  + ["", "Refinement runs at exact 2x, 3x and 4x; other scales are Lanczos only.", "",
                  "## Quality (protocol of shared/notes/peers.md on the photos in Tests/Fixtures)", "",
                  quality2.table(), "", quality3.table(), "", quality4.table(), "", qualityBox.table(), "",
                  "Colour (sRGB planes, each degraded and upscaled; refined as one `.rgb` frame):", "", qualityRGB.table(), "",
                  "## Temporal stability (mean |Y(t) − Y(t−1)| on the sample clip's static background, 2x, 30 frames)", "",
                  "Static: the input sample under the pixel changed by at most 2 levels; strict: every input sample within 3 did. "
                  + "`upscale-refined` is the video path (refinement reads the temporally held luma); `upscale-refined-per-frame` refines each frame on its own, as for stills. "
                  + "Halved clip: every frame 2x2-box halved, upscaled 2x, mean PSNR-Y against the frame (motion included: the hold must not cost sharpness).", "",
                  "| method | static | strict | PSNR-Y, halved clip (dB) |", "| --- | ---: | ---: | ---: |"]
                  + temporal.indices.map {
                      "| \(temporal[$0].method) | \(fmt(temporal[$0].mean_abs_frame_diff, 4)) | \(fmt(temporalStrict[$0].mean_abs_frame_diff, 4)) | \(fmt(temporalHalved[$0].psnr_y ?? 0, 3)) |"
                  } + [""]
        if let e2e {
            md += ["## End to end (libx265, audio copied)", "", e2e.table(), ""]
        } else {
            md += ["## End to end", "", "skipped: the ffmpeg command is not installed", ""]
        }
        if let dashboard {
            md += ["## Dashboard (`upscale-bench dashboard`)", ""] + dashboard.map { "- " + $0 } + ["", "![the dashboard](dashboard.png)", ""]
        } else {
            md += ["## Dashboard", "", "skipped: chromium is not installed", ""]
        }
        md += ["![fps and PSNR per method](bench.png)", "", "![crops: nearest-neighbour input, swscale Lanczos, upscale](compare.png)", ""]
        try md.joined(separator: "\n").write(toFile: out + "/bench.md", atomically: true, encoding: .utf8)
        try Self.chart(speed: core1, quality: quality2).savePNG(out + "/bench.png")
        try Self.comparison().savePNG(out + "/compare.png")
        print("wrote \(out)/bench.md, \(out)/bench.png, \(out)/compare.png")
    }

    /// "2 threads vs 1: …" from a run with one-thread twins.
    static func scaling(_ report: SpeedReport) -> String {
        func fps(_ name: String) -> Double? { report.results.first { $0.method == name }?.fps }
        let pairs = ["upscale-lanczos3", "upscale-refined"].compactMap { name -> String? in
            guard let many = fps(name), let one = fps(name + "-1t"), one > 0 else { return nil }
            return "\(name) \(fmt(many / one, 2))x"
        }
        return "\(report.threads) threads vs 1, same run: " + pairs.joined(separator: ", ") + "."
    }

    static func share(_ report: SpeedReport) -> String {
        guard let share = report.refined_share else { return "" }
        return "The refinement changes \(fmt(100 * share, 1))% of these frames' luma samples.\n"
    }

    static func machine() -> String {
        let cpu = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8))?
            .split(separator: "\n").first { $0.hasPrefix("model name") }?
            .split(separator: ":").last.map { $0.trimmingCharacters(in: .whitespaces) } ?? "unknown CPU"
        return "\(ProcessInfo.processInfo.activeProcessorCount) cores, \(cpu)"
    }

    static func today() -> String {
        let f = DateFormatter()
        f.dateFormat = "yyyy-MM-dd"
        return f.string(from: Date())
    }

    /// Two horizontal bar groups: scaler fps (1 thread) and mean PSNR-Y at x2.
    static func chart(speed: SpeedReport, quality: QualityReport) throws -> Canvas {
        let rowHeight = 30, left = 170, barWidth = 560
        let groups: [(String, [(String, Double)], String)] = [
            ("Scaler fps, \(speed.from) → \(speed.to), 1 thread (higher is better)", speed.results.map { ($0.method, $0.fps) }, "%.1f fps"),
            ("Mean PSNR-Y dB at x2 (higher is better; bars start at 25 dB)", quality.mean.map { ($0.method, $0.psnr - 25) }, "%.2f dB"),
        ]
        let height = groups.reduce(20) { $0 + 40 + $1.1.count * rowHeight + 20 }
        let canvas = Canvas(width: left + barWidth + 120, height: height)
        let colors: [(UInt8, UInt8, UInt8)] = [(214, 96, 77), (67, 147, 195), (90, 174, 97), (153, 112, 171), (224, 130, 20)]
        var y = 20
        for (title, values, unit) in groups {
            try canvas.text(title, x: 10, y: y, size: 13)
            y += 35
            let top = max(values.map(\.1).max() ?? 1, 1e-9)
            for (index, (name, value)) in values.enumerated() {
                try canvas.text(name, x: 10, y: y + 6, size: 11)
                let w = max(1, Int(Double(barWidth) * max(0, value) / top))
                canvas.fill(x: left, y: y, width: w, height: rowHeight - 8, color: colors[index % colors.count])
                let shown = unit.hasSuffix("dB") ? value + 25 : value
                try canvas.text(String(format: unit, shown), x: left + w + 6, y: y + 4, size: 11)
                y += rowHeight
            }
            y += 20
        }
        return canvas
    }

    /// A detail of the sample clip's first frame upscaled 4x: nearest neighbour, swscale Lanczos, ours.
    static func comparison() throws -> Canvas {
        let reader = try VideoFrameReader(path: defaultClip())
        guard let first = try reader.next() else { throw ValidationError("the sample clip has no frames") }
        let luma = first.frame.planes[0]
        let input = Frame(width: luma.width, height: luma.height, layout: .gray, planes: [luma])
        let size = (luma.width * 4, luma.height * 4)
        let sws = try SwscaleScaler(input: (luma.width, luma.height), output: size, layout: .gray).scale(input).planes[0]
        let ours = FrameScaler(input: (luma.width, luma.height), output: size, layout: .gray, threads: 2).scale(input).planes[0]
        // The 64x48 input region with the most edge energy, shown 4x (256x192) and then doubled.
        let (cw, ch) = (64, 48)
        var best = (energy: -1, x: 0, y: 0)
        for y in stride(from: 0, to: luma.height - ch, by: 8) {
            for x in stride(from: 0, to: luma.width - cw, by: 8) {
                var energy = 0
                for yy in y..<(y + ch) { for xx in x..<(x + cw - 1) { energy += abs(Int(luma[xx + 1, yy]) - Int(luma[xx, yy])) } }
                if energy > best.energy { best = (energy, x, y) }
            }
        }
        let (cx, cy) = (best.x, best.y)
        func crop(_ plane: Plane, scale: Int) -> Plane {
            let out = Plane(width: cw * scale, height: ch * scale)
            for y in 0..<out.height { for x in 0..<out.width { out[x, y] = plane[cx * scale + x, cy * scale + y] } }
            return out
        }
        let panels = [("input, nearest neighbour", crop(luma, scale: 1), 8),
                      ("swscale Lanczos 4x", crop(sws, scale: 4), 2),
                      ("upscale lanczos3 4x", crop(ours, scale: 4), 2)]
        let panelWidth = cw * 8, gap = 12
        let canvas = Canvas(width: panels.count * (panelWidth + gap) + gap, height: ch * 8 + 50)
        for (index, (label, plane, zoom)) in panels.enumerated() {
            let x = gap + index * (panelWidth + gap)
            try canvas.text(label, x: x, y: 10, size: 12)
            canvas.draw(plane, x: x, y: 40, zoom: zoom)
        }
        return canvas
    }
}
