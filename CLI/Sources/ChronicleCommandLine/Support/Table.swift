import ArgumentParser
@_spi(Tools) import Chronicle
import Foundation

/// Prints rows as left-aligned columns separated by two spaces.
func printTable(_ rows: [[String]]) {
    let rows = rows.map { $0.map(terminalSafe) }  // cells may hold names and messages from peers
    guard let columns = rows.first?.count else { return }
    let widths = (0..<columns).map { column in rows.map { $0[column].count }.max() ?? 0 }
    for row in rows {
        print(row.enumerated().map { index, cell in
            index == columns - 1 ? cell : cell.padding(toLength: widths[index], withPad: " ", startingAt: 0)
        }.joined(separator: "  "))
    }
}
