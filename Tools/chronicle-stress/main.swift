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

let arguments = CommandLine.arguments
guard arguments.count >= 3 else {
    FileHandle.standardError.write(Data("usage: chronicle-stress MODE STORE-DIR [RANGE-FILE]\n".utf8))
    exit(2)
}
let mode = arguments[1]
let store: Store
do {
    store = try Store(directory: URL(fileURLWithPath: arguments[2], isDirectory: true))
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
default:
    FileHandle.standardError.write(Data("unknown mode \(mode)\n".utf8))
    exit(2)
}
