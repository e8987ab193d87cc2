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
        lhs.name == rhs.name && lhs.name.utf8.elementsEqual(rhs.name.utf8)
    }

    /// `String`'s hash: names that are equal here are canonically equivalent, so they hash alike.
    package func hash(into hasher: inout Hasher) { hasher.combine(name) }
}
