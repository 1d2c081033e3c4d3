//! How close a completion is to the truth: RLPG's exact match and RepoCoder's edit similarity.

use serde::Serialize;

/// Scores of one completion against its target.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Scores {
    /// RLPG's success: equal after stripping trailing whitespace.
    pub exact_match: bool,
    /// Character-level Levenshtein distance.
    pub edit_distance: usize,
    /// 1 − distance / longer length (RepoCoder's ES), 1.0 for two empty strings.
    pub edit_similarity: f64,
}

pub fn score(prediction: &str, target: &str) -> Scores {
    let (p, t) = (prediction.trim_end(), target.trim_end());
    Scores {
        exact_match: p == t,
        edit_distance: strsim::levenshtein(p, t),
        edit_similarity: strsim::normalized_levenshtein(p, t),
    }
}

#[cfg(test)]
mod tests {
    use super::score;

    #[test]
    fn trailing_whitespace_does_not_matter_and_similarity_is_relative() {
        assert!(score("foo(x);  ", "foo(x);").exact_match);
        assert!(!score(" foo(x);", "foo(x);").exact_match);
        let s = score("abcd", "abxd");
        assert_eq!((s.edit_distance, s.edit_similarity), (1, 0.75));
        assert_eq!(score("", "").edit_similarity, 1.0);
    }
}
