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
    /// Applied to luma when the scale is exactly 2x; nil for plain resampling.
    public let refiner: EdgeRefiner?
    private let lanczosLuma: Plane?
    private let refinerWeights: [Float]

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
        let refines = refiner != nil && output.width == 2 * input.width && output.height == 2 * input.height
        self.refiner = refines ? refiner : nil
        lanczosLuma = refines ? Plane(width: output.width, height: output.height) : nil
        refinerWeights = refines ? refiner!.paddedWeights : []
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

    /// Scales a 10/12/16-bit frame (no refinement: its filters are trained on 8-bit photos).
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
        }
    }

    public func scale(_ source: Frame16) -> Frame16 {
        let out = Frame16(width: outputWidth, height: outputHeight, layout: layout, bitDepth: source.bitDepth)
        scale(source, into: out)
        return out
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
            let target = plane == 0 ? (lanczosLuma ?? destination.planes[0]) : destination.planes[plane]
            resamplers[plane].resample(band: band, from: source.planes[plane], into: target, scratch: scratch[worker])
        }
        if let refiner, let lanczosLuma {
            // Refinement reads a 9x9 neighbourhood of the finished Lanczos luma, so it runs after it.
            let rows = 32
            scheduler.run(tasks: (outputHeight + rows - 1) / rows) { task, _ in
                refiner.refine(lanczosLuma, into: destination.planes[0], rows: (task * rows)..<min((task + 1) * rows, outputHeight),
                               padded: refinerWeights)
            }
        }
    }

    public func scale(_ source: Frame) -> Frame {
        let out = makeOutputFrame()
        scale(source, into: out)
        return out
    }
}
