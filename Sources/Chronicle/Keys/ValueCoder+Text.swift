import ChronicleFormat
import Foundation

/// The type a value typed as text is stored as (`chronicle set --type`): what the app's key
/// expects. Each reads the text `chronicle get` prints for that type.
@_spi(Tools) public enum ValueKind: String, CaseIterable, Sendable {
    /// `true`/`false` (also `yes`/`no`, `1`/`0`).
    case bool
    /// A signed integer (an unsigned one above `Int64.max`).
    case int
    /// A floating-point number; also `Infinity`, `-Infinity` and `NaN`.
    case double
    /// Text as given (a JSON string literal, as `get` prints one, is unquoted).
    case string
    /// An ISO 8601 date and time, such as `2026-11-22T09:30:00Z` (fractional seconds allowed),
    /// or seconds since 2001-01-01 (`get` prints a date no ISO text holds that way).
    case date
    /// A URL.
    case url
    /// Bytes in base64.
    case data
    /// Any JSON: an object, an array or a scalar, for a key of a `Codable` type.
    case json
}

extension ValueCoder {
    /// Encodes text typed by a person: JSON scalars keep their type, other JSON is JSON, the rest is a string.
    static func encodeText(_ text: String) -> (ValueEncoding, [UInt8]) {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed == "true" { return (.bool, [1]) }
        if trimmed == "false" { return (.bool, [0]) }
        if let int = Int64(trimmed) { return (.int, int.bigEndianBytes) }
        if let uint = UInt64(trimmed) { return (.uint, uint.bigEndianBytes) }
        if trimmed.first.map({ $0.isNumber || $0 == "-" }) == true, let double = Double(trimmed), double.isFinite {
            return (.double, double.bitPattern.bigEndianBytes)
        }
        if let data = trimmed.data(using: .utf8),
            let object = try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
        {
            if let string = object as? String { return (.string, Array(string.utf8)) }
            // Stored canonical, as every JSON payload is (FORMAT.md 3.3: object keys sorted).
            if object is [Any] || object is [String: Any],
                let canonical = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
            {
                return (.json, Array(canonical))
            }
        }
        return (.string, Array(text.utf8))
    }

    /// Encodes text as `kind`, or says what the text should look like.
    static func encodeText(_ text: String, as kind: ValueKind) throws(ChronicleError) -> (ValueEncoding, [UInt8]) {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        // `get` prints strings, dates, URLs and data as JSON string literals: take them back as such.
        let unquoted = jsonString(trimmed) ?? trimmed
        func invalid(_ expected: String) -> ChronicleError {
            .invalidArgument("the value is not \(expected)")
        }
        switch kind {
        case .bool:
            switch trimmed.lowercased() {
            case "true", "yes", "1": return (.bool, [1])
            case "false", "no", "0": return (.bool, [0])
            default: throw invalid("a bool: use true or false")
            }
        case .int:
            if let int = Int64(trimmed) { return (.int, int.bigEndianBytes) }
            if let uint = UInt64(trimmed) { return (.uint, uint.bigEndianBytes) }
            throw invalid("an integer in the range of Int64 or UInt64")
        case .double:
            guard let double = Double(unquoted) else { throw invalid("a number (or Infinity, -Infinity, NaN)") }
            return (.double, double.bitPattern.bigEndianBytes)
        case .string:
            return (.string, Array((jsonString(trimmed) ?? text).utf8))
        case .date:
            // ISO 8601, or seconds since 2001-01-01 (how `get` prints a date no ISO text holds).
            guard let interval = isoDate(unquoted)?.timeIntervalSinceReferenceDate ?? Double(unquoted) else {
                throw invalid("an ISO 8601 date and time such as 2026-11-22T09:30:00Z")
            }
            return (.date, interval.bitPattern.bigEndianBytes)
        case .url:
            guard !unquoted.isEmpty, let url = URL(string: unquoted) else { throw invalid("a URL") }
            return (.url, encodeURL(url))
        case .data:
            guard let data = Data(base64Encoded: unquoted) else { throw invalid("base64") }
            return (.data, Array(data))
        case .json:
            guard let object = try? JSONSerialization.jsonObject(with: Data(trimmed.utf8), options: [.fragmentsAllowed]),
                let data = try? JSONSerialization.data(withJSONObject: object, options: [.fragmentsAllowed, .sortedKeys, .withoutEscapingSlashes])
            else { throw invalid("JSON") }
            return (.json, Array(data))
        }
    }

    /// The string a JSON string literal holds, or `nil` when `text` is not one.
    private static func jsonString(_ text: String) -> String? {
        guard text.hasPrefix("\""), text.hasSuffix("\""), text.count >= 2 else { return nil }
        return (try? JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])) as? String
    }
}
