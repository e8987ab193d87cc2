/// A key with a value type and a default: ``Key`` or ``SecretKey``.
protocol ValueKey: AnyKey {
    associatedtype Value: Codable & Sendable
    var defaultValue: Value { get }
}

extension Key: ValueKey {}
