import ChronicleFormat
import ChronicleLog
import Foundation

/// Existing data into a store, and renames, as events: the work behind ``Store``'s
/// `importValues`, `importPropertyList` and `renameKey`, which write through the store's commit
/// path (its sealing and its authenticators).
struct ValueMigration {
    let store: Store

    /// The values `names` hold in `defaults`, less those that are only registered defaults.
    func values(in defaults: UserDefaults, names: [(String, SyncPolicy)]) -> [(String, Any, SyncPolicy)] {
        let registered = defaults.volatileDomain(forName: UserDefaults.registrationDomain)
        var values: [(String, Any, SyncPolicy)] = []
        for (name, policy) in names {
            guard let value = defaults.object(forKey: name) else { continue }
            if let registeredValue = registered[name], defaults.isRegisteredDefault(value, registered: registeredValue) { continue }
            values.append((name, value, policy))
        }
        return values
    }

    /// The top-level values of the property list file at `url` (`names` of them, or all, by name).
    func propertyListValues(at url: URL, names: [String]?, policy: SyncPolicy) throws(ChronicleError) -> [(String, Any, SyncPolicy)] {
        let data: Data
        do { data = try Data(contentsOf: url) } catch {
            throw .io(path: url.path, reason: "cannot read the property list (\(ValueCoder.describe(error)))")
        }
        let object: Any
        do { object = try PropertyListSerialization.propertyList(from: data, format: nil) } catch {
            throw .malformedInput("\(url.lastPathComponent) is not a property list")
        }
        guard let dictionary = PropertyListValue.dictionary(object) else {
            throw .malformedInput("\(url.lastPathComponent) does not hold a dictionary at its top level")
        }
        return names.map { names in names.compactMap { name in dictionary[name].map { (name, $0, policy) } } }
            ?? dictionary.sorted { $0.key < $1.key }.map { ($0.key, $0.value, policy) }
    }

    /// Imports `values` (name, property list value, policy) into keys this store has never held,
    /// in one transaction: ``Store/importValues(from:names:policy:)``.
    func importValues(_ values: [(String, Any, SyncPolicy)], progress: ((Int, Int) -> Void)? = nil) throws(ChronicleError) -> Int {
        let eventLog = try store.settledEventLog
        for _ in 0..<64 {
            let changes = try importChanges(values, eventLog, progress: progress)
            do {
                if !changes.isEmpty { _ = try eventLog.commit(try store.prepared(changes)) }
                progress?(values.count, values.count)
                return changes.count
            } catch is StaleRead {
                continue  // a key was written between the check and the commit: it is held now
            } catch {
                throw ChronicleError.wrap(error)
            }
        }
        throw .storeUnavailable(reason: "the imported keys kept changing during the import; try again")
    }

    /// The set events of an import: the values of keys this store has never held.
    private func importChanges(
        _ values: [(String, Any, SyncPolicy)], _ eventLog: EventLog, progress: ((Int, Int) -> Void)?
    ) throws(ChronicleError) -> [PendingChange] {
        var changes: [PendingChange] = []
        for (index, (name, value, policy)) in values.enumerated() {
            if index % 1_024 == 0 { progress?(index, values.count) }
            try AnyKey.validate(name: name)
            guard let (encoding, payload) = PropertyListValue.encode(value) else {
                throw .invalidArgument("the value of \(name) is not a property list value (\(type(of: value)))")
            }
            guard payload.count <= store.configuration.maxValueSize else {
                throw .valueTooLarge(key: name, size: payload.count, limit: store.configuration.maxValueSize)
            }
            // Held here before (imported, set or removed): an import never overwrites the user.
            guard try mappingErrors({ try eventLog.entry(.defaults, name) }) == nil else { continue }
            var change = PendingChange(
                domain: .defaults, key: name, policy: policy, op: .set, encoding: encoding.rawValue, payload: payload,
                sealer: try store.sealer(for: .defaults))
            change.stamp = .imported
            change.expectedOrder = .some(nil)  // still never held when it commits (another process, an import of a peer's range)
            changes.append(change)
        }
        return changes
    }

    /// Renames `oldName` to `newName` in `domain` as events: ``Store/renameKey(from:to:in:)``.
    func rename(from oldName: String, to newName: String, in domain: Domain) throws(ChronicleError) -> Bool {
        try AnyKey.validate(name: oldName)
        try AnyKey.validate(name: newName)
        // By their bytes: one spelling of a name renames to a canonically equivalent other (the
        // repair after a peer wrote the other spelling), which `String`'s `!=` calls the same.
        guard KeyName(oldName) != KeyName(newName) else { throw .invalidArgument("a key cannot be renamed to its own name") }
        // The entries are read under the lock that orders local writes, so no local write lands
        // between the read and the commit; a change of another writer (an import, another
        // process) in between fails the commit (expected orders), and the rename reads again.
        let eventLog = try store.eventLog
        for _ in 0..<64 {
            do {
                let committed = try eventLog.commitVisibly { entry throws(ChronicleError) -> [PendingChange] in
                    guard let old = try mappingErrors({ try entry(domain, oldName) }), old.entry.op == .set else { return [] }
                    let target = try mappingErrors { try entry(domain, newName) }
                    let oldKey = AnyKey(name: oldName, domain: domain, sync: old.entry.policy, formerNames: [])
                    var changes: [PendingChange] = []
                    if !Self.isNewer(target, than: old) {
                        // Never wider than either name's policy: a rename moves no value off a device.
                        let policy = target.map { min(old.entry.policy, $0.entry.policy) } ?? old.entry.policy
                        var set = PendingChange(
                            domain: domain, key: newName, policy: policy, op: .set, encoding: old.entry.encoding,
                            payload: try store.openPayload(old.entry, key: oldKey), sealer: try store.sealer(for: domain))
                        if target?.ticket == nil { set.expectedOrder = .some(target?.entry.order) }
                        // The value keeps its time: a renamed import still loses to a real change of
                        // the new name made anywhere (a queued value has no time yet: it takes the clock's).
                        if old.ticket == nil { set.stamp = old.entry.hlc }
                        changes.append(set)
                    }
                    var remove = try store.removal(of: oldKey)
                    if old.ticket == nil { remove.expectedOrder = .some(old.entry.order) }
                    changes.append(remove)
                    return try store.prepared(changes)
                }
                return committed != nil
            } catch is StaleRead {
                continue  // another writer's change landed between the read and the commit: read again
            } catch {
                throw ChronicleError.wrap(error)
            }
        }
        throw .storeUnavailable(reason: "the key kept changing while it was renamed; try again")
    }

    /// Whether `target` holds a set newer than `old`: queued local changes are newer than
    /// committed entries and than the changes queued before them; committed ones compare on the clock.
    private static func isNewer(_ target: VisibleEntry?, than old: VisibleEntry) -> Bool {
        guard let target, target.entry.op == .set else { return false }
        switch (target.ticket, old.ticket) {
        case let (targetTicket?, oldTicket?): return targetTicket > oldTicket
        case (.some, nil): return true
        case (nil, .some): return false
        case (nil, nil): return target.entry.order > old.entry.order
        }
    }
}

extension UserDefaults {
    /// Whether `value` (what `object(forKey:)` returned) is only the registered default
    /// `registered`: equal to it as a property list value.
    fileprivate func isRegisteredDefault(_ value: Any, registered: Any) -> Bool {
        guard let a = PropertyListValue.encode(registered), let b = PropertyListValue.encode(value) else { return false }
        return a == b
    }
}
