import ChronicleFormat
import ChronicleLog
public import Foundation
import ChronicleSodium

/// A folder of range files that replicas push to and pull from: sneakernet,
/// or a folder that a file-sync service (Dropbox, Syncthing, iCloud Drive)
/// shares between devices.
///
/// Layout: `mailbox.id` (this mailbox's identity) and `ranges/`, one file per
/// push named `<20-digit Unix ms>-<pushing replica id>-<16 random hex>.range`,
/// so two devices never write the same name (a sync service would rename one
/// copy of a clash). Every file in `ranges/` whose name ends in `.range` is read,
/// whatever a sync service renamed it to (`… (conflicted copy).range`,
/// `….sync-conflict-….range`, `… 2.range`); files that are not ranges, or larger
/// than a range can be, are passed over. Files are published atomically (0600,
/// fsynced, then the folder fsynced) and never overwritten.
///
/// The mailbox's positions are the files in name order: position `n` is the
/// `n`-th file. A range's chain hash at a position is a digest of the names up
/// to it, so a file that arrives late and sorts before a puller's checkpoint
/// (or a pruned file) makes that puller read the folder again from the start;
/// identities make the re-read safe, only slower. Events keep their origins, so a
/// mailbox relays between any number of replicas. The folder grows by one file
/// per push: delete files once every device has synced past them (docs/REPLICATION.md).
/// File operations run off the cooperative pool (see `BlockingWork`).
public struct DirectoryTransport: SyncTransport, FileMarkingTransport {
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
        ReplicaInfo(replicaID: try identity(), epoch: Self.epoch, protocolVersion: EventRange.protocolVersion, head: UInt64(try rangeFiles().count))
    }

    /// A range file as the mailbox's positions see it: its name, and its size and modification
    /// time, so a file whose bytes change (a copy that was still being written, a placeholder
    /// that downloaded) changes the digest of its position and is read again.
    struct FileEntry {
        var name: String
        var size: UInt64
        var modified: Int64

        var line: String { "\(name)\t\(size)\t\(modified)" }
    }

    public func pull(after: UInt64, filter: RangeFilter, excludingOrigin origin: ReplicaID?, maxEvents: Int) async throws -> Data {
        let transport = self
        return try await BlockingWork.run { try transport.pullNow(after: after, filter: filter, excludingOrigin: origin, maxEvents: maxEvents) }
    }

    private func pullNow(after: UInt64, filter: RangeFilter, excludingOrigin origin: ReplicaID?, maxEvents: Int) throws -> Data {
        let id = try identity()
        let entries = try rangeFiles()
        let names = entries.map(\.line)
        let last = UInt64(names.count)
        let start = min(after, last)
        var index = Int(start)
        // A file that is not a range (anyone who can write the folder can drop one) is passed over:
        // it stalls nobody.
        while index < names.count {
            let name = entries[index].name
            index += 1
            guard let stored = readRange(name) else { continue }
            let events = stored.events.filter { filter.admits($0) && $0.origin != origin }
            let opaque = filter == .syncable ? stored.opaque : []
            return Data(
                EventRange(
                    source: id, epoch: Self.epoch, after: start, upTo: UInt64(index), head: last,
                    afterChain: Self.digest(names.prefix(Int(start))), upToChain: Self.digest(names.prefix(index)),
                    keys: stored.keys, events: events, opaque: opaque
                ).encoded())
        }
        let chain = Self.digest(names)
        return Data(
            EventRange(source: id, epoch: Self.epoch, after: start, upTo: last, head: last, afterChain: start == last ? chain : Self.digest(names.prefix(Int(start))), upToChain: chain, keys: [], events: [])
                .encoded())
    }

    /// Answers from the files: the versions of each asked identity the files hold, the smallest
    /// first and at most 4 of each, with at most 16 key records per id they name from the files
    /// they came from, up to about 1 MiB of events and records together and at most 4,096 items,
    /// in a range whose `after` and `upTo` are both the mailbox's head. Memory stays within the
    /// answer's budget, whatever the files hold.
    public func pullEvents(_ identities: [EventIdentity]) async throws -> Data? {
        try await answerEvents(identities)?.range
    }

    public func answerEvents(_ identities: [EventIdentity]) async throws -> EventAnswer? {
        let transport = self
        return try await BlockingWork.run { try transport.answerEventsNow(identities) }
    }

    private func answerEventsNow(_ identities: [EventIdentity]) throws -> EventAnswer {
        let entries = try rangeFiles()
        let names = entries.map(\.line)
        var gathered = MailboxAnswer(asking: identities)
        for entry in entries where !gathered.asked.isEmpty {
            guard let stored = readRange(entry.name) else { continue }
            gathered.consider(stored)
        }
        let (events, keys, whole) = gathered.answer()
        let head = UInt64(names.count)
        let chain = Self.digest(names)
        let range = EventRange(
            source: try identity(), epoch: Self.epoch, after: head, upTo: head, head: head, afterChain: chain, upToChain: chain, keys: keys, events: events)
        return EventAnswer(range: Data(range.encoded()), answeredWhole: whole)
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
        try checkRangesFolder()
        while try !PrivateFiles.publishNew(Array(range), at: rangesFolder.appendingPathComponent(Self.fileName(source: decoded.source))) {}
        receipt.applied = receipt.received
        receipt.keys = decoded.keys.count
        return receipt
    }

    // MARK: - Layout

    private static let epoch = LogEpoch.zero

    /// A new file's name: push time, the pushing replica, and randomness, so no two pushes share one.
    static func fileName(source: ReplicaID, milliseconds: UInt64 = UnixMilliseconds.now()) -> String {
        let digits = String(milliseconds)
        let random = (0..<8).map { _ in UInt8.random(in: 0...255) }
        return String(repeating: "0", count: max(0, 20 - digits.count)) + digits + "-" + source.hex + "-" + random.hexString + ".range"
    }

    /// Refuses a `ranges` entry that is not a plain folder: a symbolic link there (anyone who can
    /// write the mailbox can make one) would send every member's pushes somewhere else.
    private func checkRangesFolder() throws {
        var status = stat()
        guard lstat(rangesFolder.path, &status) == 0 else { return }  // absent: created by the first push
        guard (status.st_mode & S_IFMT) == S_IFDIR else {
            throw ChronicleError.io(
                path: rangesFolder.path, reason: "the mailbox's ranges/ is a symbolic link or not a folder; remove it (pushes stay in the mailbox itself)")
        }
    }

    /// The range files, in name order (the mailbox's positions).
    private func rangeFiles() throws -> [FileEntry] {
        try checkRangesFolder()
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: rangesFolder.path) else { return [] }
        // Temporary files of a publish start with "." and end in ".tmp"; everything else named *.range counts.
        return names.filter { !$0.hasPrefix(".") && $0.lowercased().hasSuffix(".range") }
            .sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
            .map { name in
                let attributes = try? FileManager.default.attributesOfItem(atPath: rangesFolder.appendingPathComponent(name).path)
                let size = (attributes?[.size] as? NSNumber)?.uint64Value ?? 0
                let modified = (attributes?[.modificationDate] as? Date).map { Int64(($0.timeIntervalSince1970 * 1_000_000).rounded()) } ?? 0
                return FileEntry(name: name, size: size, modified: modified)
            }
    }

    /// The range in file `name`, or `nil` for a file that is not one: not a regular file (a
    /// symbolic link is not followed: it could point at a huge file or a device), larger than a
    /// range may be, or not decoding as a range. The size is checked on the open file itself.
    private func readRange(_ name: String) -> EventRange? {
        let descriptor = open(rangesFolder.appendingPathComponent(name).path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        var status = stat()
        guard fstat(descriptor, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG, status.st_size <= EventRange.maxEncodedSize,
            let bytes = try? handle.read(upToCount: Int(status.st_size) + 1), bytes.count <= EventRange.maxEncodedSize
        else { return nil }
        return try? EventRange(decoding: Array(bytes))
    }

    /// A digest of the name of the newest file `source` pushed here (names carry the pushing
    /// replica), or of the newest file at all when `source` is `nil`; `nil` when there is none:
    /// what a pusher remembers to notice later that the folder lost its files (restored from an
    /// older backup).
    func newestFileDigest(from source: ReplicaID? = nil) -> [UInt8]? {
        let marker = source.map { "-" + $0.hex + "-" }
        return (try? rangeFiles())?.last { marker.map($0.name.contains) ?? true }.map { GenericHash.hash(Array($0.name.utf8)) }
    }

    /// Whether a file whose name has `digest` (see ``newestFileDigest(from:)``) is still here.
    func holdsFile(digest: [UInt8]) -> Bool {
        (try? rangeFiles())?.contains { GenericHash.hash(Array($0.name.utf8)) == digest } ?? false
    }

    /// BLAKE2b-256 of the files' lines (`name TAB size TAB mtime`), each followed by a newline:
    /// the chain hash of a mailbox position (mtime in microseconds since 1970).
    private static func digest(_ names: ArraySlice<String>) -> [UInt8] {
        guard !names.isEmpty else { return LogHead.empty.chain }
        return GenericHash.hash(Array(names.joined(separator: "\n").utf8) + [0x0A])
    }

    private static func digest(_ names: [String]) -> [UInt8] { digest(names[...]) }

    private func identity() throws -> ReplicaID {
        let file = directory.appendingPathComponent("mailbox.id")
        if let id = try Self.readIdentity(file) { return id }
        let fresh = ReplicaID.random()
        if try PrivateFiles.publishNew(Array((fresh.hex + "\n").utf8), at: file) { return fresh }
        // Another replica created it first: use theirs.
        guard let id = try Self.readIdentity(file) else {
            throw ChronicleError.io(path: file.path, reason: "the mailbox id is unreadable")
        }
        return id
    }

    /// The id in `mailbox.id`, `nil` when there is no such file. Opened only as a regular file of
    /// at most 64 bytes, without following a link and without blocking (a FIFO, a device or a
    /// huge file there costs nothing): anything else is refused, saying which file to remove.
    private static func readIdentity(_ file: URL) throws -> ReplicaID? {
        let descriptor = open(file.path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard descriptor >= 0 else {
            if errno == ENOENT { return nil }
            throw ChronicleError.io(path: file.path, reason: "the mailbox id cannot be opened as a file (\(String(cString: strerror(errno)))); remove it")
        }
        let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        var status = stat()
        guard fstat(descriptor, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG, status.st_size <= 64,
            let bytes = try? handle.read(upToCount: 65), bytes.count <= 64,
            let id = ReplicaID(hex: String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
        else {
            throw ChronicleError.io(path: file.path, reason: "the mailbox id is not a file of 32 hex digits; remove it (the next sync makes a new one)")
        }
        return id
    }
}
