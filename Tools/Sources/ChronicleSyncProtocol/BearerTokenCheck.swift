import ChronicleFormat

/// Checks a presented bearer token against `chronicle serve`'s, in constant time.
///
/// The presented token and the expected one are compared as BLAKE2b digests with libsodium's
/// constant-time comparison, so the time taken says nothing about either token, its length
/// included.
package struct BearerTokenCheck: Sendable {
    private let digest: [UInt8]
    private let isEmpty: Bool

    package init(token: [UInt8]) {
        digest = BearerToken.digest(token)
        isEmpty = token.isEmpty
    }

    /// Whether `presented` is the configured token (an empty configured token accepts nothing).
    package func accepts(_ presented: [UInt8]) -> Bool {
        !isEmpty && BearerToken.matches(presented, digest: digest)
    }
}
