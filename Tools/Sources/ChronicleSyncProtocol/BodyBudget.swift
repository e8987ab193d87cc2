import Hummingbird
package import HummingbirdCore
package import NIOCore
import Synchronization

/// The least rate at which a request body must keep arriving: at least `bytes` in every
/// `per`. A body that trickles (a byte now and then keeps a connection from being idle) is cut
/// off with 408, and what it held is released.
public struct MinimumBodyRate: Sendable {
    /// The bytes that must arrive in every window.
    public var bytes: Int
    /// The window.
    public var per: Duration

    /// At least `bytes` in every `per`.
    public init(bytes: Int, per: Duration) {
        self.bytes = bytes
        self.per = per
    }

    /// 16 KiB every 10 s: a 16 MiB push on the slowest link still arrives within ~17 minutes.
    public static let standard = MinimumBodyRate(bytes: 16 << 10, per: .seconds(10))
}

/// The bytes of request bodies a server holds at once, across every connection, and what one
/// owner (a hub's tenant, a client address of `chronicle serve`) may hold of them. A push
/// reserves what it has sent as it arrives, and keeps it until its handler returns. A push that
/// finds the budget full cuts off the slowest body of another owner still arriving (408), and
/// waits a moment for the room; one that would pass its owner's share, or finds no body to cut,
/// is refused with 503 and `Retry-After`. A slow sender holds only what it sent, a stalled one
/// is cut off (``MinimumBodyRate``), and bodies that trickle just above the minimum hold the
/// budget only until a push needs it. While a body waits for room the server does not read it,
/// so its rate is not judged meanwhile; it may still be cut off for a push that needs the room.
/// Decoding and importing a range takes several times its size, so this bounds the memory
/// pushes in flight can take.
package final class BodyBudget: Sendable {
    package let capacity: Int
    /// The most one owner holds at once.
    package let share: Int
    package let minimumRate: MinimumBodyRate
    /// Told the bytes reserved in all after each reservation grows (for tests and diagnostics,
    /// which wait on it rather than poll it).
    let onReserved: (@Sendable (_ total: Int) -> Void)?
    /// Told what happens to bodies that find the budget full (for tests, which wait on it).
    let onEvent: (@Sendable (Event) -> Void)?

    /// What ``onEvent`` is told.
    package enum Event: Sendable, Equatable {
        /// A body of `owner` found the budget full and waits for room.
        case waiting(owner: String)
        /// A push that needed the room cut off a body of `owner`.
        case cutOff(owner: String)
    }

    /// One body's hold on the budget.
    private struct Hold {
        var bytes = 0
        /// The body arrived whole (its handler runs or is about to): never cut off.
        var complete = false
        /// A push that needed the room cut it off; it releases the room as soon as it notices.
        var evicted = false
        /// It waits for room (its rate is not judged meanwhile).
        var waiting = false
    }

    private final class Reservation: Sendable {
        let owner: String
        let started = ContinuousClock.now
        let state = Mutex(Hold())

        init(owner: String) { self.owner = owner }
    }

    private struct Use {
        var total = 0
        var byOwner: [String: Int] = [:]
        var active: [ObjectIdentifier: Reservation] = [:]
    }

    /// Taken before any reservation's own lock, never after.
    private let used = Mutex(Use())

    package init(
        capacity: Int, share: Int? = nil, minimumRate: MinimumBodyRate = .standard, onReserved: (@Sendable (_ total: Int) -> Void)? = nil,
        onEvent: (@Sendable (Event) -> Void)? = nil
    ) {
        self.capacity = capacity
        self.share = min(capacity, share ?? capacity)
        self.minimumRate = minimumRate
        self.onReserved = onReserved
        self.onEvent = onEvent
    }

    /// Reads `request`'s body (at most `limit` bytes: 413 past it, declared or streamed),
    /// reserving it against the budget and `owner`'s share as it arrives, and runs `handle`
    /// with it; the reservation ends when `handle` returns.
    /// - Throws: `HTTPError` 413 for a body over `limit`, 503 when the budget or the owner's
    ///   share cannot hold it now, 408 when it arrives slower than ``minimumRate`` or a push that
    ///   needed the room cut it off.
    package func withBody<R>(of request: Request, limit: Int, owner: String, _ handle: (ByteBuffer) async throws -> R) async throws -> R {
        if let length = request.headers[.contentLength].flatMap(Int.init), length > limit {
            throw HTTPError(.contentTooLarge, message: "a body of \(length) bytes is over the limit of \(limit)")
        }
        let reservation = Reservation(owner: owner)
        used.withLock { $0.active[ObjectIdentifier(reservation)] = reservation }
        defer { release(reservation) }
        let body = try await withThrowingTaskGroup(of: ByteBuffer?.self) { group in
            group.addTask { try await self.read(request, limit: limit, reservation: reservation) }
            group.addTask { try await self.watch(reservation); return nil }
            defer { group.cancelAll() }
            while let result = try await group.next() {
                if let result { return result }
            }
            throw HTTPError(.requestTimeout, headers: Self.closing, message: "the body stopped arriving")
        }
        return try await handle(body)
    }

    /// A 408 closes the connection: the rest of a trickled body is never read.
    private static let closing: HTTPFields = [.connection: "close"]

    private static var cutOff: HTTPError {
        HTTPError(.requestTimeout, headers: closing, message: "the body arrived too slowly while the server needed the room; retry")
    }

    private func read(_ request: Request, limit: Int, reservation: Reservation) async throws -> ByteBuffer {
        var buffer = ByteBuffer()
        for try await chunk in request.body {
            guard buffer.readableBytes + chunk.readableBytes <= limit else {
                throw HTTPError(.contentTooLarge, message: "a body over the limit of \(limit) bytes")
            }
            try await reserve(chunk.readableBytes, reservation)
            buffer.writeImmutableBuffer(chunk)
        }
        // Whole, unless a push cut it off first: then its room goes back now, not after its handler.
        let cut = reservation.state.withLock { hold -> Bool in
            if !hold.evicted { hold.complete = true }
            return hold.evicted
        }
        if cut { throw Self.cutOff }
        return buffer
    }

    /// Returns never; throws 408 once a window of ``minimumRate`` passes with less than its
    /// bytes, or once a push that needed the room cut this body off. While the body waits for
    /// room the server stops reading it, so a window starts again when the wait ends.
    private func watch(_ reservation: Reservation) async throws {
        var mark = 0
        var windowStart = ContinuousClock.now
        while true {
            try await Task.sleep(for: .milliseconds(100))
            let hold = reservation.state.withLock { $0 }
            if hold.evicted { throw Self.cutOff }
            if hold.waiting {
                (mark, windowStart) = (hold.bytes, ContinuousClock.now)
                continue
            }
            guard ContinuousClock.now - windowStart >= minimumRate.per else { continue }
            guard hold.bytes - mark >= minimumRate.bytes else {
                throw HTTPError(
                    .requestTimeout, headers: Self.closing, message: "the body arrived slower than \(minimumRate.bytes) bytes every \(minimumRate.per)")
            }
            (mark, windowStart) = (hold.bytes, ContinuousClock.now)
        }
    }

    /// Reserves `bytes` more for `reservation`, cutting off the slowest body of another owner
    /// when the budget is full and waiting for its room: up to two seconds while no room is on
    /// its way back, up to ten while a body cut off for it is releasing it; 503 otherwise.
    private func reserve(_ bytes: Int, _ reservation: Reservation) async throws {
        defer { reservation.state.withLock { $0.waiting = false } }
        var idle = 0  // waits with no room on its way back
        for _ in 0..<Self.longestWait {
            switch tryReserve(bytes, reservation) {
            case .reserved: return
            case .evicted: throw Self.cutOff
            case .overShare: throw Self.busy
            case .full(let roomComing):
                if !roomComing { idle += 1 }
                guard idle < Self.waitsWithoutRoom else { throw Self.busy }
                reservation.state.withLock { $0.waiting = true }
                onEvent?(.waiting(owner: reservation.owner))
                try await Task.sleep(for: .milliseconds(50))
            }
        }
        throw Self.busy
    }

    /// 50 ms waits for room: 40 while none is on its way back, 200 in all.
    private static let waitsWithoutRoom = 40
    private static let longestWait = 200

    private static var busy: HTTPError {
        var headers = HTTPFields()
        headers[.retryAfter] = "1"
        return HTTPError(.serviceUnavailable, headers: headers, message: "the server is receiving as much as it may hold at once; retry")
    }

    /// `evicted`: the body asking was cut off itself. `roomComing`: a body cut off for room has
    /// not released it yet.
    private enum Reserved { case reserved, evicted, overShare, full(roomComing: Bool) }

    private func tryReserve(_ bytes: Int, _ reservation: Reservation) -> Reserved {
        let owner = reservation.owner
        var victim: Reservation?
        var total = 0
        let outcome = used.withLock { used -> Reserved in
            // A body cut off cuts off no other: it is on its way out.
            if reservation.state.withLock({ $0.evicted }) { return .evicted }
            let held = used.byOwner[owner] ?? 0
            guard held + bytes <= share else { return .overShare }
            guard used.total + bytes > capacity else {
                used.total += bytes
                used.byOwner[owner] = held + bytes
                reservation.state.withLock { $0.bytes += bytes }
                total = used.total
                return .reserved
            }
            // Full: cut off the slowest body of another owner still arriving, one at least a window
            // old (waiting for room or not: waiting is no shield), unless a body (of any owner) is
            // already on its way out.
            let now = ContinuousClock.now
            let holds = used.active.values.filter { $0 !== reservation }.map { ($0, $0.state.withLock { $0 }) }
            guard !holds.contains(where: { $0.1.evicted }) else { return .full(roomComing: true) }
            let rate = { (body: Reservation, hold: Hold) in Double(hold.bytes) / (now - body.started).seconds }
            let slowest = holds.filter { $0.0.owner != owner && !$0.1.complete && $0.1.bytes > 0 && now - $0.0.started >= minimumRate.per }
                .min { rate($0.0, $0.1) < rate($1.0, $1.1) }?.0
            // Under its own lock: a body that arrived whole meanwhile runs its handler instead.
            guard let slowest, slowest.state.withLock({ hold -> Bool in
                if !hold.complete { hold.evicted = true }
                return !hold.complete
            }) else { return .full(roomComing: false) }
            victim = slowest
            return .full(roomComing: true)
        }
        if let victim { onEvent?(.cutOff(owner: victim.owner)) }
        if case .reserved = outcome { onReserved?(total) }
        return outcome
    }

    private func release(_ reservation: Reservation) {
        used.withLock { used in
            used.active[ObjectIdentifier(reservation)] = nil
            let bytes = reservation.state.withLock { $0.bytes }
            guard bytes > 0 else { return }
            used.total -= bytes
            let held = (used.byOwner[reservation.owner] ?? bytes) - bytes
            used.byOwner[reservation.owner] = held > 0 ? held : nil
        }
    }

    /// Bytes reserved now (for tests).
    package var reserved: Int { used.withLock { $0.total } }
}

extension Duration {
    /// The duration in seconds, as a floating-point number.
    fileprivate var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
