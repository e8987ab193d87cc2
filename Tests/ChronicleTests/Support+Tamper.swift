@testable import Chronicle
import ChronicleLMDB
import Foundation

/// Rewrites the whole log without a key, as someone with a hex editor and no key would:
/// drops the chain-key record, renumbers, re-chains, and edits `meta` to match.
func rechainWithoutKey(_ store: Store, alsoDeleting extra: [[UInt8]] = [], edit: (inout [Event]) -> Void = { _ in }) throws {
    let eventLog = try store.eventLog
    try eventLog.environment.write { txn in
        var events: [Event] = []
        try txn.scan(eventLog.dbs.events) { key, value in
            let sequence = UInt64(bigEndianBytes: key) ?? 0
            let record = try LogRecord(decoding: value, sequence: sequence)
            if record.kind == .event { events.append(try record.event(sequence: sequence)) }
            return true
        }
        edit(&events)
        try txn.clear(eventLog.dbs.events)
        var head = try LogHead.read(txn, eventLog.dbs)
        head.sequence = 0
        head.chain = LogHead.empty.chain
        for event in events {
            head.sequence += 1
            let body = event.encoded()
            let hash = LogRecord.chainHash(previous: head.chain, sequence: head.sequence, kind: .event, body: body, key: nil)
            try txn.put(eventLog.dbs.events, key: head.sequence.bigEndianBytes, value: LogRecord(kind: .event, body: body, hash: hash).encoded())
            head.chain = hash
        }
        for entry in [MetaKey.chainKey, MetaKey.chainInLog, MetaKey.headMAC] + extra { _ = try? txn.delete(eventLog.dbs.meta, key: entry) }
        head.chainKeyID = nil
        try head.write(txn, eventLog.dbs, chainKey: nil)
    }
}
