//! OpenAI-compatible servers: `/v1/completions`, and `/v1/chat/completions` for chat-only
//! models, whose prompt goes into an instruction.

use async_trait::async_trait;
use serde_json::{Value, json};
use tiktoken_rs::tokenizer::{Tokenizer, get_tokenizer};

use super::transport::{Framing, Transport};
use super::{AnswerError, Piece, Protocol, insert_some};
use crate::model::config::{PROMPT_PLACEHOLDER, SUFFIX_PLACEHOLDER};
use crate::model::{BackendError, CompletionRequest, TokenCounting};

pub(super) struct OpenAi {
    model: String,
    chat: Option<Instruction>,
    /// The model's own tokenizer, where tiktoken knows the model.
    tokenizer: Option<Tokenizer>,
}

/// The messages a chat model gets instead of a bare prompt.
struct Instruction {
    system: String,
    user_template: String,
}

impl OpenAi {
    pub fn completions(model: String) -> Self {
        let tokenizer = get_tokenizer(&model);
        OpenAi {
            model,
            chat: None,
            tokenizer,
        }
    }

    pub fn chat(model: String, system: &str, user_template: &str) -> Self {
        let chat = Instruction {
            system: system.to_string(),
            user_template: user_template.to_string(),
        };
        OpenAi {
            chat: Some(chat),
            ..Self::completions(model)
        }
    }

    /// The completions of an answer or a streamed chunk.
    fn choices(&self, value: &Value, streamed: bool) -> Result<Vec<Piece>, AnswerError> {
        let choices = value
            .get("choices")
            .and_then(Value::as_array)
            .ok_or(AnswerError::Missing("choices"))?;
        choices
            .iter()
            .enumerate()
            .map(|(position, choice)| {
                let index = choice
                    .get("index")
                    .and_then(Value::as_u64)
                    .map_or(position, |i| i as usize);
                Ok(Piece {
                    index,
                    text: self.text(choice, streamed)?,
                })
            })
            .collect()
    }

    fn text(&self, choice: &Value, streamed: bool) -> Result<String, AnswerError> {
        if self.chat.is_none() {
            let text = choice
                .get("text")
                .and_then(Value::as_str)
                .ok_or(AnswerError::Missing("text"))?;
            return Ok(text.to_string());
        }
        // A chat chunk may carry only the role, and a refusal has null content: no text.
        let pointer = if streamed {
            "/delta/content"
        } else {
            "/message/content"
        };
        match choice.pointer(pointer) {
            None | Some(Value::Null) => Ok(String::new()),
            Some(Value::String(text)) => Ok(text.clone()),
            Some(_) => Err(AnswerError::NotText(pointer)),
        }
    }
}

impl Instruction {
    fn messages(&self, request: &CompletionRequest) -> Value {
        if request.instruction {
            return json!([{"role": "user", "content": request.prompt}]);
        }
        let user = self
            .user_template
            .replace(
                SUFFIX_PLACEHOLDER,
                request.suffix.as_deref().unwrap_or_default(),
            )
            .replace(PROMPT_PLACEHOLDER, &request.prompt);
        json!([
            {"role": "system", "content": self.system},
            {"role": "user", "content": user},
        ])
    }
}

#[async_trait]
impl Protocol for OpenAi {
    fn path(&self, _request: &CompletionRequest) -> &'static str {
        if self.chat.is_some() {
            "/v1/chat/completions"
        } else {
            "/v1/completions"
        }
    }

    fn body(&self, request: &CompletionRequest, stream: bool) -> Value {
        // A chat model tends to open with a code fence: a newline stop would end its answer
        // before the code. Its answer is cleaned first and cut at the stops here.
        let stop: &[String] = match &self.chat {
            Some(_) if !request.instruction => &[],
            _ => &request.stop,
        };
        let mut body = json!({
            "model": self.model,
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "stop": stop,
            "n": request.n,
            "stream": stream,
        });
        match &self.chat {
            Some(chat) => body["messages"] = chat.messages(request),
            None => {
                body["prompt"] = json!(request.prompt);
                insert_some(&mut body, "suffix", request.suffix.as_deref());
            }
        }
        insert_some(&mut body, "seed", request.seed);
        body
    }

    fn framing(&self) -> Framing {
        Framing::Sse
    }

    fn follows_instructions(&self) -> bool {
        self.chat.is_some()
    }

    fn answer(&self, answer: &Value) -> Result<Vec<Piece>, AnswerError> {
        self.choices(answer, false)
    }

    /// Only `data: [DONE]` ends an OpenAI stream.
    fn event(&self, event: &Value) -> Result<(Vec<Piece>, bool), AnswerError> {
        Ok((self.choices(event, true)?, false))
    }

    fn clean(&self, text: String, request: &CompletionRequest) -> String {
        match self.chat {
            Some(_) if !request.instruction => chat_code(&text, &request.prompt),
            _ => text,
        }
    }

    fn counting(&self) -> TokenCounting {
        match self.tokenizer {
            Some(_) => TokenCounting::Exact,
            None => TokenCounting::Approximate,
        }
    }

    async fn count_tokens(
        &self,
        _transport: &Transport,
        text: &str,
    ) -> Option<Result<usize, BackendError>> {
        let bpe = tiktoken_rs::bpe_for_tokenizer(self.tokenizer?).ok()?;
        Some(Ok(bpe.count_ordinary(text)))
    }
}

/// The code a chat model's answer holds: the inside of its first fenced block (the whole
/// answer when it has none), without the part of the hole's line it restated.
fn chat_code(answer: &str, prompt: &str) -> String {
    let code = match answer.find("```") {
        Some(open) => {
            let after = &answer[open + 3..];
            // The info string (```java) runs to the end of the fence's line.
            let body = after.find('\n').map_or("", |i| &after[i + 1..]);
            body.find("```").map_or(body, |close| &body[..close])
        }
        None => answer,
    };
    let typed = prompt.rsplit('\n').next().unwrap_or_default().trim_start();
    let restated = code.trim_start();
    match restated.strip_prefix(typed) {
        Some(rest) if !typed.is_empty() => rest.to_string(),
        _ => code.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::chat_code;

    #[test]
    fn chat_answers_become_the_code_that_follows_the_prompt() {
        let prompt = "class A {\n    int total = ";
        assert_eq!(
            chat_code("```java\nint total = a + b;\n```", prompt),
            "a + b;\n"
        );
        assert_eq!(chat_code("Here:\n```\na + b;```", prompt), "a + b;");
        assert_eq!(chat_code("a + b;", prompt), "a + b;");
        assert_eq!(chat_code("    int total = 3;", prompt), "3;");
        // Nothing typed on the hole's line: nothing to take off.
        assert_eq!(chat_code("return 1;", "class A {\n"), "return 1;");
    }
}
