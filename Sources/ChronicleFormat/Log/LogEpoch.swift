import ChronicleSodium

/// The epoch of a replica's log: 16 random bytes, renewed whenever the log's
/// sequence numbers are rewritten (compaction, a copy, a restore). Replication
/// checkpoints are kept per peer epoch, so a rewritten log is synced from the start.
public struct LogEpoch: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The number of bytes of an epoch.
    public static let byteCount = 16

    /// The epoch's bytes.
    public let bytes: [UInt8]

    /// An epoch from its 16 bytes; `nil` for any other length.
    public init?(bytes: [UInt8]) {
        guard bytes.count == Self.byteCount else { return nil }
        self.bytes = bytes
    }

    /// An epoch from 32 hexadecimal digits.
    public init?(hex: String) {
        guard let bytes = [UInt8](hexString: hex) else { return nil }
        self.init(bytes: bytes)
    }

    /// The all-zero epoch of a log that has none recorded (and of mailboxes, whose numbering never changes).
    public static let zero = LogEpoch(unchecked: [UInt8](repeating: 0, count: byteCount))

    /// A fresh random epoch.
    package static func random() -> LogEpoch { LogEpoch(unchecked: Sodium.randomBytes(byteCount)) }

    private init(unchecked bytes: [UInt8]) { self.bytes = bytes }

    /// Lowercase hexadecimal.
    public var hex: String { bytes.hexString }

    public var description: String { hex }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let epoch = LogEpoch(hex: text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not a log epoch"))
        }
        self = epoch
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(hex)
    }
}
