//! `keyhole recorded stats`: the A/B of `--compose-share` counted, per repository and backend.
//! An arm's accepted rate is accepted ÷ (accepted + rejected), unknown outcomes left out, with
//! Wilson's 95% score interval; the difference keyhole − plugin has Newcombe's interval built
//! from the two (his method 10), which stays inside −1..1 and is sound for small counts.

use std::collections::BTreeMap;

use serde::Serialize;

use super::arms::{Arm, Outcome};
use super::record::Exchange;

/// The normal quantile of a two-sided 95% interval.
const Z: f64 = 1.959_963_984_540_054;

/// An interval of rates (0..1).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Interval {
    pub low: f64,
    pub high: f64,
}

/// Wilson's 95% score interval for `successes` of `n`; none without trials.
pub fn wilson(successes: u64, n: u64) -> Option<Interval> {
    if n == 0 {
        return None;
    }
    let (n, p) = (n as f64, successes as f64 / n as f64);
    let z2 = Z * Z;
    let centre = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let half = Z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / (1.0 + z2 / n);
    Some(Interval {
        low: (centre - half).max(0.0),
        high: (centre + half).min(1.0),
    })
}

/// Newcombe's 95% interval for the difference of two rates, `a` − `b`, each given as
/// (successes, trials); none where either has no trials.
pub fn difference(a: (u64, u64), b: (u64, u64)) -> Option<Interval> {
    let (wa, wb) = (wilson(a.0, a.1)?, wilson(b.0, b.1)?);
    let (pa, pb) = (a.0 as f64 / a.1 as f64, b.0 as f64 / b.1 as f64);
    let d = pa - pb;
    Some(Interval {
        low: d - ((pa - wa.low).powi(2) + (wb.high - pb).powi(2)).sqrt(),
        high: d + ((wa.high - pa).powi(2) + (pb - wb.low).powi(2)).sqrt(),
    })
}

/// One arm's counts.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ArmStats {
    pub arm: String,
    /// Requests in the arm.
    pub requests: u64,
    pub accepted: u64,
    pub rejected: u64,
    /// Unknown, or not judged yet.
    pub unknown: u64,
    /// Characters of the completions accepted that the person kept.
    pub accepted_chars: u64,
    /// accepted ÷ (accepted + rejected), and its interval; none while both are 0.
    pub rate: Option<f64>,
    pub interval: Option<Interval>,
}

impl ArmStats {
    fn decided(&self) -> (u64, u64) {
        (self.accepted, self.accepted + self.rejected)
    }
}

/// keyhole's rate − the plugin's, and its interval.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Difference {
    pub rate: f64,
    pub interval: Interval,
}

/// The A/B in one repository with one backend.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GroupStats {
    pub repository: String,
    /// The server (its URL, credentials masked), and the model the requests named, if any.
    pub backend: String,
    /// keyhole's arm, then the plugin's.
    pub arms: Vec<ArmStats>,
    pub difference: Option<Difference>,
}

/// The backend a request went to, as people read it.
fn backend(exchange: &Exchange) -> String {
    // llama.vim sends an empty model when none is configured.
    let model = exchange
        .sent
        .parameters
        .get("model")
        .and_then(|m| m.as_str());
    match model.filter(|m| !m.is_empty()) {
        Some(model) => format!("{} (model {model})", exchange.upstream),
        None => exchange.upstream.clone(),
    }
}

/// The A/B of the exchanges in an arm, per repository and backend, in order of both.
pub fn stats(exchanges: &[Exchange]) -> Vec<GroupStats> {
    let mut groups: BTreeMap<(String, String), BTreeMap<Arm, ArmStats>> = BTreeMap::new();
    for exchange in exchanges {
        let Some(composition) = &exchange.composition else {
            continue;
        };
        let Some(arm) = composition.arm else {
            continue;
        };
        let repository = composition.repo.clone().unwrap_or_default();
        let arms = groups.entry((repository, backend(exchange))).or_default();
        let counts = arms.entry(arm).or_default();
        counts.requests += 1;
        match exchange.judged.map(|j| (j.outcome, j.accepted_chars)) {
            Some((Outcome::Accepted, chars)) => {
                counts.accepted += 1;
                counts.accepted_chars += chars as u64;
            }
            Some((Outcome::Rejected, _)) => counts.rejected += 1,
            Some((Outcome::Unknown, _)) | None => counts.unknown += 1,
        }
    }
    groups
        .into_iter()
        .map(|((repository, backend), mut by_arm)| {
            let arms: Vec<ArmStats> = Arm::ALL
                .into_iter()
                .map(|arm| {
                    let mut counts = by_arm.remove(&arm).unwrap_or_default();
                    counts.arm = arm.name().to_string();
                    let (accepted, decided) = counts.decided();
                    counts.rate = (decided > 0).then(|| accepted as f64 / decided as f64);
                    counts.interval = wilson(accepted, decided);
                    counts
                })
                .collect();
            let difference = match (arms[0].rate, arms[1].rate) {
                (Some(keyhole), Some(plugin)) => difference(arms[0].decided(), arms[1].decided())
                    .map(|interval| Difference {
                        rate: keyhole - plugin,
                        interval,
                    }),
                _ => None,
            };
            GroupStats {
                repository,
                backend,
                arms,
                difference,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 5e-4
    }

    #[test]
    fn the_backend_is_the_server_and_the_model_named_if_any() {
        let with = |model: serde_json::Value| Exchange {
            upstream: "http://127.0.0.1:8080/".into(),
            sent: crate::proxy::Sent {
                parameters: [("model".to_string(), model)].into_iter().collect(),
                ..Default::default()
            },
            ..Exchange::default()
        };
        assert_eq!(
            backend(&with("qwen".into())),
            "http://127.0.0.1:8080/ (model qwen)"
        );
        assert_eq!(backend(&with("".into())), "http://127.0.0.1:8080/");
    }

    #[test]
    fn wilsons_interval_matches_published_values() {
        // Newcombe (1998), table I: 81 of 263 gives 0.2553 to 0.3662; 15 of 148, 0.0624 to
        // 0.1605; 0 of 20, 0 to 0.1611.
        for (s, n, low, high) in [
            (81, 263, 0.2553, 0.3662),
            (15, 148, 0.0624, 0.1605),
            (0, 20, 0.0, 0.1611),
        ] {
            let i = wilson(s, n).unwrap();
            assert!(close(i.low, low) && close(i.high, high), "{s}/{n}: {i:?}");
        }
        assert_eq!(wilson(0, 0), None);
    }

    #[test]
    fn newcombes_difference_matches_published_values() {
        // Newcombe (1998b), method 10: 56/70 − 48/80 gives 0.0524 to 0.3339; 9/10 − 3/10,
        // 0.1705 to 0.8090.
        for (a, b, low, high) in [
            ((56, 70), (48, 80), 0.0524, 0.3339),
            ((9, 10), (3, 10), 0.1705, 0.8090),
        ] {
            let i = difference(a, b).unwrap();
            assert!(
                close(i.low, low) && close(i.high, high),
                "{a:?} {b:?}: {i:?}"
            );
        }
        assert_eq!(difference((1, 2), (0, 0)), None);
    }
}
