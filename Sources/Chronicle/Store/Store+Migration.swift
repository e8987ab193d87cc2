public import Foundation

/// Ways in for existing data, and renames as events.
extension Store {
    /// Imports the values `names` hold in `defaults`, one set event each, in one transaction.
    ///
    /// Each value becomes what a typed key of the matching type reads: a flag a `Key<Bool>`, a
    /// number a `Key<Int>` or `Key<Double>`, a string, date, data or URL its key, an array or a
    /// dictionary a `Key<[…]>` or `Key<[String: …]>` (JSON). Names `defaults` has no value for
    /// are skipped, and so are values the store already holds: a second run adds nothing.
    ///
    /// ```swift
    /// let imported = try store.importValues(from: .standard, names: ["theme", "launches"])
    /// ```
    /// - Parameters:
    ///   - policy: the sync policy of the imported keys.
    /// - Returns: the number of events written.
    /// - Throws: ``ChronicleError/invalidKeyName(_:reason:)`` or ``ChronicleError/invalidArgument(_:)``
    ///   (a value a property list cannot hold) before anything is written.
    @discardableResult
    public func importValues(
        from defaults: UserDefaults, names: [String], policy: SyncPolicy = .automaticSmall
    ) throws(ChronicleError) -> Int {
        var values: [(String, Any)] = []
        for name in names {
            if let value = defaults.object(forKey: name) { values.append((name, value)) }
        }
        return try importValues(values, policy: policy)
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
    ///   - names: the keys to import; `nil` imports every top-level key.
    ///   - policy: the sync policy of the imported keys.
    /// - Returns: the number of events written.
    /// - Throws: ``ChronicleError/io(path:reason:)`` when the file cannot be read,
    ///   ``ChronicleError/malformedInput(_:)`` when it is not a property list with a dictionary
    ///   at the top, and the errors of ``importValues(from:names:policy:)``.
    @discardableResult
    public func importPropertyList(at url: URL, names: [String]? = nil, policy: SyncPolicy = .automaticSmall) throws(ChronicleError) -> Int {
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
        let selected = names.map { names in names.compactMap { name in dictionary[name].map { (name, $0) } } }
            ?? dictionary.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        return try importValues(selected, policy: policy)
    }

    private func importValues(_ values: [(String, Any)], policy: SyncPolicy) throws(ChronicleError) -> Int {
        let eventLog = try settledEventLog
        var changes: [PendingChange] = []
        for (name, value) in values {
            try Keys.validate(name: name)
            guard let (encoding, payload) = PropertyListValue.encode(value) else {
                throw .invalidArgument("the value of \(name) is not a property list value (\(type(of: value)))")
            }
            guard payload.count <= configuration.maxValueSize else {
                throw .valueTooLarge(key: name, size: payload.count, limit: configuration.maxValueSize)
            }
            if let entry = try mappingErrors({ try eventLog.entry(.defaults, name) }), entry.op == .set, entry.encoding == encoding.rawValue,
                try openPayload(entry, key: Keys(name: name, domain: .defaults, sync: entry.policy, formerNames: [])) == payload
            {
                continue  // imported before (or set to the same value since): nothing to add
            }
            changes.append(
                PendingChange(
                    domain: .defaults, key: name, policy: policy, op: .set, encoding: encoding.rawValue, payload: payload,
                    sealer: try sealer(for: .defaults)))
        }
        try commit(changes)
        return changes.count
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
        try Keys.validate(name: oldName)
        try Keys.validate(name: newName)
        guard oldName != newName else { throw .invalidArgument("a key cannot be renamed to its own name") }
        let eventLog = try settledEventLog
        guard let entry = try mappingErrors({ try eventLog.entry(domain, oldName) }), entry.op == .set else { return false }
        let old = Keys(name: oldName, domain: domain, sync: entry.policy, formerNames: [])
        var changes: [PendingChange] = []
        let target = try mappingErrors { try eventLog.entry(domain, newName) }
        if !(target.map { $0.op == .set && $0.hlc > entry.hlc } ?? false) {
            changes.append(
                PendingChange(
                    domain: domain, key: newName, policy: entry.policy, op: .set, encoding: entry.encoding,
                    payload: try openPayload(entry, key: old), sealer: try sealer(for: domain)))
        }
        changes.append(try removal(of: old))
        try commit(changes)
        return true
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
        case let date as Date: return date.timeIntervalSinceReferenceDate
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
