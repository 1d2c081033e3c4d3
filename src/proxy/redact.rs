//! The credentials a plugin may send where the proxy would record them: in the query string
//! (`?api_key=…`, `?key=…`, `&sig=…`), in a form body, and in any field of a JSON body however
//! deep (`options.api_key`, `auth`, `credentials`, `bearer`, `pwd`). They are found by name,
//! with the one list below, and replaced before anything is written.

use std::sync::LazyLock;

use regex::{Captures, Regex};
use serde_json::Value;

/// What stands where a credential was.
pub const REDACTED: &str = "[redacted]";

/// A name holds a credential where, lowercased and without `_`, `-` and `.`, it contains one
/// of these (`openai_api_key`, `client_secret`, `x-authorization`) ...
const CREDENTIAL_PARTS: [&str; 8] = [
    "apikey",
    "secret",
    "password",
    "passwd",
    "credential",
    "authorization",
    "bearer",
    "privatekey",
];
/// ... or ends with one of these (`key`, `access_token`, `oauth`, `pwd`, `sig`), which inside a
/// longer name may mean something else (`max_tokens`, `keep_alive`, `author`).
const CREDENTIAL_ENDINGS: [&str; 7] = ["key", "token", "auth", "pwd", "sig", "signature", "cookie"];

/// Whether a field or query parameter named `name` holds a credential.
pub fn names_a_credential(name: &str) -> bool {
    let name: String = name
        .chars()
        .filter(|c| !matches!(c, '_' | '-' | '.'))
        .flat_map(char::to_lowercase)
        .collect();
    CREDENTIAL_PARTS.iter().any(|part| name.contains(part))
        || CREDENTIAL_ENDINGS.iter().any(|end| name.ends_with(end))
}

/// `value` with every field that names a credential, at any depth, replaced by [`REDACTED`].
pub fn redact_json(value: &mut Value) {
    match value {
        Value::Object(fields) => {
            for (name, field) in fields.iter_mut() {
                match names_a_credential(name) {
                    true if !field.is_null() => *field = Value::from(REDACTED),
                    true => {}
                    false => redact_json(field),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(redact_json),
        _ => {}
    }
}

/// A path with its query's credentials redacted (`/v1/completions?key=…` →
/// `/v1/completions?key=[redacted]`); the rest as it came.
#[cfg(feature = "proxy")]
pub fn redact_query(path_and_query: &str) -> String {
    match path_and_query.split_once('?') {
        Some((path, query)) => format!("{path}?{}", redact_text(query)),
        None => path_and_query.to_string(),
    }
}

/// Text that may hold credentials but is not JSON one can read (a body cut short, a form, a
/// text body): `"name": "value"` pairs and `name=value` pairs whose names hold credentials get
/// their values redacted.
pub fn redact_text(text: &str) -> String {
    static JSON_PAIR: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r#""([^"\\]{1,64})"(\s*:\s*)"(?:[^"\\]|\\.)*"?"#).expect("a valid pattern")
    });
    static FORM_PAIR: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r#"([A-Za-z0-9_.%+-]{1,64})=([^&\s"\\]*)"#).expect("a valid pattern")
    });
    let json = JSON_PAIR.replace_all(text, |pair: &Captures<'_>| {
        match names_a_credential(&pair[1]) {
            true => format!("\"{}\"{}\"{REDACTED}\"", &pair[1], &pair[2]),
            false => pair[0].to_string(),
        }
    });
    FORM_PAIR
        .replace_all(&json, |pair: &Captures<'_>| {
            match names_a_credential(&decoded(&pair[1])) {
                true => format!("{}={REDACTED}", &pair[1]),
                false => pair[0].to_string(),
            }
        })
        .into_owned()
}

/// A query's name as its sender meant it (`api%5Fkey`, `api+key`).
fn decoded(name: &str) -> String {
    form_urlencoded::parse(name.trim().as_bytes())
        .next()
        .map_or_else(|| name.to_string(), |(name, _)| name.into_owned())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn credential_names_are_found_in_every_spelling_and_counts_are_not() {
        let credentials = [
            "api_key",
            "apiKey",
            "API-KEY",
            "x-api-key",
            "openai_api_key",
            "key",
            "token",
            "access_token",
            "auth",
            "oauth",
            "authorization",
            "credentials",
            "bearer",
            "password",
            "pwd",
            "secret",
            "client_secret",
            "sig",
            "signature",
        ];
        for name in credentials {
            assert!(names_a_credential(name), "{name}");
        }
        let parameters = [
            "max_tokens",
            "n_predict",
            "n_keep",
            "keep_alive",
            "author",
            "top_k",
            "stream",
            "tokenizer",
            "id_slot",
        ];
        for name in parameters {
            assert!(!names_a_credential(name), "{name}");
        }
    }

    #[test]
    fn json_credentials_are_redacted_at_any_depth() {
        let mut body = json!({
            "model": "m",
            "max_tokens": 8,
            "options": {"api_key": "sk-1", "temperature": 0.2},
            "auth": {"user": "me", "pass": "x"},
            "credentials": ["a", "b"],
            "bearer": "sk-2",
            "deep": [{"settings": {"pwd": "hunter2", "Token": "t"}}],
            "none": {"secret": null},
        });
        redact_json(&mut body);
        assert_eq!(
            body,
            json!({
                "model": "m",
                "max_tokens": 8,
                "options": {"api_key": REDACTED, "temperature": 0.2},
                "auth": REDACTED,
                "credentials": REDACTED,
                "bearer": REDACTED,
                "deep": [{"settings": {"pwd": REDACTED, "Token": REDACTED}}],
                "none": {"secret": null},
            })
        );
    }

    #[cfg(feature = "proxy")]
    #[test]
    fn query_credentials_are_redacted_and_the_rest_kept() {
        assert_eq!(
            redact_query(
                "/v1/completions?api_key=sk-1&stream=true&key=AIza&sig=abc&access_token=t&api%5Fkey=x"
            ),
            "/v1/completions?api_key=[redacted]&stream=true&key=[redacted]&sig=[redacted]&access_token=[redacted]&api%5Fkey=[redacted]"
        );
        assert_eq!(redact_query("/infill"), "/infill");
        assert_eq!(redact_query("/x?flag&token"), "/x?flag&token");
        assert_eq!(
            redact_text("prompt=a%3Db&password=p"),
            "prompt=a%3Db&password=[redacted]"
        );
    }
}
