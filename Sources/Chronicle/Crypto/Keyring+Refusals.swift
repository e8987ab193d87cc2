import ChronicleFormat
import ChronicleLog

/// What the keyring refuses at an opening, and what a salvage reads with (docs/FORMAT.md 4.2, 6.2).
extension Keyring {
    /// Unwraps every key record the key source opens and installs its chain key, checking and
    /// writing nothing: a salvage reads a damaged log with whatever keys still open.
    func installChainKeysThatOpen() {
        for record in (try? keyRecords.wrappedKeys()) ?? [] {
            if let key = try? dataKey(record.id) { keyRecords.chainKeys.install(id: record.id, from: key) }
        }
    }

    /// A member store that holds a data key its key source opens but no active key lost `dk.active`
    /// to an edit (a forger re-chaining the log without the key deletes it): opening it must not
    /// mint a new key over the forgery. Tries every record (one derivation per salt and cost: only
    /// someone who can write the store's files can add records here, and they could do worse).
    /// - Throws: `.corruptMeta("dk.active", …)` when such a key is there.
    func refuseIfActiveKeyWasRemoved(chainKeyID: KeyID?) throws {
        if let chainKeyID {
            // The chain is keyed with a key of this store's own: its records were deleted.
            throw ChronicleError.corruptMeta(
                entry: "dk.active",
                reason: "this store's log is keyed with data key \(chainKeyID), but the store holds no active key: its key records were "
                    + "deleted or damaged, and a new key would hide that. Nothing was written")
        }
        for record in try keyRecords.wrappedKeys() {
            guard (try? unwrap(record)) != nil else { continue }
            if try !keyRecords.logShowsAKeyOfItsOwn() {
                // Nothing in the log says the store made a key of its own, as for a relay (a store
                // used without the key source) that received the group's key records; or its files
                // were rewritten without the key. Neither is opened as a member.
                throw ChronicleError.invalidArgument(
                    "this store holds the group's key records, but nothing in its log shows a key of its own: it was used without its "
                        + "key source (a relay), or its files were rewritten without the key. A relay that becomes a member starts in a "
                        + "new directory and syncs; `chronicle verify` looks for damage. Nothing was written")
            }
            throw ChronicleError.corruptMeta(
                entry: "dk.active",
                reason: "this store holds data key \(record.id), which its key source opens, but no active key: meta was edited or "
                    + "damaged, and a new key would hide that. Nothing was written (a relay that becomes a member starts in a new directory)")
        }
    }
}
