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
        try importValues(from: defaults, names: names.map { ($0, policy) })
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
        try importValues(from: defaults, names: keys.filter { $0.domain == .defaults }.map { ($0.name, $0.sync) })
    }

    private func importValues(from defaults: UserDefaults, names: [(String, SyncPolicy)]) throws(ChronicleError) -> Int {
        let registered = defaults.volatileDomain(forName: UserDefaults.registrationDomain)
        var values: [(String, Any, SyncPolicy)] = []
        for (name, policy) in names {
            guard let value = defaults.object(forKey: name) else { continue }
            if let registeredValue = registered[name], defaults.isRegisteredDefault(value, registered: registeredValue) { continue }
            values.append((name, value, policy))
        }
        return try importValues(values)
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
        let selected = names.map { names in names.compactMap { name in dictionary[name].map { (name, $0, policy) } } }
            ?? dictionary.sorted { $0.key < $1.key }.map { ($0.key, $0.value, policy) }
        return try importValues(selected, progress: progress)
    }

    private func importValues(_ values: [(String, Any, SyncPolicy)], progress: ((Int, Int) -> Void)? = nil) throws(ChronicleError) -> Int {
        let eventLog = try settledEventLog
        for _ in 0..<64 {
            let changes = try importChanges(values, eventLog, progress: progress)
            do {
                if !changes.isEmpty { _ = try eventLog.commit(try prepared(changes)) }
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
            guard payload.count <= configuration.maxValueSize else {
                throw .valueTooLarge(key: name, size: payload.count, limit: configuration.maxValueSize)
            }
            // Held here before (imported, set or removed): an import never overwrites the user.
            guard try mappingErrors({ try eventLog.entry(.defaults, name) }) == nil else { continue }
            var change = PendingChange(
                domain: .defaults, key: name, policy: policy, op: .set, encoding: encoding.rawValue, payload: payload,
                sealer: try sealer(for: .defaults))
            change.stamp = .imported
            change.expectedOrder = .some(nil)  // still never held when it commits (another process, an import of a peer's range)
            changes.append(change)
        }
        return changes
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
        try AnyKey.validate(name: oldName)
        try AnyKey.validate(name: newName)
        // By their bytes: one spelling of a name renames to a canonically equivalent other (the
        // repair after a peer wrote the other spelling), which `String`'s `!=` calls the same.
        guard KeyName(oldName) != KeyName(newName) else { throw .invalidArgument("a key cannot be renamed to its own name") }
        // The entries are read under the lock that orders local writes, so no local write lands
        // between the read and the commit; a change of another writer (an import, another
        // process) in between fails the commit (expected orders), and the rename reads again.
        let eventLog = try eventLog
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
                            payload: try openPayload(old.entry, key: oldKey), sealer: try sealer(for: domain))
                        if target?.ticket == nil { set.expectedOrder = .some(target?.entry.order) }
                        // The value keeps its time: a renamed import still loses to a real change of
                        // the new name made anywhere (a queued value has no time yet: it takes the clock's).
                        if old.ticket == nil { set.stamp = old.entry.hlc }
                        changes.append(set)
                    }
                    var remove = try removal(of: oldKey)
                    if old.ticket == nil { remove.expectedOrder = .some(old.entry.order) }
                    changes.append(remove)
                    return try prepared(changes)
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
}

extension Store {
    /// Whether `target` holds a set newer than `old`: queued local changes are newer than
    /// committed entries and than the changes queued before them; committed ones compare on the clock.
    fileprivate static func isNewer(_ target: VisibleEntry?, than old: VisibleEntry) -> Bool {
        guard let target, target.entry.op == .set else { return false }
        switch (target.ticket, old.ticket) {
        case let (targetTicket?, oldTicket?): return targetTicket > oldTicket
        case (.some, nil): return true
        case (nil, .some): return false
        case (nil, nil): return target.entry.order > old.entry.order
        }
    }
}

