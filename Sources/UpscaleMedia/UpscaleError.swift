import CFFmpeg
import Foundation

/// A failure the user can act on: one line saying what happened, to which file,
/// and what to do. Nothing in this module throws anything else to the CLI.
public struct UpscaleError: Error, CustomStringConvertible, Equatable {
    public enum Kind: Sendable, Equatable {
        case usage
        case input
        case output
        case processing
        case cancelled
    }

    public let kind: Kind
    public let message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }

    /// The words of the error for an MP4/QuickTime file without its index (`ContainerLength.lacksIndex`),
    /// which the CLI and the watch folder look for.
    public static let missingIndex = "has no index (no moov box)"

    public static func cancelled() -> UpscaleError { UpscaleError(.cancelled, "cancelled; no output was written") }
}

/// FFmpeg's text for an error code.
func ffmpegErrorText(_ code: Int32) -> String {
    var buffer = [CChar](repeating: 0, count: 256)
    upscale_strerror(code, &buffer, buffer.count)
    return String(cString: buffer)
}

let averrorEOF = upscale_averror_eof()
let averrorEAGAIN = upscale_averror(EAGAIN)
let averrorInvalidData = upscale_averror_invaliddata()
let noPTS = upscale_nopts()

/// Throws a processing error naming `what` when an FFmpeg call returned a negative code.
@discardableResult
func check(_ code: Int32, _ what: @autoclosure () -> String, kind: UpscaleError.Kind = .processing) throws -> Int32 {
    if code < 0 { throw UpscaleError(kind, "\(what()): \(ffmpegErrorText(code))") }
    return code
}

extension stat {
    /// The modification time in seconds since 1970, to the nanosecond the file system keeps.
    public var modificationTime: Double { Double(st_mtim.tv_sec) + Double(st_mtim.tv_nsec) / 1e9 }

    /// Whether this is the same file as `other` and unchanged since: device, inode, size and
    /// modification time to the nanosecond.
    public func isSameVersion(of other: stat) -> Bool {
        st_dev == other.st_dev && st_ino == other.st_ino && st_size == other.st_size
            && st_mtim.tv_sec == other.st_mtim.tv_sec && st_mtim.tv_nsec == other.st_mtim.tv_nsec
    }
}

/// Why a file operation failed, in the system's words ("Read-only file system", "Permission
/// denied"): Foundation's errors printed whole were a dump of their domain, code and user info.
public func fileErrorReason(_ error: Error) -> String {
    let ns = error as NSError
    if ns.domain == NSPOSIXErrorDomain { return String(cString: strerror(Int32(ns.code))) }
    if let inner = ns.userInfo[NSUnderlyingErrorKey] as? Error {
        let underlying = inner as NSError
        if underlying.domain == NSPOSIXErrorDomain { return String(cString: strerror(Int32(underlying.code))) }
    }
    return ns.localizedDescription
}
