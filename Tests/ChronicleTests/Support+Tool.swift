@testable import Chronicle
import ChronicleTesting
import Foundation
import Testing

/// Replaces run-specific parts (dates, replica ids) of tool output with placeholders.
func normalized(_ text: String) -> String {
    var result = text
    let patterns = [
        (#"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z"#, "<date>"),
        (#"\b[0-9a-f]{32}\b"#, "<id>"),
        (#"\b[0-9a-f]{8}\b"#, "<short>"),
    ]
    for (pattern, replacement) in patterns {
        result = result.replacingOccurrences(of: pattern, with: replacement, options: .regularExpression)
    }
    return result
}
