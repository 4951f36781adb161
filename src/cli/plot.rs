//! `filterstore plot`: false-positive rate against bits per key, theory and
//! measurement, both layouts, written as a self-contained SVG (the README's
//! chart is `filterstore plot -o docs/fp_vs_bits_per_key.svg`).
//!
//! The chart is one log-scale line plot, so it is written directly as SVG
//! text (about a hundred lines) rather than through a plotting crate, which
//! would bring font handling and a dozen dependencies for no gain here.

use filterstore::{fp_for, optimal_k, FilterParams, BLOCK_BITS};
use filterstore::{BitFilter, HashSpec, Layout};
use std::fmt::Write as _;

/// One point of the curve.
#[derive(Clone, Copy, Debug)]
pub struct FpPoint {
    /// Bits per key (m/n).
    pub bits_per_key: f64,
    /// Hash functions used (by [`optimal_k`]).
    pub k: u32,
    /// The layout's model.
    pub theory: f64,
    /// Measured on `probes` absent keys; `None` when no false positive was
    /// seen (a log scale cannot show zero).
    pub measured: Option<f64>,
}

/// Measures both layouts at `bits_per_key` values 2..=max_bpk with `n` keys and
/// `probes` absent keys each (seeded, so the plot is reproducible).
pub fn measure_curves(n: u64, probes: u64, max_bpk: u32) -> Vec<(Layout, Vec<FpPoint>)> {
    [Layout::Standard, Layout::Blocked]
        .into_iter()
        .map(|layout| {
            let points = (2..=max_bpk)
                .filter_map(|bpk| {
                    let params = FilterParams::with_bits_per_key(
                        n,
                        bpk as f64,
                        layout,
                        HashSpec::xxh3(0x5eed + bpk as u64),
                    )
                    .ok()?;
                    let filter = BitFilter::new(params).ok()?;
                    for i in 0..n {
                        filter.insert(&key(i, 0));
                    }
                    let hits = (0..probes).filter(|&i| filter.contains(&key(i, 1))).count();
                    let m = params.m();
                    Some(FpPoint {
                        bits_per_key: m as f64 / n as f64,
                        k: optimal_k(m, n, layout),
                        theory: fp_for(layout, m, n, params.k()),
                        measured: (hits > 0).then(|| hits as f64 / probes as f64),
                    })
                })
                .collect();
            (layout, points)
        })
        .collect()
}

fn key(i: u64, tag: u8) -> [u8; 9] {
    let mut k = [tag; 9];
    k[..8].copy_from_slice(&i.to_le_bytes());
    k
}

/// The plot's canvas: size, margins and the two axis mappings.
struct Canvas {
    max_x: f64,
}

impl Canvas {
    const W: f64 = 760.0;
    const H: f64 = 480.0;
    const L: f64 = 70.0;
    const R: f64 = 20.0;
    const T: f64 = 40.0;
    const B: f64 = 60.0;
    /// Decades of the logarithmic y axis.
    const LO_EXP: i32 = -6;
    const HI_EXP: i32 = 0;

    /// x position of `bits_per_key`.
    fn x(&self, v: f64) -> f64 {
        Self::L + v / self.max_x * (Self::W - Self::L - Self::R)
    }

    /// y position of a rate on the logarithmic axis.
    fn y(&self, v: f64) -> f64 {
        let e = v.max(10f64.powi(Self::LO_EXP)).log10();
        Self::T
            + (Self::HI_EXP as f64 - e) / (Self::HI_EXP - Self::LO_EXP) as f64
                * (Self::H - Self::T - Self::B)
    }
}

/// Renders the curves as an SVG document.
pub fn render_svg(curves: &[(Layout, Vec<FpPoint>)], n: u64, probes: u64) -> String {
    let max_x = curves
        .iter()
        .flat_map(|(_, p)| p.iter().map(|p| p.bits_per_key))
        .fold(2.0f64, f64::max)
        .ceil();
    let c = Canvas { max_x };
    let mut s = String::new();
    axes(&mut s, &c, n, probes);
    for (i, (layout, points)) in curves.iter().enumerate() {
        curve(&mut s, &c, i, *layout, points);
    }
    let _ = writeln!(
        s,
        r##"<text x="{}" y="{:.1}" fill="#555">blocked: {BLOCK_BITS}-bit blocks, Poisson-mixture model; standard: (1-(1-1/m)^kn)^k</text>"##,
        Canvas::L,
        Canvas::H - 4.0
    );
    s.push_str("</svg>\n");
    s
}

