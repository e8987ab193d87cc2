internal import CChronicleSodium

/// Errors from the libsodium wrapper.
package enum SodiumError: Error, Sendable, Equatable, CustomStringConvertible {
    /// `sodium_init` failed; libsodium cannot be used.
    case initializationFailed
    /// An AEAD ciphertext did not authenticate: wrong key, wrong associated data or altered bytes.
    case authenticationFailed
    /// A key, nonce or salt had the wrong length.
    case invalidLength(what: String, expected: Int, actual: Int)
    /// Key derivation ran out of memory or was given out-of-range limits.
    case keyDerivationFailed
    /// Secure memory could not be allocated.
    case outOfMemory

    package var description: String {
        switch self {
        case .initializationFailed: "libsodium could not be initialized"
        case .authenticationFailed: "the ciphertext did not authenticate (wrong key, wrong context or altered bytes)"
        case let .invalidLength(what, expected, actual): "\(what) must be \(expected) bytes, got \(actual)"
        case .keyDerivationFailed: "key derivation failed (out of memory or invalid limits)"
        case .outOfMemory: "secure memory could not be allocated"
        }
    }
}

/// Entry points of the wrapper that do not belong to one primitive.
package enum Sodium {
    private static let initialized: Bool = sodium_init() >= 0

    /// Initializes libsodium once per process (thread-safe, idempotent).
    package static func initialize() throws(SodiumError) {
        if !initialized { throw .initializationFailed }
    }

    /// `count` bytes from the operating system's CSPRNG.
    package static func randomBytes(_ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        if count > 0 { randombytes_buf(&bytes, count) }
        return bytes
    }

    /// Compares two byte strings in constant time (for equal lengths).
    package static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        if a.isEmpty { return true }
        return sodium_memcmp(a, b, a.count) == 0
    }

    /// Overwrites the array's bytes with zeros in a way the compiler cannot elide.
    /// Zeroes the storage an array shares with every copy of it, without making a copy first
    /// (``wipe(_:)`` on a shared array zeroes a fresh copy and leaves the original bytes).
    ///
    /// Every value that shares the storage reads zeros afterwards: call it only when no holder
    /// needs the bytes any more (a plaintext after its transaction committed).
    package static func wipeShared(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { buffer in
            guard let base = buffer.baseAddress, buffer.count > 0 else { return }
            // Writing through the read-only view is deliberate: the point is to reach the shared
            // storage itself rather than let copy-on-write give us a private copy to zero.
            sodium_memzero(UnsafeMutableRawPointer(mutating: base), buffer.count)
        }
    }

    /// Zeroes an array's bytes (after making its storage unique, so only this value's bytes).
    package static func wipe(_ bytes: inout [UInt8]) {
        let count = bytes.count
        guard count > 0 else { return }
        bytes.withUnsafeMutableBytes { buffer in
            sodium_memzero(buffer.baseAddress, count)
        }
    }
}
