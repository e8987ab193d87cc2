/// Why a byte string did not decode.
package struct DecodeFailure: Error, CustomStringConvertible {
    package let description: String

    package init(description: String) { self.description = description }
}

/// Reads what ``ByteWriter`` wrote, checking every bound.
package struct ByteReader {
    package let bytes: [UInt8]
    private(set) var offset: Int

    package init(_ bytes: [UInt8], offset: Int = 0) {
        self.bytes = bytes
        self.offset = offset
    }

    package var remaining: Int { bytes.count - offset }
    package var isAtEnd: Bool { offset == bytes.count }

    package mutating func u8() throws(DecodeFailure) -> UInt8 {
        try need(1)
        defer { offset += 1 }
        return bytes[offset]
    }

    package mutating func u16() throws(DecodeFailure) -> UInt16 { try bigEndian() }
    package mutating func u32() throws(DecodeFailure) -> UInt32 { try bigEndian() }
    package mutating func u64() throws(DecodeFailure) -> UInt64 { try bigEndian() }

    package mutating func raw(_ count: Int) throws(DecodeFailure) -> [UInt8] {
        try need(count)
        defer { offset += count }
        return Array(bytes[offset..<offset + count])
    }

    /// A data key's 16-byte id.
    package mutating func keyID() throws(DecodeFailure) -> KeyID {
        try need(KeyID.length)
        defer { offset += KeyID.length }
        return bytes.withUnsafeBytes { KeyID(loading: $0, at: offset) }
    }

    package mutating func shortField() throws(DecodeFailure) -> [UInt8] {
        try raw(Int(try u8()))
    }

    package mutating func mediumField() throws(DecodeFailure) -> [UInt8] {
        try raw(Int(try u16()))
    }

    package mutating func longField(limit: Int = Int(UInt32.max)) throws(DecodeFailure) -> [UInt8] {
        let count = Int(try u32())
        guard count <= limit else { throw DecodeFailure(description: "field of \(count) bytes over the limit of \(limit)") }
        return try raw(count)
    }

    package func expectEnd() throws(DecodeFailure) {
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
