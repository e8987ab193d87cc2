extension FixedWidthInteger {
    /// The integer as fixed-width big-endian bytes (sorts like the number in LMDB's default order).
    /// Inlinable: it runs several times per event in other modules, where an unspecialized
    /// generic call costs more than the bytes.
    @inlinable package var bigEndianBytes: [UInt8] {
        withUnsafeBytes(of: self.bigEndian) { Array($0) }
    }

    /// Reads a big-endian integer from exactly `MemoryLayout<Self>.size` bytes.
    @inlinable package init?(bigEndianBytes bytes: [UInt8]) {
        guard bytes.count == MemoryLayout<Self>.size else { return nil }
        var value: Self = 0
        for byte in bytes { value = value << 8 | Self(byte) }
        self = value
    }
}

extension Array where Element == UInt8 {
    /// These bytes followed by `value`'s big-endian bytes, in one allocation: a key made for
    /// every event written (`bytes + value.bigEndianBytes` makes three). Reserved and appended:
    /// `Array(unsafeUninitializedCapacity:)` and `Array(repeating:count:)` allocate through the
    /// standard library's unspecialized `_allocateBufferUninitialized`, about 450 instructions
    /// more under callgrind, where `reserveCapacity` takes a path specialized for bytes.
    @inlinable package func appendingBigEndian<T: FixedWidthInteger>(_ value: T) -> [UInt8] {
        var bytes = [UInt8]()
        bytes.reserveCapacity(count + MemoryLayout<T>.size)
        bytes.append(contentsOf: self)
        Swift.withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
        return bytes
    }
}
