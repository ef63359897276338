import Foundation
import UpscaleCore
@testable import UpscaleMedia
import XCTest

/// The output pool of a job whose encoder copies on entry holds one picture: the scaler waits
/// for the encoder to give it back, and nothing (a kept picture, a stopped job) leaves it waiting.
final class PicturePoolTests: XCTestCase {
    private func base(_ picture: Picture?) -> UnsafeMutablePointer<UInt8>? {
        if case .eight(let frame) = picture { return frame.planes[0].base }
        return nil
    }

    /// Takes from `pool` on another thread; the result arrives through the returned wait.
    private func takeElsewhere(_ pool: PicturePool) -> (DispatchSemaphore, () -> Picture?) {
        let done = DispatchSemaphore(value: 0)
        let box = NSLock()
        nonisolated(unsafe) var taken: Picture?
        Thread.detachNewThread {
            let picture = pool.take()
            box.lock()
            taken = picture
            box.unlock()
            done.signal()
        }
        return (done, { box.lock(); defer { box.unlock() }; return taken })
    }

    func testALimitedPoolWaitsForTheGivenBackPictureAndReusesIt() throws {
        let pool = PicturePool(width: 64, height: 32, highBitDepth: false, limit: 1)
        let first = try XCTUnwrap(pool.take())
        let (done, taken) = takeElsewhere(pool)
        XCTAssertEqual(done.wait(timeout: .now() + 0.3), .timedOut, "a second picture was made past the limit")
        XCTAssertEqual(pool.givenBack, 0)
        pool.give(first)
        XCTAssertEqual(done.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(pool.givenBack, 1)
        XCTAssertEqual(base(taken()), base(first), "the waiting take got another picture than the one given back")
    }

    func testLiftingTheLimitOrCancellingEndsTheWait() throws {
        let pool = PicturePool(width: 64, height: 32, highBitDepth: false, limit: 1)
        let held = try XCTUnwrap(pool.take())
        var (done, taken) = takeElsewhere(pool)
        XCTAssertEqual(done.wait(timeout: .now() + 0.3), .timedOut)
        pool.lift()
        XCTAssertEqual(done.wait(timeout: .now() + 10), .success)
        XCTAssertNotNil(base(taken()))
        XCTAssertNotEqual(base(taken()), base(held), "the lifted pool handed out the picture still held")

        let stopped = PicturePool(width: 64, height: 32, highBitDepth: false, limit: 1)
        _ = try XCTUnwrap(stopped.take())
        (done, taken) = takeElsewhere(stopped)
        XCTAssertEqual(done.wait(timeout: .now() + 0.3), .timedOut)
        stopped.cancel()
        XCTAssertEqual(done.wait(timeout: .now() + 10), .success)
        XCTAssertNil(base(taken()), "a cancelled pool gave a picture")
    }

    /// Without a limit (encoders that keep pictures, or work inside the call) nothing waits.
    func testAnUnlimitedPoolMakesAPictureWheneverNoneIsFree() throws {
        let pool = PicturePool(width: 64, height: 32, highBitDepth: false)
        let pictures = (0..<3).compactMap { _ in pool.take() }
        XCTAssertEqual(Set(pictures.compactMap(base)).count, 3)
    }
}
