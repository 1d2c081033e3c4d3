//! Attention of a generated token: each sequence's one new row of queries over every position
//! its cache holds, written by hand and split over the CPU pool.
//!
//! candle runs a product this small (one row against each key head's positions) and the
//! softmax after it on one thread, which after a 1,000-token prompt left a token's attention
//! on one core while its matrix products ran on all of them. Here each key head's positions
//! are cut into pieces of [`PIECE`] positions; a piece's work (scores, their exponentials,
//! the weighted values, for every query head the key head serves) is one job on the pool, and
//! the pieces are combined in order afterwards. The pieces do not depend on how many threads
//! run them, so the result is the same, to the bit, on any pool.

use rayon::prelude::*;

/// Positions in one piece of work: long enough that a job is worth handing over (a piece of
/// one key head is 64 KiB of keys and values for 64-wide heads), short enough that a
/// 1,000-token cache gives every thread several.
const PIECE: usize = 128;

/// The sizes of attention's heads.
#[derive(Clone, Copy, Debug)]
pub struct Heads {
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
}

/// One sequence's new row and what its cache holds.
pub struct Row<'a> {
    /// Its queries, rotated: `heads x head size`.
    pub queries: &'a [f32],
    /// The cache's keys and values, each `kv heads x capacity x head size`, of which the
    /// first `positions` of each key head are held (the new row's among them).
    pub keys: &'a [f32],
    pub values: &'a [f32],
    pub capacity: usize,
    pub positions: usize,
}

/// One piece's part of the softmax for each query head its key head serves: the largest
/// score, the sum of the exponentials of the scores less it, and the values weighted by them.
struct Partial {
    largest: Vec<f32>,
    sum: Vec<f32>,
    /// `group x head size`.
    weighted: Vec<f32>,
}

/// Which piece of work: a row, a key head, and its positions from `start` on.
#[derive(Clone, Copy)]
struct Piece {
    row: usize,
    kv_head: usize,
    start: usize,
}

/// Every row's attention, `rows x heads x head size`: softmax of each query head's scaled
/// scores against its key head's positions, times their values; the pieces run on the CPU
/// pool of the calling thread.
pub fn attend(rows: &[Row], heads: Heads) -> Vec<f32> {
    let pieces: Vec<Piece> = rows
        .iter()
        .enumerate()
        .flat_map(|(row, r)| {
            (0..heads.kv_heads).flat_map(move |kv_head| {
                (0..r.positions).step_by(PIECE).map(move |start| Piece {
                    row,
                    kv_head,
                    start,
                })
            })
        })
        .collect();
    let partials: Vec<Partial> = pieces
        .par_iter()
        .map(|piece| partial(&rows[piece.row], *piece, heads))
        .collect();
    combine(rows, &pieces, &partials, heads)
}

/// A piece's scores, exponentials and weighted values for every query head of its key head,
/// in 256-bit vectors where the processor has them (the same sums in the same order: the
/// same result to the bit).
fn partial(row: &Row, piece: Piece, heads: Heads) -> Partial {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the processor has AVX2.
        return unsafe { partial_avx2(row, piece, heads) };
    }
    partial_any(row, piece, heads)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn partial_avx2(row: &Row, piece: Piece, heads: Heads) -> Partial {
    partial_any(row, piece, heads)
}

#[inline(always)]
fn partial_any(row: &Row, piece: Piece, heads: Heads) -> Partial {
    let head_dim = heads.head_dim;
    let group = heads.heads / heads.kv_heads;
    let scale = (1.0 / (head_dim as f64).sqrt()) as f32;
    let end = (piece.start + PIECE).min(row.positions);
    let base = piece.kv_head * row.capacity * head_dim;
    let keys = &row.keys[base + piece.start * head_dim..base + end * head_dim];
    let values = &row.values[base + piece.start * head_dim..base + end * head_dim];
    let mut largest = vec![f32::NEG_INFINITY; group];
    let mut sum = vec![0.0; group];
    let mut weighted = vec![0.0; group * head_dim];
    let mut scores = vec![0.0f32; end - piece.start];
    for member in 0..group {
        let head = piece.kv_head * group + member;
        let query = &row.queries[head * head_dim..(head + 1) * head_dim];
        for (score, key) in scores.iter_mut().zip(keys.chunks_exact(head_dim)) {
            *score = dot(query, key) * scale;
        }
        let most = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let total = exponentials(&mut scores, most);
        let out = &mut weighted[member * head_dim..(member + 1) * head_dim];
        for (weight, value) in scores.iter().zip(values.chunks_exact(head_dim)) {
            for (o, v) in out.iter_mut().zip(value) {
                *o += weight * v;
            }
        }
        largest[member] = most;
        sum[member] = total;
    }
    Partial {
        largest,
        sum,
        weighted,
    }
}

