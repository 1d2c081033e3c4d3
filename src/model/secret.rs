//! Secrets kept off the screen and out of files: an API key in whatever form a server (or a
//! model) sends it back, and credentials and query strings in URLs.

/// What a key is replaced with.
pub const REDACTED: &str = "[redacted]";
/// What a URL's user info and query are replaced with.
#[cfg(feature = "http")]
const MASK: &str = "***";
/// A key cut off by the end of a text is replaced from this many characters on; shorter
/// pieces say too little to matter (and would mask ordinary words).
const MIN_FRAGMENT: usize = 8;

/// `text` with every form of `key` replaced by [`REDACTED`]: as written, with its letters in
/// any case, percent-encoded with either case of hex digits, or any mix of these; a key that
/// the end of `text` cuts off is replaced too.
pub fn redact_key(text: &str, key: &str) -> String {
    let (text_bytes, key) = (text.as_bytes(), key.as_bytes());
    if key.is_empty() {
        return text.to_string();
    }
    let mut out = Vec::with_capacity(text.len());
    let mut at = 0;
    while at < text_bytes.len() {
        let found = match key_at(text_bytes, at, key) {
            Some(Match::Whole(len)) => Some(len),
            Some(Match::CutOff { len, of_key }) if of_key >= MIN_FRAGMENT.min(key.len()) => {
                Some(len)
            }
            _ => None,
        };
        match found {
            Some(len) => {
                out.extend_from_slice(REDACTED.as_bytes());
                at += len;
            }
            None => {
                out.push(text_bytes[at]);
                at += 1;
            }
        }
    }
    // Only ASCII was taken out, but a cut-off key may end inside a character of its own.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// How much of `text` can be shown before more text arrives: all of it but a tail that could
/// be the start of `key`, which more text might complete.
pub fn settled_len(text: &str, key: &str) -> usize {
    let (bytes, key) = (text.as_bytes(), key.as_bytes());
    if key.is_empty() {
        return text.len();
    }
    let mut at = 0;
    while at < bytes.len() {
        match key_at(bytes, at, key) {
            Some(Match::Whole(len)) => at += len,
            Some(Match::CutOff { .. }) => break,
            None => at += 1,
        }
    }
    // A key is ASCII in the text up to a cut, but the cut may be inside a character.
    (0..=at)
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0)
}

/// A form of the key found in a text.
enum Match {
    /// The whole key, in this many bytes of text.
    Whole(usize),
    /// The text ends after `len` bytes, the first `of_key` bytes of the key.
    CutOff { len: usize, of_key: usize },
}

/// Whether a form of `key` starts at byte `at` of `text`.
fn key_at(text: &[u8], at: usize, key: &[u8]) -> Option<Match> {
    let mut i = at;
    for (matched, &want) in key.iter().enumerate() {
        if i == text.len() {
            return Some(Match::CutOff {
                len: i - at,
                of_key: matched,
            });
        }
        let same = |b: u8| b.eq_ignore_ascii_case(&want);
        match percent_decoded(text, i) {
            Some(b) if same(b) => i += 3,
            _ if same(text[i]) => i += 1,
            _ => return None,
        }
    }
    Some(Match::Whole(i - at))
}

/// The byte a percent escape at `i` stands for.
fn percent_decoded(text: &[u8], i: usize) -> Option<u8> {
    let escape = text.get(i..i + 3)?;
    if escape[0] != b'%' {
        return None;
    }
    let hex = std::str::from_utf8(&escape[1..]).ok()?;
    u8::from_str_radix(hex, 16).ok()
}

/// Secrets a URL carries, as [`redact_key`] looks for them: its user name and password and
/// the values of its query and fragment, percent-decoded. Values shorter than
/// [`MIN_URL_SECRET`] are left out: they say too little to matter (`?v=1`), and masking them
/// would mask ordinary words and numbers.
#[cfg(feature = "http")]
pub fn url_secrets(url: &url::Url) -> Vec<String> {
    use base64::Engine;
    let mut secrets = Vec::new();
    let user = percent_decode(url.username());
    let password = url.password().map(percent_decode);
    if !user.is_empty() || password.is_some() {
        // The Authorization header reqwest makes of them, which a server may echo.
        let credentials = format!("{user}:{}", password.as_deref().unwrap_or_default());
        secrets.push(base64::engine::general_purpose::STANDARD.encode(credentials));
    }
    secrets.push(user);
    secrets.extend(password);
    secrets.extend(url.query_pairs().map(|(_, value)| value.into_owned()));
    secrets.extend(url.fragment().map(percent_decode));
    secrets.retain(|s| s.chars().count() >= MIN_URL_SECRET);
    // Longest first: a secret inside another must not break the longer one's match.
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    secrets.dedup();
    secrets
}

