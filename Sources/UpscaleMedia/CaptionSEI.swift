import CFFmpeg
import Foundation

/// Closed captions (CEA-608/708 as A/53 cc_data) written into an HEVC access unit as a prefix
/// SEI of registered user data, where libx264 writes them for H.264 and where players and
/// FFmpeg's decoder look for them. FFmpeg's libx265 wrapper (5.1) drops the captions it is given,
/// so the encoded packet gets them afterwards: one SEI unit before its first picture slice.
enum CaptionSEI {
    /// One SEI message holds at most 31 cc_data triplets (cc_count has five bits).
    static let tripletsPerMessage = 31

    /// The SEI unit carrying `ccData` (whole triplets; a trailing partial one is left out) and
    /// the `registered` user data messages (T.35 bytes from the country code on: HDR10+), with
    /// a four-byte start code, or nil when there is not one triplet and no other message.
    static func unit(_ ccData: [UInt8], registered: [[UInt8]] = []) -> [UInt8]? {
        let triplets = ccData.count / 3
        guard triplets > 0 || !registered.isEmpty else { return nil }
        // NAL header: type 39 (prefix SEI), layer 0, temporal id 0 (+1).
        var payload: [UInt8] = [39 << 1, 1]
        for message in registered {
            // Payload type 4; a size of 255 or more as runs of 0xFF, then the rest.
            payload += [4] + Array(repeating: 0xFF, count: message.count / 255) + [UInt8(message.count % 255)] + message
        }
        var first = 0
        while first < triplets {
            let count = min(tripletsPerMessage, triplets - first)
            // user_data_registered_itu_t_t35: United States (0xB5), ATSC (0x0031), "GA94",
            // cc_data (type 3): process_cc_data_flag with the count, em_data, the triplets, marker.
            var message: [UInt8] = [0xB5, 0x00, 0x31, 0x47, 0x41, 0x39, 0x34, 0x03, 0x40 | UInt8(count), 0xFF]
            message += ccData[(3 * first)..<(3 * (first + count))]
            message.append(0xFF)
            payload += [4, UInt8(message.count)] + message
            first += count
        }
        payload.append(0x80) // rbsp_trailing_bits
        return [0, 0, 0, 1] + escaped(payload)
    }

    /// `bytes` with emulation prevention: a 3 after every two zeros that a byte of 0...3 follows,
    /// so that no start code appears inside the unit.
    static func escaped(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [], zeros = 0
        out.reserveCapacity(bytes.count + bytes.count / 16)
        for b in bytes {
            if zeros >= 2 && b <= 3 {
                out.append(3)
                zeros = 0
            }
            out.append(b)
            zeros = b == 0 ? zeros + 1 : 0
        }
        return out
    }

    /// Where the access unit's first picture slice (a VCL unit, type 0...31) begins, at the
    /// first zero of its start code; nil when `bytes` is not in Annex B form (it does not open on
    /// a start code) or holds no slice.
    static func firstSlice(in bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        let n = bytes.count
        guard n >= 4, bytes[0] == 0, bytes[1] == 0, bytes[2] == 1 || (bytes[2] == 0 && bytes[3] == 1) else { return nil }
        var i = 0
        while i + 3 < n {
            if bytes[i] == 0, bytes[i + 1] == 0, bytes[i + 2] == 1 {
                if (bytes[i + 3] >> 1) & 0x3F < 32 { return i > 0 && bytes[i - 1] == 0 ? i - 1 : i }
                i += 3
            } else {
                i += 1
            }
        }
        return nil
    }

    /// Writes `ccData` and the `registered` messages into the HEVC packet before its first
    /// slice; false (the packet as it was) where the packet is not in Annex B form or has no slice.
    static func insert(_ ccData: [UInt8], registered: [[UInt8]] = [], into packet: UnsafeMutablePointer<AVPacket>) throws -> Bool {
        guard let unit = unit(ccData, registered: registered), let data = packet.pointee.data,
              let at = firstSlice(in: UnsafeBufferPointer(start: data, count: Int(packet.pointee.size))) else { return false }
        let oldSize = Int(packet.pointee.size)
        // Grows in place or into a new buffer (a copy where the packet's is shared).
        guard av_grow_packet(packet, Int32(unit.count)) >= 0, let grown = packet.pointee.data else {
            throw UpscaleError(.processing, "out of memory")
        }
        memmove(grown + at + unit.count, grown + at, oldSize - at)
        unit.withUnsafeBufferPointer { (grown + at).update(from: $0.baseAddress!, count: unit.count) }
        return true
    }
}
