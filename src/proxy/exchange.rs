//! What one exchange between an editor plugin and its model server says: the prompt pieces
//! the plugin sent (read from the request body as each endpoint names them) and the text the
//! server answered (read from a JSON, server-sent-events or NDJSON body).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::redact::{redact_json, redact_text};

/// A chunk of another file a plugin sends with an infill request (llama.cpp's `input_extra`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtraChunk {
    pub filename: String,
    pub text: String,
}

/// One chat message.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub role: String,
    pub content: String,
}

/// What a plugin sent, as the endpoint names it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Sent {
    /// The text before the cursor where the endpoint sends it apart (`/infill`'s
    /// `input_prefix`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub prefix: Option<String>,
    /// `prompt`: the whole prompt, or (`/infill`) the text between the prefix and the cursor.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub prompt: Option<String>,
    /// The text after the cursor (`suffix`, `input_suffix`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub suffix: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub extra: Vec<ExtraChunk>,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub messages: Vec<Message>,
    /// Every other field of the request (model, temperature, n_predict, stream, ...), those
    /// whose names say they hold a credential, at any depth, redacted.
    #[serde(skip_serializing_if = "Map::is_empty", default)]
    pub parameters: Map<String, Value>,
    /// The body itself where no fields could be read from it (not a JSON object, or cut):
    /// its bytes escaped (controls and bytes that are not UTF-8 written as escapes), its
    /// credentials redacted.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub body: Option<String>,
}

impl Sent {
    /// Whether the request carried any text to complete (not a `/health` or `/v1/models`).
    pub fn has_text(&self) -> bool {
        self.prefix.is_some()
            || self.prompt.is_some()
            || self.suffix.is_some()
            || !self.messages.is_empty()
    }
}

impl Sent {
    /// Whether the request only hands the server context to keep (llama.vim's ring updates:
    /// `n_predict: 0`, empty texts) and asks for no completion: no hole to open.
    pub fn context_only(&self) -> bool {
        let asks_for_none = ["n_predict", "max_tokens", "num_predict"]
            .iter()
            .any(|name| self.parameters.get(*name).and_then(Value::as_i64) == Some(0));
        let empty = |text: &Option<String>| text.as_deref().unwrap_or_default().is_empty();
        let no_text = empty(&self.prefix)
            && empty(&self.prompt)
            && empty(&self.suffix)
            && self.messages.is_empty();
        self.has_text() && (asks_for_none || no_text)
    }
}

/// The fields each endpoint's text travels in; everything else is a parameter.
const TEXT_FIELDS: [&str; 7] = [
    "prompt",
    "suffix",
    "input_prefix",
    "input_suffix",
    "input_extra",
    "messages",
    "content",
];

/// Read a request body: JSON from any of the endpoints plugins use (OpenAI completions and
/// chat, llama.cpp `/completion`, `/infill`, `/tokenize`, Ollama `/api/generate` and
/// `/api/chat`). A body that is not a JSON object, or only the start of one (`cut`), sends
/// no text: it is kept as [`Sent::body`].
pub fn read_request(body: &[u8], cut: bool) -> Sent {
    let fields = match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(fields)) if !cut => fields,
        _ if body.is_empty() => return Sent::default(),
        _ => {
            return Sent {
                body: Some(redact_text(&crate::escape::bytes(body))),
                ..Sent::default()
            };
        }
    };
    let text = |name: &str| fields.get(name).and_then(text_of);
    let mut sent = Sent {
        prefix: text("input_prefix"),
        // `/tokenize` sends its text as `content`.
        prompt: text("prompt").or_else(|| text("content")),
        suffix: text("suffix").or_else(|| text("input_suffix")),
        ..Sent::default()
    };
    if let Some(Value::Array(chunks)) = fields.get("input_extra") {
        sent.extra = chunks
            .iter()
            .map(|c| ExtraChunk {
                filename: c.get("filename").and_then(text_of).unwrap_or_default(),
                text: c.get("text").and_then(text_of).unwrap_or_default(),
            })
            .collect();
    }
    if let Some(Value::Array(messages)) = fields.get("messages") {
        sent.messages = messages
            .iter()
            .map(|m| Message {
                role: m.get("role").and_then(text_of).unwrap_or_default(),
                content: m.get("content").and_then(text_of).unwrap_or_default(),
            })
            .collect();
    }
    let mut parameters = Value::Object(
        fields
            .into_iter()
            .filter(|(name, _)| !TEXT_FIELDS.contains(&name.as_str()))
            .collect(),
    );
    redact_json(&mut parameters);
    if let Value::Object(parameters) = parameters {
        sent.parameters = parameters;
    }
    sent
}

/// Text as a request carries it: a string, a list of strings (OpenAI's batched prompt, the
/// first one), or chat content parts (`[{"type": "text", "text": ...}]`, joined).
fn text_of(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Array(items) if items.iter().all(Value::is_string) => {
            items.first().and_then(Value::as_str).map(str::to_string)
        }
        Value::Array(parts) => {
            let texts: Vec<&str> = parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect();
            (!texts.is_empty()).then(|| texts.concat())
        }
        _ => None,
    }
}

/// What the server answered: the completion text and the token counts it reported.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answered {
    pub text: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub prompt_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub answer_tokens: Option<u64>,
}

