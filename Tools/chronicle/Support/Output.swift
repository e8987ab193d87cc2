import ArgumentParser
import Chronicle
import Foundation

/// Prints to standard error.
func printError(_ text: String) {
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

func iso(_ date: Date) -> String { ISO8601DateFormatter().string(from: date) }
