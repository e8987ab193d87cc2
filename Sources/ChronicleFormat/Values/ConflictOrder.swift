/// The total order of last-writer-wins: `(HLC, origin replica, counter)`.
///
/// Two events of one key compare by their hybrid-clock reading, then by the
/// replica that wrote them, then by that replica's counter; the greater wins.
/// Every replica that holds the same events picks the same winner, whatever
/// order they arrived in.
package struct ConflictOrder: Sendable, Hashable, Comparable {
    package var hlc: HLC
    package var origin: ReplicaID
    package var counter: UInt64

    package static func < (lhs: ConflictOrder, rhs: ConflictOrder) -> Bool {
        if lhs.hlc != rhs.hlc { return lhs.hlc < rhs.hlc }
        if lhs.origin != rhs.origin { return lhs.origin < rhs.origin }
        return lhs.counter < rhs.counter
    }
}
