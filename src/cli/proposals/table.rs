//! The text table of `keyhole proposals`.

use anyhow::Result;

use super::ProposalsOut;
use crate::cli::hole::{Opened, cut_name, file_name, summarize};
use keyhole::candidate::CandidateId;
use keyhole::escape;
use keyhole::rank::online;

/// The table: the hole, RLPG's candidates in rank order, then the retrieved ones.
pub(super) fn print(opened: &Opened, out: &ProposalsOut) -> Result<()> {
    opened.print_header()?;
    let ranker = out.ranks_with.as_deref().unwrap_or(out.ranker.name());
    outln!("ranker      {ranker}");
    if let Some(counts) = &out.online_counts {
        let picks: u64 = counts.values().map(|n| n.picks).sum();
        outln!("            {picks} picks; {}", online::how_it_orders());
        outln!("            score: picked/shown where shown");
    }
    outln!();
    outln!(
        "{:>4} {:>6}  {:>3}  {:<23} {:<4} {:<4} {:>6} {:>6}  {:<5}  files used or why not",
        "rank",
        "score",
        "id",
        "source",
        "type",
        "app",
        "tokens",
        "alloc",
        "cut"
    );
    let shown = |rank: Option<usize>, score: Option<f64>| {
        (
            rank.map_or_else(|| "-".into(), |r| r.to_string()),
            score.map_or_else(|| "-".into(), |s| format!("{s:.3}")),
        )
    };
    // Ranked candidates best first, then the proposals the ranker left out, in id order (ids
    // as the profile numbers them; the proposals are listed in that order).
    let unranked = out
        .proposals
        .iter()
        .filter(|p| p.rank.is_none())
        .map(|p| p.id);
    for id in out.ranking.iter().copied().chain(unranked) {
        // (rank, score, source, type, applicable, tokens, allocated, cut, files)
        let columns = if id == CandidateId::DEFAULT.index() {
            let d = &out.default;
            let file = file_name(out.hole.file).to_string();
            (
                d.rank,
                d.score,
                "default",
                "-",
                true,
                d.tokens,
                d.allocated,
                d.cut,
                file,
            )
        } else {
            let p = &out.proposals[id];
            let files: Vec<&str> = p.files.iter().map(|f| file_name(f)).collect();
            let (source, kind) = (p.source.name(), p.context_type.abbreviation());
            let files = p.why_not.clone().unwrap_or_else(|| summarize(&files, 3));
            (
                p.rank,
                p.score,
                source,
                kind,
                p.applicable,
                p.tokens,
                p.allocated,
                p.cut,
                files,
            )
        };
        let (rank, score, source, kind, applicable, tokens, allocated, cut, files) = columns;
        let (rank, mut score) = shown(rank, score);
        // The online ranker's evidence, as counts: a rate after one pick would overstate it.
        if let Some(n) = out.online_counts.as_ref().and_then(|c| c.get(&id)) {
            score = format!("{}/{}", n.picks, n.shown);
        }
        let applicable = if applicable { "yes" } else { "no" };
        let cut = cut_name(cut);
        // File names and a language server's reasons come from outside: escaped, or a line
        // break in one would split the row.
        let files = escape::controls(&files);
        outln!(
            "{rank:>4} {score:>6}  {id:>3}  {source:<23} {kind:<4} {applicable:<4} {tokens:>6} {allocated:>6}  {cut:<5}  {files}"
        );
    }
    let applicable = out.proposals.iter().filter(|p| p.applicable).count();
    outln!();
    outln!(
        "{applicable} of {} proposals applicable; `keyhole prompt REPO POSITION --id ID` shows one.",
        CandidateId::PROPOSALS
    );
    outln!();
    outln!(
        "{:>3}  {:<23} {:<4} {:>6} {:>6}  {:<5}  {:>5}  files used (best first) or why not",
        "id",
        "retrieved",
        "app",
        "tokens",
        "alloc",
        "cut",
        "score"
    );
    for r in &out.retrieved {
        let files: Vec<&str> = r.files.iter().rev().map(|f| file_name(f)).collect();
        outln!(
            "{:>3}  {:<23} {:<4} {:>6} {:>6}  {:<5}  {:>5}  {}",
            r.id,
            r.label,
            if r.applicable { "yes" } else { "no" },
            r.tokens,
            r.allocated,
            cut_name(r.cut),
            r.score.map_or_else(|| "-".into(), |s| format!("{s:.3}")),
            escape::controls(&{
                let said = r
                    .why_not
                    .map_or_else(|| summarize(&files, 3), str::to_string);
                // A typed hole names the reading that built it.
                match r.reader {
                    Some(reader) => format!("{reader}: {said}"),
                    None => said,
                }
            }),
        );
    }
    if let Some(id) = out.procc_pick {
        outln!("ProCC (LinUCB) picks {id} {}.", id.label());
    }
    Ok(())
}
