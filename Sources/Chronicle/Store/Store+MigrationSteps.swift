import ChronicleFormat
public import Foundation

extension Store {
    /// Runs a migration step once per store: the first call with `id` runs `body` and records the
    /// step in the log (an event of the key `chronicle.migrations.<id>` that never leaves the
    /// device, so `chronicle log` and ``history(of:)-(Key<Value>)`` show when it ran); every later
    /// call, in this process or any other, returns `false` without running it. The shape of GRDB's
    /// `DatabaseMigrator`: register the steps in order, each with a name that never changes.
    ///
    /// ```swift
    /// try store.migrate("2026-11-import-user-defaults") { store in
    ///     try store.importValues(from: .standard, keys: [Keys.theme, Keys.launches])
    ///     try store.renameKey(from: "settings.colour", to: "settings.color")
    /// }
    /// ```
    ///
    /// The step is recorded after `body` returns: if the process dies in the middle, it runs again
    /// at the next launch, so write steps that can run twice (imports and renames are: an import
    /// fills only keys never held, a rename of a name with no value writes nothing).
    /// - Parameters:
    ///   - id: The step's name (1 to 200 UTF-8 bytes).
    ///   - body: The step; what it throws is rethrown and the step is not recorded.
    /// - Returns: whether the step ran now.
    @discardableResult
    public func migrate(_ id: String, _ body: (Store) throws -> Void) throws -> Bool {
        let key = try Self.migrationKey(id)
        guard try value(for: key) == nil else { return false }
        try body(self)
        try set(Date(), for: key)
        return true
    }

    /// When the migration step `id` ran on this store, or `nil` when it has not.
    public func migrationDate(_ id: String) throws(ChronicleError) -> Date? {
        try value(for: try Self.migrationKey(id))
    }

    private static func migrationKey(_ id: String) throws(ChronicleError) -> Key<Date?> {
        guard !id.isEmpty, id.utf8.count <= 200 else { throw .invalidArgument("a migration id has 1 to 200 UTF-8 bytes") }
        return Key<Date?>("chronicle.migrations." + id, sync: .never)
    }
}
