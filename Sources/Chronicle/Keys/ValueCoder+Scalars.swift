import ChronicleFormat
import Foundation

/// A stored primitive payload, read as whichever primitive type asks for it, when that type
/// represents it exactly (see ``ValueCoder/decodePrimitive(_:encoding:payload:)``).
struct StoredScalar {
    private enum Stored {
        case bool(Bool)
        case int(Int64)
        case uint(UInt64)
        case double(Double)
        case float(Float)
        case string(String)
        case data([UInt8])
        case date(Date)
        case url(URL)
    }

    private let stored: Stored

    /// Splits a payload of a primitive encoding; a payload of the wrong size is an error.
    init(encoding: ValueEncoding, payload: [UInt8]) throws {
        func failure() -> DecodeFailure { DecodeFailure(description: "a stored \(encoding) payload of \(payload.count) bytes is malformed") }
        switch encoding {
        case .json: throw DecodeFailure(description: "a stored JSON payload cannot be read as a primitive")
        case .bool:
            guard payload.count == 1, payload[0] <= 1 else { throw failure() }
            stored = .bool(payload[0] == 1)
        case .int:
            guard let value = Int64(bigEndianBytes: payload) else { throw failure() }
            stored = .int(value)
        case .uint:
            guard let value = UInt64(bigEndianBytes: payload) else { throw failure() }
            stored = .uint(value)
        case .double:
            guard let bits = UInt64(bigEndianBytes: payload) else { throw failure() }
            stored = .double(Double(bitPattern: bits))
        case .float:
            guard let bits = UInt32(bigEndianBytes: payload) else { throw failure() }
            stored = .float(Float(bitPattern: bits))
        case .string:
            guard let text = String(validating: payload, as: UTF8.self) else { throw failure() }
            stored = .string(text)
        case .data: stored = .data(payload)
        case .date:
            guard let bits = UInt64(bigEndianBytes: payload) else { throw failure() }
            stored = .date(Date(timeIntervalSinceReferenceDate: Double(bitPattern: bits)))
        case .url:
            guard let url = ValueCoder.decodeURL(payload) else { throw failure() }
            stored = .url(url)
        }
    }

    /// `true`/`false`, or the integers 1 and 0 (as UserDefaults and `defaults write -int` store flags).
    var bool: Bool? {
        switch stored {
        case let .bool(value): return value
        case let .int(value) where value == 0 || value == 1: return value == 1
        case let .uint(value) where value <= 1: return value == 1
        default: return nil
        }
    }

    /// Any stored integer in range, or an integral floating-point value.
    func integer<T: FixedWidthInteger>(_: T.Type) -> T? {
        switch stored {
        case let .int(value): return T(exactly: value)
        case let .uint(value): return T(exactly: value)
        case let .double(value): return T(exactly: value)
        case let .float(value): return T(exactly: value)
        default: return nil
        }
    }

    /// Any number a `Double` holds exactly, or the strings `chronicle get` prints for infinities and NaN.
    var double: Double? {
        switch stored {
        case let .double(value): return value
        case let .float(value): return Double(value)
        case let .int(value): return Double(exactly: value)
        case let .uint(value): return Double(exactly: value)
        case let .string(value): return Self.nonFinite(value)
        default: return nil
        }
    }

    /// Any number a `Float` holds exactly; a `Double` that is the decimal a `Float` prints as
    /// (`chronicle get` prints a Float 1.1 as `1.1`, which `set` stores as a Double).
    var float: Float? {
        switch stored {
        case let .float(value): return value
        case let .double(value):
            if value.isNaN { return .nan }
            if let exact = Float(exactly: value) { return exact }
            let nearest = Float(value)
            return nearest.isFinite && Double(String(nearest)) == value ? nearest : nil
        case let .int(value): return Float(exactly: value)
        case let .uint(value): return Float(exactly: value)
        case let .string(value): return Self.nonFinite(value).map(Float.init)
        default: return nil
        }
    }

    private static func nonFinite(_ text: String) -> Double? {
        switch text {
        case ValueCoder.nonFiniteStrings.positiveInfinity: return .infinity
        case ValueCoder.nonFiniteStrings.negativeInfinity: return -.infinity
        case ValueCoder.nonFiniteStrings.nan: return .nan
        default: return nil
        }
    }

    var string: String? {
        switch stored {
        case let .string(value): return value
        case let .url(value): return value.absoluteString
        default: return nil
        }
    }

    /// Bytes, or base64 text (what `chronicle get` prints for data).
    var data: Data? {
        switch stored {
        case let .data(value): return Data(value)
        case let .string(value): return Data(base64Encoded: value)
        default: return nil
        }
    }

    /// A date, or ISO 8601 text (what `chronicle get` prints for dates).
    var date: Date? {
        switch stored {
        case let .date(value): return value
        case let .string(value): return ValueCoder.isoDate(value)
        default: return nil
        }
    }

    /// A URL, or text that parses as one.
    var url: URL? {
        switch stored {
        case let .url(value): return value
        case let .string(value) where !value.isEmpty: return URL(string: value)
        default: return nil
        }
    }
}

extension ValueCoder {
    /// A URL's payload: its string, and for a URL relative to a base (`URL(fileURLWithPath: "a/b")`
    /// is relative to the working directory) a zero byte and the base's absolute string, so that
    /// it reads back equal (docs/FORMAT.md, 3.3). A URL string never holds a zero byte.
    static func encodeURL(_ url: URL) -> [UInt8] {
        guard let base = url.baseURL else { return Array(url.absoluteString.utf8) }
        return Array(url.relativeString.utf8) + [0] + Array(base.absoluteString.utf8)
    }

    static func decodeURL(_ payload: [UInt8]) -> URL? {
        guard let zero = payload.firstIndex(of: 0) else {
            return String(validating: payload, as: UTF8.self).flatMap { URL(string: $0) }
        }
        guard let relative = String(validating: payload[..<zero], as: UTF8.self),
            let baseText = String(validating: payload[(zero + 1)...], as: UTF8.self), let base = URL(string: baseText)
        else { return nil }
        return URL(string: relative, relativeTo: base)
    }

    /// ISO 8601 with milliseconds, in UTC: how the tool prints a date.
    static func isoText(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: date)
    }

    /// An ISO 8601 date and time, with or without fractional seconds.
    static func isoDate(_ text: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = formatter.date(from: text) { return date }
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.date(from: text)
    }

    /// A number as JSON: finite numbers as literals, the others as the strings JSON payloads use.
    static func numberText<F: BinaryFloatingPoint & LosslessStringConvertible>(_ value: F) -> String {
        if value.isFinite { return String(value) }
        if value.isNaN { return "\"\(nonFiniteStrings.nan)\"" }
        return "\"\(value < 0 ? nonFiniteStrings.negativeInfinity : nonFiniteStrings.positiveInfinity)\""
    }
}
