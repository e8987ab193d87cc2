package import ChronicleSodium

/// The 32-byte tag of an event's authenticator (keyed BLAKE2b-256), held inline so verifying a
/// received event allocates nothing for it.
package struct AuthenticationTag: Sendable, Equatable {
    package static let length = 32
    /// The bytes in memory order (never interpreted as numbers).
    private var words: SIMD4<UInt64>

    /// The tag whose bytes are `bytes`, or `nil` when they are not 32.
    package init?(bytes: [UInt8]) {
        guard bytes.count == Self.length else { return nil }
        self.init { output in output.copyBytes(from: bytes) }
    }

    /// The tag in the 32 bytes at `offset` of `buffer`; the caller has checked that they are there.
    package init(loading buffer: UnsafeRawBufferPointer, at offset: Int) {
        self.init { output in output.copyMemory(from: UnsafeRawBufferPointer(rebasing: buffer[offset..<offset + Self.length])) }
    }

    /// The tag `fill` writes into its 32-byte buffer.
    package init(filling fill: (UnsafeMutableRawBufferPointer) -> Void) {
        words = SIMD4()
        withUnsafeMutableBytes(of: &words) { fill($0) }
    }

    /// BLAKE2b-256 of `input` keyed with `key` (a 32-byte ``KeyedHash``).
    package init(hashing input: UnsafeRawBufferPointer, key: KeyedHash) {
        self.init { output in key.hash(input, into: output) }
    }

    package var bytes: [UInt8] { withUnsafeBytes(of: words) { Array($0) } }

    /// Appends the 32 bytes.
    package func write(to writer: inout ByteWriter) {
        withUnsafeBytes(of: words) { writer.raw($0) }
    }

    /// Whether the tags are equal, in time that does not depend on where they differ.
    package func matches(_ other: AuthenticationTag) -> Bool {
        let difference = words ^ other.words
        return (difference[0] | difference[1] | difference[2] | difference[3]) == 0
    }
}
