@_spi(Wire) import Chronicle
import Hummingbird

let rangeMediaType = WireFormat.rangeMediaType

/// `syncable` (default) or `small:BYTES`.
func parseFilter(_ text: String?) throws -> RangeFilter {
    guard let filter = WireFormat.filter(text) else { throw HTTPError(.badRequest, message: "filter is syncable or small:BYTES") }
    return filter
}

func filterText(_ filter: RangeFilter) -> String { WireFormat.text(filter) }
