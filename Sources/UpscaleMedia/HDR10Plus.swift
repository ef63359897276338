import CFFmpeg

/// HDR10+ dynamic metadata (SMPTE ST 2094-40, application 4) as the registered user data
/// (ITU-T T.35) that HEVC carries in a prefix SEI. FFmpeg 5.1's HEVC decoder parses it into
/// `AVDynamicHDRPlus` side data, but its libx265 wrapper writes none (and Debian's x265 is built
/// without its own HDR10+ input), so the message is written here from the parsed fields and put
/// into each output packet beside the captions (`CaptionSEI`). The scene statistics do not
/// depend on the picture's size; the pixel positions of extra processing windows (rare: phones
/// and mastering tools write one window, the whole picture) are scaled with the picture.
public enum HDR10Plus {
    /// The T.35 bytes (from the country code on) for `m` on a picture `scale` times the
    /// source's size, or nil when `m` is not a valid ST 2094-40 message (1-3 windows).
    public static func payload(_ m: AVDynamicHDRPlus, scale: (x: Double, y: Double), output: (width: Int, height: Int)) -> [UInt8]? {
        let windows = Int(m.num_windows)
        guard (1...3).contains(windows) else { return nil }
        var bits = BitWriter()
        // United States, SMPTE, ST 2094-40, application 4.
        bits.put(0xB5, 8)
        bits.put(0x003C, 16)
        bits.put(0x0001, 16)
        bits.put(4, 8)
        bits.put(Int(m.application_version), 8)
        bits.put(windows, 2)
        let params = [m.params.0, m.params.1, m.params.2]
        // A source pixel's place in the output, within the picture: the first output pixel it
        // covers (`Place.first`), its last, or the one holding its centre.
        enum Place { case first, last, centre }
        func place(_ v: Double, _ factor: Double, _ size: Int, _ at: Place) -> Int {
            let p: Double
            switch at {
            case .first: p = (v * factor).rounded(.down)
            case .last: p = ((v + 1) * factor).rounded(.up) - 1
            case .centre: p = ((v + 0.5) * factor).rounded(.down)
            }
            return min(pixel(p), size - 1)
        }
        // FFmpeg keeps the corners as pixel positions (denominator 1); a fraction is of the
        // picture's last row or column.
        func corner(_ r: AVRational, _ factor: Double, _ size: Int, _ at: Place) -> Int {
            r.den == 1 ? place(Double(r.num), factor, size, at) : pixel(fraction(r) * Double(size - 1))
        }
        for w in 1..<windows {
            let p = params[w]
            bits.put(corner(p.window_upper_left_corner_x, scale.x, output.width, .first), 16)
            bits.put(corner(p.window_upper_left_corner_y, scale.y, output.height, .first), 16)
            bits.put(corner(p.window_lower_right_corner_x, scale.x, output.width, .last), 16)
            bits.put(corner(p.window_lower_right_corner_y, scale.y, output.height, .last), 16)
            bits.put(place(Double(p.center_of_ellipse_x), scale.x, output.width, .centre), 16)
            bits.put(place(Double(p.center_of_ellipse_y), scale.y, output.height, .centre), 16)
            bits.put(Int(p.rotation_angle), 8)
            // The axes turn with the ellipse: under a stretch (--width with --height) the
            // geometric mean of the two factors stands for both.
            let axis = (scale.x * scale.y).squareRoot()
            bits.put(pixel(Double(p.semimajor_axis_internal_ellipse) * axis), 16)
            bits.put(pixel(Double(p.semimajor_axis_external_ellipse) * axis), 16)
            bits.put(pixel(Double(p.semiminor_axis_external_ellipse) * axis), 16)
            bits.put(Int(p.overlap_process_option.rawValue), 1)
        }
        bits.put(units(m.targeted_system_display_maximum_luminance, 1), 27)
        guard putTable(m.targeted_system_display_actual_peak_luminance_flag, m.targeted_system_display_actual_peak_luminance,
                       rows: m.num_rows_targeted_system_display_actual_peak_luminance,
                       columns: m.num_cols_targeted_system_display_actual_peak_luminance, into: &bits) else { return nil }
        for w in 0..<windows {
            let p = params[w]
            for v in [p.maxscl.0, p.maxscl.1, p.maxscl.2, p.average_maxrgb] { bits.put(units(v, 100_000), 17) }
            let count = Int(p.num_distribution_maxrgb_percentiles)
            guard count <= 15 else { return nil }
            bits.put(count, 4)
            withUnsafeBytes(of: p.distribution_maxrgb) { raw in
                let entries = raw.bindMemory(to: AVHDRPlusPercentile.self)
                for i in 0..<count {
                    bits.put(Int(entries[i].percentage), 7)
                    bits.put(units(entries[i].percentile, 100_000), 17)
                }
            }
            bits.put(units(p.fraction_bright_pixels, 1000), 10)
        }
        guard putTable(m.mastering_display_actual_peak_luminance_flag, m.mastering_display_actual_peak_luminance,
                       rows: m.num_rows_mastering_display_actual_peak_luminance,
                       columns: m.num_cols_mastering_display_actual_peak_luminance, into: &bits) else { return nil }
        for w in 0..<windows {
            let p = params[w]
            bits.put(Int(p.tone_mapping_flag), 1)
            if p.tone_mapping_flag != 0 {
                bits.put(units(p.knee_point_x, 4095), 12)
                bits.put(units(p.knee_point_y, 4095), 12)
                let anchors = Int(p.num_bezier_curve_anchors)
                guard anchors <= 15 else { return nil }
                bits.put(anchors, 4)
                withUnsafeBytes(of: p.bezier_curve_anchors) { raw in
                    let values = raw.bindMemory(to: AVRational.self)
                    for i in 0..<anchors { bits.put(units(values[i], 1023), 10) }
                }
            }
            bits.put(Int(p.color_saturation_mapping_flag), 1)
            if p.color_saturation_mapping_flag != 0 { bits.put(units(p.color_saturation_weight, 8), 6) }
        }
        return bits.bytes
    }

