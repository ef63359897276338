import ArgumentParser
import Foundation
import Logging
import UpscaleMedia
import UpscaleImages
import UpscaleQueue

extension UpscaleCommand {
    /// One still image in the child: size, name, upscale through the core, save through
    /// libvips to a hidden temporary file, rename into place. Errors go to `runChild`.
    func runStill(input: String, reporter: JobReporter, logger: Logger, cancel: CancellationFlag) throws {
        let start = Date()
        let still = try StillImage(path: input)
        still.notices.forEach { logger.notice("\($0)") }
        let size = try StillSize.resolve(width: still.width, height: still.height,
                                         to: (encode.width, encode.height), scale: encode.scale, path: input)
        let output = try stillOutputPath(input: input, logger: logger)
        if !encode.strip, let note = still.metadataNote(forExtension: URL(fileURLWithPath: output).pathExtension) { logger.notice("\(note)") }
        if !encode.strip, let note = still.pngTextNote(forExtension: URL(fileURLWithPath: output).pathExtension) { logger.notice("\(note)") }
        let outputExt = URL(fileURLWithPath: output).pathExtension.lowercased()
        if encode.quality != nil && !StillImage.takesQuality(extension: outputExt) {
            logger.notice("--quality is for lossy formats (jpg, webp, avif, heic, jxl, jp2); .\(outputExt) is saved losslessly, so it is not used")
        }
        if still.hasAlpha && !StillImage.keepsAlpha(extension: URL(fileURLWithPath: output).pathExtension) {
            logger.notice("'\(input)' has transparency and JPEG has none: it is flattened onto white (use --format png or webp to keep it)")
        }
        try StillSize.check(size, extension: URL(fileURLWithPath: output).pathExtension, path: input)
        if childPlanOnly {
            reportPlan(reporter, output: output, width: size.width, height: size.height, frames: 1)
            return
        }
        // The raw strips wait on disk beside the output until libvips has saved it: a folder
        // without room for them failed at the first strip that did not fit, naming a hidden file.
        let folder = URL(fileURLWithPath: output).deletingLastPathComponent().path
        let needed = still.stripFileBytes(for: size)
        if let free = freeBytes(folder), free < needed {
            let text = "'\(folder)' has \(megabytes(free)) free; upscaling '\(input)' to \(size.width)x\(size.height) needs \(megabytes(needed)) there for its working file, and room for the saved image"
            if waitForSpace {
                // The watch folder waits and tries again, as for a video.
                reporter.send(JobReport.error(kind: "space", text: text).line)
                throw ExitCode(JobProcess.noSpaceStatus)
            }
            throw ImagePlanes.ImageError(message: text + "; free some space or choose another --output folder")
        }
        reporter.send(JobReport.output(path: output, width: size.width, height: size.height).line)
        let threads = encode.threads ?? ProcessInfo.processInfo.activeProcessorCount
        // What killed jobs left in this folder (a still's strip file can be gigabytes): only
        // videos' outputs cleaned up before, so a folder of stills kept them for good.
        PartialFile.removeStale(in: URL(fileURLWithPath: output).deletingLastPathComponent().path)
        let partial = PartialFile.temporaryPath(for: output, pid: getpid()) + "." + URL(fileURLWithPath: output).pathExtension
        var renamed = false
        defer { if !renamed { unlink(partial) } }
        let stripBytes = ProcessInfo.processInfo.environment["UPSCALE_STILL_STRIP_BYTES"].flatMap { Int($0) } ?? 64 << 20
        // Cancelled (Ctrl-C, SIGTERM): stop between strips, and never put a file in place after it.
        // libvips' AVIF, HEIC and JPEG XL savers then encode for tens of seconds without looking
        // up: a cancel that has not ended the work half a second later removes this job's files
        // and leaves at once (this process runs this one job).
        let working = WorkFlag()
        Thread.detachNewThread {
            while working.isOn {
                if cancel.isCancelled {
                    usleep(500_000)
                    guard working.isOn else { return }
                    unlink(StillImage.stripFile(for: partial))
                    unlink(partial)
                    _exit(130)
                }
                usleep(50_000)
            }
        }
        let made: Bool?
        do {
            defer { working.off() }
            made = try still.upscale(to: size, kernel: encode.kernel, refine: encode.refine ?? true, threads: threads,
                                     saveTo: partial, quality: encode.quality, strip: encode.strip, stripBytes: stripBytes,
                                     cancelled: { cancel.isCancelled })
        } catch let error as ImagePlanes.ImageError {
            // Named as the user knows it, not by its hidden temporary name.
            throw ImagePlanes.ImageError(message: error.message.replacingOccurrences(of: partial, with: output))
        }
        guard let refined = made, !cancel.isCancelled else { throw UpscaleError.cancelled() }
        if let damage = still.damage {
            logger.notice("'\(input)' is damaged (\(damage)); the decoder filled in what it could, so the picture may be wrong there — check the result, or export the image again")
        }
        if encode.refine == true && !refined {
            logger.notice("refinement is trained for exactly 2x, 3x and 4x; this image uses plain Lanczos")
        }
        let placed: String
        do {
            placed = try FolderWrites.place(partial, at: output, overwrite: overwrite, freeName: uniqueName && !overwrite)
        } catch let error as UpscaleError {
            throw ImagePlanes.ImageError(message: error.message)
        }
        renamed = true
        if placed != output { reporter.send(JobReport.output(path: placed, width: size.width, height: size.height).line) }
        let seconds = Date().timeIntervalSince(start)
        reporter.send(JobReport.progress(done: 1, total: 1, elapsed: seconds).line)
        let scaling = encode.kernel.rawValue + (refined ? " + edge refinement" : "")
        reporter.send(JobReport.summary(frames: 1, text: "Wrote \(placed) (\(size.width)x\(size.height), \(scaling), \(String(format: "%.1f", seconds)) s)").line)
    }

