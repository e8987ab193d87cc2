/// When the automatic compaction runs, and over which keys: a value type the log keeps behind a
/// mutex, told of the records each write transaction appended and asked then whether a pass is due.
///
/// A pass starts once ``threshold`` records were appended since the last one (or when the log
/// opens, over every key: a store may hold garbage from a build before retention, or from another
/// process). It looks only at the keys written since the last pass, snapshotted as it starts, so
/// one hot key costs one pass per ``threshold`` writes however fast it is written, and a pass never
/// chases the writes that land while it runs: when they make another pass due, that one follows
/// it (rather than wait for the next write, which may never come).
package struct SweepSchedule: Sendable {
    /// Records appended between two passes.
    package static let threshold = 256
    /// Keys remembered between passes; past it, the next pass looks at every key.
    package static let maxDirtyKeys = 65_536

    /// What a pass looks at.
    package enum Work: Sendable, Equatable {
        /// The keys with these history prefixes (``HistoryKey``; one may appear more than once).
        case keys([[UInt8]])
        /// Every key of the `latest` index.
        case everyKey
    }

    /// The keys written since the last pass, one entry a record (duplicates are merged when the
    /// list grows past ``maxDirtyKeys`` and when a pass starts, not on the writer's path).
    private var dirty: [[UInt8]] = []
    private var everyKey = false
    private var appended = 0
    /// Whether a pass is running (at most one per log).
    package private(set) var running = false
    /// Whether the log is closing: no pass starts, and a running one ends at its next step.
    package private(set) var stopped = false
    /// What the last passes counted of the keys they looked at: each key's record count at its
    /// then latest record, so the next pass over a key written since walks only the records
    /// appended since (a key at its limit and written again goes straight to the drop). A hint
    /// only: a count is never below the truth while the epoch holds (records join a history at
    /// its top; a drop by another process makes it high, which costs the walk the drop makes
    /// anyway, never a record), and a new epoch (a compaction renumbered the log) forgets them.
    /// Only what a transaction that committed counted is remembered. Were a count ever low, its
    /// key would keep more than its limit until the count passed it (the drop then walks the
    /// key and counts anew); no record is dropped on a count's word.
    private var revisions: [HashedPrefix: RevisionCount] = [:]
    private var revisionsEpoch: [UInt8] = []

    package init(everyKey: Bool = false) { self.everyKey = everyKey }

    /// Records of the keys with these history prefixes (one a record) were appended, and
    /// `beyond` more whose keys were not listed (then the next pass looks at every key).
    package mutating func appended(_ prefixes: [[UInt8]], beyond: Int = 0) {
        appended += prefixes.count + beyond
        guard !everyKey else { return }
        guard beyond == 0 else {
            everyKey = true
            dirty = []
            return
        }
        guard !prefixes.isEmpty else { return }
        dirty.append(contentsOf: prefixes)
        guard dirty.count > Self.maxDirtyKeys else { return }
        dirty = Array(Set(dirty))  // a hot key is one key, however often it was written
        // Still over half the cap after the merge: so many distinct keys that merging again at
        // every small transaction would cost the writers more than one pass over every key.
        if dirty.count > Self.maxDirtyKeys / 2 {
            everyKey = true
            dirty = []
        }
    }

    /// Whether a pass is due and none runs.
    package var isDue: Bool { !running && !stopped && (everyKey || appended >= Self.threshold) }

    /// The log is closing.
    package mutating func stop() { stopped = true }

    /// A closing log was opened again.
    package mutating func resume() { stopped = false }

    /// Starts a pass when one is due: what it looks at, and from then on the pass is running.
    package mutating func start() -> Work? {
        guard isDue else { return nil }
        running = true
        appended = 0
        defer {
            everyKey = false
            dirty = []
        }
        if everyKey { return .everyKey }
        return .keys(dirty)
    }

    /// What the last passes counted of each of `prefixes` in log epoch `epoch` (none of another epoch).
    package func revisionCounts(_ prefixes: [[UInt8]], epoch: [UInt8]) -> [RevisionCount?] {
        guard !revisions.isEmpty, epoch == revisionsEpoch else { return Array(repeating: nil, count: prefixes.count) }
        return prefixes.map { revisions[HashedPrefix($0)] }
    }

    /// What a pass counted in log epoch `epoch` (`nil`: the key holds no record, or was not
    /// counted whole); at most ``maxDirtyKeys`` keys are remembered.
    package mutating func found(_ counts: [(prefix: [UInt8], count: RevisionCount?)], epoch: [UInt8]) {
        if epoch != revisionsEpoch {
            revisions = [:]
            revisionsEpoch = epoch
        }
        for (prefix, count) in counts {
            let key = HashedPrefix(prefix)
            if let count, revisions.count < Self.maxDirtyKeys || revisions[key] != nil {
                revisions[key] = count
            } else {
                revisions[key] = nil
            }
        }
    }

    /// The pass ended; `unfinished` are keys it could not finish (looked at again by the next pass).
    package mutating func finish(unfinished: [[UInt8]] = []) {
        running = false
        if !everyKey { dirty.append(contentsOf: unfinished) }
    }
}

/// A key's record count at its latest record, as a pass of the sweep counted it.
package struct RevisionCount: Sendable, Equatable {
    /// The key's latest record when counted.
    package var latest: UInt64
    /// The records of the key at and below `latest`.
    package var count: Int

    package init(latest: UInt64, count: Int) {
        self.latest = latest
        self.count = count
    }
}
