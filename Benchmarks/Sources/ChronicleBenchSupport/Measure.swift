/// One measured operation: nanoseconds per operation over `operations` runs.
public struct Measurement: Sendable {
    public var name: String
    public var operations: Int
    public var seconds: Double
    public var nanosecondsPerOperation: Double { seconds * 1e9 / Double(max(operations, 1)) }
    public var operationsPerSecond: Double { Double(operations) / max(seconds, 1e-12) }

    public init(name: String, operations: Int, seconds: Double) {
        self.name = name
        self.operations = operations
        self.seconds = seconds
    }
}

/// Runs `body` `count` times (after `warmup` runs) and measures the whole loop.
public func measure(_ name: String, count: Int, warmup: Int = 0, _ body: (Int) throws -> Void) rethrows -> Measurement {
    for i in 0..<warmup { try body(i) }
    let clock = ContinuousClock()
    let start = clock.now
    for i in 0..<count { try body(warmup + i) }
    let elapsed = clock.now - start
    return Measurement(name: name, operations: count, seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
}

/// The median of `values` (the upper one of an even count); 0 for none.
public func median(_ values: [Double]) -> Double {
    values.isEmpty ? 0 : values.sorted()[values.count / 2]
}

/// The key of raw LMDB puts number `i`.
public func key(_ i: Int) -> [UInt8] { Array("bench.key.\(i)".utf8) }

/// The value of every raw put and durable set: 8 bytes.
public let value8 = [UInt8](repeating: 7, count: 8)