/// `text` with its percent escapes decoded (as a URL's user info holds its text).
#[cfg(feature = "http")]
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match percent_decoded(bytes, i) {
            Some(b) => {
                decoded.push(b);
                i += 3;
            }
            None => {
                decoded.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&decoded).into_owned()
}

/// The shortest user name, password or query value [`url_secrets`] redacts.
pub const MIN_URL_SECRET: usize = 4;

/// `text` with every one of `secrets` redacted, in any form [`redact_key`] finds.
pub fn redact_all(text: &str, secrets: &[String]) -> String {
    secrets
        .iter()
        .fold(text.to_string(), |text, secret| redact_key(&text, secret))
}

/// `url` as it may be shown: user info (`user:password@`), query and fragment replaced by
/// `***`, since they often carry credentials. Text that is not a URL is not shown at all.
#[cfg(feature = "http")]
pub fn shown_url(url: &str) -> String {
    let Ok(mut parsed) = url::Url::parse(url) else {
        return "(not a valid URL)".to_string();
    };
    let has_user = !parsed.username().is_empty() || parsed.password().is_some();
    let has_query = parsed.query().is_some() || parsed.fragment().is_some();
    // Fails only for URLs that cannot have user info, which then have none to strip.
    let _ = parsed.set_username("");
    let _ = parsed.set_password(None);
    parsed.set_query(None);
    parsed.set_fragment(None);
    let mut shown = parsed.to_string();
    if has_user && let Some(after_scheme) = shown.find("://").map(|i| i + 3) {
        shown.insert_str(after_scheme, &format!("{MASK}@"));
    }
    if has_query {
        shown.push('?');
        shown.push_str(MASK);
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "sk-Ab/9+xY=z_kq";

    #[test]
    fn every_form_of_the_key_is_redacted() {
        let encoded_upper = "sk-Ab%2F9%2BxY%3Dz_kq";
        let encoded_lower = "sk-Ab%2f9%2bxY%3dz_kq";
        let every_byte: String = KEY.bytes().map(|b| format!("%{b:02x}")).collect();
        for form in [
            KEY.to_string(),
            KEY.to_lowercase(),
            KEY.to_uppercase(),
            encoded_upper.to_string(),
            encoded_lower.to_string(),
            encoded_upper.to_lowercase(),
            every_byte,
        ] {
            let text = format!("bad key «{form}» here");
            assert_eq!(
                redact_key(&text, KEY),
                "bad key «[redacted]» here",
                "{form}"
            );
        }
    }

    #[test]
    fn a_key_cut_off_at_the_end_is_redacted_from_eight_characters_on() {
        assert_eq!(redact_key("key: sk-Ab/9+x", KEY), "key: [redacted]");
        assert_eq!(redact_key("key: sk-Ab", KEY), "key: sk-Ab");
        assert_eq!(redact_key("no key", KEY), "no key");
        assert_eq!(redact_key("", KEY), "");
        assert_eq!(redact_key("%", KEY), "%");
    }

    #[test]
    fn only_a_tail_that_may_become_the_key_waits() {
        assert_eq!(settled_len("x = 1; sk-A", KEY), "x = 1; ".len());
        assert_eq!(settled_len("x = 1; sk-Q", KEY), "x = 1; sk-Q".len());
        let whole = format!("{KEY} and s");
        assert_eq!(settled_len(&whole, KEY), whole.len() - 1);
        assert_eq!(settled_len("é", KEY), "é".len());
    }

    #[cfg(feature = "http")]
    #[test]
    fn a_urls_user_info_and_query_values_are_redacted_from_texts() {
        let url = url::Url::parse(
            "https://alice:p%40ss-w0rd@example.com/v1?api-key=q-s3cret-42&v=1#tok-9876",
        )
        .unwrap();
        let secrets = url_secrets(&url);
        let echoed = "no access for alice (p@ss-w0rd) with api-key=Q-S3CRET-42, v=1, tok-9876";
        assert_eq!(
            redact_all(echoed, &secrets),
            "no access for [redacted] ([redacted]) with api-key=[redacted], v=1, [redacted]"
        );
    }

    #[cfg(feature = "http")]
    #[test]
    fn urls_are_shown_without_credentials_or_queries() {
        assert_eq!(
            shown_url("https://user:hunter2@example.com:8443/v1?token=s3cret#x"),
            "https://***@example.com:8443/v1?***"
        );
        assert_eq!(shown_url("http://localhost:8080"), "http://localhost:8080/");
        assert_eq!(shown_url("not a url hunter2"), "(not a valid URL)");
    }
}
