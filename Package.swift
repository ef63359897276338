// swift-tools-version: 6.1
import PackageDescription

// Release builds of the core are compiled with -Ounchecked: its hot loops index
// precomputed filter banks whose bounds are checked once when the bank is built.
// Debug builds (the tests') compile it with -O, bounds and overflow checks kept: unoptimized,
// its vector loops ran many times slower, and most of the suite's time went to upscaling.
let coreSettings: [SwiftSetting] = [
    .unsafeFlags(["-Ounchecked", "-wmo", "-target-cpu", "native"], .when(configuration: .release)),
    .unsafeFlags(["-O"], .when(configuration: .debug)),
]

let package = Package(
    name: "upscale",
    platforms: [.macOS(.v13)],
    products: [
        .executable(name: "upscale", targets: ["upscale"]),
        .executable(name: "upscale-bench", targets: ["upscale-bench"]),
        .library(name: "UpscaleCore", targets: ["UpscaleCore"]),
        .library(name: "UpscaleMedia", targets: ["UpscaleMedia"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/vapor/console-kit.git", from: "4.16.2"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        // The dashboard: HTTP server (no optional traits: no swift-configuration), Prometheus text format.
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1", traits: []),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
    ],
    targets: [
        .systemLibrary(
            name: "CFFmpeg",
            // libavfilter-dev for its headers only: the deinterlacer opens the library at run time.
            pkgConfig: "libavformat libavcodec libswscale libswresample libavutil",
            providers: [.apt(["libavformat-dev", "libavcodec-dev", "libavfilter-dev", "libswscale-dev", "libswresample-dev", "libavutil-dev"])]
        ),
        // libvips is opened at run time (see shim.h); its headers need glib's, and the shim
        // itself calls GObject (unref, log handler).
        .systemLibrary(
            name: "CVips",
            pkgConfig: "gobject-2.0",
            providers: [.apt(["libvips-dev"])]
        ),
        // zimg is a peer the bench measures against; nothing else links it.
        .systemLibrary(
            name: "CZimg",
            pkgConfig: "zimg",
            providers: [.apt(["libzimg-dev"])]
        ),
        // Header-only: clang vector builtins the core's hot loops need as single instructions.
        .systemLibrary(name: "CVector"),
        .target(
            name: "UpscaleCore",
            dependencies: ["CVector"],
            swiftSettings: coreSettings
        ),
        // Seeded damaged copies of media files, for the damaged-input tests and `upscale-bench damage`.
        .target(name: "DamageCorpus"),
        // SQLite (Debian's libsqlite3) for the watch folder's job store.
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        // prctl for the job child processes (variadic in C, so not callable from Swift).
        .target(name: "CProcess"),
        // Batch work: jobs in child processes (the plain command runs each file in one too).
        .target(
            name: "UpscaleQueue",
            dependencies: ["CProcess", "CSQLite", "UpscaleMedia", "UpscaleImages"],
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),
        // The shared queue in PostgreSQL (vapor/postgres-nio): many machines on one queue.
        .target(
            name: "UpscaleFarm",
            dependencies: [
                "UpscaleMedia", "UpscaleQueue",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),
        // The queue's web page, JSON API and metrics (Hummingbird, swift-metrics + swift-prometheus).
        .target(
            name: "UpscaleDashboard",
            dependencies: [
                "UpscaleQueue", "UpscaleFarm",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),
        .target(
            name: "UpscaleMedia",
            dependencies: [
                "CFFmpeg", "UpscaleCore",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),
        .target(
            name: "UpscaleImages",
            dependencies: ["CVips", "UpscaleCore"],
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),
        .executableTarget(
            name: "upscale",
            dependencies: [
                "UpscaleMedia", "UpscaleQueue", "UpscaleImages", "UpscaleFarm", "UpscaleDashboard",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ConsoleKitTerminal", package: "console-kit"),
            ],
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),
        .executableTarget(
            name: "upscale-bench",
            dependencies: [
                "UpscaleCore", "UpscaleMedia", "UpscaleImages", "CZimg", "DamageCorpus", "UpscaleTestSupport", "UpscaleFarm",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Benchmarks/upscale-bench",
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),
        .testTarget(
            name: "UpscaleCoreTests",
            dependencies: ["UpscaleCore"]
        ),
        .testTarget(
            name: "UpscaleMediaTests",
            dependencies: ["UpscaleMedia", "UpscaleCore", "UpscaleImages", .product(name: "Logging", package: "swift-log")],
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),
        .testTarget(
            name: "UpscaleQueueTests",
            dependencies: ["UpscaleQueue", "UpscaleMedia"],
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),
        .testTarget(
            name: "UpscaleFarmTests",
            dependencies: ["UpscaleFarm", "UpscaleMedia", "UpscaleQueue", "UpscaleDashboard", "UpscaleTestSupport", "upscale"],
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),
        // Helpers for the tests and the bench (never in the tool): a raw HTTP client, a dashboard
        // on a free port, headless chromium, a throwaway PostgreSQL cluster, a queue fixture.
        .target(
            name: "UpscaleTestSupport",
            dependencies: ["UpscaleDashboard", "UpscaleQueue"],
            path: "Tests/UpscaleTestSupport",
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),
        .testTarget(
            name: "UpscaleDashboardTests",
            dependencies: ["UpscaleDashboard", "UpscaleQueue", "UpscaleTestSupport", "upscale"],
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),
        .testTarget(
            name: "UpscaleCLITests",
            dependencies: ["UpscaleMedia", "UpscaleImages", "UpscaleCore", "UpscaleQueue", "CVips", "DamageCorpus", "upscale", "upscale-bench"],
            swiftSettings: [.swiftLanguageMode(.v5)],
            // The still-image tests inspect outputs with libvips directly.
            linkerSettings: [.linkedLibrary("vips")]
        ),
    ]
)

// `make test` runs the core's tests twice more, built for other processors (`-target-cpu
// haswell` and `native`, each in its own build folder). With UPSCALE_CORE_ONLY set the manifest
// is the core and its tests alone, so those two builds compile no dependency and no other
// module: each had been a whole debug build of the package (NIO, PostgresNIO, Hummingbird, ...).
// The dependencies stay declared (checked out, never built): without them SwiftPM would write
// a Package.resolved with no pins over the package's own.
if Context.environment["UPSCALE_CORE_ONLY"] != nil {
    let core: Set<String> = ["CVector", "UpscaleCore", "UpscaleCoreTests"]
    package.targets = package.targets.filter { core.contains($0.name) }
    package.products = package.products.filter { $0.name == "UpscaleCore" }
}
