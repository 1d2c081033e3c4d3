//! `keyhole tune --recorded-outcomes`: the completions of keyhole's arm that a person accepted
//! or rejected through `keyhole proxy --compose` (`crate::proxy::ab`) as extra label rows, one
//! per completion: the hole as the record names it (`FILE:LINE:COL`, in the repository as it
//! is when tune runs), the candidate whose context was sent applicable and successful where
//! the completion was accepted, failed where rejected. Every other candidate of that hole has
//! no row, so RLPG's masked loss learns that one candidate's output alone. Only records of the
//! backend tuned for (its `base_url`) and of a repository tuned on count; holes in held-out
//! files are left out, so the comparison on them stays the labelled holes' alone.

use std::path::PathBuf;

use crate::context::fidelity::Fidelity;
use crate::label::{LabelRow, hole_id};
use crate::model::config::BackendConfig;
use crate::model::secret;
use crate::proxy::{self, Exchange, ab};
use crate::rank::classifier::train::Holdout;

/// The label rows the record store's outcomes give, and a line for each outcome left out.
pub(super) fn outcome_rows(
    dirs: &crate::dirs::Dirs,
    backend: &BackendConfig,
    repos: &[(String, PathBuf)],
    holdout: &Holdout,
) -> std::io::Result<(Vec<LabelRow>, Vec<String>)> {
    let Some(dir) = proxy::log_dir(dirs) else {
        return Ok((Vec::new(), Vec::new()));
    };
    let (exchanges, _) = proxy::read_log(&dir)?;
    let server = backend
        .base_url
        .as_deref()
        .map(|url| secret::shown_url(url).trim_end_matches('/').to_string());
    let mut rows = Vec::new();
    let mut skipped = Vec::new();
    for exchange in &exchanges {
        let Some((row, repository)) = outcome_row(exchange, backend, repos) else {
            continue;
        };
        if server.as_deref() != Some(exchange.upstream.trim_end_matches('/')) {
            continue;
        }
        if holdout.holds(&repository, &row.file) {
            skipped.push(format!(
                "recorded request {}: its hole is in a held-out file",
                exchange.id
            ));
            continue;
        }
        rows.push(row);
    }
    Ok((rows, skipped))
}

