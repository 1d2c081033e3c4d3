//! `keyhole proxy --compose`: keyhole's context in place of the plugin's, in the request the
//! plugin made. Which context is chosen is the session's business ([`ContextSource`]); here is
//! what each request format has room for ([`FimShape`]), how keyhole's context goes in
//! ([`rewrite`]) and what the record keeps of it ([`Composition`]). The plugin's text before and
//! after the cursor always goes through as it sent it.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::arms::Arm;
use super::exchange::{ExtraChunk, Sent};
use super::locate;
use crate::hole::HoleError;
use crate::rank::classifier::ModelError;

/// Why keyhole cannot put a context in a request: it goes to the server as the plugin sent it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Uncomposable {
    #[error("a chat request: keyhole composes only fill-in-the-middle requests")]
    Chat,
    #[error("the body is not a JSON request keyhole can read")]
    UnreadableBody,
    #[error("a context-only request: it asks for no completion")]
    ContextOnly,
    #[error("no prompt to compose")]
    NoPrompt,
    #[error("no suffix and no fill-in-the-middle template: not a fill-in-the-middle request")]
    NotFim,
    #[error("the body cannot be read again: {0}")]
    Reread(serde_json::Error),
    #[error("the prompt is not one text")]
    PromptNotText,
    #[error(transparent)]
    Write(#[from] serde_json::Error),
}

/// Why a [`ContextSource`] has no context for a request's hole.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NoContext {
    #[error("the hole is not in the repository")]
    NotInRepository,
    #[error("{0} places in the repository fit the hole as well as each other")]
    Ambiguous(usize),
    #[error(transparent)]
    Hole(#[from] HoleError),
    #[error("the ranker cannot rank: {0}")]
    Rank(#[source] ModelError),
    #[error(
        "no room for a context: the plugin's text and the {asked} tokens it asks for fill the model's {room}"
    )]
    NoRoom { asked: usize, room: usize },
    #[error("the repository is still opening")]
    Opening,
    /// The last opening failed (the source's own error, said to every request until one
    /// succeeds).
    #[error("the repository cannot be opened: {0}")]
    Unopened(Arc<dyn std::error::Error + Send + Sync>),
}

/// Why a judged completion taught the ranker nothing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NotLearnt {
    #[error("the repository is not open")]
    NotOpen,
    #[error("no candidate {0}")]
    NoCandidate(u16),
    #[error("no data directory: the outcome teaches nothing")]
    NoDataDirectory,
    #[error("cannot lock the pick log: {0}")]
    Lock(std::io::Error),
    #[error("cannot save the online ranker: {0}")]
    Save(std::io::Error),
}

/// The shape of a fill-in-the-middle request, and so where a context goes in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FimShape {
    /// llama.cpp's `/infill`: context travels as `input_extra` chunks.
    Infill,
    /// A prompt and a suffix sent apart (OpenAI's and Ollama's `suffix`, llama.cpp
    /// `/completion`'s): the context goes before the prompt.
    PromptAndSuffix,
    /// One prompt in which the plugin filled a template: the context goes where the text
    /// before the cursor starts, after the template's prefix marker (byte `at`).
    Template { at: usize },
}

/// The shape of `sent`, or why keyhole cannot put a context in it.
pub fn fim_shape(sent: &Sent) -> Result<FimShape, Uncomposable> {
    if !sent.messages.is_empty() {
        return Err(Uncomposable::Chat);
    }
    if sent.body.is_some() {
        return Err(Uncomposable::UnreadableBody);
    }
    if sent.context_only() {
        return Err(Uncomposable::ContextOnly);
    }
    if sent.prefix.is_some() {
        return Ok(FimShape::Infill);
    }
    let Some(prompt) = &sent.prompt else {
        return Err(Uncomposable::NoPrompt);
    };
    if sent.suffix.is_some() {
        return Ok(FimShape::PromptAndSuffix);
    }
    match locate::prefix_start(prompt) {
        Some(at) => Ok(FimShape::Template { at }),
        None => Err(Uncomposable::NotFim),
    }
}

