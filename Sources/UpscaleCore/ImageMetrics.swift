import Foundation

/// Full-reference quality measures on 8-bit planes, as the project's quality protocol
/// uses them: a border of `border` samples on every side is excluded.
public enum ImageMetrics {
    /// Peak signal-to-noise ratio in dB (peak 255); infinity for identical planes.
    public static func psnr(_ a: Plane, _ b: Plane, border: Int = 0) -> Double {
        psnr(mse: meanSquaredError(a, b, border: border))
    }

    /// Peak signal-to-noise ratio in dB (peak 255) of a mean squared error; infinity for 0.
    /// For several planes (RGB), give the mean of their errors.
    public static func psnr(mse: Double) -> Double {
        mse == 0 ? .infinity : 10 * log10(255 * 255 / mse)
    }

    /// Mean squared difference of the samples inside the border.
    public static func meanSquaredError(_ a: Plane, _ b: Plane, border: Int = 0) -> Double {
        precondition(a.width == b.width && a.height == b.height, "planes differ in size")
        let xs = border..<(a.width - border), ys = border..<(a.height - border)
        precondition(!xs.isEmpty && !ys.isEmpty, "border leaves nothing to compare")
        var sum = 0.0
        for y in ys {
            let ra = a.row(y), rb = b.row(y)
            var rowSum = 0
            for x in xs {
                let d = Int(ra[x]) - Int(rb[x])
                rowSum += d * d
            }
            sum += Double(rowSum)
        }
        return sum / Double(xs.count * ys.count)
    }

    /// Mean structural similarity (Wang et al. 2004): 11x11 Gaussian window with σ = 1.5,
    /// C1 = (0.01·255)², C2 = (0.03·255)², over the window positions that fit inside the
    /// region left after removing the border.
    public static func ssim(_ a: Plane, _ b: Plane, border: Int = 0) -> Double {
        precondition(a.width == b.width && a.height == b.height, "planes differ in size")
        let w = a.width - 2 * border, h = a.height - 2 * border
        let radius = 5
        precondition(w > 2 * radius && h > 2 * radius, "region too small for SSIM")
        var kernel = (-radius...radius).map { exp(-Double($0 * $0) / (2 * 1.5 * 1.5)) }
        let total = kernel.reduce(0, +)
        kernel = kernel.map { $0 / total }

        // The five local moments, blurred separably with "valid" extent.
        let count = w * h
        var fields = [[Double]](repeating: [Double](repeating: 0, count: count), count: 5)
        for y in 0..<h {
            let ra = a.row(y + border) + border, rb = b.row(y + border) + border
            for x in 0..<w {
                let p = Double(ra[x]), q = Double(rb[x])
                let i = y * w + x
                fields[0][i] = p
                fields[1][i] = q
                fields[2][i] = p * p
                fields[3][i] = q * q
                fields[4][i] = p * q
            }
        }
        let ow = w - 2 * radius, oh = h - 2 * radius
        func blur(_ f: [Double]) -> [Double] {
            var horizontal = [Double](repeating: 0, count: ow * h)
            for y in 0..<h {
                for x in 0..<ow {
                    var s = 0.0
                    for k in 0...(2 * radius) { s += kernel[k] * f[y * w + x + k] }
                    horizontal[y * ow + x] = s
                }
            }
            var out = [Double](repeating: 0, count: ow * oh)
            for y in 0..<oh {
                for x in 0..<ow {
                    var s = 0.0
                    for k in 0...(2 * radius) { s += kernel[k] * horizontal[(y + k) * ow + x] }
                    out[y * ow + x] = s
                }
            }
            return out
        }
        let m = fields.map(blur)
        let c1 = (0.01 * 255.0) * (0.01 * 255.0), c2 = (0.03 * 255.0) * (0.03 * 255.0)
        var sum = 0.0
        for i in 0..<(ow * oh) {
            let mu1 = m[0][i], mu2 = m[1][i]
            let s1 = m[2][i] - mu1 * mu1, s2 = m[3][i] - mu2 * mu2, s12 = m[4][i] - mu1 * mu2
            sum += ((2 * mu1 * mu2 + c1) * (2 * s12 + c2)) / ((mu1 * mu1 + mu2 * mu2 + c1) * (s1 + s2 + c2))
        }
        return sum / Double(ow * oh)
    }

    /// The top-left `width` x `height` samples of a plane, as a new plane.
    public static func crop(_ plane: Plane, width: Int, height: Int) -> Plane {
        let out = Plane(width: width, height: height)
        out.copy(from: plane.base, sourceStride: plane.stride)
        return out
    }
}
