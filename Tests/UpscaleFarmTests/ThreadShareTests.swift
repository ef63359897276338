import UpscaleFarm
import UpscaleMedia
import XCTest

/// A farm task's threads: its share of the worker machine, capped by the job's own
/// `submit --threads` (stored with the job, and ignored by every worker before).
final class ThreadShareTests: XCTestCase {
    private func job(threads: Int?) throws -> Job {
        try JobPlanner.plan(input: WorkerTests.fixture.path,
                            options: UpscaleOptions(encoder: EncoderSettings(threads: threads), threads: threads))
    }

    func testATaskTakesItsShareOfTheMachineAndNoMoreThanTheJobWasSubmittedWith() throws {
        // Submitted without --threads, planned on a 16-core worker.
        var open = try job(threads: nil)
        open.threads = 16
        var one = open
        FarmWorker.shareThreads(of: &one, threads: 16, slots: 1)
        XCTAssertEqual(one.threads, 16)
        XCTAssertNil(one.encoder.threads, "x265 sizes its own pool when the task has the machine")
        var four = open
        FarmWorker.shareThreads(of: &four, threads: 16, slots: 4)
        XCTAssertEqual([four.threads, four.encoder.threads], [4, 4])

        // Submitted with --threads 3.
        let capped = try job(threads: 3)
        XCTAssertEqual([capped.threads, capped.encoder.threads], [3, 3])
        var wide = capped
        FarmWorker.shareThreads(of: &wide, threads: 16, slots: 1)
        XCTAssertEqual([wide.threads, wide.encoder.threads], [3, 3])
        var shared = capped
        FarmWorker.shareThreads(of: &shared, threads: 16, slots: 4)
        XCTAssertEqual([shared.threads, shared.encoder.threads], [3, 3])
        var small = capped
        FarmWorker.shareThreads(of: &small, threads: 4, slots: 2)
        XCTAssertEqual([small.threads, small.encoder.threads], [2, 2])
    }
}
