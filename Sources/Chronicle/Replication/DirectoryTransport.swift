public import Foundation
import ChronicleSodium

/// A folder of range files that replicas push to and pull from: sneakernet,
/// or a folder that a file-sync service shares between devices.
///
/// Layout: `mailbox.id` (this mailbox's identity) and `ranges/NNNNNNNNNNNNNNNNNNNN.range`,
/// numbered from 1. Each push adds one file (published atomically, never
/// overwritten); a pull after file `n` returns file `n + 1` as a range of
/// the mailbox's own numbering. Events keep their origins, so a mailbox
/// relays between any number of replicas.
/// File operations run off the cooperative pool (see `BlockingWork`).
public struct DirectoryTransport: SyncTransport {
    /// The mailbox folder.
    public let directory: URL

    /// Creates a transport to the mailbox in `directory` (created on first use).
    public init(directory: URL) { self.directory = directory }

    private var rangesFolder: URL { directory.appendingPathComponent("ranges", isDirectory: true) }

    public func info() async throws -> ReplicaInfo {
        let transport = self
        return try await BlockingWork.run { try transport.infoNow() }
    }

    private func infoNow() throws -> ReplicaInfo {
        ReplicaInfo(replicaID: try identity(), epoch: Self.epoch, protocolVersion: EventRange.protocolVersion, head: try lastIndex())
    }

    public func pull(after: UInt64, filter: RangeFilter, excludingOrigin origin: ReplicaID?, maxEvents: Int) async throws -> Data {
        let transport = self
        return try await BlockingWork.run { try transport.pullNow(after: after, filter: filter, excludingOrigin: origin, maxEvents: maxEvents) }
    }

    private func pullNow(after: UInt64, filter: RangeFilter, excludingOrigin origin: ReplicaID?, maxEvents: Int) throws -> Data {
        let id = try identity()
        let last = try lastIndex()
        var index = min(after, last)
        // A missing number, or a file that is not a range (anyone who can write the folder can
        // drop one), is passed over: it stalls nobody.
        while index < last {
            index += 1
            guard let bytes = try? Data(contentsOf: rangesFolder.appendingPathComponent(Self.fileName(index))),
                let stored = try? EventRange(decoding: Array(bytes))
            else { continue }
            let events = stored.events.filter { filter.admits($0) && $0.origin != origin }
            let opaque = filter == .syncable ? stored.opaque : []
            return Data(
                EventRange(source: id, epoch: Self.epoch, after: min(after, last), upTo: index, head: last, keys: stored.keys, events: events, opaque: opaque)
                    .encoded())
        }
        return Data(EventRange(source: id, epoch: Self.epoch, after: min(after, last), upTo: last, head: last, keys: [], events: []).encoded())
    }

    public func push(_ range: Data) async throws -> RangeReceipt {
        let transport = self
        return try await BlockingWork.run { try transport.pushNow(range) }
    }

    private func pushNow(_ range: Data) throws -> RangeReceipt {
        let decoded = try EventRange(decoding: Array(range))  // refuse to store anything malformed
        var receipt = RangeReceipt()
        receipt.received = decoded.events.count + decoded.opaque.count
        guard receipt.received > 0 else { return receipt }
        var index = try lastIndex() + 1
        // Another replica pushing at the same time takes the same number first: try the next.
        while try !PrivateFiles.publishNew(Array(range), at: rangesFolder.appendingPathComponent(Self.fileName(index))) {
            index += 1
        }
        receipt.applied = receipt.received
        receipt.keys = decoded.keys.count
        return receipt
    }

    // MARK: - Layout

    private static let epoch = LogEpoch.zero
    /// File numbers at or above this are not ranges this mailbox wrote.
    static let maxIndex: UInt64 = 1_000_000_000_000_000

    static func fileName(_ index: UInt64) -> String {
        let digits = String(index)
        return String(repeating: "0", count: max(0, 20 - digits.count)) + digits + ".range"
    }

    private func lastIndex() throws -> UInt64 {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: rangesFolder.path) else { return 0 }
        // File numbers beyond 10^15 (a mailbox would need a thousand years of ranges) are hostile and ignored.
        return names.compactMap { name in name.hasSuffix(".range") ? UInt64(name.dropLast(6)) : nil }.filter { $0 < Self.maxIndex }.max() ?? 0
    }

    private func identity() throws -> ReplicaID {
        let file = directory.appendingPathComponent("mailbox.id")
        if let text = try? String(contentsOf: file, encoding: .utf8), let id = ReplicaID(hex: text.trimmingCharacters(in: .whitespacesAndNewlines)) {
            return id
        }
        let fresh = ReplicaID.random()
        if try PrivateFiles.publishNew(Array((fresh.hex + "\n").utf8), at: file) { return fresh }
        // Another replica created it first: use theirs.
        guard let text = try? String(contentsOf: file, encoding: .utf8),
            let id = ReplicaID(hex: text.trimmingCharacters(in: .whitespacesAndNewlines))
        else { throw ChronicleError.io(path: file.path, reason: "the mailbox id is unreadable") }
        return id
    }
}
