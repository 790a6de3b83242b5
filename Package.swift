// swift-tools-version:6.0
import PackageDescription

/// Release builds of the numeric modules drop bounds checks in their inner loops and target x86-64-v3 (AVX2, FMA):
/// without a CPU target Swift emits SSE2 only and the SIMD kernels lose about 15%. OSPREY_FMA tells the kernels FMA is there.
let fast: [SwiftSetting] = [.unsafeFlags(["-Ounchecked", "-wmo", "-target-cpu", "haswell"], .when(configuration: .release)),
                            .define("OSPREY_FMA", .when(configuration: .release))]

let package = Package(
    // Linux only (Glibc, /proc, Debian's C libraries): SwiftPM has no way to say so, so no Apple platform is declared.
    name: "Osprey",
    products: [
        .executable(name: "osprey", targets: ["osprey"]),
    ],
    targets: [
        // C libraries from Debian packages: the only place their headers are visible.
        .systemLibrary(name: "CLibUV", pkgConfig: "libuv", providers: [.apt(["libuv1-dev"])]),
        .systemLibrary(name: "CHTTPParser", providers: [.apt(["libhttp-parser-dev"])]),
        .systemLibrary(name: "COpenBLAS", pkgConfig: "openblas", providers: [.apt(["libopenblas-dev"])]),
        .systemLibrary(name: "CPNG", pkgConfig: "libpng", providers: [.apt(["libpng-dev"])]),
        .systemLibrary(name: "CTurboJPEG", pkgConfig: "libturbojpeg", providers: [.apt(["libturbojpeg0-dev"])]),
        .systemLibrary(name: "CNGHTTP2", pkgConfig: "libnghttp2", providers: [.apt(["libnghttp2-dev"])]),
        // Compiler builtins Swift cannot reach (cache prefetch) as static inline C, and the integer GEMM whose
        // vpmaddwd has no Swift SIMD spelling (target attributes pick AVX2 at run time).
        .target(name: "CKernelShim", cSettings: [.unsafeFlags(["-O3"], .when(configuration: .release))]),

        // Locks, the monotonic clock, the logger, the blocking executor and the service lifecycle: Glibc only.
        .target(name: "Infrastructure"),
        .target(name: "Tensor", swiftSettings: fast),
        // The protobuf wire format, shared by ONNX model decoding and gRPC messages.
        .target(name: "Protobuf", dependencies: ["Infrastructure"], swiftSettings: fast),
        .target(name: "ONNX", dependencies: ["Infrastructure", "Tensor", "Protobuf"], swiftSettings: fast),
        .target(name: "Engine", dependencies: ["Infrastructure", "Tensor", "ONNX", "COpenBLAS", "CKernelShim"], swiftSettings: fast),
        .target(name: "Imaging", dependencies: ["Tensor", "CPNG", "CTurboJPEG"], swiftSettings: fast),
        .target(name: "HTTP", dependencies: ["Infrastructure", "CLibUV", "CHTTPParser", "CNGHTTP2"]),
        .target(name: "Serving", dependencies: ["Infrastructure", "Engine", "Imaging", "CKernelShim"]),
        .target(name: "API", dependencies: ["Infrastructure", "HTTP", "Serving", "Protobuf"]),
        .executableTarget(name: "osprey", dependencies: ["Infrastructure", "API", "HTTP", "Serving", "Engine", "Imaging", "ONNX", "Tensor"]),

        // Helpers every test target may share (a seeded generator); never linked into the server.
        .target(name: "TestSupport", path: "Tests/TestSupport"),

        .testTarget(name: "InfrastructureTests", dependencies: ["Infrastructure"]),
        .testTarget(name: "TensorTests", dependencies: ["Tensor"]),
        .testTarget(name: "ProtobufTests", dependencies: ["Protobuf"]),
        .testTarget(name: "ONNXTests", dependencies: ["TestSupport", "ONNX", "Protobuf"]),
        .testTarget(name: "EngineTests", dependencies: ["TestSupport", "Engine"]),
        .testTarget(name: "ImagingTests", dependencies: ["TestSupport", "Imaging"]),
        .testTarget(name: "HTTPTests", dependencies: ["HTTP", "Infrastructure", "CNGHTTP2"]),
        .testTarget(name: "ServingTests", dependencies: ["TestSupport", "Serving", "Infrastructure"]),
        .testTarget(name: "APITests", dependencies: ["API", "Infrastructure", "Protobuf"]),
    ]
)
