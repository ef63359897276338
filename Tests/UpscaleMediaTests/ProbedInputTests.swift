@testable import UpscaleMedia
import Foundation
import XCTest

/// A job's input is opened and probed once: the plan keeps the probed file for the transcoder.
final class ProbedInputTests: XCTestCase {
    func testThePlansProbedFileIsHandedOnceToItsTranscoder() throws {
        let dir = try workspace(copying: ["street-2s.mp4"])
        let input = dir.appendingPathComponent("street-2s.mp4").path
        _ = try JobPlanner.plan(input: input, options: UpscaleOptions(), keepProbe: true)
        let kept = try XCTUnwrap(InputFile.takeProbed(path: input), "the plan keeps its probed file")
        XCTAssertEqual(kept.path, input)
        XCTAssertGreaterThan(kept.streamCount, 0)
        XCTAssertNil(InputFile.takeProbed(path: input), "taken once")
        // Another file's transcoder does not get it.
        _ = try JobPlanner.plan(input: input, options: UpscaleOptions(), keepProbe: true)
        XCTAssertNil(InputFile.takeProbed(path: input + ".other"))
        XCTAssertNil(InputFile.takeProbed(path: input), "a mismatched take empties the slot")
        // A caller that only plans keeps nothing open.
        _ = try JobPlanner.plan(input: input, options: UpscaleOptions())
        XCTAssertNil(InputFile.takeProbed(path: input), "plan-only callers keep no file")
    }

    func testAFileChangedSinceItsPlanIsOpenedAfresh() throws {
        let dir = try workspace(copying: ["street-2s.mp4"])
        let input = dir.appendingPathComponent("street-2s.mp4").path
        _ = try JobPlanner.plan(input: input, options: UpscaleOptions(), keepProbe: true)
        // Appending changes size and modification time: the kept probe may describe other bytes.
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: input))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(repeating: 0, count: 16))
        try handle.close()
        XCTAssertNil(InputFile.takeProbed(path: input))
    }

    func testTranscodingAfterThePlanUsesTheKeptFileAndEncodesEveryFrame() throws {
        let dir = try workspace(copying: ["street-2s.mp4"])
        let input = dir.appendingPathComponent("street-2s.mp4").path
        let before = InputFile.opens
        let job = try JobPlanner.plan(input: input, options: UpscaleOptions(width: 384), keepProbe: true)
        _ = try Transcoder(job: job).run()
        XCTAssertEqual(InputFile.opens - before, 1, "planned and transcoded with one open and probe")
        // Every picture of the input, at the same times, read through the kept file.
        XCTAssertEqual(try Measure.videoSeconds(job.output), try Measure.videoSeconds(input))
    }
}
