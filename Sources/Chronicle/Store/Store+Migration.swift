import ChronicleFormat
import ChronicleLog
public import Foundation

/// Ways in for existing data, and renames as events.
extension Store {
    /// Imports the values `names` hold in `defaults`, one set event each, in one transaction.
    ///
    /// Each value becomes what a typed key of the matching type reads: a flag a `Key<Bool>`, a
    /// number a `Key<Int>` or `Key<Double>`, a string, date, data or URL its key, an array or a
    /// dictionary a `Key<[…]>` or `Key<[String: …]>` (JSON), and a JSON string (what
    /// sindresorhus/Defaults writes for a `Codable` value) a `Key<YourType>`.
    ///
    /// An import never wins over the user: it fills only keys this store has never held (a key
    /// set or removed since, here or by a replica this store synced with, is left alone), and
    /// its events carry the clock reading ``HLC/imported``, earlier than any change, so where an
    /// import meets a real change of the same key on another device, the change wins. Running
    /// the same import at every launch, or on every device of a sync group, changes nothing.
    ///
    /// ```swift
    /// let imported = try store.importValues(from: .standard, names: ["theme", "launches"])
    /// ```
    ///
    /// Values the app registered with `register(defaults:)` are not the user's: they are skipped
    /// where Foundation exposes the registration domain (Apple platforms). On Linux it does not:
    /// import before registering defaults there.
    /// - Parameters:
    ///   - defaults: Where the values are.
    ///   - names: The names to import (each becomes a key of the same name).
    ///   - policy: The sync policy of the imported keys; default ``SyncPolicy/never``. Prefer
    ///     ``importValues(from:keys:)``, which takes each key's own policy.
    /// - Returns: the number of events written.
    /// - Throws: ``ChronicleError/invalidKeyName(_:reason:)`` or ``ChronicleError/invalidArgument(_:)``
    ///   (a value a property list cannot hold) before anything is written.
    @discardableResult
    public func importValues(
        from defaults: UserDefaults, names: [String], policy: SyncPolicy = .never
    ) throws(ChronicleError) -> Int {
        let migration = ValueMigration(store: self)
        return try migration.importValues(migration.values(in: defaults, names: names.map { ($0, policy) }))
    }

    /// Imports the values the keys' names hold in `defaults`, like
    /// ``importValues(from:names:policy:)``, each with its key's sync policy.
    ///
    /// ```swift
    /// try store.importValues(from: .standard, keys: [Keys.theme, Keys.launches])
    /// ```
    /// - Returns: the number of events written.
    @discardableResult
    public func importValues(from defaults: UserDefaults, keys: [AnyKey]) throws(ChronicleError) -> Int {
        let migration = ValueMigration(store: self)
        return try migration.importValues(migration.values(in: defaults, names: keys.filter { $0.domain == .defaults }.map { ($0.name, $0.sync) }))
    }

    /// Imports the top-level values of a property list file (XML or binary, as UserDefaults
    /// writes its domains and `defaults export` writes them), like
    /// ``importValues(from:names:policy:)``: one set event per value, one transaction,
    /// idempotent.
    ///
    /// ```swift
    /// let imported = try store.importPropertyList(at: URL(fileURLWithPath: "com.example.app.plist"))
    /// ```
    /// - Parameters:
    ///   - url: the property list file (XML or binary), as `defaults export` writes it.
    ///   - names: the keys to import; `nil` imports every top-level key.
    ///   - policy: the sync policy of the imported keys; default ``SyncPolicy/never``.
    ///   - progress: called as the values are checked and encoded, with (values done, values in
    ///     all), and once more when the transaction has committed.
    /// - Returns: the number of events written.
    /// - Throws: ``ChronicleError/io(path:reason:)`` when the file cannot be read,
    ///   ``ChronicleError/malformedInput(_:)`` when it is not a property list with a dictionary
    ///   at the top, and the errors of ``importValues(from:names:policy:)``.
    @discardableResult
    public func importPropertyList(
        at url: URL, names: [String]? = nil, policy: SyncPolicy = .never, progress: ((Int, Int) -> Void)? = nil
    ) throws(ChronicleError) -> Int {
        let migration = ValueMigration(store: self)
        return try migration.importValues(try migration.propertyListValues(at: url, names: names, policy: policy), progress: progress)
    }

    /// Renames a key as events: a set of the new name to the old name's value and a remove of
    /// the old name, in one transaction, in the history of both, replicated like any change.
    ///
    /// Idempotent: when the old name has no value (renamed before, on this replica or on one it
    /// synced with), nothing is written. When the new name holds a value newer than the old
    /// name's, that value stays and only the old name is removed. Works for secrets too
    /// (`in: .secrets`): the value is opened and sealed again under its new name.
    ///
    /// ```swift
    /// try store.renameKey(from: "settings.colour", to: "settings.color")
    /// ```
    /// - Returns: whether anything was written.
    @discardableResult
    public func renameKey(from oldName: String, to newName: String, in domain: Domain = .defaults) throws(ChronicleError) -> Bool {
        try ValueMigration(store: self).rename(from: oldName, to: newName, in: domain)
    }
}
