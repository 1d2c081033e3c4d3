//! A ratatui buffer as SVG: background rectangles, then one `<text>` per row with one
//! `<tspan>` per run of same-styled cells, each placed at its column. Monospace cells of CELL_W x CELL_H.

use std::fmt::Write;

use ratatui::buffer::Buffer;
use ratatui::style::{Color, Modifier};

use super::theme::rgb;

const CELL_W: f64 = 8.4;
const CELL_H: f64 = 18.0;
const FONT: &str = "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace";
/// Stand-ins for the terminal's own default colours.
const DEFAULT_FG: &str = "#c0c5ce";
const DEFAULT_BG: &str = "#1b1f27";

pub fn render(buffer: &Buffer, background: Color) -> String {
    let area = buffer.area;
    let (w, h) = (area.width as f64 * CELL_W, area.height as f64 * CELL_H);
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w:.0}\" height=\"{h:.0}\" \
         font-family=\"{FONT}\" font-size=\"14\">\n"
    );
    let page = hex(background, DEFAULT_BG);
    let _ = writeln!(
        out,
        "<rect width=\"100%\" height=\"100%\" fill=\"{page}\"/>"
    );
    for y in 0..area.height {
        backgrounds(&mut out, buffer, y, &page);
    }
    for y in 0..area.height {
        text_row(&mut out, buffer, y);
    }
    out.push_str("</svg>\n");
    out
}

/// The cell's (foreground, background), swapped for reversed cells.
fn colours(buffer: &Buffer, x: u16, y: u16) -> (String, String) {
    let cell = &buffer[(x, y)];
    let (fg, bg) = (hex(cell.fg, DEFAULT_FG), hex(cell.bg, "none"));
    if cell.modifier.contains(Modifier::REVERSED) {
        (hex(cell.bg, DEFAULT_BG), hex(cell.fg, DEFAULT_FG))
    } else {
        (fg, bg)
    }
}

/// One rect per run of cells sharing a background other than the page's.
fn backgrounds(out: &mut String, buffer: &Buffer, y: u16, page: &str) {
    let mut x = 0;
    while x < buffer.area.width {
        let bg = colours(buffer, x, y).1;
        let start = x;
        while x < buffer.area.width && colours(buffer, x, y).1 == bg {
            x += 1;
        }
        if bg != page && bg != "none" {
            let _ = writeln!(
                out,
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{CELL_H}\" fill=\"{bg}\"/>",
                start as f64 * CELL_W,
                y as f64 * CELL_H,
                (x - start) as f64 * CELL_W
            );
        }
    }
}

fn text_row(out: &mut String, buffer: &Buffer, y: u16) {
    let baseline = y as f64 * CELL_H + CELL_H * 0.75;
    let _ = write!(out, "<text y=\"{baseline:.1}\" xml:space=\"preserve\">");
    let mut x = 0;
    while x < buffer.area.width {
        let key = text_style(buffer, x, y);
        let start = x;
        let mut text = String::new();
        while x < buffer.area.width && text_style(buffer, x, y) == key {
            text.push_str(buffer[(x, y)].symbol());
            x += 1;
        }
        if !text.trim().is_empty() {
            let _ = write!(
                out,
                "<tspan x=\"{:.1}\" fill=\"{}\"{}>{}</tspan>",
                start as f64 * CELL_W,
                key.0,
                key.1,
                escape(&text)
            );
        }
    }
    out.push_str("</text>\n");
}

/// (fill, extra attributes) of a cell's text.
fn text_style(buffer: &Buffer, x: u16, y: u16) -> (String, String) {
    let modifier = buffer[(x, y)].modifier;
    let mut attrs = String::new();
    for (m, attr) in [
        (Modifier::BOLD, " font-weight=\"bold\""),
        (Modifier::ITALIC, " font-style=\"italic\""),
        (Modifier::UNDERLINED, " text-decoration=\"underline\""),
    ] {
        if modifier.contains(m) {
            attrs.push_str(attr);
        }
    }
    (colours(buffer, x, y).0, attrs)
}

/// Colours as #rrggbb, `reset` for the terminal's default.
fn hex(color: Color, reset: &str) -> String {
    match rgb(color) {
        Some([r, g, b]) => format!("#{r:02x}{g:02x}{b:02x}"),
        None => reset.to_string(),
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use ratatui::buffer::Buffer;
    use ratatui::layout::Rect;
    use ratatui::style::{Color, Style};

    #[test]
    fn runs_become_tspans_and_backgrounds_rects() {
        let mut buf = Buffer::empty(Rect::new(0, 0, 6, 1));
        buf.set_string(0, 0, "ab", Style::new().fg(Color::Red));
        let blue = Style::new().fg(Color::Rgb(1, 2, 3)).bg(Color::Blue);
        buf.set_string(2, 0, "<c", blue);
        let svg = super::render(&buf, Color::Black);
        assert!(svg.contains(">ab</tspan>"));
        assert!(svg.contains("&lt;c"));
        assert!(svg.contains("fill=\"#2472c8\""));
        assert_eq!(svg.matches("<rect").count(), 2);
    }
}
