import ChronicleSodium
import Foundation

/// The bearer tokens of Chronicle's HTTP protocol: how they are made, and how a server keeps and
/// checks them without keeping them.
///
/// `chronicle serve` and the hub keep only a token's digest (BLAKE2b-256 of its UTF-8 bytes) and
/// compare digests in constant time, so the time a check takes says nothing about either token,
/// its length included.
public enum BearerToken {
    /// A new token: `chr_` and 32 random bytes in unpadded base64url (43 characters).
    public static func generate() -> String {
        "chr_" + Data(Sodium.randomBytes(32)).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// The digest a server keeps instead of `token` (BLAKE2b-256, 32 bytes).
    public static func digest(_ token: [UInt8]) -> [UInt8] { GenericHash.hash(token) }

    /// The digest a server keeps instead of `token` (BLAKE2b-256 of its UTF-8 bytes).
    public static func digest(_ token: String) -> [UInt8] { digest(Array(token.utf8)) }

    /// Whether `presented` is the token whose digest is `digest`, in constant time.
    public static func matches(_ presented: [UInt8], digest: [UInt8]) -> Bool {
        Sodium.constantTimeEqual(self.digest(presented), digest)
    }
}
