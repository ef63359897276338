/// Scales whole frames plane by plane, all bands of all planes on one scheduler.
///
/// Build one per input/output size and reuse it for every frame: filter banks and
/// per-worker scratch are made once here.
public final class FrameScaler: @unchecked Sendable {
    public let inputWidth: Int
    public let inputHeight: Int
    public let outputWidth: Int
    public let outputHeight: Int
    public let layout: ChromaLayout
    public let kernel: Kernel
    public let scheduler: TileScheduler
    let resamplers: [PlaneResampler]
    let tasks: [(plane: Int, band: Int)]
    let scratch: [UnsafeMutablePointer<Int16>]
    /// Applied after Lanczos to the layout's detail planes (luma, or each RGB colour plane)
    /// when its ratio is the scale's; nil for plain resampling.
    public let refiner: EdgeRefiner?
    private let refinerScratch: [EdgeRefiner.Scratch]
    /// For video: the refinement reads a luma copy held steady across frames where the
    /// picture is static (see `TemporalHold`); nil refines every frame on its own.
    public let hold: TemporalHold?
    /// The held luma of the depth last scaled, made on the first frame of that depth.
    private var held: Plane?
    private var held16: Plane16?

    /// `chromaSiting`: where the input's subsampled chroma sample 0 sits, in luma samples
    /// (x, y), when it is not where the layout puts it (`ChromaLayout.siting`: MPEG-2's left
    /// siting for 4:2:0); the output's stays the layout's.
    public init(
        input: (width: Int, height: Int), output: (width: Int, height: Int), layout: ChromaLayout,
        kernel: Kernel = .lanczos3, threads: Int = 1, bandHeight: Int = 96, refiner: EdgeRefiner? = nil,
        hold: TemporalHold? = nil, chromaSiting: (x: Double, y: Double)? = nil
    ) {
        inputWidth = input.width
        inputHeight = input.height
        outputWidth = output.width
        outputHeight = output.height
        self.layout = layout
        self.kernel = kernel
        scheduler = TileScheduler(threads: threads)
        let refines = refiner.map { output.width == $0.ratio * input.width && output.height == $0.ratio * input.height } ?? false
        // Refinement works on whole input rows: luma bands start on multiples of the ratio.
        let bandHeight = refines ? (bandHeight + refiner!.ratio - 1) / refiner!.ratio * refiner!.ratio : bandHeight
        var resamplers: [PlaneResampler] = []
        for plane in 0..<layout.planeCount {
            let sub = layout.subsampling(plane: plane)
            let site = layout.siting(plane: plane)
            // The input's own siting, on the axes its chroma is subsampled along.
            let from = (x: sub.x > 1 ? chromaSiting?.x : nil, y: sub.y > 1 ? chromaSiting?.y : nil)
            let h = FilterBank(
                grid: SampleGrid(lumaInput: input.width, lumaOutput: output.width, subsampling: sub.x, siting: site.x, inputSiting: from.x),
                kernel: kernel)
            let v = FilterBank(
                grid: SampleGrid(lumaInput: input.height, lumaOutput: output.height, subsampling: sub.y, siting: site.y, inputSiting: from.y),
                kernel: kernel)
            resamplers.append(PlaneResampler(horizontal: h, vertical: v, bandHeight: bandHeight))
        }
        self.resamplers = resamplers
        tasks = resamplers.enumerated().flatMap { plane, r in (0..<r.bandCount).map { (plane, $0) } }
        self.refiner = refines ? refiner : nil
        // Video is luma/chroma: the hold is for the luma plane only.
        self.hold = refines && layout.detailPlanes == 0..<1 ? hold : nil
        refinerScratch = refines ? (0..<scheduler.threads).map { _ in EdgeRefiner.Scratch(width: input.width, ratio: refiner!.ratio) } : []
        let scratchCount = resamplers.map(\.scratchCount).max() ?? 0
        scratch = (0..<scheduler.threads).map { _ in
            let p = UnsafeMutablePointer<Int16>.allocate(capacity: max(scratchCount, 1))
            p.initialize(repeating: 0, count: max(scratchCount, 1))
            return p
        }
    }