    /// An actual-peak-luminance flag and, where set, its rows x columns table of 4-bit values
    /// (in fifteenths) row by row; false where the size is outside the standard's 2...25.
    private static func putTable<Table>(_ flag: UInt8, _ table: Table, rows: UInt8, columns: UInt8, into bits: inout BitWriter) -> Bool {
        bits.put(Int(flag), 1)
        guard flag != 0 else { return true }
        let rows = Int(rows), columns = Int(columns)
        guard (2...25).contains(rows), (2...25).contains(columns) else { return false }
        bits.put(rows, 5)
        bits.put(columns, 5)
        withUnsafeBytes(of: table) { raw in
            let values = raw.bindMemory(to: AVRational.self)
            for i in 0..<rows { for j in 0..<columns { bits.put(units(values[i * 25 + j], 15), 4) } }
        }
        return true
    }

    private static func fraction(_ r: AVRational) -> Double { r.den == 0 ? 0 : Double(r.num) / Double(r.den) }

    /// `r` in units of 1/`denominator`, rounded (FFmpeg's own denominators give the numerator back).
    private static func units(_ r: AVRational, _ denominator: Int) -> Int {
        r.den == Int32(denominator) ? Int(r.num) : Int((fraction(r) * Double(denominator)).rounded())
    }

    private static func pixel(_ v: Double) -> Int { min(max(Int(v.rounded()), 0), 65535) }
}

/// Bits most significant first; a value outside its field's range is clamped to it.
struct BitWriter {
    private(set) var bytes: [UInt8] = []
    private var used = 8

    mutating func put(_ value: Int, _ width: Int) {
        let value = min(max(value, 0), (1 << width) - 1)
        for i in stride(from: width - 1, through: 0, by: -1) {
            if used == 8 {
                bytes.append(0)
                used = 0
            }
            if (value >> i) & 1 != 0 { bytes[bytes.count - 1] |= 0x80 >> UInt8(used) }
            used += 1
        }
    }
}
