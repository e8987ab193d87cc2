import Foundation

extension ValueCoder {
    /// Encodes text typed by a person: JSON scalars keep their type, other JSON is JSON, the rest is a string.
    static func encodeText(_ text: String) -> (ValueEncoding, [UInt8]) {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed == "true" { return (.bool, [1]) }
        if trimmed == "false" { return (.bool, [0]) }
        if let int = Int64(trimmed) { return (.int, int.bigEndianBytes) }
        if trimmed.first.map({ $0.isNumber || $0 == "-" }) == true, let double = Double(trimmed), double.isFinite {
            return (.double, double.bitPattern.bigEndianBytes)
        }
        if let data = trimmed.data(using: .utf8),
            let object = try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
        {
            if let string = object as? String { return (.string, Array(string.utf8)) }
            if object is [Any] || object is [String: Any] { return (.json, Array(data)) }
        }
        return (.string, Array(text.utf8))
    }
}
