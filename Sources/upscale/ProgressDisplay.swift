import ConsoleKitTerminal
import Foundation
import UpscaleMedia

/// A bar that shows the fraction done, frames per second and time left.
struct FrameProgressBar: ActivityBar {
    var title: String
    var fraction: Double = 0
    var detail: String = "starting…"

    func renderActiveBar(tick: UInt, width: Int) -> ConsoleText {
        let done = Int((min(max(fraction, 0), 1) * Double(width)).rounded(.down))
        let bar = "[" + String(repeating: "=", count: done) + String(repeating: " ", count: width - done) + "]"
        return bar.consoleText(.info) + " \(detail)".consoleText(.plain)
    }
}

/// Progress for one job: ConsoleKit's animated bar on a terminal, a plain line on stderr
/// every few seconds otherwise, nothing with --quiet. The first plain line comes after the
/// same few seconds: one at the first frame gave an fps and ETA of the decoder's start-up
/// (measured: "6.9 fps, ETA 0:39" for a job that ran at 91 fps and took 3 s), and went to
/// stdout with the results (`upscale … > list.txt` caught every progress line).
final class ProgressDisplay {
    private let console: ConsoleOutput
    private let indicator: ActivityIndicator<FrameProgressBar>?
    private let title: String
    private var lastPlainLine = Date()
    /// Seconds between plain lines (tests set UPSCALE_PROGRESS_SECONDS).
    private static let interval = ProcessInfo.processInfo.environment["UPSCALE_PROGRESS_SECONDS"].flatMap(Double.init) ?? 5
    private let lock = NSLock()

    init(title: String, console: ConsoleOutput) {
        self.console = console
        self.title = title
        if !console.quiet && console.isTerminal {
            let terminal = Terminal()
            indicator = FrameProgressBar(title: title).newActivity(for: terminal)
            indicator?.start(refreshRate: 100)
        } else {
            indicator = nil
        }
    }

    static func describe(_ p: TranscodeProgress) -> (fraction: Double, text: String) {
        let fps = p.elapsed > 0 ? Double(p.framesDone) / p.elapsed : 0
        guard let total = p.framesTotal, total > 0 else {
            return (0, "frame \(p.framesDone), \(String(format: "%.1f", fps)) fps")
        }
        let fraction = min(1, Double(p.framesDone) / Double(total))
        var eta = "--:--"
        if fps > 0 {
            let left = Int((Double(max(0, total - p.framesDone)) / fps).rounded())
            eta = left >= 3600 ? String(format: "%d:%02d:%02d", left / 3600, left / 60 % 60, left % 60)
                : String(format: "%d:%02d", left / 60, left % 60)
        }
        return (fraction, "\(Int(fraction * 100))% \(p.framesDone)/\(total) frames, \(String(format: "%.1f", fps)) fps, ETA \(eta)")
    }

    func update(_ p: TranscodeProgress) {
        guard !console.quiet else { return }
        let (fraction, text) = Self.describe(p)
        if let indicator {
            indicator.activity.fraction = fraction
            indicator.activity.detail = text
            return
        }
        lock.lock()
        defer { lock.unlock() }
        if Date().timeIntervalSince(lastPlainLine) >= Self.interval {
            lastPlainLine = Date()
            writeStandardError("\(title): \(text)\n")
        }
    }

    func finish(success: Bool) {
        guard let indicator else { return }
        if success { indicator.succeed() } else { indicator.fail() }
    }
}
