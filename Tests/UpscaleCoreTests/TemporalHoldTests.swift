@testable import UpscaleCore
import XCTest

final class TemporalHoldTests: XCTestCase {
    /// Deterministic pseudo-random numbers (64-bit LCG, high bits).
    private struct Noise {
        var state: UInt64
        mutating func next(_ range: ClosedRange<Int>) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return range.lowerBound + Int((state >> 33) % UInt64(range.count))
        }
    }

    private func gray(_ plane: Plane) -> Frame { Frame(width: plane.width, height: plane.height, layout: .gray, planes: [plane]) }

    private func scaler(_ plane: Plane, refined: Bool, hold: TemporalHold? = nil, threads: Int = 2) -> FrameScaler {
        FrameScaler(input: (plane.width, plane.height), output: (2 * plane.width, 2 * plane.height), layout: .gray,
                    threads: threads, refiner: refined ? .x2 : nil, hold: hold)
    }

    /// The integer form for whole levels a power of two apart gives the Float form's values
    /// (what every level used before) for every pair of 8-bit samples: the 65536 pairs (held,
    /// frame) in one row, held by `update` and by the Float form's row loop.
    func testWholeLevelsInIntegersMatchTheFloatFormForEveryPair() {
        for (lo, hi) in [(2, 6), (0, 2), (3, 11), (1, 65), (200, 232)] as [(Float, Float)] {
            let hold = TemporalHold(stillness: (lo, hi))
            XCTAssertNotNil(hold.wholeLevels, "\(lo) \(hi)")
            let count = 256 * 256
            let before = (0..<count).map { UInt8($0 >> 8) }, frame = (0..<count).map { UInt8($0 & 255) }
            let held = Plane(width: count, height: 1, samples: before), floatForm = Plane(width: count, height: 1, samples: before)
            hold.update(held, toward: Plane(width: count, height: 1, samples: frame), rows: 0..<1)
            frame.withUnsafeBufferPointer {
                TemporalHold.updateRow(floatForm.row(0), toward: $0.baseAddress!, count: count, lo: lo, slope: 1 / (hi - lo))
            }
            XCTAssertEqual(zip(held.samples, floatForm.samples).filter { $0 != $1 }.count, 0, "stillness \(lo) \(hi)")
            XCTAssertNotEqual(held.samples, before, "stillness \(lo) \(hi): nothing moved")
        }
        XCTAssertNil(TemporalHold(stillness: (2, 5)).wholeLevels)
        XCTAssertNil(TemporalHold(stillness: (2.5, 6.5)).wholeLevels)
        XCTAssertNil(TemporalHold(stillness: (2, 3)).wholeLevels)
        XCTAssertNil(TemporalHold(stillness: (2, 130)).wholeLevels)
        XCTAssertNil(TemporalHold(stillness: (2, .infinity)).wholeLevels)
    }

    func testHeldSamplesLagTheFrameByAtMostTheHoldLevel() {
        var noise = Noise(state: 7)
        for depth in [8, 10] {
            let unit = 1 << (depth - 8)
            let hold = TemporalHold(stillness: (2, 6))
            let width = 83, height = 5
            let current = (0..<(width * height)).map { _ in noise.next(20...(235 * unit)) }
            let before = current.map { $0 + noise.next(-9 * unit...9 * unit) }
            let after: [Int]
            if depth == 8 {
                let held = Plane(width: width, height: height, samples: before.map { UInt8($0) })
                hold.update(held, toward: Plane(width: width, height: height, samples: current.map { UInt8($0) }), rows: 0..<height)
                after = held.samples.map(Int.init)
            } else {
                let held = Plane16(width: width, height: height, bitDepth: depth, samples: before.map { UInt16($0) })
                hold.update(held, toward: Plane16(width: width, height: height, bitDepth: depth, samples: current.map { UInt16($0) }),
                            rows: 0..<height)
                after = held.samples.map(Int.init)
            }
            var held = 0, replaced = 0
            for i in current.indices {
                let d = abs(current[i] - before[i])
                // Rounding to whole codes may add half a code to the lag.
                XCTAssertLessThanOrEqual(Double(abs(after[i] - current[i])), 2.5 * Double(unit), "\(depth)-bit sample \(i)")
                if d <= 2 * unit {
                    XCTAssertEqual(after[i], before[i], "\(depth)-bit: within the hold level the held value stays")
                    held += 1
                }
                if d >= 6 * unit {
                    XCTAssertEqual(after[i], current[i], "\(depth)-bit: from the replace level the frame's value is taken")
                    replaced += 1
                }
                // Between the two levels the lag shrinks as the difference grows.
                if d > 2 * unit, d < 6 * unit {
                    XCTAssertLessThanOrEqual(abs(after[i] - current[i]), 2 * unit + 1)
                }
            }
            XCTAssertGreaterThan(held, 20)
            XCTAssertGreaterThan(replaced, 20)
        }
    }

    /// A real photo held still while small noise (±1 level, like a codec re-coding blocks) comes
    /// and goes: mean absolute frame-to-frame change of the 2x output.
    func testHoldKeepsRefinedStaticPicturesSteadierThanLanczos() throws {
        let photo = try TestImages.pgm("butterfly-crop.pgm")
        var noise = Noise(state: 11)
        let frames: [Plane] = (0..<8).map { _ in
            Plane(width: photo.width, height: photo.height,
                  samples: photo.samples.map { UInt8(clamping: Int($0) + (noise.next(0...3) == 0 ? noise.next(-1...1) : 0)) })
        }
        func flicker(_ s: FrameScaler) -> Double {
            var previous: [UInt8]?, total = 0, count = 0
            for frame in frames {
                let out = s.scale(gray(frame)).planes[0].samples
                if let previous {
                    for i in out.indices { total += abs(Int(out[i]) - Int(previous[i])) }
                    count += out.count
                }
                previous = out
            }
            return Double(total) / Double(count)
        }
        let lanczos = flicker(scaler(photo, refined: false))
        let perFrame = flicker(scaler(photo, refined: true))
        let held = flicker(scaler(photo, refined: true, hold: TemporalHold()))
        XCTAssertLessThan(held, lanczos, "refined with hold \(held) vs Lanczos \(lanczos)")
        XCTAssertLessThan(held, perFrame, "refined with hold \(held) vs refined per frame \(perFrame)")
    }

    /// A pan across a real photo (2 input pixels per frame, so nothing is static): each 2x
    /// result against the full-resolution window it was halved from. The hold must not drag
    /// earlier frames into moving content.
    func testHoldLeavesMovingPicturesAsSharpAsPerFrameRefinement() throws {
        let photo = try TestImages.pgm("butterfly-crop.pgm")
        let windowWidth = 160, windowHeight = 128
        var windows: [Plane] = [], truths: [Plane] = []
        for step in 0..<6 {
            let left = 6 * step
            let truth = Plane(width: windowWidth, height: windowHeight)
            for y in 0..<windowHeight { for x in 0..<windowWidth { truth[x, y] = photo[left + x, 16 + y] } }
            windows.append(TestImages.halve(truth))
            truths.append(truth)
        }
        func meanPSNR(_ s: FrameScaler) -> Double {
            zip(windows, truths).map { ImageMetrics.psnr(s.scale(gray($0)).planes[0], $1, border: 8) }.reduce(0, +) / Double(windows.count)
        }
        let plain = meanPSNR(scaler(windows[0], refined: false))
        let perFrame = meanPSNR(scaler(windows[0], refined: true))
        let held = meanPSNR(scaler(windows[0], refined: true, hold: TemporalHold()))
        XCTAssertGreaterThan(perFrame, plain, "the refinement helps on this pan")
        XCTAssertGreaterThanOrEqual(held, perFrame - 0.02, "hold \(held) dB vs per frame \(perFrame) dB")
    }

    func testHeldOutputIdenticalForAnyThreadCountAndFirstFrameUnheld() throws {
        let photo = try TestImages.pgm("baboon-crop.pgm")
        var noise = Noise(state: 3)
        let frames: [Plane] = (0..<4).map { _ in
            Plane(width: photo.width, height: photo.height, samples: photo.samples.map { UInt8(clamping: Int($0) + noise.next(-4...4)) })
        }
        let one = scaler(photo, refined: true, hold: TemporalHold(), threads: 1)
        let three = scaler(photo, refined: true, hold: TemporalHold(), threads: 3)
        var outputs: [[UInt8]] = []
        for frame in frames {
            let a = one.scale(gray(frame)).planes[0].samples
            XCTAssertEqual(three.scale(gray(frame)).planes[0].samples, a)
            outputs.append(a)
        }
        XCTAssertEqual(outputs[0], scaler(photo, refined: true).scale(gray(frames[0])).planes[0].samples,
                       "the first frame has nothing to hold")
        XCTAssertNotEqual(outputs[1], scaler(photo, refined: true).scale(gray(frames[1])).planes[0].samples,
                          "later frames read the held picture")
        one.resetHold()
        XCTAssertEqual(one.scale(gray(frames[2])).planes[0].samples, scaler(photo, refined: true).scale(gray(frames[2])).planes[0].samples,
                       "after a reset the frame is refined on its own")
    }

    func testTenBitFramesAreHeldLikeEightBit() throws {
        let photo = try TestImages.pgm("butterfly-crop.pgm")
        var noise = Noise(state: 5)
        let frames: [Frame16] = (0..<4).map { _ in
            let plane = Plane16(width: photo.width, height: photo.height, bitDepth: 10,
                                samples: photo.samples.map { UInt16(clamping: Int($0) * 4 + noise.next(-3...3)) })
            return Frame16(width: photo.width, height: photo.height, layout: .gray, planes: [plane])
        }
        let size = (2 * photo.width, 2 * photo.height)
        func scaler(threads: Int, hold: TemporalHold?) -> FrameScaler {
            FrameScaler(input: (photo.width, photo.height), output: size, layout: .gray, threads: threads, refiner: .x2, hold: hold)
        }
        let one = scaler(threads: 1, hold: TemporalHold()), two = scaler(threads: 2, hold: TemporalHold())
        let perFrame = scaler(threads: 1, hold: nil)
        var held = 0
        for (index, frame) in frames.enumerated() {
            let a = one.scale(frame).planes[0].samples
            XCTAssertTrue(two.scale(frame).planes[0].samples == a, "frame \(index): thread invariance")
            let alone = perFrame.scale(frame).planes[0].samples
            if index == 0 { XCTAssertTrue(a == alone, "the first frame has nothing to hold") } else if a != alone { held += 1 }
        }
        XCTAssertEqual(held, frames.count - 1, "later 10-bit frames read the held luma")
    }
}
