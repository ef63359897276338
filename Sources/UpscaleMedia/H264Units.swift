/// The NAL units of one H.264 packet, as far as deciding where a stream starts needs them.
///
/// MP4 and Matroska store each unit behind a big-endian length of 1, 2 or 4 bytes (the
/// `avcC` record in the extradata says which, in the low two bits of its fifth byte);
/// MPEG-TS and raw `.h264` streams separate units with start codes (00 00 01, or 00 00 00 01).
/// A unit's type is the low five bits of its first byte; 5 is a slice of an IDR picture.
enum H264Units {
    static let idrSlice: UInt8 = 5

    /// Whether `packet` holds a slice of an IDR picture. An unreadable length ends the walk
    /// with what was found so far.
    static func holdsIDR(_ packet: UnsafeBufferPointer<UInt8>, extradata: UnsafeBufferPointer<UInt8>?) -> Bool {
        types(in: packet, extradata: extradata).contains(idrSlice)
    }

    /// The types of the units in `packet`, in order.
    static func types(in packet: UnsafeBufferPointer<UInt8>, extradata: UnsafeBufferPointer<UInt8>?) -> [UInt8] {
        if let extradata, extradata.count >= 5, extradata[0] == 1 {
            return lengthPrefixed(packet, lengthSize: Int(extradata[4] & 3) + 1)
        }
        return startCoded(packet)
    }

    private static func lengthPrefixed(_ packet: UnsafeBufferPointer<UInt8>, lengthSize: Int) -> [UInt8] {
        var found: [UInt8] = []
        var at = 0
        while at + lengthSize < packet.count {
            var length = 0
            for i in 0..<lengthSize { length = length << 8 | Int(packet[at + i]) }
            at += lengthSize
            guard length > 0, at + length <= packet.count else { break }
            found.append(packet[at] & 0x1F)
            at += length
        }
        return found
    }

    private static func startCoded(_ packet: UnsafeBufferPointer<UInt8>) -> [UInt8] {
        var found: [UInt8] = []
        var zeros = 0
        var at = 0
        while at < packet.count {
            let byte = packet[at]
            if byte == 1 && zeros >= 2 && at + 1 < packet.count {
                found.append(packet[at + 1] & 0x1F)
                zeros = 0
                at += 2
                continue
            }
            zeros = byte == 0 ? zeros + 1 : 0
            at += 1
        }
        return found
    }
}
