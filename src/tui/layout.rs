//! Where things are on the screen, as numbers: what the renderer draws by and what the state
//! needs to turn a click into a line or a row. Pure arithmetic, importing nothing of the UI.

/// Columns taken by the source pane's line numbers.
pub const GUTTER: u16 = 6;

/// First visible row of a list of `height` rows that keeps `cursor` in the middle.
pub fn scroll_top(cursor: usize, height: usize) -> usize {
    cursor.saturating_sub(height / 2)
}

/// The source pane's first shown column: long lines scroll so the cursor stays 8 cells from
/// the right edge.
pub fn first_column(cursor: usize, width: u16) -> usize {
    let text_width = width.saturating_sub(GUTTER) as usize;
    cursor.saturating_sub(text_width.saturating_sub(8))
}
