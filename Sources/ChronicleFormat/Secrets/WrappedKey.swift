package import ChronicleSodium

/// How a key-encryption key was obtained.
package enum KeyEncryptionKind: UInt8, Sendable {
    case passphrase = 1
    case keyFile = 2
    case provider = 3
}

/// A data key sealed under a key-encryption key, as stored in `meta` and as it
/// travels between replicas (the plaintext data key never leaves memory).
///
/// ```
/// u8    record version (1)
/// [16]  key id
/// u8    KEK kind (1 passphrase, 2 key file, 3 provider)
/// [16]  Argon2id salt (zeros unless passphrase)
/// u64   Argon2id opslimit, u64 memlimit (0 unless passphrase)
/// u64   creation time, Unix ms
/// [24]  nonce
/// u32+n sealed data key (AEAD, associated data = "chronicle.datakey.v1" ‖ every field above the nonce)
/// ```
/// docs/FORMAT.md, section 6.2, is the reference.
package struct WrappedKey: Sendable, Equatable {
    package static let version: UInt8 = 1

    package var id: KeyID
    package var kind: KeyEncryptionKind
    package var salt: [UInt8]
    package var limits: PasswordHash.Limits
    package var created: UInt64
    package var nonce: [UInt8]
    package var sealedKey: [UInt8]

    package var header: [UInt8] {
        var writer = ByteWriter(capacity: 80)
        writer.u8(Self.version)
        writer.raw(id.bytes)
        writer.u8(kind.rawValue)
        writer.raw(salt)
        writer.u64(limits.opsLimit)
        writer.u64(limits.memLimit)
        writer.u64(created)
        return writer.bytes
    }

    package func encoded() -> [UInt8] {
        var writer = ByteWriter(capacity: 140)
        writer.raw(header)
        writer.raw(nonce)
        writer.longField(sealedKey)
        return writer.bytes
    }

    package init(id: KeyID, kind: KeyEncryptionKind, salt: [UInt8], limits: PasswordHash.Limits, created: UInt64, nonce: [UInt8], sealedKey: [UInt8]) {
        self.id = id
        self.kind = kind
        self.salt = salt
        self.limits = limits
        self.created = created
        self.nonce = nonce
        self.sealedKey = sealedKey
    }

    /// Whether `bytes` is a wrapped-key record of a version or key-encryption kind this build does
    /// not know, with the prefix every version keeps (`u8 version ‖ [16] key id`, FORMAT.md 6.2).
    package static func isOfNewerKind(_ bytes: [UInt8]) -> Bool {
        guard bytes.count >= 1 + KeyID.length + 1, bytes[0] >= 1 else { return false }
        return bytes[0] != version || KeyEncryptionKind(rawValue: bytes[1 + KeyID.length]) == nil
    }

    /// The key id of a record of any version (see ``isOfNewerKind(_:)``).
    package static func keyID(ofRecord bytes: [UInt8]) -> KeyID? {
        guard bytes.count >= 1 + KeyID.length else { return nil }
        return KeyID(bytes: bytes[1..<(1 + KeyID.length)])
    }

    /// Decodes a wrapped key; refuses KDF limits that could freeze a device.
    package init(decoding bytes: [UInt8]) throws(DecodeFailure) {
        var reader = ByteReader(bytes)
        let version = try reader.u8()
        guard version == Self.version else { throw DecodeFailure(description: "wrapped key version \(version) is not supported") }
        id = try reader.keyID()
        let kindByte = try reader.u8()
        guard let kind = KeyEncryptionKind(rawValue: kindByte) else { throw DecodeFailure(description: "unknown key-encryption kind \(kindByte)") }
        self.kind = kind
        salt = try reader.raw(PasswordHash.saltBytes)
        limits = PasswordHash.Limits(opsLimit: try reader.u64(), memLimit: try reader.u64())
        created = try reader.u64()
        nonce = try reader.raw(AEAD.nonceBytes)
        sealedKey = try reader.longField(limit: 1024)
        try reader.expectEnd()
    }

    /// Seals `dataKey` under `kek`.
    package static func wrap(
        _ dataKey: SecureBytes, id: KeyID, kind: KeyEncryptionKind, salt: [UInt8], limits: PasswordHash.Limits,
        created: UInt64, kek: SecureBytes
    ) throws(SodiumError) -> WrappedKey {
        var record = WrappedKey(id: id, kind: kind, salt: salt, limits: limits, created: created, nonce: Sodium.randomBytes(AEAD.nonceBytes), sealedKey: [])
        var plain = dataKey.copyBytes()
        defer { Sodium.wipe(&plain) }
        record.sealedKey = try AEAD.seal(plain, associatedData: record.associatedData, nonce: record.nonce, key: kek)
        return record
    }

    /// Opens the data key with `kek`.
    package func unwrap(with kek: SecureBytes) throws(SodiumError) -> SecureBytes {
        var plain = try AEAD.open(sealedKey, associatedData: associatedData, nonce: nonce, key: kek)
        defer { Sodium.wipe(&plain) }
        return try SecureBytes(plain)
    }

    private var associatedData: [UInt8] { Array("chronicle.datakey.v1".utf8) + header }
}
