import CVips
import Foundation
import UpscaleCore

/// An 8-bit RGB picture the tool draws into (bench charts, comparison crops) and saves as
/// PNG through libvips. Rectangles are filled here; text is rendered by libvips.
public final class Canvas {
    public let width: Int
    public let height: Int
    private var pixels: [UInt8]

    public init(width: Int, height: Int, background: (UInt8, UInt8, UInt8) = (255, 255, 255)) {
        self.width = width
        self.height = height
        pixels = [UInt8](repeating: 0, count: width * height * 3)
        fill(x: 0, y: 0, width: width, height: height, color: background)
    }

    public func fill(x: Int, y: Int, width w: Int, height h: Int, color: (UInt8, UInt8, UInt8)) {
        for row in max(0, y)..<min(height, y + h) {
            for column in max(0, x)..<min(width, x + w) {
                let i = (row * width + column) * 3
                pixels[i] = color.0
                pixels[i + 1] = color.1
                pixels[i + 2] = color.2
            }
        }
    }

    /// Draws a grey plane with its top-left at (x, y), each sample as a `zoom`x`zoom` block.
    public func draw(_ plane: Plane, x: Int, y: Int, zoom: Int = 1) {
        for py in 0..<(plane.height * zoom) where y + py < height {
            for px in 0..<(plane.width * zoom) where x + px < width {
                let v = plane[px / zoom, py / zoom]
                let i = ((y + py) * width + x + px) * 3
                pixels[i] = v
                pixels[i + 1] = v
                pixels[i + 2] = v
            }
        }
    }

    /// Writes `text` with its top-left at (x, y) in `color`, rendered by libvips (Pango).
    public func text(_ text: String, x: Int, y: Int, size: Int = 12, color: (UInt8, UInt8, UInt8) = (0, 0, 0)) throws {
        try ImagePlanes.start()
        var mask: UnsafeMutablePointer<VipsImage>?
        let escaped = text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
        guard upscale_vips_text(&mask, escaped, "sans \(size)") == 0, let mask else {
            throw ImagePlanes.failure("cannot render text")
        }
        defer { upscale_vips_unref(mask) }
        let alpha = try ImagePlanes.plane(from: mask)
        for my in 0..<alpha.height where y + my < height && y + my >= 0 {
            for mx in 0..<alpha.width where x + mx < width && x + mx >= 0 {
                let a = Int(alpha[mx, my])
                guard a > 0 else { continue }
                let i = ((y + my) * width + x + mx) * 3
                pixels[i] = UInt8((Int(pixels[i]) * (255 - a) + Int(color.0) * a) / 255)
                pixels[i + 1] = UInt8((Int(pixels[i + 1]) * (255 - a) + Int(color.1) * a) / 255)
                pixels[i + 2] = UInt8((Int(pixels[i + 2]) * (255 - a) + Int(color.2) * a) / 255)
            }
        }
    }

    public func savePNG(_ path: String) throws {
        try ImagePlanes.start()
        try pixels.withUnsafeBytes { raw in
            guard let image = upscale_vips_from_memory(raw.baseAddress, raw.count, Int32(width), Int32(height), 3, VIPS_FORMAT_UCHAR) else {
                throw ImagePlanes.failure("cannot wrap the picture")
            }
            defer { upscale_vips_unref(image) }
            if upscale_vips_pngsave(image, path) != 0 { throw ImagePlanes.failure("cannot write '\(path)'") }
        }
    }
}
