import Foundation

/// An interpolation kernel: a weight function with finite support.
public enum Kernel: String, Sendable, CaseIterable {
    case lanczos3
    case lanczos2
    /// Catmull-Rom (Keys cubic with a = -0.5): interpolating, radius 2.
    case bicubic

    /// Half-width of the support in input samples at unit scale.
    public var radius: Double {
        switch self {
        case .lanczos3: return 3
        case .lanczos2, .bicubic: return 2
        }
    }

    public func weight(_ x: Double) -> Double {
        let t = abs(x)
        switch self {
        case .lanczos3: return Kernel.lanczos(t, lobes: 3)
        case .lanczos2: return Kernel.lanczos(t, lobes: 2)
        case .bicubic:
            if t < 1 { return (1.5 * t - 2.5) * t * t + 1 }
            if t < 2 { return ((-0.5 * t + 2.5) * t - 4) * t + 2 }
            return 0
        }
    }

    private static func lanczos(_ t: Double, lobes: Double) -> Double {
        if t < 1e-9 { return 1 }
        if t >= lobes { return 0 }
        let px = Double.pi * t
        return lobes * sin(px) * sin(px / lobes) / (px * px)
    }
}
