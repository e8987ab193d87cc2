/// Appends fixed-width big-endian integers and length-prefixed fields to a byte array.
package struct ByteWriter {
    package var bytes: [UInt8] = []

    package init(capacity: Int = 64) { bytes.reserveCapacity(capacity) }

    package mutating func u8(_ value: UInt8) { bytes.append(value) }
    package mutating func u16(_ value: UInt16) { appendBigEndian(value) }
    package mutating func u32(_ value: UInt32) { appendBigEndian(value) }
    package mutating func u64(_ value: UInt64) { appendBigEndian(value) }
    package mutating func raw(_ value: [UInt8]) { bytes += value }
    /// A replica id's 16 bytes, written from its halves (no array of them first).
    package mutating func replicaID(_ id: ReplicaID) { fixedWidth(16) { $0.replicaID(id) } }

    /// Appends `count` bytes (at most 64) that `fill` writes in place, all of them: the fixed
    /// fields of a record at once, with one check of the array's capacity and uniqueness where
    /// an append a byte costs one each (an event and its view entry have 15 such integers).
    package mutating func fixedWidth(_ count: Int, _ fill: (inout FixedWidthFields) -> Void) {
        precondition(count <= Self.zeros.count, "fixed-width run over 64 bytes")
        let start = bytes.count
        bytes.append(contentsOf: Self.zeros[..<count])
        bytes.withUnsafeMutableBytes { raw in
            var fields = FixedWidthFields(raw: UnsafeMutableRawBufferPointer(rebasing: raw[start..<(start + count)]))
            fill(&fields)
            precondition(fields.offset == count, "fixed-width run of \(count) bytes filled \(fields.offset)")  // a caller's miscount
        }
    }

    private static let zeros = [UInt8](repeating: 0, count: 64)
    package mutating func raw(_ value: UnsafeRawBufferPointer) { bytes += value }

    /// A field of at most 255 bytes, prefixed with its length as one byte.
    package mutating func shortField(_ value: [UInt8]) {
        precondition(value.count <= 255, "short field over 255 bytes")  // callers validate first
        u8(UInt8(value.count))
        raw(value)
    }

    /// A string's UTF-8 bytes as a short field (without an array of them first).
    package mutating func shortField(utf8 value: String.UTF8View) {
        precondition(value.count <= 255, "short field over 255 bytes")  // callers validate first
        u8(UInt8(value.count))
        bytes.append(contentsOf: value)
    }

    /// A field of at most 65,535 bytes, prefixed with its length as a 16-bit big-endian integer.
    package mutating func mediumField(_ value: [UInt8]) {
        precondition(value.count <= 0xFFFF, "medium field over 65,535 bytes")  // callers truncate first
        u16(UInt16(value.count))
        raw(value)
    }

    /// A field prefixed with its length as a 32-bit big-endian integer.
    package mutating func longField(_ value: [UInt8]) {
        u32(UInt32(value.count))
        raw(value)
    }

    /// A byte at a time: each append is a few instructions inline, where appending the integer's
    /// bytes as a buffer went through the generic sequence path (a tenth of a batch's encoding).
    private mutating func appendBigEndian<T: FixedWidthInteger>(_ value: T) {
        var shift = T.bitWidth - 8
        while shift >= 0 {
            bytes.append(UInt8(truncatingIfNeeded: value >> shift))
            shift -= 8
        }
    }
}

/// The bytes of a ``ByteWriter/fixedWidth(_:_:)`` run, written in order: big-endian integers
/// stored straight into the array's storage.
package struct FixedWidthFields {
    let raw: UnsafeMutableRawBufferPointer
    private(set) var offset = 0

    init(raw: UnsafeMutableRawBufferPointer) { self.raw = raw }

    package mutating func u8(_ value: UInt8) {
        precondition(offset < raw.count, "fixed-width run overrun")  // a caller's miscount, never input
        raw[offset] = value
        offset += 1
    }

    package mutating func u64(_ value: UInt64) {
        precondition(offset + 8 <= raw.count, "fixed-width run overrun")  // a caller's miscount, never input
        raw.storeBytes(of: value.bigEndian, toByteOffset: offset, as: UInt64.self)
        offset += 8
    }

    package mutating func replicaID(_ id: ReplicaID) {
        u64(id.high)
        u64(id.low)
    }
}
