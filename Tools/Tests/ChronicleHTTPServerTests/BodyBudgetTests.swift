@testable import Chronicle
@testable import ChronicleHTTPServer
@testable import ChronicleSyncProtocol
import ChronicleTesting
import Foundation
import Hummingbird
import NIOHTTP1
import Synchronization
import Testing
import ToolsTestSupport

final class Flag: Sendable {
    private let value = Mutex(false)
    func set() { value.withLock { $0 = true } }
    var isSet: Bool { value.withLock { $0 } }
}

/// The bytes of push bodies `chronicle serve` holds at once (``BodyBudget``).
struct BodyBudgetTests {
    /// One token stands for everyone at `chronicle serve`, and each client address may hold
    /// half the budget. A token holder at two addresses sends almost all of a large push from
    /// each and then keeps just above the minimum rate: with the defaults (80 MiB bodies, 160
    /// MiB budget, 16 KiB every 10 s) two connections of 40 MiB per address hold the whole
    /// budget for about seven hours, for 6 KB/s. Every other client's push gets 503 meanwhile.
    @Test func slowPushesFromTwoAddressesDoNotStarveEveryoneElse() async throws {
        let directories = Directories()
        let store = try Store(directory: directories.make())
        let writer = try Store(directory: directories.make())
        writer[Keys.httpNote] = String(repeating: "v", count: 80_000)
        let range = try writer.exportRange(after: 0)
        try await withServer(store, configure: { server in
            server.maxBodySize = 1 << 20
            server.maxBodyBytesInFlight = 2 << 20
            server.minimumBodyRate = .init(bytes: 1_024, per: .seconds(1))
        }) { url in
            let port = try #require(url.port)
            let stop = Flag()
            var sockets: [RawSocket] = []
            defer {
                stop.set()
                for socket in sockets { socket.close() }
            }
            for address in ["127.0.0.3", "127.0.0.4"] {
                let socket = try RawSocket(port: port, from: address)
                sockets.append(socket)
                let length = 1 << 20
                let head = "POST /v1/range HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer test-token\r\nContent-Length: \(length)\r\n\r\n"
                                Thread {
                    socket.send(head + String(repeating: "x", count: length - (32 << 10)))
                    // Then 4 KiB a second: four times the minimum rate, for the 8 s left.
                    for _ in 0..<32 where !stop.isSet {
                        socket.send(String(repeating: "x", count: 1_024))
                        Thread.sleep(forTimeInterval: 0.25)
                    }
                }.start()
            }
            try await Task.sleep(for: .seconds(3))  // past a few windows of the minimum rate (not an assertion)
            let answer = try await rawRequest(url.appendingPathComponent("v1/range"), method: .POST, token: "test-token", body: range)
            #expect(answer.status == 200, "another client's push got \(answer.status) while two addresses trickled above the minimum rate")
        }
    }

    /// A body that stops arriving altogether (not a byte more) is cut off within a window or
    /// two of the minimum rate, not at the idle timeout.
    @Test func aBodyThatStopsArrivingIsCutOffAtTheMinimumRate() async throws {
        let directories = Directories()
        let store = try Store(directory: directories.make())
        try await withServer(store, configure: { server in
            server.minimumBodyRate = .init(bytes: 1_024, per: .seconds(1))
            server.idleTimeout = .seconds(30)
        }) { url in
            let port = try #require(url.port)
            let stalled = try RawSocket(port: port, from: "127.0.0.7")
            defer { stalled.close() }
            stalled.send("POST /v1/range HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer test-token\r\nContent-Length: 100000\r\n\r\n0123456789")
            let arrived = await stalled.readable()
            #expect(arrived && stalled.answeredOrClosed(status: 408, within: 0), "a silent body was not cut off")
        }
    }
}

/// The budget itself, without a server: bodies go to ``BodyBudget/withBody`` directly, so a
/// test decides when a holder's handler returns, and sees when a body waits for room.
struct BodyBudgetWaitTests {
    static let capacity = 64 << 10
    /// A window far shorter than the budget's wait for room (40 × 50 ms).
    static let rate = MinimumBodyRate(bytes: 1_024, per: .milliseconds(200))

    /// What `withBody` ended with: the status a body was refused with, or 200 once `handle` ran.
    static func status(
        of budget: BodyBudget, bytes: Int, owner: String, handle: @Sendable () async -> Void = {}
    ) async -> HTTPResponse.Status {
        await status(of: budget, body: RequestBody(buffer: ByteBuffer(repeating: 0x78, count: bytes)), owner: owner, handle: handle)
    }

