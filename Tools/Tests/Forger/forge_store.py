#!/usr/bin/python3
"""Edits a Chronicle store as someone with the files and no key would: written from
docs/FORMAT.md alone (sections 2, 3.1, 4.1, 4.2 and 4.5), with py-lmdb and hashlib's BLAKE2b,
for the tool's tamper-evidence tests (Tools/Tests/ChronicleToolTests/ToolTamperEvidenceTests.swift).

    forge_store.py STORE forget ENTRY...        delete meta entries (a name ending in / deletes every
                                                entry with that prefix)
    forge_store.py STORE cut-tail               delete the newest record, point seq and chain at the one before
    forge_store.py STORE forge-gap SEQ          replace record SEQ by a gap made without the key (unkeyed checksum)
    forge_store.py STORE strip-authenticators   set every event's authenticator kind to none, keeping the stored hashes
    forge_store.py STORE rechain                drop chain-key records, renumber from 1 and hash every record unkeyed;
                                                set seq and chain; delete chain.key, chain.inlog and head.mac

Exit status 0 when the edit was made, 1 with a message otherwise. The store must be closed.
"""
import hashlib
import struct
import sys

import lmdb

EVENT, CHAIN_KEY, GAP = 1, 5, 6
HASH = 32


def u64(value):
    return struct.pack(">Q", value)


def blake(*parts):
    """Unkeyed BLAKE2b-256: all someone without the chain key can compute."""
    digest = hashlib.blake2b(digest_size=HASH)
    for part in parts:
        digest.update(part)
    return digest.digest()


def chain_hash(previous, sequence, kind, body):
    """FORMAT.md 4.2 with K absent."""
    return blake(previous, u64(sequence), bytes([kind]), body)


def gap_mac(first, last, chain_before, chain_at_last):
    """FORMAT.md 4.5 with K absent (a checksum)."""
    return blake(b"chronicle.gap.v1", u64(first), u64(last), chain_before, chain_at_last)


def open_store(path):
    env = lmdb.open(path, max_dbs=16, map_size=1 << 34, subdir=True, lock=True)
    return env, env.open_db(b"meta"), env.open_db(b"events")


def records(txn, events):
    return [(struct.unpack(">Q", key)[0], bytes(value)) for key, value in txn.cursor(db=events)]


def set_head(txn, meta, sequence, chain):
    txn.put(b"seq", u64(sequence), db=meta)
    txn.put(b"chain", chain, db=meta)


def forget(txn, meta, names):
    for name in names:
        raw = name.encode()
        if raw.endswith(b"/"):
            doomed = [bytes(key) for key, _ in txn.cursor(db=meta) if bytes(key).startswith(raw)]
        else:
            doomed = [raw]
        for key in doomed:
            txn.delete(key, db=meta)


def cut_tail(txn, meta, events):
    log = records(txn, events)
    if len(log) < 2:
        sys.exit("forge_store: the log has fewer than two records")
    txn.delete(u64(log[-1][0]), db=events)
    sequence, value = log[-2]
    set_head(txn, meta, sequence, value[-HASH:])


def forge_gap(txn, events, sequence):
    value = txn.get(u64(sequence), db=events)
    before = txn.get(u64(sequence - 1), db=events)
    if value is None or before is None or value[0] != EVENT:
        sys.exit(f"forge_store: record {sequence} is not an event after a record")
    chain_before, chain_at_last = bytes(before[-HASH:]), bytes(value[-HASH:])
    body = bytes([1]) + u64(sequence) + chain_before + gap_mac(sequence, sequence, chain_before, chain_at_last)
    txn.put(u64(sequence), bytes([GAP]) + body + chain_at_last, db=events)


def strip_authenticators(txn, events):
    stripped = 0
    for sequence, value in records(txn, events):
        body = value[1:-HASH]
        # FORMAT.md 3.1: a version-2 event ends with its authenticator: kind 1, [16] key id, [32] tag.
        if value[0] == EVENT and body[0] == 2 and len(body) > 49 and body[-49] == 1:
            txn.put(u64(sequence), bytes([EVENT]) + body[:-49] + bytes([0]) + value[-HASH:], db=events)
            stripped += 1
    if stripped == 0:
        sys.exit("forge_store: no event carries an authenticator")


def rechain(txn, meta, events):
    kept = [(value[0], value[1:-HASH]) for _, value in records(txn, events) if value[0] != CHAIN_KEY]
    if any(kind == GAP for kind, _ in kept):
        sys.exit("forge_store: rechain does not renumber gaps")
    txn.drop(events, delete=False)
    chain = bytes(HASH)
    for sequence, (kind, body) in enumerate(kept, start=1):
        chain = chain_hash(chain, sequence, kind, body)
        txn.put(u64(sequence), bytes([kind]) + body + chain, db=events)
    set_head(txn, meta, len(kept), chain)
    forget(txn, meta, ["chain.key", "chain.inlog", "head.mac"])


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    store, operation, arguments = argv[1], argv[2], argv[3:]
    env, meta, events = open_store(store)
    with env.begin(write=True) as txn:
        if operation == "forget":
            forget(txn, meta, arguments)
        elif operation == "cut-tail":
            cut_tail(txn, meta, events)
        elif operation == "forge-gap":
            forge_gap(txn, events, int(arguments[0]))
        elif operation == "strip-authenticators":
            strip_authenticators(txn, events)
        elif operation == "rechain":
            rechain(txn, meta, events)
        else:
            sys.exit(f"forge_store: unknown operation {operation}")
    env.close()


if __name__ == "__main__":
    main(sys.argv)
