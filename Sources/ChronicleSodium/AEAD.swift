internal import CChronicleSodium

/// XChaCha20-Poly1305 IETF authenticated encryption (`crypto_aead_xchacha20poly1305_ietf_*`).
package enum AEAD {
    /// Key length in bytes (32).
    package static let keyBytes = Int(crypto_aead_xchacha20poly1305_ietf_KEYBYTES)
    /// Nonce length in bytes (24): long enough to pick at random for every message.
    package static let nonceBytes = Int(crypto_aead_xchacha20poly1305_ietf_NPUBBYTES)
    /// Authentication tag length in bytes (16).
    package static let tagBytes = Int(crypto_aead_xchacha20poly1305_ietf_ABYTES)

    /// Encrypts and authenticates `plaintext`, binding it to `associatedData`.
    /// - Returns: ciphertext followed by the tag.
    package static func seal(
        _ plaintext: [UInt8], associatedData: [UInt8], nonce: [UInt8], key: SecureBytes
    ) throws(SodiumError) -> [UInt8] {
        try Sodium.initialize()
        guard nonce.count == nonceBytes else { throw .invalidLength(what: "nonce", expected: nonceBytes, actual: nonce.count) }
        guard key.count == keyBytes else { throw .invalidLength(what: "key", expected: keyBytes, actual: key.count) }
        var output = [UInt8](repeating: 0, count: plaintext.count + tagBytes)
        var outputLength: UInt64 = 0
        key.withPointer { keyPointer in
            _ = crypto_aead_xchacha20poly1305_ietf_encrypt(
                &output, &outputLength,
                plaintext, UInt64(plaintext.count),
                associatedData, UInt64(associatedData.count),
                nil, nonce, keyPointer)
        }
        return output
    }

    /// Authenticates and decrypts `ciphertext` (ciphertext followed by the tag).
    /// - Throws: ``SodiumError/authenticationFailed`` when the key, nonce,
    ///   associated data or any byte does not match what was sealed.
    package static func open(
        _ ciphertext: [UInt8], associatedData: [UInt8], nonce: [UInt8], key: SecureBytes
    ) throws(SodiumError) -> [UInt8] {
        try Sodium.initialize()
        guard nonce.count == nonceBytes else { throw .invalidLength(what: "nonce", expected: nonceBytes, actual: nonce.count) }
        guard key.count == keyBytes else { throw .invalidLength(what: "key", expected: keyBytes, actual: key.count) }
        guard ciphertext.count >= tagBytes else { throw .authenticationFailed }
        var output = [UInt8](repeating: 0, count: ciphertext.count - tagBytes)
        var outputLength: UInt64 = 0
        let rc = key.withPointer { keyPointer in
            crypto_aead_xchacha20poly1305_ietf_decrypt(
                &output, &outputLength, nil,
                ciphertext, UInt64(ciphertext.count),
                associatedData, UInt64(associatedData.count),
                nonce, keyPointer)
        }
        guard rc == 0 else { throw .authenticationFailed }
        return output
    }
}
