import ArgumentParser
@_spi(Tools) import Chronicle
import Foundation

extension EverydayCommands {
    struct Stats: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Sizes and counts.", discussion: "Examples:\n  chronicle stats --store ./store\n  chronicle stats --json --store ./store")

        @OptionGroup var options: StoreOptions
        @Flag(help: "One JSON object.") var json = false

        func run() throws {
            let stats = try options.openExisting().statistics()
            if json {
                printJSONLine([
                    "replica": stats.replicaID.hex, "epoch": stats.epoch, "head": stats.head, "records": stats.records,
                    "defaultsKeys": stats.defaultsKeys, "secretKeys": stats.secretKeys, "knownEventIDs": stats.dots,
                    "heldByDriftGuard": stats.deferred, "checkpoints": stats.checkpoints, "dataKeys": stats.dataKeys,
                    "quarantined": stats.quarantined, "relayOnly": stats.relayOnly, "relayOnlyBytes": stats.relayOnlyBytes,
                    "relayOnlyBySource": stats.relayOnlyBySource, "bytesInUse": stats.usedBytes, "fileBytes": stats.fileBytes,
                    "mapSize": stats.mapSize,
                ])
                return
            }
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
