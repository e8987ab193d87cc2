@testable import Chronicle
@testable import ChronicleLog
import ChronicleLMDB
import ChronicleSodium
import Foundation
import Testing

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
        try renumberDots(eventLog, txn)
    }
}

/// Points every identity row of `dots` at the sequence its event holds now (a forger who
/// renumbers the log keeps the table consistent, as a store written so would be).
func renumberDots(_ eventLog: EventLog, _ txn: borrowing Transaction) throws {
    var rows: [[UInt8]] = []
    try txn.scan(eventLog.dbs.dots) { key, _ in
        if key.count == 24 { rows.append(key) }
        return true
    }
    for key in rows { _ = try txn.delete(eventLog.dbs.dots, key: key) }
    try txn.scan(eventLog.dbs.events) { key, value in
        let sequence = UInt64(bigEndianBytes: key) ?? 0
        let record = try LogRecord(decoding: value, sequence: sequence)
        if record.kind == .event { try txn.put(eventLog.dbs.dots, key: try record.event(sequence: sequence).dot, value: sequence.bigEndianBytes) }
        return true
    }
}

/// Rewrites the log as someone holding the chain key would (an insider, or a bug): each event
/// through `edit`, every record re-hashed under the key its chain uses there, the head re-MACed.
/// What `verify` still finds in such a log is what no chain can show.
func rewriteWithChainKey(_ store: Store, edit: (inout Event) -> Void) throws {
    let eventLog = try store.eventLog
    try eventLog.environment.write { txn in
        var records: [(UInt64, LogRecord)] = []
        try txn.scan(eventLog.dbs.events) { key, value in
            let sequence = UInt64(bigEndianBytes: key) ?? 0
            records.append((sequence, try LogRecord(decoding: value, sequence: sequence)))
            return true
        }
        var head = try LogHead.read(txn, eventLog.dbs)
        var chain = LogHead.empty.chain
        var key: KeyedHash?
        for (sequence, record) in records {
            var body = record.body
            if record.kind == .event {
                var event = try record.event(sequence: sequence)
                edit(&event)
                body = event.encoded()
            }
            if record.kind == .chainKey, let id = KeyID(bytes: body) { key = try eventLog.chainKeys.key(id) }
            let hash = LogRecord.chainHash(previous: chain, sequence: sequence, kind: record.kind, body: body, key: key)
            try txn.put(eventLog.dbs.events, key: sequence.bigEndianBytes, value: LogRecord(kind: record.kind, body: body, hash: hash).encoded())
            chain = hash
        }
        head.chain = chain
        try head.write(txn, eventLog.dbs, chainKey: try eventLog.chainKeys.key(head.chainKeyID))
    }
}

/// Wraps the store's active data key again with a creation time before builds keyed the chain
/// when they made a key: what a store written by format 1 holds (its key's creation time is
/// authenticated by the wrap, so only the key's holder can make this fixture).
func backdateActiveKey(_ store: Store) throws {
    let keyring = try store.crypto.get()
    let records = try store.eventLog.keyRecords
    let active = try #require(try records.activeAndChainKeyIDs().active)
    let key = try keyring.dataKey(active)
    let wrapping = try keyring.keks.wrappingKey(for: keyring.sourceValue, reusing: nil)
    let record = try WrappedKey.wrap(
        key, id: active, kind: wrapping.kind, salt: wrapping.salt, limits: wrapping.limits,
        created: Keyring.chainKeyedAtKeyCreationSince - 86_400_000, kek: wrapping.kek)
    try records.putWrappedKeys([record])
}
