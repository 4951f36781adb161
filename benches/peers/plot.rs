//! The ns/key-against-n chart of the README: every run appends its
//! lookup figures to a CSV of points (`PEERS_POINTS`, default
//! `target/peers_points.csv`), and the SVG (`PEERS_SVG`, default
//! `target/peers_ns_per_key.svg`; the README's chart is
//! `PEERS_SVG=docs/peers_ns_per_key.svg`) is redrawn from all points, one
//! line per subject, log scale for n.

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Appends `(n, subject, ns)` rows to the CSV at `path`.
pub fn append_points(path: &str, n: usize, rows: &[(&str, f64)]) -> std::io::Result<()> {
    use std::io::Write;
    // `target/` is missing in a clone built with an outside CARGO_TARGET_DIR.
    if let Some(dir) = std::path::Path::new(path).parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    for (subject, ns) in rows {
        writeln!(f, "{n},{subject},{ns}")?;
    }
    Ok(())
}

/// Draws every point of the CSV at `csv` (the last value per n and subject).
pub fn draw(csv: &str, svg: &str, title: &str) -> std::io::Result<()> {
    let text = std::fs::read_to_string(csv)?;
    let mut series: BTreeMap<String, BTreeMap<u64, f64>> = BTreeMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split(',').collect();
        if let [n, s, v] = f[..] {
            if let (Ok(n), Ok(v)) = (n.parse::<u64>(), v.parse::<f64>()) {
                series.entry(s.to_string()).or_default().insert(n, v);
            }
        }
    }
    let ns: Vec<u64> = series.values().flat_map(|m| m.keys().copied()).collect();
    let (Some(&n_lo), Some(&n_hi)) = (ns.iter().min(), ns.iter().max()) else {
        return Ok(());
    };
    let y_hi = series
        .values()
        .flat_map(|m| m.values().copied())
        .fold(1.0, f64::max)
        * 1.1;
    let (w, h, l, r, t, b) = (720.0, 420.0, 60.0, 220.0, 30.0, 40.0);
    let lx = |n: u64| {
        let (a, z) = (
            (n_lo as f64).log10(),
            (n_hi as f64).log10().max((n_lo as f64).log10() + 1.0),
        );
        l + ((n as f64).log10() - a) / (z - a) * (w - l - r)
    };
    let ly = |v: f64| t + (1.0 - v / y_hi) * (h - t - b);
    let colors = [
        "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
        "#17becf", "#bcbd22",
    ];
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        s,
        r#"<rect width="100%" height="100%" fill="white"/><text x="{l}" y="18">{title}</text>"#
    );
    let _ = writeln!(
        s,
        r#"<line x1="{l}" y1="{}" x2="{}" y2="{}" stroke="black"/><line x1="{l}" y1="{t}" x2="{l}" y2="{}" stroke="black"/>"#,
        h - b,
        w - r,
        h - b,
        h - b
    );
    for i in 0..=5 {
        let v = y_hi * i as f64 / 5.0;
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{:.1}" text-anchor="end">{v:.0}</text>"#,
            l - 4.0,
            ly(v) + 4.0
        );
    }
    let mut xs: Vec<u64> = ns.clone();
    xs.sort_unstable();
    xs.dedup();
    for n in xs {
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">{}M</text>"#,
            lx(n),
            h - b + 16.0,
            n as f64 / 1e6
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">keys (log scale); y: ns per lookup</text>"#,
        (l + w - r) / 2.0,
        h - 6.0
    );
    for (i, (name, pts)) in series.iter().enumerate() {
        let c = colors[i % colors.len()];
        let path: Vec<String> = pts
            .iter()
            .map(|(&n, &v)| format!("{:.1},{:.1}", lx(n), ly(v)))
            .collect();
        let _ = writeln!(
            s,
            r#"<polyline fill="none" stroke="{c}" stroke-width="2" points="{}"/>"#,
            path.join(" ")
        );
        for (&n, &v) in pts {
            let _ = writeln!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{c}"/>"#,
                lx(n),
                ly(v)
            );
        }
        let y = t + 16.0 * i as f64;
        let _ = writeln!(
            s,
            r#"<rect x="{}" y="{}" width="10" height="10" fill="{c}"/><text x="{}" y="{}">{name}</text>"#,
            w - r + 10.0,
            y,
            w - r + 24.0,
            y + 9.0
        );
    }
    s.push_str("</svg>\n");
    std::fs::write(svg, s)
}