/// Read an answer body of the given content type: one JSON object, server-sent events
/// (`data: {...}` lines, `[DONE]` at the end) or NDJSON (Ollama's streams, also when labelled
/// JSON).
pub fn read_answer(content_type: &str, body: &[u8]) -> Answered {
    let body = String::from_utf8_lossy(body);
    let mut answered = Answered::default();
    let objects: Vec<Value> = if content_type.starts_with("text/event-stream") {
        body.lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .filter_map(|data| serde_json::from_str(data.trim()).ok())
            .collect()
    } else {
        // One JSON object; else a stream of them, one a line (NDJSON, whatever the label says:
        // a server may call its stream JSON).
        match serde_json::from_str(&body) {
            Ok(object) if !content_type.contains("ndjson") => vec![object],
            _ => body
                .lines()
                .filter_map(|line| serde_json::from_str(line).ok())
                .collect(),
        }
    };
    for object in &objects {
        answered.text.push_str(&answer_text(object));
        let count = |path: &[&str]| -> Option<u64> {
            path.iter()
                .try_fold(object, |v, key| v.get(key))
                .and_then(Value::as_u64)
        };
        let prompt = count(&["usage", "prompt_tokens"])
            .or_else(|| count(&["tokens_evaluated"]))
            .or_else(|| count(&["prompt_eval_count"]));
        let answer = count(&["usage", "completion_tokens"])
            .or_else(|| count(&["tokens_predicted"]))
            .or_else(|| count(&["eval_count"]));
        answered.prompt_tokens = prompt.or(answered.prompt_tokens);
        answered.answer_tokens = answer.or(answered.answer_tokens);
    }
    answered
}

/// The completion text in one answer object (or one streamed piece of it), whichever API
/// wrote it.
fn answer_text(object: &Value) -> String {
    let choice = object.get("choices").and_then(|c| c.get(0));
    let candidates = [
        choice.and_then(|c| c.get("text")),
        choice.and_then(|c| c.pointer("/message/content")),
        choice.and_then(|c| c.pointer("/delta/content")),
        object.get("content"),
        object.get("response"),
        object.pointer("/message/content"),
    ];
    candidates
        .into_iter()
        .flatten()
        .find_map(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::redact::REDACTED;

    #[test]
    fn an_infill_request_reads_prefix_middle_suffix_and_extra_chunks() {
        let body = br#"{"input_prefix":"def f():\n","prompt":"    ret","input_suffix":"\n",
            "input_extra":[{"filename":"a.py","text":"X = 1\n"}],"n_predict":64,
            "api_key":"sk-secret","stream":true}"#;
        let sent = read_request(body, false);
        assert_eq!(sent.prefix.as_deref(), Some("def f():\n"));
        assert_eq!(sent.prompt.as_deref(), Some("    ret"));
        assert_eq!(sent.suffix.as_deref(), Some("\n"));
        assert_eq!(sent.extra[0].filename, "a.py");
        assert_eq!(sent.parameters["n_predict"], 64);
        assert_eq!(
            sent.parameters["api_key"], REDACTED,
            "credentials are never recorded"
        );
        assert!(sent.has_text());
    }

    #[test]
    fn context_only_requests_are_told_from_completion_requests() {
        // llama.vim's ring update, and the same with a text but nothing to predict.
        let ring = br#"{"input_prefix":"","input_suffix":"","prompt":"","n_predict":0,
            "input_extra":[{"filename":"a.py","text":"X = 1\n"}]}"#;
        assert!(read_request(ring, false).context_only());
        let cache = br#"{"prompt":"def f(","n_predict":0}"#;
        assert!(read_request(cache, false).context_only());
        let empty = br#"{"input_prefix":"","input_suffix":"","prompt":""}"#;
        assert!(read_request(empty, false).context_only());
        let asks = br#"{"input_prefix":"def f(","input_suffix":"","prompt":"","n_predict":64}"#;
        assert!(!read_request(asks, false).context_only());
        assert!(!read_request(b"", false).context_only());
    }

    #[test]
    fn chat_requests_read_messages_and_content_parts() {
        let body = br#"{"model":"m","max_tokens":8,"messages":[{"role":"system","content":"be brief"},
            {"role":"user","content":[{"type":"text","text":"complete "},{"type":"text","text":"this"}]}]}"#;
        let sent = read_request(body, false);
        assert_eq!(sent.messages[1].content, "complete this");
        assert_eq!(sent.parameters["max_tokens"], 8);
        assert!(!read_request(b"not json", false).has_text());
    }

    #[test]
    fn answers_read_from_json_event_streams_and_ndjson() {
        let json =
            br#"{"choices":[{"text":"x + 1"}],"usage":{"prompt_tokens":12,"completion_tokens":3}}"#;
        let answered = read_answer("application/json", json);
        assert_eq!(answered.text, "x + 1");
        assert_eq!(
            (answered.prompt_tokens, answered.answer_tokens),
            (Some(12), Some(3))
        );
        let sse = b"data: {\"content\":\"re\"}\n\ndata: {\"content\":\"turn\",\"tokens_predicted\":2}\n\ndata: [DONE]\n\n";
        assert_eq!(read_answer("text/event-stream", sse).text, "return");
        let chat_sse = b"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\n\n";
        assert_eq!(read_answer("text/event-stream", chat_sse).text, "ab");
        let ndjson =
            b"{\"response\":\"fo\"}\n{\"response\":\"o\",\"done\":true,\"eval_count\":2}\n";
        let answered = read_answer("application/x-ndjson", ndjson);
        assert_eq!(
            (answered.text.as_str(), answered.answer_tokens),
            ("foo", Some(2))
        );
    }
}