/// The context keyhole chose for a request's hole.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chosen {
    /// The candidate's id in the catalogue and its label.
    pub candidate: u16,
    pub label: String,
    /// Where the hole was found (`FILE:LINE:COL`).
    pub hole: String,
    /// The context, as chunks of the files it came from, in order (the plugin's framing of
    /// other files has no place in it: each chunk is one file's text).
    pub chunks: Vec<ExtraChunk>,
    /// Its tokens, in the session's tokenizer.
    pub tokens: usize,
    /// The candidate pinned for the repository, where one was.
    pub pinned: Option<Pinned>,
}

/// The candidate a person pinned for the repository (`p` in the UI): keyhole sends its context,
/// or where it cannot (not built in time, no context at this hole) the ranker's first, and
/// says why.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pinned {
    pub candidate: u16,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub passed_over_because: Option<String>,
}

impl Chosen {
    /// The context as one text, for a prompt: the chunks joined.
    fn text(&self) -> String {
        self.chunks.iter().map(|c| c.text.as_str()).collect()
    }
}

/// Chooses the context for a request's hole: an open repository with its rankers. Called off
/// the proxy's async threads, each call bounded by the proxy's deadline.
pub trait ContextSource: Send + Sync {
    /// The context for the hole `sent` was made at, or why there is none; past `deadline`
    /// the request goes as sent, so a choice that may take longer falls back before it.
    fn choose(&self, sent: &Sent, deadline: std::time::Instant) -> Result<Chosen, NoContext>;

    /// Learn that the completion of candidate `candidate`'s prompt for `hole` was kept
    /// (`accepted`) or dropped; what it did, in a line. Called off the proxy's async threads.
    fn learn(&self, candidate: u16, hole: &str, accepted: bool) -> Result<String, NotLearnt>;
}

/// `body` (the JSON object the plugin sent) with `chosen` in the place `shape` has for it,
/// every other field as sent. For an infill request the chunks replace the plugin's own
/// `input_extra`; elsewhere the context, then a line break, go before the text before the
/// cursor.
pub fn rewrite(body: &[u8], shape: FimShape, chosen: &Chosen) -> Result<Vec<u8>, Uncomposable> {
    let mut request: serde_json::Map<String, Value> =
        serde_json::from_slice(body).map_err(Uncomposable::Reread)?;
    match shape {
        FimShape::Infill => {
            let chunks = serde_json::to_value(&chosen.chunks)?;
            request.insert("input_extra".into(), chunks);
        }
        FimShape::PromptAndSuffix | FimShape::Template { .. } => {
            let Some(Value::String(prompt)) = request.get_mut("prompt") else {
                return Err(Uncomposable::PromptNotText);
            };
            let at = match shape {
                FimShape::Template { at } => at,
                _ => 0,
            };
            let context = chosen.text();
            if !context.is_empty() {
                let separated = match context.ends_with('\n') {
                    true => context,
                    false => context + "\n",
                };
                prompt.insert_str(at, &separated);
            }
        }
    }
    Ok(serde_json::to_vec(&request)?)
}

/// What `--compose` did with one request: whose prompt reached the server, and the candidate
/// keyhole used. Kept beside what the plugin sent ([`super::Exchange::sent`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Composition {
    /// Why the plugin's request went as sent, where it did; `None`: keyhole's went instead.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub forwarded_because: Option<String>,
    /// The candidate whose context keyhole sent (its id and label).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub candidate: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub label: Option<String>,
    /// Where the hole was found.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub hole: Option<String>,
    /// The context's tokens.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub context_tokens: Option<usize>,
    /// The candidate pinned for the repository, where one was, and why keyhole did not send
    /// it where it did not.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub pinned: Option<Pinned>,
    /// What keyhole sent instead, read as the plugin's request is.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub sent: Option<Sent>,
    /// Milliseconds spent choosing and composing (or waiting, up to the deadline).
    pub compose_ms: f64,
    /// The arm of the A/B (`--compose-share`) a request keyhole could compose for was in;
    /// `None` for one it could not (in neither arm).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub arm: Option<Arm>,
    /// The repository composed in (`--repo`), where the request was in an arm.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub repo: Option<String>,
}

