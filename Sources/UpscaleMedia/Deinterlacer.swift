import CFFmpeg
#if canImport(Glibc)
import Glibc
#endif

/// libavfilter's bwdif between the decoder and the pixel conversion: one progressive picture
/// per interlaced picture (`mode=send_frame`, so frame count and timestamps stay as they were),
/// field parity from each frame's flags. Pictures flagged progressive pass through unchanged.
final class Deinterlacer {
    private let graph: UnsafeMutablePointer<AVFilterGraph>
    private let source: UnsafeMutablePointer<AVFilterContext>
    private let sink: UnsafeMutablePointer<AVFilterContext>
    private let filtered: UnsafeMutablePointer<AVFrame>
    private let path: String
    private let timeBase: AVRational

    private let filters: FilterLibrary

    init(width: Int32, height: Int32, format: AVPixelFormat, timeBase: AVRational, sampleAspect: AVRational, path: String) throws {
        self.path = path
        self.timeBase = timeBase
        let filters: FilterLibrary
        switch FilterLibrary.shared {
        case .success(let library): filters = library
        case .failure(let reason):
            throw UpscaleError(.processing, "'\(path)': cannot set up deinterlacing (\(reason); apt-get install libavfilter\(LIBAVFILTER_VERSION_MAJOR)); run without --deinterlace")
        }
        self.filters = filters
        let allocatedGraph = filters.graphAlloc(), allocatedFrame = av_frame_alloc()
        guard let graph = allocatedGraph, let filtered = allocatedFrame else {
            Deinterlacer.release(allocatedGraph, allocatedFrame, filters)
            throw UpscaleError(.processing, "out of memory")
        }
        self.graph = graph
        self.filtered = filtered
        let aspect = sampleAspect.num > 0 && sampleAspect.den > 0 ? sampleAspect : AVRational(num: 1, den: 1)
        let arguments = "video_size=\(width)x\(height):pix_fmt=\(format.rawValue):time_base=\(timeBase.num)/\(timeBase.den)"
            + ":pixel_aspect=\(aspect.num)/\(aspect.den)"
        var src: UnsafeMutablePointer<AVFilterContext>?
        var snk: UnsafeMutablePointer<AVFilterContext>?
        var deinterlace: UnsafeMutablePointer<AVFilterContext>?
        let failure = { (what: String) -> UpscaleError in
            Deinterlacer.release(graph, filtered, filters)
            return UpscaleError(.processing, "'\(path)': cannot set up deinterlacing (\(what)); run without --deinterlace")
        }
        guard filters.createFilter(&src, filters.byName("buffer"), "in", arguments, nil, graph) >= 0,
              filters.createFilter(&snk, filters.byName("buffersink"), "out", nil, nil, graph) >= 0,
              let bwdif = filters.byName("bwdif"),
              filters.createFilter(&deinterlace, bwdif, "bwdif", "mode=send_frame:parity=auto:deint=interlaced", nil, graph) >= 0,
              let src, let snk, let deinterlace else {
            throw failure("this FFmpeg has no bwdif filter")
        }
        source = src
        sink = snk
        guard filters.link(src, 0, deinterlace, 0) >= 0, filters.link(deinterlace, 0, snk, 0) >= 0,
              filters.graphConfig(graph, nil) >= 0 else {
            throw failure("the filter graph does not configure")
        }
    }

    deinit { Deinterlacer.release(graph, filtered, filters) }

    private static func release(_ graph: UnsafeMutablePointer<AVFilterGraph>?, _ frame: UnsafeMutablePointer<AVFrame>?,
                                _ filters: FilterLibrary) {
        var g = graph, f = frame
        filters.graphFree(&g)
        av_frame_free(&f)
    }

