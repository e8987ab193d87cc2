@_spi(Wire) import ChronicleFormat
import ChronicleLog

/// A mailbox's answer to a request by identity, gathered file by file in bounded memory
/// (docs/FORMAT.md 7.6): it keeps the ``versionsPerIdentity`` smallest versions of each identity
/// and, over all identities, only the smallest versions whose bytes fit the answer's budget, so
/// whoever can write the folder cannot set the member's memory by storing many or large
/// versions. An identity one of whose versions was set aside is not answered whole.
struct MailboxAnswer {
    /// The most versions of one identity an answer carries (a member needs the genuine one; a
    /// carrier's forgeries beside it are at most this many minus one).
    static let versionsPerIdentity = 4
    /// The answer's budget of event and key-record bytes.
    static let maxBytes = 1 << 20
    /// The most events and key records an answer carries.
    static let maxItems = 4_096

    private struct Candidate {
        var position: Int
        var event: Event
        var encoded: [UInt8]
        var keys: [WrappedKey]
    }

    /// The distinct identities asked, in order of first mention.
    let asked: [EventIdentity]
    private let positions: [EventIdentity: Int]
    private var candidates: [Candidate] = []
    /// The bytes of the versions held so far (at most about ``maxBytes``).
    private(set) var candidateBytes = 0
    private var whole: [Bool]

    init(asking identities: [EventIdentity]) {
        asked = EventIdentity.distinct(identities)
        positions = Dictionary(uniqueKeysWithValues: asked.enumerated().map { ($1, $0) })
        whole = [Bool](repeating: true, count: asked.count)
    }

    /// Considers the events of one file (and the key records it carries for them).
    mutating func consider(_ stored: EventRange) {
        for event in stored.events {
            guard let position = positions[EventIdentity(writer: event.origin, counter: event.counter)] else { continue }
            let encoded = event.encoded()
            let same = candidates.indices.filter { candidates[$0].position == position }
            guard !same.contains(where: { candidates[$0].encoded == encoded }) else { continue }
            let named = Set(event.namedKeyIDs)
            var keys: [WrappedKey] = []
            var perID: [KeyID: Int] = [:]
            for key in stored.keys where named.contains(key.id) && perID[key.id, default: 0] <= KeyRecords.alternatesPerKey {
                perID[key.id, default: 0] += 1
                keys.append(key)
            }
            candidates.append(Candidate(position: position, event: event, encoded: encoded, keys: keys))
            candidateBytes += encoded.count
            if same.count >= Self.versionsPerIdentity, let largest = (same + [candidates.count - 1]).max(by: { candidates[$0].encoded.count < candidates[$1].encoded.count }) {
                drop(largest)
            }
            // Over the budget: the largest goes (at least one stays), as the answer would leave it out anyway.
            while candidateBytes > Self.maxBytes, candidates.count > 1,
                let largest = candidates.indices.max(by: { candidates[$0].encoded.count < candidates[$1].encoded.count })
            {
                drop(largest)
            }
        }
    }

    private mutating func drop(_ index: Int) {
        whole[candidates[index].position] = false
        candidateBytes -= candidates[index].encoded.count
        candidates.remove(at: index)
    }

    /// The events to send, the smallest first (a forged version padded to the bound cannot
    /// crowd out the genuine one), with at most 16 key records per id from the files they came
    /// from, within ``maxBytes`` and ``maxItems``; and for each identity whether it was whole.
    func answer() -> (events: [Event], keys: [WrappedKey], whole: [Bool]) {
        var whole = whole
        var events: [Event] = []
        var keys: [WrappedKey] = []
        var keySeen = Set<[UInt8]>()
        var perID: [KeyID: Int] = [:]
        var bytes = 0
        for item in candidates.sorted(by: { $0.encoded.count < $1.encoded.count }) {
            var added: [WrappedKey] = []
            var addedIDs: [KeyID: Int] = [:]
            for key in item.keys where perID[key.id, default: 0] + addedIDs[key.id, default: 0] < KeyRecords.alternatesPerKey + 1 {
                let encoded = key.encoded()
                guard !keySeen.contains(encoded), !added.contains(where: { $0.encoded() == encoded }) else { continue }
                addedIDs[key.id, default: 0] += 1
                added.append(key)
            }
            let size = item.encoded.count + added.reduce(0) { $0 + $1.encoded().count }
            guard events.isEmpty || (bytes + size <= Self.maxBytes && events.count + keys.count + added.count < Self.maxItems) else {
                whole[item.position] = false
                continue
            }
            events.append(item.event)
            for key in added {
                keySeen.insert(key.encoded())
                perID[key.id, default: 0] += 1
            }
            keys += added
            bytes += size
        }
        return (events, keys, whole)
    }
}
