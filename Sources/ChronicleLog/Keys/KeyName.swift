import Foundation

/// A key name compared and hashed by its UTF-8 bytes, as the store keeps names. Swift's `String`
/// equality is canonical equivalence: two names a store keeps apart (an NFC and an NFD spelling
/// of one word, say from a hostile peer) would be one key to a replay, which would then drop one
/// of their views and link their histories together.
package struct KeyName: Hashable {
    package let name: String

    package init(_ name: String) { self.name = name }

    /// Equal when Swift calls the names equal (fast for the same string) and their bytes are
    /// equal too (different bytes can be canonically equivalent only with non-ASCII characters).
    package static func == (lhs: KeyName, rhs: KeyName) -> Bool {
        guard lhs.name == rhs.name else { return false }
        // Native strings keep their UTF-8 contiguous: one `memcmp`. Others (bridged) go byte by byte.
        let same = lhs.name.utf8.withContiguousStorageIfAvailable { left in
            rhs.name.utf8.withContiguousStorageIfAvailable { right -> Bool in
                guard left.count == right.count else { return false }
                guard let a = left.baseAddress, let b = right.baseAddress else { return true }  // both empty
                return memcmp(a, b, left.count) == 0
            }
        }
        return (same ?? nil) ?? lhs.name.utf8.elementsEqual(rhs.name.utf8)
    }

    /// `String`'s hash: names that are equal here are canonically equivalent, so they hash alike.
    package func hash(into hasher: inout Hasher) { hasher.combine(name) }
}
