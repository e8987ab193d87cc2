package import ChronicleFormat
import Foundation
import Logging
import ChronicleSodium
import Synchronization

/// A change a caller wants to commit, before it has a sequence, counter or HLC.
package struct PendingChange: Sendable {
    package var domain: Domain
    package var key: String
    package var policy: SyncPolicy
    package var op: ChangeOperation
    package var encoding: UInt8
    /// The plaintext payload (sealed inside the transaction when `sealer` is set).
    package var payload: [UInt8]
    /// Seals the payload inside the write transaction (secrets, and plain values of encrypted stores).
    package var sealer: (any EventSealer)? = nil
    /// Authenticates the event inside the write transaction (every event of a sync-group member).
    package var authenticator: (any EventSealer)? = nil
    /// Its place among the changes of the non-throwing forms (0: a change committed on return).
    package var ticket: UInt64 = 0
    /// When set, the commit fails with ``StaleRead`` unless the key's current view entry has
    /// this order (`.some(nil)`: no entry): a read-then-write (a rename) commits only if nothing
    /// landed in between.
    package var expectedOrder: ConflictOrder?? = nil
    /// When set, the commit fails with ``StaleRead`` unless the key's current view entry is the
    /// one the queued local change with this ticket committed (a read-then-write that read that
    /// change: it committed, and nobody else's change landed in between). The ticket must be
    /// watched (``EventLog/watch(ticket:)``) before its change can commit.
    package var expectedTicket: UInt64?
    /// The event's clock reading when it must not be the clock's next: an imported value is
    /// stamped ``HLC/imported`` (it loses to every change made with a clock), a renamed value
    /// keeps its original time.
    package var stamp: HLC? = nil
    /// The retention a typed key declared, recorded for the key as it commits: `.some(nil)` for
    /// "the store's default" (its row goes), `nil` when the write declares nothing (a tool's
    /// write, `removeAll`, a rename or a re-seal: the key's row stays as it is).
    package var retention: Retention?? = nil

    package init(domain: Domain, key: String, policy: SyncPolicy, op: ChangeOperation, encoding: UInt8, payload: [UInt8], sealer: (any EventSealer)? = nil, authenticator: (any EventSealer)? = nil, ticket: UInt64 = 0, expectedOrder: ConflictOrder?? = nil, expectedTicket: UInt64? = nil, stamp: HLC? = nil, retention: Retention?? = nil) {
        self.domain = domain
        self.key = key
        self.policy = policy
        self.op = op
        self.encoding = encoding
        self.payload = payload
        self.sealer = sealer
        self.authenticator = authenticator
        self.ticket = ticket
        self.expectedOrder = expectedOrder
        self.expectedTicket = expectedTicket
        self.stamp = stamp
        self.retention = retention
    }
}

/// The entry a read-then-write read changed before its commit (see `PendingChange.expectedOrder`).
package struct StaleRead: Error {}

/// An event as committed to the local log.
package struct CommittedEvent: Sendable {
    package var sequence: UInt64
    package var event: Event
    /// `true` when the event became its key's current entry in the view as it committed
    /// (last writer wins; a replicated older event or one held by the drift guard does not).
    package var isWinner = false
    /// The ticket of the non-throwing change it commits (0: none): observers saw that change already.
    package var ticket: UInt64 = 0
    /// `true` when the drift guard holds the event back (it enters its view once local time reaches it).
    package var isHeldBack = false
    /// The chain hash of its log record (filled where a reader asks for it: the change stream).
    package var chainHash: [UInt8] = []
}
