import CFFmpeg

/// The encoder's time base where the source's cannot hold one frame: Matroska, WebM and FLV
/// count milliseconds, so 23.976, 24 and 29.97 fps pictures come 41 or 42 ms apart (and
/// MPEG-TS's 90 kHz gives 23.976 fps 3753 or 3754 ticks). Kept as they are, those steps made
/// an MP4 or MOV of variable frame rate, which editors flag and conform. The grid's time base
/// holds both a source tick and a frame exactly (1/24000 for milliseconds at 24000/1001 fps),
/// and a picture within one source tick of a frame's place, counted from the stream's start,
/// is put on it. Any other time is kept exactly, so a source of truly variable rate keeps its
/// times. Every chunk of a job opens the same stream, so its chunks share one grid.
struct FrameGrid {
    /// The encoder's time base: 1/L, L a common multiple of the source's tick and frame rate.
    let timeBase: AVRational
    /// One frame, and one source tick, in `timeBase`.
    let frame: Int64
    let tick: Int64
    /// The stream's first timestamp in `timeBase`: frames are counted from it (x264 in
    /// Matroska starts at 21 ms, say, off a grid counted from 0).
    let origin: Int64

    /// nil where the source's time base holds a frame exactly (most MP4 and MOV), or where
    /// the rate is no frame rate (below 1 or above 300 fps, as a guess from a variable-rate
    /// file may be).
    init?(source: AVRational, frameRate: AVRational, start: Int64) {
        let tb = av_mul_q(source, AVRational(num: 1, den: 1)) // reduced
        let rate = av_mul_q(frameRate, AVRational(num: 1, den: 1))
        guard tb.num > 0, tb.den > 0, rate.num > 0, rate.den > 0,
              rate.num >= rate.den, Int64(rate.num) <= 300 * Int64(rate.den) else { return nil }
        // A frame in source ticks: rate.den·tb.den / (rate.num·tb.num).
        if (Int64(rate.den) * Int64(tb.den)) % (Int64(rate.num) * Int64(tb.num)) == 0 { return nil }
        // 1/L must divide tb.num/tb.den (tb.den | L, tb reduced) and rate.den/rate.num (rate.num | L).
        let l = lcm(Int64(tb.den), Int64(rate.num))
        guard l <= 10_000_000 else { return nil }
        timeBase = AVRational(num: 1, den: Int32(l))
        frame = Int64(rate.den) * l / Int64(rate.num)
        tick = Int64(tb.num) * l / Int64(tb.den)
        let (first, overflow) = start.multipliedReportingOverflow(by: tick)
        origin = start == noPTS || overflow ? 0 : first
    }

    /// The rates cameras, screen recorders and broadcast use.
    static let nominalRates: [AVRational] = [(24000, 1001), (24, 1), (25, 1), (30000, 1001), (30, 1), (48, 1), (50, 1),
                                             (60000, 1001), (60, 1), (100, 1), (120000, 1001), (120, 1)]
        .map { AVRational(num: $0.0, den: $0.1) }

    /// `rate`, or the nominal rate within 0.01% of it: FFmpeg guesses a Matroska stream's rate
    /// from its millisecond steps, and at 59.94 fps gave 19001/317, whose grid with milliseconds
    /// (1/19001000 s) is past `init`'s limit: the pictures stayed 16 and 17 ms apart, a variable
    /// frame rate in MP4 and MOV.
    static func nominal(_ rate: AVRational) -> AVRational {
        guard rate.num > 0, rate.den > 0 else { return rate }
        let value = Double(rate.num) / Double(rate.den)
        return nominalRates.first { abs(Double($0.num) / Double($0.den) / value - 1) < 1e-4 } ?? rate
    }

    /// A source timestamp in `timeBase`, on the grid where it is within a tick of it (none
    /// stays none, as does a time too large for `timeBase`: damaged data).
    func place(_ pts: Int64) -> Int64 {
        let (exact, overflow) = pts.multipliedReportingOverflow(by: tick)
        if pts == noPTS || overflow || exact == noPTS { return noPTS }
        // Each of the two timestamps was rounded to a source tick: within one of the grid.
        let nearest = origin + roundedDivision(exact - origin, frame) * frame
        return abs(nearest - exact) <= tick ? nearest : exact
    }
}

/// a / b to the nearest integer (halves away from zero), for b > 0 and either sign of a.
private func roundedDivision(_ a: Int64, _ b: Int64) -> Int64 {
    a >= 0 ? (a + b / 2) / b : -((-a + b / 2) / b)
}

private func lcm(_ a: Int64, _ b: Int64) -> Int64 {
    var (x, y) = (a, b)
    while y != 0 { (x, y) = (y, x % y) }
    return a / x * b
}
