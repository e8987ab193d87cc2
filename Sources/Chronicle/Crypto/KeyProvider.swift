import ChronicleFormat
import Foundation
import ChronicleSodium

/// An external source of the 32-byte key-encryption key.
public protocol KeyProvider: Sendable {
    /// Returns the 32-byte key-encryption key. Called when the store opens.
    func keyEncryptionKey() throws -> [UInt8]
}
