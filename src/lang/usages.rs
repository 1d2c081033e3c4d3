//! Names with the lines each is used on ([`super::FileFacts::name_usages`],
//! [`super::FileFacts::dotted_usages`]), kept as one text of names and one array of lines
//! rather than a string and a vector per name: a warm open decodes every file's usages from the
//! cache (about 100,000 names on guava), and an allocation per name was most of that cost.

use serde::{Deserialize, Serialize};

/// Names, sorted, each with the 0-based lines it is used on (ascending, no repeats). Read from a
/// cache only once its lists are checked (ends in order and in bounds, on character boundaries,
/// names sorted), so that a damaged cache cannot cut a name apart.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Lists")]
pub struct Usages(Lists);

#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Lists {
    /// Every name, one after another.
    names: String,
    /// Where each name ends in `names`.
    #[serde(with = "super::packed::words")]
    name_ends: Vec<u32>,
    /// Every name's lines, one name's after another.
    #[serde(with = "super::packed::words")]
    lines: Vec<u32>,
    /// Where each name's lines end in `lines`.
    #[serde(with = "super::packed::words")]
    line_ends: Vec<u32>,
}

impl TryFrom<Lists> for Usages {
    type Error = &'static str;

    fn try_from(lists: Lists) -> Result<Usages, Self::Error> {
        let ends_fit = |ends: &[u32], len: usize| {
            ends.is_sorted() && ends.last().is_none_or(|&end| end as usize == len)
        };
        let fits = lists.name_ends.len() == lists.line_ends.len()
            && ends_fit(&lists.name_ends, lists.names.len())
            && ends_fit(&lists.line_ends, lists.lines.len())
            && (lists.name_ends.iter()).all(|&end| lists.names.is_char_boundary(end as usize));
        let usages = Usages(lists);
        if fits && (1..usages.len()).all(|i| usages.name(i - 1) < usages.name(i)) {
            Ok(usages)
        } else {
            Err("name usages out of order")
        }
    }
}

impl Usages {
    /// Usages from names with their lines, in any order (each name once).
    pub fn of<N: AsRef<str>>(usages: impl IntoIterator<Item = (N, Vec<u32>)>) -> Usages {
        let mut usages: Vec<(N, Vec<u32>)> = usages.into_iter().collect();
        usages.sort_unstable_by(|a, b| a.0.as_ref().cmp(b.0.as_ref()));
        let mut all = Usages::default();
        for (name, lines) in usages {
            all.0.names.push_str(name.as_ref());
            all.0.name_ends.push(all.0.names.len() as u32);
            all.0.lines.extend(lines);
            all.0.line_ends.push(all.0.lines.len() as u32);
        }
        all
    }

    /// How many names.
    pub fn len(&self) -> usize {
        self.0.name_ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.name_ends.is_empty()
    }

    fn name(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.0.name_ends[i - 1] };
        &self.0.names[start as usize..self.0.name_ends[i] as usize]
    }

    fn lines_at(&self, i: usize) -> &[u32] {
        let start = if i == 0 { 0 } else { self.0.line_ends[i - 1] };
        &self.0.lines[start as usize..self.0.line_ends[i] as usize]
    }

    /// The lines `name` is used on (none when it is not).
    pub fn lines_of(&self, name: &str) -> &[u32] {
        let at = self.first_not_before(name);
        if at < self.len() && self.name(at) == name {
            self.lines_at(at)
        } else {
            &[]
        }
    }

    /// Every name with its lines, in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[u32])> {
        (0..self.len()).map(|i| (self.name(i), self.lines_at(i)))
    }

    /// The names from `least` on (those not sorting before it), with their lines, in name
    /// order.
    pub fn starting_at<'u>(
        &'u self,
        least: &str,
    ) -> impl Iterator<Item = (&'u str, &'u [u32])> + use<'u> {
        (self.first_not_before(least)..self.len()).map(|i| (self.name(i), self.lines_at(i)))
    }

    /// Every line of every name.
    pub fn all_lines(&self) -> &[u32] {
        &self.0.lines
    }

    /// The index of the first name that does not sort before `name`.
    fn first_not_before(&self, name: &str) -> usize {
        let (mut low, mut high) = (0, self.len());
        while low < high {
            let mid = low + (high - low) / 2;
            if self.name(mid) < name {
                low = mid + 1;
            } else {
                high = mid;
            }
        }
        low
    }
}

impl std::fmt::Debug for Usages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_found_with_their_own_lines_whatever_order_they_came_in() {
        let usages = Usages::of([("b", vec![2, 5]), ("a", vec![1]), ("ab", vec![3, 4])]);
        assert_eq!(usages.lines_of("a"), &[1]);
        assert_eq!(usages.lines_of("ab"), &[3, 4]);
        assert_eq!(usages.lines_of("b"), &[2, 5]);
        assert_eq!(usages.lines_of("c"), &[] as &[u32]);
        assert_eq!(usages.lines_of(""), &[] as &[u32]);
        let names: Vec<&str> = usages.iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["a", "ab", "b"]);
        let from_ab: Vec<&str> = usages.starting_at("aa").map(|(n, _)| n).collect();
        assert_eq!(from_ab, ["ab", "b"]);
    }

    #[test]
    fn a_cache_whose_ends_do_not_fit_is_refused_not_used() {
        let good = Usages::of([("a", vec![1]), ("é", vec![2])]);
        let bytes = postcard::to_allocvec(&good).unwrap();
        assert_eq!(postcard::from_bytes::<Usages>(&bytes).unwrap(), good);

        let refused = |names: &str, name_ends: Vec<u32>, lines: Vec<u32>, line_ends: Vec<u32>| {
            let names = names.to_string();
            let parts = Usages(Lists {
                names,
                name_ends,
                lines,
                line_ends,
            });
            let bytes = postcard::to_allocvec(&parts).unwrap();
            postcard::from_bytes::<Usages>(&bytes).is_err()
        };
        assert!(!refused("aé", vec![1, 3], vec![1, 2], vec![1, 2]));
        // "é" cut in half, an end past the lines, names out of order, counts that differ.
        assert!(refused("aé", vec![1, 2], vec![1, 2], vec![1, 2]));
        assert!(refused("aé", vec![1, 3], vec![1, 2], vec![1, 3]));
        assert!(refused("ba", vec![1, 2], vec![1, 2], vec![1, 2]));
        assert!(refused("ab", vec![1, 2], vec![1, 2], vec![2]));
    }
}
