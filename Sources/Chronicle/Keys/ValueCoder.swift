import ChronicleFormat
import Foundation

/// Optional values: `nil` is a remove, `.some` encodes the wrapped value.
protocol OptionalCodable {
    /// The wrapped value, or `nil`.
    var wrappedAny: Any? { get }
    /// Decodes the wrapped type and returns it wrapped in `.some`.
    static func decodeWrapped(_ encoding: ValueEncoding, _ payload: [UInt8]) throws -> Any
}

extension Optional: OptionalCodable where Wrapped: Codable {
    var wrappedAny: Any? { self.map { $0 as Any } }

    static func decodeWrapped(_ encoding: ValueEncoding, _ payload: [UInt8]) throws -> Any {
        let wrapped: Wrapped = try ValueCoder.decodeValue(Wrapped.self, encoding: encoding, payload: payload)
        return Optional.some(wrapped) as Any
    }
}

/// Encodes and decodes values: binary fast path for primitives, JSON for the rest.
enum ValueCoder {
    /// Whether `value` is an optional holding `nil` (which writes a remove).
    static func isNil<V>(_ value: V) -> Bool {
        if isCommon(V.self) { return false }
        if let optional = value as? any OptionalCodable { return optional.wrappedAny == nil }
        return false
    }

    /// Encodes a non-nil value.
    static func encode<V: Encodable>(_ value: V, key: String) throws(ChronicleError) -> (ValueEncoding, [UInt8]) {
        if let common = encodeCommon(value) { return common }
        var subject: Any = value
        if let optional = value as? any OptionalCodable {
            guard let wrapped = optional.wrappedAny else {
                throw .encodingFailed(key: key, reason: "nil has no encoding; it is written as a remove")
            }
            subject = wrapped
        }
        if let primitive = encodePrimitive(subject) { return primitive }
        guard let encodable = subject as? any Encodable else {
            throw .encodingFailed(key: key, reason: "\(type(of: subject)) is not Encodable")
        }
        do {
            return (.json, Array(try jsonEncoder().encode(encodable)))
        } catch {
            throw .encodingFailed(key: key, reason: Self.describe(error))
        }
    }

    /// Decodes a payload as `V`, naming `key` in the error.
    static func decode<V: Decodable>(_ type: V.Type, encoding rawEncoding: UInt8, payload: [UInt8], key: String) throws(ChronicleError) -> V {
        guard let encoding = ValueEncoding(rawValue: rawEncoding) else {
            throw .decodingFailed(key: key, reason: "unknown value encoding \(rawEncoding) (written by a newer Chronicle?)")
        }
        do {
            return try decodeValue(V.self, encoding: encoding, payload: payload)
        } catch let error as ChronicleError {
            throw error
        } catch {
            throw .decodingFailed(key: key, reason: Self.describe(error))
        }
    }

    static func decodeValue<V: Decodable>(_ type: V.Type, encoding: ValueEncoding, payload: [UInt8]) throws -> V {
        if encoding == .json {
            return try jsonDecoder().decode(V.self, from: Data(payload))
        }
        let decoded: Any
        if let optional = V.self as? any OptionalCodable.Type {
            decoded = try optional.decodeWrapped(encoding, payload)
        } else {
            do {
                decoded = try decodePrimitive(V.self, encoding: encoding, payload: payload)
            } catch where encoding == .string && payload.first.map({ $0 == UInt8(ascii: "{") || $0 == UInt8(ascii: "[") }) == true {
                // JSON held as a string: what sindresorhus/Defaults writes to UserDefaults for a
                // `Codable` value (and so what an import of its domain brings in).
                return try jsonDecoder().decode(V.self, from: Data(payload))
            }
        }
        guard let value = decoded as? V else {
            throw DecodeFailure(description: "decoded \(Swift.type(of: decoded)), expected \(V.self)")
        }
        return value
    }

    // MARK: - JSON

    /// How non-finite floating-point numbers appear in JSON payloads (JSON has no literal for
    /// them; UserDefaults stores them in arrays and dictionaries, so we must too).
    static let nonFiniteStrings = (positiveInfinity: "Infinity", negativeInfinity: "-Infinity", nan: "NaN")

