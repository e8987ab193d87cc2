internal import CChronicleSodium

/// BLAKE2b keyed with one key, set up once.
///
/// Keeps the state `crypto_generichash_init` leaves with the key (its padded key block
/// buffered: as secret as the key itself, so in `sodium_malloc`ed memory) and starts each hash
/// from a copy of it: no per-hash parameter setup, and callers absorb an input in parts without
/// first copying them into one buffer. The result is exactly `crypto_generichash(out, length,
/// input, key)`. libsodium compresses the buffered key block together with the first input, so
/// a keyed hash still costs one 128-byte block more than an unkeyed one.
package final class KeyedHash: Sendable {
    /// The output length in bytes.
    package let length: Int
    private let state: SecureBytes
    private static let stateBytes = crypto_generichash_statebytes()
    /// libsodium declares its state 64-byte aligned.
    private static let stateAlignment = 64

    /// A hasher keyed with `key` (16...64 bytes) whose outputs are `length` (16...64) bytes.
    /// - Throws: ``SodiumError/invalidLength(what:expected:actual:)`` for a key or length out of range,
    ///   ``SodiumError/outOfMemory`` when no secure memory is left.
    package init(key: SecureBytes, length: Int = GenericHash.defaultLength) throws {
        guard (16...64).contains(key.count) else { throw SodiumError.invalidLength(what: "BLAKE2b key", expected: 32, actual: key.count) }
        guard (16...64).contains(length) else { throw SodiumError.invalidLength(what: "BLAKE2b output", expected: 32, actual: length) }
        self.length = length
        state = try SecureBytes(count: Self.stateBytes) { stored in
            try Self.withScratchState { scratch in
                let status = key.withPointer { crypto_generichash_init(scratch, $0, key.count, length) }
                guard status == 0 else { throw SodiumError.invalidLength(what: "BLAKE2b key", expected: 32, actual: key.count) }
                UnsafeMutableRawPointer(stored).copyMemory(from: UnsafeRawPointer(scratch), byteCount: Self.stateBytes)
            }
        }
    }

    /// Feeds the bytes of one hash to BLAKE2b, in order.
    package struct Absorber: ~Copyable {
        /// A `crypto_generichash_state` (Swift sees it as opaque: it is declared 64-byte aligned).
        fileprivate let state: OpaquePointer

        /// Appends `bytes` to the hashed input.
        package func absorb(_ bytes: UnsafeRawBufferPointer) {
            _ = crypto_generichash_update(state, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(bytes.count))
        }

        /// Appends `bytes` to the hashed input.
        package func absorb(_ bytes: [UInt8]) { bytes.withUnsafeBytes { absorb($0) } }
    }

    /// Hashes what `feed` absorbs into `output` (``length`` bytes).
    package func hash(into output: UnsafeMutableRawBufferPointer, _ feed: (borrowing Absorber) -> Void) {
        // A caller's fixed size: a wrong one is a programming error, never input.
        precondition(output.count == length, "KeyedHash output of the wrong length")
        guard let out = output.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return }
        Self.withScratchState { scratch in
            state.withUnsafeBytes { stored in
                if let base = stored.baseAddress { UnsafeMutableRawPointer(scratch).copyMemory(from: base, byteCount: Self.stateBytes) }
            }
            feed(Absorber(state: scratch))
            _ = crypto_generichash_final(scratch, out, length)
        }
    }

    /// The hash of `input` into `output` (``length`` bytes).
    package func hash(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) {
        hash(into: output) { $0.absorb(input) }
    }

    /// The hash of what `feed` absorbs.
    package func hash(_ feed: (borrowing Absorber) -> Void) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: length)
        output.withUnsafeMutableBytes { hash(into: $0, feed) }
        return output
    }

    /// The hash of the concatenation of `parts`.
    package func hash(_ parts: [[UInt8]]) -> [UInt8] {
        hash { absorber in for part in parts { absorber.absorb(part) } }
    }

    /// The unkeyed hash (``GenericHash``) of what `feed` absorbs, into `output` (16...64 bytes,
    /// its whole length): no input buffer to build.
    package static func unkeyed(into output: UnsafeMutableRawBufferPointer, _ feed: (borrowing Absorber) -> Void) {
        guard let out = output.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return }
        withScratchState { scratch in
            _ = crypto_generichash_init(scratch, nil, 0, output.count)
            feed(Absorber(state: scratch))
            _ = crypto_generichash_final(scratch, out, output.count)
        }
    }

    /// Runs `body` with an aligned state on the stack, zeroed afterwards (it held key material).
    private static func withScratchState<R>(_ body: (OpaquePointer) throws -> R) rethrows -> R {
        // Over-allocated at a plain alignment and aligned by hand: a temporary allocation aligned
        // to 64 bytes goes to the heap (posix_memalign once per hash, 7% of a replay), one
        // aligned to 16 stays on the stack.
        try withUnsafeTemporaryAllocation(byteCount: stateBytes + stateAlignment, alignment: 16) { buffer in
            // A non-empty allocation always has a base address. Rounding it up to the next
            // multiple of 64 moves it by at most 63 bytes, so `stateBytes` from there stay inside
            // the allocation, aligned as libsodium asks: binding them to the state type is sound.
            let state = buffer.baseAddress.unsafelyUnwrapped.alignedUp(toMultipleOf: stateAlignment)
            defer { sodium_memzero(state, stateBytes) }
            return try body(OpaquePointer(state))
        }
    }
}
