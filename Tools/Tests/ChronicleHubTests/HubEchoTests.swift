@testable import Chronicle
@testable import ChronicleFormat
import ChronicleHub
import ChronicleTesting
import Foundation
import PostgresNIO
import Testing
import ToolsTestSupport

/// Devices do not push back what they pulled from the hub: each event is pushed once, by its
/// writer (16 devices × 40 events used to push 8,000 events for 640 distinct).
extension HubTests {
    @Test func devicesPushOnlyWhatTheyWrote() async throws {
        try await withHub { hub in
            let tenant = try await hub.tenant()
            let devices = 4
            var tokens: [String] = []
            for index in 0..<devices { tokens.append(try await hub.token(tenant, "device-\(index)")) }
            try await withTemporaryStores(devices) { stores in
                var sent = 0
                for round in 0..<2 {
                    for (index, store) in stores.enumerated() {
                        if round == 0 {
                            try store.write { batch in
                                for i in 0..<10 { batch[Key<Int>("echo.\(index).\(i)", default: 0, sync: .manual)] = i }
                            }
                        }
                        let report = try await Replicator(store: store, peers: [hub.peer(node: index % 2, token: tokens[index])]).sync()
                        sent += report.sent
                    }
                }
                #expect(sent == devices * 10, "pushed \(sent) events for \(devices * 10) distinct")
                for store in stores { #expect(store[Key<Int>("echo.0.9", default: 0, sync: .manual)] == 9) }
                let summary = try await hub.admin.tenants().first { $0.name == tenant }
                #expect(summary?.events == Int64(devices * 10))
            }
        }
    }
}
