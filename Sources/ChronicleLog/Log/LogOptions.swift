package import Logging
package import ChronicleFormat

/// What the log takes from a store's configuration: the facade's `Store.Configuration` is above
/// this module, so the store hands down only these.
package struct LogOptions: Sendable {
    /// The LMDB map size the environment starts with.
    package var initialMapSize: Int
    /// How far ahead of this device's clock a received event may be before it is deferred.
    package var maxClockDrift: Duration
    /// The largest encoded value; a received payload may be this plus a seal's overhead.
    package var maxValueSize: Int
    /// Where the log reports what it does.
    package var logger: Logger
    /// When a commit reaches the disk.
    package var durability: Durability
    /// How many revisions a key keeps when it declared none (see ``Retention``), recorded in the
    /// store; `nil`: the one the store records, else ``Retention/standard``.
    package var retention: Retention?
    /// Opens a snapshot of a damaged store to salvage it: the opening's refusals are skipped.
    package var salvage: Bool

    package init(
        initialMapSize: Int, maxClockDrift: Duration, maxValueSize: Int, logger: Logger, durability: Durability, retention: Retention? = nil,
        salvage: Bool = false
    ) {
        self.retention = retention
        self.salvage = salvage
        self.initialMapSize = initialMapSize
        self.maxClockDrift = maxClockDrift
        self.maxValueSize = maxValueSize
        self.logger = logger
        self.durability = durability
    }
}
