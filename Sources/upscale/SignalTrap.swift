import Dispatch
import Foundation

/// Turns SIGINT and SIGTERM into a cancel request, so a running job can remove its
/// temporary file and exit instead of dying mid-write. A second signal exits at once.
final class SignalTrap {
    private var sources: [DispatchSourceSignal] = []

    init(onSignal: @escaping () -> Void) {
        var seen = 0
        let queue = DispatchQueue(label: "upscale.signals")
        for sig in [SIGINT, SIGTERM] {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: queue)
            source.setEventHandler {
                seen += 1
                if seen > 1 { _exit(130) }
                onSignal()
            }
            source.resume()
            sources.append(source)
        }
    }

    deinit { sources.forEach { $0.cancel() } }
}
