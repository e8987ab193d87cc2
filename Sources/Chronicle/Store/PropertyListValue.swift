import Foundation

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
