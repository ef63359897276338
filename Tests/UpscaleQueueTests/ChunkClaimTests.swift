import Foundation
@testable import UpscaleQueue
import XCTest

/// Where a new chunk pipeline starts: a pipeline goes on into the chunks after its own while
/// they are queued, so another one starts where none will get to, or halfway along the
/// stretch a running one is going through.
final class ChunkClaimTests: XCTestCase {
    func testANewPipelineStartsWhereNoRunningOneGoesOn() {
        // One worker, a fresh run and a resume with chunks 3 and 4 done.
        XCTAssertEqual(ChunkLedger.start(queued: Array(0..<10), running: []), 0)
        XCTAssertEqual(ChunkLedger.start(queued: [0, 1, 2, 5, 6], running: []), 0)
        // A pipeline on chunk 0 goes on into 1-9: a second one takes the second half.
        XCTAssertEqual(ChunkLedger.start(queued: Array(1..<10), running: [0]), 5)
        // Chunks 5-9 nobody goes on into (4 is done): they come first.
        XCTAssertEqual(ChunkLedger.start(queued: [1, 2, 5, 6, 7, 8, 9], running: [0]), 5)
        // Both stretches have a pipeline going into them: the longer one is shared.
        XCTAssertEqual(ChunkLedger.start(queued: [1, 2, 6, 7, 8, 9], running: [0, 5]), 8)
        // A last single chunk that a pipeline is about to reach; nothing queued.
        XCTAssertEqual(ChunkLedger.start(queued: [9], running: [8]), 9)
        XCTAssertNil(ChunkLedger.start(queued: [], running: [3]))
    }
}
