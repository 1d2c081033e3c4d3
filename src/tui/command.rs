//! The vocabulary shared by the keymap, the state and the renderer: the commands keys are bound
//! to and the panes they act on. It imports nothing of the UI, so every layer can name it.

use serde::Deserialize;

/// What a key can be bound to (keymaps name these in snake_case).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Command {
    Quit,
    Help,
    FocusNext,
    FocusPrev,
    Zoom,
    Up,
    Down,
    Left,
    Right,
    PageUp,
    PageDown,
    Top,
    Bottom,
    Confirm,
    Select,
    Run,
    Cancel,
    #[serde(rename = "pick_1")]
    Pick1,
    #[serde(rename = "pick_2")]
    Pick2,
    #[serde(rename = "pick_3")]
    Pick3,
    #[serde(rename = "pick_4")]
    Pick4,
    #[serde(rename = "pick_5")]
    Pick5,
    Explain,
    Apply,
    Filter,
    Picker,
    MoreK,
    FewerK,
    ToggleMouse,
    Suspend,
    /// Edit the focused candidate's prompt in place.
    Edit,
    CycleRanker,
    /// Choose the completion backend among the configured ones.
    Backends,
    /// Open the hole of a request an editor plugin made through `keyhole proxy`.
    Recorded,
    /// Take back the last apply.
    Undo,
    /// Copy the prompt shown to the clipboard (OSC 52: works over ssh and in tmux).
    CopyPrompt,
    /// Save the prompt shown to a file in the working directory.
    SavePrompt,
    /// Wrap long prompt lines, or scroll them sideways.
    Wrap,
    /// Source pane: the start or the end of the cursor's line.
    LineStart,
    LineEnd,
    /// Source pane: type a line number to go to.
    GoToLine,
    /// Source pane: type text to find in the file.
    Search,
    /// Source pane: the next or previous match of the last search.
    NextMatch,
    PrevMatch,
    /// Copy the focused completion to the clipboard.
    CopyCompletion,
    /// Open the file at the hole (or the cursor) in `$VISUAL` / `$EDITOR`.
    OpenInEditor,
    /// List every action with its key; typing filters, Enter runs one.
    Palette,
    /// The requests sent this session: when, to whom, what, how long.
    RequestLog,
    /// A line diff of two selected candidates' prompts, or of an edited prompt against its
    /// original.
    DiffPrompts,
    /// Drop the focused candidate's kept edit: its prompt is the composed one again.
    DiscardEdit,
    /// Pin the focused candidate for the repository (`keyhole proxy --compose` sends its
    /// context), or unpin it.
    Pin,
    /// Jump to a pane (lazygit's numbers).
    FocusSource,
    FocusCandidates,
    FocusPrompt,
    FocusCompletions,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pane {
    Source,
    Candidates,
    Prompt,
    Completions,
}

impl Pane {
    pub const ALL: [Pane; 4] = [
        Pane::Source,
        Pane::Candidates,
        Pane::Prompt,
        Pane::Completions,
    ];

    /// How help and titles name the pane.
    pub fn name(self) -> &'static str {
        match self {
            Pane::Source => "source",
            Pane::Candidates => "candidates",
            Pane::Prompt => "prompt",
            Pane::Completions => "completions",
        }
    }

    /// The pane `by` places after this one, wrapping around.
    pub fn step(self, by: isize) -> Pane {
        let i = Pane::ALL.iter().position(|&p| p == self).unwrap_or(0) as isize;
        Pane::ALL[(i + by).rem_euclid(Pane::ALL.len() as isize) as usize]
    }
}
