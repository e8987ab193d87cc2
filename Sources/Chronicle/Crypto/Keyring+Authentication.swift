import ChronicleFormat
import ChronicleLog
import Foundation
import ChronicleSodium
import Synchronization

/// Authenticators: every event a member writes carries a keyed BLAKE2b-256 MAC over its
/// canonical encoding, and every member verifies every event it imports.
///
/// The MAC key is `crypto_kdf_derive_from_key(32, subkey id 3, context "chr.auth", data key)`;
/// the tag is `BLAKE2b-256(key: MAC key, Event.authenticatedBytes(keyID:))`.
extension Keyring {
    func authenticate(_ event: inout Event, with sealing: SealingKey) throws {
        let (id, key) = (sealing.id, sealing.key)
        let tag = event.authenticationTag(keyID: id, key: try authenticationKey(id, dataKey: key), encoded: nil)
        event.authenticator = Event.Authenticator(keyID: id, tag: tag)
    }

    /// The authentication subkey of data key `id`, derived once.
    func authenticationKey(_ id: KeyID, dataKey: SecureBytes) throws -> KeyedHash {
        if let key = state.withLock({ $0.authenticationKeys[id] }) { return key }
        let key = try KeyedHash(key: try KeyDerivation.derive(length: 32, id: 3, context: "chr.auth", from: dataKey), length: AuthenticationTag.length)
        state.withLock { $0.authenticationKeys[id] = key }
        return key
    }
}

extension Keyring: EventVerifier {
    func holdsKey(_ id: KeyID) -> Bool { state.withLock { $0.dataKeys[id] != nil } }

    /// Unwraps every data key of this store that its key source opens (for `verify`).
    /// - Throws: `.corruptMeta` when the key records cannot be listed.
    func unwrapLocalKeys() throws {
        for id in try keyRecords.wrappedKeyIDs() { _ = try? dataKey(id) }
    }

    /// `nil` when `event` carries a valid authenticator under a data key this keyring has
    /// unwrapped, else why not. Uses only keys already unwrapped (see ``prepareImport(_:)``).
    func verify(_ event: Event) -> String? {
        guard let authenticator = event.authenticator else { return "the event carries no authenticator" }
        return Self.verify(event, encoded: nil, key: verificationKey(authenticator.keyID))
    }

    /// The authentication subkey of data key `id`, when this keyring has unwrapped it.
    /// One lock on the warm path: the subkey is derived once per data key.
    private func verificationKey(_ id: KeyID) -> KeyedHash? {
        let (subkey, dataKey) = state.withLock { ($0.authenticationKeys[id], $0.dataKeys[id]) }
        return subkey ?? dataKey.flatMap { try? authenticationKey(id, dataKey: $0) }
    }

    private static func verify(_ event: Event, encoded: [UInt8]?, key: KeyedHash?) -> String? {
        guard let authenticator = event.authenticator else { return "the event carries no authenticator" }
        guard let key else { return "authenticated with key \(authenticator.keyID), which this replica's key source does not open" }
        let expected = event.authenticationTag(keyID: authenticator.keyID, key: key, encoded: encoded)
        guard expected.matches(authenticator.tag) else {
            return "the authenticator does not verify: altered, or made without the group's key"
        }
        return nil
    }

    func verifyOpaque(_ bytes: [UInt8]) -> (problem: String, awaitingKey: Bool)? {
        guard let (id, tagStart) = Event.trailingAuthenticator(bytes) else {
            return ("an item of a newer format without an authenticator where every format keeps it", false)
        }
        guard let key = verificationKey(id) else {
            return ("authenticated with key \(id), which this replica's key source does not open", true)
        }
        let (expected, tag) = bytes.withUnsafeBytes {
            (AuthenticationTag(hashing: UnsafeRawBufferPointer(rebasing: $0[..<tagStart]), key: key), AuthenticationTag(loading: $0, at: tagStart))
        }
        guard expected.matches(tag) else {
            return ("the authenticator does not verify: altered, or made without the group's key", false)
        }
        return nil
    }

    /// The events of a batch to verify per thread, at least: below this a thread hop costs more than it saves.
    static let verificationChunk = 512

