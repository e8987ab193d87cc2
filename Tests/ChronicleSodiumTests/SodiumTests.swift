import Foundation
import ChronicleSodium
import Testing

private func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

private func bytes(hex: String) -> [UInt8] {
    var result: [UInt8] = []
    var index = hex.startIndex
    while index < hex.endIndex {
        let next = hex.index(index, offsetBy: 2)
        result.append(UInt8(hex[index..<next], radix: 16) ?? 0)
        index = next
    }
    return result
}

struct SodiumTests {
    @Test func blake2bMatchesPublishedVectors() {
        // BLAKE2b-256 of the empty string and of "abc" (RFC 7693 lists BLAKE2b-512 of "abc"; these are the 256-bit outputs).
        #expect(hex(GenericHash.hash([UInt8]())) == "0e5751c026e543b2e8ab2eb06099daa1d1e5df47778f7787faab45cdf12fe3a8")
        #expect(hex(GenericHash.hash(Array("abc".utf8), length: 64))
            == "ba80a53f981c4d0d6a2797b69f12f6e94c212f14685ac4b74b12bb6fdbffa2d17d87c5392aab792dc252d5de4533cc9518d38aa8dbf1925ab92386edd4009923")
    }

    @Test func keyedHashDependsOnTheKey() throws {
        let a = try SecureBytes(randomCount: 32)
        let b = try SecureBytes(randomCount: 32)
        let input = Array("record".utf8)
        #expect(GenericHash.hash(input, key: a) == GenericHash.hash(input, key: a))
        #expect(GenericHash.hash(input, key: a) != GenericHash.hash(input, key: b))
        #expect(GenericHash.hash([Array("rec".utf8), Array("ord".utf8)], key: a) == GenericHash.hash(input, key: a))
    }

    @Test func aKeyedHashFromAPrecomputedStateIsTheKeyedHash() throws {
        // Inputs on both sides of BLAKE2b's 128-byte blocks, whole and in parts, every output length Chronicle uses.
        for keyLength in [16, 32, 64] {
            let key = try SecureBytes(randomCount: keyLength)
            for length in [16, 32, 64] {
                let hasher = try KeyedHash(key: key, length: length)
                for size in [0, 1, 63, 127, 128, 129, 255, 256, 1000] {
                    let input = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ keyLength) }
                    let expected = GenericHash.hash(input, key: key, length: length)
                    #expect(hasher.hash([input]) == expected)
                    #expect(hasher.hash([Array(input.prefix(size / 3)), [], Array(input.dropFirst(size / 3))]) == expected)
                    var inline = [UInt8](repeating: 0, count: length)
                    input.withUnsafeBytes { source in inline.withUnsafeMutableBytes { hasher.hash(source, into: $0) } }
                    #expect(inline == expected)
                }
            }
        }
        #expect(throws: SodiumError.self) { try KeyedHash(key: try SecureBytes(randomCount: 8)) }
        #expect(throws: SodiumError.self) { try KeyedHash(key: try SecureBytes(randomCount: 32), length: 8) }
    }

    @Test func aeadMatchesTheDraftTestVector() throws {
        // draft-irtf-cfrg-xchacha-03, appendix A.3.1 (AEAD_XChaCha20_Poly1305).
        let plaintext = Array("Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.".utf8)
        let ad = bytes(hex: "50515253c0c1c2c3c4c5c6c7")
        let key = try SecureBytes(bytes(hex: "808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f"))
        let nonce = bytes(hex: "404142434445464748494a4b4c4d4e4f5051525354555657")
        let sealed = try AEAD.seal(plaintext, associatedData: ad, nonce: nonce, key: key)
        #expect(hex(Array(sealed.suffix(16))) == "c0875924c1c7987947deafd8780acf49")
        #expect(hex(Array(sealed.prefix(16))) == "bd6d179d3e83d43b9576579493c0e939")
        #expect(try AEAD.open(sealed, associatedData: ad, nonce: nonce, key: key) == plaintext)
    }

    @Test func aeadRejectsAlteredBytesWrongAssociatedDataAndWrongKey() throws {
        let key = try SecureBytes(randomCount: AEAD.keyBytes)
        let nonce = Sodium.randomBytes(AEAD.nonceBytes)
        let sealed = try AEAD.seal(Array("secret".utf8), associatedData: [1], nonce: nonce, key: key)
        var altered = sealed
        altered[0] ^= 1
        #expect(throws: SodiumError.authenticationFailed) { try AEAD.open(altered, associatedData: [1], nonce: nonce, key: key) }
        #expect(throws: SodiumError.authenticationFailed) { try AEAD.open(sealed, associatedData: [2], nonce: nonce, key: key) }
        let other = try SecureBytes(randomCount: AEAD.keyBytes)
        #expect(throws: SodiumError.authenticationFailed) { try AEAD.open(sealed, associatedData: [1], nonce: nonce, key: other) }
        #expect(throws: SodiumError.authenticationFailed) { try AEAD.open([1, 2], associatedData: [1], nonce: nonce, key: key) }
        #expect(throws: SodiumError.self) { try AEAD.seal([1], associatedData: [], nonce: [1, 2], key: key) }
    }

    @Test func argon2idIsDeterministicPerSaltAndLimits() throws {
        let salt = Sodium.randomBytes(PasswordHash.saltBytes)
        let a = try PasswordHash.deriveKey(password: Array("correct horse".utf8), salt: salt, limits: .minimum)
        let b = try PasswordHash.deriveKey(password: Array("correct horse".utf8), salt: salt, limits: .minimum)
        let c = try PasswordHash.deriveKey(password: Array("correct horsf".utf8), salt: salt, limits: .minimum)
        let d = try PasswordHash.deriveKey(password: Array("correct horse".utf8), salt: Sodium.randomBytes(16), limits: .minimum)
        #expect(a.copyBytes() == b.copyBytes())
        #expect(a.copyBytes() != c.copyBytes())
        #expect(a.copyBytes() != d.copyBytes())
        #expect(throws: SodiumError.self) { try PasswordHash.deriveKey(password: [], salt: [1], limits: .minimum) }
    }

    @Test func argon2idMatchesAReferenceOutput() throws {
        // Reference: the argon2 reference implementation (argon2-cffi's hash_secret_raw,
        // Argon2id v1.3, t=3, m=65536 KiB, p=1, 32-byte output).
        let key = try PasswordHash.deriveKey(
            password: Array("password".utf8), salt: Array("somesaltsomesalt".utf8),
            limits: .init(opsLimit: 3, memLimit: 64 << 20))
        #expect(hex(key.copyBytes()) == "7664ad4ba1a3c999fcdd0991ffc2270f78302d2383233db5e7befc85d1bb1819")
    }

    @Test func kdfSubkeysDifferByIdAndContext() throws {
        let master = try SecureBytes(randomCount: 32)
        let a = try KeyDerivation.derive(id: 1, context: "chronicl", from: master)
        let b = try KeyDerivation.derive(id: 2, context: "chronicl", from: master)
        let c = try KeyDerivation.derive(id: 1, context: "otherctx", from: master)
        let a2 = try KeyDerivation.derive(id: 1, context: "chronicl", from: master)
        #expect(a.copyBytes() == a2.copyBytes())
        #expect(a.copyBytes() != b.copyBytes())
        #expect(a.copyBytes() != c.copyBytes())
        #expect(throws: SodiumError.self) { try KeyDerivation.derive(id: 1, context: "short", from: master) }
    }

    @Test func secureBytesNeverPrintTheirContent() throws {
        let key = try SecureBytes(Array("topsecret-marker".utf8))
        #expect(!key.description.contains("topsecret"))
        #expect(!String(describing: key).contains("topsecret"))
    }

    @Test func helpers() {
        #expect(Sodium.constantTimeEqual([1, 2], [1, 2]))
        #expect(!Sodium.constantTimeEqual([1, 2], [1, 3]))
        #expect(!Sodium.constantTimeEqual([1, 2], [1]))
        var buffer: [UInt8] = [1, 2, 3]
        Sodium.wipe(&buffer)
        #expect(buffer == [0, 0, 0])
        #expect(Sodium.randomBytes(32) != Sodium.randomBytes(32))
    }
}