    /// Float scratch for 16-bit frames, one per worker, made on the first 16-bit frame.
    private var floatScratch: [UnsafeMutablePointer<Float>] = []

    deinit {
        scratch.forEach { $0.deallocate() }
        floatScratch.forEach { $0.deallocate() }
    }

    /// Scales a 10/12/16-bit frame (refined like 8-bit frames, in 8-bit units).
    /// Not reentrant: one call at a time per scaler.
    public func scale(_ source: Frame16, into destination: Frame16) { scale(source, bands: nil, into: destination) }

    /// Only the output rows of `bands` (all planes): a tall output can be made strip by strip
    /// into views of each strip (`Plane16(viewing:…)`), with the same bytes as whole.
    public func scale(_ source: Frame16, bands: Range<Int>?, into destination: Frame16) {
        precondition(source.width == inputWidth && source.height == inputHeight && source.layout == layout,
                     "source frame does not match the scaler")
        precondition(destination.width == outputWidth && destination.height == outputHeight && destination.layout == layout,
                     "destination frame does not match the scaler")
        if floatScratch.isEmpty {
            let count = max(resamplers.map(\.floatScratchCount).max() ?? 1, 1)
            floatScratch = (0..<scheduler.threads).map { _ in
                let p = UnsafeMutablePointer<Float>.allocate(capacity: count)
                p.initialize(repeating: 0, count: count)
                return p
            }
        }
        held = nil
        let luma = steadyLuma(source.planes[0], held: &held16)
        let tasks = bands.map { bands in self.tasks.filter { bands.contains($0.band) } } ?? self.tasks
        scheduler.run(tasks: tasks.count) { task, worker in
            let (plane, band) = tasks[task]
            resamplers[plane].resample16(band: band, from: source.planes[plane], into: destination.planes[plane],
                                         scratch: floatScratch[worker])
            if let refiner, layout.detailPlanes.contains(plane) {
                refiner.refine(plane == 0 ? luma : source.planes[plane], into: destination.planes[plane],
                               rows: inputRows(band: band, ratio: refiner.ratio), scratch: refinerScratch[worker])
            }
        }
    }

    /// The luma the refinement reads: the frame's own, or with a hold the held copy, first
    /// made from this frame (and remade when the depth changes), afterwards moved toward each
    /// frame in bands on the scheduler (each sample depends only on itself, so any split gives
    /// the same bytes).
    private func steadyLuma<P: HeldPlane>(_ luma: P, held: inout P?) -> P {
        guard let hold else { return luma }
        if let plane = held, plane.sameDepth(as: luma) {
            let bands = (inputHeight + 63) / 64
            scheduler.run(tasks: bands) { band, _ in
                luma.move(plane, by: hold, rows: (band * 64)..<min((band + 1) * 64, inputHeight))
            }
        } else {
            held = luma.copy()
        }
        return held!
    }

    /// Moves the held luma toward `source` without scaling it: a pre-roll frame before the
    /// first frame of a chunk, so the chunk's first refined frames see the hold they would
    /// have seen in one pass. Does nothing without a hold.
    public func prime(_ source: Frame) {
        guard hold != nil else { return }
        held16 = nil
        _ = steadyLuma(source.planes[0], held: &held)
    }

    /// The same for 10/12/16-bit frames.
    public func prime(_ source: Frame16) {
        guard hold != nil else { return }
        held = nil
        _ = steadyLuma(source.planes[0], held: &held16)
    }

    /// Whether frames before the first one scaled affect the result (a temporal hold).
    public var needsPreroll: Bool { hold != nil }

