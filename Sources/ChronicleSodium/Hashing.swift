internal import CChronicleSodium

/// BLAKE2b (`crypto_generichash`), optionally keyed.
package enum GenericHash {
    /// The output length used for chain hashes (32 bytes).
    package static let defaultLength = Int(crypto_generichash_BYTES)
    /// The key length used for keyed hashes (32 bytes).
    package static let keyLength = Int(crypto_generichash_KEYBYTES)

    /// Hashes the concatenation of `parts`, keyed with `key` when given.
    package static func hash(_ parts: [[UInt8]], key: SecureBytes? = nil, length: Int = defaultLength) -> [UInt8] {
        var input: [UInt8] = []
        input.reserveCapacity(parts.reduce(0) { $0 + $1.count })
        for part in parts { input += part }
        return hash(input, key: key, length: length)
    }

    /// Hashes `input`, keyed with `key` when given.
    package static func hash(_ input: [UInt8], key: SecureBytes? = nil, length: Int = defaultLength) -> [UInt8] {
        input.withUnsafeBytes { hash($0, key: key, length: length) }
    }

    /// Hashes the bytes `input` points to (a slice of a larger buffer, without copying it).
    package static func hash(_ input: UnsafeRawBufferPointer, key: SecureBytes? = nil, length: Int = defaultLength) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: length)
        let bytes = input.baseAddress?.assumingMemoryBound(to: UInt8.self)
        if let key {
            key.withPointer { keyPointer in
                _ = crypto_generichash(&output, length, bytes, UInt64(input.count), keyPointer, key.count)
            }
        } else {
            _ = crypto_generichash(&output, length, bytes, UInt64(input.count), nil, 0)
        }
        return output
    }
}

/// Per-purpose subkeys from a master key (`crypto_kdf_derive_from_key`, BLAKE2b based).
package enum KeyDerivation {
    /// Derives subkey number `id` for the 8-character `context` from `key` (32 bytes).
    package static func derive(
        length: Int = 32, id: UInt64, context: String, from key: SecureBytes
    ) throws(SodiumError) -> SecureBytes {
        let contextBytes = Array(context.utf8)
        guard contextBytes.count == Int(crypto_kdf_CONTEXTBYTES) else {
            throw .invalidLength(what: "KDF context", expected: Int(crypto_kdf_CONTEXTBYTES), actual: contextBytes.count)
        }
        guard key.count == Int(crypto_kdf_KEYBYTES) else {
            throw .invalidLength(what: "KDF key", expected: Int(crypto_kdf_KEYBYTES), actual: key.count)
        }
        do {
            return try SecureBytes(count: length) { output in
                let rc = key.withPointer { keyPointer in
                    context.withCString { cContext in
                        crypto_kdf_derive_from_key(output, length, id, cContext, keyPointer)
                    }
                }
                if rc != 0 { throw SodiumError.keyDerivationFailed }
            }
        } catch let error as SodiumError {
            throw error
        } catch {
            throw .keyDerivationFailed
        }
    }
}

/// Argon2id password hashing (`crypto_pwhash` with `crypto_pwhash_ALG_ARGON2ID13`).
package enum PasswordHash {
    /// Salt length in bytes (16).
    package static let saltBytes = Int(crypto_pwhash_SALTBYTES)

    /// Cost parameters; stored beside the salt, never assumed from constants.
    package struct Limits: Sendable, Hashable {
        /// Number of passes.
        package var opsLimit: UInt64
        /// Memory in bytes.
        package var memLimit: UInt64

        /// Creates limits from explicit values.
        package init(opsLimit: UInt64, memLimit: UInt64) {
            self.opsLimit = opsLimit
            self.memLimit = memLimit
        }

        /// libsodium's interactive limits (2 passes, 64 MiB).
        package static let interactive = Limits(
            opsLimit: UInt64(crypto_pwhash_OPSLIMIT_INTERACTIVE), memLimit: UInt64(crypto_pwhash_MEMLIMIT_INTERACTIVE))
        /// libsodium's moderate limits (3 passes, 256 MiB).
        package static let moderate = Limits(
            opsLimit: UInt64(crypto_pwhash_OPSLIMIT_MODERATE), memLimit: UInt64(crypto_pwhash_MEMLIMIT_MODERATE))
        /// libsodium's sensitive limits (4 passes, 1 GiB).
        package static let sensitive = Limits(
            opsLimit: UInt64(crypto_pwhash_OPSLIMIT_SENSITIVE), memLimit: UInt64(crypto_pwhash_MEMLIMIT_SENSITIVE))
        /// The smallest limits libsodium accepts (for tests only).
        package static let minimum = Limits(
            opsLimit: UInt64(crypto_pwhash_OPSLIMIT_MIN), memLimit: UInt64(crypto_pwhash_MEMLIMIT_MIN))

        /// These limits clamped into `[lower, upper]`, field by field.
        package func clamped(to lower: Limits, _ upper: Limits) -> Limits {
            Limits(
                opsLimit: min(max(opsLimit, lower.opsLimit), upper.opsLimit),
                memLimit: min(max(memLimit, lower.memLimit), upper.memLimit))
        }
    }

    /// Derives a `length`-byte key from `password` and `salt` with Argon2id.
    package static func deriveKey(
        length: Int = 32, password: [UInt8], salt: [UInt8], limits: Limits
    ) throws(SodiumError) -> SecureBytes {
        try Sodium.initialize()
        guard salt.count == saltBytes else { throw .invalidLength(what: "salt", expected: saltBytes, actual: salt.count) }
        do {
            return try SecureBytes(count: length) { output in
                // A zero byte stands in for an empty password's missing buffer (length 0 is passed).
                let buffer: [CChar] = password.isEmpty ? [0] : password.map { CChar(bitPattern: $0) }
                let rc = crypto_pwhash(
                    output, UInt64(length), buffer, UInt64(password.count), salt,
                    limits.opsLimit, Int(limits.memLimit), crypto_pwhash_ALG_ARGON2ID13)
                if rc != 0 { throw SodiumError.keyDerivationFailed }
            }
        } catch let error as SodiumError {
            throw error
        } catch {
            throw .keyDerivationFailed
        }
    }
}
