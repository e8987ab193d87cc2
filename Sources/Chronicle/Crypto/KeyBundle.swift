import ChronicleFormat
import Foundation
import ChronicleSodium

/// A file of wrapped data keys:
///
/// ```
/// [8]    magic "CHRNKEYS"
/// u8     version (1)
/// u16    count (at most 1024)
/// count × (u32 + n) encoded WrappedKey
/// ```
enum KeyBundle {
    static let magic = Array("CHRNKEYS".utf8)

    static func encode(_ records: [WrappedKey]) throws -> [UInt8] {
        var writer = ByteWriter()
        writer.raw(magic)
        writer.u8(1)
        writer.u16(UInt16(min(records.count, 1024)))
        for record in records.prefix(1024) { writer.longField(record.encoded()) }
        return writer.bytes
    }

    static func decode(_ bytes: [UInt8]) throws(DecodeFailure) -> [WrappedKey] {
        var reader = ByteReader(bytes)
        guard try reader.raw(magic.count) == magic else { throw DecodeFailure(description: "not a Chronicle key bundle") }
        let version = try reader.u8()
        guard version == 1 else { throw DecodeFailure(description: "key bundle version \(version) is not supported") }
        let count = Int(try reader.u16())
        guard count <= 1024 else { throw DecodeFailure(description: "\(count) keys is over the limit of 1024") }
        var records: [WrappedKey] = []
        for _ in 0..<count { records.append(try WrappedKey(decoding: try reader.longField(limit: 4096))) }
        try reader.expectEnd()
        return records
    }
}
