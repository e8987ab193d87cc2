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

    /// A data key's 16-byte id.
    mutating func keyID() throws(DecodeFailure) -> KeyID {
        try need(KeyID.length)
        defer { offset += KeyID.length }
        return bytes.withUnsafeBytes { KeyID(loading: $0, at: offset) }
    }

    mutating func shortField() throws(DecodeFailure) -> [UInt8] {
        try raw(Int(try u8()))
    }

    mutating func mediumField() throws(DecodeFailure) -> [UInt8] {
        try raw(Int(try u16()))
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
