import ArgumentParser
import Chronicle
import ChronicleHTTP
import Foundation

func readToken(token: String?, tokenFile: String?) throws -> String {
    if let token { return token }
    guard let tokenFile, let data = FileManager.default.contents(atPath: tokenFile) else {
        throw ValidationError("cannot read the token file")
    }
    let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    guard !text.isEmpty else { throw ValidationError("the token file is empty") }
    return text
}
