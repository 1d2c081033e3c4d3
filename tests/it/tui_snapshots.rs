//! Whole-frame snapshots of each main state on a fixed-size TestBackend, and the SVG and PNG
//! screenshots generated from the same fixtures so they never go stale.

use keyhole::Dirs;
use keyhole::{testing::tui::FIXTURES, testing::tui::Format, testing::tui::render_fixture};

const WIDTH: u16 = 120;
const HEIGHT: u16 = 40;

/// A rendering as on a fresh install: nothing learned, nothing configured.
fn render(name: &str, format: Format) -> Vec<u8> {
    let (_scratch, dirs) = crate::common::scratch_dirs();
    render_fixture(name, format, WIDTH, HEIGHT, &dirs).unwrap()
}

#[test]
fn every_main_state_matches_its_snapshot() {
    for name in FIXTURES {
        let text = render(name, Format::Txt);
        insta::assert_snapshot!(name, String::from_utf8(text).unwrap());
    }
}

/// screenshots/<state>.svg and .png must equal a fresh rendering. A missing or stale file
/// fails the test; only with KEYHOLE_BLESS set are they written (never during a plain
/// `cargo test`, which must not change the source tree).
#[test]
fn screenshots_are_current() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("screenshots");
    let bless = std::env::var_os("KEYHOLE_BLESS").is_some();
    let mut stale = Vec::new();
    for name in FIXTURES {
        for (format, extension) in [(Format::Svg, "svg"), (Format::Png, "png")] {
            let fresh = render(name, format);
            let path = dir.join(format!("{name}.{extension}"));
            if std::fs::read(&path).is_ok_and(|old| old == fresh) {
                continue;
            }
            if bless {
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(&path, fresh).unwrap();
            } else {
                stale.push(format!("{name}.{extension}"));
            }
        }
    }
    assert!(
        stale.is_empty(),
        "screenshots {stale:?} are missing or stale: rerun with KEYHOLE_BLESS=1 to regenerate"
    );
}

#[test]
fn unknown_states_are_refused() {
    let err = render_fixture("nope", Format::Txt, WIDTH, HEIGHT, &Dirs::none()).unwrap_err();
    assert!(err.to_string().contains("candidates"));
}

/// At 80x24 the candidates keep id, score, source and type, and every card keeps its exact
/// match and edit similarity in view.
#[test]
fn a_small_terminal_keeps_the_columns_and_the_scores() {
    let (_scratch, dirs) = crate::common::scratch_dirs();
    let text = render_fixture("completions", Format::Txt, 80, 24, &dirs).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(text.contains("P(success) source"), "{text}");
    assert!(text.contains("current      PL 75%"), "{text}");
    let scored = text
        .lines()
        .filter(|l| l.matches(" ES 0.").count() == 2)
        .count();
    assert_eq!(scored, 1, "both cards' scores on one line:\n{text}");
    assert_eq!(text.matches("EM ").count(), 2, "{text}");
}
