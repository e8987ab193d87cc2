import ChronicleFormat
import Chronicle
import Foundation

// chronicle-stress: a child process for the crash-safety tests. It writes to a
// store in a loop and prints "ack …" after each acknowledged (durable) write, until
// it is killed. Usage: chronicle-stress MODE STORE-DIR [RANGE-FILE]
//   writes   8 threads, each setting its own key to 1, 2, 3, …     ack <thread> <n>
//   batches  batches of 10 keys all set to the same n              ack <n>
//   rebuild  writes with rebuildViews in between                   ack <n>
//   compact  writes with compaction in between                     ack <n>
//   import   imports a range file (and writes) in a loop           ack <n>
//   mixed    non-throwing sets of m.1…m.4 acknowledged after a flush, then a
//            durable set of m.d                                   ack <n>
//   increment  300 atomic increments of inc (store.update), then exits     ack done
//   exit     non-throwing sets of exit.0…exit.49 to 0…49, then returns from main at once
//            (a normal exit must commit them)
// One-shot modes, for the tests of what another process sees and does:
//   set STORE-DIR KEY TEXT      a durable set of the String key KEY, then exits
//   get STORE-DIR KEY           prints the Int key KEY (default 0)
//   set-kept STORE-DIR KEY N    a durable set of the Int key KEY (to its value + 1), declaring retention .revisions(N)
//   import-once STORE-DIR FILE  imports one range file, prints "received <n>"
//   reclaim STORE-DIR           compacts before 2001 (drops nothing recent), closes, reclaims space
//   fill STORE-DIR N            N events (1,000 keys, batches of 1,000): a large log to measure tools on
// CHRONICLE_PASSPHRASE, when set, opens the store with that passphrase; CHRONICLE_RETENTION=N
// keeps N revisions a key (the automatic compaction then runs all the time).

let arguments = CommandLine.arguments
guard arguments.count >= 3 else {
    FileHandle.standardError.write(Data("usage: chronicle-stress MODE STORE-DIR [RANGE-FILE]\n".utf8))
    exit(2)
}
let mode = arguments[1]
if mode == "reclaim" {
    // Like `chronicle compact --reclaim`: the store is closed before its space is reclaimed.
    do {
        let directory = URL(fileURLWithPath: arguments[2], isDirectory: true)
        do { _ = try Store(directory: directory).compact(before: Date(timeIntervalSinceReferenceDate: 0)) }
        _ = try Store.reclaimSpace(directory: directory)
    } catch {
        FileHandle.standardError.write(Data("failed: \(error)\n".utf8))
        exit(3)
    }
    exit(0)
}
let store: Store
do {
    let directory = URL(fileURLWithPath: arguments[2], isDirectory: true)
    var configuration = Store.Configuration()
    if let passphrase = ProcessInfo.processInfo.environment["CHRONICLE_PASSPHRASE"] {
        configuration.keySource = .passphrase(passphrase)
    }
    if let kept = ProcessInfo.processInfo.environment["CHRONICLE_RETENTION"].flatMap(Int.init) {
        configuration.retention = .revisions(kept)
    }
    store = try Store(directory: directory, configuration: configuration)
} catch {
    FileHandle.standardError.write(Data("open failed: \(error)\n".utf8))
    exit(1)
}

/// Writes one line to stdout immediately (the parent reads acks as they happen).
@Sendable func ack(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

@Sendable func counter(_ name: String) -> Key<Int> { Key<Int>(name, default: 0) }

switch mode {
case "writes":
    for thread in 0..<8 {
        Thread {
            var n = store[counter("w.\(thread)")]
            while true {
                n += 1
                do { try store.set(n, for: counter("w.\(thread)")) } catch { exit(3) }
                ack("ack \(thread) \(n)")
            }
        }.start()
    }
    while true { sleep(60) }
case "batches":
    var n = store[counter("b.0")]
    while true {
        n += 1
        let value = n
        do { try store.write { batch in for i in 0..<10 { batch[counter("b.\(i)")] = value } } } catch { exit(3) }
        ack("ack \(n)")
    }
case "rebuild", "compact", "import":
    var n = store[counter("r.n")]
    let range = arguments.count > 3 ? FileManager.default.contents(atPath: arguments[3]) : nil
    while true {
        n += 1
        do {
            try store.set(n, for: counter("r.n"))
            ack("ack \(n)")
            switch mode {
            case "rebuild": try store.rebuildViews()
            case "compact": _ = try store.compact(before: Date())
            default: if let range { _ = try store.importRange(range) }
            }
        } catch {
            FileHandle.standardError.write(Data("failed: \(error)\n".utf8))
            exit(3)
        }
    }
case "mixed":
    let done = DispatchSemaphore(value: 0)
    Task.detached {
        var n = store[counter("m.d")]
        while true {
            n += 1
            for i in 1...4 { store[counter("m.\(i)")] = n }  // returns at once; durable after the flush
            do {
                try await store.flush()
                try store.set(n, for: counter("m.d"))
            } catch {
                FileHandle.standardError.write(Data("failed: \(error)\n".utf8))
                exit(3)
            }
            ack("ack \(n)")
        }
    }
    done.wait()
case "increment":
    for _ in 0..<300 {
        do { try store.update(counter("inc")) { $0 += 1 } } catch {
            FileHandle.standardError.write(Data("failed: \(error)\n".utf8))
            exit(3)
        }
    }
    ack("ack done")
case "exit":
    for i in 0..<50 { store[counter("exit.\(i)")] = i }
case "set" where arguments.count == 5:
    do { try store.set(arguments[4], for: Key<String>(arguments[3], default: "")) } catch {
        FileHandle.standardError.write(Data("failed: \(error)\n".utf8))
        exit(3)
    }
case "set-kept" where arguments.count == 5:
    do {
        let key = Key<Int>(arguments[3], default: 0, retention: .revisions(Int(arguments[4]) ?? 1))
        try store.set(store[key] + 1, for: key)
    } catch {
        FileHandle.standardError.write(Data("failed: \(error)\n".utf8))
        exit(3)
    }
case "get" where arguments.count == 4:
    ack("\(store[Key<Int>(arguments[3], default: 0)])")
case "fill" where arguments.count == 4:
    let total = Int(arguments[3]) ?? 0
    var written = 0
    while written < total {
        let count = min(1_000, total - written)
        let base = written
        do { try store.write { batch in for i in 0..<count { batch[counter("fill.\((base + i) % 1_000)")] = base + i } } } catch { exit(3) }
        written += count
    }
    ack("filled \(written)")
case "import-once" where arguments.count == 4:
    do {
        let receipt = try store.importRange(try Data(contentsOf: URL(fileURLWithPath: arguments[3])))
        ack("received \(receipt.received)")
    } catch {
        FileHandle.standardError.write(Data("failed: \(error)\n".utf8))
        exit(3)
    }
default:
    FileHandle.standardError.write(Data("unknown mode \(mode)\n".utf8))
    exit(2)
}
