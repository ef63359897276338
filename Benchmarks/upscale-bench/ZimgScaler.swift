import CZimg
import UpscaleCore

/// zimg's resizer on core frames (grey or 4:2:0 with MPEG-2 chroma siting), single-threaded
/// as zimg is; the quality reference the project aims to beat.
final class ZimgScaler {
    private let graph: OpaquePointer
    private var temporary: UnsafeMutableRawPointer
    let output: (width: Int, height: Int)

    init(input: (width: Int, height: Int), output: (width: Int, height: Int), layout: ChromaLayout,
         filter: zimg_resample_filter_e = ZIMG_RESIZE_LANCZOS, taps: Double = 3) throws {
        let version = upscale_zimg_api_version()
        func format(_ size: (width: Int, height: Int)) -> zimg_image_format {
            var f = zimg_image_format()
            zimg_image_format_default(&f, version)
            f.width = UInt32(size.width)
            f.height = UInt32(size.height)
            f.pixel_type = ZIMG_PIXEL_BYTE
            if layout == .gray {
                f.color_family = ZIMG_COLOR_GREY
            } else {
                f.color_family = ZIMG_COLOR_YUV
                f.matrix_coefficients = ZIMG_MATRIX_BT709
                f.subsample_w = 1
                f.subsample_h = layout == .yuv420 ? 1 : 0
                f.chroma_location = ZIMG_CHROMA_LEFT
            }
            return f
        }
        var src = format(input), dst = format(output)
        var params = zimg_graph_builder_params()
        zimg_graph_builder_params_default(&params, version)
        params.resample_filter = filter
        params.filter_param_a = taps
        params.resample_filter_uv = filter
        params.filter_param_a_uv = taps
        guard let graph = zimg_filter_graph_build(&src, &dst, &params) else {
            throw ImageError("zimg cannot build a \(input) → \(output) graph")
        }
        self.graph = graph
        var size = 0
        zimg_filter_graph_get_tmp_size(graph, &size)
        temporary = UnsafeMutableRawPointer.allocate(byteCount: max(size, 64), alignment: 64)
        self.output = output
    }

    deinit {
        zimg_filter_graph_free(graph)
        temporary.deallocate()
    }

    func scale(_ source: Frame, into destination: Frame) throws {
        var src = zimg_image_buffer_const()
        src.version = upscale_zimg_api_version()
        var dst = zimg_image_buffer()
        dst.version = upscale_zimg_api_version()
        for (i, p) in source.planes.enumerated() { upscale_zimg_set_source_plane(&src, Int32(i), p.base, p.stride) }
        for (i, p) in destination.planes.enumerated() { upscale_zimg_set_destination_plane(&dst, Int32(i), p.base, p.stride) }
        let result = zimg_filter_graph_process(graph, &src, &dst, temporary, nil, nil, nil, nil)
        if result != ZIMG_ERROR_SUCCESS { throw ImageError("zimg failed with code \(result.rawValue)") }
    }
}

struct ImageError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
