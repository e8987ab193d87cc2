import ChronicleSodium

/// The sealed form of a payload:
///
/// ```
/// u8    envelope version (1)
/// u8    algorithm (1 = XChaCha20-Poly1305 IETF)
/// [16]  data key id
/// [24]  nonce (random per event)
/// n+16  ciphertext and tag
/// ```
///
/// The associated data is a canonical encoding of every event field that
/// matters plus the header above (see ``associatedData(for:header:)``), so a
/// sealed value moved to another key or event, or re-dated, fails to open.
package struct Envelope: Sendable {
    package static let version: UInt8 = 1
    package static let algorithm: UInt8 = 1
    package static let headerLength = 2 + KeyID.length + 24
    /// What sealing adds to a payload: the header and the AEAD tag.
    package static let overhead = headerLength + 16

    package var keyID: KeyID
    package var nonce: [UInt8]
    package var ciphertext: [UInt8]

    package var header: [UInt8] { [Self.version, Self.algorithm] + keyID.bytes + nonce }

    package func encoded() -> [UInt8] { header + ciphertext }

    package init(keyID: KeyID, nonce: [UInt8], ciphertext: [UInt8]) {
        self.keyID = keyID
        self.nonce = nonce
        self.ciphertext = ciphertext
    }

    package init(decoding bytes: [UInt8]) throws(DecodeFailure) {
        var reader = ByteReader(bytes)
        let version = try reader.u8()
        guard version == Self.version else { throw DecodeFailure(description: "envelope version \(version) is not supported") }
        let algorithm = try reader.u8()
        guard algorithm == Self.algorithm else { throw DecodeFailure(description: "cipher \(algorithm) is not supported") }
        keyID = try reader.keyID()
        nonce = try reader.raw(AEAD.nonceBytes)
        ciphertext = try reader.raw(reader.remaining)
        guard ciphertext.count >= AEAD.tagBytes else { throw DecodeFailure(description: "sealed payload shorter than its tag") }
    }

    /// The fields a seal binds: origin, counter, HLC, domain, key, op, policy, encoding, and the envelope header.
    package static func associatedData(
        origin: ReplicaID, counter: UInt64, hlc: HLC, domain: Domain, key: String, op: ChangeOperation,
        policy: SyncPolicy, encoding: UInt8, header: [UInt8]
    ) -> [UInt8] {
        var writer = ByteWriter(capacity: 96 + key.utf8.count)
        writer.raw(Array("chronicle.seal.v1".utf8))
        writer.replicaID(origin)
        writer.u64(counter)
        writer.u64(hlc.rawValue)
        writer.u8(domain.rawValue)
        writer.shortField(utf8: key.utf8)
        writer.u8(op.rawValue)
        writer.u8(policy.rawValue)
        writer.u8(encoding)
        writer.longField(header)
        return writer.bytes
    }

    package static func associatedData(for event: Event, header: [UInt8]) -> [UInt8] {
        associatedData(
            origin: event.origin, counter: event.counter, hlc: event.hlc, domain: event.domain, key: event.key,
            op: event.op, policy: event.policy, encoding: event.encoding, header: header)
    }
}
