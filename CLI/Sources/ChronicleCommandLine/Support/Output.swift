@_spi(Tools) import Chronicle
public import Foundation

/// Prints to standard error.
public func printError(_ text: String) {
    FileHandle.standardError.write(Data((text + "\n").utf8))
}

/// Parses `2026-11-22`, `2026-11-22T10:00:00Z` or a full ISO 8601 date.
func parseDate(_ text: String) -> Date? {
    let full = ISO8601DateFormatter()
    if let date = full.date(from: text) { return date }
    full.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    if let date = full.date(from: text) { return date }
    let day = ISO8601DateFormatter()
    day.formatOptions = [.withFullDate]
    return day.date(from: text)
}

/// JSON string literal for `text`.
func jsonString(_ text: String) -> String {
    let data = (try? JSONEncoder().encode(text)) ?? Data("\"\"".utf8)
    return String(decoding: data, as: UTF8.self)
}

/// `date` in ISO 8601.
public func iso(_ date: Date) -> String { ISO8601DateFormatter().string(from: date) }

/// Whether a scalar could steer a terminal or fake a line: C0 and C1 controls (ESC, CSI, CR, …),
/// DEL, line and paragraph separators, and bidirectional overrides.
private func isUnsafe(_ scalar: Unicode.Scalar) -> Bool {
    switch scalar.value {
    case 0x00...0x1F, 0x7F...0x9F, 0x2028, 0x2029, 0x202A...0x202E, 0x2066...0x2069, 0x200E, 0x200F: true
    default: false
    }
}

/// `text` with every unsafe scalar written as `\u{XXXX}`: key names, values and messages that
/// came from a peer may hold terminal escapes or newlines meant to fake output.
public func terminalSafe(_ text: String) -> String {
    guard text.unicodeScalars.contains(where: isUnsafe) else { return text }
    var safe = ""
    for scalar in text.unicodeScalars {
        if isUnsafe(scalar) { safe += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}" } else { safe.unicodeScalars.append(scalar) }
    }
    return safe
}

/// A JSON text with every unsafe scalar written as a `\uXXXX` escape (valid JSON: such scalars
/// can only stand inside strings), so a JSON line stays one line and steers no terminal.
func jsonSafe(_ json: String) -> String {
    guard json.unicodeScalars.contains(where: isUnsafe) else { return json }
    var safe = ""
    for scalar in json.unicodeScalars {
        if isUnsafe(scalar) {
            let hex = String(scalar.value, radix: 16, uppercase: true)
            safe += "\\u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
        } else {
            safe.unicodeScalars.append(scalar)
        }
    }
    return safe
}

/// Prints `object` as one JSON line (keys sorted), safe for a terminal: what every `--json`
/// that prints one object per command or per row uses.
public func printJSONLine(_ object: [String: Any?]) {
    let present = object.compactMapValues { $0 }
    guard JSONSerialization.isValidJSONObject(present),
        let data = try? JSONSerialization.data(withJSONObject: present, options: [.sortedKeys, .withoutEscapingSlashes])
    else {
        printError("internal error: a value that JSON cannot hold")
        return
    }
    print(jsonSafe(String(decoding: data, as: UTF8.self)))
}
