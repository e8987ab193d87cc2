import ChronicleFormat
import Foundation

/// How a value's payload is encoded. Stored in every event and view entry.
///
/// The primitives take a compact binary form (big-endian, fixed width where
/// the type is); everything else is JSON with sorted keys.
enum ValueEncoding: UInt8, Sendable, CaseIterable {
    case json = 0
    case bool = 1
    case int = 2  // any signed integer width, as Int64
    case uint = 3  // any unsigned integer width, as UInt64
    case double = 4  // IEEE 754 bits
    case float = 5  // IEEE 754 bits
    case string = 6  // UTF-8
    case data = 7  // raw bytes
    case date = 8  // seconds since 2001-01-01 as a Double's bits
    case url = 9  // absolute string, UTF-8
}
