extension Routes {
    /// The pattern of the route whose segments match `path` (parameters match any non-empty segment), for metric labels.
    ///
    /// Labels use the pattern, not the path, so model names cannot blow up the number of series.
    public static func pattern(matching path: String) -> String? {
        let segments = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        for spec in all {
            let parts = spec.pattern.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
            guard parts.count == segments.count else { continue }
            if zip(parts, segments).allSatisfy({ p, s in p.hasPrefix("{") ? !s.isEmpty : p == s }) { return spec.pattern }
        }
        return nil
    }
}
