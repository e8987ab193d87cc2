/// When the automatic compaction runs, and over which keys: a value type the log keeps behind a
/// mutex, told of the records each write transaction appended and asked then whether a pass is due.
///
/// A pass starts once ``threshold`` records were appended since the last one (or when the log
/// opens, over every key: a store may hold garbage from a build before retention, or from another
/// process). It looks only at the keys written since the last pass, snapshotted as it starts, so
/// one hot key costs one pass per ``threshold`` writes however fast it is written, and a pass never
/// chases the writes that land while it runs.
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
    /// Keys a pass left holding exactly the revisions they keep: once written again, each is past
    /// its retention, so the next pass over the keys written since drops without first walking
    /// the key's history to find out. A hint only: a wrong one costs the walk the drop makes
    /// anyway, never a record (the drop decides again in its write transaction).
    private var atLimit: Set<[UInt8]> = []

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

    /// Of `prefixes`, written since the last pass, those that pass left at their limit (past it now).
    package func pastLimit(_ prefixes: [[UInt8]]) -> Set<[UInt8]> {
        guard !atLimit.isEmpty else { return [] }
        return Set(prefixes.filter { atLimit.contains($0) })
    }

    /// What a pass found: keys now holding exactly what they keep, and keys that do not.
    package mutating func found(atLimit reached: [[UInt8]], notAtLimit others: [[UInt8]]) {
        for prefix in others { atLimit.remove(prefix) }
        for prefix in reached where atLimit.count < Self.maxDirtyKeys { atLimit.insert(prefix) }
    }

    /// The pass ended; `unfinished` are keys it could not finish (looked at again by the next pass).
    package mutating func finish(unfinished: [[UInt8]] = []) {
        running = false
        if !everyKey { dirty.append(contentsOf: unfinished) }
    }
}
