import Foundation
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
}
