// The snippet of Documentation.docc/Replication.md: compiled by every build; a test checks the article shows these lines.
// snippet.hide
import Chronicle
import Foundation

let url = FileManager.default.temporaryDirectory.appendingPathComponent("replication-\(UUID().uuidString)")
let store = try Store(directory: url.appendingPathComponent("a"))
let other = try Store(directory: url.appendingPathComponent("b"))
let sharedFolder = url.appendingPathComponent("shared")
// snippet.show
let replicator = Replicator(store: store, peers: [.store(other), .directory(sharedFolder)])
let report = try await replicator.sync()      // push and pull every eligible event
await replicator.start()                      // automatic-small mode
