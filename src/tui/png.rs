//! A ratatui buffer as a PNG image, for READMEs and viewers that do not show SVG: each cell is
//! 8×16 pixels, its background filled and its symbol drawn from the font8x8 bitmaps (ASCII,
//! Latin-1, box drawing and block elements, each row doubled) or, for the UI's own marks
//! (✓ ✗ ★ ● ✂ and arrows), from bitmaps drawn here; other symbols become a small square. The bytes depend only on the buffer, so a test can compare them.

use font8x8::legacy::{BASIC_LEGACY, BLOCK_LEGACY, BOX_LEGACY, LATIN_LEGACY};
use ratatui::buffer::Buffer;
use ratatui::style::{Color, Modifier};

use super::theme::rgb;

const CELL_W: usize = 8;
const CELL_H: usize = 16;
/// Stand-ins for the terminal's own default colours (as in the SVG screenshots).
const DEFAULT_FG: [u8; 3] = [0xc0, 0xc5, 0xce];
const DEFAULT_BG: [u8; 3] = [0x1b, 0x1f, 0x27];
/// The UI's own symbols font8x8 lacks, drawn here in its format (eight rows, the lowest bit
/// the leftmost pixel), so screenshots show what a terminal shows.
const DRAWN: [(char, [u8; 8]); 10] = [
    ('✓', [0x00, 0x80, 0x40, 0x21, 0x12, 0x0c, 0x04, 0x00]),
    ('✗', [0x00, 0x41, 0x22, 0x14, 0x08, 0x14, 0x22, 0x41]),
    ('★', [0x08, 0x08, 0x1c, 0x7f, 0x3e, 0x1c, 0x36, 0x41]),
    ('●', [0x00, 0x3c, 0x7e, 0x7e, 0x7e, 0x7e, 0x3c, 0x00]),
    ('✂', [0x23, 0x13, 0x0c, 0x04, 0x0c, 0x13, 0x23, 0x00]),
    ('→', [0x00, 0x10, 0x20, 0x7f, 0x20, 0x10, 0x00, 0x00]),
    ('←', [0x00, 0x04, 0x02, 0x7f, 0x02, 0x04, 0x00, 0x00]),
    ('↑', [0x08, 0x1c, 0x2a, 0x08, 0x08, 0x08, 0x08, 0x00]),
    ('↓', [0x08, 0x08, 0x08, 0x08, 0x2a, 0x1c, 0x08, 0x00]),
    ('≥', [0x01, 0x06, 0x18, 0x06, 0x01, 0x00, 0x7f, 0x00]),
];
/// What any other symbol outside the font looks like: a 4×4 square in the middle of the cell.
const FALLBACK: [u8; 8] = [0x00, 0x00, 0x3c, 0x3c, 0x3c, 0x3c, 0x00, 0x00];

pub fn render(buffer: &Buffer, background: Color) -> Vec<u8> {
    let area = buffer.area;
    let (width, height) = (area.width as usize * CELL_W, area.height as usize * CELL_H);
    let page = rgb(background).unwrap_or(DEFAULT_BG);
    let mut pixels = vec![0u8; width * height * 3];
    for y in 0..area.height {
        for x in 0..area.width {
            draw_cell(&mut pixels, width, buffer, (x, y), page);
        }
    }
    encode(&pixels, width as u32, height as u32)
}

fn draw_cell(pixels: &mut [u8], width: usize, buffer: &Buffer, (x, y): (u16, u16), page: [u8; 3]) {
    let cell = &buffer[(x, y)];
    let (mut fg, mut bg) = (
        rgb(cell.fg).unwrap_or(DEFAULT_FG),
        rgb(cell.bg).unwrap_or(page),
    );
    if cell.modifier.contains(Modifier::REVERSED) {
        (fg, bg) = (
            rgb(cell.bg).unwrap_or(DEFAULT_BG),
            rgb(cell.fg).unwrap_or(DEFAULT_FG),
        );
    }
    let mut rows = cell.symbol().chars().next().map_or([0; 8], glyph);
    if cell.modifier.contains(Modifier::BOLD) {
        rows = rows.map(|r| r | r << 1);
    }
    if cell.modifier.contains(Modifier::UNDERLINED) {
        rows[7] = 0xff;
    }
    for py in 0..CELL_H {
        let bits = rows[py / 2];
        for px in 0..CELL_W {
            let colour = if bits >> px & 1 == 1 { fg } else { bg };
            let at = ((y as usize * CELL_H + py) * width + x as usize * CELL_W + px) * 3;
            pixels[at..at + 3].copy_from_slice(&colour);
        }
    }
}

/// font8x8's bitmap of `c`: eight rows, the lowest bit the leftmost pixel.
fn glyph(c: char) -> [u8; 8] {
    let u = c as usize;
    match u {
        0x20..=0x7e => BASIC_LEGACY[u],
        0xa0..=0xff => LATIN_LEGACY[u - 0xa0],
        0x2500..=0x257f => BOX_LEGACY[u - 0x2500],
        0x2580..=0x259f => BLOCK_LEGACY[u - 0x2580],
        _ if c.is_whitespace() || c.is_control() => [0; 8],
        _ => DRAWN
            .iter()
            .find(|(drawn, _)| *drawn == c)
            .map_or(FALLBACK, |(_, rows)| *rows),
    }
}

fn encode(pixels: &[u8], width: u32, height: u32) -> Vec<u8> {
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, width, height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    // Writing to memory fails only on a size mismatch, which the buffer's own size rules out.
    let mut writer = encoder.write_header().expect("a PNG header in memory");
    writer
        .write_image_data(pixels)
        .expect("pixels of the header's size");
    writer.finish().expect("a PNG in memory");
    out
}

#[cfg(test)]
mod tests {
    use ratatui::buffer::Buffer;
    use ratatui::layout::Rect;
    use ratatui::style::{Color, Style};

    #[test]
    fn cells_become_8_by_16_pixels_with_their_colours() {
        let mut buf = Buffer::empty(Rect::new(0, 0, 3, 2));
        buf.set_string(0, 0, "█", Style::new().fg(Color::Rgb(255, 0, 0)));
        buf.set_string(
            1,
            1,
            "⠋",
            Style::new().fg(Color::Rgb(0, 255, 0)).bg(Color::Blue),
        );
        let png = super::render(&buf, Color::Black);
        let decoder = png::Decoder::new(std::io::Cursor::new(png));
        let mut reader = decoder.read_info().unwrap();
        let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut pixels).unwrap();
        assert_eq!((info.width, info.height), (24, 32));
        let at = |x: usize, y: usize| &pixels[(y * 24 + x) * 3..(y * 24 + x) * 3 + 3];
        assert_eq!(at(3, 8), [255, 0, 0], "a full block is all foreground");
        assert_eq!(at(20, 3), [0, 0, 0], "the page shows through empty cells");
        assert_eq!(
            at(12, 24),
            [0, 255, 0],
            "a symbol outside the font is a square"
        );
        assert_eq!(at(8, 16), [36, 114, 200], "its cell keeps its background");
    }

    #[test]
    fn the_uis_marks_are_drawn_not_squares() {
        let marks = ['✓', '✗', '★', '●', '✂'];
        let drawn: Vec<[u8; 8]> = marks.iter().map(|&c| super::glyph(c)).collect();
        for (mark, rows) in marks.iter().zip(&drawn) {
            assert_ne!(*rows, super::FALLBACK, "{mark}");
        }
        for (i, a) in drawn.iter().enumerate() {
            assert!(
                drawn[i + 1..].iter().all(|b| b != a),
                "{} is not distinct",
                marks[i]
            );
        }
    }
}