    func verifyAll(_ events: [Event], encoded: [[UInt8]?]) -> [String?] {
        // Each key of the batch looked up once (a batch names a key or two), then no lock at all.
        var found: [KeyID: KeyedHash?] = [:]  // nil inside: a key this keyring does not open
        for event in events {
            guard let id = event.authenticator?.keyID, found[id] == nil else { continue }
            found[id] = .some(verificationKey(id))
        }
        let keys = found.compactMapValues { $0 }
        let encodings = encoded.count == events.count ? encoded : Array(repeating: nil, count: events.count)
        let chunks = max(1, min(ProcessInfo.processInfo.activeProcessorCount, events.count / Self.verificationChunk))
        let chunkSize = (events.count + chunks - 1) / chunks
        let verdicts = Mutex([String?](repeating: nil, count: events.count))
        let work = { @Sendable (chunk: Int) in
            let range = (chunk * chunkSize)..<min(events.count, (chunk + 1) * chunkSize)
            let results = range.map { index in
                Self.verify(events[index], encoded: encodings[index], key: events[index].authenticator.flatMap { keys[$0.keyID] })
            }
            verdicts.withLock { $0.replaceSubrange(range, with: results) }  // one lock per chunk
        }
        if chunks == 1 { work(0) } else { DispatchQueue.concurrentPerform(iterations: chunks, execute: work) }
        return verdicts.withLock { $0 }
    }
}

extension Keyring {
    /// The records a screening tries, in order: the batch's own, those most of its events name
    /// first, each with its quarantine id when the same record waits there already (a record sent
    /// again is tried in this import, not left behind a queue). Also the key ids the batch's
    /// events name. Records earlier batches left waiting are retried apart from any import
    /// (``retryWaitingRecords(release:)``).
    private func screeningOrder(_ range: EventRange) throws -> (candidates: [(WrappedKey, UInt64?)], named: Set<KeyID>) {
        var naming: [KeyID: Int] = [:]  // how many events of the batch name each key
        for event in range.events { for id in event.namedKeyIDs { naming[id, default: 0] += 1 } }
        for item in range.opaque { if let (id, _) = Event.trailingAuthenticator(item.bytes) { naming[id, default: 0] += 1 } }
        let ownRecords = range.keys.enumerated().sorted { (naming[$0.element.id] ?? 0, $1.offset) > (naming[$1.element.id] ?? 0, $0.offset) }
        let deferred = ownRecords.isEmpty ? [] : try keyRecords.deferredKeyRecords()
        let candidates = ownRecords.map { item in
            (item.element, deferred.first { $0.record == item.element }?.quarantineID)
        }
        return (candidates, Set(naming.keys))
    }

    /// Sorts the wrapped keys of a received range before its import transaction, and unwraps
    /// every data key its events are authenticated with, so the transaction runs no Argon2id.
    ///
    /// What a carrier can cost a member is bounded, and no junk stands in a genuine key's way:
    /// - Passphrase-wrapped keys whose cost is outside [travel cost, ``KeyDerivationCost/sensitive``]
    ///   are rejected unopened: a hostile record cannot make a device run a huge derivation.
    /// - A member opens only records whose key id an event needs: one of the batch, or one the
    ///   quarantine holds waiting for its key. Other records are ignored (never derived, stored
    ///   or quarantined); a store without an explicit key source keeps every key to relay it.
    /// - Each (salt, cost) is derived once (``unwrapReceived(_:source:)``), and a batch runs at
    ///   most ``derivationsPerBatch`` derivations, for its own records (those most of its events
    ///   name first), in `source`'s turns (``DerivationTurns``): what other sources queued delays
    ///   it by one run each. An import whose records need no derivation runs none and waits for
    ///   none. Records earlier imports left waiting are retried apart, on a thread of their own
    ///   (``retryWaitingRecords(release:)``).
    ///
    /// - Throws: `.corruptMeta` when this store's key records cannot be listed (a member would
    ///   otherwise quarantine genuine events whose keys it holds, saying nothing).
    func prepareImport(_ range: EventRange, source: String) throws -> KeyScreening {
        guard isMember else { return Self.screenWithoutKeyring(range, minimum: travelLimits) }
        var screening = KeyScreening()
        var derivations = 0
        var known = Set(try keyRecords.wrappedKeyIDs())
        var waiting: Set<KeyID>?  // read only when a record names no event of the batch
        let (candidates, named) = try screeningOrder(range)
        // Records a derivation showed before not to open (in this process or another) are not
        // derived again: a carrier's junk costs one derivation, once.
        let tagKey = try unopenedTagKey(needed: candidates.contains { $0.0.kind == .passphrase && !known.contains($0.0.id) })
        let tags = tagKey.map { key in candidates.map { Self.unopenedTag($0.0, key: key) } } ?? []
        let unopenedBefore = try keyRecords.unopened(tags)
        var unopenedNow: [[UInt8]] = []
        for (index, (record, quarantineID)) in candidates.enumerated() {
            if let quarantineID { screening.retired.append(quarantineID) }
            // A member stores the record that opens; another record under an id it holds is junk to it.
            if known.contains(record.id) { continue }
            if quarantineID == nil, !named.contains(record.id) {
                if waiting == nil { waiting = try keyRecords.waitingKeyIDs() }
                guard waiting?.contains(record.id) == true else { continue }
            }
            if let problem = Self.boundsProblem(record, minimum: travelLimits) {
                screening.rejected.append((record, .keyParametersOutOfBounds, problem))
                continue
            }
            if !tags.isEmpty, unopenedBefore.contains(tags[index]) {
                screening.rejected.append((record, .unopenableKey, "this store's key source did not open key \(record.id) when it was tried before"))
                continue
            }
            if needsDerivation(record) {
                let withinBatch = derivations < Self.derivationsPerBatch
                guard withinBatch, received.take(waited: quarantineID != nil) else {
                    screening.retired.removeAll { $0 == quarantineID }  // still waiting: stays where it is
                    if quarantineID == nil {
                        let why =
                            withinBatch
                            ? "this store derives at most \(received.perMinute) received keys a minute"
                            : "a batch runs at most \(Self.derivationsPerBatch) new key derivations"
                        screening.rejected.append((record, .derivationBudget, "waits for the next import: \(why)"))
                    }
                    continue
                }
                derivations += 1
            }
            do {
                let key = try unwrapReceived(record, source: source)
                state.withLock { $0.dataKeys[record.id] = key }
                screening.accepted.append(record)
                known.insert(record.id)
            } catch ChronicleError.wrongKey {
                // The record itself did not open under the KEK: remembered, never derived again.
                if !tags.isEmpty { unopenedNow.append(tags[index]) }
                screening.rejected.append((record, .unopenableKey, "this store's key source does not open key \(record.id)"))
            } catch {
                // The derivation failed (Argon2id could not get its memory): nothing is learnt of
                // the record, which waits for a later import.
                screening.retired.removeAll { $0 == quarantineID }
                if quarantineID == nil {
                    screening.rejected.append((record, .derivationBudget, "waits for the next import: its key derivation failed (\(error))"))
                }
            }
        }
        try keyRecords.rememberUnopened(unopenedNow)
        // A set: an honest range names a key or two, a hostile one a new key per event.
        for id in named where known.contains(id) {
            _ = try? dataKey(id)
        }
        return screening
    }

