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
    /// Applied to luma after Lanczos when its ratio is the scale's; nil for plain resampling.
    public let refiner: EdgeRefiner?
    private let refinerScratch: [EdgeRefiner.Scratch]

    public init(
        input: (width: Int, height: Int), output: (width: Int, height: Int), layout: ChromaLayout,
        kernel: Kernel = .lanczos3, threads: Int = 1, bandHeight: Int = 96, refiner: EdgeRefiner? = nil
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
            let h = FilterBank(
                grid: SampleGrid(lumaInput: input.width, lumaOutput: output.width, subsampling: sub.x, siting: site.x),
                kernel: kernel)
            let v = FilterBank(
                grid: SampleGrid(lumaInput: input.height, lumaOutput: output.height, subsampling: sub.y, siting: site.y),
                kernel: kernel)
            resamplers.append(PlaneResampler(horizontal: h, vertical: v, bandHeight: bandHeight))
        }
        self.resamplers = resamplers
        tasks = resamplers.enumerated().flatMap { plane, r in (0..<r.bandCount).map { (plane, $0) } }
        self.refiner = refines ? refiner : nil
        refinerScratch = refines ? (0..<scheduler.threads).map { _ in EdgeRefiner.Scratch(width: input.width) } : []
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
    public func scale(_ source: Frame16, into destination: Frame16) {
        precondition(source.width == inputWidth && source.height == inputHeight && source.layout == layout,
                     "source frame does not match the scaler")
        precondition(destination.width == outputWidth && destination.height == outputHeight && destination.layout == layout,
                     "destination frame does not match the scaler")
        if floatScratch.isEmpty {
            let count = max(resamplers.map(\.scratchCount).max() ?? 1, 1)
            floatScratch = (0..<scheduler.threads).map { _ in
                let p = UnsafeMutablePointer<Float>.allocate(capacity: count)
                p.initialize(repeating: 0, count: count)
                return p
            }
        }
        scheduler.run(tasks: tasks.count) { task, worker in
            let (plane, band) = tasks[task]
            resamplers[plane].resample16(band: band, from: source.planes[plane], into: destination.planes[plane],
                                         scratch: floatScratch[worker])
            if plane == 0, let refiner {
                refiner.refine(source.planes[0], into: destination.planes[0], rows: inputRows(band: band, ratio: refiner.ratio),
                               scratch: refinerScratch[worker])
            }
        }
    }

    public func scale(_ source: Frame16) -> Frame16 {
        let out = Frame16(width: outputWidth, height: outputHeight, layout: layout, bitDepth: source.bitDepth)
        scale(source, into: out)
        return out
    }

    /// The luma input rows a band's output rows come from at an integer ratio (bands start on
    /// multiples of it when refining).
    private func inputRows(band: Int, ratio: Int) -> Range<Int> {
        let rows = resamplers[0].rows(band: band)
        return (rows.lowerBound / ratio)..<(rows.upperBound / ratio)
    }

    public func makeOutputFrame() -> Frame {
        Frame(width: outputWidth, height: outputHeight, layout: layout)
    }

    /// Scales `source` into `destination`. Not reentrant: one call at a time per scaler.
    public func scale(_ source: Frame, into destination: Frame) {
        precondition(source.width == inputWidth && source.height == inputHeight && source.layout == layout,
                     "source frame does not match the scaler")
        precondition(destination.width == outputWidth && destination.height == outputHeight && destination.layout == layout,
                     "destination frame does not match the scaler")
        scheduler.run(tasks: tasks.count) { task, worker in
            let (plane, band) = tasks[task]
            resamplers[plane].resample(band: band, from: source.planes[plane], into: destination.planes[plane], scratch: scratch[worker])
            if plane == 0, let refiner {
                // The band's Lanczos rows are done; refine them from the input rows they came from.
                refiner.refine(source.planes[0], into: destination.planes[0], rows: inputRows(band: band, ratio: refiner.ratio),
                               scratch: refinerScratch[worker])
            }
        }
    }

    public func scale(_ source: Frame) -> Frame {
        let out = makeOutputFrame()
        scale(source, into: out)
        return out
    }
}