    /// Whether the still's work is still going, for the thread that watches for a cancel.
    private final class WorkFlag: @unchecked Sendable {
        private let lock = NSLock()
        private var on = true
        var isOn: Bool { lock.withLock { on } }
        func off() { lock.withLock { on = false } }
    }

    /// A still's output extension when it gets the default name: --format's, else the
    /// input's format; with `pngFallback`, PNG for a format libvips reads but cannot write
    /// (BMP, TGA) unless --format named it.
    func stillExtension(input: String, pngFallback: Bool = true) -> String {
        let inputExt = URL(fileURLWithPath: input).pathExtension.lowercased()
        let ext = encode.format.flatMap { StillImage.formats[$0.lowercased()] } ?? StillImage.formats[inputExt]
            ?? StillImage.contentExtension(input) ?? inputExt
        return pngFallback && encode.format == nil && !StillImage.canSave(extension: ext) ? "png" : ext
    }

    /// `<name> Upscaled.<ext>`. A name whose extension names no format keeps it whole:
    /// "IMG_1.JPG_original" and "IMG_1.JPG" of one batch would both make "IMG_1 Upscaled.jpg".
    func stillOutputName(for input: String, extension ext: String) -> String {
        StillImage.contentExtension(input) != nil ? "\(URL(fileURLWithPath: input).lastPathComponent) Upscaled.\(ext)"
                                                  : JobPlanner.outputName(for: input, extension: ext)
    }

    /// `<name> Upscaled.<ext>` beside the input or in --output, in the input's format or --format's.
    private func stillOutputPath(input: String, logger: Logger) throws -> String {
        let inputURL = URL(fileURLWithPath: input)
        let named = stillExtension(input: input, pngFallback: false)
        var ext = named
        // A file named by --output has its own extension; only a name made here takes the input's.
        // (An SVG given "-o logo.png" was refused: "cannot write .svg files".)
        if self.output.map({ JobPlanner.isDirectory($0) || childBatch || $0.hasSuffix("/") }) ?? true {
            ext = stillExtension(input: input)
            if ext != named {
                logger.notice(named.isEmpty ? "'\(input)' has no extension that names its format; it is saved as .png (or choose --format)"
                                            : "this libvips cannot write .\(named) files; '\(input)' is saved as .png (or choose --format)")
            }
            guard StillImage.canSave(extension: ext) else {
                throw UpscaleError(.usage, "this libvips cannot write .\(ext) files; choose another --format (jpg, png, webp, tiff)")
            }
        }
        var output: String
        if let given = self.output, !(JobPlanner.isDirectory(given) || childBatch || given.hasSuffix("/")) {
            // libvips picks the saver by the name's extension.
            let givenExt = URL(fileURLWithPath: given).pathExtension.lowercased(), usual = ".jpg, .png, .webp or .tif"
            guard !givenExt.isEmpty else {
                throw UpscaleError(.usage, "'\(given)' is not a folder and its name has no extension; give an existing folder, or a file name ending in \(usual)")
            }
            guard StillImage.canSave(extension: givenExt) else {
                throw UpscaleError(.usage, "'\(given)': this libvips cannot write .\(givenExt) files; name the output \(usual)")
            }
            // The name's extension picks the saver: a --format that says otherwise would be ignored.
            if let format = encode.format, let wanted = StillImage.formats[format.lowercased()],
               StillImage.formats[givenExt] != wanted {
                throw UpscaleError(.usage, "--format \(format) and --output '\(given)' disagree; name the output .\(wanted), or drop --format")
            }
            output = given
        } else {
            let folder = self.output ?? inputURL.deletingLastPathComponent().path
            let name = stillOutputName(for: input, extension: ext)
            output = URL(fileURLWithPath: folder)
                .appendingPathComponent(uniqueName && !overwrite ? FolderWrites.freeName(name, in: folder) : name).path
        }
        try JobPlanner.checkOutput(output, input: input, taken: childTaken, otherInputs: childOtherInput, overwrite: overwrite)
        return output
    }
}
