//! Ollama's `/api/generate`, streaming newline-delimited JSON.

use serde_json::{Value, json};

use super::transport::Framing;
use super::{AnswerError, Piece, Protocol, insert_some, single_text};
use crate::model::CompletionRequest;

pub(super) struct Ollama {
    model: String,
}

impl Ollama {
    pub fn new(model: String) -> Self {
        Ollama { model }
    }
}

impl Protocol for Ollama {
    fn models_path(&self) -> &'static str {
        "/api/tags"
    }

    fn model_names(&self, answer: &Value) -> Vec<String> {
        super::names_at(answer, "models", "name")
    }

    fn path(&self, _request: &CompletionRequest) -> &'static str {
        "/api/generate"
    }

    fn body(&self, request: &CompletionRequest, stream: bool) -> Value {
        let mut options = json!({
            "temperature": request.temperature,
            "num_predict": request.max_tokens,
            "stop": request.stop,
        });
        insert_some(&mut options, "seed", request.seed);
        let mut body = json!({
            "model": self.model,
            "prompt": request.prompt,
            // Ollama fills in the middle through the model's template, which raw mode skips.
            "raw": request.suffix.is_none(),
            "stream": stream,
            "options": options,
        });
        insert_some(&mut body, "suffix", request.suffix.as_deref());
        body
    }

    fn framing(&self) -> Framing {
        Framing::Ndjson
    }

    fn answer(&self, answer: &Value) -> Result<Vec<Piece>, AnswerError> {
        single_text(answer, "response")
    }

    fn event(&self, event: &Value) -> Result<(Vec<Piece>, bool), AnswerError> {
        let done = event.get("done").and_then(Value::as_bool).unwrap_or(false);
        Ok((single_text(event, "response")?, done))
    }
}