    /// The key of this member's tags of received records that did not open, when it has a
    /// passphrase and `needed`: a subkey of the KEK of its active key record (derived when the
    /// store opened), so a new passphrase tries every record again, and a tag tells a reader of
    /// the file nothing it could test a passphrase guess with, short of Argon2id.
    func unopenedTagKey(needed: Bool) throws -> SecureBytes? {
        guard needed, case .passphrase = sourceValue else { return nil }
        let active = try keyRecords.activeRecord()
        guard let active, active.kind == .passphrase else { return nil }
        return try KeyDerivation.derive(length: 32, id: 4, context: "chr.unop", from: try keks.kek(for: active))
    }

    /// A received record's tag (docs/FORMAT.md 7.2): BLAKE2b-128 of its bytes keyed with `key`.
    static func unopenedTag(_ record: WrappedKey, key: SecureBytes) -> [UInt8] {
        GenericHash.hash(record.encoded(), key: key, length: 16)
    }

    /// The screening of a store that verifies nothing (a relay): the records an item of the batch
    /// names, within the cost bounds, are kept to relay; a record no item names would never be
    /// sent on (ranges carry only named keys), so it is not kept.
    static func screenWithoutKeyring(_ range: EventRange, minimum: PasswordHash.Limits) -> KeyScreening {
        var screening = KeyScreening()
        let named = range.namedKeyIDs
        for record in range.keys where named.contains(record.id) {
            if let problem = boundsProblem(record, minimum: minimum) {
                screening.rejected.append((record, .keyParametersOutOfBounds, problem))
            } else {
                screening.accepted.append(record)
            }
        }
        return screening
    }

    /// The most Argon2id runs one received batch may cause (a group has a key or two per device);
    /// records past it wait for the next import.
    static let derivationsPerBatch = 4

    /// Why a received key record's derivation parameters are refused, or `nil`.
    static func boundsProblem(_ record: WrappedKey, minimum: PasswordHash.Limits) -> String? {
        guard record.kind == .passphrase else { return nil }
        let maximum = PasswordHash.Limits.sensitive
        guard record.limits.opsLimit >= minimum.opsLimit, record.limits.memLimit >= minimum.memLimit else {
            return "Argon2id cost \(record.limits.opsLimit) passes / \(record.limits.memLimit) bytes is below the travel minimum"
        }
        guard record.limits.opsLimit <= maximum.opsLimit, record.limits.memLimit <= maximum.memLimit else {
            return "Argon2id cost \(record.limits.opsLimit) passes / \(record.limits.memLimit) bytes is above SENSITIVE"
        }
        return nil
    }
}
