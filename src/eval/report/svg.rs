//! plots/*.svg: the paper's figures as small hand-written SVG (a line chart for success@k, bar
//! charts for sources and context types), so reports need no plotting dependency.

use std::fmt::Write;

use super::{Report, Tally};

pub(super) const PLOT_DIR: &str = "plots";
pub(super) const SUCCESS_AT_K: &str = "success_at_k.svg";
pub(super) const SOURCES: &str = "sources.svg";
pub(super) const CONTEXT_TYPES: &str = "context_types.svg";

const PALETTE: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// Every plot of the report: file name and SVG text.
pub(super) fn plots(report: &Report) -> Vec<(&'static str, String)> {
    let series: Vec<Series> = report
        .success_at_k
        .iter()
        .map(|c| Series {
            name: &c.method,
            solid: &c.hole_wise,
            dashed: &c.repo_wise,
        })
        .collect();
    vec![
        (
            SUCCESS_AT_K,
            line_chart("success@k (solid: hole-wise, dashed: repo-wise)", &series),
        ),
        (
            SOURCES,
            bar_chart(
                "Mean success when applicable, by prompt source",
                &report.sources,
            ),
        ),
        (
            CONTEXT_TYPES,
            bar_chart(
                "Mean success when applicable, by context type",
                &report.context_types,
            ),
        ),
    ]
}

/// One method's curve over k = 1, 2, ...: hole-wise drawn solid, repo-wise dashed.
struct Series<'a> {
    name: &'a str,
    solid: &'a [f64],
    dashed: &'a [f64],
}

const WIDTH: f64 = 760.0;
const LEFT: f64 = 60.0;
const RIGHT: f64 = 560.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 370.0;

fn line_chart(title: &str, series: &[Series]) -> String {
    let values = || series.iter().flat_map(|s| s.solid.iter().chain(s.dashed));
    let (lo, hi) = y_range(values().copied());
    let n = series
        .iter()
        .map(|s| s.solid.len())
        .max()
        .unwrap_or(1)
        .max(2);
    let x = |i: usize| LEFT + (RIGHT - LEFT) * i as f64 / (n - 1) as f64;
    let y = |v: f64| BOTTOM - (BOTTOM - TOP) * (v - lo) / (hi - lo);
    let mut out = open(WIDTH, BOTTOM + 50.0, title);
    // Gridlines every 5 points, or a multiple of 5 when that would give more than 8.
    let step = 5.0 * ((hi - lo) / 40.0).ceil();
    for v in (0..).map(|i| lo + step * i as f64).take_while(|&v| v <= hi) {
        let _ = write!(
            out,
            r##"<line x1="{LEFT}" y1="{0:.1}" x2="{RIGHT}" y2="{0:.1}" stroke="#ddd"/><text x="{1}" y="{0:.1}" text-anchor="end" dominant-baseline="middle">{v:.0}</text>"##,
            y(v),
            LEFT - 6.0
        );
    }
    for i in 0..n {
        let _ = write!(
            out,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
            x(i),
            BOTTOM + 18.0,
            i + 1
        );
    }
    let _ = write!(
        out,
        r#"<text x="{}" y="{}" text-anchor="middle">k</text>"#,
        (LEFT + RIGHT) / 2.0,
        BOTTOM + 38.0
    );
    for (s, color) in series.iter().zip(PALETTE.iter().cycle()) {
        for (values, dash) in [(s.solid, ""), (s.dashed, r#" stroke-dasharray="6 4""#)] {
            let points: Vec<String> = values
                .iter()
                .enumerate()
                .map(|(i, &v)| format!("{:.1},{:.1}", x(i), y(v)))
                .collect();
            let _ = write!(
                out,
                r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2"{dash}/>"#,
                points.join(" ")
            );
        }
    }
    for (i, (s, color)) in series.iter().zip(PALETTE.iter().cycle()).enumerate() {
        let ly = TOP + 18.0 * i as f64;
        let _ = write!(
            out,
            r#"<rect x="{}" y="{:.1}" width="14" height="4" fill="{color}"/><text x="{}" y="{:.1}" dominant-baseline="middle">{}</text>"#,
            RIGHT + 20.0,
            ly - 2.0,
            RIGHT + 40.0,
            ly,
            escape(s.name)
        );
    }
    out + "</svg>\n"
}

/// A y range in steps of 5 around the values, at least 5 wide.
fn y_range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (min, max) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    if !min.is_finite() {
        return (0.0, 100.0);
    }
    let (lo, hi) = ((min / 5.0).floor() * 5.0, (max / 5.0).ceil() * 5.0);
    match hi - lo {
        d if d >= 5.0 => (lo, hi),
        _ if hi >= 5.0 => (hi - 5.0, hi),
        _ => (lo, lo + 5.0),
    }
}

const LABEL_WIDTH: f64 = 190.0;
const BAR_AREA: f64 = 400.0;
const BAR_PITCH: f64 = 24.0;

fn bar_chart(title: &str, tallies: &[Tally]) -> String {
    let max = tallies.iter().map(|t| t.success).fold(0.0, f64::max);
    let axis = ((max / 10.0).ceil() * 10.0).max(10.0);
    let height = TOP + BAR_PITCH * tallies.len() as f64 + 20.0;
    let mut out = open(LABEL_WIDTH + BAR_AREA + 130.0, height, title);
    for (i, t) in tallies.iter().enumerate() {
        let y = TOP + BAR_PITCH * i as f64;
        let w = BAR_AREA * t.success / axis;
        let value = match t.applicable {
            0 => "never applicable".to_string(),
            n => format!("{:.1} (n={n})", t.success),
        };
        let _ = write!(
            out,
            r#"<text x="{}" y="{:.1}" text-anchor="end" dominant-baseline="middle">{}</text><rect x="{LABEL_WIDTH}" y="{y:.1}" width="{w:.1}" height="{}" fill="{}"/><text x="{:.1}" y="{:.1}" dominant-baseline="middle">{value}</text>"#,
            LABEL_WIDTH - 8.0,
            y + BAR_PITCH / 2.0 - 2.0,
            escape(&t.name),
            BAR_PITCH - 4.0,
            PALETTE[0],
            LABEL_WIDTH + w + 6.0,
            y + BAR_PITCH / 2.0 - 2.0,
        );
    }
    out + "</svg>\n"
}

/// The opening of an SVG document with a white background and a title.
fn open(width: f64, height: f64, title: &str) -> String {
    format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12"><rect width="100%" height="100%" fill="white"/><text x="{}" y="24" text-anchor="middle" font-size="15">{}</text>"#,
        width / 2.0,
        escape(title)
    )
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::{escape, y_range};

    #[test]
    fn y_range_snaps_to_fives_and_is_never_empty() {
        assert_eq!(y_range([61.0, 73.2].into_iter()), (60.0, 75.0));
        assert_eq!(y_range([40.0, 40.0].into_iter()), (35.0, 40.0));
        assert_eq!(y_range([0.0].into_iter()), (0.0, 5.0));
        assert_eq!(y_range(std::iter::empty()), (0.0, 100.0));
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(escape("a<b & \"c\">"), "a&lt;b &amp; &quot;c&quot;&gt;");
    }
}
