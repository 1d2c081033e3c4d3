//! report.md: the report's tables in the paper's layout, with links to the plots.

use std::fmt::Write;

use super::svg::{CONTEXT_TYPES, PLOT_DIR, SOURCES, SUCCESS_AT_K};
use super::{Curve, MAX_K, Report, Tally};

pub(super) fn render(report: &Report) -> String {
    [
        summary(report),
        table2(report),
        methods(report),
        truncation(report),
        success_at_k(report),
        tallies(
            "Prompt sources (Figure 2, bottom)",
            SOURCES,
            &report.sources,
        ),
        tallies(
            "Context types (Figure 3)",
            CONTEXT_TYPES,
            &report.context_types,
        ),
        proposals(report),
        repositories(report),
    ]
    .join("\n")
}

fn summary(report: &Report) -> String {
    let s = &report.summary;
    let mut out = format!(
        "# keyhole evaluation report\n\n\
         {} holes from {} label rows; training repositories: {}; test repositories: {}.\n\
         Holes missing rows: {}. \
         Random seed: {}. Rates are percentages; \"Rel. ↑\" is the relative improvement over \
         the default context.\n",
        s.holes,
        s.rows,
        names(&s.train),
        names(&s.test),
        s.incomplete_holes,
        s.seed
    );
    for note in &report.notes {
        let _ = writeln!(out, "\n> {note}");
    }
    out
}

fn names(list: &[String]) -> String {
    if list.is_empty() {
        "none".into()
    } else {
        list.join(", ")
    }
}

fn table2(report: &Report) -> String {
    let rows = report.splits.iter().map(|s| {
        vec![
            s.split.clone(),
            s.repositories.to_string(),
            s.holes.to_string(),
            pct(s.default.hole_wise),
            pct(s.oracle.hole_wise),
            rel(s.gain.hole_wise),
            pct(s.default.repo_wise),
            pct(s.oracle.repo_wise),
            rel(s.gain.repo_wise),
        ]
    });
    let head = [
        "Split",
        "Repos",
        "Holes",
        "Default (hole)",
        "Oracle (hole)",
        "Rel. ↑ (hole)",
        "Default (repo)",
        "Oracle (repo)",
        "Rel. ↑ (repo)",
    ];
    section("Default context vs oracle (Table 2)", &table(&head, rows))
}

fn methods(report: &Report) -> String {
    let f = &report.fixed_proposal;
    let intro = format!(
        "On the {}. Fixed proposal: #{} `{}`, chosen on {} holes ({} split), where it succeeds \
         on {}% (with the default context where it is not applicable).\n\n",
        report.summary.method_scope,
        f.id,
        f.label,
        f.holes,
        f.chosen_on,
        pct(f.success)
    );
    let rows = report.methods.iter().map(|m| {
        vec![
            m.name.clone(),
            pct(m.success.hole_wise),
            rel(m.gain.hole_wise),
            pct(m.success.repo_wise),
            rel(m.gain.repo_wise),
            pct(m.edit_similarity),
        ]
    });
    let head = [
        "Method",
        "Success (hole)",
        "Rel. ↑ (hole)",
        "Success (repo)",
        "Rel. ↑ (repo)",
        "Edit similarity (hole)",
    ];
    section("Methods (Tables 3 and 8)", &(intro + &table(&head, rows)))
}

fn truncation(report: &Report) -> String {
    let rows = report.methods.iter().map(|m| {
        let t = &m.truncation;
        vec![
            m.name.clone(),
            pct(t.default),
            pct(t.proposal),
            pct(t.either),
            pct(t.both),
            pct(m.success.hole_wise),
        ]
    });
    let head = [
        "Method",
        "Default context",
        "Proposal context",
        "Either",
        "Both",
        "Success",
    ];
    let intro = "Percent of holes whose chosen prompt had its contexts truncated.\n\n";
    section(
        "Truncation (Table 12)",
        &(intro.to_string() + &table(&head, rows)),
    )
}

fn success_at_k(report: &Report) -> String {
    let curve_table = |values: fn(&Curve) -> &[f64]| {
        let mut head = vec!["k"];
        head.extend(report.success_at_k.iter().map(|c| c.method.as_str()));
        let rows = (0..MAX_K).map(|k| {
            let mut row = vec![(k + 1).to_string()];
            row.extend(report.success_at_k.iter().map(|c| pct(values(c)[k])));
            row
        });
        table(&head, rows)
    };
    let body = format!(
        "{}\n\nHole-wise:\n\n{}\nRepo-wise:\n\n{}",
        image(SUCCESS_AT_K),
        curve_table(|c| &c.hole_wise),
        curve_table(|c| &c.repo_wise)
    );
    section("success@k (Figure 2, top)", &body)
}

fn tallies(title: &str, plot: &str, tallies: &[Tally]) -> String {
    let rows = tallies
        .iter()
        .map(|t| vec![t.name.clone(), t.applicable.to_string(), pct(t.success)]);
    let head = [
        "Name",
        "Applicable (hole × proposal)",
        "Success when applicable",
    ];
    section(title, &format!("{}\n\n{}", image(plot), table(&head, rows)))
}

fn proposals(report: &Report) -> String {
    let rows = report.proposals.iter().map(|p| {
        vec![
            p.id.to_string(),
            format!("`{}`", p.label),
            p.applicable.to_string(),
            pct(p.applicability),
            pct(p.success),
        ]
    });
    let head = [
        "Id",
        "Proposal",
        "Applicable holes",
        "Applicability",
        "Success when applicable",
    ];
    section("Proposals (all holes)", &table(&head, rows))
}

fn repositories(report: &Report) -> String {
    let mut head = vec!["Repository", "Split", "Holes"];
    head.extend(report.methods.iter().map(|m| m.name.as_str()));
    let rows = report.repositories.iter().map(|r| {
        let mut row = vec![r.repository.clone(), r.split.clone(), r.holes.to_string()];
        row.extend(r.success.iter().map(|&s| pct(s)));
        row
    });
    section("Repositories (Tables 13–15)", &table(&head, rows))
}

fn section(title: &str, body: &str) -> String {
    format!("## {title}\n\n{body}")
}

fn image(name: &str) -> String {
    format!("![{name}]({PLOT_DIR}/{name})")
}

fn table(head: &[&str], rows: impl Iterator<Item = Vec<String>>) -> String {
    let line = |cells: &[String]| format!("| {} |\n", cells.join(" | "));
    let head: Vec<String> = head.iter().map(|h| h.to_string()).collect();
    let rule: Vec<String> = head.iter().map(|_| "---".to_string()).collect();
    let mut out = line(&head) + &line(&rule);
    for row in rows {
        out += &line(&row);
    }
    out
}

fn pct(x: f64) -> String {
    format!("{x:.2}")
}

fn rel(gain: Option<f64>) -> String {
    gain.map_or_else(|| "–".into(), |g| format!("{g:+.2}"))
}

#[cfg(test)]
mod tests {
    use super::{rel, table};

    #[test]
    fn tables_have_a_rule_and_gains_a_sign() {
        let t = table(&["a", "b"], [vec!["1".into(), "2".into()]].into_iter());
        assert_eq!(t, "| a | b |\n| --- | --- |\n| 1 | 2 |\n");
        assert_eq!(
            (rel(Some(12.0)), rel(Some(-1.5)), rel(None)),
            ("+12.00".into(), "-1.50".into(), "–".into())
        );
    }
}