/// The pieces' parts joined in order, for each row's query heads: the weighted values
/// rescaled to the largest score of all pieces, over the sum of all exponentials.
fn combine(rows: &[Row], pieces: &[Piece], partials: &[Partial], heads: Heads) -> Vec<f32> {
    let head_dim = heads.head_dim;
    let group = heads.heads / heads.kv_heads;
    let mut out = vec![0.0f32; rows.len() * heads.heads * head_dim];
    let mut at = 0;
    while at < pieces.len() {
        let first = pieces[at];
        let count = pieces[at..]
            .iter()
            .take_while(|p| p.row == first.row && p.kv_head == first.kv_head)
            .count();
        let parts = &partials[at..at + count];
        for member in 0..group {
            let head = first.kv_head * group + member;
            let start = (first.row * heads.heads + head) * head_dim;
            let mixed = &mut out[start..start + head_dim];
            let most = parts
                .iter()
                .map(|p| p.largest[member])
                .fold(f32::NEG_INFINITY, f32::max);
            let mut total = 0.0;
            for part in parts {
                let rescale = (part.largest[member] - most).exp();
                total += part.sum[member] * rescale;
                let weighted = &part.weighted[member * head_dim..(member + 1) * head_dim];
                for (m, w) in mixed.iter_mut().zip(weighted) {
                    *m += rescale * w;
                }
            }
            for m in mixed.iter_mut() {
                *m /= total;
            }
        }
        at += count;
    }
    out
}

/// Turns each score into e^(score - `most`) and returns their sum, eight lanes at a time.
#[inline(always)]
fn exponentials(scores: &mut [f32], most: f32) -> f32 {
    const LANES: usize = 8;
    let (blocks, rest) = scores.as_chunks_mut::<LANES>();
    let mut lanes = [0.0f32; LANES];
    for block in blocks {
        for (lane, score) in lanes.iter_mut().zip(block) {
            *score = exp_at_most_zero(*score - most);
            *lane += *score;
        }
    }
    let mut total: f32 = lanes.iter().sum();
    for score in rest {
        *score = exp_at_most_zero(*score - most);
        total += *score;
    }
    total
}

/// e^x for a score less the largest (x <= 0), as Cephes' `expf` computes it: x = n ln 2 + r
/// with n whole and |r| <= ln 2 / 2, e^r by its polynomial, 2^n written into the exponent's
/// bits. Plain arithmetic on one lane, so that a loop over eight of them compiles to vector
/// instructions where libm's `expf` is a call per score (4.8% of a generated token's samples
/// after 1,000 tokens); within a unit in the last place of the exact value, and the same on
/// every thread.
#[inline(always)]
fn exp_at_most_zero(x: f32) -> f32 {
    // Adding 1.5 x 2^23 rounds to the nearest whole number, which lands in the low bits.
    const ROUND: f32 = 12_582_912.0;
    // ln 2 in two parts, the first exact in few bits, so that n ln 2 loses nothing.
    const LN2_HIGH: f32 = 0.693_359_4;
    const LN2_LOW: f32 = -2.121_944_4e-4;
    // Below this e^x is no longer a normal float; it is nothing beside the largest's 1.
    let x = x.max(-87.0);
    let shifted = x * std::f32::consts::LOG2_E + ROUND;
    let n = shifted - ROUND;
    let r = x - n * LN2_HIGH - n * LN2_LOW;
    let p = 1.987_569_2e-4;
    let p = p * r + 1.398_199_9e-3;
    let p = p * r + 8.333_452e-3;
    let p = p * r + 4.166_579_6e-2;
    let p = p * r + 1.666_666_5e-1;
    let p = p * r + 0.5;
    let e_r = p * r * r + r + 1.0;
    // n + 127 in the exponent's bits is 2^n; n is the low bits of `shifted`.
    let n_bits = shifted.to_bits().wrapping_sub(ROUND.to_bits());
    e_r * f32::from_bits(n_bits.wrapping_add(127) << 23)
}

