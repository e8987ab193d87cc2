import ChronicleFormat
import ChronicleLog
import Synchronization

/// The open observation channels of a store, one per observed key and value type, each with
/// its handler in the log's observer hub: what a store's `updates(of:)` joins.
final class KeyChannels: Sendable {
    private let open = Mutex<[ChannelID: OpenChannel]>([:])
    /// Who waits for the last channel to close (``waitUntilEmpty()``), under the lock of `open`'s changes.
    private let emptiedWaiters = Mutex<[CheckedContinuation<Void, Never>]>([])

    /// Whether no channel is open (every observation ended).
    var isEmpty: Bool { open.withLock { $0.isEmpty } }

    /// Returns once no channel is open: at once when none is, else when the last one closes (a
    /// gate tests wait on instead of polling ``isEmpty``).
    func waitUntilEmpty() async {
        await withCheckedContinuation { continuation in
            let now = open.withLock { channels in
                if channels.isEmpty { return true }
                emptiedWaiters.withLock { $0.append(continuation) }
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// Subscribes `continuation` to the channel of `key` for values of its type, opening the
    /// channel (and its handler in the log's observer hub) on first use. One lock covers finding
    /// the channel and joining it, so a channel never closes between the two.
    func subscribe<K: ValueKey>(
        _ continuation: KeyChannel<K>.Continuation, to key: K, id: ChannelID, reader: any ObservationReader, eventLog: EventLog
    ) -> (KeyChannel<K>, Int) {
        open.withLock { channels in
            if let open = channels[id], let channel = open.channel as? KeyChannel<K> { return (channel, channel.subscribe(continuation)) }
            let channel = KeyChannel(reader: reader, key: key)
            let formerNames = Set(key.formerNames.map(KeyName.init))
            let domain = key.domain
            let handler = eventLog.observers.add { change in
                switch change {
                case let .events(events):
                    if !formerNames.isEmpty, events.contains(where: { $0.event.domain == domain && formerNames.contains(KeyName($0.event.key)) }) {
                        channel.refresh()  // a change under a former name: re-read through the fallback
                    } else {
                        channel.deliver(events)
                    }
                case .reset:
                    channel.refresh()
                case let .pending(changes):
                    if let change = changes.last(where: { $0.domain == domain && KeyName($0.key) == channel.name }) { channel.deliver(pending: change) }
                }
            }
            channels[id] = OpenChannel(channel: channel, handler: handler)
            return (channel, channel.subscribe(continuation))
        }
    }

    /// Closes `channel`, opened under `id`, when its last subscriber has gone.
    func closeIfIdle<K: ValueKey>(_ channel: KeyChannel<K>, id: ChannelID, eventLog: EventLog) {
        let waiters = open.withLock { channels -> [CheckedContinuation<Void, Never>] in
            guard let open = channels[id], (open.channel as? KeyChannel<K>) === channel, channel.isIdle else { return [] }
            channels[id] = nil
            eventLog.observers.remove(open.handler)
            guard channels.isEmpty else { return [] }
            return emptiedWaiters.withLock { waiters in
                defer { waiters = [] }
                return waiters
            }
        }
        for waiter in waiters { waiter.resume() }
    }
}

/// Which channel an observation joins: one per key name, domain, value type, default and former
/// names. A channel reads and decodes for the key that opened it, so two keys of one name that
/// read differently (another default, other former names) each get their own.
struct ChannelID: Hashable, Sendable {
    var domain: Domain
    /// By its bytes, as the store keeps names: two canonically equivalent spellings are two keys.
    var name: KeyName
    var valueType: ObjectIdentifier
    /// The default's encoding and bytes (empty for `nil`; `nil` when it cannot be encoded). Two
    /// equal defaults whose encoding varies (a `Set` from two instances) get two channels: each
    /// still right, only not shared.
    var defaultValue: [UInt8]?
    var formerNames: [KeyName]

    init<K: ValueKey>(_ key: K) {
        domain = key.domain
        name = KeyName(key.name)
        valueType = ObjectIdentifier(K.Value.self)
        defaultValue =
            ValueCoder.isNil(key.defaultValue)
            ? [] : (try? ValueCoder.encode(key.defaultValue, key: key.name)).map { [$0.0.rawValue] + $0.1 }
        formerNames = key.formerNames.map(KeyName.init)
    }
}

/// A channel and its handler in the log's observer hub.
struct OpenChannel: Sendable {
    let channel: any Sendable
    let handler: Int
}
