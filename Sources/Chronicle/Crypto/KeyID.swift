import ChronicleSodium

/// The id of a data key: 16 random bytes.
struct KeyID: Sendable, Hashable, CustomStringConvertible {
    static let length = 16
    let bytes: [UInt8]

    static func random() -> KeyID { KeyID(bytes: Sodium.randomBytes(length)) }

    var description: String { bytes.prefix(4).hexString }
}
