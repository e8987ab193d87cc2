import ChronicleFormat
import ChronicleLog
import ChronicleSodium
import Foundation
import Synchronization

extension Keyring {
    // MARK: - Sealing

    /// Seals an event's payload in place (inside the write transaction that appends it).
    func seal(_ event: inout Event, with sealing: SealingKey) throws {
        let (id, key) = (sealing.id, sealing.key)
        let nonce = Sodium.randomBytes(AEAD.nonceBytes)
        let header = Envelope(keyID: id, nonce: nonce, ciphertext: []).header
        event.sealed = true
        let associatedData = Envelope.associatedData(for: event, header: header)
        let ciphertext = try AEAD.seal(event.payload, associatedData: associatedData, nonce: nonce, key: key)
        // The plaintext's storage is shared with the pending change (a retried transaction seals
        // it again): the committer wipes it once the commit is over (`wipePlaintexts`).
        event.payload = Envelope(keyID: id, nonce: nonce, ciphertext: ciphertext).encoded()
    }

    /// Opens a sealed view entry of `key` in `domain`.
    func open(_ entry: ViewEntry, domain: Domain, key: String) throws -> [UInt8] {
        let envelope: Envelope
        do { envelope = try Envelope(decoding: entry.payload) } catch {
            throw ChronicleError.tampered(sequence: entry.sequence, key: key)
        }
        let dataKey = try dataKey(envelope.keyID)
        let associatedData = Envelope.associatedData(
            origin: entry.origin, counter: entry.counter, hlc: entry.hlc, domain: domain, key: key, op: entry.op,
            policy: entry.policy, encoding: entry.encoding, header: envelope.header)
        do {
            return try AEAD.open(envelope.ciphertext, associatedData: associatedData, nonce: envelope.nonce, key: dataKey)
        } catch {
            throw ChronicleError.tampered(sequence: entry.sequence, key: key)
        }
    }
}
