internal import CChronicleSodium

/// Key material in `sodium_malloc`ed memory: guarded pages, locked from swap
/// where the system allows, zeroed when freed.
///
/// The bytes are written once, in the initializer, and are read-only after
/// that. `description` never shows them.
///
/// `@unchecked Sendable` is safe here: the pointer and count are immutable
/// after `init`, the pointed-to bytes are never written after `init`
/// returns, and `sodium_free` runs only in `deinit`, when no other reference
/// exists.
package final class SecureBytes: @unchecked Sendable, CustomStringConvertible {
    private let pointer: UnsafeMutableRawPointer
    /// The number of bytes.
    package let count: Int

    /// Copies `bytes` into secure memory. The caller should wipe its own copy.
    package init(_ bytes: [UInt8]) throws(SodiumError) {
        try Sodium.initialize()
        guard let memory = sodium_malloc(max(bytes.count, 1)) else { throw .outOfMemory }
        pointer = memory
        count = bytes.count
        bytes.withUnsafeBytes { source in
            if let base = source.baseAddress { pointer.copyMemory(from: base, byteCount: source.count) }
        }
    }

    /// Fills `count` bytes of secure memory from the CSPRNG.
    package init(randomCount: Int) throws(SodiumError) {
        try Sodium.initialize()
        guard let memory = sodium_malloc(max(randomCount, 1)) else { throw .outOfMemory }
        pointer = memory
        count = randomCount
        randombytes_buf(pointer, randomCount)
    }

    /// Allocates `count` bytes and lets `fill` write them, once. When `fill` throws, the
    /// memory is freed once, by `deinit` (the object is whole by then: freeing it here too
    /// freed it twice and crashed the process).
    init(count: Int, fill: (UnsafeMutablePointer<UInt8>) throws -> Void) throws {
        try Sodium.initialize()
        guard let memory = sodium_malloc(max(count, 1)) else { throw SodiumError.outOfMemory }
        pointer = memory
        self.count = count
        try fill(pointer.assumingMemoryBound(to: UInt8.self))
    }

    deinit {
        sodium_free(pointer)  // zeroes before freeing
    }

    /// Lends the bytes to `body`; do not let them escape.
    package func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    /// Lends the bytes as a non-null typed pointer to the C functions of this module.
    func withPointer<R>(_ body: (UnsafePointer<UInt8>) throws -> R) rethrows -> R {
        try body(UnsafePointer(pointer.assumingMemoryBound(to: UInt8.self)))
    }

    /// A copy of the bytes in ordinary memory; wipe it with ``Sodium/wipe(_:)`` after use.
    package func copyBytes() -> [UInt8] {
        Array(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    package var description: String { "SecureBytes(\(count) bytes, redacted)" }
}
