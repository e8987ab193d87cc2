import Chronicle
import ChronicleTesting
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Testing
import ToolsTestSupport

/// `chronicle import` and `chronicle import-plist`: what they refuse, and that a refusal writes nothing.
struct ToolImportTests {
    static let exported = """
        <?xml version="1.0" encoding="UTF-8"?>
        <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
        <plist version="1.0">
        <dict>
        	<key>NSWindow Frame main</key>
        	<string>10 10 800 600 0 0 1440 900 </string>
        	<key>flag</key>
        	<true/>
        	<key>launches</key>
        	<integer>7</integer>
        	<key>volume</key>
        	<real>1</real>
        	<key>installed</key>
        	<date>2026-11-22T09:30:00Z</date>
        	<key>blob</key>
        	<data>AAEC/w==</data>
        	<key>recent</key>
        	<array>
        		<string>a.txt</string>
        		<string>b.txt</string>
        	</array>
        	<key>window</key>
        	<dict>
        		<key>maximized</key>
        		<false/>
        		<key>width</key>
        		<integer>800</integer>
        	</dict>
        </dict>
        </plist>
        """

    /// `chronicle import FIFO` fails at once: the file is opened without blocking before its type
    /// and size are checked (opening a FIFO for reading waits for a writer).
    @Test func importOfAFIFOFailsAtOnce() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let store = directory.appendingPathComponent("store")
        let fifo = directory.appendingPathComponent("range.range")
        #expect(mkfifo(fifo.path, 0o600) == 0)
        // A guard, not a measurement: a tool blocked in open() is released by a writer after the
        // hang guard (it then reads an empty file and fails otherwise than below).
        let unblock = Task {
            try? await Task.sleep(for: hangGuard)
            let descriptor = open(fifo.path, O_WRONLY | O_NONBLOCK)
            if descriptor >= 0 { close(descriptor) }
        }
        defer { unblock.cancel() }
        let result = try await runChronicle(["import", "--store", store.path, fifo.path])
        #expect(result.status == 2)
        #expect(result.stderr.contains("not a regular file"), "\(result.stderr)")
    }

    @Test func importPlistFromTheToolAndRefusalsWriteNothing() async throws {
        try await withTemporaryStore { store, directory async throws in
            let file = directory.appendingPathComponent("prefs.plist")
            try Data(Self.exported.utf8).write(to: file)
            let first = try await runChronicle(["import-plist", file.path, "--name", "launches", "--name", "flag", "--store", directory.path])
            #expect(first.status == 0, "\(first.stderr)")
            #expect(first.stdout == "imported 2 values\n")
            let again = try await runChronicle(["import-plist", file.path, "--store", directory.path])
            #expect(again.stdout == "imported 6 values\n")
            #expect(store[Key<Int>("launches", default: 0)] == 7)

            let garbage = directory.appendingPathComponent("garbage.plist")
            try Data("not a plist at all".utf8).write(to: garbage)
            let refused = try await runChronicle(["import-plist", garbage.path, "--store", directory.path])
            #expect(refused.status == 2)
            #expect(refused.stderr.contains("not a property list"))
            #expect(try store.logEntries().count == 8, "the refused file wrote nothing")
        }
    }
}