    static func status(
        of budget: BodyBudget, body: RequestBody, owner: String, handle: @Sendable () async -> Void = {}
    ) async -> HTTPResponse.Status {
        let request = Request(head: HTTPRequest(method: .post, scheme: "http", authority: "x", path: "/v1/range"), body: body)
        do {
            try await budget.withBody(of: request, limit: capacity, owner: owner) { _ in await handle() }
            return .ok
        } catch let error as HTTPError {
            return error.status
        } catch {
            return .internalServerError
        }
    }

    /// A body waiting for room the server does not have is not arriving slowly: the server
    /// stopped reading it. When the room does not come back, it is refused with 503 (retry),
    /// not cut off with 408 for a rate its sender never had the chance to keep.
    @Test func aBodyWaitingForRoomIsRefusedWithRetryNotCutOffForItsRate() async {
        let reserved = Watched(0)
        let lateDone = Watched(false)
        let budget = BodyBudget(capacity: Self.capacity, minimumRate: Self.rate, onReserved: { total in reserved.update { $0 = total } })
        // A whole body (no push may cut it off) holds the budget until the late one is answered.
        async let holder = Self.status(of: budget, bytes: Self.capacity, owner: "a") { _ = await lateDone.wait { $0 } }
        #expect(await reserved.wait { $0 == Self.capacity })
        let late = await Self.status(of: budget, bytes: 1_024, owner: "b")
        lateDone.update { $0 = true }
        #expect(late == .serviceUnavailable, "a body that waited for room got \(late)")
        #expect(await holder == .ok)
    }

    /// A body that waited several windows of the minimum rate for room is read once the room
    /// comes back, and its handler runs.
    @Test func aBodyThatWaitedLongerThanAWindowIsReadWhenRoomComesBack() async {
        let reserved = Watched(0)
        let waits = Watched(0)
        let budget = BodyBudget(
            capacity: Self.capacity, minimumRate: Self.rate, onReserved: { total in reserved.update { $0 = total } },
            onEvent: { event in if case .waiting = event { waits.update { $0 += 1 } } })
        // The holder returns once the late body has waited 8 times (400 ms, two windows), or
        // once it was answered without waiting that long.
        async let holder = Self.status(of: budget, bytes: Self.capacity, owner: "a") {
            _ = await waits.wait { $0 >= 8 }
        }
        #expect(await reserved.wait { $0 == Self.capacity })
        let late = await Self.status(of: budget, bytes: 1_024, owner: "b")
        waits.update { $0 = max($0, 8) }
        #expect(late == .ok, "a body that waited for room got \(late)")
        #expect(await holder == .ok)
        #expect(budget.reserved == 0)
    }

    /// A body cut off for room just as its last bytes arrive gives its room back at once: its
    /// handler does not run (it would hold the room, and the push that needed it would wait).
    @Test func aBodyCutOffAsItArrivesWholeGivesItsRoomBack() async {
        let reserved = Watched(0)
        let holderMayReturn = Watched(false)
        let stop = Flag()
        let (slowBody, slowSource) = RequestBody.makeStream()
        let budget = BodyBudget(
            capacity: Self.capacity, minimumRate: Self.rate, onReserved: { total in reserved.update { $0 = total } },
            onEvent: { event in
                // The slow body's last bytes arrive the moment it is cut off.
                if event == .cutOff(owner: "slow") {
                    stop.set()
                    slowSource.finish()
                }
            })
        // A whole body of 16 KiB holds its room until the late push is answered.
        async let holder = Self.status(of: budget, bytes: 16 << 10, owner: "holder") { _ = await holderMayReturn.wait { $0 } }
        #expect(await reserved.wait { $0 == 16 << 10 })
        // 32 KiB at once, then 512 bytes every 50 ms: ten times the minimum rate.
        let handled = Flag()
        async let slow = Self.status(of: budget, body: slowBody, owner: "slow") { handled.set() }
        let trickle = Task {
            await slowSource.yield(ByteBuffer(repeating: 0x78, count: 32 << 10))
            while !stop.isSet {
                await slowSource.yield(ByteBuffer(repeating: 0x78, count: 512))
                try? await Task.sleep(for: .milliseconds(50))
            }
        }
        #expect(await reserved.wait { $0 >= 48 << 10 })
        // 24 KiB does not fit beside them: the slow body is cut off once it is a window old.
        let late = await Self.status(of: budget, bytes: 24 << 10, owner: "late")
        holderMayReturn.update { $0 = true }
        stop.set()  // also when a starved trickle was cut off for its rate instead
        slowSource.finish()
        await trickle.value
        #expect(late == .ok, "the push that needed the room got \(late)")
        #expect(await slow == .requestTimeout)
        #expect(!handled.isSet, "the body cut off ran its handler")
        #expect(await holder == .ok)
        #expect(budget.reserved == 0)
    }

