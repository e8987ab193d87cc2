/// Appends fixed-width big-endian integers and length-prefixed fields to a byte array.
struct ByteWriter {
    var bytes: [UInt8] = []

    init(capacity: Int = 64) { bytes.reserveCapacity(capacity) }

    mutating func u8(_ value: UInt8) { bytes.append(value) }
    mutating func u16(_ value: UInt16) { appendBigEndian(value) }
    mutating func u32(_ value: UInt32) { appendBigEndian(value) }
    mutating func u64(_ value: UInt64) { appendBigEndian(value) }
    mutating func raw(_ value: [UInt8]) { bytes += value }

    /// A field of at most 255 bytes, prefixed with its length as one byte.
    mutating func shortField(_ value: [UInt8]) {
        precondition(value.count <= 255, "short field over 255 bytes")  // callers validate first
        u8(UInt8(value.count))
        raw(value)
    }

    /// A field prefixed with its length as a 32-bit big-endian integer.
    mutating func longField(_ value: [UInt8]) {
        u32(UInt32(value.count))
        raw(value)
    }

    private mutating func appendBigEndian<T: FixedWidthInteger>(_ value: T) {
        withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
    }
}

/// Why a byte string did not decode.
struct DecodeFailure: Error, CustomStringConvertible {
    let description: String
}

/// Reads what ``ByteWriter`` wrote, checking every bound.
struct ByteReader {
    let bytes: [UInt8]
    private(set) var offset: Int

    init(_ bytes: [UInt8], offset: Int = 0) {
        self.bytes = bytes
        self.offset = offset
    }

    var remaining: Int { bytes.count - offset }
    var isAtEnd: Bool { offset == bytes.count }

    mutating func u8() throws(DecodeFailure) -> UInt8 {
        try need(1)
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func u16() throws(DecodeFailure) -> UInt16 { try bigEndian() }
    mutating func u32() throws(DecodeFailure) -> UInt32 { try bigEndian() }
    mutating func u64() throws(DecodeFailure) -> UInt64 { try bigEndian() }

    mutating func raw(_ count: Int) throws(DecodeFailure) -> [UInt8] {
        try need(count)
        defer { offset += count }
        return Array(bytes[offset..<offset + count])
    }

    mutating func shortField() throws(DecodeFailure) -> [UInt8] {
        try raw(Int(try u8()))
    }

    mutating func longField(limit: Int = Int(UInt32.max)) throws(DecodeFailure) -> [UInt8] {
        let count = Int(try u32())
        guard count <= limit else { throw DecodeFailure(description: "field of \(count) bytes over the limit of \(limit)") }
        return try raw(count)
    }

    func expectEnd() throws(DecodeFailure) {
        guard isAtEnd else { throw DecodeFailure(description: "\(remaining) unexpected trailing bytes") }
    }

    private mutating func need(_ count: Int) throws(DecodeFailure) {
        guard count >= 0, remaining >= count else {
            throw DecodeFailure(description: "truncated: needed \(count) bytes at offset \(offset), \(remaining) left")
        }
    }

    private mutating func bigEndian<T: FixedWidthInteger>() throws(DecodeFailure) -> T {
        let size = MemoryLayout<T>.size
        try need(size)
        var value: T = 0
        for index in offset..<offset + size { value = value << 8 | T(bytes[index]) }
        offset += size
        return value
    }
}

extension FixedWidthInteger {
    /// The integer as fixed-width big-endian bytes (sorts like the number in LMDB's default order).
    var bigEndianBytes: [UInt8] {
        withUnsafeBytes(of: self.bigEndian) { Array($0) }
    }

    /// Reads a big-endian integer from exactly `MemoryLayout<Self>.size` bytes.
    init?(bigEndianBytes bytes: [UInt8]) {
        guard bytes.count == MemoryLayout<Self>.size else { return nil }
        var value: Self = 0
        for byte in bytes { value = value << 8 | Self(byte) }
        self = value
    }
}
