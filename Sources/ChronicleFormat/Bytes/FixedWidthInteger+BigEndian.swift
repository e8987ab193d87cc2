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
    /// every event written (`bytes + value.bigEndianBytes` makes three).
    @inlinable package func appendingBigEndian<T: FixedWidthInteger>(_ value: T) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: count + MemoryLayout<T>.size) { buffer, initialized in
            let bytes = UnsafeMutableRawBufferPointer(buffer)
            self.withUnsafeBytes { bytes.copyMemory(from: $0) }
            bytes.storeBytes(of: value.bigEndian, toByteOffset: count, as: T.self)
            initialized = count + MemoryLayout<T>.size
        }
    }
}
