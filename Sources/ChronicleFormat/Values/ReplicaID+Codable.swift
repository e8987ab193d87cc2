import Foundation

extension ReplicaID: Codable {
    public init(from decoder: any Decoder) throws {
        let hex = try decoder.singleValueContainer().decode(String.self)
        guard let id = ReplicaID(hex: hex) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not a replica id"))
        }
        self = id
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(hex)
    }

    /// Parses 32 hexadecimal digits.
    public init?(hex: String) {
        guard let bytes = [UInt8](hexString: hex) else { return nil }
        self.init(bytes: bytes)
    }
}