    /// Feeds one decoded picture (nil at the end of the stream) and hands every picture the
    /// filter has ready to `emit` (valid only during the call) with its timestamp in the
    /// stream's time base (bwdif counts in half of it, to leave room for a picture per field).
    func filter(_ frame: UnsafeMutablePointer<AVFrame>?, emit: (UnsafeMutablePointer<AVFrame>, Int64) throws -> Void) throws {
        let added = filters.addFrame(source, frame, Int32(AV_BUFFERSRC_FLAG_KEEP_REF))
        guard added >= 0 else {
            throw UpscaleError(.processing, "'\(path)': deinterlacing failed (\(ffmpegErrorText(added)))")
        }
        while true {
            let got = filters.getFrame(sink, filtered)
            if got == averrorEAGAIN || got == averrorEOF { return }
            guard got >= 0 else { throw UpscaleError(.processing, "'\(path)': deinterlacing failed (\(ffmpegErrorText(got)))") }
            defer { av_frame_unref(filtered) }
            let pts = filtered.pointee.pts == noPTS ? noPTS : av_rescale_q(filtered.pointee.pts, filters.timeBase(sink), timeBase)
            try emit(filtered, pts)
        }
    }
}

/// libavfilter, opened (dlopen) the first time a deinterlacer is made instead of linked:
/// only `--deinterlace` uses it, and loading it with the 30-odd libraries it depends on
/// (speech synthesis, SVG, OpenCL, Vulkan…) cost every run about 10 ms at start and
/// several MB of resident pages. Each call's type comes from the headers (shim.h).
struct FilterLibrary {
    let graphAlloc: upscale_avfilter_graph_alloc_fn
    let graphFree: upscale_avfilter_graph_free_fn
    let byName: upscale_avfilter_get_by_name_fn
    let createFilter: upscale_avfilter_graph_create_filter_fn
    let link: upscale_avfilter_link_fn
    let graphConfig: upscale_avfilter_graph_config_fn
    let addFrame: upscale_av_buffersrc_add_frame_flags_fn
    let getFrame: upscale_av_buffersink_get_frame_fn
    let timeBase: upscale_av_buffersink_get_time_base_fn

    /// The library's file name for the headers this was built with.
    static let fileName = "libavfilter.so.\(LIBAVFILTER_VERSION_MAJOR)"

    /// Opened once per process, on first use; the failure says why in words.
    static let shared: Result<FilterLibrary, LoadFailure> = {
        guard let handle = dlopen(fileName, RTLD_NOW | RTLD_LOCAL) else {
            return .failure(LoadFailure(description: "\(fileName) cannot be opened: " + (dlerror().map { String(cString: $0) } ?? "not found")))
        }
        func symbol<F>(_ name: String, _: F.Type) throws(LoadFailure) -> F {
            guard let address = dlsym(handle, name) else { throw LoadFailure(description: "\(fileName) has no \(name)") }
            return unsafeBitCast(address, to: F.self)
        }
        do throws(LoadFailure) {
            return .success(FilterLibrary(
                graphAlloc: try symbol("avfilter_graph_alloc", upscale_avfilter_graph_alloc_fn.self),
                graphFree: try symbol("avfilter_graph_free", upscale_avfilter_graph_free_fn.self),
                byName: try symbol("avfilter_get_by_name", upscale_avfilter_get_by_name_fn.self),
                createFilter: try symbol("avfilter_graph_create_filter", upscale_avfilter_graph_create_filter_fn.self),
                link: try symbol("avfilter_link", upscale_avfilter_link_fn.self),
                graphConfig: try symbol("avfilter_graph_config", upscale_avfilter_graph_config_fn.self),
                addFrame: try symbol("av_buffersrc_add_frame_flags", upscale_av_buffersrc_add_frame_flags_fn.self),
                getFrame: try symbol("av_buffersink_get_frame", upscale_av_buffersink_get_frame_fn.self),
                timeBase: try symbol("av_buffersink_get_time_base", upscale_av_buffersink_get_time_base_fn.self)))
        } catch {
            return .failure(error)
        }
    }()

    struct LoadFailure: Error, CustomStringConvertible {
        let description: String
    }
}