/// `a . b`, summed in eight lanes so that the compiler keeps them in vector registers.
#[inline(always)]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    const LANES: usize = 8;
    let (a_blocks, a_rest) = a.as_chunks::<LANES>();
    let (b_blocks, b_rest) = b.as_chunks::<LANES>();
    let mut lanes = [0.0f32; LANES];
    for (x, y) in a_blocks.iter().zip(b_blocks) {
        for ((lane, x), y) in lanes.iter_mut().zip(x).zip(y) {
            *lane += x * y;
        }
    }
    let rest: f32 = a_rest.iter().zip(b_rest).map(|(x, y)| x * y).sum();
    lanes.iter().sum::<f32>() + rest
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use super::*;

    const HEADS: Heads = Heads {
        heads: 6,
        kv_heads: 2,
        head_dim: 20,
    };

    /// A row's random queries and cache.
    struct Held {
        queries: Vec<f32>,
        keys: Vec<f32>,
        values: Vec<f32>,
        positions: usize,
    }

    /// Two rows over caches of `positions` and 37 positions, with room for 2,100.
    fn caches(positions: usize) -> Vec<Held> {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let capacity = 2100;
        let mut random = |count: usize, scale: f32| -> Vec<f32> {
            (0..count)
                .map(|_| scale * (rng.random::<f32>() * 2.0 - 1.0))
                .collect()
        };
        let size = HEADS.kv_heads * capacity * HEADS.head_dim;
        [positions, 37]
            .into_iter()
            .map(|positions| Held {
                queries: random(HEADS.heads * HEADS.head_dim, 3.0),
                keys: random(size, 1.0),
                values: random(size, 1.0),
                positions,
            })
            .collect()
    }

    fn rows(caches: &[Held]) -> Vec<Row<'_>> {
        caches
            .iter()
            .map(|held| Row {
                queries: &held.queries,
                keys: &held.keys,
                values: &held.values,
                capacity: 2100,
                positions: held.positions,
            })
            .collect()
    }

    /// Attention as written in the textbook, one query head at a time, in f64.
    fn textbook(row: &Row) -> Vec<f32> {
        let Heads {
            heads,
            kv_heads,
            head_dim,
        } = HEADS;
        let group = heads / kv_heads;
        let mut out = Vec::new();
        for head in 0..heads {
            let base = (head / group) * row.capacity * head_dim;
            let query = &row.queries[head * head_dim..(head + 1) * head_dim];
            let scores: Vec<f64> = (0..row.positions)
                .map(|p| {
                    let key = &row.keys[base + p * head_dim..base + (p + 1) * head_dim];
                    let dot: f64 = query.iter().zip(key).map(|(q, k)| (q * k) as f64).sum();
                    dot / (head_dim as f64).sqrt()
                })
                .collect();
            let most = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let weights: Vec<f64> = scores.iter().map(|s| (s - most).exp()).collect();
            let total: f64 = weights.iter().sum();
            for d in 0..head_dim {
                let mixed: f64 = (0..row.positions)
                    .map(|p| weights[p] * row.values[base + p * head_dim + d] as f64)
                    .sum();
                out.push((mixed / total) as f32);
            }
        }
        out
    }

    fn on_threads(threads: usize, rows: &[Row]) -> Vec<f32> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| attend(rows, HEADS))
    }

    #[test]
    fn attention_over_a_long_cache_is_the_textbook_softmax_of_the_scores_times_the_values() {
        for positions in [1, PIECE - 1, PIECE, 2000] {
            let caches = caches(positions);
            let rows = rows(&caches);
            let got = attend(&rows, HEADS);
            let size = HEADS.heads * HEADS.head_dim;
            for (index, row) in rows.iter().enumerate() {
                let expected = textbook(row);
                let got = &got[index * size..(index + 1) * size];
                for (g, e) in got.iter().zip(&expected) {
                    assert!(
                        (g - e).abs() < 1e-5,
                        "{positions} positions: {g} against {e}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_exponential_of_a_score_less_the_largest_is_within_a_unit_in_the_last_place() {
        let mut x = 0.0f32;
        while x > -87.0 {
            let (got, exact) = (exp_at_most_zero(x) as f64, (x as f64).exp());
            let nearest = exact as f32;
            let unit = (f32::from_bits(nearest.to_bits() + 1) - nearest) as f64;
            assert!((got - exact).abs() <= unit, "e^{x}: {got} against {exact}");
            x -= 0.000_731;
        }
        assert_eq!(exp_at_most_zero(0.0), 1.0);
        assert!(exp_at_most_zero(f32::NEG_INFINITY) < 1e-37);
    }

    #[test]
    fn attention_split_over_threads_equals_it_on_one_thread_to_the_bit() {
        let caches = caches(2000);
        let rows = rows(&caches);
        let alone = on_threads(1, &rows);
        for threads in [2, 3, 8] {
            assert_eq!(on_threads(threads, &rows), alone, "{threads} threads");
        }
    }
}
