//! `backends.toml`: loading, defaults, and errors that name the file, line and key.

use keyhole::{
    BackendConfig, BackendKind, ConfigError, testing::model::config::BACKENDS_FILE,
    testing::model::config::load_backends,
};

/// Writes `text` as a backends file and loads it.
fn load(text: &str) -> (tempfile::TempDir, Result<Vec<BackendConfig>, ConfigError>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(BACKENDS_FILE);
    std::fs::write(&path, text).unwrap();
    let loaded = load_backends(&path);
    (dir, loaded)
}

/// The (line, key) of a load error, checking that its message names the file, line and key.
fn error_at(text: &str) -> (usize, Option<String>) {
    let (_dir, loaded) = load(text);
    let error = loaded.unwrap_err();
    let ConfigError::Invalid {
        path, line, key, ..
    } = &error
    else {
        panic!("{error:?}")
    };
    let message = error.to_string();
    assert!(
        message.starts_with(&format!("{}, line {line}", path.display())),
        "{message}"
    );
    if let Some(key) = key {
        assert!(message.contains(&format!("key `{key}`")), "{message}");
    }
    (*line, key.clone())
}

const FULL: &str = r#"
[[backend]]
name = "vllm"
kind = "openai"
base_url = "http://localhost:8000"
model = "Qwen/Qwen2.5-Coder-7B"
api_key_env = "VLLM_KEY"
temperature = 0.2
max_tokens = 48
stop = ["\n\n"]
deadline_secs = 20
concurrency = 8
retries = 5

[[backend]]
name = "llama"
kind = "llamacpp"
base_url = "http://localhost:8080"

[[backend]]
name = "llama-v1"
kind = "openai"
base_url = "http://localhost:8080"
model = "any"
supports_n = false

[[backend]]
name = "chat"
kind = "openai_chat"
base_url = "https://api.example.com"
model = "gpt-4o-mini"
user_template = "Finish this:\n{prompt}"

[[backend]]
name = "ollama"
kind = "ollama"
base_url = "http://localhost:11434"
model = "qwen2.5-coder"
"#;

#[test]
fn a_full_file_loads_after_the_embedded_backend() {
    let (_dir, loaded) = load(FULL);
    let backends = loaded.unwrap();
    let names: Vec<&str> = backends.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(
        names,
        ["embedded", "vllm", "llama", "llama-v1", "chat", "ollama"]
    );
    assert_eq!(backends[0], BackendConfig::embedded());

    let vllm = &backends[1];
    assert_eq!(vllm.kind, BackendKind::OpenAi);
    assert_eq!(vllm.api_key_env.as_deref(), Some("VLLM_KEY"));
    assert_eq!((vllm.temperature, vllm.max_tokens), (Some(0.2), Some(48)));
    assert_eq!(vllm.stop, Some(vec!["\n\n".to_string()]));
    assert_eq!(
        (vllm.deadline_secs, vllm.concurrency, vllm.retries),
        (20, 8, 5)
    );

    let llama = &backends[2];
    assert_eq!(
        (llama.kind, llama.model.as_deref()),
        (BackendKind::LlamaCpp, None)
    );
    assert_eq!(
        (llama.deadline_secs, llama.concurrency, llama.retries),
        (60, 4, 3),
        "defaults"
    );

    let supports_n: Vec<bool> = backends[1..]
        .iter()
        .map(BackendConfig::supports_n)
        .collect();
    assert_eq!(supports_n, [true, false, false, true, false]);
    assert_eq!(
        backends[4].user_template.as_deref(),
        Some("Finish this:\n{prompt}")
    );
}

#[test]
fn a_missing_file_leaves_only_the_embedded_backend() {
    let dir = tempfile::tempdir().unwrap();
    let backends = load_backends(&dir.path().join(BACKENDS_FILE)).unwrap();
    assert_eq!(backends, [BackendConfig::embedded()]);
}

#[test]
fn unknown_kinds_name_line_and_key() {
    let text = "[[backend]]\nname = \"x\"\nkind = \"gpt\"\nbase_url = \"http://h\"\n";
    assert_eq!(error_at(text), (3, Some("kind".to_string())));
}

#[test]
fn wrong_types_name_line_and_key() {
    let text = "[[backend]]\nname = \"x\"\nkind = \"ollama\"\nmodel = \"m\"\nbase_url = \"http://h\"\ntemperature = \"hot\"\n";
    assert_eq!(error_at(text), (6, Some("temperature".to_string())));
}

#[test]
fn unknown_keys_are_named() {
    let text = "[[backend]]\nname = \"x\"\nkind = \"llamacpp\"\nbase_url = \"http://h\"\napi_key = \"sk-1\"\n";
    assert_eq!(error_at(text), (5, Some("api_key".to_string())));
}

#[test]
fn syntax_errors_name_the_line() {
    let (line, _) = error_at("[[backend]]\nname = \"x\"\nkind = \n");
    assert_eq!(line, 3);
}

#[test]
fn missing_and_invalid_settings_name_the_key() {
    let entry =
        |rest: &str| format!("# backends\n\n[[backend]]\nname = \"x\"\nkind = \"openai\"\n{rest}");
    assert_eq!(
        error_at(&entry("model = \"m\"\n")).1.as_deref(),
        Some("base_url")
    );
    assert_eq!(
        error_at(&entry("base_url = \"http://h\"\n")).1.as_deref(),
        Some("model")
    );
    assert_eq!(
        error_at(&entry("model = \"m\"\nbase_url = \"ftp://h\"\n")),
        (7, Some("base_url".to_string()))
    );
    let zero = entry("model = \"m\"\nbase_url = \"http://h\"\nconcurrency = 0\n");
    assert_eq!(error_at(&zero), (8, Some("concurrency".to_string())));
    let template =
        entry("model = \"m\"\nbase_url = \"http://h\"\nuser_template = \"no placeholder\"\n");
    assert_eq!(error_at(&template).1.as_deref(), Some("user_template"));
}

#[test]
fn names_are_unique_and_embedded_is_reserved() {
    let entry = |name: &str| {
        format!("[[backend]]\nname = \"{name}\"\nkind = \"llamacpp\"\nbase_url = \"http://h\"\n")
    };
    let twice = entry("a") + &entry("a");
    assert_eq!(error_at(&twice), (6, Some("name".to_string())));
    assert_eq!(error_at(&entry("embedded")), (2, Some("name".to_string())));
}

#[test]
fn keyhole_reads_backends_from_the_config_dir_the_environment_names() {
    let scratch = tempfile::tempdir().unwrap();
    let entry = "[[backend]]\nname = \"from-env-dir\"\nkind = \"llamacpp\"\nbase_url = \"http://127.0.0.1:9\"\n";
    crate::reliability_support::write_backends(scratch.path(), entry);
    let output = crate::reliability_support::keyhole(scratch.path(), &["backends"], &[]);
    let listed = String::from_utf8_lossy(&output.stdout);
    assert!(listed.contains("from-env-dir"), "{listed}");
}