    /// Forgets the previous frames: the next frame is refined on its own, as after a cut
    /// (where the per-sample motion test would mostly do the same).
    public func resetHold() {
        held = nil
        held16 = nil
    }

    public func scale(_ source: Frame16) -> Frame16 {
        let out = Frame16(width: outputWidth, height: outputHeight, layout: layout, bitDepth: source.bitDepth)
        scale(source, into: out)
        return out
    }

    /// The input rows a detail-plane band's output rows come from at an integer ratio (bands
    /// start on multiples of it when refining; detail planes are all full size).
    private func inputRows(band: Int, ratio: Int) -> Range<Int> {
        let rows = resamplers[0].rows(band: band)
        return (rows.lowerBound / ratio)..<(rows.upperBound / ratio)
    }

    public func makeOutputFrame() -> Frame {
        Frame(width: outputWidth, height: outputHeight, layout: layout)
    }

    /// Scales `source` into `destination`. Not reentrant: one call at a time per scaler.
    public func scale(_ source: Frame, into destination: Frame) { scale(source, bands: nil, into: destination) }

    /// The output bands (runs of `bandHeight` rows, refinement-aligned) every plane is made in.
    /// Strip-by-strip scaling takes whole bands; this is their count for the first plane.
    public var bandCount: Int { resamplers[0].bandCount }

    /// Output rows of band `band` of the first plane.
    public func rows(band: Int) -> Range<Int> { resamplers[0].rows(band: band) }

    /// Only the output rows of `bands` (all planes, which must share the first plane's bands:
    /// gray, RGB, RGBA); see the 16-bit version.
    public func scale(_ source: Frame, bands: Range<Int>?, into destination: Frame) {
        precondition(source.width == inputWidth && source.height == inputHeight && source.layout == layout,
                     "source frame does not match the scaler")
        precondition(destination.width == outputWidth && destination.height == outputHeight && destination.layout == layout,
                     "destination frame does not match the scaler")
        held16 = nil
        let luma = steadyLuma(source.planes[0], held: &held)
        let tasks = bands.map { bands in self.tasks.filter { bands.contains($0.band) } } ?? self.tasks
        scheduler.run(tasks: tasks.count) { task, worker in
            let (plane, band) = tasks[task]
            resamplers[plane].resample(band: band, from: source.planes[plane], into: destination.planes[plane], scratch: scratch[worker])
            if let refiner, layout.detailPlanes.contains(plane) {
                // The band's Lanczos rows are done; refine them from the input rows they came from.
                refiner.refine(plane == 0 ? luma : source.planes[plane], into: destination.planes[plane],
                               rows: inputRows(band: band, ratio: refiner.ratio), scratch: refinerScratch[worker])
            }
        }
    }

    public func scale(_ source: Frame) -> Frame {
        let out = makeOutputFrame()
        scale(source, into: out)
        return out
    }
}

/// A luma plane `TemporalHold` can update.
private protocol HeldPlane: Sendable {
    func move(_ held: Self, by hold: TemporalHold, rows: Range<Int>)
    func sameDepth(as other: Self) -> Bool
    func copy() -> Self
}

extension Plane: HeldPlane {
    func move(_ held: Plane, by hold: TemporalHold, rows: Range<Int>) { hold.update(held, toward: self, rows: rows) }
    func sameDepth(as other: Plane) -> Bool { true }
    func copy() -> Plane {
        let plane = Plane(width: width, height: height)
        plane.copy(from: base, sourceStride: stride)
        return plane
    }
}

extension Plane16: HeldPlane {
    func move(_ held: Plane16, by hold: TemporalHold, rows: Range<Int>) { hold.update(held, toward: self, rows: rows) }
    func sameDepth(as other: Plane16) -> Bool { bitDepth == other.bitDepth }
    func copy() -> Plane16 {
        let plane = Plane16(width: width, height: height, bitDepth: bitDepth)
        for y in 0..<height { plane.row(y).update(from: row(y), count: width) }
        return plane
    }
}