    /// Sorted keys (one value, one encoding), non-finite numbers as the strings above.
    static func jsonEncoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        encoder.nonConformingFloatEncodingStrategy = .convertToString(
            positiveInfinity: nonFiniteStrings.positiveInfinity, negativeInfinity: nonFiniteStrings.negativeInfinity,
            nan: nonFiniteStrings.nan)
        return encoder
    }

    static func jsonDecoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.nonConformingFloatDecodingStrategy = .convertFromString(
            positiveInfinity: nonFiniteStrings.positiveInfinity, negativeInfinity: nonFiniteStrings.negativeInfinity,
            nan: nonFiniteStrings.nan)
        return decoder
    }

    // MARK: - Primitives

    /// Whether `type` is one of the types ``encodeCommon(_:)`` encodes.
    static func isCommon<V>(_ type: V.Type) -> Bool {
        type == Int.self || type == Bool.self || type == Double.self || type == String.self
    }

    /// The encoding of an `Int`, `Bool`, `Double` or `String` (the same bytes as
    /// ``encodePrimitive(_:)``), `nil` for any other type. Comparing `V` with each type is a
    /// pointer comparison, where a cast of an unspecialized generic value (`as?`) asks the
    /// runtime: about 1,800 instructions a write, 4% of a set in a batch.
    static func encodeCommon<V>(_ value: V) -> (ValueEncoding, [UInt8])? {
        // Each read below reinterprets `value` as the type `V` was just found to be: the same type.
        func read<T>(_: T.Type) -> T { withUnsafePointer(to: value) { UnsafeRawPointer($0).load(as: T.self) } }
        if V.self == Int.self { return (.int, Int64(read(Int.self)).bigEndianBytes) }
        if V.self == Bool.self { return (.bool, [read(Bool.self) ? 1 : 0]) }
        if V.self == Double.self { return (.double, read(Double.self).bitPattern.bigEndianBytes) }
        if V.self == String.self { return (.string, Array(read(String.self).utf8)) }
        return nil
    }

    static func encodePrimitive(_ value: Any) -> (ValueEncoding, [UInt8])? {
        switch value {
        case let v as Bool: return (.bool, [v ? 1 : 0])
        case let v as Int: return (.int, Int64(v).bigEndianBytes)
        case let v as Int64: return (.int, v.bigEndianBytes)
        case let v as Int32: return (.int, Int64(v).bigEndianBytes)
        case let v as Int16: return (.int, Int64(v).bigEndianBytes)
        case let v as Int8: return (.int, Int64(v).bigEndianBytes)
        case let v as UInt: return (.uint, UInt64(v).bigEndianBytes)
        case let v as UInt64: return (.uint, v.bigEndianBytes)
        case let v as UInt32: return (.uint, UInt64(v).bigEndianBytes)
        case let v as UInt16: return (.uint, UInt64(v).bigEndianBytes)
        case let v as UInt8: return (.uint, UInt64(v).bigEndianBytes)
        case let v as Double: return (.double, v.bitPattern.bigEndianBytes)
        case let v as Float: return (.float, v.bitPattern.bigEndianBytes)
        case let v as String: return (.string, Array(v.utf8))
        case let v as Data: return (.data, Array(v))
        case let v as Date: return (.date, v.timeIntervalSinceReferenceDate.bitPattern.bigEndianBytes)
        case let v as URL: return (.url, encodeURL(v))
        case let v as any RawRepresentable: return encodePrimitive(v.rawValue)
        default: return nil
        }
    }

    /// Decodes a primitive of `type`. A stored value reads through any primitive type that can
    /// represent it exactly, whoever wrote it (the tool, an import, another replica's app with
    /// another type): an integer as `Double`, `Float` or another width when in range, an
    /// integral `Double` as an integer, 0 and 1 as `Bool`, a URL as `String`, and the text the
    /// tool prints (`chronicle get`) as `Date` (ISO 8601), `Data` (base64) and `URL`.
    static func decodePrimitive(_ type: Any.Type, encoding: ValueEncoding, payload: [UInt8]) throws -> Any {
        let stored = try StoredScalar(encoding: encoding, payload: payload)
        func exactly<T>(_ value: T?) throws -> T {
            guard let value else { throw mismatch(type, encoding) }
            return value
        }
        switch type {
        case is Bool.Type: return try exactly(stored.bool)
        case is Int.Type: return try exactly(stored.integer(Int.self))
        case is Int64.Type: return try exactly(stored.integer(Int64.self))
        case is Int32.Type: return try exactly(stored.integer(Int32.self))
        case is Int16.Type: return try exactly(stored.integer(Int16.self))
        case is Int8.Type: return try exactly(stored.integer(Int8.self))
        case is UInt.Type: return try exactly(stored.integer(UInt.self))
        case is UInt64.Type: return try exactly(stored.integer(UInt64.self))
        case is UInt32.Type: return try exactly(stored.integer(UInt32.self))
        case is UInt16.Type: return try exactly(stored.integer(UInt16.self))
        case is UInt8.Type: return try exactly(stored.integer(UInt8.self))
        case is Double.Type: return try exactly(stored.double)
        case is Float.Type: return try exactly(stored.float)
        case is String.Type: return try exactly(stored.string)
        case is Data.Type: return try exactly(stored.data)
        case is Date.Type: return try exactly(stored.date)
        case is URL.Type: return try exactly(stored.url)
        case let raw as any RawRepresentable.Type:
            return try decodeRaw(raw, encoding: encoding, payload: payload)
        default:
            throw mismatch(type, encoding)
        }
    }

    private static func decodeRaw<R: RawRepresentable>(_ type: R.Type, encoding: ValueEncoding, payload: [UInt8]) throws -> Any {
        let raw = try decodePrimitive(R.RawValue.self, encoding: encoding, payload: payload)
        guard let rawValue = raw as? R.RawValue, let value = R(rawValue: rawValue) else {
            throw DecodeFailure(description: "the stored raw value is not a case of \(R.self)")
        }
        return value
    }

    /// What went wrong, without a byte of the value: errors and logs may be read by anyone, and
    /// the value may be a secret. `DecodingError`/`EncodingError` descriptions quote values and
    /// dictionary keys, so only their kind and the types involved are kept.
    static func describe(_ error: any Error) -> String { ChronicleError.valueFreeDescription(of: error) }

    private static func mismatch(_ type: Any.Type, _ encoding: ValueEncoding) -> DecodeFailure {
        DecodeFailure(description: "a stored \(encoding) payload cannot be read as \(type)")
    }

    // MARK: - Display

    /// A JSON rendering of a payload whose type is unknown (for tools and logs of plain values).
    static func jsonText(encoding rawEncoding: UInt8, payload: [UInt8]) -> String {
        guard let encoding = ValueEncoding(rawValue: rawEncoding) else { return "\"<\(payload.count) bytes, encoding \(rawEncoding)>\"" }
        func quoted(_ text: String) -> String {
            let data = (try? JSONEncoder().encode(text)) ?? Data("\"\"".utf8)
            return String(decoding: data, as: UTF8.self)
        }
        switch encoding {
        case .json:
            // Re-serialized, never passed through: a peer's bytes could hold anything, a second
            // JSON line included. What does not parse is shown as its size.
            guard let object = try? JSONSerialization.jsonObject(with: Data(payload), options: [.fragmentsAllowed]),
                let data = try? JSONSerialization.data(withJSONObject: object, options: [.fragmentsAllowed, .sortedKeys, .withoutEscapingSlashes])
            else { return quoted("<\(payload.count) bytes of invalid JSON>") }
            return String(decoding: data, as: UTF8.self)
        case .bool: return payload.first == 1 ? "true" : "false"
        case .int: return Int64(bigEndianBytes: payload).map(String.init) ?? "null"
        case .uint: return UInt64(bigEndianBytes: payload).map(String.init) ?? "null"
        case .double: return UInt64(bigEndianBytes: payload).map { numberText(Double(bitPattern: $0)) } ?? "null"
        case .float: return UInt32(bigEndianBytes: payload).map { numberText(Float(bitPattern: $0)) } ?? "null"
        case .string: return quoted(String(decoding: payload, as: UTF8.self))
        case .url: return quoted(decodeURL(payload).map(\.absoluteString) ?? String(decoding: payload, as: UTF8.self))
        case .data: return quoted(Data(payload).base64EncodedString())
        case .date:
            guard let bits = UInt64(bigEndianBytes: payload) else { return "null" }
            let interval = Double(bitPattern: bits)
            let text = isoText(Date(timeIntervalSinceReferenceDate: interval))
            if let back = isoDate(text), abs(back.timeIntervalSinceReferenceDate - interval) < 0.001 { return quoted(text) }
            // No ISO 8601 text holds it (NaN, infinities, beyond year 9999): seconds since 2001, as text.
            return quoted(interval.isNaN ? nonFiniteStrings.nan : interval.isInfinite ? (interval < 0 ? nonFiniteStrings.negativeInfinity : nonFiniteStrings.positiveInfinity) : String(interval))
        }
    }
}