/// The row `exchange` gives, where it is a decided completion of keyhole's arm in one of
/// `repos`, and that repository's name.
fn outcome_row(
    exchange: &Exchange,
    backend: &BackendConfig,
    repos: &[(String, PathBuf)],
) -> Option<(LabelRow, String)> {
    let composition = exchange.composition.as_ref()?;
    if composition.arm != Some(ab::Arm::Keyhole) {
        return None;
    }
    let success = match exchange.judged?.outcome {
        ab::Outcome::Accepted => true,
        ab::Outcome::Rejected => false,
        ab::Outcome::Unknown => return None,
    };
    let recorded_repo = composition.repo.as_deref()?;
    let (repository, _) = repos
        .iter()
        .find(|(_, path)| path.display().to_string() == recorded_repo)?;
    let mut place = composition.hole.as_deref()?.rsplitn(3, ':');
    let column: usize = place.next()?.parse().ok()?;
    let line: usize = place.next()?.parse().ok()?;
    let file = place.next()?.to_string();
    let proposal_id = crate::candidate::CandidateId::new(usize::from(composition.candidate?))?;
    let row = LabelRow {
        // Each completion its own hole: two at one place are two examples.
        hole_id: format!(
            "{}#recorded-{}",
            hole_id(repository, &file, line, column),
            exchange.id
        ),
        repository: repository.clone(),
        file,
        line,
        column,
        proposal_id,
        fidelity: Fidelity::Paper,
        applicable: true,
        success,
        edit_similarity: if success { 1.0 } else { 0.0 },
        edit_distance: 0,
        prediction: exchange.answered.text.clone(),
        target: String::new(),
        proposal_tokens: composition.context_tokens.unwrap_or(0),
        default_tokens: 0,
        proposal_truncated: false,
        default_truncated: false,
        backend: backend.name.clone(),
        error: None,
        bm25: None,
        retrieval_score: None,
        retrieval_jaccard: None,
        why_not: None,
        model_room: None,
    };
    Some((row, repository.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::{Composition, RecordStore};

    /// A completion of `arm` at `hole` of candidate 7, recorded to `upstream` from `repo`.
    fn exchange(arm: ab::Arm, repo: &str, hole: &str, upstream: &str) -> Exchange {
        Exchange {
            upstream: upstream.into(),
            answered: crate::proxy::Answered {
                text: "total();".into(),
                ..Default::default()
            },
            composition: Some(Composition {
                arm: Some(arm),
                candidate: Some(7),
                hole: Some(hole.into()),
                context_tokens: Some(40),
                repo: Some(repo.into()),
                ..Composition::default()
            }),
            ..Exchange::default()
        }
    }

    #[test]
    fn accepted_and_rejected_completions_of_keyholes_arm_become_one_row_each() {
        let root = tempfile::tempdir().unwrap();
        let dirs = crate::dirs::Dirs::under(root.path());
        let store = RecordStore::open(&proxy::log_dir(&dirs).unwrap(), 1 << 20).unwrap();
        let backend: BackendConfig = serde_json::from_value(serde_json::json!({
            "name": "coder", "kind": "llamacpp", "base_url": "http://127.0.0.1:8080"
        }))
        .unwrap();
        let (repo, server) = ("/home/me/shop", "http://127.0.0.1:8080/");
        let judged = |outcome| ab::Judged {
            outcome,
            accepted_chars: 0,
        };
        let recorded = [
            (
                ab::Arm::Keyhole,
                repo,
                "src/A.java:3:9",
                server,
                ab::Outcome::Accepted,
            ),
            (
                ab::Arm::Keyhole,
                repo,
                "src/A.java:5:9",
                server,
                ab::Outcome::Rejected,
            ),
            (
                ab::Arm::Keyhole,
                repo,
                "src/A.java:7:9",
                server,
                ab::Outcome::Unknown,
            ),
            (
                ab::Arm::Plugin,
                repo,
                "src/A.java:9:9",
                server,
                ab::Outcome::Accepted,
            ),
            (
                ab::Arm::Keyhole,
                "/elsewhere",
                "src/A.java:3:9",
                server,
                ab::Outcome::Accepted,
            ),
            (
                ab::Arm::Keyhole,
                repo,
                "src/A.java:3:9",
                "http://other:1/",
                ab::Outcome::Accepted,
            ),
            (
                ab::Arm::Keyhole,
                repo,
                "src/Held.java:3:9",
                server,
                ab::Outcome::Accepted,
            ),
        ];
        for (arm, repo, hole, upstream, outcome) in recorded {
            let id = store.append(&exchange(arm, repo, hole, upstream)).unwrap();
            store.set_judged(id, judged(outcome)).unwrap();
        }
        let repos = [("shop".to_string(), PathBuf::from(repo))];
        let holdout = Holdout::Files([("shop".to_string(), "src/Held.java".to_string())].into());
        let (rows, skipped) = outcome_rows(&dirs, &backend, &repos, &holdout).unwrap();
        let read: Vec<(&str, usize, bool, u16)> = rows
            .iter()
            .map(|r| {
                (
                    r.file.as_str(),
                    r.line,
                    r.success,
                    r.proposal_id.index() as u16,
                )
            })
            .collect();
        assert_eq!(
            read,
            [("src/A.java", 3, true, 7), ("src/A.java", 5, false, 7)]
        );
        assert!(rows.iter().all(|r| r.applicable && r.repository == "shop"));
        assert_eq!(rows[0].hole_id, "shop/src/A.java:3:9#recorded-1");
        assert_eq!(skipped.len(), 1, "{skipped:?}");
    }
}
