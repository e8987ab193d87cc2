import CoreMetrics
import Prometheus

/// One family of the node's metrics: its name, type and help text (docs/HUB.md lists them).
/// No family has a per-tenant label (one series per tenant would not scale to a million);
/// per-tenant figures come from `chronicle hub tenant show`.
enum HubMetric: CaseIterable {
    case requests, requestDuration, refusals, databaseErrors, quotaRefusals
    case eventsAppended, pushedBytes, eventsServed, servedBytes, longPollsWaiting
    case trims, trimDuration, trimmedRows, tokenLookups, databaseConnections, databasePoolSize

    var name: String {
        switch self {
        case .requests: "chronicle_hub_requests_total"
        case .requestDuration: "chronicle_hub_request_duration_seconds"
        case .refusals: "chronicle_hub_refusals_total"
        case .databaseErrors: "chronicle_hub_database_errors_total"
        case .quotaRefusals: "chronicle_hub_quota_refusals_total"
        case .eventsAppended: "chronicle_hub_events_appended_total"
        case .pushedBytes: "chronicle_hub_pushed_bytes_total"
        case .eventsServed: "chronicle_hub_events_served_total"
        case .servedBytes: "chronicle_hub_served_bytes_total"
        case .longPollsWaiting: "chronicle_hub_long_polls_waiting"
        case .trims: "chronicle_hub_trims_total"
        case .trimDuration: "chronicle_hub_trim_duration_seconds"
        case .trimmedRows: "chronicle_hub_trimmed_rows_total"
        case .tokenLookups: "chronicle_hub_token_lookups_total"
        case .databaseConnections: "chronicle_hub_database_connections"
        case .databasePoolSize: "chronicle_hub_database_pool_size"
        }
    }

    var help: String {
        switch self {
        case .requests: "Requests the node answered, by route and status class (2xx, 4xx, 5xx)."
        case .requestDuration: "How long the node took to answer a request, by route and status class; range_wait is a long-poll, held until news or its timeout."
        case .refusals: "Requests refused as the client's fault (bad token, malformed input, over a quota)."
        case .databaseErrors: "Requests answered 503 because the database failed or could not be reached."
        case .quotaRefusals: "Pushes refused with 507, by the quota they would pass (events, bytes, device_keys, tenant_keys)."
        case .eventsAppended: "Events appended to tenants' logs (each at a new position)."
        case .pushedBytes: "Bytes of push bodies the node accepted for decoding."
        case .eventsServed: "Events sent in answers to pulls and to requests by identity."
        case .servedBytes: "Bytes of answers to pulls and to requests by identity."
        case .longPollsWaiting: "Long-polls this node holds now."
        case .trims: "Trims of a tenant's log this node ran, by result (done, failed)."
        case .trimDuration: "How long a trim of a tenant's log took, all its steps."
        case .trimmedRows: "Rows the node's trims deleted."
        case .tokenLookups: "Bearer tokens checked against the node's memory, by result (hit: known; miss: looked up in the database)."
        case .databaseConnections: "Connections to the hub's database at the scrape (every node's and other clients'), by state, from pg_stat_activity."
        case .databasePoolSize: "The most connections this node's pool opens to the database."
        }
    }

    /// The name and help text, as the registry takes them (the name whole, no unit appended).
    var descriptor: MetricNameDescriptor { MetricNameDescriptor(metricName: name, unitName: "", helpText: help) }

    /// Buckets of a duration family, in seconds (from a 2 ms pull to a 30 s long-poll).
    static let durationBuckets: [Duration] = [0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30].map { Duration.seconds($0) }
}

/// Where the node's figures go: a Prometheus registry, where each family is registered with its
/// help text and type (what `promtool check metrics` asks for), or any swift-metrics backend an
/// embedder chose (same names and labels; swift-metrics carries no help text).
final class HubMetrics: Sendable {
    private enum Backend {
        case registry(PrometheusCollectorRegistry)
        case factory(any MetricsFactory)
    }

    private let backend: Backend

    init(registry: PrometheusCollectorRegistry, poolSize: Int) {
        backend = .registry(registry)
        // Every family is shown from the start, so an alert on one that has not moved yet works.
        for family: HubMetric in [.refusals, .databaseErrors, .eventsAppended, .pushedBytes, .eventsServed, .servedBytes, .trimmedRows] {
            count(family, by: 0)
        }
        set(.longPollsWaiting, 0)
        set(.databasePoolSize, poolSize)
        for state in Self.connectionStates { set(.databaseConnections, 0, labels: [("state", state)]) }
    }

    init(factory: any MetricsFactory) {
        backend = .factory(factory)
    }

    /// Adds `value` to a counter family's series of `labels`.
    func count(_ family: HubMetric, _ labels: [(String, String)] = [], by value: Int64 = 1) {
        switch backend {
        case let .registry(registry):
            let counter =
                labels.isEmpty
                ? registry.makeCounter(descriptor: family.descriptor)
                : registry.makeCounter(descriptor: family.descriptor, labels: labels)
            counter.increment(by: value)
        case let .factory(factory):
            CoreMetrics.Counter(label: family.name, dimensions: labels, factory: factory).increment(by: value)
        }
    }

    /// Records `duration` in a histogram family's series of `labels`.
    func observe(_ family: HubMetric, _ labels: [(String, String)] = [], _ duration: Duration) {
        switch backend {
        case let .registry(registry):
            let histogram =
                labels.isEmpty
                ? registry.makeDurationHistogram(descriptor: family.descriptor, buckets: HubMetric.durationBuckets)
                : registry.makeDurationHistogram(descriptor: family.descriptor, labels: labels, buckets: HubMetric.durationBuckets)
            histogram.record(duration)
        case let .factory(factory):
            let nanoseconds = duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000
            CoreMetrics.Timer(label: family.name, dimensions: labels, factory: factory).recordNanoseconds(nanoseconds)
        }
    }

    /// Sets a gauge family's series of `labels`.
    func set(_ family: HubMetric, _ value: Int, labels: [(String, String)] = []) {
        switch backend {
        case let .registry(registry):
            let gauge = labels.isEmpty ? registry.makeGauge(descriptor: family.descriptor) : registry.makeGauge(descriptor: family.descriptor, labels: labels)
            gauge.set(Double(value))
        case let .factory(factory): CoreMetrics.Gauge(label: family.name, dimensions: labels, factory: factory).record(value)
        }
    }

    /// The states of ``HubMetric/databaseConnections``: PostgreSQL's, spaces as underscores.
    static let connectionStates = ["active", "idle", "idle_in_transaction", "idle_in_transaction_aborted", "other"]
}
