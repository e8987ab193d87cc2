/// A key or a value lent to LMDB in place, without building an array first.
///
/// A write of one event passes LMDB a sequence as a key or a value five times, its dot and a
/// key's name once each; as arrays, each was an allocation and a free. Lent in place, a batch
/// costs 1,900 instructions less per set under callgrind (26.8 K, where the layout's floor is
/// 19.2 K). An enum rather than a protocol: a protocol's generic calls, left unspecialized
/// across modules, cost more than the arrays they saved.
package enum LMDBBytes {
    /// An array's bytes.
    case array([UInt8])
    /// An unsigned 64-bit integer as its eight big-endian bytes (the order LMDB's default
    /// comparison sorts sequences in), lent from the stack.
    case bigEndian(UInt64)
    /// A string's UTF-8 bytes (a view's key: a key's name), lent from the string's storage.
    case utf8(String)
    /// Three unsigned 64-bit integers' big-endian bytes in a row (24 bytes), composed on the
    /// stack: a dot's key (`Event.dot`: an origin's two halves, then a counter) without its array.
    case bigEndianWords(UInt64, UInt64, UInt64)

    /// Calls `body` with the bytes; the buffer is valid only during `body`.
    func withBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        switch self {
        case .array(let bytes):
            return try bytes.withUnsafeBytes(body)
        case .bigEndian(let value):
            return try withUnsafeBytes(of: value.bigEndian, body)
        case .utf8(let string):
            // A native string lends its storage; a bridged one (never in this process) is copied once.
            if let result = try string.utf8.withContiguousStorageIfAvailable({ try body(UnsafeRawBufferPointer($0)) }) {
                return result
            }
            return try Array(string.utf8).withUnsafeBytes(body)
        case .bigEndianWords(let first, let second, let third):
            return try withUnsafeBytes(of: (first.bigEndian, second.bigEndian, third.bigEndian)) { try body($0) }
        }
    }
}
