import ArgumentParser
import DamageCorpus
import Foundation

/// Seeded damaged copies of the committed damage fixtures, each through the `upscale`
/// binary: how many end in a complete output, how many fail cleanly (exit 1, one line,
/// nothing left behind), and how many crash, hang or leave litter (each of those is a bug).
struct DamageBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "damage",
        abstract: "Damaged copies of real clips through the upscale binary: crashes, hangs, litter, clean failures, successes.")

    @Option(help: "Total damaged files, spread evenly over the source clips.") var files = 1000
    @Option(help: "Seed of the first copy of each clip.") var seed: UInt64 = 1
    @Option(help: "Seconds before a run counts as hung.") var timeout = 180.0
    @Option(help: "The upscale binary (default: next to this one).") var upscale: String?
    @Option(help: "Copy the files that crashed, hung or left litter into this folder.") var keep: String?
    @Argument(help: "Source clips (default: Tests/Fixtures/damage/*).") var sources: [String] = []

    func run() throws {
        let clips = sources.isEmpty ? fixtureClips() : sources
        guard !clips.isEmpty else { throw ValidationError("no source clips found; pass some") }
        let binary = upscale ?? upscaleBinary()
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("upscale-damage-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: work) }
        let perClip = max(1, files / clips.count)
        let corpus = try DamagedCorpus.write(sources: clips, copies: perClip, baseSeed: seed, into: work + "/in")
        print("\(corpus.count) damaged copies of \(clips.count) clips, seeds \(seed)…\(seed + UInt64(perClip) - 1)")
        var tally: [String: [String: Int]] = [:]
        for (n, entry) in corpus.enumerated() {
            let out = work + "/out-\(n)"
            try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
            let result = try DamageRun.run(binary, [entry.path, "--scale", "2", "--preset", "ultrafast", "--quiet", "--output", out],
                                           timeout: timeout)
            let left = (try? FileManager.default.contentsOfDirectory(atPath: out)) ?? []
            let outcome = DamageRun.classify(status: result.status, hung: result.hung, stderr: result.stderr, leftFiles: left)
            let clip = URL(fileURLWithPath: entry.source).lastPathComponent
            tally[clip, default: [:]][outcome, default: 0] += 1
            if !["ok", "failed cleanly"].contains(outcome) {
                print("  \(outcome): \(URL(fileURLWithPath: entry.path).lastPathComponent) (seed \(entry.seed)) status \(result.status)")
                if let keep {
                    try FileManager.default.createDirectory(atPath: keep, withIntermediateDirectories: true)
                    try? FileManager.default.copyItem(atPath: entry.path, toPath: keep + "/" + URL(fileURLWithPath: entry.path).lastPathComponent)
                }
            }
            try? FileManager.default.removeItem(atPath: out)
            try? FileManager.default.removeItem(atPath: entry.path)
        }
        let kinds = ["ok", "failed cleanly", "crashed", "hung", "left files", "no message"]
        print(("clip".padding(toLength: 18, withPad: " ", startingAt: 0)) + kinds.map { $0.padding(toLength: 15, withPad: " ", startingAt: 0) }.joined())
        var totals: [String: Int] = [:]
        for clip in tally.keys.sorted() {
            let row = tally[clip]!
            row.forEach { totals[$0.key, default: 0] += $0.value }
            print(clip.padding(toLength: 18, withPad: " ", startingAt: 0)
                  + kinds.map { String(row[$0] ?? 0).padding(toLength: 15, withPad: " ", startingAt: 0) }.joined())
        }
        print("total".padding(toLength: 18, withPad: " ", startingAt: 0)
              + kinds.map { String(totals[$0] ?? 0).padding(toLength: 15, withPad: " ", startingAt: 0) }.joined())
    }

    private func fixtureClips() -> [String] {
        let dir = fixturesFolder().appendingPathComponent("damage")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []
        return names.sorted().map { dir.appendingPathComponent($0).path }
    }
}
