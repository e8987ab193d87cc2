@testable import ChronicleSodium
import Testing

/// What secure memory does when filling it fails: `PasswordHash.deriveKey` fills a
/// `SecureBytes` with Argon2id, which fails when it cannot allocate its memory (a received key
/// record may ask for up to 1 GiB: SENSITIVE, within the bounds a member accepts).
struct SecureBytesFailureTests {
    struct FillFailed: Error {}

    /// A fill that throws is an error, not a crash: the memory is freed once.
    @Test func aFillThatThrowsIsAnErrorNotACrash() {
        #expect(throws: FillFailed.self) {
            _ = try SecureBytes(count: 32) { _ in throw FillFailed() }
        }
    }
}
