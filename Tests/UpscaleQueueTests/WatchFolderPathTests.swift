import Foundation
import UpscaleMedia
@testable import UpscaleQueue
import XCTest

/// Paths inside a watch folder as its store names them, and back.
final class WatchFolderPathTests: XCTestCase {
    func testRelativeUndoesPathAndRefusesPathsOutsideTheFolder() {
        let folder = WatchFolder(root: "/srv/inbox")
        for name in ["a.mov", "trip/b.mov", "Upscaled/trip/b Upscaled.mov", "Failed/c.mkv.error.txt"] {
            XCTAssertEqual(folder.relative(folder.path(name)), name)
        }
        // A sibling whose name begins as the folder's does, the folder itself, and its parent.
        XCTAssertNil(folder.relative("/srv/inbox2/a.mov"))
        XCTAssertNil(folder.relative("/srv/inbox"))
        XCTAssertNil(folder.relative("/srv/a.mov"))
        // `queue retry` by a full path into the folder, or by a name already relative.
        XCTAssertEqual(QueueActions.relative("/srv/inbox/./trip/../a.mov", in: folder), "a.mov")
        XCTAssertEqual(QueueActions.relative("trip/b.mov", in: folder), "trip/b.mov")
    }

    /// What a killed watcher's child wrote in its lock file, read back by the next watcher
    /// (`JobLock.waitForAll`), and the output that watcher finishes the job from: the file the
    /// child said it was placing only if that very file is there. Killed after trying a name
    /// found taken (`--unique-name`: another job's output) and before the next, the name holds
    /// another job's file, which was taken as this job's output and its original moved to
    /// Originals/. A path alone (recorded once placed) counts if a file is there.
    func testTheOutputALockFileNamesIsTheFileItSaysWasPlaced() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("upscale-lock-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let folder = WatchFolder(root: root)
        try FileManager.default.createDirectory(atPath: root + "/Upscaled", withIntermediateDirectories: true)
        let taken = root + "/Upscaled/a Upscaled.mp4", free = root + "/Upscaled/a Upscaled 2.mp4"
        let temporary = root + "/Upscaled/.a Upscaled.mp4.host.7.partial"
        XCTAssertTrue(FileManager.default.createFile(atPath: taken, contents: Data("another job's output".utf8)))
        XCTAssertTrue(FileManager.default.createFile(atPath: temporary, contents: Data("this job's output".utf8)))

        func leftBehind(_ write: (Int32) -> Void) throws -> JobLock.Recorded? {
            let lock = try JobLock.take(folder: folder, id: 7)
            write(lock.fd)
            lock.leave()
            let left = try XCTUnwrap(JobLock.waitForAll(folder: folder, grace: 5, stop: CancellationFlag(), say: { _ in }))
            left.removeFiles()
            return try XCTUnwrap(left.outputs[7])
        }

        // Killed after saying it would place its file at the taken name: not that file.
        let atTaken = try XCTUnwrap(PlacedFile(temporary: temporary, target: taken))
        let first = try leftBehind { JobLock.record(placing: atTaken, for: taken, in: $0) }
        XCTAssertEqual(first, JobLock.Recorded(output: taken, placing: atTaken))
        XCTAssertNil(first?.placed)
        // Killed right after the rename to the free name: its own file, by its identity.
        let atFree = try XCTUnwrap(PlacedFile(temporary: temporary, target: free))
        XCTAssertEqual(rename(temporary, free), 0)
        XCTAssertEqual(try leftBehind { JobLock.record(placing: atFree, for: taken, in: $0) }?.placed, free)
        // Once placed it names the output alone, which counts where a file is.
        XCTAssertEqual(try leftBehind { JobLock.record(output: free, in: $0) }?.placed, free)
        XCTAssertNil(try leftBehind { JobLock.record(output: root + "/Upscaled/b Upscaled.mp4", in: $0) }?.placed)
    }
}
