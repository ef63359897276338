import Dispatch
import Foundation

/// Turns SIGINT and SIGTERM into a cancel request, so a running job can remove its
/// temporary file and exit instead of dying mid-write. A second signal exits at once (after
/// `onRepeat`, which stops what must not outlive the exit), unless `repeatable`: a job's child process may get SIGTERM several times from the
/// kernel when its parent dies (once for each of the parent's threads it is handed to), and
/// each one only asks it again to stop cleanly.
final class SignalTrap {
    private var sources: [DispatchSourceSignal] = []

    init(repeatable: Bool = false, onRepeat: (() -> Void)? = nil, onSignal: @escaping () -> Void) {
        var seen = 0
        let queue = DispatchQueue(label: "upscale.signals")
        for sig in [SIGINT, SIGTERM] {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: queue)
            source.setEventHandler {
                seen += 1
                if seen > 1 && !repeatable {
                    onRepeat?()
                    _exit(130)
                }
                onSignal()
            }
            source.resume()
            sources.append(source)
        }
    }

    deinit { sources.forEach { $0.cancel() } }
}
