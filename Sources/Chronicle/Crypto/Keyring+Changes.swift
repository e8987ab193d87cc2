import ChronicleFormat
import ChronicleLog
import ChronicleSodium
import Foundation
import Synchronization

extension Keyring {
    // MARK: - Changing keys

    /// Re-wraps every data key under a new key source; the data keys (and so every sealed event) stay.
    func changeSource(to newSource: Source) throws {
        // Every Argon2id run (unwrapping with the old source, one fresh salt for the new) happens
        // before the write transaction.
        let records = try keyRecords.wrappedKeys()
        var unwrapped: [KeyID: SecureBytes] = [:]
        for record in records { unwrapped[record.id] = try unwrap(record) }
        let wrapping = try keks.wrappingKey(for: newSource, reusing: nil)
        let now = UnixMilliseconds.now()
        try keyRecords.rewrapAll { record in
            guard let key = unwrapped[record.id] ?? state.withLock({ $0.dataKeys[record.id] }) else {
                throw ChronicleError.storeUnavailable(reason: "a data key arrived during the change of key source; change it again")
            }
            return try WrappedKey.wrap(
                key, id: record.id, kind: wrapping.kind, salt: wrapping.salt, limits: wrapping.limits, created: now, kek: wrapping.kek)
        }
        keks.replaceSource(with: newSource)  // and forgets the KEKs of the old passphrase
    }

    /// Makes a new data key active; older keys keep opening older events.
    func rotate() throws -> KeyID {
        // In one write transaction with the store of the record: a change of key source commits
        // before it (and rewraps the new key) or after it.
        try keyRecords.activateNewKey { active in try newKey(reusing: active).2 }
    }

    /// Every wrapped data key (never a plaintext key).
    func wrappedKeys() throws -> [WrappedKey] {
        try keyRecords.wrappedKeys()
    }

    /// Stores wrapped keys received from another replica, after checking that each unwraps here.
    func importWrapped(_ records: [WrappedKey]) throws -> Int {
        let existing = Set(try wrappedKeys().map(\.id))
        let fresh = records.filter { !existing.contains($0.id) }
        for record in fresh {
            if let problem = Self.boundsProblem(record, minimum: travelLimits) {
                throw ChronicleError.malformedInput("wrapped key \(record.id): \(problem)")
            }
        }
        let unwrapped = try fresh.map { ($0, try unwrap($0)) }  // all or nothing: .wrongKey before any write
        try keyRecords.putWrappedKeys(unwrapped.map(\.0))
        state.withLock { state in
            for (record, key) in unwrapped { state.dataKeys[record.id] = key }
        }
        return unwrapped.count
    }
}

extension Keyring {
    /// Gives every passphrase-wrapped data key below the travel cost a travel wrap (at the
    /// travel cost, under one fresh salt per keyring: one Argon2id run however many keys),
    /// outside any write transaction. Ranges, mailboxes, exports and HTTP then carry the
    /// travel wraps (see ``EventLog/travelKey(_:_:)``).
    func prepareTravelKeys() throws {
        guard case let .passphrase(passphrase, _) = sourceValue else { return }
        let travel = travelLimits
        let missing = try keyRecords.wrappedKeysWithoutTravelWrap().filter { record in
            record.kind == .passphrase && (record.limits.opsLimit < travel.opsLimit || record.limits.memLimit < travel.memLimit)
        }
        guard !missing.isEmpty else { return }
        let salt = state.withLock { state in
            if state.travelSalt == nil { state.travelSalt = Sodium.randomBytes(PasswordHash.saltBytes) }
            return state.travelSalt ?? []
        }
        let kek = try keks.passphraseKEK(passphrase, salt: salt, limits: travel)
        let records = try missing.map { record in
            try WrappedKey.wrap(
                try dataKey(record.id), id: record.id, kind: .passphrase, salt: salt, limits: travel, created: record.created, kek: kek)
        }
        try keyRecords.putTravelKeys(records)
    }

    /// Every wrapped data key as it travels (never a plaintext key).
    func exportForTravel() throws -> [WrappedKey] {
        try prepareTravelKeys()
        return try keyRecords.travelKeys()
    }
}
