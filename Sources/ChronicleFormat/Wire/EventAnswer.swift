public import Foundation

/// A peer's answer to a request for events by identity (docs/FORMAT.md 7.6): the range, and for
/// each identity asked whether the peer had room to answer it whole.
///
/// A member forgets a lost event only after peers that had room for it did not bring it: an
/// answer cut by its byte budget before an identity's versions says so, and that identity is
/// asked for again without counting the answer against it.
public struct EventAnswer: Sendable, Equatable {
    /// The encoded range (it moves no checkpoint).
    public var range: Data
    /// For each distinct identity asked, in order of first mention: `true` when the answer holds
    /// every version the peer keeps of it (or the peer keeps none), `false` when the peer ran out
    /// of room first. `nil` when the peer did not say (an older peer).
    public var answeredWhole: [Bool]?

    /// An answer of `range`, with what the peer said of each identity it had room for.
    public init(range: Data, answeredWhole: [Bool]?) {
        self.range = range
        self.answeredWhole = answeredWhole
    }

    /// The HTTP header that carries ``answeredWhole`` (docs/FORMAT.md 8).
    @_spi(Wire) public static let headerName = "Chronicle-Answered-Whole"

    /// ``answeredWhole`` as the header's value: one bit per identity, the first the most
    /// significant bit of the first byte, set when answered whole, in lowercase hex.
    @_spi(Wire) public static func encodeWhole(_ whole: [Bool]) -> String {
        var bytes = [UInt8](repeating: 0, count: (whole.count + 7) / 8)
        for (index, bit) in whole.enumerated() where bit { bytes[index / 8] |= 0x80 >> UInt8(index % 8) }
        return bytes.hexString
    }

    /// The header's value for a request of `count` distinct identities, or `nil` when it is not
    /// exactly `(count + 7) / 8` bytes of hex (a malformed header counts as not said).
    @_spi(Wire) public static func decodeWhole(_ text: String, count: Int) -> [Bool]? {
        guard count >= 0, count <= EventIdentity.maxPerRequest, text.utf8.count == 2 * ((count + 7) / 8),
            let bytes = [UInt8](hexString: text)
        else { return nil }
        return (0..<count).map { bytes[$0 / 8] & (0x80 >> UInt8($0 % 8)) != 0 }
    }
}
