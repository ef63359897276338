import ArgumentParser
import Foundation
import Logging
import UpscaleCore
import UpscaleMedia

extension VideoCodec: ExpressibleByArgument {}
extension Kernel: ExpressibleByArgument {}

struct UpscaleCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "upscale",
        abstract: "Upscale videos with a SIMD Lanczos core and encode them as H.265.",
        discussion: """
            Without --width, --height or --scale the video is upscaled 2x. Giving only one side keeps \
            the displayed aspect ratio. The result is written beside the input as "<name> Upscaled.<ext>" \
            and an existing file is never replaced without --overwrite.
            """)

    @Argument(help: "Video files to upscale.")
    var inputs: [String]

    @Option(help: "Output width in pixels (displayed width); height follows the aspect ratio when not given.")
    var width: Int?

    @Option(help: "Output height in pixels; width follows the aspect ratio when not given.")
    var height: Int?

    @Option(help: "Scale factor for both sides (default 2 when no size is given).")
    var scale: Double?

    @Option(name: .shortAndLong, help: "Output file, or a folder (required to be a folder with several inputs).")
    var output: String?

    @Option(help: "Output codec: hevc (libx265, default; ProRes 422 beyond 8192x4320 unless named), h264, prores (422, .mov) or ffv1 (lossless, .mkv).")
    var codec: VideoCodec?

    @Option(help: "HEVC encoder: auto (a hardware encoder that opens, else libx265), libx265, hevc_nvenc, hevc_vaapi or hevc_qsv.")
    var encoder = "auto"

    @Option(help: "Constant rate factor for hevc (default 20) and h264 (default 18); lower is better and larger.")
    var crf: Int?

    @Option(help: "Encoder preset for hevc/h264, ultrafast … veryslow (default medium).")
    var preset: String?

    @Option(help: "Worker threads for the upscaler (default: all cores).")
    var threads: Int?

    @Option(help: "Resampling kernel: lanczos3 (default), lanczos2 or bicubic.")
    var kernel: Kernel = .lanczos3

    @Flag(inversion: .prefixedNo, help: ArgumentHelp(
        "Learned edge-directed refinement of luma after Lanczos (default on; exactly 2x, 3x or 4x).",
        discussion: "Cleaner, straighter edges: +0.31 dB PSNR over Lanczos at 2x on photos it was not trained on. Other sizes use plain Lanczos."))
    var refine: Bool?

    @Flag(help: "Deinterlace interlaced input (bwdif, one output picture per input picture) before upscaling.")
    var deinterlace = false

    @Flag(help: "Replace an existing output file.")
    var overwrite = false

    @Flag(name: .shortAndLong, help: "Print nothing but errors.")
    var quiet = false

    @Flag(help: "Also show FFmpeg's own warnings.")
    var verbose = false

    func validate() throws {
        if let width, !(OutputSize.minimum...OutputSize.maximum).contains(width) {
            throw ValidationError("--width must be between \(OutputSize.minimum) and \(OutputSize.maximum)")
        }
        if let height, !(OutputSize.minimum...OutputSize.maximum).contains(height) {
            throw ValidationError("--height must be between \(OutputSize.minimum) and \(OutputSize.maximum)")
        }
        if let scale, !(scale > 0 && scale <= 16) {
            throw ValidationError("--scale must be greater than 0 and at most 16")
        }
        if scale != nil && (width != nil || height != nil) {
            throw ValidationError("give either --scale or --width/--height, not both")
        }
        if encoder != "auto" && !EncoderSettings.hevcEncoders.contains(encoder) {
            throw ValidationError("--encoder must be auto, " + EncoderSettings.hevcEncoders.joined(separator: ", "))
        }
        if encoder != "auto" && codec != nil && codec != .hevc {
            throw ValidationError("--encoder chooses an HEVC encoder; it does not go with --codec \(codec!.rawValue)")
        }
        if let crf, !(0...51).contains(crf) {
            throw ValidationError("--crf must be between 0 and 51")
        }
        if let threads, !(1...256).contains(threads) {
            throw ValidationError("--threads must be between 1 and 256")
        }
    }

    func run() throws {
        MediaLibrary.configure(verbose: verbose)
        let console = ConsoleOutput(quiet: quiet)
        var logger = Logger(label: "upscale")
        logger.logLevel = quiet ? .error : .notice
        let options = UpscaleOptions(
            width: width, height: height, scale: scale, output: output,
            encoder: EncoderSettings(codec: codec ?? .hevc, crf: crf, preset: preset, threads: threads,
                                     hevcEncoder: encoder == "auto" ? nil : encoder),
            kernel: kernel, threads: threads, overwrite: overwrite,
            refine: refine ?? true, refineRequested: refine == true, codecChosen: codec != nil,
            deinterlace: deinterlace)
        let cancel = CancellationFlag()
        let trap = SignalTrap { cancel.cancel() }
        defer { withExtendedLifetime(trap) {} }

        var failed = 0
        for input in inputs {
            if cancel.isCancelled { break }
            do {
                let job = try JobPlanner.plan(input: input, options: options, multipleInputs: inputs.count > 1)
                job.notices.forEach { logger.notice("\($0)") }
                let display = ProgressDisplay(title: URL(fileURLWithPath: input).lastPathComponent, console: console)
                let summary: TranscodeSummary
                do {
                    summary = try Transcoder(job: job, logger: logger).run(cancel: cancel, progress: display.update)
                    display.finish(success: true)
                } catch {
                    display.finish(success: false)
                    throw error
                }
                console.line(summaryLine(summary, job: job))
            } catch let error as UpscaleError where error.kind == .cancelled {
                console.error(error.message)
                throw ExitCode(130)
            } catch let error as UpscaleError where error.kind == .usage {
                console.error(error.message)
                throw ExitCode(2)
            } catch {
                console.error("\(error)")
                failed += 1
            }
        }
        if cancel.isCancelled {
            console.error("cancelled; no output was written")
            throw ExitCode(130)
        }
        if failed > 0 { throw ExitCode(1) }
    }

    private func summaryLine(_ s: TranscodeSummary, job: Job) -> String {
        let fps = s.seconds > 0 ? Double(s.frames) / s.seconds : 0
        var audio = ""
        if s.audioCopied + s.audioTranscoded > 0 {
            audio = "; audio: \(s.audioCopied) copied" + (s.audioTranscoded > 0 ? ", \(s.audioTranscoded) re-encoded to AAC" : "")
        }
        let scaling = job.kernel.rawValue + (job.refine ? " + edge refinement" : "")
        return "Wrote \(s.output) (\(job.width)x\(job.height), \(scaling), \(job.encoder.codec.rawValue) via \(s.encoderName), "
            + "\(s.frames) frames in \(String(format: "%.1f", s.seconds)) s, \(String(format: "%.1f", fps)) fps\(audio))"
    }
}

/// Argument-parser's own usage errors exit 2, as the README documents; everything else keeps its code.
@main
enum Main {
    static func main() {
        LoggingSystem.bootstrap { label in NoticeLogHandler(label: label) }
        do {
            var command = try UpscaleCommand.parseAsRoot()
            try command.run()
        } catch {
            let code = UpscaleCommand.exitCode(for: error)
            let message = UpscaleCommand.fullMessage(for: error)
            if code == .validationFailure {
                FileHandle.standardError.write(Data((message + "\n").utf8))
                exit(2)
            }
            if !message.isEmpty {
                if code == .success {
                    print(message)
                } else {
                    FileHandle.standardError.write(Data((message + "\n").utf8))
                }
            }
            exit(code.rawValue)
        }
    }
}
