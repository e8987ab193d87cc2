import ArgumentParser
@_spi(Tools) import Chronicle
import Foundation

extension ChronicleCommand {
    struct Stats: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Sizes and counts.", discussion: "Example: chronicle stats --store ./store")

        @OptionGroup var options: StoreOptions

        func run() throws {
            let stats = try options.openExisting().statistics()
            printTable([
                ["replica", stats.replicaID.hex], ["epoch", stats.epoch], ["head sequence", "\(stats.head)"],
                ["log records", "\(stats.records)"], ["keys (defaults)", "\(stats.defaultsKeys)"], ["keys (secrets)", "\(stats.secretKeys)"],
                ["known event ids", "\(stats.dots)"], ["held by drift guard", "\(stats.deferred)"], ["checkpoints", "\(stats.checkpoints)"],
                ["data keys", "\(stats.dataKeys)"], ["quarantined", "\(stats.quarantined)"],
                ["relay-only records", "\(stats.relayOnly) (\(stats.relayOnlyBytes) bytes)"], ["bytes in use", "\(stats.usedBytes)"], ["file bytes", "\(stats.fileBytes)"],
                ["map size", "\(stats.mapSize)"],
            ] + stats.relayOnlyBySource.sorted { $0.key < $1.key }.map { ["relay-only from \(terminalSafe($0.key))", "\($0.value)"] })
        }
    }
}