impl Composition {
    /// Whether keyhole's prompt went to the server.
    pub fn composed(&self) -> bool {
        self.forwarded_because.is_none()
    }

    /// The plugin's request went as sent, for `why`.
    pub fn forwarded(why: impl Into<String>, compose_ms: f64) -> Composition {
        Composition {
            forwarded_because: Some(why.into()),
            compose_ms,
            ..Composition::default()
        }
    }

    /// keyhole's prompt, `sent`, went with `chosen`'s context.
    pub fn sent_instead(chosen: Chosen, sent: Sent, compose_ms: f64) -> Composition {
        Composition {
            sent: Some(sent),
            ..Composition::chose(chosen, Arm::Keyhole, compose_ms)
        }
    }

    /// The plugin's request went as sent, in the plugin's arm of the A/B, for a hole keyhole
    /// chose `chosen` for (kept, unsent, so the arms are told apart by the prompt alone).
    pub fn plugins_arm(chosen: Chosen, compose_ms: f64) -> Composition {
        Composition {
            forwarded_because: Some("the plugin's arm of the A/B (--compose-share)".into()),
            ..Composition::chose(chosen, Arm::Plugin, compose_ms)
        }
    }

    /// What keyhole chose for a request in `arm`: the candidate, the hole and the pin.
    fn chose(chosen: Chosen, arm: Arm, compose_ms: f64) -> Composition {
        Composition {
            candidate: Some(chosen.candidate),
            label: Some(chosen.label),
            hole: Some(chosen.hole),
            context_tokens: Some(chosen.tokens),
            pinned: chosen.pinned,
            compose_ms,
            arm: Some(arm),
            ..Composition::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::read_request;

    fn chosen() -> Chosen {
        Chosen {
            candidate: 3,
            label: "import".into(),
            hole: "src/a.py:2:5".into(),
            chunks: vec![ExtraChunk {
                filename: "src/b.py".into(),
                text: "B = 1".into(),
            }],
            tokens: 3,
            pinned: None,
        }
    }

    #[test]
    fn each_shape_takes_the_context_where_its_format_has_room_and_keeps_the_rest() {
        let infill = br#"{"input_prefix":"def f(","prompt":"","input_suffix":")\n","input_extra":[{"filename":"x","text":"ring"}],"n_predict":8}"#;
        let sent = read_request(infill, false);
        let shape = fim_shape(&sent).unwrap();
        let out = read_request(&rewrite(infill, shape, &chosen()).unwrap(), false);
        assert_eq!(out.extra, chosen().chunks);
        assert_eq!((out.prefix, out.suffix), (sent.prefix, sent.suffix));
        assert_eq!(out.parameters, sent.parameters);

        let suffixed = br#"{"model":"m","prompt":"def f(","suffix":")\n"}"#;
        let shape = fim_shape(&read_request(suffixed, false)).unwrap();
        let out = read_request(&rewrite(suffixed, shape, &chosen()).unwrap(), false);
        assert_eq!(out.prompt.as_deref(), Some("B = 1\ndef f("));

        let template = br#"{"prompt":"<|fim_prefix|>def f(<|fim_suffix|>)\n<|fim_middle|>"}"#;
        let shape = fim_shape(&read_request(template, false)).unwrap();
        assert_eq!(shape, FimShape::Template { at: 14 });
        let out = read_request(&rewrite(template, shape, &chosen()).unwrap(), false);
        assert_eq!(
            out.prompt.as_deref(),
            Some("<|fim_prefix|>B = 1\ndef f(<|fim_suffix|>)\n<|fim_middle|>")
        );
    }

    #[test]
    fn requests_with_no_place_for_a_context_say_why() {
        let chat = read_request(br#"{"messages":[{"role":"user","content":"hi"}]}"#, false);
        let why = |sent| fim_shape(&sent).unwrap_err().to_string();
        assert!(why(chat).contains("chat"));
        let plain = read_request(br#"{"prompt":"def f("}"#, false);
        assert!(why(plain).contains("not a fill-in-the-middle"));
        let ring = read_request(br#"{"input_prefix":"","prompt":"","n_predict":0}"#, false);
        assert!(why(ring).contains("context-only"));
    }
}