/// Property list values (as `PropertyListSerialization` and `UserDefaults` hand them out) as
/// Chronicle payloads.
enum PropertyListValue {
    /// The payload a typed key of the value's type reads: primitives on the binary fast path,
    /// arrays and dictionaries as JSON in the layout `JSONDecoder` expects (dates as seconds
    /// since 2001, data as base64, non-finite numbers as strings).
    static func encode(_ value: Any) -> (ValueEncoding, [UInt8])? {
        guard let value = unwrapped(value) else { return nil }
        if let number = nsNumber(value) { return scalar(number) }
        if value is [Any] || dictionary(value) != nil {
            guard let json = jsonObject(value),
                let data = try? JSONSerialization.data(withJSONObject: json, options: [.sortedKeys, .withoutEscapingSlashes])
            else { return nil }
            return (.json, Array(data))
        }
        return ValueCoder.encodePrimitive(value)
    }

    /// A dictionary with string keys, whichever bridged form it arrives in.
    static func dictionary(_ value: Any) -> [String: Any]? {
        if let dictionary = value as? [String: Any] { return dictionary }
        guard let bridged = value as? [AnyHashable: Any] else { return nil }
        var result: [String: Any] = [:]
        for (key, value) in bridged {
            guard let key = key.base as? String else { return nil }
            result[key] = value
        }
        return result
    }

    /// A number object as parsed from a property list: its kind is in its Objective-C type code
    /// (`c` for the booleans). A Swift number (`UserDefaults` in this process) is no object.
    private static func nsNumber(_ value: Any) -> NSNumber? {
        guard type(of: value) is NSNumber.Type else { return nil }
        return value as? NSNumber
    }

    private static func scalar(_ number: NSNumber) -> (ValueEncoding, [UInt8]) {
        #if canImport(Darwin)
        // On Apple platforms an Int8 has the type code `c` too; only the CFBoolean singletons are flags.
        if CFGetTypeID(number) == CFBooleanGetTypeID() { return (.bool, [number.boolValue ? 1 : 0]) }
        if String(cString: number.objCType) == "c" { return (.int, number.int64Value.bigEndianBytes) }
        #endif
        switch String(cString: number.objCType) {
        case "c", "B": return (.bool, [number.boolValue ? 1 : 0])
        case "f", "d": return (.double, number.doubleValue.bitPattern.bigEndianBytes)
        case "C", "S", "I", "L", "Q": return (.uint, number.uint64Value.bigEndianBytes)
        default: return (.int, number.int64Value.bigEndianBytes)
        }
    }

    /// The value inside any optionals (bridged arrays hold `Optional<Any>` elements), or `nil`.
    private static func unwrapped(_ value: Any) -> Any? {
        let mirror = Mirror(reflecting: value)
        guard mirror.displayStyle == .optional else { return value }
        guard let wrapped = mirror.children.first?.value else { return nil }
        return unwrapped(wrapped)
    }

    private static func jsonObject(_ value: Any) -> Any? {
        guard let value = unwrapped(value) else { return nil }
        if let number = nsNumber(value) {
            switch scalar(number).0 {
            case .bool: return number.boolValue
            case .double: return jsonNumber(number.doubleValue)
            default: return number
            }
        }
        switch value {
        case let bool as Bool where type(of: value) == Bool.self: return bool
        case is Int, is Int64, is Int32, is Int16, is Int8, is UInt, is UInt64, is UInt32, is UInt16, is UInt8: return value
        case let double as Double: return jsonNumber(double)
        case let float as Float: return jsonNumber(Double(float))
        case let string as String: return string
        case let date as Date: return jsonNumber(date.timeIntervalSinceReferenceDate)
        case let data as Data: return data.base64EncodedString()
        case let url as URL: return url.absoluteString
        case let array as [Any]:
            var result: [Any] = []
            for element in array {
                guard let json = jsonObject(element) else { return nil }
                result.append(json)
            }
            return result
        default:
            guard let dictionary = dictionary(value) else { return nil }
            var result: [String: Any] = [:]
            for (key, element) in dictionary {
                guard let json = jsonObject(element) else { return nil }
                result[key] = json
            }
            return result
        }
    }

    private static func jsonNumber(_ value: Double) -> Any {
        guard !value.isFinite else { return value }
        if value.isNaN { return ValueCoder.nonFiniteStrings.nan }
        return value < 0 ? ValueCoder.nonFiniteStrings.negativeInfinity : ValueCoder.nonFiniteStrings.positiveInfinity
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
