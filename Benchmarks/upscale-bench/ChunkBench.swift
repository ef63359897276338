import ArgumentParser
import DamageCorpus
import Foundation
import UpscaleCore
import UpscaleImages
import UpscaleMedia

/// Chunked against one pass, the same command otherwise: wall, CPU, system time, the largest
/// process's peak RSS, output bytes, and the chunked output's PSNR against the one-pass output
/// (luma, over every frame; infinite when identical), with one chunk worker and with two
/// (`--jobs 2`). `--long` is what a user's real video gets by default (10 s chunks), beside
/// the ffmpeg command doing the same job (issue 14's peer), and in 2 s chunks to show that
/// memory does not grow with the number of chunks.
struct ChunkBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "chunks",
        abstract: "Chunked vs one-pass runs of the upscale command (real-photo pans and the street clip): wall, CPU, system time, peak RSS, bytes, PSNR.")

    @Flag(help: "Skip the 4K→7680 case.") var small = false
    @Flag(help: "Only a 40 s 720p pan (keyframe every 2 s) in the default 10 s chunks and in 2 s chunks, one worker, beside the ffmpeg command.") var long = false
    @Option(help: "Instead: this many cycles of a 20 s 720p pan in 2 s chunks (every other one with --jobs 2) killed with SIGKILL 1-3 times at random moments, then resumed; what the outputs lost against one pass.") var kills = 0
    @Option(help: "Seed for the kill moments (with --kills).") var seed: UInt64 = 7

    func run() throws {
        guard ChildRun.available("ffmpeg") else {
            print("chunks skipped: the ffmpeg command is not installed (apt-get install ffmpeg); it makes the test clips")
            return
        }
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("upscale-chunks-\(getpid())").path
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: work) }
        if kills > 0 { return try killCycles(work: work) }
        // Keyframes every second, chunks of 2 s (the default is 10 s: on these short clips that
        // would be one piece). The 4K pan: 16 frames, keyframe every 8, chunks of 8 frames.
        var cases: [(String, String, Int, String, Double)] = [
            ("street 768x576 → 2x, medium CRF 20", try street(work: work), 1536, "medium", 2),
            ("pan 1280x720 → 2560, 300 frames, ultrafast CRF 28", try makePan(work: work, name: "pan720", size: (1280, 720), frames: 300, step: 4, gop: 30), 2560, "ultrafast", 2),
        ]
        if long {
            cases = [("pan 1280x720 → 2560, 1200 frames (40 s), medium CRF 20",
                      try makePan(work: work, name: "pan720long", size: (1280, 720), frames: 1200, step: 2, gop: 60), 2560, "medium", 10)]
        } else if !small {
            cases.append(("pan 3840x2160 → 7680, 16 frames, medium CRF 20", try makePan(work: work, name: "pan4k", size: (3840, 2160), frames: 16, step: 24, gop: 8), 7680, "medium", 8.0 / 30))
        }
        print("| case | run | wall s | CPU s | system s | peak RSS MB | bytes | wall / system / RSS vs one pass | bytes vs one pass | PSNR vs one pass (luma, min / mean) |")
        print("| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | --- |")
        for (label, clip, width, preset, seconds) in cases {
            let crf = preset == "ultrafast" ? "28" : "20"
            let base = [clip, "--width", "\(width)", "--preset", preset, "--crf", crf, "--overwrite", "--quiet"]
            var runs: [(String, String, [String])] = [
                ("one pass", upscaleBinary(), base + ["--chunk-seconds", "0"]),
                ("chunks, 1 worker", upscaleBinary(), base + ["--chunk-seconds", String(seconds)]),
                ("chunks, --jobs 2", upscaleBinary(), base + ["--chunk-seconds", String(seconds), "--jobs", "2"]),
            ]
            if long {
                runs[2] = ("2 s chunks, 1 worker", upscaleBinary(), base + ["--chunk-seconds", "2"])
                runs.append(("the ffmpeg command", "ffmpeg", ffmpegPeerArguments(input: clip, width: width, preset: preset, crf: crf,
                                                                                   output: work + "/ffmpeg.mp4")))
            }
            var reference: (wall: Double, system: Double, rss: Int, bytes: Int, path: String)?
            var measured: [(String, ChildRun)] = []
            for (name, executable, arguments) in runs {
                let peer = executable == "ffmpeg"
                let out = peer ? work + "/ffmpeg.mp4" : work + "/\(name.filter(\.isLetter)).mp4"
                let r = try ChildRun.run(executable, peer ? arguments : arguments + ["--output", out])
                guard r.status == 0 else { throw ValidationError("\(name) failed (\(r.status))") }
                let bytes = (try FileManager.default.attributesOfItem(atPath: out)[.size] as? Int) ?? 0
                measured.append((name, r))
                var psnr = "—"
                if let ref = reference, !peer {
                    let (low, mean) = try lumaPSNR(ref.path, out)
                    psnr = String(format: "%.1f / %.1f dB", low, mean)
                }
                let ratios = reference.map {
                    String(format: "%.3f / %.2f / %.2f | %.4f", r.seconds / $0.wall, r.system / $0.system, Double(r.peakLargest) / Double($0.rss),
                           Double(bytes) / Double($0.bytes))
                } ?? "— | —"
                print("| \(label) | \(name) | " + String(format: "%.2f | %.2f | %.2f | %.0f | %d", r.seconds, r.user + r.system, r.system,
                                                        Double(r.peakLargest) / 1e6, bytes) + " | \(ratios) | \(psnr) |")
                if reference == nil { reference = (r.seconds, r.system, r.peakLargest, bytes, out) }
            }
            if long, let (_, peer) = measured.last {
                print("")
                for (name, r) in measured.dropLast() {
                    print(String(format: "\(label), \(name) vs the ffmpeg command: wall %.3f, system %.2f, peak RSS %.3f",
                                 r.seconds / peer.seconds, r.system / peer.system, Double(r.peakLargest) / Double(peer.peakLargest)))
                }
            }
        }
    }

    /// Each cycle: the 20 s pan in 2 s chunks (one encoder goes on from chunk to chunk; every
    /// other cycle with two chunk workers), killed with SIGKILL (the command and its job child) 1-3 times at random moments of a
    /// full run, each time run again (a resume), then run to its end; the output against one
    /// pass: its frame count and times, its luma PSNR, and whether it decodes cleanly.
    private func killCycles(work: String) throws {
        var rng = SplitMix64(seed: seed)
        let clip = try makePan(work: work, name: "pan720kill", size: (1280, 720), frames: 600, step: 2, gop: 60)
        let base = [clip, "--width", "2560", "--preset", "ultrafast", "--crf", "28", "--quiet"]
        let reference = work + "/one-pass.mp4", out = work + "/chunked.mp4"
        guard try ChildRun.run(upscaleBinary(), base + ["--chunk-seconds", "0", "--output", reference]).status == 0 else {
            throw ValidationError("the one-pass run failed")
        }
        let whole = try ChildRun.run(upscaleBinary(), base + ["--chunk-seconds", "2", "--output", out])
        guard whole.status == 0 else { throw ValidationError("the uninterrupted chunked run failed") }
        let uninterrupted = try against(reference, out)
        let expected = try against(reference, reference).frames
        var wrongFrames = 0, wrongTimes = 0, failed = 0, undecodable = 0, finishedEarly = 0, killed = 0
        var lowest = Double.infinity
        for cycle in 0..<kills {
            try? FileManager.default.removeItem(atPath: out)
            // Every other cycle with two chunk workers (two runs going on from chunk to chunk).
            let arguments = base + ["--chunk-seconds", "2", "--output", out] + (cycle % 2 == 1 ? ["--jobs", "2"] : [])
            for _ in 0..<(1 + Int(rng.next() % 3)) {
                let run = Process()
                run.executableURL = URL(fileURLWithPath: upscaleBinary())
                run.arguments = arguments
                run.standardOutput = FileHandle.nullDevice
                run.standardError = FileHandle.nullDevice
                try run.run()
                let fraction = 0.05 + 0.9 * Double(rng.next() % 1000) / 1000
                usleep(UInt32(fraction * whole.seconds * 1_000_000))
                let tree = treeProcesses(run.processIdentifier)
                tree.forEach { kill($0, SIGKILL) }
                run.waitUntilExit()
                // The job child, killed too, may still be ending (its run holds the work folder).
                while tree.contains(where: { kill($0, 0) == 0 && resident($0) > 0 }) { usleep(20_000) }
                killed += 1
                if FileManager.default.fileExists(atPath: out) {
                    finishedEarly += 1
                    break
                }
            }
            if !FileManager.default.fileExists(atPath: out), try ChildRun.run(upscaleBinary(), arguments).status != 0 {
                failed += 1
                print("  cycle \(cycle): the run after the kills failed")
                continue
            }
            let r = try against(reference, out)
            if r.frames != expected { wrongFrames += 1 }
            if !r.sameTimes { wrongTimes += 1 }
            if !r.clean { undecodable += 1 }
            lowest = min(lowest, r.low)
        }
        print("chunk kill -9 cycles: \(kills) (\(killed) kills at random moments of a \(String(format: "%.1f", whole.seconds)) s run, 20 s 720p pan → 2560 in 2 s chunks, ultrafast, every other cycle with --jobs 2; \(finishedEarly) cycles ended by a run between kills)")
        print("  runs after the kills failed \(failed); outputs with a wrong frame count \(wrongFrames), other times than one pass's \(wrongTimes), decode errors \(undecodable)")
        print(String(format: "  lowest luma PSNR against one pass %.2f dB (an uninterrupted chunked run: %.2f dB)", lowest, uninterrupted.low))
    }

    /// `b` against `a`, picture by picture: how many pictures `b` has, whether they come at
    /// `a`'s times, whether `b` decodes to its end without an error, and the lowest luma PSNR.
    private func against(_ a: String, _ b: String) throws -> (frames: Int, sameTimes: Bool, clean: Bool, low: Double) {
        let x = try VideoFrameReader(path: a), y = try VideoFrameReader(path: b)
        var frames = 0, same = true, low = Double.infinity
        do {
            while let q = try y.next() {
                frames += 1
                guard let p = try x.next() else {
                    same = false
                    continue
                }
                if p.pts != q.pts { same = false }
                low = min(low, ImageMetrics.psnr(p.frame.planes[0], q.frame.planes[0]))
            }
        } catch {
            return (frames, false, false, low)
        }
        if try x.next() != nil { same = false }
        return (frames, same, true, low)
    }

    private func lumaPSNR(_ a: String, _ b: String) throws -> (Double, Double) {
        let x = try VideoFrameReader(path: a), y = try VideoFrameReader(path: b)
        var low = Double.infinity, sum = 0.0, n = 0
        while let p = try x.next() {
            guard let q = try y.next() else { throw ValidationError("'\(b)' has fewer frames than '\(a)'") }
            let v = ImageMetrics.psnr(p.frame.planes[0], q.frame.planes[0])
            low = min(low, v)
            sum += v.isFinite ? v : 99
            n += 1
        }
        return (low, sum / Double(max(n, 1)))
    }

    /// The demo clip with a keyframe every second (the committed one has a single keyframe).
    private func street(work: String) throws -> String {
        let clip = work + "/street-gop10.mp4"
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Samples/street.mp4").path
        let r = try ChildRun.run("ffmpeg", ["-nostdin", "-v", "error", "-y", "-i", source, "-c:v", "libx264", "-crf", "18",
                                            "-g", "10", "-c:a", "copy", clip])
        guard r.status == 0 else { throw ValidationError("re-encoding the street clip failed") }
        return clip
    }
}