    /// Waiting for room is no shield: a body that waits is not judged by its rate meanwhile, but
    /// a push that needs the room may cut it off like any other body a window old.
    @Test func aBodyWaitingForRoomCanBeCutOffForAPushThatNeedsIt() async {
        let reserved = Watched(0)
        let waiting = Watched(false)
        let holderMayReturn = Watched(false)
        let (waiterBody, waiterSource) = RequestBody.makeStream()
        let budget = BodyBudget(
            capacity: Self.capacity, minimumRate: Self.rate, onReserved: { total in reserved.update { $0 = total } },
            onEvent: { event in if event == .waiting(owner: "waiter") { waiting.update { $0 = true } } })
        async let holder = Self.status(of: budget, bytes: 32 << 10, owner: "holder") { _ = await holderMayReturn.wait { $0 } }
        #expect(await reserved.wait { $0 == 32 << 10 })
        async let waiter = Self.status(of: budget, body: waiterBody, owner: "waiter")
        await waiterSource.yield(ByteBuffer(repeating: 0x78, count: 24 << 10))
        #expect(await reserved.wait { $0 == 56 << 10 })
        await waiterSource.yield(ByteBuffer(repeating: 0x78, count: 16 << 10))  // does not fit: it waits
        #expect(await waiting.wait { $0 })
        let late = await Self.status(of: budget, bytes: 16 << 10, owner: "late")
        waiterSource.finish()
        holderMayReturn.update { $0 = true }
        #expect(late == .ok, "the push that needed the room got \(late)")
        #expect(await waiter == .requestTimeout, "the waiting body was not cut off")
        #expect(await holder == .ok)
        #expect(budget.reserved == 0)
    }

    /// A body of an owner whose other body was just cut off (its room on its way back) cuts off
    /// no body of another owner: one cut-off per push that needs room.
    @Test func aSecondBodyOfAnOwnerCutOffCutsOffNoOtherOwner() async {
        let reserved = Watched(0)
        let cutOffs = Watched<[String]>([])
        let holderMayReturn = Watched(false)
        let (bBody, bSource) = RequestBody.makeStream()
        let (aBody, aSource) = RequestBody.makeStream()
        let (secondBody, secondSource) = RequestBody.makeStream()
        let budget = BodyBudget(
            capacity: Self.capacity, minimumRate: MinimumBodyRate(bytes: 0, per: .milliseconds(200)),
            onReserved: { total in reserved.update { $0 = total } },
            onEvent: { event in
                guard case .cutOff(let owner) = event else { return }
                cutOffs.update { $0.append(owner) }
                // The moment "a" is cut off, its second body needs room too.
                if owner == "a" { Task { await secondSource.yield(ByteBuffer(repeating: 0x78, count: 1 << 10)) } }
            })
        async let b = Self.status(of: budget, body: bBody, owner: "b")
        async let a = Self.status(of: budget, body: aBody, owner: "a")
        async let second = Self.status(of: budget, body: secondBody, owner: "a")
        await bSource.yield(ByteBuffer(repeating: 0x78, count: 16 << 10))
        await aSource.yield(ByteBuffer(repeating: 0x78, count: 8 << 10))
        #expect(await reserved.wait { $0 == 24 << 10 })
        async let holder = Self.status(of: budget, bytes: 40 << 10, owner: "holder") { _ = await holderMayReturn.wait { $0 } }
        #expect(await reserved.wait { $0 == 64 << 10 })
        // Full: the late push cuts off the slowest body a window old ("a": 8 KiB to b's 16). Once
        // "a" has released its room, the late push (4 KiB) and the second body (1 KiB) both fit,
        // so no other cut-off is ever needed; one while "a" still holds its room is the bug.
        let late = await Self.status(of: budget, bytes: 4 << 10, owner: "late")
        holderMayReturn.update { $0 = true }
        for source in [aSource, bSource, secondSource] { source.finish() }
        _ = await (a, b, second, holder)
        #expect(late == .ok, "the push that needed the room got \(late)")
        #expect(cutOffs.value == ["a"], "cut off: \(cutOffs.value)")
    }
}
