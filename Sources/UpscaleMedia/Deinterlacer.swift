import CFFmpeg

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

    init(width: Int32, height: Int32, format: AVPixelFormat, timeBase: AVRational, sampleAspect: AVRational, path: String) throws {
        self.path = path
        self.timeBase = timeBase
        let allocatedGraph = avfilter_graph_alloc(), allocatedFrame = av_frame_alloc()
        guard let graph = allocatedGraph, let filtered = allocatedFrame else {
            Deinterlacer.release(allocatedGraph, allocatedFrame)
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
            Deinterlacer.release(graph, filtered)
            return UpscaleError(.processing, "'\(path)': cannot set up deinterlacing (\(what)); run without --deinterlace")
        }
        guard avfilter_graph_create_filter(&src, avfilter_get_by_name("buffer"), "in", arguments, nil, graph) >= 0,
              avfilter_graph_create_filter(&snk, avfilter_get_by_name("buffersink"), "out", nil, nil, graph) >= 0,
              let bwdif = avfilter_get_by_name("bwdif"),
              avfilter_graph_create_filter(&deinterlace, bwdif, "bwdif", "mode=send_frame:parity=auto:deint=interlaced", nil, graph) >= 0,
              let src, let snk, let deinterlace else {
            throw failure("this FFmpeg has no bwdif filter")
        }
        source = src
        sink = snk
        guard avfilter_link(src, 0, deinterlace, 0) >= 0, avfilter_link(deinterlace, 0, snk, 0) >= 0,
              avfilter_graph_config(graph, nil) >= 0 else {
            throw failure("the filter graph does not configure")
        }
    }

    deinit { Deinterlacer.release(graph, filtered) }

    private static func release(_ graph: UnsafeMutablePointer<AVFilterGraph>?, _ frame: UnsafeMutablePointer<AVFrame>?) {
        var g = graph, f = frame
        avfilter_graph_free(&g)
        av_frame_free(&f)
    }

    /// Feeds one decoded picture (nil at the end of the stream) and hands every picture the
    /// filter has ready to `emit` (valid only during the call) with its timestamp in the
    /// stream's time base (bwdif counts in half of it, to leave room for a picture per field).
    func filter(_ frame: UnsafeMutablePointer<AVFrame>?, emit: (UnsafeMutablePointer<AVFrame>, Int64) throws -> Void) throws {
        let added = av_buffersrc_add_frame_flags(source, frame, Int32(AV_BUFFERSRC_FLAG_KEEP_REF))
        guard added >= 0 else {
            throw UpscaleError(.processing, "'\(path)': deinterlacing failed (\(ffmpegErrorText(added)))")
        }
        while true {
            let got = av_buffersink_get_frame(sink, filtered)
            if got == averrorEAGAIN || got == averrorEOF { return }
            guard got >= 0 else { throw UpscaleError(.processing, "'\(path)': deinterlacing failed (\(ffmpegErrorText(got)))") }
            defer { av_frame_unref(filtered) }
            let pts = filtered.pointee.pts == noPTS ? noPTS : av_rescale_q(filtered.pointee.pts, av_buffersink_get_time_base(sink), timeBase)
            try emit(filtered, pts)
        }
    }
}
