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
    /// (`JobLock.waitForAll`), and the output that watcher finishes the job from. A planned
    /// name taken meanwhile by another job's output (`--unique-name`), or one the child was
    /// about to try, held that job's file, which was taken as this job's output and its original
    /// moved to Originals/, never upscaled. So: the file being placed only if that very file is
    /// there, and once placed the output by name (an identity may not survive a reboot).
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

        // Killed while it encoded: the planned name is another job's file.
        let planned = try leftBehind { JobLock.record(output: taken, in: $0) }
        XCTAssertEqual(planned, JobLock.Recorded(output: taken, stage: .planned))
        XCTAssertNil(planned?.placed)
        // Killed after saying it would place its file at the taken name: not that file.
        let atTaken = try XCTUnwrap(PlacedFile(temporary: temporary, target: taken))
        let first = try leftBehind { JobLock.record(placing: atTaken, for: taken, in: $0) }
        XCTAssertEqual(first, JobLock.Recorded(output: taken, stage: .placing(atTaken)))
        XCTAssertNil(first?.placed)
        // Killed right after the rename to the free name: its own file, by its identity.
        let atFree = try XCTUnwrap(PlacedFile(temporary: temporary, target: free))
        XCTAssertEqual(rename(temporary, free), 0)
        XCTAssertEqual(try leftBehind { JobLock.record(placing: atFree, for: taken, in: $0) }?.placed, free)
        // As the child's reporter records it: planned, placing, placed, and the name it got said
        // again (it was not the planned one): placed, by name.
        let devNull = open("/dev/null", O_WRONLY)
        defer { close(devNull) }
        let reported = try leftBehind { fd in
            let reporter = JobReporter(descriptor: devNull, jobLock: fd)
            reporter.send(JobReport.output(path: taken, width: 2, height: 2).line)
            reporter.send(JobReport.placing(atFree).line)
            reporter.placed(free)
            reporter.send(JobReport.output(path: free, width: 2, height: 2).line)
        }
        XCTAssertEqual(reported, JobLock.Recorded(output: free, stage: .placed))
        XCTAssertEqual(reported?.placed, free)
        // An earlier version's file, the output alone: it counts where a file is.
        func legacy(_ path: String) -> (Int32) -> Void {
            { fd in _ = (path + "\n").withCString { pwrite(fd, $0, strlen($0), 0) } }
        }
        XCTAssertEqual(try leftBehind(legacy(free)), JobLock.Recorded(output: free))
        XCTAssertEqual(try leftBehind(legacy(free))?.placed, free)
        XCTAssertNil(try leftBehind(legacy(root + "/Upscaled/b Upscaled.mp4"))?.placed)
    }
}
