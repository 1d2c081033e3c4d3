//! The user guide's table of keys (`docs/ui.md`) is the default keymap's, row for row: a key
//! rebound or a command added in `keymaps/default.toml` fails this test until the guide says so.
//! `KEYHOLE_BLESS=1` rewrites the table from the keymap (never during a plain `cargo test`).

use std::path::Path;

const BEGIN: &str = "<!-- keys:begin -->\n";
const END: &str = "<!-- keys:end -->";

/// The table the keymap's bindings make, in the keymap's order: mode, pane, key, description.
fn table_from_keymap(keymap: &str) -> String {
    let keymap: toml::Table = toml::from_str(keymap).expect("the default keymap parses");
    let field =
        |bind: &toml::Table, key: &str| bind.get(key).and_then(|v| v.as_str()).map(str::to_string);
    let mut table = String::from("| mode | pane | key | what it does |\n|---|---|---|---|\n");
    for bind in keymap["bind"].as_array().expect("[[bind]] entries") {
        let bind = bind.as_table().expect("a binding is a table");
        let key = field(bind, "on").expect("every binding has a key");
        let mode = field(bind, "mode").unwrap_or_else(|| "normal".into());
        let pane = field(bind, "pane").unwrap_or_else(|| "any".into());
        let desc = field(bind, "desc").expect("every binding has a description");
        // A `|` in a key or a description would end the cell early.
        let cell = |text: &str| text.replace('|', "\\|");
        table.push_str(&format!(
            "| {mode} | {pane} | `{}` | {} |\n",
            cell(&key),
            cell(&desc)
        ));
    }
    table
}

#[test]
fn the_guide_lists_every_default_key_as_the_keymap_binds_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let keymap = std::fs::read_to_string(root.join("keymaps/default.toml")).unwrap();
    let guide_path = root.join("docs/ui.md");
    let guide = std::fs::read_to_string(&guide_path).unwrap();
    let start = guide
        .find(BEGIN)
        .expect("docs/ui.md marks where the keys go")
        + BEGIN.len();
    let end = guide[start..].find(END).expect("and where they end") + start;
    let expected = table_from_keymap(&keymap);
    if guide[start..end] != expected {
        if std::env::var_os("KEYHOLE_BLESS").is_some() {
            let updated = format!("{}{expected}{}", &guide[..start], &guide[end..]);
            std::fs::write(&guide_path, updated).unwrap();
        } else {
            panic!(
                "docs/ui.md's keys differ from keymaps/default.toml: rerun with KEYHOLE_BLESS=1 \
                 to rewrite the table, then review the diff"
            );
        }
    }
}