/// The document header, title, grid and axis labels.
fn axes(s: &mut String, c: &Canvas, n: u64, probes: u64) {
    let (w, h, l, r, t, b) = (
        Canvas::W,
        Canvas::H,
        Canvas::L,
        Canvas::R,
        Canvas::T,
        Canvas::B,
    );
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="22" text-anchor="middle" font-size="15">False-positive rate against bits per key ({n} keys, {probes} absent probes per point)</text>"#,
        w / 2.0
    );
    for e in Canvas::LO_EXP..=Canvas::HI_EXP {
        let yy = c.y(10f64.powi(e));
        let _ = writeln!(
            s,
            r##"<line x1="{l}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">1e{e}</text>"##,
            w - r,
            l - 6.0,
            yy + 4.0
        );
    }
    let mut tick = 0.0;
    while tick <= c.max_x {
        let xx = c.x(tick);
        let _ = writeln!(
            s,
            r##"<line x1="{xx:.1}" y1="{t}" x2="{xx:.1}" y2="{:.1}" stroke="#eee"/><text x="{xx:.1}" y="{:.1}" text-anchor="middle">{tick}</text>"##,
            h - b,
            h - b + 16.0
        );
        tick += 4.0;
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">bits per key (m/n), k chosen by the PlanetP rule</text>"#,
        (l + w - r) / 2.0,
        h - 18.0
    );
    let _ = writeln!(
        s,
        r#"<text transform="translate(18 {:.1}) rotate(-90)" text-anchor="middle">false-positive rate (log scale)</text>"#,
        (t + h - b) / 2.0
    );
}

/// One layout's model line, measured points and legend entry.
fn curve(s: &mut String, c: &Canvas, i: usize, layout: Layout, points: &[FpPoint]) {
    let color = if i == 0 { "#1f77b4" } else { "#d62728" };
    let path: Vec<String> = points
        .iter()
        .map(|p| format!("{:.1},{:.1}", c.x(p.bits_per_key), c.y(p.theory)))
        .collect();
    let _ = writeln!(
        s,
        r#"<polyline fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#,
        path.join(" ")
    );
    for p in points {
        if let Some(m) = p.measured {
            let _ = writeln!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3.5" fill="none" stroke="{color}" stroke-width="1.5"><title>{layout} {:.2} bits/key k={}: measured {m:.3e}, theory {:.3e}</title></circle>"#,
                c.x(p.bits_per_key),
                c.y(m),
                p.bits_per_key,
                p.k,
                p.theory
            );
        }
    }
    let ly = Canvas::T + 20.0 + 36.0 * i as f64;
    let lx = Canvas::W - Canvas::R - 250.0;
    let _ = writeln!(
        s,
        r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{color}" stroke-width="2"/><text x="{}" y="{}">{layout}: model (line)</text>"#,
        lx + 24.0,
        lx + 30.0,
        ly + 4.0
    );
    let _ = writeln!(
        s,
        r#"<circle cx="{}" cy="{}" r="3.5" fill="none" stroke="{color}" stroke-width="1.5"/><text x="{}" y="{}">{layout}: measured (circles)</text>"#,
        lx + 12.0,
        ly + 16.0,
        lx + 30.0,
        ly + 20.0
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn svg_has_both_curves_and_measurements() {
        let curves = measure_curves(2_000, 20_000, 8);
        assert_eq!(curves.len(), 2);
        for (_, points) in &curves {
            assert_eq!(points.len(), 7);
            assert!(points.windows(2).all(|w| w[1].theory < w[0].theory));
        }
        let svg = render_svg(&curves, 2_000, 20_000);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.matches("<circle").count() >= 14);
    }
}
