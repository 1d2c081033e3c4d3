//! llama.cpp's native server: `/completion`, `/infill` for fill-in-the-middle, and
//! `/tokenize`, which makes its token counts exact.

use async_trait::async_trait;
use serde_json::{Value, json};

use super::transport::{Framing, Transport};
use super::{AnswerError, Piece, Protocol, insert_some, single_text};
use crate::model::{BackendError, CompletionRequest, ServerLimits, TokenCounting};

pub(super) struct LlamaCpp;

#[async_trait]
impl Protocol for LlamaCpp {
    fn path(&self, request: &CompletionRequest) -> &'static str {
        if request.suffix.is_some() {
            "/infill"
        } else {
            "/completion"
        }
    }

    fn body(&self, request: &CompletionRequest, stream: bool) -> Value {
        let mut body = json!({
            "n_predict": request.max_tokens,
            "temperature": request.temperature,
            "stop": request.stop,
            "stream": stream,
        });
        match &request.suffix {
            // The composed prompt already holds the repository context, so it all goes before
            // the hole rather than into input_extra.
            Some(suffix) => {
                body["input_prefix"] = json!(request.prompt);
                body["input_suffix"] = json!(suffix);
            }
            None => body["prompt"] = json!(request.prompt),
        }
        insert_some(&mut body, "seed", request.seed);
        body
    }

    fn framing(&self) -> Framing {
        Framing::Sse
    }

    fn answer(&self, answer: &Value) -> Result<Vec<Piece>, AnswerError> {
        single_text(answer, "content")
    }

    fn event(&self, event: &Value) -> Result<(Vec<Piece>, bool), AnswerError> {
        let done = event.get("stop").and_then(Value::as_bool).unwrap_or(false);
        Ok((single_text(event, "content")?, done))
    }

    fn counting(&self) -> TokenCounting {
        TokenCounting::Exact
    }

    async fn limits(&self, transport: &Transport) -> Option<Result<ServerLimits, BackendError>> {
        let endpoint = transport.endpoint("/props");
        let limits = endpoint.get_json().await.and_then(|props| {
            let number = |value: Option<&Value>| value.and_then(Value::as_u64).map(|n| n as usize);
            let slots = number(props.get("total_slots"));
            let settings = props.get("default_generation_settings");
            let context = number(settings.and_then(|s| s.get("n_ctx")));
            match (slots, context) {
                (Some(slots), Some(context_per_slot)) => Ok(ServerLimits {
                    slots: slots.max(1),
                    context_per_slot,
                }),
                _ => Err(endpoint.malformed(AnswerError::Missing(
                    "total_slots` or `default_generation_settings.n_ctx",
                ))),
            }
        });
        Some(limits)
    }

    async fn count_tokens(
        &self,
        transport: &Transport,
        text: &str,
    ) -> Option<Result<usize, BackendError>> {
        let endpoint = transport.endpoint("/tokenize");
        let count = endpoint
            .json(&json!({ "content": text }))
            .await
            .and_then(|answer| {
                let tokens = answer.get("tokens").and_then(Value::as_array);
                tokens
                    .map(Vec::len)
                    .ok_or_else(|| endpoint.malformed(AnswerError::Missing("tokens")))
            });
        Some(count)
    }
}
